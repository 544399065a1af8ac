/* Reference kernels of LSTM, GRU and RNN, after ONNX's equations (opsets 7
 * to 21), in double precision over any float dtype.
 *
 * Per direction and batch row, for t over the row's sequence_lens steps
 * (reversed for the reverse direction):
 *   LSTM (gates i o f c):
 *     i = f(x Wiᵀ + h Riᵀ + Pi∘c + Wbi + Rbi)
 *     f = f(x Wfᵀ + h Rfᵀ + Pf∘c + Wbf + Rbf)   (1 - i with input_forget)
 *     g = g(x Wcᵀ + h Rcᵀ + Wbc + Rbc)
 *     c = f∘c + i∘g
 *     o = f(x Woᵀ + h Roᵀ + Po∘c + Wbo + Rbo)   (the new c)
 *     h = o∘h(c)
 *   GRU (gates z r h):
 *     z = f(x Wzᵀ + h Rzᵀ + Wbz + Rbz),  r = f(... r ...)
 *     n = g(x Whᵀ + (r∘h) Rhᵀ + Rbh + Wbh)      linear_before_reset 0
 *     n = g(x Whᵀ + r∘(h Rhᵀ + Rbh) + Wbh)      linear_before_reset 1
 *     h = (1 - z)∘n + z∘h
 *   RNN: h = f(x Wᵀ + h Rᵀ + Wb + Rb)
 * clip bounds every gate's input to [-clip, clip] before its activation.
 * Y's steps past a row's length are zero; Y_h and Y_c hold the last state
 * computed (the initial one for a zero-length row). */
#include "graph/op_eval.h" /* cp_rnn_describe */
#include "runner/cpu/ref_util.h"

#include <string.h>

struct rnn_geom {
    int64_t seq, batch, in, hidden;
};

static void geom(const struct cp_rnn_desc *rd, const struct cp_tensor *x, struct rnn_geom *gm)
{
    gm->seq = x->shape.dims[rd->layout ? 1 : 0].value;
    gm->batch = x->shape.dims[rd->layout ? 0 : 1].value;
    gm->in = x->shape.dims[2].value;
    gm->hidden = rd->hidden;
}

static bool shape_is(const struct cp_tensor *t, int rank, const int64_t *dims)
{
    if (!t || t->shape.rank != rank)
        return false;
    for (int i = 0; i < rank; i++)
        if (t->shape.dims[i].value != dims[i])
            return false;
    return true;
}

static bool is_float(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F32 || dt == CP_DTYPE_F16 || dt == CP_DTYPE_F64 || dt == CP_DTYPE_BF16;
}

static bool rnn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct cp_rnn_desc rd;
    char why[160];
    if (!cp_ref_node_is_static(g, n) ||
        !cp_rnn_describe(g, n, cp_ref_opset(g), &rd, why, sizeof why))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0);
    if (!x || x->shape.rank != 3 || !is_float(x->dtype) || rd.hidden <= 0)
        return false;
    struct rnn_geom gm;
    geom(&rd, x, &gm);
    int64_t dh = rd.dirs, gh = rd.gates * gm.hidden;
    if (!shape_is(cp_ref_in(g, n, 1), 3, (int64_t[]){dh, gh, gm.in}) ||
        !shape_is(cp_ref_in(g, n, 2), 3, (int64_t[]){dh, gh, gm.hidden}))
        return false;
    int64_t state[3] = {dh, gm.batch, gm.hidden};
    if (rd.layout)
        state[0] = gm.batch, state[1] = dh;
    size_t max_in = n->op == CP_OP_LSTM ? 8 : 6;
    if (n->n_inputs > max_in)
        return false;
    for (size_t i = 1; i < n->n_inputs; i++) {
        const struct cp_tensor *t = cp_ref_in(g, n, i);
        if (!t)
            continue;
        if (i == 4) {
            if ((t->dtype != CP_DTYPE_I32 && t->dtype != CP_DTYPE_I64) ||
                !shape_is(t, 1, &gm.batch))
                return false;
            continue;
        }
        if (t->dtype != x->dtype)
            return false;
        if ((i == 3 && !shape_is(t, 2, (int64_t[]){dh, 2 * gh})) ||
            ((i == 5 || i == 6) && !shape_is(t, 3, state)) ||
            (i == 7 && !shape_is(t, 2, (int64_t[]){dh, 3 * gm.hidden})))
            return false;
    }
    int64_t y[4] = {gm.seq, dh, gm.batch, gm.hidden};
    if (rd.layout)
        y[0] = gm.batch, y[1] = gm.seq, y[2] = dh;
    size_t max_out = n->op == CP_OP_LSTM ? 3 : 2;
    if (n->n_outputs > max_out || !shape_is(cp_ref_out(g, n, 0), 4, y))
        return false;
    for (size_t i = 1; i < n->n_outputs; i++) {
        const struct cp_tensor *t = cp_ref_out(g, n, i);
        if (t && (t->dtype != x->dtype || !shape_is(t, 3, state)))
            return false;
    }
    return cp_ref_out(g, n, 0)->dtype == x->dtype;
}

/* Scratch: h, c, the new h, and the gates' pre-activations, in doubles. */
static enum cp_status rnn_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    struct cp_rnn_desc rd;
    char why[160];
    cp_rnn_describe(k->g, k->node, cp_ref_opset(k->g), &rd, why, sizeof why);
    k->scratch_bytes = (size_t)(3 + rd.gates) * (size_t)rd.hidden * sizeof(double);
    return CP_OK;
}

static double clip_to(const struct cp_rnn_desc *rd, double v)
{
    if (!rd->has_clip)
        return v;
    return v < -rd->clip ? -rd->clip : v > rd->clip ? rd->clip : v;
}

static enum cp_status rnn_run(struct cp_kexec *k)
{
    struct cp_rnn_desc rd;
    char why[160];
    if (!cp_rnn_describe(k->g, k->node, cp_ref_opset(k->g), &rd, why, sizeof why))
        return CP_ERR_INTERNAL;
    const struct cp_tensor *xt = k->in[0];
    enum cp_dtype dt = xt->dtype;
    struct rnn_geom gm;
    geom(&rd, xt, &gm);
    const int64_t S = gm.seq, N = gm.batch, I = gm.in, H = gm.hidden, G = rd.gates, D = rd.dirs;
    size_t n_in = k->node->n_inputs, n_out = k->node->n_outputs;
    const void *X = k->in_data[0], *W = k->in_data[1], *R = k->in_data[2];
    const void *B = n_in > 3 ? k->in_data[3] : NULL, *L = n_in > 4 ? k->in_data[4] : NULL;
    const void *H0 = n_in > 5 ? k->in_data[5] : NULL, *C0 = n_in > 6 ? k->in_data[6] : NULL;
    const void *P = n_in > 7 ? k->in_data[7] : NULL;
    void *Y = k->out_data[0], *YH = n_out > 1 ? k->out_data[1] : NULL;
    void *YC = n_out > 2 ? k->out_data[2] : NULL;
    enum cp_dtype ldt = L ? k->in[4]->dtype : CP_DTYPE_I32;
    for (int64_t b = 0; b < N && L; b++) {
        int64_t len = cp_elem_load_i64(L, ldt, b);
        if (len < 0 || len > S)
            return CP_ERR_INTERNAL; /* a sequence length outside [0, seq] */
    }
    double *h = k->scratch, *c = h + H, *hn = c + H, *z = hn + H;
    /* Element offsets under either layout. */
#define XI(t, b, i) ((rd.layout ? ((b)*S + (t)) : ((t)*N + (b))) * I + (i))
#define YI(t, d, b, j)                                                                             \
    ((rd.layout ? (((b)*S + (t)) * D + (d)) : (((t)*D + (d)) * N + (b))) * H + (j))
#define SI(d, b, j) ((rd.layout ? ((b)*D + (d)) : ((d)*N + (b))) * H + (j))
    int64_t ny = S * D * N * H;
    for (int64_t e = 0; e < ny; e++)
        cp_elem_store_f64(Y, dt, e, 0.0);
    for (int64_t d = 0; d < D; d++) {
        bool rev = rd.reverse || d == 1;
        const struct cp_rnn_fn *fn = rd.fn[d];
        int64_t wo = d * G * H * I, ro = d * G * H * H, bo = d * 2 * G * H;
        for (int64_t b = 0; b < N; b++) {
            int64_t len = L ? cp_elem_load_i64(L, ldt, b) : S;
            for (int64_t j = 0; j < H; j++) {
                h[j] = H0 ? cp_elem_load_f64(H0, dt, SI(d, b, j)) : 0.0;
                c[j] = C0 ? cp_elem_load_f64(C0, dt, SI(d, b, j)) : 0.0;
            }
            for (int64_t s = 0; s < len; s++) {
                int64_t t = rev ? len - 1 - s : s;
                /* z[g*H + j] = x W_gᵀ + Wb_g (+ h R_gᵀ + Rb_g except GRU's h gate). */
                for (int64_t r = 0; r < G * H; r++) {
                    double acc = B ? cp_elem_load_f64(B, dt, bo + r) : 0.0;
                    for (int64_t i = 0; i < I; i++)
                        acc += cp_elem_load_f64(X, dt, XI(t, b, i)) *
                               cp_elem_load_f64(W, dt, wo + r * I + i);
                    z[r] = acc;
                }
                if (k->node->op == CP_OP_GRU) {
                    /* z and r take the recurrence first; the h gate after. */
                    for (int64_t r = 0; r < 2 * H; r++) {
                        double acc = B ? cp_elem_load_f64(B, dt, bo + G * H + r) : 0.0;
                        for (int64_t i = 0; i < H; i++)
                            acc += h[i] * cp_elem_load_f64(R, dt, ro + r * H + i);
                        z[r] = cp_rnn_apply(&fn[0], clip_to(&rd, z[r] + acc));
                    }
                    for (int64_t j = 0; j < H; j++) {
                        double rb = B ? cp_elem_load_f64(B, dt, bo + G * H + 2 * H + j) : 0.0;
                        double acc = 0.0;
                        if (rd.linear_before_reset) {
                            for (int64_t i = 0; i < H; i++)
                                acc += h[i] * cp_elem_load_f64(R, dt, ro + (2 * H + j) * H + i);
                            acc = z[H + j] * (acc + rb);
                        } else {
                            for (int64_t i = 0; i < H; i++)
                                acc += z[H + i] * h[i] *
                                       cp_elem_load_f64(R, dt, ro + (2 * H + j) * H + i);
                            acc += rb;
                        }
                        double nv = cp_rnn_apply(&fn[1], clip_to(&rd, z[2 * H + j] + acc));
                        hn[j] = (1.0 - z[j]) * nv + z[j] * h[j];
                    }
                } else {
                    for (int64_t r = 0; r < G * H; r++) {
                        double acc = B ? cp_elem_load_f64(B, dt, bo + G * H + r) : 0.0;
                        for (int64_t i = 0; i < H; i++)
                            acc += h[i] * cp_elem_load_f64(R, dt, ro + r * H + i);
                        z[r] += acc;
                    }
                    if (k->node->op == CP_OP_RNN) {
                        for (int64_t j = 0; j < H; j++)
                            hn[j] = cp_rnn_apply(&fn[0], clip_to(&rd, z[j]));
                    } else {
                        int64_t po = d * 3 * H;
                        for (int64_t j = 0; j < H; j++) {
                            double pi = P ? cp_elem_load_f64(P, dt, po + j) : 0.0;
                            double pout = P ? cp_elem_load_f64(P, dt, po + H + j) : 0.0;
                            double pf = P ? cp_elem_load_f64(P, dt, po + 2 * H + j) : 0.0;
                            double ig = cp_rnn_apply(&fn[0], clip_to(&rd, z[j] + pi * c[j]));
                            double fg =
                                rd.input_forget
                                    ? 1.0 - ig
                                    : cp_rnn_apply(&fn[0], clip_to(&rd, z[2 * H + j] + pf * c[j]));
                            double gg = cp_rnn_apply(&fn[1], clip_to(&rd, z[3 * H + j]));
                            c[j] = fg * c[j] + ig * gg;
                            double og = cp_rnn_apply(&fn[0], clip_to(&rd, z[H + j] + pout * c[j]));
                            hn[j] = og * cp_rnn_apply(&fn[2], c[j]);
                        }
                    }
                }
                memcpy(h, hn, (size_t)H * sizeof *h);
                for (int64_t j = 0; j < H; j++)
                    cp_elem_store_f64(Y, dt, YI(t, d, b, j), h[j]);
            }
            for (int64_t j = 0; j < H; j++) {
                if (YH)
                    cp_elem_store_f64(YH, dt, SI(d, b, j), h[j]);
                if (YC)
                    cp_elem_store_f64(YC, dt, SI(d, b, j), c[j]);
            }
        }
    }
#undef XI
#undef YI
#undef SI
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_lstm, CP_OP_LSTM, rnn_supports, rnn_prepare, rnn_run);
CP_REF_KERNEL(cp_ref_gru, CP_OP_GRU, rnn_supports, rnn_prepare, rnn_run);
CP_REF_KERNEL(cp_ref_rnn, CP_OP_RNN, rnn_supports, rnn_prepare, rnn_run);
