/* End to end on the example models: import (or convert and load), plan,
 * run on test_data_set_0 and match PyTorch's outputs within 1e-4 relative
 * L2 error, with reference kernels, with fast kernels, and with and
 * without buffer reuse. Each run prints its memory figures. */
#include "atc_bridge/convert.h"
#include "runner/runner.h"
#include "support/examples.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODELS_DIR CP_SOURCE_DIR "/examples/models/"
#define MAX_REL_L2 1e-4

static struct cp_runtime *runtime(void)
{
    struct cp_runtime_options o = {.threads = 2};
    struct cp_runtime *rt;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_runtime_create(&o, &rt, &d), CP_OK, "%s", d.msg);
    return rt;
}

static struct cp_model *import_model(struct cp_runtime *rt, const char *name)
{
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_ex_import(name, &g, NULL, &d), CP_OK, "%s", d.msg);
    struct cp_model *m;
    cr_assert_eq(cp_model_from_graph(rt, g, NULL, &m, &d), CP_OK, "%s", d.msg);
    return m;
}

static struct cp_model *convert_and_load(struct cp_runtime *rt, const char *name, const char *dir)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    snprintf(c.model, sizeof c.model, MODELS_DIR "%s.onnx", name);
    snprintf(c.output, sizeof c.output, "%s/%s", dir, name);
    struct cp_convert_result res;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert(&c, &res, &d), CP_OK, "%s", d.msg);
    struct cp_model *m;
    cr_assert_eq(cp_model_load(rt, res.om_path, &m, &d), CP_OK, "%s", d.msg);
    return m;
}

static size_t find_input(const struct cp_plan *p, const char *name, size_t fallback)
{
    for (size_t i = 0; i < cp_plan_n_inputs(p); i++)
        if (strcmp(cp_plan_input(p, i)->name, name) == 0)
            return i;
    return fallback;
}

static double rel_l2(const float *got, const float *want, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - (double)want[i];
        num += e * e;
        den += (double)want[i] * (double)want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Feed test_data_set_0's inputs, run, and compare every output. Returns
 * the largest relative L2 error. */
static double check_outputs(struct cp_plan *p, const char *name, const char *what)
{
    double worst = 0;
    char path[640];
    struct cp_diag d;
    cp_diag_init(&d);
    for (size_t i = 0;; i++) {
        snprintf(path, sizeof path, MODELS_DIR "%s/test_data_set_0/input_%zu.pb", name, i);
        if (access(path, F_OK) != 0)
            break;
        struct cp_host_tensor t;
        cr_assert_eq(cp_tensor_read_file(path, &t, &d), CP_OK, "%s", d.msg);
        size_t k = find_input(p, t.name, i);
        cr_assert_eq(cp_plan_set_input(p, k, &t, &d), CP_OK, "%s", d.msg);
        cp_host_tensor_release(&t);
    }
    cr_assert_eq(cp_plan_run(p, -1, &d), CP_OK, "%s: %s", what, d.msg);
    size_t n_out = 0;
    for (size_t i = 0;; i++, n_out++) {
        snprintf(path, sizeof path, MODELS_DIR "%s/test_data_set_0/output_%zu.pb", name, i);
        if (access(path, F_OK) != 0)
            break;
        struct cp_host_tensor want, got;
        cr_assert_eq(cp_tensor_read_file(path, &want, &d), CP_OK, "%s", d.msg);
        cr_assert_eq(cp_plan_get_output(p, i, &got, &d), CP_OK, "%s", d.msg);
        cr_assert_eq(got.dtype, CP_DTYPE_F32);
        cr_assert_eq(got.nbytes, want.nbytes, "%s: output %zu has %zu bytes, expected %zu", what, i,
                     got.nbytes, want.nbytes);
        double err = rel_l2(got.data, want.data, got.nbytes / sizeof(float));
        if (err > worst)
            worst = err;
        cr_expect_leq(err, MAX_REL_L2, "%s: output %zu ('%s') has relative L2 error %.3g", what, i,
                      got.name, err);
        cp_host_tensor_release(&want);
        cp_host_tensor_release(&got);
    }
    cr_assert_eq(n_out, cp_plan_n_outputs(p));
    return worst;
}

static void run_example(struct cp_model *m, const char *name, bool reference_only, int buf_opt)
{
    struct cp_plan_options o = {.buffer_optimize = buf_opt, .reference_only = reference_only};
    struct cp_plan *p;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_create(m, &o, &p, &d), CP_OK, "%s", d.msg);
    const char *mode = buf_opt < 0 ? "(model's)" : cp_buffer_opt_name((enum cp_buffer_opt)buf_opt);
    char what[160];
    snprintf(what, sizeof what, "%s (%s kernels, %s)", name, reference_only ? "reference" : "fast",
             mode);
    double err = check_outputs(p, name, what);
    struct cp_mem_report r;
    cp_plan_memory(p, &r);
    cr_assert_leq(r.peak_bytes, r.arena_bytes);
    fprintf(stderr,
            "memplan: %-26s %-9s %-12s kernels %3zu  weights %8llu  arena %9llu  peak %9llu  "
            "scratch %8llu  rel L2 %.2g\n",
            name, reference_only ? "reference" : "fast", mode, cp_plan_n_kernels(p),
            (unsigned long long)r.weight_bytes, (unsigned long long)r.arena_bytes,
            (unsigned long long)r.peak_bytes, (unsigned long long)r.scratch_bytes, err);
    cp_plan_free(p);
}

static void check_example(const char *name)
{
    struct cp_runtime *rt = runtime();
    struct cp_model *m = import_model(rt, name);
    run_example(m, name, true, CP_BUF_L2_OPTIMIZE);
    run_example(m, name, false, CP_BUF_L2_OPTIMIZE);
    run_example(m, name, false, CP_BUF_OFF_OPTIMIZE);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(examples, test_sd_unet_tiny_matches_pytorch)
{
    check_example("sd_unet_tiny");
}

Test(examples, test_resnet_tiny_matches_pytorch)
{
    check_example("resnet_tiny");
}

Test(examples, test_transformer_encoder_op14_matches_pytorch)
{
    check_example("transformer_encoder_op14");
}

Test(examples, test_transformer_encoder_op17_matches_pytorch)
{
    check_example("transformer_encoder_op17");
}

Test(examples, test_nhwc_roundtrip_matches_pytorch)
{
    check_example("nhwc_roundtrip");
}

Test(examples, test_launch_bound_tiny_matches_pytorch)
{
    check_example("launch_bound_tiny");
}

/* The poster service's models (examples/pipelines/poster): int64 token
 * ids in; three outputs, one of a single element. */
Test(examples, test_text_encoder_tiny_matches_pytorch)
{
    check_example("text_encoder_tiny");
}

Test(examples, test_vae_decoder_tiny_matches_pytorch)
{
    check_example("vae_decoder_tiny");
}

Test(examples, test_a_converted_om_loads_and_matches_pytorch)
{
    char *dir = cp_scratch_dir();
    struct cp_runtime *rt = runtime();
    struct cp_model *m = convert_and_load(rt, "sd_unet_tiny", dir);
    run_example(m, "sd_unet_tiny", false, -1);
    cp_model_free(m);
    cp_runtime_free(rt);
    cp_scratch_remove(dir);
    free(dir);
}

/* Converted, resnet_tiny's FusedConvs add their residual in place (the
 * memory planner gives the output the residual's buffer): the reference
 * and the fast kernels must both still match PyTorch. */
Test(examples, test_a_converted_resnet_matches_pytorch_with_residuals_in_place)
{
    char *dir = cp_scratch_dir();
    struct cp_runtime *rt = runtime();
    struct cp_model *m = convert_and_load(rt, "resnet_tiny", dir);
    run_example(m, "resnet_tiny", true, CP_BUF_L2_OPTIMIZE);
    run_example(m, "resnet_tiny", false, CP_BUF_L2_OPTIMIZE);
    run_example(m, "resnet_tiny", false, CP_BUF_OFF_OPTIMIZE);
    cp_model_free(m);
    cp_runtime_free(rt);
    cp_scratch_remove(dir);
    free(dir);
}
