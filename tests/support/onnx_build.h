/* Test support: ONNX models built one piece at a time, for tests that craft
 * a model on purpose (an attribute of 2^62, an initializer that asks for
 * more elements than any machine holds, a Range that never ends) and hand
 * it to the CLI or the importer.
 *
 * A builder owns everything it allocates; cp_t_onnx_free releases it all.
 * As with struct cp_buf, a failed allocation marks the builder failed, the
 * later calls do nothing, and cp_t_onnx_write / cp_t_onnx_bytes report it,
 * so a test checks once at the end. No Criterion here (see cli.h).
 *
 *     struct cp_t_onnx *m = cp_t_onnx_new(17);
 *     cp_t_onnx_input(m, "x", CP_T_F32, 2, (int64_t[]){4, 4});
 *     cp_t_onnx_init_i64(m, "shape", 1, (int64_t[]){2}, (int64_t[]){1 << 20, 16}, 2);
 *     cp_t_onnx_node(m, "Reshape", "reshape", "x,shape", "y");
 *     cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
 *     cr_assert(cp_t_onnx_write(m, path));
 *     cp_t_onnx_free(m);
 */
#ifndef CP_TEST_ONNX_BUILD_H
#define CP_TEST_ONNX_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ONNX TensorProto.DataType values the tests use. */
#define CP_T_F32 1
#define CP_T_I32 6
#define CP_T_I64 7

struct cp_t_onnx;

/* An empty model of IR version 8 importing `opset` of the default domain,
 * graph "crafted", producer "cannprof-test". NULL when out of memory. */
struct cp_t_onnx *cp_t_onnx_new(int64_t opset);

/* Free the builder and everything it made. NULL is a no-op. */
void cp_t_onnx_free(struct cp_t_onnx *m);

/* A graph input, output or value_info entry: a tensor of `elem_type` with
 * `rank` dims (an entry < 0 has no value); rank < 0 leaves the shape out. */
void cp_t_onnx_input(struct cp_t_onnx *m, const char *name, int elem_type, int rank,
                     const int64_t *dims);
void cp_t_onnx_output(struct cp_t_onnx *m, const char *name, int elem_type, int rank,
                      const int64_t *dims);
void cp_t_onnx_value_info(struct cp_t_onnx *m, const char *name, int elem_type, int rank,
                          const int64_t *dims);

/* An initializer with raw data: `nbytes` bytes from `data` (copied). The
 * bytes need not match the shape: tests of the importer's checks lie. */
void cp_t_onnx_init(struct cp_t_onnx *m, const char *name, int elem_type, int rank,
                    const int64_t *dims, const void *data, size_t nbytes);
/* An INT64 initializer of `n` values. */
void cp_t_onnx_init_i64(struct cp_t_onnx *m, const char *name, int rank, const int64_t *dims,
                        const int64_t *v, size_t n);
/* An FLOAT initializer of `n` values. */
void cp_t_onnx_init_f32(struct cp_t_onnx *m, const char *name, int rank, const int64_t *dims,
                        const float *v, size_t n);

/* A node `op` named `name` reading the comma-separated tensors `ins` and
 * writing `outs` ("" between commas is an absent optional input). Returns
 * its index for the attribute calls; -1 once the builder failed. */
int cp_t_onnx_node(struct cp_t_onnx *m, const char *op, const char *name, const char *ins,
                   const char *outs);

/* Attributes on node `node` (an index from cp_t_onnx_node; -1 is ignored).
 * A node takes up to 16; a 17th marks the builder failed. */
void cp_t_onnx_attr_int(struct cp_t_onnx *m, int node, const char *name, int64_t v);
void cp_t_onnx_attr_ints(struct cp_t_onnx *m, int node, const char *name, const int64_t *v,
                         size_t n);
void cp_t_onnx_attr_string(struct cp_t_onnx *m, int node, const char *name, const char *v);
void cp_t_onnx_attr_floats(struct cp_t_onnx *m, int node, const char *name, const float *v,
                           size_t n);

/* The packed model. OUT: *len. Returns the bytes (caller frees); NULL when
 * the builder failed or memory runs out. */
uint8_t *cp_t_onnx_bytes(struct cp_t_onnx *m, size_t *len);

/* The packed model written to `path`. False after printing why on stderr
 * (the builder failed, or the file cannot be written). */
bool cp_t_onnx_write(struct cp_t_onnx *m, const char *path);

#endif
