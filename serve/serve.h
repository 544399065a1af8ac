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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cp_serve_opts {
    const char *model_path;
    int port;               /* 0: any free port (printed) */
    int max_batch;          /* requests run together, at most (1: no batching) */
    double window_ms;       /* how long a batch waits to fill */
    int threads;            /* the runtime's threads (0: all cores) */
    size_t max_body;        /* largest request body accepted (0: the inputs' size + 1 MiB) */
    const char *ready_file; /* written with the port once listening (tests, scripts) */
};

struct cp_serve_stats {
    uint64_t requests, ok, client_errors, server_errors, batches;
    double mean_batch;
};

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

#endif
