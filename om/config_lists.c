/* The conversion config's node and tensor lists, read from files or flag
 * values into canonical text: --keep_dtype and --int8_nodes node lists,
 * ATC's --modify_mixlist and --customize_dtypes, --quant_ranges,
 * --layout_regions and --op_kernels (om/config.h). */
#include "om/config.h"
#include "om/config_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- --keep_dtype ---------------------------------------------------------------- */

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append `entry` as a line of the canonical list out[cap] (*at bytes so
 * far); false when it does not fit. */
static bool append_line(char *out, size_t cap, size_t *at, const char *entry)
{
    size_t k = strlen(entry);
    if (*at + (*at ? 1 : 0) + k + 1 > cap)
        return false;
    if (*at)
        out[(*at)++] = '\n';
    memcpy(out + *at, entry, k + 1);
    *at += k;
    return true;
}

enum cp_status cp_keep_dtype_parse(const char *path, const char *text, size_t len, char *out,
                                   size_t cap, struct cp_diag *d)
{
    return cp_node_list_parse("keep_dtype", path, text, len, out, cap, d);
}

enum cp_status cp_node_list_parse(const char *flag, const char *path, const char *text, size_t len,
                                  char *out, size_t cap, struct cp_diag *d)
{
    if (cap)
        out[0] = '\0';
    if (memchr(text, '\0', len))
        return cp_diag_set(d, CP_ERR_USAGE, "--%s=%s: a NUL byte at offset %zu", flag, path,
                           (size_t)((const char *)memchr(text, '\0', len) - text));
    char *copy = malloc(len + 1);
    char **entries = NULL;
    size_t n = 0, n_cap = 0;
    enum cp_status st = copy ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (copy) {
        memcpy(copy, text, len);
        copy[len] = '\0';
    }
    char *p = copy;
    for (int line = 1; st == CP_OK && p && *p; line++) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        char *e = p + strlen(p);
        while (e > p && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p && *p != '#') {
            if (strcmp(p, "OpType::") == 0)
                st = cp_diag_set(d, CP_ERR_USAGE, "--%s=%s:%d: 'OpType::' names no op type", flag,
                                 path, line);
            else if (strlen(p) >= 1024)
                st =
                    cp_diag_set(d, CP_ERR_USAGE, "--%s=%s:%d: an entry of %zu bytes (at most 1023)",
                                flag, path, line, strlen(p));
            else if (n == n_cap) {
                n_cap = n_cap ? 2 * n_cap : 32;
                char **g = cp_realloc_array(entries, n_cap, sizeof *g);
                if (!g)
                    st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                else
                    entries = g;
            }
            if (st == CP_OK)
                entries[n++] = p;
        }
        p = nl ? nl + 1 : NULL;
    }
    if (st == CP_OK && n)
        qsort(entries, n, sizeof *entries, cmp_entry);
    size_t at = 0;
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        if (i && strcmp(entries[i], entries[i - 1]) == 0)
            continue;
        if (!append_line(out, cap, &at, entries[i])) {
            st = cp_diag_set(d, CP_ERR_USAGE,
                             "--%s=%s: the list is longer than %zu bytes; list op types "
                             "(OpType::X) instead of single nodes",
                             flag, path, cap - 1);
            break;
        }
    }
    if (st != CP_OK && cap)
        out[0] = '\0';
    free(entries);
    free(copy);
    return st;
}

enum cp_status cp_convert_config_load_keep_dtype(struct cp_convert_config *c, struct cp_diag *d)
{
    c->keep_dtype[0] = '\0';
    if (!c->keep_dtype_file[0])
        return CP_OK;
    uint8_t *data = NULL;
    size_t len = 0;
    struct cp_diag local;
    cp_diag_init(&local);
    if (cp_file_read(c->keep_dtype_file, &data, &len, &local) != CP_OK)
        return cp_diag_set(d, CP_ERR_USAGE, "--keep_dtype: %s", local.msg);
    enum cp_status st = cp_keep_dtype_parse(c->keep_dtype_file, data ? (const char *)data : "", len,
                                            c->keep_dtype, sizeof c->keep_dtype, d);
    free(data);
    return st;
}

bool cp_keep_dtype_has(const char *canon, const char *entry)
{
    size_t k = strlen(entry);
    for (const char *p = canon; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len == k && memcmp(p, entry, k) == 0)
            return true;
        p = nl ? nl + 1 : NULL;
    }
    return false;
}

/* ---- --modify_mixlist and --customize_dtypes ---------------------------------------- */

/* An op type as ONNX spells it (Ascend's names of the same ops mapped). */
static const char *onnx_type(const char *t)
{
    static const struct {
        const char *ascend, *onnx;
    } alias[] = {{"Conv2D", "Conv"},
                 {"MatMulV2", "MatMul"},
                 {"BatchMatMul", "MatMul"},
                 {"BatchMatMulV2", "MatMul"},
                 {"SoftmaxV2", "Softmax"}};
    for (size_t i = 0; i < sizeof alias / sizeof *alias; i++)
        if (strcmp(alias[i].ascend, t) == 0)
            return alias[i].onnx;
    return t;
}

/* Entries "KEY=VALUE" collected before sorting; a later put of the same
 * key replaces the value when `override`, else conflicts. */
struct overrides {
    char **v;
    size_t n;
};

static void overrides_free(struct overrides *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->v[i]);
    free(o->v);
    memset(o, 0, sizeof *o);
}

static enum cp_status overrides_put(struct overrides *o, const char *key, const char *value,
                                    bool override, const char *where, struct cp_diag *d)
{
    size_t k = strlen(key);
    for (size_t i = 0; i < o->n; i++)
        if (strncmp(o->v[i], key, k) == 0 && o->v[i][k] == '=') {
            if (strcmp(o->v[i] + k + 1, value) == 0)
                return CP_OK;
            if (!override)
                return cp_diag_set(d, CP_ERR_USAGE, "%s: '%s' is given both %s and %s", where, key,
                                   o->v[i] + k + 1, value);
            free(o->v[i]);
            struct cp_buf b;
            cp_buf_init(&b);
            cp_buf_printf(&b, "%s=%s", key, value);
            o->v[i] = b.data;
            return b.data ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        }
    char **g = cp_realloc_array(o->v, o->n + 1, sizeof *g);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    o->v = g;
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_printf(&b, "%s=%s", key, value);
    if (!b.data)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    o->v[o->n++] = b.data;
    return CP_OK;
}

static enum cp_status load_mixlist(const char *path, struct overrides *o, struct cp_diag *d)
{
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j)
        return cp_diag_set(d, CP_ERR_USAGE, "--modify_mixlist=%s: %s (line %d, column %d)", path,
                           err.text, err.line, err.column);
    enum cp_status st = CP_OK;
    if (!json_is_object(j))
        st = cp_diag_set(d, CP_ERR_USAGE,
                         "--modify_mixlist=%s: expected an object {\"black-list\": {\"to-add\": "
                         "[...], \"to-remove\": [...]}, \"white-list\": {...}, \"gray-list\": "
                         "{...}}",
                         path);
    const char *list;
    json_t *lv;
    json_object_foreach(j, list, lv)
    {
        if (st != CP_OK)
            break;
        bool black = strcmp(list, "black-list") == 0, white = strcmp(list, "white-list") == 0;
        if (!black && !white && strcmp(list, "gray-list") != 0) {
            st = cp_diag_set(d, CP_ERR_USAGE,
                             "--modify_mixlist=%s: unknown key '%s' (black-list, white-list, "
                             "gray-list)",
                             path, list);
            break;
        }
        if (!json_is_object(lv)) {
            st = cp_diag_set(d, CP_ERR_USAGE, "--modify_mixlist=%s: '%s' is not an object", path,
                             list);
            break;
        }
        const char *op;
        json_t *arr;
        json_object_foreach(lv, op, arr)
        {
            bool add = strcmp(op, "to-add") == 0;
            if (!add && strcmp(op, "to-remove") != 0) {
                st = cp_diag_set(d, CP_ERR_USAGE,
                                 "--modify_mixlist=%s: '%s' has unknown key '%s' (to-add, "
                                 "to-remove)",
                                 path, list, op);
                break;
            }
            if (!json_is_array(arr)) {
                st = cp_diag_set(d, CP_ERR_USAGE, "--modify_mixlist=%s: '%s.%s' is not an array",
                                 path, list, op);
                break;
            }
            for (size_t i = 0; st == CP_OK && i < json_array_size(arr); i++) {
                json_t *t = json_array_get(arr, i);
                if (!json_is_string(t) || !json_string_value(t)[0] ||
                    strlen(json_string_value(t)) > 100) {
                    st = cp_diag_set(d, CP_ERR_USAGE,
                                     "--modify_mixlist=%s: '%s.%s'[%zu] is not an op type", path,
                                     list, op, i);
                    break;
                }
                /* black+ and white- keep fp32, white+ lowers; the rest
                 * changes nothing on this target ("none": the conversion
                 * says so) */
                const char *value = black && add ? "fp32"
                                    : white      ? (add ? "bf16" : "fp32")
                                                 : "none";
                char key[128];
                snprintf(key, sizeof key, "OpType::%s", onnx_type(json_string_value(t)));
                char where[1100];
                snprintf(where, sizeof where, "--modify_mixlist=%s", path);
                st = overrides_put(o, key, value, false, where, d);
            }
        }
    }
    json_decref(j);
    return st;
}

/* One dtype name of --customize_dtypes: 0 float32, 1 bfloat16, -1 refused
 * (*what: why). */
static int dtype_kind(const char *t, const char **what)
{
    if (strcmp(t, "float32") == 0 || strcmp(t, "float") == 0 || strcmp(t, "fp32") == 0)
        return 0;
    if (strcmp(t, "bfloat16") == 0 || strcmp(t, "bf16") == 0)
        return 1;
    if (strcmp(t, "float16") == 0 || strcmp(t, "fp16") == 0 || strcmp(t, "half") == 0)
        *what = "float16 has no arithmetic on the cpu target; use bfloat16";
    else if (strncmp(t, "int", 3) == 0 || strncmp(t, "uint", 4) == 0)
        *what = "integer compute is --int8_nodes' (calibrated), not a dtype list's";
    else
        *what = "not a dtype (float32, bfloat16)";
    return -1;
}

static enum cp_status load_customize(const char *path, struct overrides *o, struct cp_diag *d)
{
    uint8_t *data = NULL;
    size_t len = 0;
    struct cp_diag local;
    cp_diag_init(&local);
    if (cp_file_read(path, &data, &len, &local) != CP_OK)
        return cp_diag_set(d, CP_ERR_USAGE, "--customize_dtypes: %s", local.msg);
    char *text = malloc(len + 1);
    if (!text) {
        free(data);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    memcpy(text, data ? data : (uint8_t *)"", len);
    text[len] = '\0';
    free(data);
    enum cp_status st = CP_OK;
    if (strlen(text) != len)
        st = cp_diag_set(d, CP_ERR_USAGE, "--customize_dtypes=%s: a NUL byte at offset %zu", path,
                         strlen(text));
    char *p = text;
    for (int line = 1; st == CP_OK && p && *p; line++) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        char *e = p + strlen(p);
        while (e > p && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p && *p != '#') {
            char key[1100];
            const char *rest = NULL;
            if (strncmp(p, "Opname::", 8) == 0 || strncmp(p, "OpType::", 8) == 0) {
                char *in = strstr(p + 8, ":InputDtype:");
                if (in && (size_t)(in - (p + 8)) < 1000) {
                    bool type = p[2] == 'T';
                    snprintf(key, sizeof key, "%s%.*s", type ? "OpType::" : "", (int)(in - (p + 8)),
                             p + 8);
                    if (type)
                        snprintf(key, sizeof key, "OpType::%s", onnx_type(key + 8));
                    rest = in + 12;
                }
            }
            if (!rest || !key[0] || strcmp(key, "OpType::") == 0) {
                st = cp_diag_set(d, CP_ERR_USAGE,
                                 "--customize_dtypes=%s:%d: expected "
                                 "'Opname::NAME:InputDtype:d1,...;OutputDtype:d1,...' or "
                                 "'OpType::TYPE:InputDtype:...;OutputDtype:...'",
                                 path, line);
                break;
            }
            char *out = strstr(rest, "OutputDtype:");
            char ins[512] = "", outs[512] = "";
            snprintf(ins, sizeof ins, "%.*s", (int)(out ? (size_t)(out - rest) : strlen(rest)),
                     rest);
            if (out)
                snprintf(outs, sizeof outs, "%s", out + 12);
            int kind = 0;
            const char *what = NULL;
            for (char *sv = NULL, *t = strtok_r(ins, ",;", &sv); t && st == CP_OK;
                 t = strtok_r(NULL, ",;", &sv)) {
                int k = dtype_kind(t, &what);
                if (k < 0)
                    st = cp_diag_set(d, CP_ERR_USAGE,
                                     "--customize_dtypes=%s:%d: InputDtype '%s': %s", path, line, t,
                                     what);
                else if (k > kind)
                    kind = k;
            }
            for (char *sv = NULL, *t = strtok_r(outs, ",;", &sv); t && st == CP_OK;
                 t = strtok_r(NULL, ",;", &sv))
                if (dtype_kind(t, &what) != 0)
                    st = cp_diag_set(d, CP_ERR_USAGE,
                                     "--customize_dtypes=%s:%d: OutputDtype '%s': the cpu target "
                                     "keeps float32 at a node's boundary",
                                     path, line, t);
            char where[1100];
            snprintf(where, sizeof where, "--customize_dtypes=%s:%d", path, line);
            if (st == CP_OK)
                st = overrides_put(o, key, kind ? "bf16" : "fp32", true, where, d);
        }
        p = nl ? nl + 1 : NULL;
    }
    free(text);
    return st;
}

enum cp_status cp_convert_config_load_precision_overrides(struct cp_convert_config *c,
                                                          struct cp_diag *d)
{
    c->precision_overrides[0] = '\0';
    if (!c->modify_mixlist_file[0] && !c->customize_dtypes_file[0])
        return CP_OK;
    struct overrides o = {0};
    enum cp_status st = CP_OK;
    if (c->modify_mixlist_file[0])
        st = load_mixlist(c->modify_mixlist_file, &o, d);
    /* customize_dtypes wins over the mix list, as with ATC */
    if (st == CP_OK && c->customize_dtypes_file[0])
        st = load_customize(c->customize_dtypes_file, &o, d);
    if (st == CP_OK && o.n)
        qsort(o.v, o.n, sizeof *o.v, cmp_entry);
    size_t at = 0;
    for (size_t i = 0; st == CP_OK && i < o.n; i++)
        if (!append_line(c->precision_overrides, sizeof c->precision_overrides, &at, o.v[i]))
            st = cp_diag_set(d, CP_ERR_USAGE,
                             "--modify_mixlist/--customize_dtypes: more than %zu bytes of "
                             "entries; name op types instead of single nodes",
                             sizeof c->precision_overrides - 1);
    if (st != CP_OK)
        c->precision_overrides[0] = '\0';
    overrides_free(&o);
    return st;
}

const char *cp_precision_override(const char *canon, const char *entry)
{
    size_t k = strlen(entry);
    for (const char *p = canon; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len == k + 5 && strncmp(p, entry, k) == 0 && p[k] == '=')
            return strncmp(p + k + 1, "bf16", 4) == 0   ? "bf16"
                   : strncmp(p + k + 1, "fp32", 4) == 0 ? "fp32"
                                                        : NULL;
        p = nl ? nl + 1 : NULL;
    }
    return NULL;
}

/* ---- int8: --int8_nodes and --quant_ranges ----------------------------------------- */

enum cp_status cp_convert_config_load_int8_nodes(struct cp_convert_config *c, struct cp_diag *d)
{
    c->int8_nodes[0] = '\0';
    if (!c->int8_nodes_file[0])
        return CP_OK;
    uint8_t *data = NULL;
    size_t len = 0;
    struct cp_diag local;
    cp_diag_init(&local);
    if (cp_file_read(c->int8_nodes_file, &data, &len, &local) != CP_OK)
        return cp_diag_set(d, CP_ERR_USAGE, "--int8_nodes: %s", local.msg);
    enum cp_status st =
        cp_node_list_parse("int8_nodes", c->int8_nodes_file, data ? (const char *)data : "", len,
                           c->int8_nodes, sizeof c->int8_nodes, d);
    free(data);
    return st;
}

struct range_line {
    char *name;
    double lo, hi;
    int line;
};

static int cmp_range(const void *a, const void *b)
{
    return strcmp(((const struct range_line *)a)->name, ((const struct range_line *)b)->name);
}

/* Split the next blank-separated field off *p; NULL when none is left. */
static char *next_field(char **p)
{
    char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s)
        return NULL;
    char *e = s;
    while (*e && *e != ' ' && *e != '\t')
        e++;
    if (*e)
        *e++ = '\0';
    *p = e;
    return s;
}

enum cp_status cp_quant_ranges_parse(const char *path, const char *text, size_t len, char *out,
                                     size_t cap, struct cp_diag *d)
{
    if (cap)
        out[0] = '\0';
    if (memchr(text, '\0', len))
        return cp_diag_set(d, CP_ERR_USAGE, "--quant_ranges=%s: a NUL byte at offset %zu", path,
                           (size_t)((const char *)memchr(text, '\0', len) - text));
    char *copy = malloc(len + 1);
    struct range_line *lines = NULL;
    size_t n = 0, n_cap = 0;
    enum cp_status st = copy ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (copy) {
        memcpy(copy, text, len);
        copy[len] = '\0';
    }
    char *p = copy;
    for (int line = 1; st == CP_OK && p && *p; line++) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        char *e = p + strlen(p);
        if (e > p && e[-1] == '\r')
            *--e = '\0';
        char *cur = p;
        char *name = next_field(&cur);
        if (name && name[0] != '#') {
            char *a = next_field(&cur), *b = next_field(&cur), *extra = next_field(&cur);
            double lo = 0, hi = 0;
            if (!a || !b || extra)
                st = cp_diag_set(d, CP_ERR_USAGE,
                                 "--quant_ranges=%s:%d: expected 'TENSOR MIN MAX', three fields",
                                 path, line);
            else if (!cp_cfg_parse_f64(a, &lo) || !cp_cfg_parse_f64(b, &hi))
                st = cp_diag_set(d, CP_ERR_USAGE,
                                 "--quant_ranges=%s:%d: '%s %s' are not two finite numbers", path,
                                 line, a, b);
            else if (lo > hi)
                st = cp_diag_set(d, CP_ERR_USAGE,
                                 "--quant_ranges=%s:%d: tensor '%s': MIN %g is above MAX %g", path,
                                 line, name, lo, hi);
            else if (strlen(name) >= 1024)
                st = cp_diag_set(d, CP_ERR_USAGE,
                                 "--quant_ranges=%s:%d: a tensor name of %zu bytes (at most 1023)",
                                 path, line, strlen(name));
            else if (n == n_cap) {
                n_cap = n_cap ? 2 * n_cap : 64;
                struct range_line *g = cp_realloc_array(lines, n_cap, sizeof *g);
                if (!g)
                    st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                else
                    lines = g;
            }
            if (st == CP_OK)
                lines[n++] = (struct range_line){name, lo, hi, line};
        }
        p = nl ? nl + 1 : NULL;
    }
    if (st == CP_OK && n)
        qsort(lines, n, sizeof *lines, cmp_range);
    size_t at = 0;
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        if (i && strcmp(lines[i].name, lines[i - 1].name) == 0) {
            st = cp_diag_set(d, CP_ERR_USAGE, "--quant_ranges=%s: tensor '%s' is given twice", path,
                             lines[i].name);
            break;
        }
        char entry[1100];
        snprintf(entry, sizeof entry, "%s %.9g %.9g", lines[i].name, lines[i].lo, lines[i].hi);
        if (!append_line(out, cap, &at, entry))
            st = cp_diag_set(d, CP_ERR_USAGE,
                             "--quant_ranges=%s: the table is longer than %zu bytes; quantize "
                             "fewer nodes",
                             path, cap - 1);
    }
    if (st != CP_OK && cap)
        out[0] = '\0';
    free(lines);
    free(copy);
    return st;
}

enum cp_status cp_convert_config_load_quant_ranges(struct cp_convert_config *c, struct cp_diag *d)
{
    if (!c->quant_ranges_file[0])
        return CP_OK;
    uint8_t *data = NULL;
    size_t len = 0;
    struct cp_diag local;
    cp_diag_init(&local);
    if (cp_file_read(c->quant_ranges_file, &data, &len, &local) != CP_OK)
        return cp_diag_set(d, CP_ERR_USAGE, "--quant_ranges: %s", local.msg);
    enum cp_status st = cp_quant_ranges_parse(c->quant_ranges_file, data ? (const char *)data : "",
                                              len, c->quant_ranges, sizeof c->quant_ranges, d);
    free(data);
    return st;
}

bool cp_quant_ranges_find(const char *canon, const char *tensor, double *lo, double *hi)
{
    size_t k = strlen(tensor);
    for (const char *p = canon; p && *p;) {
        const char *nl = strchr(p, '\n');
        if (strncmp(p, tensor, k) == 0 && p[k] == ' ') {
            char *end = NULL;
            *lo = strtod(p + k + 1, &end);
            *hi = strtod(end, NULL);
            return true;
        }
        p = nl ? nl + 1 : NULL;
    }
    return false;
}

size_t cp_quant_ranges_count(const char *canon)
{
    size_t n = 0;
    for (const char *p = canon; p && *p; n++) {
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

/* ---- --layout_regions ------------------------------------------------------------- */

/* A NODE<sep>VALUE entry of a list, checked: CP_OK, or the refusal with
 * its message. `at` is the separator in `entry`, NULL when it has none. */
typedef enum cp_status (*entry_check)(const char *entry, const char *at, struct cp_diag *d);

/* A ";"-separated list of NODE<sep>VALUE entries (blanks trimmed, empty
 * ones skipped; the separator is the entry's last `sep`), each checked,
 * written to out one per line sorted by node; a node given twice is
 * refused. `flag` names the option in messages. */
static enum cp_status parse_node_list(const char *flag, const char *value, char sep,
                                      entry_check check, char *out, size_t cap, struct cp_diag *d)
{
    if (cap)
        out[0] = '\0';
    char *copy = cp_strdup(value ? value : "");
    char **entries = NULL;
    size_t n = 0;
    enum cp_status st = copy ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (char *save = NULL, *t = copy ? strtok_r(copy, ";", &save) : NULL; st == CP_OK && t;
         t = strtok_r(NULL, ";", &save)) {
        while (*t == ' ' || *t == '\t')
            t++;
        char *e = t + strlen(t);
        while (e > t && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        if (!*t)
            continue;
        if ((st = check(t, strrchr(t, sep), d)) != CP_OK)
            break;
        char **g = cp_realloc_array(entries, n + 1, sizeof *g);
        if (!g) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        entries = g;
        entries[n++] = t;
    }
    if (st == CP_OK && n)
        qsort(entries, n, sizeof *entries, cmp_entry);
    size_t at = 0;
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        size_t node_len = (size_t)(strrchr(entries[i], sep) - entries[i]);
        if (i && strncmp(entries[i], entries[i - 1], node_len) == 0 &&
            (size_t)(strrchr(entries[i - 1], sep) - entries[i - 1]) == node_len) {
            st = cp_diag_set(d, CP_ERR_USAGE, "--%s: node '%.*s' is given twice", flag,
                             (int)node_len, entries[i]);
            break;
        }
        if (!append_line(out, cap, &at, entries[i])) {
            st = cp_diag_set(d, CP_ERR_USAGE, "--%s: the list is longer than %zu bytes", flag,
                             cap ? cap - 1 : 0);
            break;
        }
    }
    if (st != CP_OK && cap)
        out[0] = '\0';
    free(entries);
    free(copy);
    return st;
}

static enum cp_status check_op_kernel(const char *t, const char *eq, struct cp_diag *d)
{
    if (!eq || eq == t || !eq[1] || strchr(eq + 1, ' '))
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--op_kernels: '%s' is not NODE=KERNEL (e.g. "
                           "/conv1/Conv=onednn:conv, a kernel name as traces show it)",
                           t);
    return CP_OK;
}

enum cp_status cp_op_kernels_parse(const char *value, char *out, size_t cap, struct cp_diag *d)
{
    return parse_node_list("op_kernels", value, '=', check_op_kernel, out, cap, d);
}

static enum cp_status check_layout_region(const char *t, const char *colon, struct cp_diag *d)
{
    static const char *const policies[] = {"nchw", "nhwc", "blocked"};
    if (!colon || colon == t)
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--layout_regions: '%s' is not NODE:POLICY (e.g. "
                           "/layer1/conv1/Conv:nhwc)",
                           t);
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++)
        if (strcmp(colon + 1, policies[k]) == 0)
            return CP_OK;
    return cp_diag_set(d, CP_ERR_USAGE,
                       "--layout_regions: '%s': '%s' is not a region layout; use nchw, nhwc "
                       "or blocked",
                       t, colon + 1);
}

enum cp_status cp_layout_regions_parse(const char *value, char *out, size_t cap, struct cp_diag *d)
{
    return parse_node_list("layout_regions", value, ':', check_layout_region, out, cap, d);
}
