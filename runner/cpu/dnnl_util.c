/* The oneDNN program every oneDNN kernel runs (see dnnl_util.h). */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"

#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#define ALIGN 64

static size_t align_up(size_t n)
{
    return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

void cp_dk_prog_init(struct cp_dk_prog *p, const struct cp_kernel_env *env)
{
    memset(p, 0, sizeof *p);
    p->engine = env->engine;
    p->stream = env->stream;
    p->threads = env->threads > 0 ? env->threads : 1;
}

void cp_dk_prog_release(struct cp_dk_prog *p)
{
    for (int i = 0; i < p->nsteps; i++)
        if (p->steps[i].prim)
            dnnl_primitive_destroy(p->steps[i].prim);
    for (int i = 0; i < p->nmems; i++)
        dnnl_memory_destroy(p->mems[i]);
    p->nsteps = 0;
    p->nmems = 0;
}

static int add_mem(struct cp_dk_prog *p, const dnnl_memory_desc_t *md, void *ptr, int64_t off)
{
    if (p->nmems >= CP_DK_MAX_MEMS)
        return -1;
    dnnl_memory_t m;
    if (dnnl_memory_create(&m, md, p->engine, ptr) != dnnl_success)
        return -1;
    p->mems[p->nmems] = m;
    p->scratch_off[p->nmems] = off;
    return p->nmems++;
}

int cp_dk_mem_user(struct cp_dk_prog *p, const dnnl_memory_desc_t *md, void *ptr)
{
    return add_mem(p, md, ptr, -1);
}

int cp_dk_mem_owned(struct cp_dk_prog *p, const dnnl_memory_desc_t *md)
{
    return add_mem(p, md, DNNL_MEMORY_ALLOCATE, -1);
}

int cp_dk_mem_scratch(struct cp_dk_prog *p, const dnnl_memory_desc_t *md)
{
    size_t off = p->scratch_top;
    int i = add_mem(p, md, DNNL_MEMORY_NONE, (int64_t)off);
    if (i >= 0)
        p->scratch_top = off + align_up(dnnl_memory_desc_get_size(md));
    return i;
}

dnnl_primitive_attr_t cp_dk_attr_create(void)
{
    dnnl_primitive_attr_t a;
    if (dnnl_primitive_attr_create(&a) != dnnl_success)
        return NULL;
    if (dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user) != dnnl_success) {
        dnnl_primitive_attr_destroy(a);
        return NULL;
    }
    return a;
}

enum cp_status cp_dk_step_add(struct cp_dk_prog *p, const_dnnl_primitive_desc_t pd, int nargs,
                              const int *arg_ids, const int *mem_idx)
{
    if (p->nsteps >= CP_DK_MAX_STEPS || nargs + 1 > CP_DK_MAX_ARGS)
        return CP_ERR_INTERNAL;
    struct cp_dk_step *s = &p->steps[p->nsteps];
    s->scratchpad_mem = -1;
    s->nargs = 0;
    for (int i = 0; i < nargs; i++) {
        if (mem_idx[i] < 0 || mem_idx[i] >= p->nmems)
            return CP_ERR_INTERNAL;
        s->args[s->nargs].arg = arg_ids[i];
        s->args[s->nargs].memory = p->mems[mem_idx[i]];
        s->nargs++;
    }
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sbytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (sbytes > 0) {
        /* Scratchpads of different steps never overlap in time: they all
         * start at the same offset, past the scratch memories. The offset
         * is fixed in cp_dk_prog_run once every scratch memory is known. */
        int m = add_mem(p, smd, DNNL_MEMORY_NONE, -2);
        if (m < 0)
            return CP_ERR_INTERNAL;
        s->scratchpad_mem = m;
        s->args[s->nargs].arg = DNNL_ARG_SCRATCHPAD;
        s->args[s->nargs].memory = p->mems[m];
        s->nargs++;
        if (sbytes > p->scratch_pads)
            p->scratch_pads = sbytes;
    }
    if (dnnl_primitive_create(&s->prim, pd) != dnnl_success)
        return CP_ERR_INTERNAL;
    p->nsteps++;
    return CP_OK;
}

enum cp_status cp_dk_step_reorder(struct cp_dk_prog *p, int src, int dst)
{
    const dnnl_memory_desc_t *smd, *dmd;
    if (src < 0 || dst < 0 || dnnl_memory_get_memory_desc(p->mems[src], &smd) != dnnl_success ||
        dnnl_memory_get_memory_desc(p->mems[dst], &dmd) != dnnl_success)
        return CP_ERR_INTERNAL;
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    if (!attr)
        return CP_ERR_INTERNAL;
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, smd, p->engine, dmd, p->engine, attr);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return CP_ERR_UNSUPPORTED;
    int ids[2] = {DNNL_ARG_FROM, DNNL_ARG_TO};
    int mems[2] = {src, dst};
    enum cp_status st = cp_dk_step_add(p, pd, 2, ids, mems);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

/* Whether the CPU has vcvtne2ps2bf16 (checked once per step added). */
static bool has_avx512_bf16(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

enum cp_status cp_dk_step_to_bf16(struct cp_dk_prog *p, int src, int dst)
{
    const dnnl_memory_desc_t *smd, *dmd;
    if (src < 0 || dst < 0 || dnnl_memory_get_memory_desc(p->mems[src], &smd) != dnnl_success ||
        dnnl_memory_get_memory_desc(p->mems[dst], &dmd) != dnnl_success)
        return CP_ERR_INTERNAL;
    /* Same layout: the destination's descriptor with f32 elements is the
     * source's, and neither has padding. */
    dnnl_memory_desc_t as_f32 = *dmd;
    as_f32.data_type = dnnl_f32;
    size_t n = 1;
    for (int i = 0; i < smd->ndims; i++)
        n *= (size_t)smd->dims[i];
    if (smd->data_type != dnnl_f32 || dmd->data_type != dnnl_bf16 ||
        !dnnl_memory_desc_equal(&as_f32, smd) || dnnl_memory_desc_get_size(smd) != n * 4 ||
        dnnl_memory_desc_get_size(dmd) != n * 2 || !has_avx512_bf16())
        return cp_dk_step_reorder(p, src, dst);
    if (p->nsteps >= CP_DK_MAX_STEPS)
        return CP_ERR_INTERNAL;
    struct cp_dk_step *s = &p->steps[p->nsteps++];
    memset(s, 0, sizeof *s);
    s->scratchpad_mem = -1;
    s->cvt_src = src;
    s->cvt_dst = dst;
    s->cvt_n = n;
    return CP_OK;
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
to_bf16(const float *x, uint16_t *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        _mm512_storeu_si512(y + i, (__m512i)_mm512_cvtne2ps_pbh(b, a));
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
        _mm256_mask_storeu_epi16(y + i, m, (__m256i)v);
    }
}

static void quantize(const float *x, void *y, int64_t n, float mul, bool u8);

/* Run a conversion step: the elements split in 32-aligned chunks over at
 * most p->threads threads, one per 16 Ki elements. */
static enum cp_status run_to_bf16(const struct cp_dk_prog *p, const struct cp_dk_step *s)
{
    void *src = NULL, *dst = NULL;
    if (dnnl_memory_get_data_handle(p->mems[s->cvt_src], &src) != dnnl_success ||
        dnnl_memory_get_data_handle(p->mems[s->cvt_dst], &dst) != dnnl_success || !src || !dst)
        return CP_ERR_INTERNAL;
    int64_t n = (int64_t)s->cvt_n;
    int64_t want = n / 16384 + 1;
    int nt = want < p->threads ? (int)want : p->threads;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int64_t b, e;
        cp_fk_split(n, 32, &b, &e);
        if (e > b && s->cvt_kind == 0)
            to_bf16((const float *)src + b, (uint16_t *)dst + b, e - b);
        else if (e > b)
            quantize((const float *)src + b, (int8_t *)dst + b, e - b, s->cvt_scale,
                     s->cvt_kind == 1);
    }
    return CP_OK;
}

/* A reorder with an output scale: the quantization's fallback. */
static enum cp_status step_reorder_scaled(struct cp_dk_prog *p, int src, int dst, float mul)
{
    const dnnl_memory_desc_t *smd, *dmd;
    if (dnnl_memory_get_memory_desc(p->mems[src], &smd) != dnnl_success ||
        dnnl_memory_get_memory_desc(p->mems[dst], &dmd) != dnnl_success)
        return CP_ERR_INTERNAL;
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    if (!attr)
        return CP_ERR_INTERNAL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &mul);
    if (s == dnnl_success)
        s = dnnl_reorder_primitive_desc_create(&pd, smd, p->engine, dmd, p->engine, attr);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return CP_ERR_UNSUPPORTED;
    int ids[2] = {DNNL_ARG_FROM, DNNL_ARG_TO};
    int mems[2] = {src, dst};
    enum cp_status st = cp_dk_step_add(p, pd, 2, ids, mems);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

static bool has_avx512bw(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}

enum cp_status cp_dk_step_quantize(struct cp_dk_prog *p, int src, int dst, float mul)
{
    const dnnl_memory_desc_t *smd, *dmd;
    if (src < 0 || dst < 0 || dnnl_memory_get_memory_desc(p->mems[src], &smd) != dnnl_success ||
        dnnl_memory_get_memory_desc(p->mems[dst], &dmd) != dnnl_success)
        return CP_ERR_INTERNAL;
    dnnl_memory_desc_t as_f32 = *dmd;
    as_f32.data_type = dnnl_f32;
    size_t n = 1;
    for (int i = 0; i < smd->ndims; i++)
        n *= (size_t)smd->dims[i];
    bool u8 = dmd->data_type == dnnl_u8;
    if (smd->data_type != dnnl_f32 || (!u8 && dmd->data_type != dnnl_s8) ||
        !dnnl_memory_desc_equal(&as_f32, smd) || dnnl_memory_desc_get_size(smd) != n * 4 ||
        dnnl_memory_desc_get_size(dmd) != n || !has_avx512bw())
        return step_reorder_scaled(p, src, dst, mul);
    if (p->nsteps >= CP_DK_MAX_STEPS)
        return CP_ERR_INTERNAL;
    struct cp_dk_step *s = &p->steps[p->nsteps++];
    memset(s, 0, sizeof *s);
    s->scratchpad_mem = -1;
    s->cvt_src = src;
    s->cvt_dst = dst;
    s->cvt_n = n;
    s->cvt_kind = u8 ? 1 : 2;
    s->cvt_scale = mul;
    return CP_OK;
}

/* y = saturate(round(x * mul)): _mm512_cvtps_epi32 rounds to nearest even
 * (the default MXCSR mode), then the packs saturate to u8 or s8. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
quantize(const float *x, void *y, int64_t n, float mul, bool u8)
{
    const __m512 m = _mm512_set1_ps(mul);
    int64_t i = 0;
    for (; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), m));
        __m128i q = u8 ? _mm512_cvtusepi32_epi8(_mm512_max_epi32(v, _mm512_setzero_si512()))
                       : _mm512_cvtsepi32_epi8(v);
        _mm_mask_storeu_epi8((int8_t *)y + i, k, q);
    }
}

bool cp_dk_int8_of(const struct cp_node *n, struct cp_dk_int8 *q)
{
    memset(q, 0, sizeof *q);
    if (strcmp(cp_node_attr_string(n, "compute_precision", ""), "int8") != 0)
        return true;
    q->on = true;
    q->x_scale = cp_node_attr_float(n, "int8_x_scale", 0.0f);
    q->x_signed = cp_node_attr_int(n, "int8_x_signed", 0) != 0;
    const struct cp_attr *a = cp_node_attr(n, "int8_w_scales");
    if (!a || a->type != CP_ATTR_FLOATS || a->n == 0 || !(q->x_scale > 0) || !isfinite(q->x_scale))
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!(a->floats[i] > 0) || !isfinite(a->floats[i]))
            return false;
    q->w_scales = a->floats;
    q->n_w = a->n;
    return true;
}

void cp_dk_quantize_weights(const float *w, int8_t *dst, int64_t n, const float *scales,
                            int64_t channels, int64_t inner)
{
    for (int64_t i = 0; i < n; i++) {
        float v = nearbyintf(w[i] / scales[(i / inner) % channels]);
        dst[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : v);
    }
}

enum cp_status cp_dk_reorder_now(struct cp_dk_prog *p, int src, int dst)
{
    const dnnl_memory_desc_t *smd, *dmd;
    if (src < 0 || dst < 0 || dnnl_memory_get_memory_desc(p->mems[src], &smd) != dnnl_success ||
        dnnl_memory_get_memory_desc(p->mems[dst], &dmd) != dnnl_success)
        return CP_ERR_INTERNAL;
    /* A one-off reorder: library-managed scratchpad is fine here. */
    dnnl_primitive_desc_t pd;
    if (dnnl_reorder_primitive_desc_create(&pd, smd, p->engine, dmd, p->engine, NULL) !=
        dnnl_success)
        return CP_ERR_UNSUPPORTED;
    dnnl_primitive_t prim;
    dnnl_status_t s = dnnl_primitive_create(&prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success)
        return CP_ERR_INTERNAL;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, p->mems[src]}, {DNNL_ARG_TO, p->mems[dst]}};
    s = dnnl_primitive_execute(prim, p->stream, 2, args);
    if (s == dnnl_success)
        s = dnnl_stream_wait(p->stream);
    dnnl_primitive_destroy(prim);
    return s == dnnl_success ? CP_OK : CP_ERR_INTERNAL;
}

size_t cp_dk_prog_scratch_bytes(const struct cp_dk_prog *p)
{
    return p->scratch_top + align_up(p->scratch_pads);
}

static enum cp_status bind_scratch(struct cp_dk_prog *p, void *scratch)
{
    for (int i = 0; i < p->nmems; i++) {
        int64_t off = p->scratch_off[i];
        if (off == -1)
            continue;
        if (off == -2)
            off = (int64_t)p->scratch_top;
        if (!scratch ||
            dnnl_memory_set_data_handle(p->mems[i], (char *)scratch + off) != dnnl_success)
            return CP_ERR_INTERNAL;
    }
    p->bound = scratch;
    return CP_OK;
}

enum cp_status cp_dk_prog_run(struct cp_dk_prog *p, void *scratch)
{
    if (p->bound != scratch && cp_dk_prog_scratch_bytes(p) > 0 && bind_scratch(p, scratch) != CP_OK)
        return CP_ERR_INTERNAL;
    for (int i = 0; i < p->nsteps; i++) {
        const struct cp_dk_step *s = &p->steps[i];
        if (!s->prim) {
            /* the primitives before it have finished (a CPU stream runs
             * them in order, synchronously) */
            if (run_to_bf16(p, s) != CP_OK)
                return CP_ERR_INTERNAL;
            continue;
        }
        if (dnnl_primitive_execute(s->prim, p->stream, s->nargs, s->args) != dnnl_success)
            return CP_ERR_INTERNAL;
    }
    return dnnl_stream_wait(p->stream) == dnnl_success ? CP_OK : CP_ERR_INTERNAL;
}

dnnl_data_type_t cp_dk_dtype(enum cp_dtype dt)
{
    switch (dt) {
    case CP_DTYPE_F32:
        return dnnl_f32;
    case CP_DTYPE_F16:
        return dnnl_f16;
    case CP_DTYPE_BF16:
        return dnnl_bf16;
    case CP_DTYPE_I8:
        return dnnl_s8;
    case CP_DTYPE_U8:
    case CP_DTYPE_BOOL:
        return dnnl_u8;
    case CP_DTYPE_I32:
        return dnnl_s32;
    default:
        return dnnl_data_type_undef;
    }
}

bool cp_dk_md_plain(dnnl_memory_desc_t *md, int rank, const int64_t *dims, enum cp_dtype dt)
{
    dnnl_data_type_t t = cp_dk_dtype(dt);
    if (t == dnnl_data_type_undef || rank < 0 || rank > DNNL_MAX_NDIMS)
        return false;
    dnnl_dims_t d, st;
    int r = rank ? rank : 1;
    for (int i = 0; i < r; i++)
        d[i] = rank ? dims[i] : 1;
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        st[i] = s;
        s *= d[i] > 0 ? d[i] : 1;
    }
    return dnnl_memory_desc_init_by_strides(md, r, d, t, st) == dnnl_success;
}

struct cp_dk_prog *cp_dk_kernel_prog(struct cp_kexec *k)
{
    struct cp_dk_prog *p = calloc(1, sizeof *p);
    if (p)
        cp_dk_prog_init(p, k->env);
    k->state = p;
    return p;
}

enum cp_status cp_dk_kernel_run(struct cp_kexec *k)
{
    return cp_dk_prog_run(k->state, k->scratch);
}

void cp_dk_kernel_release(struct cp_kexec *k)
{
    if (k->state) {
        cp_dk_prog_release(k->state);
        free(k->state);
        k->state = NULL;
    }
}

const char *cp_dk_isa_bf16(const struct cp_graph *g, const struct cp_node *n)
{
    (void)g;
    return strcmp(cp_node_attr_string(n, "compute_precision", "fp32"), "bf16") == 0
               ? "avx512f avx512bw avx512vl avx512dq"
               : NULL;
}

enum cp_status cp_dk_fail(struct cp_kexec *k, struct cp_diag *d, const char *what, dnnl_status_t s)
{
    return cp_diag_set(d, CP_ERR_INTERNAL, "node '%s' (%s): oneDNN %s failed (status %d)",
                       k->node->name, cp_op_name(k->node->op), what, (int)s);
}
