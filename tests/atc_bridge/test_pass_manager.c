/* The pass manager (atc_bridge/passes/manager.c, switches.c): the registry
 * and its order, fusion switch files in both of ATC's forms and their
 * errors, the effective switch set in the config (JSON, id), the per-pass
 * record, switched-off passes, and the record's trip through the .om. */
#include "om/om.h"

#include "pass_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- registry ------------------------------------------------------------------------ */

Test(pass_manager, every_pass_has_a_unique_name_a_group_and_a_one_line_description)
{
    size_t n = cp_pass_count();
    cr_assert_geq(n, 5, "at least the cleanup passes");
    struct cp_pass_desc p, q;
    for (size_t i = 0; i < n; i++) {
        cr_assert(cp_pass_describe(i, &p));
        cr_assert(strcmp(p.group, "GraphFusion") == 0 || strcmp(p.group, "UBFusion") == 0,
                  "%s: group '%s'", p.name, p.group);
        cr_assert_neq(p.description[0], '\0', "%s has no description", p.name);
        cr_assert_null(strchr(p.description, '\n'), "%s: description is not one line", p.name);
        cr_assert_eq(cp_pass_index(p.name), (int)i, "%s is not found at its own index", p.name);
        cr_assert_not_null(cp_pass_lookup(p.name));
        for (size_t k = 0; k < i; k++) {
            cr_assert(cp_pass_describe(k, &q));
            cr_assert_str_neq(p.name, q.name, "two passes are called %s", p.name);
        }
    }
    cr_assert_not(cp_pass_describe(n, &p));
    cr_assert_eq(cp_pass_index("NoSuchPass"), -1);
    cr_assert_null(cp_pass_lookup("NoSuchPass"));
}

Test(pass_manager, families_run_in_their_fixed_order_starting_with_cleanup)
{
    static const char *const order[] = {"cleanup",   "batch",  "quant",    "fusion",
                                        "attention", "layout", "precision"};
    struct cp_pass_desc p;
    cr_assert(cp_pass_describe(0, &p));
    cr_assert_str_eq(p.name, "ConstantFoldingPass");
    int last = 0;
    for (size_t i = 0; cp_pass_describe(i, &p); i++) {
        int f = -1;
        for (int k = 0; k < 7; k++)
            if (strcmp(order[k], p.family) == 0)
                f = k;
        cr_assert_geq(f, 0, "%s: unknown family %s", p.name, p.family);
        cr_assert_geq(f, last, "%s (%s) runs after a %s pass", p.name, p.family, order[last]);
        last = f;
    }
    static const char *const cleanup[] = {"ConstantFoldingPass",        "IdentityEliminationPass",
                                          "TransposeOptimizationPass",  "ConvBatchNormFusionPass",
                                          "ConvDeadTapEliminationPass", "PadFoldingPass",
                                          "DeadNodeEliminationPass"};
    for (size_t i = 0; i < 7; i++) {
        cr_assert(cp_pass_describe(i, &p));
        cr_assert_str_eq(p.name, cleanup[i]);
        cr_assert_str_eq(p.group, "GraphFusion");
    }
}

/* ---- switch files ----------------------------------------------------------------------- */

/* Parse `text` as file "sw"; OUT: the canonical switches; returns the
 * status and leaves the message in msg[1024], warnings in warn[4096]. */
static enum cp_status parse(const char *text, char *switches, char *msg, char *warn)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *ws = open_memstream(&buf, &len);
    cr_assert_not_null(ws);
    struct cp_log log = {CP_LOG_WARNING, ws};
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st =
        cp_fusion_switches_parse("sw", text, strlen(text), &log, switches, 4096, &d);
    fclose(ws);
    if (msg)
        memcpy(msg, d.msg, sizeof d.msg);
    if (warn)
        snprintf(warn, 4096, "%s", buf ? buf : "");
    free(buf);
    return st;
}

static bool is_off(const char *switches, const char *name)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    snprintf(c.fusion_switches, sizeof c.fusion_switches, "%s", switches);
    return cp_convert_config_pass_is_off(&c, name);
}

Test(pass_manager, json_switch_file_all_off_with_one_pass_back_on)
{
    char sw[4096], msg[1024], warn[4096];
    /* The named entry comes first: it overrides ALL whatever the order. */
    cr_assert_eq(parse("{\"Switch\":{\"GraphFusion\":{\"ConstantFoldingPass\":\"on\","
                       "\"ALL\":\"off\"},\"UBFusion\":{}}}",
                       sw, msg, warn),
                 CP_OK, "%s", msg);
    cr_assert_not(is_off(sw, "ConstantFoldingPass"), "%s", sw);
    cr_assert(is_off(sw, "DeadNodeEliminationPass"), "%s", sw);
    cr_assert(is_off(sw, "ConvBatchNormFusionPass"), "%s", sw);
    struct cp_pass_desc p;
    for (size_t i = 0; cp_pass_describe(i, &p); i++)
        if (strcmp(p.group, "UBFusion") == 0)
            cr_assert_not(is_off(sw, p.name), "UBFusion pass %s is off", p.name);
    cr_assert_eq(warn[0], '\0', "unexpected warning: %s", warn);
}

Test(pass_manager, canonical_switches_are_sorted_and_name_only_passes_switched_off)
{
    char sw[4096], msg[1024];
    cr_assert_eq(parse("{\"Switch\":{\"GraphFusion\":{\"TransposeOptimizationPass\":\"off\","
                       "\"ConstantFoldingPass\":\"off\",\"IdentityEliminationPass\":\"on\"}}}",
                       sw, msg, NULL),
                 CP_OK, "%s", msg);
    cr_assert_str_eq(sw, "ConstantFoldingPass:off;TransposeOptimizationPass:off");
    char sw2[4096];
    cr_assert_eq(parse("# the same, as lines\n"
                       "TransposeOptimizationPass:off\n"
                       "\n"
                       "  ConstantFoldingPass : off   # trailing comment\n"
                       "IdentityEliminationPass:on\n",
                       sw2, msg, NULL),
                 CP_OK, "%s", msg);
    cr_assert_str_eq(sw2, sw, "both forms give the same switch set");
    cr_assert_eq(parse("", sw, msg, NULL), CP_OK);
    cr_assert_str_eq(sw, "");
}

Test(pass_manager, line_form_all_off_then_one_on)
{
    char sw[4096], msg[1024];
    cr_assert_eq(parse("ConvBatchNormFusionPass:on\nALL:off\n", sw, msg, NULL), CP_OK, "%s", msg);
    cr_assert_not(is_off(sw, "ConvBatchNormFusionPass"));
    struct cp_pass_desc p;
    for (size_t i = 0; cp_pass_describe(i, &p); i++)
        if (strcmp(p.name, "ConvBatchNormFusionPass") != 0 && cp_pass_family_is_fusion(p.family))
            cr_assert(is_off(sw, p.name), "%s should be off: %s", p.name, sw);
}

/* ALL covers fusion passes only: precision and layout are knobs of their
 * own (--precision_mode, --layout_policy), never switched off by ALL, in
 * either form; naming one still switches it. */
Test(pass_manager, all_never_switches_the_precision_or_layout_passes)
{
    char sw[4096], msg[1024];
    static const char *const files[] = {
        "ALL:off\n",
        "{\"Switch\":{\"GraphFusion\":{\"ALL\":\"off\"},\"UBFusion\":{\"ALL\":\"off\"}}}"};
    for (size_t f = 0; f < 2; f++) {
        cr_assert_eq(parse(files[f], sw, msg, NULL), CP_OK, "%s", msg);
        cr_assert(is_off(sw, "ConvBiasActivationFusionPass"), "%s", sw);
        cr_assert(is_off(sw, "FlashAttentionFusionPass"), "%s", sw);
        cr_assert(is_off(sw, "ConstantFoldingPass"), "%s", sw);
        static const char *const kept[] = {"PrecisionModePass", "ImplModePass",
                                           "LayoutTransformPass",
                                           "TransposeRoundTripEliminationPass"};
        for (size_t i = 0; i < 4; i++)
            cr_assert_not(is_off(sw, kept[i]), "file %zu: %s must stay on: %s", f, kept[i], sw);
    }
    cr_assert_eq(parse("ALL:off\nPrecisionModePass:off\n", sw, msg, NULL), CP_OK, "%s", msg);
    cr_assert(is_off(sw, "PrecisionModePass"), "%s", sw);
    cr_assert_not(is_off(sw, "LayoutTransformPass"), "%s", sw);
}

Test(pass_manager, pass_under_the_wrong_group_is_applied_with_a_warning)
{
    char sw[4096], msg[1024], warn[4096];
    cr_assert_eq(
        parse("{\"Switch\":{\"UBFusion\":{\"ConstantFoldingPass\":\"off\"}}}", sw, msg, warn),
        CP_OK, "%s", msg);
    cr_assert(is_off(sw, "ConstantFoldingPass"));
    cr_assert_not_null(strstr(warn, "ConstantFoldingPass is a GraphFusion pass"), "warning: %s",
                       warn);
    cr_assert_not_null(strstr(warn, "sw: Switch.UBFusion.ConstantFoldingPass"), "%s", warn);
}

Test(pass_manager, unknown_pass_is_a_usage_error_listing_the_valid_names)
{
    char sw[4096], msg[1024];
    cr_assert_eq(
        parse("{\"Switch\":{\"GraphFusion\":{\"ConstantFoldPass\":\"off\"}}}", sw, msg, NULL),
        CP_ERR_USAGE);
    cr_assert_not_null(strstr(msg, "sw: Switch.GraphFusion.ConstantFoldPass"), "%s", msg);
    cr_assert_not_null(strstr(msg, "unknown pass 'ConstantFoldPass'"), "%s", msg);
    cr_assert_not_null(strstr(msg, "did you mean 'ConstantFoldingPass'"), "%s", msg);
    struct cp_pass_desc p;
    for (size_t i = 0; cp_pass_describe(i, &p); i++)
        cr_assert_not_null(strstr(msg, p.name), "%s is not listed: %s", p.name, msg);

    cr_assert_eq(parse("ConstantFoldingPass:off\n# ok\n\nBogusPass:off\n", sw, msg, NULL),
                 CP_ERR_USAGE);
    cr_assert_not_null(strstr(msg, "sw:4: unknown pass 'BogusPass'"), "%s", msg);
}

Test(pass_manager, malformed_switch_files_name_file_line_and_column)
{
    char sw[4096], msg[1024];
    cr_assert_eq(parse("{\"Switch\":{\n\"GraphFusion\":{\"ALL\":\"on\",}}}", sw, msg, NULL),
                 CP_ERR_USAGE);
    cr_assert_not_null(strstr(msg, "sw:2:"), "no file:line: %s", msg);
    cr_assert_eq(parse("{\"Switch\":{\"GraphFusion\":{\"ALL\":\"maybe\"}}}", sw, msg, NULL),
                 CP_ERR_USAGE);
    cr_assert_not_null(strstr(msg, "Switch.GraphFusion.ALL"), "%s", msg);
    cr_assert_not_null(strstr(msg, "\"on\" or \"off\""), "%s", msg);
    cr_assert_eq(parse("{\"Switch\":{\"VectorFusion\":{}}}", sw, msg, NULL), CP_ERR_USAGE);
    cr_assert_not_null(strstr(msg, "GraphFusion or UBFusion"), "%s", msg);
    cr_assert_eq(parse("{\"GraphFusion\":{}}", sw, msg, NULL), CP_ERR_USAGE);
    cr_assert_not_null(strstr(msg, "\"Switch\""), "%s", msg);
    cr_assert_eq(
        parse("{\"Switch\":{\"GraphFusion\":{\"ALL\":\"on\",\"ALL\":\"off\"}}}", sw, msg, NULL),
        CP_ERR_USAGE, "duplicate keys are refused");
    cr_assert_eq(parse("ConstantFoldingPass=off\n", sw, msg, NULL), CP_ERR_USAGE);
    cr_assert_not_null(strstr(msg, "sw:1: expected PassName:on or PassName:off"), "%s", msg);
    cr_assert_eq(parse("ok:\n", sw, msg, NULL), CP_ERR_USAGE);
}

/* ---- the config --------------------------------------------------------------------------- */

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/cp_switch_XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

Test(pass_manager, config_records_the_effective_switches_and_its_id_follows_them)
{
    char *path = write_tmp("ConvBatchNormFusionPass:off\n");
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    snprintf(c.model, sizeof c.model, "m.onnx");
    snprintf(c.output, sizeof c.output, "m");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, "fusion_switch_file", path, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_convert_config_load_fusion_switches(&c, NULL, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(c.fusion_switches, "ConvBatchNormFusionPass:off");
    char id1[17], id2[17], id3[17];
    cp_convert_config_id(&c, id1);

    /* The file changes: the same path now means other switches, another id. */
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{\"Switch\":{\"GraphFusion\":{\"ConstantFoldingPass\":\"off\"}}}", f);
    fclose(f);
    cr_assert_eq(cp_convert_config_load_fusion_switches(&c, NULL, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(c.fusion_switches, "ConstantFoldingPass:off");
    cp_convert_config_id(&c, id2);
    cr_assert_str_neq(id1, id2);

    /* The switch set survives the JSON form stored in a .om. */
    struct cp_buf b;
    cp_buf_init(&b);
    cp_convert_config_json(&c, &b);
    struct cp_convert_config back;
    cr_assert_eq(cp_convert_config_from_json(&back, b.data, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(back.fusion_switches, "ConstantFoldingPass:off");
    cp_convert_config_id(&back, id3);
    cr_assert_str_eq(id3, id2);
    cp_buf_release(&b);

    /* A new path makes the old set stale until it is read. */
    cr_assert_eq(cp_convert_config_set(&c, "fusion_switch_file", "other.json", &d), CP_OK);
    cr_assert_str_eq(c.fusion_switches, "");
    unlink(path);
    free(path);
}

Test(pass_manager, missing_switch_file_is_a_usage_error_naming_it)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    snprintf(c.fusion_switch_file, sizeof c.fusion_switch_file, "/no/such/switches.json");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_load_fusion_switches(&c, NULL, &d), CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "/no/such/switches.json"), "%s", d.msg);
    cr_assert_eq(cp_status_exit_code(d.status), 2);
}

Test(pass_manager, switch_text_naming_an_unknown_pass_is_refused_by_the_manager)
{
    bool off[64];
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_leq(cp_pass_count(), 64);
    cr_assert_eq(cp_fusion_switches_decide("ConvBatchNormFusionPass:off;Nope:off", off, &d),
                 CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "unknown pass 'Nope'"), "%s", d.msg);
    cp_diag_init(&d);
    cr_assert_eq(cp_fusion_switches_decide("ConvBatchNormFusionPass:off", off, &d), CP_OK);
    cr_assert(off[cp_pass_index("ConvBatchNormFusionPass")]);
    cr_assert_not(off[cp_pass_index("ConstantFoldingPass")]);
}

/* ---- running ------------------------------------------------------------------------------- */

/* x -> Identity -> Relu -> Identity -> y, plus a dead Exp branch. */
static struct cp_graph *build_small(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_node(g, "id1", "Identity", GB_IN("x"), GB_IN("a"));
    gb_node(g, "relu", "Relu", GB_IN("a"), GB_IN("r"));
    gb_node(g, "id2", "Identity", GB_IN("r"), GB_IN("y"));
    gb_node(g, "exp", "Exp", GB_IN("r"), GB_IN("e"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    pt_prepare(g);
    return g;
}

static const struct cp_pass_record *record(const struct cp_pass_report *r, const char *name,
                                           bool final)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->records[i].name, name) == 0 && r->records[i].final == final)
            return &r->records[i];
    cr_assert_fail("no record for %s", name);
    return NULL;
}

Test(pass_manager, records_say_what_each_pass_did_in_order)
{
    struct cp_graph *g = build_small();
    struct cp_pass_report rep;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_passes_run(g, NULL, NULL, NULL, &rep, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(rep.n, cp_pass_count() + 1, "one record per pass plus the final sweep");
    struct cp_pass_desc p;
    for (size_t i = 0; i + 1 < rep.n; i++) {
        cp_pass_describe(i, &p);
        cr_assert_str_eq(rep.records[i].name, p.name);
        cr_assert(rep.records[i].ran);
        cr_assert_not(rep.records[i].final);
        if (i)
            cr_assert_eq(rep.records[i].nodes_before, rep.records[i - 1].nodes_after);
        if (!rep.records[i].changed)
            cr_assert_eq(rep.records[i].nodes_before, rep.records[i].nodes_after, "%s", p.name);
    }
    const struct cp_pass_record *id = record(&rep, "IdentityEliminationPass", false);
    cr_assert(id->changed);
    cr_assert_eq(id->nodes_before, 4);
    cr_assert_eq(id->nodes_after, 2, "both Identities go; the Relu writes y itself");
    const struct cp_pass_record *dne = record(&rep, "DeadNodeEliminationPass", false);
    cr_assert(dne->changed);
    cr_assert_eq(dne->nodes_after, 1);
    cr_assert(rep.records[rep.n - 1].final);
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);

    struct cp_buf b;
    cp_buf_init(&b);
    cp_pass_report_json(&rep, &b);
    json_error_t err;
    json_t *arr = json_loads(b.data, 0, &err);
    cr_assert(json_is_array(arr), "%s: %s", err.text, b.data);
    cr_assert_eq(json_array_size(arr), rep.n);
    json_t *first = json_array_get(arr, 0);
    cr_assert_str_eq(json_string_value(json_object_get(first, "name")), "ConstantFoldingPass");
    cr_assert(json_is_boolean(json_object_get(first, "ran")));
    cr_assert(json_is_integer(json_object_get(first, "nodes_before")));
    cr_assert(json_is_true(json_object_get(json_array_get(arr, rep.n - 1), "final")));
    cr_assert_not_null(strstr(b.data, "{\"name\":\"ConstantFoldingPass\",\"group\":"
                                      "\"GraphFusion\",\"ran\":true,\"changed\":false,"
                                      "\"nodes_before\":4,\"nodes_after\":4}"),
                       "key order: %s", b.data);
    json_decref(arr);
    cp_buf_release(&b);
    cp_pass_report_release(&rep);
    cp_graph_free(g);
}

Test(pass_manager, switched_off_passes_do_not_run_and_say_so)
{
    struct cp_graph *g = build_small();
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    snprintf(c.fusion_switches, sizeof c.fusion_switches,
             "DeadNodeEliminationPass:off;IdentityEliminationPass:off");
    struct cp_pass_report rep;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_passes_run(g, &c, NULL, NULL, &rep, &d), CP_OK, "%s", d.msg);
    const struct cp_pass_record *id = record(&rep, "IdentityEliminationPass", false);
    cr_assert_not(id->ran);
    cr_assert_not(id->changed);
    cr_assert_not(record(&rep, "DeadNodeEliminationPass", false)->ran);
    cr_assert_not(record(&rep, "DeadNodeEliminationPass", true)->ran,
                  "the final sweep follows the switch too");
    cr_assert_not_null(pt_node(g, "id1"));
    cr_assert_not_null(pt_node(g, "exp"));
    cr_assert_eq(cp_graph_n_live_nodes(g), 4);
    cp_pass_report_release(&rep);
    cp_graph_free(g);
}

Test(pass_manager, unknown_pass_in_the_config_fails_the_run)
{
    struct cp_graph *g = build_small();
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    snprintf(c.fusion_switches, sizeof c.fusion_switches, "GhostPass:off");
    struct cp_pass_report rep;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_passes_run(g, &c, NULL, NULL, &rep, &d), CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "GhostPass"), "%s", d.msg);
    cr_assert_eq(rep.n, 0);
    cr_assert_null(rep.records);
    cp_graph_free(g);
}

Test(pass_manager, run_one_refuses_an_unknown_name)
{
    struct cp_graph *g = build_small();
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_pass_run_one(g, "NoSuchPass", NULL, NULL, &d), CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "NoSuchPass"));
    cp_graph_free(g);
}

/* ---- the .om ------------------------------------------------------------------------------- */

static void meta_init(struct cp_om_meta *m)
{
    memset(m, 0, sizeof *m);
    m->format_version = CP_OM_FORMAT_VERSION;
    m->tool_version = (char *)CP_VERSION_STRING;
    m->source_path = (char *)"";
    m->source_hash = (char *)"";
    m->target = (char *)"cpu";
    cp_convert_config_init(&m->config);
}

Test(pass_manager, the_pass_record_and_switches_survive_the_om)
{
    struct cp_graph *g = build_small();
    struct cp_pass_report rep;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_passes_run(g, NULL, NULL, NULL, &rep, &d), CP_OK, "%s", d.msg);
    struct cp_buf pj;
    cp_buf_init(&pj);
    cp_pass_report_json(&rep, &pj);
    struct cp_om_meta m;
    meta_init(&m);
    snprintf(m.config.fusion_switches, sizeof m.config.fusion_switches, "GeluFusionPass:off");
    m.passes_json = pj.data;
    uint8_t *bytes, *bytes2;
    size_t len, len2;
    cr_assert_eq(cp_om_write_buffer(g, &m, &bytes, &len, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_om_write_buffer(g, &m, &bytes2, &len2, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(len, len2);
    cr_assert_eq(memcmp(bytes, bytes2, len), 0, "writing is deterministic");
    struct cp_graph *back;
    struct cp_om_meta mb;
    cr_assert_eq(cp_om_read_buffer(bytes, len, "t.om", &back, &mb, &d), CP_OK, "%s", d.msg);
    cr_assert_not_null(mb.passes_json);
    cr_assert_str_eq(mb.passes_json, pj.data);
    cr_assert_str_eq(mb.config.fusion_switches, "GeluFusionPass:off");
    cp_om_meta_release(&mb);
    cp_graph_free(back);

    /* Without a record the key is absent and reads back as NULL. */
    m.passes_json = NULL;
    free(bytes2);
    cr_assert_eq(cp_om_write_buffer(g, &m, &bytes2, &len2, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_om_read_buffer(bytes2, len2, "t.om", &back, &mb, &d), CP_OK, "%s", d.msg);
    cr_assert_null(mb.passes_json);
    cr_assert_null(strstr(mb.meta_json, "\"passes\""));
    cp_om_meta_release(&mb);
    cp_graph_free(back);

    /* A record that is not an array is refused when writing. */
    m.passes_json = (char *)"{\"x\":1}";
    uint8_t *bytes3 = NULL;
    size_t len3;
    cr_assert_neq(cp_om_write_buffer(g, &m, &bytes3, &len3, &d), CP_OK);
    cr_assert_null(bytes3);

    free(bytes);
    free(bytes2);
    cp_buf_release(&pj);
    cp_pass_report_release(&rep);
    cp_graph_free(g);
}
