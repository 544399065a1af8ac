/* Pattern-matching helpers of the fusion passes (see fusion_internal.h). */
#include "atc_bridge/passes/fusion_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum cp_status cp_fuse_recount(struct cp_fuse *f)
{
    if (cp_pattern_graph_update(&f->pg) != CP_OK)
        return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory in a fusion pass");
    return CP_OK;
}

enum cp_status cp_fuse_init(struct cp_fuse *f, struct cp_pass_ctx *ctx)
{
    memset(f, 0, sizeof *f);
    f->g = ctx->g;
    f->d = ctx->d;
    f->pass = ctx->pass_name;
    f->switches = ctx->config ? ctx->config->fusion_switches : NULL;
    if (cp_pattern_graph_init(&f->pg, ctx->g) != CP_OK)
        return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory in a fusion pass");
    return CP_OK;
}

void cp_fuse_release(struct cp_fuse *f)
{
    cp_pattern_graph_release(&f->pg);
    memset(f, 0, sizeof *f);
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

/* Whether the running pass is switched off for any node of `dead` (by its
 * name or an origin). */
static bool declined(const struct cp_fuse *f, const int32_t *dead, size_t n_dead)
{
    if (!f->pass || !f->switches || !strchr(f->switches, '@'))
        return false;
    for (size_t i = 0; i < n_dead; i++) {
        const struct cp_node *n = cp_graph_node(f->g, dead[i]);
        if (cp_fusion_switch_instance_off(f->switches, f->pass, n->name))
            return true;
        for (size_t j = 0; j < n->n_origins; j++)
            if (cp_fusion_switch_instance_off(f->switches, f->pass, n->origins[j]))
                return true;
    }
    return false;
}

enum cp_status cp_fuse_replace(struct cp_fuse *f, const int32_t *dead, size_t n_dead,
                               const char *op_type, const char *domain, const int32_t *ins,
                               size_t n_ins, int32_t out, const char *suffix, int32_t *idx)
{
    if (declined(f, dead, n_dead)) {
        *idx = -1; /* the graph is left as it was */
        return CP_OK;
    }
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
        if (t >= 0 && (f->pg.view.n_reads(&f->pg, t) > 0 || f->pg.view.is_output(&f->pg, t)))
            return;
    }
    n->dead = true;
    for (size_t j = 0; j < n->n_outputs; j++)
        if (n->outputs[j] >= 0)
            cp_graph_tensor(f->g, n->outputs[j])->producer = -1;
    cp_fuse_recount(f);
}

enum cp_status cp_fuse_set_activation(struct cp_fuse *f, int32_t node,
                                      const struct cp_pattern_act *a)
{
    const char *name = a ? cp_act_name(a->kind) : NULL;
    if (!name || !name[0])
        return CP_OK;
    enum cp_status st = cp_node_set_string(f->g, node, "activation", name);
    bool has_alpha = a->kind == CP_ACT_LEAKY_RELU || a->kind == CP_ACT_CLIP ||
                     a->kind == CP_ACT_HARD_SIGMOID || a->kind == CP_ACT_ELU;
    bool has_beta = a->kind == CP_ACT_CLIP || a->kind == CP_ACT_HARD_SIGMOID;
    if (st == CP_OK && has_alpha)
        st = cp_node_set_float(f->g, node, "activation_alpha", a->alpha);
    if (st == CP_OK && has_beta)
        st = cp_node_set_float(f->g, node, "activation_beta", a->beta);
    if (st != CP_OK)
        return cp_diag_set(f->d, st, "out of memory setting attributes of node '%s'",
                           cp_graph_node(f->g, node)->name);
    return CP_OK;
}

enum cp_status cp_fuse_copy_int8(struct cp_fuse *f, int32_t to, const struct cp_node *from)
{
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < from->n_attrs && st == CP_OK; i++) {
        const struct cp_attr *a = &from->attrs[i];
        if (strncmp(a->name, "int8_", 5) == 0 ||
            (strcmp(a->name, "compute_precision") == 0 && a->type == CP_ATTR_STRING &&
             strcmp(a->s, "int8") == 0)) {
            struct cp_node one = *from;
            one.attrs = (struct cp_attr *)a;
            one.n_attrs = 1;
            st = cp_fuse_copy_attrs(f, to, &one);
        }
    }
    return st;
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
        case CP_ATTR_GRAPH:
            /* Subgraphs have one owner; passes do not copy them. */
            st = CP_ERR_UNSUPPORTED;
            break;
        }
    }
    if (st != CP_OK)
        return cp_diag_set(f->d, st, "node '%s': could not copy attributes of '%s'",
                           cp_graph_node(f->g, to)->name, from->name);
    return CP_OK;
}

enum cp_status cp_fuse_set_tail(struct cp_fuse *f, int32_t node, const struct cp_pattern_tail *tl)
{
    enum cp_status st = tl->has_act ? cp_fuse_set_activation(f, node, &tl->act) : CP_OK;
    if (st == CP_OK && tl->residual >= 0 && tl->residual_first &&
        cp_node_set_int(f->g, node, "residual_first", 1) != CP_OK)
        st = cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory setting attributes of node '%s'",
                         cp_graph_node(f->g, node)->name);
    return st;
}
