/* `cannprof import` (import/import.h), task tables and databases: torch_npu's kernel_details.csv,
 * msprof's op_summary, torch_npu's and msprof's SQLite exports, Nsight Systems exports. The
 * fixtures are written here from the documented formats (tests/import/fixtures, docs/import.md). */
#include "import/import_test.h"

TestSuite(import, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

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
