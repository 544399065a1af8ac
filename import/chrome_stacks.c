/* Call stacks from Kineto's python_function events (docs/import.md): newer
 * torch writes no "Call stack" argument but python_function events around
 * the ops (with_stack=True); the first pass keeps them and where the first
 * op of each name ran, and each such op gets the functions around it as
 * its stack. */
#include "import/chrome_internal.h"

#include <stdlib.h>
#include <string.h>

static int cmp_pyfn(const void *pa, const void *pb)
{
    const struct cp_imp_pyfn *a = pa, *b = pb;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return a->end > b->end ? -1 : a->end < b->end; /* the outer first */
}

static int cmp_pyfn_id(const void *pa, const void *pb)
{
    const struct cp_imp_pyfn *a = *(const struct cp_imp_pyfn *const *)pa,
                             *b = *(const struct cp_imp_pyfn *const *)pb;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* How far back from an op a search for its innermost python function
 * goes, and how deep a stack is kept. */
#define PY_LOOKBACK 4096
#define PY_DEPTH    64

/* Each op without a "Call stack" gets one made of the python functions
 * around its first call, outermost first, as the stacks of older traces
 * read: the innermost is the latest-starting function on its thread that
 * holds the op's start; the rest follow Kineto's Python parent ids, or,
 * without them, the other functions that hold it. */
enum cp_status cp_imp_python_stacks(struct cp_imp_scan *s, struct cp_diag *d)
{
    if (s->n_pyfn == 0 || s->n_op_where == 0)
        return CP_OK;
    qsort(s->pyfn, s->n_pyfn, sizeof *s->pyfn, cmp_pyfn);
    const struct cp_imp_pyfn **by_id = cp_calloc(s->n_pyfn, sizeof *by_id);
    if (!by_id)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t n_ids = 0;
    for (size_t i = 0; i < s->n_pyfn; i++)
        if (s->pyfn[i].id >= 0)
            by_id[n_ids++] = &s->pyfn[i];
    qsort(by_id, n_ids, sizeof *by_id, cmp_pyfn_id);
    enum cp_status st = CP_OK;
    struct cp_buf b;
    cp_buf_init(&b);
    for (size_t o = 0; st == CP_OK && o < s->n_op_where; o++) {
        const struct cp_imp_pyfn *op = &s->op_where[o];
        if ((size_t)op->name < s->cap_stack_of && s->stack_of[op->name] >= 0)
            continue; /* the trace gave its stack */
        /* the first function of a later thread, or starting after the op */
        size_t lo = 0, hi = s->n_pyfn;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const struct cp_imp_pyfn *f = &s->pyfn[mid];
            if (f->tid < op->tid || (f->tid == op->tid && f->ts <= op->ts))
                lo = mid + 1;
            else
                hi = mid;
        }
        const struct cp_imp_pyfn *chain[PY_DEPTH];
        size_t depth = 0;
        for (size_t i = lo, seen = 0; i > 0 && seen < PY_LOOKBACK && depth < PY_DEPTH;
             i--, seen++) {
            const struct cp_imp_pyfn *f = &s->pyfn[i - 1];
            if (f->tid != op->tid)
                break;
            if (f->end <= op->ts)
                continue;
            chain[depth++] = f;
            if (f->id >= 0) /* the rest through its parents */
                break;
        }
        while (depth > 0 && depth < PY_DEPTH && chain[depth - 1]->parent >= 0) {
            struct cp_imp_pyfn key = {.id = chain[depth - 1]->parent};
            const struct cp_imp_pyfn *kp = &key;
            const struct cp_imp_pyfn **hit = bsearch(&kp, by_id, n_ids, sizeof *by_id, cmp_pyfn_id);
            if (!hit || *hit == chain[depth - 1])
                break;
            chain[depth++] = *hit;
        }
        if (depth == 0)
            continue;
        b.len = 0;
        for (size_t k = depth; k > 0; k--) {
            struct cp_imp_val nm = cp_imp_spill_text(s->spill, chain[k - 1]->name);
            cp_buf_printf(&b, "%s%.*s", k == depth ? "" : "\n", (int)nm.len, nm.s ? nm.s : "");
        }
        if (cp_buf_status(&b) != CP_OK) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        struct cp_imp_val text = {b.data, b.len, false};
        if (!cp_imp_scan_note_stack(s, op->name, &text))
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    cp_buf_release(&b);
    free(by_id);
    return st;
}
