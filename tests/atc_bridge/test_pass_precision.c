/* The precision passes (atc_bridge/passes/precision.c): --precision_mode
 * marks the ops whose arithmetic changes, refuses what the CPU cannot do
 * with a message naming the mode to use instead, and --op_select_implmode
 * picks exact or fast exp / erf and the GELU form. The bf16 modes keep the
 * example models within 1e-2 relative L2 of the fp32 reference.
 *
 * The passes are called through their table entries with a context built
 * by hand (so the CPU's bf16 / fp16 abilities can be set either way); the
 * end-to-end tests go through cp_convert and the CLI. */
#include "core/host.h"
#include "atc_bridge/convert.h"
#include "atc_bridge/passes/pass.h"
#include "runner/runner.h"
#include "support/run.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODELS_DIR CP_SOURCE_DIR "/examples/models/"

static const struct cp_pass *find_pass(const char *name)
{
    for (const struct cp_pass *p = cp_precision_passes; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    cr_assert_fail("no precision pass %s", name);
    return NULL;
}

struct outcome {
    enum cp_status st;
    bool changed;
    char msg[1024];
};

static struct outcome run_pass(struct cp_graph *g, const char *name,
                               const struct cp_convert_config *c, bool bf16, bool fp16)
{
    struct outcome o;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_pass_ctx ctx = {.g = g, .config = c, .d = &d, .has_bf16 = bf16, .has_fp16 = fp16};
    o.changed = false;
    o.st = find_pass(name)->run(&ctx, &o.changed);
    snprintf(o.msg, sizeof o.msg, "%s", d.msg);
    return o;
}

static struct cp_convert_config with_mode(enum cp_precision_mode m)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    c.precision_mode = m;
    return c;
}

static struct cp_convert_config with_impl(enum cp_implmode m)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    c.implmode = m;
    return c;
}

/* One node of every kind the passes care about, each on its own input. */
static struct cp_graph *zoo(void)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "img", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 6, 6));
    gb_input(g, "seq", CP_DTYPE_F32, 3, GB_DIMS(1, 8, 16));
    gb_init(g, "w", CP_DTYPE_F32, 4, GB_DIMS(4, 4, 3, 3), NULL);
    gb_init(g, "m", CP_DTYPE_F32, 2, GB_DIMS(16, 16), NULL);
    gb_init(g, "gm", CP_DTYPE_F32, 2, GB_DIMS(8, 16), NULL);
    gb_init(g, "ln_s", CP_DTYPE_F32, 1, GB_DIMS(16), NULL);
    gb_node(g, "conv", "Conv", GB_IN("img", "w"), GB_IN("c"));
    gb_node(g, "mm", "MatMul", GB_IN("seq", "m"), GB_IN("mm"));
    gb_node(g, "softmax", "Softmax", GB_IN("seq"), GB_IN("s"));
    gb_node(g, "ln", "LayerNormalization", GB_IN("seq", "ln_s"), GB_IN("l"));
    int32_t r = gb_node(g, "reduce", "ReduceMean", GB_IN("seq"), GB_IN("r"));
    cp_node_set_ints(g, r, "axes", GB_DIMS(-1), 1);
    gb_node(g, "erf", "Erf", GB_IN("seq"), GB_IN("e"));
    gb_node(g, "relu", "Relu", GB_IN("seq"), GB_IN("u"));
    int32_t in = cp_graph_find_tensor(g, "seq"), out, idx;
    const char *origin = "gelu";
    struct cp_diag d;
    cp_diag_init(&d);
    out = gb_tensor(g, "gl", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    cr_assert_eq(
        cp_graph_add_node(g, "gelu", "Gelu", CP_DOMAIN, &in, 1, &out, 1, &origin, 1, &idx, &d),
        CP_OK, "%s", d.msg);
    int32_t fin[2] = {in, cp_graph_find_tensor(g, "m")};
    out = gb_tensor(g, "fm", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    origin = "fmm";
    cr_assert_eq(cp_graph_add_node(g, "fmm", "FusedMatMul", CP_DOMAIN, fin, 2, &out, 1, &origin, 1,
                                   &idx, &d),
                 CP_OK, "%s", d.msg);
    cp_node_set_string(g, idx, "activation", "Gelu");
    gb_infer_ok(g);
    return g;
}

static const char *attr_of(struct cp_graph *g, const char *node, const char *attr)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (strcmp(n->name, node) == 0)
            return cp_node_attr_string(n, attr, NULL);
    }
    cr_assert_fail("no node %s", node);
    return NULL;
}

static void expect_attr(struct cp_graph *g, const char *node, const char *attr, const char *want)
{
    const char *got = attr_of(g, node, attr);
    if (!want)
        cr_assert_null(got, "%s.%s is '%s', expected none", node, attr, got);
    else
        cr_assert(got && strcmp(got, want) == 0, "%s.%s is '%s', expected '%s'", node, attr,
                  got ? got : "(none)", want);
}

/* ---- PrecisionModePass ------------------------------------------------------------------- */

Test(precision_pass, fp32_modes_leave_the_graph_alone)
{
    enum cp_precision_mode modes[] = {CP_PREC_FORCE_FP32, CP_PREC_MUST_KEEP_ORIGIN_DTYPE};
    for (size_t i = 0; i < 2; i++) {
        struct cp_graph *g = zoo();
        struct cp_convert_config c = with_mode(modes[i]);
        struct outcome o = run_pass(g, "PrecisionModePass", &c, true, false);
        cr_assert_eq(o.st, CP_OK, "%s", o.msg);
        cr_assert_not(o.changed, "%s changed the graph", cp_precision_mode_name(modes[i]));
        expect_attr(g, "conv", "compute_precision", NULL);
        expect_attr(g, "mm", "compute_precision", NULL);
        cp_graph_free(g);
    }
}

Test(precision_pass, allow_fp32_to_bf16_marks_conv_and_matmul_only)
{
    struct cp_graph *g = zoo();
    struct cp_convert_config c = with_mode(CP_PREC_ALLOW_FP32_TO_BF16);
    struct outcome o = run_pass(g, "PrecisionModePass", &c, true, false);
    cr_assert_eq(o.st, CP_OK, "%s", o.msg);
    cr_assert(o.changed);
    expect_attr(g, "conv", "compute_precision", "bf16");
    expect_attr(g, "mm", "compute_precision", "bf16");
    expect_attr(g, "fmm", "compute_precision", "bf16");
    expect_attr(g, "softmax", "compute_precision", NULL);
    expect_attr(g, "ln", "compute_precision", NULL);
    expect_attr(g, "relu", "compute_precision", NULL);
    /* a second run finds nothing to do */
    o = run_pass(g, "PrecisionModePass", &c, true, false);
    cr_assert_not(o.changed);
    cp_graph_free(g);
}

Test(precision_pass, mix_precision_bf16_keeps_softmax_norms_and_reductions_fp32)
{
    struct cp_graph *g = zoo();
    struct cp_convert_config c = with_mode(CP_PREC_ALLOW_MIX_PRECISION_BF16);
    struct outcome o = run_pass(g, "PrecisionModePass", &c, true, false);
    cr_assert_eq(o.st, CP_OK, "%s", o.msg);
    expect_attr(g, "conv", "compute_precision", "bf16");
    expect_attr(g, "mm", "compute_precision", "bf16");
    expect_attr(g, "fmm", "compute_precision", "bf16");
    expect_attr(g, "softmax", "compute_precision", "fp32");
    expect_attr(g, "ln", "compute_precision", "fp32");
    expect_attr(g, "reduce", "compute_precision", "fp32");
    expect_attr(g, "relu", "compute_precision", NULL);
    cp_graph_free(g);
}

Test(precision_pass, fp16_modes_are_refused_naming_the_bf16_mode)
{
    static const struct {
        enum cp_precision_mode mode;
        const char *instead;
    } cases[] = {
        {CP_PREC_FORCE_FP16, "allow_fp32_to_bf16"},
        {CP_PREC_ALLOW_FP32_TO_FP16, "allow_fp32_to_bf16"},
        {CP_PREC_CUBE_FP16IN_FP32OUT, "allow_fp32_to_bf16"},
        {CP_PREC_ALLOW_MIX_PRECISION, "allow_mix_precision_bf16"},
        {CP_PREC_ALLOW_MIX_PRECISION_FP16, "allow_mix_precision_bf16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct cp_graph *g = zoo();
        struct cp_convert_config c = with_mode(cases[i].mode);
        struct outcome o = run_pass(g, "PrecisionModePass", &c, true, false);
        const char *name = cp_precision_mode_name(cases[i].mode);
        cr_assert_eq(o.st, CP_ERR_UNSUPPORTED, "%s was accepted", name);
        char want[128];
        snprintf(want, sizeof want, "--precision_mode=%s needs fp16 arithmetic", name);
        cr_assert(strstr(o.msg, want), "message: %s", o.msg);
        snprintf(want, sizeof want, "use --precision_mode=%s", cases[i].instead);
        cr_assert(strstr(o.msg, want), "message: %s", o.msg);
        cr_assert_eq(cp_status_exit_code(o.st), 2);
        cp_graph_free(g);
    }
}

Test(precision_pass, bf16_modes_are_refused_without_bf16_arithmetic)
{
    struct cp_graph *g = zoo();
    struct cp_convert_config c = with_mode(CP_PREC_ALLOW_MIX_PRECISION_BF16);
    struct outcome o = run_pass(g, "PrecisionModePass", &c, false, false);
    cr_assert_eq(o.st, CP_ERR_UNSUPPORTED);
    cr_assert(strstr(o.msg, "needs bf16 arithmetic") && strstr(o.msg, "force_fp32"), "%s", o.msg);
    /* without bf16 either, an fp16 mode points at fp32 */
    c = with_mode(CP_PREC_FORCE_FP16);
    o = run_pass(g, "PrecisionModePass", &c, false, false);
    cr_assert(strstr(o.msg, "use --precision_mode=force_fp32"), "%s", o.msg);
    cp_graph_free(g);
}

Test(precision_pass, convert_refuses_an_fp16_mode_with_exit_code_2)
{
    struct cp_host h;
    cp_host_detect(&h);
    if (h.has_fp16)
        cr_skip_test("this CPU has avx512_fp16");
    char *dir = cp_scratch_dir();
    char out[1024];
    snprintf(out, sizeof out, "--output=%s/m", dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", "--framework=5", "--model=" MODELS_DIR "resnet_tiny.onnx", out,
               "--precision_mode=allow_mix_precision_fp16", NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "allow_mix_precision_fp16 needs fp16 arithmetic"), "%s", r.err);
    /* the mode it points at is one this CPU can run */
    cr_assert(strstr(r.err, h.has_bf16 ? "use --precision_mode=allow_mix_precision_bf16"
                                       : "use --precision_mode=force_fp32"),
              "%s", r.err);
    cp_run_release(&r);
    cp_scratch_remove(dir);
    free(dir);
}

/* ---- ImplModePass ------------------------------------------------------------------------ */

Test(precision_pass, high_performance_is_the_default_and_marks_fast)
{
    struct cp_graph *g = zoo();
    struct cp_convert_config c = with_impl(CP_IMPL_HIGH_PERFORMANCE);
    struct outcome o = run_pass(g, "ImplModePass", &c, true, false);
    cr_assert_eq(o.st, CP_OK, "%s", o.msg);
    expect_attr(g, "softmax", "impl", "fast");
    expect_attr(g, "erf", "impl", "fast");
    expect_attr(g, "gelu", "impl", "fast");
    expect_attr(g, "gelu", "approximate", NULL);
    expect_attr(g, "fmm", "activation", "Gelu");
    expect_attr(g, "relu", "impl", NULL);
    cp_graph_free(g);
}

Test(precision_pass, high_precision_marks_exact_and_keeps_erf_gelu)
{
    enum cp_implmode modes[] = {CP_IMPL_HIGH_PRECISION, CP_IMPL_HIGH_PRECISION_FOR_ALL};
    for (size_t i = 0; i < 2; i++) {
        struct cp_graph *g = zoo();
        struct cp_convert_config c = with_impl(modes[i]);
        struct outcome o = run_pass(g, "ImplModePass", &c, true, false);
        cr_assert_eq(o.st, CP_OK, "%s", o.msg);
        expect_attr(g, "softmax", "impl", "exact");
        expect_attr(g, "erf", "impl", "exact");
        expect_attr(g, "gelu", "impl", "exact");
        expect_attr(g, "gelu", "approximate", NULL);
        expect_attr(g, "fmm", "activation", "Gelu");
        cp_graph_free(g);
    }
}

Test(precision_pass, high_performance_for_all_switches_gelu_to_tanh)
{
    struct cp_graph *g = zoo();
    struct cp_convert_config c = with_impl(CP_IMPL_HIGH_PERFORMANCE_FOR_ALL);
    struct outcome o = run_pass(g, "ImplModePass", &c, true, false);
    cr_assert_eq(o.st, CP_OK, "%s", o.msg);
    expect_attr(g, "softmax", "impl", "fast");
    expect_attr(g, "gelu", "approximate", "tanh");
    expect_attr(g, "fmm", "activation", "GeluTanh");
    cp_graph_free(g);
}

Test(precision_pass, optypelist_for_implmode_limits_the_mode_to_the_listed_types)
{
    struct cp_graph *g = zoo();
    struct cp_convert_config c = with_impl(CP_IMPL_HIGH_PRECISION);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, "optypelist_for_implmode", "Gelu, SoftmaxV2, Gelu", &d),
                 CP_OK, "%s", d.msg);
    cr_expect_str_eq(c.optypelist_for_implmode, "Gelu,Softmax", "sorted, once, ONNX spelling");
    cr_assert_eq(cp_convert_config_set(&c, "optypelist_for_implmode", "Gelu", &d), CP_OK);
    struct outcome o = run_pass(g, "ImplModePass", &c, true, false);
    cr_assert_eq(o.st, CP_OK, "%s", o.msg);
    expect_attr(g, "gelu", "impl", "exact");
    expect_attr(g, "softmax", "impl", "fast");
    expect_attr(g, "erf", "impl", "fast");
    cp_graph_free(g);

    /* bad input: a type without a choice, and a _for_all mode (ATC refuses it) */
    cp_diag_init(&d);
    cr_expect_eq(cp_convert_config_set(&c, "optypelist_for_implmode", "Conv", &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "'Conv' has no implementation choice"), "%s", d.msg);
    struct cp_convert_config all = with_impl(CP_IMPL_HIGH_PRECISION_FOR_ALL);
    cr_assert_eq(cp_convert_config_set(&all, "optypelist_for_implmode", "Erf", &d), CP_OK);
    snprintf(all.model, sizeof all.model, "m.onnx");
    snprintf(all.output, sizeof all.output, "m");
    cp_diag_init(&d);
    cr_expect_eq(cp_convert_config_validate(&all, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "high_precision_for_all sets every op"), "%s", d.msg);
    struct cp_buf cmd;
    cp_buf_init(&cmd);
    cp_convert_config_cmdline(&c, &cmd);
    cr_expect_not_null(strstr(cmd.data, "--optypelist_for_implmode=Gelu"), "%s", cmd.data);
    cp_buf_release(&cmd);
    cr_expect_str_eq(cp_convert_flag_pass("optypelist_for_implmode"), "ImplModePass");
}

/* ---- end to end ----------------------------------------------------------------------------- */

/* Convert `name` with `c` and run it on test_data_set_0; the relative L2
 * error against PyTorch's output. OUT: *marked, the nodes marked bf16. */
static double convert_and_run(const char *name, struct cp_convert_config *c, const char *dir,
                              size_t *marked)
{
    snprintf(c->model, sizeof c->model, MODELS_DIR "%s.onnx", name);
    snprintf(c->output, sizeof c->output, "%s/%s_%s", dir, name,
             cp_precision_mode_name(c->precision_mode));
    struct cp_convert_result res;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert(c, &res, &d), CP_OK, "%s", d.msg);
    struct cp_runtime_options ro = {.threads = 2};
    struct cp_runtime *rt;
    cr_assert_eq(cp_runtime_create(&ro, &rt, &d), CP_OK, "%s", d.msg);
    struct cp_model *m;
    cr_assert_eq(cp_model_load(rt, res.om_path, &m, &d), CP_OK, "%s", d.msg);
    const struct cp_graph *g = cp_model_graph(m);
    *marked = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++)
        *marked +=
            strcmp(cp_node_attr_string(cp_graph_node(g, (int32_t)i), "compute_precision", ""),
                   "bf16") == 0;
    struct cp_plan *p;
    cr_assert_eq(cp_plan_create(m, NULL, &p, &d), CP_OK, "%s", d.msg);
    char path[640];
    for (size_t i = 0;; i++) {
        snprintf(path, sizeof path, MODELS_DIR "%s/test_data_set_0/input_%zu.pb", name, i);
        if (access(path, F_OK) != 0)
            break;
        struct cp_host_tensor t;
        cr_assert_eq(cp_tensor_read_file(path, &t, &d), CP_OK, "%s", d.msg);
        size_t k = i;
        for (size_t j = 0; j < cp_plan_n_inputs(p); j++)
            if (strcmp(cp_plan_input(p, j)->name, t.name) == 0)
                k = j;
        cr_assert_eq(cp_plan_set_input(p, k, &t, &d), CP_OK, "%s", d.msg);
        cp_host_tensor_release(&t);
    }
    cr_assert_eq(cp_plan_run(p, -1, &d), CP_OK, "%s", d.msg);
    double num = 0, den = 0;
    for (size_t i = 0; i < cp_plan_n_outputs(p); i++) {
        snprintf(path, sizeof path, MODELS_DIR "%s/test_data_set_0/output_%zu.pb", name, i);
        struct cp_host_tensor want, got;
        cr_assert_eq(cp_tensor_read_file(path, &want, &d), CP_OK, "%s", d.msg);
        cr_assert_eq(cp_plan_get_output(p, i, &got, &d), CP_OK, "%s", d.msg);
        const float *a = want.data, *b = got.data;
        for (size_t k = 0; k < want.nbytes / 4; k++) {
            num += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
            den += (double)a[k] * a[k];
        }
        cp_host_tensor_release(&want);
        cp_host_tensor_release(&got);
    }
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
    return sqrt(num / den);
}

static bool cpu_has_bf16(void)
{
    struct cp_pass_target t;
    cp_pass_target_detect(&t);
    return t.has_bf16;
}

Test(precision_pass, bf16_modes_stay_within_1e_2_on_the_examples, .timeout = 300)
{
    if (!cpu_has_bf16())
        cr_skip_test("this CPU has no bf16 arithmetic");
    char *dir = cp_scratch_dir();
    const char *models[] = {"resnet_tiny", "sd_unet_tiny", "transformer_encoder_op17"};
    enum cp_precision_mode modes[] = {CP_PREC_ALLOW_FP32_TO_BF16, CP_PREC_ALLOW_MIX_PRECISION_BF16};
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++)
        for (size_t k = 0; k < 2; k++) {
            struct cp_convert_config c;
            cp_convert_config_init(&c);
            c.precision_mode = modes[k];
            size_t marked;
            double err = convert_and_run(models[mi], &c, dir, &marked);
            cr_log_info("%s %s: %zu nodes in bf16, relative L2 %.3g", models[mi],
                        cp_precision_mode_name(modes[k]), marked, err);
            cr_expect_gt(marked, 0, "%s: nothing marked bf16", models[mi]);
            cr_expect_leq(err, 1e-2, "%s %s: relative L2 error %.3g", models[mi],
                          cp_precision_mode_name(modes[k]), err);
            struct cp_convert_config f;
            cp_convert_config_init(&f);
            double fp32 = convert_and_run(models[mi], &f, dir, &marked);
            cr_expect_eq(marked, 0);
            cr_expect_lt(fp32, err, "%s: bf16 should round more than fp32 (%.3g vs %.3g)",
                         models[mi], err, fp32);
        }
    cp_scratch_remove(dir);
    free(dir);
}

Test(precision_pass, exact_implementation_stays_within_1e_4, .timeout = 300)
{
    char *dir = cp_scratch_dir();
    const char *models[] = {"sd_unet_tiny", "transformer_encoder_op14"};
    enum cp_implmode modes[] = {CP_IMPL_HIGH_PRECISION, CP_IMPL_HIGH_PERFORMANCE,
                                CP_IMPL_HIGH_PERFORMANCE_FOR_ALL};
    for (size_t mi = 0; mi < 2; mi++)
        for (size_t k = 0; k < 3; k++) {
            struct cp_convert_config c;
            cp_convert_config_init(&c);
            c.implmode = modes[k];
            size_t marked;
            double err = convert_and_run(models[mi], &c, dir, &marked);
            cr_log_info("%s %s: relative L2 %.3g", models[mi], cp_implmode_name(modes[k]), err);
            /* tanh GELU is an approximation the user asked for */
            double tol = modes[k] == CP_IMPL_HIGH_PERFORMANCE_FOR_ALL ? 1e-2 : 1e-4;
            cr_expect_leq(err, tol, "%s %s: relative L2 error %.3g", models[mi],
                          cp_implmode_name(modes[k]), err);
        }
    cp_scratch_remove(dir);
    free(dir);
}
