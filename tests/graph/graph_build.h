/* Helpers for graph tests: build small graphs by name with the public API.
 * Every helper asserts on failure, so a test body reads as the graph it
 * builds. static inline keeps unused helpers quiet. */
#ifndef CP_TESTS_GRAPH_BUILD_H
#define CP_TESTS_GRAPH_BUILD_H

#include <criterion/criterion.h>
#include <string.h>

#include "graph/graph.h"

static inline struct cp_graph *gb_graph(int64_t opset)
{
    struct cp_graph *g = cp_graph_create();
    cr_assert_not_null(g);
    cp_graph_set_opset(g, opset);
    return g;
}

static inline int32_t gb_tensor(struct cp_graph *g, const char *name, enum cp_dtype dt, int rank,
                                const int64_t *dims, enum cp_tensor_kind kind)
{
    struct cp_shape s;
    if (rank < 0)
        cp_shape_set_unknown(&s);
    else
        cp_shape_set(&s, rank, dims);
    int32_t idx;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_tensor(g, name, dt, &s, kind, &idx, &d), CP_OK, "%s", d.msg);
    return idx;
}

/* A graph input; a dims entry < 0 is dynamic, named by syms[k] when given. */
static inline int32_t gb_input_sym(struct cp_graph *g, const char *name, enum cp_dtype dt, int rank,
                                   const int64_t *dims, const char *const *syms)
{
    int32_t t = gb_tensor(g, name, dt, rank, dims, CP_TENSOR_INPUT);
    struct cp_tensor *T = cp_graph_tensor(g, t);
    for (int k = 0; syms && k < rank; k++)
        if (syms[k])
            T->shape.dims[k].sym = cp_graph_strdup(g, syms[k]);
    cr_assert_eq(cp_graph_add_input(g, t), CP_OK);
    return t;
}

static inline int32_t gb_input(struct cp_graph *g, const char *name, enum cp_dtype dt, int rank,
                               const int64_t *dims)
{
    return gb_input_sym(g, name, dt, rank, dims, NULL);
}

/* An initializer with data copied into the graph's arena (data may be NULL:
 * a weight known by shape only). */
static inline int32_t gb_init(struct cp_graph *g, const char *name, enum cp_dtype dt, int rank,
                              const int64_t *dims, const void *data)
{
    int32_t t = gb_tensor(g, name, dt, rank, dims, CP_TENSOR_INITIALIZER);
    if (!data)
        return t;
    struct cp_tensor *T = cp_graph_tensor(g, t);
    size_t nbytes = (size_t)cp_shape_numel(&T->shape) * cp_dtype_size(dt);
    void *p = cp_graph_alloc(g, nbytes ? nbytes : 1);
    cr_assert_not_null(p);
    memcpy(p, data, nbytes);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_set_data(g, t, p, nbytes, CP_DATA_ARENA, &d), CP_OK, "%s", d.msg);
    return t;
}

/* 1-D i64 initializer. */
static inline int32_t gb_ints(struct cp_graph *g, const char *name, int64_t n, const int64_t *v)
{
    return gb_init(g, name, CP_DTYPE_I64, 1, &n, v);
}

/* Scalar i64 initializer. */
static inline int32_t gb_scalar(struct cp_graph *g, const char *name, int64_t v)
{
    return gb_init(g, name, CP_DTYPE_I64, 0, NULL, &v);
}

static inline int32_t gb_floats(struct cp_graph *g, const char *name, int64_t n, const float *v)
{
    return gb_init(g, name, CP_DTYPE_F32, 1, &n, v);
}

/* Add a node of `domain` ("" for ONNX's, CP_DOMAIN for cannprof's own ops)
 * by tensor names. Inputs "" are absent (-1); outputs that do not exist yet
 * are created as intermediates of unknown shape. Lists end with NULL. */
static inline int32_t gb_node_in(struct cp_graph *g, const char *name, const char *op,
                                 const char *domain, const char *const *ins,
                                 const char *const *outs)
{
    int32_t in[16], out[16];
    size_t ni = 0, no = 0;
    for (; ins && ins[ni]; ni++) {
        cr_assert_lt(ni, 16);
        in[ni] = ins[ni][0] ? cp_graph_find_tensor(g, ins[ni]) : -1;
        cr_assert(ins[ni][0] == '\0' || in[ni] >= 0, "no tensor '%s'", ins[ni]);
    }
    for (; outs && outs[no]; no++) {
        cr_assert_lt(no, 16);
        if (!outs[no][0]) {
            out[no] = -1;
            continue;
        }
        out[no] = cp_graph_find_tensor(g, outs[no]);
        if (out[no] < 0)
            out[no] = gb_tensor(g, outs[no], CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    }
    int32_t idx;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, name, op, domain, in, ni, out, no, &name, 1, &idx, &d), CP_OK,
                 "%s", d.msg);
    return idx;
}

/* A node of ONNX's default domain (gb_node_in). */
static inline int32_t gb_node(struct cp_graph *g, const char *name, const char *op,
                              const char *const *ins, const char *const *outs)
{
    return gb_node_in(g, name, op, "", ins, outs);
}

#define GB_IN(...)   ((const char *const[]){__VA_ARGS__, NULL})
#define GB_DIMS(...) ((const int64_t[]){__VA_ARGS__})

static inline const struct cp_tensor *gb_get(struct cp_graph *g, const char *name)
{
    int32_t t = cp_graph_find_tensor(g, name);
    cr_assert_geq(t, 0, "no tensor '%s'", name);
    return cp_graph_tensor(g, t);
}

/* Assert a tensor's shape: rank then dims (-1 for dynamic). */
static inline void gb_assert_shape(struct cp_graph *g, const char *name, int rank,
                                   const int64_t *dims)
{
    const struct cp_tensor *t = gb_get(g, name);
    char buf[96];
    cp_shape_format(&t->shape, buf, sizeof buf);
    cr_assert_eq(t->shape.rank, rank, "'%s': rank %d (%s), expected %d", name, t->shape.rank, buf,
                 rank);
    for (int k = 0; k < rank; k++) {
        int64_t got = t->shape.dims[k].value < 0 ? -1 : t->shape.dims[k].value;
        cr_assert_eq(got, dims[k], "'%s' is %s: dim %d is %lld, expected %lld", name, buf, k,
                     (long long)got, (long long)dims[k]);
    }
}

/* Assert a tensor's public value. */
static inline void gb_assert_value(struct cp_graph *g, const char *name, int64_t n,
                                   const int64_t *v)
{
    const struct cp_tensor *t = gb_get(g, name);
    cr_assert_not_null(t->value, "'%s' has no value", name);
    cr_assert_eq(t->value_len, n, "'%s' has %lld values, expected %lld", name,
                 (long long)t->value_len, (long long)n);
    for (int64_t k = 0; k < n; k++)
        cr_assert_eq(t->value[k], v[k], "'%s' value[%lld] is %lld, expected %lld", name,
                     (long long)k, (long long)t->value[k], (long long)v[k]);
}

/* Run inference and expect success. */
static inline void gb_infer_ok(struct cp_graph *g)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_graph_infer(g, &d);
    cr_assert_eq(st, CP_OK, "inference failed: %s", d.msg);
}

/* Run inference and expect CP_ERR_INVALID; the message goes to msg[1024]. */
static inline void gb_infer_fails(struct cp_graph *g, char *msg)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_graph_infer(g, &d);
    cr_assert_eq(st, CP_ERR_INVALID, "expected an error, got status %d", (int)st);
    memcpy(msg, d.msg, sizeof d.msg);
}

#endif
