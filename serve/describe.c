/* What a server says of itself and keeps of its requests
 * (serve/serve_internal.h): GET /v1/model, GET /metrics, and each answered
 * request's latency, histograms, hook and captures. */
#include "serve/serve_internal.h"
#include "core/json.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *sv_model_json(struct server *sv)
{
    json_t *j = json_object(), *ins = json_array(), *outs = json_array();
    for (int k = 0; k < 2; k++) {
        size_t n = k ? sv->n_out : sv->n_in;
        for (size_t i = 0; i < n; i++) {
            const struct cp_tensor *t =
                k ? cp_plan_output(sv->s.plan, i) : cp_plan_input(sv->s.plan, i);
            json_t *o = json_object(), *shape = json_array();
            for (int r = 0; r < t->shape.rank; r++)
                json_array_append_new(shape, json_integer(r == 0 && sv->batch > 1
                                                              ? t->shape.dims[r].value / sv->batch
                                                              : t->shape.dims[r].value));
            json_object_set_new(o, "name", json_string(t->name));
            json_object_set_new(o, "dtype", json_string(cp_dtype_name(t->dtype)));
            json_object_set_new(o, "shape", shape);
            json_array_append_new(k ? outs : ins, o);
        }
    }
    json_object_set_new(j, "model", json_string(sv->o->model_path));
    json_object_set_new(j, "inputs", ins);
    json_object_set_new(j, "outputs", outs);
    json_object_set_new(j, "max_batch", json_integer(sv->o->max_batch));
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return text;
}

char *sv_metrics_text(struct server *sv)
{
    struct cp_buf b;
    cp_buf_init(&b);
    pthread_mutex_lock(&sv->m.mu);
    cp_buf_puts(&b, "# HELP cannprof_requests_total Requests answered, by status class.\n"
                    "# TYPE cannprof_requests_total counter\n");
    for (int k = 2; k < 6; k++)
        cp_buf_printf(&b, "cannprof_requests_total{code=\"%dxx\"} %llu\n", k,
                      (unsigned long long)sv->m.by_code[k]);
    cp_buf_puts(&b, "# HELP cannprof_request_latency_seconds Time from a request's arrival to "
                    "its answer.\n# TYPE cannprof_request_latency_seconds histogram\n");
    uint64_t acc = 0;
    for (size_t i = 0; i < N_LAT; i++) {
        acc += sv->m.lat_bucket[i];
        cp_buf_printf(&b, "cannprof_request_latency_seconds_bucket{le=\"%g\"} %llu\n",
                      SV_LAT_BOUNDS[i], (unsigned long long)acc);
    }
    acc += sv->m.lat_bucket[N_LAT];
    cp_buf_printf(&b,
                  "cannprof_request_latency_seconds_bucket{le=\"+Inf\"} %llu\n"
                  "cannprof_request_latency_seconds_sum %.9g\n"
                  "cannprof_request_latency_seconds_count %llu\n",
                  (unsigned long long)acc, sv->m.lat_sum, (unsigned long long)sv->m.lat_count);
    cp_buf_puts(&b, "# HELP cannprof_batch_size Requests run together.\n"
                    "# TYPE cannprof_batch_size histogram\n");
    acc = 0;
    for (size_t i = 0; i < N_BATCH; i++) {
        acc += sv->m.batch_bucket[i];
        cp_buf_printf(&b, "cannprof_batch_size_bucket{le=\"%d\"} %llu\n", SV_BATCH_BOUNDS[i],
                      (unsigned long long)acc);
    }
    acc += sv->m.batch_bucket[N_BATCH];
    cp_buf_printf(&b,
                  "cannprof_batch_size_bucket{le=\"+Inf\"} %llu\ncannprof_batch_size_sum %llu\n"
                  "cannprof_batch_size_count %llu\n",
                  (unsigned long long)acc, (unsigned long long)sv->m.batch_sum,
                  (unsigned long long)sv->m.batches);
    static const char *const node_names[3] = {"http", "model", "reply"};
    cp_buf_puts(&b, "# HELP cannprof_node_latency_seconds Time a request spent in each node: "
                    "http (read and parsed), model (queued and run in a batch), reply (its "
                    "answer encoded).\n# TYPE cannprof_node_latency_seconds histogram\n");
    for (int k = 0; k < 3; k++) {
        acc = 0;
        for (size_t i = 0; i <= N_LAT; i++) {
            acc += sv->node_bucket[k][i];
            if (i < N_LAT)
                cp_buf_printf(&b,
                              "cannprof_node_latency_seconds_bucket{node=\"%s\",le=\"%g\"} %llu\n",
                              node_names[k], SV_LAT_BOUNDS[i], (unsigned long long)acc);
            else
                cp_buf_printf(
                    &b, "cannprof_node_latency_seconds_bucket{node=\"%s\",le=\"+Inf\"} %llu\n",
                    node_names[k], (unsigned long long)acc);
        }
        cp_buf_printf(&b,
                      "cannprof_node_latency_seconds_sum{node=\"%s\"} %.9g\n"
                      "cannprof_node_latency_seconds_count{node=\"%s\"} %llu\n",
                      node_names[k], sv->node_sum[k], node_names[k],
                      (unsigned long long)sv->node_count[k]);
    }
    pthread_mutex_unlock(&sv->m.mu);
    if (sv->fs)
        sv_flow_metrics(sv, &b);
    if (sv->hooks && sv->hooks->metrics)
        sv->hooks->metrics(sv->hooks->ctx, &b);
    pthread_mutex_lock(&sv->mu);
    cp_buf_printf(&b,
                  "# HELP cannprof_queue_depth Requests waiting for a batch.\n"
                  "# TYPE cannprof_queue_depth gauge\ncannprof_queue_depth %zu\n",
                  sv->q_n);
    pthread_mutex_unlock(&sv->mu);
    return cp_buf_status(&b) == CP_OK ? cp_buf_steal(&b) : (cp_buf_release(&b), NULL);
}

/* The request's inputs from a raw body: a JSON header line, then the
 * inputs' bytes back to back. */

void sv_emit(struct server *sv, struct cp_serve_event *e)
{
    if (!e->id)
        e->id = __atomic_add_fetch(&sv->next_id, 1, __ATOMIC_RELAXED);
    if (!e->replied_ns)
        e->replied_ns = sv_now_ns();
    pthread_mutex_lock(&sv->m.mu);
    if (e->code == 200 && e->queued_ns && e->run_end_ns) {
        double node_s[3] = {(double)(e->queued_ns - e->arrive_ns) / 1e9,
                            (double)(e->run_end_ns - e->queued_ns) / 1e9,
                            (double)(e->replied_ns - e->run_end_ns) / 1e9};
        for (int k = 0; k < 3; k++) {
            size_t b = 0;
            while (b < N_LAT && node_s[k] > SV_LAT_BOUNDS[b])
                b++;
            sv->node_bucket[k][b]++;
            sv->node_sum[k] += node_s[k];
            sv->node_count[k]++;
        }
    }
    for (struct capture *c = sv->captures; c; c = c->next) {
        if (e->replied_ns > c->until_ns || c->full)
            continue;
        c->seen++;
        /* every request whose turn comes up at the sampling rate */
        if (floor((double)c->seen * c->sampling) <= floor((double)(c->seen - 1) * c->sampling))
            continue;
        if (c->n == c->cap) {
            size_t nc = c->cap ? c->cap * 2 : 1024;
            struct cp_serve_event *g =
                nc <= CP_SERVE_TRACE_MAX ? cp_realloc_array(c->ev, nc, sizeof *g) : NULL;
            if (!g) {
                c->full = true;
                continue;
            }
            c->ev = g;
            c->cap = nc;
        }
        c->ev[c->n++] = *e;
    }
    pthread_mutex_unlock(&sv->m.mu);
    if (sv->hooks && sv->hooks->on_request)
        sv->hooks->on_request(sv->hooks->ctx, e);
}

void sv_note_latency(struct server *sv, int64_t t0, unsigned code)
{
    double s = (double)(sv_now_ns() - t0) / 1e9;
    pthread_mutex_lock(&sv->m.mu);
    size_t k = 0;
    while (k < N_LAT && s > SV_LAT_BOUNDS[k])
        k++;
    sv->m.lat_bucket[k]++;
    sv->m.lat_sum += s;
    sv->m.lat_count++;
    sv->m.by_code[code / 100 < 6 ? code / 100 : 5]++;
    pthread_mutex_unlock(&sv->m.mu);
}
