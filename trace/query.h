/*
 * trace query: typed readers of a trace store, for every analysis.
 *
 * The schema of docs/trace-format.md is owned by trace/: the writers in
 * trace.h put rows in, and the readers here take them out as plain C
 * structs, so no module above trace/ writes SQL against a trace (rules/
 * computes its features through this header only). Each reader answers one
 * question an analysis asks of one run:
 *
 *   what the run was ........................ cp_trace_query_run
 *   how long each iteration took ............ cp_trace_query_samples
 *   a per-iteration counter (probe_ns) ...... cp_trace_query_counter_series
 *   whole-run counters (perf.*) ............. cp_trace_query_run_counters
 *   one counter's latest value .............. cp_trace_query_counter
 *   the kernel table, tensors parsed ........ cp_trace_query_kernels
 *   each kernel's time over iterations ...... cp_trace_query_kernel_times
 *   each iteration's time on a layer ........ cp_trace_query_layer_iterations
 *   the events of iterations, in time order . cp_trace_query_iteration_events
 *   the machine the trace was recorded on ... cp_trace_query_host
 *
 * Small answers (one row per iteration, per kernel, per counter) come back
 * as arrays the caller owns; the one answer as big as the trace (events, a
 * million and more) is streamed to a callback, one row at a time.
 *
 * Nothing here assumes the trace came from cannprof's CPU runtime: imported
 * profiles (msprof, torch_npu, Kineto, ONNX Runtime, TensorRT, Nsight) land
 * in the same tables with less in them. What a run did not record reads as
 * empty, never as an error: a run without samples, events, counters or
 * kernels gives n = 0; a store that lacks an optional table altogether
 * (samples, kernels, events, strings, counters, meta) reads as if the table
 * were empty; a column left NULL reads as "" (text) or 0 (numbers: threads,
 * batch, memory, FLOPs, bytes, where 0 means "not recorded" — the schema
 * stores FLOPs and bytes NOT NULL DEFAULT 0, so a kernel whose work is
 * unknown cannot be told from one that does none); a counter that is
 * absent reads as NaN or as an empty series. Units are the store's:
 * nanoseconds, bytes, FLOP; a counter's unit is the one its name implies
 * (docs/trace-format.md, "counters").
 *
 * Every reader takes `run_id`, a run of the store, or < 0 for the last run;
 * a run that does not exist is CP_ERR_INVALID with a message naming the
 * store and the ids it holds. Errors name the store's path and what was
 * being read ("t.db: reading samples of run 3: ..."); SQLite failures are
 * CP_ERR_DB (CP_ERR_CORRUPT for a damaged file, CP_ERR_IO for disk errors),
 * a kernel's tensor JSON that does not parse is CP_ERR_CORRUPT, allocation
 * failure CP_ERR_NOMEM. On failure every OUT array is NULL and its count 0.
 *
 * Threads: as the store handle, one thread at a time.
 */
#ifndef CP_TRACE_QUERY_H
#define CP_TRACE_QUERY_H

#include "trace/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- which iterations ------------------------------------------------------
 *
 * Readers of per-iteration facts read the measured iterations (iteration
 * >= 0; warm-up and everything outside the measured loop are -1 and never
 * read). Given a set, they read only the iterations in it, e.g. the
 * undisturbed ones of validate. `it` is ascending without repeats (a set
 * that is not is CP_ERR_INVALID); n = 0 reads no iteration at all, and
 * iterations below 0 in it are not read either. A NULL set pointer means
 * every measured iteration. */
struct cp_trace_iter_set {
    const int64_t *it;
    size_t n;
};

/* Whether iteration `it` is one `set` reads: a measured iteration (>= 0)
 * that is in it; for a NULL set, any measured iteration. */
bool cp_trace_iter_set_has(const struct cp_trace_iter_set *set, int64_t it);

/* ---- the run ---------------------------------------------------------------- */

/* A `runs` row. Strings are owned by the struct and never NULL ("" when the
 * run did not record them); numbers are 0 when not recorded. */
struct cp_trace_run {
    int64_t id;
    char *created_at;  /* as stored: ISO-8601 UTC */
    char *kind;        /* "bench", "bench-ab", "run", "import", ... */
    char *model_path;  /* as given on the command line */
    char *model_hash;  /* content hash of the source model */
    char *config_json; /* the conversion config recorded in the .om, JSON */
    char *config_id;   /* the config's stable id */
    char *target;      /* "cpu", ... */
    int threads;       /* runtime threads */
    int batch;         /* batch size; 0: the model's own, or not recorded */
    int warmup, iterations;
    uint64_t weight_bytes, arena_bytes, peak_bytes, peak_rss_bytes;
};

/* Read run `run_id` (< 0: the last). OUT: *r, released with
 * cp_trace_run_release (also safe after a failure, when *r is zeroed). */
enum cp_status cp_trace_query_run(struct cp_trace_store *s, int64_t run_id, struct cp_trace_run *r,
                                  struct cp_diag *d);
void cp_trace_run_release(struct cp_trace_run *r);

/* ---- samples and counters --------------------------------------------------- */

/* One measured iteration's wall time. */
struct cp_trace_sample {
    int64_t iteration;
    uint64_t latency_ns; /* a negative stored value reads as 0 */
};

/* The latency samples of a run, in iteration order. OUT: *v (caller frees;
 * NULL when the run has none), *n. */
enum cp_status cp_trace_query_samples(struct cp_trace_store *s, int64_t run_id,
                                      struct cp_trace_sample **v, size_t *n, struct cp_diag *d);

/* One value of a per-iteration counter. */
struct cp_trace_point {
    int64_t iteration;
    double value;
};

/* The values of counter `name` in measured iterations (e.g. "probe_ns":
 * one per iteration of `cannprof bench`), ascending by iteration; an
 * iteration with more than one value gives them all, in recording order.
 * OUT: *v (caller frees; NULL when the run has no such counter), *n. */
enum cp_status cp_trace_query_counter_series(struct cp_trace_store *s, int64_t run_id,
                                             const char *name, struct cp_trace_point **v, size_t *n,
                                             struct cp_diag *d);

/* A whole-run counter (iteration -1). */
struct cp_trace_counter {
    char *name; /* owned */
    double value;
};

/* The whole-run counters of a run whose names start with `prefix` (exactly,
 * case included; NULL or "" for all), in recording order: a name recorded
 * twice appears twice, the later value last. OUT: *v (free with
 * cp_trace_counters_free; NULL when none), *n. */
enum cp_status cp_trace_query_run_counters(struct cp_trace_store *s, int64_t run_id,
                                           const char *prefix, struct cp_trace_counter **v,
                                           size_t *n, struct cp_diag *d);
void cp_trace_counters_free(struct cp_trace_counter *v, size_t n); /* NULL is a no-op */

/* The latest value recorded for counter `name` of a run, at whatever
 * iteration (e.g. "precision_loss"). OUT: *value, NaN when the run has no
 * such counter (a stored counter is never NaN: the column is NOT NULL). */
enum cp_status cp_trace_query_counter(struct cp_trace_store *s, int64_t run_id, const char *name,
                                      double *value, struct cp_diag *d);

/* ---- kernels ----------------------------------------------------------------- */

#define CP_TRACE_MAX_RANK 8

/* One tensor of a kernel's `inputs` or `outputs` JSON (docs/trace-format.md,
 * "kernels"). Strings are owned by the kernel table they came with. */
struct cp_trace_tensor {
    char *name;    /* never NULL; "" when missing */
    char *view_of; /* inputs: the tensor this one aliases; NULL when not a view */
    char *dtype;   /* "f32", "bf16", ...; "" when missing */
    char *layout;  /* "NCHW", "nChw16c", ...; "" when missing */
    char *compute; /* outputs: "bf16" when computed in bf16; NULL when not said */
    int rank;      /* -1 when the shape is missing or has more than CP_TRACE_MAX_RANK dims */
    int64_t
        dims[CP_TRACE_MAX_RANK]; /* dims[0..rank-1]; -1 for a dimension that is not an integer */
};

/* A `kernels` row with its tensors parsed. Keys of the tensor objects that
 * are not listed above are ignored, as the format asks. */
struct cp_trace_kernel_desc {
    int64_t idx;   /* execution order; events.kernel_idx refers to it */
    char *node;    /* never NULL; "" when not recorded */
    char *op_type; /* never NULL; "" when not recorded */
    char *impl;    /* never NULL; "" when not recorded */
    char *origins; /* JSON array of the original ONNX node names; "[]" when not recorded */
    double flops;  /* estimated per execution; 0 when not recorded */
    double bytes;  /* estimated per execution; 0 when not recorded */
    struct cp_trace_tensor *in, *out;
    size_t n_in, n_out;
};

/* The kernel table of a run, ascending by idx. An `inputs`/`outputs` value
 * that is not a JSON array of objects is CP_ERR_CORRUPT ("t.db: kernel 4:
 * inputs is not a JSON array (...)"); NULL or "" is no tensors. OUT: *k
 * (free with cp_trace_kernels_free; NULL when the run has no kernels), *n. */
enum cp_status cp_trace_query_kernels(struct cp_trace_store *s, int64_t run_id,
                                      struct cp_trace_kernel_desc **k, size_t *n,
                                      struct cp_diag *d);
void cp_trace_kernels_free(struct cp_trace_kernel_desc *k, size_t n); /* NULL is a no-op */
/* The row of kernel `idx` in a table cp_trace_query_kernels returned (by
 * bisection: it is ascending by idx); NULL when it has none. */
const struct cp_trace_kernel_desc *cp_trace_kernel_find(const struct cp_trace_kernel_desc *k,
                                                        size_t n, int64_t idx);

/* The median of run `run_id`'s samples (its iterations' latencies) in ns;
 * NaN when it has none. OUT (may be NULL): *n, how many samples. */
enum cp_status cp_trace_query_median_sample(struct cp_trace_store *s, int64_t run_id,
                                            double *median_ns, size_t *n, struct cp_diag *d);

/* Whether a kernel is collective communication, as an import names it:
 * HCCL tasks (impl HCCL / COMMUNICATION, op type HCCL, hcom_*), NCCL
 * kernels (nccl*). Any argument may be NULL. */
bool cp_trace_kernel_is_communication(const char *op_type, const char *impl, const char *node);

/* ---- where the time went ------------------------------------------------------ */

/* One kernel's device events over the chosen iterations. */
struct cp_trace_kernel_time {
    int64_t kernel_idx;
    int64_t events;  /* device events of the kernel */
    double total_ns; /* their total duration */
    int64_t n_short; /* of which shorter than short_ns */
    double short_ns; /* the total duration of those */
};

/* Per-kernel sums of the device events (layer 2, kernel_idx >= 0) of the
 * iterations in `only` (NULL: every measured iteration), one entry per
 * kernel index that has any, ascending. Events are matched to kernels by
 * index only: an index the kernel table lacks still gets its entry. OUT: *v
 * (caller frees; NULL when none), *n. */
enum cp_status cp_trace_query_kernel_times(struct cp_trace_store *s, int64_t run_id,
                                           const struct cp_trace_iter_set *only, double short_ns,
                                           struct cp_trace_kernel_time **v, size_t *n,
                                           struct cp_diag *d);

/* One iteration's events on one layer. */
struct cp_trace_iter_time {
    int64_t iteration;
    int64_t events;  /* events of the layer in the iteration (>= 1) */
    double total_ns; /* the sum of their durations (not their union) */
};

/* For each iteration in `only` (NULL: every measured one) that has events
 * on `layer`, how many and their summed duration, ascending by iteration:
 * with CP_LAYER_DEVICE, the kernel time of each iteration, counting device
 * events that name no kernel too (an import's unmatched device tasks).
 * OUT: *v (caller frees; NULL when none), *n. */
enum cp_status cp_trace_query_layer_iterations(struct cp_trace_store *s, int64_t run_id,
                                               enum cp_trace_layer layer,
                                               const struct cp_trace_iter_set *only,
                                               struct cp_trace_iter_time **v, size_t *n,
                                               struct cp_diag *d);

/* One stored event, as the streaming reader hands it over. */
struct cp_trace_event_row {
    int64_t iteration;  /* >= 0: only measured iterations are streamed */
    int64_t kernel_idx; /* -1 when the event is not a kernel's */
    int64_t start_ns;   /* monotonic, comparable within the run */
    int64_t dur_ns;     /* as stored (the format says >= 0) */
    int layer;          /* enum cp_trace_layer (an import may add others) */
    int thread, depth;
    const char *name; /* borrowed: valid until the callback returns; NULL when unnamed */
};

/* Called for each event; any status but CP_OK stops the stream and is
 * returned by the reader as it is (set `d` to say why). */
typedef enum cp_status (*cp_trace_event_fn)(void *ctx, const struct cp_trace_event_row *e,
                                            struct cp_diag *d);

/* Bit of `layers` for one layer. */
#define CP_TRACE_LAYER_BIT(l) (1u << (unsigned)(l))

/* Stream the events of the iterations in `only` (NULL: every measured
 * iteration) on the layers whose bits are set in `layers`, iteration by
 * iteration (ascending), by start time within an iteration (events that
 * start together in no promised order). SQLite sorts the rows on disk as
 * it needs; this side holds only the row at hand. The callback may call
 * other readers of this header on the same store, but must not close it. */
enum cp_status cp_trace_query_iteration_events(struct cp_trace_store *s, int64_t run_id,
                                               unsigned layers,
                                               const struct cp_trace_iter_set *only,
                                               cp_trace_event_fn fn, void *ctx, struct cp_diag *d);

/* ---- the host ---------------------------------------------------------------- */

/* The machine of the store's latest run (the `host_*` meta keys,
 * cp_trace_store_set_host_meta). Strings are owned by the struct and NULL
 * when not recorded ("" and "unknown" count as not recorded); numbers 0. */
struct cp_trace_host {
    char *cpu_model;
    char *isa_flags; /* space separated, as /proc/cpuinfo "flags" */
    char *os, *arch;
    int cores; /* online cores; 0 when unknown (or implausible: 2^20 or more) */
    uint64_t l1d_bytes, l2_bytes, l3_bytes;
};

/* OUT: *h, released with cp_trace_host_release (also safe after a failure). */
enum cp_status cp_trace_query_host(struct cp_trace_store *s, struct cp_trace_host *h,
                                   struct cp_diag *d);
void cp_trace_host_release(struct cp_trace_host *h);

/* ---- pipeline runs ------------------------------------------------------------- */

struct cp_trace_pipeline {
    struct cp_trace_pipeline_node *nodes; /* strings owned */
    size_t n_nodes;
    struct cp_trace_pipeline_edge *edges;
    size_t n_edges;
};

/* A pipeline run's nodes and edges; n_nodes 0 when the run is not one. */
enum cp_status cp_trace_query_pipeline(struct cp_trace_store *s, int64_t run_id,
                                       struct cp_trace_pipeline *out, struct cp_diag *d);
void cp_trace_pipeline_release(struct cp_trace_pipeline *p);
/* A pipeline run's node invocations, by node, then seq (requests owned:
 * free with cp_trace_node_calls_free). */
enum cp_status cp_trace_query_node_calls(struct cp_trace_store *s, int64_t run_id,
                                         struct cp_trace_node_call **v, size_t *n,
                                         struct cp_diag *d);
void cp_trace_node_calls_free(struct cp_trace_node_call *v, size_t n);

#endif
