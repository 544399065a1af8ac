/*
 * The fast FusedAttention kernels: flash-attention style, tiled over keys
 * with an online softmax, so the N x M scores never exist; each thread
 * works in a fixed slice of scratch memory sized by the tile sizes.
 *
 * Two table entries share the plan and the work split (fast_attention.h):
 * "c:attention_avx512" (fast_attention_avx512.c), taken when the CPU has
 * AVX-512 (and AVX512_BF16 for bf16 nodes), and "c:attention", the portable
 * path below, so a binary built here still runs on CPUs without them.
 *
 * The portable path handles one query row at a time: a tile of scores
 * against `kblock` keys, the running max and sum, the rescaled output
 * accumulator. bf16 rounds Q, K and V as they are read (the reference's
 * definition) and computes in fp32.
 *
 * Tiling: 128 keys per tile; a work item is up to 4 groups of 32 queries,
 * fewer when that leaves fewer than 4 items per thread. Measured on the
 * 2-core AVX-512 machine with bench/attention_bench.sh.
 */
#include "runner/cpu/fast_attention.h"
#include "runner/cpu/fast_math.h"
#include "runner/cpu/fast_util.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#define QW     32  /* queries per group */
#define KBLOCK 128 /* keys per tile */
#define GROUPS 4   /* most groups per item */

static bool att_mask_fits_x512(const struct cp_att_geom *geo)
{
    /* The gathered mask offsets (lane * row stride) are 32-bit. */
    return !geo->has_mask || geo->mask.row <= INT32_MAX / (2 * QW);
}

static void att_tiling(struct cp_att_fast_plan *p, int threads, bool x512)
{
    const struct cp_att_geom *geo = &p->geo;
    int64_t ngroups = (geo->n + QW - 1) / QW, heads = geo->batch * geo->heads;
    int64_t g = ngroups < GROUPS ? ngroups : GROUPS;
    while (g > 1 && heads * ((ngroups + g - 1) / g) < 4 * (int64_t)threads)
        g--;
    p->groups = g;
    p->kblock = KBLOCK;
    p->qblocks = (ngroups + g - 1) / g;
    p->items = heads * p->qblocks;
    p->threads = threads;
    size_t bytes = x512 ? cp_att_x512_scratch(geo, g, KBLOCK)
                        : (size_t)(geo->d + geo->dv + KBLOCK) * sizeof(float);
    p->thread_bytes = (bytes + 63) / 64 * 64;
}

/* ---- portable path ------------------------------------------------------ */

static inline float p_load(float x, bool bf16)
{
    return bf16 ? cp_att_round_bf16(x) : x;
}

static inline float p_exp(float x, bool exact)
{
    return exact ? (float)exp((double)x) : cp_fm_exp_nonpos(x);
}

/* One query row: q, k, v at (b, h), mask at (b, h, row) or NULL. */
CP_FK_HOT static void p_row(const struct cp_att_geom *geo, int64_t kblock, const float *q,
                            const float *k, const float *v, const float *mask, float *y, float *buf)
{
    float *qr = buf, *o = qr + geo->d, *s = o + geo->dv;
    for (int64_t c = 0; c < geo->d; c++)
        qr[c] = p_load(q[c * geo->q.d], geo->bf16);
    for (int64_t c = 0; c < geo->dv; c++)
        o[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int64_t j0 = 0; j0 < geo->m; j0 += kblock) {
        int64_t cnt = geo->m - j0 < kblock ? geo->m - j0 : kblock;
        float bm = -INFINITY;
        for (int64_t j = 0; j < cnt; j++) {
            const float *kj = k + (j0 + j) * geo->k.row;
            float dot = 0.0f;
            for (int64_t c = 0; c < geo->d; c++)
                dot += qr[c] * p_load(kj[c * geo->k.d], geo->bf16);
            float sc = dot * geo->scale;
            if (mask)
                sc += mask[(j0 + j) * geo->mask.d];
            s[j] = sc;
            bm = sc > bm ? sc : bm;
        }
        float m_new = bm > m ? bm : m;
        float base = m_new == -INFINITY ? 0.0f : m_new;
        float alpha = p_exp(m - base, geo->exact);
        m = m_new;
        l *= alpha;
        for (int64_t c = 0; c < geo->dv; c++)
            o[c] *= alpha;
        for (int64_t j = 0; j < cnt; j++) {
            float p = p_exp(s[j] - base, geo->exact);
            l += p;
            const float *vj = v + (j0 + j) * geo->v.row;
            for (int64_t c = 0; c < geo->dv; c++)
                o[c] += p * p_load(vj[c * geo->v.d], geo->bf16);
        }
    }
    float inv = 1.0f / l;
    for (int64_t c = 0; c < geo->dv; c++)
        y[c * geo->out.d] = o[c] * inv;
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
        for (int64_t i = i0; i < i1; i++)
            p_row(geo, p->kblock, q + i * geo->q.row, k, v, mask ? mask + i * geo->mask.row : NULL,
                  y + i * geo->out.row, buf);
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
    return cp_att_geom_init(g, n, &geo) && att_mask_fits_x512(&geo) && cp_att_x512_usable(geo.bf16);
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
    att_release};

const struct cp_kernel cp_fast_attention = {
    "c:attention", CP_OP_FUSED_ATTENTION, att_supports_portable, att_prepare_portable, att_run,
    att_release};
