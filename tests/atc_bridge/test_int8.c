/* int8 post-training quantization: the --quant_ranges file's form
 * (comments, blanks, CRLF, sorting) and its canonical %.9g text, what the
 * parser refuses, how the int8 knobs travel in the config (flags, id, JSON,
 * command line), which nodes Int8QuantizationPass marks on a small graph
 * and with which scales (the mark survives fusion, the kernels stay close
 * to fp32), and `cannprof convert --int8_nodes` end to end on the ResNet
 * example. */
#include "atc_bridge/convert.h"
#include "atc_bridge/passes/rewrite.h"
#include "om/om.h"
#include "pass_test.h"
#include "support/cli.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

TestSuite(int8, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* Write `text` to <scratch>/NAME; returns the path. */
static char *write_text(const char *name, const char *text)
{
    char *path = cp_t_path(name);
    cr_assert(cp_t_write_file(path, text, strlen(text)), "cannot write %s", path);
    return path;
}

/* ---- the ranges file ------------------------------------------------------------ */

static enum cp_status parse(const char *text, char *out, size_t cap, struct cp_diag *d)
{
    cp_diag_init(d);
    return cp_quant_ranges_parse("r.txt", text, strlen(text), out, cap, d);
}

Test(int8, the_ranges_file_becomes_sorted_canonical_lines)
{
    char out[512];
    struct cp_diag d;
    cr_assert_eq(
        parse("b 0.5 2\r\n# a comment\n\n  a\t-1   1e0 \r\nc -0.25 0.125", out, sizeof out, &d),
        CP_OK, "%s", d.msg);
    cr_assert_str_eq(out, "a -1 1\nb 0.5 2\nc -0.25 0.125");
    cr_assert_eq(cp_quant_ranges_count(out), 3);
    double lo = 0, hi = 0;
    cr_assert(cp_quant_ranges_find(out, "b", &lo, &hi));
    cr_assert_eq(lo, 0.5);
    cr_assert_eq(hi, 2.0);
    cr_assert(cp_quant_ranges_find(out, "c", &lo, &hi));
    cr_assert_eq(lo, -0.25);
    cr_assert_eq(hi, 0.125);
    cr_assert_not(cp_quant_ranges_find(out, "d", &lo, &hi));
    cr_assert_not(cp_quant_ranges_find(out, "", &lo, &hi));

    /* numbers print as %.9g, so the same range always reads the same */
    cr_assert_eq(parse("t/x 0.123456789012 1e10\nt/xy -1e-10 16.0\n", out, sizeof out, &d), CP_OK,
                 "%s", d.msg);
    cr_assert_str_eq(out, "t/x 0.123456789 1e+10\nt/xy -1e-10 16");
    cr_assert(cp_quant_ranges_find(out, "t/x", &lo, &hi));
    cr_assert_eq(lo, 0.123456789);
    cr_assert_eq(hi, 1e10);
    cr_assert(cp_quant_ranges_find(out, "t/xy", &lo, &hi), "a name is not found by its prefix");
    cr_assert_eq(hi, 16.0);

    /* the canonical text parses back to itself; MIN == MAX is a range */
    cr_assert_eq(parse("z 3 3\ny -0 0\n", out, sizeof out, &d), CP_OK, "%s", d.msg);
    char again[512];
    cr_assert_eq(parse(out, again, sizeof again, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(again, out);

    cr_assert_eq(parse("# nothing\n\n  \n", out, sizeof out, &d), CP_OK);
    cr_assert_str_eq(out, "");
    cr_assert_eq(cp_quant_ranges_count(out), 0);
}

/* A refused text: CP_ERR_USAGE, the message holds `want`, out is empty. */
static void refused(const char *text, size_t cap, const char *want)
{
    char out[512];
    memset(out, 'x', sizeof out);
    struct cp_diag d;
    cr_assert_leq(cap, sizeof out);
    cr_assert_eq(parse(text, out, cap, &d), CP_ERR_USAGE, "accepted:\n%s", text);
    cr_assert_not_null(strstr(d.msg, want), "'%s' not in: %s", want, d.msg);
    cr_assert_str_eq(out, "", "a refused table leaves nothing half-read");
}

Test(int8, bad_ranges_files_are_refused_naming_file_and_line)
{
    refused("a 0 1\nb 1\n", 512, "r.txt:2");
    refused("a 0 1\nb 1 2 3\n", 512, "r.txt:2");
    refused("a 0 1\n\n# c\nb nan 1\n", 512, "r.txt:4");
    refused("b -inf 1\n", 512, "r.txt:1");
    refused("a 0 1\nb 0 inf\n", 512, "r.txt:2");
    refused("b 0 1e999\n", 512, "r.txt:1");
    refused("b 0 one\n", 512, "r.txt:1");
    refused("a 0 1\r\nb 2 1\r\n", 512, "r.txt:2");
    refused("a 0 1\nb 2 1\n", 512, "MIN 2 is above MAX 1");
    /* a tensor twice: named (the table is checked once sorted) */
    refused("a 0 1\nb 0 1\na 0 2\n", 512, "r.txt");
    refused("a 0 1\nb 0 1\na 0 2\n", 512, "'a' is given twice");

    char *big = malloc(1200);
    cr_assert_not_null(big);
    memset(big, 'n', 1100);
    snprintf(big + 1100, 100, " 0 1\n");
    refused(big, 512, "r.txt:1");
    free(big);

    char nul[] = "a 0 1\nb\0 0 1\n";
    char out[64] = "stale";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_quant_ranges_parse("r.txt", nul, sizeof nul - 1, out, sizeof out, &d),
                 CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "r.txt"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "offset 7"), "%s", d.msg);
    cr_assert_str_eq(out, "");

    /* longer than the room: refused, never cut short */
    refused("aaaaaaaaaaaaaaaa 0 1\nbbbbbbbbbbbbbbbb 0 1\ncccccccccccccccc 0 1\n", 40,
            "longer than 39 bytes");
}

Test(int8, the_ranges_file_is_read_from_its_path)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    struct cp_diag d;
    cp_diag_init(&d);
    char *path = write_text("ranges.txt", "y 0 6\nx -1 1\n");
    cr_assert_eq(cp_convert_config_load_quant_ranges(&c, &d), CP_OK, "no file: nothing to do");
    cr_assert_str_eq(c.quant_ranges, "");
    cr_assert_eq(cp_convert_config_set(&c, "quant_ranges", path, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_convert_config_load_quant_ranges(&c, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(c.quant_ranges, "x -1 1\ny 0 6");

    char *missing = cp_t_path("missing.txt");
    cr_assert_eq(cp_convert_config_set(&c, "quant_ranges", missing, &d), CP_OK);
    cr_assert_str_eq(c.quant_ranges, "", "a new file makes the old ranges stale");
    cr_assert_eq(cp_convert_config_load_quant_ranges(&c, &d), CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "missing.txt"), "%s", d.msg);

    const char *bad = "x -1 1\nx 0 1\n";
    cr_assert(cp_t_write_file(path, bad, strlen(bad)));
    cr_assert_eq(cp_convert_config_set(&c, "quant_ranges", path, &d), CP_OK);
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_load_quant_ranges(&c, &d), CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "ranges.txt"), "%s", d.msg);
    cr_assert_str_eq(c.quant_ranges, "");
    free(path);
    free(missing);
}

/* ---- the config --------------------------------------------------------------- */

static void set_ok(struct cp_convert_config *c, const char *flag, const char *value)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(c, flag, value, &d), CP_OK, "--%s=%s: %s", flag, value,
                 d.msg);
}

static void set_refused(const char *flag, const char *value, const char *want)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, flag, value, &d), CP_ERR_USAGE, "--%s=%s accepted", flag,
                 value);
    cr_assert_not_null(strstr(d.msg, flag), "the message names the flag: %s", d.msg);
    cr_assert_not_null(strstr(d.msg, want), "'%s' not in: %s", want, d.msg);
}

Test(int8, the_calibration_flags_take_only_their_values)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    cr_assert_eq(c.calibration_method, CP_CALIB_MINMAX);
    cr_assert_eq(c.calibration_percentile, 99.999);
    cr_assert_eq(c.calibration_samples, 0);
    set_ok(&c, "calibration_method", "entropy");
    cr_assert_eq(c.calibration_method, CP_CALIB_ENTROPY);
    set_ok(&c, "calibration_method", "percentile");
    cr_assert_eq(c.calibration_method, CP_CALIB_PERCENTILE);
    set_ok(&c, "calibration_percentile", "99.9");
    cr_assert_eq(c.calibration_percentile, 99.9);
    set_ok(&c, "calibration_percentile", "50");
    set_ok(&c, "calibration_percentile", "100");
    set_ok(&c, "calibration_samples", "1");
    cr_assert_eq(c.calibration_samples, 1);
    set_ok(&c, "calibration_samples", "100000");
    cr_assert_str_eq(cp_calib_method_name(CP_CALIB_MINMAX), "minmax");
    cr_assert_str_eq(cp_calib_method_name(CP_CALIB_PERCENTILE), "percentile");
    cr_assert_str_eq(cp_calib_method_name(CP_CALIB_ENTROPY), "entropy");

    set_refused("calibration_method", "kl", "minmax, percentile, entropy");
    set_refused("calibration_method", "", "minmax");
    set_refused("calibration_percentile", "20", "'20'");
    set_refused("calibration_percentile", "101", "'101'");
    set_refused("calibration_percentile", "x", "'x'");
    set_refused("calibration_percentile", "nan", "'nan'");
    set_refused("calibration_percentile", "99.9%", "'99.9%'");
    set_refused("calibration_percentile", "", "percentile");
    set_refused("calibration_samples", "0", "'0'");
    set_refused("calibration_samples", "-3", "'-3'");
    set_refused("calibration_samples", "100001", "'100001'");
    set_refused("calibration_samples", "x", "'x'");
    set_refused("int8_nodes", "", "empty path");
    set_refused("quant_ranges", "", "empty path");
    set_refused("calibration_data", "", "empty path");
}

Test(int8, the_int8_knobs_are_in_the_id_the_json_and_the_command_line)
{
    struct cp_convert_config a;
    cp_convert_config_init(&a);
    char ia[17], ib[17], ic[17];
    cp_convert_config_id(&a, ia);
    struct cp_buf j0;
    cp_buf_init(&j0);
    cp_convert_config_json(&a, &j0);
    cr_assert_null(strstr(j0.data, "int8_nodes"), "a config without int8 keeps its old JSON");
    cr_assert_null(strstr(j0.data, "quant_ranges"), "%s", j0.data);
    cr_assert_null(strstr(j0.data, "calibration"), "%s", j0.data);
    cp_buf_release(&j0);

    char *nodes = write_text("int8.txt", "OpType::Conv\n/head/Gemm\n");
    char *ranges = write_text("ranges.txt", "x -1 1\n");
    struct cp_convert_config b = a;
    struct cp_diag d;
    cp_diag_init(&d);
    set_ok(&b, "int8_nodes", nodes);
    cr_assert_eq(cp_convert_config_load_int8_nodes(&b, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(b.int8_nodes, "/head/Gemm\nOpType::Conv");
    set_ok(&b, "quant_ranges", ranges);
    cr_assert_eq(cp_convert_config_load_quant_ranges(&b, &d), CP_OK, "%s", d.msg);
    cp_convert_config_id(&b, ib);
    cr_assert_str_neq(ia, ib, "quantizing changes the model, so the id");

    /* the ranges change the id; where they came from does not */
    struct cp_convert_config c = b;
    snprintf(c.quant_ranges, sizeof c.quant_ranges, "x -1 2");
    cp_convert_config_id(&c, ic);
    cr_assert_str_neq(ic, ib);
    c = b;
    snprintf(c.quant_ranges_file, sizeof c.quant_ranges_file, "/elsewhere/r.txt");
    snprintf(c.int8_nodes_file, sizeof c.int8_nodes_file, "/elsewhere/n.txt");
    cp_convert_config_id(&c, ic);
    cr_assert_str_eq(ic, ib);

    /* JSON: every int8 field comes back */
    b.calibration_method = CP_CALIB_PERCENTILE;
    b.calibration_percentile = 99.5;
    b.calibration_samples = 12;
    snprintf(b.calibration_data, sizeof b.calibration_data, "/data/calib");
    struct cp_buf js;
    cp_buf_init(&js);
    cp_convert_config_json(&b, &js);
    cr_assert_not_null(strstr(js.data, "\"int8_nodes\""), "%s", js.data);
    struct cp_convert_config back;
    cr_assert_eq(cp_convert_config_from_json(&back, js.data, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(back.int8_nodes, b.int8_nodes);
    cr_assert_str_eq(back.int8_nodes_file, nodes);
    cr_assert_str_eq(back.quant_ranges, "x -1 1");
    cr_assert_str_eq(back.quant_ranges_file, ranges);
    cr_assert_str_eq(back.calibration_data, "/data/calib");
    cr_assert_eq(back.calibration_method, CP_CALIB_PERCENTILE);
    cr_assert_eq(back.calibration_percentile, 99.5);
    cr_assert_eq(back.calibration_samples, 12);
    char iback[17];
    cp_convert_config_id(&back, iback);
    cp_convert_config_id(&b, ib);
    cr_assert_str_eq(iback, ib);
    cp_buf_release(&js);

    /* the command line: a ranges file stands for the calibration */
    struct cp_buf cmd;
    cp_buf_init(&cmd);
    cp_convert_config_cmdline(&b, &cmd);
    cr_assert_not_null(strstr(cmd.data, "--int8_nodes="), "%s", cmd.data);
    cr_assert_not_null(strstr(cmd.data, "--quant_ranges="), "%s", cmd.data);
    cr_assert_null(strstr(cmd.data, "--calibration"), "%s", cmd.data);
    cp_buf_release(&cmd);
    b.quant_ranges_file[0] = '\0';
    cp_buf_init(&cmd);
    cp_convert_config_cmdline(&b, &cmd);
    cr_assert_null(strstr(cmd.data, "--quant_ranges"), "%s", cmd.data);
    cr_assert_not_null(strstr(cmd.data, "--calibration_data=/data/calib"), "%s", cmd.data);
    cr_assert_not_null(strstr(cmd.data, "--calibration_method=percentile"), "%s", cmd.data);
    cr_assert_not_null(strstr(cmd.data, "--calibration_percentile=99.5"), "%s", cmd.data);
    cr_assert_not_null(strstr(cmd.data, "--calibration_samples=12"), "%s", cmd.data);
    cp_buf_release(&cmd);
    /* the defaults are left out */
    b.calibration_method = CP_CALIB_MINMAX;
    b.calibration_samples = 0;
    b.calibration_data[0] = '\0';
    cp_buf_init(&cmd);
    cp_convert_config_cmdline(&b, &cmd);
    cr_assert_null(strstr(cmd.data, "--calibration"), "%s", cmd.data);
    cp_buf_release(&cmd);
    /* without --int8_nodes the calibration knobs say nothing */
    a.calibration_method = CP_CALIB_ENTROPY;
    cp_buf_init(&cmd);
    cp_convert_config_cmdline(&a, &cmd);
    cr_assert_null(strstr(cmd.data, "--calibration"), "%s", cmd.data);
    cp_buf_release(&cmd);

    cr_assert_str_eq(cp_convert_flag_pass("int8_nodes"), "Int8QuantizationPass");
    free(nodes);
    free(ranges);
}

/* ---- Int8QuantizationPass ------------------------------------------------------- */

/* x [1,4,8,8] -> Conv "conv_a" (3x3, pads 1, 8 channels, bias) -> ya ->
 * Relu -> za -> Conv "conv_b" (1x1, 4 channels) -> yb -> Relu -> out. */
static struct cp_graph *two_convs(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 8, 8));
    float wa[8 * 4 * 3 * 3], ba[8], wb[4 * 8];
    for (int i = 0; i < 8 * 4 * 9; i++)
        wa[i] = 0.05f * (float)((i * 37) % 23 - 11) / 11.0f * (float)(1 + i / 36);
    for (int i = 0; i < 8; i++)
        ba[i] = 0.01f * (float)(i - 4);
    for (int i = 0; i < 4 * 8; i++)
        wb[i] = 0.2f * (float)((i * 13) % 17 - 8) / 8.0f;
    gb_init(g, "wa", CP_DTYPE_F32, 4, GB_DIMS(8, 4, 3, 3), wa);
    gb_floats(g, "ba", 8, ba);
    gb_init(g, "wb", CP_DTYPE_F32, 4, GB_DIMS(4, 8, 1, 1), wb);
    int32_t ca = gb_node(g, "conv_a", "Conv", GB_IN("x", "wa", "ba"), GB_IN("ya"));
    cp_node_set_ints(g, ca, "pads", GB_DIMS(1, 1, 1, 1), 4);
    gb_node(g, "relu_a", "Relu", GB_IN("ya"), GB_IN("za"));
    gb_node(g, "conv_b", "Conv", GB_IN("za", "wb"), GB_IN("yb"));
    gb_node(g, "relu_b", "Relu", GB_IN("yb"), GB_IN("out"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "out")), CP_OK);
    pt_prepare(g);
    return g;
}

/* Run Int8QuantizationPass (from its table) with these lists through the
 * manager; whether it changed the graph. */
static bool quantize(struct cp_graph *g, const char *nodes, const char *ranges)
{
    const struct cp_pass *p = cp_quant_passes;
    while (p->name && strcmp(p->name, "Int8QuantizationPass") != 0)
        p++;
    cr_assert_not_null(p->name, "no Int8QuantizationPass in cp_quant_passes");
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_node_list_parse("int8_nodes", "n.txt", nodes, strlen(nodes), c.int8_nodes,
                                    sizeof c.int8_nodes, &d),
                 CP_OK, "%s", d.msg);
    cr_assert_eq(cp_quant_ranges_parse("r.txt", ranges, strlen(ranges), c.quant_ranges,
                                       sizeof c.quant_ranges, &d),
                 CP_OK, "%s", d.msg);
    bool changed = false;
    cr_assert_eq(cp_pass_run_one(g, p->name, &c, &changed, &d), CP_OK, "%s", d.msg);
    return changed;
}

static bool is_int8(const struct cp_node *n)
{
    return strcmp(cp_node_attr_string(n, "compute_precision", ""), "int8") == 0;
}

static const struct cp_node *live(const struct cp_graph *g, const char *name)
{
    const struct cp_node *n = pt_node(g, name);
    cr_assert_not_null(n, "no node %s", name);
    return n;
}

/* Node n is marked int8 with input scale x_scale and sign x_signed, and
 * one weight scale per output channel that maps the channel's max |w|
 * (of the `nw` weights `w`, channel-major over `ch` channels) onto the
 * same full step, 127 (or 63 without VNNI). */
static void assert_marked(const struct cp_node *n, float x_scale, int x_signed, const float *w,
                          int ch, int nw)
{
    cr_assert(is_int8(n), "%s is not marked int8", n->name);
    cr_assert_float_eq(cp_node_attr_float(n, "int8_x_scale", -1), x_scale, 1e-9f, "%s", n->name);
    cr_assert_eq(cp_node_attr_int(n, "int8_x_signed", -1), x_signed, "%s", n->name);
    const struct cp_attr *ws = cp_node_attr(n, "int8_w_scales");
    cr_assert_not_null(ws, "%s has no weight scales", n->name);
    cr_assert_eq(ws->type, CP_ATTR_FLOATS);
    cr_assert_eq(ws->n, (size_t)ch, "%s: a scale per output channel", n->name);
    double step = 0;
    for (int c = 0; c < ch; c++) {
        float top = 0;
        for (int i = c * (nw / ch); i < (c + 1) * (nw / ch); i++)
            top = fabsf(w[i]) > top ? fabsf(w[i]) : top;
        double q = top / ws->floats[c];
        if (c == 0)
            step = q;
        cr_assert(fabs(q - 127) < 1e-3 || fabs(q - 63) < 1e-3,
                  "%s channel %d: max |w| is %g steps (127, or 63 without VNNI)", n->name, c, q);
        cr_assert_float_eq(q, step, 1e-3, "every channel on the same step");
    }
}

static const float *weights(const struct cp_graph *g, const char *name)
{
    const float *w = cp_rw_const_data(g, cp_graph_find_tensor(g, name));
    cr_assert_not_null(w);
    return w;
}

Test(int8, a_listed_conv_whose_input_has_a_range_is_marked_int8)
{
    struct cp_graph *g = two_convs();
    /* a signed input range: s8, symmetric; the output needs no range */
    cr_assert(quantize(g, "conv_a\n", "x -1 0.5\n"));
    assert_marked(live(g, "conv_a"), 1.0f / 127.0f, 1, weights(g, "wa"), 8, 8 * 36);
    const struct cp_node *a = live(g, "conv_a");
    cr_assert_eq(a->op, CP_OP_CONV, "the node keeps its op");
    cr_assert_str_eq(cp_graph_tensor(g, a->inputs[0])->name, "x", "and its f32 tensors");
    cr_assert_str_eq(cp_graph_tensor(g, a->inputs[1])->name, "wa");
    cr_assert_eq(pt_count_op(g, CP_OP_QUANTIZE_LINEAR) + pt_count_op(g, CP_OP_DEQUANTIZE_LINEAR),
                 0);
    cr_assert_not(is_int8(live(g, "conv_b")), "conv_b is not listed");
    cr_assert_null(cp_node_attr(live(g, "conv_b"), "int8_x_scale"));
    cp_graph_free(g);

    /* a range without negative values: u8 over [0, hi] */
    g = two_convs();
    cr_assert(quantize(g, "conv_a\n", "x 0 6\n"));
    assert_marked(live(g, "conv_a"), 6.0f / 255.0f, 0, weights(g, "wa"), 8, 8 * 36);
    cp_graph_free(g);
}

Test(int8, op_type_lists_cover_every_conv_with_a_range)
{
    struct cp_graph *g = two_convs();
    cr_assert(quantize(g, "OpType::Conv\n", "x -1 1\nza 0 3\n"));
    assert_marked(live(g, "conv_a"), 1.0f / 127.0f, 1, weights(g, "wa"), 8, 8 * 36);
    assert_marked(live(g, "conv_b"), 3.0f / 255.0f, 0, weights(g, "wb"), 4, 4 * 8);
    cp_graph_free(g);
}

Test(int8, a_conv_whose_input_has_no_range_stays_float)
{
    struct cp_graph *g = two_convs();
    /* conv_a's output has a range, its input none */
    cr_assert_not(quantize(g, "conv_a\n", "ya -2 3\nza 0 3\n"));
    cr_assert_not(is_int8(live(g, "conv_a")));
    cr_assert_null(cp_node_attr(live(g, "conv_a"), "int8_w_scales"));
    cp_graph_free(g);

    /* a range of [0, 0] holds nothing to represent */
    g = two_convs();
    cr_assert_not(quantize(g, "conv_a\n", "x 0 0\n"));
    cr_assert_not(is_int8(live(g, "conv_a")));
    cp_graph_free(g);
}

Test(int8, an_unlisted_conv_is_untouched)
{
    struct cp_graph *g = two_convs();
    cr_assert(quantize(g, "conv_b\n", "x -1 1\nya -2 3\nza 0 3\nyb -4 4\n"));
    cr_assert_not(is_int8(live(g, "conv_a")));
    cr_assert_null(cp_node_attr(live(g, "conv_a"), "int8_x_scale"));
    cr_assert(is_int8(live(g, "conv_b")));
    cp_graph_free(g);

    /* no list at all: the pass does nothing, ranges or not */
    g = two_convs();
    cr_assert_not(quantize(g, "", "x -1 1\nza 0 3\n"));
    cr_assert_not(is_int8(live(g, "conv_a")));
    cr_assert_not(is_int8(live(g, "conv_b")));
    cp_graph_free(g);
}

Test(int8, a_marked_conv_keeps_its_mark_through_fusion_and_computes_close_to_fp32)
{
    struct cp_graph *g = two_convs();
    cr_assert(quantize(g, "OpType::Conv\n", "x -1 1\nza 0 3\n"));
    cr_assert(pt_run_pass(g, "ConvBiasActivationFusionPass"), "nothing fused");
    cr_assert_eq(pt_count_op(g, CP_OP_CONV) + pt_count_op(g, CP_OP_RELU), 0);
    cr_assert_eq(pt_count_op(g, CP_OP_FUSED_CONV), 2);
    size_t marked = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead || n->op != CP_OP_FUSED_CONV)
            continue;
        const char *a_origin = "conv_a";
        bool is_a = false;
        for (size_t k = 0; k < n->n_origins; k++)
            is_a = is_a || strcmp(n->origins[k], a_origin) == 0;
        if (is_a)
            assert_marked(n, 1.0f / 127.0f, 1, weights(g, "wa"), 8, 8 * 36);
        else
            assert_marked(n, 3.0f / 255.0f, 0, weights(g, "wb"), 4, 4 * 8);
        marked++;
    }
    cr_assert_eq(marked, 2);

    /* on the runtime's kernels: close to the float graph */
    struct cp_graph *ref = two_convs();
    struct pt_outputs before, after;
    pt_run_ref(ref, 5, &before);
    pt_run_kernels(g, 5, false, &after);
    pt_assert_close(&before, &after, 0.05);
    pt_outputs_release(&before);
    pt_outputs_release(&after);
}

Test(int8, a_matmul_gets_a_scale_per_output_column)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(3, 6));
    float w[6 * 5];
    for (int i = 0; i < 30; i++)
        w[i] = 0.1f * (float)((i * 7) % 11 - 5) * (float)(1 + i % 5);
    gb_init(g, "w", CP_DTYPE_F32, 2, GB_DIMS(6, 5), w);
    gb_node(g, "mm", "MatMul", GB_IN("x", "w"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    pt_prepare(g);
    cr_assert(quantize(g, "OpType::MatMul\n", "x -2 2\n"));
    const struct cp_node *n = live(g, "mm");
    cr_assert(is_int8(n));
    const struct cp_attr *ws = cp_node_attr(n, "int8_w_scales");
    cr_assert_not_null(ws);
    cr_assert_eq(ws->n, 5, "a scale per output column");
    for (int c = 0; c < 5; c++) {
        float top = 0;
        for (int r = 0; r < 6; r++)
            top = fabsf(w[r * 5 + c]) > top ? fabsf(w[r * 5 + c]) : top;
        double q = top / ws->floats[c];
        cr_assert(fabs(q - 127) < 1e-3 || fabs(q - 63) < 1e-3, "column %d: %g steps", c, q);
    }
    cp_graph_free(g);
}

/* ---- cannprof convert --int8_nodes ------------------------------------------------ */

/* precision_loss_pct of `cannprof compare A B --json [flags]`. */
static double loss_of(const char *a, const char *b, const char *flag)
{
    struct cp_run r;
    cp_run_cli(&r, "compare", a, b, "--json", "--threads", "1", flag, NULL);
    json_t *j = cp_t_json(r.out ? r.out : "");
    cr_assert_not_null(j, "compare printed no JSON: %s", r.err);
    json_t *v = json_object_get(j, "precision_loss_pct");
    cr_assert(json_is_number(v), "%s", r.out);
    double loss = json_number_value(v);
    json_decref(j);
    cp_run_release(&r);
    return loss;
}

/* `cannprof info PATH --json`, asserted to parse. */
static json_t *info_of(const char *path)
{
    struct cp_run r;
    cp_run_cli(&r, "info", path, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "info %s: %s", path, r.err);
    json_t *j = cp_t_json(r.out);
    cr_assert_not_null(j);
    cp_run_release(&r);
    return j;
}

static json_int_t op_count(json_t *info, const char *op)
{
    json_t *n = json_object_get(json_object_get(json_object_get(info, "graph"), "ops"), op);
    return n ? json_integer_value(n) : 0;
}

/* The convolutions (Conv, FusedConv) of the .om at `path`: how many, and
 * how many of them are marked int8. */
static void convs_of(const char *path, size_t *convs, size_t *int8)
{
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read(path, &g, NULL, &d), CP_OK, "%s", d.msg);
    *convs = *int8 = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead || (n->op != CP_OP_CONV && n->op != CP_OP_FUSED_CONV))
            continue;
        (*convs)++;
        *int8 += is_int8(n) && cp_node_attr(n, "int8_w_scales") != NULL;
    }
    cp_graph_free(g);
}

/* The pass record of `info --json`: whether pass `name` changed the graph. */
static bool pass_changed(json_t *info, const char *name)
{
    json_t *passes = json_object_get(info, "passes");
    for (size_t i = 0; i < json_array_size(passes); i++) {
        json_t *p = json_array_get(passes, i);
        if (strcmp(json_string_value(json_object_get(p, "name")), name) == 0)
            return json_is_true(json_object_get(p, "changed"));
    }
    cr_assert_fail("no pass %s in the record", name);
    return false;
}

Test(int8, convert_quantizes_every_conv_of_resnet_within_five_percent, .timeout = 300)
{
    char *nodes = write_text("int8.txt", "# every convolution\nOpType::Conv\n");
    char *flag = cp_t_fmt("--int8_nodes=%s", nodes);
    char *om = cp_t_convert(cp_t_dir, "resnet_tiny", "r8", flag, NULL);
    char *fp32 = cp_t_convert(cp_t_dir, "resnet_tiny", "fp32", NULL);
    cr_assert(om && fp32, "convert failed (see stderr)");
    char *onnx = cp_t_example("resnet_tiny");
    json_t *src = info_of(onnx), *info = info_of(om);
    json_int_t convs = op_count(src, "Conv");
    cr_assert_gt(convs, 0);
    size_t n_conv, n_int8;
    convs_of(om, &n_conv, &n_int8);
    cr_assert_gt(n_conv, 0);
    cr_assert_eq(n_int8, n_conv, "%zu of %zu convolutions in int8", n_int8, n_conv);
    convs_of(fp32, &n_conv, &n_int8);
    cr_assert_eq(n_int8, 0, "without --int8_nodes nothing is int8");
    cr_assert(pass_changed(info, "Int8QuantizationPass"));
    json_t *cfg = json_object_get(info, "config");
    cr_assert_str_eq(json_string_value(json_object_get(cfg, "int8_nodes")), "OpType::Conv");
    const char *ranges = json_string_value(json_object_get(cfg, "quant_ranges"));
    cr_assert_not_null(ranges);
    double lo, hi;
    cr_assert(cp_quant_ranges_find(ranges, "input", &lo, &hi), "%s", ranges);
    cr_assert(lo >= -1 && lo < -0.9 && hi <= 1 && hi > 0.9, "random inputs in [-1, 1): [%g, %g]",
              lo, hi);
    cr_assert_gt(cp_quant_ranges_count(ranges), (size_t)convs, "an input and an output a conv");
    cr_assert_eq(json_integer_value(json_object_get(cfg, "calibration_samples")), 8);
    double loss = loss_of(onnx, om, NULL), loss_fp32 = loss_of(onnx, fp32, NULL);
    cr_assert_lt(loss, 5.0, "int8 loses %.3f%%", loss);
    cr_assert_gt(loss, loss_fp32, "int8 (%g%%) computes differently from fp32 (%g%%)", loss,
                 loss_fp32);
    json_decref(src);
    json_decref(info);

    /* calibrated on the example's own test input, measured on it */
    char *pb = cp_t_fmt("%s/examples/models/resnet_tiny/test_data_set_0/input_0.pb", CP_SOURCE_DIR);
    size_t len = 0;
    uint8_t *bytes = cp_t_read_file(pb, &len);
    cr_assert_not_null(bytes);
    char *cal = cp_t_path("calib");
    char *sample = cp_t_path("calib/s0");
    cr_assert_eq(mkdir(cal, 0755), 0);
    cr_assert_eq(mkdir(sample, 0755), 0);
    char *file = cp_t_path("calib/s0/input_0.pb");
    cr_assert(cp_t_write_file(file, bytes, len));
    char *om2 =
        cp_t_convert(cp_t_dir, "resnet_tiny", "r8cal", flag, cp_t_fmt("--calibration-data=%s", cal),
                     "--calibration_method=percentile", "--calibration_percentile=99.99", NULL);
    cr_assert_not_null(om2, "convert failed (see stderr)");
    info = info_of(om2);
    cfg = json_object_get(info, "config");
    cr_assert_str_eq(json_string_value(json_object_get(cfg, "calibration_data")), cal);
    cr_assert_str_eq(json_string_value(json_object_get(cfg, "calibration_method")), "percentile");
    cr_assert_eq(json_integer_value(json_object_get(cfg, "calibration_samples")), 1);
    convs_of(om2, &n_conv, &n_int8);
    cr_assert_eq(n_int8, n_conv);
    double loss2 = loss_of(onnx, om2, cp_t_fmt("--input=input=%s", pb));
    cr_assert_lt(loss2, 5.0, "int8 calibrated on the input loses %.3f%% on it", loss2);
    json_decref(info);
    free(bytes);
}

Test(int8, convert_refuses_nodes_the_model_lacks_and_stray_calibration_flags, .timeout = 300)
{
    char *model = cp_t_fmt("--model=%s", cp_t_example("resnet_tiny"));
    char *out = cp_t_fmt("--output=%s/x", cp_t_dir);
    char *ranges = write_text("ranges.txt", "input -1 1\n");
    char *rflag = cp_t_fmt("--quant_ranges=%s", ranges);
    struct cp_run r;

    /* beside a good entry (so calibration runs), and with given ranges */
    char *nodes = write_text("bad.txt", "OpType::Conv\nno/such/node\n");
    char *flag = cp_t_fmt("--int8_nodes=%s", nodes);
    cp_run_cli(&r, "convert", model, "--framework=5", out, flag, NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "no/such/node"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "convert", model, "--framework=5", out, flag, rflag, NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "no/such/node"), "%s", r.err);
    cp_run_release(&r);
    /* alone, with nothing left to calibrate: refused too, naming the list */
    char *only = write_text("only_bad.txt", "no/such/node\n");
    cp_run_cli(&r, "convert", model, "--framework=5", out, cp_t_fmt("--int8_nodes=%s", only), NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "only_bad.txt"), "%s", r.err);
    cp_run_release(&r);

    /* the calibration flags need --int8_nodes, and clash with --quant_ranges */
    cp_run_cli(&r, "convert", model, "--framework=5", out, "--calibration_method=entropy", NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "--int8_nodes"), "%s", r.err);
    cp_run_release(&r);
    char *good = cp_t_fmt("--int8_nodes=%s", write_text("good.txt", "OpType::Conv\n"));
    cp_run_cli(&r, "convert", model, "--framework=5", out, good, rflag, "--calibration_samples=3",
               NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "--quant_ranges"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "convert", model, "--framework=5", out, good, "--calibration_method=kl", NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "calibration_method"), "%s", r.err);
    cp_run_release(&r);
    /* a bad ranges file is refused naming its line */
    char *bad_ranges = write_text("bad_ranges.txt", "input -1 1\ninput 0 1\n");
    cp_run_cli(&r, "convert", model, "--framework=5", out, good,
               cp_t_fmt("--quant_ranges=%s", bad_ranges), NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "bad_ranges.txt"), "%s", r.err);
    cp_run_release(&r);
}

Test(int8, convert_uses_a_ranges_file_as_given, .timeout = 300)
{
    char *flag = cp_t_fmt("--int8_nodes=%s", write_text("int8.txt", "OpType::Conv\n"));
    char *calibrated = cp_t_convert(cp_t_dir, "resnet_tiny", "calibrated", flag, NULL);
    cr_assert_not_null(calibrated, "convert failed (see stderr)");
    json_t *info = info_of(calibrated);
    const char *table =
        json_string_value(json_object_get(json_object_get(info, "config"), "quant_ranges"));
    cr_assert_not_null(table);
    cr_assert_gt(cp_quant_ranges_count(table), 2);
    /* the table the calibration wrote, shuffled into a file by hand */
    struct cp_buf text;
    cp_buf_init(&text);
    cp_buf_printf(&text, "# measured by hand\r\n\r\n");
    const char *last = strrchr(table, '\n');
    cr_assert_not_null(last);
    cp_buf_printf(&text, "%s\r\n%.*s\n", last + 1, (int)(last - table), table);
    char *rflag = cp_t_fmt("--quant_ranges=%s", write_text("ranges.txt", text.data));
    cp_buf_release(&text);

    char *a = cp_t_convert(cp_t_dir, "resnet_tiny", "a", flag, rflag, NULL);
    char *b = cp_t_convert(cp_t_dir, "resnet_tiny", "b", flag, rflag, NULL);
    cr_assert(a && b, "convert failed (see stderr)");
    json_t *ia = info_of(a), *ib = info_of(b);
    const char *id_a = json_string_value(json_object_get(ia, "config_id"));
    cr_assert_not_null(id_a);
    cr_assert_str_eq(id_a, json_string_value(json_object_get(ib, "config_id")));
    cr_assert_str_eq(id_a, json_string_value(json_object_get(info, "config_id")),
                     "the same ranges, read or measured: the same model");
    json_t *cfg = json_object_get(ia, "config");
    cr_assert_str_eq(json_string_value(json_object_get(cfg, "quant_ranges")), table);
    cr_assert_eq(json_integer_value(json_object_get(cfg, "calibration_samples")), 0,
                 "nothing was calibrated");
    const char *cmd = json_string_value(json_object_get(ia, "command"));
    cr_assert_not_null(strstr(cmd, "--quant_ranges="), "%s", cmd);
    cr_assert_null(strstr(cmd, "--calibration"), "%s", cmd);

    /* other ranges, another model */
    char *narrow = cp_t_fmt("--quant_ranges=%s", write_text("narrow.txt", "input -0.5 0.5\n"));
    char *c = cp_t_convert(cp_t_dir, "resnet_tiny", "c", flag, narrow, NULL);
    cr_assert_not_null(c, "convert failed (see stderr)");
    json_t *ic = info_of(c);
    cr_assert_str_neq(id_a, json_string_value(json_object_get(ic, "config_id")));
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(ic, "config"), "quant_ranges")),
        "input -0.5 0.5");
    json_decref(ic);
    json_decref(ia);
    json_decref(ib);
    json_decref(info);
}
