/* Running a plan, and moving inputs in and outputs out. The run loop
 * allocates nothing and, without a trace recorder, reads no clock. */
#include "runner/cpu/plan_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum cp_status cp_plan_run(struct cp_plan *p, int32_t iteration, struct cp_diag *d)
{
    struct cp_trace_recorder *tr = cp_rt_recording(p->rt);
    cp_runtime_bind_threads(p->rt);
    uint64_t t0 = 0;
    if (tr) {
        /* Growing here, outside the kernels, keeps the loop free of
         * allocation; on OOM the recorder drops and counts events. */
        (void)cp_trace_reserve(tr, p->n_kx + 4);
        t0 = cp_clock_ns();
    }
    if (p->dyn) {
        enum cp_status st = cp_plan_run_dynamic(p, iteration, d);
        if (st == CP_OK && tr)
            cp_runtime_record(p->rt, p->rt->names.execute, iteration, t0, cp_clock_ns());
        return st;
    }
    for (size_t i = 0; i < p->n_kx; i++) {
        struct cp_kexec *x = &p->kx[i];
        enum cp_status st;
        if (tr) {
            uint64_t ks = cp_clock_ns();
            st = x->kernel->run(x);
            cp_trace_record(tr, CP_LAYER_DEVICE, p->kname[i], (int32_t)i, iteration, ks,
                            cp_clock_ns(), p->rt->trace_thread);
        } else {
            st = x->kernel->run(x);
        }
        if (st != CP_OK)
            return cp_diag_set(d, st, "%s: node '%s' (%s): kernel %s failed (%s)%s%s", p->m->name,
                               x->node->name, x->node->op_type, x->kernel->name, cp_status_str(st),
                               x->run_why ? ": " : "", x->run_why ? x->run_why : "");
    }
    if (tr)
        cp_runtime_record(p->rt, p->rt->names.execute, iteration, t0, cp_clock_ns());
    return CP_OK;
}

/* ---- inputs and outputs ------------------------------------------------------------ */

static void host_shape(const struct cp_host_tensor *t, struct cp_shape *s)
{
    if (t->rank < 0 || t->rank > CP_MAX_RANK) {
        cp_shape_set_unknown(s);
        return;
    }
    cp_shape_set(s, t->rank, t->dims);
}

/* An input converted with --input_format NHWC takes its data in NHWC
 * order: a host tensor of shape [N, H, W, C] is accepted for the logical
 * [N, C, H, W], its bytes copied as they are. */
static bool is_nhwc_of(const struct cp_shape *s, const struct cp_tensor *T)
{
    if (T->layout != CP_LAYOUT_NHWC || s->rank != 4 || T->shape.rank != 4)
        return false;
    static const int from[4] = {0, 2, 3, 1};
    for (int k = 0; k < 4; k++)
        if (s->dims[k].value != T->shape.dims[from[k]].value)
            return false;
    return true;
}

enum cp_status cp_plan_set_input(struct cp_plan *p, size_t i, const struct cp_host_tensor *t,
                                 struct cp_diag *d)
{
    uint64_t t0 = cp_clock_ns();
    if (i >= cp_graph_n_inputs(p->g))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: input %zu does not exist (the model has %zu)",
                           p->m->name, i, cp_graph_n_inputs(p->g));
    int32_t ti = cp_graph_input(p->g, i);
    const struct cp_tensor *T = cp_graph_tensor(p->g, ti);
    if (T->kind == CP_TENSOR_INITIALIZER || (!p->dyn && p->mem.block[ti] < 0))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: input '%s' is a constant of the model and cannot be set",
                           p->m->name, T->name);
    if (t->dtype != T->dtype)
        return cp_diag_set(d, CP_ERR_INVALID, "input '%s': dtype %s does not match the model's %s",
                           T->name, cp_dtype_name(t->dtype), cp_dtype_name(T->dtype));
    struct cp_shape s;
    host_shape(t, &s);
    if (!cp_shape_equal(&s, &T->shape) && !is_nhwc_of(&s, T)) {
        char have[96], want[96];
        cp_shape_format(&s, have, sizeof have);
        cp_shape_format(&T->shape, want, sizeof want);
        return cp_diag_set(d, CP_ERR_INVALID, "input '%s': shape %s does not match the model's %s",
                           T->name, have, want);
    }
    uint64_t need = cp_memplan_tensor_bytes(T);
    if (t->nbytes != need || (need && !t->data))
        return cp_diag_set(d, CP_ERR_INVALID, "input '%s': %zu bytes of data, but %s needs %llu",
                           T->name, t->nbytes, cp_dtype_name(T->dtype), (unsigned long long)need);
    if (need)
        memcpy(p->ptr[ti], t->data, (size_t)need);
    cp_runtime_record(p->rt, p->rt->names.input_copy, -1, t0, cp_clock_ns());
    return CP_OK;
}

enum cp_status cp_plan_set_input_rows(struct cp_plan *p, size_t i, int64_t row, int64_t n_rows,
                                      const void *data, size_t nbytes, struct cp_diag *d)
{
    uint64_t t0 = cp_clock_ns();
    if (i >= cp_graph_n_inputs(p->g))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: input %zu does not exist (the model has %zu)",
                           p->m->name, i, cp_graph_n_inputs(p->g));
    int32_t ti = cp_graph_input(p->g, i);
    const struct cp_tensor *T = cp_graph_tensor(p->g, ti);
    if (T->kind == CP_TENSOR_INITIALIZER || (!p->dyn && p->mem.block[ti] < 0) || !p->ptr[ti])
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: input '%s' is a constant of the model and cannot be set",
                           p->m->name, T->name);
    if (T->shape.rank < 1 || !cp_shape_is_static(&T->shape) || T->shape.dims[0].value < 1)
        return cp_diag_set(d, CP_ERR_INVALID, "input '%s' has no rows to set", T->name);
    int64_t d0 = T->shape.dims[0].value;
    uint64_t row_bytes = cp_memplan_tensor_bytes(T) / (uint64_t)d0;
    if (row < 0 || n_rows < 1 || row > d0 - n_rows)
        return cp_diag_set(d, CP_ERR_INVALID, "input '%s': rows %lld..%lld of %lld", T->name,
                           (long long)row, (long long)(row + n_rows - 1), (long long)d0);
    if ((uint64_t)nbytes != row_bytes * (uint64_t)n_rows || (nbytes && !data))
        return cp_diag_set(d, CP_ERR_INVALID, "input '%s': %zu bytes for %lld rows of %llu",
                           T->name, nbytes, (long long)n_rows, (unsigned long long)row_bytes);
    if (nbytes)
        memcpy((char *)p->ptr[ti] + (size_t)(row_bytes * (uint64_t)row), data, nbytes);
    cp_runtime_record(p->rt, p->rt->names.input_copy, -1, t0, cp_clock_ns());
    return CP_OK;
}

enum cp_status cp_plan_output_view(const struct cp_plan *p, size_t i, struct cp_host_tensor *t,
                                   struct cp_diag *d)
{
    memset(t, 0, sizeof *t);
    if (i >= cp_graph_n_outputs(p->g))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: output %zu does not exist (the model has %zu)",
                           p->m->name, i, cp_graph_n_outputs(p->g));
    int32_t to = cp_graph_output(p->g, i);
    const struct cp_tensor *T = cp_graph_tensor(p->g, to);
    uint64_t n = cp_memplan_tensor_bytes(T);
    if (!cp_shape_is_static(&T->shape) || (n && !p->ptr[to]))
        return cp_diag_set(d, CP_ERR_INTERNAL, "%s: output '%s' has no storage in the plan",
                           p->m->name, T->name);
    snprintf(t->name, sizeof t->name, "%s", T->name);
    t->dtype = T->dtype;
    t->rank = T->shape.rank;
    for (int k = 0; k < T->shape.rank; k++)
        t->dims[k] = T->shape.dims[k].value;
    t->data = p->ptr[to];
    t->nbytes = (size_t)n;
    return CP_OK;
}

enum cp_status cp_plan_get_output(struct cp_plan *p, size_t i, struct cp_host_tensor *t,
                                  struct cp_diag *d)
{
    uint64_t t0 = cp_clock_ns();
    struct cp_host_tensor view;
    enum cp_status st = cp_plan_output_view(p, i, &view, d);
    memset(t, 0, sizeof *t);
    if (st != CP_OK)
        return st;
    *t = view;
    t->data = malloc(view.nbytes ? view.nbytes : 1);
    if (!t->data) {
        t->nbytes = 0;
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory copying output '%s'", view.name);
    }
    if (view.nbytes)
        memcpy(t->data, view.data, view.nbytes);
    cp_runtime_record(p->rt, p->rt->names.output_copy, -1, t0, cp_clock_ns());
    return CP_OK;
}

/* ---- accessors ---------------------------------------------------------------------- */

void cp_plan_memory(const struct cp_plan *p, struct cp_mem_report *out)
{
    out->weight_bytes = p->mem.weight_bytes;
    out->arena_bytes = p->mem.arena_bytes;
    out->peak_bytes = p->mem.peak_bytes;
    out->scratch_bytes = p->scratch_bytes;
    if (p->dyn) { /* what the buffers hold after the runs so far */
        out->arena_bytes = cp_plan_dynamic_bytes(p);
        out->peak_bytes = out->arena_bytes;
    }
}

size_t cp_plan_n_inputs(const struct cp_plan *p)
{
    return cp_graph_n_inputs(p->g);
}

size_t cp_plan_n_outputs(const struct cp_plan *p)
{
    return cp_graph_n_outputs(p->g);
}

const struct cp_tensor *cp_plan_input(const struct cp_plan *p, size_t i)
{
    return i < cp_graph_n_inputs(p->g) ? cp_graph_tensor(p->g, cp_graph_input(p->g, i)) : NULL;
}

const struct cp_tensor *cp_plan_output(const struct cp_plan *p, size_t i)
{
    return i < cp_graph_n_outputs(p->g) ? cp_graph_tensor(p->g, cp_graph_output(p->g, i)) : NULL;
}

size_t cp_plan_n_kernels(const struct cp_plan *p)
{
    return p->n_kx;
}

const struct cp_trace_kernel *cp_plan_kernels(const struct cp_plan *p)
{
    return p->ktab;
}

uint64_t cp_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss < 0)
        return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}
