/* ONNX import: a ModelProto (decoded by protobuf-c) into a raw graph.
 *
 * Order of work: opset check; a first pass that lists every unsupported op
 * at once; then initializers, graph inputs (with --input_shape overrides),
 * nodes in file order (each through its op-table loader), a check that every
 * node input was defined somewhere, graph outputs, and declared value types
 * of intermediates. Verification (cycles, ...) and shape inference are the
 * caller's (cp_convert). */
#include "onnx/onnx_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum cp_status onnx_err(struct onnx_ctx *c, enum cp_status st, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cp_diag_set(c->d, st, "%s: %s", c->where, msg);
}

enum cp_status onnx_err_from(struct onnx_ctx *c, const struct cp_diag *local, enum cp_status st)
{
    return cp_diag_set(c->d, st, "%s: %s", c->where,
                       local->msg[0] ? local->msg : cp_status_str(st));
}

bool onnx_is_default_domain(const char *domain)
{
    return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}

/* ---- opset ---------------------------------------------------------------- */

static enum cp_status read_opset(struct onnx_ctx *c, const Onnx__ModelProto *m)
{
    int64_t v = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!onnx_is_default_domain(o->domain))
            continue;
        if (!o->has_version)
            return onnx_err(c, CP_ERR_INVALID,
                            "the opset_import entry of the default ONNX domain has no version");
        if (v >= 0 && v != o->version)
            return onnx_err(c, CP_ERR_INVALID,
                            "the default ONNX domain is imported twice, with opsets %lld and %lld",
                            (long long)v, (long long)o->version);
        v = o->version;
    }
    if (v < 0)
        return onnx_err(c, CP_ERR_INVALID,
                        "the model does not import the default ONNX domain (no opset_import "
                        "entry for \"\" or \"ai.onnx\")");
    if (v < CP_ONNX_OPSET_MIN || v > CP_ONNX_OPSET_MAX)
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "opset %lld of the default ONNX domain is not supported (%d\u2013%d)",
                        (long long)v, CP_ONNX_OPSET_MIN, CP_ONNX_OPSET_MAX);
    c->opset = v;
    cp_graph_set_opset(c->g, v);
    return CP_OK;
}

/* ---- first pass: unsupported ops -------------------------------------------------- */

struct unsup {
    char *name; /* domain-qualified for non-default domains */
    size_t count;
    const struct onnx_op_def *def; /* set when only the opset is wrong */
    size_t first;                  /* index of the first node with this op */
};

static int cmp_unsup(const void *a, const void *b)
{
    const struct unsup *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(x->name, y->name);
}

static enum cp_status note_unsup(struct unsup **list, size_t *n, const char *domain,
                                 const char *op_type, const struct onnx_op_def *def, size_t node)
{
    struct cp_buf b;
    cp_buf_init(&b);
    if (onnx_is_default_domain(domain))
        cp_buf_puts(&b, op_type);
    else
        cp_buf_printf(&b, "%s.%s", domain, op_type);
    if (cp_buf_status(&b) != CP_OK)
        return CP_ERR_NOMEM;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*list)[i].name, b.data) == 0) {
            (*list)[i].count++;
            cp_buf_release(&b);
            return CP_OK;
        }
    struct unsup *p = cp_realloc_array(*list, *n + 1, sizeof *p);
    if (!p) {
        cp_buf_release(&b);
        return CP_ERR_NOMEM;
    }
    *list = p;
    p[*n] = (struct unsup){cp_buf_steal(&b), 1, def, node};
    (*n)++;
    return CP_OK;
}

static enum cp_status check_supported(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
    struct unsup *list = NULL;
    size_t n = 0;
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        if (!np->op_type || !*np->op_type) {
            if (np->name && *np->name)
                st = onnx_err(c, CP_ERR_INVALID, "node %zu ('%s') has no op_type", i, np->name);
            else
                st = onnx_err(c, CP_ERR_INVALID, "node %zu has no op_type", i);
            goto out;
        }
        const struct onnx_op_def *def =
            onnx_is_default_domain(np->domain) ? onnx_op_find(np->op_type) : NULL;
        if (def && c->opset >= def->min_opset && c->opset <= def->max_opset)
            continue;
        if (note_unsup(&list, &n, np->domain, np->op_type, def, i) != CP_OK) {
            st = onnx_err(c, CP_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    if (n == 0)
        goto out;
    qsort(list, n, sizeof *list, cmp_unsup);
    struct cp_buf b;
    cp_buf_init(&b);
    for (size_t i = 0; i < n; i++) {
        cp_buf_printf(&b, "%s%s (%zu node%s", i ? ", " : "", list[i].name, list[i].count,
                      list[i].count == 1 ? "" : "s");
        const struct onnx_op_def *def = list[i].def;
        if (def && def->min_opset == def->max_opset)
            cp_buf_printf(&b, "; needs opset %d", def->min_opset);
        else if (def)
            cp_buf_printf(&b, "; needs opset %d\u2013%d", def->min_opset, def->max_opset);
        cp_buf_putc(&b, ')');
    }
    /* Name a node of each, so the user can find them in the model. */
    cp_buf_puts(&b, "; first nodes: ");
    for (size_t i = 0; i < n; i++) {
        const Onnx__NodeProto *np = gp->node[list[i].first];
        if (np->name && *np->name)
            cp_buf_printf(&b, "%s'%s' (%s)", i ? ", " : "", np->name, list[i].name);
        else
            cp_buf_printf(&b, "%snode %zu (%s)", i ? ", " : "", list[i].first, list[i].name);
    }
    if (cp_buf_status(&b) != CP_OK)
        st = onnx_err(c, CP_ERR_NOMEM, "out of memory");
    else
        st = onnx_err(c, CP_ERR_UNSUPPORTED, "unsupported ops: %s", b.data);
    cp_buf_release(&b);
out:
    for (size_t i = 0; i < n; i++)
        free(list[i].name);
    free(list);
    return st;
}

/* ---- initializers and inputs ---------------------------------------------------- */

static enum cp_status load_initializers(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
    if (gp->n_sparse_initializer) {
        const Onnx__SparseTensorProto *sp = gp->sparse_initializer[0];
        const char *nm = sp->values && sp->values->name ? sp->values->name : "";
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "sparse initializer '%s' is not supported; store it densely", nm);
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->name || !*tp->name)
            return onnx_err(c, CP_ERR_INVALID, "initializer %zu has no name", i);
        char what[300];
        snprintf(what, sizeof what, "initializer '%.280s'", tp->name);
        enum cp_dtype dt;
        struct cp_shape shape;
        void *data;
        size_t nbytes;
        enum cp_status st = onnx_tensor_decode(c, tp, what, &dt, &shape, &data, &nbytes);
        if (st != CP_OK)
            return st;
        st = onnx_set_initializer(c, tp->name, dt, &shape, data, nbytes, what, NULL);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* Graph inputs that are fed at run time: model inputs that are not also
 * initializers (IR >= 4 models may list their weights as inputs). */
static bool is_runtime_input(struct onnx_ctx *c, const Onnx__ValueInfoProto *vi)
{
    int32_t idx = (int32_t)cp_strmap_gets(&c->tensors, vi->name, -1);
    return idx < 0 || cp_graph_tensor(c->g, idx)->kind != CP_TENSOR_INITIALIZER;
}

static enum cp_status check_override_names(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
    for (size_t k = 0; k < c->n_shapes; k++) {
        const char *want = c->shapes[k].name;
        bool found = false;
        for (size_t i = 0; i < gp->n_input && !found; i++)
            found = gp->input[i]->name && strcmp(gp->input[i]->name, want) == 0 &&
                    is_runtime_input(c, gp->input[i]);
        if (found)
            continue;
        struct cp_buf b;
        cp_buf_init(&b);
        for (size_t i = 0; i < gp->n_input; i++)
            if (gp->input[i]->name && is_runtime_input(c, gp->input[i]))
                cp_buf_printf(&b, "%s%s", b.len ? ", " : "", gp->input[i]->name);
        enum cp_status st;
        if (cp_buf_status(&b) != CP_OK)
            st = onnx_err(c, CP_ERR_NOMEM, "out of memory");
        else if (b.len == 0)
            st = onnx_err(c, CP_ERR_INVALID,
                          "--input_shape names '%s', but the model has no inputs", want);
        else
            st = onnx_err(c, CP_ERR_INVALID,
                          "--input_shape names '%s', but the model's inputs are: %s", want, b.data);
        cp_buf_release(&b);
        return st;
    }
    return CP_OK;
}

static enum cp_status apply_override(struct onnx_ctx *c, const char *name, struct cp_shape *shape)
{
    for (size_t k = 0; k < c->n_shapes; k++) {
        const struct cp_input_shape *o = &c->shapes[k];
        if (strcmp(o->name, name) != 0)
            continue;
        char sh[96];
        cp_shape_format(shape, sh, sizeof sh);
        if (o->rank < 0 || o->rank > CP_MAX_RANK)
            return onnx_err(c, CP_ERR_INVALID, "--input_shape gives input '%s' rank %d", name,
                            o->rank);
        if (shape->rank >= 0 && shape->rank != o->rank)
            return onnx_err(c, CP_ERR_INVALID,
                            "--input_shape gives input '%s' rank %d, but the model declares rank "
                            "%d (%s)",
                            name, o->rank, shape->rank, sh);
        struct cp_shape s;
        s.rank = o->rank;
        for (int i = 0; i < o->rank; i++) {
            if (o->dims[i] < -1)
                return onnx_err(c, CP_ERR_INVALID,
                                "--input_shape gives input '%s' dimension %lld; use -1 for a "
                                "dynamic one",
                                name, (long long)o->dims[i]);
            s.dims[i].value = o->dims[i];
            /* A dimension left dynamic keeps the model's name for it. */
            s.dims[i].sym = o->dims[i] < 0 && shape->rank == o->rank ? shape->dims[i].sym : NULL;
        }
        if (!cp_shape_equal(&s, shape))
            c->shapes_changed = true;
        *shape = s;
    }
    return CP_OK;
}

static enum cp_status load_inputs(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
    enum cp_status st = check_override_names(c, gp);
    if (st != CP_OK)
        return st;
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !*vi->name)
            return onnx_err(c, CP_ERR_INVALID, "graph input %zu has no name", i);
        int32_t idx = (int32_t)cp_strmap_gets(&c->tensors, vi->name, -1);
        if (idx >= 0 && cp_graph_tensor(c->g, idx)->kind == CP_TENSOR_INITIALIZER)
            continue;
        if (idx >= 0)
            return onnx_err(c, CP_ERR_INVALID, "graph input '%s' is listed twice", vi->name);
        char what[300];
        snprintf(what, sizeof what, "input '%.280s'", vi->name);
        enum cp_dtype dt = CP_DTYPE_UNDEFINED;
        struct cp_shape shape;
        cp_shape_set_unknown(&shape);
        /* A subgraph's input may leave its type to the node (inference
         * takes it from the node's input). */
        bool untyped =
            c->parent &&
            (!vi->type || (vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
                           vi->type->tensor_type && !vi->type->tensor_type->has_elem_type));
        if ((!untyped && (st = onnx_value_type(c, vi, what, &dt, &shape)) != CP_OK) ||
            (st = apply_override(c, vi->name, &shape)) != CP_OK)
            return st;
        struct cp_diag local;
        cp_diag_init(&local);
        st = cp_graph_add_tensor(c->g, vi->name, dt, &shape, CP_TENSOR_INPUT, &idx, &local);
        if (st != CP_OK)
            return onnx_err_from(c, &local, st);
        if (cp_strmap_puts(&c->tensors, cp_graph_tensor(c->g, idx)->name, idx) != CP_OK ||
            cp_graph_add_input(c->g, idx) != CP_OK)
            return onnx_err(c, CP_ERR_NOMEM, "out of memory");
    }
    return CP_OK;
}

/* ---- nodes ------------------------------------------------------------------- */

/* A node name unique in the graph: the model's own, or "<op_type>_<index>"
 * when it has none; a clash gets "_2", "_3", ... OUT: *out (caller frees). */
static enum cp_status unique_node_name(struct onnx_ctx *c, const Onnx__NodeProto *np, size_t i,
                                       char **out)
{
    *out = NULL;
    struct cp_buf base, b;
    cp_buf_init(&base);
    cp_buf_init(&b);
    if (np->name && *np->name)
        cp_buf_puts(&base, np->name);
    else
        cp_buf_printf(&base, "%s_%zu", np->op_type, i);
    cp_buf_puts(&b, base.data ? base.data : "");
    for (int k = 2;
         cp_buf_status(&b) == CP_OK && (int32_t)cp_strmap_gets(&c->nodes, b.data, -1) >= 0; k++) {
        cp_buf_reset(&b);
        cp_buf_printf(&b, "%s_%d", base.data, k);
    }
    enum cp_status st = cp_buf_status(&base) != CP_OK ? CP_ERR_NOMEM : cp_buf_status(&b);
    cp_buf_release(&base);
    if (st != CP_OK) {
        cp_buf_release(&b);
        return onnx_err(c, CP_ERR_NOMEM, "out of memory");
    }
    *out = cp_buf_steal(&b);
    return CP_OK;
}

static enum cp_status load_nodes(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        /* The first pass let through only supported default-domain ops. */
        const struct onnx_op_def *def = onnx_op_find(np->op_type);
        char *name = NULL;
        enum cp_status st = unique_node_name(c, np, i, &name);
        if (st != CP_OK)
            return st;
        const char *origin = np->name && *np->name ? np->name : name;
        c->cur_node = name;
        st = def->load(c, def, np, name, origin);
        c->cur_node = NULL;
        free(name);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* Inputs may name tensors defined later in the file; anything still without a
 * producer now was never defined. Reported for the first node that reads it. */
static enum cp_status check_resolved(struct onnx_ctx *c)
{
    for (size_t i = 0; i < cp_graph_n_nodes(c->g); i++) {
        const struct cp_node *n = cp_graph_node(c->g, (int32_t)i);
        for (size_t j = 0; j < n->n_inputs; j++) {
            const struct cp_tensor *t = cp_graph_tensor(c->g, n->inputs[j]);
            if (t && t->kind == CP_TENSOR_INTERMEDIATE && t->producer < 0)
                return onnx_err(c, CP_ERR_INVALID,
                                "node '%s' (%s): input '%s' is not a graph input, an initializer "
                                "or the output of any node",
                                n->name, n->op_type, t->name);
        }
    }
    return CP_OK;
}

/* ---- outputs and declared types --------------------------------------------------- */

/* Give an intermediate tensor the dtype (and, unless --input_shape changed
 * an input's shape, which would make them stale, the shape) the model
 * declares for it. Declarations we cannot read are skipped: inference decides anyway. */
static void apply_declared(struct onnx_ctx *c, const Onnx__ValueInfoProto *vi)
{
    if (!vi->name)
        return;
    int32_t idx = (int32_t)cp_strmap_gets(&c->tensors, vi->name, -1);
    struct cp_tensor *t = cp_graph_tensor(c->g, idx);
    if (!t || t->kind != CP_TENSOR_INTERMEDIATE)
        return;
    struct cp_diag quiet_diag;
    cp_diag_init(&quiet_diag);
    struct onnx_ctx quiet = *c;
    quiet.d = &quiet_diag;
    enum cp_dtype dt;
    struct cp_shape shape;
    if (onnx_value_type(&quiet, vi, "value", &dt, &shape) != CP_OK)
        return;
    if (t->dtype == CP_DTYPE_UNDEFINED)
        t->dtype = dt;
    if (t->shape.rank < 0 && !c->shapes_changed)
        t->shape = shape;
}

static enum cp_status load_outputs(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        if (!vi->name || !*vi->name)
            return onnx_err(c, CP_ERR_INVALID, "graph output %zu has no name", i);
        int32_t idx = (int32_t)cp_strmap_gets(&c->tensors, vi->name, -1);
        enum cp_status st;
        if (idx < 0 && c->parent && (st = onnx_scope_capture(c, vi->name, &idx)) != CP_OK)
            return st;
        if (idx < 0)
            return onnx_err(c, CP_ERR_INVALID,
                            "graph output '%s' is not produced by any node and is neither a "
                            "graph input nor an initializer",
                            vi->name);
        if (cp_graph_add_output(c->g, idx) != CP_OK)
            return onnx_err(c, CP_ERR_NOMEM, "out of memory");
        apply_declared(c, vi);
    }
    for (size_t i = 0; i < gp->n_value_info; i++)
        apply_declared(c, gp->value_info[i]);
    return CP_OK;
}

/* ---- entry points -------------------------------------------------------------- */

static void set_model_name(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
    if (gp->name && *gp->name) {
        cp_graph_set_name(c->g, gp->name);
        return;
    }
    const char *base = strrchr(c->where, '/');
    base = base ? base + 1 : c->where;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", base);
    size_t n = strlen(buf);
    if (n > 5 && cp_path_has_suffix(buf, ".onnx"))
        buf[n - 5] = 0;
    cp_graph_set_name(c->g, buf);
}

enum cp_status onnx_import_graph(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
    enum cp_status st;
    c->gp = gp;
    if ((st = check_supported(c, gp)) != CP_OK)
        return st;
    if (c->parent)
        cp_graph_set_name(c->g, gp->name ? gp->name : "");
    else
        set_model_name(c, gp);
    if ((st = load_initializers(c, gp)) != CP_OK || (st = load_inputs(c, gp)) != CP_OK ||
        (st = load_nodes(c, gp)) != CP_OK || (st = check_resolved(c)) != CP_OK ||
        (st = load_outputs(c, gp)) != CP_OK)
        return st;
    return CP_OK;
}

static enum cp_status import_model(struct onnx_ctx *c, const Onnx__ModelProto *m)
{
    const Onnx__GraphProto *gp = m->graph;
    enum cp_status st = read_opset(c, m);
    if (st != CP_OK)
        return st;
    if (!gp)
        return onnx_err(c, CP_ERR_INVALID, "the model has no graph");
    return onnx_import_graph(c, gp);
}

enum cp_status cp_onnx_import_buffer(const uint8_t *data, size_t len, const char *dir,
                                     const char *display_name,
                                     const struct cp_input_shape *input_shapes,
                                     size_t n_input_shapes, struct cp_graph **out,
                                     struct cp_diag *d)
{
    *out = NULL;
    struct onnx_ctx c = {0};
    c.d = d;
    c.where = display_name && *display_name ? display_name : "<memory>";
    c.dir = dir;
    c.shapes = input_shapes;
    c.n_shapes = input_shapes ? n_input_shapes : 0;
    if (len == 0)
        return onnx_err(&c, CP_ERR_PARSE, "the file is empty, not an ONNX model");
    enum cp_status st = onnx_wire_check(&c, data, len);
    if (st != CP_OK)
        return st;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
    if (!m)
        return onnx_err(&c, CP_ERR_PARSE,
                        "not a valid ONNX model: its protobuf encoding could not be decoded (the "
                        "file is truncated, corrupt or not ONNX)");
    c.g = cp_graph_create();
    if (!c.g) {
        onnx__model_proto__free_unpacked(m, NULL);
        return onnx_err(&c, CP_ERR_NOMEM, "out of memory");
    }
    cp_strmap_init(&c.tensors);
    cp_strmap_init(&c.nodes);
    st = import_model(&c, m);
    cp_strmap_release(&c.tensors);
    cp_strmap_release(&c.nodes);
    onnx__model_proto__free_unpacked(m, NULL);
    if (st != CP_OK) {
        cp_graph_free(c.g);
        return st;
    }
    *out = c.g;
    return CP_OK;
}

enum cp_status cp_onnx_import(const char *path, const struct cp_input_shape *input_shapes,
                              size_t n_input_shapes, struct cp_graph **out, char *hash_hex,
                              struct cp_diag *d)
{
    *out = NULL;
    if (hash_hex)
        hash_hex[0] = 0;
    uint8_t *data;
    size_t len;
    enum cp_status st = cp_file_read(path, &data, &len, d);
    if (st != CP_OK)
        return st;
    if (hash_hex)
        cp_hash128_hex(data, len, hash_hex);
    char *dir = cp_path_dirname(path);
    if (!dir) {
        free(data);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    }
    st = cp_onnx_import_buffer(data, len, dir, path, input_shapes, n_input_shapes, out, d);
    free(dir);
    free(data);
    return st;
}
