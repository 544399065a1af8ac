/* Baselines: per-service figures of one benchmark run, kept in the
 * knowledge base so that later runs can be validated against them.
 *
 * Samples are stored as BLOBs of little-endian 64-bit integers (8 bytes per
 * iteration) beside their count `n`; a reader checks the size against `n`
 * before trusting a byte of it. Schema: docs/kb-schema.md. */
#include "knowledge/kb_internal.h"
#include "stats/stats.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Names listed in a "not found" message before "...". */
#define MAX_NAMES_LISTED 20

/* ---- sample blobs ---------------------------------------------------------- */

/* n values as n*8 little-endian bytes. OUT: *blob (caller frees), *bytes. */
static enum cp_status encode_samples(struct cp_kb *kb, const uint64_t *v, size_t n, uint8_t **blob,
                                     int *bytes, struct cp_diag *d)
{
    *blob = NULL;
    size_t len;
    if (cp_mul_overflows(n, 8, &len) || len > INT_MAX)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: %zu samples are too many for one baseline",
                           kb->path, n);
    uint8_t *p = malloc(len ? len : 1);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory for %zu samples", kb->path, n);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            p[i * 8 + (size_t)k] = (uint8_t)(v[i] >> (8 * k));
    *blob = p;
    *bytes = (int)len;
    return CP_OK;
}

/* Column `col` as n values. A NULL column gives *out NULL when `optional`.
 * A size other than n*8 is CP_ERR_CORRUPT naming the baseline. */
static enum cp_status decode_samples(struct cp_kb *kb, sqlite3_stmt *st, int col, size_t n,
                                     bool optional, const char *what,
                                     const struct cp_kb_baseline *b, uint64_t **out,
                                     struct cp_diag *d)
{
    *out = NULL;
    if (sqlite3_column_type(st, col) == SQLITE_NULL && optional)
        return CP_OK;
    const uint8_t *p = sqlite3_column_blob(st, col);
    size_t bytes = (size_t)sqlite3_column_bytes(st, col);
    size_t want;
    if (cp_mul_overflows(n, 8, &want) || bytes != want || (n > 0 && !p))
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: baseline '%s/%s' (id %lld) is damaged: its %s samples take %zu "
                           "bytes, expected %zu for %zu samples; set it again",
                           kb->path, b->service, b->tag, (long long)b->id, what, bytes,
                           cp_mul_overflows(n, 8, &want) ? (size_t)0 : want, n);
    uint64_t *v = cp_calloc(n ? n : 1, sizeof *v);
    if (!v)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory for %zu samples", kb->path, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t x = 0;
        for (int k = 7; k >= 0; k--)
            x = (x << 8) | p[i * 8 + (size_t)k];
        v[i] = x;
    }
    *out = v;
    return CP_OK;
}

/* ---- reading rows ---------------------------------------------------------- */

#define BASELINE_COLS                                                                              \
    "id, service, tag, created_at, trace_path, run_id, run_kind, run_created_at, model_path, "     \
    "model_hash, config_id, batch, threads, n, mean_ns, median_ns, p99_ns, weight_bytes, "         \
    "arena_bytes, peak_bytes, peak_rss_bytes, precision_loss"
#define SAMPLE_COLS "latency_ns, device_ns, probe_ns"
/* Column indexes of BASELINE_COLS, then the sample columns of get
 * (SAMPLE_COLS). */
enum {
    C_ID,
    C_SERVICE,
    C_TAG,
    C_CREATED,
    C_TRACE,
    C_RUN_ID,
    C_RUN_KIND,
    C_RUN_CREATED,
    C_MODEL_PATH,
    C_MODEL_HASH,
    C_CONFIG_ID,
    C_BATCH,
    C_THREADS,
    C_N,
    C_MEAN,
    C_MEDIAN,
    C_P99,
    C_WEIGHT,
    C_ARENA,
    C_PEAK,
    C_RSS,
    C_PRECISION,
    C_LATENCY,
    C_DEVICE,
    C_PROBE,
};

static double col_real_or_nan(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col);
}

/* One row into *b (zeroed first; released on failure). with_samples: also
 * decode the sample columns C_LATENCY, C_DEVICE and C_PROBE. */
static enum cp_status read_row(struct cp_kb *kb, sqlite3_stmt *st, bool with_samples,
                               struct cp_kb_baseline *b, struct cp_diag *d)
{
    memset(b, 0, sizeof *b);
    bool oom = false;
    b->id = sqlite3_column_int64(st, C_ID);
    b->service = cp_kb_col_text(st, C_SERVICE, true, &oom);
    b->tag = cp_kb_col_text(st, C_TAG, true, &oom);
    b->created_at = cp_kb_col_text(st, C_CREATED, true, &oom);
    b->trace_path = cp_kb_col_text(st, C_TRACE, true, &oom);
    b->m.run_id = sqlite3_column_int64(st, C_RUN_ID);
    b->m.kind = cp_kb_col_text(st, C_RUN_KIND, true, &oom);
    b->m.created_at = cp_kb_col_text(st, C_RUN_CREATED, true, &oom);
    b->m.model_path = cp_kb_col_text(st, C_MODEL_PATH, true, &oom);
    b->m.model_hash = cp_kb_col_text(st, C_MODEL_HASH, true, &oom);
    b->m.config_id = cp_kb_col_text(st, C_CONFIG_ID, true, &oom);
    b->m.batch = sqlite3_column_int(st, C_BATCH);
    b->m.threads = sqlite3_column_int(st, C_THREADS);
    b->mean_ns = col_real_or_nan(st, C_MEAN);
    b->median_ns = col_real_or_nan(st, C_MEDIAN);
    b->p99_ns = col_real_or_nan(st, C_P99);
    b->m.weight_bytes = (uint64_t)sqlite3_column_int64(st, C_WEIGHT);
    b->m.arena_bytes = (uint64_t)sqlite3_column_int64(st, C_ARENA);
    b->m.peak_bytes = (uint64_t)sqlite3_column_int64(st, C_PEAK);
    b->m.peak_rss_bytes = (uint64_t)sqlite3_column_int64(st, C_RSS);
    b->m.precision_loss = col_real_or_nan(st, C_PRECISION);
    enum cp_status ret = CP_OK;
    if (oom) {
        ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading a baseline", kb->path);
        goto out;
    }
    sqlite3_int64 n = sqlite3_column_int64(st, C_N);
    if (n < 0 || (uint64_t)n > SIZE_MAX / 8) {
        ret = cp_diag_set(d, CP_ERR_CORRUPT,
                          "%s: baseline '%s/%s' (id %lld) is damaged: sample count %lld; set it "
                          "again",
                          kb->path, b->service, b->tag, (long long)b->id, (long long)n);
        goto out;
    }
    b->m.n = (size_t)n;
    if (with_samples && ((ret = decode_samples(kb, st, C_LATENCY, b->m.n, false, "latency", b,
                                               &b->m.latency_ns, d)) != CP_OK ||
                         (ret = decode_samples(kb, st, C_DEVICE, b->m.n, true, "device-time", b,
                                               &b->m.device_ns, d)) != CP_OK ||
                         (ret = decode_samples(kb, st, C_PROBE, b->m.n, true, "probe", b,
                                               &b->m.probe_ns, d)) != CP_OK))
        goto out;
out:
    if (ret != CP_OK)
        cp_kb_baseline_release(b);
    return ret;
}

void cp_kb_baseline_release(struct cp_kb_baseline *b)
{
    if (!b)
        return;
    /* Our own allocations, freed field by field (not through
     * cp_run_metrics_release, whose struct the trace module may grow). */
    free(b->service);
    free(b->tag);
    free(b->created_at);
    free(b->trace_path);
    free(b->m.kind);
    free(b->m.created_at);
    free(b->m.model_path);
    free(b->m.model_hash);
    free(b->m.config_id);
    free(b->m.latency_ns);
    free(b->m.device_ns);
    free(b->m.probe_ns);
    memset(b, 0, sizeof *b);
    b->m.precision_loss = NAN;
    b->mean_ns = b->median_ns = b->p99_ns = NAN;
}

void cp_kb_baseline_list_free(struct cp_kb_baseline *b, size_t n)
{
    if (!b)
        return;
    for (size_t i = 0; i < n; i++)
        cp_kb_baseline_release(&b[i]);
    free(b);
}

/* ---- names for messages ---------------------------------------------------- */

/* Append the first column of every row of `sql` (bound to `service` when
 * not NULL), comma separated; returns how many there were. */
static size_t append_names(struct cp_kb *kb, const char *sql, const char *service, struct cp_buf *b)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(kb->db, sql, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return 0;
    }
    if (service)
        sqlite3_bind_text(st, 1, service, -1, SQLITE_TRANSIENT);
    size_t n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        if (n < MAX_NAMES_LISTED)
            cp_buf_printf(b, "%s%s", n ? ", " : "", t ? (const char *)t : "");
        else if (n == MAX_NAMES_LISTED)
            cp_buf_puts(b, ", ...");
        n++;
    }
    sqlite3_finalize(st);
    return n;
}

void cp_kb_describe_tags(struct cp_kb *kb, const char *service, struct cp_buf *b)
{
    struct cp_buf names;
    cp_buf_init(&names);
    if (append_names(kb, "SELECT tag FROM baselines WHERE service = ?1 ORDER BY id", service,
                     &names) > 0) {
        cp_buf_printf(b, "its baselines: %s", names.data);
    } else {
        cp_buf_reset(&names);
        if (append_names(kb, "SELECT DISTINCT service FROM baselines ORDER BY service", NULL,
                         &names) > 0)
            cp_buf_printf(b, "it has no baselines (services with baselines: %s)", names.data);
        else
            cp_buf_puts(b, "it has no baselines (the knowledge base holds none yet)");
    }
    cp_buf_release(&names);
}

/* CP_ERR_INVALID: (service, tag) is not there; tag NULL: no baseline at all. */
static enum cp_status not_found(struct cp_kb *kb, const char *service, const char *tag,
                                struct cp_diag *d)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_kb_describe_tags(kb, service, &b);
    enum cp_status st;
    if (tag)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: service '%s' has no baseline tagged '%s'; %s",
                         kb->path, service, tag, b.data ? b.data : "");
    else
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: service '%s': %s", kb->path, service,
                         b.data ? b.data : "");
    cp_buf_release(&b);
    return st;
}

/* ---- set ------------------------------------------------------------------- */

/* Make sure the service has its row in `services`. Call inside the write
 * transaction. */
static enum cp_status touch_service(struct cp_kb *kb, const char *service, struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(kb,
                                       "INSERT INTO services(name, created_at) VALUES (?1, ?2) "
                                       "ON CONFLICT(name) DO NOTHING",
                                       &st, "recording the service", d);
    if (ret != CP_OK)
        return ret;
    char now[32];
    cp_kb_now(now);
    sqlite3_bind_text(st, 1, service, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, now, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "recording the service");
    sqlite3_finalize(st);
    return ret;
}

/* One past the highest "b<N>" the service has ever been given or used: its
 * services.last_auto_tag, its baselines' tags (a user may type "b7"), and
 * the tags its validations remember. Records the choice in services, so a
 * removed automatic tag is never given out again. Call inside the write
 * transaction, after touch_service. OUT: tag[32]. */
static enum cp_status next_auto_tag(struct cp_kb *kb, const char *service, char tag[32],
                                    struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        cp_kb_prepare(kb,
                      "SELECT 'b' || last_auto_tag FROM services WHERE name = ?1 "
                      "UNION ALL SELECT tag FROM baselines WHERE service = ?1 AND "
                      "tag GLOB 'b[0-9]*' "
                      "UNION ALL SELECT baseline_tag FROM validations WHERE service = ?1 AND "
                      "baseline_tag GLOB 'b[0-9]*'",
                      &st, "choosing a tag", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_text(st, 1, service, -1, SQLITE_TRANSIENT);
    int64_t max = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        int64_t v;
        if (t && cp_parse_i64(t + 1, &v) && v > max && v < INT64_MAX)
            max = v;
    }
    if (rc != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "choosing a tag");
    sqlite3_finalize(st);
    if (ret != CP_OK)
        return ret;
    if ((ret = cp_kb_prepare(kb, "UPDATE services SET last_auto_tag = ?2 WHERE name = ?1", &st,
                             "choosing a tag", d)) != CP_OK)
        return ret;
    sqlite3_bind_text(st, 1, service, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, max + 1);
    if (sqlite3_step(st) != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "choosing a tag");
    sqlite3_finalize(st);
    snprintf(tag, 32, "b%lld", (long long)max + 1);
    return ret;
}

/* Remove an existing (service, tag) when replacing; refuse otherwise. */
static enum cp_status clear_existing(struct cp_kb *kb, const char *service, const char *tag,
                                     bool replace, struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        cp_kb_prepare(kb, "SELECT id, created_at FROM baselines WHERE service = ?1 AND tag = ?2",
                      &st, "looking up the tag", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_text(st, 1, service, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, tag, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        sqlite3_finalize(st);
        return CP_OK;
    }
    if (rc != SQLITE_ROW) {
        ret = cp_kb_db_error(kb, d, "looking up the tag");
        sqlite3_finalize(st);
        return ret;
    }
    int64_t old = sqlite3_column_int64(st, 0);
    if (!replace) {
        const unsigned char *when = sqlite3_column_text(st, 1);
        ret = cp_diag_set(d, CP_ERR_INVALID,
                          "%s: service '%s' already has a baseline tagged '%s' (set %s); choose "
                          "another tag or replace it (--replace)",
                          kb->path, service, tag, when ? (const char *)when : "?");
        sqlite3_finalize(st);
        return ret;
    }
    sqlite3_finalize(st);
    if ((ret = cp_kb_prepare(kb, "DELETE FROM baselines WHERE id = ?1", &st, "replacing", d)) !=
        CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, old);
    if (sqlite3_step(st) != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "replacing the baseline");
    sqlite3_finalize(st);
    return ret;
}

/* mean, median and p99 of the latency samples, for lists and SQL readers. */
static void latency_summary(const struct cp_run_metrics *m, double out[3])
{
    out[0] = out[1] = out[2] = NAN;
    double *x = cp_calloc(m->n, sizeof *x);
    if (!x)
        return; /* the summary is a convenience: NULL columns, not a failure */
    for (size_t i = 0; i < m->n; i++)
        x[i] = (double)m->latency_ns[i];
    struct cp_summary s;
    if (cp_stats_summary(x, m->n, &s, NULL) == CP_OK) {
        out[0] = s.mean;
        out[1] = s.median;
        out[2] = s.p99;
    }
    free(x);
}

static void bind_real_or_null(sqlite3_stmt *st, int idx, double v)
{
    if (isfinite(v))
        sqlite3_bind_double(st, idx, v);
    else
        sqlite3_bind_null(st, idx);
}

/* A run's sample arrays, encoded; NULL for an array the run does not have. */
struct sample_blobs {
    uint8_t *lat, *dev, *probe;
    int lat_bytes, dev_bytes, probe_bytes;
};

static void bind_blob_or_null(sqlite3_stmt *st, int idx, const uint8_t *blob, int bytes)
{
    if (blob)
        sqlite3_bind_blob(st, idx, blob, bytes, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, idx);
}

static enum cp_status insert_baseline(struct cp_kb *kb, const char *service, const char *tag,
                                      const char *trace_path, const struct cp_run_metrics *m,
                                      const struct sample_blobs *blobs, int64_t *id,
                                      struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(
        kb,
        "INSERT INTO baselines(service, tag, created_at, trace_path, run_id, run_kind, "
        "run_created_at, model_path, model_hash, config_id, batch, threads, n, latency_ns, "
        "device_ns, mean_ns, median_ns, p99_ns, weight_bytes, arena_bytes, peak_bytes, "
        "peak_rss_bytes, precision_loss, probe_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
        "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)",
        &st, "storing the baseline", d);
    if (ret != CP_OK)
        return ret;
    char now[32];
    cp_kb_now(now);
    double sum[3];
    latency_summary(m, sum);
    sqlite3_bind_text(st, 1, service, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, tag, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, now, -1, SQLITE_TRANSIENT);
    cp_kb_bind_text(st, 4, trace_path);
    sqlite3_bind_int64(st, 5, m->run_id);
    cp_kb_bind_text(st, 6, m->kind);
    cp_kb_bind_text(st, 7, m->created_at);
    cp_kb_bind_text(st, 8, m->model_path);
    cp_kb_bind_text(st, 9, m->model_hash);
    cp_kb_bind_text(st, 10, m->config_id);
    sqlite3_bind_int(st, 11, m->batch);
    sqlite3_bind_int(st, 12, m->threads);
    sqlite3_bind_int64(st, 13, (sqlite3_int64)m->n);
    bind_blob_or_null(st, 14, blobs->lat, blobs->lat_bytes);
    bind_blob_or_null(st, 15, blobs->dev, blobs->dev_bytes);
    bind_real_or_null(st, 16, sum[0]);
    bind_real_or_null(st, 17, sum[1]);
    bind_real_or_null(st, 18, sum[2]);
    sqlite3_bind_int64(st, 19, (sqlite3_int64)m->weight_bytes);
    sqlite3_bind_int64(st, 20, (sqlite3_int64)m->arena_bytes);
    sqlite3_bind_int64(st, 21, (sqlite3_int64)m->peak_bytes);
    sqlite3_bind_int64(st, 22, (sqlite3_int64)m->peak_rss_bytes);
    bind_real_or_null(st, 23, m->precision_loss);
    bind_blob_or_null(st, 24, blobs->probe, blobs->probe_bytes);
    if (sqlite3_step(st) != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "storing the baseline");
    else
        *id = sqlite3_last_insert_rowid(kb->db);
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_kb_baseline_set(struct cp_kb *kb, const char *service, const char *tag,
                                  const char *trace_path, const struct cp_run_metrics *m,
                                  bool replace, int64_t *id, struct cp_diag *d)
{
    if (id)
        *id = -1;
    enum cp_status st;
    if ((st = cp_kb_check_service(service, d)) != CP_OK ||
        (tag && (st = cp_kb_check_tag(tag, d)) != CP_OK))
        return st;
    if (!m || m->n == 0 || !m->latency_ns)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: service '%s': the run has no latency samples to keep as a "
                           "baseline",
                           kb->path, service);
    struct sample_blobs blobs = {0};
    if ((st = encode_samples(kb, m->latency_ns, m->n, &blobs.lat, &blobs.lat_bytes, d)) != CP_OK ||
        (m->device_ns &&
         (st = encode_samples(kb, m->device_ns, m->n, &blobs.dev, &blobs.dev_bytes, d)) != CP_OK) ||
        (m->probe_ns && (st = encode_samples(kb, m->probe_ns, m->n, &blobs.probe,
                                             &blobs.probe_bytes, d)) != CP_OK))
        goto out_free;
    if ((st = cp_kb_begin(kb, d)) != CP_OK)
        goto out_free;
    if ((st = touch_service(kb, service, d)) != CP_OK)
        goto out_rollback;
    char auto_tag[32];
    if (!tag) {
        if ((st = next_auto_tag(kb, service, auto_tag, d)) != CP_OK)
            goto out_rollback;
        tag = auto_tag;
    }
    int64_t new_id = -1;
    if ((st = clear_existing(kb, service, tag, replace, d)) != CP_OK ||
        (st = insert_baseline(kb, service, tag, trace_path, m, &blobs, &new_id, d)) != CP_OK)
        goto out_rollback;
    if ((st = cp_kb_commit(kb, d)) != CP_OK)
        goto out_free;
    if (id)
        *id = new_id;
    goto out_free;
out_rollback:
    cp_kb_rollback(kb);
out_free:
    free(blobs.lat);
    free(blobs.dev);
    free(blobs.probe);
    return st;
}

/* ---- get, list, remove ----------------------------------------------------- */

enum cp_status cp_kb_baseline_get(struct cp_kb *kb, const char *service, const char *tag,
                                  struct cp_kb_baseline *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    out->m.precision_loss = NAN;
    enum cp_status ret = cp_kb_check_service(service, d);
    if (ret != CP_OK)
        return ret;
    bool latest = !tag || strcmp(tag, "latest") == 0;
    sqlite3_stmt *st = NULL;
    ret = cp_kb_prepare(kb,
                        latest ? "SELECT " BASELINE_COLS ", " SAMPLE_COLS " FROM baselines "
                                 "WHERE service = ?1 ORDER BY id DESC LIMIT 1"
                               : "SELECT " BASELINE_COLS ", " SAMPLE_COLS " FROM baselines "
                                 "WHERE service = ?1 AND tag = ?2",
                        &st, "reading a baseline", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_text(st, 1, service, -1, SQLITE_TRANSIENT);
    if (!latest)
        sqlite3_bind_text(st, 2, tag, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        ret = read_row(kb, st, true, out, d);
    else if (rc == SQLITE_DONE)
        ret = not_found(kb, service, latest ? NULL : tag, d);
    else
        ret = cp_kb_db_error(kb, d, "reading a baseline");
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_kb_baseline_get_id(struct cp_kb *kb, int64_t id, struct cp_kb_baseline *out,
                                     struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    out->m.precision_loss = NAN;
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        cp_kb_prepare(kb, "SELECT " BASELINE_COLS ", " SAMPLE_COLS " FROM baselines WHERE id = ?1",
                      &st, "reading a baseline", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        ret = read_row(kb, st, true, out, d);
    else if (rc == SQLITE_DONE)
        ret =
            cp_diag_set(d, CP_ERR_INVALID, "%s: no baseline with id %lld", kb->path, (long long)id);
    else
        ret = cp_kb_db_error(kb, d, "reading a baseline");
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_kb_baseline_list(struct cp_kb *kb, const char *service,
                                   struct cp_kb_baseline **out, size_t *n, struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        cp_kb_prepare(kb,
                      service ? "SELECT " BASELINE_COLS " FROM baselines WHERE service = ?1 "
                                "ORDER BY service, id"
                              : "SELECT " BASELINE_COLS " FROM baselines ORDER BY service, id",
                      &st, "listing baselines", d);
    if (ret != CP_OK)
        return ret;
    if (service)
        sqlite3_bind_text(st, 1, service, -1, SQLITE_TRANSIENT);
    struct cp_kb_baseline *v = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct cp_kb_baseline *g = cp_realloc_array(v, ncap, sizeof *g);
            if (!g) {
                ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory listing baselines", kb->path);
                goto out_fail;
            }
            v = g;
            cap = ncap;
        }
        if ((ret = read_row(kb, st, false, &v[len], d)) != CP_OK)
            goto out_fail;
        len++;
    }
    if (rc != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "listing baselines");
        goto out_fail;
    }
    sqlite3_finalize(st);
    *out = v;
    *n = len;
    return CP_OK;
out_fail:
    sqlite3_finalize(st);
    cp_kb_baseline_list_free(v, len);
    return ret;
}

enum cp_status cp_kb_baseline_remove(struct cp_kb *kb, const char *service, const char *tag,
                                     struct cp_diag *d)
{
    enum cp_status ret = cp_kb_check_service(service, d);
    if (ret != CP_OK)
        return ret;
    if (!tag || strcmp(tag, "latest") == 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: service '%s': name the tag to remove ('latest' is not accepted, "
                           "so that removal is deliberate)",
                           kb->path, service);
    if ((ret = cp_kb_begin(kb, d)) != CP_OK)
        return ret;
    sqlite3_stmt *st = NULL;
    if ((ret = cp_kb_prepare(kb, "DELETE FROM baselines WHERE service = ?1 AND tag = ?2", &st,
                             "removing a baseline", d)) != CP_OK)
        goto out_rollback;
    sqlite3_bind_text(st, 1, service, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, tag, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "removing a baseline");
        goto out_rollback;
    }
    if (sqlite3_changes(kb->db) == 0) {
        ret = not_found(kb, service, tag, d);
        goto out_rollback;
    }
    return cp_kb_commit(kb, d);
out_rollback:
    cp_kb_rollback(kb);
    return ret;
}

enum cp_status cp_kb_service_list(struct cp_kb *kb, char ***out, size_t *n, struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(
        kb, "SELECT DISTINCT service FROM baselines ORDER BY service", &st, "listing services", d);
    if (ret != CP_OK)
        return ret;
    char **v = NULL;
    size_t len = 0, cap = 0;
    int rc;
    bool oom = false;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **g = cp_realloc_array(v, ncap, sizeof *g);
            if (!g) {
                oom = true;
                break;
            }
            v = g;
            cap = ncap;
        }
        v[len] = cp_kb_col_text(st, 0, true, &oom);
        if (oom)
            break;
        len++;
    }
    if (oom)
        ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory listing services", kb->path);
    else if (rc != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "listing services");
    sqlite3_finalize(st);
    if (ret != CP_OK) {
        for (size_t i = 0; i < len; i++)
            free(v[i]);
        free(v);
        return ret;
    }
    *out = v;
    *n = len;
    return CP_OK;
}
