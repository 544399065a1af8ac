/*
 * rules/expr_internal.h: the parsed form of an expression, shared by the
 * parser (expr_parse.c) and the evaluator (expr_eval.c). Private to rules/.
 *
 * The lexer (expr_lex.c) turns the whole text into tokens first; an
 * expression then owns one block of nodes and one pool of strings, both sized
 * from the text before parsing, so building the tree never allocates.
 */
#ifndef CP_RULES_EXPR_INTERNAL_H
#define CP_RULES_EXPR_INTERNAL_H

#include "rules/expr.h"

enum cp_expr_op {
    CP_EOP_NUM = 0,
    CP_EOP_STR,
    CP_EOP_BOOL,
    CP_EOP_IDENT,
    CP_EOP_NEG,
    CP_EOP_NOT,
    CP_EOP_ADD,
    CP_EOP_SUB,
    CP_EOP_MUL,
    CP_EOP_DIV,
    CP_EOP_LT,
    CP_EOP_LE,
    CP_EOP_GT,
    CP_EOP_GE,
    CP_EOP_EQ,
    CP_EOP_NE,
    CP_EOP_AND,
    CP_EOP_OR,
    CP_EOP_CALL,
};

enum cp_expr_fn {
    CP_EFN_COUNT = 0,
    CP_EFN_KNOWN,
    CP_EFN_MAX,
    CP_EFN_MIN,
    CP_EFN_SHARE,
    CP_EFN_SUM,
    CP_EFN_TOP,
};

struct cp_expr_node {
    enum cp_expr_op op;
    enum cp_expr_type type;     /* static type; CP_EXPR_ABSENT: known only at run time */
    int line, col;              /* the token that made the node (the operator of a binary) */
    int sline, scol;            /* where the node's source text starts */
    size_t off, end;            /* its source text: bytes [off, end) of the expression */
    int height;                 /* 1 for a leaf */
    bool in_row;                /* inside the arguments of a row function */
    bool constant;              /* no feature and no function below */
    double num;                 /* CP_EOP_NUM */
    bool boolean;               /* CP_EOP_BOOL */
    const char *str;            /* CP_EOP_STR value, CP_EOP_IDENT name, CP_EOP_CALL name */
    enum cp_expr_fn fn;         /* CP_EOP_CALL */
    int n_args;                 /* CP_EOP_CALL: 1 or 2 */
    struct cp_expr_node *a, *b; /* operands, or a call's arguments */
};

struct cp_expr {
    char *text;
    char *file;
    struct cp_expr_node *nodes;
    size_t n_nodes, cap_nodes;
    char *pool; /* identifier names and string literals, NUL-terminated */
    size_t pool_len, pool_cap;
    struct cp_expr_node *root;
};

enum cp_expr_tok {
    CP_TOK_END = 0,
    CP_TOK_NUM,
    CP_TOK_STR,
    CP_TOK_IDENT,
    CP_TOK_LPAREN,
    CP_TOK_RPAREN,
    CP_TOK_COMMA,
    CP_TOK_PLUS,
    CP_TOK_MINUS,
    CP_TOK_STAR,
    CP_TOK_SLASH,
    CP_TOK_LT,
    CP_TOK_LE,
    CP_TOK_GT,
    CP_TOK_GE,
    CP_TOK_EQ,
    CP_TOK_NE,
    CP_TOK_AND,
    CP_TOK_OR,
    CP_TOK_NOT,
    CP_TOK_TRUE,
    CP_TOK_FALSE,
};

struct cp_expr_token {
    enum cp_expr_tok kind;
    int line, col;
    size_t off, len; /* bytes of the source text */
    double num;
    const char *str; /* CP_TOK_STR contents, CP_TOK_IDENT name: in the pool */
};

/* Tokenize e->text (already copied into `e`, with e->pool allocated at
 * 2 * strlen + 2 bytes) into toks[], which has room for strlen + 1 tokens;
 * the last is CP_TOK_END. (line, col) is where the text starts. OUT: *n_toks.
 * Errors: CP_ERR_PARSE with "FILE:LINE:COL: " in `d`. */
enum cp_status cp_expr_lex(struct cp_expr *e, int line, int col, struct cp_expr_token *toks,
                           size_t *n_toks, struct cp_diag *d);

/* Whether `name` is one of the units written after numbers ("GB", "%"). */
bool cp_expr_is_unit(const char *name);

/* Record "FILE:LINE:COL: <message>" in `d` and return `st`. */
enum cp_status cp_expr_errat(const struct cp_expr *e, struct cp_diag *d, enum cp_status st,
                             int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* "FILE:LINE:COL: " into out[cap]. */
void cp_expr_where_at(const struct cp_expr *e, int line, int col, char *out, size_t cap);

/* The nearest of names[0..n) to `s` by edit distance, when nearer than
 * *best_d (which is updated); NULL if none is. */
const char *cp_expr_nearest(const char *s, const char *const *names, size_t n, size_t *best_d);

/* Whether an edit distance is small enough for "did you mean" about `s`. */
bool cp_expr_close_enough(const char *s, size_t dist);

/* The function's name as written ("share"). */
const char *cp_expr_fn_name(enum cp_expr_fn fn);

/* The operator as written ("<=", "and"), for messages. */
const char *cp_expr_op_text(enum cp_expr_op op);

/* "FILE:LINE:COL: " prefix for node `n`, written into out[cap]. */
void cp_expr_where(const struct cp_expr *e, const struct cp_expr_node *n, char *out, size_t cap);

#endif
