/* Finishing dynamic batch after the conversion passes: the batch made
 * dynamic again and every profile checked (see batch_check.h). */
#include "atc_bridge/passes/batch_check.h"
#include "om/om.h"

#include <stdlib.h>
#include <string.h>

void cp_batch_forget_intermediates(struct cp_graph *g)
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

static enum cp_status check_one(struct cp_graph *g, const struct cp_shape *declared, int64_t batch,
                                struct cp_diag *d)
{
    size_t ni = cp_graph_n_inputs(g);
    bool any = false;
    for (size_t i = 0; i < ni; i++)
        if (declared[i].rank >= 1 && declared[i].dims[0].value < 0)
            any = true;
    for (size_t i = 0; i < ni; i++) {
        struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
        t->shape = declared[i];
        if (t->kind == CP_TENSOR_INITIALIZER || t->shape.rank < 1)
            continue;
        /* As the runtime does: the dynamic dimension 0s, or, when there is
         * none, every input's. */
        if (!any || t->shape.dims[0].value < 0) {
            t->shape.dims[0].value = batch;
            t->shape.dims[0].sym = NULL;
        }
    }
    cp_batch_forget_intermediates(g);
    struct cp_diag local;
    cp_diag_init(&local);
    if (cp_graph_infer(g, &local) == CP_OK)
        return CP_OK;
    return cp_diag_set(d, CP_ERR_INVALID,
                       "--dynamic_batch_size: the converted model cannot run at batch %lld: %s",
                       (long long)batch, local.msg);
}

/* Dimension 0 of the inputs --input_shape declares dynamic there, which
 * DynamicBatchPass left at the exported batch. */
static void make_batch_dynamic(struct cp_graph *g, const struct cp_convert_config *c)
{
    for (size_t k = 0; k < c->n_input_shapes; k++) {
        const struct cp_input_shape *is = &c->input_shapes[k];
        if (is->rank < 1 || is->dims[0] >= 0)
            continue;
        for (size_t i = 0; i < cp_graph_n_inputs(g); i++) {
            struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
            if (t->shape.rank >= 1 && strcmp(t->name, is->name) == 0) {
                t->shape.dims[0].value = -1;
                t->shape.dims[0].sym = NULL;
            }
        }
    }
}

static enum cp_status check_profiles(const struct cp_graph *g, const struct cp_convert_config *c,
                                     struct cp_diag *d)
{
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.format_version = CP_OM_FORMAT_VERSION;
    meta.tool_version = (char *)CP_VERSION_STRING;
    meta.source_path = (char *)"";
    meta.source_hash = (char *)"";
    meta.target = (char *)"cpu";
    meta.config = *c;
    uint8_t *bytes = NULL;
    size_t len = 0;
    struct cp_graph *copy = NULL;
    struct cp_shape *declared = NULL;
    enum cp_status st = cp_om_write_buffer(g, &meta, &bytes, &len, d);
    if (st != CP_OK)
        return st;
    if ((st = cp_om_read_buffer(bytes, len, "converted model", &copy, NULL, d)) != CP_OK)
        goto out_free;
    size_t ni = cp_graph_n_inputs(copy);
    declared = cp_calloc(ni + 1, sizeof *declared);
    if (!declared) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory checking batch profiles");
        goto out_free;
    }
    for (size_t i = 0; i < ni; i++)
        declared[i] = cp_graph_tensor(copy, cp_graph_input(copy, i))->shape;
    for (size_t k = 0; k < c->n_dynamic_batch && st == CP_OK; k++)
        st = check_one(copy, declared, c->dynamic_batch[k], d);
out_free:
    free(declared);
    cp_graph_free(copy);
    free(bytes);
    return st;
}

enum cp_status cp_batch_finish(struct cp_graph *g, const struct cp_convert_config *c,
                               const struct cp_log *log, struct cp_diag *d)
{
    if (c->n_dynamic_batch == 0)
        return CP_OK;
    make_batch_dynamic(g, c);
    enum cp_status st;
    struct cp_diag local;
    cp_diag_init(&local);
    if (!cp_convert_config_pass_is_off(c, "DynamicBatchPass")) {
        bool changed;
        st = cp_batch_generalise(g, c, false, log, &changed, &local);
    } else {
        cp_batch_forget_intermediates(g);
        st = cp_graph_infer(g, &local);
    }
    if (st != CP_OK)
        return cp_diag_set(d, st, "--dynamic_batch_size: after the conversion passes: %s",
                           local.msg);
    return check_profiles(g, c, d);
}
