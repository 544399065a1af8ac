/*
 * knowledge internals shared by the .c files of knowledge/. Not a public
 * header: other modules include knowledge/kb.h only.
 */
#ifndef CP_KNOWLEDGE_KB_INTERNAL_H
#define CP_KNOWLEDGE_KB_INTERNAL_H

#include "knowledge/kb.h"

#include <sqlite3.h>

struct cp_kb {
    sqlite3 *db;
    char *path; /* as opened; starts every error message */
};

/* Report the connection's last SQLite error as "<path>: <what>: <sqlite
 * message>" and return the matching status: CP_ERR_CORRUPT for a damaged
 * file, CP_ERR_INVALID for "not a database", CP_ERR_NOMEM, else CP_ERR_DB. */
enum cp_status cp_kb_db_error(struct cp_kb *kb, struct cp_diag *d, const char *what);

/* Run SQL without results (may hold several statements). */
enum cp_status cp_kb_exec(struct cp_kb *kb, const char *sql, const char *what, struct cp_diag *d);

/* Prepare one statement. OUT: *st (finalize it), NULL on failure. */
enum cp_status cp_kb_prepare(struct cp_kb *kb, const char *sql, sqlite3_stmt **st, const char *what,
                             struct cp_diag *d);

/* Write transactions: BEGIN IMMEDIATE takes the write lock at once, so the
 * busy timeout applies (a deferred transaction that upgrades from read to
 * write can fail with SQLITE_BUSY without waiting). Rollback never fails
 * the caller: it only undoes. */
enum cp_status cp_kb_begin(struct cp_kb *kb, struct cp_diag *d);
enum cp_status cp_kb_commit(struct cp_kb *kb, struct cp_diag *d);
void cp_kb_rollback(struct cp_kb *kb);

/* The current time as UTC "YYYY-MM-DDTHH:MM:SSZ" into out[32]. */
void cp_kb_now(char out[32]);

/* A column as a fresh string ("" for NULL when `empty_for_null`, else NULL).
 * *oom is set when a copy fails. */
char *cp_kb_col_text(sqlite3_stmt *st, int col, bool empty_for_null, bool *oom);

/* Bind a text or NULL. */
void cp_kb_bind_text(sqlite3_stmt *st, int idx, const char *s);

/* The message part for "not found": appends to `b` either "its baselines:
 * t1, t2" or "it has no baselines (services with baselines: a, b)". */
void cp_kb_describe_tags(struct cp_kb *kb, const char *service, struct cp_buf *b);

#endif
