/* view --flame and --diff: as a person would look at them. The SVG is
 * valid XML with the frames of every layer, the same bytes on every run;
 * the groupings name kernels by op type and by ONNX node; a diff marks the
 * frames that changed beyond their per-iteration noise and leaves grey the
 * ones that did not (synthetic runs with known times); bad input is refused
 * with exit 2; in headless Chromium, search finds frames and the script
 * logs no error. */
#include "cli/cli_test.h"
#include "support/browser.h"
#include "runner/probe.h"
#include "support/run.h"
#include "trace/query.h"
#include "trace/trace.h"
#include "view/view.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(flame, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 240);

static char *bench_trace(const char *model, const char *name)
{
    char *db = cp_t_path(name);
    char *om = ct_convert(model); /* converted: fused kernels */
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "-n", "12", "--trace", db, NULL);
    free(om);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    return db;
}

static bool xml_valid(const char *path)
{
    char *cmd = cp_t_fmt("xmllint --noout '%s' 2>&1", path);
    int rc = system(cmd);
    free(cmd);
    return rc == 0;
}

Test(flame, a_run_as_an_svg_with_every_layer_the_same_bytes_twice)
{
    char *db = bench_trace("resnet_tiny", "r.db");
    char *svg = cp_t_path("r.svg"), *svg2 = cp_t_path("r2.svg");
    struct cp_run r;
    /* wide, so that every kernel is drawn: a frame under a tenth of a
     * pixel is not, and a small TransData's mean can be under 1/12000 of
     * the iteration at the default width on a loaded machine */
    cp_run_cli(&r, "view", db, "--flame", "-o", svg, "--json", "--width", "20000", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cr_expect_gt(ct_num(j, "frames"), 5);
    int iters = (int)ct_num(j, "iterations");
    cr_expect_geq(iters, 12, "at least the 12 undisturbed iterations asked for");
    cr_expect_gt(ct_num(j, "total_ms"), 0);
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "view", db, "--flame", "-o", svg2, "--width", "20000", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cr_expect(xml_valid(svg), "xmllint refused %s", svg);
    cr_expect(ct_same_bytes(svg, svg2), "two renderings of one trace differ");
    char *text = ct_read_text(svg);
    /* the runtime phase, and every kernel under it, with tooltips */
    char *mean = cp_t_fmt("the mean of %d iterations", iters);
    ct_assert_mentions(text, "data-n=\"runtime\"", "data-n=\"execute\"", "<title>",
                       "ONNX nodes:", mean, "<script", NULL);
    free(mean);
    cr_expect(strstr(text, "src=\"http") == NULL && strstr(text, "href=\"http") == NULL,
              "nothing fetched");
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open_ro(db, &s, &d), CP_OK, "%s", d.msg);
    struct cp_trace_kernel_desc *k = NULL;
    size_t nk = 0;
    cr_assert_eq(cp_trace_query_kernels(s, -1, &k, &nk, &d), CP_OK, "%s", d.msg);
    cr_assert_gt(nk, 3);
    size_t fused = 0;
    for (size_t i = 0; i < nk; i++) {
        char *frame = cp_t_fmt("data-n=\"%s\"", k[i].node);
        cr_expect(strstr(text, frame) != NULL, "no frame for kernel %s", k[i].node);
        free(frame);
        fused += strchr(k[i].origins, ',') != NULL;
    }
    cr_expect_gt(fused, 0, "resnet_tiny converts with fused kernels");
    cp_trace_kernels_free(k, nk);
    cp_trace_store_close(s);
    free(text);
    /* by op type: a frame per op type holding its kernels */
    cp_run_cli(&r, "view", db, "--flame", "--group", "op", "-o", svg, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    text = ct_read_text(svg);
    ct_assert_mentions(text, "data-n=\"Conv", "by op type", NULL);
    free(text);
    /* by ONNX node: a fused kernel is named by the nodes it stands for */
    cp_run_cli(&r, "view", db, "--flame", "--group", "onnx", "-o", svg, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    text = ct_read_text(svg);
    ct_assert_mentions(text, " + ", "by ONNX node", NULL);
    cr_expect(xml_valid(svg));
    free(text);
    /* the median iteration, one iteration */
    cp_run_cli(&r, "view", db, "--flame", "--iteration", "median", "-o", svg, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    text = ct_read_text(svg);
    ct_assert_mentions(text, ", the median:", NULL);
    free(text);
    cp_run_cli(&r, "view", db, "--flame", "--iteration", "3", "-o", "-", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(r.out, "<svg", "iteration 3:", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "view", db, "--flame", "--iteration", "99999999", "-o", svg, NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "no iteration 99999999", "r.db", NULL);
    cp_run_release(&r);
    free(svg2);
    free(svg);
    free(db);
}

/* ---- synthetic runs: known times, known changes ----------------------------------------- */

struct kspec {
    const char *name;
    double mean_ns, sd_ns;
};

static uint64_t rng;

static double unit(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(void)
{
    return sqrt(-2 * log(unit())) * cos(6.283185307179586 * unit());
}

/* A run of `iters` iterations of an "execute" phase over the kernels of
 * `ks`, each kernel's time drawn from its normal distribution. */
static void synth_stalls(const char *db, const char *hash, const struct kspec *ks, size_t nk,
                         size_t iters, uint64_t seed, size_t stall_every);

static void synth(const char *db, const char *hash, const struct kspec *ks, size_t nk, size_t iters,
                  uint64_t seed)
{
    synth_stalls(db, hash, ks, nk, iters, seed, 0);
}

/* The same, every stall_every-th iteration (0: none) 50 times slower with
 * the interference probe seeing a busy machine around it, as a run of
 * `cannprof bench` on a loaded machine records it. */
static void synth_stalls(const char *db, const char *hash, const struct kspec *ks, size_t nk,
                         size_t iters, uint64_t seed, size_t stall_every)
{
    rng = seed;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s = NULL;
    cr_assert_eq(cp_trace_store_open(db, &s, &d), CP_OK, "%s", d.msg);
    struct cp_trace_run_info info = {
        .kind = "bench", .model_path = "m.onnx", .model_hash = hash, .iterations = (int)iters};
    int64_t run;
    cr_assert_eq(cp_trace_store_begin_run(s, &info, &run, &d), CP_OK, "%s", d.msg);
    struct cp_trace_kernel kt[16];
    for (size_t i = 0; i < nk; i++)
        kt[i] = (struct cp_trace_kernel){.node = ks[i].name,
                                         .op_type = "MatMul",
                                         .impl = "ref",
                                         .origins = "[]",
                                         .inputs = "[]",
                                         .outputs = "[]"};
    cr_assert_eq(cp_trace_store_add_kernels(s, run, kt, nk, &d), CP_OK, "%s", d.msg);
    struct cp_trace_recorder *r = cp_trace_recorder_create(iters * (nk + 1));
    int32_t exec = cp_trace_intern(r, "execute");
    int32_t names[16];
    for (size_t i = 0; i < nk; i++)
        names[i] = cp_trace_intern(r, ks[i].name);
    uint64_t *lat = calloc(iters, sizeof *lat), *probe = calloc(iters, sizeof *probe);
    uint64_t t = 1000000;
    for (size_t it = 0; it < iters; it++) {
        uint64_t t0 = t;
        bool stall = stall_every && it % stall_every == stall_every - 1;
        probe[it] = stall ? 500000 : 10000 + (uint64_t)(100 * unit());
        for (size_t i = 0; i < nk; i++) {
            double dur = fmax(100, ks[i].mean_ns + ks[i].sd_ns * gauss()) * (stall ? 50 : 1);
            cp_trace_record(r, CP_LAYER_DEVICE, names[i], (int32_t)i, (int32_t)it, t,
                            t + (uint64_t)dur, 0);
            t += (uint64_t)dur + 100;
        }
        cp_trace_record(r, CP_LAYER_RUNTIME, exec, -1, (int32_t)it, t0 - 50, t, 0);
        lat[it] = t - t0 + 50;
        t += 1000;
    }
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, lat, iters, &d), CP_OK, "%s", d.msg);
    if (stall_every)
        cr_assert_eq(cp_probe_store(s, run, probe, iters, &d), CP_OK, "%s", d.msg);
    free(probe);
    free(lat);
    cp_trace_recorder_free(r);
    cp_trace_store_close(s);
}

/* The <g> of frame `name` in an SVG (from its data-n on), or NULL. */
static const char *frame_of(const char *svg, const char *name)
{
    char key[256];
    snprintf(key, sizeof key, "data-n=\"%s\"", name);
    return strstr(svg, key);
}

/* Whether the frame carries a marked change. */
static bool marked(const char *svg, const char *name)
{
    const char *f = frame_of(svg, name);
    cr_assert_not_null(f, "no frame %s", name);
    const char *end = strchr(f, '>');
    const char *ch = strstr(f, "data-change=");
    return ch && ch < end;
}

Test(flame, a_diff_marks_what_moved_beyond_its_noise_and_nothing_else)
{
    const struct kspec a[] = {{"steady", 200000, 20000},
                              {"slowed", 100000, 5000},
                              {"nudged", 500000, 300},
                              {"speck", 1000, 10},
                              {"dropped", 50000, 2000}};
    const struct kspec b[] = {{"steady", 200000, 20000},
                              {"slowed", 130000, 5000},
                              {"nudged", 505000, 300},
                              {"speck", 1300, 10},
                              {"added", 80000, 2000}};
    char *da = cp_t_path("a.db"), *db = cp_t_path("b.db"), *out = cp_t_path("d.svg");
    synth(da, "h1", a, 5, 40, 1);
    synth(db, "h1", b, 5, 40, 2);
    struct cp_run r;
    cp_run_cli(&r, "view", "--diff", da, db, "-o", out, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cr_expect_eq(ct_num(j, "gone"), 1, "dropped");
    cp_run_release(&r);
    char *svg = ct_read_text(out);
    cr_expect(xml_valid(out));
    /* 30% slower over 40 iterations: marked, with its change in the label */
    cr_expect(marked(svg, "slowed"));
    const char *sl = strstr(frame_of(svg, "slowed"), "data-change=\"");
    double pct = atof(sl + strlen("data-change=\""));
    cr_expect(pct > 20 && pct < 40, "slowed by 30%%, drawn as %+.1f%%", pct);
    ct_assert_mentions(frame_of(svg, "slowed"), "data-l=\"\xe2\x96\xb2 +", NULL);
    /* new in B: marked as new */
    cr_expect(marked(svg, "added"));
    ct_assert_mentions(frame_of(svg, "added"), "data-change=\"new\"", NULL);
    /* the same distribution: grey */
    cr_expect(!marked(svg, "steady"), "a frame that did not change is marked");
    /* +1%, significant on its tiny spread, but under the 2% floor: grey */
    cr_expect(!marked(svg, "nudged"), "a 1%% change is marked");
    /* +30% of a microsecond: real, but a 0.04% move of the iteration */
    cr_expect(!marked(svg, "speck"), "a change too small to matter to the iteration is marked");
    ct_assert_mentions(svg, "gone from B: dropped", "within noise", NULL);
    cr_expect(ct_num(j, "slower") >= 2, "slowed, added (and their parents)");
    json_decref(j);
    free(svg);
    /* the floor lowered to 0.5%: now the nudge is marked too */
    cp_run_cli(&r, "view", "--diff", da, db, "-o", out, "--min-change", "0.5%", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    svg = ct_read_text(out);
    cr_expect(marked(svg, "nudged"));
    free(svg);
    free(out);
    free(db);
    free(da);
}

Test(flame, noise_is_never_called_a_gain)
{
    /* two runs of one distribution, many frames: nothing marked */
    struct kspec k[12];
    char names[12][16];
    for (int i = 0; i < 12; i++) {
        snprintf(names[i], sizeof names[i], "k%02d", i);
        k[i] = (struct kspec){names[i], 50000.0 * (i + 1), 5000.0 * (i + 1)};
    }
    char *da = cp_t_path("n1.db"), *db = cp_t_path("n2.db");
    synth(da, "h", k, 12, 50, 11);
    synth(db, "h", k, 12, 50, 12);
    struct cp_run r;
    cp_run_cli(&r, "view", "--diff", da, db, "-o", "-", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_expect(strstr(r.out, "data-change=") == NULL, "a frame of unchanged runs is marked");
    ct_assert_mentions(r.out, "0 slower, 0 faster", NULL);
    cp_run_release(&r);
    /* too few iterations to test: all grey, and said so */
    synth(da, "h", k, 12, 2, 13);
    cp_run_cli(&r, "view", "--diff", da, db, "-o", "-", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(r.out, "Fewer than 3 iterations", NULL);
    cr_expect(strstr(r.out, "data-change=\"+") == NULL);
    cp_run_release(&r);
    free(db);
    free(da);
}

/* A loaded machine's stalls are left out as validate leaves them out: the
 * mean is of the iterations the interference probe found undisturbed. */
Test(flame, stalled_iterations_are_left_out_as_validate_leaves_them_out)
{
    const struct kspec k[] = {{"work", 2000000, 20000}}; /* 2 ms: a window of 1 */
    char *db = cp_t_path("stalls.db"), *q = cp_t_path("q.svg"), *a = cp_t_path("a.svg");
    synth_stalls(db, "h", k, 1, 60, 5, 20); /* iterations 19, 39, 59 stall */
    struct cp_run r;
    cp_run_cli(&r, "view", db, "--flame", "-o", q, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    double quiet_ms = ct_num(j, "total_ms"), quiet_n = ct_num(j, "iterations");
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "view", db, "--flame", "-o", a, "--all-iterations", "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    j = ct_json(r.out);
    double all_ms = ct_num(j, "total_ms"), all_n = ct_num(j, "iterations");
    json_decref(j);
    cp_run_release(&r);
    cr_expect_eq(all_n, 60);
    cr_expect(quiet_n >= 5 && quiet_n <= 57, "%.0f iterations counted", quiet_n);
    cr_expect(quiet_ms < 2.1 && quiet_ms > 1.9, "the undisturbed mean is %.3f ms", quiet_ms);
    cr_expect_gt(all_ms, 2 * quiet_ms, "three 50x stalls in 60 iterations move the mean");
    char *svg = ct_read_text(q);
    ct_assert_mentions(svg, "(the undisturbed of 60)", NULL);
    free(svg);
    free(a);
    free(q);
    free(db);
}

Test(flame, bad_input_is_refused_with_exit_2)
{
    const struct kspec k[] = {{"x", 1000, 10}};
    char *da = cp_t_path("m1.db"), *db = cp_t_path("m2.db");
    synth(da, "hash-one", k, 1, 5, 1);
    synth(db, "hash-two", k, 1, 5, 2);
    struct cp_run r;
    /* two different models */
    cp_run_cli(&r, "view", "--diff", da, db, "-o", "-", NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "different models", "--force", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "view", "--diff", da, db, "--force", "-o", "-", NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    /* an empty store */
    char *empty = cp_t_path("empty.db");
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open(empty, &s, &d), CP_OK);
    cp_trace_store_close(s);
    cp_run_cli(&r, "view", empty, "--flame", "-o", "-", NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "empty.db", NULL);
    cp_run_release(&r);
    /* a run without iterations */
    cr_assert_eq(cp_trace_store_open(empty, &s, &d), CP_OK);
    struct cp_trace_run_info info = {.kind = "bench", .model_path = "m.onnx"};
    int64_t run;
    cr_assert_eq(cp_trace_store_begin_run(s, &info, &run, &d), CP_OK);
    cp_trace_store_close(s);
    cp_run_cli(&r, "view", empty, "--flame", "-o", "-", NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "empty.db", "no events in measured iterations", NULL);
    cp_run_release(&r);
    /* not a trace at all, a grouping that is not one, a flow grouping of a model run */
    char *txt = cp_t_path("notes.txt");
    ct_write_text(txt, "not a trace\n");
    cp_run_cli(&r, "view", txt, "--flame", "-o", "-", NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "notes.txt", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "view", da, "--flame", "--group", "kernel", NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "--group kernel", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "view", da, "--flame", "--group", "pipeline", "-o", "-", NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "not a pipeline run", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "view", da, "--flame", "--diff", NULL);
    cr_expect_eq(r.exit_code, 2);
    cp_run_release(&r);
    free(txt);
    free(empty);
    free(db);
    free(da);
}

Test(flame, a_pipeline_run_as_its_nodes)
{
    char *in = cp_t_path("in");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_mkdir_p(in, 0755, &d), CP_OK);
    for (int i = 0; i < 3; i++) {
        char *p = cp_t_fmt("%s/p%d.txt", in, i);
        ct_write_text(p, "a poster of a cat");
        free(p);
    }
    char *flow = cp_t_path("f.toml");
    ct_write_text(flow, "[flow]\ndesc = \"t\"\n[graph]\nformat = \"graphviz\"\n"
                        "graphconf = '''digraph f {\n src[flowunit=file_source, dir=\"in\"]\n"
                        " busy[flowunit=delay, spin_ms=3]\n nap[flowunit=delay, sleep_ms=2]\n"
                        " src:out -> busy:in\n busy:out -> nap:in\n}\n'''\n");
    char *db = cp_t_path("f.db");
    struct cp_run r;
    cp_run_cli(&r, "pipeline", "run", flow, "--requests", "8", "--trace", db, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "view", db, "--flame", "-o", "-", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(r.out, "data-n=\"busy\"", "data-n=\"nap\"", "data-n=\"on a CPU\"",
                       "data-n=\"off the CPU\"", "the mean of 8 requests", NULL);
    cp_run_release(&r);
    free(db);
    free(flow);
    free(in);
}

Test(flame, searched_in_a_browser)
{
    cr_assert(ct_browser_available(), "chromium is needed (scripts/test.sh installs it)");
    char *db = bench_trace("launch_bound_tiny", "b.db");
    char *svg = cp_t_path("b.svg");
    struct cp_run r;
    cp_run_cli(&r, "view", db, "--flame", "-o", svg, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    char *console = NULL;
    char *dom = ct_browser_dom(svg, "s=Mul", &console);
    cr_assert_not_null(dom, "chromium did not open %s", svg);
    cr_expect(console == NULL || strstr(console, "Uncaught") == NULL, "console: %s",
              console ? console : "");
    /* the search ran: the matched line counts the Mul frames */
    const char *m = strstr(dom, "data-frames=\"");
    cr_assert_not_null(m, "no search result in the DOM");
    cr_expect_gt(atoi(m + strlen("data-frames=\"")), 0);
    ct_assert_mentions(dom, "Matched: ", "(Mul)", NULL);
    free(dom);
    free(console);
    /* still pictures for a page or a slide, drawn by the chart module */
    char *pdf = cp_t_path("b.pdf"), *still = cp_t_path("b.still.png");
    cp_run_cli(&r, "view", db, "--flame", "-o", pdf, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "view", "--diff", db, db, "-o", still, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    char *cmd = cp_t_fmt("pdftotext '%s' -", pdf);
    char *text = cp_run_shell(cmd);
    cr_assert_not_null(text, "%s", cmd);
    ct_assert_mentions(text, "Flame graph", "execute", "runtime", NULL);
    free(text);
    free(cmd);
    struct ct_png_ink sink;
    cr_assert(ct_png_ink(still, &sink));
    cr_expect_gt(sink.ink, 0.05, "the still diff is blank");
    free(still);
    free(pdf);
    /* and as it looks */
    char *png = cp_t_path("b.png");
    cr_assert(ct_browser_screenshot(svg, "s=Mul", png, 1200, 400));
    struct ct_png_ink ink;
    cr_assert(ct_png_ink(png, &ink));
    cr_expect_gt(ink.ink, 0.02, "the picture is blank");
    cr_expect_gt(ink.colors, 4, "frames in their colours, the matched in another");
    free(png);
    free(svg);
    free(db);
}
