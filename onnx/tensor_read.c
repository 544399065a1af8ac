/* The rules of a TensorProto, wherever it comes from: an initializer of a
 * model (tensor.c) or a tensor file the runtime reads (cp_onnx_tensor_read,
 * runner/io_pb.c).
 *
 * Values come either from raw_data (little-endian bytes, as numpy_helper
 * writes them) or from the typed field ONNX keeps each dtype in: float_data
 * for f32, double_data for f64, int64_data for i64, uint64_data for u32 and
 * u64, int32_data for everything narrower (f16 and bf16 as bit patterns,
 * i8/u8/i16/u16/bool one value per int32). A value anywhere
 * else, in both places, or a count the shape does not need is a fault; so
 * are the dtypes the graph IR has no room for. Each caller words faults
 * for its own readers. */
#include "onnx/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* raw_data is little-endian; we copy it as it is. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ONNX tensor bytes are little-endian: a big-endian host needs byte swapping"
#endif

static enum cp_onnx_tensor_fault fail(struct cp_onnx_tensor_error *err, enum cp_onnx_tensor_fault f)
{
    err->fault = f;
    return f;
}

enum cp_onnx_tensor_fault onnx_tensor_head(const Onnx__TensorProto *tp, bool allow_external,
                                           struct onnx_tensor_head *h,
                                           struct cp_onnx_tensor_error *err)
{
    memset(h, 0, sizeof *h);
    memset(err, 0, sizeof *err);
    cp_shape_set_unknown(&h->shape);
    if (!tp->has_data_type || tp->data_type == 0)
        return fail(err, CP_ONNX_TENSOR_NO_DTYPE);
    enum cp_dtype dt = cp_dtype_from_onnx(tp->data_type);
    if (dt == CP_DTYPE_UNDEFINED) {
        err->onnx_type = tp->data_type;
        return fail(err, CP_ONNX_TENSOR_DTYPE);
    }
    if (tp->segment)
        return fail(err, CP_ONNX_TENSOR_SEGMENT);
    bool external =
        tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (external && !allow_external)
        return fail(err, CP_ONNX_TENSOR_EXTERNAL);
    if (tp->n_dims > CP_MAX_RANK) {
        err->have = (int64_t)tp->n_dims;
        return fail(err, CP_ONNX_TENSOR_RANK);
    }
    struct cp_shape s;
    s.rank = (int)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0) {
            err->axis = (int)i;
            err->have = tp->dims[i];
            return fail(err, CP_ONNX_TENSOR_NEGATIVE_DIM);
        }
        s.dims[i].value = tp->dims[i];
        s.dims[i].sym = NULL;
    }
    /* Set before the size check, so a fault can name them. */
    h->dtype = dt;
    h->shape = s;
    size_t nbytes;
    if (!cp_shape_nbytes(&s, dt, &nbytes))
        return fail(err, CP_ONNX_TENSOR_TOO_LARGE);
    h->numel = (size_t)cp_shape_numel(&s);
    h->nbytes = nbytes;
    h->external = external;
    return CP_ONNX_TENSOR_OK;
}

/* The typed field ONNX keeps values of `dt` in. */
static const char *home_field(enum cp_dtype dt)
{
    switch (dt) {
    case CP_DTYPE_F32:
        return "float_data";
    case CP_DTYPE_I64:
        return "int64_data";
    case CP_DTYPE_F64:
        return "double_data";
    case CP_DTYPE_U32:
    case CP_DTYPE_U64:
        return "uint64_data";
    default:
        return "int32_data"; /* f16, bf16 (bit patterns), i8, u8, i16, u16, bool, i32 */
    }
}

/* Copy `numel` values of dtype `dt` out of the typed field they live in. */
static void copy_typed(const Onnx__TensorProto *tp, enum cp_dtype dt, size_t numel, size_t nbytes,
                       uint8_t *out)
{
    switch (dt) {
    case CP_DTYPE_F32:
        memcpy(out, tp->float_data, nbytes);
        break;
    case CP_DTYPE_I64:
        memcpy(out, tp->int64_data, nbytes);
        break;
    case CP_DTYPE_I32:
        memcpy(out, tp->int32_data, nbytes);
        break;
    case CP_DTYPE_F64:
        memcpy(out, tp->double_data, nbytes);
        break;
    case CP_DTYPE_U64:
        memcpy(out, tp->uint64_data, nbytes);
        break;
    case CP_DTYPE_U32:
        for (size_t i = 0; i < numel; i++) {
            uint32_t v = (uint32_t)tp->uint64_data[i];
            memcpy(out + 4 * i, &v, 4);
        }
        break;
    case CP_DTYPE_F16:
    case CP_DTYPE_I16:
    case CP_DTYPE_U16:
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
    default: /* i8, u8: one value per int32 */
        for (size_t i = 0; i < numel; i++)
            out[i] = (uint8_t)((uint32_t)tp->int32_data[i] & 0xffu);
        break;
    }
}

enum cp_onnx_tensor_fault onnx_tensor_values(const Onnx__TensorProto *tp,
                                             const struct onnx_tensor_head *h, void **data,
                                             struct cp_onnx_tensor_error *err)
{
    *data = NULL;
    memset(err, 0, sizeof *err);
    err->dtype = h->dtype;
    const struct {
        const char *name;
        size_t n;
    } fields[] = {
        {"float_data", tp->n_float_data},   {"int32_data", tp->n_int32_data},
        {"int64_data", tp->n_int64_data},   {"double_data", tp->n_double_data},
        {"uint64_data", tp->n_uint64_data}, {"string_data", tp->n_string_data},
    };
    const char *home = home_field(h->dtype);
    err->home = home;
    size_t have = 0;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        if (strcmp(fields[i].name, home) == 0) {
            have = fields[i].n;
        } else if (fields[i].n) {
            err->field = fields[i].name;
            return fail(err, CP_ONNX_TENSOR_OTHER_FIELD);
        }
    }
    if (tp->has_raw_data && have)
        return fail(err, CP_ONNX_TENSOR_BOTH);
    if (tp->has_raw_data ? tp->raw_data.len != h->nbytes : have != h->numel) {
        err->have = (int64_t)(tp->has_raw_data ? tp->raw_data.len : have);
        err->want = (int64_t)(tp->has_raw_data ? h->nbytes : h->numel);
        err->external_entries = !tp->has_raw_data && have == 0 && tp->n_external_data > 0;
        return fail(err, tp->has_raw_data ? CP_ONNX_TENSOR_RAW_SIZE : CP_ONNX_TENSOR_COUNT);
    }
    if (h->nbytes == 0)
        return CP_ONNX_TENSOR_OK;
    uint8_t *buf = malloc(h->nbytes);
    if (!buf) {
        err->want = (int64_t)h->nbytes;
        return fail(err, CP_ONNX_TENSOR_NOMEM);
    }
    if (tp->has_raw_data) {
        memcpy(buf, tp->raw_data.data, h->nbytes);
        if (h->dtype == CP_DTYPE_BOOL)
            for (size_t i = 0; i < h->nbytes; i++)
                buf[i] = buf[i] != 0;
    } else {
        copy_typed(tp, h->dtype, h->numel, h->nbytes, buf);
    }
    *data = buf;
    return CP_ONNX_TENSOR_OK;
}

/* A TensorProto nests at most two messages deep (its external_data
 * entries), so unpacking it cannot recurse without bound. */
enum cp_onnx_tensor_fault cp_onnx_tensor_read(const uint8_t *bytes, size_t len,
                                              struct cp_onnx_tensor *t,
                                              struct cp_onnx_tensor_error *err)
{
    memset(t, 0, sizeof *t);
    memset(err, 0, sizeof *err);
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, bytes);
    if (!tp)
        return fail(err, CP_ONNX_TENSOR_UNREADABLE);
    struct onnx_tensor_head h;
    void *data = NULL;
    enum cp_onnx_tensor_fault f = onnx_tensor_head(tp, false, &h, err);
    if (f == CP_ONNX_TENSOR_OK)
        f = onnx_tensor_values(tp, &h, &data, err);
    if (f == CP_ONNX_TENSOR_OK) {
        t->dtype = h.dtype;
        t->rank = h.shape.rank;
        for (int i = 0; i < h.shape.rank; i++)
            t->dims[i] = h.shape.dims[i].value;
        t->data = data;
        t->nbytes = h.nbytes;
        if (tp->name)
            snprintf(t->name, sizeof t->name, "%s", tp->name);
    }
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return f;
}
