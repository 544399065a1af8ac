/* Validations: every `cannprof validate` against a baseline leaves a record
 * (when, which baseline, the figures, the verdict, the alert), so a
 * service's history can be read back. Schema: docs/kb-schema.md. */
#include "knowledge/kb_internal.h"

#include <stdlib.h>
#include <string.h>

enum cp_status cp_kb_record_validation(struct cp_kb *kb, const struct cp_kb_validation *v,
                                       int64_t *id, struct cp_diag *d)
{
    if (id)
        *id = -1;
    if (!v)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: no validation to record", kb->path);
    enum cp_status ret = cp_kb_check_service(v->service, d);
    if (ret != CP_OK)
        return ret;
    if (!v->verdict || !*v->verdict)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: service '%s': a validation needs a verdict",
                           kb->path, v->service);
    sqlite3_stmt *st = NULL;
    if ((ret = cp_kb_prepare(kb,
                             "INSERT INTO validations(created_at, service, baseline_id, "
                             "baseline_tag, trace_path, verdict, figures_json, exit_code, "
                             "alert_attempted, alert_delivered, alert_error) VALUES (?1, ?2, ?3, "
                             "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                             &st, "recording a validation", d)) != CP_OK)
        return ret;
    char now[32];
    cp_kb_now(now);
    sqlite3_bind_text(st, 1, now, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, v->service, -1, SQLITE_TRANSIENT);
    if (v->baseline_id > 0)
        sqlite3_bind_int64(st, 3, v->baseline_id);
    else
        sqlite3_bind_null(st, 3);
    cp_kb_bind_text(st, 4, v->baseline_tag);
    cp_kb_bind_text(st, 5, v->trace_path);
    sqlite3_bind_text(st, 6, v->verdict, -1, SQLITE_TRANSIENT);
    cp_kb_bind_text(st, 7, v->figures_json);
    sqlite3_bind_int(st, 8, v->exit_code);
    sqlite3_bind_int(st, 9, v->alert_attempted ? 1 : 0);
    sqlite3_bind_int(st, 10, v->alert_delivered ? 1 : 0);
    cp_kb_bind_text(st, 11, v->alert_error);
    /* One statement in autocommit mode takes the write lock directly, so the
     * busy timeout covers it without an explicit transaction. */
    if (sqlite3_step(st) != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "recording a validation");
    else if (id)
        *id = sqlite3_last_insert_rowid(kb->db);
    sqlite3_finalize(st);
    return ret;
}

static void release_one(struct cp_kb_validation *v)
{
    free((char *)v->created_at);
    free((char *)v->service);
    free((char *)v->baseline_tag);
    free((char *)v->trace_path);
    free((char *)v->verdict);
    free((char *)v->figures_json);
    free((char *)v->alert_error);
}

void cp_kb_validation_list_free(struct cp_kb_validation *v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        release_one(&v[i]);
    free(v);
}

static enum cp_status read_row(struct cp_kb *kb, sqlite3_stmt *st, struct cp_kb_validation *v,
                               struct cp_diag *d)
{
    memset(v, 0, sizeof *v);
    bool oom = false;
    v->id = sqlite3_column_int64(st, 0);
    v->created_at = cp_kb_col_text(st, 1, true, &oom);
    v->service = cp_kb_col_text(st, 2, true, &oom);
    v->baseline_id = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 3);
    v->baseline_tag = cp_kb_col_text(st, 4, false, &oom);
    v->trace_path = cp_kb_col_text(st, 5, false, &oom);
    v->verdict = cp_kb_col_text(st, 6, true, &oom);
    v->figures_json = cp_kb_col_text(st, 7, false, &oom);
    v->exit_code = sqlite3_column_int(st, 8);
    v->alert_attempted = sqlite3_column_int(st, 9) != 0;
    v->alert_delivered = sqlite3_column_int(st, 10) != 0;
    v->alert_error = cp_kb_col_text(st, 11, false, &oom);
    if (!oom)
        return CP_OK;
    release_one(v);
    memset(v, 0, sizeof *v);
    return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading validations", kb->path);
}

enum cp_status cp_kb_validation_list(struct cp_kb *kb, const char *service, size_t limit,
                                     struct cp_kb_validation **out, size_t *n, struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    enum cp_status ret = cp_kb_check_service(service, d);
    if (ret != CP_OK)
        return ret;
    sqlite3_stmt *st = NULL;
    if ((ret = cp_kb_prepare(kb,
                             "SELECT id, created_at, service, baseline_id, baseline_tag, "
                             "trace_path, verdict, figures_json, exit_code, alert_attempted, "
                             "alert_delivered, alert_error FROM validations WHERE service = ?1 "
                             "ORDER BY id DESC LIMIT ?2",
                             &st, "listing validations", d)) != CP_OK)
        return ret;
    sqlite3_bind_text(st, 1, service, -1, SQLITE_TRANSIENT);
    /* LIMIT -1 is SQLite's "no limit". */
    sqlite3_bind_int64(
        st, 2, limit == 0 || (uint64_t)limit > (uint64_t)INT64_MAX ? -1 : (sqlite3_int64)limit);
    struct cp_kb_validation *v = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct cp_kb_validation *g = cp_realloc_array(v, ncap, sizeof *g);
            if (!g) {
                ret =
                    cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory listing validations", kb->path);
                goto out_fail;
            }
            v = g;
            cap = ncap;
        }
        if ((ret = read_row(kb, st, &v[len], d)) != CP_OK)
            goto out_fail;
        len++;
    }
    if (rc != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "listing validations");
        goto out_fail;
    }
    sqlite3_finalize(st);
    *out = v;
    *n = len;
    return CP_OK;
out_fail:
    sqlite3_finalize(st);
    cp_kb_validation_list_free(v, len);
    return ret;
}
