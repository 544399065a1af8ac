/* Points of the knob space and the deltas between them. */
#include "core/json.h"
#include "tuner/tuner.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The convert flags a delta may turn. */
static const char *const convert_keys[] = {
    "buffer_optimize", "int8_nodes",     "keep_dtype",
    "layout_policy",   "layout_regions", "op_select_implmode",
    "precision_mode",  "quant_ranges",   NULL};

static bool is_convert_key(const char *k)
{
    for (const char *const *c = convert_keys; *c; c++)
        if (strcmp(*c, k) == 0)
            return true;
    return false;
}

static bool key_known(const char *k)
{
    return is_convert_key(k) || strcmp(k, "threads") == 0 || strcmp(k, "batch") == 0 ||
           (strncmp(k, "switch:", 7) == 0 && k[7]);
}

/* Set (or replace) key in dl. */
static enum cp_status put(struct cp_delta *dl, const char *key, const char *value,
                          struct cp_diag *d)
{
    if (strlen(key) >= sizeof dl->items[0].key || strlen(value) >= sizeof dl->items[0].value)
        return cp_diag_set(d, CP_ERR_INVALID, "delta item '%s=%s' is too long", key, value);
    for (size_t i = 0; i < dl->n; i++)
        if (strcmp(dl->items[i].key, key) == 0) {
            snprintf(dl->items[i].value, sizeof dl->items[i].value, "%s", value);
            return CP_OK;
        }
    if (dl->n == CP_DELTA_MAX_ITEMS)
        return cp_diag_set(d, CP_ERR_INVALID, "a delta holds at most %d items", CP_DELTA_MAX_ITEMS);
    snprintf(dl->items[dl->n].key, sizeof dl->items[0].key, "%s", key);
    snprintf(dl->items[dl->n].value, sizeof dl->items[0].value, "%s", value);
    dl->n++;
    return CP_OK;
}

enum cp_status cp_delta_parse(const char *text, struct cp_delta *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    const char *p = text ? text : "";
    while (*p) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        const char *end = p;
        while (*end && !isspace((unsigned char)*end))
            end++;
        char item[96 + 1100 + 2];
        if ((size_t)(end - p) >= sizeof item)
            return cp_diag_set(d, CP_ERR_INVALID, "delta item '%.40s...' is too long", p);
        snprintf(item, sizeof item, "%.*s", (int)(end - p), p);
        char *eq = strchr(item, '=');
        if (!eq || eq == item || !eq[1])
            return cp_diag_set(d, CP_ERR_INVALID, "delta item '%s' is not key=value", item);
        *eq = '\0';
        if (!key_known(item))
            return cp_diag_set(d, CP_ERR_INVALID,
                               "delta item '%s=%s': unknown knob '%s' (known: layout_policy, "
                               "precision_mode, buffer_optimize, op_select_implmode, "
                               "keep_dtype, int8_nodes, quant_ranges, layout_regions, op_kernels, "
                               "switch:<Pass>, threads, batch)",
                               item, eq + 1, item);
        enum cp_status st = put(out, item, eq + 1, d);
        if (st != CP_OK)
            return st;
        p = end;
    }
    return CP_OK;
}

static int cmp_item(const void *a, const void *b)
{
    return strcmp(((const struct cp_delta_item *)a)->key, ((const struct cp_delta_item *)b)->key);
}

void cp_delta_format(const struct cp_delta *dl, struct cp_buf *out)
{
    struct cp_delta sorted = *dl;
    qsort(sorted.items, sorted.n, sizeof sorted.items[0], cmp_item);
    for (size_t i = 0; i < sorted.n; i++)
        cp_buf_printf(out, "%s%s=%s", i ? " " : "", sorted.items[i].key, sorted.items[i].value);
}

enum cp_status cp_delta_from_change(const struct cp_change *c, struct cp_delta *out,
                                    struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && c->convert && c->convert[i]; i++) {
        const char *f = c->convert[i] + 2, *eq = strchr(f, '=');
        char key[96];
        snprintf(key, sizeof key, "%.*s", (int)(eq - f), f);
        if (strcmp(key, "dynamic_batch_size") == 0)
            continue; /* the tuner converts a static batch instead (batch=N) */
        if (!is_convert_key(key))
            return cp_diag_set(d, CP_ERR_UNSUPPORTED, "the tuner does not turn --%s", key);
        st = put(out, key, eq + 1, d);
    }
    for (size_t i = 0; st == CP_OK && c->fusion_switches && c->fusion_switches[i]; i++) {
        const char *sw = c->fusion_switches[i], *colon = strrchr(sw, ':');
        char key[96];
        snprintf(key, sizeof key, "switch:%.*s", (int)(colon - sw), sw);
        st = put(out, key, colon + 1, d);
    }
    for (size_t i = 0; st == CP_OK && c->runtime && c->runtime[i]; i++) {
        const char *f = c->runtime[i] + 2, *eq = strchr(f, '=');
        char key[96];
        snprintf(key, sizeof key, "%.*s", (int)(eq - f), f);
        if (strcmp(key, "threads") != 0 && strcmp(key, "batch") != 0)
            return cp_diag_set(d, CP_ERR_UNSUPPORTED, "the tuner does not turn --%s", key);
        st = put(out, key, eq + 1, d);
    }
    return st;
}

/* ---- switch sets: "PassA:off;PassB:off", sorted --------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Switch pass `name` on (remove it from the off set) or off (add it). */
/* switch:PASS=on|off for a whole pass, switch:PASS@NODE=off|on for one
 * instance ("Pass@NODE:off" in the canonical text, after the passes). */
static enum cp_status set_switch(struct cp_convert_config *c, const char *name, bool on,
                                 struct cp_diag *d)
{
    if (strcmp(name, "ALL") == 0) {
        if (!on)
            return cp_diag_set(d, CP_ERR_INVALID, "switch:ALL=off is not a tuning step");
        c->fusion_switches[0] = '\0';
        return CP_OK;
    }
    const char *at = strchr(name, '@');
    char pass[128];
    snprintf(pass, sizeof pass, "%.*s", (int)(at ? (size_t)(at - name) : strlen(name)), name);
    if (cp_pass_index(pass) < 0 || (at && !at[1]))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "switch:%s: no such pass (cannprof convert "
                           "--list-passes lists them)",
                           name);
    char *whole[64], *inst[64];
    size_t nw = 0, ni = 0;
    char copy[sizeof c->fusion_switches];
    snprintf(copy, sizeof copy, "%s", c->fusion_switches);
    char want[256];
    snprintf(want, sizeof want, "%s:off", name);
    for (char *save = NULL, *t = strtok_r(copy, ";", &save); t && nw < 63 && ni < 63;
         t = strtok_r(NULL, ";", &save)) {
        if (strchr(t, '@')) {
            if (strcmp(t, want) != 0)
                inst[ni++] = t;
            continue;
        }
        char *colon = strrchr(t, ':');
        if (colon)
            *colon = '\0';
        if (at || strcmp(t, name) != 0)
            whole[nw++] = t;
    }
    if (!on && at)
        inst[ni++] = want;
    else if (!on)
        whole[nw++] = (char *)name;
    qsort(whole, nw, sizeof *whole, cmp_str);
    qsort(inst, ni, sizeof *inst, cmp_str);
    struct cp_buf b;
    cp_buf_init(&b);
    for (size_t i = 0; i < nw; i++)
        cp_buf_printf(&b, "%s%s:off", i ? ";" : "", whole[i]);
    for (size_t i = 0; i < ni; i++) {
        /* an instance of a pass switched off as a whole says nothing */
        const char *ip = inst[i];
        size_t pl = (size_t)(strchr(ip, '@') - ip);
        bool covered = false;
        for (size_t k = 0; k < nw && !covered; k++)
            covered = strlen(whole[k]) == pl && strncmp(whole[k], ip, pl) == 0;
        if (!covered)
            cp_buf_printf(&b, "%s%s", b.len ? ";" : "", ip);
    }
    enum cp_status st = CP_OK;
    if (cp_buf_status(&b) != CP_OK || b.len >= sizeof c->fusion_switches)
        st = cp_diag_set(d, CP_ERR_INVALID, "too many switches");
    else
        snprintf(c->fusion_switches, sizeof c->fusion_switches, "%s", b.data ? b.data : "");
    cp_buf_release(&b);
    return st;
}

/* keep_dtype=FILE: the list the file holds now (the point keeps the list,
 * not the path); "-" clears it. */
static enum cp_status set_keep_dtype(struct cp_convert_config *c, const char *v, struct cp_diag *d)
{
    if (strcmp(v, "-") == 0) {
        c->keep_dtype_file[0] = c->keep_dtype[0] = '\0';
        return CP_OK;
    }
    enum cp_status st = cp_convert_config_set(c, "keep_dtype", v, d);
    if (st == CP_OK)
        st = cp_convert_config_load_keep_dtype(c, d);
    if (st != CP_OK)
        c->keep_dtype_file[0] = c->keep_dtype[0] = '\0';
    return st;
}

/* int8_nodes=FILE and quant_ranges=FILE: likewise the content; "-"
 * clears. */
static enum cp_status set_int8(struct cp_convert_config *c, const char *k, const char *v,
                               struct cp_diag *d)
{
    bool nodes = strcmp(k, "int8_nodes") == 0;
    char *file = nodes ? c->int8_nodes_file : c->quant_ranges_file;
    char *canon = nodes ? c->int8_nodes : c->quant_ranges;
    if (strcmp(v, "-") == 0) {
        file[0] = canon[0] = '\0';
        return CP_OK;
    }
    enum cp_status st = cp_convert_config_set(c, k, v, d);
    if (st == CP_OK)
        st = nodes ? cp_convert_config_load_int8_nodes(c, d)
                   : cp_convert_config_load_quant_ranges(c, d);
    if (st != CP_OK)
        file[0] = canon[0] = '\0';
    return st;
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    int64_t v;
    if (!cp_parse_i64(s, &v) || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

enum cp_status cp_delta_apply(const struct cp_tune_point *p, const struct cp_delta *dl,
                              struct cp_tune_point *out, struct cp_diag *d)
{
    *out = *p;
    for (size_t i = 0; i < dl->n; i++) {
        const char *k = dl->items[i].key, *v = dl->items[i].value;
        enum cp_status st = CP_OK;
        if (strcmp(k, "keep_dtype") == 0)
            st = set_keep_dtype(&out->cfg, v, d);
        else if (strcmp(k, "int8_nodes") == 0 || strcmp(k, "quant_ranges") == 0)
            st = set_int8(&out->cfg, k, v, d);
        else if (strcmp(k, "layout_regions") == 0 && strcmp(v, "-") == 0)
            out->cfg.layout_regions[0] = '\0';
        else if (strcmp(k, "op_kernels") == 0 && strcmp(v, "-") == 0)
            out->cfg.op_kernels[0] = '\0';
        else if (is_convert_key(k))
            st = cp_convert_config_set(&out->cfg, k, v, d);
        else if (strncmp(k, "switch:", 7) == 0) {
            if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
                st = cp_diag_set(d, CP_ERR_INVALID, "%s=%s: a switch is on or off", k, v);
            else
                st = set_switch(&out->cfg, k + 7, strcmp(v, "on") == 0, d);
        } else if (strcmp(k, "threads") == 0) {
            if (!parse_int(v, 0, 1024, &out->threads))
                st = cp_diag_set(d, CP_ERR_INVALID, "threads=%s: use 0 (all cores) to 1024", v);
        } else if (strcmp(k, "batch") == 0) {
            if (!parse_int(v, 0, 4096, &out->batch))
                st = cp_diag_set(d, CP_ERR_INVALID, "batch=%s: use 1 to 4096", v);
        } else
            st = cp_diag_set(d, CP_ERR_INVALID, "unknown knob '%s'", k);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

void cp_delta_between(const struct cp_tune_point *a, const struct cp_tune_point *b,
                      struct cp_delta *out)
{
    memset(out, 0, sizeof *out);
    if (a->cfg.layout_policy != b->cfg.layout_policy)
        put(out, "layout_policy", cp_layout_policy_name(b->cfg.layout_policy), NULL);
    if (a->cfg.precision_mode != b->cfg.precision_mode)
        put(out, "precision_mode", cp_precision_mode_name(b->cfg.precision_mode), NULL);
    if (a->cfg.buffer_optimize != b->cfg.buffer_optimize)
        put(out, "buffer_optimize", cp_buffer_opt_name(b->cfg.buffer_optimize), NULL);
    if (a->cfg.implmode != b->cfg.implmode)
        put(out, "op_select_implmode", cp_implmode_name(b->cfg.implmode), NULL);
    if (strcmp(a->cfg.layout_regions, b->cfg.layout_regions) != 0) {
        char v[sizeof b->cfg.layout_regions];
        snprintf(v, sizeof v, "%s", b->cfg.layout_regions[0] ? b->cfg.layout_regions : "-");
        for (char *q = v; *q; q++)
            if (*q == '\n')
                *q = ';';
        put(out, "layout_regions", v, NULL);
    }
    if (strcmp(a->cfg.op_kernels, b->cfg.op_kernels) != 0) {
        char v[sizeof b->cfg.op_kernels];
        snprintf(v, sizeof v, "%s", b->cfg.op_kernels[0] ? b->cfg.op_kernels : "-");
        for (char *q = v; *q; q++)
            if (*q == '\n')
                *q = ';';
        put(out, "op_kernels", v, NULL);
    }
    if (strcmp(a->cfg.keep_dtype, b->cfg.keep_dtype) != 0)
        put(out, "keep_dtype",
            !b->cfg.keep_dtype[0]       ? "-"
            : b->cfg.keep_dtype_file[0] ? b->cfg.keep_dtype_file
                                        : "(list without a file)",
            NULL);
    if (strcmp(a->cfg.quant_ranges, b->cfg.quant_ranges) != 0)
        put(out, "quant_ranges",
            !b->cfg.quant_ranges[0]       ? "-"
            : b->cfg.quant_ranges_file[0] ? b->cfg.quant_ranges_file
                                          : "(ranges without a file)",
            NULL);
    if (strcmp(a->cfg.int8_nodes, b->cfg.int8_nodes) != 0)
        put(out, "int8_nodes",
            !b->cfg.int8_nodes[0]       ? "-"
            : b->cfg.int8_nodes_file[0] ? b->cfg.int8_nodes_file
                                        : "(list without a file)",
            NULL);
    if (strcmp(a->cfg.fusion_switches, b->cfg.fusion_switches) != 0) {
        /* instances off in one and not the other ("Pass@NODE:off") */
        for (int side = 0; side < 2; side++) {
            const char *from = side ? a->cfg.fusion_switches : b->cfg.fusion_switches;
            const char *other = side ? b->cfg.fusion_switches : a->cfg.fusion_switches;
            for (const char *p = from; *p;) {
                const char *end = strchr(p, ';');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                const char *at = memchr(p, '@', len);
                bool in_other = false;
                for (const char *q = other; at && *q && !in_other;) {
                    const char *qe = strchr(q, ';');
                    size_t ql = qe ? (size_t)(qe - q) : strlen(q);
                    in_other = ql == len && strncmp(q, p, len) == 0;
                    q += ql + (qe ? 1 : 0);
                }
                if (at && !in_other && len > 4 && len < 90) {
                    char key[96];
                    snprintf(key, sizeof key, "switch:%.*s", (int)(len - 4), p);
                    put(out, key, side ? "on" : "off", NULL);
                }
                p += len + (end ? 1 : 0);
            }
        }
        /* passes off in b but not in a, and on in b but off in a */
        for (size_t i = 0; i < cp_pass_count(); i++) {
            struct cp_pass_desc pd;
            cp_pass_describe(i, &pd);
            bool off_a = cp_convert_config_pass_is_off(&a->cfg, pd.name);
            bool off_b = cp_convert_config_pass_is_off(&b->cfg, pd.name);
            if (off_a != off_b) {
                char key[96];
                snprintf(key, sizeof key, "switch:%s", pd.name);
                put(out, key, off_b ? "off" : "on", NULL);
            }
        }
    }
    if (a->threads != b->threads) {
        char v[16];
        snprintf(v, sizeof v, "%d", b->threads);
        put(out, "threads", v, NULL);
    }
    if (a->batch != b->batch) {
        char v[16];
        snprintf(v, sizeof v, "%d", b->batch);
        put(out, "batch", v, NULL);
    }
}

void cp_tune_point_key(const struct cp_tune_point *p, char out[48])
{
    struct cp_convert_config c = p->cfg;
    c.fusion_switch_file[0] = '\0'; /* the switches themselves are in the id */
    c.keep_dtype_file[0] = '\0';    /* and so is the list */
    c.int8_nodes_file[0] = c.quant_ranges_file[0] = c.calibration_data[0] = '\0';
    c.calibration_samples = 0;
    char id[17];
    cp_convert_config_id(&c, id);
    snprintf(out, 48, "%s/t%d/b%d", id, p->threads, p->batch);
}

json_t *cp_tune_point_to_json(const struct cp_tune_point *p)
{
    struct cp_buf cfg, cmd;
    cp_buf_init(&cfg);
    cp_buf_init(&cmd);
    cp_convert_config_json(&p->cfg, &cfg);
    struct cp_convert_config c = p->cfg;
    if (!c.output[0]) /* a point has no output of its own: name one */
        snprintf(c.output, sizeof c.output, "best");
    cp_convert_config_cmdline(&c, &cmd);
    if (p->threads > 0 || p->batch > 0)
        cp_buf_puts(&cmd, "  # then run with");
    if (p->threads > 0)
        cp_buf_printf(&cmd, " --threads %d", p->threads);
    if (p->batch > 0)
        cp_buf_printf(&cmd, " --batch %d", p->batch);
    json_t *o = json_object();
    bool ok = o && cp_buf_status(&cfg) == CP_OK && cp_buf_status(&cmd) == CP_OK &&
              cp_json_set(o, "config", cp_json_embed(cfg.data ? cfg.data : "{}")) &&
              cp_json_set_int(o, "threads", p->threads) && cp_json_set_int(o, "batch", p->batch) &&
              cp_json_set_str(o, "command", cmd.data ? cmd.data : "");
    cp_buf_release(&cfg);
    cp_buf_release(&cmd);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

void cp_tune_point_json(const struct cp_tune_point *p, struct cp_buf *out)
{
    json_t *o = cp_tune_point_to_json(p);
    if (!o || cp_json_dump(o, false, out) != CP_OK)
        out->failed = true;
    json_decref(o);
}

enum cp_status cp_tune_point_from_json(struct cp_tune_point *p, const char *json, struct cp_diag *d)
{
    json_error_t e;
    json_t *root = json_loads(json ? json : "", 0, &e);
    json_t *cfg = json_object_get(root, "config");
    enum cp_status st = CP_OK;
    if (!json_is_object(cfg))
        st = cp_diag_set(d, CP_ERR_CORRUPT, "a stored tuning point is not {\"config\":...}");
    char *text = st == CP_OK ? cp_json_text(cfg) : NULL;
    cp_convert_config_init(&p->cfg);
    if (st == CP_OK)
        st = text ? cp_convert_config_from_json(&p->cfg, text, d)
                  : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    p->threads = (int)json_integer_value(json_object_get(root, "threads"));
    p->batch = (int)json_integer_value(json_object_get(root, "batch"));
    free(text);
    json_decref(root);
    return st;
}

enum cp_status cp_tune_neighbours(const struct cp_tune_point *p, enum cp_target target, int cores,
                                  struct cp_delta **out, size_t *n, struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    struct cp_delta *list = cp_calloc(16, sizeof *list);
    if (!list)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t k = 0;
    /* precision first: on bf16 hardware the largest single knob */
    put(&list[k], "precision_mode",
        p->cfg.precision_mode == CP_PREC_FORCE_FP32 ? "allow_mix_precision_bf16" : "force_fp32",
        NULL);
    if (p->cfg.keep_dtype[0]) /* the other mode has no use for a node list */
        put(&list[k], "keep_dtype", "-", NULL);
    k++;
    for (int lp = 0; lp < CP_LAYOUT_POLICY_COUNT; lp++)
        if (lp != (int)p->cfg.layout_policy)
            put(&list[k++], "layout_policy", cp_layout_policy_name((enum cp_layout_policy)lp),
                NULL);
    if (p->cfg.fusion_switches[0])
        put(&list[k++], "switch:ALL", "on", NULL);
    int threads = p->threads > 0 ? p->threads : cores;
    if (threads != 1)
        put(&list[k++], "threads", "1", NULL);
    if (threads != cores && cores > 1) {
        char v[16];
        snprintf(v, sizeof v, "%d", cores);
        put(&list[k++], "threads", v, NULL);
    }
    if (target == CP_TARGET_THROUGHPUT) {
        int b = p->batch > 0 ? p->batch : 1;
        for (int nb = b * 2; nb <= 16 && k < 16; nb *= 2) {
            char v[16];
            snprintf(v, sizeof v, "%d", nb);
            put(&list[k++], "batch", v, NULL);
        }
    }
    if (target == CP_TARGET_MEMORY && p->cfg.buffer_optimize != CP_BUF_L2_OPTIMIZE)
        put(&list[k++], "buffer_optimize", "l2_optimize", NULL);
    *out = list;
    *n = k;
    return CP_OK;
}
