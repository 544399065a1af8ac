/* What the tuner leaves in the knowledge base when it is stopped half-way
 * through recording a step: the candidate, its raw samples and its
 * outcome go in together or not at all. (The loop's decisions are pinned
 * down by test_tune.c.) */
#include "support/cli.h"
#include "support/db.h"
#include "support/run.h"
#include "tuner/tuner.h"

#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

TestSuite(tune_kb, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 600);

static int64_t count(const char *kb_path, const char *sql)
{
    struct cp_kb *kb = cp_t_kb(kb_path);
    cr_assert_not_null(kb, "open %s (see stderr)", kb_path);
    int64_t v = -1;
    cr_assert(cp_t_sql_int(cp_kb_db(kb), sql, &v), "%s (see stderr)", sql);
    cp_kb_close(kb);
    return v;
}

Test(tune_kb, a_step_whose_samples_fail_to_record_leaves_no_candidate)
{
    char *kb_path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = cp_t_kb(kb_path);
    cr_assert_not_null(kb, "open %s (see stderr)", kb_path);
    cp_kb_close(kb);
    /* The database refuses every sample row, as a full disk or a crash
     * right after the candidate row would stop the writer. */
    cr_assert(cp_t_sql_exec(kb_path, "CREATE TRIGGER no_samples BEFORE INSERT ON measurements "
                                     "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"),
              "(see stderr)");

    char model[2048];
    struct cp_tune_opts o;
    cp_tune_opts_init(&o);
    o.model = cp_example_model(model, sizeof model, "resnet_tiny");
    o.out_dir = cp_t_path("out");
    o.kb_path = kb_path;
    o.budget = 3;
    o.rounds = 6;
    o.warmup = 1;
    o.threads = 1;
    o.use_kb_strategies = false;
    struct cp_tune_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_tune(&o, &r, &d);
    if (st == CP_OK)
        cp_tune_result_release(&r);
    cr_assert_neq(st, CP_OK, "no measured candidate within the budget: the failure never hit");
    cr_assert(strstr(d.msg, "injected failure"), "%s", d.msg);

    /* The baseline was recorded before; the measured candidate is not
     * there without its samples, nor is its outcome. */
    cr_assert_eq(count(kb_path, "SELECT count(*) FROM candidates WHERE step = 0"), 1);
    cr_assert_eq(count(kb_path, "SELECT count(*) FROM candidates c WHERE measured_gain IS NOT "
                                "NULL AND NOT EXISTS (SELECT 1 FROM measurements m WHERE "
                                "m.candidate_id = c.id)"),
                 0, "a measured candidate was left without its samples");
    cr_assert_eq(count(kb_path, "SELECT count(*) FROM strategies s WHERE NOT EXISTS (SELECT 1 "
                                "FROM candidates c WHERE c.session_id = s.session_id AND "
                                "c.delta = s.delta)"),
                 0, "an outcome was left without its candidate");
    free((char *)o.out_dir);
    free(kb_path);
}
