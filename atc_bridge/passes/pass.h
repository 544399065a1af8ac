/*
 * Private to atc_bridge/: the conversion pass interface.
 *
 * A pass is a const table entry: an ATC-style name (it is what a fusion
 * switch file names), the switch group it belongs to ("GraphFusion" or
 * "UBFusion", as in ATC's fusion switch files), a one-line description for
 * `convert --list-passes`, and a run function that rewrites the graph in
 * place. Passes come in families, each a NULL-name-terminated table in its
 * own file; the pass manager (manager.c) runs the families in a fixed order:
 *
 *   cp_cleanup_passes    constant folding, Identity/Dropout removal, dead
 *                        nodes, Conv+BatchNorm folding, transposes
 *   cp_batch_passes      dynamic batch: generalise hard-coded batch sizes
 *   cp_fusion_passes     conv/matmul + bias + activation + residual,
 *                        LayerNorm, GroupNorm, GELU
 *   cp_attention_passes  attention → FusedAttention
 *   cp_layout_passes     layout regions, TransData, NHWC round trips
 *   cp_precision_passes  bf16 marking, implementation mode
 *
 * Contract of a pass: it leaves a valid graph (verify passes) whose outputs
 * compute the same function within the tolerance of its precision mode; it
 * marks removed nodes dead (node->dead) instead of freeing them; it merges
 * `origins` into every node it creates from others; it never renames graph
 * inputs or outputs. The manager compacts, verifies and re-infers shapes
 * after every pass that reports a change, and records node counts before and
 * after each pass in the .om.
 */
#ifndef CP_ATC_PASS_H
#define CP_ATC_PASS_H

#include "atc_bridge/convert.h"
#include "graph/graph.h"

#include <stdbool.h>

struct cp_pass_ctx {
    struct cp_graph *g;
    const struct cp_convert_config *config;
    struct cp_diag *d;
    const struct cp_log *log;
    /* What the target can do (from the CPU's ISA flags). */
    bool has_bf16; /* avx512_bf16 or amx_bf16 */
    bool has_fp16; /* avx512_fp16 */
};

struct cp_pass {
    const char *name;        /* e.g. "FlashAttentionFusionPass"; NULL ends a table */
    const char *group;       /* "GraphFusion" or "UBFusion" */
    const char *description; /* one line */
    /* Rewrite ctx->g. OUT: *changed, whether anything changed. Errors go to
     * ctx->d naming the node. */
    enum cp_status (*run)(struct cp_pass_ctx *ctx, bool *changed);
};

extern const struct cp_pass cp_cleanup_passes[];
extern const struct cp_pass cp_batch_passes[];
extern const struct cp_pass cp_fusion_passes[];
extern const struct cp_pass cp_attention_passes[];
extern const struct cp_pass cp_layout_passes[];
extern const struct cp_pass cp_precision_passes[];

#endif
