/* `cannprof serve FLOW.toml`: a flow served over HTTP. Its description
 * and sample; a request's source data in, what reaches the sink out (a
 * PNG, or a tensor as .npy); a request a unit refuses answered 400 while
 * the flow goes on; `cannprof load` against it; every node in /metrics;
 * and with --monitor and a fire drill, an incident whose deep trace holds
 * the flow's own nodes for node-bottleneck. */
#include "cli/cli_test.h"
#include "serve/serve.h"
#include "serve/serve_proc.h"
#include "support/png.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(serve_flow, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

/* A flow in the scratch folder: text -> tokens -> the text encoder ->
 * .npy, with a folder of prompts and a 3 ms delay node. */
static char *text_flow(void)
{
    char *in = cp_t_path("prompts");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_mkdir_p(in, 0755, &d), CP_OK);
    char *p = cp_t_fmt("%s/a.txt", in);
    ct_write_text(p, "a poster of a cat");
    free(p);
    free(in);
    char *path = cp_t_path("flow.toml");
    char *text = cp_t_fmt(
        "[flow]\ndesc = \"served\"\n[graph]\nformat = \"graphviz\"\ngraphconf = '''digraph f {\n"
        "  src[flowunit=file_source, dir=\"prompts\"]\n"
        "  wait[flowunit=delay, spin_ms=3]\n"
        "  tok[flowunit=tokenize, max_len=77, vocab=1000]\n"
        "  enc[flowunit=inference, model=\"%s/examples/models/text_encoder_tiny.onnx\", "
        "threads=1]\n"
        "  out[flowunit=file_sink, dir=\"out\"]\n"
        "  src:out -> wait:in\n  wait:out -> tok:in\n  tok:out -> enc:in\n  enc:out -> out:in\n"
        "}'''\n",
        CP_SOURCE_DIR);
    ct_write_text(path, text);
    free(text);
    return path;
}

Test(serve_flow, a_flow_answers_what_reaches_its_sink_and_survives_a_bad_request)
{
    char *f = text_flow();
    struct server s = serve_start(f, NULL);
    struct body b;
    cr_assert_eq(serve_http(s.port, "GET", "/v1/model", NULL, 0, NULL, &b), 200);
    json_error_t e;
    json_t *m = json_loads(b.data, 0, &e);
    cr_assert_not_null(m);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(m, "request"), "sample")),
                     "a.txt");
    cr_expect_eq(json_array_size(json_object_get(m, "nodes")), 5);
    json_decref(m);
    free(b.data);
    cr_expect_eq(serve_http(s.port, "GET", "/v1/sample", NULL, 0, NULL, &b), 200);
    cr_expect_str_eq(b.data, "a poster of a cat");
    free(b.data);
    /* the encoder's output as .npy */
    const char *prompt = "a red fox on a poster";
    cr_assert_eq(serve_http(s.port, "POST", "/v1/infer", prompt, strlen(prompt), NULL, &b), 200,
                 "%s", b.data);
    cr_expect(b.len > 10 && memcmp(b.data, "\x93NUMPY", 6) == 0, "not a .npy");
    free(b.data);
    /* the load generator sends the flow's sample */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    struct cp_load_opts lo = {
        .url = url, .rate = 30, .duration_s = 2, .concurrency = 16, .seed = 1};
    struct cp_load_result lr;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_load_run(&lo, &lr, &d), CP_OK, "%s", d.msg);
    cr_expect_gt(lr.ok, 30);
    cr_expect_eq(lr.errors, 0);
    cr_expect_eq(serve_http(s.port, "GET", "/metrics", NULL, 0, NULL, &b), 200);
    ct_assert_mentions(b.data, "cannprof_flow_node_busy_seconds_count{node=\"enc\"}",
                       "cannprof_flow_node_busy_seconds_count{node=\"wait\"}", NULL);
    free(b.data);
    char *printed = NULL;
    cr_expect_eq(serve_stop(&s, &printed), 0, "%s", printed);
    ct_assert_mentions(printed, "serve: the flow", NULL);
    free(printed);
    free(f);
}

Test(serve_flow, a_unit_that_refuses_a_request_answers_400_and_the_flow_goes_on)
{
    /* an image flow: a body that is not a PNG fails image_decode */
    char *in = cp_t_path("imgs");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_mkdir_p(in, 0755, &d), CP_OK);
    char *p = cp_t_fmt("%s/x.bin", in);
    ct_write_text(p, "not an image");
    free(p);
    free(in);
    char *f = cp_t_path("img.toml");
    ct_write_text(f, "[graph]\nformat = \"graphviz\"\ngraphconf = '''digraph g {\n"
                     "  src[flowunit=file_source, dir=\"imgs\"]\n"
                     "  dec[flowunit=image_decode]\n"
                     "  enc[flowunit=image_encode]\n"
                     "  out[flowunit=file_sink, dir=\"o\"]\n"
                     "  src:out -> dec:in\n  dec:out -> enc:in\n  enc:out -> out:in\n}'''\n");
    /* its warm-up sample is not an image either: the server says so */
    struct cp_run r;
    cp_run_cli(&r, "serve", f, "--port", "0", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "warming the flow up", "dec", NULL);
    cp_run_release(&r);
    /* with a real PNG to warm up on, a bad request is a 400 and the next is fine */
    char *dir = cp_t_path("imgs");
    p = cp_t_fmt("%s/x.bin", dir);
    cr_assert(cp_t_write_file(p, (const char *)cp_t_png, cp_t_png_len));
    free(p);
    free(dir);
    struct server s = serve_start(f, NULL);
    struct body b;
    cr_expect_eq(serve_http(s.port, "POST", "/v1/infer", "junk", 4, NULL, &b), 400);
    ct_assert_mentions(b.data, "dec", NULL);
    free(b.data);
    cr_expect_eq(serve_http(s.port, "POST", "/v1/infer", cp_t_png, cp_t_png_len, NULL, &b), 200);
    cr_expect(b.len > 8 && memcmp(b.data, "\x89PNG", 4) == 0);
    free(b.data);
    char *printed = NULL;
    cr_expect_eq(serve_stop(&s, &printed), 0, "%s", printed);
    free(printed);
    free(f);
}

/* Serve text_flow() with `--monitor cond` (a 2 s window held 1 s, a 2 s
 * deep trace, 10 requests at least) and the fire drill `drill`, load it at
 * 20 requests/s for `seconds`, stop it, and read the one incident it must
 * have written: its folder (dir) and findings.json; what serve printed in
 * *printed. */
static json_t *one_incident(const char *f, const char *cond, const char *drill, uint64_t seed,
                            double seconds, char *dir, size_t n_dir, char **printed)
{
    char *inc = cp_t_path("incidents");
    const char *args[] = {"--monitor",
                          cond,
                          "--window",
                          "2s",
                          "--for",
                          "1s",
                          "--deep-trace",
                          "2s",
                          "--min-requests",
                          "10",
                          "--incident-dir",
                          inc,
                          "--inject-slowdown",
                          drill,
                          NULL};
    struct server s = serve_start(f, args);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    struct cp_load_opts lo = {
        .url = url, .rate = 20, .duration_s = seconds, .concurrency = 64, .seed = seed};
    struct cp_load_result lr;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_load_run(&lo, &lr, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(lr.errors, 0);
    *printed = NULL;
    cr_expect_eq(serve_stop(&s, printed), 0, "%s", *printed);
    cr_assert_eq(serve_incidents(inc, dir, n_dir), 1, "%s", *printed);
    free(inc);
    char *path = cp_t_fmt("%s/findings.json", dir);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    cr_assert_not_null(j, "%s", e.text);
    free(path);
    return j;
}

Test(serve_flow, a_monitored_flow_traces_its_own_nodes_in_an_incident)
{
    char *f = text_flow();
    char dir[1200], *printed = NULL;
    json_t *j = one_incident(f, "p99_latency>60ms", "3s:+120", 2, 8, dir, sizeof dir, &printed);
    json_t *deep = json_object_get(j, "deep_trace");
    cr_expect_geq(json_integer_value(json_object_get(deep, "flow_run")), 1, "%s",
                  json_dumps(deep, 0));
    /* node-bottleneck read the flow's own nodes */
    json_t *nodes = json_object_get(json_object_get(j, "node_bottleneck"), "nodes");
    bool enc = false;
    for (size_t i = 0; i < json_array_size(nodes); i++)
        enc = enc || strcmp(json_string_value(json_object_get(json_array_get(nodes, i), "name")),
                            "enc") == 0;
    cr_expect(enc, "%s", json_dumps(json_object_get(j, "node_bottleneck"), 0));
    json_decref(j);
    free(printed);
    free(f);
}

/* The name of the node object in `arr` whose "node" is `name`, or NULL. */
static json_t *node_entry(json_t *arr, const char *name)
{
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *o = json_array_get(arr, i);
        const char *n = json_string_value(json_object_get(o, "node"));
        if (n && strcmp(n, name) == 0)
            return o;
    }
    return NULL;
}

Test(serve_flow, a_condition_on_a_flows_own_node_fires_when_that_node_slows)
{
    /* the delay node spins 3 ms a call; from 4 s on, 25 ms: its own p99
     * crosses 12 ms while nothing else changes */
    char *f = text_flow();
    char dir[1200], *printed = NULL;
    json_t *j =
        one_incident(f, "wait.p99_latency>12ms", "4s:+22@wait", 3, 9, dir, sizeof dir, &printed);
    ct_assert_mentions(printed, "FIRING: wait.p99_latency>12ms", NULL);
    json_t *fired = json_object_get(j, "fired");
    cr_expect_str_eq(json_string_value(json_object_get(fired, "condition")),
                     "wait.p99_latency>12ms");
    /* the node's own calls: about 25 ms (more when a loaded machine preempts
     * the spin), not the request's latency */
    double v = json_number_value(json_object_get(fired, "value"));
    cr_expect(v > 0.020 && v < 0.200, "value %g s", v);
    /* the recorder's node calls name the node that slowed */
    json_t *fn = json_object_get(j, "flow_nodes");
    cr_expect_str_eq(json_string_value(json_object_get(fn, "grew_most")), "wait", "%s",
                     json_dumps(fn, 0));
    json_t *w = node_entry(json_object_get(fn, "nodes"), "wait");
    cr_assert_not_null(w);
    cr_expect_lt(json_number_value(json_object_get(w, "median_busy_ms_before")), 10);
    cr_expect_gt(json_number_value(json_object_get(w, "median_busy_ms_now")), 20);
    /* the deep trace holds the encoder's kernels, on its worker's track */
    json_t *deep = json_object_get(j, "deep_trace");
    cr_expect_gt(json_integer_value(json_object_get(deep, "kernel_events")), 0, "%s",
                 json_dumps(deep, 0));
    json_t *enc = node_entry(json_object_get(j, "model_layer"), "enc");
    cr_assert_not_null(enc, "%s", json_dumps(json_object_get(j, "model_layer"), 0));
    cr_expect_gt(json_number_value(json_object_get(enc, "kernel_ms")), 0);
    cr_expect_gt(json_array_size(json_object_get(enc, "top_kernels")), 0);
    /* the alert names the node too */
    char *alert = cp_t_fmt("%s/alert.json", dir);
    char *text = ct_read_text(alert);
    cr_assert_not_null(text);
    ct_assert_mentions(text, "wait.p99_latency", "node_grew_most", NULL);
    free(text);
    free(alert);
    json_decref(j);
    free(printed);
    free(f);
}

Test(serve_flow, conditions_and_drills_on_nodes_nothing_served_has_are_refused)
{
    char *f = text_flow();
    char *model = cp_t_fmt("%s/examples/models/resnet_tiny.onnx", CP_SOURCE_DIR);
    struct cp_run r;
    cp_run_cli(&r, "serve", f, "--port", "0", "--monitor", "nosuch.p99_latency>1s", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "no node 'nosuch'", "src, wait, tok, enc, out", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "serve", f, "--port", "0", "--monitor", "enc.throughput<5/s", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "throughput are the service's", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "serve", model, "--port", "0", "--monitor", "enc.p99_latency>1s", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "no node 'enc' in a served model", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "serve", f, "--port", "0", "--inject-slowdown", "1s:+5@nosuch", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "no node 'nosuch'", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "serve", model, "--port", "0", "--inject-slowdown", "1s:+5@enc", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "only a flow", NULL);
    cp_run_release(&r);
    free(model);
    free(f);
}
