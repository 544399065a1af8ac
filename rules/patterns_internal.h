/*
 * Private to rules/patterns*.c: a trace's kernel table as graph/pattern.h's
 * matchers read a graph (struct cp_pattern_view), so the rule engine runs
 * the matchers the passes run and reports exactly what a pass would fuse.
 *
 * A kernel table is not a graph; patterns_view.c fills the gaps, and
 * docs/features.md ("What a trace does not say") lists the assumptions:
 *
 *  - nodes: each kernel, then one node per view (Reshape and friends run no
 *    kernel; a kernel input with "view_of" reads one): op Identity when it
 *    keeps its source's shape, else Reshape, one input (the source);
 *  - TransData kernels (LayoutTransformPass's, which runs after every pass
 *    that fuses) are looked through: their readers read what they read,
 *    as the fusing passes saw the graph; the TransData nodes are dead;
 *  - tensors: named by the kernels; a tensor no kernel (and no view) makes
 *    is a constant (a weight; a graph input cannot be told from one), with
 *    the dtype and shape the table gives but no values;
 *  - attributes: none are recorded. Those the matchers need are worked out
 *    from shapes where they can be (a Transpose's perm, a reduction's axes
 *    and keepdims, a FusedMatMul's transA/transB, a LayerNormalization's
 *    axis); every other attribute is at its ONNX default. A FusedMatMul
 *    with a constant right-hand side in a run whose conversion had
 *    MatMulBiasActivationFusionPass on may already hold an activation: it
 *    is given activation "unknown", so no epilogue is matched after it (the
 *    pass, run again, would leave it too);
 *  - no graph outputs, no opset (CP_PATTERN_OPSET_UNKNOWN).
 */
#ifndef CP_RULES_PATTERNS_INTERNAL_H
#define CP_RULES_PATTERNS_INTERNAL_H

#include "core/hashmap.h"
#include "graph/pattern.h"
#include "rules/features_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cp_trace_view {
    const struct cp_fload *l;
    size_t n_kernels;      /* nodes [0, n_kernels) are the kernel rows */
    struct cp_node *nodes; /* the kernels, then the views */
    size_t n_nodes;
    struct cp_tensor *tensors; /* one per tensor name */
    size_t n_tensors;
    size_t *read_start; /* per tensor: first of its readers in `readers` (n_tensors + 1) */
    int32_t *readers;   /* distinct reading nodes, in index order */
    size_t *n_reads;    /* per tensor: input slots reading it */
    /* storage the nodes point into */
    int32_t *slots;
    struct cp_attr *attrs;
    int64_t *ints;
    struct cp_strmap names; /* tensor name -> index */
    struct cp_pattern_view view;
};

/* Build the view of the kernels in l. `matmul_pass_off`: the run's
 * conversion had MatMulBiasActivationFusionPass switched off (see above).
 * OUT: *tv (release with cp_trace_view_release, also after a failure).
 * CP_ERR_NOMEM only. */
enum cp_status cp_trace_view_build(struct cp_trace_view *tv, const struct cp_fload *l,
                                   bool matmul_pass_off, struct cp_diag *d);
void cp_trace_view_release(struct cp_trace_view *tv);

/* The kernel row whose output is named `name` (a view's source, a
 * TransData's output: the table's own links), or -1. */
int32_t cp_trace_view_maker(const struct cp_trace_view *tv, const char *name);

/* Whether view node n is a kernel (a row of the table), not a view. */
bool cp_trace_view_is_kernel(const struct cp_trace_view *tv, int32_t n);

#endif
