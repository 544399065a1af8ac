/* view/timeline.c: the HTML timeline of a few iterations of a traced run.
 * The page is self-contained (nothing fetched from the network) and the
 * same bytes twice; opened in headless Chromium its script runs without a
 * console message, draws the tracks and one element per kernel event,
 * marks the iterations, shows something on a screenshot, highlights what
 * ?search= asks for and draws the flows of what ?select= picks. Names that
 * would close the page's <script> stay text; imported layers and threads
 * get tracks of their own. Inputs that cannot be drawn (an empty store, a
 * run without iterations or events, an iteration past the last, too many
 * events) are CP_ERR_INVALID naming the trace. No assertion on time. */
#include "cli/cli_test.h"
#include "support/browser.h"
#include "support/db.h"
#include "support/run.h"
#include "trace/query.h"
#include "view/view.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

TestSuite(timeline, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 600);

/* `cannprof bench resnet_tiny -n 5 --trace T.db`: the path of T.db. */
static char *bench_trace(void)
{
    char *trace = cp_t_path("T.db");
    char *model = cp_t_example("resnet_tiny");
    struct cp_run r;
    cp_run_cli(&r, "bench", model, "-n", "5", "--trace", trace, NULL);
    cr_assert_eq(r.exit_code, 0, "bench: exit %d: %s", r.exit_code, r.err);
    cp_run_release(&r);
    free(model);
    return trace;
}

static struct cp_trace_store *open_ro(const char *path)
{
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open_ro(path, &s, &d), CP_OK, "%s", d.msg);
    return s;
}

/* The timeline of `path`, asserted to succeed; the page (caller frees). */
static char *timeline(const char *path, int64_t first, int64_t count, struct cp_timeline_info *info)
{
    struct cp_trace_store *s = open_ro(path);
    struct cp_timeline_opts o = {.run_id = -1, .first = first, .count = count};
    struct cp_buf b;
    cp_buf_init(&b);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_view_timeline(s, &o, &b, info, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    cr_assert(strncmp(b.data, "<!DOCTYPE html>", 15) == 0, "%.80s", b.data);
    return cp_buf_steal(&b);
}

/* cp_view_timeline of run `run` must be CP_ERR_INVALID, write nothing and
 * name `path` and every needle. */
static void refused(const char *path, int64_t run, int64_t first, int64_t count, ...)
{
    struct cp_trace_store *s = open_ro(path);
    struct cp_timeline_opts o = {.run_id = run, .first = first, .count = count};
    struct cp_buf b;
    cp_buf_init(&b);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_timeline_info info;
    cr_assert_eq(cp_view_timeline(s, &o, &b, &info, &d), CP_ERR_INVALID, "%s", d.msg);
    cr_expect_eq(b.len, 0, "nothing written on failure");
    ct_assert_mentions(d.msg, path, NULL);
    va_list ap;
    va_start(ap, count);
    const char *needle;
    while ((needle = va_arg(ap, const char *)) != NULL)
        cr_assert_not_null(strstr(d.msg, needle), "expected '%s' in: %s", needle, d.msg);
    va_end(ap);
    cp_buf_release(&b);
    cp_trace_store_close(s);
}

static int cmp_sample(const void *pa, const void *pb)
{
    const struct cp_trace_sample *a = pa, *b = pb;
    if (a->latency_ns != b->latency_ns)
        return a->latency_ns < b->latency_ns ? -1 : 1;
    return (a->iteration > b->iteration) - (a->iteration < b->iteration);
}

/* The iterations bench measured: as many as it took to get 5 undisturbed
 * ones, so 5 on a quiet machine and more on a loaded one. OUT: *last, the
 * last iteration; *median, the iteration of median latency (the lower
 * middle of an even count, ties by iteration), as the timeline picks it. */
static void iterations_of(const char *path, int64_t *last, int64_t *median)
{
    struct cp_trace_store *s = open_ro(path);
    struct cp_trace_sample *v = NULL;
    size_t n = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_query_samples(s, -1, &v, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_geq(n, 5);
    *last = v[n - 1].iteration;
    cr_assert_eq(*last, (int64_t)n - 1);
    qsort(v, n, sizeof *v, cmp_sample);
    *median = v[(n - 1) / 2].iteration;
    free(v);
    cp_trace_store_close(s);
}

/* The page written to "<scratch>/NAME"; the path (caller frees). */
static char *write_page(const char *name, const char *page)
{
    char *file = cp_t_path(name);
    ct_write_text(file, page);
    return file;
}

/* `dom` without the text of its <script> elements (whose source holds the
 * very markup the tests count), in place. */
static void strip_scripts(char *dom)
{
    char *w = dom;
    for (const char *r = dom; *r;) {
        const char *open = strstr(r, "<script");
        const char *body = open ? strchr(open, '>') : NULL;
        const char *close = body ? strstr(body, "</script>") : NULL;
        size_t keep = close ? (size_t)(body + 1 - r) : strlen(r);
        memmove(w, r, keep);
        w += keep;
        r += keep;
        if (close)
            r = close;
    }
    *w = '\0';
}

/* The DOM of `file?query` after the page's scripts ran, asserted to have
 * printed nothing to the console (no error, no uncaught exception), the
 * scripts' text left out. */
static char *dom_of(const char *file, const char *query)
{
    cr_assert(ct_browser_available(),
              "chromium is not installed: scripts/test.sh installs it (cp_install_deps chromium)");
    char *console = NULL;
    char *dom = ct_browser_dom(file, query, &console);
    cr_assert_not_null(dom, "the browser did not open %s?%s (see stderr)", file,
                       query ? query : "");
    cr_assert_str_empty(console, "console of %s?%s:\n%s", file, query ? query : "", console);
    free(console);
    cr_assert_not_null(strstr(dom, "data-ready=\"1\""), "the script did not finish: %.2000s", dom);
    strip_scripts(dom);
    return dom;
}

/* Whether `s` holds `needle`, ignoring ASCII case. */
static bool has_ci(const char *s, const char *needle)
{
    size_t n = strlen(needle);
    for (; *s; s++)
        if (strncasecmp(s, needle, n) == 0)
            return true;
    return false;
}

Test(timeline, the_median_iteration_is_one_self_contained_page_the_same_bytes_twice)
{
    char *trace = bench_trace();
    struct cp_timeline_info info;
    char *page = timeline(trace, -1, 0, &info);
    cr_assert_eq(info.run_id, 1);
    int64_t last = 0, median = 0;
    iterations_of(trace, &last, &median);
    cr_assert_eq(info.first, median);
    cr_assert_eq(info.count, 1);
    /* resnet_tiny: one "execute" phase launching 52 kernels per iteration */
    cr_assert_eq(info.events, 53, "%zu", info.events);
    cr_assert_eq(info.tracks, 2, "runtime and device: %zu", info.tracks);
    cr_assert_eq(info.flows, 52, "%zu", info.flows);

    /* nothing from the network: no external script, style, font or image */
    cr_assert_null(strstr(page, "src=\"http"));
    cr_assert_null(strstr(page, "<link"));
    cr_assert_null(strstr(page, "url(http"));
    cr_assert_null(strstr(page, "@import"));
    cr_assert_eq(ct_count(page, "http"), ct_count(page, "http://www.w3.org/2000/svg"),
                 "only the SVG namespace may name a URL");
    cr_assert_eq(ct_count(page, "<script"), 2, "the data and the script, inline");
    cr_assert_eq(ct_count(page, "</script>"), 2);
    ct_assert_mentions(page, trace, "run 1", "/conv1/Conv", "onednn:conv", NULL);

    char *again = timeline(trace, -1, 0, NULL);
    cr_assert_str_eq(again, page, "the same trace must give the same bytes");
    free(again);
    free(page);
    free(trace);
}

/* The "#rrggbb" value of attribute `attr` (e.g. `fill="`) of the element
 * holding `needle` (freed here): the first after it (after) or the last
 * before it. */
static void attr_near(const char *hay, char *needle, const char *attr, bool after, char out[8])
{
    const char *at = strstr(hay, needle);
    cr_assert_not_null(at, "no %s", needle);
    const char *v = NULL;
    if (after)
        v = strstr(at, attr);
    else
        for (const char *p = strstr(hay, attr); p && p < at; p = strstr(p + 1, attr))
            v = p;
    cr_assert_not_null(v, "no %s near %s", attr, needle);
    v += strlen(attr);
    cr_assert_eq(v[0], '#', "%.20s", v);
    memcpy(out, v, 7);
    out[7] = '\0';
    free(needle);
}

Test(timeline, the_page_runs_in_a_browser_and_draws_tracks_kernels_and_iterations)
{
    char *trace = bench_trace();
    struct cp_timeline_info info;
    char *page = timeline(trace, -1, 0, &info);
    char *file = write_page("timeline.html", page);
    char *dom = dom_of(file, NULL);

    ct_assert_mentions(dom, ">application</text>", ">runtime</text>", ">device</text>",
                       "no events in these iterations", NULL);
    cr_assert_eq(ct_count(dom, "class=\"track\""), 3, "application (empty), runtime, device");
    cr_assert_eq(ct_count(dom, "class=\"ev "), info.events, "one element per event");
    cr_assert_eq(ct_count(dom, "class=\"ev L2"), 52, "the kernels on the device track");

    /* every kernel of the run has its element, named after its node */
    struct cp_trace_store *s = open_ro(trace);
    struct cp_trace_kernel_desc *k = NULL;
    size_t nk = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_query_kernels(s, -1, &k, &nk, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(nk, 52);
    for (size_t i = 0; i < nk; i++) {
        char *attr = cp_t_fmt("data-name=\"%s\"", k[i].node);
        cr_assert_not_null(strstr(dom, attr), "no element for kernel %s", k[i].node);
        free(attr);
    }

    /* a kernel is drawn in the colour of its frame in the flame graph */
    struct cp_flame_opts fo;
    cp_flame_opts_init(&fo);
    fo.width = 20000; /* every kernel drawn, however short (test_flame.c says why) */
    struct cp_buf svg;
    cp_buf_init(&svg);
    cr_assert_eq(cp_view_flame(s, &fo, &svg, NULL, &d), CP_OK, "%s", d.msg);
    for (size_t i = 0; i < nk; i += 10) {
        char tl_fill[8], fl_fill[8];
        attr_near(dom, cp_t_fmt("data-name=\"%s\"", k[i].node), "fill=\"", true, tl_fill);
        attr_near(svg.data, cp_t_fmt("data-n=\"%s\"", k[i].node), "data-c=\"", false, fl_fill);
        cr_assert_str_eq(tl_fill, fl_fill, "kernel %s: %s on the timeline, %s in the flame graph",
                         k[i].node, tl_fill, fl_fill);
    }
    cp_buf_release(&svg);
    cp_trace_kernels_free(k, nk);
    cp_trace_store_close(s);

    char *mark = cp_t_fmt("class=\"iter\" data-iteration=\"%lld\"", (long long)info.first);
    cr_assert_not_null(strstr(dom, mark), "the iteration's boundary is marked");
    free(mark);
    cr_assert_not_null(strstr(dom, "class=\"tick-label\""), "a time axis");
    cr_assert(strstr(dom, " \xc2\xb5s</text>") || strstr(dom, " ms</text>"), "the axis has units");

    char *png = cp_t_path("timeline.png");
    cr_assert(ct_browser_screenshot(file, NULL, png, 1200, 700), "no screenshot (see stderr)");
    struct ct_png_ink ink;
    cr_assert(ct_png_ink(png, &ink));
    cr_assert_eq(ink.width, 1200);
    cr_assert_eq(ink.height, 700);
    cr_assert_gt(ink.ink, 0.02, "the screenshot is blank: %.4f of its pixels drawn", ink.ink);
    cr_assert_gt(ink.colors, 8, "%zu colours", ink.colors);

    free(png);
    free(dom);
    free(file);
    free(page);
    free(trace);
}

Test(timeline, a_search_in_the_url_highlights_the_matching_events_and_counts_them)
{
    char *trace = bench_trace();
    struct cp_timeline_info info;
    char *page = timeline(trace, -1, 0, &info);
    char *file = write_page("timeline.html", page);

    /* the page matches an event by its name, op type or impl */
    struct cp_trace_store *s = open_ro(trace);
    struct cp_trace_kernel_desc *k = NULL;
    size_t nk = 0, want = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_query_kernels(s, -1, &k, &nk, &d), CP_OK, "%s", d.msg);
    for (size_t i = 0; i < nk; i++)
        want +=
            has_ci(k[i].node, "conv") || has_ci(k[i].op_type, "conv") || has_ci(k[i].impl, "conv");
    cp_trace_kernels_free(k, nk);
    cp_trace_store_close(s);
    cr_assert_gt(want, 0);
    cr_assert_lt(want, 52);

    char *dom = dom_of(file, "search=Conv");
    char *count = cp_t_fmt("id=\"matches\" data-count=\"%zu\">%zu matches<", want, want);
    cr_assert_not_null(strstr(dom, count), "expected %s", count);
    cr_assert_eq(ct_count(dom, " match\" data-i="), want, "highlighted");
    cr_assert_eq(ct_count(dom, " dim\" data-i="), info.events - want, "the others dimmed");
    free(count);
    free(dom);

    dom = dom_of(file, "search=no-such-event");
    cr_assert_not_null(strstr(dom, "data-count=\"0\">0 matches<"));
    free(dom);
    free(file);
    free(page);
    free(trace);
}

Test(timeline, selecting_a_runtime_phase_draws_its_flows_to_the_kernels_it_launched)
{
    char *trace = bench_trace();
    struct cp_timeline_info info;
    char *page = timeline(trace, -1, 0, &info);
    char *file = write_page("timeline.html", page);

    char *dom = dom_of(file, "select=execute");
    cr_assert_eq(ct_count(dom, "class=\"flow\""), info.flows, "an arrow per launched kernel");
    ct_assert_mentions(dom, "<h2>execute</h2>", "<th>launched</th><td>52 kernels</td>", NULL);
    free(dom);

    /* a kernel: its details and the one arrow from its launcher */
    dom = dom_of(file, "select=/conv1/Conv");
    cr_assert_eq(ct_count(dom, "class=\"flow\""), 1);
    ct_assert_mentions(dom, "<h2>/conv1/Conv</h2>", "<th>op type</th><td>Conv</td>",
                       "<th>impl</th><td>onednn:conv</td>",
                       "<th>ONNX origins</th><td>/conv1/Conv</td>", "input: [1,3,64,64] f32 NCHW",
                       "<th>launched by</th><td>execute (runtime)", NULL);
    free(dom);
    free(file);
    free(page);
    free(trace);
}

/* The window the chart shows, from the svg's data-view="T0,T1". */
static void view_of(const char *dom, long long *t0, long long *t1)
{
    const char *v = strstr(dom, "data-view=\"");
    cr_assert_not_null(v, "no data-view");
    cr_assert_eq(sscanf(v, "data-view=\"%lld,%lld\"", t0, t1), 2, "%.40s", v);
}

Test(timeline, the_keyboard_zooms_and_pans_and_a_window_can_be_given_in_the_url)
{
    char *trace = bench_trace();
    struct cp_timeline_info info;
    char *page = timeline(trace, -1, 0, &info);
    char *file = write_page("timeline.html", page);
    long long t0, t1, full;

    char *dom = dom_of(file, NULL);
    view_of(dom, &t0, &full);
    cr_assert_eq(t0, 0);
    cr_assert_gt(full, 0);
    free(dom);

    /* W zooms in around the middle, D pans right: a narrower window, later */
    dom = dom_of(file, "keys=wwww");
    view_of(dom, &t0, &t1);
    cr_assert_gt(t0, 0);
    cr_assert_lt(t1 - t0, full / 2, "%lld..%lld of %lld", t0, t1, full);
    free(dom);
    long long z0 = t0;
    dom = dom_of(file, "keys=wwwwdd");
    view_of(dom, &t0, &t1);
    cr_assert_gt(t0, z0, "D pans right");
    free(dom);
    /* S zooms back out, A pans left, never past the events */
    dom = dom_of(file, "keys=wwssssaaaa");
    view_of(dom, &t0, &t1);
    cr_assert_eq(t0, 0);
    cr_assert_eq(t1, full);
    free(dom);

    /* a window in the URL: fewer event elements, the axis in its units */
    char *q = cp_t_fmt("view=0,%lld", full / 10);
    dom = dom_of(file, q);
    view_of(dom, &t0, &t1);
    cr_assert_eq(t0, 0);
    cr_assert_eq(t1, full / 10);
    cr_assert_lt(ct_count(dom, "class=\"ev "), info.events);
    free(dom);
    free(q);
    free(file);
    free(page);
    free(trace);
}

/* The browser helper itself: a page's uncaught exception and console output
 * come back, so a broken script cannot pass as a clean page. */
Test(timeline, the_browser_reports_the_console_and_uncaught_exceptions_of_a_page)
{
    cr_assert(ct_browser_available(), "chromium is not installed (scripts/test.sh installs it)");
    char *file = cp_t_path("throws.html");
    ct_write_text(file, "<!DOCTYPE html><html><body><p id=\"p\">before</p><script>\n"
                        "console.log('hello from the page');\n"
                        "document.getElementById('p').textContent = 'after ' + location.search;\n"
                        "throw new Error('deliberate');\n"
                        "</script></body></html>\n");
    char *console = NULL;
    char *dom = ct_browser_dom(file, "q=1", &console);
    cr_assert_not_null(dom);
    cr_assert_not_null(console);
    ct_assert_mentions(dom, "<p id=\"p\">after ?q=1</p>", NULL);
    ct_assert_mentions(console, "hello from the page", "Uncaught Error: deliberate", NULL);
    free(console);
    free(dom);
    free(file);
}

Test(timeline, several_iterations_from_a_chosen_one_are_marked_and_clamped_to_the_run)
{
    char *trace = bench_trace();
    struct cp_timeline_info info;
    char *page = timeline(trace, 1, 3, &info);
    cr_assert_eq(info.first, 1);
    cr_assert_eq(info.count, 3);
    cr_assert_eq(info.events, 3 * 53);
    cr_assert_eq(info.flows, 3 * 52);
    cr_assert_not_null(strstr(page, "iterations 1 to 3"));
    char *file = write_page("timeline.html", page);
    char *dom = dom_of(file, NULL);
    for (int it = 1; it <= 3; it++) {
        char *mark = cp_t_fmt("class=\"iter\" data-iteration=\"%d\"", it);
        cr_assert_not_null(strstr(dom, mark), "iteration %d is marked", it);
        free(mark);
    }
    free(dom);
    free(file);
    free(page);

    /* 16 from the last but one: the two there are */
    int64_t last = 0, median = 0;
    iterations_of(trace, &last, &median);
    page = timeline(trace, last - 1, 16, &info);
    cr_assert_eq(info.first, last - 1);
    cr_assert_eq(info.count, 2);
    free(page);
    refused(trace, -1, 0, 17, "17", "16", NULL);
    free(trace);
}

Test(timeline, inputs_that_cannot_be_drawn_are_refused_naming_the_trace)
{
    /* a store without runs */
    char *empty = cp_t_path("empty.db");
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open(empty, &s, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    refused(empty, -1, -1, 0, NULL);

    /* a run without iterations, then one with samples but no events */
    char *bare = cp_t_path("bare.db");
    struct cp_trace_run_info ri = {.kind = "run", .model_path = "m.onnx", .iterations = 3};
    int64_t run = 0;
    s = cp_t_trace_store(bare, &ri, &run);
    cr_assert_not_null(s);
    int64_t run2 = 0;
    cr_assert_eq(cp_trace_store_begin_run(s, &ri, &run2, &d), CP_OK, "%s", d.msg);
    const uint64_t ns[3] = {1000, 2000, 3000};
    cr_assert_eq(cp_trace_store_add_samples(s, run2, 0, ns, 3, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    refused(bare, run, -1, 0, "no measured iterations", NULL);
    refused(bare, run2, -1, 0, "no events", NULL);

    /* an iteration past the last: the range is named */
    char *trace = bench_trace();
    int64_t last = 0, median = 0;
    iterations_of(trace, &last, &median);
    char *past = cp_t_fmt("iteration %lld", (long long)last + 1);
    char *range = cp_t_fmt("0..%lld", (long long)last);
    refused(trace, -1, last + 1, 1, past, range, NULL);
    refused(trace, -1, 100000, 0, "iteration 100000", range, NULL);
    free(range);
    free(past);
    free(trace);
    free(bare);
    free(empty);
}

Test(timeline, names_that_would_close_the_script_stay_text_and_other_layers_get_tracks)
{
    char *path = cp_t_path("hand.db");
    struct cp_trace_run_info ri = {
        .kind = "import", .model_path = "</script>.onnx", .iterations = 1};
    int64_t run = 0;
    struct cp_trace_store *s = cp_t_trace_store(path, &ri, &run);
    cr_assert_not_null(s);
    struct cp_trace_recorder *r = cp_trace_recorder_create(16);
    cr_assert_not_null(r);
    const char *evil = "</script><script>document.title='pwned'</script><!--";
    int32_t app = cp_trace_intern(r, evil), exec = cp_trace_intern(r, "execute");
    int32_t ka = cp_trace_intern(r, "kernel a"), kb = cp_trace_intern(r, "kernel b");
    int32_t other = cp_trace_intern(r, "on another thread");
    cp_trace_record(r, CP_LAYER_APP, app, -1, 0, 1000, 9000, 0);
    cp_trace_record(r, CP_LAYER_RUNTIME, exec, -1, 0, 2000, 8000, 1);
    cp_trace_record(r, CP_LAYER_DEVICE, ka, 0, 0, 2500, 4000, 1);
    cp_trace_record(r, CP_LAYER_DEVICE, kb, 1, 0, 4000, 7500, 1);
    cp_trace_record(r, CP_LAYER_DEVICE, other, -1, 0, 3000, 5000, 0);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    const uint64_t ns[1] = {8000};
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, ns, 1, &d), CP_OK, "%s", d.msg);
    cp_trace_recorder_free(r);
    cp_trace_store_close(s);
    /* a layer an import added: a stream of an accelerator */
    cr_assert(cp_t_sql_exec(path, "INSERT INTO layers (id, name) VALUES (3, 'stream');"
                                  "INSERT INTO strings (id, value) VALUES (1000, 'memcpy');"
                                  "INSERT INTO events (run_id, layer, kernel_idx, iteration, seq, "
                                  "name_id, start_ns, dur_ns, thread, depth) "
                                  "VALUES (1, 3, -1, 0, 0, 1000, 6000, 1500, 7, 0);"));

    struct cp_timeline_info info;
    char *page = timeline(path, -1, 0, &info);
    cr_assert_eq(info.events, 6);
    cr_assert_eq(info.tracks, 5, "app, runtime 1, device 0, device 1, layer 3: %zu", info.tracks);
    cr_assert_eq(info.flows, 2, "kernel a and b, not the other thread's: %zu", info.flows);
    cr_assert_eq(ct_count(page, "</script>"), 2, "no name closes a script");
    cr_assert_eq(ct_count(page, "<!--"), 0, "no name opens a comment");

    char *file = write_page("hand.html", page);
    char *dom = dom_of(file, "select=execute");
    cr_assert_null(strstr(dom, "pwned</title>"), "a name ran as script");
    ct_assert_mentions(dom, ">runtime, thread 1</text>", ">device, thread 0</text>",
                       ">device, thread 1</text>", ">layer 3, thread 7</text>",
                       "data-name=\"memcpy\"", "data-name=\"&lt;/script&gt;", NULL);
    cr_assert_eq(ct_count(dom, "class=\"flow\""), 2);
    free(dom);
    free(file);
    free(page);
    free(path);
}

Test(timeline, iterations_with_too_many_events_are_refused_asking_for_fewer)
{
    char *path = cp_t_path("big.db");
    struct cp_trace_run_info ri = {.kind = "run", .model_path = "m.onnx", .iterations = 2};
    int64_t run = 0;
    struct cp_trace_store *s = cp_t_trace_store(path, &ri, &run);
    cr_assert_not_null(s);
    const size_t n = 120000; /* per iteration: one fits, two do not */
    struct cp_trace_recorder *r = cp_trace_recorder_create(2 * n);
    cr_assert_not_null(r);
    int32_t name = cp_trace_intern(r, "k");
    for (int32_t it = 0; it < 2; it++)
        for (size_t i = 0; i < n; i++) {
            uint64_t t = (uint64_t)it * 10 * n + 10 * i;
            cp_trace_record(r, CP_LAYER_DEVICE, name, 0, it, t, t + 5, 0);
        }
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    const uint64_t ns[2] = {5000, 6000};
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, ns, 2, &d), CP_OK, "%s", d.msg);
    cp_trace_recorder_free(r);
    cp_trace_store_close(s);

    refused(path, -1, 0, 2, "--count", "iterations 0..1", NULL);
    struct cp_timeline_info info;
    char *page = timeline(path, 1, 1, &info);
    cr_assert_eq(info.events, n);
    free(page);
    free(path);
}
