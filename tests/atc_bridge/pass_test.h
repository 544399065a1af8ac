/* Helpers for the cleanup pass tests (test_pass_*.c): prepare a hand-built
 * graph as the converter would, run one pass through the pass manager's
 * cp_pass_run_one, inspect the result, and run graphs on the runtime's
 * reference kernels to compare outputs before and after a pass.
 *
 * A test builds its graph with a builder function twice: one copy goes
 * through the pass, the other is the reference (the runtime takes
 * ownership of a graph it runs). Every helper asserts on failure. */
#ifndef CP_TESTS_PASS_TEST_H
#define CP_TESTS_PASS_TEST_H

#include "atc_bridge/passes/pass.h"
#include "runner/runner.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define PT_MAX_OUT 4

struct pt_outputs {
    size_t n;
    struct cp_host_tensor t[PT_MAX_OUT];
};

static inline void pt_outputs_release(struct pt_outputs *o)
{
    for (size_t i = 0; i < o->n; i++)
        cp_host_tensor_release(&o->t[i]);
    o->n = 0;
}

/* Verify, compact and infer, as cp_convert does before the passes. */
static inline void pt_prepare(struct cp_graph *g)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_verify(g, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_compact(g, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_infer(g, &d), CP_OK, "%s", d.msg);
}

/* Run pass `name` through the manager; returns whether it changed the
 * graph (the manager has then compacted, verified and inferred it). */
static inline bool pt_run_pass(struct cp_graph *g, const char *name)
{
    struct cp_diag d;
    cp_diag_init(&d);
    bool changed = false;
    cr_assert_eq(cp_pass_run_one(g, name, NULL, &changed, &d), CP_OK, "%s: %s", name, d.msg);
    return changed;
}

/* Run g (taken over) with seeded random inputs, on the reference kernels
 * only or on the fast ones where they apply. */
static inline void pt_run_kernels(struct cp_graph *g, uint64_t seed, bool reference_only,
                                  struct pt_outputs *out)
{
    struct cp_runtime_options o = {.threads = 1};
    struct cp_runtime *rt;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_runtime_create(&o, &rt, &d), CP_OK, "%s", d.msg);
    struct cp_model *m;
    cr_assert_eq(cp_model_from_graph(rt, g, NULL, &m, &d), CP_OK, "%s", d.msg);
    struct cp_plan_options po = {.buffer_optimize = -1, .reference_only = reference_only};
    struct cp_plan *p;
    cr_assert_eq(cp_plan_create(m, &po, &p, &d), CP_OK, "%s", d.msg);
    for (size_t i = 0; i < cp_plan_n_inputs(p); i++) {
        const struct cp_tensor *t = cp_plan_input(p, i);
        struct cp_host_tensor h;
        memset(&h, 0, sizeof h);
        snprintf(h.name, sizeof h.name, "%s", t->name);
        h.dtype = t->dtype;
        h.rank = t->shape.rank;
        for (int k = 0; k < h.rank; k++)
            h.dims[k] = t->shape.dims[k].value;
        cr_assert_eq(cp_tensor_fill_random(&h, seed + i, &d), CP_OK, "%s", d.msg);
        cr_assert_eq(cp_plan_set_input(p, i, &h, &d), CP_OK, "%s", d.msg);
        cp_host_tensor_release(&h);
    }
    cr_assert_eq(cp_plan_run(p, -1, &d), CP_OK, "%s", d.msg);
    out->n = cp_plan_n_outputs(p);
    cr_assert_leq(out->n, PT_MAX_OUT);
    for (size_t i = 0; i < out->n; i++)
        cr_assert_eq(cp_plan_get_output(p, i, &out->t[i], &d), CP_OK, "%s", d.msg);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

/* Run g (taken over) on reference kernels with seeded random inputs. */
static inline void pt_run_ref(struct cp_graph *g, uint64_t seed, struct pt_outputs *out)
{
    pt_run_kernels(g, seed, true, out);
}

/* Outputs agree: same names, dtypes and shapes; f32 within a relative L2
 * error of max_rel, other dtypes exactly. */
static inline void pt_assert_close(const struct pt_outputs *ref, const struct pt_outputs *got,
                                   double max_rel)
{
    cr_assert_eq(got->n, ref->n, "%zu outputs, expected %zu", got->n, ref->n);
    for (size_t i = 0; i < ref->n; i++) {
        const struct cp_host_tensor *a = &ref->t[i], *b = &got->t[i];
        cr_assert_str_eq(b->name, a->name);
        cr_assert_eq(b->dtype, a->dtype, "output '%s'", a->name);
        cr_assert_eq(b->rank, a->rank, "output '%s'", a->name);
        for (int k = 0; k < a->rank; k++)
            cr_assert_eq(b->dims[k], a->dims[k], "output '%s' dim %d", a->name, k);
        cr_assert_eq(b->nbytes, a->nbytes, "output '%s'", a->name);
        if (a->dtype != CP_DTYPE_F32) {
            cr_assert_eq(memcmp(a->data, b->data, a->nbytes), 0, "output '%s' differs", a->name);
            continue;
        }
        const float *x = a->data, *y = b->data;
        double num = 0, den = 0;
        for (size_t j = 0; j < a->nbytes / sizeof(float); j++) {
            double e = (double)x[j] - (double)y[j];
            num += e * e;
            den += (double)x[j] * (double)x[j];
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        cr_assert_leq(rel, max_rel, "output '%s': relative L2 error %g > %g", a->name, rel,
                      max_rel);
    }
}

/* Build with `build` twice; run pass `name` on one copy, check that it
 * changed the graph as `expect_changed` says, hand the rewritten graph to
 * `check` (may be NULL) for structural assertions, then compare both
 * copies' outputs on the reference kernels. */
static inline void pt_check_pass(struct cp_graph *(*build)(void), const char *name,
                                 bool expect_changed, void (*check)(struct cp_graph *g),
                                 double max_rel)
{
    struct cp_graph *g = build();
    pt_prepare(g);
    bool changed = pt_run_pass(g, name);
    cr_assert_eq(changed, expect_changed, "%s %s the graph", name,
                 changed ? "changed" : "did not change");
    if (check)
        check(g);
    struct pt_outputs after, before;
    pt_run_ref(g, 7, &after);
    struct cp_graph *g0 = build();
    pt_prepare(g0);
    pt_run_ref(g0, 7, &before);
    pt_assert_close(&before, &after, max_rel);
    pt_outputs_release(&after);
    pt_outputs_release(&before);
}

/* Live nodes of op `op`. */
static inline size_t pt_count_op(const struct cp_graph *g, enum cp_op op)
{
    size_t n = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        n += !nd->dead && nd->op == op;
    }
    return n;
}

/* The live node called `name`, or NULL. */
static inline const struct cp_node *pt_node(const struct cp_graph *g, const char *name)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (!nd->dead && strcmp(nd->name, name) == 0)
            return nd;
    }
    return NULL;
}

/* The live node that produces tensor `name`. */
static inline const struct cp_node *pt_producer(const struct cp_graph *g, const char *name)
{
    int32_t t = cp_graph_find_tensor(g, name);
    cr_assert_geq(t, 0, "no tensor '%s'", name);
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        for (size_t k = 0; !nd->dead && k < nd->n_outputs; k++)
            if (nd->outputs[k] == t)
                return nd;
    }
    return NULL;
}

static inline bool pt_has_origin(const struct cp_node *n, const char *origin)
{
    for (size_t i = 0; i < n->n_origins; i++)
        if (strcmp(n->origins[i], origin) == 0)
            return true;
    return false;
}

#endif
