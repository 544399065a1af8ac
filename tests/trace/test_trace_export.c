/* trace exporters: Chrome trace-event JSON (parsed back with jansson) and
 * folded stacks (lines and sums). */
#include "trace/trace.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(trace_export, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* The fixture: one run, 2 kernels, 3 iterations.
 *   application: "bench" [0, 10000) containing "measure" [1000, 9000) at
 *                depth 1, itself containing "iteration" ranges at depth 2.
 *   runtime:     "load" (500 ns) and "plan" (1600 ns) before the loop, a
 *                second "load" (400 ns) after it, "execute" per iteration,
 *                2000 ns each.
 *   device:      conv_in (Conv) 1500 ns and act (Relu) 250 ns per
 *                iteration; act on recorder thread 1.
 * Times are offset by T0 to check that exports start at zero. */
#define T0       5000000000ULL
#define N_EVENTS (2 + 3 + 3 + 3 + 6)

static const char *CONV_INPUTS = "[{\"shape\":[1,4,8,8],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]";

static struct cp_trace_store *make_store(const char *path, int64_t *run_out)
{
    struct cp_trace_run_info info = {.kind = "bench",
                                     .model_path = "m.om",
                                     .threads = 2,
                                     .iterations = 3,
                                     .config_json = "{\"fusion\":true}"};
    int64_t run;
    struct cp_trace_store *s = cp_t_trace_store(path, &info, &run);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_kernel k[2] = {
        {"conv_in", "Conv", "onednn:conv", "[\"conv_in\"]", CONV_INPUTS,
         "[{\"shape\":[1,8,8,8],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]", 2e6, 8192},
        {"act", "Relu", "ref", "[\"relu_a\",\"relu_b\"]", "[]", "not json", 512, 1024},
    };
    cr_assert_eq(cp_trace_store_add_kernels(s, run, k, 2, &d), CP_OK, "%s", d.msg);
    struct cp_trace_recorder *r = cp_trace_recorder_create(64);
    int32_t bench = cp_trace_intern(r, "bench"), measure = cp_trace_intern(r, "measure");
    int32_t iter = cp_trace_intern(r, "iteration"), exec = cp_trace_intern(r, "execute");
    int32_t conv = cp_trace_intern(r, "conv_in"), act = cp_trace_intern(r, "act");
    cp_trace_record_depth(r, CP_LAYER_APP, bench, -1, -1, T0, T0 + 10000, 0, 0);
    cp_trace_record_depth(r, CP_LAYER_APP, measure, -1, -1, T0 + 1000, T0 + 9000, 0, 1);
    int32_t load = cp_trace_intern(r, "load"), plan = cp_trace_intern(r, "plan");
    cp_trace_record(r, CP_LAYER_RUNTIME, load, -1, -1, T0 + 100, T0 + 600, 0);
    cp_trace_record(r, CP_LAYER_RUNTIME, plan, -1, -1, T0 + 600, T0 + 2200, 0);
    cp_trace_record(r, CP_LAYER_RUNTIME, load, -1, -1, T0 + 9500, T0 + 9900, 0);
    for (int it = 0; it < 3; it++) {
        uint64_t t = T0 + 1000 + (uint64_t)it * 2500;
        cp_trace_record_depth(r, CP_LAYER_APP, iter, -1, it, t, t + 2400, 0, 2);
        cp_trace_record(r, CP_LAYER_RUNTIME, exec, -1, it, t + 100, t + 2100, 0);
        cp_trace_record(r, CP_LAYER_DEVICE, conv, 0, it, t + 200, t + 1700, 0);
        cp_trace_record(r, CP_LAYER_DEVICE, act, 1, it, t + 1700, t + 1950, 1);
    }
    cr_assert_eq(cp_trace_n_events(r), N_EVENTS);
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cp_trace_recorder_free(r);
    *run_out = run;
    return s;
}

static json_t *load_json(const char *path)
{
    json_t *root = cp_t_json_file(path);
    cr_assert_not_null(root, "%s is not JSON (see stderr)", path);
    return root;
}

/* The first event with ph and name (and tid when tid >= 0). */
static json_t *find_event(json_t *events, const char *ph, const char *name, int tid)
{
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "ph")), ph) == 0 &&
            strcmp(json_string_value(json_object_get(e, "name")), name) == 0 &&
            (tid < 0 || json_integer_value(json_object_get(e, "tid")) == tid))
            return e;
    }
    return NULL;
}

Test(trace_export, chrome_json_parses_with_x_events_metadata_and_args)
{
    char *db = cp_t_path("t.db"), *out = cp_t_path("trace.json");
    int64_t run;
    struct cp_trace_store *s = make_store(db, &run);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_export(s, -1, CP_TRACE_FORMAT_CHROME, out, &d), CP_OK, "%s", d.msg);
    json_t *root = load_json(out);
    cr_assert(json_is_object(root));
    cr_assert_str_eq(json_string_value(json_object_get(root, "displayTimeUnit")), "ns");
    json_t *events = json_object_get(root, "traceEvents");
    cr_assert(json_is_array(events));

    size_t n_x = 0, i;
    json_t *e;
    double min_ts = 1e300;
    json_array_foreach(events, i, e)
    {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        cr_assert_not_null(ph);
        cr_assert_eq(json_integer_value(json_object_get(e, "pid")), 1);
        if (strcmp(ph, "X") != 0)
            continue;
        n_x++;
        cr_assert(json_is_number(json_object_get(e, "ts")));
        cr_assert(json_is_number(json_object_get(e, "dur")));
        double ts = json_number_value(json_object_get(e, "ts"));
        if (ts < min_ts)
            min_ts = ts;
        cr_assert(json_is_object(json_object_get(e, "args")));
    }
    cr_assert_eq(n_x, N_EVENTS);
    cr_assert_float_eq(min_ts, 0.0, 1e-9, "times are relative to the run's first event");

    /* A kernel event: microseconds, its thread, its args. */
    json_t *conv = find_event(events, "X", "conv_in", -1);
    cr_assert_not_null(conv);
    cr_assert_str_eq(json_string_value(json_object_get(conv, "cat")), "device");
    cr_assert_float_eq(json_number_value(json_object_get(conv, "ts")), 1.2, 1e-9);
    cr_assert_float_eq(json_number_value(json_object_get(conv, "dur")), 1.5, 1e-9);
    cr_assert_eq(json_integer_value(json_object_get(conv, "tid")), 3);
    json_t *args = json_object_get(conv, "args");
    cr_assert_str_eq(json_string_value(json_object_get(args, "node")), "conv_in");
    cr_assert_str_eq(json_string_value(json_object_get(args, "op_type")), "Conv");
    cr_assert_str_eq(json_string_value(json_object_get(args, "impl")), "onednn:conv");
    cr_assert_eq(json_integer_value(json_object_get(args, "iteration")), 0);
    cr_assert_float_eq(json_number_value(json_object_get(args, "flops")), 2e6, 1e-6);
    cr_assert_float_eq(json_number_value(json_object_get(args, "bytes")), 8192, 1e-6);
    json_t *origins = json_object_get(args, "origins");
    cr_assert(json_is_array(origins));
    cr_assert_str_eq(json_string_value(json_array_get(origins, 0)), "conv_in");
    json_t *in0 = json_array_get(json_object_get(args, "inputs"), 0);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(in0, "shape"), 1)), 4);
    cr_assert_str_eq(json_string_value(json_object_get(in0, "layout")), "NCHW");

    /* Text that is not JSON is kept as a string. */
    json_t *act = find_event(events, "X", "act", -1);
    cr_assert_not_null(act);
    cr_assert_eq(json_integer_value(json_object_get(act, "tid")), 6, "device, recorder thread 1");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(act, "args"), "outputs")),
                     "not json");

    /* Runtime and application events carry their iteration. */
    json_t *exec = find_event(events, "X", "execute", -1);
    cr_assert_eq(json_integer_value(json_object_get(exec, "tid")), 2);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(exec, "args"), "iteration")),
                 0);
    json_t *bench = find_event(events, "X", "bench", -1);
    cr_assert_eq(json_integer_value(json_object_get(bench, "tid")), 1);
    cr_assert_float_eq(json_number_value(json_object_get(bench, "dur")), 10.0, 1e-9);

    /* Process and thread names, and their order. */
    json_t *pn = find_event(events, "M", "process_name", -1);
    cr_assert_not_null(pn);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(pn, "args"), "name")),
                     "cannprof");
    const char *names[] = {"application", "runtime", "device (kernels)"};
    for (int tid = 1; tid <= 3; tid++) {
        json_t *tn = find_event(events, "M", "thread_name", tid);
        cr_assert_not_null(tn, "thread_name for tid %d", tid);
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(tn, "args"), "name")),
                         names[tid - 1]);
        json_t *ts = find_event(events, "M", "thread_sort_index", tid);
        cr_assert_not_null(ts);
        cr_assert_eq(json_integer_value(json_object_get(json_object_get(ts, "args"), "sort_index")),
                     tid);
    }
    json_t *tn6 = find_event(events, "M", "thread_name", 6);
    cr_assert_not_null(tn6);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(tn6, "args"), "name")),
                     "device (kernels) #1");

    /* Metadata: the run and the store's meta. */
    json_t *meta = json_object_get(root, "metadata");
    cr_assert(json_is_object(meta));
    json_t *mrun = json_object_get(meta, "run");
    cr_assert_eq(json_integer_value(json_object_get(mrun, "id")), run);
    cr_assert_str_eq(json_string_value(json_object_get(mrun, "model_path")), "m.om");
    cr_assert(json_is_true(json_object_get(json_object_get(mrun, "config_json"), "fusion")));
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(meta, "store"), "schema_version")), "1");

    json_decref(root);
    cp_trace_store_close(s);
    free(db);
    free(out);
}

Test(trace_export, chrome_json_survives_hostile_names)
{
    char *db = cp_t_path("t.db");
    struct cp_trace_run_info info = {.kind = "run"};
    int64_t run;
    struct cp_trace_store *s = cp_t_trace_store(db, &info, &run);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_kernel k = {"n\"q\\;x\n", "Op\x01", NULL, NULL, NULL, NULL, 0, 0};
    cr_assert_eq(cp_trace_store_add_kernels(s, run, &k, 1, &d), CP_OK);
    struct cp_trace_recorder *r = cp_trace_recorder_create(4);
    cp_trace_record(r, CP_LAYER_DEVICE, cp_trace_intern(r, "bad \xff\xfe utf8 \xc3\xa9"), 0, 0, 10,
                    2010, 0);
    cp_trace_record(r, CP_LAYER_RUNTIME, -1, -1, 0, 10, 3000, 0);
    cp_trace_record(r, CP_LAYER_APP, cp_trace_intern(r, "del\x7f"), -1, 0, 10, 20, 0);
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cp_trace_recorder_free(r);

    struct cp_buf b;
    cp_buf_init(&b);
    cr_assert_eq(cp_trace_export_buf(s, run, CP_TRACE_FORMAT_CHROME, &b, &d), CP_OK, "%s", d.msg);
    /* Raw DEL is valid JSON, but Perfetto's tokenizer refuses it. */
    cr_assert_not_null(strstr(b.data, "\"del\\u007f\""));
    json_error_t err;
    json_t *root = json_loads(b.data, 0, &err);
    cr_assert_not_null(root, "line %d: %s", err.line, err.text);
    json_t *events = json_object_get(root, "traceEvents");
    json_t *e = find_event(events, "X", "bad \xef\xbf\xbd\xef\xbf\xbd utf8 \xc3\xa9", -1);
    cr_assert_not_null(e, "invalid UTF-8 becomes U+FFFD, valid UTF-8 stays");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(e, "args"), "node")),
                     "n\"q\\;x\n");
    cr_assert(json_is_null(json_object_get(json_object_get(e, "args"), "origins")));
    cr_assert_not_null(find_event(events, "X", "?", 2), "an unnamed event is drawn as '?'");
    json_decref(root);

    /* Folded: separators inside names cannot split frames or lines. */
    cp_buf_reset(&b);
    cr_assert_eq(cp_trace_export_buf(s, run, CP_TRACE_FORMAT_FOLDED, &b, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(b.data, "device;n\"q\\:x ;Op\x01 2\n"
                             "runtime;? 3\n");
    cp_buf_release(&b);
    cp_trace_store_close(s);
    free(db);
}

Test(trace_export, folded_lines_sum_self_time_per_stack)
{
    char *db = cp_t_path("t.db"), *out = cp_t_path("trace.folded");
    int64_t run;
    struct cp_trace_store *s = make_store(db, &run);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_export(s, run, CP_TRACE_FORMAT_FOLDED, out, &d), CP_OK, "%s", d.msg);
    uint8_t *data = NULL;
    size_t len = 0;
    cr_assert_eq(cp_file_read(out, &data, &len, &d), CP_OK);
    /* Sorted by stack; values in whole microseconds summed over the three
     * iterations; parents show self time (their children's time is in the
     * children's lines). bench: 10 us - measure 8 us; measure: 8 us -
     * 3 x 2.4 us = 0.8 us -> 1; iteration: 7.2 us -> 7; the two loads:
     * 0.9 us -> 1. */
    const char *expect = "application;bench 2\n"
                         "application;bench;measure 1\n"
                         "application;bench;measure;iteration 7\n"
                         "device;act;Relu 1\n"
                         "device;conv_in;Conv 5\n"
                         "runtime;execute 6\n"
                         "runtime;load 1\n"
                         "runtime;plan 2\n";
    cr_assert_str_eq((const char *)data, expect);
    free(data);

    /* Every line is "frames value" with an integer value. */
    struct cp_buf b;
    cp_buf_init(&b);
    cr_assert_eq(cp_trace_export_buf(s, -1, CP_TRACE_FORMAT_FOLDED, &b, &d), CP_OK);
    cr_assert_str_eq(b.data, expect);
    for (char *line = strtok(b.data, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strrchr(line, ' ');
        cr_assert_not_null(sp);
        int64_t v;
        cr_assert(cp_parse_i64(sp + 1, &v), "value of '%s'", line);
        cr_assert_gt(v, 0);
        cr_assert_not_null(strchr(line, ';'));
    }
    cp_buf_release(&b);
    cp_trace_store_close(s);
    free(db);
    free(out);
}

Test(trace_export, folded_handles_many_nested_threads)
{
    /* More nested tracks than the exporter keeps apart: it then walks every
     * track in order, flat ones included. */
    char *db = cp_t_path("t.db");
    struct cp_trace_run_info info = {.kind = "run"};
    int64_t run;
    struct cp_trace_store *s = cp_t_trace_store(db, &info, &run);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_kernel k = {"mm", "MatMul", "ref", "[]", "[]", "[]", 1, 1};
    cr_assert_eq(cp_trace_store_add_kernels(s, run, &k, 1, &d), CP_OK);
    struct cp_trace_recorder *r = cp_trace_recorder_create(0);
    int32_t p = cp_trace_intern(r, "p"), c = cp_trace_intern(r, "c");
    for (int t = 0; t < 70; t++) {
        uint64_t t0 = 1000000 + (uint64_t)t * 10000;
        cp_trace_record_depth(r, CP_LAYER_RUNTIME, p, -1, 0, t0, t0 + 1000, t, 0);
        cp_trace_record_depth(r, CP_LAYER_RUNTIME, c, -1, 0, t0 + 100, t0 + 500, t, 1);
        cp_trace_record(r, CP_LAYER_DEVICE, cp_trace_intern(r, "mm"), 0, 0, t0, t0 + 100, t);
    }
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cp_trace_recorder_free(r);
    struct cp_buf b;
    cp_buf_init(&b);
    cr_assert_eq(cp_trace_export_buf(s, run, CP_TRACE_FORMAT_FOLDED, &b, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(b.data, "device;mm;MatMul 7\n"
                             "runtime;p 42\n"
                             "runtime;p;c 28\n");
    cp_buf_release(&b);
    cp_trace_store_close(s);
    free(db);
}

Test(trace_export, export_names_missing_runs_and_unwritable_paths)
{
    char *db = cp_t_path("t.db");
    struct cp_trace_store *s = cp_t_trace_store(db, NULL, NULL);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    char *out = cp_t_path("x.json");
    cr_assert_eq(cp_trace_export(s, -1, CP_TRACE_FORMAT_CHROME, out, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "no runs"), "%s", d.msg);
    cr_assert_not(cp_path_exists(out));
    cp_trace_store_close(s);

    int64_t run;
    s = make_store(db, &run);
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_export(s, run + 1, CP_TRACE_FORMAT_FOLDED, out, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, db), "%s", d.msg);
    char *bad = cp_t_path("no/such/cp_t_dir/x.json");
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_export(s, run, CP_TRACE_FORMAT_CHROME, bad, &d), CP_ERR_WRITE);
    cr_assert_not_null(strstr(d.msg, bad), "%s", d.msg);
    cp_trace_store_close(s);
    free(bad);
    free(out);
    free(db);
}

Test(trace_export, export_from_read_only_store_of_an_empty_run)
{
    char *db = cp_t_path("t.db");
    struct cp_trace_run_info info = {.kind = "run"};
    int64_t run;
    struct cp_trace_store *s = cp_t_trace_store(db, &info, &run);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    cp_trace_store_close(s);
    cr_assert_eq(cp_trace_store_open_ro(db, &s, &d), CP_OK, "%s", d.msg);
    struct cp_buf b;
    cp_buf_init(&b);
    cr_assert_eq(cp_trace_export_buf(s, -1, CP_TRACE_FORMAT_CHROME, &b, &d), CP_OK, "%s", d.msg);
    json_t *root = json_loads(b.data, 0, NULL);
    cr_assert_not_null(root, "%s", b.data);
    cr_assert_eq(json_array_size(json_object_get(root, "traceEvents")), 2,
                 "process name and sort index only");
    json_decref(root);
    cp_buf_reset(&b);
    cr_assert_eq(cp_trace_export_buf(s, -1, CP_TRACE_FORMAT_FOLDED, &b, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(b.len, 0);
    cp_buf_release(&b);
    cp_trace_store_close(s);
    free(db);
}

Test(trace_export, format_names_round_trip)
{
    enum cp_trace_format f;
    cr_assert(cp_trace_format_parse("chrome", &f));
    cr_assert_eq(f, CP_TRACE_FORMAT_CHROME);
    cr_assert(cp_trace_format_parse("folded", &f));
    cr_assert_eq(f, CP_TRACE_FORMAT_FOLDED);
    cr_assert_not(cp_trace_format_parse("perfetto", &f));
    cr_assert_not(cp_trace_format_parse(NULL, &f));
    cr_assert_str_eq(cp_trace_format_name(CP_TRACE_FORMAT_CHROME), "chrome");
    cr_assert_str_eq(cp_trace_format_name(CP_TRACE_FORMAT_FOLDED), "folded");
}
