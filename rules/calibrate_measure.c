/*
 * Measuring the machine: oneDNN matmul peaks and the triad bandwidth.
 *
 * Each figure is "best of N": one untimed warm-up, then timed repetitions
 * until the budget is spent (at least two; two per matmul size), keeping
 * the fastest. The best rather than the mean because the question is what
 * the machine *can* reach; interference from other processes only ever
 * slows a repetition down.
 *
 * oneDNN (OpenMP build) sizes its work for omp_get_max_threads() of the
 * calling thread when a primitive is created and run, so the thread count
 * is set before each primitive is built and restored at the end.
 */
#include "rules/calibrate.h"

#include <oneapi/dnnl/dnnl.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TIMED_REPS 100000
#define MIB            ((uint64_t)1 << 20)

/* Repetition control shared by the matmul and the triad. */
struct reps {
    uint64_t budget_ns, start_ns, best_ns;
    long n, min;
};

/* Start timing: at least `min` repetitions, more while within budget. */
static void reps_start(struct reps *r, long budget_ms, long min)
{
    r->budget_ns = (uint64_t)budget_ms * 1000000u;
    r->start_ns = cp_clock_ns();
    r->best_ns = UINT64_MAX;
    r->n = 0;
    r->min = min;
}

static bool reps_more(const struct reps *r)
{
    if (r->n < r->min)
        return true;
    return r->n < MAX_TIMED_REPS && cp_clock_ns() - r->start_ns < r->budget_ns;
}

static void reps_add(struct reps *r, uint64_t ns)
{
    if (ns == 0)
        ns = 1; /* a clock too coarse for the work: still a finite figure */
    if (ns < r->best_ns)
        r->best_ns = ns;
    r->n++;
}

/* ---- matmul peak --------------------------------------------------------- */

/* One matmul benchmark: the primitive and its memories. */
struct mm_bench {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst;
};

static void mm_bench_release(struct mm_bench *b)
{
    dnnl_primitive_destroy(b->prim);
    dnnl_primitive_desc_destroy(b->pd);
    dnnl_memory_destroy(b->src);
    dnnl_memory_destroy(b->wei);
    dnnl_memory_destroy(b->dst);
    b->prim = NULL;
    b->pd = NULL;
    b->src = b->wei = b->dst = NULL;
}

/* Fill `to` (any layout and dtype) from a plain f32 n x n pattern through
 * a reorder, the way the runtime packs weights. Values are small and
 * exactly representable in bf16, so no denormals or rounding noise. */
static dnnl_status_t fill_by_reorder(struct mm_bench *b, dnnl_memory_t to, int64_t n)
{
    dnnl_memory_desc_t plain;
    dnnl_dims_t dims = {n, n};
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&plain, 2, dims, dnnl_f32, dnnl_ab);
    if (s != dnnl_success)
        return s;
    dnnl_memory_t from = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    const dnnl_memory_desc_t *to_md = NULL;
    void *p = NULL;
    if ((s = dnnl_memory_create(&from, &plain, b->eng, DNNL_MEMORY_ALLOCATE)) != dnnl_success)
        goto out;
    if ((s = dnnl_memory_get_data_handle(from, &p)) != dnnl_success || !p)
        goto out;
    float *f = p;
    for (int64_t i = 0; i < n * n; i++)
        f[i] = (float)((i * 7) % 17 - 8) * 0.125f;
    if ((s = dnnl_memory_get_memory_desc(to, &to_md)) != dnnl_success)
        goto out;
    if ((s = dnnl_reorder_primitive_desc_create(&rpd, &plain, b->eng, to_md, b->eng, NULL)) !=
        dnnl_success)
        goto out;
    if ((s = dnnl_primitive_create(&r, rpd)) != dnnl_success)
        goto out;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    if ((s = dnnl_primitive_execute(r, b->strm, 2, args)) == dnnl_success)
        s = dnnl_stream_wait(b->strm);
out:
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(from);
    return s;
}

/* Build an n x n x n matmul: src and weights in `dt`, weights in the
 * layout the primitive prefers (as the runtime packs constant weights),
 * dst f32. */
static dnnl_status_t mm_bench_build(struct mm_bench *b, dnnl_data_type_t dt, int64_t n)
{
    dnnl_dims_t dims = {n, n};
    dnnl_memory_desc_t src_md, wei_md, dst_md;
    dnnl_status_t s;
    if ((s = dnnl_memory_desc_init_by_tag(&src_md, 2, dims, dt, dnnl_ab)) != dnnl_success ||
        (s = dnnl_memory_desc_init_by_tag(&wei_md, 2, dims, dt, dnnl_format_tag_any)) !=
            dnnl_success ||
        (s = dnnl_memory_desc_init_by_tag(&dst_md, 2, dims, dnnl_f32, dnnl_ab)) != dnnl_success)
        return s;
    dnnl_matmul_desc_t desc;
    if ((s = dnnl_matmul_desc_init(&desc, &src_md, &wei_md, NULL, &dst_md)) != dnnl_success)
        return s;
    if ((s = dnnl_primitive_desc_create(&b->pd, &desc, NULL, b->eng, NULL)) != dnnl_success)
        return s;
    const dnnl_memory_desc_t *packed =
        dnnl_primitive_desc_query_md(b->pd, dnnl_query_weights_md, 0);
    if (!packed)
        return dnnl_runtime_error;
    if ((s = dnnl_memory_create(&b->src, &src_md, b->eng, DNNL_MEMORY_ALLOCATE)) != dnnl_success ||
        (s = dnnl_memory_create(&b->wei, packed, b->eng, DNNL_MEMORY_ALLOCATE)) != dnnl_success ||
        (s = dnnl_memory_create(&b->dst, &dst_md, b->eng, DNNL_MEMORY_ALLOCATE)) != dnnl_success)
        return s;
    if ((s = fill_by_reorder(b, b->src, n)) != dnnl_success ||
        (s = fill_by_reorder(b, b->wei, n)) != dnnl_success)
        return s;
    return dnnl_primitive_create(&b->prim, b->pd);
}

/* The matmul sizes (M = N = K) tried for every peak, alternating: a small
 * one whose repetitions are short enough to slip between interruptions and
 * whose operands stay in cache, and a larger one closer to the runtime's big
 * layers. The peak is the faster of the two. */
static const int64_t mm_sizes[] = {512, CP_CALIBRATE_MATMUL_SIZE};
#define N_MM_SIZES ((int)(sizeof mm_sizes / sizeof *mm_sizes))

/* Run once and wait. OUT: *ns. */
static dnnl_status_t mm_bench_run(struct mm_bench *b, uint64_t *ns)
{
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, b->src}, {DNNL_ARG_WEIGHTS, b->wei}, {DNNL_ARG_DST, b->dst}};
    uint64_t t0 = cp_clock_ns();
    dnnl_status_t s = dnnl_primitive_execute(b->prim, b->strm, 3, args);
    if (s == dnnl_success)
        s = dnnl_stream_wait(b->strm);
    *ns = cp_clock_ns() - t0;
    return s;
}

/* Best FLOP/s of the matmuls in `dt` on `threads` threads. OUT: *flops,
 * *size (the M = N = K that reached it), impl[impl_n] (the implementation
 * oneDNN picked for that size). */
static enum cp_status matmul_peak(dnnl_engine_t eng, dnnl_stream_t strm, dnnl_data_type_t dt,
                                  int threads, long budget_ms, double *flops, int64_t *size,
                                  char *impl, size_t impl_n, struct cp_diag *d)
{
    const char *what = dt == dnnl_bf16 ? "bf16" : "fp32";
    struct mm_bench b[N_MM_SIZES];
    memset(b, 0, sizeof b);
    omp_set_num_threads(threads);
    enum cp_status st = CP_OK;
    dnnl_status_t s = dnnl_success;
    int k = 0;
    uint64_t ns;
    for (k = 0; k < N_MM_SIZES && s == dnnl_success; k++) {
        b[k].eng = eng;
        b[k].strm = strm;
        if ((s = mm_bench_build(&b[k], dt, mm_sizes[k])) == dnnl_success)
            s = mm_bench_run(&b[k], &ns); /* warm-up */
    }
    if (s != dnnl_success) {
        int64_t n = mm_sizes[k - 1];
        st = cp_diag_set(d, CP_ERR_INTERNAL,
                         "calibrate: oneDNN could not run the %s matmul (%lldx%lldx%lld, "
                         "%d threads): status %d",
                         what, (long long)n, (long long)n, (long long)n, threads, (int)s);
        goto out;
    }
    double best = 0;
    int best_k = 0;
    struct reps r;
    reps_start(&r, budget_ms, 2 * N_MM_SIZES);
    for (long i = 0; reps_more(&r); i++) {
        k = (int)(i % N_MM_SIZES);
        if ((s = mm_bench_run(&b[k], &ns)) != dnnl_success) {
            st = cp_diag_set(d, CP_ERR_INTERNAL,
                             "calibrate: the %s matmul failed on %d threads: status %d", what,
                             threads, (int)s);
            goto out;
        }
        reps_add(&r, ns);
        double n = (double)mm_sizes[k];
        double rate = 2.0 * n * n * n / ((double)(ns ? ns : 1) * 1e-9);
        if (rate > best) {
            best = rate;
            best_k = k;
        }
    }
    const char *name = NULL;
    if (dnnl_primitive_desc_query(b[best_k].pd, dnnl_query_impl_info_str, 0, &name) !=
            dnnl_success ||
        !name)
        name = "unknown";
    snprintf(impl, impl_n, "%s", name);
    *flops = best;
    *size = mm_sizes[best_k];
out:
    for (k = 0; k < N_MM_SIZES; k++)
        mm_bench_release(&b[k]);
    return st;
}

/* ---- triad bandwidth ---------------------------------------------------- */

/* Bytes of the last-level cache, all instances together: the largest
 * cache of cpu0 times the number of such caches the online cores have
 * (cores / cpus sharing it). 0 when sysfs does not say. */
static uint64_t llc_bytes(int cores)
{
    uint64_t best = 0;
    int best_level = -1, sharing = 1;
    for (int idx = 0; idx < 16; idx++) {
        char path[128], buf[256];
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        if (fscanf(f, "%d", &level) != 1)
            level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        unsigned long long kib = 0;
        char unit = 'K';
        if (!(f = fopen(path, "r")))
            continue;
        int got = fscanf(f, "%llu%c", &kib, &unit);
        fclose(f);
        if (got < 1)
            continue;
        uint64_t bytes = unit == 'M' ? kib * MIB : unit == 'K' ? kib * 1024u : kib;
        if (level < best_level || (level == best_level && bytes <= best))
            continue;
        best_level = level;
        best = bytes;
        /* "0-7,64-71": count the cpus sharing this cache. */
        sharing = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/shared_cpu_list",
                 idx);
        if ((f = fopen(path, "r"))) {
            if (fgets(buf, sizeof buf, f)) {
                char *p = buf;
                while (*p) {
                    char *end;
                    long lo = strtol(p, &end, 10), hi = lo;
                    if (end == p)
                        break;
                    p = end;
                    if (*p == '-') {
                        hi = strtol(p + 1, &end, 10);
                        p = end;
                    }
                    sharing += hi >= lo ? (int)(hi - lo + 1) : 1;
                    if (*p == ',')
                        p++;
                    else
                        break;
                }
            }
            fclose(f);
        }
        if (sharing < 1)
            sharing = 1;
    }
    int instances = (cores + sharing - 1) / sharing;
    return best * (uint64_t)(instances > 0 ? instances : 1);
}

/* Size of each triad array: at least 64 MiB and twice the last-level
 * caches, at most 1 GiB and an eighth of physical memory (rounded to MiB). */
static uint64_t triad_array_bytes(int cores)
{
    uint64_t bytes = 64 * MIB, llc2 = 2 * llc_bytes(cores);
    if (llc2 > bytes)
        bytes = llc2;
    if (bytes > 1024 * MIB)
        bytes = 1024 * MIB;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
        uint64_t eighth = (uint64_t)pages * (uint64_t)page / 8;
        if (bytes > eighth && eighth >= 8 * MIB)
            bytes = eighth;
    }
    return bytes / MIB * MIB;
}

static void triad_init(float *a, float *b, float *c, size_t n, int threads)
{
    /* First touch with the schedule the triad uses: each thread's pages
     * land on its own node. */
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++) {
        a[i] = 0.0f;
        b[i] = 1.0f;
        c[i] = 2.0f;
    }
}

static void triad_once(float *restrict a, const float *restrict b, const float *restrict c, float s,
                       size_t n, int threads)
{
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}

/* Best triad bandwidth on `threads` threads, 12 bytes per element. OUT:
 * *bw (bytes/s), *array_bytes. */
static enum cp_status triad_bw(int threads, long budget_ms, int cores, double *bw,
                               uint64_t *array_bytes, struct cp_diag *d)
{
    uint64_t bytes = triad_array_bytes(cores);
    size_t n = (size_t)(bytes / sizeof(float));
    float *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes),
          *c = aligned_alloc(64, bytes);
    enum cp_status st = CP_OK;
    if (!a || !b || !c) {
        char h[32];
        cp_format_bytes(bytes, h);
        st = cp_diag_set(d, CP_ERR_NOMEM, "calibrate: out of memory for the triad (3 x %s)", h);
        goto out;
    }
    triad_init(a, b, c, n, threads);
    const float s = 3.0f;
    struct reps r;
    triad_once(a, b, c, s, n, threads); /* warm-up */
    reps_start(&r, budget_ms, 2);
    while (reps_more(&r)) {
        uint64_t t0 = cp_clock_ns();
        triad_once(a, b, c, s, n, threads);
        reps_add(&r, cp_clock_ns() - t0);
    }
    /* Reading the result keeps the loop observable; it must be b + s*c. */
    if (a[n / 2] != 7.0f || a[n - 1] != 7.0f) {
        st = cp_diag_set(d, CP_ERR_INTERNAL, "calibrate: the triad computed a wrong result");
        goto out;
    }
    *bw = (double)CP_CALIBRATE_TRIAD_BYTES_PER_ELEM * (double)n / ((double)r.best_ns * 1e-9);
    *array_bytes = bytes;
out:
    free(a);
    free(b);
    free(c);
    return st;
}

/* ---- all figures ---------------------------------------------------------- */

static void utc_now(char out[32])
{
    time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm) || strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, 32, "unknown");
}

enum cp_status cp_calibrate_measure(long budget_ms, struct cp_machine *out, struct cp_diag *d)
{
    if (budget_ms <= 0)
        budget_ms = CP_CALIBRATE_DEFAULT_BUDGET_MS;
    struct cp_machine m;
    cp_machine_detect(&m);
    double load[1];
    m.load_avg = getloadavg(load, 1) == 1 ? load[0] : -1;
    int saved_threads = omp_get_max_threads();
    int all = m.cores > 0 ? m.cores : 1;
    dnnl_engine_t eng = NULL;
    dnnl_stream_t strm = NULL;
    char impl_1t[64]; /* the report names the all-core implementations */
    enum cp_status st = CP_OK;
    memset(out, 0, sizeof *out);
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) {
        st = cp_diag_set(d, CP_ERR_INTERNAL, "calibrate: oneDNN could not create a CPU engine");
        goto out;
    }
    if (dnnl_stream_create(&strm, eng, dnnl_stream_default_flags) != dnnl_success) {
        st = cp_diag_set(d, CP_ERR_INTERNAL, "calibrate: oneDNN could not create a CPU stream");
        goto out_engine;
    }
    int64_t unused_size;
    if ((st = matmul_peak(eng, strm, dnnl_f32, all, budget_ms, &m.peak_flops_f32, &m.matmul_size,
                          m.impl_f32, sizeof m.impl_f32, d)) != CP_OK ||
        (st = matmul_peak(eng, strm, dnnl_f32, 1, budget_ms, &m.peak_flops_f32_1t, &unused_size,
                          impl_1t, sizeof impl_1t, d)) != CP_OK)
        goto out_stream;
    if (m.has_bf16 &&
        ((st = matmul_peak(eng, strm, dnnl_bf16, all, budget_ms, &m.peak_flops_bf16, &unused_size,
                           m.impl_bf16, sizeof m.impl_bf16, d)) != CP_OK ||
         (st = matmul_peak(eng, strm, dnnl_bf16, 1, budget_ms, &m.peak_flops_bf16_1t, &unused_size,
                           impl_1t, sizeof impl_1t, d)) != CP_OK))
        goto out_stream;
    if ((st = triad_bw(all, budget_ms, m.cores, &m.mem_bw, &m.triad_array_bytes, d)) != CP_OK)
        goto out_stream;
    m.threads_used = all;
    m.budget_ms = budget_ms;
    utc_now(m.measured_at);
    snprintf(m.source, sizeof m.source, "measured");
    *out = m;
out_stream:
    dnnl_stream_destroy(strm);
out_engine:
    dnnl_engine_destroy(eng);
out:
    omp_set_num_threads(saved_threads);
    return st;
}
