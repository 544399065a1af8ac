/* FusedAttention kernels: the reference against attention computed here
 * from its definition, and the fast kernels (AVX-512 and portable) against
 * the reference across operand formats, masks, odd sizes and depths, with
 * 1 and 2 threads; bf16 within 1e-2 relative L2 of fp32; the vectorised
 * exp within 2 ulp; scratch memory that does not grow with the tokens. */
#include "core/host.h"
#include "runner/cpu/attention.h"
#include "runner/cpu/fast_attention.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- data ----------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill(float *x, int64_t n, uint64_t seed, float amp)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (int64_t i = 0; i < n; i++)
        x[i] = amp * (2.0f * (float)((rng_next(&s) >> 40) * (1.0 / 16777216.0)) - 1.0f);
}

enum fmt { BHND, BHDN, BNHD };
static const char *const fmt_name[] = {"BHND", "BHDN", "BNHD"};

/* Shape of an operand [B, H, rows, depth] in format f. */
static int fmt_dims(enum fmt f, int64_t b, int64_t h, int64_t rows, int64_t depth, int64_t *dims)
{
    if (f == BNHD) {
        dims[0] = b, dims[1] = rows, dims[2] = h * depth;
        return 3;
    }
    dims[0] = b, dims[1] = h;
    dims[2] = f == BHDN ? depth : rows;
    dims[3] = f == BHDN ? rows : depth;
    return 4;
}

/* Offset of canonical element (b, h, r, c) in format f. */
static int64_t fmt_off(enum fmt f, int64_t H, int64_t R, int64_t C, int64_t b, int64_t h, int64_t r,
                       int64_t c)
{
    switch (f) {
    case BHDN:
        return ((b * H + h) * C + c) * R + r;
    case BNHD:
        return ((b * R + r) * H + h) * C + c;
    default:
        return ((b * H + h) * R + r) * C + c;
    }
}

/* Canonical [B][H][R][C] -> format f. */
static float *to_fmt(const float *x, enum fmt f, int64_t B, int64_t H, int64_t R, int64_t C)
{
    float *y = malloc((size_t)(B * H * R * C) * sizeof *y);
    cr_assert_not_null(y);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = 0; c < C; c++)
                    y[fmt_off(f, H, R, C, b, h, r, c)] = x[((b * H + h) * R + r) * C + c];
    return y;
}

static double rel_l2(const float *got, const float *want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = (double)got[i] - (double)want[i];
        num += e * e;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- a FusedAttention node ---------------------------------------------------- */

struct acase {
    int64_t B, H, N, M, D, Dv;
    enum fmt qf, kf, vf, of;
    int mask_rank;         /* 0: none */
    int64_t mask_dims[4];  /* broadcastable to [B, H, N, M] */
    bool causal;           /* mask holds -inf above the diagonal */
    const char *precision; /* "fp32" / "bf16" */
    const char *impl;      /* "fast" / "exact" / NULL */
    float amp;             /* magnitude of Q and K */
};

struct adata {
    float *q, *k, *v, *mask; /* canonical [B][H][rows][depth]; mask as given */
    int64_t mask_n;
};

static void adata_init(struct adata *a, const struct acase *c, uint64_t seed)
{
    int64_t nq = c->B * c->H * c->N * c->D, nk = c->B * c->H * c->M * c->D,
            nv = c->B * c->H * c->M * c->Dv;
    a->q = malloc((size_t)nq * sizeof(float));
    a->k = malloc((size_t)nk * sizeof(float));
    a->v = malloc((size_t)nv * sizeof(float));
    cr_assert(a->q && a->k && a->v);
    fill(a->q, nq, seed, c->amp);
    fill(a->k, nk, seed + 1, c->amp);
    fill(a->v, nv, seed + 2, 1.0f);
    a->mask = NULL;
    a->mask_n = 0;
    if (c->mask_rank > 0) {
        a->mask_n = 1;
        for (int i = 0; i < c->mask_rank; i++)
            a->mask_n *= c->mask_dims[i];
        a->mask = malloc((size_t)a->mask_n * sizeof(float));
        cr_assert_not_null(a->mask);
        fill(a->mask, a->mask_n, seed + 3, 2.0f);
        if (c->causal) { /* [.., N, M]: key j visible to query i when j <= i */
            int64_t nn = c->mask_dims[c->mask_rank - 2], mm = c->mask_dims[c->mask_rank - 1];
            for (int64_t t = 0; t < a->mask_n; t++) {
                int64_t i = t / mm % nn, j = t % mm;
                a->mask[t] = j <= i ? 0.0f : -INFINITY;
            }
        }
    }
}

static void adata_release(struct adata *a)
{
    free(a->q);
    free(a->k);
    free(a->v);
    free(a->mask);
}

/* A one-node graph with Q, K, V (and mask) as initializers. */
static struct cp_graph *att_graph(const struct acase *c, const struct adata *a, int32_t *node)
{
    struct cp_graph *g = gb_graph(17);
    int64_t dims[4];
    float *q = to_fmt(a->q, c->qf, c->B, c->H, c->N, c->D);
    float *k = to_fmt(a->k, c->kf, c->B, c->H, c->M, c->D);
    float *v = to_fmt(a->v, c->vf, c->B, c->H, c->M, c->Dv);
    int r = fmt_dims(c->qf, c->B, c->H, c->N, c->D, dims);
    gb_init(g, "q", CP_DTYPE_F32, r, dims, q);
    r = fmt_dims(c->kf, c->B, c->H, c->M, c->D, dims);
    gb_init(g, "k", CP_DTYPE_F32, r, dims, k);
    r = fmt_dims(c->vf, c->B, c->H, c->M, c->Dv, dims);
    gb_init(g, "v", CP_DTYPE_F32, r, dims, v);
    free(q);
    free(k);
    free(v);
    int32_t ins[4] = {cp_graph_find_tensor(g, "q"), cp_graph_find_tensor(g, "k"),
                      cp_graph_find_tensor(g, "v"), -1};
    size_t nin = 3;
    if (a->mask) {
        gb_init(g, "mask", CP_DTYPE_F32, c->mask_rank, c->mask_dims, a->mask);
        ins[nin++] = cp_graph_find_tensor(g, "mask");
    }
    int32_t y = gb_tensor(g, "y", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    const char *origin = "attn";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, "attn", "FusedAttention", CP_DOMAIN, ins, nin, &y, 1, &origin,
                                   1, node, &d),
                 CP_OK, "%s", d.msg);
    cp_node_set_int(g, *node, "num_heads", c->H);
    cp_node_set_float(g, *node, "scale", 1.0f / sqrtf((float)c->D));
    cp_node_set_string(g, *node, "q_format", fmt_name[c->qf]);
    cp_node_set_string(g, *node, "k_format", fmt_name[c->kf]);
    cp_node_set_string(g, *node, "v_format", fmt_name[c->vf]);
    cp_node_set_string(g, *node, "out_format", fmt_name[c->of]);
    cp_node_set_string(g, *node, "compute_precision", c->precision ? c->precision : "fp32");
    if (c->impl)
        cp_node_set_string(g, *node, "impl", c->impl);
    cp_graph_add_output(g, y);
    gb_infer_ok(g);
    return g;
}

/* Run kernel k with `threads` threads; returns the output in canonical
 * [B][H][N][Dv] order (caller frees) and the scratch size asked for. */
static float *att_run(const struct cp_kernel *k, const struct acase *c, const struct adata *a,
                      int threads, size_t *scratch_bytes)
{
    int32_t node;
    struct cp_graph *g = att_graph(c, a, &node);
    const struct cp_node *n = cp_graph_node(g, node);
    cr_assert(k->supports(g, n), "kernel %s refuses the node", k->name);
    const struct cp_tensor *ins[4] = {NULL}, *outs[1];
    void *in_data[4] = {NULL}, *out_data[1];
    for (size_t i = 0; i < n->n_inputs; i++) {
        ins[i] = cp_graph_tensor(g, n->inputs[i]);
        in_data[i] = (void *)ins[i]->data;
    }
    outs[0] = cp_graph_tensor(g, n->outputs[0]);
    int64_t ny = cp_shape_numel(&outs[0]->shape);
    cr_assert_eq(ny, c->B * c->H * c->N * c->Dv);
    size_t yb = (size_t)ny * sizeof(float);
    float *y = malloc(yb + 64);
    cr_assert_not_null(y);
    memset(y, 0xA5, yb + 64);
    out_data[0] = y;
    struct cp_kernel_env env = {NULL, NULL, threads};
    omp_set_num_threads(threads);
    struct cp_kexec x = {.kernel = k,
                         .g = g,
                         .node = n,
                         .env = &env,
                         .in = ins,
                         .out = outs,
                         .in_data = in_data,
                         .out_data = out_data};
    struct cp_diag d;
    cp_diag_init(&d);
    if (k->prepare)
        cr_assert_eq(k->prepare(&x, &d), CP_OK, "%s", d.msg);
    void *scratch = NULL;
    if (x.scratch_bytes) {
        cr_assert_eq(posix_memalign(&scratch, 64, x.scratch_bytes), 0);
        memset(scratch, 0x5A, x.scratch_bytes);
        x.scratch = scratch;
    }
    cr_assert_eq(k->run(&x), CP_OK, "%s: run failed", k->name);
    if (scratch_bytes)
        *scratch_bytes = x.scratch_bytes;
    if (k->release)
        k->release(&x);
    free(scratch);
    for (size_t i = 0; i < 64; i++)
        cr_assert_eq(((unsigned char *)y)[yb + i], 0xA5, "%s wrote past the output", k->name);
    /* back to canonical order */
    float *canon = malloc(yb);
    cr_assert_not_null(canon);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t i = 0; i < c->N; i++)
                for (int64_t e = 0; e < c->Dv; e++)
                    canon[((b * c->H + h) * c->N + i) * c->Dv + e] =
                        y[fmt_off(c->of, c->H, c->N, c->Dv, b, h, i, e)];
    free(y);
    cp_graph_free(g);
    return canon;
}

/* Attention from its definition, in double, on canonical data (bf16:
 * Q, K, V rounded first). */
static float *att_direct(const struct acase *c, const struct adata *a)
{
    int64_t B = c->B, H = c->H, N = c->N, M = c->M, D = c->D, Dv = c->Dv;
    bool bf = c->precision && strcmp(c->precision, "bf16") == 0;
    float *y = malloc((size_t)(B * H * N * Dv) * sizeof *y);
    double *s = malloc((size_t)M * sizeof *s);
    cr_assert(y && s);
    double scale = (double)(1.0f / sqrtf((float)D));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < N; i++) {
                double mx = -INFINITY;
                for (int64_t j = 0; j < M; j++) {
                    double acc = 0;
                    for (int64_t e = 0; e < D; e++) {
                        float qv = a->q[((b * H + h) * N + i) * D + e];
                        float kv = a->k[((b * H + h) * M + j) * D + e];
                        if (bf) {
                            qv = cp_att_round_bf16(qv);
                            kv = cp_att_round_bf16(kv);
                        }
                        acc += (double)qv * kv;
                    }
                    acc *= scale;
                    if (a->mask) {
                        /* broadcast index into the mask */
                        int64_t full[4] = {b, h, i, j}, off = 0, st = 1;
                        for (int r = c->mask_rank - 1; r >= 0; r--) {
                            int64_t dim = c->mask_dims[r];
                            off += (dim == 1 ? 0 : full[4 - c->mask_rank + r]) * st;
                            st *= dim;
                        }
                        acc += a->mask[off];
                    }
                    s[j] = acc;
                    mx = acc > mx ? acc : mx;
                }
                double sum = 0;
                for (int64_t j = 0; j < M; j++)
                    sum += (s[j] = exp(s[j] - mx));
                for (int64_t e = 0; e < Dv; e++) {
                    double o = 0;
                    for (int64_t j = 0; j < M; j++) {
                        float vv = a->v[((b * H + h) * M + j) * Dv + e];
                        o += s[j] * (bf ? cp_att_round_bf16(vv) : vv);
                    }
                    y[((b * H + h) * N + i) * Dv + e] = (float)(o / sum);
                }
            }
    free(s);
    return y;
}

static int64_t out_numel(const struct acase *c)
{
    return c->B * c->H * c->N * c->Dv;
}

static void describe(const struct acase *c, char *buf, size_t n)
{
    snprintf(buf, n, "B%lld H%lld N%lld M%lld D%lld Dv%lld q%s k%s v%s out%s mask%d%s %s %s",
             (long long)c->B, (long long)c->H, (long long)c->N, (long long)c->M, (long long)c->D,
             (long long)c->Dv, fmt_name[c->qf], fmt_name[c->kf], fmt_name[c->vf], fmt_name[c->of],
             c->mask_rank, c->causal ? " causal" : "", c->precision ? c->precision : "fp32",
             c->impl ? c->impl : "");
}

/* The fast kernels that can run here: AVX-512 when the CPU has it, and
 * the portable one always. */
static size_t fast_kernels(bool bf16, const struct cp_kernel **out)
{
    size_t n = 0;
    if (cp_att_x512_usable(bf16))
        out[n++] = &cp_fast_attention_avx512;
    out[n++] = &cp_fast_attention;
    return n;
}

/* Every fast kernel against the reference, and the reference against the
 * direct computation. */
static void check_case(const struct acase *c, double tol, int threads)
{
    char what[256];
    describe(c, what, sizeof what);
    struct adata a;
    adata_init(&a, c, (uint64_t)(c->N * 131 + c->M * 7 + c->D));
    float *want = att_direct(c, &a);
    float *ref = att_run(&cp_ref_fused_attention, c, &a, 1, NULL);
    int64_t n = out_numel(c);
    double e_ref = rel_l2(ref, want, n);
    cr_expect_leq(e_ref, 1e-6, "%s: reference is %.3g from the definition", what, e_ref);
    const struct cp_kernel *ks[2];
    size_t nk = fast_kernels(c->precision && strcmp(c->precision, "bf16") == 0, ks);
    for (size_t i = 0; i < nk; i++) {
        float *got = att_run(ks[i], c, &a, threads, NULL);
        double e = rel_l2(got, ref, n);
        cr_expect_leq(e, tol, "%s (%s, %d threads): relative L2 %.3g > %.3g", what, ks[i]->name,
                      threads, e, tol);
        free(got);
    }
    free(ref);
    free(want);
    adata_release(&a);
}

#define FP32_TOL 2e-6

static struct acase base_case(int64_t N, int64_t M, int64_t D)
{
    struct acase c = {.B = 1, .H = 4, .N = N, .M = M, .D = D, .Dv = D, .amp = 1.5f};
    return c;
}

/* ---- tests ---------------------------------------------------------------------- */

Test(attention, fast_kernels_match_the_reference_in_every_format)
{
    for (int qf = 0; qf < 3; qf++)
        for (int kf = 0; kf < 3; kf++)
            for (int vf = 0; vf < 3; vf++)
                for (int of = 0; of < 3; of += 2) { /* out: BHND or BNHD */
                    struct acase c = base_case(45, 39, 16);
                    c.B = 2;
                    c.H = 3;
                    c.qf = (enum fmt)qf;
                    c.kf = (enum fmt)kf;
                    c.vf = (enum fmt)vf;
                    c.of = (enum fmt)of;
                    check_case(&c, FP32_TOL, 2);
                }
}

Test(attention, fast_kernels_handle_odd_token_counts_and_depths)
{
    static const int64_t sizes[][3] = {
        {1, 77, 16},      {77, 77, 32},  {1000, 77, 64}, {1024, 1024, 16},
        {1000, 1000, 40}, {33, 129, 64}, {130, 1, 16},   {7, 300, 3},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct acase c = base_case(sizes[i][0], sizes[i][1], sizes[i][2]);
        c.qf = c.vf = c.of = BNHD;
        c.kf = i % 2 ? BHDN : BNHD;
        check_case(&c, FP32_TOL, 2);
    }
}

Test(attention, fast_kernels_handle_value_depth_unlike_key_depth)
{
    struct acase c = base_case(70, 90, 32);
    c.Dv = 24;
    c.kf = BHDN;
    check_case(&c, FP32_TOL, 2);
    c.D = 8;
    c.Dv = 64;
    c.qf = c.kf = c.vf = c.of = BNHD;
    check_case(&c, FP32_TOL, 1);
}

Test(attention, fast_kernels_add_masks_of_every_broadcast)
{
    static const struct {
        int rank;
        int64_t dims[4];
    } masks[] = {
        {4, {2, 3, 50, 70}}, /* full */
        {4, {2, 1, 1, 70}},  /* key padding */
        {2, {50, 70}},       /* per query and key */
        {4, {1, 3, 50, 1}},  /* per query */
        {1, {1}},            /* scalar */
        {3, {3, 1, 70}},
    };
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        struct acase c = base_case(50, 70, 16);
        c.B = 2;
        c.H = 3;
        c.kf = i % 2 ? BHDN : BHND;
        c.mask_rank = masks[i].rank;
        memcpy(c.mask_dims, masks[i].dims, sizeof c.mask_dims);
        check_case(&c, FP32_TOL, 2);
    }
}

Test(attention, fast_kernels_follow_a_causal_mask_with_minus_infinity)
{
    struct acase c = base_case(200, 200, 32);
    c.mask_rank = 2;
    c.mask_dims[0] = 200;
    c.mask_dims[1] = 200;
    c.causal = true;
    check_case(&c, FP32_TOL, 2);
}

Test(attention, exact_exp_matches_the_reference_closely)
{
    struct acase c = base_case(300, 500, 16);
    c.impl = "exact";
    c.amp = 3.0f;
    check_case(&c, 1e-6, 2);
}

Test(attention, bf16_stays_within_1e_2_of_the_fp32_reference)
{
    static const int64_t sizes[][3] = {
        {1024, 1024, 16}, {1000, 77, 64}, {77, 77, 32}, {1, 77, 40}, {50, 33, 7}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct acase c = base_case(sizes[i][0], sizes[i][1], sizes[i][2]);
        c.qf = c.vf = c.of = BNHD;
        c.kf = i % 2 ? BHDN : BNHD;
        c.vf = i == 2 ? BHDN : BNHD;
        c.qf = i == 1 || i == 3 ? BHDN : BNHD; /* Q gathered along its queries */
        struct adata a;
        adata_init(&a, &c, 99 + i);
        float *ref32 = att_run(&cp_ref_fused_attention, &c, &a, 1, NULL);
        c.precision = "bf16";
        float *ref16 = att_run(&cp_ref_fused_attention, &c, &a, 1, NULL);
        char what[256];
        describe(&c, what, sizeof what);
        const struct cp_kernel *ks[2];
        size_t nk = fast_kernels(true, ks);
        for (size_t k = 0; k < nk; k++) {
            float *got = att_run(ks[k], &c, &a, 2, NULL);
            double e32 = rel_l2(got, ref32, out_numel(&c));
            double e16 = rel_l2(got, ref16, out_numel(&c));
            cr_expect_leq(e32, 1e-2, "%s (%s): %.3g from the fp32 reference", what, ks[k]->name,
                          e32);
            /* P is rounded too in the AVX-512 path: a little further from
             * the bf16 reference than the portable path */
            cr_expect_leq(e16, 5e-3, "%s (%s): %.3g from the bf16 reference", what, ks[k]->name,
                          e16);
            cr_log_info("%s (%s): rel L2 %.3g vs fp32, %.3g vs bf16 ref", what, ks[k]->name, e32,
                        e16);
            free(got);
        }
        free(ref32);
        free(ref16);
        adata_release(&a);
    }
}

/* Scores that keep growing along the keys: the bf16 path without a mask
 * exponentiates each block against the running maximum and raises it when
 * a block exceeds it by more than its margin, sending the tile's P so far
 * through P V first. Positive Q rows and keys of one growing value give
 * scores rising by about 0.3 (base-2 units) per key, so the maximum is
 * raised several times inside every tile and the tails (blocks of 2 and an
 * odd last key) run too. */
Test(attention, bf16_follows_a_running_maximum_that_grows_within_tiles)
{
    struct acase c = base_case(70, 301, 16);
    c.H = 2;
    c.qf = c.kf = c.vf = c.of = BNHD;
    struct adata a;
    adata_init(&a, &c, 17);
    for (int64_t i = 0; i < c.B * c.H * c.N * c.D; i++)
        a.q[i] = 1.0f + 0.5f * a.q[i] / c.amp;
    for (int64_t h = 0; h < c.H; h++)
        for (int64_t j = 0; j < c.M; j++)
            for (int64_t e = 0; e < c.D; e++)
                a.k[(h * c.M + j) * c.D + e] = 0.05f * (float)(h ? c.M - j : j);
    c.precision = "bf16";
    float *ref16 = att_run(&cp_ref_fused_attention, &c, &a, 1, NULL);
    const struct cp_kernel *ks[2];
    size_t nk = fast_kernels(true, ks);
    for (size_t k = 0; k < nk; k++)
        for (int threads = 1; threads <= 2; threads++) {
            float *got = att_run(ks[k], &c, &a, threads, NULL);
            double e16 = rel_l2(got, ref16, out_numel(&c));
            cr_expect_leq(e16, 5e-3, "%s (%d threads): %.3g from the bf16 reference", ks[k]->name,
                          threads, e16);
            free(got);
        }
    free(ref16);
    adata_release(&a);
}

/* A NaN in one query makes that query's output NaN and leaves the others
 * alone, in bf16 as in fp32 (the reference's softmax of NaN scores). */
Test(attention, a_nan_query_gives_a_nan_row_and_nothing_else)
{
    for (int p = 0; p < 2; p++) {
        struct acase c = base_case(40, 150, 16);
        c.H = 1;
        c.qf = c.kf = c.vf = c.of = BNHD;
        c.precision = p ? "bf16" : "fp32";
        struct adata a;
        adata_init(&a, &c, 23);
        a.q[5 * c.D + 3] = NAN; /* query 5 */
        float *ref = att_run(&cp_ref_fused_attention, &c, &a, 1, NULL);
        const struct cp_kernel *ks[2];
        size_t nk = fast_kernels(p == 1, ks);
        for (size_t k = 0; k < nk; k++) {
            float *got = att_run(ks[k], &c, &a, 2, NULL);
            for (int64_t i = 0; i < c.N; i++)
                for (int64_t e = 0; e < c.Dv; e++) {
                    float r = ref[i * c.Dv + e], f = got[i * c.Dv + e];
                    if (i == 5)
                        cr_expect(isnan(r) && isnan(f), "%s %s: row 5 gives %g (ref %g)",
                                  ks[k]->name, c.precision, f, r);
                    else
                        cr_expect(isfinite(f) && fabsf(f - r) <= (p ? 5e-2f : 1e-5f),
                                  "%s %s: [%lld,%lld] %g vs %g", ks[k]->name, c.precision,
                                  (long long)i, (long long)e, f, r);
                }
            free(got);
        }
        free(ref);
        adata_release(&a);
    }
}

Test(attention, a_fully_masked_row_is_nan_as_in_the_unfused_softmax)
{
    struct acase c = base_case(20, 30, 16);
    c.H = 1;
    c.mask_rank = 2;
    c.mask_dims[0] = 20;
    c.mask_dims[1] = 30;
    struct adata a;
    adata_init(&a, &c, 5);
    for (int64_t j = 0; j < 30; j++)
        a.mask[3 * 30 + j] = -INFINITY; /* query 3 sees nothing */
    float *ref = att_run(&cp_ref_fused_attention, &c, &a, 1, NULL);
    const struct cp_kernel *ks[2];
    size_t nk = fast_kernels(false, ks);
    for (size_t k = 0; k < nk; k++) {
        float *got = att_run(ks[k], &c, &a, 1, NULL);
        for (int64_t i = 0; i < c.N; i++)
            for (int64_t e = 0; e < c.Dv; e++) {
                float r = ref[i * c.Dv + e], f = got[i * c.Dv + e];
                if (i == 3)
                    cr_expect(isnan(r) && isnan(f), "%s: row 3 gives %g (ref %g)", ks[k]->name, f,
                              r);
                else
                    cr_expect(fabsf(r - f) <= 1e-5f, "%s: [%lld,%lld] %g vs %g", ks[k]->name,
                              (long long)i, (long long)e, f, r);
            }
        free(got);
    }
    free(ref);
    adata_release(&a);
}

Test(attention, fast_scratch_does_not_grow_with_the_tokens)
{
    const struct cp_kernel *ks[2];
    size_t nk = fast_kernels(true, ks);
    for (size_t k = 0; k < nk; k++)
        for (int p = 0; p < 2; p++) {
            size_t bytes[2];
            for (int s = 0; s < 2; s++) {
                struct acase c = base_case(s ? 4096 : 1024, s ? 4096 : 1024, 64);
                c.H = 1;
                c.precision = p ? "bf16" : "fp32";
                struct adata a;
                adata_init(&a, &c, 3);
                free(att_run(ks[k], &c, &a, 2, &bytes[s]));
                adata_release(&a);
            }
            cr_expect_eq(bytes[0], bytes[1], "%s %s: scratch %zu bytes at 1024 tokens, %zu at 4096",
                         ks[k]->name, p ? "bf16" : "fp32", bytes[0], bytes[1]);
            /* far below one score matrix of 1024 x 1024 */
            cr_expect_lt(bytes[0], (size_t)1024 * 1024 * 4, "%s: %zu bytes of scratch", ks[k]->name,
                         bytes[0]);
        }
}

/* ulp distance between floats of the same sign. */
static int64_t ulps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

/* The kernel's exponentials over every 37th float of their softmax range
 * (arguments <= 0): "fast" is 2^x (scores in base-2 units) within 2 ulp,
 * "exact" is e^x within 1 ulp; results in the subnormal range within one
 * subnormal step. */
Test(attention, vectorised_exp_is_within_2_ulp_and_exact_within_1)
{
    struct cp_host h;
    cp_host_detect(&h);
    if (!cp_host_has_flag(&h, "avx512f") || !cp_host_has_flag(&h, "avx512bw") ||
        !cp_host_has_flag(&h, "avx512vl") || !cp_att_x512_usable(false))
        cr_skip_test("this CPU (%s) lacks AVX-512 (avx512f avx512bw avx512vl): the vectorised "
                     "exp belongs to c:attention_avx512, which does not run here",
                     h.cpu_model);
    int64_t cap = 1 << 25;
    float *x = malloc((size_t)cap * sizeof *x), *y = malloc((size_t)cap * sizeof *y);
    cr_assert(x && y);
    for (int exact = 0; exact < 2; exact++) {
        float lo = exact ? -104.0f : -150.0f;
        int64_t n = 0;
        for (float v = -0.0f; v >= lo && n < cap - 4; n++) {
            x[n] = v;
            int32_t i;
            memcpy(&i, &v, 4);
            i += 37;
            memcpy(&v, &i, 4);
        }
        x[n++] = -INFINITY;
        x[n++] = lo;
        cp_att_x512_exp(x, y, n, exact);
        int64_t worst = 0, bad_sub = 0;
        float at = 0;
        for (int64_t i = 0; i < n; i++) {
            double t = exact ? exp((double)x[i]) : exp2((double)x[i]);
            float want = (float)t;
            if (want < 1.17549435e-38f) {
                bad_sub += fabs((double)y[i] - t) > 1.5e-45;
                continue;
            }
            int64_t u = ulps(y[i], want);
            if (u > worst) {
                worst = u;
                at = x[i];
            }
        }
        const char *what = exact ? "exact e^x" : "fast 2^x";
        cr_log_info("%s: worst %lld ulp at %a over %lld points", what, (long long)worst, at,
                    (long long)n);
        cr_expect_leq(worst, exact ? 1 : 2, "%s: %lld ulp at %a", what, (long long)worst, at);
        cr_expect_eq(bad_sub, 0, "%s: %lld subnormal results off by more than one step", what,
                     (long long)bad_sub);
    }
    free(x);
    free(y);
}

Test(attention, kernels_refuse_malformed_nodes)
{
    struct acase c = base_case(8, 8, 16);
    struct adata a;
    adata_init(&a, &c, 1);
    int32_t node;
    struct cp_graph *g = att_graph(&c, &a, &node);
    struct cp_node *n = cp_graph_node(g, node);
    cp_node_set_string(g, node, "impl", "approximate");
    cr_expect_not(cp_ref_fused_attention.supports(g, n));
    cr_expect_not(cp_fast_attention.supports(g, n));
    cp_node_set_string(g, node, "impl", "fast");
    cr_expect(cp_ref_fused_attention.supports(g, n));
    cp_node_set_int(g, node, "num_heads", 3); /* 4-D operands have 4 heads */
    cr_expect_not(cp_ref_fused_attention.supports(g, n));
    cr_expect_not(cp_fast_attention.supports(g, n));
    cp_graph_free(g);
    adata_release(&a);
}
