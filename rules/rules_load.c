/* Rule packs: YAML (libyaml's document API) into struct cp_rule, every
 * expression parsed and checked against the feature names on the way, every
 * error reported as FILE:LINE:COLUMN. */
#include "rules/rules_internal.h"
#include "rules/features.h"

#include <dirent.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

void cp_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static void cause_release(struct cp_root_cause *c)
{
    free(c->name);
    for (size_t i = 0; i < c->n_evidence; i++)
        cp_expr_free(c->evidence[i]);
    free(c->evidence);
    cp_expr_free(c->affected_share);
    cp_expr_free(c->affected_row);
    cp_expr_free(c->share);
    free(c->change_summary);
    cp_strv_free(c->convert);
    cp_strv_free(c->fusion_switches);
    cp_strv_free(c->runtime);
}

void cp_rule_release(struct cp_rule *r)
{
    free(r->name);
    free(r->bottleneck_type);
    free(r->title);
    free(r->file);
    for (size_t i = 0; i < r->n_indicators; i++)
        cp_expr_free(r->indicators[i]);
    free(r->indicators);
    for (size_t i = 0; i < r->n_causes; i++)
        cause_release(&r->causes[i]);
    free(r->causes);
    memset(r, 0, sizeof *r);
}

struct cp_rule_set *cp_rule_set_create(void)
{
    return cp_calloc(1, sizeof(struct cp_rule_set));
}

void cp_rule_set_free(struct cp_rule_set *rs)
{
    if (!rs)
        return;
    for (size_t i = 0; i < rs->n; i++)
        cp_rule_release(&rs->rules[i]);
    free(rs->rules);
    free(rs);
}

size_t cp_rule_set_count(const struct cp_rule_set *rs)
{
    return rs->n;
}

const char *cp_rule_set_name(const struct cp_rule_set *rs, size_t i)
{
    return i < rs->n ? rs->rules[i].name : NULL;
}

const char *cp_rules_default_dir(void)
{
    const char *env = getenv("CANNPROF_RULES");
    return env && *env ? env : CP_SOURCE_DIR "/rules/packs";
}

/* ---- YAML access ------------------------------------------------------------ */

struct loader {
    const char *path;
    yaml_document_t doc;
    struct cp_diag *d;
    const uint8_t *data; /* the file, for the source text of scalars */
    size_t len;
    /* The pack is only for profiles other tools wrote: its changes are
     * for the user's code or conversion, stated, not applied, so a
     * summary alone is a change. */
    bool advice_only;
};

static enum cp_status at(struct loader *L, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum cp_status at(struct loader *L, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cp_diag_set(L->d, CP_ERR_PARSE, "%s:%zu:%zu: %s", L->path,
                       n ? n->start_mark.line + 1 : 1, n ? n->start_mark.column + 1 : 1, msg);
}

static yaml_node_t *node(struct loader *L, int id)
{
    return yaml_document_get_node(&L->doc, id);
}

static const char *kind_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Check a mapping's keys against `allowed` (NULL-terminated) and report the
 * first unknown one with the nearest allowed key. */
static enum cp_status check_keys(struct loader *L, const yaml_node_t *map, const char *what,
                                 const char *const *allowed)
{
    if (map->type != YAML_MAPPING_NODE)
        return at(L, map, "%s must be a mapping, not %s", what, kind_name(map));
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node(L, p->key);
        const char *key = scalar(k);
        if (!key)
            return at(L, k, "%s: keys must be plain names", what);
        const char *best = NULL;
        size_t best_d = (size_t)-1;
        bool ok = false;
        for (const char *const *a = allowed; *a; a++) {
            if (strcmp(*a, key) == 0)
                ok = true;
            size_t dist = cp_edit_distance(key, *a);
            if (dist < best_d)
                best_d = dist, best = *a;
        }
        if (!ok) {
            struct cp_buf list;
            cp_buf_init(&list);
            for (const char *const *a = allowed; *a; a++)
                cp_buf_printf(&list, "%s%s", a == allowed ? "" : ", ", *a);
            enum cp_status st =
                best_d <= 3 ? at(L, k, "%s: unknown key '%s' (did you mean '%s'?)", what, key, best)
                            : at(L, k, "%s: unknown key '%s'; known: %s", what, key,
                                 list.data ? list.data : "");
            cp_buf_release(&list);
            return st;
        }
    }
    return CP_OK;
}

static yaml_node_t *get(struct loader *L, const yaml_node_t *map, const char *key)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const char *k = scalar(node(L, p->key));
        if (k && strcmp(k, key) == 0)
            return node(L, p->value);
    }
    return NULL;
}

static enum cp_status get_string(struct loader *L, const yaml_node_t *map, const char *what,
                                 const char *key, bool required, char **out)
{
    *out = NULL;
    yaml_node_t *v = get(L, map, key);
    if (!v)
        return required ? at(L, map, "%s: missing '%s'", what, key) : CP_OK;
    const char *s = scalar(v);
    if (!s || !*s)
        return at(L, v, "%s: '%s' must be a non-empty string", what, key);
    *out = cp_strdup(s);
    return *out ? CP_OK : cp_diag_set(L->d, CP_ERR_NOMEM, "out of memory");
}

/* A list of strings (a single string is a list of one). */
static enum cp_status get_strings(struct loader *L, const yaml_node_t *map, const char *what,
                                  const char *key, char ***out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    yaml_node_t *v = get(L, map, key);
    if (!v)
        return CP_OK;
    size_t n = v->type == YAML_SEQUENCE_NODE
                   ? (size_t)(v->data.sequence.items.top - v->data.sequence.items.start)
                   : 1;
    char **list = cp_calloc(n + 1, sizeof *list);
    if (!list)
        return cp_diag_set(L->d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item =
            v->type == YAML_SEQUENCE_NODE ? node(L, v->data.sequence.items.start[i]) : v;
        const char *s = scalar(item);
        if (!s || !*s) {
            cp_strv_free(list);
            return at(L, item, "%s: '%s' must be a string or a list of strings", what, key);
        }
        if (!(list[i] = cp_strdup(s))) {
            cp_strv_free(list);
            return cp_diag_set(L->d, CP_ERR_NOMEM, "out of memory");
        }
    }
    *out = list;
    *n_out = n;
    return CP_OK;
}

/* A number, a percentage ("5%" -> 0.05 when `percent_as_fraction`, else 5),
 * from a scalar. */
static enum cp_status get_number(struct loader *L, const yaml_node_t *map, const char *what,
                                 const char *key, bool percent_as_fraction, double *out)
{
    yaml_node_t *v = get(L, map, key);
    if (!v)
        return CP_OK;
    const char *s = scalar(v);
    char *end = NULL;
    double x = s ? strtod(s, &end) : NAN;
    bool pct = end && *end == '%';
    if (!s || end == s || !isfinite(x) || (pct ? end[1] != '\0' : *end != '\0'))
        return at(L, v, "%s: '%s' must be a number (or a percentage like 5%%)", what, key);
    *out = pct && percent_as_fraction ? x / 100.0 : x;
    return CP_OK;
}

/* The byte offset of libyaml's mark index, which counts characters. */
static size_t byte_at(const struct loader *L, size_t chars)
{
    size_t i = 0;
    for (size_t c = 0; i < L->len && c < chars; c++)
        for (i++; i < L->len && (L->data[i] & 0xC0) == 0x80; i++)
            ;
    return i;
}

/* The text to parse for an expression scalar, and the file position of its
 * first character (OUT: *line, *col, 1-based).
 *
 * The value libyaml gives has lost the layout of the file: a plain scalar
 * over several lines is folded into one, a block scalar (| or >) has its
 * indentation stripped. Whitespace means nothing to the expression
 * language, so for those the file's own text is parsed instead, and every
 * position the parser reports is the file's. A quoted scalar is parsed from
 * its value; it starts after the quote, and positions are exact unless it
 * holds escapes or line breaks. Returns NULL on OOM (caller frees). */
static char *expr_source(const struct loader *L, const yaml_node_t *n, int *line, int *col)
{
    *line = (int)n->start_mark.line + 1;
    *col = (int)n->start_mark.column + 1;
    yaml_scalar_style_t st = n->data.scalar.style;
    const char *value = (const char *)n->data.scalar.value;
    if (st == YAML_SINGLE_QUOTED_SCALAR_STYLE || st == YAML_DOUBLE_QUOTED_SCALAR_STYLE) {
        (*col)++;
        return cp_strdup(value);
    }
    size_t a = byte_at(L, n->start_mark.index), b = byte_at(L, n->end_mark.index);
    if (st == YAML_LITERAL_SCALAR_STYLE || st == YAML_FOLDED_SCALAR_STYLE) {
        /* the text starts on the line after the header (| or > and its
         * indicators and comment) */
        while (a < b && L->data[a] != '\n')
            a++;
        if (a < b) {
            a++;
            (*line)++;
            *col = 1;
        }
    }
    /* a block scalar's text ends with its line break: "end of expression"
     * is where the last line ends */
    while (b > a && (L->data[b - 1] == ' ' || L->data[b - 1] == '\t' || L->data[b - 1] == '\n' ||
                     L->data[b - 1] == '\r'))
        b--;
    if (!L->data || a >= b)
        return cp_strdup(value);
    char *text = cp_calloc(b - a + 1, 1);
    if (text)
        memcpy(text, L->data + a, b - a);
    return text;
}

/* Parse and check an expression. `wrap` (may be NULL) wraps the text in a
 * function call, e.g. "share", for row predicates; positions still point
 * into the original text. */
static enum cp_status expr_of(struct loader *L, const yaml_node_t *n, const char *what,
                              const char *wrap, bool condition, struct cp_expr **out)
{
    *out = NULL;
    const char *s = scalar(n);
    if (!s || !*s)
        return at(L, n, "%s must be an expression string, not %s", what,
                  n->type == YAML_SCALAR_NODE ? "empty" : kind_name(n));
    int line, col;
    char *src = expr_source(L, n, &line, &col);
    struct cp_buf text;
    cp_buf_init(&text);
    if (wrap) {
        cp_buf_printf(&text, "%s(%s)", wrap, src ? src : "");
        col -= (int)strlen(wrap) + 1; /* the prefix sits before the real text */
    } else
        cp_buf_puts(&text, src ? src : "");
    if (!src || cp_buf_status(&text) != CP_OK) {
        free(src);
        cp_buf_release(&text);
        return cp_diag_set(L->d, CP_ERR_NOMEM, "out of memory");
    }
    free(src);
    size_t ns, nf;
    const char *const *scalars = cp_features_scalar_names(&ns);
    const char *const *fields = cp_features_field_names(&nf);
    enum cp_status st = cp_expr_parse(text.data, L->path, line, col, out, L->d);
    cp_buf_release(&text);
    if (st == CP_OK)
        st = cp_expr_check(*out, scalars, ns, fields, nf, L->d);
    if (st == CP_OK && condition) {
        enum cp_expr_type t = cp_expr_static_type(*out);
        if (t != CP_EXPR_BOOL && t != CP_EXPR_ABSENT)
            st = at(L, n, "%s must be a condition (a comparison), not a %s", what,
                    cp_expr_type_name(t));
    }
    if (st != CP_OK) {
        cp_expr_free(*out);
        *out = NULL;
    }
    return st;
}

static enum cp_status expr_list(struct loader *L, const yaml_node_t *map, const char *what,
                                const char *key, bool required, struct cp_expr ***out,
                                size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    yaml_node_t *v = get(L, map, key);
    if (!v)
        return required ? at(L, map, "%s: missing '%s'", what, key) : CP_OK;
    if (v->type != YAML_SEQUENCE_NODE)
        return at(L, v, "%s: '%s' must be a list of expressions", what, key);
    size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    if (required && n == 0)
        return at(L, v, "%s: '%s' needs at least one expression", what, key);
    struct cp_expr **list = cp_calloc(n ? n : 1, sizeof *list);
    if (!list)
        return cp_diag_set(L->d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        char w[160];
        snprintf(w, sizeof w, "%s: %s[%zu]", what, key, i);
        st = expr_of(L, node(L, v->data.sequence.items.start[i]), w, NULL, true, &list[i]);
    }
    if (st != CP_OK) {
        for (size_t i = 0; i < n; i++)
            cp_expr_free(list[i]);
        free(list);
        return st;
    }
    *out = list;
    *n_out = n;
    return CP_OK;
}

/* ---- rules --------------------------------------------------------------------- */

static const char *const cause_keys[] = {"affected", "change", "evidence", "gain",
                                         "name",     "risks",  "share",    NULL};
static const char *const change_keys[] = {"convert", "fusion_switches", "runtime", "summary", NULL};
static const char *const gain_keys[] = {"high", "low", "speedup", NULL};
static const char *const risk_keys[] = {"memory", "precision_loss", NULL};

/* Item i of the list under `key` (the value itself when it is one string),
 * for an error that points at the entry at fault. */
static yaml_node_t *item(struct loader *L, const yaml_node_t *map, const char *key, size_t i)
{
    yaml_node_t *v = get(L, map, key);
    if (v && v->type == YAML_SEQUENCE_NODE &&
        i < (size_t)(v->data.sequence.items.top - v->data.sequence.items.start))
        return node(L, v->data.sequence.items.start[i]);
    return v;
}

static enum cp_status load_change(struct loader *L, const yaml_node_t *ch, const char *what,
                                  struct cp_root_cause *c)
{
    enum cp_status st = check_keys(L, ch, what, change_keys);
    size_t n1 = 0, n2 = 0, n3 = 0;
    if (st == CP_OK)
        st = get_string(L, ch, what, "summary", true, &c->change_summary);
    if (st == CP_OK)
        st = get_strings(L, ch, what, "convert", &c->convert, &n1);
    if (st == CP_OK)
        st = get_strings(L, ch, what, "fusion_switches", &c->fusion_switches, &n2);
    if (st == CP_OK)
        st = get_strings(L, ch, what, "runtime", &c->runtime, &n3);
    if (st != CP_OK)
        return st;
    if (n1 + n2 + n3 == 0 && !L->advice_only)
        return at(L, ch,
                  "%s: give at least one concrete change (convert, fusion_switches or "
                  "runtime)",
                  what);
    for (size_t i = 0; i < n1; i++)
        if (strncmp(c->convert[i], "--", 2) != 0 || !strchr(c->convert[i], '='))
            return at(L, item(L, ch, "convert", i), "%s: convert entry '%s' is not a --flag=value",
                      what, c->convert[i]);
    for (size_t i = 0; i < n3; i++)
        if (strncmp(c->runtime[i], "--", 2) != 0 || !strchr(c->runtime[i], '='))
            return at(L, item(L, ch, "runtime", i), "%s: runtime entry '%s' is not a --flag=value",
                      what, c->runtime[i]);
    for (size_t i = 0; i < n2; i++) {
        const char *colon = strrchr(c->fusion_switches[i], ':');
        if (!colon || colon == c->fusion_switches[i] ||
            (strcmp(colon, ":on") != 0 && strcmp(colon, ":off") != 0))
            return at(L, item(L, ch, "fusion_switches", i),
                      "%s: fusion switch '%s' is not PassName:on or PassName:off", what,
                      c->fusion_switches[i]);
    }
    return CP_OK;
}

static enum cp_status load_cause(struct loader *L, const yaml_node_t *n, const char *rule,
                                 struct cp_root_cause *c)
{
    char what[200];
    snprintf(what, sizeof what, "rule '%s': root cause", rule);
    c->speedup = c->speedup_lo = c->speedup_hi = NAN;
    c->risk_precision_loss = c->risk_memory = NAN;
    enum cp_status st = check_keys(L, n, what, cause_keys);
    if (st == CP_OK)
        st = get_string(L, n, what, "name", true, &c->name);
    if (st != CP_OK)
        return st;
    snprintf(what, sizeof what, "rule '%s': root cause '%s'", rule, c->name);
    if ((st = expr_list(L, n, what, "evidence", false, &c->evidence, &c->n_evidence)) != CP_OK)
        return st;
    yaml_node_t *aff = get(L, n, "affected");
    if (aff) {
        char w[240];
        snprintf(w, sizeof w, "%s: affected", what);
        if ((st = expr_of(L, aff, w, "share", false, &c->affected_share)) != CP_OK ||
            (st = expr_of(L, aff, w, "count", false, &c->affected_row)) != CP_OK)
            return st;
    }
    yaml_node_t *sh = get(L, n, "share");
    if (sh) {
        char w[240];
        snprintf(w, sizeof w, "%s: share", what);
        if ((st = expr_of(L, sh, w, NULL, false, &c->share)) != CP_OK)
            return st;
        enum cp_expr_type t = cp_expr_static_type(c->share);
        if (t != CP_EXPR_NUM && t != CP_EXPR_ABSENT)
            return at(L, sh, "%s: 'share' must be a number (a share of the iteration time)", what);
    }
    yaml_node_t *ch = get(L, n, "change");
    if (!ch)
        return at(L, n, "%s: missing 'change'", what);
    if ((st = load_change(L, ch, what, c)) != CP_OK)
        return st;
    yaml_node_t *g = get(L, n, "gain");
    if (!g)
        return at(L, n,
                  "%s: missing 'gain' (speedup: the expected speedup of the affected "
                  "time)",
                  what);
    if ((st = check_keys(L, g, what, gain_keys)) != CP_OK ||
        (st = get_number(L, g, what, "speedup", false, &c->speedup)) != CP_OK ||
        (st = get_number(L, g, what, "low", false, &c->speedup_lo)) != CP_OK ||
        (st = get_number(L, g, what, "high", false, &c->speedup_hi)) != CP_OK)
        return st;
    if (!(c->speedup >= 1.0))
        return at(L, g, "%s: gain needs 'speedup' >= 1 (2 means the affected time halves)", what);
    if (isnan(c->speedup_lo))
        c->speedup_lo = c->speedup;
    if (isnan(c->speedup_hi))
        c->speedup_hi = c->speedup;
    if (!(c->speedup_lo >= 1.0 && c->speedup_lo <= c->speedup && c->speedup <= c->speedup_hi))
        return at(L, g, "%s: gain needs 1 <= low <= speedup <= high", what);
    yaml_node_t *r = get(L, n, "risks");
    if (r &&
        ((st = check_keys(L, r, what, risk_keys)) != CP_OK ||
         (st = get_number(L, r, what, "precision_loss", false, &c->risk_precision_loss)) != CP_OK ||
         (st = get_number(L, r, what, "memory", true, &c->risk_memory)) != CP_OK))
        return st;
    return CP_OK;
}

static const char *const rule_keys[] = {"bottleneck_type", "description", "indicators", "name",
                                        "root_causes",     "targets",     "title",      NULL};

static enum cp_status load_targets(struct loader *L, const yaml_node_t *n, struct cp_rule *r)
{
    yaml_node_t *t = get(L, n, "targets");
    if (!t) {
        r->targets[0] = r->targets[1] = r->targets[2] = true;
        return CP_OK;
    }
    char **list = NULL;
    size_t k = 0;
    enum cp_status st = get_strings(L, n, "targets", "targets", &list, &k);
    for (size_t i = 0; st == CP_OK && i < k; i++) {
        enum cp_target tg;
        if (!cp_target_parse(list[i], &tg))
            st = at(L, t, "rule '%s': unknown target '%s'; use latency, throughput or memory",
                    r->name, list[i]);
        else
            r->targets[tg] = true;
    }
    cp_strv_free(list);
    return st;
}

static enum cp_status load_rule(struct loader *L, const yaml_node_t *n, struct cp_rule *r)
{
    enum cp_status st = check_keys(L, n, "rule", rule_keys);
    if (st == CP_OK)
        st = get_string(L, n, "rule", "name", true, &r->name);
    if (st != CP_OK)
        return st;
    r->line = (int)n->start_mark.line + 1;
    char what[160];
    snprintf(what, sizeof what, "rule '%s'", r->name);
    if ((st = get_string(L, n, what, "bottleneck_type", true, &r->bottleneck_type)) != CP_OK ||
        (st = get_string(L, n, what, "title", false, &r->title)) != CP_OK ||
        (st = load_targets(L, n, r)) != CP_OK ||
        (st = expr_list(L, n, what, "indicators", true, &r->indicators, &r->n_indicators)) != CP_OK)
        return st;
    yaml_node_t *rc = get(L, n, "root_causes");
    if (!rc || rc->type != YAML_SEQUENCE_NODE ||
        rc->data.sequence.items.top == rc->data.sequence.items.start)
        return at(L, rc ? rc : n, "%s: 'root_causes' must be a non-empty list", what);
    size_t k = (size_t)(rc->data.sequence.items.top - rc->data.sequence.items.start);
    r->causes = cp_calloc(k, sizeof *r->causes);
    if (!r->causes)
        return cp_diag_set(L->d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < k; i++) {
        r->n_causes = i + 1;
        if ((st = load_cause(L, node(L, rc->data.sequence.items.start[i]), r->name,
                             &r->causes[i])) != CP_OK)
            return st;
    }
    return CP_OK;
}

static bool has_rule(const struct cp_rule_set *rs, const char *name)
{
    for (size_t i = 0; i < rs->n; i++)
        if (strcmp(rs->rules[i].name, name) == 0)
            return true;
    return false;
}

static enum cp_status load_doc(struct loader *L, struct cp_rule_set *rs, struct cp_rule **out,
                               size_t *n_out)
{
    static const char *const top_keys[] = {"pack", "profiles", "rules", "version", NULL};
    yaml_node_t *root = yaml_document_get_root_node(&L->doc);
    if (!root)
        return cp_diag_set(L->d, CP_ERR_PARSE,
                           "%s:1:1: the file is empty; a rule pack has "
                           "'rules:'",
                           L->path);
    enum cp_status st = check_keys(L, root, "rule pack", top_keys);
    if (st != CP_OK)
        return st;
    /* which runs the pack is for: cannprof's own by default */
    unsigned profiles = 1u << CP_PROFILE_CANNPROF;
    char **pv = NULL;
    size_t npv = 0;
    if ((st = get_strings(L, root, "rule pack", "profiles", &pv, &npv)) != CP_OK)
        return st;
    if (pv) {
        profiles = 0;
        for (size_t i = 0; i < npv && st == CP_OK; i++) {
            enum cp_profile_kind k;
            if (!cp_profile_kind_parse(pv[i], &k))
                st = at(L, item(L, root, "profiles", i),
                        "rule pack: profile '%s' is not one of cannprof, ascend, gpu, onnxruntime, "
                        "chrome",
                        pv[i]);
            else
                profiles |= 1u << k;
        }
        cp_strv_free(pv);
        if (st != CP_OK)
            return st;
    }
    L->advice_only = !(profiles & (1u << CP_PROFILE_CANNPROF));
    yaml_node_t *rules = get(L, root, "rules");
    if (!rules || rules->type != YAML_SEQUENCE_NODE)
        return at(L, rules ? rules : root, "rule pack: 'rules' must be a list of rules");
    size_t n = (size_t)(rules->data.sequence.items.top - rules->data.sequence.items.start);
    struct cp_rule *list = cp_calloc(n ? n : 1, sizeof *list);
    if (!list)
        return cp_diag_set(L->d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        yaml_node_t *rn = node(L, rules->data.sequence.items.start[i]);
        st = load_rule(L, rn, &list[i]);
        list[i].profiles = profiles;
        if (st == CP_OK && !(list[i].file = cp_strdup(L->path)))
            st = cp_diag_set(L->d, CP_ERR_NOMEM, "out of memory");
        if (st != CP_OK)
            break;
        bool dup = has_rule(rs, list[i].name);
        for (size_t j = 0; j < i && !dup; j++)
            dup = strcmp(list[j].name, list[i].name) == 0;
        if (dup)
            st = at(L, rn, "rule '%s' is defined twice", list[i].name);
    }
    if (st != CP_OK) {
        for (size_t i = 0; i < n; i++)
            cp_rule_release(&list[i]);
        free(list);
        return st;
    }
    *out = list;
    *n_out = n;
    return CP_OK;
}

enum cp_status cp_rule_set_load_file(struct cp_rule_set *rs, const char *path, struct cp_diag *d)
{
    uint8_t *data = NULL;
    size_t len = 0;
    enum cp_status st = cp_file_read(path, &data, &len, d);
    if (st != CP_OK)
        return st;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        free(data);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for the YAML parser");
    }
    yaml_parser_set_input_string(&p, data, len);
    struct loader L = {.path = path, .d = d, .data = data, .len = len};
    if (!yaml_parser_load(&p, &L.doc)) {
        st = cp_diag_set(d, CP_ERR_PARSE, "%s:%zu:%zu: YAML: %s%s%s", path, p.problem_mark.line + 1,
                         p.problem_mark.column + 1, p.problem ? p.problem : "syntax error",
                         p.context ? " " : "", p.context ? p.context : "");
        yaml_parser_delete(&p);
        free(data);
        return st;
    }
    struct cp_rule *list = NULL;
    size_t n = 0;
    st = load_doc(&L, rs, &list, &n);
    yaml_document_delete(&L.doc);
    yaml_parser_delete(&p);
    free(data);
    if (st != CP_OK)
        return st;
    if (rs->n + n > rs->cap) {
        size_t cap = rs->cap ? rs->cap : 16;
        while (cap < rs->n + n)
            cap *= 2;
        struct cp_rule *grown = cp_realloc_array(rs->rules, cap, sizeof *grown);
        if (!grown) {
            for (size_t i = 0; i < n; i++)
                cp_rule_release(&list[i]);
            free(list);
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        }
        rs->rules = grown;
        rs->cap = cap;
    }
    if (n > 0) /* an empty pack into an empty set: rs->rules is still NULL */
        memcpy(rs->rules + rs->n, list, n * sizeof *list);
    rs->n += n;
    free(list);
    return CP_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Add the *.yaml names of folder `dir` (prefixed with `sub/` when sub is
 * not NULL) to names[n]; with sub NULL, also those of its subfolders one
 * level down (rules/packs/ascend/, rules/packs/gpu/). */
static enum cp_status list_packs(const char *dir, const char *sub, char ***names, size_t *n,
                                 size_t *cap, struct cp_diag *d)
{
    char path[1200];
    snprintf(path, sizeof path, "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
    DIR *dh = opendir(path);
    if (!dh)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot open the rules folder", path);
    enum cp_status st = CP_OK;
    for (struct dirent *e; (e = readdir(dh)) && st == CP_OK;) {
        if (e->d_name[0] == '.')
            continue;
        bool yaml = cp_path_has_suffix(e->d_name, ".yaml") || cp_path_has_suffix(e->d_name, ".yml");
        if (!yaml) {
            struct cp_buf child;
            cp_buf_init(&child);
            cp_buf_printf(&child, "%s/%s", path, e->d_name);
            struct stat sb;
            if (!sub && cp_buf_status(&child) == CP_OK && stat(child.data, &sb) == 0 &&
                S_ISDIR(sb.st_mode))
                st = list_packs(dir, e->d_name, names, n, cap, d);
            cp_buf_release(&child);
            continue;
        }
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 16;
            char **g = cp_realloc_array(*names, *cap, sizeof *g);
            if (!g) {
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            *names = g;
        }
        struct cp_buf b;
        cp_buf_init(&b);
        cp_buf_printf(&b, "%s%s%s", sub ? sub : "", sub ? "/" : "", e->d_name);
        if (cp_buf_status(&b) != CP_OK)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        else
            (*names)[(*n)++] = cp_buf_steal(&b);
        cp_buf_release(&b);
    }
    closedir(dh);
    return st;
}

enum cp_status cp_rule_set_load_dir(struct cp_rule_set *rs, const char *dir, struct cp_diag *d)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    enum cp_status st = list_packs(dir, NULL, &names, &n, &cap, d);
    if (st == CP_OK && n == 0)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: no rule packs (*.yaml) in the folder", dir);
    if (st == CP_OK)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        struct cp_buf p;
        cp_buf_init(&p);
        cp_buf_printf(&p, "%s/%s", dir, names[i]);
        st = cp_buf_status(&p) == CP_OK ? cp_rule_set_load_file(rs, p.data, d)
                                        : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        cp_buf_release(&p);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return st;
}
