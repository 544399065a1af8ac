/* Shape and dtype inference of the recurrent ops (LSTM, GRU, RNN) and the
 * signal ops (DFT, STFT, the windows, MelWeightMatrix). */
#include "graph/infer_internal.h"
#include "graph/op_eval.h" /* cp_rnn_describe */

static bool is_real_float(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F32 || dt == CP_DTYPE_F16 || dt == CP_DTYPE_F64 || dt == CP_DTYPE_BF16;
}

static bool is_index(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I32 || dt == CP_DTYPE_I64;
}

/* A static dim of t that must equal `want` (when both are known). */
static enum cp_status check_dim(struct cp_infer *c, const struct cp_tensor *t, const char *what,
                                int axis, int64_t want, const char *meaning)
{
    int64_t v = t->shape.rank > axis ? t->shape.dims[axis].value : -1;
    if (v >= 0 && want >= 0 && v != want)
        return cp_infer_fail(c, "%s '%s' has dimension %d of %lld; %s is %lld", what, t->name, axis,
                             (long long)v, meaning, (long long)want);
    return CP_OK;
}

static enum cp_status check_rank(struct cp_infer *c, const struct cp_tensor *t, const char *what,
                                 int rank)
{
    if (t->shape.rank >= 0 && t->shape.rank != rank)
        return cp_infer_fail(c, "%s '%s' must have rank %d, not %d", what, t->name, rank,
                             t->shape.rank);
    return CP_OK;
}

static struct cp_dim dim_of(const struct cp_tensor *t, int axis)
{
    struct cp_dim d = {-1, NULL};
    if (t->shape.rank > axis)
        d = t->shape.dims[axis];
    return d;
}

static enum cp_status infer_recurrent(struct cp_infer *c)
{
    struct cp_rnn_desc rd;
    char why[200];
    if (!cp_rnn_describe(c->g, c->node, c->opset, &rd, why, sizeof why))
        return cp_infer_fail(c, "%s", why);
    const struct cp_tensor *x = cp_infer_in(c, 0), *w = cp_infer_in(c, 1), *r = cp_infer_in(c, 2);
    if (!is_real_float(x->dtype))
        return cp_infer_fail(c, "X '%s' is %s; %s takes f32, f16, bf16 or f64", x->name,
                             cp_dtype_name(x->dtype), cp_op_name(c->node->op));
    enum cp_status st;
    if ((st = check_rank(c, x, "X", 3)) != CP_OK || (st = check_rank(c, w, "W", 3)) != CP_OK ||
        (st = check_rank(c, r, "R", 3)) != CP_OK)
        return st;
    int64_t h = rd.hidden, gh = h >= 0 ? rd.gates * h : -1;
    int sa = rd.layout ? 1 : 0, ba = rd.layout ? 0 : 1; /* seq and batch axes of X */
    struct cp_dim seq = dim_of(x, sa), batch = dim_of(x, ba);
    if ((st = check_dim(c, w, "W", 0, rd.dirs, "the number of directions")) != CP_OK ||
        (st = check_dim(c, w, "W", 1, gh, "gates x hidden_size")) != CP_OK ||
        (st = check_dim(c, w, "W", 2, dim_of(x, 2).value, "X's input size")) != CP_OK ||
        (st = check_dim(c, r, "R", 0, rd.dirs, "the number of directions")) != CP_OK ||
        (st = check_dim(c, r, "R", 1, gh, "gates x hidden_size")) != CP_OK ||
        (st = check_dim(c, r, "R", 2, h, "hidden_size")) != CP_OK)
        return st;
    const char *const names[] = {"X",         "W",         "R", "B", "sequence_lens",
                                 "initial_h", "initial_c", "P"};
    size_t n_in = c->node->n_inputs;
    for (size_t i = 1; i < n_in; i++) {
        const struct cp_tensor *t = cp_infer_in(c, i);
        if (!t)
            continue;
        const char *what = names[i];
        if (i == 4) {
            if (!is_index(t->dtype))
                return cp_infer_fail(c, "sequence_lens '%s' must be i32, not %s", t->name,
                                     cp_dtype_name(t->dtype));
            if ((st = check_rank(c, t, what, 1)) != CP_OK ||
                (st = check_dim(c, t, what, 0, batch.value, "the batch size")) != CP_OK)
                return st;
            continue;
        }
        if (t->dtype != x->dtype)
            return cp_infer_fail(c, "%s '%s' is %s but X is %s", what, t->name,
                                 cp_dtype_name(t->dtype), cp_dtype_name(x->dtype));
        if (i == 3 || i == 7) { /* B [dirs, 2*gates*H], P [dirs, 3H] */
            if ((st = check_rank(c, t, what, 2)) != CP_OK ||
                (st = check_dim(c, t, what, 0, rd.dirs, "the number of directions")) != CP_OK ||
                (st = check_dim(c, t, what, 1, h < 0 ? -1 : (i == 3 ? 2 * gh : 3 * h),
                                i == 3 ? "2 x gates x hidden_size" : "3 x hidden_size")) != CP_OK)
                return st;
        } else if (i == 5 ||
                   i == 6) { /* initial_h/c [dirs, batch, H] (layout 1: [batch, dirs, H]) */
            if ((st = check_rank(c, t, what, 3)) != CP_OK ||
                (st = check_dim(c, t, what, rd.layout ? 1 : 0, rd.dirs,
                                "the number of directions")) != CP_OK ||
                (st = check_dim(c, t, what, rd.layout ? 0 : 1, batch.value, "the batch size")) !=
                    CP_OK ||
                (st = check_dim(c, t, what, 2, h, "hidden_size")) != CP_OK)
                return st;
        }
    }
    struct cp_dim hd = {h, NULL}, dd = {rd.dirs, NULL};
    struct cp_shape y = {4, {{0}}}, yh = {3, {{0}}};
    if (rd.layout) {
        y.dims[0] = batch, y.dims[1] = seq, y.dims[2] = dd, y.dims[3] = hd;
        yh.dims[0] = batch, yh.dims[1] = dd, yh.dims[2] = hd;
    } else {
        y.dims[0] = seq, y.dims[1] = dd, y.dims[2] = batch, y.dims[3] = hd;
        yh.dims[0] = dd, yh.dims[1] = batch, yh.dims[2] = hd;
    }
    if (h < 0)
        y.dims[3].sym = yh.dims[2].sym = NULL;
    st = cp_infer_set_out(c, 0, x->dtype, &y);
    for (size_t i = 1; st == CP_OK && i < c->node->n_outputs; i++)
        st = cp_infer_set_out(c, i, x->dtype, &yh);
    return st;
}

enum cp_status cp_infer_lstm(struct cp_infer *c)
{
    return infer_recurrent(c);
}

enum cp_status cp_infer_gru(struct cp_infer *c)
{
    return infer_recurrent(c);
}

enum cp_status cp_infer_rnn(struct cp_infer *c)
{
    return infer_recurrent(c);
}

/* ---- signal ops ------------------------------------------------------------- */

/* The one integer value of scalar (or one-element) input i, when known at
 * conversion. */
static bool known_scalar(struct cp_infer *c, size_t i, int64_t *v)
{
    int64_t n;
    int32_t t = cp_infer_in_index(c, i);
    return t >= 0 && cp_infer_ints(c, t, v, 1, &n) && n == 1;
}

static enum cp_status check_scalar_int(struct cp_infer *c, size_t i, const char *what)
{
    const struct cp_tensor *t = cp_infer_in(c, i);
    if (!t)
        return CP_OK;
    if (!is_index(t->dtype))
        return cp_infer_fail(c, "%s '%s' must be i32 or i64, not %s", what, t->name,
                             cp_dtype_name(t->dtype));
    if (cp_shape_is_static(&t->shape) && cp_shape_numel(&t->shape) != 1)
        return cp_infer_fail(c, "%s '%s' must hold one value", what, t->name);
    return CP_OK;
}

enum cp_status cp_infer_dft(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    if (!is_real_float(x->dtype))
        return cp_infer_fail(c, "input '%s' is %s; DFT takes f32, f16, bf16 or f64", x->name,
                             cp_dtype_name(x->dtype));
    int r = x->shape.rank;
    enum cp_status st;
    if ((st = check_scalar_int(c, 1, "dft_length")) != CP_OK)
        return st;
    if (c->opset < 20 && c->node->n_inputs > 2)
        return cp_infer_fail(c, "opset %lld's DFT takes at most 2 inputs (axis is an attribute)",
                             (long long)c->opset);
    if (r < 0)
        return cp_infer_set_out(c, 0, x->dtype, &x->shape);
    if (r < 2)
        return cp_infer_fail(c, "input '%s' has rank %d; DFT needs [..., signal, 1 or 2]", x->name,
                             r);
    int64_t last = x->shape.dims[r - 1].value;
    if (last >= 0 && last != 1 && last != 2)
        return cp_infer_fail(c,
                             "input '%s' has last dimension %lld; it must be 1 (real) or 2 "
                             "(complex)",
                             x->name, (long long)last);
    int64_t axis;
    if (c->opset >= 20) {
        axis = -2;
        if (cp_infer_in(c, 2)) {
            if ((st = check_scalar_int(c, 2, "axis")) != CP_OK)
                return st;
            if (!known_scalar(c, 2, &axis))
                return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED,
                                        "axis input '%s' must be a constant at conversion",
                                        cp_infer_in(c, 2)->name);
        }
    } else {
        axis = cp_node_attr_int(c->node, "axis", 1);
    }
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis > r - 2)
        return cp_infer_fail(c,
                             "axis %lld is out of range for rank %d (the last dimension is the "
                             "complex one)",
                             (long long)cp_node_attr_int(c->node, "axis", axis), r);
    bool onesided = cp_node_attr_int(c->node, "onesided", 0) != 0;
    bool inverse = cp_node_attr_int(c->node, "inverse", 0) != 0;
    if (onesided && inverse)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "onesided inverse DFT is not supported");
    struct cp_shape y = x->shape;
    y.dims[r - 1].value = 2, y.dims[r - 1].sym = NULL;
    int64_t len = x->shape.dims[axis].value;
    if (cp_infer_in(c, 1)) {
        if (!known_scalar(c, 1, &len))
            len = -1;
        else if (len < 1)
            return cp_infer_fail(c, "dft_length %lld must be positive", (long long)len);
        y.dims[axis].sym = NULL;
    }
    if (onesided && len >= 0)
        len = len / 2 + 1;
    if (onesided || cp_infer_in(c, 1))
        y.dims[axis].sym = NULL;
    y.dims[axis].value = len;
    return cp_infer_set_out(c, 0, x->dtype, &y);
}

/* signal [batch, length, 1 or 2], frame_step, [window], [frame_length]
 * -> [batch, frames, bins, 2]. */
enum cp_status cp_infer_stft(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *win = cp_infer_in(c, 2);
    if (!is_real_float(x->dtype))
        return cp_infer_fail(c, "signal '%s' is %s; STFT takes f32, f16, bf16 or f64", x->name,
                             cp_dtype_name(x->dtype));
    enum cp_status st;
    if ((st = check_rank(c, x, "signal", 3)) != CP_OK ||
        (st = check_scalar_int(c, 1, "frame_step")) != CP_OK ||
        (st = check_scalar_int(c, 3, "frame_length")) != CP_OK)
        return st;
    if (win && ((st = check_rank(c, win, "window", 1)) != CP_OK))
        return st;
    if (win && win->dtype != x->dtype)
        return cp_infer_fail(c, "window '%s' is %s but the signal is %s", win->name,
                             cp_dtype_name(win->dtype), cp_dtype_name(x->dtype));
    if (!win && !cp_infer_in(c, 3))
        return cp_infer_fail(c, "needs a window or a frame_length");
    int64_t last = dim_of(x, 2).value;
    if (last >= 0 && last != 1 && last != 2)
        return cp_infer_fail(c, "signal '%s' has last dimension %lld; it must be 1 or 2", x->name,
                             (long long)last);
    bool onesided = cp_node_attr_int(c->node, "onesided", 1) != 0;
    int64_t flen = win ? dim_of(win, 0).value : -1, step = -1, given;
    if (cp_infer_in(c, 3) && known_scalar(c, 3, &given)) {
        if (flen >= 0 && given != flen)
            return cp_infer_fail(c, "frame_length %lld differs from the window's length %lld",
                                 (long long)given, (long long)flen);
        flen = given;
    } else if (cp_infer_in(c, 3)) {
        flen = -1;
    }
    if (!known_scalar(c, 1, &step))
        step = -1;
    if (step == 0 || step < -1)
        return cp_infer_fail(c, "frame_step %lld must be positive", (long long)step);
    int64_t len = dim_of(x, 1).value, frames = -1;
    if (flen == 0 || flen < -1)
        return cp_infer_fail(c, "frame_length %lld must be positive", (long long)flen);
    if (len >= 0 && flen > len)
        return cp_infer_fail(c, "frame_length %lld exceeds the signal's length %lld",
                             (long long)flen, (long long)len);
    if (len >= 0 && flen > 0 && step > 0)
        frames = (len - flen) / step + 1;
    struct cp_shape y = {4, {{0}}};
    y.dims[0] = dim_of(x, 0);
    y.dims[1].value = frames;
    y.dims[2].value = flen < 0 ? -1 : onesided ? flen / 2 + 1 : flen;
    y.dims[3].value = 2;
    return cp_infer_set_out(c, 0, x->dtype, &y);
}

static enum cp_status out_datatype(struct cp_infer *c, enum cp_dtype *dt)
{
    int64_t t = cp_node_attr_int(c->node, "output_datatype", 1);
    *dt = t >= 0 && t <= 1000 ? cp_dtype_from_onnx((int)t) : CP_DTYPE_UNDEFINED;
    if (*dt == CP_DTYPE_UNDEFINED || *dt == CP_DTYPE_BOOL)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "output_datatype %lld is not supported",
                                (long long)t);
    return CP_OK;
}

enum cp_status cp_infer_window(struct cp_infer *c)
{
    enum cp_dtype dt;
    enum cp_status st;
    if ((st = out_datatype(c, &dt)) != CP_OK || (st = check_scalar_int(c, 0, "size")) != CP_OK)
        return st;
    int64_t n = -1;
    if (known_scalar(c, 0, &n) && n < 0)
        return cp_infer_fail(c, "size %lld is negative", (long long)n);
    struct cp_shape y = {1, {{n, NULL}}};
    return cp_infer_set_out(c, 0, dt, &y);
}

enum cp_status cp_infer_mel_weight_matrix(struct cp_infer *c)
{
    enum cp_dtype dt;
    enum cp_status st;
    if ((st = out_datatype(c, &dt)) != CP_OK ||
        (st = check_scalar_int(c, 0, "num_mel_bins")) != CP_OK ||
        (st = check_scalar_int(c, 1, "dft_length")) != CP_OK ||
        (st = check_scalar_int(c, 2, "sample_rate")) != CP_OK)
        return st;
    for (size_t i = 3; i < 5; i++) {
        const struct cp_tensor *t = cp_infer_in(c, i);
        if (!is_real_float(t->dtype))
            return cp_infer_fail(c, "%s '%s' must be a float, not %s",
                                 i == 3 ? "lower_edge_hertz" : "upper_edge_hertz", t->name,
                                 cp_dtype_name(t->dtype));
    }
    int64_t mel = -1, dft = -1;
    if (known_scalar(c, 0, &mel) && mel < 1)
        return cp_infer_fail(c, "num_mel_bins %lld must be positive", (long long)mel);
    if (known_scalar(c, 1, &dft) && dft < 1)
        return cp_infer_fail(c, "dft_length %lld must be positive", (long long)dft);
    struct cp_shape y = {2, {{dft < 0 ? -1 : dft / 2 + 1, NULL}, {mel, NULL}}};
    return cp_infer_set_out(c, 0, dt, &y);
}
