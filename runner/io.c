/* Host tensors: lifetime, reading by content, and seeded random inputs.
 * The .npy and TensorProto codecs live in io_npy.c and io_pb.c. */
#include "runner/io_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* .npy and ONNX raw_data are little-endian; we copy bytes as they are. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tensor files are little-endian: a big-endian host needs byte swapping in runner/io*.c"
#endif

void cp_host_tensor_release(struct cp_host_tensor *t)
{
    if (!t)
        return;
    free(t->data);
    memset(t, 0, sizeof *t);
}

int64_t cp_host_tensor_numel(const struct cp_host_tensor *t)
{
    if (t->rank < 0 || t->rank > CP_MAX_RANK)
        return -1;
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        int64_t v = t->dims[i];
        if (v < 0)
            return -1;
        if (v != 0 && n > INT64_MAX / v)
            return -1;
        n *= v;
    }
    return n;
}

void *cp_io_alloc(size_t n)
{
    return malloc(n ? n : 1);
}

enum cp_status cp_io_tensor_bytes(const struct cp_host_tensor *t, const char *what, size_t *nbytes,
                                  struct cp_diag *d)
{
    *nbytes = 0;
    size_t esize = cp_dtype_size(t->dtype);
    if (esize == 0)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "%s: dtype %s has no element size", what,
                           cp_dtype_name(t->dtype));
    if (t->rank < 0 || t->rank > CP_MAX_RANK)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: rank %d is outside 0..%d", what, t->rank,
                           CP_MAX_RANK);
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s: dimension %d is %lld; a concrete shape is needed", what, i,
                               (long long)t->dims[i]);
    int64_t numel = cp_host_tensor_numel(t);
    if (numel < 0 || (uint64_t)numel > SIZE_MAX || cp_mul_overflows((size_t)numel, esize, nbytes))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: too many elements to address", what);
    return CP_OK;
}

void cp_io_name_from_path(struct cp_host_tensor *t, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base) /* ".npy" alone keeps its name */
        n = (size_t)(dot - base);
    if (n >= sizeof t->name)
        n = sizeof t->name - 1;
    memcpy(t->name, base, n);
    t->name[n] = '\0';
}

bool cp_io_looks_like_npy(const uint8_t *data, size_t len)
{
    size_t n = len < CP_NPY_MAGIC_LEN ? len : CP_NPY_MAGIC_LEN;
    return n > 0 && memcmp(data, CP_NPY_MAGIC, n) == 0;
}

enum cp_status cp_tensor_read_file(const char *path, struct cp_host_tensor *t, struct cp_diag *d)
{
    memset(t, 0, sizeof *t);
    /* Refuse FIFOs, devices and folders before open(), which would block on
     * a FIFO with no writer. */
    struct stat sb;
    if (stat(path, &sb) != 0)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return cp_diag_set(d, CP_ERR_IO, "%s: not a regular file", path);
    struct cp_mmap m;
    enum cp_status st = cp_mmap_open(path, &m, d);
    if (st != CP_OK)
        return st;
    if (m.len == 0)
        st = cp_diag_set(d, CP_ERR_PARSE,
                         "%s: empty file; expected a NumPy .npy or an ONNX TensorProto .pb", path);
    else if (cp_io_looks_like_npy(m.data, m.len))
        st = cp_io_read_npy(path, m.data, m.len, t, d);
    else
        st = cp_io_read_pb(path, m.data, m.len, t, d);
    cp_mmap_close(&m);
    if (st != CP_OK)
        cp_host_tensor_release(t);
    return st;
}

enum cp_status cp_tensor_read_buffer(const char *name, const void *data, size_t len,
                                     struct cp_host_tensor *t, struct cp_diag *d)
{
    memset(t, 0, sizeof *t);
    enum cp_status st;
    if (len == 0)
        st = cp_diag_set(d, CP_ERR_PARSE, "%s: empty; expected a NumPy .npy or an ONNX TensorProto",
                         name);
    else if (cp_io_looks_like_npy(data, len))
        st = cp_io_read_npy(name, data, len, t, d);
    else
        st = cp_io_read_pb(name, data, len, t, d);
    if (st != CP_OK)
        cp_host_tensor_release(t);
    return st;
}

/* ---- random fill -------------------------------------------------------------- */

/* SplitMix64 used as a counter-based generator: element i draws
 * mix(seed + (i + 1) * gamma), so values do not depend on the order (or
 * thread) they are computed in, and a tensor's values are a prefix of the
 * same tensor with more elements. */
static uint64_t splitmix64_at(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

enum cp_status cp_tensor_fill_random(struct cp_host_tensor *t, uint64_t seed, struct cp_diag *d)
{
    const char *what = t->name[0] ? t->name : "random input";
    size_t nbytes;
    enum cp_status st = cp_io_tensor_bytes(t, what, &nbytes, d);
    if (st != CP_OK)
        return st;
    size_t numel = nbytes / cp_dtype_size(t->dtype);
    uint8_t *p = cp_io_alloc(nbytes);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory for %zu bytes", what, nbytes);
    for (size_t i = 0; i < numel; i++) {
        uint64_t r = splitmix64_at(seed, i);
        /* 24 bits: every value is exact in f32 and lies in [-1, 1). */
        float f = (float)(int32_t)(r >> 40) / 8388608.0f - 1.0f;
        int64_t k = (int64_t)((r >> 32) % 10u);
        uint16_t h;
        switch (t->dtype) {
        case CP_DTYPE_F32:
            memcpy(p + 4 * i, &f, 4);
            break;
        case CP_DTYPE_F16:
            h = cp_f32_to_f16(f);
            if (h == 0x3c00u) /* rounded up to 1.0: keep the interval half-open */
                h = 0x3bffu;
            memcpy(p + 2 * i, &h, 2);
            break;
        case CP_DTYPE_BF16:
            h = cp_f32_to_bf16(f);
            if (h == 0x3f80u)
                h = 0x3f7fu;
            memcpy(p + 2 * i, &h, 2);
            break;
        case CP_DTYPE_I8:
        case CP_DTYPE_U8:
            p[i] = (uint8_t)k;
            break;
        case CP_DTYPE_I32: {
            int32_t v = (int32_t)k;
            memcpy(p + 4 * i, &v, 4);
            break;
        }
        case CP_DTYPE_I64:
            memcpy(p + 8 * i, &k, 8);
            break;
        case CP_DTYPE_F64: {
            double v = f;
            memcpy(p + 8 * i, &v, 8);
            break;
        }
        case CP_DTYPE_I16:
        case CP_DTYPE_U16:
        case CP_DTYPE_U32:
        case CP_DTYPE_U64:
            cp_elem_store_i64(p, t->dtype, (int64_t)i, k);
            break;
        case CP_DTYPE_BOOL:
            p[i] = (uint8_t)(r >> 63);
            break;
        default:
            free(p);
            return cp_diag_set(d, CP_ERR_UNSUPPORTED, "%s: cannot draw random %s values", what,
                               cp_dtype_name(t->dtype));
        }
    }
    /* The caller hands over a tensor without data (see runner.h). */
    t->data = p;
    t->nbytes = nbytes;
    return CP_OK;
}
