/*
 * The attributes of ONNX's recurrent ops (LSTM, GRU, RNN), read and checked
 * once, for shape inference, the kernels and the cost model.
 *
 * ONNX's gate order is kept: LSTM i o f c (W is [dirs, 4H, I]), GRU z r h
 * ([dirs, 3H, I]), RNN one gate ([dirs, H, I]). Activations are per
 * direction: LSTM f g h, GRU f g, RNN f; defaults Sigmoid/Tanh/Tanh,
 * Sigmoid/Tanh and Tanh. activation_alpha / activation_beta are consumed in
 * the order of the activations, each taking as many as it uses (Affine,
 * ScaledTanh, HardSigmoid one alpha and one beta; LeakyRelu,
 * ThresholdedRelu, Elu one alpha), ONNX's defaults when the lists run out.
 */
#ifndef CP_GRAPH_RNN_DESC_H
#define CP_GRAPH_RNN_DESC_H

#include "graph/graph.h"

#include <stdbool.h>
#include <stddef.h>

enum cp_rnn_act {
    CP_RNN_RELU,
    CP_RNN_TANH,
    CP_RNN_SIGMOID,
    CP_RNN_AFFINE,
    CP_RNN_LEAKY_RELU,
    CP_RNN_THRESHOLDED_RELU,
    CP_RNN_SCALED_TANH,
    CP_RNN_HARD_SIGMOID,
    CP_RNN_ELU,
    CP_RNN_SOFTSIGN,
    CP_RNN_SOFTPLUS,
};

struct cp_rnn_fn {
    enum cp_rnn_act act;
    float alpha, beta;
};

#define CP_RNN_MAX_ACTS 3

struct cp_rnn_desc {
    int gates;                /* 4 LSTM, 3 GRU, 1 RNN */
    int n_acts;               /* activations per direction: 3, 2, 1 */
    int dirs;                 /* 1 or 2 */
    bool reverse;             /* direction "reverse" (dirs == 1) */
    int64_t hidden;           /* H; -1 when neither hidden_size nor R's shape says */
    int layout;               /* 0: [seq, batch, ...]; 1 (opset 14): [batch, seq, ...] */
    bool has_clip;            /* clip attribute present */
    float clip;               /* > 0 */
    bool input_forget;        /* LSTM */
    bool linear_before_reset; /* GRU */
    struct cp_rnn_fn fn[2][CP_RNN_MAX_ACTS]; /* [direction][f, g, h] */
};

/* Read the attributes of recurrent node n (LSTM, GRU or RNN) in a model of
 * `opset`; R (input 2, may have an unknown shape) gives H when hidden_size
 * is absent. false with a message in why[n] when an attribute is bad. */
bool cp_rnn_describe(const struct cp_graph *g, const struct cp_node *n, int64_t opset,
                     struct cp_rnn_desc *desc, char *why, size_t why_n);

/* One activation applied to x. */
double cp_rnn_apply(const struct cp_rnn_fn *f, double x);

#endif
