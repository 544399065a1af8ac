/*
 * ONNX TensorProto files (the test_data_set_N/input_K.pb of ONNX's test
 * layout), decoded with protobuf-c from the system onnx.proto.
 *
 * Values come either from raw_data (little-endian bytes, as numpy_helper
 * writes them) or from the typed field ONNX keeps each dtype in: float_data
 * for f32, int64_data for i64, int32_data for everything narrower (f16 and
 * bf16 as bit patterns, i8/u8/bool one value per int32). A TensorProto nests
 * at most two messages deep, so unpacking it cannot recurse without bound.
 */
#include "runner/io_internal.h"

#include "proto/onnx.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const onnx_type_names[] = {
    "UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",   "INT16",
    "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16",  "DOUBLE",
    "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
};

static const char *onnx_type_name(int t, char buf[24])
{
    if (t >= 0 && (size_t)t < sizeof onnx_type_names / sizeof *onnx_type_names)
        return onnx_type_names[t];
    snprintf(buf, 24, "type %d", t);
    return buf;
}

/* Copy `numel` values of dtype `dt` out of the typed field they live in. */
static void copy_typed(const Onnx__TensorProto *tp, enum cp_dtype dt, size_t numel, uint8_t *out)
{
    switch (dt) {
    case CP_DTYPE_F32:
        memcpy(out, tp->float_data, numel * 4);
        break;
    case CP_DTYPE_I64:
        memcpy(out, tp->int64_data, numel * 8);
        break;
    case CP_DTYPE_I32:
        memcpy(out, tp->int32_data, numel * 4);
        break;
    case CP_DTYPE_F16:
    case CP_DTYPE_BF16:
        for (size_t i = 0; i < numel; i++) {
            uint16_t v = (uint16_t)((uint32_t)tp->int32_data[i] & 0xffffu);
            memcpy(out + 2 * i, &v, 2);
        }
        break;
    case CP_DTYPE_BOOL:
        for (size_t i = 0; i < numel; i++)
            out[i] = tp->int32_data[i] != 0;
        break;
    default: /* i8, u8 */
        for (size_t i = 0; i < numel; i++)
            out[i] = (uint8_t)((uint32_t)tp->int32_data[i] & 0xffu);
        break;
    }
}

static enum cp_status decode(const char *path, const Onnx__TensorProto *tp,
                             struct cp_host_tensor *t, struct cp_diag *d)
{
    char tb[24];
    if (!tp->has_data_type || tp->data_type == 0)
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: neither a NumPy .npy (no \\x93NUMPY magic) nor an ONNX "
                           "TensorProto (no data_type)",
                           path);
    enum cp_dtype dt = cp_dtype_from_onnx(tp->data_type);
    if (dt == CP_DTYPE_UNDEFINED)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: TensorProto dtype %s is not supported (supported: f32, f16, bf16, "
                           "i8, u8, i32, i64, bool)",
                           path, onnx_type_name(tp->data_type, tb));
    if (tp->segment)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: TensorProto is a segment of a larger tensor, which is not "
                           "supported",
                           path);
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: TensorProto keeps its data in an external file; a tensor file "
                           "must hold its own data",
                           path);
    if (tp->n_dims > CP_MAX_RANK)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: TensorProto has rank %zu; at most %d dimensions are supported",
                           path, tp->n_dims, CP_MAX_RANK);
    t->dtype = dt;
    t->rank = (int)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return cp_diag_set(d, CP_ERR_PARSE,
                               "%s: TensorProto has a negative dimension (%lld at axis %zu)", path,
                               (long long)tp->dims[i], i);
        t->dims[i] = tp->dims[i];
    }
    size_t nbytes;
    enum cp_status st = cp_io_tensor_bytes(t, path, &nbytes, d);
    if (st != CP_OK)
        return st;
    size_t numel = nbytes / cp_dtype_size(dt);

    /* Which typed field holds this dtype, and are the others empty? */
    const char *home = dt == CP_DTYPE_F32   ? "float_data"
                       : dt == CP_DTYPE_I64 ? "int64_data"
                                            : "int32_data";
    const struct {
        const char *name;
        size_t n;
    } fields[] = {
        {"float_data", tp->n_float_data},   {"int32_data", tp->n_int32_data},
        {"int64_data", tp->n_int64_data},   {"double_data", tp->n_double_data},
        {"uint64_data", tp->n_uint64_data}, {"string_data", tp->n_string_data},
    };
    size_t have = 0;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        if (strcmp(fields[i].name, home) == 0)
            have = fields[i].n;
        else if (fields[i].n)
            return cp_diag_set(d, CP_ERR_PARSE,
                               "%s: TensorProto of dtype %s keeps values in %s; they belong in "
                               "%s or raw_data",
                               path, cp_dtype_name(dt), fields[i].name, home);
    }
    if (tp->has_raw_data && have)
        return cp_diag_set(d, CP_ERR_PARSE, "%s: TensorProto has both raw_data and %s", path, home);
    if (tp->has_raw_data ? tp->raw_data.len != nbytes : have != numel)
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: truncated or inconsistent TensorProto: its shape of %s needs %zu "
                           "%s, %s has %zu",
                           path, cp_dtype_name(dt), tp->has_raw_data ? nbytes : numel,
                           tp->has_raw_data ? "bytes" : "values",
                           tp->has_raw_data ? "raw_data" : home,
                           tp->has_raw_data ? tp->raw_data.len : have);

    uint8_t *buf = cp_io_alloc(nbytes);
    if (!buf)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory for %zu bytes", path, nbytes);
    if (tp->has_raw_data) {
        if (nbytes)
            memcpy(buf, tp->raw_data.data, nbytes);
        if (dt == CP_DTYPE_BOOL)
            for (size_t i = 0; i < nbytes; i++)
                buf[i] = buf[i] != 0;
    } else if (numel) {
        copy_typed(tp, dt, numel, buf);
    }
    t->data = buf;
    t->nbytes = nbytes;
    if (tp->name && tp->name[0])
        snprintf(t->name, sizeof t->name, "%s", tp->name);
    else
        cp_io_name_from_path(t, path);
    return CP_OK;
}

enum cp_status cp_io_read_pb(const char *path, const uint8_t *data, size_t len,
                             struct cp_host_tensor *t, struct cp_diag *d)
{
    memset(t, 0, sizeof *t);
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, data);
    if (!tp)
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: neither a NumPy .npy (no \\x93NUMPY magic) nor a readable ONNX "
                           "TensorProto (truncated or not protobuf)",
                           path);
    enum cp_status st = decode(path, tp, t, d);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    if (st != CP_OK)
        cp_host_tensor_release(t);
    return st;
}
