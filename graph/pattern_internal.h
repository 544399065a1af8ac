/*
 * Private to graph/pattern*.c: reading a struct cp_pattern_view.
 *
 * The matchers are written once for every provider, so they read the view
 * through these helpers only. Each helper states which pass helper it
 * stands for (the passes' own checks, moved here), so a reader can follow a
 * check from the pass that made it to the matcher that now makes it.
 *
 * Constants: a view without values (a trace) still says which tensors are
 * constants and their dtypes and shapes; the *_value helpers then report
 * the value as unknown, and every check of it holds.
 */
#ifndef CP_GRAPH_PATTERN_INTERNAL_H
#define CP_GRAPH_PATTERN_INTERNAL_H

#include "graph/pattern.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Node n; NULL when n < 0, out of range or dead. */
const struct cp_node *cp_pv_node(const struct cp_pattern_view *v, int32_t n);
/* Tensor t; NULL when t < 0 or out of range. */
const struct cp_tensor *cp_pv_tensor(const struct cp_pattern_view *v, int32_t t);
/* The live producer of t, -1 when none (or t < 0). */
int32_t cp_pv_producer(const struct cp_pattern_view *v, int32_t t);
/* Readers of t (see cp_pattern_view.readers); 0 when t < 0. */
size_t cp_pv_readers(const struct cp_pattern_view *v, int32_t t, int32_t *out, size_t max);
bool cp_pv_is_output(const struct cp_pattern_view *v, int32_t t);

/* The sole reader of t when t is private to one read: the fusion passes'
 * sole_reader / next. -1 otherwise. */
int32_t cp_pv_sole_reader(const struct cp_pattern_view *v, int32_t t);
/* The same, only when that reader's op is `op` (cp_fuse_only_consumer). */
int32_t cp_pv_only_consumer(const struct cp_pattern_view *v, int32_t t, enum cp_op op);
/* The one node reading t in one or more slots, t not a graph output
 * (cp_rw_sole_consumer); -1 when none or several. */
int32_t cp_pv_sole_consumer(const struct cp_pattern_view *v, int32_t t);

/* For a binary node reading t as one operand: the index of the other input
 * (0 or 1), or -1 when t is not an operand or the node reads t twice
 * (cp_fuse_other). */
int cp_pv_other(const struct cp_node *n, int32_t t);

/* Whether t is a constant: an initializer with data, or without when the
 * view has no values (cp_rw_const_data). */
bool cp_pv_is_const(const struct cp_pattern_view *v, int32_t t);
/* The same with a static shape (cp_lay_is_const). */
bool cp_pv_is_static_const(const struct cp_pattern_view *v, int32_t t);

/* A constant f32 tensor of static shape with at most max elements (with
 * values: exactly their bytes). OUT: *n elements. */
bool cp_pv_const_f32_count(const struct cp_pattern_view *v, int32_t t, size_t max, size_t *n);
/* The same (cp_fuse_const_floats). OUT: *n elements; their values into out when the
 * view has them (*known true), else out is untouched (*known false). known
 * may be NULL. */
bool cp_pv_const_floats(const struct cp_pattern_view *v, int32_t t, float *out, size_t max,
                        size_t *n, bool *known);
/* A constant f32 with one element, any rank (cp_fuse_const_scalar). OUT:
 * *val (NAN when unknown), *known (may be NULL). */
bool cp_pv_const_scalar(const struct cp_pattern_view *v, int32_t t, float *val, bool *known);
/* A constant scalar within rtol (relative) of want; true for any constant
 * scalar when the value is unknown. */
bool cp_pv_const_near(const struct cp_pattern_view *v, int32_t t, float want, float rtol);
/* Constant ints: inferred values (cp_tensor.value), or an i64/i32
 * initializer of static shape with at most max elements
 * (cp_fuse_const_ints). Unknown values are not ints: false. */
bool cp_pv_const_ints(const struct cp_pattern_view *v, int32_t t, int64_t *out, size_t max,
                      size_t *n);

/* Whether the model's opset is known and below `below`, or known or
 * assumed (unknown: recent) to be at least `at_least`. */
bool cp_pv_opset_below(const struct cp_pattern_view *v, int64_t below);
bool cp_pv_opset_at_least(const struct cp_pattern_view *v, int64_t at_least);

#endif
