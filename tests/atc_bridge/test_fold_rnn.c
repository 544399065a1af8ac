/* The constant folder computes what the runtime computes for the signal
 * ops it folds (the windows and MelWeightMatrix, whose inputs are usually
 * constants: a Whisper-style front end's mel matrix), byte for byte: both
 * call graph/op_eval.h's cp_eval_window / cp_eval_mel_weight_matrix. */
#include "pass_test.h"

#include <stdint.h>

struct operand {
    const char *name;
    enum cp_dtype dtype;
    int rank;
    int64_t dims[4];
    const void *data;
};

struct fcase {
    const char *op;
    int64_t opset;
    struct operand in[5];
    size_t n_in;
    /* an int attribute and an ints attribute of the node (names NULL: none) */
    const char *int_name;
    int64_t int_value;
    const char *ints_name;
    int64_t ints[4];
    size_t n_ints;
};

/* The node "n" reads the case's initializers and writes Y; an Identity
 * copies Y to the graph output Z, so Y is an intermediate the folder may
 * fold (graph outputs are never folded). */
static struct cp_graph *build(const struct fcase *c)
{
    struct cp_graph *g = gb_graph(c->opset ? c->opset : 17);
    const char *ins[6] = {NULL};
    for (size_t i = 0; i < c->n_in; i++) {
        const struct operand *o = &c->in[i];
        if (!o->name) {
            ins[i] = "";
            continue;
        }
        gb_init(g, o->name, o->dtype, o->rank, o->dims, o->data);
        ins[i] = o->name;
    }
    int32_t node = gb_node(g, "n", c->op, ins, GB_IN("Y"));
    if (c->int_name)
        cr_assert_eq(cp_node_set_int(g, node, c->int_name, c->int_value), CP_OK);
    if (c->ints_name)
        cr_assert_eq(cp_node_set_ints(g, node, c->ints_name, c->ints, c->n_ints), CP_OK);
    gb_node(g, "copy", "Identity", GB_IN("Y"), GB_IN("Z"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "Z")), CP_OK);
    return g;
}

static void check(const struct fcase *c)
{
    struct cp_graph *g = build(c);
    pt_prepare(g);
    cr_assert(pt_run_pass(g, "ConstantFoldingPass"), "%s: nothing folded", c->op);
    cr_assert_null(pt_node(g, "n"), "%s: the node stayed", c->op);
    const struct cp_tensor *y = gb_get(g, "Y");
    cr_assert_eq(y->kind, CP_TENSOR_INITIALIZER, "%s", c->op);

    struct cp_graph *g0 = build(c);
    pt_prepare(g0);
    struct pt_outputs out;
    pt_run_ref(g0, 1, &out);
    cr_assert_eq(out.n, 1);
    const struct cp_host_tensor *z = &out.t[0];
    cr_assert_eq(z->dtype, y->dtype, "%s: dtype %s, folded %s", c->op, cp_dtype_name(z->dtype),
                 cp_dtype_name(y->dtype));
    cr_assert_eq(z->nbytes, y->nbytes, "%s: %zu bytes, folded %zu", c->op, z->nbytes, y->nbytes);
    const unsigned char *a = z->data, *b = y->data;
    size_t es = cp_dtype_size(y->dtype);
    for (size_t i = 0; i < y->nbytes; i++)
        cr_assert_eq(a[i], b[i], "%s: element %zu differs (byte %zu: kernel %02x, folded %02x)",
                     c->op, i / es, i % es, a[i], b[i]);
    pt_outputs_release(&out);
    cp_graph_free(g);
}

static const int64_t size10 = 10, mel = 8, dft = 16, rate = 8192;
static const float lo = 0.0f, hi = 4096.0f;

Test(fold_rnn, windows_fold_to_what_the_kernels_compute)
{
    static const char *const ops[] = {"HannWindow", "HammingWindow", "BlackmanWindow"};
    for (size_t i = 0; i < 3; i++)
        for (int periodic = 0; periodic < 2; periodic++) {
            struct fcase c = {.op = ops[i],
                              .in = {{"size", CP_DTYPE_I64, 0, {0}, &size10}},
                              .n_in = 1,
                              .int_name = "periodic",
                              .int_value = periodic};
            check(&c);
        }
}

Test(fold_rnn, mel_weight_matrix_folds_to_what_the_kernel_computes)
{
    struct fcase c = {.op = "MelWeightMatrix",
                      .in = {{"m", CP_DTYPE_I64, 0, {0}, &mel},
                             {"d", CP_DTYPE_I64, 0, {0}, &dft},
                             {"r", CP_DTYPE_I64, 0, {0}, &rate},
                             {"lo", CP_DTYPE_F32, 0, {0}, &lo},
                             {"hi", CP_DTYPE_F32, 0, {0}, &hi}},
                      .n_in = 5};
    check(&c);
}
