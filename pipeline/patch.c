/* A flow file with some nodes' keys changed (the fixes node-bottleneck
 * proposes, the changes what-if checks): the file is copied as it is, and
 * in each node's attribute list `name[...]` the key's value is replaced,
 * or `key=value` added before the closing bracket. */
#include "pipeline/pipeline_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool name_at(const char *t, size_t i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(t + i, name, n) != 0)
        return false;
    bool left = i == 0 || !(isalnum((unsigned char)t[i - 1]) || t[i - 1] == '_');
    size_t j = i + n;
    if (t[j] == '"')
        j++;
    while (t[j] == ' ' || t[j] == '\t')
        j++;
    return left && t[j] == '[';
}

/* Set key=value in the attribute list of node `name` in text; *out the new
 * text (malloc'ed). */
static enum cp_status set_key(const char *text, const char *name, const char *key,
                              const char *value, char **out, struct cp_diag *d)
{
    size_t i = 0;
    while (text[i] && !name_at(text, i, name))
        i++;
    if (!text[i])
        return cp_diag_set(d, CP_ERR_INVALID, "the flow has no attribute list for node %s", name);
    const char *open = strchr(text + i, '[');
    const char *close = open ? strchr(open, ']') : NULL;
    if (!close)
        return cp_diag_set(d, CP_ERR_INVALID, "node %s: its attribute list has no ']'", name);
    /* the key inside [ ... ] */
    const char *from = NULL, *to = NULL;
    size_t kl = strlen(key);
    for (const char *p = open + 1; p + kl < close; p++) {
        bool left = p == open + 1 || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        if (!left || strncmp(p, key, kl) != 0)
            continue;
        const char *q = p + kl;
        while (*q == ' ')
            q++;
        if (*q != '=')
            continue;
        q++;
        while (*q == ' ')
            q++;
        from = q;
        if (*q == '"') {
            const char *e = strchr(q + 1, '"');
            to = e && e < close ? e + 1 : close;
        } else {
            to = q;
            while (to < close && *to != ',' && *to != ';' && !isspace((unsigned char)*to))
                to++;
        }
        break;
    }
    struct cp_buf b;
    cp_buf_init(&b);
    if (from) {
        cp_buf_printf(&b, "%.*s%s%s", (int)(from - text), text, value, to);
    } else {
        /* before the bracket, after what is there */
        const char *end = close;
        while (end > open + 1 && isspace((unsigned char)end[-1]))
            end--;
        bool empty = end == open + 1;
        cp_buf_printf(&b, "%.*s%s%s=%s%s", (int)(end - text), text, empty ? "" : ", ", key, value,
                      end);
    }
    if (cp_buf_status(&b) != CP_OK) {
        cp_buf_release(&b);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    *out = cp_buf_steal(&b);
    return CP_OK;
}

enum cp_status cp_flow_patch(const char *flow, const struct cp_whatif_change *c, size_t n,
                             const char *out, struct cp_diag *d)
{
    uint8_t *data = NULL;
    size_t len = 0;
    enum cp_status st = cp_file_read(flow, &data, &len, d);
    if (st != CP_OK)
        return st;
    char *text = (char *)data; /* cp_file_read ends it with a NUL */
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        static const char *const keys[] = {"workers", "batch_size", "queue_size",
                                           "batch_window_ms"};
        bool ok = false;
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            ok = ok || strcmp(c[i].key, keys[k]) == 0;
        if (!ok) {
            st = cp_diag_set(d, CP_ERR_USAGE,
                             "%s.%s=%s has no key in a flow file (a speed-up is a prediction "
                             "only: make the node faster, then measure)",
                             c[i].node, c[i].key, c[i].value);
            break;
        }
        char *next = NULL;
        if ((st = set_key(text, c[i].node, c[i].key, c[i].value, &next, d)) == CP_OK) {
            free(text);
            text = next;
        }
    }
    if (st == CP_OK)
        st = cp_file_write_atomic(out, text, strlen(text), d);
    free(text);
    return st;
}

enum cp_status cp_flow_patch_model(const char *flow, const char *node, const char *model,
                                   const char *out, struct cp_diag *d)
{
    if (!model[0] || strchr(model, '"') || strchr(model, '\\') || strchr(model, '\n'))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "node %s: a model path without quotes, backslashes or line ends is "
                           "needed, not '%.200s'",
                           node, model);
    uint8_t *data = NULL;
    size_t len = 0;
    enum cp_status st = cp_file_read(flow, &data, &len, d);
    if (st != CP_OK)
        return st;
    char *text = (char *)data; /* cp_file_read ends it with a NUL */
    struct cp_buf v;
    cp_buf_init(&v);
    cp_buf_printf(&v, "\"%s\"", model);
    char *next = NULL;
    st = cp_buf_status(&v) == CP_OK ? set_key(text, node, "model", v.data, &next, d)
                                    : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    cp_buf_release(&v);
    free(text);
    if (st == CP_OK)
        st = cp_file_write_atomic(out, next, strlen(next), d);
    free(next);
    return st;
}
