/* What a firing does (docs/serving.md, "Incidents"): one folder holding
 *
 *   recorder.db    the flight recorder's dump: the requests of the last
 *                  --recorder seconds, as a pipeline run (http, model, reply)
 *   windows.db     the last healthy window and the incident's window, as
 *                  two runs, for validate
 *   deep.db        the deep trace of the next --deep-trace seconds: the
 *                  model's runtime and kernel layers (run 1, what analyze
 *                  reads) and its requests' node calls (run 2, what
 *                  node-bottleneck reads); a flow's: every call of its
 *                  nodes with its inference nodes' runtime and kernel
 *                  layers (run 1) and its requests' stages (run 2)
 *   findings.json  what fired, the node-bottleneck, the analysis, the
 *   findings.md    validation, and the alert's outcome
 *   alert.json     the alert as sent
 *
 * A deep trace that caught no request is an error, said on stderr, in the
 * findings and in the alert. */
#include "monitor/monitor_internal.h"
#include "pipeline/pipeline.h"
#include "rules/rules.h"
#include "stats/stats.h"
#include "trace/query.h"
#include "validate/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What the steps found, for the reports. */
struct incident {
    struct cp_monitor *m;
    char dir[1100];
    const struct cp_mon_condition *cond;
    double value;
    int64_t t_fire, t_first_bad;
    json_t *f; /* findings.json */
    struct cp_buf md;
    struct cp_buf summary; /* the alert's text */
    char limiting[160];
    char top_finding[400];
    char verdict[32];
    char grew[112]; /* a flow's node whose load grew the most */
    bool capture_failed;
};

static void path_in(const struct incident *in, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", in->dir, name);
}

static double since_start(const struct cp_monitor *m, int64_t t)
{
    return m->started_ns ? (double)(t - m->started_ns) / 1e9 : NAN;
}

/* A step that failed: in the findings under `key`, on stderr, in the text. */
static void step_error(struct incident *in, const char *key, const char *msg)
{
    json_t *o = json_object();
    cp_json_set_str(o, "error", msg);
    json_object_set_new(in->f, key, o);
    cp_buf_printf(&in->md, "\n**%s failed:** %s\n", key, msg);
    fprintf(stderr, "monitor: incident %s: %s: %s\n", in->dir, key, msg);
}

/* ---- the recorder and the windows ------------------------------------------------------- */

static void dump_recorder(struct incident *in)
{
    struct cp_monitor *m = in->m;
    char path[1200];
    path_in(in, "recorder.db", path, sizeof path);
    struct cp_serve_event *ev = NULL;
    size_t n = cp_mon_snapshot(m, in->t_fire - (int64_t)(m->o.recorder_s * 1e9), in->t_fire, &ev);
    struct cp_serve_trace_info info = {.kind = "serve-recorder",
                                       .model_path = m->o.model_path,
                                       .max_batch = m->o.max_batch,
                                       .threads = m->o.threads};
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t run = -1;
    if (cp_serve_store_events(path, &info, ev, n, &run, &d) != CP_OK) {
        step_error(in, "recorder", d.msg);
    } else {
        json_t *o = json_object();
        cp_json_set_str(o, "trace", path);
        cp_json_set_int(o, "requests", (int64_t)n);
        cp_json_set_num(o, "seconds", (m->o.recorder_s));
        cp_json_set_int(o, "overwritten", (int64_t)m->overwritten);
        json_object_set_new(in->f, "recorder", o);
        cp_buf_printf(&in->md, "\n## Flight recorder\n\n%zu requests of the last %.0f s: `%s`\n", n,
                      m->o.recorder_s, path);
    }
    free(ev);
}

/* The incident's window against the last healthy one, through validate. */
static void compare_windows(struct incident *in)
{
    struct cp_monitor *m = in->m;
    if (!m->healthy || m->n_healthy == 0) {
        json_t *o = json_object();
        cp_json_set_str(o, "skipped", "no healthy window before the incident to compare with");
        json_object_set_new(in->f, "validation", o);
        cp_buf_puts(&in->md, "\n## Validation\n\nSkipped: no healthy window came before the "
                             "incident (the condition held from the start, or too few "
                             "requests).\n");
        snprintf(in->verdict, sizeof in->verdict, "none");
        return;
    }
    char path[1200];
    path_in(in, "windows.db", path, sizeof path);
    int64_t w = (int64_t)(m->o.policy.window_s * 1e9);
    struct cp_serve_event *bad = NULL;
    size_t n_bad = cp_mon_snapshot(m, in->t_fire - w, in->t_fire, &bad);
    struct cp_serve_trace_info hi = {.kind = "serve-healthy",
                                     .model_path = m->o.model_path,
                                     .max_batch = m->o.max_batch,
                                     .threads = m->o.threads};
    struct cp_serve_trace_info bi = hi;
    bi.kind = "serve-incident";
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t ra = -1, rb = -1;
    struct cp_validate_side a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    struct cp_vresult r;
    memset(&r, 0, sizeof r);
    char ta[32], tb[32];
    enum cp_status st = cp_serve_store_events(path, &hi, m->healthy, m->n_healthy, &ra, &d);
    if (st == CP_OK)
        st = cp_serve_store_events(path, &bi, bad, n_bad, &rb, &d);
    snprintf(ta, sizeof ta, "%lld", (long long)ra);
    snprintf(tb, sizeof tb, "%lld", (long long)rb);
    if (st == CP_OK)
        st = cp_validate_side_from_trace(path, ta, &a, &d);
    if (st == CP_OK)
        st = cp_validate_side_from_trace(path, tb, &b, &d);
    struct cp_validate_opts vo;
    cp_validate_opts_init(&vo);
    for (int k = 0; k < CP_VM_COUNT; k++)
        vo.wanted[k] = k == CP_VM_LATENCY || k == CP_VM_P99;
    if (st == CP_OK)
        st = cp_validate_compare(&a, &b, &vo, NAN, 0, &r, &d);
    if (st != CP_OK) {
        step_error(in, "validation", d.msg);
    } else {
        json_t *o = cp_validate_json(&r);
        if (o) {
            cp_json_set_str(o, "trace", path);
            cp_json_set_num(o, "healthy_ended_s_before",
                            ((double)(in->t_fire - m->healthy_to_ns) / 1e9));
            json_object_set_new(in->f, "validation", o);
        }
        snprintf(in->verdict, sizeof in->verdict, "%s", cp_verdict_name(r.overall));
        cp_buf_printf(
            &in->md,
            "\n## Validation: the incident's window against the last healthy one\n\n"
            "`cannprof validate --before %s --before-run %s --after %s --after-run %s --metrics "
            "latency,p99` (the healthy window ended %.1f s "
            "before the firing):\n\n",
            path, ta, path, tb, (double)(in->t_fire - m->healthy_to_ns) / 1e9);
        cp_validate_render_markdown(&r, &in->md);
        struct cp_buf t;
        cp_buf_init(&t);
        cp_validate_render_text(&r, &t);
        cp_buf_printf(&in->summary, "validate (incident vs last healthy window): %s\n%s",
                      in->verdict, t.data ? t.data : "");
        cp_buf_release(&t);
    }
    cp_validate_side_release(&a);
    cp_validate_side_release(&b);
    free(bad);
}

/* ---- the deep trace -------------------------------------------------------------------------- */

/* Wait out the deep window (still evaluating the alarm), then for the
 * batching thread to hand over the kernels. */
static void deep_trace(struct incident *in, int64_t *deep_from, int64_t *deep_to,
                       int64_t *kernels_run)
{
    struct cp_monitor *m = in->m;
    int64_t until = __atomic_load_n(&m->deep_until_ns, __ATOMIC_ACQUIRE);
    int64_t tick = (int64_t)(m->tick_s * 1e9);
    bool stopped = false;
    while (!stopped && (int64_t)cp_clock_ns() < until) {
        int64_t next = (int64_t)cp_clock_ns() + tick;
        stopped = cp_mon_sleep_until(m, next < until ? next : until);
        if (!stopped)
            (void)cp_mon_tick(m, (int64_t)cp_clock_ns());
    }
    *deep_from = in->t_fire;
    *deep_to = (int64_t)cp_clock_ns();
    __atomic_store_n(&m->deep_until_ns, 0, __ATOMIC_RELEASE);
    /* the batching thread hands the kernels over at its next batch or within
     * 100 ms when idle; at a stop, when the server drains */
    int64_t give_up = (int64_t)cp_clock_ns() + (int64_t)5e9;
    pthread_mutex_lock(&m->mu);
    while (!m->kernels_in && (int64_t)cp_clock_ns() < give_up) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    }
    bool in_ = m->kernels_in;
    *kernels_run = in_ ? m->kernels_run : -1;
    int64_t flow_run = in_ ? m->flow_run : -1;
    size_t batches = m->kernels_batches, events = m->kernels_events;
    char err[1100];
    snprintf(err, sizeof err, "%s", m->kernels_err);
    m->deep_path[0] = '\0';
    pthread_mutex_unlock(&m->mu);
    char path[1200];
    path_in(in, "deep.db", path, sizeof path);
    json_t *o = json_object();
    cp_json_set_str(o, "trace", path);
    cp_json_set_num(o, "seconds", ((double)(*deep_to - *deep_from) / 1e9));
    cp_json_set_int(o, "kernel_run", *kernels_run);
    if (m->o.flow)
        cp_json_set_int(o, "flow_run", flow_run);
    cp_json_set_int(o, "batches", (int64_t)(in_ ? batches : 0));
    cp_json_set_int(o, "kernel_events", (int64_t)(in_ ? events : 0));
    if (stopped)
        cp_json_set_str(o, "cut_short", "the server stopped during the deep trace");
    if (m->o.flow && (!in_ || flow_run < 0))
        cp_json_set_str(o, "flow_error",
                        in_ ? err : "the flow's calls were not handed over in time");
    else if (m->o.flow)
        ; /* a flow's deep trace: its nodes' calls, its inference nodes' kernels */
    else if (!in_)
        cp_json_set_str(o, "kernel_error",
                        "no batch ran during the deep trace: no kernel layer was recorded");
    else if (*kernels_run < 0)
        cp_json_set_str(o, "kernel_error", err);
    json_object_set_new(in->f, "deep_trace", o);
}

static void store_deep_nodes(struct incident *in, int64_t from, int64_t to, int64_t *node_run)
{
    struct cp_monitor *m = in->m;
    char path[1200];
    path_in(in, "deep.db", path, sizeof path);
    struct cp_serve_event *ev = NULL;
    size_t n = cp_mon_snapshot(m, from, to, &ev);
    struct cp_serve_trace_info info = {.kind = "serve-deep-nodes",
                                       .model_path = m->o.model_path,
                                       .max_batch = m->o.max_batch,
                                       .threads = m->o.threads};
    struct cp_diag d;
    cp_diag_init(&d);
    *node_run = -1;
    json_t *o = json_object_get(in->f, "deep_trace");
    if (cp_serve_store_events(path, &info, ev, n, node_run, &d) != CP_OK) {
        in->capture_failed = true;
        pthread_mutex_lock(&m->mu);
        m->capture_errors++;
        pthread_mutex_unlock(&m->mu);
        char msg[1300];
        snprintf(msg, sizeof msg, "the deep trace is empty: %.1100s", d.msg);
        cp_json_set_str(o, "error", msg);
        fprintf(stderr, "monitor: incident %s: %s\n", in->dir, msg);
        cp_buf_printf(&in->md, "\n**The deep trace is empty:** %s\n", d.msg);
        cp_buf_printf(&in->summary, "ERROR: the deep trace is empty: %s\n", d.msg);
    } else {
        cp_json_set_int(o, "node_run", *node_run);
        cp_json_set_int(o, "requests", (int64_t)n);
    }
    free(ev);
    int64_t kr = (int64_t)json_integer_value(json_object_get(o, "kernel_run"));
    if (in->m->o.flow)
        cp_buf_printf(&in->md,
                      "\n## Deep trace\n\n`%s`: %zu requests over %.1f s (the request's "
                      "stages: run %lld; every call of the flow's nodes, with the runtime and "
                      "kernel layers of its inference nodes (%lld events): run %lld).\n",
                      path, n, json_real_value(json_object_get(o, "seconds")), (long long)*node_run,
                      (long long)json_integer_value(json_object_get(o, "kernel_events")),
                      (long long)json_integer_value(json_object_get(o, "flow_run")));
    else
        cp_buf_printf(&in->md,
                      "\n## Deep trace\n\n`%s`: %zu requests over %.1f s (node calls: run %lld; "
                      "runtime and kernel layers: run %lld, %lld batches).\n",
                      path, n, json_real_value(json_object_get(o, "seconds")), (long long)*node_run,
                      (long long)kr, (long long)json_integer_value(json_object_get(o, "batches")));
    const char *ke = json_string_value(json_object_get(o, "kernel_error"));
    if (ke)
        cp_buf_printf(&in->md, "\nThe kernel layer is missing: %s\n", ke);
    const char *fe = json_string_value(json_object_get(o, "flow_error"));
    if (fe)
        cp_buf_printf(&in->md, "\nThe flow's node calls are missing: %s\n", fe);
}

/* ---- the diagnosis ------------------------------------------------------------------------------
 */

/* node-bottleneck on the deep trace's run `node_run`; returns the run of
 * the limiting node's model when it is a flow's inference node (-1). */
static int64_t bottleneck(struct incident *in, int64_t node_run)
{
    int64_t model_run = -1;
    char path[1200];
    path_in(in, "deep.db", path, sizeof path);
    struct cp_bottleneck b;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_node_bottleneck(path, node_run, &b, &d) != CP_OK) {
        step_error(in, "node_bottleneck", d.msg);
        return -1;
    }
    json_t *o = cp_bottleneck_json(&b, path);
    if (o)
        json_object_set_new(in->f, "node_bottleneck", o);
    if (b.limiting >= 0) {
        const struct cp_bottleneck_node *n = &b.nodes[b.limiting];
        model_run = n->model_run;
        snprintf(in->limiting, sizeof in->limiting,
                 "%.60s (busy %.0f%%, %.0f%% of it on a CPU, confidence %.0f%%)", n->name,
                 100 * n->util, 100 * n->cpu_share, 100 * b.confidence);
    } else {
        snprintf(in->limiting, sizeof in->limiting, "none (no node busy half its time)");
    }
    cp_buf_printf(&in->summary, "limiting node: %s\n", in->limiting);
    for (size_t i = 0; i < b.n_problems; i++)
        cp_buf_printf(&in->summary, "problem: %s: %s\n", b.problems[i].kind, b.problems[i].text);
    cp_buf_puts(&in->md, "\n## Node bottleneck (the deep trace)\n\n");
    cp_bottleneck_text(&b, path, true, &in->md);
    cp_bottleneck_release(&b);
    return model_run;
}

/* Where a batch's time went: its kernels, or around them (input and output
 * copies, the server's own work, anything the model's kernels do not
 * count). Decides whether the kernel layer's analysis is the one to read. */
static void model_time(struct incident *in, int64_t kernels_run)
{
    if (kernels_run < 0)
        return;
    char path[1200];
    path_in(in, "deep.db", path, sizeof path);
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_sample *sm = NULL;
    struct cp_trace_iter_time *it = NULL;
    size_t n_sm = 0, n_it = 0;
    enum cp_status st = cp_trace_store_open_ro(path, &s, &d);
    if (st == CP_OK)
        st = cp_trace_query_samples(s, kernels_run, &sm, &n_sm, &d);
    if (st == CP_OK)
        st = cp_trace_query_layer_iterations(s, kernels_run, CP_LAYER_DEVICE, NULL, &it, &n_it, &d);
    cp_trace_store_close(s);
    double batch = 0, kern = 0;
    double *x = cp_calloc(n_sm ? n_sm : 1, sizeof *x), *y = cp_calloc(n_it ? n_it : 1, sizeof *y);
    for (size_t i = 0; x && i < n_sm; i++)
        batch += (x[i] = (double)sm[i].latency_ns);
    for (size_t i = 0; y && i < n_it; i++)
        kern += (y[i] = it[i].total_ns);
    if (st != CP_OK || !x || !y || n_sm == 0 || batch <= 0) {
        step_error(in, "model_time", st != CP_OK ? d.msg : "no batch in the deep trace");
    } else {
        double outside = fmax(0, 1 - kern / batch);
        double bm = cp_stats_quantile(x, n_sm, 0.5) / 1e6,
               km = n_it ? cp_stats_quantile(y, n_it, 0.5) / 1e6 : 0;
        json_t *o = json_object();
        cp_json_set_int(o, "batches", (int64_t)n_sm);
        cp_json_set_num(o, "batch_median_ms", bm);
        cp_json_set_num(o, "kernels_median_ms", km);
        cp_json_set_num(o, "outside_kernels_share", outside);
        json_object_set_new(in->f, "model_time", o);
        const char *reading =
            outside > 0.5
                ? "most of a batch's time is spent outside the model's kernels (input and output "
                  "copies, the server's own work, the host): the kernel layer's analysis below "
                  "does not explain the slowdown"
                : "the kernels take most of a batch's time: the kernel layer's analysis below "
                  "applies";
        cp_buf_printf(&in->md,
                      "\n## Where a batch's time goes\n\n%zu batches: median %.2f ms per batch, "
                      "of which the kernels %.2f ms; %.0f%% of the batches' time is outside the "
                      "kernels: %s.\n",
                      n_sm, bm, km, 100 * outside, reading);
        cp_buf_printf(&in->summary,
                      "model: %.2f ms per batch, kernels %.2f ms (%.0f%% outside the kernels)\n",
                      bm, km, 100 * outside);
    }
    free(x);
    free(y);
    free(sm);
    free(it);
}

static void analyze(struct incident *in, int64_t kernels_run)
{
    struct cp_monitor *m = in->m;
    if (kernels_run < 0)
        return;
    char path[1200];
    path_in(in, "deep.db", path, sizeof path);
    const char *rules[1] = {m->o.rules_dir};
    struct cp_diagnose_opts o = {
        .rule_paths = m->o.rules_dir ? rules : NULL,
        .n_rule_paths = m->o.rules_dir ? 1 : 0,
        .run_id = kernels_run,
        .analysis = {.target = CP_TARGET_LATENCY},
    };
    struct cp_diagnosis dg;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_rules_diagnose(path, &o, &dg, &d) != CP_OK) {
        step_error(in, "analysis", d.msg);
        cp_diagnosis_release(&dg);
        return;
    }
    json_t *a = cp_analysis_to_json(&dg.analysis);
    if (a)
        json_object_set_new(in->f, "analysis", a);
    cp_buf_printf(&in->md,
                  "\n## Analysis of the kernel layer (`cannprof analyze %s --run %lld`)\n\n", path,
                  (long long)kernels_run);
    if (dg.analysis.n == 0)
        cp_buf_puts(&in->md, "No rule fired.\n");
    for (size_t i = 0; i < dg.analysis.n && i < 5; i++) {
        const struct cp_finding *f = &dg.analysis.findings[i];
        cp_buf_printf(&in->md, "%zu. **%s** (%s, %s confidence, %.0f%% of kernel time): %s\n",
                      i + 1, f->rule, f->bottleneck_type, cp_confidence_name(f->confidence),
                      100 * f->time_share, f->title);
        if (f->change.summary && f->change.summary[0])
            cp_buf_printf(&in->md, "   - change: %s\n", f->change.summary);
    }
    if (dg.analysis.n) {
        const struct cp_finding *f = &dg.analysis.findings[0];
        snprintf(in->top_finding, sizeof in->top_finding, "%.80s: %.300s", f->rule, f->title);
        cp_buf_printf(&in->summary, "top finding: %s\n", in->top_finding);
    }
    cp_diagnosis_release(&dg);
}

/* ---- a flow's nodes ----------------------------------------------------------------------- */

/* Per node of a flow: its calls and busy time in a window of the recorder. */
struct node_load {
    size_t calls;
    double busy_s;
    double *busy; /* each call's, for the median */
};

static double node_median(const struct node_load *l)
{
    return l->calls ? cp_stats_quantile(l->busy, l->calls, 0.5) : NAN;
}

static bool node_loads(const struct cp_mon_node_call *c, size_t n, size_t n_nodes,
                       struct node_load *out)
{
    for (size_t i = 0; i < n; i++)
        if (c[i].node < n_nodes)
            out[c[i].node].calls++;
    for (size_t k = 0; k < n_nodes; k++) {
        out[k].busy = cp_calloc(out[k].calls ? out[k].calls : 1, sizeof *out[k].busy);
        if (!out[k].busy)
            return false;
        out[k].calls = 0;
    }
    for (size_t i = 0; i < n; i++)
        if (c[i].node < n_nodes) {
            struct node_load *l = &out[c[i].node];
            double s = (double)c[i].busy_ns / 1e9;
            l->busy[l->calls++] = s;
            l->busy_s += s;
        }
    return true;
}

/* A flow's nodes in the incident's window against the last healthy one,
 * from the recorder's node calls: the node whose busy time per second grew
 * the most is the one to look at, before the deep trace says more. */
static void node_changes(struct incident *in)
{
    struct cp_monitor *m = in->m;
    if (!m->calls || m->n_flow_names == 0)
        return;
    if (!m->healthy_calls || m->n_healthy_calls == 0) {
        cp_buf_puts(&in->md, "\n## The flow's nodes\n\nNo healthy window came before the "
                             "incident to compare the nodes' calls with.\n");
        return;
    }
    int64_t w = (int64_t)(m->o.policy.window_s * 1e9);
    struct cp_mon_node_call *bad = NULL;
    size_t n_bad = cp_mon_snapshot_calls(m, in->t_fire - w, in->t_fire, &bad);
    size_t nn = m->n_flow_names;
    struct node_load *h = cp_calloc(nn, sizeof *h), *b = cp_calloc(nn, sizeof *b);
    bool ok = h && b && node_loads(m->healthy_calls, m->n_healthy_calls, nn, h) &&
              node_loads(bad, n_bad, nn, b);
    double ws = m->o.policy.window_s;
    int top = -1;
    double top_growth = 0;
    json_t *arr = json_array();
    if (ok) {
        cp_buf_printf(&in->md,
                      "\n## The flow's nodes (flight recorder)\n\nEach node's calls in the last "
                      "healthy window and in the incident's (%.0f s each): median busy time per "
                      "call, and busy seconds per second (its load).\n\n"
                      "| node | calls before | calls now | median busy before | median busy now | "
                      "load before | load now |\n|---|---:|---:|---:|---:|---:|---:|\n",
                      ws);
        for (size_t k = 0; k < nn; k++) {
            double mb = node_median(&h[k]), mn = node_median(&b[k]);
            double lb = h[k].busy_s / ws, ln = b[k].busy_s / ws;
            if (ln - lb > top_growth) {
                top_growth = ln - lb;
                top = (int)k;
            }
            json_t *o = json_object();
            cp_json_set_str(o, "node", m->flow_names[k]);
            cp_json_set_int(o, "calls_before", (int64_t)h[k].calls);
            cp_json_set_int(o, "calls_now", (int64_t)b[k].calls);
            cp_json_set_num(o, "median_busy_ms_before", mb * 1e3);
            cp_json_set_num(o, "median_busy_ms_now", mn * 1e3);
            cp_json_set_num(o, "load_before", lb);
            cp_json_set_num(o, "load_now", ln);
            json_array_append_new(arr, o);
            cp_buf_printf(&in->md, "| %s | %zu | %zu | %.2f ms | %.2f ms | %.2f | %.2f |\n",
                          m->flow_names[k], h[k].calls, b[k].calls, isfinite(mb) ? mb * 1e3 : 0,
                          isfinite(mn) ? mn * 1e3 : 0, lb, ln);
        }
    }
    json_t *o = json_object();
    json_object_set_new(o, "nodes", arr);
    if (top >= 0) {
        cp_json_set_str(o, "grew_most", m->flow_names[top]);
        cp_json_set_num(o, "load_growth", top_growth);
        snprintf(in->grew, sizeof in->grew, "%.100s", m->flow_names[top]);
        cp_buf_printf(&in->md,
                      "\n**%s** is the node whose load grew the most (+%.2f busy seconds per "
                      "second).\n",
                      m->flow_names[top], top_growth);
        cp_buf_printf(&in->summary, "node whose load grew the most: %s (+%.2f busy s/s)\n",
                      m->flow_names[top], top_growth);
    }
    json_object_set_new(in->f, "flow_nodes", o);
    for (size_t k = 0; k < nn; k++) {
        if (h)
            free(h[k].busy);
        if (b)
            free(b[k].busy);
    }
    free(h);
    free(b);
    free(bad);
}

/* The kernel layer under a flow's inference nodes in the deep trace: each
 * node's kernel time and its kernels with the most, from its workers'
 * model runs (the flow run's "model_run:NODE:WORKER" counters). */
struct kernel_sum {
    int64_t idx;
    double ns;
    int64_t runs;
};

static int by_time(const void *x, const void *y)
{
    const struct kernel_sum *a = x, *b = y;
    return (a->ns < b->ns) - (a->ns > b->ns);
}

/* One node's kernels: its workers' runs summed by kernel index (one plan). */
static enum cp_status node_kernels(struct cp_trace_store *s, const struct cp_trace_counter *runs,
                                   size_t n_runs, const char *node, size_t len, json_t *arr,
                                   struct cp_buf *md, struct cp_diag *d)
{
    struct kernel_sum *sum = NULL;
    size_t n_sum = 0;
    struct cp_trace_kernel_desc *kd = NULL;
    size_t n_kd = 0;
    enum cp_status st = CP_OK;
    for (size_t r = 0; st == CP_OK && r < n_runs; r++) {
        const char *c = runs[r].name + strlen("model_run:");
        if (strncmp(c, node, len) != 0 || c[len] != ':')
            continue;
        int64_t run = (int64_t)runs[r].value;
        struct cp_trace_kernel_time *kt = NULL;
        size_t n_kt = 0;
        st = cp_trace_query_kernel_times(s, run, NULL, 0, &kt, &n_kt, d);
        if (st == CP_OK && !kd)
            st = cp_trace_query_kernels(s, run, &kd, &n_kd, d);
        for (size_t i = 0; st == CP_OK && i < n_kt; i++) {
            size_t j = 0;
            while (j < n_sum && sum[j].idx != kt[i].kernel_idx)
                j++;
            if (j == n_sum) {
                struct kernel_sum *g = cp_realloc_array(sum, n_sum + 1, sizeof *g);
                if (!g) {
                    st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                    break;
                }
                sum = g;
                sum[n_sum++] = (struct kernel_sum){.idx = kt[i].kernel_idx};
            }
            sum[j].ns += kt[i].total_ns;
            sum[j].runs += kt[i].events;
        }
        free(kt);
    }
    if (st == CP_OK && n_sum) {
        qsort(sum, n_sum, sizeof *sum, by_time);
        double total = 0;
        for (size_t j = 0; j < n_sum; j++)
            total += sum[j].ns;
        json_t *o = json_object(), *top = json_array();
        cp_json_set_str(o, "node", node);
        cp_json_set_num(o, "kernel_ms", total / 1e6);
        cp_buf_printf(md, "- **%s**: %.1f ms in kernels;", node, total / 1e6);
        for (size_t j = 0; j < n_sum && j < 5; j++) {
            const char *name =
                sum[j].idx >= 0 && (size_t)sum[j].idx < n_kd ? kd[sum[j].idx].node : "?";
            json_t *t = json_object();
            cp_json_set_str(t, "kernel", name);
            cp_json_set_num(t, "ms", sum[j].ns / 1e6);
            cp_json_set_int(t, "runs", sum[j].runs);
            cp_json_set_num(t, "share", total > 0 ? sum[j].ns / total : 0);
            json_array_append_new(top, t);
            cp_buf_printf(md, "%s %s %.0f%% (%lld runs)", j ? "," : "", name,
                          total > 0 ? 100 * sum[j].ns / total : 0, (long long)sum[j].runs);
        }
        cp_buf_puts(md, "\n");
        json_object_set_new(o, "top_kernels", top);
        json_array_append_new(arr, o);
    }
    cp_trace_kernels_free(kd, n_kd);
    free(sum);
    return st;
}

static void flow_kernels(struct incident *in, int64_t flow_run)
{
    char path[1200];
    path_in(in, "deep.db", path, sizeof path);
    struct cp_trace_store *s = NULL;
    struct cp_trace_counter *runs = NULL;
    size_t n_runs = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_trace_store_open_ro(path, &s, &d);
    if (st == CP_OK)
        st = cp_trace_query_run_counters(s, flow_run, "model_run:", &runs, &n_runs, &d);
    json_t *arr = json_array();
    struct cp_buf md;
    cp_buf_init(&md);
    /* each node once, in the counters' order */
    for (size_t r = 0; st == CP_OK && r < n_runs; r++) {
        const char *c = runs[r].name + strlen("model_run:"), *colon = strrchr(c, ':');
        size_t len = colon ? (size_t)(colon - c) : strlen(c);
        bool seen = false;
        for (size_t q = 0; q < r && !seen; q++)
            seen = strncmp(runs[q].name + strlen("model_run:"), c, len + 1) == 0;
        char node[160];
        snprintf(node, sizeof node, "%.*s", (int)(len < 150 ? len : 150), c);
        if (!seen)
            st = node_kernels(s, runs, n_runs, node, len, arr, &md, &d);
    }
    cp_trace_store_close(s);
    if (st != CP_OK) {
        step_error(in, "model_layer", d.msg);
    } else if (json_array_size(arr) == 0) {
        step_error(in, "model_layer",
                   "no kernel of the flow's inference nodes was recorded in the deep trace");
    } else {
        cp_buf_puts(&in->md, "\n## The kernel layer under the flow's inference nodes (the deep "
                             "trace)\n\n");
        cp_buf_puts(&in->md, md.data ? md.data : "");
        json_object_set_new(in->f, "model_layer", arr);
        arr = NULL;
    }
    json_decref(arr);
    cp_buf_release(&md);
    cp_trace_counters_free(runs, n_runs);
}

/* ---- the alert
 * ----------------------------------------------------------------------------------- */

static void send_alert(struct incident *in)
{
    struct cp_monitor *m = in->m;
    char title[512], val[48], thr[48];
    cp_mon_format_value(in->cond, in->value, val);
    cp_mon_format_value(in->cond, in->cond->value, thr);
    snprintf(title, sizeof title, "cannprof: %s is %s (threshold %s) on %.120s%s", in->cond->text,
             val, thr, m->o.model_path ? m->o.model_path : "the served model",
             in->capture_failed ? " (deep trace empty)" : "");
    json_t *fig = json_object();
    cp_json_set_str(fig, "condition", in->cond->text);
    cp_json_set_num(fig, "value", (in->value));
    cp_json_set_num(fig, "threshold", (in->cond->value));
    cp_json_set_str(fig, "limiting_node", in->limiting);
    if (in->grew[0])
        cp_json_set_str(fig, "node_grew_most", in->grew);
    cp_json_set_str(fig, "top_finding", in->top_finding);
    cp_json_set_str(fig, "validation", in->verdict);
    cp_json_set_str(fig, "incident", in->dir);
    cp_json_set_bool(fig, "capture_failed", (in->capture_failed));
    char *figs = fig ? json_dumps(fig, JSON_COMPACT) : NULL;
    json_decref(fig);
    char deep[1200];
    path_in(in, "deep.db", deep, sizeof deep);
    struct cp_alert a = {
        .title = title,
        .service = m->o.model_path,
        .verdict = "firing",
        .text = in->summary.data ? in->summary.data : "",
        .figures_json = figs,
        .trace_path = deep,
        .event = "incident",
    };
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_buf body;
    cp_buf_init(&body);
    json_t *al = json_object();
    cp_json_set_str(al, "format", cp_webhook_format_name(m->o.webhook_format));
    if (cp_notify_payload(m->o.webhook_format, &a, &body, &d) == CP_OK) {
        char path[1200];
        path_in(in, "alert.json", path, sizeof path);
        struct cp_diag ignored;
        cp_diag_init(&ignored);
        if (cp_file_write_atomic(path, body.data, body.len, &ignored) != CP_OK)
            fprintf(stderr, "monitor: %s\n", ignored.msg);
    }
    cp_buf_release(&body);
    if (!m->o.webhook) {
        cp_json_set_str(al, "sent", "no --webhook: written to alert.json only");
    } else {
        char shown[300];
        cp_notify_redact_url(m->o.webhook, shown, sizeof shown);
        cp_json_set_str(al, "url", shown);
        struct cp_notify_opts no;
        cp_notify_opts_init(&no);
        no.url = m->o.webhook;
        no.format = m->o.webhook_format;
        no.secret = m->o.webhook_secret;
        int attempts = 0;
        int64_t t0 = (int64_t)cp_clock_ns();
        cp_diag_init(&d);
        bool ok = cp_notify_send(&no, &a, &attempts, &d) == CP_OK;
        cp_json_set_bool(al, "delivered", (ok));
        cp_json_set_int(al, "attempts", attempts);
        cp_json_set_num(al, "sent_s_since_start", (since_start(m, t0)));
        if (!ok) {
            cp_json_set_str(al, "error", d.msg);
            pthread_mutex_lock(&m->mu);
            m->alerts_failed++;
            pthread_mutex_unlock(&m->mu);
            fprintf(stderr, "monitor: incident %s: the alert was not delivered: %s\n", in->dir,
                    d.msg);
        }
        cp_buf_printf(&in->md, "\n## Alert\n\n%s to %s after %d attempt(s)%s%s.\n",
                      ok ? "Delivered" : "NOT delivered", shown, attempts, ok ? "" : ": ",
                      ok ? "" : d.msg);
    }
    json_object_set_new(in->f, "alert", al);
    free(figs);
}

/* ---- the incident
 * -------------------------------------------------------------------------------- */

void cp_mon_incident(struct cp_monitor *m, int64_t t_fire)
{
    struct incident in;
    memset(&in, 0, sizeof in);
    in.m = m;
    in.t_fire = t_fire;
    in.t_first_bad = m->alarm.first_bad_ns;
    in.cond = &m->o.conditions.c[m->alarm.trigger >= 0 ? m->alarm.trigger : 0];
    in.value = m->alarm.trigger_value;
    snprintf(in.verdict, sizeof in.verdict, "none");
    m->incident_seq++;
    time_t wall = time(NULL);
    struct tm tm;
    gmtime_r(&wall, &tm);
    snprintf(in.dir, sizeof in.dir, "%.900s/incident-%04d%02d%02dT%02d%02d%02dZ-%llu",
             m->o.incident_dir, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
             tm.tm_sec, (unsigned long long)m->incident_seq);
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_mkdir_p(in.dir, 0755, &d) != CP_OK) {
        fprintf(stderr, "monitor: cannot write the incident: %s\n", d.msg);
        return;
    }
    /* the deep trace begins at once: it covers the next seconds */
    pthread_mutex_lock(&m->mu);
    path_in(&in, "deep.db", m->deep_path, sizeof m->deep_path);
    m->kernels_in = false;
    m->kernels_run = -1;
    m->flow_run = -1;
    pthread_mutex_unlock(&m->mu);
    __atomic_store_n(&m->deep_until_ns, t_fire + (int64_t)(m->o.deep_s * 1e9), __ATOMIC_RELEASE);

    char val[48], thr[48];
    cp_mon_format_value(in.cond, in.value, val);
    cp_mon_format_value(in.cond, in.cond->value, thr);
    printf("monitor: FIRING: %s: %s over the last %.0f s (held %.1f s); incident %s, deep trace "
           "for %.0f s\n",
           in.cond->text, val, m->o.policy.window_s, (double)(t_fire - in.t_first_bad) / 1e9,
           in.dir, m->o.deep_s);
    fflush(stdout);

    in.f = json_object();
    cp_buf_init(&in.md);
    cp_buf_init(&in.summary);
    json_t *c = json_object();
    cp_json_set_str(c, "condition", in.cond->text);
    cp_json_set_str(c, "conditions", m->o.conditions_text ? m->o.conditions_text : "");
    cp_json_set_num(c, "value", (in.value));
    cp_json_set_num(c, "threshold", (in.cond->value));
    cp_json_set_num(c, "window_s", (m->o.policy.window_s));
    cp_json_set_num(c, "hold_s", (m->o.policy.hold_s));
    cp_json_set_num(c, "first_violation_s_since_start", (since_start(m, in.t_first_bad)));
    cp_json_set_num(c, "fired_s_since_start", (since_start(m, t_fire)));
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cp_json_set_str(c, "fired_at", when);
    json_object_set_new(in.f, "fired", c);
    cp_json_set_str(in.f, "model", m->o.model_path ? m->o.model_path : "");
    cp_json_set_str(in.f, "incident", in.dir);
    cp_buf_printf(&in.md,
                  "# Incident: %s\n\n%s is **%s** (threshold %s) over the last %.0f s of "
                  "requests, held %.1f s; fired %s on %s.\n",
                  in.cond->text, in.cond->text, val, thr, m->o.policy.window_s,
                  (double)(t_fire - in.t_first_bad) / 1e9, when,
                  m->o.model_path ? m->o.model_path : "the served model");
    cp_buf_printf(&in.summary, "%s = %s (threshold %s) over %.0f s, held %.1f s\n", in.cond->text,
                  val, thr, m->o.policy.window_s, (double)(t_fire - in.t_first_bad) / 1e9);

    dump_recorder(&in);
    compare_windows(&in);
    node_changes(&in);
    int64_t from = 0, to = 0, kernels_run = -1, node_run = -1;
    deep_trace(&in, &from, &to, &kernels_run);
    store_deep_nodes(&in, from, to, &node_run);
    /* a flow: node-bottleneck reads its own nodes' calls */
    json_t *dt = json_object_get(in.f, "deep_trace");
    int64_t flow_run = json_integer_value(json_object_get(dt, "flow_run"));
    int64_t limiting_model = -1;
    if (m->o.flow && json_object_get(dt, "flow_run") && flow_run >= 0) {
        limiting_model = bottleneck(&in, flow_run);
        flow_kernels(&in, flow_run);
    } else if (node_run >= 0)
        bottleneck(&in, node_run);
    model_time(&in, kernels_run);
    /* a flow: the rules on its limiting inference node's own model run */
    analyze(&in, m->o.flow ? limiting_model : kernels_run);
    send_alert(&in);

    /* the findings */
    char path[1200];
    path_in(&in, "findings.json", path, sizeof path);
    char *text = json_dumps(in.f, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!text || cp_file_write_atomic(path, text, strlen(text), &d) != CP_OK)
        fprintf(stderr, "monitor: %s\n", text ? d.msg : "out of memory writing findings.json");
    free(text);
    path_in(&in, "findings.md", path, sizeof path);
    cp_diag_init(&d);
    if (cp_buf_write_file(&in.md, path, &d) != CP_OK)
        fprintf(stderr, "monitor: %s\n", d.msg);
    printf("monitor: incident written to %s: limiting node %s%s%s; validate: %s\n", in.dir,
           in.limiting[0] ? in.limiting : "unknown", in.top_finding[0] ? "; top finding " : "",
           in.top_finding, in.verdict);
    fflush(stdout);
    json_decref(in.f);
    cp_buf_release(&in.md);
    cp_buf_release(&in.summary);
}
