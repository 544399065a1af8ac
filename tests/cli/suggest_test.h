/* What the `cannprof suggest` tests share (tests/cli/test_cli_suggest.c on
 * a trace with injected kernel times, tests/perf/test_perf_suggest.c on a
 * measured one): suggest's JSON report of a trace, and the LayerNorm
 * change that must paste into `cannprof convert` and take effect. They
 * assert with Criterion, as cli_test.h does. */
#ifndef CP_TESTS_SUGGEST_TEST_H
#define CP_TESTS_SUGGEST_TEST_H

#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* `suggest TRACE --constraints C -o <scratch>/s.json --no-calibrate`,
 * exit 0; the report, parsed. */
static inline json_t *st_suggest_json(const char *trace, const char *constraints)
{
    char *out = cp_t_path("s.json");
    struct cp_run r;
    cp_run_cli(&r, "suggest", trace, "--constraints", constraints, "-o", out, "--no-calibrate",
               NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    json_t *j = cp_t_json_file(out);
    cr_assert_not_null(j, "%s is not JSON (see stderr)", out);
    free(out);
    return j;
}

/* The trace of the opset-14 transformer converted with LayerNorm fusion
 * off has a LayerNorm finding; its convert command (with the switch file
 * it names), run where the report says to run it, writes a model whose
 * LayerNorm fusion is no longer off. */
static inline void st_expect_layernorm_change_takes_effect(const char *trace)
{
    json_t *j = st_suggest_json(trace, "precision_loss<1%");
    json_t *findings = json_object_get(j, "findings"), *cmds = json_object_get(j, "commands");
    cr_assert_eq(json_array_size(findings), json_array_size(cmds));
    size_t k = json_array_size(findings);
    for (size_t i = 0; i < json_array_size(findings); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(findings, i), "root_cause")),
                   "layernorm_decomposed") == 0)
            k = i;
    cr_assert(k < json_array_size(findings), "no layernorm finding");
    json_t *cmd = json_array_get(cmds, k);
    const char *convert = json_string_value(json_object_get(cmd, "convert"));
    const char *switches = json_string_value(json_object_get(cmd, "switch_file"));
    cr_assert_not_null(convert);
    cr_expect_eq(strncmp(convert, "cannprof convert ", 17), 0, "%s", convert);
    /* paste: the switch file it names (if any) and the command, run where
     * the report says to run it */
    cr_assert_eq(chdir(cp_t_dir), 0);
    if (switches && *switches)
        cr_assert_eq(cp_file_write_atomic("switches.cfg", switches, strlen(switches), NULL), CP_OK);
    char *argv[32] = {(char *)CP_CLI};
    size_t n = 1;
    char *copy = strdup(convert + strlen("cannprof "));
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t && n < 31;
         t = strtok_r(NULL, " ", &save))
        argv[n++] = t;
    argv[n] = NULL;
    struct cp_run r;
    cp_run_argv(&r, argv);
    cr_assert_eq(r.exit_code, 0, "%s: %s", convert, r.err);
    cp_run_release(&r);
    char *om = cp_t_path("suggested.om");
    cp_run_cli(&r, "info", om, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *info = json_loads(r.out, 0, NULL);
    const char *offs =
        json_string_value(json_object_get(json_object_get(info, "config"), "fusion_switches"));
    cr_expect(offs && !strstr(offs, "LayerNormFusionPass"), "still off: %s", offs);
    json_decref(info);
    cp_run_release(&r);
    free(copy);
    free(om);
    json_decref(j);
}

#endif
