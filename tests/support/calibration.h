/* Test support: a machine calibration (rules/calibrate.h) that does not
 * depend on the machine. Diagnosing a trace reads this machine's compute
 * peaks and memory bandwidth from the calibration cache, measuring them
 * (seconds of matmuls and triads, their figures as loaded as the machine
 * is) when the cache has none. A test that points XDG_CACHE_HOME at its
 * scratch folder and writes this file first gets the same roofline on
 * every machine and in no time, through the library and the CLI alike
 * (a child process inherits the environment).
 *
 * As everywhere in tests/support, no Criterion: false after printing why. */
#ifndef CP_TEST_CALIBRATION_H
#define CP_TEST_CALIBRATION_H

#include <stdbool.h>

/* The fixed figures (fp32 FLOP/s on all cores and on one thread; bf16
 * the same times four where the machine has native bf16, else 0 as a
 * real calibration has them; triad bytes/s). */
#define CP_T_CAL_PEAK_F32    1e11
#define CP_T_CAL_PEAK_F32_1T 5e10
#define CP_T_CAL_MEM_BW      2e10

/* Write this machine's calibration cache file, holding the fixed figures,
 * into the default cache folder ($XDG_CACHE_HOME/cannprof: set
 * XDG_CACHE_HOME first), creating the folder. */
bool cp_t_fixed_calibration(void);

/* A suite fixture: cp_t_scratch_setup, XDG_CACHE_HOME pointed at
 * <scratch>/cache (so the probe's floor file goes there too, never to the
 * user's cache) and the fixed calibration written into it. As
 * cp_t_scratch_setup, it aborts when it cannot (a fixture cannot fail a
 * test otherwise). */
void cp_t_scratch_calibrated_setup(void);

#endif
