/* Tuning sessions, their candidates and the raw samples of each
 * measurement (knowledge/kb_tuning.h; tables `sessions`, `candidates`,
 * `measurements` in docs/kb-schema.md).
 *
 * Each call is one short write transaction, so two tuners sharing a file
 * interleave row by row; the busy timeout makes either wait for the other. */
#include "knowledge/kb_internal.h"
#include "knowledge/kb_tuning.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- sessions -------------------------------------------------------------- */

/* 32 hex digits unique across machines: random bytes when the system has
 * them, mixed with the time, the process and the key. */
static void make_uid(const char *key, char out[33])
{
    struct {
        unsigned char random[16];
        uint64_t ns;
        struct timespec wall;
        long pid;
    } seed;
    memset(&seed, 0, sizeof seed);
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(seed.random, 1, sizeof seed.random, f) != sizeof seed.random)
            memset(seed.random, 0, sizeof seed.random);
        fclose(f);
    }
    seed.ns = cp_clock_ns();
    clock_gettime(CLOCK_REALTIME, &seed.wall);
    seed.pid = (long)getpid();
    struct cp_hasher *h = cp_hasher_create();
    if (!h) {
        cp_hash128_hex(&seed, sizeof seed, out);
        return;
    }
    cp_hasher_update(h, &seed, sizeof seed);
    if (key)
        cp_hasher_update(h, key, strlen(key));
    cp_hasher_hex(h, out);
    cp_hasher_free(h);
}

static void bind_id_or_null(sqlite3_stmt *st, int idx, int64_t id)
{
    if (id > 0)
        sqlite3_bind_int64(st, idx, id);
    else
        sqlite3_bind_null(st, idx);
}

enum cp_status cp_kb_session_begin(struct cp_kb *kb, const struct cp_kb_session *s, int64_t *id,
                                   struct cp_diag *d)
{
    *id = 0;
    if (!s->key || !*s->key)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: a session needs a key", kb->path);
    char now[32], uid[33];
    cp_kb_now(now);
    if (s->uid && *s->uid)
        snprintf(uid, sizeof uid, "%s", s->uid);
    else
        make_uid(s->key, uid);
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_begin(kb, d);
    if (ret != CP_OK)
        return ret;
    ret = cp_kb_prepare(kb,
                        "INSERT INTO sessions(uid, key, model_id, hw_id, model_path, target, "
                        "constraints, status, created_at, updated_at, baseline_config, "
                        "best_config, best_candidate_id, budget, evaluations, "
                        "baseline_median_ns, best_median_ns, out_dir, stop_reason) VALUES "
                        "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
                        "?16, ?17, ?18)",
                        &st, "starting a session", d);
    if (ret != CP_OK)
        goto out;
    sqlite3_bind_text(st, 1, uid, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, s->key, -1, SQLITE_TRANSIENT);
    bind_id_or_null(st, 3, s->model_id);
    bind_id_or_null(st, 4, s->hw_id);
    cp_kb_bind_text(st, 5, s->model_path);
    cp_kb_bind_text(st, 6, s->target);
    cp_kb_bind_text(st, 7, s->constraints);
    sqlite3_bind_text(st, 8, s->status && *s->status ? s->status : "running", -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 9, now, -1, SQLITE_TRANSIENT);
    cp_kb_bind_text(st, 10, s->baseline_config_json);
    cp_kb_bind_text(st, 11, s->best_config_json);
    bind_id_or_null(st, 12, s->best_candidate_id);
    sqlite3_bind_int(st, 13, s->budget);
    sqlite3_bind_int(st, 14, s->evaluations);
    cp_kb_bind_real(st, 15, s->baseline_median_ns);
    cp_kb_bind_real(st, 16, s->best_median_ns);
    cp_kb_bind_text(st, 17, s->out_dir);
    cp_kb_bind_text(st, 18, s->stop_reason);
    if (sqlite3_step(st) != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "starting a session");
        goto out;
    }
    *id = sqlite3_last_insert_rowid(kb->db);
    sqlite3_finalize(st);
    st = NULL;
    return cp_kb_commit(kb, d);
out:
    sqlite3_finalize(st);
    cp_kb_rollback(kb);
    return ret;
}

#define SESSION_COLS                                                                               \
    "s.id, s.uid, s.key, s.model_id, s.hw_id, s.model_path, s.target, s.constraints, s.status, "   \
    "s.created_at, s.updated_at, s.baseline_config, s.best_config, s.best_candidate_id, "          \
    "s.budget, s.evaluations, s.baseline_median_ns, s.best_median_ns, s.out_dir, "                 \
    "s.stop_reason, m.name, h.signature FROM sessions s LEFT JOIN models m ON m.id = s.model_id "  \
    "LEFT JOIN hardware h ON h.id = s.hw_id "

static enum cp_status read_session(struct cp_kb *kb, sqlite3_stmt *st, struct cp_kb_session *s,
                                   struct cp_diag *d)
{
    memset(s, 0, sizeof *s);
    bool oom = false;
    s->id = sqlite3_column_int64(st, 0);
    s->uid = cp_kb_col_text(st, 1, true, &oom);
    s->key = cp_kb_col_text(st, 2, true, &oom);
    s->model_id = sqlite3_column_int64(st, 3);
    s->hw_id = sqlite3_column_int64(st, 4);
    s->model_path = cp_kb_col_text(st, 5, false, &oom);
    s->target = cp_kb_col_text(st, 6, false, &oom);
    s->constraints = cp_kb_col_text(st, 7, false, &oom);
    s->status = cp_kb_col_text(st, 8, true, &oom);
    s->created_at = cp_kb_col_text(st, 9, true, &oom);
    s->updated_at = cp_kb_col_text(st, 10, true, &oom);
    s->baseline_config_json = cp_kb_col_text(st, 11, false, &oom);
    s->best_config_json = cp_kb_col_text(st, 12, false, &oom);
    s->best_candidate_id = sqlite3_column_int64(st, 13);
    s->budget = sqlite3_column_int(st, 14);
    s->evaluations = sqlite3_column_int(st, 15);
    s->baseline_median_ns = cp_kb_col_real(st, 16);
    s->best_median_ns = cp_kb_col_real(st, 17);
    s->out_dir = cp_kb_col_text(st, 18, false, &oom);
    s->stop_reason = cp_kb_col_text(st, 19, false, &oom);
    s->model_name = cp_kb_col_text(st, 20, true, &oom);
    s->hw_signature = cp_kb_col_text(st, 21, true, &oom);
    if (oom) {
        cp_kb_session_release(s);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading a session", kb->path);
    }
    return CP_OK;
}

void cp_kb_session_release(struct cp_kb_session *s)
{
    if (!s)
        return;
    free(s->uid);
    free(s->key);
    free(s->model_path);
    free(s->target);
    free(s->constraints);
    free(s->status);
    free(s->created_at);
    free(s->updated_at);
    free(s->baseline_config_json);
    free(s->best_config_json);
    free(s->out_dir);
    free(s->stop_reason);
    free(s->model_name);
    free(s->hw_signature);
    memset(s, 0, sizeof *s);
    s->baseline_median_ns = s->best_median_ns = NAN;
}

void cp_kb_session_list_free(struct cp_kb_session *s, size_t n)
{
    if (!s)
        return;
    for (size_t i = 0; i < n; i++)
        cp_kb_session_release(&s[i]);
    free(s);
}

/* One session selected by `sql` (bound to text or id). OUT: *found. */
static enum cp_status select_one(struct cp_kb *kb, const char *sql, const char *text, int64_t id,
                                 struct cp_kb_session *out, bool *found, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    *found = false;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(kb, sql, &st, "reading a session", d);
    if (ret != CP_OK)
        return ret;
    if (text)
        sqlite3_bind_text(st, 1, text, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        ret = read_session(kb, st, out, d);
        *found = ret == CP_OK;
    } else if (rc != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "reading a session");
    }
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_kb_session_find(struct cp_kb *kb, const char *key, struct cp_kb_session *out,
                                  bool *found, struct cp_diag *d)
{
    if (!key)
        key = "";
    return select_one(kb, "SELECT " SESSION_COLS "WHERE s.key = ?1 ORDER BY s.id DESC LIMIT 1", key,
                      0, out, found, d);
}

enum cp_status cp_kb_session_get(struct cp_kb *kb, int64_t id, struct cp_kb_session *out,
                                 struct cp_diag *d)
{
    bool found = false;
    enum cp_status st =
        select_one(kb, "SELECT " SESSION_COLS "WHERE s.id = ?1", NULL, id, out, &found, d);
    if (st == CP_OK && !found)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: no tuning session %lld (`cannprof kb list` shows them)", kb->path,
                           (long long)id);
    return st;
}

enum cp_status cp_kb_session_update(struct cp_kb *kb, const struct cp_kb_session *s,
                                    struct cp_diag *d)
{
    char now[32];
    cp_kb_now(now);
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_begin(kb, d);
    if (ret != CP_OK)
        return ret;
    ret = cp_kb_prepare(kb,
                        "UPDATE sessions SET status = coalesce(?2, status), best_config = ?3, "
                        "best_candidate_id = ?4, best_median_ns = ?5, baseline_median_ns = ?6, "
                        "baseline_config = coalesce(?7, baseline_config), evaluations = ?8, "
                        "stop_reason = ?9, out_dir = coalesce(?10, out_dir), updated_at = ?11 "
                        "WHERE id = ?1",
                        &st, "updating a session", d);
    if (ret != CP_OK)
        goto out;
    sqlite3_bind_int64(st, 1, s->id);
    cp_kb_bind_text(st, 2, s->status);
    cp_kb_bind_text(st, 3, s->best_config_json);
    bind_id_or_null(st, 4, s->best_candidate_id);
    cp_kb_bind_real(st, 5, s->best_median_ns);
    cp_kb_bind_real(st, 6, s->baseline_median_ns);
    cp_kb_bind_text(st, 7, s->baseline_config_json);
    sqlite3_bind_int(st, 8, s->evaluations);
    cp_kb_bind_text(st, 9, s->stop_reason);
    cp_kb_bind_text(st, 10, s->out_dir);
    sqlite3_bind_text(st, 11, now, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "updating a session");
        goto out;
    }
    if (sqlite3_changes(kb->db) != 1) {
        ret = cp_diag_set(d, CP_ERR_INVALID, "%s: no tuning session %lld to update", kb->path,
                          (long long)s->id);
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;
    return cp_kb_commit(kb, d);
out:
    sqlite3_finalize(st);
    cp_kb_rollback(kb);
    return ret;
}

enum cp_status cp_kb_session_list(struct cp_kb *kb, struct cp_kb_session **out, size_t *n,
                                  struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        cp_kb_prepare(kb, "SELECT " SESSION_COLS "ORDER BY s.id", &st, "listing sessions", d);
    if (ret != CP_OK)
        return ret;
    struct cp_kb_session *v = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            struct cp_kb_session *nv = cp_realloc_array(v, ncap, sizeof *nv);
            if (!nv) {
                ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory listing sessions", kb->path);
                goto out;
            }
            v = nv;
            cap = ncap;
        }
        if ((ret = read_session(kb, st, &v[len], d)) != CP_OK)
            goto out;
        len++;
    }
    if (rc != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "listing sessions");
        goto out;
    }
    sqlite3_finalize(st);
    *out = v;
    *n = len;
    return CP_OK;
out:
    sqlite3_finalize(st);
    cp_kb_session_list_free(v, len);
    return ret;
}

/* ---- candidates ------------------------------------------------------------ */

static const char *const STEP_STATUS[CP_STEP_STATUS_COUNT] = {
    [CP_STEP_BASELINE] = "baseline",
    [CP_STEP_ACCEPTED] = "accepted",
    [CP_STEP_REJECTED] = "rejected",
    [CP_STEP_FAILED] = "failed",
};

const char *cp_step_status_name(enum cp_step_status s)
{
    return (unsigned)s < CP_STEP_STATUS_COUNT ? STEP_STATUS[s] : "?";
}

bool cp_step_status_parse(const char *name, enum cp_step_status *out)
{
    for (int i = 0; name && i < CP_STEP_STATUS_COUNT; i++)
        if (strcmp(name, STEP_STATUS[i]) == 0) {
            *out = (enum cp_step_status)i;
            return true;
        }
    return false;
}

static enum cp_status check_candidate(struct cp_kb *kb, const struct cp_kb_candidate *c,
                                      struct cp_diag *d)
{
    if (c->session_id <= 0)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: a candidate needs a session", kb->path);
    if ((unsigned)c->status >= CP_STEP_STATUS_COUNT)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: candidate status %d is none of the known ones",
                           kb->path, (int)c->status);
    return CP_OK;
}

/* Insert the candidate row; inside the caller's write transaction. */
static enum cp_status insert_candidate(struct cp_kb *kb, const struct cp_kb_candidate *c,
                                       int64_t *id, struct cp_diag *d)
{
    char now[32];
    cp_kb_now(now);
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        cp_kb_prepare(kb,
                      "INSERT INTO candidates(session_id, step, delta, source, config_json, "
                      "config_id, om_path, trace_path, status, reason, expected_gain, "
                      "measured_gain, ci_lo, ci_hi, p, precision_loss, memory_bytes, median_ns, "
                      "throughput, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                      "?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
                      &st, "recording a candidate", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, c->session_id);
    sqlite3_bind_int(st, 2, c->step);
    sqlite3_bind_text(st, 3, c->delta ? c->delta : "", -1, SQLITE_TRANSIENT);
    cp_kb_bind_text(st, 4, c->source);
    cp_kb_bind_text(st, 5, c->config_json);
    cp_kb_bind_text(st, 6, c->config_id);
    cp_kb_bind_text(st, 7, c->om_path);
    cp_kb_bind_text(st, 8, c->trace_path);
    sqlite3_bind_text(st, 9, cp_step_status_name(c->status), -1, SQLITE_STATIC);
    cp_kb_bind_text(st, 10, c->reason);
    cp_kb_bind_real(st, 11, c->expected_gain);
    cp_kb_bind_real(st, 12, c->measured_gain);
    cp_kb_bind_real(st, 13, c->ci_lo);
    cp_kb_bind_real(st, 14, c->ci_hi);
    cp_kb_bind_real(st, 15, c->p);
    cp_kb_bind_real(st, 16, c->precision_loss);
    sqlite3_bind_int64(st, 17, (sqlite3_int64)c->memory_bytes);
    cp_kb_bind_real(st, 18, c->median_ns);
    cp_kb_bind_real(st, 19, c->throughput);
    sqlite3_bind_text(st, 20, c->created_at && *c->created_at ? c->created_at : now, -1,
                      SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_DONE)
        *id = sqlite3_last_insert_rowid(kb->db);
    else
        ret = cp_kb_db_error(kb, d, "recording a candidate");
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_kb_candidate_add(struct cp_kb *kb, const struct cp_kb_candidate *c, int64_t *id,
                                   struct cp_diag *d)
{
    *id = 0;
    enum cp_status ret = check_candidate(kb, c, d);
    if (ret != CP_OK || (ret = cp_kb_begin(kb, d)) != CP_OK)
        return ret;
    int64_t got = 0;
    if ((ret = insert_candidate(kb, c, &got, d)) != CP_OK) {
        cp_kb_rollback(kb);
        return ret;
    }
    if ((ret = cp_kb_commit(kb, d)) == CP_OK)
        *id = got;
    return ret;
}

static void candidate_release(struct cp_kb_candidate *c)
{
    free(c->delta);
    free(c->source);
    free(c->config_json);
    free(c->config_id);
    free(c->om_path);
    free(c->trace_path);
    free(c->reason);
    free(c->created_at);
    memset(c, 0, sizeof *c);
}

void cp_kb_candidate_list_free(struct cp_kb_candidate *c, size_t n)
{
    if (!c)
        return;
    for (size_t i = 0; i < n; i++)
        candidate_release(&c[i]);
    free(c);
}

/* One candidate row; a status the table does not know is corrupt. */
static enum cp_status read_candidate(struct cp_kb *kb, sqlite3_stmt *st, struct cp_kb_candidate *c,
                                     struct cp_diag *d)
{
    memset(c, 0, sizeof *c);
    bool oom = false;
    c->id = sqlite3_column_int64(st, 0);
    c->session_id = sqlite3_column_int64(st, 1);
    c->step = sqlite3_column_int(st, 2);
    c->delta = cp_kb_col_text(st, 3, true, &oom);
    c->source = cp_kb_col_text(st, 4, false, &oom);
    c->config_json = cp_kb_col_text(st, 5, false, &oom);
    c->config_id = cp_kb_col_text(st, 6, false, &oom);
    c->om_path = cp_kb_col_text(st, 7, false, &oom);
    c->trace_path = cp_kb_col_text(st, 8, false, &oom);
    const char *status = (const char *)sqlite3_column_text(st, 9);
    if (!cp_step_status_parse(status, &c->status)) {
        enum cp_status ret = cp_diag_set(
            d, CP_ERR_CORRUPT, "%s: candidate %lld has status '%.40s', none of the known ones",
            kb->path, (long long)c->id, status ? status : "(null)");
        memset(c, 0, sizeof *c);
        return ret;
    }
    c->reason = cp_kb_col_text(st, 10, false, &oom);
    c->expected_gain = cp_kb_col_real(st, 11);
    c->measured_gain = cp_kb_col_real(st, 12);
    c->ci_lo = cp_kb_col_real(st, 13);
    c->ci_hi = cp_kb_col_real(st, 14);
    c->p = cp_kb_col_real(st, 15);
    c->precision_loss = cp_kb_col_real(st, 16);
    c->memory_bytes = (uint64_t)sqlite3_column_int64(st, 17);
    c->median_ns = cp_kb_col_real(st, 18);
    c->throughput = cp_kb_col_real(st, 19);
    c->created_at = cp_kb_col_text(st, 20, true, &oom);
    if (oom) {
        candidate_release(c);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory listing candidates", kb->path);
    }
    return CP_OK;
}

enum cp_status cp_kb_candidate_list(struct cp_kb *kb, int64_t session_id,
                                    struct cp_kb_candidate **out, size_t *n, struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(
        kb,
        "SELECT id, session_id, step, delta, source, config_json, config_id, om_path, "
        "trace_path, status, reason, expected_gain, measured_gain, ci_lo, ci_hi, p, "
        "precision_loss, memory_bytes, median_ns, throughput, created_at FROM candidates "
        "WHERE session_id = ?1 ORDER BY step, id",
        &st, "listing candidates", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, session_id);
    struct cp_kb_candidate *v = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct cp_kb_candidate *nv = cp_realloc_array(v, ncap, sizeof *nv);
            if (!nv)
                goto out_nomem;
            v = nv;
            cap = ncap;
        }
        if ((ret = read_candidate(kb, st, &v[len], d)) != CP_OK)
            goto out;
        len++;
    }
    if (rc != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "listing candidates");
        goto out;
    }
    sqlite3_finalize(st);
    *out = v;
    *n = len;
    return CP_OK;
out_nomem:
    ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory listing candidates", kb->path);
out:
    sqlite3_finalize(st);
    cp_kb_candidate_list_free(v, len);
    return ret;
}

/* ---- measurements ---------------------------------------------------------- */

static enum cp_status check_role(struct cp_kb *kb, const char *role, struct cp_diag *d)
{
    if (!role || !*role || strlen(role) > 32)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: a measurement role is a short name such as \"a\" or \"b\"",
                           kb->path);
    return CP_OK;
}

/* Insert (or replace) one side's samples, already encoded; inside the
 * caller's write transaction. */
static enum cp_status insert_measurement(struct cp_kb *kb, int64_t candidate_id, const char *role,
                                         const uint8_t *blob, int bytes, size_t n,
                                         struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        cp_kb_prepare(kb,
                      "INSERT OR REPLACE INTO measurements(candidate_id, role, n, samples_ns) "
                      "VALUES (?1, ?2, ?3, ?4)",
                      &st, "recording a measurement", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, candidate_id);
    sqlite3_bind_text(st, 2, role, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)n);
    sqlite3_bind_blob(st, 4, blob, bytes, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "recording a measurement");
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_kb_measurement_add(struct cp_kb *kb, int64_t candidate_id, const char *role,
                                     const uint64_t *ns, size_t n, struct cp_diag *d)
{
    enum cp_status ret = check_role(kb, role, d);
    if (ret != CP_OK)
        return ret;
    uint8_t *blob = NULL;
    int bytes = 0;
    if ((ret = cp_kb_encode_samples(kb, ns, n, &blob, &bytes, d)) != CP_OK)
        return ret;
    if ((ret = cp_kb_begin(kb, d)) == CP_OK) {
        if ((ret = insert_measurement(kb, candidate_id, role, blob, bytes, n, d)) == CP_OK)
            ret = cp_kb_commit(kb, d);
        else
            cp_kb_rollback(kb);
    }
    free(blob);
    return ret;
}

/* ---- one tuning step ---------------------------------------------------------- */

enum cp_status cp_kb_step_record(struct cp_kb *kb, const struct cp_kb_step *s,
                                 int64_t *candidate_id, struct cp_diag *d)
{
    *candidate_id = 0;
    const struct cp_kb_candidate *c = s->candidate;
    if (!c)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: a tuning step needs its candidate", kb->path);
    enum cp_status ret = check_candidate(kb, c, d);
    if (ret != CP_OK)
        return ret;
    if (s->n > 0 && (!s->a_ns || !s->b_ns))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: %zu samples of a step without their values",
                           kb->path, s->n);
    if (s->record_strategy &&
        (ret = cp_kb_strategy_check(kb, s->model_id, s->hw_id, c->delta, d)) != CP_OK)
        return ret;
    /* Everything that can fail without the database is done before the
     * transaction starts. */
    uint8_t *a = NULL, *b = NULL;
    int a_bytes = 0, b_bytes = 0;
    if (s->n > 0 && ((ret = cp_kb_encode_samples(kb, s->a_ns, s->n, &a, &a_bytes, d)) != CP_OK ||
                     (ret = cp_kb_encode_samples(kb, s->b_ns, s->n, &b, &b_bytes, d)) != CP_OK))
        goto out_free;
    if ((ret = cp_kb_begin(kb, d)) != CP_OK)
        goto out_free;
    int64_t id = 0;
    if ((ret = insert_candidate(kb, c, &id, d)) != CP_OK ||
        (s->n > 0 && ((ret = insert_measurement(kb, id, "a", a, a_bytes, s->n, d)) != CP_OK ||
                      (ret = insert_measurement(kb, id, "b", b, b_bytes, s->n, d)) != CP_OK)) ||
        (s->record_strategy &&
         (ret = cp_kb_strategy_insert(kb, s->model_id, s->hw_id, c->session_id, c->delta,
                                      c->measured_gain, s->held, d)) != CP_OK)) {
        cp_kb_rollback(kb);
        goto out_free;
    }
    if ((ret = cp_kb_commit(kb, d)) == CP_OK)
        *candidate_id = id;
out_free:
    free(a);
    free(b);
    return ret;
}

enum cp_status cp_kb_measurement_get(struct cp_kb *kb, int64_t candidate_id, const char *role,
                                     uint64_t **ns, size_t *n, struct cp_diag *d)
{
    *ns = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(
        kb, "SELECT n, samples_ns FROM measurements WHERE candidate_id = ?1 AND role = ?2", &st,
        "reading a measurement", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, candidate_id);
    sqlite3_bind_text(st, 2, role ? role : "", -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        sqlite3_int64 count = sqlite3_column_int64(st, 0);
        char what[96];
        snprintf(what, sizeof what, "measurement '%s' of candidate %lld", role,
                 (long long)candidate_id);
        if (count < 0)
            ret = cp_diag_set(d, CP_ERR_CORRUPT, "%s: %s is damaged: count %lld", kb->path, what,
                              (long long)count);
        else if ((ret = cp_kb_decode_samples(kb, st, 1, (size_t)count, what, ns, d)) == CP_OK)
            *n = (size_t)count;
    } else if (rc == SQLITE_DONE) {
        ret = cp_diag_set(d, CP_ERR_INVALID, "%s: candidate %lld has no measurement '%s'", kb->path,
                          (long long)candidate_id, role ? role : "");
    } else {
        ret = cp_kb_db_error(kb, d, "reading a measurement");
    }
    sqlite3_finalize(st);
    return ret;
}
