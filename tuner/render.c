/* What `cannprof tune` prints (tuner/tuner.h): a session's summary, and a
 * batch's table rows and their JSON. The command only writes them out. */
#include "core/json.h"
#include "tuner/tuner.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void cp_tune_summary_text(const struct cp_tune_opts *o, const struct cp_tune_result *r,
                          struct cp_buf *out)
{
    cp_buf_printf(out, "model:       %s\n", o->model);
    cp_buf_printf(out, "session:     %lld%s, %d evaluations, stopped: %s\n",
                  (long long)r->session_id,
                  r->already_done ? " (finished earlier)"
                  : r->resumed    ? " (resumed)"
                                  : "",
                  r->evaluations, r->stop_reason);
    cp_buf_printf(out, "\n%-22s %12s %12s %9s\n", "", "baseline", "best", "change");
    cp_buf_printf(out, "%-22s %12.3f %12.3f %+8.1f%%\n", "latency (median, ms)",
                  r->baseline_ns / 1e6, r->best_ns / 1e6, 100 * (r->best_ns / r->baseline_ns - 1));
    cp_buf_printf(out, "%-22s %12.2f %12.2f %+8.1f%%\n", "throughput (items/s)",
                  r->baseline_items_s, r->best_items_s,
                  100 * (r->best_items_s / r->baseline_items_s - 1));
    char a[32], b[32];
    cp_format_bytes(r->baseline_memory, a);
    cp_format_bytes(r->best_memory, b);
    cp_buf_printf(out, "%-22s %12s %12s\n", "memory", a, b);
    cp_buf_printf(out, "%-22s %11.4f%% %11.4f%%\n", "precision_loss", r->baseline_precision_loss,
                  r->best_precision_loss);
    if (isfinite(r->final_change)) {
        bool thr = o->target == CP_TARGET_THROUGHPUT;
        cp_buf_printf(out,
                      "\nbest vs baseline, interleaved: %s %+.1f%% [%+.1f%%, %+.1f%%], p=%.3g\n"
                      "(the table's columns were measured apart; this figure was not)\n",
                      thr ? "throughput" : "latency", (thr ? 100 : -100) * r->final_change,
                      thr ? 100 * r->final_ci_lo : -100 * r->final_ci_hi,
                      thr ? 100 * r->final_ci_hi : -100 * r->final_ci_lo, r->final_p);
    }
    cp_buf_puts(out, "\naccepted changes:\n");
    int k = 0;
    for (size_t i = 0; i < r->n_steps; i++)
        if (r->steps[i].status == CP_STEP_ACCEPTED)
            cp_buf_printf(out, "  %d. %s (%s): %s\n", ++k, r->steps[i].delta, r->steps[i].source,
                          r->steps[i].reason);
    if (!k)
        cp_buf_puts(out, "  none: the baseline stays the best\n");
    cp_buf_printf(out, "\nbest model:  %s\nreport:      %s (and %s, %s)\n", r->best_om,
                  r->report_md, r->report_html, r->report_pdf);
}

bool cp_tune_row_constraints_met(const struct cp_tune_opts *o, const struct cp_tune_report_row *row)
{
    const struct cp_constraint *pl =
        cp_constraints_find(&o->constraints, CP_CONSTRAINT_PRECISION_LOSS);
    const struct cp_constraint *mc = cp_constraints_find(&o->constraints, CP_CONSTRAINT_MEMORY);
    return (!pl || cp_constraint_holds(pl, row->best_precision_loss)) &&
           (!mc || cp_constraint_holds(mc, row->best_memory_bytes));
}

void cp_tune_batch_table_head(struct cp_buf *out)
{
    cp_buf_puts(out, "| model | baseline ms | best ms | change | accepted changes | constraints | "
                     "cpus | inconclusive |\n"
                     "|---|---:|---:|---:|---|---|---|---:|\n");
}

void cp_tune_batch_table_row(struct cp_buf *out, const char *name,
                             const struct cp_tune_batch_result *res, const struct cp_tune_opts *o,
                             const char *cpus, const char *error)
{
    if (error) {
        cp_buf_printf(out, "| %s | - | - | - | error: %s | - | %s | - |\n", name, error, cpus);
        return;
    }
    const struct cp_tune_report_row *row = &res->row;
    cp_buf_printf(out, "| %s | %.3f | %.3f | %+.1f%% | ", name, row->baseline_ms, row->best_ms,
                  100 * (row->best_ms / row->baseline_ms - 1));
    for (size_t k = 0; k < row->n_accepted; k++)
        cp_buf_printf(out, "%s`%s`", k ? ", " : "", row->accepted[k]);
    if (row->n_accepted == 0)
        cp_buf_puts(out, "none");
    cp_buf_printf(out, " | %s | %s | %d of %d |\n",
                  cp_tune_row_constraints_met(o, row) ? "met" : "NOT met", cpus, row->inconclusive,
                  row->verdicts);
}

json_t *cp_tune_batch_row_json(const char *name, const char *model, const char *out_root,
                               const struct cp_tune_batch_result *res, const struct cp_tune_opts *o,
                               const char *cpus, int threads, const char *error)
{
    json_t *j = json_object();
    json_object_set_new(j, "name", cp_json_str(name));
    json_object_set_new(j, "model", cp_json_str(model));
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/%s", out_root, name);
    json_object_set_new(j, "out_dir", cp_json_str(dir));
    json_object_set_new(j, "cpus", cp_json_str(cpus));
    json_object_set_new(j, "threads", json_integer(threads));
    if (error) {
        json_object_set_new(j, "status", json_string("error"));
        json_object_set_new(j, "error", cp_json_str(error));
        return j;
    }
    const struct cp_tune_report_row *row = &res->row;
    json_object_set_new(j, "status", json_string("done"));
    json_object_set_new(j, "baseline_ms", cp_json_num(row->baseline_ms));
    json_object_set_new(j, "best_ms", cp_json_num(row->best_ms));
    json_object_set_new(j, "change_pct", cp_json_num(100 * (row->best_ms / row->baseline_ms - 1)));
    json_t *acc = json_array();
    for (size_t k = 0; k < row->n_accepted; k++)
        json_array_append_new(acc, cp_json_str(row->accepted[k]));
    json_object_set_new(j, "accepted", acc);
    json_object_set_new(j, "constraints_met", cp_json_bool(cp_tune_row_constraints_met(o, row)));
    json_object_set_new(j, "verdicts", json_integer(row->verdicts));
    json_object_set_new(j, "inconclusive", json_integer(row->inconclusive));
    return j;
}
