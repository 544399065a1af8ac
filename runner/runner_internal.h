/*
 * Private to runner/: the runtime and model structs, shared by runtime.c,
 * model.c and the plan (cpu/plan*.c).
 *
 * A model keeps the raw bytes of its .om (an mmap of the file, or the
 * buffer cp_model_from_graph serialized) for its whole life: every plan
 * reads its own private graph from them with cp_om_read_buffer, so plans
 * can make shapes concrete without touching the model's graph, and weights
 * are never copied (initializers point into the bytes). Plans must be freed
 * before their model.
 */
#ifndef CP_RUNNER_INTERNAL_H
#define CP_RUNNER_INTERNAL_H

#include "runner/cpu/kernel.h"
#include "runner/runner.h"

/* Interned names of the runtime-layer trace events (-1 without a
 * recorder). */
struct cp_rt_names {
    int32_t load, plan, alloc, input_copy, execute, output_copy;
};

struct cp_runtime {
    int threads;
    uint64_t max_plan_bytes; /* UINT64_MAX: no limit */
    /* Where the limit came from, for messages: "CANNPROF_MAX_PLAN_BYTES",
     * "the machine's physical memory", "the runtime options". */
    const char *max_plan_source;
    struct cp_trace_recorder *trace; /* borrowed; may be NULL */
    /* cp_runtime_pause_trace: runs record nothing (a server tracing only
     * some of its batches); read by the thread that runs plans. */
    bool trace_paused;
    int trace_thread; /* the thread its events are recorded on */
    struct cp_rt_names names;
    struct cp_kernel_env env;
    /* The CPU kernels are chosen for: this machine, detected at create.
     * (Tests of the runner may describe a CPU with fewer features; never
     * one with more, or a kernel would execute instructions it lacks.) */
    struct cp_host host;
};

/* The recorder runs record into: NULL when there is none or it is paused. */
static inline struct cp_trace_recorder *cp_rt_recording(const struct cp_runtime *rt)
{
    return rt->trace_paused ? NULL : rt->trace;
}

struct cp_model {
    struct cp_runtime *rt;
    char *name; /* the .om path, or "graph 'NAME'", for messages */
    struct cp_graph *g;
    struct cp_om_meta meta;
    /* The whole .om, alive as long as the model. */
    const uint8_t *bytes;
    size_t len;
    struct cp_mmap map; /* cp_model_load: the file's mapping */
    uint8_t *owned;     /* cp_model_from_graph: the serialized buffer */
};

/* Make `rt`'s thread count the one OpenMP (and so oneDNN) uses on the
 * calling thread. Cheap; done before kernels are prepared and before each
 * run, so runtimes with different thread counts can share a process. */
void cp_runtime_bind_threads(const struct cp_runtime *rt);

/* Record a runtime-layer event when `rt` has a recorder. */
void cp_runtime_record(const struct cp_runtime *rt, int32_t name, int32_t iteration,
                       uint64_t start_ns, uint64_t end_ns);

#endif
