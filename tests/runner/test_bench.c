/* Benchmarking model files (runner/bench.h) on a replayed machine: the
 * interference probe reads what policy.probe_fn says, so which rounds are
 * undisturbed is known, whatever this machine is doing. On a quiet machine
 * bench stops at the target, summarises the undisturbed iterations and
 * compares two models on the undisturbed rounds; a busy stretch is left
 * out of the verdict; both runs of an A/B trace carry each round's one
 * probe reading. (What `cannprof bench` prints of these, and the busy
 * machine made certain by a floor file of 1 ns: tests/cli/
 * test_cli_bench_probe.c and test_cli_bench_ab.c.) Nothing here asserts on
 * time. */
#include "runner/bench.h"

#include "support/cli.h"
#include "support/db.h"
#include "support/replay.h"

#include <criterion/criterion.h>
#include <sqlite3.h>

#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    cp_t_scratch_setup();
    char *cache = cp_t_path("cache");
    cr_assert_eq(setenv("XDG_CACHE_HOME", cache, 1), 0);
    free(cache);
}

TestSuite(bench, .init = setup, .fini = cp_t_scratch_close, .timeout = 120);

/* A request for the small example model against itself (or alone), on
 * one thread, 10 undisturbed rounds wanted, the probe replayed from `m`. */
static void request(struct cp_bench_request *q, bool two, struct cp_t_machine *m, const char *trace)
{
    cp_bench_request_init(q);
    q->models[0] = cp_t_example("nhwc_roundtrip");
    q->models[1] = two ? q->models[0] : NULL;
    q->session[0].threads = q->session[1].threads = 1;
    q->policy.warmup = 1;
    q->policy.iterations = 10;
    q->policy.floor_cache = false;
    q->policy.probe_fn = cp_t_machine_probe;
    q->policy.probe_ctx = m;
    q->trace_path = trace;
}

static void request_release(struct cp_bench_request *q)
{
    free((char *)q->models[0]);
}

static int64_t q_int(const char *db, const char *sql)
{
    sqlite3 *raw = NULL;
    cr_assert_eq(sqlite3_open_v2(db, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "%s", db);
    int64_t v = -1;
    cr_assert(cp_t_sql_int(raw, sql, &v), "%s (see stderr)", sql);
    sqlite3_close(raw);
    return v;
}

Test(bench, one_model_on_a_quiet_machine_stops_at_the_target_and_summarises_it)
{
    struct cp_t_machine quiet = {.quiet = 10000, .busy = 10000};
    struct cp_bench_request q;
    request(&q, false, &quiet, NULL);
    struct cp_bench_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_bench_models(&q, &r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(r.m.stop, CP_MEASURE_STOP_TARGET);
    cr_assert_eq(r.m.n, 10);
    cr_assert_eq(r.m.n_undisturbed, 10);
    cr_assert_eq(r.m.reference_ns, 10000);
    /* what bench prints as the undisturbed iterations' latency */
    cr_assert_eq(r.undisturbed[0].n, 10);
    cr_assert_gt(r.undisturbed[0].median, 0);
    cr_assert_eq(r.undisturbed[0].median, r.all[0].median, "every iteration ran undisturbed");
    cp_bench_result_release(&r);
    request_release(&q);
}

Test(bench, two_models_on_a_quiet_machine_are_compared_on_the_undisturbed_rounds)
{
    struct cp_t_machine quiet = {.quiet = 10000, .busy = 10000};
    char *db = cp_t_path("ab.db");
    struct cp_bench_request q;
    request(&q, true, &quiet, db);
    struct cp_bench_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_bench_models(&q, &r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(r.m.stop, CP_MEASURE_STOP_TARGET);
    cr_assert_eq(r.m.n_undisturbed, 10);
    cr_assert(r.cmp_undisturbed);
    cr_assert_eq(r.cmp.n_before, r.m.n_undisturbed);
    cr_assert_eq(r.cmp.n_after, r.cmp.n_before);
    cr_assert_lt(r.run_ids[0], r.run_ids[1]);
    /* one probe per round, the same reading in both runs */
    cr_assert_eq(q_int(db, "SELECT count(*) FROM counters x JOIN counters y ON x.name = "
                           "'probe_ns' AND y.name = 'probe_ns' AND x.run_id = 1 AND y.run_id = 2 "
                           "AND x.iteration = y.iteration AND x.value = y.value"),
                 (int64_t)r.m.n);
    cp_bench_result_release(&r);
    request_release(&q);
    free(db);
}

Test(bench, a_busy_stretch_is_left_out_of_the_verdict)
{
    /* a neighbour for the first 5 rounds: those and at least the one after
     * them are disturbed (how many more, the window of probes 2 ms around a
     * round says, and so how long the rounds take) */
    struct cp_t_machine m = {.quiet = 10000, .busy = 20000, .busy_until = 5};
    struct cp_bench_request q;
    request(&q, true, &m, NULL);
    struct cp_bench_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_bench_models(&q, &r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(r.m.stop, CP_MEASURE_STOP_TARGET);
    cr_assert_geq(r.m.n_undisturbed, 10);
    cr_assert_leq(r.m.n_undisturbed, r.m.n - 6);
    for (size_t i = 0; i < 6; i++)
        cr_assert_not(r.m.undisturbed[i], "round %zu", i);
    cr_assert(r.cmp_undisturbed);
    cr_assert_eq(r.cmp.n_before, r.m.n_undisturbed, "the busy rounds are not compared");
    cr_assert_eq(r.undisturbed[1].n, r.m.n_undisturbed);
    cr_assert_eq(r.all[1].n, r.m.n);
    cp_bench_result_release(&r);
    request_release(&q);
}
