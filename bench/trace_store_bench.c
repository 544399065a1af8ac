/* Trace store benchmark: how fast events are recorded in memory, written to
 * a trace store, and exported, for a synthetic run shaped like a real one
 * (per iteration: one application range, one runtime "execute", and a kernel
 * event per node of a plan).
 *
 *   trace_store_bench [N_EVENTS [KERNELS_PER_ITERATION [OUT_DIR]]]
 *
 * Defaults: 1000000 events, 100 kernels per iteration, a fresh folder under
 * /tmp that is removed afterwards (pass OUT_DIR to keep the files). Prints a
 * table; each phase is timed once, on CLOCK_MONOTONIC. */
#include "trace/trace.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static double seconds_since(uint64_t t0)
{
    return (double)(cp_clock_ns() - t0) / 1e9;
}

static uint64_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* One table row; the rate column only for phases that process events. */
static void row(const char *what, size_t n, bool rate_col, double secs, uint64_t bytes)
{
    char rate[32] = "-", size[32] = "-";
    if (rate_col && n && secs > 0)
        cp_format_si((double)n / secs, rate);
    if (bytes)
        cp_format_bytes(bytes, size);
    printf("| %-34s | %10zu | %10.3f | %12s | %10s |\n", what, n, secs * 1e3, rate, size);
}

static int fail(const char *what, const struct cp_diag *d)
{
    fprintf(stderr, "trace_store_bench: %s: %s\n", what, d->msg);
    return 3;
}

int main(int argc, char **argv)
{
    int64_t n_events = 1000000, per_iter = 100;
    if ((argc > 1 && (!cp_parse_i64(argv[1], &n_events) || n_events < 1)) ||
        (argc > 2 && (!cp_parse_i64(argv[2], &per_iter) || per_iter < 1))) {
        fprintf(stderr, "usage: %s [N_EVENTS [KERNELS_PER_ITERATION [OUT_DIR]]]\n", argv[0]);
        return 2;
    }
    char tmpl[] = "/tmp/cannprof-trace-bench.XXXXXX";
    const char *dir = argc > 3 ? argv[3] : mkdtemp(tmpl);
    if (!dir) {
        perror("mkdtemp");
        return 3;
    }
    char db[4096], json[4096], folded[4096];
    snprintf(db, sizeof(db), "%s/bench.db", dir);
    snprintf(json, sizeof(json), "%s/bench.json", dir);
    snprintf(folded, sizeof(folded), "%s/bench.folded", dir);
    unlink(db);

    /* The plan: kernel names interned once, as the runtime does. */
    struct cp_trace_recorder *r = cp_trace_recorder_create(0);
    struct cp_trace_kernel *k = calloc((size_t)per_iter, sizeof(*k));
    int32_t *kname = calloc((size_t)per_iter, sizeof(*kname));
    char(*names)[32] = calloc((size_t)per_iter, sizeof(*names));
    static const char *const ops[] = {"Conv", "Relu", "Add", "MatMul", "Softmax", "LayerNorm"};
    if (!r || !k || !kname || !names) {
        fprintf(stderr, "trace_store_bench: out of memory\n");
        return 3;
    }
    for (int64_t i = 0; i < per_iter; i++) {
        snprintf(names[i], sizeof(names[i]), "node_%" PRId64, i);
        k[i] = (struct cp_trace_kernel){names[i],
                                        ops[i % 6],
                                        "ref",
                                        "[\"orig\"]",
                                        "[{\"shape\":[1,64,32,32],\"dtype\":\"f32\"}]",
                                        "[{\"shape\":[1,64,32,32],\"dtype\":\"f32\"}]",
                                        1e6,
                                        65536};
        kname[i] = cp_trace_intern(r, names[i]);
    }
    int32_t n_exec = cp_trace_intern(r, "execute"), n_iter = cp_trace_intern(r, "iteration");

    printf("trace store benchmark: %" PRId64 " events, %" PRId64
           " kernels per iteration, SQLite %s\n\n",
           n_events, per_iter, sqlite3_libversion());
    printf("| %-34s | %10s | %10s | %12s | %10s |\n", "phase", "events", "ms", "events/s", "size");
    printf("|%s|%s|%s|%s|%s|\n", "------------------------------------", "------------",
           "------------", "--------------", "------------");

    /* 1. Recording: reserve, then the hot path with two clock reads per
     * kernel, exactly as the runtime's loop does it. */
    uint64_t t = cp_clock_ns();
    if (cp_trace_reserve(r, (size_t)n_events) != CP_OK) {
        fprintf(stderr, "trace_store_bench: cannot reserve %" PRId64 " events\n", n_events);
        return 3;
    }
    row("reserve", (size_t)n_events, false, seconds_since(t), 0);
    t = cp_clock_ns();
    size_t n = 0;
    for (int32_t it = 0; n < (size_t)n_events; it++) {
        uint64_t it0 = cp_clock_ns();
        uint64_t e0 = cp_clock_ns();
        for (int64_t i = 0; i < per_iter && n + 2 < (size_t)n_events; i++, n++) {
            uint64_t k0 = cp_clock_ns();
            cp_trace_record(r, CP_LAYER_DEVICE, kname[i], (int32_t)i, it, k0, cp_clock_ns(), 0);
        }
        cp_trace_record(r, CP_LAYER_RUNTIME, n_exec, -1, it, e0, cp_clock_ns(), 0);
        cp_trace_record_depth(r, CP_LAYER_APP, n_iter, -1, it, it0, cp_clock_ns(), 0, 0);
        n += 2;
    }
    double rec_s = seconds_since(t);
    row("record (2 clock reads + store)", cp_trace_n_events(r), true, rec_s, 0);
    if (cp_trace_dropped(r))
        fprintf(stderr, "trace_store_bench: %zu events dropped\n", cp_trace_dropped(r));

    /* 2. Writing the store. */
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s = NULL;
    int64_t run;
    struct cp_trace_run_info info = {.kind = "bench", .model_path = "synthetic", .threads = 1};
    t = cp_clock_ns();
    if (cp_trace_store_open(db, &s, &d) != CP_OK || cp_trace_store_set_host_meta(s, &d) != CP_OK ||
        cp_trace_store_begin_run(s, &info, &run, &d) != CP_OK ||
        cp_trace_store_add_kernels(s, run, k, (size_t)per_iter, &d) != CP_OK)
        return fail("store", &d);
    row("open + host meta + run + kernels", (size_t)per_iter, false, seconds_since(t), 0);
    t = cp_clock_ns();
    if (cp_trace_store_add_events(s, run, r, &d) != CP_OK)
        return fail("add_events", &d);
    double add_s = seconds_since(t);
    t = cp_clock_ns();
    cp_trace_store_close(s);
    double close_s = seconds_since(t);
    row("add_events", cp_trace_n_events(r), true, add_s, 0);
    row("close (checkpoint, leave WAL)", 0, false, close_s, file_size(db));
    row("add_events + close", cp_trace_n_events(r), true, add_s + close_s, file_size(db));

    /* 3. Exporting, read-only as `cannprof export` does. */
    if (cp_trace_store_open_ro(db, &s, &d) != CP_OK)
        return fail("open_ro", &d);
    t = cp_clock_ns();
    if (cp_trace_export(s, run, CP_TRACE_FORMAT_CHROME, json, &d) != CP_OK)
        return fail("export chrome", &d);
    row("export chrome JSON", cp_trace_n_events(r), true, seconds_since(t), file_size(json));
    t = cp_clock_ns();
    if (cp_trace_export(s, run, CP_TRACE_FORMAT_FOLDED, folded, &d) != CP_OK)
        return fail("export folded", &d);
    row("export folded stacks", cp_trace_n_events(r), true, seconds_since(t), file_size(folded));
    cp_trace_store_close(s);

    printf("\nrecording: %.1f ns per event (incl. 2 clock reads); store write: %.0f events/s\n",
           (double)rec_s * 1e9 / (double)cp_trace_n_events(r),
           (double)cp_trace_n_events(r) / (add_s + close_s));
    if (argc > 3) {
        printf("files kept in %s\n", dir);
    } else {
        unlink(db);
        unlink(json);
        unlink(folded);
        rmdir(dir);
    }
    cp_trace_recorder_free(r);
    free(k);
    free(kname);
    free(names);
    return 0;
}
