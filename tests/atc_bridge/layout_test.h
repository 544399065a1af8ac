/*
 * Private to tests/atc_bridge: what the layout-pass tests share
 * (test_pass_layout.c: LayoutTransformPass; test_pass_layout_roundtrip.c:
 * TransposeRoundTripEliminationPass): running one pass as the manager does,
 * running a graph or model on fast or reference kernels, seeded inputs,
 * and the invariants every laid-out graph must keep (each tensor's layout
 * decided, a TransData exactly where two layouts meet).
 */
#ifndef CP_TESTS_LAYOUT_TEST_H
#define CP_TESTS_LAYOUT_TEST_H

#include "atc_bridge/convert.h"
#include "om/om.h"
#include "atc_bridge/passes/pass.h"
#include "runner/runner.h"
#include "support/run.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODELS_DIR CP_SOURCE_DIR "/examples/models/"
#define MAX_REL_L2 1e-4
#define MAX_IO     8

/* ---- graphs and passes ---------------------------------------------------------------- */

static inline struct cp_graph *import(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, MODELS_DIR "%s.onnx", name);
    struct cp_graph *g;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_onnx_import(path, NULL, 0, &g, NULL, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_verify(g, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_compact(g, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_infer(g, &d), CP_OK, "%s", d.msg);
    return g;
}

static inline const struct cp_pass *find_pass(const char *name)
{
    for (const struct cp_pass *p = cp_layout_passes; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    for (const struct cp_pass *p = cp_cleanup_passes; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p; /* a cleanup pass the layout pass builds on */
    cr_assert_fail("no layout or cleanup pass %s", name);
    return NULL;
}

/* Run one layout pass as the manager does, for a target whose vectors
 * hold `vector_floats` floats (16: AVX-512, 8: AVX2): then compact,
 * verify, infer. */
static inline bool run_pass_for(struct cp_graph *g, const char *name,
                                const struct cp_convert_config *c, int vector_floats)
{
    struct cp_convert_config dflt;
    cp_convert_config_init(&dflt);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_pass_ctx ctx = {
        .g = g, .config = c ? c : &dflt, .d = &d, .vector_floats = vector_floats};
    bool changed = false;
    cr_assert_eq(find_pass(name)->run(&ctx, &changed), CP_OK, "%s: %s", name, d.msg);
    if (changed) {
        cr_assert_eq(cp_graph_compact(g, &d), CP_OK, "%s: %s", name, d.msg);
        cr_assert_eq(cp_graph_verify(g, &d), CP_OK, "%s left an invalid graph: %s", name, d.msg);
        cr_assert_eq(cp_graph_infer(g, &d), CP_OK, "%s: %s", name, d.msg);
    }
    return changed;
}

/* run_pass_for an AVX-512 target. */
static inline bool run_pass(struct cp_graph *g, const char *name, const struct cp_convert_config *c)
{
    return run_pass_for(g, name, c, 16);
}

static inline size_t count_op(const struct cp_graph *g, enum cp_op op)
{
    size_t n = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        n += !nd->dead && nd->op == op;
    }
    return n;
}

static inline const struct cp_node *find_node_op(const struct cp_graph *g, enum cp_op op)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (!nd->dead && nd->op == op)
            return nd;
    }
    return NULL;
}

static inline struct cp_convert_config config(enum cp_layout_policy pol, enum cp_input_format fmt)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    c.layout_policy = pol;
    c.input_format = fmt;
    return c;
}

/* ---- running -------------------------------------------------------------------------- */

struct io {
    struct cp_host_tensor t[MAX_IO];
    size_t n;
};

static inline void io_release(struct io *io)
{
    for (size_t i = 0; i < io->n; i++)
        cp_host_tensor_release(&io->t[i]);
    io->n = 0;
}

static inline struct cp_runtime *runtime(void)
{
    struct cp_runtime_options o = {.threads = 2};
    struct cp_runtime *rt;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_runtime_create(&o, &rt, &d), CP_OK, "%s", d.msg);
    return rt;
}

/* Run model m once on `in` (matched by position). OUT: *out. */
static inline void run_model(struct cp_model *m, bool reference_only, const struct io *in,
                             struct io *out)
{
    struct cp_plan_options o = {.buffer_optimize = -1, .reference_only = reference_only};
    struct cp_plan *p;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_create(m, &o, &p, &d), CP_OK, "%s", d.msg);
    for (size_t i = 0; i < in->n; i++)
        cr_assert_eq(cp_plan_set_input(p, i, &in->t[i], &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_plan_run(p, -1, &d), CP_OK, "%s", d.msg);
    out->n = cp_plan_n_outputs(p);
    for (size_t i = 0; i < out->n; i++)
        cr_assert_eq(cp_plan_get_output(p, i, &out->t[i], &d), CP_OK, "%s", d.msg);
    cp_plan_free(p);
}

/* Run a graph (the model takes it over). */
static inline void run_graph(struct cp_runtime *rt, struct cp_graph *g, bool reference_only,
                             const struct io *in, struct io *out)
{
    struct cp_model *m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_model_from_graph(rt, g, NULL, &m, &d), CP_OK, "%s", d.msg);
    run_model(m, reference_only, in, out);
    cp_model_free(m);
}

/* Seeded random inputs for the graph's inputs. */
static inline void random_inputs(const struct cp_graph *g, struct io *in)
{
    struct cp_diag d;
    cp_diag_init(&d);
    in->n = cp_graph_n_inputs(g);
    for (size_t i = 0; i < in->n; i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
        struct cp_host_tensor *h = &in->t[i];
        memset(h, 0, sizeof *h);
        snprintf(h->name, sizeof h->name, "%s", t->name);
        h->dtype = t->dtype;
        h->rank = t->shape.rank;
        for (int k = 0; k < t->shape.rank; k++)
            h->dims[k] = t->shape.dims[k].value;
        cr_assert_eq(cp_tensor_fill_random(h, 42 + i, &d), CP_OK, "%s", d.msg);
    }
}

/* test_data_set_0 of an example model. */
static inline void example_io(const char *name, struct io *in, struct io *want)
{
    char path[640];
    struct cp_diag d;
    cp_diag_init(&d);
    struct io *sets[2] = {in, want};
    const char *kinds[2] = {"input", "output"};
    for (int s = 0; s < 2; s++) {
        sets[s]->n = 0;
        for (size_t i = 0; i < MAX_IO; i++) {
            snprintf(path, sizeof path, MODELS_DIR "%s/test_data_set_0/%s_%zu.pb", name, kinds[s],
                     i);
            if (access(path, F_OK) != 0)
                break;
            cr_assert_eq(cp_tensor_read_file(path, &sets[s]->t[i], &d), CP_OK, "%s", d.msg);
            sets[s]->n++;
        }
    }
}

/* Put example inputs in the order of the model's inputs. */
static inline void order_inputs(const struct cp_graph *g, struct io *in)
{
    struct io sorted = {.n = in->n};
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++) {
        const char *name = cp_graph_tensor(g, cp_graph_input(g, i))->name;
        for (size_t k = 0; k < in->n; k++)
            if (strcmp(in->t[k].name, name) == 0)
                sorted.t[i] = in->t[k];
    }
    *in = sorted;
}

static inline double rel_l2(const struct io *want, const struct io *got)
{
    cr_assert_eq(want->n, got->n);
    double num = 0, den = 0;
    for (size_t i = 0; i < want->n; i++) {
        cr_assert_eq(want->t[i].nbytes, got->t[i].nbytes, "output %zu: %zu bytes, expected %zu", i,
                     got->t[i].nbytes, want->t[i].nbytes);
        const float *a = want->t[i].data, *b = got->t[i].data;
        for (size_t k = 0; k < want->t[i].nbytes / sizeof(float); k++) {
            double e = (double)a[k] - (double)b[k];
            num += e * e;
            den += (double)a[k] * (double)a[k];
        }
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- the layout invariants --------------------------------------------------------------- */

static inline bool plain(enum cp_layout l)
{
    return l == CP_LAYOUT_UNDEF || l == CP_LAYOUT_ND || l == CP_LAYOUT_NCHW || l == CP_LAYOUT_NCDHW;
}

/* x is one value per channel of the image y ([C,1,1], [1,C,1,1], [N,C,1,1]). */
static inline bool per_channel(const struct cp_tensor *x, const struct cp_tensor *y)
{
    int r = x->shape.rank;
    return y->shape.rank == 4 && r >= 3 && r <= 4 && !cp_shape_equal(&x->shape, &y->shape) &&
           x->shape.dims[r - 3].value == y->shape.dims[1].value &&
           x->shape.dims[r - 2].value == 1 && x->shape.dims[r - 1].value == 1;
}

static inline bool reads_layouts(enum cp_op op)
{
    switch (op) {
    case CP_OP_CONV:
    case CP_OP_FUSED_CONV:
    case CP_OP_MAX_POOL:
    case CP_OP_AVERAGE_POOL:
    case CP_OP_GLOBAL_AVERAGE_POOL:
    case CP_OP_GROUP_NORMALIZATION:
    case CP_OP_RELU:
    case CP_OP_LEAKY_RELU:
    case CP_OP_SIGMOID:
    case CP_OP_TANH:
    case CP_OP_EXP:
    case CP_OP_SQRT:
    case CP_OP_ERF:
    case CP_OP_CLIP:
    case CP_OP_GELU:
    case CP_OP_ADD:
    case CP_OP_SUB:
    case CP_OP_MUL:
    case CP_OP_DIV:
    case CP_OP_POW:
    case CP_OP_HARD_SWISH:
    case CP_OP_HARD_SIGMOID:
    case CP_OP_ELU:
    case CP_OP_SOFTPLUS:
    case CP_OP_MISH:
    case CP_OP_CONCAT: /* of channels, every part in the result's layout */
    case CP_OP_BATCH_NORMALIZATION:
    case CP_OP_GATHER: /* channel selections, NHWC in and out */
    case CP_OP_SLICE:
        return true;
    default:
        return false;
    }
}

static inline bool is_elementwise(enum cp_op op)
{
    return reads_layouts(op) && op != CP_OP_CONV && op != CP_OP_FUSED_CONV &&
           op != CP_OP_MAX_POOL && op != CP_OP_AVERAGE_POOL && op != CP_OP_GLOBAL_AVERAGE_POOL &&
           op != CP_OP_GATHER && op != CP_OP_SLICE;
}

/* Every tensor's layout is decided; a TransData changes layout and reads
 * what its src_format says; only ops whose kernels read layouts see
 * non-plain tensors, elementwise ones with every full-size operand in the
 * output's layout; no tensor is converted twice to the same layout; graph
 * outputs are plain. Returns the number of TransData nodes. */
static inline size_t check_layouts(const struct cp_graph *g, const char *what)
{
    size_t n_td = 0;
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        cr_assert(t->shape.rank < 0 || t->layout != CP_LAYOUT_UNDEF, "%s: '%s' has no layout", what,
                  t->name);
        if (!plain(t->layout))
            cr_assert(t->shape.rank == 4 && t->dtype == CP_DTYPE_F32, "%s: '%s' is %s", what,
                      t->name, cp_layout_name(t->layout));
        if (t->layout == CP_LAYOUT_NCHW16C || t->layout == CP_LAYOUT_NCHW8C)
            cr_assert_eq(t->shape.dims[1].value % (t->layout == CP_LAYOUT_NCHW16C ? 16 : 8), 0,
                         "%s: '%s' (%lld channels) would pad as %s", what, t->name,
                         (long long)t->shape.dims[1].value, cp_layout_name(t->layout));
    }
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        const struct cp_tensor *y = cp_graph_tensor(g, n->outputs[0]);
        if (n->op == CP_OP_TRANS_DATA) {
            n_td++;
            const struct cp_tensor *x = cp_graph_tensor(g, n->inputs[0]);
            enum cp_layout src = cp_layout_from_name(cp_node_attr_string(n, "src_format", ""));
            enum cp_layout dst = cp_layout_from_name(cp_node_attr_string(n, "dst_format", ""));
            cr_assert(plain(src) ? plain(x->layout) : x->layout == src,
                      "%s: TransData '%s' reads %s as %s", what, n->name, cp_layout_name(x->layout),
                      cp_layout_name(src));
            cr_assert_eq(y->layout, dst, "%s: TransData '%s'", what, n->name);
            cr_assert(!(plain(src) && plain(dst)) && src != dst,
                      "%s: TransData '%s' from %s to %s changes nothing", what, n->name,
                      cp_layout_name(src), cp_layout_name(dst));
            for (size_t j = 0; j < i; j++) {
                const struct cp_node *o = cp_graph_node(g, (int32_t)j);
                if (!o->dead && o->op == CP_OP_TRANS_DATA && o->inputs[0] == n->inputs[0])
                    cr_assert_neq(cp_graph_tensor(g, o->outputs[0])->layout, y->layout,
                                  "%s: '%s' is converted to %s twice", what, x->name,
                                  cp_layout_name(y->layout));
            }
            continue;
        }
        for (size_t j = 0; j < n->n_inputs; j++) {
            if (n->inputs[j] < 0)
                continue;
            const struct cp_tensor *x = cp_graph_tensor(g, n->inputs[j]);
            if (plain(x->layout))
                continue;
            cr_assert(reads_layouts(n->op), "%s: '%s' (%s) reads '%s' in %s", what, n->name,
                      n->op_type, x->name, cp_layout_name(x->layout));
            if (n->op == CP_OP_GATHER || n->op == CP_OP_SLICE)
                cr_assert(j == 0 && x->layout == CP_LAYOUT_NHWC && y->layout == CP_LAYOUT_NHWC,
                          "%s: channel selection '%s' reads %s, writes %s", what, n->name,
                          cp_layout_name(x->layout), cp_layout_name(y->layout));
            if (is_elementwise(n->op))
                cr_assert_eq(x->layout, y->layout, "%s: '%s' mixes %s and %s", what, n->name,
                             cp_layout_name(x->layout), cp_layout_name(y->layout));
        }
        if (is_elementwise(n->op) && !plain(y->layout))
            for (size_t j = 0; j < n->n_inputs; j++) {
                const struct cp_tensor *x =
                    n->inputs[j] >= 0 ? cp_graph_tensor(g, n->inputs[j]) : NULL;
                if ((n->op == CP_OP_GROUP_NORMALIZATION || n->op == CP_OP_BATCH_NORMALIZATION) &&
                    j > 0)
                    break; /* scale and bias are per channel */
                if (x && per_channel(x, y))
                    continue; /* its bytes are the same in every layout */
                if (x && cp_shape_numel(&x->shape) != 1)
                    cr_assert_eq(x->layout, y->layout, "%s: '%s' reads '%s' as %s", what, n->name,
                                 x->name, cp_layout_name(x->layout));
            }
    }
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, cp_graph_output(g, i));
        cr_assert(plain(t->layout), "%s: output '%s' is %s", what, t->name,
                  cp_layout_name(t->layout));
    }
    return n_td;
}

static inline size_t count_layout(const struct cp_graph *g, enum cp_layout l)
{
    size_t n = 0;
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++)
        n += cp_graph_tensor(g, (int32_t)i)->layout == l;
    return n;
}

/* n values in a small repeating ramp, scaled. */
static inline float *ramp(int64_t n, float scale)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = scale * (float)((i * 37) % 11 - 5);
    return v;
}

#endif
