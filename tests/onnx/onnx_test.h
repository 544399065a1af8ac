/*
 * Private to tests/onnx: the scratch state and model builders the importer
 * tests share (onnx_test.c). Models are built with protobuf-c structs,
 * packed into the scratch folder and imported; every allocation made for a
 * model is freed by onnx_test_teardown, each suite's .fini.
 */
#ifndef CP_TESTS_ONNX_TEST_H
#define CP_TESTS_ONNX_TEST_H

#include "onnx/onnx_internal.h"
#include "proto/onnx.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

/* matmul_add_model's weights: x[1,4] @ W[4,3] + B[3] -> y[1,3]. */
extern const float W[12];
extern const float B[3];

void onnx_test_teardown(void);
void *tcalloc(size_t n, size_t size);
char *tstr(const char *s);
char *path_in(const char *name);
void write_bytes(const char *path, const void *data, size_t len);
char **split(const char *spec, size_t *n);
Onnx__ModelProto *model_new(int64_t opset);
Onnx__NodeProto *node_add(Onnx__GraphProto *g, const char *op, const char *name, const char *ins,
                          const char *outs);
Onnx__AttributeProto *attr_new(Onnx__NodeProto *n, const char *name,
                               Onnx__AttributeProto__AttributeType type);
void attr_int(Onnx__NodeProto *n, const char *name, int64_t v);
void attr_ints(Onnx__NodeProto *n, const char *name, const int64_t *v, size_t k);
Onnx__TensorProto *tensor_new(const char *name, int dtype, const int64_t *dims, size_t rank);
void tensor_raw(Onnx__TensorProto *t, const void *data, size_t len);
Onnx__TensorProto *tensor_f32(const char *name, const int64_t *dims, size_t rank, const float *v,
                              size_t n, bool raw);
Onnx__TensorProto *tensor_i64(const char *name, const int64_t *dims, size_t rank, const int64_t *v,
                              size_t n, bool raw);
void init_add(Onnx__GraphProto *g, Onnx__TensorProto *t);
void ext_entry(Onnx__TensorProto *t, const char *key, const char *value);
Onnx__ValueInfoProto *vi_new(const char *name, int elem, const char *dims);
void input_add(Onnx__GraphProto *g, const char *name, int elem, const char *dims);
void output_add(Onnx__GraphProto *g, const char *name, int elem, const char *dims);
void write_model(Onnx__ModelProto *m, const char *path);
enum cp_status import_as(Onnx__ModelProto *m, const char *file, const struct cp_input_shape *shapes,
                         size_t n_shapes, struct cp_graph **g, struct cp_diag *d);
enum cp_status import(Onnx__ModelProto *m, struct cp_graph **g, struct cp_diag *d);
void expect_error(Onnx__ModelProto *m, enum cp_status st, const char *part);
const struct cp_tensor *tensor_named(const struct cp_graph *g, const char *name);
Onnx__ModelProto *matmul_add_model(int64_t opset);

#endif
