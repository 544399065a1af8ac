/* cannprof info: describe an .onnx or .om file. */
#include "atc_bridge/convert.h"
#include "om/om.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cp_opt_use shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print the description as JSON"},
};

static const struct cp_command_opts OPTS = {
    .cmd = "info",
    .own = NULL,
    .n_own = 0,
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof info FILE [--json]\n\n"
             "Describe an ONNX model (.onnx) or an offline model (.om): inputs and outputs\n"
             "with shapes and dtypes, op histogram, parameter count and bytes, FLOP estimate,\n"
             "and for a CPU .om the recorded conversion config. An Ascend .om is recognised\n"
             "and its header fields are shown.\n",
    .exit_codes = "0 described, 2 bad usage or input (a file that cannot be read, is damaged or "
                  "is neither ONNX nor .om), 3 environment failure",
};

struct hist_entry {
    enum cp_op op;
    size_t count;
};

static int cmp_entry(const void *a, const void *b)
{
    const struct hist_entry *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(cp_op_name(x->op), cp_op_name(y->op));
}

static size_t sorted_hist(const struct cp_graph_stats *s, struct hist_entry *out)
{
    size_t n = 0;
    for (int op = 0; op < CP_OP_COUNT; op++)
        if (s->op_count[op]) {
            out[n].op = (enum cp_op)op;
            out[n].count = s->op_count[op];
            n++;
        }
    qsort(out, n, sizeof *out, cmp_entry);
    return n;
}

static void tensor_line(const struct cp_graph *g, int32_t idx, struct cp_buf *b)
{
    const struct cp_tensor *t = cp_graph_tensor(g, idx);
    char shape[160];
    cp_shape_format(&t->shape, shape, sizeof shape);
    cp_buf_printf(b, "  %-28s %-5s %s\n", t->name, cp_dtype_name(t->dtype), shape);
}

/* {"name","dtype","shape":[dims; a symbolic one by its name, unknown -1]} */
static json_t *tensor_json(const struct cp_graph *g, int32_t idx)
{
    const struct cp_tensor *t = cp_graph_tensor(g, idx);
    json_t *o = json_object(), *shape = json_array();
    bool ok = o && shape;
    for (int i = 0; ok && i < t->shape.rank; i++) {
        const struct cp_dim *dm = &t->shape.dims[i];
        ok = cp_json_push(shape, dm->value >= 0 ? cp_json_int(dm->value)
                                 : dm->sym      ? cp_json_str(dm->sym)
                                                : cp_json_int(-1));
    }
    ok = ok && cp_json_set_str(o, "name", t->name) &&
         cp_json_set_str(o, "dtype", cp_dtype_name(t->dtype));
    if (ok) {
        ok = cp_json_set(o, "shape", shape);
        shape = NULL;
    }
    json_decref(shape);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

/* A count kept as a double (FLOPs, bytes): a whole number, null when not
 * finite. */
static json_t *count_json(double v)
{
    return isfinite(v) && fabs(v) < 9e18 ? cp_json_int((int64_t)llround(v)) : json_null();
}

/* "graph": name, opset, inputs, outputs, nodes, ops, parameters,
 * parameter_bytes, flops, bytes_moved. NULL when out of memory. */
static json_t *graph_json(const struct cp_graph *g)
{
    struct cp_graph_stats s;
    cp_graph_stats(g, &s);
    struct hist_entry hist[CP_OP_COUNT];
    size_t nh = sorted_hist(&s, hist);
    json_t *o = json_object(), *ins = json_array(), *outs = json_array(), *ops = json_object();
    bool ok = o && ins && outs && ops;
    for (size_t i = 0; ok && i < cp_graph_n_inputs(g); i++)
        ok = cp_json_push(ins, tensor_json(g, cp_graph_input(g, i)));
    for (size_t i = 0; ok && i < cp_graph_n_outputs(g); i++)
        ok = cp_json_push(outs, tensor_json(g, cp_graph_output(g, i)));
    for (size_t i = 0; ok && i < nh; i++)
        ok = cp_json_set_int(ops, cp_op_name(hist[i].op), (int64_t)hist[i].count);
    ok = ok && cp_json_set_str(o, "name", cp_graph_name(g)) &&
         cp_json_set_int(o, "opset", cp_graph_opset(g));
    json_t **parts[] = {&ins, &outs};
    static const char *const keys[] = {"inputs", "outputs"};
    for (size_t i = 0; i < 2; i++) {
        if (ok)
            ok = cp_json_set(o, keys[i], *parts[i]);
        else
            json_decref(*parts[i]);
        *parts[i] = NULL;
    }
    ok = ok && cp_json_set_int(o, "nodes", (int64_t)s.n_nodes);
    if (ok) {
        ok = cp_json_set(o, "ops", ops);
        ops = NULL;
    }
    ok = ok && cp_json_set_int(o, "parameters", (int64_t)s.n_params) &&
         cp_json_set_int(o, "parameter_bytes", (int64_t)s.param_bytes) &&
         cp_json_set(o, "flops", count_json(s.flops)) &&
         cp_json_set(o, "bytes_moved", count_json(s.bytes));
    json_decref(ops);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

static void describe_graph(const struct cp_graph *g, struct cp_buf *b)
{
    struct cp_graph_stats s;
    cp_graph_stats(g, &s);
    struct hist_entry hist[CP_OP_COUNT];
    size_t nh = sorted_hist(&s, hist);
    char pbytes[32], flops[32];
    cp_format_bytes(s.param_bytes, pbytes);
    cp_format_si(s.flops, flops);
    cp_buf_printf(b, "graph:      %s (opset %lld)\n", cp_graph_name(g),
                  (long long)cp_graph_opset(g));
    cp_buf_puts(b, "inputs:\n");
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++)
        tensor_line(g, cp_graph_input(g, i), b);
    cp_buf_puts(b, "outputs:\n");
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++)
        tensor_line(g, cp_graph_output(g, i), b);
    cp_buf_printf(b, "ops:        %zu nodes, %zu op types\n", s.n_nodes, nh);
    for (size_t i = 0; i < nh; i++)
        cp_buf_printf(b, "  %-24s %5zu\n", cp_op_name(hist[i].op), hist[i].count);
    cp_buf_printf(b, "parameters: %zu (%s)\n", s.n_params, pbytes);
    cp_buf_printf(b, "FLOPs:      %sFLOP per inference (multiply-add = 2)\n", flops);
}

/* Print the text in b (0), or say it ran out of memory (3). */
static int print_text(struct cp_buf *b)
{
    if (cp_buf_status(b) != CP_OK) {
        cp_cli_error("info", "out of memory");
        return 3;
    }
    fputs(b->data ? b->data : "", stdout);
    return 0;
}

/* Print j as the --json output, then release it. */
static int print_json(json_t *j)
{
    int rc = cp_out_json(j, "info");
    json_decref(j);
    return rc;
}

/* {"file": path, "kind": kind}, the start of every description. */
static json_t *file_json(const char *path, const char *kind)
{
    json_t *j = json_object();
    if (j && cp_json_set_str(j, "file", path) && cp_json_set_str(j, "kind", kind))
        return j;
    json_decref(j);
    return NULL;
}

static int info_onnx(const char *path, bool json)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_graph *g = NULL;
    char hash[33];
    if (cp_onnx_import(path, NULL, 0, &g, hash, &d) != CP_OK || cp_graph_verify(g, &d) != CP_OK ||
        cp_graph_compact(g, &d) != CP_OK || cp_graph_infer(g, &d) != CP_OK) {
        cp_graph_free(g);
        cp_cli_error("info", d.msg);
        return cp_status_exit_code(d.status);
    }
    int rc;
    if (json) {
        json_t *j = file_json(path, "onnx");
        if (j && !(cp_json_set_str(j, "hash", hash) && cp_json_set(j, "graph", graph_json(g)))) {
            json_decref(j);
            j = NULL;
        }
        rc = print_json(j);
    } else {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_buf_printf(&b, "file:       %s (ONNX model, content hash %s)\n", path, hash);
        describe_graph(g, &b);
        rc = print_text(&b);
        cp_buf_release(&b);
    }
    cp_graph_free(g);
    return rc;
}

static void config_lines(const struct cp_convert_config *c, struct cp_buf *b)
{
    struct cp_buf cmd;
    cp_buf_init(&cmd);
    cp_convert_config_cmdline(c, &cmd);
    char id[17];
    cp_convert_config_id(c, id);
    cp_buf_printf(b, "config:     id %s\n", id);
    cp_buf_printf(b, "  precision_mode       %s\n", cp_precision_mode_name(c->precision_mode));
    cp_buf_printf(b, "  input_format         %s\n", cp_input_format_name(c->input_format));
    cp_buf_printf(b, "  layout_policy        %s\n", cp_layout_policy_name(c->layout_policy));
    cp_buf_printf(b, "  buffer_optimize      %s\n", cp_buffer_opt_name(c->buffer_optimize));
    cp_buf_printf(b, "  op_select_implmode   %s%s%s\n", cp_implmode_name(c->implmode),
                  c->optypelist_for_implmode[0] ? " for " : "", c->optypelist_for_implmode);
    cp_buf_printf(b, "  fusion_switch_file   %s\n",
                  c->fusion_switch_file[0] ? c->fusion_switch_file : "(none)");
    if (c->fusion_switch_file[0])
        cp_buf_printf(b, "  passes switched off  %s\n",
                      c->fusion_switches[0] ? c->fusion_switches : "(none)");
    if (c->keep_dtype[0]) {
        size_t n = 1;
        for (const char *p = c->keep_dtype; *p; p++)
            n += *p == '\n';
        cp_buf_printf(b, "  keep_dtype           %s (%zu entr%s:", c->keep_dtype_file, n,
                      n == 1 ? "y" : "ies");
        for (const char *p = c->keep_dtype; *p;) {
            const char *nl = strchr(p, '\n');
            int len = nl ? (int)(nl - p) : (int)strlen(p);
            cp_buf_printf(b, " %.*s", len, p);
            p += len + (nl ? 1 : 0);
        }
        cp_buf_puts(b, ")\n");
    }
    if (c->layout_regions[0]) {
        cp_buf_puts(b, "  layout_regions      ");
        for (const char *p = c->layout_regions; *p;) {
            const char *nl = strchr(p, '\n');
            int len = nl ? (int)(nl - p) : (int)strlen(p);
            cp_buf_printf(b, " %.*s", len, p);
            p += len + (nl ? 1 : 0);
        }
        cp_buf_puts(b, "\n");
    }
    cp_buf_puts(b, "  dynamic_batch_size   ");
    if (!c->n_dynamic_batch)
        cp_buf_puts(b, "(none)");
    for (size_t i = 0; i < c->n_dynamic_batch; i++)
        cp_buf_printf(b, "%s%lld", i ? "," : "", (long long)c->dynamic_batch[i]);
    cp_buf_printf(b, "\n  soc_version          %s\n", c->soc_version);
    cp_buf_printf(b, "  command              %s\n", cmd.data ? cmd.data : "");
    cp_buf_release(&cmd);
}

/* The pass record of a .om as text lines: what ran, what changed. */
static void pass_lines(const char *passes_json, struct cp_buf *b)
{
    json_error_t err;
    json_t *arr = passes_json && passes_json[0] ? json_loads(passes_json, 0, &err) : NULL;
    if (!json_is_array(arr)) {
        cp_buf_puts(b, "passes:     (not recorded)\n");
        json_decref(arr);
        return;
    }
    size_t ran = 0, changed = 0, i;
    json_t *p;
    json_array_foreach(arr, i, p)
    {
        bool fin = json_is_true(json_object_get(p, "final"));
        ran += json_is_true(json_object_get(p, "ran")) && !fin;
        changed += json_is_true(json_object_get(p, "changed")) && !fin;
    }
    cp_buf_printf(b, "passes:     %zu ran, %zu changed the graph\n", ran, changed);
    json_array_foreach(arr, i, p)
    {
        const char *name = json_string_value(json_object_get(p, "name"));
        const char *group = json_string_value(json_object_get(p, "group"));
        bool r = json_is_true(json_object_get(p, "ran"));
        bool c = json_is_true(json_object_get(p, "changed"));
        bool fin = json_is_true(json_object_get(p, "final"));
        json_int_t nb = json_integer_value(json_object_get(p, "nodes_before"));
        json_int_t na = json_integer_value(json_object_get(p, "nodes_after"));
        char label[96];
        snprintf(label, sizeof label, "%s%s", name ? name : "?", fin ? " (final)" : "");
        cp_buf_printf(b, "  %-40s %-12s %-8s", label, group ? group : "?",
                      !r  ? "off"
                      : c ? "changed"
                          : "-");
        if (r)
            cp_buf_printf(b, " %lld -> %lld nodes", (long long)nb, (long long)na);
        cp_buf_putc(b, '\n');
    }
    json_decref(arr);
}

static int info_ascend(const char *path, const uint8_t *data, size_t len, bool json)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_ascend_om_header h;
    if (cp_om_read_ascend_header(data, len, &h, &d) != CP_OK) {
        fprintf(stderr, "cannprof info: error: %s: %s\n", path, d.msg);
        return cp_status_exit_code(d.status);
    }
    struct cp_buf b;
    cp_buf_init(&b);
    if (json) {
        char magic[16], version[16];
        snprintf(magic, sizeof magic, "0x%08X", h.magic);
        snprintf(version, sizeof version, "0x%08X", h.version);
        json_t *j = file_json(path, "ascend_om"), *hd = json_object();
        bool ok = j && hd && cp_json_set_str(hd, "magic", magic) &&
                  cp_json_set_int(hd, "headsize", h.headsize) &&
                  cp_json_set_str(hd, "version", version) &&
                  cp_json_set_int(hd, "length", h.length) &&
                  cp_json_set_int(hd, "is_encrypt", h.is_encrypt) &&
                  cp_json_set_int(hd, "is_checksum", h.is_checksum) &&
                  cp_json_set_int(hd, "modeltype", h.modeltype) &&
                  cp_json_set_int(hd, "genmode", h.genmode) &&
                  cp_json_set_str(hd, "name", h.name) && cp_json_set_int(hd, "ops", h.ops) &&
                  cp_json_set_int(hd, "om_ir_version", h.om_ir_version) &&
                  cp_json_set_int(hd, "model_num", h.model_num) &&
                  cp_json_set_str(hd, "platform_version", h.platform_version) &&
                  cp_json_set_int(hd, "platform_type", h.platform_type) &&
                  cp_json_set_int(hd, "model_length", (int64_t)h.model_length) &&
                  cp_json_set_int(hd, "file_size", (int64_t)h.file_size);
        if (ok) {
            ok = cp_json_set(j, "header", hd);
            hd = NULL;
        }
        json_decref(hd);
        if (!ok) {
            json_decref(j);
            j = NULL;
        }
        cp_buf_release(&b);
        return print_json(j);
    } else {
        static const char *const types[] = {"IR", "standard", "OM Tiny", "flow"};
        char size[32];
        cp_format_bytes(h.file_size, size);
        cp_buf_printf(&b, "file:       %s (Ascend offline model, %s)\n", path, size);
        cp_buf_printf(&b, "magic:      0x%08X (\"IMOD\")\n", h.magic);
        cp_buf_printf(&b, "header:     %u bytes, version 0x%08X, length %u\n", h.headsize,
                      h.version, h.length);
        cp_buf_printf(&b, "name:       %s\n", h.name);
        cp_buf_printf(&b, "model type: %u (%s), genmode %u, model_num %u\n", h.modeltype,
                      h.modeltype < 4 ? types[h.modeltype] : "unknown", h.genmode, h.model_num);
        cp_buf_printf(&b, "platform:   %s (type %u)\n",
                      h.platform_version[0] ? h.platform_version : "(empty)", h.platform_type);
        cp_buf_printf(&b, "flags:      encrypted %u, checksum %u; ops %u, om_ir_version %u\n",
                      h.is_encrypt, h.is_checksum, h.ops, h.om_ir_version);
        cp_buf_puts(&b, "note:       this is an Ascend model; its graph runs on an NPU and is "
                        "not read by the cpu target\n");
    }
    int rc = print_text(&b);
    cp_buf_release(&b);
    return rc;
}

/* The --json description of a CPU .om; NULL when out of memory. */
static json_t *cpu_om_json(const char *path, size_t file_len, const struct cp_om_meta *meta,
                           const struct cp_graph *g)
{
    char id[17];
    cp_convert_config_id(&meta->config, id);
    struct cp_buf cfg, cmd;
    cp_buf_init(&cfg);
    cp_buf_init(&cmd);
    cp_convert_config_json(&meta->config, &cfg);
    cp_convert_config_cmdline(&meta->config, &cmd);
    json_t *j = file_json(path, "cpu_om");
    bool ok =
        j && cp_buf_status(&cfg) == CP_OK && cp_buf_status(&cmd) == CP_OK &&
        cp_json_set_int(j, "format_version", meta->format_version) &&
        cp_json_set_int(j, "bytes", (int64_t)file_len) &&
        cp_json_set_str(j, "tool_version", meta->tool_version ? meta->tool_version : "") &&
        cp_json_set_str(j, "source", meta->source_path ? meta->source_path : "") &&
        cp_json_set_str(j, "source_hash", meta->source_hash ? meta->source_hash : "") &&
        cp_json_set_str(j, "target", meta->target ? meta->target : "") &&
        cp_json_set_str(j, "config_id", id) &&
        cp_json_set(j, "config", cp_json_embed(cfg.data ? cfg.data : "{}")) &&
        cp_json_set_str(j, "command", cmd.data ? cmd.data : "") &&
        cp_json_set(j, "passes",
                    meta->passes_json && meta->passes_json[0] ? cp_json_embed(meta->passes_json)
                                                              : json_null()) &&
        cp_json_set(j, "graph", graph_json(g));
    cp_buf_release(&cfg);
    cp_buf_release(&cmd);
    if (ok)
        return j;
    json_decref(j);
    return NULL;
}

static int info_om(const char *path, bool json)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_mmap m;
    if (cp_mmap_open(path, &m, &d) != CP_OK) {
        cp_cli_error("info", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_om_sniff(m.data, m.len) == CP_OM_KIND_ASCEND) {
        int rc = info_ascend(path, m.data, m.len, json);
        cp_mmap_close(&m);
        return rc;
    }
    size_t file_len = m.len;
    cp_mmap_close(&m);
    struct cp_graph *g = NULL;
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    if (cp_om_read(path, &g, &meta, &d) != CP_OK) {
        cp_cli_error("info", d.msg);
        return cp_status_exit_code(d.status);
    }
    int rc;
    if (json) {
        rc = print_json(cpu_om_json(path, file_len, &meta, g));
    } else {
        struct cp_buf b;
        cp_buf_init(&b);
        char size[32];
        cp_format_bytes(file_len, size);
        cp_buf_printf(&b, "file:       %s (CPU offline model, format %u, %s)\n", path,
                      meta.format_version, size);
        cp_buf_printf(&b, "source:     %s (content hash %s)\n",
                      meta.source_path ? meta.source_path : "?",
                      meta.source_hash ? meta.source_hash : "?");
        cp_buf_printf(&b, "built by:   cannprof %s for %s\n",
                      meta.tool_version ? meta.tool_version : "?", meta.target ? meta.target : "?");
        describe_graph(g, &b);
        config_lines(&meta.config, &b);
        pass_lines(meta.passes_json, &b);
        rc = print_text(&b);
        cp_buf_release(&b);
    }
    cp_om_meta_release(&meta);
    cp_graph_free(g);
    return rc;
}

int cp_cmd_info(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("info", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (args.n_positional != 1) {
        cp_cli_error("info", args.n_positional ? "give exactly one FILE"
                                               : "missing FILE (an .onnx or .om)");
        return 2;
    }
    const char *path = args.positional[0];
    bool json = cp_args_has(&args, CP_SO_JSON);
    if (cp_path_has_suffix(path, ".onnx"))
        return info_onnx(path, json);
    /* Anything else is judged by its content, not its name. */
    struct cp_mmap m;
    if (cp_mmap_open(path, &m, &d) != CP_OK) {
        cp_cli_error("info", d.msg);
        return cp_status_exit_code(d.status);
    }
    enum cp_om_kind kind = cp_om_sniff(m.data, m.len);
    cp_mmap_close(&m);
    if (kind == CP_OM_KIND_UNKNOWN && !cp_path_has_suffix(path, ".om")) {
        fprintf(stderr,
                "cannprof info: error: %s: not an .om (no CPOM or IMOD magic) and not named "
                ".onnx; cannot tell what it is\n",
                path);
        return 2;
    }
    return info_om(path, json);
}
