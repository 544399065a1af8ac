/* Importing JSON Lines into the knowledge base (format and merge rules:
 * docs/kb-schema.md, "Sharing: JSON Lines"). The whole file is one
 * transaction: a bad line names path:line and nothing is imported. Every
 * record is matched by its natural key; a record already present is
 * skipped (a session is refreshed when the file's copy is newer), so
 * importing the same file twice adds nothing. */
#include "knowledge/kb_internal.h"
#include "knowledge/kb_tuning.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A session's best candidate, resolved once its candidates are in. */
struct fixup {
    int64_t session_id;
    int64_t step;
    char *delta;
};

struct imp {
    struct cp_kb *kb;
    const char *path;
    size_t line;
    size_t added;
    char now[32];
    struct fixup *fix;
    size_t n_fix, cap_fix;
};

/* "path:line: message". */
static enum cp_status bad(struct imp *im, struct cp_diag *d, enum cp_status st, const char *fmt,
                          ...) __attribute__((format(printf, 4, 5)));
static enum cp_status bad(struct imp *im, struct cp_diag *d, enum cp_status st, const char *fmt,
                          ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cp_diag_set(d, st, "%s:%zu: %s", im->path, im->line, msg);
}

static enum cp_status db_fail(struct imp *im, struct cp_diag *d)
{
    char what[1200];
    snprintf(what, sizeof what, "importing %s:%zu", im->path, im->line);
    return cp_kb_db_error(im->kb, d, what);
}

/* ---- fields ---------------------------------------------------------------- */

/* A string field; missing or null gives *out NULL (an error when required). */
static enum cp_status get_str(struct imp *im, json_t *o, const char *key, bool required,
                              const char **out, struct cp_diag *d)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return required ? bad(im, d, CP_ERR_INVALID, "'%s' is missing", key) : CP_OK;
    if (!json_is_string(v))
        return bad(im, d, CP_ERR_INVALID, "'%s' should be a string", key);
    *out = json_string_value(v);
    return CP_OK;
}

static enum cp_status get_int(struct imp *im, json_t *o, const char *key, bool required,
                              int64_t *out, bool *present, struct cp_diag *d)
{
    json_t *v = json_object_get(o, key);
    *out = 0;
    if (present)
        *present = false;
    if (!v || json_is_null(v))
        return required ? bad(im, d, CP_ERR_INVALID, "'%s' is missing", key) : CP_OK;
    if (json_is_boolean(v))
        *out = json_is_true(v);
    else if (json_is_integer(v))
        *out = (int64_t)json_integer_value(v);
    else
        return bad(im, d, CP_ERR_INVALID, "'%s' should be an integer", key);
    if (present)
        *present = true;
    return CP_OK;
}

/* An array of non-negative integers. OUT: *v (caller frees), *n. */
static enum cp_status get_samples(struct imp *im, json_t *a, const char *key, uint64_t **v,
                                  size_t *n, struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    if (!json_is_array(a))
        return bad(im, d, CP_ERR_INVALID, "'%s' should be an array of nanoseconds", key);
    size_t len = json_array_size(a);
    uint64_t *x = cp_calloc(len ? len : 1, sizeof *x);
    if (!x)
        return bad(im, d, CP_ERR_NOMEM, "out of memory for %zu samples", len);
    for (size_t i = 0; i < len; i++) {
        json_t *e = json_array_get(a, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0) {
            free(x);
            return bad(im, d, CP_ERR_INVALID,
                       "'%s' element %zu should be a non-negative integer (nanoseconds)", key, i);
        }
        x[i] = (uint64_t)json_integer_value(e);
    }
    *v = x;
    *n = len;
    return CP_OK;
}

/* ---- generic insert -------------------------------------------------------- */

/* A column filled from the key of the same name. kind: 't' text, 'i'
 * integer (booleans too), 'r' real, 's' sample array (BLOB). A missing or
 * null key binds `dflt` ("@now": the import time) when set, is an error
 * when `required`, else leaves the column to its default. */
struct colspec {
    const char *key;
    char kind;
    bool required;
    const char *dflt;
};

#define MAX_COLS 32

/* INSERT OR IGNORE one record into `table`: the columns of `cols` present
 * in `o`, plus extra integer columns (value <= 0: NULL). OUT: *added. */
static enum cp_status insert_row(struct imp *im, const char *table, const struct colspec *cols,
                                 size_t n_cols, json_t *o, const char *const *xcols,
                                 const int64_t *xvals, size_t n_x, bool *added, struct cp_diag *d)
{
    *added = false;
    struct cp_buf sql;
    cp_buf_init(&sql);
    const struct colspec *used[MAX_COLS];
    size_t n_used = 0;
    enum cp_status ret = CP_OK;
    for (size_t i = 0; i < n_cols && n_used < MAX_COLS; i++) {
        json_t *v = json_object_get(o, cols[i].key);
        if ((!v || json_is_null(v)) && !cols[i].dflt) {
            if (cols[i].required)
                return bad(im, d, CP_ERR_INVALID, "'%s' is missing", cols[i].key);
            continue;
        }
        used[n_used++] = &cols[i];
    }
    cp_buf_printf(&sql, "INSERT OR IGNORE INTO %s(", table);
    for (size_t i = 0; i < n_used; i++)
        cp_buf_printf(&sql, "%s%s", i ? ", " : "", used[i]->key);
    for (size_t i = 0; i < n_x; i++)
        cp_buf_printf(&sql, "%s%s", n_used + i ? ", " : "", xcols[i]);
    cp_buf_puts(&sql, ") VALUES (");
    for (size_t i = 0; i < n_used + n_x; i++)
        cp_buf_printf(&sql, "%s?%zu", i ? ", " : "", i + 1);
    cp_buf_putc(&sql, ')');
    sqlite3_stmt *st = NULL;
    if (cp_buf_status(&sql) != CP_OK) {
        ret = bad(im, d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (sqlite3_prepare_v2(im->kb->db, sql.data, -1, &st, NULL) != SQLITE_OK) {
        ret = db_fail(im, d);
        goto out;
    }
    for (size_t i = 0; i < n_used; i++) {
        const struct colspec *c = used[i];
        int idx = (int)i + 1;
        json_t *v = json_object_get(o, c->key);
        if (!v || json_is_null(v)) {
            sqlite3_bind_text(st, idx, strcmp(c->dflt, "@now") == 0 ? im->now : c->dflt, -1,
                              SQLITE_TRANSIENT);
            continue;
        }
        switch (c->kind) {
        case 't': {
            const char *s = NULL;
            if ((ret = get_str(im, o, c->key, false, &s, d)) != CP_OK)
                goto out;
            sqlite3_bind_text(st, idx, s, -1, SQLITE_TRANSIENT);
            break;
        }
        case 'i': {
            int64_t x = 0;
            if ((ret = get_int(im, o, c->key, false, &x, NULL, d)) != CP_OK)
                goto out;
            sqlite3_bind_int64(st, idx, x);
            break;
        }
        case 'r':
            if (!json_is_number(v)) {
                ret = bad(im, d, CP_ERR_INVALID, "'%s' should be a number", c->key);
                goto out;
            }
            sqlite3_bind_double(st, idx, json_number_value(v));
            break;
        default: { /* 's' */
            uint64_t *x = NULL;
            size_t n = 0;
            uint8_t *blob = NULL;
            int bytes = 0;
            if ((ret = get_samples(im, v, c->key, &x, &n, d)) != CP_OK)
                goto out;
            ret = cp_kb_encode_samples(im->kb, x, n, &blob, &bytes, d);
            free(x);
            if (ret != CP_OK)
                goto out;
            sqlite3_bind_blob(st, idx, blob, bytes, free);
            break;
        }
        }
    }
    for (size_t i = 0; i < n_x; i++) {
        if (xvals[i] > 0)
            sqlite3_bind_int64(st, (int)(n_used + i + 1), xvals[i]);
        else
            sqlite3_bind_null(st, (int)(n_used + i + 1));
    }
    if (sqlite3_step(st) != SQLITE_DONE) {
        ret = db_fail(im, d);
        goto out;
    }
    *added = sqlite3_changes(im->kb->db) == 1;
out:
    sqlite3_finalize(st);
    cp_buf_release(&sql);
    return ret;
}

/* The id selected by `sql` with text/integer parameters ("t"/"i" in
 * `types`, then the values). 0 when there is no row. */
static enum cp_status lookup(struct imp *im, const char *sql, int64_t *id, struct cp_diag *d,
                             const char *types, ...)
{
    *id = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(im->kb->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(im, d);
    va_list ap;
    va_start(ap, types);
    for (int i = 0; types[i]; i++) {
        if (types[i] == 't')
            cp_kb_bind_text(st, i + 1, va_arg(ap, const char *));
        else
            sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
    }
    va_end(ap);
    enum cp_status ret = CP_OK;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(st, 0);
    else if (rc != SQLITE_DONE)
        ret = db_fail(im, d);
    sqlite3_finalize(st);
    return ret;
}

/* ---- references ------------------------------------------------------------ */

static enum cp_status ref_model(struct imp *im, json_t *o, bool required, int64_t *id,
                                struct cp_diag *d)
{
    const char *sh = NULL, *src = NULL;
    enum cp_status st;
    *id = 0;
    if ((st = get_str(im, o, "model_structure_hash", required, &sh, d)) != CP_OK ||
        (st = get_str(im, o, "model_source_hash", false, &src, d)) != CP_OK || !sh)
        return st;
    if ((st = lookup(im, "SELECT id FROM models WHERE structure_hash = ?1 AND source_hash = ?2", id,
                     d, "tt", sh, src ? src : "")) != CP_OK)
        return st;
    if (*id == 0)
        return bad(im, d, CP_ERR_INVALID,
                   "refers to model %s (source %s), which is neither in the knowledge base nor "
                   "on an earlier line",
                   sh, src && *src ? src : "\"\"");
    return CP_OK;
}

static enum cp_status ref_hardware(struct imp *im, json_t *o, bool required, int64_t *id,
                                   struct cp_diag *d)
{
    const char *sig = NULL;
    enum cp_status st;
    *id = 0;
    if ((st = get_str(im, o, "hardware", required, &sig, d)) != CP_OK || !sig)
        return st;
    if ((st = lookup(im, "SELECT id FROM hardware WHERE signature = ?1", id, d, "t", sig)) != CP_OK)
        return st;
    if (*id == 0)
        return bad(im, d, CP_ERR_INVALID,
                   "refers to hardware %s, which is neither in the knowledge base nor on an "
                   "earlier line",
                   sig);
    return CP_OK;
}

static enum cp_status ref_session(struct imp *im, json_t *o, bool required, int64_t *id,
                                  struct cp_diag *d)
{
    const char *uid = NULL;
    enum cp_status st;
    *id = 0;
    if ((st = get_str(im, o, "session", required, &uid, d)) != CP_OK || !uid)
        return st;
    if ((st = lookup(im, "SELECT id FROM sessions WHERE uid = ?1", id, d, "t", uid)) != CP_OK)
        return st;
    if (*id == 0)
        return bad(im, d, CP_ERR_INVALID,
                   "refers to session %s, which is neither in the knowledge base nor on an "
                   "earlier line",
                   uid);
    return CP_OK;
}

/* The candidate (session, step, delta) of a measurement or a fixup. */
static enum cp_status ref_candidate(struct imp *im, json_t *o, int64_t *id, struct cp_diag *d)
{
    int64_t session = 0, step = 0;
    const char *delta = NULL;
    enum cp_status st;
    if ((st = ref_session(im, o, true, &session, d)) != CP_OK ||
        (st = get_int(im, o, "step", true, &step, NULL, d)) != CP_OK ||
        (st = get_str(im, o, "delta", false, &delta, d)) != CP_OK)
        return st;
    if ((st = lookup(im,
                     "SELECT id FROM candidates WHERE session_id = ?1 AND step = ?2 AND "
                     "delta = ?3 ORDER BY id LIMIT 1",
                     id, d, "iit", session, step, delta ? delta : "")) != CP_OK)
        return st;
    if (*id == 0)
        return bad(im, d, CP_ERR_INVALID,
                   "refers to candidate step %lld \"%s\" of its session, which is neither in "
                   "the knowledge base nor on an earlier line",
                   (long long)step, delta ? delta : "");
    return CP_OK;
}

/* ---- records --------------------------------------------------------------- */

static const struct colspec MODEL_COLS[] = {
    {"structure_hash", 't', true, NULL}, {"source_hash", 't', false, ""},
    {"name", 't', true, NULL},           {"model_class", 't', false, "other"},
    {"params", 'i', false, NULL},        {"flops", 'r', false, NULL},
    {"n_nodes", 'i', false, NULL},       {"op_histogram", 't', false, "{}"},
    {"inputs", 't', false, "[]"},        {"has_attention", 'i', false, NULL},
    {"has_conv", 'i', false, NULL},      {"has_layernorm", 'i', false, NULL},
    {"has_groupnorm", 'i', false, NULL}, {"has_batchnorm", 'i', false, NULL},
    {"has_gelu", 'i', false, NULL},      {"created_at", 't', false, "@now"},
    {"updated_at", 't', false, "@now"},
};

static const struct colspec HARDWARE_COLS[] = {
    {"signature", 't', true, NULL},     {"cpu_model", 't', false, NULL},
    {"isa", 't', false, NULL},          {"cores", 'i', false, NULL},
    {"soc_version", 't', false, NULL},  {"tool_version", 't', false, NULL},
    {"created_at", 't', false, "@now"},
};

static const struct colspec BASELINE_COLS[] = {
    {"service", 't', true, NULL},
    {"tag", 't', true, NULL},
    {"created_at", 't', false, "@now"},
    {"trace_path", 't', false, NULL},
    {"run_id", 'i', false, NULL},
    {"run_kind", 't', false, NULL},
    {"run_created_at", 't', false, NULL},
    {"model_path", 't', false, NULL},
    {"model_hash", 't', false, NULL},
    {"config_id", 't', false, NULL},
    {"batch", 'i', false, NULL},
    {"threads", 'i', false, NULL},
    {"n", 'i', true, NULL},
    {"latency_ns", 's', true, NULL},
    {"device_ns", 's', false, NULL},
    {"probe_ns", 's', false, NULL}, /* since schema version 3: absent in older exports */
    {"mean_ns", 'r', false, NULL},
    {"median_ns", 'r', false, NULL},
    {"p99_ns", 'r', false, NULL},
    {"weight_bytes", 'i', false, NULL},
    {"arena_bytes", 'i', false, NULL},
    {"peak_bytes", 'i', false, NULL},
    {"peak_rss_bytes", 'i', false, NULL},
    {"precision_loss", 'r', false, NULL},
};

static const struct colspec VALIDATION_COLS[] = {
    {"created_at", 't', false, "@now"},    {"service", 't', true, NULL},
    {"baseline_tag", 't', false, NULL},    {"trace_path", 't', false, NULL},
    {"verdict", 't', true, NULL},          {"figures_json", 't', false, NULL},
    {"exit_code", 'i', false, NULL},       {"alert_attempted", 'i', false, NULL},
    {"alert_delivered", 'i', false, NULL}, {"alert_error", 't', false, NULL},
};

static const struct colspec SESSION_COLS[] = {
    {"uid", 't', true, NULL},
    {"key", 't', true, NULL},
    {"model_path", 't', false, NULL},
    {"target", 't', false, NULL},
    {"constraints", 't', false, NULL},
    {"status", 't', false, "done"},
    {"created_at", 't', false, "@now"},
    {"updated_at", 't', false, "@now"},
    {"baseline_config", 't', false, NULL},
    {"best_config", 't', false, NULL},
    {"budget", 'i', false, NULL},
    {"evaluations", 'i', false, NULL},
    {"baseline_median_ns", 'r', false, NULL},
    {"best_median_ns", 'r', false, NULL},
    {"out_dir", 't', false, NULL},
    {"stop_reason", 't', false, NULL},
};

static const struct colspec CANDIDATE_COLS[] = {
    {"step", 'i', true, NULL},
    {"delta", 't', false, ""},
    {"source", 't', false, NULL},
    {"config_json", 't', false, NULL},
    {"config_id", 't', false, NULL},
    {"om_path", 't', false, NULL},
    {"trace_path", 't', false, NULL},
    {"status", 't', true, NULL},
    {"reason", 't', false, NULL},
    {"expected_gain", 'r', false, NULL},
    {"measured_gain", 'r', false, NULL},
    {"ci_lo", 'r', false, NULL},
    {"ci_hi", 'r', false, NULL},
    {"p", 'r', false, NULL},
    {"precision_loss", 'r', false, NULL},
    {"memory_bytes", 'i', false, NULL},
    {"median_ns", 'r', false, NULL},
    {"throughput", 'r', false, NULL},
    {"created_at", 't', false, "@now"},
};

static const struct colspec MEASUREMENT_COLS[] = {
    {"role", 't', true, NULL},
    {"n", 'i', true, NULL},
    {"samples_ns", 's', true, NULL},
};

static const struct colspec STRATEGY_COLS[] = {
    {"delta", 't', true, NULL},
    {"gain", 'r', false, NULL},
    {"held", 'i', true, NULL},
    {"created_at", 't', false, "@now"},
};

#define N(a) (sizeof a / sizeof a[0])

/* Whether array `key` has `n` elements (n from the record). */
static enum cp_status check_count(struct imp *im, json_t *o, const char *key, bool optional,
                                  struct cp_diag *d)
{
    int64_t n = 0;
    enum cp_status st = get_int(im, o, "n", true, &n, NULL, d);
    if (st != CP_OK)
        return st;
    json_t *a = json_object_get(o, key);
    if (optional && (!a || json_is_null(a)))
        return CP_OK;
    if (!json_is_array(a))
        return bad(im, d, CP_ERR_INVALID, "'%s' should be an array of nanoseconds", key);
    if (n < 0 || (size_t)n != json_array_size(a))
        return bad(im, d, CP_ERR_INVALID, "'n' is %lld but '%s' has %zu samples", (long long)n, key,
                   json_array_size(a));
    return CP_OK;
}

static enum cp_status import_baseline(struct imp *im, json_t *o, bool *added, struct cp_diag *d)
{
    const char *service = NULL, *tag = NULL;
    enum cp_status st;
    struct cp_diag nd;
    cp_diag_init(&nd);
    if ((st = get_str(im, o, "service", true, &service, d)) != CP_OK ||
        (st = get_str(im, o, "tag", true, &tag, d)) != CP_OK ||
        (st = check_count(im, o, "latency_ns", false, d)) != CP_OK ||
        (st = check_count(im, o, "device_ns", true, d)) != CP_OK ||
        (st = check_count(im, o, "probe_ns", true, d)) != CP_OK)
        return st;
    if (cp_kb_check_service(service, &nd) != CP_OK || cp_kb_check_tag(tag, &nd) != CP_OK)
        return bad(im, d, CP_ERR_INVALID, "%s", nd.msg);
    if ((st = insert_row(im, "baselines", BASELINE_COLS, N(BASELINE_COLS), o, NULL, NULL, 0, added,
                         d)) != CP_OK)
        return st;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(im->kb->db,
                           "INSERT OR IGNORE INTO services(name, created_at) VALUES (?1, ?2)", -1,
                           &s, NULL) != SQLITE_OK)
        return db_fail(im, d);
    sqlite3_bind_text(s, 1, service, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, im->now, -1, SQLITE_TRANSIENT);
    st = sqlite3_step(s) == SQLITE_DONE ? CP_OK : db_fail(im, d);
    sqlite3_finalize(s);
    return st;
}

static enum cp_status import_validation(struct imp *im, json_t *o, bool *added, struct cp_diag *d)
{
    const char *service = NULL, *created = NULL, *verdict = NULL, *tag = NULL, *trace = NULL;
    int64_t exit_code = 0, existing = 0, baseline = 0;
    enum cp_status st;
    *added = false;
    if ((st = get_str(im, o, "service", true, &service, d)) != CP_OK ||
        (st = get_str(im, o, "created_at", false, &created, d)) != CP_OK ||
        (st = get_str(im, o, "verdict", true, &verdict, d)) != CP_OK ||
        (st = get_str(im, o, "baseline_tag", false, &tag, d)) != CP_OK ||
        (st = get_str(im, o, "trace_path", false, &trace, d)) != CP_OK ||
        (st = get_int(im, o, "exit_code", false, &exit_code, NULL, d)) != CP_OK)
        return st;
    if (created && (st = lookup(im,
                                "SELECT id FROM validations WHERE service = ?1 AND created_at = "
                                "?2 AND verdict = ?3 AND baseline_tag IS ?4 AND trace_path IS ?5 "
                                "AND exit_code = ?6",
                                &existing, d, "ttttti", service, created, verdict, tag, trace,
                                exit_code)) != CP_OK)
        return st;
    if (existing)
        return CP_OK;
    if (tag && (st = lookup(im, "SELECT id FROM baselines WHERE service = ?1 AND tag = ?2",
                            &baseline, d, "tt", service, tag)) != CP_OK)
        return st;
    static const char *const x[] = {"baseline_id"};
    return insert_row(im, "validations", VALIDATION_COLS, N(VALIDATION_COLS), o, x, &baseline, 1,
                      added, d);
}

static enum cp_status add_fixup(struct imp *im, int64_t session, json_t *o, struct cp_diag *d)
{
    int64_t step = 0;
    bool present = false;
    const char *delta = NULL;
    enum cp_status st;
    if ((st = get_int(im, o, "best_step", false, &step, &present, d)) != CP_OK ||
        (st = get_str(im, o, "best_delta", false, &delta, d)) != CP_OK || !present)
        return st;
    if (im->n_fix == im->cap_fix) {
        size_t ncap = im->cap_fix ? im->cap_fix * 2 : 8;
        struct fixup *nv = cp_realloc_array(im->fix, ncap, sizeof *nv);
        if (!nv)
            return bad(im, d, CP_ERR_NOMEM, "out of memory");
        im->fix = nv;
        im->cap_fix = ncap;
    }
    struct fixup *f = &im->fix[im->n_fix];
    f->session_id = session;
    f->step = step;
    if (!(f->delta = cp_strdup(delta ? delta : "")))
        return bad(im, d, CP_ERR_NOMEM, "out of memory");
    im->n_fix++;
    return CP_OK;
}

/* A session already present is refreshed when the file's copy was updated
 * later (a running session exported again once done). */
static enum cp_status refresh_session(struct imp *im, int64_t id, json_t *o, bool *added,
                                      struct cp_diag *d)
{
    const char *updated = NULL;
    enum cp_status st = get_str(im, o, "updated_at", false, &updated, d);
    int64_t newer = 0;
    if (st != CP_OK || !updated)
        return st;
    if ((st = lookup(im, "SELECT id FROM sessions WHERE id = ?1 AND updated_at < ?2", &newer, d,
                     "it", id, updated)) != CP_OK ||
        !newer)
        return st;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(im->kb->db, "DELETE FROM sessions WHERE id = ?1", -1, &s, NULL) !=
        SQLITE_OK)
        return db_fail(im, d);
    sqlite3_bind_int64(s, 1, id);
    st = sqlite3_step(s) == SQLITE_DONE ? CP_OK : db_fail(im, d);
    sqlite3_finalize(s);
    if (st != CP_OK)
        return st;
    /* Re-insert under the same id, so candidates keep pointing at it. */
    int64_t model = 0, hw = 0;
    if ((st = ref_model(im, o, false, &model, d)) != CP_OK ||
        (st = ref_hardware(im, o, false, &hw, d)) != CP_OK)
        return st;
    static const char *const x[] = {"id", "model_id", "hw_id"};
    const int64_t xv[] = {id, model, hw};
    if ((st = insert_row(im, "sessions", SESSION_COLS, N(SESSION_COLS), o, x, xv, 3, added, d)) !=
        CP_OK)
        return st;
    return add_fixup(im, id, o, d);
}

static enum cp_status import_session(struct imp *im, json_t *o, bool *added, struct cp_diag *d)
{
    const char *uid = NULL;
    int64_t existing = 0, model = 0, hw = 0;
    enum cp_status st;
    *added = false;
    if ((st = get_str(im, o, "uid", true, &uid, d)) != CP_OK ||
        (st = lookup(im, "SELECT id FROM sessions WHERE uid = ?1", &existing, d, "t", uid)) !=
            CP_OK)
        return st;
    if (existing)
        return refresh_session(im, existing, o, added, d);
    if ((st = ref_model(im, o, false, &model, d)) != CP_OK ||
        (st = ref_hardware(im, o, false, &hw, d)) != CP_OK)
        return st;
    static const char *const x[] = {"model_id", "hw_id"};
    const int64_t xv[] = {model, hw};
    if ((st = insert_row(im, "sessions", SESSION_COLS, N(SESSION_COLS), o, x, xv, 2, added, d)) !=
        CP_OK)
        return st;
    return add_fixup(im, sqlite3_last_insert_rowid(im->kb->db), o, d);
}

static enum cp_status import_candidate(struct imp *im, json_t *o, bool *added, struct cp_diag *d)
{
    int64_t session = 0, step = 0, existing = 0;
    const char *delta = NULL, *status = NULL;
    enum cp_step_status known;
    enum cp_status st;
    *added = false;
    if ((st = get_str(im, o, "status", true, &status, d)) != CP_OK)
        return st;
    if (!cp_step_status_parse(status, &known))
        return bad(im, d, CP_ERR_INVALID,
                   "candidate status '%.40s' is none of baseline, accepted, rejected, failed",
                   status);
    if ((st = ref_session(im, o, true, &session, d)) != CP_OK ||
        (st = get_int(im, o, "step", true, &step, NULL, d)) != CP_OK ||
        (st = get_str(im, o, "delta", false, &delta, d)) != CP_OK ||
        (st = lookup(im,
                     "SELECT id FROM candidates WHERE session_id = ?1 AND step = ?2 AND "
                     "delta = ?3",
                     &existing, d, "iit", session, step, delta ? delta : "")) != CP_OK)
        return st;
    if (existing)
        return CP_OK;
    static const char *const x[] = {"session_id"};
    return insert_row(im, "candidates", CANDIDATE_COLS, N(CANDIDATE_COLS), o, x, &session, 1, added,
                      d);
}

static enum cp_status import_measurement(struct imp *im, json_t *o, bool *added, struct cp_diag *d)
{
    int64_t cand = 0;
    enum cp_status st;
    *added = false;
    if ((st = ref_candidate(im, o, &cand, d)) != CP_OK ||
        (st = check_count(im, o, "samples_ns", false, d)) != CP_OK)
        return st;
    static const char *const x[] = {"candidate_id"};
    return insert_row(im, "measurements", MEASUREMENT_COLS, N(MEASUREMENT_COLS), o, x, &cand, 1,
                      added, d);
}

static enum cp_status import_strategy(struct imp *im, json_t *o, bool *added, struct cp_diag *d)
{
    int64_t model = 0, hw = 0, session = 0, existing = 0, held = 0;
    const char *delta = NULL, *created = NULL;
    enum cp_status st;
    *added = false;
    if ((st = ref_model(im, o, true, &model, d)) != CP_OK ||
        (st = ref_hardware(im, o, true, &hw, d)) != CP_OK ||
        (st = ref_session(im, o, false, &session, d)) != CP_OK ||
        (st = get_str(im, o, "delta", true, &delta, d)) != CP_OK ||
        (st = get_str(im, o, "created_at", false, &created, d)) != CP_OK ||
        (st = get_int(im, o, "held", true, &held, NULL, d)) != CP_OK)
        return st;
    /* With a session, UNIQUE (session_id, delta) dedups; without one, look. */
    if (!session && created &&
        (st = lookup(im,
                     "SELECT id FROM strategies WHERE session_id IS NULL AND model_id = ?1 AND "
                     "hw_id = ?2 AND delta = ?3 AND created_at = ?4 AND held = ?5",
                     &existing, d, "iitti", model, hw, delta, created, held)) != CP_OK)
        return st;
    if (existing)
        return CP_OK;
    static const char *const x[] = {"model_id", "hw_id", "session_id"};
    const int64_t xv[] = {model, hw, session};
    return insert_row(im, "strategies", STRATEGY_COLS, N(STRATEGY_COLS), o, x, xv, 3, added, d);
}

static enum cp_status import_line(struct imp *im, json_t *o, struct cp_diag *d)
{
    const char *type = NULL;
    enum cp_status st = get_str(im, o, "type", true, &type, d);
    if (st != CP_OK)
        return st;
    bool added = false;
    if (strcmp(type, "model") == 0) {
        st = insert_row(im, "models", MODEL_COLS, N(MODEL_COLS), o, NULL, NULL, 0, &added, d);
    } else if (strcmp(type, "hardware") == 0) {
        st = insert_row(im, "hardware", HARDWARE_COLS, N(HARDWARE_COLS), o, NULL, NULL, 0, &added,
                        d);
    } else if (strcmp(type, "baseline") == 0) {
        st = import_baseline(im, o, &added, d);
    } else if (strcmp(type, "validation") == 0) {
        st = import_validation(im, o, &added, d);
    } else if (strcmp(type, "session") == 0) {
        st = import_session(im, o, &added, d);
    } else if (strcmp(type, "candidate") == 0) {
        st = import_candidate(im, o, &added, d);
    } else if (strcmp(type, "measurement") == 0) {
        st = import_measurement(im, o, &added, d);
    } else if (strcmp(type, "strategy") == 0) {
        st = import_strategy(im, o, &added, d);
    } else {
        return bad(im, d, CP_ERR_INVALID,
                   "unknown record type '%s' (expected model, hardware, baseline, validation, "
                   "session, candidate, measurement or strategy)",
                   type);
    }
    if (st == CP_OK && added)
        im->added++;
    return st;
}

/* Point each imported session at its best candidate, now that they are in. */
static enum cp_status apply_fixups(struct imp *im, struct cp_diag *d)
{
    for (size_t i = 0; i < im->n_fix; i++) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(im->kb->db,
                               "UPDATE sessions SET best_candidate_id = (SELECT id FROM "
                               "candidates WHERE session_id = ?1 AND step = ?2 AND delta = ?3 "
                               "ORDER BY id LIMIT 1) WHERE id = ?1",
                               -1, &s, NULL) != SQLITE_OK)
            return db_fail(im, d);
        sqlite3_bind_int64(s, 1, im->fix[i].session_id);
        sqlite3_bind_int64(s, 2, im->fix[i].step);
        sqlite3_bind_text(s, 3, im->fix[i].delta, -1, SQLITE_TRANSIENT);
        int rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE)
            return db_fail(im, d);
    }
    return CP_OK;
}

enum cp_status cp_kb_import_jsonl(struct cp_kb *kb, const char *path, size_t *imported,
                                  struct cp_diag *d)
{
    if (imported)
        *imported = 0;
    uint8_t *data = NULL;
    size_t len = 0;
    enum cp_status st = cp_file_read(path, &data, &len, d);
    if (st != CP_OK)
        return st;
    struct imp im = {.kb = kb, .path = path};
    cp_kb_now(im.now);
    if ((st = cp_kb_begin(kb, d)) != CP_OK)
        goto out;
    char *p = (char *)data, *end = (char *)data + len;
    while (p < end && st == CP_OK) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *eol = nl ? nl : end;
        im.line++;
        size_t n = (size_t)(eol - p);
        while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        size_t lead = 0;
        while (lead < n && (p[lead] == ' ' || p[lead] == '\t'))
            lead++;
        if (lead < n) {
            json_error_t err;
            json_t *o = json_loadb(p + lead, n - lead, 0, &err);
            if (!o)
                st = bad(&im, d, CP_ERR_PARSE, "not JSON: %s (column %d)", err.text,
                         err.column + (int)lead);
            else if (!json_is_object(o))
                st = bad(&im, d, CP_ERR_INVALID, "each line must be a JSON object");
            else
                st = import_line(&im, o, d);
            json_decref(o);
        }
        p = eol + 1;
    }
    if (st == CP_OK)
        st = apply_fixups(&im, d);
    if (st == CP_OK)
        st = cp_kb_commit(kb, d);
    else
        cp_kb_rollback(kb);
    if (st == CP_OK && imported)
        *imported = im.added;
out:
    for (size_t i = 0; i < im.n_fix; i++)
        free(im.fix[i].delta);
    free(im.fix);
    free(data);
    return st;
}
