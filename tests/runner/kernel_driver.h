/* Test helper: run one node's kernel by hand, through the kernel interface
 * (runner/cpu/kernel.h), without a plan.
 *
 * A test builds a tiny graph whose inputs are all initializers (so shape
 * inference sees the values of shape-like inputs), then kd_run() infers
 * shapes, checks the kernel's `supports`, gives every input a private copy
 * of its data and every output a fresh buffer filled with junk and followed
 * by a canary, runs prepare / run / release with the scratch memory the
 * kernel asked for, and checks that the inputs were left untouched and
 * nothing was written past an output. The kd_expect_* helpers then compare
 * outputs with hand-computed values.
 *
 * Header-only (static inline) so that a test file includes it alone. */
#ifndef CP_TESTS_KERNEL_DRIVER_H
#define CP_TESTS_KERNEL_DRIVER_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_build.h"
#include "runner/cpu/kernel.h"

#define KD_MAX_IO 16
#define KD_CANARY 64

struct kd_run {
    struct cp_graph *g;
    const struct cp_node *node;
    const struct cp_kernel *kernel;
    enum cp_status status;
    size_t n_out;
    const struct cp_tensor *out[KD_MAX_IO];
    void *out_data[KD_MAX_IO];
    size_t out_bytes[KD_MAX_IO];
};

/* The reference kernel of an op, straight from the table. */
static inline const struct cp_kernel *kd_ref_kernel(enum cp_op op)
{
    for (size_t i = 0; cp_ref_kernels[i]; i++)
        if (cp_ref_kernels[i]->op == op)
            return cp_ref_kernels[i];
    return NULL;
}

static inline size_t kd_tensor_bytes(const struct cp_tensor *t)
{
    return (size_t)cp_shape_numel(&t->shape) * cp_dtype_size(t->dtype);
}

/* Infer shapes and ask the kernel whether it takes node `node`. */
static inline bool kd_supports(struct cp_graph *g, int32_t node)
{
    gb_infer_ok(g);
    const struct cp_node *n = cp_graph_node(g, node);
    const struct cp_kernel *k = kd_ref_kernel(n->op);
    cr_assert_not_null(k, "no reference kernel for %s", cp_op_name(n->op));
    return k->supports(g, n);
}

/* Run `kernel` (NULL: the reference kernel) on node `node`. The run's status
 * goes to r->status; the caller asserts on it (kd_run checks CP_OK). */
static inline void kd_run_kernel(struct kd_run *r, struct cp_graph *g, int32_t node,
                                 const struct cp_kernel *kernel)
{
    memset(r, 0, sizeof *r);
    r->g = g;
    gb_infer_ok(g);
    const struct cp_node *n = cp_graph_node(g, node);
    r->node = n;
    r->kernel = kernel ? kernel : kd_ref_kernel(n->op);
    cr_assert_not_null(r->kernel, "no kernel for %s", cp_op_name(n->op));
    cr_assert(r->kernel->supports(g, n), "kernel '%s' refuses node '%s' (%s)", r->kernel->name,
              n->name, cp_op_name(n->op));
    cr_assert_leq(n->n_inputs, KD_MAX_IO);
    cr_assert_leq(n->n_outputs, KD_MAX_IO);

    const struct cp_tensor *in[KD_MAX_IO] = {NULL};
    void *in_data[KD_MAX_IO] = {NULL}, *in_orig[KD_MAX_IO] = {NULL};
    size_t in_bytes[KD_MAX_IO] = {0};
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] < 0)
            continue;
        const struct cp_tensor *t = cp_graph_tensor(g, n->inputs[i]);
        in[i] = t;
        in_bytes[i] = kd_tensor_bytes(t);
        if (in_bytes[i] == 0 || !t->data)
            continue; /* no data: a kernel that reads it crashes the test */
        in_data[i] = malloc(in_bytes[i]);
        in_orig[i] = malloc(in_bytes[i]);
        cr_assert(in_data[i] && in_orig[i]);
        memcpy(in_data[i], t->data, in_bytes[i]);
        memcpy(in_orig[i], t->data, in_bytes[i]);
    }
    r->n_out = n->n_outputs;
    for (size_t i = 0; i < n->n_outputs; i++) {
        if (n->outputs[i] < 0)
            continue;
        const struct cp_tensor *t = cp_graph_tensor(g, n->outputs[i]);
        cr_assert(cp_shape_is_static(&t->shape), "output '%s' has no static shape", t->name);
        r->out[i] = t;
        r->out_bytes[i] = kd_tensor_bytes(t);
        r->out_data[i] = malloc(r->out_bytes[i] + KD_CANARY);
        cr_assert_not_null(r->out_data[i]);
        memset(r->out_data[i], 0xA5, r->out_bytes[i] + KD_CANARY);
    }

    struct cp_kernel_env env = {NULL, NULL, 1};
    struct cp_kexec k = {
        .kernel = r->kernel,
        .g = g,
        .node = n,
        .env = &env,
        .in = in,
        .out = r->out,
        .in_data = in_data,
        .out_data = r->out_data,
    };
    struct cp_diag d;
    cp_diag_init(&d);
    if (r->kernel->prepare)
        cr_assert_eq(r->kernel->prepare(&k, &d), CP_OK, "prepare failed: %s", d.msg);
    void *scratch = NULL;
    if (k.scratch_bytes > 0) {
        scratch = aligned_alloc(64, (k.scratch_bytes + 63) / 64 * 64);
        cr_assert_not_null(scratch);
        memset(scratch, 0x5A, k.scratch_bytes);
        k.scratch = scratch;
    }
    r->status = r->kernel->run(&k);
    if (r->kernel->release)
        r->kernel->release(&k);
    free(scratch);

    for (size_t i = 0; i < n->n_inputs; i++) {
        if (in_data[i])
            cr_assert(memcmp(in_data[i], in_orig[i], in_bytes[i]) == 0,
                      "the kernel wrote into input %zu", i);
        free(in_data[i]);
        free(in_orig[i]);
    }
    for (size_t i = 0; i < n->n_outputs; i++) {
        const unsigned char *p = r->out_data[i];
        for (size_t j = 0; p && j < KD_CANARY; j++)
            cr_assert_eq(p[r->out_bytes[i] + j], 0xA5, "the kernel wrote past output %zu", i);
    }
}

static inline void kd_run(struct kd_run *r, struct cp_graph *g, int32_t node)
{
    kd_run_kernel(r, g, node, NULL);
    cr_assert_eq(r->status, CP_OK, "run failed with status %d", (int)r->status);
}

/* Free the outputs and the graph. */
static inline void kd_release(struct kd_run *r)
{
    for (size_t i = 0; i < r->n_out; i++)
        free(r->out_data[i]);
    cp_graph_free(r->g);
    memset(r, 0, sizeof *r);
}

static inline void kd_expect_shape(const struct kd_run *r, size_t i, int rank, const int64_t *dims)
{
    const struct cp_tensor *t = r->out[i];
    cr_assert_not_null(t);
    char buf[96];
    cp_shape_format(&t->shape, buf, sizeof buf);
    cr_assert_eq(t->shape.rank, rank, "output %zu is %s, expected rank %d", i, buf, rank);
    for (int k = 0; k < rank; k++)
        cr_assert_eq(t->shape.dims[k].value, dims[k], "output %zu is %s: dim %d, expected %lld", i,
                     buf, k, (long long)dims[k]);
}

static inline int64_t kd_numel(const struct kd_run *r, size_t i)
{
    return cp_shape_numel(&r->out[i]->shape);
}

/* Floats within an absolute tolerance (NaN matches NaN). */
static inline void kd_expect_f32(const struct kd_run *r, size_t i, int64_t n, const float *want,
                                 float tol)
{
    cr_assert_eq(r->out[i]->dtype, CP_DTYPE_F32, "output %zu is %s", i,
                 cp_dtype_name(r->out[i]->dtype));
    cr_assert_eq(kd_numel(r, i), n, "output %zu has %lld elements, expected %lld", i,
                 (long long)kd_numel(r, i), (long long)n);
    const float *got = r->out_data[i];
    for (int64_t j = 0; j < n; j++) {
        bool ok = (isnan(got[j]) && isnan(want[j])) || got[j] == want[j] ||
                  fabsf(got[j] - want[j]) <= tol;
        cr_assert(ok, "output %zu [%lld]: got %.8g, expected %.8g", i, (long long)j, (double)got[j],
                  (double)want[j]);
    }
}

/* Integers (any integer dtype or bool) exactly. */
static inline void kd_expect_ints(const struct kd_run *r, size_t i, enum cp_dtype dt, int64_t n,
                                  const int64_t *want)
{
    cr_assert_eq(r->out[i]->dtype, dt, "output %zu is %s, expected %s", i,
                 cp_dtype_name(r->out[i]->dtype), cp_dtype_name(dt));
    cr_assert_eq(kd_numel(r, i), n, "output %zu has %lld elements, expected %lld", i,
                 (long long)kd_numel(r, i), (long long)n);
    for (int64_t j = 0; j < n; j++) {
        int64_t got = 0;
        const void *p = r->out_data[i];
        switch (dt) {
        case CP_DTYPE_I64:
            got = ((const int64_t *)p)[j];
            break;
        case CP_DTYPE_I32:
            got = ((const int32_t *)p)[j];
            break;
        case CP_DTYPE_I8:
            got = ((const int8_t *)p)[j];
            break;
        default:
            got = ((const uint8_t *)p)[j];
            break;
        }
        cr_assert_eq(got, want[j], "output %zu [%lld]: got %lld, expected %lld", i, (long long)j,
                     (long long)got, (long long)want[j]);
    }
}

#endif
