/* Fast LSTM, GRU and RNN (f32, ONNX's default activations, any direction,
 * layout, clip, sequence_lens, peepholes, input_forget and
 * linear_before_reset).
 *
 * The input projection X·Wᵀ of every time step is one oneDNN matmul per
 * direction, [seq*batch, I] x [I, gates*H], into scratch; with at most
 * four rows (a streaming model's one step) and a constant W it is I axpys
 * per row over W transposed at prepare instead. The recurrence then runs
 * per direction and batch row (rows in parallel): the gates'
 * pre-activations are that projection plus the biases plus h·Rᵀ (axpys
 * over R transposed at prepare when R is constant, else dot products along
 * R's rows; a single wide row shares them across the threads), and the
 * gate math is a plain f32 loop over H the compiler vectorises
 * (fast_math.h's exp). Other activations go to the reference kernel
 * (ref_rnn.c), which this kernel is checked against (the [rnn] cases of
 * tests/runner/harness_cases_families.h). */
#include "graph/op_eval.h" /* cp_rnn_describe */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_kernels.h"
#include "runner/cpu/fast_math.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/ref_util.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

struct frnn {
    struct cp_dk_prog prog;
    struct cp_rnn_desc rd;
    int64_t S, N, I, H;
    int xw[2];      /* scratch memory of each direction's projection */
    size_t own_off; /* where this kernel's own scratch starts */
    size_t per_row; /* floats of scratch per thread */
    int threads;
    /* LSTM and RNN with constant R: R transposed per direction, [H][GH],
     * so a row's step adds h[j] times row j (a vectorised axpy) instead of
     * taking GH dot products, each ending in a horizontal sum. NULL:
     * dot products. */
    float *rt;
    /* A constant W and at most WT_MAX_ROWS rows (seq x batch): W
     * transposed, [I][GH] per direction, and the projection is I axpys
     * per row into own scratch (xw_off), no oneDNN call: a primitive's
     * fixed cost is most of a one-step projection. NULL: oneDNN. */
    float *wt;
    size_t xw_off; /* bytes into scratch of the projections, with wt */
};

#define RT_MAX_BYTES ((size_t)8 << 20) /* each transposed copy at most */
#define WT_MAX_ROWS  4

/* [dirs][rows][cols] -> [dirs][cols][rows], or NULL without memory. */
static float *transposed(const float *m, int dirs, int64_t rows, int64_t cols)
{
    float *t = malloc((size_t)(dirs * rows * cols) * sizeof *t);
    for (int d = 0; t && d < dirs; d++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                t[(d * cols + c) * rows + r] = m[(d * rows + r) * cols + c];
    return t;
}

static bool frnn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_kernel *ref = cp_kernel_reference(n->op);
    if ((n->op != CP_OP_LSTM && n->op != CP_OP_GRU && n->op != CP_OP_RNN) || !ref ||
        !ref->supports(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0);
    if (x->dtype != CP_DTYPE_F32 || cp_ref_numel(&x->shape) == 0)
        return false; /* an empty sequence or batch: the reference's loops */
    struct cp_rnn_desc rd;
    char why[160];
    if (!cp_rnn_describe(g, n, cp_ref_opset(g), &rd, why, sizeof why))
        return false;
    for (int d = 0; d < rd.dirs; d++)
        for (int k = 0; k < rd.n_acts; k++) {
            enum cp_rnn_act want = k == 0 && n->op != CP_OP_RNN ? CP_RNN_SIGMOID : CP_RNN_TANH;
            if (rd.fn[d][k].act != want)
                return false;
        }
    return true;
}

static enum cp_status frnn_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct frnn *st = calloc(1, sizeof *st);
    if (!st)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    k->state = st;
    cp_dk_prog_init(&st->prog, k->env);
    char why[160];
    cp_rnn_describe(k->g, k->node, cp_ref_opset(k->g), &st->rd, why, sizeof why);
    const struct cp_tensor *x = k->in[0];
    st->S = x->shape.dims[st->rd.layout ? 1 : 0].value;
    st->N = x->shape.dims[st->rd.layout ? 0 : 1].value;
    st->I = x->shape.dims[2].value;
    st->H = st->rd.hidden;
    int64_t GH = st->rd.gates * st->H, rows = st->S * st->N;
    st->threads = k->env && k->env->threads > 0 ? k->env->threads : 1;
    const struct cp_tensor *W = k->in[1], *R = k->in[2];
    int dirs = st->rd.dirs;
    if (k->node->op != CP_OP_GRU && R->kind == CP_TENSOR_INITIALIZER && k->in_data[2] &&
        (size_t)(dirs * GH * st->H) * sizeof(float) <= RT_MAX_BYTES &&
        !(st->rt = transposed(k->in_data[2], dirs, GH, st->H)))
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    if (rows <= WT_MAX_ROWS && W->kind == CP_TENSOR_INITIALIZER && k->in_data[1] &&
        (size_t)(dirs * GH * st->I) * sizeof(float) <= RT_MAX_BYTES &&
        !(st->wt = transposed(k->in_data[1], dirs, GH, st->I)))
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    for (int dir = 0; !st->wt && dir < st->rd.dirs; dir++) {
        dnnl_memory_desc_t a, b, y;
        dnnl_dims_t ad = {rows, st->I}, as = {st->I, 1};
        dnnl_dims_t bd = {st->I, GH}, bs = {1, st->I};
        dnnl_dims_t yd = {rows, GH}, ys = {GH, 1};
        if (dnnl_memory_desc_init_by_strides(&a, 2, ad, dnnl_f32, as) ||
            dnnl_memory_desc_init_by_strides(&b, 2, bd, dnnl_f32, bs) ||
            dnnl_memory_desc_init_by_strides(&y, 2, yd, dnnl_f32, ys))
            return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
        dnnl_matmul_desc_t md;
        dnnl_status_t s = dnnl_matmul_desc_init(&md, &a, &b, NULL, &y);
        dnnl_primitive_attr_t attr = s == dnnl_success ? cp_dk_attr_create() : NULL;
        dnnl_primitive_desc_t pd = NULL;
        if (s == dnnl_success && !attr)
            s = dnnl_out_of_memory;
        if (s == dnnl_success)
            s = dnnl_primitive_desc_create(&pd, &md, attr, st->prog.engine, NULL);
        dnnl_primitive_attr_destroy(attr);
        if (s != dnnl_success)
            return cp_dk_fail(k, d, "matmul primitive descriptor", s);
        float *w = (float *)k->in_data[1] + (int64_t)dir * GH * st->I;
        int ids[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
        int mems[3] = {cp_dk_mem_user(&st->prog, &a, k->in_data[0]),
                       cp_dk_mem_user(&st->prog, &b, w), cp_dk_mem_scratch(&st->prog, &y)};
        st->xw[dir] = mems[2];
        enum cp_status cs = mems[0] < 0 || mems[1] < 0 || mems[2] < 0
                                ? CP_ERR_INTERNAL
                                : cp_dk_step_add(&st->prog, pd, 3, ids, mems);
        dnnl_primitive_desc_destroy(pd);
        if (cs != CP_OK)
            return cp_diag_set(d, cs, "node '%s' (%s): could not build the oneDNN program",
                               k->node->name, cp_op_name(k->node->op));
    }
    /* Own scratch: the combined biases [dirs, 2 * gates*H], then per
     * thread h, c, the new h and the gates; with wt, the projections
     * [dirs, rows, gates*H]. */
    st->own_off = (cp_dk_prog_scratch_bytes(&st->prog) + 63) & ~(size_t)63;
    st->per_row = (size_t)(3 * st->H + GH + 16);
    size_t own = (size_t)(dirs * 2 * GH) + (size_t)st->threads * st->per_row;
    st->xw_off = st->own_off + own * sizeof(float);
    k->scratch_bytes = st->xw_off + (st->wt ? (size_t)(dirs * rows * GH) * sizeof(float) : 0);
    return CP_OK;
}

static void frnn_release(struct cp_kexec *k)
{
    struct frnn *st = k->state;
    if (st) {
        cp_dk_prog_release(&st->prog);
        free(st->rt);
        free(st->wt);
        free(st);
        k->state = NULL;
    }
}

static inline float clipf(const struct cp_rnn_desc *rd, float v)
{
    if (!rd->has_clip)
        return v;
    return v < -rd->clip ? -rd->clip : v > rd->clip ? rd->clip : v;
}

static inline float sigm(float x)
{
    return 1.0f / (1.0f + cp_fm_exp(-x));
}

static inline float tanhf_fast(float x)
{
    float ax = x < 0 ? -x : x;
    float e = cp_fm_exp(-2.0f * ax);
    float t = (1.0f - e) / (1.0f + e);
    return x < 0 ? -t : t;
}

static float dot(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* z[0, n) += h . R for R transposed ([H][n] rows in rt). */
CP_FK_HOT static void add_hr(float *z, const float *h, const float *rt, int64_t H, int64_t n)
{
    for (int64_t j = 0; j < H; j++) {
        float hj = h[j];
        const float *row = rt + j * n;
#pragma omp simd
        for (int64_t r = 0; r < n; r++)
            z[r] += hj * row[r];
    }
}

/* One direction's recurrence for batch row b; `inner` threads share its
 * h·Rᵀ dot products (1: this row runs on one thread). */
static void row_run(const struct frnn *st, struct cp_kexec *k, int dir, int64_t b, int inner,
                    const float *xw, const float *bias, float *buf)
{
    const struct cp_rnn_desc *rd = &st->rd;
    const int64_t S = st->S, N = st->N, H = st->H, G = rd->gates, D = rd->dirs, GH = G * H;
    size_t n_in = k->node->n_inputs, n_out = k->node->n_outputs;
    const float *R = (const float *)k->in_data[2] + dir * GH * H;
    const float *RT = st->rt ? st->rt + dir * H * GH : NULL;
    const void *L = n_in > 4 ? k->in_data[4] : NULL;
    const float *H0 = n_in > 5 ? k->in_data[5] : NULL, *C0 = n_in > 6 ? k->in_data[6] : NULL;
    const float *P = n_in > 7 && k->in_data[7] ? (const float *)k->in_data[7] + dir * 3 * H : NULL;
    float *Y = k->out_data[0], *YH = n_out > 1 ? k->out_data[1] : NULL;
    float *YC = n_out > 2 ? k->out_data[2] : NULL;
    bool rev = rd->reverse || dir == 1, gru = k->node->op == CP_OP_GRU;
    int64_t len = L ? cp_elem_load_i64(L, k->in[4]->dtype, b) : S;
    float *h = buf, *c = h + H, *hn = c + H, *z = hn + H;
    int64_t so = (rd->layout ? (b * D + dir) : (dir * N + b)) * H;
    for (int64_t j = 0; j < H; j++) {
        h[j] = H0 ? H0[so + j] : 0.0f;
        c[j] = C0 ? C0[so + j] : 0.0f;
    }
    for (int64_t s = 0; s < len; s++) {
        int64_t t = rev ? len - 1 - s : s;
        int64_t row = rd->layout ? b * S + t : t * N + b;
        const float *xr = xw + row * GH;
        for (int64_t r = 0; r < GH; r++)
            z[r] = xr[r] + bias[r];
        if (gru) {
            const float *rbh = bias + GH;
#pragma omp parallel for num_threads(inner) if (inner > 1) schedule(static)
            for (int64_t r = 0; r < 2 * H; r++)
                z[r] = sigm(clipf(rd, z[r] + dot(h, R + r * H, H)));
            if (rd->linear_before_reset) {
#pragma omp parallel for num_threads(inner) if (inner > 1) schedule(static)
                for (int64_t j = 0; j < H; j++)
                    hn[j] = z[2 * H + j] + z[H + j] * (dot(h, R + (2 * H + j) * H, H) + rbh[j]);
            } else {
                for (int64_t i = 0; i < H; i++)
                    c[i] = z[H + i] * h[i]; /* r∘h (c is free in a GRU) */
#pragma omp parallel for num_threads(inner) if (inner > 1) schedule(static)
                for (int64_t j = 0; j < H; j++)
                    hn[j] = z[2 * H + j] + dot(c, R + (2 * H + j) * H, H) + rbh[j];
            }
#pragma omp simd
            for (int64_t j = 0; j < H; j++) {
                float nv = tanhf_fast(clipf(rd, hn[j]));
                hn[j] = (1.0f - z[j]) * nv + z[j] * h[j];
            }
        } else if (k->node->op == CP_OP_RNN) {
            if (RT && inner == 1) {
                add_hr(z, h, RT, H, H);
                for (int64_t r = 0; r < H; r++)
                    hn[r] = tanhf_fast(clipf(rd, z[r]));
            } else {
#pragma omp parallel for num_threads(inner) if (inner > 1) schedule(static)
                for (int64_t r = 0; r < H; r++)
                    hn[r] = tanhf_fast(clipf(rd, z[r] + dot(h, R + r * H, H)));
            }
        } else {
            if (RT && inner == 1) {
                add_hr(z, h, RT, H, GH);
            } else {
#pragma omp parallel for num_threads(inner) if (inner > 1) schedule(static)
                for (int64_t r = 0; r < GH; r++)
                    z[r] += dot(h, R + r * H, H);
            }
            bool coupled = rd->input_forget;
#pragma omp simd
            for (int64_t j = 0; j < H; j++) {
                float pi = P ? P[j] : 0.0f, po = P ? P[H + j] : 0.0f, pf = P ? P[2 * H + j] : 0.0f;
                float ig = sigm(clipf(rd, z[j] + pi * c[j]));
                float fg = coupled ? 1.0f - ig : sigm(clipf(rd, z[2 * H + j] + pf * c[j]));
                float gg = tanhf_fast(clipf(rd, z[3 * H + j]));
                float cn = fg * c[j] + ig * gg;
                float og = sigm(clipf(rd, z[H + j] + po * cn));
                c[j] = cn;
                hn[j] = og * tanhf_fast(cn);
            }
        }
        memcpy(h, hn, (size_t)H * sizeof *h);
        float *yr = Y + (rd->layout ? ((b * S + t) * D + dir) : ((t * D + dir) * N + b)) * H;
        memcpy(yr, h, (size_t)H * sizeof *h);
    }
    if (YH)
        memcpy(YH + so, h, (size_t)H * sizeof *h);
    if (YC)
        memcpy(YC + so, c, (size_t)H * sizeof *c);
}

static enum cp_status frnn_run(struct cp_kexec *k)
{
    struct frnn *st = k->state;
    const struct cp_rnn_desc *rd = &st->rd;
    size_t n_in = k->node->n_inputs;
    const void *L = n_in > 4 ? k->in_data[4] : NULL;
    for (int64_t b = 0; b < st->N && L; b++) {
        int64_t len = cp_elem_load_i64(L, k->in[4]->dtype, b);
        if (len < 0 || len > st->S)
            return CP_ERR_INTERNAL; /* a sequence length outside [0, seq] */
    }
    const int64_t H = st->H, GH = rd->gates * H, rows = st->S * st->N;
    float *own_xw = (float *)((char *)k->scratch + st->xw_off);
    if (st->wt) {
        const float *x = k->in_data[0];
        for (int dir = 0; dir < rd->dirs; dir++)
            for (int64_t r = 0; r < rows; r++) {
                float *z = own_xw + (dir * rows + r) * GH;
                memset(z, 0, (size_t)GH * sizeof *z);
                add_hr(z, x + r * st->I, st->wt + dir * st->I * GH, st->I, GH);
            }
    } else {
        enum cp_status cs = cp_dk_prog_run(&st->prog, k->scratch);
        if (cs != CP_OK)
            return cs;
    }
    float *bias = (float *)((char *)k->scratch + st->own_off);
    float *bufs = bias + rd->dirs * 2 * GH;
    const float *B = n_in > 3 ? k->in_data[3] : NULL;
    bool gru = k->node->op == CP_OP_GRU;
    /* bias[d][0, GH): Wb + Rb (GRU's h gate: Wb only); [GH, GH + H): GRU's Rbh. */
    for (int dir = 0; dir < rd->dirs; dir++) {
        float *bd = bias + dir * 2 * GH;
        const float *wb = B ? B + dir * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
        for (int64_t r = 0; r < GH; r++)
            bd[r] = wb ? wb[r] + (gru && r >= 2 * H ? 0.0f : rb[r]) : 0.0f;
        for (int64_t j = 0; gru && j < H; j++)
            bd[GH + j] = rb ? rb[2 * H + j] : 0.0f;
    }
    memset(k->out_data[0], 0, (size_t)(st->S * rd->dirs * st->N * H) * sizeof(float));
    for (int dir = 0; dir < rd->dirs; dir++) {
        const float *xw =
            st->wt ? own_xw + dir * rows * GH
                   : (const float *)((char *)k->scratch + st->prog.scratch_off[st->xw[dir]]);
        const float *bd = bias + dir * 2 * GH;
        /* Rows in parallel; a single row (batch 1, common at inference)
         * shares its dot products instead when R is big enough to pay for
         * a fork per step. */
        if (st->N == 1 && st->threads > 1 && GH * H >= 65536) {
            row_run(st, k, dir, 0, st->threads, xw, bd, bufs);
            continue;
        }
        int nt = st->threads < st->N ? st->threads : (int)st->N;
#pragma omp parallel for num_threads(nt > 0 ? nt : 1) schedule(static)
        for (int64_t b = 0; b < st->N; b++)
            row_run(st, k, dir, b, 1, xw, bd, bufs + (size_t)omp_get_thread_num() * st->per_row);
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_lstm = {
    "onednn+c:lstm_f32", CP_OP_LSTM, frnn_supports, frnn_prepare, frnn_run, frnn_release, NULL};
const struct cp_kernel cp_fast_rnn = {"onednn+c:rnn_f32", CP_OP_RNN,    frnn_supports, frnn_prepare,
                                      frnn_run,           frnn_release, NULL};
const struct cp_kernel cp_fast_gru = {"onednn+c:gru_f32", CP_OP_GRU,    frnn_supports, frnn_prepare,
                                      frnn_run,           frnn_release, NULL};
