/* One run's figures for a verdict: latency and kernel time per iteration,
 * memory, and the identity of the model and config that produced them. */
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
    m->precision_loss = NAN;
}

static char *col_text(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return cp_strdup(t ? (const char *)t : "");
}

static uint64_t col_u64(sqlite3_stmt *st, int col)
{
    sqlite3_int64 v = sqlite3_column_int64(st, col);
    return v < 0 ? 0 : (uint64_t)v;
}

static enum cp_status prepare(struct cp_trace_store *s, const char *sql, sqlite3_stmt **st,
                              const char *what, struct cp_diag *d)
{
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, what);
    return CP_OK;
}

static enum cp_status read_run_row(struct cp_trace_store *s, int64_t run, struct cp_run_metrics *m,
                                   struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret = prepare(s,
                                 "SELECT kind, created_at, model_path, model_hash, config_id, "
                                 "threads, batch, weight_bytes, arena_bytes, peak_bytes, "
                                 "peak_rss_bytes, config_json FROM runs WHERE id = ?1",
                                 &st, "reading a run", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, run);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        ret = rc == SQLITE_DONE
                  ? cp_diag_set(d, CP_ERR_INVALID, "%s: no run %lld", s->path, (long long)run)
                  : cp_trace_store_db_error(s, d, "reading a run");
        goto out;
    }
    m->kind = col_text(st, 0);
    m->created_at = col_text(st, 1);
    m->model_path = col_text(st, 2);
    m->model_hash = col_text(st, 3);
    m->config_id = col_text(st, 4);
    m->threads = sqlite3_column_int(st, 5);
    m->batch = sqlite3_column_int(st, 6);
    m->weight_bytes = col_u64(st, 7);
    m->arena_bytes = col_u64(st, 8);
    m->peak_bytes = col_u64(st, 9);
    m->peak_rss_bytes = col_u64(st, 10);
    m->config_json = col_text(st, 11);
    if (!m->kind || !m->created_at || !m->model_path || !m->model_hash || !m->config_id ||
        !m->config_json)
        ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading run %lld", s->path,
                          (long long)run);
out:
    sqlite3_finalize(st);
    return ret;
}

/* Latency samples with their iteration numbers (needed to line kernel time
 * up with them). OUT: m->latency_ns, m->n, *iters (caller frees). */
static enum cp_status read_samples(struct cp_trace_store *s, int64_t run, struct cp_run_metrics *m,
                                   int64_t **iters, struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret = prepare(s,
                                 "SELECT iteration, latency_ns FROM samples WHERE run_id = ?1 "
                                 "ORDER BY iteration",
                                 &st, "reading samples", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, run);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (m->n == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            uint64_t *l = cp_realloc_array(m->latency_ns, ncap, sizeof *l);
            if (l)
                m->latency_ns = l;
            int64_t *it = cp_realloc_array(*iters, ncap, sizeof *it);
            if (it)
                *iters = it;
            if (!l || !it) {
                ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading samples", s->path);
                goto out;
            }
            cap = ncap;
        }
        (*iters)[m->n] = sqlite3_column_int64(st, 0);
        m->latency_ns[m->n++] = col_u64(st, 1);
    }
    if (rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, "reading samples");
out:
    sqlite3_finalize(st);
    return ret;
}

/* Sum of device-layer event durations per measured iteration. Iterations
 * without kernel events keep 0; a run without any leaves device_ns NULL. */
static enum cp_status read_device_time(struct cp_trace_store *s, int64_t run,
                                       struct cp_run_metrics *m, const int64_t *iters,
                                       struct cp_diag *d)
{
    if (m->n == 0)
        return CP_OK;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = prepare(s,
                                 "SELECT iteration, TOTAL(dur_ns) FROM events WHERE run_id = ?1 "
                                 "AND layer = 2 AND iteration >= 0 GROUP BY iteration "
                                 "ORDER BY iteration",
                                 &st, "reading kernel time", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, run);
    size_t j = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!m->device_ns) {
            m->device_ns = cp_calloc(m->n, sizeof *m->device_ns);
            if (!m->device_ns) {
                ret =
                    cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading kernel time", s->path);
                goto out;
            }
        }
        int64_t it = sqlite3_column_int64(st, 0);
        while (j < m->n && iters[j] < it) /* both sides are sorted by iteration */
            j++;
        if (j < m->n && iters[j] == it)
            m->device_ns[j] = col_u64(st, 1);
    }
    if (rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, "reading kernel time");
out:
    sqlite3_finalize(st);
    return ret;
}

/* The interference probe of each measured iteration (counter "probe_ns").
 * Kept only when every iteration has one: a partial series cannot say
 * which iterations ran undisturbed. */
static enum cp_status read_probe(struct cp_trace_store *s, int64_t run, struct cp_run_metrics *m,
                                 const int64_t *iters, struct cp_diag *d)
{
    if (m->n == 0)
        return CP_OK;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = prepare(s,
                                 "SELECT iteration, value FROM counters WHERE run_id = ?1 AND "
                                 "name = 'probe_ns' AND iteration >= 0 ORDER BY iteration",
                                 &st, "reading the interference probe", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, run);
    uint64_t *p = cp_calloc(m->n, sizeof *p);
    if (!p) {
        sqlite3_finalize(st);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading the probe", s->path);
    }
    size_t j = 0, found = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t it = sqlite3_column_int64(st, 0);
        double v = sqlite3_column_double(st, 1);
        while (j < m->n && iters[j] < it) /* both sides are sorted by iteration */
            j++;
        if (j < m->n && iters[j] == it && v > 0 && v < 1e18) {
            p[j] = (uint64_t)v;
            found++;
            j++;
        }
    }
    if (rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, "reading the interference probe");
    sqlite3_finalize(st);
    if (ret == CP_OK && found == m->n)
        m->probe_ns = p;
    else
        free(p);
    return ret;
}

static enum cp_status read_precision(struct cp_trace_store *s, int64_t run,
                                     struct cp_run_metrics *m, struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret = prepare(s,
                                 "SELECT value FROM counters WHERE run_id = ?1 AND "
                                 "name = 'precision_loss' ORDER BY rowid DESC LIMIT 1",
                                 &st, "reading counters", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, run);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        m->precision_loss = sqlite3_column_double(st, 0);
    else if (rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, "reading counters");
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_trace_store_run_metrics(struct cp_trace_store *s, int64_t run_id,
                                          struct cp_run_metrics *m, struct cp_diag *d)
{
    memset(m, 0, sizeof *m);
    m->precision_loss = NAN;
    int64_t run;
    enum cp_status ret = cp_trace_store_resolve_run(s, run_id, &run, d);
    if (ret != CP_OK)
        return ret;
    m->run_id = run;
    int64_t *iters = NULL;
    if ((ret = read_run_row(s, run, m, d)) == CP_OK &&
        (ret = read_samples(s, run, m, &iters, d)) == CP_OK &&
        (ret = read_device_time(s, run, m, iters, d)) == CP_OK &&
        (ret = read_probe(s, run, m, iters, d)) == CP_OK)
        ret = read_precision(s, run, m, d);
    free(iters);
    if (ret != CP_OK)
        cp_run_metrics_release(m);
    return ret;
}
