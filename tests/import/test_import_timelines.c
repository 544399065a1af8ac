/* `cannprof import` (import/import.h), timelines (Chrome trace-event JSON): Kineto, torch_npu's
 * trace_view.json, ONNX Runtime, any Chrome trace, TensorRT's trtexec exports: layers, steps,
 * kernels, counters, what is skipped. The fixtures are written here from the documented formats
 * (tests/import/fixtures, docs/import.md). */
#include "import/import_test.h"

TestSuite(import, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

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

/* Newer torch writes no "Call stack" argument but python_function events
 * around the ops (with_stack=True): an op's stack is made of them,
 * outermost first, through the Python parent ids; a function that ended
 * before the op, or on another thread, is not part of it. */
Test(import, python_function_events_are_the_stacks_of_the_ops_inside_them)
{
    char *p = cp_t_path("pystack.json"), *db = cp_t_path("pystack.db");
    ct_write_text(
        p, "{\"schemaVersion\": 1, \"traceEvents\": [\n"
           "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#0\","
           "\"pid\":9,\"tid\":9,\"ts\":100,\"dur\":100},\n"
           "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"/home/dev/proj/train.py(30): "
           "main\",\"pid\":9,\"tid\":9,\"ts\":101,\"dur\":98,\"args\":{\"Python id\":1,"
           "\"Python parent id\":null}},\n"
           "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"proj/model.py(12): "
           "forward\",\"pid\":9,\"tid\":9,\"ts\":105,\"dur\":80,\"args\":{\"Python id\":2,"
           "\"Python parent id\":1}},\n"
           "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"proj/model.py(8): "
           "helper\",\"pid\":9,\"tid\":9,\"ts\":106,\"dur\":3,\"args\":{\"Python id\":3,"
           "\"Python parent id\":2}},\n"
           "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"other.py(1): "
           "elsewhere\",\"pid\":9,\"tid\":10,\"ts\":100,\"dur\":100,\"args\":{\"Python "
           "id\":4,\"Python parent id\":null}},\n"
           "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":9,\"tid\":9,"
           "\"ts\":110,\"dur\":20,\"args\":{\"External id\":7}},\n"
           "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":9,"
           "\"tid\":9,\"ts\":112,\"dur\":2,\"args\":{\"External id\":7,\"correlation\":70}},\n"
           "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"sgemm\",\"pid\":0,\"tid\":7,"
           "\"ts\":120,\"dur\":30,\"args\":{\"correlation\":70}}]}\n");
    json_t *j = import_ok(p, db);
    char *stack = q_text(db, "SELECT value FROM meta WHERE key = 'run.1.import.stack.aten::mm'");
    cr_expect_str_eq(stack ? stack : "(none)",
                     "/home/dev/proj/train.py(30): main\nproj/model.py(12): forward");
    free(stack);
    /* findings show it, each path cut to its last two parts */
    struct cp_run r;
    cp_run_cli(&r, "analyze", db, "--json", "--no-calibrate", NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cr_expect(strstr(r.out, "/home/dev") == NULL, "no absolute path in a report");
    cp_run_release(&r);
    json_decref(j);
    free(db);
    free(p);
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
