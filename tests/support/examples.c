/* Test support: the example models through the library (see examples.h). */
#include "onnx/onnx.h"
#include "support/examples.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cp_ex_models[] = {
    "sd_unet_tiny",
    "resnet_tiny",
    "transformer_encoder_op14",
    "transformer_encoder_op17",
    "nhwc_roundtrip",
    "launch_bound_tiny",
    NULL,
};

void cp_ex_io_release(struct cp_ex_io *io)
{
    for (size_t i = 0; i < io->n; i++)
        cp_host_tensor_release(&io->t[i]);
    io->n = 0;
}

enum cp_status cp_ex_read_inputs(const char *name, struct cp_ex_io *in, struct cp_diag *d)
{
    memset(in, 0, sizeof *in);
    for (size_t i = 0; i < CP_EX_MAX_IO; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/examples/models/%s/test_data_set_0/input_%zu.pb",
                 CP_SOURCE_DIR, name, i);
        if (!cp_path_exists(path))
            break;
        enum cp_status st = cp_tensor_read_file(path, &in->t[i], d);
        if (st != CP_OK) {
            cp_ex_io_release(in);
            return st;
        }
        in->n = i + 1;
    }
    if (in->n == 0)
        return cp_diag_set(d, CP_ERR_IO, "%s: no test_data_set_0 inputs", name);
    return CP_OK;
}

enum cp_status cp_ex_repeat_batch(const struct cp_ex_io *in, int64_t batch, struct cp_ex_io *out,
                                  struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < in->n; i++) {
        const struct cp_host_tensor *s = &in->t[i];
        struct cp_host_tensor *t = &out->t[i];
        if (s->rank < 1 || s->dims[0] != 1) {
            cp_ex_io_release(out);
            return cp_diag_set(d, CP_ERR_INVALID, "input '%s' does not have batch 1", s->name);
        }
        *t = *s;
        t->dims[0] = batch;
        t->nbytes = s->nbytes * (size_t)batch;
        t->data = malloc(t->nbytes ? t->nbytes : 1);
        if (!t->data) {
            cp_ex_io_release(out);
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        }
        for (int64_t b = 0; b < batch; b++)
            memcpy((char *)t->data + (size_t)b * s->nbytes, s->data, s->nbytes);
        out->n = i + 1;
    }
    return CP_OK;
}

enum cp_status cp_ex_import(const char *name, struct cp_graph **g, char hash[33], struct cp_diag *d)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/examples/models/%s.onnx", CP_SOURCE_DIR, name);
    *g = NULL;
    enum cp_status st = cp_onnx_import(path, NULL, 0, g, hash, d);
    if (st == CP_OK)
        st = cp_graph_verify(*g, d);
    if (st == CP_OK)
        st = cp_graph_compact(*g, d);
    if (st == CP_OK)
        st = cp_graph_infer(*g, d);
    if (st != CP_OK) {
        cp_graph_free(*g);
        *g = NULL;
    }
    return st;
}

enum cp_status cp_ex_fingerprint(const char *name, struct cp_kb_fingerprint *fp, struct cp_diag *d)
{
    struct cp_graph *g = NULL;
    char hash[33];
    enum cp_status st = cp_ex_import(name, &g, hash, d);
    if (st == CP_OK)
        st = cp_kb_fingerprint_graph(g, hash, name, fp, d);
    cp_graph_free(g);
    return st;
}

enum cp_status cp_ex_open_onnx(struct cp_runtime *rt, const char *name, struct cp_model **m,
                               struct cp_diag *d)
{
    struct cp_om_meta meta;
    char path[sizeof meta.config.model];
    snprintf(path, sizeof path, "%s/examples/models/%s.onnx", CP_SOURCE_DIR, name);
    struct cp_graph *g = NULL;
    char hash[33];
    enum cp_status st = cp_ex_import(name, &g, hash, d);
    if (st != CP_OK)
        return st;
    memset(&meta, 0, sizeof meta);
    cp_convert_config_init(&meta.config);
    snprintf(meta.config.model, sizeof meta.config.model, "%s", path);
    meta.format_version = CP_OM_FORMAT_VERSION;
    meta.tool_version = (char *)CP_VERSION_STRING;
    meta.source_path = path;
    meta.source_hash = hash;
    meta.target = (char *)"cpu (unconverted onnx)";
    return cp_model_from_graph(rt, g, &meta, m, d);
}

enum cp_status cp_ex_run(struct cp_model *m, int64_t batch, const struct cp_ex_io *in,
                         struct cp_ex_io *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    struct cp_plan_options po = {.batch = batch, .buffer_optimize = -1};
    struct cp_plan *p = NULL;
    enum cp_status st = cp_plan_create(m, &po, &p, d);
    if (st != CP_OK)
        return st;
    for (size_t i = 0; i < cp_plan_n_inputs(p) && st == CP_OK; i++) {
        const char *name = cp_plan_input(p, i)->name;
        size_t k = 0;
        while (k < in->n && strcmp(in->t[k].name, name) != 0)
            k++;
        if (k == in->n)
            st = cp_diag_set(d, CP_ERR_INVALID, "no test input for '%s'", name);
        else
            st = cp_plan_set_input(p, i, &in->t[k], d);
    }
    if (st == CP_OK)
        st = cp_plan_run(p, -1, d);
    size_t n_out = cp_plan_n_outputs(p);
    if (st == CP_OK && n_out > CP_EX_MAX_IO)
        st = cp_diag_set(d, CP_ERR_UNSUPPORTED, "%zu outputs; at most %d", n_out, CP_EX_MAX_IO);
    for (size_t i = 0; i < n_out && st == CP_OK; i++) {
        st = cp_plan_get_output(p, i, &out->t[i], d);
        if (st == CP_OK)
            out->n = i + 1;
    }
    if (st != CP_OK)
        cp_ex_io_release(out);
    cp_plan_free(p);
    return st;
}

enum cp_status cp_ex_rel_l2(const struct cp_ex_io *ref, const struct cp_ex_io *got, double *rel,
                            struct cp_diag *d)
{
    *rel = 0;
    if (ref->n != got->n)
        return cp_diag_set(d, CP_ERR_INVALID, "%zu outputs, reference has %zu", got->n, ref->n);
    struct cp_tensor_diff diff[CP_EX_MAX_IO];
    for (size_t i = 0; i < ref->n; i++) {
        enum cp_status st = cp_tensor_compare(&ref->t[i], &got->t[i], 0, 0, &diff[i], d);
        if (st != CP_OK)
            return st;
    }
    *rel = cp_precision_loss(diff, ref->n) / 100.0;
    return CP_OK;
}
