/*
 * rules/expr.h: the expression language of rule packs.
 *
 * A rule's indicators are short expressions over the features that feature
 * extraction computed from a trace, such as `memory_bandwidth_util > 85%` or
 * `share(op_type == "Transpose") > 5%`. This module parses such a string once
 * into a small tree (cp_expr_parse), checks its names against the features an
 * extractor can provide (cp_expr_check), and evaluates it against an abstract
 * environment (cp_expr_eval), so it knows nothing about traces, SQLite or
 * YAML. The language is docs/rule-language.md; in short:
 *
 *   values       numbers (double), strings, booleans, and ABSENT: a feature
 *                the trace could not provide (cache_miss_rate without
 *                hardware counters). Comparisons and arithmetic with ABSENT
 *                are ABSENT; and/or/not follow Kleene's three-valued logic.
 *   literals     1.5, 2e-3, 85% (= 0.85), 3GB, 2GiB, 20ms, 1.2TFLOPS, 100GB/s,
 *                "Transpose", 'NCHW', true, false
 *   operators    + - * / (unary -), < <= > >= == !=, and or not (&& || !)
 *   functions    share(cond), count(cond), top(field[, cond]),
 *                sum(x[, cond]), max(x[, cond]), min(x[, cond]) over the
 *                rows of the environment (kernels, op types); known(x).
 *
 * Safety: the language has no loops, no assignment, no calls out of this
 * module other than the environment's callbacks, and no file access; input is
 * limited in length (CP_EXPR_MAX_LEN) and nesting (CP_EXPR_MAX_DEPTH), and no
 * input makes the parser or evaluator abort.
 *
 * Errors name the place: "FILE:LINE:COL: message", where LINE:COL is the
 * offending token, counted from the position the caller says the text starts
 * at (columns count characters, not bytes, as editors and libyaml do).
 */
#ifndef CP_RULES_EXPR_H
#define CP_RULES_EXPR_H

#include "core/core.h"

/* Longest accepted expression, in bytes. */
#define CP_EXPR_MAX_LEN 4096
/* Deepest accepted nesting: parentheses, function calls, unary operators. */
#define CP_EXPR_MAX_DEPTH 64

enum cp_expr_type {
    CP_EXPR_ABSENT = 0, /* no value: the feature is missing, or undefined (x / 0) */
    CP_EXPR_NUM,
    CP_EXPR_STR,
    CP_EXPR_BOOL,
};

/* "absent", "number", "string", "boolean". Never NULL. */
const char *cp_expr_type_name(enum cp_expr_type t);

/* A value. Only the member matching `type` is meaningful. `str` is borrowed:
 * it points into the expression (literals) or into the environment's memory
 * (features), and lives as long as both do. A NaN number is not a value: the
 * evaluator turns it into ABSENT. */
struct cp_expr_value {
    enum cp_expr_type type;
    double num;
    const char *str;
    bool boolean;
};

/*
 * What an expression is evaluated against. Every callback may be NULL.
 *
 * scalar  the value of a feature of the whole trace (memory_bandwidth_util).
 *         Returns false for a name it does not know (an evaluation error:
 *         "unknown feature"); a known feature the trace lacks returns true
 *         with out->type = CP_EXPR_ABSENT.
 * n_rows  the number of rows of the table the row functions range over
 *         (kernels or op types). NULL: there is no table, and every row
 *         function is ABSENT.
 * field   the value of a field of a row (op_type, node, impl, dtype, bound,
 *         time_share). Returns false when rows have no such field; the name
 *         is then looked up as a scalar.
 * row_weight  the weight of a row for share() and top(): its share of the
 *         time, 0..1. NULL: share() and top() are ABSENT.
 *
 * Strings handed out must stay valid while the value is in use (for the
 * duration of cp_expr_eval, and after it for a string result).
 */
struct cp_expr_env {
    void *ctx;
    bool (*scalar)(void *ctx, const char *name, struct cp_expr_value *out);
    size_t (*n_rows)(void *ctx);
    bool (*field)(void *ctx, size_t row, const char *name, struct cp_expr_value *out);
    double (*row_weight)(void *ctx, size_t row);
};

struct cp_expr;

/*
 * Parse `text` into an expression.
 *
 * `file`, `line` and `col` say where the text starts (1-based; the column of
 * its first character, after any YAML quote) and are used in messages only,
 * as given (a caller that prepends text may pass a column below 1 so that
 * positions still point into the original); `file` may be NULL
 * ("<expression>"). A newline in `text` moves to the next line, column 1.
 *
 * The parser checks what it can without an environment: syntax, units,
 * function names and arity, and types where both sides are literals or
 * operators of known result ("'and' needs conditions, but 3 is a number").
 * Feature names are checked by cp_expr_check.
 *
 * OUT: *out, freed with cp_expr_free; NULL on failure. Errors: CP_ERR_PARSE
 * (syntax, with "FILE:LINE:COL: " in `d`), CP_ERR_INVALID (types, unknown
 * function, too long or too deep), CP_ERR_NOMEM.
 */
enum cp_status cp_expr_parse(const char *text, const char *file, int line, int col,
                             struct cp_expr **out, struct cp_diag *d);

/* Free an expression. NULL is a no-op. */
void cp_expr_free(struct cp_expr *e);

/* The source text, as given to cp_expr_parse. Owned by `e`. */
const char *cp_expr_text(const struct cp_expr *e);

/* The static type of the result: CP_EXPR_BOOL for a condition such as
 * `x > 1`, CP_EXPR_NUM for `share(...)`, CP_EXPR_STR for a string literal,
 * and CP_EXPR_ABSENT when it depends on a feature's value (a bare name `x`).
 * A rule loader requires indicators to be CP_EXPR_BOOL or CP_EXPR_ABSENT. */
enum cp_expr_type cp_expr_static_type(const struct cp_expr *e);

/*
 * Check every name in `e` against what an environment can provide:
 * `known_scalars[0..n)` are whole-trace features, `known_fields[0..m)` the
 * fields of rows. Outside a row function a name must be a scalar; inside one
 * (share, count, top, sum, max, min) a field or a scalar; top()'s first
 * argument must be a field. The first offender is reported as
 * "FILE:LINE:COL: unknown feature 'cache_mis_rate' (did you mean
 * 'cache_miss_rate'?)" or "... 'op_type' is a field of rows; use it inside
 * share(), count(), ...". Returns CP_OK or CP_ERR_INVALID.
 */
enum cp_status cp_expr_check(const struct cp_expr *e, const char *const *known_scalars, size_t n,
                             const char *const *known_fields, size_t m, struct cp_diag *d);

/*
 * Evaluate `e` against `env`. OUT: *out (ABSENT when a feature it needs is
 * missing and Kleene logic cannot decide without it; division by zero and
 * non-finite arithmetic are ABSENT too, not errors).
 *
 * Errors (CP_ERR_INVALID, "FILE:LINE:COL: ..." in `d`): a name the
 * environment does not know, a value of the wrong type ("'>' compares
 * numbers, but op_type is a string"); CP_ERR_NOMEM. On error *out is ABSENT.
 */
enum cp_status cp_expr_eval(const struct cp_expr *e, const struct cp_expr_env *env,
                            struct cp_expr_value *out, struct cp_diag *d);

/*
 * How clearly a condition holds, for a confidence model. For a comparison
 * `a OP b` with numbers, the distance from the threshold relative to it:
 * (a - t) / |t| for > and >=, (t - a) / |t| for < and <=, where t is the
 * threshold side (the side without features or functions; the right side
 * when both or neither have them) and a the other; |t| is taken as 1 when
 * t is 0. `x > 85%` with x = 0.95 gives (0.95 - 0.85) / 0.85 = 0.118; with
 * x = 0.80, -0.059. It is positive when the condition holds and negative when
 * it fails (0 exactly at the threshold). An equality, a boolean feature or
 * literal and known() count as +1 when true and -1 when false; `not c` is
 * -margin(c); `a and b` the smaller of its children's margins and `a or b`
 * the larger, over the children whose value is known.
 *
 * OUT: *margin. Returns false, leaving *margin untouched, when the value is
 * ABSENT, is not a condition, or evaluation fails.
 */
bool cp_expr_margin(const struct cp_expr *e, const struct cp_expr_env *env, double *margin);

/* One name used by an expression, as reported by cp_expr_identifiers. */
struct cp_expr_ident {
    const char *name; /* owned by the expression */
    bool in_row;      /* used inside a row function (a field, or a scalar) */
    int line, col;    /* its first use */
};

/* Call `fn` once per distinct (name, in_row) pair that `e` uses, in the order
 * of first use, e.g. to list the features a rule needs and say which ones a
 * trace lacks. Function names are not included. */
void cp_expr_identifiers(const struct cp_expr *e,
                         void (*fn)(void *ctx, const struct cp_expr_ident *id), void *ctx);

#endif
