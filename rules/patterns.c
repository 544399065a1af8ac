/*
 * Unfused patterns still present in the converted graph, found on the
 * kernel table of a trace.
 *
 * Kernels are linked through tensor names: a kernel's input is made by the
 * kernel whose output has that name (through "view_of" when the input is a
 * view, so Reshapes that run no kernel do not break the chain; see
 * docs/trace-format.md). An input no kernel makes is "external": a weight,
 * a constant or a graph input.
 *
 * The patterns, the pass that fuses each (its fusion switch) and the hint
 * a finding gives are graph/pattern.h's table, which the passes name
 * themselves by; docs/features.md lists them. Each matcher mirrors what its
 * pass fuses, so a pattern found means that pass could remove it. The
 * activation a Conv or MatMul epilogue absorbs (one op, or SiLU) is matched
 * by graph/pattern.h's matcher, the one the fusion passes run, on a view of
 * the kernel graph; the chains below are this file's own (a trace has no
 * constant values, attributes or graph outputs to check, so they match the
 * structure a pass requires):
 *
 *   attention         MatMul -> [Mul/Div scale] -> [Add mask] -> Softmax ->
 *                     MatMul, with the head split/merge Transposes private
 *                     to it
 *   layernorm         ReduceMean -> Sub -> Pow|Mul -> ReduceMean -> Add ->
 *                     Sqrt -> Div [-> Mul gamma -> Add beta]
 *   groupnorm         (Reshape) InstanceNormalization (Reshape) -> Mul ->
 *                     Add [-> SiLU]
 *   gelu              Div|Mul -> Erf -> Add -> Mul -> Mul (erf form); the
 *                     tanh form (Pow/Mul, Add, Mul, Tanh, Add, Mul, Mul) is
 *                     reported with no pass: none fuses it
 *   conv_act, matmul_act   Conv, or MatMul with a weight, or Gemm, then
 *                     [bias Add], an activation (Relu, LeakyRelu, Clip,
 *                     Sigmoid, Gelu, SiLU = Sigmoid + Mul, or a decomposed
 *                     GELU), [residual Add]
 *   conv_add, matmul_add   the same with only a bias and/or residual Add
 *   conv_bn           Conv -> BatchNormalization [-> activation, residual Add]
 *   layout_roundtrip  a TransData or Transpose, at most 4 kernels, then one
 *                     that restores the first one's input shape and layout
 *
 * A kernel belongs to at most one pattern: matchers run in the order above
 * and skip kernels already taken. Intermediate tensors of the core chains
 * must have one reader, as the passes require.
 */
#include "rules/features_internal.h"
#include "core/hashmap.h"
#include "graph/pattern.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the kernel graph ------------------------------------------------------------ */

struct tensor_entry {
    const char *name;
    int producer;  /* row, -1 when external */
    size_t n_cons; /* readers (rows), each once */
    size_t off;    /* into pg.cons */
    int last_row;  /* while counting: the last row counted */
};

struct pg {
    struct cp_features *f;
    const struct cp_fload *l;
    size_t n; /* rows */
    struct tensor_entry *t;
    size_t n_t, cap_t;
    struct cp_strmap names; /* tensor name -> entry index */
    int *cons;
    bool *used;
    /* gelu inputs: a conv/matmul whose output feeds a decomposed GELU has
     * an activation */
    const char **gelu_x;
    size_t n_gelu;
    /* the run's switched-off passes, "A:off;B:off" */
    char *switches_off;
    /* per row: its op in graph.h's table (CP_OP_UNKNOWN for others) */
    enum cp_op *ops;
    /* the kernel graph as graph/pattern.h's matchers see it: rows are
     * nodes, tensor entries tensors */
    struct cp_pattern_view view;
};

static const struct cp_fk *K(const struct pg *g, int r)
{
    return &g->l->k[r];
}

static bool is_op(const struct pg *g, int r, const char *op)
{
    return r >= 0 && strcmp(K(g, r)->op_type, op) == 0;
}

static int find_entry(const struct pg *g, const char *name)
{
    return (int)cp_strmap_gets(&g->names, name, -1);
}

/* The entry of `name`, added when new. -1 on OOM. */
static int entry(struct pg *g, const char *name)
{
    int e = find_entry(g, name);
    if (e >= 0)
        return e;
    if (g->n_t == g->cap_t)
        return -1; /* sized up front: cannot happen */
    struct tensor_entry *t = &g->t[g->n_t];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->producer = -1;
    t->last_row = -1;
    if (cp_strmap_puts(&g->names, name, (int64_t)g->n_t) != CP_OK)
        return -1; /* room was reserved: cannot happen */
    return (int)g->n_t++;
}

static enum cp_op op_of(const char *op_type);
static enum cp_op view_op(const void *ctx, int32_t r);
static size_t view_n_inputs(const void *ctx, int32_t r);
static int32_t view_input(const void *ctx, int32_t r, size_t i);
static int32_t view_output(const void *ctx, int32_t r, size_t i);
static size_t view_readers(const void *ctx, int32_t e, int32_t *out, size_t max);
static bool view_private_to(const void *ctx, int32_t e, int reads);

static enum cp_status build(struct pg *g, struct cp_diag *d)
{
    size_t names = 0;
    for (size_t r = 0; r < g->n; r++)
        names += K(g, (int)r)->n_in + K(g, (int)r)->n_out;
    g->cap_t = names + 1;
    g->t = cp_calloc(g->cap_t, sizeof *g->t);
    g->used = cp_calloc(g->n + 1, sizeof *g->used);
    g->gelu_x = cp_calloc(g->n + 1, sizeof *g->gelu_x);
    g->ops = cp_calloc(g->n + 1, sizeof *g->ops);
    if (!g->t || cp_strmap_reserve(&g->names, g->cap_t) != CP_OK || !g->used || !g->gelu_x ||
        !g->ops)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory finding patterns");
    for (size_t r = 0; r < g->n; r++)
        g->ops[r] = op_of(K(g, (int)r)->op_type);
    g->view = (struct cp_pattern_view){g,           view_op,      view_n_inputs,  view_input,
                                       view_output, view_readers, view_private_to};
    size_t n_cons = 0;
    for (size_t r = 0; r < g->n; r++) {
        const struct cp_fk *k = K(g, (int)r);
        for (size_t j = 0; j < k->n_out; j++) {
            int e = entry(g, k->out[j].name);
            if (e >= 0 && g->t[e].producer < 0)
                g->t[e].producer = (int)r;
        }
        for (size_t i = 0; i < k->n_in; i++) {
            int e = entry(g, k->in[i].src);
            if (e >= 0 && g->t[e].last_row != (int)r) {
                g->t[e].last_row = (int)r;
                g->t[e].n_cons++;
                n_cons++;
            }
        }
    }
    g->cons = cp_calloc(n_cons + 1, sizeof *g->cons);
    if (!g->cons)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory finding patterns");
    size_t off = 0;
    for (size_t e = 0; e < g->n_t; e++) {
        g->t[e].off = off;
        off += g->t[e].n_cons;
        g->t[e].n_cons = 0;
        g->t[e].last_row = -1;
    }
    for (size_t r = 0; r < g->n; r++) {
        const struct cp_fk *k = K(g, (int)r);
        for (size_t i = 0; i < k->n_in; i++) {
            struct tensor_entry *t = &g->t[find_entry(g, k->in[i].src)];
            if (t->last_row != (int)r) {
                t->last_row = (int)r;
                g->cons[t->off + t->n_cons++] = (int)r;
            }
        }
    }
    return CP_OK;
}

/* The row that makes input i of row r; -1 when external or absent. */
static int producer(const struct pg *g, int r, size_t i)
{
    if (r < 0 || i >= K(g, r)->n_in)
        return -1;
    int e = find_entry(g, K(g, r)->in[i].src);
    return e >= 0 ? g->t[e].producer : -1;
}

/* The rows reading output 0 of row r. OUT: *n. */
static const int *consumers(const struct pg *g, int r, size_t *n)
{
    *n = 0;
    if (r < 0 || K(g, r)->n_out == 0)
        return NULL;
    int e = find_entry(g, K(g, r)->out[0].name);
    if (e < 0)
        return NULL;
    *n = g->t[e].n_cons;
    return g->cons + g->t[e].off;
}

/* The only reader of output 0 of r, or -1. */
static int sole_consumer(const struct pg *g, int r)
{
    size_t n;
    const int *c = consumers(g, r, &n);
    return n == 1 ? c[0] : -1;
}

static const char *out0(const struct pg *g, int r)
{
    return r >= 0 && K(g, r)->n_out ? K(g, r)->out[0].name : "";
}

static bool reads(const struct pg *g, int r, size_t i, const char *name)
{
    return r >= 0 && i < K(g, r)->n_in && strcmp(K(g, r)->in[i].src, name) == 0;
}

/* Input i of r is a constant with one element (a scalar). */
static bool scalar_input(const struct pg *g, int r, size_t i)
{
    return i < K(g, r)->n_in && producer(g, r, i) < 0 && K(g, r)->in[i].numel == 1;
}

/* A two-input row reading `name` on one side: the other side's index, -1. */
static int other_side(const struct pg *g, int r, const char *name)
{
    if (r < 0 || K(g, r)->n_in != 2)
        return -1;
    if (reads(g, r, 0, name))
        return 1;
    if (reads(g, r, 1, name))
        return 0;
    return -1;
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

/* ---- the pattern view (graph/pattern.h) --------------------------------------------------- */

/* A kernel's op in the op table: either domain (the trace does not say),
 * CP_OP_UNKNOWN for an op we do not know (imported traces). */
static enum cp_op op_of(const char *op_type)
{
    enum cp_op op = cp_op_from_name(op_type);
    return op != CP_OP_UNKNOWN ? op : cp_op_from_domain_name(CP_DOMAIN, op_type);
}

static enum cp_op view_op(const void *ctx, int32_t r)
{
    const struct pg *g = ctx;
    return g->ops[r];
}

static size_t view_n_inputs(const void *ctx, int32_t r)
{
    return K(ctx, r)->n_in;
}

static int32_t view_input(const void *ctx, int32_t r, size_t i)
{
    const struct cp_fk *k = K(ctx, r);
    return i < k->n_in ? find_entry(ctx, k->in[i].src) : -1;
}

static int32_t view_output(const void *ctx, int32_t r, size_t i)
{
    const struct cp_fk *k = K(ctx, r);
    return i < k->n_out ? find_entry(ctx, k->out[i].name) : -1;
}

/* Readers are kernels, each counted once however many of its inputs read
 * the tensor. */
static size_t view_readers(const void *ctx, int32_t e, int32_t *out, size_t max)
{
    const struct pg *g = ctx;
    if (e < 0)
        return 0;
    const struct tensor_entry *t = &g->t[e];
    for (size_t i = 0; i < t->n_cons && i < max; i++)
        out[i] = g->cons[t->off + i];
    return t->n_cons;
}

/* A trace knows no graph outputs: private means read by that many kernels. */
static bool view_private_to(const void *ctx, int32_t e, int reads)
{
    const struct pg *g = ctx;
    return e >= 0 && g->t[e].n_cons == (size_t)reads;
}

/* The tensor entry of output 0 of row r; -1 when none. */
static int32_t out0_entry(const struct pg *g, int r)
{
    return r >= 0 ? view_output(g, r, 0) : -1;
}

/* ---- recording a pattern ------------------------------------------------------------ */

struct rows {
    int r[32];
    size_t n;
};

static void push(struct rows *x, int r)
{
    for (size_t i = 0; i < x->n; i++)
        if (x->r[i] == r)
            return;
    if (r >= 0 && x->n < sizeof x->r / sizeof x->r[0])
        x->r[x->n++] = r;
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
    struct cp_buf nb, ob;
    cp_buf_init(&nb);
    cp_buf_init(&ob);
    json_t *seen = json_object();
    bool first_o = true;
    cp_buf_putc(&nb, '[');
    cp_buf_putc(&ob, '[');
    for (size_t i = 0; i < x->n; i++) {
        const struct cp_fk *k = K(g, x->r[i]);
        if (i)
            cp_buf_putc(&nb, ',');
        cp_buf_json_str(&nb, k->node);
        json_t *a = json_loads(k->origins, 0, NULL);
        for (size_t j = 0; json_is_array(a) && j < json_array_size(a); j++) {
            const char *o = json_string_value(json_array_get(a, j));
            if (!o || !seen || json_object_get(seen, o))
                continue;
            json_object_set_new(seen, o, json_true());
            if (!first_o)
                cp_buf_putc(&ob, ',');
            first_o = false;
            cp_buf_json_str(&ob, o);
        }
        json_decref(a);
    }
    cp_buf_putc(&nb, ']');
    cp_buf_putc(&ob, ']');
    enum cp_status st = seen ? CP_OK : CP_ERR_NOMEM;
    json_decref(seen);
    if (st == CP_OK && (cp_buf_status(&nb) != CP_OK || cp_buf_status(&ob) != CP_OK))
        st = CP_ERR_NOMEM;
    if (st != CP_OK) {
        cp_buf_release(&nb);
        cp_buf_release(&ob);
        return st;
    }
    *nodes = cp_buf_steal(&nb);
    *origins = cp_buf_steal(&ob);
    return CP_OK;
}

/* Whether the run's conversion config switched `pass` off. */
static bool pass_off(const struct pg *g, const char *pass)
{
    if (!g->switches_off || !*pass)
        return false;
    size_t n = strlen(pass);
    for (const char *p = g->switches_off; (p = strstr(p, pass)) != NULL; p += n)
        if ((p == g->switches_off || p[-1] == ';') && strncmp(p + n, ":off", 4) == 0)
            return true;
    return false;
}

static enum cp_status add(struct pg *g, enum cp_pattern_id id, struct rows *x, struct cp_diag *d)
{
    if (x->n == 0)
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
    p->fix_pass_off = pass_off(g, pass);
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

/* ---- attention -------------------------------------------------------------------- */

/* Of a Mul/Div/Add on the scores, the input carrying them: made by a kernel
 * and as large as the output. -1 when none. */
static int scores_input(const struct pg *g, int r)
{
    const struct cp_fk *k = K(g, r);
    for (size_t i = 0; i < k->n_in && i < 2; i++)
        if (producer(g, r, i) >= 0 && k->n_out && k->in[i].numel == k->out[0].numel)
            return (int)i;
    return -1;
}

static bool is_matmul(const struct pg *g, int r)
{
    return is_op(g, r, "MatMul") || is_op(g, r, "FusedMatMul");
}

/* Transposes that only feed `r` through input i (head split), up to 2. */
static void head_split(const struct pg *g, int r, size_t i, struct rows *x)
{
    int next = r;
    int p = producer(g, r, i);
    for (int hop = 0; hop < 2 && is_op(g, p, "Transpose") && sole_consumer(g, p) == next; hop++) {
        push(x, p);
        next = p;
        p = producer(g, p, 0);
    }
}

static enum cp_status find_attention(struct pg *g, struct cp_diag *d)
{
    for (int s = 0; s < (int)g->n; s++) {
        if (!is_op(g, s, "Softmax") || g->used[s])
            continue;
        struct rows x = {.n = 0};
        push(&x, s);
        int next = s, p = producer(g, s, 0);
        for (int hop = 0; hop < 3 && p >= 0 && sole_consumer(g, p) == next &&
                          (is_op(g, p, "Mul") || is_op(g, p, "Div") || is_op(g, p, "Add"));
             hop++) {
            push(&x, p);
            int i = scores_input(g, p);
            next = p;
            p = i >= 0 ? producer(g, p, (size_t)i) : -1;
        }
        if (!is_matmul(g, p) || sole_consumer(g, p) != next)
            continue;
        int mm1 = p, mm2 = sole_consumer(g, s);
        if (!is_matmul(g, mm2) || !reads(g, mm2, 0, out0(g, s)))
            continue;
        push(&x, mm1);
        push(&x, mm2);
        head_split(g, mm1, 0, &x);
        head_split(g, mm1, 1, &x);
        head_split(g, mm2, 1, &x);
        int merge = sole_consumer(g, mm2);
        if (is_op(g, merge, "Transpose"))
            push(&x, merge);
        if (any_used(g, &x))
            continue;
        enum cp_status st = add(g, CP_PATTERN_ATTENTION, &x, d);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* ---- LayerNorm, GroupNorm ------------------------------------------------------------ */

/* Follow an optional affine tail: Mul by an external tensor, then Add of
 * one. Returns the last row taken (or r). */
static int affine_tail(const struct pg *g, int r, struct rows *x)
{
    int m = sole_consumer(g, r);
    int o = other_side(g, m, out0(g, r));
    if (!is_op(g, m, "Mul") || o < 0 || producer(g, m, (size_t)o) >= 0)
        return r;
    push(x, m);
    int a = sole_consumer(g, m);
    o = other_side(g, a, out0(g, m));
    if (!is_op(g, a, "Add") || o < 0 || producer(g, a, (size_t)o) >= 0)
        return m;
    push(x, a);
    return a;
}

static int consumer_with_op(const struct pg *g, int r, const char *op)
{
    size_t n;
    const int *c = consumers(g, r, &n);
    for (size_t i = 0; i < n; i++)
        if (is_op(g, c[i], op))
            return c[i];
    return -1;
}

static enum cp_status find_layernorm(struct pg *g, struct cp_diag *d)
{
    for (int r1 = 0; r1 < (int)g->n; r1++) {
        if (!is_op(g, r1, "ReduceMean") || g->used[r1] || K(g, r1)->n_in < 1)
            continue;
        const char *xn = K(g, r1)->in[0].src;
        int sub = consumer_with_op(g, r1, "Sub");
        if (!reads(g, sub, 0, xn) || !reads(g, sub, 1, out0(g, r1)))
            continue;
        const char *dev = out0(g, sub);
        size_t n;
        const int *c = consumers(g, sub, &n);
        int sq = -1, div = -1;
        for (size_t i = 0; i < n; i++) {
            if ((is_op(g, c[i], "Pow") && reads(g, c[i], 0, dev)) ||
                (is_op(g, c[i], "Mul") && reads(g, c[i], 0, dev) && reads(g, c[i], 1, dev)))
                sq = c[i];
            else if (is_op(g, c[i], "Div") && reads(g, c[i], 0, dev))
                div = c[i];
        }
        int r2 = sole_consumer(g, sq);
        int eps = is_op(g, r2, "ReduceMean") ? sole_consumer(g, r2) : -1;
        int sq_root = is_op(g, eps, "Add") ? sole_consumer(g, eps) : -1;
        if (div < 0 || !is_op(g, sq_root, "Sqrt") || sole_consumer(g, sq_root) != div ||
            !reads(g, div, 1, out0(g, sq_root)))
            continue;
        struct rows x = {.n = 0};
        int chain[] = {r1, sub, sq, r2, eps, sq_root, div};
        for (size_t i = 0; i < sizeof chain / sizeof chain[0]; i++)
            push(&x, chain[i]);
        affine_tail(g, div, &x);
        if (any_used(g, &x))
            continue;
        enum cp_status st = add(g, CP_PATTERN_LAYERNORM, &x, d);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* SiLU after row r (graph/pattern.h's matcher). Returns the Mul, or -1. */
static int silu_after(const struct pg *g, int r, struct rows *x)
{
    struct cp_pattern_act m;
    if (!cp_pattern_match_silu(&g->view, out0_entry(g, r), &m))
        return -1;
    push(x, m.nodes[0]);
    push(x, m.nodes[1]);
    return m.nodes[1];
}

static enum cp_status find_groupnorm(struct pg *g, struct cp_diag *d)
{
    for (int r = 0; r < (int)g->n; r++) {
        const struct cp_fk *k = K(g, r);
        /* The Reshape to [N, groups, -1] before it runs no kernel: the
         * input is a view. */
        if (!is_op(g, r, "InstanceNormalization") || g->used[r] || k->n_in < 1 ||
            strcmp(k->in[0].src, k->in[0].name) == 0)
            continue;
        struct rows x = {.n = 0};
        push(&x, r);
        int last = affine_tail(g, r, &x);
        if (x.n < 3)
            continue;
        silu_after(g, last, &x);
        if (any_used(g, &x))
            continue;
        enum cp_status st = add(g, CP_PATTERN_GROUPNORM, &x, d);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* ---- GELU ------------------------------------------------------------------------- */

/* The tail shared by both GELU forms, from the Add(1) row `a`:
 * Mul(x) then Mul(0.5), Mul(0.5) then Mul(x), or Mul(x * 0.5). */
static bool gelu_tail(const struct pg *g, int a, const char *xname, struct rows *x)
{
    int m = sole_consumer(g, a);
    int o = other_side(g, m, out0(g, a));
    if (!is_op(g, m, "Mul") || o < 0)
        return false;
    push(x, m);
    if (reads(g, m, (size_t)o, xname) || scalar_input(g, m, (size_t)o)) {
        bool by_x = reads(g, m, (size_t)o, xname);
        int m2 = sole_consumer(g, m);
        int o2 = other_side(g, m2, out0(g, m));
        if (!is_op(g, m2, "Mul") || o2 < 0 ||
            !(by_x ? scalar_input(g, m2, (size_t)o2) : reads(g, m2, (size_t)o2, xname)))
            return false;
        push(x, m2);
        return true;
    }
    int h = producer(g, m, (size_t)o); /* x * 0.5 */
    int oh = other_side(g, h, xname);
    if (!is_op(g, h, "Mul") || oh < 0 || !scalar_input(g, h, (size_t)oh))
        return false;
    push(x, h);
    return true;
}

static enum cp_status gelu_add(struct pg *g, struct rows *x, const char *xname, bool erf,
                               struct cp_diag *d)
{
    if (any_used(g, x))
        return CP_OK;
    g->gelu_x[g->n_gelu++] = xname;
    return add(g, erf ? CP_PATTERN_GELU : CP_PATTERN_GELU_TANH, x, d);
}

static enum cp_status find_gelu(struct pg *g, struct cp_diag *d)
{
    for (int e = 0; e < (int)g->n; e++) {
        if (g->used[e])
            continue;
        struct rows x = {.n = 0};
        if (is_op(g, e, "Erf")) {
            int dv = producer(g, e, 0);
            if (!(is_op(g, dv, "Div") || is_op(g, dv, "Mul")) || sole_consumer(g, dv) != e ||
                K(g, dv)->n_in != 2 || !scalar_input(g, dv, 1))
                continue;
            const char *xname = K(g, dv)->in[0].src;
            int a = sole_consumer(g, e);
            int o = other_side(g, a, out0(g, e));
            if (!is_op(g, a, "Add") || o < 0 || !scalar_input(g, a, (size_t)o))
                continue;
            push(&x, dv);
            push(&x, e);
            push(&x, a);
            if (!gelu_tail(g, a, xname, &x))
                continue;
            enum cp_status st = gelu_add(g, &x, xname, true, d);
            if (st != CP_OK)
                return st;
        } else if (is_op(g, e, "Tanh")) {
            /* tanh(c * (x + 0.044715 * x^3)) */
            int m1 = producer(g, e, 0);
            if (!is_op(g, m1, "Mul") || sole_consumer(g, m1) != e)
                continue;
            int a1 = -1;
            for (size_t i = 0; i < 2 && a1 < 0; i++)
                if (is_op(g, producer(g, m1, i), "Add") && scalar_input(g, m1, 1 - i))
                    a1 = producer(g, m1, i);
            if (a1 < 0 || sole_consumer(g, a1) != m1 || K(g, a1)->n_in != 2)
                continue;
            const char *xname = NULL;
            struct rows cube = {.n = 0};
            for (size_t i = 0; i < 2 && !xname; i++) {
                /* input i is x, the other side a Mul/Pow chain over x */
                const char *cand = K(g, a1)->in[i].src;
                int c = producer(g, a1, 1 - i);
                cube.n = 0;
                for (int hop = 0; hop < 3 && (is_op(g, c, "Mul") || is_op(g, c, "Pow")); hop++) {
                    push(&cube, c);
                    bool reads_x = reads(g, c, 0, cand) || reads(g, c, 1, cand);
                    int next = -1;
                    for (size_t j = 0; j < K(g, c)->n_in; j++)
                        if (!reads(g, c, j, cand) && producer(g, c, j) >= 0)
                            next = producer(g, c, j);
                    if (reads_x && next < 0) {
                        xname = cand;
                        break;
                    }
                    c = next;
                }
            }
            if (!xname)
                continue;
            int a = sole_consumer(g, e);
            int o = other_side(g, a, out0(g, e));
            if (!is_op(g, a, "Add") || o < 0 || !scalar_input(g, a, (size_t)o))
                continue;
            for (size_t i = 0; i < cube.n; i++)
                push(&x, cube.r[i]);
            push(&x, a1);
            push(&x, m1);
            push(&x, e);
            push(&x, a);
            if (!gelu_tail(g, a, xname, &x))
                continue;
            enum cp_status st = gelu_add(g, &x, xname, false, d);
            if (st != CP_OK)
                return st;
        }
    }
    return CP_OK;
}

/* ---- conv / matmul epilogues ---------------------------------------------------------- */

/* An activation after row r: one node or SiLU (graph/pattern.h's matcher,
 * as the fusion passes match it), or a decomposed GELU found before.
 * Pushes its rows (not a GELU's, which is its own pattern). Returns the row
 * whose output is the activation's, or -1 (none) / r (a GELU: the chain
 * stops there). */
static int activation_after(const struct pg *g, int r, struct rows *x)
{
    struct cp_pattern_act m;
    if (cp_pattern_match_activation(&g->view, out0_entry(g, r), &m)) {
        for (size_t i = 0; i < m.n_nodes; i++)
            push(x, m.nodes[i]);
        return m.nodes[m.n_nodes - 1];
    }
    for (size_t i = 0; i < g->n_gelu; i++)
        if (strcmp(g->gelu_x[i], out0(g, r)) == 0)
            return r;
    return -1;
}

/* A residual Add after row r: its other operand is made by a kernel, with
 * the same shape. Returns the Add or -1. */
static int residual_after(const struct pg *g, int r, struct rows *x)
{
    int a = sole_consumer(g, r);
    int o = other_side(g, a, out0(g, r));
    if (!is_op(g, a, "Add") || o < 0 || producer(g, a, (size_t)o) < 0 || K(g, r)->n_out < 1 ||
        !same_shape(&K(g, a)->in[o], &K(g, r)->out[0]))
        return -1;
    push(x, a);
    return a;
}

static enum cp_status find_epilogues(struct pg *g, struct cp_diag *d)
{
    for (int r = 0; r < (int)g->n; r++) {
        if (g->used[r])
            continue;
        const struct cp_fk *k = K(g, r);
        bool conv = is_op(g, r, "Conv");
        bool mm =
            (is_op(g, r, "MatMul") && k->n_in == 2 && producer(g, r, 1) < 0) || is_op(g, r, "Gemm");
        if (!conv && !mm)
            continue;
        struct rows x = {.n = 0};
        push(&x, r);
        int last = r;
        /* an inference BatchNormalization that could fold into the Conv */
        int bn = conv ? sole_consumer(g, r) : -1;
        bool has_bn = is_op(g, bn, "BatchNormalization") && reads(g, bn, 0, out0(g, r));
        if (has_bn) {
            push(&x, bn);
            last = bn;
        }
        /* a bias Add when the op has none of its own */
        if (!has_bn && (is_op(g, r, "MatMul") || (conv && k->n_in < 3))) {
            int b = sole_consumer(g, r);
            int o = other_side(g, b, out0(g, r));
            if (is_op(g, b, "Add") && o >= 0 && producer(g, b, (size_t)o) < 0 &&
                K(g, b)->in[o].numel < K(g, b)->out[0].numel) {
                push(&x, b);
                last = b;
            }
        }
        int act = activation_after(g, last, &x);
        if (act >= 0 && act != last) {
            last = act;
            int res = residual_after(g, last, &x);
            last = res >= 0 ? res : last;
        } else if (act < 0) {
            int res = residual_after(g, last, &x);
            if (res >= 0) {
                last = res;
                act = activation_after(g, last, &x);
            }
        }
        bool has_act = act >= 0;
        if ((!has_act && x.n < 2) || any_used(g, &x))
            continue;
        enum cp_status st;
        if (has_bn)
            st = add(g, CP_PATTERN_CONV_BN, &x, d);
        else if (conv)
            st = add(g, has_act ? CP_PATTERN_CONV_ACT : CP_PATTERN_CONV_ADD, &x, d);
        else
            st = add(g, has_act ? CP_PATTERN_MATMUL_ACT : CP_PATTERN_MATMUL_ADD, &x, d);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* ---- layout round trips ------------------------------------------------------------- */

#define ROUNDTRIP_MAX_BETWEEN 4

/* The input of row r that carries its main data: input 0 of layout ops,
 * else the largest input a kernel makes. -1 when none. */
static int main_input(const struct pg *g, int r)
{
    const struct cp_fk *k = K(g, r);
    if (cp_feat_is_layout_op(k->op_type))
        return k->n_in ? 0 : -1;
    int best = -1;
    for (size_t i = 0; i < k->n_in; i++)
        if (producer(g, r, i) >= 0 && (best < 0 || k->in[i].numel > k->in[best].numel))
            best = (int)i;
    return best;
}

static enum cp_status find_roundtrips(struct pg *g, struct cp_diag *d)
{
    for (int r2 = 0; r2 < (int)g->n; r2++) {
        const struct cp_fk *k2 = K(g, r2);
        if (!cp_feat_is_layout_op(k2->op_type) || g->used[r2] || k2->n_out < 1)
            continue;
        int cur = r2;
        for (int hop = 0; hop <= ROUNDTRIP_MAX_BETWEEN; hop++) {
            int i = main_input(g, cur);
            int p = i >= 0 ? producer(g, cur, (size_t)i) : -1;
            if (p < 0)
                break;
            const struct cp_fk *k1 = K(g, p);
            if (!cp_feat_is_layout_op(k1->op_type)) {
                cur = p;
                continue;
            }
            if (g->used[p] || k1->n_in < 1 || strcmp(k1->op_type, k2->op_type) != 0 ||
                !same_shape(&k1->in[0], &k2->out[0]) ||
                strcmp(k1->in[0].layout, k2->out[0].layout) != 0)
                break;
            struct rows x = {.n = 0};
            push(&x, p);
            push(&x, r2);
            bool td = strcmp(k2->op_type, "TransData") == 0;
            enum cp_status st =
                add(g, td ? CP_PATTERN_ROUNDTRIP_TRANSDATA : CP_PATTERN_ROUNDTRIP_TRANSPOSE, &x, d);
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
    enum cp_status st = build(&g, d);
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
        st = find_roundtrips(&g, d);
    if (st == CP_OK && f->n_patterns > 1)
        qsort(f->patterns, f->n_patterns, sizeof *f->patterns, cmp_pattern);
    free(g.t);
    cp_strmap_release(&g.names);
    free(g.cons);
    free(g.used);
    free(g.gelu_x);
    free(g.ops);
    free(g.switches_off);
    return st;
}
