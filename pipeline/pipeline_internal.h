/* Inside pipeline/: the TOML reader (toml_bridge.cpp), the flow and its
 * checks (flow.c, dot.c), the payloads that travel between nodes and the
 * built-in flowunits (units.c, units_image.c), the queues and the executor
 * (queue.c, exec.c) and what a run records (record.c). */
#ifndef CP_PIPELINE_INTERNAL_H
#define CP_PIPELINE_INTERNAL_H

#include "pipeline/pipeline.h"
#include "runner/session.h"
#include "trace/query.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/toml_bridge.h"

/* ---- the flow ------------------------------------------------------------------------- */

enum pl_unit {
    PL_INFERENCE,
    PL_LOOP,
    PL_TOKENIZE,
    PL_IMAGE_DECODE,
    PL_IMAGE_ENCODE,
    PL_RESIZE,
    PL_NORMALIZE,
    PL_FILE_SOURCE,
    PL_FILE_SINK,
    PL_DELAY,
    PL_N_UNITS
};

const char *pl_unit_name(enum pl_unit u);

struct pl_attr {
    char *key, *value;
};

struct pl_node {
    char *name;
    enum pl_unit unit;
    int line; /* in the flow file */
    char device[32];
    int batch_size, queue_size, workers;
    struct pl_attr *attrs; /* every key of the node, the engine's too */
    size_t n_attrs;
    size_t *in, *out; /* edge indices */
    size_t n_in, n_out;
    /* loop: the edge into its body, the edge out of it (-1 until known) */
    int loop_count;
    long body_edge, exit_edge;
};

struct pl_edge {
    size_t from, to;
    int line;
    bool back; /* a loop body's way back into its loop */
};

struct cp_flow {
    char *path;
    char *name; /* the digraph's */
    char *desc;
    struct pl_node *nodes;
    size_t n_nodes;
    struct pl_edge *edges;
    size_t n_edges;
    size_t *order; /* nodes, sources first (loops cut at their body edge) */
};

/* A node's attribute, NULL when absent. */
const char *pl_attr(const struct pl_node *n, const char *key);
/* A path of the flow (model=, dir=) as the units open it: relative paths
 * are the flow file's folder's. */
enum cp_status pl_flow_path(const struct cp_flow *f, const char *p, char *out, size_t n,
                            struct cp_diag *d);

/* Parse the graphconf DOT text (Graphviz's cgraph) into f's nodes and
 * edges; `line0` is the flow file's line of the DOT text's first line.
 * Errors name path:line. */
enum cp_status pl_dot_parse(struct cp_flow *f, const char *dot, int line0, struct cp_diag *d);

/* ---- payloads -------------------------------------------------------------------------- */

/* What one request carries from node to node: the file it came from, its
 * bytes (file contents, text, PNG) and its tensors. Shared by the branches
 * of a fan-out (refs); a unit that changes it makes its own. */
struct pl_payload {
    atomic_int refs;
    char name[256];
    uint8_t *bytes;
    size_t len;
    struct cp_host_tensor *t;
    size_t n_t;
};

struct pl_payload *pl_payload_new(void);
void pl_payload_ref(struct pl_payload *p);
void pl_payload_unref(struct pl_payload *p); /* NULL is a no-op */

/* An item in a queue: a request's payload on its way. */
struct pl_item {
    uint64_t request;
    int64_t emitted_ns; /* when the source sent it (CLOCK_MONOTONIC) */
    int loop_iter;      /* laps done in the loop it is in */
    struct pl_payload *p;
};

/* ---- flowunits --------------------------------------------------------------------------- */

/* One worker's instance of a unit (units.c): opened once per worker,
 * processing batches. */
struct pl_unit_ctx;

struct pl_run_env {
    const struct cp_flow *flow;
    uint64_t requests;   /* how many the sources send; 0: until the deadline */
    int64_t deadline_ns; /* sources stop at this time; 0: none */
    atomic_ullong next_request;
    /* serving (service.c): the executor feeds the sources from this inbox
     * instead of their folders, and the sinks write nothing (the answer goes
     * back to the caller) */
    struct pl_queue *inbox;
    /* a served flow's recording counts the runtime's iterations from this
     * request on, as its node calls are (set by record_begin) */
    atomic_ullong iter_base;
};

/* Open node n's unit for one worker (models loaded, files listed); an
 * inference unit records its model's runtime and kernel layers into `rec`
 * (NULL: none) on the worker's `thread`. Errors name the node and its
 * line. */
enum cp_status pl_unit_open(const struct cp_flow *f, size_t node, int worker, int thread,
                            struct pl_run_env *env, struct cp_trace_recorder *rec,
                            struct pl_unit_ctx **out, struct cp_diag *d);
void pl_unit_close(struct pl_unit_ctx *u);
/* An inference unit's session and its model's path (NULL for other units). */
struct cp_session *pl_unit_session(struct pl_unit_ctx *u);
const char *pl_unit_model_path(const struct pl_unit_ctx *u);
/* Pause or resume an inference unit's recording (a served flow records
 * only the calls of a deep trace); other units record nothing. Call from
 * the worker's thread, between calls. */
void pl_unit_trace_pause(struct pl_unit_ctx *u, bool paused);
/* A file_source's first file (name order) and its folder; NULL for other
 * units. */
const char *pl_unit_first_file(const struct pl_unit_ctx *u, const char **dir);
/* Process a batch in place: each item's payload replaced by the unit's
 * output. A source fills items (n_in 0, up to *n_out, returning how many;
 * *n_out 0: the source is done). Errors name the node and the request. */
enum cp_status pl_unit_process(struct pl_unit_ctx *u, struct pl_item *items, size_t n,
                               size_t *n_out, struct cp_diag *d);

/* ---- queues ---------------------------------------------------------------------------- */

/* A bounded queue of items: push blocks while full (back-pressure), pop
 * waits while empty; both return what they waited. */
struct pl_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    struct pl_item *v;
    size_t cap, head, n; /* the ring */
    size_t limit;        /* a push waits while n >= limit (queue_size) */
    bool closed;
};

enum cp_status pl_queue_init(struct pl_queue *q, size_t cap, struct cp_diag *d);
void pl_queue_destroy(struct pl_queue *q);
/* Push; *blocked_ns the time spent waiting for room. false when closed. */
bool pl_queue_push(struct pl_queue *q, const struct pl_item *it, int64_t *blocked_ns);
/* Push without waiting, growing the queue past its size if need be: a
 * loop body's way back into its loop, which must never wait on the loop
 * (it would wait on itself). false when closed or out of memory. */
bool pl_queue_push_force(struct pl_queue *q, const struct pl_item *it);
/* Pop 1..max items: waits for the first, then takes what is there, waiting
 * up to window_ns for the batch to fill. Returns the count (0: closed and
 * empty); *depth the queue's length before the pop. */
size_t pl_queue_pop(struct pl_queue *q, struct pl_item *out, size_t max, int64_t window_ns,
                    size_t *depth);
void pl_queue_close(struct pl_queue *q);

/* ---- a recorded run (recorded.c) ----------------------------------------------------- */

struct pl_recorded {
    int64_t run_id;
    char flow[1100]; /* the flow file it ran */
    struct cp_trace_pipeline pl;
    struct cp_trace_node_call *calls;
    size_t n_calls;
    struct cp_trace_sample *samples; /* one per request */
    size_t n_samples;
    int cores; /* the host's; 0: not recorded */
    /* "model_run:NODE:WORKER" counters: the runs holding the inference
     * workers' models */
    struct cp_trace_counter *model_runs;
    size_t n_model_runs;
};

/* Read pipeline run `run` (< 0: the last) of a trace. Errors: not a
 * pipeline run, no calls or no requests (CP_ERR_INVALID). */
enum cp_status pl_recorded_read(const char *trace, int64_t run, struct pl_recorded *r,
                                struct cp_diag *d);
void pl_recorded_release(struct pl_recorded *r);

#endif
