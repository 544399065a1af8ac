/* `cannprof serve --monitor` on loopback, with a fire drill: from a moment
 * on, every batch is slower. The alert fires once, after the slowdown and
 * inside the window plus the hold; the incident folder holds the recorder's
 * dump, a deep trace with the kernel layer and the findings; the webhook
 * receives the alert as alert.json holds it. Without the slowdown (the
 * negative control), nothing fires. And GET /v1/trace, which `cannprof
 * trace --target` records, gives the requests' stage times. */
#include "cli/cli_test.h"
#include "serve/serve.h"
#include "serve/serve_proc.h"
#include "support/hook_server.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(serve_monitor, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

#define MODEL CP_SOURCE_DIR "/examples/models/resnet_tiny.onnx"

/* Load the server at `rate` for `seconds`. */
static struct cp_load_result load(int port, double rate, double seconds)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    struct cp_load_opts o = {
        .url = url, .rate = rate, .duration_s = seconds, .concurrency = 64, .seed = 3};
    struct cp_load_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_load_run(&o, &r, &d), CP_OK, "%s", d.msg);
    return r;
}

static bool exists_in(const char *dir, const char *name)
{
    char p[1100];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return stat(p, &sb) == 0 && sb.st_size > 0;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

Test(serve_monitor, an_injected_slowdown_fires_once_with_a_deep_trace_findings_and_a_webhook)
{
    struct hook_server hs;
    cr_assert(server_start(&hs, 1, (int[]){200}, NULL));
    char hook[128], dir[600];
    snprintf(hook, sizeof hook, "http://127.0.0.1:%d/hook", hs.port);
    char *inc = cp_t_path("incidents");
    snprintf(dir, sizeof dir, "%s", inc);
    /* 15 requests/s; from 3 s on every batch spins 80 ms more: the model
     * then carries 12/s and the queue grows, p99 far above 40 ms */
    const char *args[] = {"--monitor",
                          "p99_latency>40ms",
                          "--window",
                          "2s",
                          "--for",
                          "1s",
                          "--deep-trace",
                          "2s",
                          "--min-requests",
                          "10",
                          "--incident-dir",
                          dir,
                          "--webhook",
                          hook,
                          "--inject-slowdown",
                          "3s:+80",
                          NULL};
    struct server s = serve_start(MODEL, args);
    struct cp_load_result r = load(s.port, 15, 9);
    char *printed = NULL;
    int code = serve_stop(&s, &printed);
    server_stop(&hs);
    cr_expect_eq(code, 0, "%s", printed);
    cr_expect_eq(r.errors, 0);
    cr_expect_eq(count(printed, "monitor: FIRING"), 1, "%s", printed);
    ct_assert_mentions(printed, "1 incidents", "limiting node model", NULL);

    char idir[900];
    cr_assert_eq(serve_incidents(dir, idir, sizeof idir), 1);
    const char *files[] = {"recorder.db",   "windows.db",  "deep.db",
                           "findings.json", "findings.md", "alert.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        cr_expect(exists_in(idir, files[i]), "%s/%s is missing", idir, files[i]);

    char path[1100];
    snprintf(path, sizeof path, "%s/findings.json", idir);
    json_error_t e;
    json_t *f = json_load_file(path, 0, &e);
    cr_assert_not_null(f, "%s", e.text);
    json_t *fired = json_object_get(f, "fired");
    cr_expect_str_eq(json_string_value(json_object_get(fired, "condition")), "p99_latency>40ms");
    double at = json_real_value(json_object_get(fired, "fired_s_since_start"));
    /* after the slowdown, within the window plus the hold (and a tick) */
    cr_expect(at > 3.0 && at < 3.0 + 2 + 1 + 1.0, "fired at %.2f s", at);
    cr_expect_gt(json_real_value(json_object_get(fired, "value")), 0.040);
    json_t *deep = json_object_get(f, "deep_trace");
    cr_expect_gt(json_integer_value(json_object_get(deep, "requests")), 5);
    cr_expect_gt(json_integer_value(json_object_get(deep, "batches")), 5);
    cr_expect_gt(json_integer_value(json_object_get(deep, "kernel_events")), 10);
    json_t *nb = json_object_get(f, "node_bottleneck");
    cr_expect_str_eq(json_string_value(json_object_get(nb, "limiting_node")), "model");
    /* the batch's time is the drill's spin, outside the kernels */
    cr_expect_gt(
        json_real_value(json_object_get(json_object_get(f, "model_time"), "outside_kernels_share")),
        0.5);
    cr_expect_str_eq(
        json_string_value(json_object_get(json_object_get(f, "validation"), "verdict")),
        "regressed", "%s", json_dumps(json_object_get(f, "validation"), 0));
    cr_expect(json_is_true(json_object_get(json_object_get(f, "alert"), "delivered")));

    /* the webhook got the alert exactly as alert.json holds it */
    cr_expect_eq(hs.requests, 1);
    snprintf(path, sizeof path, "%s/alert.json", idir);
    char *sent = ct_read_text(path);
    cr_assert_not_null(hs.body);
    cr_expect_str_eq(hs.body, sent);
    json_t *p = json_loads(hs.body, 0, &e);
    cr_assert_not_null(p, "%s", e.text);
    cr_expect_str_eq(json_string_value(json_object_get(p, "event")), "incident");
    cr_expect_str_eq(json_string_value(json_object_get(p, "verdict")), "firing");
    json_t *fig = json_object_get(p, "figures");
    cr_expect_str_eq(json_string_value(json_object_get(fig, "condition")), "p99_latency>40ms");
    ct_assert_mentions(json_string_value(json_object_get(p, "text")), "limiting node: model",
                       "validate (incident vs last healthy window): regressed", NULL);
    json_decref(p);
    json_decref(f);
    free(sent);
    free(printed);
    free(inc);
    server_release(&hs);
}

Test(serve_monitor, without_a_slowdown_nothing_fires)
{
    char *inc = cp_t_path("quiet-incidents");
    const char *args[] = {
        "--monitor", "p99_latency>40ms", "--window", "2s", "--for", "1s", "--min-requests",
        "10",        "--incident-dir",   inc,        NULL};
    struct server s = serve_start(MODEL, args);
    struct cp_load_result r = load(s.port, 15, 6);
    char *printed = NULL;
    cr_expect_eq(serve_stop(&s, &printed), 0, "%s", printed);
    cr_expect_eq(r.errors, 0);
    cr_expect_eq(count(printed, "FIRING"), 0, "%s", printed);
    ct_assert_mentions(printed, "0 incidents", NULL);
    char none[1200];
    cr_expect_eq(serve_incidents(inc, none, sizeof none), 0);
    free(printed);
    free(inc);
}

Test(serve_monitor, bad_monitor_options_are_refused_with_exit_2)
{
    struct {
        const char *args[4];
        const char *says;
    } cases[] = {
        {{"--monitor", "p99_latncy>2s", NULL}, "unknown statistic 'p99_latncy'"},
        {{"--monitor", "p99_latency>2", NULL}, "latency needs a unit"},
        {{"--monitor", "gpu.p99_latency>2s", NULL}, "no node 'gpu'"},
        {{"--window", "5s", NULL}, "need --monitor"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct cp_run r;
        cp_run_cli(&r, "serve", MODEL, "--port", "0", cases[i].args[0], cases[i].args[1], NULL);
        cr_expect_eq(r.exit_code, 2, "%s: %s", cases[i].args[1], r.err);
        ct_assert_mentions(r.err, cases[i].says, NULL);
        cp_run_release(&r);
    }
}

Test(serve_monitor, trace_endpoint_gives_every_sampled_request_stage_by_stage)
{
    struct server s = serve_start(MODEL, NULL);
    /* a capture of 2 s at 50% while 20 requests/s arrive */
    struct body b;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        usleep(200000);
        load(s.port, 20, 1.5);
        _exit(0);
    }
    cr_assert_eq(serve_http(s.port, "GET", "/v1/trace?seconds=2&sampling=50", NULL, 0, NULL, &b),
                 200, "%s", b.data);
    waitpid(pid, NULL, 0);
    json_error_t e;
    json_t *o = json_loads(b.data, 0, &e);
    cr_assert_not_null(o, "%s", e.text);
    struct cp_serve_event *ev = NULL;
    size_t n = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_serve_events_from_json("answer", o, &ev, &n, &d), CP_OK, "%s", d.msg);
    json_int_t seen = json_integer_value(json_object_get(o, "seen"));
    cr_expect_gt(seen, 15);
    /* half of them, evenly */
    cr_expect((json_int_t)n >= seen / 2 - 1 && (json_int_t)n <= seen / 2 + 1, "%zu of %lld", n,
              (long long)seen);
    for (size_t i = 0; i < n; i++) {
        cr_expect_eq(ev[i].code, 200);
        cr_expect(ev[i].arrive_ns <= ev[i].queued_ns && ev[i].queued_ns <= ev[i].popped_ns &&
                      ev[i].popped_ns <= ev[i].run_start_ns &&
                      ev[i].run_start_ns < ev[i].run_end_ns && ev[i].run_end_ns <= ev[i].woken_ns &&
                      ev[i].woken_ns <= ev[i].replied_ns,
                  "request %zu's stages are out of order", i);
        cr_expect_geq(ev[i].batch, 1);
    }
    /* stored, they are a pipeline run node-bottleneck reads */
    char *db = cp_t_path("served.db");
    struct cp_serve_trace_info info = {.model_path = MODEL, .max_batch = 1};
    int64_t run = -1;
    cr_assert_eq(cp_serve_store_events(db, &info, ev, n, &run, &d), CP_OK, "%s", d.msg);
    struct cp_run nb;
    cp_run_cli(&nb, "node-bottleneck", db, "--json", NULL);
    cr_expect_eq(nb.exit_code, 0, "%s", nb.err);
    ct_assert_mentions(nb.out, "\"http\"", "\"model\"", "\"reply\"", NULL);
    cp_run_release(&nb);
    /* nothing answered: an empty capture is an error, not an empty trace */
    cr_expect_eq(cp_serve_store_events(db, &info, ev, 0, &run, &d), CP_ERR_INVALID);
    ct_assert_mentions(d.msg, "nothing to record", NULL);
    /* the command: all of the requests of a window while a loader runs */
    char *db2 = cp_t_path("target.db"), url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        load(s.port, 20, 2);
        _exit(0);
    }
    struct cp_run tr;
    cp_run_cli(&tr, "trace", "--target", url, "--duration", "1s", "--sampling_rate", "100%", "-o",
               db2, "--json", NULL);
    waitpid(pid, NULL, 0);
    cr_expect_eq(tr.exit_code, 0, "%s", tr.err);
    json_t *tj = json_loads(tr.out, 0, &e);
    cr_assert_not_null(tj, "%s", tr.out);
    cr_expect_gt(json_integer_value(json_object_get(tj, "requests_recorded")), 5);
    cr_expect_eq(json_integer_value(json_object_get(tj, "requests_recorded")),
                 json_integer_value(json_object_get(tj, "requests_seen")));
    json_decref(tj);
    cp_run_release(&tr);
    /* nothing listening, and no request in the window: exit 2, said */
    cp_run_cli(&tr, "trace", "--target", "http://127.0.0.1:1", "--duration", "1s", "-o", db2, NULL);
    cr_expect_eq(tr.exit_code, 2);
    ct_assert_mentions(tr.err, "http://127.0.0.1:1/v1/trace", NULL);
    cp_run_release(&tr);
    cp_run_cli(&tr, "trace", "--target", url, "--duration", "0.3s", "-o", db2, NULL);
    cr_expect_eq(tr.exit_code, 2);
    ct_assert_mentions(tr.err, "nothing to record", NULL);
    cp_run_release(&tr);
    char *printed = NULL;
    serve_stop(&s, &printed);
    free(printed);
    free(db2);
    free(db);
    free(ev);
    free(b.data);
    json_decref(o);
}
