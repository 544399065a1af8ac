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

/* An inference worker's model as a run of its own (kind "pipeline-model"),
 * what `analyze` and its rules read: the plan's kernel table, one sample
 * per call (its busy time), the call's runtime and kernel events with the
 * call's index as their iteration (the runtime stamped the first request's
 * id). The pipeline run says which run it is in a counter,
 * "model_run:NODE:WORKER". Nothing is written (*run -1) for a worker
 * without calls or kernel events. */
static enum cp_status model_run(struct pl_exec *x, struct pl_worker *w, struct cp_trace_store *s,
                                int64_t *run, struct cp_diag *d)
{
    struct cp_session *ses = pl_unit_session(w->u);
    size_t n_ev = cp_trace_n_events(w->rec);
    if (!ses || w->n_calls == 0 || n_ev == 0)
        return CP_OK;
    /* each recorded request's call: by its id less rec_base */
    size_t n_req = 0;
    for (size_t i = 0; i < w->n_calls; i++) {
        const struct pl_call *c = &w->calls[i];
        if (c->batch && c->req_off < w->n_reqs && w->reqs[c->req_off] - x->rec_base + 1 > n_req)
            n_req = (size_t)(w->reqs[c->req_off] - x->rec_base + 1);
    }
    int64_t *call_of = cp_calloc(n_req ? n_req : 1, sizeof *call_of);
    uint64_t *ns = cp_calloc(w->n_calls, sizeof *ns);
    int32_t *name_of = cp_calloc(cp_trace_n_strings(w->rec) + 1, sizeof *name_of);
    struct cp_trace_recorder *r = cp_trace_recorder_create(n_ev);
    enum cp_status st = CP_OK;
    if (!call_of || !ns || !name_of || !r)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < n_req; i++)
        call_of[i] = -1;
    for (size_t i = 0; st == CP_OK && i < cp_trace_n_strings(w->rec); i++)
        name_of[i] = cp_trace_intern(r, cp_trace_string(w->rec, (int32_t)i));
    for (size_t i = 0; st == CP_OK && i < w->n_calls; i++) {
        const struct pl_call *c = &w->calls[i];
        ns[i] = (uint64_t)(c->end_ns - c->start_ns);
        if (c->batch && c->req_off < w->n_reqs)
            call_of[w->reqs[c->req_off] - x->rec_base] = (int64_t)i;
    }
    const struct cp_trace_event *ev = cp_trace_events(w->rec);
    for (size_t i = 0; st == CP_OK && i < n_ev; i++) {
        const struct cp_trace_event *e = &ev[i];
        int32_t it = -1;
        if (e->iteration >= 0) {
            if ((size_t)e->iteration >= n_req || call_of[e->iteration] < 0)
                continue; /* a call that was not kept */
            it = (int32_t)call_of[e->iteration];
        }
        int32_t name = e->name >= 0 ? name_of[e->name] : -1;
        cp_trace_record_depth(r, (enum cp_trace_layer)e->layer, name, e->kernel, it, e->start_ns,
                              e->end_ns, e->thread, e->depth);
    }
    if (st == CP_OK)
        st = cp_session_store_run(ses, s, "pipeline-model", pl_unit_model_path(w->u), r, 0, 0, ns,
                                  w->n_calls, cp_peak_rss_bytes(), run, d);
    cp_trace_recorder_free(r);
    free(name_of);
    free(ns);
    free(call_of);
    return st;
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
    /* each inference worker's model first, so that the pipeline run is the
     * store's last (what `node-bottleneck TRACE.db` reads) */
    int64_t *model_runs = cp_calloc(x->n_w ? x->n_w : 1, sizeof *model_runs);
    if (!model_runs)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t k = 0; model_runs && k < x->n_w; k++)
        model_runs[k] = -1;
    for (size_t k = 0; st == CP_OK && k < x->n_w; k++)
        if (x->w[k].rec)
            st = model_run(x, &x->w[k], s, &model_runs[k], d);
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
    *run_id = -1;
    if (st == CP_OK)
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
    /* the model layer under the inference nodes, and which run holds each
     * inference worker's model */
    for (size_t k = 0; st == CP_OK && k < x->n_w; k++) {
        if (x->w[k].rec)
            st = cp_trace_store_add_events(s, *run_id, x->w[k].rec, d);
        char name[200];
        snprintf(name, sizeof name, "model_run:%.150s:%d", f->nodes[x->w[k].node].name,
                 x->w[k].worker);
        if (st == CP_OK && model_runs && model_runs[k] >= 0)
            st = cp_trace_store_add_counter(s, *run_id, -1, name, (double)model_runs[k], 0, d);
    }
    if (st != CP_OK && *run_id >= 0) {
        struct cp_diag ignored;
        cp_diag_init(&ignored);
        (void)cp_trace_store_delete_run(s, *run_id, &ignored);
        *run_id = -1;
    }
    for (size_t k = 0; st != CP_OK && model_runs && k < x->n_w; k++)
        if (model_runs[k] >= 0) {
            struct cp_diag ignored;
            cp_diag_init(&ignored);
            (void)cp_trace_store_delete_run(s, model_runs[k], &ignored);
        }
    free(model_runs);
    cp_trace_store_close(s);
    return st;
}
