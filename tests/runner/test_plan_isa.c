/* Plans on a CPU that lacks an ISA a kernel needs. Kernels say which CPU
 * features they need for a node (runner/cpu/kernel.h, `isa`); the registry
 * passes over those the host cannot execute, and a bf16 node whose only
 * remaining kernel is the fp32 reference is refused with a message naming
 * the node, the dtype, the kernel and the missing features. Nothing fails
 * obscurely inside a kernel (before, a bf16 Conv on an AVX2 CPU ended in
 * "oneDNN convolution primitive descriptor failed (status 3)", exit 3).
 *
 * Most tests describe the CPU instead of detecting it (the runtime's host,
 * a private field the runner's tests may set), so they pin the behaviour
 * on every machine: an AVX2-only EPYC for "lacks", and the selection alone
 * (nothing executed) for a Sapphire Rapids with AVX-512 and AMX. The last
 * two run on this machine as it is, whichever kind it is. */
#include "core/host.h"
#include "om/om.h"
#include "runner/cpu/kernel.h"
#include "runner/runner.h"
#include "runner/runner_internal.h"
#include "support/run.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CPUs --------------------------------------------------------------------------- */

static const char EPYC_AVX2[] =
    "processor\t: 0\nmodel name\t: AMD EPYC 7B13\n"
    "flags\t\t: fpu sse sse2 ssse3 fma cx16 sse4_1 sse4_2 popcnt aes xsave avx f16c bmi1 avx2 "
    "bmi2 adx sha_ni vaes vpclmulqdq\n";
static const char XEON_SPR[] =
    "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    "flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd "
    "avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8\n";
/* AVX-512 without its bf16 dot products (Skylake-SP): oneDNN still runs
 * bf16 convolutions there, emulating the dot products. */
static const char XEON_SKX[] =
    "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6148\n"
    "flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd "
    "avx512bw avx512vl\n";

static void describe(struct cp_host *h, const char *cpuinfo)
{
    memset(h, 0, sizeof *h);
    cp_host_parse_cpuinfo(h, cpuinfo, strlen(cpuinfo));
}

/* A runtime whose kernels are chosen for `cpuinfo` (NULL: this machine). */
static struct cp_runtime *runtime_on(const char *cpuinfo)
{
    struct cp_runtime_options o = {.threads = 1};
    struct cp_runtime *rt;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_runtime_create(&o, &rt, &d), CP_OK, "%s", d.msg);
    if (cpuinfo)
        describe(&rt->host, cpuinfo);
    return rt;
}

/* ---- graphs ------------------------------------------------------------------------- */

static void weights(struct cp_graph *g, const char *name, int64_t cout, int64_t cin, int seed)
{
    int64_t n = cout * cin * 9;
    float *w = malloc((size_t)n * sizeof *w);
    cr_assert_not_null(w);
    for (int64_t i = 0; i < n; i++)
        w[i] = (float)((i * 37 + seed) % 17) / 17.0f - 0.5f;
    gb_init(g, name, CP_DTYPE_F32, 4, GB_DIMS(cout, cin, 3, 3), w);
    free(w);
}

/* x [1,16,8,8] -> Conv 3x3 (32 filters) -> [Conv 3x3 (32 filters) ->] y,
 * every Conv with compute_precision `precision` (NULL: none). */
static struct cp_graph *conv_graph(const char *precision, int convs)
{
    struct cp_graph *g = gb_graph(17);
    cp_graph_set_name(g, "convs");
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 16, 8, 8));
    weights(g, "w1", 32, 16, 1);
    weights(g, "w2", 32, 32, 2);
    const char *outs[] = {"t", "y"};
    for (int i = 0; i < convs; i++) {
        char name[16];
        snprintf(name, sizeof name, "conv_%d", i + 1);
        const char *in = i == 0 ? "x" : "t", *w = i == 0 ? "w1" : "w2";
        int32_t n = gb_node(g, name, "Conv", GB_IN(in, w), GB_IN(outs[i + 2 - convs]));
        cp_node_set_ints(g, n, "pads", GB_DIMS(1, 1, 1, 1), 4);
        if (precision)
            cp_node_set_string(g, n, "compute_precision", precision);
    }
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    return g;
}

/* q [1,2,32,16], k and v [1,2,40,16] -> FusedAttention (2 heads) -> y. */
static struct cp_graph *attention_graph(const char *precision)
{
    struct cp_graph *g = gb_graph(17);
    cp_graph_set_name(g, "attention");
    gb_input(g, "q", CP_DTYPE_F32, 4, GB_DIMS(1, 2, 32, 16));
    gb_input(g, "k", CP_DTYPE_F32, 4, GB_DIMS(1, 2, 40, 16));
    gb_input(g, "v", CP_DTYPE_F32, 4, GB_DIMS(1, 2, 40, 16));
    int32_t in[3] = {cp_graph_find_tensor(g, "q"), cp_graph_find_tensor(g, "k"),
                     cp_graph_find_tensor(g, "v")};
    int32_t out = gb_tensor(g, "y", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE), idx;
    const char *origin = "attn";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, "attn", "FusedAttention", CP_DOMAIN, in, 3, &out, 1, &origin,
                                   1, &idx, &d),
                 CP_OK, "%s", d.msg);
    cp_node_set_int(g, idx, "num_heads", 2);
    cp_node_set_float(g, idx, "scale", 0.25f);
    if (precision)
        cp_node_set_string(g, idx, "compute_precision", precision);
    cr_assert_eq(cp_graph_add_output(g, out), CP_OK);
    return g;
}

/* ---- running ------------------------------------------------------------------------ */

static struct cp_model *model_of(struct cp_runtime *rt, struct cp_graph *g)
{
    struct cp_model *m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_model_from_graph(rt, g, NULL, &m, &d), CP_OK, "%s", d.msg);
    return m;
}

/* Plan m, feed seeded inputs, run once. OUT: *impl (the kernel of the
 * first node, static), the output (caller releases). */
static struct cp_host_tensor run_model(struct cp_model *m, bool reference_only, const char **impl)
{
    struct cp_plan_options po = {.buffer_optimize = -1, .reference_only = reference_only};
    struct cp_plan *p;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_create(m, &po, &p, &d), CP_OK, "%s", d.msg);
    for (size_t i = 0; i < cp_plan_n_inputs(p); i++) {
        const struct cp_tensor *t = cp_plan_input(p, i);
        struct cp_host_tensor h;
        memset(&h, 0, sizeof h);
        snprintf(h.name, sizeof h.name, "%s", t->name);
        h.dtype = t->dtype;
        h.rank = t->shape.rank;
        for (int k = 0; k < h.rank; k++)
            h.dims[k] = t->shape.dims[k].value;
        cr_assert_eq(cp_tensor_fill_random(&h, 7 + i, &d), CP_OK, "%s", d.msg);
        cr_assert_eq(cp_plan_set_input(p, i, &h, &d), CP_OK, "%s", d.msg);
        cp_host_tensor_release(&h);
    }
    cr_assert_eq(cp_plan_run(p, -1, &d), CP_OK, "%s", d.msg);
    static char name[64];
    snprintf(name, sizeof name, "%s", cp_plan_kernels(p)[0].impl);
    *impl = name;
    struct cp_host_tensor y;
    cr_assert_eq(cp_plan_get_output(p, 0, &y, &d), CP_OK, "%s", d.msg);
    cp_plan_free(p);
    return y;
}

static double rel_l2(const struct cp_host_tensor *got, const struct cp_host_tensor *want)
{
    cr_assert_eq(got->nbytes, want->nbytes);
    const float *a = got->data, *b = want->data;
    double num = 0, den = 0;
    for (size_t i = 0; i < want->nbytes / sizeof(float); i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

/* The error cp_plan_create gives. */
static enum cp_status plan_error(struct cp_model *m, char *msg, size_t cap)
{
    struct cp_plan_options po = {.buffer_optimize = -1};
    struct cp_plan *p = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_plan_create(m, &po, &p, &d);
    cr_assert_neq(st, CP_OK, "the plan was expected to fail");
    cr_assert_null(p);
    snprintf(msg, cap, "%s", d.msg);
    return st;
}

/* ---- the registry ------------------------------------------------------------------- */

/* What cp_kernel_select picks for node 0 of g on `cpuinfo`. */
static const struct cp_kernel *pick(struct cp_graph *g, const char *cpuinfo,
                                    struct cp_kernel_passed *passed)
{
    struct cp_host h;
    describe(&h, cpuinfo);
    gb_infer_ok(g);
    return cp_kernel_select(g, cp_graph_node(g, 0), &h, false, passed);
}

Test(plan_isa, the_kernel_choice_follows_the_cpu_description)
{
    struct cp_kernel_passed passed;
    struct cp_graph *g = attention_graph("bf16");
    cr_assert_str_eq(pick(g, XEON_SPR, &passed)->name, "c:attention_avx512");
    cr_assert_null(passed.kernel);
    cr_assert_str_eq(pick(g, XEON_SKX, &passed)->name, "c:attention",
                     "bf16 attention without avx512_bf16 takes the portable kernel");
    cr_assert_str_eq(passed.kernel->name, "c:attention_avx512");
    cr_assert_str_eq(passed.missing, "avx512_bf16");
    cr_assert_str_eq(pick(g, EPYC_AVX2, &passed)->name, "c:attention");
    cr_assert_str_eq(passed.missing, "avx512f avx512bw avx512vl avx512_bf16");
    cp_graph_free(g);

    g = attention_graph(NULL);
    cr_assert_str_eq(pick(g, XEON_SKX, &passed)->name, "c:attention_avx512",
                     "fp32 attention needs no avx512_bf16");
    cp_graph_free(g);

    g = conv_graph("bf16", 1);
    cr_assert_str_eq(pick(g, XEON_SPR, &passed)->name, "onednn:conv");
    cr_assert_str_eq(pick(g, XEON_SKX, &passed)->name, "onednn:conv",
                     "oneDNN runs bf16 convolutions on any avx512_core");
    cr_assert_str_eq(pick(g, EPYC_AVX2, &passed)->name, "ref");
    cr_assert_str_eq(passed.kernel->name, "onednn:conv");
    cr_assert_str_eq(passed.missing, "avx512f avx512bw avx512vl avx512dq");
    cp_graph_free(g);

    g = conv_graph(NULL, 1);
    cr_assert_str_eq(pick(g, EPYC_AVX2, &passed)->name, "onednn:conv",
                     "fp32 convolutions need no AVX-512");
    cr_assert_null(passed.kernel);
    cp_graph_free(g);
}

Test(plan_isa, a_kernel_without_its_isa_refuses_to_prepare_instead_of_faulting)
{
    struct cp_host h;
    cp_host_detect(&h);
    struct cp_graph *g = attention_graph("bf16");
    gb_infer_ok(g);
    const struct cp_node *n = cp_graph_node(g, 0);
    const struct cp_kernel *k = NULL;
    for (size_t i = 0; cp_fast_kernels[i]; i++)
        if (strcmp(cp_fast_kernels[i]->name, "c:attention_avx512") == 0)
            k = cp_fast_kernels[i];
    cr_assert_not_null(k);
    cr_assert(k->supports(g, n), "supports judges the node, not the CPU");
    if (cp_kernel_runs_on(k, g, n, &h, NULL, 0)) {
        cp_graph_free(g);
        cr_skip_test("this CPU (%s) runs c:attention_avx512 in bf16", h.cpu_model);
    }
    struct cp_kernel_env env = {NULL, NULL, 1};
    struct cp_kexec x = {.kernel = k, .g = g, .node = n, .env = &env};
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(k->prepare(&x, &d), CP_ERR_UNSUPPORTED);
    cr_assert(strstr(d.msg, "'attn'") && strstr(d.msg, "avx512"), "%s", d.msg);
    cr_assert_null(x.state);
    cp_graph_free(g);
}

/* ---- plans on an AVX2 CPU ----------------------------------------------------------- */

Test(plan_isa, a_bf16_conv_on_a_cpu_without_avx512_is_refused_naming_node_dtype_and_isa)
{
    struct cp_runtime *rt = runtime_on(EPYC_AVX2);
    struct cp_model *m = model_of(rt, conv_graph("bf16", 2));
    char msg[1024];
    enum cp_status st = plan_error(m, msg, sizeof msg);
    cr_assert_eq(st, CP_ERR_UNSUPPORTED, "%s", msg);
    cr_assert_eq(cp_status_exit_code(st), 2);
    cr_assert(strstr(msg, "node 'conv_1' (Conv)"), "names the first node: %s", msg);
    cr_assert(strstr(msg, "and 1 more node"), "counts the others: %s", msg);
    cr_assert(strstr(msg, "bf16"), "names the dtype: %s", msg);
    cr_assert(strstr(msg, "onednn:conv needs avx512f avx512bw avx512vl avx512dq"),
              "names the kernel and the features: %s", msg);
    cr_assert(strstr(msg, "AMD EPYC 7B13"), "names the CPU: %s", msg);
    cr_assert(strstr(msg, "--precision_mode=force_fp32"), "says what to do: %s", msg);
    /* a reference-only plan is the fp32 reference by request, not a
     * silent fallback */
    struct cp_plan_options po = {.buffer_optimize = -1, .reference_only = true};
    struct cp_plan *p = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_create(m, &po, &p, &d), CP_OK, "%s", d.msg);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan_isa, an_fp32_conv_on_that_cpu_keeps_onednn_and_matches_the_reference)
{
    struct cp_runtime *rt = runtime_on(EPYC_AVX2);
    struct cp_model *m = model_of(rt, conv_graph(NULL, 2));
    const char *impl;
    struct cp_host_tensor fast = run_model(m, false, &impl);
    cr_assert_str_eq(impl, "onednn:conv");
    struct cp_host_tensor ref = run_model(m, true, &impl);
    cr_assert_str_eq(impl, "ref");
    double e = rel_l2(&fast, &ref);
    cr_assert_leq(e, 1e-5, "relative L2 %g", e);
    cp_host_tensor_release(&fast);
    cp_host_tensor_release(&ref);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan_isa, bf16_attention_on_that_cpu_runs_the_portable_kernel_in_bf16)
{
    struct cp_runtime *rt = runtime_on(EPYC_AVX2);
    struct cp_model *m = model_of(rt, attention_graph("bf16"));
    const char *impl;
    struct cp_host_tensor fast = run_model(m, false, &impl);
    cr_assert_str_eq(impl, "c:attention", "passed over c:attention_avx512 for the portable one");
    /* the reference defines bf16 attention (Q, K, V rounded to bf16) */
    struct cp_host_tensor ref = run_model(m, true, &impl);
    double e = rel_l2(&fast, &ref);
    cr_assert_leq(e, 1e-5, "against the bf16 reference: relative L2 %g", e);
    cp_model_free(m);
    m = model_of(rt, attention_graph(NULL));
    struct cp_host_tensor f32 = run_model(m, true, &impl);
    double e32 = rel_l2(&fast, &f32);
    cr_assert_gt(e32, 1e-5, "the result equals fp32's: bf16 did not run (%g)", e32);
    cr_assert_leq(e32, 1e-2, "bf16 is off fp32 by %g", e32);
    cp_host_tensor_release(&fast);
    cp_host_tensor_release(&ref);
    cp_host_tensor_release(&f32);
    cp_model_free(m);
    cp_runtime_free(rt);
}

/* ---- on this machine ---------------------------------------------------------------- */

/* Whether this CPU runs onednn:conv's bf16 path, and if not what it lacks. */
static bool host_runs_bf16_conv(char *missing, size_t cap)
{
    struct cp_host h;
    cp_host_detect(&h);
    struct cp_graph *g = conv_graph("bf16", 1);
    gb_infer_ok(g);
    const struct cp_node *n = cp_graph_node(g, 0);
    const struct cp_kernel *k = NULL;
    for (size_t i = 0; cp_fast_kernels[i]; i++)
        if (strcmp(cp_fast_kernels[i]->name, "onednn:conv") == 0)
            k = cp_fast_kernels[i];
    cr_assert_not_null(k);
    bool ok = cp_kernel_runs_on(k, g, n, &h, missing, cap);
    cp_graph_free(g);
    return ok;
}

Test(plan_isa, on_this_cpu_a_bf16_conv_runs_in_bf16_or_is_refused)
{
    char missing[96];
    bool runs = host_runs_bf16_conv(missing, sizeof missing);
    struct cp_runtime *rt = runtime_on(NULL);
    struct cp_model *m = model_of(rt, conv_graph("bf16", 2));
    if (runs) {
        const char *impl;
        struct cp_host_tensor bf = run_model(m, false, &impl);
        cr_assert_str_eq(impl, "onednn:conv");
        struct cp_host_tensor ref = run_model(m, true, &impl);
        double e = rel_l2(&bf, &ref);
        cr_assert_gt(e, 1e-5, "the result equals fp32's: bf16 did not run (%g)", e);
        cr_assert_leq(e, 1e-2, "bf16 is off fp32 by %g", e);
        cp_host_tensor_release(&bf);
        cp_host_tensor_release(&ref);
    } else {
        char msg[1024];
        enum cp_status st = plan_error(m, msg, sizeof msg);
        cr_assert_eq(st, CP_ERR_UNSUPPORTED, "%s", msg);
        cr_assert(strstr(msg, "'conv_1'") && strstr(msg, "bf16") && strstr(msg, missing), "%s",
                  msg);
    }
    cp_model_free(m);
    cp_runtime_free(rt);
}

/* A bf16 .om converted on a machine with AVX-512 and run here. */
Test(plan_isa, run_of_a_bf16_om_from_another_machine_runs_or_exits_2_naming_the_node)
{
    char missing[96];
    bool runs = host_runs_bf16_conv(missing, sizeof missing);
    char *dir = cp_scratch_dir();
    char *path = malloc(strlen(dir) + 16);
    cr_assert_not_null(path);
    sprintf(path, "%s/bf16.om", dir);
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.format_version = CP_OM_FORMAT_VERSION;
    meta.tool_version = (char *)CP_VERSION_STRING;
    meta.target = (char *)"cpu x86_64 avx512f avx512bw avx512vl avx512_bf16";
    cp_convert_config_init(&meta.config);
    meta.config.precision_mode = CP_PREC_ALLOW_FP32_TO_BF16;
    struct cp_graph *g = conv_graph("bf16", 2);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write(path, g, &meta, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
    struct cp_run r;
    cp_run_cli(&r, "run", path, "--threads", "1", "-o", dir, NULL);
    if (runs) {
        cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    } else {
        cr_log_info("cannprof run: %s", r.err);
        cr_assert_eq(r.exit_code, 2, "exit %d (signal %d): %s", r.exit_code, r.signal, r.err);
        cr_assert(strstr(r.err, "node 'conv_1' (Conv)") && strstr(r.err, "bf16") &&
                      strstr(r.err, missing) && strstr(r.err, "force_fp32"),
                  "%s", r.err);
    }
    cp_run_release(&r);
    cp_scratch_remove(dir);
    free(path);
    free(dir);
}
