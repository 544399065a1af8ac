/* Test support: run the example models through the library, as the
 * conversion tests need it (no Criterion here: every helper returns a
 * status and fills a diag, so it can be used from any test).
 *
 * A `struct cp_ex_io` is a set of host tensors (inputs or outputs) in a
 * fixed order. */
#ifndef CP_TEST_EXAMPLES_H
#define CP_TEST_EXAMPLES_H

#include "knowledge/kb_tuning.h"
#include "runner/runner.h"

#define CP_EX_MAX_IO 8

struct cp_ex_io {
    struct cp_host_tensor t[CP_EX_MAX_IO];
    size_t n;
};

void cp_ex_io_release(struct cp_ex_io *io);

/* The example models, in a fixed order; NULL-terminated. */
extern const char *const cp_ex_models[];

/* examples/models/NAME/test_data_set_0/input_<i>.pb, in order. */
enum cp_status cp_ex_read_inputs(const char *name, struct cp_ex_io *in, struct cp_diag *d);

/* The same inputs with dimension 0 repeated `batch` times (each item a copy
 * of the batch-1 input). */
enum cp_status cp_ex_repeat_batch(const struct cp_ex_io *in, int64_t batch, struct cp_ex_io *out,
                                  struct cp_diag *d);

/* Import examples/models/NAME.onnx as `cannprof run X.onnx` and the tuner
 * read it: import, verify, compact, infer, no passes. OUT: *g (caller
 * frees), hash (when not NULL) its 32-digit source hash. */
enum cp_status cp_ex_import(const char *name, struct cp_graph **g, char hash[33],
                            struct cp_diag *d);

/* The knowledge-base fingerprint of examples/models/NAME.onnx, taken as the
 * tuner takes it (cp_ex_import, then cp_kb_fingerprint_graph). OUT: *fp. */
enum cp_status cp_ex_fingerprint(const char *name, struct cp_kb_fingerprint *fp, struct cp_diag *d);

/* Open examples/models/NAME.onnx unconverted, as `cannprof run X.onnx`
 * does (cp_ex_import). OUT: *m. */
enum cp_status cp_ex_open_onnx(struct cp_runtime *rt, const char *name, struct cp_model **m,
                               struct cp_diag *d);

/* Plan `m` (at `batch` when > 0), set the inputs by name, run once and
 * copy every output out. OUT: *out. */
enum cp_status cp_ex_run(struct cp_model *m, int64_t batch, const struct cp_ex_io *in,
                         struct cp_ex_io *out, struct cp_diag *d);

/* Relative L2 error of `got` against `ref` (every output pooled, matched by
 * position): the precision_loss of docs/precision.md divided by 100.
 * Shapes must agree; CP_ERR_INVALID naming the output otherwise. */
enum cp_status cp_ex_rel_l2(const struct cp_ex_io *ref, const struct cp_ex_io *got, double *rel,
                            struct cp_diag *d);

#endif
