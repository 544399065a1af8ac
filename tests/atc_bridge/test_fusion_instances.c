/* One pattern instance switched off ("Pass@NODE:off" in a fusion switch
 * file): the canonical text, what it refuses, that the whole-pass decision
 * ignores it, that a conversion leaves exactly that instance unfused with
 * the same outputs, and how a tuning delta turns it (switch:Pass@NODE). */
#include "atc_bridge/convert.h"
#include "atc_bridge/passes/pass.h"
#include "support/cli.h"
#include "support/run.h"
#include "tuner/tuner.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(fusion_instances, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 120);

static enum cp_status parse(const char *text, char *out, size_t cap, struct cp_diag *d)
{
    cp_diag_init(d);
    const struct cp_log quiet = {CP_LOG_ERROR, NULL};
    return cp_fusion_switches_parse("sw.txt", text, strlen(text), &quiet, out, cap, d);
}

Test(fusion_instances, instances_follow_the_passes_sorted_and_are_checked)
{
    char out[512];
    struct cp_diag d;
    cr_assert_eq(parse("GeluFusionPass@/b/erf:off\nConvBiasActivationFusionPass@/a:1:off\n"
                       "LayerNormFusionPass:off\nLayerNormFusionPass@/ln:off\n",
                       out, sizeof out, &d),
                 CP_OK, "%s", d.msg);
    cr_expect_str_eq(out,
                     "LayerNormFusionPass:off;ConvBiasActivationFusionPass@/a:1:off;"
                     "GeluFusionPass@/b/erf:off",
                     "passes first, then instances; an instance of a pass off as a whole is "
                     "dropped");
    cr_expect(cp_fusion_switch_instance_off(out, "ConvBiasActivationFusionPass", "/a:1"));
    cr_expect_not(cp_fusion_switch_instance_off(out, "ConvBiasActivationFusionPass", "/a"));
    cr_expect_not(cp_fusion_switch_instance_off(out, "GeluFusionPass", "/a:1"));
    cr_expect_not(cp_fusion_switches_turn_off(out, "GeluFusionPass"),
                  "an instance does not switch its pass off");
    bool off[64] = {false};
    cr_assert_lt(cp_pass_count(), 64);
    cr_assert_eq(cp_fusion_switches_decide(out, off, &d), CP_OK, "%s", d.msg);
    cr_expect(off[cp_pass_index("LayerNormFusionPass")]);
    cr_expect_not(off[cp_pass_index("GeluFusionPass")]);
    cr_expect_not(off[cp_pass_index("ConvBiasActivationFusionPass")]);

    cr_expect_eq(parse("QDQFoldPass@x:off\n", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "sw.txt:1: QDQFoldPass cannot be switched off for one"), "%s",
                       d.msg);
    cr_expect_eq(parse("GeluFusionPass@x:on\n", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "can only be switched off"), "%s", d.msg);
    cr_expect_eq(parse("GeluFusionPass@:off\n", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_eq(parse("NoSuchPass@x:off\n", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "unknown pass 'NoSuchPass'"), "%s", d.msg);
}

Test(fusion_instances, a_conversion_leaves_that_instance_unfused)
{
    char *all = cp_t_convert(cp_t_dir, "resnet_tiny", "all", NULL);
    char *sw =
        cp_t_switch_file(cp_t_dir, "one.txt", "ConvBiasActivationFusionPass@/conv1/Conv:off\n");
    char *one = cp_t_convert(cp_t_dir, "resnet_tiny", "one", sw, NULL);
    cr_assert(all && one, "a conversion failed (see stderr)");
    struct cp_run r;
    cp_run_cli(&r, "info", all, "--json", NULL);
    json_t *ja = cp_t_json(r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "info", one, "--json", NULL);
    json_t *jo = cp_t_json(r.out);
    cp_run_release(&r);
    cr_assert(ja && jo);
    json_t *oa = json_object_get(json_object_get(ja, "graph"), "ops"),
           *oo = json_object_get(json_object_get(jo, "graph"), "ops");
    cr_assert_not_null(oa, "info --json has an op histogram");
    int64_t fa = json_integer_value(json_object_get(oa, "FusedConv"));
    int64_t fo = json_integer_value(json_object_get(oo, "FusedConv"));
    int64_t ca = json_integer_value(json_object_get(oa, "Conv"));
    int64_t co = json_integer_value(json_object_get(oo, "Conv"));
    cr_expect_eq(fo, fa - 1, "one FusedConv fewer (%lld, %lld)", (long long)fo, (long long)fa);
    cr_expect_eq(co, ca + 1, "one Conv more");
    json_decref(ja);
    json_decref(jo);
    cp_run_cli(&r, "compare", all, one, "--json", "--threads", "1", NULL);
    cr_expect_eq(r.exit_code, 0, "the same function: %s", r.out);
    cp_run_release(&r);
}

Test(fusion_instances, a_delta_turns_an_instance_and_keeps_the_rest)
{
    struct cp_tune_point p;
    memset(&p, 0, sizeof p);
    cp_convert_config_init(&p.cfg);
    snprintf(p.cfg.fusion_switches, sizeof p.cfg.fusion_switches, "GeluFusionPass:off");
    struct cp_delta dl;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_delta_parse("switch:ConvBiasActivationFusionPass@/conv1/Conv=off", &dl, &d),
                 CP_OK, "%s", d.msg);
    struct cp_tune_point q;
    cr_assert_eq(cp_delta_apply(&p, &dl, &q, &d), CP_OK, "%s", d.msg);
    cr_expect_str_eq(q.cfg.fusion_switches,
                     "GeluFusionPass:off;ConvBiasActivationFusionPass@/conv1/Conv:off");
    struct cp_delta back;
    cp_delta_between(&p, &q, &back);
    struct cp_buf b;
    cp_buf_init(&b);
    cp_delta_format(&back, &b);
    cr_expect_str_eq(b.data, "switch:ConvBiasActivationFusionPass@/conv1/Conv=off");
    cp_buf_release(&b);
    /* a whole-pass switch keeps the instance; switching it on removes it */
    cr_assert_eq(cp_delta_parse("switch:GeluFusionPass=on", &dl, &d), CP_OK);
    struct cp_tune_point r;
    cr_assert_eq(cp_delta_apply(&q, &dl, &r, &d), CP_OK, "%s", d.msg);
    cr_expect_str_eq(r.cfg.fusion_switches, "ConvBiasActivationFusionPass@/conv1/Conv:off");
    cr_assert_eq(cp_delta_parse("switch:ConvBiasActivationFusionPass@/conv1/Conv=on", &dl, &d),
                 CP_OK);
    cr_assert_eq(cp_delta_apply(&r, &dl, &q, &d), CP_OK, "%s", d.msg);
    cr_expect_str_eq(q.cfg.fusion_switches, "");
    cr_assert_eq(cp_delta_parse("switch:NoSuchPass@x=off", &dl, &d), CP_OK);
    cr_expect_eq(cp_delta_apply(&r, &dl, &q, &d), CP_ERR_INVALID);
}
