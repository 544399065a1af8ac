/* Rule packs: every error in a rule file names FILE:LINE:COLUMN of what is
 * at fault, exactly (YAML syntax, keys, expressions in plain, quoted and
 * multi-line scalars, features, `affected` predicates, change entries, gain
 * intervals, duplicate names, folders); the default packs load; and the
 * reference design's two bottleneck types load exactly as written and fire
 * on hand-made traces built to meet (or miss) their indicators, through the
 * public API (rules/rules.h, rules/features.h). */
#include "rules/calibrate.h"
#include "rules/rules.h"
#include "support/cli.h"
#include "support/run.h"
#include "trace/trace.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

TestSuite(rules_load, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 60);

static char *write_file(const char *name, const char *text)
{
    char *path = cp_t_path(name);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_write_atomic(path, text, strlen(text), &d), CP_OK, "%s", d.msg);
    return path;
}

/* A valid pack; the line numbers below count from 1:
 *
 *   1 pack: t
 *   4   - name: r1
 *   7       - device_util > 90%
 *  11           - copy_share > 5%
 *  12         affected: copy
 *  15           convert: ["--layout_policy=nchw", "--buffer_optimize=off_optimize"]
 *  16         gain: {speedup: 2.0, low: 1.5, high: 3.0}                      */
static const char BASE[] = "pack: t\n"
                           "version: 1\n"
                           "rules:\n"
                           "  - name: r1\n"
                           "    bottleneck_type: memory_bound\n"
                           "    indicators:\n"
                           "      - device_util > 90%\n"
                           "    root_causes:\n"
                           "      - name: c1\n"
                           "        evidence:\n"
                           "          - copy_share > 5%\n"
                           "        affected: copy\n"
                           "        change:\n"
                           "          summary: s\n"
                           "          convert: [\"--layout_policy=nchw\", "
                           "\"--buffer_optimize=off_optimize\"]\n"
                           "        gain: {speedup: 2.0, low: 1.5, high: 3.0}\n";

/* BASE with the first `from` replaced by `to`. */
static char *variant(const char *from, const char *to)
{
    const char *at = strstr(BASE, from);
    cr_assert_not_null(at, "'%s' is not in BASE", from);
    return cp_t_fmt("%.*s%s%s", (int)(at - BASE), BASE, to, at + strlen(from));
}

/* Load `text` as NAME.yaml: it must fail, leave the set empty, and the
 * message must start with "PATH:LINE:COL: " and contain `part`. */
static void expect_error_at(const char *text, int line, int col, const char *part)
{
    static int k;
    char name[32];
    snprintf(name, sizeof name, "pack%d.yaml", k++);
    char *path = write_file(name, text);
    struct cp_rule_set *rs = cp_rule_set_create();
    cr_assert_not_null(rs);
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_rule_set_load_file(rs, path, &d);
    cr_assert_neq(st, CP_OK, "loaded, expected an error at %d:%d (%s):\n%s", line, col, part, text);
    cr_assert_eq(st, d.status);
    cr_assert_eq(cp_rule_set_count(rs), 0, "a failed load leaves the set as it was");
    char *want = cp_t_fmt("%s:%d:%d: ", path, line, col);
    cr_assert(strncmp(d.msg, want, strlen(want)) == 0, "message '%s' does not start with '%s'",
              d.msg, want);
    cr_assert(strstr(d.msg, part), "message '%s' lacks '%s'", d.msg, part);
    free(want);
    cp_rule_set_free(rs);
    free(path);
}

static void expect_variant_error(const char *from, const char *to, int line, int col,
                                 const char *part)
{
    char *text = variant(from, to);
    expect_error_at(text, line, col, part);
    free(text);
}

Test(rules_load, base_pack_loads)
{
    char *path = write_file("base.yaml", BASE);
    struct cp_rule_set *rs = cp_rule_set_create();
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_rule_set_load_file(rs, path, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_rule_set_count(rs), 1);
    cr_assert_str_eq(cp_rule_set_name(rs, 0), "r1");
    cr_assert_null(cp_rule_set_name(rs, 1));
    cp_rule_set_free(rs);
    free(path);
}

/* ---- YAML and keys --------------------------------------------------------------- */

Test(rules_load, yaml_syntax_error_names_where_the_parser_stopped)
{
    /* the flow list of line 15 is not closed: libyaml stops at the next
     * token, `gain` on line 16 */
    expect_variant_error("off_optimize\"]", "off_optimize\"", 16, 9, "YAML: did not find expected");
    /* a tab for indentation */
    expect_variant_error("    bottleneck_type:", "\tbottleneck_type:", 5, 1, "YAML");
    expect_error_at("", 1, 1, "the file is empty");
}

Test(rules_load, unknown_keys_suggest_the_nearest_known_one)
{
    expect_variant_error("    indicators:", "    indicator:", 6, 5,
                         "rule: unknown key 'indicator' (did you mean 'indicators'?)");
    expect_variant_error("        affected:", "        afected:", 12, 9,
                         "root cause: unknown key 'afected' (did you mean 'affected'?)");
    expect_variant_error("          summary:", "          sumary:", 14, 11,
                         "unknown key 'sumary' (did you mean 'summary'?)");
    expect_variant_error("low: 1.5", "lo: 1.5", 16, 30, "unknown key 'lo' (did you mean 'low'?)");
    /* nothing close: the known keys are listed */
    expect_variant_error("version: 1", "colour_scheme: 1", 2, 1,
                         "unknown key 'colour_scheme'; known: pack, profiles, rules, version");
}

Test(rules_load, missing_required_keys_point_at_their_mapping)
{
    expect_variant_error("    bottleneck_type: memory_bound\n", "", 4, 5,
                         "rule 'r1': missing 'bottleneck_type'");
    expect_variant_error("  - name: r1\n", "  - title: r1\n", 4, 5, "rule: missing 'name'");
    expect_variant_error("    indicators:\n      - device_util > 90%\n", "", 4, 5,
                         "rule 'r1': missing 'indicators'");
    expect_variant_error("          summary: s\n", "", 14, 11, "missing 'summary'");
    expect_variant_error("        gain: {speedup: 2.0, low: 1.5, high: 3.0}\n", "", 9, 9,
                         "root cause 'c1': missing 'gain'");
    expect_variant_error("    root_causes:", "    root_cause:", 8, 5,
                         "did you mean 'root_causes'?");
    expect_error_at("pack: x\n", 1, 1, "'rules' must be a list of rules");
}

/* ---- expressions --------------------------------------------------------------------- */

Test(rules_load, bad_expression_in_a_plain_scalar_points_inside_it)
{
    /* line 7 is "      - device_util > (90% +": the expression starts at
     * column 9 and ends at 29 */
    expect_variant_error("device_util > 90%", "device_util > (90% +", 7, 29,
                         "expected a value after '+', found end of expression");
    expect_variant_error("device_util > 90%", "device_util > 90gb", 7, 25, "unknown unit 'gb'");
    expect_variant_error("device_util > 90%", "device_util > 90% AND copy_share > 1%", 7, 27,
                         "AND");
    /* not a condition: the whole scalar */
    expect_variant_error("device_util > 90%", "device_util + 1", 7, 9,
                         "indicators[0] must be a condition");
}

Test(rules_load, bad_expression_in_a_quoted_scalar_counts_from_after_the_quote)
{
    /* double quotes: the text starts at column 10, the second '>' is at 23 */
    expect_variant_error("device_util > 90%", "\"device_util >> 90%\"", 7, 23,
                         "expected a value after '>', found '>'");
    /* single quotes: '=' at column 22 */
    expect_variant_error("device_util > 90%", "'device_util = 90%'", 7, 22,
                         "'=' is not an operator");
    /* a quoted string inside a single-quoted scalar */
    expect_variant_error("copy_share > 5%", "'top(op_type) > 5% and op_type == \"x\"'", 11, 36,
                         "op_type");
}

Test(rules_load, expressions_over_several_lines_point_at_the_file_position)
{
    /* a plain scalar folded over two lines: the typo is on line 8 */
    expect_variant_error("      - device_util > 90%\n",
                         "      - device_util > 90%\n"
                         "        and copy_shar > 1%\n",
                         8, 13, "unknown feature 'copy_shar' (did you mean 'copy_share'?)");
    /* a literal block: the text starts on the line after '|', indented */
    expect_variant_error("      - device_util > 90%\n",
                         "      - |\n"
                         "        device_util > 90%\n"
                         "          and copy_shar > 1%\n",
                         9, 15, "unknown feature 'copy_shar'");
    /* a folded block with a comment after its header */
    expect_variant_error("      - device_util > 90%\n",
                         "      - >-   # two lines\n"
                         "        device_util >\n"
                         "        (90% +\n",
                         9, 15, "expected a value after '+'");
    /* and it still loads when right, the same as on one line */
    char *ok = variant("      - device_util > 90%\n", "      - |\n"
                                                      "        device_util > 90%\n"
                                                      "          and copy_share > 1%\n");
    char *path = write_file("multiline.yaml", ok);
    struct cp_rule_set *rs = cp_rule_set_create();
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_rule_set_load_file(rs, path, &d), CP_OK, "%s", d.msg);
    cp_rule_set_free(rs);
    free(path);
    free(ok);
}

Test(rules_load, unknown_feature_names_the_nearest_one)
{
    expect_variant_error("copy_share > 5%", "copy_shar > 5%", 11, 13,
                         "unknown feature 'copy_shar' (did you mean 'copy_share'?)");
    expect_variant_error("device_util > 90%", "device_util > 90% and cache_mis_rate > 30%", 7, 31,
                         "unknown feature 'cache_mis_rate' (did you mean 'cache_miss_rate'?)");
    /* a row field outside a row function */
    expect_variant_error("copy_share > 5%", "op_type == \"Conv\"", 11, 13, "op_type");
}

Test(rules_load, bad_affected_predicate)
{
    /* "        affected: " is 18 characters: the predicate starts at 19 */
    expect_variant_error("affected: copy", "affected: op_typ == \"Transpose\"", 12, 19,
                         "unknown feature 'op_typ' (did you mean 'op_type'?)");
    expect_variant_error("affected: copy", "affected: 3 + 4", 12, 19, "needs a condition");
    /* the predicate is evaluated as share(<predicate>): the message says so */
    expect_variant_error("affected: copy", "affected: small and (pattern == \"x\"", 12, 45,
                         "found end of expression");
    expect_variant_error("affected: copy", "affected: 'op_type == \"a\" or op_tpe == \"b\"'", 12,
                         38, "unknown feature 'op_tpe'");
}

/* ---- changes, gains, risks ----------------------------------------------------------- */

Test(rules_load, bad_change_entries_point_at_the_entry)
{
    /* line 15: '          convert: ["--layout_policy=nchw", "--buffer_optimize=off_optimize"]'
     * the first entry's quote is at column 21, the second's at 44 */
    expect_variant_error("\"--layout_policy=nchw\"", "\"layout_policy=nchw\"", 15, 21,
                         "convert entry 'layout_policy=nchw' is not a --flag=value");
    expect_variant_error("\"--buffer_optimize=off_optimize\"", "\"--buffer_optimize\"", 15, 45,
                         "convert entry '--buffer_optimize' is not a --flag=value");
    expect_variant_error("          convert:",
                         "          fusion_switches: [\"A:on\", \"B=on\"]\n"
                         "          convert:",
                         15, 37, "fusion switch 'B=on' is not PassName:on or PassName:off");
    expect_variant_error("          convert:",
                         "          fusion_switches: [\":on\"]\n"
                         "          convert:",
                         15, 29, "fusion switch ':on'");
    expect_variant_error("          convert:",
                         "          fusion_switches: LayerNormFusionPass\n"
                         "          convert:",
                         15, 28, "fusion switch 'LayerNormFusionPass'");
    expect_variant_error("          convert:",
                         "          runtime: [\"--threads\"]\n"
                         "          convert:",
                         15, 21, "runtime entry '--threads' is not a --flag=value");
    /* no concrete change at all */
    char *text = variant("          convert: [\"--layout_policy=nchw\", "
                         "\"--buffer_optimize=off_optimize\"]\n",
                         "");
    expect_error_at(text, 14, 11, "give at least one concrete change");
    free(text);
}

/* `profiles:` names the runs a pack is for; a pack only for profiles
 * other tools wrote states its changes (a summary is enough), since
 * cannprof cannot apply them. */
Test(rules_load, profiles_name_the_runs_and_advice_needs_only_a_summary)
{
    char *text = variant("version: 1\n", "version: 1\nprofiles: [ascend, tpu]\n");
    expect_error_at(text, 3, 20, "profile 'tpu' is not one of cannprof, ascend, gpu");
    free(text);
    char *advice = variant("          convert: [\"--layout_policy=nchw\", "
                           "\"--buffer_optimize=off_optimize\"]\n",
                           "");
    char *pack = cp_t_fmt("profiles: [gpu, onnxruntime]\n%s", advice);
    char *path = write_file("advice.yaml", pack);
    struct cp_rule_set *rs = cp_rule_set_create();
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(cp_rule_set_load_file(rs, path, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(cp_rule_set_count(rs), 1);
    cp_rule_set_free(rs);
    /* with cannprof's runs among them, a concrete change is needed again */
    free(pack);
    pack = cp_t_fmt("profiles: [gpu, cannprof]\n%s", advice);
    free(path);
    path = write_file("advice2.yaml", pack);
    rs = cp_rule_set_create();
    cp_diag_init(&d);
    cr_expect_neq(cp_rule_set_load_file(rs, path, &d), CP_OK);
    cr_expect(strstr(d.msg, "give at least one concrete change") != NULL, "%s", d.msg);
    cp_rule_set_free(rs);
    free(path);
    free(pack);
    free(advice);
}

Test(rules_load, gain_needs_1_le_low_le_speedup_le_high)
{
    /* line 16: '        gain: {speedup: 2.0, low: 1.5, high: 3.0}', the mapping at 15 */
    expect_variant_error("low: 1.5, high: 3.0", "low: 2.5, high: 3.0", 16, 15,
                         "gain needs 1 <= low <= speedup <= high");
    expect_variant_error("low: 1.5, high: 3.0", "low: 1.5, high: 1.8", 16, 15,
                         "gain needs 1 <= low <= speedup <= high");
    expect_variant_error("low: 1.5, high: 3.0", "low: 0.5, high: 3.0", 16, 15,
                         "gain needs 1 <= low <= speedup <= high");
    expect_variant_error("speedup: 2.0", "speedup: 0.8", 16, 15, "speedup' >= 1");
    expect_variant_error("high: 3.0", "high: lots", 16, 46,
                         "'high' must be a number (or a percentage like 5%)");
    expect_variant_error("        gain: {speedup: 2.0, low: 1.5, high: 3.0}\n",
                         "        gain: {speedup: 2.0, low: 1.5, high: 3.0}\n"
                         "        risks: {memory: much}\n",
                         17, 25, "'memory' must be a number");
}

/* ---- names and folders ----------------------------------------------------------------- */

Test(rules_load, duplicate_rule_names_are_refused_across_files)
{
    char *dir = cp_t_path("packs");
    cr_assert_eq(mkdir(dir, 0700), 0);
    char *a = cp_t_fmt("%s/a.yaml", dir), *b = cp_t_fmt("%s/b.yaml", dir);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_write_atomic(a, BASE, strlen(BASE), &d), CP_OK);
    char *second =
        cp_t_fmt("pack: other\nrules:\n  - name: r2\n%s", strstr(BASE, "    bottleneck"));
    /* b.yaml: r2 then r1 again */
    char *two = cp_t_fmt("%s  - name: r1\n%s", second, strstr(BASE, "    bottleneck"));
    cr_assert_eq(cp_file_write_atomic(b, two, strlen(two), &d), CP_OK);
    struct cp_rule_set *rs = cp_rule_set_create();
    cr_assert_eq(cp_rule_set_load_dir(rs, dir, &d), CP_ERR_PARSE, "%s", d.msg);
    /* r1's second definition starts at line 16 of b.yaml, column 5 */
    char *want = cp_t_fmt("%s:16:5: rule 'r1' is defined twice", b);
    cr_assert_str_eq(d.msg, want);
    /* a.yaml loaded; b.yaml, which failed, left nothing behind */
    cr_assert_eq(cp_rule_set_count(rs), 1);
    cr_assert_str_eq(cp_rule_set_name(rs, 0), "r1");
    cp_rule_set_free(rs);

    /* twice in one file */
    char *dup = cp_t_fmt("%s  - name: r1\n%s", BASE, strstr(BASE, "    bottleneck"));
    expect_error_at(dup, 17, 5, "rule 'r1' is defined twice");

    free(dup);
    free(want);
    free(two);
    free(second);
    free(a);
    free(b);
    free(dir);
}

Test(rules_load, folders_empty_missing_and_ignored_files)
{
    char *dir = cp_t_path("empty");
    cr_assert_eq(mkdir(dir, 0700), 0);
    struct cp_rule_set *rs = cp_rule_set_create();
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_rule_set_load_dir(rs, dir, &d), CP_ERR_INVALID);
    char *want = cp_t_fmt("%s: no rule packs (*.yaml) in the folder", dir);
    cr_assert_str_eq(d.msg, want);

    /* files that are not packs (README, hidden, backups) are not read */
    char *readme = cp_t_fmt("%s/README.md", dir), *hidden = cp_t_fmt("%s/.x.yaml", dir);
    char *pack = cp_t_fmt("%s/p.yml", dir);
    cr_assert_eq(cp_file_write_atomic(readme, "not yaml: [", 11, &d), CP_OK);
    cr_assert_eq(cp_file_write_atomic(hidden, "not yaml: [", 11, &d), CP_OK);
    cr_assert_eq(cp_file_write_atomic(pack, BASE, strlen(BASE), &d), CP_OK);
    cp_diag_init(&d);
    cr_assert_eq(cp_rule_set_load_dir(rs, dir, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_rule_set_count(rs), 1);
    cp_rule_set_free(rs);

    rs = cp_rule_set_create();
    cp_diag_init(&d);
    cr_assert_eq(cp_rule_set_load_dir(rs, "/nonexistent/rules", &d), CP_ERR_IO);
    cr_assert(strstr(d.msg, "/nonexistent/rules"), "%s", d.msg);
    cp_diag_init(&d);
    cr_assert_neq(cp_rule_set_load_file(rs, "/nonexistent/rules.yaml", &d), CP_OK);
    cr_assert(strstr(d.msg, "/nonexistent/rules.yaml"), "%s", d.msg);
    cp_rule_set_free(rs);
    free(readme);
    free(hidden);
    free(pack);
    free(want);
    free(dir);
}

Test(rules_load, the_default_packs_load)
{
    struct cp_rule_set *rs = cp_rule_set_create();
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_rule_set_load_dir(rs, cp_rules_default_dir(), &d), CP_OK, "%s", d.msg);
    size_t n = cp_rule_set_count(rs);
    cr_assert_gt(n, 10, "only %zu rules in %s", n, cp_rules_default_dir());
    static const char *const want[] = {
        "memory_bound",      "compute_bound",         "unfused_attention", "decomposed_layernorm",
        "layout_round_trip", "fp32_on_bf16_hardware", "launch_bound",      "runtime_overhead"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        bool found = false;
        for (size_t k = 0; k < n && !found; k++)
            found = strcmp(cp_rule_set_name(rs, k), want[i]) == 0;
        cr_expect(found, "rule %s is not in the default packs", want[i]);
    }
    cp_rule_set_free(rs);
}

/* ---- the reference design's two bottleneck types -----------------------------------
 *
 * rules/packs/reference.yaml alone, on hand-made stores:
 *
 * memory store, 2 iterations of 120 us, 100 us of kernels each (device_util
 * 0.833, so compute_bound cannot fire):
 *   td  TransData  20 us  0 FLOP    1.8e6 B
 *   cc  Concat     20 us  0 FLOP    1.8e6 B
 *   add Add        60 us  1e4 FLOP  5.4e6 B
 * 9e6 B in 100 us against 1e11 B/s: memory_bandwidth_util 0.9; every kernel
 * is below the ridge (memory_bound_share 1); cache misses / references as
 * given.
 *
 * compute store, 2 iterations of 75 us, 71 us of kernels (device_util
 * 0.947):
 *   conv Conv    40 us  4e6 FLOP   f32   -> relu Relu 5 us (an unfused conv_act)
 *   mm   MatMul  20 us  8e6 FLOP   f32
 *   add  Add      3 us,  mul Mul 3 us
 * alu_util (4e6 + 8e6 + ...) / 1e12 / 71 us = 0.17; 3 launches of 5 under
 * 10 us (small_kernel_share 0.6); fp32_compute_share 60/71. */

static struct cp_machine machine(void)
{
    struct cp_machine m;
    memset(&m, 0, sizeof m);
    m.cores = 4;
    m.threads_used = 4;
    m.has_bf16 = true;
    m.peak_flops_f32 = 2e12;
    m.peak_flops_f32_1t = 5e11;
    m.peak_flops_bf16 = 8e12;
    m.peak_flops_bf16_1t = 2e12;
    m.mem_bw = 1e11;
    return m;
}

#define T_(name, shape)                                                                            \
    "{\"name\":\"" name "\",\"shape\":" shape ",\"dtype\":\"f32\",\"layout\":\"NCHW\"}"
#define IO1(a)    "[" a "]"
#define IO2(a, b) "[" a "," b "]"

struct kspec {
    struct cp_trace_kernel k;
    uint64_t ns;
};

/* A store of one bench run on 2 threads, 2 measured iterations of
 * `lat_ns`, kernels back to back inside a runtime "execute" event; cache
 * counters when `refs` > 0. Returns its path. */
static char *hand_store(const char *name, const struct kspec *ks, size_t n, uint64_t lat_ns,
                        double refs, double misses)
{
    char *path = cp_t_path(name);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s;
    cr_assert_eq(cp_trace_store_open(path, &s, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_trace_store_set_meta(s, "host_cores", "4", &d), CP_OK);
    cr_assert_eq(cp_trace_store_set_meta(s, "host_isa_flags", "avx2 avx512f avx512_bf16", &d),
                 CP_OK);
    struct cp_trace_run_info info = {.kind = "bench",
                                     .model_path = "hand.om",
                                     .config_json = "{}",
                                     .threads = 2,
                                     .batch = 1,
                                     .iterations = 2};
    int64_t run;
    cr_assert_eq(cp_trace_store_begin_run(s, &info, &run, &d), CP_OK, "%s", d.msg);
    uint64_t lat[2] = {lat_ns, lat_ns};
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, lat, 2, &d), CP_OK, "%s", d.msg);
    struct cp_trace_kernel k[8];
    for (size_t i = 0; i < n; i++)
        k[i] = ks[i].k;
    cr_assert_eq(cp_trace_store_add_kernels(s, run, k, n, &d), CP_OK, "%s", d.msg);
    struct cp_trace_recorder *r = cp_trace_recorder_create(64);
    int32_t exec = cp_trace_intern(r, "execute");
    for (int it = 0; it < 2; it++) {
        uint64_t base = 1000000 + (uint64_t)it * lat_ns, t = base + 1000;
        for (size_t i = 0; i < n; i++) {
            cp_trace_record(r, CP_LAYER_DEVICE, cp_trace_intern(r, ks[i].k.node), (int32_t)i, it, t,
                            t + ks[i].ns, 0);
            t += ks[i].ns;
        }
        cp_trace_record(r, CP_LAYER_RUNTIME, exec, -1, it, base, t + 500, 0);
    }
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cp_trace_recorder_free(r);
    if (refs > 0) {
        cr_assert_eq(cp_trace_store_add_counter(s, run, -1, "perf.cache_references", refs, 0, &d),
                     CP_OK);
        cr_assert_eq(cp_trace_store_add_counter(s, run, -1, "perf.cache_misses", misses, 0, &d),
                     CP_OK);
    }
    cp_trace_store_close(s);
    return path;
}

static char *memory_store(double refs, double misses)
{
    static const struct kspec ks[] = {
        {{"td", "TransData", "c:transdata", "[\"td\"]", IO1(T_("x", "[1,64,32,32]")),
          IO1(T_("y0", "[1,64,32,32]")), 0, 1.8e6},
         20000},
        {{"cc", "Concat", "c:concat", "[\"cc\"]", IO1(T_("y0", "[1,64,32,32]")),
          IO1(T_("y1", "[1,64,32,32]")), 0, 1.8e6},
         20000},
        {{"add", "Add", "c:binary_f32", "[\"add\"]",
          IO2(T_("y1", "[1,64,32,32]"), T_("z", "[1,64,32,32]")), IO1(T_("out", "[1,64,32,32]")),
          1e4, 5.4e6},
         60000},
    };
    return hand_store("memory.db", ks, 3, 120000, refs, misses);
}

static char *compute_store(void)
{
    static const struct kspec ks[] = {
        {{"conv", "Conv", "onednn:conv", "[\"/conv/Conv\"]",
          IO2(T_("x", "[1,4,8,8]"), T_("w", "[4,4,3,3]")), IO1(T_("y0", "[1,4,8,8]")), 4e6, 1e5},
         40000},
        {{"relu", "Relu", "c:unary_f32", "[\"/relu/Relu\"]", IO1(T_("y0", "[1,4,8,8]")),
          IO1(T_("y1", "[1,4,8,8]")), 1e3, 2e3},
         5000},
        {{"mm", "MatMul", "onednn:matmul", "[\"/mm/MatMul\"]",
          IO2(T_("y1", "[1,4,8,8]"), T_("y1b", "[1,4,8,8]")), IO1(T_("y2", "[1,4,8,8]")), 8e6, 1e5},
         20000},
        {{"add", "Add", "c:binary_f32", "[\"/add/Add\"]", IO1(T_("p", "[1,4]")),
          IO1(T_("q", "[1,4]")), 4, 48},
         3000},
        {{"mul", "Mul", "c:binary_f32", "[\"/mul/Mul\"]", IO1(T_("r", "[1,4]")),
          IO1(T_("s", "[1,4]")), 4, 48},
         3000},
    };
    return hand_store("compute.db", ks, 5, 75000, 0, 0);
}

/* Load reference.yaml alone and analyze the store's run against `m`. */
static void analyze_reference(const char *db, const struct cp_machine *m, struct cp_analysis *a,
                              struct cp_features **f)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_rule_set *rs = cp_rule_set_create();
    char *pack = cp_t_fmt("%s/reference.yaml", cp_rules_default_dir());
    cr_assert_eq(cp_rule_set_load_file(rs, pack, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_rule_set_count(rs), 2);
    cr_assert_str_eq(cp_rule_set_name(rs, 0), "memory_bound");
    cr_assert_str_eq(cp_rule_set_name(rs, 1), "compute_bound");
    struct cp_trace_store *s;
    cr_assert_eq(cp_trace_store_open_ro(db, &s, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_features_compute(s, -1, m, f, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    struct cp_analysis_opts o = {.target = CP_TARGET_LATENCY};
    cr_assert_eq(cp_rules_analyze(rs, *f, &o, a, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(a->rules_evaluated, 2);
    cp_rule_set_free(rs);
    free(pack);
}

static const struct cp_finding *find(const struct cp_analysis *a, const char *rule,
                                     const char *cause)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->findings[i].rule, rule) == 0 && strcmp(a->findings[i].root_cause, cause) == 0)
            return &a->findings[i];
    return NULL;
}

static double feature(const struct cp_features *f, const char *name)
{
    double v;
    cr_assert(cp_features_get(f, name, &v), "%s absent", name);
    return v;
}

#define EPS 1e-6

Test(rules_load, reference_memory_bound_as_written)
{
    struct cp_machine m = machine();
    char *db = memory_store(1000, 400);
    struct cp_analysis a;
    struct cp_features *f;
    analyze_reference(db, &m, &a, &f);
    /* the store meets the indicators as designed */
    cr_assert_float_eq(feature(f, "memory_bandwidth_util"), 0.9, EPS);
    cr_assert_float_eq(feature(f, "cache_miss_rate"), 0.4, EPS);
    double du = feature(f, "device_util");
    cr_assert_lt(du, 0.9);

    /* memory_bound fires with its three root causes, and nothing else */
    cr_assert_eq(a.n, 3, "%zu findings", a.n);
    static const char *const causes[] = {"layout_mismatch", "redundant_copy", "large_tensor"};
    static const double share[] = {0.2, 0.2, 1.0}, speedup[] = {1.5, 2.0, 1.4};
    for (size_t i = 0; i < 3; i++) {
        const struct cp_finding *x = find(&a, "memory_bound", causes[i]);
        cr_assert_not_null(x, "no memory_bound/%s finding", causes[i]);
        cr_assert_str_eq(x->bottleneck_type, "memory_bound");
        cr_assert(strstr(x->evidence, "indicator: memory_bandwidth_util > 85% -> holds"), "%s",
                  x->evidence);
        cr_assert(strstr(x->evidence, "indicator: cache_miss_rate > 30% -> holds"), "%s",
                  x->evidence);
        cr_assert_float_eq(x->time_share, share[i] * du, EPS, "%s", causes[i]);
        cr_assert_float_eq(x->gain, share[i] * du * (1 - 1 / speedup[i]), EPS, "%s", causes[i]);
        cr_assert_str_eq(x->missing, "");
        /* margins (0.9 - 0.85)/0.85 and (0.4 - 0.3)/0.3, saturating at 20%:
         * strength (0.294 + 1) / 2, all evidence agrees */
        cr_assert_float_eq(x->score, 0.5 * (0.05 / 0.85 / 0.2 + 1) / 2 + 0.5, EPS);
        cr_assert_eq(x->confidence, CP_CONFIDENCE_HIGH);
    }
    /* largest gain first */
    cr_assert_str_eq(a.findings[0].root_cause, "large_tensor");
    cr_assert_str_eq(a.findings[1].root_cause, "redundant_copy");
    cr_assert_str_eq(a.findings[2].root_cause, "layout_mismatch");
    cr_assert_str_eq(find(&a, "memory_bound", "layout_mismatch")->nodes_json, "[\"td\"]");
    cr_assert_str_eq(find(&a, "memory_bound", "redundant_copy")->nodes_json, "[\"cc\"]");
    cp_analysis_release(&a);
    cp_features_free(f);
    free(db);
}

Test(rules_load, reference_memory_bound_needs_both_indicators)
{
    struct cp_machine m = machine();
    /* 25% cache misses: not memory bound; Add (60% of the time) is left as
     * an unclassified hotspot */
    char *db = memory_store(1000, 250);
    struct cp_analysis a;
    struct cp_features *f;
    analyze_reference(db, &m, &a, &f);
    for (size_t i = 0; i < a.n; i++)
        cr_assert_str_neq(a.findings[i].rule, "memory_bound");
    cr_assert_eq(a.n, 1);
    cr_assert(a.findings[0].unclassified);
    cp_analysis_release(&a);
    cp_features_free(f);
    free(db);

    /* no counters: the second indicator is unknown; the rule still fires on
     * the first, with the missing feature named and a lower confidence */
    char *db2 = memory_store(0, 0);
    analyze_reference(db2, &m, &a, &f);
    const struct cp_finding *x = find(&a, "memory_bound", "large_tensor");
    cr_assert_not_null(x);
    cr_assert(strstr(x->missing, "cache_miss_rate"), "missing '%s'", x->missing);
    cr_assert(strstr(x->evidence, "indicator: cache_miss_rate > 30% -> unknown"), "%s",
              x->evidence);
    cr_assert_neq(x->confidence, CP_CONFIDENCE_HIGH);
    cp_analysis_release(&a);
    cp_features_free(f);
    free(db2);
}

Test(rules_load, reference_compute_bound_as_written)
{
    struct cp_machine m = machine();
    char *db = compute_store();
    struct cp_analysis a;
    struct cp_features *f;
    analyze_reference(db, &m, &a, &f);
    double du = feature(f, "device_util");
    cr_assert_float_eq(du, 71.0 / 75, EPS);
    cr_assert_lt(feature(f, "alu_util"), 0.6);
    cr_assert_float_eq(feature(f, "small_kernel_share"), 0.6, EPS);
    cr_assert_float_eq(feature(f, "fp32_compute_share"), 60.0 / 71, EPS);
    cr_assert_float_eq(feature(f, "unfused_conv_act_share"), 45.0 / 71, EPS);

    cr_assert_eq(a.n, 3, "%zu findings", a.n);
    static const char *const causes[] = {"kernel_fusion_missing", "small_kernel",
                                         "precision_mismatch"};
    /* affected: the conv_act pattern; the small kernels; the f32 compute
     * kernel outside any pattern (mm) */
    static const double share[] = {45.0 / 71, 11.0 / 71, 20.0 / 71}, speedup[] = {1.3, 1.3, 1.4};
    static const char *const nodes[] = {"[\"/conv/Conv\",\"/relu/Relu\"]",
                                        "[\"/relu/Relu\",\"/add/Add\",\"/mul/Mul\"]",
                                        "[\"/mm/MatMul\"]"};
    for (size_t i = 0; i < 3; i++) {
        const struct cp_finding *x = find(&a, "compute_bound", causes[i]);
        cr_assert_not_null(x, "no compute_bound/%s finding", causes[i]);
        cr_assert_str_eq(x->bottleneck_type, "compute_bound");
        cr_assert(strstr(x->evidence, "indicator: device_util > 90% -> holds"), "%s", x->evidence);
        cr_assert(strstr(x->evidence, "indicator: alu_util < 60% -> holds"), "%s", x->evidence);
        cr_assert_float_eq(x->time_share, share[i] * du, EPS, "%s", causes[i]);
        cr_assert_float_eq(x->gain, share[i] * du * (1 - 1 / speedup[i]), EPS, "%s", causes[i]);
        cr_assert_str_eq(x->nodes_json, nodes[i], "%s: %s", causes[i], x->nodes_json);
    }
    cp_analysis_release(&a);
    cp_features_free(f);
    free(db);

    /* without a machine alu_util is unknown: the rule still fires on
     * device_util, and says what was missing */
    db = compute_store();
    analyze_reference(db, NULL, &a, &f);
    const struct cp_finding *x = find(&a, "compute_bound", "small_kernel");
    cr_assert_not_null(x);
    cr_assert(strstr(x->missing, "alu_util"), "missing '%s'", x->missing);
    cr_assert_neq(x->confidence, CP_CONFIDENCE_HIGH);
    cp_analysis_release(&a);
    cp_features_free(f);
    free(db);
}

/* ---- no finding at all ---------------------------------------------------------------- */

/* Four op types of a quarter of the time each, kernels covering 100 of 110
 * us: no hotspot, and the one rule never fires. The analysis is empty, and
 * not an error (this sorted a NULL array, which UBSan refuses). */
Test(rules_load, an_analysis_without_findings_is_empty)
{
    static const struct kspec ks[] = {
        {{"a", "Relu", "c:unary_f32", "[\"a\"]", IO1(T_("x", "[1,4]")), IO1(T_("y", "[1,4]")), 4,
          32},
         25000},
        {{"b", "Sigmoid", "c:unary_f32", "[\"b\"]", IO1(T_("y", "[1,4]")), IO1(T_("z", "[1,4]")), 4,
          32},
         25000},
        {{"c", "Exp", "c:unary_f32", "[\"c\"]", IO1(T_("z", "[1,4]")), IO1(T_("u", "[1,4]")), 4,
          32},
         25000},
        {{"d", "Sqrt", "c:unary_f32", "[\"d\"]", IO1(T_("u", "[1,4]")), IO1(T_("v", "[1,4]")), 4,
          32},
         25000},
    };
    char *db = hand_store("flat.db", ks, 4, 110000, 0, 0);
    char *pack =
        write_file("never.yaml", "rules:\n"
                                 "  - name: never\n"
                                 "    bottleneck_type: x\n"
                                 "    indicators: [device_util > 200%]\n"
                                 "    root_causes:\n"
                                 "      - name: y\n"
                                 "        change: {summary: z, runtime: [\"--threads=1\"]}\n"
                                 "        gain: {speedup: 2}\n");
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_rule_set *rs = cp_rule_set_create();
    cr_assert_eq(cp_rule_set_load_file(rs, pack, &d), CP_OK, "%s", d.msg);
    struct cp_trace_store *s;
    struct cp_features *f;
    cr_assert_eq(cp_trace_store_open_ro(db, &s, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_features_compute(s, -1, NULL, &f, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    cr_assert_float_eq(feature(f, "device_util"), 100.0 / 110, EPS);
    struct cp_analysis_opts o = {.target = CP_TARGET_LATENCY};
    struct cp_analysis a;
    cr_assert_eq(cp_rules_analyze(rs, f, &o, &a, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(a.n, 0);
    cr_assert_eq(a.rules_evaluated, 1);
    json_t *aj = cp_analysis_to_json(&a);
    char *text = cp_json_text(aj);
    cr_assert_str_eq(text, "[]");
    free(text);
    json_decref(aj);
    cp_analysis_release(&a);
    cp_features_free(f);
    cp_rule_set_free(rs);
    free(pack);
    free(db);
}

Test(rules_load, a_pack_without_rules_loads_into_an_empty_set)
{
    /* loaded first, the empty pack meets a set without an array yet */
    char *empty = write_file("empty.yaml", "pack: e\nversion: 1\nrules: []\n");
    struct cp_rule_set *rs = cp_rule_set_create();
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_rule_set_load_file(rs, empty, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(cp_rule_set_count(rs), 0);
    cp_rule_set_free(rs);
    free(empty);
}
