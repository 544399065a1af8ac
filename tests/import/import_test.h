/* What the import tests share (tests/import/test_import_*.c): the
 * fixtures, running `cannprof import`, and reading the store it wrote. */
#ifndef CP_TESTS_IMPORT_TEST_H
#define CP_TESTS_IMPORT_TEST_H

#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>
#include <zlib.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void mkdirs(const char *path)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_mkdir_p(path, 0755, &d), CP_OK, "%s", d.msg);
}

static inline char *fixture(const char *name)
{
    return cp_t_fmt("%s/tests/import/fixtures/%s", CP_SOURCE_DIR, name);
}

/* Import `profile` into `db`; the --json result. */
static inline json_t *import_ok(const char *profile, const char *db)
{
    struct cp_run r;
    cp_run_cli(&r, "import", profile, "-o", db, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "import %s: %s", profile, r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    return j;
}

static inline int64_t num(json_t *j, const char *path)
{
    char p[256];
    snprintf(p, sizeof p, "%s", path);
    json_t *cur = j;
    for (char *save = NULL, *t = strtok_r(p, ".", &save); t; t = strtok_r(NULL, ".", &save))
        cur = json_object_get(cur, t);
    cr_assert(json_is_integer(cur), "%s is not an integer", path);
    return json_integer_value(cur);
}

/* The first row of `sql` on the store `db` (asserted to exist); close
 * with row_done. */
static inline sqlite3_stmt *row_of(const char *db, const char *sql, sqlite3 **s)
{
    cr_assert_eq(sqlite3_open_v2(db, s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(*s, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
                 sqlite3_errmsg(*s));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
    return st;
}

static inline void row_done(sqlite3 *s, sqlite3_stmt *st)
{
    sqlite3_finalize(st);
    sqlite3_close(s);
}

static inline int64_t q_int(const char *db, const char *sql)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *st = row_of(db, sql, &s);
    int64_t v = sqlite3_column_int64(st, 0);
    row_done(s, st);
    return v;
}

static inline double q_num(const char *db, const char *sql)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *st = row_of(db, sql, &s);
    double v = sqlite3_column_double(st, 0);
    row_done(s, st);
    return v;
}

/* The text of the first row, or NULL when there is none (caller frees). */
static inline char *q_text(const char *db, const char *sql)
{
    sqlite3 *s = NULL;
    cr_assert_eq(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(s, sql, -1, &st, NULL), SQLITE_OK, "%s", sqlite3_errmsg(s));
    char *v = NULL;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        v = strdup((const char *)sqlite3_column_text(st, 0));
    row_done(s, st);
    return v;
}

/* ---- the families ---------------------------------------------------------------- */

static inline void expect_kineto(json_t *j, const char *db)
{
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "kineto");
    cr_expect_eq(num(j, "events_by_layer.application"), 4, "2 steps, aten::mm, aten::relu");
    cr_expect_eq(num(j, "events_by_layer.runtime"), 2, "the two launches");
    cr_expect_eq(num(j, "events_by_layer.device"), 5, "4 kernels and a memcpy");
    cr_expect_eq(num(j, "kernels"), 4);
    cr_expect_eq(num(j, "iterations"), 2);
    cr_expect_eq(num(j, "skipped.flow"), 2);
    cr_expect_eq(num(j, "skipped.instant"), 1);
    /* the steps' lengths are the samples, in order */
    cr_expect_eq(q_int(db, "SELECT latency_ns FROM samples WHERE iteration = 0"), 1000000);
    cr_expect_eq(q_int(db, "SELECT latency_ns FROM samples WHERE iteration = 1"), 1500000);
    /* the sgemm of step 8 ran inside it; the late kernel after the step's
     * end, within the step's length: step 8's too */
    cr_expect_eq(q_int(db, "SELECT count(*) FROM events WHERE layer = 2 AND iteration = 1"), 3);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM events WHERE layer = 2 AND iteration = 0"), 2);
    /* times from the earliest event, to the nanosecond */
    cr_expect_eq(q_int(db, "SELECT e.dur_ns FROM events e JOIN strings s ON s.id = e.name_id "
                           "WHERE s.value = 'cudaLaunchKernel' AND e.iteration = 0"),
                 5250);
    cr_expect_eq(q_int(db, "SELECT min(e.start_ns) FROM events e JOIN strings s ON "
                           "s.id = e.name_id WHERE s.value = 'ampere_sgemm_64x64_nn'"),
                 200000);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM kernels WHERE op_type = 'Memcpy'"), 1);
    /* each kernel names the framework op that launched it: by its own
     * External id, or its launch's through the correlation */
    char *org = q_text(db, "SELECT origins FROM kernels WHERE node = 'ampere_sgemm_64x64_nn'");
    cr_expect_str_eq(org ? org : "(none)", "[\"aten::mm\"]");
    free(org);
    org = q_text(db, "SELECT origins FROM kernels WHERE node LIKE 'void at::native::vector%'");
    cr_expect_str_eq(org ? org : "(none)", "[\"aten::relu\"]");
    free(org);
    /* a device argument that measures something is a counter per step
     * (weighted by the kernels' durations; sizes summed); ids are not */
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name = 'arg.blocks per SM'"), 2);
    cr_expect_eq(q_int(db, "SELECT CAST(round(value * 1e6) AS INTEGER) FROM counters WHERE name "
                           "= 'arg.blocks per SM' AND iteration = 1"),
                 (int64_t)llround((0.25 * 200 + 1.5 * 200.5) / 400.5 * 1e6));
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'arg.bytes'"), 1048576);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name = 'arg.correlation'"), 0);
    char *numsms = q_text(db, "SELECT value FROM meta WHERE key = "
                              "'run.1.import.profile.deviceProperties.0.numSms'");
    cr_expect_str_eq(numsms ? numsms : "(none)", "108");
    free(numsms);
}

/* A Kineto-like trace of n steps of about `step_us` each (a seeded
 * scatter of +-2%), each with one kernel of 60% of the step. */
static inline char *steps_trace(const char *name, int n, double step_us, unsigned seed)
{
    char *path = cp_t_path(name);
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "{\"schemaVersion\": 1, \"traceEvents\": [\n");
    double t = 1.7e9;
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        double len = step_us * (0.98 + 0.04 * (double)((seed >> 16) % 1000) / 1000.0);
        fprintf(fp,
                "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\","
                "\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f},\n"
                "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,"
                "\"ts\":%.3f,\"dur\":%.3f},\n",
                i, t, len, t + 1, 0.6 * len);
        t += len + 5;
    }
    fprintf(fp, "{\"ph\":\"i\",\"name\":\"end\",\"pid\":1,\"tid\":1,\"ts\":%.3f}]}\n", t);
    fclose(fp);
    return path;
}

/* ---- bad input ------------------------------------------------------------------------ */

static inline void expect_refused(const char *profile, const char *db, const char *what)
{
    struct cp_run r;
    cp_run_cli(&r, "import", profile, "-o", db, NULL);
    cr_expect_eq(r.exit_code, 2, "%s: %s", profile, r.err);
    cr_expect(strstr(r.err, what) != NULL, "'%s' not in: %s", what, r.err);
    cp_run_release(&r);
    if (cp_path_exists(db))
        cr_expect_eq(q_int(db, "SELECT count(*) FROM runs"), 0, "no run left behind: %s", profile);
}

/* ---- planted findings, one per family ----------------------------------------------------- */

/* The rules of `analyze --json` on db, as a list of their names. */
static inline char *fired_rules(const char *db)
{
    struct cp_run r;
    cp_run_cli(&r, "analyze", db, "--json", "--no-calibrate", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    /* analyze --json prints the findings document first */
    json_error_t e;
    json_t *j = json_loadb(r.out, strlen(r.out), JSON_DISABLE_EOF_CHECK, &e);
    cr_assert_not_null(j, "analyze --json: %s", e.text);
    struct cp_buf b;
    cp_buf_init(&b);
    json_t *fs = json_object_get(j, "findings");
    for (size_t i = 0; i < json_array_size(fs); i++)
        cp_buf_printf(&b, "%s ", json_string_value(json_object_get(json_array_get(fs, i), "rule")));
    json_decref(j);
    cp_run_release(&r);
    return cp_buf_steal(&b);
}

/* analyze --json's feature `name` on db: its value, NaN when absent. */
static inline double import_feature(const char *db, const char *name)
{
    struct cp_run r;
    cp_run_cli(&r, "analyze", db, "--json", "--no-calibrate", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    json_t *v = json_object_get(json_object_get(json_object_get(j, "features"), "scalars"), name);
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    json_decref(j);
    return x;
}

/* ---- SQLite exports ------------------------------------------------------------------------ */

/* The fixture's SQL run into a fresh database at `path`. */
static inline void make_db(const char *sql_fixture, const char *path)
{
    char *f = fixture(sql_fixture);
    char *sql = ct_read_text(f);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    char *err = NULL;
    cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, &err), SQLITE_OK, "%s: %s", sql_fixture,
                 err ? err : "?");
    sqlite3_close(db);
    free(sql);
    free(f);
}

/* ---- a cluster --------------------------------------------------------------------------------
 */

/* A folder of two torch_npu rank folders (rank_id an int in one
 * profiler_info, a string in the other, as versions wrote it); rank 1's
 * steps 20% and 27% longer. */
static inline char *make_cluster(const char *name, bool break_rank1)
{
    char *root = cp_t_path(name), *src = fixture("trace_view.json");
    char *text = ct_read_text(src);
    for (int rank = 0; rank < 2; rank++) {
        char *dir =
            cp_t_fmt("%s/node%d_%d_ascend_pt/ASCEND_PROFILER_OUTPUT", root, rank, 100 + rank);
        mkdirs(dir);
        char *tv = cp_t_fmt("%s/trace_view.json", dir);
        if (rank == 0) {
            ct_write_text(tv, text);
        } else {
            /* ProfilerStep#50's 2000 us and #51's 1500 us, longer */
            struct cp_buf b;
            cp_buf_init(&b);
            cp_buf_puts(&b, text);
            char *slow = cp_buf_steal(&b);
            char *p = strstr(slow, "\"dur\":2000.0");
            cr_assert_not_null(p);
            memcpy(p, "\"dur\":2400.0", 12);
            p = strstr(slow, "\"dur\":\"1500.000");
            cr_assert_not_null(p);
            memcpy(p, "\"dur\":\"1900.000", 15);
            if (break_rank1)
                slow[strlen(slow) / 2] = '\0';
            ct_write_text(tv, slow);
            free(slow);
        }
        char *info =
            cp_t_fmt("%s/node%d_%d_ascend_pt/profiler_info_%d.json", root, rank, 100 + rank, rank);
        ct_write_text(info, rank == 0 ? "{\"rank_id\": 0}" : "{\"rank_id\": \"1\"}");
        free(info);
        free(tv);
        free(dir);
    }
    free(text);
    free(src);
    return root;
}

#endif
