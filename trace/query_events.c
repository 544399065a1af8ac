/* Where a run's time went: per-kernel sums over iterations, per-iteration
 * sums on a layer, and the events of iterations streamed in time order
 * (trace/query.h). The events table is clustered by (run_id, layer,
 * kernel_idx, iteration, seq), so every query here names the run and the
 * layer first and scans a range of the table itself. */
#include "trace/trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The run resolved, the set checked, and whether there are events at all. */
static enum cp_status begin(struct cp_trace_q *q, struct cp_trace_store *s, int64_t run_id,
                            const char *what, const struct cp_trace_iter_set *only, bool *has,
                            struct cp_diag *d)
{
    *has = false;
    enum cp_status rc = cp_trace_q_begin(q, s, run_id, what, d);
    if (rc == CP_OK)
        rc = cp_trace_q_check_set(q, only, d);
    if (rc == CP_OK)
        rc = cp_trace_q_has_table(q, "events", has, d);
    if (rc == CP_OK && only && only->n == 0)
        *has = false; /* no iteration asked for */
    return rc;
}

/* Bind the set's bounds to ?2 and ?3 (every measured iteration when NULL),
 * so the scan skips what lies outside it. */
static void bind_bounds(sqlite3_stmt *st, const struct cp_trace_iter_set *only)
{
    sqlite3_bind_int64(st, 2, only && only->it[0] > 0 ? only->it[0] : 0);
    sqlite3_bind_int64(st, 3, only ? only->it[only->n - 1] : INT64_MAX);
}

/* ---- per kernel ------------------------------------------------------------------- */

static enum cp_status push_kernel(struct cp_trace_q *q, struct cp_trace_kernel_time **arr,
                                  size_t *len, size_t *cap, struct cp_diag *d)
{
    if (*len == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        struct cp_trace_kernel_time *g = cp_realloc_array(*arr, nc, sizeof *g);
        if (!g)
            return cp_trace_q_nomem(q, d);
        *arr = g;
        *cap = nc;
    }
    memset(&(*arr)[*len], 0, sizeof **arr);
    (*len)++;
    return CP_OK;
}

enum cp_status cp_trace_query_kernel_times(struct cp_trace_store *s, int64_t run_id,
                                           const struct cp_trace_iter_set *only, double short_ns,
                                           struct cp_trace_kernel_time **v, size_t *n,
                                           struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    struct cp_trace_q q;
    bool has;
    enum cp_status rc = begin(&q, s, run_id, "kernel events", only, &has, d);
    if (rc != CP_OK || !has)
        return rc;
    /* Over every measured iteration SQLite sums per kernel itself. A set
     * needs each event's iteration, and a GROUP BY (kernel, iteration)
     * would make about one group per event (a kernel runs once an
     * iteration): the events are summed here instead, which is cheaper. */
    sqlite3_stmt *st = NULL;
    rc = cp_trace_q_prepare(
        &q,
        only ? "SELECT kernel_idx, iteration, dur_ns FROM events WHERE run_id = ?1 AND "
               "layer = 2 AND kernel_idx >= 0 AND iteration BETWEEN ?2 AND ?3 "
               "ORDER BY kernel_idx"
             : "SELECT kernel_idx, count(*), total(dur_ns), total(dur_ns < ?2), "
               "total(CASE WHEN dur_ns < ?2 THEN dur_ns ELSE 0 END) FROM events "
               "WHERE run_id = ?1 AND layer = 2 AND kernel_idx >= 0 AND iteration >= 0 "
               "GROUP BY kernel_idx ORDER BY kernel_idx",
        &st, d);
    if (rc != CP_OK)
        return rc;
    if (only)
        bind_bounds(st, only);
    else
        sqlite3_bind_double(st, 2, short_ns);
    struct cp_trace_kernel_time *arr = NULL;
    size_t len = 0, cap = 0;
    int r = SQLITE_DONE;
    while (rc == CP_OK && (r = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t k = sqlite3_column_int64(st, 0);
        if (!only) {
            if ((rc = push_kernel(&q, &arr, &len, &cap, d)) != CP_OK)
                break;
            struct cp_trace_kernel_time *t = &arr[len - 1];
            t->kernel_idx = k;
            t->events = sqlite3_column_int64(st, 1);
            t->total_ns = sqlite3_column_double(st, 2);
            t->n_short = (int64_t)sqlite3_column_double(st, 3);
            t->short_ns = sqlite3_column_double(st, 4);
            continue;
        }
        if (!cp_trace_iter_set_has(only, sqlite3_column_int64(st, 1)))
            continue;
        /* rows come in key order: one kernel's events together */
        if ((len == 0 || arr[len - 1].kernel_idx != k) &&
            (rc = push_kernel(&q, &arr, &len, &cap, d)) != CP_OK)
            break;
        struct cp_trace_kernel_time *t = &arr[len - 1];
        t->kernel_idx = k;
        double dur = (double)sqlite3_column_int64(st, 2);
        t->events++;
        t->total_ns += dur;
        if (dur < short_ns) {
            t->n_short++;
            t->short_ns += dur;
        }
    }
    if (rc == CP_OK && r != SQLITE_DONE)
        rc = cp_trace_q_db_error(&q, d);
    sqlite3_finalize(st);
    if (rc != CP_OK) {
        free(arr);
        return rc;
    }
    *v = arr;
    *n = len;
    return CP_OK;
}

/* ---- per iteration ------------------------------------------------------------------ */

enum cp_status cp_trace_query_layer_iterations(struct cp_trace_store *s, int64_t run_id,
                                               enum cp_trace_layer layer,
                                               const struct cp_trace_iter_set *only,
                                               struct cp_trace_iter_time **v, size_t *n,
                                               struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    struct cp_trace_q q;
    bool has;
    char what[48];
    snprintf(what, sizeof what, "%s events", cp_trace_layer_name(layer));
    enum cp_status rc = begin(&q, s, run_id, what, only, &has, d);
    if (rc != CP_OK || !has)
        return rc;
    sqlite3_stmt *st = NULL;
    rc = cp_trace_q_prepare(&q,
                            "SELECT iteration, count(*), total(dur_ns) FROM events "
                            "WHERE run_id = ?1 AND layer = ?4 AND iteration BETWEEN ?2 AND ?3 "
                            "GROUP BY iteration ORDER BY iteration",
                            &st, d);
    if (rc != CP_OK)
        return rc;
    bind_bounds(st, only);
    sqlite3_bind_int(st, 4, (int)layer);
    struct cp_trace_iter_time *arr = NULL;
    size_t len = 0, cap = 0;
    int r = SQLITE_DONE;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t it = sqlite3_column_int64(st, 0);
        if (!cp_trace_iter_set_has(only, it))
            continue;
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 256;
            struct cp_trace_iter_time *g = cp_realloc_array(arr, nc, sizeof *g);
            if (!g) {
                rc = cp_trace_q_nomem(&q, d);
                break;
            }
            arr = g;
            cap = nc;
        }
        arr[len].iteration = it;
        arr[len].events = sqlite3_column_int64(st, 1);
        arr[len++].total_ns = sqlite3_column_double(st, 2);
    }
    if (rc == CP_OK && r != SQLITE_DONE)
        rc = cp_trace_q_db_error(&q, d);
    sqlite3_finalize(st);
    if (rc != CP_OK) {
        free(arr);
        return rc;
    }
    *v = arr;
    *n = len;
    return CP_OK;
}

/* ---- the events themselves ---------------------------------------------------------- */

enum cp_status cp_trace_query_iteration_events(struct cp_trace_store *s, int64_t run_id,
                                               unsigned layers,
                                               const struct cp_trace_iter_set *only,
                                               cp_trace_event_fn fn, void *ctx, struct cp_diag *d)
{
    struct cp_trace_q q;
    bool has, names = false;
    enum cp_status rc = begin(&q, s, run_id, "events", only, &has, d);
    if (rc == CP_OK && has)
        rc = cp_trace_q_has_table(&q, "strings", &names, d);
    if (rc != CP_OK || !has || layers == 0)
        return rc;
    /* `layer IN (1, 2)`: each layer is a range of the table's key. */
    char in[32 * 4 + 1] = "";
    size_t len = 0;
    for (unsigned l = 0; l < 32; l++)
        if (layers & CP_TRACE_LAYER_BIT(l))
            len += (size_t)snprintf(in + len, sizeof in - len, "%s%u", len ? "," : "", l);
    char sql[512];
    snprintf(sql, sizeof sql,
             names ? "SELECT e.iteration, e.kernel_idx, e.start_ns, e.dur_ns, e.layer, e.thread, "
                     "e.depth, t.value FROM events e LEFT JOIN strings t ON t.id = e.name_id "
                     "WHERE e.run_id = ?1 AND e.layer IN (%s) AND e.iteration BETWEEN ?2 AND ?3 "
                     "ORDER BY e.iteration, e.start_ns"
                   : "SELECT iteration, kernel_idx, start_ns, dur_ns, layer, thread, depth, NULL "
                     "FROM events WHERE run_id = ?1 AND layer IN (%s) AND "
                     "iteration BETWEEN ?2 AND ?3 ORDER BY iteration, start_ns",
             in);
    sqlite3_stmt *st = NULL;
    rc = cp_trace_q_prepare(&q, sql, &st, d);
    if (rc != CP_OK)
        return rc;
    bind_bounds(st, only);
    int r = SQLITE_DONE;
    struct cp_trace_event_row e;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        e.iteration = sqlite3_column_int64(st, 0);
        if (!cp_trace_iter_set_has(only, e.iteration))
            continue;
        e.kernel_idx = sqlite3_column_int64(st, 1);
        e.start_ns = sqlite3_column_int64(st, 2);
        e.dur_ns = sqlite3_column_int64(st, 3);
        e.layer = sqlite3_column_int(st, 4);
        e.thread = sqlite3_column_int(st, 5);
        e.depth = sqlite3_column_int(st, 6);
        e.name = (const char *)sqlite3_column_text(st, 7);
        if ((rc = fn(ctx, &e, d)) != CP_OK)
            break;
    }
    if (rc == CP_OK && r != SQLITE_DONE)
        rc = cp_trace_q_db_error(&q, d);
    sqlite3_finalize(st);
    return rc;
}
