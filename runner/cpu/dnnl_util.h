/*
 * Private to runner/cpu: the plumbing the oneDNN kernels share.
 *
 * A `struct cp_dk_prog` is what a oneDNN kernel runs: a short list of
 * primitives executed in order on the plan's stream (a weight or input
 * reorder, the main primitive, an output reorder), the memory objects they
 * read and write, and their scratch needs. It is built once in prepare:
 *
 *   - user memories wrap the fixed tensor pointers of the kernel instance;
 *   - owned memories are allocated by oneDNN and belong to the kernel (a
 *     weight reordered once into the format the primitive prefers);
 *   - scratch memories (intermediate tensors in a blocked format) and every
 *     primitive's scratchpad live in the plan's shared scratch block: the
 *     program asks for `scratch_bytes` and binds the block at run time.
 *
 * Running a program only executes primitives and waits on the stream; it
 * never allocates. Every primitive is created with a user-mode scratchpad,
 * so oneDNN allocates nothing behind our back either.
 */
#ifndef CP_RUNNER_DNNL_UTIL_H
#define CP_RUNNER_DNNL_UTIL_H

#include "runner/cpu/kernel.h"

#include <oneapi/dnnl/dnnl.h>

#define CP_DK_MAX_STEPS 6
#define CP_DK_MAX_ARGS  8
#define CP_DK_MAX_MEMS  12

struct cp_dk_step {
    dnnl_primitive_t prim; /* NULL for a conversion step (below) */
    int nargs;
    dnnl_exec_arg_t args[CP_DK_MAX_ARGS];
    int scratchpad_mem; /* index into mems of its scratchpad, -1 if none */
    /* A conversion step (cp_dk_step_to_bf16, cp_dk_step_quantize): memory
     * indices and elements; cvt_kind 0 bf16, 1 u8, 2 s8, with the
     * multiplier cvt_scale for the int8 kinds. */
    int cvt_src, cvt_dst;
    size_t cvt_n;
    int cvt_kind;
    float cvt_scale;
};

struct cp_dk_prog {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int threads; /* of the kernel environment, for conversion steps */
    int nsteps;
    struct cp_dk_step steps[CP_DK_MAX_STEPS];
    int nmems;
    dnnl_memory_t mems[CP_DK_MAX_MEMS];
    /* For memories placed in the shared scratch: byte offset, else -1. */
    int64_t scratch_off[CP_DK_MAX_MEMS];
    size_t scratch_top;  /* bytes used by scratch memories */
    size_t scratch_pads; /* largest primitive scratchpad (placed after them) */
    void *bound;         /* the scratch block the memories point at now */
};

/* Start an empty program on the kernel's engine and stream. */
void cp_dk_prog_init(struct cp_dk_prog *p, const struct cp_kernel_env *env);
/* Destroy every primitive and memory of the program. */
void cp_dk_prog_release(struct cp_dk_prog *p);

/* Memory objects. Each returns its index in p->mems (>= 0) or -1 when
 * oneDNN fails or the table is full. A user memory wraps `ptr` (not owned);
 * an owned one is allocated by oneDNN; a scratch one lives in the plan's
 * scratch block. */
int cp_dk_mem_user(struct cp_dk_prog *p, const dnnl_memory_desc_t *md, void *ptr);
int cp_dk_mem_owned(struct cp_dk_prog *p, const dnnl_memory_desc_t *md);
int cp_dk_mem_scratch(struct cp_dk_prog *p, const dnnl_memory_desc_t *md);

/* Append a primitive made from `pd` (the program does not take `pd`; the
 * caller destroys it) with `nargs` (arg id, memory index) pairs. The
 * primitive's scratchpad, if it has one, is added automatically. */
enum cp_status cp_dk_step_add(struct cp_dk_prog *p, const_dnnl_primitive_desc_t pd, int nargs,
                              const int *arg_ids, const int *mem_idx);

/* Append a reorder from memory `src` to memory `dst`. */
enum cp_status cp_dk_step_reorder(struct cp_dk_prog *p, int src, int dst);

/* Append a conversion of the f32 memory `src` into the bf16 memory `dst`,
 * which must describe the same layout (element i of one is element i of
 * the other, no padding): a flat, parallel vcvtne2ps2bf16 loop, rounding
 * to nearest even as oneDNN's reorder does. On the activations of the
 * example models (64 Ki to 256 Ki floats, 2 threads) oneDNN 2.6's reorder
 * took 3 to 5 times longer than the loop, for every bf16 convolution and
 * matmul. Falls back to cp_dk_step_reorder when the layouts differ or the
 * CPU lacks AVX512_BF16. */
enum cp_status cp_dk_step_to_bf16(struct cp_dk_prog *p, int src, int dst);

/* Append the quantization of the f32 memory `src` into the u8 or s8 memory
 * `dst`: dst = saturate(round_half_even(src * mul)). The same layout: a
 * flat, parallel AVX-512 loop; other layouts or CPUs: a oneDNN reorder
 * with `mul` as its output scale (which rounds the same way). */
enum cp_status cp_dk_step_quantize(struct cp_dk_prog *p, int src, int dst, float mul);

/* Reorder memory `src` into memory `dst` right now (prepare-time packing of
 * weights); both must be user or owned memories. */
enum cp_status cp_dk_reorder_now(struct cp_dk_prog *p, int src, int dst);

/* Scratch bytes the program needs (the kernel's scratch_bytes). */
size_t cp_dk_prog_scratch_bytes(const struct cp_dk_prog *p);

/* Execute every step, then wait. CP_OK or CP_ERR_INTERNAL. */
enum cp_status cp_dk_prog_run(struct cp_dk_prog *p, void *scratch);

/* A primitive attribute with a user-mode scratchpad (caller destroys), or
 * NULL on failure. */
dnnl_primitive_attr_t cp_dk_attr_create(void);

/* A plain (row-major, dense) descriptor of a tensor's static shape; rank 0
 * becomes a 1-element 1-D tensor. False for dtypes oneDNN lacks or ranks
 * above DNNL_MAX_NDIMS. */
bool cp_dk_md_plain(dnnl_memory_desc_t *md, int rank, const int64_t *dims, enum cp_dtype dt);

/* oneDNN's data type for one of ours; dnnl_data_type_undef if none. */
dnnl_data_type_t cp_dk_dtype(enum cp_dtype dt);

/* Convenience for kernels whose whole state is one program. The run
 * function binds k->scratch; release frees k->state. */
enum cp_status cp_dk_kernel_run(struct cp_kexec *k);
void cp_dk_kernel_release(struct cp_kexec *k);
/* Allocate a zeroed program as k->state, initialised for k->env. NULL on
 * out-of-memory. */
struct cp_dk_prog *cp_dk_kernel_prog(struct cp_kexec *k);

/* The CPU features oneDNN 2.6 needs for a node's bf16 arithmetic: its bf16
 * primitives exist from avx512_core (AVX-512 F, BW, VL and DQ) up, and
 * creating one on a lesser CPU fails with dnnl_unimplemented. The `isa` of
 * the conv and matmul kernels: those features for a node with
 * compute_precision "bf16", NULL (none) otherwise. */
const char *cp_dk_isa_bf16(const struct cp_graph *g, const struct cp_node *n);

/* The int8 mark of a node (atc_bridge's Int8QuantizationPass):
 * compute_precision "int8", the input's scale and sign, one weight scale
 * per output channel. The conv and matmul kernels quantize the input at
 * run time and the constant weights once, accumulate in s32 and scale to
 * f32 (x_scale * w_scales[c]) before the bias and post-ops. */
struct cp_dk_int8 {
    bool on;
    float x_scale;
    bool x_signed;
    const float *w_scales;
    size_t n_w;
};

/* Read the mark: false when compute_precision is "int8" and its scales
 * are missing or not finite and positive (a kernel then refuses the node);
 * q->on false for other nodes. */
bool cp_dk_int8_of(const struct cp_node *n, struct cp_dk_int8 *q);

/* The quantized copy of constant f32 weights into the s8 memory `dst`
 * (same layout): w / scale[c], rounded to nearest even and saturated to
 * +-127, where c = (element index / inner) % channels. */
void cp_dk_quantize_weights(const float *w, int8_t *dst, int64_t n, const float *scales,
                            int64_t channels, int64_t inner);

/* Report a oneDNN failure in prepare: names the node and the call. */
enum cp_status cp_dk_fail(struct cp_kexec *k, struct cp_diag *d, const char *what, dnnl_status_t s);

#endif
