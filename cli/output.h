/* cli/output: what several commands print the same way — a latency
 * summary, memory figures, a comparison — as text and as JSON (core/json.h),
 * and the one way a command writes its JSON to stdout. Private to cli/. */
#ifndef CP_CLI_OUTPUT_H
#define CP_CLI_OUTPUT_H

#include "core/json.h"
#include "runner/runner.h"
#include "stats/stats.h"
#include "stats/verdict.h"

#include <signal.h>

/* "model:      X (batch 1, 2 threads)" with `label` in front. */
void cp_out_model_line(const char *label, const char *model, int64_t batch, int threads);
/* The two "latency ms:" lines of a summary in nanoseconds. */
void cp_out_latency_lines(const struct cp_summary *sm);
/* "memory:     weights ..., arena ..., peak activations ..., peak RSS ...". */
void cp_out_memory_line(const struct cp_mem_report *mem, uint64_t rss);

/* {"mean","median","p90","p99","sd","cv","min","max"}: milliseconds (cv a
 * fraction) of a summary in nanoseconds. NULL when out of memory. */
json_t *cp_out_latency_json(const struct cp_summary *sm);
/* {"weight_bytes","arena_bytes","peak_bytes","peak_rss_bytes"}. */
json_t *cp_out_memory_json(const struct cp_mem_report *mem, uint64_t rss);

/* "median", "mean" or "quantile": the statistic a comparison compared. */
const char *cp_out_compared_statistic(const struct cp_comparison *c,
                                      const struct cp_verdict_opts *vo);
/* One compared metric: {"metric","unit","statistic","before","after"
 * (scaled by `scale`),"delta_pct","ci_pct":[lo,hi],"p","n_before","n_after",
 * "test","mde_pct","samples_needed","verdict"}. */
json_t *cp_out_comparison_json(const char *metric, const char *unit, double scale,
                               const struct cp_comparison *c, const struct cp_verdict_opts *vo);

/* Print j on stdout (a NULL j is "out of memory"). 0, or 3 after printing
 * the error when it cannot be written. */
int cp_out_json(const json_t *j, const char *cmd);
/* The same, then release j. */
int cp_out_json_take(json_t *j, const char *cmd);
/* Print a rendered buffer on stdout: 0, or 3 after printing the error when
 * it ran out of memory or cannot be written. */
int cp_out_buf(const struct cp_buf *b, const char *cmd);

/* The flag a SIGINT handler sets (installed on first call): a command that
 * measures stops after the running iteration; a second Ctrl-C ends the
 * process at once. */
volatile sig_atomic_t *cp_cli_interrupt_flag(void);

#endif
