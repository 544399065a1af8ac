/* A model ready to run, as run, bench, compare and the tuner need it: open
 * a model (.om, or .onnx run unconverted), build a plan, and feed it inputs
 * from files or seeded random data. */
#ifndef CP_RUNNER_SESSION_H
#define CP_RUNNER_SESSION_H

#include "runner/runner.h"

#include <stdbool.h>

struct cp_session {
    struct cp_runtime *rt;
    struct cp_model *model;
    struct cp_plan *plan;
    struct cp_convert_config shapes; /* only input_shapes is used */
    bool from_onnx;
};

struct cp_session_opts {
    const char *model_path;
    const char *input_shape; /* "--input_shape" text or NULL */
    int64_t batch;           /* 0: the model's */
    int64_t open_dim0;       /* batch 0: a first dimension the model leaves open is this */
    int threads;             /* 0: all cores */
    int buffer_optimize;     /* -1: the model's */
    struct cp_trace_recorder *trace;
    int trace_thread; /* cp_runtime_options.trace_thread */
    /* An .onnx only: intermediate tensors to copy out after each run, as
     * extra outputs after the model's own (calibration reads activations
     * so). A name the graph lacks is an error; a graph input or output is
     * not added again. */
    const char *const *extra_outputs;
    size_t n_extra_outputs;
};

/* Open the model and build the plan. Errors go to `d`. */
enum cp_status cp_session_open(struct cp_session *s, const struct cp_session_opts *o,
                               struct cp_diag *d);
void cp_session_close(struct cp_session *s);

/* The inputs of a plan, in plan order: read from files or drawn at random.
 * file[i] is the file input i came from, or NULL for random data. */
struct cp_session_inputs {
    struct cp_host_tensor *t;
    const char **file;
    size_t n;
};

/* Make every input of s's plan: from "--input NAME=FILE" values (n of
 * them), or, for inputs not given, from seeded random data (seed + the
 * input's index). A FILE alone is accepted when the model has exactly one
 * input. Errors name the input and file. OUT: *out (release with
 * cp_session_inputs_release; empty on failure). */
enum cp_status cp_session_make_inputs(struct cp_session *s, const char *const *inputs, size_t n,
                                      uint64_t seed, struct cp_session_inputs *out,
                                      struct cp_diag *d);
void cp_session_inputs_release(struct cp_session_inputs *in);

/* Set every input: from "--input NAME=FILE" values (n of them), or, for
 * inputs not given, from seeded random data. A FILE alone is accepted when
 * the model has exactly one input. Errors name the input and file. */
enum cp_status cp_session_set_inputs(struct cp_session *s, const char *const *inputs, size_t n,
                                     uint64_t seed, struct cp_diag *d);

/* The items one run of the plan processes, for throughput: `batch` when
 * > 0 (a --batch profile), else dimension 0 of the first input (1 when it
 * has none). */
int64_t cp_session_items_per_run(const struct cp_plan *p, int64_t batch);

/* Store a measured run of `s` in a trace store: the run (kind, model path,
 * the source-model hash and conversion config the .om records, threads,
 * batch as cp_session_items_per_run(batch) gives it, warm-up, memory), its
 * n latency samples (iterations 0..n-1), the plan's kernel table, every
 * event of `rec`, and peak RSS as a counter. OUT: *run_id. */
enum cp_status cp_session_store_run(struct cp_session *s, struct cp_trace_store *store,
                                    const char *kind, const char *model_path,
                                    struct cp_trace_recorder *rec, int64_t batch, int64_t warmup,
                                    const uint64_t *ns, size_t n, uint64_t rss, int64_t *run_id,
                                    struct cp_diag *d);

#endif
