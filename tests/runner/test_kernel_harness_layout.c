/* Kernels and layouts: TransData places every element where its layout
 * says (checked against the layout formulas written out here, not the
 * runtime's), reference and oneDNN TransData agree for every pair of
 * layouts and element size, reference kernels compute the same on NHWC or
 * blocked tensors as on plain ones (the adapter of runner/cpu/layout.h),
 * kernels that cannot read a layout decline it, and the impl attribute
 * picks libm's exp and erf. The main harness (test_kernel_harness.c) also
 * runs TransData and the layout-aware kernels against the reference. */
#include "runner/cpu/fast_kernels.h"
#include "runner/cpu/kernel.h"
#include "runner/cpu/layout.h"

#include "core/host.h"
#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ---- a small driver with a oneDNN engine ------------------------------------------ */

struct env {
    struct cp_kernel_env kenv;
};

static void env_init(struct env *e)
{
    cr_assert_eq(dnnl_engine_create(&e->kenv.engine, dnnl_cpu, 0), dnnl_success);
    cr_assert_eq(dnnl_stream_create(&e->kenv.stream, e->kenv.engine, dnnl_stream_default_flags),
                 dnnl_success);
    e->kenv.threads = 2;
    omp_set_num_threads(2);
}

static void env_release(struct env *e)
{
    dnnl_stream_destroy(e->kenv.stream);
    dnnl_engine_destroy(e->kenv.engine);
}

static size_t nbytes(const struct cp_tensor *t)
{
    return (size_t)cp_shape_numel(&t->shape) * cp_dtype_size(t->dtype);
}

/* Run kernel k on node 0 of g with input data `in` (one buffer per input;
 * NULL: the initializer's data). Returns output 0 (malloc'ed). */
static void *run0(const struct env *e, const struct cp_kernel *k, struct cp_graph *g,
                  void *const *in)
{
    const struct cp_node *n = cp_graph_node(g, 0);
    cr_assert(k->supports(g, n), "kernel %s refuses node %s", k->name, n->name);
    const struct cp_tensor *ins[8] = {NULL}, *outs[8] = {NULL};
    void *in_data[8] = {NULL}, *out_data[8] = {NULL};
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] < 0)
            continue;
        ins[i] = cp_graph_tensor(g, n->inputs[i]);
        in_data[i] = in && in[i] ? in[i] : (void *)ins[i]->data;
    }
    for (size_t i = 0; i < n->n_outputs; i++) {
        outs[i] = cp_graph_tensor(g, n->outputs[i]);
        out_data[i] = malloc(nbytes(outs[i]) + 1);
        memset(out_data[i], 0xA5, nbytes(outs[i]));
    }
    struct cp_kexec x = {.kernel = k,
                         .g = g,
                         .node = n,
                         .env = &e->kenv,
                         .in = ins,
                         .out = outs,
                         .in_data = in_data,
                         .out_data = out_data};
    struct cp_diag d;
    cp_diag_init(&d);
    if (k->prepare)
        cr_assert_eq(k->prepare(&x, &d), CP_OK, "%s: prepare: %s", k->name, d.msg);
    void *scratch = NULL;
    if (x.scratch_bytes) {
        scratch = aligned_alloc(64, (x.scratch_bytes + 63) / 64 * 64);
        x.scratch = scratch;
    }
    cr_assert_eq(k->run(&x), CP_OK, "%s: run failed", k->name);
    /* the tensor and data arrays are restored after the run */
    for (size_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] >= 0)
            cr_assert(ins[i] == cp_graph_tensor(g, n->inputs[i]), "input %zu not restored", i);
    if (k->release)
        k->release(&x);
    free(scratch);
    for (size_t i = 1; i < n->n_outputs; i++)
        free(out_data[i]);
    return out_data[0];
}

/* A TransData node from `x` (tagged `from`) to "y". */
static void add_transdata(struct cp_graph *g, const char *x, enum cp_layout from, enum cp_layout to)
{
    int32_t in = cp_graph_find_tensor(g, x), idx;
    int32_t out = gb_tensor(g, "y", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    const char *origin = "td";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(
        cp_graph_add_node(g, "td", "TransData", CP_DOMAIN, &in, 1, &out, 1, &origin, 1, &idx, &d),
        CP_OK, "%s", d.msg);
    cp_node_set_string(g, idx, "src_format", cp_layout_name(from));
    cp_node_set_string(g, idx, "dst_format", cp_layout_name(to));
    cp_graph_tensor(g, in)->layout = from;
    gb_infer_ok(g);
}

/* Where logical element (n, c, h, w) lives, written out per layout. */
static int64_t where(enum cp_layout l, const int64_t *d, int64_t n, int64_t c, int64_t h, int64_t w)
{
    int64_t C = d[1], H = d[2], W = d[3];
    switch (l) {
    case CP_LAYOUT_NHWC:
        return n * H * W * C + h * W * C + w * C + c;
    case CP_LAYOUT_NCHW8C:
        return n * C * H * W + (c / 8) * H * W * 8 + h * W * 8 + w * 8 + c % 8;
    case CP_LAYOUT_NCHW16C:
        return n * C * H * W + (c / 16) * H * W * 16 + h * W * 16 + w * 16 + c % 16;
    default:
        return n * C * H * W + c * H * W + h * W + w;
    }
}

static const enum cp_layout layouts[] = {CP_LAYOUT_NCHW, CP_LAYOUT_NHWC, CP_LAYOUT_NCHW8C,
                                         CP_LAYOUT_NCHW16C};
#define N_LAYOUTS (sizeof layouts / sizeof layouts[0])

Test(layout_kernels, transdata_puts_each_element_where_its_layout_says)
{
    struct env e;
    env_init(&e);
    const int64_t d[4] = {2, 32, 3, 5};
    int64_t numel = 2 * 32 * 3 * 5;
    for (size_t a = 0; a < N_LAYOUTS; a++)
        for (size_t b = 0; b < N_LAYOUTS; b++) {
            if (a == b)
                continue;
            struct cp_graph *g = gb_graph(17);
            float *x = malloc((size_t)numel * sizeof *x);
            /* the value is the logical index, stored where layout a puts it */
            for (int64_t n = 0; n < d[0]; n++)
                for (int64_t c = 0; c < d[1]; c++)
                    for (int64_t h = 0; h < d[2]; h++)
                        for (int64_t w = 0; w < d[3]; w++)
                            x[where(layouts[a], d, n, c, h, w)] =
                                (float)(((n * d[1] + c) * d[2] + h) * d[3] + w);
            gb_init(g, "x", CP_DTYPE_F32, 4, d, x);
            add_transdata(g, "x", layouts[a], layouts[b]);
            const struct cp_kernel *kernels[2] = {&cp_ref_trans_data, &cp_dnnl_trans_data};
            for (int k = 0; k < 2; k++) {
                float *y = run0(&e, kernels[k], g, NULL);
                for (int64_t n = 0; n < d[0]; n++)
                    for (int64_t c = 0; c < d[1]; c++)
                        for (int64_t h = 0; h < d[2]; h++)
                            for (int64_t w = 0; w < d[3]; w++) {
                                float want = (float)(((n * d[1] + c) * d[2] + h) * d[3] + w);
                                float got = y[where(layouts[b], d, n, c, h, w)];
                                cr_assert_eq(got, want, "%s %s -> %s: (%lld,%lld,%lld,%lld) is %g",
                                             kernels[k]->name, cp_layout_name(layouts[a]),
                                             cp_layout_name(layouts[b]), (long long)n, (long long)c,
                                             (long long)h, (long long)w, (double)got);
                            }
                free(y);
            }
            free(x);
            cp_graph_free(g);
        }
    env_release(&e);
}

/* oneDNN takes the element sizes whose reorder is a move on every CPU and
 * agrees with the reference; 2-byte floats are the reference kernel's. */
Test(layout_kernels, transdata_moves_elements_of_every_size_both_ways)
{
    struct env e;
    env_init(&e);
    const enum cp_dtype dts[] = {CP_DTYPE_BF16, CP_DTYPE_F16, CP_DTYPE_I32, CP_DTYPE_U8,
                                 CP_DTYPE_I8};
    const int64_t d[4] = {1, 16, 4, 6};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
        for (size_t b = 1; b < N_LAYOUTS; b++) {
            size_t es = cp_dtype_size(dts[t]), n = 16 * 4 * 6;
            bool onednn = es != 2;
            const struct cp_kernel *fast = onednn ? &cp_dnnl_trans_data : &cp_ref_trans_data;
            unsigned char *x = malloc(n * es);
            for (size_t i = 0; i < n * es; i++)
                x[i] = (unsigned char)(i * 7 + 1);
            /* there */
            struct cp_graph *g = gb_graph(17);
            gb_init(g, "x", dts[t], 4, d, x);
            add_transdata(g, "x", CP_LAYOUT_NCHW, layouts[b]);
            cr_assert_eq(cp_dnnl_trans_data.supports(g, cp_graph_node(g, 0)), onednn,
                         "oneDNN should %s %s", onednn ? "take" : "leave", cp_dtype_name(dts[t]));
            void *ref = run0(&e, &cp_ref_trans_data, g, NULL);
            void *there = run0(&e, fast, g, NULL);
            cr_assert(memcmp(ref, there, n * es) == 0, "%s to %s: %s and reference differ",
                      cp_dtype_name(dts[t]), cp_layout_name(layouts[b]), fast->name);
            cp_graph_free(g);
            /* and back */
            g = gb_graph(17);
            gb_init(g, "x", dts[t], 4, d, ref);
            add_transdata(g, "x", layouts[b], CP_LAYOUT_NCHW);
            void *back = run0(&e, fast, g, NULL);
            cr_assert(memcmp(back, x, n * es) == 0, "%s round trip through %s changed the data",
                      cp_dtype_name(dts[t]), cp_layout_name(layouts[b]));
            cp_graph_free(g);
            free(back);
            free(ref);
            free(there);
            free(x);
        }
    env_release(&e);
}

/* 2-byte floats whose bits a conversion through f32 would change:
 * subnormals (flushed to zero by oneDNN's bf16 conversion), signalling NaNs
 * (quieted) and NaN payloads, with ordinary values between them. */
static uint16_t tricky16(enum cp_dtype dt, size_t i)
{
    static const uint16_t bf16[] = {0x0001, 0x8001, 0x007f, 0x0040, 0x7f81, 0xff81,
                                    0x7fc1, 0x7f80, 0xff80, 0x8000, 0x3f80, 0xc0a0};
    static const uint16_t f16[] = {0x0001, 0x8001, 0x03ff, 0x0200, 0x7c01, 0xfc01,
                                   0x7e01, 0x7c00, 0xfc00, 0x8000, 0x3c00, 0xc500};
    return (dt == CP_DTYPE_BF16 ? bf16 : f16)[i % 12];
}

/* Every TransData kernel that takes a 2-byte node, the one the registry
 * picks on this CPU first, moves the elements without touching a bit. */
Test(layout_kernels, transdata_keeps_every_bit_of_2_byte_floats)
{
    struct env e;
    env_init(&e);
    struct cp_host host;
    cp_host_detect(&host);
    const enum cp_dtype dts[] = {CP_DTYPE_BF16, CP_DTYPE_F16};
    const int64_t d[4] = {2, 16, 3, 5};
    const size_t n = 2 * 16 * 3 * 5;
    for (size_t t = 0; t < 2; t++)
        for (size_t a = 0; a < N_LAYOUTS; a++)
            for (size_t b = 0; b < N_LAYOUTS; b++) {
                if (a == b)
                    continue;
                uint16_t *x = malloc(n * 2), *want = malloc(n * 2);
                for (int64_t i0 = 0; i0 < d[0]; i0++)
                    for (int64_t c = 0; c < d[1]; c++)
                        for (int64_t h = 0; h < d[2]; h++)
                            for (int64_t w = 0; w < d[3]; w++) {
                                size_t logical = (size_t)(((i0 * d[1] + c) * d[2] + h) * d[3] + w);
                                uint16_t v = tricky16(dts[t], logical);
                                x[where(layouts[a], d, i0, c, h, w)] = v;
                                want[where(layouts[b], d, i0, c, h, w)] = v;
                            }
                struct cp_graph *g = gb_graph(17);
                gb_init(g, "x", dts[t], 4, d, x);
                add_transdata(g, "x", layouts[a], layouts[b]);
                const struct cp_node *node = cp_graph_node(g, 0);
                const struct cp_kernel *ks[3] = {cp_kernel_select(g, node, &host, false, NULL),
                                                 &cp_ref_trans_data, &cp_dnnl_trans_data};
                for (int k = 0; k < 3; k++) {
                    if (!ks[k]->supports(g, node))
                        continue;
                    uint16_t *y = run0(&e, ks[k], g, NULL);
                    for (size_t i = 0; i < n; i++)
                        cr_assert_eq(y[i], want[i],
                                     "%s %s %s -> %s: element %zu is 0x%04x, was 0x%04x",
                                     ks[k]->name, cp_dtype_name(dts[t]), cp_layout_name(layouts[a]),
                                     cp_layout_name(layouts[b]), i, y[i], want[i]);
                    free(y);
                }
                cp_graph_free(g);
                free(x);
                free(want);
            }
    env_release(&e);
}

Test(layout_kernels, transdata_refuses_blocks_that_do_not_divide_the_channels)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 12, 4, 4), NULL);
    add_transdata(g, "x", CP_LAYOUT_NCHW, CP_LAYOUT_NCHW8C);
    const struct cp_node *n = cp_graph_node(g, 0);
    cr_assert_not(cp_ref_trans_data.supports(g, n), "12 channels in blocks of 8 would pad");
    cr_assert_not(cp_dnnl_trans_data.supports(g, n));
    cp_graph_free(g);
}

Test(layout_kernels, transdata_refuses_input_tagged_otherwise_than_its_source_format)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 16, 4, 4), NULL);
    add_transdata(g, "x", CP_LAYOUT_NHWC, CP_LAYOUT_NCHW);
    cp_graph_tensor(g, cp_graph_find_tensor(g, "x"))->layout = CP_LAYOUT_NCHW16C;
    const struct cp_node *n = cp_graph_node(g, 0);
    cr_assert_not(cp_ref_trans_data.supports(g, n));
    cr_assert_not(cp_dnnl_trans_data.supports(g, n));
    cp_graph_free(g);
}

/* ---- reference kernels on re-laid-out tensors ------------------------------------------ */

static float *random_floats(int64_t n, uint64_t seed)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)((seed >> 40) & 0xffff) / 32768.0f - 1.0f;
    }
    return v;
}

/* x (plain) in layout l, through the runtime's own mapping. */
static float *relayout(const float *x, const int64_t *d, enum cp_layout from, enum cp_layout to)
{
    float *y = malloc((size_t)(d[0] * d[1] * d[2] * d[3]) * sizeof *y);
    cp_layout_convert(y, to, x, from, d, sizeof(float));
    return y;
}

/* Build `op` on x [1,C,H,W] (graph input "x", weights as initializers). */
static struct cp_graph *window_graph(const char *op, int64_t c)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, c, 9, 7));
    int32_t n;
    if (strcmp(op, "Conv") == 0) {
        float *w = random_floats(32 * c * 9, 5);
        gb_init(g, "w", CP_DTYPE_F32, 4, GB_DIMS(32, c, 3, 3), w);
        free(w);
        n = gb_node(g, "n", "Conv", GB_IN("x", "w"), GB_IN("y"));
        cp_node_set_ints(g, n, "pads", GB_DIMS(1, 1, 1, 1), 4);
    } else {
        n = gb_node(g, "n", op, GB_IN("x"), GB_IN("y"));
        if (strcmp(op, "GlobalAveragePool") != 0)
            cp_node_set_ints(g, n, "kernel_shape", GB_DIMS(3, 3), 2);
    }
    gb_infer_ok(g);
    return g;
}

Test(layout_kernels, reference_window_kernels_compute_the_same_in_every_layout)
{
    struct env e;
    env_init(&e);
    const char *ops[] = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool"};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        struct cp_graph *g = window_graph(ops[o], 16);
        const struct cp_node *n = cp_graph_node(g, 0);
        struct cp_tensor *X = cp_graph_tensor(g, n->inputs[0]);
        struct cp_tensor *Y = cp_graph_tensor(g, n->outputs[0]);
        int64_t xd[4], yd[4];
        for (int i = 0; i < 4; i++) {
            xd[i] = X->shape.dims[i].value;
            yd[i] = Y->shape.dims[i].value;
        }
        float *x = random_floats(xd[0] * xd[1] * xd[2] * xd[3], 11);
        const struct cp_kernel *ref = cp_kernel_reference(n->op);
        float *plain = run0(&e, ref, g, (void *const[]){x, NULL});
        int64_t yn = yd[0] * yd[1] * yd[2] * yd[3];
        for (size_t l = 1; l < N_LAYOUTS; l++) {
            X->layout = Y->layout = layouts[l];
            float *xl = relayout(x, xd, CP_LAYOUT_NCHW, layouts[l]);
            float *yl = run0(&e, ref, g, (void *const[]){xl, NULL});
            float *back = relayout(yl, yd, layouts[l], CP_LAYOUT_NCHW);
            for (int64_t i = 0; i < yn; i++)
                cr_assert_eq(back[i], plain[i], "%s in %s: element %lld is %g, plain gives %g",
                             ops[o], cp_layout_name(layouts[l]), (long long)i, (double)back[i],
                             (double)plain[i]);
            free(xl);
            free(yl);
            free(back);
        }
        X->layout = Y->layout = CP_LAYOUT_UNDEF;
        free(plain);
        free(x);
        cp_graph_free(g);
    }
    env_release(&e);
}

Test(layout_kernels, the_c_batch_norm_computes_the_same_in_every_layout)
{
    struct env e;
    env_init(&e);
    const int64_t c = 32, xd[4] = {2, 32, 5, 3}, n = 2 * 32 * 5 * 3;
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(2, c, 5, 3));
    const char *pn[4] = {"s", "b", "m", "v"};
    for (int i = 0; i < 4; i++) {
        float *p = random_floats(c, 40 + (uint64_t)i);
        if (i == 3)
            for (int64_t j = 0; j < c; j++)
                p[j] = p[j] * p[j] + 0.1f;
        gb_init(g, pn[i], CP_DTYPE_F32, 1, &c, p);
        free(p);
    }
    int32_t nd = gb_node(g, "bn", "BatchNormalization", GB_IN("x", "s", "b", "m", "v"), GB_IN("y"));
    cp_node_set_float(g, nd, "epsilon", 1e-3f);
    gb_infer_ok(g);
    const struct cp_node *node = cp_graph_node(g, 0);
    struct cp_tensor *X = cp_graph_tensor(g, node->inputs[0]);
    struct cp_tensor *Y = cp_graph_tensor(g, node->outputs[0]);
    float *x = random_floats(n, 17);
    float *plain =
        run0(&e, cp_kernel_reference(node->op), g, (void *const[]){x, NULL, NULL, NULL, NULL});
    for (size_t l = 0; l < N_LAYOUTS; l++) {
        X->layout = Y->layout = layouts[l];
        cr_assert(cp_fast_batch_norm.supports(g, node), "the C kernel takes %s",
                  cp_layout_name(layouts[l]));
        float *xl = relayout(x, xd, CP_LAYOUT_NCHW, layouts[l]);
        float *yl = run0(&e, &cp_fast_batch_norm, g, (void *const[]){xl, NULL, NULL, NULL, NULL});
        float *back = relayout(yl, xd, layouts[l], CP_LAYOUT_NCHW);
        for (int64_t i = 0; i < n; i++)
            cr_assert_float_eq(back[i], plain[i], 1e-5f, "%s: element %lld is %g, plain gives %g",
                               cp_layout_name(layouts[l]), (long long)i, (double)back[i],
                               (double)plain[i]);
        free(xl);
        free(yl);
        free(back);
    }
    X->layout = CP_LAYOUT_NHWC;
    Y->layout = CP_LAYOUT_NCHW8C;
    cr_assert_not(cp_fast_batch_norm.supports(g, node), "a norm between two layouts");
    free(plain);
    free(x);
    cp_graph_free(g);
    env_release(&e);
}

Test(layout_kernels, the_c_global_average_pool_computes_the_same_in_every_layout)
{
    struct env e;
    env_init(&e);
    struct cp_graph *g = window_graph("GlobalAveragePool", 32);
    const struct cp_node *n = cp_graph_node(g, 0);
    struct cp_tensor *X = cp_graph_tensor(g, n->inputs[0]);
    struct cp_tensor *Y = cp_graph_tensor(g, n->outputs[0]);
    const int64_t xd[4] = {1, 32, 9, 7}, yd[4] = {1, 32, 1, 1};
    float *x = random_floats(32 * 9 * 7, 13);
    float *plain = run0(&e, cp_kernel_reference(n->op), g, (void *const[]){x, NULL});
    for (size_t l = 0; l < N_LAYOUTS; l++) {
        X->layout = Y->layout = layouts[l];
        cr_assert(cp_fast_global_avg_pool.supports(g, n), "the C kernel takes %s",
                  cp_layout_name(layouts[l]));
        float *xl = relayout(x, xd, CP_LAYOUT_NCHW, layouts[l]);
        float *yl = run0(&e, &cp_fast_global_avg_pool, g, (void *const[]){xl, NULL});
        float *back = relayout(yl, yd, layouts[l], CP_LAYOUT_NCHW);
        for (int64_t i = 0; i < 32; i++)
            cr_expect_float_eq(back[i], plain[i], 1e-6f, "%s: channel %lld is %g, plain gives %g",
                               cp_layout_name(layouts[l]), (long long)i, (double)back[i],
                               (double)plain[i]);
        free(xl);
        free(yl);
        free(back);
    }
    /* pooled into another layout, it is not the C kernel's */
    X->layout = CP_LAYOUT_NCHW16C;
    Y->layout = CP_LAYOUT_NHWC;
    cr_assert_not(cp_fast_global_avg_pool.supports(g, n));
    free(plain);
    free(x);
    cp_graph_free(g);
    env_release(&e);
}

/* A channel selection on x [2,24,5,3]: a Gather of 12 constant channels
 * (a shuffle's half, with a negative index), or a Slice of channels 4..22
 * step 3. */
static struct cp_graph *select_graph(bool gather)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(2, 24, 5, 3));
    if (gather) {
        gb_init(g, "i", CP_DTYPE_I64, 1, GB_DIMS(12),
                (const int64_t[]){0, 12, 1, 13, 2, 14, 3, 15, 4, 16, -1, 23});
        cp_node_set_int(g, gb_node(g, "n", "Gather", GB_IN("x", "i"), GB_IN("y")), "axis", 1);
    } else {
        gb_init(g, "st", CP_DTYPE_I64, 1, GB_DIMS(1), (const int64_t[]){4});
        gb_init(g, "en", CP_DTYPE_I64, 1, GB_DIMS(1), (const int64_t[]){22});
        gb_init(g, "ax", CP_DTYPE_I64, 1, GB_DIMS(1), (const int64_t[]){1});
        gb_init(g, "sp", CP_DTYPE_I64, 1, GB_DIMS(1), (const int64_t[]){3});
        gb_node(g, "n", "Slice", GB_IN("x", "st", "en", "ax", "sp"), GB_IN("y"));
    }
    gb_infer_ok(g);
    return g;
}

/* The C kernels and the reference select the same channels in NHWC as in
 * NCHW, bit for bit; the C kernels refuse the blocked layouts (their
 * regions run NHWC, atc_bridge/passes/layout_transform.c). */
Test(layout_kernels, channel_gather_and_slice_select_the_same_channels_in_nhwc)
{
    struct env e;
    env_init(&e);
    for (int gather = 0; gather < 2; gather++) {
        struct cp_graph *g = select_graph(gather);
        const struct cp_node *n = cp_graph_node(g, 0);
        struct cp_tensor *X = cp_graph_tensor(g, n->inputs[0]);
        struct cp_tensor *Y = cp_graph_tensor(g, n->outputs[0]);
        const int64_t xd[4] = {2, 24, 5, 3}, yd[4] = {2, Y->shape.dims[1].value, 5, 3};
        int64_t yn = yd[0] * yd[1] * yd[2] * yd[3];
        cr_assert_eq(yd[1], gather ? 12 : 6);
        const struct cp_kernel *fast = gather ? &cp_fast_channel_gather : &cp_fast_slice;
        float *x = random_floats(2 * 24 * 5 * 3, 21);
        void *in[5] = {x, NULL, NULL, NULL, NULL};
        float *plain = run0(&e, cp_kernel_reference(n->op), g, in);
        cr_assert(fast == &cp_fast_slice || !fast->supports(g, n), "%s takes NCHW", fast->name);
        X->layout = Y->layout = CP_LAYOUT_NHWC;
        float *xl = relayout(x, xd, CP_LAYOUT_NCHW, CP_LAYOUT_NHWC);
        in[0] = xl;
        for (int ref = 0; ref < 2; ref++) {
            const struct cp_kernel *k = ref ? cp_kernel_reference(n->op) : fast;
            float *yl = run0(&e, k, g, in);
            float *back = relayout(yl, yd, CP_LAYOUT_NHWC, CP_LAYOUT_NCHW);
            for (int64_t i = 0; i < yn; i++)
                cr_assert_eq(back[i], plain[i], "%s (%s) in NHWC: element %lld is %g, not %g",
                             n->op_type, k->name, (long long)i, (double)back[i], (double)plain[i]);
            free(yl);
            free(back);
        }
        X->layout = Y->layout = CP_LAYOUT_NCHW8C;
        cr_assert_not(fast->supports(g, n), "%s takes nChw8c", fast->name);
        X->layout = CP_LAYOUT_NHWC;
        Y->layout = CP_LAYOUT_NCHW;
        cr_assert_not(fast->supports(g, n), "%s from NHWC to NCHW", fast->name);
        free(xl);
        free(plain);
        free(x);
        cp_graph_free(g);
    }
    env_release(&e);
}

/* ---- impl: exact or fast exp and erf ---------------------------------------------------- */

static struct cp_graph *unary_graph(const char *op, int64_t rows, int64_t len, const char *impl,
                                    const float *x)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "x", CP_DTYPE_F32, 2, GB_DIMS(rows, len), x);
    int32_t n = gb_node(g, "n", op, GB_IN("x"), GB_IN("y"));
    if (impl)
        cp_node_set_string(g, n, "impl", impl);
    gb_infer_ok(g);
    return g;
}

static double max_rel(const float *a, const float *b, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(fabs((double)b[i]), 1e-30);
        worst = d > worst ? d : worst;
    }
    return worst;
}

/* ---- a fused convolution whose residual follows its activation ------------------------ */

/* EfficientNetV2's fused blocks: Conv 3x3 (24 -> 24), SiLU, then the block's
 * input added. oneDNN's jit convolutions take that residual only as a first
 * post-op, so in blocked layouts the kernel adds it in a step of its own; in
 * every layout it computes what the reference computes on plain tensors. */
Test(layout_kernels, fused_conv_with_the_residual_after_its_activation_matches_in_every_layout)
{
    struct env e;
    env_init(&e);
    const int64_t c = 24, h = 12, w = 10;
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, c, h, w));
    float *wt = random_floats(c * c * 9, 21), *bias = random_floats(c, 22);
    gb_init(g, "w", CP_DTYPE_F32, 4, GB_DIMS(c, c, 3, 3), wt);
    gb_init(g, "b", CP_DTYPE_F32, 1, GB_DIMS(c), bias);
    free(wt);
    free(bias);
    gb_input(g, "r", CP_DTYPE_F32, 4, GB_DIMS(1, c, h, w));
    int32_t idx = gb_node_in(g, "n", "FusedConv", CP_DOMAIN, GB_IN("x", "w", "b", "r"), GB_IN("y"));
    int32_t in[4] = {cp_graph_find_tensor(g, "x"), cp_graph_find_tensor(g, "w"),
                     cp_graph_find_tensor(g, "b"), cp_graph_find_tensor(g, "r")};
    int32_t out = cp_graph_find_tensor(g, "y");
    cp_node_set_ints(g, idx, "pads", GB_DIMS(1, 1, 1, 1), 4);
    cp_node_set_string(g, idx, "activation", "SiLU");
    gb_infer_ok(g);
    const struct cp_node *n = cp_graph_node(g, 0);
    struct cp_tensor *T[3] = {cp_graph_tensor(g, in[0]), cp_graph_tensor(g, in[3]),
                              cp_graph_tensor(g, out)};
    const int64_t dims[4] = {1, c, h, w}, numel = c * h * w;
    float *x = random_floats(numel, 23), *r = random_floats(numel, 24);
    float *plain = run0(&e, cp_kernel_reference(n->op), g, (void *const[]){x, NULL, NULL, r});
    for (size_t l = 0; l < N_LAYOUTS; l++) {
        for (int t = 0; t < 3; t++)
            T[t]->layout = layouts[l];
        if (!cp_dnnl_fused_conv.supports(g, n)) { /* 24 channels do not fill 16-blocks */
            cr_assert_eq(layouts[l], CP_LAYOUT_NCHW16C, "oneDNN refuses the node in %s",
                         cp_layout_name(layouts[l]));
            continue;
        }
        float *xl = relayout(x, dims, CP_LAYOUT_NCHW, layouts[l]);
        float *rl = relayout(r, dims, CP_LAYOUT_NCHW, layouts[l]);
        float *yl = run0(&e, &cp_dnnl_fused_conv, g, (void *const[]){xl, NULL, NULL, rl});
        float *back = relayout(yl, dims, layouts[l], CP_LAYOUT_NCHW);
        double err = 0, norm = 0; /* relative L2 */
        for (int64_t i = 0; i < numel; i++) {
            err += ((double)back[i] - plain[i]) * ((double)back[i] - plain[i]);
            norm += (double)plain[i] * plain[i];
        }
        double rel = sqrt(err / norm);
        cr_expect_leq(rel, 1e-5, "in %s the fused convolution is %.3g off the reference",
                      cp_layout_name(layouts[l]), rel);
        free(xl);
        free(rl);
        free(yl);
        free(back);
    }
    free(plain);
    free(x);
    free(r);
    cp_graph_free(g);
    env_release(&e);
}

Test(layout_kernels, exact_softmax_uses_libm_exp_for_rows_of_any_length)
{
    struct env e;
    env_init(&e);
    const int64_t rows = 64, len = 77;
    float *x = random_floats(rows * len, 3);
    for (int64_t i = 0; i < rows * len; i++)
        x[i] *= 8.0f;
    struct cp_graph *g = unary_graph("Softmax", rows, len, "exact", x);
    const struct cp_node *n = cp_graph_node(g, 0);
    cr_assert(cp_fast_softmax.supports(g, n), "an exact softmax of 77 is the C kernel's");
    cr_assert_not(cp_dnnl_softmax.supports(g, n), "oneDNN's exp is not libm's");
    float *got = run0(&e, &cp_fast_softmax, g, NULL);
    float *ref = run0(&e, cp_kernel_reference(CP_OP_SOFTMAX), g, NULL);
    double rel = max_rel(got, ref, rows * len);
    cr_assert_leq(rel, 1e-6, "exact softmax is %.3g off the reference", rel);
    free(got);
    free(ref);
    cp_graph_free(g);
    g = unary_graph("Softmax", rows, len, "fast", x);
    cr_assert_not(cp_fast_softmax.supports(g, cp_graph_node(g, 0)),
                  "the fast softmax keeps to whole vectors");
    cp_graph_free(g);
    free(x);
    env_release(&e);
}

Test(layout_kernels, fast_and_exact_softmax_agree_within_a_few_ulp)
{
    struct env e;
    env_init(&e);
    const int64_t rows = 32, len = 256;
    float *x = random_floats(rows * len, 9);
    for (int64_t i = 0; i < rows * len; i++)
        x[i] *= 20.0f;
    struct cp_graph *gf = unary_graph("Softmax", rows, len, "fast", x);
    struct cp_graph *ge = unary_graph("Softmax", rows, len, "exact", x);
    float *f = run0(&e, &cp_fast_softmax, gf, NULL);
    float *ex = run0(&e, &cp_fast_softmax, ge, NULL);
    double rel = max_rel(f, ex, rows * len);
    cr_assert_leq(rel, 1e-5, "fast and exact softmax differ by %.3g", rel);
    free(f);
    free(ex);
    cp_graph_free(gf);
    cp_graph_free(ge);
    free(x);
    env_release(&e);
}

Test(layout_kernels, exact_erf_is_libm_erff)
{
    struct env e;
    env_init(&e);
    const int64_t n = 4096;
    float *x = random_floats(n, 17);
    for (int64_t i = 0; i < n; i++)
        x[i] *= 5.0f;
    struct cp_graph *g = unary_graph("Erf", 1, n, "exact", x);
    float *got = run0(&e, &cp_fast_erf, g, NULL);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], erff(x[i]), "erf(%g): %.9g, libm %.9g", (double)x[i], (double)got[i],
                     (double)erff(x[i]));
    free(got);
    cp_graph_free(g);
    g = unary_graph("Erf", 1, n, NULL, x);
    got = run0(&e, &cp_fast_erf, g, NULL);
    for (int64_t i = 0; i < n; i++)
        cr_assert_leq(fabsf(got[i] - erff(x[i])), 4e-7f, "fast erf(%g) = %.9g", (double)x[i],
                      (double)got[i]);
    free(got);
    cp_graph_free(g);
    free(x);
    env_release(&e);
}
