/* What-if measurements (tuner/tuner.h, "what-if"): a finding's prior gain
 * replaced by a short interleaved measurement of the diagnosed run's model
 * against the same config with the finding's change. */
#include "tuner/tuner_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cp_whatif_opts_init(struct cp_whatif_opts *o)
{
    memset(o, 0, sizeof *o);
    o->rounds = 30;
    o->warmup = 3;
    o->target = CP_TARGET_LATENCY;
    o->race_top = 3;
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

/* One interleaved measurement of model b (session bt, bb) against a (at,
 * ab) for `rounds` rounds: b's gain over a (latency saved or throughput
 * won, fractions) with its 95% CI and p into the out-parameters. A failure
 * is returned with `local` saying why. */
struct pair_figures {
    double gain, lo, hi, p, before_ns, after_ns;
    int64_t rounds;
};

static enum cp_status measure_pair(const char *a, int at, int ab, const char *b, int bt, int bb,
                                   const struct cp_whatif_opts *o, int rounds,
                                   struct pair_figures *f, struct cp_diag *local)
{
    struct cp_bench_request req;
    cp_bench_request_init(&req);
    req.models[0] = a;
    req.models[1] = b;
    req.session[0].threads = at;
    req.session[0].batch = ab;
    req.session[0].buffer_optimize = -1;
    req.session[1] = req.session[0];
    req.session[1].threads = bt;
    req.session[1].batch = bb;
    req.same_inputs = false;
    req.policy.warmup = o->warmup;
    req.policy.iterations = rounds;
    req.policy.interrupt = o->interrupt;
    req.policy.priority = o->priority;
    req.policy.time_limit_min_s = CP_TUNE_MIN_TIME_LIMIT_S;
    req.verdict = o->verdict;
    struct cp_bench_result r;
    enum cp_status st = cp_bench_models(&req, &r, local);
    if (st == CP_OK && r.m.stop == CP_MEASURE_STOP_INTERRUPTED)
        st = cp_diag_set(local, CP_ERR_INVALID, "interrupted");
    struct cp_comparison c = r.cmp;
    bool thr = o->target == CP_TARGET_THROUGHPUT;
    if (st == CP_OK && thr)
        st = cp_measurement_compare(&r.m, 0, 1, r.items[0], r.items[1], &o->verdict, &c, NULL,
                                    local);
    if (st == CP_OK) {
        /* gains read "how much better": latency saved, or throughput won */
        f->gain = (thr ? 1 : -1) * c.delta_pct / 100;
        f->lo = thr ? c.ci_lo_pct / 100 : -c.ci_hi_pct / 100;
        f->hi = thr ? c.ci_hi_pct / 100 : -c.ci_lo_pct / 100;
        f->p = c.p;
        f->before_ns = r.cmp.before;
        f->after_ns = r.cmp.after;
        f->rounds = (int64_t)r.m.n;
    }
    cp_bench_result_release(&r);
    return st;
}

static void remove_work(const char *dir)
{
    const char *files[] = {"whatif.om", "whatif.switches", "whatif.keep_dtype"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%.1100s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* Measure `change` on the run `run` describes (trace/trace.h), the
 * changed model converted in the folder `work`, where it stays
 * (whatif.om) for a race. A change that cannot be applied, converted or
 * measured is not an error: w->note says why and w->measured is false. */
static enum cp_status whatif_in(const struct cp_run_metrics *run, const struct cp_change *change,
                                const struct cp_whatif_opts *o, const char *work,
                                struct cp_whatif *w)
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
    w->threads = q.threads;
    w->batch = q.batch;
    uint64_t t0 = cp_clock_ns();
    char om[1100] = "";
    struct pair_figures f;
    if (convert_candidate(&q, work, om, &local) != CP_OK)
        /* a change that cannot be converted is a finding's fault, not the
         * command's: say so and keep the prior */
        not_measured(w, "the change does not convert: %.200s", local.msg);
    else if (measure_pair(run->model_path, p.threads, p.batch, om, q.threads, q.batch, o, o->rounds,
                          &f, &local) != CP_OK)
        not_measured(w, "the measurement failed: %.220s", local.msg);
    else {
        w->measured = true;
        w->gain = f.gain;
        w->lo = f.lo;
        w->hi = f.hi;
        w->p = f.p;
        double drift = fmax(CP_WHATIF_DRIFT_POINTS, CP_WHATIF_DRIFT_RELATIVE * fabs(w->gain));
        w->expect_lo = w->lo - drift;
        w->expect_hi = w->hi + drift;
        w->before_ns = f.before_ns;
        w->after_ns = f.after_ns;
        w->rounds = f.rounds;
    }
    w->seconds = (double)(cp_clock_ns() - t0) / 1e9;
    return CP_OK;
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

static bool race_eligible(const struct cp_finding *f, const struct cp_whatif *w)
{
    return w->measured && !f->violates && !f->unclassified;
}

/* Move position j to position 0, shifting 0..j-1 down by one. */
static void to_front(struct cp_finding *f, struct cp_whatif *w, size_t j)
{
    struct cp_finding tf = f[j];
    struct cp_whatif tw = w[j];
    memmove(f + 1, f, j * sizeof *f);
    memmove(w + 1, w, j * sizeof *w);
    f[0] = tf;
    w[0] = tw;
}

enum cp_status cp_whatif_race_top(struct cp_finding *f, struct cp_whatif *w, size_t n, size_t top,
                                  int rounds, double alpha, cp_whatif_race_fn race, void *ctx,
                                  struct cp_diag *d)
{
    if (n < 2 || top < 2 || !race_eligible(&f[0], &w[0]))
        return CP_OK;
    for (size_t j = 1; j < n && j < top; j++) {
        /* ranked by gain, so w[j].gain <= w[0].gain: the CIs overlap when
         * the challenger's top reaches the leader's bottom */
        if (!race_eligible(&f[j], &w[j]) || !(w[j].hi >= w[0].lo))
            continue;
        struct cp_whatif_race *r = &w[j].race;
        memset(r, 0, sizeof *r);
        r->run = true;
        r->gain = r->lo = r->hi = r->p = NAN;
        snprintf(r->against, sizeof r->against, "%s", f[0].title);
        enum cp_status st = race(ctx, &w[0], &w[j], r, rounds, d);
        if (st != CP_OK)
            return st;
        /* a difference within the drift between runs is not one a later
         * measurement reproduces (bench/suggest_calibration.sh: races won
         * by 0.3 to 1.1 points, significant, on changes that realised
         * within 0.4 points of each other): the what-ifs' order stands */
        r->won = r->measured && r->gain >= CP_WHATIF_DRIFT_POINTS && r->p < alpha;
        if (r->won)
            to_front(f, w, j);
    }
    return CP_OK;
}

/* cp_tune_whatif_analysis's race: the two findings' changed models, kept
 * in root/f<slot>/whatif.om. */
struct race_ctx {
    const char *root;
    const struct cp_whatif_opts *o;
};

static enum cp_status race_measured(void *ctx, const struct cp_whatif *leader,
                                    const struct cp_whatif *challenger, struct cp_whatif_race *out,
                                    int rounds, struct cp_diag *d)
{
    (void)d;
    const struct race_ctx *rc = ctx;
    char a[1100], b[1100];
    snprintf(a, sizeof a, "%.1000s/f%d/whatif.om", rc->root, leader->slot);
    snprintf(b, sizeof b, "%.1000s/f%d/whatif.om", rc->root, challenger->slot);
    struct cp_diag local;
    cp_diag_init(&local);
    struct pair_figures pf;
    if (measure_pair(a, leader->threads, leader->batch, b, challenger->threads, challenger->batch,
                     rc->o, rounds, &pf, &local) != CP_OK) {
        snprintf(out->note, sizeof out->note, "the race failed: %.170s", local.msg);
        return CP_OK;
    }
    out->measured = true;
    out->gain = pf.gain;
    out->lo = pf.lo;
    out->hi = pf.hi;
    out->p = pf.p;
    out->rounds = pf.rounds;
    return CP_OK;
}

enum cp_status cp_tune_whatif_analysis(struct cp_diagnosis *dg, const struct cp_whatif_opts *o,
                                       struct cp_whatif **out, struct cp_diag *d)
{
    size_t n = dg->analysis.n;
    *out = NULL;
    struct cp_whatif *w = cp_calloc(n ? n : 1, sizeof *w);
    if (!w)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    /* one folder a finding, kept until the race is run */
    char tmp[] = "/tmp/cannprof-whatif.XXXXXX";
    const char *root = o->work_dir;
    if (!root) {
        if (!mkdtemp(tmp)) {
            free(w);
            return cp_diag_set(d, CP_ERR_IO, "cannot make a temporary folder for the what-ifs");
        }
        root = tmp;
    }
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        struct cp_finding *f = &dg->analysis.findings[i];
        double pg = f->gain, pl = f->gain_lo, ph = f->gain_hi;
        char work[1100];
        snprintf(work, sizeof work, "%.1000s/f%zu", root, i);
        w[i].gain = w[i].lo = w[i].hi = w[i].p = w[i].expect_lo = w[i].expect_hi = NAN;
        if (f->unclassified)
            not_measured(&w[i], "no change to measure");
        else if (o->interrupt && *o->interrupt)
            not_measured(&w[i], "interrupted before it was measured");
        else if (mkdir(work, 0700) != 0 && errno != EEXIST)
            st = cp_diag_set(d, CP_ERR_IO, "cannot make %s: %s", work, strerror(errno));
        else
            st = whatif_in(&dg->run, &f->change, o, work, &w[i]);
        w[i].prior_gain = pg;
        w[i].prior_lo = pl;
        w[i].prior_hi = ph;
        w[i].slot = (int)i;
        if (st == CP_OK && w[i].measured) {
            f->gain = w[i].gain;
            f->gain_lo = w[i].expect_lo;
            f->gain_hi = w[i].expect_hi;
        }
    }
    /* rank by what was measured: a stable insertion sort keeps the rule
     * engine's order among equals */
    for (size_t i = 1; st == CP_OK && i < n; i++)
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
    if (st == CP_OK && !(o->interrupt && *o->interrupt)) {
        struct race_ctx rc = {root, o};
        int rounds = o->race_rounds > 0 ? o->race_rounds : 2 * o->rounds;
        st = cp_whatif_race_top(dg->analysis.findings, w, n,
                                (size_t)(o->race_top > 0 ? o->race_top : 0), rounds,
                                o->verdict.alpha, race_measured, &rc, d);
    }
    if (root == tmp) {
        for (size_t i = 0; i < n; i++) {
            char work[1100];
            snprintf(work, sizeof work, "%.1000s/f%zu", root, i);
            remove_work(work);
        }
        rmdir(tmp);
    }
    if (st != CP_OK) {
        free(w);
        return st;
    }
    *out = w;
    return CP_OK;
}
