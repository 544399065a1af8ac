/* cannprof bench: latency statistics of a model, optionally with a trace. */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session.h"
#include "stats/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_BATCH = 1,
    OPT_DURATION,
    OPT_HELP,
    OPT_INPUT,
    OPT_INPUT_SHAPE,
    OPT_ITERATIONS,
    OPT_JSON,
    OPT_SEED,
    OPT_THREADS,
    OPT_TRACE,
    OPT_WARMUP,
};

static const struct cp_opt options[] = {
    {"batch", 'b', CP_OPT_VALUE, OPT_BATCH, "B", "batch size (a dynamic-batch profile of the .om)"},
    {"duration", 'd', CP_OPT_VALUE, OPT_DURATION, "S",
     "measure for S seconds (\"10\", \"2.5s\", \"500ms\") instead of --iterations"},
    {"help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"},
    {"input", 'i', CP_OPT_MULTI, OPT_INPUT, "NAME=FILE", "input from a .pb or .npy file"},
    {"input_shape", 0, CP_OPT_VALUE, OPT_INPUT_SHAPE, "\"name:1,3,224,224;...\"",
     "concrete shapes for dynamic inputs"},
    {"iterations", 'n', CP_OPT_VALUE, OPT_ITERATIONS, "M", "measured iterations (default 100)"},
    {"json", 0, CP_OPT_FLAG, OPT_JSON, NULL, "print the statistics as JSON"},
    {"seed", 0, CP_OPT_VALUE, OPT_SEED, "N", "seed of random inputs (default 0)"},
    {"threads", 't', CP_OPT_VALUE, OPT_THREADS, "T", "threads (default: all cores)"},
    {"trace", 0, CP_OPT_VALUE, OPT_TRACE, "OUT.db",
     "record a full-stack trace into a SQLite trace store"},
    {"warmup", 'w', CP_OPT_VALUE, OPT_WARMUP, "N", "warm-up iterations, not measured (default 10)"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void help(void)
{
    printf(
        "usage: cannprof bench MODEL.om|MODEL.onnx [--warmup N] [--iterations M | --duration S]\n"
        "                      [--batch B] [--threads T] [--trace OUT.db] [--json]\n\n"
        "Measure latency per iteration on a monotonic clock (warm-up excluded) and print\n"
        "mean, median, p90, p99, standard deviation, CV, min, max and throughput.\n"
        "Percentiles interpolate linearly between closest ranks.\n\noptions:\n");
    cp_opts_print_help(stdout, options, N_OPTIONS);
}

/* "10", "2.5s", "500ms", "1m" -> seconds. */
static bool parse_duration(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0) || !isfinite(v))
        return false;
    if (*end == '\0' || strcmp(end, "s") == 0)
        *out = v;
    else if (strcmp(end, "ms") == 0)
        *out = v / 1000.0;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        *out = v * 60.0;
    else
        return false;
    return true;
}

static bool parse_count(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    return cp_parse_i64(s, out) && *out >= lo && *out <= hi;
}

struct bench_opts {
    int64_t warmup, iterations;
    double duration;
    int64_t batch;
};

/* The batch the throughput is counted in: --batch, else dim 0 of the first
 * input. */
static int64_t items_per_run(const struct cp_plan *p, int64_t batch)
{
    if (batch > 0)
        return batch;
    if (cp_plan_n_inputs(p) == 0)
        return 1;
    const struct cp_tensor *t = cp_plan_input(p, 0);
    return t->shape.rank >= 1 && t->shape.dims[0].value > 0 ? t->shape.dims[0].value : 1;
}

static enum cp_status measure(struct cp_plan *p, const struct bench_opts *o,
                              struct cp_trace_recorder *rec, uint64_t **samples_out, size_t *n_out,
                              struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    if (rec)
        cp_trace_push(rec, "warmup");
    for (int64_t i = 0; i < o->warmup && st == CP_OK; i++)
        st = cp_plan_run(p, -1, d);
    if (rec)
        cp_trace_pop(rec);
    if (st != CP_OK)
        return st;
    size_t cap = o->iterations > 0 ? (size_t)o->iterations : 1024;
    uint64_t *ns = cp_calloc(cap, sizeof *ns);
    if (!ns)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for samples");
    size_t n = 0;
    uint64_t deadline = o->duration > 0 ? cp_clock_ns() + (uint64_t)(o->duration * 1e9) : 0;
    if (rec)
        cp_trace_push(rec, "measure");
    for (;;) {
        if (o->iterations > 0 && n == (size_t)o->iterations)
            break;
        if (deadline && n > 0 && cp_clock_ns() >= deadline)
            break;
        if (n == cap) {
            uint64_t *grown = cp_realloc_array(ns, cap * 2, sizeof *ns);
            if (!grown) {
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory for samples");
                break;
            }
            ns = grown;
            cap *= 2;
        }
        if (rec)
            cp_trace_set_iteration(rec, (int32_t)n);
        uint64_t t0 = cp_clock_ns();
        st = cp_plan_run(p, (int32_t)n, d);
        uint64_t t1 = cp_clock_ns();
        if (st != CP_OK)
            break;
        ns[n++] = t1 - t0;
    }
    if (rec) {
        cp_trace_set_iteration(rec, -1);
        cp_trace_pop(rec);
    }
    if (st != CP_OK) {
        free(ns);
        return st;
    }
    *samples_out = ns;
    *n_out = n;
    return CP_OK;
}

static enum cp_status write_trace(struct cp_trace_store *store, struct cp_cli_session *s,
                                  struct cp_trace_recorder *rec, const struct bench_opts *o,
                                  int threads, const uint64_t *ns, size_t n,
                                  const struct cp_mem_report *mem, uint64_t rss,
                                  const char *model_path, struct cp_diag *d)
{
    enum cp_status st;
    const struct cp_om_meta *meta = cp_model_meta(s->model);
    struct cp_buf cfg;
    cp_buf_init(&cfg);
    char id[17] = "";
    if (meta) {
        cp_convert_config_json(&meta->config, &cfg);
        cp_convert_config_id(&meta->config, id);
    }
    struct cp_trace_run_info info = {
        .kind = "bench",
        .model_path = model_path,
        .model_hash = meta && meta->source_hash ? meta->source_hash : "",
        .config_json = cfg.data ? cfg.data : "{}",
        .config_id = id,
        .target = meta && meta->target ? meta->target : "",
        .threads = threads,
        .batch = (int)items_per_run(s->plan, o->batch),
        .warmup = (int)o->warmup,
        .iterations = (int)n,
        .weight_bytes = mem->weight_bytes,
        .arena_bytes = mem->arena_bytes,
        .peak_bytes = mem->peak_bytes,
        .peak_rss_bytes = rss,
    };
    int64_t run = 0;
    if ((st = cp_trace_store_set_host_meta(store, d)) == CP_OK &&
        (st = cp_trace_store_begin_run(store, &info, &run, d)) == CP_OK &&
        (st = cp_trace_store_add_samples(store, run, 0, ns, n, d)) == CP_OK &&
        (st = cp_trace_store_add_kernels(store, run, cp_plan_kernels(s->plan),
                                         cp_plan_n_kernels(s->plan), d)) == CP_OK &&
        (st = cp_trace_store_add_events(store, run, rec, d)) == CP_OK)
        st = cp_trace_store_add_counter(store, run, -1, "peak_rss_bytes", (double)rss,
                                        cp_clock_ns(), d);
    cp_buf_release(&cfg);
    return st;
}

static void print_table(const struct cp_summary *sm, double items_per_s, int64_t batch, int threads,
                        const struct cp_mem_report *mem, uint64_t rss, const char *model)
{
    char w[32], a[32], pk[32], r[32];
    cp_format_bytes(mem->weight_bytes, w);
    cp_format_bytes(mem->arena_bytes, a);
    cp_format_bytes(mem->peak_bytes, pk);
    cp_format_bytes(rss, r);
    printf("model:      %s (batch %lld, %d threads)\n", model, (long long)batch, threads);
    printf("iterations: %zu measured\n", sm->n);
    printf("latency ms: mean %.3f  median %.3f  p90 %.3f  p99 %.3f\n", sm->mean / 1e6,
           sm->median / 1e6, sm->p90 / 1e6, sm->p99 / 1e6);
    printf("            sd %.3f  cv %.2f%%  min %.3f  max %.3f\n", sm->sd / 1e6, sm->cv * 100,
           sm->min / 1e6, sm->max / 1e6);
    printf("throughput: %.2f items/s\n", items_per_s);
    printf("memory:     weights %s, arena %s, peak activations %s, peak RSS %s\n", w, a, pk, r);
}

int cp_cmd_bench(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse("bench", options, N_OPTIONS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("bench", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, OPT_HELP)) {
        help();
        return 0;
    }
    if (args.n_positional != 1) {
        cp_cli_error("bench", "give exactly one MODEL (.om or .onnx)");
        return 2;
    }
    struct bench_opts o = {.warmup = 10, .iterations = 100};
    struct cp_cli_session_opts so = {.model_path = args.positional[0], .buffer_optimize = -1};
    int64_t v;
    const char *val;
    uint64_t seed = 0;
    if ((val = cp_args_get(&args, OPT_WARMUP)) && !parse_count(val, 0, 1000000, &o.warmup)) {
        cp_cli_error("bench", "--warmup takes a whole number from 0 to 1000000");
        return 2;
    }
    if (cp_args_has(&args, OPT_ITERATIONS) && cp_args_has(&args, OPT_DURATION)) {
        cp_cli_error("bench", "give --iterations or --duration, not both");
        return 2;
    }
    if ((val = cp_args_get(&args, OPT_ITERATIONS)) &&
        !parse_count(val, 1, 100000000, &o.iterations)) {
        cp_cli_error("bench", "--iterations takes a whole number from 1 to 100000000");
        return 2;
    }
    if ((val = cp_args_get(&args, OPT_DURATION))) {
        if (!parse_duration(val, &o.duration)) {
            cp_cli_error("bench", "--duration takes seconds: \"10\", \"2.5s\", \"500ms\", \"1m\"");
            return 2;
        }
        o.iterations = 0;
    }
    if ((val = cp_args_get(&args, OPT_THREADS))) {
        if (!parse_count(val, 1, 1024, &v)) {
            cp_cli_error("bench", "--threads takes a whole number from 1 to 1024");
            return 2;
        }
        so.threads = (int)v;
    }
    if ((val = cp_args_get(&args, OPT_BATCH)) && !parse_count(val, 1, 65536, &o.batch)) {
        cp_cli_error("bench", "--batch takes a whole number from 1 to 65536");
        return 2;
    }
    so.batch = o.batch;
    if ((val = cp_args_get(&args, OPT_SEED))) {
        if (!parse_count(val, 0, INT64_MAX, &v)) {
            cp_cli_error("bench", "--seed takes a non-negative whole number");
            return 2;
        }
        seed = (uint64_t)v;
    }
    so.input_shape = cp_args_get(&args, OPT_INPUT_SHAPE);
    const char *trace_path = cp_args_get(&args, OPT_TRACE);
    const char *inputs[CP_MAX_ARGS];
    size_t n_inputs = 0;
    for (size_t i = 0; i < args.n_opts; i++)
        if (args.opts[i].id == OPT_INPUT)
            inputs[n_inputs++] = args.opts[i].value;

    struct cp_trace_recorder *rec = NULL;
    struct cp_trace_store *store = NULL;
    if (trace_path) {
        /* Open the store first: a bad path should not cost a whole run. */
        if (cp_trace_store_open(trace_path, &store, &d) != CP_OK) {
            cp_cli_error("bench", d.msg);
            return cp_status_exit_code(d.status);
        }
        rec = cp_trace_recorder_create(1 << 16);
        if (!rec) {
            cp_cli_error("bench", "out of memory for the trace recorder");
            cp_trace_store_close(store);
            return 3;
        }
        cp_trace_push(rec, "cannprof bench");
    }
    so.trace = rec;
    int rc = 0;
    uint64_t *ns = NULL;
    size_t n = 0;
    struct cp_cli_session s;
    memset(&s, 0, sizeof s);
    if (cp_cli_session_open(&s, &so, &d) != CP_OK ||
        cp_cli_session_set_inputs(&s, inputs, n_inputs, seed, &d) != CP_OK ||
        measure(s.plan, &o, rec, &ns, &n, &d) != CP_OK) {
        cp_cli_error("bench", d.msg);
        rc = cp_status_exit_code(d.status);
        goto out;
    }
    double *x = cp_calloc(n, sizeof *x);
    if (!x) {
        cp_cli_error("bench", "out of memory");
        rc = 3;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = (double)ns[i];
    struct cp_summary sm;
    cp_stats_summary(x, n, &sm, &d);
    free(x);
    int threads = cp_runtime_threads(s.rt);
    int64_t items = items_per_run(s.plan, o.batch);
    double items_per_s = sm.mean > 0 ? (double)items * 1e9 / sm.mean : 0;
    struct cp_mem_report mem;
    cp_plan_memory(s.plan, &mem);
    uint64_t rss = cp_peak_rss_bytes();
    if (rec) {
        cp_trace_pop(rec);
        if (write_trace(store, &s, rec, &o, threads, ns, n, &mem, rss, so.model_path, &d) !=
            CP_OK) {
            cp_cli_error("bench", d.msg);
            rc = cp_status_exit_code(d.status);
            goto out;
        }
    }
    if (cp_args_has(&args, OPT_JSON)) {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_buf_puts(&b, "{\"model\":");
        cp_buf_json_str(&b, so.model_path);
        cp_buf_printf(&b, ",\"batch\":%lld,\"threads\":%d,\"warmup\":%lld,\"iterations\":%zu,",
                      (long long)items, threads, (long long)o.warmup, sm.n);
        cp_buf_printf(&b,
                      "\"latency_ms\":{\"mean\":%.6f,\"median\":%.6f,\"p90\":%.6f,"
                      "\"p99\":%.6f,\"sd\":%.6f,\"cv\":%.6f,\"min\":%.6f,\"max\":%.6f},",
                      sm.mean / 1e6, sm.median / 1e6, sm.p90 / 1e6, sm.p99 / 1e6, sm.sd / 1e6,
                      sm.cv, sm.min / 1e6, sm.max / 1e6);
        cp_buf_printf(&b, "\"throughput_items_per_s\":%.4f,", items_per_s);
        cp_buf_printf(&b,
                      "\"memory\":{\"weight_bytes\":%llu,\"arena_bytes\":%llu,"
                      "\"peak_bytes\":%llu,\"peak_rss_bytes\":%llu}",
                      (unsigned long long)mem.weight_bytes, (unsigned long long)mem.arena_bytes,
                      (unsigned long long)mem.peak_bytes, (unsigned long long)rss);
        if (trace_path) {
            cp_buf_puts(&b, ",\"trace\":");
            cp_buf_json_str(&b, trace_path);
        }
        cp_buf_puts(&b, "}\n");
        fputs(b.data ? b.data : "", stdout);
        cp_buf_release(&b);
    } else {
        print_table(&sm, items_per_s, items, threads, &mem, rss, so.model_path);
        if (trace_path)
            printf("trace:      %s (cannprof export %s --format chrome -o trace.json)\n",
                   trace_path, trace_path);
    }
out:
    free(ns);
    cp_cli_session_close(&s);
    cp_trace_recorder_free(rec);
    cp_trace_store_close(store);
    return rc;
}
