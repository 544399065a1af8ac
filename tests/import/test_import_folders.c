/* `cannprof import` (import/import.h), run folders and clusters: a timeline with its task table,
 * communication.json, memory_record.csv and profiler_metadata.json beside it; a folder of ranks;
 * bad input of every kind, which exits 2 naming the file and leaves no run. The fixtures are
 * written here from the documented formats (tests/import/fixtures,
 * docs/import.md). */
#include "import/import_test.h"

TestSuite(import, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

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

/* torch.profiler's trace handler writes one trace per rank into one
 * folder: each is a rank of a cluster, its rank from distributedInfo
 * (not the file's order), and the slow rank is found. */
Test(import, a_folder_of_kineto_traces_is_a_cluster_by_distributed_rank)
{
    char *root = cp_t_path("kineto_ranks");
    mkdirs(root);
    char *src = fixture("kineto_gpu.json");
    char *text = ct_read_text(src);
    /* "a..." is rank 1 and slower (step 7 of 1.4 ms), "b..." rank 0 */
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, text);
    char *slow = cp_buf_steal(&b);
    char *p = strstr(slow, "\"rank\": 0");
    cr_assert_not_null(p);
    p[8] = '1';
    p = strstr(slow, "\"dur\": 1000.000");
    cr_assert_not_null(p);
    memcpy(p, "\"dur\": 1400.000", 15);
    char *a = cp_t_fmt("%s/host_1.1700000000.pt.trace.json", root),
         *bb = cp_t_fmt("%s/host_0.1700000000.pt.trace.json", root);
    ct_write_text(a, slow);
    ct_write_text(bb, text);
    char *db = cp_t_path("kineto_ranks.db");
    json_t *j = import_ok(root, db);
    json_t *ranks = json_object_get(j, "ranks");
    cr_assert_eq(json_array_size(ranks), 2);
    cr_expect_eq(json_integer_value(json_object_get(json_array_get(ranks, 0), "rank")), 0,
                 "host_0... by its name's order, rank 0 by its distributedInfo");
    cr_expect_eq(q_int(db, "SELECT value FROM counters WHERE name = 'rank' AND run_id = 2"), 1);
    cr_expect_float_eq(import_feature(db, "rank_count"), 2, 1e-12);
    cr_expect_float_eq(import_feature(db, "slowest_rank"), 1, 1e-12);
    json_decref(j);
    /* two traces claiming one rank are refused */
    char *dup = cp_t_fmt("%s/host_2.1700000000.pt.trace.json", root);
    ct_write_text(dup, text);
    char *db2 = cp_t_path("kineto_dup.db");
    expect_refused(root, db2, "both say they are rank 0");
    free(db2);
    free(dup);
    free(db);
    free(bb);
    free(a);
    free(slow);
    free(text);
    free(src);
    free(root);
}
