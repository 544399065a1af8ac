/* The tuning loop: baseline, proposals, evaluation, acceptance, resume. */
#define _GNU_SOURCE /* memrchr */
#include "tuner/tuner_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cp_tune_opts_init(struct cp_tune_opts *o)
{
    memset(o, 0, sizeof *o);
    o->target = CP_TARGET_LATENCY;
    cp_constraints_init(&o->constraints);
    o->budget = 12;
    o->rounds = 60;
    o->warmup = 5;
    cp_verdict_opts_init(&o->verdict);
    o->use_kb_strategies = true;
}

void cp_tune_result_release(struct cp_tune_result *r)
{
    free(r->steps);
    memset(r, 0, sizeof *r);
}

/* ---- bookkeeping --------------------------------------------------------------- */

bool cp_tune_is_seen(const struct cp_tune_ctx *c, const char *key)
{
    for (size_t i = 0; i < c->n_seen; i++)
        if (strcmp(c->seen[i], key) == 0)
            return true;
    return false;
}

enum cp_status cp_tune_mark_seen(struct cp_tune_ctx *c, const char *key, struct cp_diag *d)
{
    if (cp_tune_is_seen(c, key))
        return CP_OK;
    if (c->n_seen == c->cap_seen) {
        size_t cap = c->cap_seen ? c->cap_seen * 2 : 32;
        char(*g)[48] = cp_realloc_array(c->seen, cap, sizeof *g);
        if (!g)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        c->seen = g;
        c->cap_seen = cap;
    }
    snprintf(c->seen[c->n_seen++], 48, "%s", key);
    return CP_OK;
}

static enum cp_status push_step(struct cp_tune_result *r, const struct cp_tune_step *s,
                                struct cp_diag *d)
{
    struct cp_tune_step *g = cp_realloc_array(r->steps, r->n_steps + 1, sizeof *g);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    r->steps = g;
    r->steps[r->n_steps++] = *s;
    return CP_OK;
}

static double elapsed_s(const struct cp_tune_ctx *c)
{
    return (double)(cp_clock_ns() - c->t0) / 1e9;
}

/* ---- the model ------------------------------------------------------------------ */

/* The source model and the baseline config: a .onnx with the defaults, or
 * the source and config a .om records. */
static enum cp_status resolve_source(struct cp_tune_ctx *c, struct cp_tune_point *base,
                                     struct cp_diag *d)
{
    const char *m = c->o->model;
    memset(base, 0, sizeof *base);
    base->threads = c->o->threads;
    if (!cp_path_exists(m))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: no such file", m);
    if (cp_path_has_suffix(m, ".om")) {
        struct cp_graph *g = NULL;
        struct cp_om_meta meta;
        memset(&meta, 0, sizeof meta);
        enum cp_status st = cp_om_read(m, &g, &meta, d);
        cp_graph_free(g);
        if (st != CP_OK)
            return st;
        base->cfg = meta.config;
        const char *src = meta.config.model[0] ? meta.config.model : meta.source_path;
        snprintf(c->onnx, sizeof c->onnx, "%s", src ? src : "");
        cp_om_meta_release(&meta);
        if (!c->onnx[0] || !cp_path_exists(c->onnx))
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s was converted from %s, which is gone; tune the ONNX model "
                               "itself (cannprof tune MODEL.onnx) or restore it",
                               m, c->onnx[0] ? c->onnx : "a source model it does not name");
    } else {
        cp_convert_config_init(&base->cfg);
        snprintf(c->onnx, sizeof c->onnx, "%s", m);
    }
    snprintf(base->cfg.model, sizeof base->cfg.model, "%s", c->onnx);
    const char *slash = strrchr(c->onnx, '/');
    snprintf(c->name, sizeof c->name, "%.127s", slash ? slash + 1 : c->onnx);
    char *dot = strrchr(c->name, '.');
    if (dot)
        *dot = '\0';
    return cp_tune_fingerprint_onnx(c->onnx, c->name, &c->fp, c->source_hash, d);
}

/* The resume key: the same model, target, constraints, hardware, budget
 * and threads make the same session. */
static void session_key(const struct cp_tune_ctx *c, char out[33])
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_printf(&b, "%s|%s|", c->source_hash, cp_target_name(c->o->target));
    cp_constraints_format(&c->o->constraints, &b);
    cp_buf_printf(&b, "|%s|%d|%d", c->hw.signature, c->o->budget, c->o->threads);
    cp_hash128_hex(b.data ? b.data : "", b.len, out);
    cp_buf_release(&b);
}

/* ---- constraints -------------------------------------------------------------------- */

/* Whether a measured point breaks a constraint; the reason when it does. */
static bool breaks(const struct cp_constraints *k, enum cp_constraint_kind kind, double value,
                   char *why, size_t n)
{
    const struct cp_constraint *c = cp_constraints_find(k, kind);
    if (!c || !isfinite(value) || cp_constraint_holds(c, value))
        return false;
    char v[48], lim[48];
    cp_constraint_format_value(kind, value, v);
    cp_constraint_format_value(kind, c->value, lim);
    snprintf(why, n, "%s %s breaks %s%s%s", cp_constraint_kind_name(kind), v,
             cp_constraint_kind_name(kind), cp_constraint_op_text(c->op), lim);
    return true;
}

/* The target is met when the best satisfies every latency and throughput
 * constraint and at least one is given. */
static bool target_met(const struct cp_tune_ctx *c)
{
    const struct cp_constraint *lat =
        cp_constraints_find(&c->o->constraints, CP_CONSTRAINT_LATENCY);
    const struct cp_constraint *thr =
        cp_constraints_find(&c->o->constraints, CP_CONSTRAINT_THROUGHPUT);
    if (!lat && !thr)
        return false;
    return (!lat || cp_constraint_holds(lat, c->r->best_ns / 1e9)) &&
           (!thr || cp_constraint_holds(thr, c->r->best_items_s));
}

/* ---- recording ------------------------------------------------------------------------ */

static enum cp_status record_candidate(struct cp_tune_ctx *c, const struct cp_tune_step *s,
                                       const struct cp_tune_point *p,
                                       const struct cp_measurement *res, int64_t *id,
                                       struct cp_diag *d)
{
    struct cp_buf pj;
    cp_buf_init(&pj);
    cp_tune_point_json(p, &pj);
    char key[48];
    cp_tune_point_key(p, key);
    struct cp_kb_candidate kc = {
        .session_id = c->sess.id,
        .step = s->step,
        .delta = (char *)s->delta,
        .source = (char *)s->source,
        .config_json = pj.data,
        .config_id = key,
        .om_path = (char *)s->om_path,
        .trace_path = (char *)s->trace_path,
        .status = s->status,
        .reason = (char *)s->reason,
        .expected_gain = s->expected_gain,
        .measured_gain = s->measured_gain,
        .ci_lo = s->ci_lo,
        .ci_hi = s->ci_hi,
        .p = s->p,
        .precision_loss = s->precision_loss,
        .memory_bytes = s->memory_bytes,
        .median_ns = s->after_ns,
        .throughput = NAN,
    };
    /* The candidate, its samples and its outcome in one transaction: a
     * tuner stopped half-way never leaves a candidate without its samples. */
    struct cp_kb_step ks = {
        .candidate = &kc,
        .a_ns = res ? res->ns[0] : NULL,
        .b_ns = res ? res->ns[1] : NULL,
        .n = res ? res->n : 0,
        /* a node list is this model's own: no strategy for other models */
        .record_strategy = s->step > 0 && s->status != CP_STEP_FAILED &&
                           !strstr(s->delta, "keep_dtype=") && !strstr(s->delta, "int8_nodes="),
        .model_id = c->model_id,
        .hw_id = c->hw_id,
        .held = s->status == CP_STEP_ACCEPTED,
    };
    enum cp_status st = cp_buf_status(&pj) == CP_OK ? cp_kb_step_record(c->kb, &ks, id, d)
                                                    : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    cp_buf_release(&pj);
    return st;
}

static enum cp_status save_session(struct cp_tune_ctx *c, const char *status, struct cp_diag *d)
{
    struct cp_buf bj;
    cp_buf_init(&bj);
    cp_tune_point_json(&c->r->best, &bj);
    struct cp_kb_session s = c->sess;
    s.status = (char *)status;
    s.best_config_json = bj.data;
    s.best_candidate_id = c->best_candidate_id;
    s.best_median_ns = c->r->best_ns;
    s.baseline_median_ns = c->r->baseline_ns;
    s.evaluations = c->r->evaluations;
    s.stop_reason = c->r->stop_reason;
    enum cp_status st = cp_kb_session_update(c->kb, &s, d);
    cp_buf_release(&bj);
    return st;
}

/* ---- one proposal --------------------------------------------------------------------- */

static void set_reason(struct cp_tune_step *s, enum cp_step_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_reason(struct cp_tune_step *s, enum cp_step_status status, const char *fmt, ...)
{
    s->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->reason, sizeof s->reason, fmt, ap);
    va_end(ap);
}

/* One candidate on its way through an evaluation. */
struct slot {
    const struct cp_tune_proposal *pr;
    struct cp_tune_step s;
    struct cp_tune_point cand;
    struct cp_measurement res;
    int64_t b_run;
    bool improved;
    bool measured; /* it reached the interleaved measurement */
    char name[32];
};

/* Convert, check memory and precision, and measure a candidate against the
 * best (with the futility looks). Stops short of a verdict: *sl holds what
 * was measured, or the reason it was not. An error status only for what
 * stops the session. */
static enum cp_status measure_slot(struct cp_tune_ctx *c, const struct cp_tune_proposal *pr,
                                   struct slot *sl, struct cp_diag *d)
{
    struct cp_tune_result *r = c->r;
    memset(sl, 0, sizeof *sl);
    sl->pr = pr;
    struct cp_tune_step *s = &sl->s;
    s->step = ++c->next_step;
    s->measured_gain = s->ci_lo = s->ci_hi = s->p = s->precision_loss = NAN;
    s->before_ns = s->after_ns = NAN;
    s->expected_gain = pr->expected_gain;
    snprintf(s->source, sizeof s->source, "%s", pr->source);
    struct cp_buf db;
    cp_buf_init(&db);
    cp_delta_format(&pr->delta, &db);
    snprintf(s->delta, sizeof s->delta, "%s", db.data ? db.data : "");
    cp_buf_release(&db);

    char key[48];
    snprintf(sl->name, sizeof sl->name, "cand-%02d", s->step);
    snprintf(s->trace_path, sizeof s->trace_path, "%s/%s.db", c->o->out_dir, sl->name);
    struct cp_diag ed;
    cp_diag_init(&ed);
    struct cp_session cs;
    memset(&cs, 0, sizeof cs);
    char why[256];
    if (cp_delta_apply(&r->best, &pr->delta, &sl->cand, &ed) != CP_OK) {
        set_reason(s, CP_STEP_FAILED, "%s", ed.msg);
        return CP_OK;
    }
    cp_tune_point_key(&sl->cand, key);
    if (cp_tune_mark_seen(c, key, d) != CP_OK)
        return d->status;
    unlink(s->trace_path); /* a stale trace of an interrupted earlier attempt */
    if (cp_tune_convert(c, &sl->cand, sl->name, s->om_path, &ed) != CP_OK) {
        set_reason(s, CP_STEP_FAILED, "%s", ed.msg);
        return CP_OK;
    }
    if (cp_tune_open(c, &sl->cand, s->om_path, NULL, &cs, &ed) != CP_OK) {
        set_reason(s, CP_STEP_FAILED, "%s", ed.msg);
        if (sl->cand.batch != r->best.batch) {
            c->batch_failed = true;
            snprintf(s->reason + strlen(s->reason), sizeof s->reason - strlen(s->reason),
                     "; no other batch is tried");
        }
        return CP_OK;
    }
    s->memory_bytes = cp_tune_memory(&cs);
    if (breaks(&c->o->constraints, CP_CONSTRAINT_MEMORY, (double)s->memory_bytes, why,
               sizeof why)) {
        set_reason(s, CP_STEP_REJECTED, "%s", why);
        cp_session_close(&cs);
        return CP_OK;
    }
    if (cp_tune_precision(c, &sl->cand, &cs, &s->precision_loss, &ed) != CP_OK) {
        set_reason(s, CP_STEP_FAILED, "precision check: %s", ed.msg);
        cp_session_close(&cs);
        return CP_OK;
    }
    cp_session_close(&cs);
    if (cp_tune_precision_breaks(c, why, sizeof why)) {
        set_reason(s, CP_STEP_REJECTED, "%s", why);
        return CP_OK;
    }
    if (cp_tune_ab(c, CP_TUNE_AB_CANDIDATE, &r->best, c->best_om, &sl->cand, s->om_path,
                   s->trace_path, s, &sl->b_run, &sl->improved, &sl->res, &ed) != CP_OK) {
        set_reason(s, CP_STEP_FAILED, "measurement: %s", ed.msg);
        return CP_OK;
    }
    r->latency_evals++;
    r->rounds_spent += s->rounds;
    r->early_stops += s->stopped_early;
    sl->measured = true;
    return CP_OK;
}

/* Whether the probe judged so few of m's rounds undisturbed that its
 * verdict compared every round (runner/measure.h). */
static bool busy(const struct cp_measurement *m)
{
    return m->probed && !cp_measurement_uses_undisturbed(m);
}

/* The verdict on a measured candidate: a confirmation of an improvement,
 * then accepted or rejected with the reason. */
static void judge_slot(struct cp_tune_ctx *c, struct slot *sl)
{
    struct cp_tune_result *r = c->r;
    struct cp_tune_step *s = &sl->s;
    const struct cp_tune_proposal *pr = sl->pr;
    struct cp_diag ed;
    cp_diag_init(&ed);
    char why[256], confirm_note[160] = "";
    bool improved = sl->improved;
    if (improved && c->o->target != CP_TARGET_MEMORY) {
        /* An acceptance changes everything after it, and a burst of load
         * from elsewhere during one measurement can fake a win (a
         * two-thread run starved while a one-thread run is not). Measure
         * again; both must agree, and the second is the one reported. */
        struct cp_tune_step again = *s;
        struct cp_measurement res2;
        int64_t run2;
        bool improved2 = false;
        snprintf(again.trace_path, sizeof again.trace_path, "%s/%s-confirm.db", c->o->out_dir,
                 sl->name);
        unlink(again.trace_path);
        if (cp_tune_ab(c, CP_TUNE_AB_CONFIRM, &r->best, c->best_om, &sl->cand, s->om_path,
                       again.trace_path, &again, &run2, &improved2, &res2, &ed) != CP_OK) {
            set_reason(s, CP_STEP_FAILED, "confirmation measurement: %s", ed.msg);
            return;
        }
        r->confirmations++;
        r->rounds_spent += again.rounds;
        double inconclusive_gain = NAN; /* the second's, when a third was measured */
        /* A confirmation that cannot tell (its interval spans both a gain
         * and a loss beyond the threshold: a burst of load during it) says
         * nothing either way: one more decides, so that a real gain is not
         * thrown away on a noisy minute. */
        if (!improved2 && cp_tune_why_not(c->o, &again) == CP_WHY_NOT_INCONCLUSIVE) {
            struct cp_tune_step third = *s;
            struct cp_measurement res3;
            int64_t run3;
            snprintf(third.trace_path, sizeof third.trace_path, "%s/%s-confirm2.db", c->o->out_dir,
                     sl->name);
            unlink(third.trace_path);
            if (cp_tune_ab(c, CP_TUNE_AB_CONFIRM, &r->best, c->best_om, &sl->cand, s->om_path,
                           third.trace_path, &third, &run3, &improved2, &res3, &ed) != CP_OK) {
                cp_measurement_release(&res2);
                set_reason(s, CP_STEP_FAILED, "confirmation measurement: %s", ed.msg);
                return;
            }
            r->confirmations++;
            r->rounds_spent += third.rounds;
            inconclusive_gain = again.measured_gain;
            cp_measurement_release(&res2);
            res2 = res3;
            run2 = run3;
            again = third;
        }
        /* A confirmation the probe judged disturbed throughout (compared on
         * every round) measured a busy machine, where waiting that both
         * sides share shrinks a change: beside two hogs a bf16 plan worth
         * 13% measured +1.2% over 5980 rounds. After a first measurement on
         * undisturbed rounds, such a confirmation confirms when it agrees
         * in direction, significantly; its size is not held against the
         * threshold, and the first measurement's figures are reported. A
         * thread-count change is left out: load favours fewer threads. */
        if (!improved2 && busy(&res2) && !busy(&sl->res) && sl->cand.threads == r->best.threads &&
            again.measured_gain > 0 && again.p < c->o->verdict.alpha &&
            !(again.ci_lo <= 0 && again.ci_hi >= 0)) {
            snprintf(confirm_note, sizeof confirm_note,
                     "; confirmed on a busy machine: %+.1f%% over %lld rounds, every one "
                     "disturbed, p=%.3g",
                     100 * (c->o->target == CP_TARGET_THROUGHPUT ? 1 : -1) * again.measured_gain,
                     (long long)again.rounds, again.p);
        } else if (!improved2) {
            improved = false;
            s->measured_gain = again.measured_gain;
            s->ci_lo = again.ci_lo;
            s->ci_hi = again.ci_hi;
            s->p = again.p;
            if (isfinite(inconclusive_gain))
                snprintf(why, sizeof why,
                         "not reproduced: a second measurement gave %+.1f%% (inconclusive), a "
                         "third %+.1f%%",
                         100 * inconclusive_gain, 100 * again.measured_gain);
            else
                snprintf(why, sizeof why, "not reproduced: a second measurement gave %+.1f%%",
                         100 * again.measured_gain);
        } else {
            cp_measurement_release(&sl->res);
            sl->res = res2;
            memset(&res2, 0, sizeof res2);
            *s = again;
            sl->b_run = run2;
        }
        cp_measurement_release(&res2);
        if (!improved) {
            set_reason(s, CP_STEP_REJECTED, "%s", why);
            return;
        }
    }
    const char *what = c->o->target == CP_TARGET_THROUGHPUT ? "throughput" : "latency";
    if (c->o->target == CP_TARGET_MEMORY) {
        double saved = 1.0 - (double)s->memory_bytes / (double)r->best_memory;
        if (!improved)
            set_reason(s, CP_STEP_REJECTED, "latency regressed (%+.1f%%)", -100 * s->measured_gain);
        else if (saved * 100 < c->o->verdict.threshold_pct)
            set_reason(s, CP_STEP_REJECTED, "memory %+.1f%%: not below the %.3g%% threshold",
                       -100 * saved, c->o->verdict.threshold_pct);
        else
            set_reason(s, CP_STEP_ACCEPTED, "memory %+.1f%%, latency not worse", -100 * saved);
    } else if (!improved) {
        /* in the metric's own direction: latency falls, throughput rises */
        double sign = c->o->target == CP_TARGET_THROUGHPUT ? 1 : -1;
        double ch = sign * s->measured_gain, lo = sign * (sign > 0 ? s->ci_lo : s->ci_hi),
               hi = sign * (sign > 0 ? s->ci_hi : s->ci_lo);
        const char *why_not = cp_tune_why_not_text(cp_tune_why_not(c->o, s));
        set_reason(s, CP_STEP_REJECTED, "%s %+.1f%% [%+.1f%%, %+.1f%%], p=%.3g: %s", what, 100 * ch,
                   100 * lo, 100 * hi, s->p, why_not);
        if (s->stopped_early) {
            size_t len = strlen(s->reason);
            snprintf(s->reason + len, sizeof s->reason - len,
                     "; stopped after %lld rounds: even its optimistic gain, %+.1f%%, is below "
                     "the %.3g%% threshold",
                     (long long)s->rounds, 100 * s->upper, c->o->verdict.threshold_pct);
        }
    } else if (breaks(&c->o->constraints, CP_CONSTRAINT_LATENCY, s->after_ns / 1e9, why,
                      sizeof why) &&
               !breaks(&c->o->constraints, CP_CONSTRAINT_LATENCY, s->before_ns / 1e9, why,
                       sizeof why))
        set_reason(s, CP_STEP_REJECTED, "%s", why);
    else if (c->o->target == CP_TARGET_THROUGHPUT)
        set_reason(s, CP_STEP_ACCEPTED, "%s%sthroughput %+.1f%% [%+.1f%%, %+.1f%%], p=%.3g",
                   pr->title, pr->title[0] ? ": " : "", 100 * s->measured_gain, 100 * s->ci_lo,
                   100 * s->ci_hi, s->p);
    else
        set_reason(s, CP_STEP_ACCEPTED, "%s%slatency %+.1f%% [%+.1f%%, %+.1f%%], p=%.3g", pr->title,
                   pr->title[0] ? ": " : "", -100 * s->measured_gain, -100 * s->ci_hi,
                   -100 * s->ci_lo, s->p);
    if (s->status == CP_STEP_ACCEPTED && confirm_note[0]) {
        size_t len = strlen(s->reason);
        snprintf(s->reason + len, sizeof s->reason - len, "%s", confirm_note);
    }
}

/* Record a judged candidate: the knowledge base, the best when accepted,
 * the report's steps and the session. */
static enum cp_status record_slot(struct cp_tune_ctx *c, struct slot *sl, struct cp_diag *d)
{
    struct cp_tune_result *r = c->r;
    struct cp_tune_step *s = &sl->s;
    r->evaluations++;
    int64_t id = 0;
    enum cp_status st = record_candidate(c, s, &sl->cand, &sl->res, &id, d);
    cp_measurement_release(&sl->res);
    if (st != CP_OK)
        return st;
    if (s->status == CP_STEP_ACCEPTED) {
        r->best = sl->cand;
        r->best_ns = s->after_ns;
        r->best_memory = s->memory_bytes;
        r->best_precision_loss = s->precision_loss;
        r->best_items_s =
            isfinite(s->after_ns) && s->after_ns > 0
                ? (double)(sl->cand.batch > 0 ? sl->cand.batch : 1) * 1e9 / s->after_ns
                : NAN;
        snprintf(c->best_om, sizeof c->best_om, "%s", s->om_path);
        snprintf(c->best_trace, sizeof c->best_trace, "%s", s->trace_path);
        c->best_run = sl->b_run;
        c->best_candidate_id = id;
    }
    cp_tune_progress_step(c, s);
    if ((st = push_step(r, s, d)) == CP_OK)
        st = save_session(c, "running", d);
    return st;
}

static enum cp_status evaluate(struct cp_tune_ctx *c, const struct cp_tune_proposal *pr,
                               struct cp_diag *d)
{
    struct slot sl;
    enum cp_status st = measure_slot(c, pr, &sl, d);
    if (st != CP_OK) {
        cp_measurement_release(&sl.res);
        return st;
    }
    if (sl.measured)
        judge_slot(c, &sl);
    return record_slot(c, &sl, d);
}

/* A race (tuner/tuner.h): alternatives of one knob measured against the
 * same best, each with its futility looks, the improvements kept only when
 * Holm's procedure across the whole race rejects at --alpha, and of those
 * the largest gain judged (confirmed) and accepted; the rest are rejected
 * with the race's reason. */
static enum cp_status race(struct cp_tune_ctx *c, const struct cp_tune_proposal *const *prs,
                           size_t k, struct cp_diag *d)
{
    struct slot sl[CP_TUNE_RACE_MAX];
    size_t n = 0;
    enum cp_status st = CP_OK;
    for (; n < k && st == CP_OK; n++)
        st = measure_slot(c, prs[n], &sl[n], d);
    if (st != CP_OK) {
        for (size_t i = 0; i < n; i++)
            cp_measurement_release(&sl[i].res);
        return st;
    }
    c->r->races++;
    double p[CP_TUNE_RACE_MAX];
    bool reject[CP_TUNE_RACE_MAX] = {false};
    for (size_t i = 0; i < k; i++)
        p[i] = sl[i].measured ? sl[i].s.p : NAN;
    struct cp_diag hd;
    cp_diag_init(&hd);
    cp_stats_holm(p, k, c->o->verdict.alpha, reject, &hd);
    double sign = c->o->target == CP_TARGET_THROUGHPUT ? 1 : -1;
    int win = -1;
    for (size_t i = 0; i < k; i++)
        if (sl[i].measured && sl[i].improved && reject[i] &&
            (win < 0 || sl[i].s.measured_gain > sl[win].s.measured_gain))
            win = (int)i;
    for (size_t i = 0; i < k; i++) {
        if (!sl[i].measured)
            continue;
        struct cp_tune_step *s = &sl[i].s;
        if ((int)i == win || !sl[i].improved) {
            judge_slot(c, &sl[i]);
        } else if (!reject[i]) {
            set_reason(s, CP_STEP_REJECTED,
                       "%s %+.1f%%, p=%.3g: not significant after Holm's correction across "
                       "the %zu raced",
                       sign > 0 ? "throughput" : "latency", 100 * sign * s->measured_gain, s->p, k);
        } else {
            set_reason(s, CP_STEP_REJECTED, "raced: %s gained more (%+.1f%% against %+.1f%%)",
                       sl[win].s.delta, 100 * sign * sl[win].s.measured_gain,
                       100 * sign * s->measured_gain);
        }
        size_t len = strlen(s->reason);
        snprintf(s->reason + len, sizeof s->reason - len, " [race of %zu]", k);
    }
    for (size_t i = 0; i < k && st == CP_OK; i++)
        st = record_slot(c, &sl[i], d);
    for (size_t i = 0; i < k; i++)
        cp_measurement_release(&sl[i].res);
    return st;
}

/* ---- baseline and resume ---------------------------------------------------------------- */

static enum cp_status run_baseline(struct cp_tune_ctx *c, const struct cp_tune_point *base,
                                   struct cp_diag *d)
{
    struct cp_tune_result *r = c->r;
    struct cp_tune_step s;
    memset(&s, 0, sizeof s);
    s.measured_gain = s.ci_lo = s.ci_hi = s.p = s.expected_gain = NAN;
    snprintf(s.source, sizeof s.source, "baseline");
    s.status = CP_STEP_BASELINE;
    snprintf(s.reason, sizeof s.reason, "the given config");
    snprintf(s.trace_path, sizeof s.trace_path, "%s/baseline.db", c->o->out_dir);
    unlink(s.trace_path);
    enum cp_status st = cp_tune_convert(c, base, "baseline", s.om_path, d);
    if (st == CP_OK)
        st = cp_tune_bench(c, base, s.om_path, s.trace_path, &r->baseline_ns, &r->baseline_items_s,
                           &r->baseline_memory, &c->best_run, d);
    struct cp_session bs;
    if (st == CP_OK && (st = cp_tune_open(c, base, s.om_path, NULL, &bs, d)) == CP_OK) {
        st = cp_tune_precision(c, base, &bs, &r->baseline_precision_loss, d);
        cp_session_close(&bs);
    }
    if (st != CP_OK)
        return st;
    s.after_ns = s.before_ns = r->baseline_ns;
    s.memory_bytes = r->baseline_memory;
    s.precision_loss = r->baseline_precision_loss;
    r->baseline = r->best = *base;
    r->best_ns = r->baseline_ns;
    r->best_items_s = r->baseline_items_s;
    r->best_memory = r->baseline_memory;
    r->best_precision_loss = r->baseline_precision_loss;
    snprintf(c->best_om, sizeof c->best_om, "%s", s.om_path);
    snprintf(c->best_trace, sizeof c->best_trace, "%s", s.trace_path);
    int64_t id;
    if ((st = record_candidate(c, &s, base, NULL, &id, d)) != CP_OK)
        return st;
    c->best_candidate_id = id;
    char key[48];
    cp_tune_point_key(base, key);
    if ((st = cp_tune_mark_seen(c, key, d)) != CP_OK || (st = push_step(r, &s, d)) != CP_OK)
        return st;
    cp_tune_progress_note(c, "baseline: %.3f ms, %.1f items/s, precision_loss %.4f%%",
                          r->baseline_ns / 1e6, r->baseline_items_s, r->baseline_precision_loss);
    return save_session(c, "running", d);
}

/* Replay a session's candidates from the knowledge base. */
static enum cp_status resume(struct cp_tune_ctx *c, struct cp_diag *d)
{
    struct cp_tune_result *r = c->r;
    struct cp_kb_candidate *kc = NULL;
    size_t n = 0;
    enum cp_status st = cp_kb_candidate_list(c->kb, c->sess.id, &kc, &n, d);
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        struct cp_tune_point p;
        struct cp_tune_step s;
        memset(&s, 0, sizeof s);
        if ((st = cp_tune_point_from_json(&p, kc[i].config_json, d)) != CP_OK)
            break;
        s.step = kc[i].step;
        snprintf(s.delta, sizeof s.delta, "%s", kc[i].delta ? kc[i].delta : "");
        snprintf(s.source, sizeof s.source, "%s", kc[i].source ? kc[i].source : "");
        s.status = kc[i].status;
        snprintf(s.reason, sizeof s.reason, "%s", kc[i].reason ? kc[i].reason : "");
        snprintf(s.om_path, sizeof s.om_path, "%s", kc[i].om_path ? kc[i].om_path : "");
        snprintf(s.trace_path, sizeof s.trace_path, "%s", kc[i].trace_path ? kc[i].trace_path : "");
        s.expected_gain = kc[i].expected_gain;
        s.measured_gain = kc[i].measured_gain;
        s.ci_lo = kc[i].ci_lo;
        s.ci_hi = kc[i].ci_hi;
        s.p = kc[i].p;
        s.precision_loss = kc[i].precision_loss;
        s.memory_bytes = kc[i].memory_bytes;
        s.after_ns = kc[i].median_ns;
        char key[48];
        cp_tune_point_key(&p, key);
        if ((st = cp_tune_mark_seen(c, key, d)) != CP_OK || (st = push_step(r, &s, d)) != CP_OK)
            break;
        bool base = s.status == CP_STEP_BASELINE;
        if (base) {
            r->baseline = p;
            r->baseline_ns = s.after_ns;
            r->baseline_memory = s.memory_bytes;
            r->baseline_precision_loss = s.precision_loss;
            r->baseline_items_s = (double)(p.batch > 0 ? p.batch : 1) * 1e9 / s.after_ns;
        } else {
            r->evaluations++;
            r->latency_evals += isfinite(s.measured_gain);
        }
        if (base || s.status == CP_STEP_ACCEPTED) {
            r->best = p;
            r->best_ns = s.after_ns;
            r->best_memory = s.memory_bytes;
            r->best_precision_loss = s.precision_loss;
            r->best_items_s = (double)(p.batch > 0 ? p.batch : 1) * 1e9 / s.after_ns;
            snprintf(c->best_om, sizeof c->best_om, "%s", s.om_path);
            snprintf(c->best_trace, sizeof c->best_trace, "%s", s.trace_path);
            c->best_run = -1; /* the candidate's run is the trace's last */
            c->best_candidate_id = kc[i].id;
        }
        if (s.step > c->next_step)
            c->next_step = s.step;
    }
    cp_kb_candidate_list_free(kc, n);
    if (st == CP_OK && (!isfinite(r->baseline_ns) || r->n_steps == 0))
        st = cp_diag_set(d, CP_ERR_CORRUPT,
                         "%s: session %lld has no baseline; run again with --fresh",
                         cp_kb_path(c->kb), (long long)c->sess.id);
    if (st == CP_OK && !cp_path_exists(c->best_om))
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "session %lld's best model %s is gone; run again with --fresh",
                         (long long)c->sess.id, c->best_om);
    return st;
}

/* ---- the loop ------------------------------------------------------------------------------ */

static enum cp_status open_kb(struct cp_tune_ctx *c, struct cp_diag *d)
{
    enum cp_status st = cp_kb_open(c->o->kb_path, &c->kb, d);
    cp_kb_hardware_detect(&c->hw);
    c->cores = c->hw.cores > 0 ? c->hw.cores : 1;
    if (st == CP_OK)
        st = cp_kb_model_upsert(c->kb, &c->fp, &c->model_id, d);
    if (st == CP_OK)
        st = cp_kb_hardware_upsert(c->kb, &c->hw, &c->hw_id, d);
    return st;
}

static enum cp_status start_or_resume(struct cp_tune_ctx *c, const struct cp_tune_point *base,
                                      struct cp_diag *d)
{
    char key[33];
    session_key(c, key);
    bool found = false;
    enum cp_status st = CP_OK;
    if (!c->o->fresh && (st = cp_kb_session_find(c->kb, key, &c->sess, &found, d)) != CP_OK)
        return st;
    if (found) {
        c->r->session_id = c->sess.id;
        c->r->resumed = true;
        c->r->already_done = strcmp(c->sess.status, "done") == 0;
        cp_tune_progress_note(c, "resuming session %lld (%s, %d evaluations so far)",
                              (long long)c->sess.id, c->sess.status, c->sess.evaluations);
        return resume(c, d);
    }
    struct cp_buf bj;
    cp_buf_init(&bj);
    cp_tune_point_json(base, &bj);
    struct cp_buf ct;
    cp_buf_init(&ct);
    cp_constraints_format(&c->o->constraints, &ct);
    struct cp_kb_session s = {
        .key = key,
        .model_id = c->model_id,
        .hw_id = c->hw_id,
        .model_path = c->onnx,
        .target = (char *)cp_target_name(c->o->target),
        .constraints = ct.data ? ct.data : "",
        .status = "running",
        .baseline_config_json = bj.data,
        .best_config_json = bj.data,
        .budget = c->o->budget,
        .baseline_median_ns = NAN,
        .best_median_ns = NAN,
        .out_dir = (char *)c->o->out_dir,
    };
    int64_t id = 0;
    st = cp_kb_session_begin(c->kb, &s, &id, d);
    cp_buf_release(&bj);
    cp_buf_release(&ct);
    if (st == CP_OK)
        st = cp_kb_session_get(c->kb, id, &c->sess, d);
    if (st == CP_OK) {
        c->r->session_id = id;
        st = run_baseline(c, base, d);
    }
    return st;
}

/* Copy the best .om to <out>/best.om; drop the others unless asked to keep
 * them. */
static enum cp_status finish_artifacts(struct cp_tune_ctx *c, struct cp_diag *d)
{
    struct cp_tune_result *r = c->r;
    snprintf(r->best_om, sizeof r->best_om, "%s/best.om", c->o->out_dir);
    uint8_t *data = NULL;
    size_t len = 0;
    enum cp_status st = cp_file_read(c->best_om, &data, &len, d);
    if (st == CP_OK)
        st = cp_file_write_atomic(r->best_om, data, len, d);
    free(data);
    if (st != CP_OK || c->o->keep_all)
        return st;
    for (size_t i = 0; i < r->n_steps; i++)
        if (r->steps[i].om_path[0] && strcmp(r->steps[i].om_path, c->best_om) != 0)
            unlink(r->steps[i].om_path);
    return CP_OK;
}

/* The result against the baseline, measured as every decision was:
 * interleaved, in one process, with twice the rounds of a step. The
 * baseline's own bench and the best's last A/B ran at different moments
 * of a shared machine; this is the figure the report gives. A failure
 * leaves the figures unknown (NaN), not wrong. */
static void final_check(struct cp_tune_ctx *c)
{
    struct cp_tune_result *r = c->r;
    r->final_change = r->final_ci_lo = r->final_ci_hi = r->final_p = NAN;
    if (!r->steps || r->n_steps < 1 || strcmp(c->best_om, r->steps[0].om_path) == 0)
        return;
    struct cp_tune_opts o = *c->o;
    o.rounds = 2 * c->o->rounds;
    struct cp_tune_ctx fc = *c;
    fc.o = &o;
    struct cp_tune_step s;
    memset(&s, 0, sizeof s);
    char trace[1100];
    snprintf(trace, sizeof trace, "%.1000s/final.db", c->o->out_dir);
    unlink(trace);
    struct cp_measurement res;
    int64_t run;
    bool improved;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_tune_ab(&fc, CP_TUNE_AB_FINAL, &r->baseline, r->steps[0].om_path, &r->best, c->best_om,
                   trace, &s, &run, &improved, &res, &d) != CP_OK) {
        cp_tune_progress_note(c, "final check against the baseline failed: %s", d.msg);
        return;
    }
    cp_measurement_release(&res);
    r->final_change = s.measured_gain;
    r->final_ci_lo = s.ci_lo;
    r->final_ci_hi = s.ci_hi;
    r->final_p = s.p;
    r->final_baseline_ns = s.before_ns;
    r->final_best_ns = s.after_ns;
    cp_tune_progress_note(c,
                          "best against the baseline, interleaved: %s %+.1f%% [%+.1f%%, %+.1f%%]",
                          c->o->target == CP_TARGET_THROUGHPUT ? "throughput" : "latency",
                          (c->o->target == CP_TARGET_THROUGHPUT ? 100 : -100) * s.measured_gain,
                          c->o->target == CP_TARGET_THROUGHPUT ? 100 * s.ci_lo : -100 * s.ci_hi,
                          c->o->target == CP_TARGET_THROUGHPUT ? 100 * s.ci_hi : -100 * s.ci_lo);
}

static void stop_because(struct cp_tune_result *r, const char *why)
{
    snprintf(r->stop_reason, sizeof r->stop_reason, "%.255s", why);
}

enum cp_status cp_tune(const struct cp_tune_opts *o, struct cp_tune_result *r, struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    r->baseline_ns = r->best_ns = NAN;
    r->final_change = r->final_ci_lo = r->final_ci_hi = r->final_p = NAN;
    r->final_baseline_ns = r->final_best_ns = NAN;
    struct cp_tune_ctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.r = r;
    c.t0 = cp_clock_ns();
    c.best_run = -1;
    struct cp_tune_point base;
    enum cp_status st = cp_mkdir_p(o->out_dir, 0755, d);
    if (st == CP_OK)
        st = resolve_source(&c, &base, d);
    if (st == CP_OK)
        st = open_kb(&c, d);
    if (st == CP_OK)
        st = start_or_resume(&c, &base, d);
    if (st != CP_OK)
        goto out;
    if (r->already_done) {
        stop_because(r, c.sess.stop_reason ? c.sess.stop_reason : "finished earlier");
        /* best.om is where that session put it, whatever --out says now */
        snprintf(r->best_om, sizeof r->best_om, "%.1000s/best.om",
                 c.sess.out_dir && *c.sess.out_dir ? c.sess.out_dir : o->out_dir);
        st = cp_tune_write_report(o, r, d);
        goto out;
    }
    struct cp_tune_proposals ps = {0};
    bool have_proposals = false;
    int64_t proposals_for = 0;
    size_t next = 0;
    while (st == CP_OK) {
        if (o->interrupt && *o->interrupt) {
            r->interrupted = true;
            stop_because(r, "interrupted");
            break;
        }
        if (r->evaluations >= o->budget) {
            stop_because(r, "budget reached");
            break;
        }
        if (o->time_limit_s > 0 && elapsed_s(&c) >= o->time_limit_s) {
            stop_because(r, "time limit reached");
            break;
        }
        if (target_met(&c)) {
            stop_because(r, "target met");
            break;
        }
        /* Diagnose only when the best changed: a rejection leaves the best,
         * its trace and so its findings as they were; the list is then
         * consumed in order, skipping what has been evaluated since. */
        if (!have_proposals || proposals_for != c.best_candidate_id) {
            ps.n = 0;
            cp_tune_propose_plans(&c, &ps, &r->best);
            cp_tune_propose_kb(&c, &ps, &r->best);
            cp_tune_propose_rules(&c, &ps, &r->best);
            cp_tune_propose_space(&c, &ps, &r->best);
            have_proposals = true;
            proposals_for = c.best_candidate_id;
            next = 0;
        }
        while (next < ps.n && (cp_tune_knob_blocked(&c, &ps.p[next].delta) ||
                               cp_tune_point_seen(&c, &r->best, &ps.p[next].delta)))
            next++;
        if (next == ps.n) {
            stop_because(r, "no proposal left");
            break;
        }
        /* alternatives of one knob that follow it are raced with it */
        const struct cp_tune_proposal *group[CP_TUNE_RACE_MAX] = {&ps.p[next]};
        size_t k = 1;
        const char *rk = ps.p[next].race;
        for (size_t j = next + 1;
             rk[0] && j < ps.n && k < CP_TUNE_RACE_MAX && r->evaluations + (int)k < o->budget; j++)
            if (strcmp(ps.p[j].race, rk) == 0 && !cp_tune_knob_blocked(&c, &ps.p[j].delta) &&
                !cp_tune_point_seen(&c, &r->best, &ps.p[j].delta))
                group[k++] = &ps.p[j];
        next++;
        st = k > 1 ? race(&c, group, k, d) : evaluate(&c, group[0], d);
    }
    free(ps.p);
    if (st == CP_OK && !r->interrupted)
        final_check(&c);
    if (st == CP_OK) {
        const char *status = r->interrupted ? "interrupted" : "done";
        if ((st = finish_artifacts(&c, d)) == CP_OK && (st = save_session(&c, status, d)) == CP_OK)
            st = cp_tune_write_report(o, r, d);
    } else if (c.kb && c.sess.id) {
        struct cp_diag ignored;
        cp_diag_init(&ignored);
        stop_because(r, d->msg);
        save_session(&c, "interrupted", &ignored);
    }
out:
    cp_tune_refs_release(&c);
    free(c.seen);
    cp_kb_session_release(&c.sess);
    cp_kb_fingerprint_release(&c.fp);
    cp_kb_close(c.kb);
    return st;
}
