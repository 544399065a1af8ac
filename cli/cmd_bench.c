/* cannprof bench: latency statistics of a model, optionally with a trace;
 * with --vs, an interleaved A/B measurement of two models and its verdict
 * (the measurement itself is bench_ab.c). */
#include "runner/bench_ab.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "rules/calibrate.h"
#include "runner/probe.h"
#include "runner/session.h"
#include "stats/stats.h"
#include "stats/verdict.h"
#include "trace/perf.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_ALPHA = 1,
    OPT_BATCH,
    OPT_DURATION,
    OPT_HELP,
    OPT_INPUT,
    OPT_INPUT_SHAPE,
    OPT_ITERATIONS,
    OPT_JSON,
    OPT_MAX_DURATION,
    OPT_NO_PROBE,
    OPT_SEED,
    OPT_TEST,
    OPT_THREADS,
    OPT_THRESHOLD,
    OPT_TRACE,
    OPT_UNDISTURBED,
    OPT_VS,
    OPT_WARMUP,
};

static const struct cp_opt options[] = {
    {"alpha", 0, CP_OPT_VALUE, OPT_ALPHA, "A",
     "with --vs: significance level, (0, 0.5] (default 0.05)"},
    {"batch", 'b', CP_OPT_VALUE, OPT_BATCH, "B", "batch size (a dynamic-batch profile of the .om)"},
    {"duration", 'd', CP_OPT_VALUE, OPT_DURATION, "S",
     "measure for S seconds (\"10\", \"2.5s\", \"500ms\") instead of --iterations"},
    {"help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"},
    {"input", 'i', CP_OPT_MULTI, OPT_INPUT, "NAME=FILE", "input from a .pb or .npy file"},
    {"input_shape", 0, CP_OPT_VALUE, OPT_INPUT_SHAPE, "\"name:1,3,224,224;...\"",
     "concrete shapes for dynamic inputs"},
    {"iterations", 'n', CP_OPT_VALUE, OPT_ITERATIONS, "M",
     "exactly M measured iterations (default: until 100 undisturbed ones)"},
    {"json", 0, CP_OPT_FLAG, OPT_JSON, NULL, "print the statistics as JSON"},
    {"max-duration", 0, CP_OPT_VALUE, OPT_MAX_DURATION, "S",
     "stop waiting for undisturbed iterations after S seconds (default 10s)"},
    {"no-probe", 0, CP_OPT_FLAG, OPT_NO_PROBE, NULL,
     "no interference probe: exactly --iterations (default 100) iterations"},
    {"seed", 0, CP_OPT_VALUE, OPT_SEED, "N", "seed of random inputs (default 0)"},
    {"statistical_test", 0, CP_OPT_VALUE, OPT_TEST, "T", "the same as --test"},
    {"test", 0, CP_OPT_VALUE, OPT_TEST, "T",
     "with --vs: mann-whitney (default), welch, t-test or bootstrap"},
    {"threads", 't', CP_OPT_VALUE, OPT_THREADS, "T", "threads (default: all cores)"},
    {"threshold", 0, CP_OPT_VALUE, OPT_THRESHOLD, "P",
     "with --vs: smallest change that matters, percent (\"2%\" or \"2\"; default 2%)"},
    {"trace", 0, CP_OPT_VALUE, OPT_TRACE, "OUT.db",
     "record a full-stack trace into a SQLite trace store"},
    {"undisturbed", 0, CP_OPT_VALUE, OPT_UNDISTURBED, "K",
     "measure until K iterations ran undisturbed (default 100)"},
    {"vs", 0, CP_OPT_VALUE, OPT_VS, "B.om",
     "measure MODEL (A) and B interleaved in rounds and give B's verdict against A"},
    {"warmup", 'w', CP_OPT_VALUE, OPT_WARMUP, "N", "warm-up iterations, not measured (default 10)"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void help(void)
{
    printf("usage: cannprof bench MODEL.om|MODEL.onnx [--warmup N]\n"
           "                      [--undisturbed K [--max-duration S] | --iterations M |\n"
           "                       --duration S] [--no-probe]\n"
           "                      [--batch B] [--threads T] [--trace OUT.db] [--json]\n"
           "       cannprof bench A.om --vs B.om [same options] [--test T] [--alpha A]\n"
           "                      [--threshold P]\n\n"
           "Measure latency per iteration on a monotonic clock (warm-up excluded) and print\n"
           "mean, median, p90, p99, standard deviation, CV, min, max and throughput.\n"
           "Percentiles interpolate linearly between closest ranks.\n\n"
           "After every measured iteration a small fixed workload, the interference probe,\n"
           "is timed outside the measurement (docs/validation.md): when it, or a probe\n"
           "within 2 ms of the iteration, takes more than 1.15x its floor, a neighbour was\n"
           "competing for the CPU and the iteration was disturbed. By default bench measures\n"
           "until 100 iterations ran undisturbed (at least 100 in all, and no longer than\n"
           "--max-duration once 100 are measured); --iterations M measures exactly M,\n"
           "--duration S for S seconds, --no-probe turns the probe off. The statistics cover\n"
           "every iteration; the undisturbed ones are summarised apart, and 'cannprof\n"
           "validate' compares those. --trace stores the probe as the per-iteration counter\n"
           "probe_ns. The lowest floor seen is kept beside the calibration cache\n"
           "($XDG_CACHE_HOME/cannprof).\n\n"
           "With --vs B.om, A (MODEL) and B run in one process, interleaved in rounds whose\n"
           "order alternates (A B, B A, A B, ...) so that machine drift hits both alike;\n"
           "--iterations and --warmup count rounds, each running A and B once. Both take\n"
           "the same inputs (same names, dtypes and shapes, else exit 2). The verdict on\n"
           "B against A (lower latency is better): improved or regressed when the change is\n"
           "significant at --alpha and at least --threshold; unchanged when it is smaller\n"
           "than the threshold; inconclusive when it is not significant but could matter\n"
           "(the rounds that would settle it are printed). --trace stores two runs of kind\n"
           "\"bench-ab\", A then B, with the round as iteration (docs/trace-format.md).\n"
           "bench measures and exits 0 whatever the verdict; 'cannprof validate' gates.\n\n"
           "exit: 0 measured, 2 bad usage or input, 3 environment failure.\n\noptions:\n");
    cp_opts_print_help(stdout, options, N_OPTIONS);
}

static bool parse_count(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    return cp_parse_i64(s, out) && *out >= lo && *out <= hi;
}

/* How long to measure: exactly `iterations` iterations, or for `duration`
 * seconds, or (undisturbed > 0) until that many iterations ran undisturbed
 * and at least that many in all, giving up on the undisturbed count after
 * max_duration seconds. */
struct bench_opts {
    int64_t warmup, iterations;
    double duration;
    int64_t undisturbed;
    double max_duration;
    bool probe; /* run the interference probe after each iteration */
    int64_t batch;
};

/* The clock reading `s` seconds from now. Saturates: converting a double
 * beyond uint64_t's range is undefined, and a duration of centuries means
 * no deadline in practice. */
static uint64_t deadline_after(double s)
{
    double ns = s * 1e9;
    uint64_t now = cp_clock_ns();
    return ns < 9e18 ? now + (uint64_t)ns : UINT64_MAX;
}

/* What one measured run produced. */
struct measured {
    uint64_t *ns;       /* n latencies */
    uint64_t *probe_ns; /* n probe durations; NULL without the probe */
    size_t n;
};

static void measured_release(struct measured *m)
{
    free(m->ns);
    free(m->probe_ns);
    memset(m, 0, sizeof *m);
}

/* Room for one more sample. */
static enum cp_status grow(struct measured *m, size_t *cap, bool probe, struct cp_diag *d)
{
    if (m->n < *cap)
        return CP_OK;
    size_t ncap = *cap ? *cap * 2 : 1024;
    uint64_t *ns = cp_realloc_array(m->ns, ncap, sizeof *ns);
    if (ns)
        m->ns = ns;
    uint64_t *pv = probe ? cp_realloc_array(m->probe_ns, ncap, sizeof *pv) : NULL;
    if (pv)
        m->probe_ns = pv;
    if (!ns || (probe && !pv))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for samples");
    *cap = ncap;
    return CP_OK;
}

/* Has the run measured enough? `good` counts the undisturbed iterations
 * so far; `deadline` is when --duration or --max-duration runs out. */
static bool enough(const struct bench_opts *o, size_t n, size_t good, uint64_t deadline)
{
    if (o->iterations > 0)
        return n >= (size_t)o->iterations;
    if (o->duration > 0)
        return n > 0 && cp_clock_ns() >= deadline;
    if (n < (size_t)o->undisturbed)
        return false;
    return good >= (size_t)o->undisturbed || cp_clock_ns() >= deadline;
}

/* `perf` (may be NULL) counts the measured loop only, into *pr. `probe`
 * (may be NULL) runs after each iteration; floor_hint is the lowest probe
 * floor seen on this machine (0: none), which the undisturbed count starts
 * from. OUT: *out. */
static enum cp_status measure(struct cp_plan *p, const struct bench_opts *o,
                              struct cp_trace_recorder *rec, struct cp_perf *perf,
                              struct cp_perf_reading *pr, struct cp_probe *probe,
                              uint64_t floor_hint, struct measured *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    enum cp_status st = CP_OK;
    if (rec)
        cp_trace_push(rec, "warmup");
    uint64_t w0 = cp_clock_ns();
    for (int64_t i = 0; i < o->warmup && st == CP_OK; i++)
        st = cp_plan_run(p, -1, d);
    /* How long an iteration takes, for the probe window: the warm-up's
     * mean, else the first measured iteration. */
    double typical = o->warmup > 0 ? (double)(cp_clock_ns() - w0) / (double)o->warmup : 0;
    if (rec)
        cp_trace_pop(rec);
    if (st != CP_OK)
        return st;
    size_t cap = 0, good = 0;
    uint64_t floor = floor_hint;
    bool perf_broken = false; /* a pause or resume failed: the counts are partial */
    struct measured m = {0};
    if (rec)
        cp_trace_push(rec, "measure");
    /* Counters are optional: a failed ioctl leaves the reading invalid and
     * the features built on it absent. */
    if (perf)
        cp_perf_start(perf, NULL);
    uint64_t deadline = deadline_after(o->duration > 0 ? o->duration : o->max_duration);
    while (!enough(o, m.n, good, deadline)) {
        if ((st = grow(&m, &cap, probe != NULL, d)) != CP_OK)
            break;
        if (rec)
            cp_trace_set_iteration(rec, (int32_t)m.n);
        uint64_t t0 = cp_clock_ns();
        st = cp_plan_run(p, (int32_t)m.n, d);
        uint64_t t1 = cp_clock_ns();
        if (st != CP_OK)
            break;
        m.ns[m.n] = t1 - t0;
        if (typical <= 0)
            typical = (double)(t1 - t0);
        size_t n1 = m.n + 1;
        if (probe) {
            /* The counters describe the model: not the probe's work. */
            bool counting = perf && !perf_broken && cp_perf_has_any(perf);
            if (counting && cp_perf_pause(perf, NULL) != CP_OK)
                perf_broken = true;
            uint64_t v = cp_probe_run(probe);
            if (counting && !perf_broken && cp_perf_resume(perf, NULL) != CP_OK)
                perf_broken = true;
            m.probe_ns[m.n] = v;
            bool lower = floor == 0 || v < floor;
            if (lower)
                floor = v;
            /* Recounting is O(n): do it when it can end the run. */
            if (o->undisturbed > 0 && n1 >= (size_t)o->undisturbed &&
                (lower || n1 % 16 == 0 || n1 == (size_t)o->undisturbed))
                good = cp_probe_mark(m.probe_ns, n1, floor, cp_probe_window(typical), NULL);
        } else
            good = n1;
        m.n = n1;
    }
    if (perf) {
        cp_perf_stop(perf, pr, NULL);
        if (perf_broken)
            memset(pr, 0, sizeof *pr); /* partial counts are no counts */
    }
    if (rec) {
        cp_trace_set_iteration(rec, -1);
        cp_trace_pop(rec);
    }
    if (st != CP_OK) {
        measured_release(&m);
        return st;
    }
    *out = m;
    return CP_OK;
}

/* The file that keeps the lowest probe floor seen on this machine for this
 * many threads, beside the calibration cache; its folder is created when
 * `create`. False when there is no usable cache folder. */
static bool floor_file(int threads, bool create, char *out, size_t n)
{
    struct cp_diag d;
    cp_diag_init(&d);
    char dir[1024];
    if (cp_calibrate_cache_dir(NULL, dir, sizeof dir, &d) != CP_OK ||
        (create && cp_calibrate_cache_mkdir(dir, &d) != CP_OK))
        return false;
    struct cp_machine id;
    cp_machine_detect(&id);
    int w = snprintf(out, n, "%s/probe-floor-%s-t%d", dir, id.cache_key, threads);
    return w > 0 && (size_t)w < n;
}

/* The probe's figures for one run: its own floor, the reference it was
 * judged against (the lower of that and the best floor seen), and how many
 * iterations ran undisturbed. */
struct probe_summary {
    uint64_t floor, reference;
    size_t undisturbed;
    struct cp_summary sm; /* of the undisturbed iterations' latency */
};

static void summarise_probe(const struct measured *m, uint64_t hint, struct probe_summary *ps)
{
    memset(ps, 0, sizeof *ps);
    ps->floor = cp_probe_floor(m->probe_ns, m->n);
    ps->reference = hint && hint < ps->floor ? hint : ps->floor;
    double *x = cp_calloc(m->n ? m->n : 1, sizeof *x);
    bool *keep = cp_calloc(m->n ? m->n : 1, sizeof *keep);
    if (!x || !keep || !m->n) {
        free(x);
        free(keep);
        return;
    }
    cp_probe_mark_run(m->probe_ns, m->ns, m->n, ps->reference, keep);
    for (size_t i = 0; i < m->n; i++)
        if (keep[i])
            x[ps->undisturbed++] = (double)m->ns[i];
    free(keep);
    struct cp_diag d;
    cp_diag_init(&d);
    if (ps->undisturbed > 0)
        cp_stats_summary(x, ps->undisturbed, &ps->sm, &d);
    free(x);
}

/* Everything the command line says, parsed. */
struct bench_cli {
    struct bench_opts o;
    struct cp_session_opts so;
    uint64_t seed;
    const char *inputs[CP_MAX_ARGS];
    size_t n_inputs;
    const char *trace_path;
    bool json;
    const char *vs; /* B's path with --vs, else NULL */
    struct cp_verdict_opts vo;
};

/* Store one measured run of session s (its kernels, the events of `rec`,
 * the samples ns[0..n-1] as iterations 0..n-1). OUT: *run_id. */
/* Open the trace store and a recorder for each of n sessions, each with the
 * outermost range "cannprof bench" open. */
static enum cp_status open_trace(const char *path, struct cp_trace_store **store,
                                 struct cp_trace_recorder **recs, size_t n, struct cp_diag *d)
{
    /* Open the store first: a bad path should not cost a whole run. */
    enum cp_status st = cp_trace_store_open(path, store, d);
    if (st != CP_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        recs[i] = cp_trace_recorder_create(1 << 16);
        if (!recs[i] || cp_trace_push(recs[i], "cannprof bench") != CP_OK)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for the trace recorder");
    }
    return CP_OK;
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

static void json_latency(struct cp_buf *b, const struct cp_summary *sm)
{
    cp_buf_printf(b,
                  "\"latency_ms\":{\"mean\":%.6f,\"median\":%.6f,\"p90\":%.6f,"
                  "\"p99\":%.6f,\"sd\":%.6f,\"cv\":%.6f,\"min\":%.6f,\"max\":%.6f}",
                  sm->mean / 1e6, sm->median / 1e6, sm->p90 / 1e6, sm->p99 / 1e6, sm->sd / 1e6,
                  sm->cv, sm->min / 1e6, sm->max / 1e6);
}

/* A JSON number, or null when v is not finite (JSON has no NaN). */
static void json_val(struct cp_buf *b, double v)
{
    if (isfinite(v))
        cp_buf_printf(b, "%.10g", v);
    else
        cp_buf_puts(b, "null");
}

static void json_num(struct cp_buf *b, const char *key, double v)
{
    cp_buf_printf(b, "\"%s\":", key);
    json_val(b, v);
}

static void print_probe(const struct probe_summary *ps, size_t n)
{
    printf("probe:      floor %.2f us", (double)ps->floor / 1e3);
    if (ps->reference < ps->floor)
        printf(" (lowest seen on this machine %.2f us)", (double)ps->reference / 1e3);
    printf("; %zu of %zu iterations undisturbed\n", ps->undisturbed, n);
    if (ps->undisturbed > 0)
        printf("undisturbed latency ms: median %.3f  p99 %.3f  mean %.3f\n", ps->sm.median / 1e6,
               ps->sm.p99 / 1e6, ps->sm.mean / 1e6);
    else
        printf("undisturbed latency: none (the machine was busy throughout; measure again, "
               "or longer with --max-duration)\n");
}

static void json_probe(struct cp_buf *b, const struct probe_summary *ps)
{
    cp_buf_printf(b,
                  ",\"probe\":{\"floor_ns\":%llu,\"reference_ns\":%llu,\"tolerance\":%.2f,"
                  "\"undisturbed\":%zu",
                  (unsigned long long)ps->floor, (unsigned long long)ps->reference,
                  CP_PROBE_TOLERANCE, ps->undisturbed);
    if (ps->undisturbed > 0) {
        cp_buf_putc(b, ',');
        json_latency(b, &ps->sm);
    }
    cp_buf_putc(b, '}');
}

static int bench_one(const struct bench_cli *c)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_recorder *rec = NULL;
    struct cp_trace_store *store = NULL;
    int rc = 0;
    struct measured ms = {0};
    struct cp_session s;
    memset(&s, 0, sizeof s);
    struct cp_session_opts so = c->so;
    struct cp_perf *perf = NULL;
    struct cp_probe *probe = NULL;
    struct cp_perf_reading pr;
    memset(&pr, 0, sizeof pr);
    /* perf counters before the session: they are inherited only by the
     * threads created after them (the runtime's OpenMP workers). */
    if (c->trace_path && (open_trace(c->trace_path, &store, &rec, 1, &d) != CP_OK ||
                          cp_perf_open(&perf, &d) != CP_OK)) {
        cp_cli_error("bench", d.msg);
        rc = cp_status_exit_code(d.status);
        goto out;
    }
    so.trace = rec;
    if (cp_session_open(&s, &so, &d) != CP_OK ||
        cp_session_set_inputs(&s, c->inputs, c->n_inputs, c->seed, &d) != CP_OK) {
        cp_cli_error("bench", d.msg);
        rc = cp_status_exit_code(d.status);
        goto out;
    }
    int threads = cp_runtime_threads(s.rt);
    char floor_path[1200];
    bool have_floor_path = c->o.probe && floor_file(threads, false, floor_path, sizeof floor_path);
    uint64_t hint = have_floor_path ? cp_probe_floor_load(floor_path) : 0;
    if ((c->o.probe && cp_probe_create(threads, &probe, &d) != CP_OK) ||
        measure(s.plan, &c->o, rec, perf, &pr, probe, hint, &ms, &d) != CP_OK) {
        cp_cli_error("bench", d.msg);
        rc = cp_status_exit_code(d.status);
        goto out;
    }
    double *x = cp_calloc(ms.n, sizeof *x);
    if (!x) {
        cp_cli_error("bench", "out of memory");
        rc = 3;
        goto out;
    }
    for (size_t i = 0; i < ms.n; i++)
        x[i] = (double)ms.ns[i];
    struct cp_summary sm;
    cp_stats_summary(x, ms.n, &sm, &d);
    free(x);
    struct probe_summary ps;
    if (probe) {
        summarise_probe(&ms, hint, &ps);
        /* Remember the floor for the runs to come: a lower one, or the
         * same again (which keeps it from expiring). A cache that cannot be
         * written costs only that. */
        if (ps.floor > 0 && (hint == 0 || cp_probe_undisturbed(ps.floor, hint)) &&
            floor_file(threads, true, floor_path, sizeof floor_path)) {
            struct cp_diag ignored;
            cp_diag_init(&ignored);
            (void)cp_probe_floor_save(floor_path, ps.reference, &ignored);
        }
    }
    int64_t items = cp_session_items_per_run(s.plan, c->o.batch);
    double items_per_s = sm.mean > 0 ? (double)items * 1e9 / sm.mean : 0;
    struct cp_mem_report mem;
    cp_plan_memory(s.plan, &mem);
    uint64_t rss = cp_peak_rss_bytes();
    if (rec) {
        int64_t run;
        cp_trace_pop(rec);
        if (cp_session_store_run(&s, store, "bench", so.model_path, rec, c->o.batch, c->o.warmup,
                                 ms.ns, ms.n, rss, &run, &d) != CP_OK ||
            cp_perf_store(store, run, perf, &pr, &d) != CP_OK ||
            (probe && cp_probe_store(store, run, ms.probe_ns, ms.n, &d) != CP_OK)) {
            cp_cli_error("bench", d.msg);
            rc = cp_status_exit_code(d.status);
            goto out;
        }
    }
    if (c->json) {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_buf_puts(&b, "{\"model\":");
        cp_buf_json_str(&b, so.model_path);
        cp_buf_printf(&b, ",\"batch\":%lld,\"threads\":%d,\"warmup\":%lld,\"iterations\":%zu,",
                      (long long)items, threads, (long long)c->o.warmup, sm.n);
        json_latency(&b, &sm);
        cp_buf_printf(&b, ",\"throughput_items_per_s\":%.4f,", items_per_s);
        cp_buf_printf(&b,
                      "\"memory\":{\"weight_bytes\":%llu,\"arena_bytes\":%llu,"
                      "\"peak_bytes\":%llu,\"peak_rss_bytes\":%llu}",
                      (unsigned long long)mem.weight_bytes, (unsigned long long)mem.arena_bytes,
                      (unsigned long long)mem.peak_bytes, (unsigned long long)rss);
        if (probe)
            json_probe(&b, &ps);
        if (c->trace_path) {
            cp_buf_puts(&b, ",\"trace\":");
            cp_buf_json_str(&b, c->trace_path);
        }
        cp_buf_puts(&b, "}\n");
        fputs(b.data ? b.data : "", stdout);
        cp_buf_release(&b);
    } else {
        print_table(&sm, items_per_s, items, threads, &mem, rss, so.model_path);
        if (probe)
            print_probe(&ps, ms.n);
        if (c->trace_path)
            printf("trace:      %s (cannprof export %s --format chrome -o trace.json)\n",
                   c->trace_path, c->trace_path);
    }
out:
    measured_release(&ms);
    cp_probe_free(probe);
    cp_session_close(&s);
    cp_perf_close(perf);
    cp_trace_recorder_free(rec);
    cp_trace_store_close(store);
    return rc;
}

/* ---- --vs: the interleaved A/B measurement ------------------------------ */

/* Make one set of inputs (from A's plan) and feed it to both plans, B's
 * matched by name, so that A and B see the very same data. */
static enum cp_status feed_both(struct cp_session *a, struct cp_session *b,
                                const struct bench_cli *c, struct cp_diag *d)
{
    struct cp_session_inputs in;
    enum cp_status st = cp_session_make_inputs(a, c->inputs, c->n_inputs, c->seed, &in, d);
    for (size_t i = 0; i < in.n && st == CP_OK; i++) {
        long j = cp_bench_ab_find_input(b->plan, in.t[i].name);
        st = cp_plan_set_input(a->plan, i, &in.t[i], d);
        if (st == CP_OK)
            st = j < 0 ? cp_diag_set(d, CP_ERR_INVALID, "input '%s': B does not take it",
                                     in.t[i].name)
                       : cp_plan_set_input(b->plan, (size_t)j, &in.t[i], d);
        if (st != CP_OK && in.file[i] && !strstr(d->msg, in.file[i])) {
            /* The plan knows the input, not the file it came from. */
            struct cp_buf m;
            cp_buf_init(&m);
            cp_buf_printf(&m, "%s: %s", in.file[i], d->msg);
            if (m.data)
                snprintf(d->msg, sizeof d->msg, "%.*s", (int)(sizeof d->msg - 1), m.data);
            cp_buf_release(&m);
        }
    }
    cp_session_inputs_release(&in);
    return st;
}

/* "median" or "mean": the statistic a comparison compared. */
static const char *compared_statistic(const struct cp_comparison *cmp,
                                      const struct cp_verdict_opts *vo)
{
    if (vo->quantile > 0)
        return "quantile";
    return cmp->test == CP_TEST_WELCH || cmp->test == CP_TEST_STUDENT ? "mean" : "median";
}

/* What printing an A/B result needs. */
struct ab_report {
    const struct bench_cli *c;
    const char *a_path, *b_path;
    const char *a_config, *b_config; /* config ids, "" when unknown */
    struct cp_summary sa, sb;
    struct cp_comparison cmp;
    size_t rounds;
    int64_t batch;
    int threads;
    int64_t run_a, run_b; /* trace run ids, 0 without --trace */
};

static void print_ab_json(const struct ab_report *r)
{
    const struct cp_comparison *m = &r->cmp;
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "{\"a\":{\"model\":");
    cp_buf_json_str(&b, r->a_path);
    cp_buf_puts(&b, ",\"config_id\":");
    cp_buf_json_str(&b, r->a_config);
    cp_buf_putc(&b, ',');
    json_latency(&b, &r->sa);
    cp_buf_puts(&b, "},\"b\":{\"model\":");
    cp_buf_json_str(&b, r->b_path);
    cp_buf_puts(&b, ",\"config_id\":");
    cp_buf_json_str(&b, r->b_config);
    cp_buf_putc(&b, ',');
    json_latency(&b, &r->sb);
    cp_buf_printf(&b,
                  "},\"rounds\":%zu,\"warmup\":%lld,\"order\":\"alternating\",\"batch\":%lld,"
                  "\"threads\":%d,",
                  r->rounds, (long long)r->c->o.warmup, (long long)r->batch, r->threads);
    /* The comparison reads like one metric of `cannprof validate --json`. */
    json_num(&b, "alpha", r->c->vo.alpha);
    cp_buf_putc(&b, ',');
    json_num(&b, "threshold_pct", r->c->vo.threshold_pct);
    cp_buf_putc(&b, ',');
    json_num(&b, "confidence", r->c->vo.boot.level);
    cp_buf_puts(&b, ",\"comparison\":{\"metric\":\"latency\",\"unit\":\"ms\",\"statistic\":");
    cp_buf_json_str(&b, compared_statistic(m, &r->c->vo));
    cp_buf_putc(&b, ',');
    json_num(&b, "before", m->before / 1e6);
    cp_buf_putc(&b, ',');
    json_num(&b, "after", m->after / 1e6);
    cp_buf_putc(&b, ',');
    json_num(&b, "delta_pct", m->delta_pct);
    cp_buf_puts(&b, ",\"ci_pct\":[");
    json_val(&b, m->ci_lo_pct);
    cp_buf_putc(&b, ',');
    json_val(&b, m->ci_hi_pct);
    cp_buf_puts(&b, "],");
    json_num(&b, "p", m->p);
    cp_buf_printf(&b, ",\"n_before\":%zu,\"n_after\":%zu,\"test\":", m->n_before, m->n_after);
    cp_buf_json_str(&b, cp_stat_test_name(m->test));
    cp_buf_putc(&b, ',');
    json_num(&b, "mde_pct", m->mde_pct);
    if (m->verdict == CP_VERDICT_INCONCLUSIVE && m->n_needed > 0)
        cp_buf_printf(&b, ",\"samples_needed\":%zu", m->n_needed);
    else
        cp_buf_puts(&b, ",\"samples_needed\":null");
    cp_buf_puts(&b, ",\"verdict\":");
    cp_buf_json_str(&b, cp_verdict_name(m->verdict));
    cp_buf_puts(&b, "},\"verdict\":");
    cp_buf_json_str(&b, cp_verdict_name(m->verdict));
    if (r->c->trace_path) {
        cp_buf_puts(&b, ",\"trace\":");
        cp_buf_json_str(&b, r->c->trace_path);
        cp_buf_printf(&b, ",\"trace_runs\":{\"a\":%lld,\"b\":%lld}", (long long)r->run_a,
                      (long long)r->run_b);
    }
    cp_buf_puts(&b, "}\n");
    fputs(b.data ? b.data : "", stdout);
    cp_buf_release(&b);
}

static void print_ab_table(const struct ab_report *r)
{
    const struct cp_comparison *m = &r->cmp;
    const struct cp_verdict_opts *vo = &r->c->vo;
    printf("A (before): %s\n", r->a_path);
    printf("B (after):  %s\n", r->b_path);
    printf("rounds:     %zu interleaved (A B, B A, ...), warm-up %lld; batch %lld, %d threads\n\n",
           r->rounds, (long long)r->c->o.warmup, (long long)r->batch, r->threads);
    printf("latency ms      median        mean         p99\n");
    printf("A          %11.3f %11.3f %11.3f\n", r->sa.median / 1e6, r->sa.mean / 1e6,
           r->sa.p99 / 1e6);
    printf("B          %11.3f %11.3f %11.3f\n\n", r->sb.median / 1e6, r->sb.mean / 1e6,
           r->sb.p99 / 1e6);
    printf("change:     %s %+.2f%% (%.0f%% CI %+.2f%% to %+.2f%%), p = %.3g (%s)\n",
           compared_statistic(m, vo), m->delta_pct, vo->boot.level * 100, m->ci_lo_pct,
           m->ci_hi_pct, m->p, cp_stat_test_name(m->test));
    printf("verdict:    %s (alpha %g, threshold %g%%", cp_verdict_name(m->verdict), vo->alpha,
           vo->threshold_pct);
    if (isfinite(m->mde_pct))
        printf("; these rounds detect changes of %.2f%% and more", m->mde_pct);
    printf(")\n");
    if (m->verdict == CP_VERDICT_INCONCLUSIVE && m->n_needed > 0)
        printf("            about %zu rounds would settle it (--iterations %zu)\n", m->n_needed,
               m->n_needed);
    if (r->c->trace_path)
        printf("trace:      %s (run %lld = A, run %lld = B)\n", r->c->trace_path,
               (long long)r->run_a, (long long)r->run_b);
}

/* Store both runs (A first, then B) and the meta keys that pair them. */
static enum cp_status write_ab_trace(struct cp_trace_store *store, struct cp_session *sa,
                                     struct cp_session *sb, struct cp_trace_recorder **rec,
                                     const struct bench_cli *c,
                                     const struct cp_bench_ab_result *res, int64_t *run_a,
                                     int64_t *run_b, struct cp_diag *d)
{
    uint64_t rss = cp_peak_rss_bytes();
    char ids[2][32];
    enum cp_status st;
    cp_trace_pop(rec[0]);
    cp_trace_pop(rec[1]);
    if ((st = cp_session_store_run(sa, store, "bench-ab", c->so.model_path, rec[0], c->o.batch,
                                   c->o.warmup, res->a_ns, res->n, rss, run_a, d)) != CP_OK ||
        (st = cp_session_store_run(sb, store, "bench-ab", c->vs, rec[1], c->o.batch, c->o.warmup,
                                   res->b_ns, res->n, rss, run_b, d)) != CP_OK)
        return st;
    snprintf(ids[0], sizeof ids[0], "%lld", (long long)*run_a);
    snprintf(ids[1], sizeof ids[1], "%lld", (long long)*run_b);
    if ((st = cp_trace_store_set_meta(store, "ab.before_run", ids[0], d)) == CP_OK &&
        (st = cp_trace_store_set_meta(store, "ab.after_run", ids[1], d)) == CP_OK)
        st = cp_trace_store_set_meta(store, "ab.order", "alternating", d);
    return st;
}

static void config_id_of(const struct cp_session *s, char id[17])
{
    const struct cp_om_meta *meta = cp_model_meta(s->model);
    id[0] = '\0';
    if (meta && !s->from_onnx)
        cp_convert_config_id(&meta->config, id);
}

static int bench_ab(const struct bench_cli *c)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_recorder *rec[2] = {NULL, NULL};
    struct cp_trace_store *store = NULL;
    struct cp_session sa, sb;
    memset(&sa, 0, sizeof sa);
    memset(&sb, 0, sizeof sb);
    struct cp_bench_ab_result res = {0};
    struct ab_report r = {.c = c, .a_path = c->so.model_path, .b_path = c->vs};
    char a_id[17], b_id[17];
    int rc = 0;
    if (c->trace_path && open_trace(c->trace_path, &store, rec, 2, &d) != CP_OK)
        goto fail;
    struct cp_session_opts so = c->so;
    so.trace = rec[0];
    if (cp_session_open(&sa, &so, &d) != CP_OK)
        goto fail;
    so.model_path = c->vs;
    so.trace = rec[1];
    if (cp_session_open(&sb, &so, &d) != CP_OK ||
        cp_bench_ab_check_inputs(sa.plan, sb.plan, c->so.model_path, c->vs, &d) != CP_OK ||
        feed_both(&sa, &sb, c, &d) != CP_OK)
        goto fail;
    struct cp_bench_ab_opts mo = {
        .warmup = c->o.warmup,
        .rounds = c->o.iterations,
        .duration_s = c->o.duration,
        .trace_a = rec[0],
        .trace_b = rec[1],
    };
    if (cp_bench_ab_measure(sa.plan, sb.plan, &mo, &res, &d) != CP_OK ||
        cp_bench_ab_summarize(&res, &r.sa, &r.sb, &d) != CP_OK ||
        cp_bench_ab_compare(&res, &c->vo, &r.cmp, &d) != CP_OK)
        goto fail;
    if (store && write_ab_trace(store, &sa, &sb, rec, c, &res, &r.run_a, &r.run_b, &d) != CP_OK)
        goto fail;
    config_id_of(&sa, a_id);
    config_id_of(&sb, b_id);
    r.a_config = a_id;
    r.b_config = b_id;
    r.rounds = res.n;
    r.batch = cp_session_items_per_run(sa.plan, c->o.batch);
    r.threads = cp_runtime_threads(sa.rt);
    if (c->json)
        print_ab_json(&r);
    else
        print_ab_table(&r);
    goto out;
fail:
    cp_cli_error("bench", d.msg);
    rc = cp_status_exit_code(d.status);
out:
    cp_bench_ab_result_release(&res);
    cp_session_close(&sb);
    cp_session_close(&sa);
    cp_trace_recorder_free(rec[0]);
    cp_trace_recorder_free(rec[1]);
    cp_trace_store_close(store);
    return rc;
}

/* ---- the command line --------------------------------------------------- */

/* The name option `id` was given under (--test or --statistical_test). */
static const char *given_name(const struct cp_args *args, int id)
{
    const char *name = "";
    for (size_t i = 0; i < args->n_opts; i++)
        if (args->opts[i].id == id)
            name = args->opts[i].name;
    return name;
}

/* Parse everything into *c; on bad usage print the error and return false. */
static bool parse_cli(const struct cp_args *args, struct bench_cli *c)
{
    memset(c, 0, sizeof *c);
    c->o.warmup = 10;
    c->o.iterations = 0;
    c->o.undisturbed = 100;
    c->o.max_duration = 10.0;
    c->o.probe = !cp_args_has(args, OPT_NO_PROBE);
    c->so.model_path = args->positional[0];
    c->so.buffer_optimize = -1;
    cp_verdict_opts_init(&c->vo);
    int64_t v;
    const char *val;
    if ((val = cp_args_get(args, OPT_WARMUP)) && !parse_count(val, 0, 1000000, &c->o.warmup)) {
        cp_cli_error("bench", "--warmup takes a whole number from 0 to 1000000");
        return false;
    }
    int modes = cp_args_has(args, OPT_ITERATIONS) + cp_args_has(args, OPT_DURATION) +
                cp_args_has(args, OPT_UNDISTURBED);
    if (modes > 1) {
        cp_cli_error("bench", "give one of --iterations, --duration and --undisturbed");
        return false;
    }
    c->vs = cp_args_get(args, OPT_VS);
    static const int single_opts[] = {OPT_UNDISTURBED, OPT_MAX_DURATION, OPT_NO_PROBE};
    for (size_t i = 0; i < sizeof single_opts / sizeof *single_opts && c->vs; i++) {
        for (size_t k = 0; k < args->n_opts; k++) {
            if (args->opts[k].id != single_opts[i])
                continue;
            char msg[160];
            snprintf(msg, sizeof msg,
                     "--%s is about one model's run; with --vs A and B are interleaved, which "
                     "needs no probe",
                     args->opts[k].name);
            cp_cli_error("bench", msg);
            return false;
        }
    }
    if (c->vs || !c->o.probe) { /* exactly 100 iterations (rounds) unless told */
        c->o.iterations = 100;
        c->o.undisturbed = 0;
    }
    if (!c->o.probe && cp_args_has(args, OPT_UNDISTURBED)) {
        cp_cli_error("bench", "--undisturbed needs the probe: drop --no-probe");
        return false;
    }
    if ((val = cp_args_get(args, OPT_UNDISTURBED)) &&
        !parse_count(val, 1, 100000000, &c->o.undisturbed)) {
        cp_cli_error("bench", "--undisturbed takes a whole number from 1 to 100000000");
        return false;
    }
    if ((val = cp_args_get(args, OPT_MAX_DURATION))) {
        if (!cp_parse_duration(val, &c->o.max_duration)) {
            cp_cli_error("bench", "--max-duration takes seconds: \"10\", \"2.5s\", \"1m\"");
            return false;
        }
        if (cp_args_has(args, OPT_ITERATIONS) || cp_args_has(args, OPT_DURATION) || !c->o.probe) {
            cp_cli_error("bench", "--max-duration bounds the wait for undisturbed iterations: "
                                  "it goes without --iterations, --duration and --no-probe");
            return false;
        }
    }
    int64_t min_iter = c->vs ? 2 : 1;
    if ((val = cp_args_get(args, OPT_ITERATIONS)))
        c->o.undisturbed = 0;
    if (val && !parse_count(val, min_iter, 100000000, &c->o.iterations)) {
        cp_cli_error("bench", c->vs ? "--iterations takes a whole number of rounds from 2 (a "
                                      "verdict needs two samples a side) to 100000000"
                                    : "--iterations takes a whole number from 1 to 100000000");
        return false;
    }
    if ((val = cp_args_get(args, OPT_DURATION))) {
        if (!cp_parse_duration(val, &c->o.duration)) {
            cp_cli_error("bench", "--duration takes seconds: \"10\", \"2.5s\", \"500ms\", \"1m\"");
            return false;
        }
        c->o.iterations = 0;
        c->o.undisturbed = 0;
    }
    if ((val = cp_args_get(args, OPT_THREADS))) {
        if (!parse_count(val, 1, 1024, &v)) {
            cp_cli_error("bench", "--threads takes a whole number from 1 to 1024");
            return false;
        }
        c->so.threads = (int)v;
    }
    if ((val = cp_args_get(args, OPT_BATCH)) && !parse_count(val, 1, 65536, &c->o.batch)) {
        cp_cli_error("bench", "--batch takes a whole number from 1 to 65536");
        return false;
    }
    c->so.batch = c->o.batch;
    if ((val = cp_args_get(args, OPT_SEED))) {
        if (!parse_count(val, 0, INT64_MAX, &v)) {
            cp_cli_error("bench", "--seed takes a non-negative whole number");
            return false;
        }
        c->seed = (uint64_t)v;
    }
    static const int verdict_opts[] = {OPT_TEST, OPT_ALPHA, OPT_THRESHOLD};
    for (size_t i = 0; i < sizeof verdict_opts / sizeof *verdict_opts && !c->vs; i++) {
        for (size_t k = 0; k < args->n_opts; k++) {
            if (args->opts[k].id != verdict_opts[i])
                continue;
            char msg[128];
            snprintf(msg, sizeof msg, "--%s judges an A/B measurement: give --vs B.om too",
                     args->opts[k].name);
            cp_cli_error("bench", msg);
            return false;
        }
    }
    if ((val = cp_args_get(args, OPT_TEST)) && !cp_stat_test_parse(val, &c->vo.test)) {
        char msg[160];
        snprintf(msg, sizeof msg, "--%s '%.40s': use mann-whitney, welch, t-test or bootstrap",
                 given_name(args, OPT_TEST), val);
        cp_cli_error("bench", msg);
        return false;
    }
    if ((val = cp_args_get(args, OPT_ALPHA)) && !cp_bench_ab_parse_alpha(val, &c->vo.alpha)) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "--alpha '%.40s': give a significance level in (0, 0.5], "
                 "e.g. 0.05",
                 val);
        cp_cli_error("bench", msg);
        return false;
    }
    if ((val = cp_args_get(args, OPT_THRESHOLD)) &&
        !cp_bench_ab_parse_threshold(val, &c->vo.threshold_pct)) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "--threshold '%.40s': give a percentage from 0 to 1000, "
                 "e.g. \"2%%\" or \"2\"",
                 val);
        cp_cli_error("bench", msg);
        return false;
    }
    c->so.input_shape = cp_args_get(args, OPT_INPUT_SHAPE);
    c->trace_path = cp_args_get(args, OPT_TRACE);
    c->json = cp_args_has(args, OPT_JSON);
    for (size_t i = 0; i < args->n_opts; i++)
        if (args->opts[i].id == OPT_INPUT)
            c->inputs[c->n_inputs++] = args->opts[i].value;
    return true;
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
        cp_cli_error("bench", "give exactly one MODEL (.om or .onnx); compare two with "
                              "'MODEL --vs B.om'");
        return 2;
    }
    struct bench_cli *c = cp_calloc(1, sizeof *c);
    if (!c) {
        cp_cli_error("bench", "out of memory");
        return 3;
    }
    int rc = 2;
    if (parse_cli(&args, c))
        rc = c->vs ? bench_ab(c) : bench_one(c);
    free(c);
    return rc;
}
