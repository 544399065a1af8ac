/* Interleaved A/B measurement (see bench_ab.h): rounds of A and B in
 * alternating order, paired samples, and the verdict on them. */
#include "runner/bench_ab.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool cp_bench_ab_a_first(size_t round)
{
    return round % 2 == 0;
}

long cp_bench_ab_find_input(const struct cp_plan *p, const char *name)
{
    for (size_t i = 0; i < cp_plan_n_inputs(p); i++)
        if (strcmp(cp_plan_input(p, i)->name, name) == 0)
            return (long)i;
    return -1;
}

/* "f32[1,3,64,64]" into b. */
static void describe_tensor(struct cp_buf *b, const struct cp_tensor *t)
{
    cp_buf_printf(b, "%s[", cp_dtype_name(t->dtype));
    for (int i = 0; i < t->shape.rank; i++) {
        if (t->shape.dims[i].value >= 0)
            cp_buf_printf(b, "%s%lld", i ? "," : "", (long long)t->shape.dims[i].value);
        else
            cp_buf_printf(b, "%s%s", i ? "," : "",
                          t->shape.dims[i].sym ? t->shape.dims[i].sym : "?");
    }
    cp_buf_putc(b, ']');
}

enum cp_status cp_bench_ab_check_inputs(const struct cp_plan *a, const struct cp_plan *b,
                                        const char *a_name, const char *b_name, struct cp_diag *d)
{
    for (size_t i = 0; i < cp_plan_n_inputs(a); i++)
        if (cp_bench_ab_find_input(b, cp_plan_input(a, i)->name) < 0)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "input '%s': %s takes it but %s does not; A and B must take the "
                               "same inputs",
                               cp_plan_input(a, i)->name, a_name, b_name);
    for (size_t i = 0; i < cp_plan_n_inputs(b); i++)
        if (cp_bench_ab_find_input(a, cp_plan_input(b, i)->name) < 0)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "input '%s': %s takes it but %s does not; A and B must take the "
                               "same inputs",
                               cp_plan_input(b, i)->name, b_name, a_name);
    for (size_t i = 0; i < cp_plan_n_inputs(a); i++) {
        const struct cp_tensor *ta = cp_plan_input(a, i);
        const struct cp_tensor *tb = cp_plan_input(b, (size_t)cp_bench_ab_find_input(b, ta->name));
        if (ta->dtype == tb->dtype && cp_shape_equal(&ta->shape, &tb->shape))
            continue;
        struct cp_buf da, db;
        cp_buf_init(&da);
        cp_buf_init(&db);
        describe_tensor(&da, ta);
        describe_tensor(&db, tb);
        enum cp_status st =
            cp_diag_set(d, CP_ERR_INVALID,
                        "input '%s': %s takes %s but %s takes %s; A and B must take the "
                        "same inputs",
                        ta->name, a_name, da.data ? da.data : "?", b_name, db.data ? db.data : "?");
        cp_buf_release(&da);
        cp_buf_release(&db);
        return st;
    }
    return CP_OK;
}

void cp_bench_ab_result_release(struct cp_bench_ab_result *r)
{
    free(r->a_ns);
    free(r->b_ns);
    memset(r, 0, sizeof *r);
}

/* The clock reading `s` seconds from now. Saturates: converting a double
 * beyond uint64_t's range is undefined, and a duration of centuries means
 * no deadline in practice. */
static uint64_t deadline_after(double s)
{
    double ns = s * 1e9;
    uint64_t now = cp_clock_ns();
    return ns < 9e18 ? now + (uint64_t)ns : UINT64_MAX;
}

/* One round: A and B once each, in the round's order. `iteration` is
 * stamped on their trace events (-1 in warm-up). */
static enum cp_status run_round(struct cp_plan *a, struct cp_plan *b, size_t round,
                                int32_t iteration, uint64_t *a_ns, uint64_t *b_ns,
                                struct cp_diag *d)
{
    struct cp_plan *first = a, *second = b;
    uint64_t *first_ns = a_ns, *second_ns = b_ns;
    if (!cp_bench_ab_a_first(round)) {
        first = b;
        second = a;
        first_ns = b_ns;
        second_ns = a_ns;
    }
    uint64_t t0 = cp_clock_ns();
    enum cp_status st = cp_plan_run(first, iteration, d);
    uint64_t t1 = cp_clock_ns();
    if (st != CP_OK)
        return st;
    st = cp_plan_run(second, iteration, d);
    uint64_t t2 = cp_clock_ns();
    *first_ns = t1 - t0;
    *second_ns = t2 - t1;
    return st;
}

static void push_both(const struct cp_bench_ab_opts *o, const char *name)
{
    /* A range that cannot be opened (out of memory) only costs the trace
     * its label; the measurement goes on. */
    if (o->trace_a)
        (void)cp_trace_push(o->trace_a, name);
    if (o->trace_b && o->trace_b != o->trace_a)
        (void)cp_trace_push(o->trace_b, name);
}

static void pop_both(const struct cp_bench_ab_opts *o)
{
    if (o->trace_a)
        (void)cp_trace_pop(o->trace_a);
    if (o->trace_b && o->trace_b != o->trace_a)
        (void)cp_trace_pop(o->trace_b);
}

static void set_iteration_both(const struct cp_bench_ab_opts *o, int32_t it)
{
    if (o->trace_a)
        cp_trace_set_iteration(o->trace_a, it);
    if (o->trace_b)
        cp_trace_set_iteration(o->trace_b, it);
}

/* Grow both sample arrays to hold `cap` rounds. */
static enum cp_status grow(struct cp_bench_ab_result *r, size_t cap, struct cp_diag *d)
{
    uint64_t *a = cp_realloc_array(r->a_ns, cap, sizeof *a);
    if (!a)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for %zu rounds of samples", cap);
    r->a_ns = a;
    uint64_t *b = cp_realloc_array(r->b_ns, cap, sizeof *b);
    if (!b)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for %zu rounds of samples", cap);
    r->b_ns = b;
    return CP_OK;
}

enum cp_status cp_bench_ab_measure(struct cp_plan *a, struct cp_plan *b,
                                   const struct cp_bench_ab_opts *o, struct cp_bench_ab_result *r,
                                   struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    if (!a || !b || !o)
        return cp_diag_set(d, CP_ERR_INVALID, "A/B measurement: a plan or the options are missing");
    if (o->warmup < 0)
        return cp_diag_set(d, CP_ERR_INVALID, "A/B measurement: %lld warm-up rounds",
                           (long long)o->warmup);
    if (o->rounds == 1 || o->rounds < 0 || o->rounds > INT32_MAX)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "A/B measurement: %lld rounds; a verdict needs at least 2",
                           (long long)o->rounds);
    if (o->rounds == 0 && !(o->duration_s > 0 && isfinite(o->duration_s)))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "A/B measurement: give a number of rounds or a duration in seconds");

    enum cp_status st = CP_OK;
    uint64_t wa, wb;
    push_both(o, "warmup");
    for (int64_t i = 0; i < o->warmup && st == CP_OK; i++)
        st = run_round(a, b, (size_t)i, -1, &wa, &wb, d);
    pop_both(o);
    if (st != CP_OK)
        return st;

    size_t cap = o->rounds > 0 ? (size_t)o->rounds : 1024;
    if ((st = grow(r, cap, d)) != CP_OK)
        goto fail;
    uint64_t deadline = o->rounds > 0 ? 0 : deadline_after(o->duration_s);
    push_both(o, "measure");
    for (size_t n = 0;; n++) {
        if (o->rounds > 0 && n == (size_t)o->rounds)
            break;
        if (deadline && n >= 2 && cp_clock_ns() >= deadline)
            break;
        if (n == INT32_MAX) /* iterations are int32 in traces */
            break;
        if (n == cap) {
            if ((st = grow(r, cap * 2, d)) != CP_OK)
                break;
            cap *= 2;
        }
        set_iteration_both(o, (int32_t)n);
        st = run_round(a, b, n, (int32_t)n, &r->a_ns[n], &r->b_ns[n], d);
        if (st != CP_OK)
            break;
        r->n = n + 1;
    }
    set_iteration_both(o, -1);
    pop_both(o);
    if (st != CP_OK)
        goto fail;
    return CP_OK;
fail:
    cp_bench_ab_result_release(r);
    return st;
}

/* The samples of one side as doubles. Caller frees; NULL on OOM. */
static double *to_doubles(const uint64_t *ns, size_t n)
{
    double *x = cp_calloc(n ? n : 1, sizeof *x);
    if (x)
        for (size_t i = 0; i < n; i++)
            x[i] = (double)ns[i];
    return x;
}

enum cp_status cp_bench_ab_summarize(const struct cp_bench_ab_result *r, struct cp_summary *a,
                                     struct cp_summary *b, struct cp_diag *d)
{
    memset(a, 0, sizeof *a);
    memset(b, 0, sizeof *b);
    double *xa = to_doubles(r->a_ns, r->n), *xb = to_doubles(r->b_ns, r->n);
    enum cp_status st;
    if (!xa || !xb)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    else if ((st = cp_stats_summary(xa, r->n, a, d)) == CP_OK)
        st = cp_stats_summary(xb, r->n, b, d);
    free(xa);
    free(xb);
    return st;
}

enum cp_status cp_bench_ab_compare(const struct cp_bench_ab_result *r,
                                   const struct cp_verdict_opts *vo, struct cp_comparison *c,
                                   struct cp_diag *d)
{
    struct cp_verdict_opts defaults;
    if (!vo) {
        cp_verdict_opts_init(&defaults);
        vo = &defaults;
    }
    if (r->n < 2) {
        memset(c, 0, sizeof *c);
        c->before = c->after = c->delta_pct = c->ci_lo_pct = c->ci_hi_pct = c->p = c->mde_pct = NAN;
        c->verdict = CP_VERDICT_INCONCLUSIVE;
        return cp_diag_set(d, CP_ERR_INVALID, "A/B verdict: %zu rounds; it needs at least 2", r->n);
    }
    double *xa = to_doubles(r->a_ns, r->n), *xb = to_doubles(r->b_ns, r->n);
    enum cp_status st;
    if (!xa || !xb)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    else
        st = cp_verdict_compare(xa, r->n, xb, r->n, CP_BETTER_LOWER, vo, c, d);
    free(xa);
    free(xb);
    return st;
}

bool cp_bench_ab_parse_threshold(const char *s, double *pct)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0 || v > 1000)
        return false;
    if (*end == '%')
        end++;
    if (*end != '\0')
        return false;
    *pct = v;
    return true;
}

bool cp_bench_ab_parse_alpha(const char *s, double *alpha)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v > 0 && v <= 0.5))
        return false;
    *alpha = v;
    return true;
}
