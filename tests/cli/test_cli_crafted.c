/* Crafted models: sizes taken from an untrusted file (window attributes of
 * 2^62, shapes whose element count or byte size does not fit in 64 bits, a
 * Range that never ends) are refused by `convert` and `run` with exit 2 and
 * a message naming the node and what is at fault, never by overflowing,
 * wrapping to a small size or crashing. */
#include "cli/cli_test.h"
#include "support/onnx_build.h"

/* The variable that overrides the plan memory limit (runner/runner.h). */
#define CP_T_MAX_PLAN_ENV "CANNPROF_MAX_PLAN_BYTES"

#define P62 ((int64_t)1 << 62)
#define P40 ((int64_t)1 << 40)

TestSuite(crafted, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* Write `m` to <scratch>/NAME.onnx, free it, return the path. */
static char *save(struct cp_t_onnx *m, const char *name)
{
    cr_assert_not_null(m);
    char *file = cp_t_fmt("%s.onnx", name);
    char *path = cp_t_path(file);
    free(file);
    cr_assert(cp_t_onnx_write(m, path), "cannot write %s (see stderr)", path);
    cp_t_onnx_free(m);
    return path;
}

/* `cannprof convert` of ONNX to <scratch>/out; asserts exit 2 and returns
 * stderr (caller frees). */
static char *convert_fails(const char *onnx)
{
    char *model = cp_t_fmt("--model=%s", onnx);
    char *base = cp_t_path("out");
    char *output = cp_t_fmt("--output=%s", base);
    struct cp_run r;
    cp_run_cli(&r, "convert", model, "--framework=5", output, NULL);
    char *err = ct_fails_2(&r);
    char *om = cp_t_fmt("%s.om", base);
    cr_assert_not(cp_path_exists(om), "a refused model still left %s", om);
    free(om);
    free(model);
    free(base);
    free(output);
    return err;
}

/* `cannprof run` of MODEL (an .onnx runs unconverted); asserts exit 2 and
 * returns stderr (caller frees). */
static char *run_fails(const char *model, const char *extra)
{
    struct cp_run r;
    if (extra)
        cp_run_cli(&r, "run", model, extra, NULL);
    else
        cp_run_cli(&r, "run", model, NULL);
    return ct_fails_2(&r);
}

/* x [1,1,4,4] f32 -> OP (attributes set by the caller) -> y. Conv gets a
 * 1x1x3x3 weight. */
static struct cp_t_onnx *window_model(const char *op, int *node)
{
    struct cp_t_onnx *m = cp_t_onnx_new(17);
    cr_assert_not_null(m);
    cp_t_onnx_input(m, "x", CP_T_F32, 4, (int64_t[]){1, 1, 4, 4});
    if (strcmp(op, "Conv") == 0 || strcmp(op, "ConvTranspose") == 0) {
        float w[9] = {0};
        cp_t_onnx_init_f32(m, "w", 4, (int64_t[]){1, 1, 3, 3}, w, 9);
        *node = cp_t_onnx_node(m, op, "win", "x,w", "y");
    } else {
        *node = cp_t_onnx_node(m, op, "win", "x", "y");
        cp_t_onnx_attr_ints(m, *node, "kernel_shape", (int64_t[]){3, 3}, 2);
    }
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    return m;
}

Test(crafted, test_convert_refuses_conv_pads_that_overflow)
{
    int n;
    struct cp_t_onnx *m = window_model("Conv", &n);
    cp_t_onnx_attr_ints(m, n, "pads", (int64_t[]){P62, P62, P62, P62}, 4);
    char *onnx = save(m, "conv_pads");
    char *err = convert_fails(onnx);
    ct_assert_mentions(err, "node 'win' (Conv)", "pads", "4611686018427387904", NULL);
    cr_assert_null(strstr(err, "-9223372036854775"), "a wrapped size in: %s", err);
    free(err);
    err = run_fails(onnx, NULL);
    ct_assert_mentions(err, "node 'win' (Conv)", "pads", NULL);
    free(err);
    free(onnx);
}

Test(crafted, test_convert_refuses_maxpool_pads_that_overflow)
{
    int n;
    struct cp_t_onnx *m = window_model("MaxPool", &n);
    cp_t_onnx_attr_ints(m, n, "pads", (int64_t[]){P62, P62, P62, P62}, 4);
    char *err = convert_fails(save(m, "pool_pads"));
    ct_assert_mentions(err, "node 'win' (MaxPool)", "pads", NULL);
    cr_assert_null(strstr(err, "-9223372036854775"), "a wrapped size in: %s", err);
    free(err);
}

/* One end padded far enough to fit in int64, the other not: the sum is
 * what overflows. */
Test(crafted, test_convert_refuses_pads_whose_sum_overflows)
{
    int n;
    struct cp_t_onnx *m = window_model("AveragePool", &n);
    cp_t_onnx_attr_ints(m, n, "pads", (int64_t[]){INT64_MAX - 2, 0, 8, 0}, 4);
    char *err = convert_fails(save(m, "pool_pads_sum"));
    ct_assert_mentions(err, "node 'win' (AveragePool)", "pads", NULL);
    free(err);
}

Test(crafted, test_convert_refuses_dilations_that_overflow)
{
    int n;
    struct cp_t_onnx *m = window_model("Conv", &n);
    cp_t_onnx_attr_ints(m, n, "dilations", (int64_t[]){P62, P62}, 2);
    char *err = convert_fails(save(m, "conv_dilations"));
    ct_assert_mentions(err, "node 'win' (Conv)", "dilations", NULL);
    free(err);
}

Test(crafted, test_convert_refuses_kernel_shape_that_overflows)
{
    int n;
    struct cp_t_onnx *m = window_model("MaxPool", &n);
    /* kernel_shape is set already; a second one would be ambiguous, so
     * make the dilated kernel overflow instead. */
    cp_t_onnx_attr_ints(m, n, "dilations", (int64_t[]){INT64_MAX, 1}, 2);
    char *err = convert_fails(save(m, "pool_kernel"));
    ct_assert_mentions(err, "node 'win' (MaxPool)", "dilations", NULL);
    free(err);
}

/* A stride of INT64_MAX is legal (one window per axis); rounding the
 * window count up (span + stride - 1) must not overflow into a wrong size.
 * Checked on the shape the .om records. */
static void expect_one_window(const char *name, const char *auto_pad, int ceil_mode)
{
    int n;
    struct cp_t_onnx *m = window_model("MaxPool", &n);
    if (auto_pad)
        cp_t_onnx_attr_string(m, n, "auto_pad", auto_pad);
    else
        cp_t_onnx_attr_ints(m, n, "pads", (int64_t[]){0, 0, 2, 0}, 4);
    cp_t_onnx_attr_int(m, n, "ceil_mode", ceil_mode);
    cp_t_onnx_attr_ints(m, n, "strides", (int64_t[]){INT64_MAX, 1}, 2);
    char *onnx = save(m, name);
    char *base = cp_t_path(name);
    char *om = cp_t_convert_file(onnx, base, NULL);
    cr_assert_not_null(om, "convert failed (see stderr)");
    struct cp_run r;
    cp_run_cli(&r, "info", om, NULL);
    cr_assert_eq(r.exit_code, 0, "info: %s", r.err);
    char *y = cp_t_section_value(r.out, "outputs:", "y");
    cr_assert_not_null(y, "no output y in: %s", r.out);
    /* SAME keeps ceil(4 / 1) = 4 along the other axis, the explicit
     * 3-wide window with no padding 2. */
    cr_assert_str_eq(cp_t_last_word(y), auto_pad ? "1x1x1x4" : "1x1x1x2", "info says: %s", r.out);
    free(y);
    cp_run_release(&r);
    free(om);
    free(base);
    free(onnx);
}

Test(crafted, test_huge_strides_in_ceil_mode_give_one_window)
{
    expect_one_window("pool_ceil", NULL, 1);
}

Test(crafted, test_huge_strides_with_same_padding_give_one_window)
{
    expect_one_window("pool_same", "SAME_UPPER", 0);
}

Test(crafted, test_convert_refuses_conv_transpose_strides_that_overflow)
{
    int n;
    struct cp_t_onnx *m = window_model("ConvTranspose", &n);
    cp_t_onnx_attr_ints(m, n, "strides", (int64_t[]){P62, 1}, 2);
    char *err = convert_fails(save(m, "convt_strides"));
    ct_assert_mentions(err, "node 'win' (ConvTranspose)", "strides", NULL);
    free(err);
}

/* x [4,4] reshaped to [2^40, 2^40]: 2^80 elements, whose byte count
 * wrapped to 0 in 64 bits. */
static struct cp_t_onnx *reshape_model(void)
{
    struct cp_t_onnx *m = cp_t_onnx_new(17);
    cr_assert_not_null(m);
    cp_t_onnx_input(m, "x", CP_T_F32, 2, (int64_t[]){4, 4});
    cp_t_onnx_init_i64(m, "shape", 1, (int64_t[]){2}, (int64_t[]){P40, P40}, 2);
    cp_t_onnx_node(m, "Reshape", "reshape", "x,shape", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    return m;
}

Test(crafted, test_convert_refuses_reshape_whose_size_overflows)
{
    char *onnx = save(reshape_model(), "reshape");
    char *err = convert_fails(onnx);
    ct_assert_mentions(err, "node 'reshape' (Reshape)", "1099511627776x1099511627776", NULL);
    free(err);
    err = run_fails(onnx, NULL);
    ct_assert_mentions(err, "node 'reshape' (Reshape)", NULL);
    free(err);
    free(onnx);
}

/* Range(0, 2^62, 1) of f32: 2^62 elements, 2^64 bytes. */
static struct cp_t_onnx *range_model(int64_t limit)
{
    struct cp_t_onnx *m = cp_t_onnx_new(17);
    cr_assert_not_null(m);
    float start = 0, lim = (float)limit, delta = 1;
    cp_t_onnx_init_f32(m, "start", 0, NULL, &start, 1);
    cp_t_onnx_init_f32(m, "limit", 0, NULL, &lim, 1);
    cp_t_onnx_init_f32(m, "delta", 0, NULL, &delta, 1);
    cp_t_onnx_node(m, "Range", "range", "start,limit,delta", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    return m;
}

Test(crafted, test_convert_refuses_range_whose_size_overflows)
{
    char *onnx = save(range_model(P62), "range");
    char *err = convert_fails(onnx);
    ct_assert_mentions(err, "node 'range' (Range)", "4611686018427387904", NULL);
    free(err);
    err = run_fails(onnx, NULL);
    ct_assert_mentions(err, "node 'range' (Range)", NULL);
    free(err);
    free(onnx);
}

/* Declared shapes are untrusted too: an input of 2^40 x 2^40. */
Test(crafted, test_run_refuses_input_whose_size_overflows)
{
    struct cp_t_onnx *m = cp_t_onnx_new(17);
    cr_assert_not_null(m);
    cp_t_onnx_input(m, "x", CP_T_F32, 2, (int64_t[]){P40, P40});
    cp_t_onnx_node(m, "Relu", "relu", "x", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    char *onnx = save(m, "big_input");
    char *err = convert_fails(onnx);
    ct_assert_mentions(err, "'x'", "1099511627776x1099511627776", NULL);
    free(err);
    err = run_fails(onnx, NULL);
    ct_assert_mentions(err, "'x'", NULL);
    free(err);
    free(onnx);
}

/* --input_shape is untrusted as well. */
Test(crafted, test_run_refuses_input_shape_flag_whose_size_overflows)
{
    struct cp_t_onnx *m = cp_t_onnx_new(17);
    cr_assert_not_null(m);
    cp_t_onnx_input(m, "x", CP_T_F32, 2, (int64_t[]){-1, 4});
    cp_t_onnx_node(m, "Relu", "relu", "x", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    char *onnx = save(m, "dyn_input");
    char *err = run_fails(onnx, "--input_shape=x:4611686018427387904,4");
    ct_assert_mentions(err, "'x'", NULL);
    free(err);
    free(onnx);
}

/* ---- the plan memory limit ------------------------------------------------ */

/* Range(0, 2^50, 1) of f32 is 4 PiB: its size fits in 64 bits, so it
 * converts, but no machine has the memory; the plan says so before it
 * allocates anything. */
Test(crafted, test_run_refuses_a_plan_larger_than_physical_memory)
{
    cr_assert_eq(unsetenv(CP_T_MAX_PLAN_ENV), 0);
    char *onnx = save(range_model((int64_t)1 << 50), "range50");
    char *err = run_fails(onnx, NULL);
    ct_assert_mentions(err, "4096.00 TiB", "node 'range' (Range)", "physical memory",
                       CP_T_MAX_PLAN_ENV, NULL);
    free(err);
    free(onnx);
}

/* x [1, 1024] f32 -> Relu -> y: 8 KiB of activations. */
static char *small_model(void)
{
    struct cp_t_onnx *m = cp_t_onnx_new(17);
    cr_assert_not_null(m);
    cp_t_onnx_input(m, "x", CP_T_F32, 2, (int64_t[]){1, 1024});
    cp_t_onnx_node(m, "Relu", "relu", "x", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    return save(m, "small");
}

Test(crafted, test_plan_memory_limit_is_set_by_the_environment)
{
    char *onnx = small_model();
    cr_assert_eq(setenv(CP_T_MAX_PLAN_ENV, "4K", 1), 0);
    char *err = run_fails(onnx, NULL);
    ct_assert_mentions(err, "8.00 KiB", "4.00 KiB set by " CP_T_MAX_PLAN_ENV, "'x'", NULL);
    free(err);
    const char *enough[] = {"8K", "1G", "none"};
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(setenv(CP_T_MAX_PLAN_ENV, enough[i], 1), 0);
        struct cp_run r;
        cp_run_cli(&r, "run", onnx, NULL);
        cr_assert_eq(r.exit_code, 0, "%s=%s: exit %d, %s", CP_T_MAX_PLAN_ENV, enough[i],
                     r.exit_code, r.err);
        cp_run_release(&r);
    }
    free(onnx);
}

Test(crafted, test_a_bad_plan_memory_limit_is_a_usage_error)
{
    char *onnx = small_model();
    const char *bad[] = {"lots", "-1", "0", "16X", "99999999999T"};
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(setenv(CP_T_MAX_PLAN_ENV, bad[i], 1), 0);
        char *err = run_fails(onnx, NULL);
        ct_assert_mentions(err, CP_T_MAX_PLAN_ENV, bad[i], "not a byte count", NULL);
        free(err);
    }
    free(onnx);
}
