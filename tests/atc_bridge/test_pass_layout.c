/* The layout passes (atc_bridge/passes/layout*.c): round trips through
 * NHWC disappear without changing what the model computes, every layout
 * policy puts a TransData exactly where two layouts meet and nowhere else,
 * the tags reach the .om, and outputs stay within 1e-4 (fp32) of the
 * unconverted model, with the fast kernels and with the reference ones.
 *
 * The passes are called through their table entries with a context built
 * by hand; the example-model tests go through cp_convert, so they run
 * every pass family in the manager's order. */
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

static struct cp_graph *import(const char *name)
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

static const struct cp_pass *find_pass(const char *name)
{
    for (const struct cp_pass *p = cp_layout_passes; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    cr_assert_fail("no layout pass %s", name);
    return NULL;
}

/* Run one layout pass as the manager does: then compact, verify, infer. */
static bool run_pass(struct cp_graph *g, const char *name, const struct cp_convert_config *c)
{
    struct cp_convert_config dflt;
    cp_convert_config_init(&dflt);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_pass_ctx ctx = {.g = g, .config = c ? c : &dflt, .d = &d};
    bool changed = false;
    cr_assert_eq(find_pass(name)->run(&ctx, &changed), CP_OK, "%s: %s", name, d.msg);
    if (changed) {
        cr_assert_eq(cp_graph_compact(g, &d), CP_OK, "%s: %s", name, d.msg);
        cr_assert_eq(cp_graph_verify(g, &d), CP_OK, "%s left an invalid graph: %s", name, d.msg);
        cr_assert_eq(cp_graph_infer(g, &d), CP_OK, "%s: %s", name, d.msg);
    }
    return changed;
}

static size_t count_op(const struct cp_graph *g, enum cp_op op)
{
    size_t n = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        n += !nd->dead && nd->op == op;
    }
    return n;
}

static const struct cp_node *find_node_op(const struct cp_graph *g, enum cp_op op)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (!nd->dead && nd->op == op)
            return nd;
    }
    return NULL;
}

static struct cp_convert_config config(enum cp_layout_policy pol, enum cp_input_format fmt)
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

static void io_release(struct io *io)
{
    for (size_t i = 0; i < io->n; i++)
        cp_host_tensor_release(&io->t[i]);
    io->n = 0;
}

static struct cp_runtime *runtime(void)
{
    struct cp_runtime_options o = {.threads = 2};
    struct cp_runtime *rt;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_runtime_create(&o, &rt, &d), CP_OK, "%s", d.msg);
    return rt;
}

/* Run model m once on `in` (matched by position). OUT: *out. */
static void run_model(struct cp_model *m, bool reference_only, const struct io *in, struct io *out)
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
static void run_graph(struct cp_runtime *rt, struct cp_graph *g, bool reference_only,
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
static void random_inputs(const struct cp_graph *g, struct io *in)
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
static void example_io(const char *name, struct io *in, struct io *want)
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
static void order_inputs(const struct cp_graph *g, struct io *in)
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

static double rel_l2(const struct io *want, const struct io *got)
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

static bool plain(enum cp_layout l)
{
    return l == CP_LAYOUT_UNDEF || l == CP_LAYOUT_ND || l == CP_LAYOUT_NCHW || l == CP_LAYOUT_NCDHW;
}

/* x is one value per channel of the image y ([C,1,1], [1,C,1,1], [N,C,1,1]). */
static bool per_channel(const struct cp_tensor *x, const struct cp_tensor *y)
{
    int r = x->shape.rank;
    return y->shape.rank == 4 && r >= 3 && r <= 4 && !cp_shape_equal(&x->shape, &y->shape) &&
           x->shape.dims[r - 3].value == y->shape.dims[1].value &&
           x->shape.dims[r - 2].value == 1 && x->shape.dims[r - 1].value == 1;
}

static bool reads_layouts(enum cp_op op)
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
        return true;
    default:
        return false;
    }
}

static bool is_elementwise(enum cp_op op)
{
    return reads_layouts(op) && op != CP_OP_CONV && op != CP_OP_FUSED_CONV &&
           op != CP_OP_MAX_POOL && op != CP_OP_AVERAGE_POOL && op != CP_OP_GLOBAL_AVERAGE_POOL;
}

/* Every tensor's layout is decided; a TransData changes layout and reads
 * what its src_format says; only ops whose kernels read layouts see
 * non-plain tensors, elementwise ones with every full-size operand in the
 * output's layout; no tensor is converted twice to the same layout; graph
 * outputs are plain. Returns the number of TransData nodes. */
static size_t check_layouts(const struct cp_graph *g, const char *what)
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

static size_t count_layout(const struct cp_graph *g, enum cp_layout l)
{
    size_t n = 0;
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++)
        n += cp_graph_tensor(g, (int32_t)i)->layout == l;
    return n;
}

/* ---- TransposeRoundTripEliminationPass --------------------------------------------------- */

Test(layout_pass, roundtrip_removes_every_transpose_of_the_nhwc_example)
{
    struct cp_graph *g = import("nhwc_roundtrip");
    cr_assert_eq(count_op(g, CP_OP_TRANSPOSE), 6);
    cr_assert(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    cr_assert_eq(count_op(g, CP_OP_TRANSPOSE), 0, "%zu Transposes left",
                 count_op(g, CP_OP_TRANSPOSE));
    /* the per-channel constants now broadcast over NCHW */
    const struct cp_node *mul = find_node_op(g, CP_OP_MUL);
    cr_assert_not_null(mul);
    gb_assert_shape(g, cp_graph_tensor(g, mul->inputs[1])->name, 3, GB_DIMS(16, 1, 1));
    const struct cp_node *rm = find_node_op(g, CP_OP_REDUCE_MEAN);
    cr_assert_not_null(rm);
    const struct cp_attr *axes = cp_node_attr(rm, "axes");
    cr_assert(axes && axes->n == 1 && axes->ints[0] == 1, "ReduceMean now over the channels");

    struct cp_runtime *rt = runtime();
    struct io in, want, got;
    example_io("nhwc_roundtrip", &in, &want);
    struct cp_graph *g2 = import("nhwc_roundtrip");
    run_pass(g2, "TransposeRoundTripEliminationPass", NULL);
    run_graph(rt, g, false, &in, &got);
    double fast = rel_l2(&want, &got);
    io_release(&got);
    run_graph(rt, g2, true, &in, &got);
    double ref = rel_l2(&want, &got);
    io_release(&got);
    cr_log_info("nhwc_roundtrip without round trips: rel L2 %.3g (fast), %.3g (reference)", fast,
                ref);
    cr_expect_leq(fast, MAX_REL_L2, "fast kernels: relative L2 error %.3g", fast);
    cr_expect_leq(ref, MAX_REL_L2, "reference kernels: relative L2 error %.3g", ref);
    io_release(&in);
    io_release(&want);
    cp_runtime_free(rt);
}

Test(layout_pass, roundtrip_example_converted_with_every_pass_has_no_transpose)
{
    char *dir = cp_scratch_dir();
    struct cp_runtime *rt = runtime();
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_NCHW, CP_FMT_NCHW);
    snprintf(c.model, sizeof c.model, MODELS_DIR "nhwc_roundtrip.onnx");
    snprintf(c.output, sizeof c.output, "%s/rt", dir);
    struct cp_convert_result res;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert(&c, &res, &d), CP_OK, "%s", d.msg);
    struct cp_model *m;
    cr_assert_eq(cp_model_load(rt, res.om_path, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(count_op(cp_model_graph(m), CP_OP_TRANSPOSE), 0);
    struct io in, want, got;
    example_io("nhwc_roundtrip", &in, &want);
    run_model(m, false, &in, &got);
    double err = rel_l2(&want, &got);
    cr_expect_leq(err, MAX_REL_L2, "relative L2 error %.3g", err);
    io_release(&in);
    io_release(&want);
    io_release(&got);
    cp_model_free(m);
    cp_runtime_free(rt);
    cp_scratch_remove(dir);
    free(dir);
}

/* x [1,C,H,W] -> Transpose(0,2,3,1) -> body -> Transpose(0,3,1,2) -> y. */
static struct cp_graph *nhwc_sandwich_at(int64_t opset, int64_t c,
                                         void (*body)(struct cp_graph *g, int64_t c))
{
    struct cp_graph *g = gb_graph(opset);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, c, 5, 6));
    int32_t t = gb_node(g, "to_nhwc", "Transpose", GB_IN("x"), GB_IN("xt"));
    cp_node_set_ints(g, t, "perm", GB_DIMS(0, 2, 3, 1), 4);
    body(g, c);
    t = gb_node(g, "to_nchw", "Transpose", GB_IN("bt"), GB_IN("y"));
    cp_node_set_ints(g, t, "perm", GB_DIMS(0, 3, 1, 2), 4);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    return g;
}

static struct cp_graph *nhwc_sandwich(int64_t c, void (*body)(struct cp_graph *g, int64_t c))
{
    return nhwc_sandwich_at(17, c, body);
}

static float *ramp(int64_t n, float scale)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = scale * (float)((i * 37) % 11 - 5);
    return v;
}

static void body_layernorm(struct cp_graph *g, int64_t c)
{
    float *s = ramp(c, 0.3f), *b = ramp(c, 0.1f);
    gb_init(g, "scale", CP_DTYPE_F32, 1, &c, s);
    gb_init(g, "bias", CP_DTYPE_F32, 1, &c, b);
    free(s);
    free(b);
    int32_t n = gb_node(g, "ln", "LayerNormalization", GB_IN("xt", "scale", "bias"), GB_IN("bt"));
    cp_node_set_int(g, n, "axis", -1);
    cp_node_set_float(g, n, "epsilon", 1e-3f);
}

static void body_softmax_reduce(struct cp_graph *g, int64_t c)
{
    (void)c;
    int32_t n = gb_node(g, "smx", "Softmax", GB_IN("xt"), GB_IN("s"));
    cp_node_set_int(g, n, "axis", -1);
    n = gb_node(g, "rmax", "ReduceMax", GB_IN("s"), GB_IN("m"));
    cp_node_set_ints(g, n, "axes", GB_DIMS(1, 2), 2);
    gb_node(g, "sub", "Sub", GB_IN("s", "m"), GB_IN("bt"));
}

static void body_relu(struct cp_graph *g, int64_t c)
{
    (void)c;
    gb_node(g, "relu", "Relu", GB_IN("xt"), GB_IN("bt"));
}

static void body_matmul(struct cp_graph *g, int64_t c)
{
    float *w = ramp(c * c, 0.05f);
    gb_init(g, "w", CP_DTYPE_F32, 2, GB_DIMS(c, c), w);
    free(w);
    gb_node(g, "mm", "MatMul", GB_IN("xt", "w"), GB_IN("bt"));
}

/* Run the sandwich before and after the pass on the same input; the
 * results must agree within tol. */
static void expect_same_function(struct cp_graph *before, struct cp_graph *after, double tol)
{
    struct cp_runtime *rt = runtime();
    struct io in, a, b;
    random_inputs(before, &in);
    run_graph(rt, before, false, &in, &a);
    run_graph(rt, after, false, &in, &b);
    double err = rel_l2(&a, &b);
    cr_expect_leq(err, tol, "the rewrite changed the result: relative L2 %.3g", err);
    io_release(&in);
    io_release(&a);
    io_release(&b);
    cp_runtime_free(rt);
}

Test(layout_pass, roundtrip_writes_a_channel_layernorm_out_over_axis_1)
{
    struct cp_graph *g = nhwc_sandwich(8, body_layernorm);
    cr_assert(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    cr_assert_eq(count_op(g, CP_OP_TRANSPOSE), 0);
    cr_assert_eq(count_op(g, CP_OP_LAYER_NORMALIZATION), 0);
    cr_assert_eq(count_op(g, CP_OP_REDUCE_MEAN), 2);
    const struct cp_attr *axes = cp_node_attr(find_node_op(g, CP_OP_REDUCE_MEAN), "axes");
    cr_assert(axes && axes->n == 1 && axes->ints[0] == 1);
    gb_assert_shape(g, "y", 4, GB_DIMS(1, 8, 5, 6));
    cr_assert_eq(cp_graph_tensor(g, cp_graph_output(g, 0)), gb_get(g, "y"), "output kept");
    expect_same_function(nhwc_sandwich(8, body_layernorm), g, 1e-5);
}

Test(layout_pass, roundtrip_gives_reductions_axes_inputs_from_opset_18)
{
    struct cp_graph *g = nhwc_sandwich_at(18, 8, body_layernorm);
    cr_assert(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    const struct cp_node *rm = find_node_op(g, CP_OP_REDUCE_MEAN);
    cr_assert_null(cp_node_attr(rm, "axes"));
    cr_assert_eq(rm->n_inputs, 2);
    const struct cp_tensor *axes = cp_graph_tensor(g, rm->inputs[1]);
    cr_assert(axes->dtype == CP_DTYPE_I64 && axes->nbytes == 8 &&
              *(const int64_t *)axes->data == 1);
    expect_same_function(nhwc_sandwich_at(18, 8, body_layernorm), g, 1e-5);
}

Test(layout_pass, roundtrip_maps_softmax_and_reduction_axes)
{
    struct cp_graph *g = nhwc_sandwich(4, body_softmax_reduce);
    cr_assert(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    cr_assert_eq(count_op(g, CP_OP_TRANSPOSE), 0);
    cr_assert_eq(cp_node_attr_int(find_node_op(g, CP_OP_SOFTMAX), "axis", -1), 1);
    const struct cp_attr *axes = cp_node_attr(find_node_op(g, CP_OP_REDUCE_MAX), "axes");
    cr_assert(axes && axes->n == 2 && axes->ints[0] == 2 && axes->ints[1] == 3,
              "NHWC axes 1,2 are NCHW axes 2,3");
    expect_same_function(nhwc_sandwich(4, body_softmax_reduce), g, 1e-6);
}

Test(layout_pass, roundtrip_keeps_the_graph_output_name)
{
    struct cp_graph *g = nhwc_sandwich(3, body_relu);
    cr_assert(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);
    const struct cp_tensor *y = cp_graph_tensor(g, cp_graph_output(g, 0));
    cr_assert_str_eq(y->name, "y");
    cr_assert_eq(cp_graph_node(g, y->producer)->op, CP_OP_RELU);
    gb_assert_shape(g, "y", 4, GB_DIMS(1, 3, 5, 6));
    cp_graph_free(g);
}

Test(layout_pass, roundtrip_leaves_transposes_around_layout_dependent_ops)
{
    struct cp_graph *g = nhwc_sandwich(6, body_matmul);
    cr_assert_not(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    cr_assert_eq(count_op(g, CP_OP_TRANSPOSE), 2);
    cp_graph_free(g);
}

/* ---- LayoutTransformPass on a small CNN ------------------------------------------------- */

static void weight(struct cp_graph *g, const char *name, int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    float *v = ramp(n, 0.02f);
    gb_init(g, name, CP_DTYPE_F32, rank, dims, v);
    free(v);
}

static void conv(struct cp_graph *g, const char *x, const char *w, const char *y, int64_t stride)
{
    int32_t n = gb_node(g, y, "Conv", GB_IN(x, w), GB_IN(y));
    cp_node_set_ints(g, n, "pads", GB_DIMS(1, 1, 1, 1), 4);
    cp_node_set_ints(g, n, "strides", GB_DIMS(stride, stride), 2);
}

/* x[1,3,16,16] -> Conv16 -> Relu -> Conv16 -> Add(Relu out) -> MaxPool ->
 * Conv24 -> GlobalAveragePool -> Flatten -> y: one region from the first
 * conv to the pool, read from a 3-channel input, left by a Flatten. */
static struct cp_graph *small_cnn(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 3, 16, 16));
    weight(g, "w1", 4, GB_DIMS(16, 3, 3, 3));
    weight(g, "w2", 4, GB_DIMS(16, 16, 3, 3));
    weight(g, "w3", 4, GB_DIMS(24, 16, 3, 3));
    conv(g, "x", "w1", "c1", 1);
    gb_node(g, "r1", "Relu", GB_IN("c1"), GB_IN("r1"));
    conv(g, "r1", "w2", "c2", 1);
    gb_node(g, "add", "Add", GB_IN("c2", "r1"), GB_IN("a"));
    int32_t p = gb_node(g, "pool", "MaxPool", GB_IN("a"), GB_IN("p"));
    cp_node_set_ints(g, p, "kernel_shape", GB_DIMS(2, 2), 2);
    cp_node_set_ints(g, p, "strides", GB_DIMS(2, 2), 2);
    conv(g, "p", "w3", "c3", 2);
    gb_node(g, "gap", "GlobalAveragePool", GB_IN("c3"), GB_IN("gp"));
    gb_node(g, "flat", "Flatten", GB_IN("gp"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    return g;
}

/* Run small_cnn laid out by `c` against the plain graph, fast and
 * reference kernels. */
static void expect_cnn_unchanged(const struct cp_convert_config *c)
{
    struct cp_runtime *rt = runtime();
    struct io in, a, b;
    struct cp_graph *plain_g = small_cnn();
    random_inputs(plain_g, &in);
    run_graph(rt, plain_g, false, &in, &a);
    for (int ref = 0; ref < 2; ref++) {
        struct cp_graph *g = small_cnn();
        run_pass(g, "LayoutTransformPass", c);
        run_graph(rt, g, ref, &in, &b);
        double err = rel_l2(&a, &b);
        cr_expect_leq(err, MAX_REL_L2, "%s policy, %s kernels: relative L2 %.3g",
                      cp_layout_policy_name(c->layout_policy), ref ? "reference" : "fast", err);
        io_release(&b);
    }
    io_release(&in);
    io_release(&a);
    cp_runtime_free(rt);
}

Test(layout_pass, nchw_policy_tags_every_tensor_plain_and_adds_nothing)
{
    struct cp_graph *g = small_cnn();
    size_t nodes = cp_graph_n_live_nodes(g);
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_NCHW, CP_FMT_NCHW);
    run_pass(g, "LayoutTransformPass", &c);
    cr_assert_eq(cp_graph_n_live_nodes(g), nodes);
    cr_assert_eq(check_layouts(g, "nchw"), 0);
    cr_assert_eq(gb_get(g, "c2")->layout, CP_LAYOUT_NCHW);
    cr_assert_eq(gb_get(g, "y")->layout, CP_LAYOUT_ND);
    cr_assert_eq(count_layout(g, CP_LAYOUT_UNDEF), 0);
    cp_graph_free(g);
}

Test(layout_pass, nhwc_policy_converts_at_the_region_borders_only)
{
    struct cp_graph *g = small_cnn();
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_NHWC, CP_FMT_NCHW);
    run_pass(g, "LayoutTransformPass", &c);
    /* in: the 3-channel image; out: the pooled vector before Flatten */
    cr_assert_eq(check_layouts(g, "nhwc"), 2);
    const char *inside[] = {"c1", "r1", "c2", "a", "p", "c3", "gp"};
    for (size_t i = 0; i < sizeof inside / sizeof *inside; i++)
        cr_assert_eq(gb_get(g, inside[i])->layout, CP_LAYOUT_NHWC, "'%s' is %s", inside[i],
                     cp_layout_name(gb_get(g, inside[i])->layout));
    cr_assert_eq(gb_get(g, "x")->layout, CP_LAYOUT_NCHW);
    cr_assert_eq(gb_get(g, "x_NHWC")->layout, CP_LAYOUT_NHWC);
    cr_assert_eq(gb_get(g, "gp_NCHW")->layout, CP_LAYOUT_NCHW);
    cp_graph_free(g);
    expect_cnn_unchanged(&c);
}

Test(layout_pass, blocked_policy_blocks_by_16_or_8_and_never_pads)
{
    struct cp_graph *g = small_cnn();
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_BLOCKED, CP_FMT_NCHW);
    run_pass(g, "LayoutTransformPass", &c);
    /* 3 channels cannot be blocked: the first conv reads the plain image */
    cr_assert_eq(check_layouts(g, "blocked"), 1);
    cr_assert_eq(gb_get(g, "x")->layout, CP_LAYOUT_NCHW);
    cr_assert_eq(gb_get(g, "c1")->layout, CP_LAYOUT_NCHW16C);
    cr_assert_eq(gb_get(g, "a")->layout, CP_LAYOUT_NCHW16C);
    cr_assert_eq(gb_get(g, "c3")->layout, CP_LAYOUT_NCHW8C, "24 channels: blocks of 8");
    cr_assert_eq(gb_get(g, "gp")->layout, CP_LAYOUT_NCHW8C);
    cp_graph_free(g);
    expect_cnn_unchanged(&c);
}

Test(layout_pass, a_region_result_that_is_a_graph_output_keeps_its_name_and_is_plain)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 16, 8, 8));
    weight(g, "w", 4, GB_DIMS(16, 16, 3, 3));
    conv(g, "x", "w", "c", 1);
    gb_node(g, "relu", "Relu", GB_IN("c"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_BLOCKED, CP_FMT_NCHW);
    run_pass(g, "LayoutTransformPass", &c);
    cr_assert_eq(check_layouts(g, "output"), 2);
    const struct cp_tensor *y = cp_graph_tensor(g, cp_graph_output(g, 0));
    cr_assert_str_eq(y->name, "y");
    cr_assert_eq(cp_graph_node(g, y->producer)->op, CP_OP_TRANS_DATA);
    cr_assert_eq(gb_get(g, "y_nChw16c")->layout, CP_LAYOUT_NCHW16C);
    cp_graph_free(g);
}

/* x[1,16,8,8] -> Conv32 -> GroupNormalization(4 groups, SiLU) -> Conv32 ->
 * y: a norm between two convs, as in every residual block of a U-Net. */
static struct cp_graph *conv_norm_conv(void)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 16, 8, 8));
    weight(g, "w1", 4, GB_DIMS(32, 16, 3, 3));
    weight(g, "w2", 4, GB_DIMS(32, 32, 3, 3));
    weight(g, "s", 1, GB_DIMS(32));
    weight(g, "b", 1, GB_DIMS(32));
    conv(g, "x", "w1", "c1", 1);
    int32_t in[3] = {cp_graph_find_tensor(g, "c1"), cp_graph_find_tensor(g, "s"),
                     cp_graph_find_tensor(g, "b")};
    int32_t out = gb_tensor(g, "gn", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE), idx;
    const char *origin = "gn";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, "gn", "GroupNormalization", CP_DOMAIN, in, 3, &out, 1,
                                   &origin, 1, &idx, &d),
                 CP_OK, "%s", d.msg);
    cp_node_set_int(g, idx, "num_groups", 4);
    cp_node_set_string(g, idx, "activation", "SiLU");
    conv(g, "gn", "w2", "y", 1);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    return g;
}

/* The GroupNormalization kernel reads NHWC and blocked tensors, so the
 * norm joins the region of its convs in both policies: one region, no
 * TransData around the norm, only the output's back to plain. */
Test(layout_pass, a_groupnorm_between_convs_stays_in_their_region)
{
    static const enum cp_layout_policy pols[] = {CP_LAYOUT_POLICY_NHWC, CP_LAYOUT_POLICY_BLOCKED};
    static const enum cp_layout want[] = {CP_LAYOUT_NHWC, CP_LAYOUT_NCHW16C};
    struct cp_runtime *rt = runtime();
    struct io in, a, b;
    struct cp_graph *plain_g = conv_norm_conv();
    random_inputs(plain_g, &in);
    run_graph(rt, plain_g, false, &in, &a);
    for (size_t i = 0; i < 2; i++) {
        struct cp_graph *g = conv_norm_conv();
        struct cp_convert_config c = config(pols[i], CP_FMT_NCHW);
        run_pass(g, "LayoutTransformPass", &c);
        const char *what = cp_layout_policy_name(pols[i]);
        /* the input into the region's layout and the output back: nothing
         * around the norm */
        cr_expect_eq(check_layouts(g, what), 2);
        cr_expect_eq(gb_get(g, "c1")->layout, want[i], "%s: c1 is %s", what,
                     cp_layout_name(gb_get(g, "c1")->layout));
        cr_expect_eq(gb_get(g, "gn")->layout, want[i], "%s: the norm's output is %s", what,
                     cp_layout_name(gb_get(g, "gn")->layout));
        const struct cp_node *norm = cp_graph_node(g, gb_get(g, "gn")->producer);
        cr_expect_eq(norm->inputs[0], cp_graph_find_tensor(g, "c1"),
                     "%s: the norm reads the conv's result as it is", what);
        run_graph(rt, g, false, &in, &b);
        cr_expect_leq(rel_l2(&a, &b), MAX_REL_L2, "%s: relative L2 %.3g", what, rel_l2(&a, &b));
        io_release(&b);
    }
    io_release(&in);
    io_release(&a);
    cp_runtime_free(rt);
}

/* --input_format NHWC: the caller's bytes arrive in NHWC. */
Test(layout_pass, nhwc_input_format_is_converted_unless_a_nhwc_region_reads_it)
{
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_NCHW, CP_FMT_NHWC);
    struct cp_graph *g = small_cnn();
    run_pass(g, "LayoutTransformPass", &c);
    cr_assert_eq(gb_get(g, "x")->layout, CP_LAYOUT_NHWC);
    cr_assert_eq(check_layouts(g, "nhwc input, nchw policy"), 1);
    cr_assert_eq(gb_get(g, "x_NCHW")->layout, CP_LAYOUT_NCHW);

    /* the same bytes, given in NHWC order, give the plain model's result */
    struct cp_runtime *rt = runtime();
    struct io in, in_nhwc, a, b;
    struct cp_graph *plain_g = small_cnn();
    random_inputs(plain_g, &in);
    random_inputs(plain_g, &in_nhwc);
    const float *src = in.t[0].data;
    float *dst = in_nhwc.t[0].data;
    for (int64_t ch = 0; ch < 3; ch++)
        for (int64_t p = 0; p < 16 * 16; p++)
            dst[p * 3 + ch] = src[ch * 256 + p];
    run_graph(rt, plain_g, false, &in, &a);
    run_graph(rt, g, false, &in_nhwc, &b);
    cr_expect_leq(rel_l2(&a, &b), MAX_REL_L2);
    io_release(&b);

    c.layout_policy = CP_LAYOUT_POLICY_NHWC;
    g = small_cnn();
    run_pass(g, "LayoutTransformPass", &c);
    cr_assert_eq(check_layouts(g, "nhwc input, nhwc policy"), 1, "only the pooled vector");
    cr_assert_eq(cp_graph_node(g, gb_get(g, "c1")->producer)->inputs[0],
                 cp_graph_find_tensor(g, "x"), "the first conv reads the input as it comes");
    /* an NHWC input also takes its data with the NHWC shape */
    in_nhwc.t[0].dims[1] = 16;
    in_nhwc.t[0].dims[2] = 16;
    in_nhwc.t[0].dims[3] = 3;
    run_graph(rt, g, false, &in_nhwc, &b);
    cr_expect_leq(rel_l2(&a, &b), MAX_REL_L2);
    io_release(&in);
    io_release(&in_nhwc);
    io_release(&a);
    io_release(&b);
    cp_runtime_free(rt);
}

/* ---- the example models through cp_convert ------------------------------------------------ */

static void convert_example(const char *name, enum cp_layout_policy pol, const char *dir, char *om,
                            size_t cap)
{
    struct cp_convert_config c = config(pol, CP_FMT_NCHW);
    snprintf(c.model, sizeof c.model, MODELS_DIR "%s.onnx", name);
    snprintf(c.output, sizeof c.output, "%s/%s_%s", dir, name, cp_layout_policy_name(pol));
    struct cp_convert_result res;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert(&c, &res, &d), CP_OK, "%s: %s", name, d.msg);
    snprintf(om, cap, "%s", res.om_path);
}

/* Convert `name` with each policy; check the layouts and the outputs.
 * want_td[policy]: expected TransData count, or -1 to only report it. */
static void check_example_policies(const char *name, const long *want_td, bool reference)
{
    char *dir = cp_scratch_dir();
    struct cp_runtime *rt = runtime();
    struct io in, want;
    example_io(name, &in, &want);
    for (int pol = 0; pol < CP_LAYOUT_POLICY_COUNT; pol++) {
        char om[1200], what[200];
        convert_example(name, (enum cp_layout_policy)pol, dir, om, sizeof om);
        snprintf(what, sizeof what, "%s %s", name,
                 cp_layout_policy_name((enum cp_layout_policy)pol));
        struct cp_model *m;
        struct cp_diag d;
        cp_diag_init(&d);
        cr_assert_eq(cp_model_load(rt, om, &m, &d), CP_OK, "%s", d.msg);
        const struct cp_graph *g = cp_model_graph(m);
        size_t td = check_layouts(g, what);
        size_t relaid = count_layout(g, CP_LAYOUT_NHWC) + count_layout(g, CP_LAYOUT_NCHW8C) +
                        count_layout(g, CP_LAYOUT_NCHW16C);
        if (pol == CP_LAYOUT_POLICY_NCHW)
            cr_assert_eq(td + relaid, 0, "%s: %zu TransData", what, td);
        else
            cr_assert(td > 0 && relaid > 0, "%s: %zu TransData, %zu re-laid-out tensors", what, td,
                      relaid);
        if (want_td[pol] >= 0)
            cr_expect_eq((long)td, want_td[pol], "%s: %zu TransData, expected %ld", what, td,
                         want_td[pol]);
        struct io ordered = in, got;
        order_inputs(g, &ordered);
        for (int ref = 0; ref <= (reference ? 1 : 0); ref++) {
            run_model(m, ref, &ordered, &got);
            double err = rel_l2(&want, &got);
            cr_log_info("%s: %zu TransData, %zu tensors re-laid out, rel L2 %.3g (%s kernels)",
                        what, td, relaid, err, ref ? "reference" : "fast");
            cr_expect_leq(err, MAX_REL_L2, "%s (%s kernels): relative L2 error %.3g", what,
                          ref ? "reference" : "fast", err);
            io_release(&got);
        }
        cp_model_free(m);
    }
    io_release(&in);
    io_release(&want);
    cp_runtime_free(rt);
    cp_scratch_remove(dir);
    free(dir);
}

Test(layout_pass, resnet_tiny_in_every_layout_policy, .timeout = 300)
{
    /* nhwc: the image in, the pooled features out; blocked: the image
     * (3 channels) is read plain, so only the pooled features */
    const long want[CP_LAYOUT_POLICY_COUNT] = {0, 2, 1};
    check_example_policies("resnet_tiny", want, true);
}

Test(layout_pass, sd_unet_tiny_in_every_layout_policy, .timeout = 300)
{
    const long want[CP_LAYOUT_POLICY_COUNT] = {0, -1, -1};
    check_example_policies("sd_unet_tiny", want, false);
}

/* The plan checks that a layout still fits the concrete shapes: a blocked
 * tensor whose channels are no multiple of the block would need padding
 * the memory plan does not have. */
Test(layout_pass, plan_refuses_a_blocked_layout_that_would_pad)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 12, 4, 4));
    gb_node(g, "relu", "Relu", GB_IN("x"), GB_IN("r"));
    gb_node(g, "relu2", "Relu", GB_IN("r"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    cp_graph_tensor(g, cp_graph_find_tensor(g, "r"))->layout = CP_LAYOUT_NCHW8C;
    struct cp_runtime *rt = runtime();
    struct cp_model *m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_model_from_graph(rt, g, NULL, &m, &d), CP_OK, "%s", d.msg);
    struct cp_plan *p = NULL;
    cr_assert_eq(cp_plan_create(m, NULL, &p, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'r' is laid out nChw8c"), "%s", d.msg);
    cp_model_free(m);
    cp_runtime_free(rt);
}

/* x[1,16,8,8] -> Conv16 (a), Conv`cb` (b) -> Concat(axis 1) ->
 * BatchNormalization -> Relu -> Conv16 -> y: an Inception-style channel
 * concatenation, normalised as DenseNet does. */
static struct cp_graph *concat_cnn(int64_t cb)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 16, 8, 8));
    weight(g, "wa", 4, GB_DIMS(16, 16, 3, 3));
    weight(g, "wb", 4, GB_DIMS(cb, 16, 3, 3));
    weight(g, "wc", 4, GB_DIMS(16, 16 + cb, 3, 3));
    conv(g, "x", "wa", "a", 1);
    conv(g, "x", "wb", "b", 1);
    int32_t n = gb_node(g, "cat", "Concat", GB_IN("a", "b"), GB_IN("ab"));
    cp_node_set_int(g, n, "axis", 1);
    int64_t c = 16 + cb;
    float *sc = ramp(c, 0.2f), *bi = ramp(c, 0.1f), *var = ramp(c, 0.0f);
    for (int64_t i = 0; i < c; i++) {
        sc[i] += 1.5f;
        var[i] = 0.5f + 0.01f * (float)i;
    }
    gb_init(g, "bn_s", CP_DTYPE_F32, 1, &c, sc);
    gb_init(g, "bn_b", CP_DTYPE_F32, 1, &c, bi);
    gb_init(g, "bn_m", CP_DTYPE_F32, 1, &c, bi);
    gb_init(g, "bn_v", CP_DTYPE_F32, 1, &c, var);
    free(sc);
    free(bi);
    free(var);
    gb_node(g, "bn", "BatchNormalization", GB_IN("ab", "bn_s", "bn_b", "bn_m", "bn_v"),
            GB_IN("nb"));
    gb_node(g, "relu", "Relu", GB_IN("nb"), GB_IN("rb"));
    conv(g, "rb", "wc", "y", 1);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    return g;
}

/* Under NHWC the concatenation stays in the region (only the input and the
 * output are converted); under the blocked policy it does where every part
 * gets the result's blocks (16 + 16 channels), not where the parts differ
 * (16 and 8, with AVX-512's 16-blocks). Either way the result is the plain
 * graph's, with fast and reference kernels. */
Test(layout_pass, a_channel_concat_stays_in_the_region_when_its_parts_share_the_layout)
{
    struct cp_runtime *rt = runtime();
    struct io in, want, got;
    const enum cp_layout_policy pols[] = {CP_LAYOUT_POLICY_NHWC, CP_LAYOUT_POLICY_BLOCKED,
                                          CP_LAYOUT_POLICY_BLOCKED};
    const int64_t cbs[] = {8, 8, 16};
    for (int p = 0; p < 3; p++) {
        struct cp_graph *plain_g = concat_cnn(cbs[p]);
        random_inputs(plain_g, &in);
        run_graph(rt, plain_g, false, &in, &want);
        for (int ref = 0; ref < 2; ref++) {
            struct cp_graph *g = concat_cnn(cbs[p]);
            struct cp_convert_config c = config(pols[p], CP_FMT_NCHW);
            run_pass(g, "LayoutTransformPass", &c);
            size_t td = check_layouts(g, cp_layout_policy_name(pols[p]));
            if (pols[p] == CP_LAYOUT_POLICY_NHWC) {
                cr_expect_eq(td, 2, "nhwc: TransData at the input and the output only, not %zu",
                             td);
                cr_expect_eq(gb_get(g, "ab")->layout, CP_LAYOUT_NHWC);
                cr_expect_eq(gb_get(g, "nb")->layout, CP_LAYOUT_NHWC);
            } else if (cbs[p] == 8) {
                cr_expect_eq(gb_get(g, "a")->layout, CP_LAYOUT_NCHW16C);
                cr_expect_eq(gb_get(g, "b")->layout, CP_LAYOUT_NCHW8C);
                cr_expect_gt(td, 2, "parts in two layouts are converted");
            } else {
                cr_expect_eq(td, 2, "blocked: TransData at the input and the output only");
                cr_expect_eq(gb_get(g, "ab")->layout, CP_LAYOUT_NCHW16C);
                cr_expect_eq(gb_get(g, "nb")->layout, CP_LAYOUT_NCHW16C);
            }
            run_graph(rt, g, ref, &in, &got);
            double err = rel_l2(&want, &got);
            cr_expect_leq(err, MAX_REL_L2, "%s policy, %s kernels: relative L2 %.3g",
                          cp_layout_policy_name(pols[p]), ref ? "reference" : "fast", err);
            io_release(&got); /* the model owned g */
        }
        io_release(&in);
        io_release(&want);
    }
    cp_runtime_free(rt);
}
