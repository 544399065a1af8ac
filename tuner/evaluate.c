/* Evaluating one point: convert it, open it, check its precision and
 * memory, measure it alone (the baseline) or interleaved against the
 * current best (every candidate). */
#include "tuner/tuner_internal.h"

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
    /* likewise --keep_dtype, --int8_nodes and --quant_ranges: the point's
     * lists, one entry a line */
    struct {
        char *file;
        size_t cap;
        const char *canon, *suffix;
    } lists[] = {
        {cfg.keep_dtype_file, sizeof cfg.keep_dtype_file, cfg.keep_dtype, "keep_dtype"},
        {cfg.int8_nodes_file, sizeof cfg.int8_nodes_file, cfg.int8_nodes, "int8_nodes"},
        {cfg.quant_ranges_file, sizeof cfg.quant_ranges_file, cfg.quant_ranges, "quant_ranges"},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        lists[i].file[0] = '\0';
        if (!lists[i].canon[0] || (i == 2 && !cfg.int8_nodes[0]))
            continue;
        snprintf(lists[i].file, lists[i].cap, "%.1000s/%.40s.%s", c->o->out_dir, name,
                 lists[i].suffix);
        struct cp_buf text;
        cp_buf_init(&text);
        cp_buf_printf(&text, "%s\n", lists[i].canon);
        enum cp_status st = cp_buf_status(&text) == CP_OK
                                ? cp_file_write_atomic(lists[i].file, text.data, text.len, d)
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
    c->r->precision_checks++;
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
    const struct cp_constraints *k = &c->o->constraints;
    for (size_t i = 0; st == CP_OK && i < k->n; i++) {
        c->con_loss[i] = *loss;
        if (k->items[i].kind != CP_CONSTRAINT_PRECISION_LOSS || !k->items[i].output[0])
            continue;
        size_t o = 0;
        while (o < n && strcmp(ref->out[o].name, k->items[i].output) != 0)
            o++;
        if (o < n) {
            c->con_loss[i] = cp_precision_loss(&diffs[o], 1);
            continue;
        }
        struct cp_buf names;
        cp_buf_init(&names);
        for (size_t j = 0; j < n; j++)
            cp_buf_printf(&names, "%s%s", j ? ", " : "", ref->out[j].name);
        st = cp_diag_set(d, CP_ERR_USAGE,
                         "--constraints: precision_loss[%s]: the model has no output '%s' (its "
                         "outputs: %s)",
                         k->items[i].output, k->items[i].output, names.data ? names.data : "");
        cp_buf_release(&names);
    }
    free(diffs);
    outputs_release(got, n);
    return st;
}

bool cp_tune_precision_breaks(const struct cp_tune_ctx *c, char *why, size_t n)
{
    const struct cp_constraints *k = &c->o->constraints;
    for (size_t i = 0; i < k->n; i++) {
        const struct cp_constraint *one = &k->items[i];
        if (one->kind != CP_CONSTRAINT_PRECISION_LOSS || !isfinite(c->con_loss[i]) ||
            cp_constraint_holds(one, c->con_loss[i]))
            continue;
        char v[48], lim[48], what[CP_CONSTRAINT_OUTPUT_MAX + 32];
        cp_constraint_format_value(one->kind, c->con_loss[i], v);
        cp_constraint_format_value(one->kind, one->value, lim);
        snprintf(what, sizeof what, "precision_loss%s%s%s", one->output[0] ? "[" : "", one->output,
                 one->output[0] ? "]" : "");
        snprintf(why, n, "%s %s breaks %s%s%s", what, v, what, cp_constraint_op_text(one->op), lim);
        return true;
    }
    return false;
}

double cp_tune_precision_share(const struct cp_tune_ctx *c)
{
    const struct cp_constraints *k = &c->o->constraints;
    double share = NAN;
    for (size_t i = 0; i < k->n; i++) {
        if (k->items[i].kind != CP_CONSTRAINT_PRECISION_LOSS)
            continue;
        double s = k->items[i].value > 0 ? c->con_loss[i] / k->items[i].value : INFINITY;
        if (isnan(s))
            s = INFINITY;
        share = isnan(share) || s > share ? s : share;
    }
    return share;
}

/* The measurement policy of every tuning evaluation: the engine's, with
 * the tuner's warm-up and rounds, and its interrupt flag so that Ctrl-C
 * stops inside a measurement too. */
void cp_tune_policy(const struct cp_tune_ctx *c, struct cp_bench_request *q)
{
    q->policy.warmup = c->o->warmup;
    q->policy.iterations = c->o->rounds;
    q->policy.interrupt = c->o->interrupt;
    q->policy.priority = c->o->priority;
    /* A tuning session makes dozens of measurements: on a busy machine,
     * wait for undisturbed rounds a little, then decide on what there is
     * (interleaving keeps the comparison fair). */
    q->policy.time_limit_min_s = CP_TUNE_MIN_TIME_LIMIT_S;
    q->inputs = c->o->inputs;
    q->n_inputs = c->o->n_inputs;
    q->seed = c->o->seed;
}

static void session_of(const struct cp_tune_point *p, struct cp_session_opts *so)
{
    so->batch = p->batch;
    so->threads = p->threads;
    so->buffer_optimize = -1;
}

/* A measurement stopped by Ctrl-C says nothing about the candidate. */
static enum cp_status check_interrupt(const struct cp_bench_result *r, struct cp_diag *d)
{
    if (r->m.stop == CP_MEASURE_STOP_INTERRUPTED)
        return cp_diag_set(d, CP_ERR_INVALID, "interrupted during the measurement");
    return CP_OK;
}

enum cp_status cp_tune_bench(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                             const char *om_path, const char *trace_path, double *med,
                             double *items_s, uint64_t *memory, int64_t *run_id, struct cp_diag *d)
{
    struct cp_bench_request q;
    cp_bench_request_init(&q);
    cp_tune_policy(c, &q);
    q.models[0] = om_path;
    session_of(p, &q.session[0]);
    q.trace_path = trace_path;
    q.kind = "tune";
    struct cp_bench_result r;
    enum cp_status st = cp_bench_models(&q, &r, d);
    if (st == CP_OK)
        st = check_interrupt(&r, d);
    if (st == CP_OK) {
        /* the undisturbed iterations, as validate and the features read them */
        const struct cp_summary *sm = r.undisturbed[0].n ? &r.undisturbed[0] : &r.all[0];
        *med = sm->median;
        *items_s = (double)r.items[0] * 1e9 / *med;
        *memory = r.mem[0].weight_bytes + r.mem[0].arena_bytes;
        *run_id = r.run_ids[0];
    }
    cp_bench_result_release(&r);
    return st;
}

/* The verdict on b against a from their paired rounds m, in the target's
 * metric, into step (cp_tune_ab). lat: the latency comparison; items:
 * what one run of each processes. */
/* A thread-count win on a mostly disturbed measurement is held back
 * (CP_TUNE_LOADED_SHARE). */
static void hold_back_loaded(const struct cp_tune_point *a, const struct cp_tune_point *b,
                             const struct cp_measurement *m, struct cp_tune_step *step,
                             bool *improved)
{
    step->loaded = false;
    step->undisturbed_share = m->probed && m->n ? (double)m->n_undisturbed / (double)m->n : NAN;
    if (*improved && a->threads != b->threads && step->undisturbed_share < CP_TUNE_LOADED_SHARE) {
        *improved = false;
        step->loaded = true;
    }
}

/* The verdict on the change itself, in the target's direction. */
static enum cp_status judge_change(const struct cp_tune_opts *o, const struct cp_measurement *m,
                                   const struct cp_comparison *lat, const int64_t items[2],
                                   struct cp_tune_step *step, bool *improved, struct cp_diag *d)
{
    step->before_ns = lat->before;
    step->after_ns = lat->after;
    step->p = lat->p;
    /* gains read "how much better": latency saved, or throughput won */
    step->measured_gain = -lat->delta_pct / 100;
    step->ci_lo = -lat->ci_hi_pct / 100;
    step->ci_hi = -lat->ci_lo_pct / 100;
    if (o->target == CP_TARGET_LATENCY) {
        *improved = lat->verdict == CP_VERDICT_IMPROVED;
        return CP_OK;
    }
    if (o->target == CP_TARGET_MEMORY) {
        *improved = lat->verdict != CP_VERDICT_REGRESSED;
        return CP_OK;
    }
    struct cp_comparison thr;
    enum cp_status st =
        cp_measurement_compare(m, 0, 1, items[0], items[1], &o->verdict, &thr, NULL, d);
    if (st == CP_OK) {
        step->measured_gain = thr.delta_pct / 100;
        step->ci_lo = thr.ci_lo_pct / 100;
        step->ci_hi = thr.ci_hi_pct / 100;
        step->p = thr.p;
        *improved = thr.verdict == CP_VERDICT_IMPROVED;
    }
    return st;
}

static enum cp_status judge(const struct cp_tune_opts *o, const struct cp_tune_point *a,
                            const struct cp_tune_point *b, const struct cp_measurement *m,
                            const struct cp_comparison *lat, const int64_t items[2],
                            struct cp_tune_step *step, bool *improved, struct cp_diag *d)
{
    enum cp_status st = judge_change(o, m, lat, items, step, improved, d);
    if (st == CP_OK)
        hold_back_loaded(a, b, m, step, improved);
    return st;
}

enum cp_tune_why_not cp_tune_why_not(const struct cp_tune_opts *o, const struct cp_tune_step *s)
{
    if (s->loaded)
        return CP_WHY_NOT_LOADED;
    bool significant = s->p < o->verdict.alpha && !(s->ci_lo <= 0 && s->ci_hi >= 0);
    bool large = fabs(100 * s->measured_gain) >= o->verdict.threshold_pct;
    if (significant && large && s->measured_gain < 0)
        return CP_WHY_NOT_WORSE;
    if (significant)
        return CP_WHY_NOT_BELOW_THRESHOLD;
    if (s->stopped_early)
        return CP_WHY_NOT_CANNOT_WIN;
    return large ? CP_WHY_NOT_INCONCLUSIVE : CP_WHY_NOT_NO_CHANGE;
}

const char *cp_tune_why_not_text(enum cp_tune_why_not w)
{
    static const char *const text[] = {"significantly worse",
                                       "it cannot reach the threshold",
                                       "a real change, but below the threshold",
                                       "not significant (inconclusive)",
                                       "no significant change",
                                       ("a thread-count win on a loaded machine (most rounds "
                                        "were disturbed): it would not carry over, so it is not "
                                        "taken")};
    return (unsigned)w < sizeof text / sizeof *text ? text[w] : "?";
}

/* ---- sequential looks ------------------------------------------------------------ */

bool cp_tune_futile(struct cp_tune_futility *f, const struct cp_measurement *so_far)
{
    if (f->target == CP_TARGET_MEMORY || f->looks >= f->looks_max)
        return false;
    f->looks++;
    if (so_far->n_subjects != 2 || so_far->n_undisturbed < CP_TUNE_LOOK_MIN_ROUNDS)
        return false; /* the look is spent all the same: the bound stays honest */
    struct cp_verdict_opts vo = f->verdict;
    vo.boot.level = 1 - 2 * CP_TUNE_FUTILITY_BETA / f->looks_max;
    struct cp_comparison c;
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    bool thr = f->target == CP_TARGET_THROUGHPUT;
    if (cp_measurement_compare(so_far, 0, 1, thr ? f->items[0] : 0, thr ? f->items[1] : 0, &vo, &c,
                               NULL, &ignored) != CP_OK ||
        !isfinite(c.ci_lo_pct) || !isfinite(c.ci_hi_pct))
        return false;
    /* the gain's optimistic end: latency saved at the interval's low delta,
     * throughput won at its high one */
    f->upper = thr ? c.ci_hi_pct / 100 : -c.ci_lo_pct / 100;
    if (f->upper < vo.threshold_pct / 100) {
        f->stopped_at = (int64_t)so_far->n;
        return true;
    }
    return false;
}

static bool look_adapter(void *ctx, const struct cp_measurement *so_far)
{
    return cp_tune_futile(ctx, so_far);
}

static void futility_init(const struct cp_tune_ctx *c, struct cp_tune_futility *f)
{
    memset(f, 0, sizeof *f);
    f->target = c->o->target;
    f->verdict = c->o->verdict;
    f->looks_max = CP_TUNE_LOOK_BLOCKS - 1;
    f->upper = NAN;
}

static int64_t look_every(const struct cp_tune_ctx *c)
{
    int64_t b = c->o->rounds / CP_TUNE_LOOK_BLOCKS;
    return b < 10 ? 10 : b;
}

/* The looks on given rounds (o->measure): each block's prefix, as the
 * engine would have shown it; a futile look cuts the rounds there. */
static enum cp_status looks_on_given(const struct cp_tune_ctx *c, struct cp_measurement *m,
                                     struct cp_tune_futility *f, struct cp_diag *d)
{
    int64_t every = look_every(c);
    for (int64_t n = every; n < (int64_t)m->n && f->looks < f->looks_max; n += every) {
        struct cp_measurement view = *m;
        view.n = (size_t)n;
        view.n_undisturbed = 0;
        for (size_t r = 0; r < view.n; r++)
            view.n_undisturbed += !m->undisturbed || m->undisturbed[r];
        bool *flags = NULL;
        if (!m->undisturbed) {
            if (!(flags = cp_calloc(view.n, sizeof *flags)))
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            for (size_t r = 0; r < view.n; r++)
                flags[r] = true;
            view.undisturbed = flags;
        }
        bool stop = cp_tune_futile(f, &view);
        free(flags);
        if (stop) {
            m->n = (size_t)n;
            m->n_undisturbed = view.n_undisturbed;
            m->stop = CP_MEASURE_STOP_EARLY;
            break;
        }
    }
    return CP_OK;
}

/* The engine's measurement (runner/bench.h). */
static enum cp_status ab_measured(struct cp_tune_ctx *c, enum cp_tune_ab_kind kind,
                                  const struct cp_tune_point *a, const char *a_om,
                                  const struct cp_tune_point *b, const char *b_om,
                                  const char *trace_path, struct cp_tune_step *step, int64_t *b_run,
                                  bool *improved, struct cp_measurement *res, struct cp_diag *d)
{
    const struct cp_tune_opts *o = c->o;
    struct cp_bench_request q;
    cp_bench_request_init(&q);
    cp_tune_policy(c, &q);
    struct cp_tune_futility fut;
    futility_init(c, &fut);
    if (kind == CP_TUNE_AB_CANDIDATE) {
        /* items per run are known once the plans are open: batch or 1 */
        fut.items[0] = a->batch > 0 ? a->batch : 1;
        fut.items[1] = b->batch > 0 ? b->batch : 1;
        q.policy.look_fn = look_adapter;
        q.policy.look_ctx = &fut;
        q.policy.look_every = look_every(c);
    }
    q.models[0] = a_om;
    q.models[1] = b_om;
    session_of(a, &q.session[0]);
    session_of(b, &q.session[1]);
    /* a candidate may change the batch, and so the inputs' shapes */
    q.same_inputs = false;
    q.verdict = o->verdict;
    q.trace_path = trace_path;
    struct cp_bench_result r;
    enum cp_status st = cp_bench_models(&q, &r, d);
    if (st == CP_OK)
        st = check_interrupt(&r, d);
    if (st == CP_OK)
        st = judge(o, a, b, &r.m, &r.cmp, r.items, step, improved, d);
    if (st == CP_OK) {
        step->rounds = (int64_t)r.m.n;
        step->stopped_early = r.m.stop == CP_MEASURE_STOP_EARLY;
        step->upper = fut.upper;
        step->memory_bytes = r.mem[1].weight_bytes + r.mem[1].arena_bytes;
        *b_run = r.run_ids[1];
        *res = r.m; /* the paired samples go to the knowledge base */
        memset(&r.m, 0, sizeof r.m);
    }
    cp_bench_result_release(&r);
    return st;
}

/* What o->measure gave must be a measurement the verdict can read. */
static enum cp_status check_given(const struct cp_measurement *m, struct cp_diag *d)
{
    if (m->n_subjects != 2 || m->n < 2 || !m->ns[0] || !m->ns[1])
        return cp_diag_set(d, CP_ERR_INVALID,
                           "the measurement given has %zu subjects and %zu rounds; a verdict "
                           "needs 2 subjects with at least 2 rounds each",
                           m->n_subjects, m->n);
    if (m->probed && (!m->probe_ns || !m->undisturbed || m->n_undisturbed > m->n))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "the measurement given is probed but lacks its probe readings");
    if (m->stop == CP_MEASURE_STOP_INTERRUPTED)
        return cp_diag_set(d, CP_ERR_INVALID, "interrupted during the measurement");
    return CP_OK;
}

/* A measurement given by o->measure, judged and recorded as the engine's
 * would be: the verdict, each model's memory and items from its plan, and
 * the trace (two runs of kind "tune-replay", paired as an A/B trace). */
static enum cp_status ab_given(struct cp_tune_ctx *c, enum cp_tune_ab_kind kind,
                               const struct cp_tune_point *a, const char *a_om,
                               const struct cp_tune_point *b, const char *b_om,
                               const char *trace_path, struct cp_tune_step *step, int64_t *b_run,
                               bool *improved, struct cp_measurement *res, struct cp_diag *d)
{
    const struct cp_tune_opts *o = c->o;
    struct cp_tune_ab_request q = {
        .kind = kind,
        .step = step->step,
        .a = a,
        .b = b,
        .a_om = a_om,
        .b_om = b_om,
        .rounds = o->rounds,
        .warmup = o->warmup,
    };
    struct cp_measurement m;
    memset(&m, 0, sizeof m);
    struct cp_session s[2];
    memset(s, 0, sizeof s);
    struct cp_trace_store *store = NULL;
    const struct cp_tune_point *pts[2] = {a, b};
    const char *oms[2] = {a_om, b_om};
    enum cp_status st = o->measure(o->measure_ctx, &q, &m, d);
    if (st == CP_OK)
        st = check_given(&m, d);
    struct cp_tune_futility fut;
    futility_init(c, &fut);
    if (st == CP_OK && kind == CP_TUNE_AB_CANDIDATE) {
        fut.items[0] = a->batch > 0 ? a->batch : 1;
        fut.items[1] = b->batch > 0 ? b->batch : 1;
        st = looks_on_given(c, &m, &fut, d);
    }
    for (size_t i = 0; i < 2 && st == CP_OK; i++) {
        struct cp_session_opts so = {.model_path = oms[i]};
        session_of(pts[i], &so);
        st = cp_session_open(&s[i], &so, d);
    }
    struct cp_comparison lat;
    if (st == CP_OK)
        st = cp_measurement_compare(&m, 0, 1, 0, 0, &o->verdict, &lat, NULL, d);
    int64_t items[2] = {0, 0};
    for (size_t i = 0; i < 2 && st == CP_OK; i++)
        items[i] = cp_session_items_per_run(s[i].plan, pts[i]->batch);
    if (st == CP_OK)
        st = judge(o, a, b, &m, &lat, items, step, improved, d);
    if (st == CP_OK)
        st = cp_trace_store_open(trace_path, &store, d);
    if (st == CP_OK) {
        struct cp_measure_record rec[2];
        for (size_t i = 0; i < 2; i++)
            rec[i] = (struct cp_measure_record){
                .session = &s[i], .model_path = oms[i], .batch = pts[i]->batch};
        int64_t runs[2] = {0, 0};
        st = cp_measure_store(store, "tune-replay", rec, &m, runs, d);
        *b_run = runs[1];
    }
    if (st == CP_OK) {
        step->rounds = (int64_t)m.n;
        step->stopped_early = m.stop == CP_MEASURE_STOP_EARLY;
        step->upper = fut.upper;
        step->memory_bytes = cp_tune_memory(&s[1]);
        *res = m;
        memset(&m, 0, sizeof m);
    }
    cp_trace_store_close(store);
    cp_session_close(&s[0]);
    cp_session_close(&s[1]);
    cp_measurement_release(&m);
    return st;
}

enum cp_status cp_tune_ab(struct cp_tune_ctx *c, enum cp_tune_ab_kind kind,
                          const struct cp_tune_point *a, const char *a_om,
                          const struct cp_tune_point *b, const char *b_om, const char *trace_path,
                          struct cp_tune_step *step, int64_t *b_run, bool *improved,
                          struct cp_measurement *res, struct cp_diag *d)
{
    *improved = false;
    memset(res, 0, sizeof *res);
    if (c->o->measure)
        return ab_given(c, kind, a, a_om, b, b_om, trace_path, step, b_run, improved, res, d);
    return ab_measured(c, kind, a, a_om, b, b_om, trace_path, step, b_run, improved, res, d);
}
