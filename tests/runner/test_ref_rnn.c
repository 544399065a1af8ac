/* The reference kernels of the recurrent ops (LSTM, GRU, RNN) and the
 * signal ops (DFT, STFT, windows) on hand-computed cases the ONNX backend
 * tests miss (reverse and bidirectional directions, activations with
 * alpha, clip, input_forget, linear_before_reset, DFT of odd length and
 * opset 20's axis input), and the errors inference gives on bad nodes. */
#include "ref_test_util.h"

#include <string.h>

static void f32_w(struct cp_graph *g, const char *name, int rank, const int64_t *dims,
                  const float *v)
{
    f32_init(g, name, rank, dims, v);
}

static int32_t node(struct cp_graph *g, const char *op, const char *const *ins,
                    const char *const *outs)
{
    return gb_node(g, "n", op, ins, outs);
}

/* RNN, H = I = 1: W 0.5, R 2, Wb 0.1, Rb -0.2, LeakyRelu(0.1), x = 1, -1. */
static struct cp_graph *rnn_graph(const char *direction, int dirs)
{
    struct cp_graph *g = gb_graph(14);
    f32_w(g, "x", 3, GB_DIMS(2, 1, 1), F32(1, -1));
    f32_w(g, "w", 3, GB_DIMS(dirs, 1, 1), F32(0.5f, 0.5f));
    f32_w(g, "r", 3, GB_DIMS(dirs, 1, 1), F32(2, 2));
    f32_w(g, "b", 2, GB_DIMS(dirs, 2), F32(0.1f, -0.2f, 0.1f, -0.2f));
    int32_t n = node(g, "RNN", GB_IN("x", "w", "r", "b"), GB_IN("y", "yh"));
    cp_node_set_string(g, n, "direction", direction);
    const char *acts[] = {"LeakyRelu", "leakyrelu"};
    cp_node_set_strings(g, n, "activations", acts, (size_t)dirs);
    cp_node_set_floats(g, n, "activation_alpha", F32(0.1f, 0.1f), (size_t)dirs);
    return g;
}

Test(ref_rnn, rnn_forward_reverse_and_bidirectional_with_leaky_relu)
{
    struct kd_run r;
    struct cp_graph *g = rnn_graph("forward", 1);
    kd_run(&r, g, 0);
    EXPECT_SHAPE(&r, 0, 4, 2, 1, 1, 1);
    EXPECT_F32(&r, 0, TOL, 0.4f, 0.2f);
    EXPECT_F32(&r, 1, TOL, 0.2f);
    kd_release(&r);

    g = rnn_graph("reverse", 1);
    kd_run(&r, g, 0);
    EXPECT_F32(&r, 0, TOL, 0.28f, -0.06f);
    EXPECT_F32(&r, 1, TOL, 0.28f);
    kd_release(&r);

    g = rnn_graph("bidirectional", 2);
    kd_run(&r, g, 0);
    EXPECT_SHAPE(&r, 0, 4, 2, 2, 1, 1);
    EXPECT_F32(&r, 0, TOL, 0.4f, 0.28f, 0.2f, -0.06f);
    EXPECT_F32(&r, 1, TOL, 0.2f, 0.28f);
    kd_release(&r);
}

Test(ref_rnn, lstm_clip_and_input_forget)
{
    /* x = 2, every W 1, R 0, clip 1.5: i = o = sigmoid(1.5), f = 1 - i,
     * c = i tanh(1.5), h = o tanh(c). */
    struct cp_graph *g = gb_graph(14);
    f32_w(g, "x", 3, GB_DIMS(1, 1, 1), F32(2));
    f32_w(g, "w", 3, GB_DIMS(1, 4, 1), F32(1, 1, 1, 1));
    f32_w(g, "r", 3, GB_DIMS(1, 4, 1), F32(0, 0, 0, 0));
    int32_t n = node(g, "LSTM", GB_IN("x", "w", "r"), GB_IN("y", "yh", "yc"));
    cp_node_set_float(g, n, "clip", 1.5f);
    cp_node_set_int(g, n, "input_forget", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 1, TOL, 0.51438594f);
    EXPECT_F32(&r, 2, TOL, 0.7400261f);
    kd_release(&r);
}

static void gru_case(int lbr, float want)
{
    /* W (z r h) 0 0 1, R 0 0 1, Rbh 0.5, h0 1, x 1: z = r = 0.5. */
    struct cp_graph *g = gb_graph(14);
    f32_w(g, "x", 3, GB_DIMS(1, 1, 1), F32(1));
    f32_w(g, "w", 3, GB_DIMS(1, 3, 1), F32(0, 0, 1));
    f32_w(g, "r", 3, GB_DIMS(1, 3, 1), F32(0, 0, 1));
    f32_w(g, "b", 2, GB_DIMS(1, 6), F32(0, 0, 0, 0, 0, 0.5f));
    f32_w(g, "h0", 3, GB_DIMS(1, 1, 1), F32(1));
    int32_t n = node(g, "GRU", GB_IN("x", "w", "r", "b", "", "h0"), GB_IN("y", "yh"));
    cp_node_set_int(g, n, "linear_before_reset", lbr);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 1, TOL, want);
    kd_release(&r);
}

Test(ref_rnn, gru_linear_before_reset_moves_the_reset)
{
    gru_case(0, 0.98201376f); /* 0.5 tanh(1 + 0.5*1 + 0.5) + 0.5 */
    gru_case(1, 0.97068775f); /* 0.5 tanh(1 + 0.5*(1 + 0.5)) + 0.5 */
}

Test(ref_rnn, sequence_lens_zero_keeps_the_initial_state_and_zero_y)
{
    struct cp_graph *g = gb_graph(14);
    f32_w(g, "x", 3, GB_DIMS(2, 2, 1), F32(1, 1, 1, 1));
    f32_w(g, "w", 3, GB_DIMS(1, 1, 1), F32(1));
    f32_w(g, "r", 3, GB_DIMS(1, 1, 1), F32(0));
    gb_init(g, "len", CP_DTYPE_I32, 1, GB_DIMS(2), I32(0, 1));
    f32_w(g, "h0", 3, GB_DIMS(1, 2, 1), F32(0.25f, 0.5f));
    int32_t n = node(g, "RNN", GB_IN("x", "w", "r", "", "len", "h0"), GB_IN("y", "yh"));
    cp_node_set_int(g, n, "hidden_size", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, TOL, 0, 0.7615942f, 0, 0);
    EXPECT_F32(&r, 1, TOL, 0.25f, 0.7615942f);
    kd_release(&r);
}

/* ---- bad nodes ------------------------------------------------------------------ */

static void lstm_fails(const char *attr, const char *value, const char *want)
{
    struct cp_graph *g = gb_graph(14);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(2, 1, 3));
    gb_input(g, "w", CP_DTYPE_F32, 3, GB_DIMS(1, 8, 3));
    gb_input(g, "r", CP_DTYPE_F32, 3, GB_DIMS(1, 8, 2));
    int32_t n = node(g, "LSTM", GB_IN("x", "w", "r"), GB_IN("y"));
    if (strcmp(attr, "activations") == 0) {
        const char *acts[] = {value, "Tanh", "Tanh"};
        cp_node_set_strings(g, n, attr, acts, 3);
    } else if (attr[0]) {
        cp_node_set_string(g, n, attr, value);
    } else {
        cp_node_set_int(g, n, "hidden_size", 3);
    }
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_expect(strstr(msg, want) && strstr(msg, "'n'"), "message: %s", msg);
    cp_graph_free(g);
}

Test(ref_rnn, bad_recurrent_nodes_are_named_with_the_reason)
{
    lstm_fails("direction", "sideways", "direction 'sideways'");
    lstm_fails("activations", "Gelu", "activation 'Gelu'");
    lstm_fails("", "", "gates x hidden_size is 12");
}

/* ---- signal ops -------------------------------------------------------------------- */

Test(ref_signal, dft_of_odd_length_is_the_direct_transform)
{
    struct cp_graph *g = gb_graph(17);
    f32_w(g, "x", 3, GB_DIMS(1, 5, 1), F32(1, 2, 3, 4, 5));
    struct kd_run r;
    kd_run(&r, g, node(g, "DFT", GB_IN("x"), GB_IN("y")));
    EXPECT_SHAPE(&r, 0, 3, 1, 5, 2);
    EXPECT_F32(&r, 0, 1e-4f, 15, 0, -2.5f, 3.44095f, -2.5f, 0.812299f, -2.5f, -0.812299f, -2.5f,
               -3.44095f);
    kd_release(&r);
}

Test(ref_signal, dft_opset20_axis_input_dft_length_and_onesided)
{
    struct cp_graph *g = gb_graph(20);
    f32_w(g, "x", 2, GB_DIMS(5, 1), F32(1, 2, 3, 4, 5));
    gb_scalar(g, "len", 8);
    gb_scalar(g, "axis", -2);
    int32_t n = node(g, "DFT", GB_IN("x", "len", "axis"), GB_IN("y"));
    cp_node_set_int(g, n, "onesided", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 5, 2);
    EXPECT_F32(&r, 0, 1e-4f, 15, 0, -5.41421f, -7.24264f, 3, 2, -2.58579f, -1.24264f, 3, 0);
    kd_release(&r);
}

Test(ref_signal, dft_inverse_undoes_the_forward_transform)
{
    struct cp_graph *g = gb_graph(17);
    f32_w(g, "x", 3, GB_DIMS(1, 3, 2), F32(15, 0, -1.5f, 0.8660254f, -1.5f, -0.8660254f));
    int32_t n = node(g, "DFT", GB_IN("x"), GB_IN("y"));
    cp_node_set_int(g, n, "inverse", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 1e-5f, 4, 0, 5, 0, 6, 0);
    kd_release(&r);
}

Test(ref_signal, dft_axis_out_of_range_is_refused)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(1, 5, 1));
    int32_t n = node(g, "DFT", GB_IN("x"), GB_IN("y"));
    cp_node_set_int(g, n, "axis", 2);
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_expect(strstr(msg, "axis 2 is out of range"), "message: %s", msg);
    cp_graph_free(g);
}

Test(ref_signal, hann_window_periodic_and_symmetric)
{
    struct cp_graph *g = gb_graph(17);
    gb_scalar(g, "n", 4);
    struct kd_run r;
    kd_run(&r, g, node(g, "HannWindow", GB_IN("n"), GB_IN("y")));
    EXPECT_F32(&r, 0, 1e-6f, 0, 0.5f, 1, 0.5f);
    kd_release(&r);

    g = gb_graph(17);
    gb_scalar(g, "n", 4);
    int32_t n = node(g, "HannWindow", GB_IN("n"), GB_IN("y"));
    cp_node_set_int(g, n, "periodic", 0);
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 1e-6f, 0, 0.75f, 0.75f, 0);
    kd_release(&r);
}

/* Bluestein (any length that is not a power of two) against the textbook
 * sum, on complex signals of a few lengths, Whisper's 400 among them. */
Test(ref_signal, dft_of_any_length_matches_the_direct_sum)
{
    static const int64_t lens[] = {3, 7, 12, 100, 400};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t n = lens[li];
        float *x = malloc((size_t)(2 * n) * sizeof *x);
        cr_assert_not_null(x);
        for (int64_t i = 0; i < 2 * n; i++)
            x[i] = (float)sin(0.37 * (double)(i * i % 101)) + 0.25f;
        struct cp_graph *g = gb_graph(17);
        f32_w(g, "x", 3, GB_DIMS(1, n, 2), x);
        struct kd_run r;
        kd_run(&r, g, node(g, "DFT", GB_IN("x"), GB_IN("y")));
        const float *y = r.out_data[0];
        for (int64_t k = 0; k < n; k++) {
            double re = 0, im = 0;
            for (int64_t j = 0; j < n; j++) {
                double a = -2.0 * 3.14159265358979323846 * (double)((j * k) % n) / (double)n;
                re += x[2 * j] * cos(a) - x[2 * j + 1] * sin(a);
                im += x[2 * j] * sin(a) + x[2 * j + 1] * cos(a);
            }
            cr_assert(fabs(y[2 * k] - re) < 1e-3 && fabs(y[2 * k + 1] - im) < 1e-3,
                      "n %lld bin %lld: got %g%+gi, want %g%+gi", (long long)n, (long long)k,
                      (double)y[2 * k], (double)y[2 * k + 1], re, im);
        }
        kd_release(&r);
        free(x);
    }
}
