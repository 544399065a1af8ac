/* The trace store: opening (identity and version checks, schema creation),
 * meta, and the host description. Runs, samples, kernels, events and
 * counters are written in store_write.c. Schema: docs/trace-format.md. */
#include "trace/trace_internal.h"
#include "core/host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

/* Version 1 of the schema. Times are nanoseconds, sizes bytes; see
 * docs/trace-format.md for every column. */
static const char SCHEMA_V1[] =
    "CREATE TABLE meta ("
    "  key TEXT PRIMARY KEY NOT NULL,"
    "  value TEXT NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE TABLE layers ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE"
    ");"
    "INSERT INTO layers(id, name) VALUES (0, 'application'), (1, 'runtime'), (2, 'device');"
    "CREATE TABLE runs ("
    "  id INTEGER PRIMARY KEY,"
    "  created_at TEXT NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  model_path TEXT,"
    "  model_hash TEXT,"
    "  config_json TEXT,"
    "  config_id TEXT,"
    "  target TEXT,"
    "  threads INTEGER NOT NULL DEFAULT 0,"
    "  batch INTEGER NOT NULL DEFAULT 0,"
    "  warmup INTEGER NOT NULL DEFAULT 0,"
    "  iterations INTEGER NOT NULL DEFAULT 0,"
    "  weight_bytes INTEGER NOT NULL DEFAULT 0,"
    "  arena_bytes INTEGER NOT NULL DEFAULT 0,"
    "  peak_bytes INTEGER NOT NULL DEFAULT 0,"
    "  peak_rss_bytes INTEGER NOT NULL DEFAULT 0"
    ");"
    "CREATE TABLE samples ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id),"
    "  iteration INTEGER NOT NULL,"
    "  latency_ns INTEGER NOT NULL,"
    "  PRIMARY KEY (run_id, iteration)"
    ") WITHOUT ROWID;"
    "CREATE TABLE kernels ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id),"
    "  idx INTEGER NOT NULL,"
    "  node TEXT,"
    "  op_type TEXT,"
    "  impl TEXT,"
    "  origins TEXT,"
    "  inputs TEXT,"
    "  outputs TEXT,"
    "  flops REAL NOT NULL DEFAULT 0,"
    "  bytes REAL NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (run_id, idx)"
    ") WITHOUT ROWID;"
    "CREATE TABLE strings ("
    "  id INTEGER PRIMARY KEY,"
    "  value TEXT NOT NULL UNIQUE"
    ");"
    /* Clustered by (run, layer, kernel, iteration): the typical queries
     * (a run's events of one layer, one kernel's events) are range scans
     * of the table itself, and no secondary index slows the bulk insert. */
    "CREATE TABLE events ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id),"
    "  layer INTEGER NOT NULL REFERENCES layers(id),"
    "  kernel_idx INTEGER NOT NULL,"
    "  iteration INTEGER NOT NULL,"
    "  seq INTEGER NOT NULL,"
    "  name_id INTEGER REFERENCES strings(id),"
    "  start_ns INTEGER NOT NULL,"
    "  dur_ns INTEGER NOT NULL,"
    "  thread INTEGER NOT NULL,"
    "  depth INTEGER NOT NULL,"
    "  PRIMARY KEY (run_id, layer, kernel_idx, iteration, seq)"
    ") WITHOUT ROWID;"
    "CREATE TABLE counters ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id),"
    "  iteration INTEGER NOT NULL,"
    "  name TEXT NOT NULL,"
    "  value REAL NOT NULL,"
    "  ts_ns INTEGER NOT NULL"
    ");"
    "CREATE INDEX counters_by_run ON counters(run_id, name, iteration);";

static const char SQLITE_MAGIC[16] = "SQLite format 3";

bool cp_trace_is_sqlite(const void *head, size_t n)
{
    return head && n >= sizeof SQLITE_MAGIC && memcmp(head, SQLITE_MAGIC, sizeof SQLITE_MAGIC) == 0;
}

enum cp_status cp_trace_store_db_error(struct cp_trace_store *s, struct cp_diag *d,
                                       const char *what)
{
    int rc = sqlite3_errcode(s->db) & 0xff;
    const char *msg = sqlite3_errmsg(s->db);
    switch (rc) {
    case SQLITE_NOTADB:
        return cp_diag_set(d, CP_ERR_INVALID, "%s is not a SQLite file (%s: %s)", s->path, what,
                           msg);
    case SQLITE_CORRUPT:
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: %s: the database is corrupt (%s)", s->path, what,
                           msg);
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
        /* writing a trace is making an output: its failure is the
         * environment's (exit 3); reading one is reading an input */
        return cp_diag_set(d, s->readonly ? CP_ERR_IO : CP_ERR_WRITE, "%s: %s: %s", s->path, what,
                           msg);
    case SQLITE_NOMEM:
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: %s: out of memory", s->path, what);
    default:
        return cp_diag_set(d, CP_ERR_DB, "%s: %s: %s", s->path, what, msg);
    }
}

const char *cp_trace_store_path(const struct cp_trace_store *s)
{
    return s->path;
}

void *cp_trace_store_db(struct cp_trace_store *s)
{
    return s->db;
}

void cp_trace_store_close(struct cp_trace_store *s)
{
    if (!s)
        return;
    if (s->db && !s->readonly) {
        /* WAL serves the writer; the closed file should be one
         * self-contained file that read-only openers (export, analysis, a
         * copy on a read-only share) can read without leaving -wal and -shm
         * files behind. Leaving WAL needs the database to ourselves: when
         * another connection has it open, skip it at once rather than wait,
         * and the file simply stays in WAL mode. */
        sqlite3_busy_timeout(s->db, 0);
        sqlite3_exec(s->db, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL);
    }
    sqlite3_close(s->db); /* statements are always finalized by their users */
    free(s->path);
    free(s);
}

/* One integer from a single-row query (a PRAGMA, a count). */
static enum cp_status query_int(struct cp_trace_store *s, const char *sql, int64_t *out,
                                struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, "reading the database header");
    enum cp_status ret = CP_OK;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else if (rc == SQLITE_DONE)
        *out = 0;
    else
        ret = cp_trace_store_db_error(s, d, "reading the database header");
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_trace_store_exec(struct cp_trace_store *s, const char *sql, const char *what,
                                   struct cp_diag *d)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, what);
    return CP_OK;
}

/* Before SQLite touches the file: a non-empty file must start with the
 * SQLite header, so that "this is not a trace" names the real problem. */
static enum cp_status check_file_kind(const char *path, bool must_exist, struct cp_diag *d)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT && !must_exist)
            return CP_OK;
        if (errno == ENOENT)
            return cp_diag_set(d, CP_ERR_IO, "%s: no such file", path);
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    if (S_ISDIR(sb.st_mode))
        return cp_diag_set(d, CP_ERR_IO, "%s: is a directory, not a trace store", path);
    if (sb.st_size == 0)
        return CP_OK; /* an empty file is an empty database to SQLite */
    FILE *f = fopen(path, "rb");
    if (!f)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char head[sizeof(SQLITE_MAGIC)];
    size_t got = fread(head, 1, sizeof(head), f);
    fclose(f);
    if (got != sizeof(head) || memcmp(head, SQLITE_MAGIC, sizeof(head)) != 0)
        return cp_diag_set(d, CP_ERR_INVALID, "%s is not a SQLite file", path);
    return CP_OK;
}

static enum cp_status create_schema(struct cp_trace_store *s, struct cp_diag *d)
{
    enum cp_status st =
        cp_trace_store_exec(s, "BEGIN IMMEDIATE", "starting the schema transaction", d);
    if (st != CP_OK)
        return st;
    /* Another process may have created it while we looked. */
    int64_t app_id = 0, version = 0;
    if ((st = query_int(s, "PRAGMA application_id", &app_id, d)) != CP_OK ||
        (st = query_int(s, "PRAGMA user_version", &version, d)) != CP_OK)
        goto out_rollback;
    if (app_id == CP_TRACE_APPLICATION_ID && version == CP_TRACE_SCHEMA_VERSION)
        return cp_trace_store_exec(s, "COMMIT", "committing the schema", d);
    char pragmas[128];
    snprintf(pragmas, sizeof(pragmas), "PRAGMA application_id = %d; PRAGMA user_version = %d;",
             (int)CP_TRACE_APPLICATION_ID, CP_TRACE_SCHEMA_VERSION);
    if ((st = cp_trace_store_exec(s, SCHEMA_V1, "creating the schema", d)) != CP_OK ||
        (st = cp_trace_store_exec(s, pragmas, "tagging the schema", d)) != CP_OK)
        goto out_rollback;
    char sql[256];
    snprintf(sql, sizeof(sql),
             "INSERT INTO meta(key, value) VALUES ('schema_version', '%d'), "
             "('created_by', 'cannprof %s'), "
             "('created_at', strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', 'now'))",
             CP_TRACE_SCHEMA_VERSION, CP_VERSION_STRING);
    if ((st = cp_trace_store_exec(s, sql, "writing the schema meta", d)) != CP_OK)
        goto out_rollback;
    return cp_trace_store_exec(s, "COMMIT", "committing the schema", d);
out_rollback:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

/* Decide whether the open database is ours, and what to do with it. */
static enum cp_status check_identity(struct cp_trace_store *s, bool *needs_schema,
                                     struct cp_diag *d)
{
    int64_t app_id = 0, version = 0, n_objects = 0;
    enum cp_status st;
    if ((st = query_int(s, "PRAGMA application_id", &app_id, d)) != CP_OK ||
        (st = query_int(s, "PRAGMA user_version", &version, d)) != CP_OK ||
        (st = query_int(s, "SELECT count(*) FROM sqlite_master", &n_objects, d)) != CP_OK)
        return st;
    *needs_schema = false;
    if ((uint32_t)app_id == CP_TRACE_APPLICATION_ID) {
        if (version > CP_TRACE_SCHEMA_VERSION)
            return cp_diag_set(d, CP_ERR_VERSION,
                               "%s: trace schema version %lld is newer than this cannprof "
                               "(%s) reads (version %d); upgrade cannprof",
                               s->path, (long long)version, CP_VERSION_STRING,
                               CP_TRACE_SCHEMA_VERSION);
        *needs_schema = version < CP_TRACE_SCHEMA_VERSION;
    } else if (app_id == 0 && n_objects == 0) {
        *needs_schema = true; /* a new or empty database */
    } else {
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s is a SQLite database but not a cannprof trace store "
                           "(application_id 0x%08x, expected 0x%08x)",
                           s->path, (unsigned)(uint32_t)app_id, CP_TRACE_APPLICATION_ID);
    }
    if (*needs_schema && s->readonly)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: not an initialised cannprof trace store (empty database)", s->path);
    return CP_OK;
}

static enum cp_status store_open(const char *path, bool readonly, struct cp_trace_store **out,
                                 struct cp_diag *d)
{
    *out = NULL;
    if (!path || !*path)
        return cp_diag_set(d, CP_ERR_USAGE, "trace store: empty path");
    enum cp_status st = check_file_kind(path, readonly, d);
    if (st != CP_OK)
        return st;
    struct cp_trace_store *s = calloc(1, sizeof(*s));
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    s->readonly = readonly;
    s->path = cp_strdup(path);
    if (!s->path) {
        free(s);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    }
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path, &s->db, flags, NULL) != SQLITE_OK) {
        st = cp_diag_set(d,
                         !s->db     ? CP_ERR_NOMEM
                         : readonly ? CP_ERR_IO
                                    : CP_ERR_WRITE,
                         "%s: cannot open: %s", path,
                         s->db ? sqlite3_errmsg(s->db) : "out of memory");
        goto out_close;
    }
    sqlite3_extended_result_codes(s->db, 0);
    sqlite3_busy_timeout(s->db, 5000);
    bool needs_schema = false;
    if ((st = check_identity(s, &needs_schema, d)) != CP_OK)
        goto out_close;
    if (!readonly) {
        /* Only now that the file is known to be ours (or new) may we change
         * its journal mode. */
        int64_t ignored;
        if ((st = query_int(s, "PRAGMA journal_mode = WAL", &ignored, d)) != CP_OK ||
            (st = cp_trace_store_exec(s, "PRAGMA synchronous = NORMAL", "setting synchronous",
                                      d)) != CP_OK)
            goto out_close;
        if (needs_schema && (st = create_schema(s, d)) != CP_OK)
            goto out_close;
    }
    *out = s;
    return CP_OK;
out_close:
    cp_trace_store_close(s);
    return st;
}

enum cp_status cp_trace_store_open(const char *path, struct cp_trace_store **s, struct cp_diag *d)
{
    return store_open(path, false, s, d);
}

enum cp_status cp_trace_store_open_ro(const char *path, struct cp_trace_store **s,
                                      struct cp_diag *d)
{
    return store_open(path, true, s, d);
}

/* ---- meta ------------------------------------------------------------------ */

static enum cp_status put_meta(struct cp_trace_store *s, sqlite3_stmt *st, const char *key,
                               const char *value, struct cp_diag *d)
{
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, value ? value : "", -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
        char what[160];
        snprintf(what, sizeof(what), "setting meta '%.100s'", key);
        return cp_trace_store_db_error(s, d, what);
    }
    return CP_OK;
}

static const char SET_META_SQL[] = "INSERT INTO meta(key, value) VALUES (?1, ?2) "
                                   "ON CONFLICT(key) DO UPDATE SET value = excluded.value";

enum cp_status cp_trace_store_set_meta(struct cp_trace_store *s, const char *key, const char *value,
                                       struct cp_diag *d)
{
    if (!key)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: meta key is NULL", s->path);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, SET_META_SQL, -1, &st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, "setting meta");
    enum cp_status ret = put_meta(s, st, key, value, d);
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_trace_store_get_meta(struct cp_trace_store *s, const char *key, char **value,
                                       struct cp_diag *d)
{
    *value = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = ?1", -1, &st, NULL) !=
        SQLITE_OK)
        return cp_trace_store_db_error(s, d, "reading meta");
    sqlite3_bind_text(st, 1, key ? key : "", -1, SQLITE_STATIC);
    enum cp_status ret = CP_OK;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        *value = cp_strdup(v ? v : "");
        if (!*value)
            ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading meta", s->path);
    } else if (rc != SQLITE_DONE) {
        ret = cp_trace_store_db_error(s, d, "reading meta");
    }
    sqlite3_finalize(st);
    return ret;
}

/* ---- host description ------------------------------------------------------ */

enum cp_status cp_trace_store_set_host_meta(struct cp_trace_store *s, struct cp_diag *d)
{
    struct cp_host *h = malloc(sizeof *h);
    enum cp_status ret = CP_OK;
    if (!h)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", s->path);
    cp_host_detect(h);
    char cores[32], schema[32], l1d[32], l2[32], l3[32];
    snprintf(cores, sizeof(cores), "%d", h->cores);
    snprintf(schema, sizeof(schema), "%d", CP_TRACE_SCHEMA_VERSION);
    snprintf(l1d, sizeof(l1d), "%llu", (unsigned long long)h->l1d_bytes);
    snprintf(l2, sizeof(l2), "%llu", (unsigned long long)h->l2_bytes);
    snprintf(l3, sizeof(l3), "%llu", (unsigned long long)h->l3_bytes);
    const char *kv[][2] = {
        {"tool_version", CP_VERSION_STRING},
        {"schema_version", schema},
        {"host_cpu_model", h->cpu_model},
        {"host_isa_flags", h->flags[0] ? h->flags : "unknown"},
        {"host_cores", cores},
        {"host_os", h->os},
        {"host_arch", h->arch},
        {"host_l1d_bytes", l1d},
        {"host_l2_bytes", l2},
        {"host_l3_bytes", l3},
    };
    if ((ret = cp_trace_store_exec(s, "BEGIN IMMEDIATE", "recording the host", d)) != CP_OK)
        goto out_free;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, SET_META_SQL, -1, &st, NULL) != SQLITE_OK) {
        ret = cp_trace_store_db_error(s, d, "recording the host");
        goto out_rollback;
    }
    for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]) && ret == CP_OK; i++)
        ret = put_meta(s, st, kv[i][0], kv[i][1], d);
    sqlite3_finalize(st);
    if (ret != CP_OK)
        goto out_rollback;
    ret = cp_trace_store_exec(s, "COMMIT", "recording the host", d);
    goto out_free;
out_rollback:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
out_free:
    free(h);
    return ret;
}
