/*
 * atc_bridge: model conversion, the CPU target's counterpart of CANN's ATC.
 *
 * The knobs are `struct cp_convert_config` (om/config.h, recorded in every
 * .om); ONNX files are read by onnx/onnx.h. `cp_convert` runs import,
 * verification and inference, the conversion passes (passes/: the pass
 * manager runs the cleanup, batch, fusion, attention, layout and precision
 * families in that order, each pass switchable by an ATC fusion switch
 * file), and writes the .om (om/om.h) with a record of what each pass did.
 */
#ifndef CP_CONVERT_H
#define CP_CONVERT_H

#include "core/core.h"
#include "graph/graph.h"
#include "om/config.h"
#include "onnx/onnx.h"

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

/* Whether passes of `family` are fusion passes, the ones a fusion switch
 * file's "ALL" covers: every family but quant, layout and precision, whose
 * passes carry knobs of their own (--int8_nodes, --layout_policy,
 * --precision_mode). */
bool cp_pass_family_is_fusion(const char *family);

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
