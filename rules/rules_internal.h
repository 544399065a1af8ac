/* rules internals shared by the loader (rules_load.c) and the engine
 * (rules_eval.c). Not a public header. */
#ifndef CP_RULES_INTERNAL_H
#define CP_RULES_INTERNAL_H

#include "rules/expr.h"
#include "rules/rules.h"

/* An expression with where it came from. */
struct cp_rexpr {
    struct cp_expr *e;
};

struct cp_root_cause {
    char *name;
    struct cp_expr **evidence;
    size_t n_evidence;
    struct cp_expr *affected_share; /* share(<affected>) */
    struct cp_expr *affected_row;   /* count(<affected>), evaluated one row at a time */
    struct cp_expr *share;          /* share of the iteration time, when not kernels' */
    char *change_summary;
    char **convert, **fusion_switches, **runtime; /* NULL-terminated */
    double speedup, speedup_lo, speedup_hi;
    double risk_precision_loss; /* percent, NaN unsaid */
    double risk_memory;         /* relative, NaN unsaid */
};

struct cp_rule {
    char *name;
    char *bottleneck_type;
    char *title;
    char *file; /* where it was loaded from */
    int line;
    bool targets[3];   /* by enum cp_target */
    unsigned profiles; /* bit per enum cp_profile_kind its pack covers */
    struct cp_expr **indicators;
    size_t n_indicators;
    struct cp_root_cause *causes;
    size_t n_causes;
};

struct cp_rule_set {
    struct cp_rule *rules;
    size_t n, cap;
};

void cp_rule_release(struct cp_rule *r);
void cp_strv_free(char **v);

#endif
