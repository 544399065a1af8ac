/* The Transpose round trips TransposeRoundTripEliminationPass removes (see
 * pattern.h; the rewrite is atc_bridge/passes/layout_roundtrip.c).
 *
 * Starting from a Transpose with permutation p, the region is the set of
 * "permuted-space" tensors its output flows into and the ops that read
 * them. It may only hold ops that can be rewritten to work on the
 * unpermuted tensors, and may only be left through Transposes with the
 * inverse permutation (exits); other Transposes with permutation p may join
 * it as further entries (Add of two permuted tensors). */
#include "graph/pattern_internal.h"

#include <stdlib.h>
#include <string.h>

enum { ROLE_NONE = 0, ROLE_ENTRY, ROLE_OP, ROLE_EXIT };

/* ---- permutations ------------------------------------------------------------------- */

/* The permutation of a Transpose node (default: reversed), for a tensor of
 * rank r. */
static bool transpose_perm(const struct cp_node *n, int r, int *perm)
{
    const struct cp_attr *a = cp_node_attr(n, "perm");
    bool seen[CP_MAX_RANK] = {false};
    if (a && (a->type != CP_ATTR_INTS || a->n != (size_t)r))
        return false;
    for (int i = 0; i < r; i++) {
        int64_t p = a ? a->ints[i] : r - 1 - i;
        if (p < 0)
            p += r;
        if (p < 0 || p >= r || seen[p])
            return false;
        seen[p] = true;
        perm[i] = (int)p;
    }
    return true;
}

static bool is_identity(const int *perm, int r)
{
    for (int i = 0; i < r; i++)
        if (perm[i] != i)
            return false;
    return true;
}

static bool same_perm(const int *a, const int *b, int r)
{
    for (int i = 0; i < r; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* Whether node `ni` is a Transpose with permutation `perm` (rank r). */
static bool is_transpose_with(const struct cp_pattern_view *v, int32_t ni, const int *perm, int r)
{
    const struct cp_node *n = cp_pv_node(v, ni);
    if (n->op != CP_OP_TRANSPOSE || n->n_inputs != 1 || n->n_outputs != 1 || n->inputs[0] < 0)
        return false;
    const struct cp_tensor *x = cp_pv_tensor(v, n->inputs[0]);
    if (x->shape.rank != r)
        return false;
    if (v->perm_fits)
        return v->perm_fits(v->ctx, ni, perm, r);
    int p[CP_MAX_RANK];
    return transpose_perm(n, r, p) && same_perm(p, perm, r);
}

/* ---- what may sit inside a round trip ------------------------------------------------ */

static bool is_unary(enum cp_op op)
{
    switch (op) {
    case CP_OP_RELU:
    case CP_OP_LEAKY_RELU:
    case CP_OP_SIGMOID:
    case CP_OP_TANH:
    case CP_OP_EXP:
    case CP_OP_SQRT:
    case CP_OP_ERF:
    case CP_OP_GELU:
    case CP_OP_IDENTITY:
    case CP_OP_CAST:
    case CP_OP_CLIP:
    case CP_OP_HARD_SWISH:
    case CP_OP_HARD_SIGMOID:
    case CP_OP_ELU:
    case CP_OP_SOFTPLUS:
    case CP_OP_MISH:
        return true;
    default:
        return false;
    }
}

static bool is_broadcasting(enum cp_op op)
{
    switch (op) {
    case CP_OP_ADD:
    case CP_OP_SUB:
    case CP_OP_MUL:
    case CP_OP_DIV:
    case CP_OP_POW:
    case CP_OP_WHERE:
    case CP_OP_EQUAL:
        return true;
    default:
        return false;
    }
}

bool cp_pattern_roundtrip_is_reduce(enum cp_op op)
{
    return op == CP_OP_REDUCE_MEAN || op == CP_OP_REDUCE_SUM || op == CP_OP_REDUCE_MAX;
}

bool cp_pattern_roundtrip_permutes_constants(enum cp_op op)
{
    return is_broadcasting(op) || op == CP_OP_LAYER_NORMALIZATION;
}

/* Only the first output of a node may be read (LayerNorm's Mean and
 * InvStdDev, Dropout's mask must be absent or unread). */
static bool extra_outputs_unused(const struct cp_pattern_view *v, const struct cp_node *n)
{
    for (size_t j = 1; j < n->n_outputs; j++)
        if (n->outputs[j] >= 0 &&
            (v->n_reads(v->ctx, n->outputs[j]) > 0 || cp_pv_is_output(v, n->outputs[j])))
            return false;
    return true;
}

bool cp_pattern_reduce_axes(const struct cp_pattern_view *v, const struct cp_node *n, int r,
                            int64_t *axes, size_t *na)
{
    *na = 0;
    const struct cp_attr *a = cp_node_attr(n, "axes");
    if (a) {
        if (a->type != CP_ATTR_INTS || a->n > (size_t)r)
            return false;
        *na = a->n;
        memcpy(axes, a->ints, a->n * sizeof *axes);
    } else if (n->n_inputs > 1 && n->inputs[1] >= 0) {
        const struct cp_tensor *t = cp_pv_tensor(v, n->inputs[1]);
        int64_t cnt = cp_shape_numel(&t->shape);
        if (!cp_pv_is_static_const(v, n->inputs[1]) || !t->data || t->dtype != CP_DTYPE_I64 ||
            cnt < 0 || cnt > r)
            return false;
        *na = (size_t)cnt;
        memcpy(axes, t->data, (size_t)cnt * sizeof *axes);
    }
    for (size_t i = 0; i < *na; i++) {
        if (axes[i] < 0)
            axes[i] += r;
        if (axes[i] < 0 || axes[i] >= r)
            return false;
    }
    return true;
}

int cp_pattern_layernorm_axis(const struct cp_node *n, int r)
{
    int64_t a = cp_node_attr_int(n, "axis", -1);
    return (int)(a < 0 ? a + r : a);
}

/* Whether the region may hold node n, which reads a permuted tensor: an
 * op that can be rewritten for unpermuted tensors, keeping the rank. Its
 * other inputs are checked by the caller. */
static bool node_permutable(const struct cp_pattern_view *v, const struct cp_node *n, int r)
{
    if (n->n_outputs < 1 || n->outputs[0] < 0 || !extra_outputs_unused(v, n))
        return false;
    const struct cp_tensor *y = cp_pv_tensor(v, n->outputs[0]);
    if (y->shape.rank != r)
        return false;
    if (is_unary(n->op) || is_broadcasting(n->op))
        return true;
    if (cp_pattern_roundtrip_is_reduce(n->op)) {
        int64_t axes[CP_MAX_RANK];
        size_t na;
        return cp_node_attr_int(n, "keepdims", 1) == 1 &&
               cp_pattern_reduce_axes(v, n, r, axes, &na);
    }
    if (n->op == CP_OP_SOFTMAX)
        return cp_pv_opset_at_least(v, 13);
    if (n->op == CP_OP_LAYER_NORMALIZATION) {
        int a = cp_pattern_layernorm_axis(n, r);
        return a >= 0 && a < r;
    }
    return false;
}

/* Whether input `slot` of region node n, a tensor outside permuted space,
 * can stay or be permuted: a constant of rank <= r for the broadcasting
 * ops and LayerNorm's scale / bias, or anything of one element. */
static bool side_input_ok(const struct cp_pattern_view *v, const struct cp_node *n, size_t slot,
                          int r)
{
    int32_t t = n->inputs[slot];
    if (t < 0)
        return true;
    const struct cp_tensor *T = cp_pv_tensor(v, t);
    if (cp_shape_is_static(&T->shape) && cp_shape_numel(&T->shape) == 1 && T->shape.rank <= r)
        return true;
    if (cp_pattern_roundtrip_is_reduce(n->op))
        return slot == 1; /* the axes, checked by cp_pattern_reduce_axes */
    if (is_unary(n->op))
        return n->op == CP_OP_CLIP && slot > 0 && T->shape.rank == 0;
    if (cp_pattern_roundtrip_permutes_constants(n->op))
        return cp_pv_is_static_const(v, t) && T->shape.rank <= r;
    return false;
}

/* ---- finding a region ------------------------------------------------------------------ */

static void push_space(struct cp_pattern_roundtrip *R, int32_t t)
{
    if (!R->space[t]) {
        R->space[t] = true;
        R->work[R->n_work++] = t;
    }
}

static bool add_entry(struct cp_pattern_roundtrip *R, int32_t node, const struct cp_node *n)
{
    if (R->role[node] != ROLE_NONE)
        return R->role[node] == ROLE_ENTRY;
    if (R->n_entries >= CP_PATTERN_MAX_REGION)
        return false;
    R->role[node] = ROLE_ENTRY;
    R->entries[R->n_entries++] = node;
    push_space(R, n->outputs[0]);
    return true;
}

bool cp_pattern_roundtrip_ln_trailing(const struct cp_pattern_roundtrip *R, const struct cp_node *n,
                                      int *new_axis)
{
    int r = R->rank, a = cp_pattern_layernorm_axis(n, r), k = r - a;
    for (int i = a; i < r; i++)
        if (R->perm[i] != r - k + (i - a))
            return false;
    *new_axis = r - k;
    return true;
}

/* Take node c (reading a permuted tensor) into the region, or fail. */
static bool take_node(const struct cp_pattern_view *v, struct cp_pattern_roundtrip *R, int32_t ci)
{
    const struct cp_node *c = cp_pv_node(v, ci);
    if (R->role[ci] != ROLE_NONE)
        return R->role[ci] != ROLE_ENTRY; /* an entry reading the region: a cycle of permutes */
    if (is_transpose_with(v, ci, R->inv, R->rank)) {
        if (R->n_exits >= CP_PATTERN_MAX_REGION)
            return false;
        R->role[ci] = ROLE_EXIT;
        R->exits[R->n_exits++] = ci;
        return true;
    }
    if (R->n_nodes >= CP_PATTERN_MAX_REGION || !node_permutable(v, c, R->rank))
        return false;
    if (c->op == CP_OP_LAYER_NORMALIZATION) {
        /* written out again when its axes stop being trailing: f32 only */
        int na;
        const struct cp_tensor *x = cp_pv_tensor(v, c->inputs[0]);
        if (!cp_pattern_roundtrip_ln_trailing(R, c, &na) && x->dtype != CP_DTYPE_F32)
            return false;
    }
    R->role[ci] = ROLE_OP;
    R->nodes[R->n_nodes++] = ci;
    for (size_t j = 0; j < c->n_inputs; j++) {
        int32_t t = c->inputs[j];
        if (t < 0 || R->space[t])
            continue;
        bool data_slot = !(cp_pattern_roundtrip_is_reduce(c->op) && j == 1) &&
                         !(c->op == CP_OP_CLIP && j > 0) &&
                         !(c->op == CP_OP_LAYER_NORMALIZATION && j > 0);
        int32_t pi = cp_pv_producer(v, t);
        const struct cp_node *p = cp_pv_node(v, pi);
        if (data_slot && p && is_transpose_with(v, pi, R->perm, R->rank)) {
            if (!add_entry(R, pi, p))
                return false;
            continue;
        }
        if (side_input_ok(v, c, j, R->rank))
            continue;
        if (!data_slot || R->n_pending >= CP_PATTERN_MAX_REGION)
            return false;
        R->pending[R->n_pending++] = t;
    }
    push_space(R, c->outputs[0]);
    return true;
}

/* Grow the region from Transpose `seed`. False when it cannot be removed. */
static bool find_region(const struct cp_pattern_view *v, struct cp_pattern_roundtrip *R,
                        int32_t seed, enum cp_status *st)
{
    const struct cp_node *s = cp_pv_node(v, seed);
    if (!add_entry(R, seed, s))
        return false;
    int32_t readers[64];
    while (R->n_work > 0) {
        int32_t t = R->work[--R->n_work];
        if (cp_pv_is_output(v, t))
            return false;
        size_t nu = cp_pv_readers(v, t, readers, 64);
        int32_t *all = readers;
        if (nu > 64) {
            all = malloc(nu * sizeof *all);
            if (!all) {
                *st = CP_ERR_NOMEM;
                return false;
            }
            cp_pv_readers(v, t, all, nu);
        }
        bool ok = true;
        for (size_t k = 0; k < nu && ok; k++)
            ok = take_node(v, R, all[k]);
        if (all != readers)
            free(all);
        if (!ok)
            return false;
    }
    if (R->n_exits == 0)
        return false;
    for (size_t i = 0; i < R->n_pending; i++)
        if (!R->space[R->pending[i]])
            return false;
    /* An exit whose result is a graph output keeps that name: the region op
     * producing its input writes it directly. That needs a region op (not
     * an entry) and one such exit per tensor. */
    for (size_t i = 0; i < R->n_exits; i++) {
        const struct cp_node *x = cp_pv_node(v, R->exits[i]);
        if (!cp_pv_is_output(v, x->outputs[0]))
            continue;
        int32_t pi = cp_pv_producer(v, x->inputs[0]);
        if (pi < 0 || R->role[pi] != ROLE_OP)
            return false;
        for (size_t j = 0; j < i; j++) {
            const struct cp_node *o = cp_pv_node(v, R->exits[j]);
            if (o->inputs[0] == x->inputs[0] && cp_pv_is_output(v, o->outputs[0]))
                return false;
        }
    }
    return true;
}

/* Start over with permutation perm. */
static void reset(struct cp_pattern_roundtrip *R, const int *perm, size_t nt, size_t nn)
{
    memcpy(R->perm, perm, sizeof R->perm);
    for (int i = 0; i < R->rank; i++)
        R->inv[R->perm[i]] = i;
    R->n_entries = R->n_nodes = R->n_exits = R->n_pending = R->n_work = 0;
    memset(R->space, 0, (nt + 1) * sizeof *R->space);
    memset(R->role, 0, (nn + 1) * sizeof *R->role);
}

/* The next permutation of p[0..r) in lexicographic order; false after the
 * last. */
static bool next_perm(int *p, int r)
{
    int i = r - 2;
    while (i >= 0 && p[i] >= p[i + 1])
        i--;
    if (i < 0)
        return false;
    int j = r - 1;
    while (p[j] <= p[i])
        j--;
    int t = p[i];
    p[i] = p[j];
    p[j] = t;
    for (int a = i + 1, b = r - 1; a < b; a++, b--) {
        t = p[a];
        p[a] = p[b];
        p[b] = t;
    }
    return true;
}

/* Ranks up to which a view that knows only shapes has every fitting perm
 * tried (720 at rank 6). */
#define MAX_TRIED_RANK 6

bool cp_pattern_match_roundtrip(const struct cp_pattern_view *v, int32_t seed,
                                struct cp_pattern_roundtrip *R, enum cp_status *st)
{
    memset(R, 0, sizeof *R);
    *st = CP_OK;
    const struct cp_node *s = cp_pv_node(v, seed);
    if (!s || s->op != CP_OP_TRANSPOSE || s->n_inputs != 1 || s->n_outputs != 1 ||
        s->inputs[0] < 0 || s->outputs[0] < 0)
        return false;
    int r = cp_pv_tensor(v, s->inputs[0])->shape.rank;
    R->rank = r;
    int perm[CP_MAX_RANK];
    bool tried = v->perm_fits && r <= MAX_TRIED_RANK;
    if (r < 2)
        return false;
    if (tried) {
        for (int i = 0; i < r; i++)
            perm[i] = i;
    } else if (!transpose_perm(s, r, perm) || is_identity(perm, r)) {
        return false;
    }
    size_t nt = v->n_tensors(v->ctx), nn = v->n_nodes(v->ctx);
    R->space = calloc(nt + 1, sizeof *R->space);
    R->role = calloc(nn + 1, sizeof *R->role);
    R->work = calloc(nt + 1, sizeof *R->work);
    if (!R->space || !R->role || !R->work) {
        *st = CP_ERR_NOMEM;
        return false;
    }
    if (!tried) {
        reset(R, perm, nt, nn);
        return find_region(v, R, seed, st);
    }
    /* Every perm the seed's shapes allow, but the identity. */
    while (next_perm(perm, r)) {
        if (!v->perm_fits(v->ctx, seed, perm, r))
            continue;
        reset(R, perm, nt, nn);
        if (find_region(v, R, seed, st))
            return true;
        if (*st != CP_OK)
            return false;
    }
    return false;
}

void cp_pattern_roundtrip_release(struct cp_pattern_roundtrip *R)
{
    free(R->space);
    free(R->role);
    free(R->work);
    R->space = NULL;
    R->role = NULL;
    R->work = NULL;
}
