/* Features from a trace (rules/features.h) and the perf counters behind
 * cache_miss_rate (trace/perf.h).
 *
 * A hand-built store pins down the arithmetic: every figure of it is
 * chosen so that device_util, the overhead shares, launches, small
 * kernels, layout and compute shares, the roofline against a fixed
 * machine and the perf-based features have exact expected values. Real
 * traces of the example models (converted with every pass off and with
 * the defaults, then benchmarked with --trace through the CLI) pin down
 * the pattern detection: unfused attention and decomposed LayerNorm with
 * their ONNX node names when the passes are off, none of them when on.
 * Nothing asserts on time. */
#include "rules/features.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/run.h"
#include "trace/perf.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(features, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 600);

#define EPS 1e-9

static double get(const struct cp_features *f, const char *name)
{
    double v;
    cr_assert(cp_features_get(f, name, &v), "feature %s absent: %s", name,
              cp_features_absent_reason(f, name));
    return v;
}

static void assert_absent(const struct cp_features *f, const char *name, const char *why_part)
{
    double v;
    cr_assert_not(cp_features_get(f, name, &v), "%s should be absent, is %g", name, v);
    cr_assert(isnan(v));
    const char *why = cp_features_absent_reason(f, name);
    cr_assert(strstr(why, why_part), "%s: reason '%s' lacks '%s'", name, why, why_part);
}

/* ---- the hand-built store ------------------------------------------------------------
 *
 * Two measured iterations of 100 us each. Inside each, a runtime "execute"
 * of 90 us holding four kernels back to back and an "input copy" of 2 us:
 *
 *   k0 conv   Conv       40 us  4e6 FLOP  1e5 B  f32
 *   k1 relu   Relu        5 us  1e3 FLOP  2e3 B
 *   k2 tr     Transpose   8 us  0 FLOP    4e3 B
 *   k3 mm     MatMul     30 us  8e6 FLOP  1e5 B  computed in bf16
 *
 * plus warm-up events (iteration -1) that must not count. */

static const char K_IN0[] =
    "[{\"name\":\"x\",\"shape\":[1,4,8,8],\"dtype\":\"f32\",\"layout\":\"NCHW\"},"
    "{\"name\":\"w\",\"shape\":[4,4,3,3],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]";
static const char K_OUT0[] =
    "[{\"name\":\"y0\",\"shape\":[1,4,8,8],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]";
static const char K_IN1[] =
    "[{\"name\":\"y0\",\"shape\":[1,4,8,8],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]";
static const char K_OUT1[] =
    "[{\"name\":\"y1\",\"shape\":[1,4,8,8],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]";
static const char K_IN2[] =
    "[{\"name\":\"y1\",\"shape\":[1,4,8,8],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]";
static const char K_OUT2[] =
    "[{\"name\":\"y2\",\"shape\":[1,8,8,4],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]";
static const char K_IN3[] =
    "[{\"name\":\"y2r\",\"shape\":[64,4],\"dtype\":\"f32\",\"layout\":\"ND\",\"view_of\":\"y2\"},"
    "{\"name\":\"w2\",\"shape\":[4,4],\"dtype\":\"f32\",\"layout\":\"ND\"}]";
static const char K_OUT3[] = "[{\"name\":\"out\",\"shape\":[64,4],\"dtype\":\"f32\",\"layout\":"
                             "\"ND\",\"compute\":\"bf16\"}]";

static const uint64_t K_NS[4] = {40000, 5000, 8000, 30000};

/* Write the store; `perf` adds perf counters. Returns its path. */
static char *hand_store(bool perf)
{
    char *path = cp_t_path("hand.db");
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s;
    cr_assert_eq(cp_trace_store_open(path, &s, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_trace_store_set_meta(s, "host_cores", "4", &d), CP_OK);
    cr_assert_eq(cp_trace_store_set_meta(s, "host_isa_flags", "sse avx2 avx512f avx512_bf16", &d),
                 CP_OK);
    struct cp_trace_run_info info = {
        .kind = "bench",
        .model_path = "hand.om",
        .config_json = "{\"fusion_switches\":\"FlashAttentionFusionPass:off\"}",
        .threads = 2,
        .batch = 1,
        .warmup = 1,
        .iterations = 2,
    };
    int64_t run;
    cr_assert_eq(cp_trace_store_begin_run(s, &info, &run, &d), CP_OK, "%s", d.msg);
    uint64_t lat[2] = {100000, 100000};
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, lat, 2, &d), CP_OK, "%s", d.msg);
    struct cp_trace_kernel k[4] = {
        {"conv", "Conv", "onednn:conv", "[\"conv\"]", K_IN0, K_OUT0, 4e6, 1e5},
        {"relu", "Relu", "c:unary_f32", "[\"relu\"]", K_IN1, K_OUT1, 1e3, 2e3},
        {"tr", "Transpose", "onednn:reorder", "[\"tr\"]", K_IN2, K_OUT2, 0, 4e3},
        {"mm", "MatMul", "onednn:matmul", "[\"mm\",\"mm_bias\"]", K_IN3, K_OUT3, 8e6, 1e5},
    };
    cr_assert_eq(cp_trace_store_add_kernels(s, run, k, 4, &d), CP_OK, "%s", d.msg);

    struct cp_trace_recorder *r = cp_trace_recorder_create(64);
    int32_t exec = cp_trace_intern(r, "execute"), copy = cp_trace_intern(r, "input copy");
    int32_t names[4];
    for (int i = 0; i < 4; i++)
        names[i] = cp_trace_intern(r, k[i].node);
    /* warm-up: a huge kernel event outside the measured loop */
    cp_trace_record(r, CP_LAYER_DEVICE, names[0], 0, -1, 0, 5000000, 0);
    for (int it = 0; it < 2; it++) {
        uint64_t base = 10000000 + (uint64_t)it * 100000, t = base + 1000;
        for (int i = 0; i < 4; i++) {
            cp_trace_record(r, CP_LAYER_DEVICE, names[i], i, it, t, t + K_NS[i], 0);
            t += K_NS[i];
        }
        cp_trace_record_depth(r, CP_LAYER_RUNTIME, copy, -1, it, base + 85000, base + 87000, 0, 1);
        cp_trace_record(r, CP_LAYER_RUNTIME, exec, -1, it, base, base + 90000, 0);
    }
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cp_trace_recorder_free(r);
    if (perf) {
        cr_assert_eq(cp_trace_store_add_counter(s, run, -1, "perf.cache_references", 1000, 0, &d),
                     CP_OK);
        cr_assert_eq(cp_trace_store_add_counter(s, run, -1, "perf.cache_misses", 250, 0, &d),
                     CP_OK);
        cr_assert_eq(
            cp_trace_store_add_counter(s, run, -1, "perf.errno.instructions", ENOENT, 0, &d),
            CP_OK);
        cr_assert_eq(cp_trace_store_add_counter(s, run, -1, "perf.errno.cycles", ENOENT, 0, &d),
                     CP_OK);
        cr_assert_eq(cp_trace_store_add_counter(s, run, -1, "perf.task_clock_ns", 100000, 0, &d),
                     CP_OK);
    }
    cp_trace_store_close(s);
    return path;
}

static struct cp_machine test_machine(void)
{
    struct cp_machine m;
    memset(&m, 0, sizeof m);
    m.cores = 4;
    m.threads_used = 4;
    m.has_bf16 = true;
    m.peak_flops_f32 = 1e12;
    m.peak_flops_f32_1t = 5e11;
    m.peak_flops_bf16 = 4e12;
    m.peak_flops_bf16_1t = 2e12;
    m.mem_bw = 1e11;
    return m;
}

static struct cp_features *compute(const char *path, const struct cp_machine *m)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s;
    cr_assert_eq(cp_trace_store_open_ro(path, &s, &d), CP_OK, "%s", d.msg);
    struct cp_features *f = NULL;
    cr_assert_eq(cp_features_compute(s, -1, m, &f, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    cr_assert_not_null(f);
    return f;
}

Test(features, hand_store_time_shares_and_launches)
{
    char *path = hand_store(false);
    struct cp_features *f = compute(path, NULL);
    cr_assert_float_eq(get(f, "iterations"), 2, EPS);
    cr_assert_float_eq(get(f, "latency_mean"), 100e-6, EPS);
    cr_assert_float_eq(get(f, "latency_p99"), 100e-6, EPS);
    cr_assert_float_eq(get(f, "latency_cv"), 0, EPS);
    cr_assert_float_eq(get(f, "throughput"), 10000, 1e-6);
    cr_assert_float_eq(get(f, "kernel_time"), 83e-6, EPS);
    /* 83 of 100 us covered by kernels; the runtime covers 90 */
    cr_assert_float_eq(get(f, "device_util"), 0.83, EPS);
    cr_assert_float_eq(get(f, "runtime_overhead_share"), 0.07, EPS);
    cr_assert_float_eq(get(f, "host_overhead_share"), 0.10, EPS);
    cr_assert_float_eq(get(f, "io_copy_share"), 0.02, EPS);
    cr_assert_float_eq(get(f, "n_kernels"), 4, EPS);
    cr_assert_float_eq(get(f, "launches_per_iteration"), 4, EPS);
    /* relu (5 us) and tr (8 us) are under 10 us: 4 of 8 launches */
    cr_assert_float_eq(get(f, "small_kernel_share"), 0.5, EPS);
    cr_assert_float_eq(get(f, "small_kernel_time_share"), 13.0 / 83, EPS);
    cr_assert_float_eq(get(f, "layout_transform_share"), 8.0 / 83, EPS);
    cr_assert_float_eq(get(f, "transpose_share"), 8.0 / 83, EPS);
    cr_assert_float_eq(get(f, "transdata_share"), 0, EPS);
    cr_assert_float_eq(get(f, "copy_share"), 0, EPS);
    cr_assert_float_eq(get(f, "compute_share"), 70.0 / 83, EPS);
    cr_assert_float_eq(get(f, "fp32_compute_share"), 40.0 / 83, EPS);
    cr_assert_float_eq(get(f, "bf16_compute_share"), 30.0 / 83, EPS);
    cr_assert_float_eq(get(f, "bf16_capable"), 1, EPS);
    cr_assert_float_eq(get(f, "threads"), 2, EPS);
    cr_assert_float_eq(get(f, "cores"), 4, EPS);
    cr_assert_float_eq(get(f, "threads_per_core"), 0.5, EPS);
    cr_assert_float_eq(get(f, "batch"), 1, EPS);
    /* achieved over kernel time: (4e6 + 1e3 + 0 + 8e6) FLOP in 83 us */
    cr_assert_float_eq(get(f, "achieved_flops"), 12.001e6 / 83e-6, 1);
    cr_assert_float_eq(get(f, "achieved_bw"), 2.06e5 / 83e-6, 1e-3);
    /* no machine: the roofline is absent, with the reason */
    assert_absent(f, "alu_util", "calibrate");
    assert_absent(f, "memory_bandwidth_util", "calibrate");
    assert_absent(f, "memory_bound_share", "calibrate");
    assert_absent(f, "cache_miss_rate", "no perf counters");

    cr_assert_eq(f->n_kernels, 4);
    const struct cp_kernel_feat *k = f->kernels;
    cr_assert_str_eq(k[0].op_type, "Conv");
    cr_assert_str_eq(k[0].dtype, "f32");
    cr_assert_str_eq(k[3].dtype, "bf16");
    cr_assert_str_eq(k[3].origins, "[\"mm\",\"mm_bias\"]");
    cr_assert_float_eq(k[0].mean_ns, 40000, EPS);
    cr_assert_float_eq(k[0].calls, 1, EPS);
    cr_assert_float_eq(k[0].time_share, 40.0 / 83, EPS);
    cr_assert_float_eq(k[0].intensity, 40, EPS);
    cr_assert_float_eq(k[0].achieved_flops, 1e11, 1e-3);
    cr_assert(isnan(k[0].alu_util));
    cr_assert_not(k[0].has_bound);
    cr_assert(k[1].small && k[2].small && !k[0].small && !k[3].small);
    cr_assert(k[2].layout_transform && k[0].compute && k[3].compute && !k[1].compute);

    /* op types, largest first */
    cr_assert_eq(f->n_op_types, 4);
    cr_assert_str_eq(f->op_types[0].op_type, "Conv");
    cr_assert_str_eq(f->op_types[1].op_type, "MatMul");
    cr_assert_float_eq(f->op_types[1].time_share, 30.0 / 83, EPS);

    /* Conv -> Relu is the one unfused pattern; the switch file did not turn
     * its pass off */
    cr_assert_eq(f->n_patterns, 1);
    const struct cp_pattern *p = &f->patterns[0];
    cr_assert_str_eq(p->kind, "conv_act");
    cr_assert_str_eq(p->fix_pass, "ConvBiasActivationFusionPass");
    cr_assert_not(p->fix_pass_off);
    cr_assert_eq(p->n, 2);
    cr_assert_eq(p->kernels[0], 0);
    cr_assert_eq(p->kernels[1], 1);
    cr_assert_float_eq(p->time_ns, 45000, EPS);
    cr_assert_float_eq(p->time_share, 45.0 / 83, EPS);
    cr_assert_str_eq(p->origins_json, "[\"conv\",\"relu\"]");
    cr_assert_str_eq(k[1].pattern, "conv_act");
    cr_assert_str_eq(k[3].pattern, "");
    cr_assert_float_eq(get(f, "unfused_count"), 1, EPS);
    cr_assert_float_eq(get(f, "unfused_conv_act_count"), 1, EPS);
    cr_assert_float_eq(get(f, "unfused_conv_act_share"), 45.0 / 83, EPS);
    cr_assert_float_eq(get(f, "unfused_attention_count"), 0, EPS);
    cr_assert_float_eq(get(f, "unfused_share"), 45.0 / 83, EPS);
    cp_features_free(f);
    free(path);
}

Test(features, hand_store_roofline_against_a_fixed_machine)
{
    char *path = hand_store(false);
    struct cp_machine m = test_machine();
    struct cp_features *f = compute(path, &m);
    /* 2 threads of 4: f32 peak 2 x 5e11 = 1e12, bf16 2 x 2e12 = 4e12 */
    const struct cp_kernel_feat *k = f->kernels;
    cr_assert_float_eq(k[0].alu_util, 0.1, EPS);
    cr_assert_float_eq(k[0].bw_util, 0.025, EPS);
    cr_assert(k[0].has_bound && !k[0].memory_bound); /* intensity 40 > ridge 10 */
    cr_assert(k[1].has_bound && k[1].memory_bound);  /* 0.5 */
    cr_assert(k[2].has_bound && k[2].memory_bound);  /* 0 */
    cr_assert_float_eq(k[2].alu_util, 0, EPS);
    cr_assert_float_eq(k[3].alu_util, (8e6 / 30e-6) / 4e12, EPS);
    cr_assert(k[3].has_bound && !k[3].memory_bound); /* 80 > bf16 ridge 40 */
    /* time-weighted: sum(flops / peak) / kernel time */
    cr_assert_float_eq(get(f, "alu_util"), (4e6 / 1e12 + 1e3 / 1e12 + 8e6 / 4e12) / 83e-6, EPS);
    cr_assert_float_eq(get(f, "memory_bandwidth_util"), (2.06e5 / 1e11) / 83e-6, EPS);
    cr_assert_float_eq(get(f, "memory_bound_share"), 13.0 / 83, EPS);
    cr_assert_float_eq(get(f, "compute_bound_share"), 70.0 / 83, EPS);
    cp_features_free(f);
    free(path);
}

Test(features, hand_store_perf_counters)
{
    char *path = hand_store(true);
    struct cp_features *f = compute(path, NULL);
    cr_assert_float_eq(get(f, "cache_miss_rate"), 0.25, EPS);
    /* task clock 100 us over 200 us of measured wall on 4 cores */
    cr_assert_float_eq(get(f, "cpu_util"), 0.125, EPS);
    assert_absent(f, "ipc", "no PMU");
    cp_features_free(f);
    free(path);
}

/* ---- the rule language ---------------------------------------------------------------- */

static struct cp_expr_value eval(const struct cp_features *f, const char *text)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_expr *e;
    cr_assert_eq(cp_expr_parse(text, NULL, 1, 1, &e, &d), CP_OK, "%s: %s", text, d.msg);
    size_t ns, nf;
    const char *const *sn = cp_features_scalar_names(&ns);
    const char *const *fn = cp_features_field_names(&nf);
    cr_assert_eq(cp_expr_check(e, sn, ns, fn, nf, &d), CP_OK, "%s: %s", text, d.msg);
    struct cp_expr_env env;
    cp_features_env(f, &env);
    struct cp_expr_value v;
    cr_assert_eq(cp_expr_eval(e, &env, &v, &d), CP_OK, "%s: %s", text, d.msg);
    cp_expr_free(e);
    return v;
}

static void assert_bool(const struct cp_features *f, const char *text, bool want)
{
    struct cp_expr_value v = eval(f, text);
    cr_assert_eq(v.type, CP_EXPR_BOOL, "%s: %s", text, cp_expr_type_name(v.type));
    cr_assert_eq(v.boolean, want, "%s", text);
}

Test(features, rule_expressions_read_scalars_and_rows)
{
    char *path = hand_store(true);
    struct cp_machine m = test_machine();
    struct cp_features *f = compute(path, &m);
    assert_bool(f, "share(op_type == \"Transpose\") > 5%", true);
    assert_bool(f, "device_util > 90%", false);
    assert_bool(f, "cache_miss_rate > 20%", true);
    assert_bool(f, "alu_util < 60%", true);
    assert_bool(f, "latency_p99 < 1ms", true);
    assert_bool(f, "count(bound == \"memory\") == 2", true);
    assert_bool(f, "count(dtype == \"bf16\" and compute) == 1", true);
    assert_bool(f, "count(pattern == \"conv_act\") == 2", true);
    assert_bool(f, "max(memory_bandwidth_util) < 5%", true);
    assert_bool(f, "count(time_per_call < 10us) == 2", true);
    /* an absent feature is ABSENT, not an error */
    struct cp_expr_value v = eval(f, "ipc > 1");
    cr_assert_eq(v.type, CP_EXPR_ABSENT);
    cp_features_free(f);
    free(path);
}

Test(features, names_and_json)
{
    size_t n;
    const char *const *names = cp_features_scalar_names(&n);
    cr_assert_gt(n, 40);
    const char *want[] = {"device_util",
                          "runtime_overhead_share",
                          "alu_util",
                          "memory_bandwidth_util",
                          "cache_miss_rate",
                          "small_kernel_share",
                          "unfused_attention_share",
                          "fp32_compute_share",
                          "threads_per_core"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        bool found = false;
        for (size_t j = 0; j < n; j++)
            found = found || strcmp(names[j], want[i]) == 0;
        cr_assert(found, "%s not listed", want[i]);
        cr_assert(cp_features_is_known(want[i]));
    }
    cr_assert_not(cp_features_is_known("cache_mis_rate"));
    const char *const *fields = cp_features_field_names(&n);
    cr_assert_gt(n, 10);
    cr_assert_str_eq(fields[2], "op_type");

    char *path = hand_store(false);
    struct cp_features *f = compute(path, NULL);
    json_t *tree = cp_features_to_json(f);
    char *text = cp_json_text(tree);
    cr_assert_not_null(text);
    json_decref(tree);
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    cr_assert_not_null(j, "%s: %s", err.text, text);
    cr_assert(json_is_null(json_object_get(json_object_get(j, "scalars"), "alu_util")));
    cr_assert(json_is_string(json_object_get(json_object_get(j, "absent"), "alu_util")));
    cr_assert_eq(json_array_size(json_object_get(j, "kernels")), 4);
    json_t *p0 = json_array_get(json_object_get(j, "patterns"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(p0, "kind")), "conv_act");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(p0, "origins"), 1)), "relu");
    json_decref(j);
    free(text);
    cp_features_free(f);
    free(path);
}

/* ---- bad input ----------------------------------------------------------------------- */

Test(features, store_without_runs_is_invalid_input)
{
    char *path = cp_t_path("empty.db");
    struct cp_trace_store *s = cp_t_trace_store(path, NULL, NULL);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_features *f = (void *)1;
    cr_assert_eq(cp_features_compute(s, -1, NULL, &f, &d), CP_ERR_INVALID);
    cr_assert_null(f);
    cr_assert(strstr(d.msg, "empty.db"), "%s", d.msg);
    cp_trace_store_close(s);
    free(path);
}

Test(features, kernel_json_that_is_not_an_array_is_corrupt)
{
    char *path = cp_t_path("bad.db");
    struct cp_trace_run_info info = {.kind = "bench"};
    int64_t run;
    struct cp_trace_store *s = cp_t_trace_store(path, &info, &run);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_kernel k = {"n", "Relu", "ref", "[]", "{not json", "[]", 0, 0};
    cr_assert_eq(cp_trace_store_add_kernels(s, run, &k, 1, &d), CP_OK);
    struct cp_features *f = NULL;
    cr_assert_eq(cp_features_compute(s, run, NULL, &f, &d), CP_ERR_CORRUPT);
    cr_assert_null(f);
    cr_assert(strstr(d.msg, "kernel 0") && strstr(d.msg, "inputs"), "%s", d.msg);
    cp_trace_store_close(s);
    free(path);
}

Test(features, run_without_events_has_absent_time_features)
{
    char *path = cp_t_path("noev.db");
    struct cp_trace_run_info info = {.kind = "bench", .threads = 1};
    int64_t run;
    struct cp_trace_store *s = cp_t_trace_store(path, &info, &run);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    uint64_t lat[3] = {1000, 2000, 3000};
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, lat, 3, &d), CP_OK);
    struct cp_features *f = NULL;
    cr_assert_eq(cp_features_compute(s, run, NULL, &f, &d), CP_OK, "%s", d.msg);
    cr_assert_float_eq(get(f, "latency_median"), 2e-6, EPS);
    assert_absent(f, "device_util", "no kernel events");
    assert_absent(f, "kernel_time", "no kernel events");
    assert_absent(f, "unfused_share", "no kernel events");
    cr_assert_float_eq(get(f, "unfused_count"), 0, EPS);
    cp_features_free(f);
    cp_trace_store_close(s);
    free(path);
}

/* ---- perf counters ---------------------------------------------------------------------- */

static volatile double g_sink;

static void spin(int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += i * 1e-9;
    g_sink = s;
}

/* Paused counters keep their counts and do not count the paused work
 * (bench pauses them around its interference probe). Checked on the task
 * clock, the one counter a VM without a PMU still has: work done while
 * paused is 4 times the counted work, so a pause that did nothing would
 * read about 5 times as much. */
Test(features, perf_counters_pause_and_resume)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_perf *p = NULL;
    cr_assert_eq(cp_perf_open(&p, &d), CP_OK, "%s", d.msg);
    struct cp_perf_reading one, paused;
    cr_assert_eq(cp_perf_start(p, &d), CP_OK, "%s", d.msg);
    spin(4000000);
    cr_assert_eq(cp_perf_stop(p, &one, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_perf_start(p, &d), CP_OK, "%s", d.msg);
    spin(2000000);
    cr_assert_eq(cp_perf_pause(p, &d), CP_OK, "%s", d.msg);
    spin(16000000);
    cr_assert_eq(cp_perf_resume(p, &d), CP_OK, "%s", d.msg);
    spin(2000000);
    cr_assert_eq(cp_perf_stop(p, &paused, &d), CP_OK, "%s", d.msg);
    if (one.valid[CP_PERF_TASK_CLOCK] && paused.valid[CP_PERF_TASK_CLOCK]) {
        double a = one.value[CP_PERF_TASK_CLOCK], b = paused.value[CP_PERF_TASK_CLOCK];
        cr_assert_gt(b, 0);
        cr_assert_lt(b, 2.5 * a, "paused work was counted: %g vs %g ns", b, a);
    }
    cp_perf_close(p);
}

Test(features, perf_counters_open_or_say_why)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_perf *p = NULL;
    cr_assert_eq(cp_perf_open(&p, &d), CP_OK, "%s", d.msg);
    cr_assert_not_null(p);
    for (int c = 0; c < CP_PERF_N_COUNTERS; c++) {
        if (cp_perf_has(p, (enum cp_perf_counter)c))
            cr_assert_str_eq(cp_perf_reason(p, (enum cp_perf_counter)c), "");
        else
            cr_assert_gt(strlen(cp_perf_reason(p, (enum cp_perf_counter)c)), 0);
    }
    cr_assert_eq(cp_perf_start(p, &d), CP_OK, "%s", d.msg);
    double s = 0;
    for (int i = 0; i < 2000000; i++)
        s += i * 1e-9;
    g_sink = s;
    struct cp_perf_reading r;
    cr_assert_eq(cp_perf_stop(p, &r, &d), CP_OK, "%s", d.msg);
    for (int c = 0; c < CP_PERF_N_COUNTERS; c++)
        if (!cp_perf_has(p, (enum cp_perf_counter)c))
            cr_assert_not(r.valid[c]);
    if (r.valid[CP_PERF_TASK_CLOCK])
        cr_assert_gt(r.value[CP_PERF_TASK_CLOCK], 0);

    /* stored, then read back as features: present values, or absent with
     * the reason the open failed */
    char *path = cp_t_path("perf.db");
    struct cp_trace_run_info info = {.kind = "bench", .threads = 1};
    int64_t run;
    struct cp_trace_store *s2 = cp_t_trace_store(path, &info, &run);
    cr_assert_not_null(s2);
    uint64_t lat[2] = {1000000, 1000000};
    cr_assert_eq(cp_trace_store_add_samples(s2, run, 0, lat, 2, &d), CP_OK);
    cr_assert_eq(cp_perf_store(s2, run, p, &r, &d), CP_OK, "%s", d.msg);
    struct cp_features *f = NULL;
    cr_assert_eq(cp_features_compute(s2, run, NULL, &f, &d), CP_OK, "%s", d.msg);
    double v;
    if (cp_perf_has(p, CP_PERF_CACHE_MISSES) && cp_perf_has(p, CP_PERF_CACHE_REFERENCES) &&
        r.value[CP_PERF_CACHE_REFERENCES] > 0)
        cr_assert(cp_features_get(f, "cache_miss_rate", &v));
    else if (!cp_perf_has(p, CP_PERF_CACHE_MISSES))
        assert_absent(f, "cache_miss_rate", cp_perf_reason(p, CP_PERF_CACHE_MISSES));
    cp_features_free(f);
    cp_trace_store_close(s2);
    cp_perf_close(p);
    free(path);
}

Test(features, perf_errno_reasons_name_the_cause)
{
    char buf[256];
    cr_assert(strstr(cp_perf_errno_reason(ENOENT, 2, buf, sizeof buf), "PMU"));
    cr_assert(strstr(cp_perf_errno_reason(EACCES, 2, buf, sizeof buf), "paranoid is 2"));
    cr_assert(strstr(cp_perf_errno_reason(EPERM, -2, buf, sizeof buf), "seccomp"));
    cr_assert(strstr(cp_perf_errno_reason(ENOSYS, 2, buf, sizeof buf), "does not exist"));
    cr_assert_str_eq(cp_perf_counter_name(CP_PERF_CACHE_MISSES), "cache_misses");
    cr_assert_null(cp_perf_counter_name((enum cp_perf_counter)99));
}

/* ---- real traces of the example models ------------------------------------------------- */

/* Convert examples/models/NAME.onnx (all passes off when `off`) and bench it
 * with --trace; returns the trace path. */
static char *traced(const char *name, bool off)
{
    char *s_flag = ct_switch_file("all_off.cfg", "ALL:off\n");
    char *out = cp_t_fmt("%s_%s", name, off ? "off" : "on");
    char *om = ct_convert_to(name, out, off ? s_flag : NULL, NULL);
    char *db = cp_t_fmt("%s/%s.db", cp_t_dir, out);
    cr_assert(cp_t_bench_trace(om, db, "--iterations", "3", "--warmup", "1", NULL),
              "bench %s failed (see stderr)", name);
    free(s_flag);
    free(out);
    free(om);
    return db;
}

static size_t count_kind(const struct cp_features *f, const char *kind)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_patterns; i++)
        n += strcmp(f->patterns[i].kind, kind) == 0;
    return n;
}

static const struct cp_pattern *pattern_with_origin(const struct cp_features *f, const char *kind,
                                                    const char *origin)
{
    char *quoted = cp_t_fmt("\"%s\"", origin);
    const struct cp_pattern *found = NULL;
    for (size_t i = 0; i < f->n_patterns && !found; i++)
        if (strcmp(f->patterns[i].kind, kind) == 0 && strstr(f->patterns[i].origins_json, quoted))
            found = &f->patterns[i];
    free(quoted);
    return found;
}

Test(features, sd_unet_unfused_attention_when_passes_are_off)
{
    char *db = traced("sd_unet_tiny", true);
    struct cp_features *f = compute(db, NULL);
    cr_assert_eq(count_kind(f, "attention"), 4);
    cr_assert_float_eq(get(f, "unfused_attention_count"), 4, EPS);
    cr_assert_gt(get(f, "unfused_attention_share"), 0);
    const struct cp_pattern *p = pattern_with_origin(f, "attention", "/attn_down/attn1/Softmax");
    cr_assert_not_null(p);
    cr_assert_str_eq(p->fix_pass, "FlashAttentionFusionPass");
    cr_assert(p->fix_pass_off);
    cr_assert(strstr(p->origins_json, "\"/attn_down/attn1/MatMul\""), "%s", p->origins_json);
    cr_assert(strstr(p->origins_json, "\"/attn_down/attn1/MatMul_1\""), "%s", p->origins_json);
    cr_assert(strstr(p->origins_json, "\"/attn_down/attn1/Mul\""), "%s", p->origins_json);
    /* the cross-attention of the up block, with its head split */
    p = pattern_with_origin(f, "attention", "/attn_up/attn2/Softmax");
    cr_assert_not_null(p);
    cr_assert(strstr(p->origins_json, "\"/attn_up/attn2/Transpose_3\""), "%s", p->origins_json);
    /* GroupNorm as InstanceNorm + affine + SiLU, and the decomposed GELU */
    cr_assert_eq(count_kind(f, "groupnorm"), 9);
    cr_assert_eq(count_kind(f, "gelu"), 2);
    cr_assert_eq(count_kind(f, "layernorm"), 0); /* opset 17: LayerNormalization nodes */
    cp_features_free(f);

    /* The LayerNormalization reads a Reshape of the Transpose's output; the
     * Reshape is a view (no kernel), and the trace links through it. */
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s;
    cr_assert_eq(cp_trace_store_open_ro(db, &s, &d), CP_OK, "%s", d.msg);
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(cp_trace_store_db(s),
                                    "SELECT inputs FROM kernels WHERE node = "
                                    "'/attn_down/norm1/LayerNormalization'",
                                    -1, &st, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    const char *in = (const char *)sqlite3_column_text(st, 0);
    cr_assert(strstr(in, "\"name\":\"/attn_down/Reshape_output_0\"") &&
                  strstr(in, "\"view_of\":\"/attn_down/Transpose_output_0\""),
              "%s", in);
    sqlite3_finalize(st);
    cp_trace_store_close(s);
    free(db);
}

Test(features, sd_unet_no_unfused_attention_with_default_passes)
{
    char *db = traced("sd_unet_tiny", false);
    struct cp_features *f = compute(db, NULL);
    cr_assert_float_eq(get(f, "unfused_attention_count"), 0, EPS);
    cr_assert_float_eq(get(f, "unfused_groupnorm_count"), 0, EPS);
    cr_assert_float_eq(get(f, "unfused_gelu_count"), 0, EPS);
    size_t fused = 0;
    for (size_t i = 0; i < f->n_kernels; i++)
        fused += strcmp(f->kernels[i].op_type, "FusedAttention") == 0;
    cr_assert_eq(fused, 4);
    /* the blocked layout leaves TransData pairs around the GroupNorms; the
     * pass that made them ran (not switched off) */
    const struct cp_pattern *rt = NULL;
    for (size_t i = 0; i < f->n_patterns && !rt; i++)
        if (strcmp(f->patterns[i].kind, "layout_roundtrip") == 0)
            rt = &f->patterns[i];
    if (rt) {
        cr_assert_str_eq(rt->fix_pass, "LayoutTransformPass");
        cr_assert_not(rt->fix_pass_off);
    }
    cr_assert_gt(get(f, "layout_transform_share"), 0);
    cp_features_free(f);
    free(db);
}

Test(features, transformer_op14_decomposed_layernorm_when_passes_are_off)
{
    char *db = traced("transformer_encoder_op14", true);
    struct cp_features *f = compute(db, NULL);
    cr_assert_eq(count_kind(f, "layernorm"), 4);
    const struct cp_pattern *p = pattern_with_origin(f, "layernorm", "/layers.0/ln1/ReduceMean");
    cr_assert_not_null(p);
    cr_assert_str_eq(p->fix_pass, "LayerNormFusionPass");
    cr_assert_eq(p->n, 9); /* ReduceMean Sub Pow ReduceMean Add Sqrt Div Mul Add */
    cr_assert(strstr(p->origins_json, "\"/layers.0/ln1/Sqrt\""), "%s", p->origins_json);
    cr_assert_eq(count_kind(f, "attention"), 2);
    cr_assert_eq(count_kind(f, "gelu"), 2);
    cp_features_free(f);
    free(db);

    db = traced("transformer_encoder_op14", false);
    f = compute(db, NULL);
    cr_assert_eq(count_kind(f, "layernorm"), 0);
    cr_assert_eq(count_kind(f, "attention"), 0);
    cr_assert_eq(count_kind(f, "gelu"), 0);
    cp_features_free(f);
    free(db);
}

/* A run of 40 iterations of 1 ms (conv 400 us, mm 500 us) in which
 * iterations 10..19 ran while a neighbour competed: 2 ms, mm 1500 us, and
 * their interference probe at 1.6x the floor. With `probe`, every
 * iteration has its probe_ns counter. */
static char *disturbed_store(bool probe)
{
    char *path = cp_t_path(probe ? "probed.db" : "unprobed.db");
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s;
    cr_assert_eq(cp_trace_store_open(path, &s, &d), CP_OK, "%s", d.msg);
    struct cp_trace_run_info info = {
        .kind = "bench", .model_path = "d.om", .threads = 1, .batch = 1, .iterations = 40};
    int64_t run;
    cr_assert_eq(cp_trace_store_begin_run(s, &info, &run, &d), CP_OK, "%s", d.msg);
    enum { N = 40 };
    uint64_t lat[N];
    double pr[N];
    for (int i = 0; i < N; i++) {
        bool busy = i >= 10 && i < 20;
        lat[i] = busy ? 2000000 : 1000000;
        pr[i] = busy ? 16000 : 10000 + i % 3;
    }
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, lat, N, &d), CP_OK, "%s", d.msg);
    if (probe)
        cr_assert_eq(cp_trace_store_add_counter_series(s, run, "probe_ns", 0, pr, N, &d), CP_OK,
                     "%s", d.msg);
    struct cp_trace_kernel k[2] = {
        {"conv", "Conv", "onednn:conv", "[\"conv\"]", K_IN0, K_OUT0, 4e6, 1e5},
        {"mm", "MatMul", "onednn:matmul", "[\"mm\"]", K_IN3, K_OUT3, 8e6, 1e5},
    };
    cr_assert_eq(cp_trace_store_add_kernels(s, run, k, 2, &d), CP_OK, "%s", d.msg);
    struct cp_trace_recorder *r = cp_trace_recorder_create(256);
    int32_t names[2] = {cp_trace_intern(r, "conv"), cp_trace_intern(r, "mm")};
    for (int it = 0; it < N; it++) {
        uint64_t t = 100000000 + (uint64_t)it * 3000000;
        uint64_t mm = it >= 10 && it < 20 ? 1500000 : 500000;
        cp_trace_record(r, CP_LAYER_DEVICE, names[0], 0, it, t, t + 400000, 0);
        cp_trace_record(r, CP_LAYER_DEVICE, names[1], 1, it, t + 400000, t + 400000 + mm, 0);
    }
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cp_trace_recorder_free(r);
    cp_trace_store_close(s);
    return path;
}

Test(features, timing_features_describe_the_undisturbed_iterations)
{
    /* 1 ms iterations: a window of 2 iterations each side, so 8..21 go and
     * 26 stay */
    char *path = disturbed_store(true);
    struct cp_features *f = compute(path, NULL);
    cr_assert_float_eq(get(f, "iterations"), 26, EPS);
    cr_assert_float_eq(get(f, "latency_mean"), 1e-3, EPS);
    cr_assert_float_eq(get(f, "kernel_time"), 900e-6, EPS);
    cr_assert_float_eq(f->kernels[1].mean_ns, 500000, EPS);
    cr_assert_float_eq(f->kernels[1].time_share, 5.0 / 9, EPS);
    cr_assert_float_eq(get(f, "device_util"), 0.9, EPS);
    cp_features_free(f);
    free(path);

    /* the same run without the probe: every iteration counts */
    path = disturbed_store(false);
    f = compute(path, NULL);
    cr_assert_float_eq(get(f, "iterations"), 40, EPS);
    cr_assert_float_eq(get(f, "latency_mean"), 1.25e-3, EPS);
    cr_assert_float_eq(f->kernels[1].mean_ns, 750000, EPS);
    cp_features_free(f);
    free(path);
}
