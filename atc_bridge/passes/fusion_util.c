/* Pattern-matching helpers of the fusion passes (see fusion_internal.h). */
#include "atc_bridge/passes/fusion_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum cp_status cp_fuse_recount(struct cp_fuse *f)
{
    size_t nt = cp_graph_n_tensors(f->g);
    if (nt != f->n_tensors) {
        int32_t *u = cp_realloc_array(f->uses, nt ? nt : 1, sizeof *u);
        if (!u)
            return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory in a fusion pass");
        f->uses = u;
        bool *o = cp_realloc_array(f->is_output, nt ? nt : 1, sizeof *o);
        if (!o)
            return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory in a fusion pass");
        f->is_output = o;
        f->n_tensors = nt;
    }
    memset(f->uses, 0, nt * sizeof *f->uses);
    memset(f->is_output, 0, nt * sizeof *f->is_output);
    for (size_t i = 0; i < cp_graph_n_nodes(f->g); i++) {
        const struct cp_node *n = cp_graph_node(f->g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] >= 0 && (size_t)n->inputs[j] < nt)
                f->uses[n->inputs[j]]++;
    }
    for (size_t i = 0; i < cp_graph_n_outputs(f->g); i++) {
        int32_t t = cp_graph_output(f->g, i);
        if (t >= 0 && (size_t)t < nt)
            f->is_output[t] = true;
    }
    return CP_OK;
}

/* ---- the pattern view (graph/pattern.h) ------------------------------------------------ */

static enum cp_op view_op(const void *ctx, int32_t n)
{
    const struct cp_fuse *f = ctx;
    return cp_graph_node(f->g, n)->op;
}

static size_t view_n_inputs(const void *ctx, int32_t n)
{
    const struct cp_fuse *f = ctx;
    return cp_graph_node(f->g, n)->n_inputs;
}

static int32_t view_input(const void *ctx, int32_t n, size_t i)
{
    const struct cp_fuse *f = ctx;
    const struct cp_node *nd = cp_graph_node(f->g, n);
    return i < nd->n_inputs ? nd->inputs[i] : -1;
}

static int32_t view_output(const void *ctx, int32_t n, size_t i)
{
    const struct cp_fuse *f = ctx;
    const struct cp_node *nd = cp_graph_node(f->g, n);
    return i < nd->n_outputs ? nd->outputs[i] : -1;
}

static size_t view_readers(const void *ctx, int32_t t, int32_t *out, size_t max)
{
    return cp_fuse_consumers(ctx, t, out, max);
}

static bool view_private_to(const void *ctx, int32_t t, int reads)
{
    return cp_fuse_private(ctx, t, reads);
}

enum cp_status cp_fuse_init(struct cp_fuse *f, struct cp_pass_ctx *ctx)
{
    memset(f, 0, sizeof *f);
    f->g = ctx->g;
    f->d = ctx->d;
    f->view = (struct cp_pattern_view){f,           view_op,      view_n_inputs,  view_input,
                                       view_output, view_readers, view_private_to};
    return cp_fuse_recount(f);
}

void cp_fuse_release(struct cp_fuse *f)
{
    free(f->uses);
    free(f->is_output);
    memset(f, 0, sizeof *f);
}

bool cp_fuse_private(const struct cp_fuse *f, int32_t t, int32_t n)
{
    return t >= 0 && (size_t)t < f->n_tensors && f->uses[t] == n && !f->is_output[t];
}

struct cp_node *cp_fuse_producer(const struct cp_fuse *f, int32_t t)
{
    if (t < 0 || (size_t)t >= cp_graph_n_tensors(f->g))
        return NULL;
    int32_t p = cp_graph_tensor(f->g, t)->producer;
    struct cp_node *n = p >= 0 ? cp_graph_node(f->g, p) : NULL;
    if (!n || n->dead)
        return NULL;
    for (size_t j = 0; j < n->n_outputs; j++)
        if (n->outputs[j] == t)
            return n;
    return NULL;
}

size_t cp_fuse_consumers(const struct cp_fuse *f, int32_t t, int32_t *out, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(f->g); i++) {
        const struct cp_node *n = cp_graph_node(f->g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] == t) {
                if (k < max)
                    out[k] = (int32_t)i;
                k++;
                break;
            }
    }
    return k;
}

int32_t cp_fuse_only_consumer(const struct cp_fuse *f, int32_t t, enum cp_op op)
{
    int32_t c;
    if (!cp_fuse_private(f, t, 1) || cp_fuse_consumers(f, t, &c, 1) != 1)
        return -1;
    return cp_graph_node(f->g, c)->op == op ? c : -1;
}

int cp_fuse_other(const struct cp_node *n, int32_t t)
{
    if (n->n_inputs != 2 || n->inputs[0] == n->inputs[1])
        return -1;
    if (n->inputs[0] == t)
        return 1;
    if (n->inputs[1] == t)
        return 0;
    return -1;
}

bool cp_fuse_const_floats(const struct cp_fuse *f, int32_t t, float *out, size_t max, size_t *n)
{
    *n = 0;
    if (t < 0)
        return false;
    const struct cp_tensor *T = cp_graph_tensor(f->g, t);
    if (T->kind != CP_TENSOR_INITIALIZER || !T->data || !cp_shape_is_static(&T->shape))
        return false;
    int64_t numel = cp_shape_numel(&T->shape);
    if (numel < 0 || (size_t)numel > max)
        return false;
    if (T->dtype != CP_DTYPE_F32 || T->nbytes != (size_t)numel * sizeof *out)
        return false;
    memcpy(out, T->data, (size_t)numel * sizeof *out);
    *n = (size_t)numel;
    return true;
}

bool cp_fuse_const_scalar(const struct cp_fuse *f, int32_t t, float *v)
{
    size_t n;
    return cp_fuse_const_floats(f, t, v, 1, &n) && n == 1;
}

bool cp_fuse_const_is(const struct cp_fuse *f, int32_t t, float v)
{
    float c;
    return cp_fuse_const_scalar(f, t, &c) && fabsf(c - v) <= 1e-5f * fabsf(v);
}

bool cp_fuse_const_ints(const struct cp_fuse *f, int32_t t, int64_t *out, size_t max, size_t *n)
{
    *n = 0;
    if (t < 0)
        return false;
    const struct cp_tensor *T = cp_graph_tensor(f->g, t);
    if (T->value && T->value_len >= 0 && (size_t)T->value_len <= max) {
        memcpy(out, T->value, (size_t)T->value_len * sizeof *out);
        *n = (size_t)T->value_len;
        return true;
    }
    if (T->kind != CP_TENSOR_INITIALIZER || !T->data || !cp_shape_is_static(&T->shape))
        return false;
    int64_t numel = cp_shape_numel(&T->shape);
    if (numel < 0 || (size_t)numel > max)
        return false;
    for (int64_t i = 0; i < numel; i++) {
        if (T->dtype == CP_DTYPE_I64 && T->nbytes == (size_t)numel * 8)
            out[i] = ((const int64_t *)T->data)[i];
        else if (T->dtype == CP_DTYPE_I32 && T->nbytes == (size_t)numel * 4)
            out[i] = ((const int32_t *)T->data)[i];
        else
            return false;
    }
    *n = (size_t)numel;
    return true;
}

/* A tensor name not yet in the graph: base + suffix, then base + suffix + _N. */
static const char *fresh_name(struct cp_fuse *f, const char *base, const char *suffix, char *buf,
                              size_t n)
{
    snprintf(buf, n, "%s%s", base, suffix);
    for (int k = 1; cp_graph_find_tensor(f->g, buf) >= 0; k++)
        snprintf(buf, n, "%s%s_%d", base, suffix, k);
    return buf;
}

enum cp_status cp_fuse_new_weight(struct cp_fuse *f, const char *base, const float *v, int rank,
                                  const int64_t *dims, int32_t *t)
{
    struct cp_shape s;
    cp_shape_set(&s, rank, dims);
    int64_t numel = cp_shape_numel(&s);
    char name[512];
    fresh_name(f, base, "_fused", name, sizeof name);
    enum cp_status st =
        cp_graph_add_tensor(f->g, name, CP_DTYPE_F32, &s, CP_TENSOR_INITIALIZER, t, f->d);
    if (st != CP_OK)
        return st;
    size_t nbytes = (size_t)numel * sizeof(float);
    float *data = cp_graph_alloc(f->g, nbytes ? nbytes : 1);
    if (!data)
        return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory making weight '%s'", name);
    memcpy(data, v, nbytes);
    if ((st = cp_graph_set_data(f->g, *t, data, nbytes, CP_DATA_ARENA, f->d)) != CP_OK)
        return st;
    return cp_fuse_recount(f);
}

/* Does any node other than the dead ones use a node name? Node names must
 * stay unique, so a fused node gets a fresh one. */
static bool node_name_taken(const struct cp_graph *g, const char *name)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->name && strcmp(n->name, name) == 0)
            return true;
    }
    return false;
}

enum cp_status cp_fuse_replace(struct cp_fuse *f, const int32_t *dead, size_t n_dead,
                               const char *op_type, const char *domain, const int32_t *ins,
                               size_t n_ins, int32_t out, const char *suffix, int32_t *idx)
{
    size_t n_orig = 0;
    for (size_t i = 0; i < n_dead; i++)
        n_orig += cp_graph_node(f->g, dead[i])->n_origins;
    const char **orig = calloc(n_orig ? n_orig : 1, sizeof *orig);
    if (!orig)
        return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory in a fusion pass");
    /* Origins in graph order of the dead nodes, without repeats. */
    size_t k = 0;
    for (size_t i = 0; i < n_dead; i++) {
        const struct cp_node *n = cp_graph_node(f->g, dead[i]);
        for (size_t j = 0; j < n->n_origins; j++) {
            bool seen = false;
            for (size_t m = 0; m < k && !seen; m++)
                seen = strcmp(orig[m], n->origins[j]) == 0;
            if (!seen)
                orig[k++] = n->origins[j];
        }
    }
    const struct cp_node *last = cp_graph_node(f->g, dead[n_dead - 1]);
    char name[512];
    snprintf(name, sizeof name, "%s%s", last->name ? last->name : "fused", suffix);
    for (int m = 1; node_name_taken(f->g, name); m++)
        snprintf(name, sizeof name, "%s%s_%d", last->name ? last->name : "fused", suffix, m);
    for (size_t i = 0; i < n_dead; i++) {
        struct cp_node *n = cp_graph_node(f->g, dead[i]);
        n->dead = true;
        for (size_t j = 0; j < n->n_outputs; j++)
            if (n->outputs[j] >= 0)
                cp_graph_tensor(f->g, n->outputs[j])->producer = -1;
    }
    enum cp_status st =
        cp_graph_add_node(f->g, name, op_type, domain, ins, n_ins, &out, 1, orig, k, idx, f->d);
    free(orig);
    if (st != CP_OK)
        return st;
    return cp_fuse_recount(f);
}

void cp_fuse_drop_if_unused(struct cp_fuse *f, int32_t node)
{
    struct cp_node *n = cp_graph_node(f->g, node);
    if (!n || n->dead)
        return;
    for (size_t j = 0; j < n->n_outputs; j++) {
        int32_t t = n->outputs[j];
        if (t >= 0 && (f->uses[t] > 0 || f->is_output[t]))
            return;
    }
    n->dead = true;
    for (size_t j = 0; j < n->n_outputs; j++)
        if (n->outputs[j] >= 0)
            cp_graph_tensor(f->g, n->outputs[j])->producer = -1;
    cp_fuse_recount(f);
}

enum cp_status cp_fuse_set_activation(struct cp_fuse *f, int32_t node, const struct cp_fuse_act *a)
{
    const char *name = a ? cp_act_name(a->kind) : NULL;
    if (!name || !name[0])
        return CP_OK;
    enum cp_status st = cp_node_set_string(f->g, node, "activation", name);
    if (st == CP_OK && (a->kind == CP_ACT_LEAKY_RELU || a->kind == CP_ACT_CLIP))
        st = cp_node_set_float(f->g, node, "activation_alpha", a->alpha);
    if (st == CP_OK && a->kind == CP_ACT_CLIP)
        st = cp_node_set_float(f->g, node, "activation_beta", a->beta);
    if (st != CP_OK)
        return cp_diag_set(f->d, st, "out of memory setting attributes of node '%s'",
                           cp_graph_node(f->g, node)->name);
    return CP_OK;
}

enum cp_status cp_fuse_copy_attrs(struct cp_fuse *f, int32_t to, const struct cp_node *from)
{
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < from->n_attrs && st == CP_OK; i++) {
        const struct cp_attr *a = &from->attrs[i];
        switch (a->type) {
        case CP_ATTR_INT:
            st = cp_node_set_int(f->g, to, a->name, a->i);
            break;
        case CP_ATTR_FLOAT:
            st = cp_node_set_float(f->g, to, a->name, a->f);
            break;
        case CP_ATTR_STRING:
            st = cp_node_set_string(f->g, to, a->name, a->s);
            break;
        case CP_ATTR_INTS:
            st = cp_node_set_ints(f->g, to, a->name, a->ints, a->n);
            break;
        case CP_ATTR_FLOATS:
            st = cp_node_set_floats(f->g, to, a->name, a->floats, a->n);
            break;
        case CP_ATTR_STRINGS:
            st = cp_node_set_strings(f->g, to, a->name, a->strings, a->n);
            break;
        case CP_ATTR_TENSOR:
            st = cp_node_set_tensor(f->g, to, a->name, a->tensor);
            break;
        }
    }
    if (st != CP_OK)
        return cp_diag_set(f->d, st, "node '%s': could not copy attributes of '%s'",
                           cp_graph_node(f->g, to)->name, from->name);
    return CP_OK;
}

enum cp_status cp_fuse_set_tail(struct cp_fuse *f, int32_t node, const struct cp_fuse_tail *tl)
{
    enum cp_status st = tl->has_act ? cp_fuse_set_activation(f, node, &tl->act) : CP_OK;
    if (st == CP_OK && tl->residual >= 0 && tl->residual_first &&
        cp_node_set_int(f->g, node, "residual_first", 1) != CP_OK)
        st = cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory setting attributes of node '%s'",
                         cp_graph_node(f->g, node)->name);
    return st;
}
