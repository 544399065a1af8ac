/* Attributes of LSTM, GRU and RNN (see op_eval.h). */
#include "graph/op_eval.h" /* cp_rnn_describe */

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    enum cp_rnn_act act;
    int n_alpha, n_beta;
    float alpha, beta; /* ONNX's defaults */
} act_table[] = {
    {"Relu", CP_RNN_RELU, 0, 0, 0.0f, 0.0f},
    {"Tanh", CP_RNN_TANH, 0, 0, 0.0f, 0.0f},
    {"Sigmoid", CP_RNN_SIGMOID, 0, 0, 0.0f, 0.0f},
    {"Affine", CP_RNN_AFFINE, 1, 1, 1.0f, 0.0f},
    {"LeakyRelu", CP_RNN_LEAKY_RELU, 1, 0, 0.01f, 0.0f},
    {"ThresholdedRelu", CP_RNN_THRESHOLDED_RELU, 1, 0, 1.0f, 0.0f},
    {"ScaledTanh", CP_RNN_SCALED_TANH, 1, 1, 1.0f, 1.0f},
    {"HardSigmoid", CP_RNN_HARD_SIGMOID, 1, 1, 0.2f, 0.5f},
    {"Elu", CP_RNN_ELU, 1, 0, 1.0f, 0.0f},
    {"Softsign", CP_RNN_SOFTSIGN, 0, 0, 0.0f, 0.0f},
    {"Softplus", CP_RNN_SOFTPLUS, 0, 0, 0.0f, 0.0f},
};

static const char *const default_acts[3][CP_RNN_MAX_ACTS] = {
    {"Sigmoid", "Tanh", "Tanh"}, /* LSTM */
    {"Sigmoid", "Tanh", NULL},   /* GRU */
    {"Tanh", NULL, NULL},        /* RNN */
};

double cp_rnn_apply(const struct cp_rnn_fn *f, double x)
{
    double a = f->alpha, b = f->beta;
    switch (f->act) {
    case CP_RNN_RELU:
        return x > 0 ? x : 0;
    case CP_RNN_TANH:
        return tanh(x);
    case CP_RNN_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case CP_RNN_AFFINE:
        return a * x + b;
    case CP_RNN_LEAKY_RELU:
        return x >= 0 ? x : a * x;
    case CP_RNN_THRESHOLDED_RELU:
        return x > a ? x : 0;
    case CP_RNN_SCALED_TANH:
        return a * tanh(b * x);
    case CP_RNN_HARD_SIGMOID: {
        double y = a * x + b;
        return y < 0 ? 0 : y > 1 ? 1 : y;
    }
    case CP_RNN_ELU:
        return x >= 0 ? x : a * (exp(x) - 1.0);
    case CP_RNN_SOFTSIGN:
        return x / (1.0 + fabs(x));
    case CP_RNN_SOFTPLUS:
        return x > 30 ? x : log1p(exp(x));
    }
    return x;
}

static int find_act(const char *s)
{
    for (size_t i = 0; i < sizeof act_table / sizeof act_table[0]; i++)
        if (strcasecmp(s, act_table[i].name) == 0)
            return (int)i;
    return -1;
}

bool cp_rnn_describe(const struct cp_graph *g, const struct cp_node *n, int64_t opset,
                     struct cp_rnn_desc *desc, char *why, size_t why_n)
{
    memset(desc, 0, sizeof *desc);
    int kind = n->op == CP_OP_LSTM ? 0 : n->op == CP_OP_GRU ? 1 : 2;
    desc->gates = kind == 0 ? 4 : kind == 1 ? 3 : 1;
    desc->n_acts = kind == 0 ? 3 : kind == 1 ? 2 : 1;
    const char *dir = cp_node_attr_string(n, "direction", "forward");
    if (strcmp(dir, "forward") == 0) {
        desc->dirs = 1;
    } else if (strcmp(dir, "reverse") == 0) {
        desc->dirs = 1;
        desc->reverse = true;
    } else if (strcmp(dir, "bidirectional") == 0) {
        desc->dirs = 2;
    } else {
        snprintf(why, why_n, "direction '%s' is not one of 'forward', 'reverse', 'bidirectional'",
                 dir);
        return false;
    }
    desc->layout = opset >= 14 ? (int)cp_node_attr_int(n, "layout", 0) : 0;
    if (desc->layout != 0 && desc->layout != 1) {
        snprintf(why, why_n, "layout %d is not 0 or 1", desc->layout);
        return false;
    }
    desc->hidden = cp_node_attr_int(n, "hidden_size", -1);
    const struct cp_attr *hs = cp_node_attr(n, "hidden_size");
    if (hs && desc->hidden <= 0) {
        snprintf(why, why_n, "hidden_size %lld must be positive", (long long)desc->hidden);
        return false;
    }
    const struct cp_tensor *r =
        n->n_inputs > 2 && n->inputs[2] >= 0 ? cp_graph_tensor(g, n->inputs[2]) : NULL;
    if (!hs && r && r->shape.rank == 3 && r->shape.dims[2].value >= 0)
        desc->hidden = r->shape.dims[2].value;
    const struct cp_attr *clip = cp_node_attr(n, "clip");
    if (clip) {
        desc->has_clip = true;
        desc->clip = clip->f;
        if (!(clip->f > 0)) {
            snprintf(why, why_n, "clip %g must be positive", (double)clip->f);
            return false;
        }
    }
    desc->input_forget = kind == 0 && cp_node_attr_int(n, "input_forget", 0) != 0;
    desc->linear_before_reset = kind == 1 && cp_node_attr_int(n, "linear_before_reset", 0) != 0;

    const struct cp_attr *acts = cp_node_attr(n, "activations");
    const struct cp_attr *al = cp_node_attr(n, "activation_alpha");
    const struct cp_attr *be = cp_node_attr(n, "activation_beta");
    if ((al && al->type != CP_ATTR_FLOATS) || (be && be->type != CP_ATTR_FLOATS) ||
        (acts && acts->type != CP_ATTR_STRINGS)) {
        snprintf(why, why_n, "activations must be strings, activation_alpha/beta floats");
        return false;
    }
    size_t n_given = acts && acts->type == CP_ATTR_STRINGS ? acts->n : 0;
    size_t want = (size_t)(desc->n_acts * desc->dirs);
    /* One direction's list for a bidirectional node applies to both. */
    if (acts && n_given != want && !(desc->dirs == 2 && n_given == (size_t)desc->n_acts)) {
        snprintf(why, why_n, "%zu activations given; a %s %s takes %zu", n_given, dir,
                 cp_op_name(n->op), want);
        return false;
    }
    size_t ia = 0, ib = 0;
    for (int d = 0; d < desc->dirs; d++)
        for (int k = 0; k < desc->n_acts; k++) {
            const char *name = default_acts[kind][k];
            if (acts)
                name = acts->strings[((size_t)d * (size_t)desc->n_acts + (size_t)k) % n_given];
            int t = find_act(name ? name : "");
            if (t < 0) {
                snprintf(why, why_n, "activation '%s' is not one ONNX allows", name ? name : "");
                return false;
            }
            struct cp_rnn_fn *f = &desc->fn[d][k];
            f->act = act_table[t].act;
            f->alpha = act_table[t].alpha;
            f->beta = act_table[t].beta;
            if (act_table[t].n_alpha && al && ia < al->n)
                f->alpha = al->floats[ia++];
            if (act_table[t].n_beta && be && ib < be->n)
                f->beta = be->floats[ib++];
        }
    return true;
}
