/* Run groups: the runs `bench --runs N` recorded in N separate processes,
 * tied together by the run counter "run.group" (iteration -1). */
#include "trace/trace_internal.h"

#include <stdlib.h>

enum cp_status cp_trace_store_set_run_group(struct cp_trace_store *s, int64_t run_id, int64_t group,
                                            int64_t index, int64_t size, struct cp_diag *d)
{
    enum cp_status st =
        cp_trace_store_add_counter(s, run_id, -1, CP_TRACE_GROUP_COUNTER, (double)group, 0, d);
    if (st == CP_OK)
        st = cp_trace_store_add_counter(s, run_id, -1, "run.group_index", (double)index, 0, d);
    if (st == CP_OK)
        st = cp_trace_store_add_counter(s, run_id, -1, "run.group_size", (double)size, 0, d);
    return st;
}

enum cp_status cp_trace_store_run_group(struct cp_trace_store *s, int64_t run_id, int64_t **ids,
                                        size_t *n, struct cp_diag *d)
{
    *ids = NULL;
    *n = 0;
    int64_t run = 0;
    enum cp_status ret = cp_trace_store_resolve_run(s, run_id, &run, d);
    if (ret != CP_OK)
        return ret;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT DISTINCT g.run_id FROM counters me JOIN counters g "
                           "ON g.name = me.name AND g.iteration = -1 AND g.value = me.value "
                           "JOIN runs r ON r.id = g.run_id "
                           "WHERE me.run_id = ?1 AND me.name = ?2 AND me.iteration = -1 "
                           "ORDER BY g.run_id",
                           -1, &st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, "reading a run group");
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_text(st, 2, CP_TRACE_GROUP_COUNTER, -1, SQLITE_STATIC);
    size_t cap = 0, k = 0;
    int64_t *v = NULL;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (k == cap) {
            size_t nc = cap ? cap * 2 : 8;
            int64_t *g = cp_realloc_array(v, nc, sizeof *g);
            if (!g) {
                ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", s->path);
                break;
            }
            v = g;
            cap = nc;
        }
        v[k++] = sqlite3_column_int64(st, 0);
    }
    if (ret == CP_OK && rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, "reading a run group");
    sqlite3_finalize(st);
    if (ret == CP_OK && k == 0) { /* no group: the run alone */
        v = cp_calloc(1, sizeof *v);
        if (!v)
            ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", s->path);
        else
            v[k++] = run;
    }
    if (ret != CP_OK) {
        free(v);
        return ret;
    }
    *ids = v;
    *n = k;
    return CP_OK;
}
