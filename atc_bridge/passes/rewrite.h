/*
 * Private to atc_bridge/passes/: small graph-rewriting helpers the passes
 * share (cp_rw_ prefix). They work on live nodes only and keep the graph's
 * invariants a pass must keep (see pass.h): a killed node is marked dead and
 * its outputs lose their producer, so a replacement node can take them over;
 * a created node carries the merged origins of the nodes it replaces.
 */
#ifndef CP_ATC_REWRITE_H
#define CP_ATC_REWRITE_H

#include "graph/graph.h"

#include <stdbool.h>

/* Whether tensor t is one of the graph's outputs. */
bool cp_rw_is_graph_output(const struct cp_graph *g, int32_t t);

/* How many input slots of live nodes read t. */
size_t cp_rw_n_uses(const struct cp_graph *g, int32_t t);

/* The one live node that reads t (in one or more slots), or -1 when none,
 * several, or t is a graph output. */
int32_t cp_rw_sole_consumer(const struct cp_graph *g, int32_t t);

/* Make every live node that reads `from` read `to` instead. Returns the
 * number of input slots changed. */
size_t cp_rw_replace_uses(struct cp_graph *g, int32_t from, int32_t to);

/* Mark a node dead and release its outputs (producer -1). */
void cp_rw_kill(struct cp_graph *g, int32_t node);

/* A tensor name not used yet: `base`, else base_1, base_2, ... OUT:
 * out[cap]. */
void cp_rw_unique_tensor_name(const struct cp_graph *g, const char *base, char *out, size_t cap);

/* A node name no live node has: `base`, else base_1, ... OUT: out[cap]. */
void cp_rw_unique_node_name(const struct cp_graph *g, const char *base, char *out, size_t cap);

/* Add an initializer named after `base` (made unique) with the given dtype
 * and static shape; `data` (malloc'ed, nbytes) is taken over by the graph
 * even on failure. OUT: *index. */
enum cp_status cp_rw_add_initializer(struct cp_graph *g, const char *base, enum cp_dtype dtype,
                                     const struct cp_shape *shape, void *data, size_t nbytes,
                                     int32_t *index, struct cp_diag *d);

/* Add a node standing for the nodes `from[0..n_from)` (their origins merged
 * in order, without duplicates). Its outputs must have no live producer
 * (kill the replaced nodes first). OUT: *index (may be NULL). */
enum cp_status cp_rw_add_node(struct cp_graph *g, const char *name, const char *op_type,
                              const char *domain, const int32_t *inputs, size_t n_inputs,
                              const int32_t *outputs, size_t n_outputs, const int32_t *from,
                              size_t n_from, int32_t *index, struct cp_diag *d);

/* Copy every attribute of `src` onto node `dst` (values copied). */
enum cp_status cp_rw_copy_attrs(struct cp_graph *g, int32_t dst, const struct cp_node *src);

/* Merge the origins of node `src` into node `dst` (without duplicates). */
enum cp_status cp_rw_merge_origins(struct cp_graph *g, int32_t dst, const struct cp_node *src);

/* An INTS attribute into out[cap]; false when absent, mistyped or longer. */
bool cp_rw_attr_ints(const struct cp_node *n, const char *name, int64_t *out, size_t cap,
                     size_t *len);

/* A tensor's constant data: an initializer holding data, else NULL. */
const void *cp_rw_const_data(const struct cp_graph *g, int32_t t);

/* Tensor t when it has rank 4 and every dimension known, else NULL. */
const struct cp_tensor *cp_rw_static4(const struct cp_graph *g, int32_t t);

/* Channel selections of a static rank-4 image, as cleanup_shuffle.c makes
 * them and LayoutTransformPass keeps them in NHWC regions. */

/* Gather node n on axis 1 (or -3) of x with constant 1-D i64 or i32
 * indices, x and its result static rank 4: the index tensor (its data
 * holds them), else NULL. */
const struct cp_tensor *cp_rw_channel_gather(const struct cp_graph *g, const struct cp_node *n);

/* Whether Slice node n, with constant parameters, slices only the channel
 * axis of a static rank-4 x. OUT: first[4], step[4] (cp_eval_slice_plan's). */
bool cp_rw_channel_slice(const struct cp_graph *g, const struct cp_node *n, int64_t *first,
                         int64_t *step);

#endif
