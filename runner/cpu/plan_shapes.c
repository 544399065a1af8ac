/* Concrete shapes for a plan.
 *
 * Order of precedence for an input's dimensions: --input_shape (a -1 entry
 * keeps the model's dimension), then the batch (dimension 0), then the
 * model's own. With dynamic-batch profiles in the .om, the batch must be
 * one of them and applies to inputs whose dimension 0 is dynamic (when none
 * is, to every input); without a batch option such a model runs with its
 * first profile. Without profiles, a batch overrides dimension 0 of every
 * input, static or not, so `bench --batch 4` works on static models too
 * (inference then says which node hard-codes the old batch).
 *
 * Intermediate shapes recorded in the .om were inferred (or declared by the
 * source model) for the model's own input shapes. When a plan keeps those
 * input shapes, the recorded shapes stay as hints: inference runs again and
 * its static dimensions win, but a shape that depends on data only known at
 * run time (a Slice whose starts are an input) keeps what the model
 * declared. When any input shape changes, every intermediate shape is
 * forgotten before inference, so nothing stale survives. */
#include "runner/cpu/layout.h"
#include "runner/cpu/plan_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void list_inputs(const struct cp_graph *g, struct cp_buf *b)
{
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++)
        cp_buf_printf(b, "%s%s", i ? ", " : "", cp_graph_tensor(g, cp_graph_input(g, i))->name);
    if (cp_graph_n_inputs(g) == 0)
        cp_buf_puts(b, "(none)");
}

static long find_input(const struct cp_graph *g, const char *name)
{
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++)
        if (strcmp(cp_graph_tensor(g, cp_graph_input(g, i))->name, name) == 0)
            return (long)i;
    return -1;
}

static void set_dim(struct cp_dim *dm, int64_t v)
{
    dm->value = v;
    dm->sym = NULL;
}

static enum cp_status apply_input_shapes(struct cp_graph *g, const char *name,
                                         const struct cp_plan_options *opt, bool *dim0_given,
                                         struct cp_diag *d)
{
    for (size_t s = 0; s < opt->n_input_shapes; s++) {
        const struct cp_input_shape *is = &opt->input_shapes[s];
        long i = find_input(g, is->name);
        if (i < 0) {
            struct cp_buf b;
            cp_buf_init(&b);
            list_inputs(g, &b);
            enum cp_status st =
                cp_diag_set(d, CP_ERR_INVALID,
                            "%s: --input_shape names '%s', which is not an input; the "
                            "model's inputs are: %s",
                            name, is->name, b.data ? b.data : "?");
            cp_buf_release(&b);
            return st;
        }
        struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, (size_t)i));
        if (is->rank < 0 || is->rank > CP_MAX_RANK)
            return cp_diag_set(d, CP_ERR_INVALID, "%s: --input_shape for '%s' has rank %d", name,
                               is->name, is->rank);
        if (t->shape.rank < 0) {
            /* The model does not know the rank: take it from the option. */
            t->shape.rank = is->rank;
            for (int k = 0; k < is->rank; k++)
                set_dim(&t->shape.dims[k], -1);
        }
        if (is->rank != t->shape.rank) {
            char have[96];
            cp_shape_format(&t->shape, have, sizeof have);
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s: --input_shape gives input '%s' %d dimension%s, but the model's "
                               "input has %d (%s)",
                               name, is->name, is->rank, is->rank == 1 ? "" : "s", t->shape.rank,
                               have);
        }
        for (int k = 0; k < is->rank; k++)
            if (is->dims[k] >= 0) {
                set_dim(&t->shape.dims[k], is->dims[k]);
                if (k == 0)
                    dim0_given[i] = true;
            }
    }
    return CP_OK;
}

static bool has_dynamic_dim0(const struct cp_tensor *t)
{
    return t->shape.rank >= 1 && t->shape.dims[0].value < 0;
}

static enum cp_status check_profile(const char *name, const struct cp_convert_config *c,
                                    int64_t batch, struct cp_diag *d)
{
    for (size_t i = 0; i < c->n_dynamic_batch; i++)
        if (c->dynamic_batch[i] == batch)
            return CP_OK;
    struct cp_buf b;
    cp_buf_init(&b);
    for (size_t i = 0; i < c->n_dynamic_batch; i++)
        cp_buf_printf(&b, "%s%lld", i ? "," : "", (long long)c->dynamic_batch[i]);
    enum cp_status st = cp_diag_set(d, CP_ERR_INVALID,
                                    "%s: batch %lld is not one of the .om's dynamic batch "
                                    "profiles: %s",
                                    name, (long long)batch, b.data ? b.data : "?");
    cp_buf_release(&b);
    return st;
}

static enum cp_status apply_batch(struct cp_graph *g, const char *name,
                                  const struct cp_convert_config *c, int64_t batch,
                                  int64_t open_dim0, const bool *dim0_given, struct cp_diag *d)
{
    size_t ni = cp_graph_n_inputs(g);
    bool profiles = c->n_dynamic_batch > 0;
    bool any_dynamic = false;
    for (size_t i = 0; i < ni; i++)
        if (!dim0_given[i] && has_dynamic_dim0(cp_graph_tensor(g, cp_graph_input(g, i))))
            any_dynamic = true;
    if (batch <= 0 && !profiles && any_dynamic && open_dim0 > 0) {
        /* only the open first dimensions: a fixed one stays the model's */
        for (size_t i = 0; i < ni; i++) {
            struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
            if (!dim0_given[i] && has_dynamic_dim0(t))
                set_dim(&t->shape.dims[0], open_dim0);
        }
        return CP_OK;
    }
    if (batch <= 0) {
        if (!profiles || !any_dynamic)
            return CP_OK;
        batch = c->dynamic_batch[0];
    }
    if (profiles) {
        enum cp_status st = check_profile(name, c, batch, d);
        if (st != CP_OK)
            return st;
    }
    for (size_t i = 0; i < ni; i++) {
        struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
        if (dim0_given[i] || t->shape.rank < 1)
            continue;
        if (profiles && any_dynamic && !has_dynamic_dim0(t))
            continue;
        set_dim(&t->shape.dims[0], batch);
    }
    return CP_OK;
}

/* A suggestion for --input_shape: the input's shape with dynamic
 * dimensions shown as 1. */
static void suggest_shape(const struct cp_tensor *t, char *out, size_t n)
{
    size_t pos = (size_t)snprintf(out, n, "%s:", t->name);
    for (int k = 0; k < t->shape.rank && pos < n; k++) {
        int64_t v = t->shape.dims[k].value < 0 ? 1 : t->shape.dims[k].value;
        int w = snprintf(out + pos, n - pos, "%s%lld", k ? "," : "", (long long)v);
        if (w < 0)
            break;
        pos += (size_t)w;
    }
}

static enum cp_status check_inputs_static(const struct cp_graph *g, const char *name,
                                          struct cp_diag *d)
{
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
        if (t->kind == CP_TENSOR_INITIALIZER)
            continue;
        if (t->shape.rank < 0)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s: input '%s' has no known shape; pass it with --input_shape "
                               "%s:d0,d1,...",
                               name, t->name, t->name);
        if (!cp_shape_is_static(&t->shape)) {
            char have[96], hint[300];
            cp_shape_format(&t->shape, have, sizeof have);
            suggest_shape(t, hint, sizeof hint);
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s: input '%s' has a dynamic shape (%s); pass a concrete one with "
                               "--input_shape (e.g. --input_shape %s)",
                               name, t->name, have, hint);
        }
        if (t->dtype == CP_DTYPE_UNDEFINED)
            return cp_diag_set(d, CP_ERR_INVALID, "%s: input '%s' has no dtype", name, t->name);
    }
    return CP_OK;
}

static void reset_intermediates(struct cp_graph *g)
{
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++) {
        struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        if (t->kind != CP_TENSOR_INTERMEDIATE)
            continue;
        cp_shape_set_unknown(&t->shape);
        t->value = NULL;
        t->value_len = 0;
    }
}

/* Tensors whose layout no pass decided are plain row-major, which for image
 * ranks is NCHW / NCDHW; traces then say what the kernels really saw. */
static void tag_plain_layouts(struct cp_graph *g)
{
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++) {
        struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        if (t->layout != CP_LAYOUT_UNDEF)
            continue;
        t->layout = t->shape.rank == 4   ? CP_LAYOUT_NCHW
                    : t->shape.rank == 5 ? CP_LAYOUT_NCDHW
                                         : CP_LAYOUT_ND;
    }
}

/* A layout the conversion chose must still fit the concrete shapes: NHWC
 * and blocked tags on rank-4 tensors, blocks dividing the channels (a
 * blocked tensor never pads, so the memory plan's byte counts hold). */
static enum cp_status check_layouts(const struct cp_graph *g, const char *name, struct cp_diag *d)
{
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        if (!cp_shape_is_static(&t->shape) || cp_layout_fits(t->layout, &t->shape))
            continue;
        char s[96];
        cp_shape_format(&t->shape, s, sizeof s);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: tensor '%s' is laid out %s, which does not fit its shape %s "
                           "(blocked layouts need the channels to be a multiple of the block)",
                           name, t->name, cp_layout_name(t->layout), s);
    }
    return CP_OK;
}

/* Whether any input's shape differs from what the model declared. */
static bool shapes_changed(const struct cp_graph *g, const struct cp_shape *before)
{
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++)
        if (!cp_shape_equal(&cp_graph_tensor(g, cp_graph_input(g, i))->shape, &before[i]))
            return true;
    return false;
}

static enum cp_status infer(struct cp_graph *g, const char *name, bool changed, struct cp_diag *d)
{
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st = cp_graph_infer(g, &local);
    if (st == CP_OK)
        return CP_OK;
    if (!changed)
        return cp_diag_set(d, st, "%s: %s", name, local.msg);
    struct cp_buf b;
    cp_buf_init(&b);
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
        char s[96];
        cp_shape_format(&t->shape, s, sizeof s);
        cp_buf_printf(&b, "%s%s=%s", i ? ", " : "", t->name, s);
    }
    cp_diag_set(d, st, "%s: %s (with input shapes %s; the model may fix these dimensions)", name,
                local.msg, b.data ? b.data : "?");
    cp_buf_release(&b);
    return st;
}

enum cp_status cp_plan_apply_shapes(struct cp_graph *g, const char *name,
                                    const struct cp_om_meta *meta,
                                    const struct cp_plan_options *opt, struct cp_diag *d)
{
    size_t ni = cp_graph_n_inputs(g);
    bool *dim0_given = cp_calloc(ni + 1, sizeof *dim0_given);
    struct cp_shape *before = cp_calloc(ni + 1, sizeof *before);
    enum cp_status st = CP_OK;
    if (!dim0_given || !before) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory planning", name);
        goto out_free;
    }
    for (size_t i = 0; i < ni; i++)
        before[i] = cp_graph_tensor(g, cp_graph_input(g, i))->shape;
    if ((st = apply_input_shapes(g, name, opt, dim0_given, d)) != CP_OK)
        goto out_free;
    if ((st = apply_batch(g, name, &meta->config, opt->batch, opt->open_dim0, dim0_given, d)) !=
        CP_OK)
        goto out_free;
    if ((st = check_inputs_static(g, name, d)) != CP_OK)
        goto out_free;
    bool changed = shapes_changed(g, before);
    if (changed)
        reset_intermediates(g);
    st = infer(g, name, changed, d);
    if (st == CP_OK) {
        tag_plain_layouts(g);
        st = check_layouts(g, name, d);
    }
out_free:
    free(dim0_given);
    free(before);
    return st;
}
