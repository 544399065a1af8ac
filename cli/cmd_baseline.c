/* cannprof baseline: keep per-service baselines in the knowledge base, for
 * `cannprof validate` to compare later runs against.
 *
 *   baseline set  --service NAME --trace T.db [--tag TAG] [--run N] [--replace]
 *   baseline list [--service NAME] [--json]
 *   baseline show --service NAME [--tag TAG|latest] [--json]
 *   baseline rm   --service NAME --tag TAG
 *
 * Every subcommand takes --kb FILE (default: the knowledge base under
 * $XDG_DATA_HOME, see knowledge/kb.h). */
#include "cli/commands.h"
#include "cli/options.h"
#include "knowledge/kb.h"
#include "stats/stats.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Validations shown by `show`. */
#define SHOW_VALIDATIONS 10

enum {
    OPT_HELP = 1,
    OPT_JSON,
    OPT_KB,
    OPT_REPLACE,
    OPT_RUN,
    OPT_SERVICE,
    OPT_TAG,
    OPT_TRACE,
};

#define OPT_HELP_ROW                                                                               \
    {                                                                                              \
        "help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"                                 \
    }
#define OPT_JSON_ROW                                                                               \
    {                                                                                              \
        "json", 0, CP_OPT_FLAG, OPT_JSON, NULL, "print JSON"                                       \
    }
#define OPT_KB_ROW                                                                                 \
    {                                                                                              \
        "kb", 0, CP_OPT_VALUE, OPT_KB, "FILE",                                                     \
            "knowledge base (default $XDG_DATA_HOME/cannprof/kb.sqlite)"                           \
    }
#define OPT_SERVICE_ROW                                                                            \
    {                                                                                              \
        "service", 's', CP_OPT_VALUE, OPT_SERVICE, "NAME", "the service the baseline belongs to"   \
    }

/* Each table sorted by name. */
static const struct cp_opt set_options[] = {
    OPT_HELP_ROW,
    OPT_KB_ROW,
    {"replace", 0, CP_OPT_FLAG, OPT_REPLACE, NULL, "overwrite a baseline with the same tag"},
    {"run", 0, CP_OPT_VALUE, OPT_RUN, "N", "run of the trace to keep (default: the last)"},
    OPT_SERVICE_ROW,
    {"tag", 0, CP_OPT_VALUE, OPT_TAG, "TAG", "name of the baseline (default: b1, b2, ...)"},
    {"trace", 0, CP_OPT_VALUE, OPT_TRACE, "T.db", "trace store from cannprof bench --trace"},
};
static const struct cp_opt list_options[] = {
    OPT_HELP_ROW,
    OPT_JSON_ROW,
    OPT_KB_ROW,
    {"service", 's', CP_OPT_VALUE, OPT_SERVICE, "NAME", "only this service's baselines"},
};
static const struct cp_opt show_options[] = {
    OPT_HELP_ROW,
    OPT_JSON_ROW,
    OPT_KB_ROW,
    OPT_SERVICE_ROW,
    {"tag", 0, CP_OPT_VALUE, OPT_TAG, "TAG", "which baseline (default: latest)"},
};
static const struct cp_opt rm_options[] = {
    OPT_HELP_ROW,
    OPT_KB_ROW,
    OPT_SERVICE_ROW,
    {"tag", 0, CP_OPT_VALUE, OPT_TAG, "TAG", "the baseline to remove"},
};
#define N_OF(t) (sizeof t / sizeof t[0])

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cannprof baseline set  --service NAME --trace T.db [--tag TAG] [--run N]\n"
            "                              [--replace] [--kb FILE]\n"
            "       cannprof baseline list [--service NAME] [--json] [--kb FILE]\n"
            "       cannprof baseline show --service NAME [--tag TAG|latest] [--json] [--kb FILE]\n"
            "       cannprof baseline rm   --service NAME --tag TAG [--kb FILE]\n\n"
            "Keep the figures of a benchmark run (latency and kernel-time samples, memory,\n"
            "model and config) as a service's baseline in the knowledge base, for\n"
            "'cannprof validate' to compare later runs against. The figures are copied, so a\n"
            "baseline outlives its trace file. Each validation against a service is recorded\n"
            "and 'show' lists the latest ones.\n\n"
            "The knowledge base is $XDG_DATA_HOME/cannprof/kb.sqlite (else\n"
            "~/.local/share/cannprof/kb.sqlite) unless --kb FILE is given.\n"
            "'cannprof baseline <subcommand> --help' shows a subcommand's options.\n");
}

/* Parse a subcommand's options; prints help (*rc 0) or the error (*rc 2).
 * Returns whether to go on. */
static bool parse(const char *cmd, const struct cp_opt *t, size_t n, const char *synopsis,
                  const char *about, int argc, char **argv, struct cp_args *a, int *rc)
{
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_args_parse(cmd, t, n, argc, argv, a, &d) != CP_OK) {
        cp_cli_error(cmd, d.msg);
        *rc = cp_status_exit_code(d.status);
        return false;
    }
    if (cp_args_has(a, OPT_HELP)) {
        printf("usage: cannprof %s\n\n%s\n\noptions:\n", synopsis, about);
        cp_opts_print_help(stdout, t, n);
        *rc = 0;
        return false;
    }
    if (a->n_positional > 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "unexpected argument '%.100s'; see 'cannprof %s --help'",
                 a->positional[0], cmd);
        cp_cli_error(cmd, msg);
        *rc = 2;
        return false;
    }
    return true;
}

/* A required option; prints the error when missing. */
static const char *require(const char *cmd, const struct cp_args *a, int id, const char *flag)
{
    const char *v = cp_args_get(a, id);
    if (!v) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s is required", flag);
        cp_cli_error(cmd, msg);
    }
    return v;
}

/* Report `d` and return its exit code. */
static int fail(const char *cmd, const struct cp_diag *d)
{
    cp_cli_error(cmd, d->msg);
    return cp_status_exit_code(d->status);
}

static void json_num(struct cp_buf *b, double v)
{
    if (isfinite(v))
        cp_buf_printf(b, "%.6f", v);
    else
        cp_buf_puts(b, "null");
}

static void json_str_or_null(struct cp_buf *b, const char *s)
{
    if (s && *s)
        cp_buf_json_str(b, s);
    else
        cp_buf_puts(b, "null");
}

/* Embed a JSON document as a value when it parses, else as a string. */
static void json_embed(struct cp_buf *b, const char *text)
{
    json_error_t err;
    json_t *j = text ? json_loads(text, JSON_DECODE_ANY, &err) : NULL;
    if (j) {
        char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        if (s)
            cp_buf_puts(b, s);
        else
            cp_buf_puts(b, "null");
        free(s);
        json_decref(j);
    } else {
        json_str_or_null(b, text);
    }
}

static void print_out(struct cp_buf *b)
{
    if (cp_buf_status(b) != CP_OK) {
        cp_cli_error("baseline", "out of memory");
        return;
    }
    fputs(b->data ? b->data : "", stdout);
}

/* The summary of n samples in ns; zeroed when n == 0. */
static enum cp_status summarize(const uint64_t *ns, size_t n, struct cp_summary *s,
                                struct cp_diag *d)
{
    memset(s, 0, sizeof *s);
    if (!ns || n == 0)
        return CP_OK;
    double *x = cp_calloc(n, sizeof *x);
    if (!x)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        x[i] = (double)ns[i];
    enum cp_status st = cp_stats_summary(x, n, s, d);
    free(x);
    return st;
}

static const char *or_dash(const char *s)
{
    return s && *s ? s : "-";
}

static void print_memory(const struct cp_run_metrics *m)
{
    char w[32], a[32], pk[32], r[32];
    cp_format_bytes(m->weight_bytes, w);
    cp_format_bytes(m->arena_bytes, a);
    cp_format_bytes(m->peak_bytes, pk);
    cp_format_bytes(m->peak_rss_bytes, r);
    printf("memory:     weights %s, arena %s, peak activations %s, peak RSS %s\n", w, a, pk, r);
}

/* ---- set ------------------------------------------------------------------- */

static int cmd_set(int argc, char **argv)
{
    const char *cmd = "baseline set";
    struct cp_args a;
    int rc = 0;
    if (!parse(cmd, set_options, N_OF(set_options),
               "baseline set --service NAME --trace T.db [--tag TAG] [--run N]\n"
               "                             [--replace] [--kb FILE]",
               "Copy the figures of one run of a trace store (the last unless --run) into the\n"
               "knowledge base as the service's baseline. Without --tag the baseline is tagged\n"
               "b1, b2, ... An existing tag is only overwritten with --replace.",
               argc, argv, &a, &rc))
        return rc;
    const char *service = require(cmd, &a, OPT_SERVICE, "--service NAME");
    if (!service)
        return 2;
    const char *trace = require(cmd, &a, OPT_TRACE, "--trace T.db");
    if (!trace)
        return 2;
    const char *tag = cp_args_get(&a, OPT_TAG);
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_kb_check_service(service, &d) != CP_OK || (tag && cp_kb_check_tag(tag, &d) != CP_OK))
        return fail(cmd, &d);
    int64_t run = -1;
    const char *val = cp_args_get(&a, OPT_RUN);
    if (val && (!cp_parse_i64(val, &run) || run < 1)) {
        cp_cli_error(cmd, "--run takes a run id (a whole number from 1)");
        return 2;
    }

    struct cp_trace_store *store = NULL;
    struct cp_kb *kb = NULL;
    struct cp_run_metrics m;
    memset(&m, 0, sizeof m);
    struct cp_kb_baseline b;
    memset(&b, 0, sizeof b);
    char *abs_trace = NULL;
    if (cp_trace_store_open_ro(trace, &store, &d) != CP_OK ||
        cp_trace_store_run_metrics(store, run, &m, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (m.n == 0) {
        cp_diag_set(&d, CP_ERR_INVALID,
                    "%s: run %lld has no latency samples; record one with cannprof bench --trace",
                    trace, (long long)m.run_id);
        rc = fail(cmd, &d);
        goto out;
    }
    abs_trace = realpath(trace, NULL); /* so the record means something from anywhere */
    int64_t id = -1;
    if (cp_kb_open(cp_args_get(&a, OPT_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_set(kb, service, tag, abs_trace ? abs_trace : trace, &m,
                           cp_args_has(&a, OPT_REPLACE), &id, &d) != CP_OK ||
        cp_kb_baseline_get_id(kb, id, &b, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    struct cp_summary s;
    if (summarize(b.m.latency_ns, b.m.n, &s, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    printf("baseline:   %s/%s stored (id %lld) in %s\n", b.service, b.tag, (long long)b.id,
           cp_kb_path(kb));
    printf("source:     %s, run %lld (%s, recorded %s)\n", b.trace_path, (long long)b.m.run_id,
           or_dash(b.m.kind), or_dash(b.m.created_at));
    printf("model:      %s\n", or_dash(b.m.model_path));
    printf("samples:    %zu iterations%s\n", b.m.n, b.m.device_ns ? " (with kernel time)" : "");
    printf("latency ms: median %.3f  p99 %.3f  mean %.3f\n", s.median / 1e6, s.p99 / 1e6,
           s.mean / 1e6);
    print_memory(&b.m);
out:
    cp_kb_baseline_release(&b);
    free(abs_trace);
    cp_kb_close(kb);
    cp_run_metrics_release(&m);
    cp_trace_store_close(store);
    return rc;
}

/* ---- list ------------------------------------------------------------------ */

static void list_json(const struct cp_kb_baseline *v, size_t n)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_putc(&b, '[');
    for (size_t i = 0; i < n; i++) {
        const struct cp_kb_baseline *x = &v[i];
        cp_buf_printf(&b, "%s{\"id\":%lld,\"service\":", i ? "," : "", (long long)x->id);
        cp_buf_json_str(&b, x->service);
        cp_buf_puts(&b, ",\"tag\":");
        cp_buf_json_str(&b, x->tag);
        cp_buf_puts(&b, ",\"created_at\":");
        cp_buf_json_str(&b, x->created_at);
        cp_buf_printf(&b, ",\"n\":%zu,\"median_ms\":", x->m.n);
        json_num(&b, x->median_ns / 1e6);
        cp_buf_puts(&b, ",\"mean_ms\":");
        json_num(&b, x->mean_ns / 1e6);
        cp_buf_puts(&b, ",\"p99_ms\":");
        json_num(&b, x->p99_ns / 1e6);
        cp_buf_puts(&b, ",\"model_path\":");
        json_str_or_null(&b, x->m.model_path);
        cp_buf_puts(&b, ",\"model_hash\":");
        json_str_or_null(&b, x->m.model_hash);
        cp_buf_puts(&b, ",\"config_id\":");
        json_str_or_null(&b, x->m.config_id);
        cp_buf_puts(&b, ",\"trace\":");
        json_str_or_null(&b, x->trace_path);
        cp_buf_printf(&b, ",\"run_id\":%lld}", (long long)x->m.run_id);
    }
    cp_buf_puts(&b, "]\n");
    print_out(&b);
    cp_buf_release(&b);
}

static int width(const char *s, int w)
{
    int len = (int)strlen(s);
    return len > w ? len : w;
}

static void list_text(const struct cp_kb_baseline *v, size_t n)
{
    int ws = 7, wt = 3;
    for (size_t i = 0; i < n; i++) {
        ws = width(v[i].service, ws);
        wt = width(v[i].tag, wt);
    }
    printf("%-*s  %-*s  %-20s  %6s  %10s  %s\n", ws, "service", wt, "tag", "created", "n",
           "median ms", "model");
    for (size_t i = 0; i < n; i++) {
        char med[32];
        if (isfinite(v[i].median_ns))
            snprintf(med, sizeof med, "%.3f", v[i].median_ns / 1e6);
        else
            snprintf(med, sizeof med, "-");
        printf("%-*s  %-*s  %-20s  %6zu  %10s  %s\n", ws, v[i].service, wt, v[i].tag,
               v[i].created_at, v[i].m.n, med, or_dash(v[i].m.model_path));
    }
}

static int cmd_list(int argc, char **argv)
{
    const char *cmd = "baseline list";
    struct cp_args a;
    int rc = 0;
    if (!parse(cmd, list_options, N_OF(list_options),
               "baseline list [--service NAME] [--json] [--kb FILE]",
               "List the baselines of every service (or of one): service, tag, when it was\n"
               "set, samples, median latency and model. A service without baselines lists\n"
               "nothing (exit 0).",
               argc, argv, &a, &rc))
        return rc;
    const char *service = cp_args_get(&a, OPT_SERVICE);
    struct cp_diag d;
    cp_diag_init(&d);
    if (service && cp_kb_check_service(service, &d) != CP_OK)
        return fail(cmd, &d);
    struct cp_kb *kb = NULL;
    struct cp_kb_baseline *v = NULL;
    size_t n = 0;
    char **names = NULL;
    size_t n_names = 0;
    if (cp_kb_open(cp_args_get(&a, OPT_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_list(kb, service, &v, &n, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (cp_args_has(&a, OPT_JSON)) {
        list_json(v, n);
    } else if (n > 0) {
        list_text(v, n);
    } else if (!service) {
        printf("no baselines in %s yet; set one with: cannprof baseline set --service NAME "
               "--trace T.db\n",
               cp_kb_path(kb));
    } else {
        printf("no baselines for service '%s' in %s", service, cp_kb_path(kb));
        if (cp_kb_service_list(kb, &names, &n_names, &d) == CP_OK && n_names > 0) {
            printf(" (services with baselines:");
            for (size_t i = 0; i < n_names; i++)
                printf("%s %s", i ? "," : "", names[i]);
            printf(")");
        }
        printf("\n");
    }
out:
    for (size_t i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    cp_kb_baseline_list_free(v, n);
    cp_kb_close(kb);
    return rc;
}

/* ---- show ------------------------------------------------------------------ */

static void summary_json(struct cp_buf *b, const struct cp_summary *s)
{
    const double v[] = {s->mean, s->median, s->p90, s->p99, s->sd, s->min, s->max};
    const char *k[] = {"mean", "median", "p90", "p99", "sd", "min", "max"};
    cp_buf_putc(b, '{');
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        cp_buf_printf(b, "\"%s\":", k[i]);
        json_num(b, v[i] / 1e6);
        cp_buf_putc(b, ',');
    }
    cp_buf_puts(b, "\"cv\":");
    json_num(b, s->cv);
    cp_buf_putc(b, '}');
}

static void validation_json(struct cp_buf *b, const struct cp_kb_validation *x)
{
    cp_buf_printf(b, "{\"id\":%lld,\"created_at\":", (long long)x->id);
    cp_buf_json_str(b, x->created_at);
    cp_buf_puts(b, ",\"baseline_id\":");
    if (x->baseline_id > 0)
        cp_buf_printf(b, "%lld", (long long)x->baseline_id);
    else
        cp_buf_puts(b, "null");
    cp_buf_puts(b, ",\"baseline_tag\":");
    json_str_or_null(b, x->baseline_tag);
    cp_buf_puts(b, ",\"trace\":");
    json_str_or_null(b, x->trace_path);
    cp_buf_puts(b, ",\"verdict\":");
    cp_buf_json_str(b, x->verdict);
    cp_buf_printf(b, ",\"exit_code\":%d,\"alert\":{\"attempted\":%s,\"delivered\":%s,\"error\":",
                  x->exit_code, x->alert_attempted ? "true" : "false",
                  x->alert_delivered ? "true" : "false");
    json_str_or_null(b, x->alert_error);
    cp_buf_puts(b, "},\"figures\":");
    json_embed(b, x->figures_json);
    cp_buf_putc(b, '}');
}

static void show_json(const struct cp_kb_baseline *x, const struct cp_summary *lat,
                      const struct cp_summary *dev, double throughput,
                      const struct cp_kb_validation *v, size_t nv)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_printf(&b, "{\"id\":%lld,\"service\":", (long long)x->id);
    cp_buf_json_str(&b, x->service);
    cp_buf_puts(&b, ",\"tag\":");
    cp_buf_json_str(&b, x->tag);
    cp_buf_puts(&b, ",\"created_at\":");
    cp_buf_json_str(&b, x->created_at);
    cp_buf_puts(&b, ",\"source\":{\"trace\":");
    json_str_or_null(&b, x->trace_path);
    cp_buf_printf(&b, ",\"run_id\":%lld,\"kind\":", (long long)x->m.run_id);
    json_str_or_null(&b, x->m.kind);
    cp_buf_puts(&b, ",\"recorded_at\":");
    json_str_or_null(&b, x->m.created_at);
    cp_buf_puts(&b, "},\"model\":{\"path\":");
    json_str_or_null(&b, x->m.model_path);
    cp_buf_puts(&b, ",\"hash\":");
    json_str_or_null(&b, x->m.model_hash);
    cp_buf_puts(&b, "},\"config_id\":");
    json_str_or_null(&b, x->m.config_id);
    cp_buf_printf(&b, ",\"batch\":%d,\"threads\":%d,\"n\":%zu,\"latency_ms\":", x->m.batch,
                  x->m.threads, x->m.n);
    summary_json(&b, lat);
    cp_buf_puts(&b, ",\"device_ms\":");
    if (x->m.device_ns)
        summary_json(&b, dev);
    else
        cp_buf_puts(&b, "null");
    cp_buf_puts(&b, ",\"throughput_items_per_s\":");
    json_num(&b, throughput);
    cp_buf_printf(&b,
                  ",\"memory\":{\"weight_bytes\":%llu,\"arena_bytes\":%llu,\"peak_bytes\":%llu,"
                  "\"peak_rss_bytes\":%llu},\"precision_loss\":",
                  (unsigned long long)x->m.weight_bytes, (unsigned long long)x->m.arena_bytes,
                  (unsigned long long)x->m.peak_bytes, (unsigned long long)x->m.peak_rss_bytes);
    json_num(&b, x->m.precision_loss);
    cp_buf_puts(&b, ",\"validations\":[");
    for (size_t i = 0; i < nv; i++) {
        if (i)
            cp_buf_putc(&b, ',');
        validation_json(&b, &v[i]);
    }
    cp_buf_puts(&b, "]}\n");
    print_out(&b);
    cp_buf_release(&b);
}

static const char *alert_status(const struct cp_kb_validation *v, char *buf, size_t n)
{
    if (!v->alert_attempted)
        return "not sent";
    if (v->alert_delivered)
        return "delivered";
    snprintf(buf, n, "failed: %s", v->alert_error && *v->alert_error ? v->alert_error : "?");
    return buf;
}

static void show_text(const struct cp_kb *kb, const struct cp_kb_baseline *x,
                      const struct cp_summary *lat, const struct cp_summary *dev, double throughput,
                      const struct cp_kb_validation *v, size_t nv)
{
    printf("baseline:   %s/%s (id %lld), set %s in %s\n", x->service, x->tag, (long long)x->id,
           x->created_at, cp_kb_path(kb));
    printf("source:     %s, run %lld (%s, recorded %s)\n", or_dash(x->trace_path),
           (long long)x->m.run_id, or_dash(x->m.kind), or_dash(x->m.created_at));
    printf("model:      %s\n", or_dash(x->m.model_path));
    printf("model hash: %s\n", or_dash(x->m.model_hash));
    printf("config id:  %s\n", or_dash(x->m.config_id));
    printf("batch:      %d (%d threads)\n", x->m.batch, x->m.threads);
    printf("iterations: %zu\n", x->m.n);
    printf("latency ms: mean %.3f  median %.3f  p90 %.3f  p99 %.3f\n", lat->mean / 1e6,
           lat->median / 1e6, lat->p90 / 1e6, lat->p99 / 1e6);
    printf("            sd %.3f  cv %.2f%%  min %.3f  max %.3f\n", lat->sd / 1e6, lat->cv * 100,
           lat->min / 1e6, lat->max / 1e6);
    if (x->m.device_ns)
        printf("kernel ms:  mean %.3f  median %.3f  p99 %.3f\n", dev->mean / 1e6, dev->median / 1e6,
               dev->p99 / 1e6);
    printf("throughput: %.2f items/s\n", throughput);
    print_memory(&x->m);
    if (isfinite(x->m.precision_loss))
        printf("precision:  precision_loss %.4f%%\n", x->m.precision_loss);
    if (nv == 0) {
        printf("\nvalidations: none yet against service '%s'\n", x->service);
        return;
    }
    printf("\nlast %zu validation%s of service '%s' (newest first):\n", nv, nv == 1 ? "" : "s",
           x->service);
    int wt = 3;
    for (size_t i = 0; i < nv; i++)
        wt = width(v[i].baseline_tag ? v[i].baseline_tag : "-", wt);
    printf("  %-20s  %-*s  %-12s  %4s  %s\n", "time", wt, "tag", "verdict", "exit", "alert");
    for (size_t i = 0; i < nv; i++) {
        char buf[256];
        printf("  %-20s  %-*s  %-12s  %4d  %s\n", v[i].created_at, wt, or_dash(v[i].baseline_tag),
               v[i].verdict, v[i].exit_code, alert_status(&v[i], buf, sizeof buf));
    }
}

static int cmd_show(int argc, char **argv)
{
    const char *cmd = "baseline show";
    struct cp_args a;
    int rc = 0;
    if (!parse(cmd, show_options, N_OF(show_options),
               "baseline show --service NAME [--tag TAG|latest] [--json] [--kb FILE]",
               "Show a baseline's figures (samples, mean, median, p90, p99, sd, CV,\n"
               "throughput, memory, model hash and path, config id, source trace) and the\n"
               "last validations against its service.",
               argc, argv, &a, &rc))
        return rc;
    const char *service = require(cmd, &a, OPT_SERVICE, "--service NAME");
    if (!service)
        return 2;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_kb_baseline x;
    memset(&x, 0, sizeof x);
    struct cp_kb_validation *v = NULL;
    size_t nv = 0;
    struct cp_summary lat, dev;
    if (cp_kb_check_service(service, &d) != CP_OK ||
        cp_kb_open(cp_args_get(&a, OPT_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_get(kb, service, cp_args_get(&a, OPT_TAG), &x, &d) != CP_OK ||
        cp_kb_validation_list(kb, service, SHOW_VALIDATIONS, &v, &nv, &d) != CP_OK ||
        summarize(x.m.latency_ns, x.m.n, &lat, &d) != CP_OK ||
        summarize(x.m.device_ns, x.m.n, &dev, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    int batch = x.m.batch > 0 ? x.m.batch : 1;
    double throughput = lat.mean > 0 ? batch * 1e9 / lat.mean : NAN;
    if (cp_args_has(&a, OPT_JSON))
        show_json(&x, &lat, &dev, throughput, v, nv);
    else
        show_text(kb, &x, &lat, &dev, throughput, v, nv);
out:
    cp_kb_validation_list_free(v, nv);
    cp_kb_baseline_release(&x);
    cp_kb_close(kb);
    return rc;
}

/* ---- rm -------------------------------------------------------------------- */

static int cmd_rm(int argc, char **argv)
{
    const char *cmd = "baseline rm";
    struct cp_args a;
    int rc = 0;
    if (!parse(cmd, rm_options, N_OF(rm_options),
               "baseline rm --service NAME --tag TAG [--kb FILE]",
               "Remove one baseline. Validations made against it stay in the knowledge base\n"
               "with its tag.",
               argc, argv, &a, &rc))
        return rc;
    const char *service = require(cmd, &a, OPT_SERVICE, "--service NAME");
    if (!service)
        return 2;
    const char *tag = require(cmd, &a, OPT_TAG, "--tag TAG");
    if (!tag)
        return 2;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    if (cp_kb_check_service(service, &d) != CP_OK ||
        cp_kb_open(cp_args_get(&a, OPT_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_remove(kb, service, tag, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    printf("removed baseline %s/%s from %s\n", service, tag, cp_kb_path(kb));
out:
    cp_kb_close(kb);
    return rc;
}

/* ---- dispatch -------------------------------------------------------------- */

/* Sorted by name. */
static const struct cp_subcommand subcommands[] = {
    {"list", cmd_list},
    {"rm", cmd_rm},
    {"set", cmd_set},
    {"show", cmd_show},
};

int cp_cmd_baseline(int argc, char **argv)
{
    return cp_cli_dispatch("baseline", subcommands, N_OF(subcommands), "set, list, show, rm", usage,
                           argc, argv);
}
