/* `cannprof pipeline` (pipeline/pipeline.h): flows in ModelBox's format
 * read and checked with file:line in every refusal; planted bottlenecks
 * measured as what they are (a sleep off the CPU, a spin on it, a full
 * queue blocking its producer, an idle consumer starved); loops, fan-out,
 * batching, the image units and a model; every call in the trace. Time
 * assertions are lower bounds a loaded machine cannot break (a sleep is
 * never shorter, a spin counts CPU time). */
#include "cli/cli_test.h"
#include "pipeline/pipeline.h"
#include "runner/runner.h"
#include "support/onnx_build.h"
#include "support/png.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>

#include <dirent.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(pipeline, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

/* A flow file in the scratch folder whose graphconf is `dot` (starting on
 * line 3), with an input folder of three text files. */
static char *flow(const char *name, const char *dot)
{
    char *in = cp_t_path("in");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_mkdir_p(in, 0755, &d), CP_OK);
    for (int i = 0; i < 3; i++) {
        char *p = cp_t_fmt("%s/p%d.txt", in, i);
        char *text = cp_t_fmt("a poster of cat number %d", i);
        ct_write_text(p, text);
        free(text);
        free(p);
    }
    free(in);
    char *path = cp_t_path(name);
    char *text = cp_t_fmt("[flow]\ndesc = \"test\"\n[graph]\nformat = \"graphviz\"\n"
                          "graphconf = '''\n%s'''\n",
                          dot);
    ct_write_text(path, text);
    free(text);
    return path;
}

/* `pipeline check` must refuse the flow, naming `where` and `what`. */
static void refused(const char *dot, const char *where, const char *what)
{
    char *p = flow("bad.toml", dot);
    struct cp_run r;
    cp_run_cli(&r, "pipeline", "check", p, NULL);
    cr_expect_eq(r.exit_code, 2, "%s: %s", dot, r.err);
    char *at = cp_t_fmt("bad.toml:%s", where);
    cr_expect(strstr(r.err, at) != NULL, "'%s' not in: %s", at, r.err);
    cr_expect(strstr(r.err, what) != NULL, "'%s' not in: %s", what, r.err);
    free(at);
    cp_run_release(&r);
    free(p);
}

Test(pipeline, bad_flows_are_refused_naming_the_line)
{
    /* graphconf's text starts on line 6 */
    refused("digraph g {\n src[flowunit=file_source, dir=\"in\"]\n x[flowunit=warp]\n"
            " src:out -> x:in\n}\n",
            "8:", "unknown flowunit 'warp'");
    refused("digraph g {\n src[flowunit=file_source, dir=\"in\"]\n a[flowunit=delay]\n"
            " b[flowunit=delay]\n src:out -> a:in\n a:out -> b:in\n b:out -> a:in\n}\n",
            "", "on a cycle that does not run through a loop node");
    refused("digraph g {\n src[flowunit=file_source, dir=\"in\"]\n a[flowunit=delay]\n"
            " src -> a\n}\n",
            "9:", "name both ports");
    refused("digraph g {\n src[flowunit=file_source, dir=\"in\"]\n a[flowunit=delay]\n"
            " src:out -> a:image\n}\n",
            "9:", "a has no input port 'image'");
    refused("digraph g {\n src[flowunit=file_source, dir=\"in\"]\n"
            " m[flowunit=inference, model=\"nowhere.om\"]\n src:out -> m:in\n}\n",
            "8:", "model=nowhere.om: no such file");
    refused("digraph g {\n src[flowunit=file_source, dir=\"in\"]\n a[flowunit=delay, slep_ms=3]\n"
            " src:out -> a:in\n}\n",
            "8:", "unknown key 'slep_ms'");
    refused("digraph g {\n src[flowunit=file_source, dir=\"in\"]\n l[flowunit=loop, count=2]\n"
            " a[flowunit=delay]\n src:out -> l:in\n l:out -> a:in\n a:out -> l:in\n}\n",
            "8:", "loop l: no edge out of the loop");
    refused("digraph g {\n src[flowunit=file_source, dir=\"in\"]\n a[flowunit=delay]\n"
            " src:out -> a:in\n a:out -> src:in\n}\n",
            "10:", "src is a source");
    refused("digraph g {\n src[flowunit=file_source, dir=\"in\"\n}\n", "", "not a DOT graph");
    refused("digraph g {\n src[flowunit=file_source, dir=\"in\"]\n a[flowunit=delay, "
            "batch_size=0]\n src:out -> a:in\n}\n",
            "8:", "batch_size=0");
    /* not TOML at all: line and column */
    char *p = cp_t_path("notoml.toml");
    ct_write_text(p, "[graph\ngraphconf = 1\n");
    struct cp_run r;
    cp_run_cli(&r, "pipeline", "check", p, NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "notoml.toml:1:", "not valid TOML", NULL);
    cp_run_release(&r);
    free(p);
}

/* The figures of `pipeline run --json`, by node name. */
static json_t *run_json(const char *flow_path, const char *requests, const char *trace)
{
    struct cp_run r;
    if (trace)
        cp_run_cli(&r, "pipeline", "run", flow_path, "--requests", requests, "--trace", trace,
                   "--json", NULL);
    else
        cp_run_cli(&r, "pipeline", "run", flow_path, "--requests", requests, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    return j;
}

static json_t *node(json_t *j, const char *name)
{
    json_t *nodes = json_object_get(j, "nodes");
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        json_t *n = json_array_get(nodes, i);
        if (strcmp(json_string_value(json_object_get(n, "name")), name) == 0)
            return n;
    }
    cr_assert_fail("no node %s", name);
    return NULL;
}

static double fig(json_t *j, const char *name, const char *key)
{
    return json_number_value(json_object_get(node(j, name), key));
}

Test(pipeline, planted_sleep_spin_and_full_queue_are_measured_as_they_are)
{
    char *p = flow("planted.toml", "digraph planted {\n"
                                   " src[flowunit=file_source, dir=\"in\"]\n"
                                   " io[flowunit=delay, sleep_ms=10]\n"
                                   " cpu[flowunit=delay, spin_ms=4, queue_size=1]\n"
                                   " tok[flowunit=tokenize, max_len=8]\n"
                                   " sink[flowunit=file_sink, dir=\"out\"]\n"
                                   " src:out -> io:in\n io:out -> cpu:in\n cpu:out -> tok:in\n"
                                   " tok:out -> sink:in\n}\n");
    json_t *j = run_json(p, "12", NULL);
    cr_expect_eq(json_integer_value(json_object_get(j, "done")), 12);
    /* a sleep is off the CPU: never less than the sleeps asked for */
    cr_expect_geq(fig(j, "io", "offcpu_s"), 12 * 0.010 * 0.99);
    cr_expect_lt(fig(j, "io", "cpu_s"), fig(j, "io", "offcpu_s"));
    /* a spin counts CPU time: never less than asked */
    cr_expect_geq(fig(j, "cpu", "cpu_s"), 12 * 0.004 * 0.99);
    /* downstream of the sleeping node, the others wait for work */
    cr_expect_gt(fig(j, "tok", "starved_s"), 0);
    json_decref(j);
    /* a consumer slower than its producer, behind a queue of one: the
     * producer is blocked pushing */
    char *q = flow("blocked.toml", "digraph blocked {\n"
                                   " src[flowunit=file_source, dir=\"in\"]\n"
                                   " fast[flowunit=tokenize]\n"
                                   " slow[flowunit=delay, sleep_ms=5, queue_size=1]\n"
                                   " sink[flowunit=file_sink, dir=\"out2\"]\n"
                                   " src:out -> fast:in\n fast:out -> slow:in\n"
                                   " slow:out -> sink:in\n}\n");
    j = run_json(q, "10", NULL);
    cr_expect_gt(fig(j, "fast", "blocked_s"), 0.005, "pushing into slow's full queue");
    cr_expect_leq(json_integer_value(json_object_get(node(j, "slow"), "max_queue_depth")), 1,
                  "a queue never holds more than its size");
    json_decref(j);
    char *out = cp_t_path("out2");
    DIR *dp = opendir(out);
    cr_assert_not_null(dp);
    int files = 0;
    for (struct dirent *de; (de = readdir(dp));)
        files += de->d_name[0] != '.';
    closedir(dp);
    cr_expect_eq(files, 10, "one file per request");
    free(out);
    free(q);
    free(p);
}

Test(pipeline, a_loop_runs_its_body_count_times_and_fan_out_reaches_every_sink)
{
    char *p = flow("loop.toml", "digraph looped {\n"
                                " src[flowunit=file_source, dir=\"in\"]\n"
                                " tok[flowunit=tokenize]\n"
                                " steps[flowunit=loop, count=3]\n"
                                " step[flowunit=delay]\n"
                                " a[flowunit=file_sink, dir=\"a\"]\n"
                                " b[flowunit=file_sink, dir=\"b\"]\n"
                                " src:out -> tok:in\n tok:out -> steps:in\n"
                                " steps:out -> step:in\n step:out -> steps:in\n"
                                " steps:out -> a:in\n steps:out -> b:in\n}\n");
    /* steps:out goes to its body (step) and to two sinks: a loop has one
     * edge out, so this flow is refused */
    struct cp_run r;
    cp_run_cli(&r, "pipeline", "check", p, NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "more than one edge out of its body", NULL);
    cp_run_release(&r);
    free(p);
    p = flow("loop2.toml", "digraph looped {\n"
                           " src[flowunit=file_source, dir=\"in\"]\n"
                           " tok[flowunit=tokenize]\n"
                           " steps[flowunit=loop, count=3]\n"
                           " step[flowunit=delay]\n"
                           " after[flowunit=delay]\n"
                           " a[flowunit=file_sink, dir=\"a\"]\n"
                           " b[flowunit=file_sink, dir=\"b\"]\n"
                           " src:out -> tok:in\n tok:out -> steps:in\n"
                           " steps:out -> step:in\n step:out -> steps:in\n"
                           " steps:out -> after:in\n after:out -> a:in\n after:out -> b:in\n}\n");
    char *db = cp_t_path("loop.db");
    json_t *j = run_json(p, "5", db);
    cr_expect_eq(json_integer_value(json_object_get(j, "done")), 5);
    cr_expect_eq(json_integer_value(json_object_get(node(j, "step"), "items")), 15,
                 "three laps of five requests");
    cr_expect_eq(json_integer_value(json_object_get(node(j, "a"), "items")), 5);
    cr_expect_eq(json_integer_value(json_object_get(node(j, "b"), "items")), 5);
    /* the trace: every call, the flow, a latency per request */
    sqlite3 *s = NULL;
    cr_assert_eq(sqlite3_open(db, &s), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(s,
                                    "SELECT (SELECT sum(batch) FROM node_calls), (SELECT count(*) "
                                    "FROM pipeline_nodes), (SELECT count(*) FROM pipeline_edges "
                                    "WHERE back = 1), (SELECT count(*) FROM samples), (SELECT "
                                    "kind FROM runs)",
                                    -1, &st, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    /* src 5, tok 5, steps 20 (5 in, 15 back), step 15, after 5, a 5, b 5 */
    cr_expect_eq(sqlite3_column_int(st, 0), 5 + 5 + 20 + 15 + 5 + 5 + 5);
    cr_expect_eq(sqlite3_column_int(st, 1), 7);
    cr_expect_eq(sqlite3_column_int(st, 2), 1, "step -> steps is the loop's way back");
    cr_expect_eq(sqlite3_column_int(st, 3), 5);
    cr_expect_str_eq((const char *)sqlite3_column_text(st, 4), "pipeline");
    sqlite3_finalize(st);
    sqlite3_close(s);
    json_decref(j);
    free(db);
    free(p);
}

Test(pipeline, images_through_a_batched_model)
{
    char *img = cp_t_path("img");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_mkdir_p(img, 0755, &d), CP_OK);
    for (int i = 0; i < 2; i++) {
        char *f = cp_t_fmt("%s/i%d.png", img, i);
        cr_assert(cp_t_write_file(f, (const char *)cp_t_png, cp_t_png_len));
        free(f);
    }
    char *dot = cp_t_fmt("digraph classify {\n"
                         " src[flowunit=file_source, dir=\"img\"]\n"
                         " dec[flowunit=image_decode]\n"
                         " rs[flowunit=resize, width=64, height=64]\n"
                         " norm[flowunit=normalize, mean=\"0.5\", std=\"0.25\"]\n"
                         " net[flowunit=inference, model=\"%s/examples/models/resnet_tiny.onnx\", "
                         "batch_size=4, threads=1]\n"
                         " enc[flowunit=image_encode]\n"
                         " logits[flowunit=file_sink, dir=\"logits\"]\n"
                         " pngs[flowunit=file_sink, dir=\"pngs\"]\n"
                         " src:out -> dec:in\n dec:out -> rs:in\n rs:out -> norm:in\n"
                         " norm:out -> net:in\n norm:out -> enc:in\n net:out -> logits:in\n"
                         " enc:out -> pngs:in\n}\n",
                         CP_SOURCE_DIR);
    char *p = flow("classify.toml", dot);
    json_t *j = run_json(p, "9", NULL);
    cr_expect_eq(json_integer_value(json_object_get(j, "done")), 9);
    json_int_t calls = json_integer_value(json_object_get(node(j, "net"), "calls"));
    cr_expect(calls >= 3 && calls <= 9, "batches of up to 4: %lld calls", (long long)calls);
    json_decref(j);
    /* the model's output as .npy ([1, 10] f32: 128 bytes of header and 40
     * of data), the image back as a 64x64 PNG */
    char *npy = cp_t_path("logits/000000-i0.npy"), *png = cp_t_path("pngs/000000-i0.png");
    struct cp_host_tensor t;
    cr_assert_eq(cp_tensor_read_file(npy, &t, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(t.rank, 2);
    cr_expect_eq(t.dims[1], 10);
    cp_host_tensor_release(&t);
    uint8_t *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(cp_file_read(png, &bytes, &len, &d), CP_OK);
    cr_expect(len > 24 && memcmp(bytes, cp_t_png, 8) == 0 && bytes[19] == 64 && bytes[23] == 64,
              "a 64x64 PNG");
    free(bytes);
    free(png);
    free(npy);
    free(p);
    free(dot);
    free(img);
}

/* Three prompts through a model whose batch is open, one request per call
 * and then batched (a window long enough for all three to meet): each
 * request's answer is its own rows, byte for byte the same. */
Test(pipeline, a_batched_model_answers_each_request_with_its_own_rows)
{
    char *model = cp_t_path("double.onnx");
    struct cp_t_onnx *m = cp_t_onnx_new(13);
    const int64_t dims[] = {-1, 77};
    cp_t_onnx_input(m, "ids", CP_T_I64, 2, dims);
    cp_t_onnx_output(m, "y", CP_T_F32, 2, dims);
    cp_t_onnx_attr_int(m, cp_t_onnx_node(m, "Cast", "cast", "ids", "c"), "to", CP_T_F32);
    cp_t_onnx_node(m, "Add", "twice", "c,c", "y");
    cr_assert(cp_t_onnx_write(m, model));
    cp_t_onnx_free(m);
    char *out[2];
    for (int k = 0; k < 2; k++) {
        char *dot = cp_t_fmt("digraph b {\n"
                             " src[flowunit=file_source, dir=\"in\"]\n"
                             " tok[flowunit=tokenize, max_len=77, vocab=1000]\n"
                             " net[flowunit=inference, model=\"%s\", batch_size=%d, "
                             "batch_window_ms=%d, threads=1]\n"
                             " sink[flowunit=file_sink, dir=\"out%d\"]\n"
                             " src:out -> tok:in\n tok:out -> net:in\n net:out -> sink:in\n}\n",
                             model, k ? 4 : 1, k ? 500 : 0, k);
        char *name = cp_t_fmt("b%d.toml", k);
        char *p = flow(name, dot);
        json_t *j = run_json(p, "3", NULL);
        json_int_t calls = json_integer_value(json_object_get(node(j, "net"), "calls"));
        cr_expect_eq(calls, k ? 1 : 3, "batch %d: %lld calls", k ? 4 : 1, (long long)calls);
        json_decref(j);
        out[k] = cp_t_fmt("out%d", k);
        free(p);
        free(name);
        free(dot);
    }
    for (int i = 0; i < 3; i++) {
        uint8_t *bytes[2];
        size_t len[2];
        for (int k = 0; k < 2; k++) {
            char *rel = cp_t_fmt("%s/%06d-p%d.npy", out[k], i, i);
            char *f = cp_t_path(rel);
            free(rel);
            bytes[k] = cp_t_read_file(f, &len[k]);
            cr_assert_not_null(bytes[k], "%s", f);
            free(f);
        }
        cr_expect(len[0] == len[1] && memcmp(bytes[0], bytes[1], len[0]) == 0,
                  "request %d: batched answer differs", i);
        free(bytes[0]);
        free(bytes[1]);
    }
    free(out[0]);
    free(out[1]);
    free(model);
}

/* A unit that fails on a request stops the run, naming the node and the
 * request's file; nothing hangs. */
Test(pipeline, a_failing_unit_names_the_node_and_the_request)
{
    char *p = flow("fail.toml", "digraph failing {\n"
                                " src[flowunit=file_source, dir=\"in\"]\n"
                                " dec[flowunit=image_decode]\n"
                                " sink[flowunit=file_sink, dir=\"x\"]\n"
                                " src:out -> dec:in\n dec:out -> sink:in\n}\n");
    struct cp_run r;
    cp_run_cli(&r, "pipeline", "run", p, "--requests", "5", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "node dec, request", "(p0.txt)", "not a PNG image", NULL);
    cp_run_release(&r);
    free(p);
}

/* ---- node-bottleneck on planted cases ----------------------------------------------------- */

/* Run a flow with a trace, then node-bottleneck --json on it. */
static json_t *bottleneck(const char *name, const char *dot, const char *requests)
{
    char *p = flow(name, dot);
    char *db = cp_t_fmt("%s.db", p);
    json_t *j = run_json(p, requests, db);
    json_decref(j);
    struct cp_run r;
    cp_run_cli(&r, "node-bottleneck", db, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *b = ct_json(r.out);
    cp_run_release(&r);
    free(db);
    free(p);
    return b;
}

static const char *limiting(json_t *b)
{
    const char *s = json_string_value(json_object_get(b, "limiting_node"));
    return s ? s : "(none)";
}

static bool has_problem(json_t *b, const char *kind, const char *node_name)
{
    json_t *ps = json_object_get(b, "problems");
    for (size_t i = 0; i < json_array_size(ps); i++) {
        json_t *p = json_array_get(ps, i);
        const char *k = json_string_value(json_object_get(p, "kind"));
        const char *n = json_string_value(json_object_get(p, "node"));
        if (strcmp(k, kind) == 0 && (!node_name || (n && strcmp(n, node_name) == 0)))
            return true;
    }
    return false;
}

Test(pipeline, node_bottleneck_names_planted_sleep_spin_and_blocked_nodes)
{
    /* a node that sleeps: the limit, I/O-bound, named with the fix */
    json_t *b = bottleneck("sleepy.toml",
                           "digraph sleepy {\n src[flowunit=file_source, dir=\"in\"]\n"
                           " a[flowunit=delay, spin_ms=1]\n io[flowunit=delay, sleep_ms=15]\n"
                           " src:out -> a:in\n a:out -> io:in\n}\n",
                           "16");
    cr_expect_str_eq(limiting(b), "io");
    cr_expect(has_problem(b, "io_bound", "io"));
    cr_expect(!has_problem(b, "io_bound", "a"), "a spins: it is not waiting on I/O");
    /* the same as a self-contained HTML page and as Markdown */
    char *db = cp_t_path("sleepy.toml.db"), *html = cp_t_path("sleepy.html"),
         *md = cp_t_path("sleepy.md");
    struct cp_run r;
    cp_run_cli(&r, "node-bottleneck", db, "-o", html, NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "node-bottleneck", db, "-o", md, NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    char *page = ct_read_text(html), *text = ct_read_text(md);
    ct_assert_mentions(page, "<!DOCTYPE html>", ">Limiting node</h2>\n<p>io (confidence",
                       "io_bound", "<svg", "Where each node", ">Topology</h2>", "</html>", NULL);
    cr_expect(strstr(page, "<script") == NULL && strstr(page, "src=\"http") == NULL &&
                  strstr(page, "<link") == NULL && strstr(page, "url(http") == NULL,
              "nothing fetched");
    ct_assert_mentions(text, "# node-bottleneck:", "## limiting node: io", NULL);
    free(text);
    free(page);
    /* and as a PDF whose text says the same */
    char *pdf = cp_t_path("sleepy.pdf");
    cp_run_cli(&r, "node-bottleneck", db, "-o", pdf, NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    char *cmd = cp_t_fmt("pdftotext '%s' -", pdf);
    FILE *pp = popen(cmd, "r");
    cr_assert_not_null(pp);
    static char got[65536];
    size_t gn = fread(got, 1, sizeof got - 1, pp);
    got[gn] = '\0';
    cr_expect_eq(pclose(pp), 0);
    ct_assert_mentions(got, "Limiting node", "io (confidence", "io_bound", NULL);
    /* the flow as it ran, drawn at the end: its nodes and edges' queues */
    const char *topo = strstr(got, "Topology");
    cr_assert_not_null(topo, "%s", got);
    ct_assert_mentions(topo, "pipeline run 1: 3 nodes, 2 edges", "BUSIEST #1", "depth ", "wait ",
                       NULL);
    free(cmd);
    free(pdf);
    free(md);
    free(html);
    free(db);
    cr_expect_eq(json_array_size(json_object_get(json_object_get(b, "request_paths"), "p50")), 3,
                 "src, a, io");
    json_decref(b);
    /* a node that computes: the limit, and not I/O-bound */
    b = bottleneck("spinny.toml",
                   "digraph spinny {\n src[flowunit=file_source, dir=\"in\"]\n"
                   " io[flowunit=delay, sleep_ms=1]\n cpu[flowunit=delay, spin_ms=12]\n"
                   " src:out -> io:in\n io:out -> cpu:in\n}\n",
                   "16");
    cr_expect_str_eq(limiting(b), "cpu");
    char *probs = json_dumps(json_object_get(b, "problems"), 0);
    cr_expect(!has_problem(b, "io_bound", NULL), "%s", probs);
    free(probs);
    json_decref(b);
    /* a fast node before a slow one behind a queue of one: the fast one is
     * blocked, and the slow one named as the constraint */
    b = bottleneck("pressed.toml",
                   "digraph pressed {\n src[flowunit=file_source, dir=\"in\"]\n"
                   " fast[flowunit=delay, spin_ms=1]\n"
                   " slow[flowunit=delay, spin_ms=8, queue_size=1]\n"
                   " src:out -> fast:in\n fast:out -> slow:in\n}\n",
                   "20");
    cr_expect_str_eq(limiting(b), "slow");
    cr_expect(has_problem(b, "back_pressure", "fast"));
    json_decref(b);
    /* negative control: nothing busy, nothing named. None of these flows
     * ends in a file sink: its atomic writes are real I/O, which on a loaded
     * disk took longer than the planted 8 ms and became the limit (CI) */
    b = bottleneck("idle.toml",
                   "digraph idle {\n src[flowunit=file_source, dir=\"in\"]\n"
                   " tok[flowunit=tokenize]\n a[flowunit=delay]\n"
                   " src:out -> tok:in\n tok:out -> a:in\n}\n",
                   "20");
    cr_expect_str_eq(limiting(b), "(none)");
    cr_expect(!has_problem(b, "io_bound", NULL));
    cr_expect(!has_problem(b, "back_pressure", NULL));
    json_decref(b);
}

/* More spinning workers than cores: their threads wait for a CPU. */
Test(pipeline, node_bottleneck_sees_cpu_oversubscription)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char *dot = cp_t_fmt("digraph crowded {\n src[flowunit=file_source, dir=\"in\"]\n"
                         " spin[flowunit=delay, spin_ms=20, workers=%ld]\n"
                         " sink[flowunit=file_sink, dir=\"o5\"]\n"
                         " src:out -> spin:in\n spin:out -> sink:in\n}\n",
                         3 * (cores > 0 ? cores : 2));
    char *n = cp_t_fmt("%ld", 6 * (cores > 0 ? cores : 2));
    json_t *b = bottleneck("crowded.toml", dot, n);
    cr_expect(has_problem(b, "cpu_oversubscribed", NULL), "%s",
              json_dumps(json_object_get(b, "problems"), 0));
    json_decref(b);
    free(n);
    free(dot);
}

Test(pipeline, node_bottleneck_refuses_a_run_that_is_not_a_pipeline)
{
    char *db = cp_t_path("plain.db");
    struct cp_run r;
    cp_run_cli(&r, "bench", CP_SOURCE_DIR "/examples/models/launch_bound_tiny.onnx", "-n", "3",
               "--trace", db, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "node-bottleneck", db, NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "is not a pipeline run", NULL);
    cp_run_release(&r);
    free(db);
}

/* ---- what if ------------------------------------------------------------------------------- */

Test(pipeline, what_if_replays_a_change_checks_it_and_writes_the_fix)
{
    char *p = flow("whatif.toml", "digraph whatif {\n src[flowunit=file_source, dir=\"in\"]\n"
                                  " io[flowunit=delay, sleep_ms=10]\n"
                                  " src:out -> io:in\n}\n");
    char *db = cp_t_path("whatif.db");
    json_t *j = run_json(p, "20", db);
    json_decref(j);
    /* two workers on a node that sleeps: the replay lets them overlap */
    struct cp_run r;
    cp_run_cli(&r, "node-bottleneck", db, "--what-if", "io.workers=2", "--check", "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    j = ct_json(r.out);
    cp_run_release(&r);
    double measured =
        json_number_value(json_object_get(json_object_get(j, "measured"), "throughput"));
    double predicted =
        json_number_value(json_object_get(json_object_get(j, "predicted"), "throughput"));
    cr_expect_gt(predicted, 1.5 * measured, "predicted %.1f against %.1f", predicted, measured);
    cr_expect(json_is_number(json_object_get(j, "throughput_error_pct")), "--check ran it");
    cr_expect(json_is_number(json_object_get(json_object_get(j, "checked"), "throughput")));
    json_decref(j);
    /* the fix as a flow file, which checks */
    char *fixed = cp_t_path("whatif.fixed.toml");
    cp_run_cli(&r, "node-bottleneck", db, "--what-if", "io.workers=3", "--fix", fixed, NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    char *text = ct_read_text(fixed);
    cr_expect(strstr(text, "io[flowunit=delay, sleep_ms=10, workers=3]") != NULL, "%s", text);
    free(text);
    cp_run_cli(&r, "pipeline", "check", fixed, NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    /* the problems' fixes: io is I/O-bound */
    char *fixed2 = cp_t_path("whatif.fixed2.toml");
    cp_run_cli(&r, "node-bottleneck", db, "--fix", fixed2, NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    text = ct_read_text(fixed2);
    cr_expect(strstr(text, "workers=") != NULL, "%s", text);
    free(text);
    /* bad changes */
    cp_run_cli(&r, "node-bottleneck", db, "--what-if", "nope.workers=2", NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "no node 'nope'", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "node-bottleneck", db, "--what-if", "io.speed=2", "--fix", fixed, NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "a speed-up is a prediction only", NULL);
    cp_run_release(&r);
    /* a factor with a decimal point is a value, not a NODE.KEY separator */
    cp_run_cli(&r, "node-bottleneck", db, "--what-if", "io.speed=1.5", "--json", NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    free(fixed2);
    free(fixed);
    free(db);
    free(p);
}

Test(pipeline, what_if_replays_a_batching_window_as_the_wait_it_adds)
{
    /* requests 100 ms apart reach a node that batches 4 and works 1 ms:
     * its batches never fill, so a 20 ms window is 20 ms more of every
     * request's latency, and no more throughput */
    char *p = flow("window.toml", "digraph window {\n src[flowunit=file_source, dir=\"in\"]\n"
                                  " up[flowunit=delay, sleep_ms=2]\n"
                                  " b[flowunit=delay, spin_ms=1, batch_size=4]\n"
                                  " src:out -> up:in\n up:out -> b:in\n}\n");
    char *db = cp_t_path("window.db");
    json_t *j = run_json(p, "30", db);
    json_decref(j);
    struct cp_flow_whatif w;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_pipeline_whatif_at(db, -1, "b.batch_window_ms=20", 10, 1, &w, &d), CP_OK, "%s",
                 d.msg);
    double added = w.simulated.p50_ms - w.replayed.p50_ms;
    cr_expect(added > 17 && added < 23, "the window added %.2f ms to the median (%.2f -> %.2f)",
              added, w.replayed.p50_ms, w.simulated.p50_ms);
    cr_expect_lt(fabs(w.simulated.throughput / w.replayed.throughput - 1), 0.05,
                 "throughput %.2f against %.2f", w.simulated.throughput, w.replayed.throughput);
    /* no window is no change; a whole number of milliseconds only */
    cr_assert_eq(cp_pipeline_whatif_at(db, -1, "b.batch_window_ms=0", 10, 1, &w, &d), CP_OK, "%s",
                 d.msg);
    cr_expect_float_eq(w.simulated.p50_ms, w.replayed.p50_ms, 1e-9);
    cr_expect_eq(cp_pipeline_whatif_at(db, -1, "b.batch_window_ms=2.5", 10, 1, &w, &d),
                 CP_ERR_USAGE);
    ct_assert_mentions(d.msg, "batch_window_ms (0..60000)", NULL);
    cp_diag_init(&d);
    cr_expect_eq(cp_pipeline_whatif_at(db, -1, "b.batch_window_ms=-1", 10, 1, &w, &d),
                 CP_ERR_USAGE);
    /* the fix writes the key */
    char *fixed = cp_t_path("window.fixed.toml");
    struct cp_run r;
    cp_run_cli(&r, "node-bottleneck", db, "--what-if", "b.batch_window_ms=20", "--fix", fixed,
               NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    char *text = ct_read_text(fixed);
    cr_expect(strstr(text, "batch_window_ms=20") != NULL, "%s", text);
    free(text);
    free(fixed);
    free(db);
    free(p);
}

/* ---- the poster example (examples/pipelines/poster) ------------------------------------------ */

/* The example's flow, run in the scratch folder (its models by absolute
 * paths, its denoiser converted the planted way as prepare.sh does): every
 * request becomes a 128x128 PNG, and node-bottleneck reads the run. */
Test(pipeline, the_poster_example_runs_and_is_analysed)
{
    char *dir = cp_t_path("poster"), *prompts = cp_t_path("poster/prompts");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_mkdir_p(prompts, 0755, &d), CP_OK);
    static const char *const names[] = {"01-fox.txt", "02-jazz.txt"};
    for (size_t i = 0; i < 2; i++) {
        char *src = cp_t_fmt("%s/examples/pipelines/poster/prompts/%s", CP_SOURCE_DIR, names[i]);
        char *dst = cp_t_fmt("%s/%s", prompts, names[i]);
        char *text = ct_read_text(src);
        ct_write_text(dst, text);
        free(text);
        free(dst);
        free(src);
    }
    char *om = cp_t_fmt("%s/denoiser", dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", "--model", CP_SOURCE_DIR "/examples/models/sd_unet_tiny.onnx",
               "--framework", "5", "--layout_policy", "nchw", "--output", om, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    /* the example's flow, its paths made this folder's */
    char *src = cp_t_fmt("%s/examples/pipelines/poster/poster.toml", CP_SOURCE_DIR);
    char *text = ct_read_text(src);
    struct cp_buf b;
    cp_buf_init(&b);
    for (const char *p = text; *p;) {
        if (strncmp(p, "../../models/", 13) == 0) {
            cp_buf_printf(&b, "%s/examples/models/", CP_SOURCE_DIR);
            p += 13;
        } else if (strncmp(p, "models/denoiser.om", 18) == 0) {
            cp_buf_printf(&b, "%s.om", om);
            p += 18;
        } else {
            cp_buf_printf(&b, "%c", *p++);
        }
    }
    char *flow_text = cp_buf_steal(&b);
    char *flow_path = cp_t_fmt("%s/poster.toml", dir);
    ct_write_text(flow_path, flow_text);
    char *db = cp_t_fmt("%s/poster.db", dir);
    cp_run_cli(&r, "pipeline", "run", flow_path, "--requests", "4", "--trace", db, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    for (int i = 0; i < 4; i++) {
        char *png = cp_t_fmt("%s/posters/%06d-%s.png", dir, i, i % 2 ? "02-jazz" : "01-fox");
        uint8_t *bytes = NULL;
        size_t len = 0;
        cr_assert_eq(cp_file_read(png, &bytes, &len, &d), CP_OK, "%s", d.msg);
        cr_expect(len > 24 && memcmp(bytes, cp_t_png, 8) == 0 && bytes[19] == 128 &&
                      bytes[23] == 128,
                  "%s: a 128x128 PNG", png);
        free(bytes);
        free(png);
    }
    cp_run_cli(&r, "node-bottleneck", db, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    cr_expect_eq(json_array_size(json_object_get(j, "nodes")), 9);
    cr_expect_float_eq(
        json_number_value(json_object_get(node(j, "denoiser"), "visits_per_request")), 4.0, 1e-9,
        "four steps a request");
    /* the denoiser's model is a run of its own, and the rules on it name
     * the planted layout; so does node-bottleneck when it is the limit */
    json_int_t model_run = json_integer_value(json_object_get(node(j, "denoiser"), "model_run"));
    cr_assert_gt(model_run, 0, "no model run for the denoiser");
    const char *limiting = json_string_value(json_object_get(j, "limiting_node"));
    if (limiting && strcmp(limiting, "denoiser") == 0) {
        json_t *f = json_object_get(json_object_get(j, "limiting_model"), "findings");
        bool layout = false;
        for (size_t i = 0; i < json_array_size(f); i++)
            layout =
                layout || strcmp(json_string_value(json_object_get(json_array_get(f, i), "rule")),
                                 "plain_layout_convs") == 0;
        cr_expect(layout, "%s", json_dumps(json_object_get(j, "limiting_model"), 0));
    }
    char run_text[32];
    snprintf(run_text, sizeof run_text, "%lld", (long long)model_run);
    cp_run_cli(&r, "analyze", db, "--run", run_text, NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(r.out, "denoiser.om", "rule plain_layout_convs", "--layout_policy=auto",
                       NULL);
    cp_run_release(&r);
    /* the negative control: converted with the default policy, its
     * convolutions run blocked and the rule stays quiet */
    char *auto_om = cp_t_fmt("%s/denoiser_auto", dir), *auto_db = cp_t_fmt("%s/auto.db", dir);
    cp_run_cli(&r, "convert", "--model", CP_SOURCE_DIR "/examples/models/sd_unet_tiny.onnx",
               "--framework", "5", "--output", auto_om, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    char *auto_path = cp_t_fmt("%s.om", auto_om);
    cp_run_cli(&r, "bench", auto_path, "-t", "1", "-n", "5", "--trace", auto_db, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "analyze", auto_db, NULL);
    cr_expect(strstr(r.out, "plain_layout_convs") == NULL, "%s", r.out);
    cp_run_release(&r);
    free(auto_path);
    free(auto_db);
    free(auto_om);
    json_decref(j);
    free(db);
    free(flow_path);
    free(flow_text);
    free(text);
    free(src);
    free(om);
    free(prompts);
    free(dir);
}

/* --duration: the sources send until the deadline, then the run drains;
 * every request sent is done. */
Test(pipeline, a_run_for_a_duration_drains_what_it_sent)
{
    char *p = flow("timed.toml", "digraph timed {\n src[flowunit=file_source, dir=\"in\"]\n"
                                 " io[flowunit=delay, sleep_ms=5, workers=2]\n"
                                 " a[flowunit=delay]\n src:out -> io:in\n io:out -> a:in\n}\n");
    struct cp_run r;
    cp_run_cli(&r, "pipeline", "run", p, "--duration", "300ms", "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    json_int_t sent = json_integer_value(json_object_get(j, "sent"));
    cr_expect_gt(sent, 0);
    cr_expect_eq(json_integer_value(json_object_get(j, "done")), sent, "nothing left in flight");
    json_decref(j);
    cp_run_cli(&r, "pipeline", "run", p, "--duration", "1s", "--requests", "3", NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "not both", NULL);
    cp_run_release(&r);
    free(p);
}
