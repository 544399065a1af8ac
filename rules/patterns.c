/*
 * Unfused patterns still present in the converted graph, found on the
 * kernel table of a trace.
 *
 * The patterns, the pass that fuses each (its fusion switch) and the hint
 * a finding gives are graph/pattern.h's table, which the passes name
 * themselves by; docs/features.md lists them. Each pattern is matched by
 * graph/pattern.h's matcher, the code its pass runs, on a view of the
 * kernel table (patterns_view.c), so a pattern is reported exactly when
 * the pass, run on the graph the trace was recorded from, would fuse it,
 * up to what a trace cannot say (patterns_internal.h).
 *
 * A finding lists the kernels the pass would replace (the views among the
 * nodes it replaces run no kernel). A kernel belongs to at most one
 * pattern: matchers run in the table's order and skip an instance that
 * shares a kernel with one found before. An epilogue or GroupNorm whose
 * activation is a decomposed GELU leaves the GELU's kernels to the gelu
 * pattern (its pass fuses them first).
 *
 * One pattern is this file's own: a TransData round trip (a TransData, at
 * most 4 kernels, then a TransData that restores the first one's input
 * shape and layout). No pass fuses it; LayoutTransformPass put both there,
 * because the ops between have no kernel for the blocked layout.
 */
#include "core/json.h"
#include "rules/patterns_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct pg {
    struct cp_features *f;
    const struct cp_fload *l;
    size_t n; /* rows */
    bool *used;
    /* the run's switched-off passes, "A:off;B:off" */
    char *switches_off;
    struct cp_trace_view tv;
};

static const struct cp_fk *K(const struct pg *g, int r)
{
    return &g->l->k[r];
}

static const struct cp_pattern_view *V(const struct pg *g)
{
    return &g->tv.view;
}

/* ---- recording a pattern ------------------------------------------------------------ */

struct rows {
    int r[CP_PATTERN_MAX_REGION * 2];
    size_t n;
};

/* Add view node `node` when it is a kernel (views run none). */
static void push(const struct pg *g, struct rows *x, int32_t node)
{
    if (!cp_trace_view_is_kernel(&g->tv, node))
        return;
    for (size_t i = 0; i < x->n; i++)
        if (x->r[i] == node)
            return;
    if (x->n < sizeof x->r / sizeof x->r[0])
        x->r[x->n++] = node;
}

static void push_all(const struct pg *g, struct rows *x, const int32_t *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        push(g, x, nodes[i]);
}

/* The nodes of an activation that a fused op takes, leaving out a
 * decomposed GELU's (the gelu pattern's). */
static void push_act(const struct pg *g, struct rows *x, const int32_t *nodes, size_t n,
                     const struct cp_pattern_act *a)
{
    for (size_t i = 0; i < n; i++) {
        bool gelu = false;
        for (size_t j = 0; cp_pattern_act_is_decomposed_gelu(a) && j < a->n_nodes && !gelu; j++)
            gelu = a->nodes[j] == nodes[i];
        if (!gelu)
            push(g, x, nodes[i]);
    }
}

static bool any_used(const struct pg *g, const struct rows *x)
{
    for (size_t i = 0; i < x->n; i++)
        if (g->used[x->r[i]])
            return true;
    return false;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* JSON arrays of the rows' node names and of the union of their origins,
 * in row order. */
static enum cp_status names_json(const struct pg *g, const struct rows *x, char **nodes,
                                 char **origins)
{
    json_t *na = json_array(), *oa = json_array(), *seen = json_object();
    bool ok = na && oa && seen;
    for (size_t i = 0; ok && i < x->n; i++) {
        const struct cp_fk *k = K(g, x->r[i]);
        ok = cp_json_push(na, cp_json_str(k->node));
        json_t *a = json_loads(k->origins, 0, NULL);
        for (size_t j = 0; ok && json_is_array(a) && j < json_array_size(a); j++) {
            const char *o = json_string_value(json_array_get(a, j));
            if (!o || json_object_get(seen, o))
                continue;
            ok = json_object_set_new(seen, o, json_true()) == 0 && cp_json_push(oa, cp_json_str(o));
        }
        json_decref(a);
    }
    *nodes = ok ? cp_json_text(na) : NULL;
    *origins = ok ? cp_json_text(oa) : NULL;
    json_decref(na);
    json_decref(oa);
    json_decref(seen);
    if (!*nodes || !*origins) {
        free(*nodes);
        free(*origins);
        *nodes = *origins = NULL;
        return CP_ERR_NOMEM;
    }
    return CP_OK;
}

/* Whether the run's conversion config switched `pass` off. */
static bool pass_off(const char *switches, const char *pass)
{
    if (!switches || !*pass)
        return false;
    size_t n = strlen(pass);
    for (const char *p = switches; (p = strstr(p, pass)) != NULL; p += n)
        if ((p == switches || p[-1] == ';') && strncmp(p + n, ":off", 4) == 0)
            return true;
    return false;
}

/* Record the pattern made of rows x, unless one of them is taken. */
static enum cp_status add(struct pg *g, enum cp_pattern_id id, struct rows *x, struct cp_diag *d)
{
    if (x->n == 0 || any_used(g, x))
        return CP_OK;
    const struct cp_pattern_def *def = cp_pattern_get(id);
    const char *kind = def->kind, *pass = def->fix_pass, *hint = def->fix_hint;
    struct cp_features *f = g->f;
    if (f->n_patterns % 16 == 0) {
        struct cp_pattern *np = cp_realloc_array(f->patterns, f->n_patterns + 16, sizeof *np);
        if (!np)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory finding patterns");
        f->patterns = np;
    }
    qsort(x->r, x->n, sizeof x->r[0], cmp_int);
    struct cp_pattern *p = &f->patterns[f->n_patterns];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->fix_pass = pass;
    p->fix_hint = hint;
    p->fix_pass_off = pass_off(g->switches_off, pass);
    p->kernels = cp_calloc(x->n, sizeof *p->kernels);
    if (!p->kernels || names_json(g, x, &p->nodes_json, &p->origins_json) != CP_OK) {
        free(p->kernels);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory finding patterns");
    }
    f->n_patterns++;
    p->n = x->n;
    double kt = 0;
    for (size_t i = 0; i < f->n_kernels; i++)
        kt += isfinite(f->kernels[i].mean_ns) ? f->kernels[i].mean_ns : 0;
    for (size_t i = 0; i < x->n; i++) {
        struct cp_kernel_feat *row = &f->kernels[x->r[i]];
        p->kernels[i] = row->idx;
        p->time_ns += isfinite(row->mean_ns) ? row->mean_ns : 0;
        row->pattern = kind;
        g->used[x->r[i]] = true;
    }
    p->time_share = kt > 0 ? p->time_ns / kt : NAN;
    if (g->l->n_dev_iter == 0)
        p->time_ns = NAN;
    return CP_OK;
}

/* Whether row r is op `op` and not taken yet. */
static bool free_row(const struct pg *g, int r, enum cp_op op)
{
    return !g->used[r] && g->tv.nodes[r].op == op;
}

/* ---- the fused patterns ------------------------------------------------------------ */

static enum cp_status find_attention(struct pg *g, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    for (int r = 0; r < (int)g->n && st == CP_OK; r++) {
        struct cp_pattern_attention m;
        if (!free_row(g, r, CP_OP_SOFTMAX) || !cp_pattern_match_attention(V(g), r, &m))
            continue;
        struct rows x = {.n = 0};
        push_all(g, &x, m.nodes, m.n_nodes);
        st = add(g, CP_PATTERN_ATTENTION, &x, d);
    }
    return st;
}

static enum cp_status find_layernorm(struct pg *g, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    for (int r = 0; r < (int)g->n && st == CP_OK; r++) {
        struct cp_pattern_layernorm m;
        if (!free_row(g, r, CP_OP_REDUCE_MEAN) || !cp_pattern_match_layernorm(V(g), r, &m))
            continue;
        struct rows x = {.n = 0};
        push_all(g, &x, m.nodes, m.n_nodes);
        st = add(g, CP_PATTERN_LAYERNORM, &x, d);
    }
    return st;
}

static enum cp_status find_groupnorm(struct pg *g, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    for (int r = 0; r < (int)g->n && st == CP_OK; r++) {
        struct cp_pattern_groupnorm m;
        if (!free_row(g, r, CP_OP_INSTANCE_NORMALIZATION) ||
            !cp_pattern_match_groupnorm(V(g), r, &m))
            continue;
        struct rows x = {.n = 0};
        if (m.has_act)
            push_act(g, &x, m.nodes, m.n_nodes, &m.act);
        else
            push_all(g, &x, m.nodes, m.n_nodes);
        st = add(g, CP_PATTERN_GROUPNORM, &x, d);
    }
    return st;
}

static enum cp_status find_gelu(struct pg *g, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    for (int r = 0; r < (int)g->n && st == CP_OK; r++) {
        struct rows x = {.n = 0};
        if (free_row(g, r, CP_OP_ERF)) {
            /* where GeluFusionPass starts: the Erf's input */
            struct cp_pattern_act m;
            int32_t in = cp_pattern_gelu_input(V(g), r);
            if (in < 0 || !cp_pattern_match_gelu(V(g), in, &m))
                continue;
            push_all(g, &x, m.nodes, m.n_nodes);
            st = add(g, CP_PATTERN_GELU, &x, d);
        } else if (free_row(g, r, CP_OP_TANH)) {
            int32_t nodes[CP_PATTERN_MAX_NODES], in;
            size_t n;
            if (!cp_pattern_match_gelu_tanh(V(g), r, nodes, &n, &in))
                continue;
            push_all(g, &x, nodes, n);
            st = add(g, CP_PATTERN_GELU_TANH, &x, d);
        }
    }
    return st;
}

/* Conv, MatMul and Gemm epilogues, and Conv + BatchNormalization, in
 * kernel order. */
static enum cp_status find_epilogues(struct pg *g, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    for (int r = 0; r < (int)g->n && st == CP_OK; r++) {
        if (g->used[r])
            continue;
        struct rows x = {.n = 0};
        struct cp_pattern_epilogue m;
        enum cp_op op = g->tv.nodes[r].op;
        if (op == CP_OP_BATCH_NORMALIZATION) {
            int32_t conv = cp_pattern_match_conv_bn(V(g), r);
            if (conv < 0)
                continue;
            push(g, &x, conv);
            push(g, &x, r);
            st = add(g, CP_PATTERN_CONV_BN, &x, d);
            continue;
        }
        bool conv = op == CP_OP_CONV;
        bool found = conv               ? cp_pattern_match_conv(V(g), r, &m)
                     : op == CP_OP_GEMM ? cp_pattern_match_gemm(V(g), r, &m)
                                        : cp_pattern_match_matmul(V(g), r, &m);
        /* a Gemm alone is rewritten, not fused: nothing to report */
        if (!found || m.n_nodes < 2)
            continue;
        push_act(g, &x, m.nodes, m.n_nodes, &m.tail.act);
        bool act = m.tail.has_act;
        st = add(g,
                 conv  ? (act ? CP_PATTERN_CONV_ACT : CP_PATTERN_CONV_ADD)
                 : act ? CP_PATTERN_MATMUL_ACT
                       : CP_PATTERN_MATMUL_ADD,
                 &x, d);
    }
    return st;
}

/* ---- layout round trips ------------------------------------------------------------- */

static enum cp_status find_transpose_roundtrips(struct pg *g, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    for (int r = 0; r < (int)g->n && st == CP_OK; r++) {
        if (!free_row(g, r, CP_OP_TRANSPOSE))
            continue;
        struct cp_pattern_roundtrip R;
        if (cp_pattern_match_roundtrip(V(g), r, &R, &st)) {
            /* what the pass removes: the entries and the exits */
            struct rows x = {.n = 0};
            push_all(g, &x, R.entries, R.n_entries);
            push_all(g, &x, R.exits, R.n_exits);
            st = add(g, CP_PATTERN_ROUNDTRIP_TRANSPOSE, &x, d);
        } else if (st != CP_OK) {
            st = cp_diag_set(d, st, "out of memory finding patterns");
        }
        cp_pattern_roundtrip_release(&R);
    }
    return st;
}

#define ROUNDTRIP_MAX_BETWEEN 4

/* The kernel that makes input i of row r, through views (the table's own
 * links: TransData included). -1 when none. */
static int input_maker(const struct pg *g, int r, size_t i)
{
    return i < K(g, r)->n_in ? cp_trace_view_maker(&g->tv, K(g, r)->in[i].src) : -1;
}

/* The input of row r that carries its main data: input 0 of layout ops,
 * else the largest input a kernel makes. -1 when none. */
static int main_input(const struct pg *g, int r)
{
    const struct cp_fk *k = K(g, r);
    if (cp_feat_is_layout_op(k->op_type))
        return k->n_in ? 0 : -1;
    int best = -1;
    for (size_t i = 0; i < k->n_in; i++)
        if (input_maker(g, r, i) >= 0 && (best < 0 || k->in[i].numel > k->in[best].numel))
            best = (int)i;
    return best;
}

static bool same_shape(const struct cp_ftensor *a, const struct cp_ftensor *b)
{
    if (a->rank < 0 || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

static enum cp_status find_transdata_roundtrips(struct pg *g, struct cp_diag *d)
{
    for (int r2 = 0; r2 < (int)g->n; r2++) {
        const struct cp_fk *k2 = K(g, r2);
        if (!free_row(g, r2, CP_OP_TRANS_DATA) || k2->n_out < 1)
            continue;
        int cur = r2;
        for (int hop = 0; hop <= ROUNDTRIP_MAX_BETWEEN; hop++) {
            int i = main_input(g, cur);
            int p = i >= 0 ? input_maker(g, cur, (size_t)i) : -1;
            if (p < 0)
                break;
            const struct cp_fk *k1 = K(g, p);
            if (!cp_feat_is_layout_op(k1->op_type)) {
                cur = p;
                continue;
            }
            if (g->used[p] || k1->n_in < 1 || g->tv.nodes[p].op != CP_OP_TRANS_DATA ||
                !same_shape(&k1->in[0], &k2->out[0]) ||
                strcmp(k1->in[0].layout, k2->out[0].layout) != 0)
                break;
            struct rows x = {.n = 0};
            push(g, &x, p);
            push(g, &x, r2);
            enum cp_status st = add(g, CP_PATTERN_ROUNDTRIP_TRANSDATA, &x, d);
            if (st != CP_OK)
                return st;
            break;
        }
    }
    return CP_OK;
}

/* ---- entry ------------------------------------------------------------------------ */

static int cmp_pattern(const void *a, const void *b)
{
    const struct cp_pattern *x = a, *y = b;
    size_t i = x->n ? x->kernels[0] : 0, j = y->n ? y->kernels[0] : 0;
    return (i > j) - (i < j);
}

/* The run's switched-off passes from its config JSON ("fusion_switches"). */
static char *switches_off(const char *config_json)
{
    json_t *c = config_json ? json_loads(config_json, 0, NULL) : NULL;
    json_t *s = json_object_get(c, "fusion_switches");
    char *out = json_is_string(s) ? cp_strdup(json_string_value(s)) : NULL;
    json_decref(c);
    return out;
}

enum cp_status cp_patterns_find(struct cp_features *f, struct cp_diag *d)
{
    struct pg g;
    memset(&g, 0, sizeof g);
    g.f = f;
    g.l = &f->priv->load;
    g.n = f->n_kernels;
    g.switches_off = switches_off(g.l->config_json);
    g.used = cp_calloc(g.n + 1, sizeof *g.used);
    enum cp_status st =
        g.used
            ? cp_trace_view_build(&g.tv, g.l, pass_off(g.switches_off, CP_PASS_MATMUL_BIAS_ACT), d)
            : cp_diag_set(d, CP_ERR_NOMEM, "out of memory finding patterns");
    if (st == CP_OK)
        st = find_attention(&g, d);
    if (st == CP_OK)
        st = find_layernorm(&g, d);
    if (st == CP_OK)
        st = find_groupnorm(&g, d);
    if (st == CP_OK)
        st = find_gelu(&g, d);
    if (st == CP_OK)
        st = find_epilogues(&g, d);
    if (st == CP_OK)
        st = find_transdata_roundtrips(&g, d);
    if (st == CP_OK)
        st = find_transpose_roundtrips(&g, d);
    if (st == CP_OK && f->n_patterns > 1)
        qsort(f->patterns, f->n_patterns, sizeof *f->patterns, cmp_pattern);
    cp_trace_view_release(&g.tv);
    free(g.used);
    free(g.switches_off);
    return st;
}
