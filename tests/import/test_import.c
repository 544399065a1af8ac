/* `cannprof import` (import/import.h) on profiles written here from the
 * documented formats (tests/import/fixtures, docs/import.md): each family
 * lands on the right layers with its steps as iterations, its kernels and
 * its counters; what is not imported is counted; the imported trace is
 * analysed, exported and validated like a measured one; bad input exits 2
 * naming the file and the byte, and leaves no run behind. */
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

TestSuite(import, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

static void mkdirs(const char *path)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_mkdir_p(path, 0755, &d), CP_OK, "%s", d.msg);
}

static char *fixture(const char *name)
{
    return cp_t_fmt("%s/tests/import/fixtures/%s", CP_SOURCE_DIR, name);
}

/* Import `profile` into `db`; the --json result. */
static json_t *import_ok(const char *profile, const char *db)
{
    struct cp_run r;
    cp_run_cli(&r, "import", profile, "-o", db, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "import %s: %s", profile, r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    return j;
}

static int64_t num(json_t *j, const char *path)
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
static sqlite3_stmt *row_of(const char *db, const char *sql, sqlite3 **s)
{
    cr_assert_eq(sqlite3_open_v2(db, s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(*s, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
                 sqlite3_errmsg(*s));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
    return st;
}

static void row_done(sqlite3 *s, sqlite3_stmt *st)
{
    sqlite3_finalize(st);
    sqlite3_close(s);
}

static int64_t q_int(const char *db, const char *sql)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *st = row_of(db, sql, &s);
    int64_t v = sqlite3_column_int64(st, 0);
    row_done(s, st);
    return v;
}

static double q_num(const char *db, const char *sql)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *st = row_of(db, sql, &s);
    double v = sqlite3_column_double(st, 0);
    row_done(s, st);
    return v;
}

/* The text of the first row, or NULL when there is none (caller frees). */
static char *q_text(const char *db, const char *sql)
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

static void expect_kineto(json_t *j, const char *db)
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

Test(import, a_kineto_trace_lands_on_three_layers_with_its_steps)
{
    char *f = fixture("kineto_gpu.json"), *db = cp_t_path("k.db");
    json_t *j = import_ok(f, db);
    expect_kineto(j, db);
    json_decref(j);
    free(db);
    free(f);
}

/* The same trace gzip-compressed reads the same. */
Test(import, a_gzipped_kineto_trace_reads_the_same)
{
    char *f = fixture("kineto_gpu.json"), *gzp = cp_t_path("kineto_gpu.json.gz"),
         *db = cp_t_path("kz.db");
    char *text = ct_read_text(f);
    gzFile gz = gzopen(gzp, "wb");
    cr_assert_not_null(gz);
    cr_assert_eq(gzwrite(gz, text, (unsigned)strlen(text)), (int)strlen(text));
    cr_assert_eq(gzclose(gz), Z_OK);
    json_t *j = import_ok(gzp, db);
    expect_kineto(j, db);
    cr_expect_eq(num(j, "bytes"), (int64_t)strlen(text), "the decompressed size");
    json_decref(j);
    free(text);
    free(db);
    free(gzp);
    free(f);
}

Test(import, a_torch_npu_trace_view_with_string_timestamps)
{
    char *dir = cp_t_path("rank0_ascend_pt"), *out = cp_t_fmt("%s/ASCEND_PROFILER_OUTPUT", dir);
    mkdirs(out);
    char *src = fixture("trace_view.json"), *dst = cp_t_fmt("%s/trace_view.json", out);
    char *text = ct_read_text(src);
    ct_write_text(dst, text);
    char *db = cp_t_path("npu.db");
    /* the run folder is enough: its trace_view.json is found */
    json_t *j = import_ok(dir, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "ascend");
    cr_expect_str_eq(json_string_value(json_object_get(j, "source")), dst);
    cr_expect_eq(num(j, "events_by_layer.application"), 3);
    cr_expect_eq(num(j, "events_by_layer.runtime"), 1, "the CANN call");
    cr_expect_eq(num(j, "events_by_layer.device"), 3);
    cr_expect_eq(num(j, "kernels"), 2);
    cr_expect_eq(num(j, "iterations"), 2);
    cr_expect_eq(num(j, "skipped.derived"), 1, "Overlap Analysis is derived");
    cr_expect_eq(num(j, "skipped.flow"), 2, "flows with ids beyond 2^53");
    /* "dur":"1500.000\t": a string with a tab, read as 1.5 ms */
    cr_expect_eq(q_int(db, "SELECT latency_ns FROM samples WHERE iteration = 1"), 1500000);
    cr_expect_eq(q_int(db, "SELECT latency_ns FROM samples WHERE iteration = 0"), 2000000);
    /* 1736408883688400.500 - 1736408883688177.930 us, exactly */
    cr_expect_eq(q_int(db, "SELECT e.start_ns FROM events e JOIN strings s ON s.id = e.name_id "
                           "WHERE s.value = 'aclnnMatmul_MatMulCommon_MatMulV2'"),
                 222570);
    cr_expect_eq(q_int(db, "SELECT e.dur_ns FROM events e JOIN strings s ON s.id = e.name_id "
                           "WHERE s.value = 'aclnnMatmul_MatMulCommon_MatMulV2'"),
                 53741);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM kernels WHERE op_type = 'MatMulV2' AND "
                           "impl = 'AI_CORE'"),
                 1);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM kernels WHERE op_type = 'TransData'"), 1);
    /* the framework op that launched a task, through the async_npu flow */
    char *org = q_text(db, "SELECT origins FROM kernels WHERE op_type = 'MatMulV2'");
    cr_expect_str_eq(org ? org : "(none)", "[\"aten::matmul\"]");
    free(org);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name = 'AI Core Freq.MHz' AND "
                           "value = 1800"),
                 1);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name = 'arg.aic_mac_ratio'"), 1);
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'step.number' AND "
                           "iteration = 1"),
                 51, "the profiler's own step numbers");
    json_decref(j);
    free(db);
    free(text);
    free(dst);
    free(src);
    free(out);
    free(dir);
}

Test(import, an_onnx_runtime_profile_in_end_time_order)
{
    char *f = fixture("ort_profile.json"), *db = cp_t_path("ort.db");
    json_t *j = import_ok(f, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "ort");
    cr_expect_eq(num(j, "iterations"), 3, "one per model_run");
    cr_expect_str_eq(json_string_value(json_object_get(j, "steps")), "model_run");
    cr_expect_eq(num(j, "events_by_layer.device"), 6, "the nodes' kernel times");
    cr_expect_eq(num(j, "events_by_layer.runtime"), 5, "loading, initialization, executors");
    cr_expect_eq(num(j, "events_by_layer.application"), 3, "the runs");
    cr_expect_eq(num(j, "skipped.fence"), 2);
    cr_expect_eq(q_int(db, "SELECT latency_ns FROM samples WHERE iteration = 1"), 460000);
    /* the node is its own ONNX origin, with its op type and provider */
    char *origins = q_text(db, "SELECT origins FROM kernels WHERE op_type = 'Conv'");
    cr_expect_str_eq(origins ? origins : "(none)", "[\"conv1\"]");
    free(origins);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM kernels WHERE impl = 'CPUExecutionProvider'"), 2);
    /* sizes written as strings are numbers */
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'arg.activation_size'"),
                 602112);
    json_decref(j);
    free(db);
    free(f);
}

/* ---- what the other commands make of an import -------------------------------------- */

Test(import, analyze_suggest_and_export_work_on_an_import)
{
    char *f = fixture("ort_profile.json"), *db = cp_t_path("a.db"), *ch = cp_t_path("a.json");
    json_decref(import_ok(f, db));
    struct cp_run r;
    cp_run_cli(&r, "analyze", db, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(r.out, "\"Conv takes", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "suggest", db, "--no-calibrate", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "export", db, "--format", "chrome", "-o", ch, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *e = ct_json(r.out);
    cr_expect_eq(num(e, "events"), 14);
    json_decref(e);
    cp_run_release(&r);
    json_t *chrome = cp_t_json_file(ch);
    cr_expect_not_null(chrome, "the export is JSON");
    json_decref(chrome);
    free(ch);
    free(db);
    free(f);
}

/* A Kineto-like trace of n steps of about `step_us` each (a seeded
 * scatter of +-2%), each with one kernel of 60% of the step. */
static char *steps_trace(const char *name, int n, double step_us, unsigned seed)
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

/* A service profiled each night: one import is its baseline, a slower
 * one the next night regresses against it; the folded export works too. */
Test(import, a_baseline_of_an_import_and_a_regression_against_it)
{
    char *a = steps_trace("night1.json", 40, 1000, 7), *b = steps_trace("night2.json", 40, 1300, 8);
    char *da = cp_t_path("night1.db"), *dbb = cp_t_path("night2.db"), *kb = cp_t_path("kb.sqlite");
    char *folded = cp_t_path("night1.folded");
    json_decref(import_ok(a, da));
    json_decref(import_ok(b, dbb));
    struct cp_run r;
    cp_run_cli(&r, "baseline", "set", "--service", "nightly", "--trace", da, "--tag", "n1", "--kb",
               kb, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--baseline", "n1", "--service", "nightly", "--trace", dbb, "--kb",
               kb, "--json", NULL);
    cr_expect_eq(r.exit_code, 1, "30%% slower than the baseline: %s %s", r.out, r.err);
    ct_assert_mentions(r.out, "\"regressed\"", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "export", da, "--format", "folded", "-o", folded, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    char *text = ct_read_text(folded);
    cr_expect(strstr(text, "gemm") != NULL, "the folded stacks name the kernel: %.200s", text);
    free(text);
    free(folded);
    free(kb);
    free(da);
    free(dbb);
    free(a);
    free(b);
}

Test(import, validate_tells_a_slower_import_from_the_same)
{
    char *a = steps_trace("a.json", 40, 1000, 1), *b = steps_trace("b.json", 40, 1250, 2),
         *a2 = steps_trace("a2.json", 40, 1000, 3);
    char *da = cp_t_path("a.db"), *db = cp_t_path("b.db"), *da2 = cp_t_path("a2.db");
    json_decref(import_ok(a, da));
    json_decref(import_ok(b, db));
    json_decref(import_ok(a2, da2));
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", da, "--after", db, "--json", NULL);
    cr_assert_eq(r.exit_code, 1, "a 25%% slower profile is a regression: %s %s", r.out, r.err);
    ct_assert_mentions(r.out, "\"regressed\"", NULL);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", da, "--after", da2, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "the same profile again is no regression: %s %s", r.out, r.err);
    cp_run_release(&r);
    free(a);
    free(b);
    free(a2);
    free(da);
    free(db);
    free(da2);
}

/* ---- bad input ------------------------------------------------------------------------ */

static void expect_refused(const char *profile, const char *db, const char *what)
{
    struct cp_run r;
    cp_run_cli(&r, "import", profile, "-o", db, NULL);
    cr_expect_eq(r.exit_code, 2, "%s: %s", profile, r.err);
    cr_expect(strstr(r.err, what) != NULL, "'%s' not in: %s", what, r.err);
    cp_run_release(&r);
    if (cp_path_exists(db))
        cr_expect_eq(q_int(db, "SELECT count(*) FROM runs"), 0, "no run left behind: %s", profile);
}

Test(import, bad_input_exits_2_naming_the_file_and_leaves_no_run)
{
    char *db = cp_t_path("bad.db");
    /* truncated in the middle of an event, after events were written */
    char *f = fixture("kineto_gpu.json");
    char *text = ct_read_text(f);
    char *cut = cp_t_path("cut.json");
    text[strlen(text) * 2 / 3] = '\0';
    ct_write_text(cut, text);
    expect_refused(cut, db, "ends early");
    expect_refused(cut, db, "cut.json");
    /* garbage inside: the byte offset */
    char *junk = cp_t_path("junk.json");
    ct_write_text(junk, "[{\"ph\":\"X\",\"ts\":1,\"dur\":2,\"name\":\"a\"},\n{\"ph\": X}]");
    expect_refused(junk, db, "byte ");
    /* an empty profile (what ONNX Runtime writes when the session was not
     * ended) */
    char *empty_json = cp_t_path("onnxruntime_profile__empty.json");
    ct_write_text(empty_json, "[\n]\n");
    expect_refused(empty_json, db, "no event with a time");
    free(empty_json);
    /* JSON that is not a trace */
    char *obj = cp_t_path("obj.json");
    ct_write_text(obj, "{\"hello\": [1, 2, 3]}");
    expect_refused(obj, db, "not a trace");
    /* not JSON at all, a SQLite file, a missing path, an empty folder */
    char *csv = cp_t_path("kernel_details.csv");
    ct_write_text(csv, "Name,Type\r\nMatMul,MatMul\r\n");
    expect_refused(csv, db, "lacks Start Time(us)");
    char *txt = cp_t_path("notes.txt");
    ct_write_text(txt, "hello\n");
    expect_refused(txt, db, "byte 0: not a JSON trace");
    free(txt);
    char *good = cp_t_path("good.db");
    json_decref(import_ok(f, good));
    expect_refused(good, db, "a SQLite database, but neither a torch_npu");
    free(good);
    char *missing = cp_t_path("missing.json");
    struct cp_run r;
    cp_run_cli(&r, "import", missing, "-o", db, NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "no such file", NULL);
    cp_run_release(&r);
    char *empty = cp_t_path("empty");
    mkdirs(empty);
    expect_refused(empty, db, "no profile found");
    /* an unknown --format */
    cp_run_cli(&r, "import", f, "-o", db, "--format", "pdf", NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "--format pdf", NULL);
    cp_run_release(&r);
    /* and a good import into the same store still works */
    json_t *j = import_ok(f, db);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM runs"), 1);
    json_decref(j);
    free(empty);
    free(missing);
    free(csv);
    free(obj);
    free(junk);
    free(cut);
    free(text);
    free(f);
    free(db);
}

/* Raw control characters inside names (which some profilers write) are
 * read as spaces, and B/E pairs become intervals. */
Test(import, control_characters_and_begin_end_pairs)
{
    char *p = cp_t_path("ctl.json"), *db = cp_t_path("ctl.db");
    ct_write_text(p, "[{\"ph\":\"B\",\"name\":\"outer\x01name\",\"pid\":1,\"tid\":2,\"ts\":10},\n"
                     "{\"ph\":\"B\",\"name\":\"inner\",\"pid\":1,\"tid\":2,\"ts\":12},\n"
                     "{\"ph\":\"E\",\"pid\":1,\"tid\":2,\"ts\":15},\n"
                     "{\"ph\":\"E\",\"pid\":1,\"tid\":2,\"ts\":30},\n"
                     "{\"ph\":\"E\",\"pid\":1,\"tid\":2,\"ts\":31}]\n");
    json_t *j = import_ok(p, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "chrome");
    cr_expect_eq(num(j, "events_by_layer.application"), 2);
    cr_expect_eq(num(j, "skipped.unpaired"), 1);
    cr_expect_eq(q_int(db, "SELECT e.dur_ns FROM events e JOIN strings s ON s.id = e.name_id "
                           "WHERE s.value = 'outer name'"),
                 20000);
    cr_expect_eq(q_int(db, "SELECT e.dur_ns FROM events e JOIN strings s ON s.id = e.name_id "
                           "WHERE s.value = 'inner'"),
                 3000);
    json_decref(j);
    free(db);
    free(p);
}

/* ---- torch_npu's and msprof's task tables ---------------------------------------------- */

/* A torch_npu run folder without trace_view.json: kernel_details.csv
 * (CRLF, Device_id, timestamps with a trailing tab quoted and not, N/A,
 * shapes in doubled quotes) with step_trace_time.csv beside it. */
Test(import, a_torch_npu_kernel_details_table_with_its_step_times)
{
    char *dir = cp_t_path("csv_ascend_pt"), *out = cp_t_fmt("%s/ASCEND_PROFILER_OUTPUT", dir);
    mkdirs(out);
    static const char *const files[] = {"kernel_details.csv", "step_trace_time.csv"};
    for (size_t i = 0; i < 2; i++) {
        char *src = fixture(files[i]), *dst = cp_t_fmt("%s/%s", out, files[i]);
        char *text = ct_read_text(src);
        ct_write_text(dst, text);
        free(text);
        free(dst);
        free(src);
    }
    char *db = cp_t_path("csv.db");
    json_t *j = import_ok(dir, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "ascend-csv");
    cr_expect_str_eq(json_string_value(json_object_get(j, "steps")), "step_trace_time");
    cr_expect_eq(num(j, "events_by_layer.device"), 4);
    cr_expect_eq(num(j, "kernels"), 3);
    cr_expect_eq(num(j, "iterations"), 2);
    /* the steps' lengths: Computing + Communication(Not Overlapped) + Free */
    cr_expect_eq(q_int(db, "SELECT latency_ns FROM samples WHERE iteration = 0"), 2000000);
    cr_expect_eq(q_int(db, "SELECT latency_ns FROM samples WHERE iteration = 1"), 1500000);
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'step.number' AND "
                           "iteration = 1"),
                 51);
    /* columns by name: type, core; a start time with a tab, exactly */
    cr_expect_eq(q_int(db, "SELECT count(*) FROM kernels WHERE op_type = 'MatMulV2' AND "
                           "impl = 'AI_CORE'"),
                 1);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM kernels WHERE impl = 'HCCL'"), 1);
    cr_expect_eq(q_int(db, "SELECT e.start_ns FROM events e JOIN strings s ON s.id = e.name_id "
                           "WHERE s.value = 'trans_TransData_0' AND e.iteration = 0"),
                 99500);
    /* the other numeric columns per step, weighted by the tasks' durations;
     * N/A is absent, not zero */
    double mac = (0.61 * 53741 + 0 * 20000) / (53741 + 20000.0);
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = 'col.aic_mac_ratio' "
                                 "AND iteration = 0"),
                       mac, 1e-9);
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = 'col.aiv_vec_ratio' "
                                 "AND iteration = 1"),
                       0.55, 1e-12, "the HCCL row's N/A does not count");
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name = 'col.Task ID'"), 0,
                 "identities are not measurements");
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'ascend.op_state.dynamic' "
                           "AND iteration = 0"),
                 1);
    json_decref(j);
    free(db);
    free(out);
    free(dir);
}

/* msprof's op_summary of 2023: other header names, no steps, one-decimal
 * timestamps, LF, a quoted shape list spanning two lines. */
Test(import, an_msprof_op_summary_without_steps_is_one_window)
{
    char *f = fixture("op_summary_20231109105342.csv"), *db = cp_t_path("ops.db");
    json_t *j = import_ok(f, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "ascend-csv");
    cr_expect_eq(num(j, "iterations"), 0);
    cr_expect_eq(num(j, "events_by_layer.device"), 3);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM samples"), 1);
    /* from the first start to the last end: 755.0 + 45.0 - 614.8 us */
    cr_expect_eq(q_int(db, "SELECT latency_ns FROM samples"), 185200);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM kernels WHERE impl = 'AI_CPU'"), 1);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM events WHERE iteration = 0"), 3);
    json_decref(j);
    free(db);
    free(f);
}

Test(import, a_broken_task_table_exits_2_naming_the_row)
{
    char *db = cp_t_path("badcsv.db");
    char *p = cp_t_path("kernel_details.csv");
    ct_write_text(p, "Name,Type,Start Time(us),Duration(us)\nA,MatMul,10,5\nB,Add,20,5,extra\n");
    expect_refused(p, db, "row 3: 5 fields where the header has 4");
    ct_write_text(p, "Name,Type,Start Time(us),Duration(us)\nA,MatMul,10,5\n\"B,Add,20,5\n");
    expect_refused(p, db, "ends inside a quoted field");
    ct_write_text(p, "Op,Kind\nA,B\n");
    expect_refused(p, db, "lacks Name");
    free(p);
    free(db);
}

/* ---- planted findings, one per family ----------------------------------------------------- */

/* The rules of `analyze --json` on db, as a list of their names. */
static char *fired_rules(const char *db)
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

Test(import, a_planted_transdata_share_in_a_torch_npu_timeline)
{
    char *f = fixture("trace_view.json"), *db = cp_t_path("tv.db");
    json_decref(import_ok(f, db));
    /* a finding on the matmul names its framework op and that op's call
     * stack, as the timeline recorded it */
    struct cp_run r;
    cp_run_cli(&r, "analyze", db, "--json", "--no-calibrate", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(
        r.out,
        "\"call_stacks\":{\"aten::matmul\":[\"train.py(12): step\",\"model.py(40): forward\"]}",
        NULL);
    cp_run_release(&r);
    char *rules = fired_rules(db);
    cr_expect(strstr(rules, "ascend_transdata ") != NULL, "fired: %s", rules);
    cr_expect(strstr(rules, "unfused") == NULL && strstr(rules, "launch_bound") == NULL,
              "no rule for cannprof's own runs fires on a profile: %s", rules);
    free(rules);
    free(db);
    free(f);
}

Test(import, a_planted_ai_cpu_operator_in_an_msprof_task_table)
{
    char *f = fixture("op_summary_20231109105342.csv"), *db = cp_t_path("aicpu.db");
    json_decref(import_ok(f, db));
    char *rules = fired_rules(db);
    cr_expect(strstr(rules, "ascend_aicpu_operators ") != NULL, "fired: %s", rules);
    free(rules);
    /* the finding names the AI_CPU task as the time it acts on */
    struct cp_run r;
    cp_run_cli(&r, "suggest", db, "--no-calibrate", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(r.out, "Operators run on the AI CPU instead of the AI Core", "float64",
                       NULL);
    cp_run_release(&r);
    free(db);
    free(f);
}

/* A Kineto trace whose copies take half of the GPU time. */
Test(import, a_planted_copy_share_in_a_kineto_trace)
{
    char *p = cp_t_path("copies.json"), *db = cp_t_path("copies.db");
    FILE *fp = fopen(p, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "{\"schemaVersion\": 1, \"traceEvents\": [\n");
    double t = 1.7e9;
    for (int i = 0; i < 10; i++, t += 1000)
        fprintf(fp,
                "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\","
                "\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":990},\n"
                "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD (Pageable -> "
                "Device)\",\"pid\":0,\"tid\":7,\"ts\":%.3f,\"dur\":400,\"args\":{\"bytes\":"
                "4194304}},\n"
                "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,"
                "\"ts\":%.3f,\"dur\":400,\"args\":{\"est. achieved occupancy %%\":60}},\n",
                i, t, t + 10, t + 450);
    fprintf(fp, "{\"ph\":\"i\",\"name\":\"end\",\"pid\":1,\"tid\":1,\"ts\":%.3f}]}\n", t);
    fclose(fp);
    json_decref(import_ok(p, db));
    char *rules = fired_rules(db);
    cr_expect(strstr(rules, "gpu_host_device_copies ") != NULL, "fired: %s", rules);
    cr_expect(strstr(rules, "gpu_low_occupancy") == NULL, "60%% occupancy is fine: %s", rules);
    cr_expect(strstr(rules, "ascend_") == NULL, "no Ascend rule on a GPU trace: %s", rules);
    free(rules);
    free(db);
    free(p);
}

/* An ONNX Runtime profile whose Transposes take most of the time. */
Test(import, a_planted_transpose_share_in_an_onnx_runtime_profile)
{
    char *p = cp_t_path("ort_t.json"), *db = cp_t_path("ort_t.db");
    FILE *fp = fopen(p, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "[\n");
    for (int i = 0; i < 5; i++) {
        int t0 = 1000 * i;
        fprintf(fp,
                "{\"cat\":\"Node\",\"pid\":1,\"tid\":1,\"dur\":300,\"ts\":%d,\"ph\":\"X\","
                "\"name\":\"tr_kernel_time\",\"args\":{\"op_name\":\"Transpose\"}},\n"
                "{\"cat\":\"Node\",\"pid\":1,\"tid\":1,\"dur\":200,\"ts\":%d,\"ph\":\"X\","
                "\"name\":\"mm_kernel_time\",\"args\":{\"op_name\":\"MatMul\"}},\n"
                "{\"cat\":\"Session\",\"pid\":1,\"tid\":1,\"dur\":600,\"ts\":%d,\"ph\":\"X\","
                "\"name\":\"model_run\",\"args\":{}}%s\n",
                t0 + 10, t0 + 320, t0, i == 4 ? "" : ",");
    }
    fprintf(fp, "]\n");
    fclose(fp);
    json_decref(import_ok(p, db));
    char *rules = fired_rules(db);
    cr_expect(strstr(rules, "ort_layout_transposes ") != NULL, "fired: %s", rules);
    free(rules);
    free(db);
    free(p);
}

/* ---- SQLite exports ------------------------------------------------------------------------ */

/* The fixture's SQL run into a fresh database at `path`. */
static void make_db(const char *sql_fixture, const char *path)
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

Test(import, a_torch_npu_db_export_in_its_run_folder)
{
    char *dir = cp_t_path("db_ascend_pt"), *out = cp_t_fmt("%s/ASCEND_PROFILER_OUTPUT", dir);
    mkdirs(out);
    char *src = cp_t_fmt("%s/ascend_pytorch_profiler_0.db", out);
    make_db("torch_npu_db.sql", src);
    char *db = cp_t_path("npudb.db");
    json_t *j = import_ok(dir, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "ascend-db");
    cr_expect_str_eq(json_string_value(json_object_get(j, "source")), src);
    cr_expect_str_eq(json_string_value(json_object_get(j, "steps")), "STEP_TIME");
    cr_expect_eq(num(j, "events_by_layer.device"), 4);
    cr_expect_eq(num(j, "events_by_layer.runtime"), 1, "CANN_API");
    cr_expect_eq(num(j, "events_by_layer.application"), 1, "PYTORCH_API, times as TEXT");
    cr_expect_eq(num(j, "kernels"), 4);
    cr_expect_eq(q_int(db, "SELECT latency_ns FROM samples WHERE iteration = 1"), 2000000);
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'step.number' AND "
                           "iteration = 1"),
                 8);
    /* names, op types and cores through the string table; a task without
     * compute info by its task type */
    cr_expect_eq(q_int(db, "SELECT count(*) FROM kernels WHERE op_type = 'MatMulV2' AND impl = "
                           "'AI_CORE'"),
                 1);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM kernels WHERE node = 'MEMCPY_ASYNC'"), 1);
    cr_expect_eq(q_int(db, "SELECT e.start_ns FROM events e JOIN strings s ON s.id = e.name_id "
                           "WHERE s.value = 'aten::matmul'"),
                 50000);
    /* the PMU's long table, per step, weighted by the tasks' durations */
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = 'col.aic_mac_ratio' "
                                 "AND iteration = 0"),
                       0.7 * 200000 / 300000, 1e-9);
    char *rules = fired_rules(db);
    cr_expect(strstr(rules, "ascend_aicpu_operators ") != NULL, "fired: %s", rules);
    cr_expect(strstr(rules, "ascend_cube_waits_on_memory") == NULL,
              "no MTE2 ratio in the profile, no MTE2 finding: %s", rules);
    free(rules);
    json_decref(j);
    free(db);
    free(src);
    free(out);
    free(dir);
}

Test(import, nsight_systems_exports_of_two_schema_versions)
{
    char *a = cp_t_path("n22.sqlite"), *b = cp_t_path("n24.sqlite");
    char *da = cp_t_path("n22.db"), *dbb = cp_t_path("n24.db");
    make_db("nsys_2022.sql", a);
    make_db("nsys_2024.sql", b);
    json_t *j = import_ok(a, da);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "nsys");
    cr_expect_str_eq(json_string_value(json_object_get(j, "steps")), "NVTX");
    cr_expect_eq(num(j, "iterations"), 2);
    cr_expect_eq(num(j, "events_by_layer.device"), 4, "2 kernels, 2 copies");
    cr_expect_eq(num(j, "events_by_layer.runtime"), 4);
    cr_expect_eq(num(j, "events_by_layer.application"), 2, "the ranges; the mark has no end");
    cr_expect_eq(q_int(da, "SELECT latency_ns FROM samples WHERE iteration = 0"), 1000000);
    cr_expect_eq(q_int(da, "SELECT value FROM counters WHERE name = 'arg.bytes' AND "
                           "iteration = 1"),
                 4194304);
    char *v = q_text(da, "SELECT value FROM meta WHERE key = "
                         "'run.1.import.profile.version_table'");
    cr_expect_str_eq(v ? v : "(none)", "EXPORT_META_DATA");
    free(v);
    char *rules = fired_rules(da);
    cr_expect(strstr(rules, "gpu_host_device_copies ") != NULL, "fired: %s", rules);
    free(rules);
    json_decref(j);
    /* 2024: META_DATA_EXPORT, a kernel named only by shortName, NVTX text
     * by id, no steps */
    j = import_ok(b, dbb);
    cr_expect_eq(num(j, "iterations"), 0);
    cr_expect_eq(q_int(dbb, "SELECT count(*) FROM kernels WHERE node = 'ampere_sgemm_64x64_nn'"),
                 1);
    cr_expect_eq(q_int(dbb, "SELECT count(*) FROM events e JOIN strings s ON s.id = e.name_id "
                            "WHERE s.value = 'forward' AND e.layer = 0"),
                 1);
    cr_expect_eq(q_int(dbb, "SELECT latency_ns FROM samples"), 1750, "the window");
    v = q_text(dbb, "SELECT value FROM meta WHERE key = 'run.1.import.profile.version_table'");
    cr_expect_str_eq(v ? v : "(none)", "META_DATA_EXPORT");
    free(v);
    json_decref(j);
    /* a damaged export: its first pages only */
    char *text = NULL;
    size_t len = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_read(a, (uint8_t **)&text, &len, &d), CP_OK);
    char *cut = cp_t_path("cut.sqlite");
    cr_assert_eq(cp_file_write_atomic(cut, text, len > 5000 ? 5000 : len / 2, &d), CP_OK);
    char *dc = cp_t_path("cut.db");
    expect_refused(cut, dc, "cut.sqlite");
    free(dc);
    free(cut);
    free(text);
    free(da);
    free(dbb);
    free(a);
    free(b);
}

/* ---- TensorRT ------------------------------------------------------------------------------ */

Test(import, trtexec_times_and_profile)
{
    char *t = fixture("resnet.timing.json"), *p = fixture("resnet.profile.json");
    char *dt = cp_t_path("trt_t.db"), *dp = cp_t_path("trt_p.db");
    json_t *j = import_ok(t, dt);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "trt");
    cr_expect_eq(num(j, "iterations"), 3, "one per inference record");
    cr_expect_eq(num(j, "events_by_layer.device"), 9, "H2D, compute, D2H each");
    cr_expect_eq(num(j, "events_by_layer.runtime"), 3, "the enqueues");
    cr_expect_eq(q_int(dt, "SELECT latency_ns FROM samples WHERE iteration = 1"), 750000,
                 "trtexec's own latencyMs");
    cr_expect_eq(q_int(dt, "SELECT e.start_ns FROM events e JOIN strings s ON s.id = e.name_id "
                           "WHERE s.value = 'compute' AND e.iteration = 1"),
                 1700000);
    json_decref(j);
    /* the profile: the layers' averages end to end, typed by the layer
     * info beside it (resnet.graph.json) */
    j = import_ok(p, dp);
    cr_expect_eq(num(j, "events_by_layer.device"), 4);
    cr_expect_eq(q_int(dp, "SELECT latency_ns FROM samples"), 500000);
    cr_expect_eq(q_int(dp, "SELECT count(*) FROM kernels WHERE op_type = 'CaskConvolution'"), 2);
    cr_expect_eq(q_int(dp, "SELECT value FROM counters WHERE name = 'trt.profiled_count'"), 200);
    char *rules = fired_rules(dp);
    cr_expect(strstr(rules, "trt_reformat_layers ") != NULL, "fired: %s", rules);
    free(rules);
    json_decref(j);
    /* a profile whose first record is not the count */
    char *bad = cp_t_path("bad.profile.json"), *dbad = cp_t_path("bad.db");
    ct_write_text(bad, "[{\"name\": \"x\", \"averageMs\": 1, \"count\": 0}]");
    expect_refused(bad, dbad, "is not {\"count\": N} with N > 0");
    free(dbad);
    free(bad);
    free(dt);
    free(dp);
    free(t);
    free(p);
}

/* ---- a cluster --------------------------------------------------------------------------------
 */

/* A folder of two torch_npu rank folders (rank_id an int in one
 * profiler_info, a string in the other, as versions wrote it); rank 1's
 * steps 20% and 27% longer. */
static char *make_cluster(const char *name, bool break_rank1)
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

Test(import, a_cluster_folder_is_a_run_per_rank_and_the_slow_rank_is_found)
{
    char *root = make_cluster("cluster", false), *db = cp_t_path("cluster.db");
    json_t *j = import_ok(root, db);
    json_t *ranks = json_object_get(j, "ranks");
    cr_assert_eq(json_array_size(ranks), 2);
    cr_expect_eq(json_integer_value(json_object_get(json_array_get(ranks, 1), "rank")), 1);
    cr_expect_eq(num(j, "events_by_layer.device"), 6, "both ranks' tasks");
    cr_expect_eq(q_int(db, "SELECT count(*) FROM runs"), 2);
    cr_expect_eq(q_int(db, "SELECT count(DISTINCT value) FROM counters WHERE name = 'run.group'"),
                 1, "one run group");
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'rank' AND run_id = 2"), 1);
    char *rules = fired_rules(db);
    cr_expect(strstr(rules, "ascend_slow_rank ") != NULL, "fired: %s", rules);
    free(rules);
    struct cp_run r;
    cp_run_cli(&r, "suggest", db, "--no-calibrate", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(r.out, "why rank 1 is slower", NULL);
    cp_run_release(&r);
    json_decref(j);
    free(db);
    free(root);
}

/* A rank that cannot be read fails the whole import, naming the rank, and
 * leaves no run: no rank is silently dropped. */
Test(import, a_broken_rank_fails_the_cluster_and_leaves_nothing)
{
    char *root = make_cluster("cluster_bad", true), *db = cp_t_path("cluster_bad.db");
    struct cp_run r;
    cp_run_cli(&r, "import", root, "-o", db, NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "rank 1 (node1_101_ascend_pt)", "no rank was imported", NULL);
    cp_run_release(&r);
    if (cp_path_exists(db))
        cr_expect_eq(q_int(db, "SELECT count(*) FROM runs"), 0);
    free(db);
    free(root);
}

/* A torch_npu run folder with both its timeline and its task table: the
 * events come from the timeline, the hardware columns from the table, in
 * the timeline's steps by their numbers. */
Test(import, the_task_table_beside_a_timeline_adds_its_hardware_columns)
{
    char *dir = cp_t_path("both_ascend_pt"), *out = cp_t_fmt("%s/ASCEND_PROFILER_OUTPUT", dir);
    mkdirs(out);
    static const char *const files[] = {"trace_view.json", "kernel_details.csv",
                                        "communication.json", "memory_record.csv"};
    for (size_t i = 0; i < 4; i++) {
        char *src = fixture(files[i]), *dst = cp_t_fmt("%s/%s", out, files[i]);
        char *text = ct_read_text(src);
        ct_write_text(dst, text);
        free(text);
        free(dst);
        free(src);
    }
    /* the run's environment, one folder up */
    char *meta = cp_t_fmt("%s/profiler_metadata.json", dir);
    ct_write_text(meta, "{\"ENV_VARIABLES\": {\"ASCEND_LAUNCH_BLOCKING\": \"1\", "
                        "\"PYTORCH_NPU_ALLOC_CONF\": \"expandable_segments:True\"}}");
    free(meta);
    char *db = cp_t_path("both.db");
    json_t *j = import_ok(dir, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "ascend");
    cr_expect_eq(num(j, "events_by_layer.device"), 3, "the timeline's tasks, not the table's too");
    cr_expect_eq(num(j, "kernels"), 2);
    double mac = (0.61 * 53741 + 0 * 20000) / (53741 + 20000.0);
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = 'col.aic_mac_ratio' "
                                 "AND iteration = 0"),
                       mac, 1e-9, "Step Id 50 is the timeline's ProfilerStep#50");
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'ascend.op_state.dynamic' "
                           "AND iteration = 1"),
                 1);
    char *rules = fired_rules(db);
    cr_expect(strstr(rules, "ascend_dynamic_shapes ") != NULL, "fired: %s", rules);
    cr_expect(strstr(rules, "ascend_launch_blocking ") != NULL, "fired: %s", rules);
    free(rules);
    char *env = q_text(db, "SELECT value FROM meta WHERE key = "
                           "'run.1.import.env.PYTORCH_NPU_ALLOC_CONF'");
    cr_expect_str_eq(env ? env : "(none)", "expandable_segments:True");
    free(env);
    /* communication.json: each step's collective times ("Total Op Info"
     * where the file sums them itself, else the ops), in its step */
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = 'comm.wait_ms' AND "
                                 "iteration = 1"),
                       0.2, 1e-12);
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = 'comm.elapse_ms' AND "
                                 "iteration = 0"),
                       0.1, 1e-12, "not counted twice with Total Op Info");
    /* memory_record.csv: the framework's reserved peak is the run's memory */
    cr_expect_eq(q_int(db, "SELECT peak_bytes FROM runs"), 768 * 1048576);
    json_decref(j);
    free(db);
    free(out);
    free(dir);
}

/* A CPU-only torch.profiler trace: no device at all, and no
 * deviceProperties; it imports, and analyze says what it cannot tell. */
Test(import, a_cpu_only_kineto_trace)
{
    char *p = cp_t_path("cpu_only.json"), *db = cp_t_path("cpu_only.db");
    ct_write_text(p, "{\"schemaVersion\": 1, \"deviceProperties\": [], \"traceEvents\": [\n"
                     "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#0\","
                     "\"pid\":9,\"tid\":9,\"ts\":100,\"dur\":50},\n"
                     "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"pid\":9,"
                     "\"tid\":9,\"ts\":110,\"dur\":20}]}\n");
    json_t *j = import_ok(p, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "kineto");
    cr_expect_eq(num(j, "events_by_layer.device"), 0);
    cr_expect_eq(num(j, "events_by_layer.application"), 2);
    struct cp_run r;
    cp_run_cli(&r, "analyze", db, "--no-calibrate", NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    json_decref(j);
    free(db);
    free(p);
}

/* ---- what the fuzz campaigns found (docs/fuzzing.md) -------------------------------------- */

/* A trtexec record without latencyMs after a good one: refused, naming the
 * record, nothing leaked (LeakSanitizer under scripts/test_sanitize.sh). */
Test(import, a_trtexec_record_without_latency_is_refused)
{
    char *p = cp_t_path("bad.timing.json"), *db = cp_t_path("bad_t.db");
    ct_write_text(p, "[{\"startEnqMs\": 1, \"endEnqMs\": 2, \"latencyMs\": 1},\n"
                     " {\"startEnqMs\": 3, \"endEnqMs\": 4}]\n");
    expect_refused(p, db, "record 1 has no latencyMs");
    free(db);
    free(p);
}

/* A torch_npu device task without a name imports, as op type Kernel. */
Test(import, an_ascend_device_task_without_a_name)
{
    char *p = cp_t_path("noname.json"), *db = cp_t_path("noname.db");
    ct_write_text(p, "[{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":2,\"tid\":0,"
                     "\"args\":{\"name\":\"Ascend Hardware\"}},\n"
                     "{\"ph\":\"X\",\"pid\":2,\"tid\":2,\"ts\":\"10.0\",\"dur\":5}]\n");
    json_t *j = import_ok(p, db);
    cr_expect_eq(num(j, "events_by_layer.device"), 1);
    json_decref(j);
    free(db);
    free(p);
}

/* A task table with more steps than the first allocation holds (the step
 * map once pointed into the array that moves as it grows). */
Test(import, a_task_table_with_many_steps)
{
    char *p = cp_t_path("kernel_details.csv"), *db = cp_t_path("many.db");
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "Step Id,Name,Type,Start Time(us),Duration(us)\n");
    for (int i = 0; i < 100; i++)
        cp_buf_printf(&b, "%d,k,MatMul,%d.5,10\n", 1000 + i, 100 * i);
    ct_write_text(p, b.data);
    cp_buf_release(&b);
    json_t *j = import_ok(p, db);
    cr_expect_eq(num(j, "iterations"), 100);
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'step.number' AND "
                           "iteration = 99"),
                 1099);
    json_decref(j);
    free(db);
    free(p);
}
