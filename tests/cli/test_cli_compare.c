/* `cannprof compare` driven as a user would: identical models agree
 * exactly, an .onnx and its .om agree within tolerance, a model that
 * computes slightly differently fails a zero tolerance (exit 1), outputs or
 * inputs that do not match by name are bad input (exit 2), and --json is
 * valid JSON with every metric. The metrics themselves are pinned down on
 * hand-made tensors through the library (cp_tensor_compare). */
#include "core/core.h"
#include "runner/runner.h"
#include "support/cli.h"
#include "support/host.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(cli_compare, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

Test(cli_compare, identical_models_agree_exactly_and_exit_0)
{
    char *m = cp_t_example("resnet_tiny");
    struct cp_run r;
    cp_run_cli(&r, "compare", m, m, "--json", "--threads", "1", NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d; stderr: %s", r.exit_code, r.err);
    json_t *j = ct_json(r.out);
    json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
    cr_assert_not_null(o);
    cr_assert_str_eq(json_string_value(json_object_get(o, "name")), "logits");
    cr_assert_eq(ct_num(o, "max_abs_error"), 0);
    cr_assert_eq(ct_num(o, "mean_abs_error"), 0);
    cr_assert_eq(ct_num(o, "rel_l2_error"), 0);
    cr_assert_eq(ct_num(o, "cosine_similarity"), 1);
    cr_assert_eq(ct_num(j, "precision_loss_pct"), 0);
    cr_assert(json_is_true(json_object_get(j, "within_tolerance")));
    json_decref(j);
    cp_run_release(&r);
    free(m);
}

Test(cli_compare, onnx_and_its_om_agree_within_tolerance)
{
    char *m = cp_t_example("sd_unet_tiny");
    char *om = ct_convert_to("sd_unet_tiny", "sd", NULL);
    char *in0 = cp_t_fmt("sample=%s/examples/models/sd_unet_tiny/test_data_set_0/input_0.pb",
                         CP_SOURCE_DIR);
    char *in1 = cp_t_fmt("timestep=%s/examples/models/sd_unet_tiny/test_data_set_0/input_1.pb",
                         CP_SOURCE_DIR);
    char *in2 = cp_t_fmt("encoder_hidden_states=%s/examples/models/sd_unet_tiny/test_data_set_0/"
                         "input_2.pb",
                         CP_SOURCE_DIR);
    struct cp_run r;
    cp_run_cli(&r, "compare", m, om, "--input", in0, "--input", in1, "--input", in2, NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d; stdout: %s; stderr: %s", r.exit_code, r.out, r.err);
    cr_assert(strstr(r.out, "noise_pred"), "the table names the output: %s", r.out);
    cr_assert(strstr(r.out, "precision_loss"), "the table gives precision_loss: %s", r.out);
    cr_assert(strstr(r.out, "within tolerance"), "%s", r.out);
    cp_run_release(&r);
    free(m);
    free(om);
    free(in0);
    free(in1);
    free(in2);
}

/* op14 and op17 compute the same function in a different order (decomposed
 * vs single LayerNorm): close, but not bit-identical. */
Test(cli_compare, different_arithmetic_fails_zero_tolerance_with_exit_1)
{
    char *a = cp_t_example("transformer_encoder_op14");
    char *b = cp_t_example("transformer_encoder_op17");
    struct cp_run r;
    cp_run_cli(&r, "compare", a, b, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "default tolerance: exit %d; stderr: %s", r.exit_code, r.err);
    json_t *j = ct_json(r.out);
    double loss = ct_num(j, "precision_loss_pct");
    cr_assert(loss > 0 && loss < 1e-2, "precision_loss %g%%", loss);
    json_decref(j);
    cp_run_release(&r);

    cp_run_cli(&r, "compare", a, b, "--rtol", "0", "--atol", "0", "--json", NULL);
    cr_assert_eq(r.exit_code, 1, "zero tolerance: exit %d; stderr: %s", r.exit_code, r.err);
    j = ct_json(r.out);
    json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
    cr_assert(json_is_false(json_object_get(o, "within_tolerance")));
    cr_assert_gt(ct_num(o, "beyond_tolerance"), 0);
    cr_assert_gt(ct_num(o, "max_abs_error"), 0);
    cr_assert(json_is_object(json_object_get(o, "worst")), "names the worst element");
    cr_assert(json_is_false(json_object_get(j, "within_tolerance")));
    json_decref(j);
    cp_run_release(&r);

    cp_run_cli(&r, "compare", a, b, "--rtol", "0", "--atol", "0", NULL);
    cr_assert_eq(r.exit_code, 1);
    cr_assert(strstr(r.out, "BEYOND"), "the table says which output is beyond: %s", r.out);
    cp_run_release(&r);
    free(a);
    free(b);
}

Test(cli_compare, bf16_candidate_is_beyond_zero_tolerance_but_close)
{
    char cpu[256];
    if (!cp_t_host_has_bf16(cpu, sizeof cpu)) {
        /* the candidate cannot be made here: convert refuses, saying why
         * and what to use instead, and writes nothing */
        char *src = cp_t_example("transformer_encoder_op17");
        char *model = cp_t_fmt("--model=%s", src);
        char *out = cp_t_fmt("--output=%s/bf16", cp_t_dir);
        struct cp_run r;
        cp_run_cli(&r, "convert", model, "--framework=5", out,
                   "--precision_mode=allow_mix_precision_bf16", NULL);
        cr_assert_eq(r.exit_code, 2, "exit %d; stderr: %s", r.exit_code, r.err);
        cr_assert(cp_t_is_bf16_refusal(r.err, "allow_mix_precision_bf16"), "%s", r.err);
        char *om = cp_t_path("bf16.om");
        cr_assert_not(cp_path_exists(om), "a refused conversion left %s", om);
        cp_run_release(&r);
        free(om);
        free(out);
        free(model);
        free(src);
        cr_skip_test("this CPU (%s) has neither avx512_bf16 nor amx_bf16: no bf16 candidate to "
                     "compare; convert refuses the mode with exit code 2, as it should",
                     cpu);
    }
    char *m = cp_t_example("transformer_encoder_op17");
    char *om = ct_convert_to("transformer_encoder_op17", "bf16",
                             "--precision_mode=allow_mix_precision_bf16", NULL);
    struct cp_run r;
    cp_run_cli(&r, "compare", m, om, "--rtol", "0", "--atol", "0", "--json", NULL);
    cr_assert_eq(r.exit_code, 1, "exit %d; stdout: %s; stderr: %s", r.exit_code, r.out, r.err);
    json_t *j = ct_json(r.out);
    double loss = ct_num(j, "precision_loss_pct");
    cr_assert(loss > 0 && loss < 5, "bf16 precision_loss %g%%", loss);
    json_decref(j);
    cp_run_release(&r);
    free(m);
    free(om);
}

Test(cli_compare, outputs_not_matching_by_name_exit_2_naming_them)
{
    /* Same input (input, 1x3x64x64), different outputs (logits vs output). */
    char *a = cp_t_example("resnet_tiny");
    char *b = cp_t_example("nhwc_roundtrip");
    struct cp_run r;
    cp_run_cli(&r, "compare", a, b, NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d; stderr: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "'logits'") && strstr(r.err, "'output'"),
              "names the missing outputs: %s", r.err);
    cp_run_release(&r);
    free(a);
    free(b);
}

Test(cli_compare, inputs_not_matching_by_name_exit_2)
{
    char *a = cp_t_example("resnet_tiny");
    char *b = cp_t_example("transformer_encoder_op17");
    struct cp_run r;
    cp_run_cli(&r, "compare", a, b, NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d; stderr: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "'x'") || strstr(r.err, "'input'"), "names the input: %s", r.err);
    cp_run_release(&r);
    free(a);
    free(b);
}

Test(cli_compare, bad_usage_exits_2)
{
    char *a = cp_t_example("resnet_tiny");
    struct cp_run r;
    cp_run_cli(&r, "compare", a, NULL);
    cr_assert_eq(r.exit_code, 2);
    cp_run_release(&r);
    cp_run_cli(&r, "compare", a, a, "--rtol", "-1", NULL);
    cr_assert_eq(r.exit_code, 2);
    cr_assert(strstr(r.err, "--rtol"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "compare", a, a, "--input", "nope=/nonexistent.pb", NULL);
    cr_assert_eq(r.exit_code, 2);
    cr_assert(strstr(r.err, "nope"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "compare", "--help", NULL);
    cr_assert_eq(r.exit_code, 0);
    cr_assert(strstr(r.out, "precision_loss"), "%s", r.out);
    cp_run_release(&r);
    free(a);
}

/* ---- the metrics, on hand-made tensors ---------------------------------- */

static struct cp_host_tensor f32_tensor(const char *name, const float *v, int64_t n)
{
    struct cp_host_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.dtype = CP_DTYPE_F32;
    t.rank = 1;
    t.dims[0] = n;
    t.nbytes = (size_t)n * sizeof(float);
    t.data = malloc(t.nbytes);
    cr_assert_not_null(t.data);
    memcpy(t.data, v, t.nbytes);
    return t;
}

Test(cli_compare, metrics_follow_their_definitions)
{
    const float av[4] = {3, 0, -4, 0}, bv[4] = {3, 1, -4, 0};
    struct cp_host_tensor a = f32_tensor("y", av, 4), b = f32_tensor("y", bv, 4);
    struct cp_tensor_diff df;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_compare(&a, &b, 0, 0.5, &df, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(df.n, 4);
    cr_assert_float_eq(df.max_abs, 1.0, 1e-12);
    cr_assert_float_eq(df.mean_abs, 0.25, 1e-12);
    cr_assert_float_eq(df.rel_l2, 1.0 / 5.0, 1e-12); /* ||(0,1,0,0)|| / ||(3,0,-4,0)|| */
    cr_assert_float_eq(df.cosine, 25.0 / (5.0 * sqrt(26.0)), 1e-12);
    cr_assert_eq(df.n_beyond, 1);
    cr_assert_eq(df.worst_index, 1);
    cr_assert(!df.within);
    cr_assert_float_eq(cp_precision_loss(&df, 1), 20.0, 1e-9);
    /* Within atol + rtol|a|: |1 - 0| <= 1 + 0. */
    cr_assert_eq(cp_tensor_compare(&a, &b, 0, 1.0, &df, &d), CP_OK);
    cr_assert(df.within);
    /* Pooled over outputs: sqrt((1 + 0) / (25 + 25)). */
    struct cp_tensor_diff two[2];
    cr_assert_eq(cp_tensor_compare(&a, &b, 0, 0, &two[0], &d), CP_OK);
    cr_assert_eq(cp_tensor_compare(&a, &a, 0, 0, &two[1], &d), CP_OK);
    cr_assert_float_eq(cp_precision_loss(two, 2), 100.0 * sqrt(1.0 / 50.0), 1e-9);
    cp_host_tensor_release(&a);
    cp_host_tensor_release(&b);
}

Test(cli_compare, nonfinite_values_agree_only_with_themselves)
{
    const float av[3] = {NAN, INFINITY, 1}, bv[3] = {NAN, INFINITY, 1}, cv[3] = {1, INFINITY, 1};
    struct cp_host_tensor a = f32_tensor("y", av, 3), b = f32_tensor("y", bv, 3),
                          c = f32_tensor("y", cv, 3);
    struct cp_tensor_diff df;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_compare(&a, &b, 0, 0, &df, &d), CP_OK);
    cr_assert(df.within);
    cr_assert_eq(df.rel_l2, 0);
    cr_assert_eq(cp_tensor_compare(&a, &c, 1, 1, &df, &d), CP_OK);
    cr_assert(!df.within);
    cr_assert_eq(df.n_nonfinite_mismatch, 1);
    cr_assert(isinf(cp_precision_loss(&df, 1)));
    cp_host_tensor_release(&a);
    cp_host_tensor_release(&b);
    cp_host_tensor_release(&c);
}

Test(cli_compare, different_shapes_are_refused_naming_both)
{
    const float v[4] = {1, 2, 3, 4};
    struct cp_host_tensor a = f32_tensor("y", v, 4), b = f32_tensor("y", v, 3);
    struct cp_tensor_diff df;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_compare(&a, &b, 0, 0, &df, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'y'") && strstr(d.msg, "4") && strstr(d.msg, "3"), "%s", d.msg);
    cp_host_tensor_release(&a);
    cp_host_tensor_release(&b);
}
