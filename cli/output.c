/* Shared printing (cli/output.h). */
#include "cli/output.h"
#include "cli/options.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void cp_out_model_line(const char *label, const char *model, int64_t batch, int threads)
{
    printf("%s %s (batch %lld, %d threads)\n", label, model, (long long)batch, threads);
}

void cp_out_latency_lines(const struct cp_summary *sm)
{
    printf("latency ms: mean %.3f  median %.3f  p90 %.3f  p99 %.3f\n", sm->mean / 1e6,
           sm->median / 1e6, sm->p90 / 1e6, sm->p99 / 1e6);
    printf("            sd %.3f  cv %.2f%%  min %.3f  max %.3f\n", sm->sd / 1e6, sm->cv * 100,
           sm->min / 1e6, sm->max / 1e6);
}

void cp_out_memory_line(const struct cp_mem_report *mem, uint64_t rss)
{
    char w[32], a[32], pk[32], r[32];
    cp_format_bytes(mem->weight_bytes, w);
    cp_format_bytes(mem->arena_bytes, a);
    cp_format_bytes(mem->peak_bytes, pk);
    cp_format_bytes(rss, r);
    printf("memory:     weights %s, arena %s, peak activations %s, peak RSS %s\n", w, a, pk, r);
}

json_t *cp_out_latency_json(const struct cp_summary *sm)
{
    json_t *o = json_object();
    if (o && cp_json_set_num(o, "mean", sm->mean / 1e6) &&
        cp_json_set_num(o, "median", sm->median / 1e6) &&
        cp_json_set_num(o, "p90", sm->p90 / 1e6) && cp_json_set_num(o, "p99", sm->p99 / 1e6) &&
        cp_json_set_num(o, "sd", sm->sd / 1e6) && cp_json_set_num(o, "cv", sm->cv) &&
        cp_json_set_num(o, "min", sm->min / 1e6) && cp_json_set_num(o, "max", sm->max / 1e6))
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_out_memory_json(const struct cp_mem_report *mem, uint64_t rss)
{
    json_t *o = json_object();
    if (o && cp_json_set_int(o, "weight_bytes", (int64_t)mem->weight_bytes) &&
        cp_json_set_int(o, "arena_bytes", (int64_t)mem->arena_bytes) &&
        cp_json_set_int(o, "peak_bytes", (int64_t)mem->peak_bytes) &&
        cp_json_set_int(o, "peak_rss_bytes", (int64_t)rss))
        return o;
    json_decref(o);
    return NULL;
}

const char *cp_out_compared_statistic(const struct cp_comparison *c,
                                      const struct cp_verdict_opts *vo)
{
    if (vo->quantile > 0)
        return "quantile";
    return c->test == CP_TEST_WELCH || c->test == CP_TEST_STUDENT ? "mean" : "median";
}

json_t *cp_out_comparison_json(const char *metric, const char *unit, double scale,
                               const struct cp_comparison *c, const struct cp_verdict_opts *vo)
{
    json_t *o = json_object(), *ci = json_array();
    bool ok = o && ci && cp_json_push(ci, cp_json_num(c->ci_lo_pct)) &&
              cp_json_push(ci, cp_json_num(c->ci_hi_pct)) && cp_json_set_str(o, "metric", metric) &&
              cp_json_set_str(o, "unit", unit) &&
              cp_json_set_str(o, "statistic", cp_out_compared_statistic(c, vo)) &&
              cp_json_set_num(o, "before", c->before * scale) &&
              cp_json_set_num(o, "after", c->after * scale) &&
              cp_json_set_num(o, "delta_pct", c->delta_pct);
    if (ok) {
        ok = cp_json_set(o, "ci_pct", ci);
        ci = NULL;
    }
    ok = ok && cp_json_set_num(o, "p", c->p) &&
         cp_json_set_int(o, "n_before", (int64_t)c->n_before) &&
         cp_json_set_int(o, "n_after", (int64_t)c->n_after) &&
         cp_json_set_str(o, "test", cp_stat_test_name(c->test)) &&
         cp_json_set_num(o, "mde_pct", c->mde_pct) &&
         cp_json_set(o, "samples_needed",
                     c->verdict == CP_VERDICT_INCONCLUSIVE && c->n_needed > 0
                         ? cp_json_int((int64_t)c->n_needed)
                         : json_null()) &&
         cp_json_set_str(o, "verdict", cp_verdict_name(c->verdict));
    json_decref(ci);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

int cp_out_json(const json_t *j, const char *cmd)
{
    if (!j) {
        cp_cli_error(cmd, "out of memory building the JSON output");
        return 3;
    }
    if (cp_json_print(j, stdout) != CP_OK) {
        cp_cli_error(cmd, "cannot write the JSON output to stdout");
        return 3;
    }
    return 0;
}

int cp_out_json_take(json_t *j, const char *cmd)
{
    int rc = cp_out_json(j, cmd);
    json_decref(j);
    return rc;
}

int cp_out_buf(const struct cp_buf *b, const char *cmd)
{
    if (cp_buf_status(b) != CP_OK) {
        cp_cli_error(cmd, "out of memory");
        return 3;
    }
    if (b->len && fwrite(b->data, 1, b->len, stdout) != b->len) {
        cp_cli_error(cmd, "cannot write to stdout");
        return 3;
    }
    return 0;
}

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends the process at once */
}

volatile sig_atomic_t *cp_cli_interrupt_flag(void)
{
    static bool installed; /* the process's one handler; set once */
    if (!installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        installed = true;
    }
    return &interrupted;
}
