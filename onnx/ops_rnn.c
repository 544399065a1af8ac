/* The importer's rows of the recurrent ops (LSTM, GRU, RNN) and of the
 * signal ops (DFT, STFT, HannWindow, HammingWindow, BlackmanWindow,
 * MelWeightMatrix): attribute specs and loaders. */
#include "onnx/onnx_internal.h"

#include <stdio.h>
#include <string.h>

#define RECURRENT_COMMON                                                                           \
    {"activation_alpha", CP_ATTR_FLOATS, false}, {"activation_beta", CP_ATTR_FLOATS, false},       \
        {"activations", CP_ATTR_STRINGS, false}, {"clip", CP_ATTR_FLOAT, false},                   \
        {"direction", CP_ATTR_STRING, false}, {"hidden_size", CP_ATTR_INT, false},                 \
    {                                                                                              \
        "layout", CP_ATTR_INT, false                                                               \
    }

const struct onnx_attr_spec onnx_lstm_attrs[] = {
    RECURRENT_COMMON,
    {"input_forget", CP_ATTR_INT, false},
    {NULL, 0, false},
};
const struct onnx_attr_spec onnx_gru_attrs[] = {
    RECURRENT_COMMON,
    {"linear_before_reset", CP_ATTR_INT, false},
    {NULL, 0, false},
};
const struct onnx_attr_spec onnx_rnn_attrs[] = {RECURRENT_COMMON, {NULL, 0, false}};
const struct onnx_attr_spec onnx_dft_attrs[] = {
    {"axis", CP_ATTR_INT, false},
    {"inverse", CP_ATTR_INT, false},
    {"onesided", CP_ATTR_INT, false},
    {NULL, 0, false},
};
const struct onnx_attr_spec onnx_stft_attrs[] = {{"onesided", CP_ATTR_INT, false},
                                                 {NULL, 0, false}};
const struct onnx_attr_spec onnx_window_attrs[] = {
    {"output_datatype", CP_ATTR_INT, false},
    {"periodic", CP_ATTR_INT, false},
    {NULL, 0, false},
};

static enum cp_status add_with_attrs(struct onnx_ctx *c, const struct onnx_op_def *def,
                                     const Onnx__NodeProto *np, const char *name,
                                     const char *origin)
{
    int32_t idx;
    enum cp_status st = onnx_add_node(c, def, np, name, origin, &idx);
    return st == CP_OK ? onnx_copy_attrs(c, def, np, idx, name) : st;
}

/* Every output of a recurrent op is optional, Y included, but a node's
 * output 0 must exist in our graph: when the model leaves Y out, the node
 * gets a fresh tensor for it that nothing reads. */
enum cp_status onnx_load_recurrent(struct onnx_ctx *c, const struct onnx_op_def *def,
                                   const Onnx__NodeProto *np, const char *name, const char *origin)
{
    if (np->n_output > 0 && np->output[0] && *np->output[0])
        return add_with_attrs(c, def, np, name, origin);
    char y[512];
    snprintf(y, sizeof y, "%.480s/Y_unused", name);
    for (int k = 1; cp_strmap_gets(&c->tensors, y, -1) >= 0; k++) {
        if (k > 1000)
            return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s): no free name for its output Y",
                            name, np->op_type);
        snprintf(y, sizeof y, "%.480s/Y_unused%d", name, k);
    }
    char *outs[3];
    size_t n_out = np->n_output ? np->n_output : 1;
    if (n_out > 3)
        n_out = 3; /* more outputs than the op has: check_counts reports it */
    for (size_t i = 0; i < n_out; i++)
        outs[i] = i < np->n_output ? np->output[i] : NULL;
    outs[0] = y;
    if (np->n_output > 3)
        return onnx_add_node(c, def, np, name, origin, &(int32_t){0});
    Onnx__NodeProto copy = *np;
    copy.n_output = n_out;
    copy.output = outs;
    return add_with_attrs(c, def, &copy, name, origin);
}

enum cp_status onnx_load_signal(struct onnx_ctx *c, const struct onnx_op_def *def,
                                const Onnx__NodeProto *np, const char *name, const char *origin)
{
    return add_with_attrs(c, def, np, name, origin);
}
