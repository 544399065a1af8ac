/* cp_convert: import, verify, infer, then write the .om. The passes that act
 * on the config's knobs plug in between inference and writing. */
#include "atc_bridge/convert.h"
#include "atc_bridge/om.h"

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
    struct utsname u;
    const char *arch = uname(&u) == 0 ? u.machine : "unknown";
    char model[128] = "unknown";
    char feats[256] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[8192];
        bool got_model = false, got_flags = false;
        while (fgets(line, sizeof line, f) && !(got_model && got_flags)) {
            char *colon = strchr(line, ':');
            if (!colon)
                continue;
            char *val = colon + 1;
            while (*val == ' ')
                val++;
            val[strcspn(val, "\n")] = 0;
            if (!got_model && strncmp(line, "model name", 10) == 0) {
                snprintf(model, sizeof model, "%s", val);
                got_model = true;
            } else if (!got_flags && strncmp(line, "flags", 5) == 0) {
                static const char *const wanted[] = {"avx2",        "fma",         "avx512f",
                                                     "avx512bw",    "avx512_vnni", "avx512_bf16",
                                                     "avx512_fp16", "amx_bf16"};
                size_t pos = 0;
                for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++) {
                    char pat[32];
                    snprintf(pat, sizeof pat, " %s ", wanted[i]);
                    char padded[8200];
                    snprintf(padded, sizeof padded, " %s ", val);
                    if (strstr(padded, pat) && pos < sizeof feats) {
                        int w = snprintf(feats + pos, sizeof feats - pos, "%s%s", pos ? " " : "",
                                         wanted[i]);
                        if (w > 0)
                            pos += (size_t)w;
                    }
                }
                got_flags = true;
            }
        }
        fclose(f);
    }
    snprintf(out, n, "cpu %s %s (%s)", arch, model, feats);
}

/* The fusion switch file is only recorded in this version, but a path that
 * cannot be read is refused now rather than when the passes need it. */
static enum cp_status check_fusion_switch_file(const char *path, struct cp_diag *d)
{
    if (!path[0])
        return CP_OK;
    uint8_t *data;
    size_t len;
    enum cp_status st = cp_file_read(path, &data, &len, d);
    if (st != CP_OK)
        return st;
    free(data);
    return CP_OK;
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

enum cp_status cp_convert(const struct cp_convert_config *config, struct cp_convert_result *res,
                          struct cp_diag *d)
{
    uint64_t t0 = cp_clock_ns();
    struct cp_graph *g = NULL;
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    char hash[33] = "";
    char target[512];
    if (res)
        memset(res, 0, sizeof *res);

    enum cp_status st = cp_convert_config_validate(config, d);
    if (st != CP_OK)
        return st;
    st = check_fusion_switch_file(config->fusion_switch_file, d);
    if (st != CP_OK)
        return st;
    st = cp_onnx_import(config->model, config->input_shapes, config->n_input_shapes, &g, hash, d);
    if (st != CP_OK)
        return st;
    size_t nodes_in = cp_graph_n_live_nodes(g);
    if ((st = apply_input_shape_check(config, g, d)) != CP_OK)
        goto out_free_graph;
    if ((st = cp_graph_verify(g, d)) != CP_OK)
        goto out_free_graph;
    if ((st = cp_graph_compact(g, d)) != CP_OK)
        goto out_free_graph;
    if ((st = cp_graph_infer(g, d)) != CP_OK)
        goto out_free_graph;

    target_description(target, sizeof target);
    meta.format_version = CP_OM_FORMAT_VERSION;
    meta.tool_version = (char *)CP_VERSION_STRING;
    /* The absolute path, so a later `tune` of this .om finds its source
     * from any folder. */
    char *abs_model = realpath(config->model, NULL);
    meta.source_path = abs_model ? abs_model : (char *)config->model;
    meta.source_hash = hash;
    meta.target = target;
    meta.config = *config;

    char om_path[1100];
    snprintf(om_path, sizeof om_path, "%s.om", config->output);
    st = cp_om_write(om_path, g, &meta, d);
    free(abs_model);
    if (st != CP_OK)
        goto out_free_graph;
    if (res) {
        snprintf(res->om_path, sizeof res->om_path, "%s", om_path);
        res->nodes_in = nodes_in;
        res->nodes_out = cp_graph_n_live_nodes(g);
        struct cp_mmap m;
        if (cp_mmap_open(om_path, &m, NULL) == CP_OK) {
            res->om_bytes = m.len;
            cp_mmap_close(&m);
        }
        res->seconds = (double)(cp_clock_ns() - t0) / 1e9;
    }
out_free_graph:
    cp_graph_free(g);
    return st;
}
