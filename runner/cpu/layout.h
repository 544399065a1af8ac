/*
 * Private to runner/cpu: tensors whose bytes are not plain row-major.
 *
 * The layout pass (atc_bridge/passes/layout_*.c) tags the activations of
 * conv regions NHWC or oneDNN-blocked (nChw8c / nChw16c: the channels in
 * blocks of 8 or 16, innermost), and puts a TransData node wherever two
 * layouts meet. A tensor keeps its logical shape ([N, C, H, W]); only the
 * order of its bytes changes. Blocked tags are only given when C is a
 * multiple of the block, so a tensor's byte count never depends on its
 * layout and the memory planner needs no change.
 *
 * Kernels of the ops a region may hold either read the tags (the oneDNN
 * conv and pooling kernels build their memory descriptors with
 * cp_dk_md_tensor) or refuse non-plain tensors in `supports`. Elementwise
 * kernels need nothing: the pass only puts an elementwise node in a region
 * when all its operands share the output's shape and layout (or are single
 * elements), and then the bytes line up whatever the layout. Reference
 * kernels run on plain copies through the adapter at the end of this file,
 * so a reference-only plan of a re-laid-out model computes the same thing.
 *
 * Implemented in ref_transdata.c (index mapping, adapter) and
 * dnnl_transdata.c (oneDNN descriptors).
 */
#ifndef CP_RUNNER_LAYOUT_H
#define CP_RUNNER_LAYOUT_H

#include "runner/cpu/kernel.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Plain row-major: UNDEF (untagged), ND, NCHW, NCDHW. */
bool cp_layout_is_plain(enum cp_layout l);
/* A tensor whose bytes are plain row-major (NULL counts as plain). */
bool cp_tensor_is_plain(const struct cp_tensor *t);
/* Channel block of a blocked layout: 8 or 16; 0 for the others. */
int cp_layout_block(enum cp_layout l);
/* Whether a tensor of shape s can be kept in layout l: plain layouts
 * always; NHWC and the blocked ones need a static rank-4 shape, and the
 * blocked ones a channel count that is a multiple of the block. */
bool cp_layout_fits(enum cp_layout l, const struct cp_shape *s);

/* Element offset of logical element (n, c, h, w) of a tensor of dims
 * [N, C, H, W] kept in layout l (plain layouts: NCHW order). */
int64_t cp_layout_offset(enum cp_layout l, const int64_t *dims, int64_t n, int64_t c, int64_t h,
                         int64_t w);

/* Copy a rank-4 tensor of `dims` from layout `from` at src to layout `to`
 * at dst; elements are `size` bytes. Both layouts must fit dims; src and
 * dst must not overlap. */
void cp_layout_convert(void *dst, enum cp_layout to, const void *src, enum cp_layout from,
                       const int64_t *dims, size_t size);

/* oneDNN's format tag for a layout of a rank-4 tensor (nchw, nhwc,
 * nChw8c, nChw16c); dnnl_format_tag_undef for the others. */
dnnl_format_tag_t cp_dk_layout_tag(enum cp_layout l);

/* A oneDNN memory descriptor of a static tensor as its bytes are laid out:
 * the tensor's tag for rank-4 NHWC / blocked tensors, plain row-major
 * otherwise (rank 0 becomes 1-D of 1). `dt` is oneDNN's element type. False
 * when oneDNN cannot describe it. */
bool cp_dk_md_tensor(dnnl_memory_desc_t *md, const struct cp_tensor *t, dnnl_data_type_t dt);

/* ---- reference kernels on re-laid-out tensors --------------------------------------- */

/* Scratch bytes (64-byte multiples) for plain copies of every non-plain
 * rank-4 input and output of a kernel instance; 0 when all are plain. */
size_t cp_ref_layout_bytes(const struct cp_kexec *k);

/* A prepare for reference kernels that need no scratch of their own:
 * reserves cp_ref_layout_bytes. */
enum cp_status cp_ref_layout_prepare(struct cp_kexec *k, struct cp_diag *d);

/* Run `run` as if every tensor of k were plain: non-plain inputs are
 * copied to plain scratch, non-plain outputs are computed in scratch and
 * copied back into their layout; during the call k->in / k->out point at
 * copies of those tensors tagged NCHW, so a nested call (a fused kernel
 * running another reference kernel) passes straight through. The plain
 * copies start `inner_scratch`
 * bytes (a 64-byte multiple) into k->scratch, after the kernel's own
 * scratch; the kernel's prepare must have reserved inner_scratch +
 * cp_ref_layout_bytes(k). With all tensors plain this is just run(k).
 * Allocates nothing. */
enum cp_status cp_ref_layout_run(struct cp_kexec *k, size_t inner_scratch,
                                 enum cp_status (*run)(struct cp_kexec *k));

/* The TransData kernels. */
extern const struct cp_kernel cp_ref_trans_data, cp_dnnl_trans_data;

#endif
