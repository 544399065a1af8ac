/* knowledge base integrity: one tuning step is written in one transaction
 * (a failure injected between its rows leaves none of them), foreign keys
 * are on for every connection and the references hold (a row pointing at
 * a missing parent is refused and nothing is written), and the migration
 * to schema version 4 keeps every reachable row and the AUTOINCREMENT
 * counters. */
#include "knowledge/kb_internal.h"
#include "knowledge/kb_tuning.h"
#include "support/cli.h"
#include "support/db.h"

#include <criterion/criterion.h>
#include <sqlite3.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(kb_integrity, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- helpers ------------------------------------------------------------- */

static struct cp_kb *open_kb(const char *path)
{
    struct cp_kb *kb = cp_t_kb(path);
    cr_assert_not_null(kb, "open %s (see stderr)", path);
    return kb;
}

static int64_t q_int(struct cp_kb *kb, const char *sql)
{
    int64_t v = 0;
    cr_assert(cp_t_sql_int(cp_kb_db(kb), sql, &v), "%s (see stderr)", sql);
    return v;
}

static void exec_ok(struct cp_kb *kb, const char *sql)
{
    cr_assert_eq(sqlite3_exec(cp_kb_db(kb), sql, NULL, NULL, NULL), SQLITE_OK, "%s: %s", sql,
                 sqlite3_errmsg(cp_kb_db(kb)));
}

/* The rows a step needs to point at: a model, this hardware, a session. */
struct parents {
    int64_t model, hw, session;
};

static struct parents make_parents(struct cp_kb *kb)
{
    struct parents p;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    snprintf(fp.structure_hash, sizeof fp.structure_hash, "%032d", 7);
    snprintf(fp.name, sizeof fp.name, "tiny");
    snprintf(fp.model_class, sizeof fp.model_class, "cnn");
    fp.op_histogram_json = (char *)"{\"Conv\":1}";
    fp.inputs_json = (char *)"[]";
    cr_assert_eq(cp_kb_model_upsert(kb, &fp, &p.model, &d), CP_OK, "%s", d.msg);
    struct cp_kb_hardware hw;
    cp_kb_hardware_detect(&hw);
    cr_assert_eq(cp_kb_hardware_upsert(kb, &hw, &p.hw, &d), CP_OK, "%s", d.msg);
    struct cp_kb_session s;
    memset(&s, 0, sizeof s);
    s.key = (char *)"k";
    s.model_id = p.model;
    s.hw_id = p.hw;
    s.status = (char *)"running";
    s.baseline_median_ns = s.best_median_ns = NAN;
    cr_assert_eq(cp_kb_session_begin(kb, &s, &p.session, &d), CP_OK, "%s", d.msg);
    return p;
}

static const uint64_t A[4] = {100, 101, 102, 103}, B[4] = {90, 91, 92, 93};

/* Step 1 of the session: "layout=nhwc", accepted, measured on A and B. */
static struct cp_kb_candidate step_candidate(int64_t session)
{
    struct cp_kb_candidate c;
    memset(&c, 0, sizeof c);
    c.session_id = session;
    c.step = 1;
    c.delta = (char *)"layout=nhwc";
    c.source = (char *)"rule:layout";
    c.status = CP_STEP_ACCEPTED;
    c.reason = (char *)"faster";
    c.expected_gain = c.measured_gain = 0.1;
    c.ci_lo = 0.05;
    c.ci_hi = 0.15;
    c.p = 0.001;
    c.precision_loss = c.median_ns = c.throughput = NAN;
    return c;
}

static struct cp_kb_step step_of(const struct cp_kb_candidate *c, const struct parents *p)
{
    return (struct cp_kb_step){.candidate = c,
                               .a_ns = A,
                               .b_ns = B,
                               .n = 4,
                               .record_strategy = true,
                               .model_id = p->model,
                               .hw_id = p->hw,
                               .held = true};
}

/* How many rows the step tables hold. */
static void expect_rows(struct cp_kb *kb, int64_t candidates, int64_t measurements,
                        int64_t strategies)
{
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM candidates"), candidates);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM measurements"), measurements);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM strategies"), strategies);
}

/* ---- one step, one transaction ------------------------------------------- */

Test(kb_integrity, a_step_records_its_candidate_samples_and_outcome)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct parents p = make_parents(kb);
    struct cp_kb_candidate c = step_candidate(p.session);
    struct cp_kb_step s = step_of(&c, &p);
    int64_t id = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_step_record(kb, &s, &id, &d), CP_OK, "%s", d.msg);
    cr_assert_gt(id, 0);
    expect_rows(kb, 1, 2, 1);
    uint64_t *ns = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_measurement_get(kb, id, "b", &ns, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 4);
    cr_assert_eq(memcmp(ns, B, sizeof B), 0);
    free(ns);
    cr_assert_eq(q_int(kb, "SELECT held FROM strategies WHERE delta = 'layout=nhwc'"), 1);

    /* The baseline: no samples, no outcome. */
    struct cp_kb_candidate base = step_candidate(p.session);
    base.step = 0;
    base.delta = (char *)"";
    base.status = CP_STEP_BASELINE;
    struct cp_kb_step bs = {.candidate = &base};
    cr_assert_eq(cp_kb_step_record(kb, &bs, &id, &d), CP_OK, "%s", d.msg);
    expect_rows(kb, 2, 2, 1);
    cp_kb_close(kb);
    free(path);
}

/* A trigger makes the database refuse the row that follows the candidate,
 * as a crash or a full disk would stop the writer there. */
static void expect_step_leaves_nothing(const char *table)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct parents p = make_parents(kb);
    char *sql = cp_t_fmt("CREATE TEMP TRIGGER fail_%s BEFORE INSERT ON main.%s BEGIN "
                         "SELECT RAISE(ABORT, 'injected failure'); END;",
                         table, table);
    exec_ok(kb, sql);
    free(sql);
    struct cp_kb_candidate c = step_candidate(p.session);
    struct cp_kb_step s = step_of(&c, &p);
    int64_t id = 7;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_neq(cp_kb_step_record(kb, &s, &id, &d), CP_OK, "the injected failure was missed");
    cr_assert(strstr(d.msg, "injected failure") && strstr(d.msg, path), "%s", d.msg);
    cr_assert_eq(id, 0);
    expect_rows(kb, 0, 0, 0);
    cr_assert(sqlite3_get_autocommit(cp_kb_db(kb)), "the transaction was left open");
    /* The handle is still good: without the trigger the step goes in. */
    sql = cp_t_fmt("DROP TRIGGER temp.fail_%s", table);
    exec_ok(kb, sql);
    free(sql);
    cr_assert_eq(cp_kb_step_record(kb, &s, &id, &d), CP_OK, "%s", d.msg);
    expect_rows(kb, 1, 2, 1);
    cp_kb_close(kb);
    free(path);
}

Test(kb_integrity, a_failure_between_a_candidate_and_its_samples_leaves_neither)
{
    expect_step_leaves_nothing("measurements");
}

Test(kb_integrity, a_failure_at_the_outcome_leaves_no_candidate_and_no_samples)
{
    expect_step_leaves_nothing("strategies");
}

Test(kb_integrity, a_step_with_bad_arguments_writes_nothing)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct parents p = make_parents(kb);
    struct cp_kb_candidate c = step_candidate(p.session);
    struct cp_kb_step s = step_of(&c, &p);
    s.model_id = 0; /* an outcome without a model */
    int64_t id = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_step_record(kb, &s, &id, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "needs a model"), "%s", d.msg);
    s = step_of(&c, &p);
    s.b_ns = NULL;
    cr_assert_eq(cp_kb_step_record(kb, &s, &id, &d), CP_ERR_INVALID);
    expect_rows(kb, 0, 0, 0);
    cp_kb_close(kb);
    free(path);
}

/* ---- references ------------------------------------------------------------ */

Test(kb_integrity, foreign_keys_are_on_for_every_connection)
{
    char *path = cp_t_path("kb.sqlite");
    for (int i = 0; i < 2; i++) {
        struct cp_kb *kb = open_kb(path); /* once new, once existing */
        cr_assert_eq(q_int(kb, "PRAGMA foreign_keys"), 1);
        cp_kb_close(kb);
    }
    free(path);
}

Test(kb_integrity, the_schema_declares_every_reference)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    static const char *const refs[][3] = {
        {"baselines", "service", "services"},     {"sessions", "model_id", "models"},
        {"sessions", "hw_id", "hardware"},        {"sessions", "best_candidate_id", "candidates"},
        {"candidates", "session_id", "sessions"}, {"measurements", "candidate_id", "candidates"},
        {"strategies", "model_id", "models"},     {"strategies", "hw_id", "hardware"},
        {"strategies", "session_id", "sessions"},
    };
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        char *sql = cp_t_fmt("SELECT count(*) FROM pragma_foreign_key_list('%s') WHERE "
                             "\"from\" = '%s' AND \"table\" = '%s'",
                             refs[i][0], refs[i][1], refs[i][2]);
        cr_assert_eq(q_int(kb, sql), 1, "%s.%s does not reference %s", refs[i][0], refs[i][1],
                     refs[i][2]);
        free(sql);
    }
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    cp_kb_close(kb);
    free(path);
}

Test(kb_integrity, a_row_pointing_at_a_missing_parent_is_refused)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct parents p = make_parents(kb);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t id = 0;

    /* A candidate of a session that does not exist. */
    struct cp_kb_candidate c = step_candidate(p.session + 100);
    cr_assert_eq(cp_kb_candidate_add(kb, &c, &id, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, path) && strstr(d.msg, "FOREIGN KEY"), "%s", d.msg);
    cr_assert_eq(id, 0);
    /* ... nor in a step. */
    struct cp_kb_step s = step_of(&c, &p);
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_step_record(kb, &s, &id, &d), CP_ERR_INVALID, "%s", d.msg);
    /* Samples of a candidate that does not exist. */
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_measurement_add(kb, 4242, "a", A, 4, &d), CP_ERR_INVALID, "%s", d.msg);
    /* An outcome on a model or hardware that does not exist. */
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_strategy_record(kb, p.model + 100, p.hw, p.session, "x", 0.1, true, &d),
                 CP_ERR_INVALID, "%s", d.msg);
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_strategy_record(kb, p.model, p.hw + 100, 0, "x", 0.1, true, &d),
                 CP_ERR_INVALID, "%s", d.msg);
    /* A session pointing at a missing best candidate. */
    struct cp_kb_session got;
    cr_assert_eq(cp_kb_session_get(kb, p.session, &got, &d), CP_OK, "%s", d.msg);
    got.best_candidate_id = 999;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_session_update(kb, &got, &d), CP_ERR_INVALID, "%s", d.msg);
    cp_kb_session_release(&got);
    expect_rows(kb, 0, 0, 0);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM sessions WHERE best_candidate_id IS NOT NULL"), 0);

    /* Another program writing through SQL is held to the same rules. */
    cr_assert_neq(sqlite3_exec(cp_kb_db(kb),
                               "INSERT INTO measurements(candidate_id, role, n, samples_ns) "
                               "VALUES (4242, 'a', 0, x'')",
                               NULL, NULL, NULL),
                  SQLITE_OK);
    cr_assert_neq(sqlite3_exec(cp_kb_db(kb),
                               "INSERT INTO baselines(service, tag, created_at, n, latency_ns) "
                               "VALUES ('nobody', 'v1', 'now', 0, x'')",
                               NULL, NULL, NULL),
                  SQLITE_OK);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM baselines"), 0);
    cp_kb_close(kb);
    free(path);
}

/* ---- step status ------------------------------------------------------------------ */

Test(kb_integrity, step_status_names_round_trip_and_unknown_ones_are_refused)
{
    for (int i = 0; i < CP_STEP_STATUS_COUNT; i++) {
        enum cp_step_status s;
        cr_assert(cp_step_status_parse(cp_step_status_name((enum cp_step_status)i), &s));
        cr_assert_eq((int)s, i);
    }
    enum cp_step_status s;
    cr_assert_not(cp_step_status_parse("Accepted", &s));
    cr_assert_not(cp_step_status_parse(NULL, &s));
    cr_assert_str_eq(cp_step_status_name((enum cp_step_status)99), "?");

    char *path = cp_t_path("status.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct cp_diag d;
    cp_diag_init(&d);
    exec_ok(kb, "INSERT INTO sessions(id, uid, key, status, created_at, updated_at) VALUES "
                "(1, 'u1', 'k', 'done', 't', 't');"
                "INSERT INTO candidates(id, session_id, step, status, created_at) VALUES "
                "(10, 1, 0, 'baseline', 't'), (11, 1, 1, 'maybe', 't');");
    struct cp_kb_candidate *c = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_candidate_list(kb, 1, &c, &n, &d), CP_ERR_CORRUPT);
    cr_assert(strstr(d.msg, "candidate 11") && strstr(d.msg, "'maybe'"), "%s", d.msg);
    cr_assert_null(c);
    struct cp_kb_candidate bad;
    memset(&bad, 0, sizeof bad);
    bad.session_id = 1;
    bad.step = 2;
    bad.status = (enum cp_step_status)42;
    int64_t id = 0;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_candidate_add(kb, &bad, &id, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "status 42"), "%s", d.msg);
    cp_kb_close(kb);
    free(path);
}

/* ---- the migration to version 4 ------------------------------------------------- */

Test(kb_integrity, version_3_files_gain_foreign_keys_and_keep_their_rows)
{
    char *path = cp_t_path("v3.sqlite");
    struct cp_kb *kb = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_open_at_version(path, 3, &kb, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(q_int(kb, "PRAGMA user_version"), 3);
    /* What version 3 files can hold: consistent rows, and references that
     * were never enforced (a candidate of a deleted session, samples of no
     * candidate, a session whose model is gone), plus a removed baseline
     * whose id must stay used. */
    exec_ok(kb,
            "INSERT INTO models(id, structure_hash, name, model_class, op_histogram, inputs, "
            "created_at, updated_at) VALUES (1, 'h', 'm', 'cnn', '{}', '[]', 't', 't');"
            "INSERT INTO hardware(id, signature, created_at) VALUES (1, 'sig', 't');"
            "INSERT INTO sessions(id, uid, key, model_id, hw_id, status, created_at, updated_at, "
            "best_candidate_id) VALUES (1, 'u1', 'k', 1, 1, 'done', 't', 't', 10), "
            "(2, 'u2', 'k', 77, 1, 'done', 't', 't', 99);"
            "INSERT INTO candidates(id, session_id, step, status, created_at) VALUES "
            "(10, 1, 0, 'baseline', 't'), (11, 1, 1, 'accepted', 't'), (12, 55, 1, 'accepted', "
            "'t');"
            "INSERT INTO measurements(candidate_id, role, n, samples_ns) VALUES (11, 'a', 0, x''), "
            "(11, 'b', 0, x''), (12, 'a', 0, x''), (404, 'a', 0, x'');"
            "INSERT INTO strategies(model_id, hw_id, session_id, delta, held, created_at) VALUES "
            "(1, 1, 1, 'd', 1, 't'), (1, 1, 66, 'e', 0, 't'), (88, 1, 1, 'f', 1, 't');"
            "INSERT INTO services(name, created_at) VALUES ('svc', 't');"
            "INSERT INTO baselines(service, tag, created_at, n, latency_ns) VALUES "
            "('svc', 'v1', 't', 0, x''), ('svc', 'v2', 't', 0, x''), ('orphan', 'v1', 't', 0, "
            "x'');"
            "DELETE FROM baselines WHERE tag = 'v2';");
    cp_kb_close(kb);

    kb = open_kb(path);
    cr_assert_eq(q_int(kb, "PRAGMA user_version"), 4);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    /* Every reachable row is kept, with its id. */
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM sessions"), 2);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM candidates WHERE id IN (10, 11)"), 2);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM candidates"), 2, "the orphan candidate goes");
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM measurements"), 2, "only candidate 11's stay");
    cr_assert_eq(q_int(kb, "SELECT best_candidate_id FROM sessions WHERE id = 1"), 10);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM sessions WHERE id = 2 AND model_id IS NULL AND "
                           "best_candidate_id IS NULL"),
                 1, "dangling nullable references are cleared");
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM strategies"), 2, "the one of no model goes");
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM strategies WHERE delta = 'e' AND session_id IS "
                           "NULL"),
                 1);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM baselines"), 2);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM services WHERE name = 'orphan'"), 1,
                 "a baseline's service gets its row");
    /* The removed baseline's id is not given out again. */
    struct cp_kb_session got;
    cr_assert_eq(cp_kb_session_get(kb, 1, &got, &d), CP_OK, "%s", d.msg);
    cp_kb_session_release(&got);
    exec_ok(kb, "INSERT INTO baselines(service, tag, created_at, n, latency_ns) VALUES "
                "('svc', 'v3', 't', 0, x'')");
    cr_assert_eq(q_int(kb, "SELECT id FROM baselines WHERE tag = 'v3'"), 4);
    /* The indexes came back. */
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
                           "('baselines_by_service', 'sessions_by_key', 'sessions_by_model', "
                           "'candidates_by_session', 'candidates_by_source', "
                           "'strategies_by_model')"),
                 6);
    cp_kb_close(kb);
    free(path);
}
