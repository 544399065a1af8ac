/* `cannprof import` (import/import.h), what the other commands make of an import: analyze and
 * suggest with a planted finding per family, export, validate between imports, a baseline of an
 * import. The fixtures are written here from the documented formats (tests/import/fixtures,
 * docs/import.md). */
#include "import/import_test.h"

TestSuite(import, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

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
    /* no model to fingerprint: the knowledge base is not read, and said so */
    ct_assert_mentions(r.out, "Knowledge base: not read: an imported profile", NULL);
    cr_expect(strstr(r.out, "cannot be fingerprinted") == NULL, "%s", r.out);
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
