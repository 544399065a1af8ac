/*
 * Private to runner/cpu: Resize's taps, worked out in one place
 * (ref_resize.c) for the reference kernel and the fast interpolating one
 * (fast_resize.c).
 *
 * Interpolation is separable: along every axis, each output coordinate
 * reads a few input indices (taps) with weights. Axes that are not resized
 * have one tap of weight 1 at the same index.
 */
#ifndef CP_RUNNER_RESIZE_H
#define CP_RUNNER_RESIZE_H

#include "runner/cpu/kernel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CP_RESIZE_MAX_TAPS 4

/* The taps of one output coordinate along one axis. */
struct cp_resize_tap {
    int32_t n;
    int32_t outside;                 /* tf_crop_and_resize: the extrapolation value */
    int64_t off[CP_RESIZE_MAX_TAPS]; /* input index times the axis stride */
    double w[CP_RESIZE_MAX_TAPS];
};

/* Every axis's taps, for one run. */
struct cp_resize_taps {
    int rank;
    bool nearest;                                  /* one tap each, copied rather than weighted */
    double extrapolation;                          /* the value of an `outside` tap */
    const struct cp_resize_tap *axis[CP_MAX_RANK]; /* [out dim of the axis] */
};

/* Whether the reference takes node n (every Resize it can compute). */
bool cp_resize_supported(const struct cp_graph *g, const struct cp_node *n);

/* Scratch bytes for the taps of an output of shape ys. */
size_t cp_resize_taps_bytes(const struct cp_shape *ys);

/* Work out the taps of k's node into `scratch` (cp_resize_taps_bytes of
 * it). False when the scales or sizes read at run time are bad. */
bool cp_resize_taps(const struct cp_kexec *k, void *scratch, struct cp_resize_taps *t);

#endif
