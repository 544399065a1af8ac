/* FusedAttention against the unfused sequence it replaces.
 *
 *   attention_bench [REPS [THREADS [TOKENS [DEPTHS]]]]
 *
 * TOKENS and DEPTHS are comma-separated lists that narrow the table (e.g.
 * "1024,2048" and "16").
 *
 * For N = 256 ... 4096 tokens (self-attention, M = N), H = 4 heads, depth D
 * = 16 and 64, in fp32 and bf16, two one-graph models run through the
 * runtime with its fast kernels:
 *
 *   fused    FusedAttention(q [1,H,N,D], k [1,H,D,N], v [1,H,N,D]) -> [1,H,N,D]
 *   unfused  MatMul(q, k) -> Mul(scale) -> Softmax(-1) -> MatMul(., v)
 *
 * bf16 sets compute_precision "bf16" on FusedAttention and on both MatMuls
 * (what the precision pass does); Mul and Softmax stay fp32. Each rep runs
 * fused then unfused once (interleaved, so machine noise hits both alike),
 * after warm-up runs; the table gives the median and the 10th-90th
 * percentile spread of each, their ratio, and the memory each needs beyond
 * its inputs and output: the plan's peak activation bytes minus the I/O,
 * plus kernel scratch. The unfused sequence's is the N x N score matrices;
 * the fused kernel's is its per-thread tile scratch. */
#include "runner/runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct variant {
    struct cp_model *model;
    struct cp_plan *plan;
    uint64_t extra_bytes;
    char kernels[160];
    double *ms;
};

/* Whether v is in the comma-separated list (NULL: everything is). */
static bool listed(const char *list, int64_t v)
{
    if (!list)
        return true;
    for (const char *p = list; *p;) {
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p)
            return false;
        if (x == v)
            return true;
        p = *end == ',' ? end + 1 : end;
    }
    return false;
}

static int fail(const char *what, const struct cp_diag *d)
{
    fprintf(stderr, "attention_bench: %s: %s\n", what, d->msg);
    return 3;
}

static enum cp_status add_tensor(struct cp_graph *g, const char *name, int rank,
                                 const int64_t *dims, enum cp_tensor_kind kind, int32_t *idx,
                                 struct cp_diag *d)
{
    struct cp_shape s;
    if (rank < 0)
        cp_shape_set_unknown(&s);
    else
        cp_shape_set(&s, rank, dims);
    return cp_graph_add_tensor(g, name, rank < 0 ? CP_DTYPE_UNDEFINED : CP_DTYPE_F32, &s, kind, idx,
                               d);
}

/* The graph of one variant: fused or the unfused MatMul/Mul/Softmax/MatMul. */
static enum cp_status build(bool fused, int64_t h, int64_t n, int64_t dd, bool bf16,
                            struct cp_graph **out, struct cp_diag *d)
{
    struct cp_graph *g = cp_graph_create();
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    cp_graph_set_opset(g, 17);
    const int64_t qd[4] = {1, h, n, dd}, kd[4] = {1, h, dd, n};
    int32_t q, k, v, y, s, s2, p, sc;
    enum cp_status st;
    const float scale = 1.0f / sqrtf((float)dd);
    const char *prec = bf16 ? "bf16" : "fp32";
    if ((st = add_tensor(g, "q", 4, qd, CP_TENSOR_INPUT, &q, d)) != CP_OK ||
        (st = add_tensor(g, "k", 4, kd, CP_TENSOR_INPUT, &k, d)) != CP_OK ||
        (st = add_tensor(g, "v", 4, qd, CP_TENSOR_INPUT, &v, d)) != CP_OK ||
        (st = add_tensor(g, "y", -1, NULL, CP_TENSOR_INTERMEDIATE, &y, d)) != CP_OK)
        goto fail;
    cp_graph_add_input(g, q);
    cp_graph_add_input(g, k);
    cp_graph_add_input(g, v);
    cp_graph_add_output(g, y);
    const char *origin = "attention";
    int32_t node;
    if (fused) {
        const int32_t ins[3] = {q, k, v};
        if ((st = cp_graph_add_node(g, "attention", "FusedAttention", CP_DOMAIN, ins, 3, &y, 1,
                                    &origin, 1, &node, d)) != CP_OK)
            goto fail;
        cp_node_set_int(g, node, "num_heads", h);
        cp_node_set_float(g, node, "scale", scale);
        cp_node_set_string(g, node, "k_format", "BHDN");
        cp_node_set_string(g, node, "compute_precision", prec);
    } else {
        float *sv = malloc(sizeof *sv);
        if (!sv) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            goto fail;
        }
        *sv = scale;
        if ((st = add_tensor(g, "scale", 0, NULL, CP_TENSOR_INITIALIZER, &sc, d)) != CP_OK ||
            (st = cp_graph_set_data(g, sc, sv, sizeof *sv, CP_DATA_HEAP, d)) != CP_OK ||
            (st = add_tensor(g, "s", -1, NULL, CP_TENSOR_INTERMEDIATE, &s, d)) != CP_OK ||
            (st = add_tensor(g, "s2", -1, NULL, CP_TENSOR_INTERMEDIATE, &s2, d)) != CP_OK ||
            (st = add_tensor(g, "p", -1, NULL, CP_TENSOR_INTERMEDIATE, &p, d)) != CP_OK)
            goto fail;
        const int32_t i0[2] = {q, k}, i1[2] = {s, sc}, i3[2] = {p, v};
        if ((st = cp_graph_add_node(g, "qk", "MatMul", "", i0, 2, &s, 1, &origin, 1, &node, d)) !=
            CP_OK)
            goto fail;
        cp_node_set_string(g, node, "compute_precision", prec);
        if ((st = cp_graph_add_node(g, "scale", "Mul", "", i1, 2, &s2, 1, &origin, 1, NULL, d)) !=
                CP_OK ||
            (st = cp_graph_add_node(g, "softmax", "Softmax", "", &s2, 1, &p, 1, &origin, 1, &node,
                                    d)) != CP_OK)
            goto fail;
        cp_node_set_int(g, node, "axis", -1);
        if ((st = cp_graph_add_node(g, "pv", "MatMul", "", i3, 2, &y, 1, &origin, 1, &node, d)) !=
            CP_OK)
            goto fail;
        cp_node_set_string(g, node, "compute_precision", prec);
    }
    if ((st = cp_graph_verify(g, d)) != CP_OK || (st = cp_graph_infer(g, d)) != CP_OK)
        goto fail;
    *out = g;
    return CP_OK;
fail:
    cp_graph_free(g);
    return st;
}

static enum cp_status prepare(struct cp_runtime *rt, bool fused, int64_t h, int64_t n, int64_t dd,
                              bool bf16, int reps, struct variant *v, struct cp_diag *d)
{
    memset(v, 0, sizeof *v);
    struct cp_graph *g = NULL;
    enum cp_status st = build(fused, h, n, dd, bf16, &g, d);
    if (st != CP_OK)
        return st;
    if ((st = cp_model_from_graph(rt, g, NULL, &v->model, d)) != CP_OK)
        return st;
    struct cp_plan_options o = {.buffer_optimize = CP_BUF_L2_OPTIMIZE};
    if ((st = cp_plan_create(v->model, &o, &v->plan, d)) != CP_OK)
        return st;
    uint64_t io = 0;
    for (size_t i = 0; i < cp_plan_n_inputs(v->plan); i++) {
        const struct cp_tensor *t = cp_plan_input(v->plan, i);
        struct cp_host_tensor ht = {.dtype = CP_DTYPE_F32, .rank = t->shape.rank};
        snprintf(ht.name, sizeof ht.name, "%s", t->name);
        for (int k = 0; k < ht.rank; k++)
            ht.dims[k] = t->shape.dims[k].value;
        if ((st = cp_tensor_fill_random(&ht, 1000 + i, d)) != CP_OK)
            return st;
        st = cp_plan_set_input(v->plan, i, &ht, d);
        io += ht.nbytes;
        cp_host_tensor_release(&ht);
        if (st != CP_OK)
            return st;
    }
    io += (uint64_t)cp_shape_numel(&cp_plan_output(v->plan, 0)->shape) * sizeof(float);
    struct cp_mem_report mr;
    cp_plan_memory(v->plan, &mr);
    v->extra_bytes = (mr.peak_bytes > io ? mr.peak_bytes - io : 0) + mr.scratch_bytes;
    const struct cp_trace_kernel *ks = cp_plan_kernels(v->plan);
    size_t pos = 0;
    for (size_t i = 0; i < cp_plan_n_kernels(v->plan) && pos < sizeof v->kernels; i++) {
        int w =
            snprintf(v->kernels + pos, sizeof v->kernels - pos, "%s%s", i ? " " : "", ks[i].impl);
        if (w > 0)
            pos += (size_t)w;
    }
    v->ms = calloc((size_t)reps, sizeof *v->ms);
    return v->ms ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
}

static void release(struct variant *v)
{
    cp_plan_free(v->plan);
    cp_model_free(v->model);
    free(v->ms);
}

static enum cp_status time_once(struct variant *v, double *ms, struct cp_diag *d)
{
    uint64_t t0 = cp_clock_ns();
    enum cp_status st = cp_plan_run(v->plan, -1, d);
    *ms = (double)(cp_clock_ns() - t0) / 1e6;
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, int n, double p)
{
    int i = (int)(p * (n - 1) + 0.5);
    return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void fmt_mib(uint64_t b, char *out, size_t n)
{
    if (b >= (1u << 20))
        snprintf(out, n, "%.1f MiB", (double)b / (1 << 20));
    else
        snprintf(out, n, "%.1f KiB", (double)b / 1024);
}

int main(int argc, char **argv)
{
    long reps = argc > 1 ? strtol(argv[1], NULL, 10) : 21;
    long threads = argc > 2 ? strtol(argv[2], NULL, 10) : 2;
    const char *only_n = argc > 3 ? argv[3] : NULL, *only_d = argc > 4 ? argv[4] : NULL;
    if (reps < 3 || threads < 1) {
        fprintf(stderr, "usage: %s [REPS>=3 [THREADS [TOKENS [DEPTHS]]]]\n", argv[0]);
        return 2;
    }
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_runtime_options ro = {.threads = (int)threads};
    struct cp_runtime *rt;
    if (cp_runtime_create(&ro, &rt, &d) != CP_OK)
        return fail("runtime", &d);
    static const int64_t tokens[] = {256, 512, 1024, 2048, 4096};
    static const int64_t depths[] = {16, 64};
    const int64_t heads = 4;
    printf("H = %lld heads, self-attention (M = N), %ld threads, %ld interleaved reps; "
           "times in ms: median [p10-p90]\n\n",
           (long long)heads, threads, reps);
    printf("| %5s | %3s | %4s | %-20s | %-20s | %7s | %11s | %11s |\n", "N", "D", "prec",
           "fused ms", "unfused ms", "speedup", "fused mem", "unfused mem");
    printf("|------:|----:|------|----------------------|----------------------|--------:|"
           "------------:|------------:|\n");
    char kernels_f[2][2][160], kernels_u[2][2][160];
    memset(kernels_f, 0, sizeof kernels_f);
    memset(kernels_u, 0, sizeof kernels_u);
    for (size_t di = 0; di < 2; di++)
        for (int bf = 0; bf < 2; bf++)
            for (size_t ti = 0; ti < sizeof tokens / sizeof *tokens; ti++) {
                int64_t n = tokens[ti], dd = depths[di];
                if (!listed(only_n, n) || !listed(only_d, dd))
                    continue;
                struct variant f, u;
                if (prepare(rt, true, heads, n, dd, bf, (int)reps, &f, &d) != CP_OK)
                    return fail("fused plan", &d);
                if (prepare(rt, false, heads, n, dd, bf, (int)reps, &u, &d) != CP_OK)
                    return fail("unfused plan", &d);
                snprintf(kernels_f[di][bf], sizeof kernels_f[di][bf], "%s", f.kernels);
                snprintf(kernels_u[di][bf], sizeof kernels_u[di][bf], "%s", u.kernels);
                double dummy;
                for (int w = 0; w < 3; w++)
                    if (time_once(&f, &dummy, &d) != CP_OK || time_once(&u, &dummy, &d) != CP_OK)
                        return fail("warm-up", &d);
                for (long r = 0; r < reps; r++)
                    if (time_once(&f, &f.ms[r], &d) != CP_OK ||
                        time_once(&u, &u.ms[r], &d) != CP_OK)
                        return fail("run", &d);
                qsort(f.ms, (size_t)reps, sizeof(double), cmp_double);
                qsort(u.ms, (size_t)reps, sizeof(double), cmp_double);
                double fm = pct(f.ms, (int)reps, 0.5), um = pct(u.ms, (int)reps, 0.5);
                char fs[32], us[32], fmem[32], umem[32];
                snprintf(fs, sizeof fs, "%.3f [%.3f-%.3f]", fm, pct(f.ms, (int)reps, 0.1),
                         pct(f.ms, (int)reps, 0.9));
                snprintf(us, sizeof us, "%.3f [%.3f-%.3f]", um, pct(u.ms, (int)reps, 0.1),
                         pct(u.ms, (int)reps, 0.9));
                fmt_mib(f.extra_bytes, fmem, sizeof fmem);
                fmt_mib(u.extra_bytes, umem, sizeof umem);
                printf("| %5lld | %3lld | %4s | %-20s | %-20s | %6.2fx | %11s | %11s |\n",
                       (long long)n, (long long)dd, bf ? "bf16" : "fp32", fs, us, um / fm, fmem,
                       umem);
                fflush(stdout);
                release(&f);
                release(&u);
            }
    printf("\nkernels the runtime picked:\n");
    for (size_t di = 0; di < 2; di++)
        for (int bf = 0; bf < 2; bf++)
            if (kernels_f[di][bf][0])
                printf("  D=%lld %s: fused %s; unfused %s\n", (long long)depths[di],
                       bf ? "bf16" : "fp32", kernels_f[di][bf], kernels_u[di][bf]);
    cp_runtime_free(rt);
    return 0;
}
