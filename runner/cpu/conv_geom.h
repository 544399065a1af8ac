/*
 * Private to runner/cpu: the geometry of a Conv or ConvTranspose, resolved
 * against its concrete shapes, shared by the oneDNN convolution kernels
 * and the C depthwise kernel.
 */
#ifndef CP_RUNNER_CONV_GEOM_H
#define CP_RUNNER_CONV_GEOM_H

#include "graph/graph.h"

#include <stdbool.h>
#include <stdint.h>

#define CP_CONV_MAX_SPATIAL 3

/* Per spatial dim: stride, dilation minus one (oneDNN's convention), and
 * the begin and end padding. */
struct cp_conv_geom {
    int ns; /* spatial dims, 1 to 3 */
    int64_t group;
    int64_t strides[CP_CONV_MAX_SPATIAL], dil[CP_CONV_MAX_SPATIAL];
    int64_t pl[CP_CONV_MAX_SPATIAL], pr[CP_CONV_MAX_SPATIAL];
};

/* Geometry of node n (a Conv, FusedConv, or with `transpose` a
 * ConvTranspose) from its attributes (strides, dilations, pads, auto_pad,
 * kernel_shape, group) checked against the shapes of x, w and y; the end
 * padding follows from the output size. False when the attributes and
 * shapes disagree or the form is not one a kernel here runs. */
bool cp_conv_geom(const struct cp_node *n, const struct cp_tensor *x, const struct cp_tensor *w,
                  const struct cp_tensor *y, bool transpose, struct cp_conv_geom *gm);

#endif
