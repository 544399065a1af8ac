/* Test support: trace stores and SQLite files (see db.h). */
#include "support/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cp_trace_store *cp_t_trace_store(const char *path, const struct cp_trace_run_info *info,
                                        int64_t *run)
{
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t id = 0;
    if (cp_trace_store_open(path, &s, &d) != CP_OK ||
        (info && cp_trace_store_begin_run(s, info, &id, &d) != CP_OK)) {
        fprintf(stderr, "cp_t_trace_store: %s: %s\n", path, d.msg);
        cp_trace_store_close(s);
        return NULL;
    }
    if (run)
        *run = id;
    return s;
}

struct cp_kb *cp_t_kb(const char *path)
{
    struct cp_kb *kb = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_kb_open(path, &kb, &d) != CP_OK) {
        fprintf(stderr, "cp_t_kb: %s: %s\n", path, d.msg);
        return NULL;
    }
    return kb;
}

/* Prepare `sql` and step to its first row; NULL (statement finalized) when
 * either fails. */
static sqlite3_stmt *first_row(sqlite3 *db, const char *sql, const char *who)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: %s: %s\n", who, sql, sqlite3_errmsg(db));
        sqlite3_finalize(st);
        return NULL;
    }
    if (sqlite3_step(st) != SQLITE_ROW) {
        fprintf(stderr, "%s: %s returned no row\n", who, sql);
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

bool cp_t_sql_int(sqlite3 *db, const char *sql, int64_t *out)
{
    *out = 0;
    sqlite3_stmt *st = first_row(db, sql, "cp_t_sql_int");
    if (!st)
        return false;
    *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return true;
}

bool cp_t_sql_text(sqlite3 *db, const char *sql, char **out)
{
    *out = NULL;
    sqlite3_stmt *st = first_row(db, sql, "cp_t_sql_text");
    if (!st)
        return false;
    const char *t = (const char *)sqlite3_column_text(st, 0);
    bool ok = true;
    if (t) {
        *out = strdup(t);
        ok = *out != NULL;
    }
    sqlite3_finalize(st);
    return ok;
}

bool cp_t_sql_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    char *err = NULL;
    bool ok = sqlite3_open(path, &db) == SQLITE_OK &&
              sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK;
    if (!ok)
        fprintf(stderr, "cp_t_sql_exec: %s: %s: %s\n", path, sql,
                err  ? err
                : db ? sqlite3_errmsg(db)
                     : "cannot open");
    sqlite3_free(err);
    sqlite3_close(db);
    return ok;
}
