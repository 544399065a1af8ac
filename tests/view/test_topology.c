/* view/topology.c: the topology of a traced run's kernels, of a pipeline
 * run, of a converted model and of a flow, as SVG laid out by Graphviz:
 * valid XML, the nodes and edges of the input, fused nodes with their ONNX
 * origins, the hot kernel marked, names escaped (quotes, ampersands,
 * backslashes, CJK), the same bytes twice, a big graph simplified; inputs
 * that are none of the three refused naming the file. No assertion on
 * time. */
#include "cli/cli_test.h"
#include "graph/graph.h"
#include "om/om.h"
#include "support/browser.h"
#include "support/calibration.h"
#include "support/db.h"
#include "view/view.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(topology, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

/* The topology of `path` (run `run`), asserted to succeed and to be valid
 * XML (xmllint). */
static char *topology(const char *path, int64_t run, struct cp_topology_info *info)
{
    struct cp_topology_opts o = {.run_id = run};
    struct cp_buf b;
    cp_buf_init(&b);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_view_topology(path, &o, &b, info, &d), CP_OK, "%s: %s", path, d.msg);
    cr_assert_gt(b.len, 0);
    cr_assert(strncmp(b.data, "<?xml", 5) == 0, "%.80s", b.data);
    char *file = cp_t_path("out.svg");
    cr_assert(cp_t_write_file(file, b.data, b.len));
    char *cmd = cp_t_fmt("xmllint --noout '%s'", file);
    cr_assert_eq(system(cmd), 0, "%s: not valid XML", file);
    free(cmd);
    free(file);
    return cp_buf_steal(&b);
}

/* cp_view_topology must fail with `want`, naming `path` and `what`. */
static void refused(const char *path, enum cp_status want, const char *what)
{
    struct cp_topology_opts o = {.run_id = -1};
    struct cp_buf b;
    cp_buf_init(&b);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_topology_info info;
    cr_expect_eq(cp_view_topology(path, &o, &b, &info, &d), want, "%s: %s", path, d.msg);
    cr_expect_eq(b.len, 0, "nothing written on failure");
    ct_assert_mentions(d.msg, path, what, NULL);
    cp_buf_release(&b);
}

static void same_bytes_twice(const char *path, int64_t run, const char *first)
{
    char *again = topology(path, run, NULL);
    cr_expect_str_eq(again, first, "%s: the same input gave different SVG", path);
    free(again);
}

/* examples/models/resnet_tiny.onnx converted (its convolutions fused with
 * their batch norms, relus and residual adds) and benchmarked into a
 * trace. */
static char *resnet_trace(void)
{
    char *om = ct_convert("resnet_tiny");
    char *trace = cp_t_path("t.db");
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "-n", "5", "--trace", trace, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    free(om);
    return trace;
}

Test(topology, a_traced_run_shows_its_kernels_timed_fused_and_hot)
{
    char *trace = resnet_trace();
    struct cp_topology_info info;
    char *svg = topology(trace, -1, &info);
    cr_expect_str_eq(info.kind, "trace");
    cr_expect_geq(info.nodes, 10, "%zu nodes", info.nodes);
    cr_expect_geq(info.edges, info.nodes - 1, "%zu edges for %zu nodes", info.edges, info.nodes);
    cr_expect_geq(info.fused, 5, "%zu fused", info.fused);
    ct_assert_mentions(svg, "/maxpool/MaxPool", "FusedConv", "/avgpool/GlobalAveragePool",
                       /* a fused node's label lists its origins, abbreviated */
                       "fuses: /conv1/Conv, /bn1/BatchNormalization, +1 more",
                       /* the tooltip has them all */
                       "ONNX nodes (3):&#10;- /conv1/Conv&#10;- /bn1/BatchNormalization&#10;- "
                       "/relu/Relu",
                       /* times, shares, the hot kernel and the legend */
                       "/iter", "% of the kernel time", "HOT #1 by time",
                       "#d55e00" /* vermillion */, "share of the kernel time, light 0% to dark",
                       /* edges labelled with the tensor between the kernels */
                       "1x16x32x32 f32", NULL);
    cr_expect_null(strstr(svg, "no times"), "a bench trace has kernel times");
    same_bytes_twice(trace, -1, svg);
    free(svg);
    free(trace);
}

Test(topology, a_converted_model_shows_its_graph_and_onnx_origins_without_times)
{
    char *om = ct_convert("resnet_tiny");
    struct cp_topology_info info;
    char *svg = topology(om, -1, &info);
    cr_expect_str_eq(info.kind, "model");
    cr_expect_geq(info.nodes, 10);
    cr_expect_geq(info.edges, info.nodes - 1);
    cr_expect_geq(info.fused, 5);
    ct_assert_mentions(svg, "no times: a model file", "/maxpool/MaxPool", "FusedConv",
                       "fuses: /conv1/Conv, /bn1/BatchNormalization, +1 more",
                       "&#10;- /bn1/BatchNormalization&#10;- /relu/Relu", NULL);
    cr_expect_null(strstr(svg, "HOT"), "a model has no times, so nothing hot");
    same_bytes_twice(om, -1, svg);
    free(svg);
    free(om);
}

/* A flow file in the scratch folder with `dot` as its graphconf, and an
 * input folder for its source. */
static char *flow(const char *name, const char *dot)
{
    char *in = cp_t_path("in");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_mkdir_p(in, 0755, &d), CP_OK, "%s", d.msg);
    char *p = cp_t_fmt("%s/p0.txt", in);
    ct_write_text(p, "a poster of a cat");
    free(p);
    free(in);
    char *path = cp_t_path(name);
    char *text = cp_t_fmt("[flow]\ndesc = \"test\"\n[graph]\nformat = \"graphviz\"\n"
                          "graphconf = '''\n%s'''\n",
                          dot);
    ct_write_text(path, text);
    free(text);
    return path;
}

static const char FLOW_DOT[] =
    "digraph shop {\n"
    " src[flowunit=file_source, dir=\"in\"]\n"
    " \"去噪 \\\"q\\\" a&b <c> d\\e\"[flowunit=delay, sleep_ms=1, workers=3, queue_size=7]\n"
    " slow[flowunit=delay, spin_ms=2, batch_size=4]\n"
    " src:out -> \"去噪 \\\"q\\\" a&b <c> d\\e\":in\n"
    " \"去噪 \\\"q\\\" a&b <c> d\\e\":out -> slow:in\n"
    "}\n";

Test(topology, a_flow_shows_its_nodes_keys_and_edges_with_names_escaped)
{
    char *path = flow("shop.toml", FLOW_DOT);
    struct cp_topology_info info;
    char *svg = topology(path, -1, &info);
    cr_expect_str_eq(info.kind, "flow");
    cr_expect_eq(info.nodes, 3);
    cr_expect_eq(info.edges, 2);
    cr_expect_eq(info.fused, 0);
    /* the name as XML text: quotes, ampersand and angle brackets as
     * entities, the backslash as it was (a character reference in the
     * tooltip), the CJK as it was */
    ct_assert_mentions(svg, "src", "file_source", "slow", "delay", "no times: a flow file",
                       "去噪 &quot;q&quot; a&amp;b &lt;c&gt; d\\e", "workers 3", "queue 7",
                       "batch 4", NULL);
    cr_expect(strstr(svg, "&lt;c&gt; d\\e&#10;flowunit delay"), "the tooltip: %s", svg);
    cr_expect_null(strstr(svg, "d\\\\e"), "a backslash doubled in: %s", svg);
    /* two edges drawn */
    size_t edges = 0;
    for (const char *p = svg; (p = strstr(p, "class=\"edge\"")); p++)
        edges++;
    cr_expect_eq(edges, 2);
    same_bytes_twice(path, -1, svg);

    /* drawn still, the name reads back as it was written: entities
     * decoded, the backslash single, the CJK in a font that has it */
    char *pdf = cp_t_path("shop.pdf");
    struct cp_run r;
    cp_run_cli(&r, "view", "--topology", path, "-o", pdf, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    char *cmd = cp_t_fmt("pdftotext -raw '%s' -", pdf);
    char *text = cp_run_shell(cmd);
    cr_assert_not_null(text, "%s", cmd);
    ct_assert_mentions(text, "去噪 \"q\" a&b <c> d\\e", "workers 3 · batch 1 · queue 7", NULL);
    free(text);
    free(cmd);
    free(pdf);
    free(svg);
    free(path);
}

Test(topology, a_pipeline_run_shows_its_nodes_busy_share_and_queues)
{
    char *path = flow("shop.toml", FLOW_DOT);
    char *trace = cp_t_path("p.db");
    struct cp_run r;
    cp_run_cli(&r, "pipeline", "run", path, "--requests", "4", "--trace", trace, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    struct cp_topology_info info;
    char *svg = topology(trace, -1, &info);
    cr_expect_str_eq(info.kind, "trace");
    cr_expect_eq(info.nodes, 3);
    cr_expect_eq(info.edges, 2);
    ct_assert_mentions(svg, "pipeline run", "src", "slow", "去噪 &quot;q&quot;", "calls", "busy",
                       "depth", "wait", "BUSIEST #1", NULL);
    same_bytes_twice(trace, -1, svg);
    free(svg);
    free(trace);
    free(path);
}

/* A chain of `n` Relu nodes written as a CPU .om. */
static char *relu_chain(size_t n)
{
    struct cp_graph *g = cp_graph_create();
    cr_assert_not_null(g);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_shape s;
    int64_t dims[] = {1, 8};
    cp_shape_set(&s, 2, dims);
    int32_t prev;
    cr_assert_eq(cp_graph_add_tensor(g, "x", CP_DTYPE_F32, &s, CP_TENSOR_INPUT, &prev, &d), CP_OK,
                 "%s", d.msg);
    cr_assert_eq(cp_graph_add_input(g, prev), CP_OK);
    for (size_t i = 0; i < n; i++) {
        char name[32], out[32];
        snprintf(name, sizeof name, "relu_%zu", i);
        snprintf(out, sizeof out, "t_%zu", i);
        int32_t t;
        cr_assert_eq(cp_graph_add_tensor(g, out, CP_DTYPE_F32, &s, CP_TENSOR_INTERMEDIATE, &t, &d),
                     CP_OK, "%s", d.msg);
        const char *origin = name;
        cr_assert_eq(cp_graph_add_node(g, name, "Relu", "", &prev, 1, &t, 1, &origin, 1, NULL, &d),
                     CP_OK, "%s", d.msg);
        prev = t;
    }
    cr_assert_eq(cp_graph_add_output(g, prev), CP_OK);
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.tool_version = "test";
    meta.source_path = "chain.onnx";
    meta.source_hash = "00000000000000000000000000000000";
    meta.target = "cpu";
    char *path = cp_t_path("chain.om");
    cr_assert_eq(cp_om_write(path, g, &meta, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
    return path;
}

Test(topology, a_big_graph_is_laid_out_simplified_and_says_so)
{
    char *om = relu_chain(1600);
    struct cp_topology_info info;
    char *svg = topology(om, -1, &info);
    cr_expect_eq(info.nodes, 1600);
    cr_expect_eq(info.edges, 1599);
    ct_assert_mentions(svg, "relu_0", "relu_1599", "1600 nodes: simplified layout", NULL);
    free(svg);
    free(om);
}

Test(topology, inputs_that_cannot_be_drawn_are_refused_naming_the_file)
{
    char *missing = cp_t_path("nowhere.db");
    refused(missing, CP_ERR_IO, "no such file");
    free(missing);

    char *empty = cp_t_path("empty.om");
    ct_write_text(empty, "");
    refused(empty, CP_ERR_INVALID, "an empty file");
    free(empty);

    char *text = cp_t_path("notes.toml");
    ct_write_text(text, "just some notes, not a flow\n");
    refused(text, CP_ERR_INVALID, "a trace store (.db), a CPU .om or a flow (.toml)");
    free(text);

    /* a store without runs */
    char *store = cp_t_path("empty.db");
    struct cp_trace_store *s = cp_t_trace_store(store, NULL, NULL);
    cr_assert_not_null(s);
    cp_trace_store_close(s);
    struct cp_topology_opts o = {.run_id = -1};
    struct cp_buf b;
    cp_buf_init(&b);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(cp_view_topology(store, &o, &b, NULL, &d), CP_ERR_INVALID, "%s", d.msg);
    ct_assert_mentions(d.msg, store, NULL);
    cp_buf_release(&b);

    /* a run without kernels that is not a pipeline run */
    struct cp_trace_run_info ri = {.kind = "bench", .model_path = "m.onnx", .target = "cpu"};
    int64_t run = -1;
    s = cp_t_trace_store(store, &ri, &run);
    cr_assert_not_null(s);
    cp_trace_store_close(s);
    char *what = cp_t_fmt("run %lld has no kernels to draw", (long long)run);
    refused(store, CP_ERR_INVALID, what);
    free(what);
    free(store);

    /* a flow that does not load says why, as the flow reader does */
    char *bad = flow("bad.toml", "digraph g {\n src[flowunit=file_source, dir=\"in\"]\n"
                                 " x[flowunit=warp]\n src:out -> x:in\n}\n");
    refused(bad, CP_ERR_INVALID, "unknown flowunit 'warp'");
    free(bad);
}

/* The command marks the nodes analyze's findings name, on a fixed roofline
 * (the same findings on every machine); --no-findings leaves them out. */
Test(topology, the_command_marks_the_nodes_findings_name)
{
    cr_assert_eq(setenv("XDG_CACHE_HOME", cp_t_dir, 1), 0);
    cr_assert(cp_t_fixed_calibration());
    char *db = resnet_trace();
    char *svg = cp_t_path("marked.svg");
    struct cp_run r;
    cp_run_cli(&r, "view", "--topology", db, "-o", svg, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cr_expect_gt(ct_num(j, "flagged"), 0, "resnet_tiny has findings on its kernels");
    json_decref(j);
    cp_run_release(&r);
    char *text = ct_read_text(svg);
    ct_assert_mentions(text, "\xe2\x9a\x91 ", "a finding of cannprof analyze", NULL);
    free(text);
    cp_run_cli(&r, "view", "--topology", db, "-o", svg, "--no-findings", "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    j = ct_json(r.out);
    cr_expect_eq(ct_num(j, "flagged"), 0);
    json_decref(j);
    cp_run_release(&r);
    text = ct_read_text(svg);
    cr_expect(strstr(text, "\xe2\x9a\x91") == NULL);
    free(text);
    free(svg);
    free(db);
}

Test(topology, a_still_picture_draws_the_same_layout_through_the_chart_module)
{
    char *trace = resnet_trace();
    char *pdf = cp_t_path("t.pdf"), *png = cp_t_path("t.png"), *again = cp_t_path("t2.pdf");
    struct cp_run r;
    cp_run_cli(&r, "view", "--topology", trace, "-o", pdf, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "t.pdf (trace: "), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "view", "--topology", trace, "-o", again, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "view", "--topology", trace, "-o", png, "--no-findings", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);

    /* one page; the labels as text: the legend, nodes, origins, the hot
     * kernel, the marks of findings, the tensors on the edges */
    char *cmd = cp_t_fmt("pdfinfo '%s'", pdf);
    char *info = cp_run_shell(cmd);
    cr_assert_not_null(info, "%s", cmd);
    cr_expect_not_null(strstr(info, "Pages:           1"), "%s", info);
    free(info);
    free(cmd);
    cmd = cp_t_fmt("pdftotext -raw '%s' -", pdf);
    char *text = cp_run_shell(cmd);
    cr_assert_not_null(text, "%s", cmd);
    ct_assert_mentions(text, "share of the kernel time, light 0% to dark", "/maxpool/MaxPool",
                       "FusedConv", "fuses: /conv1/Conv, /bn1/BatchNormalization, +1 more",
                       "HOT #1 by time", "/iter", "1x16x32x32 f32", "\xe2\x9a\x91 1.", NULL);
    free(text);
    free(cmd);
    /* the same bytes apart from the creation date */
    cmd = cp_t_fmt("grep -av CreationDate '%s' > '%s.a' && grep -av CreationDate '%s' > '%s.b' && "
                   "cmp -s '%s.a' '%s.b' && echo same",
                   pdf, pdf, again, pdf, pdf, pdf);
    char *same = cp_run_shell(cmd);
    cr_expect(same && strstr(same, "same"), "two PDFs of one trace differ");
    free(same);
    free(cmd);

    /* the PNG: drawn, in the ramp's blues and the hot border's vermillion */
    struct ct_png_ink ink;
    cr_assert(ct_png_ink(png, &ink));
    cr_expect_gt(ink.ink, 0.03, "the picture is blank: %.4f", ink.ink);
    cr_expect_gt(ink.colors, 12, "%zu colours", ink.colors);
    cr_expect_gt(ink.height, ink.width, "a chain of kernels is tall: %dx%d", ink.width, ink.height);
    free(again);
    free(png);
    free(pdf);
    free(trace);
}
