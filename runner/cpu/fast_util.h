/*
 * Private to runner/cpu: helpers the fast kernels share.
 *
 * Node inspection for `supports` predicates (tensor of an input, static
 * shape, constant values of small attribute-like inputs), the broadcasting
 * plan the elementwise kernels iterate over, and the static split of a loop
 * over the threads of an OpenMP team.
 */
#ifndef CP_RUNNER_FAST_UTIL_H
#define CP_RUNNER_FAST_UTIL_H

#include "runner/cpu/kernel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The tensor of input/output i, or NULL when absent or out of range. */
const struct cp_tensor *cp_fk_in(const struct cp_graph *g, const struct cp_node *n, size_t i);
const struct cp_tensor *cp_fk_out(const struct cp_graph *g, const struct cp_node *n, size_t i);

/* Whether input i is present, static and of dtype dt. */
bool cp_fk_in_is(const struct cp_graph *g, const struct cp_node *n, size_t i, enum cp_dtype dt);
bool cp_fk_out_is(const struct cp_graph *g, const struct cp_node *n, size_t i, enum cp_dtype dt);

/* Static dims of a tensor into out[CP_MAX_RANK]; returns the rank, -1 when
 * not static. */
int cp_fk_dims(const struct cp_tensor *t, int64_t *out);

/* Values of a constant integer tensor (initializer data or propagated
 * value), at most `max`. False when not known at conversion time. */
bool cp_fk_const_ints(const struct cp_tensor *t, int64_t *out, size_t max, size_t *n);
/* Values of a constant f32/f64 initializer, at most `max`. */
bool cp_fk_const_floats(const struct cp_tensor *t, float *out, size_t max, size_t *n);

/* The opset the graph was imported with (defaults to 17 when unknown). */
int64_t cp_fk_opset(const struct cp_graph *g);

/* ---- broadcasting ----------------------------------------------------- */

#define CP_FK_MAX_IN 3

/* Inputs broadcast to the output shape, with adjacent dimensions of the
 * same broadcasting pattern merged. After merging, `rank` dims remain
 * (at least 1); `stride[i][d]` is input i's element stride along merged dim
 * d (0 where it broadcasts). The innermost dim is what the row loops run
 * over. */
struct cp_fk_bcast {
    int rank;
    int nin;
    int64_t dims[CP_MAX_RANK];
    int64_t stride[CP_FK_MAX_IN][CP_MAX_RANK];
    int64_t numel;
};

/* Build the plan for `nin` inputs of the given shapes against the output
 * shape. False if some input does not broadcast to `out`. */
bool cp_fk_bcast_init(struct cp_fk_bcast *b, int nin, const struct cp_shape *const *in,
                      const struct cp_shape *out);

/* Number of rows (product of all but the innermost merged dim). */
int64_t cp_fk_bcast_rows(const struct cp_fk_bcast *b);
/* Element offsets of row `r` in each input. */
void cp_fk_bcast_row(const struct cp_fk_bcast *b, int64_t r, int64_t *off);

/* Hot loops: one clone per ISA level (AVX-512, AVX2+FMA, baseline) picked
 * at load time, with multiply-adds contracted into FMA where the clone has
 * it (C11 mode would otherwise keep them apart). */
#if defined(__clang__)
/* clang has no optimize attribute: the runner is built with
 * -ffp-contract=fast there instead (CMakeLists.txt). */
#define CP_FK_HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CP_FK_HOT                                                                                  \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"),                   \
                   optimize("fp-contract=fast")))
#endif

/* ---- threads ----------------------------------------------------------- */

/* Split [0, n) evenly over the calling OpenMP team: this thread's
 * [*begin, *end), with boundaries on multiples of `align`. */
void cp_fk_split(int64_t n, int64_t align, int64_t *begin, int64_t *end);

/* Threads to use for `work` units where one thread should handle at least
 * `grain` of them. */
int cp_fk_threads(const struct cp_kexec *k, int64_t work, int64_t grain);

#endif
