/* What the planted-bottleneck tests share (tests/rules/test_rules_planted.c,
 * on traces with injected kernel times, and tests/perf/
 * test_perf_rules_planted.c, on measured ones): converting an example
 * through the CLI, analyze --json, what each planted bottleneck must come
 * out as (the rule, its root cause, the change that removes it, a node it
 * affects) and the assertions on the top finding, and what analyze must
 * say when no rule explains a hotspot. Like cli_test.h, the helpers assert
 * with Criterion. */
#ifndef CP_TESTS_PLANTED_H
#define CP_TESTS_PLANTED_H

#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <jansson.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

/* ---- convert and analyze through the CLI --------------------------------------------- */

/* Convert examples/models/MODEL.onnx into <scratch>/TAG.om. `switches` (may
 * be NULL) are the lines of a fusion switch file, `extra` (may be NULL) one
 * more convert flag. Returns the .om path. */
static inline char *convert(const char *model, const char *tag, const char *switches,
                            const char *extra)
{
    char *sw_flag = NULL;
    if (switches) {
        char *name = cp_t_fmt("%s.switches", tag);
        sw_flag = ct_switch_file(name, switches);
        free(name);
    }
    const char *args[2] = {sw_flag ? sw_flag : extra, sw_flag ? extra : NULL};
    char *om = ct_convert_to(model, tag, args[0], args[1], NULL);
    free(sw_flag);
    return om;
}

/* analyze DB --json [a1 a2 a3 a4] (NULL-terminated); exit 0 and valid
 * JSON. OUT: *err (when not NULL) the standard error, caller frees. */
static inline json_t *analyze(const char *db, char **err, const char *a1, const char *a2,
                              const char *a3, const char *a4)
{
    struct cp_run r;
    cp_run_cli(&r, "analyze", db, "--json", a1, a2, a3, a4, NULL);
    cr_assert_eq(r.exit_code, 0, "analyze %s: exit %d\n%s", db, r.exit_code, r.err);
    json_t *j = cp_t_json(r.out);
    cr_assert_not_null(j, "analyze --json is not JSON (see stderr):\n%.2000s", r.out);
    if (err)
        *err = strdup(r.err);
    cp_run_release(&r);
    return j;
}

static inline const char *jstr(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    cr_assert_not_null(s, "'%s' is not a string", key);
    return s;
}

/* Whether the JSON array of strings `arr` has an entry equal to `want`
 * (exact) or containing it (!exact). */
static inline bool has_string(json_t *arr, const char *want, bool exact)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *s = json_string_value(v);
        if (s && (exact ? strcmp(s, want) == 0 : strstr(s, want) != NULL))
            return true;
    }
    return false;
}

/* One line per finding, for failure messages. */
static inline char *summary(json_t *findings)
{
    struct cp_buf b;
    cp_buf_init(&b);
    size_t i;
    json_t *f;
    json_array_foreach(findings, i, f)
    {
        json_t *g = json_object_get(f, "expected_gain");
        cp_buf_printf(&b, "  %zu. %s/%s %s gain %.4f [%.4f, %.4f] share %.3f\n", i + 1,
                      json_string_value(json_object_get(f, "rule")),
                      json_string_value(json_object_get(f, "root_cause")),
                      json_string_value(json_object_get(f, "confidence")),
                      json_number_value(json_object_get(g, "latency_saved")),
                      json_number_value(json_object_get(g, "low")),
                      json_number_value(json_object_get(g, "high")),
                      json_number_value(json_object_get(f, "time_share")));
    }
    return b.data ? cp_buf_steal(&b) : strdup("  (none)\n");
}

/* What a planted bottleneck must come out as. */
struct planted {
    const char *label;
    const char *rule, *root_cause;
    const char *change_key; /* "fusion_switches", "convert" or "runtime" */
    const char *change;     /* an entry of it */
    const char *node;       /* a substring of one affected ONNX node name */
};

/* A finding is the planted one, well formed: high confidence, a positive
 * gain inside its interval, the change that removes it, ONNX nodes. */
static inline void expect_finding(json_t *f, const struct planted *p, const char *all)
{
    cr_assert_str_eq(jstr(f, "rule"), p->rule, "%s: top finding is not %s:\n%s", p->label, p->rule,
                     all);
    cr_assert_str_eq(jstr(f, "root_cause"), p->root_cause, "%s:\n%s", p->label, all);
    cr_assert_str_eq(jstr(f, "confidence"), "high", "%s: confidence %s (score %.2f):\n%s", p->label,
                     jstr(f, "confidence"), ct_num(f, "score"), jstr(f, "evidence"));
    cr_assert(json_is_false(json_object_get(f, "unclassified")));
    json_t *g = json_object_get(f, "expected_gain");
    double gain = ct_num(g, "latency_saved"), lo = ct_num(g, "low"), hi = ct_num(g, "high");
    cr_assert_gt(gain, 0, "%s: expected gain %g", p->label, gain);
    cr_assert(lo <= gain && gain <= hi, "%s: gain %g outside [%g, %g]", p->label, gain, lo, hi);
    cr_assert_lt(hi, 1.0, "%s: more than the whole iteration promised", p->label);
    json_t *change = json_object_get(json_object_get(f, "change"), p->change_key);
    cr_assert(has_string(change, p->change, true), "%s: change lacks %s '%s'", p->label,
              p->change_key, p->change);
    json_t *nodes = json_object_get(f, "nodes");
    cr_assert(json_is_array(nodes) && json_array_size(nodes) > 0, "%s: no ONNX nodes", p->label);
    cr_assert(has_string(nodes, p->node, false), "%s: no node contains '%s'", p->label, p->node);
    cr_assert(json_array_size(json_object_get(f, "kernels")) > 0);
}

/* The top finding is the planted one (expect_finding), with the margin to
 * the next one logged; and no skeleton is written, since a rule explained
 * the run. */
static inline void expect_top(json_t *j, const char *db, const struct planted *p)
{
    json_t *findings = json_object_get(j, "findings");
    cr_assert(json_is_array(findings));
    char *all = summary(findings);
    cr_assert_geq(json_array_size(findings), 1, "%s: no findings", p->label);
    json_t *top = json_array_get(findings, 0);
    expect_finding(top, p, all);
    double gain = ct_num(json_object_get(top, "expected_gain"), "latency_saved");
    double second = 0;
    const char *second_rule = "-";
    if (json_array_size(findings) > 1) {
        json_t *s = json_array_get(findings, 1);
        second = json_number_value(
            json_object_get(json_object_get(s, "expected_gain"), "latency_saved"));
        second_rule = json_string_value(json_object_get(s, "rule"));
    }
    cr_log_info("planted %s: top %s gain %.4f; next %s %.4f; margin %.4f (%.2fx)", p->label,
                p->rule, gain, second_rule, second, gain - second,
                second > 0 ? gain / second : 0.0);
    fprintf(stderr, "planted %s: top %s gain %.4f; next %s %.4f; margin %.4f\n", p->label, p->rule,
            gain, second_rule, second, gain - second);

    char *skeleton = cp_t_fmt("%s.rule-skeleton.yaml", db);
    cr_assert_not(cp_path_exists(skeleton), "%s: a skeleton was written, yet a rule fired",
                  p->label);
    free(skeleton);
    free(all);
}

/* The finding of the planted rule and root cause, NULL when absent. */
static inline json_t *planted_finding(json_t *j, const struct planted *p)
{
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(j, "findings"), i, f)
    {
        if (strcmp(jstr(f, "rule"), p->rule) == 0 &&
            strcmp(jstr(f, "root_cause"), p->root_cause) == 0)
            return f;
    }
    return NULL;
}

/* ---- the planted bottlenecks ----------------------------------------------------------- */

/* nhwc_roundtrip with TransposeRoundTripEliminationPass off */
static inline struct planted planted_round_trip(void)
{
    return (struct planted){"layout round trip",
                            "layout_round_trip",
                            "layout_round_trip",
                            "fusion_switches",
                            "TransposeRoundTripEliminationPass:on",
                            "Transpose"};
}

/* sd_unet_tiny with every fusion pass off */
static inline struct planted planted_attention(void)
{
    return (struct planted){"unfused attention",           "unfused_attention",
                            "attention_not_fused",         "fusion_switches",
                            "FlashAttentionFusionPass:on", "/attn_down/attn1/MatMul"};
}

/* The unfused attention finding names every attention block, the
 * cross-attention ones too, and nothing outside attention. */
static inline void expect_attention_nodes(json_t *j, const struct planted *p)
{
    json_t *nodes = json_object_get(planted_finding(j, p), "nodes");
    static const char *const want[] = {"/attn_down/attn1/Softmax", "/attn_down/attn2/Softmax",
                                       "/attn_up/attn1/Softmax", "/attn_up/attn2/Softmax",
                                       "/attn_up/attn2/MatMul_1"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(has_string(nodes, want[i], true), "attention finding lacks node %s", want[i]);
    cr_expect_not(has_string(nodes, "/conv_in/Conv", true));
    cr_expect_not(has_string(nodes, "/attn_down/ff/fc1/MatMul", true));
}

/* transformer_encoder_op14 with LayerNormFusionPass off, on one thread */
static inline struct planted planted_layernorm(void)
{
    return (struct planted){"decomposed LayerNorm",   "decomposed_layernorm",
                            "layernorm_decomposed",   "fusion_switches",
                            "LayerNormFusionPass:on", "ReduceMean"};
}

/* sd_unet_tiny converted by default (fp32) on a CPU with bf16 units */
static inline struct planted planted_fp32_on_bf16(void)
{
    return (struct planted){"fp32 on bf16 hardware",
                            "fp32_on_bf16_hardware",
                            "fp32_where_bf16_available",
                            "convert",
                            "--precision_mode=allow_mix_precision_bf16",
                            "Conv"};
}

/* launch_bound_tiny converted by default, on 2 threads */
static inline struct planted planted_launch_bound(void)
{
    return (struct planted){"launch bound", "launch_bound", "small_kernels_on_many_threads",
                            "runtime",      "--threads=1",  "Gemm"};
}

/* ---- no rule explains it ------------------------------------------------------------ */

/* A rule pack whose one rule never fires. */
static inline const char *never_pack(void)
{
    return "pack: never\n"
           "version: 1\n"
           "rules:\n"
           "  - name: never_fires\n"
           "    bottleneck_type: memory_bound\n"
           "    indicators:\n"
           "      - device_util > 200%\n"
           "    root_causes:\n"
           "      - name: impossible\n"
           "        change:\n"
           "          summary: nothing\n"
           "          runtime: [\"--threads=1\"]\n"
           "        gain: {speedup: 1.5}\n";
}

/* The root mapping of a YAML file has `rules:`, a non-empty list. */
static inline void expect_yaml_with_rules(const char *path)
{
    char *text = ct_read_text(path);
    yaml_parser_t p;
    yaml_document_t doc;
    cr_assert(yaml_parser_initialize(&p));
    yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    cr_assert(yaml_parser_load(&p, &doc), "%s is not valid YAML: %s at line %zu", path,
              p.problem ? p.problem : "?", p.problem_mark.line + 1);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    cr_assert(root && root->type == YAML_MAPPING_NODE, "%s: the root is not a mapping", path);
    bool found = false;
    for (yaml_node_pair_t *q = root->data.mapping.pairs.start; q < root->data.mapping.pairs.top;
         q++) {
        yaml_node_t *k = yaml_document_get_node(&doc, q->key);
        yaml_node_t *v = yaml_document_get_node(&doc, q->value);
        if (k->type == YAML_SCALAR_NODE && strcmp((char *)k->data.scalar.value, "rules") == 0) {
            found = v->type == YAML_SEQUENCE_NODE &&
                    v->data.sequence.items.top > v->data.sequence.items.start;
        }
    }
    cr_assert(found, "%s has no non-empty 'rules:' list", path);
    yaml_document_delete(&doc);
    yaml_parser_delete(&p);
    free(text);
}

/* What analyze says of trace `db` with a rule folder (<scratch>/never)
 * holding only never_pack(): one unclassified hotspot finding, with low
 * confidence, no promised gain and the hot op type's share as its bound,
 * naming the hot op type (more than 30% of the kernel time) and its nodes;
 * and a rule skeleton, valid YAML, where --skeleton says or else next to
 * the trace. */
static inline void expect_unclassified_hotspot(const char *db)
{
    char *rules = cp_t_path("never");
    cr_assert_eq(mkdir(rules, 0700), 0);
    char *pack = cp_t_fmt("%s/never.yaml", rules);
    ct_write_text(pack, never_pack());
    char *skel = cp_t_path("skeleton.yaml");
    char *err = NULL;
    json_t *j = analyze(db, &err, "--rules", rules, "--skeleton", skel);
    cr_assert_eq(ct_num(j, "rules_loaded"), 1);
    json_t *findings = json_object_get(j, "findings");
    cr_assert_eq(json_array_size(findings), 1, "one finding, the unclassified hotspot");
    json_t *f = json_array_get(findings, 0);
    cr_assert(json_is_true(json_object_get(f, "unclassified")));
    cr_assert_str_eq(jstr(f, "rule"), "unclassified_hotspot");
    cr_assert_str_eq(jstr(f, "confidence"), "low");
    json_t *g = json_object_get(f, "expected_gain");
    cr_assert_eq(ct_num(g, "latency_saved"), 0, "an unknown cause promises nothing");
    cr_assert_gt(ct_num(g, "high"), 0, "but the hotspot's share bounds what removing it gives");

    /* the hot op type of the run: convolutions dominate resnet_tiny */
    json_t *top_op = json_array_get(json_object_get(json_object_get(j, "features"), "op_types"), 0);
    const char *op = jstr(top_op, "op_type");
    double share = ct_num(top_op, "time_share");
    cr_assert_gt(share, 0.30, "resnet_tiny's top op type %s has only %.0f%%", op, 100 * share);
    cr_assert_str_eq(jstr(f, "bottleneck_type"), "hotspot");
    cr_assert(strstr(jstr(f, "title"), op), "title '%s' lacks %s", jstr(f, "title"), op);
    cr_assert(json_array_size(json_object_get(f, "nodes")) > 0, "the hot op's ONNX nodes");
    cr_assert(strstr(jstr(f, "evidence"), op));

    /* the skeleton: where analyze said, valid YAML with rules:, the hot op
     * type in its indicator and affected predicate, the features measured */
    cr_assert(strstr(err, skel), "stderr does not name the skeleton: %s", err);
    cr_assert(cp_path_exists(skel));
    expect_yaml_with_rules(skel);
    char *text = ct_read_text(skel);
    char *ind = cp_t_fmt("share(op_type == \"%s\") > 30%%", op);
    char *aff = cp_t_fmt("affected: op_type == \"%s\"", op);
    cr_assert(strstr(text, ind), "skeleton lacks '%s':\n%s", ind, text);
    cr_assert(strstr(text, aff), "skeleton lacks '%s':\n%s", aff, text);
    cr_assert(strstr(text, "device_util"), "the measured features are listed");
    cr_assert(strstr(text, "<a_name_for_the_cause>"), "the parts to fill in are marked");

    /* without --skeleton it goes next to the trace */
    struct cp_run r;
    cp_run_cli(&r, "analyze", db, "--rules", pack, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "no rule explains it"), "%s", r.out);
    char *beside = cp_t_fmt("%s.rule-skeleton.yaml", db);
    cr_assert(cp_path_exists(beside), "no skeleton at %s", beside);
    expect_yaml_with_rules(beside);
    cp_run_release(&r);

    free(beside);
    free(ind);
    free(aff);
    free(text);
    free(err);
    json_decref(j);
    free(skel);
    free(pack);
    free(rules);
}

#endif
