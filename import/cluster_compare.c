/* A cluster's ranks compared once they are all imported (msprof-analyze's
 * comparison and stage_compute analyses, docs/import.md): the slowest rank
 * against the fastest by op type, and the pipeline stages' computing time
 * when the ranks said which stage they are. */
#include "import/import_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPARE_TOP 10

struct op_time {
    const char *op_type; /* the kernel table's */
    double us;           /* per step */
};

/* One rank: its median step, its computing time per step (the kernels
 * that are not communication) and its time per op type. */
struct rank_facts {
    int rank, stage;
    double median_us, compute_us;
    struct cp_trace_kernel_desc *k;
    size_t n_k;
    struct op_time *ops;
    size_t n_ops;
};

static void facts_release(struct rank_facts *f)
{
    cp_trace_kernels_free(f->k, f->n_k);
    free(f->ops);
}

static enum cp_status read_rank(struct cp_trace_store *s, int64_t run, int rank,
                                struct rank_facts *f, struct cp_diag *d)
{
    memset(f, 0, sizeof *f);
    f->rank = rank;
    f->stage = -1;
    double median_ns = NAN;
    size_t m = 0; /* the steps, to spread kernel time over */
    enum cp_status st = cp_trace_query_median_sample(s, run, &median_ns, &m, d);
    f->median_us = median_ns / 1000.0;
    double stage = NAN;
    if (st == CP_OK)
        st = cp_trace_query_counter(s, run, "parallel.pp_stage", &stage, d);
    /* any counter of that name (a timeline's track may have one): a stage
     * only when it is one */
    if (isfinite(stage) && stage >= 0 && stage < CP_IMP_MAX_STAGES && stage == floor(stage))
        f->stage = (int)stage;
    struct cp_trace_kernel_time *t = NULL;
    size_t n = 0;
    if (st == CP_OK)
        st = cp_trace_query_kernels(s, run, &f->k, &f->n_k, d);
    if (st == CP_OK)
        st = cp_trace_query_kernel_times(s, run, NULL, 0, &t, &n, d);
    if (st == CP_OK && n && !(f->ops = cp_calloc(n, sizeof *f->ops)))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    double steps = m ? (double)m : 1;
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        const struct cp_trace_kernel_desc *kd = cp_trace_kernel_find(f->k, f->n_k, t[i].kernel_idx);
        const char *op = kd && kd->op_type[0] ? kd->op_type : "?";
        double us = t[i].total_ns / 1000.0 / steps;
        if (!kd || !cp_trace_kernel_is_communication(kd->op_type, kd->impl, kd->node))
            f->compute_us += us;
        size_t j = 0;
        while (j < f->n_ops && strcmp(f->ops[j].op_type, op) != 0)
            j++;
        if (j == f->n_ops)
            f->ops[f->n_ops++] = (struct op_time){op, 0};
        f->ops[j].us += us;
    }
    free(t);
    return st;
}

static double op_us(const struct rank_facts *f, const char *op)
{
    for (size_t j = 0; j < f->n_ops; j++)
        if (strcmp(f->ops[j].op_type, op) == 0)
            return f->ops[j].us;
    return 0;
}

struct diff {
    const char *op_type;
    double slow_us, fast_us;
};

static int cmp_diff(const void *pa, const void *pb)
{
    const struct diff *a = pa, *b = pb;
    double x = fabs(a->slow_us - a->fast_us), y = fabs(b->slow_us - b->fast_us);
    return (x < y) - (x > y);
}

/* The slowest rank against the fastest, op type by op type: meta
 * cluster.rank_comparison (JSON) and r->rank_comparison in words. */
static enum cp_status compare_ranks(struct cp_trace_store *s, int64_t run0,
                                    const struct rank_facts *slow, const struct rank_facts *fast,
                                    struct cp_import_result *r, struct cp_diag *d)
{
    size_t n = 0, cap = slow->n_ops + fast->n_ops;
    struct diff *v = cp_calloc(cap ? cap : 1, sizeof *v);
    if (!v)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    const struct rank_facts *both[2] = {slow, fast};
    for (int side = 0; side < 2; side++)
        for (size_t j = 0; j < both[side]->n_ops; j++) {
            const char *op = both[side]->ops[j].op_type;
            bool seen = false;
            for (size_t i = 0; i < n && !seen; i++)
                seen = strcmp(v[i].op_type, op) == 0;
            if (!seen)
                v[n++] = (struct diff){op, op_us(slow, op), op_us(fast, op)};
        }
    qsort(v, n, sizeof *v, cmp_diff);
    json_t *o = json_object(), *ops = json_array();
    json_object_set_new(o, "slow_rank", json_integer(slow->rank));
    json_object_set_new(o, "fast_rank", json_integer(fast->rank));
    json_object_set_new(o, "slow_step_us", json_real(slow->median_us));
    json_object_set_new(o, "fast_step_us", json_real(fast->median_us));
    for (size_t i = 0; ops && i < n && i < COMPARE_TOP; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "op_type", json_string(v[i].op_type));
        json_object_set_new(e, "slow_us_per_step", json_real(v[i].slow_us));
        json_object_set_new(e, "fast_us_per_step", json_real(v[i].fast_us));
        json_array_append_new(ops, e);
    }
    json_object_set_new(o, "op_types", ops);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    char key[96];
    snprintf(key, sizeof key, "run.%lld.import.cluster.rank_comparison", (long long)run0);
    enum cp_status st = text ? cp_trace_store_set_meta(s, key, text, d)
                             : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    free(text);
    /* "rank 1 vs rank 0: step +400 us; MatMulV2 +300 us, TransData +100 us" */
    int at = snprintf(r->rank_comparison, sizeof r->rank_comparison,
                      "rank %d vs rank %d (fastest): step %+.0f us", slow->rank, fast->rank,
                      slow->median_us - fast->median_us);
    for (size_t i = 0; i < n && i < 3 && at > 0 && (size_t)at < sizeof r->rank_comparison; i++)
        at +=
            snprintf(r->rank_comparison + at, sizeof r->rank_comparison - (size_t)at,
                     "%s %.40s %+.0f us", i ? "," : ";", v[i].op_type, v[i].slow_us - v[i].fast_us);
    free(v);
    return st;
}

/* The pipeline stages' computing time: each stage's mean over its ranks,
 * their spread ((max - min) / mean), as counters of every rank's run. */
static enum cp_status compare_stages(struct cp_trace_store *s, const struct rank_facts *f, size_t n,
                                     const struct cp_import_result *r, struct cp_diag *d)
{
    int stages = 0;
    for (size_t i = 0; i < n; i++) {
        if (f[i].stage < 0)
            return CP_OK; /* every rank must say */
        stages = f[i].stage + 1 > stages ? f[i].stage + 1 : stages;
    }
    if (stages < 2)
        return CP_OK;
    double *sum = cp_calloc((size_t)stages, sizeof *sum),
           *cnt = cp_calloc((size_t)stages, sizeof *cnt);
    enum cp_status st = sum && cnt ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        sum[f[i].stage] += f[i].compute_us;
        cnt[f[i].stage]++;
    }
    double lo = INFINITY, hi = -INFINITY, all = 0;
    int known = 0, slowest = -1;
    for (int g = 0; st == CP_OK && g < stages; g++) {
        if (!cnt[g])
            continue;
        double m = sum[g] / cnt[g];
        if (m > hi) {
            hi = m;
            slowest = g;
        }
        lo = m < lo ? m : lo;
        all += m;
        known++;
    }
    free(sum);
    free(cnt);
    if (st != CP_OK || known < 2 || !(all > 0))
        return st;
    for (size_t i = 0; st == CP_OK && i < r->n_ranks; i++) {
        st = cp_trace_store_add_counter(s, r->rank_run[i], -1, "cluster.stage_compute_spread",
                                        (hi - lo) / (all / known), 0, d);
        if (st == CP_OK)
            st = cp_trace_store_add_counter(s, r->rank_run[i], -1, "cluster.slowest_stage", slowest,
                                            0, d);
    }
    return st;
}

enum cp_status cp_imp_cluster_compare(struct cp_trace_store *s, struct cp_import_result *r,
                                      struct cp_diag *d)
{
    if (r->n_ranks < 2)
        return CP_OK;
    struct rank_facts *f = cp_calloc(r->n_ranks, sizeof *f);
    if (!f)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    size_t n = 0, slow = SIZE_MAX, fast = SIZE_MAX;
    for (; st == CP_OK && n < r->n_ranks; n++) {
        st = read_rank(s, r->rank_run[n], r->rank[n], &f[n], d);
        if (st != CP_OK || !isfinite(f[n].median_us))
            continue; /* a rank without steps is not compared */
        if (slow == SIZE_MAX || f[n].median_us > f[slow].median_us)
            slow = n;
        if (fast == SIZE_MAX || f[n].median_us < f[fast].median_us)
            fast = n;
    }
    if (st == CP_OK && slow != SIZE_MAX && slow != fast)
        st = compare_ranks(s, r->rank_run[0], &f[slow], &f[fast], r, d);
    if (st == CP_OK)
        st = compare_stages(s, f, n, r, d);
    for (size_t i = 0; i < n; i++)
        facts_release(&f[i]);
    free(f);
    return st;
}
