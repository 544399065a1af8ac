/*
 * Private to runner/cpu/plan*.c: the plan struct and the steps of building
 * it.
 *
 * plan.c builds and frees a plan: private graph, concrete shapes
 * (plan_shapes.c), execution order, memory (memplan.c), kernel instances
 * and the trace kernel table (plan_trace.c). plan_exec.c runs it and moves
 * inputs in and outputs out.
 */
#ifndef CP_RUNNER_PLAN_INTERNAL_H
#define CP_RUNNER_PLAN_INTERNAL_H

#include "runner/cpu/kernel.h"
#include "runner/cpu/memplan.h"
#include "runner/runner_internal.h"

struct cp_plan {
    struct cp_model *m;
    struct cp_runtime *rt;
    struct cp_graph *g; /* private: read from the model's bytes, shapes concrete */

    /* Data pointer of every tensor: into the arena, or at initializer
     * bytes (read-only), or NULL when the plan never touches it. */
    void **ptr;
    struct cp_memplan mem;
    void *arena; /* 64-byte aligned, zeroed once */

    /* Kernel instances in execution order, and the pools their tensor
     * arrays point into. */
    struct cp_kexec *kx;
    size_t n_kx;
    size_t n_prepared; /* how many need release */
    const struct cp_tensor **io_tensors;
    void **io_data;
    void *scratch;
    size_t scratch_bytes;

    /* Trace: the kernel table (strings below owned by the plan) and the
     * interned node names of the runtime's recorder (-1 without one). */
    struct cp_trace_kernel *ktab;
    int32_t *kname;

    /* A nested plan (a control-flow subgraph): its graph belongs to the
     * parent plan's graph; it keeps the parent's kernel choice. */
    bool nested;
    bool reference_only;

    /* A dynamic plan (plan_dynamic.c): shapes known only at run time. */
    struct cp_dyn *dyn;
};

/* Which positions of `order` are view nodes (run no kernel). */
enum cp_status cp_plan_mark_views(const struct cp_graph *g, const int32_t *order, size_t n,
                                  bool *is_view);

/* ---- [dynamic] ---- */

/* Make p, whose graph has shapes inference could not fix, a dynamic plan
 * over `order` (taking ownership of order and is_view, even on failure;
 * cp_plan_free frees what was made). */
enum cp_status cp_plan_build_dynamic(struct cp_plan *p, int32_t *order, bool *is_view, size_t n,
                                     struct cp_diag *d);
/* Infer and run each node in turn (trace events as cp_plan_run's). */
enum cp_status cp_plan_run_dynamic(struct cp_plan *p, int32_t iteration, struct cp_diag *d);
void cp_plan_free_dynamic(struct cp_plan *p);
/* Bytes the plan's buffers hold now. */
uint64_t cp_plan_dynamic_bytes(const struct cp_plan *p);

/* Apply opt's input shapes and batch to the graph inputs of `g`, reset every
 * intermediate shape, and infer. Errors name the input (and list the
 * model's inputs or profiles), or the node where inference fails. `name`
 * is the model's name for messages. */
enum cp_status cp_plan_apply_shapes(struct cp_graph *g, const char *name,
                                    const struct cp_om_meta *meta,
                                    const struct cp_plan_options *opt, struct cp_diag *d);

/* Fill p->ktab (one entry per kernel instance) and p->kname. */
enum cp_status cp_plan_build_trace(struct cp_plan *p, struct cp_diag *d);
void cp_plan_free_trace(struct cp_plan *p);

/* ---- [control] ---- */

/* A plan of subgraph `sub` of the parent plan's graph, with the concrete
 * shapes inference gave it: its inputs and outer-scope references get
 * storage of their own (cp_plan_data), which the control-flow kernel fills
 * before each cp_plan_run_nested. */
enum cp_status cp_plan_create_nested(struct cp_plan *parent, struct cp_graph *sub,
                                     struct cp_plan **out, struct cp_diag *d);
/* Run every kernel of a nested plan (no trace, no allocation). */
enum cp_status cp_plan_run_nested(struct cp_plan *p);
/* Storage of tensor t in the plan (NULL when it has none). */
void *cp_plan_data(const struct cp_plan *p, int32_t t);

#endif
