/* Serving a model over HTTP (docs/serving.md) and loading a server with
 * requests: `cannprof serve MODEL --port P` (libmicrohttpd) answers
 * GET /v1/model, POST /v1/infer, GET /health and GET /metrics, batching
 * requests dynamically, and drains on SIGTERM; `cannprof load URL` sends
 * requests open-loop at a Poisson rate and measures each from the time it
 * was meant to leave, so a slow server cannot hide behind its own slowness
 * (coordinated omission). */
#ifndef CP_SERVE_H
#define CP_SERVE_H

#include "core/core.h"
#include "core/json.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cp_session;
struct cp_trace_recorder;
struct cp_flow_service;
struct cp_flow_call_info;

/* One answered request, as a monitor sees it (serve/serve.h's hooks).
 * Times are cp_clock_ns(); a stage the request never reached is 0 (a
 * request refused with a 4xx was never queued). The served model is seen as
 * a flow of three nodes: "http" (the request read and parsed on its
 * connection's thread), "model" (queued, then run in a batch by the
 * batching thread) and "reply" (the answer encoded on the connection's
 * thread). */
struct cp_serve_event {
    uint64_t id;                         /* the request's number, from 1 */
    int code;                            /* the HTTP status answered */
    int64_t arrive_ns;                   /* its first callback on the connection */
    int64_t queued_ns;                   /* parsed and queued for a batch */
    int64_t popped_ns;                   /* its batch was taken off the queue */
    int64_t run_start_ns, run_end_ns;    /* its batch ran */
    int64_t woken_ns;                    /* its connection's thread took the outputs */
    int64_t replied_ns;                  /* the answer was queued to the connection */
    uint64_t batch_seq;                  /* the batch it ran in, from 1 */
    uint32_t batch;                      /* requests in that batch */
    uint32_t depth;                      /* the queue's length when the batch was popped */
    int64_t batch_wait_ns;               /* the batcher waited for work before the pop */
    int64_t batch_cpu_ns, batch_runq_ns; /* the batcher during the run */
    int64_t parse_cpu_ns, parse_runq_ns; /* the connection's thread, arrive..queued */
    int64_t reply_cpu_ns, reply_runq_ns; /* the connection's thread, woken..replied */
    uint64_t connection;                 /* the connection it came on, from 1 */
};

/* What a monitor plugs into a server (NULL members are not called). */
struct cp_serve_hooks {
    void *ctx;
    /* Every answered request, on its connection's thread, after the answer
     * is queued: must be thread-safe and quick. */
    void (*on_request)(void *ctx, const struct cp_serve_event *e);
    /* Polled by the batching thread before each batch: record this batch's
     * runtime and kernel layers. */
    bool (*kernels_wanted)(void *ctx);
    /* When kernels stop being wanted (and at shutdown), on the batching
     * thread: the session, the recorder holding the recorded batches'
     * events (iterations 0..n-1) and each batch's run time (ns). The
     * recorder is cleared afterwards. */
    void (*on_kernels)(void *ctx, struct cp_session *s, struct cp_trace_recorder *rec,
                       const uint64_t *run_ns, size_t n);
    /* A flow served: the hook's kernels_wanted turning true starts
     * recording every node call of the flow; when it turns false (checked
     * every 100 ms, and at shutdown) this is called to write what was
     * recorded (cp_flow_service_record_end). */
    void (*on_flow_recorded)(void *ctx, struct cp_flow_service *fs);
    /* A flow served: every call of its nodes (pipeline/pipeline.h), on the
     * node's worker thread: must be thread-safe and quick. */
    void (*on_node_call)(void *ctx, const struct cp_flow_call_info *c);
    /* Once listening, before any request: the port, and the time (cp_clock_ns)
     * the fire drill's --inject-slowdown counts from. */
    void (*on_listening)(void *ctx, int port, int64_t started_ns);
    /* Appended to GET /metrics (Prometheus text). */
    void (*metrics)(void *ctx, struct cp_buf *out);
};

struct cp_serve_opts {
    const char *model_path; /* a model (.om, .onnx), or a flow (.toml: docs/pipelines.md) */
    int port;               /* 0: any free port (printed) */
    int max_batch;          /* requests run together, at most (1: no batching) */
    double window_ms;       /* how long a batch waits to fill */
    int threads;            /* the runtime's threads (0: all cores) */
    size_t max_body;        /* largest request body accepted (0: the inputs' size + 1 MiB) */
    const char *ready_file; /* written with the port once listening (tests, scripts) */
    const struct cp_serve_hooks *hooks; /* NULL: none */
    /* A fire drill (--inject-slowdown): from inject_after_s after the start,
     * every batch spins inject_ms longer, as a slower model would (a flow:
     * every request's answer comes inject_ms later, or with inject_node
     * every call of that node spins inject_ms longer). */
    double inject_after_s, inject_ms;
    const char *inject_node; /* a flow's node; NULL: none */
};

struct cp_serve_stats {
    uint64_t requests, ok, client_errors, server_errors, batches;
    double mean_batch;
};

/* Runs of the model before the port opens, so that no request pays for the
 * first runs' set-up. */
#define CP_SERVE_WARMUP_RUNS 3

/* Serve until SIGTERM or SIGINT, then stop accepting, finish the requests
 * in flight and return. Errors: the model does not load (CP_ERR_INVALID or
 * its own), the port cannot be bound (CP_ERR_IO). */
enum cp_status cp_serve_run(const struct cp_serve_opts *o, struct cp_serve_stats *s,
                            struct cp_diag *d);

struct cp_load_opts {
    const char *url; /* http://host:port */
    double rate;     /* requests per second, Poisson arrivals */
    double duration_s;
    int concurrency; /* requests in flight at most (the rest wait, their clocks running) */
    uint64_t seed;
};

struct cp_load_result {
    uint64_t sent, ok, errors;
    double seconds, throughput; /* completed per second */
    double p50_ms, p90_ms, p99_ms, max_ms, mean_ms;
    double max_lateness_ms; /* the most a request left after its intended time */
};

/* Load a server with requests of seeded random inputs of the shapes its
 * /v1/model gives. Errors: no server, or one that is not cannprof's
 * (CP_ERR_IO, CP_ERR_INVALID). */
enum cp_status cp_load_run(const struct cp_load_opts *o, struct cp_load_result *r,
                           struct cp_diag *d);

/* ---- recording a running server (`cannprof trace --target`) ---------------------------- */

struct cp_trace_target_opts {
    const char *url; /* http://host:port of a `cannprof serve` */
    double duration_s;
    double sampling_pct;  /* requests kept, 0 < p <= 100 */
    const char *out_path; /* the trace store written */
};

struct cp_trace_target_result {
    uint64_t seen;   /* requests answered in the window */
    size_t captured; /* of which sampled */
    bool truncated;  /* the server's capture filled up */
    double seconds;
    int64_t run_id;
    char model[1024];
};

/* GET url/v1/trace for the duration and store the sampled requests as a
 * pipeline run of out_path (cp_serve_store_events). Errors: no server
 * (CP_ERR_IO), not a cannprof server or another version (CP_ERR_INVALID),
 * no request answered in the window (CP_ERR_INVALID: an empty capture). */
enum cp_status cp_serve_trace_target(const struct cp_trace_target_opts *o,
                                     struct cp_trace_target_result *r, struct cp_diag *d);

/* ---- request events as data (events.c) ----------------------------------------------- */

/* The most events one GET /v1/trace answer (and one stored run) holds. */
#define CP_SERVE_TRACE_MAX (1u << 20)

/* Events as GET /v1/trace answers them: {"fields": [names], "events":
 * [[values in that order], ...]}, times in ns relative to origin_ns (a
 * stage not reached stays 0). NULL when out of memory. */
json_t *cp_serve_events_json(const struct cp_serve_event *e, size_t n, int64_t origin_ns);

/* Read them back from `o` (an answer of GET /v1/trace; `origin` names it in
 * messages). Errors (CP_ERR_INVALID, naming the event): not that form, a
 * server of another version (other fields), a row that is not all integers,
 * negative counts, times out of order. OUT: *out (free), *n. */
enum cp_status cp_serve_events_from_json(const char *origin, const json_t *o,
                                         struct cp_serve_event **out, size_t *n, struct cp_diag *d);

struct cp_serve_trace_info {
    const char *kind;       /* the run's kind; NULL: "serve" */
    const char *model_path; /* the served model */
    int max_batch, threads;
    double sampling; /* share of requests kept (0..1); 0: not said */
};

/* Store events as a pipeline run of trace `trace_path` (created if need
 * be; docs/serving.md): the nodes http -> model -> reply, a call per
 * request on http and reply and one per batch on model, one latency sample
 * per request answered 200 (request ids renumbered 0..n-1 in the order
 * given), an application-layer event per call, and the count of the
 * others. Errors: no request answered 200 (CP_ERR_INVALID: an empty
 * capture), the trace cannot be written. OUT: *run_id. */
enum cp_status cp_serve_store_events(const char *trace_path, const struct cp_serve_trace_info *info,
                                     const struct cp_serve_event *ev, size_t n, int64_t *run_id,
                                     struct cp_diag *d);

#endif
