/* The fusion pattern table (graph/pattern.h) is the one description of the
 * patterns: every pass it names is a conversion pass, docs/features.md's
 * pattern table lists exactly its kinds and passes, and the rule engine has
 * the unfused_<kind> features for each kind. */
#include "atc_bridge/passes/pass.h"
#include "graph/pattern.h"
#include "rules/features.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(pattern_table, every_fixing_pass_is_a_conversion_pass)
{
    for (int i = 0; i < CP_PATTERN_COUNT; i++) {
        const struct cp_pattern_def *p = cp_pattern_get((enum cp_pattern_id)i);
        if (!p->fix_pass[0])
            continue;
        cr_assert_not_null(cp_pass_lookup(p->fix_pass), "%s: no pass %s", p->kind, p->fix_pass);
    }
    static const char *const named[] = {CP_PASS_FLASH_ATTENTION,
                                        CP_PASS_LAYERNORM,
                                        CP_PASS_GROUPNORM,
                                        CP_PASS_GELU,
                                        CP_PASS_CONV_BIAS_ACT,
                                        CP_PASS_MATMUL_BIAS_ACT,
                                        CP_PASS_CONV_BN,
                                        CP_PASS_LAYOUT_TRANSFORM,
                                        CP_PASS_TRANSPOSE_ROUNDTRIP};
    for (size_t i = 0; i < sizeof named / sizeof *named; i++)
        cr_assert_not_null(cp_pass_lookup(named[i]), "%s", named[i]);
}

/* The rows of docs/features.md's "## Patterns" table: kind and the fix_pass
 * cell, as written. */
struct doc_row {
    char kind[64];
    char pass[512];
};

static size_t read_doc_rows(struct doc_row *rows, size_t cap)
{
    FILE *fp = fopen(CP_SOURCE_DIR "/docs/features.md", "r");
    cr_assert_not_null(fp);
    char line[2048];
    bool in_section = false, in_table = false;
    size_t n = 0;
    while (fgets(line, sizeof line, fp)) {
        if (strncmp(line, "## ", 3) == 0)
            in_section = strncmp(line, "## Patterns", 11) == 0;
        if (!in_section)
            continue;
        if (strncmp(line, "| kind |", 8) == 0) {
            in_table = true;
            continue;
        }
        if (!in_table || line[0] != '|' || strncmp(line, "|---", 4) == 0 ||
            strncmp(line, "| ---", 5) == 0)
            continue;
        /* | `kind` | what | pass | */
        char *k = strchr(line, '`');
        char *ke = k ? strchr(k + 1, '`') : NULL;
        char *last = strrchr(line, '|');
        char *prev = last;
        while (prev > line && *--prev != '|')
            ;
        cr_assert(k && ke && last && prev > line, "malformed row: %s", line);
        cr_assert_lt(n, cap);
        snprintf(rows[n].kind, sizeof rows[n].kind, "%.*s", (int)(ke - k - 1), k + 1);
        snprintf(rows[n].pass, sizeof rows[n].pass, "%.*s", (int)(last - prev - 1), prev + 1);
        n++;
    }
    fclose(fp);
    return n;
}

Test(pattern_table, docs_features_lists_every_pattern_and_its_pass)
{
    struct doc_row rows[32];
    size_t n = read_doc_rows(rows, 32);
    cr_assert_gt(n, 0, "no pattern table in docs/features.md");
    for (int i = 0; i < CP_PATTERN_COUNT; i++) {
        const struct cp_pattern_def *p = cp_pattern_get((enum cp_pattern_id)i);
        char want[128];
        if (p->fix_pass[0])
            snprintf(want, sizeof want, "`%s`", p->fix_pass);
        else
            snprintf(want, sizeof want, "none");
        bool found = false;
        for (size_t r = 0; r < n && !found; r++)
            found = strcmp(rows[r].kind, p->kind) == 0 && strstr(rows[r].pass, want);
        cr_assert(found, "docs/features.md has no row for %s fixed by %s", p->kind, want);
    }
    for (size_t r = 0; r < n; r++) {
        bool known = false;
        for (int i = 0; i < CP_PATTERN_COUNT && !known; i++)
            known = strcmp(cp_pattern_get((enum cp_pattern_id)i)->kind, rows[r].kind) == 0;
        cr_assert(known, "docs/features.md lists %s, which graph/pattern.h does not", rows[r].kind);
    }
}

Test(pattern_table, every_kind_has_its_unfused_features)
{
    size_t n;
    const char *const *names = cp_features_scalar_names(&n);
    for (int i = 0; i < CP_PATTERN_COUNT; i++) {
        const char *kind = cp_pattern_get((enum cp_pattern_id)i)->kind;
        for (int s = 0; s < 2; s++) {
            char want[96];
            snprintf(want, sizeof want, "unfused_%s_%s", kind, s ? "share" : "count");
            bool found = false;
            for (size_t k = 0; k < n && !found; k++)
                found = strcmp(names[k], want) == 0;
            cr_assert(found, "no feature %s", want);
        }
    }
}
