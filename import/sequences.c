/* Sequences of framework ops that torch_npu runs as one fused API
 * (msprof-analyze's timeline_fusion_ops, written here from torch_npu's
 * documented fused APIs): matched per thread as a timeline's ops stream
 * by, in start order. Between two steps of a sequence up to SEQ_GAP other
 * ops may come (an op's own children: aten::matmul's aten::mm, the
 * aten::to of a cast); more, and the match starts over. Only framework
 * ops are read (names with "::"), not Python functions. Each match adds,
 * in its step, affinity.<api>.count and affinity.<api>.us (the host time
 * from its first op's start to its last op's end). */
#define _GNU_SOURCE /* memmem */
#include "import/import_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEQ_GAP 6
#define SEQ_MAX 6

static const struct {
    const char *api;
    const char *step[SEQ_MAX]; /* alternatives separated by '|' */
} PATTERNS[CP_IMP_N_SEQ] = {
    /* x * rsqrt(mean(x^2) + eps) * weight */
    {"npu_rms_norm", {"aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", NULL}},
    /* silu(gate) * up */
    {"npu_swiglu", {"aten::silu", "aten::mul", NULL}},
    /* q * cos + rotate_half(q) * sin, rotate_half = cat(-x2, x1) */
    {"npu_rotary_mul", {"aten::mul", "aten::neg", "aten::cat", "aten::mul", "aten::add", NULL}},
    /* softmax(q k^T / sqrt(d)) v */
    {"npu_fusion_attention",
     {"aten::matmul|aten::bmm|aten::baddbmm", "aten::div|aten::mul",
      "aten::softmax|aten::_softmax|aten::_safe_softmax", "aten::matmul|aten::bmm", NULL}},
};

const char *cp_imp_seq_api(int pattern)
{
    return pattern >= 0 && pattern < CP_IMP_N_SEQ ? PATTERNS[pattern].api : NULL;
}

static bool step_is(const char *alts, const char *name, size_t len)
{
    for (const char *p = alts; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && memcmp(p, name, n) == 0)
            return true;
        p += n + (bar != NULL);
    }
    return false;
}

/* Bit 0: a framework op at all; bit 1 + p * SEQ_MAX + s: step s of
 * pattern p. */
static uint32_t classify(const char *name, size_t len)
{
    if (!memmem(name, len, "::", 2))
        return 0;
    uint32_t bits = 1;
    for (int p = 0; p < CP_IMP_N_SEQ; p++)
        for (int s = 0; s < SEQ_MAX && PATTERNS[p].step[s]; s++)
            if (step_is(PATTERNS[p].step[s], name, len))
                bits |= 1u << (1 + p * SEQ_MAX + s);
    return bits;
}

static bool has_step(uint32_t bits, int p, int s)
{
    return (bits >> (1 + p * SEQ_MAX + s)) & 1u;
}

static int steps_of(int p)
{
    int n = 0;
    while (n < SEQ_MAX && PATTERNS[p].step[n])
        n++;
    return n;
}

static enum cp_status matched(struct cp_imp_sink *k, int p, int32_t it, double us,
                              struct cp_diag *d)
{
    char name[64];
    snprintf(name, sizeof name, "affinity.%s.count", PATTERNS[p].api);
    enum cp_status st = cp_imp_sink_acc(k, it, name, 1, 0, true, d);
    snprintf(name, sizeof name, "affinity.%s.us", PATTERNS[p].api);
    return st == CP_OK ? cp_imp_sink_acc(k, it, name, us, 0, true, d) : st;
}

enum cp_status cp_imp_seq_event(struct cp_imp_sink *k, int32_t id, const char *name, size_t len,
                                int thread, int32_t it, uint64_t start_ns, uint64_t end_ns,
                                struct cp_diag *d)
{
    struct cp_imp_seqs *q = &k->seq;
    if (id < 0 || thread < 0)
        return CP_OK;
    q->app_events++;
    if (!cp_imp_u32_slot(&q->bits, &q->cap_bits, (size_t)id, UINT32_MAX))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (q->bits[id] == UINT32_MAX)
        q->bits[id] = classify(name, len);
    uint32_t bits = q->bits[id];
    if (!(bits & 1u))
        return CP_OK;
    if ((size_t)thread >= q->n_threads) {
        size_t nt = (size_t)thread + 1;
        struct cp_imp_seq_state *s = cp_realloc_array(q->state, nt * CP_IMP_N_SEQ, sizeof *s);
        if (!s)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        memset(s + q->n_threads * CP_IMP_N_SEQ, 0, (nt - q->n_threads) * CP_IMP_N_SEQ * sizeof *s);
        q->state = s;
        q->n_threads = nt;
    }
    enum cp_status st = CP_OK;
    for (int p = 0; st == CP_OK && p < CP_IMP_N_SEQ; p++) {
        struct cp_imp_seq_state *m = &q->state[(size_t)thread * CP_IMP_N_SEQ + (size_t)p];
        if (m->step > 0 && m->it != it)
            m->step = 0; /* a sequence does not cross steps */
        if (m->step > 0 && has_step(bits, p, m->step)) {
            m->step++;
            m->gap = 0;
            m->end = end_ns > m->end ? end_ns : m->end;
        } else if (has_step(bits, p, 0)) {
            *m = (struct cp_imp_seq_state){1, 0, it, start_ns, end_ns};
        } else if (m->step > 0 && ++m->gap > SEQ_GAP) {
            m->step = 0;
        }
        if (m->step == steps_of(p)) {
            st = matched(k, p, it, (double)(m->end - m->start) / 1000.0, d);
            m->step = 0;
        }
    }
    return st;
}

void cp_imp_seq_release(struct cp_imp_seqs *q)
{
    free(q->bits);
    free(q->state);
    memset(q, 0, sizeof *q);
}
