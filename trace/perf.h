/*
 * trace/perf: this process's hardware and software counters, through
 * perf_event_open(2), for the measured loop of a benchmark.
 *
 * A `struct cp_perf` holds one counter per `enum cp_perf_counter`, each
 * opened on its own (not as a group: a group would fail as a whole when the
 * CPU lacks one event, and Linux refuses group reads of inherited counters).
 * Counters count user space only (exclude_kernel, exclude_hv), which is
 * what an unprivileged process may measure at kernel.perf_event_paranoid 2,
 * for the calling thread and every thread it creates AFTER cp_perf_open
 * (inherit): open the counters before the runtime starts its OpenMP threads,
 * so the kernels' worker threads are counted too. They are created
 * disabled; cp_perf_start resets and enables them, cp_perf_stop disables
 * and reads them (the kernel propagates both to inherited counters and sums
 * them on read).
 *
 * Counters may be missing: a VM without a virtual PMU has no hardware
 * events (ENOENT), a seccomp filter or a paranoid setting refuses the call
 * (EPERM, EACCES), a kernel without CONFIG_PERF_EVENTS has no syscall
 * (ENOSYS). None of that is an error here: each counter is open or not,
 * with the errno and a sentence saying why (cp_perf_reason), and the
 * features built on a missing counter are absent rather than wrong.
 *
 * In the trace store (cp_perf_store) a reading becomes counters of the run
 * at iteration -1 (the whole measured loop): "perf.cache_misses" etc. with
 * the value, and for a counter that could not be opened
 * "perf.errno.cache_misses" with the errno (cp_perf_errno_reason turns it
 * back into the sentence), plus "perf.paranoid" when
 * /proc/sys/kernel/perf_event_paranoid can be read. docs/features.md
 * lists them with the features built on them.
 *
 * Not thread-safe: one cp_perf belongs to one thread (the one that opened
 * it and calls start/stop).
 */
#ifndef CP_TRACE_PERF_H
#define CP_TRACE_PERF_H

#include "core/core.h"
#include "trace/trace.h"

#include <stdbool.h>

enum cp_perf_counter {
    CP_PERF_CACHE_REFERENCES = 0, /* hardware: last-level cache accesses */
    CP_PERF_CACHE_MISSES,         /* hardware: last-level cache misses */
    CP_PERF_INSTRUCTIONS,         /* hardware: retired instructions */
    CP_PERF_CYCLES,               /* hardware: CPU cycles */
    CP_PERF_TASK_CLOCK,           /* software: CPU time of the threads, ns */
    CP_PERF_PAGE_FAULTS,          /* software: page faults */
    CP_PERF_CONTEXT_SWITCHES,     /* software: context switches */
};
#define CP_PERF_N_COUNTERS 7

/* The counter's short name, "cache_misses", "task_clock_ns", ...; the
 * store's counter is "perf." followed by it. NULL when out of range. */
const char *cp_perf_counter_name(enum cp_perf_counter c);

/* A sentence saying why perf_event_open failed with `err`, for messages
 * and for features that are absent: ENOENT "the CPU exposes no such event
 * (no PMU, as in most VMs)", EACCES/EPERM "not permitted (...paranoid N, or
 * a seccomp filter)", ENOSYS, EOPNOTSUPP, EINVAL, EMFILE; strerror
 * otherwise. `paranoid` is the perf_event_paranoid level to quote (< -1
 * when unknown). Writes into out[cap]; returns out. */
const char *cp_perf_errno_reason(int err, int paranoid, char *out, size_t cap);

struct cp_perf;

/* Open every counter, disabled, for the calling thread and the threads it
 * creates from now on. Counters that cannot be opened are recorded with
 * their reason; that is not a failure, even when none opens. OUT: *out
 * (free with cp_perf_close). Errors: CP_ERR_NOMEM only. */
enum cp_status cp_perf_open(struct cp_perf **out, struct cp_diag *d);
void cp_perf_close(struct cp_perf *p); /* NULL is a no-op */

/* Whether counter `c` is open. */
bool cp_perf_has(const struct cp_perf *p, enum cp_perf_counter c);
/* Whether any counter is open. */
bool cp_perf_has_any(const struct cp_perf *p);
/* The errno that kept `c` from opening (0 when open). */
int cp_perf_errno(const struct cp_perf *p, enum cp_perf_counter c);
/* Why `c` is not open ("" when it is). Owned by p. */
const char *cp_perf_reason(const struct cp_perf *p, enum cp_perf_counter c);

/* Reset and enable the open counters (a no-op when none is open).
 * CP_ERR_INTERNAL when the kernel refuses the ioctl. */
enum cp_status cp_perf_start(struct cp_perf *p, struct cp_diag *d);

/* Stop counting for a while and go on, keeping the counts (e.g. around
 * work that is not the model's, such as bench's interference probe).
 * No-ops when nothing is open; CP_ERR_INTERNAL when the kernel refuses. */
enum cp_status cp_perf_pause(struct cp_perf *p, struct cp_diag *d);
enum cp_status cp_perf_resume(struct cp_perf *p, struct cp_diag *d);

/* The values counted between cp_perf_start and cp_perf_stop. */
struct cp_perf_reading {
    bool valid[CP_PERF_N_COUNTERS];
    /* Count, scaled by time enabled / time running when the kernel
     * multiplexed the counter (0 running time: not valid). */
    double value[CP_PERF_N_COUNTERS];
    /* Share of the enabled time the counter actually ran (1: exact). */
    double running_share[CP_PERF_N_COUNTERS];
};

/* Disable the open counters and read them. A counter whose read fails, or
 * that never ran, is left invalid. OUT: *r (all invalid when nothing is
 * open). CP_ERR_INTERNAL when the kernel refuses the ioctl. */
enum cp_status cp_perf_stop(struct cp_perf *p, struct cp_perf_reading *r, struct cp_diag *d);

/* Store a reading as counters of `run_id` at iteration -1: "perf.<name>"
 * for each valid value, "perf.errno.<name>" for each counter that did not
 * open, and "perf.paranoid" when known. `p` may be NULL (nothing is
 * stored); `r` may be NULL (only the errno counters). Errors: those of
 * cp_trace_store_add_counter. */
enum cp_status cp_perf_store(struct cp_trace_store *s, int64_t run_id, const struct cp_perf *p,
                             const struct cp_perf_reading *r, struct cp_diag *d);

/* The kernel's perf_event_paranoid level, or < -1 when it cannot be read. */
int cp_perf_paranoid(void);

#endif
