/* Knowledge cards: a Markdown summary of one tuning session, generated
 * from the session, its model, hardware and candidates each time it is
 * asked for (never stored, so a card always matches the data). Sections:
 * Scenario, Core bottlenecks, Effective changes, Result (docs/kb-schema.md,
 * "Cards"). */
#include "knowledge/kb_internal.h"
#include "knowledge/kb_tuning.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *or_dash(const char *s)
{
    return s && *s ? s : "—";
}

void cp_kb_fmt_pct(char out[32], double frac)
{
    if (isnan(frac))
        snprintf(out, 32, "—");
    else
        snprintf(out, 32, "%+.1f%%", frac * 100);
}

static void put_patterns(struct cp_buf *b, const struct cp_kb_fingerprint *fp)
{
    const char *names[] = {"attention", "conv", "layernorm", "groupnorm", "batchnorm", "gelu"};
    const bool on[] = {fp->has_attention, fp->has_conv,      fp->has_layernorm,
                       fp->has_groupnorm, fp->has_batchnorm, fp->has_gelu};
    int k = 0;
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++)
        if (on[i])
            cp_buf_printf(b, "%s%s", k++ ? ", " : "", names[i]);
    if (k == 0)
        cp_buf_puts(b, "none");
}

static void put_scenario(struct cp_buf *b, const struct cp_kb_session *s,
                         const struct cp_kb_fingerprint *fp, const struct cp_kb_hardware *hw)
{
    cp_buf_puts(b, "## Scenario\n\n");
    if (fp) {
        char params[32], flops[32];
        cp_format_si((double)fp->params, params);
        cp_format_si(fp->flops, flops);
        cp_buf_printf(b, "- **Model**: %s (class %s; %d nodes, %s parameters, %sFLOP)\n",
                      or_dash(fp->name), or_dash(fp->model_class), fp->n_nodes, params, flops);
        cp_buf_puts(b, "- **Patterns**: ");
        put_patterns(b, fp);
        cp_buf_printf(b, "\n- **Structure hash**: `%s`\n", fp->structure_hash);
    }
    cp_buf_printf(b, "- **Model file**: %s\n", or_dash(s->model_path));
    if (hw)
        cp_buf_printf(b, "- **Hardware**: %s, %d cores, %s [%s] (signature `%s`, cannprof %s)\n",
                      or_dash(hw->cpu_model), hw->cores, or_dash(hw->soc_version), or_dash(hw->isa),
                      hw->signature, or_dash(hw->tool_version));
    cp_buf_printf(b, "- **Target**: %s\n", or_dash(s->target));
    cp_buf_printf(b, "- **Constraints**: %s\n", or_dash(s->constraints));
    cp_buf_printf(b, "- **Session**: %lld (%s), %s, %d of %d evaluations, stopped: %s\n",
                  (long long)s->id, or_dash(s->uid), or_dash(s->status), s->evaluations, s->budget,
                  or_dash(s->stop_reason));
    cp_buf_printf(b, "- **When**: %s to %s\n\n", or_dash(s->created_at), or_dash(s->updated_at));
}

static bool is_accepted(const struct cp_kb_candidate *c)
{
    return c->status == CP_STEP_ACCEPTED;
}

static void put_bottlenecks(struct cp_buf *b, const struct cp_kb_candidate *c, size_t n)
{
    cp_buf_puts(b, "## Core bottlenecks\n\n");
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_accepted(&c[i]))
            continue;
        cp_buf_printf(b, "- %s: %s\n", or_dash(c[i].source), or_dash(c[i].reason));
        k++;
    }
    if (k == 0)
        cp_buf_puts(b, "- none confirmed: no candidate was accepted\n");
    cp_buf_putc(b, '\n');
}

static void put_changes(struct cp_buf *b, const struct cp_kb_candidate *c, size_t n)
{
    cp_buf_puts(b, "## Effective changes\n\n");
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_accepted(&c[i]))
            continue;
        if (k++ == 0)
            cp_buf_puts(b, "| step | change | source | latency gain | 95% CI | p |\n"
                           "|---:|---|---|---:|---|---:|\n");
        char g[32], lo[32], hi[32], p[32];
        cp_kb_fmt_pct(g, c[i].measured_gain);
        cp_kb_fmt_pct(lo, c[i].ci_lo);
        cp_kb_fmt_pct(hi, c[i].ci_hi);
        if (isnan(c[i].p))
            snprintf(p, sizeof p, "—");
        else
            snprintf(p, sizeof p, "%.3g", c[i].p);
        cp_buf_printf(b, "| %d | `%s` | %s | %s | [%s, %s] | %s |\n", c[i].step,
                      or_dash(c[i].delta), or_dash(c[i].source), g, lo, hi, p);
    }
    if (k == 0)
        cp_buf_puts(b, "None: the baseline configuration stayed the best.\n");
    int rejected = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        rejected += c[i].status == CP_STEP_REJECTED;
        failed += c[i].status == CP_STEP_FAILED;
    }
    cp_buf_printf(b, "\n%d candidates tried: %d accepted, %d rejected, %d failed.\n\n", (int)n, k,
                  rejected, failed);
}

static const struct cp_kb_candidate *find_candidate(const struct cp_kb_candidate *c, size_t n,
                                                    int64_t id, bool baseline)
{
    for (size_t i = 0; i < n; i++)
        if ((baseline && c[i].step == 0) || (!baseline && id > 0 && c[i].id == id))
            return &c[i];
    return NULL;
}

/* The best config: its convert command when the JSON carries one
 * ("command" or "convert_command"), else the JSON itself. */
static void put_best_config(struct cp_buf *b, const char *json)
{
    if (!json || !*json)
        return;
    json_t *j = json_loads(json, 0, NULL);
    const char *cmd = NULL;
    if (json_is_object(j)) {
        cmd = json_string_value(json_object_get(j, "command"));
        if (!cmd)
            cmd = json_string_value(json_object_get(j, "convert_command"));
    }
    if (cmd)
        cp_buf_printf(b, "\nBest configuration:\n\n```sh\n%s\n```\n", cmd);
    else
        cp_buf_printf(b, "\nBest configuration:\n\n```json\n%s\n```\n", json);
    json_decref(j);
}

static void put_result(struct cp_buf *b, const struct cp_kb_session *s,
                       const struct cp_kb_candidate *c, size_t n)
{
    cp_buf_puts(b, "## Result\n\n");
    const struct cp_kb_candidate *base = find_candidate(c, n, 0, true);
    const struct cp_kb_candidate *best = find_candidate(c, n, s->best_candidate_id, false);
    double b_ns = s->baseline_median_ns, x_ns = s->best_median_ns;
    if (isnan(b_ns) && base)
        b_ns = base->median_ns;
    if (isnan(x_ns) && best)
        x_ns = best->median_ns;
    if (isnan(x_ns))
        x_ns = b_ns; /* nothing better was found */
    if (!isnan(b_ns) && !isnan(x_ns) && b_ns > 0 && x_ns > 0) {
        double down = (b_ns - x_ns) / b_ns * 100;
        cp_buf_printf(b, "- **Latency**: %.3f ms → %.3f ms (%s%.1f%%)\n", b_ns / 1e6, x_ns / 1e6,
                      down >= 0 ? "↓" : "↑", fabs(down));
        double b_tp = base ? base->throughput : NAN, x_tp = best ? best->throughput : NAN;
        double up = !isnan(b_tp) && !isnan(x_tp) && b_tp > 0 ? (x_tp / b_tp - 1) * 100
                                                             : (b_ns / x_ns - 1) * 100;
        cp_buf_printf(b, "- **Throughput**: %s%.1f%%\n", up >= 0 ? "↑" : "↓", fabs(up));
    } else {
        cp_buf_puts(b, "- **Latency**: not measured\n");
    }
    if (base && best && (base->memory_bytes || best->memory_bytes)) {
        char m0[32], m1[32];
        cp_format_bytes(base->memory_bytes, m0);
        cp_format_bytes(best->memory_bytes, m1);
        cp_buf_printf(b, "- **Memory**: %s → %s\n", m0, m1);
    }
    const struct cp_kb_candidate *p = best ? best : base;
    if (p && !isnan(p->precision_loss))
        cp_buf_printf(b, "- **Precision loss**: %.3g%%\n", p->precision_loss);
    put_best_config(b, s->best_config_json);
}

enum cp_status cp_kb_card_session(struct cp_kb *kb, int64_t session_id, struct cp_buf *out,
                                  struct cp_diag *d)
{
    struct cp_kb_session s;
    struct cp_kb_fingerprint fp;
    struct cp_kb_hardware hw;
    struct cp_kb_candidate *c = NULL;
    size_t n = 0;
    bool have_fp = false, have_hw = false;
    memset(&fp, 0, sizeof fp);
    enum cp_status st = cp_kb_session_get(kb, session_id, &s, d);
    if (st != CP_OK)
        return st;
    if (s.model_id > 0) {
        if ((st = cp_kb_model_get(kb, s.model_id, &fp, d)) != CP_OK)
            goto out;
        have_fp = true;
    }
    if (s.hw_id > 0) {
        if ((st = cp_kb_hardware_get(kb, s.hw_id, &hw, d)) != CP_OK)
            goto out;
        have_hw = true;
    }
    if ((st = cp_kb_candidate_list(kb, session_id, &c, &n, d)) != CP_OK)
        goto out;
    cp_buf_printf(out, "# Tuning card: %s\n\n",
                  have_fp && fp.name[0] ? fp.name : or_dash(s.model_path));
    put_scenario(out, &s, have_fp ? &fp : NULL, have_hw ? &hw : NULL);
    put_bottlenecks(out, c, n);
    put_changes(out, c, n);
    put_result(out, &s, c, n);
    if (cp_buf_status(out) != CP_OK)
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory writing a card", kb->path);
out:
    cp_kb_candidate_list_free(c, n);
    cp_kb_fingerprint_release(&fp);
    cp_kb_session_release(&s);
    return st;
}

enum cp_status cp_kb_card_find_session(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                                       int64_t *session_id, struct cp_diag *d)
{
    *session_id = 0;
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        cp_kb_prepare(kb,
                      "SELECT s.id FROM sessions s JOIN models m ON m.id = s.model_id "
                      "WHERE m.structure_hash = ?1 AND (?2 = '' OR m.source_hash = ?2) "
                      "ORDER BY s.status = 'done' DESC, s.id DESC LIMIT 1",
                      &st, "finding the model's sessions", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_text(st, 1, fp->structure_hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, fp->source_hash, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "finding the model's sessions");
    sqlite3_finalize(st);
    if (ret != CP_OK)
        return ret;
    if (id == 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: no tuning session of model '%s' (structure %s); run `cannprof "
                           "tune` on it first",
                           kb->path, fp->name, fp->structure_hash);
    *session_id = id;
    return CP_OK;
}

enum cp_status cp_kb_card_model(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                                struct cp_buf *out, struct cp_diag *d)
{
    int64_t id = 0;
    enum cp_status st = cp_kb_card_find_session(kb, fp, &id, d);
    return st == CP_OK ? cp_kb_card_session(kb, id, out, d) : st;
}
