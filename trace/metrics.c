/* One run's figures for a verdict: latency and kernel time per iteration,
 * memory, and the identity of the model and config that produced them,
 * read through the query API (trace/query.h). */
#include "trace/trace_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cp_run_metrics_release(struct cp_run_metrics *m)
{
    free(m->kind);
    free(m->created_at);
    free(m->model_path);
    free(m->model_hash);
    free(m->config_id);
    free(m->config_json);
    free(m->latency_ns);
    free(m->device_ns);
    free(m->probe_ns);
    memset(m, 0, sizeof *m);
    m->precision_loss = m->started_us = NAN;
}

/* The run's description; the strings move into *m. */
static enum cp_status read_run_row(struct cp_trace_store *s, int64_t run, struct cp_run_metrics *m,
                                   struct cp_diag *d)
{
    struct cp_trace_run r;
    enum cp_status ret = cp_trace_query_run(s, run, &r, d);
    if (ret != CP_OK)
        return ret;
    m->kind = r.kind;
    m->created_at = r.created_at;
    m->model_path = r.model_path;
    m->model_hash = r.model_hash;
    m->config_id = r.config_id;
    m->config_json = r.config_json;
    r.kind = r.created_at = r.model_path = r.model_hash = r.config_id = r.config_json = NULL;
    m->threads = r.threads;
    m->batch = r.batch;
    m->weight_bytes = r.weight_bytes;
    m->arena_bytes = r.arena_bytes;
    m->peak_bytes = r.peak_bytes;
    m->peak_rss_bytes = r.peak_rss_bytes;
    cp_trace_run_release(&r);
    return CP_OK;
}

/* Latency samples with their iteration numbers (needed to line kernel time
 * up with them). OUT: m->latency_ns, m->n, *iters (caller frees). */
static enum cp_status read_samples(struct cp_trace_store *s, int64_t run, struct cp_run_metrics *m,
                                   int64_t **iters, struct cp_diag *d)
{
    struct cp_trace_sample *v;
    size_t n;
    enum cp_status ret = cp_trace_query_samples(s, run, &v, &n, d);
    if (ret != CP_OK || n == 0)
        return ret;
    m->latency_ns = cp_calloc(n, sizeof *m->latency_ns);
    *iters = cp_calloc(n, sizeof **iters);
    if (!m->latency_ns || !*iters) {
        free(v);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading samples", s->path);
    }
    for (size_t i = 0; i < n; i++) {
        (*iters)[i] = v[i].iteration;
        m->latency_ns[i] = v[i].latency_ns;
    }
    m->n = n;
    free(v);
    return CP_OK;
}

/* Sum of device-layer event durations per measured iteration. Iterations
 * without kernel events keep 0; a run without any leaves device_ns NULL. */
static enum cp_status read_device_time(struct cp_trace_store *s, int64_t run,
                                       struct cp_run_metrics *m, const int64_t *iters,
                                       struct cp_diag *d)
{
    if (m->n == 0)
        return CP_OK;
    struct cp_trace_iter_time *v;
    size_t n;
    enum cp_status ret = cp_trace_query_layer_iterations(s, run, CP_LAYER_DEVICE, NULL, &v, &n, d);
    if (ret != CP_OK || n == 0)
        return ret;
    m->device_ns = cp_calloc(m->n, sizeof *m->device_ns);
    if (!m->device_ns) {
        free(v);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading kernel time", s->path);
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < m->n && iters[j] < v[i].iteration) /* both sides are sorted by iteration */
            j++;
        if (j < m->n && iters[j] == v[i].iteration)
            m->device_ns[j] = v[i].total_ns > 0 ? (uint64_t)v[i].total_ns : 0;
    }
    free(v);
    return CP_OK;
}

/* The interference probe of each measured iteration (counter "probe_ns").
 * Kept only when every iteration has one: a partial series cannot say
 * which iterations ran undisturbed. */
static enum cp_status read_probe(struct cp_trace_store *s, int64_t run, struct cp_run_metrics *m,
                                 const int64_t *iters, struct cp_diag *d)
{
    if (m->n == 0)
        return CP_OK;
    struct cp_trace_point *v;
    size_t n;
    enum cp_status ret = cp_trace_query_counter_series(s, run, "probe_ns", &v, &n, d);
    if (ret != CP_OK || n == 0)
        return ret;
    uint64_t *p = cp_calloc(m->n, sizeof *p);
    if (!p) {
        free(v);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading the probe", s->path);
    }
    size_t j = 0, found = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < m->n && iters[j] < v[i].iteration) /* both sides are sorted by iteration */
            j++;
        if (j < m->n && iters[j] == v[i].iteration && v[i].value > 0 && v[i].value < 1e18) {
            p[j] = (uint64_t)v[i].value;
            found++;
            j++;
        }
    }
    free(v);
    if (found == m->n)
        m->probe_ns = p;
    else
        free(p);
    return CP_OK;
}

enum cp_status cp_trace_store_run_metrics(struct cp_trace_store *s, int64_t run_id,
                                          struct cp_run_metrics *m, struct cp_diag *d)
{
    memset(m, 0, sizeof *m);
    m->precision_loss = m->started_us = NAN;
    int64_t run;
    enum cp_status ret = cp_trace_store_resolve_run(s, run_id, &run, d);
    if (ret != CP_OK)
        return ret;
    m->run_id = run;
    int64_t *iters = NULL;
    if ((ret = read_run_row(s, run, m, d)) == CP_OK &&
        (ret = read_samples(s, run, m, &iters, d)) == CP_OK &&
        (ret = read_device_time(s, run, m, iters, d)) == CP_OK &&
        (ret = read_probe(s, run, m, iters, d)) == CP_OK &&
        (ret = cp_trace_query_counter(s, run, "precision_loss", &m->precision_loss, d)) == CP_OK &&
        (ret = cp_trace_query_counter(s, run, CP_TRACE_STARTED_COUNTER, &m->started_us, d)) ==
            CP_OK) {
        double hit = NAN;
        ret = cp_trace_query_counter(s, run, "measure.time_limit_hit", &hit, d);
        m->time_limit_hit = hit > 0;
        double raised = NAN;
        if (ret == CP_OK)
            ret = cp_trace_query_counter(s, run, "measure.priority_raised", &raised, d);
        m->priority_raised = raised > 0;
    }
    free(iters);
    if (ret != CP_OK)
        cp_run_metrics_release(m);
    return ret;
}
