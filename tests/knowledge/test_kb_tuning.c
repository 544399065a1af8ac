/* knowledge base, tuning slice: fingerprints of the example models (class,
 * patterns, stable structure hashes), similarity, the migration from schema
 * version 1, sessions/candidates/measurements round trips, two processes
 * recording sessions into one file at once, the transfer query's ranking,
 * rule history, JSON Lines export/import (merge without duplicates, errors
 * naming path:line) and cards. */
#include "atc_bridge/convert.h"
#include "knowledge/kb_internal.h"
#include "knowledge/kb_tuning.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/examples.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <sqlite3.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(kb_tuning, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

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

/* Import an example model as the tuner would fingerprint it. */
static void fingerprint(const char *name, struct cp_kb_fingerprint *fp)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_ex_fingerprint(name, fp, &d), CP_OK, "%s: %s", name, d.msg);
}

static int64_t model_row(struct cp_kb *kb, const struct cp_kb_fingerprint *fp)
{
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t id = 0;
    cr_assert_eq(cp_kb_model_upsert(kb, fp, &id, &d), CP_OK, "%s", d.msg);
    cr_assert_gt(id, 0);
    return id;
}

static int64_t hw_row(struct cp_kb *kb, const char *soc, struct cp_kb_hardware *hw)
{
    cp_kb_hardware_detect(hw);
    snprintf(hw->soc_version, sizeof hw->soc_version, "%s", soc);
    cp_kb_hardware_sign(hw);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t id = 0;
    cr_assert_eq(cp_kb_hardware_upsert(kb, hw, &id, &d), CP_OK, "%s", d.msg);
    return id;
}

static struct cp_kb_candidate cand(int64_t session, int step, const char *delta, const char *source,
                                   const char *status, double gain)
{
    struct cp_kb_candidate c;
    memset(&c, 0, sizeof c);
    c.session_id = session;
    c.step = step;
    c.delta = (char *)delta;
    c.source = (char *)source;
    cr_assert(cp_step_status_parse(status, &c.status), "%s", status);
    c.reason = (char *)(step == 0 ? "the starting point" : "attention dominates the run time");
    c.config_json = (char *)"{\"precision_mode\":\"force_fp32\"}";
    c.config_id = (char *)"0011223344556677";
    c.expected_gain = 0.2;
    c.measured_gain = gain;
    c.ci_lo = isnan(gain) ? NAN : gain - 0.05;
    c.ci_hi = isnan(gain) ? NAN : gain + 0.05;
    c.p = isnan(gain) ? NAN : 0.001;
    c.precision_loss = 0.1;
    c.memory_bytes = 1u << 20;
    c.median_ns = 1e6 * (1 - (isnan(gain) ? 0 : gain));
    c.throughput = NAN;
    return c;
}

/* A done session on `model` with a baseline and `n` candidates: "delta-<k>"
 * accepted with gain 0.1 when k is even, rejected otherwise; each with two
 * sides of raw samples, and a strategy outcome. OUT: *session (may be NULL). */
static void fill_session(struct cp_kb *kb, int64_t model, int64_t hw, const char *key, int n,
                         int64_t *session)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb_session s;
    memset(&s, 0, sizeof s);
    s.key = (char *)key;
    s.model_id = model;
    s.hw_id = hw;
    s.model_path = (char *)"examples/models/sd_unet_tiny.onnx";
    s.target = (char *)"cpu";
    s.constraints = (char *)"precision_loss<=1%";
    s.status = (char *)"running";
    s.budget = n + 1;
    s.baseline_median_ns = s.best_median_ns = NAN;
    int64_t id = 0;
    cr_assert_eq(cp_kb_session_begin(kb, &s, &id, &d), CP_OK, "%s", d.msg);
    struct cp_kb_candidate c = cand(id, 0, "", "baseline", "baseline", NAN);
    int64_t cid = 0, best = 0;
    cr_assert_eq(cp_kb_candidate_add(kb, &c, &cid, &d), CP_OK, "%s", d.msg);
    for (int k = 1; k <= n; k++) {
        char delta[64];
        snprintf(delta, sizeof delta, "delta-%d", k);
        bool held = k % 2 == 0;
        c = cand(id, k, delta, "rule:attention", held ? "accepted" : "rejected",
                 held ? 0.1 : -0.01);
        cr_assert_eq(cp_kb_candidate_add(kb, &c, &cid, &d), CP_OK, "%s", d.msg);
        uint64_t a[5] = {100, 101, 102, 103, 104}, b[5] = {90, 91, 92, 93, (uint64_t)k};
        cr_assert_eq(cp_kb_measurement_add(kb, cid, "a", a, 5, &d), CP_OK, "%s", d.msg);
        cr_assert_eq(cp_kb_measurement_add(kb, cid, "b", b, 5, &d), CP_OK, "%s", d.msg);
        cr_assert_eq(cp_kb_strategy_record(kb, model, hw, id, delta, c.measured_gain, held, &d),
                     CP_OK, "%s", d.msg);
        if (held)
            best = cid;
    }
    struct cp_kb_session u = s;
    u.id = id;
    u.status = (char *)"done";
    u.best_candidate_id = best;
    u.best_config_json = (char *)"{\"command\":\"cannprof convert --model=m.onnx --framework=5\"}";
    u.baseline_median_ns = 1e6;
    u.best_median_ns = 0.8e6;
    u.evaluations = n + 1;
    u.stop_reason = (char *)"budget exhausted";
    cr_assert_eq(cp_kb_session_update(kb, &u, &d), CP_OK, "%s", d.msg);
    if (session)
        *session = id;
}

/* ---- fingerprints ------------------------------------------------------------ */

Test(kb_tuning, fingerprints_of_the_examples_name_their_class_and_patterns)
{
    struct cp_kb_fingerprint sd, rn, t14, t17;
    fingerprint("sd_unet_tiny", &sd);
    fingerprint("resnet_tiny", &rn);
    fingerprint("transformer_encoder_op14", &t14);
    fingerprint("transformer_encoder_op17", &t17);

    cr_assert_str_eq(sd.model_class, "unet");
    cr_assert(sd.has_attention && sd.has_conv && sd.has_layernorm && sd.has_groupnorm &&
              sd.has_gelu && !sd.has_batchnorm);
    cr_assert_str_eq(rn.model_class, "cnn");
    cr_assert(rn.has_conv && rn.has_batchnorm && !rn.has_attention && !rn.has_layernorm);
    cr_assert_str_eq(t14.model_class, "transformer");
    cr_assert(t14.has_attention && t14.has_layernorm && t14.has_gelu && !t14.has_conv,
              "decomposed LayerNorm (ReduceMean/Sub over the last axis) is recognised");
    cr_assert_str_eq(t17.model_class, "transformer");
    cr_assert(t17.has_layernorm && t17.has_attention);

    cr_assert_eq(strlen(sd.structure_hash), 32);
    cr_assert_eq(strlen(sd.source_hash), 32);
    cr_assert_str_eq(sd.name, "sd_unet_tiny");
    cr_assert_gt(sd.params, 1000);
    cr_assert_gt(sd.flops, 1e6);
    cr_assert_gt(sd.n_nodes, 50);
    cr_assert(strstr(sd.op_histogram_json, "\"Conv\":16"), "%s", sd.op_histogram_json);
    cr_assert(strstr(sd.inputs_json, "\"name\":\"sample\""), "%s", sd.inputs_json);
    cr_assert(strstr(sd.inputs_json, "[1,4,32,32]"), "%s", sd.inputs_json);

    cr_assert_str_neq(sd.structure_hash, rn.structure_hash);
    cr_assert_str_neq(t14.structure_hash, t17.structure_hash);

    cp_kb_fingerprint_release(&sd);
    cp_kb_fingerprint_release(&rn);
    cp_kb_fingerprint_release(&t14);
    cp_kb_fingerprint_release(&t17);
}

Test(kb_tuning, the_same_model_gives_the_same_fingerprint)
{
    struct cp_kb_fingerprint a, b;
    fingerprint("sd_unet_tiny", &a);
    fingerprint("sd_unet_tiny", &b);
    cr_assert_str_eq(a.structure_hash, b.structure_hash);
    cr_assert_str_eq(a.source_hash, b.source_hash);
    cr_assert_str_eq(a.op_histogram_json, b.op_histogram_json);
    cr_assert_str_eq(a.inputs_json, b.inputs_json);
    cp_kb_fingerprint_release(&a);
    cp_kb_fingerprint_release(&b);
}

Test(kb_tuning, similarity_is_one_for_itself_and_closer_for_the_same_family)
{
    struct cp_kb_fingerprint sd, sd2, rn, tr, t17;
    fingerprint("sd_unet_tiny", &sd);
    fingerprint("sd_unet_tiny", &sd2);
    fingerprint("resnet_tiny", &rn);
    fingerprint("transformer_encoder_op14", &tr);
    fingerprint("transformer_encoder_op17", &t17);
    cr_assert_eq(cp_kb_similarity(&sd, &sd), 1.0);
    cr_assert_eq(cp_kb_similarity(&sd, &sd2), 1.0);
    double sd_tr = cp_kb_similarity(&sd, &tr), tr_sd = cp_kb_similarity(&tr, &sd);
    cr_assert_float_eq(sd_tr, tr_sd, 1e-12, "symmetric");
    cr_assert_lt(sd_tr, cp_kb_similarity(&sd, &sd2));
    cr_assert_lt(sd_tr, 0.99);
    cr_assert_gt(sd_tr, 0.0);
    /* The two transformer exports resemble each other more than either the CNN. */
    cr_assert_gt(cp_kb_similarity(&tr, &t17), cp_kb_similarity(&tr, &rn));
    /* An SD-like model (same figures, another structure) stays close to SD. */
    snprintf(sd2.structure_hash, sizeof sd2.structure_hash, "%s",
             "ffffffffffffffffffffffffffffffff");
    double like = cp_kb_similarity(&sd, &sd2);
    cr_assert_lt(like, 1.0);
    cr_assert_gt(like, cp_kb_similarity(&sd, &rn));
    cr_assert_gt(like, sd_tr);
    cp_kb_fingerprint_release(&sd);
    cp_kb_fingerprint_release(&sd2);
    cp_kb_fingerprint_release(&rn);
    cp_kb_fingerprint_release(&tr);
    cp_kb_fingerprint_release(&t17);
}

Test(kb_tuning, models_and_hardware_round_trip_and_upsert_once)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct cp_kb_fingerprint sd, back;
    fingerprint("sd_unet_tiny", &sd);
    int64_t id = model_row(kb, &sd);
    cr_assert_eq(model_row(kb, &sd), id, "the same model is one row");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_model_get(kb, id, &back, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(back.structure_hash, sd.structure_hash);
    cr_assert_str_eq(back.op_histogram_json, sd.op_histogram_json);
    cr_assert_eq(back.has_attention, sd.has_attention);
    cr_assert_eq(back.params, sd.params);
    cr_assert_eq(cp_kb_similarity(&sd, &back), 1.0);
    cp_kb_fingerprint_release(&back);

    struct cp_kb_hardware hw, hw2, got;
    int64_t h1 = hw_row(kb, "cpu", &hw);
    cr_assert_eq(hw_row(kb, "cpu", &hw2), h1);
    cr_assert_str_eq(hw.signature, hw2.signature);
    cr_assert_eq(strlen(hw.signature), 16);
    cr_assert_gt(hw.cores, 0);
    cr_assert_str_eq(hw.tool_version, CP_VERSION_STRING);
    cr_assert_neq(hw_row(kb, "Ascend910B", &hw2), h1, "another soc is other hardware");
    cr_assert_eq(cp_kb_hardware_get(kb, h1, &got, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(got.signature, hw.signature);
    cr_assert_str_eq(got.isa, hw.isa);
    cr_assert_eq(cp_kb_model_get(kb, 999, &back, &d) == CP_OK, false);
    cp_kb_fingerprint_release(&sd);
    cp_kb_close(kb);
    free(path);
}

/* ---- migration ---------------------------------------------------------------- */

Test(kb_tuning, a_version_1_file_is_migrated_and_keeps_its_baselines)
{
    char *path = cp_t_path("old.sqlite");
    struct cp_kb *kb = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_open_at_version(path, 1, &kb, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(q_int(kb, "PRAGMA user_version"), 1);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM sqlite_master WHERE name = 'sessions'"), 0);
    /* The row a version 1 cannprof wrote (cp_kb_baseline_set now writes
     * columns a version 1 file does not have): latencies 10, 20, 30. */
    cr_assert_eq(sqlite3_exec(cp_kb_db(kb),
                              "INSERT INTO services(name, created_at) VALUES ('svc', "
                              "'2025-01-01T00:00:00Z');"
                              "INSERT INTO baselines(service, tag, created_at, trace_path, "
                              "run_kind, n, latency_ns) VALUES ('svc', 'v1', "
                              "'2025-01-01T00:00:00Z', '/t.db', 'bench', 3, "
                              "x'0a0000000000000014000000000000001e00000000000000');",
                              NULL, NULL, NULL),
                 SQLITE_OK, "%s", sqlite3_errmsg(cp_kb_db(kb)));
    cp_kb_close(kb);

    kb = open_kb(path);
    cr_assert_eq(q_int(kb, "PRAGMA user_version"), CP_KB_SCHEMA_VERSION);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM schema_history"), CP_KB_SCHEMA_VERSION);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM sqlite_master WHERE name IN ('models', "
                           "'hardware', 'sessions', 'candidates', 'measurements', 'strategies')"),
                 6);
    struct cp_kb_baseline b;
    cr_assert_eq(cp_kb_baseline_get(kb, "svc", "v1", &b, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(b.m.n, 3);
    cr_assert_eq(b.m.latency_ns[2], 30);
    cr_assert_null(b.m.probe_ns, "a version 1 baseline has no probe");
    cp_kb_baseline_release(&b);
    cp_kb_close(kb);
    free(path);
}

/* ---- sessions ---------------------------------------------------------------- */

Test(kb_tuning, sessions_candidates_and_measurements_round_trip)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct cp_kb_fingerprint sd;
    fingerprint("sd_unet_tiny", &sd);
    struct cp_kb_hardware hw;
    int64_t model = model_row(kb, &sd), h = hw_row(kb, "cpu", &hw);
    int64_t id = 0;
    fill_session(kb, model, h, "key-1", 4, &id);

    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb_session s;
    bool found = false;
    cr_assert_eq(cp_kb_session_find(kb, "key-1", &s, &found, &d), CP_OK, "%s", d.msg);
    cr_assert(found);
    cr_assert_eq(s.id, id);
    cr_assert_str_eq(s.status, "done");
    cr_assert_str_eq(s.model_name, "sd_unet_tiny");
    cr_assert_str_eq(s.hw_signature, hw.signature);
    cr_assert_str_eq(s.target, "cpu");
    cr_assert_str_eq(s.stop_reason, "budget exhausted");
    cr_assert_eq(s.evaluations, 5);
    cr_assert_eq(s.budget, 5);
    cr_assert_float_eq(s.best_median_ns, 0.8e6, 1e-6);
    cr_assert_eq(strlen(s.uid), 32);
    cr_assert_gt(s.best_candidate_id, 0);
    cp_kb_session_release(&s);

    cr_assert_eq(cp_kb_session_find(kb, "no-such-key", &s, &found, &d), CP_OK);
    cr_assert_not(found);
    cr_assert_eq(cp_kb_session_get(kb, 4242, &s, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "4242"), "%s", d.msg);

    /* A second session with the same key: find returns the newest. */
    int64_t id2 = 0;
    fill_session(kb, model, h, "key-1", 1, &id2);
    cr_assert_eq(cp_kb_session_find(kb, "key-1", &s, &found, &d), CP_OK);
    cr_assert_eq(s.id, id2);
    cp_kb_session_release(&s);

    struct cp_kb_candidate *c = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_candidate_list(kb, id, &c, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 5);
    cr_assert_eq(c[0].step, 0);
    cr_assert_str_eq(cp_step_status_name(c[0].status), "baseline");
    cr_assert(isnan(c[0].measured_gain), "unknown gains read back as NaN");
    cr_assert_str_eq(c[2].delta, "delta-2");
    cr_assert_str_eq(cp_step_status_name(c[2].status), "accepted");
    cr_assert_str_eq(c[2].source, "rule:attention");
    cr_assert_float_eq(c[2].measured_gain, 0.1, 1e-12);
    cr_assert_float_eq(c[2].ci_lo, 0.05, 1e-12);
    cr_assert_eq(c[2].memory_bytes, 1u << 20);
    cr_assert(isnan(c[2].throughput));
    uint64_t *ns = NULL;
    size_t k = 0;
    cr_assert_eq(cp_kb_measurement_get(kb, c[3].id, "b", &ns, &k, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(k, 5);
    cr_assert_eq(ns[0], 90);
    cr_assert_eq(ns[4], 3);
    free(ns);
    cr_assert_eq(cp_kb_measurement_get(kb, c[0].id, "a", &ns, &k, &d), CP_ERR_INVALID);
    cp_kb_candidate_list_free(c, n);

    struct cp_kb_session *all = NULL;
    cr_assert_eq(cp_kb_session_list(kb, &all, &n, &d), CP_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(all[0].id, id);
    cp_kb_session_list_free(all, n);

    double mean = 0;
    int count = 0;
    cr_assert_eq(cp_kb_rule_history(kb, "rule:attention", &mean, &count, &d), CP_OK);
    cr_assert_eq(count, 5);
    cr_assert_float_eq(mean, (2 * 0.1 + 2 * -0.01 + -0.01) / 5, 1e-9);
    cr_assert_eq(cp_kb_rule_history(kb, "rule:none", &mean, &count, &d), CP_OK);
    cr_assert_eq(count, 0);
    cr_assert(isnan(mean));
    cp_kb_fingerprint_release(&sd);
    cp_kb_close(kb);
    free(path);
}

Test(kb_tuning, a_rules_record_is_conditioned_on_similar_models_and_the_hardware)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct cp_kb_fingerprint sd, lb;
    fingerprint("sd_unet_tiny", &sd);
    fingerprint("launch_bound_tiny", &lb);
    struct cp_kb_hardware hw, other;
    int64_t m_sd = model_row(kb, &sd), m_lb = model_row(kb, &lb);
    int64_t h = hw_row(kb, "cpu", &hw), h2 = hw_row(kb, "Ascend310P3", &other);
    /* sd on this hardware: 2 of 4 held at 0.1, 2 at -0.01 (fill_session);
     * the same rule on a dissimilar model and on other hardware: 5
     * candidates each, which must not count */
    fill_session(kb, m_sd, h, "near", 4, NULL);
    fill_session(kb, m_lb, h, "far-model", 5, NULL);
    fill_session(kb, m_sd, h2, "far-hw", 5, NULL);
    double sim_self = cp_kb_similarity(&sd, &sd), sim_lb = cp_kb_similarity(&sd, &lb);
    cr_assert_lt(sim_lb, 0.9, "the two examples differ (similarity %g)", sim_lb);
    struct cp_diag d;
    cp_diag_init(&d);
    double mean = 0, best = 0;
    int count = 0;
    cr_assert_eq(
        cp_kb_rule_history_near(kb, "rule:attention", &sd, &hw, 0.9, &mean, &count, &best, &d),
        CP_OK, "%s", d.msg);
    cr_expect_eq(count, 4, "only the similar model on this hardware");
    cr_expect_float_eq(mean, (2 * 0.1 + 2 * -0.01) / 4, 1e-9);
    cr_expect_float_eq(best, sim_self, 1e-12);
    /* any hardware: the other session counts too */
    cr_assert_eq(
        cp_kb_rule_history_near(kb, "rule:attention", &sd, NULL, 0.9, &mean, &count, &best, &d),
        CP_OK);
    cr_expect_eq(count, 9);
    /* a low bar takes the dissimilar model in, weighted by its similarity */
    cr_assert_eq(
        cp_kb_rule_history_near(kb, "rule:attention", &sd, &hw, 0.0, &mean, &count, &best, &d),
        CP_OK);
    cr_expect_eq(count, 9);
    double g_lb = (2 * 0.1 + 3 * -0.01) / 5;
    cr_expect_float_eq(mean, (sim_self * 0.18 + sim_lb * 5 * g_lb) / (4 * sim_self + 5 * sim_lb),
                       1e-9);
    cr_assert_eq(cp_kb_rule_history_near(kb, "rule:none", &sd, &hw, 0.0, &mean, &count, &best, &d),
                 CP_OK);
    cr_expect_eq(count, 0);
    cr_expect(isnan(mean));
    cp_kb_fingerprint_release(&sd);
    cp_kb_fingerprint_release(&lb);
    cp_kb_close(kb);
    free(path);
}

/* ---- several processes ----------------------------------------------------- */

static void child_tunes(const char *path, const char *key)
{
    struct cp_kb *kb = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_kb_open(path, &kb, &d) != CP_OK) {
        fprintf(stderr, "child: %s\n", d.msg);
        _exit(100);
    }
    struct cp_kb_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    snprintf(fp.structure_hash, sizeof fp.structure_hash, "%s", "0123456789abcdef0123456789abcdef");
    snprintf(fp.name, sizeof fp.name, "m");
    struct cp_kb_hardware hw;
    cp_kb_hardware_detect(&hw);
    int64_t model = 0, h = 0, s = 0;
    struct cp_kb_session ses = {.key = (char *)key, .status = (char *)"running"};
    ses.baseline_median_ns = ses.best_median_ns = NAN;
    int failed = 0;
    if (cp_kb_model_upsert(kb, &fp, &model, &d) != CP_OK ||
        cp_kb_hardware_upsert(kb, &hw, &h, &d) != CP_OK ||
        cp_kb_session_begin(kb, &ses, &s, &d) != CP_OK) {
        fprintf(stderr, "child: %s\n", d.msg);
        _exit(101);
    }
    for (int i = 0; i < 20; i++) {
        struct cp_kb_candidate c = cand(s, i, i ? "x=1" : "", "rule:r", "rejected", 0.01);
        int64_t cid = 0;
        uint64_t ns[4] = {1, 2, 3, 4};
        char delta[32];
        snprintf(delta, sizeof delta, "d%d", i);
        if (cp_kb_candidate_add(kb, &c, &cid, &d) != CP_OK ||
            cp_kb_measurement_add(kb, cid, "b", ns, 4, &d) != CP_OK ||
            cp_kb_strategy_record(kb, model, h, s, delta, 0.01, false, &d) != CP_OK) {
            fprintf(stderr, "child: %s\n", d.msg);
            failed++;
        }
    }
    ses.id = s;
    ses.status = (char *)"done";
    ses.evaluations = 20;
    if (cp_kb_session_update(kb, &ses, &d) != CP_OK)
        failed++;
    cp_kb_close(kb);
    _exit(failed > 99 ? 99 : failed);
}

Test(kb_tuning, two_tuners_record_into_one_file_at_once)
{
    char *path = cp_t_path("shared/kb.sqlite");
    fflush(NULL);
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        cr_assert_geq(pids[i], 0);
        if (pids[i] == 0)
            child_tunes(path, i ? "key-b" : "key-a");
    }
    for (int i = 0; i < 2; i++) {
        int status = 0;
        cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
        cr_assert(WIFEXITED(status), "child %d crashed", i);
        cr_assert_eq(WEXITSTATUS(status), 0, "child %d: %d writes failed (database locked?)", i,
                     WEXITSTATUS(status));
    }
    struct cp_kb *kb = open_kb(path);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM sessions WHERE status = 'done'"), 2);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM candidates"), 40);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM measurements"), 40);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM strategies"), 40);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM models"), 1, "one model row, shared");
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM hardware"), 1);
    cr_assert_eq(q_int(kb, "SELECT count(DISTINCT uid) FROM sessions"), 2);
    cp_kb_close(kb);
    free(path);
}

/* ---- transfer ---------------------------------------------------------------- */

Test(kb_tuning, the_query_ranks_what_held_on_similar_models_first)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct cp_kb_fingerprint sd, rn, query;
    fingerprint("sd_unet_tiny", &sd);
    fingerprint("resnet_tiny", &rn);
    fingerprint("sd_unet_tiny", &query);
    /* An SD-like model: not the stored one, but the same figures. */
    snprintf(query.structure_hash, sizeof query.structure_hash, "%s",
             "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee");
    struct cp_kb_hardware hw, other;
    int64_t h = hw_row(kb, "cpu", &hw);
    hw_row(kb, "Ascend310P3", &other);
    int64_t m_sd = model_row(kb, &sd), m_rn = model_row(kb, &rn);
    struct cp_diag d;
    cp_diag_init(&d);
    /* On SD: "fa=on" held twice (0.20, 0.30), failed once; on ResNet only:
     * "layout=nhwc" held with a larger gain. */
    cr_assert_eq(cp_kb_strategy_record(kb, m_sd, h, 0, "fa=on", 0.20, true, &d), CP_OK, "%s",
                 d.msg);
    cr_assert_eq(cp_kb_strategy_record(kb, m_sd, h, 0, "fa=on", 0.30, true, &d), CP_OK);
    cr_assert_eq(cp_kb_strategy_record(kb, m_sd, h, 0, "fa=on", -0.02, false, &d), CP_OK);
    cr_assert_eq(cp_kb_strategy_record(kb, m_rn, h, 0, "layout=nhwc", 0.35, true, &d), CP_OK);
    cr_assert_eq(cp_kb_strategy_record(kb, m_sd, h, 0, "bf16=on", -0.1, false, &d), CP_OK);

    struct cp_kb_strategy_hit *hits = NULL;
    size_t n = 0;
    cr_assert_eq(cp_kb_query_strategies(kb, &query, &hw, 0.0, false, 0, &hits, &n, &d), CP_OK, "%s",
                 d.msg);
    cr_assert_eq(n, 2, "only strategies that held are listed");
    cr_assert_str_eq(hits[0].delta, "fa=on");
    cr_assert_eq(hits[0].count, 2);
    cr_assert_eq(hits[0].tried, 3);
    cr_assert_float_eq(hits[0].mean_gain, 0.25, 1e-12);
    cr_assert_float_eq(hits[0].sd_gain, sqrt(0.005), 1e-12);
    cr_assert_str_eq(hits[0].models, "sd_unet_tiny");
    cr_assert_float_eq(hits[0].similarity, cp_kb_similarity(&query, &sd), 1e-12);
    cr_assert_str_eq(hits[1].delta, "layout=nhwc");
    cr_assert_gt(hits[0].score, hits[1].score);
    cp_kb_strategy_hits_free(hits, n);

    /* A high threshold keeps only the SD outcomes; limit cuts the list. */
    double to_rn = cp_kb_similarity(&query, &rn);
    cr_assert_eq(cp_kb_query_strategies(kb, &query, &hw, to_rn + 0.01, false, 0, &hits, &n, &d),
                 CP_OK);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(hits[0].delta, "fa=on");
    cp_kb_strategy_hits_free(hits, n);
    cr_assert_eq(cp_kb_query_strategies(kb, &query, NULL, 0.0, false, 1, &hits, &n, &d), CP_OK);
    cr_assert_eq(n, 1);
    cp_kb_strategy_hits_free(hits, n);

    /* Other hardware knows nothing; the model itself can be excluded. */
    cr_assert_eq(cp_kb_query_strategies(kb, &query, &other, 0.0, false, 0, &hits, &n, &d), CP_OK);
    cr_assert_eq(n, 0);
    cp_kb_strategy_hits_free(hits, n);
    cr_assert_eq(cp_kb_query_strategies(kb, &sd, &hw, 0.0, true, 0, &hits, &n, &d), CP_OK);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(hits[0].delta, "layout=nhwc");
    cp_kb_strategy_hits_free(hits, n);

    cp_kb_fingerprint_release(&sd);
    cp_kb_fingerprint_release(&rn);
    cp_kb_fingerprint_release(&query);
    cp_kb_close(kb);
    free(path);
}

Test(kb_tuning, recording_a_delta_again_in_a_session_replaces_its_outcome)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct cp_kb_fingerprint sd;
    fingerprint("sd_unet_tiny", &sd);
    struct cp_kb_hardware hw;
    int64_t m = model_row(kb, &sd), h = hw_row(kb, "cpu", &hw), s = 0;
    fill_session(kb, m, h, "k", 0, &s);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_strategy_record(kb, m, h, s, "x", 0.1, false, &d), CP_OK);
    cr_assert_eq(cp_kb_strategy_record(kb, m, h, s, "x", 0.2, true, &d), CP_OK);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM strategies"), 1);
    cr_assert_eq(q_int(kb, "SELECT held FROM strategies"), 1);
    cr_assert_eq(cp_kb_strategy_record(kb, m, h, s, "", 0.2, true, &d), CP_ERR_INVALID);
    cp_kb_fingerprint_release(&sd);
    cp_kb_close(kb);
    free(path);
}

/* ---- sharing ------------------------------------------------------------------ */

static char *export_text(struct cp_kb *kb)
{
    struct cp_buf b;
    cp_buf_init(&b);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_export_jsonl(kb, &b, &d), CP_OK, "%s", d.msg);
    return cp_buf_steal(&b);
}

static void write_file(const char *path, const char *text)
{
    cr_assert(cp_t_write_file(path, text, strlen(text)), "cannot write %s (see stderr)", path);
}

static const char *const TABLES[] = {"models",     "hardware",     "sessions",
                                     "candidates", "measurements", "strategies",
                                     "baselines",  "validations",  "services"};

Test(kb_tuning, export_then_import_reproduces_the_knowledge_base_once)
{
    char *src_path = cp_t_path("a.sqlite"), *dst_path = cp_t_path("b.sqlite");
    char *file = cp_t_path("kb.jsonl");
    struct cp_kb *src = open_kb(src_path);
    struct cp_kb_fingerprint sd, rn;
    fingerprint("sd_unet_tiny", &sd);
    fingerprint("resnet_tiny", &rn);
    struct cp_kb_hardware hw;
    int64_t h = hw_row(src, "cpu", &hw);
    fill_session(src, model_row(src, &sd), h, "k1", 3, NULL);
    fill_session(src, model_row(src, &rn), h, "k2", 2, NULL);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_strategy_record(src, model_row(src, &rn), h, 0, "free", 0.5, true, &d),
                 CP_OK);
    uint64_t lat[2] = {5, 6};
    struct cp_run_metrics m;
    memset(&m, 0, sizeof m);
    m.n = 2;
    m.latency_ns = lat;
    m.precision_loss = NAN;
    cr_assert_eq(cp_kb_baseline_set(src, "svc", "v1", NULL, &m, false, NULL, &d), CP_OK);
    struct cp_kb_validation v = {.service = "svc", .verdict = "unchanged", .baseline_tag = "v1"};
    cr_assert_eq(cp_kb_record_validation(src, &v, NULL, &d), CP_OK);
    char *text = export_text(src);
    write_file(file, text);
    cr_assert(strstr(text, "{\"type\":\"model\""), "%.300s", text);
    cr_assert(strstr(text, "\"type\":\"measurement\""));

    struct cp_kb *dst = open_kb(dst_path);
    size_t added = 0;
    cr_assert_eq(cp_kb_import_jsonl(dst, file, &added, &d), CP_OK, "%s", d.msg);
    size_t total = 0;
    for (size_t i = 0; i < sizeof TABLES / sizeof TABLES[0]; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", TABLES[i]);
        cr_assert_eq(q_int(dst, sql), q_int(src, sql), "%s", TABLES[i]);
        if (strcmp(TABLES[i], "services") != 0)
            total += (size_t)q_int(src, sql);
    }
    cr_assert_eq(added, total);
    char *again = export_text(dst);
    cr_assert_str_eq(again, text, "an imported knowledge base exports the same lines");
    cr_assert_eq(q_int(dst, "SELECT count(*) FROM sessions WHERE best_candidate_id IS NOT NULL"), 2,
                 "best candidates are re-linked");

    cr_assert_eq(cp_kb_import_jsonl(dst, file, &added, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(added, 0, "importing twice adds nothing");
    cr_assert_eq(q_int(dst, "SELECT count(*) FROM candidates"),
                 q_int(src, "SELECT count(*) FROM candidates"));
    cr_assert_eq(q_int(dst, "SELECT count(*) FROM strategies"),
                 q_int(src, "SELECT count(*) FROM strategies"));
    free(again);
    free(text);
    cp_kb_fingerprint_release(&sd);
    cp_kb_fingerprint_release(&rn);
    cp_kb_close(src);
    cp_kb_close(dst);
    free(src_path);
    free(dst_path);
    free(file);
}

Test(kb_tuning, import_errors_name_the_line_and_import_nothing)
{
    char *path = cp_t_path("kb.sqlite"), *file = cp_t_path("bad.jsonl");
    struct cp_kb *kb = open_kb(path);
    struct cp_diag d;
    size_t added = 7;
    const char *hw = "{\"type\":\"hardware\",\"signature\":\"00000000000000aa\"}\n";
    char text[1024];

    snprintf(text, sizeof text, "%s\n{\"type\":\"model\",", hw);
    write_file(file, text);
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_import_jsonl(kb, file, &added, &d), CP_ERR_PARSE);
    cr_assert(strstr(d.msg, "bad.jsonl:3:"), "%s", d.msg);
    cr_assert_eq(added, 0);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM hardware"), 0, "nothing was imported");

    snprintf(text, sizeof text,
             "%s{\"type\":\"strategy\",\"model_structure_hash\":\"abc\",\"hardware\":"
             "\"00000000000000aa\",\"delta\":\"x\",\"held\":1}\n",
             hw);
    write_file(file, text);
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_import_jsonl(kb, file, &added, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "bad.jsonl:2:") && strstr(d.msg, "model abc"), "%s", d.msg);

    write_file(file, "{\"type\":\"card\"}\n");
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_import_jsonl(kb, file, &added, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, ":1:") && strstr(d.msg, "unknown record type 'card'"), "%s", d.msg);

    write_file(file, "{\"type\":\"hardware\",\"signature\":5}\n");
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_import_jsonl(kb, file, &added, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'signature' should be a string"), "%s", d.msg);

    write_file(file, "{\"type\":\"baseline\",\"service\":\"s\",\"tag\":\"t\",\"n\":3,"
                     "\"latency_ns\":[1,2]}\n");
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_import_jsonl(kb, file, &added, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'n' is 3"), "%s", d.msg);

    char *missing = cp_t_path("none.jsonl");
    cp_diag_init(&d);
    cr_assert_neq(cp_kb_import_jsonl(kb, missing, &added, &d), CP_OK);
    cr_assert(strstr(d.msg, "none.jsonl"), "%s", d.msg);
    free(missing);
    cp_kb_close(kb);
    free(path);
    free(file);
}

/* ---- cards ------------------------------------------------------------------------ */

Test(kb_tuning, a_card_has_its_sections_and_figures)
{
    char *path = cp_t_path("kb.sqlite");
    struct cp_kb *kb = open_kb(path);
    struct cp_kb_fingerprint sd, rn;
    fingerprint("sd_unet_tiny", &sd);
    fingerprint("resnet_tiny", &rn);
    struct cp_kb_hardware hw;
    int64_t h = hw_row(kb, "cpu", &hw), s = 0;
    fill_session(kb, model_row(kb, &sd), h, "k", 2, &s);
    struct cp_buf b;
    cp_buf_init(&b);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_card_session(kb, s, &b, &d), CP_OK, "%s", d.msg);
    const char *want[] = {"# Tuning card: sd_unet_tiny",
                          "## Scenario",
                          "class unet",
                          "attention",
                          "## Core bottlenecks",
                          "rule:attention: attention dominates",
                          "## Effective changes",
                          "`delta-2`",
                          "+10.0%",
                          "## Result",
                          "1.000 ms → 0.800 ms (↓20.0%)",
                          "**Throughput**: ↑25.0%",
                          "cannprof convert --model=m.onnx",
                          "precision_loss<=1%"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(b.data, want[i]), "missing '%s' in:\n%s", want[i], b.data);
    cr_assert_null(strstr(b.data, "`delta-1`"), "rejected changes are not listed as effective");

    cp_buf_reset(&b);
    cr_assert_eq(cp_kb_card_model(kb, &sd, &b, &d), CP_OK, "%s", d.msg);
    cr_assert(strstr(b.data, "## Effective changes"));
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_card_model(kb, &rn, &b, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "resnet_tiny"), "%s", d.msg);
    cr_assert_eq(cp_kb_card_session(kb, 999, &b, &d), CP_ERR_INVALID);
    cp_buf_release(&b);
    cp_kb_fingerprint_release(&sd);
    cp_kb_fingerprint_release(&rn);
    cp_kb_close(kb);
    free(path);
}

Test(kb_tuning, an_import_refreshes_a_session_exported_while_running)
{
    char *src_path = cp_t_path("a.sqlite"), *dst_path = cp_t_path("b.sqlite");
    char *early = cp_t_path("early.jsonl"), *late = cp_t_path("late.jsonl");
    struct cp_kb *src = open_kb(src_path), *dst = open_kb(dst_path);
    struct cp_kb_fingerprint sd;
    fingerprint("sd_unet_tiny", &sd);
    struct cp_kb_hardware hw;
    int64_t m = model_row(src, &sd), h = hw_row(src, "cpu", &hw), s = 0;
    fill_session(src, m, h, "k", 2, &s);
    struct cp_diag d;
    cp_diag_init(&d);
    /* As if exported while running: status back to running, older time. */
    cr_assert_eq(sqlite3_exec(cp_kb_db(src),
                              "UPDATE sessions SET status = 'running', "
                              "updated_at = '2000-01-01T00:00:00Z'",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    char *text = export_text(src);
    write_file(early, text);
    free(text);
    cr_assert_eq(sqlite3_exec(cp_kb_db(src),
                              "UPDATE sessions SET status = 'done', "
                              "updated_at = '2001-01-01T00:00:00Z'",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    text = export_text(src);
    write_file(late, text);

    size_t added = 0;
    cr_assert_eq(cp_kb_import_jsonl(dst, early, &added, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(q_int(dst, "SELECT count(*) FROM sessions WHERE status = 'running'"), 1);
    cr_assert_eq(cp_kb_import_jsonl(dst, late, &added, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(added, 1, "only the session changed");
    cr_assert_eq(q_int(dst, "SELECT count(*) FROM sessions"), 1);
    cr_assert_eq(q_int(dst, "SELECT count(*) FROM sessions WHERE status = 'done'"), 1);
    cr_assert_eq(q_int(dst, "SELECT count(*) FROM candidates"), 3);
    cr_assert_eq(q_int(dst, "SELECT count(*) FROM candidates c JOIN sessions s ON "
                            "s.id = c.session_id"),
                 3, "candidates still point at the refreshed session");
    char *again = export_text(dst);
    cr_assert_str_eq(again, text);
    /* The older copy does not undo the newer one. */
    cr_assert_eq(cp_kb_import_jsonl(dst, early, &added, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(added, 0);
    cr_assert_eq(q_int(dst, "SELECT count(*) FROM sessions WHERE status = 'done'"), 1);
    free(again);
    free(text);
    cp_kb_fingerprint_release(&sd);
    cp_kb_close(src);
    cp_kb_close(dst);
    free(src_path);
    free(dst_path);
    free(early);
    free(late);
}
