/* `cannprof bench` and `cannprof export` driven as a user would: the
 * statistics as text and JSON, option checks, the SQLite trace that
 * `bench --trace` writes (runs, samples, kernels named after the ONNX
 * nodes, events on three layers, meta), and its export as Chrome JSON and
 * folded stacks, with refusal of bad arguments. (run: test_cli_run.c.) */
#include "core/core.h"
#include "proto/onnx.pb-c.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(cli_bench, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- bench: statistics ------------------------------------------------------------------ */

/* --priority high: said in the text and the JSON; as root it is had, for
 * anyone else it is refused with the reason and the measurement goes on */
Test(cli_bench, bench_priority_high_is_reported_or_refused_with_its_reason)
{
    char *om = ct_convert("nhwc_roundtrip");
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "--iterations", "5", "--warmup", "1", "--threads", "1",
               "--priority", "high", "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    cr_assert(j, "%s", je.text);
    const char *pr = json_string_value(json_object_get(j, "priority"));
    cr_assert(pr);
    if (geteuid() == 0) {
        cr_assert_str_eq(pr, "high");
        cr_assert_null(json_object_get(j, "priority_refused"));
    } else {
        cr_assert_str_eq(pr, "normal");
        cr_assert(json_object_get(j, "priority_refused"));
        ct_assert_mentions(r.err, "--priority high", "CAP_SYS_NICE", NULL);
    }
    json_decref(j);
    cp_run_cli(&r, "bench", om, "--iterations", "5", "--warmup", "1", "--threads", "1",
               "--priority", "high", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    ct_assert_mentions(r.out, "priority:", NULL);
    /* normal, the default, prints no priority line */
    cp_run_cli(&r, "bench", om, "--iterations", "5", "--warmup", "1", "--threads", "1", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_null(strstr(r.out, "priority:"), "%s", r.out);
    cp_run_release(&r);
    free(om);
}

Test(cli_bench, bench_prints_every_statistic)
{
    char *om = ct_convert("nhwc_roundtrip");
    struct cp_run r;
    /* --no-probe: exactly --iterations (without it, that many undisturbed) */
    cp_run_cli(&r, "bench", om, "--no-probe", "--iterations", "5", "--warmup", "1", "--threads",
               "1", NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    ct_assert_mentions(r.out, "mean", "median", "p90", "p99", "sd", "cv", "min", "max",
                       "throughput", "items/s", "5 measured", NULL);
    cp_run_release(&r);
    free(om);
}

static json_t *bench_json(const char *om, const char *a, const char *b, const char *c,
                          const char *e, const char *f)
{
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "--json", "--threads", "1", a, b, c, e, f, NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    json_t *o = cp_t_json(r.out);
    cr_assert_not_null(o, "stdout is not JSON: %s", r.out);
    cp_run_release(&r);
    return o;
}

Test(cli_bench, bench_json_has_statistics_and_memory)
{
    char *om = ct_convert("transformer_encoder_op17");
    json_t *o = bench_json(om, "--no-probe", "--iterations", "5", "--warmup", "1");
    cr_assert_eq(ct_num(o, "iterations"), 5);
    cr_assert_eq(ct_num(o, "warmup"), 1);
    cr_assert_eq(ct_num(o, "threads"), 1);
    cr_assert_eq(ct_num(o, "batch"), 1);
    json_t *l = json_object_get(o, "latency_ms");
    cr_assert(json_is_object(l));
    const char *keys[] = {"mean", "median", "p90", "p99", "sd", "cv", "min", "max"};
    for (size_t i = 0; i < 8; i++)
        cr_assert_geq(ct_num(l, keys[i]), 0, "%s", keys[i]);
    double mn = ct_num(l, "min"), mx = ct_num(l, "max");
    cr_assert_gt(mn, 0);
    cr_assert_leq(mn, ct_num(l, "median"));
    cr_assert_leq(ct_num(l, "median"), ct_num(l, "p90"));
    cr_assert_leq(ct_num(l, "p90"), ct_num(l, "p99"));
    cr_assert_leq(ct_num(l, "p99"), mx);
    cr_assert(ct_num(l, "mean") >= mn && ct_num(l, "mean") <= mx);
    double tp = ct_num(o, "throughput_items_per_s");
    cr_assert_gt(tp, 0);
    /* Throughput is items per second at the mean latency. */
    cr_assert_leq(fabs(tp * ct_num(l, "mean") / 1e3 - 1.0), 0.01, "throughput %g, mean %g ms", tp,
                  ct_num(l, "mean"));
    json_t *m = json_object_get(o, "memory");
    const char *mkeys[] = {"weight_bytes", "arena_bytes", "peak_bytes", "peak_rss_bytes"};
    for (size_t i = 0; i < 4; i++)
        cr_assert_gt(ct_num(m, mkeys[i]), 0, "memory.%s", mkeys[i]);
    cr_assert_leq(ct_num(m, "peak_bytes"), ct_num(m, "arena_bytes"));
    json_decref(o);
    free(om);
}

Test(cli_bench, bench_batch_counts_items_in_throughput)
{
    char *om = ct_convert("resnet_tiny");
    json_t *o = bench_json(om, "--iterations", "2", "--batch", "2", NULL);
    cr_assert_eq(ct_num(o, "batch"), 2);
    double tp = ct_num(o, "throughput_items_per_s");
    double mean = ct_num(json_object_get(o, "latency_ms"), "mean");
    cr_assert_leq(fabs(tp * mean / 2e3 - 1.0), 0.01, "throughput %g, mean %g ms", tp, mean);
    json_decref(o);
    free(om);
}

Test(cli_bench, bench_duration_runs_at_least_one_iteration)
{
    char *om = ct_convert("nhwc_roundtrip");
    json_t *o = bench_json(om, "--duration", "0.2", "--warmup", "0", NULL);
    cr_assert_geq(ct_num(o, "iterations"), 1);
    json_decref(o);
    o = bench_json(om, "--duration", "50ms", "--warmup", "0", NULL);
    cr_assert_geq(ct_num(o, "iterations"), 1);
    json_decref(o);
    free(om);
}

Test(cli_bench, bench_rejects_iterations_with_duration_and_bad_numbers)
{
    char *om = ct_convert("nhwc_roundtrip");
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "--iterations", "5", "--duration", "1", NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "--iterations", "--duration", NULL);
    free(err);
    const char *bad[][2] = {
        {"--iterations", "0"},      {"--iterations", "abc"}, {"--iterations", "5x"},
        {"--iterations", "-3"},     {"--warmup", "-1"},      {"--warmup", "w"},
        {"--duration", "0"},        {"--duration", "x"},     {"--duration", "-1"},
        {"--duration", "5parsecs"}, {"--threads", "0"},      {"--threads", "many"},
        {"--batch", "0"},           {"--seed", "-4"},        {"--priority", "urgent"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cp_run_cli(&r, "bench", om, bad[i][0], bad[i][1], NULL);
        err = ct_fails_2(&r);
        ct_assert_mentions(err, bad[i][0], NULL);
        free(err);
    }
    cp_run_cli(&r, "bench", NULL);
    free(ct_fails_2(&r));
    char *missing = cp_t_path("missing.om");
    cp_run_cli(&r, "bench", missing, "--iterations", "1", NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, missing, NULL);
    free(err);
    free(missing);
    free(om);
}

/* ---- bench --trace: the store ------------------------------------------------------------ */

/* `bench OM --iterations ITERS --warmup 1 --threads 1 --trace
 * <scratch>/LEAF`; returns the trace path. */
static char *bench_trace(const char *om, const char *leaf, const char *iters)
{
    char *db = cp_t_path(leaf);
    cr_assert(cp_t_bench_trace(om, db, "--no-probe", "--iterations", iters, "--warmup", "1",
                               "--threads", "1", NULL),
              "bench --trace %s failed (see stderr)", db);
    return db;
}

static sqlite3 *open_db(const char *path)
{
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "%s",
                 db ? sqlite3_errmsg(db) : path);
    return db;
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
                 sqlite3_errmsg(db));
    return st;
}

static int64_t q_int(sqlite3 *db, const char *sql)
{
    int64_t v = 0;
    cr_assert(cp_t_sql_int(db, sql, &v), "%s (see stderr)", sql);
    return v;
}

/* The text of the first column of the first row (heap), or NULL. */
static char *q_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = prep(db, sql);
    char *v = NULL;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        v = cp_t_fmt("%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
}

/* Node names of an .onnx, as a JSON object used as a set. */
static json_t *onnx_node_names(const char *path)
{
    size_t len = 0;
    uint8_t *data = ct_read(path, &len);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
    cr_assert_not_null(m);
    json_t *set = json_object();
    for (size_t i = 0; i < m->graph->n_node; i++)
        if (m->graph->node[i]->name)
            json_object_set_new(set, m->graph->node[i]->name, json_true());
    onnx__model_proto__free_unpacked(m, NULL);
    free(data);
    return set;
}

Test(cli_bench, bench_trace_holds_run_samples_kernels_events_meta)
{
    char *om = ct_convert("transformer_encoder_op17");
    char *path = bench_trace(om, "t.db", "5");
    sqlite3 *db = open_db(path);

    cr_assert_eq(q_int(db, "PRAGMA application_id"), 0x43505452);
    cr_assert_eq(q_int(db, "PRAGMA user_version"), 1);

    /* runs */
    cr_assert_eq(q_int(db, "SELECT count(*) FROM runs"), 1);
    char *kind = q_text(db, "SELECT kind FROM runs");
    cr_assert_str_eq(kind, "bench");
    free(kind);
    cr_assert_eq(q_int(db, "SELECT iterations FROM runs"), 5);
    cr_assert_eq(q_int(db, "SELECT warmup FROM runs"), 1);
    cr_assert_eq(q_int(db, "SELECT threads FROM runs"), 1);
    cr_assert_eq(q_int(db, "SELECT batch FROM runs"), 1);
    cr_assert_eq(q_int(db, "SELECT min(weight_bytes, arena_bytes, peak_bytes, peak_rss_bytes) > 0 "
                           "FROM runs"),
                 1);
    char *hash = q_text(db, "SELECT model_hash FROM runs");
    cr_assert(hash && strlen(hash) == 32, "model_hash '%s'", hash);
    free(hash);
    char *cfg = q_text(db, "SELECT config_json FROM runs");
    json_t *cj = json_loads(cfg ? cfg : "", 0, NULL);
    cr_assert(json_is_object(cj), "config_json: %s", cfg);
    json_decref(cj);
    free(cfg);

    /* samples */
    cr_assert_eq(q_int(db, "SELECT count(*) FROM samples WHERE run_id = 1 AND latency_ns > 0"), 5);
    cr_assert_eq(q_int(db, "SELECT min(iteration) FROM samples"), 0);
    cr_assert_eq(q_int(db, "SELECT max(iteration) FROM samples"), 4);

    /* kernels: every row described, origins naming nodes of the source ONNX */
    int64_t nk = q_int(db, "SELECT count(*) FROM kernels WHERE run_id = 1");
    cr_assert_gt(nk, 0);
    cr_assert_eq(q_int(db, "SELECT max(idx) + 1 FROM kernels"), nk);
    char *onnx = cp_t_example("transformer_encoder_op17");
    json_t *names = onnx_node_names(onnx);
    sqlite3_stmt *st =
        prep(db, "SELECT node, op_type, impl, origins, inputs, outputs FROM kernels");
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *node = (const char *)sqlite3_column_text(st, 0);
        cr_assert(node && *node);
        cr_assert(sqlite3_column_text(st, 1) && *sqlite3_column_text(st, 1), "%s: op_type", node);
        cr_assert(sqlite3_column_text(st, 2) && *sqlite3_column_text(st, 2), "%s: impl", node);
        const char *origins = (const char *)sqlite3_column_text(st, 3);
        json_t *o = json_loads(origins ? origins : "", 0, NULL);
        cr_assert(json_is_array(o) && json_array_size(o) > 0, "%s: origins %s", node, origins);
        for (size_t i = 0; i < json_array_size(o); i++) {
            const char *on = json_string_value(json_array_get(o, i));
            cr_assert(on && json_object_get(names, on), "%s: origin '%s' is not an ONNX node", node,
                      on);
        }
        json_decref(o);
        for (int c = 4; c <= 5; c++) {
            const char *io = (const char *)sqlite3_column_text(st, c);
            json_t *a = json_loads(io ? io : "", 0, NULL);
            cr_assert(json_is_array(a), "%s: column %d: %s", node, c, io);
            json_decref(a);
        }
    }
    sqlite3_finalize(st);
    json_decref(names);
    free(onnx);

    /* events on all three layers */
    for (int layer = 0; layer < 3; layer++) {
        char *sql = cp_t_fmt("SELECT count(*) FROM events WHERE run_id = 1 AND layer = %d", layer);
        cr_assert_gt(q_int(db, sql), 0, "no events on layer %d", layer);
        free(sql);
    }
    const char *rt_names[] = {"load", "plan", "execute", "input copy"};
    for (size_t i = 0; i < 4; i++) {
        char *sql = cp_t_fmt("SELECT count(*) FROM events e JOIN strings s ON s.id = e.name_id "
                             "WHERE e.layer = 1 AND s.value = '%s'",
                             rt_names[i]);
        cr_assert_gt(q_int(db, sql), 0, "no runtime event '%s'", rt_names[i]);
        free(sql);
    }
    const char *app_names[] = {"cannprof bench", "warmup", "measure"};
    for (size_t i = 0; i < 3; i++) {
        char *sql = cp_t_fmt("SELECT count(*) FROM events e JOIN strings s ON s.id = e.name_id "
                             "WHERE e.layer = 0 AND s.value = '%s'",
                             app_names[i]);
        cr_assert_eq(q_int(db, sql), 1, "application range '%s'", app_names[i]);
        free(sql);
    }
    /* One execute and one event per kernel in each measured iteration. */
    for (int it = 0; it < 5; it++) {
        char *sql = cp_t_fmt("SELECT count(*) FROM events WHERE layer = 2 AND iteration = %d", it);
        cr_assert_eq(q_int(db, sql), nk, "iteration %d", it);
        free(sql);
        sql = cp_t_fmt("SELECT count(DISTINCT kernel_idx) FROM events WHERE layer = 2 AND "
                       "iteration = %d",
                       it);
        cr_assert_eq(q_int(db, sql), nk, "iteration %d", it);
        free(sql);
        sql = cp_t_fmt("SELECT count(*) FROM events e JOIN strings s ON s.id = e.name_id "
                       "WHERE e.layer = 1 AND s.value = 'execute' AND e.iteration = %d",
                       it);
        cr_assert_eq(q_int(db, sql), 1, "execute events of iteration %d", it);
        free(sql);
        /* Kernels run one after another inside the timed iteration. */
        sql = cp_t_fmt("SELECT (SELECT sum(dur_ns) FROM events WHERE layer = 2 AND iteration = %d) "
                       "<= (SELECT latency_ns FROM samples WHERE iteration = %d)",
                       it, it);
        cr_assert_eq(q_int(db, sql), 1, "kernel time exceeds the sample of iteration %d", it);
        free(sql);
    }
    cr_assert_eq(q_int(db, "SELECT count(*) FROM events WHERE layer = 2 AND iteration >= 0"),
                 nk * 5);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM events WHERE layer = 2 AND iteration < 0"), nk,
                 "one warm-up iteration");
    /* A device event is named after its kernel's node. */
    cr_assert_eq(q_int(db, "SELECT count(*) FROM events e JOIN strings s ON s.id = e.name_id "
                           "JOIN kernels k ON k.run_id = e.run_id AND k.idx = e.kernel_idx "
                           "WHERE e.layer = 2 AND s.value <> k.node"),
                 0);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM events WHERE dur_ns < 0 OR start_ns <= 0"), 0);

    /* meta */
    char *tv = q_text(db, "SELECT value FROM meta WHERE key = 'tool_version'");
    cr_assert_not_null(tv);
    cr_assert_str_eq(tv, CP_VERSION_STRING);
    free(tv);
    char *cpu = q_text(db, "SELECT value FROM meta WHERE key = 'host_cpu_model'");
    cr_assert(cpu && *cpu, "host_cpu_model missing");
    free(cpu);
    cr_assert_geq(q_int(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'host_cores'"), 1);
    cr_assert_gt(q_int(db, "SELECT value FROM counters WHERE name = 'peak_rss_bytes'"), 0);
    sqlite3_close(db);
    free(path);
    free(om);
}

Test(cli_bench, bench_trace_appends_runs_to_an_existing_store)
{
    char *om = ct_convert("nhwc_roundtrip");
    char *path = bench_trace(om, "two.db", "3");
    free(bench_trace(om, "two.db", "5"));
    sqlite3 *db = open_db(path);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM runs"), 2);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM samples WHERE run_id = 1"), 3);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM samples WHERE run_id = 2"), 5);
    sqlite3_close(db);
    free(path);
    free(om);
}

Test(cli_bench, bench_trace_refuses_to_overwrite_a_non_trace_file)
{
    char *om = ct_convert("nhwc_roundtrip");
    char *victim = cp_t_path("victim.om");
    size_t len = 0;
    uint8_t *data = ct_read(om, &len);
    ct_write(victim, data, len);
    free(data);
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "--iterations", "1", "--warmup", "0", "--trace", victim, NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "victim.om", NULL);
    free(err);
    cr_assert(ct_same_bytes(om, victim), "bench --trace changed a file that is not a trace");
    free(victim);
    free(om);
}

/* ---- export ------------------------------------------------------------------------------ */

Test(cli_bench, export_chrome_is_trace_event_json)
{
    char *om = ct_convert("transformer_encoder_op17");
    char *path = bench_trace(om, "c.db", "5");
    char *out = cp_t_path("trace.json");
    struct cp_run r;
    cp_run_cli(&r, "export", path, "--format", "chrome", "-o", out, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);

    json_t *root = cp_t_json_file(out);
    cr_assert_not_null(root, "%s is not JSON", out);
    json_t *ev = json_object_get(root, "traceEvents");
    cr_assert(json_is_array(ev));
    json_t *tids = json_object(); /* tid -> thread name */
    size_t n_x = 0, n_device = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        cr_assert_not_null(ph, "event %zu has no ph", i);
        if (strcmp(ph, "M") == 0 &&
            strcmp(json_string_value(json_object_get(e, "name")), "thread_name") == 0) {
            char key[32];
            snprintf(key, sizeof key, "%lld", json_integer_value(json_object_get(e, "tid")));
            const char *tn = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
            cr_assert_not_null(tn);
            json_object_set_new(tids, key, json_string(tn));
        }
    }
    cr_assert_eq(json_object_size(tids), 3, "thread_name metadata for 3 threads");
    struct cp_buf all;
    cp_buf_init(&all);
    const char *k;
    json_t *v;
    json_object_foreach(tids, k, v)
    {
        cp_buf_printf(&all, "%s|", json_string_value(v));
    }
    ct_assert_mentions(all.data, "application", "runtime", "device", NULL);
    cp_buf_release(&all);
    double last_ts = 0, first_ts = -1;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0)
            continue;
        n_x++;
        double t = json_number_value(json_object_get(e, "ts"));
        cr_assert_geq(t, last_ts, "X event %zu is out of time order", i);
        last_ts = t;
        if (first_ts < 0)
            first_ts = t;
        cr_assert(json_is_string(json_object_get(e, "name")), "X event %zu has no name", i);
        json_t *ts = json_object_get(e, "ts"), *dur = json_object_get(e, "dur");
        cr_assert(json_is_number(ts) && json_number_value(ts) >= 0, "X event %zu: ts", i);
        cr_assert(json_is_number(dur) && json_number_value(dur) >= 0, "X event %zu: dur", i);
        cr_assert(json_is_integer(json_object_get(e, "pid")));
        char key[32];
        snprintf(key, sizeof key, "%lld", json_integer_value(json_object_get(e, "tid")));
        cr_assert_not_null(json_object_get(tids, key), "X event %zu on unnamed thread %s", i, key);
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (cat && strcmp(cat, "device") == 0) {
            n_device++;
            json_t *args = json_object_get(e, "args");
            cr_assert(json_is_string(json_object_get(args, "node")), "device event %zu: node", i);
            cr_assert(json_is_string(json_object_get(args, "op_type")), "device event %zu", i);
            json_int_t it = json_integer_value(json_object_get(args, "iteration"));
            cr_assert(it >= -1 && it < 5, "device event %zu: iteration %lld", i, (long long)it);
        }
    }
    cr_assert_eq(first_ts, 0, "the first event is at ts 0");
    sqlite3 *db = open_db(path);
    cr_assert_eq((int64_t)n_x, q_int(db, "SELECT count(*) FROM events"),
                 "one X event per stored event");
    cr_assert_eq((int64_t)n_device, q_int(db, "SELECT count(*) FROM events WHERE layer = 2"));
    sqlite3_close(db);
    json_decref(tids);
    json_decref(root);
    free(out);
    free(path);
    free(om);
}

Test(cli_bench, export_folded_lines_are_layer_stacks_with_integer_weights)
{
    char *om = ct_convert("transformer_encoder_op17");
    char *path = bench_trace(om, "f.db", "3");
    char *out = cp_t_path("trace.folded");
    struct cp_run r;
    cp_run_cli(&r, "export", path, "--format", "folded", "-o", out, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);

    size_t len = 0;
    char *text = (char *)ct_read(out, &len);
    cr_assert_gt(len, 0);
    cr_assert_eq(text[len - 1], '\n', "the last line is unterminated");
    text[len - 1] = '\0';
    sqlite3 *db = open_db(path);
    sqlite3_stmt *op = prep(db, "SELECT count(*) FROM kernels WHERE replace(node, ';', ':') = ?1 "
                                "AND op_type = ?2");
    size_t per_layer[3] = {0};
    const char *layers[] = {"application", "runtime", "device"};
    char prev[1024] = "";
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strrchr(line, ' ');
        cr_assert_not_null(sp, "no weight: '%s'", line);
        *sp = '\0';
        cr_assert_lt(strcmp(prev, line), 0, "stacks not sorted: '%s' then '%s'", prev, line);
        snprintf(prev, sizeof prev, "%s", line);
        *sp = ' ';
        cr_assert(sp[1] != '\0' && strspn(sp + 1, "0123456789") == strlen(sp + 1),
                  "weight is not an integer: '%s'", line);
        *sp = '\0';
        char *parts[8];
        size_t np = 0;
        for (char *p = line; np < 8;) {
            parts[np++] = p;
            char *semi = strchr(p, ';');
            if (!semi)
                break;
            *semi = '\0';
            p = semi + 1;
        }
        cr_assert_geq(np, 2, "stack without frames: '%s'", line);
        size_t li = 3;
        for (size_t i = 0; i < 3; i++)
            if (strcmp(parts[0], layers[i]) == 0)
                li = i;
        cr_assert_lt(li, 3, "unknown layer '%s'", parts[0]);
        per_layer[li]++;
        if (li == 2) {
            cr_assert_eq(np, 3, "device line must be device;node;op: '%s'", line);
            sqlite3_reset(op);
            sqlite3_bind_text(op, 1, parts[1], -1, SQLITE_STATIC);
            sqlite3_bind_text(op, 2, parts[2], -1, SQLITE_STATIC);
            cr_assert_eq(sqlite3_step(op), SQLITE_ROW);
            cr_assert_gt(sqlite3_column_int64(op, 0), 0, "no kernel '%s' of op %s", parts[1],
                         parts[2]);
        }
    }
    sqlite3_finalize(op);
    for (size_t i = 0; i < 3; i++)
        cr_assert_gt(per_layer[i], 0, "no %s lines", layers[i]);
    /* One line per kernel, less those whose time rounds to 0 µs. */
    cr_assert_leq((int64_t)per_layer[2], q_int(db, "SELECT count(*) FROM kernels"));
    sqlite3_close(db);
    free(text);
    free(out);
    free(path);
    free(om);
}

Test(cli_bench, export_picks_a_run_with_run_flag)
{
    char *om = ct_convert("nhwc_roundtrip");
    char *path = bench_trace(om, "r.db", "2");
    free(bench_trace(om, "r.db", "4"));
    char *out = cp_t_path("r1.json");
    struct cp_run r;
    cp_run_cli(&r, "export", path, "--format", "chrome", "-o", out, "--run", "1", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);
    cr_assert(cp_path_exists(out));
    char *none = cp_t_path("r9.json");
    cp_run_cli(&r, "export", path, "--format", "chrome", "-o", none, "--run", "9", NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "9", NULL);
    free(err);
    cr_assert(!cp_path_exists(none));
    cp_run_cli(&r, "export", path, "--format", "chrome", "-o", none, "--run", "zero", NULL);
    free(ct_fails_2(&r));
    free(none);
    free(out);
    free(path);
    free(om);
}

Test(cli_bench, export_rejects_bad_arguments_and_files)
{
    char *om = ct_convert("nhwc_roundtrip");
    char *path = bench_trace(om, "e.db", "1");
    char *out = cp_t_path("out.json");
    struct cp_run r;

    cp_run_cli(&r, "export", path, "--format", "bad", "-o", out, NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "bad", "chrome", "folded", NULL);
    free(err);
    cp_run_cli(&r, "export", path, "--format", "chrome", NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, "-o", NULL);
    free(err);
    cp_run_cli(&r, "export", path, "-o", out, NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, "--format", NULL);
    free(err);
    cp_run_cli(&r, "export", "--format", "chrome", "-o", out, NULL);
    free(ct_fails_2(&r));
    cr_assert(!cp_path_exists(out), "a failed export left %s", out);

    /* A missing trace is named and neither it nor the output is created. */
    char *missing = cp_t_path("missing.db");
    cp_run_cli(&r, "export", missing, "--format", "chrome", "-o", out, NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, missing, NULL);
    free(err);
    cr_assert(!cp_path_exists(missing), "export created %s", missing);
    cr_assert(!cp_path_exists(out), "a failed export left %s", out);

    /* Not a trace: a .om, and a SQLite file of someone else's. */
    cp_run_cli(&r, "export", om, "--format", "folded", "-o", out, NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, om, NULL);
    free(err);
    char *foreign = cp_t_path("foreign.db");
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(foreign, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES ('hi')",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    cp_run_cli(&r, "export", foreign, "--format", "chrome", "-o", out, NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, "foreign.db", NULL);
    free(err);
    cr_assert(!cp_path_exists(out), "a failed export left %s", out);
    free(foreign);
    free(missing);
    free(out);
    free(path);
    free(om);
}
