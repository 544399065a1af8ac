/* Shorthands shared by the reference kernel tests: literal arrays, one-node
 * graphs, and expectations written as value lists. */
#ifndef CP_TESTS_REF_TEST_UTIL_H
#define CP_TESTS_REF_TEST_UTIL_H

#include "runner/kernel_driver.h"

#include <stdint.h>

#define F32(...) ((const float[]){__VA_ARGS__})
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define I32(...) ((const int32_t[]){__VA_ARGS__})
#define U8(...)  ((const uint8_t[]){__VA_ARGS__})
#define NF(...)  ((int64_t)(sizeof(F32(__VA_ARGS__)) / sizeof(float)))
#define NI(...)  ((int64_t)(sizeof(I64(__VA_ARGS__)) / sizeof(int64_t)))

#define EXPECT_F32(r, i, tol, ...)    kd_expect_f32(r, i, NF(__VA_ARGS__), F32(__VA_ARGS__), tol)
#define EXPECT_INTS(r, i, dt, ...)    kd_expect_ints(r, i, dt, NI(__VA_ARGS__), I64(__VA_ARGS__))
#define EXPECT_SHAPE(r, i, rank, ...) kd_expect_shape(r, i, rank, GB_DIMS(__VA_ARGS__))

/* Tolerance for values computed by hand or by numpy / PyTorch to 6-7
 * significant digits. */
#define TOL 1e-5f

static inline int32_t f32_init(struct cp_graph *g, const char *name, int rank, const int64_t *dims,
                               const float *v)
{
    return gb_init(g, name, CP_DTYPE_F32, rank, dims, v);
}

static inline int32_t f32_scalar(struct cp_graph *g, const char *name, float v)
{
    return gb_init(g, name, CP_DTYPE_F32, 0, NULL, &v);
}

/* A node named "n" with output "Y". */
static inline int32_t op_node(struct cp_graph *g, const char *op, const char *const *ins)
{
    return gb_node(g, "n", op, ins, GB_IN("Y"));
}

#endif
