/* Repeated chains of device tasks that one kernel could run: msprof-
 * analyze's fusible operator check, on a task table (docs/import.md).
 * Per stream, in the table's order, every chain of 2 to CP_IMP_FUSE_MAX
 * consecutive tasks is counted by its op types (occurrences that do not
 * overlap, so that no task's time counts twice), with its time and the
 * time of its "light" tasks: those whose data moves keep them busy (an MTE
 * ratio of 0.8 or more) or that are short (under 20 us, their launch and
 * sync a large part). A chain that came at least 5 times, took at least 1%
 * of the task time and is light for 80% of it is a candidate: fused, its
 * intermediate tensors stay on chip and its launches become one. */
#include "import/import_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUSE_SEQS      65536 /* distinct chains counted; later new ones are not */
#define FUSE_STREAMS   4096  /* streams read; later new ones are not */
#define FUSE_MIN_COUNT 5
#define FUSE_MIN_SHARE 0.01
#define FUSE_LIGHT     0.8
#define FUSE_MTE       0.8
#define FUSE_SHORT_US  20.0
#define FUSE_TOP       5

void cp_imp_fusible_init(struct cp_imp_fusible *f)
{
    memset(f, 0, sizeof *f);
    cp_strmap_init(&f->op_ix);
}

void cp_imp_fusible_release(struct cp_imp_fusible *f)
{
    cp_strmap_release(&f->op_ix);
    free(f->ops);
    free(f->key_op);
    free(f->stream_key);
    free(f->streams);
    free(f->seqs);
    free(f->tab);
    cp_imp_pool_release(&f->pool);
    memset(f, 0, sizeof *f);
}

/* The op id of a task: by the caller's key (a kernel index) when it has
 * one, else by its name. */
static enum cp_status op_id(struct cp_imp_fusible *f, int32_t key, struct cp_imp_val name,
                            int32_t *id, struct cp_diag *d)
{
    if (key >= 0 && (size_t)key < f->cap_key_op && f->key_op[key] != UINT32_MAX) {
        *id = (int32_t)f->key_op[key];
        return CP_OK;
    }
    size_t n = name.len > 120 ? 120 : name.len;
    int64_t at = cp_strmap_get(&f->op_ix, name.s, n, -1);
    if (at < 0) {
        const char **g = cp_imp_grow(f->ops, f->n_ops, &f->cap_ops, sizeof *g, 64);
        const char *k = g ? cp_imp_pool_add(&f->pool, name.s, n) : NULL;
        if (g)
            f->ops = g;
        if (!k || cp_strmap_add(&f->op_ix, k, n, (int64_t)f->n_ops, NULL, NULL) != CP_OK)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        at = (int64_t)f->n_ops;
        f->ops[f->n_ops++] = k;
    }
    *id = (int32_t)at;
    if (key >= 0) {
        if (!cp_imp_u32_slot(&f->key_op, &f->cap_key_op, (size_t)key, UINT32_MAX))
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        f->key_op[key] = (uint32_t)*id;
    }
    return CP_OK;
}

/* The stream of a key: a few, searched from the last one used. */
static enum cp_status stream_of(struct cp_imp_fusible *f, int64_t key,
                                struct cp_imp_fuse_stream **s, struct cp_diag *d)
{
    if (f->n_streams && f->stream_key[f->last_stream] == key) {
        *s = &f->streams[f->last_stream];
        return CP_OK;
    }
    for (size_t i = 0; i < f->n_streams; i++)
        if (f->stream_key[i] == key) {
            f->last_stream = i;
            *s = &f->streams[i];
            return CP_OK;
        }
    *s = NULL;
    if (f->n_streams >= FUSE_STREAMS)
        return CP_OK; /* more streams than any device has: the rest are not read */
    int64_t *k = cp_imp_grow(f->stream_key, f->n_streams, &f->cap_stream_key, sizeof *k, 8);
    if (k)
        f->stream_key = k;
    struct cp_imp_fuse_stream *g =
        k ? cp_imp_grow(f->streams, f->n_streams, &f->cap_streams, sizeof *g, 8) : NULL;
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    f->streams = g;
    f->stream_key[f->n_streams] = key;
    memset(&f->streams[f->n_streams], 0, sizeof *g);
    f->last_stream = f->n_streams++;
    *s = &f->streams[f->last_stream];
    return CP_OK;
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

static enum cp_status grow_table(struct cp_imp_fusible *f, struct cp_diag *d)
{
    size_t nc = f->cap_tab ? f->cap_tab * 2 : 1024;
    struct cp_imp_fuse_slot *t = cp_calloc(nc, sizeof *t);
    if (!t)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nc; i++)
        t[i].seq = -1;
    for (size_t i = 0; i < f->cap_tab; i++) {
        if (f->tab[i].seq < 0)
            continue;
        size_t j = f->tab[i].h & (nc - 1);
        while (t[j].seq >= 0)
            j = (j + 1) & (nc - 1);
        t[j] = f->tab[i];
    }
    free(f->tab);
    f->tab = t;
    f->cap_tab = nc;
    return CP_OK;
}

/* The chain of the last `len` tasks of stream s (hash h), counted: per
 * stream, so that occurrences on one stream never overlap however the
 * streams' tasks interleave in the file; the streams' counts of one chain
 * are added up at the end. */
static enum cp_status count_chain(struct cp_imp_fusible *f, const struct cp_imp_fuse_stream *s,
                                  size_t sid, size_t len, uint64_t h, bool *untracked,
                                  struct cp_diag *d)
{
    int32_t key[CP_IMP_FUSE_MAX];
    double us = 0, light = 0;
    for (size_t i = 0; i < len; i++) {
        size_t at = (s->head + CP_IMP_FUSE_MAX - len + i) % CP_IMP_FUSE_MAX;
        key[i] = s->op[at];
        us += s->us[at];
        light += s->light[at] ? s->us[at] : 0;
    }
    if ((f->n_seqs + 1) * 2 > f->cap_tab && f->n_seqs < FUSE_SEQS) {
        enum cp_status st = grow_table(f, d);
        if (st != CP_OK)
            return st;
    }
    size_t j = h & (f->cap_tab - 1);
    int32_t ix = -1;
    for (; f->tab[j].seq >= 0; j = (j + 1) & (f->cap_tab - 1)) {
        const struct cp_imp_fuse_seq *q = &f->seqs[f->tab[j].seq];
        if (f->tab[j].h == h && q->stream == sid && q->len == len &&
            memcmp(q->op, key, len * sizeof *key) == 0) {
            ix = f->tab[j].seq;
            break;
        }
    }
    if (ix < 0) {
        if (f->n_seqs >= FUSE_SEQS) {
            f->full = true;
            *untracked = true;
            return CP_OK;
        }
        struct cp_imp_fuse_seq *g = cp_imp_grow(f->seqs, f->n_seqs, &f->cap_seqs, sizeof *g, 256);
        if (!g)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        f->seqs = g;
        ix = (int32_t)f->n_seqs++;
        struct cp_imp_fuse_seq *q = &f->seqs[ix];
        memset(q, 0, sizeof *q);
        memcpy(q->op, key, len * sizeof *key);
        q->len = (uint8_t)len;
        q->stream = sid;
        f->tab[j] = (struct cp_imp_fuse_slot){h, ix};
    }
    struct cp_imp_fuse_seq *q = &f->seqs[ix];
    /* occurrences do not overlap: "a b a b a" holds "a b a" once */
    if (q->count && s->tasks - len < q->last_end)
        return CP_OK;
    q->last_end = s->tasks;
    q->count++;
    q->us += us;
    q->light_us += light;
    return CP_OK;
}

enum cp_status cp_imp_fusible_task(struct cp_imp_fusible *f, int64_t stream, int32_t key,
                                   struct cp_imp_val op, double us, double mte, struct cp_diag *d)
{
    if (!op.s || !(us >= 0) || !isfinite(us))
        return CP_OK;
    f->task_us += us;
    int32_t oid = -1;
    struct cp_imp_fuse_stream *s = NULL;
    enum cp_status st = op_id(f, key, op, &oid, d);
    if (st == CP_OK)
        st = stream_of(f, stream, &s, d);
    if (st != CP_OK || !s)
        return st;
    size_t sid = (size_t)(s - f->streams);
    s->op[s->head] = oid;
    s->us[s->head] = us;
    s->light[s->head] = (isfinite(mte) && mte >= FUSE_MTE) || us < FUSE_SHORT_US;
    s->head = (s->head + 1) % CP_IMP_FUSE_MAX;
    s->tasks++;
    if (s->n < CP_IMP_FUSE_MAX)
        s->n++;
    /* the chains that end here, growing backwards, each hashed from the
     * last: the newest task first. A chain never seen has no longer one
     * ending here that was (it would hold it): once the table is full, the
     * first one untracked ends the search. */
    uint64_t h = 0;
    bool untracked = false;
    for (size_t len = 1; st == CP_OK && !untracked && len <= s->n; len++) {
        size_t at = (s->head + CP_IMP_FUSE_MAX - len) % CP_IMP_FUSE_MAX;
        h = (h ^ (uint64_t)(uint32_t)s->op[at]) * 0x100000001b3ULL + len;
        if (len >= 2)
            st = count_chain(f, s, sid, len, mix(h ^ (sid + 1) * 0x9e3779b97f4a7c15ULL), &untracked,
                             d);
    }
    return st;
}

/* Whether a and b share a run of two op types or more (then they are
 * views of the same stretch of the stream). */
static bool overlap(const struct cp_imp_fuse_seq *a, const struct cp_imp_fuse_seq *b)
{
    for (size_t i = 0; i + 1 < a->len; i++)
        for (size_t j = 0; j + 1 < b->len; j++)
            if (a->op[i] == b->op[j] && a->op[i + 1] == b->op[j + 1])
                return true;
    return false;
}

static int cmp_ops(const void *pa, const void *pb)
{
    const struct cp_imp_fuse_seq *a = pa, *b = pb;
    if (a->len != b->len)
        return (int)a->len - (int)b->len;
    return memcmp(a->op, b->op, a->len * sizeof *a->op);
}

static int cmp_seq(const void *pa, const void *pb)
{
    const struct cp_imp_fuse_seq *a = *(const struct cp_imp_fuse_seq *const *)pa,
                                 *b = *(const struct cp_imp_fuse_seq *const *)pb;
    if (a->us != b->us)
        return a->us < b->us ? 1 : -1;
    /* as much time in a shorter chain: the longer one repeats it */
    return (int)a->len - (int)b->len;
}

enum cp_status cp_imp_fusible_finish(struct cp_imp_fusible *f, struct cp_imp_sink *k,
                                     struct cp_import_result *r, struct cp_diag *d)
{
    if (!(f->task_us > 0))
        return CP_OK;
    /* one entry per chain: the streams' counts added up (sorted by ops,
     * equal chains are neighbours) */
    if (f->n_seqs)
        qsort(f->seqs, f->n_seqs, sizeof *f->seqs, cmp_ops);
    size_t m = 0;
    for (size_t i = 0; i < f->n_seqs; i++) {
        if (m && cmp_ops(&f->seqs[m - 1], &f->seqs[i]) == 0) {
            f->seqs[m - 1].count += f->seqs[i].count;
            f->seqs[m - 1].us += f->seqs[i].us;
            f->seqs[m - 1].light_us += f->seqs[i].light_us;
        } else {
            f->seqs[m++] = f->seqs[i];
        }
    }
    f->n_seqs = m; /* the table no longer indexes them: counting is over */
    free(f->tab);
    f->tab = NULL;
    f->cap_tab = 0;
    size_t n = 0;
    const struct cp_imp_fuse_seq **cand = cp_calloc(f->n_seqs ? f->n_seqs : 1, sizeof *cand);
    if (!cand)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < f->n_seqs; i++) {
        const struct cp_imp_fuse_seq *q = &f->seqs[i];
        if (q->count >= FUSE_MIN_COUNT && q->us >= FUSE_MIN_SHARE * f->task_us &&
            q->light_us >= FUSE_LIGHT * q->us)
            cand[n++] = q;
    }
    qsort(cand, n, sizeof *cand, cmp_seq);
    const struct cp_imp_fuse_seq *top[FUSE_TOP];
    size_t n_top = 0;
    for (size_t i = 0; i < n && n_top < FUSE_TOP; i++) {
        bool dup = false;
        for (size_t j = 0; j < n_top && !dup; j++)
            dup = overlap(cand[i], top[j]);
        if (!dup)
            top[n_top++] = cand[i];
    }
    free(cand);
    /* the best chain's share is the feature; 0 when none qualified */
    enum cp_status st =
        cp_imp_sink_counter(k, -1, "fusible.top_share", n_top ? top[0]->us / f->task_us : 0, 0, d);
    json_t *list = json_array();
    for (size_t i = 0; list && i < n_top; i++) {
        json_t *o = json_object(), *ops = json_array();
        for (size_t j = 0; ops && j < top[i]->len; j++)
            json_array_append_new(ops, json_string(f->ops[top[i]->op[j]]));
        json_object_set_new(o, "ops", ops);
        json_object_set_new(o, "count", json_integer(top[i]->count));
        json_object_set_new(o, "share", json_real(top[i]->us / f->task_us));
        json_array_append_new(list, o);
    }
    char *text = list ? json_dumps(list, JSON_COMPACT) : NULL;
    json_decref(list);
    if (st == CP_OK && !text)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st == CP_OK)
        st = cp_imp_sink_meta(k, "fusible_sequences", text, d);
    free(text);
    if (st == CP_OK && f->full)
        st =
            cp_imp_sink_meta(k, "skipped.fusible_sequences",
                             "more than 65536 distinct task chains: later new ones not counted", d);
    if (n_top) {
        /* "Cast > Mul > Add x480 (12.3% of the task time)" for the import's summary */
        size_t at = 0;
        r->fusible[0] = '\0';
        for (size_t j = 0; j < top[0]->len && at < sizeof r->fusible; j++) {
            int w = snprintf(r->fusible + at, sizeof r->fusible - at, "%s%.30s", j ? " > " : "",
                             f->ops[top[0]->op[j]]);
            at += w > 0 ? (size_t)w : 0;
        }
        if (at < sizeof r->fusible)
            snprintf(r->fusible + at, sizeof r->fusible - at, " x%u (%.1f%% of the task time)",
                     top[0]->count, 100.0 * top[0]->us / f->task_us);
    }
    return st;
}
