/* The interference probe (runner/probe.h). */
#include "runner/probe.h"
#include "core/host.h"
#include "stats/stats.h"
#include "trace/trace.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Per thread: two arrays of PROBE_N floats (16 KiB together, inside any L1
 * data cache worth the name), swept PROBE_PASSES times with a multiply-add.
 * About 130k multiply-adds: ~9 us on the development machine, long enough
 * to see a competing hyperthread, short enough not to matter. */
enum { PROBE_N = 2048, PROBE_PASSES = 64 };

/* A cache line of its own per thread, so that threads do not share lines. */
struct probe_lane {
    float a[PROBE_N];
    float b[PROBE_N];
    uint64_t ns;
    char pad[56];
};

struct cp_probe {
    int threads;
    struct probe_lane *lanes;
};

enum cp_status cp_probe_create(int threads, struct cp_probe **out, struct cp_diag *d)
{
    *out = NULL;
    if (threads < 1)
        return cp_diag_set(d, CP_ERR_INVALID, "probe: %d threads (need >= 1)", threads);
    struct cp_probe *p = cp_calloc(1, sizeof *p);
    struct probe_lane *l = NULL;
    if (p && posix_memalign((void **)&l, 64, (size_t)threads * sizeof *l) != 0)
        l = NULL;
    if (!p || !l) {
        free(p);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for the interference probe");
    }
    memset(l, 0, (size_t)threads * sizeof *l);
    for (int t = 0; t < threads; t++)
        for (int i = 0; i < PROBE_N; i++) {
            l[t].a[i] = 1.0f;
            l[t].b[i] = 1e-3f * (float)(1 + i % 7);
        }
    p->threads = threads;
    p->lanes = l;
    *out = p;
    return CP_OK;
}

void cp_probe_free(struct cp_probe *p)
{
    if (!p)
        return;
    free(p->lanes);
    free(p);
}

/* a <- a * 0.999 + b converges to 1000 b: no overflow, no denormals, and
 * the compiler cannot drop the loop (the arrays live on). Never inlined and
 * aligned to a cache line, so that where the loop lands in the code (which
 * moves its speed by a third on some CPUs) changes only when this function
 * does. */
__attribute__((noinline, aligned(64))) static uint64_t sweep(struct probe_lane *l)
{
    /* Bring the arrays back into L1 first, untimed: the iteration before
     * evicted them, as much or as little as its model does, and that is
     * not what the probe measures. */
    float s = 0;
    for (int i = 0; i < PROBE_N; i += 16)
        s += l->a[i] + l->b[i];
    __asm__ volatile("" : : "g"(s) : "memory");
    uint64_t t0 = cp_clock_ns();
    for (int r = 0; r < PROBE_PASSES; r++)
        for (int i = 0; i < PROBE_N; i++)
            l->a[i] = l->a[i] * 0.999f + l->b[i];
    __asm__ volatile("" : : "r"(l->a) : "memory");
    return cp_clock_ns() - t0;
}

uint64_t cp_probe_run(struct cp_probe *p)
{
    if (p->threads == 1)
        return sweep(&p->lanes[0]);
    int nt = p->threads;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num();
        if (t < nt)
            p->lanes[t].ns = sweep(&p->lanes[t]);
    }
    uint64_t worst = 0;
    for (int t = 0; t < nt; t++)
        if (p->lanes[t].ns > worst)
            worst = p->lanes[t].ns;
    return worst;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

uint64_t cp_probe_floor(const uint64_t *v, size_t n)
{
    if (n == 0)
        return 0;
    uint64_t *c = cp_calloc(n, sizeof *c);
    if (!c) { /* the plain minimum needs no memory */
        uint64_t m = v[0];
        for (size_t i = 1; i < n; i++)
            m = v[i] < m ? v[i] : m;
        return m;
    }
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_u64);
    uint64_t f = c[n < 200 ? 0 : n / 100];
    free(c);
    return f;
}

bool cp_probe_undisturbed(uint64_t ns, uint64_t floor)
{
    /* ns <= 1.15 floor, in integers: a double product can round below the
     * exact boundary. */
    if (floor == 0 || ns <= floor || floor > UINT64_MAX / CP_PROBE_TOLERANCE_NUM)
        return true;
    uint64_t over = ns - floor;
    return over <= UINT64_MAX / CP_PROBE_TOLERANCE_DEN &&
           over * CP_PROBE_TOLERANCE_DEN <= floor * CP_PROBE_TOLERANCE_NUM;
}

size_t cp_probe_count_undisturbed(const uint64_t *v, size_t n, uint64_t floor)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += cp_probe_undisturbed(v[i], floor);
    return k;
}

size_t cp_probe_window(double typical_ns)
{
    if (!(typical_ns > 0))
        return 1;
    double w = ceil(CP_PROBE_WINDOW_NS / typical_ns);
    return w < 1 ? 1 : w > CP_PROBE_MAX_WINDOW ? CP_PROBE_MAX_WINDOW : (size_t)w;
}

size_t cp_probe_mark(const uint64_t *probe, size_t n, uint64_t floor, size_t w, bool *out)
{
    /* A sliding count of disturbed probes in [i - w, i + w]. */
    size_t bad = 0, k = 0;
    for (size_t j = 0; j < n && j <= w; j++)
        bad += !cp_probe_undisturbed(probe[j], floor);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && i + w < n)
            bad += !cp_probe_undisturbed(probe[i + w], floor);
        if (i > w)
            bad -= !cp_probe_undisturbed(probe[i - w - 1], floor);
        if (out)
            out[i] = bad == 0;
        k += bad == 0;
    }
    return k;
}

/* Which cannprof binary this is: a floor measured by another build (whose
 * probe loop may sit elsewhere in the code) says nothing about this one. */
static void exe_identity(char *out, size_t n)
{
    struct stat st;
    if (stat("/proc/self/exe", &st) != 0) {
        snprintf(out, n, "unknown");
        return;
    }
    snprintf(out, n, "%llx:%llx:%llx:%lld", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino, (unsigned long long)st.st_size, (long long)st.st_mtime);
}

size_t cp_probe_mark_run(const uint64_t *probe, const uint64_t *latency_ns, size_t n,
                         uint64_t floor, bool *out)
{
    double *x = cp_calloc(n ? n : 1, sizeof *x);
    size_t w = 1;
    if (x && n) {
        for (size_t i = 0; i < n; i++)
            x[i] = (double)latency_ns[i];
        w = cp_probe_window(cp_stats_quantile(x, n, 0.5));
    }
    free(x);
    return cp_probe_mark(probe, n, floor, w, out);
}

enum cp_status cp_probe_store(struct cp_trace_store *s, int64_t run_id, const uint64_t *probe,
                              size_t n, struct cp_diag *d)
{
    double *v = cp_calloc(n ? n : 1, sizeof *v);
    if (!v)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for the probe counters");
    for (size_t i = 0; i < n; i++)
        v[i] = (double)probe[i];
    enum cp_status st = cp_trace_store_add_counter_series(s, run_id, "probe_ns", 0, v, n, d);
    free(v);
    return st;
}

uint64_t cp_probe_floor_load(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned long long v = 0;
    long long saved = 0;
    char exe[128], want[128];
    uint64_t floor = 0;
    exe_identity(want, sizeof want);
    time_t now = time(NULL);
    if (fscanf(f, "floor_ns %llu exe %127s saved_at %lld", &v, exe, &saved) == 3 &&
        strcmp(exe, want) == 0 && saved <= (long long)now &&
        (long long)now - saved <= CP_PROBE_FLOOR_MAX_AGE_S)
        floor = (uint64_t)v;
    fclose(f);
    return floor;
}

enum cp_status cp_probe_floor_save(const char *path, uint64_t floor, struct cp_diag *d)
{
    char text[256], exe[128];
    exe_identity(exe, sizeof exe);
    int len = snprintf(text, sizeof text, "floor_ns %llu\nexe %s\nsaved_at %lld\n",
                       (unsigned long long)floor, exe, (long long)time(NULL));
    return cp_file_write_atomic(path, text, (size_t)len, d);
}

bool cp_probe_floor_path(int threads, bool create, char *out, size_t n)
{
    struct cp_diag d;
    cp_diag_init(&d);
    char dir[1024];
    if (cp_cache_dir(dir, sizeof dir, &d) != CP_OK ||
        (create && cp_mkdir_p(dir, 0700, &d) != CP_OK))
        return false;
    struct cp_host *h = malloc(sizeof *h);
    if (!h)
        return false;
    cp_host_detect(h);
    char key[600];
    snprintf(key, sizeof key, "%.255s\n%.300s\n%d", h->cpu_model, h->isa, h->cores);
    free(h);
    int w = snprintf(out, n, "%s/probe-floor-%016llx-t%d", dir,
                     (unsigned long long)cp_hash64(key, strlen(key)), threads);
    return w > 0 && (size_t)w < n;
}
