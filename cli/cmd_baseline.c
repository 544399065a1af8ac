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
#include "cli/output.h"
#include "knowledge/kb.h"
#include "stats/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Validations shown by `show`. */
#define SHOW_VALIDATIONS 10

enum {
    OPT_REPLACE = 1,
    OPT_TAG,
    OPT_TRACE,
};

#define EXIT_CODES_KB                                                                              \
    "0 ok, 2 bad usage or input (a service, tag or trace that is not right), 3 environment "       \
    "failure (the knowledge base cannot be opened or written)"

static const struct cp_opt set_own[] = {
    {"replace", 0, CP_OPT_FLAG, OPT_REPLACE, NULL, "overwrite a baseline with the same tag"},
    {"tag", 0, CP_OPT_VALUE, OPT_TAG, "TAG", "name of the baseline (default: b1, b2, ...)"},
    {"trace", 0, CP_OPT_VALUE, OPT_TRACE, "T.db", "trace store from cannprof bench --trace"},
};
static const struct cp_opt_use set_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print the stored baseline as JSON (as 'show --json' does)"},
    {CP_SO_KB, NULL},
    {CP_SO_RUN, "run of the trace to keep (default: the last)"},
    {CP_SO_SERVICE, "the service the baseline belongs to"},
};
static const struct cp_command_opts SET = {
    .cmd = "baseline set",
    .own = set_own,
    .n_own = sizeof set_own / sizeof set_own[0],
    .shared = set_shared,
    .n_shared = sizeof set_shared / sizeof set_shared[0],
    .usage = "usage: cannprof baseline set --service NAME --trace T.db [--tag TAG] [--run N]\n"
             "                             [--replace] [--kb FILE] [--json]\n\n"
             "Copy the figures of one run of a trace store (the last unless --run) into the\n"
             "knowledge base as the service's baseline. Without --tag the baseline is tagged\n"
             "b1, b2, ... An existing tag is only overwritten with --replace.\n",
    .exit_codes = "0 stored, 2 bad usage or input (a trace without samples, a tag that exists "
                  "without --replace), 3 environment failure (the knowledge base cannot be opened "
                  "or written)",
};

static const struct cp_opt_use list_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, NULL},
    {CP_SO_KB, NULL},
    {CP_SO_SERVICE, "only this service's baselines"},
};
static const struct cp_command_opts LIST = {
    .cmd = "baseline list",
    .shared = list_shared,
    .n_shared = sizeof list_shared / sizeof list_shared[0],
    .usage = "usage: cannprof baseline list [--service NAME] [--json] [--kb FILE]\n\n"
             "List the baselines of every service (or of one): service, tag, when it was\n"
             "set, samples, median latency and model. A service without baselines lists\n"
             "nothing (exit 0).\n",
    .exit_codes = EXIT_CODES_KB,
};

static const struct cp_opt show_own[] = {
    {"tag", 0, CP_OPT_VALUE, OPT_TAG, "TAG", "which baseline (default: latest)"},
};
static const struct cp_opt_use show_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, NULL},
    {CP_SO_KB, NULL},
    {CP_SO_SERVICE, "the service the baseline belongs to"},
};
static const struct cp_command_opts SHOW = {
    .cmd = "baseline show",
    .own = show_own,
    .n_own = sizeof show_own / sizeof show_own[0],
    .shared = show_shared,
    .n_shared = sizeof show_shared / sizeof show_shared[0],
    .usage =
        "usage: cannprof baseline show --service NAME [--tag TAG|latest] [--json] [--kb FILE]\n\n"
        "Show a baseline's figures (samples, mean, median, p90, p99, sd, CV,\n"
        "throughput, memory, model hash and path, config id, source trace) and the\n"
        "last validations against its service.\n",
    .exit_codes = EXIT_CODES_KB,
};

static const struct cp_opt rm_own[] = {
    {"tag", 0, CP_OPT_VALUE, OPT_TAG, "TAG", "the baseline to remove"},
};
static const struct cp_opt_use rm_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print what was removed as JSON"},
    {CP_SO_KB, NULL},
    {CP_SO_SERVICE, "the service the baseline belongs to"},
};
static const struct cp_command_opts RM = {
    .cmd = "baseline rm",
    .own = rm_own,
    .n_own = sizeof rm_own / sizeof rm_own[0],
    .shared = rm_shared,
    .n_shared = sizeof rm_shared / sizeof rm_shared[0],
    .usage = "usage: cannprof baseline rm --service NAME --tag TAG [--kb FILE] [--json]\n\n"
             "Remove one baseline. Validations made against it stay in the knowledge base\n"
             "with its tag.\n",
    .exit_codes = EXIT_CODES_KB,
};

#define N_OF(t) (sizeof t / sizeof t[0])

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cannprof baseline set  --service NAME --trace T.db [--tag TAG] [--run N]\n"
            "                              [--replace] [--kb FILE] [--json]\n"
            "       cannprof baseline list [--service NAME] [--json] [--kb FILE]\n"
            "       cannprof baseline show --service NAME [--tag TAG|latest] [--json] [--kb FILE]\n"
            "       cannprof baseline rm   --service NAME --tag TAG [--kb FILE] [--json]\n\n"
            "Keep the figures of a benchmark run (latency and kernel-time samples, memory,\n"
            "model and config) as a service's baseline in the knowledge base, for\n"
            "'cannprof validate' to compare later runs against. The figures are copied, so a\n"
            "baseline outlives its trace file. Each validation against a service is recorded\n"
            "and 'show' lists the latest ones.\n\n"
            "The knowledge base is $XDG_DATA_HOME/cannprof/kb.sqlite (else\n"
            "~/.local/share/cannprof/kb.sqlite) unless --kb FILE is given.\n"
            "'cannprof baseline <subcommand> --help' shows a subcommand's options.\n\n"
            "exit codes: " EXIT_CODES_KB "\n");
}

/* Parse a subcommand's options; prints help (*rc 0) or the error (*rc 2).
 * Returns whether to go on. */
static bool parse(const struct cp_command_opts *c, int argc, char **argv, struct cp_args *a,
                  int *rc)
{
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_args_parse_cmd(c, argc, argv, a, &d) != CP_OK) {
        cp_cli_error(c->cmd, d.msg);
        *rc = cp_status_exit_code(d.status);
        return false;
    }
    if (cp_args_has(a, CP_SO_HELP)) {
        cp_cmd_help(stdout, c);
        *rc = 0;
        return false;
    }
    if (a->n_positional > 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "unexpected argument '%.100s'; see 'cannprof %s --help'",
                 a->positional[0], c->cmd);
        cp_cli_error(c->cmd, msg);
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

/* A string, or null when there is none or it is empty. */
static json_t *str_or_null(const char *s)
{
    return s && *s ? cp_json_str(s) : json_null();
}

/* Print j as a subcommand's --json output, then release it. */
static int print_json(json_t *j, const char *cmd)
{
    int rc = cp_out_json(j, cmd);
    json_decref(j);
    return rc;
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

static json_t *baseline_json(const struct cp_kb_baseline *x, const struct cp_summary *lat,
                             const struct cp_summary *dev, double throughput);
static double throughput_of(const struct cp_kb_baseline *x, const struct cp_summary *lat);

/* ---- set ------------------------------------------------------------------- */

static int cmd_set(int argc, char **argv)
{
    const char *cmd = SET.cmd;
    struct cp_args a;
    int rc = 0;
    if (!parse(&SET, argc, argv, &a, &rc))
        return rc;
    const char *service = require(cmd, &a, CP_SO_SERVICE, "--service NAME");
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
    int64_t run = cp_args_int(&a, CP_SO_RUN, -1);

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
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_set(kb, service, tag, abs_trace ? abs_trace : trace, &m,
                           cp_args_has(&a, OPT_REPLACE), &id, &d) != CP_OK ||
        cp_kb_baseline_get_id(kb, id, &b, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    struct cp_summary s, dev;
    if (summarize(b.m.latency_ns, b.m.n, &s, &d) != CP_OK ||
        summarize(b.m.device_ns, b.m.n, &dev, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (cp_args_has(&a, CP_SO_JSON)) {
        rc = print_json(baseline_json(&b, &s, &dev, throughput_of(&b, &s)), cmd);
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

static json_t *list_json(const struct cp_kb_baseline *v, size_t n)
{
    json_t *arr = json_array();
    bool ok = arr != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        const struct cp_kb_baseline *x = &v[i];
        json_t *o = json_object();
        ok = o && cp_json_set_int(o, "id", x->id) && cp_json_set_str(o, "service", x->service) &&
             cp_json_set_str(o, "tag", x->tag) && cp_json_set_str(o, "created_at", x->created_at) &&
             cp_json_set_int(o, "n", (int64_t)x->m.n) &&
             cp_json_set_num(o, "median_ms", x->median_ns / 1e6) &&
             cp_json_set_num(o, "mean_ms", x->mean_ns / 1e6) &&
             cp_json_set_num(o, "p99_ms", x->p99_ns / 1e6) &&
             cp_json_set(o, "model_path", str_or_null(x->m.model_path)) &&
             cp_json_set(o, "model_hash", str_or_null(x->m.model_hash)) &&
             cp_json_set(o, "config_id", str_or_null(x->m.config_id)) &&
             cp_json_set(o, "trace", str_or_null(x->trace_path)) &&
             cp_json_set_int(o, "run_id", x->m.run_id);
        if (ok)
            ok = cp_json_push(arr, o); /* steals o */
        else
            json_decref(o);
    }
    if (ok)
        return arr;
    json_decref(arr);
    return NULL;
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
    const char *cmd = LIST.cmd;
    struct cp_args a;
    int rc = 0;
    if (!parse(&LIST, argc, argv, &a, &rc))
        return rc;
    const char *service = cp_args_get(&a, CP_SO_SERVICE);
    struct cp_diag d;
    cp_diag_init(&d);
    if (service && cp_kb_check_service(service, &d) != CP_OK)
        return fail(cmd, &d);
    struct cp_kb *kb = NULL;
    struct cp_kb_baseline *v = NULL;
    size_t n = 0;
    char **names = NULL;
    size_t n_names = 0;
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_list(kb, service, &v, &n, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (cp_args_has(&a, CP_SO_JSON)) {
        rc = print_json(list_json(v, n), cmd);
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

/* {"mean","median","p90","p99","sd","min","max" in ms,"cv"} */
static json_t *summary_json(const struct cp_summary *s)
{
    const double v[] = {s->mean, s->median, s->p90, s->p99, s->sd, s->min, s->max};
    const char *k[] = {"mean", "median", "p90", "p99", "sd", "min", "max"};
    json_t *o = json_object();
    bool ok = o != NULL;
    for (size_t i = 0; ok && i < sizeof v / sizeof v[0]; i++)
        ok = cp_json_set_num(o, k[i], v[i] / 1e6);
    if (ok && cp_json_set_num(o, "cv", s->cv))
        return o;
    json_decref(o);
    return NULL;
}

static json_t *validation_json(const struct cp_kb_validation *x)
{
    json_t *o = json_object(), *alert = json_object();
    bool ok = o && alert && cp_json_set_bool(alert, "attempted", x->alert_attempted) &&
              cp_json_set_bool(alert, "delivered", x->alert_delivered) &&
              cp_json_set(alert, "error", str_or_null(x->alert_error)) &&
              cp_json_set_int(o, "id", x->id) && cp_json_set_str(o, "created_at", x->created_at) &&
              cp_json_set(o, "baseline_id",
                          x->baseline_id > 0 ? cp_json_int(x->baseline_id) : json_null()) &&
              cp_json_set(o, "baseline_tag", str_or_null(x->baseline_tag)) &&
              cp_json_set(o, "trace", str_or_null(x->trace_path)) &&
              cp_json_set_str(o, "verdict", x->verdict) &&
              cp_json_set_int(o, "exit_code", x->exit_code);
    if (ok) {
        ok = cp_json_set(o, "alert", alert);
        alert = NULL;
    }
    ok = ok && cp_json_set(o, "figures", cp_json_embed(x->figures_json));
    json_decref(alert);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

/* Items per second at the mean latency; NaN when unknown. */
static double throughput_of(const struct cp_kb_baseline *x, const struct cp_summary *lat)
{
    int batch = x->m.batch > 0 ? x->m.batch : 1;
    return lat->mean > 0 ? batch * 1e9 / lat->mean : NAN;
}

/* A baseline's figures: what `show --json` prints before its validations,
 * and `set --json` prints. NULL when out of memory. */
static json_t *baseline_json(const struct cp_kb_baseline *x, const struct cp_summary *lat,
                             const struct cp_summary *dev, double throughput)
{
    json_t *o = json_object(), *src = json_object(), *model = json_object(), *mem = json_object();
    bool ok = o && src && model && mem && cp_json_set(src, "trace", str_or_null(x->trace_path)) &&
              cp_json_set_int(src, "run_id", x->m.run_id) &&
              cp_json_set(src, "kind", str_or_null(x->m.kind)) &&
              cp_json_set(src, "recorded_at", str_or_null(x->m.created_at)) &&
              cp_json_set(model, "path", str_or_null(x->m.model_path)) &&
              cp_json_set(model, "hash", str_or_null(x->m.model_hash)) &&
              cp_json_set_int(mem, "weight_bytes", (int64_t)x->m.weight_bytes) &&
              cp_json_set_int(mem, "arena_bytes", (int64_t)x->m.arena_bytes) &&
              cp_json_set_int(mem, "peak_bytes", (int64_t)x->m.peak_bytes) &&
              cp_json_set_int(mem, "peak_rss_bytes", (int64_t)x->m.peak_rss_bytes) &&
              cp_json_set_int(o, "id", x->id) && cp_json_set_str(o, "service", x->service) &&
              cp_json_set_str(o, "tag", x->tag) && cp_json_set_str(o, "created_at", x->created_at);
    if (ok) {
        ok = cp_json_set(o, "source", src) && cp_json_set(o, "model", model);
        src = model = NULL;
    }
    ok = ok && cp_json_set(o, "config_id", str_or_null(x->m.config_id)) &&
         cp_json_set_int(o, "batch", x->m.batch) && cp_json_set_int(o, "threads", x->m.threads) &&
         cp_json_set_int(o, "n", (int64_t)x->m.n) &&
         cp_json_set(o, "latency_ms", summary_json(lat)) &&
         cp_json_set(o, "device_ms", x->m.device_ns ? summary_json(dev) : json_null()) &&
         cp_json_set_num(o, "throughput_items_per_s", throughput);
    if (ok) {
        ok = cp_json_set(o, "memory", mem);
        mem = NULL;
    }
    ok = ok && cp_json_set_num(o, "precision_loss", x->m.precision_loss);
    json_decref(src);
    json_decref(model);
    json_decref(mem);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

static json_t *show_json(const struct cp_kb_baseline *x, const struct cp_summary *lat,
                         const struct cp_summary *dev, double throughput,
                         const struct cp_kb_validation *v, size_t nv)
{
    json_t *o = baseline_json(x, lat, dev, throughput), *arr = json_array();
    bool ok = o && arr;
    for (size_t i = 0; ok && i < nv; i++)
        ok = cp_json_push(arr, validation_json(&v[i]));
    if (ok) {
        ok = cp_json_set(o, "validations", arr);
        arr = NULL;
    }
    json_decref(arr);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
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
    const char *cmd = SHOW.cmd;
    struct cp_args a;
    int rc = 0;
    if (!parse(&SHOW, argc, argv, &a, &rc))
        return rc;
    const char *service = require(cmd, &a, CP_SO_SERVICE, "--service NAME");
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
        cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_get(kb, service, cp_args_get(&a, OPT_TAG), &x, &d) != CP_OK ||
        cp_kb_validation_list(kb, service, SHOW_VALIDATIONS, &v, &nv, &d) != CP_OK ||
        summarize(x.m.latency_ns, x.m.n, &lat, &d) != CP_OK ||
        summarize(x.m.device_ns, x.m.n, &dev, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    double throughput = throughput_of(&x, &lat);
    if (cp_args_has(&a, CP_SO_JSON))
        rc = print_json(show_json(&x, &lat, &dev, throughput, v, nv), cmd);
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
    const char *cmd = RM.cmd;
    struct cp_args a;
    int rc = 0;
    if (!parse(&RM, argc, argv, &a, &rc))
        return rc;
    const char *service = require(cmd, &a, CP_SO_SERVICE, "--service NAME");
    if (!service)
        return 2;
    const char *tag = require(cmd, &a, OPT_TAG, "--tag TAG");
    if (!tag)
        return 2;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    if (cp_kb_check_service(service, &d) != CP_OK ||
        cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_remove(kb, service, tag, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (cp_args_has(&a, CP_SO_JSON)) {
        json_t *j = json_object();
        if (j &&
            !(cp_json_set_str(j, "service", service) && cp_json_set_str(j, "tag", tag) &&
              cp_json_set_str(j, "kb", cp_kb_path(kb)) && cp_json_set_bool(j, "removed", true))) {
            json_decref(j);
            j = NULL;
        }
        rc = print_json(j, cmd);
    } else
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
