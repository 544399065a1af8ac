/*
 * atc_bridge: model conversion, the CPU target's counterpart of CANN's ATC.
 *
 * `struct cp_convert_config` holds every knob a conversion takes, with ATC's
 * flag names and allowed values. It is parsed from ATC-style flags
 * (config/), recorded verbatim in the .om, printed back as the exact
 * `cannprof convert` command line that reproduces it, and hashed to a stable
 * id. `cp_onnx_import` (onnx/) reads an ONNX file into a graph, and
 * `cp_convert` runs import, verification and inference, the conversion
 * passes (passes/: the pass manager runs the cleanup, batch, fusion,
 * attention, layout and precision families in that order, each pass
 * switchable by an ATC fusion switch file), and writes the .om (om/, see
 * om.h) with a record of what each pass did.
 */
#ifndef CP_CONVERT_H
#define CP_CONVERT_H

#include "core/core.h"
#include "graph/graph.h"

#define CP_MAX_INPUT_SHAPES    16
#define CP_MAX_DYN_BATCH       100
#define CP_FUSION_SWITCHES_MAX 4096

enum cp_precision_mode {
    CP_PREC_FORCE_FP32 = 0, /* the CPU target's default */
    CP_PREC_FORCE_FP16,
    CP_PREC_CUBE_FP16IN_FP32OUT,
    CP_PREC_ALLOW_MIX_PRECISION,
    CP_PREC_ALLOW_FP32_TO_FP16,
    CP_PREC_MUST_KEEP_ORIGIN_DTYPE,
    CP_PREC_ALLOW_MIX_PRECISION_FP16,
    CP_PREC_ALLOW_MIX_PRECISION_BF16,
    CP_PREC_ALLOW_FP32_TO_BF16,
    CP_PREC_COUNT
};

enum cp_implmode {
    CP_IMPL_HIGH_PERFORMANCE = 0, /* ATC's default */
    CP_IMPL_HIGH_PRECISION,
    CP_IMPL_HIGH_PRECISION_FOR_ALL,
    CP_IMPL_HIGH_PERFORMANCE_FOR_ALL,
    CP_IMPL_COUNT
};

enum cp_buffer_opt {
    CP_BUF_L2_OPTIMIZE = 0, /* default: arena reuse */
    CP_BUF_L1_OPTIMIZE,
    CP_BUF_OFF_OPTIMIZE,
    CP_BUF_COUNT
};

enum cp_input_format {
    CP_FMT_NCHW = 0, /* ATC's default for ONNX */
    CP_FMT_NCDHW,
    CP_FMT_ND,
    CP_FMT_NHWC,
    CP_FMT_COUNT
};

/* Where conv regions keep their activations (cannprof's own knob; ATC picks
 * layouts itself, and Ascend's own choice is the blocked NC1HWC0, which is
 * why blocked is the default here). */
enum cp_layout_policy {
    CP_LAYOUT_POLICY_NCHW = 0, /* plain NCHW everywhere */
    CP_LAYOUT_POLICY_NHWC,     /* conv regions in NHWC */
    CP_LAYOUT_POLICY_BLOCKED,  /* conv regions in oneDNN's blocked nChw16c / nChw8c (default) */
    CP_LAYOUT_POLICY_COUNT
};

/* One `name:d0,d1,...` entry of --input_shape; -1 marks a dynamic dimension. */
struct cp_input_shape {
    char name[128];
    int rank;
    int64_t dims[CP_MAX_RANK];
};

struct cp_convert_config {
    char model[1024];  /* --model: source path as given */
    int framework;     /* --framework: 5 (ONNX) */
    char output[1024]; /* --output: path without ".om" */
    struct cp_input_shape input_shapes[CP_MAX_INPUT_SHAPES];
    size_t n_input_shapes;
    enum cp_input_format input_format;
    enum cp_layout_policy layout_policy;
    enum cp_precision_mode precision_mode;
    char fusion_switch_file[1024]; /* "" when none */
    /* The effective switches the file gives, as canonical text: the passes
     * it turns off, sorted by name, "PassA:off;PassB:off" ("" when none).
     * Filled from the file by cp_convert_config_load_fusion_switches (and at
     * conversion time), recorded in the .om and part of the config id, so a
     * .om says what ran even if the file changes later. */
    char fusion_switches[CP_FUSION_SWITCHES_MAX];
    int64_t dynamic_batch[CP_MAX_DYN_BATCH];
    size_t n_dynamic_batch;
    enum cp_buffer_opt buffer_optimize;
    enum cp_implmode implmode;
    char soc_version[64]; /* "cpu" for this target */
    enum cp_log_level log;
};

/* Defaults: framework 5, NCHW input format, blocked layout policy,
 * force_fp32, l2_optimize, high_performance, soc_version "cpu", log null. */
void cp_convert_config_init(struct cp_convert_config *c);

/* Value names, as ATC spells them. */
const char *cp_precision_mode_name(enum cp_precision_mode m);
const char *cp_implmode_name(enum cp_implmode m);
const char *cp_buffer_opt_name(enum cp_buffer_opt b);
const char *cp_input_format_name(enum cp_input_format f);
const char *cp_layout_policy_name(enum cp_layout_policy p);
const char *cp_log_level_name(enum cp_log_level l);

/* Set one knob from its ATC flag name (without dashes) and value text,
 * validating against ATC's allowed values. Errors name the flag and list
 * what is accepted. CP_ERR_USAGE for an unknown flag. */
enum cp_status cp_convert_config_set(struct cp_convert_config *c, const char *flag,
                                     const char *value, struct cp_diag *d);

/* Check the config as a whole (model given, framework 5, soc_version cpu,
 * dynamic batch needs a -1 batch dimension, ...). */
enum cp_status cp_convert_config_validate(const struct cp_convert_config *c, struct cp_diag *d);

/* The exact command line that reproduces the config, starting with
 * "cannprof convert". Flags at their default are left out. */
void cp_convert_config_cmdline(const struct cp_convert_config *c, struct cp_buf *out);

/* The config as a JSON object (every knob, defaults included), keys in a
 * fixed order so equal configs give equal text. */
void cp_convert_config_json(const struct cp_convert_config *c, struct cp_buf *out);

/* Parse the JSON form back (as stored in a .om). */
enum cp_status cp_convert_config_from_json(struct cp_convert_config *c, const char *json,
                                           struct cp_diag *d);

/* Stable id of the knobs that change the produced model (not model/output
 * paths or log level): 16 hex digits + NUL. */
void cp_convert_config_id(const struct cp_convert_config *c, char out[17]);

/* ---- conversion passes ------------------------------------------------- */

/* A conversion pass as `convert --list-passes` shows it. Strings are
 * static. */
struct cp_pass_desc {
    const char *name;        /* ATC-style name, e.g. "ConstantFoldingPass" */
    const char *group;       /* switch group: "GraphFusion" or "UBFusion" */
    const char *family;      /* cleanup, batch, fusion, attention, layout, precision */
    const char *description; /* one line */
};

/* Number of passes, all families. */
size_t cp_pass_count(void);

/* The i-th pass in run order. false when i >= cp_pass_count(). */
bool cp_pass_describe(size_t i, struct cp_pass_desc *out);

/* Run-order index of the pass called `name` (exact, case-sensitive), or -1. */
int cp_pass_index(const char *name);

/* Read config->fusion_switch_file (ATC's JSON form or "PassName:off" lines,
 * see atc_bridge/passes/switches.c) and store the effective switch set in
 * config->fusion_switches; with no file, clear it. Errors name the file and
 * the line (JSON: line and column, or the key): CP_ERR_USAGE for a file
 * that cannot be read, is malformed, or names an unknown pass (the message
 * lists the valid names). A pass listed under the wrong group is accepted
 * with a warning through `log` (may be NULL: stderr at warning level). */
enum cp_status cp_convert_config_load_fusion_switches(struct cp_convert_config *c,
                                                      const struct cp_log *log, struct cp_diag *d);

/* Whether the effective switch set of `c` turns pass `name` off. */
bool cp_convert_config_pass_is_off(const struct cp_convert_config *c, const char *name);

/* ---- ONNX import ------------------------------------------------------- */

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

/* ---- conversion -------------------------------------------------------- */

struct cp_convert_result {
    char om_path[1100];
    size_t nodes_in;
    size_t nodes_out;
    size_t om_bytes;
    double seconds;
    size_t passes_ran;     /* passes that ran (not switched off) */
    size_t passes_changed; /* passes that changed the graph */
};

/* Run a conversion: import config->model, verify, infer, run the conversion
 * passes (the fusion switch file is read again now), write config->output +
 * ".om" atomically. The .om records the effective config and what each pass
 * did. OUT: *res (may be NULL). */
enum cp_status cp_convert(const struct cp_convert_config *config, struct cp_convert_result *res,
                          struct cp_diag *d);

#endif
