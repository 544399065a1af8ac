/* The kernel harness: every fast kernel computes what the reference kernel
 * of its op computes, on the nodes its `supports` accepts.
 *
 * A table of cases builds one-node graphs (attributes, shapes, broadcasting
 * and edge cases, weights as initializers or as run-time inputs). For each
 * case and for every fast kernel of the node's op that accepts it (not only
 * the one the registry would pick, so that second choices are checked
 * too), the harness runs the fast kernel and the reference kernel on the
 * same seeded random inputs and compares the outputs: |fast - ref| <=
 * 1e-5 * |ref| + 1e-5 * max|ref| (oneDNN sums in a different order). Every
 * kernel in cp_fast_kernels must be exercised by some case; a kernel that
 * accepts cases but needs CPU features this host lacks (its `isa`, checked
 * against core/host.h) is reported as not available here instead, and one
 * that accepts no case at all fails on every host. */
#include "runner/cpu/kernel.h"

#include "core/host.h"
#include "runner/cpu/fast_kernels.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 2
#define RTOL    1e-5
#define ATOL    1e-5 /* times the largest |ref| of the output */

/* ---- random data ----------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Uniform in [lo, hi). */
static float rng_float(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)((rng_next(s) >> 40) * (1.0 / 16777216.0));
}

enum { IN_NORMAL = 0, IN_POSITIVE = 1, IN_WIDE = 2 };

static void fill(void *data, enum cp_dtype dt, int64_t n, uint64_t seed, int mode)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case CP_DTYPE_F32: {
            float lo = mode == IN_POSITIVE ? 0.01f : mode == IN_WIDE ? -12.0f : -1.0f;
            float hi = mode == IN_WIDE ? 12.0f : 1.0f;
            ((float *)data)[i] = rng_float(&s, lo, hi);
            break;
        }
        case CP_DTYPE_BOOL:
            ((uint8_t *)data)[i] = (uint8_t)(rng_next(&s) & 1);
            break;
        case CP_DTYPE_I64:
            ((int64_t *)data)[i] = (int64_t)(rng_next(&s) % 10);
            break;
        default:
            memset((char *)data + (size_t)i * cp_dtype_size(dt), (int)(i & 0x7f),
                   cp_dtype_size(dt));
            break;
        }
    }
}

/* ---- graph building ----------------------------------------------------------- */

static uint64_t name_seed(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* f32 graph input. */
static void X(struct cp_graph *g, const char *name, int rank, const int64_t *dims)
{
    gb_input(g, name, CP_DTYPE_F32, rank, dims);
}

/* f32 initializer with seeded random values. */
static void W(struct cp_graph *g, const char *name, int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    cr_assert_not_null(v);
    fill(v, CP_DTYPE_F32, n, name_seed(name), IN_NORMAL);
    gb_init(g, name, CP_DTYPE_F32, rank, dims, v);
    free(v);
}

static void F(struct cp_graph *g, const char *name, float v)
{
    gb_init(g, name, CP_DTYPE_F32, 0, NULL, &v);
}

static int32_t N(struct cp_graph *g, const char *op, const char *const *ins,
                 const char *const *outs)
{
    return gb_node(g, "n", op, ins, outs);
}

#define D(...) GB_DIMS(__VA_ARGS__)
#define I(...) GB_IN(__VA_ARGS__)
#define INTS(g, n, name, ...)                                                                      \
    cp_node_set_ints(g, n, name, (const int64_t[]){__VA_ARGS__},                                   \
                     sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* ---- cases ---------------------------------------------------------------- */

/* Conv */
static void c_conv_3x3_bias(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 12, 12));
    W(g, "w", 4, D(24, 16, 3, 3));
    W(g, "b", 1, D(24));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    INTS(g, n, "kernel_shape", 3, 3);
}
static void c_conv_stride2_asym(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 8, 11, 9));
    W(g, "w", 4, D(16, 8, 3, 3));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    INTS(g, n, "pads", 0, 1, 1, 0);
    INTS(g, n, "strides", 2, 2);
}
static void c_conv_group_dil(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 10, 10));
    W(g, "w", 4, D(12, 2, 3, 3));
    W(g, "b", 1, D(12));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    cp_node_set_int(g, n, "group", 4);
    INTS(g, n, "dilations", 2, 2);
    INTS(g, n, "pads", 2, 2, 2, 2);
}
static void c_conv_same_upper(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 4, 9, 9));
    W(g, "w", 4, D(8, 4, 4, 4));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    cp_node_set_string(g, n, "auto_pad", "SAME_UPPER");
    INTS(g, n, "strides", 2, 2);
}
static void c_conv_1d(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 6, 20));
    W(g, "w", 3, D(5, 6, 5));
    W(g, "b", 1, D(5));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 2, 1);
}
static void c_conv_runtime_weights(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 8, 8));
    X(g, "w", 4, D(16, 16, 3, 3));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
}
static void c_conv_stem(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 3, 32, 32));
    W(g, "w", 4, D(16, 3, 7, 7));
    W(g, "b", 1, D(16));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 3, 3, 3, 3);
    INTS(g, n, "strides", 2, 2);
}
static void c_conv_1x1(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 64, 8, 8));
    W(g, "w", 4, D(128, 64, 1, 1));
    N(g, "Conv", I("x", "w"), I("y"));
}

/* ConvTranspose */
static void c_deconv_s2(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 5, 5));
    W(g, "w", 4, D(8, 6, 3, 3));
    W(g, "b", 1, D(6));
    int32_t n = N(g, "ConvTranspose", I("x", "w", "b"), I("y"));
    INTS(g, n, "strides", 2, 2);
    INTS(g, n, "pads", 1, 1, 1, 1);
    INTS(g, n, "output_padding", 1, 1);
}
static void c_deconv_group(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 4, 6, 7));
    W(g, "w", 4, D(4, 3, 2, 2));
    int32_t n = N(g, "ConvTranspose", I("x", "w"), I("y"));
    cp_node_set_int(g, n, "group", 2);
    INTS(g, n, "strides", 2, 2);
}

/* MatMul */
static void c_mm_attention(struct cp_graph *g)
{
    X(g, "a", 4, D(1, 4, 64, 16));
    X(g, "b", 4, D(1, 4, 16, 64));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_const_b(struct cp_graph *g)
{
    X(g, "a", 3, D(2, 30, 64));
    W(g, "b", 2, D(64, 48));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_bcast(struct cp_graph *g)
{
    X(g, "a", 4, D(3, 1, 4, 5));
    X(g, "b", 3, D(2, 5, 6));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_bcast_a(struct cp_graph *g)
{
    X(g, "a", 3, D(1, 4, 5));
    X(g, "b", 3, D(3, 5, 2));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_vec_mat(struct cp_graph *g)
{
    X(g, "a", 1, D(7));
    X(g, "b", 3, D(2, 7, 3));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_mat_vec(struct cp_graph *g)
{
    X(g, "a", 2, D(5, 7));
    W(g, "b", 1, D(7));
    N(g, "MatMul", I("a", "b"), I("y"));
}

static void c_mm_pv(struct cp_graph *g)
{
    X(g, "a", 4, D(1, 2, 64, 256));
    X(g, "b", 4, D(1, 2, 256, 16));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_pv_shared_b(struct cp_graph *g)
{
    X(g, "a", 3, D(2, 70, 300));
    W(g, "b", 2, D(300, 16));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_pv_odd(struct cp_graph *g)
{
    X(g, "a", 3, D(3, 33, 257));
    X(g, "b", 3, D(3, 257, 16));
    N(g, "MatMul", I("a", "b"), I("y"));
}

/* Gemm */
static void c_gemm_linear(struct cp_graph *g)
{
    X(g, "a", 2, D(3, 64));
    W(g, "b", 2, D(10, 64));
    W(g, "c", 1, D(10));
    int32_t n = N(g, "Gemm", I("a", "b", "c"), I("y"));
    cp_node_set_int(g, n, "transB", 1);
}
static void c_gemm_alpha_beta(struct cp_graph *g)
{
    X(g, "a", 2, D(9, 5));
    X(g, "b", 2, D(9, 7));
    X(g, "c", 2, D(5, 7));
    int32_t n = N(g, "Gemm", I("a", "b", "c"), I("y"));
    cp_node_set_int(g, n, "transA", 1);
    cp_node_set_float(g, n, "alpha", 0.5f);
    cp_node_set_float(g, n, "beta", 2.0f);
}
static void c_gemm_col_c(struct cp_graph *g)
{
    X(g, "a", 2, D(6, 4));
    W(g, "b", 2, D(4, 5));
    W(g, "c", 2, D(6, 1));
    N(g, "Gemm", I("a", "b", "c"), I("y"));
}
static void c_gemm_no_c(struct cp_graph *g)
{
    X(g, "a", 2, D(4, 8));
    X(g, "b", 2, D(3, 8));
    int32_t n = N(g, "Gemm", I("a", "b"), I("y"));
    cp_node_set_int(g, n, "transB", 1);
    cp_node_set_float(g, n, "alpha", 1.5f);
}

/* Pooling */
static void c_maxpool_stem(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 16, 16));
    int32_t n = N(g, "MaxPool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 3, 3);
    INTS(g, n, "strides", 2, 2);
    INTS(g, n, "pads", 1, 1, 1, 1);
}
static void c_maxpool_ceil(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 3, 10, 9));
    int32_t n = N(g, "MaxPool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 3, 2);
    INTS(g, n, "strides", 2, 2);
    cp_node_set_int(g, n, "ceil_mode", 1);
}
static void c_avgpool_excl(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 4, 9, 9));
    int32_t n = N(g, "AveragePool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 3, 3);
    INTS(g, n, "strides", 2, 2);
    INTS(g, n, "pads", 1, 1, 1, 1);
}
static void c_avgpool_incl(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 4, 8, 8));
    int32_t n = N(g, "AveragePool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 3, 3);
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_int(g, n, "count_include_pad", 1);
}
static void c_gap(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 64, 8, 8));
    N(g, "GlobalAveragePool", I("x"), I("y"));
}

/* Normalisation */
static void c_softmax_last(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 4, 32, 80));
    N(g, "Softmax", I("x"), I("y"));
}
static void c_softmax_ragged(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 4, 32, 77));
    N(g, "Softmax", I("x"), I("y"));
}
static void c_softmax_axis1(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 5, 16));
    int32_t n = N(g, "Softmax", I("x"), I("y"));
    cp_node_set_int(g, n, "axis", 1);
}
static void c_softmax_wide(struct cp_graph *g)
{
    X(g, "x", 2, D(8, 1024));
    N(g, "Softmax", I("x"), I("y"));
}
static void c_layernorm(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 128, 64));
    W(g, "s", 1, D(64));
    W(g, "b", 1, D(64));
    N(g, "LayerNormalization", I("x", "s", "b"), I("y"));
}
/* Rows of 96 drawn from [-12, 12) (c:layer_norm's 16-lane path) with 37
 * of them, so the threads split unevenly. */
static void c_layernorm_wide(struct cp_graph *g)
{
    X(g, "x", 2, D(37, 96));
    W(g, "s", 1, D(96));
    W(g, "b", 1, D(96));
    N(g, "LayerNormalization", I("x", "s", "b"), I("y"));
}
static void c_layernorm_axis(struct cp_graph *g)
{
    X(g, "x", 3, D(3, 4, 5));
    W(g, "s", 2, D(4, 5));
    int32_t n = N(g, "LayerNormalization", I("x", "s"), I("y"));
    cp_node_set_int(g, n, "axis", -2);
    cp_node_set_float(g, n, "epsilon", 1e-3f);
}
static void bn_params(struct cp_graph *g, int64_t c)
{
    W(g, "s", 1, D(c));
    W(g, "b", 1, D(c));
    W(g, "m", 1, D(c));
    int64_t n = c;
    float *v = malloc((size_t)c * sizeof *v);
    fill(v, CP_DTYPE_F32, c, 7, IN_POSITIVE);
    gb_init(g, "v", CP_DTYPE_F32, 1, &n, v);
    free(v);
}
static void c_batchnorm(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 16, 7, 7));
    bn_params(g, 16);
    N(g, "BatchNormalization", I("x", "s", "b", "m", "v"), I("y"));
}
static void c_batchnorm_2d(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 12));
    bn_params(g, 12);
    N(g, "BatchNormalization", I("x", "s", "b", "m", "v"), I("y"));
}
static void c_instnorm_group(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 8, 2048));
    W(g, "s", 1, D(8));
    W(g, "b", 1, D(8));
    N(g, "InstanceNormalization", I("x", "s", "b"), I("y"));
}
static void c_instnorm_4d(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 3, 5, 5));
    W(g, "s", 1, D(3));
    W(g, "b", 1, D(3));
    int32_t n = N(g, "InstanceNormalization", I("x", "s", "b"), I("y"));
    cp_node_set_float(g, n, "epsilon", 1e-3f);
}
/* Batch of 4 and gamma/beta fed at run time: kernels cannot copy them at
 * prepare. */
static void c_instnorm_3d_runtime(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 6, 300));
    X(g, "s", 1, D(6));
    X(g, "b", 1, D(6));
    N(g, "InstanceNormalization", I("x", "s", "b"), I("y"));
}
static void c_instnorm_4d_large(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 16, 32, 32));
    W(g, "s", 1, D(16));
    W(g, "b", 1, D(16));
    N(g, "InstanceNormalization", I("x", "s", "b"), I("y"));
}

/* Binary */
#define BINARY_CASE(fn, op, ra, da, rb, db)                                                        \
    static void fn(struct cp_graph *g)                                                             \
    {                                                                                              \
        X(g, "a", ra, da);                                                                         \
        X(g, "b", rb, db);                                                                         \
        N(g, op, I("a", "b"), I("y"));                                                             \
    }
BINARY_CASE(c_add_same, "Add", 4, D(1, 64, 32, 32), 4, D(1, 64, 32, 32))
BINARY_CASE(c_mul_scalar, "Mul", 4, D(1, 4, 64, 64), 0, NULL)
BINARY_CASE(c_mul_channel, "Mul", 4, D(1, 64, 16, 16), 3, D(64, 1, 1))
BINARY_CASE(c_add_bias, "Add", 3, D(1, 1024, 64), 1, D(64))
BINARY_CASE(c_sub_outer, "Sub", 3, D(3, 1, 5), 3, D(1, 4, 1))
BINARY_CASE(c_div_abcast, "Div", 2, D(1, 5), 2, D(4, 5))
BINARY_CASE(c_add_time, "Add", 4, D(1, 64, 32, 32), 4, D(1, 64, 1, 1))
BINARY_CASE(c_div_row, "Div", 3, D(1, 128, 64), 3, D(1, 128, 1))
BINARY_CASE(c_add_small, "Add", 1, D(3), 1, D(1))
/* Rows of 7 split between threads at multiples of 16: partial rows. */
BINARY_CASE(c_add_short_rows, "Add", 3, D(3, 1037, 7), 1, D(7))
BINARY_CASE(c_sub_bcast_a_rows, "Sub", 3, D(5, 1, 16), 3, D(5, 700, 16))
BINARY_CASE(c_mul_nhwc_channel, "Mul", 4, D(1, 64, 64, 16), 1, D(16))
/* The broadcast operand first: oneDNN kernels swap Add and Mul and decline
 * Sub and Div. */
BINARY_CASE(c_add_channel_first, "Add", 4, D(1, 64, 1, 1), 4, D(1, 64, 32, 32))
BINARY_CASE(c_mul_scalar_first, "Mul", 0, NULL, 3, D(2, 8, 64))
BINARY_CASE(c_sub_channel_first, "Sub", 4, D(1, 8, 1, 1), 4, D(2, 8, 5, 5))
BINARY_CASE(c_sub_channel, "Sub", 4, D(2, 8, 5, 5), 4, D(1, 8, 1, 1))
BINARY_CASE(c_div_scalar, "Div", 3, D(2, 8, 64), 0, NULL)
BINARY_CASE(c_add_scalars, "Add", 0, NULL, 0, NULL)

static void c_where(struct cp_graph *g)
{
    gb_input(g, "c", CP_DTYPE_BOOL, 2, D(4, 1));
    X(g, "a", 2, D(4, 6));
    X(g, "b", 1, D(6));
    N(g, "Where", I("c", "a", "b"), I("y"));
}

/* Unary */
#define UNARY_CASE(fn, op, r, d)                                                                   \
    static void fn(struct cp_graph *g)                                                             \
    {                                                                                              \
        X(g, "x", r, d);                                                                           \
        N(g, op, I("x"), I("y"));                                                                  \
    }
UNARY_CASE(c_relu, "Relu", 4, D(1, 16, 32, 32))
UNARY_CASE(c_sigmoid, "Sigmoid", 4, D(1, 64, 32, 32))
UNARY_CASE(c_exp, "Exp", 2, D(3, 1000))
UNARY_CASE(c_sqrt, "Sqrt", 2, D(3, 1000))
UNARY_CASE(c_erf, "Erf", 3, D(1, 1024, 256))
UNARY_CASE(c_erf_small, "Erf", 1, D(37))
UNARY_CASE(c_tanh, "Tanh", 2, D(3, 1000))

static void c_leaky(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 300));
    int32_t n = N(g, "LeakyRelu", I("x"), I("y"));
    cp_node_set_float(g, n, "alpha", 0.2f);
}
static void c_clip_both(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 300));
    F(g, "lo", -0.25f);
    F(g, "hi", 0.5f);
    N(g, "Clip", I("x", "lo", "hi"), I("y"));
}
static void c_clip_min(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 300));
    F(g, "lo", 0.0f);
    N(g, "Clip", I("x", "lo"), I("y"));
}
#define POW_CASE(fn, e)                                                                            \
    static void fn(struct cp_graph *g)                                                             \
    {                                                                                              \
        X(g, "x", 3, D(1, 128, 64));                                                               \
        F(g, "e", e);                                                                              \
        N(g, "Pow", I("x", "e"), I("y"));                                                          \
    }
POW_CASE(c_pow2, 2.0f)
POW_CASE(c_pow3, 3.0f)
POW_CASE(c_pow_half, 0.5f)
POW_CASE(c_pow_general, 1.7f)

/* Reductions */
static void c_rmean_last(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 128, 64));
    int32_t n = N(g, "ReduceMean", I("x"), I("y"));
    INTS(g, n, "axes", -1);
}
static void c_rmean_hw(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 8, 16, 16));
    int32_t n = N(g, "ReduceMean", I("x"), I("y"));
    INTS(g, n, "axes", 2, 3);
    cp_node_set_int(g, n, "keepdims", 0);
}
static void c_rmean_channel(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 16, 16));
    int32_t n = N(g, "ReduceMean", I("x"), I("y"));
    INTS(g, n, "axes", 1);
}
static void c_rsum_input_axes(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 6, 5));
    gb_ints(g, "ax", 1, (const int64_t[]){1});
    N(g, "ReduceSum", I("x", "ax"), I("y"));
}
static void c_rsum_all(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 6, 5));
    N(g, "ReduceSum", I("x"), I("y"));
}
static void c_rmax_first(struct cp_graph *g)
{
    X(g, "x", 3, D(7, 3, 5));
    int32_t n = N(g, "ReduceMax", I("x"), I("y"));
    INTS(g, n, "axes", 0);
    cp_node_set_int(g, n, "keepdims", 0);
}

/* Data movement */
static void c_transpose_heads(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 64, 4, 16));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 0, 2, 1, 3);
}
static void c_transpose_kt(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 77, 4, 16));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 0, 2, 3, 1);
}
static void c_transpose_default(struct cp_graph *g)
{
    X(g, "x", 3, D(3, 4, 5));
    N(g, "Transpose", I("x"), I("y"));
}
static void c_transpose_i64(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_I64, 2, D(3, 7));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 1, 0);
}
/* Matrix transposes once dims are merged (c:transpose): NCHW -> NHWC of a
 * U-Net block (whole 16 x 16 tiles), back with a batch of 2 and edges in
 * both directions, and a plain 2-D one. */
static void c_transpose_to_nhwc(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 64, 32, 32));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 0, 2, 3, 1);
}
static void c_transpose_to_nchw_edges(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 5, 7, 40));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 0, 3, 1, 2);
}
static void c_transpose_2d(struct cp_graph *g)
{
    X(g, "x", 2, D(100, 33));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 1, 0);
}
static void c_concat(struct cp_graph *g)
{
    X(g, "a", 4, D(1, 64, 8, 8));
    X(g, "b", 4, D(1, 32, 8, 8));
    X(g, "c", 4, D(1, 3, 8, 8));
    int32_t n = N(g, "Concat", I("a", "b", "c"), I("y"));
    cp_node_set_int(g, n, "axis", 1);
}
static void c_concat_last(struct cp_graph *g)
{
    X(g, "a", 2, D(3, 2));
    X(g, "b", 2, D(3, 5));
    int32_t n = N(g, "Concat", I("a", "b"), I("y"));
    cp_node_set_int(g, n, "axis", -1);
}
static void c_split(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 6, 4));
    gb_ints(g, "s", 3, (const int64_t[]){2, 3, 1});
    int32_t n = N(g, "Split", I("x", "s"), I("y0", "y1", "y2"));
    cp_node_set_int(g, n, "axis", 1);
}
static void c_slice_step(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 10, 6));
    gb_ints(g, "st", 2, (const int64_t[]){1, -1});
    gb_ints(g, "en", 2, (const int64_t[]){9, 0});
    gb_ints(g, "ax", 2, (const int64_t[]){1, 2});
    gb_ints(g, "sp", 2, (const int64_t[]){2, -2});
    N(g, "Slice", I("x", "st", "en", "ax", "sp"), I("y"));
}
static void c_slice_simple(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 8));
    gb_ints(g, "st", 1, (const int64_t[]){2});
    gb_ints(g, "en", 1, (const int64_t[]){INT64_MAX});
    gb_ints(g, "ax", 1, (const int64_t[]){-1});
    N(g, "Slice", I("x", "st", "en", "ax"), I("y"));
}
static void c_gather0(struct cp_graph *g)
{
    X(g, "x", 2, D(10, 6));
    gb_ints(g, "i", 4, (const int64_t[]){3, -1, 0, 3});
    N(g, "Gather", I("x", "i"), I("y"));
}
static void c_gather1(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 5, 3));
    gb_init(g, "i", CP_DTYPE_I64, 2, D(2, 2), (const int64_t[]){4, 0, 1, -2});
    int32_t n = N(g, "Gather", I("x", "i"), I("y"));
    cp_node_set_int(g, n, "axis", 1);
}
static void c_resize_2x(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 16, 16));
    gb_init(g, "sc", CP_DTYPE_F32, 1, D(4), (const float[]){1, 1, 2, 2});
    int32_t n = N(g, "Resize", I("x", "", "sc"), I("y"));
    cp_node_set_string(g, n, "mode", "nearest");
    cp_node_set_string(g, n, "coordinate_transformation_mode", "asymmetric");
    cp_node_set_string(g, n, "nearest_mode", "floor");
}
/* 2x nearest with the default half_pixel mapping (each element and each
 * row doubled), large enough for two threads, split at an odd row. */
static void c_resize_2x_threads(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 37, 33, 33));
    gb_init(g, "sc", CP_DTYPE_F32, 1, D(4), (const float[]){1, 1, 2, 2});
    int32_t n = N(g, "Resize", I("x", "", "sc"), I("y"));
    cp_node_set_string(g, n, "mode", "nearest");
}
static void c_resize_sizes(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 2, 5, 7));
    gb_ints(g, "sz", 4, (const int64_t[]){1, 2, 8, 3});
    int32_t n = N(g, "Resize", I("x", "", "", "sz"), I("y"));
    cp_node_set_string(g, n, "mode", "nearest");
}

/* ---- fused ops (FusionPasses: FusedConv, FusedMatMul, GroupNormalization,
 * Gelu) ---------------------------------------------------------------------- */

/* A node of cannprof's own domain; outputs are created like N's. */
static int32_t NF(struct cp_graph *g, const char *op, const char *const *ins,
                  const char *const *outs)
{
    int32_t in[8], out[2], idx;
    size_t ni = 0, no = 0;
    for (; ins[ni]; ni++)
        in[ni] = ins[ni][0] ? cp_graph_find_tensor(g, ins[ni]) : -1;
    for (; outs[no]; no++) {
        out[no] = cp_graph_find_tensor(g, outs[no]);
        if (out[no] < 0)
            out[no] = gb_tensor(g, outs[no], CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    }
    const char *origin = "n";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, "n", op, CP_DOMAIN, in, ni, out, no, &origin, 1, &idx, &d),
                 CP_OK, "%s", d.msg);
    return idx;
}

static void c_fconv_relu_res_after(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 10, 10));
    W(g, "w", 4, D(16, 16, 3, 3));
    W(g, "b", 1, D(16));
    X(g, "r", 4, D(1, 16, 10, 10));
    int32_t n = NF(g, "FusedConv", I("x", "w", "b", "r"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", "Relu");
}
static void c_fconv_res_first_silu(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 9, 9));
    W(g, "w", 4, D(16, 8, 3, 3));
    X(g, "r", 4, D(1, 16, 5, 5));
    int32_t n = NF(g, "FusedConv", I("x", "w", "", "r"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    INTS(g, n, "strides", 2, 2);
    cp_node_set_string(g, n, "activation", "SiLU");
    cp_node_set_int(g, n, "residual_first", 1);
}
static void c_fconv_clip(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 3, 16, 16));
    W(g, "w", 4, D(16, 3, 3, 3));
    W(g, "b", 1, D(16));
    int32_t n = NF(g, "FusedConv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", "Clip");
    cp_node_set_float(g, n, "activation_alpha", 0.0f);
    cp_node_set_float(g, n, "activation_beta", 0.5f);
}
static void c_fconv_leaky_group(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 8, 8));
    W(g, "w", 4, D(8, 2, 3, 3));
    int32_t n = NF(g, "FusedConv", I("x", "w"), I("y"));
    cp_node_set_int(g, n, "group", 4);
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", "LeakyRelu");
    cp_node_set_float(g, n, "activation_alpha", 0.1f);
}
static void c_fconv_gelu(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 6, 6));
    W(g, "w", 4, D(32, 16, 1, 1));
    W(g, "b", 1, D(32));
    int32_t n = NF(g, "FusedConv", I("x", "w", "b"), I("y"));
    cp_node_set_string(g, n, "activation", "Gelu");
}
static void c_fconv_sigmoid_tanh_gelu(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 6, 6));
    W(g, "w", 4, D(16, 16, 3, 3));
    X(g, "r", 4, D(1, 16, 6, 6));
    int32_t n = NF(g, "FusedConv", I("x", "w", "", "r"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", "GeluTanh");
}
static void c_fconv_sigmoid(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 6, 6));
    W(g, "w", 4, D(16, 16, 3, 3));
    int32_t n = NF(g, "FusedConv", I("x", "w"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_string(g, n, "activation", "Sigmoid");
}
static void c_fmm_linear_gelu(struct cp_graph *g)
{
    X(g, "a", 3, D(1, 40, 64));
    W(g, "w", 2, D(64, 96));
    W(g, "b", 1, D(96));
    int32_t n = NF(g, "FusedMatMul", I("a", "w", "b"), I("y"));
    cp_node_set_string(g, n, "activation", "Gelu");
}
static void c_fmm_bias_residual(struct cp_graph *g)
{
    X(g, "a", 3, D(2, 17, 32));
    W(g, "w", 2, D(32, 24));
    W(g, "b", 1, D(24));
    X(g, "r", 3, D(2, 17, 24));
    NF(g, "FusedMatMul", I("a", "w", "b", "r"), I("y"));
}
static void c_fmm_gemm_transb_alpha(struct cp_graph *g)
{
    X(g, "a", 2, D(5, 48));
    W(g, "w", 2, D(20, 48));
    W(g, "b", 1, D(20));
    int32_t n = NF(g, "FusedMatMul", I("a", "w", "b"), I("y"));
    cp_node_set_int(g, n, "transB", 1);
    cp_node_set_float(g, n, "alpha", 0.5f);
    cp_node_set_string(g, n, "activation", "SiLU");
}
static void c_fmm_transa_runtime_b(struct cp_graph *g)
{
    X(g, "a", 2, D(12, 7));
    X(g, "w", 2, D(12, 9));
    X(g, "r", 2, D(7, 9));
    int32_t n = NF(g, "FusedMatMul", I("a", "w", "", "r"), I("y"));
    cp_node_set_int(g, n, "transA", 1);
    cp_node_set_int(g, n, "residual_first", 1);
    cp_node_set_string(g, n, "activation", "Relu");
}
static void c_gn_silu(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 32, 12, 12));
    W(g, "s", 1, D(32));
    W(g, "b", 1, D(32));
    int32_t n = NF(g, "GroupNormalization", I("x", "s", "b"), I("y"));
    cp_node_set_int(g, n, "num_groups", 8);
    cp_node_set_string(g, n, "activation", "SiLU");
}
static void c_gn_plain(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 12, 50));
    W(g, "s", 1, D(12));
    W(g, "b", 1, D(12));
    int32_t n = NF(g, "GroupNormalization", I("x", "s", "b"), I("y"));
    cp_node_set_int(g, n, "num_groups", 3);
    cp_node_set_float(g, n, "epsilon", 1e-3f);
}
static void c_gelu_erf(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 33, 70));
    NF(g, "Gelu", I("x"), I("y"));
}
static void c_gelu_tanh(struct cp_graph *g)
{
    X(g, "x", 2, D(40, 41));
    int32_t n = NF(g, "Gelu", I("x"), I("y"));
    cp_node_set_string(g, n, "approximate", "tanh");
}

/* ---- layouts (LayoutTransformPass: TransData, and the kernels a layout
 * region holds reading NHWC and blocked tensors) --------------------------------- */

/* Tag tensor `name` with a layout (graph inputs and outputs of a case). */
static void L(struct cp_graph *g, const char *name, enum cp_layout l)
{
    int32_t t = cp_graph_find_tensor(g, name);
    cr_assert_geq(t, 0, "no tensor '%s'", name);
    cp_graph_tensor(g, t)->layout = l;
}

static void transdata(struct cp_graph *g, int64_t c, enum cp_layout from, enum cp_layout to)
{
    X(g, "x", 4, D(2, c, 5, 7));
    int32_t in = cp_graph_find_tensor(g, "x"), out, idx;
    out = gb_tensor(g, "y", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    const char *origin = "n";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(
        cp_graph_add_node(g, "n", "TransData", CP_DOMAIN, &in, 1, &out, 1, &origin, 1, &idx, &d),
        CP_OK, "%s", d.msg);
    cp_node_set_string(g, idx, "src_format", cp_layout_name(from));
    cp_node_set_string(g, idx, "dst_format", cp_layout_name(to));
    L(g, "x", from);
}
static void c_td_nchw_nhwc(struct cp_graph *g)
{
    transdata(g, 3, CP_LAYOUT_NCHW, CP_LAYOUT_NHWC);
}
static void c_td_nhwc_nchw(struct cp_graph *g)
{
    transdata(g, 24, CP_LAYOUT_NHWC, CP_LAYOUT_NCHW);
}
static void c_td_nchw_16c(struct cp_graph *g)
{
    transdata(g, 32, CP_LAYOUT_NCHW, CP_LAYOUT_NCHW16C);
}
static void c_td_16c_nhwc(struct cp_graph *g)
{
    transdata(g, 48, CP_LAYOUT_NCHW16C, CP_LAYOUT_NHWC);
}
static void c_td_8c_nchw(struct cp_graph *g)
{
    transdata(g, 24, CP_LAYOUT_NCHW8C, CP_LAYOUT_NCHW);
}
static void c_td_16c_8c(struct cp_graph *g)
{
    transdata(g, 16, CP_LAYOUT_NCHW16C, CP_LAYOUT_NCHW8C);
}
static void c_conv_nhwc(struct cp_graph *g)
{
    c_conv_3x3_bias(g);
    L(g, cp_graph_tensor(g, cp_graph_node(g, 0)->inputs[0])->name, CP_LAYOUT_NHWC);
    L(g, cp_graph_tensor(g, cp_graph_node(g, 0)->outputs[0])->name, CP_LAYOUT_NHWC);
}
static void c_conv_nchw_to_16c(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 3, 12, 12));
    W(g, "w", 4, D(16, 3, 3, 3));
    W(g, "b", 1, D(16));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    L(g, "y", CP_LAYOUT_NCHW16C);
}
static void c_conv_16c_to_8c(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 9, 9));
    W(g, "w", 4, D(24, 16, 3, 3));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    INTS(g, n, "strides", 2, 2);
    L(g, "x", CP_LAYOUT_NCHW16C);
    L(g, "y", CP_LAYOUT_NCHW8C);
}
static void c_maxpool_nhwc(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 24, 11, 11));
    int32_t n = N(g, "MaxPool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 3, 3);
    INTS(g, n, "strides", 2, 2);
    INTS(g, n, "pads", 1, 1, 1, 1);
    L(g, "x", CP_LAYOUT_NHWC);
    L(g, "y", CP_LAYOUT_NHWC);
}
static void c_avgpool_16c(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 32, 8, 8));
    int32_t n = N(g, "AveragePool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 2, 2);
    INTS(g, n, "strides", 2, 2);
    L(g, "x", CP_LAYOUT_NCHW16C);
    L(g, "y", CP_LAYOUT_NCHW16C);
}
static void c_gap_8c(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 24, 7, 7));
    N(g, "GlobalAveragePool", I("x"), I("y"));
    L(g, "x", CP_LAYOUT_NCHW8C);
    L(g, "y", CP_LAYOUT_NCHW8C);
}

/* ---- FusedAttention (FlashAttentionFusionPass) ---------------------------- */

static void c_attn_bhnd_kt(struct cp_graph *g)
{
    X(g, "q", 4, D(2, 3, 37, 16));
    X(g, "k", 4, D(2, 3, 16, 45));
    X(g, "v", 4, D(2, 3, 45, 16));
    int32_t n = NF(g, "FusedAttention", I("q", "k", "v"), I("y"));
    cp_node_set_int(g, n, "num_heads", 3);
    cp_node_set_float(g, n, "scale", 0.25f);
    cp_node_set_string(g, n, "k_format", "BHDN");
}
static void c_attn_bnhd_mask(struct cp_graph *g)
{
    X(g, "q", 3, D(1, 40, 64));
    X(g, "k", 3, D(1, 50, 64));
    X(g, "v", 3, D(1, 50, 64));
    X(g, "mask", 4, D(1, 1, 40, 50));
    int32_t n = NF(g, "FusedAttention", I("q", "k", "v", "mask"), I("y"));
    cp_node_set_int(g, n, "num_heads", 4);
    cp_node_set_float(g, n, "scale", 0.25f);
    cp_node_set_string(g, n, "q_format", "BNHD");
    cp_node_set_string(g, n, "k_format", "BNHD");
    cp_node_set_string(g, n, "v_format", "BNHD");
    cp_node_set_string(g, n, "out_format", "BNHD");
}
static void c_attn_d40_exact(struct cp_graph *g)
{
    X(g, "q", 4, D(1, 2, 30, 40));
    X(g, "k", 4, D(1, 2, 70, 40));
    X(g, "v", 4, D(1, 2, 40, 70));
    int32_t n = NF(g, "FusedAttention", I("q", "k", "v"), I("y"));
    cp_node_set_int(g, n, "num_heads", 2);
    cp_node_set_float(g, n, "scale", 0.158113883f);
    cp_node_set_string(g, n, "v_format", "BHDN");
    cp_node_set_string(g, n, "impl", "exact");
}

/* ---- [rnn] ---- */
/* LSTM and GRU: the oneDNN projection + C recurrence against ref_rnn.c. */
static void seq_lens(struct cp_graph *g, const char *name, int64_t n, const int32_t *v)
{
    gb_init(g, name, CP_DTYPE_I32, 1, &n, v);
}
static void c_lstm_plain(struct cp_graph *g)
{
    X(g, "x", 3, D(5, 3, 8));
    W(g, "w", 3, D(1, 64, 8));
    W(g, "r", 3, D(1, 64, 16));
    int32_t n = N(g, "LSTM", I("x", "w", "r"), I("y", "yh", "yc"));
    cp_node_set_int(g, n, "hidden_size", 16);
}
static void c_lstm_bidir_full(struct cp_graph *g)
{
    static const int32_t len[4] = {6, 3, 0, 5};
    X(g, "x", 3, D(6, 4, 5));
    W(g, "w", 3, D(2, 28, 5));
    W(g, "r", 3, D(2, 28, 7));
    W(g, "b", 2, D(2, 56));
    seq_lens(g, "len", 4, len);
    X(g, "h0", 3, D(2, 4, 7));
    X(g, "c0", 3, D(2, 4, 7));
    W(g, "p", 2, D(2, 21));
    int32_t n = N(g, "LSTM", I("x", "w", "r", "b", "len", "h0", "c0", "p"), I("y", "yh", "yc"));
    cp_node_set_int(g, n, "hidden_size", 7);
    cp_node_set_string(g, n, "direction", "bidirectional");
    cp_node_set_float(g, n, "clip", 0.7f);
}
static void c_lstm_batch_first_reverse_coupled(struct cp_graph *g)
{
    X(g, "x", 3, D(3, 9, 4));
    W(g, "w", 3, D(1, 20, 4));
    W(g, "r", 3, D(1, 20, 5));
    W(g, "b", 2, D(1, 40));
    int32_t n = N(g, "LSTM", I("x", "w", "r", "b"), I("y", "yh"));
    cp_node_set_int(g, n, "layout", 1);
    cp_node_set_int(g, n, "input_forget", 1);
    cp_node_set_string(g, n, "direction", "reverse");
}
static void c_gru_plain(struct cp_graph *g)
{
    X(g, "x", 3, D(7, 2, 6));
    W(g, "w", 3, D(1, 33, 6));
    W(g, "r", 3, D(1, 33, 11));
    W(g, "b", 2, D(1, 66));
    int32_t n = N(g, "GRU", I("x", "w", "r", "b"), I("y", "yh"));
    cp_node_set_int(g, n, "hidden_size", 11);
}
static void c_gru_bidir_lbr_lens(struct cp_graph *g)
{
    static const int32_t len[3] = {2, 4, 1};
    X(g, "x", 3, D(3, 4, 5));
    W(g, "w", 3, D(2, 24, 5));
    W(g, "r", 3, D(2, 24, 8));
    W(g, "b", 2, D(2, 48));
    seq_lens(g, "len", 3, len);
    X(g, "h0", 3, D(3, 2, 8));
    int32_t n = N(g, "GRU", I("x", "w", "r", "b", "len", "h0"), I("y", "yh"));
    cp_node_set_string(g, n, "direction", "bidirectional");
    cp_node_set_int(g, n, "linear_before_reset", 1);
    cp_node_set_int(g, n, "layout", 1);
}
static void c_rnn_bidir_clip_lens(struct cp_graph *g)
{
    static const int32_t len[3] = {5, 0, 3};
    X(g, "x", 3, D(5, 3, 6));
    W(g, "w", 3, D(2, 9, 6));
    W(g, "r", 3, D(2, 9, 9));
    W(g, "b", 2, D(2, 18));
    seq_lens(g, "len", 3, len);
    X(g, "h0", 3, D(2, 3, 9));
    int32_t n = N(g, "RNN", I("x", "w", "r", "b", "len", "h0"), I("y", "yh"));
    cp_node_set_string(g, n, "direction", "bidirectional");
    cp_node_set_float(g, n, "clip", 0.9f);
}
/* Batch 1 with R big enough that the threads share each step's dot
 * products. */
static void c_lstm_batch1_wide(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 1, 16));
    W(g, "w", 3, D(2, 256, 16));
    W(g, "r", 3, D(2, 256, 64));
    W(g, "b", 2, D(2, 512));
    int32_t n = N(g, "LSTM", I("x", "w", "r", "b"), I("y", "yh", "yc"));
    cp_node_set_string(g, n, "direction", "bidirectional");
}
static void c_gru_batch1_wide(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 1, 16));
    W(g, "w", 3, D(1, 240, 16));
    W(g, "r", 3, D(1, 240, 80));
    int32_t n = N(g, "GRU", I("x", "w", "r"), I("y", "yh"));
    cp_node_set_int(g, n, "hidden_size", 80);
}
/* ---- end [rnn] ---- */
/* ---- [elementwise] ---- */
UNARY_CASE(c_hard_swish, "HardSwish", 4, D(1, 16, 33, 32))
UNARY_CASE(c_elu, "Elu", 2, D(3, 1000))
UNARY_CASE(c_softplus, "Softplus", 2, D(3, 1000))
UNARY_CASE(c_mish, "Mish", 4, D(1, 8, 64, 65))
UNARY_CASE(c_neg, "Neg", 2, D(3, 1001))
UNARY_CASE(c_reciprocal, "Reciprocal", 2, D(3, 1000))
UNARY_CASE(c_abs, "Abs", 2, D(3, 1000))
UNARY_CASE(c_floor, "Floor", 2, D(3, 1000))
UNARY_CASE(c_ceil, "Ceil", 2, D(3, 1000))
UNARY_CASE(c_log, "Log", 2, D(3, 1000))
UNARY_CASE(c_sin, "Sin", 2, D(3, 1000))
UNARY_CASE(c_cos, "Cos", 3, D(1, 77, 640))
static void c_hard_sigmoid(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 300));
    int32_t n = N(g, "HardSigmoid", I("x"), I("y"));
    cp_node_set_float(g, n, "alpha", 1.0f / 6.0f);
}
static void c_elu_alpha(struct cp_graph *g)
{
    X(g, "x", 1, D(1000));
    int32_t n = N(g, "Elu", I("x"), I("y"));
    cp_node_set_float(g, n, "alpha", 0.5f);
}
static void c_prelu_channel(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 20, 20));
    W(g, "slope", 3, D(16, 1, 1));
    N(g, "PRelu", I("x", "slope"), I("y"));
}
BINARY_CASE(c_prelu_scalar, "PRelu", 3, D(2, 8, 50), 1, D(1))
BINARY_CASE(c_prelu_last, "PRelu", 3, D(2, 8, 50), 1, D(50))
BINARY_CASE(c_max2_bcast, "Max", 3, D(2, 8, 50), 1, D(50))
BINARY_CASE(c_max2_long, "Max", 1, D(100000), 1, D(100000))
BINARY_CASE(c_min2_scalar, "Min", 3, D(2, 8, 50), 0, NULL)
BINARY_CASE(c_greater_bcast, "Greater", 3, D(2, 8, 50), 3, D(2, 1, 50))
BINARY_CASE(c_less_scalar, "Less", 2, D(7, 300), 0, NULL)
BINARY_CASE(c_ge_same, "GreaterOrEqual", 2, D(7, 300), 2, D(7, 300))
BINARY_CASE(c_le_first, "LessOrEqual", 1, D(1), 2, D(7, 300))
/* ---- end [elementwise] ---- */
/* ---- [nn] ---- */
static void c_lrn5(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 13, 5, 6));
    int32_t n = N(g, "LRN", I("x"), I("y"));
    cp_node_set_int(g, n, "size", 5);
    cp_node_set_float(g, n, "alpha", 0.02f);
    cp_node_set_float(g, n, "beta", 0.7f);
    cp_node_set_float(g, n, "bias", 1.5f);
}
static void c_lrn_nhwc(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 7, 7));
    int32_t n = N(g, "LRN", I("x"), I("y"));
    cp_node_set_int(g, n, "size", 3);
    L(g, "x", CP_LAYOUT_NHWC);
    L(g, "y", CP_LAYOUT_NHWC);
}
static void c_d2s_dcr(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 12, 3, 5));
    int32_t n = N(g, "DepthToSpace", I("x"), I("y"));
    cp_node_set_int(g, n, "blocksize", 2);
}
static void c_d2s_crd(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 18, 4, 3));
    int32_t n = N(g, "DepthToSpace", I("x"), I("y"));
    cp_node_set_int(g, n, "blocksize", 3);
    cp_node_set_string(g, n, "mode", "CRD");
}
static void c_s2d(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 3, 6, 4));
    int32_t n = N(g, "SpaceToDepth", I("x"), I("y"));
    cp_node_set_int(g, n, "blocksize", 2);
}
static void c_roi_align(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 5, 9, 11));
    const float rois[] = {0.5f, 1, 7, 6.5f, -2, -1, 12, 10, 3, 3, 3.5f, 3.2f, 1, 2, 9.5f, 8};
    const int64_t bi[] = {0, 1, 1, 0};
    gb_init(g, "r", CP_DTYPE_F32, 2, D(4, 4), rois);
    gb_init(g, "b", CP_DTYPE_I64, 1, D(4), bi);
    int32_t n = N(g, "RoiAlign", I("x", "r", "b"), I("y"));
    cp_node_set_int(g, n, "output_height", 3);
    cp_node_set_int(g, n, "output_width", 2);
    cp_node_set_float(g, n, "spatial_scale", 0.9f);
}
static void c_roi_align_ratio(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 3, 8, 8));
    const float rois[] = {0, 0, 7, 7, 2.5f, 1, 5, 6};
    const int64_t bi[] = {0, 0};
    gb_init(g, "r", CP_DTYPE_F32, 2, D(2, 4), rois);
    gb_init(g, "b", CP_DTYPE_I64, 1, D(2), bi);
    int32_t n = N(g, "RoiAlign", I("x", "r", "b"), I("y"));
    cp_node_set_int(g, n, "output_height", 2);
    cp_node_set_int(g, n, "output_width", 2);
    cp_node_set_int(g, n, "sampling_ratio", 2);
    cp_node_set_string(g, n, "coordinate_transformation_mode", "output_half_pixel");
}
static void gs_case(struct cp_graph *g, const char *mode, const char *pad, int64_t align)
{
    X(g, "x", 4, D(2, 5, 6, 7));
    int64_t gd[] = {2, 4, 9, 2};
    float grid[2 * 4 * 9 * 2];
    for (int i = 0; i < 2 * 4 * 9 * 2; i++)
        grid[i] = -1.3f + 2.6f * (float)((i * 37) % 71) / 70.0f;
    gb_init(g, "gr", CP_DTYPE_F32, 4, gd, grid);
    int32_t n = N(g, "GridSample", I("x", "gr"), I("y"));
    cp_node_set_string(g, n, "mode", mode);
    cp_node_set_string(g, n, "padding_mode", pad);
    cp_node_set_int(g, n, "align_corners", align);
}
static void c_gs_bilinear_zeros(struct cp_graph *g)
{
    gs_case(g, "bilinear", "zeros", 0);
}
static void c_gs_bilinear_border_ac(struct cp_graph *g)
{
    gs_case(g, "bilinear", "border", 1);
}
static void c_gs_bilinear_reflection(struct cp_graph *g)
{
    gs_case(g, "bilinear", "reflection", 0);
}
static void c_gs_nearest_reflection_ac(struct cp_graph *g)
{
    gs_case(g, "nearest", "reflection", 1);
}
/* ---- end [nn] ---- */
/* ---- [quant] ---- */
/* Integer convolutions and matmuls: s8 weights of 7 bits (oneDNN's int8
 * kernels are exact without VNNI only then) and of 8 bits (they need VNNI:
 * not available on AVX2 hosts), per-tensor and per-channel scales, zero
 * points. Graph inputs are u8 (the fill's 0..127 pattern). */
static void QI8(struct cp_graph *g, const char *name, int rank, const int64_t *dims, int bits)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    int8_t *v = malloc((size_t)(n ? n : 1));
    cr_assert_not_null(v);
    uint64_t s = name_seed(name) | 1;
    int range = bits == 7 ? 64 : 127;
    for (int64_t i = 0; i < n; i++)
        v[i] = (int8_t)((int)(rng_next(&s) % (uint64_t)(2 * range + 1)) - range);
    gb_init(g, name, CP_DTYPE_I8, rank, dims, v);
    free(v);
}

static void qparams(struct cp_graph *g, int64_t channels)
{
    F(g, "xs", 0.02f);
    uint8_t xz = 7, yz = 100;
    gb_init(g, "xz", CP_DTYPE_U8, 0, NULL, &xz);
    float ws[64];
    int8_t wz[64] = {0};
    for (int64_t i = 0; i < channels; i++)
        ws[i] = 0.01f + 0.001f * (float)i;
    gb_init(g, "ws", CP_DTYPE_F32, 1, &channels, ws);
    gb_init(g, "wz", CP_DTYPE_I8, 1, &channels, wz);
    F(g, "ys", 0.37f);
    gb_init(g, "yz", CP_DTYPE_U8, 0, NULL, &yz);
}

static void qconv(struct cp_graph *g, int bits)
{
    gb_input(g, "x", CP_DTYPE_U8, 4, D(1, 16, 10, 10));
    QI8(g, "w", 4, D(24, 16, 3, 3), bits);
    qparams(g, 24);
    int32_t b[24];
    for (int i = 0; i < 24; i++)
        b[i] = i * 37 - 400;
    gb_init(g, "b", CP_DTYPE_I32, 1, D(24), b);
    int32_t n = N(g, "QLinearConv", I("x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    INTS(g, n, "strides", 1, 2);
}
static void c_qlinear_conv_7bit(struct cp_graph *g)
{
    qconv(g, 7);
}
static void c_qlinear_conv_8bit(struct cp_graph *g)
{
    qconv(g, 8);
}
static void c_conv_integer_group_7bit(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_U8, 4, D(1, 8, 9, 9));
    QI8(g, "w", 4, D(8, 4, 3, 3), 7);
    uint8_t xz = 3;
    gb_init(g, "xz", CP_DTYPE_U8, 0, NULL, &xz);
    int32_t n = N(g, "ConvInteger", I("x", "w", "xz"), I("y"));
    cp_node_set_int(g, n, "group", 2);
    INTS(g, n, "pads", 1, 0, 1, 2);
}
static void c_qlinear_matmul_7bit(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_U8, 3, D(2, 5, 32));
    QI8(g, "w", 2, D(32, 24), 7);
    qparams(g, 24);
    N(g, "QLinearMatMul", I("x", "xs", "xz", "w", "ws", "wz", "ys", "yz"), I("y"));
}
static void c_matmul_integer_7bit(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_U8, 2, D(6, 40));
    QI8(g, "w", 2, D(40, 16), 7);
    uint8_t xz = 128;
    gb_init(g, "xz", CP_DTYPE_U8, 0, NULL, &xz);
    N(g, "MatMulInteger", I("x", "w", "xz"), I("y"));
}
static void c_quantize_per_tensor_u8(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 33, 17));
    F(g, "s", 0.013f);
    uint8_t z = 128;
    gb_init(g, "z", CP_DTYPE_U8, 0, NULL, &z);
    N(g, "QuantizeLinear", I("x", "s", "z"), I("y"));
}
static void c_quantize_per_axis_i8(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 6, 50));
    float s[6] = {0.01f, 0.02f, 0.05f, 0.1f, 0.003f, 1.0f};
    int8_t z[6] = {0, 3, -7, 100, -128, 1};
    gb_init(g, "s", CP_DTYPE_F32, 1, D(6), s);
    gb_init(g, "z", CP_DTYPE_I8, 1, D(6), z);
    N(g, "QuantizeLinear", I("x", "s", "z"), I("y"));
}
static void c_dequantize_per_axis_u8(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_U8, 2, D(37, 5));
    float s[5] = {0.01f, 0.02f, 0.05f, 0.1f, 3.0f};
    uint8_t z[5] = {0, 3, 7, 100, 255};
    gb_init(g, "s", CP_DTYPE_F32, 1, D(5), s);
    gb_init(g, "z", CP_DTYPE_U8, 1, D(5), z);
    int32_t n = N(g, "DequantizeLinear", I("x", "s", "z"), I("y"));
    cp_node_set_int(g, n, "axis", -1);
}
static void c_dequantize_per_tensor_i8(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_I8, 1, D(300000));
    F(g, "s", 0.25f);
    N(g, "DequantizeLinear", I("x", "s"), I("y"));
}
/* ---- end [quant] ---- */

struct hcase {
    const char *name;
    void (*build)(struct cp_graph *g);
    int mode; /* how graph inputs are drawn */
    int64_t opset;
};

#define C(fn)                                                                                      \
    {                                                                                              \
#fn, fn, IN_NORMAL, 17                                                                     \
    }
#define CM(fn, m)                                                                                  \
    {                                                                                              \
#fn, fn, m, 17                                                                             \
    }
#define CO(fn, opset)                                                                              \
    {                                                                                              \
#fn, fn, IN_NORMAL, opset                                                                  \
    }

#include "runner/harness_reduce_index.h" /* the reduce_index family's cases */

static const struct hcase cases[] = {
    C(c_conv_3x3_bias),
    C(c_conv_stride2_asym),
    C(c_conv_group_dil),
    C(c_conv_same_upper),
    C(c_conv_1d),
    C(c_conv_runtime_weights),
    C(c_conv_stem),
    C(c_conv_1x1),
    C(c_deconv_s2),
    C(c_deconv_group),
    C(c_mm_attention),
    C(c_mm_const_b),
    C(c_mm_bcast),
    C(c_mm_bcast_a),
    C(c_mm_vec_mat),
    C(c_mm_mat_vec),
    C(c_mm_pv),
    C(c_mm_pv_shared_b),
    C(c_mm_pv_odd),
    C(c_gemm_linear),
    C(c_gemm_alpha_beta),
    C(c_gemm_col_c),
    C(c_gemm_no_c),
    C(c_maxpool_stem),
    C(c_maxpool_ceil),
    C(c_avgpool_excl),
    C(c_avgpool_incl),
    C(c_gap),
    CM(c_softmax_last, IN_WIDE),
    CM(c_softmax_ragged, IN_WIDE),
    C(c_softmax_axis1),
    CO(c_softmax_axis1, 11),
    C(c_softmax_wide),
    C(c_layernorm),
    C(c_layernorm_axis),
    CM(c_layernorm_wide, IN_WIDE),
    C(c_batchnorm),
    C(c_batchnorm_2d),
    C(c_instnorm_group),
    C(c_instnorm_4d),
    C(c_instnorm_3d_runtime),
    C(c_instnorm_4d_large),
    C(c_add_same),
    C(c_mul_scalar),
    C(c_mul_channel),
    C(c_add_bias),
    C(c_sub_outer),
    CM(c_div_abcast, IN_POSITIVE),
    C(c_add_time),
    CM(c_div_row, IN_POSITIVE),
    C(c_add_small),
    C(c_add_short_rows),
    C(c_sub_bcast_a_rows),
    C(c_mul_nhwc_channel),
    C(c_add_channel_first),
    C(c_mul_scalar_first),
    C(c_sub_channel_first),
    C(c_sub_channel),
    CM(c_div_scalar, IN_POSITIVE),
    C(c_add_scalars),
    C(c_where),
    C(c_relu),
    CM(c_sigmoid, IN_WIDE),
    CM(c_exp, IN_WIDE),
    CM(c_sqrt, IN_POSITIVE),
    CM(c_erf, IN_WIDE),
    C(c_erf_small),
    CM(c_tanh, IN_WIDE),
    C(c_leaky),
    C(c_clip_both),
    C(c_clip_min),
    C(c_pow2),
    C(c_pow3),
    CM(c_pow_half, IN_POSITIVE),
    CM(c_pow_general, IN_POSITIVE),
    C(c_rmean_last),
    C(c_rmean_hw),
    C(c_rmean_channel),
    C(c_rsum_input_axes),
    C(c_rsum_all),
    C(c_rmax_first),
    C(c_transpose_heads),
    C(c_transpose_kt),
    C(c_transpose_default),
    C(c_transpose_i64),
    C(c_transpose_to_nhwc),
    C(c_transpose_to_nchw_edges),
    C(c_transpose_2d),
    C(c_concat),
    C(c_concat_last),
    C(c_split),
    C(c_slice_step),
    C(c_slice_simple),
    C(c_gather0),
    C(c_gather1),
    C(c_resize_2x),
    C(c_resize_2x_threads),
    C(c_resize_sizes),
    /* fused ops */
    C(c_fconv_relu_res_after),
    C(c_fconv_res_first_silu),
    C(c_fconv_clip),
    C(c_fconv_leaky_group),
    C(c_fconv_gelu),
    C(c_fconv_sigmoid_tanh_gelu),
    C(c_fconv_sigmoid),
    C(c_fmm_linear_gelu),
    C(c_fmm_bias_residual),
    C(c_fmm_gemm_transb_alpha),
    C(c_fmm_transa_runtime_b),
    C(c_gn_silu),
    C(c_gn_plain),
    CM(c_gelu_erf, IN_WIDE),
    C(c_gelu_tanh),
    /* layouts */
    C(c_td_nchw_nhwc),
    C(c_td_nhwc_nchw),
    C(c_td_nchw_16c),
    C(c_td_16c_nhwc),
    C(c_td_8c_nchw),
    C(c_td_16c_8c),
    C(c_conv_nhwc),
    C(c_conv_nchw_to_16c),
    C(c_conv_16c_to_8c),
    C(c_maxpool_nhwc),
    C(c_avgpool_16c),
    C(c_gap_8c),
    /* ---- [elementwise] ---- */
    C(c_hard_swish),
    C(c_hard_sigmoid),
    CM(c_elu, IN_WIDE),
    C(c_elu_alpha),
    CM(c_softplus, IN_WIDE),
    CM(c_mish, IN_WIDE),
    C(c_neg),
    CM(c_reciprocal, IN_POSITIVE),
    C(c_abs),
    CM(c_floor, IN_WIDE),
    CM(c_ceil, IN_WIDE),
    CM(c_log, IN_POSITIVE),
    CM(c_sin, IN_WIDE),
    CM(c_cos, IN_WIDE),
    C(c_prelu_channel),
    C(c_prelu_scalar),
    C(c_prelu_last),
    C(c_max2_bcast),
    C(c_max2_long),
    C(c_min2_scalar),
    C(c_greater_bcast),
    C(c_less_scalar),
    C(c_ge_same),
    C(c_le_first),
    /* ---- end [elementwise] ---- */
    /* ---- [quant] ---- */
    CO(c_qlinear_conv_7bit, 13),
    CO(c_qlinear_conv_8bit, 13),
    CO(c_conv_integer_group_7bit, 13),
    CO(c_qlinear_matmul_7bit, 13),
    CO(c_matmul_integer_7bit, 13),
    CO(c_quantize_per_tensor_u8, 13),
    CO(c_quantize_per_axis_i8, 13),
    {"c_quantize_wide", c_quantize_per_axis_i8, IN_WIDE, 13},
    CO(c_dequantize_per_axis_u8, 13),
    CO(c_dequantize_per_tensor_i8, 13),
    /* ---- end [quant] ---- */
    /* attention */
    C(c_attn_bhnd_kt),
    C(c_attn_bnhd_mask),
    C(c_attn_d40_exact),
    /* recurrent ([rnn]) */
    C(c_lstm_plain),
    C(c_lstm_bidir_full),
    C(c_lstm_batch_first_reverse_coupled),
    C(c_gru_plain),
    C(c_gru_bidir_lbr_lens),
    C(c_rnn_bidir_clip_lens),
    C(c_lstm_batch1_wide),
    C(c_gru_batch1_wide),
    REDUCE_INDEX_CASES,
    /* [nn] */
    C(c_lrn5),
    C(c_lrn_nhwc),
    C(c_d2s_dcr),
    C(c_d2s_crd),
    C(c_s2d),
    C(c_roi_align),
    C(c_roi_align_ratio),
    CO(c_gs_bilinear_zeros, 16),
    CO(c_gs_bilinear_border_ac, 16),
    CO(c_gs_bilinear_reflection, 16),
    CO(c_gs_nearest_reflection_ac, 16),
};

/* ---- running one kernel --------------------------------------------------------- */

struct env {
    struct cp_kernel_env kenv;
};

static void env_init(struct env *e)
{
    cr_assert_eq(dnnl_engine_create(&e->kenv.engine, dnnl_cpu, 0), dnnl_success);
    cr_assert_eq(dnnl_stream_create(&e->kenv.stream, e->kenv.engine, dnnl_stream_default_flags),
                 dnnl_success);
    e->kenv.threads = THREADS;
    omp_set_num_threads(THREADS);
}

static void env_release(struct env *e)
{
    dnnl_stream_destroy(e->kenv.stream);
    dnnl_engine_destroy(e->kenv.engine);
}

static size_t tensor_bytes(const struct cp_tensor *t)
{
    return (size_t)cp_shape_numel(&t->shape) * cp_dtype_size(t->dtype);
}

/* Run `k` on node `n` twice (the second run must give the same bytes: run
 * keeps no state). OUT: outs[i] (malloc'ed, caller frees). False with a
 * message when a step fails. */
static bool run_kernel(const struct cp_kernel *k, const struct cp_graph *g, const struct cp_node *n,
                       const struct env *e, void **in_data, void **outs, char *msg, size_t msz)
{
    const struct cp_tensor *ins[16] = {NULL}, *os[16] = {NULL};
    void *od[16] = {NULL};
    for (size_t i = 0; i < n->n_inputs; i++)
        ins[i] = n->inputs[i] >= 0 ? cp_graph_tensor(g, n->inputs[i]) : NULL;
    for (size_t i = 0; i < n->n_outputs; i++) {
        os[i] = n->outputs[i] >= 0 ? cp_graph_tensor(g, n->outputs[i]) : NULL;
        outs[i] = NULL;
        if (!os[i])
            continue;
        size_t nb = tensor_bytes(os[i]);
        od[i] = outs[i] = malloc(nb ? nb : 1);
        memset(od[i], 0xA5, nb); /* poison: unwritten cells show up */
    }
    struct cp_kexec x = {.kernel = k,
                         .g = g,
                         .node = n,
                         .env = &e->kenv,
                         .in = ins,
                         .out = os,
                         .in_data = in_data,
                         .out_data = od};
    struct cp_diag d;
    cp_diag_init(&d);
    if (k->prepare && k->prepare(&x, &d) != CP_OK) {
        snprintf(msg, msz, "%s: prepare failed: %.900s", k->name, d.msg);
        if (k->release)
            k->release(&x);
        return false;
    }
    void *scratch = NULL;
    if (x.scratch_bytes) {
        cr_assert_eq(posix_memalign(&scratch, 64, x.scratch_bytes), 0);
        x.scratch = scratch;
    }
    bool ok = k->run(&x) == CP_OK;
    void *first = NULL;
    size_t nb0 = os[0] ? tensor_bytes(os[0]) : 0;
    if (ok && nb0) {
        first = malloc(nb0);
        memcpy(first, od[0], nb0);
        ok = k->run(&x) == CP_OK;
        if (ok && memcmp(first, od[0], nb0) != 0) {
            snprintf(msg, msz, "%s: a second run gave different bytes", k->name);
            ok = false;
        }
    } else if (!ok) {
        snprintf(msg, msz, "%s: run failed", k->name);
    }
    free(first);
    if (k->release)
        k->release(&x);
    free(scratch);
    return ok;
}

/* Compare one output; false with a message naming the worst element. */
static bool compare(const struct cp_tensor *t, const void *fast, const void *ref, char *msg,
                    size_t msz)
{
    int64_t n = cp_shape_numel(&t->shape);
    if (t->dtype != CP_DTYPE_F32) {
        if (memcmp(fast, ref, tensor_bytes(t)) != 0) {
            snprintf(msg, msz, "%s output differs (exact compare)", cp_dtype_name(t->dtype));
            return false;
        }
        return true;
    }
    const float *a = fast, *b = ref;
    double maxref = 0.0, max_abs = 0.0, max_rel = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(b[i]) && fabs(b[i]) > maxref)
            maxref = fabs(b[i]);
    int64_t worst = -1;
    double worst_excess = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i]) || (isinf(b[i]) && a[i] != b[i])) {
            snprintf(msg, msz, "element %lld: fast %g, ref %g", (long long)i, a[i], b[i]);
            return false;
        }
        if (!isfinite(b[i]))
            continue;
        double err = fabs((double)a[i] - (double)b[i]);
        double tol = RTOL * fabs(b[i]) + ATOL * maxref;
        if (err > max_abs)
            max_abs = err;
        if (b[i] != 0.0f && err / fabs(b[i]) > max_rel)
            max_rel = err / fabs(b[i]);
        if (err > tol && err - tol > worst_excess) {
            worst_excess = err - tol;
            worst = i;
        }
    }
    if (worst >= 0) {
        snprintf(msg, msz, "max abs err %.3g, max rel err %.3g; worst at %lld: fast %.9g ref %.9g",
                 max_abs, max_rel, (long long)worst, a[worst], b[worst]);
        return false;
    }
    snprintf(msg, msz, "max abs err %.3g (max |ref| %.3g), max rel err %.3g", max_abs, maxref,
             max_rel);
    return true;
}

/* ---- the tests ------------------------------------------------------------------ */

Test(kernel_harness, every_fast_kernel_matches_the_reference)
{
    struct env e;
    env_init(&e);
    size_t nk = 0;
    while (cp_fast_kernels[nk])
        nk++;
    bool *used = calloc(nk, sizeof *used);
    /* accepted cases, but needs features this host lacks (what it lacks) */
    char(*unavailable)[96] = calloc(nk, sizeof *unavailable);
    cr_assert(used && unavailable);
    struct cp_host host;
    cp_host_detect(&host);
    int failures = 0, checks = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct hcase *hc = &cases[c];
        struct cp_graph *g = gb_graph(hc->opset);
        hc->build(g);
        gb_infer_ok(g);
        struct cp_node *n = cp_graph_node(g, 0);
        const struct cp_kernel *ref = cp_kernel_reference(n->op);
        cr_assert_not_null(ref, "%s: no reference kernel for %s", hc->name, cp_op_name(n->op));
        void *in_data[16] = {NULL};
        void *owned[16] = {NULL};
        for (size_t i = 0; i < n->n_inputs; i++) {
            if (n->inputs[i] < 0)
                continue;
            struct cp_tensor *t = cp_graph_tensor(g, n->inputs[i]);
            if (t->kind == CP_TENSOR_INITIALIZER) {
                in_data[i] = (void *)t->data;
                continue;
            }
            size_t nb = tensor_bytes(t);
            owned[i] = in_data[i] = malloc(nb ? nb : 1);
            fill(in_data[i], t->dtype, cp_shape_numel(&t->shape), c * 31 + i, hc->mode);
        }
        void *ref_out[16] = {NULL};
        char msg[1024] = "";
        if (!run_kernel(ref, g, n, &e, in_data, ref_out, msg, sizeof msg)) {
            cr_log_error("%s: reference: %s", hc->name, msg);
            failures++;
        }
        int accepted = 0, not_here = 0;
        for (size_t ki = 0; ki < nk && ref_out[0]; ki++) {
            const struct cp_kernel *k = cp_fast_kernels[ki];
            if (k->op != n->op || (k->supports && !k->supports(g, n)))
                continue;
            char missing[96];
            if (!cp_kernel_runs_on(k, g, n, &host, missing, sizeof missing)) {
                cr_log_info("%s (%s): not run, this CPU lacks %s", hc->name, k->name, missing);
                snprintf(unavailable[ki], sizeof unavailable[ki], "%s", missing);
                not_here++;
                continue;
            }
            accepted++;
            used[ki] = true;
            checks++;
            void *outs[16] = {NULL};
            bool ok = run_kernel(k, g, n, &e, in_data, outs, msg, sizeof msg);
            for (size_t o = 0; ok && o < n->n_outputs; o++)
                if (outs[o])
                    ok = compare(cp_graph_tensor(g, n->outputs[o]), outs[o], ref_out[o], msg,
                                 sizeof msg);
            if (!ok) {
                cr_log_error("%s (%s): %s", hc->name, k->name, msg);
                failures++;
            } else {
                cr_log_info("%s (%s): %s", hc->name, k->name, msg);
            }
            for (size_t o = 0; o < n->n_outputs; o++)
                free(outs[o]);
        }
        if (accepted == 0 && not_here == 0) {
            cr_log_error("%s: no fast kernel accepts this %s node", hc->name, cp_op_name(n->op));
            failures++;
        }
        for (size_t o = 0; o < 16; o++)
            free(ref_out[o]);
        for (size_t i = 0; i < 16; i++)
            free(owned[i]);
        cp_graph_free(g);
    }
    for (size_t ki = 0; ki < nk; ki++) {
        const struct cp_kernel *k = cp_fast_kernels[ki];
        if (used[ki])
            continue;
        if (unavailable[ki][0]) {
            cr_log_info("fast kernel %s (%s) is not available on this host (%s lacks %s): "
                        "its cases were not run here",
                        k->name, cp_op_name(k->op), host.cpu_model, unavailable[ki]);
            continue;
        }
        cr_log_error("fast kernel %s (%s) is not exercised by any case", k->name,
                     cp_op_name(k->op));
        failures++;
    }
    free(used);
    free(unavailable);
    env_release(&e);
    cr_log_info("kernel harness: %d checks, %d failures", checks, failures);
    cr_assert_eq(failures, 0, "%d kernel check(s) failed (see the log above)", failures);
}

/* The predicates turn away what the kernels cannot do, so those nodes fall
 * back to the reference kernel rather than fail at plan time. */
Test(kernel_harness, fast_kernels_decline_what_they_cannot_do)
{
    struct cp_host host;
    cp_host_detect(&host);
    struct cp_graph *g = gb_graph(17);
    X(g, "x", 4, D(1, 3, 8, 8));
    int32_t n = N(g, "MaxPool", I("x"), I("y", "idx"));
    INTS(g, n, "kernel_shape", 2, 2);
    gb_infer_ok(g);
    const struct cp_node *node = cp_graph_node(g, n);
    cr_assert_eq(cp_kernel_select(g, node, &host, false, NULL), cp_kernel_reference(CP_OP_MAX_POOL),
                 "MaxPool with an Indices output must go to the reference kernel");
    cp_graph_free(g);

    g = gb_graph(17);
    X(g, "x", 3, D(2, 3, 4));
    n = N(g, "ReduceMean", I("x"), I("y"));
    INTS(g, n, "axes", 0, 2);
    gb_infer_ok(g);
    node = cp_graph_node(g, n);
    cr_assert_eq(cp_kernel_select(g, node, &host, false, NULL),
                 cp_kernel_reference(CP_OP_REDUCE_MEAN),
                 "a reduction over two separate blocks must go to the reference kernel");
    cp_graph_free(g);
}

/* Which nodes the second-choice kernels take: the harness above checks what
 * they compute but would not notice one that declines too much, since the
 * C kernels accept every case first. */
struct accept_case {
    const char *name;
    void (*build)(struct cp_graph *g);
    const struct cp_kernel *kernel;
    bool accepts;
};

#define ACC(fn, k, yes)                                                                            \
    {                                                                                              \
#fn, fn, &k, yes                                                                           \
    }

static const struct accept_case accept_cases[] = {
    ACC(c_add_same, cp_dnnl_add, true),
    ACC(c_mul_scalar, cp_dnnl_mul, true),
    ACC(c_mul_channel, cp_dnnl_mul, true),
    ACC(c_add_time, cp_dnnl_add, true),
    ACC(c_add_bias, cp_dnnl_add, true),
    ACC(c_div_row, cp_dnnl_div, true),
    ACC(c_div_scalar, cp_dnnl_div, true),
    ACC(c_sub_channel, cp_dnnl_sub, true),
    ACC(c_add_scalars, cp_dnnl_add, true),
    ACC(c_add_channel_first, cp_dnnl_add, true),
    ACC(c_mul_scalar_first, cp_dnnl_mul, true),
    ACC(c_sub_channel_first, cp_dnnl_sub, false),
    ACC(c_sub_bcast_a_rows, cp_dnnl_sub, false),
    ACC(c_div_abcast, cp_dnnl_div, false),
    ACC(c_sub_outer, cp_dnnl_sub, false),
    ACC(c_instnorm_group, cp_dnnl_instance_norm, true),
    ACC(c_instnorm_4d, cp_dnnl_instance_norm, true),
    ACC(c_instnorm_3d_runtime, cp_dnnl_instance_norm, true),
};

Test(kernel_harness, onednn_second_choices_accept_what_onednn_can_broadcast)
{
    for (size_t c = 0; c < sizeof accept_cases / sizeof accept_cases[0]; c++) {
        const struct accept_case *ac = &accept_cases[c];
        struct cp_graph *g = gb_graph(17);
        ac->build(g);
        gb_infer_ok(g);
        const struct cp_node *n = cp_graph_node(g, 0);
        cr_expect_eq(n->op, ac->kernel->op, "%s: the case is not a %s node", ac->name,
                     cp_op_name(ac->kernel->op));
        cr_expect_eq(ac->kernel->supports(g, n), ac->accepts, "%s: %s should %s it", ac->name,
                     ac->kernel->name, ac->accepts ? "accept" : "decline");
        cp_graph_free(g);
    }
}
