/* The trace store's run data: runs, samples, kernels, events, counters
 * (read back through query*.c). Bulk writes use one prepared statement per table,
 * rebound per row, inside explicit transactions. */
#include "trace/trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Events per transaction in cp_trace_store_add_events: large enough that
 * commits cost nothing next to the inserts, small enough that the WAL stays
 * a few megabytes and a checkpoint can run between batches. */
#define EVENTS_PER_TX 65536

static sqlite3_int64 u64_to_db(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)v;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static enum cp_status prepare(struct cp_trace_store *s, const char *sql, sqlite3_stmt **st,
                              const char *what, struct cp_diag *d)
{
    *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, what);
    return CP_OK;
}

static enum cp_status begin(struct cp_trace_store *s, const char *what, struct cp_diag *d)
{
    return cp_trace_store_exec(s, "BEGIN IMMEDIATE", what, d);
}

static enum cp_status commit(struct cp_trace_store *s, const char *what, struct cp_diag *d)
{
    return cp_trace_store_exec(s, "COMMIT", what, d);
}

static void rollback(struct cp_trace_store *s)
{
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

/* ---- runs ------------------------------------------------------------------ */

enum cp_status cp_trace_store_resolve_run(struct cp_trace_store *s, int64_t run_id,
                                          int64_t *used_run, struct cp_diag *d)
{
    *used_run = -1;
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        prepare(s,
                run_id < 0 ? "SELECT max(id), count(*) FROM runs"
                           : "SELECT id, (SELECT count(*) FROM runs) FROM runs WHERE id = ?1",
                &st, "looking up the run", d);
    if (ret != CP_OK)
        return ret;
    if (run_id >= 0)
        sqlite3_bind_int64(st, 1, run_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        *used_run = sqlite3_column_int64(st, 0);
    } else if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        sqlite3_stmt *q = NULL;
        int64_t n = 0, lo = 0, hi = 0;
        if (sqlite3_prepare_v2(s->db, "SELECT count(*), min(id), max(id) FROM runs", -1, &q,
                               NULL) == SQLITE_OK &&
            sqlite3_step(q) == SQLITE_ROW) {
            n = sqlite3_column_int64(q, 0);
            lo = sqlite3_column_int64(q, 1);
            hi = sqlite3_column_int64(q, 2);
        }
        sqlite3_finalize(q);
        if (n == 0)
            ret = cp_diag_set(d, CP_ERR_INVALID, "%s: the trace store holds no runs", s->path);
        else
            ret = cp_diag_set(d, CP_ERR_INVALID,
                              "%s: no run %lld (the store holds %lld run%s, ids %lld..%lld)",
                              s->path, (long long)run_id, (long long)n, n == 1 ? "" : "s",
                              (long long)lo, (long long)hi);
    } else {
        ret = cp_trace_store_db_error(s, d, "looking up the run");
    }
    sqlite3_finalize(st);
    return ret;
}

/* A run id given to a writing call must exist: writing rows for a run that
 * is not there is a caller bug we report rather than store. */
static enum cp_status check_run(struct cp_trace_store *s, int64_t run_id, struct cp_diag *d)
{
    if (run_id < 0)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: invalid run id %lld", s->path,
                           (long long)run_id);
    int64_t used;
    return cp_trace_store_resolve_run(s, run_id, &used, d);
}

static void utc_now_iso8601(const struct timespec *now, char out[32])
{
    struct timespec ts = *now;
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

enum cp_status cp_trace_store_begin_run(struct cp_trace_store *s,
                                        const struct cp_trace_run_info *info, int64_t *run_id,
                                        struct cp_diag *d)
{
    *run_id = -1;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = prepare(
        s,
        "INSERT INTO runs(created_at, kind, model_path, model_hash, config_json, config_id, "
        "target, threads, batch, warmup, iterations, weight_bytes, arena_bytes, peak_bytes, "
        "peak_rss_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        &st, "starting a run", d);
    if (ret != CP_OK)
        return ret;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char now[32];
    utc_now_iso8601(&ts, now);
    sqlite3_bind_text(st, 1, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, info->kind ? info->kind : "run", -1, SQLITE_STATIC);
    bind_text_or_null(st, 3, info->model_path);
    bind_text_or_null(st, 4, info->model_hash);
    bind_text_or_null(st, 5, info->config_json);
    bind_text_or_null(st, 6, info->config_id);
    bind_text_or_null(st, 7, info->target);
    sqlite3_bind_int(st, 8, info->threads);
    sqlite3_bind_int(st, 9, info->batch);
    sqlite3_bind_int(st, 10, info->warmup);
    sqlite3_bind_int(st, 11, info->iterations);
    sqlite3_bind_int64(st, 12, u64_to_db(info->weight_bytes));
    sqlite3_bind_int64(st, 13, u64_to_db(info->arena_bytes));
    sqlite3_bind_int64(st, 14, u64_to_db(info->peak_bytes));
    sqlite3_bind_int64(st, 15, u64_to_db(info->peak_rss_bytes));
    if (sqlite3_step(st) == SQLITE_DONE)
        *run_id = sqlite3_last_insert_rowid(s->db);
    else
        ret = cp_trace_store_db_error(s, d, "starting a run");
    sqlite3_finalize(st);
    /* when the run started, to the microsecond (created_at has seconds):
     * what tells runs of two traces made one after the other apart */
    if (ret == CP_OK)
        ret =
            cp_trace_store_add_counter(s, *run_id, -1, CP_TRACE_STARTED_COUNTER,
                                       (double)ts.tv_sec * 1e6 + (double)(ts.tv_nsec / 1000), 0, d);
    return ret;
}

enum cp_status cp_trace_store_set_run_memory(struct cp_trace_store *s, int64_t run_id,
                                             uint64_t weight_bytes, uint64_t arena_bytes,
                                             uint64_t peak_bytes, uint64_t peak_rss_bytes,
                                             struct cp_diag *d)
{
    enum cp_status ret = check_run(s, run_id, d);
    if (ret != CP_OK)
        return ret;
    sqlite3_stmt *st = NULL;
    ret = prepare(s,
                  "UPDATE runs SET weight_bytes = ?2, arena_bytes = ?3, peak_bytes = ?4, "
                  "peak_rss_bytes = ?5 WHERE id = ?1",
                  &st, "updating the run's memory figures", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, u64_to_db(weight_bytes));
    sqlite3_bind_int64(st, 3, u64_to_db(arena_bytes));
    sqlite3_bind_int64(st, 4, u64_to_db(peak_bytes));
    sqlite3_bind_int64(st, 5, u64_to_db(peak_rss_bytes));
    if (sqlite3_step(st) != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, "updating the run's memory figures");
    sqlite3_finalize(st);
    return ret;
}

/* ---- samples and kernels ------------------------------------------------------ */

enum cp_status cp_trace_store_add_samples(struct cp_trace_store *s, int64_t run_id,
                                          int32_t first_iteration, const uint64_t *ns, size_t n,
                                          struct cp_diag *d)
{
    enum cp_status ret = check_run(s, run_id, d);
    if (ret != CP_OK || n == 0)
        return ret;
    if (first_iteration < 0 || n - 1 > (size_t)(INT32_MAX - first_iteration))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: sample iterations %d..+%zu out of range",
                           s->path, first_iteration, n);
    sqlite3_stmt *st = NULL;
    if ((ret = begin(s, "adding samples", d)) != CP_OK)
        return ret;
    ret = prepare(s, "INSERT INTO samples(run_id, iteration, latency_ns) VALUES (?1, ?2, ?3)", &st,
                  "adding samples", d);
    if (ret != CP_OK)
        goto out_rollback;
    sqlite3_bind_int64(st, 1, run_id);
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(st, 2, (sqlite3_int64)first_iteration + (sqlite3_int64)i);
        sqlite3_bind_int64(st, 3, u64_to_db(ns[i]));
        if (sqlite3_step(st) != SQLITE_DONE) {
            ret = cp_trace_store_db_error(s, d, "adding samples");
            goto out_finalize;
        }
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return commit(s, "adding samples", d);
out_finalize:
    sqlite3_finalize(st);
out_rollback:
    rollback(s);
    return ret;
}

enum cp_status cp_trace_store_add_kernels(struct cp_trace_store *s, int64_t run_id,
                                          const struct cp_trace_kernel *k, size_t n,
                                          struct cp_diag *d)
{
    enum cp_status ret = check_run(s, run_id, d);
    if (ret != CP_OK || n == 0)
        return ret;
    sqlite3_stmt *st = NULL;
    if ((ret = begin(s, "adding kernels", d)) != CP_OK)
        return ret;
    ret = prepare(s,
                  "INSERT INTO kernels(run_id, idx, node, op_type, impl, origins, inputs, "
                  "outputs, flops, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                  &st, "adding kernels", d);
    if (ret != CP_OK)
        goto out_rollback;
    sqlite3_bind_int64(st, 1, run_id);
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
        bind_text_or_null(st, 3, k[i].node);
        bind_text_or_null(st, 4, k[i].op_type);
        bind_text_or_null(st, 5, k[i].impl);
        bind_text_or_null(st, 6, k[i].origins);
        bind_text_or_null(st, 7, k[i].inputs);
        bind_text_or_null(st, 8, k[i].outputs);
        sqlite3_bind_double(st, 9, k[i].flops);
        sqlite3_bind_double(st, 10, k[i].bytes);
        if (sqlite3_step(st) != SQLITE_DONE) {
            char what[64];
            snprintf(what, sizeof(what), "adding kernel %zu", i);
            ret = cp_trace_store_db_error(s, d, what);
            goto out_finalize;
        }
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return commit(s, "adding kernels", d);
out_finalize:
    sqlite3_finalize(st);
out_rollback:
    rollback(s);
    return ret;
}

/* ---- events ---------------------------------------------------------------- */

/* Maps recorder string ids to store string ids, adding strings on demand. */
struct string_map {
    const struct cp_trace_recorder *r;
    sqlite3_int64 *ids; /* recorder id -> store id; 0 = not looked up yet */
    size_t n;
    sqlite3_stmt *find, *add;
};

static enum cp_status map_string(struct cp_trace_store *s, struct string_map *m, int32_t rid,
                                 sqlite3_int64 *out, struct cp_diag *d)
{
    if (m->ids[rid]) {
        *out = m->ids[rid];
        return CP_OK;
    }
    const char *text = cp_trace_string(m->r, rid);
    sqlite3_reset(m->find);
    sqlite3_bind_text(m->find, 1, text, -1, SQLITE_STATIC);
    int rc = sqlite3_step(m->find);
    if (rc == SQLITE_ROW) {
        m->ids[rid] = sqlite3_column_int64(m->find, 0);
    } else if (rc == SQLITE_DONE) {
        sqlite3_reset(m->add);
        sqlite3_bind_text(m->add, 1, text, -1, SQLITE_STATIC);
        if (sqlite3_step(m->add) != SQLITE_DONE)
            return cp_trace_store_db_error(s, d, "adding event names");
        m->ids[rid] = sqlite3_last_insert_rowid(s->db);
    } else {
        return cp_trace_store_db_error(s, d, "looking up event names");
    }
    sqlite3_reset(m->find);
    *out = m->ids[rid];
    return CP_OK;
}

/* Insertion order: the events table is clustered by (run, layer, kernel,
 * iteration, seq), so inserting in that order appends to the B-tree instead
 * of splitting pages all over it (about twice as fast for a million
 * events). The key packs what fits in 64 bits; anything beyond only costs
 * speed, never correctness. */
struct order {
    uint64_t key;
    uint32_t idx; /* position in the recorder = seq - base */
};

static int cmp_order(const void *pa, const void *pb)
{
    const struct order *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static uint64_t clip24(int64_t v)
{
    return v < 0 ? 0 : v > 0xffffff ? 0xffffff : (uint64_t)v;
}

static struct order *insertion_order(const struct cp_trace_event *ev, size_t n)
{
    struct order *o = cp_calloc(n ? n : 1, sizeof(*o));
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        o[i].key = (uint64_t)ev[i].layer << 48 | clip24((int64_t)ev[i].kernel + 1) << 24 |
                   clip24((int64_t)ev[i].iteration + 1);
        o[i].idx = (uint32_t)i;
    }
    qsort(o, n, sizeof(*o), cmp_order);
    return o;
}

/* Columns of one event row, and rows per INSERT statement: binding many
 * rows into one statement saves the per-statement overhead of step and
 * reset, which dominates when rows are small. */
#define EVENT_COLS      10
#define ROWS_PER_INSERT 32

static void bind_event(sqlite3_stmt *st, int row, int64_t run_id, int64_t seq,
                       const struct cp_trace_event *e, sqlite3_int64 name_id)
{
    int c = row * EVENT_COLS;
    sqlite3_bind_int64(st, c + 1, run_id);
    sqlite3_bind_int(st, c + 2, e->layer);
    sqlite3_bind_int(st, c + 3, e->kernel < 0 ? -1 : e->kernel);
    sqlite3_bind_int(st, c + 4, e->iteration);
    sqlite3_bind_int64(st, c + 5, seq);
    if (name_id > 0)
        sqlite3_bind_int64(st, c + 6, name_id);
    else
        sqlite3_bind_null(st, c + 6);
    sqlite3_bind_int64(st, c + 7, u64_to_db(e->start_ns));
    sqlite3_bind_int64(st, c + 8, u64_to_db(e->end_ns - e->start_ns));
    sqlite3_bind_int(st, c + 9, e->thread);
    sqlite3_bind_int(st, c + 10, e->depth);
}

/* "INSERT INTO events(...) VALUES (?,...),(?,...)" for `rows` rows. */
static enum cp_status prepare_event_insert(struct cp_trace_store *s, int rows, sqlite3_stmt **st,
                                           struct cp_diag *d)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "INSERT INTO events(run_id, layer, kernel_idx, iteration, seq, name_id, "
                    "start_ns, dur_ns, thread, depth) VALUES ");
    for (int r = 0; r < rows; r++)
        cp_buf_puts(&b, r ? ",(?,?,?,?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?,?,?,?)");
    enum cp_status ret = cp_buf_status(&b) != CP_OK
                             ? cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", s->path)
                             : prepare(s, b.data, st, "adding events", d);
    cp_buf_release(&b);
    return ret;
}

static enum cp_status insert_events(struct cp_trace_store *s, int64_t run_id, int64_t seq_base,
                                    const struct cp_trace_event *ev, const struct order *o,
                                    size_t n, struct string_map *m, sqlite3_stmt *many,
                                    sqlite3_stmt *one, struct cp_diag *d)
{
    for (size_t i = 0; i < n;) {
        sqlite3_stmt *st = n - i >= ROWS_PER_INSERT ? many : one;
        int rows = st == many ? ROWS_PER_INSERT : 1;
        for (int r = 0; r < rows; r++, i++) {
            const struct cp_trace_event *e = &ev[o[i].idx];
            sqlite3_int64 name_id = 0;
            if (e->name >= 0 && (size_t)e->name < m->n) {
                enum cp_status ret = map_string(s, m, e->name, &name_id, d);
                if (ret != CP_OK)
                    return ret;
            }
            bind_event(st, r, run_id, seq_base + (int64_t)o[i].idx, e, name_id);
        }
        if (sqlite3_step(st) != SQLITE_DONE)
            return cp_trace_store_db_error(s, d, "adding events");
        sqlite3_reset(st);
    }
    return CP_OK;
}

/* The first free seq of a run (events may be added in several calls). */
static enum cp_status next_seq(struct cp_trace_store *s, int64_t run_id, int64_t *out,
                               struct cp_diag *d)
{
    if (s->seq_known && s->seq_run == run_id) {
        *out = s->seq_next;
        return CP_OK;
    }
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        prepare(s, "SELECT coalesce(max(seq) + 1, 0) FROM events WHERE run_id = ?1", &st,
                "adding events", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, run_id);
    if (sqlite3_step(st) == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        ret = cp_trace_store_db_error(s, d, "adding events");
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_trace_store_add_events(struct cp_trace_store *s, int64_t run_id,
                                         const struct cp_trace_recorder *r, struct cp_diag *d)
{
    enum cp_status ret = check_run(s, run_id, d);
    if (ret != CP_OK)
        return ret;
    const struct cp_trace_event *ev = cp_trace_events(r);
    size_t n = cp_trace_n_events(r);
    if (n > UINT32_MAX)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: %zu events in one recorder, at most %u", s->path,
                           n, (unsigned)UINT32_MAX);
    int64_t seq_base = 0;
    if (n && (ret = next_seq(s, run_id, &seq_base, d)) != CP_OK)
        return ret;
    struct string_map m = {.r = r, .n = cp_trace_n_strings(r)};
    m.ids = cp_calloc(m.n ? m.n : 1, sizeof(*m.ids));
    struct order *o = insertion_order(ev, n);
    sqlite3_stmt *many = NULL, *one = NULL;
    if (!m.ids || !o) {
        ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory adding events", s->path);
        goto out_finalize;
    }
    if ((ret = prepare(s, "SELECT id FROM strings WHERE value = ?1", &m.find, "adding events",
                       d)) != CP_OK ||
        (ret = prepare(s, "INSERT INTO strings(value) VALUES (?1)", &m.add, "adding events", d)) !=
            CP_OK ||
        (ret = prepare_event_insert(s, ROWS_PER_INSERT, &many, d)) != CP_OK ||
        (ret = prepare_event_insert(s, 1, &one, d)) != CP_OK)
        goto out_finalize;
    for (size_t done = 0; done < n;) {
        size_t batch = n - done < EVENTS_PER_TX ? n - done : EVENTS_PER_TX;
        if ((ret = begin(s, "adding events", d)) != CP_OK)
            goto out_finalize;
        if ((ret = insert_events(s, run_id, seq_base, ev, o + done, batch, &m, many, one, d)) !=
                CP_OK ||
            (ret = commit(s, "adding events", d)) != CP_OK) {
            rollback(s);
            /* Ids mapped in the rolled-back batch may be gone; it does not
             * matter, since we stop here. */
            goto out_finalize;
        }
        done += batch;
    }
    if (n) {
        s->seq_known = true;
        s->seq_run = run_id;
        s->seq_next = seq_base + (int64_t)n;
    }
    size_t dropped = cp_trace_dropped(r);
    if (dropped)
        ret = cp_trace_store_add_counter(s, run_id, -1, "trace.dropped_events", (double)dropped, 0,
                                         d);
out_finalize:
    if (ret != CP_OK)
        s->seq_known = false; /* a batch may have been stored: ask again */
    sqlite3_finalize(many);
    sqlite3_finalize(one);
    sqlite3_finalize(m.find);
    sqlite3_finalize(m.add);
    free(m.ids);
    free(o);
    return ret;
}

/* ---- counters -------------------------------------------------------------- */

enum cp_status cp_trace_store_add_counter(struct cp_trace_store *s, int64_t run_id,
                                          int32_t iteration, const char *name, double value,
                                          uint64_t ts_ns, struct cp_diag *d)
{
    if (!name)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: counter name is NULL", s->path);
    enum cp_status ret = check_run(s, run_id, d);
    if (ret != CP_OK)
        return ret;
    sqlite3_stmt *st = NULL;
    ret = prepare(s,
                  "INSERT INTO counters(run_id, iteration, name, value, ts_ns) "
                  "VALUES (?1, ?2, ?3, ?4, ?5)",
                  &st, "adding a counter", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int(st, 2, iteration < 0 ? -1 : iteration);
    sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 4, value);
    sqlite3_bind_int64(st, 5, u64_to_db(ts_ns));
    if (sqlite3_step(st) != SQLITE_DONE) {
        char what[160];
        snprintf(what, sizeof(what), "adding counter '%.100s'", name);
        ret = cp_trace_store_db_error(s, d, what);
    }
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_trace_store_add_counters(struct cp_trace_store *s, int64_t run_id,
                                           const struct cp_trace_counter_value *v, size_t n,
                                           struct cp_diag *d)
{
    enum cp_status ret = check_run(s, run_id, d);
    if (ret != CP_OK || n == 0)
        return ret;
    for (size_t i = 0; i < n; i++)
        if (!v[i].name)
            return cp_diag_set(d, CP_ERR_INVALID, "%s: counter %zu of %zu has no name", s->path, i,
                               n);
    const char *what = "adding counters";
    sqlite3_stmt *st = NULL;
    if ((ret = begin(s, what, d)) != CP_OK)
        return ret;
    ret = prepare(s,
                  "INSERT INTO counters(run_id, iteration, name, value, ts_ns) "
                  "VALUES (?1, ?2, ?3, ?4, ?5)",
                  &st, what, d);
    if (ret != CP_OK) {
        rollback(s);
        return ret;
    }
    sqlite3_bind_int64(st, 1, run_id);
    for (size_t i = 0; i < n && ret == CP_OK; i++) {
        sqlite3_bind_int(st, 2, v[i].iteration < 0 ? -1 : v[i].iteration);
        sqlite3_bind_text(st, 3, v[i].name, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 4, v[i].value);
        sqlite3_bind_int64(st, 5, u64_to_db(v[i].ts_ns));
        if (sqlite3_step(st) != SQLITE_DONE)
            ret = cp_trace_store_db_error(s, d, what);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (ret != CP_OK) {
        rollback(s);
        return ret;
    }
    return commit(s, what, d);
}

enum cp_status cp_trace_store_add_counter_series(struct cp_trace_store *s, int64_t run_id,
                                                 const char *name, int32_t first_iteration,
                                                 const double *v, size_t n, struct cp_diag *d)
{
    if (!name)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: counter name is NULL", s->path);
    if (n == 0)
        return check_run(s, run_id, d);
    if (first_iteration < 0 || n - 1 > (size_t)(INT32_MAX - first_iteration))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: counter '%.100s' iterations %d..+%zu out of range", s->path, name,
                           first_iteration, n);
    struct cp_trace_counter_value *c = cp_calloc(n, sizeof *c);
    if (!c)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory adding counter '%.100s'", s->path,
                           name);
    for (size_t i = 0; i < n; i++)
        c[i] = (struct cp_trace_counter_value){first_iteration + (int32_t)i, name, v[i], 0};
    enum cp_status st = cp_trace_store_add_counters(s, run_id, c, n, d);
    free(c);
    return st;
}

/* ---- removing a run ---------------------------------------------------------- */

enum cp_status cp_trace_store_delete_run(struct cp_trace_store *s, int64_t run_id,
                                         struct cp_diag *d)
{
    enum cp_status ret = check_run(s, run_id, d);
    if (ret != CP_OK)
        return ret;
    static const char *const sql[] = {
        "DELETE FROM events WHERE run_id = ?1",
        "DELETE FROM counters WHERE run_id = ?1",
        "DELETE FROM samples WHERE run_id = ?1",
        "DELETE FROM kernels WHERE run_id = ?1",
        "DELETE FROM meta WHERE key GLOB 'run.' || ?1 || '.*'",
        "DELETE FROM runs WHERE id = ?1",
    };
    const char *what = "removing a run";
    s->seq_known = false;
    if ((ret = begin(s, what, d)) != CP_OK)
        return ret;
    /* a pipeline run's rows, where the store has the tables */
    static const char *const pipeline_sql[] = {
        "DELETE FROM node_calls WHERE run_id = ?1",
        "DELETE FROM pipeline_edges WHERE run_id = ?1",
        "DELETE FROM pipeline_nodes WHERE run_id = ?1",
    };
    bool pipeline = cp_trace_store_has_pipeline_tables(s);
    for (size_t i = 0; pipeline && i < 3 && ret == CP_OK; i++) {
        sqlite3_stmt *st = NULL;
        if ((ret = prepare(s, pipeline_sql[i], &st, what, d)) != CP_OK)
            break;
        sqlite3_bind_int64(st, 1, run_id);
        if (sqlite3_step(st) != SQLITE_DONE)
            ret = cp_trace_store_db_error(s, d, what);
        sqlite3_finalize(st);
    }
    for (size_t i = 0; i < sizeof sql / sizeof *sql && ret == CP_OK; i++) {
        sqlite3_stmt *st = NULL;
        if ((ret = prepare(s, sql[i], &st, what, d)) != CP_OK)
            break;
        sqlite3_bind_int64(st, 1, run_id);
        if (sqlite3_step(st) != SQLITE_DONE)
            ret = cp_trace_store_db_error(s, d, what);
        sqlite3_finalize(st);
    }
    if (ret != CP_OK) {
        rollback(s);
        return ret;
    }
    return commit(s, what, d);
}
