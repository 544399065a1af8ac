/* The rule expression language (rules/expr.h): the reference design's
 * indicators written exactly as the design writes them, row functions on a
 * toy table, units, precedence, three-valued logic with absent features,
 * margins, errors with their exact file:line:column, name suggestions, and
 * thousands of random strings that must never crash the parser or the
 * evaluator. */
#include "rules/expr.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_OF(a)   (sizeof(a) / sizeof((a)[0]))
#define FILE_NAME "rules/packs/x.yaml"

/* ---- a toy environment ------------------------------------------------------ */

struct toy_scalar {
    const char *name;
    enum cp_expr_type type;
    double num;
    const char *str;
};

struct toy_row {
    const char *op_type;
    const char *dtype;
    double time_share;
    double alu_util; /* NaN: absent */
    bool fused;
};

struct toy {
    const struct toy_scalar *scalars;
    size_t n_scalars;
    const struct toy_row *rows;
    size_t n_rows;
};

static bool toy_scalar(void *ctx, const char *name, struct cp_expr_value *out)
{
    const struct toy *t = ctx;
    for (size_t i = 0; i < t->n_scalars; i++)
        if (!strcmp(t->scalars[i].name, name)) {
            out->type = t->scalars[i].type;
            out->num = t->scalars[i].num;
            out->str = t->scalars[i].str;
            return true;
        }
    return false;
}

static size_t toy_n_rows(void *ctx)
{
    return ((const struct toy *)ctx)->n_rows;
}

static bool toy_field(void *ctx, size_t row, const char *name, struct cp_expr_value *out)
{
    const struct toy_row *r = &((const struct toy *)ctx)->rows[row];
    if (!strcmp(name, "op_type") || !strcmp(name, "dtype")) {
        out->type = CP_EXPR_STR;
        out->str = name[0] == 'o' ? r->op_type : r->dtype;
    } else if (!strcmp(name, "time_share") || !strcmp(name, "alu_util")) {
        out->type = CP_EXPR_NUM;
        out->num = name[0] == 't' ? r->time_share : r->alu_util;
    } else if (!strcmp(name, "fused")) {
        out->type = CP_EXPR_BOOL;
        out->boolean = r->fused;
    } else {
        return false;
    }
    return true;
}

static double toy_weight(void *ctx, size_t row)
{
    return ((const struct toy *)ctx)->rows[row].time_share;
}

static const struct toy_scalar SCALARS[] = {
    {"memory_bandwidth_util", CP_EXPR_NUM, 0.92, NULL},
    {"cache_miss_rate", CP_EXPR_NUM, 0.35, NULL},
    {"device_util", CP_EXPR_NUM, 0.95, NULL},
    {"alu_util", CP_EXPR_NUM, 0.50, NULL},
    {"absent_feature", CP_EXPR_ABSENT, 0, NULL},
    {"nan_feature", CP_EXPR_NUM, NAN, NULL},
    {"latency", CP_EXPR_NUM, 0.004, NULL}, /* seconds */
    {"peak_bytes", CP_EXPR_NUM, 3e9, NULL},
    {"precision", CP_EXPR_STR, 0, "bf16"},
    {"is_dynamic", CP_EXPR_BOOL, 0, NULL},
    {"zero", CP_EXPR_NUM, 0, NULL},
    {"x.y", CP_EXPR_NUM, 2, NULL},
};

/* Shares add up to 1. alu_util of the Transposes is unknown. */
static const struct toy_row ROWS[] = {
    {"Conv", "f32", 0.40, 0.70, true},      {"Conv", "f32", 0.20, 0.65, true},
    {"MatMul", "bf16", 0.15, 0.80, false},  {"Transpose", "f32", 0.06, NAN, false},
    {"Transpose", "f32", 0.04, NAN, false}, {"Add", "f32", 0.10, 0.05, false},
    {"Softmax", "f32", 0.05, 0.10, false},
};

static struct toy g_toy;
static struct cp_expr_env g_env;

static void setup(void)
{
    g_toy = (struct toy){SCALARS, N_OF(SCALARS), ROWS, N_OF(ROWS)};
    g_env = (struct cp_expr_env){&g_toy, toy_scalar, toy_n_rows, toy_field, toy_weight};
}

TestSuite(expr, .init = setup);

static const char *const KNOWN_SCALARS[] = {
    "memory_bandwidth_util",
    "cache_miss_rate",
    "device_util",
    "alu_util",
    "absent_feature",
    "latency",
    "peak_bytes",
    "precision",
    "x.y",
};
static const char *const KNOWN_FIELDS[] = {"op_type", "dtype", "time_share", "alu_util", "fused"};

/* ---- helpers -------------------------------------------------------------------- */

static struct cp_expr *parse_ok(const char *text)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_expr *e = NULL;
    enum cp_status st = cp_expr_parse(text, FILE_NAME, 1, 1, &e, &d);
    cr_assert_eq(st, CP_OK, "parse '%s': %s", text, d.msg);
    cr_assert_not_null(e);
    return e;
}

static struct cp_expr_value eval_in(const char *text, const struct cp_expr_env *env)
{
    struct cp_expr *e = parse_ok(text);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_expr_value v;
    enum cp_status st = cp_expr_eval(e, env, &v, &d);
    cr_assert_eq(st, CP_OK, "eval '%s': %s", text, d.msg);
    cp_expr_free(e);
    return v;
}

static struct cp_expr_value eval_str(const char *text)
{
    return eval_in(text, &g_env);
}

#define EXPECT_BOOL(text, want)                                                                    \
    do {                                                                                           \
        struct cp_expr_value v_ = eval_str(text);                                                  \
        cr_expect_eq(v_.type, CP_EXPR_BOOL, "'%s' gave a %s", text, cp_expr_type_name(v_.type));   \
        cr_expect_eq(v_.boolean, (want), "'%s' should be %s", text, (want) ? "true" : "false");    \
    } while (0)

#define EXPECT_ABSENT(text)                                                                        \
    do {                                                                                           \
        struct cp_expr_value v_ = eval_str(text);                                                  \
        cr_expect_eq(v_.type, CP_EXPR_ABSENT, "'%s' gave a %s, want absent", text,                 \
                     cp_expr_type_name(v_.type));                                                  \
    } while (0)

#define EXPECT_NUM(text, want)                                                                     \
    do {                                                                                           \
        struct cp_expr_value v_ = eval_str(text);                                                  \
        double w_ = (want);                                                                        \
        cr_expect_eq(v_.type, CP_EXPR_NUM, "'%s' gave a %s", text, cp_expr_type_name(v_.type));    \
        cr_expect(fabs(v_.num - w_) <= 1e-12 * fmax(1.0, fabs(w_)), "'%s' = %.17g, want %.17g",    \
                  text, v_.num, w_);                                                               \
    } while (0)

/* Parse `text` starting at `line`:`col` and expect exactly `want` as the
 * message. */
static void expect_parse_error(const char *text, int line, int col, enum cp_status want_st,
                               const char *want)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_expr *e = (struct cp_expr *)1;
    enum cp_status st = cp_expr_parse(text, FILE_NAME, line, col, &e, &d);
    cr_expect_eq(st, want_st, "'%s': status %d (%s), want %d", text, st, d.msg, want_st);
    cr_expect_null(e, "'%s': the output must be NULL on failure", text);
    cr_expect_str_eq(d.msg, want, "'%s': got\n  %s\nwant\n  %s", text, d.msg, want);
}

/* Parse and check, and expect the check to fail with `want` as the message. */
static void expect_check_error(const char *text, const char *want)
{
    struct cp_expr *e = parse_ok(text);
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st =
        cp_expr_check(e, KNOWN_SCALARS, N_OF(KNOWN_SCALARS), KNOWN_FIELDS, N_OF(KNOWN_FIELDS), &d);
    cr_expect_eq(st, CP_ERR_INVALID, "'%s': %s", text, d.msg);
    cr_expect_str_eq(d.msg, want, "'%s': got\n  %s\nwant\n  %s", text, d.msg, want);
    cp_expr_free(e);
}

static double margin_of(const char *text, bool *ok)
{
    struct cp_expr *e = parse_ok(text);
    double m = 12345;
    *ok = cp_expr_margin(e, &g_env, &m);
    cp_expr_free(e);
    return m;
}

#define EXPECT_MARGIN(text, want)                                                                  \
    do {                                                                                           \
        bool ok_;                                                                                  \
        double m_ = margin_of(text, &ok_);                                                         \
        cr_expect(ok_, "'%s' has no margin", text);                                                \
        cr_expect(fabs(m_ - (want)) < 1e-9, "margin of '%s' = %.17g, want %.17g", text, m_,        \
                  (double)(want));                                                                 \
    } while (0)

#define EXPECT_NO_MARGIN(text)                                                                     \
    do {                                                                                           \
        bool ok_;                                                                                  \
        margin_of(text, &ok_);                                                                     \
        cr_expect(!ok_, "'%s' should have no margin", text);                                       \
    } while (0)

/* ---- the reference design ------------------------------------------------------------ */

Test(expr, reference_bottleneck_indicators_parse_and_evaluate_as_written)
{
    /* memory_bound and compute_bound, exactly as the design writes them. */
    EXPECT_BOOL("memory_bandwidth_util > 85%", true);
    EXPECT_BOOL("cache_miss_rate > 30%", true);
    EXPECT_BOOL("device_util > 90%", true);
    EXPECT_BOOL("alu_util < 60%", true);
    EXPECT_BOOL("share(op_type == \"Transpose\") > 5%", true); /* 0.10 */

    static const struct toy_scalar low[] = {
        {"memory_bandwidth_util", CP_EXPR_NUM, 0.60, NULL},
        {"cache_miss_rate", CP_EXPR_ABSENT, 0, NULL}, /* no perf counters */
        {"device_util", CP_EXPR_NUM, 0.90, NULL},
        {"alu_util", CP_EXPR_NUM, 0.60, NULL},
    };
    g_toy.scalars = low;
    g_toy.n_scalars = N_OF(low);
    EXPECT_BOOL("memory_bandwidth_util > 85%", false);
    EXPECT_ABSENT("cache_miss_rate > 30%");
    EXPECT_BOOL("device_util > 90%", false); /* 0.90 is not above 90% */
    EXPECT_BOOL("alu_util < 60%", false);
    EXPECT_BOOL("device_util >= 90%", true);
    EXPECT_BOOL("alu_util <= 60%", true);
    /* memory_bound's two indicators together: decided without the counters. */
    EXPECT_BOOL("memory_bandwidth_util > 85% and cache_miss_rate > 30%", false);
}

Test(expr, reference_indicators_pass_the_check_and_list_their_features)
{
    const char *texts[] = {"memory_bandwidth_util > 85%", "cache_miss_rate > 30%",
                           "device_util > 90%", "alu_util < 60%",
                           "share(op_type == \"Transpose\") > 5%"};
    for (size_t i = 0; i < N_OF(texts); i++) {
        struct cp_expr *e = parse_ok(texts[i]);
        struct cp_diag d;
        cp_diag_init(&d);
        cr_expect_eq(cp_expr_check(e, KNOWN_SCALARS, N_OF(KNOWN_SCALARS), KNOWN_FIELDS,
                                   N_OF(KNOWN_FIELDS), &d),
                     CP_OK, "%s: %s", texts[i], d.msg);
        cr_expect_eq(cp_expr_static_type(e), CP_EXPR_BOOL, "%s", texts[i]);
        cr_expect_str_eq(cp_expr_text(e), texts[i]);
        cp_expr_free(e);
    }
}

/* ---- literals and units ------------------------------------------------------------ */

Test(expr, percents_and_units_fold_into_base_units)
{
    EXPECT_NUM("85%", 0.85);
    EXPECT_NUM("100%", 1.0);
    EXPECT_NUM("0.5%", 0.005);
    EXPECT_NUM("3GB", 3e9);
    EXPECT_NUM("3KB", 3e3);
    EXPECT_NUM("3MB", 3e6);
    EXPECT_NUM("2TB", 2e12);
    EXPECT_NUM("2GiB", 2147483648.0);
    EXPECT_NUM("1KiB", 1024);
    EXPECT_NUM("1MiB", 1048576);
    EXPECT_NUM("512B", 512);
    EXPECT_NUM("20ms", 0.02);
    EXPECT_NUM("5us", 5e-6);
    EXPECT_NUM("5\xc2\xb5s", 5e-6); /* micro sign */
    EXPECT_NUM("5\xce\xbcs", 5e-6); /* Greek mu */
    EXPECT_NUM("250ns", 250e-9);
    EXPECT_NUM("2s", 2);
    EXPECT_NUM("100GB/s", 1e11);
    EXPECT_NUM("1GiB/s", 1073741824.0);
    EXPECT_NUM("1.5TFLOPS", 1.5e12);
    EXPECT_NUM("200GFLOPS", 2e11);
    EXPECT_NUM("1e3", 1000);
    EXPECT_NUM("2.5E-3", 0.0025);
    EXPECT_NUM(".5", 0.5);
    EXPECT_NUM("1e2%", 1.0);
    /* "/s" after a byte unit is a rate, but only when the s stands alone. */
    EXPECT_NUM("4GB/x.y", 2e9);
    EXPECT_NUM("peak_bytes / 1GiB * 1GiB", 3e9);
    EXPECT_BOOL("latency < 5ms", true);
    EXPECT_BOOL("peak_bytes <= 3GB", true);
    EXPECT_BOOL("peak_bytes < 3GiB", true);
}

Test(expr, strings_and_booleans)
{
    EXPECT_BOOL("precision == \"bf16\"", true);
    EXPECT_BOOL("precision == 'bf16'", true);
    EXPECT_BOOL("precision != 'fp16'", true);
    EXPECT_BOOL("'it\\'s' == \"it's\"", true);
    EXPECT_BOOL("is_dynamic", false);
    EXPECT_BOOL("not is_dynamic", true);
    EXPECT_BOOL("is_dynamic == false", true);
    EXPECT_BOOL("true && !false", true);
    EXPECT_BOOL("false || true", true);
    struct cp_expr_value v = eval_str("precision");
    cr_expect_eq(v.type, CP_EXPR_STR);
    cr_expect_str_eq(v.str, "bf16");
}

/* ---- precedence --------------------------------------------------------------------- */

Test(expr, precedence_and_associativity)
{
    EXPECT_NUM("1 + 2 * 3", 7);
    EXPECT_NUM("(1 + 2) * 3", 9);
    EXPECT_NUM("-2 * 3", -6);
    EXPECT_NUM("- -2", 2);
    EXPECT_NUM("2 - 3 - 4", -5);
    EXPECT_NUM("100 / 10 / 5", 2);
    EXPECT_NUM("1 - 50%", 0.5);
    EXPECT_BOOL("1 + 2 * 3 == 7", true);
    EXPECT_BOOL("2 * 3 > 5 and 1 < 2", true);
    /* and binds tighter than or. */
    EXPECT_BOOL("true or false and false", true);
    EXPECT_BOOL("(true or false) and false", false);
    /* not binds looser than comparisons, tighter than and. */
    EXPECT_BOOL("not 1 > 2 and 2 > 1", true);
    EXPECT_BOOL("not (1 > 2 and 2 > 1)", true);
    EXPECT_BOOL("!(device_util > 90%) || alu_util < 60%", true);
    EXPECT_BOOL("not not true", true);
    /* Whitespace and newlines do not matter. */
    EXPECT_BOOL("  device_util\n  >\t90%\n", true);
}

/* ---- three-valued logic ------------------------------------------------------------- */

Test(expr, absent_features_follow_kleene_logic)
{
    EXPECT_ABSENT("absent_feature");
    EXPECT_ABSENT("absent_feature > 1");
    EXPECT_ABSENT("absent_feature + 1 > 0");
    EXPECT_ABSENT("-absent_feature");
    EXPECT_ABSENT("not (absent_feature > 1)");
    EXPECT_ABSENT("absent_feature == 'x'");
    EXPECT_BOOL("absent_feature > 1 and false", false);
    EXPECT_BOOL("false and absent_feature > 1", false);
    EXPECT_ABSENT("absent_feature > 1 and true");
    EXPECT_ABSENT("true and absent_feature > 1");
    EXPECT_BOOL("absent_feature > 1 or true", true);
    EXPECT_BOOL("true or absent_feature > 1", true);
    EXPECT_ABSENT("absent_feature > 1 or false");
    EXPECT_ABSENT("absent_feature > 1 or absent_feature < 1");
    /* A NaN from the environment is no value either. */
    EXPECT_ABSENT("nan_feature > 0");
    EXPECT_BOOL("known(device_util)", true);
    EXPECT_BOOL("known(absent_feature)", false);
    EXPECT_BOOL("known(nan_feature)", false);
    EXPECT_BOOL("known(absent_feature) and absent_feature > 1", false);
}

Test(expr, division_by_zero_is_absent_not_an_error)
{
    EXPECT_ABSENT("1 / 0");
    EXPECT_ABSENT("device_util / zero > 1");
    EXPECT_BOOL("device_util / zero > 1 or true", true);
    EXPECT_NUM("0 / 5", 0);
}

/* ---- row functions ------------------------------------------------------------------ */

Test(expr, share_count_top_on_rows)
{
    EXPECT_NUM("share(op_type == 'Transpose')", 0.10);
    EXPECT_NUM("share(op_type == 'Conv')", 0.60);
    EXPECT_NUM("share(true)", 1.0);
    EXPECT_NUM("share(op_type == 'Nothing')", 0);
    EXPECT_NUM("share(dtype == 'bf16' or op_type == 'Add')", 0.25);
    EXPECT_NUM("share(fused)", 0.60);
    EXPECT_NUM("share(not fused and time_share < 10%)", 0.15); /* 0.06 + 0.04 + 0.05 */
    EXPECT_NUM("count(op_type == 'Transpose')", 2);
    EXPECT_NUM("count(true)", 7);
    EXPECT_NUM("count(op_type == 'Nothing')", 0);
    EXPECT_NUM("top(op_type)", 0.60);            /* Conv: 0.40 + 0.20 */
    EXPECT_NUM("top(dtype)", 0.85);              /* f32 */
    EXPECT_NUM("top(fused)", 0.60);              /* false: 0.40, true: 0.60 */
    EXPECT_NUM("top(time_share)", 0.40);         /* numbers group too */
    EXPECT_NUM("top(op_type, not fused)", 0.15); /* MatMul */
    EXPECT_BOOL("top(op_type) > 30%", true);
    EXPECT_NUM("sum(time_share)", 1.0);
    EXPECT_NUM("sum(time_share, op_type == 'Conv')", 0.60);
    EXPECT_NUM("max(alu_util)", 0.80); /* the Transposes' absent values are skipped */
    EXPECT_NUM("min(alu_util)", 0.05);
    EXPECT_NUM("max(alu_util, op_type == 'Conv')", 0.70);
    EXPECT_ABSENT("max(alu_util, op_type == 'Transpose')");
    /* Inside a row function, names are fields first, then scalars. */
    EXPECT_NUM("count(alu_util > 60%)", 3);        /* the rows' alu_util */
    EXPECT_NUM("count(device_util > 90%)", 7);     /* a scalar, true on every row */
    EXPECT_NUM("share(alu_util < 20%) * 100", 15); /* Add 0.10 + Softmax 0.05 */
    EXPECT_NUM("count(alu_util < 20% or alu_util > 1)", 2);
}

Test(expr, rows_with_undecided_conditions_count_neither_way)
{
    /* The Transposes' alu_util is absent: not counted. */
    EXPECT_NUM("count(alu_util >= 0)", 5);
    EXPECT_NUM("count(not (alu_util >= 0))", 0);
    /* Every row undecided: no information. */
    EXPECT_ABSENT("share(absent_feature > 1)");
    EXPECT_ABSENT("count(absent_feature > 1)");
}

Test(expr, empty_or_missing_tables)
{
    g_toy.n_rows = 0;
    EXPECT_NUM("share(op_type == 'Conv')", 0);
    EXPECT_NUM("count(true)", 0);
    EXPECT_NUM("sum(time_share)", 0);
    EXPECT_ABSENT("top(op_type)");
    EXPECT_ABSENT("max(time_share)");

    /* No table at all: every row function is absent, the logic still works. */
    struct cp_expr_env scalars_only = {&g_toy, toy_scalar, NULL, NULL, NULL};
    struct cp_expr_value v = eval_in("share(op_type == 'Conv') > 5%", &scalars_only);
    cr_expect_eq(v.type, CP_EXPR_ABSENT);
    v = eval_in("count(true) > 1 or device_util > 90%", &scalars_only);
    cr_expect_eq(v.type, CP_EXPR_BOOL);
    cr_expect(v.boolean);
    /* Rows without weights: share and top are absent, count is not. */
    g_toy.n_rows = N_OF(ROWS);
    struct cp_expr_env no_weights = {&g_toy, toy_scalar, toy_n_rows, toy_field, NULL};
    cr_expect_eq(eval_in("share(true)", &no_weights).type, CP_EXPR_ABSENT);
    cr_expect_eq(eval_in("top(op_type)", &no_weights).type, CP_EXPR_ABSENT);
    v = eval_in("count(true)", &no_weights);
    cr_expect_eq(v.type, CP_EXPR_NUM);
    cr_expect_eq(v.num, 7);
    /* No environment at all: only literals. */
    v = eval_in("1 + 1 == 2", NULL);
    cr_expect(v.type == CP_EXPR_BOOL && v.boolean);
}

/* ---- margins ------------------------------------------------------------------------ */

Test(expr, margins_measure_the_distance_from_the_threshold)
{
    static const struct toy_scalar s[] = {
        {"x", CP_EXPR_NUM, 0.95, NULL}, {"y", CP_EXPR_NUM, 0.80, NULL},
        {"u", CP_EXPR_NUM, 0.50, NULL}, {"a", CP_EXPR_ABSENT, 0, NULL},
        {"n", CP_EXPR_NUM, 3, NULL},    {"s", CP_EXPR_STR, 0, "bf16"},
        {"neg", CP_EXPR_NUM, -4, NULL},
    };
    g_toy.scalars = s;
    g_toy.n_scalars = N_OF(s);
    EXPECT_MARGIN("x > 85%", (0.95 - 0.85) / 0.85); /* 0.1176 */
    EXPECT_MARGIN("y > 85%", (0.80 - 0.85) / 0.85); /* fails: negative */
    EXPECT_MARGIN("x >= 85%", (0.95 - 0.85) / 0.85);
    EXPECT_MARGIN("u < 60%", (0.60 - 0.50) / 0.60);
    EXPECT_MARGIN("u <= 40%", (0.40 - 0.50) / 0.40);
    /* The threshold is the constant side, whichever side it is on. */
    EXPECT_MARGIN("85% < x", (0.95 - 0.85) / 0.85);
    EXPECT_MARGIN("60% > u", (0.60 - 0.50) / 0.60);
    /* A zero threshold measures the absolute difference. */
    EXPECT_MARGIN("n > 0", 3);
    EXPECT_MARGIN("neg > -5", 1.0 / 5);
    /* and: the weakest; or: the strongest; not: the opposite. */
    EXPECT_MARGIN("x > 85% and u < 60%", (0.95 - 0.85) / 0.85);
    EXPECT_MARGIN("x > 85% or y > 85%", (0.95 - 0.85) / 0.85);
    EXPECT_MARGIN("y > 85% and u < 60%", (0.80 - 0.85) / 0.85);
    EXPECT_MARGIN("not (y > 85%)", (0.85 - 0.80) / 0.85);
    /* Decided despite an absent side: the known sides count. */
    EXPECT_MARGIN("y > 85% and a > 1", (0.80 - 0.85) / 0.85);
    EXPECT_MARGIN("x > 85% or a > 1", (0.95 - 0.85) / 0.85);
    /* Equalities and booleans are all or nothing. */
    EXPECT_MARGIN("s == 'bf16'", 1);
    EXPECT_MARGIN("s != 'bf16'", -1);
    EXPECT_MARGIN("true", 1);
    EXPECT_MARGIN("x > 85% and s == 'bf16'", (0.95 - 0.85) / 0.85);
    /* Row functions are features like any other. */
    EXPECT_MARGIN("share(op_type == 'Transpose') > 5%", (0.10 - 0.05) / 0.05);
    /* No margin: undecided, or not a condition. */
    EXPECT_NO_MARGIN("a > 1");
    EXPECT_NO_MARGIN("x > 85% and a > 1");
    EXPECT_NO_MARGIN("x + 1");
    EXPECT_NO_MARGIN("s");
    EXPECT_NO_MARGIN("unknown_name > 1"); /* an evaluation error */
}

/* ---- errors ------------------------------------------------------------------------- */

Test(expr, syntax_errors_name_file_line_and_column)
{
    expect_parse_error("memory_bandwidth_util > ", 12, 20, CP_ERR_PARSE,
                       FILE_NAME ":12:44: expected a value after '>', found end of expression");
    expect_parse_error("(device_util > 90%", 12, 20, CP_ERR_PARSE,
                       FILE_NAME ":12:38: expected ')' to close the '(' at 12:20, found end of "
                                 "expression");
    expect_parse_error("share(op_type == 'T' alu_util", 3, 7, CP_ERR_PARSE,
                       FILE_NAME ":3:28: expected ',' or ')' in the arguments of share() opened at "
                                 "3:12, found 'alu_util'");
    /* Newlines move to the next line, column 1. */
    expect_parse_error("device_util > 90% and\n  alu_util <", 5, 9, CP_ERR_PARSE,
                       FILE_NAME ":6:13: expected a value after '<', found end of expression");
    /* Columns count characters, not bytes. */
    expect_parse_error("precision == '\xc2\xb5' \xc2\xa7", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:18: unexpected character '\xc2\xa7'");
    expect_parse_error("x > 3gb", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:6: unknown unit 'gb' (did you mean 'GB'?); units are "
                                 "case-sensitive");
    expect_parse_error("x > 3 GB", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:7: unexpected 'GB'; write a unit right after its number, as "
                                 "in 3GB");
    expect_parse_error("x = 3", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:3: '=' is not an operator; compare with '=='");
    expect_parse_error("x > 1 & y > 2", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:7: '&' is not an operator; use '&&' or 'and'");
    expect_parse_error("x > 5 AND y < 3", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:7: unexpected 'AND'; operators are lower case: 'and'");
    expect_parse_error("0 < x < 1", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:7: comparisons do not chain; write 'a < b and b < c'");
    expect_parse_error("x > 1)", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:6: unexpected ')' with no '(' to close");
    expect_parse_error("x % 2", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:3: '%' must follow a number directly, as in 85%");
    expect_parse_error("op_type == \"Transpose", 2, 4, CP_ERR_PARSE,
                       FILE_NAME ":2:15: unterminated string: no closing \" on this line");
    expect_parse_error("'a\\n'", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:3: unknown escape '\\n' in a string; only \\\\, \\\" and "
                                 "\\' are escapes");
    expect_parse_error("   ", 4, 2, CP_ERR_PARSE, FILE_NAME ":4:2: empty expression");
    expect_parse_error("1.x", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:2: a '.' in a number must be followed by digits, as in 1.5");
    expect_parse_error("1e999 > x", 1, 1, CP_ERR_PARSE,
                       FILE_NAME ":1:1: number '1e999' is out of range");
}

Test(expr, type_and_function_errors_at_parse_time)
{
    expect_parse_error("shar(op_type == 'T') > 5%", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:1: unknown function 'shar' (did you mean 'share'?); "
                                 "functions: count, known, max, min, share, sum, top");
    expect_parse_error("x > 1 and share(op_type == 'T', 1 > 2) > 5%", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:11: share() takes 1 argument, got 2: share(condition)");
    expect_parse_error("sum()", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:1: sum() takes 1 or 2 arguments, got 0: "
                                 "sum(value[, condition])");
    expect_parse_error("top(op_type == 'Conv') > 50%", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:5: top() groups rows by a field and takes its name, as in "
                                 "top(op_type)");
    expect_parse_error("share(count(true) > 1)", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:7: count() cannot be used inside share(): row functions do "
                                 "not nest");
    expect_parse_error("precision < 'bf16'", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:13: '<' compares numbers, but `'bf16'` is a string; strings "
                                 "compare only with == and !=");
    expect_parse_error("3 and x > 1", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:1: 'and' needs a condition, but `3` is a number");
    expect_parse_error("x > 1 or (1 + 2)", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:11: 'or' needs a condition, but `1 + 2` is a number");
    expect_parse_error("1 == 'a'", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:3: '==' compares a number with a string; it is never true");
    expect_parse_error("(x > 1) + 1", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:2: '+' needs a number, but `x > 1` is a condition");
    expect_parse_error("share(1)", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:7: share() needs a condition, but `1` is a number");
    expect_parse_error("not 5%", 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:5: 'not' needs a condition, but `5%` is a number");
}

Test(expr, no_file_name_still_gives_a_position)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_expr *e = NULL;
    cr_expect_eq(cp_expr_parse("x >", NULL, 1, 1, &e, &d), CP_ERR_PARSE);
    cr_expect_str_eq(d.msg, "<expression>:1:4: expected a value after '>', found end of "
                            "expression");
}

Test(expr, limits_on_length_and_nesting)
{
    char deep[512];
    size_t n = 0;
    for (int i = 0; i < CP_EXPR_MAX_DEPTH; i++)
        deep[n++] = '(';
    deep[n++] = 'x';
    for (int i = 0; i < CP_EXPR_MAX_DEPTH; i++)
        deep[n++] = ')';
    deep[n] = '\0';
    struct cp_expr *e = parse_ok(deep); /* exactly the limit */
    cp_expr_free(e);

    n = 0;
    for (int i = 0; i <= CP_EXPR_MAX_DEPTH; i++)
        deep[n++] = '(';
    deep[n++] = 'x';
    deep[n] = '\0';
    expect_parse_error(deep, 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:65: expression nested too deeply (more than 64 levels)");

    n = 0;
    for (int i = 0; i <= CP_EXPR_MAX_DEPTH; i++)
        deep[n++] = '-';
    deep[n++] = '1';
    deep[n] = '\0';
    expect_parse_error(deep, 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:65: expression nested too deeply (more than 64 levels)");

    /* A long flat chain is fine up to the tree's height limit. */
    char *chain = malloc(CP_EXPR_MAX_LEN + 2);
    cr_assert_not_null(chain);
    n = 0;
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(chain + n, 8, "%s1", i ? "+" : "");
    e = parse_ok(chain);
    struct cp_expr_value v;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(cp_expr_eval(e, &g_env, &v, &d), CP_OK);
    cr_expect_eq(v.num, 200);
    cp_expr_free(e);
    n = 0;
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(chain + n, 8, "%s1", i ? "+" : "");
    cp_diag_init(&d);
    e = NULL;
    cr_expect_eq(cp_expr_parse(chain, FILE_NAME, 1, 1, &e, &d), CP_ERR_INVALID);
    cr_expect_not_null(strstr(d.msg, "expression too deep"), "%s", d.msg);

    memset(chain, ' ', CP_EXPR_MAX_LEN + 1);
    chain[0] = 'x';
    chain[CP_EXPR_MAX_LEN + 1] = '\0';
    expect_parse_error(chain, 1, 1, CP_ERR_INVALID,
                       FILE_NAME ":1:1: expression is longer than 4096 bytes");
    chain[CP_EXPR_MAX_LEN] = '\0';
    e = parse_ok(chain);
    cp_expr_free(e);
    free(chain);
}

Test(expr, unknown_names_are_caught_with_a_suggestion)
{
    expect_check_error("cache_mis_rate > 30%",
                       FILE_NAME ":1:1: unknown feature 'cache_mis_rate' (did you mean "
                                 "'cache_miss_rate'?)");
    expect_check_error("device_util > 90% and alu_utl < 60%",
                       FILE_NAME ":1:23: unknown feature 'alu_utl' (did you mean 'alu_util'?)");
    expect_check_error("share(op_typ == 'Transpose') > 5%",
                       FILE_NAME ":1:7: unknown feature 'op_typ' (did you mean 'op_type'?)");
    expect_check_error("op_type == 'Conv'", FILE_NAME
                       ":1:1: 'op_type' is a field of rows, not a feature of the whole "
                       "trace; use it inside share(), count(), top(), sum(), max() or min()");
    expect_check_error("top(op_tpe) > 30%",
                       FILE_NAME ":1:5: unknown field 'op_tpe' (did you mean 'op_type'?)");
    expect_check_error("top(device_util) > 30%",
                       FILE_NAME ":1:5: top() groups rows by a field, but 'device_util' is a "
                                 "feature of the whole trace");
    expect_check_error("completely_different > 1",
                       FILE_NAME ":1:1: unknown feature 'completely_different'");

    /* Fields are fine inside row functions, scalars everywhere. */
    struct cp_expr *e = parse_ok("share(op_type == 'Conv' and device_util > 1) > 0 and x.y > 1");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(
        cp_expr_check(e, KNOWN_SCALARS, N_OF(KNOWN_SCALARS), KNOWN_FIELDS, N_OF(KNOWN_FIELDS), &d),
        CP_OK, "%s", d.msg);
    cp_expr_free(e);
}

Test(expr, evaluation_errors_name_the_place)
{
    struct cp_expr *e = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_expr_parse("device_util > 1 or no_such_thing > 2", FILE_NAME, 7, 10, &e, &d),
                 CP_OK);
    struct cp_expr_value v;
    cr_expect_eq(cp_expr_eval(e, &g_env, &v, &d), CP_ERR_INVALID);
    cr_expect_str_eq(d.msg, FILE_NAME ":7:29: unknown feature 'no_such_thing'");
    cr_expect_eq(v.type, CP_EXPR_ABSENT);
    cp_expr_free(e);

    cp_diag_init(&d);
    cr_assert_eq(cp_expr_parse("precision > 1", FILE_NAME, 2, 3, &e, &d), CP_OK);
    cr_expect_eq(cp_expr_eval(e, &g_env, &v, &d), CP_ERR_INVALID);
    cr_expect_str_eq(d.msg, FILE_NAME ":2:3: '>' needs a number, but `precision` is a string");
    cp_expr_free(e);

    cp_diag_init(&d);
    cr_assert_eq(cp_expr_parse("share(op_type)", FILE_NAME, 1, 1, &e, &d), CP_OK);
    cr_expect_eq(cp_expr_eval(e, &g_env, &v, &d), CP_ERR_INVALID);
    cr_expect_str_eq(d.msg, FILE_NAME ":1:7: the condition needs true/false, but `op_type` is a "
                                      "string (in a row)");
    cp_expr_free(e);

    cp_diag_init(&d);
    cr_assert_eq(cp_expr_parse("precision == 1", FILE_NAME, 1, 1, &e, &d), CP_OK);
    cr_expect_eq(cp_expr_eval(e, &g_env, &v, &d), CP_ERR_INVALID);
    cr_expect_str_eq(d.msg, FILE_NAME ":1:11: '==' compares a string with a number");
    cp_expr_free(e);
}

/* ---- identifiers -------------------------------------------------------------------- */

struct names {
    char buf[512];
    int n;
};

static void collect(void *ctx, const struct cp_expr_ident *id)
{
    struct names *ns = ctx;
    size_t len = strlen(ns->buf);
    snprintf(ns->buf + len, sizeof ns->buf - len, "%s%s%s@%d:%d", ns->n ? " " : "", id->name,
             id->in_row ? "[row]" : "", id->line, id->col);
    ns->n++;
}

Test(expr, identifiers_lists_each_name_once_in_source_order)
{
    struct cp_expr *e = parse_ok("share(op_type == 'T' and device_util > 1) > 5% and device_util "
                                 "> x.y and top(op_type) > device_util");
    struct names ns = {"", 0};
    cp_expr_identifiers(e, collect, &ns);
    /* top(op_type) repeats op_type in a row: listed once. */
    cr_expect_str_eq(ns.buf, "op_type[row]@1:7 device_util[row]@1:26 device_util@1:52 x.y@1:66");
    cp_expr_free(e);
}

/* ---- robustness --------------------------------------------------------------------- */

static uint64_t next_rand(uint64_t *s)
{
    /* xorshift64*: deterministic across platforms. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static void ignore(void *ctx, const struct cp_expr_ident *id)
{
    (void)id;
    (*(int *)ctx)++;
}

/* Parse; when it parses, check, evaluate, take the margin and list the
 * names. Nothing may crash, leak or fail an assertion of ASan/UBSan; errors
 * must carry a message. */
static void exercise(const char *text, int *n_ok)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_expr *e = NULL;
    enum cp_status st = cp_expr_parse(text, FILE_NAME, 3, 5, &e, &d);
    if (st != CP_OK) {
        cr_assert_null(e);
        cr_assert(strncmp(d.msg, FILE_NAME ":", strlen(FILE_NAME) + 1) == 0, "'%s' -> '%s'", text,
                  d.msg);
        return;
    }
    (*n_ok)++;
    cp_diag_init(&d);
    (void)cp_expr_check(e, KNOWN_SCALARS, N_OF(KNOWN_SCALARS), KNOWN_FIELDS, N_OF(KNOWN_FIELDS),
                        &d);
    struct cp_expr_value v;
    cp_diag_init(&d);
    if (cp_expr_eval(e, &g_env, &v, &d) != CP_OK)
        cr_assert(d.msg[0] != '\0');
    double m;
    (void)cp_expr_margin(e, &g_env, &m);
    int count = 0;
    cp_expr_identifiers(e, ignore, &count);
    cp_expr_free(e);
}

Test(expr, random_junk_never_crashes)
{
    static const char *const frags[] = {
        "share(", "count(",    "top(",      "sum(",        "max(",
        "min(",   "known(",    "(",         ")",           ",",
        " and ",  " or ",      "not ",      "!",           "&&",
        "||",     "<",         "<=",        ">",           ">=",
        "==",     "!=",        "+",         "-",           "*",
        "/",      "85%",       "3GB",       "2GiB",        "20ms",
        "1e3",    ".5",        "0",         "'Conv'",      "\"",
        "'",      "op_type",   "alu_util",  "device_util", "absent_feature",
        "zero",   "x.y",       "fused",     "time_share",  "true",
        "false",  "\xc2\xb5s", "\xff",      "\n",          " ",
        "%",      "=",         "\\",        "1e999",       "unknown",
        "5us",    "100GB/s",   "precision",
    };
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    int n_ok = 0;
    char buf[256];
    for (int iter = 0; iter < 4000; iter++) {
        size_t n = 0;
        int parts = 1 + (int)(next_rand(&seed) % 12);
        for (int k = 0; k < parts; k++) {
            uint64_t r = next_rand(&seed);
            if (r % 5 == 0) {
                /* a random byte, never NUL */
                buf[n++] = (char)(1 + (r >> 8) % 255);
            } else {
                const char *f = frags[(r >> 8) % N_OF(frags)];
                size_t fl = strlen(f);
                if (n + fl >= sizeof buf - 1)
                    break;
                memcpy(buf + n, f, fl);
                n += fl;
            }
        }
        buf[n] = '\0';
        exercise(buf, &n_ok);
    }
    /* Mutations of valid expressions: delete, insert, duplicate. */
    static const char *const seeds[] = {
        "memory_bandwidth_util > 85% and cache_miss_rate > 30%",
        "share(op_type == \"Transpose\") > 5%",
        "device_util > 90% and alu_util < 60% or not known(absent_feature)",
        "top(op_type, not fused) > 10% and max(alu_util, dtype == 'f32') < 1 - 20%",
    };
    for (int iter = 0; iter < 4000; iter++) {
        const char *s0 = seeds[iter % N_OF(seeds)];
        size_t len = strlen(s0);
        memcpy(buf, s0, len + 1);
        int edits = 1 + (int)(next_rand(&seed) % 4);
        for (int k = 0; k < edits && len > 0 && len < sizeof buf - 2; k++) {
            uint64_t r = next_rand(&seed);
            size_t at = (size_t)((r >> 8) % len);
            switch (r % 3) {
            case 0:
                memmove(buf + at, buf + at + 1, len - at);
                len--;
                break;
            case 1:
                memmove(buf + at + 1, buf + at, len - at + 1);
                buf[at] = "()<>=!&|%'\"., x0"[(r >> 20) % 16];
                len++;
                break;
            default:
                buf[at] = (char)(1 + (r >> 16) % 255);
                break;
            }
        }
        exercise(buf, &n_ok);
    }
    /* Some of them parsed, so evaluation was exercised too. */
    cr_expect_gt(n_ok, 100, "only %d of the random strings parsed", n_ok);
}
