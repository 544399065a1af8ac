/*
 * The fast FusedAttention kernels: flash-attention style, tiled over keys
 * with an online softmax, so the N x M scores never exist; each thread
 * works in a fixed slice of scratch memory sized by the tile sizes.
 *
 * Two table entries share the plan and the work split (fast_attention.h):
 * "c:attention_avx512" (fast_attention_avx512.c), taken when the CPU has
 * AVX-512 (and AVX512_BF16 for bf16 nodes: its `isa`), and "c:attention",
 * the portable path below, so a binary built here still runs on CPUs
 * without them, in bf16 too.
 *
 * The portable path runs the same algorithm on 16 queries at a time in
 * plain C, lanes along queries, which the compiler vectorises for each ISA
 * clone (AVX-512, AVX2, baseline). bf16 rounds Q, K and V as they are read
 * (the reference's definition) and computes in fp32.
 *
 * Tiling: 128 keys per tile; a work item is up to 4 groups of 32 queries
 * (8 for bf16 heads of D + Dv <= 64, whose K and V tile conversion shows:
 * 2% of the bf16 time at D = 16), fewer when that leaves fewer than 4
 * items per thread (64 to 256 keys and 2 to 8 groups were within 5% of
 * each other). On the 2-core AVX-512 machine (bench/attention_bench.sh,
 * H = 4, D = 16, 1024 tokens), before the fused bf16 path: 1.62 ms
 * against 3.50 ms for the unfused MatMul/Mul/Softmax/MatMul in fp32, 1.16
 * ms against 2.83 ms in bf16, with 66 KiB of scratch instead of 32 MiB of
 * scores. The fp32 tiles run at about one vector FMA per cycle, the bound
 * of this machine.
 */
#include "runner/cpu/fast_attention.h"
#include "runner/cpu/fast_math.h"
#include "runner/cpu/fast_util.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define QW             32  /* queries per group */
#define PW             16  /* queries per portable group */
#define KBLOCK         128 /* keys per tile */
#define GROUPS         4   /* most groups per item */
#define GROUPS_SHALLOW 8   /* ... in bf16 when D + Dv <= 64 */

static bool att_mask_fits_x512(const struct cp_att_geom *geo)
{
    /* The gathered mask offsets (lane * row stride) are 32-bit. */
    return !geo->has_mask || geo->mask.row <= INT32_MAX / (2 * QW);
}

static void att_tiling(struct cp_att_fast_plan *p, int threads, bool x512)
{
    const struct cp_att_geom *geo = &p->geo;
    int64_t ngroups = (geo->n + QW - 1) / QW, heads = geo->batch * geo->heads;
    int64_t most = x512 && geo->bf16 && geo->d + geo->dv <= 64 ? GROUPS_SHALLOW : GROUPS;
    int64_t g = ngroups < most ? ngroups : most;
    while (g > 1 && heads * ((ngroups + g - 1) / g) < 4 * (int64_t)threads)
        g--;
    p->groups = g;
    p->kblock = KBLOCK;
    p->qblocks = (ngroups + g - 1) / g;
    p->items = heads * p->qblocks;
    p->threads = threads;
    size_t bytes = x512 ? cp_att_x512_scratch(geo, g, KBLOCK)
                        : ((size_t)(geo->d + geo->dv + KBLOCK) * PW +
                           (size_t)(geo->d > geo->dv ? geo->d : geo->dv)) *
                              sizeof(float);
    p->thread_bytes = (bytes + 63) / 64 * 64;
}

/* ---- portable path ------------------------------------------------------ */

static inline float p_load(float x, bool bf16)
{
    return bf16 ? cp_att_round_bf16(x) : x;
}

/*
 * PW queries at a time, lanes along queries as in the AVX-512 path, in
 * plain C whose lane loops the compiler vectorises for each ISA clone
 * (CP_FK_HOT). q at the group's first row (of `valid`), k and v at
 * (b, h), mask at (b, h, first row) or NULL; buf holds (D + Dv + kblock)
 * x PW + max(D, Dv) floats.
 */
CP_FK_HOT static void p_group(const struct cp_att_geom *geo, int64_t kblock, const float *q,
                              int64_t valid, const float *k, const float *v, const float *mask,
                              float *y, float *buf)
{
    /* locals, so that stores through the buffers cannot alias them */
    const bool bf = geo->bf16, exact = geo->exact;
    const float scale = geo->scale;
    const int64_t D = geo->d, DV = geo->dv, M = geo->m;
    const int64_t qrs = geo->q.row, qds = geo->q.d, krs = geo->k.row, kds = geo->k.d;
    const int64_t vrs = geo->v.row, vds = geo->v.d, mrs = geo->mask.row, mds = geo->mask.d;
    float *restrict qt = buf, *restrict o = qt + D * PW, *restrict s = o + DV * PW;
    float *restrict row = s + kblock * PW; /* one K or V row, converted */
    float m[PW], l[PW], base[PW], alpha[PW];
    for (int64_t c = 0; c < D; c++)
        for (int i = 0; i < PW; i++)
            qt[c * PW + i] = i < valid ? p_load(q[i * qrs + c * qds], bf) : 0.0f;
    for (int64_t c = 0; c < DV * PW; c++)
        o[c] = 0.0f;
    for (int i = 0; i < PW; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < M; j0 += kblock) {
        int64_t cnt = M - j0 < kblock ? M - j0 : kblock;
        float bm[PW];
        for (int i = 0; i < PW; i++)
            bm[i] = -INFINITY;
        for (int64_t j = 0; j < cnt; j++) {
            const float *kj = k + (j0 + j) * krs;
            for (int64_t c = 0; c < D; c++)
                row[c] = p_load(kj[c * kds], bf);
            float *sj = s + j * PW;
            for (int i = 0; i < PW; i++)
                sj[i] = 0.0f;
            for (int64_t c = 0; c < D; c++)
#pragma omp simd
                for (int i = 0; i < PW; i++)
                    sj[i] += row[c] * qt[c * PW + i];
#pragma omp simd
            for (int i = 0; i < PW; i++)
                sj[i] *= scale;
            if (mask)
                for (int i = 0; i < valid; i++)
                    sj[i] += mask[i * mrs + (j0 + j) * mds];
#pragma omp simd
            for (int i = 0; i < PW; i++)
                bm[i] = sj[i] > bm[i] ? sj[i] : bm[i];
        }
        for (int i = 0; i < PW; i++) {
            float m_new = bm[i] > m[i] ? bm[i] : m[i];
            base[i] = m_new == -INFINITY ? 0.0f : m_new;
            float x = m[i] - base[i];
            alpha[i] = exact ? (float)exp((double)x) : cp_fm_exp_nonpos(x);
            m[i] = m_new;
            l[i] *= alpha[i];
        }
        for (int64_t c = 0; c < DV; c++)
#pragma omp simd
            for (int i = 0; i < PW; i++)
                o[c * PW + i] *= alpha[i];
        for (int64_t j = 0; j < cnt; j++) {
            float *sj = s + j * PW;
            if (exact) {
                for (int i = 0; i < PW; i++)
                    sj[i] = (float)exp((double)(sj[i] - base[i]));
            } else {
#pragma omp simd
                for (int i = 0; i < PW; i++)
                    sj[i] = cp_fm_exp_nonpos(sj[i] - base[i]);
            }
#pragma omp simd
            for (int i = 0; i < PW; i++)
                l[i] += sj[i];
            const float *vj = v + (j0 + j) * vrs;
            for (int64_t c = 0; c < DV; c++)
                row[c] = p_load(vj[c * vds], bf);
            for (int64_t c = 0; c < DV; c++)
#pragma omp simd
                for (int i = 0; i < PW; i++)
                    o[c * PW + i] += sj[i] * row[c];
        }
    }
    for (int64_t i = 0; i < valid; i++) {
        float inv = 1.0f / l[i];
        for (int64_t c = 0; c < DV; c++)
            y[i * geo->out.row + c * geo->out.d] = o[c * PW + i] * inv;
    }
}

static void p_run(const struct cp_att_fast_plan *p, const struct cp_att_io *io, int64_t item0,
                  int64_t item1, float *buf)
{
    const struct cp_att_geom *geo = &p->geo;
    for (int64_t item = item0; item < item1; item++) {
        int64_t bh = item / p->qblocks, qb = item % p->qblocks;
        int64_t b = bh / geo->heads, h = bh % geo->heads;
        int64_t i0 = qb * p->groups * QW, i1 = i0 + p->groups * QW;
        i1 = i1 < geo->n ? i1 : geo->n;
        const float *q = io->q + b * geo->q.b + h * geo->q.h;
        const float *k = io->k + b * geo->k.b + h * geo->k.h;
        const float *v = io->v + b * geo->v.b + h * geo->v.h;
        const float *mask = io->mask ? io->mask + b * geo->mask.b + h * geo->mask.h : NULL;
        float *y = io->y + b * geo->out.b + h * geo->out.h;
        for (int64_t i = i0; i < i1; i += PW)
            p_group(geo, p->kblock, q + i * geo->q.row, i1 - i < PW ? i1 - i : PW, k, v,
                    mask ? mask + i * geo->mask.row : NULL, y + i * geo->out.row, buf);
    }
}

/* ---- kernel glue ---------------------------------------------------------- */

struct att_state {
    struct cp_att_fast_plan plan;
    bool x512;
};

static bool att_supports_x512(const struct cp_graph *g, const struct cp_node *n)
{
    struct cp_att_geom geo;
    return cp_att_geom_init(g, n, &geo) && att_mask_fits_x512(&geo);
}

/* AVX-512 F, BW and VL, and AVX512_BF16 for the dot products of bf16
 * nodes: what cp_att_x512_usable checks, in cpuinfo's names. */
static const char *att_isa_x512(const struct cp_graph *g, const struct cp_node *n)
{
    (void)g;
    return strcmp(cp_node_attr_string(n, "compute_precision", "fp32"), "bf16") == 0
               ? "avx512f avx512bw avx512vl avx512_bf16"
               : "avx512f avx512bw avx512vl";
}

static bool att_supports_portable(const struct cp_graph *g, const struct cp_node *n)
{
    struct cp_att_geom geo;
    return cp_att_geom_init(g, n, &geo);
}

static enum cp_status att_prepare(struct cp_kexec *k, bool x512, struct cp_diag *d)
{
    struct att_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    if (!cp_att_geom_init(k->g, k->node, &s->plan.geo)) {
        free(s);
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': malformed FusedAttention", k->node->name);
    }
    int threads = k->env && k->env->threads > 0 ? k->env->threads : 1;
    s->x512 = x512;
    att_tiling(&s->plan, threads, x512);
    k->state = s;
    k->scratch_bytes = s->plan.thread_bytes * (size_t)threads;
    return CP_OK;
}

static enum cp_status att_prepare_x512(struct cp_kexec *k, struct cp_diag *d)
{
    /* The plan never picks this kernel on a CPU without the features
     * att_isa_x512 names; a caller that runs it by hand gets an error, not
     * an illegal instruction. */
    bool bf16 = strcmp(cp_node_attr_string(k->node, "compute_precision", "fp32"), "bf16") == 0;
    if (!cp_att_x512_usable(bf16))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "node '%s': c:attention_avx512 needs %s",
                           k->node->name, att_isa_x512(k->g, k->node));
    return att_prepare(k, true, d);
}

static enum cp_status att_prepare_portable(struct cp_kexec *k, struct cp_diag *d)
{
    return att_prepare(k, false, d);
}

static enum cp_status att_run(struct cp_kexec *k)
{
    const struct att_state *s = k->state;
    const struct cp_att_fast_plan *p = &s->plan;
    if (!k->scratch)
        return CP_ERR_INTERNAL;
    struct cp_att_io io = {
        .q = k->in_data[0],
        .k = k->in_data[1],
        .v = k->in_data[2],
        .mask = p->geo.has_mask ? k->in_data[3] : NULL,
        .y = k->out_data[0],
    };
    int nt = p->items < p->threads ? (int)p->items : p->threads;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t b, e;
        cp_fk_split(p->items, 1, &b, &e);
        char *mine = (char *)k->scratch + (size_t)omp_get_thread_num() * p->thread_bytes;
        if (s->x512)
            cp_att_x512_run(p, &io, b, e, mine);
        else
            p_run(p, &io, b, e, (float *)mine);
    }
    return CP_OK;
}

static void att_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

const struct cp_kernel cp_fast_attention_avx512 = {
    "c:attention_avx512", CP_OP_FUSED_ATTENTION, att_supports_x512, att_prepare_x512, att_run,
    att_release,          att_isa_x512};

const struct cp_kernel cp_fast_attention = {"c:attention",
                                            CP_OP_FUSED_ATTENTION,
                                            att_supports_portable,
                                            att_prepare_portable,
                                            att_run,
                                            att_release,
                                            NULL};
