/*
 * The expression lexer: characters to tokens, with units folded into
 * numbers (85% is the number 0.85 from here on), names and string contents
 * copied into the expression's pool, and line:column kept for every token.
 * Also the small shared helpers of the expression files: messages with a
 * location, name suggestions.
 */
#include "rules/expr_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct unit {
    const char *name;
    double mult;
};

/* Units written right after a number. Bytes: K/M/G/T are powers of 1000,
 * Ki/Mi/Gi/Ti powers of 1024 (IEC); times in seconds; rates per second. */
static const struct unit UNITS[] = {
    {"%", 0.01},
    {"ns", 1e-9},
    {"us", 1e-6},
    {"\xc2\xb5s", 1e-6},
    {"\xce\xbcs", 1e-6},
    {"ms", 1e-3},
    {"s", 1},
    {"B", 1},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"KiB", 1024.0},
    {"MiB", 1048576.0},
    {"GiB", 1073741824.0},
    {"TiB", 1099511627776.0},
    {"B/s", 1},
    {"KB/s", 1e3},
    {"MB/s", 1e6},
    {"GB/s", 1e9},
    {"TB/s", 1e12},
    {"KiB/s", 1024.0},
    {"MiB/s", 1048576.0},
    {"GiB/s", 1073741824.0},
    {"TiB/s", 1099511627776.0},
    {"FLOPS", 1},
    {"KFLOPS", 1e3},
    {"MFLOPS", 1e6},
    {"GFLOPS", 1e9},
    {"TFLOPS", 1e12},
};
#define N_UNITS (sizeof UNITS / sizeof UNITS[0])
#define UNIT_LIST                                                                                  \
    "% ns us \xc2\xb5s ms s B KB MB GB TB KiB MiB GiB TiB (and each byte unit with /s) "           \
    "FLOPS KFLOPS MFLOPS GFLOPS TFLOPS"

const char *cp_expr_type_name(enum cp_expr_type t)
{
    switch (t) {
    case CP_EXPR_ABSENT:
        return "absent";
    case CP_EXPR_NUM:
        return "number";
    case CP_EXPR_STR:
        return "string";
    case CP_EXPR_BOOL:
        return "boolean";
    }
    return "absent";
}

const char *cp_expr_nearest(const char *s, const char *const *names, size_t n, size_t *best_d)
{
    const char *best = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!names[i])
            continue;
        size_t dist = cp_edit_distance(s, names[i]);
        if (dist < *best_d) {
            *best_d = dist;
            best = names[i];
        }
    }
    return best;
}

bool cp_expr_close_enough(const char *s, size_t dist)
{
    size_t len = strlen(s);
    return dist <= (len < 6 ? 2 : len / 2);
}

/* ---- lexer ----------------------------------------------------------------- */

struct lexer {
    struct cp_expr *e;
    const char *s;
    size_t i;
    int line, col;
    struct cp_diag *d;
};

void cp_expr_where_at(const struct cp_expr *e, int line, int col, char *out, size_t cap)
{
    snprintf(out, cap, "%s:%d:%d: ", e->file ? e->file : "<expression>", line, col);
}

void cp_expr_where(const struct cp_expr *e, const struct cp_expr_node *n, char *out, size_t cap)
{
    cp_expr_where_at(e, n->line, n->col, out, cap);
}

enum cp_status cp_expr_errat(const struct cp_expr *e, struct cp_diag *d, enum cp_status st,
                             int line, int col, const char *fmt, ...)
{
    char where[512], msg[768];
    cp_expr_where_at(e, line, col, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cp_diag_set(d, st, "%s%s", where, msg);
}

/* Advance one byte, keeping line and column (columns count characters: a
 * UTF-8 continuation byte does not move the column). */
static void adv(struct lexer *lx)
{
    unsigned char c = (unsigned char)lx->s[lx->i];
    if (c == '\0')
        return;
    lx->i++;
    if (c == '\n') {
        lx->line++;
        lx->col = 1;
    } else if ((c & 0xC0) != 0x80) {
        lx->col++;
    }
}

static bool is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool is_name_char(int c)
{
    return is_alpha(c) || is_digit(c) || c == '.';
}

static char *pool_add(struct cp_expr *e, const char *p, size_t n)
{
    /* The pool is sized for the whole text plus a NUL per token: no overflow. */
    if (e->pool_len + n + 1 > e->pool_cap)
        return NULL;
    char *dst = e->pool + e->pool_len;
    memcpy(dst, p, n);
    dst[n] = '\0';
    e->pool_len += n + 1;
    return dst;
}

/* A printable rendering of the character at s (for "unexpected character"). */
static void show_char(const char *s, char out[16])
{
    unsigned char c = (unsigned char)s[0];
    if (c >= 0x20 && c < 0x7F) {
        snprintf(out, 16, "%c", c);
    } else if (c >= 0xC2 && c <= 0xF4 && (((unsigned char)s[1]) & 0xC0) == 0x80) {
        size_t n = 1;
        while (n < 4 && (((unsigned char)s[n]) & 0xC0) == 0x80)
            n++;
        snprintf(out, 16, "%.*s", (int)n, s);
    } else {
        snprintf(out, 16, "\\x%02x", c);
    }
}

static enum cp_status lex_unit(struct lexer *lx, struct cp_expr_token *t, int line, int col)
{
    const char *s = lx->s;
    size_t start = lx->i;
    if (s[lx->i] == '%') {
        adv(lx);
    } else {
        if (!strncmp(s + lx->i, "\xc2\xb5", 2) || !strncmp(s + lx->i, "\xce\xbc", 2)) {
            adv(lx);
            adv(lx);
        }
        while (is_alpha(s[lx->i]) || is_digit(s[lx->i]))
            adv(lx);
    }
    size_t n = lx->i - start;
    /* A byte unit followed by "/s" is a rate, unless the "s" starts a name. */
    if (s[lx->i] == '/' && s[lx->i + 1] == 's' && !is_name_char(s[lx->i + 2]) && n > 0 &&
        s[start + n - 1] == 'B') {
        adv(lx);
        adv(lx);
        n += 2;
    }
    for (size_t k = 0; k < N_UNITS; k++) {
        if (strlen(UNITS[k].name) == n && !memcmp(UNITS[k].name, s + start, n)) {
            t->num *= UNITS[k].mult;
            return CP_OK;
        }
    }
    char word[40];
    snprintf(word, sizeof word, "%.*s", (int)(n < 32 ? n : 32), s + start);
    const char *hint = NULL;
    for (size_t k = 0; k < N_UNITS && !hint; k++)
        if (strlen(UNITS[k].name) == n && !strncasecmp(UNITS[k].name, word, n))
            hint = UNITS[k].name;
    if (hint)
        return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, line, col,
                             "unknown unit '%s' (did you mean '%s'?); units are case-sensitive",
                             word, hint);
    return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, line, col, "unknown unit '%s'; units: %s",
                         word, UNIT_LIST);
}

static enum cp_status lex_number(struct lexer *lx, struct cp_expr_token *t)
{
    const char *s = lx->s;
    size_t start = lx->i;
    while (is_digit(s[lx->i]))
        adv(lx);
    if (s[lx->i] == '.' && is_digit(s[lx->i + 1])) {
        adv(lx);
        while (is_digit(s[lx->i]))
            adv(lx);
    }
    if ((s[lx->i] == 'e' || s[lx->i] == 'E') &&
        (is_digit(s[lx->i + 1]) ||
         ((s[lx->i + 1] == '+' || s[lx->i + 1] == '-') && is_digit(s[lx->i + 2])))) {
        adv(lx);
        adv(lx);
        while (is_digit(s[lx->i]))
            adv(lx);
    }
    size_t n = lx->i - start;
    char buf[64];
    if (n >= sizeof buf)
        return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, t->line, t->col,
                             "number '%.20s...' is too long", s + start);
    memcpy(buf, s + start, n);
    buf[n] = '\0';
    t->num = strtod(buf, NULL);
    if (!isfinite(t->num))
        return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, t->line, t->col,
                             "number '%s' is out of range", buf);
    if (s[lx->i] == '.' && !is_digit(s[lx->i + 1]))
        return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, lx->line, lx->col,
                             "a '.' in a number must be followed by digits, as in 1.5");
    if (s[lx->i] == '%' || is_alpha(s[lx->i]) || !strncmp(s + lx->i, "\xc2\xb5", 2) ||
        !strncmp(s + lx->i, "\xce\xbc", 2)) {
        enum cp_status st = lex_unit(lx, t, lx->line, lx->col);
        if (st != CP_OK)
            return st;
        if (!isfinite(t->num))
            return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, t->line, t->col,
                                 "number is out of range");
    }
    return CP_OK;
}

static enum cp_status lex_string(struct lexer *lx, struct cp_expr_token *t)
{
    const char *s = lx->s;
    char quote = s[lx->i];
    adv(lx);
    /* Contents go straight into the pool; escapes only shrink them. */
    char *dst = lx->e->pool + lx->e->pool_len;
    size_t n = 0;
    for (;;) {
        char c = s[lx->i];
        if (c == '\0' || c == '\n')
            return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, t->line, t->col,
                                 "unterminated string: no closing %c on this line", quote);
        if (c == quote) {
            adv(lx);
            break;
        }
        if (c == '\\') {
            char nx = s[lx->i + 1];
            if (nx != '\\' && nx != '"' && nx != '\'') {
                char shown[16];
                show_char(s + lx->i + 1, shown);
                return cp_expr_errat(
                    lx->e, lx->d, CP_ERR_PARSE, lx->line, lx->col,
                    "unknown escape '\\%s' in a string; only \\\\, \\\" and \\' are "
                    "escapes",
                    nx ? shown : "");
            }
            adv(lx);
            c = nx;
        }
        dst[n++] = c;
        adv(lx);
    }
    dst[n] = '\0';
    t->str = dst;
    lx->e->pool_len += n + 1;
    return CP_OK;
}

static const struct {
    const char *text;
    enum cp_expr_tok kind;
} PUNCT[] = {
    {"<=", CP_TOK_LE},  {">=", CP_TOK_GE},    {"==", CP_TOK_EQ},    {"!=", CP_TOK_NE},
    {"&&", CP_TOK_AND}, {"||", CP_TOK_OR},    {"<", CP_TOK_LT},     {">", CP_TOK_GT},
    {"!", CP_TOK_NOT},  {"(", CP_TOK_LPAREN}, {")", CP_TOK_RPAREN}, {",", CP_TOK_COMMA},
    {"+", CP_TOK_PLUS}, {"-", CP_TOK_MINUS},  {"*", CP_TOK_STAR},   {"/", CP_TOK_SLASH},
};

static enum cp_status lex_one(struct lexer *lx, struct cp_expr_token *t)
{
    const char *s = lx->s;
    t->line = lx->line;
    t->col = lx->col;
    t->off = lx->i;
    char c = s[lx->i];
    enum cp_status st = CP_OK;
    if (c == '\0') {
        t->kind = CP_TOK_END;
    } else if (is_digit(c) || (c == '.' && is_digit(s[lx->i + 1]))) {
        t->kind = CP_TOK_NUM;
        st = lex_number(lx, t);
    } else if (c == '"' || c == '\'') {
        t->kind = CP_TOK_STR;
        st = lex_string(lx, t);
    } else if (is_alpha(c)) {
        size_t start = lx->i;
        while (is_name_char(s[lx->i]))
            adv(lx);
        size_t n = lx->i - start;
        t->kind = CP_TOK_IDENT;
        static const struct {
            const char *w;
            enum cp_expr_tok k;
        } kw[] = {{"and", CP_TOK_AND},
                  {"or", CP_TOK_OR},
                  {"not", CP_TOK_NOT},
                  {"true", CP_TOK_TRUE},
                  {"false", CP_TOK_FALSE}};
        for (size_t k = 0; k < sizeof kw / sizeof kw[0]; k++)
            if (strlen(kw[k].w) == n && !memcmp(kw[k].w, s + start, n))
                t->kind = kw[k].k;
        if (t->kind == CP_TOK_IDENT)
            t->str = pool_add(lx->e, s + start, n);
    } else {
        for (size_t k = 0; k < sizeof PUNCT / sizeof PUNCT[0]; k++) {
            size_t n = strlen(PUNCT[k].text);
            if (!strncmp(s + lx->i, PUNCT[k].text, n)) {
                t->kind = PUNCT[k].kind;
                for (size_t j = 0; j < n; j++)
                    adv(lx);
                t->len = lx->i - t->off;
                return CP_OK;
            }
        }
        if (c == '=')
            return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, t->line, t->col,
                                 "'=' is not an operator; compare with '=='");
        if (c == '&' || c == '|')
            return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, t->line, t->col,
                                 "'%c' is not an operator; use '%c%c' or '%s'", c, c, c,
                                 c == '&' ? "and" : "or");
        if (c == '%')
            return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, t->line, t->col,
                                 "'%%' must follow a number directly, as in 85%%");
        char shown[16];
        show_char(s + lx->i, shown);
        return cp_expr_errat(lx->e, lx->d, CP_ERR_PARSE, t->line, t->col,
                             "unexpected character '%s'", shown);
    }
    t->len = lx->i - t->off;
    return st;
}

static void skip_space(struct lexer *lx)
{
    while (lx->s[lx->i] == ' ' || lx->s[lx->i] == '\t' || lx->s[lx->i] == '\n' ||
           lx->s[lx->i] == '\r')
        adv(lx);
}

enum cp_status cp_expr_lex(struct cp_expr *e, int line, int col, struct cp_expr_token *toks,
                           size_t *n_toks, struct cp_diag *d)
{
    struct lexer lx = {.e = e, .s = e->text, .line = line, .col = col, .d = d};
    size_t n = 0;
    *n_toks = 0;
    for (;;) {
        skip_space(&lx);
        struct cp_expr_token *t = &toks[n++];
        enum cp_status st = lex_one(&lx, t);
        if (st != CP_OK)
            return st;
        if (t->kind == CP_TOK_END)
            break;
    }
    *n_toks = n;
    return CP_OK;
}

bool cp_expr_is_unit(const char *name)
{
    for (size_t k = 0; k < N_UNITS; k++)
        if (!strcmp(UNITS[k].name, name))
            return true;
    return false;
}
