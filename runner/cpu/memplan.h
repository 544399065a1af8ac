/*
 * Private to runner/: the memory planner.
 *
 * Time is counted in steps, one per executed kernel (0 .. n_steps-1), plus
 * a final step n_steps at which the caller reads the outputs. A buffer is
 * live from the step that writes it to the last step that reads it, both
 * inclusive, so a kernel's inputs and outputs never share bytes, with one
 * exception: with reuse, a FusedConv may write over its residual input
 * when nothing reads that afterwards (its kernels allow it).
 *
 * Which tensor needs which buffer comes from the graph (cp_memplan_build):
 * - every tensor an executed node writes gets a buffer;
 * - graph inputs get a buffer live over the whole run (steps 0..n_steps),
 *   so a plan can run many times after one cp_plan_set_input;
 * - graph outputs stay live to step n_steps, so nothing overwrites them;
 * - a view node (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout
 *   without a used mask) runs nothing: its output's root is the root of
 *   its input 0, whose buffer then lives as long as any reader of the view;
 * - initializers are read in place (their root is themselves, no buffer).
 *
 * Placement (cp_memplan_place): with reuse (l2_optimize, l1_optimize),
 * greedy by size: buffers in decreasing size, each at the lowest
 * 64-byte-aligned offset where it overlaps no already-placed buffer whose
 * lifetime overlaps its own. Without reuse (off_optimize), each buffer at
 * its own offset, one after another. The arena size is the end of the
 * highest buffer; peak is the largest sum of live (aligned) sizes at any
 * step, the lower bound any placement could reach.
 */
#ifndef CP_RUNNER_MEMPLAN_H
#define CP_RUNNER_MEMPLAN_H

#include "graph/graph.h"
#include "om/config.h"

#define CP_MEM_ALIGN 64

struct cp_mem_block {
    uint64_t size;   /* bytes */
    int32_t first;   /* first live step */
    int32_t last;    /* last live step, inclusive (>= first) */
    int32_t tensor;  /* the root tensor it holds (-1 when unknown) */
    uint64_t offset; /* OUT of placement: offset in the arena */
};

/* Place `n` blocks. `reuse` selects greedy-by-size sharing, else one
 * offset each. OUT: offsets in the blocks, *arena_bytes, *peak_bytes.
 * CP_ERR_NOMEM (no diag: the caller names the plan). */
enum cp_status cp_memplan_place(struct cp_mem_block *b, size_t n, int32_t n_steps, bool reuse,
                                uint64_t *arena_bytes, uint64_t *peak_bytes);

/* The plan's memory, per tensor of the graph. */
struct cp_memplan {
    int32_t n_steps;
    int32_t *root;  /* per tensor: the tensor whose storage it uses; -1: none */
    int32_t *block; /* per tensor: index of its root's block; -1: no buffer */
    struct cp_mem_block *blocks;
    size_t n_blocks;
    uint64_t arena_bytes;
    uint64_t peak_bytes;
    uint64_t weight_bytes; /* distinct initializers read by live nodes */
};

/* Liveness and placement for live nodes `order[0..n)` in execution order;
 * `is_view[k]` says node order[k] runs no kernel. Every tensor an executed
 * node touches must have a static shape and a dtype (the plan checks that
 * first). Errors name the node and tensor. OUT: *mp (release with
 * cp_memplan_release, also after failure). */
enum cp_status cp_memplan_build(const struct cp_graph *g, const int32_t *order, const bool *is_view,
                                size_t n, enum cp_buffer_opt mode, struct cp_memplan *mp,
                                struct cp_diag *d);
void cp_memplan_release(struct cp_memplan *mp);

/* Bytes of a tensor with a static shape (0 when unknown or too large for
 * any tensor, see cp_shape_nbytes). */
uint64_t cp_memplan_tensor_bytes(const struct cp_tensor *t);

#endif
