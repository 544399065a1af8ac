/* Inside serve/: the server's state, shared by server.c (the HTTP handlers,
 * running), batcher.c (a model's batches), request.c (a request's body),
 * describe.c (the model's description, metrics, each request's record)
 * and flow.c (a flow served through pipeline/'s service). */
#ifndef CP_SERVE_INTERNAL_H
#define CP_SERVE_INTERNAL_H

#include "pipeline/pipeline.h"
#include "runner/session.h"
#include "serve/serve.h"

#include <microhttpd.h>
#include <pthread.h>

/* ---- metrics --------------------------------------------------------------------------- */

/* The latency histograms' bounds, seconds, and the batch sizes' (server.c). */
#define N_LAT 13
extern const double SV_LAT_BOUNDS[N_LAT];
#define N_BATCH 9
extern const int SV_BATCH_BOUNDS[N_BATCH];

struct metrics {
    pthread_mutex_t mu;
    uint64_t by_code[6]; /* 2xx..5xx by hundreds (index code/100) */
    uint64_t lat_bucket[N_LAT + 1];
    double lat_sum;
    uint64_t lat_count;
    uint64_t batch_bucket[N_BATCH + 1];
    uint64_t batch_sum, batches;
};

/* ---- jobs and the batcher ------------------------------------------------------------------ */

struct job {
    struct cp_host_tensor *in, *out;
    size_t n_in, n_out;
    enum cp_status st;
    char err[1100];
    bool done;
    pthread_cond_t cv;
    struct cp_serve_event ev; /* filled as it goes through the stages */
    bool in_borrowed;         /* in[].data point into the request's body */
};

/* A capture for GET /v1/trace: the events of sampled requests answered
 * before `until_ns`. */
struct capture {
    int64_t until_ns;
    double sampling; /* 0..1 */
    uint64_t seen;
    struct cp_serve_event *ev;
    size_t n, cap;
    bool full;
    struct capture *next;
};

struct server {
    const struct cp_serve_opts *o;
    struct cp_session s;
    size_t n_in, n_out;
    int batch; /* the plan's first dimension */
    size_t *slice_in, *slice_out;
    struct MHD_Daemon *http;
    pthread_mutex_t mu;
    pthread_cond_t has_work;
    struct job **q;
    size_t q_n, q_cap;
    bool stopping;
    bool draining; /* SIGTERM: batches go at once, without their window */
    pthread_t batcher;
    int inflight;
    pthread_cond_t idle;
    struct metrics m;
    size_t max_body;
    const struct cp_serve_hooks *hooks;
    uint64_t next_id, next_conn, batch_seq;
    int64_t started_ns;
    /* the kernel layer of the batches a hook asked for */
    struct cp_trace_recorder *rec;
    uint64_t *deep_ns;
    size_t n_deep, cap_deep;
    /* GET /v1/trace captures, under m.mu */
    struct capture *captures;
    /* per-node latency histograms (http, model, reply), under m.mu */
    uint64_t node_bucket[3][N_LAT + 1];
    double node_sum[3];
    uint64_t node_count[3];
    /* a flow served (flow.c): no session and no batcher; its nodes' busy
     * time histograms, under m.mu; a thread that starts and ends the deep
     * recording the hooks ask for */
    struct cp_flow *flow;
    struct cp_flow_service *fs;
    uint64_t (*flow_bucket)[N_LAT + 1];
    double *flow_sum;
    uint64_t *flow_count;
    size_t n_flow_nodes;
    pthread_t watcher;
    bool watching, flow_recording;
};

#define MAX_PARTS 64

struct conn {
    struct cp_buf body; /* a raw request */
    size_t received;    /* bytes of the body so far, either form */
    bool too_big;
    bool multipart;
    struct MHD_PostProcessor *pp;
    /* multipart parts: one .npy per input, by field name */
    struct {
        char *name;
        struct cp_buf data;
    } part[MAX_PARTS];
    size_t n_parts;
    int64_t t0;
    uint64_t connection;
    struct cp_thread_clock k0; /* at its first callback */
};

int64_t sv_now_ns(void);
enum MHD_Result sv_reply(struct MHD_Connection *c, unsigned code, const char *type, void *body,
                         size_t len);
enum MHD_Result sv_reply_error(struct server *sv, struct MHD_Connection *c, unsigned code,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A /v1/infer request answered: histograms, the hook, the captures
 * (describe.c, with GET /v1/model's JSON and GET /metrics' text). */
void sv_emit(struct server *sv, struct cp_serve_event *e);
void sv_note_latency(struct server *sv, int64_t t0, unsigned code);
char *sv_model_json(struct server *sv);
char *sv_metrics_text(struct server *sv);

/* ---- a model's batcher (batcher.c) ---- */

/* Queue a parsed job and wait until the batcher has run it. */
void sv_submit(struct server *sv, struct job *j);
/* The batching thread (arg: the server). */
void *sv_batcher_main(void *arg);

/* ---- a request's body (request.c) ---- */

enum MHD_Result sv_on_part(void *cls, enum MHD_ValueKind kind, const char *key,
                           const char *filename, const char *content_type,
                           const char *transfer_encoding, const char *data, uint64_t off,
                           size_t size);
void sv_free_conn(struct conn *c);
/* The job's inputs from a raw or a multipart body; false with err set. */
bool sv_parse_raw(struct server *sv, struct conn *c, struct job *j, char *err, size_t n_err);
bool sv_parse_parts(struct server *sv, struct conn *c, struct job *j, char *err, size_t n_err);

/* ---- a flow (flow.c) ---- */

/* Load the flow, start its service (its nodes' metrics), warm it up with
 * its source's first file and start the deep-recording watcher. */
enum cp_status sv_flow_open(struct server *sv, struct cp_diag *d);
void sv_flow_close(struct server *sv);
char *sv_flow_model_json(struct server *sv);
enum MHD_Result sv_flow_infer(struct server *sv, struct MHD_Connection *mc, struct conn *c);
void sv_flow_metrics(struct server *sv, struct cp_buf *b);
/* GET /v1/sample: the source's first file, a request the flow takes. */
enum MHD_Result sv_flow_sample(struct server *sv, struct MHD_Connection *mc);

#endif
