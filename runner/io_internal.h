/*
 * Private to runner/io*.c: the pieces of host-tensor I/O.
 *
 * io.c owns the public entry points: it maps the file, picks the format by
 * content (the "\x93NUMPY" magic means .npy, anything else is tried as an
 * ONNX TensorProto) and hands the bytes to io_npy.c or io_pb.c. Both readers
 * fill a zeroed `struct cp_host_tensor` and leave it zeroed on failure; every
 * message they write starts with the file's path.
 */
#ifndef CP_RUNNER_IO_INTERNAL_H
#define CP_RUNNER_IO_INTERNAL_H

#include "runner/runner.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The 6-byte .npy magic: 0x93 then "NUMPY". */
#define CP_NPY_MAGIC     "\x93NUMPY"
#define CP_NPY_MAGIC_LEN 6

/* Whether `data` starts with the .npy magic, or (short files) with a prefix
 * of it: a file cut inside its magic is still a truncated .npy. */
bool cp_io_looks_like_npy(const uint8_t *data, size_t len);

/* Decode a .npy held in memory. `path` is for messages and the tensor's name.
 * OUT: *t (data malloc'ed). */
enum cp_status cp_io_read_npy(const char *path, const uint8_t *data, size_t len,
                              struct cp_host_tensor *t, struct cp_diag *d);

/* Decode an ONNX TensorProto held in memory. OUT: *t (data malloc'ed). */
enum cp_status cp_io_read_pb(const char *path, const uint8_t *data, size_t len,
                             struct cp_host_tensor *t, struct cp_diag *d);

/* The tensor's name from its path: the basename without its last extension
 * ("dir/x.input.npy" -> "x.input"), truncated to fit `t->name`. */
void cp_io_name_from_path(struct cp_host_tensor *t, const char *path);

/* Check dtype, rank and dims of `t` and compute its byte size. `what` names
 * the tensor in messages. OUT: *nbytes. CP_ERR_INVALID or CP_ERR_UNSUPPORTED
 * naming the problem. */
enum cp_status cp_io_tensor_bytes(const struct cp_host_tensor *t, const char *what, size_t *nbytes,
                                  struct cp_diag *d);

/* malloc(n), but never NULL for n == 0 (so memcpy of zero bytes is never
 * handed a NULL pointer). Caller frees. */
void *cp_io_alloc(size_t n);

#endif
