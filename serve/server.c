/* cannprof serve (docs/serving.md): a model behind libmicrohttpd, one
 * thread per connection: the HTTP handlers and running. A request's inputs
 * are parsed on its connection's thread (request.c) and queued for the
 * batching thread (batcher.c); what the server says of itself and keeps of
 * each request is describe.c's. SIGTERM or SIGINT stops the listening
 * socket, lets every request in flight finish, then stops. */
#define _GNU_SOURCE /* gettid */
#include "serve/serve_internal.h"
#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const int SV_BATCH_BOUNDS[N_BATCH] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

const double SV_LAT_BOUNDS[N_LAT] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                     0.25,  0.5,    1,     2.5,  5,     10};

int64_t sv_now_ns(void)
{
    return (int64_t)cp_clock_ns();
}

/* ---- requests ------------------------------------------------------------------------------ */

enum MHD_Result sv_reply(struct MHD_Connection *c, unsigned code, const char *type, void *body,
                         size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result sv_reply_error(struct server *sv, struct MHD_Connection *c, unsigned code,
                               const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *j = json_object();
    cp_json_set_str(j, "error", msg);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    pthread_mutex_lock(&sv->m.mu);
    sv->m.by_code[code / 100 < 6 ? code / 100 : 5]++;
    pthread_mutex_unlock(&sv->m.mu);
    if (!text)
        return MHD_NO;
    size_t n = strlen(text);
    return sv_reply(c, code, "application/json", text, n);
}

/* GET /v1/model: inputs and outputs as a request carries them. */
static enum MHD_Result infer(struct server *sv, struct MHD_Connection *mc, struct conn *c)
{
    struct job j;
    memset(&j, 0, sizeof j);
    j.in = cp_calloc(sv->n_in ? sv->n_in : 1, sizeof *j.in);
    j.n_in = sv->n_in;
    j.ev.arrive_ns = c->t0;
    j.ev.connection = c->connection;
    char err[400] = "";
    bool ok = j.in && (c->multipart ? sv_parse_parts(sv, c, &j, err, sizeof err)
                                    : sv_parse_raw(sv, c, &j, err, sizeof err));
    struct cp_thread_clock k1, r0, r1;
    cp_thread_clock_end(&k1);
    j.ev.parse_cpu_ns = k1.cpu_ns - c->k0.cpu_ns;
    j.ev.parse_runq_ns = k1.runq_ns - c->k0.runq_ns;
    enum MHD_Result ret;
    if (!ok) {
        ret = sv_reply_error(sv, mc, 400, "%s", err[0] ? err : "out of memory");
        j.ev.code = 400;
    } else {
        sv_submit(sv, &j);
        cp_thread_clock_begin(&r0);
        if (j.st != CP_OK) {
            ret = sv_reply_error(sv, mc, 500, "%s", j.err);
            j.ev.code = 500;
        } else {
            /* the answer in the request's form */
            struct cp_buf b;
            cp_buf_init(&b);
            const char *type;
            char ctype[120];
            if (c->multipart) {
                const char *boundary = "cannprof-outputs-7d4f9b";
                for (size_t o = 0; o < j.n_out; o++) {
                    uint8_t *npy = NULL;
                    size_t len = 0;
                    struct cp_diag d;
                    cp_diag_init(&d);
                    if (cp_tensor_npy_encode(&j.out[o], j.out[o].name, &npy, &len, &d) != CP_OK)
                        continue;
                    cp_buf_printf(&b,
                                  "--%s\r\nContent-Disposition: form-data; name=\"%s\"; "
                                  "filename=\"%s.npy\"\r\nContent-Type: "
                                  "application/octet-stream\r\n\r\n",
                                  boundary, j.out[o].name, j.out[o].name);
                    cp_buf_append(&b, npy, len);
                    cp_buf_puts(&b, "\r\n");
                    free(npy);
                }
                cp_buf_printf(&b, "--%s--\r\n", boundary);
                snprintf(ctype, sizeof ctype, "multipart/form-data; boundary=%s", boundary);
                type = ctype;
            } else {
                json_t *h = json_object(), *outs = json_array();
                for (size_t o = 0; o < j.n_out; o++) {
                    json_t *x = json_object(), *shape = json_array();
                    for (int r = 0; r < j.out[o].rank; r++)
                        json_array_append_new(shape, json_integer(j.out[o].dims[r]));
                    json_object_set_new(x, "name", json_string(j.out[o].name));
                    json_object_set_new(x, "dtype", json_string(cp_dtype_name(j.out[o].dtype)));
                    json_object_set_new(x, "shape", shape);
                    json_array_append_new(outs, x);
                }
                json_object_set_new(h, "outputs", outs);
                char *line = json_dumps(h, JSON_COMPACT);
                json_decref(h);
                cp_buf_printf(&b, "%s\n", line ? line : "{}");
                free(line);
                for (size_t o = 0; o < j.n_out; o++)
                    cp_buf_append(&b, j.out[o].data, j.out[o].nbytes);
                type = "application/octet-stream";
            }
            if (cp_buf_status(&b) != CP_OK) {
                cp_buf_release(&b);
                ret = sv_reply_error(sv, mc, 500, "out of memory");
            } else {
                size_t len = b.len;
                sv_note_latency(sv, c->t0, 200);
                ret = sv_reply(mc, 200, type, cp_buf_steal(&b), len);
                j.ev.code = 200;
            }
        }
        cp_thread_clock_end(&r1);
        j.ev.reply_cpu_ns = r1.cpu_ns - r0.cpu_ns;
        j.ev.reply_runq_ns = r1.runq_ns - r0.runq_ns;
        if (!j.ev.code)
            j.ev.code = 500;
    }
    sv_emit(sv, &j.ev);
    for (size_t i = 0; j.in && i < j.n_in; i++) {
        if (j.in_borrowed)
            j.in[i].data = NULL; /* the body's */
        cp_host_tensor_release(&j.in[i]);
    }
    for (size_t o = 0; j.out && o < j.n_out; o++)
        cp_host_tensor_release(&j.out[o]);
    free(j.in);
    free(j.out);
    return ret;
}

/* GET /v1/trace?seconds=S&sampling=P: the events of the requests answered
 * in the next S seconds (P percent of them, evenly), as JSON. */
static enum MHD_Result trace_request(struct server *sv, struct MHD_Connection *mc)
{
    const char *sec = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "seconds");
    const char *smp = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "sampling");
    char *end = NULL;
    double seconds = sec ? strtod(sec, &end) : NAN;
    if (!sec || end == sec || *end || !(seconds > 0 && seconds <= 3600))
        return sv_reply_error(sv, mc, 400, "GET /v1/trace?seconds=S: S is 0 to 3600 (seconds)");
    double sampling = 100;
    if (smp &&
        ((sampling = strtod(smp, &end)), end == smp || *end || !(sampling > 0) || sampling > 100))
        return sv_reply_error(sv, mc, 400, "/v1/trace: sampling is a percentage, above 0 to 100");
    int64_t t0 = sv_now_ns();
    struct capture cap = {.until_ns = t0 + (int64_t)(seconds * 1e9), .sampling = sampling / 100};
    pthread_mutex_lock(&sv->m.mu);
    cap.next = sv->captures;
    sv->captures = &cap;
    pthread_mutex_unlock(&sv->m.mu);
    /* wait out the window; a SIGTERM ends it early */
    for (;;) {
        int64_t left = cap.until_ns - sv_now_ns();
        pthread_mutex_lock(&sv->mu);
        bool draining = sv->draining;
        pthread_mutex_unlock(&sv->mu);
        if (left <= 0 || draining)
            break;
        struct timespec ts = {0, left < 100000000 ? (long)left : 100000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&sv->m.mu);
    for (struct capture **p = &sv->captures; *p; p = &(*p)->next)
        if (*p == &cap) {
            *p = cap.next;
            break;
        }
    pthread_mutex_unlock(&sv->m.mu);
    json_t *j = cp_serve_events_json(cap.ev, cap.n, t0);
    free(cap.ev);
    if (!j)
        return sv_reply_error(sv, mc, 500, "out of memory");
    json_object_set_new(j, "model", json_string(sv->o->model_path));
    json_object_set_new(j, "max_batch", json_integer(sv->o->max_batch));
    json_object_set_new(j, "threads", json_integer(sv->s.rt ? cp_runtime_threads(sv->s.rt) : 0));
    json_object_set_new(j, "seconds", json_real((double)(sv_now_ns() - t0) / 1e9));
    json_object_set_new(j, "sampling", json_real(sampling));
    json_object_set_new(j, "seen", json_integer((json_int_t)cap.seen));
    json_object_set_new(j, "truncated", json_boolean(cap.full));
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!text)
        return sv_reply_error(sv, mc, 500, "out of memory");
    return sv_reply(mc, 200, "application/json", text, strlen(text));
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *mc, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct server *sv = cls;
    struct conn *c = *con_cls;
    if (!c) {
        c = cp_calloc(1, sizeof *c);
        if (!c)
            return MHD_NO;
        cp_buf_init(&c->body);
        c->t0 = sv_now_ns();
        cp_thread_clock_begin(&c->k0);
        c->connection = (uint64_t)gettid();
        const char *ct = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Type");
        c->multipart = ct && strncmp(ct, "multipart/form-data", 19) == 0;
        if (c->multipart && strcmp(method, "POST") == 0)
            c->pp = MHD_create_post_processor(mc, 65536, sv_on_part, c);
        *con_cls = c;
        pthread_mutex_lock(&sv->mu);
        sv->inflight++;
        pthread_mutex_unlock(&sv->mu);
        return MHD_YES;
    }
    if (*upload_data_size) {
        c->received += *upload_data_size;
        if (c->received > sv->max_body)
            c->too_big = true;
        else if (c->pp)
            c->too_big =
                c->too_big || MHD_post_process(c->pp, upload_data, *upload_data_size) != MHD_YES;
        else if (cp_buf_append(&c->body, upload_data, *upload_data_size),
                 cp_buf_status(&c->body) != CP_OK)
            return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(url, "/health") == 0 && strcmp(method, "GET") == 0) {
        char *ok = cp_strdup("ok\n");
        sv_note_latency(sv, c->t0, 200);
        return ok ? sv_reply(mc, 200, "text/plain", ok, 3) : MHD_NO;
    }
    if (strcmp(url, "/metrics") == 0 && strcmp(method, "GET") == 0) {
        char *text = sv_metrics_text(sv);
        return text ? sv_reply(mc, 200, "text/plain; version=0.0.4", text, strlen(text)) : MHD_NO;
    }
    if (strcmp(url, "/v1/model") == 0 && strcmp(method, "GET") == 0) {
        char *text = sv->fs ? sv_flow_model_json(sv) : sv_model_json(sv);
        sv_note_latency(sv, c->t0, 200);
        return text ? sv_reply(mc, 200, "application/json", text, strlen(text)) : MHD_NO;
    }
    if (sv->fs && strcmp(url, "/v1/sample") == 0 && strcmp(method, "GET") == 0)
        return sv_flow_sample(sv, mc);
    if (strcmp(url, "/v1/trace") == 0 && strcmp(method, "GET") == 0)
        return trace_request(sv, mc);
    if (strcmp(url, "/v1/infer") == 0) {
        struct cp_serve_event e = {.arrive_ns = c->t0, .connection = c->connection};
        enum MHD_Result ret;
        if (strcmp(method, "POST") != 0) {
            ret = sv_reply_error(sv, mc, 405, "POST the inputs to /v1/infer");
            e.code = 405;
        } else if (c->too_big) {
            ret = sv_reply_error(sv, mc, 413,
                                 "the body is over %zu bytes (the inputs take %zu): too large",
                                 sv->max_body, sv->max_body > 1048576 ? sv->max_body - 1048576 : 0);
            e.code = 413;
        } else {
            return sv->fs ? sv_flow_infer(sv, mc, c) : infer(sv, mc, c);
        }
        sv_emit(sv, &e);
        return ret;
    }
    return sv_reply_error(sv, mc, 404,
                          "no %s %s: GET /v1/model, POST /v1/infer, GET /v1/trace, GET /health, "
                          "GET /metrics",
                          method, url);
}

static void completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)mc;
    (void)toe;
    struct server *sv = cls;
    if (!*con_cls)
        return;
    sv_free_conn(*con_cls);
    *con_cls = NULL;
    pthread_mutex_lock(&sv->mu);
    sv->inflight--;
    pthread_cond_broadcast(&sv->idle);
    pthread_mutex_unlock(&sv->mu);
}

/* ---- running ----------------------------------------------------------------------------- */

/* Open the model, warm it up and size its requests. */
static enum cp_status open_model(struct server *sv, struct cp_diag *d)
{
    const struct cp_serve_opts *o = sv->o;
    /* the kernel layer is recorded only for the batches a hook asks for */
    if (o->hooks && o->hooks->on_kernels && !(sv->rec = cp_trace_recorder_create(4096)))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    struct cp_session_opts so = {.model_path = o->model_path,
                                 .batch = o->max_batch > 1 ? o->max_batch : 0,
                                 /* served one request at a time, a model whose
                                  * batch is left open runs at batch 1 */
                                 .open_dim0 = 1,
                                 .threads = o->threads,
                                 .buffer_optimize = -1,
                                 .trace = sv->rec};
    enum cp_status st = cp_session_open(&sv->s, &so, d);
    /* warm up before the port opens (the first runs create oneDNN's
     * primitives and touch the arena): the first requests would otherwise
     * pay for it, and a monitor would see a cold start as a regression */
    if (st == CP_OK)
        st = cp_session_set_inputs(&sv->s, NULL, 0, 1, d);
    for (int k = 0; st == CP_OK && k < CP_SERVE_WARMUP_RUNS; k++)
        st = cp_plan_run(sv->s.plan, -1, d);
    if (st == CP_OK && sv->rec) {
        cp_runtime_pause_trace(sv->s.rt, true);
        cp_trace_clear(sv->rec); /* the load, plan and warm-up events: not a batch's */
    }
    if (st != CP_OK) {
        if (o->max_batch > 1) {
            struct cp_diag inner = *d;
            cp_diag_init(d);
            st = cp_diag_set(d, inner.status,
                             "%s (--max-batch > 1 needs a model whose batch can be set: a "
                             "dynamic first dimension or --dynamic_batch_size)",
                             inner.msg);
        }
        return st;
    }
    sv->n_in = cp_plan_n_inputs(sv->s.plan);
    sv->n_out = cp_plan_n_outputs(sv->s.plan);
    sv->slice_in = cp_calloc(sv->n_in ? sv->n_in : 1, sizeof *sv->slice_in);
    if (!sv->slice_in)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t inputs_bytes = 0;
    for (size_t i = 0; i < sv->n_in; i++) {
        const struct cp_tensor *t = cp_plan_input(sv->s.plan, i);
        int64_t n = 1;
        for (int r = 0; r < t->shape.rank; r++)
            n *= t->shape.dims[r].value;
        sv->slice_in[i] = (size_t)n * cp_dtype_size(t->dtype) / (size_t)sv->batch;
        inputs_bytes += sv->slice_in[i];
    }
    sv->max_body = o->max_body ? o->max_body : inputs_bytes + 1048576;
    return CP_OK;
}

enum cp_status cp_serve_run(const struct cp_serve_opts *o, struct cp_serve_stats *stats,
                            struct cp_diag *d)
{
    memset(stats, 0, sizeof *stats);
    if (o->max_batch < 1 || o->max_batch > 256)
        return cp_diag_set(d, CP_ERR_USAGE, "--max-batch is 1 to 256");
    struct server sv;
    memset(&sv, 0, sizeof sv);
    sv.o = o;
    sv.batch = o->max_batch;
    sv.hooks = o->hooks;
    sv.started_ns = sv_now_ns();
    /* block the signals in every thread; the main one waits for them */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    pthread_mutex_init(&sv.mu, NULL);
    pthread_mutex_init(&sv.m.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sv.has_work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&sv.idle, NULL);
    bool flow = cp_path_has_suffix(o->model_path, ".toml");
    enum cp_status st = flow ? sv_flow_open(&sv, d) : open_model(&sv, d);
    bool batcher = false;
    if (st == CP_OK && !flow) {
        if (pthread_create(&sv.batcher, NULL, sv_batcher_main, &sv) != 0)
            st = cp_diag_set(d, CP_ERR_NOMEM, "cannot start the batching thread");
        batcher = st == CP_OK;
    }
    if (st == CP_OK) {
        sv.http = MHD_start_daemon(
            MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC,
            (uint16_t)o->port, NULL, NULL, handle, &sv, MHD_OPTION_NOTIFY_COMPLETED, completed, &sv,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
        if (!sv.http)
            st =
                cp_diag_set(d, CP_ERR_IO, "cannot listen on port %d: %s", o->port, strerror(errno));
    }
    if (st == CP_OK) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(sv.http, MHD_DAEMON_INFO_BIND_PORT);
        int port = info ? info->port : o->port;
        __atomic_store_n(&sv.started_ns, sv_now_ns(), __ATOMIC_RELEASE);
        if (flow && o->inject_node && o->inject_ms > 0)
            cp_flow_service_inject(sv.fs, (size_t)cp_flow_node_index(sv.flow, o->inject_node),
                                   sv.started_ns + (int64_t)(o->inject_after_s * 1e9),
                                   o->inject_ms);
        if (sv.hooks && sv.hooks->on_listening)
            sv.hooks->on_listening(sv.hooks->ctx, port,
                                   __atomic_load_n(&sv.started_ns, __ATOMIC_ACQUIRE));
        if (flow)
            printf("serve: the flow %s on http://127.0.0.1:%d (%zu nodes)\n", o->model_path, port,
                   sv.n_flow_nodes);
        else
            printf("serve: %s on http://127.0.0.1:%d (max batch %d, window %.1f ms)\n",
                   o->model_path, port, o->max_batch, o->window_ms);
        fflush(stdout);
        if (o->ready_file) {
            char text[32];
            int n = snprintf(text, sizeof text, "%d\n", port);
            struct cp_diag ignored;
            cp_diag_init(&ignored);
            (void)cp_file_write_atomic(o->ready_file, text, (size_t)n, &ignored);
        }
        int sig = 0;
        sigwait(&sigs, &sig);
        /* stop accepting; let what is in flight finish */
        MHD_quiesce_daemon(sv.http);
        pthread_mutex_lock(&sv.mu);
        sv.draining = true;
        pthread_cond_broadcast(&sv.has_work);
        while (sv.inflight > 0)
            pthread_cond_wait(&sv.idle, &sv.mu);
        pthread_mutex_unlock(&sv.mu);
        MHD_stop_daemon(sv.http);
    }
    if (batcher) {
        pthread_mutex_lock(&sv.mu);
        sv.stopping = true;
        pthread_cond_broadcast(&sv.has_work);
        pthread_mutex_unlock(&sv.mu);
        pthread_join(sv.batcher, NULL);
    }
    stats->ok = sv.m.by_code[2];
    stats->client_errors = sv.m.by_code[4];
    stats->server_errors = sv.m.by_code[5];
    stats->requests = stats->ok + stats->client_errors + stats->server_errors + sv.m.by_code[3];
    stats->batches = sv.m.batches;
    stats->mean_batch = sv.m.batches ? (double)sv.m.batch_sum / (double)sv.m.batches : 0;
    if (flow)
        sv_flow_close(&sv);
    else
        cp_session_close(&sv.s);
    cp_trace_recorder_free(sv.rec);
    free(sv.deep_ns);
    free(sv.slice_in);
    free(sv.q);
    pthread_mutex_destroy(&sv.mu);
    pthread_mutex_destroy(&sv.m.mu);
    pthread_cond_destroy(&sv.has_work);
    pthread_cond_destroy(&sv.idle);
    return st;
}
