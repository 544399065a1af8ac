/* Writing an executor's run to the trace store (docs/trace-format.md,
 * "Pipelines"): the requests' latencies, the flow, every node call with
 * its clocks, an application-layer event per call (a track per worker
 * thread) and the model layer of the inference workers. */
#include "pipeline/exec_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The node's keys as a JSON object. */
static char *attrs_json(const struct pl_node *n)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < n->n_attrs; i++)
        json_object_set_new(o, n->attrs[i].key, json_string(n->attrs[i].value));
    char *t = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    return t;
}

enum cp_status pl_exec_record(struct pl_exec *x, const char *trace_path, const char *kind,
                              int64_t *run_id, struct cp_diag *d)
{
    const struct cp_flow *f = x->f;
    struct cp_trace_store *s = NULL;
    enum cp_status st = cp_trace_store_open(trace_path, &s, d);
    if (st != CP_OK)
        return st;
    if ((st = cp_trace_store_set_host_meta(s, d)) != CP_OK) {
        cp_trace_store_close(s);
        return st;
    }
    /* the requests that completed, from the first on (a served window's
     * last ones may still be on their way) */
    size_t sent = 0;
    while (sent < x->cap_req && x->emitted[sent] && x->done[sent])
        sent++;
    struct cp_trace_run_info info = {
        .kind = kind ? kind : "pipeline",
        .model_path = f->path,
        .target = "cpu",
        .batch = 1,
        .iterations = (int)sent,
        .peak_rss_bytes = cp_peak_rss_bytes(),
    };
    st = cp_trace_store_begin_run(s, &info, run_id, d);
    uint64_t *lat = cp_calloc(sent ? sent : 1, sizeof *lat);
    if (st == CP_OK && !lat)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < sent; i++)
        lat[i] = (uint64_t)(x->done[i] - x->emitted[i]);
    if (st == CP_OK && sent)
        st = cp_trace_store_add_samples(s, *run_id, 0, lat, sent, d);
    free(lat);
    /* the flow */
    struct cp_trace_pipeline_node *nodes = cp_calloc(f->n_nodes, sizeof *nodes);
    struct cp_trace_pipeline_edge *edges = cp_calloc(f->n_edges ? f->n_edges : 1, sizeof *edges);
    if (st == CP_OK && (!nodes || !edges))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < f->n_nodes; i++) {
        const struct pl_node *n = &f->nodes[i];
        nodes[i] = (struct cp_trace_pipeline_node){n->name,       pl_unit_name(n->unit), n->workers,
                                                   n->batch_size, n->queue_size,         n->line,
                                                   attrs_json(n)};
    }
    for (size_t e = 0; st == CP_OK && e < f->n_edges; e++)
        edges[e] = (struct cp_trace_pipeline_edge){(int32_t)f->edges[e].from,
                                                   (int32_t)f->edges[e].to, f->edges[e].back};
    if (st == CP_OK)
        st = cp_trace_store_add_pipeline(s, *run_id, nodes, f->n_nodes, edges, f->n_edges, d);
    for (size_t i = 0; nodes && i < f->n_nodes; i++)
        free((char *)nodes[i].attrs_json);
    free(nodes);
    free(edges);
    /* the calls, and their events */
    size_t n_calls = 0;
    for (size_t k = 0; k < x->n_w; k++)
        n_calls += x->w[k].n_calls;
    struct cp_trace_node_call *calls = cp_calloc(n_calls ? n_calls : 1, sizeof *calls);
    struct cp_trace_recorder *rec = cp_trace_recorder_create(n_calls ? n_calls : 1);
    if (st == CP_OK && (!calls || !rec))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t k = 0; st == CP_OK && k < x->n_w; k++) {
        const struct pl_worker *w = &x->w[k];
        int32_t name = cp_trace_intern(rec, f->nodes[w->node].name);
        for (size_t i = 0; st == CP_OK && i < w->n_calls; i++) {
            const struct pl_call *c = &w->calls[i];
            struct cp_buf b;
            cp_buf_init(&b);
            for (size_t r = 0; r < c->batch && c->req_off + r < w->n_reqs; r++)
                cp_buf_printf(&b, "%s%llu", r ? "," : "",
                              (unsigned long long)(w->reqs[c->req_off + r] - x->rec_base));
            if (cp_buf_status(&b) != CP_OK || name < 0) {
                cp_buf_release(&b);
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            calls[m++] = (struct cp_trace_node_call){
                .node = (int32_t)c->node,
                .worker = (int32_t)c->worker,
                .thread = c->thread,
                .seq = c->seq,
                .batch = c->batch,
                .depth = c->depth,
                .requests = b.data ? cp_buf_steal(&b) : cp_strdup(""),
                .ready_ns = (uint64_t)c->ready_ns,
                .start_ns = (uint64_t)c->start_ns,
                .end_ns = (uint64_t)c->end_ns,
                .done_ns = (uint64_t)c->done_ns,
                .wait_ns = (uint64_t)c->wait_ns,
                .blocked_ns = (uint64_t)c->blocked_ns,
                .cpu_ns = (uint64_t)(c->cpu_ns > 0 ? c->cpu_ns : 0),
                .runq_ns = (uint64_t)(c->runq_ns > 0 ? c->runq_ns : 0),
            };
            cp_buf_release(&b);
            int32_t it = c->batch && c->req_off < w->n_reqs
                             ? (int32_t)((w->reqs[c->req_off] - x->rec_base) & 0x7fffffff)
                             : -1;
            cp_trace_record(rec, CP_LAYER_APP, name, -1, it, (uint64_t)c->start_ns,
                            (uint64_t)c->end_ns, c->thread);
        }
    }
    if (st == CP_OK)
        st = cp_trace_store_add_node_calls(s, *run_id, calls, m, d);
    if (st == CP_OK)
        st = cp_trace_store_add_events(s, *run_id, rec, d);
    for (size_t i = 0; calls && i < m; i++)
        free((char *)calls[i].requests);
    free(calls);
    cp_trace_recorder_free(rec);
    /* the model layer under the inference nodes */
    for (size_t k = 0; st == CP_OK && k < x->n_w; k++)
        if (x->w[k].rec)
            st = cp_trace_store_add_events(s, *run_id, x->w[k].rec, d);
    if (st != CP_OK && *run_id >= 0) {
        struct cp_diag ignored;
        cp_diag_init(&ignored);
        (void)cp_trace_store_delete_run(s, *run_id, &ignored);
        *run_id = -1;
    }
    cp_trace_store_close(s);
    return st;
}
