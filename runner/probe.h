/*
 * The interference probe: was the machine busy while an iteration ran?
 *
 * On a shared machine (a VM whose cores have a hyperthread sibling that
 * another tenant uses, a laptop with a browser open) one process sees the
 * CPU switch between an undisturbed state and a contended one that is 10-15%
 * slower, in stretches of a fraction of a second to several seconds. Two
 * benchmark runs made one after the other then land in different states,
 * and no test on one run's iterations can tell that from a change of the
 * model. Interleaving (runner/bench_ab.h) cancels it when both models are
 * at hand; a trace compared with another one later cannot be interleaved.
 *
 * So after every measured iteration, `cannprof bench` runs a small fixed
 * workload — a floating-point multiply-add loop over arrays that fit in L1,
 * on each of the runtime's threads at once — and times it (the slowest
 * thread). Its duration barely depends on the model, only on the machine:
 * when a neighbour competes for the core it takes much longer. The floor of
 * those times (their low end) is the undisturbed machine; a probe that took
 * at most CP_PROBE_TOLERANCE times the floor saw an undisturbed machine.
 * A neighbour may come and go faster than one iteration, so an iteration
 * counts as undisturbed only when every probe within a window around it —
 * at least 2 ms and one iteration on each side — saw an undisturbed
 * machine. `cannprof validate` compares undisturbed iterations with
 * undisturbed ones.
 *
 * The probe is outside the timed region; it costs about 10 us per
 * iteration of wall time.
 */
#ifndef CP_RUNNER_PROBE_H
#define CP_RUNNER_PROBE_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An iteration whose probe took at most this many times the floor ran
 * undisturbed. Undisturbed probes on the development machine spread by
 * about 1%, contended ones take 1.5-1.9x the floor. */
#define CP_PROBE_TOLERANCE 1.15
/* The same as the exact fraction of the floor a probe may exceed it by:
 * 3/20 = 0.15. */
#define CP_PROBE_TOLERANCE_NUM 3u
#define CP_PROBE_TOLERANCE_DEN 20u

struct cp_probe;

/* A probe for `threads` threads (>= 1): with more than one, every run times
 * the same workload on that many OpenMP threads at once. OUT: *out. */
enum cp_status cp_probe_create(int threads, struct cp_probe **out, struct cp_diag *d);
void cp_probe_free(struct cp_probe *p); /* NULL ok */

/* Run the workload once; its duration in ns (the slowest thread's). */
uint64_t cp_probe_run(struct cp_probe *p);

/* The floor of n probe durations: the value at rank n/100 in ascending
 * order (the minimum below 200 values), so that one freak reading does not
 * set it. 0 when n is 0. Does not change v. */
uint64_t cp_probe_floor(const uint64_t *v, size_t n);

/* Does a probe of `ns` count as undisturbed against `floor`? (floor 0:
 * everything does.) */
bool cp_probe_undisturbed(uint64_t ns, uint64_t floor);

/* How many of v[0..n-1] are undisturbed against `floor`. */
size_t cp_probe_count_undisturbed(const uint64_t *v, size_t n, uint64_t floor);

/* The half-width, in iterations, of the window of probes an iteration is
 * judged by, for iterations that typically take `typical_ns` (the run's
 * median latency): enough iterations to span CP_PROBE_WINDOW_NS, at least 1,
 * at most CP_PROBE_MAX_WINDOW. */
#define CP_PROBE_WINDOW_NS  2000000.0
#define CP_PROBE_MAX_WINDOW 16
size_t cp_probe_window(double typical_ns);

/* Which iterations ran undisturbed: iteration i did when the probes of
 * iterations i-w .. i+w (clipped to 0 .. n-1) are all undisturbed against
 * `floor` (the probe of iteration i runs right after it, that of i-1 right
 * before it). out (may be NULL): n flags. Returns how many. */
size_t cp_probe_mark(const uint64_t *probe, size_t n, uint64_t floor, size_t w, bool *out);

/* cp_probe_mark for a measured run, with the window its median latency
 * (latency_ns[0..n-1], linear interpolation) calls for. The one way bench,
 * validate and the features decide which iterations ran undisturbed. When
 * out of memory for the median, the window is 1. */
size_t cp_probe_mark_run(const uint64_t *probe, const uint64_t *latency_ns, size_t n,
                         uint64_t floor, bool *out);

/* Store probe[0..n-1] as the counter "probe_ns" of iterations 0..n-1 of
 * run `run_id` (trace/trace.h). */
struct cp_trace_store;
enum cp_status cp_probe_store(struct cp_trace_store *s, int64_t run_id, const uint64_t *probe,
                              size_t n, struct cp_diag *d);

/* The lowest floor seen lately on this machine, kept in a small text file
 * so that a run that starts while the machine is busy knows what
 * undisturbed looks like. The file names the cannprof binary that measured
 * it and when; load gives 0 (no hint, not an error) when the file is
 * missing or unreadable, was written by another binary (another build's
 * probe loop may run at another speed), or is older than
 * CP_PROBE_FLOOR_MAX_AGE_S (the machine may have changed since). save:
 * atomically replaces the file (its folder must exist). */
#define CP_PROBE_FLOOR_MAX_AGE_S 1800

/* The floor file of this machine for `threads` threads, in cannprof's cache
 * folder (core's cp_cache_dir): "probe-floor-<host key>-t<threads>". Its
 * folder is created when `create`. False when there is no usable cache
 * folder or the path does not fit in n. */
bool cp_probe_floor_path(int threads, bool create, char *out, size_t n);
uint64_t cp_probe_floor_load(const char *path);
enum cp_status cp_probe_floor_save(const char *path, uint64_t floor, struct cp_diag *d);

#endif
