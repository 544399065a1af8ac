/* Conversion passes keep the model's meaning: every example model, converted
 * with each registered pass switched off in turn (a fusion switch file
 * "Pass:off"), with every pass on and with every pass off ("ALL":"off" in
 * both groups), computes what the unconverted .onnx computes on its
 * test_data_set_0 inputs: within 1e-4 relative L2 error in fp32, within
 * 1e-2 with allow_fp32_to_bf16 and allow_mix_precision_bf16
 * (docs/precision.md: precision_loss 0.01% and 1%).
 *
 * The per-pass matrix runs on the small models; sd_unet_tiny, the largest,
 * runs with all passes on and all off. Everything goes through the library
 * (cp_convert into a scratch folder, cp_model_load, one plan, one run) on
 * one thread, so the whole matrix takes seconds. Each test collects every
 * failing combination before it asserts, so one run shows them all. The
 * bf16 tests need bf16 arithmetic (avx512_bf16 or amx_bf16); on a CPU
 * without it they check that the bf16 modes are refused, then skip. */
#include "atc_bridge/convert.h"
#include "support/cli.h"
#include "support/examples.h"
#include "support/host.h"
#include "support/run.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FP32_BOUND 1e-4
#define BF16_BOUND 1e-2

TestSuite(passes_meaning, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

static const char ALL_OFF[] = "{\"Switch\":{\"GraphFusion\":{\"ALL\":\"off\"},"
                              "\"UBFusion\":{\"ALL\":\"off\"}}}";

/* One model under test: its inputs and the unconverted model's outputs. */
struct subject {
    const char *name;
    struct cp_runtime *rt;
    struct cp_ex_io in, ref;
    struct cp_buf failures;
    size_t n_checked;
    double worst; /* largest error seen within bounds, for the log */
};

static void subject_open(struct subject *s, const char *name)
{
    memset(s, 0, sizeof *s);
    s->name = name;
    cp_buf_init(&s->failures);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_runtime_options ro = {.threads = 1};
    cr_assert_eq(cp_runtime_create(&ro, &s->rt, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_ex_read_inputs(name, &s->in, &d), CP_OK, "%s", d.msg);
    struct cp_model *m = NULL;
    cr_assert_eq(cp_ex_open_onnx(s->rt, name, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_ex_run(m, 0, &s->in, &s->ref, &d), CP_OK, "%s unconverted: %s", name, d.msg);
    cp_model_free(m);
}

static void subject_close(struct subject *s)
{
    cr_log_info("%s: %zu conversions checked, largest error within bounds %.3g", s->name,
                s->n_checked, s->worst);
    cr_assert_eq(s->failures.len, 0, "%s: %s", s->name, s->failures.data);
    cp_buf_release(&s->failures);
    cp_ex_io_release(&s->in);
    cp_ex_io_release(&s->ref);
    cp_runtime_free(s->rt);
}

/* Convert with a switch file holding `switches` (NULL: no file) in
 * `precision`, run, and compare with the unconverted model; a failure is
 * recorded under `label`. */
static void check_knobs(struct subject *s, const char *label, const char *switches,
                        const char *precision, const char *layout, double bound)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    snprintf(c.model, sizeof c.model, "%s/examples/models/%s.onnx", CP_SOURCE_DIR, s->name);
    snprintf(c.output, sizeof c.output, "%s/%s_%zu", cp_t_dir, s->name, s->n_checked);
    struct cp_diag d;
    cp_diag_init(&d);
    if (switches) {
        snprintf(c.fusion_switch_file, sizeof c.fusion_switch_file, "%s/switches_%zu.cfg", cp_t_dir,
                 s->n_checked);
        cr_assert_eq(cp_file_write_atomic(c.fusion_switch_file, switches, strlen(switches), &d),
                     CP_OK, "%s", d.msg);
    }
    if (precision)
        cr_assert_eq(cp_convert_config_set(&c, "precision_mode", precision, &d), CP_OK, "%s",
                     d.msg);
    if (layout)
        cr_assert_eq(cp_convert_config_set(&c, "layout_policy", layout, &d), CP_OK, "%s", d.msg);
    s->n_checked++;
    struct cp_convert_result res;
    struct cp_model *m = NULL;
    struct cp_ex_io out = {0};
    double rel = INFINITY;
    if (cp_convert(&c, &res, &d) != CP_OK || cp_model_load(s->rt, res.om_path, &m, &d) != CP_OK ||
        cp_ex_run(m, 0, &s->in, &out, &d) != CP_OK ||
        cp_ex_rel_l2(&s->ref, &out, &rel, &d) != CP_OK) {
        cp_buf_printf(&s->failures, "\n  %s%s%s: %s", label, precision ? ", " : "",
                      precision ? precision : "", d.msg);
    } else if (!(rel <= bound)) {
        cp_buf_printf(&s->failures, "\n  %s%s%s: relative L2 error %.3g > %g", label,
                      precision ? ", " : "", precision ? precision : "", rel, bound);
    } else if (rel > s->worst) {
        s->worst = rel;
    }
    cp_ex_io_release(&out);
    cp_model_free(m);
    if (c.fusion_switch_file[0])
        remove(c.fusion_switch_file);
    remove(res.om_path);
}

static void check(struct subject *s, const char *label, const char *switches, const char *precision,
                  double bound)
{
    check_knobs(s, label, switches, precision, NULL, bound);
}

/* Each pass off alone, all on, all off, in one precision mode. */
static void check_matrix(const char *name, const char *precision, double bound)
{
    struct subject s;
    subject_open(&s, name);
    check(&s, "all passes on", NULL, precision, bound);
    check(&s, "all passes off", ALL_OFF, precision, bound);
    struct cp_pass_desc p;
    for (size_t i = 0; cp_pass_describe(i, &p); i++) {
        char sw[256], label[300];
        snprintf(sw, sizeof sw, "%s:off\n", p.name);
        snprintf(label, sizeof label, "%s off", p.name);
        check(&s, label, sw, precision, bound);
    }
    subject_close(&s);
}

static void check_on_off(const char *name, const char *precision, double bound)
{
    struct subject s;
    subject_open(&s, name);
    check(&s, "all passes on", NULL, precision, bound);
    check(&s, "all passes off", ALL_OFF, precision, bound);
    subject_close(&s);
}

Test(passes_meaning, registry_lists_the_passes)
{
    struct cp_pass_desc p;
    size_t n = 0;
    for (; cp_pass_describe(n, &p); n++)
        cr_assert(p.name && p.group && p.description, "pass %zu is incomplete", n);
    cr_assert_eq(n, cp_pass_count());
    cr_assert_geq(n, 1);
}

/* ---- fp32: every pass ------------------------------------------------------ */

Test(passes_meaning, resnet_tiny_fp32_each_pass)
{
    check_matrix("resnet_tiny", NULL, FP32_BOUND);
}

Test(passes_meaning, transformer_encoder_op14_fp32_each_pass)
{
    check_matrix("transformer_encoder_op14", NULL, FP32_BOUND);
}

Test(passes_meaning, transformer_encoder_op17_fp32_each_pass)
{
    check_matrix("transformer_encoder_op17", NULL, FP32_BOUND);
}

Test(passes_meaning, nhwc_roundtrip_fp32_each_pass)
{
    check_matrix("nhwc_roundtrip", NULL, FP32_BOUND);
}

Test(passes_meaning, launch_bound_tiny_fp32_each_pass)
{
    check_matrix("launch_bound_tiny", NULL, FP32_BOUND);
}

Test(passes_meaning, sd_unet_tiny_fp32_all_on_all_off)
{
    check_on_off("sd_unet_tiny", NULL, FP32_BOUND);
}

/* ---- fp32: every layout policy, all passes on -------------------------- */

static void check_layouts(const char *name)
{
    struct subject s;
    subject_open(&s, name);
    static const char *const policies[] = {"nchw", "nhwc", "blocked"};
    for (size_t k = 0; k < 3; k++) {
        char label[64];
        snprintf(label, sizeof label, "layout_policy %s", policies[k]);
        check_knobs(&s, label, NULL, NULL, policies[k], FP32_BOUND);
    }
    subject_close(&s);
}

Test(passes_meaning, every_model_fp32_each_layout_policy)
{
    for (size_t i = 0; cp_ex_models[i]; i++)
        check_layouts(cp_ex_models[i]);
}

/* ---- bf16: every pass, both modes ------------------------------------------ */

/* On a CPU without bf16 arithmetic: both bf16 modes are refused for the
 * model with exit code 2 and the refusal's message. (With the precision
 * pass switched off, alone or by "ALL":"off", nothing is refused: the
 * switch file turns --precision_mode off with it.) */
static void expect_bf16_refused(const char *name)
{
    static const char *const modes[] = {"allow_fp32_to_bf16", "allow_mix_precision_bf16"};
    for (size_t k = 0; k < 2; k++) {
        struct cp_convert_config c;
        cp_convert_config_init(&c);
        snprintf(c.model, sizeof c.model, "%s/examples/models/%s.onnx", CP_SOURCE_DIR, name);
        snprintf(c.output, sizeof c.output, "%s/%s_refused", cp_t_dir, name);
        struct cp_diag d;
        cp_diag_init(&d);
        cr_assert_eq(cp_convert_config_set(&c, "precision_mode", modes[k], &d), CP_OK, "%s", d.msg);
        struct cp_convert_result res;
        enum cp_status st = cp_convert(&c, &res, &d);
        cr_assert_eq(st, CP_ERR_UNSUPPORTED, "%s %s: status %d: %s", name, modes[k], (int)st,
                     d.msg);
        cr_assert_eq(cp_status_exit_code(st), 2);
        cr_assert(cp_t_is_bf16_refusal(d.msg, modes[k]), "%s", d.msg);
    }
}

static void check_bf16(const char *name, bool each_pass)
{
    char cpu[256];
    if (!cp_t_host_has_bf16(cpu, sizeof cpu)) {
        expect_bf16_refused(name);
        cr_skip_test("this CPU (%s) has neither avx512_bf16 nor amx_bf16: %s's bf16 conversions "
                     "not checked against the 1e-2 bound; both modes are refused with exit "
                     "code 2, as they should be",
                     cpu, name);
    }
    static const char *const modes[] = {"allow_fp32_to_bf16", "allow_mix_precision_bf16"};
    for (size_t k = 0; k < 2; k++) {
        if (each_pass)
            check_matrix(name, modes[k], BF16_BOUND);
        else
            check_on_off(name, modes[k], BF16_BOUND);
    }
}

Test(passes_meaning, resnet_tiny_bf16_each_pass)
{
    check_bf16("resnet_tiny", true);
}

Test(passes_meaning, transformer_encoder_op14_bf16_each_pass)
{
    check_bf16("transformer_encoder_op14", true);
}

Test(passes_meaning, transformer_encoder_op17_bf16_each_pass)
{
    check_bf16("transformer_encoder_op17", true);
}

Test(passes_meaning, nhwc_roundtrip_bf16_each_pass)
{
    check_bf16("nhwc_roundtrip", true);
}

Test(passes_meaning, sd_unet_tiny_bf16_all_on_all_off)
{
    check_bf16("sd_unet_tiny", false);
}
