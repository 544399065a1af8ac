/*
 * runner: executing a CPU .om.
 *
 * A `struct cp_runtime` is the one explicit context (no globals): the thread
 * count, the oneDNN engine and stream, and an optional trace recorder. A
 * `struct cp_model` is a loaded .om: the graph whose weights stay mmapped,
 * plus its metadata. A `struct cp_plan` is what runs: shapes made concrete
 * (from the model, from --input_shape, or from a dynamic-batch profile), a
 * kernel instance per node, and a memory placement per tensor in one arena
 * planned from liveness (buffer_optimize l2_optimize) or without reuse
 * (off_optimize). Building a plan does all allocation and primitive
 * creation; running it allocates nothing.
 *
 * Kernels (cpu/): every op has a reference kernel in plain C; faster
 * kernels (oneDNN primitives, vectorised C) are chosen when their
 * `supports` predicate accepts the node, and are checked against the
 * reference by the test harness.
 *
 * Tensor I/O (io.c): ONNX TensorProto .pb files and NumPy .npy (format 1 and
 * 2, little-endian, C order) in; .npy out; seeded random inputs.
 */
#ifndef CP_RUNNER_H
#define CP_RUNNER_H

#include "core/core.h"
#include "graph/graph.h"
#include "om/config.h"
#include "om/om.h"
#include "trace/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- host tensors (I/O) ------------------------------------------------- */

/* A dense, C-order tensor in host memory, owning its data. */
struct cp_host_tensor {
    char name[256];
    enum cp_dtype dtype;
    int rank;
    int64_t dims[CP_MAX_RANK];
    void *data; /* malloc'ed; freed by cp_host_tensor_release */
    size_t nbytes;
};

void cp_host_tensor_release(struct cp_host_tensor *t);
int64_t cp_host_tensor_numel(const struct cp_host_tensor *t);

/* Read an ONNX TensorProto (.pb) or a NumPy .npy file, chosen by content.
 * OUT: *t. Errors name the file and what is wrong (unsupported dtype,
 * big-endian or Fortran-order .npy, truncated data). */
enum cp_status cp_tensor_read_file(const char *path, struct cp_host_tensor *t, struct cp_diag *d);
/* The same from bytes in memory (an HTTP body); `name` stands for the file
 * in messages and names the tensor when the bytes do not. */
enum cp_status cp_tensor_read_buffer(const char *name, const void *data, size_t len,
                                     struct cp_host_tensor *t, struct cp_diag *d);
/* A tensor as .npy bytes (format 1.0; *bytes malloc'ed); `path` for
 * messages. */
enum cp_status cp_tensor_npy_encode(const struct cp_host_tensor *t, const char *path,
                                    uint8_t **bytes, size_t *len, struct cp_diag *d);
/* Write a .npy (format 1.0, little-endian, C order), atomically. */
enum cp_status cp_tensor_write_npy(const char *path, const struct cp_host_tensor *t,
                                   struct cp_diag *d);
/* Fill with deterministic pseudo-random values from `seed`: floats uniform
 * in [-1, 1), integers in [0, 10), bools 0/1. `t` has dtype, rank and dims
 * set; data is allocated here. */
enum cp_status cp_tensor_fill_random(struct cp_host_tensor *t, uint64_t seed, struct cp_diag *d);

/* ---- runtime ------------------------------------------------------------ */

struct cp_runtime_options {
    int threads;                     /* <= 0: number of online cores */
    struct cp_trace_recorder *trace; /* optional; borrowed, not freed */
    /* The thread its runtime and kernel events are recorded on (0: the
     * default): a flow's inference worker puts them on its own track. */
    int trace_thread;
    /* The most memory one plan may allocate: its activation arena plus its
     * kernels' scratch (weights stay mapped and do not count). 0: the
     * environment's CANNPROF_MAX_PLAN_BYTES (a byte count, "16G", or
     * "none"), else the machine's physical memory. A plan that needs more
     * is refused before anything is allocated (CP_ERR_UNSUPPORTED, naming
     * the sizes, the largest tensor and its node). */
    uint64_t max_plan_bytes;
};

#define CP_MAX_PLAN_BYTES_ENV "CANNPROF_MAX_PLAN_BYTES"

struct cp_runtime;

/* Create a runtime. CP_ERR_USAGE when CANNPROF_MAX_PLAN_BYTES is set but is
 * not a byte count. OUT: *rt (free with cp_runtime_free). */
enum cp_status cp_runtime_create(const struct cp_runtime_options *opt, struct cp_runtime **rt,
                                 struct cp_diag *d);
void cp_runtime_free(struct cp_runtime *rt); /* NULL is a no-op */
int cp_runtime_threads(const struct cp_runtime *rt);
/* The plan memory limit in force (UINT64_MAX: none). */
uint64_t cp_runtime_max_plan_bytes(const struct cp_runtime *rt);
struct cp_trace_recorder *cp_runtime_trace(const struct cp_runtime *rt);
/* Pause (or resume) recording into the runtime's recorder: a paused
 * runtime's runs record nothing and read no clock, as without one. Call it
 * between runs, from the thread that runs them. */
void cp_runtime_pause_trace(struct cp_runtime *rt, bool paused);

/* ---- models ------------------------------------------------------------- */

struct cp_model;

/* Load a .om (weights stay mmapped). Ops that have no kernel are reported at
 * load, naming the node (CP_ERR_UNSUPPORTED). A newer format version gives
 * CP_ERR_VERSION. OUT: *m. */
enum cp_status cp_model_load(struct cp_runtime *rt, const char *path, struct cp_model **m,
                             struct cp_diag *d);
/* Wrap an already-built graph (e.g. an .onnx imported without conversion);
 * the model takes ownership of `g` even on failure. */
enum cp_status cp_model_from_graph(struct cp_runtime *rt, struct cp_graph *g,
                                   const struct cp_om_meta *meta, struct cp_model **m,
                                   struct cp_diag *d);
void cp_model_free(struct cp_model *m); /* NULL is a no-op */
const struct cp_graph *cp_model_graph(const struct cp_model *m);
const struct cp_om_meta *cp_model_meta(const struct cp_model *m);

/* ---- plans -------------------------------------------------------------- */

struct cp_plan_options {
    /* Concrete shapes for inputs with dynamic dimensions (or overrides);
     * NULL/0 to use the model's. */
    const struct cp_input_shape *input_shapes;
    size_t n_input_shapes;
    int64_t batch; /* > 0: pick this dynamic-batch profile / set dim 0 */
    /* > 0 and batch not: a first dimension the model leaves open (and no
     * profile or --input_shape sets) is this, not an error */
    int64_t open_dim0;
    /* -1: the model's buffer_optimize; else enum cp_buffer_opt. */
    int buffer_optimize;
    bool reference_only; /* use only reference kernels (tests, debugging) */
};

struct cp_plan;

/* Build a plan: concrete shapes, kernels, memory. Errors name the input or
 * node at fault (e.g. an input with a dynamic dimension and no shape). */
enum cp_status cp_plan_create(struct cp_model *m, const struct cp_plan_options *opt,
                              struct cp_plan **p, struct cp_diag *d);
void cp_plan_free(struct cp_plan *p); /* NULL is a no-op */

struct cp_mem_report {
    uint64_t weight_bytes;  /* initializer bytes the plan reads */
    uint64_t arena_bytes;   /* activation arena size */
    uint64_t peak_bytes;    /* largest sum of live activations at any step */
    uint64_t scratch_bytes; /* kernel workspaces */
};
void cp_plan_memory(const struct cp_plan *p, struct cp_mem_report *out);

/* Graph inputs/outputs of the plan, with their concrete shapes. */
size_t cp_plan_n_inputs(const struct cp_plan *p);
size_t cp_plan_n_outputs(const struct cp_plan *p);
const struct cp_tensor *cp_plan_input(const struct cp_plan *p, size_t i);
const struct cp_tensor *cp_plan_output(const struct cp_plan *p, size_t i);

/* Copy an input in. The tensor's dtype and shape must match the plan's
 * input exactly (an input tagged NHWC, from --input_format NHWC, also takes
 * its [N, H, W, C] shape: the bytes are NHWC either way); the error names
 * the input and both shapes. */
enum cp_status cp_plan_set_input(struct cp_plan *p, size_t i, const struct cp_host_tensor *t,
                                 struct cp_diag *d);
/* Copy rows [row, row + n_rows) of input i's first dimension in from
 * `data` (nbytes: n_rows of its rows): a batch stacked from its requests
 * straight into the plan, no buffer between. The caller checked each
 * row's dtype and shape. Errors (CP_ERR_INVALID): no such input, a
 * constant, a scalar, rows past the first dimension, nbytes not n_rows
 * rows. */
enum cp_status cp_plan_set_input_rows(struct cp_plan *p, size_t i, int64_t row, int64_t n_rows,
                                      const void *data, size_t nbytes, struct cp_diag *d);
/* Execute once. `iteration` is stamped on trace events (-1: none). */
enum cp_status cp_plan_run(struct cp_plan *p, int32_t iteration, struct cp_diag *d);
/* Copy an output out. OUT: *t (release with cp_host_tensor_release). */
enum cp_status cp_plan_get_output(struct cp_plan *p, size_t i, struct cp_host_tensor *t,
                                  struct cp_diag *d);
/* An output where the plan holds it, not copied: t->data borrows the
 * plan's memory until its next run (do not release it); a batch's caller
 * copies each request's rows out of it once. */
enum cp_status cp_plan_output_view(const struct cp_plan *p, size_t i, struct cp_host_tensor *t,
                                   struct cp_diag *d);

/* The kernels that can run node `node` of the plan (its name in the
 * converted graph) on this CPU, in the order the plan prefers them, the
 * reference last: their names (static strings) into out[cap]. Returns how
 * many there are; 0 for a node the plan lacks. What --op_kernels may pin it
 * to. */
size_t cp_plan_kernel_choices(const struct cp_plan *p, const char *node, const char **out,
                              size_t cap);

/* The plan's kernels as a trace kernel table (strings owned by the plan). */
size_t cp_plan_n_kernels(const struct cp_plan *p);
const struct cp_trace_kernel *cp_plan_kernels(const struct cp_plan *p);

/* Peak resident set size of this process, in bytes (getrusage). */
uint64_t cp_peak_rss_bytes(void);

/* ---- output comparison (compare.c; docs/precision.md) ------------------- */

/* How a candidate tensor b differs from a reference tensor a. */
struct cp_tensor_diff {
    int64_t n;                    /* elements compared */
    double max_abs;               /* max |a - b| */
    double mean_abs;              /* mean |a - b| */
    double rel_l2;                /* ||a - b||_2 / ||a||_2 (0 when equal, inf when a = 0 != b) */
    double cosine;                /* a.b / (||a|| ||b||); 1 when both are zero */
    double ref_sq;                /* sum a^2, to pool outputs into one precision_loss */
    double diff_sq;               /* sum (a - b)^2 */
    int64_t n_beyond;             /* elements with |a - b| > atol + rtol |a| */
    int64_t n_nonfinite_mismatch; /* NaN/Inf in one but not (the same) in the other */
    int64_t worst_index;          /* element furthest beyond tolerance; -1 when n = 0 */
    double worst_ref, worst_cand; /* the values there */
    bool within;                  /* n_beyond == 0 */
};

/* Compare `cand` against `ref` elementwise (any numeric dtypes, read as
 * double). Non-finite values agree only with the same non-finite value.
 * CP_ERR_INVALID, naming the output and both shapes, when shapes differ.
 * OUT: *out. */
enum cp_status cp_tensor_compare(const struct cp_host_tensor *ref,
                                 const struct cp_host_tensor *cand, double rtol, double atol,
                                 struct cp_tensor_diff *out, struct cp_diag *d);

/* sqrt(diff_sq) / sqrt(ref_sq), with 0/0 = 0 and x/0 = inf. */
double cp_rel_l2(double diff_sq, double ref_sq);

/* precision_loss in percent: the relative L2 error of all outputs taken
 * together (as one concatenated vector), times 100. Inf when any output has
 * a non-finite mismatch. */
double cp_precision_loss(const struct cp_tensor_diff *diffs, size_t n);

#endif
