/* cannprof load (docs/serving.md): an open-loop load generator on
 * libcurl's multi interface. The arrival times are drawn first, Poisson at
 * the rate asked (seeded); each request is sent at its time, or as soon as
 * fewer than `concurrency` are in flight, and its latency is counted from
 * the time it was meant to leave, so a server that falls behind cannot
 * hide the queue it built (coordinated omission). The request is the
 * server's own /v1/model inputs, seeded random, in the raw form (a JSON
 * header line, then the bytes). */
#include "serve/serve.h"
#include "stats/stats.h"
#include "core/json.h"
#include "runner/runner.h"

#include <curl/curl.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What an answer's body is written into, up to a limit. */
struct sink {
    struct cp_buf b;
    size_t limit;
};

static size_t on_data(char *p, size_t size, size_t n, void *u)
{
    struct sink *s = u;
    size_t k = size * n;
    if (s->b.len + k > s->limit)
        return 0;
    cp_buf_append(&s->b, p, k);
    return cp_buf_status(&s->b) == CP_OK ? k : 0;
}

/* GET `full`: its status and body (at most `limit` bytes). CP_ERR_IO when
 * no answer came. OUT: *code, *body (release). */
static enum cp_status fetch(const char *full, size_t limit, long timeout_s, long *code,
                            struct cp_buf *body, struct cp_diag *d)
{
    cp_buf_init(body);
    *code = 0;
    CURL *h = curl_easy_init();
    if (!h)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    struct sink s = {.limit = limit};
    cp_buf_init(&s.b);
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        cp_buf_release(&s.b);
        return cp_diag_set(d, CP_ERR_IO, "%s: %s", full, curl_easy_strerror(rc));
    }
    *body = s.b;
    return CP_OK;
}

/* GET `full` and read its answer (at most `limit` bytes) as JSON. Errors:
 * no answer (CP_ERR_IO), an answer that is not 200 or not JSON
 * (CP_ERR_INVALID, naming what the server said). OUT: *out. */
static enum cp_status get_json(const char *full, size_t limit, long timeout_s, json_t **out,
                               struct cp_diag *d)
{
    *out = NULL;
    long code = 0;
    struct cp_buf b;
    enum cp_status st = fetch(full, limit, timeout_s, &code, &b, d);
    if (st != CP_OK)
        return st;
    json_error_t e;
    json_t *j = json_loadb(b.data ? b.data : "", b.len, 0, &e);
    cp_buf_release(&b);
    if (code != 200 || !j) {
        const char *why = json_string_value(json_object_get(j, "error"));
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: answered %ld%s%.300s%s", full, code,
                         why ? " (" : (j ? "" : ", not JSON: "), why ? why : (j ? "" : e.text),
                         why ? ")" : "");
        json_decref(j);
        return st;
    }
    *out = j;
    return CP_OK;
}

/* GET `full`'s bytes (at most `limit`). Errors as get_json's. OUT: *out. */
static enum cp_status get_bytes(const char *full, size_t limit, struct cp_buf *out,
                                struct cp_diag *d)
{
    long code = 0;
    enum cp_status st = fetch(full, limit, 30, &code, out, d);
    if (st == CP_OK && code != 200) {
        cp_buf_release(out);
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: answered %ld", full, code);
    }
    return st;
}

/* GET url/v1/model and build the request body: a model's inputs, seeded
 * random; a flow's sample (GET url/v1/sample), under its name. */
static enum cp_status make_body(const char *url, uint64_t seed, char **body, size_t *len,
                                char *name, size_t n_name, struct cp_diag *d)
{
    char full[1200];
    snprintf(full, sizeof full, "%s/v1/model", url);
    json_t *m = NULL;
    enum cp_status gs = get_json(full, 1 << 20, 10, &m, d);
    if (gs != CP_OK)
        return gs;
    name[0] = '\0';
    if (json_is_string(json_object_get(m, "flow"))) {
        const char *sample =
            json_string_value(json_object_get(json_object_get(m, "request"), "sample"));
        snprintf(name, n_name, "%s", sample ? sample : "request");
        json_decref(m);
        snprintf(full, sizeof full, "%s/v1/sample", url);
        struct cp_buf b;
        if ((gs = get_bytes(full, (size_t)1 << 30, &b, d)) != CP_OK)
            return gs;
        *len = b.len;
        *body = b.data ? cp_buf_steal(&b) : cp_strdup("");
        return *body ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    json_t *ins = json_object_get(m, "inputs");
    if (!json_is_array(ins)) {
        json_decref(m);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: answered 200, not a cannprof server's model description", full);
    }
    struct cp_buf b;
    cp_buf_init(&b);
    json_t *h2 = json_object(), *list = json_array();
    struct cp_host_tensor *t = cp_calloc(json_array_size(ins) + 1, sizeof *t);
    enum cp_status st = t ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < json_array_size(ins); i++) {
        json_t *o = json_array_get(ins, i), *shape = json_object_get(o, "shape");
        const char *dt = json_string_value(json_object_get(o, "dtype"));
        t[i].dtype = dt ? cp_dtype_from_name(dt) : CP_DTYPE_UNDEFINED;
        t[i].rank = (int)json_array_size(shape);
        for (int r = 0; r < t[i].rank && r < CP_MAX_RANK; r++)
            t[i].dims[r] = json_integer_value(json_array_get(shape, (size_t)r));
        if (t[i].dtype == CP_DTYPE_UNDEFINED || t[i].rank > CP_MAX_RANK) {
            st = cp_diag_set(d, CP_ERR_INVALID, "%s: input %zu has no usable dtype or shape", full,
                             i);
            break;
        }
        st = cp_tensor_fill_random(&t[i], seed + i, d);
        json_t *x = json_object();
        json_object_set(x, "name", json_object_get(o, "name"));
        json_object_set_new(x, "dtype", json_string(dt));
        json_object_set(x, "shape", shape);
        json_array_append_new(list, x);
    }
    json_object_set_new(h2, "inputs", list);
    char *line = st == CP_OK ? json_dumps(h2, JSON_COMPACT) : NULL;
    json_decref(h2);
    if (line) {
        cp_buf_printf(&b, "%s\n", line);
        for (size_t i = 0; i < json_array_size(ins); i++)
            cp_buf_append(&b, t[i].data, t[i].nbytes);
    }
    free(line);
    for (size_t i = 0; t && i < json_array_size(ins); i++)
        cp_host_tensor_release(&t[i]);
    free(t);
    json_decref(m);
    if (st == CP_OK && cp_buf_status(&b) != CP_OK)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st != CP_OK) {
        cp_buf_release(&b);
        return st;
    }
    *len = b.len;
    *body = cp_buf_steal(&b);
    return CP_OK;
}

struct req {
    CURL *h;
    int64_t intended, sent;
    struct sink out;
    bool busy;
};

enum cp_status cp_load_run(const struct cp_load_opts *o, struct cp_load_result *r,
                           struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    if (!(o->rate > 0) || !(o->duration_s > 0))
        return cp_diag_set(d, CP_ERR_USAGE, "load needs --rate above 0 and --duration above 0");
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
        return cp_diag_set(d, CP_ERR_IO, "libcurl cannot start");
    char *body = NULL, name[300];
    size_t body_len = 0;
    enum cp_status st = make_body(o->url, o->seed, &body, &body_len, name, sizeof name, d);
    if (st != CP_OK) {
        curl_global_cleanup();
        return st;
    }
    /* the arrivals, Poisson */
    size_t n = 0;
    double *at = NULL;
    st = cp_stats_poisson_arrivals(o->rate, o->duration_s, 0, o->seed, &at, &n, d);
    if (st != CP_OK) {
        free(body);
        curl_global_cleanup();
        return st;
    }
    int slots = o->concurrency > 0 ? o->concurrency : 64;
    struct req *q = cp_calloc((size_t)slots, sizeof *q);
    double *lat = cp_calloc(n ? n : 1, sizeof *lat);
    CURLM *mh = curl_multi_init();
    if (!at || !q || !lat || !mh)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    char url[1200];
    snprintf(url, sizeof url, "%s/v1/infer", o->url);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    char name_hdr[340];
    snprintf(name_hdr, sizeof name_hdr, "X-Cannprof-Name: %s", name);
    if (name[0] && hdr)
        hdr = curl_slist_append(hdr, name_hdr);
    for (int i = 0; st == CP_OK && i < slots; i++) {
        q[i].h = curl_easy_init();
        if (!q[i].h) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        curl_easy_setopt(q[i].h, CURLOPT_URL, url);
        curl_easy_setopt(q[i].h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(q[i].h, CURLOPT_POSTFIELDSIZE, (long)body_len);
        curl_easy_setopt(q[i].h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(q[i].h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(q[i].h, CURLOPT_WRITEDATA, &q[i].out);
        curl_easy_setopt(q[i].h, CURLOPT_PRIVATE, &q[i]);
        curl_easy_setopt(q[i].h, CURLOPT_TIMEOUT, 60L);
        cp_buf_init(&q[i].out.b);
        q[i].out.limit = (size_t)1 << 30;
    }
    int64_t t0 = (int64_t)cp_clock_ns();
    size_t next = 0, done = 0, n_lat = 0;
    int running = 0;
    while (st == CP_OK && done < n) {
        int64_t now = (int64_t)cp_clock_ns();
        /* send what is due, on free slots */
        for (int i = 0; i < slots && next < n; i++) {
            if (q[i].busy)
                continue;
            int64_t due = t0 + (int64_t)(at[next] * 1e9);
            if (due > now)
                break;
            q[i].busy = true;
            q[i].intended = due;
            q[i].sent = now;
            cp_buf_reset(&q[i].out.b);
            double late = (double)(now - due) / 1e6;
            r->max_lateness_ms = late > r->max_lateness_ms ? late : r->max_lateness_ms;
            curl_multi_add_handle(mh, q[i].h);
            next++;
            r->sent++;
        }
        curl_multi_perform(mh, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(mh, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct req *rq = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&rq);
            long code = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            if (msg->data.result == CURLE_OK && code == 200) {
                r->ok++;
                lat[n_lat++] = (double)((int64_t)cp_clock_ns() - rq->intended) / 1e6;
            } else {
                r->errors++;
            }
            curl_multi_remove_handle(mh, msg->easy_handle);
            rq->busy = false;
            done++;
        }
        /* wait for I/O or the next arrival */
        int64_t wait_ms = 100;
        if (next < n) {
            int64_t due = t0 + (int64_t)(at[next] * 1e9) - (int64_t)cp_clock_ns();
            wait_ms = due > 0 ? due / 1000000 : 0;
        }
        if (wait_ms > 0 || running > 0)
            curl_multi_poll(mh, NULL, 0, (int)(wait_ms > 100 ? 100 : wait_ms), NULL);
    }
    r->seconds = (double)((int64_t)cp_clock_ns() - t0) / 1e9;
    r->throughput = r->seconds > 0 ? (double)r->ok / r->seconds : 0;
    if (n_lat) {
        double sum = 0;
        for (size_t i = 0; i < n_lat; i++)
            sum += lat[i];
        static const double ps[] = {0.5, 0.9, 0.99, 1.0};
        double qs[4];
        struct cp_diag ignored;
        cp_diag_init(&ignored);
        r->mean_ms = sum / (double)n_lat;
        if (cp_stats_quantiles(lat, n_lat, ps, 4, qs, &ignored) == CP_OK) {
            r->p50_ms = qs[0];
            r->p90_ms = qs[1];
            r->p99_ms = qs[2];
            r->max_ms = qs[3];
        }
    }
    for (int i = 0; q && i < slots; i++) {
        if (q[i].h) {
            if (q[i].busy)
                curl_multi_remove_handle(mh, q[i].h);
            curl_easy_cleanup(q[i].h);
        }
        cp_buf_release(&q[i].out.b);
    }
    curl_slist_free_all(hdr);
    if (mh)
        curl_multi_cleanup(mh);
    curl_global_cleanup();
    free(q);
    free(lat);
    free(at);
    free(body);
    return st;
}

/* ---- recording a running server ---------------------------------------------------------- */

enum cp_status cp_serve_trace_target(const struct cp_trace_target_opts *o,
                                     struct cp_trace_target_result *r, struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    r->run_id = -1;
    if (!(o->duration_s > 0 && o->duration_s <= 3600))
        return cp_diag_set(d, CP_ERR_USAGE, "--duration is above 0 to an hour");
    if (!(o->sampling_pct > 0 && o->sampling_pct <= 100))
        return cp_diag_set(d, CP_ERR_USAGE, "--sampling_rate is a percentage above 0 to 100");
    char full[1300];
    snprintf(full, sizeof full, "%.1100s/v1/trace?seconds=%.6g&sampling=%.6g", o->url,
             o->duration_s, o->sampling_pct);
    json_t *j = NULL;
    enum cp_status st = get_json(full, (size_t)1 << 30, (long)o->duration_s + 60, &j, d);
    if (st != CP_OK)
        return st;
    struct cp_serve_event *ev = NULL;
    size_t n = 0;
    st = cp_serve_events_from_json(full, j, &ev, &n, d);
    const char *model = json_string_value(json_object_get(j, "model"));
    struct cp_serve_trace_info info = {
        .kind = "serve",
        .model_path = model ? model : o->url,
        .max_batch = (int)json_integer_value(json_object_get(j, "max_batch")),
        .threads = (int)json_integer_value(json_object_get(j, "threads")),
        .sampling = o->sampling_pct / 100,
    };
    r->seen = (uint64_t)json_integer_value(json_object_get(j, "seen"));
    r->captured = n;
    r->truncated = json_is_true(json_object_get(j, "truncated"));
    r->seconds = json_number_value(json_object_get(j, "seconds"));
    snprintf(r->model, sizeof r->model, "%s", info.model_path);
    if (st == CP_OK)
        st = cp_serve_store_events(o->out_path, &info, ev, n, &r->run_id, d);
    free(ev);
    json_decref(j);
    return st;
}
