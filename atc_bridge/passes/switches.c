/* Fusion switch files (`--fusion_switch_file`), in both forms ATC knows:
 *
 *   JSON:   {"Switch":{"GraphFusion":{"ALL":"on","SomePass":"off"},
 *                      "UBFusion":{"ALL":"off"}}}
 *   lines:  SomePass:off        one switch per line; "on" or "off";
 *           # a comment         blank lines and # comments are ignored;
 *           ALL:off             every pass, in every group
 *
 * "ALL" covers every fusion pass of its group (in the line form, of every
 * group): the cleanup, batch, fusion and attention families. The layout and
 * precision passes carry knobs of their own (--layout_policy,
 * --precision_mode, --op_select_implmode), as in ATC, where precision is no
 * fusion switch; ALL never touches them, only an entry naming one does.
 * An entry naming a pass overrides ALL wherever it appears. A pass listed
 * under the other group still gets its switch (ATC would silently ignore
 * it), with a warning. A name that is no pass is an error listing the valid
 * names. Passes are on unless switched off.
 *
 * One pattern instance (line form only): "PassName@NODE:off" keeps the
 * fusion of that pass from taking the nodes standing for ONNX node NODE
 * (by name or origin); the pattern is left as it was, everywhere else the
 * pass runs. Only the fusion passes that build their fused node through
 * the shared replacement (cp_fuse_replace: the Conv/MatMul/Gemm epilogue
 * fusions, LayerNorm, GroupNorm, GELU) take instances; an instance of a
 * pass switched off as a whole is dropped.
 *
 * The result is canonical text, the passes switched off, sorted by name,
 * then the instances, sorted: "PassA:off;PassB:off;PassC@/n1:off". It is
 * what the config records and hashes, so the same effective switches give
 * the same config id whatever file said them. */
#include "atc_bridge/passes/pass.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum sw { SW_UNSET = 0, SW_ON, SW_OFF };

static const char *const groups[] = {"GraphFusion", "UBFusion"};
#define N_GROUPS 2

static int group_index(const char *g)
{
    for (int i = 0; i < N_GROUPS; i++)
        if (strcmp(groups[i], g) == 0)
            return i;
    return -1;
}

/* "valid passes: A, B, C" (with a nearest-name hint first when close). */
static void unknown_pass_hint(const char *name, struct cp_buf *b)
{
    size_t n = cp_pass_count(), best_d = (size_t)-1;
    const char *best = NULL;
    struct cp_pass_desc p;
    for (size_t i = 0; i < n && cp_pass_describe(i, &p); i++) {
        size_t dist = cp_edit_distance(name, p.name);
        if (dist < best_d) {
            best_d = dist;
            best = p.name;
        }
    }
    if (best && best_d <= 3)
        cp_buf_printf(b, "did you mean '%s'? ", best);
    cp_buf_puts(b, "valid passes: ");
    for (size_t i = 0; i < n && cp_pass_describe(i, &p); i++)
        cp_buf_printf(b, "%s%s", i ? ", " : "", p.name);
    if (n == 0)
        cp_buf_puts(b, "(none)");
}

static enum cp_status unknown_pass(const char *where, const char *name, struct cp_diag *d)
{
    struct cp_buf b;
    cp_buf_init(&b);
    unknown_pass_hint(name, &b);
    enum cp_status st = cp_diag_set(d, CP_ERR_USAGE,
                                    "%s: unknown pass '%s'; %s (see cannprof "
                                    "convert --list-passes)",
                                    where, name, b.data ? b.data : "");
    cp_buf_release(&b);
    return st;
}

static int parse_onoff(const char *v)
{
    if (strcmp(v, "on") == 0)
        return SW_ON;
    if (strcmp(v, "off") == 0)
        return SW_OFF;
    return SW_UNSET;
}

/* Canonical text from per-pass decisions. */
struct named_off {
    const char *name;
};

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct named_off *)a)->name, ((const struct named_off *)b)->name);
}

/* The passes that take single instances (cp_fuse_replace's callers). */
static bool takes_instances(const char *pass)
{
    static const char *const names[] = {"ConvBiasActivationFusionPass",
                                        "MatMulBiasActivationFusionPass", "LayerNormFusionPass",
                                        "GroupNormFusionPass", "GeluFusionPass"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(names[i], pass) == 0)
            return true;
    return false;
}

/* Instance entries "Pass@NODE:off" collected from a file. */
struct instances {
    char **v;
    size_t n;
};

static void instances_free(struct instances *in)
{
    for (size_t i = 0; i < in->n; i++)
        free(in->v[i]);
    free(in->v);
    memset(in, 0, sizeof *in);
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static enum cp_status canonical(const bool *off, const struct instances *in, const char *path,
                                char *out, size_t cap, struct cp_diag *d)
{
    size_t n = cp_pass_count(), k = 0;
    struct named_off *v = cp_calloc(n + 1, sizeof *v);
    if (!v)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading %s", path);
    struct cp_pass_desc p;
    for (size_t i = 0; i < n; i++)
        if (off[i] && cp_pass_describe(i, &p))
            v[k++].name = p.name;
    qsort(v, k, sizeof *v, cmp_name);
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "");
    for (size_t i = 0; i < k; i++)
        cp_buf_printf(&b, "%s%s:off", i ? ";" : "", v[i].name);
    free(v);
    if (in && in->n)
        qsort(in->v, in->n, sizeof *in->v, cmp_cstr);
    for (size_t i = 0; in && i < in->n; i++) {
        const char *at = strchr(in->v[i], '@');
        char pass[128];
        snprintf(pass, sizeof pass, "%.*s", (int)(at - in->v[i]), in->v[i]);
        int pi = cp_pass_index(pass);
        if ((pi >= 0 && off[pi]) || (i && strcmp(in->v[i], in->v[i - 1]) == 0))
            continue; /* the whole pass is off, or said twice */
        cp_buf_printf(&b, "%s%s", b.len ? ";" : "", in->v[i]);
    }
    enum cp_status st = cp_buf_status(&b);
    if (st != CP_OK)
        st = cp_diag_set(d, st, "out of memory reading %s", path);
    else if (b.len >= cap)
        st = cp_diag_set(d, CP_ERR_UNSUPPORTED, "%s: the switches take more than %zu characters",
                         path, cap - 1);
    else
        memcpy(out, b.data ? b.data : "", b.len + 1);
    cp_buf_release(&b);
    return st;
}

/* Resolve: a named entry wins, then its group's ALL, then on. */
static void resolve(const enum sw *named, const enum sw *all, bool *off)
{
    size_t n = cp_pass_count();
    struct cp_pass_desc p;
    for (size_t i = 0; i < n && cp_pass_describe(i, &p); i++) {
        int gi = group_index(p.group);
        enum sw s = named[i];
        if (s == SW_UNSET && gi >= 0 && cp_pass_family_is_fusion(p.family))
            s = all[gi];
        off[i] = s == SW_OFF;
    }
}

/* ---- JSON form ------------------------------------------------------------------- */

static enum cp_status parse_json(const char *path, const char *text, size_t len,
                                 const struct cp_log *log, enum sw *named, enum sw *all,
                                 struct cp_diag *d)
{
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return cp_diag_set(d, CP_ERR_USAGE, "%s:%d:%d: not valid JSON: %s", path, err.line,
                           err.column, err.text);
    enum cp_status st = CP_OK;
    json_t *sw = json_is_object(root) ? json_object_get(root, "Switch") : NULL;
    if (!json_is_object(sw)) {
        st = cp_diag_set(d, CP_ERR_USAGE,
                         "%s: expected an object {\"Switch\":{\"GraphFusion\":{\"ALL\":\"on\","
                         "\"<Pass>\":\"off\"},\"UBFusion\":{...}}}",
                         path);
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "Switch") != 0)
            cp_log_msg(log, CP_LOG_WARNING, "%s: ignoring key '%s' (only \"Switch\" is read)", path,
                       key);
    }
    const char *gname;
    json_t *gval;
    json_object_foreach(sw, gname, gval)
    {
        int gi = group_index(gname);
        if (gi < 0) {
            st = cp_diag_set(d, CP_ERR_USAGE,
                             "%s: Switch.%s: unknown switch group; use GraphFusion or UBFusion",
                             path, gname);
            goto out;
        }
        if (!json_is_object(gval)) {
            st = cp_diag_set(d, CP_ERR_USAGE,
                             "%s: Switch.%s: expected an object of \"PassName\":\"on\"|\"off\"",
                             path, gname);
            goto out;
        }
        json_object_foreach(gval, key, val)
        {
            char where[512];
            snprintf(where, sizeof where, "%s: Switch.%s.%s", path, gname, key);
            int v = json_is_string(val) ? parse_onoff(json_string_value(val)) : SW_UNSET;
            if (v == SW_UNSET) {
                st = cp_diag_set(d, CP_ERR_USAGE, "%s: the value must be \"on\" or \"off\"", where);
                goto out;
            }
            if (strcmp(key, "ALL") == 0) {
                all[gi] = (enum sw)v;
                continue;
            }
            int pi = cp_pass_index(key);
            if (pi < 0) {
                st = unknown_pass(where, key, d);
                goto out;
            }
            struct cp_pass_desc p;
            cp_pass_describe((size_t)pi, &p);
            if (strcmp(p.group, gname) != 0)
                cp_log_msg(log, CP_LOG_WARNING,
                           "%s: %s is a %s pass, not a %s one; applying the switch anyway (ATC "
                           "would ignore it)",
                           where, key, p.group, gname);
            if (named[pi] != SW_UNSET && named[pi] != (enum sw)v)
                cp_log_msg(log, CP_LOG_WARNING,
                           "%s: %s is switched both on and off; the last entry read wins", where,
                           key);
            named[pi] = (enum sw)v;
        }
    }
out:
    json_decref(root);
    return st;
}

/* ---- line form ------------------------------------------------------------------- */

static char *trim(char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static enum cp_status parse_lines(const char *path, const char *text, size_t len,
                                  const struct cp_log *log, enum sw *named, enum sw *all,
                                  struct instances *in, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    size_t lineno = 0, pos = 0;
    while (pos < len && st == CP_OK) {
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        lineno++;
        char line[1024];
        if (end - pos >= sizeof line)
            return cp_diag_set(d, CP_ERR_USAGE, "%s:%zu: line is longer than %zu characters", path,
                               lineno, sizeof line - 1);
        memcpy(line, text + pos, end - pos);
        line[end - pos] = '\0';
        pos = end + 1;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        char *colon = strrchr(s, ':');
        int v = SW_UNSET;
        if (colon) {
            *colon = '\0';
            v = parse_onoff(trim(colon + 1));
        }
        char *name = trim(s);
        if (!colon || v == SW_UNSET || !*name)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "%s:%zu: expected PassName:on or PassName:off (or ALL:off)", path,
                               lineno);
        char where[512];
        snprintf(where, sizeof where, "%s:%zu", path, lineno);
        char *at = strchr(name, '@');
        if (at) {
            *at = '\0';
            const char *node = at + 1;
            if (cp_pass_index(name) < 0)
                return unknown_pass(where, name, d);
            if (!takes_instances(name))
                return cp_diag_set(d, CP_ERR_USAGE,
                                   "%s: %s cannot be switched off for one instance; the passes "
                                   "that can: ConvBiasActivationFusionPass, "
                                   "MatMulBiasActivationFusionPass, LayerNormFusionPass, "
                                   "GroupNormFusionPass, GeluFusionPass",
                                   where, name);
            if (!*node || v != SW_OFF)
                return cp_diag_set(d, CP_ERR_USAGE,
                                   "%s: expected PassName@NODE:off (an instance can only be "
                                   "switched off)",
                                   where);
            char **g = cp_realloc_array(in->v, in->n + 1, sizeof *g);
            if (!g)
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading %s", path);
            in->v = g;
            struct cp_buf e;
            cp_buf_init(&e);
            cp_buf_printf(&e, "%s@%s:off", name, node);
            if (!e.data)
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading %s", path);
            in->v[in->n++] = e.data;
            continue;
        }
        if (strcmp(name, "ALL") == 0) {
            for (int g = 0; g < N_GROUPS; g++)
                all[g] = (enum sw)v;
            continue;
        }
        int pi = cp_pass_index(name);
        if (pi < 0)
            return unknown_pass(where, name, d);
        if (named[pi] != SW_UNSET && named[pi] != (enum sw)v)
            cp_log_msg(log, CP_LOG_WARNING,
                       "%s: %s is switched both on and off; the last line wins", where, name);
        named[pi] = (enum sw)v;
    }
    return st;
}

enum cp_status cp_fusion_switches_parse(const char *path, const char *text, size_t len,
                                        const struct cp_log *log, char *out, size_t cap,
                                        struct cp_diag *d)
{
    const struct cp_log warn_log = {CP_LOG_WARNING, NULL};
    if (!log)
        log = &warn_log;
    if (cap)
        out[0] = '\0';
    size_t n = cp_pass_count();
    enum sw *named = cp_calloc(n + 1, sizeof *named);
    bool *off = cp_calloc(n + 1, sizeof *off);
    enum sw all[N_GROUPS] = {SW_UNSET, SW_UNSET};
    struct instances in = {0};
    enum cp_status st;
    if (!named || !off) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading %s", path);
        goto out;
    }
    /* A UTF-8 byte order mark is not content. */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        text += 3;
        len -= 3;
    }
    size_t i = 0;
    while (i < len && isspace((unsigned char)text[i]))
        i++;
    if (i < len && text[i] == '{')
        st = parse_json(path, text, len, log, named, all, d);
    else
        st = parse_lines(path, text, len, log, named, all, &in, d);
    if (st != CP_OK)
        goto out;
    resolve(named, all, off);
    st = canonical(off, &in, path, out, cap, d);
out:
    instances_free(&in);
    free(named);
    free(off);
    return st;
}

enum cp_status cp_fusion_switches_decide(const char *text, bool *off, struct cp_diag *d)
{
    size_t n = cp_pass_count();
    memset(off, 0, n * sizeof *off);
    const char *p = text ? text : "";
    while (*p) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[256];
        if (len >= sizeof item)
            return cp_diag_set(d, CP_ERR_USAGE, "fusion switches: entry '%.40s...' is too long", p);
        memcpy(item, p, len);
        item[len] = '\0';
        p += len + (end ? 1 : 0);
        if (!item[0] || strchr(item, '@'))
            continue; /* an instance (cp_fusion_switch_instance_off) */
        char *colon = strrchr(item, ':');
        int v = colon ? parse_onoff(colon + 1) : SW_UNSET;
        if (v == SW_UNSET)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "fusion switches: '%s' is not PassName:on or PassName:off", item);
        *colon = '\0';
        int pi = cp_pass_index(item);
        if (pi < 0)
            return unknown_pass("fusion switches", item, d);
        off[pi] = v == SW_OFF;
    }
    return CP_OK;
}

enum cp_status cp_convert_config_load_fusion_switches(struct cp_convert_config *c,
                                                      const struct cp_log *log, struct cp_diag *d)
{
    c->fusion_switches[0] = '\0';
    if (!c->fusion_switch_file[0])
        return CP_OK;
    uint8_t *data = NULL;
    size_t len = 0;
    struct cp_diag local;
    cp_diag_init(&local);
    if (cp_file_read(c->fusion_switch_file, &data, &len, &local) != CP_OK)
        return cp_diag_set(d, CP_ERR_USAGE, "--fusion_switch_file: %s", local.msg);
    char *text = cp_calloc(CP_FUSION_SWITCHES_MAX, 1);
    enum cp_status st;
    if (!text) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading %s", c->fusion_switch_file);
    } else {
        st = cp_fusion_switches_parse(c->fusion_switch_file, (const char *)data, len, log, text,
                                      CP_FUSION_SWITCHES_MAX, d);
        if (st == CP_OK)
            memcpy(c->fusion_switches, text, CP_FUSION_SWITCHES_MAX);
    }
    free(text);
    free(data);
    return st;
}

bool cp_fusion_switch_instance_off(const char *switches, const char *pass, const char *node)
{
    size_t pl = strlen(pass), nl = strlen(node);
    for (const char *p = switches; p && *p;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == pl + 1 + nl + 4 && strncmp(p, pass, pl) == 0 && p[pl] == '@' &&
            strncmp(p + pl + 1, node, nl) == 0 && strncmp(p + pl + 1 + nl, ":off", 4) == 0)
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}
