/*
 * The expression evaluator and the margin of a condition.
 *
 * Evaluation is a walk of the tree with three-valued logic: ABSENT flows
 * through arithmetic and comparisons, and `and`/`or` decide without it when
 * the other side already does (false and ABSENT = false, true or ABSENT =
 * true). Row functions walk the environment's rows with identifiers resolved
 * against the row first. The margin walk shares the operators' code with
 * evaluation, so each node is evaluated once whichever is asked for.
 */
#include "rules/expr_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ev {
    const struct cp_expr *e;
    const struct cp_expr_env *env;
    struct cp_diag *d;
    bool in_row;
    size_t row;
};

static void set_absent(struct cp_expr_value *v)
{
    memset(v, 0, sizeof *v);
    v->type = CP_EXPR_ABSENT;
}

static void set_num(struct cp_expr_value *v, double x)
{
    set_absent(v);
    if (!isnan(x)) {
        v->type = CP_EXPR_NUM;
        v->num = x;
    }
}

static void set_bool(struct cp_expr_value *v, bool b)
{
    set_absent(v);
    v->type = CP_EXPR_BOOL;
    v->boolean = b;
}

static const char *a_kind(enum cp_expr_type t)
{
    switch (t) {
    case CP_EXPR_NUM:
        return "a number";
    case CP_EXPR_STR:
        return "a string";
    case CP_EXPR_BOOL:
        return "true/false";
    case CP_EXPR_ABSENT:
        break;
    }
    return "absent";
}

/* "FILE:L:C: <what> needs <need>, but `<source of n>` is <kind>". */
static enum cp_status type_error(const struct ev *c, const struct cp_expr_node *n, const char *what,
                                 const char *need, enum cp_expr_type got)
{
    char where[512];
    cp_expr_where_at(c->e, n->sline, n->scol, where, sizeof where);
    size_t len = n->end > n->off ? n->end - n->off : 0;
    return cp_diag_set(c->d, CP_ERR_INVALID, "%s%s needs %s, but `%.*s`%s is %s%s", where, what,
                       need, (int)(len < 40 ? len : 40), c->e->text + n->off, len > 40 ? "..." : "",
                       a_kind(got), c->in_row ? " (in a row)" : "");
}

/* Accept ABSENT or `need`; anything else is a type error. */
static enum cp_status need_type(const struct ev *c, const struct cp_expr_node *n,
                                const struct cp_expr_value *v, enum cp_expr_type need,
                                const char *what)
{
    if (v->type == CP_EXPR_ABSENT || v->type == need)
        return CP_OK;
    return type_error(c, n, what, need == CP_EXPR_NUM ? "a number" : "true/false", v->type);
}

/* A value from the environment, made safe: NaN and NULL strings are ABSENT. */
static void normalize(struct cp_expr_value *v)
{
    switch (v->type) {
    case CP_EXPR_NUM:
        if (isnan(v->num))
            set_absent(v);
        break;
    case CP_EXPR_STR:
        if (!v->str)
            set_absent(v);
        break;
    case CP_EXPR_BOOL:
        break;
    case CP_EXPR_ABSENT:
    default:
        set_absent(v);
        break;
    }
}

static enum cp_status lookup(const struct ev *c, const struct cp_expr_node *n,
                             struct cp_expr_value *out)
{
    const struct cp_expr_env *env = c->env;
    set_absent(out);
    if (c->in_row && env->field && env->field(env->ctx, c->row, n->str, out)) {
        normalize(out);
        return CP_OK;
    }
    set_absent(out);
    if (env->scalar && env->scalar(env->ctx, n->str, out)) {
        normalize(out);
        return CP_OK;
    }
    set_absent(out);
    char where[512];
    cp_expr_where(c->e, n, where, sizeof where);
    return cp_diag_set(c->d, CP_ERR_INVALID, "%sunknown %s '%s'", where,
                       c->in_row ? "field or feature" : "feature", n->str);
}

/* ---- operators ------------------------------------------------------------- */

static enum cp_status arith(const struct ev *c, const struct cp_expr_node *n,
                            const struct cp_expr_value *a, const struct cp_expr_value *b,
                            struct cp_expr_value *out)
{
    set_absent(out);
    const char *what = cp_expr_op_text(n->op);
    char w[8];
    snprintf(w, sizeof w, "'%s'", what);
    enum cp_status st;
    if ((st = need_type(c, n->a, a, CP_EXPR_NUM, w)) != CP_OK ||
        (st = need_type(c, n->b, b, CP_EXPR_NUM, w)) != CP_OK)
        return st;
    if (a->type == CP_EXPR_ABSENT || b->type == CP_EXPR_ABSENT)
        return CP_OK;
    switch (n->op) {
    case CP_EOP_ADD:
        set_num(out, a->num + b->num);
        break;
    case CP_EOP_SUB:
        set_num(out, a->num - b->num);
        break;
    case CP_EOP_MUL:
        set_num(out, a->num * b->num);
        break;
    default:
        /* x / 0 has no meaningful value: a ratio over an empty denominator. */
        if (b->num != 0)
            set_num(out, a->num / b->num);
        break;
    }
    return CP_OK;
}

static enum cp_status compare(const struct ev *c, const struct cp_expr_node *n,
                              const struct cp_expr_value *a, const struct cp_expr_value *b,
                              struct cp_expr_value *out)
{
    set_absent(out);
    char w[8];
    snprintf(w, sizeof w, "'%s'", cp_expr_op_text(n->op));
    if (n->op == CP_EOP_EQ || n->op == CP_EOP_NE) {
        if (a->type == CP_EXPR_ABSENT || b->type == CP_EXPR_ABSENT)
            return CP_OK;
        if (a->type != b->type) {
            char where[512];
            cp_expr_where(c->e, n, where, sizeof where);
            return cp_diag_set(c->d, CP_ERR_INVALID, "%s%s compares %s with %s%s", where, w,
                               a_kind(a->type), a_kind(b->type), c->in_row ? " (in a row)" : "");
        }
        bool eq = a->type == CP_EXPR_NUM   ? a->num == b->num
                  : a->type == CP_EXPR_STR ? strcmp(a->str, b->str) == 0
                                           : a->boolean == b->boolean;
        set_bool(out, n->op == CP_EOP_EQ ? eq : !eq);
        return CP_OK;
    }
    enum cp_status st;
    if ((st = need_type(c, n->a, a, CP_EXPR_NUM, w)) != CP_OK ||
        (st = need_type(c, n->b, b, CP_EXPR_NUM, w)) != CP_OK)
        return st;
    if (a->type == CP_EXPR_ABSENT || b->type == CP_EXPR_ABSENT)
        return CP_OK;
    bool r = n->op == CP_EOP_LT   ? a->num < b->num
             : n->op == CP_EOP_LE ? a->num <= b->num
             : n->op == CP_EOP_GT ? a->num > b->num
                                  : a->num >= b->num;
    set_bool(out, r);
    return CP_OK;
}

/* Kleene's and/or on checked operands. */
static enum cp_status logic(const struct ev *c, const struct cp_expr_node *n,
                            const struct cp_expr_value *a, const struct cp_expr_value *b,
                            struct cp_expr_value *out)
{
    set_absent(out);
    const char *w = n->op == CP_EOP_AND ? "'and'" : "'or'";
    enum cp_status st;
    if ((st = need_type(c, n->a, a, CP_EXPR_BOOL, w)) != CP_OK ||
        (st = need_type(c, n->b, b, CP_EXPR_BOOL, w)) != CP_OK)
        return st;
    bool decisive = n->op == CP_EOP_OR; /* the value that decides alone */
    if ((a->type == CP_EXPR_BOOL && a->boolean == decisive) ||
        (b->type == CP_EXPR_BOOL && b->boolean == decisive))
        set_bool(out, decisive);
    else if (a->type == CP_EXPR_BOOL && b->type == CP_EXPR_BOOL)
        set_bool(out, !decisive);
    return CP_OK;
}

/* ---- row functions ----------------------------------------------------------- */

struct group_key {
    struct cp_expr_value key;
    double w;
};

static int cmp_key(const void *pa, const void *pb)
{
    const struct cp_expr_value *a = &((const struct group_key *)pa)->key;
    const struct cp_expr_value *b = &((const struct group_key *)pb)->key;
    if (a->type != b->type)
        return a->type < b->type ? -1 : 1;
    switch (a->type) {
    case CP_EXPR_NUM:
        return a->num < b->num ? -1 : a->num > b->num ? 1 : 0;
    case CP_EXPR_STR:
        return strcmp(a->str, b->str);
    case CP_EXPR_BOOL:
        return (int)a->boolean - (int)b->boolean;
    case CP_EXPR_ABSENT:
        break;
    }
    return 0;
}

/* The largest total weight of one group of equal keys. */
static double top_group(struct group_key *k, size_t n)
{
    qsort(k, n, sizeof *k, cmp_key);
    double best = 0;
    for (size_t i = 0; i < n;) {
        double sum = 0;
        size_t j = i;
        for (; j < n && cmp_key(&k[i], &k[j]) == 0; j++)
            sum += k[j].w;
        if (sum > best)
            best = sum;
        i = j;
    }
    return best;
}

static enum cp_status eval(struct ev *c, const struct cp_expr_node *n, struct cp_expr_value *out);

static enum cp_status row_fn(struct ev *c, const struct cp_expr_node *n, struct cp_expr_value *out)
{
    const struct cp_expr_env *env = c->env;
    enum cp_expr_fn fn = n->fn;
    set_absent(out);
    bool weighted = fn == CP_EFN_SHARE || fn == CP_EFN_TOP;
    if (!env->n_rows || (weighted && !env->row_weight))
        return CP_OK;
    size_t rows = env->n_rows(env->ctx);
    const struct cp_expr_node *cond = fn == CP_EFN_COUNT || fn == CP_EFN_SHARE ? n->a
                                      : n->n_args > 1                          ? n->b
                                                                               : NULL;
    struct group_key *keys = NULL;
    if (fn == CP_EFN_TOP && rows > 0 && !(keys = cp_calloc(rows, sizeof *keys)))
        return cp_diag_set(c->d, CP_ERR_NOMEM, "out of memory evaluating top()");

    struct ev rc = *c;
    rc.in_row = true;
    enum cp_status st = CP_OK;
    double acc = fn == CP_EFN_MAX ? -INFINITY : fn == CP_EFN_MIN ? INFINITY : 0;
    size_t n_known = 0, n_vals = 0;
    for (size_t r = 0; r < rows && st == CP_OK; r++) {
        rc.row = r;
        struct cp_expr_value v;
        if (cond) {
            if ((st = eval(&rc, cond, &v)) != CP_OK ||
                (st = need_type(&rc, cond, &v, CP_EXPR_BOOL, "the condition")) != CP_OK)
                break;
            if (v.type == CP_EXPR_ABSENT)
                continue; /* undecided rows count neither way */
            if (!v.boolean) {
                n_known++;
                continue;
            }
        }
        switch (fn) {
        case CP_EFN_COUNT:
            acc += 1;
            n_known++;
            break;
        case CP_EFN_SHARE: {
            double w = env->row_weight(env->ctx, r);
            if (isfinite(w)) {
                acc += w;
                n_known++;
            }
            break;
        }
        case CP_EFN_SUM:
        case CP_EFN_MAX:
        case CP_EFN_MIN:
            if ((st = eval(&rc, n->a, &v)) != CP_OK ||
                (st = need_type(&rc, n->a, &v, CP_EXPR_NUM, cp_expr_fn_name(fn))) != CP_OK)
                break;
            if (v.type == CP_EXPR_ABSENT)
                break;
            n_known++;
            n_vals++;
            acc = fn == CP_EFN_SUM   ? acc + v.num
                  : fn == CP_EFN_MAX ? fmax(acc, v.num)
                                     : fmin(acc, v.num);
            break;
        case CP_EFN_TOP: {
            set_absent(&v);
            if (!env->field || !env->field(env->ctx, r, n->a->str, &v)) {
                char where[512];
                cp_expr_where(c->e, n->a, where, sizeof where);
                st = cp_diag_set(c->d, CP_ERR_INVALID, "%stop(): rows have no field '%s'", where,
                                 n->a->str);
                break;
            }
            normalize(&v);
            double w = env->row_weight(env->ctx, r);
            if (v.type == CP_EXPR_ABSENT || !isfinite(w))
                break;
            keys[n_vals].key = v;
            keys[n_vals].w = w;
            n_vals++;
            n_known++;
            break;
        }
        case CP_EFN_KNOWN:
            break;
        }
    }
    if (st == CP_OK && (rows == 0 || n_known > 0)) {
        if (fn == CP_EFN_TOP) {
            if (n_vals > 0)
                set_num(out, top_group(keys, n_vals));
        } else if (fn == CP_EFN_MAX || fn == CP_EFN_MIN) {
            if (n_vals > 0)
                set_num(out, acc);
        } else {
            set_num(out, acc);
        }
    }
    free(keys);
    if (st != CP_OK)
        set_absent(out);
    return st;
}

/* ---- the walk ------------------------------------------------------------------- */

static enum cp_status eval(struct ev *c, const struct cp_expr_node *n, struct cp_expr_value *out)
{
    struct cp_expr_value a, b;
    enum cp_status st;
    set_absent(out);
    switch (n->op) {
    case CP_EOP_NUM:
        set_num(out, n->num);
        return CP_OK;
    case CP_EOP_STR:
        out->type = CP_EXPR_STR;
        out->str = n->str;
        return CP_OK;
    case CP_EOP_BOOL:
        set_bool(out, n->boolean);
        return CP_OK;
    case CP_EOP_IDENT:
        return lookup(c, n, out);
    case CP_EOP_NEG:
        if ((st = eval(c, n->a, &a)) != CP_OK ||
            (st = need_type(c, n->a, &a, CP_EXPR_NUM, "'-'")) != CP_OK)
            return st;
        if (a.type == CP_EXPR_NUM)
            set_num(out, -a.num);
        return CP_OK;
    case CP_EOP_NOT:
        if ((st = eval(c, n->a, &a)) != CP_OK ||
            (st = need_type(c, n->a, &a, CP_EXPR_BOOL, "'not'")) != CP_OK)
            return st;
        if (a.type == CP_EXPR_BOOL)
            set_bool(out, !a.boolean);
        return CP_OK;
    case CP_EOP_ADD:
    case CP_EOP_SUB:
    case CP_EOP_MUL:
    case CP_EOP_DIV:
        if ((st = eval(c, n->a, &a)) != CP_OK || (st = eval(c, n->b, &b)) != CP_OK)
            return st;
        return arith(c, n, &a, &b, out);
    case CP_EOP_LT:
    case CP_EOP_LE:
    case CP_EOP_GT:
    case CP_EOP_GE:
    case CP_EOP_EQ:
    case CP_EOP_NE:
        if ((st = eval(c, n->a, &a)) != CP_OK || (st = eval(c, n->b, &b)) != CP_OK)
            return st;
        return compare(c, n, &a, &b, out);
    case CP_EOP_AND:
    case CP_EOP_OR:
        if ((st = eval(c, n->a, &a)) != CP_OK)
            return st;
        set_absent(&b);
        /* The left side decides alone: skip the right (and its errors). */
        if (!(a.type == CP_EXPR_BOOL && a.boolean == (n->op == CP_EOP_OR)) &&
            (st = eval(c, n->b, &b)) != CP_OK)
            return st;
        return logic(c, n, &a, &b, out);
    case CP_EOP_CALL:
        if (n->fn == CP_EFN_KNOWN) {
            if ((st = eval(c, n->a, &a)) != CP_OK)
                return st;
            set_bool(out, a.type != CP_EXPR_ABSENT);
            return CP_OK;
        }
        return row_fn(c, n, out);
    }
    return cp_diag_set(c->d, CP_ERR_INTERNAL, "internal error: expression node %d", (int)n->op);
}

enum cp_status cp_expr_eval(const struct cp_expr *e, const struct cp_expr_env *env,
                            struct cp_expr_value *out, struct cp_diag *d)
{
    set_absent(out);
    static const struct cp_expr_env none = {0};
    struct ev c = {.e = e, .env = env ? env : &none, .d = d};
    enum cp_status st = eval(&c, e->root, out);
    if (st != CP_OK)
        set_absent(out);
    return st;
}

/* ---- margins ------------------------------------------------------------------- */

/* The relative margin of a comparison that has a value: the threshold is the
 * side without features and functions (the right one when that does not
 * decide). */
static double rel_margin(const struct cp_expr_node *n, double a, double b)
{
    bool right_is_threshold = n->b->constant || !n->a->constant;
    double t = right_is_threshold ? b : a;
    double scale = fabs(t) > 0 ? fabs(t) : 1.0;
    double diff = n->op == CP_EOP_GT || n->op == CP_EOP_GE ? a - b : b - a;
    return diff / scale;
}

/* Evaluate n into *v and, when it is a known condition, its margin into *m
 * (*has says whether there is one). */
static enum cp_status margin_of(struct ev *c, const struct cp_expr_node *n, struct cp_expr_value *v,
                                double *m, bool *has)
{
    struct cp_expr_value a, b;
    double ma = 0, mb = 0;
    bool ha = false, hb = false;
    enum cp_status st;
    *has = false;
    switch (n->op) {
    case CP_EOP_LT:
    case CP_EOP_LE:
    case CP_EOP_GT:
    case CP_EOP_GE:
        if ((st = eval(c, n->a, &a)) != CP_OK || (st = eval(c, n->b, &b)) != CP_OK ||
            (st = compare(c, n, &a, &b, v)) != CP_OK)
            return st;
        if (v->type == CP_EXPR_BOOL) {
            *m = rel_margin(n, a.num, b.num);
            *has = !isnan(*m);
        }
        return CP_OK;
    case CP_EOP_NOT:
        if ((st = margin_of(c, n->a, &a, &ma, &ha)) != CP_OK ||
            (st = need_type(c, n->a, &a, CP_EXPR_BOOL, "'not'")) != CP_OK)
            return st;
        set_absent(v);
        if (a.type == CP_EXPR_BOOL) {
            set_bool(v, !a.boolean);
            *m = -ma;
            *has = ha;
        }
        return CP_OK;
    case CP_EOP_AND:
    case CP_EOP_OR:
        /* No short cut here: the margin wants both sides when they are known. */
        if ((st = margin_of(c, n->a, &a, &ma, &ha)) != CP_OK ||
            (st = margin_of(c, n->b, &b, &mb, &hb)) != CP_OK ||
            (st = logic(c, n, &a, &b, v)) != CP_OK)
            return st;
        if (v->type != CP_EXPR_BOOL)
            return CP_OK;
        ha = ha && a.type == CP_EXPR_BOOL;
        hb = hb && b.type == CP_EXPR_BOOL;
        if (ha && hb)
            *m = n->op == CP_EOP_AND ? fmin(ma, mb) : fmax(ma, mb);
        else if (ha || hb)
            *m = ha ? ma : mb;
        *has = ha || hb;
        return CP_OK;
    default:
        if ((st = eval(c, n, v)) != CP_OK)
            return st;
        if (v->type == CP_EXPR_BOOL) {
            *m = v->boolean ? 1.0 : -1.0;
            *has = true;
        }
        return CP_OK;
    }
}

bool cp_expr_margin(const struct cp_expr *e, const struct cp_expr_env *env, double *margin)
{
    static const struct cp_expr_env none = {0};
    struct cp_diag d;
    cp_diag_init(&d);
    struct ev c = {.e = e, .env = env ? env : &none, .d = &d};
    struct cp_expr_value v;
    double m = 0;
    bool has = false;
    if (margin_of(&c, e->root, &v, &m, &has) != CP_OK || v.type != CP_EXPR_BOOL || !has)
        return false;
    *margin = m;
    return true;
}
