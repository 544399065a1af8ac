/* Element access by dtype: reading and writing one element of a tensor's
 * bytes as double or int64, and the f16 / bf16 conversions. Shared by the
 * runtime's reference kernels, the constant folder and tensor I/O, which
 * must agree on what a conversion gives. */
#include "graph/graph.h"

#include <math.h>
#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float cp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) {
        float v = ldexpf((float)man, -24); /* zero or subnormal, exact */
        return sign ? -v : v;
    }
    if (exp == 31)
        return f32_from_bits(sign | 0x7f800000u | (man << 13));
    return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t cp_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10)
            return sign;
        uint32_t m = man | 0x800000u;
        int shift = 14 - e;
        uint32_t res = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (res & 1u)))
            res++;
        return (uint16_t)(sign | res);
    }
    uint32_t res = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (res & 1u)))
        res++; /* may carry into the exponent: that is the right rounding */
    return (uint16_t)(sign | res);
}

float cp_bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t cp_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

double cp_elem_load_f64(const void *data, enum cp_dtype dt, int64_t i)
{
    switch (dt) {
    case CP_DTYPE_F32:
        return ((const float *)data)[i];
    case CP_DTYPE_F16:
        return cp_f16_to_f32(((const uint16_t *)data)[i]);
    case CP_DTYPE_BF16:
        return cp_bf16_to_f32(((const uint16_t *)data)[i]);
    case CP_DTYPE_F64:
        return ((const double *)data)[i];
    case CP_DTYPE_I64:
        return (double)((const int64_t *)data)[i];
    case CP_DTYPE_U64:
        return (double)((const uint64_t *)data)[i];
    default:
        return (double)cp_elem_load_i64(data, dt, i);
    }
}

/* Truncate toward zero into [lo, hi]; NaN gives 0. */
static int64_t f64_to_i64_sat(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    if (v <= lo)
        return (int64_t)lo;
    if (v >= hi)
        return hi >= 0x1p63 ? INT64_MAX : (int64_t)hi;
    return (int64_t)v;
}

int64_t cp_elem_load_i64(const void *data, enum cp_dtype dt, int64_t i)
{
    switch (dt) {
    case CP_DTYPE_I64:
        return ((const int64_t *)data)[i];
    case CP_DTYPE_I32:
        return ((const int32_t *)data)[i];
    case CP_DTYPE_I8:
        return ((const int8_t *)data)[i];
    case CP_DTYPE_U8:
        return ((const uint8_t *)data)[i];
    case CP_DTYPE_BOOL:
        return ((const uint8_t *)data)[i] != 0;
    case CP_DTYPE_I16:
        return ((const int16_t *)data)[i];
    case CP_DTYPE_U16:
        return ((const uint16_t *)data)[i];
    case CP_DTYPE_U32:
        return ((const uint32_t *)data)[i];
    case CP_DTYPE_U64: /* the bit pattern: u64 values above INT64_MAX wrap */
        return (int64_t)((const uint64_t *)data)[i];
    case CP_DTYPE_F32:
    case CP_DTYPE_F16:
    case CP_DTYPE_BF16:
    case CP_DTYPE_F64:
        return f64_to_i64_sat(cp_elem_load_f64(data, dt, i), -0x1p63, 0x1p63);
    default:
        return 0;
    }
}

/* The nonzero test on an element's bits: every bit but a float's sign. */
#define NONZERO_SCAN(T, MASK)                                                                      \
    do {                                                                                           \
        const T *v = data;                                                                         \
        const T m = (T)(MASK);                                                                     \
        for (int64_t i = 0; i < n; i++)                                                            \
            if (v[i] & m) {                                                                        \
                if (count < cap)                                                                   \
                    pos[count] = i;                                                                \
                count++;                                                                           \
            }                                                                                      \
    } while (0)

int64_t cp_elem_count_nonzero(const void *data, enum cp_dtype dt, int64_t n, int64_t *pos,
                              int64_t cap)
{
    int64_t count = 0;
    bool fl = cp_dtype_is_float(dt);
    if (!pos)
        cap = 0;
    switch (cp_dtype_size(dt)) {
    case 1:
        NONZERO_SCAN(uint8_t, 0xffu);
        break;
    case 2:
        NONZERO_SCAN(uint16_t, fl ? 0x7fffu : 0xffffu);
        break;
    case 4:
        NONZERO_SCAN(uint32_t, fl ? 0x7fffffffu : 0xffffffffu);
        break;
    case 8:
        NONZERO_SCAN(uint64_t, fl ? 0x7fffffffffffffffull : ~0ull);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            if (fl ? cp_elem_load_f64(data, dt, i) != 0.0 : cp_elem_load_i64(data, dt, i) != 0) {
                if (count < cap)
                    pos[count] = i;
                count++;
            }
        break;
    }
    return count;
}

void cp_elem_store_f64(void *data, enum cp_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case CP_DTYPE_F32:
        ((float *)data)[i] = (float)v;
        break;
    case CP_DTYPE_F16:
        ((uint16_t *)data)[i] = cp_f32_to_f16((float)v);
        break;
    case CP_DTYPE_BF16:
        ((uint16_t *)data)[i] = cp_f32_to_bf16((float)v);
        break;
    case CP_DTYPE_F64:
        ((double *)data)[i] = v;
        break;
    case CP_DTYPE_I64:
        ((int64_t *)data)[i] = f64_to_i64_sat(v, -0x1p63, 0x1p63);
        break;
    case CP_DTYPE_U64:
        ((uint64_t *)data)[i] = isnan(v) || v <= 0 ? 0 : v >= 0x1p64 ? UINT64_MAX : (uint64_t)v;
        break;
    case CP_DTYPE_U32:
        ((uint32_t *)data)[i] = (uint32_t)f64_to_i64_sat(v, 0, UINT32_MAX);
        break;
    case CP_DTYPE_I16:
        ((int16_t *)data)[i] = (int16_t)f64_to_i64_sat(v, INT16_MIN, INT16_MAX);
        break;
    case CP_DTYPE_U16:
        ((uint16_t *)data)[i] = (uint16_t)f64_to_i64_sat(v, 0, UINT16_MAX);
        break;
    case CP_DTYPE_I32:
        ((int32_t *)data)[i] = (int32_t)f64_to_i64_sat(v, INT32_MIN, INT32_MAX);
        break;
    case CP_DTYPE_I8:
        ((int8_t *)data)[i] = (int8_t)f64_to_i64_sat(v, INT8_MIN, INT8_MAX);
        break;
    case CP_DTYPE_U8:
        ((uint8_t *)data)[i] = (uint8_t)f64_to_i64_sat(v, 0, UINT8_MAX);
        break;
    case CP_DTYPE_BOOL:
        ((uint8_t *)data)[i] = v != 0.0;
        break;
    default:
        break;
    }
}

void cp_elem_store_i64(void *data, enum cp_dtype dt, int64_t i, int64_t v)
{
    switch (dt) {
    case CP_DTYPE_F32:
        ((float *)data)[i] = (float)v;
        break;
    case CP_DTYPE_F16:
    case CP_DTYPE_BF16:
        cp_elem_store_f64(data, dt, i, (double)v);
        break;
    case CP_DTYPE_F64:
        ((double *)data)[i] = (double)v;
        break;
    case CP_DTYPE_I64:
        ((int64_t *)data)[i] = v;
        break;
    case CP_DTYPE_U64:
        ((uint64_t *)data)[i] = (uint64_t)v;
        break;
    case CP_DTYPE_I32:
        ((int32_t *)data)[i] = (int32_t)(uint32_t)(uint64_t)v;
        break;
    case CP_DTYPE_U32:
        ((uint32_t *)data)[i] = (uint32_t)(uint64_t)v;
        break;
    case CP_DTYPE_I16:
        ((int16_t *)data)[i] = (int16_t)(uint16_t)(uint64_t)v;
        break;
    case CP_DTYPE_U16:
        ((uint16_t *)data)[i] = (uint16_t)(uint64_t)v;
        break;
    case CP_DTYPE_I8:
        ((int8_t *)data)[i] = (int8_t)(uint8_t)(uint64_t)v;
        break;
    case CP_DTYPE_U8:
        ((uint8_t *)data)[i] = (uint8_t)(uint64_t)v;
        break;
    case CP_DTYPE_BOOL:
        ((uint8_t *)data)[i] = v != 0;
        break;
    default:
        break;
    }
}
