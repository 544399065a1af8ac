/* The conv regions of a converted model, for the tuner's per-region layout
 * knob (--layout_regions): the connected sets of nodes that keep their
 * activations in NHWC or a blocked layout, each named by the ONNX node of
 * its first convolution. */
#include "tuner/tuner_internal.h"

#include "om/om.h"

#include <stdlib.h>
#include <string.h>

static bool laid_out(enum cp_layout l)
{
    return l == CP_LAYOUT_NHWC || l == CP_LAYOUT_NCHW8C || l == CP_LAYOUT_NCHW16C;
}

static int32_t find(int32_t *parent, int32_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

enum cp_status cp_tune_conv_regions(const char *om, struct cp_tune_region **out, size_t *n,
                                    struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    struct cp_graph *g = NULL;
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    enum cp_status st = cp_om_read(om, &g, &meta, d);
    cp_om_meta_release(&meta);
    if (st != CP_OK)
        return st;
    size_t nn = cp_graph_n_nodes(g);
    int32_t *parent = cp_calloc(nn ? nn : 1, sizeof *parent);
    bool *in = cp_calloc(nn ? nn : 1, sizeof *in);
    struct cp_tune_region *v = cp_calloc(nn ? nn : 1, sizeof *v);
    if (!parent || !in || !v)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < nn; i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        parent[i] = (int32_t)i;
        in[i] = !nd->dead && nd->op != CP_OP_TRANS_DATA && nd->n_outputs > 0 &&
                nd->outputs[0] >= 0 && laid_out(cp_graph_tensor(g, nd->outputs[0])->layout);
    }
    for (size_t i = 0; st == CP_OK && i < nn; i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        for (size_t k = 0; in[i] && k < nd->n_inputs; k++) {
            if (nd->inputs[k] < 0)
                continue;
            int32_t p = cp_graph_tensor(g, nd->inputs[k])->producer;
            if (p >= 0 && (size_t)p < nn && in[p])
                parent[find(parent, p)] = find(parent, (int32_t)i);
        }
    }
    /* one region per root, in order of its first node; named by its first
     * convolution (else its first node) */
    size_t k = 0;
    for (size_t i = 0; st == CP_OK && i < nn; i++) {
        if (!in[i])
            continue;
        int32_t root = find(parent, (int32_t)i);
        size_t r = 0;
        while (r < k && v[r].root != root)
            r++;
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        bool conv = nd->op == CP_OP_CONV || nd->op == CP_OP_FUSED_CONV;
        if (r == k) {
            v[k].root = root;
            v[k].nodes = 0;
            v[k].has_conv = false;
            k++;
        }
        v[r].nodes++;
        if (!v[r].name[0] || (conv && !v[r].has_conv)) {
            snprintf(v[r].name, sizeof v[r].name, "%s", nd->n_origins ? nd->origins[0] : nd->name);
            v[r].nhwc = cp_graph_tensor(g, nd->outputs[0])->layout == CP_LAYOUT_NHWC;
            v[r].has_conv = v[r].has_conv || conv;
        }
    }
    free(parent);
    free(in);
    cp_graph_free(g);
    if (st != CP_OK) {
        free(v);
        return st;
    }
    *out = v;
    *n = k;
    return CP_OK;
}
