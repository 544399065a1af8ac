/* `cannprof import` with the rest of a run's files, and the analyses of msprof-analyze's advisor
 * they feed: the summary tables (op_statistic, api_statistic, operator_details, operator_memory),
 * communication_matrix.json, info.json's core counts and clock, analysis.db of a DB export,
 * msprof's task_time table, and the host calls a timeline holds (compilations, synchronisations,
 * memory calls, SyncBatchNorm, the data loader). Each planted problem is named, and a profile
 * without it (a negative control) is not flagged. The fixtures are written here from the
 * documented formats (tests/import/fixtures, docs/import.md). */
#include "import/import_test.h"

TestSuite(import_analyses, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

static void copy_fixture(const char *name, const char *dst_dir, const char *as)
{
    char *src = fixture(name), *dst = cp_t_fmt("%s/%s", dst_dir, as ? as : name);
    char *text = ct_read_text(src);
    ct_write_text(dst, text);
    free(text);
    free(dst);
    free(src);
}

static bool fired(const char *rules, const char *rule)
{
    char *k = cp_t_fmt("%s ", rule);
    bool yes = strstr(rules, k) != NULL;
    free(k);
    return yes;
}

/* <scratch>/<name>/ASCEND_PROFILER_OUTPUT made: the run folder (*out: the
 * output folder inside it; both freed by the caller). */
static char *output_folder(const char *name, char **out)
{
    char *dir = cp_t_path(name);
    *out = cp_t_fmt("%s/ASCEND_PROFILER_OUTPUT", dir);
    mkdirs(*out);
    return dir;
}

/* A torch_npu run folder: the timeline and task table, and `with` of the
 * other files (NULL-terminated); info.json under PROF_<id>/device_0. */
static char *run_folder(const char *name, const char *const *with, bool info)
{
    char *out, *dir = output_folder(name, &out);
    copy_fixture("trace_view.json", out, NULL);
    copy_fixture("kernel_details.csv", out, NULL);
    for (size_t i = 0; with && with[i]; i++)
        copy_fixture(with[i], out, NULL);
    if (info) {
        char *dev = cp_t_fmt("%s/PROF_000001_20250109_abc/device_0", dir);
        mkdirs(dev);
        copy_fixture("info.json.0", dev, NULL);
        char *done = cp_t_fmt("%s/info.json.0.done", dev);
        ct_write_text(done, "");
        free(done);
        free(dev);
    }
    free(out);
    return dir;
}

Test(import_analyses, the_summary_tables_matrix_and_device_info_are_read)
{
    static const char *const with[] = {"op_statistic.csv",
                                       "api_statistic.csv",
                                       "operator_details.csv",
                                       "operator_memory.csv",
                                       "communication_matrix.json",
                                       "memory_record.csv",
                                       NULL};
    char *dir = run_folder("all_ascend_pt", with, true), *db = cp_t_path("all.db");
    char *meta = cp_t_fmt("%s/profiler_metadata.json", dir);
    ct_write_text(meta, "{\"ENV_VARIABLES\": {\"ASCEND_GLOBAL_LOG_LEVEL\": \"1\", "
                        "\"PYTORCH_NPU_ALLOC_CONF\": \"max_split_size_mb:128\"}}");
    json_t *j = import_ok(dir, db);
    /* what was read beside the timeline is said */
    json_t *extras = json_object_get(j, "extras");
    struct cp_buf b;
    cp_buf_init(&b);
    for (size_t i = 0; i < json_array_size(extras); i++)
        cp_buf_printf(&b, "%s ", json_string_value(json_array_get(extras, i)));
    char *list = cp_buf_steal(&b);
    ct_assert_mentions(list, "op_statistic.csv", "api_statistic.csv", "operator_details.csv",
                       "operator_memory.csv", "communication_matrix.json", "info.json.0 ",
                       "memory_record.csv", "profiler_metadata.json", NULL);
    free(list);
    /* op_statistic counts 4 tasks; the timeline holds 3 (its HCCL task is
     * not in this trace): both are reported, for the user to see */
    cr_expect_float_eq(json_number_value(json_object_get(j, "op_statistic_tasks")), 4, 1e-9);
    /* the statistic tables' other numeric columns, kept per row; N/A, text
     * and identity columns are not */
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = "
                                 "'opstat.TransData.Max Time(us)'"),
                       25, 1e-9);
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = "
                                 "'opstat.MatMulV2.Ratio(%)'"),
                       54.4, 1e-9);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name LIKE "
                           "'opstat.hcom_allReduce_.Ratio%'"),
                 0, "N/A is absent");
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name LIKE 'opstat.%.Device_id' "
                           "OR name LIKE 'opstat.%.Core Type' OR name LIKE 'apistat.%.Level'"),
                 0);
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = "
                                 "'apistat.aclopCompileAndExecute.Avg(us)'"),
                       100, 1e-9);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name LIKE 'apistat.%.Count' OR "
                           "name LIKE 'opstat.%.Total Time(us)'"),
                 0, "the columns read are not kept twice");
    cr_expect_str_eq(json_string_value(json_object_get(j, "slowest_link")), "0-2.HCCS at 50 GB/s",
                     "the total entries, not top1's");
    /* info.json: 20 AI Cores; the TransData tasks' block dim 8 is not a
     * multiple of them, the matmul's 20 is */
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'device.ai_core_num'"), 20);
    cr_expect_float_eq(import_feature(db, "block_dim_misaligned_share"), 45.0 / (53.741 + 45.0),
                       1e-6);
    /* the matrix: links of 200, 50 and 200 GB/s (LOCAL left out) */
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = "
                                 "'comm.link.0-2.HCCS.gbps'"),
                       50, 1e-9);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name LIKE 'comm.link.%LOCAL%'"), 0);
    cr_expect_float_eq(import_feature(db, "link_bandwidth_spread"), 150.0 / 150.0, 1e-9);
    /* api_statistic: 50 compilations over the run's 2 steps, when the
     * timeline has none of those calls itself */
    cr_expect_float_eq(import_feature(db, "op_compile_calls"), 25, 1e-9);
    cr_expect_float_eq(import_feature(db, "stream_sync_calls"), 3, 1e-9);
    /* operator_details: the call stack with the most device time per op,
     * its lines kept */
    char *stack = q_text(db, "SELECT value FROM meta WHERE key = "
                             "'run.1.import.stack.npu_format_cast'");
    cr_expect_str_eq(stack ? stack : "(none)", "train.py(9): prepare\nmodel.py(20): cast_weights");
    free(stack);
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = "
                                 "'framework.device_self_us'"),
                       53.741 + 45 + 1, 1e-9, "N/A is absent, not zero");
    /* operator_details' other columns per op, summed over its call sites;
     * operator_memory's amounts per op, the allocator's running totals as
     * peaks, its instants and pointers not at all */
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = "
                                 "'opdetail.npu_format_cast.Device Total Duration(us)'"),
                       45 + 1, 1e-9);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name = "
                           "'opdetail.aten::zeros.Device Total Duration(us)'"),
                 0, "N/A is absent");
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = "
                                 "'opmem.peak.Allocation Total Reserved(MB)'"),
                       768, 1e-9);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name LIKE 'opdetail.%Shapes' OR "
                           "name LIKE 'opdetail.%Self Duration(us)' OR name LIKE 'opmem.%Time(us)' "
                           "OR name LIKE 'opmem.%Stream Ptr' OR name LIKE 'opmem.%Size(KB)'"),
                 0, "shapes, the columns read, instants and pointers are not counters");
    /* operator_memory: the largest allocations; a negative size is not one */
    char *top = q_text(db, "SELECT value FROM meta WHERE key = "
                           "'run.1.import.memory.largest_allocations'");
    cr_assert_not_null(top);
    const char *big = strstr(top, "\"aten::empty\""), *small = strstr(top, "\"aten::matmul\"");
    cr_expect(big && small && big < small, "largest first: %s", top);
    cr_expect(strstr(top, "aten::add") == NULL, "%s", top);
    free(top);
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'memory.op_allocations'"), 2);
    /* the environment: debug logging, no expandable segments, and the
     * allocator reserving 2.6 times what is allocated */
    char *rules = fired_rules(db);
    cr_expect(fired(rules, "ascend_block_dim_misaligned"), "fired: %s", rules);
    cr_expect(fired(rules, "ascend_operator_compile_at_run_time"), "fired: %s", rules);
    cr_expect(fired(rules, "ascend_stream_synchronize"), "fired: %s", rules);
    cr_expect(fired(rules, "ascend_debug_logging"), "fired: %s", rules);
    cr_expect(fired(rules, "ascend_memory_fragmentation"), "fired: %s", rules);
    cr_expect(!fired(rules, "ascend_slow_link"), "no communication time, no link finding: %s",
              rules);
    free(rules);
    json_decref(j);
    free(meta);
    free(db);
    free(dir);
}

/* The same run without the files: none of those findings. */
Test(import_analyses, without_the_files_nothing_is_claimed)
{
    char *dir = run_folder("bare_ascend_pt", NULL, false), *db = cp_t_path("bare.db");
    char *meta = cp_t_fmt("%s/profiler_metadata.json", dir);
    ct_write_text(meta, "{\"ENV_VARIABLES\": {\"ASCEND_GLOBAL_LOG_LEVEL\": \"3\", "
                        "\"PYTORCH_NPU_ALLOC_CONF\": \"expandable_segments:True\"}}");
    char *out = cp_t_fmt("%s/ASCEND_PROFILER_OUTPUT", dir);
    copy_fixture("memory_record.csv", out, NULL);
    free(out);
    json_t *j = import_ok(dir, db);
    cr_expect(json_object_get(j, "op_statistic_tasks") == NULL);
    cr_expect(isnan(import_feature(db, "block_dim_misaligned_share")), "no core count, no check");
    cr_expect(isnan(import_feature(db, "op_compile_calls")));
    char *rules = fired_rules(db);
    static const char *const none[] = {"ascend_block_dim_misaligned",
                                       "ascend_flash_attention_unbound",
                                       "ascend_vector_unbound",
                                       "ascend_shape_misaligned",
                                       "ascend_misaligned_transfers",
                                       "ascend_bandwidth_contention",
                                       "ascend_gc_pauses",
                                       "ascend_unprofiled_host_work",
                                       "ascend_affinity_rms_norm",
                                       "ascend_affinity_swiglu",
                                       "ascend_affinity_rotary_mul",
                                       "ascend_affinity_fusion_attention",
                                       "ascend_fusible_operators",
                                       "ascend_operator_compile_at_run_time",
                                       "ascend_stream_synchronize",
                                       "ascend_debug_logging",
                                       "ascend_memory_fragmentation",
                                       "ascend_memory_api_time",
                                       "ascend_syncbn",
                                       "ascend_dataloader",
                                       "ascend_aicore_frequency_drop"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        cr_expect(!fired(rules, none[i]), "%s fired: %s", none[i], rules);
    free(rules);
    json_decref(j);
    free(meta);
    free(db);
    free(dir);
}

/* A timeline's host calls, counted per step: 25 compilations, 4 stream
 * synchronisations, 0.5 ms of aclrtFree, 20 SyncBatchNorm ops and 1.5 ms
 * of DataLoader in steps of 10 ms; the AI Core clock at 1800, 1400 and
 * 1400 MHz against info.json's 1800. */
Test(import_analyses, a_timelines_host_calls_and_clock_are_counted_per_step)
{
    char *out, *dir = output_folder("calls_ascend_pt", &out);
    copy_fixture("trace_view_calls.json", out, "trace_view.json");
    char *dev = cp_t_fmt("%s/PROF_000001_20250109_abc/device_0", dir);
    mkdirs(dev);
    copy_fixture("info.json.0", dev, NULL);
    char *db = cp_t_path("calls.db");
    json_t *j = import_ok(dir, db);
    cr_expect_eq(num(j, "iterations"), 2);
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'api.compile_calls' AND "
                           "iteration = 1"),
                 25);
    cr_expect_float_eq(import_feature(db, "op_compile_calls"), 25, 1e-9);
    cr_expect_float_eq(import_feature(db, "stream_sync_calls"), 4, 1e-9);
    cr_expect_float_eq(import_feature(db, "memory_api_share"), 0.05, 1e-9);
    cr_expect_float_eq(import_feature(db, "syncbn_ops"), 20, 1e-9);
    cr_expect_float_eq(import_feature(db, "dataloader_share"), 0.15, 1e-9);
    cr_expect_float_eq(import_feature(db, "aicore_freq_drop"), (1800 - 4600.0 / 3) / 1800, 1e-9);
    char *rules = fired_rules(db);
    static const char *const all[] = {"ascend_operator_compile_at_run_time",
                                      "ascend_stream_synchronize",
                                      "ascend_memory_api_time",
                                      "ascend_syncbn",
                                      "ascend_dataloader",
                                      "ascend_aicore_frequency_drop"};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        cr_expect(fired(rules, all[i]), "%s not fired: %s", all[i], rules);
    free(rules);
    json_decref(j);
    free(db);
    free(dev);
    free(out);
    free(dir);
}

/* A DB export without communication.json: analysis.db's tables. */
Test(import_analyses, analysis_db_beside_a_db_export)
{
    char *out, *dir = output_folder("adb_ascend_pt", &out);
    char *src = cp_t_fmt("%s/ascend_pytorch_profiler_0.db", out),
         *adb = cp_t_fmt("%s/analysis.db", out);
    make_db("torch_npu_db.sql", src);
    make_db("analysis_db.sql", adb);
    char *db = cp_t_path("adb.db");
    json_t *j = import_ok(dir, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "ascend-db");
    /* CommAnalyzerTime: "Total Op Info" rows where the file sums itself */
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = 'comm.wait_ms' AND "
                                 "iteration = 0"),
                       0.2, 1e-12);
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = 'comm.elapse_ms' AND "
                                 "iteration = 1"),
                       0.4, 1e-12);
    /* CommAnalyzerBandwidth: a row per size bucket, the link's size once */
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = 'comm.RDMA.size_mb' AND "
                                 "iteration = 0"),
                       8.0, 1e-12);
    cr_expect_float_eq(q_num(db, "SELECT value FROM counters WHERE name = "
                                 "'comm.RDMA.max_transit_ms'"),
                       4500, 1e-9);
    cr_expect_float_eq(import_feature(db, "small_packet_share"), 8.0 / 11.0, 1e-9);
    cr_expect_float_eq(import_feature(db, "comm_wait_ratio"), 0.25 / 0.7, 1e-9);
    /* CommAnalyzerMatrix: the totals per link */
    cr_expect_float_eq(import_feature(db, "link_bandwidth_spread"), 1.0, 1e-9);
    char *rules = fired_rules(db);
    cr_expect(fired(rules, "ascend_rdma_retransmission"), "fired: %s", rules);
    free(rules);
    json_decref(j);
    free(db);
    free(adb);
    free(src);
    free(out);
    free(dir);
}

/* msprof's task_time table, when the run has no op_summary: a task table
 * of its own column names. */
Test(import_analyses, msprof_task_time_is_a_task_table)
{
    char *dir = cp_t_path("PROF_000001_20231109105342_XYZ"),
         *out = cp_t_fmt("%s/mindstudio_profiler_output", dir);
    mkdirs(out);
    copy_fixture("task_time_20231109105342.csv", out, NULL);
    char *db = cp_t_path("tt.db");
    json_t *j = import_ok(dir, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "ascend-csv");
    cr_expect_eq(num(j, "events_by_layer.device"), 3);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM kernels WHERE impl = 'KERNEL_AICPU'"), 1);
    cr_expect_eq(q_int(db, "SELECT count(*) FROM counters WHERE name LIKE 'col.task_stop%' OR "
                           "name LIKE 'col.task_id%'"),
                 0, "identities and times are not counters");
    json_decref(j);
    free(db);
    free(out);
    free(dir);
}

/* A broken summary file fails the import, naming it; nothing is left. */
Test(import_analyses, a_broken_summary_file_fails_the_import)
{
    static const struct {
        const char *file, *text, *what;
    } cases[] = {
        {"op_statistic.csv", "OP Type,Count,Total Time(us)\n\"Add,1,2\n", "op_statistic.csv"},
        {"communication_matrix.json", "{\"step1\": {", "communication_matrix.json"},
        {"operator_details.csv", "Name,Call Stack\n\"a\"b,c\n", "operator_details.csv"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *name = cp_t_fmt("broken%zu_ascend_pt", i);
        char *dir = run_folder(name, NULL, false);
        char *p = cp_t_fmt("%s/ASCEND_PROFILER_OUTPUT/%s", dir, cases[i].file);
        ct_write_text(p, cases[i].text);
        char *db = cp_t_fmt("%s.db", dir);
        expect_refused(dir, db, cases[i].what);
        free(db);
        free(p);
        free(dir);
        free(name);
    }
    char *dir = run_folder("badinfo_ascend_pt", NULL, false);
    char *dev = cp_t_fmt("%s/PROF_1/device_0", dir);
    mkdirs(dev);
    char *info = cp_t_fmt("%s/info.json.0", dev);
    ct_write_text(info, "{\"DeviceInfo\": 3}");
    free(info);
    char *db = cp_t_path("badinfo.db");
    expect_refused(dir, db, "info.json.0: no DeviceInfo list");
    free(db);
    free(dev);
    free(dir);
}

/* A task table's operators by class: a flash attention task of 400 us with
 * no pipe near busy and a head dim of 64, a matmul of 200 us bound on its
 * cube but with an inner axis of 1000, a vector Add of 300 us bound by
 * nothing and a vector Mul of 100 us bound (its pipes sum to 1.0), per
 * step of 1000 us of tasks. Then the same with shapes and ratios that
 * pass: nothing is claimed. */
Test(import_analyses, a_task_tables_operator_classes_and_shapes_are_checked)
{
    char *out, *dir = output_folder("classes_ascend_pt", &out);
    copy_fixture("kernel_details_classes.csv", out, "kernel_details.csv");
    char *db = cp_t_path("classes.db");
    json_decref(import_ok(dir, db));
    cr_expect_float_eq(import_feature(db, "fa_unbound_share"), 0.4, 1e-9);
    cr_expect_float_eq(import_feature(db, "vector_unbound_share"), 0.3, 1e-9);
    cr_expect_float_eq(import_feature(db, "shape_misaligned_share"), 0.6, 1e-9);
    cr_expect_float_eq(import_feature(db, "unbound_task_share"), 0, 1e-9,
                       "the attention and vector tasks are judged by their own checks");
    char *rules = fired_rules(db);
    cr_expect(fired(rules, "ascend_flash_attention_unbound"), "fired: %s", rules);
    cr_expect(fired(rules, "ascend_vector_unbound"), "fired: %s", rules);
    cr_expect(fired(rules, "ascend_shape_misaligned"), "fired: %s", rules);
    cr_expect(!fired(rules, "ascend_unbound_operators"), "fired: %s", rules);
    free(rules);
    /* a task table has no framework ops behind its tasks: the findings
     * name the kernels of their class */
    struct cp_run ar;
    cp_run_cli(&ar, "analyze", db, "--no-calibrate", NULL);
    cr_expect_eq(ar.exit_code, 0, "%s", ar.err);
    cr_expect(strstr(ar.out, "    kernels:    \"aclnnFlashAttentionScore_") != NULL, "%s", ar.out);
    cr_expect(strstr(ar.out, "\"aclnnAdd_AddAiCore_Add\",\"aclnnMul_MulAiCore_Mul\"") != NULL, "%s",
              ar.out);
    cp_run_release(&ar);

    /* aligned shapes, attention bound on MTE2, the Add's pipes busy */
    char *csv = cp_t_fmt("%s/kernel_details.csv", out), *text = ct_read_text(csv);
    struct {
        const char *from, *to;
    } edits[] = {{"1,8,1024,64;1,8,1024,64;1,8,1024,64", "1,8,1024,128;1,8,1024,128;1,8,1024,128"},
                 {"8,1000;1000,512", "8,1024;1024,512"},
                 {"0.30,0.40,0.20,0.30", "0.30,0.85,0.20,0.30"},
                 {"N/A,0.20,0.30,0.10", "N/A,0.75,0.30,0.10"}};
    for (size_t e = 0; e < sizeof edits / sizeof *edits; e++) {
        char *at;
        while ((at = strstr(text, edits[e].from)) != NULL) {
            struct cp_buf b;
            cp_buf_init(&b);
            cp_buf_printf(&b, "%.*s%s%s", (int)(at - text), text, edits[e].to,
                          at + strlen(edits[e].from));
            free(text);
            text = cp_buf_steal(&b);
        }
    }
    ct_write_text(csv, text);
    free(text);
    free(csv);
    char *db2 = cp_t_path("classes_ok.db");
    json_decref(import_ok(dir, db2));
    cr_expect_float_eq(import_feature(db2, "fa_unbound_share"), 0, 1e-9);
    cr_expect_float_eq(import_feature(db2, "vector_unbound_share"), 0, 1e-9);
    cr_expect_float_eq(import_feature(db2, "shape_misaligned_share"), 0, 1e-9);
    rules = fired_rules(db2);
    cr_expect(!fired(rules, "ascend_flash_attention_unbound"), "fired: %s", rules);
    cr_expect(!fired(rules, "ascend_vector_unbound"), "fired: %s", rules);
    cr_expect(!fired(rules, "ascend_shape_misaligned"), "fired: %s", rules);
    free(rules);
    free(db2);
    free(db);
    free(out);
    free(dir);
}

/* A timeline's HCCL plane tasks, collections and gaps: in step 1 an SDMA
 * copy of 1,000,000 bytes (not a multiple of 512) at 1 GB/s beside a
 * matmul, one of 1 MiB at 20 GB/s, a 10 ms collection, and 244 ms with no
 * device task nor host call; in step 2 an aligned SDMA copy, an RDMA send
 * and steady work. Steps of 300 ms. */
Test(import_analyses, a_timelines_transfers_collections_and_gaps_are_checked)
{
    char *out, *dir = output_folder("advisor_ascend_pt", &out);
    copy_fixture("trace_view_advisor.json", out, "trace_view.json");
    char *db = cp_t_path("advisor.db");
    json_t *j = import_ok(dir, db);
    cr_expect_eq(num(j, "iterations"), 2);
    cr_expect_eq(num(j, "skipped.detail"), 4, "the plane tasks are read, not kept twice");
    cr_expect_float_eq(q_num(db, "SELECT sum(value) FROM counters WHERE name = 'hccl.sdma_us'"),
                       3000, 1e-9, "RDMA is not SDMA");
    cr_expect_float_eq(import_feature(db, "misaligned_transfer_share"), 1.0 / 3, 1e-9);
    cr_expect_float_eq(import_feature(db, "bandwidth_contention_share"), 1.0 / 3, 1e-9);
    cr_expect_float_eq(import_feature(db, "gc_share"), 10000.0 / 2 / 300000, 1e-9);
    cr_expect_float_eq(import_feature(db, "quiet_gap_share"), 244000.0 / 600000, 1e-9);
    /* the collectives' time once: 4.5 ms of each step's 2 + 1 (+ 20) ms */
    cr_expect_float_eq(import_feature(db, "communication_share"), 9000.0 / (9000 + 4000 + 21000),
                       1e-9);
    char *rules = fired_rules(db);
    static const char *const all[] = {"ascend_misaligned_transfers", "ascend_bandwidth_contention",
                                      "ascend_gc_pauses", "ascend_unprofiled_host_work"};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        cr_expect(fired(rules, all[i]), "%s not fired: %s", all[i], rules);
    /* communication is over 5% here, but neither communication.json nor
     * the environment is: the rules that need them say nothing (their
     * share, or their setting, is absent) */
    static const char *const none[] = {"ascend_communication_wait", "ascend_slow_link",
                                       "ascend_small_packets", "ascend_hccl_algo_forced"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        cr_expect(!fired(rules, none[i]), "%s fired: %s", none[i], rules);
    free(rules);
    json_decref(j);
    free(db);
    free(out);
    free(dir);
}

/* A timeline's framework ops, per step of 10 ms: a hand-written RMSNorm
 * (with casts and a Python function among its ops), SwiGLU, a rotary
 * embedding and an attention, each matched once; then a pow with the
 * rest of an RMSNorm more than 6 ops later, which is not one. */
Test(import_analyses, framework_op_sequences_with_a_fused_api_are_found)
{
    char *out, *dir = output_folder("ops_ascend_pt", &out);
    copy_fixture("trace_view_ops.json", out, "trace_view.json");
    char *db = cp_t_path("ops.db");
    json_decref(import_ok(dir, db));
    static const char *const api[] = {"npu_rms_norm", "npu_swiglu", "npu_rotary_mul",
                                      "npu_fusion_attention"};
    /* host time from the first op's start to the last op's end */
    static const double us[] = {72, 40, 100, 54};
    for (size_t i = 0; i < 4; i++) {
        char *f = cp_t_fmt("%s_sequences", api[i]), *g = cp_t_fmt("%s_sequence_share", api[i]);
        cr_expect_float_eq(import_feature(db, f), 1, 1e-9, "%s", f);
        cr_expect_float_eq(import_feature(db, g), us[i] / 10000, 1e-9, "%s", g);
        free(g);
        free(f);
    }
    char *rules = fired_rules(db);
    static const char *const all[] = {"ascend_affinity_rms_norm", "ascend_affinity_swiglu",
                                      "ascend_affinity_rotary_mul",
                                      "ascend_affinity_fusion_attention"};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        cr_expect(fired(rules, all[i]), "%s not fired: %s", all[i], rules);
    free(rules);
    /* a timeline whose framework ops match nothing: 0, not absent */
    char *out2, *dir2 = output_folder("calls2_ascend_pt", &out2), *db2 = cp_t_path("calls_seq.db");
    copy_fixture("trace_view_calls.json", out2, "trace_view.json");
    json_decref(import_ok(dir2, db2));
    cr_expect_float_eq(import_feature(db2, "npu_rms_norm_sequences"), 0, 1e-9);
    free(out2);
    free(dir2);
    free(db2);
    free(db);
    free(out);
    free(dir);
}

/* A task table of six layers a step, each a matmul (300 us, cube-bound)
 * then Cast, Mul, Add, Cast on the vector units (15, 40, 40, 15 us: short
 * or bound by their data moves), and a collective on another stream: the
 * vector chain is the one worth fusing, 12 times, 26.8% of the task time;
 * its parts and the chains through the matmul are not reported. */
Test(import_analyses, a_repeated_chain_of_light_tasks_is_a_fusion_candidate)
{
    char *out, *dir = output_folder("chain_ascend_pt", &out);
    copy_fixture("kernel_details_chain.csv", out, "kernel_details.csv");
    char *db = cp_t_path("chain.db");
    json_t *j = import_ok(dir, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "fusible_sequence")),
                     "Cast > Mul > Add > Cast x12 (26.8% of the task time)");
    char *top = q_text(db, "SELECT value FROM meta WHERE key = "
                           "'run.1.import.fusible_sequences'");
    cr_assert_not_null(top);
    json_t *list = json_loads(top, 0, NULL);
    cr_expect_eq(json_array_size(list), 1, "its sub-chains are views of it: %s", top);
    json_decref(list);
    free(top);
    cr_expect_float_eq(import_feature(db, "fusible_sequence_share"), 1320.0 / 4920, 1e-9);
    char *rules = fired_rules(db);
    cr_expect(fired(rules, "ascend_fusible_operators"), "fired: %s", rules);
    free(rules);
    json_decref(j);
    free(db);
    free(out);
    free(dir);
}

/* A cluster of four ranks in two pipeline stages (ranks 0 and 1 stage 0,
 * 2 and 3 stage 1, as profiler_metadata.json's pp group says): the second
 * stage's matmul takes 100 us longer, and rank 3's first step 400 us
 * longer. The stages' computing time spreads, the slowest rank is compared
 * with the fastest op type by op type. */
Test(import_analyses, a_clusters_stages_and_slowest_rank_are_compared)
{
    char *root = cp_t_path("pp_cluster"), *src = fixture("trace_view.json");
    char *text = ct_read_text(src);
    for (int rank = 0; rank < 4; rank++) {
        char *run = cp_t_fmt("%s/node%d_%d_ascend_pt", root, rank, 200 + rank);
        char *dir = cp_t_fmt("%s/ASCEND_PROFILER_OUTPUT", run);
        mkdirs(dir);
        struct cp_buf b;
        cp_buf_init(&b);
        cp_buf_puts(&b, text);
        char *tv_text = cp_buf_steal(&b), *p;
        if (rank >= 2) {
            cr_assert_not_null(p = strstr(tv_text, "\"dur\":53.7410625"));
            memcpy(p, "\"dur\":153.741062", 16);
        }
        if (rank == 3) {
            cr_assert_not_null(p = strstr(tv_text, "\"dur\":2000.0"));
            memcpy(p, "\"dur\":2400.0", 12);
        }
        char *tv = cp_t_fmt("%s/trace_view.json", dir);
        ct_write_text(tv, tv_text);
        char *info = cp_t_fmt("%s/profiler_info_%d.json", run, rank);
        char *rid = cp_t_fmt("{\"rank_id\": %d}", rank);
        ct_write_text(info, rid);
        char *meta = cp_t_fmt("%s/profiler_metadata.json", run);
        char *mt = cp_t_fmt("{\"ENV_VARIABLES\": {\"HCCL_ALGO\": \"level0:NA;level1:ring\"}, "
                            "\"parallel_group_info\": {\"group_name_41\": {\"group_name\": "
                            "\"pp\", \"group_rank\": %d, \"global_ranks\": [%d, %d]}}}",
                            rank / 2, rank % 2, rank % 2 + 2);
        ct_write_text(meta, mt);
        free(mt);
        free(meta);
        free(rid);
        free(info);
        free(tv);
        free(tv_text);
        free(dir);
        free(run);
    }
    char *db = cp_t_path("pp.db");
    json_t *j = import_ok(root, db);
    cr_expect_eq(json_array_size(json_object_get(j, "ranks")), 4);
    const char *cmp = json_string_value(json_object_get(j, "rank_comparison"));
    cr_assert_not_null(cmp);
    cr_expect(strncmp(cmp, "rank 3 vs rank 0 (fastest): step +200 us; MatMulV2 +50 us", 57) == 0,
              "%s", cmp);
    /* stage 0: (53.741 + 20 + 25) / 2 us a step; stage 1: 100 us more */
    double s0 = (53.741 + 45) / 2, s1 = s0 + 50;
    cr_expect_float_eq(import_feature(db, "stage_compute_spread"), (s1 - s0) / ((s0 + s1) / 2),
                       1e-6);
    cr_expect_float_eq(import_feature(db, "slowest_stage"), 1, 1e-9);
    cr_expect_float_eq(import_feature(db, "env_hccl_algo"), 1, 1e-9);
    char *rules = fired_rules(db);
    cr_expect(fired(rules, "ascend_pipeline_stage_imbalance"), "fired: %s", rules);
    free(rules);
    json_decref(j);
    free(db);
    free(text);
    free(src);
    free(root);
}

/* A Kineto trace of 5 steps, each a 300 us gemm and six times three short
 * elementwise kernels (add, mul, relu: 5 us each), a launch before each
 * kernel; step 0 also has 250 ms without a kernel or a launch. The chain
 * of short kernels is the one worth fusing; the gap is work the profile
 * does not show. */
Test(import_analyses, a_gpu_traces_short_kernel_chains_and_quiet_gaps_are_found)
{
    char *path = cp_t_path("chains.json");
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "{\"schemaVersion\": 1, \"traceEvents\": [\n");
    double t = 1.7e9;
    for (int step = 0; step < 5; step++) {
        double start = t;
        const char *names[] = {"gemm", "add_kernel", "mul_kernel", "relu_kernel"};
        for (int k = 0; k < 19; k++) {
            const char *name = k == 0 ? names[0] : names[1 + (k - 1) % 3];
            double dur = k == 0 ? 300 : 5;
            fprintf(fp,
                    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\","
                    "\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":2},\n"
                    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"pid\":0,"
                    "\"tid\":7,\"ts\":%.3f,\"dur\":%.3f},\n",
                    t, name, t + 3, dur);
            t += dur + 4;
            if (step == 0 && k == 9)
                t += 250000; /* the host is busy elsewhere */
        }
        fprintf(fp,
                "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\","
                "\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f},\n",
                step, start - 1, t - start + 2);
        t += 10;
    }
    fprintf(fp, "{\"ph\":\"i\",\"name\":\"end\",\"pid\":1,\"tid\":1,\"ts\":%.3f}]}\n", t);
    fclose(fp);
    char *db = cp_t_path("chains.db");
    json_t *j = import_ok(path, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "format")), "kineto");
    const char *chain = json_string_value(json_object_get(j, "fusible_sequence"));
    cr_assert_not_null(chain);
    cr_expect(strncmp(chain, "add_kernel > mul_kernel > relu_kernel x30", 40) == 0, "%s", chain);
    /* 30 times 15 us of the five steps' 5 x 390 us */
    cr_expect_float_eq(import_feature(db, "fusible_sequence_share"), 450.0 / 1950, 1e-9);
    double gap = import_feature(db, "quiet_gap_share");
    cr_expect(gap > 0.9, "one step's 250 ms of the five steps' %g", gap);
    char *rules = fired_rules(db);
    cr_expect(fired(rules, "gpu_fusible_kernels"), "fired: %s", rules);
    cr_expect(fired(rules, "gpu_unprofiled_host_work"), "fired: %s", rules);
    free(rules);
    json_decref(j);
    free(db);
    free(path);
}

/* Two streams whose tasks alternate row by row, each running Cast, Mul,
 * Add six times: the chain is counted per stream, 12 times, all of the
 * task time, never more (counted across the streams it went over 100%). */
Test(import_analyses, interleaved_streams_count_a_chain_once_per_occurrence)
{
    char *out, *dir = output_folder("il_ascend_pt", &out);
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "Step Id,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n");
    static const char *const ops[] = {"Cast", "Mul", "Add"};
    double t = 100;
    for (int rep = 0; rep < 6; rep++)
        for (int k = 0; k < 3; k++)
            for (int stream = 1; stream <= 2; stream++) {
                cp_buf_printf(&b, "%d,%d,%s_0,%s,AI_VECTOR_CORE,%.3f,5.000\n", 1 + rep / 3, stream,
                              ops[k], ops[k], t);
                t += 6;
            }
    char *csv = cp_t_fmt("%s/kernel_details.csv", out), *text = cp_buf_steal(&b);
    ct_write_text(csv, text);
    char *db = cp_t_path("il.db");
    json_t *j = import_ok(dir, db);
    cr_expect_str_eq(json_string_value(json_object_get(j, "fusible_sequence")),
                     "Cast > Mul > Add x12 (100.0% of the task time)");
    cr_expect_float_eq(import_feature(db, "fusible_sequence_share"), 1.0, 1e-9);
    json_decref(j);
    free(db);
    free(text);
    free(csv);
    free(out);
    free(dir);
}
