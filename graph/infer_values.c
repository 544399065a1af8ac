/* Shape inference's values: the small integer and float values inference
 * knows of a tensor (initializers, constants, what shape arithmetic
 * computed, and at run time the bytes a run has produced), read and set
 * by the per-op rules; and their lifetime within one inference. */
#include "graph/infer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- values --------------------------------------------------------------------------------- */

bool cp_infer_dtype_has_value(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I64 || dt == CP_DTYPE_I32 || dt == CP_DTYPE_BOOL || dt == CP_DTYPE_I8 ||
           dt == CP_DTYPE_U8;
}

/* The public tensor->value is promised for these only. */
static bool dtype_has_public_value(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I64 || dt == CP_DTYPE_I32 || dt == CP_DTYPE_BOOL;
}

int64_t cp_infer_wrap(enum cp_dtype dt, int64_t v)
{
    switch (dt) {
    case CP_DTYPE_I32:
        return (int32_t)(uint32_t)(uint64_t)v;
    case CP_DTYPE_I8:
        return (int8_t)(uint8_t)(uint64_t)v;
    case CP_DTYPE_U8:
        return (uint8_t)(uint64_t)v;
    case CP_DTYPE_BOOL:
        return v != 0;
    default:
        return v;
    }
}

/* Data may sit unaligned in a mapped file: read through memcpy. */
static int64_t read_int(const void *data, enum cp_dtype dt, int64_t i)
{
    const unsigned char *p = data;
    switch (dt) {
    case CP_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p + i * 8, 8);
        return v;
    }
    case CP_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p + i * 4, 4);
        return v;
    }
    case CP_DTYPE_I8:
        return (int8_t)p[i];
    case CP_DTYPE_U8:
        return p[i];
    case CP_DTYPE_BOOL:
        return p[i] != 0;
    default:
        return 0;
    }
}

static double half_to_double(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0)
        v = man / 1024.0 / 16384.0; /* subnormal: man * 2^-24 */
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = (1.0 + man / 1024.0) * (double)((int64_t)1 << exp) / 32768.0;
    return sign ? -v : v;
}

static double read_double(const void *data, enum cp_dtype dt, int64_t i)
{
    const unsigned char *p = data;
    switch (dt) {
    case CP_DTYPE_F32: {
        float f;
        memcpy(&f, p + i * 4, 4);
        return f;
    }
    case CP_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p + i * 2, 2);
        return half_to_double(h);
    }
    case CP_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + i * 2, 2);
        uint32_t bits = (uint32_t)h << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case CP_DTYPE_F64: {
        double v;
        memcpy(&v, p + i * 8, 8);
        return v;
    }
    default:
        return (double)read_int(data, dt, i);
    }
}

/* Element count of initializer-like data, or -1 when it does not add up. */
static int64_t data_numel(const struct cp_tensor *t)
{
    size_t nb;
    if (!cp_shape_nbytes(&t->shape, t->dtype, &nb) || nb != t->nbytes || (!t->data && nb != 0))
        return -1;
    return cp_shape_numel(&t->shape);
}

/* The tensor holding t's constant bytes: t itself for an initializer, the
 * `value` attribute of a live Constant node that produces t; else NULL. */
static const struct cp_tensor *const_source(const struct cp_infer *c, int32_t t)
{
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    if (!T)
        return NULL;
    if (T->kind == CP_TENSOR_INITIALIZER)
        return data_numel(T) >= 0 ? T : NULL;
    const struct cp_node *n = cp_graph_node(c->g, T->producer);
    if (!n || n->dead || n->op != CP_OP_CONSTANT || n->n_outputs < 1 || n->outputs[0] != t)
        return NULL;
    const struct cp_attr *a = cp_node_attr(n, "value");
    if (!a || a->type != CP_ATTR_TENSOR)
        return NULL;
    const struct cp_tensor *V = cp_graph_tensor(c->g, a->tensor);
    return V && data_numel(V) >= 0 ? V : NULL;
}

/* The run-time bytes of intermediate t (stepwise inference), or NULL. */
static const void *run_bytes(const struct cp_infer *c, int32_t t)
{
    if (!c->run_data || t < 0 || (size_t)t >= c->n_vals || !c->run_data[t])
        return NULL;
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    return T->kind != CP_TENSOR_INITIALIZER && cp_shape_is_static(&T->shape) ? c->run_data[t]
                                                                             : NULL;
}

bool cp_infer_count_nonzero(struct cp_infer *c, int32_t t, int64_t *count)
{
    *count = 0;
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    const void *rd = run_bytes(c, t);
    if (!rd) {
        const struct cp_tensor *src = const_source(c, t);
        if (src && src->data) {
            rd = src->data;
            T = src;
        }
    }
    if (rd) {
        *count = cp_elem_count_nonzero(rd, T->dtype, cp_shape_numel(&T->shape), NULL, 0);
        return true;
    }
    double v[CP_VALUE_MAX_ELEMS];
    int64_t n;
    if (!cp_shape_is_static(&T->shape) || !cp_infer_doubles(c, t, v, CP_VALUE_MAX_ELEMS, &n) ||
        n != cp_shape_numel(&T->shape))
        return false;
    for (int64_t k = 0; k < n; k++)
        *count += v[k] != 0.0;
    return true;
}

static void load_vals(struct cp_infer *c, int32_t t, struct cp_svals *sv)
{
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    if (T->value && T->value_len >= 0 && T->value_len <= CP_VALUE_MAX_ELEMS) {
        sv->e = cp_calloc((size_t)T->value_len, sizeof *sv->e);
        if (!sv->e)
            return;
        for (int64_t k = 0; k < T->value_len; k++)
            sv->e[k] = (struct cp_sval){T->value[k], NULL, true};
        sv->n = T->value_len;
        return;
    }
    const void *data = T->data;
    int64_t numel;
    if (run_bytes(c, t)) {
        data = c->run_data[t];
        numel = cp_shape_numel(&T->shape);
    } else if (T->kind == CP_TENSOR_INITIALIZER) {
        numel = data_numel(T);
    } else {
        return;
    }
    if (!cp_infer_dtype_has_value(T->dtype))
        return;
    if (numel < 0 || numel > CP_VALUE_MAX_ELEMS)
        return;
    sv->e = cp_calloc((size_t)numel, sizeof *sv->e);
    if (!sv->e)
        return;
    for (int64_t k = 0; k < numel; k++)
        sv->e[k] = (struct cp_sval){read_int(data, T->dtype, k), NULL, true};
    sv->n = numel;
}

const struct cp_sval *cp_infer_vals(struct cp_infer *c, int32_t t, int64_t *n)
{
    *n = 0;
    if (t < 0 || (size_t)t >= c->n_vals)
        return NULL;
    struct cp_svals *sv = &c->vals[t];
    if (!sv->loaded) {
        sv->loaded = true;
        load_vals(c, t, sv);
    }
    *n = sv->n;
    return sv->e;
}

bool cp_infer_ints(struct cp_infer *c, int32_t t, int64_t *out, int64_t cap, int64_t *n)
{
    int64_t len;
    const struct cp_sval *e = cp_infer_vals(c, t, &len);
    *n = 0;
    if (!e || len > cap)
        return false;
    for (int64_t k = 0; k < len; k++) {
        if (!e[k].known)
            return false;
        out[k] = e[k].v;
    }
    *n = len;
    return true;
}

bool cp_infer_doubles(struct cp_infer *c, int32_t t, double *out, int64_t cap, int64_t *n)
{
    *n = 0;
    const void *rd = run_bytes(c, t);
    if (rd) {
        const struct cp_tensor *R = cp_graph_tensor(c->g, t);
        int64_t numel = cp_shape_numel(&R->shape);
        if (numel > cap)
            return false;
        for (int64_t k = 0; k < numel; k++)
            out[k] = read_double(rd, R->dtype, k);
        *n = numel;
        return true;
    }
    const struct cp_tensor *src = t >= 0 ? const_source(c, t) : NULL;
    if (src) {
        int64_t numel = data_numel(src);
        if (numel > cap)
            return false;
        for (int64_t k = 0; k < numel; k++)
            out[k] = read_double(src->data, src->dtype, k);
        *n = numel;
        return true;
    }
    const struct cp_tensor *T = cp_graph_tensor(c->g, t);
    const struct cp_node *p = T ? cp_graph_node(c->g, T->producer) : NULL;
    if (p && !p->dead && p->op == CP_OP_CONSTANT) {
        const struct cp_attr *a = cp_node_attr(p, "value_float");
        if (a && a->type == CP_ATTR_FLOAT && cap >= 1) {
            out[0] = a->f;
            *n = 1;
            return true;
        }
        a = cp_node_attr(p, "value_floats");
        if (a && a->type == CP_ATTR_FLOATS && (int64_t)a->n <= cap) {
            for (size_t k = 0; k < a->n; k++)
                out[k] = a->floats[k];
            *n = (int64_t)a->n;
            return true;
        }
    }
    int64_t iv[CP_VALUE_MAX_ELEMS], len;
    /* A Cast of known integers to a float type (window functions compute
     * Range's limit that way): the integers, as that type holds them. */
    if (p && !p->dead && p->op == CP_OP_CAST && cp_dtype_is_float(T->dtype) && p->n_inputs == 1 &&
        cp_infer_ints(c, p->inputs[0], iv, CP_VALUE_MAX_ELEMS, &len) && len <= cap) {
        for (int64_t k = 0; k < len; k++) {
            float f = (float)iv[k];
            out[k] = T->dtype == CP_DTYPE_F64 ? (double)iv[k] : (double)f;
        }
        *n = len;
        return true;
    }
    if (!cp_infer_ints(c, t, iv, CP_VALUE_MAX_ELEMS, &len) || len > cap)
        return false;
    for (int64_t k = 0; k < len; k++)
        out[k] = (double)iv[k];
    *n = len;
    return true;
}

bool cp_infer_out_small(const struct cp_infer *c, size_t i, int64_t *numel)
{
    const struct cp_tensor *t = cp_infer_out(c, i);
    *numel = -1;
    if (!t || t->kind != CP_TENSOR_INTERMEDIATE || !cp_infer_dtype_has_value(t->dtype))
        return false;
    int64_t n = cp_shape_numel(&t->shape);
    if (n < 0 || n > CP_VALUE_MAX_ELEMS)
        return false;
    *numel = n;
    return true;
}

enum cp_status cp_infer_set_vals(struct cp_infer *c, size_t i, struct cp_sval *e, int64_t n)
{
    int64_t numel;
    if (!e || !cp_infer_out_small(c, i, &numel) || numel != n) {
        free(e);
        return CP_OK;
    }
    int32_t ti = c->node->outputs[i];
    struct cp_tensor *t = cp_graph_tensor(c->g, ti);
    bool all = true;
    for (int64_t k = 0; k < n; k++) {
        if (e[k].known)
            e[k].v = cp_infer_wrap(t->dtype, e[k].v);
        else
            all = false;
    }
    struct cp_svals *sv = &c->vals[ti];
    free(sv->e);
    sv->e = e;
    sv->n = n;
    sv->loaded = true;
    if (!all || !dtype_has_public_value(t->dtype) || c->private_values)
        return CP_OK;
    int64_t *v = cp_graph_alloc(c->g, (size_t)(n ? n : 1) * sizeof *v);
    if (!v)
        return cp_infer_fail_st(c, CP_ERR_NOMEM, "out of memory storing the value of '%s'",
                                t->name);
    for (int64_t k = 0; k < n; k++)
        v[k] = e[k].v;
    t->value = v;
    t->value_len = n;
    return CP_OK;
}

enum cp_status cp_infer_copy_vals(struct cp_infer *c, size_t i, const struct cp_sval *src,
                                  const int64_t *map, int64_t n)
{
    struct cp_sval *e = cp_calloc((size_t)n, sizeof *e);
    if (!e)
        return cp_infer_fail_st(c, CP_ERR_NOMEM, "out of memory propagating values");
    for (int64_t k = 0; k < n; k++)
        e[k] = src[map ? map[k] : k];
    return cp_infer_set_vals(c, i, e, n);
}

void cp_infer_free_vals(struct cp_infer *c)
{
    if (c->vals)
        for (size_t i = 0; i < c->n_vals; i++)
            free(c->vals[i].e);
    free(c->vals);
    c->vals = NULL;
}

/* Small integer initializers get their public value up front, so every
 * consumer (here and in later passes) sees it the same way. */
enum cp_status cp_infer_fill_initializer_values(struct cp_infer *c)
{
    size_t nt = cp_graph_n_tensors(c->g);
    for (size_t i = 0; i < nt; i++) {
        struct cp_tensor *t = cp_graph_tensor(c->g, (int32_t)i);
        if (t->kind != CP_TENSOR_INITIALIZER || t->value || !dtype_has_public_value(t->dtype))
            continue;
        int64_t n;
        const struct cp_sval *e = cp_infer_vals(c, (int32_t)i, &n);
        if (!e)
            continue;
        int64_t *v = cp_graph_alloc(c->g, (size_t)(n ? n : 1) * sizeof *v);
        if (!v)
            return cp_diag_set(c->d, CP_ERR_NOMEM, "out of memory reading '%s'", t->name);
        for (int64_t k = 0; k < n; k++)
            v[k] = e[k].v;
        t->value = v;
        t->value_len = n;
    }
    return CP_OK;
}
