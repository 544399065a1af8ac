/* Test support: replaying what a machine measured. The interference probe
 * of a replayed machine (cp_t_machine, for policy.probe_fn of
 * runner/measure.h), and a trace whose kernel times are injected. The
 * diagnosis
 * reads which kernels take the time, and on a real run that is whatever
 * this machine measured. A replayed trace keeps what the converter and the
 * runtime really made of a model (its kernel table with every kernel's
 * tensors, origins and estimates, its conversion config, batch and memory,
 * from a one-iteration bench of the .om) and replaces what was measured:
 * the host it describes is fixed, and each kernel takes the time a fixed
 * timing model gives it. Rules, features and suggestions then see the
 * same trace on every machine.
 *
 * As everywhere in tests/support, no Criterion: NULL after printing why. */
#ifndef CP_TEST_REPLAY_H
#define CP_TEST_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A replayed machine: its interference probe reads `busy` ns after the
 * rounds below `busy_until` (a neighbour on the core), `quiet` after the
 * others. */
struct cp_t_machine {
    uint64_t quiet, busy;
    size_t busy_until;
};

/* What the probe of machine ctx (a struct cp_t_machine) reads after
 * round `round`: a policy.probe_fn. */
uint64_t cp_t_machine_probe(void *ctx, size_t round);

/* The host a replayed trace describes: 2 cores, AVX2 (and AVX-512 with
 * bf16 dot products when asked). */
#define CP_T_REPLAY_CORES    2
#define CP_T_REPLAY_ISA      "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma f16c"
#define CP_T_REPLAY_ISA_BF16 CP_T_REPLAY_ISA " avx512f avx512bw avx512_bf16"

/* Iterations of a replayed run. */
#define CP_T_REPLAY_ITERATIONS 20

/* The timing model: one run of the kernel of converted node `node` (op
 * type `op`) takes `slow` ns when `planted` says the planted inefficiency
 * is in it, else `fast`; the kernels cover `device_util` (0 < x <= 1) of
 * each iteration, and the rest is the runtime's dispatch, in equal gaps
 * before each kernel, all inside one "execute" range per iteration. */
struct cp_t_timing {
    bool (*planted)(const char *node, const char *op);
    uint64_t slow, fast;
    double device_util;
};

/* Write the replayed trace `db` of model file `om` run on `threads`
 * threads on the fixed host (bf16 units when `bf16_host`), with kernel
 * times from `t`. The kernel table comes from `cannprof bench OM -n 1 -w
 * 0 --no-probe --threads T --trace <db>-table.db`. Returns `db` (a copy,
 * caller frees) or NULL. */
char *cp_t_replayed_trace(const char *om, const char *db, int threads, bool bf16_host,
                          const struct cp_t_timing *t);

#endif
