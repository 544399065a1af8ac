/* The runtime context: thread count, the oneDNN CPU engine and stream every
 * kernel shares, the description of the CPU kernels are chosen for, and the
 * optional trace recorder with the names of the runtime-layer events
 * interned once. */
#include "core/host.h"
#include "runner/runner_internal.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The plan memory limit: the option, else the environment, else physical
 * memory (no limit when even that is unknown). */
static enum cp_status plan_limit(struct cp_runtime *rt, const struct cp_runtime_options *opt,
                                 struct cp_diag *d)
{
    if (opt && opt->max_plan_bytes > 0) {
        rt->max_plan_bytes = opt->max_plan_bytes;
        rt->max_plan_source = "the runtime options";
        return CP_OK;
    }
    const char *env = getenv(CP_MAX_PLAN_BYTES_ENV);
    if (env && *env) {
        rt->max_plan_source = CP_MAX_PLAN_BYTES_ENV;
        if (strcmp(env, "none") == 0) {
            rt->max_plan_bytes = UINT64_MAX;
            return CP_OK;
        }
        if (!cp_parse_bytes(env, &rt->max_plan_bytes) || rt->max_plan_bytes == 0)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "%s='%s' is not a byte count: give a positive number of bytes, "
                               "optionally with K, M, G or T (16G), or 'none'",
                               CP_MAX_PLAN_BYTES_ENV, env);
        return CP_OK;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    rt->max_plan_source = "the machine's physical memory";
    if (pages <= 0 || page <= 0 || (uint64_t)pages > UINT64_MAX / (uint64_t)page)
        rt->max_plan_bytes = UINT64_MAX;
    else
        rt->max_plan_bytes = (uint64_t)pages * (uint64_t)page;
    return CP_OK;
}

static enum cp_status intern_names(struct cp_runtime *rt, struct cp_diag *d)
{
    struct cp_rt_names *n = &rt->names;
    n->load = n->plan = n->alloc = n->input_copy = n->execute = n->output_copy = -1;
    if (!rt->trace)
        return CP_OK;
    n->load = cp_trace_intern(rt->trace, "load");
    n->plan = cp_trace_intern(rt->trace, "plan");
    n->alloc = cp_trace_intern(rt->trace, "alloc");
    n->input_copy = cp_trace_intern(rt->trace, "input copy");
    n->execute = cp_trace_intern(rt->trace, "execute");
    n->output_copy = cp_trace_intern(rt->trace, "output copy");
    if (n->load < 0 || n->plan < 0 || n->alloc < 0 || n->input_copy < 0 || n->execute < 0 ||
        n->output_copy < 0)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory interning trace event names");
    return CP_OK;
}

enum cp_status cp_runtime_create(const struct cp_runtime_options *opt, struct cp_runtime **out,
                                 struct cp_diag *d)
{
    *out = NULL;
    struct cp_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory creating the runtime");
    rt->threads = opt && opt->threads > 0 ? opt->threads : cp_host_usable_cpus();
    rt->trace = opt ? opt->trace : NULL;
    rt->trace_thread = opt ? opt->trace_thread : 0;
    rt->env.threads = rt->threads;
    cp_host_detect(&rt->host);
    enum cp_status st = plan_limit(rt, opt, d);
    if (st == CP_OK)
        st = intern_names(rt, d);
    if (st != CP_OK)
        goto out_free_rt;
    cp_runtime_bind_threads(rt);

    dnnl_status_t ds = dnnl_engine_create(&rt->env.engine, dnnl_cpu, 0);
    if (ds != dnnl_success) {
        st = cp_diag_set(d, CP_ERR_INTERNAL, "oneDNN could not create a CPU engine (status %d)",
                         (int)ds);
        goto out_free_rt;
    }
    ds = dnnl_stream_create(&rt->env.stream, rt->env.engine, dnnl_stream_default_flags);
    if (ds != dnnl_success) {
        st = cp_diag_set(d, CP_ERR_INTERNAL, "oneDNN could not create a CPU stream (status %d)",
                         (int)ds);
        goto out_destroy_engine;
    }
    *out = rt;
    return CP_OK;

out_destroy_engine:
    dnnl_engine_destroy(rt->env.engine);
out_free_rt:
    free(rt);
    return st;
}

void cp_runtime_free(struct cp_runtime *rt)
{
    if (!rt)
        return;
    if (rt->env.stream)
        dnnl_stream_destroy(rt->env.stream);
    if (rt->env.engine)
        dnnl_engine_destroy(rt->env.engine);
    free(rt);
}

int cp_runtime_threads(const struct cp_runtime *rt)
{
    return rt->threads;
}

uint64_t cp_runtime_max_plan_bytes(const struct cp_runtime *rt)
{
    return rt->max_plan_bytes;
}

void cp_runtime_pause_trace(struct cp_runtime *rt, bool paused)
{
    rt->trace_paused = paused;
}

struct cp_trace_recorder *cp_runtime_trace(const struct cp_runtime *rt)
{
    return rt->trace;
}

void cp_runtime_bind_threads(const struct cp_runtime *rt)
{
    if (omp_get_max_threads() != rt->threads)
        omp_set_num_threads(rt->threads);
}

void cp_runtime_record(const struct cp_runtime *rt, int32_t name, int32_t iteration,
                       uint64_t start_ns, uint64_t end_ns)
{
    struct cp_trace_recorder *tr = cp_rt_recording(rt);
    if (tr && name >= 0)
        cp_trace_record(tr, CP_LAYER_RUNTIME, name, -1, iteration, start_ns, end_ns,
                        rt->trace_thread);
}
