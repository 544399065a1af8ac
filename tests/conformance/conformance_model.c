/* The conformance test's view of a model: the first pass that tells a
 * skip before anything runs, and how outputs are compared (conformance.h). */
#include "conformance.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- first pass over the model: what would make us skip ----------------- */

static enum cp_dtype declared_dtype(const Onnx__ValueInfoProto *vi)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
        !tp->tensor_type->has_elem_type)
        return CP_DTYPE_UNDEFINED;
    return cp_dtype_from_onnx(tp->tensor_type->elem_type);
}

static void check_value_type(const Onnx__ValueInfoProto *vi, struct case_result *r)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp)
        return;
    switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        if (tp->tensor_type && tp->tensor_type->has_elem_type &&
            cp_dtype_from_onnx(tp->tensor_type->elem_type) == CP_DTYPE_UNDEFINED)
            cf_add_cause(r, "unsupported dtype: %s", cf_onnx_type_name(tp->tensor_type->elem_type));
        break;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        cf_add_cause(r, "unsupported value kind: sequence");
        break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        cf_add_cause(r, "unsupported value kind: map");
        break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        cf_add_cause(r, "unsupported value kind: optional");
        break;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        cf_add_cause(r, "unsupported value kind: sparse tensor");
        break;
    default:
        break;
    }
}

bool cf_is_default_domain(const char *dom)
{
    return !dom || !dom[0] || strcmp(dom, "ai.onnx") == 0;
}

/* Opset, ops, and value types. Fills `io` with the graph inputs the test
 * data feeds (those that are not initializers) and the outputs. */
/* Generators whose values are the test data's own random draws: ours are
 * deterministic but not numpy's. */
static bool is_random_op(const char *op)
{
    static const char *const ops[] = {"Bernoulli",        "Multinomial",   "RandomNormal",
                                      "RandomNormalLike", "RandomUniform", "RandomUniformLike"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(ops[i], op) == 0)
            return true;
    return false;
}

void cf_first_pass(const Onnx__ModelProto *mp, struct model_io *io, struct case_result *r)
{
    int64_t opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++)
        if (cf_is_default_domain(mp->opset_import[i]->domain) && mp->opset_import[i]->has_version)
            opset = mp->opset_import[i]->version;
    if (opset < 0)
        cf_add_cause(r, "no default-domain opset (only other domains)");
    else if (opset < OPSET_MIN || opset > OPSET_MAX)
        cf_add_cause(r, "opset %lld (outside %d..%d)", (long long)opset, OPSET_MIN, OPSET_MAX);
    const Onnx__GraphProto *g = mp->graph;
    if (!g) {
        cf_add_cause(r, "model has no graph");
        return;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        const char *op = n->op_type ? n->op_type : "";
        if (!cf_is_default_domain(n->domain))
            cf_add_cause(r, "unsupported op: %s::%s", n->domain, op);
        else if (cp_op_from_name(op) == CP_OP_UNKNOWN && !cp_onnx_op_known(op))
            cf_add_cause(r, "unsupported op: %s", op);
        else if (is_random_op(op))
            cf_add_cause(r, "random output (%s): not comparable with the test data", op);
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (t->has_data_type && cp_dtype_from_onnx(t->data_type) == CP_DTYPE_UNDEFINED)
            cf_add_cause(r, "unsupported dtype: %s", cf_onnx_type_name(t->data_type));
    }
    if (g->n_sparse_initializer)
        cf_add_cause(r, "unsupported value kind: sparse tensor");
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        bool init = false;
        for (size_t k = 0; k < g->n_initializer && !init; k++)
            init = g->initializer[k]->name && vi->name &&
                   strcmp(g->initializer[k]->name, vi->name) == 0;
        if (init)
            continue;
        check_value_type(vi, r);
        if (io->n_in < MAX_IO) {
            io->in[io->n_in] = vi->name ? vi->name : "";
            io->in_dtype[io->n_in] = declared_dtype(vi);
        }
        io->n_in++;
    }
    for (size_t i = 0; i < g->n_output; i++) {
        check_value_type(g->output[i], r);
        if (io->n_out < MAX_IO) {
            io->out[io->n_out] = g->output[i]->name ? g->output[i]->name : "";
            io->out_dtype[io->n_out] = declared_dtype(g->output[i]);
        }
        io->n_out++;
    }
    if (io->n_in > MAX_IO || io->n_out > MAX_IO)
        cf_add_cause(r, "more than %d inputs or outputs", MAX_IO);
}

/* ---- comparing ------------------------------------------------------------- */

static double f16_value(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v = exp == 0    ? ldexp(man, -24)
               : exp == 31 ? (man ? NAN : INFINITY)
                           : ldexp(man | 0x400, exp - 25);
    return (h & 0x8000) ? -v : v;
}

static double element(const struct cp_host_tensor *t, size_t i)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case CP_DTYPE_F32: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    case CP_DTYPE_F16:
    case CP_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        if (t->dtype == CP_DTYPE_F16)
            return f16_value(h);
        uint32_t x = (uint32_t)h << 16;
        float f;
        memcpy(&f, &x, 4);
        return f;
    }
    case CP_DTYPE_I8:
        return (int8_t)p[i];
    case CP_DTYPE_U8:
    case CP_DTYPE_BOOL:
        return p[i];
    case CP_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case CP_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        return (double)v;
    }
    default:
        return cp_elem_load_f64(p, t->dtype, (int64_t)i);
    }
}

static void shape_text(const struct cp_host_tensor *t, char *out, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(out, n, "(");
    for (int i = 0; i < t->rank && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, i ? ", %lld" : "%lld", (long long)t->dims[i]);
    if (k < n)
        snprintf(out + k, n - k, ")");
}

/* True when `act` matches `exp`; otherwise `why` says where first. */
bool cf_compare(const struct cp_host_tensor *exp, const struct cp_host_tensor *act, char *why,
                size_t n)
{
    char se[128], sa[128];
    shape_text(exp, se, sizeof se);
    shape_text(act, sa, sizeof sa);
    if (exp->dtype != act->dtype) {
        snprintf(why, n, "dtype %s, expected %s", cp_dtype_name(act->dtype),
                 cp_dtype_name(exp->dtype));
        return false;
    }
    bool same = exp->rank == act->rank;
    for (int i = 0; same && i < exp->rank; i++)
        same = exp->dims[i] == act->dims[i];
    if (!same) {
        snprintf(why, n, "shape %s, expected %s", sa, se);
        return false;
    }
    if (act->nbytes != exp->nbytes) {
        snprintf(why, n, "%zu bytes, expected %zu", act->nbytes, exp->nbytes);
        return false;
    }
    size_t numel = exp->nbytes / cp_dtype_size(exp->dtype);
    bool is_float = cp_dtype_is_float(exp->dtype);
    for (size_t i = 0; i < numel; i++) {
        double e = element(exp, i), a = element(act, i);
        bool ok;
        if (!is_float)
            ok = cp_dtype_size(exp->dtype) == 8 ? memcmp((const uint8_t *)exp->data + 8 * i,
                                                         (const uint8_t *)act->data + 8 * i, 8) == 0
                                                : e == a;
        else if (isnan(e))
            ok = isnan(a);
        else if (isinf(e))
            ok = a == e;
        else
            ok = fabs(a - e) <= ATOL + RTOL * fabs(e);
        if (!ok) {
            snprintf(why, n, "index %zu: expected %.9g, actual %.9g", i, e, a);
            return false;
        }
    }
    return true;
}
