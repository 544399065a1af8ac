/* cp_convert: import, verify, infer, run the conversion passes (the pass
 * manager, atc_bridge/passes/manager.c), check the dynamic-batch profiles,
 * then write the .om with the effective config and the pass record. */
#include "atc_bridge/convert.h"
#include "core/host.h"
#include "om/om.h"
#include "atc_bridge/passes/batch_check.h"
#include "atc_bridge/passes/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/utsname.h>

/* "cpu x86_64 AMD EPYC (avx2 avx512f avx512_bf16)": what the .om was built
 * for. Only the ISA features that change kernel choice are listed, so the
 * text is stable across machines of one kind. */
static void target_description(char *out, size_t n)
{
    struct cp_host *h = malloc(sizeof *h);
    if (!h) {
        snprintf(out, n, "cpu");
        return;
    }
    cp_host_detect(h);
    snprintf(out, n, "cpu %.32s %.160s (%.300s)", h->arch, h->cpu_model, h->isa);
    free(h);
}

static enum cp_status apply_input_shape_check(const struct cp_convert_config *c,
                                              const struct cp_graph *g, struct cp_diag *d)
{
    /* With dynamic batch profiles, every -1 batch dimension must be a graph
     * input's first dimension. */
    for (size_t i = 0; i < c->n_input_shapes; i++) {
        int32_t t = cp_graph_find_tensor(g, c->input_shapes[i].name);
        if (t < 0)
            return cp_diag_set(d, CP_ERR_INVALID, "--input_shape: the model has no input '%s'",
                               c->input_shapes[i].name);
    }
    return CP_OK;
}

/* Whether g or one of its subgraphs holds a node named `name`, or (type
 * non-NULL) a node of ONNX op type `type`. */
static bool graph_has_node(const struct cp_graph *g, const char *name, const char *type)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (type ? n->op_type && strcmp(n->op_type, type) == 0 : strcmp(n->name, name) == 0)
            return true;
        for (size_t a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].type == CP_ATTR_GRAPH && n->attrs[a].graph &&
                graph_has_node(n->attrs[a].graph, name, type))
                return true;
    }
    return false;
}

/* A node list (--keep_dtype, --int8_nodes) against the imported model: a
 * node name the model does not have is a mistake (ATC warns that such an
 * entry silently does nothing); an op type it lacks only does nothing. */
static enum cp_status check_node_list(const char *flag, const char *file, const char *canon,
                                      const struct cp_convert_config *c, const struct cp_graph *g,
                                      const struct cp_log *log, struct cp_diag *d)
{
    for (const char *p = canon; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char entry[1024];
        snprintf(entry, sizeof entry, "%.*s", (int)len, p);
        bool type = strncmp(entry, "OpType::", 8) == 0;
        if (!graph_has_node(g, entry, type ? entry + 8 : NULL)) {
            if (!type)
                return cp_diag_set(d, CP_ERR_USAGE,
                                   "--%s=%s: %s has no node named '%s' (list the ONNX "
                                   "node names of the source model, or OpType::TYPE)",
                                   flag, file, c->model, entry);
            cp_log_msg(log, CP_LOG_WARNING, "--%s=%s: %s has no node of type %s", flag, file,
                       c->model, entry + 8);
        }
        p = nl ? nl + 1 : p + len;
    }
    return CP_OK;
}

static enum cp_status check_keep_dtype(const struct cp_convert_config *c, const struct cp_graph *g,
                                       const struct cp_log *log, struct cp_diag *d)
{
    if (!c->keep_dtype[0])
        return CP_OK;
    if (c->precision_mode != CP_PREC_ALLOW_FP32_TO_BF16 &&
        c->precision_mode != CP_PREC_ALLOW_MIX_PRECISION_BF16)
        cp_log_msg(log, CP_LOG_WARNING,
                   "--keep_dtype=%s: --precision_mode=%s computes every node in fp32 already; "
                   "the list changes nothing",
                   c->keep_dtype_file, cp_precision_mode_name(c->precision_mode));
    return check_node_list("keep_dtype", c->keep_dtype_file, c->keep_dtype, c, g, log, d);
}

/* --modify_mixlist / --customize_dtypes against the model: a node name it
 * lacks is refused; an op type with no bf16 kernel (everything but Conv,
 * MatMul, Gemm and attention computes in fp32 on this target) changes
 * nothing, which the conversion says. */
static enum cp_status check_overrides(const struct cp_convert_config *c, const struct cp_graph *g,
                                      const struct cp_log *log, struct cp_diag *d)
{
    static const char *const lowered[] = {"Conv",      "MatMul",      "Gemm",
                                          "FusedConv", "FusedMatMul", "FusedAttention"};
    for (const char *p = c->precision_overrides; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char entry[1024];
        snprintf(entry, sizeof entry, "%.*s", (int)len, p);
        char *eq = strrchr(entry, '=');
        bool none = eq && strcmp(eq + 1, "none") == 0;
        if (eq)
            *eq = '\0';
        bool type = strncmp(entry, "OpType::", 8) == 0;
        const char *name = type ? entry + 8 : entry;
        if (none) {
            cp_log_msg(log, CP_LOG_WARNING,
                       "--modify_mixlist: the change to %s (a gray-list entry, or a removal from "
                       "the black list) changes nothing on the cpu target: only Conv, MatMul, Gemm "
                       "and attention have bf16 kernels",
                       name);
            p = nl ? nl + 1 : p + len;
            continue;
        }
        bool known = false;
        for (size_t k = 0; type && k < sizeof lowered / sizeof *lowered; k++)
            known = known || strcmp(lowered[k], name) == 0;
        if (!type && !graph_has_node(g, entry, NULL))
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--customize_dtypes=%s: %s has no node named '%s' (the ONNX node "
                               "names of the source model, or OpType::TYPE)",
                               c->customize_dtypes_file, c->model, entry);
        if (type && !known)
            cp_log_msg(log, CP_LOG_WARNING,
                       "%s: op type %s computes in fp32 on the cpu target whatever the list says "
                       "(bf16 kernels: Conv, MatMul, Gemm, attention)",
                       c->customize_dtypes_file[0] ? "--customize_dtypes" : "--modify_mixlist",
                       name);
        p = nl ? nl + 1 : p + len;
    }
    return CP_OK;
}

/* --int8_nodes: the names exist, and there are ranges to quantize with. */
static enum cp_status check_int8_nodes(const struct cp_convert_config *c, const struct cp_graph *g,
                                       const struct cp_log *log, struct cp_diag *d)
{
    if (!c->int8_nodes[0])
        return CP_OK;
    if (!c->quant_ranges[0])
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--int8_nodes=%s needs activation ranges: give --quant_ranges=FILE, or "
                           "convert with `cannprof convert`, which calibrates (--calibration_data "
                           "DIR, else seeded random inputs)",
                           c->int8_nodes_file);
    return check_node_list("int8_nodes", c->int8_nodes_file, c->int8_nodes, c, g, log, d);
}

/* --layout_regions against the imported model: every node named exists,
 * and the policy forms regions. */
static enum cp_status check_layout_regions(const struct cp_convert_config *c,
                                           const struct cp_graph *g, struct cp_diag *d)
{
    if (!c->layout_regions[0])
        return CP_OK;
    if (c->layout_policy == CP_LAYOUT_POLICY_NCHW)
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--layout_regions needs --layout_policy auto, blocked or nhwc: nchw "
                           "forms no conv regions");
    for (const char *p = c->layout_regions; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char entry[1024];
        snprintf(entry, sizeof entry, "%.*s", (int)len, p);
        char *colon = strrchr(entry, ':');
        if (colon)
            *colon = '\0';
        if (!graph_has_node(g, entry, NULL))
            return cp_diag_set(d, CP_ERR_USAGE, "--layout_regions: %s has no node named '%s'",
                               c->model, entry);
        p = nl ? nl + 1 : p + len;
    }
    return CP_OK;
}

/* --op_kernels against the imported model: every node named exists (the
 * kernel names are the runtime's, checked when a plan is made). */
static enum cp_status check_op_kernels(const struct cp_convert_config *c, const struct cp_graph *g,
                                       struct cp_diag *d)
{
    for (const char *p = c->op_kernels; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char entry[1024];
        snprintf(entry, sizeof entry, "%.*s", (int)len, p);
        char *eq = strrchr(entry, '=');
        if (eq)
            *eq = '\0';
        if (!graph_has_node(g, entry, NULL))
            return cp_diag_set(d, CP_ERR_USAGE, "--op_kernels: %s has no node named '%s'", c->model,
                               entry);
        p = nl ? nl + 1 : p + len;
    }
    return CP_OK;
}

/* Passes that ran, or that changed the graph; the closing sweep is the
 * manager's, not a pass of its own, and is not counted. */
static size_t count_passes(const struct cp_pass_report *r, bool changed)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++)
        if (!r->records[i].final)
            n += changed ? r->records[i].changed : r->records[i].ran;
    return n;
}

enum cp_status cp_convert(const struct cp_convert_config *config, struct cp_convert_result *res,
                          struct cp_diag *d)
{
    uint64_t t0 = cp_clock_ns();
    struct cp_graph *g = NULL;
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    struct cp_pass_report report;
    memset(&report, 0, sizeof report);
    struct cp_buf passes_json;
    cp_buf_init(&passes_json);
    char hash[33] = "";
    char target[512];
    if (res)
        memset(res, 0, sizeof *res);

    enum cp_status st = cp_convert_config_validate(config, d);
    if (st != CP_OK)
        return st;
    /* The config as converted: the switches are what the file says now. */
    struct cp_convert_config *cfg = malloc(sizeof *cfg);
    if (!cfg)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory starting the conversion");
    *cfg = *config;
    /* Warnings show unless --log asks for errors only; ATC's default "null"
     * would hide a switch file's mistakes. */
    struct cp_log log = {cfg->log == CP_LOG_NULL ? CP_LOG_WARNING : cfg->log, NULL};
    if ((st = cp_convert_config_load_fusion_switches(cfg, &log, d)) != CP_OK ||
        (st = cp_convert_config_load_keep_dtype(cfg, d)) != CP_OK ||
        (st = cp_convert_config_load_int8_nodes(cfg, d)) != CP_OK ||
        (st = cp_convert_config_load_precision_overrides(cfg, d)) != CP_OK ||
        (st = cp_convert_config_load_quant_ranges(cfg, d)) != CP_OK)
        goto out_free_cfg;
    st = cp_onnx_import(cfg->model, cfg->input_shapes, cfg->n_input_shapes, &g, hash, d);
    if (st != CP_OK)
        goto out_free_cfg;
    if ((st = check_keep_dtype(cfg, g, &log, d)) != CP_OK ||
        (st = check_int8_nodes(cfg, g, &log, d)) != CP_OK ||
        (st = check_overrides(cfg, g, &log, d)) != CP_OK ||
        (st = check_layout_regions(cfg, g, d)) != CP_OK ||
        (st = check_op_kernels(cfg, g, d)) != CP_OK)
        goto out_free_graph;
    size_t nodes_in = cp_graph_n_live_nodes(g);
    if ((st = apply_input_shape_check(cfg, g, d)) != CP_OK)
        goto out_free_graph;
    if ((st = cp_graph_verify(g, d)) != CP_OK)
        goto out_free_graph;
    if ((st = cp_graph_compact(g, d)) != CP_OK)
        goto out_free_graph;
    if ((st = cp_graph_infer(g, d)) != CP_OK)
        goto out_free_graph;
    struct cp_pass_target caps;
    cp_pass_target_detect(&caps);
    if ((st = cp_passes_run(g, cfg, &caps, &log, &report, d)) != CP_OK)
        goto out_free_graph;
    if ((st = cp_batch_finish(g, cfg, &log, d)) != CP_OK)
        goto out_free_graph;
    cp_pass_report_json(&report, &passes_json);
    if ((st = cp_buf_status(&passes_json)) != CP_OK) {
        cp_diag_set(d, st, "out of memory recording the passes");
        goto out_free_graph;
    }

    target_description(target, sizeof target);
    meta.format_version = CP_OM_FORMAT_VERSION;
    meta.tool_version = (char *)CP_VERSION_STRING;
    /* The absolute path, so a later `tune` of this .om finds its source
     * from any folder. */
    char *abs_model = realpath(cfg->model, NULL);
    meta.source_path = abs_model ? abs_model : (char *)cfg->model;
    meta.source_hash = hash;
    meta.target = target;
    meta.config = *cfg;
    meta.passes_json = passes_json.data;

    char om_path[1100];
    snprintf(om_path, sizeof om_path, "%s.om", cfg->output);
    st = cp_om_write(om_path, g, &meta, d);
    free(abs_model);
    if (st != CP_OK)
        goto out_free_graph;
    if (res) {
        snprintf(res->om_path, sizeof res->om_path, "%s", om_path);
        res->nodes_in = nodes_in;
        res->nodes_out = cp_graph_n_live_nodes(g);
        res->passes_ran = count_passes(&report, false);
        res->passes_changed = count_passes(&report, true);
        struct cp_mmap m;
        if (cp_mmap_open(om_path, &m, NULL) == CP_OK) {
            res->om_bytes = m.len;
            cp_mmap_close(&m);
        }
        res->seconds = (double)(cp_clock_ns() - t0) / 1e9;
    }
out_free_graph:
    cp_graph_free(g);
out_free_cfg:
    cp_pass_report_release(&report);
    cp_buf_release(&passes_json);
    free(cfg);
    return st;
}
