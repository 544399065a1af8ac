/* cannprof validate: is the after run better, worse or the same as the
 * before run (or a service's baseline)? A CI gate: exit 1 on a regression. */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/validate.h"
#include "knowledge/kb.h"
#include "notify/notify.h"
#include "runner/probe.h"
#include "stats/stats.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_AB = 1,
    OPT_AFTER,
    OPT_AFTER_RUN,
    OPT_ALERT,
    OPT_ALL_ITERATIONS,
    OPT_ALPHA,
    OPT_BASELINE,
    OPT_BEFORE,
    OPT_BEFORE_RUN,
    OPT_FORCE,
    OPT_HELP,
    OPT_JSON,
    OPT_JUNIT,
    OPT_KB,
    OPT_MARKDOWN,
    OPT_METRICS,
    OPT_NO_NOISE,
    OPT_PRECISION_TOL,
    OPT_RESAMPLES,
    OPT_SEED,
    OPT_SERVICE,
    OPT_TEST,
    OPT_THRESHOLD,
    OPT_TRACE,
    OPT_WEBHOOK,
    OPT_WEBHOOK_FORMAT,
    OPT_WEBHOOK_SECRET_FILE,
};

static const struct cp_opt options[] = {
    {"ab", 0, CP_OPT_VALUE, OPT_AB, "AB.db", "the two runs of `cannprof bench A --vs B --trace`"},
    {"after", 0, CP_OPT_VALUE, OPT_AFTER, "B.db", "trace of the new version"},
    {"after-run", 0, CP_OPT_VALUE, OPT_AFTER_RUN, "N", "run of the after trace (default: last)"},
    {"alert-on-regression", 0, CP_OPT_FLAG, OPT_ALERT, NULL,
     "POST an alert to the webhook when a metric regressed"},
    {"all-iterations", 0, CP_OPT_FLAG, OPT_ALL_ITERATIONS, NULL,
     "compare every iteration, also those the interference probe found disturbed"},
    {"alpha", 0, CP_OPT_VALUE, OPT_ALPHA, "A", "significance level (default 0.05)"},
    {"baseline", 0, CP_OPT_VALUE, OPT_BASELINE, "TAG|latest",
     "compare --trace with a baseline of --service from the knowledge base"},
    {"before", 0, CP_OPT_VALUE, OPT_BEFORE, "A.db", "trace of the reference version"},
    {"before-run", 0, CP_OPT_VALUE, OPT_BEFORE_RUN, "N", "run of the before trace (default: last)"},
    {"force", 'f', CP_OPT_FLAG, OPT_FORCE, NULL, "compare traces of different models anyway"},
    {"help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"},
    {"json", 0, CP_OPT_FLAG, OPT_JSON, NULL, "print the result as JSON"},
    {"junit", 0, CP_OPT_VALUE, OPT_JUNIT, "FILE",
     "also write JUnit XML: one testcase per metric, failing on a regression"},
    {"kb", 0, CP_OPT_VALUE, OPT_KB, "FILE",
     "knowledge base (default $XDG_DATA_HOME/cannprof/kb.sqlite)"},
    {"markdown", 0, CP_OPT_FLAG, OPT_MARKDOWN, NULL, "print the result as Markdown"},
    {"metrics", 'm', CP_OPT_VALUE, OPT_METRICS, "LIST",
     "latency,p99,throughput,device_util,memory,precision (default: all the traces have)"},
    {"no-noise-floor", 0, CP_OPT_FLAG, OPT_NO_NOISE, NULL,
     "against a baseline: do not raise the threshold to the service's run-to-run noise"},
    {"precision-tolerance", 0, CP_OPT_VALUE, OPT_PRECISION_TOL, "PP",
     "precision_loss growth that counts as a regression, percentage points (default 0.1)"},
    {"resamples", 0, CP_OPT_VALUE, OPT_RESAMPLES, "N", "bootstrap resamples (default 10000)"},
    {"seed", 0, CP_OPT_VALUE, OPT_SEED, "N", "bootstrap seed (default 1)"},
    {"service", 0, CP_OPT_VALUE, OPT_SERVICE, "NAME", "service whose baseline to use"},
    {"statistical_test", 0, CP_OPT_VALUE, OPT_TEST, "TEST", "alias of --test"},
    {"test", 0, CP_OPT_VALUE, OPT_TEST, "TEST",
     "mann-whitney (default), welch, t-test or bootstrap"},
    {"threshold", 0, CP_OPT_VALUE, OPT_THRESHOLD, "P%",
     "smallest change that matters (default 2%)"},
    {"trace", 0, CP_OPT_VALUE, OPT_TRACE, "NEW.db", "trace to check against --baseline"},
    {"webhook", 0, CP_OPT_VALUE, OPT_WEBHOOK, "URL",
     "POST each result there (only regressions with --alert-on-regression; "
     "default $CANNPROF_WEBHOOK)"},
    {"webhook-format", 0, CP_OPT_VALUE, OPT_WEBHOOK_FORMAT, "F",
     "generic (default), slack, feishu or dingtalk"},
    {"webhook-secret-file", 0, CP_OPT_VALUE, OPT_WEBHOOK_SECRET_FILE, "FILE",
     "sign the alert with the secret on FILE's first line (default $CANNPROF_WEBHOOK_SECRET)"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void help(void)
{
    printf("usage: cannprof validate --before A.db --after B.db [options]\n"
           "       cannprof validate --ab AB.db [options]\n"
           "       cannprof validate --baseline TAG|latest --service NAME --trace NEW.db\n"
           "                         [--alert-on-regression] [--webhook URL] [options]\n\n"
           "Compare two measured runs metric by metric: before, after, change in percent with\n"
           "its 95%% confidence interval, p-value, and a verdict. A change counts only when it\n"
           "is significant at --alpha AND at least --threshold: smaller significant changes\n"
           "are 'unchanged'; a large change that is not significant is 'inconclusive', with\n"
           "the samples per side that would settle it. Against a baseline, the result is\n"
           "stored in the knowledge base. See docs/validation.md.\n\n"
           "When both runs recorded the interference probe (cannprof bench does by\n"
           "default), the timing metrics compare only the iterations that ran while no\n"
           "neighbour competed for the CPU: those whose probe took at most 1.15x the lower\n"
           "of the two runs' probe floors. A run with fewer than 20 of them gives no timing\n"
           "verdict (inconclusive, with the reason). --all-iterations compares every one.\n\n"
           "exit codes: 0 no regression, 1 a metric regressed, 2 bad input,\n"
           "            3 the verdict was fine but the alert could not be delivered\n\n"
           "options:\n");
    cp_opts_print_help(stdout, options, N_OPTIONS);
}

struct metric_def {
    enum cp_vmetric id;
    const char *name;
    const char *unit;
    double scale;
    enum cp_better better;
};

static const struct metric_def metric_defs[CP_VM_COUNT] = {
    {CP_VM_LATENCY, "latency", "ms", 1e-6, CP_BETTER_LOWER},
    {CP_VM_P99, "p99", "ms", 1e-6, CP_BETTER_LOWER},
    {CP_VM_THROUGHPUT, "throughput", "items/s", 1.0, CP_BETTER_HIGHER},
    {CP_VM_DEVICE_UTIL, "device_util", "%", 100.0, CP_BETTER_HIGHER},
    {CP_VM_MEMORY, "memory", "MiB", 1.0 / (1024.0 * 1024.0), CP_BETTER_LOWER},
    {CP_VM_PRECISION, "precision", "% loss", 1.0, CP_BETTER_LOWER},
};

/* "latency,p99" -> wanted[]. Errors name the unknown metric and the list. */
static enum cp_status parse_metrics(const char *s, bool wanted[CP_VM_COUNT], struct cp_diag *d)
{
    memset(wanted, 0, CP_VM_COUNT * sizeof *wanted);
    char *copy = cp_strdup(s);
    if (!copy)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    size_t n = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && st == CP_OK;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        size_t i = 0;
        while (i < CP_VM_COUNT && strcmp(tok, metric_defs[i].name) != 0)
            i++;
        if (i == CP_VM_COUNT)
            st = cp_diag_set(d, CP_ERR_INVALID,
                             "--metrics: unknown metric '%s'; known: latency, p99, throughput, "
                             "device_util, memory, precision",
                             tok);
        else
            wanted[i] = true, n++;
    }
    free(copy);
    if (st == CP_OK && n == 0)
        st = cp_diag_set(d, CP_ERR_INVALID, "--metrics: give at least one metric");
    return st;
}

/* "2%", "2", "0.5%" -> percent. */
static bool parse_percent(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0)
        return false;
    if (*end == '%')
        end++;
    if (*end != '\0')
        return false;
    *out = v;
    return true;
}

/* One side of the comparison: a trace's run, or a baseline's copy. */
struct side {
    const char *label;
    struct cp_run_metrics own; /* when read from a trace */
    struct cp_run_metrics *m;
};

static enum cp_status load_run(const char *path, const char *run_text, int64_t run, struct side *s,
                               struct cp_diag *d)
{
    int64_t r = run;
    if (run_text && (!cp_parse_i64(run_text, &r) || r < 1))
        return cp_diag_set(d, CP_ERR_INVALID, "run '%s' is not a run id (1, 2, ...)", run_text);
    if (!cp_path_exists(path))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: no such file", path);
    struct cp_trace_store *store = NULL;
    enum cp_status st = cp_trace_store_open_ro(path, &store, d);
    if (st == CP_OK)
        st = cp_trace_store_run_metrics(store, r, &s->own, d);
    cp_trace_store_close(store);
    if (st != CP_OK)
        return st == CP_ERR_IO ? CP_ERR_INVALID : st;
    s->label = path;
    s->m = &s->own;
    if (s->own.n == 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: run %lld has no latency samples; record them with "
                           "`cannprof bench MODEL --trace %s`",
                           path, (long long)s->own.run_id, path);
    return CP_OK;
}

/* The two runs of an A/B trace, named by its meta keys. */
static enum cp_status load_ab(const char *path, struct side *b, struct side *a, struct cp_diag *d)
{
    if (!cp_path_exists(path))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: no such file", path);
    struct cp_trace_store *store = NULL;
    char *rb = NULL, *ra = NULL;
    enum cp_status st = cp_trace_store_open_ro(path, &store, d);
    if (st == CP_OK && (st = cp_trace_store_get_meta(store, "ab.before_run", &rb, d)) == CP_OK &&
        (st = cp_trace_store_get_meta(store, "ab.after_run", &ra, d)) == CP_OK && (!rb || !ra))
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s is not an A/B trace (no ab.before_run/ab.after_run meta); record "
                         "one with `cannprof bench A.om --vs B.om --trace %s`",
                         path, path);
    cp_trace_store_close(store);
    if (st == CP_OK && (st = load_run(path, rb, 0, b, d)) == CP_OK)
        st = load_run(path, ra, 0, a, d);
    free(rb);
    free(ra);
    return st;
}

/* Per-iteration values of a metric. OUT: *v (caller frees), *n. */
static enum cp_status metric_values(enum cp_vmetric id, const struct cp_run_metrics *m, double **v,
                                    size_t *n, struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    size_t cnt = id == CP_VM_MEMORY || id == CP_VM_PRECISION ? 1 : m->n;
    double *x = cp_calloc(cnt ? cnt : 1, sizeof *x);
    if (!x)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    int batch = m->batch > 0 ? m->batch : 1;
    for (size_t i = 0; i < cnt; i++) {
        double lat = (double)m->latency_ns[i < m->n ? i : 0];
        switch (id) {
        case CP_VM_LATENCY:
        case CP_VM_P99:
            x[i] = lat;
            break;
        case CP_VM_THROUGHPUT:
            x[i] = lat > 0 ? (double)batch * 1e9 / lat : 0;
            break;
        case CP_VM_DEVICE_UTIL:
            x[i] = lat > 0 ? (double)m->device_ns[i] / lat : 0;
            break;
        case CP_VM_MEMORY:
            x[i] = (double)(m->weight_bytes + m->arena_bytes);
            break;
        case CP_VM_PRECISION:
            x[i] = m->precision_loss;
            break;
        }
    }
    *v = x;
    *n = cnt;
    return CP_OK;
}

/* Which metrics both sides can give. Explicitly asked-for metrics that a
 * side lacks are an error naming it. */
static enum cp_status pick_metrics(bool asked, bool wanted[CP_VM_COUNT], const struct side *b,
                                   const struct side *a, struct cp_diag *d)
{
    const struct side *sides[2] = {b, a};
    for (int s = 0; s < 2; s++) {
        const struct cp_run_metrics *m = sides[s]->m;
        const char *missing = NULL;
        if (wanted[CP_VM_DEVICE_UTIL] && !m->device_ns)
            missing = "device_util needs kernel events: record the trace with `cannprof bench "
                      "--trace`";
        else if (wanted[CP_VM_PRECISION] && isnan(m->precision_loss))
            missing = "precision needs a precision_loss counter in the run";
        if (!missing)
            continue;
        if (asked)
            return cp_diag_set(d, CP_ERR_INVALID, "%s (run %lld): %s", sides[s]->label,
                               (long long)m->run_id, missing);
        if (!m->device_ns)
            wanted[CP_VM_DEVICE_UTIL] = false;
        if (isnan(m->precision_loss))
            wanted[CP_VM_PRECISION] = false;
    }
    return CP_OK;
}

static enum cp_status compare_all(struct cp_vresult *r, const bool wanted[CP_VM_COUNT],
                                  struct cp_diag *d)
{
    for (int i = 0; i < CP_VM_COUNT; i++) {
        if (!wanted[i])
            continue;
        const struct metric_def *md = &metric_defs[i];
        struct cp_vrow *row = &r->rows[r->n_rows];
        row->metric = md->id;
        row->name = md->name;
        row->unit = md->unit;
        row->scale = md->scale;
        double *xb = NULL, *xa = NULL;
        size_t nb = 0, na = 0;
        enum cp_status st = metric_values(md->id, r->before, &xb, &nb, d);
        if (st == CP_OK)
            st = metric_values(md->id, r->after, &xa, &na, d);
        struct cp_verdict_opts o = r->opts;
        o.quantile = md->id == CP_VM_P99 ? 0.99 : 0.0;
        if (st == CP_OK && md->id == CP_VM_PRECISION) {
            /* Percentage points: a loss going from 0.1% to 0.2% is +0.1 pp,
             * not +100%. */
            o.threshold_pct = r->precision_tolerance;
            st = cp_verdict_compare(xb, 1, xa, 1, md->better, &o, &row->c, d);
            row->c.delta_pct = xa[0] - xb[0];
            row->c.ci_lo_pct = row->c.ci_hi_pct = row->c.delta_pct;
            row->c.verdict = row->c.delta_pct > r->precision_tolerance    ? CP_VERDICT_REGRESSED
                             : row->c.delta_pct < -r->precision_tolerance ? CP_VERDICT_IMPROVED
                                                                          : CP_VERDICT_UNCHANGED;
        } else if (st == CP_OK)
            st = cp_verdict_compare(xb, nb, xa, na, md->better, &o, &row->c, d);
        free(xb);
        free(xa);
        if (st != CP_OK) {
            struct cp_diag inner = *d;
            cp_diag_init(d);
            return cp_diag_set(d, st, "metric %s: %s", md->name, inner.msg);
        }
        r->n_rows++;
    }
    r->overall = cp_vresult_overall(r);
    return CP_OK;
}

/* Keep the iterations of m flagged in keep[] (latency, kernel time and
 * probe arrays compacted in place). */
static void keep_flagged(struct cp_run_metrics *m, const bool *keep)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (!keep[i])
            continue;
        m->latency_ns[k] = m->latency_ns[i];
        if (m->device_ns)
            m->device_ns[k] = m->device_ns[i];
        m->probe_ns[k] = m->probe_ns[i];
        k++;
    }
    m->n = k;
}

/* Decide which iterations the timing metrics compare (struct cp_vprobe)
 * and, when the undisturbed ones, drop the others from both sides. Both
 * runs are judged against the lower of their two floors, so that a run
 * made entirely while the machine was busy (its own floor is the busy
 * level) is seen as such; with different thread counts the probes differ
 * in kind and each run keeps its own floor. */
static void select_iterations(struct side *b, struct side *a, bool all, bool interleaved,
                              struct cp_vprobe *p)
{
    memset(p, 0, sizeof *p);
    struct cp_run_metrics *m[2] = {b->m, a->m};
    bool *keep[2] = {NULL, NULL};
    for (int s = 0; s < 2; s++) {
        p->total[s] = p->kept[s] = m[s]->n;
        p->floor_ns[s] = m[s]->probe_ns ? cp_probe_floor(m[s]->probe_ns, m[s]->n) : 0;
    }
    if (m[0]->probe_ns && m[1]->probe_ns) {
        bool same_threads = m[0]->threads == m[1]->threads;
        uint64_t low = p->floor_ns[0] < p->floor_ns[1] ? p->floor_ns[0] : p->floor_ns[1];
        for (int s = 0; s < 2; s++) {
            p->reference_ns[s] = same_threads ? low : p->floor_ns[s];
            keep[s] = cp_calloc(m[s]->n ? m[s]->n : 1, sizeof *keep[s]);
            if (keep[s])
                p->kept[s] = cp_probe_mark_run(m[s]->probe_ns, m[s]->latency_ns, m[s]->n,
                                               p->reference_ns[s], keep[s]);
        }
    }
    if (all)
        snprintf(p->why, sizeof p->why, "--all-iterations");
    else if (interleaved)
        snprintf(p->why, sizeof p->why, "interleaved A/B rounds: both saw the same machine");
    else if (!m[0]->probe_ns || !m[1]->probe_ns)
        snprintf(p->why, sizeof p->why,
                 "the %s run has no interference probe (recorded with --no-probe or by an "
                 "older cannprof)",
                 m[0]->probe_ns ? "after" : "before");
    else if (!keep[0] || !keep[1])
        snprintf(p->why, sizeof p->why, "out of memory selecting undisturbed iterations");
    else if (p->kept[0] < CP_VALIDATE_MIN_UNDISTURBED || p->kept[1] < CP_VALIDATE_MIN_UNDISTURBED)
        p->too_few = true;
    else {
        keep_flagged(m[0], keep[0]);
        keep_flagged(m[1], keep[1]);
        p->used = true;
    }
    free(keep[0]);
    free(keep[1]);
}

/* With too few undisturbed iterations on a side, a timing difference may
 * be the machine's: no verdict on timing. */
static void timing_inconclusive(struct cp_vresult *r)
{
    if (!r->probe.too_few)
        return;
    for (size_t i = 0; i < r->n_rows; i++) {
        struct cp_vrow *row = &r->rows[i];
        if (row->metric == CP_VM_MEMORY || row->metric == CP_VM_PRECISION)
            continue;
        row->c.verdict = CP_VERDICT_INCONCLUSIVE;
        row->c.n_needed = 0;
    }
    r->overall = cp_vresult_overall(r);
}

/* Same model? The source-model hash recorded in the .om says; when a side
 * has none (an .onnx run unconverted), the model path does. */
static bool same_model(const struct cp_run_metrics *a, const struct cp_run_metrics *b)
{
    if (a->model_hash[0] && b->model_hash[0])
        return strcmp(a->model_hash, b->model_hash) == 0;
    const char *na = strrchr(a->model_path, '/'), *nb = strrchr(b->model_path, '/');
    return strcmp(na ? na + 1 : a->model_path, nb ? nb + 1 : b->model_path) == 0;
}

/* The run-to-run noise of a service, from its history: every earlier
 * validation recorded the latency change between the baseline and that
 * run. Most runs are of code whose speed did not change, so the robust
 * spread of those changes (MAD scaled to a standard deviation, which the
 * few real changes among them barely move) is how far two runs drift on
 * this machine; a change smaller than three times it is within the noise.
 * Needs at least 5 earlier validations (the last 60 count).
 * OUT: r->noise_floor_pct (NaN without enough history), r->noise_runs. */
static void noise_floor(struct cp_kb *kb, const char *service, struct cp_vresult *r)
{
    r->noise_floor_pct = NAN;
    r->noise_runs = 0;
    struct cp_kb_validation *v = NULL;
    size_t n = 0;
    if (cp_kb_validation_list(kb, service, 60, &v, &n, NULL) != CP_OK)
        return;
    double *x = cp_calloc(n ? n : 1, sizeof *x);
    size_t k = 0;
    for (size_t i = 0; x && i < n; i++) {
        json_t *f = v[i].figures_json ? json_loads(v[i].figures_json, 0, NULL) : NULL;
        json_t *lat = json_object_get(f, "latency");
        json_t *delta = json_object_get(lat, "delta_pct");
        if (json_is_number(delta) && isfinite(json_number_value(delta)))
            x[k++] = json_number_value(delta);
        json_decref(f);
    }
    struct cp_mad mad;
    if (k >= 5 && cp_stats_mad(x, k, &mad, NULL) == CP_OK) {
        r->noise_floor_pct = 3 * mad.scaled;
        r->noise_runs = k;
    }
    free(x);
    cp_kb_validation_list_free(v, n);
}

struct alerting {
    const char *url;
    const char *secret; /* NULL: unsigned */
    enum cp_webhook_format format;
    bool attempted, delivered;
    char error[1024];
};

static void send_alert(const struct cp_vresult *r, const char *service, const char *tag,
                       const char *trace, struct alerting *al)
{
    struct cp_buf text, figures, title;
    cp_buf_init(&text);
    cp_buf_init(&figures);
    cp_buf_init(&title);
    cp_validate_render_text(r, &text);
    cp_validate_render_figures(r, &figures);
    cp_buf_printf(&title, "cannprof: %s %s against baseline %s", service ? service : "service",
                  cp_verdict_name(r->overall), tag ? tag : "");
    struct cp_alert a = {
        .event = r->overall == CP_VERDICT_REGRESSED ? "regression" : "validation",
        .title = title.data,
        .service = service,
        .verdict = cp_verdict_name(r->overall),
        .text = text.data,
        .figures_json = figures.data,
        .trace_path = trace,
        .baseline_tag = tag,
    };
    struct cp_notify_opts o;
    cp_notify_opts_init(&o);
    o.url = al->url;
    o.format = al->format;
    o.secret = al->secret;
    struct cp_diag d;
    cp_diag_init(&d);
    int attempts = 0;
    al->attempted = true;
    if (cp_buf_status(&text) != CP_OK || cp_buf_status(&figures) != CP_OK ||
        cp_buf_status(&title) != CP_OK)
        snprintf(al->error, sizeof al->error, "out of memory building the alert");
    else if (cp_notify_send(&o, &a, &attempts, &d) == CP_OK)
        al->delivered = true;
    else
        snprintf(al->error, sizeof al->error, "%s", d.msg);
    cp_buf_release(&text);
    cp_buf_release(&figures);
    cp_buf_release(&title);
}

struct baseline_ctx {
    struct cp_kb *kb;
    struct cp_kb_baseline b;
    const char *service, *tag, *trace;
};

static enum cp_status record_validation(struct baseline_ctx *bc, const struct cp_vresult *r,
                                        int exit_code, const struct alerting *al, struct cp_diag *d)
{
    struct cp_buf figures;
    cp_buf_init(&figures);
    cp_validate_render_figures(r, &figures);
    struct cp_kb_validation v = {
        .service = bc->service,
        .baseline_id = bc->b.id,
        .baseline_tag = bc->b.tag,
        .trace_path = bc->trace,
        .verdict = cp_verdict_name(r->overall),
        .figures_json = figures.data ? figures.data : "{}",
        .exit_code = exit_code,
        .alert_attempted = al->attempted,
        .alert_delivered = al->delivered,
        .alert_error = al->error[0] ? al->error : NULL,
    };
    int64_t id;
    enum cp_status st = cp_buf_status(&figures);
    if (st == CP_OK)
        st = cp_kb_record_validation(bc->kb, &v, &id, d);
    cp_buf_release(&figures);
    return st;
}

/* The webhook signing secret: FILE's first line (without its line end), else
 * $CANNPROF_WEBHOOK_SECRET, else none (out ""). A file that cannot be read
 * or holds an empty first line is an error naming it. */
static bool read_secret(const char *file, char *out, size_t n, struct cp_diag *d)
{
    out[0] = '\0';
    if (!file) {
        const char *env = getenv("CANNPROF_WEBHOOK_SECRET");
        if (env && strlen(env) >= n) {
            cp_diag_set(d, CP_ERR_INVALID, "$CANNPROF_WEBHOOK_SECRET is longer than %zu bytes",
                        n - 1);
            return false;
        }
        snprintf(out, n, "%s", env ? env : "");
        return true;
    }
    FILE *f = fopen(file, "r");
    if (!f) {
        cp_diag_set(d, CP_ERR_INVALID, "--webhook-secret-file: %s: %s", file, strerror(errno));
        return false;
    }
    bool ok = fgets(out, (int)n, f) != NULL;
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
    if (!ok || !out[0]) {
        out[0] = '\0';
        cp_diag_set(d, CP_ERR_INVALID, "--webhook-secret-file: %s: the first line is empty", file);
        return false;
    }
    return true;
}

static int fail(struct cp_diag *d)
{
    cp_cli_error("validate", d->msg);
    return cp_status_exit_code(d->status);
}

struct inputs {
    const char *before, *after, *ab, *baseline, *service, *trace, *junit;
};

/* Check which mode the flags name, and that they are complete. */
static bool check_mode(const struct inputs *in, bool alert, struct cp_diag *d)
{
    bool pair = in->before || in->after;
    bool base = in->baseline || in->service || in->trace;
    int modes = (pair ? 1 : 0) + (in->ab ? 1 : 0) + (base ? 1 : 0);
    if (modes != 1) {
        cp_diag_set(d, CP_ERR_INVALID,
                    modes ? "give one of --before/--after, --ab, or --baseline/--service/--trace"
                          : "nothing to compare: give --before A.db --after B.db, --ab AB.db, "
                            "or --baseline TAG --service NAME --trace NEW.db");
        return false;
    }
    if (pair && (!in->before || !in->after)) {
        cp_diag_set(d, CP_ERR_INVALID, "give both --before and --after");
        return false;
    }
    if (base && (!in->baseline || !in->service || !in->trace)) {
        cp_diag_set(d, CP_ERR_INVALID, "--baseline, --service and --trace go together (missing %s)",
                    !in->baseline  ? "--baseline"
                    : !in->service ? "--service"
                                   : "--trace");
        return false;
    }
    if (alert && !base) {
        cp_diag_set(d, CP_ERR_INVALID,
                    "--alert-on-regression works with --baseline/--service/--trace");
        return false;
    }
    return true;
}

static bool parse_opts(const struct cp_args *args, struct cp_vresult *r, struct cp_diag *d)
{
    const char *v;
    cp_verdict_opts_init(&r->opts);
    r->precision_tolerance = 0.1;
    int64_t n;
    if ((v = cp_args_get(args, OPT_TEST)) && !cp_stat_test_parse(v, &r->opts.test)) {
        cp_diag_set(d, CP_ERR_INVALID,
                    "--test: unknown test '%s'; use welch, t-test, mann-whitney or bootstrap", v);
        return false;
    }
    if ((v = cp_args_get(args, OPT_ALPHA))) {
        char *end;
        r->opts.alpha = strtod(v, &end);
        if (end == v || *end || !(r->opts.alpha > 0 && r->opts.alpha <= 0.5)) {
            cp_diag_set(d, CP_ERR_INVALID, "--alpha: '%s' is not a level in (0, 0.5]", v);
            return false;
        }
    }
    if ((v = cp_args_get(args, OPT_THRESHOLD)) && !parse_percent(v, &r->opts.threshold_pct)) {
        cp_diag_set(d, CP_ERR_INVALID, "--threshold: '%s' is not a percentage like 2%%", v);
        return false;
    }
    if ((v = cp_args_get(args, OPT_PRECISION_TOL)) && !parse_percent(v, &r->precision_tolerance)) {
        cp_diag_set(d, CP_ERR_INVALID,
                    "--precision-tolerance: '%s' is not a number of "
                    "percentage points like 0.1",
                    v);
        return false;
    }
    if ((v = cp_args_get(args, OPT_RESAMPLES))) {
        if (!cp_parse_i64(v, &n) || n < 100 || n > 10000000) {
            cp_diag_set(d, CP_ERR_INVALID, "--resamples: '%s': use 100 to 10000000", v);
            return false;
        }
        r->opts.boot.resamples = (size_t)n;
    }
    if ((v = cp_args_get(args, OPT_SEED))) {
        if (!cp_parse_i64(v, &n) || n < 0) {
            cp_diag_set(d, CP_ERR_INVALID, "--seed: '%s' is not a non-negative whole number", v);
            return false;
        }
        r->opts.boot.seed = (uint64_t)n;
    }
    return true;
}

static int output(const struct cp_args *args, const struct cp_vresult *r, const char *junit)
{
    struct cp_buf out;
    cp_buf_init(&out);
    if (cp_args_has(args, OPT_JSON))
        cp_validate_render_json(r, &out);
    else if (cp_args_has(args, OPT_MARKDOWN))
        cp_validate_render_markdown(r, &out);
    else
        cp_validate_render_table(r, &out);
    int rc = 0;
    if (cp_buf_status(&out) != CP_OK) {
        cp_cli_error("validate", "out of memory rendering the result");
        rc = 3;
    } else
        fputs(out.data, stdout);
    if (rc == 0 && junit) {
        struct cp_diag d;
        cp_diag_init(&d);
        cp_buf_reset(&out);
        cp_validate_render_junit(r, &out);
        if (cp_buf_status(&out) != CP_OK ||
            cp_file_write_atomic(junit, out.data, out.len, &d) != CP_OK) {
            cp_cli_error("validate", d.msg[0] ? d.msg : "out of memory rendering JUnit");
            rc = 3;
        }
    }
    cp_buf_release(&out);
    return rc;
}

int cp_cmd_validate(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse("validate", options, N_OPTIONS, argc, argv, &args, &d) != CP_OK)
        return fail(&d);
    if (cp_args_has(&args, OPT_HELP)) {
        help();
        return 0;
    }
    if (args.n_positional) {
        cp_cli_error("validate", "unexpected argument; traces go after --before/--after, --ab "
                                 "or --trace");
        return 2;
    }
    struct inputs in = {
        .before = cp_args_get(&args, OPT_BEFORE),
        .after = cp_args_get(&args, OPT_AFTER),
        .ab = cp_args_get(&args, OPT_AB),
        .baseline = cp_args_get(&args, OPT_BASELINE),
        .service = cp_args_get(&args, OPT_SERVICE),
        .trace = cp_args_get(&args, OPT_TRACE),
        .junit = cp_args_get(&args, OPT_JUNIT),
    };
    bool alert = cp_args_has(&args, OPT_ALERT);
    struct alerting al = {.url = cp_args_get(&args, OPT_WEBHOOK)};
    if (!al.url && alert)
        al.url = getenv("CANNPROF_WEBHOOK");
    const char *fmt = cp_args_get(&args, OPT_WEBHOOK_FORMAT);
    static struct cp_vresult r; /* large; one per process */
    memset(&r, 0, sizeof r);
    if (!check_mode(&in, alert, &d) || !parse_opts(&args, &r, &d))
        return fail(&d);
    if (alert && (!al.url || !*al.url)) {
        cp_cli_error("validate",
                     "--alert-on-regression needs --webhook URL (or $CANNPROF_WEBHOOK)");
        return 2;
    }
    if (al.url && !in.baseline) {
        cp_cli_error("validate", "--webhook works with --baseline/--service/--trace");
        return 2;
    }
    if (fmt && !cp_webhook_format_parse(fmt, &al.format)) {
        char msg[256];
        snprintf(msg, sizeof msg, "--webhook-format: '%s' is not one of %s", fmt,
                 cp_webhook_format_choices());
        cp_cli_error("validate", msg);
        return 2;
    }
    char secret[1024] = "";
    const char *secret_file = cp_args_get(&args, OPT_WEBHOOK_SECRET_FILE);
    if (secret_file && !al.url) {
        cp_cli_error("validate", "--webhook-secret-file signs alerts: give --webhook URL too");
        return 2;
    }
    if (al.url && !read_secret(secret_file, secret, sizeof secret, &d))
        return fail(&d);
    al.secret = secret[0] ? secret : NULL;
    if (al.secret && al.format == CP_WEBHOOK_SLACK) {
        cp_cli_error("validate", "slack incoming webhooks are not signed (their URL is the "
                                 "secret): drop --webhook-secret-file and "
                                 "$CANNPROF_WEBHOOK_SECRET, or use another --webhook-format");
        return 2;
    }
    bool wanted[CP_VM_COUNT];
    const char *mlist = cp_args_get(&args, OPT_METRICS);
    if (mlist) {
        if (parse_metrics(mlist, wanted, &d) != CP_OK)
            return fail(&d);
    } else
        for (int i = 0; i < CP_VM_COUNT; i++)
            wanted[i] = true;

    struct side before = {0}, after = {0};
    struct baseline_ctx bc = {.service = in.service, .tag = in.baseline, .trace = in.trace};
    int rc = 2;
    enum cp_status st;
    if (in.ab)
        st = load_ab(in.ab, &before, &after, &d);
    else if (in.before) {
        st = load_run(in.before, cp_args_get(&args, OPT_BEFORE_RUN), -1, &before, &d);
        if (st == CP_OK)
            st = load_run(in.after, cp_args_get(&args, OPT_AFTER_RUN), -1, &after, &d);
    } else {
        st = cp_kb_check_service(in.service, &d);
        if (st == CP_OK)
            st = load_run(in.trace, cp_args_get(&args, OPT_AFTER_RUN), -1, &after, &d);
        if (st == CP_OK && (st = cp_kb_open(cp_args_get(&args, OPT_KB), &bc.kb, &d)) == CP_OK &&
            (st = cp_kb_baseline_get(bc.kb, in.service, in.baseline, &bc.b, &d)) == CP_OK) {
            before.m = &bc.b.m;
            before.label = bc.b.tag;
        }
    }
    if (st != CP_OK) {
        rc = fail(&d);
        goto out;
    }
    r.asked_threshold_pct = r.opts.threshold_pct;
    r.noise_floor_pct = NAN;
    if (bc.kb && !cp_args_has(&args, OPT_NO_NOISE)) {
        noise_floor(bc.kb, in.service, &r);
        if (r.noise_runs && r.noise_floor_pct > r.opts.threshold_pct)
            r.opts.threshold_pct = r.noise_floor_pct;
    }
    r.before = before.m;
    r.after = after.m;
    r.before_label = in.baseline ? bc.b.tag : before.label;
    r.after_label = after.label;
    if (!same_model(before.m, after.m)) {
        if (!cp_args_has(&args, OPT_FORCE)) {
            cp_diag_set(&d, CP_ERR_INVALID,
                        "the traces are of different models (before: %s, hash %s; after: %s, "
                        "hash %s); add --force to compare them anyway",
                        before.m->model_path, before.m->model_hash, after.m->model_path,
                        after.m->model_hash);
            rc = fail(&d);
            goto out;
        }
        r.models_differ = true;
        fprintf(stderr,
                "cannprof validate: warning: the traces are of different models "
                "(%s vs %s)\n",
                before.m->model_path, after.m->model_path);
    }
    select_iterations(&before, &after, cp_args_has(&args, OPT_ALL_ITERATIONS), in.ab != NULL,
                      &r.probe);
    if (pick_metrics(mlist != NULL, wanted, &before, &after, &d) != CP_OK ||
        compare_all(&r, wanted, &d) != CP_OK) {
        rc = fail(&d);
        goto out;
    }
    timing_inconclusive(&r);
    rc = r.overall == CP_VERDICT_REGRESSED ? 1 : 0;
    /* --webhook alone reports every validation; with --alert-on-regression
     * only regressions. */
    if (al.url && (!alert || r.overall == CP_VERDICT_REGRESSED)) {
        send_alert(&r, in.service, bc.b.tag, in.trace, &al);
        if (!al.delivered)
            fprintf(stderr, "cannprof validate: error: alert not delivered: %s\n", al.error);
    }
    int orc = output(&args, &r, in.junit);
    if (bc.kb && record_validation(&bc, &r, rc, &al, &d) != CP_OK) {
        cp_cli_error("validate", d.msg);
        orc = 3;
    }
    if (rc == 0 && (orc || (al.attempted && !al.delivered)))
        rc = 3;
out:
    cp_run_metrics_release(&before.own);
    cp_run_metrics_release(&after.own);
    cp_kb_baseline_release(&bc.b);
    cp_kb_close(bc.kb);
    return rc;
}
