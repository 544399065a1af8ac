/* Pipeline runs in the trace store: the flow's nodes and edges, and every
 * node invocation (docs/trace-format.md, "Pipelines"). The tables are
 * added to a store the first time a pipeline run is written (adding
 * tables does not change the schema version); a store without them has no
 * pipeline runs, and reading one gives none. */
#include "trace/trace_internal.h"

#include <stdlib.h>
#include <string.h>

static const char TABLES[] = "CREATE TABLE IF NOT EXISTS pipeline_nodes ("
                             "  run_id INTEGER NOT NULL REFERENCES runs(id),"
                             "  node INTEGER NOT NULL,"
                             "  name TEXT NOT NULL,"
                             "  flowunit TEXT NOT NULL,"
                             "  workers INTEGER NOT NULL,"
                             "  batch_size INTEGER NOT NULL,"
                             "  queue_size INTEGER NOT NULL,"
                             "  line INTEGER NOT NULL,"
                             "  attrs TEXT,"
                             "  PRIMARY KEY (run_id, node)"
                             ") WITHOUT ROWID;"
                             "CREATE TABLE IF NOT EXISTS pipeline_edges ("
                             "  run_id INTEGER NOT NULL REFERENCES runs(id),"
                             "  src INTEGER NOT NULL,"
                             "  dst INTEGER NOT NULL,"
                             "  back INTEGER NOT NULL"
                             ");"
                             "CREATE TABLE IF NOT EXISTS node_calls ("
                             "  run_id INTEGER NOT NULL REFERENCES runs(id),"
                             "  node INTEGER NOT NULL,"
                             "  seq INTEGER NOT NULL,"
                             "  worker INTEGER NOT NULL,"
                             "  thread INTEGER NOT NULL,"
                             "  batch INTEGER NOT NULL,"
                             "  depth INTEGER NOT NULL,"
                             "  requests TEXT NOT NULL,"
                             "  ready_ns INTEGER NOT NULL,"
                             "  start_ns INTEGER NOT NULL,"
                             "  end_ns INTEGER NOT NULL,"
                             "  done_ns INTEGER NOT NULL,"
                             "  wait_ns INTEGER NOT NULL,"
                             "  blocked_ns INTEGER NOT NULL,"
                             "  cpu_ns INTEGER NOT NULL,"
                             "  runq_ns INTEGER NOT NULL,"
                             "  PRIMARY KEY (run_id, node, seq)"
                             ") WITHOUT ROWID;";

static sqlite3_int64 db64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)v;
}

static bool has_table(struct cp_trace_store *s, const char *name)
{
    sqlite3_stmt *st = NULL;
    bool yes =
        sqlite3_prepare_v2(s->db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return yes;
}

bool cp_trace_store_has_pipeline_tables(struct cp_trace_store *s)
{
    return has_table(s, "node_calls");
}

static enum cp_status run_rows(struct cp_trace_store *s, const char *sql, size_t n,
                               void (*bind)(sqlite3_stmt *st, const void *v, size_t i),
                               const void *v, int64_t run_id, const char *what, struct cp_diag *d)
{
    enum cp_status ret = cp_trace_store_exec(s, "BEGIN IMMEDIATE", what, d);
    if (ret != CP_OK)
        return ret;
    if ((ret = cp_trace_store_exec(s, TABLES, what, d)) != CP_OK) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return ret;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        ret = cp_trace_store_db_error(s, d, what);
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return ret;
    }
    for (size_t i = 0; i < n && ret == CP_OK; i++) {
        sqlite3_bind_int64(st, 1, run_id);
        bind(st, v, i);
        if (sqlite3_step(st) != SQLITE_DONE)
            ret = cp_trace_store_db_error(s, d, what);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (ret != CP_OK) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return ret;
    }
    return cp_trace_store_exec(s, "COMMIT", what, d);
}

static void bind_node(sqlite3_stmt *st, const void *v, size_t i)
{
    const struct cp_trace_pipeline_node *n = (const struct cp_trace_pipeline_node *)v + i;
    sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
    sqlite3_bind_text(st, 3, n->name ? n->name : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, n->flowunit ? n->flowunit : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, n->workers);
    sqlite3_bind_int(st, 6, n->batch_size);
    sqlite3_bind_int(st, 7, n->queue_size);
    sqlite3_bind_int(st, 8, n->line);
    if (n->attrs_json)
        sqlite3_bind_text(st, 9, n->attrs_json, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 9);
}

static void bind_edge(sqlite3_stmt *st, const void *v, size_t i)
{
    const struct cp_trace_pipeline_edge *e = (const struct cp_trace_pipeline_edge *)v + i;
    sqlite3_bind_int(st, 2, e->from);
    sqlite3_bind_int(st, 3, e->to);
    sqlite3_bind_int(st, 4, e->back ? 1 : 0);
}

static void bind_call(sqlite3_stmt *st, const void *v, size_t i)
{
    const struct cp_trace_node_call *c = (const struct cp_trace_node_call *)v + i;
    sqlite3_bind_int(st, 2, c->node);
    sqlite3_bind_int64(st, 3, db64(c->seq));
    sqlite3_bind_int(st, 4, c->worker);
    sqlite3_bind_int(st, 5, c->thread);
    sqlite3_bind_int64(st, 6, c->batch);
    sqlite3_bind_int64(st, 7, c->depth);
    sqlite3_bind_text(st, 8, c->requests ? c->requests : "", -1, SQLITE_STATIC);
    const uint64_t t[] = {c->ready_ns, c->start_ns,   c->end_ns, c->done_ns,
                          c->wait_ns,  c->blocked_ns, c->cpu_ns, c->runq_ns};
    for (int k = 0; k < 8; k++)
        sqlite3_bind_int64(st, 9 + k, db64(t[k]));
}

enum cp_status cp_trace_store_add_pipeline(struct cp_trace_store *s, int64_t run_id,
                                           const struct cp_trace_pipeline_node *nodes,
                                           size_t n_nodes,
                                           const struct cp_trace_pipeline_edge *edges,
                                           size_t n_edges, struct cp_diag *d)
{
    int64_t used;
    enum cp_status ret = cp_trace_store_resolve_run(s, run_id, &used, d);
    if (ret == CP_OK)
        ret = run_rows(s,
                       "INSERT INTO pipeline_nodes(run_id, node, name, flowunit, workers, "
                       "batch_size, queue_size, line, attrs) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                       "?8, ?9)",
                       n_nodes, bind_node, nodes, run_id, "adding the pipeline's nodes", d);
    if (ret == CP_OK)
        ret = run_rows(s,
                       "INSERT INTO pipeline_edges(run_id, src, dst, back) VALUES (?1, ?2, ?3, ?4)",
                       n_edges, bind_edge, edges, run_id, "adding the pipeline's edges", d);
    return ret;
}

enum cp_status cp_trace_store_add_node_calls(struct cp_trace_store *s, int64_t run_id,
                                             const struct cp_trace_node_call *v, size_t n,
                                             struct cp_diag *d)
{
    int64_t used;
    enum cp_status ret = cp_trace_store_resolve_run(s, run_id, &used, d);
    if (ret != CP_OK)
        return ret;
    return run_rows(s,
                    "INSERT INTO node_calls(run_id, node, seq, worker, thread, batch, depth, "
                    "requests, ready_ns, start_ns, end_ns, done_ns, wait_ns, blocked_ns, cpu_ns, "
                    "runq_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                    "?14, ?15, ?16)",
                    n, bind_call, v, run_id, "adding node calls", d);
}

/* ---- reading ------------------------------------------------------------------------ */

void cp_trace_pipeline_release(struct cp_trace_pipeline *p)
{
    for (size_t i = 0; i < p->n_nodes; i++) {
        free((char *)p->nodes[i].name);
        free((char *)p->nodes[i].flowunit);
        free((char *)p->nodes[i].attrs_json);
    }
    free(p->nodes);
    free(p->edges);
    memset(p, 0, sizeof *p);
}

static char *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? cp_strdup((const char *)t) : NULL;
}

enum cp_status cp_trace_query_pipeline(struct cp_trace_store *s, int64_t run_id,
                                       struct cp_trace_pipeline *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    if (!has_table(s, "pipeline_nodes"))
        return CP_OK;
    const char *what = "reading the pipeline";
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT name, flowunit, workers, batch_size, queue_size, line, attrs "
                           "FROM pipeline_nodes WHERE run_id = ?1 ORDER BY node",
                           -1, &st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, what);
    sqlite3_bind_int64(st, 1, run_id);
    enum cp_status ret = CP_OK;
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (out->n_nodes == cap) {
            cap = cap ? cap * 2 : 16;
            struct cp_trace_pipeline_node *g = cp_realloc_array(out->nodes, cap, sizeof *g);
            if (!g) {
                ret = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            out->nodes = g;
        }
        struct cp_trace_pipeline_node *n = &out->nodes[out->n_nodes++];
        *n = (struct cp_trace_pipeline_node){col_text(st, 0),
                                             col_text(st, 1),
                                             sqlite3_column_int(st, 2),
                                             sqlite3_column_int(st, 3),
                                             sqlite3_column_int(st, 4),
                                             sqlite3_column_int(st, 5),
                                             col_text(st, 6)};
        if (!n->name || !n->flowunit) {
            ret = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
    }
    if (ret == CP_OK && rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, what);
    sqlite3_finalize(st);
    st = NULL;
    if (ret == CP_OK &&
        sqlite3_prepare_v2(s->db,
                           "SELECT src, dst, back FROM pipeline_edges WHERE run_id = ?1 "
                           "ORDER BY rowid",
                           -1, &st, NULL) != SQLITE_OK)
        ret = cp_trace_store_db_error(s, d, what);
    cap = 0;
    if (ret == CP_OK)
        sqlite3_bind_int64(st, 1, run_id);
    while (ret == CP_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (out->n_edges == cap) {
            cap = cap ? cap * 2 : 16;
            struct cp_trace_pipeline_edge *g = cp_realloc_array(out->edges, cap, sizeof *g);
            if (!g) {
                ret = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            out->edges = g;
        }
        out->edges[out->n_edges++] = (struct cp_trace_pipeline_edge){
            sqlite3_column_int(st, 0), sqlite3_column_int(st, 1), sqlite3_column_int(st, 2) != 0};
    }
    if (ret == CP_OK && st && rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, what);
    sqlite3_finalize(st);
    if (ret != CP_OK)
        cp_trace_pipeline_release(out);
    return ret;
}

void cp_trace_node_calls_free(struct cp_trace_node_call *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free((char *)v[i].requests);
    free(v);
}

enum cp_status cp_trace_query_node_calls(struct cp_trace_store *s, int64_t run_id,
                                         struct cp_trace_node_call **v, size_t *n,
                                         struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    if (!has_table(s, "node_calls"))
        return CP_OK;
    const char *what = "reading node calls";
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT node, seq, worker, thread, batch, depth, requests, ready_ns, "
                           "start_ns, end_ns, done_ns, wait_ns, blocked_ns, cpu_ns, runq_ns FROM "
                           "node_calls WHERE run_id = ?1 ORDER BY node, seq",
                           -1, &st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, what);
    sqlite3_bind_int64(st, 1, run_id);
    enum cp_status ret = CP_OK;
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 256;
            struct cp_trace_node_call *g = cp_realloc_array(*v, cap, sizeof *g);
            if (!g) {
                ret = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            *v = g;
        }
        struct cp_trace_node_call *c = &(*v)[(*n)++];
        uint64_t t[8];
        for (int k = 0; k < 8; k++) {
            sqlite3_int64 x = sqlite3_column_int64(st, 7 + k);
            t[k] = x < 0 ? 0 : (uint64_t)x;
        }
        *c = (struct cp_trace_node_call){
            .node = sqlite3_column_int(st, 0),
            .seq = (uint64_t)sqlite3_column_int64(st, 1),
            .worker = sqlite3_column_int(st, 2),
            .thread = sqlite3_column_int(st, 3),
            .batch = (uint32_t)sqlite3_column_int64(st, 4),
            .depth = (uint32_t)sqlite3_column_int64(st, 5),
            .requests = col_text(st, 6),
            .ready_ns = t[0],
            .start_ns = t[1],
            .end_ns = t[2],
            .done_ns = t[3],
            .wait_ns = t[4],
            .blocked_ns = t[5],
            .cpu_ns = t[6],
            .runq_ns = t[7],
        };
        if (!c->requests) {
            ret = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
    }
    if (ret == CP_OK && rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, what);
    sqlite3_finalize(st);
    if (ret != CP_OK) {
        cp_trace_node_calls_free(*v, *n);
        *v = NULL;
        *n = 0;
    }
    return ret;
}
