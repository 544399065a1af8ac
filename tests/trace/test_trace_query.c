/* trace query API (trace/query.h): each reader on a run written through
 * the store's own writers, on an empty run, on a run that does not exist,
 * and on stores that lack the optional tables an importer may not fill. */
#include "trace/query.h"
#include "support/cli.h"
#include "support/db.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(trace_query, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- a run with a bit of everything ------------------------------------------------- */

#define SHORT_NS 20.0

/* Iteration i (-1 is warm-up) starts at base(i); within it: execute
 * [0, 100], input copy [1, 5] in iteration 0, conv [10, 40], relu [50, 60],
 * a device task that names no kernel [70, 75] in iteration 2 and one of a
 * kernel index the table lacks (7) [80, 84] in iteration 3. */
static uint64_t base(int it)
{
    return 1000u * (uint64_t)(it + 2);
}

static void add_events(struct cp_trace_store *s, int64_t run)
{
    struct cp_trace_recorder *r = cp_trace_recorder_create(64);
    cr_assert_not_null(r);
    int32_t exec = cp_trace_intern(r, "execute"), copy = cp_trace_intern(r, "input copy"),
            conv = cp_trace_intern(r, "conv"), relu = cp_trace_intern(r, "relu"),
            dma = cp_trace_intern(r, "dma"), other = cp_trace_intern(r, "k7"),
            bench = cp_trace_intern(r, "cannprof bench");
    cp_trace_record(r, CP_LAYER_APP, bench, -1, -1, 0, 9000, 0);
    for (int it = -1; it < 4; it++) {
        uint64_t b = base(it);
        cp_trace_record(r, CP_LAYER_RUNTIME, exec, -1, it, b, b + 100, 0);
        if (it == 0)
            cp_trace_record_depth(r, CP_LAYER_RUNTIME, copy, -1, it, b + 1, b + 5, 0, 1);
        cp_trace_record(r, CP_LAYER_DEVICE, conv, 0, it, b + 10, b + 40, 0);
        cp_trace_record(r, CP_LAYER_DEVICE, relu, 1, it, b + 50, b + 60, 0);
        if (it == 2)
            cp_trace_record(r, CP_LAYER_DEVICE, dma, -1, it, b + 70, b + 75, 0);
        if (it == 3)
            cp_trace_record(r, CP_LAYER_DEVICE, other, 7, it, b + 80, b + 84, 0);
    }
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cp_trace_recorder_free(r);
}

static void add_kernels(struct cp_trace_store *s, int64_t run)
{
    struct cp_trace_kernel k[2] = {
        {"conv", "Conv", "onednn:conv", "[\"conv_a\",\"conv_b\"]",
         "[{\"name\":\"x\",\"shape\":[1,3,4,4],\"dtype\":\"f32\",\"layout\":\"NCHW\"}]",
         "[{\"name\":\"y\",\"shape\":[1,8,4,4],\"dtype\":\"f32\",\"layout\":\"nChw16c\","
         "\"compute\":\"bf16\",\"future_key\":[1,2]}]",
         100, 50},
        /* what an importer may leave out: node, impl, origins, FLOPs; a
         * shape with a symbolic dimension; an input that is a view */
        {NULL, "Relu", NULL, NULL,
         "[{\"name\":\"r\",\"view_of\":\"y\",\"shape\":[1,\"N\",4],\"dtype\":\"f32\","
         "\"layout\":\"ND\"},{\"name\":\"noshape\"}]",
         "", 0, 0},
    };
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_add_kernels(s, run, k, 2, &d), CP_OK, "%s", d.msg);
}

static void add_counters(struct cp_trace_store *s, int64_t run)
{
    struct cp_diag d;
    cp_diag_init(&d);
    double probe[4] = {10, 11, 12, 13};
    cr_assert_eq(cp_trace_store_add_counter_series(s, run, "probe_ns", 0, probe, 4, &d), CP_OK);
    const struct {
        int32_t it;
        const char *name;
        double v;
    } c[] = {
        {1, "probe_ns", 99},          /* a second value for iteration 1 */
        {-1, "probe_ns", 5},          /* not a measured iteration */
        {-1, "perf.cycles", 5},       /* whole run */
        {-1, "PERF.x", 1},            /* another prefix: case counts */
        {0, "perf.cycles", 1},        /* per iteration, not whole run */
        {-1, "perf.instructions", 7}, /* whole run */
        {-1, "perf.cycles", 6},       /* recorded again: later wins */
        {-1, "precision_loss", 0.5},
        {-1, "precision_loss", 0.7},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++)
        cr_assert_eq(cp_trace_store_add_counter(s, run, c[i].it, c[i].name, c[i].v, 0, &d), CP_OK,
                     "%s", d.msg);
}

/* A store at NAME with run 1 full and run 2 begun and left empty. */
static struct cp_trace_store *fixture(const char *name, char **path)
{
    *path = cp_t_path(name);
    struct cp_trace_run_info info = {
        .kind = "bench",
        .model_path = "m.onnx",
        .model_hash = "0123456789abcdef0123456789abcdef",
        .config_json = "{\"fusion\":\"on\"}",
        .config_id = "cfg-1",
        .target = "cpu",
        .threads = 4,
        .batch = 2,
        .warmup = 1,
        .iterations = 4,
    };
    int64_t run;
    struct cp_trace_store *s = cp_t_trace_store(*path, &info, &run);
    cr_assert_not_null(s);
    cr_assert_eq(run, 1);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_set_run_memory(s, run, 1000, 24, 20, 4096, &d), CP_OK);
    uint64_t lat[4] = {1000, 2000, 3000, 4000};
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, lat, 4, &d), CP_OK, "%s", d.msg);
    add_kernels(s, run);
    add_events(s, run);
    add_counters(s, run);
    struct cp_trace_run_info empty = {.kind = "import"};
    cr_assert_eq(cp_trace_store_begin_run(s, &empty, &run, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(run, 2);
    return s;
}

/* ---- the run ------------------------------------------------------------------------ */

Test(trace_query, run_reads_every_column_and_null_text_as_empty)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_run r;
    cr_assert_eq(cp_trace_query_run(s, 1, &r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(r.id, 1);
    cr_assert_str_eq(r.kind, "bench");
    cr_assert_str_eq(r.model_path, "m.onnx");
    cr_assert_str_eq(r.model_hash, "0123456789abcdef0123456789abcdef");
    cr_assert_str_eq(r.config_json, "{\"fusion\":\"on\"}");
    cr_assert_str_eq(r.config_id, "cfg-1");
    cr_assert_str_eq(r.target, "cpu");
    cr_assert_eq(strlen(r.created_at), strlen("2025-01-31T12:00:00Z"), "%s", r.created_at);
    cr_assert_eq(r.threads, 4);
    cr_assert_eq(r.batch, 2);
    cr_assert_eq(r.warmup, 1);
    cr_assert_eq(r.iterations, 4);
    cr_assert_eq(r.weight_bytes, 1000);
    cr_assert_eq(r.arena_bytes, 24);
    cr_assert_eq(r.peak_bytes, 20);
    cr_assert_eq(r.peak_rss_bytes, 4096);
    cp_trace_run_release(&r);
    /* the last run, which recorded nothing but its kind */
    cr_assert_eq(cp_trace_query_run(s, -1, &r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(r.id, 2);
    cr_assert_str_eq(r.kind, "import");
    cr_assert_str_eq(r.model_path, "");
    cr_assert_str_eq(r.config_json, "");
    cr_assert_eq(r.threads, 0);
    cr_assert_eq(r.weight_bytes, 0);
    cp_trace_run_release(&r);
    cp_trace_run_release(&r); /* twice is harmless */
    cp_trace_store_close(s);
    free(p);
}

/* ---- samples and counters ------------------------------------------------------------- */

Test(trace_query, samples_come_back_in_iteration_order)
{
    char *p = cp_t_path("t.db");
    struct cp_trace_run_info info = {.kind = "bench"};
    int64_t run;
    struct cp_trace_store *s = cp_t_trace_store(p, &info, &run);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    uint64_t late[2] = {30, 40}, early[2] = {10, 20};
    cr_assert_eq(cp_trace_store_add_samples(s, run, 2, late, 2, &d), CP_OK);
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, early, 2, &d), CP_OK);
    struct cp_trace_sample *v;
    size_t n;
    cr_assert_eq(cp_trace_query_samples(s, run, &v, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 4);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(v[i].iteration, (int64_t)i);
        cr_assert_eq(v[i].latency_ns, 10 * (i + 1));
    }
    free(v);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_query, counter_series_is_per_measured_iteration_in_order)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_point *v;
    size_t n;
    cr_assert_eq(cp_trace_query_counter_series(s, 1, "probe_ns", &v, &n, &d), CP_OK, "%s", d.msg);
    /* iteration -1 left out; iteration 1's second value after its first */
    int64_t it[] = {0, 1, 1, 2, 3};
    double val[] = {10, 11, 99, 12, 13};
    cr_assert_eq(n, 5);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(v[i].iteration, it[i], "point %zu", i);
        cr_assert_float_eq(v[i].value, val[i], 1e-12, "point %zu", i);
    }
    free(v);
    cr_assert_eq(cp_trace_query_counter_series(s, 1, "no_such", &v, &n, &d), CP_OK);
    cr_assert_eq(n, 0);
    cr_assert_null(v);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_query, run_counters_match_the_prefix_exactly_in_recording_order)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_counter *c;
    size_t n;
    cr_assert_eq(cp_trace_query_run_counters(s, 1, "perf.", &c, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(c[0].name, "perf.cycles");
    cr_assert_float_eq(c[0].value, 5, 1e-12);
    cr_assert_str_eq(c[1].name, "perf.instructions");
    cr_assert_str_eq(c[2].name, "perf.cycles");
    cr_assert_float_eq(c[2].value, 6, 1e-12);
    cp_trace_counters_free(c, n);
    /* no prefix: every whole-run counter */
    cr_assert_eq(cp_trace_query_run_counters(s, 1, NULL, &c, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 8, "run.started_us, probe_ns@-1, perf x3, PERF.x, precision_loss x2");
    cr_assert_str_eq(c[0].name, CP_TRACE_STARTED_COUNTER);
    cr_assert_gt(c[0].value, 1.6e15, "microseconds since the epoch: after 2020");
    cp_trace_counters_free(c, n);
    cp_trace_counters_free(NULL, 0);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_query, counter_gives_the_latest_value_or_nan)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    double v = 0;
    cr_assert_eq(cp_trace_query_counter(s, 1, "precision_loss", &v, &d), CP_OK, "%s", d.msg);
    cr_assert_float_eq(v, 0.7, 1e-12);
    cr_assert_eq(cp_trace_query_counter(s, 1, "no_such", &v, &d), CP_OK, "%s", d.msg);
    cr_assert(isnan(v));
    cp_trace_store_close(s);
    free(p);
}

/* ---- kernels ----------------------------------------------------------------------- */

Test(trace_query, kernels_come_with_their_tensors_parsed)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_kernel_desc *k;
    size_t n;
    cr_assert_eq(cp_trace_query_kernels(s, 1, &k, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 2);
    cr_assert_eq(k[0].idx, 0);
    cr_assert_str_eq(k[0].node, "conv");
    cr_assert_str_eq(k[0].op_type, "Conv");
    cr_assert_str_eq(k[0].impl, "onednn:conv");
    cr_assert_str_eq(k[0].origins, "[\"conv_a\",\"conv_b\"]");
    cr_assert_float_eq(k[0].flops, 100, 1e-12);
    cr_assert_float_eq(k[0].bytes, 50, 1e-12);
    cr_assert_eq(k[0].n_in, 1);
    cr_assert_str_eq(k[0].in[0].name, "x");
    cr_assert_null(k[0].in[0].view_of);
    cr_assert_str_eq(k[0].in[0].layout, "NCHW");
    cr_assert_eq(k[0].in[0].rank, 4);
    cr_assert_eq(k[0].in[0].dims[1], 3);
    cr_assert_eq(k[0].n_out, 1);
    cr_assert_str_eq(k[0].out[0].compute, "bf16");
    cr_assert_str_eq(k[0].out[0].layout, "nChw16c");
    /* the row an importer left half empty */
    cr_assert_eq(k[1].idx, 1);
    cr_assert_str_eq(k[1].node, "");
    cr_assert_str_eq(k[1].impl, "");
    cr_assert_str_eq(k[1].origins, "[]");
    cr_assert_float_eq(k[1].flops, 0, 1e-12);
    cr_assert_eq(k[1].n_in, 2);
    cr_assert_str_eq(k[1].in[0].view_of, "y");
    cr_assert_eq(k[1].in[0].rank, 3);
    cr_assert_eq(k[1].in[0].dims[1], -1, "a symbolic dimension");
    cr_assert_null(k[1].in[0].compute);
    cr_assert_str_eq(k[1].in[1].name, "noshape");
    cr_assert_str_eq(k[1].in[1].dtype, "");
    cr_assert_eq(k[1].in[1].rank, -1);
    cr_assert_eq(k[1].n_out, 0);
    cr_assert_null(k[1].out);
    cp_trace_kernels_free(k, n);
    cp_trace_kernels_free(NULL, 0);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_query, tensor_json_that_is_not_an_array_of_objects_is_corrupt)
{
    char *p = cp_t_path("bad.db");
    struct cp_trace_run_info info = {.kind = "bench"};
    int64_t run;
    struct cp_trace_store *s = cp_t_trace_store(p, &info, &run);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_kernel k[2] = {{"a", "Relu", "ref", "[]", "[]", "[]", 0, 0},
                                   {"b", "Relu", "ref", "[]", "[]", "[{},3]", 0, 0}};
    cr_assert_eq(cp_trace_store_add_kernels(s, run, k, 2, &d), CP_OK);
    struct cp_trace_kernel_desc *kd = (void *)1;
    size_t n = 9;
    cr_assert_eq(cp_trace_query_kernels(s, run, &kd, &n, &d), CP_ERR_CORRUPT);
    cr_assert_null(kd);
    cr_assert_eq(n, 0);
    cr_assert(strstr(d.msg, "bad.db") && strstr(d.msg, "kernel 1") && strstr(d.msg, "outputs[1]"),
              "%s", d.msg);
    cp_trace_store_close(s);
    free(p);
}

/* ---- where the time went ------------------------------------------------------------ */

static void assert_kt(const struct cp_trace_kernel_time *t, int64_t idx, int64_t events,
                      double total, int64_t n_short, double short_ns)
{
    cr_assert_eq(t->kernel_idx, idx);
    cr_assert_eq(t->events, events, "kernel %lld events", (long long)idx);
    cr_assert_float_eq(t->total_ns, total, 1e-9, "kernel %lld total", (long long)idx);
    cr_assert_eq(t->n_short, n_short, "kernel %lld short", (long long)idx);
    cr_assert_float_eq(t->short_ns, short_ns, 1e-9, "kernel %lld short_ns", (long long)idx);
}

Test(trace_query, kernel_times_sum_measured_iterations_or_a_set)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_kernel_time *t;
    size_t n;
    /* every measured iteration (warm-up left out); kernel 7 is not in the
     * table and still gets its entry; the device task with no kernel none */
    cr_assert_eq(cp_trace_query_kernel_times(s, 1, NULL, SHORT_NS, &t, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 3);
    assert_kt(&t[0], 0, 4, 120, 0, 0);
    assert_kt(&t[1], 1, 4, 40, 4, 40);
    assert_kt(&t[2], 7, 1, 4, 1, 4);
    free(t);
    int64_t only[] = {1, 3};
    struct cp_trace_iter_set set = {only, 2};
    cr_assert_eq(cp_trace_query_kernel_times(s, 1, &set, SHORT_NS, &t, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 3);
    assert_kt(&t[0], 0, 2, 60, 0, 0);
    assert_kt(&t[1], 1, 2, 20, 2, 20);
    assert_kt(&t[2], 7, 1, 4, 1, 4);
    free(t);
    /* warm-up (-1) is never read, even when a set names it */
    int64_t warm[] = {-1, 1};
    set = (struct cp_trace_iter_set){warm, 2};
    cr_assert_eq(cp_trace_query_kernel_times(s, 1, &set, SHORT_NS, &t, &n, &d), CP_OK);
    cr_assert_eq(n, 2);
    assert_kt(&t[0], 0, 1, 30, 0, 0);
    free(t);
    int64_t two[] = {2};
    set = (struct cp_trace_iter_set){two, 1};
    cr_assert_eq(cp_trace_query_kernel_times(s, 1, &set, SHORT_NS, &t, &n, &d), CP_OK);
    cr_assert_eq(n, 2, "kernel 7 ran in iteration 3 only");
    free(t);
    set = (struct cp_trace_iter_set){two, 0};
    cr_assert_eq(cp_trace_query_kernel_times(s, 1, &set, SHORT_NS, &t, &n, &d), CP_OK);
    cr_assert_eq(n, 0, "an empty set reads nothing");
    cr_assert_null(t);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_query, layer_iterations_count_and_sum_each_iteration)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_iter_time *v;
    size_t n;
    cr_assert_eq(cp_trace_query_layer_iterations(s, 1, CP_LAYER_DEVICE, NULL, &v, &n, &d), CP_OK,
                 "%s", d.msg);
    /* the device task that names no kernel counts as kernel time */
    int64_t events[] = {2, 2, 3, 3};
    double total[] = {40, 40, 45, 44};
    cr_assert_eq(n, 4);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(v[i].iteration, (int64_t)i);
        cr_assert_eq(v[i].events, events[i], "iteration %zu", i);
        cr_assert_float_eq(v[i].total_ns, total[i], 1e-9, "iteration %zu", i);
    }
    free(v);
    int64_t only[] = {0, 2};
    struct cp_trace_iter_set set = {only, 2};
    cr_assert_eq(cp_trace_query_layer_iterations(s, 1, CP_LAYER_RUNTIME, &set, &v, &n, &d), CP_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(v[0].iteration, 0);
    cr_assert_eq(v[0].events, 2, "execute and input copy");
    cr_assert_float_eq(v[0].total_ns, 104, 1e-9);
    cr_assert_eq(v[1].iteration, 2);
    cr_assert_eq(v[1].events, 1);
    free(v);
    cp_trace_store_close(s);
    free(p);
}

/* What the event callback saw. */
struct seen {
    struct cp_trace_event_row e[64];
    char name[64][16];
    size_t n;
    size_t stop_after; /* 0: never */
};

static enum cp_status collect(void *ctx, const struct cp_trace_event_row *e, struct cp_diag *d)
{
    struct seen *s = ctx;
    cr_assert_lt(s->n, 64);
    s->e[s->n] = *e;
    snprintf(s->name[s->n], sizeof s->name[0], "%s", e->name ? e->name : "(null)");
    s->n++;
    if (s->stop_after && s->n == s->stop_after)
        return cp_diag_set(d, CP_ERR_INVALID, "stopped by the callback");
    return CP_OK;
}

Test(trace_query, iteration_events_stream_in_iteration_then_time_order)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    struct seen *got = calloc(1, sizeof *got);
    unsigned layers = CP_TRACE_LAYER_BIT(CP_LAYER_RUNTIME) | CP_TRACE_LAYER_BIT(CP_LAYER_DEVICE);
    cr_assert_eq(cp_trace_query_iteration_events(s, 1, layers, NULL, collect, got, &d), CP_OK, "%s",
                 d.msg);
    static const char *const want[] = {
        "execute", "input copy", "conv", "relu", /* iteration 0 */
        "execute", "conv",       "relu",         /* 1 */
        "execute", "conv",       "relu", "dma",  /* 2 */
        "execute", "conv",       "relu", "k7",   /* 3 */
    };
    cr_assert_eq(got->n, sizeof want / sizeof *want);
    for (size_t i = 0; i < got->n; i++)
        cr_assert_str_eq(got->name[i], want[i], "event %zu", i);
    /* the fields of one: input copy of iteration 0 */
    cr_assert_eq(got->e[1].iteration, 0);
    cr_assert_eq(got->e[1].layer, CP_LAYER_RUNTIME);
    cr_assert_eq(got->e[1].kernel_idx, -1);
    cr_assert_eq(got->e[1].start_ns, (int64_t)base(0) + 1);
    cr_assert_eq(got->e[1].dur_ns, 4);
    cr_assert_eq(got->e[1].depth, 1);
    cr_assert_eq(got->e[2].kernel_idx, 0);
    cr_assert_eq(got->e[2].layer, CP_LAYER_DEVICE);

    /* one layer, a set of iterations */
    memset(got, 0, sizeof *got);
    int64_t only[] = {2, 3};
    struct cp_trace_iter_set set = {only, 2};
    cr_assert_eq(cp_trace_query_iteration_events(s, 1, CP_TRACE_LAYER_BIT(CP_LAYER_DEVICE), &set,
                                                 collect, got, &d),
                 CP_OK, "%s", d.msg);
    cr_assert_eq(got->n, 6);
    cr_assert_str_eq(got->name[3], "conv");
    cr_assert_eq(got->e[3].iteration, 3);

    /* a callback that fails stops the stream with its own error */
    memset(got, 0, sizeof *got);
    got->stop_after = 3;
    cr_assert_eq(cp_trace_query_iteration_events(s, 1, layers, NULL, collect, got, &d),
                 CP_ERR_INVALID);
    cr_assert_eq(got->n, 3);
    cr_assert_str_eq(d.msg, "stopped by the callback");
    free(got);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_query, a_set_that_is_not_ascending_is_refused)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t bad[] = {2, 2};
    struct cp_trace_iter_set set = {bad, 2};
    struct cp_trace_kernel_time *t = (void *)1;
    size_t n = 5;
    cr_assert_eq(cp_trace_query_kernel_times(s, 1, &set, SHORT_NS, &t, &n, &d), CP_ERR_INVALID);
    cr_assert_null(t);
    cr_assert_eq(n, 0);
    cr_assert(strstr(d.msg, "t.db") && strstr(d.msg, "ascending"), "%s", d.msg);
    cr_assert(cp_trace_iter_set_has(NULL, 0));
    cr_assert_not(cp_trace_iter_set_has(NULL, -1));
    int64_t ok[] = {1, 4, 9};
    set = (struct cp_trace_iter_set){ok, 3};
    cr_assert(cp_trace_iter_set_has(&set, 4));
    cr_assert_not(cp_trace_iter_set_has(&set, 5));
    int64_t warm[] = {-1, 0};
    set = (struct cp_trace_iter_set){warm, 2};
    cr_assert_not(cp_trace_iter_set_has(&set, -1));
    cr_assert(cp_trace_iter_set_has(&set, 0));
    cp_trace_store_close(s);
    free(p);
}

/* ---- empty, missing, lacking ---------------------------------------------------------- */

Test(trace_query, an_empty_run_reads_as_empty_everywhere)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    const int64_t run = 2;
    struct cp_trace_sample *sm = (void *)1;
    struct cp_trace_point *pt = (void *)1;
    struct cp_trace_counter *c = (void *)1;
    struct cp_trace_kernel_desc *k = (void *)1;
    struct cp_trace_kernel_time *kt = (void *)1;
    struct cp_trace_iter_time *it = (void *)1;
    size_t n = 9;
    cr_assert_eq(cp_trace_query_samples(s, run, &sm, &n, &d), CP_OK, "%s", d.msg);
    cr_assert(sm == NULL && n == 0);
    cr_assert_eq(cp_trace_query_counter_series(s, run, "probe_ns", &pt, &n, &d), CP_OK);
    cr_assert(pt == NULL && n == 0);
    cr_assert_eq(cp_trace_query_run_counters(s, run, "perf.", &c, &n, &d), CP_OK);
    cr_assert(c == NULL && n == 0);
    double v = 0;
    cr_assert_eq(cp_trace_query_counter(s, run, "precision_loss", &v, &d), CP_OK);
    cr_assert(isnan(v));
    cr_assert_eq(cp_trace_query_kernels(s, run, &k, &n, &d), CP_OK);
    cr_assert(k == NULL && n == 0);
    cr_assert_eq(cp_trace_query_kernel_times(s, run, NULL, SHORT_NS, &kt, &n, &d), CP_OK);
    cr_assert(kt == NULL && n == 0);
    cr_assert_eq(cp_trace_query_layer_iterations(s, run, CP_LAYER_DEVICE, NULL, &it, &n, &d),
                 CP_OK);
    cr_assert(it == NULL && n == 0);
    struct seen *got = calloc(1, sizeof *got);
    cr_assert_eq(cp_trace_query_iteration_events(s, run, ~0u, NULL, collect, got, &d), CP_OK);
    cr_assert_eq(got->n, 0);
    free(got);
    cr_assert_not(cp_diag_has_error(&d), "%s", d.msg);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_query, a_run_that_does_not_exist_is_named_in_the_error)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_trace_run r;
    struct cp_trace_sample *sm;
    struct cp_trace_kernel_desc *k;
    struct cp_trace_kernel_time *kt;
    size_t n;
    double v;
    for (int which = 0; which < 6; which++) {
        struct cp_diag d;
        cp_diag_init(&d);
        enum cp_status st =
            which == 0   ? cp_trace_query_run(s, 42, &r, &d)
            : which == 1 ? cp_trace_query_samples(s, 42, &sm, &n, &d)
            : which == 2 ? cp_trace_query_kernels(s, 42, &k, &n, &d)
            : which == 3 ? cp_trace_query_kernel_times(s, 42, NULL, 1, &kt, &n, &d)
            : which == 4 ? cp_trace_query_counter(s, 42, "x", &v, &d)
                         : cp_trace_query_iteration_events(s, 42, ~0u, NULL, collect, NULL, &d);
        cr_assert_eq(st, CP_ERR_INVALID, "reader %d", which);
        cr_assert(strstr(d.msg, "t.db") && strstr(d.msg, "no run 42") && strstr(d.msg, "1..2"),
                  "reader %d: %s", which, d.msg);
    }
    cp_trace_store_close(s);
    free(p);
    /* a store with no run at all */
    p = cp_t_path("none.db");
    s = cp_t_trace_store(p, NULL, NULL);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_query_run(s, -1, &r, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "none.db") && strstr(d.msg, "no runs"), "%s", d.msg);
    cp_trace_store_close(s);
    free(p);
}

Test(trace_query, a_store_lacking_optional_tables_reads_as_having_nothing_in_them)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    cp_trace_store_close(s);
    cr_assert(cp_t_sql_exec(p, "DROP TABLE counters; DROP TABLE kernels; DROP TABLE strings; "
                               "DROP TABLE meta;"),
              "see stderr");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open_ro(p, &s, &d), CP_OK, "%s", d.msg);
    struct cp_trace_point *pt;
    struct cp_trace_counter *c;
    struct cp_trace_kernel_desc *k;
    size_t n;
    double v = 0;
    cr_assert_eq(cp_trace_query_counter_series(s, 1, "probe_ns", &pt, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 0);
    cr_assert_eq(cp_trace_query_run_counters(s, 1, NULL, &c, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 0);
    cr_assert_eq(cp_trace_query_counter(s, 1, "precision_loss", &v, &d), CP_OK, "%s", d.msg);
    cr_assert(isnan(v));
    cr_assert_eq(cp_trace_query_kernels(s, 1, &k, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 0);
    /* events without the strings table: there, but nameless */
    struct seen *got = calloc(1, sizeof *got);
    cr_assert_eq(cp_trace_query_iteration_events(s, 1, CP_TRACE_LAYER_BIT(CP_LAYER_DEVICE), NULL,
                                                 collect, got, &d),
                 CP_OK, "%s", d.msg);
    cr_assert_eq(got->n, 10);
    cr_assert_str_eq(got->name[0], "(null)");
    free(got);
    struct cp_trace_host h;
    cr_assert_eq(cp_trace_query_host(s, &h, &d), CP_OK, "%s", d.msg);
    cr_assert(!h.cpu_model && !h.isa_flags && !h.os && !h.arch && h.cores == 0);
    cp_trace_host_release(&h);
    cp_trace_store_close(s);

    cr_assert(cp_t_sql_exec(p, "DROP TABLE events; DROP TABLE samples;"), "see stderr");
    cr_assert_eq(cp_trace_store_open_ro(p, &s, &d), CP_OK, "%s", d.msg);
    struct cp_trace_sample *sm;
    struct cp_trace_kernel_time *kt;
    struct cp_trace_iter_time *it;
    cr_assert_eq(cp_trace_query_samples(s, 1, &sm, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 0);
    cr_assert_eq(cp_trace_query_kernel_times(s, 1, NULL, SHORT_NS, &kt, &n, &d), CP_OK);
    cr_assert_eq(n, 0);
    cr_assert_eq(cp_trace_query_layer_iterations(s, 1, CP_LAYER_DEVICE, NULL, &it, &n, &d), CP_OK);
    cr_assert_eq(n, 0);
    struct cp_trace_run r;
    cr_assert_eq(cp_trace_query_run(s, 1, &r, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(r.kind, "bench");
    cp_trace_run_release(&r);
    cp_trace_store_close(s);
    free(p);
}

/* ---- the host ----------------------------------------------------------------------- */

Test(trace_query, host_reads_the_meta_and_unknown_as_not_recorded)
{
    char *p;
    struct cp_trace_store *s = fixture("t.db", &p);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_set_host_meta(s, &d), CP_OK, "%s", d.msg);
    struct cp_trace_host h;
    cr_assert_eq(cp_trace_query_host(s, &h, &d), CP_OK, "%s", d.msg);
    cr_assert_gt(h.cores, 0);
    cr_assert_not_null(h.arch);
    cr_assert_not_null(h.os);
    cp_trace_host_release(&h);
    cr_assert_eq(cp_trace_store_set_meta(s, "host_isa_flags", "unknown", &d), CP_OK);
    cr_assert_eq(cp_trace_store_set_meta(s, "host_cores", "many", &d), CP_OK);
    cr_assert_eq(cp_trace_store_set_meta(s, "host_l2_bytes", "1048576", &d), CP_OK);
    cr_assert_eq(cp_trace_query_host(s, &h, &d), CP_OK, "%s", d.msg);
    cr_assert_null(h.isa_flags);
    cr_assert_eq(h.cores, 0);
    cr_assert_eq(h.l2_bytes, 1048576);
    cp_trace_host_release(&h);
    cp_trace_store_close(s);
    free(p);
}
