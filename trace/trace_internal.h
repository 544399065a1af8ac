/*
 * trace internals shared by the recorder, the store and the exporters.
 * Not a public header: only the .c files of trace/ include it.
 */
#ifndef CP_TRACE_INTERNAL_H
#define CP_TRACE_INTERNAL_H

#include "trace/query.h"
#include "trace/trace.h"
#include "core/hashmap.h"
#include "core/json.h"

#include <sqlite3.h>

/* ---- string table --------------------------------------------------------
 *
 * Text -> dense id (0, 1, 2, ...) with an open-addressing hash index. The
 * recorder interns event names with it; the folded exporter interns stack
 * paths. Ids never change while the table lives. */
struct cp_strtab {
    char **strs; /* id -> owned, NUL-terminated text */
    size_t n, cap;
    struct cp_strmap ids; /* text (the owned copies) -> id */
};

void cp_strtab_init(struct cp_strtab *t);
void cp_strtab_release(struct cp_strtab *t);
/* The id of `len` bytes at `s` (they need no NUL), adding a copy when new.
 * -1 on OOM or when the table is full (INT32_MAX ids). */
int32_t cp_strtab_intern(struct cp_strtab *t, const char *s, size_t len);
/* The id of a text already in the table, or -1. */
int32_t cp_strtab_find(const struct cp_strtab *t, const char *s, size_t len);
static inline const char *cp_strtab_get(const struct cp_strtab *t, int32_t id)
{
    return id >= 0 && (size_t)id < t->n ? t->strs[id] : NULL;
}

/* ---- store helpers -------------------------------------------------------- */

struct cp_trace_store {
    sqlite3 *db;
    char *path; /* as given to open; starts every error message */
    bool readonly;
    /* The next event seq of run seq_run, once this handle has added events
     * to it: max(seq) is a scan of the run's events, and an importer adds
     * them in thousands of batches. */
    bool seq_known;
    int64_t seq_run, seq_next;
};

/* Whether the store has the pipeline tables (store_nodes.c). */
bool cp_trace_store_has_pipeline_tables(struct cp_trace_store *s);

/* Run SQL without results (may hold several statements). */
enum cp_status cp_trace_store_exec(struct cp_trace_store *s, const char *sql, const char *what,
                                   struct cp_diag *d);

/* Report the connection's last SQLite error as "<path>: <what>: <sqlite
 * message>" and return the matching status (CP_ERR_DB mostly; CP_ERR_CORRUPT,
 * CP_ERR_INVALID for "not a database", CP_ERR_IO for disk errors). */
enum cp_status cp_trace_store_db_error(struct cp_trace_store *s, struct cp_diag *d,
                                       const char *what);

/* ---- readers (query*.c) ----------------------------------------------------
 *
 * One question asked of one run: the run resolved, and the words every
 * error message of the question uses. */
struct cp_trace_q {
    struct cp_trace_store *s;
    int64_t run;
    char what[112]; /* "reading samples of run 3" */
};

/* Resolve run_id (< 0: the last run) and describe the question ("samples"
 * becomes "reading samples of run 3"). */
enum cp_status cp_trace_q_begin(struct cp_trace_q *q, struct cp_trace_store *s, int64_t run_id,
                                const char *what, struct cp_diag *d);
/* Prepare `sql` with the run bound to ?1. OUT: *st (caller finalizes), NULL
 * on failure. */
enum cp_status cp_trace_q_prepare(struct cp_trace_q *q, const char *sql, sqlite3_stmt **st,
                                  struct cp_diag *d);
/* Whether the store has table `name`: the optional ones read as empty when
 * missing. */
enum cp_status cp_trace_q_has_table(struct cp_trace_q *q, const char *name, bool *has,
                                    struct cp_diag *d);
/* The connection's last error, or out of memory, as the question's error. */
enum cp_status cp_trace_q_db_error(struct cp_trace_q *q, struct cp_diag *d);
enum cp_status cp_trace_q_nomem(struct cp_trace_q *q, struct cp_diag *d);
/* CP_ERR_INVALID unless `only` (may be NULL) is ascending without repeats. */
enum cp_status cp_trace_q_check_set(struct cp_trace_q *q, const struct cp_trace_iter_set *only,
                                    struct cp_diag *d);

/* ---- exporters ------------------------------------------------------------ */

/* A run's kernel, as the exporters need it. */
struct cp_trace_kinfo {
    int64_t idx;
    char *node;      /* never NULL ("?" when the store has none) */
    char *op_type;   /* never NULL */
    char *args;      /* when asked for: the Chrome args object as JSON text (core/json.h),
                        without the event's "iteration"; else NULL */
    size_t args_len; /* strlen(args) */
};

/* The kernels of run `run`, sorted by idx. with_args: also encode each
 * kernel's Chrome args (node, op_type, impl, origins, inputs, outputs,
 * flops, bytes). OUT: *k (free with cp_trace_kinfo_free), *n. */
enum cp_status cp_trace_kinfo_load(struct cp_trace_store *s, int64_t run, bool with_args,
                                   struct cp_trace_kinfo **k, size_t *n, struct cp_diag *d);
void cp_trace_kinfo_free(struct cp_trace_kinfo *k, size_t n);
/* The kernel with index idx, or NULL. */
/* Of n elements of `size` bytes, ascending by an int64_t idx that is their
 * first member (kernel tables), the one whose idx is `idx`; NULL when none. */
const void *cp_trace_find_idx(const void *base, size_t n, size_t size, int64_t idx);
const struct cp_trace_kinfo *cp_trace_kinfo_find(const struct cp_trace_kinfo *k, size_t n,
                                                 int64_t idx);

/* Append run `run` (already resolved: it exists) as Chrome trace-event JSON /
 * folded stacks to `out`. */
enum cp_status cp_trace_export_chrome(struct cp_trace_store *s, int64_t run, struct cp_buf *out,
                                      struct cp_diag *d);
enum cp_status cp_trace_export_folded(struct cp_trace_store *s, int64_t run, struct cp_buf *out,
                                      struct cp_diag *d);

#endif
