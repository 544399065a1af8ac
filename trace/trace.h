/*
 * trace: where the time goes, on three layers, in one SQLite file.
 *
 * A `struct cp_trace_recorder` collects events in memory while a model runs:
 * application ranges (pushed and popped by the CLI or by a program that
 * embeds the runtime), runtime phases (load, plan, allocation, input copy,
 * execute, output copy) and device events (one per kernel execution). The
 * hot path is allocation-free: the recorder reserves its buffer up front and
 * strings are interned once, when a plan is built, so recording a kernel is
 * two clock reads and a store.
 *
 * A `struct cp_trace_store` is the SQLite file every analysis reads
 * (schema in docs/trace-format.md, versioned through PRAGMA user_version):
 * meta, runs, per-iteration samples, the static description of every kernel
 * of a run (node name, op type, original ONNX names, shapes, dtypes,
 * layouts, FLOPs, bytes), events and counters. Writes are batched in
 * transactions with WAL. Analyses read it back through trace/query.h.
 *
 * Exporters turn a store into Chrome trace-event JSON (Perfetto,
 * chrome://tracing) and folded stacks (flamegraph.pl, speedscope).
 *
 * Threads: a recorder is NOT thread-safe, by design. The runtime records from
 * its dispatching thread only (kernels that fan out over OpenMP are timed
 * around the parallel region), so a lock would only cost time on the hot
 * path. A program that records from several threads must give each thread
 * its own recorder. A store handle, likewise, belongs to one thread at a time.
 */
#ifndef CP_TRACE_H
#define CP_TRACE_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CP_TRACE_SCHEMA_VERSION 1

/* PRAGMA application_id of every trace store ("CPTR"): how a cannprof trace
 * tells itself apart from any other SQLite file. */
#define CP_TRACE_APPLICATION_ID 0x43505452

/* Deepest nesting of open application ranges (cp_trace_push). */
#define CP_TRACE_MAX_DEPTH 64

/* Pass as `iteration` to cp_trace_record to stamp the recorder's current
 * iteration (cp_trace_set_iteration) instead of an explicit one. */
#define CP_TRACE_ITER_CURRENT INT32_MIN

enum cp_trace_layer {
    CP_LAYER_APP = 0,     /* application ranges */
    CP_LAYER_RUNTIME = 1, /* load, plan, alloc, input copy, execute, output copy */
    CP_LAYER_DEVICE = 2,  /* kernels */
};
#define CP_TRACE_N_LAYERS 3

/* "application", "runtime", "device"; "unknown" for anything else. */
const char *cp_trace_layer_name(enum cp_trace_layer l);

/* One recorded interval. Times are CLOCK_MONOTONIC nanoseconds. */
struct cp_trace_event {
    uint64_t start_ns;
    uint64_t end_ns;
    int32_t name;      /* interned string id */
    int32_t kernel;    /* index into the run's kernel table, -1 if not a kernel */
    int32_t iteration; /* -1 outside the measured loop (load, warm-up, ...) */
    int16_t thread;    /* recorder-assigned thread number, 0 = main */
    uint8_t layer;     /* enum cp_trace_layer */
    uint8_t depth;     /* nesting depth within its layer */
};

/* The static description of one kernel of a plan, stored once per run. */
struct cp_trace_kernel {
    const char *node;    /* node name in the converted graph */
    const char *op_type; /* e.g. "Conv", "FusedAttention" */
    const char *impl;    /* kernel implementation, e.g. "onednn:conv", "ref" */
    const char *origins; /* JSON array of original ONNX node names */
    const char *inputs;  /* JSON array: [{"shape":[..],"dtype":"f32","layout":"NCHW"}] */
    const char *outputs; /* same form */
    double flops;
    double bytes;
};

/* ---- the recorder --------------------------------------------------------
 *
 * Not thread-safe (see the top of this file): one recorder per recording
 * thread. */

struct cp_trace_recorder;

/* Create a recorder with room for `capacity` events before it grows (it
 * grows outside kernels only; see cp_trace_reserve). The current iteration
 * starts at -1. NULL on OOM. Free with cp_trace_recorder_free. */
struct cp_trace_recorder *cp_trace_recorder_create(size_t capacity);
void cp_trace_recorder_free(struct cp_trace_recorder *r); /* NULL is a no-op */

/* Make room for `n` more events, so the next n records cannot allocate.
 * CP_ERR_NOMEM when the room cannot be made (the recorder is unchanged). */
enum cp_status cp_trace_reserve(struct cp_trace_recorder *r, size_t n);

/* Intern a string; returns its id (>= 0) or -1 on OOM. Same text, same id.
 * Ids are dense: 0, 1, 2, ... in order of first appearance. Allocates on
 * first sight of a text, so intern while building a plan, not per kernel. */
int32_t cp_trace_intern(struct cp_trace_recorder *r, const char *s);

/* Record one finished interval at depth 0. `iteration` may be
 * CP_TRACE_ITER_CURRENT. end_ns < start_ns is recorded as a zero-length
 * interval; a `layer` outside the enum drops the event. Never allocates when
 * room was reserved; otherwise grows, and on OOM drops the event and counts
 * it as dropped. `thread` is clamped to 0..32767. */
void cp_trace_record(struct cp_trace_recorder *r, enum cp_trace_layer layer, int32_t name,
                     int32_t kernel, int32_t iteration, uint64_t start_ns, uint64_t end_ns,
                     int thread);
/* The same with an explicit nesting depth within the layer (0..255; e.g. a
 * runtime phase inside another). */
void cp_trace_record_depth(struct cp_trace_recorder *r, enum cp_trace_layer layer, int32_t name,
                           int32_t kernel, int32_t iteration, uint64_t start_ns, uint64_t end_ns,
                           int thread, int depth);

/* The public range API for programs that embed the runtime: ranges nest;
 * pop closes the innermost one and records it on the application layer
 * (thread 0), with the depth it was opened at (outermost = 0) and the
 * iteration that was current when it was opened.
 * push: CP_ERR_NOMEM when `name` cannot be interned, CP_ERR_INVALID when
 * CP_TRACE_MAX_DEPTH ranges are already open or `name` is NULL.
 * pop: CP_ERR_INVALID when no range is open. A range whose event is dropped
 * (OOM) is still closed and counted in cp_trace_dropped. */
enum cp_status cp_trace_push(struct cp_trace_recorder *r, const char *name);
enum cp_status cp_trace_pop(struct cp_trace_recorder *r);
/* Number of open ranges. */
int cp_trace_depth(const struct cp_trace_recorder *r);

/* Iteration number stamped on events recorded from now on (-1: none): on
 * ranges opened by cp_trace_push and on records passing
 * CP_TRACE_ITER_CURRENT. An explicit iteration given to cp_trace_record wins. */
void cp_trace_set_iteration(struct cp_trace_recorder *r, int32_t iteration);
int32_t cp_trace_iteration(const struct cp_trace_recorder *r);

/* Read access, for the store and for tests. Pointers stay valid until the
 * next record, reserve, clear or free. */
size_t cp_trace_n_events(const struct cp_trace_recorder *r);
const struct cp_trace_event *cp_trace_events(const struct cp_trace_recorder *r);
/* The text of an interned id; NULL when out of range. */
const char *cp_trace_string(const struct cp_trace_recorder *r, int32_t id);
size_t cp_trace_n_strings(const struct cp_trace_recorder *r);
size_t cp_trace_dropped(const struct cp_trace_recorder *r);
/* Forget the events and reset the dropped count. Strings stay interned, the
 * reserved room stays allocated, open ranges stay open and the current
 * iteration is kept. */
void cp_trace_clear(struct cp_trace_recorder *r);

/* ---- the store ------------------------------------------------------------
 *
 * Every error message starts with the store's path. Each writing call is its
 * own transaction (cp_trace_store_add_events: a few, see there). */

struct cp_trace_store;

/* Whether `head` (n bytes of a file's start) begins with SQLite's file
 * header: a trace store, or another SQLite database (an import's). */
bool cp_trace_is_sqlite(const void *head, size_t n);

/* Open (creating if needed) a trace store, in WAL mode with
 * synchronous=NORMAL. Errors: a file that is not SQLite at all
 * ("x.db is not a SQLite file") or a SQLite database that is not a cannprof
 * trace (foreign application_id, or other tables in an untagged file) is
 * CP_ERR_INVALID; a newer schema version is CP_ERR_VERSION; a file that
 * cannot be opened or created is CP_ERR_IO. OUT: *s (close with
 * cp_trace_store_close), NULL on failure. */
enum cp_status cp_trace_store_open(const char *path, struct cp_trace_store **s, struct cp_diag *d);
/* Open an existing store read-only: never creates or initialises a file.
 * A missing file is CP_ERR_IO ("x.db: no such file"); otherwise the same
 * checks as cp_trace_store_open. Writing calls then fail with CP_ERR_DB. */
enum cp_status cp_trace_store_open_ro(const char *path, struct cp_trace_store **s,
                                      struct cp_diag *d);
void cp_trace_store_close(struct cp_trace_store *s); /* NULL is a no-op */

/* The path the store was opened with (owned by the store). */
const char *cp_trace_store_path(const struct cp_trace_store *s);

/* Key/value meta (tool version, host CPU model, ISA flags, cores, ...).
 * Setting a key again replaces it. */
enum cp_status cp_trace_store_set_meta(struct cp_trace_store *s, const char *key, const char *value,
                                       struct cp_diag *d);
/* OUT: *value (caller frees) or NULL when absent. */
enum cp_status cp_trace_store_get_meta(struct cp_trace_store *s, const char *key, char **value,
                                       struct cp_diag *d);

/* Record the host into meta, in one transaction: tool_version
 * (CP_VERSION_STRING), schema_version, host_cpu_model and host_isa_flags
 * (/proc/cpuinfo "model name"/"flags", or their ARM equivalents; "unknown"
 * when absent), host_cores (online cores), host_os (uname: "Linux 6.1.0")
 * and host_arch (uname machine). */
enum cp_status cp_trace_store_set_host_meta(struct cp_trace_store *s, struct cp_diag *d);

/* What a run was. Strings are copied; NULL strings are stored as NULL. */
struct cp_trace_run_info {
    const char *kind; /* "bench", "run", "import" */
    const char *model_path;
    const char *model_hash;
    const char *config_json; /* conversion config recorded in the .om */
    const char *config_id;
    const char *target; /* target description */
    int threads;
    int batch;
    int warmup;
    int iterations;
    uint64_t weight_bytes, arena_bytes, peak_bytes, peak_rss_bytes;
};

/* Start a run; created_at is now (UTC). OUT: *run_id (ids grow: the last
 * run has the largest id). */
enum cp_status cp_trace_store_begin_run(struct cp_trace_store *s,
                                        const struct cp_trace_run_info *info, int64_t *run_id,
                                        struct cp_diag *d);
/* Update the memory figures of a run once they are known. CP_ERR_INVALID
 * when there is no such run. */
enum cp_status cp_trace_store_set_run_memory(struct cp_trace_store *s, int64_t run_id,
                                             uint64_t weight_bytes, uint64_t arena_bytes,
                                             uint64_t peak_bytes, uint64_t peak_rss_bytes,
                                             struct cp_diag *d);

/* The run to use for `run_id`: itself when it exists, the last run when
 * run_id < 0. CP_ERR_INVALID when the store holds no runs or no such run.
 * OUT: *used_run. */
enum cp_status cp_trace_store_resolve_run(struct cp_trace_store *s, int64_t run_id,
                                          int64_t *used_run, struct cp_diag *d);

/* Per-iteration latency samples (nanoseconds), for iterations
 * first_iteration .. first_iteration+n-1. One transaction; an iteration
 * already stored for the run is an error (CP_ERR_DB) and nothing is added. */
enum cp_status cp_trace_store_add_samples(struct cp_trace_store *s, int64_t run_id,
                                          int32_t first_iteration, const uint64_t *ns, size_t n,
                                          struct cp_diag *d);

/* The kernel table of a run (index = position). One transaction. */
enum cp_status cp_trace_store_add_kernels(struct cp_trace_store *s, int64_t run_id,
                                          const struct cp_trace_kernel *k, size_t n,
                                          struct cp_diag *d);

/* All events of a recorder, with their strings (recorder ids are mapped to
 * the store's own string ids). Transactions of up to 65536 events, so a
 * failure part-way leaves the earlier batches stored. When the recorder
 * dropped events, a counter "trace.dropped_events" records how many. */
enum cp_status cp_trace_store_add_events(struct cp_trace_store *s, int64_t run_id,
                                         const struct cp_trace_recorder *r, struct cp_diag *d);

/* A named counter value (e.g. "peak_rss_bytes"), optionally per iteration
 * (-1: for the whole run); ts_ns 0 when it has no time. */
enum cp_status cp_trace_store_add_counter(struct cp_trace_store *s, int64_t run_id,
                                          int32_t iteration, const char *name, double value,
                                          uint64_t ts_ns, struct cp_diag *d);

/* One named counter per iteration, first_iteration .. first_iteration+n-1,
 * all in one transaction (e.g. "probe_ns", a value per measured iteration);
 * ts_ns 0. */
enum cp_status cp_trace_store_add_counter_series(struct cp_trace_store *s, int64_t run_id,
                                                 const char *name, int32_t first_iteration,
                                                 const double *v, size_t n, struct cp_diag *d);

/* One counter value of a batch (cp_trace_store_add_counters). */
struct cp_trace_counter_value {
    int32_t iteration; /* -1: the whole run */
    const char *name;
    double value;
    uint64_t ts_ns; /* 0: no time */
};

/* Many counters in one transaction (an importer's thousands). */
enum cp_status cp_trace_store_add_counters(struct cp_trace_store *s, int64_t run_id,
                                           const struct cp_trace_counter_value *v, size_t n,
                                           struct cp_diag *d);

/* Remove run `run_id` and everything stored of it (events, counters,
 * samples, kernels, and the meta keys "run.<run_id>.*" that describe one
 * run), in one transaction: what an import that failed part
 * way does, so that no partial run presents itself as complete. */
enum cp_status cp_trace_store_delete_run(struct cp_trace_store *s, int64_t run_id,
                                         struct cp_diag *d);

/* Read back the latency samples of a run (or of the last run when run_id
 * < 0), in iteration order. A run without samples gives *n = 0 and
 * *ns = NULL. OUT: *ns (caller frees), *n, and optionally *used_run (may be
 * NULL). */
enum cp_status cp_trace_store_samples(struct cp_trace_store *s, int64_t run_id, uint64_t **ns,
                                      size_t *n, int64_t *used_run, struct cp_diag *d);

/* Everything a verdict needs from one run, read in one call. */
struct cp_run_metrics {
    int64_t run_id;
    char *kind;        /* "bench", "bench-ab", ... */
    char *created_at;  /* UTC, "YYYY-MM-DD HH:MM:SS" */
    char *model_path;  /* may be "" */
    char *model_hash;  /* source-model hash recorded in the .om; may be "" */
    char *config_id;   /* may be "" */
    char *config_json; /* the conversion config recorded in the .om; may be "" */
    int batch, threads;
    size_t n;             /* iterations with a latency sample */
    uint64_t *latency_ns; /* n values, in iteration order */
    uint64_t *device_ns;  /* n values: kernel time of each iteration (device-layer events);
                           * NULL when the run recorded no kernel events */
    uint64_t *probe_ns;   /* n values: the interference probe run after each iteration
                           * (counter "probe_ns", runner/probe.h); NULL when the run has
                           * no probe for every one of its iterations */
    uint64_t weight_bytes, arena_bytes, peak_bytes, peak_rss_bytes;
    double precision_loss; /* counter "precision_loss" (percent) of the run; NaN when absent */
    double started_us;     /* counter CP_TRACE_STARTED_COUNTER: when the run began, microseconds
                            * since the epoch; NaN in traces written before it existed */
    bool time_limit_hit;   /* counter "measure.time_limit_hit": the run stopped at its time
                            * limit before it had the undisturbed iterations it asked for */
    bool priority_raised;  /* counter "measure.priority_raised": measured at nice -20 */
};

/* ---- pipeline runs (docs/trace-format.md, "Pipelines") ------------------------- */

/* A flow's node, as a pipeline run records it (index = its number). */
struct cp_trace_pipeline_node {
    const char *name, *flowunit;
    int workers, batch_size, queue_size, line;
    const char *attrs_json; /* the node's keys, a JSON object */
};

/* An edge between nodes; `back` for a loop body's way back to its loop. */
struct cp_trace_pipeline_edge {
    int32_t from, to;
    bool back;
};

/* One invocation of a node: a batch popped from its input queue,
 * processed, and its outputs pushed. Times are ns from the run's start. */
struct cp_trace_node_call {
    int32_t node, worker, thread;
    uint64_t seq;         /* the node's invocation number */
    uint32_t batch;       /* items processed */
    uint32_t depth;       /* the input queue's length before the pop */
    const char *requests; /* the items' request ids, "3,4,5" */
    uint64_t ready_ns;    /* the batch was popped */
    uint64_t start_ns;    /* processing began */
    uint64_t end_ns;      /* processing ended */
    uint64_t done_ns;     /* the outputs were pushed */
    uint64_t wait_ns;     /* waiting on the input queue before ready_ns */
    uint64_t blocked_ns;  /* blocked pushing to full queues (in end..done) */
    uint64_t cpu_ns;      /* on a CPU during start..end */
    uint64_t runq_ns;     /* runnable but waiting for a CPU during start..end */
};

/* The flow's nodes and edges for run_id (tables made on first use). */
enum cp_status cp_trace_store_add_pipeline(struct cp_trace_store *s, int64_t run_id,
                                           const struct cp_trace_pipeline_node *nodes,
                                           size_t n_nodes,
                                           const struct cp_trace_pipeline_edge *edges,
                                           size_t n_edges, struct cp_diag *d);
/* Node invocations, in one transaction. */
enum cp_status cp_trace_store_add_node_calls(struct cp_trace_store *s, int64_t run_id,
                                             const struct cp_trace_node_call *v, size_t n,
                                             struct cp_diag *d);

/* The counter (iteration -1) that cp_trace_store_begin_run writes: the
 * run's start, microseconds since the epoch (UTC). */
#define CP_TRACE_STARTED_COUNTER "run.started_us"

/* Read run `run_id` (the last run when < 0). A run without samples is not an
 * error here: m->n is 0 (the caller decides). OUT: *m, released with
 * cp_run_metrics_release (also safe after a failure). */
enum cp_status cp_trace_store_run_metrics(struct cp_trace_store *s, int64_t run_id,
                                          struct cp_run_metrics *m, struct cp_diag *d);
void cp_run_metrics_release(struct cp_run_metrics *m);

/* ---- run groups ------------------------------------------------------------
 *
 * `cannprof bench --runs N` measures a model in N separate processes (two
 * processes of one model differ by more than two runs in one process) and
 * stores N runs tied by the counter "run.group" (iteration -1), with
 * "run.group_index" (0..N-1) and "run.group_size". */
#define CP_TRACE_GROUP_COUNTER "run.group"

/* Tag run `run_id` as member `index` of `size` of group `group` (a number
 * that no other group of the store uses, e.g. the first run's id). */
enum cp_status cp_trace_store_set_run_group(struct cp_trace_store *s, int64_t run_id, int64_t group,
                                            int64_t index, int64_t size, struct cp_diag *d);

/* The runs of the group run `run_id` (the last run when < 0) belongs to, in
 * id order; the run alone when it is in none. OUT: *ids (caller frees),
 * *n >= 1. */
enum cp_status cp_trace_store_run_group(struct cp_trace_store *s, int64_t run_id, int64_t **ids,
                                        size_t *n, struct cp_diag *d);

/* The sqlite3 handle, for tests and tools that look into the file as any
 * SQLite client would. Modules read a trace through trace/query.h, never
 * with SQL of their own (scripts/check_layering.sh holds them to it).
 * Owned by the store. */
void *cp_trace_store_db(struct cp_trace_store *s);

/* ---- exporters ------------------------------------------------------------ */

enum cp_trace_format {
    CP_TRACE_FORMAT_CHROME = 0, /* Chrome trace-event JSON */
    CP_TRACE_FORMAT_FOLDED,     /* folded stacks: "layer;node;op <us>" */
};

/* "chrome" / "folded" <-> enum. parse: false for an unknown name. */
bool cp_trace_format_parse(const char *name, enum cp_trace_format *out);
const char *cp_trace_format_name(enum cp_trace_format fmt);

/* Export run `run_id` (the last run when < 0) of `s` to `out_path`
 * (atomically: the file appears whole or not at all). The formats are
 * described in docs/trace-format.md. */
enum cp_status cp_trace_export(struct cp_trace_store *s, int64_t run_id, enum cp_trace_format fmt,
                               const char *out_path, struct cp_diag *d);
/* The same into a buffer (appended to `out`), e.g. for stdout. */
enum cp_status cp_trace_export_buf(struct cp_trace_store *s, int64_t run_id,
                                   enum cp_trace_format fmt, struct cp_buf *out, struct cp_diag *d);

/* What an export wrote: the run (resolved from a run_id < 0), how many
 * events the run holds (every layer, warm-up included: what a Chrome
 * export draws, and what a folded one sums), the bytes of the file. */
struct cp_trace_export_info {
    int64_t run;
    size_t events;
    size_t bytes;
};
/* cp_trace_export, saying what it wrote. OUT: *info (zeroed on failure). */
enum cp_status cp_trace_export_file(struct cp_trace_store *s, int64_t run_id,
                                    enum cp_trace_format fmt, const char *out_path,
                                    struct cp_trace_export_info *info, struct cp_diag *d);

#endif
