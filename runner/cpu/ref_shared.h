/*
 * Private to runner/cpu: what a reference kernel works out for a fast one
 * of the same op, so that both read a node the same way: Resize's taps
 * (ref_resize.c, for fast_resize.c) and Pad's geometry (ref_misc.c, for
 * fast_copy.c).
 *
 * Resize's interpolation is separable: along every axis, each output
 * coordinate reads a few input indices (taps) with weights. Axes that are
 * not resized have one tap of weight 1 at the same index.
 */
#ifndef CP_RUNNER_REF_SHARED_H
#define CP_RUNNER_REF_SHARED_H

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

/* Whether the reference takes Pad node n (every mode, pads and axes). */
bool cp_pad_supported(const struct cp_graph *g, const struct cp_node *n);

/* The padding at the start of every axis (negative: cropped), the
 * constant as the input's dtype (fill: 8 bytes), and whether the mode is
 * constant. False when the pads read at run time do not fit the shapes. */
bool cp_pad_geometry(const struct cp_kexec *k, int64_t *begin, unsigned char *fill, bool *constant);

#endif
