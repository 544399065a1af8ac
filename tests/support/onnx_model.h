/* Test support: small ONNX models built with protobuf-c, for tests that need
 * a model the examples do not have (a chain of chosen ops, one that makes
 * NaN or uses an op no kernel implements, one tied to a batch size). A test
 * lays out its graph in protobuf-c structs on its stack; these helpers fill
 * in the typed inputs and outputs and the model around the graph.
 *
 * No Criterion here (see cli.h): a helper returns NULL when memory runs out
 * or its arguments are out of range, and the test asserts. */
#ifndef CP_TEST_ONNX_MODEL_H
#define CP_TEST_ONNX_MODEL_H

#include "proto/onnx.pb-c.h"

#include <stddef.h>
#include <stdint.h>

/* A graph input or output `name`: a tensor of `elem_type` (an
 * ONNX__TENSOR_PROTO__DATA_TYPE__*) and shape [d0, d1], with everything its
 * ValueInfoProto `info` points at. The struct points into itself: set it up
 * in place with cp_t_onnx_value_init and never copy it. */
struct cp_t_onnx_value {
    Onnx__TensorShapeProto__Dimension dim[2];
    Onnx__TensorShapeProto__Dimension *dims[2];
    Onnx__TensorShapeProto shape;
    Onnx__TypeProto__Tensor tensor;
    Onnx__TypeProto type;
    Onnx__ValueInfoProto info;
};

/* Fill `v` in place for `name` of `elem_type` and shape [d0, d1]. `name`
 * is not copied: it must outlive the packing. */
void cp_t_onnx_value_init(struct cp_t_onnx_value *v, const char *name, int elem_type, int64_t d0,
                          int64_t d1);

/* `graph` in a model of IR version 8 that imports opset 17 of the default
 * domain, with producer_name `producer` (none when NULL), packed. OUT:
 * *len. Returns the bytes (caller frees), NULL when out of memory. */
uint8_t *cp_t_onnx_pack(Onnx__GraphProto *graph, const char *producer, size_t *len);

/* The graph "handmade": a chain x -> ops[0] -> t0 -> ops[1] -> ... -> y of
 * [1,4] tensors, its nodes named node_0, node_1, ..., packed as by
 * cp_t_onnx_pack with producer "cannprof-test". All float, except that when
 * `cast_to` is not 0 the last node (a Cast) gets to=cast_to and y that
 * element type. OUT: *len. Returns the bytes (caller frees); NULL when n is
 * 0 or above 8, or when out of memory. */
uint8_t *cp_t_onnx_chain(const char *const *ops, size_t n, int cast_to, size_t *len);

#endif
