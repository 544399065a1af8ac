/* The conversion passes through the cannprof binary: `convert --list-passes`,
 * fusion switch files (both forms, and every way they can be wrong: exit 2
 * naming the file), what the .om records (`info` and `info --json`), the
 * summary line, and byte-identical output with passes and a switch file. */
#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(cli_passes, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* convert examples/models/NAME.onnx to <scratch>/OUT.om with an optional
 * extra flag; returns the run (caller releases) and the .om path in *om. */
static void convert(struct cp_run *r, const char *name, const char *out, const char *extra,
                    char **om)
{
    char buf[1024];
    char *mflag = cp_t_fmt("--model=%s", cp_example_model(buf, sizeof buf, name));
    char *base = cp_t_fmt("%s/%s", cp_t_dir, out);
    char *oflag = cp_t_fmt("--output=%s", base);
    if (extra)
        cp_run_cli(r, "convert", mflag, "--framework=5", oflag, extra, NULL);
    else
        cp_run_cli(r, "convert", mflag, "--framework=5", oflag, NULL);
    cr_assert_eq(r->signal, 0, "convert died: %s", r->err);
    if (om)
        *om = cp_t_fmt("%s.om", base);
    free(mflag);
    free(base);
    free(oflag);
}

static json_t *info_json(const char *om)
{
    struct cp_run r;
    cp_run_cli(&r, "info", om, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_error_t err;
    json_t *o = json_loads(r.out, 0, &err);
    cr_assert(json_is_object(o), "%s: %s", err.text, r.out);
    cp_run_release(&r);
    return o;
}

static long long op_count(json_t *info, const char *op)
{
    return json_integer_value(
        json_object_get(json_object_get(json_object_get(info, "graph"), "ops"), op));
}

/* ---- --list-passes -------------------------------------------------------------------- */

static const char *const cleanup[] = {"ConstantFoldingPass",        "IdentityEliminationPass",
                                      "TransposeOptimizationPass",  "ConvBatchNormFusionPass",
                                      "ConvDeadTapEliminationPass", "PadFoldingPass",
                                      "DeadNodeEliminationPass"};

Test(cli_passes, list_passes_works_without_a_model_and_lists_name_group_and_description)
{
    struct cp_run r;
    cp_run_cli(&r, "convert", "--list-passes", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    for (size_t i = 0; i < 7; i++) {
        const char *line = strstr(r.out, cleanup[i]);
        cr_assert_not_null(line, "%s is not listed:\n%s", cleanup[i], r.out);
        const char *eol = strchr(line, '\n');
        char *l = strndup(line, (size_t)(eol - line));
        cr_assert_not_null(strstr(l, "GraphFusion"), "%s", l);
        cr_assert_not_null(strstr(l, " on "), "%s", l);
        cr_assert_gt(strlen(l), 60, "no description: %s", l);
        free(l);
    }
    /* In run order. */
    cr_assert_lt(strstr(r.out, "ConstantFoldingPass"), strstr(r.out, "DeadNodeEliminationPass"));
    cp_run_release(&r);
}

Test(cli_passes, list_passes_json_parses_and_shows_the_switch_file_state)
{
    char *sw = ct_switch_file("sw.cfg", "ConvBatchNormFusionPass:off\n");
    struct cp_run r;
    cp_run_cli(&r, "convert", "--list-passes", "--json", sw, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_error_t err;
    json_t *o = json_loads(r.out, 0, &err);
    cr_assert(json_is_object(o), "%s: %s", err.text, r.out);
    json_t *arr = json_object_get(o, "passes");
    cr_assert(json_is_array(arr));
    cr_assert_geq(json_array_size(arr), 5);
    size_t i;
    json_t *p;
    bool seen = false;
    json_array_foreach(arr, i, p)
    {
        const char *name = json_string_value(json_object_get(p, "name"));
        cr_assert_not_null(name);
        cr_assert_not_null(json_string_value(json_object_get(p, "group")));
        cr_assert_not_null(json_string_value(json_object_get(p, "family")));
        cr_assert_not_null(json_string_value(json_object_get(p, "description")));
        bool off = strcmp(name, "ConvBatchNormFusionPass") == 0;
        seen |= off;
        cr_assert_eq(json_is_true(json_object_get(p, "on")), !off, "%s", name);
    }
    cr_assert(seen);
    json_decref(o);
    cp_run_release(&r);
    free(sw);
}

/* ---- switch files and their errors ------------------------------------------------------------
 */

Test(cli_passes, missing_switch_file_exits_2_naming_it)
{
    struct cp_run r;
    char *flag = cp_t_fmt("--fusion_switch_file=%s/absent.json", cp_t_dir);
    convert(&r, "resnet_tiny", "r", flag, NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "absent.json"), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "cannprof convert: error:"), "%s", r.err);
    cp_run_release(&r);
    free(flag);
}

Test(cli_passes, unknown_pass_exits_2_listing_the_valid_names)
{
    char *sw = ct_switch_file(
        "sw.json", "{\"Switch\":{\"GraphFusion\":{\"ALL\":\"on\",\"FooPass\":\"off\"}}}");
    struct cp_run r;
    convert(&r, "resnet_tiny", "r", sw, NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "sw.json: Switch.GraphFusion.FooPass"), "%s", r.err);
    for (size_t i = 0; i < 7; i++)
        cr_assert_not_null(strstr(r.err, cleanup[i]), "%s not listed: %s", cleanup[i], r.err);
    char *om = cp_t_path("r.om");
    cr_assert(access(om, F_OK) != 0, "no .om may be written");
    free(om);
    cp_run_release(&r);
    free(sw);

    sw = ct_switch_file("sw.cfg", "# lines\nConstantFoldingPass:off\nFooPass:off\n");
    convert(&r, "resnet_tiny", "r", sw, NULL);
    cr_assert_eq(r.exit_code, 2);
    cr_assert_not_null(strstr(r.err, "sw.cfg:3: unknown pass 'FooPass'"), "%s", r.err);
    cp_run_release(&r);
    free(sw);
}

Test(cli_passes, malformed_json_switch_file_exits_2_with_line_and_column)
{
    char *sw = ct_switch_file("bad.json", "{\"Switch\":\n  {\"GraphFusion\": {\"ALL\": on}}}\n");
    struct cp_run r;
    convert(&r, "resnet_tiny", "r", sw, NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "bad.json:2:"), "%s", r.err);
    cp_run_release(&r);
    free(sw);
}

Test(cli_passes, pass_in_the_wrong_group_converts_with_a_warning)
{
    char *sw = ct_switch_file("sw.json",
                              "{\"Switch\":{\"UBFusion\":{\"ConvBatchNormFusionPass\":\"off\"}}}");
    struct cp_run r;
    char *om;
    convert(&r, "resnet_tiny", "r", sw, &om);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "ConvBatchNormFusionPass is a GraphFusion pass"), "%s", r.err);
    cp_run_release(&r);
    json_t *info = info_json(om);
    cr_assert_eq(op_count(info, "BatchNormalization"), 15, "the switch applied");
    json_decref(info);
    free(om);
    free(sw);
}

/* ---- what the .om records -------------------------------------------------------------------- */

Test(cli_passes, switches_change_what_runs_and_the_om_records_it)
{
    char *on = ct_convert_to("resnet_tiny", "on", NULL);
    char *sw =
        ct_switch_file("sw.json", "{\"Switch\":{\"GraphFusion\":{\"ConvBatchNormFusionPass\":"
                                  "\"off\"},\"UBFusion\":{\"ALL\":\"off\"}}}");
    char *off = ct_convert_to("resnet_tiny", "off", sw, NULL);

    json_t *a = info_json(on), *b = info_json(off);
    cr_assert_eq(op_count(a, "BatchNormalization"), 0, "BatchNorm folded by default");
    cr_assert_eq(op_count(b, "BatchNormalization"), 15, "switched off: BatchNorm stays");
    cr_assert_str_neq(json_string_value(json_object_get(a, "config_id")),
                      json_string_value(json_object_get(b, "config_id")));
    json_t *passes = json_object_get(b, "passes");
    cr_assert(json_is_array(passes), "info --json has no pass record");
    size_t i;
    json_t *p;
    bool found = false;
    json_array_foreach(passes, i, p)
    {
        const char *name = json_string_value(json_object_get(p, "name"));
        cr_assert_not_null(name);
        cr_assert(json_is_integer(json_object_get(p, "nodes_before")));
        cr_assert(json_is_integer(json_object_get(p, "nodes_after")));
        if (strcmp(name, "ConvBatchNormFusionPass") == 0) {
            found = true;
            cr_assert(json_is_false(json_object_get(p, "ran")));
        }
    }
    cr_assert(found);
    json_t *pa = json_object_get(a, "passes");
    json_array_foreach(pa, i, p)
    {
        if (strcmp(json_string_value(json_object_get(p, "name")), "ConvBatchNormFusionPass"))
            continue;
        cr_assert(json_is_true(json_object_get(p, "ran")));
        cr_assert(json_is_true(json_object_get(p, "changed")));
        cr_assert_eq(json_integer_value(json_object_get(p, "nodes_before")) -
                         json_integer_value(json_object_get(p, "nodes_after")),
                     15, "15 BatchNorms folded");
    }

    /* The switches are recorded: the .om describes itself even after the
     * file changes. */
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(b, "config"), "fusion_switches")),
        "ConvBatchNormFusionPass:off;ConvBiasActivationFusionPass:off;"
        "MatMulBiasActivationFusionPass:off");
    free(ct_switch_file("sw.json", "garbage"));
    json_t *b2 = info_json(off);
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(b2, "config"), "fusion_switches")),
        json_string_value(json_object_get(json_object_get(b, "config"), "fusion_switches")));
    json_decref(b2);
    json_decref(a);
    json_decref(b);
    free(on);
    free(off);
    free(sw);
}

Test(cli_passes, info_prints_the_pass_record_and_convert_counts_changing_passes)
{
    struct cp_run r;
    char *om;
    convert(&r, "resnet_tiny", "r", NULL, &om);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "passes changed the graph"), "%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "info", om, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    const char *p = strstr(r.out, "\npasses:");
    cr_assert_not_null(p, "%s", r.out);
    cr_assert_not_null(strstr(p, "changed the graph"), "%s", p);
    const char *bn = strstr(p, "ConvBatchNormFusionPass");
    cr_assert_not_null(bn, "%s", p);
    cr_assert_not_null(strstr(bn, "changed"), "%s", bn);
    cr_assert_not_null(strstr(bn, "53 -> 38 nodes"), "%s", bn);
    cr_assert_not_null(strstr(p, "DeadNodeEliminationPass (final)"), "%s", p);
    cp_run_release(&r);
    free(om);
}

/* ---- determinism -------------------------------------------------------------------------------
 */

static uint8_t *slurp(const char *path, size_t *len)
{
    uint8_t *data;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_read(path, &data, len, &d), CP_OK, "%s", d.msg);
    return data;
}

Test(cli_passes, convert_with_passes_and_a_switch_file_is_byte_identical)
{
    static const char *const models[] = {"sd_unet_tiny", "resnet_tiny", "transformer_encoder_op14"};
    char *sw = ct_switch_file("sw.cfg", "TransposeOptimizationPass:off\nGeluFusionPass:off\n");
    for (size_t m = 0; m < 3; m++) {
        char *om = ct_convert_to(models[m], "det", sw, NULL);
        size_t l1, l2;
        uint8_t *first = slurp(om, &l1);
        cr_assert_eq(unlink(om), 0);
        free(ct_convert_to(models[m], "det", sw, NULL));
        uint8_t *second = slurp(om, &l2);
        cr_assert_eq(l1, l2, "%s: sizes differ", models[m]);
        cr_assert_eq(memcmp(first, second, l1), 0, "%s: the two .om files differ", models[m]);
        free(first);
        free(second);
        free(om);
    }
    free(sw);
}
