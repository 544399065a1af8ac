#define _GNU_SOURCE /* memmem */
/* `cannprof serve` and `cannprof load` (serve/serve.h): a real server on
 * loopback, started as a process. Its model description; inference in
 * both request forms, answers equal to the model's; bad requests answered
 * 4xx with a message, never a crash; the load generator's counts; the
 * metrics; and SIGTERM while requests wait in a batch: every one answered,
 * then a clean exit. */
#include "cli/cli_test.h"
#include "serve/serve_proc.h"
#include "support/onnx_build.h"
#include "runner/runner.h"
#include "runner/session.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(serve, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

/* launch_bound_tiny's input: x f32 [1, 16]. */
static char *raw_body(const float *x, size_t *len)
{
    const char *head = "{\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[1,16]}]}\n";
    size_t h = strlen(head);
    char *b = malloc(h + 64);
    memcpy(b, head, h);
    memcpy(b + h, x, 64);
    *len = h + 64;
    return b;
}

Test(serve, a_model_served_answers_both_forms_and_refuses_bad_requests)
{
    struct server s = serve_start(CP_SOURCE_DIR "/examples/models/launch_bound_tiny.onnx", NULL);
    struct body b;
    cr_expect_eq(serve_http(s.port, "GET", "/v1/model", NULL, 0, NULL, &b), 200);
    json_t *m = ct_json(b.data);
    json_t *in0 = json_array_get(json_object_get(m, "inputs"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(in0, "name")), "x");
    cr_expect_str_eq(json_string_value(json_object_get(in0, "dtype")), "f32");
    cr_expect_eq(json_integer_value(json_array_get(json_object_get(in0, "shape"), 1)), 16);
    json_decref(m);
    free(b.data);
    /* raw form: header line + bytes; the answer as the model computes it */
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = 0.1f * (float)(i - 8);
    size_t len;
    char *req = raw_body(x, &len);
    cr_assert_eq(serve_http(s.port, "POST", "/v1/infer", req, len, NULL, &b), 200, "%s", b.data);
    char *nl = memchr(b.data, '\n', b.len);
    cr_assert_not_null(nl);
    cr_expect_eq(b.len - (size_t)(nl + 1 - b.data), 64, "y: 16 floats");
    /* the same inputs through the library: the same bytes */
    struct cp_session ses;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_session_opts so = {.model_path =
                                     CP_SOURCE_DIR "/examples/models/launch_bound_tiny.onnx",
                                 .threads = 1,
                                 .buffer_optimize = -1};
    cr_assert_eq(cp_session_open(&ses, &so, &d), CP_OK, "%s", d.msg);
    struct cp_host_tensor t = {.dtype = CP_DTYPE_F32, .rank = 2, .dims = {1, 16}, .nbytes = 64};
    t.data = malloc(64);
    memcpy(t.data, x, 64);
    cr_assert_eq(cp_plan_set_input(ses.plan, 0, &t, &d), CP_OK);
    cr_assert_eq(cp_plan_run(ses.plan, -1, &d), CP_OK);
    struct cp_host_tensor y;
    cr_assert_eq(cp_plan_get_output(ses.plan, 0, &y, &d), CP_OK);
    cr_expect_eq(memcmp(nl + 1, y.data, 64), 0, "served = run");
    cp_host_tensor_release(&y);
    cp_host_tensor_release(&t);
    cp_session_close(&ses);
    free(b.data);
    /* multipart form: one .npy part per input, the answer as .npy parts */
    struct cp_host_tensor xt = {.dtype = CP_DTYPE_F32, .rank = 2, .dims = {1, 16}, .nbytes = 64};
    snprintf(xt.name, sizeof xt.name, "x");
    xt.data = x;
    uint8_t *npy = NULL;
    size_t npy_len = 0;
    cr_assert_eq(cp_tensor_npy_encode(&xt, "x", &npy, &npy_len, &d), CP_OK);
    CURL *h = curl_easy_init();
    curl_mime *mime = curl_mime_init(h);
    curl_mimepart *part = curl_mime_addpart(mime);
    curl_mime_name(part, "x");
    curl_mime_filename(part, "x.npy");
    curl_mime_data(part, (const char *)npy, npy_len);
    cr_expect_eq(serve_http(s.port, "POST", "/v1/infer", NULL, 0, mime, &b), 200, "%s", b.data);
    cr_expect(b.data && memmem(b.data, b.len, "name=\"y\"", 8) &&
                  memmem(b.data, b.len, "\x93NUMPY", 6),
              "an .npy part named y");
    curl_mime_free(mime);
    curl_easy_cleanup(h);
    free(npy);
    free(b.data);
    /* bad requests: 4xx with a message */
    cr_expect_eq(serve_http(s.port, "POST", "/v1/infer", "junk", 4, NULL, &b), 400);
    ct_assert_mentions(b.data, "JSON header line", NULL);
    free(b.data);
    const char *wrong = "{\"inputs\":[{\"name\":\"x\",\"dtype\":\"i64\",\"shape\":[1,16]}]}\n";
    char *wb = malloc(strlen(wrong) + 128);
    memcpy(wb, wrong, strlen(wrong));
    memset(wb + strlen(wrong), 0, 128);
    cr_expect_eq(serve_http(s.port, "POST", "/v1/infer", wb, strlen(wrong) + 128, NULL, &b), 400);
    ct_assert_mentions(b.data, "dtype i64, the model takes f32", NULL);
    free(b.data);
    cr_expect_eq(serve_http(s.port, "POST", "/v1/infer", req, len - 4, NULL, &b), 400, "short");
    free(b.data);
    size_t big = 3 << 20;
    char *huge = calloc(1, big);
    cr_expect_eq(serve_http(s.port, "POST", "/v1/infer", huge, big, NULL, &b), 413);
    free(b.data);
    free(huge);
    cr_expect_eq(serve_http(s.port, "GET", "/v1/infer", NULL, 0, NULL, &b), 405);
    free(b.data);
    cr_expect_eq(serve_http(s.port, "GET", "/nowhere", NULL, 0, NULL, &b), 404);
    free(b.data);
    cr_expect_eq(serve_http(s.port, "GET", "/health", NULL, 0, NULL, &b), 200);
    free(b.data);
    free(wb);
    free(req);
    char *printed = NULL;
    cr_expect_eq(serve_stop(&s, &printed), 0, "%s", printed);
    ct_assert_mentions(printed, "serve: stopped:", NULL);
    free(printed);
}

Test(serve, load_is_counted_in_the_metrics_and_batches_form)
{
    static const char *const args[] = {"--max-batch", "4", "--batch-window", "3", NULL};
    struct server s = serve_start(CP_SOURCE_DIR "/examples/models/launch_bound_tiny.onnx", args);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    struct cp_run r;
    cp_run_cli(&r, "load", url, "--rate", "150", "--duration", "1s", "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    json_int_t sent = json_integer_value(json_object_get(j, "sent"));
    cr_expect_gt(sent, 50);
    cr_expect_eq(json_integer_value(json_object_get(j, "ok")), sent);
    cr_expect_eq(json_integer_value(json_object_get(j, "errors")), 0);
    json_decref(j);
    struct body b;
    cr_expect_eq(serve_http(s.port, "GET", "/metrics", NULL, 0, NULL, &b), 200);
    char want[96];
    snprintf(want, sizeof want, "cannprof_batch_size_sum %lld", (long long)sent);
    ct_assert_mentions(b.data, "cannprof_requests_total{code=\"2xx\"}", want,
                       "cannprof_request_latency_seconds_bucket{le=\"+Inf\"}", NULL);
    free(b.data);
    char *printed = NULL;
    cr_expect_eq(serve_stop(&s, &printed), 0);
    free(printed);
    /* no server there */
    cp_run_cli(&r, "load", url, "--rate", "10", "--duration", "1s", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "Couldn't connect", NULL);
    cp_run_release(&r);
}

/* A Relu whose batch dimension is left open: x, y f32 ["N", 4], written
 * in the scratch folder; its path. */
static char *open_batch_relu(void)
{
    char *path = cp_t_path("open_batch.onnx");
    struct cp_t_onnx *m = cp_t_onnx_new(13);
    const int64_t dims[] = {-1, 4};
    cp_t_onnx_input(m, "x", CP_T_F32, 2, dims);
    cp_t_onnx_output(m, "y", CP_T_F32, 2, dims);
    cp_t_onnx_node(m, "Relu", "relu", "x", "y");
    cr_assert(cp_t_onnx_write(m, path));
    cp_t_onnx_free(m);
    return path;
}

/* A model whose batch dimension is left open ("N" x 4), served one request
 * at a time and in batches: its batch is the one served. */
Test(serve, a_model_with_an_open_batch_is_served_at_the_batch_asked_for)
{
    char *path = open_batch_relu();
    static const char *const batched[] = {"--max-batch", "4", NULL};
    for (int k = 0; k < 2; k++) {
        struct server s = serve_start(path, k ? batched : NULL);
        struct body b;
        const char *head = "{\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[1,4]}]}\n";
        float x[4] = {-1, 2, -3, 4};
        size_t h = strlen(head);
        char req[256];
        memcpy(req, head, h);
        memcpy(req + h, x, sizeof x);
        cr_assert_eq(serve_http(s.port, "POST", "/v1/infer", req, h + sizeof x, NULL, &b), 200,
                     "max batch %d: %s", k ? 4 : 1, b.data);
        char *nl = memchr(b.data, '\n', b.len);
        cr_assert_not_null(nl);
        float y[4];
        cr_assert_eq(b.len - (size_t)(nl + 1 - b.data), sizeof y);
        memcpy(y, nl + 1, sizeof y);
        cr_expect(y[0] == 0 && y[1] == 2 && y[2] == 0 && y[3] == 4, "relu: %g %g %g %g", y[0], y[1],
                  y[2], y[3]);
        free(b.data);
        char *printed = NULL;
        cr_expect_eq(serve_stop(&s, &printed), 0, "%s", printed);
        free(printed);
    }
    free(path);
}

/* One request of four, sent at once to a server batching up to four with
 * a long window: each is answered with its own rows of the batch. */
struct relu_call {
    int port;
    float x[4], y[4];
    long code;
};

static void *relu_call_main(void *arg)
{
    struct relu_call *c = arg;
    const char *head = "{\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[1,4]}]}\n";
    size_t h = strlen(head);
    char req[256];
    memcpy(req, head, h);
    memcpy(req + h, c->x, sizeof c->x);
    struct body b;
    c->code = serve_http(c->port, "POST", "/v1/infer", req, h + sizeof c->x, NULL, &b);
    char *nl = c->code == 200 ? memchr(b.data, '\n', b.len) : NULL;
    if (nl && b.len - (size_t)(nl + 1 - b.data) == sizeof c->y)
        memcpy(c->y, nl + 1, sizeof c->y);
    else
        c->code = -c->code;
    free(b.data);
    return NULL;
}

Test(serve, requests_batched_together_each_get_their_own_rows)
{
    char *path = open_batch_relu();
    static const char *const args[] = {"--max-batch", "4", "--batch-window", "500", NULL};
    struct server s = serve_start(path, args);
    struct relu_call c[4];
    pthread_t th[4];
    for (int k = 0; k < 4; k++) {
        c[k].port = s.port;
        for (int j = 0; j < 4; j++)
            c[k].x[j] = (float)((j % 2 ? 1 : -1) * (10 * k + j + 1));
        cr_assert_eq(pthread_create(&th[k], NULL, relu_call_main, &c[k]), 0);
    }
    for (int k = 0; k < 4; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < 4; k++) {
        cr_expect_eq(c[k].code, 200, "request %d: %ld", k, c[k].code);
        for (int j = 0; j < 4; j++)
            cr_expect(c[k].y[j] == (c[k].x[j] > 0 ? c[k].x[j] : 0), "request %d [%d]: %g for %g", k,
                      j, c[k].y[j], c[k].x[j]);
    }
    /* they ran together: fewer batches than requests */
    struct body b;
    cr_expect_eq(serve_http(s.port, "GET", "/metrics", NULL, 0, NULL, &b), 200);
    const char *at = strstr(b.data, "cannprof_batch_size_count ");
    cr_assert_not_null(at, "%s", b.data);
    cr_expect_lt(atol(at + strlen("cannprof_batch_size_count ")), 4, "%s", at);
    free(b.data);
    char *printed = NULL;
    cr_expect_eq(serve_stop(&s, &printed), 0, "%s", printed);
    free(printed);
    free(path);
}

/* SIGTERM while requests wait in a batch window: each is answered. */
Test(serve, sigterm_drains_the_requests_in_flight)
{
    static const char *const args[] = {"--max-batch", "16", "--batch-window", "3000", NULL};
    struct server s = serve_start(CP_SOURCE_DIR "/examples/models/launch_bound_tiny.onnx", args);
    float x[16] = {0};
    size_t len;
    char *req = raw_body(x, &len);
    CURLM *mh = curl_multi_init();
    CURL *hs[4];
    long codes[4] = {0};
    struct body bodies[4];
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/infer", s.port);
    for (int i = 0; i < 4; i++) {
        memset(&bodies[i], 0, sizeof bodies[i]);
        hs[i] = curl_easy_init();
        curl_easy_setopt(hs[i], CURLOPT_URL, url);
        curl_easy_setopt(hs[i], CURLOPT_POSTFIELDS, req);
        curl_easy_setopt(hs[i], CURLOPT_POSTFIELDSIZE, (long)len);
        curl_easy_setopt(hs[i], CURLOPT_WRITEFUNCTION, serve_on_data);
        curl_easy_setopt(hs[i], CURLOPT_WRITEDATA, &bodies[i]);
        curl_multi_add_handle(mh, hs[i]);
    }
    int running = 0;
    /* send them; once all four wait in the batch window (the server's
     * queue depth says so), stop the server */
    int64_t t0 = (int64_t)cp_clock_ns();
    bool killed = false;
    do {
        curl_multi_perform(mh, &running);
        curl_multi_poll(mh, NULL, 0, 10, NULL);
        if (!killed) {
            struct body m;
            long code = serve_http(s.port, "GET", "/metrics", NULL, 0, NULL, &m);
            bool queued = code == 200 && m.data && strstr(m.data, "cannprof_queue_depth 4\n");
            free(m.data);
            if (queued || (int64_t)cp_clock_ns() - t0 > 2500000000) {
                cr_expect(queued, "the four requests never all waited in the window");
                kill(s.pid, SIGTERM);
                killed = true;
            }
        }
    } while (running);
    for (int i = 0; i < 4; i++) {
        curl_easy_getinfo(hs[i], CURLINFO_RESPONSE_CODE, &codes[i]);
        cr_expect_eq(codes[i], 200, "request %d lost in the shutdown", i);
        curl_multi_remove_handle(mh, hs[i]);
        curl_easy_cleanup(hs[i]);
        free(bodies[i].data);
    }
    curl_multi_cleanup(mh);
    int status = 0;
    waitpid(s.pid, &status, 0);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *printed = ct_read_text(s.out);
    ct_assert_mentions(printed, "4 ok", NULL);
    free(printed);
    free(s.out);
    free(req);
}
