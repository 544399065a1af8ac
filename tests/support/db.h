/* Test support: trace stores, knowledge bases and SQLite files as the tests
 * set them up and look into them: a store opened with a run begun, a
 * knowledge base opened, one value from a query, SQL run on a raw
 * connection as another program would.
 *
 * As everywhere in tests/support (see cli.h), no Criterion: a helper that
 * fails prints why (the path, the SQL, the diag or SQLite's message) to
 * stderr and returns NULL or false; the test asserts on that. */
#ifndef CP_TEST_DB_H
#define CP_TEST_DB_H

#include "knowledge/kb.h"
#include "trace/trace.h"

#include <sqlite3.h>

#include <stdbool.h>
#include <stdint.h>

/* Open (creating it when missing) the trace store at PATH and, when `info`
 * is not NULL, begin a run described by it. OUT: *run (may be NULL) the
 * run's id. Returns the store (close with cp_trace_store_close), or NULL. */
struct cp_trace_store *cp_t_trace_store(const char *path, const struct cp_trace_run_info *info,
                                        int64_t *run);

/* The knowledge base at PATH, opened (created when missing) with
 * cp_kb_open; close with cp_kb_close. NULL when it cannot be. */
struct cp_kb *cp_t_kb(const char *path);

/* The integer in the first column of the first row of `sql` on `db`. False
 * when the SQL does not prepare or returns no row. */
bool cp_t_sql_int(sqlite3 *db, const char *sql, int64_t *out);

/* The text in the first column of the first row of `sql` on `db`: *out a
 * heap copy (caller frees), NULL for SQL NULL. False when the SQL does not
 * prepare or returns no row (*out NULL). */
bool cp_t_sql_text(sqlite3 *db, const char *sql, char **out);

/* Run `sql` (any number of statements) on the SQLite file PATH through a
 * connection of its own, as another program would. */
bool cp_t_sql_exec(const char *path, const char *sql);

#endif
