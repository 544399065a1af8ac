/*
 * Private to atc_bridge/: dynamic batch across the conversion (batch.c,
 * batch_check.c).
 *
 * With --dynamic_batch_size, DynamicBatchPass (batch.c) rewrites the shape
 * constants that hard-code the exported batch and then leaves the batch
 * inputs at the exported batch, so every later pass works on static shapes,
 * as ATC compiles one static graph per profile. After the last pass,
 * cp_batch_finish makes the batch inputs dynamic again, generalises what
 * the later passes may have hard-coded, and checks every profile the way
 * the runtime plans it (runner/cpu/plan_shapes.c: set dimension 0 of every
 * input whose dimension 0 is dynamic, infer all shapes again), so a profile
 * that cannot run is refused by `convert`, naming the node, rather than by
 * `run --batch`.
 */
#ifndef CP_ATC_BATCH_CHECK_H
#define CP_ATC_BATCH_CHECK_H

#include "atc_bridge/convert.h"
#include "graph/graph.h"

#include <stdbool.h>

/* Forget every intermediate tensor's shape and known value, so the next
 * cp_graph_infer starts from the inputs alone (inference keeps a static
 * dimension it finds already set). */
void cp_batch_forget_intermediates(struct cp_graph *g);

/* Make the graph follow the batch of the inputs whose dimension 0 is
 * dynamic (see batch.c for how), for c's profiles; no-op without profiles
 * or without such inputs. Then leave those inputs at the exported batch
 * (`leave_exported`) or dynamic, and the graph inferred. `log` may be NULL.
 * OUT: *changed. Errors name the node that cannot follow the batch. */
enum cp_status cp_batch_generalise(struct cp_graph *g, const struct cp_convert_config *c,
                                   bool leave_exported, const struct cp_log *log, bool *changed,
                                   struct cp_diag *d);

/* After the conversion passes, with c's profiles: make dimension 0 dynamic
 * again for every input --input_shape gives as -1 there, generalise again
 * (unless the fusion switches turn DynamicBatchPass off), infer, and check
 * every profile on a copy of `g` (serialized and read back). No-op without
 * profiles. CP_ERR_INVALID naming the batch and, through inference's
 * message, the node that fails. */
enum cp_status cp_batch_finish(struct cp_graph *g, const struct cp_convert_config *c,
                               const struct cp_log *log, struct cp_diag *d);

#endif
