/* The steps of an imported profile (import_internal.h): each an
 * iteration, and which one an event belongs to. */
#include "import/import_internal.h"

#include <stdio.h>
#include <stdlib.h>

enum cp_status cp_imp_steps_add(struct cp_imp_steps *s, int64_t start, int64_t end, int64_t number,
                                struct cp_diag *d)
{
    struct cp_imp_step *g = cp_imp_grow(s->v, s->n, &s->cap, sizeof *g, 64);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    s->v = g;
    s->v[s->n++] = (struct cp_imp_step){start, end > start ? end : start, number};
    return CP_OK;
}

static int cmp_step(const void *pa, const void *pb)
{
    const struct cp_imp_step *a = pa, *b = pb;
    return a->start < b->start ? -1 : a->start > b->start;
}

void cp_imp_steps_sort(struct cp_imp_steps *s)
{
    if (s->n > 1)
        qsort(s->v, s->n, sizeof *s->v, cmp_step);
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].number < 0)
            s->v[i].number = (int64_t)i;
}

int32_t cp_imp_steps_of(const struct cp_imp_steps *s, int64_t ts, bool device)
{
    if (s->n == 0)
        return 0; /* the whole profile is one iteration */
    size_t lo = 0, hi = s->n;
    while (lo < hi) { /* the first step starting after ts */
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid].start <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const struct cp_imp_step *st = &s->v[lo - 1];
    if (ts < st->end)
        return (int32_t)(lo - 1);
    if (device && ts < st->end + (st->end - st->start))
        return (int32_t)(lo - 1);
    return -1;
}

enum cp_status cp_imp_steps_finish(const struct cp_imp_steps *s, struct cp_imp_sink *k,
                                   int64_t window_start, int64_t window_end, struct cp_diag *d)
{
    size_t n = s->n ? s->n : 1;
    uint64_t *samples = cp_calloc(n, sizeof *samples);
    if (!samples)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        samples[i] = s->n ? (uint64_t)(s->v[i].end - s->v[i].start)
                          : (uint64_t)(window_end > window_start ? window_end - window_start : 0);
    k->r->iterations = s->n;
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < s->n; i++)
        st = cp_imp_sink_counter(k, (int32_t)i, "step.number", (double)s->v[i].number, 0, d);
    char base[32];
    snprintf(base, sizeof base, "%lld", (long long)window_start);
    if (st == CP_OK)
        st = cp_imp_sink_meta(k, "time_base_ns", base, d);
    if (st == CP_OK)
        st = cp_imp_sink_finish(k, samples, n, d);
    free(samples);
    return st;
}

void cp_imp_steps_release(struct cp_imp_steps *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}
