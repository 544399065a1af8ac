/* Flows in ModelBox's format (docs/pipelines.md): a TOML file whose
 * [graph] graphconf is a DOT graph of flowunits, read, checked and run by
 * an executor with worker threads per node, bounded queues with
 * back-pressure, batching and loops. A run records every node invocation
 * in the trace store: its wall time split into on-CPU, waiting for a CPU
 * and off-CPU, its wait on its input queue, its time blocked pushing to a
 * full output queue, the queue's depth and the requests it carried. */
#ifndef CP_PIPELINE_H
#define CP_PIPELINE_H

#include "core/core.h"
#include "report/doc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cp_flow;

/* Read and check a flow file. Errors (CP_ERR_INVALID, naming file:line):
 * not TOML, no [graph] graphconf, DOT that does not parse, an unknown
 * flowunit, a key with a bad value, a port other than in/out, an edge into
 * a source or out of a sink, a cycle not through a loop node, a loop
 * without one edge into its body and one out, a model or folder that does
 * not exist. OUT: *out (free with cp_flow_free). */
enum cp_status cp_flow_load(const char *path, struct cp_flow **out, struct cp_diag *d);
void cp_flow_free(struct cp_flow *f); /* NULL is a no-op */

struct cp_flow_node_info {
    const char *name, *flowunit, *device;
    int batch_size, queue_size, workers, line;
};

size_t cp_flow_n_nodes(const struct cp_flow *f);
void cp_flow_node(const struct cp_flow *f, size_t i, struct cp_flow_node_info *out);
const char *cp_flow_name(const struct cp_flow *f);
/* The node called `name`; -1 when the flow has none. */
int cp_flow_node_index(const struct cp_flow *f, const char *name);
/* Node i's key `key` as the file gives it (NULL when absent). */
const char *cp_flow_node_attr(const struct cp_flow *f, size_t i, const char *key);
/* The flow's edges, in the order the file gives them: edge i runs from
 * node *from to node *to (indices of cp_flow_node); *back is true for a
 * loop body's way back into its loop. */
size_t cp_flow_n_edges(const struct cp_flow *f);
void cp_flow_edge(const struct cp_flow *f, size_t i, size_t *from, size_t *to, bool *back);

struct cp_flow_run_opts {
    uint64_t requests;      /* the sources send this many; 0: until duration_s */
    double duration_s;      /* > 0: the sources stop sending after this long */
    const char *trace_path; /* NULL: nothing recorded */
    bool model_layer;       /* inference nodes record the runtime and kernel layers */
};

struct cp_flow_node_stats {
    char name[128];
    uint64_t calls, items;
    double busy_s;    /* processing (start to end of each call) */
    double cpu_s;     /* of which on a CPU */
    double runq_s;    /* runnable, waiting for a CPU */
    double offcpu_s;  /* neither: sleeping, I/O, locks */
    double starved_s; /* waiting on the input queue */
    double blocked_s; /* blocked pushing to a full output queue */
    size_t max_depth; /* the input queue's deepest */
};

struct cp_flow_run_result {
    uint64_t sent, done; /* requests */
    double seconds;      /* first send to last completion */
    double throughput;   /* requests per second */
    double latency_mean_ms, latency_p50_ms, latency_p99_ms;
    int64_t run_id; /* in the trace; -1: none */
    struct cp_flow_node_stats *nodes;
    size_t n_nodes;
};

/* Run the flow. Errors: a unit that fails on a request (CP_ERR_INVALID,
 * naming the node and the request's file), a model that cannot be loaded,
 * a trace that cannot be written. OUT: *r (release with
 * cp_flow_run_result_release, also after a failure). */
enum cp_status cp_flow_run(const struct cp_flow *f, const struct cp_flow_run_opts *o,
                           struct cp_flow_run_result *r, struct cp_diag *d);
void cp_flow_run_result_release(struct cp_flow_run_result *r);

/* ---- serving a flow (service.c) ------------------------------------------------------ */

struct cp_flow_service;

/* One node call of a served flow: the node, the items it took, its input
 * queue's depth when it popped them, its wait on that queue, its busy time
 * (processing the batch), its time blocked pushing (ns), and when it was
 * done (cp_clock_ns). */
struct cp_flow_call_info {
    size_t node;
    uint32_t batch, depth;
    int64_t wait_ns, busy_ns, blocked_ns, done_ns;
};

/* Called after each node call of a served flow, on the worker's thread. */
typedef void (*cp_flow_call_fn)(void *ctx, const struct cp_flow_call_info *c);

/* Start serving flow f until cp_flow_service_stop: its one file_source
 * takes the callers' requests (cp_flow_service_call) instead of reading
 * its folder, and its one file_sink hands each request's payload back
 * instead of writing it. `on_call` (may be NULL) sees every node call.
 * Errors: a flow with other than one source and one sink (CP_ERR_INVALID),
 * a unit that does not open (a model that does not load). OUT: *out. */
enum cp_status cp_flow_service_start(const struct cp_flow *f, cp_flow_call_fn on_call,
                                     void *call_ctx, struct cp_flow_service **out,
                                     struct cp_diag *d);

/* The answer of a request: the sink's payload bytes (a PNG, text, raw
 * bytes), or its first tensor as a .npy (npy true). */
struct cp_flow_answer {
    uint8_t *bytes;
    size_t len;
    bool npy;
    char name[256]; /* the request's name as the units left it */
};
void cp_flow_answer_release(struct cp_flow_answer *a);

/* Send one request, its source data (`data`, taken over and freed by the
 * service: it travels through the flow without a copy) under `name` (the
 * file name the units see), and wait for its answer. Thread-safe; blocks
 * while the source's queue is full (back-pressure). Errors: a unit that
 * fails on it (its message, naming node and request), the service stopping
 * (CP_ERR_IO). OUT: *a (release). */
enum cp_status cp_flow_service_call(struct cp_flow_service *s, const char *name, uint8_t *data,
                                    size_t len, struct cp_flow_answer *a, struct cp_diag *d);

/* A request the flow takes: the first file of its source's folder
 * (warm-up, the server's description). OUT: *data (free), *len, name. */
enum cp_status cp_flow_service_sample(const struct cp_flow_service *s, uint8_t **data, size_t *len,
                                      char name[256], struct cp_diag *d);
size_t cp_flow_service_n_nodes(const struct cp_flow_service *s);
const char *cp_flow_service_node_name(const struct cp_flow_service *s, size_t node);

/* Record every node call and request from now on (a deep trace), with the
 * runtime and kernel layers of the inference nodes' calls (on their
 * workers' threads), and write what was recorded as a pipeline run of
 * `trace` (kind: NULL "pipeline"), then forget it. Ending waits for an
 * inference call of the window still running. Errors: nothing came through
 * while recording (CP_ERR_INVALID: an empty capture), the trace cannot be
 * written. OUT: *run_id, *model_events (the runtime and kernel events
 * written; may be NULL). */
void cp_flow_service_record_begin(struct cp_flow_service *s);
enum cp_status cp_flow_service_record_end(struct cp_flow_service *s, const char *trace,
                                          const char *kind, int64_t *run_id, size_t *model_events,
                                          struct cp_diag *d);

/* A fire drill: from from_ns (cp_clock_ns) on, every call of `node` takes
 * `ms` longer, spinning on its worker's CPU after its work, as a slower
 * unit would (0: none). */
void cp_flow_service_inject(struct cp_flow_service *s, size_t node, int64_t from_ns, double ms);

/* An open-loop workload driven in process, as `cannprof load` drives a
 * server but without HTTP: Poisson arrivals at `rate` (stats/stats.h's,
 * seeded) for duration_s or `requests` of them, each sending the flow's
 * sample (cp_flow_service_sample) from one of `concurrency` threads, its
 * latency counted from its intended send time. */
struct cp_flow_load_opts {
    double rate;
    double duration_s; /* 0: until `requests` */
    uint64_t requests; /* 0: until duration_s */
    int concurrency;   /* 1 .. 1024 */
    uint64_t seed;
};

struct cp_flow_load_result {
    uint64_t sent, ok, failed;
    double seconds;    /* first intended send to last answer */
    double throughput; /* answered per second */
    double mean_ms, p50_ms, p99_ms;
};

enum cp_status cp_flow_service_load(struct cp_flow_service *s, const struct cp_flow_load_opts *o,
                                    struct cp_flow_load_result *r, struct cp_diag *d);

/* Stop: no new request is taken, those in flight are answered, the
 * workers end. NULL is a no-op. */
void cp_flow_service_stop(struct cp_flow_service *s);

/* ---- node-bottleneck ------------------------------------------------------------------ */

struct cp_bottleneck_node {
    char name[128], flowunit[32];
    int workers, batch_size, queue_size;
    bool source;
    uint64_t calls, items;
    double busy_s, cpu_s, runq_s, starved_s, blocked_s;
    double util;                                /* busy / (workers x window) */
    double starved;                             /* waiting on the empty input queue, same base */
    double blocked;                             /* blocked pushing to a full queue, same base */
    double cpu_share, runq_share, offcpu_share; /* of busy */
    double mean_batch, visits;                  /* items per call; items per request */
    double capacity;                            /* requests per second it can carry */
    double depth_sum, mean_depth;
    uint32_t max_depth;
    int64_t model_run; /* an inference node: the run of its (first worker's) model; -1 */
};

/* A call on a request's path: its queue wait before it, its service, its
 * push after. */
struct cp_bottleneck_step {
    int32_t node;
    double queue_ms, service_ms, push_ms;
    uint32_t batch;
};

#define CP_BOTTLENECK_MAX_PROBLEMS 16

struct cp_bottleneck_problem {
    char kind[32]; /* io_bound, back_pressure, queue_too_small, batch_underfilled,
                      cpu_oversubscribed, input_bound */
    int node;      /* -1: the flow */
    char text[512];
    char fix_key[32]; /* the node key that fixes it ("workers"), "" when none */
    long fix_value;
};

struct cp_bottleneck {
    int64_t run_id;
    char flow[1100]; /* the flow file the run ran */
    size_t requests;
    double window_s, throughput, p50_ms, p99_ms;
    struct cp_bottleneck_node *nodes;
    size_t n_nodes;
    int limiting;      /* the node limiting throughput; -1: none busy half its time */
    double ceiling;    /* the throughput it allows (requests/s) */
    double confidence; /* share of the run's windows in which it is the busiest */
    char evidence[512];
    int64_t p50_request, p99_request;
    struct cp_bottleneck_step *p50_path, *p99_path;
    size_t n_p50_path, n_p99_path;
    struct cp_bottleneck_problem problems[CP_BOTTLENECK_MAX_PROBLEMS];
    size_t n_problems;
};

/* Analyse pipeline run `run` (< 0: the last) of a trace. Errors: not a
 * pipeline run, no calls (CP_ERR_INVALID). OUT: *b (release with
 * cp_bottleneck_release). */
enum cp_status cp_node_bottleneck(const char *trace, int64_t run, struct cp_bottleneck *b,
                                  struct cp_diag *d);
void cp_bottleneck_release(struct cp_bottleneck *b);
/* The report: text (md: Markdown), JSON (NULL when out of memory), and a
 * document (report/doc.h: self-contained HTML or PDF, with a chart of
 * where each node's time went; NULL when out of memory; cp_doc_free). */
void cp_bottleneck_text(const struct cp_bottleneck *b, const char *trace, bool md,
                        struct cp_buf *o);
struct cp_doc *cp_bottleneck_doc(const struct cp_bottleneck *b, const char *trace);
struct json_t *cp_bottleneck_json(const struct cp_bottleneck *b, const char *trace);

/* ---- what if ----------------------------------------------------------------------------- */

#define CP_WHATIF_MAX_CHANGES 16

struct cp_whatif_change {
    char node[128], key[32], value[64];
    int line; /* the node's, in the flow file */
};

struct cp_whatif_figures {
    double throughput; /* requests per second */
    double p50_ms, p99_ms, mean_ms;
};

struct cp_flow_whatif {
    int64_t run_id;
    char flow[1100]; /* the flow file the run ran */
    uint64_t requests;
    struct cp_whatif_change changes[CP_WHATIF_MAX_CHANGES];
    size_t n_changes;
    struct cp_whatif_figures measured;  /* the run as recorded */
    struct cp_whatif_figures replayed;  /* the replay of the flow as it was */
    struct cp_whatif_figures simulated; /* the replay with the changes */
    struct cp_whatif_figures predicted; /* measured x simulated / replayed */
};

/* Replay pipeline run `run` of a trace with `changes`
 * ("node.key=value,...": speed (a factor), workers, batch_size,
 * queue_size, batch_window_ms) and predict the flow's throughput and latency
 * (docs/pipelines.md, "What if"). Errors: not a pipeline run
 * (CP_ERR_INVALID), a change that names no node or key (CP_ERR_USAGE). */
enum cp_status cp_pipeline_whatif(const char *trace, int64_t run, const char *changes,
                                  struct cp_flow_whatif *w, struct cp_diag *d);

/* The same with both replays under an open-loop workload instead of the
 * sources sending as fast as they can: Poisson arrivals at `rate` requests
 * per second (seeded; stats/stats.h). The predicted figures are still the
 * measured ones times the ratio of the two replays: the change's effect at
 * that load, on the run as it was measured. rate 0: cp_pipeline_whatif. */
enum cp_status cp_pipeline_whatif_at(const char *trace, int64_t run, const char *changes,
                                     double rate, uint64_t seed, struct cp_flow_whatif *w,
                                     struct cp_diag *d);

/* Write the flow file `flow` with the changes made to its nodes' keys
 * (workers, batch_size, queue_size, batch_window_ms: set, or added to the
 * node's attribute list) as `out`. A speed change has no key: refused
 * (CP_ERR_USAGE). */
enum cp_status cp_flow_patch(const char *flow, const struct cp_whatif_change *c, size_t n,
                             const char *out, struct cp_diag *d);

/* Write the flow file `flow` with node `node`'s model set to `model` (a
 * path, quoted in the file) as `out`. CP_ERR_INVALID for a path with
 * quotes, backslashes or line ends, or a node without an attribute list. */
enum cp_status cp_flow_patch_model(const char *flow, const char *node, const char *model,
                                   const char *out, struct cp_diag *d);

#endif
