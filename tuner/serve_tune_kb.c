/* `tune MODEL --serve` in the knowledge base (docs/tuning.md, "Tuning a
 * served model"). A run is a session of its own; each measured change is a
 * candidate whose delta names the knobs it set, in absolute values
 * ("serve:max_batch=2 serve:window_ms=0.9"), with its measured gain, CI
 * and p; and its outcome is a strategy of the model on this hardware, held
 * or not. A later run on this model, or on one at least 0.5 similar, tries
 * first the knobs that held there (the hints). The model tuner reads the
 * same strategies and skips these, which are no conversion change. */
#include "knowledge/kb.h"
#include "tuner/tuner_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERVE_PREFIX "serve:"

enum cp_status cp_serve_kb_open(const char *path, const char *model, struct cp_serve_kb *k,
                                struct cp_diag *d)
{
    memset(k, 0, sizeof *k);
    enum cp_status st = cp_kb_open(path, &k->kb, d);
    if (st == CP_OK)
        st = cp_tune_fingerprint_model(k->kb, model, &k->fp, &k->approximate, d);
    cp_kb_hardware_detect(&k->hw);
    if (st == CP_OK)
        st = cp_kb_model_upsert(k->kb, &k->fp, &k->model_id, d);
    if (st == CP_OK)
        st = cp_kb_hardware_upsert(k->kb, &k->hw, &k->hw_id, d);
    if (st != CP_OK)
        cp_serve_kb_close(k);
    return st;
}

void cp_serve_kb_close(struct cp_serve_kb *k)
{
    cp_kb_close(k->kb);
    cp_kb_fingerprint_release(&k->fp);
    memset(k, 0, sizeof *k);
}

void cp_serve_kb_delta(const struct cp_serve_knobs *a, const struct cp_serve_knobs *b, char *out,
                       size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    if (a->max_batch != b->max_batch)
        k += (size_t)snprintf(out, n, SERVE_PREFIX "max_batch=%d", b->max_batch);
    if (k < n && fabs(a->window_ms - b->window_ms) > 1e-9)
        k += (size_t)snprintf(out + k, n - k, "%s" SERVE_PREFIX "window_ms=%g", k ? " " : "",
                              b->window_ms);
    if (k < n && a->threads != b->threads)
        snprintf(out + k, n - k, "%s" SERVE_PREFIX "threads=%d", k ? " " : "", b->threads);
}

bool cp_serve_kb_apply(const char *delta, const struct cp_serve_knobs *cur, int cores,
                       bool batch_ok, struct cp_serve_knobs *out)
{
    *out = *cur;
    char copy[256];
    if (strncmp(delta, SERVE_PREFIX, strlen(SERVE_PREFIX)) != 0 ||
        (size_t)snprintf(copy, sizeof copy, "%s", delta) >= sizeof copy)
        return false;
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(t, '=');
        if (strncmp(t, SERVE_PREFIX, strlen(SERVE_PREFIX)) != 0 || !eq)
            return false;
        *eq = '\0';
        const char *key = t + strlen(SERVE_PREFIX);
        char *end = NULL;
        double v = strtod(eq + 1, &end);
        if (end == eq + 1 || *end || !isfinite(v))
            return false;
        if (strcmp(key, "max_batch") == 0 && v == floor(v) && v >= 1 && v <= 64)
            out->max_batch = (int)v;
        else if (strcmp(key, "window_ms") == 0 && v >= 0 && v <= 50)
            out->window_ms = v;
        else if (strcmp(key, "threads") == 0 && v == floor(v) && v >= 1 && v <= cores)
            out->threads = (int)v;
        else
            return false;
    }
    if (out->max_batch == 1)
        out->window_ms = 0;
    if (out->max_batch > 1 && !batch_ok)
        return false;
    return !cp_serve_knobs_equal(out, cur);
}

enum cp_status cp_serve_kb_hints(struct cp_serve_kb *k, struct cp_kb_strategy_hit **hits, size_t *n,
                                 struct cp_diag *d)
{
    *hits = NULL;
    *n = 0;
    struct cp_kb_strategy_hit *all = NULL;
    size_t m = 0;
    enum cp_status st = cp_kb_query_strategies(
        k->kb, &k->fp, &k->hw, CP_TUNE_HISTORY_MIN_SIMILARITY, false, 64, &all, &m, d);
    if (st != CP_OK)
        return st;
    /* keep the serving knobs, in the query's order (its score) */
    size_t kept = 0;
    for (size_t i = 0; i < m; i++) {
        if (strncmp(all[i].delta, SERVE_PREFIX, strlen(SERVE_PREFIX)) == 0) {
            all[kept++] = all[i];
        } else {
            free(all[i].delta);
            free(all[i].models);
        }
    }
    if (kept == 0) {
        free(all);
        return CP_OK;
    }
    *hits = all;
    *n = kept;
    return CP_OK;
}

/* {"serve":{"max_batch":2,"batch_window_ms":0.9,"threads":2}}: the knobs
 * as the result's JSON gives them (cp_serve_knobs_json). */
static void knobs_json(const struct cp_serve_knobs *k, struct cp_buf *b)
{
    json_t *o = json_object();
    if (!o || !cp_json_set(o, "serve", cp_serve_knobs_json(k)) ||
        cp_json_dump(o, false, b) != CP_OK)
        b->failed = true;
    json_decref(o);
}

enum cp_status cp_serve_kb_begin(struct cp_serve_kb *k, const struct cp_serve_tune_opts *o,
                                 const struct cp_serve_knobs *start, struct cp_diag *d)
{
    struct cp_buf kb, ct, key;
    cp_buf_init(&kb);
    cp_buf_init(&ct);
    cp_buf_init(&key);
    knobs_json(start, &kb);
    cp_constraints_format(&o->constraints, &ct);
    /* never resumed: the key only has to be its own */
    cp_buf_printf(&key, "serve|%s|%s|%s|%s|%llu", o->model, cp_target_name(o->target),
                  ct.data ? ct.data : "", k->hw.signature, (unsigned long long)cp_clock_ns());
    char hash[33];
    cp_hash128_hex(key.data ? key.data : "", key.len, hash);
    struct cp_kb_session s = {
        .key = hash,
        .model_id = k->model_id,
        .hw_id = k->hw_id,
        .model_path = (char *)o->model,
        .target = (char *)cp_target_name(o->target),
        .constraints = ct.data ? ct.data : "",
        .status = "running",
        .baseline_config_json = kb.data,
        .best_config_json = kb.data,
        .budget = o->budget,
        .baseline_median_ns = NAN,
        .best_median_ns = NAN,
        .out_dir = (char *)o->out_dir,
    };
    enum cp_status st =
        cp_buf_status(&kb) == CP_OK && cp_buf_status(&ct) == CP_OK && cp_buf_status(&key) == CP_OK
            ? cp_kb_session_begin(k->kb, &s, &k->session_id, d)
            : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    cp_buf_release(&kb);
    cp_buf_release(&ct);
    cp_buf_release(&key);
    struct cp_kb_candidate base = {.session_id = k->session_id,
                                   .step = 0,
                                   .delta = "",
                                   .source = "baseline",
                                   .status = CP_STEP_BASELINE,
                                   .reason = "the starting knobs",
                                   .expected_gain = NAN,
                                   .measured_gain = NAN,
                                   .ci_lo = NAN,
                                   .ci_hi = NAN,
                                   .p = NAN,
                                   .precision_loss = NAN,
                                   .median_ns = NAN,
                                   .throughput = NAN};
    struct cp_buf cj;
    cp_buf_init(&cj);
    knobs_json(start, &cj);
    base.config_json = cj.data;
    base.om_path = (char *)o->model;
    struct cp_kb_step ks = {.candidate = &base};
    int64_t id = 0;
    if (st == CP_OK)
        st = cp_buf_status(&cj) == CP_OK ? cp_kb_step_record(k->kb, &ks, &id, d)
                                         : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    cp_buf_release(&cj);
    return st;
}

enum cp_status cp_serve_kb_step(struct cp_serve_kb *k, const struct cp_serve_tune_opts *o, int step,
                                const struct cp_serve_knobs *from, const struct cp_serve_knobs *to,
                                const struct cp_flow_tune_step *s, struct cp_diag *d)
{
    char delta[256];
    cp_serve_kb_delta(from, to, delta, sizeof delta);
    bool thr = o->target == CP_TARGET_THROUGHPUT;
    bool measured = isfinite(s->measured_pct);
    /* gains are "how much better": latency saved, or throughput won */
    double sign = thr ? 1 : -1;
    struct cp_buf cj;
    cp_buf_init(&cj);
    knobs_json(to, &cj);
    struct cp_kb_candidate c = {
        .session_id = k->session_id,
        .step = step,
        .delta = delta,
        .source = "serve",
        .config_json = cj.data,
        .om_path = (char *)o->model,
        .status = s->accepted ? CP_STEP_ACCEPTED
                  : measured  ? CP_STEP_REJECTED
                              : CP_STEP_FAILED,
        .reason = (char *)s->reason,
        .expected_gain = NAN,
        .measured_gain = measured ? sign * s->measured_pct / 100 : NAN,
        .ci_lo = measured ? (thr ? s->ci_lo : -s->ci_hi) / 100 : NAN,
        .ci_hi = measured ? (thr ? s->ci_hi : -s->ci_lo) / 100 : NAN,
        .p = s->p,
        .precision_loss = NAN,
        .median_ns = !thr && measured ? s->after * 1e6 : NAN,
        .throughput = thr && measured ? s->after : NAN,
    };
    struct cp_kb_step ks = {.candidate = &c,
                            .record_strategy = measured,
                            .model_id = k->model_id,
                            .hw_id = k->hw_id,
                            .held = s->accepted};
    int64_t id = 0;
    enum cp_status st = cp_buf_status(&cj) == CP_OK ? cp_kb_step_record(k->kb, &ks, &id, d)
                                                    : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    cp_buf_release(&cj);
    return st;
}

enum cp_status cp_serve_kb_finish(struct cp_serve_kb *k, const struct cp_serve_tune_opts *o,
                                  const struct cp_serve_tune_result *r, struct cp_diag *d)
{
    struct cp_kb_session s;
    enum cp_status st = cp_kb_session_get(k->kb, k->session_id, &s, d);
    if (st != CP_OK)
        return st;
    struct cp_buf bj;
    cp_buf_init(&bj);
    knobs_json(&r->best, &bj);
    bool thr = o->target == CP_TARGET_THROUGHPUT;
    struct cp_kb_session u = s;
    u.status = "done";
    u.evaluations = r->evaluations;
    u.best_config_json = bj.data;
    u.stop_reason = (char *)r->stop_reason;
    /* the final measurement's sides, for a latency target (ms) */
    if (!thr && isfinite(r->final_pct)) {
        u.baseline_median_ns = r->baseline_value * 1e6;
        u.best_median_ns = r->best_value * 1e6;
    }
    st = cp_buf_status(&bj) == CP_OK ? cp_kb_session_update(k->kb, &u, d)
                                     : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    cp_buf_release(&bj);
    cp_kb_session_release(&s);
    return st;
}
