/*
 * knowledge internals shared by the .c files of knowledge/. Not a public
 * header: other modules include knowledge/kb.h only.
 */
#ifndef CP_KNOWLEDGE_KB_INTERNAL_H
#define CP_KNOWLEDGE_KB_INTERNAL_H

#include "knowledge/kb.h"
#include "knowledge/kb_tuning.h"

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

/* A gain fraction as "+12.3%" ("—" when unknown): the card's form
 * (kb_card.c). */
void cp_kb_fmt_pct(char out[32], double frac);

/* A column as a fresh string ("" for NULL when `empty_for_null`, else NULL).
 * *oom is set when a copy fails. */
char *cp_kb_col_text(sqlite3_stmt *st, int col, bool empty_for_null, bool *oom);

/* Bind a text or NULL. */
void cp_kb_bind_text(sqlite3_stmt *st, int idx, const char *s);

/* The message part for "not found": appends to `b` either "its baselines:
 * t1, t2" or "it has no baselines (services with baselines: a, b)". */
void cp_kb_describe_tags(struct cp_kb *kb, const char *service, struct cp_buf *b);

/* cp_kb_open, but applying only the migrations up to schema version
 * `version_cap`: for tests that need a knowledge base of an older version
 * (to check that opening it with cp_kb_open migrates it without losing
 * data). Not for production use: the handle's tables are those of
 * `version_cap`. */
enum cp_status cp_kb_open_at_version(const char *path, int version_cap, struct cp_kb **kb,
                                     struct cp_diag *d);

/* Samples as BLOBs of little-endian 64-bit integers, 8 bytes each (shared
 * by baselines and measurements). encode: OUT: *blob (caller frees),
 * *bytes; CP_ERR_INVALID when too many. decode: the column must hold
 * exactly n*8 bytes, else CP_ERR_CORRUPT with `what` in the message;
 * OUT: *out (caller frees). */
enum cp_status cp_kb_encode_samples(struct cp_kb *kb, const uint64_t *v, size_t n, uint8_t **blob,
                                    int *bytes, struct cp_diag *d);
enum cp_status cp_kb_decode_samples(struct cp_kb *kb, sqlite3_stmt *st, int col, size_t n,
                                    const char *what, uint64_t **out, struct cp_diag *d);

/* A REAL column, NaN for NULL; bind a double, NULL for NaN. */
double cp_kb_col_real(sqlite3_stmt *st, int col);
void cp_kb_bind_real(sqlite3_stmt *st, int idx, double v);

/* A strategy outcome: the checks cp_kb_strategy_record makes on its
 * arguments, and the insert it runs (inside the caller's write
 * transaction; recording the same (session, delta) again replaces it). */
enum cp_status cp_kb_strategy_check(struct cp_kb *kb, int64_t model_id, int64_t hw_id,
                                    const char *delta, struct cp_diag *d);
enum cp_status cp_kb_strategy_insert(struct cp_kb *kb, int64_t model_id, int64_t hw_id,
                                     int64_t session_id, const char *delta, double gain, bool held,
                                     struct cp_diag *d);

/* The columns of a model row, in the order cp_kb_model_read_row reads them
 * (prefix with a table alias by hand when joining). */
#define CP_KB_MODEL_COLS                                                                           \
    "structure_hash, source_hash, name, model_class, params, flops, n_nodes, op_histogram, "       \
    "inputs, has_attention, has_conv, has_layernorm, has_groupnorm, has_batchnorm, has_gelu"
#define CP_KB_MODEL_NCOLS 15

/* Read CP_KB_MODEL_COLS starting at column col0 into *out (zeroed first;
 * released on failure). */
enum cp_status cp_kb_model_read_row(struct cp_kb *kb, sqlite3_stmt *st, int col0,
                                    struct cp_kb_fingerprint *out, struct cp_diag *d);

#endif
