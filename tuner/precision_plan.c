/* Per-node precision under a precision budget (tuner/tuner.h, "per-node
 * precision"): the latency model from one traced interleaved profile, each
 * node's sensitivity from one precision check with it alone in bf16, the
 * assembly by gain per squared loss, and the bisection that verifies it. */
#include "tuner/tuner_internal.h"

#include "core/host.h"
#include "om/om.h"
#include "trace/query.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- assembly and verification ---------------------------------------------------- */

static const struct cp_prec_item *sort_items;

/* Most gain per unit of squared loss first; a node that changes nothing
 * (loss 0) before any that does; then the larger gain, then the index. */
static int cmp_priority(const void *pa, const void *pb)
{
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    const struct cp_prec_item *x = &sort_items[a], *y = &sort_items[b];
    double rx = x->loss > 0 ? x->gain_ns / (x->loss * x->loss) : INFINITY;
    double ry = y->loss > 0 ? y->gain_ns / (y->loss * y->loss) : INFINITY;
    if (rx != ry)
        return rx > ry ? -1 : 1;
    if (x->gain_ns != y->gain_ns)
        return x->gain_ns > y->gain_ns ? -1 : 1;
    return a < b ? -1 : a > b;
}

static bool within(double loss, double budget, bool strict)
{
    return isfinite(loss) && (strict ? loss < budget : loss <= budget);
}

void cp_prec_plan_release(struct cp_prec_plan *p)
{
    if (!p)
        return;
    free(p->order);
    memset(p, 0, sizeof *p);
    p->loss = NAN;
}

/* Check the prefix order[0..k) and record the trial. */
static enum cp_status try_prefix(const struct cp_prec_item *items, size_t n, double budget,
                                 bool strict, cp_prec_check_fn check, void *ctx, bool *flags,
                                 size_t k, struct cp_prec_plan *p, bool *fits, struct cp_diag *d)
{
    if (p->n_trials == CP_PREC_MAX_TRIALS)
        return cp_diag_set(d, CP_ERR_INTERNAL, "the precision plan ran out of trials");
    memset(flags, 0, n * sizeof *flags);
    double gain = 0;
    for (size_t i = 0; i < k; i++) {
        flags[p->order[i]] = true;
        gain += items[p->order[i]].gain_ns;
    }
    double loss = NAN;
    enum cp_status st = check(ctx, flags, n, &loss, d);
    if (st != CP_OK)
        return st;
    *fits = within(loss, budget, strict);
    p->trials[p->n_trials++] = (struct cp_prec_trial){k, loss, gain, *fits};
    return CP_OK;
}

enum cp_status cp_prec_plan_select(const struct cp_prec_item *items, size_t n, double budget,
                                   bool strict, cp_prec_check_fn check, void *ctx,
                                   struct cp_prec_plan *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    out->loss = NAN;
    out->order = cp_calloc(n ? n : 1, sizeof *out->order);
    bool *flags = cp_calloc(n ? n : 1, sizeof *flags);
    if (!out->order || !flags) {
        free(flags);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory planning precision");
    }
    for (size_t i = 0; i < n; i++)
        if (items[i].gain_ns > 0 && within(items[i].loss, budget, strict))
            out->order[out->n_order++] = i;
    sort_items = items;
    qsort(out->order, out->n_order, sizeof *out->order, cmp_priority);
    sort_items = NULL;
    /* The first guess: independent roundings add in quadrature. */
    double sq = 0;
    while (out->predicted_k < out->n_order) {
        double l = items[out->order[out->predicted_k]].loss;
        if (!within(sqrt(sq + l * l), budget, strict))
            break;
        sq += l * l;
        out->predicted_k++;
    }
    /* Bisection on the prefix length, assuming a longer prefix loses no
     * less: lo is the longest prefix known to fit (0 needs no check),
     * hi the shortest known not to (n_order + 1: none known yet). */
    size_t lo = 0, hi = out->n_order + 1;
    enum cp_status st = CP_OK;
    bool fits = false;
    if (out->predicted_k > 0) {
        st = try_prefix(items, n, budget, strict, check, ctx, flags, out->predicted_k, out, &fits,
                        d);
        if (st == CP_OK) {
            if (fits)
                lo = out->predicted_k;
            else
                hi = out->predicted_k;
        }
    }
    if (st == CP_OK && hi == out->n_order + 1 && lo < out->n_order) {
        /* the guess fitted: perhaps everything does */
        st = try_prefix(items, n, budget, strict, check, ctx, flags, out->n_order, out, &fits, d);
        if (st == CP_OK) {
            if (fits)
                lo = out->n_order;
            else
                hi = out->n_order;
        }
    }
    while (st == CP_OK && hi <= out->n_order && hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        st = try_prefix(items, n, budget, strict, check, ctx, flags, mid, out, &fits, d);
        if (st == CP_OK) {
            if (fits)
                lo = mid;
            else
                hi = mid;
        }
    }
    free(flags);
    if (st != CP_OK)
        return st;
    out->k = lo;
    for (size_t t = 0; t < out->n_trials; t++)
        if (out->trials[t].k == lo && out->trials[t].fits) {
            out->loss = out->trials[t].loss;
            out->gain_ns = out->trials[t].gain_ns;
        }
    return CP_OK;
}

/* ---- the plan in a tuning session --------------------------------------------------- */

/* A node the bf16 modes change: its name in the converted graph and the
 * ONNX node --keep_dtype names it by (its first origin). */
struct prec_node {
    char *name;
    char *origin;
};

struct plan_ctx {
    struct cp_tune_ctx *c;
    struct cp_tune_point all; /* the best with every node in bf16 */
    struct prec_node *nodes;
    size_t n;
    const char *name; /* artifact name of the checks */
    bool recording;   /* the bisection's checks: keep each one's precision_loss */
};

static void nodes_free(struct prec_node *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].name);
        free(v[i].origin);
    }
    free(v);
}

/* The nodes of a converted .om that compute in bf16. */
static enum cp_status bf16_nodes(const char *om, struct prec_node **out, size_t *n,
                                 struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    struct cp_graph *g = NULL;
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    enum cp_status st = cp_om_read(om, &g, &meta, d);
    cp_om_meta_release(&meta);
    size_t k = 0, total = st == CP_OK ? cp_graph_n_nodes(g) : 0;
    struct prec_node *v = st == CP_OK ? cp_calloc(total ? total : 1, sizeof *v) : NULL;
    if (st == CP_OK && !v)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < total; i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        const char *p = cp_node_attr_string(nd, "compute_precision", "");
        if (nd->dead || strcmp(p, "bf16") != 0)
            continue;
        v[k].name = strdup(nd->name);
        v[k].origin = strdup(nd->n_origins ? nd->origins[0] : nd->name);
        if (!v[k++].origin || !v[k - 1].name)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    cp_graph_free(g);
    if (st != CP_OK) {
        nodes_free(v, k);
        return st;
    }
    *out = v;
    *n = k;
    return CP_OK;
}

/* The canonical --keep_dtype list keeping every node not in bf16. */
static enum cp_status keep_list(const struct plan_ctx *pc, const bool *in_bf16, char *out,
                                size_t cap, struct cp_diag *d)
{
    struct cp_buf b;
    cp_buf_init(&b);
    for (size_t i = 0; i < pc->n; i++)
        if (!in_bf16[i])
            cp_buf_printf(&b, "%s\n", pc->nodes[i].origin);
    enum cp_status st =
        cp_buf_status(&b) != CP_OK
            ? cp_diag_set(d, CP_ERR_NOMEM, "out of memory")
            : cp_keep_dtype_parse("the precision plan", b.data ? b.data : "", b.len, out, cap, d);
    cp_buf_release(&b);
    return st;
}

enum cp_status cp_tune_loss_of(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                               const char *name, double *loss, struct cp_diag *d)
{
    char om[1100];
    struct cp_session s;
    enum cp_status st = cp_tune_convert(c, p, name, om, d);
    if (st == CP_OK && (st = cp_tune_open(c, p, om, NULL, &s, d)) == CP_OK) {
        st = cp_tune_precision(c, p, &s, loss, d);
        cp_session_close(&s);
    }
    return st;
}

/* A check in the plan's own figure: the largest share of its bound any
 * precision_loss constraint uses (per output where one is named), so that
 * one budget of 1 stands for all of them. */
static enum cp_status check_assignment(void *ctx, const bool *in_bf16, size_t n, double *share,
                                       struct cp_diag *d)
{
    struct plan_ctx *pc = ctx;
    struct cp_tune_point p = pc->all;
    struct cp_tune_prec_report *rep = &pc->c->r->prec;
    (void)n;
    double loss = NAN;
    enum cp_status st = keep_list(pc, in_bf16, p.cfg.keep_dtype, sizeof p.cfg.keep_dtype, d);
    if (st == CP_OK)
        st = cp_tune_loss_of(pc->c, &p, pc->name, &loss, d);
    if (st != CP_OK)
        return st;
    rep->checks++;
    *share = cp_tune_precision_share(pc->c);
    if (pc->recording && rep->n_trials < CP_PREC_MAX_TRIALS)
        rep->trial_loss[rep->n_trials++] = loss;
    return CP_OK;
}

static int cmp_node_time(const void *a, const void *b)
{
    return strcmp(((const struct cp_tune_node_time *)a)->node,
                  ((const struct cp_tune_node_time *)b)->node);
}

/* The first name of a kernel's origins (a JSON array), or its node. */
static char *first_origin(const struct cp_trace_kernel_desc *k)
{
    json_t *j = json_loads(k->origins ? k->origins : "", 0, NULL);
    const char *o =
        json_is_array(j) && json_array_size(j) > 0 && json_is_string(json_array_get(j, 0))
            ? json_string_value(json_array_get(j, 0))
            : k->node;
    char *r = strdup(o);
    json_decref(j);
    return r;
}

static enum cp_status run_times(struct cp_trace_store *s, int64_t run,
                                struct cp_tune_node_time **out, size_t *n, struct cp_diag *d)
{
    struct cp_trace_kernel_time *t = NULL;
    struct cp_trace_kernel_desc *k = NULL;
    size_t nt = 0, nk = 0;
    *out = NULL;
    *n = 0;
    enum cp_status st = cp_trace_query_kernels(s, run, &k, &nk, d);
    if (st == CP_OK)
        st = cp_trace_query_kernel_times(s, run, NULL, 0, &t, &nt, d);
    struct cp_tune_node_time *v = st == CP_OK ? cp_calloc(nt ? nt : 1, sizeof *v) : NULL;
    if (st == CP_OK && !v)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; st == CP_OK && i < nt; i++)
        for (size_t j = 0; j < nk; j++)
            if (k[j].idx == t[i].kernel_idx && t[i].events > 0) {
                v[m].node = strdup(k[j].node);
                v[m].origin = first_origin(&k[j]);
                v[m].ns = t[i].total_ns / (double)t[i].events;
                if (!v[m].node || !v[m++].origin)
                    st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
    free(t);
    cp_trace_kernels_free(k, nk);
    if (st != CP_OK) {
        cp_tune_node_times_free(v, m);
        return st;
    }
    qsort(v, m, sizeof *v, cmp_node_time);
    *out = v;
    *n = m;
    return CP_OK;
}

enum cp_status cp_tune_trace_node_times(const char *trace, int64_t run,
                                        struct cp_tune_node_time **out, size_t *n,
                                        struct cp_diag *d)
{
    struct cp_trace_store *s = NULL;
    enum cp_status st = cp_trace_store_open(trace, &s, d);
    if (st == CP_OK)
        st = run_times(s, run, out, n, d);
    cp_trace_store_close(s);
    return st;
}

void cp_tune_node_times_free(struct cp_tune_node_time *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].node);
        free(v[i].origin);
    }
    free(v);
}

double cp_tune_node_time_of(const struct cp_tune_node_time *v, size_t n, const char *name,
                            bool by_origin)
{
    double sum = 0;
    bool found = false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(by_origin ? v[i].origin : v[i].node, name) == 0) {
            sum += v[i].ns;
            found = true;
        }
    return found ? sum : NAN;
}

enum cp_status cp_tune_profile_pair(struct cp_tune_ctx *c, const char *om_a,
                                    const struct cp_tune_point *pa, const char *om_b,
                                    const char *trace_name, struct cp_tune_pair_profile *out,
                                    struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    char trace[1100];
    snprintf(trace, sizeof trace, "%.1000s/%s.db", c->o->out_dir, trace_name);
    unlink(trace);
    struct cp_bench_request q;
    cp_bench_request_init(&q);
    cp_tune_policy(c, &q);
    q.policy.iterations = c->o->rounds > 40 ? c->o->rounds / 2 : c->o->rounds;
    q.models[0] = om_a;
    q.models[1] = om_b;
    q.session[0].threads = pa->threads;
    q.session[0].batch = pa->batch;
    q.session[0].buffer_optimize = -1;
    q.session[1] = q.session[0];
    q.same_inputs = false;
    q.trace_path = trace;
    q.kind = "tune-profile";
    struct cp_bench_result r;
    enum cp_status st = cp_bench_models(&q, &r, d);
    if (st == CP_OK && r.m.stop == CP_MEASURE_STOP_INTERRUPTED)
        st = cp_diag_set(d, CP_ERR_INVALID, "interrupted during the profile");
    c->r->profile_runs++;
    struct cp_trace_store *s = NULL;
    if (st == CP_OK) {
        for (int side = 0; side < 2; side++) {
            const struct cp_summary *sm =
                r.undisturbed[side].n ? &r.undisturbed[side] : &r.all[side];
            out->median_ns[side] = sm->median;
        }
        st = cp_trace_store_open(trace, &s, d);
    }
    for (int side = 0; side < 2 && st == CP_OK; side++)
        st = run_times(s, r.run_ids[side], &out->t[side], &out->n[side], d);
    cp_trace_store_close(s);
    cp_bench_result_release(&r);
    if (st != CP_OK)
        cp_tune_pair_profile_release(out);
    return st;
}

void cp_tune_pair_profile_release(struct cp_tune_pair_profile *p)
{
    for (int side = 0; side < 2; side++)
        cp_tune_node_times_free(p->t[side], p->n[side]);
    memset(p, 0, sizeof *p);
}

/* The latency model: the best and `all` measured interleaved with a trace
 * (tuner/tuner.h, step 1). OUT: items[i].gain_ns, the two medians. */
static enum cp_status profile(struct cp_tune_ctx *c, const struct plan_ctx *pc, const char *all_om,
                              struct cp_prec_item *items, struct cp_diag *d)
{
    struct cp_tune_prec_report *rep = &c->r->prec;
    struct cp_tune_pair_profile pp;
    enum cp_status st =
        cp_tune_profile_pair(c, c->best_om, &c->r->best, all_om, "plan-profile", &pp, d);
    if (st != CP_OK)
        return st;
    rep->fp32_ns = pp.median_ns[0];
    rep->bf16_ns = pp.median_ns[1];
    for (size_t i = 0; i < pc->n; i++) {
        double a = cp_tune_node_time_of(pp.t[0], pp.n[0], pc->nodes[i].name, false);
        double b = cp_tune_node_time_of(pp.t[1], pp.n[1], pc->nodes[i].name, false);
        /* no evidence either way: not worth a precision check */
        items[i].gain_ns = isfinite(a) && isfinite(b) ? a - b : 0;
    }
    cp_tune_pair_profile_release(&pp);
    return CP_OK;
}

/* Whether the plan applies to the current best: a precision budget (over
 * all outputs or per output), bf16 arithmetic, the best computing in fp32
 * with no list, and a target that latency decides. OUT: *strict, whether
 * some bound is strict (<). */
static bool applies(const struct cp_tune_ctx *c, bool *strict)
{
    const struct cp_constraints *k = &c->o->constraints;
    bool any = false;
    *strict = false;
    for (size_t i = 0; i < k->n; i++)
        if (k->items[i].kind == CP_CONSTRAINT_PRECISION_LOSS) {
            any = true;
            *strict = *strict || k->items[i].op == CP_CONSTRAINT_LT;
        }
    const struct cp_convert_config *cfg = &c->r->best.cfg;
    struct cp_host h;
    cp_host_detect(&h);
    return any && h.has_bf16 && c->o->target != CP_TARGET_MEMORY &&
           (cfg->precision_mode == CP_PREC_FORCE_FP32 ||
            cfg->precision_mode == CP_PREC_MUST_KEEP_ORIGIN_DTYPE) &&
           !cfg->keep_dtype[0];
}

static void summarise(struct cp_tune_prec_report *rep, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void summarise(struct cp_tune_prec_report *rep, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->summary, sizeof rep->summary, fmt, ap);
    va_end(ap);
}

/* The precision bounds as text: "precision_loss<0.5%,precision_loss[y]<1%". */
static void bounds_text(const struct cp_constraints *k, struct cp_buf *b)
{
    for (size_t i = 0; i < k->n; i++) {
        const struct cp_constraint *one = &k->items[i];
        char v[48];
        if (one->kind != CP_CONSTRAINT_PRECISION_LOSS)
            continue;
        cp_constraint_format_value(one->kind, one->value, v);
        cp_buf_printf(b, "%sprecision_loss%s%s%s%s%s", b->len ? "," : "", one->output[0] ? "[" : "",
                      one->output, one->output[0] ? "]" : "", cp_constraint_op_text(one->op), v);
    }
}

/* The plan's proposal: its list in plan-precision.keep_dtype, and the delta
 * that applies it. */
static enum cp_status make_proposal(struct plan_ctx *pc, const struct cp_prec_plan *plan,
                                    struct cp_tune_proposal *out, struct cp_diag *d)
{
    struct cp_tune_ctx *c = pc->c;
    struct cp_tune_prec_report *rep = &c->r->prec;
    bool *in = cp_calloc(pc->n ? pc->n : 1, sizeof *in);
    struct cp_tune_point p = pc->all;
    char path[1100];
    snprintf(path, sizeof path, "%.1000s/plan-precision.keep_dtype", c->o->out_dir);
    if (!in)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < plan->k; i++)
        in[plan->order[i]] = true;
    enum cp_status st = keep_list(pc, in, p.cfg.keep_dtype, sizeof p.cfg.keep_dtype, d);
    free(in);
    struct cp_buf text;
    cp_buf_init(&text);
    cp_buf_printf(&text, "%s\n", p.cfg.keep_dtype);
    if (st == CP_OK)
        st = cp_buf_status(&text) == CP_OK ? cp_file_write_atomic(path, text.data, text.len, d)
                                           : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    cp_buf_release(&text);
    memset(out, 0, sizeof *out);
    out->expected_gain = rep->fp32_ns > 0 ? plan->gain_ns / rep->fp32_ns : NAN;
    snprintf(out->source, sizeof out->source, "plan:precision");
    snprintf(out->title, sizeof out->title,
             "%zu of %zu nodes in bf16, %zu kept fp32 (precision_loss %.4f%%)", plan->k, pc->n,
             pc->n - plan->k, rep->loss_plan);
    if (st == CP_OK)
        st = cp_delta_parse("precision_mode=allow_mix_precision_bf16", &out->delta, d);
    if (st == CP_OK && strlen(path) >= sizeof out->delta.items[0].value)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: the path is too long", path);
    if (st == CP_OK) {
        struct cp_delta_item *it = &out->delta.items[out->delta.n++];
        snprintf(it->key, sizeof it->key, "keep_dtype");
        snprintf(it->value, sizeof it->value, "%s", path);
    }
    return st;
}

enum cp_status cp_tune_precision_plan(struct cp_tune_ctx *c, struct cp_tune_proposal *out,
                                      bool *made, struct cp_diag *d)
{
    *made = false;
    bool strict = false;
    if (!applies(c, &strict))
        return CP_OK;
    struct cp_tune_prec_report *rep = &c->r->prec;
    memset(rep, 0, sizeof *rep);
    rep->ran = true;
    rep->loss_all = rep->loss_plan = rep->fp32_ns = rep->bf16_ns = rep->predicted_ns = NAN;
    struct cp_buf bounds;
    cp_buf_init(&bounds);
    bounds_text(&c->o->constraints, &bounds);
    const char *budget = bounds.data ? bounds.data : "";
    struct plan_ctx pc = {.c = c, .all = c->r->best, .name = "plan-check"};
    pc.all.cfg.precision_mode = CP_PREC_ALLOW_MIX_PRECISION_BF16;
    /* 1. the whole model in bf16: if it fits, the plain mode is the answer */
    char all_om[1100], key[48], why[256];
    enum cp_status st = cp_tune_convert(c, &pc.all, "plan-bf16", all_om, d);
    struct cp_session s;
    if (st == CP_OK && (st = cp_tune_open(c, &pc.all, all_om, NULL, &s, d)) == CP_OK) {
        st = cp_tune_precision(c, &pc.all, &s, &rep->loss_all, d);
        cp_session_close(&s);
        rep->checks++;
    }
    cp_tune_point_key(&pc.all, key);
    if (st == CP_OK && !cp_tune_precision_breaks(c, why, sizeof why)) {
        summarise(rep, "the whole model in bf16 loses %.4f%%, within %s: no per-node plan needed",
                  rep->loss_all, budget);
        rep->whole_fits = true;
        cp_buf_release(&bounds);
        return CP_OK;
    }
    /* the whole-model point is known to break the budget: no step for it */
    if (st == CP_OK)
        st = cp_tune_mark_seen(c, key, d);
    if (st == CP_OK)
        st = bf16_nodes(all_om, &pc.nodes, &pc.n, d);
    struct cp_prec_item *items = st == CP_OK ? cp_calloc(pc.n ? pc.n : 1, sizeof *items) : NULL;
    if (st == CP_OK && !items)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    rep->nodes = pc.n;
    /* 2. the latency model */
    if (st == CP_OK)
        st = profile(c, &pc, all_om, items, d);
    /* 3. each node alone in bf16 (nodes with no gain are never chosen) */
    bool *one = st == CP_OK ? cp_calloc(pc.n ? pc.n : 1, sizeof *one) : NULL;
    if (st == CP_OK && !one)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    pc.name = "plan-one";
    for (size_t i = 0; st == CP_OK && i < pc.n; i++) {
        items[i].loss = NAN;
        if (items[i].gain_ns <= 0)
            continue;
        one[i] = true;
        st = check_assignment(&pc, one, pc.n, &items[i].loss, d);
        one[i] = false;
        if (c->o->interrupt && *c->o->interrupt)
            st = cp_diag_set(d, CP_ERR_INVALID, "interrupted during the precision plan");
    }
    free(one);
    /* 4. assemble and verify, in shares of the bounds (1: at the tightest) */
    struct cp_prec_plan plan;
    memset(&plan, 0, sizeof plan);
    pc.name = "plan-check";
    pc.recording = true;
    rep->n_trials = 0;
    if (st == CP_OK)
        st = cp_prec_plan_select(items, pc.n, 1.0, strict, check_assignment, &pc, &plan, d);
    if (st == CP_OK) {
        rep->candidates = plan.n_order;
        rep->chosen = plan.k;
        rep->n_trials = plan.n_trials;
        memcpy(rep->trials, plan.trials, sizeof plan.trials);
        for (size_t t = 0; t < plan.n_trials; t++)
            if (plan.trials[t].k == plan.k && plan.trials[t].fits)
                rep->loss_plan = rep->trial_loss[t];
        rep->predicted_ns = rep->fp32_ns - plan.gain_ns;
    }
    if (st == CP_OK && plan.k == 0)
        summarise(rep,
                  "no node fits %s in bf16 with a gain (%zu nodes, %zu faster in bf16 and within "
                  "the budget alone)",
                  budget, pc.n, plan.n_order);
    if (st == CP_OK && plan.k > 0 && (st = make_proposal(&pc, &plan, out, d)) == CP_OK) {
        *made = true;
        summarise(rep,
                  "%zu of %zu nodes in bf16 (the rest fp32) within %s: precision_loss %.4f%% "
                  "against %.4f%% for the whole model; the latency model predicts %.3f ms from "
                  "%.3f ms",
                  plan.k, pc.n, budget, rep->loss_plan, rep->loss_all, rep->predicted_ns / 1e6,
                  rep->fp32_ns / 1e6);
    }
    cp_prec_plan_release(&plan);
    free(items);
    nodes_free(pc.nodes, pc.n);
    cp_buf_release(&bounds);
    return st;
}
