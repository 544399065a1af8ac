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
 */
#ifndef CP_ONNX_H
#define CP_ONNX_H

#include "core/core.h"
#include "graph/graph.h"
#include "om/config.h"

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

#endif
