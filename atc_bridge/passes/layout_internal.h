/*
 * Private to the layout pass family (layout*.c): the graph view the layout
 * passes share, and their run functions, listed in layout.c's table.
 *
 * A `struct cp_lay` is a pass run's index of the graph: for every tensor,
 * the live (node, input slot) pairs that read it and whether it is a graph
 * output. Passes rewrite the graph through the helpers below and call
 * cp_lay_reindex after adding nodes.
 *
 * Layouts (graph.h enum cp_layout) are "plain" when the bytes are row-major
 * in the tensor's logical dimension order: UNDEF, ND, NCHW and NCDHW. NHWC
 * and the oneDNN-blocked nChw8c / nChw16c are not; they only occur on
 * static rank-4 tensors, blocked ones only when C is a multiple of the
 * block, so a re-laid-out tensor has as many bytes as a plain one.
 */
#ifndef CP_ATC_LAYOUT_INTERNAL_H
#define CP_ATC_LAYOUT_INTERNAL_H

#include "atc_bridge/passes/pass.h"

#include <stdbool.h>
#include <stdint.h>

/* One reader of a tensor: input `slot` of live node `node`. */
struct cp_lay_use {
    int32_t node;
    int32_t slot;
};

struct cp_lay {
    struct cp_graph *g;
    struct cp_diag *d;
    size_t n_tensors;
    int32_t *use_start; /* per tensor: first entry in uses (n_tensors + 1 entries) */
    struct cp_lay_use *uses;
    bool *is_output; /* per tensor: a graph output */
};

/* Index ctx->g. OUT: *l (release with cp_lay_release). CP_ERR_NOMEM into d. */
enum cp_status cp_lay_init(struct cp_lay *l, struct cp_graph *g, struct cp_diag *d);
void cp_lay_release(struct cp_lay *l);
/* Rebuild the index after the graph changed (new tensors and nodes). */
enum cp_status cp_lay_reindex(struct cp_lay *l);

/* Readers of tensor t: *n entries starting at the returned pointer. */
const struct cp_lay_use *cp_lay_uses(const struct cp_lay *l, int32_t t, size_t *n);

/* The live producer of t, or NULL. */
struct cp_node *cp_lay_producer(const struct cp_lay *l, int32_t t);

/* A constant: an initializer with data. */
bool cp_lay_is_const(const struct cp_lay *l, int32_t t);

/* Plain row-major layouts: UNDEF, ND, NCHW, NCDHW. */
bool cp_lay_is_plain(enum cp_layout layout);

/* The plain layout a tensor of this rank gets: NCHW (4), NCDHW (5), ND. */
enum cp_layout cp_lay_plain_for_rank(int rank);

/* A new tensor named after `base` + `suffix` (made unique with a counter),
 * with t's dtype and shape. OUT: *out. */
enum cp_status cp_lay_new_tensor_like(struct cp_lay *l, int32_t t, const char *base,
                                      const char *suffix, int32_t *out);

/* A new f32/any-dtype initializer holding `nbytes` copied from data, shape
 * (rank, dims), named after base + suffix. OUT: *out. */
enum cp_status cp_lay_new_const(struct cp_lay *l, const char *base, const char *suffix,
                                enum cp_dtype dt, int rank, const int64_t *dims, const void *data,
                                size_t nbytes, int32_t *out);

/* Add a TransData node reading `src` (laid out as `from`) and writing `dst`
 * (laid out as `to`, which it is tagged with). Its name is made from dst's
 * name; its origins are those of `origin_of` (a node index, or -1: none).
 * The index is not rebuilt. OUT: *idx (may be NULL). */
enum cp_status cp_lay_add_transdata(struct cp_lay *l, int32_t src, enum cp_layout from, int32_t dst,
                                    enum cp_layout to, int32_t origin_of, int32_t *idx);

/* A node name not used yet: base + suffix, or with a counter. The result
 * is in buf (cap bytes). */
const char *cp_lay_fresh_node_name(const struct cp_graph *g, const char *base, const char *suffix,
                                   char *buf, size_t cap);

/* The passes (layout_roundtrip.c, layout_transform.c). */
enum cp_status cp_layout_roundtrip_run(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_layout_transform_run(struct cp_pass_ctx *ctx, bool *changed);

#endif
