/*
 * ONNX TensorProto files (the test_data_set_N/input_K.pb of ONNX's test
 * layout). The rules of a TensorProto are the importer's (onnx/onnx.h,
 * cp_onnx_tensor_read), the same that read a model's initializers; here
 * they are worded for a tensor file, whose format was guessed from its
 * content (io.c), and external data is refused: a tensor file must hold
 * its own data.
 */
#include "runner/io_internal.h"

#include "onnx/onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fault in a tensor file's words. */
static enum cp_status fault_message(const char *path, const struct cp_onnx_tensor_error *e,
                                    struct cp_diag *d)
{
    char tb[24];
    switch (e->fault) {
    case CP_ONNX_TENSOR_UNREADABLE:
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: neither a NumPy .npy (no \\x93NUMPY magic) nor a readable ONNX "
                           "TensorProto (truncated or not protobuf)",
                           path);
    case CP_ONNX_TENSOR_NO_DTYPE:
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: neither a NumPy .npy (no \\x93NUMPY magic) nor an ONNX "
                           "TensorProto (no data_type)",
                           path);
    case CP_ONNX_TENSOR_DTYPE:
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: TensorProto dtype %s is not supported (supported: f32, f16, bf16, "
                           "i8, u8, i32, i64, bool)",
                           path, cp_onnx_dtype_name(e->onnx_type, tb));
    case CP_ONNX_TENSOR_SEGMENT:
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: TensorProto is a segment of a larger tensor, which is not "
                           "supported",
                           path);
    case CP_ONNX_TENSOR_EXTERNAL:
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: TensorProto keeps its data in an external file; a tensor file "
                           "must hold its own data",
                           path);
    case CP_ONNX_TENSOR_RANK:
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: TensorProto has rank %zu; at most %d dimensions are supported",
                           path, (size_t)e->have, CP_MAX_RANK);
    case CP_ONNX_TENSOR_NEGATIVE_DIM:
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: TensorProto has a negative dimension (%lld at axis %zu)", path,
                           (long long)e->have, (size_t)e->axis);
    case CP_ONNX_TENSOR_TOO_LARGE:
        return cp_diag_set(d, CP_ERR_INVALID, "%s: too many elements to address", path);
    case CP_ONNX_TENSOR_OTHER_FIELD:
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: TensorProto of dtype %s keeps values in %s; they belong in "
                           "%s or raw_data",
                           path, cp_dtype_name(e->dtype), e->field, e->home);
    case CP_ONNX_TENSOR_BOTH:
        return cp_diag_set(d, CP_ERR_PARSE, "%s: TensorProto has both raw_data and %s", path,
                           e->home);
    case CP_ONNX_TENSOR_RAW_SIZE:
    case CP_ONNX_TENSOR_COUNT: {
        bool raw = e->fault == CP_ONNX_TENSOR_RAW_SIZE;
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: truncated or inconsistent TensorProto: its shape of %s needs %zu "
                           "%s, %s has %zu",
                           path, cp_dtype_name(e->dtype), (size_t)e->want, raw ? "bytes" : "values",
                           raw ? "raw_data" : e->home, (size_t)e->have);
    }
    case CP_ONNX_TENSOR_NOMEM:
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory for %zu bytes", path,
                           (size_t)e->want);
    default:
        return cp_diag_set(d, CP_ERR_INTERNAL, "%s: unexpected TensorProto fault %d", path,
                           (int)e->fault);
    }
}

enum cp_status cp_io_read_pb(const char *path, const uint8_t *data, size_t len,
                             struct cp_host_tensor *t, struct cp_diag *d)
{
    memset(t, 0, sizeof *t);
    struct cp_onnx_tensor ot;
    struct cp_onnx_tensor_error e;
    if (cp_onnx_tensor_read(data, len, &ot, &e) != CP_ONNX_TENSOR_OK)
        return fault_message(path, &e, d);
    /* Host tensors always hold a buffer, even of no bytes. */
    if (!ot.data && !(ot.data = cp_io_alloc(0)))
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory for %zu bytes", path, ot.nbytes);
    t->dtype = ot.dtype;
    t->rank = ot.rank;
    memcpy(t->dims, ot.dims, sizeof t->dims);
    t->data = ot.data;
    t->nbytes = ot.nbytes;
    if (ot.name[0])
        snprintf(t->name, sizeof t->name, "%s", ot.name);
    else
        cp_io_name_from_path(t, path);
    return CP_OK;
}
