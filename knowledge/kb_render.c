/* Renderings of what the tuner learned: the JSON and the text tables that
 * `cannprof kb` prints (knowledge/kb_tuning.h, "renderings"). */
#include "core/json.h"
#include "knowledge/kb_tuning.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A string, or null when there is none. */
static json_t *str_or_null(const char *s)
{
    return s ? cp_json_str(s) : json_null();
}

static const char *or_dash(const char *s)
{
    return s && *s ? s : "-";
}

/* "x.xxx" milliseconds of a value in nanoseconds, "-" when unknown. */
static void ms_or_dash(char out[32], double ns)
{
    if (isnan(ns))
        snprintf(out, 32, "-");
    else
        snprintf(out, 32, "%.3f", ns / 1e6);
}

/* "+x.x%" of a fraction, "-" when unknown. */
static void pct_or_dash(char out[32], double frac)
{
    if (isnan(frac))
        snprintf(out, 32, "-");
    else
        snprintf(out, 32, "%+.1f%%", frac * 100);
}

double cp_kb_session_delta_pct(const struct cp_kb_session *s)
{
    if (isnan(s->baseline_median_ns) || isnan(s->best_median_ns) || s->baseline_median_ns <= 0)
        return NAN;
    return (s->best_median_ns - s->baseline_median_ns) / s->baseline_median_ns * 100;
}

/* ---- fingerprints and strategies ------------------------------------------- */

json_t *cp_kb_fingerprint_json(const struct cp_kb_fingerprint *fp)
{
    json_t *o = json_object(), *pat = json_object();
    bool ok = o && pat && cp_json_set_bool(pat, "attention", fp->has_attention) &&
              cp_json_set_bool(pat, "conv", fp->has_conv) &&
              cp_json_set_bool(pat, "layernorm", fp->has_layernorm) &&
              cp_json_set_bool(pat, "groupnorm", fp->has_groupnorm) &&
              cp_json_set_bool(pat, "batchnorm", fp->has_batchnorm) &&
              cp_json_set_bool(pat, "gelu", fp->has_gelu) && cp_json_set_str(o, "name", fp->name) &&
              cp_json_set_str(o, "class", fp->model_class) &&
              cp_json_set_str(o, "structure_hash", fp->structure_hash) &&
              cp_json_set_str(o, "source_hash", fp->source_hash) &&
              cp_json_set_int(o, "params", fp->params) && cp_json_set_num(o, "flops", fp->flops) &&
              cp_json_set_int(o, "nodes", fp->n_nodes);
    if (ok) {
        ok = cp_json_set(o, "patterns", pat);
        pat = NULL;
    }
    ok = ok && cp_json_set(o, "op_histogram", cp_json_embed(fp->op_histogram_json)) &&
         cp_json_set(o, "inputs", cp_json_embed(fp->inputs_json));
    json_decref(pat);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

/* "a,b,c" as ["a","b","c"] */
static json_t *names_json(const char *list)
{
    json_t *arr = json_array();
    for (const char *p = list; arr && p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!cp_json_push(arr, cp_json_strn(p, len))) {
            json_decref(arr);
            return NULL;
        }
        p = comma ? comma + 1 : p + len;
    }
    return arr;
}

json_t *cp_kb_strategies_json(const struct cp_kb_fingerprint *fp, const struct cp_kb_hardware *hw,
                              double min_sim, const struct cp_kb_strategy_hit *h, size_t n)
{
    json_t *j = json_object(), *arr = json_array();
    bool ok = j && arr;
    for (size_t i = 0; ok && i < n; i++) {
        json_t *o = json_object();
        ok = o && cp_json_set_str(o, "delta", h[i].delta) &&
             cp_json_set_num(o, "mean_gain", h[i].mean_gain) &&
             cp_json_set_num(o, "sd_gain", h[i].sd_gain) &&
             cp_json_set_int(o, "held", h[i].count) && cp_json_set_int(o, "tried", h[i].tried) &&
             cp_json_set_num(o, "similarity", h[i].similarity) &&
             cp_json_set_num(o, "score", h[i].score) &&
             cp_json_set(o, "models", names_json(h[i].models));
        if (ok)
            ok = cp_json_push(arr, o); /* steals o */
        else
            json_decref(o);
    }
    ok = ok && cp_json_set(j, "model", cp_kb_fingerprint_json(fp)) &&
         cp_json_set(j, "hardware", hw ? cp_json_str(hw->signature) : json_null()) &&
         cp_json_set_num(j, "min_similarity", min_sim);
    if (ok) {
        ok = cp_json_set(j, "strategies", arr);
        arr = NULL;
    }
    json_decref(arr);
    if (ok)
        return j;
    json_decref(j);
    return NULL;
}

void cp_kb_render_strategies(struct cp_buf *b, const struct cp_kb_fingerprint *fp,
                             const struct cp_kb_hardware *hw, double min_sim,
                             const struct cp_kb_strategy_hit *h, size_t n)
{
    char params[32], flops[32];
    cp_format_si((double)fp->params, params);
    cp_format_si(fp->flops, flops);
    cp_buf_printf(b, "model:    %s (%s; %d nodes, %s parameters, %sFLOP; structure %.12s)\n",
                  fp->name, fp->model_class, fp->n_nodes, params, flops, fp->structure_hash);
    if (hw)
        cp_buf_printf(b, "hardware: %s (%s, %d cores)\n", hw->signature, hw->cpu_model, hw->cores);
    else
        cp_buf_printf(b, "hardware: any\n");
    if (n == 0) {
        cp_buf_printf(b,
                      "\nno change has held on a model at least %.2f similar yet; run "
                      "'cannprof tune' to teach the knowledge base\n",
                      min_sim);
        return;
    }
    cp_buf_printf(b, "\nchanges that held on similar models (similarity >= %.2f), best first:\n\n",
                  min_sim);
    cp_buf_printf(b, "%3s  %-44s %18s %10s %6s  %s\n", "#", "change", "latency gain", "held/tried",
                  "sim", "models");
    for (size_t i = 0; i < n; i++) {
        char gain[48];
        if (isnan(h[i].mean_gain))
            snprintf(gain, sizeof gain, "?");
        else
            snprintf(gain, sizeof gain, "%+.1f%% ± %.1f%%", h[i].mean_gain * 100,
                     (isnan(h[i].sd_gain) ? 0 : h[i].sd_gain) * 100);
        char ratio[24];
        snprintf(ratio, sizeof ratio, "%d/%d", h[i].count, h[i].tried);
        cp_buf_printf(b, "%3zu  %-44s %18s %10s %6.2f  %s\n", i + 1, h[i].delta, gain, ratio,
                      h[i].similarity, h[i].models);
    }
}

/* ---- sessions and candidates ----------------------------------------------- */

json_t *cp_kb_session_json(const struct cp_kb_session *s, bool full)
{
    json_t *o = json_object();
    bool ok = o && cp_json_set_int(o, "id", s->id) && cp_json_set(o, "uid", str_or_null(s->uid)) &&
              cp_json_set(o, "key", str_or_null(s->key)) &&
              cp_json_set(o, "model", str_or_null(s->model_name)) &&
              cp_json_set(o, "model_path", str_or_null(s->model_path)) &&
              cp_json_set(o, "hardware", str_or_null(s->hw_signature)) &&
              cp_json_set(o, "target", str_or_null(s->target)) &&
              cp_json_set(o, "constraints", str_or_null(s->constraints)) &&
              cp_json_set(o, "status", str_or_null(s->status)) &&
              cp_json_set(o, "created_at", str_or_null(s->created_at)) &&
              cp_json_set(o, "updated_at", str_or_null(s->updated_at)) &&
              cp_json_set_int(o, "budget", s->budget) &&
              cp_json_set_int(o, "evaluations", s->evaluations) &&
              cp_json_set_num(o, "baseline_ms", s->baseline_median_ns / 1e6) &&
              cp_json_set_num(o, "best_ms", s->best_median_ns / 1e6) &&
              cp_json_set_num(o, "delta_pct", cp_kb_session_delta_pct(s)) &&
              cp_json_set(o, "stop_reason", str_or_null(s->stop_reason));
    if (ok && full)
        ok = cp_json_set_int(o, "best_candidate", s->best_candidate_id) &&
             cp_json_set(o, "out_dir", str_or_null(s->out_dir)) &&
             cp_json_set(o, "baseline_config", cp_json_embed(s->baseline_config_json)) &&
             cp_json_set(o, "best_config", cp_json_embed(s->best_config_json));
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_kb_sessions_json(const struct cp_kb_session *s, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        if (!cp_json_push(arr, cp_kb_session_json(&s[i], false))) {
            json_decref(arr);
            return NULL;
        }
    return arr;
}

void cp_kb_render_sessions(struct cp_buf *b, const struct cp_kb *kb, const struct cp_kb_session *s,
                           size_t n)
{
    if (n == 0) {
        cp_buf_printf(b, "no tuning sessions in %s yet\n", cp_kb_path(kb));
        return;
    }
    cp_buf_printf(b, "%5s  %-24s %-7s %-12s %7s  %22s %8s  %s\n", "id", "model", "target", "status",
                  "evals", "baseline → best ms", "Δ", "created");
    for (size_t i = 0; i < n; i++) {
        char b0[32], b1[32], dp[32], evals[24], lat[72];
        ms_or_dash(b0, s[i].baseline_median_ns);
        ms_or_dash(b1, s[i].best_median_ns);
        double p = cp_kb_session_delta_pct(&s[i]);
        if (isnan(p))
            snprintf(dp, sizeof dp, "-");
        else
            snprintf(dp, sizeof dp, "%+.1f%%", p);
        snprintf(evals, sizeof evals, "%d/%d", s[i].evaluations, s[i].budget);
        snprintf(lat, sizeof lat, "%s → %s", b0, b1);
        cp_buf_printf(b, "%5lld  %-24.24s %-7s %-12s %7s  %24s %8s  %s\n", (long long)s[i].id,
                      or_dash(s[i].model_name), s[i].target ? s[i].target : "-", s[i].status, evals,
                      lat, dp, s[i].created_at);
    }
}

static json_t *candidate_json(const struct cp_kb_candidate *c)
{
    json_t *o = json_object();
    bool ok = o && cp_json_set_int(o, "id", c->id) && cp_json_set_int(o, "step", c->step) &&
              cp_json_set(o, "delta", str_or_null(c->delta)) &&
              cp_json_set(o, "source", str_or_null(c->source)) &&
              cp_json_set(o, "status", cp_json_str(cp_step_status_name(c->status))) &&
              cp_json_set(o, "reason", str_or_null(c->reason));
    const char *keys[] = {"expected_gain",  "measured_gain", "ci_lo",     "ci_hi", "p",
                          "precision_loss", "median_ns",     "throughput"};
    const double vals[] = {c->expected_gain,  c->measured_gain, c->ci_lo,     c->ci_hi, c->p,
                           c->precision_loss, c->median_ns,     c->throughput};
    for (size_t i = 0; ok && i < sizeof vals / sizeof vals[0]; i++)
        ok = cp_json_set_num(o, keys[i], vals[i]);
    ok = ok && cp_json_set_int(o, "memory_bytes", (int64_t)c->memory_bytes) &&
         cp_json_set(o, "config_id", str_or_null(c->config_id)) &&
         cp_json_set(o, "om_path", str_or_null(c->om_path)) &&
         cp_json_set(o, "trace_path", str_or_null(c->trace_path)) &&
         cp_json_set(o, "config", cp_json_embed(c->config_json)) &&
         cp_json_set(o, "created_at", str_or_null(c->created_at));
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_kb_session_detail_json(const struct cp_kb_session *s, const struct cp_kb_candidate *c,
                                  size_t n)
{
    json_t *j = json_object(), *arr = json_array();
    bool ok = j && arr && cp_json_set(j, "session", cp_kb_session_json(s, true));
    for (size_t i = 0; ok && i < n; i++)
        ok = cp_json_push(arr, candidate_json(&c[i]));
    if (ok) {
        ok = cp_json_set(j, "candidates", arr);
        arr = NULL;
    }
    json_decref(arr);
    if (ok)
        return j;
    json_decref(j);
    return NULL;
}

void cp_kb_render_session(struct cp_buf *b, const struct cp_kb_session *s,
                          const struct cp_kb_candidate *c, size_t n)
{
    char b0[32], b1[32];
    ms_or_dash(b0, s->baseline_median_ns);
    ms_or_dash(b1, s->best_median_ns);
    cp_buf_printf(b, "session:     %lld (%s)\n", (long long)s->id, s->uid);
    cp_buf_printf(b, "model:       %s (%s)\n", or_dash(s->model_name),
                  s->model_path ? s->model_path : "-");
    cp_buf_printf(b, "hardware:    %s\n", or_dash(s->hw_signature));
    cp_buf_printf(b, "target:      %s, constraints %s\n", s->target ? s->target : "-",
                  s->constraints && *s->constraints ? s->constraints : "none");
    cp_buf_printf(b, "status:      %s (%d of %d evaluations)%s%s\n", s->status, s->evaluations,
                  s->budget, s->stop_reason ? ", " : "", s->stop_reason ? s->stop_reason : "");
    double p = cp_kb_session_delta_pct(s);
    if (isnan(p))
        cp_buf_printf(b, "latency:     %s → %s ms\n", b0, b1);
    else
        cp_buf_printf(b, "latency:     %s → %s ms (%+.1f%%)\n", b0, b1, p);
    cp_buf_printf(b, "when:        %s to %s\n", s->created_at, s->updated_at);
    if (s->out_dir)
        cp_buf_printf(b, "output:      %s\n", s->out_dir);
    cp_buf_printf(b, "\n%4s  %-9s %-28s %-40s %9s %19s %8s  %s\n", "step", "status", "source",
                  "change", "gain", "95% CI", "ms", "reason");
    for (size_t i = 0; i < n; i++) {
        char g[32], lo[32], hi[32], ci[72], ms[32];
        pct_or_dash(g, c[i].measured_gain);
        pct_or_dash(lo, c[i].ci_lo);
        pct_or_dash(hi, c[i].ci_hi);
        if (isnan(c[i].ci_lo) && isnan(c[i].ci_hi))
            snprintf(ci, sizeof ci, "-");
        else
            snprintf(ci, sizeof ci, "[%s, %s]", lo, hi);
        ms_or_dash(ms, c[i].median_ns);
        cp_buf_printf(b, "%4d  %-9s %-28s %-40s %9s %19s %8s  %s\n", c[i].step,
                      cp_step_status_name(c[i].status), c[i].source ? c[i].source : "-",
                      c[i].delta && *c[i].delta ? c[i].delta : "(none)", g, ci, ms,
                      c[i].reason ? c[i].reason : "");
    }
}
