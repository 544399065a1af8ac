/*
 * rules/constraints.h: the limits a tuned candidate must respect.
 *
 * `--constraints "memory<3GB,precision_loss<1%"` says what the user will not
 * trade for speed. This module parses that text into at most one bound per
 * quantity, checks measured values against it, and prints it back in one
 * canonical form (for reports, the knowledge base and the tuner's command
 * lines). The grammar is docs/constraints.md:
 *
 *   constraints  constraint (',' constraint)*
 *   constraint   name ['[' output ']'] op value unit   (spaces allowed between parts)
 *   op           <  <=  >  >=
 *
 * `precision_loss[NAME]<0.5%` bounds one output of a model with several
 * (its relative L2 error alone); without [NAME] precision_loss is over all
 * outputs together. Only precision_loss takes an output; NAME is the
 * output's name as the model gives it, without ']' or ','.
 *
 *   name            bound   units                           stored in
 *   memory          upper   B KB MB GB TB, KiB MiB GiB TiB  bytes
 *   precision_loss  upper   %                               percent
 *   latency         upper   ns us µs ms s                   seconds
 *   throughput      lower   /s, ips (items per second) items per second
 *
 * Every value needs its unit (a bare "3" is an error, never a guess), KB/MB/
 * GB are powers of 1000 and KiB/MiB/GiB powers of 1024. precision_loss is kept
 * in percent because that is how it is measured (cp_precision_loss,
 * `compare`'s precision_loss_pct): `precision_loss<1%` holds for a measured
 * 0.65. A bound in the wrong direction ("memory>3GB") is an error.
 */
#ifndef CP_RULES_CONSTRAINTS_H
#define CP_RULES_CONSTRAINTS_H

#include "core/core.h"

enum cp_constraint_kind {
    CP_CONSTRAINT_MEMORY = 0,
    CP_CONSTRAINT_PRECISION_LOSS,
    CP_CONSTRAINT_LATENCY,
    CP_CONSTRAINT_THROUGHPUT,
};
#define CP_CONSTRAINT_KIND_COUNT 4

enum cp_constraint_op {
    CP_CONSTRAINT_LT = 0,
    CP_CONSTRAINT_LE,
    CP_CONSTRAINT_GT,
    CP_CONSTRAINT_GE,
};

#define CP_CONSTRAINT_OUTPUT_MAX 128 /* an output name's bytes, NUL included */
#define CP_CONSTRAINTS_MAX       16  /* constraints in one list */

struct cp_constraint {
    enum cp_constraint_kind kind;
    enum cp_constraint_op op;
    double value; /* base units: bytes, percent, seconds, items per second */
    char output[CP_CONSTRAINT_OUTPUT_MAX]; /* precision_loss of one output; "" all of them */
};

/* At most one constraint per kind and output, in the order given. */
struct cp_constraints {
    size_t n;
    struct cp_constraint items[CP_CONSTRAINTS_MAX];
};

/* No constraints. */
void cp_constraints_init(struct cp_constraints *c);

/* "memory", "precision_loss", "latency", "throughput". Never NULL. */
const char *cp_constraint_kind_name(enum cp_constraint_kind k);

/* The kind named `name` (exactly as above). false for anything else. */
bool cp_constraint_kind_parse(const char *name, enum cp_constraint_kind *out);

/* "<", "<=", ">", ">=". */
const char *cp_constraint_op_text(enum cp_constraint_op op);

/*
 * Parse `text` as given to --constraints. OUT: *out (all or nothing: on
 * failure it holds no constraints). Errors are CP_ERR_USAGE with a message
 * that starts "--constraints: '<the item>': " and says what would be
 * accepted, e.g. "--constraints: 'memroy<3GB': unknown constraint 'memroy'
 * (did you mean 'memory'?); known: memory, precision_loss, latency,
 * throughput". An empty text is an error too (omit the flag instead).
 */
enum cp_status cp_constraints_parse(const char *text, struct cp_constraints *out,
                                    struct cp_diag *d);

/* The same, with `origin` in place of "--constraints" in messages (say
 * "pipeline.yaml:4:15" when the text comes from a file). */
enum cp_status cp_constraints_parse_from(const char *origin, const char *text,
                                         struct cp_constraints *out, struct cp_diag *d);

/* The value part of an item ("2.5s", "3GB", "0.5%", "50/s"), read as the
 * grammar reads it, for other grammars built on the same quantities (the
 * serving monitor's conditions, docs/serving.md): `item` is the whole item
 * (len bytes, not NUL-terminated), the value starts at `value_at`, and `op`
 * is the operator before it (for messages). Errors are CP_ERR_USAGE,
 * "<origin>: '<item>': ...", as above. OUT: *value in base units. */
enum cp_status cp_constraint_parse_value(const char *origin, const char *item, size_t len,
                                         size_t value_at, enum cp_constraint_kind kind,
                                         enum cp_constraint_op op, double *value,
                                         struct cp_diag *d);

/* The constraint on `kind` (for precision_loss: over all outputs), or NULL
 * when there is none. Owned by `c`. */
const struct cp_constraint *cp_constraints_find(const struct cp_constraints *c,
                                                enum cp_constraint_kind kind);

/* The constraint on `kind` for output `output` ("" as cp_constraints_find),
 * or NULL. */
const struct cp_constraint *cp_constraints_find_output(const struct cp_constraints *c,
                                                       enum cp_constraint_kind kind,
                                                       const char *output);

/* How many precision_loss constraints name an output. */
size_t cp_constraints_n_outputs(const struct cp_constraints *c);

/* Whether `value` (base units, as in struct cp_constraint) satisfies `k`.
 * NaN never does; +inf satisfies only a lower bound. */
bool cp_constraint_holds(const struct cp_constraint *k, double value);

/*
 * Check a measured value against the constraint named `name`. OUT: *ok: true
 * when `c` has no constraint on `name` or `value` satisfies it. Errors:
 * CP_ERR_INVALID when `name` is not a constraint name (a caller's bug);
 * *ok is then false.
 */
enum cp_status cp_constraints_check(const struct cp_constraints *c, const char *name, double value,
                                    bool *ok);

/* Append the canonical text of `c` to `out`: the constraints in the order
 * given, joined by ',', each value in the unit that prints it shortest
 * ("memory<3GB", "memory<=2GiB", "precision_loss<1%", "latency<20ms",
 * "throughput>=200/s", "precision_loss[logits]<0.5%"). Parsing it gives
 * back the same constraints. Nothing
 * is appended when there are none. */
void cp_constraints_format(const struct cp_constraints *c, struct cp_buf *out);

/* A value of `kind` in base units, printed the same way ("3GB", "0.65%",
 * "4.2ms", "250/s"), for messages such as "latency 4.2ms > 4ms". */
void cp_constraint_format_value(enum cp_constraint_kind kind, double value, char out[48]);

#endif
