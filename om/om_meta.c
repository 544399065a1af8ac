/* The metadata section: a compact JSON object with keys in a fixed order,
 *
 *   {"format_version":1,"tool_version":"0.1.0","target":"cpu x86_64 ...",
 *    "source":{"path":"/models/m.onnx","hash":"<32 hex>"},"config":{...},
 *    "passes":[{"name":"ConstantFoldingPass",...},...]}
 *
 * ("passes" only when the conversion recorded them).
 *
 * Built with jansson (which checks that every string is valid UTF-8 and
 * keeps insertion order), so equal metadata always gives equal bytes. */
#include "core/json.h"
#include "om/om_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cp_om_meta_release(struct cp_om_meta *m)
{
    if (!m)
        return;
    free(m->tool_version);
    free(m->source_path);
    free(m->source_hash);
    free(m->target);
    free(m->passes_json);
    free(m->meta_json);
    memset(m, 0, sizeof *m);
}

/* "" or 32 lowercase hex digits. */
static bool hash_ok(const char *s)
{
    if (!s[0])
        return true;
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return false;
    return n == 32;
}

static enum cp_status set_str(json_t *o, const char *key, const char *v, const char *what,
                              struct cp_diag *d)
{
    json_t *s = json_string(v ? v : "");
    if (!s)
        return cp_diag_set(d, CP_ERR_INVALID, "%s is not valid UTF-8 text", what);
    if (json_object_set_new(o, key, s) != 0)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory building the .om metadata");
    return CP_OK;
}

enum cp_status om_meta_build(const struct cp_om_meta *meta, struct cp_buf *out, struct cp_diag *d)
{
    const char *hash = meta->source_hash ? meta->source_hash : "";
    if (!hash_ok(hash))
        return cp_diag_set(d, CP_ERR_INVALID, "source hash '%s' is not 32 lowercase hex digits",
                           hash);
    struct cp_buf cfg;
    cp_buf_init(&cfg);
    cp_convert_config_json(&meta->config, &cfg);
    if (cp_buf_status(&cfg) != CP_OK || !cfg.data) {
        cp_buf_release(&cfg);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "the conversion config cannot be written as JSON (out of memory, "
                           "or a path that is not valid UTF-8)");
    }
    json_error_t err;
    json_t *config = json_loads(cfg.data, 0, &err);
    cp_buf_release(&cfg);
    if (!json_is_object(config)) {
        json_decref(config);
        return cp_diag_set(d, CP_ERR_INTERNAL, "the conversion config's JSON is not an object");
    }
    /* Where the file is written is not part of what it is: the same model
     * and config give the same bytes at any --output. A reader learns the
     * location from where it found the file (cp_om_meta_locate). */
    json_object_del(config, "output");
    enum cp_status st = CP_OK;
    json_t *root = json_object();
    json_t *source = json_object();
    if (!root || !source) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory building the .om metadata");
        goto out;
    }
    if (json_object_set_new(root, "format_version", json_integer(CP_OM_FORMAT_VERSION)) ||
        (st = set_str(root, "tool_version", CP_VERSION_STRING, "tool version", d)) ||
        (st = set_str(root, "target", meta->target, "target description", d)) ||
        (st = set_str(source, "path", meta->source_path, "source path", d)) ||
        (st = set_str(source, "hash", hash, "source hash", d))) {
        if (st == CP_OK)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory building the .om metadata");
        goto out;
    }
    if (json_object_set(root, "source", source) || json_object_set(root, "config", config)) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory building the .om metadata");
        goto out;
    }
    if (meta->passes_json && meta->passes_json[0]) {
        json_t *passes = json_loads(meta->passes_json, 0, &err);
        if (!json_is_array(passes)) {
            json_decref(passes);
            st = cp_diag_set(d, CP_ERR_INVALID, "the pass record is not a JSON array");
            goto out;
        }
        if (json_object_set_new(root, "passes", passes)) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory building the .om metadata");
            goto out;
        }
    }
    if (cp_json_dump(root, false, out) != CP_OK)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory building the .om metadata");
out:
    json_decref(source);
    json_decref(config);
    json_decref(root);
    return st;
}

static enum cp_status get_str(const char *name, json_t *o, const char *where, const char *key,
                              const char **out, struct cp_diag *d)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v))
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: metadata: %s'%s' is missing or not a string",
                           name, where, key);
    *out = json_string_value(v);
    return CP_OK;
}

static char *dup_bytes(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        if (n)
            memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

enum cp_status om_meta_parse(const char *name, const uint8_t *p, size_t n, uint32_t version,
                             struct cp_om_meta *out, struct cp_diag *d)
{
    if (out)
        memset(out, 0, sizeof *out);
    json_error_t err;
    json_t *root = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: metadata section is not valid JSON (line %d, column %d: %s)", name,
                           err.line, err.column, err.text);
    enum cp_status st = CP_OK;
    char *cfg_text = NULL;
    if (!json_is_object(root)) {
        st = cp_diag_set(d, CP_ERR_CORRUPT, "%s: metadata section is not a JSON object", name);
        goto out;
    }
    json_t *fv = json_object_get(root, "format_version");
    if (!json_is_integer(fv) || json_integer_value(fv) != (json_int_t)version) {
        st = cp_diag_set(d, CP_ERR_CORRUPT,
                         "%s: metadata: 'format_version' does not match the header's %u", name,
                         version);
        goto out;
    }
    const char *tool = "", *target = "", *path = "", *hash = "";
    json_t *source = json_object_get(root, "source");
    if ((st = get_str(name, root, "", "tool_version", &tool, d)) ||
        (st = get_str(name, root, "", "target", &target, d)))
        goto out;
    if (!json_is_object(source)) {
        st = cp_diag_set(d, CP_ERR_CORRUPT, "%s: metadata: 'source' is missing or not an object",
                         name);
        goto out;
    }
    if ((st = get_str(name, source, "source.", "path", &path, d)) ||
        (st = get_str(name, source, "source.", "hash", &hash, d)))
        goto out;
    if (!hash_ok(hash)) {
        st = cp_diag_set(d, CP_ERR_CORRUPT,
                         "%s: metadata: source hash '%.40s' is not 32 lowercase hex digits", name,
                         hash);
        goto out;
    }
    json_t *config = json_object_get(root, "config");
    if (!json_is_object(config)) {
        st = cp_diag_set(d, CP_ERR_CORRUPT, "%s: metadata: 'config' is missing or not an object",
                         name);
        goto out;
    }
    cfg_text = cp_json_text(config);
    if (!cfg_text) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading the metadata", name);
        goto out;
    }
    struct cp_convert_config cfg;
    struct cp_diag local;
    cp_diag_init(&local);
    if (cp_convert_config_from_json(&cfg, cfg_text, &local) != CP_OK) {
        st = cp_diag_set(d, CP_ERR_CORRUPT, "%s: metadata: %s", name, local.msg);
        goto out;
    }
    json_t *passes = json_object_get(root, "passes");
    if (passes && !json_is_array(passes)) {
        st = cp_diag_set(d, CP_ERR_CORRUPT, "%s: metadata: 'passes' is not an array", name);
        goto out;
    }
    if (!out)
        goto out;
    if (passes && !(out->passes_json = cp_json_text(passes))) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading the metadata", name);
        goto out;
    }
    out->format_version = version;
    out->config = cfg;
    out->tool_version = cp_strdup(tool);
    out->source_path = cp_strdup(path);
    out->source_hash = cp_strdup(hash);
    out->target = cp_strdup(target);
    out->meta_json = dup_bytes(p, n);
    if (!out->tool_version || !out->source_path || !out->source_hash || !out->target ||
        !out->meta_json) {
        cp_om_meta_release(out);
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading the metadata", name);
    }
out:
    free(cfg_text);
    json_decref(root);
    return st;
}
