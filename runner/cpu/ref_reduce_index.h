/* Private to the reduce_index family's kernels (ref_reduce_index*.c,
 * fast_reduce_index.c): helpers they share. */
#ifndef CP_RUNNER_REF_REDUCE_INDEX_H
#define CP_RUNNER_REF_REDUCE_INDEX_H

#include "runner/cpu/ref_util.h"

/* int32 or int64. */
bool cp_ri_is_index(enum cp_dtype dt);
/* Every known dtype that is not a float (bool included). */
bool cp_ri_is_int(enum cp_dtype dt);
/* The range of an integer dtype as int64 (u64 is cut at INT64_MAX). */
void cp_ri_int_range(enum cp_dtype dt, int64_t *lo, int64_t *hi);
/* (outer, len, inner) of a static shape around `axis`; false when out of
 * range. */
bool cp_ri_axis_geometry(const struct cp_shape *s, int axis, int64_t *outer, int64_t *len,
                         int64_t *inner);

/* The generic reduction (every Reduce* op, every dtype but bool, which only
 * ReduceMax and ReduceMin take). */
bool cp_ri_reduce_supports(const struct cp_graph *g, const struct cp_node *n);
enum cp_status cp_ri_reduce_prepare(struct cp_kexec *k, struct cp_diag *d);
enum cp_status cp_ri_reduce_run(struct cp_kexec *k);

/* Reductions read their axes with cp_eval_reduce_axes_from_input and
 * cp_eval_reduce_mask (graph/op_eval.h), as the constant folder does. */

#endif
