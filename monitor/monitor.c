/* The monitor at run time: the flight recorder fed by the server's hooks,
 * the thread that evaluates the alarm every tick, and the deep trace the
 * server records when asked. What an incident does is incident.c's. */
#include "monitor/monitor_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cp_monitor_opts_init(struct cp_monitor_opts *o)
{
    memset(o, 0, sizeof *o);
    cp_mon_policy_init(&o->policy);
    o->recorder_s = 60;
    o->recorder_events = 131072;
    o->deep_s = 10;
    o->incident_dir = "cannprof-incidents";
    o->max_batch = 1;
}

/* ---- the hooks (server threads) --------------------------------------------------------- */

static void on_request(void *ctx, const struct cp_serve_event *e)
{
    struct cp_monitor *m = ctx;
    pthread_mutex_lock(&m->mu);
    size_t at = (m->head + m->n) % m->cap;
    if (m->n == m->cap) {
        /* full: the oldest goes; counted when it was still inside the span */
        if (e->replied_ns - m->ring[m->head].replied_ns < (int64_t)(m->o.recorder_s * 1e9))
            m->overwritten++;
        m->head = (m->head + 1) % m->cap;
        m->n--;
    }
    m->ring[at] = *e;
    m->n++;
    m->seen++;
    pthread_mutex_unlock(&m->mu);
}

static void on_node_call(void *ctx, const struct cp_flow_call_info *c)
{
    struct cp_monitor *m = ctx;
    struct cp_mon_node_call k = {
        .done_ns = c->done_ns,
        .wait_ns = c->wait_ns,
        .busy_ns = c->busy_ns,
        .blocked_ns = c->blocked_ns,
        .node = (uint32_t)c->node,
        .batch = c->batch,
        .depth = c->depth,
    };
    pthread_mutex_lock(&m->mu);
    if (m->n_calls == m->call_cap) {
        m->call_head = (m->call_head + 1) % m->call_cap;
        m->n_calls--;
    }
    m->calls[(m->call_head + m->n_calls) % m->call_cap] = k;
    m->n_calls++;
    m->calls_seen++;
    pthread_mutex_unlock(&m->mu);
}

static bool kernels_wanted(void *ctx)
{
    struct cp_monitor *m = ctx;
    int64_t until = __atomic_load_n(&m->deep_until_ns, __ATOMIC_ACQUIRE);
    return until > 0 && (int64_t)cp_clock_ns() < until;
}

/* The incident's deep trace path ("" outside an incident). */
static void deep_path(struct cp_monitor *m, char *path, size_t n)
{
    pthread_mutex_lock(&m->mu);
    snprintf(path, n, "%s", m->deep_path);
    pthread_mutex_unlock(&m->mu);
}

/* The deep trace handed over: its runs (-1: none) and what failed, for the
 * incident waiting on it. */
static void handed_over(struct cp_monitor *m, int64_t kernels_run, int64_t flow_run, size_t batches,
                        size_t events, enum cp_status st, const char *err)
{
    pthread_mutex_lock(&m->mu);
    m->kernels_in = true;
    m->kernels_run = st == CP_OK ? kernels_run : -1;
    m->flow_run = st == CP_OK ? flow_run : -1;
    m->kernels_batches = batches;
    m->kernels_events = events;
    snprintf(m->kernels_err, sizeof m->kernels_err, "%s", st == CP_OK ? "" : err);
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

static void on_kernels(void *ctx, struct cp_session *s, struct cp_trace_recorder *rec,
                       const uint64_t *run_ns, size_t n)
{
    struct cp_monitor *m = ctx;
    char path[sizeof m->deep_path];
    deep_path(m, path, sizeof path);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t run_id = -1;
    enum cp_status st = CP_ERR_INVALID;
    if (path[0]) {
        struct cp_trace_store *store = NULL;
        st = cp_trace_store_open(path, &store, &d);
        if (st == CP_OK)
            st = cp_trace_store_set_host_meta(store, &d);
        if (st == CP_OK)
            st = cp_session_store_run(s, store, "serve-deep", m->o.model_path, rec, 0, 0, run_ns, n,
                                      cp_peak_rss_bytes(), &run_id, &d);
        cp_trace_store_close(store);
    } else {
        snprintf(d.msg, sizeof d.msg, "kernels recorded outside an incident");
    }
    handed_over(m, run_id, -1, n, cp_trace_n_events(rec), st, d.msg);
}

static void on_listening(void *ctx, int port, int64_t started_ns)
{
    (void)port;
    struct cp_monitor *m = ctx;
    pthread_mutex_lock(&m->mu);
    m->started_ns = started_ns;
    pthread_mutex_unlock(&m->mu);
}

static void on_flow_recorded(void *ctx, struct cp_flow_service *fs)
{
    struct cp_monitor *m = ctx;
    char path[sizeof m->deep_path];
    deep_path(m, path, sizeof path);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t run = -1;
    size_t events = 0;
    enum cp_status st =
        path[0] ? cp_flow_service_record_end(fs, path, "serve-deep-flow", &run, &events, &d)
                : cp_diag_set(&d, CP_ERR_INVALID, "the flow was recorded outside an incident");
    handed_over(m, -1, run, 0, events, st, d.msg);
}

static void metrics(void *ctx, struct cp_buf *b)
{
    struct cp_monitor *m = ctx;
    pthread_mutex_lock(&m->mu);
    cp_buf_printf(b,
                  "# HELP cannprof_monitor_state The alarm: 0 ok, 1 pending, 2 firing, 3 "
                  "resolving.\n# TYPE cannprof_monitor_state gauge\ncannprof_monitor_state %d\n"
                  "# HELP cannprof_monitor_incidents_total Incidents handled.\n"
                  "# TYPE cannprof_monitor_incidents_total counter\n"
                  "cannprof_monitor_incidents_total %llu\n"
                  "# HELP cannprof_monitor_suppressed_total Firings held back by the cooldown or "
                  "the hourly cap.\n# TYPE cannprof_monitor_suppressed_total counter\n"
                  "cannprof_monitor_suppressed_total %llu\n"
                  "# HELP cannprof_monitor_capture_errors_total Incidents whose deep trace "
                  "caught nothing.\n# TYPE cannprof_monitor_capture_errors_total counter\n"
                  "cannprof_monitor_capture_errors_total %llu\n"
                  "# HELP cannprof_monitor_recorder_events Requests held by the flight "
                  "recorder.\n# TYPE cannprof_monitor_recorder_events gauge\n"
                  "cannprof_monitor_recorder_events %zu\n",
                  (int)m->alarm.state, (unsigned long long)m->alarm.incidents,
                  (unsigned long long)m->alarm.suppressed, (unsigned long long)m->capture_errors,
                  m->n);
    cp_buf_puts(b, "# HELP cannprof_monitor_value Each condition's value over the last window "
                   "(NaN: too few requests).\n# TYPE cannprof_monitor_value gauge\n");
    for (size_t k = 0; k < m->o.conditions.n; k++) {
        double v = m->last.known[k] ? m->last.v[k] : NAN;
        cp_buf_printf(b, "cannprof_monitor_value{condition=\"%s\"} %.9g\n",
                      m->o.conditions.c[k].text, v);
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- the recorder ------------------------------------------------------------------------- */

size_t cp_mon_snapshot(struct cp_monitor *m, int64_t from_ns, int64_t to_ns,
                       struct cp_serve_event **out)
{
    pthread_mutex_lock(&m->mu);
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        const struct cp_serve_event *e = &m->ring[(m->head + i) % m->cap];
        k += e->replied_ns > from_ns && e->replied_ns <= to_ns;
    }
    *out = cp_calloc(k ? k : 1, sizeof **out);
    size_t j = 0;
    for (size_t i = 0; *out && i < m->n; i++) {
        const struct cp_serve_event *e = &m->ring[(m->head + i) % m->cap];
        if (e->replied_ns > from_ns && e->replied_ns <= to_ns)
            (*out)[j++] = *e;
    }
    pthread_mutex_unlock(&m->mu);
    return *out ? j : 0;
}

size_t cp_mon_snapshot_calls(struct cp_monitor *m, int64_t from_ns, int64_t to_ns,
                             struct cp_mon_node_call **out)
{
    *out = NULL;
    pthread_mutex_lock(&m->mu);
    size_t k = 0;
    for (size_t i = 0; i < m->n_calls; i++) {
        const struct cp_mon_node_call *c = &m->calls[(m->call_head + i) % m->call_cap];
        k += c->done_ns > from_ns && c->done_ns <= to_ns;
    }
    if (k)
        *out = cp_calloc(k, sizeof **out);
    size_t j = 0;
    for (size_t i = 0; *out && i < m->n_calls; i++) {
        const struct cp_mon_node_call *c = &m->calls[(m->call_head + i) % m->call_cap];
        if (c->done_ns > from_ns && c->done_ns <= to_ns)
            (*out)[j++] = *c;
    }
    pthread_mutex_unlock(&m->mu);
    return j;
}

/* ---- the thread ---------------------------------------------------------------------------- */

enum cp_mon_event cp_mon_tick(struct cp_monitor *m, int64_t now)
{
    int64_t w = (int64_t)(m->o.policy.window_s * 1e9);
    struct cp_serve_event *ev = NULL;
    size_t n = cp_mon_snapshot(m, now - w, now, &ev);
    struct cp_mon_node_call *calls = NULL;
    size_t n_calls = m->calls ? cp_mon_snapshot_calls(m, now - w, now, &calls) : 0;
    struct cp_mon_values v;
    cp_mon_window(&m->o.conditions, ev, n, calls, n_calls, now - w, now, m->o.policy.min_requests,
                  &v);
    /* a window reaching back before the server listened decides nothing
     * (its throughput would count time nobody could be served in) */
    pthread_mutex_lock(&m->mu);
    bool full = m->started_ns && now - m->started_ns >= w;
    pthread_mutex_unlock(&m->mu);
    if (!full)
        memset(v.known, 0, sizeof v.known);
    pthread_mutex_lock(&m->mu);
    m->last = v;
    enum cp_mon_event e = cp_mon_alarm_step(&m->alarm, &m->o.conditions, &v, now);
    pthread_mutex_unlock(&m->mu);
    /* the last healthy window: every condition known and none holding */
    bool healthy = m->alarm.state == CP_MON_OK && n > 0;
    for (size_t k = 0; healthy && k < m->o.conditions.n; k++)
        healthy = v.known[k] && !cp_mon_condition_fires(&m->o.conditions.c[k], v.v[k]);
    if (healthy) {
        free(m->healthy);
        m->healthy = ev;
        m->n_healthy = n;
        m->healthy_to_ns = now;
        ev = NULL;
        free(m->healthy_calls);
        m->healthy_calls = calls;
        m->n_healthy_calls = n_calls;
        calls = NULL;
    }
    free(ev);
    free(calls);
    if (e == CP_MON_SUPPRESSED || e == CP_MON_RESOLVED) {
        const struct cp_mon_condition *c =
            m->alarm.trigger >= 0 ? &m->o.conditions.c[m->alarm.trigger] : NULL;
        if (e == CP_MON_SUPPRESSED)
            fprintf(stderr, "monitor: %s holds again, no incident: %s (%llu suppressed so far)\n",
                    c ? c->text : "a condition",
                    m->alarm.n_fires >= (size_t)m->o.policy.max_per_hour
                        ? "the hourly cap is reached"
                        : "inside the cooldown after the last incident",
                    (unsigned long long)m->alarm.suppressed);
        else
            printf("monitor: resolved: every condition back past its margin for %.0f s\n",
                   m->o.policy.hold_s);
        fflush(stdout);
    }
    return e;
}

/* Sleep until `until_ns` or a stop, whichever first. true when stopped. */
bool cp_mon_sleep_until(struct cp_monitor *m, int64_t until_ns)
{
    pthread_mutex_lock(&m->mu);
    while (!m->stopping && (int64_t)cp_clock_ns() < until_ns) {
        int64_t left = until_ns - (int64_t)cp_clock_ns();
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = (int64_t)ts.tv_nsec + (left > 0 ? left : 0);
        ts.tv_sec += ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    }
    bool stopped = m->stopping;
    pthread_mutex_unlock(&m->mu);
    return stopped;
}

static void *monitor_main(void *arg)
{
    struct cp_monitor *m = arg;
    int64_t tick = (int64_t)(m->tick_s * 1e9);
    int64_t next = (int64_t)cp_clock_ns() + tick;
    while (!cp_mon_sleep_until(m, next)) {
        int64_t now = (int64_t)cp_clock_ns();
        next += tick;
        if (next <= now)
            next = now + tick;
        if (cp_mon_tick(m, now) == CP_MON_FIRE)
            cp_mon_incident(m, now);
    }
    return NULL;
}

/* ---- making one --------------------------------------------------------------------------- */

static void free_names(struct cp_monitor *m)
{
    for (size_t i = 0; i < m->n_flow_names; i++)
        free(m->flow_names[i]);
    free(m->flow_names);
    m->flow_names = NULL;
    m->n_flow_names = 0;
}

enum cp_status cp_monitor_create(const struct cp_monitor_opts *o, struct cp_monitor **out,
                                 struct cp_diag *d)
{
    *out = NULL;
    const struct cp_mon_policy *p = &o->policy;
    if (o->conditions.n == 0)
        return cp_diag_set(d, CP_ERR_USAGE, "--monitor: give a condition, as in p99_latency>2s");
    if (!(p->window_s >= 0.1 && p->window_s <= 86400))
        return cp_diag_set(d, CP_ERR_USAGE, "--window is 0.1 s to a day");
    if (!(p->hold_s >= 0 && p->hold_s <= 86400))
        return cp_diag_set(d, CP_ERR_USAGE, "--for is 0 to a day");
    if (!(p->hysteresis >= 0 && p->hysteresis < 1))
        return cp_diag_set(d, CP_ERR_USAGE, "--hysteresis is 0%% to below 100%%");
    if (p->min_requests < 1 || p->min_requests > 10000000)
        return cp_diag_set(d, CP_ERR_USAGE, "--min-requests is 1 to 10000000");
    if (!(p->cooldown_s >= 0 && p->cooldown_s <= 7 * 86400))
        return cp_diag_set(d, CP_ERR_USAGE, "--cooldown is 0 to a week");
    if (p->max_per_hour < 1 || p->max_per_hour > 60)
        return cp_diag_set(d, CP_ERR_USAGE, "--max-incidents is 1 to 60 per hour");
    if (!(o->recorder_s >= p->window_s && o->recorder_s <= 86400))
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--recorder is the window (%g s) to a day: it must hold a whole window",
                           p->window_s);
    if (!(o->deep_s > 0 && o->deep_s <= 3600))
        return cp_diag_set(d, CP_ERR_USAGE, "--deep-trace is above 0 to an hour");
    if (o->recorder_events < 1024 || o->recorder_events > (1u << 24))
        return cp_diag_set(d, CP_ERR_USAGE, "the recorder holds 1024 to 16777216 requests");
    struct cp_mon_conditions resolved = o->conditions;
    enum cp_status st = cp_mon_conditions_resolve(
        &resolved, o->model_path, o->flow ? o->flow_nodes : NULL, o->flow ? o->flow_workers : NULL,
        o->flow ? o->n_flow_nodes : 0, d);
    if (st != CP_OK)
        return st;
    struct cp_monitor *m = cp_calloc(1, sizeof *m);
    if (!m)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    m->o = *o;
    m->o.conditions = resolved;
    m->o.flow_nodes = NULL; /* borrowed only here */
    m->o.flow_workers = NULL;
    m->o.n_flow_nodes = 0;
    m->cap = o->recorder_events;
    m->ring = cp_calloc(m->cap, sizeof *m->ring);
    if (o->flow && m->ring) {
        m->call_cap = o->recorder_events;
        m->calls = cp_calloc(m->call_cap, sizeof *m->calls);
        m->flow_names = cp_calloc(o->n_flow_nodes ? o->n_flow_nodes : 1, sizeof *m->flow_names);
        bool ok = m->calls && m->flow_names;
        for (size_t i = 0; ok && i < o->n_flow_nodes; i++)
            ok = (m->flow_names[m->n_flow_names++] = cp_strdup(o->flow_nodes[i])) != NULL;
        if (!ok) {
            free(m->ring);
            m->ring = NULL;
        }
    }
    if (!m->ring) {
        free_names(m);
        free(m->calls);
        free(m);
        return cp_diag_set(d, CP_ERR_NOMEM,
                           "out of memory reserving the flight recorder (%zu "
                           "requests)",
                           o->recorder_events);
    }
    m->tick_s = o->tick_s > 0 ? o->tick_s : fmin(1.0, fmax(0.05, p->hold_s / 4));
    cp_mon_alarm_init(&m->alarm, p);
    st = cp_mkdir_p(o->incident_dir, 0755, d);
    if (st != CP_OK) {
        free(m->ring);
        free(m->calls);
        free_names(m);
        free(m);
        return st;
    }
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    m->hooks = (struct cp_serve_hooks){
        .ctx = m,
        .on_request = on_request,
        .kernels_wanted = kernels_wanted,
        .on_kernels = o->flow ? NULL : on_kernels,
        .on_flow_recorded = o->flow ? on_flow_recorded : NULL,
        .on_node_call = o->flow ? on_node_call : NULL,
        .on_listening = on_listening,
        .metrics = metrics,
    };
    *out = m;
    return CP_OK;
}

const struct cp_serve_hooks *cp_monitor_hooks(struct cp_monitor *m)
{
    return &m->hooks;
}

enum cp_status cp_monitor_start(struct cp_monitor *m, struct cp_diag *d)
{
    if (m->running)
        return CP_OK;
    if (pthread_create(&m->th, NULL, monitor_main, m) != 0)
        return cp_diag_set(d, CP_ERR_NOMEM, "cannot start the monitor's thread: %s",
                           strerror(errno));
    m->running = true;
    return CP_OK;
}

void cp_monitor_stop(struct cp_monitor *m)
{
    if (!m->running)
        return;
    pthread_mutex_lock(&m->mu);
    m->stopping = true;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->th, NULL);
    m->running = false;
}

void cp_monitor_get_stats(struct cp_monitor *m, struct cp_monitor_stats *s)
{
    pthread_mutex_lock(&m->mu);
    *s = (struct cp_monitor_stats){
        .requests_seen = m->seen,
        .incidents = m->alarm.incidents,
        .suppressed = m->alarm.suppressed,
        .resolved = m->alarm.resolved,
        .capture_errors = m->capture_errors,
        .alerts_failed = m->alerts_failed,
        .state = m->alarm.state,
    };
    pthread_mutex_unlock(&m->mu);
}

void cp_monitor_free(struct cp_monitor *m)
{
    if (!m)
        return;
    cp_monitor_stop(m);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m->ring);
    free(m->calls);
    free(m->healthy);
    free(m->healthy_calls);
    free_names(m);
    free(m);
}
