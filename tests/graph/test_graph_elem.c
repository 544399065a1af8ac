/* Element access shared by inference, the folder and the kernels:
 * cp_elem_count_nonzero, the test NonZero and Compress apply, on every
 * element width, with the float edges (-0 is zero, NaN is not) and a
 * position buffer shorter than the count. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "graph/graph.h"

Test(graph_elem, count_nonzero_treats_minus_zero_as_zero_and_nan_as_nonzero)
{
    const float f[6] = {0.0f, -0.0f, NAN, 1e-45f, -3.0f, 0.0f};
    int64_t pos[6] = {-1, -1, -1, -1, -1, -1};
    cr_assert_eq(cp_elem_count_nonzero(f, CP_DTYPE_F32, 6, pos, 6), 3);
    cr_assert_eq(pos[0], 2);
    cr_assert_eq(pos[1], 3, "a denormal is nonzero");
    cr_assert_eq(pos[2], 4);
    cr_assert_eq(pos[3], -1, "nothing written past the count");

    const double d[3] = {-0.0, 0.5, 0.0};
    cr_assert_eq(cp_elem_count_nonzero(d, CP_DTYPE_F64, 3, NULL, 0), 1);
    /* f16 and bf16 -0 are 0x8000 */
    const uint16_t h[4] = {0x8000u, 0x0000u, 0x3c00u, 0x7e00u};
    cr_assert_eq(cp_elem_count_nonzero(h, CP_DTYPE_F16, 4, NULL, 0), 2);
    cr_assert_eq(cp_elem_count_nonzero(h, CP_DTYPE_BF16, 4, NULL, 0), 2);
}

Test(graph_elem, count_nonzero_on_integers_and_bool_of_every_width)
{
    const int16_t s[4] = {0, INT16_MIN, 0, 1};
    cr_assert_eq(cp_elem_count_nonzero(s, CP_DTYPE_I16, 4, NULL, 0), 2,
                 "INT16_MIN is 0x8000: nonzero for an integer");
    const int64_t l[3] = {INT64_MIN, 0, -1};
    cr_assert_eq(cp_elem_count_nonzero(l, CP_DTYPE_I64, 3, NULL, 0), 2);
    const int32_t i[2] = {0, 0};
    cr_assert_eq(cp_elem_count_nonzero(i, CP_DTYPE_I32, 2, NULL, 0), 0);
    const uint8_t b[5] = {1, 0, 1, 1, 0};
    int64_t pos[2];
    cr_assert_eq(cp_elem_count_nonzero(b, CP_DTYPE_BOOL, 5, pos, 2), 3,
                 "the whole count, even past cap");
    cr_assert_eq(pos[0], 0);
    cr_assert_eq(pos[1], 2);
    cr_assert_eq(cp_elem_count_nonzero(b, CP_DTYPE_U8, 0, pos, 2), 0);
}
