/*
 * Constraints: `name op value unit`, comma-separated. The grammar and its
 * reasons are in rules/constraints.h and docs/constraints.md. Parsing is a
 * hand-written scan per item so that every error can quote the item and say
 * what would have been accepted.
 */
#include "rules/constraints.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct unit {
    const char *name;
    double mult;
    bool print; /* used when printing (one spelling per unit) */
};

/* Largest first: printing prefers the largest unit on a tie. */
static const struct unit MEMORY_UNITS[] = {
    {"TB", 1e12, true}, {"TiB", 1099511627776.0, true},
    {"GB", 1e9, true},  {"GiB", 1073741824.0, true},
    {"MB", 1e6, true},  {"MiB", 1048576.0, true},
    {"KB", 1e3, true},  {"KiB", 1024.0, true},
    {"B", 1, true},
};
static const struct unit PERCENT_UNITS[] = {{"%", 1, true}};
static const struct unit TIME_UNITS[] = {
    {"s", 1, true},
    {"ms", 1e-3, true},
    {"us", 1e-6, true},
    {"\xc2\xb5s", 1e-6, false},
    {"\xce\xbcs", 1e-6, false},
    {"ns", 1e-9, true},
};
static const struct unit RATE_UNITS[] = {{"/s", 1, true}, {"ips", 1, false}};

struct kind_info {
    const char *name;
    bool upper; /* an upper limit (<, <=); else a lower limit (>, >=) */
    const struct unit *units;
    size_t n_units;
    const char *unit_help;
    const char *example;
};

#define UNITS_OF(a) a, sizeof a / sizeof a[0]

static const struct kind_info KINDS[CP_CONSTRAINT_KIND_COUNT] = {
    [CP_CONSTRAINT_MEMORY] = {"memory", true, UNITS_OF(MEMORY_UNITS),
                              "B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB "
                              "(powers of 1024)",
                              "memory<3GB"},
    [CP_CONSTRAINT_PRECISION_LOSS] = {"precision_loss", true, UNITS_OF(PERCENT_UNITS),
                                      "% (precision_loss is a percentage)", "precision_loss<1%"},
    [CP_CONSTRAINT_LATENCY] = {"latency", true, UNITS_OF(TIME_UNITS),
                               "ns, us (or \xc2\xb5s), ms, s", "latency<20ms"},
    [CP_CONSTRAINT_THROUGHPUT] = {"throughput", false, UNITS_OF(RATE_UNITS),
                                  "/s or ips (items per second)", "throughput>200/s"},
};

#define KNOWN_LIST "memory, precision_loss, latency, throughput"

void cp_constraints_init(struct cp_constraints *c)
{
    memset(c, 0, sizeof *c);
}

const char *cp_constraint_kind_name(enum cp_constraint_kind k)
{
    return (unsigned)k < CP_CONSTRAINT_KIND_COUNT ? KINDS[k].name : "?";
}

bool cp_constraint_kind_parse(const char *name, enum cp_constraint_kind *out)
{
    for (int k = 0; k < CP_CONSTRAINT_KIND_COUNT; k++)
        if (name && !strcmp(name, KINDS[k].name)) {
            *out = (enum cp_constraint_kind)k;
            return true;
        }
    return false;
}

const char *cp_constraint_op_text(enum cp_constraint_op op)
{
    switch (op) {
    case CP_CONSTRAINT_LT:
        return "<";
    case CP_CONSTRAINT_LE:
        return "<=";
    case CP_CONSTRAINT_GT:
        return ">";
    case CP_CONSTRAINT_GE:
        return ">=";
    }
    return "?";
}

/* ---- parsing ------------------------------------------------------------------ */

struct item {
    const char *origin;
    const char *s; /* the item, trimmed, not NUL-terminated */
    size_t len;
    struct cp_diag *d;
};

static enum cp_status item_error(const struct item *it, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static enum cp_status item_error(const struct item *it, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cp_diag_set(it->d, CP_ERR_USAGE, "%s: '%.*s': %s", it->origin,
                       (int)(it->len < 120 ? it->len : 120), it->s, msg);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
           (c >= '0' && c <= '9');
}

static size_t skip_spaces(const struct item *it, size_t i)
{
    while (i < it->len && is_space(it->s[i]))
        i++;
    return i;
}

static enum cp_status parse_name(const struct item *it, size_t *i, enum cp_constraint_kind *kind)
{
    size_t start = *i;
    while (*i < it->len && is_name_char(it->s[*i]))
        (*i)++;
    size_t n = *i - start;
    if (n == 0)
        return item_error(it, "expected a constraint name first; known: " KNOWN_LIST);
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), it->s + start);
    if (cp_constraint_kind_parse(name, kind))
        return CP_OK;
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (int k = 0; k < CP_CONSTRAINT_KIND_COUNT; k++) {
        size_t dist = cp_edit_distance(name, KINDS[k].name);
        if (dist < best_d) {
            best_d = dist;
            best = KINDS[k].name;
        }
    }
    char hint[64] = "";
    if (best && best_d <= (strlen(name) < 6 ? 2 : strlen(name) / 2))
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", best);
    return item_error(it, "unknown constraint '%s'%s; known: " KNOWN_LIST, name, hint);
}

static enum cp_status parse_op(const struct item *it, size_t *i, enum cp_constraint_kind kind,
                               enum cp_constraint_op *op)
{
    const char *p = it->s + *i;
    size_t left = it->len - *i;
    if (left >= 2 && p[0] == '<' && p[1] == '=') {
        *op = CP_CONSTRAINT_LE;
        *i += 2;
    } else if (left >= 2 && p[0] == '>' && p[1] == '=') {
        *op = CP_CONSTRAINT_GE;
        *i += 2;
    } else if (left >= 1 && p[0] == '<') {
        *op = CP_CONSTRAINT_LT;
        *i += 1;
    } else if (left >= 1 && p[0] == '>') {
        *op = CP_CONSTRAINT_GT;
        *i += 1;
    } else if (left >= 1 && (p[0] == '=' || p[0] == '!')) {
        return item_error(it, "a constraint is a bound: use <, <=, > or >=, as in %s",
                          KINDS[kind].example);
    } else {
        return item_error(it, "expected <, <=, > or >= after '%s', as in %s", KINDS[kind].name,
                          KINDS[kind].example);
    }
    return CP_OK;
}

static enum cp_status parse_number(const struct item *it, size_t *i, enum cp_constraint_kind kind,
                                   enum cp_constraint_op op, double *value)
{
    const char *s = it->s;
    size_t start = *i;
    if (start >= it->len)
        return item_error(it, "missing value after '%s', as in %s", cp_constraint_op_text(op),
                          KINDS[kind].example);
    if (s[start] == '-')
        return item_error(it, "a %s bound cannot be negative", KINDS[kind].name);
    size_t j = start;
    if (j < it->len && s[j] == '+')
        j++;
    size_t digits = 0;
    while (j < it->len && s[j] >= '0' && s[j] <= '9')
        j++, digits++;
    if (j < it->len && s[j] == '.') {
        j++;
        while (j < it->len && s[j] >= '0' && s[j] <= '9')
            j++, digits++;
    }
    if (digits == 0) {
        size_t k = start;
        while (k < it->len && !is_space(s[k]))
            k++;
        return item_error(it, "expected a number after '%s', found '%.*s'; as in %s",
                          cp_constraint_op_text(op), (int)(k - start < 40 ? k - start : 40),
                          s + start, KINDS[kind].example);
    }
    if (j + 1 < it->len && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (s[k] == '+' || s[k] == '-')
            k++;
        if (k < it->len && s[k] >= '0' && s[k] <= '9') {
            while (k < it->len && s[k] >= '0' && s[k] <= '9')
                k++;
            j = k;
        }
    }
    char buf[64];
    if (j - start >= sizeof buf)
        return item_error(it, "the number is too long");
    memcpy(buf, s + start, j - start);
    buf[j - start] = '\0';
    *value = strtod(buf, NULL);
    if (!isfinite(*value))
        return item_error(it, "the number '%s' is out of range", buf);
    *i = j;
    return CP_OK;
}

static enum cp_status parse_unit(const struct item *it, size_t *i, enum cp_constraint_kind kind,
                                 double *value)
{
    const struct kind_info *ki = &KINDS[kind];
    size_t start = skip_spaces(it, *i);
    size_t n = it->len - start;
    const char *u = it->s + start;
    if (n == 0)
        return item_error(it, "%s needs a unit: %s; as in %s", ki->name, ki->unit_help,
                          ki->example);
    for (size_t k = 0; k < ki->n_units; k++)
        if (strlen(ki->units[k].name) == n && !memcmp(ki->units[k].name, u, n)) {
            /* The number was finite; in base units it may not be
             * ("1e308TB"), and an infinite bound is no bound. */
            if (!isfinite(*value * ki->units[k].mult))
                return item_error(it, "the value is out of range once converted from %s",
                                  ki->units[k].name);
            *value *= ki->units[k].mult;
            *i = it->len;
            return CP_OK;
        }
    char word[48];
    snprintf(word, sizeof word, "%.*s", (int)(n < 40 ? n : 40), u);
    const char *hint = NULL;
    for (size_t k = 0; k < ki->n_units && !hint; k++)
        if (strlen(ki->units[k].name) == n && !strncasecmp(ki->units[k].name, u, n))
            hint = ki->units[k].name;
    if (hint)
        return item_error(it,
                          "unknown unit '%s' for %s (did you mean '%s'?); units are "
                          "case-sensitive: %s",
                          word, ki->name, hint, ki->unit_help);
    return item_error(it, "unknown unit '%s' for %s; use %s", word, ki->name, ki->unit_help);
}

/* "[NAME]" after precision_loss: one output. */
static enum cp_status parse_output(const struct item *it, size_t *i, struct cp_constraint *out)
{
    out->output[0] = '\0';
    if (*i >= it->len || it->s[*i] != '[')
        return CP_OK;
    if (out->kind != CP_CONSTRAINT_PRECISION_LOSS)
        return item_error(it, "only precision_loss names an output ([NAME]); %s is the model's",
                          KINDS[out->kind].name);
    size_t start = *i + 1, end = start;
    while (end < it->len && it->s[end] != ']')
        end++;
    if (end >= it->len)
        return item_error(it, "'[' opens an output name that no ']' closes");
    size_t a = start, b = end;
    while (a < b && is_space(it->s[a]))
        a++;
    while (b > a && is_space(it->s[b - 1]))
        b--;
    if (a == b)
        return item_error(it, "an empty output name: write precision_loss[NAME]<0.5%%");
    if (b - a >= sizeof out->output)
        return item_error(it, "the output name is longer than %zu bytes", sizeof out->output - 1);
    memcpy(out->output, it->s + a, b - a);
    out->output[b - a] = '\0';
    *i = end + 1;
    return CP_OK;
}

static enum cp_status parse_item(const struct item *it, struct cp_constraint *out)
{
    size_t i = 0;
    enum cp_status st;
    if ((st = parse_name(it, &i, &out->kind)) != CP_OK)
        return st;
    i = skip_spaces(it, i);
    if ((st = parse_output(it, &i, out)) != CP_OK)
        return st;
    i = skip_spaces(it, i);
    if ((st = parse_op(it, &i, out->kind, &out->op)) != CP_OK)
        return st;
    i = skip_spaces(it, i);
    size_t value_at = i;
    if ((st = parse_number(it, &i, out->kind, out->op, &out->value)) != CP_OK ||
        (st = parse_unit(it, &i, out->kind, &out->value)) != CP_OK)
        return st;
    const struct kind_info *ki = &KINDS[out->kind];
    bool upper_op = out->op == CP_CONSTRAINT_LT || out->op == CP_CONSTRAINT_LE;
    if (upper_op != ki->upper) {
        const char *v = it->s + value_at;
        int vn = (int)(it->len - value_at);
        return item_error(it, "%s is %s limit; write %s%s%.*s or %s%s%.*s", ki->name,
                          ki->upper ? "an upper" : "a lower", ki->name, ki->upper ? "<" : ">", vn,
                          v, ki->name, ki->upper ? "<=" : ">=", vn, v);
    }
    if (out->op == CP_CONSTRAINT_LT && out->value == 0)
        return item_error(it, "this can never hold: nothing is below 0");
    return CP_OK;
}

enum cp_status cp_constraint_parse_value(const char *origin, const char *item, size_t len,
                                         size_t value_at, enum cp_constraint_kind kind,
                                         enum cp_constraint_op op, double *value, struct cp_diag *d)
{
    struct item it = {.origin = origin, .s = item, .len = len, .d = d};
    size_t i = skip_spaces(&it, value_at < len ? value_at : len);
    enum cp_status st = parse_number(&it, &i, kind, op, value);
    if (st == CP_OK)
        st = parse_unit(&it, &i, kind, value);
    return st;
}

enum cp_status cp_constraints_parse_from(const char *origin, const char *text,
                                         struct cp_constraints *out, struct cp_diag *d)
{
    cp_constraints_init(out);
    if (!origin)
        origin = "--constraints";
    if (!text)
        text = "";
    struct cp_constraints c;
    cp_constraints_init(&c);
    /* Where each constraint was given, to quote both items of a duplicate. */
    const char *given_at[CP_CONSTRAINTS_MAX] = {NULL};
    size_t given_len[CP_CONSTRAINTS_MAX] = {0};

    size_t total = strlen(text), pos = 0;
    size_t k = 0;
    while (k < total && (is_space(text[k]) || text[k] == ','))
        k++;
    if (k == total)
        return cp_diag_set(d, CP_ERR_USAGE,
                           "%s: no constraint given; expected e.g. memory<3GB,precision_loss<1%%",
                           origin);
    for (int idx = 1;; idx++) {
        const char *comma = strchr(text + pos, ',');
        size_t end = comma ? (size_t)(comma - text) : total;
        size_t a = pos, b = end;
        while (a < b && is_space(text[a]))
            a++;
        while (b > a && is_space(text[b - 1]))
            b--;
        struct item it = {origin, text + a, b - a, d};
        if (a == b)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "%s: '%.*s': constraint %d is empty; separate constraints with "
                               "single commas, as in memory<3GB,latency<20ms",
                               origin, (int)(total < 160 ? total : 160), text, idx);
        struct cp_constraint one;
        enum cp_status st = parse_item(&it, &one);
        if (st != CP_OK)
            return st;
        for (size_t j = 0; j < c.n; j++)
            if (c.items[j].kind == one.kind && strcmp(c.items[j].output, one.output) == 0)
                return item_error(&it,
                                  "%s%s%s%s is constrained twice (also '%.*s'); give one bound",
                                  KINDS[one.kind].name, one.output[0] ? "[" : "", one.output,
                                  one.output[0] ? "]" : "", (int)given_len[j], given_at[j]);
        if (c.n == CP_CONSTRAINTS_MAX)
            return item_error(&it, "more than %d constraints", CP_CONSTRAINTS_MAX);
        given_at[c.n] = it.s;
        given_len[c.n] = it.len;
        c.items[c.n++] = one;
        if (!comma)
            break;
        pos = end + 1;
    }
    *out = c;
    return CP_OK;
}

enum cp_status cp_constraints_parse(const char *text, struct cp_constraints *out, struct cp_diag *d)
{
    return cp_constraints_parse_from("--constraints", text, out, d);
}

/* ---- checking ------------------------------------------------------------------ */

const struct cp_constraint *cp_constraints_find_output(const struct cp_constraints *c,
                                                       enum cp_constraint_kind kind,
                                                       const char *output)
{
    for (size_t i = 0; i < c->n && i < CP_CONSTRAINTS_MAX; i++)
        if (c->items[i].kind == kind && strcmp(c->items[i].output, output ? output : "") == 0)
            return &c->items[i];
    return NULL;
}

const struct cp_constraint *cp_constraints_find(const struct cp_constraints *c,
                                                enum cp_constraint_kind kind)
{
    return cp_constraints_find_output(c, kind, "");
}

size_t cp_constraints_n_outputs(const struct cp_constraints *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n && i < CP_CONSTRAINTS_MAX; i++)
        n += c->items[i].output[0] != '\0';
    return n;
}

bool cp_constraint_holds(const struct cp_constraint *k, double value)
{
    if (isnan(value))
        return false;
    switch (k->op) {
    case CP_CONSTRAINT_LT:
        return value < k->value;
    case CP_CONSTRAINT_LE:
        return value <= k->value;
    case CP_CONSTRAINT_GT:
        return value > k->value;
    case CP_CONSTRAINT_GE:
        return value >= k->value;
    }
    return false;
}

enum cp_status cp_constraints_check(const struct cp_constraints *c, const char *name, double value,
                                    bool *ok)
{
    enum cp_constraint_kind kind;
    *ok = false;
    if (!cp_constraint_kind_parse(name, &kind))
        return CP_ERR_INVALID;
    const struct cp_constraint *k = cp_constraints_find(c, kind);
    *ok = !k || cp_constraint_holds(k, value);
    return CP_OK;
}

/* ---- printing ------------------------------------------------------------------- */

void cp_constraint_format_value(enum cp_constraint_kind kind, double value, char out[48])
{
    if ((unsigned)kind >= CP_CONSTRAINT_KIND_COUNT) {
        snprintf(out, 48, "%.15g", value);
        return;
    }
    const struct kind_info *ki = &KINDS[kind];
    const struct unit *base = NULL;
    char best[48] = "";
    size_t best_len = (size_t)-1;
    for (size_t k = 0; k < ki->n_units; k++) {
        const struct unit *u = &ki->units[k];
        if (!u->print)
            continue;
        if (u->mult == 1)
            base = u;
        double x = value / u->mult;
        /* Units that make the number smaller than 1 read badly ("0.5GB"). */
        if (!isfinite(value) || fabs(x) < 1)
            continue;
        char num[40];
        snprintf(num, sizeof num, "%.15g", x);
        if (strlen(num) < best_len) {
            best_len = strlen(num);
            snprintf(best, sizeof best, "%s%s", num, u->name);
        }
    }
    if (best_len == (size_t)-1) {
        /* Below 1 of every unit (or 0, or not finite): the smallest unit. */
        const struct unit *u = base;
        for (size_t k = 0; k < ki->n_units && value != 0; k++)
            if (ki->units[k].print && ki->units[k].mult <= u->mult)
                u = &ki->units[k];
        snprintf(best, sizeof best, "%.15g%s", isfinite(value) ? value / u->mult : value, u->name);
    }
    snprintf(out, 48, "%s", best);
}

void cp_constraints_format(const struct cp_constraints *c, struct cp_buf *out)
{
    for (size_t i = 0; i < c->n && i < CP_CONSTRAINTS_MAX; i++) {
        const struct cp_constraint *k = &c->items[i];
        char v[48];
        cp_constraint_format_value(k->kind, k->value, v);
        cp_buf_printf(out, "%s%s%s%s%s%s%s", i ? "," : "", cp_constraint_kind_name(k->kind),
                      k->output[0] ? "[" : "", k->output, k->output[0] ? "]" : "",
                      cp_constraint_op_text(k->op), v);
    }
}
