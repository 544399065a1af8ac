/* Tuning a flow (docs/tuning.md, "Tuning a flow"): the pipeline's knobs
 * under an open-loop workload, with the acceptance rules of the model loop.
 *
 *   1. The current flow is served as the measurements serve it (pipeline/'s
 *      service: its sink hands answers back instead of writing files) and
 *      loaded flat out (--concurrency requests in flight, back to back),
 *      recorded into a trace: its capacity, and node-bottleneck's limiting
 *      node and problems.
 *   2. Candidates: each problem's fix (workers, queue_size, batch_size,
 *      batch_window_ms), the limiting node with one more worker, twice its
 *      batch, or a batching window of half a call when it batches without
 *      one, and with
 *      --models each inference node's .om tuned by the model loop (its best
 *      .om in place). Each is predicted by the what-if replay of that trace
 *      (a tuned model as its node k times faster), and measured best first.
 *   3. A measurement: the current flow and the candidate served side by side
 *      in process (pipeline/'s service), loaded alternately with the same
 *      Poisson workload `cannprof load` sends (latency target: at 60% of
 *      the capacity; throughput target: at 1.5 times it, so that the flow
 *      must shed), --pairs times each; each run's mean latency (or
 *      throughput) is one sample, and the paired t-test of the log ratios
 *      judges the change (stats/verdict.h). A candidate is accepted when it
 *      is significantly better by the threshold and the constraints hold
 *      (latency<X bounds the runs' p99, throughput>Y their throughput); it
 *      becomes the current flow, and the loop goes back to 1.
 *   4. The best flow is written beside the original (its relative paths
 *      hold) and measured once more against the original, alternately: the
 *      figure to quote. */
#include "tuner/tuner.h"
#include "tuner/tuner_internal.h"
#include "pipeline/pipeline.h"
#include "runner/session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cp_flow_tune_opts_init(struct cp_flow_tune_opts *o)
{
    memset(o, 0, sizeof *o);
    o->target = CP_TARGET_LATENCY;
    cp_constraints_init(&o->constraints);
    o->budget = 8;
    o->pairs = 5;
    o->requests = 60;
    o->concurrency = 64;
    o->model_budget = 4;
    cp_verdict_opts_init(&o->verdict);
    o->seed = 1;
}

void cp_flow_tune_result_release(struct cp_flow_tune_result *r)
{
    free(r->steps);
    memset(r, 0, sizeof *r);
}

/* ---- candidates ----------------------------------------------------------------------- */

struct cand {
    struct cp_whatif_change c; /* key "model": the node's model, model_path in its place */
    char source[64];
    double predicted; /* the target's figure the replay predicts; NaN */
    double speed;     /* a tuned model: its node this many times faster (the replay's) */
    char model_path[1100];
};

static bool have(const struct cand *v, size_t n, const char *node, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].c.node, node) == 0 && strcmp(v[i].c.key, key) == 0)
            return true;
    return false;
}

static void add(struct cand *v, size_t *n, size_t cap, const char *node, const char *key,
                const char *value, const char *source)
{
    if (*n == cap || have(v, *n, node, key))
        return;
    struct cand *x = &v[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->c.node, sizeof x->c.node, "%s", node);
    snprintf(x->c.key, sizeof x->c.key, "%s", key);
    snprintf(x->c.value, sizeof x->c.value, "%s", value);
    snprintf(x->source, sizeof x->source, "%s", source);
    x->predicted = NAN;
    x->speed = 1;
}

/* Whether node i's model runs at batch `batch` (a model whose Reshapes fix
 * it does not): opened once, at that batch. */
static bool batch_settable(const char *flow, const struct cp_flow *f, size_t i, int batch)
{
    const char *model = cp_flow_node_attr(f, i, "model");
    if (!model)
        return false;
    char path[1300];
    if (model[0] == '/') {
        snprintf(path, sizeof path, "%s", model);
    } else {
        char *dir = cp_path_dirname(flow);
        snprintf(path, sizeof path, "%.1000s/%s", dir ? dir : ".", model);
        free(dir);
    }
    struct cp_session s;
    memset(&s, 0, sizeof s);
    struct cp_session_opts so = {
        .model_path = path, .batch = batch, .threads = 1, .buffer_optimize = -1};
    struct cp_diag d;
    cp_diag_init(&d);
    bool ok = cp_session_open(&s, &so, &d) == CP_OK &&
              cp_session_set_inputs(&s, NULL, 0, 1, &d) == CP_OK &&
              cp_plan_run(s.plan, -1, &d) == CP_OK;
    cp_session_close(&s);
    return ok;
}

/* The figure a what-if gives for the target. */
static double figure(const struct cp_whatif_figures *f, enum cp_target t)
{
    return t == CP_TARGET_THROUGHPUT ? f->throughput : f->mean_ms;
}

/* ---- measurements --------------------------------------------------------------------- */

static enum cp_status one_run(struct cp_flow_service *s, const struct cp_flow_tune_opts *o,
                              double rate, uint64_t seed, struct cp_tune_load_sample *out,
                              struct cp_diag *d)
{
    struct cp_flow_load_opts lo = {
        .rate = rate, .requests = o->requests, .concurrency = o->concurrency, .seed = seed};
    struct cp_flow_load_result lr;
    enum cp_status st = cp_flow_service_load(s, &lo, &lr, d);
    if (st != CP_OK)
        return st;
    if (lr.ok == 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "no request of the workload was answered (%llu "
                           "failed)",
                           (unsigned long long)lr.failed);
    out->value = o->target == CP_TARGET_THROUGHPUT ? lr.throughput : lr.mean_ms;
    out->p99_ms = lr.p99_ms;
    out->throughput = lr.throughput;
    return CP_OK;
}

struct two_flows {
    struct cp_flow_service *s[2];
    const struct cp_flow_tune_opts *o;
    double rate;
};

static enum cp_status run_side(void *ctx, int side, uint64_t seed, struct cp_tune_load_sample *out,
                               struct cp_diag *d)
{
    struct two_flows *t = ctx;
    return one_run(t->s[side], t->o, t->rate, seed, out, d);
}

/* The current flow (a) against a candidate (b), served side by side,
 * alternately (cp_tune_load_pairs). */
static enum cp_status compare_flows(const char *a_path, const char *b_path,
                                    const struct cp_flow_tune_opts *o, double rate,
                                    struct cp_comparison *cmp, struct cp_tune_load_sample *b_worst,
                                    struct cp_diag *d)
{
    struct cp_flow *fa = NULL, *fb = NULL;
    struct two_flows t = {.o = o, .rate = rate};
    enum cp_status st = cp_flow_load(a_path, &fa, d);
    if (st == CP_OK)
        st = cp_flow_load(b_path, &fb, d);
    if (st == CP_OK)
        st = cp_flow_service_start(fa, NULL, NULL, &t.s[0], d);
    if (st == CP_OK)
        st = cp_flow_service_start(fb, NULL, NULL, &t.s[1], d);
    if (st == CP_OK)
        st = cp_tune_load_pairs(run_side, &t, o->pairs, o->seed, o->target, &o->verdict,
                                o->progress, "flow-tune", cmp, b_worst, d);
    cp_flow_service_stop(t.s[0]);
    cp_flow_service_stop(t.s[1]);
    cp_flow_free(fa);
    cp_flow_free(fb);
    return st;
}

/* ---- the flow's own figures ------------------------------------------------------------- */

/* Serve `flow` as the measurements do (its sink handing answers back, not
 * writing files) and load it flat out (--concurrency requests in flight,
 * sent back to back), recorded into out_dir/<name>.db, and analyse it. */
static enum cp_status profile(const char *flow, const struct cp_flow_tune_opts *o, const char *name,
                              char *trace, size_t n_trace, struct cp_bottleneck *b,
                              struct cp_diag *d)
{
    snprintf(trace, n_trace, "%.1000s/%s.db", o->out_dir, name);
    unlink(trace);
    struct cp_flow *f = NULL;
    struct cp_flow_service *s = NULL;
    enum cp_status st = cp_flow_load(flow, &f, d);
    if (st == CP_OK)
        st = cp_flow_service_start(f, NULL, NULL, &s, d);
    /* a warm-up: the models' first runs stay out of the trace */
    struct cp_flow_load_opts lo = {
        .rate = 1e6, .requests = 8, .concurrency = o->concurrency, .seed = o->seed};
    struct cp_flow_load_result lr;
    if (st == CP_OK)
        st = cp_flow_service_load(s, &lo, &lr, d);
    if (st == CP_OK) {
        cp_flow_service_record_begin(s);
        lo.requests = 2 * o->requests;
        st = cp_flow_service_load(s, &lo, &lr, d);
        int64_t run = -1;
        struct cp_diag rd;
        cp_diag_init(&rd);
        enum cp_status rst = cp_flow_service_record_end(s, trace, "pipeline", &run, NULL, &rd);
        if (st == CP_OK && rst != CP_OK) {
            *d = rd;
            st = rst;
        }
    }
    cp_flow_service_stop(s);
    cp_flow_free(f);
    if (st == CP_OK)
        st = cp_node_bottleneck(trace, -1, b, d);
    return st;
}

/* The model loop on an inference node's .om: its best .om, and how much
 * faster it ran. false when it found nothing better. */
static bool tune_model(const struct cp_flow_tune_opts *o, const char *flow, const char *node,
                       const char *model, char *best, size_t n_best, double *speed)
{
    char dir[1300], path[1200];
    struct cp_diag d;
    cp_diag_init(&d);
    if (model[0] == '/')
        snprintf(path, sizeof path, "%s", model);
    else {
        char *fd = cp_path_dirname(flow);
        snprintf(path, sizeof path, "%s/%s", fd ? fd : ".", model);
        free(fd);
    }
    snprintf(dir, sizeof dir, "%.1000s/model-%s", o->out_dir, node);
    struct cp_tune_opts mo;
    cp_tune_opts_init(&mo);
    mo.model = path;
    mo.target = CP_TARGET_LATENCY;
    mo.budget = o->model_budget;
    mo.rounds = 30;
    mo.out_dir = dir;
    mo.threads = 1;
    mo.verdict = o->verdict;
    mo.kb_path = o->kb_path;
    mo.fresh = true;
    mo.constraints = o->constraints; /* precision_loss and memory bounds hold per model */
    struct cp_tune_result r;
    cp_tune_progress(o->progress, "flow-tune: tuning node %s's model %s (budget %d)\n", node, path,
                     mo.budget);
    enum cp_status st = cp_tune(&mo, &r, &d);
    /* final_change: the latency it saved, measured against the model as it was */
    bool better = st == CP_OK && isfinite(r.final_change) && r.final_change > 0 &&
                  strcmp(r.best_om, path) != 0 && r.best_om[0];
    if (better) {
        char *abs = realpath(r.best_om, NULL);
        snprintf(best, n_best, "%s", abs ? abs : r.best_om);
        free(abs);
        *speed = r.final_baseline_ns > 0 && r.final_best_ns > 0
                     ? r.final_baseline_ns / r.final_best_ns
                     : 1 / (1 - r.final_change);
        cp_tune_progress(o->progress,
                         "flow-tune: node %s's model: latency %.1f%% lower alone: %s\n", node,
                         100 * r.final_change, best);
    } else {
        cp_tune_progress(o->progress, "flow-tune: node %s's model: %s\n", node,
                         st != CP_OK ? d.msg : "nothing better than it is");
    }
    cp_tune_result_release(&r);
    return better;
}

/* ---- the loop ------------------------------------------------------------------------------ */

/* A step that cannot be kept (out of memory) is left out of the report. */
static void step_add(struct cp_flow_tune_result *r, const struct cp_flow_tune_step *s)
{
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    (void)cp_tune_load_step_add(&r->steps, &r->n_steps, s, &ignored);
}

/* Where a flow file derived from `original` goes: beside it (its relative
 * paths hold), hidden, "<dir>/.<stem>.tune-<what>.toml". */
static enum cp_status derived_path(const char *original, const char *what, char *out, size_t n,
                                   struct cp_diag *d)
{
    char *dir = cp_path_dirname(original);
    const char *slash = strrchr(original, '/');
    const char *stem = slash ? slash + 1 : original;
    int len = (int)strcspn(stem, ".");
    int w = snprintf(out, n, "%s/.%.*s.tune-%s.toml", dir ? dir : ".", len, stem, what);
    free(dir);
    return w > 0 && (size_t)w < n
               ? CP_OK
               : cp_diag_set(d, CP_ERR_INVALID, "%s: the path is too long", original);
}

static enum cp_status candidate_path(const char *original, int k, char *out, size_t n,
                                     struct cp_diag *d)
{
    char what[32];
    snprintf(what, sizeof what, "%d", k);
    return derived_path(original, what, out, n, d);
}

enum cp_status cp_flow_tune(const struct cp_flow_tune_opts *o, struct cp_flow_tune_result *r,
                            struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    if (o->target != CP_TARGET_LATENCY && o->target != CP_TARGET_THROUGHPUT)
        return cp_diag_set(d, CP_ERR_USAGE, "a flow is tuned for latency or throughput");
    if (o->pairs < 3 || o->pairs > 64)
        return cp_diag_set(d, CP_ERR_USAGE, "--pairs is 3 to 64");
    if (o->requests < 10 || o->requests > 100000)
        return cp_diag_set(d, CP_ERR_USAGE, "--requests is 10 to 100000 per run");
    enum cp_status st = cp_mkdir_p(o->out_dir, 0755, d);
    if (st != CP_OK)
        return st;
    /* the current flow: a copy beside the original, so its paths hold */
    char cur[1200];
    st = derived_path(o->flow, "current", cur, sizeof cur, d);
    {
        char *dir = cp_path_dirname(o->flow);
        const char *slash = strrchr(o->flow, '/');
        const char *stem = slash ? slash + 1 : o->flow;
        int len = (int)strcspn(stem, ".");
        snprintf(r->best_flow, sizeof r->best_flow, "%.900s/%.*s.tuned.toml", dir ? dir : ".", len,
                 stem);
        free(dir);
    }
    if (st == CP_OK)
        st = cp_flow_patch(o->flow, NULL, 0, cur, d);
    if (st != CP_OK)
        return st;
    int evaluations = 0, round = 0, k = 0;
    double rate = o->rate;
    while (st == CP_OK && evaluations < o->budget) {
        round++;
        char trace[1200], name[32];
        snprintf(name, sizeof name, "round-%d", round);
        struct cp_bottleneck b;
        memset(&b, 0, sizeof b);
        st = profile(cur, o, name, trace, sizeof trace, &b, d);
        if (st != CP_OK)
            break;
        if (round == 1) {
            r->capacity = b.throughput;
            snprintf(r->limiting, sizeof r->limiting, "%s",
                     b.limiting >= 0 ? b.nodes[b.limiting].name : "none");
            if (!(rate > 0))
                rate = (o->target == CP_TARGET_THROUGHPUT ? 1.5 : 0.6) * b.throughput;
            r->rate = rate;
        }
        cp_tune_progress(
            o->progress,
            "flow-tune: round %d: %.1f requests/s flat out, limiting node %s; the workload "
            "%.1f requests/s\n",
            round, b.throughput, b.limiting >= 0 ? b.nodes[b.limiting].name : "none", rate);
        /* the candidates */
        struct cand cands[32];
        size_t nc = 0;
        for (size_t i = 0; i < b.n_problems; i++) {
            const struct cp_bottleneck_problem *p = &b.problems[i];
            if (!p->fix_key[0] || p->node < 0)
                continue;
            char v[32];
            snprintf(v, sizeof v, "%ld", p->fix_value);
            add(cands, &nc, 32, b.nodes[p->node].name, p->fix_key, v, p->kind);
        }
        if (b.limiting >= 0) {
            const struct cp_bottleneck_node *n = &b.nodes[b.limiting];
            char v[32];
            snprintf(v, sizeof v, "%d", n->workers + 1);
            add(cands, &nc, 32, n->name, "workers", v, "limiting node");
            struct cp_flow *f = NULL;
            struct cp_diag fd;
            cp_diag_init(&fd);
            bool inference = strcmp(n->flowunit, "inference") == 0;
            bool loaded = inference && cp_flow_load(cur, &f, &fd) == CP_OK;
            if (loaded && n->batch_size < 64 &&
                batch_settable(cur, f, (size_t)b.limiting, n->batch_size * 2)) {
                snprintf(v, sizeof v, "%d", n->batch_size * 2);
                add(cands, &nc, 32, n->name, "batch_size", v, "limiting node");
            } else if (inference) {
                cp_tune_progress(o->progress,
                                 "flow-tune: node %s's model cannot run at batch %d: no batch_size "
                                 "candidate\n",
                                 n->name, n->batch_size * 2);
            }
            /* a batched node without a batching window: let its batches
             * fill for half a call's time (1..50 ms), so that a call
             * carries more requests; the replay says what it costs in
             * waiting */
            const char *win =
                loaded ? cp_flow_node_attr(f, (size_t)b.limiting, "batch_window_ms") : NULL;
            if (loaded && n->batch_size > 1 && n->calls > 0 && (!win || atol(win) == 0)) {
                double half_call_ms = 1e3 * n->busy_s / (double)n->calls / 2;
                snprintf(v, sizeof v, "%ld", lround(fmin(fmax(half_call_ms, 1), 50)));
                add(cands, &nc, 32, n->name, "batch_window_ms", v, "limiting node");
            }
            cp_flow_free(f);
        }
        if (o->models && round == 1) {
            struct cp_flow *f = NULL;
            if (cp_flow_load(cur, &f, d) == CP_OK) {
                for (size_t i = 0; i < cp_flow_n_nodes(f) && nc < 32; i++) {
                    struct cp_flow_node_info ni;
                    cp_flow_node(f, i, &ni);
                    const char *model = cp_flow_node_attr(f, i, "model");
                    if (strcmp(ni.flowunit, "inference") != 0 || !model ||
                        !cp_path_has_suffix(model, ".om"))
                        continue;
                    char best[1100];
                    double speed = 1;
                    if (!tune_model(o, cur, ni.name, model, best, sizeof best, &speed))
                        continue;
                    add(cands, &nc, 32, ni.name, "model", "", "model tuned");
                    if (nc && strcmp(cands[nc - 1].c.key, "model") == 0 &&
                        strcmp(cands[nc - 1].c.node, ni.name) == 0) {
                        cands[nc - 1].speed = speed;
                        snprintf(cands[nc - 1].model_path, sizeof cands[nc - 1].model_path, "%s",
                                 best);
                    }
                }
            }
            cp_diag_init(d);
            cp_flow_free(f);
        }
        /* predicted by the replay of this round's trace */
        double base_fig = NAN;
        for (size_t i = 0; i < nc; i++) {
            char change[400];
            if (strcmp(cands[i].c.key, "model") == 0)
                snprintf(change, sizeof change, "%s.speed=%.4g", cands[i].c.node, cands[i].speed);
            else
                snprintf(change, sizeof change, "%s.%s=%s", cands[i].c.node, cands[i].c.key,
                         cands[i].c.value);
            struct cp_flow_whatif w;
            struct cp_diag wd;
            cp_diag_init(&wd);
            /* at the workload's rate: a flood's latencies are its queues' */
            if (cp_pipeline_whatif_at(trace, -1, change, rate, o->seed, &w, &wd) == CP_OK) {
                cands[i].predicted = figure(&w.predicted, o->target);
                base_fig = figure(&w.measured, o->target);
            }
        }
        /* best predicted first */
        for (size_t i = 1; i < nc; i++)
            for (size_t j = i; j > 0; j--) {
                double a = cands[j - 1].predicted, c = cands[j].predicted;
                bool swap = o->target == CP_TARGET_THROUGHPUT ? (!(a >= c) && !isnan(c))
                                                              : (!(a <= c) && !isnan(c));
                if (!swap)
                    break;
                struct cand t = cands[j - 1];
                cands[j - 1] = cands[j];
                cands[j] = t;
            }
        cp_bottleneck_release(&b);
        bool accepted = false;
        for (size_t i = 0; i < nc && evaluations < o->budget && !accepted; i++) {
            struct cp_flow_tune_step s;
            memset(&s, 0, sizeof s);
            s.round = round;
            bool model = strcmp(cands[i].c.key, "model") == 0;
            snprintf(s.change, sizeof s.change, "%s.%s=%s", cands[i].c.node, cands[i].c.key,
                     model ? cands[i].model_path : cands[i].c.value);
            snprintf(s.source, sizeof s.source, "%s", cands[i].source);
            s.predicted_pct = isfinite(base_fig) && isfinite(cands[i].predicted) && base_fig > 0
                                  ? 100 * (cands[i].predicted / base_fig - 1)
                                  : NAN;
            /* the replay's prediction of a loss is taken at its word: not measured */
            double harm = o->target == CP_TARGET_THROUGHPUT ? -s.predicted_pct : s.predicted_pct;
            if (isfinite(harm) && harm > o->verdict.threshold_pct) {
                s.verdict = CP_VERDICT_INCONCLUSIVE;
                s.measured_pct = s.ci_lo = s.ci_hi = s.p = NAN;
                snprintf(s.reason, sizeof s.reason,
                         "not measured: the replay predicts it %.1f%% worse", harm);
                cp_tune_progress(o->progress, "flow-tune: skipping %s (%s): %s\n", s.change,
                                 s.source, s.reason);
                step_add(r, &s);
                continue;
            }
            char cand_path[1200];
            struct cp_diag cd;
            cp_diag_init(&cd);
            enum cp_status cs = candidate_path(o->flow, ++k, cand_path, sizeof cand_path, &cd);
            if (cs == CP_OK)
                cs = model ? cp_flow_patch_model(cur, cands[i].c.node, cands[i].model_path,
                                                 cand_path, &cd)
                           : cp_flow_patch(cur, &cands[i].c, 1, cand_path, &cd);
            struct cp_comparison cmp;
            struct cp_tune_load_sample worst;
            if (cs == CP_OK) {
                cp_tune_progress(
                    o->progress,
                    "flow-tune: measuring %s (%s; predicted %+.1f%%) against the current "
                    "flow, %d pairs\n",
                    s.change, s.source, s.predicted_pct, o->pairs);
                cs = compare_flows(cur, cand_path, o, rate, &cmp, &worst, &cd);
            }
            evaluations++;
            cp_tune_load_judge(&s, cs == CP_OK ? &cmp : NULL, cd.msg, &o->constraints, &worst);
            cp_tune_progress(o->progress, "flow-tune:   %s %+.1f%% [%+.1f%%, %+.1f%%] p=%.3g: %s\n",
                             o->target == CP_TARGET_THROUGHPUT ? "throughput" : "mean latency",
                             s.measured_pct, s.ci_lo, s.ci_hi, s.p, s.reason);
            if (s.accepted) {
                accepted = true;
                struct cp_diag rd;
                cp_diag_init(&rd);
                if (rename(cand_path, cur) != 0)
                    (void)cp_diag_set(&rd, CP_ERR_IO, "cannot keep %s", cand_path);
            } else {
                unlink(cand_path);
            }
            step_add(r, &s);
        }
        if (!accepted)
            break;
    }
    r->evaluations = evaluations;
    /* the best against the original, the figure to quote */
    size_t n_acc = 0;
    for (size_t i = 0; i < r->n_steps; i++)
        n_acc += r->steps[i].accepted;
    r->final_pct = r->final_lo = r->final_hi = r->final_p = NAN;
    if (st == CP_OK && n_acc) {
        struct cp_comparison cmp;
        struct cp_tune_load_sample worst;
        struct cp_diag fd;
        cp_diag_init(&fd);
        cp_tune_progress(o->progress, "flow-tune: the tuned flow against the original, %d pairs\n",
                         o->pairs);
        if (compare_flows(o->flow, cur, o, rate, &cmp, &worst, &fd) == CP_OK) {
            r->final_pct = cmp.delta_pct;
            r->final_lo = cmp.ci_lo_pct;
            r->final_hi = cmp.ci_hi_pct;
            r->final_p = cmp.p;
            r->baseline_value = cmp.before;
            r->best_value = cmp.after;
        }
    }
    if (st == CP_OK)
        st = n_acc ? (rename(cur, r->best_flow) == 0
                          ? CP_OK
                          : cp_diag_set(d, CP_ERR_WRITE, "cannot write %s", r->best_flow))
                   : CP_OK;
    if (!n_acc) {
        unlink(cur);
        snprintf(r->best_flow, sizeof r->best_flow, "%s", o->flow);
    }
    return st;
}
