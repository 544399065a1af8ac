/*
 * The layout pass family (see pass.h), in the order the manager runs them.
 *
 * Round trips through another layout are removed first, so that the layout
 * pass then sees the model's real conv regions: layout_roundtrip.c. The
 * layout pass (layout_transform.c) tags every tensor with its memory format
 * from --input_format and --layout_policy and inserts the TransData nodes;
 * the runtime's side of the tags is runner/cpu/layout.h. Shared helpers:
 * layout_util.c.
 */
#include "atc_bridge/passes/layout_internal.h"
#include "graph/pattern.h"

#include <stddef.h>

const struct cp_pass cp_layout_passes[] = {
    {CP_PASS_TRANSPOSE_ROUNDTRIP, "GraphFusion",
     "removes Transpose -> layout-agnostic ops -> inverse Transpose round trips (NCHW<->NHWC), "
     "permuting constants and axes",
     cp_layout_roundtrip_run},
    {CP_PASS_LAYOUT_TRANSFORM, "GraphFusion",
     "tags activations per --input_format and --layout_policy (nchw, nhwc, blocked) and inserts "
     "TransData where layouts meet",
     cp_layout_transform_run},
    {NULL, NULL, NULL, NULL},
};
