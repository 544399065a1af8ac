/* trace store: creation, identity and version checks, meta, and the round
 * trip of runs, samples, kernels, events and counters, checked with plain
 * SQL against the documented schema. */
#include "trace/trace.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(trace_store, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- helpers ------------------------------------------------------------- */

static struct cp_trace_store *open_store(const char *path)
{
    struct cp_trace_store *s = cp_t_trace_store(path, NULL, NULL);
    cr_assert_not_null(s, "open %s (see stderr)", path);
    return s;
}

/* One integer from a query on the store's own connection. */
static int64_t q_int(struct cp_trace_store *s, const char *sql)
{
    int64_t v = 0;
    cr_assert(cp_t_sql_int(cp_trace_store_db(s), sql, &v), "%s (see stderr)", sql);
    return v;
}

/* One text from a query (caller frees; NULL for SQL NULL). */
static char *q_text(struct cp_trace_store *s, const char *sql)
{
    char *v = NULL;
    cr_assert(cp_t_sql_text(cp_trace_store_db(s), sql, &v), "%s (see stderr)", sql);
    return v;
}

/* Run SQL on a file through a separate raw connection. */
static void raw_exec(const char *path, const char *sql)
{
    cr_assert(cp_t_sql_exec(path, sql), "%s: %s (see stderr)", path, sql);
}

static void write_file(const char *path, const char *text)
{
    cr_assert(cp_t_write_file(path, text, strlen(text)), "cannot write %s (see stderr)", path);
}

static int64_t begin_run(struct cp_trace_store *s, const char *kind)
{
    struct cp_trace_run_info info = {
        .kind = kind,
        .model_path = "examples/models/sd_like.om",
        .model_hash = "0123456789abcdef0123456789abcdef",
        .config_json = "{\"fusion\":\"on\"}",
        .config_id = "cfg-1",
        .target = "cpu",
        .threads = 2,
        .batch = 1,
        .warmup = 3,
        .iterations = 5,
        .weight_bytes = 1000,
    };
    int64_t run = -1;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_begin_run(s, &info, &run, &d), CP_OK, "%s", d.msg);
    cr_assert_gt(run, 0);
    return run;
}

/* ---- creation and identity ---------------------------------------------- */

Test(trace_store, create_makes_a_tagged_wal_database)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_store *s = open_store(p);
    cr_assert(cp_path_exists(p));
    cr_assert_str_eq(cp_trace_store_path(s), p);
    cr_assert_eq(q_int(s, "PRAGMA user_version"), CP_TRACE_SCHEMA_VERSION);
    cr_assert_eq(q_int(s, "PRAGMA application_id"), CP_TRACE_APPLICATION_ID);
    char *mode = q_text(s, "PRAGMA journal_mode");
    cr_assert_str_eq(mode, "wal");
    free(mode);
    cr_assert_eq(q_int(s, "PRAGMA synchronous"), 1, "synchronous=NORMAL");
    const char *tables[] = {"meta", "runs", "samples", "kernels", "strings", "events", "counters"};
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        char sql[128];
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='%s'", tables[i]);
        cr_assert_eq(q_int(s, sql), 1, "table %s", tables[i]);
    }
    /* The typical event queries are range scans of the clustered key. */
    const char *queries[] = {
        "SELECT sum(dur_ns) FROM events WHERE run_id = 1 AND layer = 2",
        "SELECT sum(dur_ns) FROM events WHERE run_id = 1 AND layer = 2 AND kernel_idx = 7",
        "SELECT count(*) FROM events WHERE run_id = 1",
    };
    for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
        char sql[256];
        snprintf(sql, sizeof(sql), "EXPLAIN QUERY PLAN %s", queries[i]);
        sqlite3_stmt *st = NULL;
        cr_assert_eq(sqlite3_prepare_v2(cp_trace_store_db(s), sql, -1, &st, NULL), SQLITE_OK);
        cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
        const char *plan = (const char *)sqlite3_column_text(st, 3);
        cr_assert_not_null(strstr(plan, "SEARCH events USING PRIMARY KEY"), "%s: %s", queries[i],
                           plan);
        sqlite3_finalize(st);
    }
    cp_trace_store_close(s);
    free(p);
}

Test(trace_store, reopen_keeps_data_and_does_not_recreate)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_store *s = open_store(p);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_set_meta(s, "model_hash", "abc", &d), CP_OK);
    int64_t run = begin_run(s, "bench");
    cp_trace_store_close(s);

    s = open_store(p);
    char *v = NULL;
    cr_assert_eq(cp_trace_store_get_meta(s, "model_hash", &v, &d), CP_OK);
    cr_assert_str_eq(v, "abc");
    free(v);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM runs"), 1);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM layers"), 3);
    int64_t run2 = begin_run(s, "bench");
    cr_assert_gt(run2, run);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_store, meta_set_get_replace_and_absent)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_store *s = open_store(p);
    struct cp_diag d;
    cp_diag_init(&d);
    char *v = NULL;
    cr_assert_eq(cp_trace_store_get_meta(s, "nope", &v, &d), CP_OK);
    cr_assert_null(v);
    cr_assert_eq(cp_trace_store_set_meta(s, "k", "one", &d), CP_OK);
    cr_assert_eq(cp_trace_store_set_meta(s, "k", "two", &d), CP_OK);
    cr_assert_eq(cp_trace_store_get_meta(s, "k", &v, &d), CP_OK);
    cr_assert_str_eq(v, "two");
    free(v);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM meta WHERE key='k'"), 1);
    /* Created with the schema. */
    cr_assert_eq(cp_trace_store_get_meta(s, "schema_version", &v, &d), CP_OK);
    cr_assert_str_eq(v, "1");
    free(v);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_store, host_meta_describes_tool_cpu_cores_and_os)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_store *s = open_store(p);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_set_host_meta(s, &d), CP_OK, "%s", d.msg);
    const char *keys[] = {"tool_version",  "schema_version", "host_cpu_model", "host_isa_flags",
                          "host_cores",    "host_os",        "host_arch",      "host_l1d_bytes",
                          "host_l2_bytes", "host_l3_bytes"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char *v = NULL;
        cr_assert_eq(cp_trace_store_get_meta(s, keys[i], &v, &d), CP_OK);
        cr_assert_not_null(v, "meta %s missing", keys[i]);
        cr_assert_gt(strlen(v), 0, "meta %s empty", keys[i]);
        if (strcmp(keys[i], "tool_version") == 0)
            cr_assert_str_eq(v, CP_VERSION_STRING);
        if (strcmp(keys[i], "host_cores") == 0)
            cr_assert_gt(atoi(v), 0);
        if (strcmp(keys[i], "host_os") == 0)
            cr_assert_eq(strncmp(v, "Linux", 5), 0, "host_os '%s'", v);
        if (strstr(keys[i], "_bytes")) /* a byte count; 0 when sysfs does not say */
            cr_assert_eq(strspn(v, "0123456789"), strlen(v), "%s '%s'", keys[i], v);
        free(v);
    }
    /* Again: replaced, not duplicated. */
    cr_assert_eq(cp_trace_store_set_host_meta(s, &d), CP_OK);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM meta WHERE key LIKE 'host_%'"), 8);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_store, newer_schema_version_is_refused)
{
    char *p = cp_t_path("t.db");
    cp_trace_store_close(open_store(p));
    raw_exec(p, "PRAGMA user_version = 99");
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open(p, &s, &d), CP_ERR_VERSION);
    cr_assert_null(s);
    cr_assert_not_null(strstr(d.msg, p), "message names the file: %s", d.msg);
    cr_assert_not_null(strstr(d.msg, "99"), "%s", d.msg);
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open_ro(p, &s, &d), CP_ERR_VERSION);
    cr_assert_null(s);
    free(p);
}

Test(trace_store, foreign_sqlite_database_is_refused_untouched)
{
    char *p = cp_t_path("other.db");
    raw_exec(p, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open(p, &s, &d), CP_ERR_INVALID);
    cr_assert_null(s);
    cr_assert_not_null(strstr(d.msg, p), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "not a cannprof trace"), "%s", d.msg);
    /* The foreign file is left as it was: no WAL switch, no tables. */
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "delete");
    sqlite3_finalize(st);
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    sqlite3_close(db);

    /* A foreign application id is refused too, even without tables. */
    char *p2 = cp_t_path("tagged.db");
    raw_exec(p2, "PRAGMA application_id = 1234");
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open(p2, &s, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "application_id"), "%s", d.msg);
    free(p2);
    free(p);
}

Test(trace_store, non_sqlite_file_is_refused_by_name)
{
    char *p = cp_t_path("x.db");
    write_file(p, "this is plainly not a database, just some text that is long enough\n");
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open(p, &s, &d), CP_ERR_INVALID);
    cr_assert_null(s);
    char expect[600];
    snprintf(expect, sizeof(expect), "%s is not a SQLite file", p);
    cr_assert_str_eq(d.msg, expect);
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open_ro(p, &s, &d), CP_ERR_INVALID);
    cr_assert_str_eq(d.msg, expect);
    /* Short garbage too. */
    write_file(p, "abc");
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open(p, &s, &d), CP_ERR_INVALID);
    cr_assert_str_eq(d.msg, expect);
    free(p);
}

Test(trace_store, read_only_open_of_missing_file_fails_and_creates_nothing)
{
    char *p = cp_t_path("missing.db");
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open_ro(p, &s, &d), CP_ERR_IO);
    cr_assert_null(s);
    char expect[600];
    snprintf(expect, sizeof(expect), "%s: no such file", p);
    cr_assert_str_eq(d.msg, expect);
    cr_assert_not(cp_path_exists(p), "read-only open must not create the file");
    char *wal = cp_t_path("missing.db-wal");
    cr_assert_not(cp_path_exists(wal));
    free(wal);
    free(p);
}

Test(trace_store, read_only_open_reads_and_refuses_writes)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_store *s = open_store(p);
    int64_t run = begin_run(s, "bench");
    uint64_t ns[] = {5, 6, 7};
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, ns, 3, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);

    cr_assert_eq(cp_trace_store_open_ro(p, &s, &d), CP_OK, "%s", d.msg);
    uint64_t *got = NULL;
    size_t n = 0;
    cr_assert_eq(cp_trace_store_samples(s, -1, &got, &n, NULL, &d), CP_OK);
    cr_assert_eq(n, 3);
    free(got);
    cr_assert_eq(cp_trace_store_set_meta(s, "k", "v", &d), CP_ERR_DB);
    cr_assert_not_null(strstr(d.msg, p), "%s", d.msg);
    cp_trace_store_close(s);
    /* The closed store is one file, and reading it leaves nothing behind. */
    char *wal = cp_t_path("t.db-wal"), *shm = cp_t_path("t.db-shm");
    cr_assert_not(cp_path_exists(wal));
    cr_assert_not(cp_path_exists(shm));
    free(wal);
    free(shm);

    /* An empty file is no trace store when opened read-only. */
    char *e = cp_t_path("empty.db");
    write_file(e, "");
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open_ro(e, &s, &d), CP_ERR_INVALID);
    cr_assert_null(s);
    /* ... but opening it for writing makes it one. */
    cp_diag_init(&d);
    s = open_store(e);
    cp_trace_store_close(s);
    free(e);
    free(p);
}

Test(trace_store, open_in_missing_directory_names_the_file)
{
    char *p = cp_t_path("no/such/cp_t_dir/t.db");
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    /* creating an output that cannot be written: the environment's failure */
    cr_assert_eq(cp_trace_store_open(p, &s, &d), CP_ERR_WRITE);
    cr_assert_null(s);
    cr_assert_not_null(strstr(d.msg, p), "%s", d.msg);
    free(p);
}

/* ---- runs, samples, kernels, events ---------------------------------------- */

Test(trace_store, run_samples_kernels_events_round_trip)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_store *s = open_store(p);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t run = begin_run(s, "bench");
    cr_assert_eq(cp_trace_store_set_run_memory(s, run, 11, 22, 33, 44, &d), CP_OK, "%s", d.msg);

    uint64_t ns[5] = {1000, 1200, 900, 1100, 1050};
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, ns, 5, &d), CP_OK, "%s", d.msg);

    struct cp_trace_kernel k[2] = {
        {"conv_in", "Conv", "onednn:conv", "[\"conv_in\"]",
         "[{\"shape\":[1,4,8,8],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]",
         "[{\"shape\":[1,8,8,8],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]", 1e6, 4096},
        {"act", "Relu", "ref", "[\"relu_1\",\"relu_2\"]", "[]", "[]", 512, 1024},
    };
    cr_assert_eq(cp_trace_store_add_kernels(s, run, k, 2, &d), CP_OK, "%s", d.msg);

    struct cp_trace_recorder *r = cp_trace_recorder_create(64);
    cr_assert_not_null(r);
    int32_t n_exec = cp_trace_intern(r, "execute");
    int32_t n_conv = cp_trace_intern(r, "conv_in");
    int32_t n_act = cp_trace_intern(r, "act");
    for (int it = 0; it < 3; it++) {
        uint64_t t = 10000 + (uint64_t)it * 1000;
        cp_trace_record(r, CP_LAYER_DEVICE, n_conv, 0, it, t + 10, t + 510, 0);
        cp_trace_record(r, CP_LAYER_DEVICE, n_act, 1, it, t + 510, t + 610, 1);
        cp_trace_record(r, CP_LAYER_RUNTIME, n_exec, -1, it, t, t + 700, 0);
    }
    cp_trace_record(r, CP_LAYER_APP, cp_trace_intern(r, "bench"), -1, -1, 9000, 14000, 0);
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_trace_store_add_counter(s, run, 2, "rss", 12345.0, 777, &d), CP_OK);

    /* runs */
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM runs WHERE id=%lld AND kind='bench' AND threads=2 AND "
             "batch=1 AND warmup=3 AND iterations=5 AND weight_bytes=11 AND arena_bytes=22 AND "
             "peak_bytes=33 AND peak_rss_bytes=44 AND config_id='cfg-1' AND target='cpu' AND "
             "model_hash='0123456789abcdef0123456789abcdef' AND "
             "created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T*Z'",
             (long long)run);
    cr_assert_eq(q_int(s, sql), 1);
    /* samples */
    cr_assert_eq(q_int(s, "SELECT count(*) FROM samples"), 5);
    cr_assert_eq(q_int(s, "SELECT sum(latency_ns) FROM samples"), 5250);
    cr_assert_eq(q_int(s, "SELECT latency_ns FROM samples WHERE iteration=2"), 900);
    /* kernels */
    cr_assert_eq(q_int(s, "SELECT count(*) FROM kernels"), 2);
    char *t = q_text(s, "SELECT node || '|' || op_type || '|' || impl || '|' || origins || '|' || "
                        "flops || '|' || bytes FROM kernels WHERE idx=1");
    cr_assert_str_eq(t, "act|Relu|ref|[\"relu_1\",\"relu_2\"]|512.0|1024.0");
    free(t);
    /* events */
    cr_assert_eq(q_int(s, "SELECT count(*) FROM events"), 10);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM events WHERE layer=2"), 6);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM events WHERE layer=1"), 3);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM events WHERE layer=0 AND iteration=-1"), 1);
    cr_assert_eq(q_int(s, "SELECT sum(dur_ns) FROM events e JOIN kernels k ON "
                          "k.run_id=e.run_id AND k.idx=e.kernel_idx WHERE k.op_type='Conv'"),
                 1500);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM events WHERE kernel_idx = -1"), 4);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM events e JOIN strings s ON s.id=e.name_id "
                          "WHERE s.value='act' AND e.thread=1 AND e.dur_ns=100"),
                 3);
    cr_assert_eq(q_int(s, "SELECT start_ns FROM events e JOIN strings s ON s.id=e.name_id "
                          "WHERE s.value='execute' AND iteration=1"),
                 11000);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM strings"), 4);
    /* counters */
    cr_assert_eq(q_int(s, "SELECT count(*) FROM counters WHERE name='rss' AND iteration=2 AND "
                          "value=12345.0 AND ts_ns=777"),
                 1);

    /* A second run reuses the store's strings. */
    int64_t run2 = begin_run(s, "bench");
    cr_assert_eq(cp_trace_store_add_events(s, run2, r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM strings"), 4);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM events"), 20);

    cp_trace_recorder_free(r);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_store, samples_read_back_in_iteration_order_for_the_right_run)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_store *s = open_store(p);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t run1 = begin_run(s, "bench");
    uint64_t a[3] = {30, 10, 20};
    /* Added out of order: iterations 3..5 first, then 0..2. */
    cr_assert_eq(cp_trace_store_add_samples(s, run1, 3, a, 3, &d), CP_OK, "%s", d.msg);
    uint64_t b[3] = {7, 8, 9};
    cr_assert_eq(cp_trace_store_add_samples(s, run1, 0, b, 3, &d), CP_OK, "%s", d.msg);
    int64_t run2 = begin_run(s, "bench");
    uint64_t c[2] = {100, 200};
    cr_assert_eq(cp_trace_store_add_samples(s, run2, 0, c, 2, &d), CP_OK, "%s", d.msg);

    uint64_t *got = NULL;
    size_t n = 0;
    int64_t used = 0;
    cr_assert_eq(cp_trace_store_samples(s, run1, &got, &n, &used, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(used, run1);
    cr_assert_eq(n, 6);
    uint64_t expect[6] = {7, 8, 9, 30, 10, 20};
    for (size_t i = 0; i < 6; i++)
        cr_assert_eq(got[i], expect[i], "sample %zu", i);
    free(got);

    cr_assert_eq(cp_trace_store_samples(s, -1, &got, &n, &used, &d), CP_OK);
    cr_assert_eq(used, run2, "run -1 means the last run");
    cr_assert_eq(n, 2);
    cr_assert_eq(got[0], 100);
    cr_assert_eq(got[1], 200);
    free(got);

    /* Overlapping iterations are refused, and nothing of the batch is kept. */
    uint64_t dup[3] = {1, 2, 3};
    cr_assert_eq(cp_trace_store_add_samples(s, run2, 1, dup, 3, &d), CP_ERR_DB);
    cr_assert_not_null(strstr(d.msg, p), "%s", d.msg);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM samples WHERE run_id=2"), 2);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_store, missing_runs_are_reported)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_store *s = open_store(p);
    struct cp_diag d;
    cp_diag_init(&d);
    uint64_t *got = NULL;
    size_t n = 0;
    cr_assert_eq(cp_trace_store_samples(s, -1, &got, &n, NULL, &d), CP_ERR_INVALID);
    cr_assert_null(got);
    cr_assert_not_null(strstr(d.msg, "no runs"), "%s", d.msg);
    int64_t run = begin_run(s, "run");
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_samples(s, run + 5, &got, &n, NULL, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "no run"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, p), "%s", d.msg);
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_set_run_memory(s, run + 5, 1, 2, 3, 4, &d), CP_ERR_INVALID);
    cp_diag_init(&d);
    uint64_t one = 1;
    cr_assert_eq(cp_trace_store_add_samples(s, 99, 0, &one, 1, &d), CP_ERR_INVALID);
    /* A run without samples has none, which is not an error. */
    cr_assert_eq(cp_trace_store_samples(s, run, &got, &n, NULL, &d), CP_OK);
    cr_assert_eq(n, 0);
    cr_assert_null(got);
    int64_t used = 0;
    cr_assert_eq(cp_trace_store_resolve_run(s, -1, &used, &d), CP_OK);
    cr_assert_eq(used, run);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_store, dropped_events_are_recorded_as_a_counter)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_store *s = open_store(p);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t run = begin_run(s, "bench");
    struct cp_trace_recorder *r = cp_trace_recorder_create(4);
    cp_trace_record(r, CP_LAYER_DEVICE, cp_trace_intern(r, "k"), 0, 0, 1, 2, 0);
    cp_trace_record(r, (enum cp_trace_layer)5, 0, 0, 0, 1, 2, 0);
    cp_trace_record(r, (enum cp_trace_layer)5, 0, 0, 0, 1, 2, 0);
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(q_int(s, "SELECT value FROM counters WHERE name='trace.dropped_events'"), 2);
    cp_trace_recorder_free(r);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_store, many_events_span_several_transactions)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_store *s = open_store(p);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t run = begin_run(s, "bench");
    struct cp_trace_recorder *r = cp_trace_recorder_create(200000);
    char name[32];
    int32_t ids[50];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof(name), "node_%d", i);
        ids[i] = cp_trace_intern(r, name);
    }
    for (int i = 0; i < 150000; i++)
        cp_trace_record(r, CP_LAYER_DEVICE, ids[i % 50], i % 50, i / 50, (uint64_t)i * 100,
                        (uint64_t)i * 100 + 40, 0);
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM events"), 150000);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM strings"), 50);
    cr_assert_eq(q_int(s, "SELECT sum(dur_ns) FROM events"), 150000LL * 40);
    cr_assert_eq(q_int(s, "SELECT max(iteration) FROM events"), 2999);
    cp_trace_recorder_free(r);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_store, close_null_is_a_noop)
{
    cp_trace_store_close(NULL);
}
