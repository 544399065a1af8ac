/* Model opening and input feeding shared by run and bench. */
#include "runner/session.h"
#include "onnx/onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum cp_status open_onnx(struct cp_session *s, const struct cp_session_opts *o,
                                struct cp_diag *d)
{
    struct cp_graph *g = NULL;
    char hash[33];
    enum cp_status st = cp_onnx_import(o->model_path, s->shapes.input_shapes,
                                       s->shapes.n_input_shapes, &g, hash, d);
    if (st == CP_OK)
        st = cp_graph_verify(g, d);
    if (st == CP_OK)
        st = cp_graph_compact(g, d);
    if (st == CP_OK)
        st = cp_graph_infer(g, d);
    for (size_t i = 0; st == CP_OK && i < o->n_extra_outputs; i++) {
        int32_t t = cp_graph_find_tensor(g, o->extra_outputs[i]);
        if (t < 0) {
            st = cp_diag_set(d, CP_ERR_USAGE, "%s has no tensor named '%s'", o->model_path,
                             o->extra_outputs[i]);
            break;
        }
        bool listed = cp_graph_tensor(g, t)->kind != CP_TENSOR_INTERMEDIATE;
        for (size_t k = 0; !listed && k < cp_graph_n_outputs(g); k++)
            listed = cp_graph_output(g, k) == t;
        if (!listed && (st = cp_graph_add_output(g, t)) != CP_OK)
            cp_diag_set(d, st, "out of memory adding output '%s'", o->extra_outputs[i]);
    }
    if (st != CP_OK) {
        cp_graph_free(g);
        return st;
    }
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    cp_convert_config_init(&meta.config);
    snprintf(meta.config.model, sizeof meta.config.model, "%s", o->model_path);
    meta.format_version = CP_OM_FORMAT_VERSION;
    meta.tool_version = (char *)CP_VERSION_STRING;
    meta.source_path = (char *)o->model_path;
    meta.source_hash = hash;
    meta.target = (char *)"cpu (unconverted onnx)";
    s->from_onnx = true;
    return cp_model_from_graph(s->rt, g, &meta, &s->model, d);
}

enum cp_status cp_session_open(struct cp_session *s, const struct cp_session_opts *o,
                               struct cp_diag *d)
{
    memset(s, 0, sizeof *s);
    cp_convert_config_init(&s->shapes);
    enum cp_status st;
    if (o->input_shape &&
        (st = cp_convert_config_set(&s->shapes, "input_shape", o->input_shape, d)) != CP_OK)
        return st;
    struct cp_runtime_options ro = {
        .threads = o->threads, .trace = o->trace, .trace_thread = o->trace_thread};
    if ((st = cp_runtime_create(&ro, &s->rt, d)) != CP_OK)
        return st;
    if (cp_path_has_suffix(o->model_path, ".onnx"))
        st = open_onnx(s, o, d);
    else
        st = cp_model_load(s->rt, o->model_path, &s->model, d);
    if (st != CP_OK)
        goto out_close;
    struct cp_plan_options po = {
        .input_shapes = s->shapes.input_shapes,
        .n_input_shapes = s->shapes.n_input_shapes,
        .batch = o->batch,
        .open_dim0 = o->open_dim0,
        .buffer_optimize = o->buffer_optimize,
    };
    if ((st = cp_plan_create(s->model, &po, &s->plan, d)) != CP_OK)
        goto out_close;
    return CP_OK;
out_close:
    cp_session_close(s);
    return st;
}

void cp_session_close(struct cp_session *s)
{
    cp_plan_free(s->plan);
    cp_model_free(s->model);
    cp_runtime_free(s->rt);
    memset(s, 0, sizeof *s);
}

static enum cp_status read_one(struct cp_session *s, size_t idx, const char *file,
                               struct cp_host_tensor *t, struct cp_diag *d)
{
    if (!file[0])
        return cp_diag_set(d, CP_ERR_USAGE, "--input %s=: no file given",
                           cp_plan_input(s->plan, idx)->name);
    return cp_tensor_read_file(file, t, d);
}

/* Name the file too when setting an input fails: the plan only knows the
 * input. */
static void name_file(const char *file, struct cp_diag *d)
{
    if (!file || strstr(d->msg, file))
        return;
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_printf(&b, "%s: %s", file, d->msg);
    if (b.data) {
        size_t n = b.len < sizeof d->msg - 1 ? b.len : sizeof d->msg - 1;
        memcpy(d->msg, b.data, n);
        d->msg[n] = '\0';
    }
    cp_buf_release(&b);
}

void cp_session_inputs_release(struct cp_session_inputs *in)
{
    for (size_t i = 0; i < in->n; i++)
        cp_host_tensor_release(&in->t[i]);
    free(in->t);
    free(in->file);
    memset(in, 0, sizeof *in);
}

enum cp_status cp_session_make_inputs(struct cp_session *s, const char *const *inputs, size_t n,
                                      uint64_t seed, struct cp_session_inputs *out,
                                      struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    size_t n_in = cp_plan_n_inputs(s->plan);
    out->t = cp_calloc(n_in ? n_in : 1, sizeof *out->t);
    out->file = cp_calloc(n_in ? n_in : 1, sizeof *out->file);
    if (!out->t || !out->file) {
        cp_session_inputs_release(out);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    out->n = n_in;
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const char *eq = strchr(inputs[i], '=');
        if (!eq) {
            if (n_in != 1) {
                st = cp_diag_set(d, CP_ERR_USAGE,
                                 "--input %s: the model has %zu inputs; write --input NAME=FILE",
                                 inputs[i], n_in);
                break;
            }
            if (out->file[0]) {
                st = cp_diag_set(d, CP_ERR_USAGE, "--input: '%s' is given twice",
                                 cp_plan_input(s->plan, 0)->name);
                break;
            }
            out->file[0] = inputs[i];
            st = read_one(s, 0, inputs[i], &out->t[0], d);
            continue;
        }
        size_t len = (size_t)(eq - inputs[i]);
        size_t idx = n_in;
        for (size_t k = 0; k < n_in; k++) {
            const char *name = cp_plan_input(s->plan, k)->name;
            if (strlen(name) == len && strncmp(name, inputs[i], len) == 0)
                idx = k;
        }
        if (idx == n_in) {
            struct cp_buf names;
            cp_buf_init(&names);
            for (size_t k = 0; k < n_in; k++)
                cp_buf_printf(&names, "%s%s", k ? ", " : "", cp_plan_input(s->plan, k)->name);
            st =
                cp_diag_set(d, CP_ERR_USAGE,
                            "--input %.*s=...: the model has no input '%.*s'; "
                            "its inputs are: %s",
                            (int)len, inputs[i], (int)len, inputs[i], names.data ? names.data : "");
            cp_buf_release(&names);
            break;
        }
        if (out->file[idx]) {
            st =
                cp_diag_set(d, CP_ERR_USAGE, "--input: '%.*s' is given twice", (int)len, inputs[i]);
            break;
        }
        out->file[idx] = eq + 1;
        st = read_one(s, idx, eq + 1, &out->t[idx], d);
    }
    for (size_t k = 0; k < n_in && st == CP_OK; k++) {
        if (out->file[k])
            continue;
        const struct cp_tensor *t = cp_plan_input(s->plan, k);
        struct cp_host_tensor *h = &out->t[k];
        snprintf(h->name, sizeof h->name, "%s", t->name);
        h->dtype = t->dtype;
        h->rank = t->shape.rank;
        for (int i = 0; i < h->rank; i++)
            h->dims[i] = t->shape.dims[i].value;
        st = cp_tensor_fill_random(h, seed + k, d);
    }
    if (st != CP_OK)
        cp_session_inputs_release(out);
    return st;
}

enum cp_status cp_session_set_inputs(struct cp_session *s, const char *const *inputs, size_t n,
                                     uint64_t seed, struct cp_diag *d)
{
    struct cp_session_inputs in;
    enum cp_status st = cp_session_make_inputs(s, inputs, n, seed, &in, d);
    for (size_t k = 0; k < in.n && st == CP_OK; k++)
        if ((st = cp_plan_set_input(s->plan, k, &in.t[k], d)) != CP_OK)
            name_file(in.file[k], d);
    cp_session_inputs_release(&in);
    return st;
}

int64_t cp_session_items_per_run(const struct cp_plan *p, int64_t batch)
{
    if (batch > 0)
        return batch;
    if (cp_plan_n_inputs(p) == 0)
        return 1;
    const struct cp_tensor *t = cp_plan_input(p, 0);
    return t->shape.rank >= 1 && t->shape.dims[0].value > 0 ? t->shape.dims[0].value : 1;
}

enum cp_status cp_session_store_run(struct cp_session *s, struct cp_trace_store *store,
                                    const char *kind, const char *model_path,
                                    struct cp_trace_recorder *rec, int64_t batch, int64_t warmup,
                                    const uint64_t *ns, size_t n, uint64_t rss, int64_t *run_id,
                                    struct cp_diag *d)
{
    enum cp_status st;
    const struct cp_om_meta *meta = cp_model_meta(s->model);
    struct cp_mem_report mem;
    cp_plan_memory(s->plan, &mem);
    struct cp_buf cfg;
    cp_buf_init(&cfg);
    char id[17] = "";
    if (meta) {
        cp_convert_config_json(&meta->config, &cfg);
        cp_convert_config_id(&meta->config, id);
    }
    struct cp_trace_run_info info = {
        .kind = kind,
        .model_path = model_path,
        .model_hash = meta && meta->source_hash ? meta->source_hash : "",
        .config_json = cfg.data ? cfg.data : "{}",
        .config_id = id,
        .target = meta && meta->target ? meta->target : "",
        .threads = cp_runtime_threads(s->rt),
        .batch = (int)cp_session_items_per_run(s->plan, batch),
        .warmup = (int)warmup,
        .iterations = (int)n,
        .weight_bytes = mem.weight_bytes,
        .arena_bytes = mem.arena_bytes,
        .peak_bytes = mem.peak_bytes,
        .peak_rss_bytes = rss,
    };
    int64_t run = 0;
    if ((st = cp_trace_store_set_host_meta(store, d)) == CP_OK &&
        (st = cp_trace_store_begin_run(store, &info, &run, d)) == CP_OK &&
        (st = cp_trace_store_add_samples(store, run, 0, ns, n, d)) == CP_OK &&
        (st = cp_trace_store_add_kernels(store, run, cp_plan_kernels(s->plan),
                                         cp_plan_n_kernels(s->plan), d)) == CP_OK &&
        (!rec || (st = cp_trace_store_add_events(store, run, rec, d)) == CP_OK))
        st = cp_trace_store_add_counter(store, run, -1, "peak_rss_bytes", (double)rss,
                                        cp_clock_ns(), d);
    cp_buf_release(&cfg);
    *run_id = run;
    return st;
}
