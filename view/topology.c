/* The topology of a trace's run, a CPU .om or a flow, laid out by
 * Graphviz's dot (libgvc) and rendered as SVG.
 *
 * Each input is turned into one cgraph graph built through the API (never
 * DOT text, so names need no DOT quoting), with plain labels: a name is
 * escaped as XML entities, which Graphviz decodes for layout and writes
 * back, and for Graphviz's label escapes (backslashes doubled), so quotes,
 * ampersands, backslashes and CJK names come out as they went in.
 * Tooltips go through more rounds of escapes, which differ between
 * Graphviz versions: each is given to Graphviz as a placeholder
 * ("cptipN") and put into the SVG afterwards as XML text of our own.
 * Nodes are "n0", "n1", ... in the order of the input, which with dot's
 * deterministic layout gives the same bytes for the same input. */
#include "view/view.h"
#include "view/topology_internal.h"

#include "core/hashmap.h"
#include "graph/graph.h"
#include "om/om.h"
#include "pipeline/pipeline.h"
#include "trace/query.h"

#include <gvc.h>
#include <jansson.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Above this many nodes dot's crossing minimisation and network simplex
 * are cut short, edges are straight and unlabelled: a few thousand nodes
 * lay out in seconds instead of minutes. Between MEDIUM and BIG the limits
 * are only tightened. */
static const char *const KINDS_TAKEN = "a trace store (.db), a CPU .om or a flow (.toml)";

/* ---- a trace: kernels ---------------------------------------------------------------------- */

/* The names in a kernel's origins JSON array (borrowed from `arr`; NULL
 * and 0 when there are none). OUT: *n. False when out of memory. */
static bool origin_names(json_t *arr, const char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    size_t len = json_array_size(arr);
    if (!len)
        return true;
    if (!(*names = cp_calloc(len, sizeof **names)))
        return false;
    for (size_t i = 0; i < len; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (s)
            (*names)[(*n)++] = s;
    }
    return true;
}

static enum cp_status draw_kernels(struct cp_trace_store *s, const char *path, int64_t run,
                                   const char *title, const struct cp_topology_opts *o,
                                   struct cp_buf *out, struct cp_topology_info *info,
                                   struct cp_diag *d)
{
    struct cp_trace_kernel_desc *k = NULL;
    size_t nk = 0;
    struct cp_trace_kernel_time *kt = NULL;
    size_t nkt = 0;
    struct cp_trace_iter_time *it = NULL;
    size_t nit = 0;
    double *share = NULL, *mean_ns = NULL;
    int *hot = NULL;
    struct cp_strmap producer;
    cp_strmap_init(&producer);
    struct topo t;
    memset(&t, 0, sizeof t);
    struct cp_buf label, tip, lb;
    cp_buf_init(&label);
    cp_buf_init(&tip);
    cp_buf_init(&lb);

    enum cp_status st = cp_trace_query_kernels(s, run, &k, &nk, d);
    if (st != CP_OK)
        goto out;
    if (nk == 0) {
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: run %lld has no kernels to draw (and is not a pipeline run)", path,
                         (long long)run);
        goto out;
    }
    st = cp_trace_query_kernel_times(s, run, NULL, 0, &kt, &nkt, d);
    if (st == CP_OK)
        st = cp_trace_query_layer_iterations(s, run, CP_LAYER_DEVICE, NULL, &it, &nit, d);
    if (st != CP_OK)
        goto out;
    share = cp_calloc(nk, sizeof *share);
    mean_ns = cp_calloc(nk, sizeof *mean_ns);
    hot = cp_calloc(nk, sizeof *hot);
    if (!share || !mean_ns || !hot || cp_strmap_reserve(&producer, nk * 2) != CP_OK) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* every kernel event counts in the whole, those of kernels the table
     * lacks too */
    double total = 0, max_share = 0;
    for (size_t i = 0; i < nkt; i++)
        total += kt[i].total_ns;
    double iters = nit ? (double)nit : 1;
    for (size_t i = 0, j = 0; i < nk; i++) {
        while (j < nkt && kt[j].kernel_idx < k[i].idx)
            j++;
        if (j < nkt && kt[j].kernel_idx == k[i].idx) {
            mean_ns[i] = kt[j].total_ns / iters;
            share[i] = total > 0 ? kt[j].total_ns / total : 0;
            if (share[i] > max_share)
                max_share = share[i];
        }
    }
    tp_mark_hot(share, nk, hot);
    bool timed = total > 0;

    st = topo_open(&t, title, nk, nk, o, d);
    if (st != CP_OK)
        goto out;
    for (size_t i = 0; i < nk && st == CP_OK; i++) {
        json_t *origins = json_loads(k[i].origins, 0, NULL);
        const char **names = NULL;
        size_t no = 0;
        if (!origin_names(origins, &names, &no)) {
            json_decref(origins);
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        bool differ = tp_origins_differ(k[i].node, names, no);
        cp_buf_reset(&label);
        cp_buf_reset(&tip);
        tp_put_text(&label, k[i].node[0] ? k[i].node : "(unnamed)", TOPO_LINE_CHARS);
        cp_buf_puts(&label, LABEL_BREAK);
        tp_put_text(&label, k[i].op_type, TOPO_LINE_CHARS);
        tp_put_tip(&tip, k[i].node);
        cp_buf_puts(&tip, TOOLTIP_BREAK "op ");
        tp_put_tip(&tip, k[i].op_type);
        if (k[i].impl[0]) {
            cp_buf_puts(&tip, ", ");
            tp_put_tip(&tip, k[i].impl);
        }
        if (timed) {
            cp_buf_puts(&label, LABEL_BREAK);
            tp_put_time(&label, mean_ns[i]);
            cp_buf_printf(&label, "/iter \xc2\xb7 %.1f%%", share[i] * 100);
            cp_buf_puts(&tip, TOOLTIP_BREAK);
            tp_put_time(&tip, mean_ns[i]);
            cp_buf_printf(&tip, " per iteration, %.2f%% of the kernel time", share[i] * 100);
        }
        if (differ)
            tp_put_origins(&label, &tip, names, no);
        /* the findings that name it, or an ONNX node it stands for: one
         * line per finding, however many of its nodes it stands for */
        bool flagged = false;
        const char *shown[8];
        size_t n_shown = 0;
        for (size_t m = 0; m < o->n_marks; m++) {
            const struct cp_topology_mark *mk = &o->marks[m];
            if (!mk->node || !mk->text)
                continue;
            bool hit = strcmp(mk->node, k[i].node) == 0;
            for (size_t q = 0; !hit && q < no; q++)
                hit = strcmp(mk->node, names[q]) == 0;
            for (size_t e = 0; hit && e < n_shown; e++)
                hit = strcmp(shown[e], mk->text) != 0;
            if (!hit || n_shown == sizeof shown / sizeof shown[0])
                continue;
            shown[n_shown++] = mk->text;
            cp_buf_puts(&label, LABEL_BREAK "\xe2\x9a\x91 ");
            tp_put_text(&label, mk->text, TOPO_LINE_CHARS);
            cp_buf_puts(&tip, TOOLTIP_BREAK "finding ");
            tp_put_tip(&tip, mk->text);
            flagged = true;
        }
        free(names);
        json_decref(origins);
        if (hot[i]) {
            cp_buf_printf(&label, LABEL_BREAK "HOT #%d by time", hot[i]);
            cp_buf_printf(&tip, TOOLTIP_BREAK "hot: #%d by share of the kernel time", hot[i]);
        }
        cp_buf_putc(&label, '\0');
        cp_buf_putc(&tip, '\0');
        if (label.failed || tip.failed) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        struct topo_look look = {.label = label.data,
                                 .tooltip = tip.data,
                                 .ramp = timed ? tp_ramp_of(share[i], max_share) : -1,
                                 .hot = hot[i] != 0,
                                 .fused = no > 1,
                                 .flagged = flagged};
        st = topo_node(&t, i, &look, d);
        for (size_t q = 0; q < k[i].n_out && st == CP_OK; q++)
            if (k[i].out[q].name[0] &&
                cp_strmap_puts(&producer, k[i].out[q].name, (int64_t)i) != CP_OK)
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    /* edges: a tensor one kernel writes and another reads (a view reads
     * the tensor it aliases) */
    for (size_t i = 0; i < nk && st == CP_OK; i++) {
        for (size_t a = 0; a < k[i].n_in && st == CP_OK; a++) {
            const struct cp_trace_tensor *x = &k[i].in[a];
            int64_t from = cp_strmap_gets(&producer, x->name, -1);
            if (from < 0 && x->view_of)
                from = cp_strmap_gets(&producer, x->view_of, -1);
            if (from < 0 || (size_t)from == i)
                continue;
            bool seen = false;
            for (size_t b = 0; b < a && !seen; b++)
                seen = strcmp(k[i].in[b].name, x->name) == 0;
            if (seen)
                continue;
            cp_buf_reset(&lb);
            tp_put_tensor(&lb, x, false);
            cp_buf_putc(&lb, '\0');
            cp_buf_reset(&tip);
            tp_put_tip(&tip, x->name);
            cp_buf_puts(&tip, ": ");
            tp_put_tensor(&tip, x, true);
            if (x->layout[0]) {
                cp_buf_putc(&tip, ' ');
                tp_put_tip(&tip, x->layout);
            }
            cp_buf_putc(&tip, '\0');
            if (lb.failed || tip.failed)
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            else
                st = topo_edge(&t, (size_t)from, i, lb.data, tip.data, false, d);
        }
    }
    if (st != CP_OK)
        goto out;
    cp_buf_reset(&lb);
    tp_put_text(&lb, title, 0);
    cp_buf_printf(&lb, LABEL_BREAK "trace run %lld: %zu kernels, %zu fused", (long long)run,
                  t.n_nodes, t.fused);
    if (timed) {
        cp_buf_puts(&lb, ", kernel time ");
        tp_put_time(&lb, total / iters);
        cp_buf_printf(&lb, " per iteration over %zu iterations", nit);
        cp_buf_printf(&lb,
                      LABEL_BREAK
                      "fill: share of the kernel time, light 0%% to dark %.1f%%" LABEL_BREAK
                      "bold vermillion border: hot (the largest share, and "
                      "any at least half of it)%s",
                      max_share * 100,
                      t.flagged ? LABEL_BREAK "double border, \xe2\x9a\x91: a finding of "
                                              "cannprof analyze names the node"
                                : "");
    } else {
        cp_buf_puts(&lb, "; no kernel events: no times");
    }
    st = topo_render(&t, &lb, out, d);
    if (st == CP_OK && info) {
        info->nodes = t.n_nodes;
        info->edges = t.n_edges;
        info->fused = t.fused;
        info->flagged = t.flagged;
    }
out:
    topo_close(&t);
    cp_buf_release(&label);
    cp_buf_release(&tip);
    cp_buf_release(&lb);
    cp_strmap_release(&producer);
    free(share);
    free(mean_ns);
    free(hot);
    free(it);
    free(kt);
    cp_trace_kernels_free(k, nk);
    return st;
}

/* ---- a trace: a pipeline run ---------------------------------------------------------------- */

struct node_sums {
    uint64_t calls;
    double busy_ns, wait_ns, depth;
};

static enum cp_status draw_pipeline(struct cp_trace_store *s, int64_t run,
                                    const struct cp_trace_pipeline *p, const char *title,
                                    const struct cp_topology_opts *o, struct cp_buf *out,
                                    struct cp_topology_info *info, struct cp_diag *d)
{
    struct cp_trace_node_call *calls = NULL;
    size_t nc = 0;
    struct node_sums *sum = NULL;
    double *share = NULL;
    int *hot = NULL;
    struct topo t;
    memset(&t, 0, sizeof t);
    struct cp_buf label, tip;
    cp_buf_init(&label);
    cp_buf_init(&tip);
    size_t n = p->n_nodes;

    enum cp_status st = cp_trace_query_node_calls(s, run, &calls, &nc, d);
    if (st != CP_OK)
        goto out;
    sum = cp_calloc(n, sizeof *sum);
    share = cp_calloc(n, sizeof *share);
    hot = cp_calloc(n, sizeof *hot);
    if (!sum || !share || !hot) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    double total = 0, max_share = 0;
    for (size_t i = 0; i < nc; i++) {
        if (calls[i].node < 0 || (size_t)calls[i].node >= n)
            continue;
        struct node_sums *x = &sum[calls[i].node];
        double busy =
            calls[i].end_ns > calls[i].start_ns ? (double)(calls[i].end_ns - calls[i].start_ns) : 0;
        x->calls++;
        x->busy_ns += busy;
        x->wait_ns += (double)calls[i].wait_ns;
        x->depth += calls[i].depth;
        total += busy;
    }
    for (size_t i = 0; i < n; i++) {
        share[i] = total > 0 ? sum[i].busy_ns / total : 0;
        if (share[i] > max_share)
            max_share = share[i];
    }
    tp_mark_hot(share, n, hot);

    st = topo_open(&t, title, n, n, o, d);
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const struct cp_trace_pipeline_node *pn = &p->nodes[i];
        cp_buf_reset(&label);
        cp_buf_reset(&tip);
        tp_put_text(&label, pn->name, TOPO_LINE_CHARS);
        cp_buf_puts(&label, LABEL_BREAK);
        tp_put_text(&label, pn->flowunit, TOPO_LINE_CHARS);
        cp_buf_printf(&label, LABEL_BREAK "workers %d \xc2\xb7 batch %d \xc2\xb7 queue %d",
                      pn->workers, pn->batch_size, pn->queue_size);
        cp_buf_printf(&label, LABEL_BREAK "%llu calls \xc2\xb7 busy %.1f%%",
                      (unsigned long long)sum[i].calls, share[i] * 100);
        tp_put_tip(&tip, pn->name);
        cp_buf_puts(&tip, TOOLTIP_BREAK "flowunit ");
        tp_put_tip(&tip, pn->flowunit);
        cp_buf_printf(&tip, TOOLTIP_BREAK "%llu calls, busy ", (unsigned long long)sum[i].calls);
        tp_put_time(&tip, sum[i].busy_ns);
        cp_buf_printf(&tip, " (%.2f%% of all nodes' busy time)", share[i] * 100);
        if (hot[i]) {
            cp_buf_printf(&label, LABEL_BREAK "BUSIEST #%d", hot[i]);
            cp_buf_printf(&tip, TOOLTIP_BREAK "hot: #%d by busy time", hot[i]);
        }
        cp_buf_putc(&label, '\0');
        cp_buf_putc(&tip, '\0');
        if (label.failed || tip.failed) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        struct topo_look look = {.label = label.data,
                                 .tooltip = tip.data,
                                 .ramp = total > 0 ? tp_ramp_of(share[i], max_share) : -1,
                                 .hot = hot[i] != 0};
        st = topo_node(&t, i, &look, d);
    }
    /* an edge carries what its downstream node waited for: the depth of
     * that node's input queue and its wait on it, per call */
    for (size_t i = 0; i < p->n_edges && st == CP_OK; i++) {
        const struct cp_trace_pipeline_edge *e = &p->edges[i];
        if (e->from < 0 || e->to < 0 || (size_t)e->to >= n)
            continue;
        const struct node_sums *x = &sum[e->to];
        cp_buf_reset(&label);
        cp_buf_reset(&tip);
        if (x->calls) {
            double c = (double)x->calls;
            cp_buf_printf(&label, "depth %.2g \xc2\xb7 wait ", x->depth / c);
            tp_put_time(&label, x->wait_ns / c);
            cp_buf_printf(&tip, "%s mean input queue depth %.3g, mean wait ",
                          e->back ? "loop back;" : "", x->depth / c);
            tp_put_time(&tip, x->wait_ns / c);
            cp_buf_printf(&tip, " over %llu calls of the downstream node",
                          (unsigned long long)x->calls);
        } else {
            cp_buf_puts(&label, "no calls");
            cp_buf_puts(&tip, "the downstream node was never called");
        }
        cp_buf_putc(&label, '\0');
        cp_buf_putc(&tip, '\0');
        if (label.failed || tip.failed)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        else
            st = topo_edge(&t, (size_t)e->from, (size_t)e->to, label.data, tip.data, e->back, d);
    }
    if (st != CP_OK)
        goto out;
    cp_buf_reset(&label);
    tp_put_text(&label, title, 0);
    cp_buf_printf(&label, LABEL_BREAK "pipeline run %lld: %zu nodes, %zu edges, %zu calls",
                  (long long)run, t.n_nodes, t.n_edges, nc);
    if (total > 0)
        cp_buf_printf(&label,
                      LABEL_BREAK "fill: share of the nodes' busy time, light 0%% to dark "
                                  "%.1f%%; bold vermillion border: busiest" LABEL_BREAK
                                  "edges: the downstream node's mean input queue depth and wait "
                                  "per call",
                      max_share * 100);
    else
        cp_buf_puts(&label, "; no node calls: no times");
    st = topo_render(&t, &label, out, d);
    if (st == CP_OK && info) {
        info->nodes = t.n_nodes;
        info->edges = t.n_edges;
        info->fused = 0;
    }
out:
    topo_close(&t);
    cp_buf_release(&label);
    cp_buf_release(&tip);
    free(sum);
    free(share);
    free(hot);
    cp_trace_node_calls_free(calls, nc);
    return st;
}

static enum cp_status draw_trace(const char *path, const struct cp_topology_opts *o,
                                 struct cp_buf *out, struct cp_topology_info *info,
                                 struct cp_diag *d)
{
    struct cp_trace_store *s = NULL;
    struct cp_trace_run r;
    memset(&r, 0, sizeof r);
    struct cp_trace_pipeline p;
    memset(&p, 0, sizeof p);
    struct cp_buf title;
    cp_buf_init(&title);
    enum cp_status st = cp_trace_store_open_ro(path, &s, d);
    if (st != CP_OK)
        return st;
    if (info)
        info->kind = "trace";
    st = cp_trace_query_run(s, o->run_id, &r, d);
    if (st == CP_OK)
        st = cp_trace_query_pipeline(s, r.id, &p, d);
    if (st != CP_OK)
        goto out;
    if (o->title)
        cp_buf_puts(&title, o->title);
    else
        cp_buf_printf(&title, "%s, run %lld", path, (long long)r.id);
    if (r.model_path[0] && !o->title && p.n_nodes == 0)
        cp_buf_printf(&title, " (%s)", r.model_path);
    cp_buf_putc(&title, '\0');
    if (title.failed) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (p.n_nodes > 0)
        st = draw_pipeline(s, r.id, &p, title.data, o, out, info, d);
    else
        st = draw_kernels(s, path, r.id, title.data, o, out, info, d);
out:
    cp_buf_release(&title);
    cp_trace_pipeline_release(&p);
    cp_trace_run_release(&r);
    cp_trace_store_close(s);
    return st;
}

/* ---- a CPU .om ------------------------------------------------------------------------------- */

static enum cp_status draw_model(const char *path, const struct cp_topology_opts *o,
                                 struct cp_buf *out, struct cp_topology_info *info,
                                 struct cp_diag *d)
{
    struct cp_graph *g = NULL;
    struct topo t;
    memset(&t, 0, sizeof t);
    struct cp_buf label, tip;
    cp_buf_init(&label);
    cp_buf_init(&tip);
    enum cp_status st = cp_om_read(path, &g, NULL, d);
    if (st != CP_OK)
        return st;
    if (info)
        info->kind = "model";
    size_t n = cp_graph_n_nodes(g);
    /* nodes keep their index in the graph, dead ones undrawn */
    st = topo_open(&t, o->title ? o->title : path, cp_graph_n_live_nodes(g), n, o, d);
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (nd->dead)
            continue;
        cp_buf_reset(&label);
        cp_buf_reset(&tip);
        tp_put_text(&label, nd->name, TOPO_LINE_CHARS);
        cp_buf_puts(&label, LABEL_BREAK);
        tp_put_text(&label, nd->op_type, TOPO_LINE_CHARS);
        tp_put_tip(&tip, nd->name);
        cp_buf_puts(&tip, TOOLTIP_BREAK "op ");
        tp_put_tip(&tip, nd->op_type);
        const char *const *org = (const char *const *)nd->origins;
        if (tp_origins_differ(nd->name, org, nd->n_origins))
            tp_put_origins(&label, &tip, org, nd->n_origins);
        cp_buf_putc(&label, '\0');
        cp_buf_putc(&tip, '\0');
        if (label.failed || tip.failed) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        struct topo_look look = {
            .label = label.data, .tooltip = tip.data, .ramp = -1, .fused = nd->n_origins > 1};
        st = topo_node(&t, i, &look, d);
    }
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (nd->dead)
            continue;
        for (size_t a = 0; a < nd->n_inputs && st == CP_OK; a++) {
            int32_t ti = nd->inputs[a];
            if (ti < 0)
                continue;
            const struct cp_tensor *x = cp_graph_tensor(g, ti);
            if (x->producer < 0)
                continue;
            bool seen = false;
            for (size_t b = 0; b < a && !seen; b++)
                seen = nd->inputs[b] == ti;
            if (seen)
                continue;
            /* the shape may hold the model's symbolic dimension names */
            char shape[128], text[160];
            cp_shape_format(&x->shape, shape, sizeof shape);
            snprintf(text, sizeof text, "%s %s", shape, cp_dtype_name(x->dtype));
            cp_buf_reset(&label);
            cp_buf_reset(&tip);
            tp_put_text(&label, text, 0);
            cp_buf_putc(&label, '\0');
            tp_put_tip(&tip, x->name);
            cp_buf_puts(&tip, ": ");
            tp_put_tip(&tip, text);
            cp_buf_printf(&tip, " %s", cp_layout_name(x->layout));
            cp_buf_putc(&tip, '\0');
            if (label.failed || tip.failed)
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            else
                st = topo_edge(&t, (size_t)x->producer, i, label.data, tip.data, false, d);
        }
    }
    if (st != CP_OK)
        goto out;
    cp_buf_reset(&label);
    tp_put_text(&label, o->title ? o->title : path, 0);
    cp_buf_printf(&label, LABEL_BREAK "model: %zu nodes, %zu fused; no times: a model file",
                  t.n_nodes, t.fused);
    st = topo_render(&t, &label, out, d);
    if (st == CP_OK && info) {
        info->nodes = t.n_nodes;
        info->edges = t.n_edges;
        info->fused = t.fused;
    }
out:
    topo_close(&t);
    cp_buf_release(&label);
    cp_buf_release(&tip);
    cp_graph_free(g);
    return st;
}

/* ---- a flow ------------------------------------------------------------------------------------
 */

static enum cp_status draw_flow(const char *path, const struct cp_topology_opts *o,
                                struct cp_buf *out, struct cp_topology_info *info,
                                struct cp_diag *d)
{
    struct cp_flow *f = NULL;
    struct topo t;
    memset(&t, 0, sizeof t);
    struct cp_buf label, tip;
    cp_buf_init(&label);
    cp_buf_init(&tip);
    enum cp_status st = cp_flow_load(path, &f, d);
    if (st != CP_OK)
        return st;
    if (info)
        info->kind = "flow";
    size_t n = cp_flow_n_nodes(f);
    st = topo_open(&t, o->title ? o->title : path, n, n, o, d);
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        struct cp_flow_node_info ni;
        cp_flow_node(f, i, &ni);
        cp_buf_reset(&label);
        cp_buf_reset(&tip);
        tp_put_text(&label, ni.name, TOPO_LINE_CHARS);
        cp_buf_puts(&label, LABEL_BREAK);
        tp_put_text(&label, ni.flowunit, TOPO_LINE_CHARS);
        cp_buf_printf(&label, LABEL_BREAK "workers %d \xc2\xb7 batch %d \xc2\xb7 queue %d",
                      ni.workers, ni.batch_size, ni.queue_size);
        const char *model = cp_flow_node_attr(f, i, "model");
        if (model) {
            cp_buf_puts(&label, LABEL_BREAK "model ");
            tp_put_text(&label, model, TOPO_LINE_CHARS);
        }
        tp_put_tip(&tip, ni.name);
        cp_buf_puts(&tip, TOOLTIP_BREAK "flowunit ");
        tp_put_tip(&tip, ni.flowunit);
        cp_buf_printf(&tip, " (line %d)", ni.line);
        if (model) {
            cp_buf_puts(&tip, TOOLTIP_BREAK "model ");
            tp_put_tip(&tip, model);
        }
        cp_buf_putc(&label, '\0');
        cp_buf_putc(&tip, '\0');
        if (label.failed || tip.failed) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        struct topo_look look = {.label = label.data, .tooltip = tip.data, .ramp = -1};
        st = topo_node(&t, i, &look, d);
    }
    for (size_t i = 0; i < cp_flow_n_edges(f) && st == CP_OK; i++) {
        size_t from, to;
        bool back;
        cp_flow_edge(f, i, &from, &to, &back);
        st = topo_edge(&t, from, to, back ? "loop back" : NULL, NULL, back, d);
    }
    if (st != CP_OK)
        goto out;
    cp_buf_reset(&label);
    tp_put_text(&label, o->title ? o->title : path, 0);
    cp_buf_puts(&label, LABEL_BREAK "flow ");
    tp_put_text(&label, cp_flow_name(f), 0);
    cp_buf_printf(&label, ": %zu nodes, %zu edges; no times: a flow file", t.n_nodes, t.n_edges);
    st = topo_render(&t, &label, out, d);
    if (st == CP_OK && info) {
        info->nodes = t.n_nodes;
        info->edges = t.n_edges;
        info->fused = 0;
    }
out:
    topo_close(&t);
    cp_buf_release(&label);
    cp_buf_release(&tip);
    cp_flow_free(f);
    return st;
}

/* ---- which input -------------------------------------------------------------------------------
 */

/* Whether the head of a file reads as a flow: text with a [graph] table or
 * a graphconf key (then flow.c's own refusals say what is wrong with it). */
static bool looks_like_flow(const uint8_t *head, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (head[i] == 0)
            return false;
    char text[4097];
    memcpy(text, head, n);
    text[n] = '\0';
    return strstr(text, "[graph]") || strstr(text, "graphconf");
}

enum cp_status cp_view_topology(const char *path, const struct cp_topology_opts *o,
                                struct cp_buf *out, struct cp_topology_info *info,
                                struct cp_diag *d)
{
    struct cp_topology_opts dflt = {.run_id = -1};
    if (!o)
        o = &dflt;
    if (info)
        *info = (struct cp_topology_info){.kind = ""};
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return cp_diag_set(d, CP_ERR_IO, "%s: %s", path,
                           errno == ENOENT ? "no such file" : strerror(errno));
    uint8_t head[4096];
    size_t n = fread(head, 1, sizeof head, fp);
    bool bad = ferror(fp) != 0;
    fclose(fp);
    if (bad)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot be read", path);
    if (n == 0)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: an empty file: a topology is drawn from %s",
                           path, KINDS_TAKEN);
    if (cp_trace_is_sqlite(head, n))
        return draw_trace(path, o, out, info, d);
    if (n >= 4 && cp_om_sniff(head, n) != CP_OM_KIND_UNKNOWN)
        return draw_model(path, o, out, info, d);
    if (looks_like_flow(head, n))
        return draw_flow(path, o, out, info, d);
    return cp_diag_set(d, CP_ERR_INVALID,
                       "%s: neither a trace store, a CPU .om nor a flow: a topology is drawn "
                       "from %s",
                       path, KINDS_TAKEN);
}
