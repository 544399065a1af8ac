/* Evaluating one point: convert it, open it, check its precision and
 * memory, measure it alone (the baseline) or interleaved against the
 * current best (every candidate). */
#include "tuner/tuner_internal.h"
#include "runner/probe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum cp_status cp_tune_convert(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                               const char *name, char om_path[1100], struct cp_diag *d)
{
    struct cp_convert_config cfg = p->cfg;
    snprintf(cfg.model, sizeof cfg.model, "%s", c->onnx);
    snprintf(cfg.output, sizeof cfg.output, "%s/%s", c->o->out_dir, name);
    cfg.fusion_switch_file[0] = '\0';
    if (cfg.fusion_switches[0]) {
        /* cp_convert reads the switches from a file, as ATC does: one
         * "Pass:off" line per switch of the point */
        struct cp_buf text;
        cp_buf_init(&text);
        char copy[sizeof cfg.fusion_switches];
        snprintf(copy, sizeof copy, "%s", cfg.fusion_switches);
        for (char *save = NULL, *t = strtok_r(copy, ";", &save); t; t = strtok_r(NULL, ";", &save))
            cp_buf_printf(&text, "%s\n", t);
        snprintf(cfg.fusion_switch_file, sizeof cfg.fusion_switch_file, "%s/%s.switches",
                 c->o->out_dir, name);
        enum cp_status st =
            cp_buf_status(&text) == CP_OK
                ? cp_file_write_atomic(cfg.fusion_switch_file, text.data, text.len, d)
                : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        cp_buf_release(&text);
        if (st != CP_OK)
            return st;
    }
    struct cp_convert_result res;
    enum cp_status st = cp_convert(&cfg, &res, d);
    if (st == CP_OK)
        snprintf(om_path, 1100, "%s", res.om_path);
    return st;
}

enum cp_status cp_tune_open(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                            const char *om_path, struct cp_trace_recorder *rec,
                            struct cp_session *s, struct cp_diag *d)
{
    struct cp_session_opts so = {
        .model_path = om_path,
        .batch = p->batch,
        .threads = p->threads,
        .buffer_optimize = -1,
        .trace = rec,
    };
    enum cp_status st = cp_session_open(s, &so, d);
    if (st == CP_OK)
        st = cp_session_set_inputs(s, c->o->inputs, c->o->n_inputs, c->o->seed, d);
    if (st != CP_OK)
        cp_session_close(s);
    return st;
}

uint64_t cp_tune_memory(const struct cp_session *s)
{
    struct cp_mem_report mem;
    cp_plan_memory(s->plan, &mem);
    return mem.weight_bytes + mem.arena_bytes;
}

static void outputs_release(struct cp_host_tensor *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
        cp_host_tensor_release(&t[i]);
    free(t);
}

void cp_tune_refs_release(struct cp_tune_ctx *c)
{
    for (size_t i = 0; i < c->n_refs; i++)
        outputs_release(c->refs[i].out, c->refs[i].n);
    c->n_refs = 0;
}

/* Run a session's plan once and copy every output out. */
static enum cp_status run_outputs(struct cp_session *s, struct cp_host_tensor **out, size_t *n,
                                  struct cp_diag *d)
{
    size_t k = cp_plan_n_outputs(s->plan);
    struct cp_host_tensor *t = cp_calloc(k ? k : 1, sizeof *t);
    if (!t)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for outputs");
    enum cp_status st = cp_plan_run(s->plan, -1, d);
    for (size_t i = 0; st == CP_OK && i < k; i++)
        st = cp_plan_get_output(s->plan, i, &t[i], d);
    if (st != CP_OK) {
        outputs_release(t, k);
        return st;
    }
    *out = t;
    *n = k;
    return CP_OK;
}

/* The reference outputs at p's batch: the unconverted ONNX model, fp32,
 * on the same inputs. */
static enum cp_status reference(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                                const struct cp_tune_ref **out, struct cp_diag *d)
{
    for (size_t i = 0; i < c->n_refs; i++)
        if (c->refs[i].batch == p->batch) {
            *out = &c->refs[i];
            return CP_OK;
        }
    if (c->n_refs == sizeof c->refs / sizeof c->refs[0])
        cp_tune_refs_release(c);
    struct cp_tune_point rp = *p;
    struct cp_session s;
    enum cp_status st = cp_tune_open(c, &rp, c->onnx, NULL, &s, d);
    if (st != CP_OK)
        return st;
    struct cp_tune_ref *r = &c->refs[c->n_refs];
    st = run_outputs(&s, &r->out, &r->n, d);
    cp_session_close(&s);
    if (st != CP_OK)
        return st;
    r->batch = p->batch;
    c->n_refs++;
    *out = r;
    return CP_OK;
}

enum cp_status cp_tune_precision(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                                 struct cp_session *s, double *loss, struct cp_diag *d)
{
    *loss = NAN;
    const struct cp_tune_ref *ref = NULL;
    enum cp_status st = reference(c, p, &ref, d);
    if (st != CP_OK)
        return st;
    struct cp_host_tensor *got = NULL;
    size_t n = 0;
    if ((st = run_outputs(s, &got, &n, d)) != CP_OK)
        return st;
    struct cp_tensor_diff *diffs = cp_calloc(n ? n : 1, sizeof *diffs);
    if (!diffs)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    else if (n != ref->n)
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "the converted model has %zu outputs, the source model %zu", n, ref->n);
    for (size_t i = 0; st == CP_OK && i < n; i++)
        st = cp_tensor_compare(&ref->out[i], &got[i], 1e-3, 1e-5, &diffs[i], d);
    if (st == CP_OK)
        *loss = cp_precision_loss(diffs, n);
    free(diffs);
    outputs_release(got, n);
    return st;
}

static double median_ns(const uint64_t *ns, size_t n)
{
    double *x = cp_calloc(n ? n : 1, sizeof *x);
    if (!x)
        return NAN;
    for (size_t i = 0; i < n; i++)
        x[i] = (double)ns[i];
    double m = cp_stats_quantile(x, n, 0.5);
    free(x);
    return m;
}

enum cp_status cp_tune_bench(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                             const char *om_path, const char *trace_path, double *med,
                             double *items_s, uint64_t *memory, int64_t *run_id, struct cp_diag *d)
{
    const struct cp_tune_opts *o = c->o;
    struct cp_trace_recorder *rec = cp_trace_recorder_create(1 << 16);
    if (!rec)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for a trace recorder");
    struct cp_session s;
    memset(&s, 0, sizeof s);
    struct cp_trace_store *store = NULL;
    struct cp_probe *probe = NULL;
    uint64_t *ns = cp_calloc((size_t)o->rounds, sizeof *ns);
    uint64_t *pv = cp_calloc((size_t)o->rounds, sizeof *pv);
    enum cp_status st = ns && pv ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st == CP_OK)
        st = cp_tune_open(c, p, om_path, rec, &s, d);
    /* The interference probe after each iteration lets the diagnosis read
     * its kernel times from the undisturbed ones (runner/probe.h). */
    if (st == CP_OK)
        st = cp_probe_create(cp_runtime_threads(s.rt), &probe, d);
    for (int i = 0; st == CP_OK && i < o->warmup; i++)
        st = cp_plan_run(s.plan, -1, d);
    if (st == CP_OK)
        cp_trace_push(rec, "measure");
    for (int i = 0; st == CP_OK && i < o->rounds; i++) {
        cp_trace_set_iteration(rec, i);
        uint64_t t0 = cp_clock_ns();
        st = cp_plan_run(s.plan, i, d);
        ns[i] = cp_clock_ns() - t0;
        pv[i] = cp_probe_run(probe);
    }
    if (st == CP_OK) {
        cp_trace_set_iteration(rec, -1);
        cp_trace_pop(rec);
        st = cp_trace_store_open(trace_path, &store, d);
    }
    if (st == CP_OK)
        st = cp_session_store_run(&s, store, "tune", om_path, rec, p->batch, o->warmup, ns,
                                  (size_t)o->rounds, cp_peak_rss_bytes(), run_id, d);
    if (st == CP_OK)
        st = cp_probe_store(store, *run_id, pv, (size_t)o->rounds, d);
    if (st == CP_OK) {
        *med = median_ns(ns, (size_t)o->rounds);
        *items_s = (double)cp_session_items_per_run(s.plan, p->batch) * 1e9 / *med;
        *memory = cp_tune_memory(&s);
    }
    cp_trace_store_close(store);
    cp_probe_free(probe);
    cp_session_close(&s);
    cp_trace_recorder_free(rec);
    free(ns);
    free(pv);
    return st;
}

/* items/s of each round. */
static double *throughputs(const uint64_t *ns, size_t n, int64_t items)
{
    double *x = cp_calloc(n ? n : 1, sizeof *x);
    for (size_t i = 0; x && i < n; i++)
        x[i] = ns[i] ? (double)items * 1e9 / (double)ns[i] : 0;
    return x;
}

static enum cp_status store_ab(struct cp_tune_ctx *c, const char *trace_path, struct cp_session *a,
                               const char *a_om, const struct cp_tune_point *pa,
                               struct cp_trace_recorder *ra, struct cp_session *b, const char *b_om,
                               const struct cp_tune_point *pb, struct cp_trace_recorder *rb,
                               const struct cp_bench_ab_result *res, int64_t *b_run,
                               struct cp_diag *d)
{
    struct cp_trace_store *store = NULL;
    int64_t a_run = 0;
    uint64_t rss = cp_peak_rss_bytes();
    enum cp_status st = cp_trace_store_open(trace_path, &store, d);
    if (st == CP_OK)
        st = cp_session_store_run(a, store, "bench-ab", a_om, ra, pa->batch, c->o->warmup,
                                  res->a_ns, res->n, rss, &a_run, d);
    if (st == CP_OK)
        st = cp_session_store_run(b, store, "bench-ab", b_om, rb, pb->batch, c->o->warmup,
                                  res->b_ns, res->n, rss, b_run, d);
    char v[32];
    if (st == CP_OK) {
        snprintf(v, sizeof v, "%lld", (long long)a_run);
        st = cp_trace_store_set_meta(store, "ab.before_run", v, d);
    }
    if (st == CP_OK) {
        snprintf(v, sizeof v, "%lld", (long long)*b_run);
        st = cp_trace_store_set_meta(store, "ab.after_run", v, d);
    }
    if (st == CP_OK)
        st = cp_trace_store_set_meta(store, "ab.order", "alternating", d);
    cp_trace_store_close(store);
    return st;
}

enum cp_status cp_tune_ab(struct cp_tune_ctx *c, const struct cp_tune_point *a, const char *a_om,
                          const struct cp_tune_point *b, const char *b_om, const char *trace_path,
                          struct cp_tune_step *step, int64_t *b_run, bool *improved,
                          struct cp_bench_ab_result *res, struct cp_diag *d)
{
    const struct cp_tune_opts *o = c->o;
    *improved = false;
    memset(res, 0, sizeof *res);
    struct cp_trace_recorder *ra = cp_trace_recorder_create(1 << 16);
    struct cp_trace_recorder *rb = cp_trace_recorder_create(1 << 16);
    struct cp_session sa, sb;
    memset(&sa, 0, sizeof sa);
    memset(&sb, 0, sizeof sb);
    enum cp_status st =
        ra && rb ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory for trace recorders");
    if (st == CP_OK)
        st = cp_tune_open(c, a, a_om, ra, &sa, d);
    if (st == CP_OK)
        st = cp_tune_open(c, b, b_om, rb, &sb, d);
    struct cp_bench_ab_opts ab = {
        .warmup = o->warmup, .rounds = o->rounds, .trace_a = ra, .trace_b = rb};
    if (st == CP_OK)
        st = cp_bench_ab_measure(sa.plan, sb.plan, &ab, res, d);
    if (st == CP_OK)
        st = store_ab(c, trace_path, &sa, a_om, a, ra, &sb, b_om, b, rb, res, b_run, d);
    struct cp_comparison lat;
    if (st == CP_OK)
        st = cp_bench_ab_compare(res, &o->verdict, &lat, d);
    if (st == CP_OK) {
        step->before_ns = lat.before;
        step->after_ns = lat.after;
        step->p = lat.p;
        /* gains read "how much better": latency saved, or throughput won */
        step->measured_gain = -lat.delta_pct / 100;
        step->ci_lo = -lat.ci_hi_pct / 100;
        step->ci_hi = -lat.ci_lo_pct / 100;
        if (o->target == CP_TARGET_LATENCY)
            *improved = lat.verdict == CP_VERDICT_IMPROVED;
        else if (o->target == CP_TARGET_MEMORY)
            *improved = lat.verdict != CP_VERDICT_REGRESSED;
        else {
            int64_t ia = cp_session_items_per_run(sa.plan, a->batch);
            int64_t ib = cp_session_items_per_run(sb.plan, b->batch);
            double *xa = throughputs(res->a_ns, res->n, ia);
            double *xb = throughputs(res->b_ns, res->n, ib);
            struct cp_comparison thr;
            st = xa && xb ? cp_verdict_compare(xa, res->n, xb, res->n, CP_BETTER_HIGHER,
                                               &o->verdict, &thr, d)
                          : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            if (st == CP_OK) {
                step->measured_gain = thr.delta_pct / 100;
                step->ci_lo = thr.ci_lo_pct / 100;
                step->ci_hi = thr.ci_hi_pct / 100;
                step->p = thr.p;
                *improved = thr.verdict == CP_VERDICT_IMPROVED;
            }
            free(xa);
            free(xb);
        }
        step->memory_bytes = cp_tune_memory(&sb);
    }
    cp_session_close(&sa);
    cp_session_close(&sb);
    cp_trace_recorder_free(ra);
    cp_trace_recorder_free(rb);
    if (st != CP_OK)
        cp_bench_ab_result_release(res);
    return st;
}
