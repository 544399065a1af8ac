/* The measurement engine (runner/measure.h) with subjects of its own: the
 * order of the subjects rotates round by round, warm-up rounds run with
 * iteration -1 and are not kept, EXACT runs exactly N rounds and needs no
 * probe, an interrupt stops after the running round and keeps what was
 * measured, a floor far below anything real makes every round disturbed so
 * that the time limit ends the run and says so, a bad policy is refused
 * before anything runs, a verdict compares the undisturbed rounds, and a
 * measurement goes into a trace with its probe and policy counters. No
 * assertion on how long anything takes. */
#include "runner/measure.h"
#include "runner/probe.h"
#include "trace/trace.h"

#include "support/cli.h"
#include "support/db.h"
#include "support/replay.h"
#include "support/examples.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    cp_t_scratch_setup();
    /* the probe's floor file goes to the scratch folder, never the user's */
    char *cache = cp_t_path("cache");
    cr_assert_eq(setenv("XDG_CACHE_HOME", cache, 1), 0);
    free(cache);
}

TestSuite(measure, .init = setup, .fini = cp_t_scratch_close);

/* A subject that logs which subject ran, as which iteration, and can set
 * the interrupt flag at a given call. */
struct log {
    int subject[4096];
    int32_t iteration[4096];
    size_t n;
    size_t interrupt_at; /* 0: never */
    volatile sig_atomic_t *flag;
};

static enum cp_status logged(void *ctx, size_t subject, int32_t iteration, struct cp_diag *d)
{
    (void)d;
    struct log *l = ctx;
    if (l->n < 4096) {
        l->subject[l->n] = (int)subject;
        l->iteration[l->n] = iteration;
    }
    l->n++;
    if (l->interrupt_at && l->n == l->interrupt_at && l->flag)
        *l->flag = 1;
    return CP_OK;
}

static enum cp_status failing(void *ctx, size_t subject, int32_t iteration, struct cp_diag *d)
{
    (void)ctx;
    (void)subject;
    return iteration == 3 ? cp_diag_set(d, CP_ERR_INVALID, "subject failed at 3") : CP_OK;
}

static void exact_policy(struct cp_measure_policy *p, int64_t warmup, int64_t n)
{
    cp_measure_policy_init(p);
    p->mode = CP_MEASURE_EXACT;
    p->probe = false;
    p->floor_cache = false;
    p->warmup = warmup;
    p->iterations = n;
}

Test(measure, two_subjects_alternate_round_by_round_after_an_unkept_warmup)
{
    struct log l = {0};
    struct cp_measure_subject s[2] = {{logged, &l, NULL}, {logged, &l, NULL}};
    struct cp_measure_policy p;
    exact_policy(&p, 3, 6);
    struct cp_measurement m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(s, 2, &p, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(m.n, 6);
    cr_assert_eq(m.stop, CP_MEASURE_STOP_COUNT);
    cr_assert_eq(l.n, (3 + 6) * 2);
    for (size_t k = 0; k < 6; k++)
        cr_assert_eq(l.iteration[k], -1, "warm-up call %zu", k);
    for (size_t r = 0; r < 6; r++) {
        size_t at = 6 + 2 * r;
        cr_assert_eq(l.iteration[at], (int32_t)r);
        cr_assert_eq(l.iteration[at + 1], (int32_t)r);
        /* even rounds A then B, odd rounds B then A */
        cr_assert_eq(l.subject[at], r % 2 == 0 ? 0 : 1, "round %zu", r);
        cr_assert_eq(l.subject[at + 1], r % 2 == 0 ? 1 : 0, "round %zu", r);
    }
    cr_assert_null(m.probe_ns, "EXACT runs no probe");
    cr_assert_eq(m.n_undisturbed, 6, "without the probe every round counts");
    for (size_t i = 0; i < 2; i++)
        for (size_t r = 0; r < m.n; r++)
            cr_assert_gt(m.ns[i][r], 0);
    cp_measurement_release(&m);
    cr_assert_null(m.ns[0]);
    cp_measurement_release(&m); /* twice is safe */
}

Test(measure, an_interrupt_stops_after_the_running_round_and_keeps_it)
{
    volatile sig_atomic_t flag = 0;
    struct log l = {.interrupt_at = 5, .flag = &flag};
    struct cp_measure_subject s = {logged, &l, NULL};
    struct cp_measure_policy p;
    exact_policy(&p, 0, 1000);
    p.interrupt = &flag;
    struct cp_measurement m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(&s, 1, &p, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(m.stop, CP_MEASURE_STOP_INTERRUPTED);
    cr_assert_eq(m.n, 5, "the round running when Ctrl-C came is kept");
    cr_assert_str_eq(cp_measure_stop_name(m.stop), "interrupted");
    cp_measurement_release(&m);

    /* interrupted before any round: nothing to keep */
    flag = 1;
    struct log l2 = {0};
    s.ctx = &l2;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(&s, 1, &p, &m, &d), CP_OK, "a round runs before the flag is read");
    cr_assert_eq(m.n, 1);
    cp_measurement_release(&m);
}

/* A floor file naming this binary with a floor of 1 ns: every probe is
 * far above 1.15x it, so no round is undisturbed. */
static void plant_floor_of_1ns(int threads)
{
    char path[1200];
    cr_assert(cp_probe_floor_path(threads, true, path, sizeof path));
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_probe_floor_save(path, 1, &d), CP_OK, "%s", d.msg);
}

Test(measure, a_busy_machine_ends_at_the_time_limit_and_says_so)
{
    plant_floor_of_1ns(1);
    struct log l = {0};
    struct cp_measure_subject s = {logged, &l, NULL};
    struct cp_measure_policy p;
    cp_measure_policy_init(&p);
    p.warmup = 1;
    p.iterations = 20;
    p.time_limit_s = 0.05;
    struct cp_measurement m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(&s, 1, &p, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(m.stop, CP_MEASURE_STOP_TIME_LIMIT);
    cr_assert_eq(m.time_limit_s, 0.05);
    cr_assert_geq(m.elapsed_s, 0.05);
    cr_assert_eq(m.floor_hint_ns, 1);
    cr_assert_eq(m.reference_ns, 1);
    cr_assert_eq(m.n_undisturbed, 0);
    cr_assert_not_null(m.probe_ns);
    cr_assert_gt(m.n, 0);
    for (size_t r = 0; r < m.n; r++)
        cr_assert_not(m.undisturbed[r]);
    cp_measurement_release(&m);
}

Test(measure, a_quiet_machine_stops_at_the_target_exactly)
{
    struct log l = {0};
    struct cp_measure_subject s = {logged, &l, NULL};
    struct cp_t_machine quiet = {.quiet = 10000, .busy = 10000};
    struct cp_measure_policy p;
    cp_measure_policy_init(&p);
    p.warmup = 2;
    p.iterations = 30;
    p.floor_cache = false;
    p.probe_fn = cp_t_machine_probe;
    p.probe_ctx = &quiet;
    struct cp_measurement m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(&s, 1, &p, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(m.stop, CP_MEASURE_STOP_TARGET);
    cr_assert_eq(m.n, 30, "the count is taken as soon as the target is reachable");
    cr_assert_eq(m.n_undisturbed, 30);
    cr_assert_eq(m.floor_ns, 10000);
    cr_assert_eq(m.reference_ns, 10000);
    cp_measurement_release(&m);
}

Test(measure, a_busy_stretch_delays_the_stop_and_is_left_out)
{
    /* rounds take far less than 2 ms, so a round is judged by the 16
     * probes on each side of it: the 20 busy rounds and the 16 after them
     * are disturbed */
    struct log l = {0};
    struct cp_measure_subject s = {logged, &l, NULL};
    struct cp_t_machine m20 = {.quiet = 10000, .busy = 20000, .busy_until = 20};
    struct cp_measure_policy p;
    cp_measure_policy_init(&p);
    p.warmup = 0;
    p.iterations = 30;
    p.floor_cache = false;
    p.probe_fn = cp_t_machine_probe;
    p.probe_ctx = &m20;
    struct cp_measurement m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(&s, 1, &p, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(m.stop, CP_MEASURE_STOP_TARGET);
    cr_assert_geq(m.n_undisturbed, 30);
    cr_assert_eq(m.n_undisturbed, m.n - 36, "rounds 0..35 are disturbed, the rest not");
    for (size_t r = 0; r < m.n; r++)
        cr_assert_eq(m.undisturbed[r], r >= 36, "round %zu", r);
    /* the count it stopped at is the count it reports: the next check
     * comes at most an eighth (at least 16 rounds) later */
    cr_assert_leq(m.n, 36 + 30 + 16 + 16);
    cp_measurement_release(&m);
}

Test(measure, a_bad_policy_is_refused_before_anything_runs)
{
    struct log l = {0};
    struct cp_measure_subject s = {logged, &l, NULL};
    struct cp_measurement m;
    struct cp_measure_policy p;
    struct cp_diag d;

    exact_policy(&p, 0, 1);
    p.min_rounds = 2;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(&s, 1, &p, &m, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "iterations"), "%s", d.msg);

    cp_measure_policy_init(&p);
    p.probe = false;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(&s, 1, &p, &m, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "probe"), "%s", d.msg);

    cp_measure_policy_init(&p);
    p.mode = CP_MEASURE_DURATION;
    p.duration_s = NAN;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(&s, 1, &p, &m, &d), CP_ERR_INVALID);

    exact_policy(&p, -1, 5);
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(&s, 1, &p, &m, &d), CP_ERR_INVALID);
    cp_diag_init(&d);
    exact_policy(&p, 0, 5);
    cr_assert_eq(cp_measure(&s, 5, &p, &m, &d), CP_ERR_INVALID, "at most 4 subjects");
    cr_assert_eq(l.n, 0, "nothing ran");
    cr_assert_eq(m.n, 0);
    cr_assert_null(m.ns[0]);
}

Test(measure, a_failing_subject_fails_the_measurement_and_keeps_nothing)
{
    struct cp_measure_subject s = {failing, NULL, NULL};
    struct cp_measure_policy p;
    exact_policy(&p, 0, 10);
    struct cp_measurement m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(&s, 1, &p, &m, &d), CP_ERR_INVALID);
    cr_assert_str_eq(d.msg, "subject failed at 3");
    cr_assert_eq(m.n, 0);
    cr_assert_null(m.ns[0]);
}

Test(measure, the_verdict_compares_only_the_rounds_both_ran_undisturbed)
{
    /* a measurement made by hand: rounds 0..39, all but the first
     * CP_MEASURE_MIN_UNDISTURBED_COMPARED disturbed and 3x slower for B only */
    enum { N = 40, CLEAN = CP_MEASURE_MIN_UNDISTURBED_COMPARED };
    struct cp_measurement m = {0};
    m.n_subjects = 2;
    m.n = N;
    m.probed = true;
    m.ns[0] = calloc(N, sizeof(uint64_t));
    m.ns[1] = calloc(N, sizeof(uint64_t));
    m.undisturbed = calloc(N, sizeof(bool));
    m.probe_ns = calloc(N, sizeof(uint64_t));
    cr_assert(m.ns[0] && m.ns[1] && m.undisturbed && m.probe_ns);
    for (size_t r = 0; r < N; r++) {
        m.undisturbed[r] = r < CLEAN;
        m.n_undisturbed += m.undisturbed[r];
        m.ns[0][r] = 1000000 + r * (r % 2 ? 7 : 3);
        m.ns[1][r] = m.undisturbed[r] ? 1000000 + r * (r % 2 ? 3 : 7) : 3000000;
    }
    struct cp_comparison c;
    bool und = false;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_measurement_compare(&m, 0, 1, 0, 0, NULL, &c, &und, &d), CP_OK, "%s", d.msg);
    cr_assert(und);
    cr_assert_eq(c.n_before, CLEAN);
    cr_assert_eq(c.n_after, CLEAN);
    cr_assert_eq(c.verdict, CP_VERDICT_UNCHANGED, "the disturbed rounds are left out");
    /* without the probe's word every round counts, and B is slower */
    m.probed = false;
    cr_assert_eq(cp_measurement_compare(&m, 0, 1, 0, 0, NULL, &c, &und, &d), CP_OK, "%s", d.msg);
    cr_assert_not(und);
    cr_assert_eq(c.n_before, N);
    cr_assert_eq(c.verdict, CP_VERDICT_REGRESSED);
    /* throughput: higher is better, items per second */
    cr_assert_eq(cp_measurement_compare(&m, 0, 1, 4, 4, NULL, &c, NULL, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(c.verdict, CP_VERDICT_REGRESSED);
    cr_assert_gt(c.before, c.after);
    /* too few undisturbed rounds to judge on: every round is compared */
    m.probed = true;
    m.n_undisturbed = 0;
    for (size_t r = 0; r < N; r++) {
        m.undisturbed[r] = r < CLEAN - 1;
        m.n_undisturbed += m.undisturbed[r];
    }
    cr_assert_eq(cp_measurement_compare(&m, 0, 1, 0, 0, NULL, &c, &und, &d), CP_OK, "%s", d.msg);
    cr_assert_not(und, "%zu undisturbed rounds were judged on", m.n_undisturbed);
    cr_assert_eq(c.n_before, N);
    cr_assert_eq(c.verdict, CP_VERDICT_REGRESSED);
    cp_measurement_release(&m);
}

Test(measure, a_plan_measurement_goes_into_a_trace_with_its_counters, .timeout = 120)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_session s;
    struct cp_trace_recorder *rec = cp_trace_recorder_create(4096);
    cr_assert_not_null(rec);
    char *model = cp_t_example("resnet_tiny");
    struct cp_session_opts so = {
        .model_path = model, .threads = 1, .buffer_optimize = -1, .trace = rec};
    cr_assert_eq(cp_session_open(&s, &so, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_session_set_inputs(&s, NULL, 0, 0, &d), CP_OK, "%s", d.msg);
    struct cp_measure_subject subj = cp_measure_plan_subject(s.plan, rec);
    struct cp_measure_policy p;
    cp_measure_policy_init(&p);
    p.mode = CP_MEASURE_DURATION;
    p.duration_s = 0.05;
    p.warmup = 1;
    p.floor_cache = false;
    struct cp_measurement m;
    cr_assert_eq(cp_measure(&subj, 1, &p, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(m.stop, CP_MEASURE_STOP_DURATION);
    char *db = cp_t_path("t.db");
    struct cp_trace_store *st = NULL;
    cr_assert_eq(cp_trace_store_open(db, &st, &d), CP_OK, "%s", d.msg);
    struct cp_measure_record r = {.session = &s, .model_path = model, .trace = rec};
    int64_t run = 0;
    cr_assert_eq(cp_measure_store(st, "bench", &r, &m, &run, &d), CP_OK, "%s", d.msg);
    struct cp_run_metrics rm;
    cr_assert_eq(cp_trace_store_run_metrics(st, run, &rm, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(rm.n, m.n);
    cr_assert_not_null(rm.probe_ns);
    for (size_t i = 0; i < m.n; i++) {
        cr_assert_eq(rm.latency_ns[i], m.ns[0][i]);
        cr_assert_eq(rm.probe_ns[i], m.probe_ns[i]);
    }
    cp_run_metrics_release(&rm);
    cp_trace_store_close(st);
    sqlite3 *raw = NULL;
    cr_assert_eq(sqlite3_open_v2(db, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    int64_t v = -1;
    cr_assert(cp_t_sql_int(raw,
                           "SELECT CAST(value AS INTEGER) FROM counters WHERE name = "
                           "'measure.rounds' AND iteration = -1",
                           &v));
    cr_assert_eq(v, (int64_t)m.n);
    cr_assert(cp_t_sql_int(raw,
                           "SELECT CAST(value AS INTEGER) FROM counters WHERE name = "
                           "'measure.undisturbed'",
                           &v));
    cr_assert_eq(v, (int64_t)m.n_undisturbed);
    cr_assert(cp_t_sql_int(raw, "SELECT count(*) FROM events WHERE iteration >= 0", &v));
    cr_assert_gt(v, 0, "the kernels of the measured rounds are in the trace");
    sqlite3_close(raw);
    cp_measurement_release(&m);
    cp_session_close(&s);
    cp_trace_recorder_free(rec);
    free(db);
    free(model);
}

/* A sequential rule that stops at its second look. */
struct looker {
    size_t seen[8];
    size_t undisturbed[8];
    int looks;
};

static bool second_look_stops(void *ctx, const struct cp_measurement *so_far)
{
    struct looker *k = ctx;
    if (k->looks < 8) {
        k->seen[k->looks] = so_far->n;
        k->undisturbed[k->looks] = so_far->n_undisturbed;
    }
    return ++k->looks == 2;
}

Test(measure, a_look_sees_the_rounds_so_far_and_may_stop_early)
{
    struct log l = {0};
    struct cp_measure_subject s[2] = {{logged, &l, NULL}, {logged, &l, NULL}};
    struct cp_t_machine quiet = {.quiet = 10000, .busy = 10000};
    struct cp_measure_policy p;
    cp_measure_policy_init(&p);
    p.warmup = 1;
    p.iterations = 40;
    p.floor_cache = false;
    p.probe_fn = cp_t_machine_probe;
    p.probe_ctx = &quiet;
    struct looker k = {0};
    p.look_fn = second_look_stops;
    p.look_ctx = &k;
    p.look_every = 10;
    struct cp_measurement m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_measure(s, 2, &p, &m, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(k.looks, 2);
    cr_expect_eq(k.seen[0], 10);
    cr_expect_eq(k.seen[1], 20);
    cr_expect_eq(k.undisturbed[1], 20, "a look judges rounds as the end does");
    cr_expect_eq(m.stop, CP_MEASURE_STOP_EARLY);
    cr_expect_str_eq(cp_measure_stop_name(m.stop), "stopped early");
    cr_expect_eq(m.n, 20, "the rounds up to the look are kept");
    cr_expect_eq(m.n_undisturbed, 20);
    cp_measurement_release(&m);

    /* a rule that never stops changes nothing */
    memset(&k, 0, sizeof k);
    k.looks = 100;
    cr_assert_eq(cp_measure(s, 2, &p, &m, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(m.stop, CP_MEASURE_STOP_TARGET);
    cr_expect_eq(m.n, 40);
    cp_measurement_release(&m);
}
