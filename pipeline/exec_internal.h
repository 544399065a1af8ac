/* Inside the executor: its workers, their calls, and what exec.c,
 * exec_record.c (writing a run to the trace store) and service.c (a flow
 * served: requests in from the caller, answers out of the sink) share. */
#ifndef CP_PIPELINE_EXEC_INTERNAL_H
#define CP_PIPELINE_EXEC_INTERNAL_H

#include "pipeline/pipeline_internal.h"

struct pl_call {
    uint32_t node, worker, batch, depth;
    int thread;
    uint64_t seq;
    int64_t wait_ns, ready_ns, start_ns, end_ns, done_ns, blocked_ns, cpu_ns, runq_ns;
    uint64_t req_off; /* into the worker's request list */
};

struct pl_exec;

struct pl_worker {
    struct pl_exec *x;
    size_t node;
    int worker, thread;
    struct pl_unit_ctx *u;
    struct cp_trace_recorder *rec; /* the model layer (inference), or NULL */
    pthread_t th;
    bool started;
    struct pl_call *calls;
    size_t n_calls, cap_calls;
    uint64_t *reqs; /* each call's request ids, back to back */
    size_t n_reqs, cap_reqs;
    enum cp_status st;
    struct cp_diag d;
};

struct pl_exec {
    const struct cp_flow *f;
    struct pl_run_env env;
    struct pl_queue *q; /* a node's input queue */
    struct pl_worker *w;
    size_t n_w;
    atomic_llong live; /* items in queues or being processed */
    atomic_int sources_left;
    atomic_bool failed;
    atomic_ullong *seq;      /* per node: its next invocation number */
    int64_t t0;              /* the run's zero */
    pthread_mutex_t mu;      /* the request table and the first error */
    int64_t *emitted, *done; /* by request id; done 0: not completed */
    size_t cap_req;
    uint64_t n_done;
    struct cp_diag err;
    bool have_err;
    /* serving (service.c): requests come from the caller through the
     * sources' inbox, answers go back from the sink to their waiters; calls
     * and requests are kept only while recording, from request rec_base on */
    bool service;
    struct pl_queue inbox;
    atomic_bool recording;
    uint64_t rec_base;
    /* inference calls running with their model layer on (under mu);
     * record_end waits for them on traced_cv before reading the recorders */
    size_t traced_calls;
    pthread_cond_t traced_cv;
    /* the fire drill (cp_flow_service_inject), per node: from when and how
     * much longer each call takes; NULL outside a service */
    struct pl_inject {
        atomic_llong from_ns, ns;
    } * inject;
    struct pl_waiter *waiters; /* under mu */
    void (*on_call)(void *ctx, const struct pl_exec *x, const struct pl_call *c);
    void *call_ctx;
};

/* A caller waiting for its request's answer (service.c). */
struct pl_waiter {
    uint64_t request;
    bool done;
    struct pl_payload *answer; /* owned once done; NULL after a failure */
    struct cp_diag err;
    pthread_cond_t cv;
    struct pl_waiter *next;
};

/* Open the executor of flow f: queues, every worker's unit (models loaded
 * before any thread starts). model_layer: inference workers get a
 * recorder for the runtime and kernel layers. On failure everything opened
 * is closed again (pl_exec_close is still safe). */
enum cp_status pl_exec_open(struct pl_exec *x, const struct cp_flow *f, bool model_layer,
                            struct cp_diag *d);
/* Start the workers (t0 is now). On a thread that cannot start, the run
 * fails and what started is left to join. */
enum cp_status pl_exec_start(struct pl_exec *x, struct cp_diag *d);
void pl_exec_join(struct pl_exec *x);
void pl_exec_close(struct pl_exec *x);

/* Close every queue: the workers drain and stop. */
void pl_exec_close_queues(struct pl_exec *x);

/* Write the run to `trace_path` (exec_record.c): kind "pipeline" (or
 * `kind`), the samples of the requests rec_base .. rec_base+n_req-1 that
 * completed (iteration = id - rec_base, stopping at the first that did
 * not), the flow, every recorded call (request ids less rec_base) with an
 * application-layer event, and the workers' model layers. OUT: *run_id. */
enum cp_status pl_exec_record(struct pl_exec *x, const char *trace_path, const char *kind,
                              int64_t *run_id, struct cp_diag *d);

/* A served request's answer or failure (service.c, called from route and
 * the workers): wakes its waiter. `p` is handed over (NULL: failed, with
 * `err`). */
void pl_service_answer(struct pl_exec *x, uint64_t request, struct pl_payload *p,
                       const struct cp_diag *err);

#endif
