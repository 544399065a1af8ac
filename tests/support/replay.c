/* Test support: traces with injected kernel times (see replay.h). */
#include "support/replay.h"

#include "core/core.h"
#include "support/cli.h"
#include "support/db.h"
#include "trace/trace.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t cp_t_machine_probe(void *ctx, size_t round)
{
    const struct cp_t_machine *m = ctx;
    return round < m->busy_until ? m->busy : m->quiet;
}

/* What a real bench recorded of the model: its run and its kernels. */
struct table {
    struct cp_trace_run_info info;
    char *text[4]; /* model_path, model_hash, config_json, config_id */
    struct cp_trace_kernel *k;
    size_t n;
};

static void table_release(struct table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free((char *)t->k[i].node);
        free((char *)t->k[i].op_type);
        free((char *)t->k[i].impl);
        free((char *)t->k[i].origins);
        free((char *)t->k[i].inputs);
        free((char *)t->k[i].outputs);
    }
    free(t->k);
    for (int i = 0; i < 4; i++)
        free(t->text[i]);
    memset(t, 0, sizeof *t);
}

static char *col(sqlite3_stmt *st, int i)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    return s ? strdup((const char *)s) : NULL;
}

/* Read the last run of trace `path` and its kernels into *t. */
static bool read_table(const char *path, int threads, struct table *t)
{
    memset(t, 0, sizeof *t);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    const char *why = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "SELECT id, model_path, model_hash, config_json, config_id, batch, "
                           "weight_bytes, arena_bytes FROM runs ORDER BY id DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK) {
        why = db ? sqlite3_errmsg(db) : "cannot open";
        goto out;
    }
    if (sqlite3_step(st) != SQLITE_ROW) {
        why = "no run";
        goto out;
    }
    int64_t run = sqlite3_column_int64(st, 0);
    for (int i = 0; i < 4; i++)
        t->text[i] = col(st, i + 1);
    t->info = (struct cp_trace_run_info){
        .kind = "bench",
        .model_path = t->text[0],
        .model_hash = t->text[1],
        .config_json = t->text[2],
        .config_id = t->text[3],
        .threads = threads,
        .batch = sqlite3_column_int(st, 5),
        .iterations = CP_T_REPLAY_ITERATIONS,
        .weight_bytes = (uint64_t)sqlite3_column_int64(st, 6),
        .arena_bytes = (uint64_t)sqlite3_column_int64(st, 7),
    };
    sqlite3_finalize(st);
    st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT node, op_type, impl, origins, inputs, outputs, flops, bytes "
                           "FROM kernels WHERE run_id = ?1 ORDER BY idx",
                           -1, &st, NULL) != SQLITE_OK) {
        why = sqlite3_errmsg(db);
        goto out;
    }
    sqlite3_bind_int64(st, 1, run);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (t->n == cap) {
            cap = cap ? 2 * cap : 64;
            struct cp_trace_kernel *g = realloc(t->k, cap * sizeof *g);
            if (!g) {
                why = "out of memory";
                goto out;
            }
            t->k = g;
        }
        t->k[t->n++] = (struct cp_trace_kernel){
            col(st, 0),
            col(st, 1),
            col(st, 2),
            col(st, 3),
            col(st, 4),
            col(st, 5),
            sqlite3_column_double(st, 6),
            sqlite3_column_double(st, 7),
        };
    }
    if (rc != SQLITE_DONE)
        why = sqlite3_errmsg(db);
    else if (t->n == 0)
        why = "the run has no kernels";
out:
    if (why)
        fprintf(stderr, "cp_t_replayed_trace: %s: %s\n", path, why);
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (why)
        table_release(t);
    return !why;
}

/* Write the replayed run of table `t` into the new store `path`. */
static bool write_replay(const char *path, const struct table *t, bool bf16_host,
                         const struct cp_t_timing *tm)
{
    struct cp_diag d;
    cp_diag_init(&d);
    size_t n = t->n;
    uint64_t *dur = calloc(n, sizeof *dur), kernels_ns = 0;
    int32_t *names = calloc(n, sizeof *names);
    struct cp_trace_recorder *rec = cp_trace_recorder_create((n + 1) * CP_T_REPLAY_ITERATIONS);
    struct cp_trace_store *s = cp_t_trace_store(path, NULL, NULL);
    char cores[16];
    snprintf(cores, sizeof cores, "%d", CP_T_REPLAY_CORES);
    int64_t run = 0;
    enum cp_status st = dur && names && rec && s ? CP_OK : CP_ERR_NOMEM;
    if (st == CP_OK)
        st = cp_trace_store_set_meta(s, "host_cores", cores, &d);
    if (st == CP_OK)
        st = cp_trace_store_set_meta(s, "host_isa_flags",
                                     bf16_host ? CP_T_REPLAY_ISA_BF16 : CP_T_REPLAY_ISA, &d);
    if (st == CP_OK)
        st = cp_trace_store_set_meta(s, "host_cpu_model", "a replayed host", &d);
    if (st == CP_OK)
        st = cp_trace_store_begin_run(s, &t->info, &run, &d);
    if (st == CP_OK)
        st = cp_trace_store_add_kernels(s, run, t->k, n, &d);
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        dur[i] = tm->planted(t->k[i].node, t->k[i].op_type) ? tm->slow : tm->fast;
        kernels_ns += dur[i];
        names[i] = cp_trace_intern(rec, t->k[i].node);
    }
    /* each iteration: "execute" from its start to its end, the kernels in
     * plan order with equal dispatch gaps before each */
    uint64_t lat = (uint64_t)((double)kernels_ns / tm->device_util);
    uint64_t gap = (lat - kernels_ns) / (n + 1);
    uint64_t samples[CP_T_REPLAY_ITERATIONS];
    int32_t exec = st == CP_OK ? cp_trace_intern(rec, "execute") : -1;
    for (int it = 0; st == CP_OK && it < CP_T_REPLAY_ITERATIONS; it++) {
        uint64_t t0 = 1000000000 + (uint64_t)it * 2 * lat, at = t0;
        for (size_t i = 0; i < n; i++) {
            at += gap;
            cp_trace_record(rec, CP_LAYER_DEVICE, names[i], (int32_t)i, it, at, at + dur[i], 0);
            at += dur[i];
        }
        cp_trace_record(rec, CP_LAYER_RUNTIME, exec, -1, it, t0, t0 + lat, 0);
        samples[it] = lat;
    }
    if (st == CP_OK)
        st = cp_trace_store_add_samples(s, run, 0, samples, CP_T_REPLAY_ITERATIONS, &d);
    if (st == CP_OK)
        st = cp_trace_store_add_events(s, run, rec, &d);
    if (st != CP_OK)
        fprintf(stderr, "cp_t_replayed_trace: %s: %s\n", path, d.msg[0] ? d.msg : "no memory");
    cp_trace_store_close(s);
    cp_trace_recorder_free(rec);
    free(names);
    free(dur);
    return st == CP_OK;
}

char *cp_t_replayed_trace(const char *om, const char *db, int threads, bool bf16_host,
                          const struct cp_t_timing *t)
{
    if (!(t->device_util > 0 && t->device_util <= 1)) {
        fprintf(stderr, "cp_t_replayed_trace: device_util %g is not in (0, 1]\n", t->device_util);
        return NULL;
    }
    char *table = cp_t_fmt("%s-table.db", db);
    char th[16];
    snprintf(th, sizeof th, "%d", threads);
    struct table tb;
    bool ok =
        cp_t_bench_trace(om, table, "-n", "1", "-w", "0", "--no-probe", "--threads", th, NULL) &&
        read_table(table, threads, &tb);
    free(table);
    if (!ok)
        return NULL;
    ok = write_replay(db, &tb, bf16_host, t);
    table_release(&tb);
    return ok ? cp_t_fmt("%s", db) : NULL;
}
