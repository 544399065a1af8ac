/* Inside import/: the streaming reader of Chrome trace-event JSON
 * (chrome_json.c), the writer of an imported run (sink.c) and the mapping
 * of each dialect onto the trace's layers (chrome_import.c, chrome_scan.c,
 * chrome_stacks.c, chrome_write.c; chrome_internal.h). */
#ifndef CP_IMPORT_INTERNAL_H
#define CP_IMPORT_INTERNAL_H

#include "core/hashmap.h"
#include "import/import.h"
#include "trace/query.h"
#include "trace/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- where the bytes come from ------------------------------------------------ */

/* A file (plain or gzip: zlib reads both) or a buffer in memory. */
struct cp_imp_src {
    const char *name; /* for messages */
    const char *path; /* NULL: the buffer */
    const void *data;
    size_t size;
};

/* ---- one event of a Chrome trace ---------------------------------------------- */

#define CP_IMP_MAX_ARGS 64

/* A scalar as the file spelled it: numbers keep their digits (ids beyond
 * 2^53, timestamps to the nanosecond), strings their text. */
struct cp_imp_val {
    const char *s; /* NULL: absent */
    size_t len;
    bool number; /* a JSON number (not a string holding one) */
};

struct cp_imp_arg {
    const char *key;
    struct cp_imp_val v;
};

struct cp_imp_event {
    struct cp_imp_val name, cat, ph, ts, dur, pid, tid, id;
    struct cp_imp_arg args[CP_IMP_MAX_ARGS];
    size_t n_args;
    size_t args_dropped; /* beyond CP_IMP_MAX_ARGS, or nested (arrays, objects) */
    uint64_t offset;     /* the start of the chunk (1 MiB) the event ended in */
    uint64_t index;      /* 0, 1, ... in file order */
};

/* Called for each complete event, and for each scalar of the top-level
 * object outside traceEvents ("schemaVersion", "distributedInfo.rank",
 * "deviceProperties.0.numSms"). A non-OK status stops the read with it. */
struct cp_imp_handler {
    enum cp_status (*event)(void *u, const struct cp_imp_event *e, struct cp_diag *d);
    enum cp_status (*top)(void *u, const char *key, const struct cp_imp_val *v, struct cp_diag *d);
    void *u;
};

/* What reading a file found, besides the events. */
struct cp_imp_read_info {
    uint64_t bytes;         /* read (decompressed) */
    bool root_array;        /* the events are the top-level array */
    bool found_events;      /* an events array was found */
    uint64_t control_bytes; /* raw control characters inside strings, read as spaces */
};

/* Read the source once, calling h. Errors: I/O (CP_ERR_IO), JSON that is
 * not well formed or ends early (CP_ERR_INVALID with the byte offset), or
 * the handler's. */
enum cp_status cp_imp_read_chrome(const struct cp_imp_src *src, const struct cp_imp_handler *h,
                                  struct cp_imp_read_info *info, struct cp_diag *d);

/* Times beyond this many ns (146 years) are not times: sums and
 * differences of two of them then never overflow. */
#define CP_IMP_MAX_NS ((int64_t)1 << 62)

/* Helpers on values. */
bool cp_imp_val_is(const struct cp_imp_val *v, const char *s);
/* A time in microseconds ("1736408883688177.930", "1.5e3", "\t 12 ") as
 * nanoseconds, rounded; false when it is not a number or out of range. */
bool cp_imp_us_to_ns(const struct cp_imp_val *v, int64_t *ns);
/* A number (or a string holding one) as a double; false otherwise. */
bool cp_imp_val_num(const struct cp_imp_val *v, double *out);
/* The value of args[key], or NULL. */
const struct cp_imp_val *cp_imp_arg(const struct cp_imp_event *e, const char *key);

/* ---- the spill: events parsed once, kept compact on disk (spill.c) -------------- */

/* One event as the parse left it: times in ns, strings as ids of the
 * spill's string table (-1: absent), numeric arguments as numbers. */
struct cp_imp_rec {
    char ph;
    bool has_ts;
    int64_t ts, dur;
    int32_t name, cat, pid, tid;
    int32_t op_name, provider, task_type; /* the string arguments placement reads */
    int32_t transport;                    /* an HCCL task's "transport type" */
    int64_t correlation, external;        /* Kineto's links; -1: none */
    uint32_t n_num;
    int32_t num_key[CP_IMP_MAX_ARGS];
    double num_val[CP_IMP_MAX_ARGS];
};

struct cp_imp_spill;
/* A spill in an unnamed temporary file (gone when closed or when the
 * process ends). Errors: CP_ERR_IO when no temporary file can be made. */
enum cp_status cp_imp_spill_open(struct cp_imp_spill **sp, struct cp_diag *d);
void cp_imp_spill_close(struct cp_imp_spill *sp); /* NULL is a no-op */
/* The id of a string (the same text, the same id); -1 for an absent value
 * or when out of memory (then cp_imp_spill_put fails). */
int32_t cp_imp_spill_str(struct cp_imp_spill *sp, const struct cp_imp_val *v);
/* The text of an id; an absent value for -1. */
struct cp_imp_val cp_imp_spill_text(const struct cp_imp_spill *sp, int32_t id);
enum cp_status cp_imp_spill_put(struct cp_imp_spill *sp, const struct cp_imp_rec *r,
                                struct cp_diag *d);
/* Back to the first event, then each in turn; *more false after the last. */
enum cp_status cp_imp_spill_rewind(struct cp_imp_spill *sp, struct cp_diag *d);
enum cp_status cp_imp_spill_next(struct cp_imp_spill *sp, struct cp_imp_rec *r, bool *more,
                                 struct cp_diag *d);

/* ---- writing the run ------------------------------------------------------------ */

/* The array v (n elements of `size` bytes used, *cap allocated) with room
 * for one more: v itself, or v grown (doubling, from `first`); NULL when
 * out of memory, v then unchanged. */
void *cp_imp_grow(void *v, size_t n, size_t *cap, size_t size, size_t first);

/* A byte per id (a spill or intern id): make v[id] exist, new bytes 0.
 * false when out of memory (v unchanged). */
bool cp_imp_byte_slot(uint8_t **v, size_t *cap, size_t id);
/* The same for 32-bit values, new slots set to `unseen`. */
bool cp_imp_u32_slot(uint32_t **v, size_t *cap, size_t id, uint32_t unseen);

/* Owned strings, for keys of a cp_strmap (which borrows them). */
struct cp_imp_pool {
    char **s;
    size_t n, cap;
};
/* A copy of s[0..len) kept until cp_imp_pool_release; NULL on OOM. */
const char *cp_imp_pool_add(struct cp_imp_pool *p, const char *s, size_t len);
void cp_imp_pool_release(struct cp_imp_pool *p);

struct cp_imp_acc {
    int32_t iteration;
    const char *name; /* pool */
    bool additive;
    double sum, weight;
};

/* Repeated chains of device tasks one kernel could run (fusible.c). */
#define CP_IMP_FUSE_MAX 10
struct cp_imp_fuse_stream {
    int32_t op[CP_IMP_FUSE_MAX]; /* a ring of the last tasks' op type ids */
    double us[CP_IMP_FUSE_MAX];
    bool light[CP_IMP_FUSE_MAX];
    size_t head, n;
    uint64_t tasks; /* tasks seen on the stream */
};
struct cp_imp_fuse_seq {
    int32_t op[CP_IMP_FUSE_MAX]; /* len op type ids */
    uint8_t len;
    uint32_t count;
    double us, light_us;
    size_t stream;     /* of the last occurrence counted */
    uint64_t last_end; /* its last task's number on that stream (+ 1) */
};
struct cp_imp_fuse_slot {
    uint64_t h;
    int32_t seq; /* -1: empty */
};
struct cp_imp_fusible {
    struct cp_imp_pool pool;
    struct cp_strmap op_ix; /* op name -> id */
    const char **ops;       /* op name by id */
    size_t n_ops, cap_ops;
    uint32_t *key_op; /* the caller's key (a kernel index) -> op id; UINT32_MAX: unseen */
    size_t cap_key_op;
    int64_t *stream_key;
    size_t cap_stream_key, last_stream;
    struct cp_imp_fuse_stream *streams;
    size_t n_streams, cap_streams;
    struct cp_imp_fuse_seq *seqs;
    size_t n_seqs, cap_seqs;
    struct cp_imp_fuse_slot *tab; /* chains by hash, open addressing */
    size_t cap_tab;
    double task_us;
    bool full; /* FUSE_SEQS distinct chains reached */
};
void cp_imp_fusible_init(struct cp_imp_fusible *f);
void cp_imp_fusible_release(struct cp_imp_fusible *f);
/* One task, in order: its stream, its op (key: the caller's id of it, a
 * kernel index, or -1; op: its name), time and largest MTE ratio (NaN:
 * none). */
enum cp_status cp_imp_fusible_task(struct cp_imp_fusible *f, int64_t stream, int32_t key,
                                   struct cp_imp_val op, double us, double mte, struct cp_diag *d);
/* The candidates: counter fusible.top_share, meta fusible_sequences (the
 * top 5, JSON), r->fusible (the best, in words). */
struct cp_imp_sink;
enum cp_status cp_imp_fusible_finish(struct cp_imp_fusible *f, struct cp_imp_sink *k,
                                     struct cp_import_result *r, struct cp_diag *d);

/* The most pipeline stages a rank's stage is believed among. */
#define CP_IMP_MAX_STAGES 4096

/* A cluster's ranks compared after their import (cluster_compare.c):
 * meta cluster.rank_comparison and r->rank_comparison (the slowest rank
 * against the fastest by op type), counters cluster.stage_compute_spread
 * and cluster.slowest_stage when every rank said its pipeline stage. */
enum cp_status cp_imp_cluster_compare(struct cp_trace_store *s, struct cp_import_result *r,
                                      struct cp_diag *d);

/* Framework op sequences torch_npu has a fused API for (sequences.c). */
#define CP_IMP_N_SEQ 4
struct cp_imp_seq_state {
    int step, gap; /* the next step to match (0: none under way); ops since the last */
    int32_t it;
    uint64_t start, end;
};
struct cp_imp_seqs {
    uint32_t *bits; /* event name id -> the steps it matches (UINT32_MAX: unseen) */
    size_t cap_bits;
    struct cp_imp_seq_state *state; /* per thread, per pattern */
    size_t n_threads;
    uint64_t app_events; /* framework-layer events in steps: the matchers read them */
};

struct cp_imp_sink {
    struct cp_trace_store *store;
    int64_t run;
    struct cp_trace_recorder *rec;
    struct cp_imp_pool pool;
    struct cp_strmap kernel_ix; /* kernel name -> index */
    struct cp_trace_kernel *kernels;
    size_t n_kernels, cap_kernels;
    struct cp_strmap thread_ix; /* "pid/tid" -> thread number */
    size_t n_threads;
    struct cp_strmap counter_ix; /* counter name -> its index in pool */
    struct cp_strmap acc_ix;     /* "iteration\x1fname" -> index into acc */
    struct cp_imp_acc *acc;
    size_t n_acc, cap_acc;
    struct cp_trace_counter_value *counters;
    size_t n_counters, cap_counters;
    uint8_t *api; /* event name id -> what the call analyses count it as */
    size_t cap_api;
    struct cp_imp_seqs seq;
    struct cp_import_result *r;
};

/* Open the store and begin a run of kind "import" for `source` in
 * `format`. */
enum cp_status cp_imp_sink_open(struct cp_imp_sink *k, const char *trace_path, const char *source,
                                const char *format, struct cp_import_result *r, struct cp_diag *d);
/* Attach to run `run` of the store, already written: what is added then
 * is counters (and meta); finish writes no kernels and no samples. */
enum cp_status cp_imp_sink_attach(struct cp_imp_sink *k, const char *trace_path, int64_t run,
                                  struct cp_import_result *r, struct cp_diag *d);
/* The kernel index of (name, op_type, impl, origins), added on first sight. */
enum cp_status cp_imp_sink_kernel(struct cp_imp_sink *k, const char *name, size_t len,
                                  const char *op_type, const char *impl, const char *origins,
                                  int32_t *idx, struct cp_diag *d);
/* The thread number of a (pid, tid) pair, numbered in order of first
 * sight (0 .. 32767; beyond that they share the last). */
enum cp_status cp_imp_sink_thread(struct cp_imp_sink *k, const struct cp_imp_val *pid,
                                  const struct cp_imp_val *tid, int *thread, struct cp_diag *d);
/* A framework op of a step, for the sequence matchers (sequences.c). */
enum cp_status cp_imp_seq_event(struct cp_imp_sink *k, int32_t id, const char *name, size_t len,
                                int thread, int32_t it, uint64_t start_ns, uint64_t end_ns,
                                struct cp_diag *d);
void cp_imp_seq_release(struct cp_imp_seqs *q);
/* The fused API of pattern p (0 .. CP_IMP_N_SEQ - 1). */
const char *cp_imp_seq_api(int p);
/* One interval. */
enum cp_status cp_imp_sink_event(struct cp_imp_sink *k, enum cp_trace_layer layer, const char *name,
                                 size_t len, int32_t kernel, int32_t iteration, uint64_t start_ns,
                                 uint64_t end_ns, int thread, struct cp_diag *d);
/* One counter value (the name is copied into the pool). */
enum cp_status cp_imp_sink_counter(struct cp_imp_sink *k, int32_t iteration, const char *name,
                                   double value, uint64_t ts_ns, struct cp_diag *d);
/* A value summed up per (iteration, name) and written as one counter when
 * the run finishes: additive ones add up (sizes, counts), the others are
 * means weighted by `weight` (the task's duration), as profilers' own
 * summaries weigh them. */
enum cp_status cp_imp_sink_acc(struct cp_imp_sink *k, int32_t iteration, const char *name,
                               double value, double weight, bool additive, struct cp_diag *d);
/* Note a file read beside the imported one (its name, in r->extras). */
void cp_imp_note_extra(struct cp_import_result *r, const char *path);
/* Set the run's meta "run.<run>.import.<key>". */
enum cp_status cp_imp_sink_meta(struct cp_imp_sink *k, const char *key, const char *value,
                                struct cp_diag *d);
/* Write what is buffered, the kernel table and the samples (one per
 * iteration, in order), and close. */
enum cp_status cp_imp_sink_finish(struct cp_imp_sink *k, const uint64_t *samples, size_t n,
                                  struct cp_diag *d);
/* On failure: remove the run, close. Safe after finish (then a no-op). */
void cp_imp_sink_abort(struct cp_imp_sink *k);

/* What a host or runtime event is to the analyses that count calls
 * (docs/import.md, "Calls counted"). */
enum cp_imp_api {
    CP_IMP_API_UNSEEN = 0,
    CP_IMP_API_OTHER,
    CP_IMP_API_COMPILE,    /* an operator compiled at run time, then run */
    CP_IMP_API_SYNC,       /* the host waits for the device */
    CP_IMP_API_LAUNCH,     /* a kernel launch */
    CP_IMP_API_MEMORY,     /* device memory taken from or given back to the driver */
    CP_IMP_API_SYNCBN,     /* a SyncBatchNorm op (a collective per call) */
    CP_IMP_API_DATALOADER, /* the framework's data loader, fetching a batch */
    CP_IMP_API_GC,         /* Python's garbage collector (torch_npu's GC track) */
};
/* An event's name ("AscendCL@aclrtFree", "cudaLaunchKernel",
 * "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__") as one of
 * those, on its layer. */
enum cp_imp_api cp_imp_api_kind(const char *name, size_t len, enum cp_trace_layer layer);

/* ---- torch_npu's and msprof's task CSVs (csv_ascend.c) --------------------------- */

/* One row of a CSV file: its fields, NUL-terminated, and their lengths. */
struct cp_imp_row {
    const char **f;
    size_t *len;
    size_t n;
    uint64_t number; /* 1 = the header */
};

typedef enum cp_status (*cp_imp_row_fn)(void *u, const struct cp_imp_row *r, struct cp_diag *d);

/* Call fn for every row of a CSV file (plain or gzip), the header first,
 * with libcsv in strict mode: a malformed or truncated file is an error
 * naming its byte offset and row. *bytes: the bytes read. */
enum cp_status cp_imp_read_csv(const char *path, cp_imp_row_fn fn, void *u, uint64_t *bytes,
                               struct cp_diag *d);
/* Field i of a row as a value: blanks (and the trailing tab of torch_npu's
 * timestamps) trimmed, N/A and empty as absent (also for i < 0 or beyond
 * the row). */
struct cp_imp_val cp_imp_cell(const struct cp_imp_row *r, int i);
/* The index of the header column named `name` (a byte order mark on the
 * first is ignored); -1 when absent. */
int cp_imp_column(const struct cp_imp_row *header, const char *name);

enum cp_status cp_imp_ascend_csv(const char *path, const char *trace_path,
                                 struct cp_import_result *r, struct cp_diag *d);
/* A task table's hardware columns as counters of a timeline's run (run):
 * each row in the iteration whose step.number is its Step Id. Its tasks
 * are the timeline's already, so no event is added. A failure removes the
 * run (the import is all or nothing). */
enum cp_status cp_imp_ascend_csv_counters(const char *path, const char *trace_path, int64_t run,
                                          struct cp_import_result *r, struct cp_diag *d);

/* ---- steps (steps.c) -------------------------------------------------------------- */

struct cp_imp_step {
    int64_t start, end; /* ns, as the profile gives them */
    int64_t number;     /* the profiler's own number; -1: its index once sorted */
};

struct cp_imp_steps {
    struct cp_imp_step *v;
    size_t n, cap;
};

enum cp_status cp_imp_steps_add(struct cp_imp_steps *s, int64_t start, int64_t end, int64_t number,
                                struct cp_diag *d);
/* By start; a number of -1 becomes the step's index. */
void cp_imp_steps_sort(struct cp_imp_steps *s);
/* The step (iteration) an event starting at ts belongs to (sorted steps):
 * the one whose interval holds it; for device work, which runs after the
 * host launched it, also the last step begun before it when it starts
 * within that step's length after its end. -1 before the first step or in
 * a gap; 0 when there are no steps (the whole profile is one iteration). */
int32_t cp_imp_steps_of(const struct cp_imp_steps *s, int64_t ts, bool device);
/* Finish the run: one sample per step (its length), or one for the window
 * [window_start, window_end) without steps; step.number per iteration;
 * the time base; then cp_imp_sink_finish. */
enum cp_status cp_imp_steps_finish(const struct cp_imp_steps *s, struct cp_imp_sink *k,
                                   int64_t window_start, int64_t window_end, struct cp_diag *d);
void cp_imp_steps_release(struct cp_imp_steps *s);

/* ---- the other files of a torch_npu run folder (ascend_extras.c, ascend_tables.c) -- */

/* Whether path is a folder. */
bool cp_imp_is_dir(const char *path);
/* The first entry (by name) of dir whose name starts with prefix, ends
 * with suffix (NULL: any) and not with not_suffix (NULL: none), as
 * "dir/name" in out; false when there is none (import.c). */
bool cp_imp_first_entry(const char *dir, const char *prefix, const char *suffix,
                        const char *not_suffix, char *out, size_t n);

/* The device a run was profiled on, from its info.json (PROF_<id>/device_N/). */
struct cp_imp_device {
    char path[1500];     /* "": no info.json found */
    long long ai_cores;  /* AI Cores (cube); 0: not known */
    long long aiv_cores; /* AI Vector cores; 0: not known */
    double aic_mhz;      /* the AI Core's nominal clock; NaN: not known */
};
/* The info.json of the run whose output folder is `dir`: found beside it
 * (torch_npu's <run>/PROF_<id>/device_<n>/info.json.<n>, msprof's
 * PROF_<id>/device_<n>/) or under it. None is no error (path ""); one
 * that is not JSON or has no DeviceInfo is. */
enum cp_status cp_imp_ascend_device(const char *dir, struct cp_imp_device *dev, struct cp_diag *d);
/* The iteration of a communication step key "step<N>" (the one whose
 * step.number is N); 0 when the run is one window, -1 when no step has N. */
int32_t cp_imp_comm_step(const struct cp_trace_point *steps, size_t n, const char *key);
/* The size (MB) below which a packet on a link type is small. */
double cp_imp_small_packet_mb(const char *link);
/* analysis.db (torch_npu's DB export of the communication analyses),
 * read like communication.json and communication_matrix.json: its tables
 * CommAnalyzerTime, CommAnalyzerBandwidth and CommAnalyzerMatrix, each by
 * its column names; a table without them is skipped and said so. The
 * longest RDMA transit raises *rdma_max_ms. */
enum cp_status cp_imp_analysis_db(struct cp_imp_sink *k, const char *path,
                                  const struct cp_trace_point *steps, size_t n_steps,
                                  double *rdma_max_ms, struct cp_diag *d);
/* The summary tables of `dir` (op_statistic, api_statistic,
 * operator_details, operator_memory, communication_matrix.json) and the
 * device's info.json, each when there, added to the sink's run. */
enum cp_status cp_imp_ascend_tables(struct cp_imp_sink *k, const char *dir, struct cp_diag *d);

/* communication.json and memory_record.csv of `dir` (an
 * ASCEND_PROFILER_OUTPUT), when there, added to run `run`: per-step
 * collective times (comm.*_ms), the memory peak. A failure removes the run. */
enum cp_status cp_imp_ascend_extras(const char *dir, const char *trace_path, int64_t run,
                                    struct cp_import_result *r, struct cp_diag *d);

/* ---- SQLite profiles: torch_npu / msprof DBs, Nsight Systems (sqlite_profiles.c) -- */

enum cp_status cp_imp_sqlite(const char *path, const char *trace_path, struct cp_import_result *r,
                             struct cp_diag *d);

/* ---- TensorRT's trtexec exports (trt.c) ---------------------------------------- */

/* Whether the first bytes of a JSON file are a trtexec export's. */
bool cp_imp_trt_sniff(const char *head, size_t n);
enum cp_status cp_imp_trt(const char *path, const char *trace_path, struct cp_import_result *r,
                          struct cp_diag *d);

/* ---- the Chrome dialects ------------------------------------------------------- */

enum cp_status cp_imp_chrome(const struct cp_imp_src *src, enum cp_import_format format,
                             const char *trace_path, struct cp_import_result *r, struct cp_diag *d);

#endif
