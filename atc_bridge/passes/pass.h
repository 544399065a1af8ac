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
    /* The pass running (its table name), for per-instance switches. */
    const char *pass_name;
    /* What the target can do (from the CPU's ISA flags). */
    bool has_bf16;         /* avx512_bf16 or amx_bf16 */
    bool has_fp16;         /* avx512_fp16 */
    bool has_vnni;         /* avx512_vnni: int8 weights may use all 8 bits */
    int vector_floats;     /* f32 lanes of a vector: 16 with avx512f, 8 else; 0: 16 */
    const char *cpu_model; /* for messages: "AMD EPYC" */
    /* g is an If branch or a Loop/Scan body: the cleanup passes fold only
     * what initializers determine, never a value inference derived from an
     * outer tensor's shape, which a run at another batch would change. */
    bool in_subgraph;
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
extern const struct cp_pass cp_quant_passes[];
extern const struct cp_pass cp_fusion_passes[];
extern const struct cp_pass cp_attention_passes[];
extern const struct cp_pass cp_layout_passes[];
extern const struct cp_pass cp_precision_passes[];

/* ---- the pass manager (manager.c) ---------------------------------------- */

/* What the target CPU can do; passes read it through cp_pass_ctx. */
struct cp_pass_target {
    bool has_bf16;
    bool has_fp16;
    bool has_vnni;
    int vector_floats; /* 16 with avx512f, else 8 */
    char cpu_model[256];
};

/* The target this process runs on (core/host.h). */
void cp_pass_target_detect(struct cp_pass_target *t);

/* What one pass did, as the .om records it. Strings are static. */
struct cp_pass_record {
    const char *name;
    const char *group;
    bool ran;     /* false when switched off */
    bool changed; /* the pass reported a change */
    bool final;   /* the manager's closing dead-node sweep */
    size_t nodes_before, nodes_after;
};

struct cp_pass_report {
    struct cp_pass_record *records; /* malloc'ed */
    size_t n;
};

void cp_pass_report_release(struct cp_pass_report *r);

/* The records as a compact JSON array, keys in a fixed order:
 * [{"name","group","ran","changed","nodes_before","nodes_after"[,"final"]}]. */
void cp_pass_report_json(const struct cp_pass_report *r, struct cp_buf *out);

/* Look a pass up by name; NULL if none. */
const struct cp_pass *cp_pass_lookup(const char *name);

/* Run every pass in order (cleanup, batch, fusion, attention, layout,
 * precision) on a verified, compacted and inferred graph, skipping those
 * the config's fusion switches turn off; after each pass that reports a
 * change, compact, verify and re-infer. Then a final dead-node sweep,
 * compaction, removal of unused tensors, verification and inference.
 * Errors name the pass (and, through its message, the node). `target` may
 * be NULL (detected), `log` may be NULL (warnings to stderr). OUT: *report
 * (may be NULL; release with cp_pass_report_release; empty on failure). */
enum cp_status cp_passes_run(struct cp_graph *g, const struct cp_convert_config *c,
                             const struct cp_pass_target *target, const struct cp_log *log,
                             struct cp_pass_report *report, struct cp_diag *d);

/* Run one pass by name, then (if it changed the graph) compact, verify and
 * infer as the manager does; for tests and tools. `c` may be NULL (the
 * defaults). OUT: *changed (may be NULL). CP_ERR_USAGE for an unknown name. */
enum cp_status cp_pass_run_one(struct cp_graph *g, const char *name,
                               const struct cp_convert_config *c, bool *changed, struct cp_diag *d);

/* ---- fusion switches (switches.c) ------------------------------------------ */

/* Parse a fusion switch file's bytes (`path` names it in messages) into the
 * canonical switch text (see struct cp_convert_config.fusion_switches).
 * OUT: out[cap]. */
enum cp_status cp_fusion_switches_parse(const char *path, const char *text, size_t len,
                                        const struct cp_log *log, char *out, size_t cap,
                                        struct cp_diag *d);

/* Whether canonical switch text switches pass `pass` off for the nodes
 * standing for ONNX node `node` ("Pass@NODE:off"). */
bool cp_fusion_switch_instance_off(const char *switches, const char *pass, const char *node);

/* Decide each pass from canonical switch text: off[i] for run-order index
 * i (cp_pass_count() entries). CP_ERR_USAGE naming an unknown pass or a
 * malformed entry. */
enum cp_status cp_fusion_switches_decide(const char *text, bool *off, struct cp_diag *d);

/* precision.c: whether --keep_dtype's canonical list `canon` covers node
 * n: one of its origins is listed, or its op type (ONNX spelling, or the
 * op the fused node grew from: Conv for FusedConv, MatMul and Gemm for
 * FusedMatMul, MatMul for FusedAttention) as "OpType::X". */
bool cp_keep_dtype_covers(const char *canon, const struct cp_node *n);

/* ---- [legacy] ---- */
/* precision_legacy.c: f16/bf16 weights widened to f32, half graph inputs
 * and outputs cast at the boundary, the model's casts to half made casts
 * to f32 (the modes that compute in fp32). OUT: *changed (set, not
 * cleared). */
enum cp_status cp_precision_widen_half(struct cp_pass_ctx *ctx, bool *changed);
/* ---- end [legacy] ---- */

#endif
