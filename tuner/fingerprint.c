/* A model's fingerprint from its file (tuner/tuner.h): what `tune` records
 * a session under and what `kb query` and `kb card --model` look up. */
#include "om/om.h"
#include "onnx/onnx.h"
#include "tuner/tuner.h"

#include <string.h>

/* "dir/name.onnx" -> "name". */
static void stem(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    snprintf(out, cap, "%s", slash ? slash + 1 : path);
    char *dot = strrchr(out, '.');
    if (dot && dot != out)
        *dot = '\0';
}

enum cp_status cp_tune_fingerprint_onnx(const char *path, const char *name,
                                        struct cp_kb_fingerprint *fp, char hash[33],
                                        struct cp_diag *d)
{
    char own_hash[33] = "", own_name[128];
    if (!hash)
        hash = own_hash;
    if (!name) {
        stem(path, own_name, sizeof own_name);
        name = own_name;
    }
    struct cp_graph *g = NULL;
    enum cp_status st = cp_onnx_import(path, NULL, 0, &g, hash, d);
    if (st == CP_OK)
        st = cp_graph_verify(g, d);
    if (st == CP_OK)
        st = cp_graph_compact(g, d);
    if (st == CP_OK)
        st = cp_graph_infer(g, d);
    if (st == CP_OK)
        st = cp_kb_fingerprint_graph(g, hash, name, fp, d);
    cp_graph_free(g);
    return st;
}

enum cp_status cp_tune_fingerprint_model(struct cp_kb *kb, const char *path,
                                         struct cp_kb_fingerprint *fp, bool *approximate,
                                         struct cp_diag *d)
{
    *approximate = false;
    if (!cp_path_has_suffix(path, ".om"))
        return cp_tune_fingerprint_onnx(path, NULL, fp, NULL, d);
    struct cp_graph *g = NULL;
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    enum cp_status st = cp_om_read(path, &g, &meta, d);
    if (st != CP_OK)
        return st;
    bool named = meta.source_path && *meta.source_path;
    bool found = false;
    if (named && cp_path_exists(meta.source_path))
        st = cp_tune_fingerprint_onnx(meta.source_path, NULL, fp, NULL, d);
    else if ((st = cp_kb_model_find_source(kb, meta.source_hash, fp, &found, d)) == CP_OK &&
             !found) {
        char name[128];
        stem(named ? meta.source_path : path, name, sizeof name);
        *approximate = true;
        st = cp_kb_fingerprint_graph(g, meta.source_hash, name, fp, d);
    }
    cp_graph_free(g);
    cp_om_meta_release(&meta);
    return st;
}
