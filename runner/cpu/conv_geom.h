/*
 * Private to runner/cpu: the geometry of a Conv or ConvTranspose, resolved
 * against its concrete shapes, shared by the oneDNN convolution kernels
 * and the C ones; and the plain-tensor form the C kernels (depthwise in
 * fast_conv.c, few positions in fast_conv_thin.c) check and run.
 */
#ifndef CP_RUNNER_CONV_GEOM_H
#define CP_RUNNER_CONV_GEOM_H

#include "graph/graph.h"
#include "runner/cpu/fused_act.h"
#include "runner/cpu/kernel.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

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

/* A Conv or FusedConv on plain NCW / NCHW tensors, 1-D as one row. */
struct cp_plain_conv {
    int64_t batch, cin, cout;
    int64_t ih, iw, oh, ow, kh, kw;
    int64_t sh, sw, dh, dw, ph, pw; /* dh, dw: full dilations */
    struct cp_act act;              /* FusedConv's, else none */
    bool residual, res_first;       /* FusedConv's input 3, and its order */
};

/* Whether n is an fp32 Conv (FusedConv when `fused`) on plain rank-3 or
 * rank-4 tensors whose geometry resolves (OUT: *gm), with as many output
 * channels as weight rows, the batch kept, a bias of one float per output
 * channel if any, an activation the C kernels apply and a residual of the
 * output's shape. Each kernel adds its own conditions (group, sizes). */
bool cp_plain_conv_supports(const struct cp_graph *g, const struct cp_node *n, bool fused,
                            struct cp_conv_geom *gm);

/* The dims of k's convolution (one that cp_plain_conv_supports accepted).
 * CP_ERR_UNSUPPORTED naming the node when its geometry does not resolve. */
enum cp_status cp_plain_conv_init(const struct cp_kexec *k, struct cp_plain_conv *pc,
                                  struct cp_diag *d);

/* y[0, n) = act(acc [+ r]) [+ r], the residual r (NULL: none) added in the
 * order residual_first says; acc may be y. Inlined into the caller's ISA
 * clone. */
__attribute__((always_inline)) static inline void
cp_plain_conv_finish(const struct cp_plain_conv *c, float *acc, const float *r, float *y, int64_t n)
{
    if (r && c->res_first)
        for (int64_t i = 0; i < n; i++)
            acc[i] += r[i];
    cp_act_row(&c->act, acc, n);
    if (r && !c->res_first)
        for (int64_t i = 0; i < n; i++)
            acc[i] += r[i];
    if (acc != y)
        memcpy(y, acc, (size_t)n * sizeof *y);
}

#endif
