/* int8 calibration (tuner/calibrate.c): the range each method takes from
 * synthetic data (minmax the exact extent, percentile and entropy clipping
 * far outliers, entropy [0, T] or [-T, T]), which tensors of a source
 * graph it measures, and cp_tune_calibrate on the ResNet example: sample
 * folders of .npy and .pb files, one file a sample, a sample limit, seeded
 * random inputs with a warning, and the folders it refuses.
 *
 * (Named test_tune_calibrate: tests/rules/test_calibrate.c already makes
 * the test target `test_calibrate`.) */
#include "onnx/onnx.h"
#include "support/cli.h"
#include "tuner/tuner.h"
#include "tuner/tuner_internal.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

TestSuite(tune_calibrate, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- the range of one tensor ------------------------------------------------------ */

/* The range method m takes from v[0..n), fed in one call per pass as
 * calibration feeds a sample. */
static void range_of(const float *v, int64_t n, enum cp_calib_method m, double percentile,
                     double *lo, double *hi)
{
    struct cp_calib_acc *a = calloc(1, sizeof *a);
    cr_assert_not_null(a);
    cp_calib_acc_add(a, v, n, 0, m);
    if (m != CP_CALIB_MINMAX)
        cp_calib_acc_add(a, v, n, 1, m);
    cp_calib_range(a, m, percentile, lo, hi);
    free(a);
}

/* n values evenly spaced over [lo, hi], then `extra` values `at`. */
static float *spread(int64_t n, double lo, double hi, int64_t extra, float at)
{
    float *v = malloc((size_t)(n + extra) * sizeof *v);
    cr_assert_not_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(lo + (hi - lo) * (double)i / (double)(n - 1));
    for (int64_t i = 0; i < extra; i++)
        v[n + i] = at;
    return v;
}

Test(tune_calibrate, minmax_gives_the_exact_extent)
{
    const float v[] = {0.25f, -3.5f, 7.125f, 1.0f, 0.0f};
    double lo, hi;
    range_of(v, 5, CP_CALIB_MINMAX, 99.999, &lo, &hi);
    cr_assert_eq(lo, -3.5);
    cr_assert_eq(hi, 7.125);

    /* over several samples: the extent of all of them */
    struct cp_calib_acc *a = calloc(1, sizeof *a);
    cr_assert_not_null(a);
    const float s0[] = {1, 2}, s1[] = {-1, 5}, s2[] = {0.5f};
    cp_calib_acc_add(a, s0, 2, 0, CP_CALIB_MINMAX);
    cp_calib_acc_add(a, s1, 2, 0, CP_CALIB_MINMAX);
    cp_calib_acc_add(a, s2, 1, 0, CP_CALIB_MINMAX);
    cr_assert_eq(a->count, 5);
    cp_calib_range(a, CP_CALIB_MINMAX, 99.999, &lo, &hi);
    cr_assert_eq(lo, -1.0);
    cr_assert_eq(hi, 5.0);
    free(a);
}

Test(tune_calibrate, percentile_clips_far_outliers)
{
    const int64_t n = 100000;
    float *v = spread(n, -1, 1, 10, 1000.0f);
    double lo, hi;
    range_of(v, n + 10, CP_CALIB_MINMAX, 99.999, &lo, &hi);
    cr_assert_eq(hi, 1000.0, "minmax keeps the outliers");
    range_of(v, n + 10, CP_CALIB_PERCENTILE, 99.9, &lo, &hi);
    cr_assert(hi > 0.99 && hi < 1.5, "99.9%%: hi %g is near 1, not 1000", hi);
    cr_assert(lo >= -1.0 && lo < -0.99, "99.9%%: lo %g is near -1", lo);
    cr_assert_lt(lo, hi);
    /* the 100th percentile is the extent */
    range_of(v, n + 10, CP_CALIB_PERCENTILE, 100, &lo, &hi);
    cr_assert_float_eq(lo, -1.0, 1e-9);
    cr_assert_float_eq(hi, 1000.0, 1e-9);
    free(v);

    /* outliers on both sides: both tails clipped */
    v = spread(n, -1, 1, 10, -1000.0f);
    range_of(v, n + 10, CP_CALIB_PERCENTILE, 99.9, &lo, &hi);
    cr_assert(lo < -0.99 && lo > -1.5, "lo %g", lo);
    cr_assert(hi > 0.99 && hi <= 1.0 + 1e-6, "hi %g", hi);
    free(v);
}

/* n values of a standard normal distribution (a sum of 12 uniforms from a
 * fixed LCG; |x| when `folded`), then `extra` outliers at +-at (all +at
 * when folded). */
static float *normal(int64_t n, bool folded, int64_t extra, float at)
{
    float *v = malloc((size_t)(n + extra) * sizeof *v);
    cr_assert_not_null(v);
    uint64_t s = 1;
    for (int64_t i = 0; i < n; i++) {
        double u = -6;
        for (int k = 0; k < 12; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            u += (double)(s >> 11) / 9007199254740992.0;
        }
        v[i] = (float)(folded ? fabs(u) : u);
    }
    for (int64_t i = 0; i < extra; i++)
        v[n + i] = folded || i % 2 == 0 ? at : -at;
    return v;
}

Test(tune_calibrate, entropy_of_a_nonnegative_tensor_is_zero_based_and_clips_outliers)
{
    const int64_t n = 200000;
    float *v = normal(n, true, 10, 20.0f);
    double lo, hi;
    range_of(v, n + 10, CP_CALIB_MINMAX, 99.999, &lo, &hi);
    cr_assert_geq(lo, 0.0);
    cr_assert_eq(hi, 20.0);
    range_of(v, n + 10, CP_CALIB_ENTROPY, 99.999, &lo, &hi);
    cr_assert_eq(lo, 0.0, "a tensor without negative values gets [0, T]");
    cr_assert_lt(hi, 10.0, "T %g is well below the outliers at 20", hi);
    cr_assert_gt(hi, 1.0, "T %g still holds the body of the values", hi);
    free(v);
}

Test(tune_calibrate, entropy_of_a_signed_tensor_is_symmetric)
{
    const int64_t n = 200000;
    float *v = normal(n, false, 10, 20.0f);
    double lo, hi;
    range_of(v, n + 10, CP_CALIB_ENTROPY, 99.999, &lo, &hi);
    cr_assert_eq(lo, -hi);
    cr_assert_gt(hi, 1.0, "T %g still holds the body of the values", hi);
    cr_assert_lt(hi, 10.0, "T %g is well below the outliers at +-20", hi);
    free(v);
    /* skewed, but signed: still [-T, T] */
    v = spread(n, -0.1, 3, 0, 0);
    range_of(v, n, CP_CALIB_ENTROPY, 99.999, &lo, &hi);
    cr_assert_eq(lo, -hi);
    cr_assert(hi > 0.1 && hi <= 3.0, "T %g", hi);
    free(v);
}

/* Where nothing needs clipping, or little, the threshold of least
 * divergence is close to the extent of the body. (Before 83cc6d1 the
 * quantized distribution held the clipped tail too, so at the first
 * candidate it equalled p and that smallest threshold always won: T 0.499
 * for values uniform over [0, 4].) */
Test(tune_calibrate, entropy_keeps_the_body_of_the_distribution)
{
    const int64_t n = 200000;
    float *v = spread(n, 0, 4, 0, 0);
    double lo, hi;
    range_of(v, n, CP_CALIB_ENTROPY, 99.999, &lo, &hi);
    cr_assert_eq(lo, 0.0);
    cr_assert(hi > 3.5 && hi <= 4.0, "uniform over [0, 4]: T %g", hi);
    free(v);
    v = spread(n, -1, 1, 0, 0);
    range_of(v, n, CP_CALIB_ENTROPY, 99.999, &lo, &hi);
    cr_assert(hi > 0.9 && hi <= 1.0, "uniform over [-1, 1]: T %g", hi);
    free(v);
    v = normal(n, false, 10, 20.0f);
    range_of(v, n + 10, CP_CALIB_ENTROPY, 99.999, &lo, &hi);
    cr_assert(hi > 3.0 && hi < 6.0, "a standard normal: T %g", hi);
    free(v);
}

Test(tune_calibrate, non_finite_values_are_ignored)
{
    const float v[] = {NAN, 1.0f, INFINITY, -2.0f, -INFINITY, 0.5f, NAN};
    struct cp_calib_acc *a = calloc(1, sizeof *a);
    cr_assert_not_null(a);
    cp_calib_acc_add(a, v, 7, 0, CP_CALIB_PERCENTILE);
    cr_assert_eq(a->count, 3);
    cp_calib_acc_add(a, v, 7, 1, CP_CALIB_PERCENTILE);
    int64_t in_hist = 0;
    for (int i = 0; i < CP_CALIB_BINS; i++)
        in_hist += a->hist[i];
    cr_assert_eq(in_hist, 3, "only the finite values are counted");
    free(a);

    const enum cp_calib_method ms[] = {CP_CALIB_MINMAX, CP_CALIB_PERCENTILE, CP_CALIB_ENTROPY};
    for (size_t k = 0; k < 3; k++) {
        double lo, hi;
        range_of(v, 7, ms[k], 99.0, &lo, &hi);
        cr_assert(isfinite(lo) && isfinite(hi), "%s: [%g, %g]", cp_calib_method_name(ms[k]), lo,
                  hi);
        cr_assert(lo >= -2.0 && hi <= 2.0 && lo < hi, "%s: [%g, %g]", cp_calib_method_name(ms[k]),
                  lo, hi);
    }
    double lo, hi;
    range_of(v, 7, CP_CALIB_MINMAX, 99.999, &lo, &hi);
    cr_assert_eq(lo, -2.0);
    cr_assert_eq(hi, 1.0);

    /* nothing finite at all: nothing counted */
    const float junk[] = {NAN, INFINITY};
    a = calloc(1, sizeof *a);
    cr_assert_not_null(a);
    cp_calib_acc_add(a, junk, 2, 0, CP_CALIB_MINMAX);
    cr_assert_eq(a->count, 0);
    free(a);
}

Test(tune_calibrate, a_constant_tensor_gives_a_point_range)
{
    float zeros[1000] = {0};
    const enum cp_calib_method ms[] = {CP_CALIB_MINMAX, CP_CALIB_PERCENTILE, CP_CALIB_ENTROPY};
    for (size_t k = 0; k < 3; k++) {
        double lo = 1, hi = 1;
        range_of(zeros, 1000, ms[k], 99.999, &lo, &hi);
        cr_assert_eq(lo, 0.0, "%s", cp_calib_method_name(ms[k]));
        cr_assert_eq(hi, 0.0, "%s", cp_calib_method_name(ms[k]));
    }
    float threes[10];
    for (int i = 0; i < 10; i++)
        threes[i] = 3.0f;
    double lo, hi;
    range_of(threes, 10, CP_CALIB_MINMAX, 99.999, &lo, &hi);
    cr_assert(lo == 3.0 && hi == 3.0, "[%g, %g]", lo, hi);
}

/* ---- the tensors calibration measures --------------------------------------------- */

static bool has_name(char **names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* x -> Pad -> xp -> Conv "conv" -> y -> BatchNormalization -> z -> MatMul "mm" -> out */
static struct cp_graph *pad_conv_bn(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 2, 4, 4));
    gb_ints(g, "pads", 8, GB_DIMS(0, 0, 1, 1, 0, 0, 1, 1));
    float w[4 * 2 * 3 * 3], ones[4] = {1, 1, 1, 1}, zero4[4] = {0}, m[4 * 5];
    for (int i = 0; i < 72; i++)
        w[i] = 0.01f * (float)i;
    for (int i = 0; i < 20; i++)
        m[i] = 0.1f;
    gb_init(g, "w", CP_DTYPE_F32, 4, GB_DIMS(4, 2, 3, 3), w);
    gb_floats(g, "s", 4, ones);
    gb_floats(g, "b", 4, zero4);
    gb_floats(g, "mean", 4, zero4);
    gb_floats(g, "var", 4, ones);
    gb_init(g, "m", CP_DTYPE_F32, 2, GB_DIMS(4, 5), m);
    gb_node(g, "pad", "Pad", GB_IN("x", "pads"), GB_IN("xp"));
    gb_node(g, "conv", "Conv", GB_IN("xp", "w"), GB_IN("y"));
    gb_node(g, "bn", "BatchNormalization", GB_IN("y", "s", "b", "mean", "var"), GB_IN("z"));
    gb_node(g, "mm", "MatMul", GB_IN("z", "m"), GB_IN("out"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "out")), CP_OK);
    gb_infer_ok(g);
    return g;
}

Test(tune_calibrate, the_tensors_are_the_inputs_and_outputs_of_listed_nodes)
{
    struct cp_graph *g = pad_conv_bn();
    struct cp_diag d;
    cp_diag_init(&d);
    char **names = NULL;
    size_t n = 0;
    cr_assert_eq(cp_calib_tensors(g, "OpType::Conv", &names, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 4);
    cr_assert(has_name(names, n, "xp"), "the Conv's input");
    cr_assert(has_name(names, n, "x"), "the input of the Pad that folds into it");
    cr_assert(has_name(names, n, "y"), "the Conv's output");
    cr_assert(has_name(names, n, "z"), "the output of the BatchNormalization that folds into it");
    free_names(names, n);

    cr_assert_eq(cp_calib_tensors(g, "mm", &names, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 2);
    cr_assert(has_name(names, n, "z") && has_name(names, n, "out"));
    free_names(names, n);

    cr_assert_eq(cp_calib_tensors(g, NULL, &names, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 5, "every candidate, each tensor once (z is read and written)");
    free_names(names, n);

    cr_assert_eq(cp_calib_tensors(g, "OpType::Gemm\nno/such", &names, &n, &d), CP_OK);
    cr_assert_eq(n, 0);
    cr_assert_null(names);
    cp_graph_free(g);
}

/* ---- calibrating the ResNet example ------------------------------------------------ */

#define R_NUMEL (1 * 3 * 64 * 64)

/* A .npy file (format 1.0: magic, version, little-endian header length, a
 * Python dict padded with blanks to a multiple of 64 bytes and ended by a
 * newline) of little-endian float32 values. */
static void write_npy(const char *path, const float *v, int rank, const int64_t *dims)
{
    char shape[128] = "";
    size_t at = 0;
    for (int k = 0; k < rank; k++)
        at += (size_t)snprintf(shape + at, sizeof shape - at, "%lld%s", (long long)dims[k],
                               rank == 1      ? ","
                               : k + 1 < rank ? ", "
                                              : "");
    char dict[256];
    int len = snprintf(dict, sizeof dict,
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", shape);
    size_t header = (size_t)len + 1;
    while ((10 + header) % 64)
        header++;
    int64_t numel = 1;
    for (int k = 0; k < rank; k++)
        numel *= dims[k];
    size_t total = 10 + header + (size_t)numel * 4;
    uint8_t *buf = malloc(total);
    cr_assert_not_null(buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(header & 0xff);
    buf[9] = (uint8_t)(header >> 8);
    memset(buf + 10, ' ', header);
    memcpy(buf + 10, dict, (size_t)len);
    buf[10 + header - 1] = '\n';
    for (int64_t i = 0; i < numel; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int b = 0; b < 4; b++)
            buf[10 + header + (size_t)i * 4 + (size_t)b] = (uint8_t)(u >> (8 * b));
    }
    cr_assert(cp_t_write_file(path, buf, total), "cannot write %s", path);
    free(buf);
}

/* <scratch>/REL as a .npy input of resnet_tiny, values spread over [lo, hi]. */
static void sample_npy(const char *rel, double lo, double hi)
{
    float *v = spread(R_NUMEL, lo, hi, 0, 0);
    char *path = cp_t_path(rel);
    write_npy(path, v, 4, GB_DIMS(1, 3, 64, 64));
    free(path);
    free(v);
}

static void make_dir(const char *rel)
{
    char *path = cp_t_path(rel);
    cr_assert_eq(mkdir(path, 0755), 0, "mkdir %s", path);
    free(path);
}

/* A copy of the example's test input at <scratch>/REL. */
static void sample_pb(const char *rel)
{
    char *src =
        cp_t_fmt("%s/examples/models/resnet_tiny/test_data_set_0/input_0.pb", CP_SOURCE_DIR);
    size_t len = 0;
    uint8_t *bytes = cp_t_read_file(src, &len);
    cr_assert_not_null(bytes);
    char *path = cp_t_path(rel);
    cr_assert(cp_t_write_file(path, bytes, len));
    free(bytes);
    free(path);
    free(src);
}

/* resnet_tiny with every Conv listed; calibration data <scratch>/DIR when
 * given. */
static void resnet_config(struct cp_convert_config *c, const char *dir)
{
    cp_convert_config_init(c);
    char *model = cp_t_example("resnet_tiny");
    snprintf(c->model, sizeof c->model, "%s", model);
    free(model);
    snprintf(c->int8_nodes_file, sizeof c->int8_nodes_file, "int8.txt");
    snprintf(c->int8_nodes, sizeof c->int8_nodes, "OpType::Conv");
    if (dir) {
        char *path = cp_t_path(dir);
        snprintf(c->calibration_data, sizeof c->calibration_data, "%s", path);
        free(path);
    }
}

/* A log that collects its messages in memory. */
struct captured {
    char *text;
    size_t len;
    FILE *f;
    struct cp_log log;
};

static void capture_open(struct captured *c)
{
    memset(c, 0, sizeof *c);
    c->f = open_memstream(&c->text, &c->len);
    cr_assert_not_null(c->f);
    c->log = (struct cp_log){CP_LOG_WARNING, c->f};
}

static const char *capture_text(struct captured *c)
{
    fflush(c->f);
    return c->text ? c->text : "";
}

static void capture_close(struct captured *c)
{
    fclose(c->f);
    free(c->text);
}

static enum cp_status calibrate(struct cp_convert_config *c, struct captured *log, uint64_t seed,
                                struct cp_diag *d)
{
    struct cp_calib_opts o = {.threads = 1, .seed = seed, .log = &log->log};
    cp_diag_init(d);
    return cp_tune_calibrate(c, &o, d);
}

/* Every Conv of the source model has a range for its input and its output
 * in `table`; returns how many Convs there are. */
static size_t assert_every_conv_has_ranges(const char *table)
{
    char *model = cp_t_example("resnet_tiny");
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_onnx_import(model, NULL, 0, &g, NULL, &d), CP_OK, "%s", d.msg);
    size_t convs = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead || !n->op_type || strcmp(n->op_type, "Conv") != 0)
            continue;
        convs++;
        double lo, hi;
        const char *x = cp_graph_tensor(g, n->inputs[0])->name;
        const char *y = cp_graph_tensor(g, n->outputs[0])->name;
        cr_assert(cp_quant_ranges_find(table, x, &lo, &hi), "no range for %s's input %s", n->name,
                  x);
        cr_assert_leq(lo, hi);
        cr_assert(cp_quant_ranges_find(table, y, &lo, &hi), "no range for %s's output %s", n->name,
                  y);
        cr_assert(isfinite(lo) && isfinite(hi) && lo <= hi, "%s: [%g, %g]", y, lo, hi);
    }
    cp_graph_free(g);
    free(model);
    cr_assert_gt(convs, 0);
    return convs;
}

Test(tune_calibrate, sample_folders_of_npy_files_give_every_conv_a_range)
{
    make_dir("calib");
    make_dir("calib/s0");
    make_dir("calib/s1");
    sample_npy("calib/s0/input.npy", -0.5, 0.5);
    sample_npy("calib/s1/input.npy", -2, 3);
    struct cp_convert_config c;
    resnet_config(&c, "calib");
    struct captured log;
    capture_open(&log);
    struct cp_diag d;
    cr_assert_eq(calibrate(&c, &log, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(c.calibration_samples, 2);
    double lo, hi;
    cr_assert(cp_quant_ranges_find(c.quant_ranges, "input", &lo, &hi), "%s", c.quant_ranges);
    cr_assert_eq(lo, -2.0, "minmax over both samples");
    cr_assert_eq(hi, 3.0);
    assert_every_conv_has_ranges(c.quant_ranges);
    cr_assert_str_eq(capture_text(&log), "", "real samples: no warning");

    /* the table is canonical: it parses back to itself */
    static char again[CP_QUANT_RANGES_MAX];
    cr_assert_eq(
        cp_quant_ranges_parse("t", c.quant_ranges, strlen(c.quant_ranges), again, sizeof again, &d),
        CP_OK, "%s", d.msg);
    cr_assert_str_eq(again, c.quant_ranges);

    /* at most one sample: the first in sorted order */
    resnet_config(&c, "calib");
    c.calibration_samples = 1;
    cr_assert_eq(calibrate(&c, &log, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(c.calibration_samples, 1);
    cr_assert(cp_quant_ranges_find(c.quant_ranges, "input", &lo, &hi));
    cr_assert_eq(lo, -0.5);
    cr_assert_eq(hi, 0.5);
    capture_close(&log);
}

Test(tune_calibrate, pb_files_by_input_name_or_alone_in_their_folder)
{
    make_dir("calib");
    make_dir("calib/a");
    make_dir("calib/b");
    sample_pb("calib/a/input_0.pb"); /* the only file: the input */
    sample_pb("calib/b/input.pb");   /* named for the input */
    sample_npy("calib/b/z_other.npy", -9, 9);
    struct cp_convert_config c;
    resnet_config(&c, "calib");
    struct captured log;
    capture_open(&log);
    struct cp_diag d;
    cr_assert_eq(calibrate(&c, &log, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(c.calibration_samples, 2);
    assert_every_conv_has_ranges(c.quant_ranges);

    /* the input's range is the test input's own extent (not z_other's) */
    char *pb = cp_t_fmt("%s/examples/models/resnet_tiny/test_data_set_0/input_0.pb", CP_SOURCE_DIR);
    struct cp_host_tensor t;
    cr_assert_eq(cp_tensor_read_file(pb, &t, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(t.dtype, CP_DTYPE_F32);
    const float *v = t.data;
    float mn = v[0], mx = v[0];
    for (int64_t i = 1; i < cp_host_tensor_numel(&t); i++) {
        mn = v[i] < mn ? v[i] : mn;
        mx = v[i] > mx ? v[i] : mx;
    }
    cp_host_tensor_release(&t);
    double lo, hi;
    cr_assert(cp_quant_ranges_find(c.quant_ranges, "input", &lo, &hi));
    cr_assert_float_eq(lo, (double)mn, 1e-6 * fabs(mn) + 1e-9);
    cr_assert_float_eq(hi, (double)mx, 1e-6 * fabs(mx) + 1e-9);
    free(pb);
    capture_close(&log);
}

Test(tune_calibrate, one_file_a_sample_for_a_model_of_one_input)
{
    make_dir("calib");
    sample_npy("calib/one.npy", -1, 0.25);
    sample_npy("calib/two.npy", -0.75, 1.5);
    sample_pb("calib/three.pb");
    struct cp_convert_config c;
    resnet_config(&c, "calib");
    struct captured log;
    capture_open(&log);
    struct cp_diag d;
    cr_assert_eq(calibrate(&c, &log, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(c.calibration_samples, 3);
    assert_every_conv_has_ranges(c.quant_ranges);
    capture_close(&log);
}

/* cp_tune_calibrate on <scratch>/DIR is refused with CP_ERR_USAGE naming
 * each of `want` (NULL-terminated), and leaves the ranges alone. */
static void refused(const char *dir, const char *const *want)
{
    struct cp_convert_config c;
    resnet_config(&c, dir);
    struct captured log;
    capture_open(&log);
    struct cp_diag d;
    cr_assert_eq(calibrate(&c, &log, 1, &d), CP_ERR_USAGE, "calibration on %s: %d (%s)", dir,
                 (int)d.status, d.msg);
    for (size_t i = 0; want[i]; i++)
        cr_assert_not_null(strstr(d.msg, want[i]), "'%s' not in: %s", want[i], d.msg);
    cr_assert_str_eq(c.quant_ranges, "");
    capture_close(&log);
}

Test(tune_calibrate, folders_that_hold_no_clear_samples_are_refused)
{
    make_dir("mixed");
    make_dir("mixed/s0");
    sample_npy("mixed/s0/input.npy", -1, 1);
    sample_npy("mixed/loose.npy", -1, 1);
    char *mixed = cp_t_path("mixed");
    refused("mixed", GB_IN(mixed, "mixes"));

    make_dir("empty");
    char *empty = cp_t_path("empty");
    refused("empty", GB_IN(empty, "empty"));

    /* s1 holds two files, neither named for the input */
    make_dir("lacking");
    make_dir("lacking/s0");
    make_dir("lacking/s1");
    sample_npy("lacking/s0/input.npy", -1, 1);
    sample_npy("lacking/s1/other.npy", -1, 1);
    sample_npy("lacking/s1/more.npy", -1, 1);
    char *s1 = cp_t_path("lacking/s1");
    refused("lacking", GB_IN(s1, "'input'"));

    /* an empty sample folder */
    make_dir("hollow");
    make_dir("hollow/s0");
    char *s0 = cp_t_path("hollow/s0");
    refused("hollow", GB_IN(s0, "'input'"));

    char *missing = cp_t_path("missing");
    refused("missing", GB_IN(missing));
    free(mixed);
    free(empty);
    free(s1);
    free(s0);
    free(missing);
}

Test(tune_calibrate, seeded_random_inputs_give_ranges_and_a_warning)
{
    struct cp_convert_config c;
    resnet_config(&c, NULL);
    c.calibration_samples = 3;
    struct captured log;
    capture_open(&log);
    struct cp_diag d;
    cr_assert_eq(calibrate(&c, &log, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(c.calibration_samples, 3);
    assert_every_conv_has_ranges(c.quant_ranges);
    double lo, hi;
    cr_assert(cp_quant_ranges_find(c.quant_ranges, "input", &lo, &hi));
    cr_assert(lo >= -1 && hi <= 1 && lo < hi, "random inputs are in [-1, 1): [%g, %g]", lo, hi);
    const char *said = capture_text(&log);
    cr_assert_not_null(strstr(said, "[WARNING]"), "%s", said);
    cr_assert_not_null(strstr(said, "3 seeded random inputs"), "%s", said);
    cr_assert_not_null(strstr(said, "--calibration_data"), "%s", said);

    /* seeded: the same seed, the same table; another seed, another */
    static char first[CP_QUANT_RANGES_MAX];
    snprintf(first, sizeof first, "%s", c.quant_ranges);
    resnet_config(&c, NULL);
    c.calibration_samples = 3;
    cr_assert_eq(calibrate(&c, &log, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(c.quant_ranges, first);
    resnet_config(&c, NULL);
    c.calibration_samples = 3;
    cr_assert_eq(calibrate(&c, &log, 2, &d), CP_OK, "%s", d.msg);
    cr_assert_str_neq(c.quant_ranges, first);

    /* no limit: 8 samples */
    resnet_config(&c, NULL);
    cr_assert_eq(calibrate(&c, &log, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(c.calibration_samples, 8);
    capture_close(&log);
}

Test(tune_calibrate, each_method_measures_the_model)
{
    struct cp_convert_config mm, pc, en;
    resnet_config(&mm, NULL);
    mm.calibration_samples = 2;
    pc = mm;
    pc.calibration_method = CP_CALIB_PERCENTILE;
    pc.calibration_percentile = 99.0;
    en = mm;
    en.calibration_method = CP_CALIB_ENTROPY;
    struct captured log;
    capture_open(&log);
    struct cp_diag d;
    cr_assert_eq(calibrate(&mm, &log, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(calibrate(&pc, &log, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(calibrate(&en, &log, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_quant_ranges_count(pc.quant_ranges), cp_quant_ranges_count(mm.quant_ranges));
    cr_assert_eq(cp_quant_ranges_count(en.quant_ranges), cp_quant_ranges_count(mm.quant_ranges));
    /* tensor by tensor: percentile lies within the extent, entropy is
     * [0, T] where the extent has no negative values, else [-T, T] */
    for (const char *p = mm.quant_ranges; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[1200];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        char *sp = strchr(line, ' ');
        cr_assert_not_null(sp);
        *sp = '\0';
        double lo, hi, plo, phi, elo, ehi;
        cr_assert(cp_quant_ranges_find(mm.quant_ranges, line, &lo, &hi));
        cr_assert(cp_quant_ranges_find(pc.quant_ranges, line, &plo, &phi), "%s", line);
        cr_assert(cp_quant_ranges_find(en.quant_ranges, line, &elo, &ehi), "%s", line);
        cr_assert(plo >= lo - 1e-6 * fabs(lo) && phi <= hi + 1e-6 * fabs(hi) && plo <= phi,
                  "%s: percentile [%g, %g] outside minmax [%g, %g]", line, plo, phi, lo, hi);
        if (lo >= 0)
            cr_assert_eq(elo, 0.0, "%s: [%g, %g] is never negative", line, lo, hi);
        else if (lo < hi)
            cr_assert_eq(elo, -ehi, "%s: entropy [%g, %g]", line, elo, ehi);
        p += len + (nl ? 1 : 0);
    }
    capture_close(&log);
}

Test(tune_calibrate, a_list_without_a_conv_matmul_or_gemm_of_the_model_is_refused)
{
    struct cp_convert_config c;
    resnet_config(&c, NULL);
    snprintf(c.int8_nodes, sizeof c.int8_nodes, "OpType::MatMul\nno/such/node");
    struct captured log;
    capture_open(&log);
    struct cp_diag d;
    cr_assert_eq(calibrate(&c, &log, 1, &d), CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "int8.txt"), "%s", d.msg);
    cr_assert_str_eq(c.quant_ranges, "");
    cr_assert_str_eq(capture_text(&log), "", "refused before any run");
    capture_close(&log);
}
