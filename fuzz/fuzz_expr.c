/* The rule language's expressions (the indicators of a rule pack): parse,
 * check names, and evaluate against a small made-up environment (three
 * kernel rows; scalars of each type, one absent), as the rule engine
 * does with a trace's features. */
#include "harness.h"

#include "rules/expr.h"

#include <stdlib.h>
#include <string.h>

static const char *const scalars[] = {"x", "s", "b", "missing", "memory_bandwidth_util"};
static const char *const fields[] = {"op_type", "node", "time_share"};
static const char *const op_types[] = {"Conv", "Transpose", "MatMul"};

static bool env_scalar(void *ctx, const char *name, struct cp_expr_value *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    if (strcmp(name, "x") == 0 || strcmp(name, "memory_bandwidth_util") == 0) {
        out->type = CP_EXPR_NUM;
        out->num = 0.9;
    } else if (strcmp(name, "s") == 0) {
        out->type = CP_EXPR_STR;
        out->str = "NCHW";
    } else if (strcmp(name, "b") == 0) {
        out->type = CP_EXPR_BOOL;
        out->boolean = true;
    } else if (strcmp(name, "missing") == 0) {
        out->type = CP_EXPR_ABSENT;
    } else {
        return false;
    }
    return true;
}

static size_t env_rows(void *ctx)
{
    (void)ctx;
    return 3;
}

static bool env_field(void *ctx, size_t row, const char *name, struct cp_expr_value *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    if (row >= 3)
        fuzz_fail("the evaluator asked for row %zu of 3", row);
    if (strcmp(name, "op_type") == 0 || strcmp(name, "node") == 0) {
        out->type = CP_EXPR_STR;
        out->str = op_types[row];
    } else if (strcmp(name, "time_share") == 0) {
        out->type = CP_EXPR_NUM;
        out->num = (double)(row + 1) / 6.0;
    } else {
        return false;
    }
    return true;
}

static double env_weight(void *ctx, size_t row)
{
    (void)ctx;
    return (double)(row + 1) / 6.0;
}

static void count_ident(void *ctx, const struct cp_expr_ident *id)
{
    if (!id->name)
        fuzz_fail("an identifier without a name");
    (*(size_t *)ctx)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    if (!text)
        return 0;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_expr *e = NULL;
    enum cp_status st = cp_expr_parse(text, "fuzz.yaml", 1, 1, &e, &d);
    fuzz_expect_refusal("cp_expr_parse", st, &d);
    if (st == CP_OK) {
        if (strcmp(cp_expr_text(e), text) != 0)
            fuzz_fail("cp_expr_text is not the text parsed");
        (void)cp_expr_static_type(e);
        size_t n = 0;
        cp_expr_identifiers(e, count_ident, &n);
        cp_diag_init(&d);
        st = cp_expr_check(e, scalars, sizeof scalars / sizeof *scalars, fields,
                           sizeof fields / sizeof *fields, &d);
        fuzz_expect_refusal("cp_expr_check", st, &d);
        struct cp_expr_env env = {
            .scalar = env_scalar, .n_rows = env_rows, .field = env_field, .row_weight = env_weight};
        struct cp_expr_value v;
        cp_diag_init(&d);
        fuzz_expect_refusal("cp_expr_eval", cp_expr_eval(e, &env, &v, &d), &d);
        double margin;
        (void)cp_expr_margin(e, &env, &margin);
        /* and with no rows at all: every row function is absent */
        struct cp_expr_env bare = {.scalar = env_scalar};
        cp_diag_init(&d);
        fuzz_expect_refusal("cp_expr_eval", cp_expr_eval(e, &bare, &v, &d), &d);
    } else if (e) {
        fuzz_fail("cp_expr_parse failed but returned an expression");
    }
    cp_expr_free(e);
    free(text);
    return 0;
}
