/* Dtype and layout tables, and shape helpers. */
#include "graph/graph.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

struct dtype_info {
    const char *name;
    size_t size;
    int onnx; /* TensorProto.DataType */
};

static const struct dtype_info dtypes[] = {
    [CP_DTYPE_UNDEFINED] = {"undefined", 0, 0},
    [CP_DTYPE_F32] = {"f32", 4, 1},
    [CP_DTYPE_F16] = {"f16", 2, 10},
    [CP_DTYPE_BF16] = {"bf16", 2, 16},
    [CP_DTYPE_I8] = {"i8", 1, 3},
    [CP_DTYPE_U8] = {"u8", 1, 2},
    [CP_DTYPE_I32] = {"i32", 4, 6},
    [CP_DTYPE_I64] = {"i64", 8, 7},
    [CP_DTYPE_BOOL] = {"bool", 1, 9},
    [CP_DTYPE_F64] = {"f64", 8, 11},
    [CP_DTYPE_I16] = {"i16", 2, 5},
    [CP_DTYPE_U16] = {"u16", 2, 4},
    [CP_DTYPE_U32] = {"u32", 4, 12},
    [CP_DTYPE_U64] = {"u64", 8, 13},
};
static_assert(sizeof dtypes / sizeof dtypes[0] == CP_DTYPE_COUNT, "dtype table size");

const char *cp_dtype_name(enum cp_dtype t)
{
    return (unsigned)t < CP_DTYPE_COUNT ? dtypes[t].name : "undefined";
}

enum cp_dtype cp_dtype_from_name(const char *name)
{
    for (int i = 1; i < CP_DTYPE_COUNT; i++)
        if (strcmp(dtypes[i].name, name) == 0)
            return (enum cp_dtype)i;
    return CP_DTYPE_UNDEFINED;
}

size_t cp_dtype_size(enum cp_dtype t)
{
    return (unsigned)t < CP_DTYPE_COUNT ? dtypes[t].size : 0;
}

enum cp_dtype cp_dtype_from_onnx(int onnx_type)
{
    for (int i = 1; i < CP_DTYPE_COUNT; i++)
        if (dtypes[i].onnx == onnx_type)
            return (enum cp_dtype)i;
    return CP_DTYPE_UNDEFINED;
}

int cp_dtype_to_onnx(enum cp_dtype t)
{
    return (unsigned)t < CP_DTYPE_COUNT ? dtypes[t].onnx : 0;
}

bool cp_dtype_is_float(enum cp_dtype t)
{
    return t == CP_DTYPE_F32 || t == CP_DTYPE_F16 || t == CP_DTYPE_BF16 || t == CP_DTYPE_F64;
}

static const char *const layouts[] = {
    [CP_LAYOUT_UNDEF] = "undef",     [CP_LAYOUT_ND] = "ND",       [CP_LAYOUT_NCHW] = "NCHW",
    [CP_LAYOUT_NHWC] = "NHWC",       [CP_LAYOUT_NCDHW] = "NCDHW", [CP_LAYOUT_NCHW8C] = "nChw8c",
    [CP_LAYOUT_NCHW16C] = "nChw16c",
};
static_assert(sizeof layouts / sizeof layouts[0] == CP_LAYOUT_COUNT, "layout table size");

const char *cp_layout_name(enum cp_layout l)
{
    return (unsigned)l < CP_LAYOUT_COUNT ? layouts[l] : "undef";
}

enum cp_layout cp_layout_from_name(const char *name)
{
    for (int i = 1; i < CP_LAYOUT_COUNT; i++)
        if (strcmp(layouts[i], name) == 0)
            return (enum cp_layout)i;
    return CP_LAYOUT_UNDEF;
}

void cp_shape_set_unknown(struct cp_shape *s)
{
    memset(s, 0, sizeof *s);
    s->rank = -1;
}

void cp_shape_set(struct cp_shape *s, int rank, const int64_t *dims)
{
    memset(s, 0, sizeof *s);
    if (rank > CP_MAX_RANK)
        rank = CP_MAX_RANK;
    s->rank = rank;
    for (int i = 0; i < rank; i++)
        s->dims[i].value = dims[i];
}

bool cp_shape_is_static(const struct cp_shape *s)
{
    if (s->rank < 0)
        return false;
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i].value < 0)
            return false;
    return true;
}

int64_t cp_shape_numel(const struct cp_shape *s)
{
    if (!cp_shape_is_static(s))
        return -1;
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        if (__builtin_mul_overflow(n, s->dims[i].value, &n))
            return -1;
    return n;
}

bool cp_shape_nbytes(const struct cp_shape *s, enum cp_dtype dt, size_t *nbytes)
{
    if (nbytes)
        *nbytes = 0;
    int64_t numel = cp_shape_numel(s);
    int64_t es = (int64_t)cp_dtype_size(dt), total;
    if (numel < 0 || es == 0 || cp_mul_overflows_i64(numel, es, &total) ||
        (uint64_t)total > CP_TENSOR_MAX_BYTES || (uint64_t)total > SIZE_MAX)
        return false;
    if (nbytes)
        *nbytes = (size_t)total;
    return true;
}

bool cp_shape_equal(const struct cp_shape *a, const struct cp_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++) {
        if (a->dims[i].value != b->dims[i].value)
            return false;
        if (a->dims[i].value < 0) {
            const char *x = a->dims[i].sym, *y = b->dims[i].sym;
            if ((x == NULL) != (y == NULL) || (x && strcmp(x, y) != 0))
                return false;
        }
    }
    return true;
}

void cp_shape_format(const struct cp_shape *s, char *out, size_t n)
{
    if (n == 0)
        return;
    if (s->rank < 0) {
        snprintf(out, n, "unknown");
        return;
    }
    if (s->rank == 0) {
        snprintf(out, n, "scalar");
        return;
    }
    size_t pos = 0;
    out[0] = 0;
    for (int i = 0; i < s->rank && pos < n; i++) {
        const struct cp_dim *dm = &s->dims[i];
        int w;
        const char *sep = i ? "x" : "";
        if (dm->value >= 0)
            w = snprintf(out + pos, n - pos, "%s%lld", sep, (long long)dm->value);
        else if (dm->sym && dm->sym[0])
            w = snprintf(out + pos, n - pos, "%s%s", sep, dm->sym);
        else
            w = snprintf(out + pos, n - pos, "%s?", sep);
        if (w < 0)
            break;
        pos += (size_t)w;
    }
}
