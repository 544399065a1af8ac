/* Profiles that are SQLite databases: torch_npu's DB export
 * (ascend_pytorch_profiler_*.db) and msprof's msprof_*.db, and Nsight
 * Systems' `nsys export --type sqlite`. Their schemas changed between
 * versions, so every table and column is looked up at run time and what a
 * version lacks is left out (docs/import.md). The files are opened
 * read-only and immutable: several are in WAL mode and may sit on a
 * read-only share. */
#include "import/import_internal.h"

#include <sqlite3.h>

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the foreign database ----------------------------------------------------------- */

struct fdb {
    sqlite3 *db;
    const char *path;
};

static enum cp_status fdb_error(const struct fdb *f, const char *what, struct cp_diag *d)
{
    int rc = sqlite3_errcode(f->db) & 0xff;
    return cp_diag_set(d, rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB ? CP_ERR_INVALID : CP_ERR_IO,
                       "%s: %s: %s", f->path, what, sqlite3_errmsg(f->db));
}

static enum cp_status fdb_open(const char *path, struct fdb *f, struct cp_diag *d)
{
    f->path = path;
    f->db = NULL;
    /* file: URI with the path percent-encoded, so that '?' and '#' in a
     * folder name stay part of it */
    struct cp_buf uri;
    cp_buf_init(&uri);
    cp_buf_puts(&uri, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("/-_.~", *p))
            cp_buf_printf(&uri, "%c", *p);
        else
            cp_buf_printf(&uri, "%%%02X", *p);
    }
    cp_buf_puts(&uri, "?mode=ro&immutable=1");
    if (cp_buf_status(&uri) != CP_OK) {
        cp_buf_release(&uri);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    int rc = sqlite3_open_v2(uri.data, &f->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    cp_buf_release(&uri);
    if (rc != SQLITE_OK) {
        enum cp_status st = cp_diag_set(d, CP_ERR_IO, "%s: cannot open: %s", path,
                                        f->db ? sqlite3_errmsg(f->db) : "out of memory");
        sqlite3_close(f->db);
        f->db = NULL;
        return st;
    }
    return CP_OK;
}

static bool has_table(const struct fdb *f, const char *table)
{
    sqlite3_stmt *st = NULL;
    bool yes = sqlite3_prepare_v2(f->db,
                                  "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') "
                                  "AND name = ?1",
                                  -1, &st, NULL) == SQLITE_OK &&
               sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC) == SQLITE_OK &&
               sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return yes;
}

static bool has_column(const struct fdb *f, const char *table, const char *column)
{
    sqlite3_stmt *st = NULL;
    bool yes = false;
    if (sqlite3_prepare_v2(f->db, "SELECT name FROM pragma_table_info(?1)", -1, &st, NULL) ==
            SQLITE_OK &&
        sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC) == SQLITE_OK)
        while (!yes && sqlite3_step(st) == SQLITE_ROW) {
            const unsigned char *n = sqlite3_column_text(st, 0);
            yes = n && strcmp((const char *)n, column) == 0;
        }
    sqlite3_finalize(st);
    return yes;
}

/* A column's text as an import value (absent for NULL). */
static struct cp_imp_val col_val(sqlite3_stmt *st, int i)
{
    struct cp_imp_val v = {NULL, 0, false};
    const unsigned char *t = sqlite3_column_text(st, i);
    if (t) {
        v.s = (const char *)t;
        v.len = (size_t)sqlite3_column_bytes(st, i);
    }
    return v;
}

/* Run `sql` and call fn for each row. */
typedef enum cp_status (*row_fn)(void *u, sqlite3_stmt *st, struct cp_diag *d);

static enum cp_status each_row(const struct fdb *f, const char *sql, const char *what, row_fn fn,
                               void *u, struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(f->db, sql, -1, &st, NULL) != SQLITE_OK)
        return fdb_error(f, what, d);
    enum cp_status rc = CP_OK;
    int r;
    while (rc == CP_OK && (r = sqlite3_step(st)) == SQLITE_ROW)
        rc = fn(u, st, d);
    if (rc == CP_OK && r != SQLITE_DONE)
        rc = fdb_error(f, what, d);
    sqlite3_finalize(st);
    return rc;
}

/* ---- writing ------------------------------------------------------------------------- */

struct dbimp {
    struct fdb f;
    struct cp_imp_sink *k;
    struct cp_imp_steps steps;
    int64_t min_ts, max_end;
    bool have_ts;
    enum cp_trace_layer layer; /* of the rows being written */
    const char *pid_text;      /* the process column's stand-in for device rows */
};

/* A column as a time in ns; false for NULL and for values that are no time
 * (beyond CP_IMP_MAX_NS either way). */
static bool col_ns(sqlite3_stmt *st, int i, int64_t *ns)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return false;
    int64_t v = sqlite3_column_int64(st, i);
    if (v >= CP_IMP_MAX_NS || v <= -CP_IMP_MAX_NS)
        return false;
    *ns = v;
    return true;
}

static enum cp_status bound_row(void *u, sqlite3_stmt *st, struct cp_diag *d)
{
    (void)d;
    struct dbimp *x = u;
    int64_t lo, hi;
    if (!col_ns(st, 0, &lo))
        return CP_OK;
    if (!col_ns(st, 1, &hi) || hi < lo)
        hi = lo;
    if (!x->have_ts || lo < x->min_ts)
        x->min_ts = lo;
    if (!x->have_ts || hi > x->max_end)
        x->max_end = hi;
    x->have_ts = true;
    return CP_OK;
}

static enum cp_status step_row(void *u, sqlite3_stmt *st, struct cp_diag *d)
{
    struct dbimp *x = u;
    int64_t lo, hi;
    if (!col_ns(st, 1, &lo) || !col_ns(st, 2, &hi))
        return CP_OK;
    return cp_imp_steps_add(
        &x->steps, lo, hi,
        sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 0), d);
}

/* A row (start, end, thread, name[, op_type, impl]) as an interval. The
 * thread column is a global thread id (pid << 32 | tid for torch_npu,
 * pid << 24 | tid for Nsight; kept whole, as its text) or a stream. */
static enum cp_status event_row(void *u, sqlite3_stmt *st, struct cp_diag *d)
{
    struct dbimp *x = u;
    int64_t start, end;
    if (!col_ns(st, 0, &start)) {
        x->k->r->skipped[CP_SKIP_NO_TIME]++;
        return CP_OK;
    }
    if (!col_ns(st, 1, &end) || end < start)
        end = start;
    struct cp_imp_val pid = {x->pid_text, strlen(x->pid_text), false};
    struct cp_imp_val tid = col_val(st, 2);
    struct cp_imp_val name = col_val(st, 3);
    if (!name.s)
        name = (struct cp_imp_val){"?", 1, false};
    int thread = 0;
    enum cp_status rc = cp_imp_sink_thread(x->k, &pid, &tid, &thread, d);
    int32_t kernel = -1;
    bool device = x->layer == CP_LAYER_DEVICE;
    int32_t it = cp_imp_steps_of(&x->steps, start, device);
    if (rc == CP_OK && device) {
        struct cp_imp_val op = col_val(st, 4), impl = col_val(st, 5);
        char opt[200], im[100];
        snprintf(opt, sizeof opt, "%.*s", op.s ? (int)op.len : 6, op.s ? op.s : "Kernel");
        snprintf(im, sizeof im, "%.*s", impl.s ? (int)impl.len : 0, impl.s ? impl.s : "");
        rc = cp_imp_sink_kernel(x->k, name.s, name.len, opt, im[0] ? im : NULL, NULL, &kernel, d);
        /* a size column (bytes of a copy) adds up per step */
        if (rc == CP_OK && sqlite3_column_count(st) > 6 &&
            sqlite3_column_type(st, 6) != SQLITE_NULL)
            rc = cp_imp_sink_acc(x->k, it, "arg.bytes", sqlite3_column_double(st, 6), 0, true, d);
    }
    /* a value the range query did not see as the least (text in a
     * number's column) starts at the run's zero */
    uint64_t rel = start > x->min_ts ? (uint64_t)(start - x->min_ts) : 0;
    if (rc == CP_OK)
        rc = cp_imp_sink_event(x->k, x->layer, name.s, name.len, kernel, it, rel,
                               rel + (uint64_t)(end - start), thread, d);
    return rc;
}

/* (start, end, counter name, value) rows: hardware counters of tasks,
 * weighted by the task's duration per step. */
static enum cp_status pmu_row(void *u, sqlite3_stmt *st, struct cp_diag *d)
{
    struct dbimp *x = u;
    int64_t start, end;
    if (!col_ns(st, 0, &start) || sqlite3_column_type(st, 3) == SQLITE_NULL)
        return CP_OK;
    if (!col_ns(st, 1, &end) || end < start)
        end = start;
    struct cp_imp_val n = col_val(st, 2);
    if (!n.s)
        return CP_OK;
    char name[200];
    snprintf(name, sizeof name, "col.%.*s", (int)(n.len > 150 ? 150 : n.len), n.s);
    return cp_imp_sink_acc(x->k, cp_imp_steps_of(&x->steps, start, true), name,
                           sqlite3_column_double(st, 3), (double)(end - start), false, d);
}

static enum cp_status write_rows(struct dbimp *x, enum cp_trace_layer layer, const char *pid,
                                 const char *sql, const char *what, struct cp_diag *d)
{
    x->layer = layer;
    x->pid_text = pid;
    return each_row(&x->f, sql, what, event_row, x, d);
}

/* The earliest start and latest end over `sql` rows (min, max). */
static enum cp_status bounds(struct dbimp *x, const char *sql, struct cp_diag *d)
{
    return each_row(&x->f, sql, "reading the time range", bound_row, x, d);
}

/* The steps read, begin the run in `format`. */
static enum cp_status open_run(struct dbimp *x, struct cp_import_result *r, const char *trace,
                               enum cp_import_format format, const char *steps_from,
                               struct cp_diag *d)
{
    cp_imp_steps_sort(&x->steps);
    snprintf(r->step_source, sizeof r->step_source, "%s", x->steps.n ? steps_from : "window");
    r->format = format;
    return cp_imp_sink_open(x->k, trace, r->source, cp_import_format_name(format), r, d);
}

/* ---- torch_npu / msprof --------------------------------------------------------------- */

static enum cp_status ascend_db(struct dbimp *x, struct cp_import_result *r, const char *trace,
                                struct cp_diag *d)
{
    const struct fdb *f = &x->f;
    bool compute = has_table(f, "COMPUTE_TASK_INFO"), cann = has_table(f, "CANN_API"),
         torch = has_table(f, "PYTORCH_API"), pmu = has_table(f, "TASK_PMU_INFO"),
         steps = has_table(f, "STEP_TIME");
    enum cp_status st = bounds(x, "SELECT min(startNs), max(endNs) FROM TASK", d);
    if (st == CP_OK && cann)
        st = bounds(x, "SELECT min(startNs), max(endNs) FROM CANN_API", d);
    if (st == CP_OK && torch)
        st = bounds(x,
                    "SELECT min(CAST(startNs AS INTEGER)), max(CAST(endNs AS INTEGER)) FROM "
                    "PYTORCH_API",
                    d);
    if (st == CP_OK && steps)
        st = bounds(x, "SELECT min(startNs), max(endNs) FROM STEP_TIME", d);
    if (st == CP_OK && !x->have_ts)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: the TASK table has no task with a time", f->path);
    if (st == CP_OK && steps)
        st = each_row(f, "SELECT id, startNs, endNs FROM STEP_TIME ORDER BY startNs",
                      "reading STEP_TIME", step_row, x, d);
    if (st != CP_OK || (st = open_run(x, r, trace, CP_IMPORT_ASCEND_DB, "STEP_TIME", d)) != CP_OK)
        return st;
    /* device tasks, named by their compute info where they have one */
    st = write_rows(
        x, CP_LAYER_DEVICE, "device",
        compute ? "SELECT t.startNs, t.endNs, t.streamId, coalesce(n.value, tt.value), "
                  "coalesce(o.value, tt.value), coalesce(ct.value, tt.value) FROM TASK t "
                  "LEFT JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId "
                  "LEFT JOIN STRING_IDS n ON n.id = c.name LEFT JOIN STRING_IDS o ON o.id = "
                  "c.opType LEFT JOIN STRING_IDS ct ON ct.id = c.taskType LEFT JOIN STRING_IDS "
                  "tt ON tt.id = t.taskType"
                : "SELECT t.startNs, t.endNs, t.streamId, tt.value, tt.value, tt.value FROM TASK "
                  "t LEFT JOIN STRING_IDS tt ON tt.id = t.taskType",
        "reading TASK", d);
    if (st == CP_OK && cann)
        st = write_rows(x, CP_LAYER_RUNTIME, "CANN",
                        "SELECT a.startNs, a.endNs, a.globalTid, s.value FROM CANN_API a "
                        "LEFT JOIN STRING_IDS s ON s.id = a.name",
                        "reading CANN_API", d);
    if (st == CP_OK && torch)
        st = write_rows(x, CP_LAYER_APP, "Python",
                        "SELECT CAST(a.startNs AS INTEGER), CAST(a.endNs AS INTEGER), "
                        "a.globalTid, s.value FROM PYTORCH_API a LEFT JOIN STRING_IDS s ON s.id "
                        "= a.name ORDER BY CAST(a.startNs AS INTEGER)",
                        "reading PYTORCH_API", d);
    if (st == CP_OK && pmu)
        st = each_row(f,
                      "SELECT t.startNs, t.endNs, s.value, p.value FROM TASK_PMU_INFO p JOIN "
                      "TASK t ON t.globalTaskId = p.globalTaskId LEFT JOIN STRING_IDS s ON s.id "
                      "= p.name",
                      "reading TASK_PMU_INFO", pmu_row, x, d);
    return st;
}

/* ---- Nsight Systems -------------------------------------------------------------------- */

/* The StringIds column a kernel's name is in, by version. */
static const char *kernel_name_column(const struct fdb *f)
{
    static const char *const cols[] = {"demangledName", "shortName", "mangledName"};
    for (size_t i = 0; i < sizeof cols / sizeof *cols; i++)
        if (has_column(f, "CUPTI_ACTIVITY_KIND_KERNEL", cols[i]))
            return cols[i];
    return NULL;
}

static enum cp_status nsys_db(struct dbimp *x, struct cp_import_result *r, const char *trace,
                              struct cp_diag *d)
{
    const struct fdb *f = &x->f;
    bool kernels = has_table(f, "CUPTI_ACTIVITY_KIND_KERNEL"),
         memcpy_ = has_table(f, "CUPTI_ACTIVITY_KIND_MEMCPY"),
         memset_ = has_table(f, "CUPTI_ACTIVITY_KIND_MEMSET"),
         runtime = has_table(f, "CUPTI_ACTIVITY_KIND_RUNTIME"),
         nvtx = has_table(f, "NVTX_EVENTS") && has_column(f, "NVTX_EVENTS", "end");
    bool nvtx_id = nvtx && has_column(f, "NVTX_EVENTS", "textId");
    const char *kname = kernels ? kernel_name_column(f) : NULL;
    static const char *const tables[] = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                         "CUPTI_ACTIVITY_KIND_MEMSET",
                                         "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"};
    bool have[] = {kernels, memcpy_, memset_, runtime, nvtx};
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < sizeof tables / sizeof *tables; i++) {
        if (!have[i])
            continue;
        char sql[200];
        snprintf(sql, sizeof sql, "SELECT min(start), max(end) FROM %s", tables[i]);
        st = bounds(x, sql, d);
    }
    if (st == CP_OK && !x->have_ts)
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: an Nsight Systems export without kernels, copies, runtime calls "
                         "or NVTX ranges",
                         f->path);
    /* steps: NVTX ranges ProfilerStep#N (PyTorch emits them with
     * emit_nvtx), numbered by their N */
    if (st == CP_OK && nvtx)
        st = each_row(f,
                      nvtx_id ? "SELECT CAST(substr(coalesce(e.text, s.value), 14) AS INTEGER), "
                                "e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = "
                                "e.textId WHERE e.end IS NOT NULL AND coalesce(e.text, s.value) "
                                "GLOB 'ProfilerStep#[0-9]*'"
                              : "SELECT CAST(substr(text, 14) AS INTEGER), start, end FROM "
                                "NVTX_EVENTS WHERE end IS NOT NULL AND text GLOB "
                                "'ProfilerStep#[0-9]*'",
                      "reading NVTX_EVENTS", step_row, x, d);
    if (st != CP_OK || (st = open_run(x, r, trace, CP_IMPORT_NSYS, "NVTX", d)) != CP_OK)
        return st;
    const char *version = has_table(f, "META_DATA_EXPORT")   ? "META_DATA_EXPORT"
                          : has_table(f, "EXPORT_META_DATA") ? "EXPORT_META_DATA"
                                                             : "none";
    st = cp_imp_sink_meta(x->k, "profile.version_table", version, d);
    char sql[600];
    if (st == CP_OK && kname) {
        snprintf(sql, sizeof sql,
                 "SELECT k.start, k.end, k.streamId, s.value, 'Kernel', 'CUDA' FROM "
                 "CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON s.id = k.%s",
                 kname);
        st = write_rows(x, CP_LAYER_DEVICE, "GPU", sql, "reading CUPTI_ACTIVITY_KIND_KERNEL", d);
    }
    bool bytes = memcpy_ && has_column(f, "CUPTI_ACTIVITY_KIND_MEMCPY", "bytes");
    if (st == CP_OK && memcpy_) {
        snprintf(sql, sizeof sql,
                 "SELECT start, end, streamId, 'Memcpy', 'Memcpy', 'CUDA', %s FROM "
                 "CUPTI_ACTIVITY_KIND_MEMCPY",
                 bytes ? "bytes" : "NULL");
        st = write_rows(x, CP_LAYER_DEVICE, "GPU", sql, "reading CUPTI_ACTIVITY_KIND_MEMCPY", d);
    }
    if (st == CP_OK && memset_)
        st = write_rows(x, CP_LAYER_DEVICE, "GPU",
                        "SELECT start, end, streamId, 'Memset', 'Memset', 'CUDA' FROM "
                        "CUPTI_ACTIVITY_KIND_MEMSET",
                        "reading CUPTI_ACTIVITY_KIND_MEMSET", d);
    if (st == CP_OK && runtime)
        st = write_rows(x, CP_LAYER_RUNTIME, "host",
                        "SELECT r.start, r.end, r.globalTid, s.value FROM "
                        "CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId",
                        "reading CUPTI_ACTIVITY_KIND_RUNTIME", d);
    if (st == CP_OK && nvtx)
        st = write_rows(x, CP_LAYER_APP, "host",
                        nvtx_id ? "SELECT e.start, e.end, e.globalTid, coalesce(e.text, s.value) "
                                  "FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                                  "WHERE e.end IS NOT NULL"
                                : "SELECT start, end, globalTid, text FROM NVTX_EVENTS WHERE end "
                                  "IS NOT NULL",
                        "reading NVTX_EVENTS", d);
    return st;
}

/* ---- which one ------------------------------------------------------------------------- */

enum cp_status cp_imp_sqlite(const char *path, const char *trace_path, struct cp_import_result *r,
                             struct cp_diag *d)
{
    struct cp_imp_sink k;
    memset(&k, 0, sizeof k);
    k.run = -1;
    struct dbimp x;
    memset(&x, 0, sizeof x);
    x.k = &k;
    enum cp_status st = fdb_open(path, &x.f, d);
    if (st != CP_OK)
        return st;
    if (has_table(&x.f, "TASK") && has_table(&x.f, "STRING_IDS"))
        st = ascend_db(&x, r, trace_path, d);
    else if (has_table(&x.f, "StringIds") &&
             (has_table(&x.f, "CUPTI_ACTIVITY_KIND_KERNEL") ||
              has_table(&x.f, "CUPTI_ACTIVITY_KIND_RUNTIME") || has_table(&x.f, "NVTX_EVENTS")))
        st = nsys_db(&x, r, trace_path, d);
    else if (sqlite3_errcode(x.f.db) == SQLITE_NOTADB || sqlite3_errcode(x.f.db) == SQLITE_CORRUPT)
        st = fdb_error(&x.f, "reading the schema", d);
    else
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: a SQLite database, but neither a torch_npu / msprof export (tables "
                         "TASK, STRING_IDS) nor an Nsight Systems export (StringIds, "
                         "CUPTI_ACTIVITY_KIND_*)",
                         path);
    if (st == CP_OK) {
        char summary[300];
        snprintf(summary, sizeof summary,
                 "{\"format\":\"%s\",\"application_events\":%zu,\"runtime_events\":%zu,"
                 "\"device_events\":%zu,\"steps\":\"%s\"}",
                 cp_import_format_name(r->format), r->events[0], r->events[1], r->events[2],
                 r->step_source);
        st = cp_imp_sink_meta(&k, "summary", summary, d);
    }
    if (st == CP_OK)
        st = cp_imp_steps_finish(&x.steps, &k, x.min_ts, x.max_end, d);
    if (st != CP_OK)
        cp_imp_sink_abort(&k);
    cp_imp_steps_release(&x.steps);
    sqlite3_close(x.f.db);
    return st;
}

/* ---- analysis.db: the communication analyses of a DB export ---------------------------- */

static bool has_columns(const struct fdb *f, const char *table, const char *const *cols, size_t n)
{
    if (!has_table(f, table))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!has_column(f, table, cols[i]))
            return false;
    return true;
}

/* Whether `table` has rows for "Total Op Info" (the sum over its ops, as
 * in communication.json): then only they are read. */
static bool has_totals(const struct fdb *f, const char *table)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT 1 FROM %s WHERE hccl_op_name = 'Total Op Info' LIMIT 1",
             table);
    sqlite3_stmt *st = NULL;
    bool yes = sqlite3_prepare_v2(f->db, sql, -1, &st, NULL) == SQLITE_OK &&
               sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return yes;
}

struct adb {
    struct cp_imp_sink *k;
    const struct cp_trace_point *steps;
    size_t n_steps;
    double *rdma_max_ms;
};

/* A step column: "step6" (as communication.json's keys) or a number. */
static int32_t adb_step(const struct adb *a, sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    if (!t)
        return a->n_steps ? -1 : 0;
    char key[48];
    snprintf(key, sizeof key, "%s%s", strncmp((const char *)t, "step", 4) == 0 ? "" : "step",
             (const char *)t);
    return cp_imp_comm_step(a->steps, a->n_steps, key);
}

static bool finite_col(sqlite3_stmt *st, int col, double *x)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return false;
    *x = sqlite3_column_double(st, col);
    return isfinite(*x) && *x >= 0;
}

static enum cp_status adb_time_row(void *u, sqlite3_stmt *st, struct cp_diag *d)
{
    static const char *const names[] = {"comm.elapse_ms", "comm.transit_ms", "comm.wait_ms",
                                        "comm.synchronization_ms", "comm.idle_ms"};
    struct adb *a = u;
    int32_t it = adb_step(a, st, 0);
    enum cp_status rc = CP_OK;
    for (int i = 0; rc == CP_OK && i < 5; i++) {
        double x;
        if (finite_col(st, i + 1, &x))
            rc = cp_imp_sink_acc(a->k, it, names[i], x, 0, true, d);
    }
    return rc;
}

/* One (step, op, link) with its size and time. */
static enum cp_status adb_band_row(void *u, sqlite3_stmt *st, struct cp_diag *d)
{
    struct adb *a = u;
    int32_t it = adb_step(a, st, 0);
    const unsigned char *link = sqlite3_column_text(st, 1);
    double mb, ms;
    if (!link || strlen((const char *)link) > 16 || strchr((const char *)link, '.') ||
        !finite_col(st, 2, &mb) || !finite_col(st, 3, &ms))
        return CP_OK;
    char name[64];
    snprintf(name, sizeof name, "comm.%s.size_mb", link);
    enum cp_status rc = cp_imp_sink_acc(a->k, it, name, mb, 0, true, d);
    snprintf(name, sizeof name, "comm.%s.time_ms", link);
    if (rc == CP_OK)
        rc = cp_imp_sink_acc(a->k, it, name, ms, 0, true, d);
    return rc;
}

/* One size bucket of an op's link: its packets. */
static enum cp_status adb_packet_row(void *u, sqlite3_stmt *st, struct cp_diag *d)
{
    struct adb *a = u;
    int32_t it = adb_step(a, st, 0);
    const unsigned char *link = sqlite3_column_text(st, 1);
    double size, count;
    if (!link || strlen((const char *)link) > 16 || strchr((const char *)link, '.') ||
        !finite_col(st, 2, &size) || !finite_col(st, 3, &count))
        return CP_OK;
    char name[64];
    snprintf(name, sizeof name, "comm.%s.packets", link);
    enum cp_status rc = cp_imp_sink_acc(a->k, it, name, count, 0, true, d);
    snprintf(name, sizeof name, "comm.%s.small_packets", link);
    if (rc == CP_OK)
        rc = cp_imp_sink_acc(a->k, it, name,
                             size < cp_imp_small_packet_mb((const char *)link) ? count : 0, 0, true,
                             d);
    return rc;
}

static enum cp_status adb_rdma_row(void *u, sqlite3_stmt *st, struct cp_diag *d)
{
    (void)d;
    struct adb *a = u;
    double ms;
    if (finite_col(st, 0, &ms) && ms > *a->rdma_max_ms)
        *a->rdma_max_ms = ms;
    return CP_OK;
}

/* One link (source-destination, transport) summed over the profile. */
static enum cp_status adb_link_row(void *u, sqlite3_stmt *st, struct cp_diag *d)
{
    struct adb *a = u;
    const unsigned char *pair = sqlite3_column_text(st, 0), *link = sqlite3_column_text(st, 1);
    double mb, ms;
    if (!pair || !link || strlen((const char *)pair) > 40 || strlen((const char *)link) > 16 ||
        !finite_col(st, 2, &mb) || !finite_col(st, 3, &ms) || ms <= 0)
        return CP_OK;
    char name[140];
    snprintf(name, sizeof name, "comm.link.%s.%s.gbps", pair, link);
    return cp_imp_sink_counter(a->k, -1, name, mb / ms, 0, d);
}

enum cp_status cp_imp_analysis_db(struct cp_imp_sink *k, const char *path,
                                  const struct cp_trace_point *steps, size_t n_steps,
                                  double *rdma_max_ms, struct cp_diag *d)
{
    struct fdb f;
    enum cp_status st = fdb_open(path, &f, d);
    if (st != CP_OK)
        return st;
    struct adb a = {k, steps, n_steps, rdma_max_ms};
    static const char WHAT[] = "reading the communication analyses";
    static const char *const time_cols[] = {"step",         "hccl_op_name", "elapse_time",
                                            "transit_time", "wait_time",    "synchronization_time",
                                            "idle_time"};
    static const char *const band_cols[] = {"step",         "hccl_op_name", "transport_type",
                                            "transit_size", "transit_time", "package_size",
                                            "count"};
    static const char *const matrix_cols[] = {"src_rank",     "dst_rank",     "transport_type",
                                              "transit_size", "transit_time", "hccl_op_name"};
    const char *skipped[3];
    size_t n_skipped = 0;
    if (has_columns(&f, "CommAnalyzerTime", time_cols, 7)) {
        char sql[400];
        snprintf(sql, sizeof sql,
                 "SELECT step, elapse_time, transit_time, wait_time, synchronization_time, "
                 "idle_time FROM CommAnalyzerTime WHERE %s",
                 has_totals(&f, "CommAnalyzerTime") ? "hccl_op_name = 'Total Op Info'" : "1");
        st = each_row(&f, sql, WHAT, adb_time_row, &a, d);
    } else if (has_table(&f, "CommAnalyzerTime")) {
        skipped[n_skipped++] = "CommAnalyzerTime";
    }
    if (st == CP_OK && has_columns(&f, "CommAnalyzerBandwidth", band_cols, 7)) {
        bool totals = has_totals(&f, "CommAnalyzerBandwidth");
        const char *which = totals ? "hccl_op_name = 'Total Op Info'" : "1";
        char sql[500];
        /* a row per size bucket: the link's size and time repeat in each */
        snprintf(sql, sizeof sql,
                 "SELECT step, transport_type, MAX(transit_size), MAX(transit_time) FROM "
                 "CommAnalyzerBandwidth WHERE %s GROUP BY step, hccl_op_name, transport_type",
                 which);
        st = each_row(&f, sql, WHAT, adb_band_row, &a, d);
        snprintf(sql, sizeof sql,
                 "SELECT step, transport_type, package_size, count FROM CommAnalyzerBandwidth "
                 "WHERE %s",
                 which);
        if (st == CP_OK)
            st = each_row(&f, sql, WHAT, adb_packet_row, &a, d);
        if (st == CP_OK)
            st = each_row(&f,
                          "SELECT MAX(transit_time) FROM CommAnalyzerBandwidth WHERE "
                          "transport_type = 'RDMA' AND hccl_op_name <> 'Total Op Info'",
                          WHAT, adb_rdma_row, &a, d);
    } else if (st == CP_OK && has_table(&f, "CommAnalyzerBandwidth")) {
        skipped[n_skipped++] = "CommAnalyzerBandwidth";
    }
    if (st == CP_OK && has_columns(&f, "CommAnalyzerMatrix", matrix_cols, 6)) {
        sqlite3_stmt *q = NULL;
        bool totals = sqlite3_prepare_v2(f.db,
                                         "SELECT 1 FROM CommAnalyzerMatrix WHERE hccl_op_name "
                                         "LIKE '%-total@%' LIMIT 1",
                                         -1, &q, NULL) == SQLITE_OK &&
                      sqlite3_step(q) == SQLITE_ROW;
        sqlite3_finalize(q);
        char sql[400];
        snprintf(sql, sizeof sql,
                 "SELECT src_rank || '-' || dst_rank, transport_type, SUM(transit_size), "
                 "SUM(transit_time) FROM CommAnalyzerMatrix WHERE transport_type <> 'LOCAL' "
                 "AND %s GROUP BY 1, 2",
                 totals ? "hccl_op_name LIKE '%-total@%'" : "1");
        st = each_row(&f, sql, WHAT, adb_link_row, &a, d);
    } else if (st == CP_OK && has_table(&f, "CommAnalyzerMatrix")) {
        skipped[n_skipped++] = "CommAnalyzerMatrix";
    }
    for (size_t i = 0; st == CP_OK && i < n_skipped; i++) {
        char key[64];
        snprintf(key, sizeof key, "skipped.analysis.%s", skipped[i]);
        st = cp_imp_sink_meta(k, key, "its columns are not the ones cannprof reads", d);
    }
    if (st == CP_OK)
        st = cp_imp_sink_meta(k, "analysis_db", path, d);
    sqlite3_close(f.db);
    return st;
}
