/* Model fingerprints and their similarity (knowledge/kb_tuning.h;
 * definitions in docs/kb-schema.md, "Fingerprints" and "Similarity").
 *
 * A fingerprint looks at the graph's structure only: op types, the edges
 * between nodes, attribute values, the shapes (never the bytes) of
 * initializers and the graph inputs. Patterns are recognised both as an
 * exporter writes them (Softmax between two MatMuls, ReduceMean/Sub chains,
 * Erf) and as our passes fuse them (FusedAttention, GroupNormalization,
 * Gelu), so a fingerprint of the source model and one of a converted model
 * name the same patterns even though their hashes differ. */
#include "core/json.h"
#include "knowledge/kb_tuning.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How far back through reshapes, scalings and masks a pattern walk goes. */
#define WALK_DEPTH 4

/* ---- pattern recognition --------------------------------------------------- */

static const struct cp_node *producer_of(const struct cp_graph *g, int32_t t)
{
    if (t < 0 || (size_t)t >= cp_graph_n_tensors(g))
        return NULL;
    int32_t p = cp_graph_tensor(g, t)->producer;
    if (p < 0 || (size_t)p >= cp_graph_n_nodes(g))
        return NULL;
    const struct cp_node *n = cp_graph_node(g, p);
    return n->dead ? NULL : n;
}

/* Ops an attention block puts between its MatMuls and Softmax: scaling,
 * masking, head reshapes, casts. */
static bool is_passthrough(enum cp_op op)
{
    switch (op) {
    case CP_OP_MUL:
    case CP_OP_DIV:
    case CP_OP_ADD:
    case CP_OP_SUB:
    case CP_OP_WHERE:
    case CP_OP_CAST:
    case CP_OP_RESHAPE:
    case CP_OP_TRANSPOSE:
    case CP_OP_IDENTITY:
    case CP_OP_DROPOUT:
    case CP_OP_SQUEEZE:
    case CP_OP_UNSQUEEZE:
        return true;
    default:
        return false;
    }
}

static bool is_matmul(enum cp_op op)
{
    return op == CP_OP_MATMUL || op == CP_OP_FUSED_MATMUL;
}

/* Whether tensor t is computed by an op `want` (a matmul when want is
 * CP_OP_MATMUL), possibly behind up to `depth` pass-through ops. */
static bool reaches(const struct cp_graph *g, int32_t t, enum cp_op want, int depth)
{
    const struct cp_node *n = producer_of(g, t);
    if (!n)
        return false;
    if (n->op == want || (want == CP_OP_MATMUL && is_matmul(n->op)))
        return true;
    if (depth <= 0 || !is_passthrough(n->op))
        return false;
    for (size_t i = 0; i < n->n_inputs; i++)
        if (reaches(g, n->inputs[i], want, depth - 1))
            return true;
    return false;
}

/* Decomposed attention: a MatMul fed by a Softmax that is fed by a MatMul
 * (scores = Q Kᵀ, scaled and masked; probabilities times V). */
static bool is_attention_matmul(const struct cp_graph *g, const struct cp_node *m)
{
    for (size_t i = 0; i < m->n_inputs; i++) {
        const struct cp_node *s = producer_of(g, m->inputs[i]);
        /* Softmax directly, or behind a cast/reshape. */
        for (int hop = 0; s && s->op != CP_OP_SOFTMAX && hop < 2 && is_passthrough(s->op); hop++)
            s = s->n_inputs > 0 ? producer_of(g, s->inputs[0]) : NULL;
        if (s && s->op == CP_OP_SOFTMAX && s->n_inputs > 0 &&
            reaches(g, s->inputs[0], CP_OP_MATMUL, WALK_DEPTH))
            return true;
    }
    return false;
}

/* The reduction axes of a ReduceMean: the "axes" attribute (opsets < 18)
 * or its constant second input. OUT: axes[8], *n (-1 when unknown). */
static void reduce_axes(const struct cp_graph *g, const struct cp_node *r, int64_t axes[8], int *n)
{
    *n = -1;
    const struct cp_attr *a = cp_node_attr(r, "axes");
    if (a && a->type == CP_ATTR_INTS && a->n <= 8) {
        for (size_t i = 0; i < a->n; i++)
            axes[i] = a->ints[i];
        *n = (int)a->n;
        return;
    }
    if (r->n_inputs < 2 || r->inputs[1] < 0)
        return;
    const struct cp_tensor *t = cp_graph_tensor(g, r->inputs[1]);
    if (t->value && t->value_len <= 8) {
        for (int64_t i = 0; i < t->value_len; i++)
            axes[i] = t->value[i];
        *n = (int)t->value_len;
    } else if (t->data && (t->dtype == CP_DTYPE_I64 || t->dtype == CP_DTYPE_I32)) {
        int64_t k = cp_shape_numel(&t->shape);
        if (k < 0 || k > 8)
            return;
        for (int64_t i = 0; i < k; i++)
            axes[i] = cp_elem_load_i64(t->data, t->dtype, i);
        *n = (int)k;
    }
}

/* A decomposed normalisation: Sub(x, ReduceMean(x)). Over the last axis
 * only it is a layer norm; over two or more axes a group/instance norm. */
static void match_decomposed_norm(const struct cp_graph *g, const struct cp_node *sub, bool *ln,
                                  bool *gn)
{
    if (sub->n_inputs != 2)
        return;
    const struct cp_node *r = producer_of(g, sub->inputs[1]);
    if (!r || r->op != CP_OP_REDUCE_MEAN || r->n_inputs < 1 || r->inputs[0] != sub->inputs[0])
        return;
    int64_t axes[8];
    int n = 0;
    reduce_axes(g, r, axes, &n);
    int rank = sub->inputs[0] >= 0 ? cp_graph_tensor(g, sub->inputs[0])->shape.rank : -1;
    if (n == 1 && (axes[0] == -1 || (rank > 0 && axes[0] == rank - 1)))
        *ln = true;
    else if (n >= 2)
        *gn = true;
}

static bool activation_is_gelu(const struct cp_node *n)
{
    const char *act = cp_node_attr_string(n, "activation", "");
    return strcmp(act, "Gelu") == 0 || strcmp(act, "GeluTanh") == 0;
}

static void find_patterns(const struct cp_graph *g, struct cp_kb_fingerprint *fp)
{
    bool has_tanh = false, has_pow = false;
    size_t n_nodes = cp_graph_n_nodes(g);
    for (size_t i = 0; i < n_nodes; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        switch (n->op) {
        case CP_OP_FUSED_ATTENTION:
            fp->has_attention = true;
            break;
        case CP_OP_MATMUL:
        case CP_OP_FUSED_MATMUL:
            if (!fp->has_attention && is_attention_matmul(g, n))
                fp->has_attention = true;
            break;
        case CP_OP_CONV:
        case CP_OP_CONV_TRANSPOSE:
            fp->has_conv = true;
            break;
        case CP_OP_LAYER_NORMALIZATION:
            fp->has_layernorm = true;
            break;
        case CP_OP_GROUP_NORMALIZATION:
        case CP_OP_INSTANCE_NORMALIZATION:
            fp->has_groupnorm = true;
            break;
        case CP_OP_BATCH_NORMALIZATION:
            fp->has_batchnorm = true;
            break;
        case CP_OP_GELU:
        case CP_OP_ERF: /* exporters write GELU as x·½(1 + erf(x/√2)) */
            fp->has_gelu = true;
            break;
        case CP_OP_SUB:
            match_decomposed_norm(g, n, &fp->has_layernorm, &fp->has_groupnorm);
            break;
        case CP_OP_TANH:
            has_tanh = true;
            break;
        case CP_OP_POW:
            has_pow = true;
            break;
        default:
            break;
        }
        if (n->op == CP_OP_FUSED_CONV)
            fp->has_conv = true;
        if ((n->op == CP_OP_FUSED_CONV || n->op == CP_OP_FUSED_MATMUL ||
             n->op == CP_OP_GROUP_NORMALIZATION) &&
            activation_is_gelu(n))
            fp->has_gelu = true;
    }
    if (has_tanh && has_pow) /* the tanh approximation: tanh(√(2/π)(x + 0.044715x³)) */
        fp->has_gelu = true;
}

static const char *classify(const struct cp_kb_fingerprint *fp, const struct cp_graph_stats *s)
{
    if (fp->has_conv && fp->has_attention)
        return "unet";
    if (fp->has_attention)
        return "transformer";
    if (fp->has_conv)
        return "cnn";
    if (s->op_count[CP_OP_MATMUL] + s->op_count[CP_OP_GEMM] + s->op_count[CP_OP_FUSED_MATMUL] > 0)
        return "mlp";
    return "other";
}

/* ---- structure text -------------------------------------------------------- */

static void put_shape(struct cp_buf *b, const struct cp_shape *s)
{
    cp_buf_putc(b, '[');
    for (int i = 0; i < s->rank; i++)
        cp_buf_printf(b, "%s%lld", i ? "," : "",
                      (long long)(s->dims[i].value < 0 ? -1 : s->dims[i].value));
    cp_buf_putc(b, ']');
    if (s->rank < 0)
        cp_buf_puts(b, "?");
}

/* s as a JSON string (core/json.h's escaping), for the canonical text. */
static void put_quoted(struct cp_buf *b, const char *s)
{
    json_t *j = cp_json_str(s ? s : "");
    if (!j || cp_json_dump(j, false, b) != CP_OK)
        b->failed = true;
    json_decref(j);
}

static void put_attr(const struct cp_graph *g, struct cp_buf *b, const struct cp_attr *a)
{
    cp_buf_printf(b, " %s=", a->name);
    switch (a->type) {
    case CP_ATTR_INT:
        cp_buf_printf(b, "%lld", (long long)a->i);
        break;
    case CP_ATTR_FLOAT:
        cp_buf_printf(b, "%.9g", (double)a->f);
        break;
    case CP_ATTR_STRING:
        put_quoted(b, a->s);
        break;
    case CP_ATTR_INTS:
        for (size_t i = 0; i < a->n; i++)
            cp_buf_printf(b, "%s%lld", i ? "," : "", (long long)a->ints[i]);
        break;
    case CP_ATTR_FLOATS:
        for (size_t i = 0; i < a->n; i++)
            cp_buf_printf(b, "%s%.9g", i ? "," : "", (double)a->floats[i]);
        break;
    case CP_ATTR_STRINGS:
        for (size_t i = 0; i < a->n; i++) {
            cp_buf_putc(b, i ? ',' : ' ');
            put_quoted(b, a->strings[i]);
        }
        break;
    case CP_ATTR_TENSOR:
        /* A value tensor (ConstantOfShape): its dtype and shape, not data. */
        if (a->tensor >= 0 && (size_t)a->tensor < cp_graph_n_tensors(g)) {
            const struct cp_tensor *t = cp_graph_tensor(g, a->tensor);
            cp_buf_printf(b, "%s", cp_dtype_name(t->dtype));
            put_shape(b, &t->shape);
        }
        break;
    case CP_ATTR_GRAPH:
        /* A subgraph: its size only (its nodes are not fingerprinted). */
        cp_buf_printf(b, "graph(%zu nodes)", cp_graph_n_live_nodes(a->graph));
        break;
    }
}

/* Where a tensor comes from, independent of names: "p<topo position>.<output
 * index>" for a node output, "i<k>" for graph input k, "w<dtype>[shape]"
 * for an initializer (its shape only), "-" for an absent input. */
static void put_source(const struct cp_graph *g, const int32_t *pos, struct cp_buf *b, int32_t t)
{
    if (t < 0 || (size_t)t >= cp_graph_n_tensors(g)) {
        cp_buf_puts(b, " -");
        return;
    }
    const struct cp_tensor *x = cp_graph_tensor(g, t);
    if (x->producer >= 0) {
        const struct cp_node *p = cp_graph_node(g, x->producer);
        size_t k = 0;
        while (k < p->n_outputs && p->outputs[k] != t)
            k++;
        cp_buf_printf(b, " p%d.%zu", pos[x->producer], k);
        return;
    }
    for (size_t k = 0; k < cp_graph_n_inputs(g); k++)
        if (cp_graph_input(g, k) == t) {
            cp_buf_printf(b, " i%zu", k);
            return;
        }
    cp_buf_printf(b, " w%s", cp_dtype_name(x->dtype));
    put_shape(b, &x->shape);
}

/* The text whose hash is the structure hash (docs/kb-schema.md). */
static void structure_text(const struct cp_graph *g, const int32_t *order, size_t n_order,
                           const int32_t *pos, struct cp_buf *b)
{
    cp_buf_puts(b, "cannprof-structure-v1\n");
    for (size_t k = 0; k < cp_graph_n_inputs(g); k++) {
        const struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, k));
        cp_buf_printf(b, "input %s", cp_dtype_name(t->dtype));
        put_shape(b, &t->shape);
        cp_buf_putc(b, '\n');
    }
    for (size_t i = 0; i < n_order; i++) {
        const struct cp_node *n = cp_graph_node(g, order[i]);
        cp_buf_printf(b, "node %s:%s outputs=%zu inputs", n->domain ? n->domain : "", n->op_type,
                      n->n_outputs);
        for (size_t k = 0; k < n->n_inputs; k++)
            put_source(g, pos, b, n->inputs[k]);
        cp_buf_puts(b, " attrs");
        for (size_t k = 0; k < n->n_attrs; k++)
            put_attr(g, b, &n->attrs[k]);
        cp_buf_putc(b, '\n');
    }
    cp_buf_puts(b, "outputs");
    for (size_t k = 0; k < cp_graph_n_outputs(g); k++)
        put_source(g, pos, b, cp_graph_output(g, k));
    cp_buf_putc(b, '\n');
}

/* ---- histogram and inputs -------------------------------------------------- */

struct op_count {
    const char *op_type;
    int count;
};

static int cmp_op_count(const void *a, const void *b)
{
    return strcmp(((const struct op_count *)a)->op_type, ((const struct op_count *)b)->op_type);
}

/* {"Add":12,...} with keys sorted. */
static enum cp_status histogram_json(const struct cp_graph *g, const int32_t *order, size_t n_order,
                                     char **out)
{
    *out = NULL;
    struct op_count *c = cp_calloc(n_order ? n_order : 1, sizeof *c);
    if (!c)
        return CP_ERR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < n_order; i++) {
        const char *t = cp_graph_node(g, order[i])->op_type;
        size_t k = 0;
        while (k < n && strcmp(c[k].op_type, t) != 0)
            k++;
        if (k == n)
            c[n++].op_type = t;
        c[k].count++;
    }
    qsort(c, n, sizeof *c, cmp_op_count);
    json_t *o = json_object();
    bool ok = o != NULL;
    for (size_t k = 0; ok && k < n; k++)
        ok = cp_json_set_int(o, c[k].op_type, c[k].count);
    free(c);
    *out = ok ? cp_json_text(o) : NULL;
    json_decref(o);
    return *out ? CP_OK : CP_ERR_NOMEM;
}

/* [{"name":"x","dtype":"f32","shape":[1,128,64]}], dynamic dims -1. */
static enum cp_status inputs_json(const struct cp_graph *g, char **out)
{
    json_t *arr = json_array();
    bool ok = arr != NULL;
    for (size_t k = 0; ok && k < cp_graph_n_inputs(g); k++) {
        const struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, k));
        json_t *o = json_object();
        json_t *shape = t->shape.rank < 0 ? json_null() : json_array(); /* rank unknown: null */
        for (int i = 0; shape && i < t->shape.rank; i++)
            cp_json_push(shape,
                         cp_json_int(t->shape.dims[i].value < 0 ? -1 : t->shape.dims[i].value));
        ok = o && cp_json_set_str(o, "name", t->name) &&
             cp_json_set_str(o, "dtype", cp_dtype_name(t->dtype)) && cp_json_set(o, "shape", shape);
        if (!o)
            json_decref(shape);
        ok = ok ? cp_json_push(arr, o) : (json_decref(o), false);
    }
    *out = ok ? cp_json_text(arr) : NULL;
    json_decref(arr);
    return *out ? CP_OK : CP_ERR_NOMEM;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* ---- the fingerprint ------------------------------------------------------- */

enum cp_status cp_kb_fingerprint_graph(const struct cp_graph *g, const char *source_hash,
                                       const char *name, struct cp_kb_fingerprint *out,
                                       struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    int32_t *order = NULL, *pos = NULL;
    size_t n_order = 0;
    struct cp_buf text;
    cp_buf_init(&text);
    enum cp_status st = cp_graph_topo_order(g, &order, &n_order, d);
    if (st != CP_OK)
        goto out;
    size_t n_nodes = cp_graph_n_nodes(g);
    pos = cp_calloc(n_nodes ? n_nodes : 1, sizeof *pos);
    if (!pos) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory fingerprinting the model");
        goto out;
    }
    for (size_t i = 0; i < n_nodes; i++)
        pos[i] = -1;
    for (size_t i = 0; i < n_order; i++)
        pos[order[i]] = (int32_t)i;

    structure_text(g, order, n_order, pos, &text);
    if (cp_buf_status(&text) != CP_OK ||
        histogram_json(g, order, n_order, &out->op_histogram_json) != CP_OK ||
        inputs_json(g, &out->inputs_json) != CP_OK) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory fingerprinting the model");
        goto out;
    }
    cp_hash128_hex(text.data, text.len, out->structure_hash);
    copy_str(out->source_hash, sizeof out->source_hash, source_hash);
    copy_str(out->name, sizeof out->name, name);

    struct cp_graph_stats s;
    cp_graph_stats(g, &s);
    out->params = (int64_t)s.n_params;
    out->flops = s.flops;
    out->n_nodes = (int)s.n_nodes;
    find_patterns(g, out);
    copy_str(out->model_class, sizeof out->model_class, classify(out, &s));
out:
    if (st != CP_OK)
        cp_kb_fingerprint_release(out);
    cp_buf_release(&text);
    free(order);
    free(pos);
    return st;
}

void cp_kb_fingerprint_release(struct cp_kb_fingerprint *fp)
{
    if (!fp)
        return;
    free(fp->op_histogram_json);
    free(fp->inputs_json);
    memset(fp, 0, sizeof *fp);
}

/* ---- similarity ------------------------------------------------------------ */

/* Cosine similarity of two op histograms with counts damped as ln(1 + c),
 * so the dozens of Reshape/Constant nodes an exporter writes do not drown
 * the few ops that define the architecture. Two empty histograms: 1; one
 * empty or unreadable: 0. */
static double histogram_cosine(const char *ja, const char *jb)
{
    json_t *a = ja ? json_loads(ja, 0, NULL) : NULL;
    json_t *b = jb ? json_loads(jb, 0, NULL) : NULL;
    double dot = 0, na = 0, nb = 0, r = 0;
    if (!json_is_object(a) || !json_is_object(b))
        goto out;
    const char *k;
    json_t *v;
    json_object_foreach(a, k, v)
    {
        double x = log1p(fmax(0, (double)json_integer_value(v)));
        na += x * x;
        json_t *w = json_object_get(b, k);
        if (w)
            dot += x * log1p(fmax(0, (double)json_integer_value(w)));
    }
    json_object_foreach(b, k, v)
    {
        double y = log1p(fmax(0, (double)json_integer_value(v)));
        nb += y * y;
    }
    if (na == 0 && nb == 0)
        r = 1;
    else if (na > 0 && nb > 0)
        r = dot / (sqrt(na) * sqrt(nb));
out:
    json_decref(a);
    json_decref(b);
    return fmin(1, fmax(0, r));
}

/* 1 for equal magnitudes, falling linearly to 0 at a factor of 1000. */
static double log_closeness(double x, double y)
{
    double dx = log10(1 + fmax(0, x)), dy = log10(1 + fmax(0, y));
    return fmax(0, 1 - fabs(dx - dy) / 3);
}

double cp_kb_similarity(const struct cp_kb_fingerprint *a, const struct cp_kb_fingerprint *b)
{
    if (a->structure_hash[0] && strcmp(a->structure_hash, b->structure_hash) == 0)
        return 1.0;
    const bool fa[] = {a->has_attention, a->has_conv,      a->has_layernorm,
                       a->has_groupnorm, a->has_batchnorm, a->has_gelu};
    const bool fb[] = {b->has_attention, b->has_conv,      b->has_layernorm,
                       b->has_groupnorm, b->has_batchnorm, b->has_gelu};
    int same = 0;
    for (size_t i = 0; i < sizeof fa / sizeof fa[0]; i++)
        same += fa[i] == fb[i];
    double s = 0.40 * histogram_cosine(a->op_histogram_json, b->op_histogram_json) +
               0.20 * same / (double)(sizeof fa / sizeof fa[0]) +
               0.15 * log_closeness(a->flops, b->flops) +
               0.15 * log_closeness((double)a->params, (double)b->params) +
               0.10 * (strcmp(a->model_class, b->model_class) == 0);
    return fmin(0.99, fmax(0, s));
}
