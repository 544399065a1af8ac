/* The knowledge base file: where it lives, opening it (identity and version
 * checks), the schema migrations, and the small SQLite helpers the other
 * files of knowledge/ share. Schema: docs/kb-schema.md. */
#include "knowledge/kb_internal.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- schema migrations -----------------------------------------------------
 *
 * The schema is the result of applying MIGRATIONS[0..k) in order to an empty
 * database; PRAGMA user_version says how many have been applied. To change
 * the schema, append a migration (never edit one that has shipped: files in
 * the field already ran it), bump CP_KB_SCHEMA_VERSION and document the
 * version in docs/kb-schema.md. Each migration runs in its own transaction
 * together with the user_version bump, so a file is always at exactly one
 * version. */

/* Version 1: meta, schema history, baselines, services and validations. */
static const char MIGRATION_V1[] =
    "CREATE TABLE meta ("
    "  key TEXT PRIMARY KEY NOT NULL,"
    "  value TEXT NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE TABLE schema_history ("
    "  version INTEGER PRIMARY KEY,"
    "  applied_at TEXT NOT NULL,"
    "  tool_version TEXT NOT NULL"
    ");"
    /* AUTOINCREMENT: a removed baseline's id is never given to another, so
     * validations.baseline_id can never point at the wrong figures. */
    "CREATE TABLE baselines ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  service TEXT NOT NULL,"
    "  tag TEXT NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  trace_path TEXT,"
    "  run_id INTEGER,"
    "  run_kind TEXT,"
    "  run_created_at TEXT,"
    "  model_path TEXT,"
    "  model_hash TEXT,"
    "  config_id TEXT,"
    "  batch INTEGER NOT NULL DEFAULT 0,"
    "  threads INTEGER NOT NULL DEFAULT 0,"
    "  n INTEGER NOT NULL,"
    "  latency_ns BLOB NOT NULL,"
    "  device_ns BLOB,"
    "  mean_ns REAL,"
    "  median_ns REAL,"
    "  p99_ns REAL,"
    "  weight_bytes INTEGER NOT NULL DEFAULT 0,"
    "  arena_bytes INTEGER NOT NULL DEFAULT 0,"
    "  peak_bytes INTEGER NOT NULL DEFAULT 0,"
    "  peak_rss_bytes INTEGER NOT NULL DEFAULT 0,"
    "  precision_loss REAL,"
    "  UNIQUE (service, tag)"
    ");"
    "CREATE INDEX baselines_by_service ON baselines(service, id);"
    /* One row per service that ever had a baseline; last_auto_tag keeps
     * automatic tags from being given out twice. */
    "CREATE TABLE services ("
    "  name TEXT PRIMARY KEY NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  last_auto_tag INTEGER NOT NULL DEFAULT 0"
    ") WITHOUT ROWID;"
    "CREATE TABLE validations ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  created_at TEXT NOT NULL,"
    "  service TEXT NOT NULL,"
    "  baseline_id INTEGER,"
    "  baseline_tag TEXT,"
    "  trace_path TEXT,"
    "  verdict TEXT NOT NULL,"
    "  figures_json TEXT,"
    "  exit_code INTEGER NOT NULL DEFAULT 0,"
    "  alert_attempted INTEGER NOT NULL DEFAULT 0,"
    "  alert_delivered INTEGER NOT NULL DEFAULT 0,"
    "  alert_error TEXT"
    ");"
    "CREATE INDEX validations_by_service ON validations(service, id);";

/* Version 2: what the tuner records (knowledge/kb_tuning.h): models with
 * fingerprints, hardware signatures, tuning sessions, their candidates and
 * raw measurements, and per-model strategy outcomes. No foreign keys were
 * enforced at this version (rows refer by id; import resolves natural
 * keys); version 4 declares them. */
static const char MIGRATION_V2[] =
    "CREATE TABLE models ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  structure_hash TEXT NOT NULL,"
    "  source_hash TEXT NOT NULL DEFAULT '',"
    "  name TEXT NOT NULL,"
    "  model_class TEXT NOT NULL,"
    "  params INTEGER NOT NULL DEFAULT 0,"
    "  flops REAL NOT NULL DEFAULT 0,"
    "  n_nodes INTEGER NOT NULL DEFAULT 0,"
    "  op_histogram TEXT NOT NULL,"
    "  inputs TEXT NOT NULL,"
    "  has_attention INTEGER NOT NULL DEFAULT 0,"
    "  has_conv INTEGER NOT NULL DEFAULT 0,"
    "  has_layernorm INTEGER NOT NULL DEFAULT 0,"
    "  has_groupnorm INTEGER NOT NULL DEFAULT 0,"
    "  has_batchnorm INTEGER NOT NULL DEFAULT 0,"
    "  has_gelu INTEGER NOT NULL DEFAULT 0,"
    "  created_at TEXT NOT NULL,"
    "  updated_at TEXT NOT NULL,"
    "  UNIQUE (structure_hash, source_hash)"
    ");"
    "CREATE TABLE hardware ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  signature TEXT NOT NULL UNIQUE,"
    "  cpu_model TEXT NOT NULL DEFAULT '',"
    "  isa TEXT NOT NULL DEFAULT '',"
    "  cores INTEGER NOT NULL DEFAULT 0,"
    "  soc_version TEXT NOT NULL DEFAULT '',"
    "  tool_version TEXT NOT NULL DEFAULT '',"
    "  created_at TEXT NOT NULL"
    ");"
    "CREATE TABLE sessions ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  uid TEXT NOT NULL UNIQUE,"
    "  key TEXT NOT NULL,"
    "  model_id INTEGER,"
    "  hw_id INTEGER,"
    "  model_path TEXT,"
    "  target TEXT,"
    "  constraints TEXT,"
    "  status TEXT NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  updated_at TEXT NOT NULL,"
    "  baseline_config TEXT,"
    "  best_config TEXT,"
    "  best_candidate_id INTEGER,"
    "  budget INTEGER NOT NULL DEFAULT 0,"
    "  evaluations INTEGER NOT NULL DEFAULT 0,"
    "  baseline_median_ns REAL,"
    "  best_median_ns REAL,"
    "  out_dir TEXT,"
    "  stop_reason TEXT"
    ");"
    "CREATE INDEX sessions_by_key ON sessions(key, id);"
    "CREATE INDEX sessions_by_model ON sessions(model_id, id);"
    "CREATE TABLE candidates ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  session_id INTEGER NOT NULL,"
    "  step INTEGER NOT NULL,"
    "  delta TEXT NOT NULL DEFAULT '',"
    "  source TEXT,"
    "  config_json TEXT,"
    "  config_id TEXT,"
    "  om_path TEXT,"
    "  trace_path TEXT,"
    "  status TEXT NOT NULL,"
    "  reason TEXT,"
    "  expected_gain REAL,"
    "  measured_gain REAL,"
    "  ci_lo REAL,"
    "  ci_hi REAL,"
    "  p REAL,"
    "  precision_loss REAL,"
    "  memory_bytes INTEGER NOT NULL DEFAULT 0,"
    "  median_ns REAL,"
    "  throughput REAL,"
    "  created_at TEXT NOT NULL"
    ");"
    "CREATE INDEX candidates_by_session ON candidates(session_id, step, id);"
    "CREATE INDEX candidates_by_source ON candidates(source);"
    "CREATE TABLE measurements ("
    "  candidate_id INTEGER NOT NULL,"
    "  role TEXT NOT NULL,"
    "  n INTEGER NOT NULL,"
    "  samples_ns BLOB NOT NULL,"
    "  PRIMARY KEY (candidate_id, role)"
    ") WITHOUT ROWID;"
    "CREATE TABLE strategies ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  model_id INTEGER NOT NULL,"
    "  hw_id INTEGER NOT NULL,"
    "  session_id INTEGER,"
    "  delta TEXT NOT NULL,"
    "  gain REAL,"
    "  held INTEGER NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  UNIQUE (session_id, delta)"
    ");"
    "CREATE INDEX strategies_by_model ON strategies(model_id, hw_id);";

/* Version 3: the interference probe of each iteration of a baseline
 * (runner/probe.h), n values encoded like device_ns, so `validate
 * --baseline` can keep the baseline's undisturbed iterations. NULL for the
 * baselines set before (and for runs without a probe): they are compared
 * whole, as before. */
static const char MIGRATION_V3[] = "ALTER TABLE baselines ADD COLUMN probe_ns BLOB;";

/* Version 4: the references become foreign keys, enforced (PRAGMA
 * foreign_keys is on for every connection): a candidate belongs to a
 * session, a measurement to a candidate, a strategy outcome to a model and
 * hardware, a baseline to its service, and nullable ids (a session's model,
 * hardware and best candidate, a strategy's session) name a row or are
 * NULL. All are DEFERRABLE INITIALLY DEFERRED: checked when the writing
 * transaction commits, so a transaction may write in any order (import
 * re-inserts a refreshed session under its id, baselines before their
 * service row) but can never commit a dangling id. validations keep
 * baseline_id and service without a foreign key on purpose: a validation
 * is history and outlives the baseline it was compared with (its tag is
 * kept as text).
 *
 * SQLite cannot add a constraint to a table, so the five tables are built
 * anew and the rows copied (the 12-step procedure of the SQLite docs, run
 * with foreign_keys off, as migrations are). References no version before
 * enforced may dangle: a nullable one is cleared; a row whose required
 * parent is missing was unreachable (nothing lists candidates but by
 * session, measurements but by candidate, outcomes but by model) and is
 * dropped. AUTOINCREMENT counters are carried over, so a removed
 * baseline's id is still never reused. */
static const char MIGRATION_V4[] =
    /* 1. Make the references hold. */
    "DELETE FROM candidates WHERE session_id NOT IN (SELECT id FROM sessions);"
    "DELETE FROM measurements WHERE candidate_id NOT IN (SELECT id FROM candidates);"
    "UPDATE sessions SET model_id = NULL WHERE model_id NOT IN (SELECT id FROM models);"
    "UPDATE sessions SET hw_id = NULL WHERE hw_id NOT IN (SELECT id FROM hardware);"
    "UPDATE sessions SET best_candidate_id = NULL "
    "  WHERE best_candidate_id NOT IN (SELECT id FROM candidates);"
    "DELETE FROM strategies WHERE model_id NOT IN (SELECT id FROM models) "
    "  OR hw_id NOT IN (SELECT id FROM hardware);"
    "UPDATE strategies SET session_id = NULL WHERE session_id NOT IN (SELECT id FROM sessions);"
    "INSERT OR IGNORE INTO services(name, created_at) "
    "  SELECT service, min(created_at) FROM baselines GROUP BY service;"
    /* 2. The tables as they now are. */
    "CREATE TABLE new_baselines ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  service TEXT NOT NULL REFERENCES services(name) DEFERRABLE INITIALLY DEFERRED,"
    "  tag TEXT NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  trace_path TEXT,"
    "  run_id INTEGER,"
    "  run_kind TEXT,"
    "  run_created_at TEXT,"
    "  model_path TEXT,"
    "  model_hash TEXT,"
    "  config_id TEXT,"
    "  batch INTEGER NOT NULL DEFAULT 0,"
    "  threads INTEGER NOT NULL DEFAULT 0,"
    "  n INTEGER NOT NULL,"
    "  latency_ns BLOB NOT NULL,"
    "  device_ns BLOB,"
    "  mean_ns REAL,"
    "  median_ns REAL,"
    "  p99_ns REAL,"
    "  weight_bytes INTEGER NOT NULL DEFAULT 0,"
    "  arena_bytes INTEGER NOT NULL DEFAULT 0,"
    "  peak_bytes INTEGER NOT NULL DEFAULT 0,"
    "  peak_rss_bytes INTEGER NOT NULL DEFAULT 0,"
    "  precision_loss REAL,"
    "  probe_ns BLOB,"
    "  UNIQUE (service, tag)"
    ");"
    "CREATE TABLE new_sessions ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  uid TEXT NOT NULL UNIQUE,"
    "  key TEXT NOT NULL,"
    "  model_id INTEGER REFERENCES models(id) DEFERRABLE INITIALLY DEFERRED,"
    "  hw_id INTEGER REFERENCES hardware(id) DEFERRABLE INITIALLY DEFERRED,"
    "  model_path TEXT,"
    "  target TEXT,"
    "  constraints TEXT,"
    "  status TEXT NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  updated_at TEXT NOT NULL,"
    "  baseline_config TEXT,"
    "  best_config TEXT,"
    "  best_candidate_id INTEGER REFERENCES candidates(id) DEFERRABLE INITIALLY DEFERRED,"
    "  budget INTEGER NOT NULL DEFAULT 0,"
    "  evaluations INTEGER NOT NULL DEFAULT 0,"
    "  baseline_median_ns REAL,"
    "  best_median_ns REAL,"
    "  out_dir TEXT,"
    "  stop_reason TEXT"
    ");"
    "CREATE TABLE new_candidates ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  session_id INTEGER NOT NULL REFERENCES sessions(id) DEFERRABLE INITIALLY DEFERRED,"
    "  step INTEGER NOT NULL,"
    "  delta TEXT NOT NULL DEFAULT '',"
    "  source TEXT,"
    "  config_json TEXT,"
    "  config_id TEXT,"
    "  om_path TEXT,"
    "  trace_path TEXT,"
    "  status TEXT NOT NULL,"
    "  reason TEXT,"
    "  expected_gain REAL,"
    "  measured_gain REAL,"
    "  ci_lo REAL,"
    "  ci_hi REAL,"
    "  p REAL,"
    "  precision_loss REAL,"
    "  memory_bytes INTEGER NOT NULL DEFAULT 0,"
    "  median_ns REAL,"
    "  throughput REAL,"
    "  created_at TEXT NOT NULL"
    ");"
    "CREATE TABLE new_measurements ("
    "  candidate_id INTEGER NOT NULL REFERENCES candidates(id) DEFERRABLE INITIALLY DEFERRED,"
    "  role TEXT NOT NULL,"
    "  n INTEGER NOT NULL,"
    "  samples_ns BLOB NOT NULL,"
    "  PRIMARY KEY (candidate_id, role)"
    ") WITHOUT ROWID;"
    "CREATE TABLE new_strategies ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  model_id INTEGER NOT NULL REFERENCES models(id) DEFERRABLE INITIALLY DEFERRED,"
    "  hw_id INTEGER NOT NULL REFERENCES hardware(id) DEFERRABLE INITIALLY DEFERRED,"
    "  session_id INTEGER REFERENCES sessions(id) DEFERRABLE INITIALLY DEFERRED,"
    "  delta TEXT NOT NULL,"
    "  gain REAL,"
    "  held INTEGER NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  UNIQUE (session_id, delta)"
    ");"
    /* 3. The rows, by column name. */
    "INSERT INTO new_baselines(id, service, tag, created_at, trace_path, run_id, run_kind, "
    "  run_created_at, model_path, model_hash, config_id, batch, threads, n, latency_ns, "
    "  device_ns, mean_ns, median_ns, p99_ns, weight_bytes, arena_bytes, peak_bytes, "
    "  peak_rss_bytes, precision_loss, probe_ns) "
    "  SELECT id, service, tag, created_at, trace_path, run_id, run_kind, run_created_at, "
    "  model_path, model_hash, config_id, batch, threads, n, latency_ns, device_ns, mean_ns, "
    "  median_ns, p99_ns, weight_bytes, arena_bytes, peak_bytes, peak_rss_bytes, "
    "  precision_loss, probe_ns FROM baselines;"
    "INSERT INTO new_sessions(id, uid, key, model_id, hw_id, model_path, target, constraints, "
    "  status, created_at, updated_at, baseline_config, best_config, best_candidate_id, budget, "
    "  evaluations, baseline_median_ns, best_median_ns, out_dir, stop_reason) "
    "  SELECT id, uid, key, model_id, hw_id, model_path, target, constraints, status, "
    "  created_at, updated_at, baseline_config, best_config, best_candidate_id, budget, "
    "  evaluations, baseline_median_ns, best_median_ns, out_dir, stop_reason FROM sessions;"
    "INSERT INTO new_candidates(id, session_id, step, delta, source, config_json, config_id, "
    "  om_path, trace_path, status, reason, expected_gain, measured_gain, ci_lo, ci_hi, p, "
    "  precision_loss, memory_bytes, median_ns, throughput, created_at) "
    "  SELECT id, session_id, step, delta, source, config_json, config_id, om_path, "
    "  trace_path, status, reason, expected_gain, measured_gain, ci_lo, ci_hi, p, "
    "  precision_loss, memory_bytes, median_ns, throughput, created_at FROM candidates;"
    "INSERT INTO new_measurements(candidate_id, role, n, samples_ns) "
    "  SELECT candidate_id, role, n, samples_ns FROM measurements;"
    "INSERT INTO new_strategies(id, model_id, hw_id, session_id, delta, gain, held, created_at) "
    "  SELECT id, model_id, hw_id, session_id, delta, gain, held, created_at FROM strategies;"
    /* 4. AUTOINCREMENT counters: the new tables continue where the old
     * ones were, not at their largest surviving id. */
    "DELETE FROM sqlite_sequence "
    "  WHERE name IN ('new_baselines', 'new_sessions', 'new_candidates', 'new_strategies');"
    "INSERT INTO sqlite_sequence(name, seq) SELECT 'new_' || name, seq FROM sqlite_sequence "
    "  WHERE name IN ('baselines', 'sessions', 'candidates', 'strategies');"
    /* 5. The old tables go, the new ones take their names, the indexes
     * come back. */
    "DROP TABLE baselines;"
    "DROP TABLE sessions;"
    "DROP TABLE candidates;"
    "DROP TABLE measurements;"
    "DROP TABLE strategies;"
    "ALTER TABLE new_baselines RENAME TO baselines;"
    "ALTER TABLE new_sessions RENAME TO sessions;"
    "ALTER TABLE new_candidates RENAME TO candidates;"
    "ALTER TABLE new_measurements RENAME TO measurements;"
    "ALTER TABLE new_strategies RENAME TO strategies;"
    "CREATE INDEX baselines_by_service ON baselines(service, id);"
    "CREATE INDEX sessions_by_key ON sessions(key, id);"
    "CREATE INDEX sessions_by_model ON sessions(model_id, id);"
    "CREATE INDEX candidates_by_session ON candidates(session_id, step, id);"
    "CREATE INDEX candidates_by_source ON candidates(source);"
    "CREATE INDEX strategies_by_model ON strategies(model_id, hw_id);";

struct kb_migration {
    int version; /* the user_version once applied: 1, 2, ... */
    const char *what;
    const char *sql;
};

static const struct kb_migration MIGRATIONS[] = {
    {1, "services, baselines and validations", MIGRATION_V1},
    {2, "models, hardware, sessions, candidates, measurements, strategies", MIGRATION_V2},
    {3, "baselines.probe_ns", MIGRATION_V3},
    {4, "foreign keys", MIGRATION_V4},
};
#define N_MIGRATIONS (sizeof MIGRATIONS / sizeof MIGRATIONS[0])
static_assert(N_MIGRATIONS == CP_KB_SCHEMA_VERSION,
              "one migration per schema version: append one when bumping CP_KB_SCHEMA_VERSION");

/* ---- helpers shared by knowledge/ ------------------------------------------ */

enum cp_status cp_kb_db_error(struct cp_kb *kb, struct cp_diag *d, const char *what)
{
    int rc = sqlite3_errcode(kb->db) & 0xff;
    const char *msg = sqlite3_errmsg(kb->db);
    /* The references are checked at commit (deferred): the write named a
     * row that is not there. Bad input, not a failing database. */
    if (sqlite3_extended_errcode(kb->db) == SQLITE_CONSTRAINT_FOREIGNKEY)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: %s: refused: a row would refer to a session, candidate, model, "
                           "hardware or service that is not in the knowledge base (%s); nothing "
                           "was written",
                           kb->path, what, msg);
    switch (rc) {
    case SQLITE_NOTADB:
        return cp_diag_set(d, CP_ERR_INVALID, "%s is not a SQLite file (%s: %s)", kb->path, what,
                           msg);
    case SQLITE_CORRUPT:
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: %s: the knowledge base is corrupt (%s)",
                           kb->path, what, msg);
    case SQLITE_NOMEM:
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: %s: out of memory", kb->path, what);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return cp_diag_set(d, CP_ERR_DB,
                           "%s: %s: the knowledge base is locked by another process "
                           "(waited up to %d s: %s)",
                           kb->path, what, CP_KB_BUSY_TIMEOUT_MS / 1000, msg);
    default:
        return cp_diag_set(d, CP_ERR_DB, "%s: %s: %s", kb->path, what, msg);
    }
}

enum cp_status cp_kb_exec(struct cp_kb *kb, const char *sql, const char *what, struct cp_diag *d)
{
    if (sqlite3_exec(kb->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return cp_kb_db_error(kb, d, what);
    return CP_OK;
}

enum cp_status cp_kb_prepare(struct cp_kb *kb, const char *sql, sqlite3_stmt **st, const char *what,
                             struct cp_diag *d)
{
    *st = NULL;
    if (sqlite3_prepare_v2(kb->db, sql, -1, st, NULL) != SQLITE_OK) {
        sqlite3_finalize(*st);
        *st = NULL;
        return cp_kb_db_error(kb, d, what);
    }
    return CP_OK;
}

enum cp_status cp_kb_begin(struct cp_kb *kb, struct cp_diag *d)
{
    return cp_kb_exec(kb, "BEGIN IMMEDIATE", "starting a transaction", d);
}

enum cp_status cp_kb_commit(struct cp_kb *kb, struct cp_diag *d)
{
    enum cp_status st = cp_kb_exec(kb, "COMMIT", "committing", d);
    if (st != CP_OK)
        cp_kb_rollback(kb);
    return st;
}

void cp_kb_rollback(struct cp_kb *kb)
{
    if (!sqlite3_get_autocommit(kb->db))
        sqlite3_exec(kb->db, "ROLLBACK", NULL, NULL, NULL);
}

void cp_kb_now(char out[32])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

char *cp_kb_col_text(sqlite3_stmt *st, int col, bool empty_for_null, bool *oom)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    if (!t && !empty_for_null)
        return NULL;
    char *s = cp_strdup(t ? (const char *)t : "");
    if (!s)
        *oom = true;
    return s;
}

void cp_kb_bind_text(sqlite3_stmt *st, int idx, const char *s)
{
    if (s)
        sqlite3_bind_text(st, idx, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, idx);
}

double cp_kb_col_real(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col);
}

void cp_kb_bind_real(sqlite3_stmt *st, int idx, double v)
{
    if (isnan(v))
        sqlite3_bind_null(st, idx);
    else
        sqlite3_bind_double(st, idx, v);
}

enum cp_status cp_kb_encode_samples(struct cp_kb *kb, const uint64_t *v, size_t n, uint8_t **blob,
                                    int *bytes, struct cp_diag *d)
{
    *blob = NULL;
    *bytes = 0;
    size_t len;
    if (cp_mul_overflows(n, 8, &len) || len > INT_MAX)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: %zu samples are too many to store", kb->path, n);
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

enum cp_status cp_kb_decode_samples(struct cp_kb *kb, sqlite3_stmt *st, int col, size_t n,
                                    const char *what, uint64_t **out, struct cp_diag *d)
{
    *out = NULL;
    const uint8_t *p = sqlite3_column_blob(st, col);
    size_t bytes = (size_t)sqlite3_column_bytes(st, col);
    size_t want = 0;
    if (cp_mul_overflows(n, 8, &want) || bytes != want || (n > 0 && !p))
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: %s is damaged: its samples take %zu bytes, expected %zu for %zu "
                           "samples",
                           kb->path, what, bytes, want, n);
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

/* ---- names ----------------------------------------------------------------- */

static enum cp_status check_name(const char *kind, const char *s, size_t max, struct cp_diag *d)
{
    if (!s || !*s)
        return cp_diag_set(d, CP_ERR_INVALID, "the %s name is empty", kind);
    size_t len = strlen(s);
    if (len > max)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "the %s name '%.40s...' is %zu bytes long (at most %zu)", kind, s, len,
                           max);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "the %s name has a control character (byte 0x%02x at offset %zu); "
                               "use printable characters",
                               kind, c, i);
    }
    return CP_OK;
}

enum cp_status cp_kb_check_service(const char *service, struct cp_diag *d)
{
    return check_name("service", service, CP_KB_MAX_SERVICE, d);
}

enum cp_status cp_kb_check_tag(const char *tag, struct cp_diag *d)
{
    enum cp_status st = check_name("tag", tag, CP_KB_MAX_TAG, d);
    if (st == CP_OK && strcmp(tag, "latest") == 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "'latest' cannot be a tag: it names a service's most recent baseline");
    return st;
}

/* ---- where the file lives -------------------------------------------------- */

enum cp_status cp_kb_default_path(char **out, struct cp_diag *d)
{
    *out = NULL;
    const char *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    struct cp_buf b;
    cp_buf_init(&b);
    /* The XDG spec: a relative XDG_DATA_HOME is invalid and ignored. */
    if (xdg && xdg[0] == '/')
        cp_buf_printf(&b, "%s/cannprof/kb.sqlite", xdg);
    else if (home && *home)
        cp_buf_printf(&b, "%s/.local/share/cannprof/kb.sqlite", home);
    else
        return cp_diag_set(d, CP_ERR_INTERNAL,
                           "no place for the knowledge base: neither XDG_DATA_HOME (absolute) nor "
                           "HOME is set; pass --kb FILE");
    if (cp_buf_status(&b) != CP_OK) {
        cp_buf_release(&b);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for the knowledge base path");
    }
    *out = cp_buf_steal(&b);
    return CP_OK;
}

/* mkdir -p of the folder that holds `path`. */
static enum cp_status make_parent_dirs(const char *path, mode_t mode, struct cp_diag *d)
{
    char *dir = cp_path_dirname(path);
    if (!dir)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    enum cp_status st = CP_OK;
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        goto out;
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(dir, mode) != 0 && errno != EEXIST) {
            st = cp_diag_set(d, CP_ERR_INTERNAL,
                             "%s: cannot create the folder %s for the knowledge base: %s", path,
                             dir, strerror(errno));
            goto out;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        st = cp_diag_set(d, CP_ERR_INTERNAL, "%s: %s is not a folder", path, dir);
out:
    free(dir);
    return st;
}

static const char SQLITE_MAGIC[16] = "SQLite format 3";

/* Before SQLite touches the file: what is there must be nothing, an empty
 * file, or a SQLite database, so "not a knowledge base" names the real
 * problem and a stray file is never turned into a database. */
static enum cp_status check_file_kind(const char *path, struct cp_diag *d)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return CP_OK; /* make_parent_dirs says what is in the way */
        return cp_diag_set(d, CP_ERR_INTERNAL, "%s: cannot open the knowledge base: %s", path,
                           strerror(errno));
    }
    if (S_ISDIR(sb.st_mode))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s is a directory; give the knowledge base file (e.g. %s/kb.sqlite)",
                           path, path);
    if (sb.st_size == 0)
        return CP_OK;
    FILE *f = fopen(path, "rb");
    if (!f)
        return cp_diag_set(d, CP_ERR_INTERNAL, "%s: cannot open the knowledge base: %s", path,
                           strerror(errno));
    char head[sizeof SQLITE_MAGIC];
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got != sizeof head || memcmp(head, SQLITE_MAGIC, sizeof head) != 0)
        return cp_diag_set(d, CP_ERR_INVALID, "%s is not a SQLite file, so not a knowledge base",
                           path);
    return CP_OK;
}

/* ---- opening --------------------------------------------------------------- */

static enum cp_status query_int(struct cp_kb *kb, const char *sql, int64_t *out, struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(kb, sql, &st, "reading the database header", d);
    if (ret != CP_OK)
        return ret;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else if (rc == SQLITE_DONE)
        *out = 0;
    else
        ret = cp_kb_db_error(kb, d, "reading the database header");
    sqlite3_finalize(st);
    return ret;
}

/* Whether the open database is a knowledge base we can use. OUT: *version
 * (0 for a new, empty database). */
static enum cp_status check_identity(struct cp_kb *kb, int64_t *version, struct cp_diag *d)
{
    int64_t app_id = 0, n_objects = 0;
    enum cp_status st;
    *version = 0;
    if ((st = query_int(kb, "PRAGMA application_id", &app_id, d)) != CP_OK ||
        (st = query_int(kb, "PRAGMA user_version", version, d)) != CP_OK ||
        (st = query_int(kb, "SELECT count(*) FROM sqlite_master", &n_objects, d)) != CP_OK)
        return st;
    uint32_t id = (uint32_t)app_id;
    if (id == CP_KB_APPLICATION_ID) {
        if (*version > CP_KB_SCHEMA_VERSION)
            return cp_diag_set(d, CP_ERR_VERSION,
                               "%s: knowledge base schema version %lld is newer than this "
                               "cannprof (%s) reads (version %d); upgrade cannprof",
                               kb->path, (long long)*version, CP_VERSION_STRING,
                               CP_KB_SCHEMA_VERSION);
        return CP_OK;
    }
    if (id == CP_TRACE_APPLICATION_ID)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s is a cannprof trace store, not a knowledge base (a trace goes to "
                           "--trace; the knowledge base is kb.sqlite)",
                           kb->path);
    if (id == 0 && n_objects == 0) {
        *version = 0; /* a new or empty database */
        return CP_OK;
    }
    return cp_diag_set(d, CP_ERR_INVALID,
                       "%s is a SQLite database but not a cannprof knowledge base "
                       "(application_id 0x%08x, expected 0x%08x); it was left untouched",
                       kb->path, (unsigned)id, (unsigned)CP_KB_APPLICATION_ID);
}

/* Migrations run with foreign keys off (SQLite cannot switch them inside
 * a transaction, and rebuilding a table drops it first): check what the
 * migration leaves before it commits. */
static enum cp_status check_references(struct cp_kb *kb, const char *what, struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(kb, "PRAGMA foreign_key_check", &st, what, d);
    if (ret != CP_OK)
        return ret;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        ret = cp_diag_set(
            d, CP_ERR_INTERNAL, "%s: %s: row %lld of table '%s' refers to a missing row of '%s'",
            kb->path, what, (long long)sqlite3_column_int64(st, 1),
            (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 2));
    else if (rc != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, what);
    sqlite3_finalize(st);
    return ret;
}

/* Turn foreign keys on or off for this connection and make sure it took:
 * a SQLite built without them answers nothing, and the references would
 * silently go unchecked. Outside a transaction only (SQLite ignores it
 * inside one). */
static enum cp_status set_foreign_keys(struct cp_kb *kb, bool on, struct cp_diag *d)
{
    enum cp_status st =
        cp_kb_exec(kb, on ? "PRAGMA foreign_keys = ON" : "PRAGMA foreign_keys = OFF",
                   "setting foreign keys", d);
    int64_t v = -1;
    if (st == CP_OK && (st = query_int(kb, "PRAGMA foreign_keys", &v, d)) == CP_OK &&
        v != (on ? 1 : 0))
        st = cp_diag_set(d, CP_ERR_INTERNAL,
                         "%s: this SQLite (%s) cannot enforce foreign keys, which the knowledge "
                         "base relies on",
                         kb->path, sqlite3_libversion());
    return st;
}

static enum cp_status apply_migration(struct cp_kb *kb, const struct kb_migration *m,
                                      struct cp_diag *d)
{
    enum cp_status st = cp_kb_begin(kb, d);
    if (st != CP_OK)
        return st;
    /* Another process may have migrated (or claimed) the file while we
     * looked: decide again under the write lock. */
    int64_t version = 0;
    if ((st = check_identity(kb, &version, d)) != CP_OK)
        goto out_rollback;
    if (version >= m->version)
        return cp_kb_commit(kb, d);
    if (version != m->version - 1) {
        st = cp_diag_set(d, CP_ERR_INTERNAL, "%s: cannot migrate from schema version %lld to %d",
                         kb->path, (long long)version, m->version);
        goto out_rollback;
    }
    char what[160];
    snprintf(what, sizeof what, "migrating to schema version %d (%s)", m->version, m->what);
    if ((st = cp_kb_exec(kb, m->sql, what, d)) != CP_OK ||
        (st = check_references(kb, what, d)) != CP_OK)
        goto out_rollback;
    char now[32];
    cp_kb_now(now);
    char sql[512];
    snprintf(sql, sizeof sql,
             "PRAGMA application_id = %d; PRAGMA user_version = %d;"
             "INSERT INTO schema_history(version, applied_at, tool_version) "
             "VALUES (%d, '%s', '%s');"
             "INSERT INTO meta(key, value) VALUES ('schema_version', '%d') "
             "ON CONFLICT(key) DO UPDATE SET value = excluded.value;"
             "INSERT OR IGNORE INTO meta(key, value) VALUES ('created_by', 'cannprof %s'), "
             "('created_at', '%s');",
             (int)CP_KB_APPLICATION_ID, m->version, m->version, now, CP_VERSION_STRING, m->version,
             CP_VERSION_STRING, now);
    if ((st = cp_kb_exec(kb, sql, what, d)) != CP_OK)
        goto out_rollback;
    return cp_kb_commit(kb, d);
out_rollback:
    cp_kb_rollback(kb);
    return st;
}

/* check_identity at open time, in one read transaction: the header fields
 * and the table count must come from the same state of the file, or a
 * process that creates the schema in between makes a new file look
 * foreign. */
static enum cp_status read_identity(struct cp_kb *kb, int64_t *version, struct cp_diag *d)
{
    enum cp_status st = cp_kb_exec(kb, "BEGIN", "reading the database header", d);
    if (st != CP_OK)
        return st;
    if ((st = check_identity(kb, version, d)) != CP_OK) {
        cp_kb_rollback(kb);
        return st;
    }
    return cp_kb_commit(kb, d);
}

/* Put the file in WAL mode (persistent: done once per file): readers and
 * one writer share it without blocking each other. Switching needs the
 * file to ourselves for a moment, and SQLite reports SQLITE_BUSY for it
 * without consulting the busy handler when another connection holds a
 * lock, so wait here the way the busy timeout would. */
static enum cp_status use_wal(struct cp_kb *kb, struct cp_diag *d)
{
    uint64_t deadline = cp_clock_ns() + (uint64_t)CP_KB_BUSY_TIMEOUT_MS * 1000000u;
    for (;;) {
        sqlite3_stmt *st = NULL;
        enum cp_status ret =
            cp_kb_prepare(kb, "PRAGMA journal_mode = WAL", &st, "switching to WAL", d);
        if (ret != CP_OK)
            return ret;
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc == SQLITE_ROW || rc == SQLITE_DONE)
            return CP_OK; /* a file system without WAL support answers "delete": fine */
        if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || cp_clock_ns() > deadline)
            return cp_kb_db_error(kb, d, "switching to WAL");
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

enum cp_status cp_kb_open(const char *path, struct cp_kb **out, struct cp_diag *d)
{
    return cp_kb_open_at_version(path, CP_KB_SCHEMA_VERSION, out, d);
}

enum cp_status cp_kb_open_at_version(const char *path, int version_cap, struct cp_kb **out,
                                     struct cp_diag *d)
{
    *out = NULL;
    char *owned = NULL;
    enum cp_status st;
    mode_t dir_mode = 0777; /* the umask decides, as for any file the user names */
    if (!path) {
        if ((st = cp_kb_default_path(&owned, d)) != CP_OK)
            return st;
        path = owned;
        dir_mode = 0700; /* the XDG spec's mode for the folders it describes */
    }
    if (!*path)
        return cp_diag_set(d, CP_ERR_USAGE, "knowledge base: empty path");
    struct cp_kb *kb = NULL;
    if ((st = check_file_kind(path, d)) != CP_OK ||
        (st = make_parent_dirs(path, dir_mode, d)) != CP_OK)
        goto out_free;
    kb = calloc(1, sizeof *kb);
    if (!kb || !(kb->path = cp_strdup(path))) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
        goto out_free;
    }
    if (sqlite3_open_v2(path, &kb->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        st = cp_diag_set(d, kb->db ? CP_ERR_DB : CP_ERR_NOMEM,
                         "%s: cannot open the knowledge base: %s", path,
                         kb->db ? sqlite3_errmsg(kb->db) : "out of memory");
        goto out_free;
    }
    sqlite3_extended_result_codes(kb->db, 0);
    sqlite3_busy_timeout(kb->db, CP_KB_BUSY_TIMEOUT_MS);
    int64_t version = 0;
    if ((st = read_identity(kb, &version, d)) != CP_OK)
        goto out_free;
    /* Only now that the file is known to be ours (or new) may we change its
     * journal mode. */
    if ((st = use_wal(kb, d)) != CP_OK ||
        (st = cp_kb_exec(kb, "PRAGMA synchronous = NORMAL", "setting synchronous", d)) != CP_OK)
        goto out_free;
    if ((st = set_foreign_keys(kb, false, d)) != CP_OK)
        goto out_free;
    for (size_t i = 0; i < N_MIGRATIONS && version < CP_KB_SCHEMA_VERSION; i++)
        if (MIGRATIONS[i].version > version && MIGRATIONS[i].version <= version_cap &&
            (st = apply_migration(kb, &MIGRATIONS[i], d)) != CP_OK)
            goto out_free;
    /* Every connection enforces the references from here on. */
    if ((st = set_foreign_keys(kb, true, d)) != CP_OK)
        goto out_free;
    free(owned);
    *out = kb;
    return CP_OK;
out_free:
    cp_kb_close(kb);
    free(owned);
    return st;
}

void cp_kb_close(struct cp_kb *kb)
{
    if (!kb)
        return;
    sqlite3_close(kb->db); /* statements are always finalized by their users */
    free(kb->path);
    free(kb);
}

const char *cp_kb_path(const struct cp_kb *kb)
{
    return kb->path;
}

void *cp_kb_db(struct cp_kb *kb)
{
    return kb->db;
}
