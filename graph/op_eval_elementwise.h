/*
 * graph/op_eval_elementwise: what the elementwise family's ops compute
 * (the unary math ops, the activations, comparisons and logic, Mod and the
 * bitwise ops, the variadic Max/Min/Sum/Mean, and the random generators),
 * written once for the reference kernels and the constant folder, as
 * op_eval.h is for the older ops.
 *
 * The definitions:
 *  - float dtypes (f32 f16 bf16 f64) load as double, compute in double
 *    with libm and store rounding to the output dtype (bf16 truncates, as
 *    cp_eval_store_f64 does);
 *  - signed integers compute in int64 and wrap into the output dtype; u64
 *    compares, divides and shifts as unsigned;
 *  - Round is round-half-to-even; Sign of NaN is NaN; Max and Min let NaN
 *    win (numpy's maximum); Mean is the sum in input order divided by the
 *    input count;
 *  - Mod with fmod 0 takes the sign of the divisor (Python's %), with
 *    fmod 1 the sign of the dividend (C's fmod); an integer zero divisor
 *    gives 0 instead of a trap;
 *  - BitShift shifts unsigned integers; a shift by the bit width or more
 *    gives 0;
 *  - the random generators draw from splitmix64 (Steele, Lea and Flood,
 *    2014) seeded with the bits of the `seed` attribute as a double, or
 *    with CP_EW_DEFAULT_SEED when there is none, so every run gives the
 *    same numbers. Uniform numbers take the top 53 bits of a draw
 *    ([0, 1)); normal ones use Box-Muller on two uniform draws. Bernoulli
 *    is uniform < p; Multinomial samples the softmax of each row by
 *    inverting its cumulative sum with one uniform draw per sample.
 *
 * Per-tensor functions check nothing their caller's `supports` already
 * did (cp_ew_*_ok below); none allocates.
 */
#ifndef CP_GRAPH_OP_EVAL_ELEMENTWISE_H
#define CP_GRAPH_OP_EVAL_ELEMENTWISE_H

#include "graph/graph.h"

#include <stdbool.h>
#include <stdint.h>

/* The seed of a random generator without a `seed` attribute. */
#define CP_EW_DEFAULT_SEED 0x63616e6e70726f66ULL /* "cannprof" */

/* The attributes an op of the family reads, with the op's defaults. */
struct cp_ew_params {
    double alpha, beta, gamma, lambd, bias;
    bool fmod;                   /* Mod */
    bool left;                   /* BitShift direction "LEFT" */
    bool detect_neg, detect_pos; /* IsInf */
};

/* The parameters of node n (of one of the family's ops). */
void cp_ew_params_of(const struct cp_node *n, struct cp_ew_params *p);

/* Which kind of the family's op: unary (one input, elementwise), binary
 * (two inputs with multidirectional broadcasting, including PRelu),
 * variadic (Max, Min, Sum, Mean) or random. */
bool cp_ew_is_unary(enum cp_op op);
bool cp_ew_is_binary(enum cp_op op);
bool cp_ew_is_variadic(enum cp_op op);
bool cp_ew_is_random(enum cp_op op);

/* Whether ONNX allows dtype x for the op, and the output dtype then
 * (CP_DTYPE_UNDEFINED when not allowed). For binary and variadic ops x is
 * the dtype every input shares (PRelu's slope too). */
enum cp_dtype cp_ew_out_dtype(enum cp_op op, enum cp_dtype x);

/* One element of a unary op on a double (floats). */
double cp_ew_unary_f64(enum cp_op op, const struct cp_ew_params *p, double x);

/* y = op(x) over n elements; x of dtype xt, y of cp_ew_out_dtype(op, xt). */
void cp_ew_unary(enum cp_op op, const struct cp_ew_params *p, enum cp_dtype xt, const void *x,
                 void *y, int64_t n);

/* y = a op b with numpy broadcasting (a, b broadcast to y's shape). */
void cp_ew_binary(enum cp_op op, const struct cp_ew_params *p, const struct cp_tensor *a,
                  const void *ad, const struct cp_tensor *b, const void *bd,
                  const struct cp_tensor *y, void *yd);

/* PRelu's slope as it broadcasts: before opset 7 a 1-D slope of x's
 * channel count (dim 1) is per channel, as Caffe's and PyTorch's; from 7
 * the slope broadcasts as numpy's. OUT: *out. */
void cp_ew_prelu_slope_shape(int64_t opset, const struct cp_shape *x, const struct cp_shape *slope,
                             struct cp_shape *out);

/* y = op(x[0], ..., x[n-1]) with numpy broadcasting; every x of y's dtype
 * (which cp_ew_out_dtype allows). n >= 1. */
void cp_ew_variadic(enum cp_op op, size_t n, const struct cp_tensor *const *x,
                    const void *const *xd, const struct cp_tensor *y, void *yd);

/* ---- random generators ----------------------------------------------------------- */

struct cp_ew_rng {
    uint64_t state;
};

/* The generator of node n: seeded from its `seed` attribute, or the
 * default seed. */
void cp_ew_rng_of(const struct cp_node *n, struct cp_ew_rng *r);
uint64_t cp_ew_rng_next(struct cp_ew_rng *r);
double cp_ew_rng_uniform(struct cp_ew_rng *r); /* [0, 1) */
double cp_ew_rng_normal(struct cp_ew_rng *r);  /* mean 0, deviation 1 */

/* RandomNormal(Like), RandomUniform(Like): count values of dtype dt (a
 * float dtype) into y, from the node's mean/scale or low/high. */
void cp_ew_random_fill(const struct cp_node *n, enum cp_dtype dt, int64_t count, void *y);

/* Bernoulli: y[i] = uniform < p[i] (1 or 0 in y's dtype, any numeric or
 * bool). */
void cp_ew_bernoulli(const struct cp_node *n, enum cp_dtype pt, const void *p, enum cp_dtype yt,
                     void *y, int64_t count);

/* Multinomial: x [batch, classes] unnormalized log-probabilities (a float
 * dtype), y [batch, samples] class indices (i32 or i64). */
void cp_ew_multinomial(const struct cp_node *n, enum cp_dtype xt, const void *x, int64_t batch,
                       int64_t classes, enum cp_dtype yt, void *y, int64_t samples);

#endif
