/* cannprof info: describe an .onnx or .om file. */
#include "atc_bridge/convert.h"
#include "om/om.h"
#include "cli/commands.h"
#include "cli/options.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_HELP = 1, OPT_JSON };

static const struct cp_opt options[] = {
    {"help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"},
    {"json", 0, CP_OPT_FLAG, OPT_JSON, NULL, "print the description as JSON"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void help(void)
{
    printf("usage: cannprof info FILE [--json]\n\n"
           "Describe an ONNX model (.onnx) or an offline model (.om): inputs and outputs\n"
           "with shapes and dtypes, op histogram, parameter count and bytes, FLOP estimate,\n"
           "and for a CPU .om the recorded conversion config. An Ascend .om is recognised\n"
           "and its header fields are shown.\n\noptions:\n");
    cp_opts_print_help(stdout, options, N_OPTIONS);
}

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

static void tensor_line(const struct cp_graph *g, int32_t idx, bool json, struct cp_buf *b,
                        bool first)
{
    const struct cp_tensor *t = cp_graph_tensor(g, idx);
    char shape[160];
    cp_shape_format(&t->shape, shape, sizeof shape);
    if (!json) {
        cp_buf_printf(b, "  %-28s %-5s %s\n", t->name, cp_dtype_name(t->dtype), shape);
        return;
    }
    cp_buf_puts(b, first ? "{\"name\":" : ",{\"name\":");
    cp_buf_json_str(b, t->name);
    cp_buf_printf(b, ",\"dtype\":\"%s\",\"shape\":[", cp_dtype_name(t->dtype));
    for (int i = 0; i < t->shape.rank; i++) {
        if (i)
            cp_buf_putc(b, ',');
        if (t->shape.dims[i].value >= 0)
            cp_buf_printf(b, "%lld", (long long)t->shape.dims[i].value);
        else if (t->shape.dims[i].sym)
            cp_buf_json_str(b, t->shape.dims[i].sym);
        else
            cp_buf_puts(b, "-1");
    }
    cp_buf_puts(b, "]}");
}

static void describe_graph(const struct cp_graph *g, bool json, struct cp_buf *b)
{
    struct cp_graph_stats s;
    cp_graph_stats(g, &s);
    struct hist_entry hist[CP_OP_COUNT];
    size_t nh = sorted_hist(&s, hist);
    char pbytes[32], flops[32];
    cp_format_bytes(s.param_bytes, pbytes);
    cp_format_si(s.flops, flops);
    if (json) {
        cp_buf_puts(b, ",\"graph\":{\"name\":");
        cp_buf_json_str(b, cp_graph_name(g));
        cp_buf_printf(b, ",\"opset\":%lld,\"inputs\":[", (long long)cp_graph_opset(g));
        for (size_t i = 0; i < cp_graph_n_inputs(g); i++)
            tensor_line(g, cp_graph_input(g, i), true, b, i == 0);
        cp_buf_puts(b, "],\"outputs\":[");
        for (size_t i = 0; i < cp_graph_n_outputs(g); i++)
            tensor_line(g, cp_graph_output(g, i), true, b, i == 0);
        cp_buf_printf(b, "],\"nodes\":%zu,\"ops\":{", s.n_nodes);
        for (size_t i = 0; i < nh; i++)
            cp_buf_printf(b, "%s\"%s\":%zu", i ? "," : "", cp_op_name(hist[i].op), hist[i].count);
        cp_buf_printf(b,
                      "},\"parameters\":%zu,\"parameter_bytes\":%zu,\"flops\":%.0f,"
                      "\"bytes_moved\":%.0f}",
                      s.n_params, s.param_bytes, s.flops, s.bytes);
        return;
    }
    cp_buf_printf(b, "graph:      %s (opset %lld)\n", cp_graph_name(g),
                  (long long)cp_graph_opset(g));
    cp_buf_puts(b, "inputs:\n");
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++)
        tensor_line(g, cp_graph_input(g, i), false, b, false);
    cp_buf_puts(b, "outputs:\n");
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++)
        tensor_line(g, cp_graph_output(g, i), false, b, false);
    cp_buf_printf(b, "ops:        %zu nodes, %zu op types\n", s.n_nodes, nh);
    for (size_t i = 0; i < nh; i++)
        cp_buf_printf(b, "  %-24s %5zu\n", cp_op_name(hist[i].op), hist[i].count);
    cp_buf_printf(b, "parameters: %zu (%s)\n", s.n_params, pbytes);
    cp_buf_printf(b, "FLOPs:      %sFLOP per inference (multiply-add = 2)\n", flops);
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
    struct cp_buf b;
    cp_buf_init(&b);
    if (json) {
        cp_buf_puts(&b, "{\"file\":");
        cp_buf_json_str(&b, path);
        cp_buf_printf(&b, ",\"kind\":\"onnx\",\"hash\":\"%s\"", hash);
        describe_graph(g, true, &b);
        cp_buf_puts(&b, "}\n");
    } else {
        cp_buf_printf(&b, "file:       %s (ONNX model, content hash %s)\n", path, hash);
        describe_graph(g, false, &b);
    }
    fputs(b.data ? b.data : "", stdout);
    cp_buf_release(&b);
    cp_graph_free(g);
    return 0;
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
    cp_buf_printf(b, "  op_select_implmode   %s\n", cp_implmode_name(c->implmode));
    cp_buf_printf(b, "  fusion_switch_file   %s\n",
                  c->fusion_switch_file[0] ? c->fusion_switch_file : "(none)");
    if (c->fusion_switch_file[0])
        cp_buf_printf(b, "  passes switched off  %s\n",
                      c->fusion_switches[0] ? c->fusion_switches : "(none)");
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
        cp_buf_puts(&b, "{\"file\":");
        cp_buf_json_str(&b, path);
        cp_buf_printf(&b,
                      ",\"kind\":\"ascend_om\",\"header\":{\"magic\":\"0x%08X\","
                      "\"headsize\":%u,\"version\":\"0x%08X\",\"length\":%u,"
                      "\"is_encrypt\":%u,\"is_checksum\":%u,\"modeltype\":%u,"
                      "\"genmode\":%u,\"name\":",
                      h.magic, h.headsize, h.version, h.length, h.is_encrypt, h.is_checksum,
                      h.modeltype, h.genmode);
        cp_buf_json_str(&b, h.name);
        cp_buf_printf(&b,
                      ",\"ops\":%u,\"om_ir_version\":%u,\"model_num\":%u,"
                      "\"platform_version\":",
                      h.ops, h.om_ir_version, h.model_num);
        cp_buf_json_str(&b, h.platform_version);
        cp_buf_printf(&b, ",\"platform_type\":%u,\"model_length\":%llu,\"file_size\":%zu}}\n",
                      h.platform_type, (unsigned long long)h.model_length, h.file_size);
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
    fputs(b.data ? b.data : "", stdout);
    cp_buf_release(&b);
    return 0;
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
    struct cp_buf b;
    cp_buf_init(&b);
    if (json) {
        cp_buf_puts(&b, "{\"file\":");
        cp_buf_json_str(&b, path);
        cp_buf_printf(&b,
                      ",\"kind\":\"cpu_om\",\"format_version\":%u,\"bytes\":%zu,"
                      "\"tool_version\":",
                      meta.format_version, file_len);
        cp_buf_json_str(&b, meta.tool_version ? meta.tool_version : "");
        cp_buf_puts(&b, ",\"source\":");
        cp_buf_json_str(&b, meta.source_path ? meta.source_path : "");
        cp_buf_puts(&b, ",\"source_hash\":");
        cp_buf_json_str(&b, meta.source_hash ? meta.source_hash : "");
        cp_buf_puts(&b, ",\"target\":");
        cp_buf_json_str(&b, meta.target ? meta.target : "");
        char id[17];
        cp_convert_config_id(&meta.config, id);
        cp_buf_printf(&b, ",\"config_id\":\"%s\",\"config\":", id);
        cp_convert_config_json(&meta.config, &b);
        struct cp_buf cmd;
        cp_buf_init(&cmd);
        cp_convert_config_cmdline(&meta.config, &cmd);
        cp_buf_puts(&b, ",\"command\":");
        cp_buf_json_str(&b, cmd.data ? cmd.data : "");
        cp_buf_release(&cmd);
        cp_buf_puts(&b, ",\"passes\":");
        cp_buf_puts(&b, meta.passes_json && meta.passes_json[0] ? meta.passes_json : "null");
        describe_graph(g, true, &b);
        cp_buf_puts(&b, "}\n");
    } else {
        char size[32];
        cp_format_bytes(file_len, size);
        cp_buf_printf(&b, "file:       %s (CPU offline model, format %u, %s)\n", path,
                      meta.format_version, size);
        cp_buf_printf(&b, "source:     %s (content hash %s)\n",
                      meta.source_path ? meta.source_path : "?",
                      meta.source_hash ? meta.source_hash : "?");
        cp_buf_printf(&b, "built by:   cannprof %s for %s\n",
                      meta.tool_version ? meta.tool_version : "?", meta.target ? meta.target : "?");
        describe_graph(g, false, &b);
        config_lines(&meta.config, &b);
        pass_lines(meta.passes_json, &b);
    }
    fputs(b.data ? b.data : "", stdout);
    cp_buf_release(&b);
    cp_om_meta_release(&meta);
    cp_graph_free(g);
    return 0;
}

int cp_cmd_info(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse("info", options, N_OPTIONS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("info", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, OPT_HELP)) {
        help();
        return 0;
    }
    if (args.n_positional != 1) {
        cp_cli_error("info", args.n_positional ? "give exactly one FILE"
                                               : "missing FILE (an .onnx or .om)");
        return 2;
    }
    const char *path = args.positional[0];
    bool json = cp_args_has(&args, OPT_JSON);
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
