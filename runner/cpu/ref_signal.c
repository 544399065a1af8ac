/* Reference kernels of the signal ops: DFT (opsets 17-21; from 20 the axis
 * is an input), STFT, HannWindow, HammingWindow, BlackmanWindow and
 * MelWeightMatrix (opset 17 on). Math in double; a transform of
 * power-of-two length is an iterative radix-2 FFT, any other length
 * Bluestein's chirp-z convolution over power-of-two FFTs (O(n log n) both). The
 * windows and the mel matrix are graph/op_eval.h's, which the constant
 * folder uses too. */
#include "graph/op_eval.h" /* cp_eval_window, cp_eval_mel_weight_matrix */
#include "runner/cpu/ref_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static bool is_float(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F32 || dt == CP_DTYPE_F16 || dt == CP_DTYPE_F64 || dt == CP_DTYPE_BF16;
}

static bool is_index(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I32 || dt == CP_DTYPE_I64;
}

/* The one integer held by scalar tensor t, when known before run time
 * (inferred value or initializer data). */
static bool const_int(const struct cp_tensor *t, int64_t *v)
{
    if (!t || !is_index(t->dtype) || cp_ref_numel(&t->shape) != 1)
        return false;
    if (t->value && t->value_len == 1) {
        *v = t->value[0];
        return true;
    }
    if (t->data && t->nbytes >= cp_dtype_size(t->dtype)) {
        *v = cp_elem_load_i64(t->data, t->dtype, 0);
        return true;
    }
    return false;
}

static bool scalar_int_ok(const struct cp_tensor *t)
{
    return !t || (is_index(t->dtype) && cp_ref_numel(&t->shape) == 1);
}

/* ---- the transform ----------------------------------------------------------- */

static bool is_pow2(int64_t n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

static int64_t pow2_at_least(int64_t n)
{
    int64_t m = 1;
    while (m < n)
        m <<= 1;
    return m;
}

/* Doubles of work space transform() needs for length n: the twiddles of a
 * power-of-two FFT, else Bluestein's chirp and five arrays of the padded
 * length M >= 2n - 1. */
static int64_t work_doubles(int64_t n)
{
    return is_pow2(n) ? 2 * n : 2 * n + 10 * pow2_at_least(2 * n - 1);
}

/* Scratch bytes for a transform of length n: the data (2n doubles), the
 * result (2n) and the work space. */
static size_t dft_scratch(int64_t n)
{
    return (size_t)(4 * n + work_doubles(n)) * sizeof(double);
}

/* A bound on dft_scratch(n) for every n <= most. */
static size_t dft_scratch_bound(int64_t most)
{
    return (size_t)(4 * most + 2 * most + 10 * pow2_at_least(2 * most)) * sizeof(double);
}

/* Radix-2 FFT of complex x[n] (interleaved re, im; n a power of two) into
 * y[n]; sign -1 forward, +1 inverse (unscaled). tw: 2n doubles. */
static void fft2(const double *x, double *y, int64_t n, int sign, double *tw)
{
    for (int64_t m = 0; m < n; m++) {
        double a = sign * 2.0 * M_PI * (double)m / (double)n;
        tw[2 * m] = cos(a);
        tw[2 * m + 1] = sin(a);
    }
    int bits = 0;
    while ((INT64_C(1) << bits) < n)
        bits++;
    for (int64_t i = 0; i < n; i++) { /* bit-reversed copy */
        int64_t r = 0;
        for (int b = 0; b < bits; b++)
            r |= ((i >> b) & 1) << (bits - 1 - b);
        y[2 * r] = x[2 * i];
        y[2 * r + 1] = x[2 * i + 1];
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
        int64_t half = len / 2, step = n / len;
        for (int64_t s = 0; s < n; s += len)
            for (int64_t j = 0; j < half; j++) {
                double wr = tw[2 * j * step], wi = tw[2 * j * step + 1];
                double *u = &y[2 * (s + j)], *v = &y[2 * (s + j + half)];
                double tr = v[0] * wr - v[1] * wi, ti = v[0] * wi + v[1] * wr;
                v[0] = u[0] - tr;
                v[1] = u[1] - ti;
                u[0] += tr;
                u[1] += ti;
            }
    }
}

/* The DFT of complex x[n] into y[n], sign -1 forward, +1 inverse
 * (unscaled): an FFT for a power-of-two n, else Bluestein's algorithm,
 * jk = (j² + k² - (k-j)²) / 2 turning the transform into a convolution
 * with the chirp c[m] = e^(sign iπ m²/n), done by FFTs of a power-of-two
 * length M >= 2n - 1. work: work_doubles(n). */
static void transform(const double *x, double *y, int64_t n, int sign, double *work)
{
    if (is_pow2(n)) {
        fft2(x, y, n, sign, work);
        return;
    }
    int64_t M = pow2_at_least(2 * n - 1);
    double *c = work, *a = c + 2 * n, *b = a + 2 * M, *fa = b + 2 * M, *fb = fa + 2 * M,
           *tw = fb + 2 * M;
    for (int64_t m = 0; m < n; m++) {
        /* m² mod 2n keeps the angle small and exact. */
        int64_t q = (int64_t)(((unsigned __int128)m * (unsigned __int128)m) % (unsigned)(2 * n));
        double ang = sign * M_PI * (double)q / (double)n;
        c[2 * m] = cos(ang);
        c[2 * m + 1] = sin(ang);
    }
    memset(a, 0, (size_t)(4 * M) * sizeof(double)); /* a and b */
    for (int64_t j = 0; j < n; j++) {
        a[2 * j] = x[2 * j] * c[2 * j] - x[2 * j + 1] * c[2 * j + 1];
        a[2 * j + 1] = x[2 * j] * c[2 * j + 1] + x[2 * j + 1] * c[2 * j];
    }
    for (int64_t m = 0; m < n; m++) { /* conj(c) at m and -m (mod M) */
        b[2 * m] = c[2 * m];
        b[2 * m + 1] = -c[2 * m + 1];
        if (m > 0) {
            b[2 * (M - m)] = c[2 * m];
            b[2 * (M - m) + 1] = -c[2 * m + 1];
        }
    }
    fft2(a, fa, M, -1, tw);
    fft2(b, fb, M, -1, tw);
    for (int64_t i = 0; i < M; i++) {
        double re = fa[2 * i] * fb[2 * i] - fa[2 * i + 1] * fb[2 * i + 1];
        double im = fa[2 * i] * fb[2 * i + 1] + fa[2 * i + 1] * fb[2 * i];
        a[2 * i] = re;
        a[2 * i + 1] = im;
    }
    fft2(a, fa, M, 1, tw);
    for (int64_t k = 0; k < n; k++) {
        double re = fa[2 * k] / (double)M, im = fa[2 * k + 1] / (double)M;
        y[2 * k] = re * c[2 * k] - im * c[2 * k + 1];
        y[2 * k + 1] = re * c[2 * k + 1] + im * c[2 * k];
    }
}

/* ---- DFT -------------------------------------------------------------------- */

struct dft_form {
    int axis;
    int64_t len; /* transform length: dft_length, else the axis' size */
    bool inverse, onesided;
};

/* The node's form; in_data NULL: before run time (dft_length may then be
 * unknown: len -1). */
static bool dft_form(const struct cp_graph *g, const struct cp_node *n, void *const *in_data,
                     struct dft_form *f)
{
    const struct cp_tensor *x = cp_ref_in(g, n, 0);
    int r = x->shape.rank;
    int64_t axis = cp_node_attr_int(n, "axis", 1);
    if (cp_ref_opset(g) >= 20) {
        const struct cp_tensor *ta = n->n_inputs > 2 ? cp_ref_in(g, n, 2) : NULL;
        axis = -2;
        if (ta && !(in_data ? (axis = cp_elem_load_i64(in_data[2], ta->dtype, 0), true)
                            : const_int(ta, &axis)))
            return false;
    }
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis > r - 2)
        return false;
    f->axis = (int)axis;
    f->inverse = cp_node_attr_int(n, "inverse", 0) != 0;
    f->onesided = cp_node_attr_int(n, "onesided", 0) != 0;
    f->len = x->shape.dims[axis].value;
    const struct cp_tensor *tl = cp_ref_in(g, n, 1);
    if (tl) {
        f->len = -1;
        if (in_data)
            f->len = cp_elem_load_i64(in_data[1], tl->dtype, 0);
        else
            const_int(tl, &f->len);
    }
    return !(f->onesided && f->inverse);
}

static bool dft_out_ok(const struct cp_tensor *x, const struct cp_tensor *y,
                       const struct dft_form *f)
{
    int r = x->shape.rank;
    if (y->shape.rank != r || y->shape.dims[r - 1].value != 2)
        return false;
    for (int i = 0; i < r - 1; i++)
        if (i != f->axis && y->shape.dims[i].value != x->shape.dims[i].value)
            return false;
    if (f->len < 0)
        return true; /* checked at run time */
    return f->len > 0 && y->shape.dims[f->axis].value == (f->onesided ? f->len / 2 + 1 : f->len);
}

static bool dft_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs > 3 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    struct dft_form f;
    if (!x || !is_float(x->dtype) || y->dtype != x->dtype || x->shape.rank < 2 ||
        !scalar_int_ok(cp_ref_in(g, n, 1)) || !scalar_int_ok(cp_ref_in(g, n, 2)) ||
        (cp_ref_opset(g) < 20 && n->n_inputs > 2))
        return false;
    int64_t c = x->shape.dims[x->shape.rank - 1].value;
    return (c == 1 || c == 2) && dft_form(g, n, NULL, &f) && dft_out_ok(x, y, &f);
}

static enum cp_status dft_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    /* The transform is never longer than the output's axis unless onesided
     * (at most twice as long, plus one). */
    const struct cp_tensor *y = k->out[0];
    int64_t most = 1;
    for (int i = 0; i < y->shape.rank - 1; i++)
        if (y->shape.dims[i].value > most)
            most = y->shape.dims[i].value;
    k->scratch_bytes = dft_scratch_bound(2 * most + 2);
    return CP_OK;
}

static enum cp_status dft_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *y = k->out[0];
    struct dft_form f;
    if (!dft_form(k->g, k->node, k->in_data, &f) || !dft_out_ok(x, y, &f) ||
        dft_scratch(f.len) > k->scratch_bytes)
        return CP_ERR_INTERNAL; /* axis or dft_length disagrees with the planned shape */
    int r = x->shape.rank;
    int64_t cin = x->shape.dims[r - 1].value, nin = x->shape.dims[f.axis].value;
    int64_t nout = y->shape.dims[f.axis].value;
    int64_t outer = cp_ref_span(&x->shape, 0, f.axis),
            inner = cp_ref_span(&x->shape, f.axis + 1, r - 1);
    double *buf = k->scratch, *res = buf + 2 * f.len, *tw = res + 2 * f.len;
    double scale = f.inverse ? 1.0 / (double)f.len : 1.0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < inner; q++) {
            for (int64_t j = 0; j < f.len; j++) {
                int64_t e = ((o * nin + j) * inner + q) * cin;
                bool in = j < nin;
                buf[2 * j] = in ? cp_elem_load_f64(k->in_data[0], x->dtype, e) : 0.0;
                buf[2 * j + 1] =
                    in && cin == 2 ? cp_elem_load_f64(k->in_data[0], x->dtype, e + 1) : 0.0;
            }
            transform(buf, res, f.len, f.inverse ? 1 : -1, tw);
            for (int64_t j = 0; j < nout; j++) {
                int64_t e = ((o * nout + j) * inner + q) * 2;
                cp_elem_store_f64(k->out_data[0], y->dtype, e, res[2 * j] * scale);
                cp_elem_store_f64(k->out_data[0], y->dtype, e + 1, res[2 * j + 1] * scale);
            }
        }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_dft, CP_OP_DFT, dft_supports, dft_prepare, dft_run);

/* ---- STFT ------------------------------------------------------------------- */

static bool stft_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs > 4 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    const struct cp_tensor *w = cp_ref_in(g, n, 2), *fl = cp_ref_in(g, n, 3);
    if (!x || !is_float(x->dtype) || y->dtype != x->dtype || x->shape.rank != 3 ||
        y->shape.rank != 4 || !scalar_int_ok(cp_ref_in(g, n, 1)) || !cp_ref_in(g, n, 1) ||
        !scalar_int_ok(fl) || (!w && !fl))
        return false;
    if (w && (w->dtype != x->dtype || w->shape.rank != 1))
        return false;
    int64_t c = x->shape.dims[2].value;
    bool onesided = cp_node_attr_int(n, "onesided", 1) != 0;
    if ((c != 1 && c != 2) || (onesided && c == 2))
        return false; /* a onesided transform of a complex signal is not defined */
    return y->shape.dims[0].value == x->shape.dims[0].value && y->shape.dims[3].value == 2;
}

static enum cp_status stft_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    const struct cp_tensor *y = k->out[0];
    k->scratch_bytes = dft_scratch_bound(2 * y->shape.dims[2].value + 2);
    return CP_OK;
}

static enum cp_status stft_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *y = k->out[0];
    size_t ni = k->node->n_inputs;
    const void *win = ni > 2 ? k->in_data[2] : NULL;
    int64_t step = cp_elem_load_i64(k->in_data[1], k->in[1]->dtype, 0);
    int64_t flen = win ? k->in[2]->shape.dims[0].value : -1;
    if (ni > 3 && k->in_data[3]) {
        int64_t given = cp_elem_load_i64(k->in_data[3], k->in[3]->dtype, 0);
        if (win && given != flen)
            return CP_ERR_INTERNAL;
        flen = given;
    }
    bool onesided = cp_node_attr_int(k->node, "onesided", 1) != 0;
    int64_t batch = x->shape.dims[0].value, len = x->shape.dims[1].value,
            cin = x->shape.dims[2].value;
    if (step <= 0 || flen <= 0 || flen > len)
        return CP_ERR_INTERNAL;
    int64_t frames = (len - flen) / step + 1, bins = onesided ? flen / 2 + 1 : flen;
    if (y->shape.dims[1].value != frames || y->shape.dims[2].value != bins ||
        dft_scratch(flen) > k->scratch_bytes)
        return CP_ERR_INTERNAL; /* frame_step or frame_length disagrees with the plan */
    double *buf = k->scratch, *res = buf + 2 * flen, *tw = res + 2 * flen;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t f = 0; f < frames; f++) {
            for (int64_t j = 0; j < flen; j++) {
                double wv = win ? cp_elem_load_f64(win, x->dtype, j) : 1.0;
                int64_t e = (b * len + f * step + j) * cin;
                buf[2 * j] = wv * cp_elem_load_f64(k->in_data[0], x->dtype, e);
                buf[2 * j + 1] =
                    cin == 2 ? wv * cp_elem_load_f64(k->in_data[0], x->dtype, e + 1) : 0.0;
            }
            transform(buf, res, flen, -1, tw);
            for (int64_t j = 0; j < bins; j++) {
                int64_t e = ((b * frames + f) * bins + j) * 2;
                cp_elem_store_f64(k->out_data[0], y->dtype, e, res[2 * j]);
                cp_elem_store_f64(k->out_data[0], y->dtype, e + 1, res[2 * j + 1]);
            }
        }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_stft, CP_OP_STFT, stft_supports, stft_prepare, stft_run);

/* ---- windows ---------------------------------------------------------------- */

static bool window_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 1 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    return scalar_int_ok(cp_ref_in(g, n, 0)) && y->shape.rank == 1 && y->dtype != CP_DTYPE_BOOL;
}

/* op_eval.h's window (cp_eval_window), of the size the plan gave the output. */
static enum cp_status window_run(struct cp_kexec *k)
{
    int64_t size = cp_elem_load_i64(k->in_data[0], k->in[0]->dtype, 0);
    const struct cp_tensor *y = k->out[0];
    if (size != y->shape.dims[0].value)
        return CP_ERR_INTERNAL; /* the size disagrees with the planned shape */
    cp_eval_window(k->node->op, cp_node_attr_int(k->node, "periodic", 1) != 0, size, y->dtype,
                   k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_hann_window, CP_OP_HANN_WINDOW, window_supports, NULL, window_run);
CP_REF_KERNEL(cp_ref_hamming_window, CP_OP_HAMMING_WINDOW, window_supports, NULL, window_run);
CP_REF_KERNEL(cp_ref_blackman_window, CP_OP_BLACKMAN_WINDOW, window_supports, NULL, window_run);

/* ---- MelWeightMatrix ------------------------------------------------------------ */

static bool mel_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 5 || n->n_outputs != 1)
        return false;
    for (size_t i = 0; i < 3; i++)
        if (!scalar_int_ok(cp_ref_in(g, n, i)))
            return false;
    for (size_t i = 3; i < 5; i++) {
        const struct cp_tensor *t = cp_ref_in(g, n, i);
        if (!t || !is_float(t->dtype) || cp_ref_numel(&t->shape) != 1)
            return false;
    }
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    return y->shape.rank == 2 && y->dtype != CP_DTYPE_BOOL;
}

static enum cp_status mel_run(struct cp_kexec *k)
{
    int64_t mel = cp_elem_load_i64(k->in_data[0], k->in[0]->dtype, 0);
    int64_t dft = cp_elem_load_i64(k->in_data[1], k->in[1]->dtype, 0);
    int64_t rate = cp_elem_load_i64(k->in_data[2], k->in[2]->dtype, 0);
    double lo = cp_elem_load_f64(k->in_data[3], k->in[3]->dtype, 0);
    double hi = cp_elem_load_f64(k->in_data[4], k->in[4]->dtype, 0);
    const struct cp_tensor *y = k->out[0];
    if (y->shape.dims[0].value != dft / 2 + 1 || y->shape.dims[1].value != mel ||
        !cp_eval_mel_weight_matrix(mel, dft, rate, lo, hi, y->dtype, k->out_data[0]))
        return CP_ERR_INTERNAL; /* the inputs disagree with the planned shape */
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_mel_weight_matrix, CP_OP_MEL_WEIGHT_MATRIX, mel_supports, NULL, mel_run);
