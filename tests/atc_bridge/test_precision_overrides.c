/* ATC's --modify_mixlist and --customize_dtypes: the files' forms and what
 * they refuse (naming the file and the key or line), the canonical
 * overrides they become, and what a conversion computes with them: an op
 * type kept in fp32 under the mixed mode, single nodes in bf16 under
 * force_fp32. */
#include "atc_bridge/convert.h"
#include "support/cli.h"
#include "support/host.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(precision_overrides, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close,
          .timeout = 120);

/* Load `text` as the file of flag `flag`. */
static enum cp_status load(const char *flag, const char *text, struct cp_convert_config *c,
                           struct cp_diag *d)
{
    char *path = cp_t_path(strcmp(flag, "modify_mixlist") == 0 ? "mix.json" : "dtypes.txt");
    cr_assert(cp_t_write_file(path, text, strlen(text)));
    cp_convert_config_init(c);
    cp_diag_init(d);
    cr_assert_eq(cp_convert_config_set(c, flag, path, d), CP_OK, "%s", d->msg);
    return cp_convert_config_load_precision_overrides(c, d);
}

Test(precision_overrides, the_mix_list_keeps_or_lowers_op_types)
{
    struct cp_convert_config c;
    struct cp_diag d;
    cr_assert_eq(load("modify_mixlist",
                      "{\"black-list\": {\"to-add\": [\"Conv2D\"], \"to-remove\": []},"
                      " \"white-list\": {\"to-remove\": [\"MatMulV2\"], \"to-add\": [\"Gemm\"]},"
                      " \"gray-list\": {\"to-add\": [\"Add\"]}}",
                      &c, &d),
                 CP_OK, "%s", d.msg);
    cr_expect_str_eq(c.precision_overrides,
                     "OpType::Add=none\nOpType::Conv=fp32\nOpType::Gemm=bf16\nOpType::MatMul=fp32",
                     "Ascend's names read as ONNX's, sorted");
    cr_expect_str_eq(cp_precision_override(c.precision_overrides, "OpType::Conv"), "fp32");
    cr_expect_str_eq(cp_precision_override(c.precision_overrides, "OpType::Gemm"), "bf16");
    cr_expect_null(cp_precision_override(c.precision_overrides, "OpType::Add"),
                   "a gray-list change overrides nothing");
    cr_expect_null(cp_precision_override(c.precision_overrides, "OpType::Relu"));

    cr_expect_eq(load("modify_mixlist", "[1]", &c, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "mix.json: expected an object"), "%s", d.msg);
    cr_expect_eq(load("modify_mixlist", "{\"blacklist\": {}}", &c, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "unknown key 'blacklist'"), "%s", d.msg);
    cr_expect_eq(load("modify_mixlist", "{\"black-list\": {\"add\": []}}", &c, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "unknown key 'add'"), "%s", d.msg);
    cr_expect_eq(load("modify_mixlist", "{\"black-list\": {\"to-add\": [1]}}", &c, &d),
                 CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "'black-list.to-add'[0] is not an op type"), "%s", d.msg);
    cr_expect_eq(load("modify_mixlist",
                      "{\"black-list\": {\"to-add\": [\"Conv\"]}, \"white-list\": {\"to-add\": "
                      "[\"Conv\"]}}",
                      &c, &d),
                 CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "given both fp32 and bf16"), "%s", d.msg);
    cr_expect_str_eq(c.precision_overrides, "", "a refused file leaves nothing behind");
    cr_expect_eq(load("modify_mixlist", "{\"black-list\": ", &c, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "line 1"), "%s", d.msg);
}

Test(precision_overrides, the_dtype_lines_name_nodes_and_types)
{
    struct cp_convert_config c;
    struct cp_diag d;
    cr_assert_eq(load("customize_dtypes",
                      "# ATC's form\r\n"
                      "Opname::/a/Conv:InputDtype:bfloat16,bfloat16,float32;OutputDtype:float32\n"
                      "OpType::MatMulV2:InputDtype:float32,float32,OutputDtype:float32\n",
                      &c, &d),
                 CP_OK, "%s", d.msg);
    cr_expect_str_eq(c.precision_overrides, "/a/Conv=bf16\nOpType::MatMul=fp32");
    cr_expect_eq(
        load("customize_dtypes", "Opname::a:InputDtype:float16;OutputDtype:float32\n", &c, &d),
        CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "dtypes.txt:1: InputDtype 'float16'"), "%s", d.msg);
    cr_expect_eq(
        load("customize_dtypes", "\nOpname::a:InputDtype:int8;OutputDtype:float32\n", &c, &d),
        CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "dtypes.txt:2:"), "%s", d.msg);
    cr_expect_not_null(strstr(d.msg, "--int8_nodes"), "%s", d.msg);
    cr_expect_eq(
        load("customize_dtypes", "Opname::a:InputDtype:bfloat16;OutputDtype:bfloat16\n", &c, &d),
        CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "OutputDtype 'bfloat16'"), "%s", d.msg);
    cr_expect_eq(load("customize_dtypes", "a:bf16\n", &c, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "expected 'Opname::NAME:InputDtype"), "%s", d.msg);
    cr_expect_str_eq(c.precision_overrides, "");
}

Test(precision_overrides, they_travel_in_the_config_and_the_id)
{
    struct cp_convert_config a, b;
    struct cp_diag d;
    cr_assert_eq(
        load("customize_dtypes", "Opname::x:InputDtype:bfloat16;OutputDtype:float32\n", &b, &d),
        CP_OK, "%s", d.msg);
    cp_convert_config_init(&a);
    char ia[17], ib[17];
    cp_convert_config_id(&a, ia);
    cp_convert_config_id(&b, ib);
    cr_expect_str_neq(ia, ib);
    struct cp_buf cmd, js;
    cp_buf_init(&cmd);
    cp_buf_init(&js);
    cp_convert_config_cmdline(&b, &cmd);
    cr_expect_not_null(strstr(cmd.data, "--customize_dtypes="), "%s", cmd.data);
    cp_convert_config_json(&b, &js);
    struct cp_convert_config back;
    cr_assert_eq(cp_convert_config_from_json(&back, js.data, &d), CP_OK, "%s", d.msg);
    cr_expect_str_eq(back.precision_overrides, "x=bf16");
    cp_buf_release(&cmd);
    cp_buf_release(&js);
    cr_expect_str_eq(cp_convert_flag_pass("customize_dtypes"), "PrecisionModePass");
    cr_expect_str_eq(cp_convert_flag_pass("modify_mixlist"), "PrecisionModePass");
}

/* precision_loss_pct of `cannprof compare A B --json`. */
static double loss_of(const char *a, const char *b)
{
    struct cp_run r;
    cp_run_cli(&r, "compare", a, b, "--json", "--threads", "1", NULL);
    json_t *j = json_loads(r.out ? r.out : "", 0, NULL);
    cr_assert_not_null(j, "compare printed no JSON: %s", r.err);
    double v = json_number_value(json_object_get(j, "precision_loss_pct"));
    json_decref(j);
    cp_run_release(&r);
    return v;
}

Test(precision_overrides, conversions_follow_them_and_refuse_what_atc_refuses)
{
    char cpu[256];
    if (!cp_t_host_has_bf16(cpu, sizeof cpu))
        cr_skip_test("this CPU (%s) has no bf16 arithmetic", cpu);
    const char *m = "transformer_encoder_op17";
    char *mix = cp_t_path("keep.json");
    const char *keep_all = "{\"black-list\": {\"to-add\": [\"MatMul\", \"Gemm\", \"Conv\"]}}";
    cr_assert(cp_t_write_file(mix, keep_all, strlen(keep_all)));
    char *fp32 = cp_t_convert(cp_t_dir, m, "fp32", NULL);
    char *kept = cp_t_convert(cp_t_dir, m, "kept", "--precision_mode=allow_mix_precision_bf16",
                              cp_t_fmt("--modify_mixlist=%s", mix), NULL);
    char *dtypes = cp_t_path("all.txt");
    const char *lower = "OpType::MatMul:InputDtype:bfloat16,bfloat16;OutputDtype:float32\n";
    cr_assert(cp_t_write_file(dtypes, lower, strlen(lower)));
    char *low = cp_t_convert(cp_t_dir, m, "low", cp_t_fmt("--customize_dtypes=%s", dtypes), NULL);
    cr_assert(fp32 && kept && low, "a conversion failed (see stderr)");
    cr_expect_eq(loss_of(fp32, kept), 0, "every compute op on the black list: fp32 throughout");
    cr_expect_gt(loss_of(fp32, low), 0, "MatMul in bf16 under force_fp32 changes the outputs");

    struct cp_run r;
    cp_run_cli(&r, "convert", cp_t_fmt("--model=%s", cp_t_example(m)), "--framework=5",
               cp_t_fmt("--output=%s/x", cp_t_dir), cp_t_fmt("--modify_mixlist=%s", mix), NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    cr_expect_not_null(strstr(r.err, "goes with a mixed precision mode"), "%s", r.err);
    cp_run_release(&r);
    const char *bad = "Opname::no/such:InputDtype:bfloat16;OutputDtype:float32\n";
    cr_assert(cp_t_write_file(dtypes, bad, strlen(bad)));
    cp_run_cli(&r, "convert", cp_t_fmt("--model=%s", cp_t_example(m)), "--framework=5",
               cp_t_fmt("--output=%s/x", cp_t_dir), cp_t_fmt("--customize_dtypes=%s", dtypes),
               NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    cr_expect_not_null(strstr(r.err, "no node named 'no/such'"), "%s", r.err);
    cp_run_release(&r);
}
