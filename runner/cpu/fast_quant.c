/* QuantizeLinear (f32 -> u8/i8) and DequantizeLinear (u8/i8 -> f32), per
 * tensor or per axis, as loops the compiler vectorises; they frame every
 * int8 region of a quantized model (the model's input and output, every
 * QDQ pair left unfolded). Other forms (blocks, 16-bit, f16 scales, i32)
 * stay on the reference.
 *
 * The arithmetic is the reference's, bit for bit: x / scale in f32 (a
 * division, not a reciprocal product), rounded half to even, then the zero
 * point added and saturated; NaN gives the zero point's 0. The rounding is
 * the add-and-subtract of 1.5 * 2^23 after clamping to the target range,
 * which rounds to nearest even under the default rounding mode. */
#include "runner/cpu/fast_kernels.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/ref_util.h"

#include <omp.h>
#include <stdint.h>

#define GRAIN 65536

/* The row structure of a per-axis parameter: rows of `inner` elements,
 * row r takes parameter r % len; per tensor: one row, len 1. */
struct qrows {
    int64_t rows, len, inner;
};

static bool plain(const struct cp_tensor *t)
{
    return !t || t->layout == CP_LAYOUT_UNDEF || t->layout == CP_LAYOUT_ND ||
           t->layout == CP_LAYOUT_NCHW;
}

static bool qdq_supports(const struct cp_graph *g, const struct cp_node *n, bool quantize)
{
    const struct cp_kernel *ref = quantize ? &cp_ref_quantize_linear : &cp_ref_dequantize_linear;
    if (!ref->supports(g, n) || cp_node_attr_int(n, "block_size", 0) != 0)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *s = cp_ref_in(g, n, 1),
                           *y = cp_ref_out(g, n, 0);
    if (!plain(x) || !plain(y) || s->dtype != CP_DTYPE_F32)
        return false;
    enum cp_dtype q = quantize ? y->dtype : x->dtype, f = quantize ? x->dtype : y->dtype;
    return f == CP_DTYPE_F32 && (q == CP_DTYPE_U8 || q == CP_DTYPE_I8);
}

static bool q_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return qdq_supports(g, n, true);
}

static bool dq_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return qdq_supports(g, n, false);
}

static void rows_of(const struct cp_kexec *k, struct qrows *r)
{
    const struct cp_shape *x = &k->in[0]->shape;
    int64_t n = cp_ref_numel(x), ns = cp_ref_numel(&k->in[1]->shape);
    if (ns == 1) {
        r->rows = 1, r->len = 1, r->inner = n;
        return;
    }
    int64_t axis = cp_node_attr_int(k->node, "axis", 1);
    if (axis < 0)
        axis += x->rank;
    r->len = x->dims[axis].value;
    r->inner = cp_ref_span(x, (int)axis + 1, x->rank);
    r->rows = r->inner ? n / r->inner : 0;
}

CP_FK_HOT static void quant_span(const float *x, void *y, bool is_signed, float s, float z,
                                 int64_t n)
{
    float lo = (is_signed ? -128.0f : 0.0f) - z, hi = (is_signed ? 127.0f : 255.0f) - z;
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    if (is_signed) {
        int8_t *o = y;
        for (int64_t i = 0; i < n; i++) {
            float q = x[i] / s;
            q = q != q ? -z : q;
            q = q < lo ? lo : q > hi ? hi : q;
            o[i] = (int8_t)(int)((q + magic) - magic + z);
        }
    } else {
        uint8_t *o = y;
        for (int64_t i = 0; i < n; i++) {
            float q = x[i] / s;
            q = q != q ? -z : q;
            q = q < lo ? lo : q > hi ? hi : q;
            o[i] = (uint8_t)(int)((q + magic) - magic + z);
        }
    }
}

CP_FK_HOT static void dequant_span(const void *x, float *y, bool is_signed, float s, int32_t z,
                                   int64_t n)
{
    if (is_signed) {
        const int8_t *v = x;
        for (int64_t i = 0; i < n; i++)
            y[i] = (float)((int32_t)v[i] - z) * s;
    } else {
        const uint8_t *v = x;
        for (int64_t i = 0; i < n; i++)
            y[i] = (float)((int32_t)v[i] - z) * s;
    }
}

/* Element i of an optional zero point (0 when absent). */
static int32_t zp_at(const struct cp_kexec *k, int64_t i)
{
    if (!cp_ref_has_input(k->g, k->node, 2))
        return 0;
    return (int32_t)cp_elem_load_i64(k->in_data[2], k->in[2]->dtype, i);
}

/* Run one row's span [b, e) of elements within row r. */
static void do_span(const struct cp_kexec *k, bool quantize, bool is_signed, int64_t row, int64_t b,
                    int64_t e, const struct qrows *r)
{
    int64_t j = row % r->len, off = row * r->inner + b;
    float s = ((const float *)k->in_data[1])[j];
    int32_t z = zp_at(k, j);
    if (quantize)
        quant_span((const float *)k->in_data[0] + off, (int8_t *)k->out_data[0] + off, is_signed, s,
                   (float)z, e - b);
    else
        dequant_span((const int8_t *)k->in_data[0] + off, (float *)k->out_data[0] + off, is_signed,
                     s, z, e - b);
}

static enum cp_status qdq_run(struct cp_kexec *k, bool quantize)
{
    struct qrows r;
    rows_of(k, &r);
    enum cp_dtype qt = quantize ? k->out[0]->dtype : k->in[0]->dtype;
    bool is_signed = qt == CP_DTYPE_I8;
    int64_t n = r.rows * r.inner;
    int nt = cp_fk_threads(k, n, GRAIN);
    if (r.rows == 1) {
        if (nt <= 1) {
            do_span(k, quantize, is_signed, 0, 0, r.inner, &r);
            return CP_OK;
        }
#pragma omp parallel num_threads(nt)
        {
            int64_t b, e;
            cp_fk_split(r.inner, 64, &b, &e);
            if (e > b)
                do_span(k, quantize, is_signed, 0, b, e, &r);
        }
        return CP_OK;
    }
#pragma omp parallel for num_threads(nt > 0 ? nt : 1) schedule(static)
    for (int64_t row = 0; row < r.rows; row++)
        do_span(k, quantize, is_signed, row, 0, r.inner, &r);
    return CP_OK;
}

static enum cp_status q_run(struct cp_kexec *k)
{
    return qdq_run(k, true);
}

static enum cp_status dq_run(struct cp_kexec *k)
{
    return qdq_run(k, false);
}

const struct cp_kernel cp_fast_quantize_linear = {
    "c:quantize_linear", CP_OP_QUANTIZE_LINEAR, q_supports, NULL, q_run, NULL, NULL};
const struct cp_kernel cp_fast_dequantize_linear = {
    "c:dequantize_linear", CP_OP_DEQUANTIZE_LINEAR, dq_supports, NULL, dq_run, NULL, NULL};
