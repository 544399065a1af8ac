/*
 * Private to runner/: the kernel interface of the CPU target.
 *
 * A kernel is a const table entry: the op it implements, a `supports`
 * predicate over a node with concrete shapes, prepare/run/release, and the
 * CPU features it needs for a node (`isa`). The plan picks, for each node,
 * the first kernel in the registry whose predicate accepts it and whose
 * features the host has (core/host.h; fast kernels are listed before the
 * reference one; `reference_only` plans skip to the reference). Every op
 * has a reference kernel, written for clarity and for any CPU, which the
 * test harness uses as the truth for the faster ones.
 *
 * `supports` judges the node only, never the CPU: what a kernel can do and
 * what this machine can execute are separate questions, so the harness can
 * tell a kernel that is never exercised from one this host cannot run, and
 * the plan can pass over a kernel for a missing ISA and say so.
 *
 * Memory is fixed when the plan is built: `in[i]`/`out[i]` point into the
 * arena or at weights and never move, so `prepare` may bind them once
 * (oneDNN memory objects) and `run` only computes. `run` must not
 * allocate; a kernel that needs scratch memory asks for it in prepare
 * through `scratch_bytes` and finds it in `scratch` at run time.
 */
#ifndef CP_RUNNER_KERNEL_H
#define CP_RUNNER_KERNEL_H

#include "core/host.h"
#include "graph/graph.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>
#include <stddef.h>

/* What every kernel instance sees. */
struct cp_kernel_env {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int threads;
};

struct cp_kernel;

/* One node's kernel instance inside a plan. */
struct cp_kexec {
    const struct cp_kernel *kernel;
    const struct cp_graph *g;
    const struct cp_node *node;
    const struct cp_kernel_env *env;
    /* Tensors (concrete shapes) and their data; NULL for absent optional
     * inputs/outputs. Arrays have node->n_inputs / n_outputs entries. */
    const struct cp_tensor **in;
    const struct cp_tensor **out;
    void **in_data;
    void **out_data;
    /* Kernel-private state, set by prepare, freed by release. */
    void *state;
    /* Set by prepare when it chose another form than kernel->name says (a
     * static string, e.g. "onednn:fused_conv+eltwise"); traces record it as
     * the implementation. NULL: kernel->name. */
    const char *impl;
    /* Scratch: prepare sets scratch_bytes; the plan then points scratch at
     * that many bytes (64-byte aligned), shared between kernels. */
    size_t scratch_bytes;
    void *scratch;
    /* The plan the instance belongs to: control-flow kernels build nested
     * plans of their subgraphs from it (plan_internal.h). */
    struct cp_plan *plan;
    /* Set by a dynamic plan (plan_dynamic.c) for a node whose first output
     * has a data-dependent row count (NonMaxSuppression): out[0]'s dim 0 is
     * then the most rows it may write, and the kernel stores how many it
     * wrote in *rows. NULL: the rows are exactly out[0]'s. */
    int64_t *rows;
    int64_t rows_kept;
    /* Set by run when it fails and can say why better than its status (a
     * string that lives as long as the instance); the plan's message
     * ends with it. */
    const char *run_why;
};

struct cp_kernel {
    const char *name; /* "ref", "onednn:conv", "c:binary_f32", ... */
    enum cp_op op;
    /* Whether this kernel handles the node as it is (dtypes, shapes,
     * attributes). Must not allocate. */
    bool (*supports)(const struct cp_graph *g, const struct cp_node *n);
    /* Create primitives and state. May allocate. NULL: nothing to do. */
    enum cp_status (*prepare)(struct cp_kexec *k, struct cp_diag *d);
    /* Compute. Must not allocate. Returns CP_OK or CP_ERR_INTERNAL. */
    enum cp_status (*run)(struct cp_kexec *k);
    /* Free state. NULL: nothing to free. */
    void (*release)(struct cp_kexec *k);
    /* The CPU features this kernel needs to run the node, as /proc/cpuinfo
     * names them, space separated ("avx512f avx512bw avx512vl"); NULL or ""
     * when it runs on any CPU the build targets. Only called on nodes that
     * `supports` accepts. NULL: never needs any. */
    const char *(*isa)(const struct cp_graph *g, const struct cp_node *n);
};

/* Whether the CPU `host` describes has every feature `k` needs for node n
 * (k->isa); a NULL host has none. OUT (when `missing` is not NULL): the
 * features it lacks, space separated, "" when none (cut to `cap` bytes). */
bool cp_kernel_runs_on(const struct cp_kernel *k, const struct cp_graph *g, const struct cp_node *n,
                       const struct cp_host *host, char *missing, size_t cap);

/* What cp_kernel_select passed over: the first fast kernel that accepts the
 * node but needs features the host lacks, and those features. */
struct cp_kernel_passed {
    const struct cp_kernel *kernel; /* NULL: none was passed over */
    char missing[96];
};

/* Pick the kernel for a node on the CPU `host` describes: the first fast
 * kernel for its op whose predicate accepts it and whose features the host
 * has, else the reference kernel (always, with `reference_only`). NULL when
 * the op has no kernel at all. OUT (when `passed` is not NULL): the first
 * fast kernel passed over for a missing feature. */
const struct cp_kernel *cp_kernel_select(const struct cp_graph *g, const struct cp_node *n,
                                         const struct cp_host *host, bool reference_only,
                                         struct cp_kernel_passed *passed);

/* The kernels that can run node n on `host`, in preference order (the
 * reference last): up to cap of them in out; returns how many there are.
 * A node attribute `kernel` (--op_kernels, set by KernelSelectionPass)
 * makes cp_kernel_select take that one, or none: NULL with
 * passed->missing saying why (passed->kernel NULL). */
size_t cp_kernel_choices(const struct cp_graph *g, const struct cp_node *n,
                         const struct cp_host *host, const struct cp_kernel **out, size_t cap);

/* The reference kernel of an op, or NULL. */
const struct cp_kernel *cp_kernel_reference(enum cp_op op);

/* Ops whose output is a view of input 0 (same bytes, new shape): Reshape,
 * Flatten, Squeeze, Unsqueeze, Identity, Dropout. The planner aliases their
 * output to the input instead of running a kernel. */
bool cp_op_is_view(enum cp_op op);

/* Kernel tables, NULL-terminated: the fast ones in preference order, and
 * one reference kernel per op. */
extern const struct cp_kernel *const cp_ref_kernels[];
extern const struct cp_kernel *const cp_fast_kernels[];

#endif
