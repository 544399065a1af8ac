/*
 * LayoutTransformPass: the memory format of every activation, from
 * --input_format and --layout_policy, with a TransData node wherever two
 * formats meet.
 *
 * 1. Graph inputs are tagged as --input_format says their data arrives:
 *    NCHW / NCDHW / ND are plain row-major; NHWC tags rank-4 inputs NHWC
 *    (the caller feeds NHWC bytes for the model's NCHW shape). Every other
 *    tensor of known rank is tagged plain (NCHW for rank 4, NCDHW for 5,
 *    else ND), so the .om states every layout.
 *
 * 2. With the nhwc or blocked policy, conv regions are found: connected
 *    sets of ops whose kernels read every layout the policy gives (Conv,
 *    FusedConv, the pools, GroupNormalization) and of elementwise
 *    ops whose operands all have the output's shape, or are single
 *    elements, so that they work on any byte order, or are one value per
 *    channel (squeeze-excitation's scale), which oneDNN's binary kernel
 *    broadcasts over any layout and whose bytes no layout changes; and of
 *    channel selections (a constant-index Gather or a Slice of the
 *    channel axis), which make their region NHWC. A region needs a
 *    convolution or pool: elementwise ops alone gain nothing from a layout.
 *    A lone conv between plain ops does form a region: the conv kernels run
 *    in the layouts they are given (runner/cpu/dnnl_conv.c), so the policy
 *    decides the conv's own format and the TransData around it show what
 *    that costs.
 *
 * 3. Inside a region, activations get the policy's layout: NHWC, or
 *    oneDNN's blocked layout whose block is the target's vector (nChw16c
 *    with AVX-512 when C is a multiple of 16, else nChw8c when it is a
 *    multiple of 8), else plain (a blocked layout never pads). On AVX2
 *    oneDNN's convolutions run nChw8c only: nChw16c there cost two
 *    reorders per convolution. On AVX-512 a blocked region where some
 *    activation's C is a multiple of 8 but not of 16 (MobileNetV3's 24,
 *    40, 72, 120 channels) runs NHWC throughout: mixing nChw16c and
 *    nChw8c made oneDNN reorder inside every convolution where they met,
 *    and its AVX-512 binary and AVX2 kernels have no nChw8c path there,
 *    while its AVX-512 convolutions and binary ops all take NHWC. Wherever a
 *    tensor is read in a layout other than the one it has (a region's
 *    input, a plain op reading a region's result, a graph output) a
 *    TransData node converts it, once per tensor and target layout, so the
 *    cost is a node of its own in every trace. Ops outside regions only
 *    ever see plain tensors; graph outputs keep their names and are plain.
 */
#include "atc_bridge/passes/layout_internal.h"
#include "atc_bridge/passes/rewrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what a region may hold ---------------------------------------------------------- */

enum { ROLE_NONE = 0, ROLE_ANCHOR, ROLE_ELEMENTWISE };

static bool is_unary(enum cp_op op)
{
    switch (op) {
    case CP_OP_RELU:
    case CP_OP_LEAKY_RELU:
    case CP_OP_SIGMOID:
    case CP_OP_TANH:
    case CP_OP_EXP:
    case CP_OP_SQRT:
    case CP_OP_ERF:
    case CP_OP_CLIP:
    case CP_OP_GELU:
    case CP_OP_HARD_SWISH:
    case CP_OP_HARD_SIGMOID:
    case CP_OP_ELU:
    case CP_OP_SOFTPLUS:
    case CP_OP_MISH:
        return true;
    default:
        return false;
    }
}

static bool is_binary(enum cp_op op)
{
    return op == CP_OP_ADD || op == CP_OP_SUB || op == CP_OP_MUL || op == CP_OP_DIV ||
           op == CP_OP_POW;
}

static const struct cp_tensor *tensor_or_null(const struct cp_graph *g, const struct cp_node *n,
                                              size_t slot, bool output)
{
    size_t cnt = output ? n->n_outputs : n->n_inputs;
    if (slot >= cnt)
        return NULL;
    int32_t t = output ? n->outputs[slot] : n->inputs[slot];
    return t >= 0 ? cp_graph_tensor(g, t) : NULL;
}

/* A rank-4 f32 tensor with a known channel count. */
static bool is_image(const struct cp_tensor *t)
{
    return t && t->dtype == CP_DTYPE_F32 && t->shape.rank == 4 && t->shape.dims[1].value > 0;
}

static bool is_single(const struct cp_tensor *t)
{
    return t && cp_shape_is_static(&t->shape) && cp_shape_numel(&t->shape) == 1;
}

/* Whether t is one value per channel of the image y: [C,1,1], [1,C,1,1]
 * or [N,C,1,1]. Its bytes are the same in every layout, and oneDNN's binary
 * kernel broadcasts it over an NHWC or blocked operand. */
static bool is_channel_vector(const struct cp_tensor *t, const struct cp_tensor *y)
{
    if (!t || !is_image(y) || t->dtype != CP_DTYPE_F32 || !cp_shape_is_static(&t->shape) ||
        t->shape.rank < 3 || t->shape.rank > 4)
        return false;
    const struct cp_dim *d = t->shape.dims + (t->shape.rank - 3);
    if (t->shape.rank == 4 && t->shape.dims[0].value != 1 &&
        t->shape.dims[0].value != y->shape.dims[0].value)
        return false;
    return d[0].value == y->shape.dims[1].value && d[1].value == 1 && d[2].value == 1;
}

/* A per-channel operand of a binary op in a region: the second operand of
 * Add, Sub, Mul and Div, or either of Add and Mul (dnnl_binary.c). */
static bool is_channel_operand(const struct cp_graph *g, const struct cp_node *n, size_t slot)
{
    if (!is_binary(n->op) || n->op == CP_OP_POW || n->n_inputs != 2)
        return false;
    const struct cp_tensor *y = tensor_or_null(g, n, 0, true);
    const struct cp_tensor *t = tensor_or_null(g, n, slot, false);
    const struct cp_tensor *o = tensor_or_null(g, n, 1 - slot, false);
    if (!is_channel_vector(t, y) || !o || !cp_shape_equal(&o->shape, &y->shape) ||
        cp_shape_equal(&t->shape, &y->shape))
        return false;
    return slot == 1 || n->op == CP_OP_ADD || n->op == CP_OP_MUL;
}

/* Whether input `slot` of n carries an activation that must share the
 * region's layout (the others are weights, scalars, bounds). */
static bool is_act_slot(const struct cp_graph *g, const struct cp_node *n, size_t slot)
{
    const struct cp_tensor *t = tensor_or_null(g, n, slot, false);
    if (!t)
        return false;
    if (n->op == CP_OP_FUSED_CONV)
        return slot == 0 || slot == 3;
    if (n->op == CP_OP_CONCAT)
        return true;
    if (is_binary(n->op))
        return !is_single(t) && !is_channel_operand(g, n, slot);
    return slot == 0;
}

/* The layout the policy gives an activation inside a region. */
static enum cp_layout policy_layout(const struct cp_tensor *t, enum cp_layout_policy pol,
                                    int vector_floats)
{
    if (!is_image(t))
        return cp_lay_plain_for_rank(t->shape.rank);
    int64_t c = t->shape.dims[1].value;
    if (pol == CP_LAYOUT_POLICY_NHWC)
        return CP_LAYOUT_NHWC;
    if (pol == CP_LAYOUT_POLICY_BLOCKED || pol == CP_LAYOUT_POLICY_AUTO)
        return c % 16 == 0 && vector_floats != 8 ? CP_LAYOUT_NCHW16C
               : c % 8 == 0                      ? CP_LAYOUT_NCHW8C
                                                 : CP_LAYOUT_NCHW;
    return CP_LAYOUT_NCHW;
}

/* A channel Concat whose parts all get the result's layout: c:concat
 * then copies them as whole blocks (NHWC: whole pixels). */
static bool concat_keeps_layout(const struct cp_graph *g, const struct cp_node *n,
                                enum cp_layout_policy pol, int vector_floats)
{
    const struct cp_tensor *y = tensor_or_null(g, n, 0, true);
    if (cp_node_attr_int(n, "axis", 0) != 1 && cp_node_attr_int(n, "axis", 0) != -3)
        return false;
    enum cp_layout want = policy_layout(y, pol, vector_floats);
    if (cp_lay_is_plain(want))
        return false;
    for (size_t j = 0; j < n->n_inputs; j++) {
        const struct cp_tensor *t = tensor_or_null(g, n, j, false);
        if (!is_image(t) || policy_layout(t, pol, vector_floats) != want)
            return false;
    }
    return n->n_inputs > 0 && n->n_inputs <= 64; /* the kernels' most parts */
}

/* A Gather with constant indices, or a Slice, that selects channels of an
 * image and nothing else: in NHWC a per-pixel copy of channels
 * (runner/cpu/fast_copy.c), as ShuffleNet's shuffles and halves are once
 * TransposeOptimizationPass has made them Gathers. */
static bool is_channel_select(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *x = tensor_or_null(g, n, 0, false), *y = tensor_or_null(g, n, 0, true);
    int64_t first[CP_MAX_RANK], step[CP_MAX_RANK];
    if (!is_image(x) || !is_image(y))
        return false;
    return n->op == CP_OP_GATHER ? cp_rw_channel_gather(g, n) != NULL
                                 : cp_rw_channel_slice(g, n, first, step);
}

/* The region role of node n under the policy; `select` admits channel
 * selections (they run NHWC only). */
static int region_role(const struct cp_graph *g, const struct cp_node *n, enum cp_layout_policy pol,
                       bool select)
{
    const struct cp_tensor *y = tensor_or_null(g, n, 0, true);
    if (n->dead || !is_image(y))
        return ROLE_NONE;
    for (size_t j = 1; j < n->n_outputs; j++)
        if (n->outputs[j] >= 0)
            return ROLE_NONE; /* MaxPool's Indices, LayerNorm-like extras */
    const struct cp_tensor *x = tensor_or_null(g, n, 0, false);
    switch (n->op) {
    case CP_OP_CONV:
    case CP_OP_FUSED_CONV:
    case CP_OP_MAX_POOL:
    case CP_OP_AVERAGE_POOL:
    case CP_OP_GLOBAL_AVERAGE_POOL:
        return is_image(x) ? ROLE_ANCHOR : ROLE_NONE;
    case CP_OP_CONCAT:
        /* parts that agree at block 8 agree in the layout their region
         * gets: nChw16c if every C is a multiple of 16, else NHWC */
        return concat_keeps_layout(g, n, pol, 8) ? ROLE_ELEMENTWISE : ROLE_NONE;
    case CP_OP_BATCH_NORMALIZATION:
        /* c:batch_norm reads NHWC and the blocked layouts in place; its
         * per-channel parameters are not activations */
        return is_image(x) && cp_shape_equal(&x->shape, &y->shape) &&
                       cp_node_attr_int(n, "training_mode", 0) == 0
                   ? ROLE_ELEMENTWISE
                   : ROLE_NONE;
    case CP_OP_GROUP_NORMALIZATION:
        /* its fast kernel reads NHWC and the blocked layouts in place
         * (runner/cpu/fast_groupnorm.c), so a norm between two convs no
         * longer splits their region with a TransData on either side */
        return is_image(x) ? ROLE_ELEMENTWISE : ROLE_NONE;
    case CP_OP_GATHER:
    case CP_OP_SLICE:
        return select && is_channel_select(g, n) ? ROLE_ELEMENTWISE : ROLE_NONE;
    default:
        break;
    }
    if (is_unary(n->op)) {
        for (size_t j = 1; j < n->n_inputs; j++)
            if (n->inputs[j] >= 0 && !is_single(tensor_or_null(g, n, j, false)))
                return ROLE_NONE;
        return x && cp_shape_equal(&x->shape, &y->shape) && x->dtype == CP_DTYPE_F32
                   ? ROLE_ELEMENTWISE
                   : ROLE_NONE;
    }
    if (is_binary(n->op)) {
        bool full = false;
        for (size_t j = 0; j < n->n_inputs; j++) {
            const struct cp_tensor *t = tensor_or_null(g, n, j, false);
            if (!t)
                return ROLE_NONE;
            if (is_single(t) || is_channel_operand(g, n, j))
                continue;
            if (!cp_shape_equal(&t->shape, &y->shape) || t->dtype != CP_DTYPE_F32)
                return ROLE_NONE;
            full = true;
        }
        return full ? ROLE_ELEMENTWISE : ROLE_NONE;
    }
    return ROLE_NONE;
}

/* Two layouts hold the same bytes: equal, or both plain. */
static bool same_bytes(enum cp_layout a, enum cp_layout b)
{
    return a == b || (cp_lay_is_plain(a) && cp_lay_is_plain(b));
}

/* ---- step 1: tags ------------------------------------------------------------------- */

static enum cp_layout input_layout(const struct cp_tensor *t, enum cp_input_format f)
{
    if (f == CP_FMT_ND)
        return CP_LAYOUT_ND;
    if (f == CP_FMT_NHWC && t->shape.rank == 4)
        return CP_LAYOUT_NHWC;
    return cp_lay_plain_for_rank(t->shape.rank);
}

static bool tag_tensors(struct cp_lay *l, enum cp_input_format f)
{
    struct cp_graph *g = l->g;
    bool changed = false;
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++) {
        int32_t ti = cp_graph_input(g, i);
        struct cp_tensor *t = cp_graph_tensor(g, ti);
        if (t->kind != CP_TENSOR_INPUT || t->shape.rank < 0)
            continue;
        enum cp_layout want = input_layout(t, f);
        if (l->is_output[ti] && !cp_lay_is_plain(want))
            want = cp_lay_plain_for_rank(t->shape.rank); /* a pass-through stays plain */
        if (t->layout != want) {
            t->layout = want;
            changed = true;
        }
    }
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++) {
        struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        if (t->layout != CP_LAYOUT_UNDEF || t->shape.rank < 0)
            continue;
        t->layout = cp_lay_plain_for_rank(t->shape.rank);
        changed = true;
    }
    return changed;
}

/* ---- step 2: regions ------------------------------------------------------------------ */

static int32_t uf_find(int32_t *parent, int32_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

struct lt_state {
    struct cp_lay *l;
    enum cp_layout_policy pol;
    int vector_floats;
    size_t n_nodes;
    uint8_t *role;   /* per node */
    int32_t *parent; /* union-find over nodes */
    bool *in_region; /* per node, after the keep decision */
    uint8_t *nhwc;   /* per node: its blocked region runs NHWC */
    uint8_t *force;  /* per node: --layout_regions' layout for its region (FORCE_*) */
    /* conversions made: src tensor read as layout -> dst tensor */
    struct lt_conv {
        int32_t src, dst;
        enum cp_layout to;
    } * conv;
    size_t n_conv, cap_conv;
};

/* True when t would be blocked at 8 but not at 16. */
static bool wants_block8(const struct cp_tensor *t)
{
    return is_image(t) && t->shape.dims[1].value % 16 != 0 && t->shape.dims[1].value % 8 == 0;
}

/* Region marks, per root: bits of what its nodes hold. */
enum { MARK_BLOCK8 = 1, MARK_DENSE_CONV = 2, MARK_OTHER_CONV = 4, MARK_SELECT = 8, MARK_INT8 = 16 };

/* Output pixels up to which the auto policy runs a dense region's node
 * NHWC (ResNet's last stage at 224x224 is 7x7). */
#define AUTO_NHWC_PIXELS 49

/* The pixels a region node works at: its output's, but a pool's input's
 * (a global pool's 1x1 result says nothing of the map it reads). */
static int64_t node_pixels(const struct cp_graph *g, const struct cp_node *n)
{
    bool pool = n->op == CP_OP_MAX_POOL || n->op == CP_OP_AVERAGE_POOL ||
                n->op == CP_OP_GLOBAL_AVERAGE_POOL;
    const struct cp_tensor *t = tensor_or_null(g, n, 0, !pool);
    if (!is_image(t) || t->shape.dims[2].value < 0 || t->shape.dims[3].value < 0)
        return -1;
    return t->shape.dims[2].value * t->shape.dims[3].value;
}

/* On AVX-512, which region nodes of the blocked and auto policies run
 * NHWC:
 *  - all of a region where an activation (a result or one it reads) has
 *    a C that is a multiple of 8 only, or that holds a channel selection
 *    (is_channel_select: its kernel reads NHWC, not the blocked layouts);
 *  - with the auto policy, in a region whose convolutions are all dense
 *    (group 1, not transposed), the nodes working on at most
 *    AUTO_NHWC_PIXELS pixels. oneDNN 2.6 runs a dense convolution on NHWC
 *    with its brgemm kernel, on nChw16c with its direct one, which blocks
 *    over output columns: where there are few (ResNet-18 at 64x64: 2x2
 *    and 4x4 maps, 512 and 256 channels) brgemm took a third less time,
 *    at 7x7 15% less, on larger maps about the same. The TransData where
 *    a network's maps shrink below the mark is one small reorder. Its
 *    depthwise and grouped convolutions are faster on nChw16c
 *    (EfficientNet-B0, RegNetX and ConvNeXt ran 25-47% slower NHWC), so
 *    regions holding one stay blocked;
 *  - all of a region holding an int8 convolution (Int8QuantizationPass):
 *    oneDNN 2.6's int8 convolutions (brgconv, jit_int8) take NHWC, and on
 *    nChw16c they got the reference loop, which the kernel avoids by
 *    reordering around every convolution (resnet_tiny in int8: +40% over
 *    fp32 blocked, from those reorders).
 * `mark` is per root scratch, at least n_nodes. */
static void choose_nhwc_regions(struct lt_state *s, int32_t *mark)
{
    const struct cp_graph *g = s->l->g;
    size_t nn = s->n_nodes;
    if ((s->pol != CP_LAYOUT_POLICY_BLOCKED && s->pol != CP_LAYOUT_POLICY_AUTO) ||
        s->vector_floats == 8)
        return;
    memset(mark, 0, nn * sizeof *mark);
    for (size_t i = 0; i < nn; i++) {
        if (!s->in_region[i])
            continue;
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        int32_t root = uf_find(s->parent, (int32_t)i);
        bool b8 = wants_block8(tensor_or_null(g, n, 0, true));
        for (size_t j = 0; j < n->n_inputs && !b8; j++)
            b8 = is_act_slot(g, n, j) && wants_block8(tensor_or_null(g, n, j, false));
        if (b8)
            mark[root] |= MARK_BLOCK8;
        if (n->op == CP_OP_GATHER || n->op == CP_OP_SLICE)
            mark[root] |= MARK_SELECT;
        if (n->op == CP_OP_CONV || n->op == CP_OP_FUSED_CONV)
            mark[root] |= cp_node_attr_int(n, "group", 1) == 1 ? MARK_DENSE_CONV : MARK_OTHER_CONV;
        if ((n->op == CP_OP_CONV || n->op == CP_OP_FUSED_CONV) &&
            strcmp(cp_node_attr_string(n, "compute_precision", ""), "int8") == 0)
            mark[root] |= MARK_INT8;
        else if (n->op == CP_OP_CONV_TRANSPOSE)
            mark[root] |= MARK_OTHER_CONV;
    }
    for (size_t i = 0; i < nn; i++) {
        int32_t m = s->in_region[i] ? mark[uf_find(s->parent, (int32_t)i)] : 0;
        bool dense = (m & (MARK_DENSE_CONV | MARK_OTHER_CONV)) == MARK_DENSE_CONV;
        int64_t px = s->in_region[i] ? node_pixels(g, cp_graph_node(g, (int32_t)i)) : -1;
        s->nhwc[i] =
            (m & (MARK_BLOCK8 | MARK_SELECT | MARK_INT8)) ||
            (s->pol == CP_LAYOUT_POLICY_AUTO && dense && px >= 0 && px <= AUTO_NHWC_PIXELS);
    }
}

enum { FORCE_NONE = 0, FORCE_NHWC, FORCE_BLOCKED };

/* The layout node i's region gives activation t. */
static enum cp_layout region_layout(const struct lt_state *s, int32_t i, const struct cp_tensor *t)
{
    if (s->force[i] == FORCE_NHWC)
        return policy_layout(t, CP_LAYOUT_POLICY_NHWC, s->vector_floats);
    if (s->force[i] == FORCE_BLOCKED)
        return policy_layout(t, CP_LAYOUT_POLICY_BLOCKED, s->vector_floats);
    return policy_layout(t, s->nhwc[i] ? CP_LAYOUT_POLICY_NHWC : s->pol, s->vector_floats);
}

/* Whether node n stands for ONNX node `name`. */
static bool stands_for(const struct cp_node *n, const char *name)
{
    if (strcmp(n->name, name) == 0)
        return true;
    for (size_t k = 0; k < n->n_origins; k++)
        if (strcmp(n->origins[k], name) == 0)
            return true;
    return false;
}

/* --layout_regions: the region holding each named node takes the layout
 * given (nchw: it is no region). A node in no region is an error: the
 * knob would do nothing. A channel selection runs NHWC only, so its region
 * cannot be made blocked. */
static enum cp_status apply_region_overrides(struct lt_state *s, const char *list)
{
    const struct cp_graph *g = s->l->g;
    for (const char *p = list; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char entry[1024];
        snprintf(entry, sizeof entry, "%.*s", (int)len, p);
        p = nl ? nl + 1 : p + len;
        char *colon = strrchr(entry, ':');
        if (!colon)
            continue;
        *colon = '\0';
        const char *pol = colon + 1;
        int32_t root = -1;
        for (size_t i = 0; i < s->n_nodes && root < 0; i++)
            if (s->in_region[i] && stands_for(cp_graph_node(g, (int32_t)i), entry))
                root = uf_find(s->parent, (int32_t)i);
        if (root < 0)
            return cp_diag_set(s->l->d, CP_ERR_USAGE,
                               "--layout_regions: node '%s' is in no conv region under "
                               "--layout_policy=%s (regions form around Conv and pooling)",
                               entry, cp_layout_policy_name(s->pol));
        for (size_t i = 0; i < s->n_nodes; i++) {
            if (!s->in_region[i] || uf_find(s->parent, (int32_t)i) != root)
                continue;
            const struct cp_node *n = cp_graph_node(g, (int32_t)i);
            if (strcmp(pol, "blocked") == 0 && (n->op == CP_OP_GATHER || n->op == CP_OP_SLICE))
                return cp_diag_set(s->l->d, CP_ERR_USAGE,
                                   "--layout_regions: the region of '%s' holds the channel "
                                   "selection '%s', which runs NHWC only; make it nhwc or nchw",
                                   entry, n->name);
        }
        for (size_t i = 0; i < s->n_nodes; i++) {
            if (!s->in_region[i] || uf_find(s->parent, (int32_t)i) != root)
                continue;
            if (strcmp(pol, "nchw") == 0)
                s->in_region[i] = false;
            else
                s->force[i] = strcmp(pol, "nhwc") == 0 ? FORCE_NHWC : FORCE_BLOCKED;
        }
    }
    return CP_OK;
}

/* Connect region candidates through the activations they pass, then keep
 * the components holding an anchor (a conv or pool). */
static enum cp_status find_regions(struct lt_state *s)
{
    struct cp_graph *g = s->l->g;
    size_t nn = s->n_nodes;
    int32_t *anchors = calloc(nn + 1, sizeof *anchors);
    if (!anchors)
        return cp_diag_set(s->l->d, CP_ERR_NOMEM, "out of memory in a layout pass");
    /* channel selections run NHWC only: under the nhwc policy, or where
     * AVX-512 lets a blocked region run NHWC (choose_nhwc_regions) */
    bool select = s->pol == CP_LAYOUT_POLICY_NHWC || s->vector_floats != 8;
    for (size_t i = 0; i < nn; i++) {
        s->parent[i] = (int32_t)i;
        s->role[i] = (uint8_t)region_role(g, cp_graph_node(g, (int32_t)i), s->pol, select);
    }
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (!s->role[i])
            continue;
        for (size_t j = 0; j < n->n_inputs; j++) {
            if (!is_act_slot(g, n, j))
                continue;
            int32_t p = cp_graph_tensor(g, n->inputs[j])->producer;
            if (p < 0 || (size_t)p >= nn || !s->role[p])
                continue;
            int32_t a = uf_find(s->parent, p), b = uf_find(s->parent, (int32_t)i);
            if (a != b)
                s->parent[a] = b;
        }
    }
    for (size_t i = 0; i < nn; i++)
        if (s->role[i] == ROLE_ANCHOR)
            anchors[uf_find(s->parent, (int32_t)i)]++;
    for (size_t i = 0; i < nn; i++) {
        int32_t root = s->role[i] ? uf_find(s->parent, (int32_t)i) : -1;
        s->in_region[i] = root >= 0 && anchors[root] > 0;
    }
    choose_nhwc_regions(s, anchors);
    free(anchors);
    return CP_OK;
}

/* ---- step 3: layouts and TransData ---------------------------------------------------- */

static enum cp_status remember(struct lt_state *s, int32_t src, enum cp_layout to, int32_t dst)
{
    if (s->n_conv == s->cap_conv) {
        size_t cap = s->cap_conv ? 2 * s->cap_conv : 32;
        struct lt_conv *c = realloc(s->conv, cap * sizeof *c);
        if (!c)
            return cp_diag_set(s->l->d, CP_ERR_NOMEM, "out of memory in a layout pass");
        s->conv = c;
        s->cap_conv = cap;
    }
    s->conv[s->n_conv].src = src;
    s->conv[s->n_conv].to = to;
    s->conv[s->n_conv].dst = dst;
    s->n_conv++;
    return CP_OK;
}

/* Tensor t as layout `to`: t itself when its bytes already are, else the
 * result of a (possibly new) TransData. `reader` names the node for the
 * TransData's origins when t has no producer. OUT: *out. */
static enum cp_status as_layout(struct lt_state *s, int32_t t, enum cp_layout to, int32_t reader,
                                int32_t *out)
{
    struct cp_lay *l = s->l;
    struct cp_tensor *T = cp_graph_tensor(l->g, t);
    if (same_bytes(T->layout, to)) {
        *out = t;
        return CP_OK;
    }
    for (size_t i = 0; i < s->n_conv; i++)
        if (s->conv[i].src == t && same_bytes(s->conv[i].to, to)) {
            *out = s->conv[i].dst;
            return CP_OK;
        }
    char suffix[32];
    snprintf(suffix, sizeof suffix, "_%s", cp_layout_name(to));
    int32_t dst;
    enum cp_status st = cp_lay_new_tensor_like(l, t, cp_graph_tensor(l->g, t)->name, suffix, &dst);
    if (st != CP_OK)
        return st;
    T = cp_graph_tensor(l->g, t);
    int32_t origin = T->producer >= 0 ? T->producer : reader;
    if ((st = cp_lay_add_transdata(l, t, T->layout, dst, to, origin, NULL)) != CP_OK)
        return st;
    if ((st = remember(s, t, to, dst)) != CP_OK)
        return st;
    *out = dst;
    return CP_OK;
}

/* Region node i writes its result in the policy's layout. A graph output
 * keeps its name and stays plain: the node writes a new tensor and a
 * TransData makes the output. */
static enum cp_status lay_out_result(struct lt_state *s, int32_t i)
{
    struct cp_lay *l = s->l;
    struct cp_node *n = cp_graph_node(l->g, i);
    int32_t y = n->outputs[0];
    struct cp_tensor *Y = cp_graph_tensor(l->g, y);
    enum cp_layout want = region_layout(s, i, Y);
    if (cp_lay_is_plain(want))
        return CP_OK;
    if (!l->is_output[y]) {
        Y->layout = want;
        return CP_OK;
    }
    char suffix[32];
    snprintf(suffix, sizeof suffix, "_%s", cp_layout_name(want));
    int32_t y2;
    enum cp_status st = cp_lay_new_tensor_like(l, y, Y->name, suffix, &y2);
    if (st != CP_OK)
        return st;
    n = cp_graph_node(l->g, i);
    n->outputs[0] = y2;
    cp_graph_tensor(l->g, y2)->producer = i;
    cp_graph_tensor(l->g, y2)->layout = want;
    cp_graph_tensor(l->g, y)->producer = -1;
    /* other readers of the output now read the re-laid-out result; the
     * repair step converts it for them as they need */
    size_t nu;
    const struct cp_lay_use *u = cp_lay_uses(l, y, &nu);
    for (size_t k = 0; k < nu; k++)
        cp_graph_node(l->g, u[k].node)->inputs[u[k].slot] = y2;
    enum cp_layout plain = cp_lay_plain_for_rank(4);
    if ((st = cp_lay_add_transdata(l, y2, want, y, plain, i, NULL)) != CP_OK)
        return st;
    return remember(s, y2, plain, y);
}

/* The layout input `slot` of node i must be read in. */
static enum cp_layout required_layout(const struct lt_state *s, int32_t i, size_t slot)
{
    const struct cp_graph *g = s->l->g;
    const struct cp_node *n = cp_graph_node(g, i);
    const struct cp_tensor *t = cp_graph_tensor(g, n->inputs[slot]);
    if ((size_t)i < s->n_nodes && s->in_region[i] && is_channel_operand(g, n, slot))
        return t->layout; /* the same bytes in every layout: read as it is */
    if ((size_t)i >= s->n_nodes || !s->in_region[i] || !is_act_slot(g, n, slot))
        return cp_lay_plain_for_rank(t->shape.rank);
    if (s->role[i] == ROLE_ANCHOR && slot == 0)
        return region_layout(s, i, t);
    /* elementwise operands and FusedConv's residual: the result's layout */
    return cp_graph_tensor(g, n->outputs[0])->layout;
}

static enum cp_status repair_inputs(struct lt_state *s)
{
    struct cp_lay *l = s->l;
    for (size_t i = 0; i < s->n_nodes; i++) {
        struct cp_node *n = cp_graph_node(l->g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++) {
            int32_t t = n->inputs[j];
            if (t < 0 || cp_graph_tensor(l->g, t)->shape.rank < 0)
                continue;
            enum cp_layout want = required_layout(s, (int32_t)i, j);
            int32_t r;
            enum cp_status st = as_layout(s, t, want, (int32_t)i, &r);
            if (st != CP_OK)
                return st;
            cp_graph_node(l->g, (int32_t)i)->inputs[j] = r;
        }
    }
    return CP_OK;
}

/* Graph outputs that are still not plain (a NHWC graph input passed
 * through untouched cannot be: tag_tensors keeps those plain). */
static enum cp_status check_outputs(const struct lt_state *s)
{
    const struct cp_graph *g = s->l->g;
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, cp_graph_output(g, i));
        if (!cp_lay_is_plain(t->layout))
            return cp_diag_set(s->l->d, CP_ERR_INTERNAL,
                               "LayoutTransformPass: graph output '%s' left in layout %s", t->name,
                               cp_layout_name(t->layout));
    }
    return CP_OK;
}

enum cp_status cp_layout_transform_run(struct cp_pass_ctx *ctx, bool *changed)
{
    *changed = false;
    struct lt_state s;
    memset(&s, 0, sizeof s);
    struct cp_lay l;
    enum cp_status st = cp_lay_init(&l, ctx->g, ctx->d);
    if (st != CP_OK)
        return st;
    s.l = &l;
    s.pol = ctx->config ? ctx->config->layout_policy : CP_LAYOUT_POLICY_NCHW;
    s.vector_floats = ctx->vector_floats;
    enum cp_input_format fmt = ctx->config ? ctx->config->input_format : CP_FMT_NCHW;
    *changed = tag_tensors(&l, fmt);
    s.n_nodes = cp_graph_n_nodes(ctx->g);
    size_t nodes_before = s.n_nodes;
    s.role = calloc(s.n_nodes + 1, sizeof *s.role);
    s.parent = calloc(s.n_nodes + 1, sizeof *s.parent);
    s.in_region = calloc(s.n_nodes + 1, sizeof *s.in_region);
    s.nhwc = calloc(s.n_nodes + 1, sizeof *s.nhwc);
    s.force = calloc(s.n_nodes + 1, sizeof *s.force);
    if (!s.role || !s.parent || !s.in_region || !s.nhwc || !s.force) {
        st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory in a layout pass");
        goto out;
    }
    if (s.pol != CP_LAYOUT_POLICY_NCHW && (st = find_regions(&s)) != CP_OK)
        goto out;
    if (s.pol != CP_LAYOUT_POLICY_NCHW && ctx->config &&
        (st = apply_region_overrides(&s, ctx->config->layout_regions)) != CP_OK)
        goto out;
    for (size_t i = 0; i < s.n_nodes && st == CP_OK; i++)
        if (s.in_region[i]) {
            st = lay_out_result(&s, (int32_t)i);
            *changed = true;
        }
    if (st == CP_OK)
        st = repair_inputs(&s);
    if (st == CP_OK)
        st = check_outputs(&s);
    if (cp_graph_n_nodes(ctx->g) != nodes_before)
        *changed = true;
out:
    free(s.role);
    free(s.parent);
    free(s.in_region);
    free(s.nhwc);
    free(s.force);
    free(s.conv);
    cp_lay_release(&l);
    return st;
}
