/* Planted bottlenecks, with the kernel times injected: each example model,
 * converted with the configuration that plants one known bottleneck (the
 * same conversions as tests/perf/test_perf_rules_planted.c, which measures
 * them), gets a trace whose kernel table and run are those the converter
 * and the runtime really made, and whose kernel times come from a fixed
 * timing model in which the planted inefficiency takes most of the time.
 * Analysed with the default rule packs, through the CLI, the top finding
 * is the planted bottleneck, with high confidence, an expected gain inside
 * its interval, the change that removes it and the ONNX nodes it affects
 * (the expectations are those of rules/planted.h, shared with the measured
 * tests):
 *
 *   layout round trip   nhwc_roundtrip, TransposeRoundTripEliminationPass
 *                       off: the Transposes take most of the time
 *   unfused attention   sd_unet_tiny, every fusion pass off: the attention
 *                       blocks' scores (MatMul, Mul, Softmax, MatMul and the
 *                       head Transposes) take most of it
 *   decomposed LN       transformer_encoder_op14, LayerNormFusionPass off,
 *                       one thread: the LayerNorm chains' tiny kernels
 *   fp32 on bf16 CPU    sd_unet_tiny, default conversion, on a host that
 *                       has bf16 units: the fp32 convolutions and matmuls
 *                       (so this one runs on every machine)
 *   launch bound        launch_bound_tiny, 2 threads: every kernel tiny and
 *                       half of the iteration dispatch
 *
 * The host the trace describes is fixed (2 cores, AVX2; AVX-512 bf16 where
 * planted), and so is the machine's calibration (a cache file in the
 * scratch XDG_CACHE_HOME): nothing depends on the machine that runs this.
 * Then what analyze does when no rule explains a hotspot (an "unclassified
 * hotspot" finding and a rule skeleton), and its exit code 2 on traces it
 * cannot use. Nothing here is measured. */
#include "core/core.h"
#include "rules/calibrate.h"
#include "support/calibration.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/replay.h"
#include "support/run.h"
#include "trace/trace.h"

#include "cli/cli_test.h"
#include "rules/planted.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The calibration cache (and bench's probe floor) go to the scratch
 * folder, with a fixed calibration in it. */
static void setup(void)
{
    cp_t_scratch_calibrated_setup();
    /* it is this machine's calibration, read from the cache, not measured */
    struct cp_machine m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_calibrate(NULL, false, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(m.source, "cache", "the fixed calibration was not used: %s", m.cache_note);
    cr_assert_eq(m.peak_flops_f32, CP_T_CAL_PEAK_F32);
}

TestSuite(rules_planted, .init = setup, .fini = cp_t_scratch_close, .timeout = 300);

/* ---- a trace with injected kernel times ------------------------------------------- */

/* <scratch>/TAG.db: the run of `om` on `threads` threads as the runtime
 * describes it, on the fixed host, with kernel times from `t`
 * (support/replay.h). */
static char *replayed(const char *om, const char *tag, int threads, bool bf16_host,
                      const struct cp_t_timing *t)
{
    char *path = cp_t_fmt("%s/%s.db", cp_t_dir, tag);
    char *db = cp_t_replayed_trace(om, path, threads, bf16_host, t);
    cr_assert_not_null(db, "no replayed trace of %s (see stderr)", om);
    free(path);
    return db;
}

/* Analyze the replayed trace of the planted configuration and expect the
 * planted bottleneck on top. Returns the analysis (caller frees). */
static json_t *expect_replayed(const char *om, const char *tag, int threads, bool bf16_host,
                               const struct cp_t_timing *t, const struct planted *p)
{
    char *db = replayed(om, tag, threads, bf16_host, t);
    json_t *j = analyze(db, NULL, NULL, NULL, NULL, NULL);
    json_t *sc = json_object_get(json_object_get(j, "features"), "scalars");
    cr_assert(json_is_number(json_object_get(sc, "alu_util")),
              "no roofline: analyze did not read the calibration");
    expect_top(j, db, p);
    free(db);
    return j;
}

static bool contains(const char *s, const char *part)
{
    return s && strstr(s, part) != NULL;
}

/* ---- the planted examples ------------------------------------------------------------ */

static bool is_transpose(const char *node, const char *op)
{
    (void)node;
    return strcmp(op, "Transpose") == 0;
}

Test(rules_planted, layout_round_trip_in_nhwc_roundtrip)
{
    char *om = convert("nhwc_roundtrip", "rt", "TransposeRoundTripEliminationPass:off\n", NULL);
    struct cp_t_timing t = {is_transpose, 40000, 12000, 0.88};
    struct planted p = planted_round_trip();
    json_decref(expect_replayed(om, "rt", 2, false, &t, &p));
    free(om);
}

/* The scores of an attention block: its Q.K MatMul, the scaling Mul, the
 * Softmax, the .V MatMul and the head Transposes (not the projections). */
static bool in_attention_scores(const char *node, const char *op)
{
    (void)op;
    return (contains(node, "/attn1/") || contains(node, "/attn2/")) && !contains(node, "/to_");
}

Test(rules_planted, unfused_attention_in_sd_unet_tiny_with_every_pass_off)
{
    char *om = convert("sd_unet_tiny", "sd_off", "ALL:off\n", NULL);
    struct cp_t_timing t = {in_attention_scores, 60000, 12000, 0.88};
    struct planted p = planted_attention();
    json_t *j = expect_replayed(om, "sd_off", 2, false, &t, &p);
    expect_attention_nodes(j, &p);
    json_decref(j);
    free(om);
}

static bool in_layernorm(const char *node, const char *op)
{
    (void)op;
    return contains(node, "/ln1/") || contains(node, "/ln2/");
}

Test(rules_planted, decomposed_layernorm_in_transformer_encoder_op14)
{
    /* one thread; the chains' kernels tiny (under 10 us), so most launches
     * are small and using fewer threads than cores is not a finding */
    char *om = convert("transformer_encoder_op14", "ln", "LayerNormFusionPass:off\n", NULL);
    struct cp_t_timing t = {in_layernorm, 8000, 12000, 0.88};
    struct planted p = planted_layernorm();
    json_decref(expect_replayed(om, "ln", 1, false, &t, &p));
    free(om);
}

static bool is_conv_or_matmul(const char *node, const char *op)
{
    (void)node;
    return contains(op, "Conv") || contains(op, "MatMul") || strcmp(op, "Gemm") == 0;
}

Test(rules_planted, fp32_on_bf16_hardware_in_sd_unet_tiny)
{
    char *om = convert("sd_unet_tiny", "sd_fp32", NULL, NULL);
    /* the rest 20 us, so that the blocked layout's reorders are a
     * (smaller) finding of their own */
    struct cp_t_timing t = {is_conv_or_matmul, 60000, 20000, 0.88};
    struct planted p = planted_fp32_on_bf16();
    json_decref(expect_replayed(om, "sd_fp32", 2, true, &t, &p));
    free(om);
}

static bool none(const char *node, const char *op)
{
    (void)node;
    (void)op;
    return false;
}

Test(rules_planted, launch_bound_in_launch_bound_tiny)
{
    /* every kernel 3 us, and as long again between them */
    char *om = convert("launch_bound_tiny", "lb", NULL, NULL);
    struct cp_t_timing t = {none, 0, 3000, 0.5};
    struct planted p = planted_launch_bound();
    json_decref(expect_replayed(om, "lb", 2, false, &t, &p));
    free(om);
}

/* ---- no rule explains it ------------------------------------------------------------ */

static bool is_conv(const char *node, const char *op)
{
    (void)node;
    return contains(op, "Conv");
}

Test(rules_planted, unclassified_hotspot_gets_a_finding_and_a_skeleton)
{
    /* the convolutions take most of resnet_tiny's time */
    char *om = convert("resnet_tiny", "rn", NULL, NULL);
    struct cp_t_timing t = {is_conv, 50000, 12000, 0.88};
    char *db = replayed(om, "rn", 2, false, &t);
    expect_unclassified_hotspot(db);
    free(db);
    free(om);
}

/* ---- traces analyze cannot use: exit 2, naming the file -------------------------- */

static void expect_exit_2(const char *what, const char *mention, const char *a1, const char *a2,
                          const char *a3)
{
    struct cp_run r;
    cp_run_cli(&r, "analyze", a1, a2, a3, NULL);
    cr_assert_eq(r.exit_code, 2, "%s: exit %d, expected 2\n%s%s", what, r.exit_code, r.out, r.err);
    cr_assert(strstr(r.err, mention), "%s: stderr does not mention '%s': %s", what, mention, r.err);
    cr_assert_eq(r.signal, 0);
    cp_run_release(&r);
}

/* A store with one bench run, its kernels and events, but no latency
 * samples (`samples` false), or no run at all (`run` false). */
static char *store(const char *name, bool run, bool samples)
{
    char *path = cp_t_path(name);
    struct cp_trace_store *s = cp_t_trace_store(path, NULL, NULL);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    if (run) {
        struct cp_trace_run_info info = {
            .kind = "bench", .model_path = "x.om", .threads = 1, .batch = 1, .iterations = 1};
        int64_t id;
        cr_assert_eq(cp_trace_store_begin_run(s, &info, &id, &d), CP_OK, "%s", d.msg);
        struct cp_trace_kernel k = {"relu", "Relu", "c:unary_f32", "[\"relu\"]",
                                    "[]",   "[]",   1e3,           8e3};
        cr_assert_eq(cp_trace_store_add_kernels(s, id, &k, 1, &d), CP_OK, "%s", d.msg);
        if (samples) {
            uint64_t ns = 1000;
            cr_assert_eq(cp_trace_store_add_samples(s, id, 0, &ns, 1, &d), CP_OK, "%s", d.msg);
        }
    }
    cp_trace_store_close(s);
    return path;
}

Test(rules_planted, analyze_refuses_what_is_not_a_usable_trace)
{
    char *missing = cp_t_path("missing.db");
    expect_exit_2("a missing trace", "missing.db", missing, NULL, NULL);

    char *text = cp_t_path("notes.db");
    ct_write_text(text, "these are notes, not a trace\n");
    expect_exit_2("a text file", "notes.db", text, NULL, NULL);

    char buf[1024];
    expect_exit_2("an ONNX model", "resnet_tiny.onnx",
                  cp_example_model(buf, sizeof buf, "resnet_tiny"), NULL, NULL);

    char *empty = store("empty.db", false, false);
    expect_exit_2("a store without runs", "empty.db", empty, NULL, NULL);

    /* a usable store, but rules that are not */
    char *ok = store("ok.db", true, true);
    expect_exit_2("a missing rules folder", "nowhere", ok, "--rules", "/nonexistent/nowhere");
    char *bad = cp_t_path("bad.yaml");
    ct_write_text(bad, "rules:\n  - name: x\n    bottleneck_type: y\n    indicators:\n"
                       "      - device_utl > 1%\n");
    char *where = cp_t_fmt("%s:5:9: ", bad);
    expect_exit_2("a rule file with a typo", where, ok, "--rules", bad);
    expect_exit_2("--run 0", "--run", ok, "--run", "0");
    expect_exit_2("an unknown target", "--target", ok, "--target", "speed");

    free(where);
    free(bad);
    free(ok);
    free(empty);
    free(text);
    free(missing);
}

/* A run with kernels but no latency sample measured nothing: there is no
 * iteration time to share out, so there is nothing to diagnose. */
Test(rules_planted, analyze_refuses_a_run_without_samples)
{
    char *nosamples = store("nosamples.db", true, false);
    expect_exit_2("a run without samples", "nosamples.db", nosamples, NULL, NULL);
    struct cp_run r;
    cp_run_cli(&r, "analyze", nosamples, NULL);
    cr_assert(strstr(r.err, "sample"), "the error says what is missing: %s", r.err);
    cp_run_release(&r);
    free(nosamples);
}
