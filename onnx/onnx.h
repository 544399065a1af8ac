/*
 * onnx: reading ONNX models into the graph IR.
 *
 * The protobuf wire format is decoded with protobuf-c against the system's
 * onnx.proto; initializers (raw, typed and external data) become graph
 * tensors; each ONNX op is loaded by a table entry {name, opset range,
 * loader} that checks its attributes, and a first pass reports every
 * unsupported op of a model at once. Both the converter (atc_bridge/) and
 * the runtime (runner/, which runs an .onnx unconverted as the fp32
 * reference) import through here.
 *
 * A TensorProto is read by one set of rules wherever it comes from: an
 * initializer of a model, or a tensor file (the test_data_set_N/input_K.pb
 * of ONNX's test layout, which the runtime reads as inputs). What is wrong
 * with one that cannot be read comes back as a fault, which each caller
 * reports in its own terms.
 */
#ifndef CP_ONNX_H
#define CP_ONNX_H

#include "core/core.h"
#include "graph/graph.h"
#include "om/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Import an ONNX model file. Shapes given in `input_shapes` override the
 * model's declared input shapes. Unsupported ops are all listed at once
 * ("unsupported ops: X (3 nodes), Y (1 node)") with CP_ERR_UNSUPPORTED.
 * External data is resolved relative to the model's folder; absolute paths
 * and paths escaping it are rejected. OUT: *out (caller frees with
 * cp_graph_free); NULL on failure. Also OUT (optional, may be NULL):
 * hash_hex[33], the content hash of the model file. */
enum cp_status cp_onnx_import(const char *path, const struct cp_input_shape *input_shapes,
                              size_t n_input_shapes, struct cp_graph **out, char *hash_hex,
                              struct cp_diag *d);

/* Same, from bytes in memory; `dir` is the folder for external data (NULL:
 * external data is refused). */
enum cp_status cp_onnx_import_buffer(const uint8_t *data, size_t len, const char *dir,
                                     const char *display_name,
                                     const struct cp_input_shape *input_shapes,
                                     size_t n_input_shapes, struct cp_graph **out,
                                     struct cp_diag *d);

/* ---- TensorProto ------------------------------------------------------------------------- */

/* Why a TensorProto cannot be read. Values are stable. */
enum cp_onnx_tensor_fault {
    CP_ONNX_TENSOR_OK = 0,
    CP_ONNX_TENSOR_UNREADABLE,   /* the bytes are not a TensorProto (truncated, not protobuf) */
    CP_ONNX_TENSOR_NO_DTYPE,     /* data_type missing or UNDEFINED */
    CP_ONNX_TENSOR_DTYPE,        /* a dtype we cannot hold: onnx_type */
    CP_ONNX_TENSOR_SEGMENT,      /* a segment of a larger tensor */
    CP_ONNX_TENSOR_EXTERNAL,     /* data in an external file, where none is allowed */
    CP_ONNX_TENSOR_RANK,         /* have dimensions, more than CP_MAX_RANK */
    CP_ONNX_TENSOR_NEGATIVE_DIM, /* dimension `axis` is have (< 0) */
    CP_ONNX_TENSOR_TOO_LARGE,    /* more bytes than memory can address */
    CP_ONNX_TENSOR_OTHER_FIELD,  /* values in `field`, where the dtype's belong in `home` */
    CP_ONNX_TENSOR_BOTH,         /* values in both raw_data and `home` */
    CP_ONNX_TENSOR_RAW_SIZE,     /* raw_data has have bytes, the shape needs want */
    CP_ONNX_TENSOR_COUNT,        /* `home` has have values, the shape needs want */
    CP_ONNX_TENSOR_NOMEM,        /* want bytes could not be allocated */
};

/* The fault and its particulars (which are set depends on the fault, as
 * noted above). Strings are static. */
struct cp_onnx_tensor_error {
    enum cp_onnx_tensor_fault fault;
    enum cp_dtype dtype; /* the tensor's, once known (OTHER_FIELD and later) */
    int onnx_type;
    int axis;
    int64_t have, want;
    const char *field, *home;
    /* COUNT with have 0: the proto lists external_data entries although its
     * data_location is not EXTERNAL. */
    bool external_entries;
};

/* A tensor read from a TensorProto. */
struct cp_onnx_tensor {
    enum cp_dtype dtype;
    int rank;
    int64_t dims[CP_MAX_RANK];
    void *data; /* malloc'ed, the caller frees; NULL when nbytes is 0 */
    size_t nbytes;
    char name[256]; /* the proto's name (truncated), "" when it has none */
};

/* Read a serialized TensorProto that holds its own data (raw_data or the
 * typed field of its dtype: float_data for f32, int64_data for i64,
 * int32_data for the others, f16 and bf16 as bit patterns; bools become
 * 0/1). OUT: *t (zeroed on failure), *err. Returns err->fault:
 * CP_ONNX_TENSOR_OK, or what is wrong (nothing allocated then). */
enum cp_onnx_tensor_fault cp_onnx_tensor_read(const uint8_t *bytes, size_t len,
                                              struct cp_onnx_tensor *t,
                                              struct cp_onnx_tensor_error *err);

/* ONNX TensorProto.DataType name ("FLOAT", "DOUBLE", ...); for unknown
 * values "type N", written into buf[24]. */
const char *cp_onnx_dtype_name(int onnx_type, char buf[24]);

/* Whether the importer has a row for the default-domain op `op_type` at
 * some opset, including ops imported onto another op of the same function
 * (Upsample onto Resize). */
bool cp_onnx_op_known(const char *op_type);

#endif
