/* The kernel harness: every fast kernel computes what the reference kernel
 * of its op computes, on the nodes its `supports` accepts.
 *
 * A table of cases builds one-node graphs (attributes, shapes, broadcasting
 * and edge cases, weights as initializers or as run-time inputs). For each
 * case and for every fast kernel of the node's op that accepts it (not only
 * the one the registry would pick, so that second choices are checked
 * too), the harness runs the fast kernel and the reference kernel on the
 * same seeded random inputs and compares the outputs: |fast - ref| <=
 * 1e-5 * |ref| + 1e-5 * max|ref| (oneDNN sums in a different order). Every
 * kernel in cp_fast_kernels must be exercised by some case; a kernel that
 * accepts cases but needs CPU features this host lacks (its `isa`, checked
 * against core/host.h) is reported as not available here instead, and one
 * that accepts no case at all fails on every host. */
#include "runner/cpu/kernel.h"

#include "core/host.h"
#include "runner/cpu/fast_kernels.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 2
#define RTOL    1e-5
#define ATOL    1e-5 /* times the largest |ref| of the output */

#include "runner/harness_build.h"
#include "runner/harness_cases_ops.h"
#include "runner/harness_cases_passes.h"
#include "runner/harness_cases_families.h"

struct hcase {
    const char *name;
    void (*build)(struct cp_graph *g);
    int mode; /* how graph inputs are drawn */
    int64_t opset;
};

#define C(fn)                                                                                      \
    {                                                                                              \
#fn, fn, IN_NORMAL, 17                                                                     \
    }
#define CM(fn, m)                                                                                  \
    {                                                                                              \
#fn, fn, m, 17                                                                             \
    }
#define CO(fn, opset)                                                                              \
    {                                                                                              \
#fn, fn, IN_NORMAL, opset                                                                  \
    }

#include "runner/harness_reduce_index.h" /* the reduce_index family's cases */

static const struct hcase cases[] = {
    C(c_conv_3x3_bias),
    C(c_conv_stride2_asym),
    C(c_conv_group_dil),
    C(c_conv_same_upper),
    C(c_conv_1d),
    C(c_conv_runtime_weights),
    C(c_conv_stem),
    C(c_conv_1x1),
    C(c_dwconv_1d_silero),
    C(c_dwconv_2d_s2_asym),
    C(c_dwconv_dil_mult),
    C(c_dwconv_same_runtime_w),
    C(c_dwconv_1d_s3_wide),
    C(c_thinconv_wide_pad),
    C(c_thinconv_1d_s2),
    C(c_thinconv_2d_dil_batch2),
    C(c_thinconv_1x1_runtime_w),
    C(c_deconv_s2),
    C(c_deconv_group),
    C(c_mm_attention),
    C(c_mm_const_b),
    C(c_mm_bcast),
    C(c_mm_bcast_a),
    C(c_mm_vec_mat),
    C(c_mm_mat_vec),
    C(c_mm_pv),
    C(c_mm_pv_shared_b),
    C(c_mm_pv_odd),
    C(c_gemm_linear),
    C(c_gemm_alpha_beta),
    C(c_gemm_col_c),
    C(c_gemm_no_c),
    C(c_maxpool_stem),
    C(c_maxpool_ceil),
    C(c_avgpool_excl),
    C(c_avgpool_incl),
    C(c_gap),
    CM(c_softmax_last, IN_WIDE),
    CM(c_softmax_ragged, IN_WIDE),
    C(c_softmax_axis1),
    CO(c_softmax_axis1, 11),
    C(c_softmax_wide),
    C(c_layernorm),
    C(c_layernorm_axis),
    CM(c_layernorm_wide, IN_WIDE),
    C(c_batchnorm),
    C(c_batchnorm_2d),
    C(c_instnorm_group),
    C(c_instnorm_4d),
    C(c_instnorm_3d_runtime),
    C(c_instnorm_4d_large),
    C(c_add_same),
    C(c_mul_scalar),
    C(c_mul_channel),
    C(c_add_bias),
    C(c_sub_outer),
    CM(c_div_abcast, IN_POSITIVE),
    C(c_add_time),
    CM(c_div_row, IN_POSITIVE),
    C(c_add_small),
    C(c_add_short_rows),
    C(c_sub_bcast_a_rows),
    C(c_mul_nhwc_channel),
    C(c_add_channel_first),
    C(c_mul_scalar_first),
    C(c_sub_channel_first),
    C(c_sub_channel),
    CM(c_div_scalar, IN_POSITIVE),
    C(c_add_scalars),
    C(c_where),
    C(c_relu),
    CM(c_sigmoid, IN_WIDE),
    CM(c_exp, IN_WIDE),
    CM(c_sqrt, IN_POSITIVE),
    CM(c_erf, IN_WIDE),
    C(c_erf_small),
    CM(c_tanh, IN_WIDE),
    C(c_leaky),
    C(c_clip_both),
    C(c_clip_min),
    C(c_pow2),
    C(c_pow3),
    CM(c_pow_half, IN_POSITIVE),
    CM(c_pow_general, IN_POSITIVE),
    C(c_rmean_last),
    C(c_rmean_hw),
    C(c_rmean_channel),
    C(c_rsum_input_axes),
    C(c_rsum_all),
    C(c_rmax_first),
    C(c_transpose_heads),
    C(c_transpose_kt),
    C(c_transpose_default),
    C(c_transpose_i64),
    C(c_transpose_to_nhwc),
    C(c_transpose_to_nchw_edges),
    C(c_transpose_2d),
    C(c_concat),
    C(c_concat_last),
    C(c_split),
    C(c_slice_step),
    C(c_slice_simple),
    C(c_gather0),
    C(c_gather1),
    C(c_resize_2x),
    C(c_resize_2x_threads),
    C(c_resize_sizes),
    C(c_resize_bilinear_8x),
    C(c_resize_bilinear_align_sizes),
    C(c_resize_cubic_down),
    C(c_resize_linear_leading_axis),
    C(c_pad_pool),
    C(c_pad_crop_value),
    C(c_pad_f16),
    /* fused ops */
    C(c_fconv_relu_res_after),
    C(c_fconv_res_first_silu),
    C(c_fconv_clip),
    C(c_fconv_leaky_group),
    C(c_fconv_gelu),
    C(c_fconv_sigmoid_tanh_gelu),
    C(c_fconv_sigmoid),
    C(c_fdwconv_relu_res),
    C(c_fdwconv_res_first_silu),
    C(c_fconv_hard_swish),
    C(c_fconv_hard_sigmoid_res),
    C(c_fconv_elu),
    C(c_fconv_softplus),
    C(c_fconv_mish_res),
    C(c_fconv_tanh),
    C(c_fthinconv_res_first_sigmoid),
    C(c_fthinconv_relu_res_after_2d),
    C(c_fmm_hard_sigmoid_default),
    C(c_fmm_hard_swish_res),
    C(c_fmm_linear_gelu),
    C(c_fmm_bias_residual),
    C(c_fmm_gemm_transb_alpha),
    C(c_fmm_transa_runtime_b),
    C(c_gn_silu),
    C(c_gn_plain),
    CM(c_gelu_erf, IN_WIDE),
    C(c_gelu_tanh),
    /* layouts */
    C(c_td_nchw_nhwc),
    C(c_td_nhwc_nchw),
    C(c_td_nchw_16c),
    C(c_td_16c_nhwc),
    C(c_td_8c_nchw),
    C(c_td_16c_8c),
    C(c_conv_nhwc),
    C(c_conv_nchw_to_16c),
    C(c_conv_16c_to_8c),
    C(c_maxpool_nhwc),
    C(c_avgpool_16c),
    C(c_gap_8c),
    C(c_channel_gather_nhwc),
    C(c_channel_slice_nhwc),
    /* ---- [elementwise] ---- */
    C(c_hard_swish),
    C(c_hard_sigmoid),
    CM(c_elu, IN_WIDE),
    C(c_elu_alpha),
    CM(c_softplus, IN_WIDE),
    CM(c_mish, IN_WIDE),
    C(c_neg),
    CM(c_reciprocal, IN_POSITIVE),
    C(c_abs),
    CM(c_floor, IN_WIDE),
    CM(c_ceil, IN_WIDE),
    CM(c_log, IN_POSITIVE),
    CM(c_sin, IN_WIDE),
    CM(c_cos, IN_WIDE),
    C(c_prelu_channel),
    C(c_prelu_scalar),
    C(c_prelu_last),
    C(c_max2_bcast),
    C(c_max2_long),
    C(c_min2_scalar),
    C(c_greater_bcast),
    C(c_less_scalar),
    C(c_ge_same),
    C(c_le_first),
    /* ---- end [elementwise] ---- */
    /* ---- [quant] ---- */
    CO(c_qlinear_conv_7bit, 13),
    CO(c_qlinear_conv_8bit, 13),
    CO(c_conv_integer_group_7bit, 13),
    CO(c_qlinear_matmul_7bit, 13),
    CO(c_matmul_integer_7bit, 13),
    CO(c_quantize_per_tensor_u8, 13),
    CO(c_quantize_per_axis_i8, 13),
    {"c_quantize_wide", c_quantize_per_axis_i8, IN_WIDE, 13},
    CO(c_dequantize_per_axis_u8, 13),
    CO(c_dequantize_per_tensor_i8, 13),
    /* ---- end [quant] ---- */
    /* attention */
    C(c_attn_bhnd_kt),
    C(c_attn_bnhd_mask),
    C(c_attn_d40_exact),
    /* recurrent ([rnn]) */
    C(c_lstm_plain),
    C(c_lstm_bidir_full),
    C(c_lstm_batch_first_reverse_coupled),
    C(c_gru_plain),
    C(c_gru_bidir_lbr_lens),
    C(c_rnn_bidir_clip_lens),
    C(c_lstm_batch1_wide),
    C(c_gru_batch1_wide),
    C(c_lstm_runtime_r),
    REDUCE_INDEX_CASES,
    /* [nn] */
    C(c_lrn5),
    C(c_lrn_nhwc),
    C(c_d2s_dcr),
    C(c_d2s_crd),
    C(c_s2d),
    C(c_roi_align),
    C(c_roi_align_ratio),
    CO(c_gs_bilinear_zeros, 16),
    CO(c_gs_bilinear_border_ac, 16),
    CO(c_gs_bilinear_reflection, 16),
    CO(c_gs_nearest_reflection_ac, 16),
};

/* ---- running one kernel --------------------------------------------------------- */

struct env {
    struct cp_kernel_env kenv;
};

static void env_init(struct env *e)
{
    cr_assert_eq(dnnl_engine_create(&e->kenv.engine, dnnl_cpu, 0), dnnl_success);
    cr_assert_eq(dnnl_stream_create(&e->kenv.stream, e->kenv.engine, dnnl_stream_default_flags),
                 dnnl_success);
    e->kenv.threads = THREADS;
    omp_set_num_threads(THREADS);
}

static void env_release(struct env *e)
{
    dnnl_stream_destroy(e->kenv.stream);
    dnnl_engine_destroy(e->kenv.engine);
}

static size_t tensor_bytes(const struct cp_tensor *t)
{
    return (size_t)cp_shape_numel(&t->shape) * cp_dtype_size(t->dtype);
}

/* Run `k` on node `n` twice (the second run must give the same bytes: run
 * keeps no state). OUT: outs[i] (malloc'ed, caller frees). False with a
 * message when a step fails. */
static bool run_kernel(const struct cp_kernel *k, const struct cp_graph *g, const struct cp_node *n,
                       const struct env *e, void **in_data, void **outs, char *msg, size_t msz)
{
    const struct cp_tensor *ins[16] = {NULL}, *os[16] = {NULL};
    void *od[16] = {NULL};
    for (size_t i = 0; i < n->n_inputs; i++)
        ins[i] = n->inputs[i] >= 0 ? cp_graph_tensor(g, n->inputs[i]) : NULL;
    for (size_t i = 0; i < n->n_outputs; i++) {
        os[i] = n->outputs[i] >= 0 ? cp_graph_tensor(g, n->outputs[i]) : NULL;
        outs[i] = NULL;
        if (!os[i])
            continue;
        size_t nb = tensor_bytes(os[i]);
        od[i] = outs[i] = malloc(nb ? nb : 1);
        memset(od[i], 0xA5, nb); /* poison: unwritten cells show up */
    }
    struct cp_kexec x = {.kernel = k,
                         .g = g,
                         .node = n,
                         .env = &e->kenv,
                         .in = ins,
                         .out = os,
                         .in_data = in_data,
                         .out_data = od};
    struct cp_diag d;
    cp_diag_init(&d);
    if (k->prepare && k->prepare(&x, &d) != CP_OK) {
        snprintf(msg, msz, "%s: prepare failed: %.900s", k->name, d.msg);
        if (k->release)
            k->release(&x);
        return false;
    }
    void *scratch = NULL;
    if (x.scratch_bytes) {
        cr_assert_eq(posix_memalign(&scratch, 64, x.scratch_bytes), 0);
        x.scratch = scratch;
    }
    bool ok = k->run(&x) == CP_OK;
    void *first = NULL;
    size_t nb0 = os[0] ? tensor_bytes(os[0]) : 0;
    if (ok && nb0) {
        first = malloc(nb0);
        memcpy(first, od[0], nb0);
        ok = k->run(&x) == CP_OK;
        if (ok && memcmp(first, od[0], nb0) != 0) {
            snprintf(msg, msz, "%s: a second run gave different bytes", k->name);
            ok = false;
        }
    } else if (!ok) {
        snprintf(msg, msz, "%s: run failed", k->name);
    }
    free(first);
    if (k->release)
        k->release(&x);
    free(scratch);
    return ok;
}

/* Ops that requantize an integer accumulator to 8 bits: the reference
 * scales in double, oneDNN in f32 (and with VNNI in another order), so a
 * value on a rounding boundary may land one step away. */
static bool requantizes(enum cp_op op)
{
    return op == CP_OP_QLINEAR_CONV || op == CP_OP_QLINEAR_MATMUL;
}

/* 8-bit outputs of a requantizing op: within one step of the reference. */
static bool compare_q8(const struct cp_tensor *t, const void *fast, const void *ref, char *msg,
                       size_t msz)
{
    int64_t n = cp_shape_numel(&t->shape), off = 0;
    for (int64_t i = 0; i < n; i++) {
        int a = t->dtype == CP_DTYPE_U8 ? ((const uint8_t *)fast)[i] : ((const int8_t *)fast)[i];
        int b = t->dtype == CP_DTYPE_U8 ? ((const uint8_t *)ref)[i] : ((const int8_t *)ref)[i];
        if (abs(a - b) > 1) {
            snprintf(msg, msz, "element %lld: fast %d, ref %d (more than one step apart)",
                     (long long)i, a, b);
            return false;
        }
        off += a != b;
    }
    snprintf(msg, msz, "%lld of %lld elements one step from the reference", (long long)off,
             (long long)n);
    return true;
}

/* Compare one output; false with a message naming the worst element. */
static bool compare(const struct cp_tensor *t, const void *fast, const void *ref, enum cp_op op,
                    char *msg, size_t msz)
{
    int64_t n = cp_shape_numel(&t->shape);
    if (requantizes(op) && (t->dtype == CP_DTYPE_U8 || t->dtype == CP_DTYPE_I8))
        return compare_q8(t, fast, ref, msg, msz);
    if (t->dtype != CP_DTYPE_F32) {
        if (memcmp(fast, ref, tensor_bytes(t)) != 0) {
            snprintf(msg, msz, "%s output differs (exact compare)", cp_dtype_name(t->dtype));
            return false;
        }
        return true;
    }
    const float *a = fast, *b = ref;
    double maxref = 0.0, max_abs = 0.0, max_rel = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(b[i]) && fabs(b[i]) > maxref)
            maxref = fabs(b[i]);
    int64_t worst = -1;
    double worst_excess = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i]) || (isinf(b[i]) && a[i] != b[i])) {
            snprintf(msg, msz, "element %lld: fast %g, ref %g", (long long)i, a[i], b[i]);
            return false;
        }
        if (!isfinite(b[i]))
            continue;
        double err = fabs((double)a[i] - (double)b[i]);
        double tol = RTOL * fabs(b[i]) + ATOL * maxref;
        if (err > max_abs)
            max_abs = err;
        if (b[i] != 0.0f && err / fabs(b[i]) > max_rel)
            max_rel = err / fabs(b[i]);
        if (err > tol && err - tol > worst_excess) {
            worst_excess = err - tol;
            worst = i;
        }
    }
    if (worst >= 0) {
        snprintf(msg, msz, "max abs err %.3g, max rel err %.3g; worst at %lld: fast %.9g ref %.9g",
                 max_abs, max_rel, (long long)worst, a[worst], b[worst]);
        return false;
    }
    snprintf(msg, msz, "max abs err %.3g (max |ref| %.3g), max rel err %.3g", max_abs, maxref,
             max_rel);
    return true;
}

/* ---- the tests ------------------------------------------------------------------ */

Test(kernel_harness, every_fast_kernel_matches_the_reference)
{
    struct env e;
    env_init(&e);
    size_t nk = 0;
    while (cp_fast_kernels[nk])
        nk++;
    bool *used = calloc(nk, sizeof *used);
    /* accepted cases, but needs features this host lacks (what it lacks) */
    char(*unavailable)[96] = calloc(nk, sizeof *unavailable);
    cr_assert(used && unavailable);
    struct cp_host host;
    cp_host_detect(&host);
    int failures = 0, checks = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct hcase *hc = &cases[c];
        struct cp_graph *g = gb_graph(hc->opset);
        hc->build(g);
        gb_infer_ok(g);
        struct cp_node *n = cp_graph_node(g, 0);
        const struct cp_kernel *ref = cp_kernel_reference(n->op);
        cr_assert_not_null(ref, "%s: no reference kernel for %s", hc->name, cp_op_name(n->op));
        void *in_data[16] = {NULL};
        void *owned[16] = {NULL};
        for (size_t i = 0; i < n->n_inputs; i++) {
            if (n->inputs[i] < 0)
                continue;
            struct cp_tensor *t = cp_graph_tensor(g, n->inputs[i]);
            if (t->kind == CP_TENSOR_INITIALIZER) {
                in_data[i] = (void *)t->data;
                continue;
            }
            size_t nb = tensor_bytes(t);
            owned[i] = in_data[i] = malloc(nb ? nb : 1);
            fill(in_data[i], t->dtype, cp_shape_numel(&t->shape), c * 31 + i, hc->mode);
        }
        void *ref_out[16] = {NULL};
        char msg[1024] = "";
        if (!run_kernel(ref, g, n, &e, in_data, ref_out, msg, sizeof msg)) {
            cr_log_error("%s: reference: %s", hc->name, msg);
            failures++;
        }
        int accepted = 0, not_here = 0;
        for (size_t ki = 0; ki < nk && ref_out[0]; ki++) {
            const struct cp_kernel *k = cp_fast_kernels[ki];
            if (k->op != n->op || (k->supports && !k->supports(g, n)))
                continue;
            char missing[96];
            if (!cp_kernel_runs_on(k, g, n, &host, missing, sizeof missing)) {
                cr_log_info("%s (%s): not run, this CPU lacks %s", hc->name, k->name, missing);
                snprintf(unavailable[ki], sizeof unavailable[ki], "%s", missing);
                not_here++;
                continue;
            }
            accepted++;
            used[ki] = true;
            checks++;
            void *outs[16] = {NULL};
            bool ok = run_kernel(k, g, n, &e, in_data, outs, msg, sizeof msg);
            for (size_t o = 0; ok && o < n->n_outputs; o++)
                if (outs[o])
                    ok = compare(cp_graph_tensor(g, n->outputs[o]), outs[o], ref_out[o], n->op, msg,
                                 sizeof msg);
            if (!ok) {
                cr_log_error("%s (%s): %s", hc->name, k->name, msg);
                failures++;
            } else {
                cr_log_info("%s (%s): %s", hc->name, k->name, msg);
            }
            for (size_t o = 0; o < n->n_outputs; o++)
                free(outs[o]);
        }
        if (accepted == 0 && not_here == 0) {
            cr_log_error("%s: no fast kernel accepts this %s node", hc->name, cp_op_name(n->op));
            failures++;
        }
        for (size_t o = 0; o < 16; o++)
            free(ref_out[o]);
        for (size_t i = 0; i < 16; i++)
            free(owned[i]);
        cp_graph_free(g);
    }
    for (size_t ki = 0; ki < nk; ki++) {
        const struct cp_kernel *k = cp_fast_kernels[ki];
        if (used[ki])
            continue;
        if (unavailable[ki][0]) {
            cr_log_info("fast kernel %s (%s) is not available on this host (%s lacks %s): "
                        "its cases were not run here",
                        k->name, cp_op_name(k->op), host.cpu_model, unavailable[ki]);
            continue;
        }
        cr_log_error("fast kernel %s (%s) is not exercised by any case", k->name,
                     cp_op_name(k->op));
        failures++;
    }
    free(used);
    free(unavailable);
    env_release(&e);
    cr_log_info("kernel harness: %d checks, %d failures", checks, failures);
    cr_assert_eq(failures, 0, "%d kernel check(s) failed (see the log above)", failures);
}

/* The predicates turn away what the kernels cannot do, so those nodes fall
 * back to the reference kernel rather than fail at plan time. */
Test(kernel_harness, fast_kernels_decline_what_they_cannot_do)
{
    struct cp_host host;
    cp_host_detect(&host);
    struct cp_graph *g = gb_graph(17);
    X(g, "x", 4, D(1, 3, 8, 8));
    int32_t n = N(g, "MaxPool", I("x"), I("y", "idx"));
    INTS(g, n, "kernel_shape", 2, 2);
    gb_infer_ok(g);
    const struct cp_node *node = cp_graph_node(g, n);
    cr_assert_eq(cp_kernel_select(g, node, &host, false, NULL), cp_kernel_reference(CP_OP_MAX_POOL),
                 "MaxPool with an Indices output must go to the reference kernel");
    cp_graph_free(g);

    g = gb_graph(17);
    X(g, "x", 3, D(2, 3, 4));
    n = N(g, "ReduceMean", I("x"), I("y"));
    INTS(g, n, "axes", 0, 2);
    gb_infer_ok(g);
    node = cp_graph_node(g, n);
    cr_assert_eq(cp_kernel_select(g, node, &host, false, NULL),
                 cp_kernel_reference(CP_OP_REDUCE_MEAN),
                 "a reduction over two separate blocks must go to the reference kernel");
    cp_graph_free(g);
}

/* Which nodes the second-choice kernels take: the harness above checks what
 * they compute but would not notice one that declines too much, since the
 * C kernels accept every case first. */
struct accept_case {
    const char *name;
    void (*build)(struct cp_graph *g);
    const struct cp_kernel *kernel;
    bool accepts;
};

#define ACC(fn, k, yes)                                                                            \
    {                                                                                              \
#fn, fn, &k, yes                                                                           \
    }

static const struct accept_case accept_cases[] = {
    ACC(c_add_same, cp_dnnl_add, true),
    ACC(c_mul_scalar, cp_dnnl_mul, true),
    ACC(c_mul_channel, cp_dnnl_mul, true),
    ACC(c_add_time, cp_dnnl_add, true),
    ACC(c_add_bias, cp_dnnl_add, true),
    ACC(c_div_row, cp_dnnl_div, true),
    ACC(c_div_scalar, cp_dnnl_div, true),
    ACC(c_sub_channel, cp_dnnl_sub, true),
    ACC(c_add_scalars, cp_dnnl_add, true),
    ACC(c_add_channel_first, cp_dnnl_add, true),
    ACC(c_mul_scalar_first, cp_dnnl_mul, true),
    ACC(c_sub_channel_first, cp_dnnl_sub, false),
    ACC(c_sub_bcast_a_rows, cp_dnnl_sub, false),
    ACC(c_div_abcast, cp_dnnl_div, false),
    ACC(c_sub_outer, cp_dnnl_sub, false),
    ACC(c_instnorm_group, cp_dnnl_instance_norm, true),
    ACC(c_instnorm_4d, cp_dnnl_instance_norm, true),
    ACC(c_instnorm_3d_runtime, cp_dnnl_instance_norm, true),
};

Test(kernel_harness, onednn_second_choices_accept_what_onednn_can_broadcast)
{
    for (size_t c = 0; c < sizeof accept_cases / sizeof accept_cases[0]; c++) {
        const struct accept_case *ac = &accept_cases[c];
        struct cp_graph *g = gb_graph(17);
        ac->build(g);
        gb_infer_ok(g);
        const struct cp_node *n = cp_graph_node(g, 0);
        cr_expect_eq(n->op, ac->kernel->op, "%s: the case is not a %s node", ac->name,
                     cp_op_name(ac->kernel->op));
        cr_expect_eq(ac->kernel->supports(g, n), ac->accepts, "%s: %s should %s it", ac->name,
                     ac->kernel->name, ac->accepts ? "accept" : "decline");
        cp_graph_free(g);
    }
}
