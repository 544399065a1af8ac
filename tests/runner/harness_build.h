/* The kernel harness's seeded random data and one-node graph building
 * (X, W, N, I, D ...), included by test_kernel_harness.c before its cases. */
#ifndef CP_TESTS_HARNESS_BUILD_H
#define CP_TESTS_HARNESS_BUILD_H

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

#endif
