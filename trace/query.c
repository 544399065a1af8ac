/* Typed readers of a trace store (trace/query.h): what every question
 * shares (the run, its error words, optional tables, iteration sets), the
 * run, its samples and counters, and the host. The kernel table is read in
 * query_kernels.c, events in query_events.c. Schema: docs/trace-format.md. */
#include "trace/trace_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what every question shares ------------------------------------------------ */

enum cp_status cp_trace_q_begin(struct cp_trace_q *q, struct cp_trace_store *s, int64_t run_id,
                                const char *what, struct cp_diag *d)
{
    q->s = s;
    q->run = -1;
    snprintf(q->what, sizeof q->what, "reading %s", what);
    enum cp_status st = cp_trace_store_resolve_run(s, run_id, &q->run, d);
    if (st == CP_OK)
        snprintf(q->what, sizeof q->what, "reading %s of run %lld", what, (long long)q->run);
    return st;
}

enum cp_status cp_trace_q_db_error(struct cp_trace_q *q, struct cp_diag *d)
{
    return cp_trace_store_db_error(q->s, d, q->what);
}

enum cp_status cp_trace_q_nomem(struct cp_trace_q *q, struct cp_diag *d)
{
    return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory %s", q->s->path, q->what);
}

enum cp_status cp_trace_q_prepare(struct cp_trace_q *q, const char *sql, sqlite3_stmt **st,
                                  struct cp_diag *d)
{
    if (sqlite3_prepare_v2(q->s->db, sql, -1, st, NULL) != SQLITE_OK) {
        *st = NULL;
        return cp_trace_q_db_error(q, d);
    }
    sqlite3_bind_int64(*st, 1, q->run);
    return CP_OK;
}

enum cp_status cp_trace_q_has_table(struct cp_trace_q *q, const char *name, bool *has,
                                    struct cp_diag *d)
{
    *has = false;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(q->s->db,
                           "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') "
                           "AND name = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return cp_trace_q_db_error(q, d);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    enum cp_status ret = CP_OK;
    if (rc == SQLITE_ROW)
        *has = true;
    else if (rc != SQLITE_DONE)
        ret = cp_trace_q_db_error(q, d);
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_trace_q_check_set(struct cp_trace_q *q, const struct cp_trace_iter_set *only,
                                    struct cp_diag *d)
{
    if (!only)
        return CP_OK;
    if (only->n > 0 && !only->it)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: %s: an iteration set of %zu without its array",
                           q->s->path, q->what, only->n);
    for (size_t i = 1; i < only->n; i++)
        if (only->it[i] <= only->it[i - 1])
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s: %s: the iteration set is not ascending without repeats "
                               "(%lld after %lld)",
                               q->s->path, q->what, (long long)only->it[i],
                               (long long)only->it[i - 1]);
    return CP_OK;
}

bool cp_trace_iter_set_has(const struct cp_trace_iter_set *set, int64_t it)
{
    if (it < 0)
        return false; /* warm-up and outside the loop: never read */
    if (!set)
        return true;
    size_t lo = 0, hi = set->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (set->it[mid] < it)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < set->n && set->it[lo] == it;
}

/* Room for one more element in *arr (of *cap, `size` bytes each) once n are
 * used. False on OOM, *arr untouched. */
static bool grow(void **arr, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 64;
    void *p = cp_realloc_array(*arr, ncap, size);
    if (!p)
        return false;
    *arr = p;
    *cap = ncap;
    return true;
}

static uint64_t col_u64(sqlite3_stmt *st, int col)
{
    sqlite3_int64 v = sqlite3_column_int64(st, col);
    return v < 0 ? 0 : (uint64_t)v;
}

/* A copy of a column's text, "" for NULL. NULL on OOM. */
static char *col_text(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return cp_strdup(t ? (const char *)t : "");
}

/* ---- the run ---------------------------------------------------------------------- */

void cp_trace_run_release(struct cp_trace_run *r)
{
    if (!r)
        return;
    free(r->created_at);
    free(r->kind);
    free(r->model_path);
    free(r->model_hash);
    free(r->config_json);
    free(r->config_id);
    free(r->target);
    memset(r, 0, sizeof *r);
}

enum cp_status cp_trace_query_run(struct cp_trace_store *s, int64_t run_id, struct cp_trace_run *r,
                                  struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    struct cp_trace_q q;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_trace_q_begin(&q, s, run_id, "the run", d);
    if (ret == CP_OK)
        ret = cp_trace_q_prepare(&q,
                                 "SELECT created_at, kind, model_path, model_hash, config_json, "
                                 "config_id, target, threads, batch, warmup, iterations, "
                                 "weight_bytes, arena_bytes, peak_bytes, peak_rss_bytes "
                                 "FROM runs WHERE id = ?1",
                                 &st, d);
    if (ret != CP_OK)
        return ret;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        r->id = q.run;
        r->created_at = col_text(st, 0);
        r->kind = col_text(st, 1);
        r->model_path = col_text(st, 2);
        r->model_hash = col_text(st, 3);
        r->config_json = col_text(st, 4);
        r->config_id = col_text(st, 5);
        r->target = col_text(st, 6);
        r->threads = sqlite3_column_int(st, 7);
        r->batch = sqlite3_column_int(st, 8);
        r->warmup = sqlite3_column_int(st, 9);
        r->iterations = sqlite3_column_int(st, 10);
        r->weight_bytes = col_u64(st, 11);
        r->arena_bytes = col_u64(st, 12);
        r->peak_bytes = col_u64(st, 13);
        r->peak_rss_bytes = col_u64(st, 14);
        if (!r->created_at || !r->kind || !r->model_path || !r->model_hash || !r->config_json ||
            !r->config_id || !r->target)
            ret = cp_trace_q_nomem(&q, d);
    } else if (rc == SQLITE_DONE) { /* deleted between resolving and reading */
        ret = cp_diag_set(d, CP_ERR_INVALID, "%s: no run %lld", s->path, (long long)q.run);
    } else {
        ret = cp_trace_q_db_error(&q, d);
    }
    sqlite3_finalize(st);
    if (ret != CP_OK)
        cp_trace_run_release(r);
    return ret;
}

/* ---- samples ----------------------------------------------------------------------- */

enum cp_status cp_trace_query_samples(struct cp_trace_store *s, int64_t run_id,
                                      struct cp_trace_sample **v, size_t *n, struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    struct cp_trace_q q;
    bool has = false;
    enum cp_status ret = cp_trace_q_begin(&q, s, run_id, "samples", d);
    if (ret == CP_OK)
        ret = cp_trace_q_has_table(&q, "samples", &has, d);
    if (ret != CP_OK || !has)
        return ret;
    sqlite3_stmt *st = NULL;
    ret = cp_trace_q_prepare(
        &q, "SELECT iteration, latency_ns FROM samples WHERE run_id = ?1 ORDER BY iteration", &st,
        d);
    if (ret != CP_OK)
        return ret;
    struct cp_trace_sample *arr = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!grow((void **)&arr, &cap, len, sizeof *arr)) {
            ret = cp_trace_q_nomem(&q, d);
            break;
        }
        arr[len].iteration = sqlite3_column_int64(st, 0);
        arr[len++].latency_ns = col_u64(st, 1);
    }
    if (ret == CP_OK && rc != SQLITE_DONE)
        ret = cp_trace_q_db_error(&q, d);
    sqlite3_finalize(st);
    if (ret != CP_OK) {
        free(arr);
        return ret;
    }
    *v = arr;
    *n = len;
    return CP_OK;
}

/* The older reader of trace.h, kept for its callers: latencies only. */
enum cp_status cp_trace_store_samples(struct cp_trace_store *s, int64_t run_id, uint64_t **ns,
                                      size_t *n, int64_t *used_run, struct cp_diag *d)
{
    *ns = NULL;
    *n = 0;
    if (used_run)
        *used_run = -1;
    int64_t run;
    enum cp_status ret = cp_trace_store_resolve_run(s, run_id, &run, d);
    struct cp_trace_sample *v = NULL;
    size_t len = 0;
    if (ret == CP_OK)
        ret = cp_trace_query_samples(s, run, &v, &len, d);
    if (ret != CP_OK)
        return ret;
    uint64_t *out = len ? cp_calloc(len, sizeof *out) : NULL;
    if (len && !out) {
        free(v);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading samples", s->path);
    }
    for (size_t i = 0; i < len; i++)
        out[i] = v[i].latency_ns;
    free(v);
    *ns = out;
    *n = len;
    if (used_run)
        *used_run = run;
    return CP_OK;
}

/* ---- counters ---------------------------------------------------------------------- */

enum cp_status cp_trace_query_counter_series(struct cp_trace_store *s, int64_t run_id,
                                             const char *name, struct cp_trace_point **v, size_t *n,
                                             struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    struct cp_trace_q q;
    char what[80];
    snprintf(what, sizeof what, "counter '%.40s'", name ? name : "");
    bool has = false;
    enum cp_status ret = cp_trace_q_begin(&q, s, run_id, what, d);
    if (ret == CP_OK)
        ret = cp_trace_q_has_table(&q, "counters", &has, d);
    if (ret != CP_OK || !has || !name)
        return ret;
    sqlite3_stmt *st = NULL;
    /* counters_by_run (run_id, name, iteration) serves the order: its
     * entries end in the rowid, the recording order. */
    ret = cp_trace_q_prepare(&q,
                             "SELECT iteration, value FROM counters WHERE run_id = ?1 AND "
                             "name = ?2 AND iteration >= 0 ORDER BY iteration, rowid",
                             &st, d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    struct cp_trace_point *arr = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!grow((void **)&arr, &cap, len, sizeof *arr)) {
            ret = cp_trace_q_nomem(&q, d);
            break;
        }
        arr[len].iteration = sqlite3_column_int64(st, 0);
        arr[len++].value = sqlite3_column_double(st, 1);
    }
    if (ret == CP_OK && rc != SQLITE_DONE)
        ret = cp_trace_q_db_error(&q, d);
    sqlite3_finalize(st);
    if (ret != CP_OK) {
        free(arr);
        return ret;
    }
    *v = arr;
    *n = len;
    return CP_OK;
}

void cp_trace_counters_free(struct cp_trace_counter *v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

enum cp_status cp_trace_query_run_counters(struct cp_trace_store *s, int64_t run_id,
                                           const char *prefix, struct cp_trace_counter **v,
                                           size_t *n, struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    struct cp_trace_q q;
    bool has = false;
    enum cp_status ret = cp_trace_q_begin(&q, s, run_id, "counters", d);
    if (ret == CP_OK)
        ret = cp_trace_q_has_table(&q, "counters", &has, d);
    if (ret != CP_OK || !has)
        return ret;
    bool all = !prefix || !*prefix;
    sqlite3_stmt *st = NULL;
    ret = cp_trace_q_prepare(&q,
                             all ? "SELECT name, value FROM counters WHERE run_id = ?1 AND "
                                   "iteration = -1 ORDER BY rowid"
                                 : "SELECT name, value FROM counters WHERE run_id = ?1 AND "
                                   "iteration = -1 AND substr(name, 1, length(?2)) = ?2 "
                                   "ORDER BY rowid",
                             &st, d);
    if (ret != CP_OK)
        return ret;
    if (!all)
        sqlite3_bind_text(st, 2, prefix, -1, SQLITE_STATIC);
    struct cp_trace_counter *arr = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!grow((void **)&arr, &cap, len, sizeof *arr)) {
            ret = cp_trace_q_nomem(&q, d);
            break;
        }
        arr[len].name = col_text(st, 0);
        arr[len].value = sqlite3_column_double(st, 1);
        if (!arr[len++].name) {
            ret = cp_trace_q_nomem(&q, d);
            break;
        }
    }
    if (ret == CP_OK && rc != SQLITE_DONE)
        ret = cp_trace_q_db_error(&q, d);
    sqlite3_finalize(st);
    if (ret != CP_OK) {
        cp_trace_counters_free(arr, len);
        return ret;
    }
    *v = arr;
    *n = len;
    return CP_OK;
}

enum cp_status cp_trace_query_counter(struct cp_trace_store *s, int64_t run_id, const char *name,
                                      double *value, struct cp_diag *d)
{
    *value = NAN;
    struct cp_trace_q q;
    char what[80];
    snprintf(what, sizeof what, "counter '%.40s'", name ? name : "");
    bool has = false;
    enum cp_status ret = cp_trace_q_begin(&q, s, run_id, what, d);
    if (ret == CP_OK)
        ret = cp_trace_q_has_table(&q, "counters", &has, d);
    if (ret != CP_OK || !has || !name)
        return ret;
    sqlite3_stmt *st = NULL;
    ret = cp_trace_q_prepare(&q,
                             "SELECT value FROM counters WHERE run_id = ?1 AND name = ?2 "
                             "ORDER BY rowid DESC LIMIT 1",
                             &st, d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *value = sqlite3_column_double(st, 0);
    else if (rc != SQLITE_DONE)
        ret = cp_trace_q_db_error(&q, d);
    sqlite3_finalize(st);
    return ret;
}

/* ---- the host ----------------------------------------------------------------------- */

void cp_trace_host_release(struct cp_trace_host *h)
{
    if (!h)
        return;
    free(h->cpu_model);
    free(h->isa_flags);
    free(h->os);
    free(h->arch);
    memset(h, 0, sizeof *h);
}

/* A host_* text as the struct holds it: NULL for absent, "" and "unknown". */
static char *known_or_null(char *v)
{
    if (v && (!*v || strcmp(v, "unknown") == 0)) {
        free(v);
        return NULL;
    }
    return v;
}

/* A positive count below `max`, else 0 (unknown). */
static int64_t parse_count(const char *v, int64_t max)
{
    int64_t x;
    return v && cp_parse_i64(v, &x) && x > 0 && x < max ? x : 0;
}

enum cp_status cp_trace_query_host(struct cp_trace_store *s, struct cp_trace_host *h,
                                   struct cp_diag *d)
{
    memset(h, 0, sizeof *h);
    struct cp_trace_q q = {.s = s, .run = -1, .what = "reading the host description"};
    bool has = false;
    enum cp_status ret = cp_trace_q_has_table(&q, "meta", &has, d);
    if (ret != CP_OK || !has)
        return ret;
    static const char *const text_keys[] = {"host_cpu_model", "host_isa_flags", "host_os",
                                            "host_arch"};
    char **text_out[] = {&h->cpu_model, &h->isa_flags, &h->os, &h->arch};
    for (size_t i = 0; i < 4 && ret == CP_OK; i++) {
        char *v = NULL;
        ret = cp_trace_store_get_meta(s, text_keys[i], &v, d);
        *text_out[i] = known_or_null(v);
    }
    static const char *const num_keys[] = {"host_cores", "host_l1d_bytes", "host_l2_bytes",
                                           "host_l3_bytes"};
    int64_t num[4] = {0};
    for (size_t i = 0; i < 4 && ret == CP_OK; i++) {
        char *v = NULL;
        ret = cp_trace_store_get_meta(s, num_keys[i], &v, d);
        num[i] = parse_count(v, i == 0 ? (int64_t)1 << 20 : INT64_MAX);
        free(v);
    }
    h->cores = (int)num[0];
    h->l1d_bytes = (uint64_t)num[1];
    h->l2_bytes = (uint64_t)num[2];
    h->l3_bytes = (uint64_t)num[3];
    if (ret != CP_OK)
        cp_trace_host_release(h);
    return ret;
}

static int cmp_sample(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

enum cp_status cp_trace_query_median_sample(struct cp_trace_store *s, int64_t run_id,
                                            double *median_ns, size_t *n, struct cp_diag *d)
{
    *median_ns = NAN;
    uint64_t *ns = NULL;
    size_t m = 0;
    enum cp_status st = cp_trace_store_samples(s, run_id, &ns, &m, NULL, d);
    if (st == CP_OK && m) {
        qsort(ns, m, sizeof *ns, cmp_sample);
        *median_ns = m % 2 ? (double)ns[m / 2] : ((double)ns[m / 2 - 1] + (double)ns[m / 2]) / 2;
    }
    free(ns);
    if (n)
        *n = m;
    return st;
}
