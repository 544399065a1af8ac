/* What-if measurements (tuner/tuner.h, "what-if"): a finding's prior gain
 * replaced by a short interleaved measurement of the diagnosed run's model
 * against the same config with the finding's change. */
#include "tuner/tuner_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cp_whatif_opts_init(struct cp_whatif_opts *o)
{
    memset(o, 0, sizeof *o);
    o->rounds = 30;
    o->warmup = 3;
    o->target = CP_TARGET_LATENCY;
    cp_verdict_opts_init(&o->verdict);
}

static void not_measured(struct cp_whatif *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void not_measured(struct cp_whatif *w, const char *fmt, ...)
{
    w->measured = false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->note, sizeof w->note, fmt, ap);
    va_end(ap);
}

/* The run's point: its recorded config, threads and batch. */
static bool run_point(const struct cp_run_metrics *run, struct cp_tune_point *p,
                      struct cp_whatif *w)
{
    memset(p, 0, sizeof *p);
    struct cp_diag d;
    cp_diag_init(&d);
    if (!run->config_json || !*run->config_json ||
        cp_convert_config_from_json(&p->cfg, run->config_json, &d) != CP_OK) {
        not_measured(w, "the trace does not record the conversion config");
        return false;
    }
    if (!p->cfg.model[0] || !cp_path_exists(p->cfg.model)) {
        not_measured(w, "the source model %s is not here",
                     p->cfg.model[0] ? p->cfg.model : "(none)");
        return false;
    }
    if (!run->model_path || !cp_path_has_suffix(run->model_path, ".om") ||
        !cp_path_exists(run->model_path)) {
        not_measured(w, "the run's model %s is not here",
                     run->model_path && *run->model_path ? run->model_path : "(none)");
        return false;
    }
    p->threads = run->threads;
    p->batch = run->batch > 1 ? run->batch : 0;
    return true;
}

/* The candidate: the run's config with the change, converted into dir. */
static enum cp_status convert_candidate(const struct cp_tune_point *p, const char *dir,
                                        char om[1100], struct cp_diag *d)
{
    struct cp_convert_config cfg = p->cfg;
    snprintf(cfg.output, sizeof cfg.output, "%.1000s/whatif", dir);
    cfg.log = CP_LOG_ERROR;
    struct cp_buf text;
    cp_buf_init(&text);
    enum cp_status st = CP_OK;
    cfg.fusion_switch_file[0] = cfg.keep_dtype_file[0] = '\0';
    if (cfg.fusion_switches[0]) {
        char copy[sizeof cfg.fusion_switches];
        snprintf(copy, sizeof copy, "%s", cfg.fusion_switches);
        for (char *save = NULL, *t = strtok_r(copy, ";", &save); t; t = strtok_r(NULL, ";", &save))
            cp_buf_printf(&text, "%s\n", t);
        snprintf(cfg.fusion_switch_file, sizeof cfg.fusion_switch_file, "%.1000s/whatif.switches",
                 dir);
        st = cp_buf_status(&text) == CP_OK
                 ? cp_file_write_atomic(cfg.fusion_switch_file, text.data, text.len, d)
                 : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    if (st == CP_OK && cfg.keep_dtype[0]) {
        cp_buf_reset(&text);
        cp_buf_printf(&text, "%s\n", cfg.keep_dtype);
        snprintf(cfg.keep_dtype_file, sizeof cfg.keep_dtype_file, "%.1000s/whatif.keep_dtype", dir);
        st = cp_buf_status(&text) == CP_OK
                 ? cp_file_write_atomic(cfg.keep_dtype_file, text.data, text.len, d)
                 : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    cp_buf_release(&text);
    struct cp_convert_result res;
    if (st == CP_OK && (st = cp_convert(&cfg, &res, d)) == CP_OK)
        snprintf(om, 1100, "%s", res.om_path);
    return st;
}

enum cp_status cp_tune_whatif(const struct cp_run_metrics *run, const struct cp_change *change,
                              const struct cp_whatif_opts *o, struct cp_whatif *w,
                              struct cp_diag *d)
{
    memset(w, 0, sizeof *w);
    w->gain = w->lo = w->hi = w->p = w->before_ns = w->after_ns = NAN;
    w->expect_lo = w->expect_hi = NAN;
    struct cp_tune_point p, q;
    if (!run_point(run, &p, w))
        return CP_OK;
    struct cp_delta dl;
    struct cp_diag local;
    cp_diag_init(&local);
    if (cp_delta_from_change(change, &dl, &local) != CP_OK ||
        cp_delta_apply(&p, &dl, &q, &local) != CP_OK) {
        not_measured(w, "%.250s", local.msg);
        return CP_OK;
    }
    char dir[] = "/tmp/cannprof-whatif.XXXXXX";
    const char *work = o->work_dir;
    if (!work) {
        if (!mkdtemp(dir))
            return cp_diag_set(d, CP_ERR_IO, "cannot make a temporary folder for the what-if");
        work = dir;
    }
    uint64_t t0 = cp_clock_ns();
    char om[1100] = "";
    enum cp_status st = convert_candidate(&q, work, om, &local);
    if (st != CP_OK) {
        /* a change that cannot be converted is a finding's fault, not the
         * command's: say so and keep the prior */
        not_measured(w, "the change does not convert: %.200s", local.msg);
        st = CP_OK;
        goto out;
    }
    struct cp_bench_request req;
    cp_bench_request_init(&req);
    req.models[0] = run->model_path;
    req.models[1] = om;
    req.session[0].threads = p.threads;
    req.session[0].batch = p.batch;
    req.session[0].buffer_optimize = -1;
    req.session[1] = req.session[0];
    req.session[1].threads = q.threads;
    req.session[1].batch = q.batch;
    req.same_inputs = false;
    req.policy.warmup = o->warmup;
    req.policy.iterations = o->rounds;
    req.policy.interrupt = o->interrupt;
    req.policy.priority = o->priority;
    req.policy.time_limit_min_s = CP_TUNE_MIN_TIME_LIMIT_S;
    req.verdict = o->verdict;
    struct cp_bench_result r;
    st = cp_bench_models(&req, &r, &local);
    if (st == CP_OK && r.m.stop == CP_MEASURE_STOP_INTERRUPTED)
        st = cp_diag_set(&local, CP_ERR_INVALID, "interrupted");
    struct cp_comparison c = r.cmp;
    if (st == CP_OK && o->target == CP_TARGET_THROUGHPUT)
        st = cp_measurement_compare(&r.m, 0, 1, r.items[0], r.items[1], &o->verdict, &c, NULL,
                                    &local);
    if (st == CP_OK) {
        bool thr = o->target == CP_TARGET_THROUGHPUT;
        /* gains read "how much better": latency saved, or throughput won */
        w->measured = true;
        w->gain = (thr ? 1 : -1) * c.delta_pct / 100;
        w->lo = thr ? c.ci_lo_pct / 100 : -c.ci_hi_pct / 100;
        w->hi = thr ? c.ci_hi_pct / 100 : -c.ci_lo_pct / 100;
        w->p = c.p;
        double drift = fmax(CP_WHATIF_DRIFT_POINTS, CP_WHATIF_DRIFT_RELATIVE * fabs(w->gain));
        w->expect_lo = w->lo - drift;
        w->expect_hi = w->hi + drift;
        w->before_ns = r.cmp.before;
        w->after_ns = r.cmp.after;
        w->rounds = (int64_t)r.m.n;
    } else {
        not_measured(w, "the measurement failed: %.220s", local.msg);
        st = CP_OK;
    }
    cp_bench_result_release(&r);
out:
    w->seconds = (double)(cp_clock_ns() - t0) / 1e9;
    if (work == dir) {
        const char *files[] = {"whatif.om", "whatif.switches", "whatif.keep_dtype"};
        for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
            char path[1100];
            snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            unlink(path);
        }
        rmdir(dir);
    }
    return st;
}

/* Findings in their new order: constraint-respecting first, then by the
 * (measured or prior) gain, largest first. */
static int cmp_finding(const struct cp_finding *a, const struct cp_finding *b)
{
    if (a->violates != b->violates)
        return a->violates ? 1 : -1;
    if (a->unclassified != b->unclassified)
        return a->unclassified ? 1 : -1;
    double ga = isfinite(a->gain) ? a->gain : -INFINITY,
           gb = isfinite(b->gain) ? b->gain : -INFINITY;
    return ga > gb ? -1 : ga < gb;
}

enum cp_status cp_tune_whatif_analysis(struct cp_diagnosis *dg, const struct cp_whatif_opts *o,
                                       struct cp_whatif **out, struct cp_diag *d)
{
    size_t n = dg->analysis.n;
    *out = NULL;
    struct cp_whatif *w = cp_calloc(n ? n : 1, sizeof *w);
    if (!w)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        struct cp_finding *f = &dg->analysis.findings[i];
        w[i].prior_gain = f->gain;
        w[i].prior_lo = f->gain_lo;
        w[i].prior_hi = f->gain_hi;
        if (f->unclassified) {
            w[i].gain = w[i].lo = w[i].hi = w[i].p = w[i].expect_lo = w[i].expect_hi = NAN;
            not_measured(&w[i], "no change to measure");
            continue;
        }
        if (o->interrupt && *o->interrupt) {
            w[i].gain = w[i].lo = w[i].hi = w[i].p = w[i].expect_lo = w[i].expect_hi = NAN;
            not_measured(&w[i], "interrupted before it was measured");
            continue;
        }
        double pg = w[i].prior_gain, pl = w[i].prior_lo, ph = w[i].prior_hi;
        st = cp_tune_whatif(&dg->run, &f->change, o, &w[i], d);
        w[i].prior_gain = pg;
        w[i].prior_lo = pl;
        w[i].prior_hi = ph;
        if (st == CP_OK && w[i].measured) {
            f->gain = w[i].gain;
            f->gain_lo = w[i].expect_lo;
            f->gain_hi = w[i].expect_hi;
        }
    }
    if (st != CP_OK) {
        free(w);
        return st;
    }
    /* rank by what was measured: a stable insertion sort keeps the rule
     * engine's order among equals */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i;
             j > 0 && cmp_finding(&dg->analysis.findings[j], &dg->analysis.findings[j - 1]) < 0;
             j--) {
            struct cp_finding tf = dg->analysis.findings[j];
            dg->analysis.findings[j] = dg->analysis.findings[j - 1];
            dg->analysis.findings[j - 1] = tf;
            struct cp_whatif tw = w[j];
            w[j] = w[j - 1];
            w[j - 1] = tw;
        }
    *out = w;
    return CP_OK;
}
