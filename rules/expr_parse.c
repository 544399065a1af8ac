/*
 * The expression parser: a lexer that turns the whole text into tokens
 * first (so the node block and string pool can be sized before parsing), then
 * a recursive-descent parser with one function per precedence level, from
 * loosest to tightest:
 *
 *   or      and ('or' | '||') and ...
 *   and     not ('and' | '&&') not ...
 *   not     ('not' | '!') not | cmp
 *   cmp     sum [('<' | '<=' | '>' | '>=' | '==' | '!=') sum]   (no chains)
 *   sum     prod (('+' | '-') prod)...
 *   prod    unary (('*' | '/') unary)...
 *   unary   '-' unary | primary
 *   primary number[unit] | string | true | false | name | name '(' args ')'
 *           | '(' or ')'
 *
 * Types are checked as the tree is built wherever they are known without an
 * environment. cp_expr_check and cp_expr_identifiers live here too, since
 * they only walk the tree.
 */
#include "rules/expr_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Deepest tree, which a long chain `a + b + c + ...` makes without nesting. */
#define MAX_HEIGHT 256

/* ---- tables ---------------------------------------------------------------- */

struct fn_info {
    const char *name;
    enum cp_expr_fn fn;
    int min_args, max_args;
    bool row;
    const char *usage;
};

/* Sorted by name. */
static const struct fn_info FNS[] = {
    {"count", CP_EFN_COUNT, 1, 1, true, "count(condition)"},
    {"known", CP_EFN_KNOWN, 1, 1, false, "known(value)"},
    {"max", CP_EFN_MAX, 1, 2, true, "max(value[, condition])"},
    {"min", CP_EFN_MIN, 1, 2, true, "min(value[, condition])"},
    {"share", CP_EFN_SHARE, 1, 1, true, "share(condition)"},
    {"sum", CP_EFN_SUM, 1, 2, true, "sum(value[, condition])"},
    {"top", CP_EFN_TOP, 1, 2, true, "top(field[, condition])"},
};
#define N_FNS (sizeof FNS / sizeof FNS[0])

const char *cp_expr_fn_name(enum cp_expr_fn fn)
{
    for (size_t i = 0; i < N_FNS; i++)
        if (FNS[i].fn == fn)
            return FNS[i].name;
    return "?";
}

const char *cp_expr_op_text(enum cp_expr_op op)
{
    static const char *const names[] = {
        [CP_EOP_NUM] = "number", [CP_EOP_STR] = "string", [CP_EOP_BOOL] = "boolean",
        [CP_EOP_IDENT] = "name", [CP_EOP_NEG] = "-",      [CP_EOP_NOT] = "not",
        [CP_EOP_ADD] = "+",      [CP_EOP_SUB] = "-",      [CP_EOP_MUL] = "*",
        [CP_EOP_DIV] = "/",      [CP_EOP_LT] = "<",       [CP_EOP_LE] = "<=",
        [CP_EOP_GT] = ">",       [CP_EOP_GE] = ">=",      [CP_EOP_EQ] = "==",
        [CP_EOP_NE] = "!=",      [CP_EOP_AND] = "and",    [CP_EOP_OR] = "or",
        [CP_EOP_CALL] = "call",
    };
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "?";
}

/* ---- parser ---------------------------------------------------------------- */

struct parser {
    struct cp_expr *e;
    const struct cp_expr_token *toks;
    size_t pos;
    int depth;
    const struct fn_info *row_fn; /* the row function whose arguments are being parsed */
    enum cp_status st;
    struct cp_diag *d;
};

static const struct cp_expr_token *peek(const struct parser *p)
{
    return &p->toks[p->pos];
}

static const struct cp_expr_token *take(struct parser *p)
{
    const struct cp_expr_token *t = &p->toks[p->pos];
    if (t->kind != CP_TOK_END)
        p->pos++;
    return t;
}

/* "'xyz'" or "end of expression", for messages. */
static void describe(const struct parser *p, const struct cp_expr_token *t, char *out, size_t cap)
{
    if (t->kind == CP_TOK_END)
        snprintf(out, cap, "end of expression");
    else
        snprintf(out, cap, "'%.*s'", (int)(t->len < 40 ? t->len : 40), p->e->text + t->off);
}

static struct cp_expr_node *fail(struct parser *p, enum cp_status st, int line, int col,
                                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static struct cp_expr_node *fail(struct parser *p, enum cp_status st, int line, int col,
                                 const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->st = cp_expr_errat(p->e, p->d, st, line, col, "%s", msg);
    return NULL;
}

/* A short quote of the source a node covers, for type errors. */
static void quote_node(const struct parser *p, const struct cp_expr_node *n, char *out, size_t cap)
{
    size_t len = n->end > n->off ? n->end - n->off : 0;
    if (len <= 40)
        snprintf(out, cap, "%.*s", (int)len, p->e->text + n->off);
    else
        snprintf(out, cap, "%.37s...", p->e->text + n->off);
}

static struct cp_expr_node *new_node(struct parser *p, enum cp_expr_op op,
                                     const struct cp_expr_token *t)
{
    struct cp_expr *e = p->e;
    if (e->n_nodes >= e->cap_nodes)
        return fail(p, CP_ERR_INTERNAL, t->line, t->col, "internal error: node block full");
    struct cp_expr_node *n = &e->nodes[e->n_nodes++];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->line = t->line;
    n->col = t->col;
    n->height = 1;
    n->sline = t->line;
    n->scol = t->col;
    n->off = t->off;
    n->end = t->off + t->len;
    n->in_row = p->row_fn != NULL;
    n->constant = true;
    return n;
}

static const char *kind_of(enum cp_expr_type t)
{
    switch (t) {
    case CP_EXPR_NUM:
        return "a number";
    case CP_EXPR_STR:
        return "a string";
    case CP_EXPR_BOOL:
        return "a condition";
    case CP_EXPR_ABSENT:
        break;
    }
    return "a value";
}

/* Check an operand's static type against what `what` needs; ABSENT (known
 * only at run time) always passes here and is checked by the evaluator. */
static bool want(struct parser *p, const struct cp_expr_node *x, enum cp_expr_type need,
                 const char *what)
{
    if (x->type == CP_EXPR_ABSENT || x->type == need)
        return true;
    char q[64];
    quote_node(p, x, q, sizeof q);
    fail(p, CP_ERR_INVALID, x->sline, x->scol, "%s needs %s, but `%s` is %s", what, kind_of(need),
         q, kind_of(x->type));
    return false;
}

/* Spans from a's start to b's end. */
static void span(struct cp_expr_node *n, const struct cp_expr_node *a, const struct cp_expr_node *b)
{
    if (a->off < n->off) {
        n->off = a->off;
        n->sline = a->sline;
        n->scol = a->scol;
    }
    if (b && b->end > n->end)
        n->end = b->end;
    else if (a->end > n->end)
        n->end = a->end;
}

static bool set_height(struct parser *p, struct cp_expr_node *n)
{
    int h = n->a ? n->a->height : 0;
    if (n->b && n->b->height > h)
        h = n->b->height;
    n->height = h + 1;
    if (n->height > MAX_HEIGHT) {
        fail(p, CP_ERR_INVALID, n->line, n->col,
             "expression too deep (more than %d operators in a chain); split the rule", MAX_HEIGHT);
        return false;
    }
    return true;
}

static struct cp_expr_node *binary(struct parser *p, enum cp_expr_op op,
                                   const struct cp_expr_token *t, struct cp_expr_node *a,
                                   struct cp_expr_node *b)
{
    char what[32];
    snprintf(what, sizeof what, "'%s'", cp_expr_op_text(op));
    enum cp_expr_type result = CP_EXPR_BOOL;
    switch (op) {
    case CP_EOP_ADD:
    case CP_EOP_SUB:
    case CP_EOP_MUL:
    case CP_EOP_DIV:
        if (!want(p, a, CP_EXPR_NUM, what) || !want(p, b, CP_EXPR_NUM, what))
            return NULL;
        result = CP_EXPR_NUM;
        break;
    case CP_EOP_LT:
    case CP_EOP_LE:
    case CP_EOP_GT:
    case CP_EOP_GE:
        for (int k = 0; k < 2; k++) {
            const struct cp_expr_node *x = k ? b : a;
            if (x->type == CP_EXPR_STR) {
                char q[64];
                quote_node(p, x, q, sizeof q);
                return fail(p, CP_ERR_INVALID, x->sline, x->scol,
                            "%s compares numbers, but `%s` is a string; strings compare only "
                            "with == and !=",
                            what, q);
            }
            if (!want(p, x, CP_EXPR_NUM, what))
                return NULL;
        }
        break;
    case CP_EOP_EQ:
    case CP_EOP_NE:
        if (a->type != CP_EXPR_ABSENT && b->type != CP_EXPR_ABSENT && a->type != b->type)
            return fail(p, CP_ERR_INVALID, t->line, t->col,
                        "%s compares %s with %s; it is never "
                        "true",
                        what, kind_of(a->type), kind_of(b->type));
        break;
    case CP_EOP_AND:
    case CP_EOP_OR:
        if (!want(p, a, CP_EXPR_BOOL, what) || !want(p, b, CP_EXPR_BOOL, what))
            return NULL;
        break;
    default:
        return fail(p, CP_ERR_INTERNAL, t->line, t->col, "internal error: operator %d", (int)op);
    }
    struct cp_expr_node *n = new_node(p, op, t);
    if (!n)
        return NULL;
    n->type = result;
    n->a = a;
    n->b = b;
    span(n, a, b);
    n->constant = a->constant && b->constant;
    return set_height(p, n) ? n : NULL;
}

static bool enter(struct parser *p, const struct cp_expr_token *t)
{
    if (++p->depth > CP_EXPR_MAX_DEPTH) {
        fail(p, CP_ERR_INVALID, t->line, t->col,
             "expression nested too deeply (more than %d levels)", CP_EXPR_MAX_DEPTH);
        return false;
    }
    return true;
}

static struct cp_expr_node *parse_or(struct parser *p);

static const struct fn_info *find_fn(const char *name)
{
    for (size_t i = 0; i < N_FNS; i++)
        if (!strcmp(FNS[i].name, name))
            return &FNS[i];
    return NULL;
}

static struct cp_expr_node *parse_call(struct parser *p, const struct cp_expr_token *name)
{
    const struct fn_info *f = find_fn(name->str);
    if (!f) {
        const char *names[N_FNS];
        for (size_t i = 0; i < N_FNS; i++)
            names[i] = FNS[i].name;
        size_t dist = (size_t)-1;
        const char *best = cp_expr_nearest(name->str, names, N_FNS, &dist);
        char hint[64] = "";
        if (best && cp_expr_close_enough(name->str, dist))
            snprintf(hint, sizeof hint, " (did you mean '%s'?)", best);
        return fail(p, CP_ERR_INVALID, name->line, name->col,
                    "unknown function '%s'%s; functions: count, known, max, min, share, sum, top",
                    name->str, hint);
    }
    if (f->row && p->row_fn)
        return fail(p, CP_ERR_INVALID, name->line, name->col,
                    "%s() cannot be used inside %s(): row functions do not nest", f->name,
                    p->row_fn->name);
    const struct cp_expr_token *open = take(p); /* '(' */
    if (!enter(p, open))
        return NULL;
    const struct fn_info *saved = p->row_fn;
    if (f->row)
        p->row_fn = f;
    struct cp_expr_node *args[3] = {NULL, NULL, NULL};
    int n_args = 0;
    if (peek(p)->kind != CP_TOK_RPAREN) {
        for (;;) {
            struct cp_expr_node *x = parse_or(p);
            if (!x)
                return NULL;
            if (n_args < 3)
                args[n_args] = x;
            n_args++;
            if (peek(p)->kind != CP_TOK_COMMA)
                break;
            take(p);
        }
    }
    p->row_fn = saved;
    const struct cp_expr_token *close = peek(p);
    if (close->kind != CP_TOK_RPAREN) {
        char got[64];
        describe(p, close, got, sizeof got);
        return fail(p, CP_ERR_PARSE, close->line, close->col,
                    "expected ',' or ')' in the arguments of %s() opened at %d:%d, found %s",
                    f->name, open->line, open->col, got);
    }
    take(p);
    p->depth--;
    if (n_args < f->min_args || n_args > f->max_args)
        return fail(p, CP_ERR_INVALID, name->line, name->col,
                    "%s() takes %s%d argument%s, got %d: %s", f->name,
                    f->min_args == f->max_args ? "" : "1 or ", f->max_args,
                    f->max_args == 1 ? "" : "s", n_args, f->usage);
    char what[32];
    snprintf(what, sizeof what, "%s()", f->name);
    switch (f->fn) {
    case CP_EFN_COUNT:
    case CP_EFN_SHARE:
        if (!want(p, args[0], CP_EXPR_BOOL, what))
            return NULL;
        break;
    case CP_EFN_SUM:
    case CP_EFN_MAX:
    case CP_EFN_MIN:
        if (!want(p, args[0], CP_EXPR_NUM, what))
            return NULL;
        break;
    case CP_EFN_TOP:
        if (args[0]->op != CP_EOP_IDENT)
            return fail(p, CP_ERR_INVALID, args[0]->sline, args[0]->scol,
                        "top() groups rows by a field and takes its name, as in top(op_type)");
        break;
    case CP_EFN_KNOWN:
        break;
    }
    if (n_args == 2 && !want(p, args[1], CP_EXPR_BOOL, what))
        return NULL;
    struct cp_expr_node *n = new_node(p, CP_EOP_CALL, name);
    if (!n)
        return NULL;
    n->fn = f->fn;
    n->str = name->str;
    n->n_args = n_args;
    n->a = args[0];
    n->b = n_args > 1 ? args[1] : NULL;
    n->end = close->off + close->len;
    n->type = f->fn == CP_EFN_KNOWN ? CP_EXPR_BOOL : CP_EXPR_NUM;
    n->constant = false;
    return set_height(p, n) ? n : NULL;
}

static struct cp_expr_node *parse_primary(struct parser *p)
{
    const struct cp_expr_token *t = peek(p);
    struct cp_expr_node *n;
    switch (t->kind) {
    case CP_TOK_NUM:
        take(p);
        if (!(n = new_node(p, CP_EOP_NUM, t)))
            return NULL;
        n->num = t->num;
        n->type = CP_EXPR_NUM;
        return n;
    case CP_TOK_STR:
        take(p);
        if (!(n = new_node(p, CP_EOP_STR, t)))
            return NULL;
        n->str = t->str;
        n->type = CP_EXPR_STR;
        return n;
    case CP_TOK_TRUE:
    case CP_TOK_FALSE:
        take(p);
        if (!(n = new_node(p, CP_EOP_BOOL, t)))
            return NULL;
        n->boolean = t->kind == CP_TOK_TRUE;
        n->type = CP_EXPR_BOOL;
        return n;
    case CP_TOK_IDENT:
        take(p);
        if (peek(p)->kind == CP_TOK_LPAREN)
            return parse_call(p, t);
        if (!(n = new_node(p, CP_EOP_IDENT, t)))
            return NULL;
        n->str = t->str;
        n->type = CP_EXPR_ABSENT;
        n->constant = false;
        return n;
    case CP_TOK_LPAREN: {
        take(p);
        if (!enter(p, t))
            return NULL;
        n = parse_or(p);
        if (!n)
            return NULL;
        const struct cp_expr_token *close = peek(p);
        if (close->kind != CP_TOK_RPAREN) {
            char got[64];
            describe(p, close, got, sizeof got);
            return fail(p, CP_ERR_PARSE, close->line, close->col,
                        "expected ')' to close the '(' at %d:%d, found %s", t->line, t->col, got);
        }
        take(p);
        p->depth--;
        return n;
    }
    default: {
        char got[64];
        describe(p, t, got, sizeof got);
        if (p->pos > 0) {
            const struct cp_expr_token *prev = &p->toks[p->pos - 1];
            return fail(p, CP_ERR_PARSE, t->line, t->col, "expected a value after '%.*s', found %s",
                        (int)(prev->len < 40 ? prev->len : 40), p->e->text + prev->off, got);
        }
        return fail(p, CP_ERR_PARSE, t->line, t->col, "expected a value, found %s", got);
    }
    }
}

static struct cp_expr_node *parse_unary(struct parser *p)
{
    const struct cp_expr_token *t = peek(p);
    if (t->kind != CP_TOK_MINUS)
        return parse_primary(p);
    take(p);
    if (!enter(p, t))
        return NULL;
    struct cp_expr_node *x = parse_unary(p);
    if (!x || !want(p, x, CP_EXPR_NUM, "'-'"))
        return NULL;
    p->depth--;
    struct cp_expr_node *n = new_node(p, CP_EOP_NEG, t);
    if (!n)
        return NULL;
    n->a = x;
    span(n, x, NULL);
    n->type = CP_EXPR_NUM;
    n->constant = x->constant;
    return set_height(p, n) ? n : NULL;
}

static struct cp_expr_node *parse_prod(struct parser *p)
{
    struct cp_expr_node *l = parse_unary(p);
    while (l && (peek(p)->kind == CP_TOK_STAR || peek(p)->kind == CP_TOK_SLASH)) {
        const struct cp_expr_token *t = take(p);
        struct cp_expr_node *r = parse_unary(p);
        if (!r)
            return NULL;
        l = binary(p, t->kind == CP_TOK_STAR ? CP_EOP_MUL : CP_EOP_DIV, t, l, r);
    }
    return l;
}

static struct cp_expr_node *parse_sum(struct parser *p)
{
    struct cp_expr_node *l = parse_prod(p);
    while (l && (peek(p)->kind == CP_TOK_PLUS || peek(p)->kind == CP_TOK_MINUS)) {
        const struct cp_expr_token *t = take(p);
        struct cp_expr_node *r = parse_prod(p);
        if (!r)
            return NULL;
        l = binary(p, t->kind == CP_TOK_PLUS ? CP_EOP_ADD : CP_EOP_SUB, t, l, r);
    }
    return l;
}

static bool cmp_op(enum cp_expr_tok k, enum cp_expr_op *op)
{
    switch (k) {
    case CP_TOK_LT:
        *op = CP_EOP_LT;
        return true;
    case CP_TOK_LE:
        *op = CP_EOP_LE;
        return true;
    case CP_TOK_GT:
        *op = CP_EOP_GT;
        return true;
    case CP_TOK_GE:
        *op = CP_EOP_GE;
        return true;
    case CP_TOK_EQ:
        *op = CP_EOP_EQ;
        return true;
    case CP_TOK_NE:
        *op = CP_EOP_NE;
        return true;
    default:
        return false;
    }
}

static struct cp_expr_node *parse_cmp(struct parser *p)
{
    struct cp_expr_node *l = parse_sum(p);
    enum cp_expr_op op;
    if (!l || !cmp_op(peek(p)->kind, &op))
        return l;
    const struct cp_expr_token *t = take(p);
    struct cp_expr_node *r = parse_sum(p);
    if (!r)
        return NULL;
    const struct cp_expr_token *t2 = peek(p);
    enum cp_expr_op op2;
    if (cmp_op(t2->kind, &op2))
        return fail(p, CP_ERR_PARSE, t2->line, t2->col,
                    "comparisons do not chain; write 'a %s b and b %s c'", cp_expr_op_text(op),
                    cp_expr_op_text(op2));
    return binary(p, op, t, l, r);
}

static struct cp_expr_node *parse_not(struct parser *p)
{
    const struct cp_expr_token *t = peek(p);
    if (t->kind != CP_TOK_NOT)
        return parse_cmp(p);
    take(p);
    if (!enter(p, t))
        return NULL;
    struct cp_expr_node *x = parse_not(p);
    if (!x || !want(p, x, CP_EXPR_BOOL, "'not'"))
        return NULL;
    p->depth--;
    struct cp_expr_node *n = new_node(p, CP_EOP_NOT, t);
    if (!n)
        return NULL;
    n->a = x;
    span(n, x, NULL);
    n->type = CP_EXPR_BOOL;
    n->constant = x->constant;
    return set_height(p, n) ? n : NULL;
}

static struct cp_expr_node *parse_and(struct parser *p)
{
    struct cp_expr_node *l = parse_not(p);
    while (l && peek(p)->kind == CP_TOK_AND) {
        const struct cp_expr_token *t = take(p);
        struct cp_expr_node *r = parse_not(p);
        if (!r)
            return NULL;
        l = binary(p, CP_EOP_AND, t, l, r);
    }
    return l;
}

static struct cp_expr_node *parse_or(struct parser *p)
{
    struct cp_expr_node *l = parse_and(p);
    while (l && peek(p)->kind == CP_TOK_OR) {
        const struct cp_expr_token *t = take(p);
        struct cp_expr_node *r = parse_and(p);
        if (!r)
            return NULL;
        l = binary(p, CP_EOP_OR, t, l, r);
    }
    return l;
}

/* The message for a token left over after a complete expression, with a hint
 * for the usual slips. */
static void trailing_error(struct parser *p, const struct cp_expr_token *t)
{
    char got[64];
    describe(p, t, got, sizeof got);
    const struct cp_expr_token *prev = &p->toks[p->pos - 1];
    if (t->kind == CP_TOK_IDENT) {
        if (prev->kind == CP_TOK_NUM && prev->off + prev->len < t->off && cp_expr_is_unit(t->str)) {
            fail(p, CP_ERR_PARSE, t->line, t->col,
                 "unexpected %s; write a unit right after its number, as in %.*s%s", got,
                 (int)prev->len, p->e->text + prev->off, t->str);
            return;
        }
        static const char *const kws[] = {"and", "or", "not"};
        for (size_t k = 0; k < 3; k++)
            if (!strcasecmp(t->str, kws[k])) {
                fail(p, CP_ERR_PARSE, t->line, t->col,
                     "unexpected %s; operators are lower case: '%s'", got, kws[k]);
                return;
            }
    }
    if (t->kind == CP_TOK_RPAREN) {
        fail(p, CP_ERR_PARSE, t->line, t->col, "unexpected ')' with no '(' to close");
        return;
    }
    fail(p, CP_ERR_PARSE, t->line, t->col,
         "unexpected %s after a complete expression; expected an operator or the end", got);
}

/* ---- public ---------------------------------------------------------------- */

void cp_expr_free(struct cp_expr *e)
{
    if (!e)
        return;
    free(e->text);
    free(e->file);
    free(e->nodes);
    free(e->pool);
    free(e);
}

const char *cp_expr_text(const struct cp_expr *e)
{
    return e ? e->text : "";
}

enum cp_expr_type cp_expr_static_type(const struct cp_expr *e)
{
    return e && e->root ? e->root->type : CP_EXPR_ABSENT;
}

enum cp_status cp_expr_parse(const char *text, const char *file, int line, int col,
                             struct cp_expr **out, struct cp_diag *d)
{
    *out = NULL;
    struct cp_expr *e = cp_calloc(1, sizeof *e);
    if (!e)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory parsing an expression");
    enum cp_status st = CP_ERR_NOMEM;
    struct cp_expr_token *toks = NULL;
    if (file && !(e->file = cp_strdup(file)))
        goto out_nomem;
    if (!text)
        text = "";
    size_t len = strnlen(text, CP_EXPR_MAX_LEN + 1);
    if (len > CP_EXPR_MAX_LEN) {
        st = cp_expr_errat(e, d, CP_ERR_INVALID, line, col, "expression is longer than %d bytes",
                           CP_EXPR_MAX_LEN);
        goto out_free;
    }
    if (!(e->text = cp_strdup(text)))
        goto out_nomem;
    /* At most one token per byte, plus the end. */
    e->pool_cap = 2 * len + 2;
    if (!(e->pool = cp_calloc(e->pool_cap, 1)) || !(toks = cp_calloc(len + 1, sizeof *toks)))
        goto out_nomem;

    size_t n_toks = 0;
    if ((st = cp_expr_lex(e, line, col, toks, &n_toks, d)) != CP_OK)
        goto out_free;
    if (n_toks == 1) {
        st = cp_expr_errat(e, d, CP_ERR_PARSE, line, col, "empty expression");
        goto out_free;
    }
    e->cap_nodes = n_toks;
    if (!(e->nodes = cp_calloc(e->cap_nodes, sizeof *e->nodes)))
        goto out_nomem;

    struct parser p = {.e = e, .toks = toks, .st = CP_OK, .d = d};
    e->root = parse_or(&p);
    if (e->root && peek(&p)->kind != CP_TOK_END)
        trailing_error(&p, peek(&p));
    if (p.st != CP_OK) {
        st = p.st;
        goto out_free;
    }
    free(toks);
    *out = e;
    return CP_OK;

out_nomem:
    st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory parsing an expression");
out_free:
    free(toks);
    cp_expr_free(e);
    return st;
}

/* ---- walking the tree ------------------------------------------------------ */

struct check {
    const struct cp_expr *e;
    const char *const *scalars, *const *fields;
    size_t n_scalars, n_fields;
    struct cp_diag *d;
};

static bool in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && !strcmp(s, list[i]))
            return true;
    return false;
}

static enum cp_status unknown_name(const struct check *c, const struct cp_expr_node *n,
                                   bool field_only)
{
    size_t dist = (size_t)-1;
    const char *best = cp_expr_nearest(n->str, c->fields, n->in_row ? c->n_fields : 0, &dist);
    if (!field_only) {
        const char *s = cp_expr_nearest(n->str, c->scalars, c->n_scalars, &dist);
        if (s)
            best = s;
    }
    char hint[192] = "";
    if (best && cp_expr_close_enough(n->str, dist))
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", best);
    return cp_expr_errat(c->e, c->d, CP_ERR_INVALID, n->line, n->col, "unknown %s '%s'%s",
                         field_only ? "field" : "feature", n->str, hint);
}

static enum cp_status check_node(const struct check *c, const struct cp_expr_node *n)
{
    if (!n)
        return CP_OK;
    if (n->op == CP_EOP_IDENT) {
        if (n->in_row && in_list(n->str, c->fields, c->n_fields))
            return CP_OK;
        if (in_list(n->str, c->scalars, c->n_scalars))
            return CP_OK;
        if (!n->in_row && in_list(n->str, c->fields, c->n_fields))
            return cp_expr_errat(
                c->e, c->d, CP_ERR_INVALID, n->line, n->col,
                "'%s' is a field of rows, not a feature of the whole trace; use it inside "
                "share(), count(), top(), sum(), max() or min()",
                n->str);
        return unknown_name(c, n, false);
    }
    if (n->op == CP_EOP_CALL && n->fn == CP_EFN_TOP) {
        if (!in_list(n->a->str, c->fields, c->n_fields)) {
            if (in_list(n->a->str, c->scalars, c->n_scalars))
                return cp_expr_errat(
                    c->e, c->d, CP_ERR_INVALID, n->a->line, n->a->col,
                    "top() groups rows by a field, but '%s' is a feature of the whole "
                    "trace",
                    n->a->str);
            return unknown_name(c, n->a, true);
        }
        return check_node(c, n->b);
    }
    enum cp_status st = check_node(c, n->a);
    return st != CP_OK ? st : check_node(c, n->b);
}

enum cp_status cp_expr_check(const struct cp_expr *e, const char *const *known_scalars, size_t n,
                             const char *const *known_fields, size_t m, struct cp_diag *d)
{
    struct check c = {.e = e,
                      .scalars = known_scalars,
                      .fields = known_fields,
                      .n_scalars = known_scalars ? n : 0,
                      .n_fields = known_fields ? m : 0,
                      .d = d};
    return check_node(&c, e->root);
}

void cp_expr_identifiers(const struct cp_expr *e,
                         void (*fn)(void *ctx, const struct cp_expr_ident *id), void *ctx)
{
    /* Nodes are stored in creation order, which for leaves is source order. */
    for (size_t i = 0; i < e->n_nodes; i++) {
        const struct cp_expr_node *n = &e->nodes[i];
        if (n->op != CP_EOP_IDENT)
            continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = e->nodes[j].op == CP_EOP_IDENT && e->nodes[j].in_row == n->in_row &&
                   !strcmp(e->nodes[j].str, n->str);
        if (!seen) {
            struct cp_expr_ident id = {n->str, n->in_row, n->line, n->col};
            fn(ctx, &id);
        }
    }
}
