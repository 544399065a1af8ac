/* One conformance case, in its forked child: read the test data, import,
 * plan and run with both kernel sets, compare (conformance.h). */
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

/* ---- one case, in the child ---------------------------------------------- */

static void set_data_release(struct set_data *s)
{
    for (size_t i = 0; i < MAX_IO; i++) {
        cp_host_tensor_release(&s->in[i]);
        cp_host_tensor_release(&s->out[i]);
    }
}

/* Read input_K.pb / output_K.pb of one data set. False when the case ends
 * (skip or failure recorded in r). */
static bool read_set(const char *set_dir, const struct model_io *io, struct set_data *s,
                     struct case_result *r)
{
    memset(s, 0, sizeof *s);
    for (int pass = 0; pass < 2; pass++) {
        size_t want = pass ? io->n_out : io->n_in;
        for (size_t k = 0; k < want; k++) {
            char path[PATH_LEN];
            if (snprintf(path, sizeof path, "%s/%s_%zu.pb", set_dir, pass ? "output" : "input",
                         k) >= PATH_LEN) {
                cf_set_fail(r, "path too long");
                return false;
            }
            if (!cp_path_exists(path)) {
                if (pass == 0)
                    cf_add_cause(r, "test data omits an optional input");
                else
                    cf_set_fail(r, "%s is missing", path);
                return false;
            }
            struct cp_diag d;
            cp_diag_init(&d);
            struct cp_host_tensor *t = pass ? &s->out[k] : &s->in[k];
            enum cp_status st = cp_tensor_read_file(path, t, &d);
            if (st == CP_ERR_UNSUPPORTED) {
                /* Group with the model's own dtype refusals. */
                const char *dt = strstr(d.msg, "dtype ");
                if (dt)
                    cf_add_cause(r, "unsupported dtype: %.*s", (int)strcspn(dt + 6, " ,;"), dt + 6);
                else
                    cf_add_cause(r, "unsupported test data: %s", cf_strip_prefix(d.msg, path));
                return false;
            }
            if (st != CP_OK) {
                cf_set_fail(r, "reading test data: %s", d.msg);
                return false;
            }
            /* ONNX 1.12 stores bfloat16 test data as UINT16 bit patterns
             * (NumPy has no bfloat16). */
            enum cp_dtype want_dt = pass ? io->out_dtype[k] : io->in_dtype[k];
            if (t->dtype == CP_DTYPE_U16 && want_dt == CP_DTYPE_BF16)
                t->dtype = CP_DTYPE_BF16;
        }
    }
    s->n_in = io->n_in;
    s->n_out = io->n_out;
    return true;
}

/* Plan, run and compare in one kernel mode. */
static void run_mode(struct cp_model *m, const struct model_io *io, const struct set_data *s,
                     const struct cp_input_shape *shapes, size_t n_shapes, bool reference_only,
                     const char *set, struct case_result *r)
{
    const char *mode = reference_only ? "reference kernels" : "fast kernels";
    struct cp_plan_options po = {.input_shapes = shapes,
                                 .n_input_shapes = n_shapes,
                                 .buffer_optimize = -1,
                                 .reference_only = reference_only};
    struct cp_plan *p = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_plan_create(m, &po, &p, &d);
    if (st == CP_ERR_UNSUPPORTED) {
        char op[64];
        if (cf_op_from_message(d.msg, op, sizeof op))
            cf_add_cause(r, "no kernel for %s with these attributes/dtypes", op);
        else
            cf_add_cause(r, "no kernel: %s", d.msg);
        return;
    }
    if (st != CP_OK) {
        cf_set_fail(r, "%s: plan (%s): %s", set, mode, d.msg);
        return;
    }
    for (size_t i = 0; i < cp_plan_n_inputs(p); i++) {
        const struct cp_tensor *pt = cp_plan_input(p, i);
        size_t k = 0;
        while (k < s->n_in && strcmp(io->in[k], pt->name) != 0)
            k++;
        if (k == s->n_in) {
            cf_set_fail(r, "%s: plan input '%s' is not among the model's inputs", set, pt->name);
            goto out_free_plan;
        }
        if ((st = cp_plan_set_input(p, i, &s->in[k], &d)) != CP_OK) {
            cf_set_fail(r, "%s: set input (%s): %s", set, mode, d.msg);
            goto out_free_plan;
        }
    }
    if ((st = cp_plan_run(p, -1, &d)) != CP_OK) {
        cf_set_fail(r, "%s: run (%s): %s", set, mode, d.msg);
        goto out_free_plan;
    }
    for (size_t k = 0; k < s->n_out; k++) {
        size_t i = 0;
        while (i < cp_plan_n_outputs(p) && strcmp(cp_plan_output(p, i)->name, io->out[k]) != 0)
            i++;
        if (i == cp_plan_n_outputs(p)) {
            cf_set_fail(r, "%s: output '%s' is not among the plan's outputs", set, io->out[k]);
            goto out_free_plan;
        }
        struct cp_host_tensor got;
        memset(&got, 0, sizeof got);
        if ((st = cp_plan_get_output(p, i, &got, &d)) != CP_OK) {
            cf_set_fail(r, "%s: get output (%s): %s", set, mode, d.msg);
            goto out_free_plan;
        }
        char why[512];
        bool ok = cf_compare(&s->out[k], &got, why, sizeof why);
        cp_host_tensor_release(&got);
        if (!ok) {
            cf_set_fail(r, "%s: output '%s' (%s): %s", set, io->out[k], mode, why);
            goto out_free_plan;
        }
    }
out_free_plan:
    cp_plan_free(p);
}

/* Verify, infer and wrap `g` (taken over) in a model, then plan, run and
 * compare in both kernel modes. `in_shapes` are the plan's input shapes. */
static void run_graph(struct cp_runtime *rt, struct cp_graph *g, const struct model_io *io,
                      const struct set_data *s, const struct cp_input_shape *in_shapes,
                      size_t n_shapes, const char *set, struct case_result *r)
{
    struct cp_diag d;
    cp_diag_init(&d);
    const char *stage = "verify";
    enum cp_status st = cp_graph_verify(g, &d);
    if (st == CP_OK && (stage = "compact", st = cp_graph_compact(g, &d)) == CP_OK)
        stage = "infer", st = cp_graph_infer(g, &d);
    if (st != CP_OK) {
        if (st == CP_ERR_UNSUPPORTED)
            cf_add_cause(r, "%s: %s", stage, d.msg);
        else
            cf_set_fail(r, "%s: %s: %s", set, stage, d.msg);
        cp_graph_free(g);
        return;
    }
    struct cp_model *m = NULL;
    st = cp_model_from_graph(rt, g, NULL, &m, &d); /* takes g */
    if (st == CP_ERR_UNSUPPORTED) {
        char op[64];
        if (cf_op_from_message(d.msg, op, sizeof op))
            cf_add_cause(r, "no kernel for %s", op);
        else
            cf_add_cause(r, "model: %s", d.msg);
        return;
    }
    if (st != CP_OK) {
        cf_set_fail(r, "%s: model: %s", set, d.msg);
        return;
    }
    run_mode(m, io, s, in_shapes, n_shapes, false, set, r);
    if (r->outcome == OUT_PASS)
        run_mode(m, io, s, in_shapes, n_shapes, true, set, r);
    cp_model_free(m);
}

/* Input slots whose values decide an output's shape. */
static bool is_shape_slot(const char *op, size_t slot)
{
    static const struct {
        const char *op;
        unsigned mask; /* bit i: input i */
    } slots[] = {
        {"ConstantOfShape", 1u << 0},
        {"Expand", 1u << 1},
        {"Pad", 1u << 1},
        {"Range", 7u},
        {"ReduceMax", 1u << 1},
        {"ReduceMean", 1u << 1},
        {"ReduceSum", 1u << 1},
        {"Reshape", 1u << 1},
        {"Resize", 7u << 1},
        {"Slice", 15u << 1},
        {"Split", 1u << 1},
        {"Squeeze", 1u << 1},
        {"Unsqueeze", 1u << 1},
    };
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++)
        if (strcmp(slots[i].op, op) == 0)
            return slot < 32 && (slots[i].mask >> slot & 1u);
    return false;
}

/* Which test inputs feed a shape slot, directly or through other nodes
 * (Cast -> Range in the window functions): bit k for input k. Nodes are
 * walked backwards from the shape slots, so a node whose output reaches a
 * slot marks all its inputs. */
static bool name_in(const char *name, const char **set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(set[i], name) == 0)
            return true;
    return false;
}

static unsigned shape_inputs(const Onnx__ModelProto *mp, const struct model_io *io)
{
    unsigned mask = 0;
    const Onnx__GraphProto *g = mp->graph;
    size_t cap = 0, n_need = 0;
    for (size_t i = 0; i < g->n_node; i++)
        cap += g->node[i]->n_input;
    const char **need = calloc(cap ? cap : 1, sizeof *need);
    if (!need)
        return 0;
    for (size_t i = g->n_node; i-- > 0;) {
        const Onnx__NodeProto *n = g->node[i];
        if (!cf_is_default_domain(n->domain) || !n->op_type)
            continue;
        /* Shape and Size read only the shape, known without the values. */
        bool feeds = false,
             by_shape = strcmp(n->op_type, "Shape") == 0 || strcmp(n->op_type, "Size") == 0;
        for (size_t j = 0; j < n->n_output && !feeds && !by_shape; j++)
            feeds = n->output[j] && name_in(n->output[j], need, n_need);
        for (size_t j = 0; j < n->n_input; j++) {
            if (!n->input[j] || !*n->input[j] || (!feeds && !is_shape_slot(n->op_type, j)))
                continue;
            if (!name_in(n->input[j], need, n_need))
                need[n_need++] = n->input[j];
        }
    }
    for (size_t k = 0; k < io->n_in; k++)
        if (name_in(io->in[k], need, n_need))
            mask |= 1u << k;
    free(need);
    return mask;
}

/* The model with the inputs in `fold` turned into initializers holding the
 * test data. OUT: *buf (caller frees), *len. */
static bool fold_inputs(const Onnx__ModelProto *mp, const struct model_io *io,
                        const struct set_data *s, unsigned fold, uint8_t **buf, size_t *len)
{
    const Onnx__GraphProto *g0 = mp->graph;
    Onnx__GraphProto g = *g0;
    Onnx__ModelProto m = *mp;
    m.graph = &g;
    Onnx__TensorProto tps[MAX_IO];
    size_t n_new = 0;
    g.input = calloc(g0->n_input + 1, sizeof *g.input);
    g.initializer = calloc(g0->n_initializer + MAX_IO + 1, sizeof *g.initializer);
    bool ok = g.input && g.initializer;
    if (!ok)
        goto out;
    g.n_input = 0;
    for (size_t i = 0; i < g0->n_input; i++) {
        size_t k = 0;
        while (k < io->n_in && strcmp(io->in[k], g0->input[i]->name ? g0->input[i]->name : ""))
            k++;
        if (k < io->n_in && (fold >> k & 1u))
            continue;
        g.input[g.n_input++] = g0->input[i];
    }
    if (g0->n_initializer)
        memcpy(g.initializer, g0->initializer, g0->n_initializer * sizeof *g.initializer);
    for (size_t k = 0; k < io->n_in; k++) {
        if (!(fold >> k & 1u))
            continue;
        Onnx__TensorProto *t = &tps[n_new];
        onnx__tensor_proto__init(t);
        t->name = (char *)io->in[k];
        t->n_dims = (size_t)s->in[k].rank;
        t->dims = (int64_t *)s->in[k].dims;
        t->has_data_type = 1;
        t->data_type = cp_dtype_to_onnx(s->in[k].dtype);
        t->has_raw_data = 1;
        t->raw_data.len = s->in[k].nbytes;
        t->raw_data.data = s->in[k].data;
        g.initializer[g0->n_initializer + n_new++] = t;
    }
    g.n_initializer = g0->n_initializer + n_new;
    *len = onnx__model_proto__get_packed_size(&m);
    *buf = malloc(*len ? *len : 1);
    ok = *buf != NULL;
    if (ok)
        onnx__model_proto__pack(&m, *buf);
out:
    free(g.input);
    free(g.initializer);
    return ok;
}

/* Shapes of the inputs not in `fold`, for the importer and the plan. */
static size_t input_shapes(const struct model_io *io, const struct set_data *s, unsigned fold,
                           struct cp_input_shape *shapes)
{
    size_t n = 0;
    memset(shapes, 0, MAX_IO * sizeof *shapes);
    for (size_t k = 0; k < s->n_in; k++) {
        if (fold >> k & 1u)
            continue;
        snprintf(shapes[n].name, sizeof shapes[n].name, "%s", io->in[k]);
        shapes[n].rank = s->in[k].rank;
        memcpy(shapes[n].dims, s->in[k].dims, sizeof shapes[n].dims);
        n++;
    }
    return n;
}

/* One data set: import with the test inputs' shapes and run. When that
 * fails and some inputs set a shape (Reshape's shape, Slice's starts...),
 * which a plan of static shapes cannot take at run time, run again with
 * those inputs folded into constants and say in the failure whether the
 * kernels were right then, so the report tells planner from kernel. */
static void run_set(struct cp_runtime *rt, const Onnx__ModelProto *mp, const char *case_dir,
                    const char *model_path, const char *set_dir, const char *set,
                    const struct model_io *io, struct case_result *r)
{
    struct set_data s;
    struct cp_input_shape shapes[MAX_IO];
    if (!read_set(set_dir, io, &s, r))
        goto out_release;
    size_t n_shapes = input_shapes(io, &s, 0, shapes);
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_onnx_import(model_path, shapes, n_shapes, &g, NULL, &d);
    if (st == CP_ERR_UNSUPPORTED) {
        cf_add_cause(r, "importer: %s", cf_strip_prefix(d.msg, model_path));
        goto out_release;
    }
    if (st == CP_ERR_INVALID && strstr(d.msg, "--input_shape gives input")) {
        /* A few ONNX 1.12 cases (CastLike's expanded forms) feed data whose
         * rank contradicts the model's declared input; ONNX Runtime refuses
         * them as well. */
        cf_add_cause(r, "test data contradicts the model's declared input shape");
        goto out_release;
    }
    if (st != CP_OK) {
        cf_set_fail(r, "%s: import: %s", set, cf_strip_prefix(d.msg, model_path));
        goto out_release;
    }
    run_graph(rt, g, io, &s, shapes, n_shapes, set, r);
    unsigned fold = shape_inputs(mp, io);
    if (r->outcome != OUT_FAIL || !fold)
        goto out_release;

    struct case_result r2;
    memset(&r2, 0, sizeof r2);
    uint8_t *buf = NULL;
    size_t len = 0;
    char names[256] = "";
    for (size_t k = 0, w = 0; k < io->n_in; k++)
        if ((fold >> k & 1u) && w < sizeof names)
            w += (size_t)snprintf(names + w, sizeof names - w, "%s'%s'", w ? ", " : "", io->in[k]);
    if (!fold_inputs(mp, io, &s, fold, &buf, &len)) {
        cf_set_fail(&r2, "out of memory");
    } else {
        n_shapes = input_shapes(io, &s, fold, shapes);
        cp_diag_init(&d);
        st = cp_onnx_import_buffer(buf, len, case_dir, model_path, shapes, n_shapes, &g, &d);
        free(buf);
        if (st != CP_OK)
            cf_set_fail(&r2, "import: %s", cf_strip_prefix(d.msg, model_path));
        else
            run_graph(rt, g, io, &s, shapes, n_shapes, set, &r2);
    }
    if (r2.outcome == OUT_PASS && strstr(r->text, "the plan needs both to be known")) {
        /* Not a wrong result: a shape that only the input's value decides,
         * which a static plan refuses (as it says); counted as a skip. */
        r->outcome = OUT_PASS;
        r->text[0] = '\0';
        cf_add_cause(r, "output shape set by a runtime input value (static plans only)");
    } else if (r2.outcome == OUT_PASS)
        cf_append(r,
                  " [with %s folded to constants the outputs match: only the runtime-valued shape "
                  "is the problem]",
                  names);
    else
        cf_append(r, " [with %s folded to constants: %s]", names,
                  r2.outcome == OUT_SKIP ? "skipped" : r2.text);
out_release:
    set_data_release(&s);
}

void cf_run_case(const char *case_dir, struct case_result *r)
{
    memset(r, 0, sizeof *r);
    char model_path[PATH_LEN];
    if (snprintf(model_path, sizeof model_path, "%s/model.onnx", case_dir) >= PATH_LEN) {
        cf_set_fail(r, "path too long");
        return;
    }
    uint8_t *bytes = NULL;
    size_t len = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_file_read(model_path, &bytes, &len, &d) != CP_OK) {
        cf_set_fail(r, "%s", d.msg);
        return;
    }
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, bytes);
    free(bytes);
    if (!mp) {
        cf_set_fail(r, "model.onnx does not parse as a ModelProto");
        return;
    }
    struct model_io io;
    memset(&io, 0, sizeof io);
    cf_first_pass(mp, &io, r);
    if (r->outcome != OUT_PASS)
        goto out_free_model;

    size_t n_sets;
    char **sets = cf_list_dir(case_dir, "test_data_set_", &n_sets);
    if (!sets || n_sets == 0) {
        cf_set_fail(r, "no test_data_set_N folder");
        goto out_free_sets;
    }
    struct cp_runtime *rt = NULL;
    struct cp_runtime_options ro = {.threads = 2, .trace = NULL};
    if (cp_runtime_create(&ro, &rt, &d) != CP_OK) {
        cf_set_fail(r, "runtime: %s", d.msg);
        goto out_free_sets;
    }
    for (size_t i = 0; i < n_sets && r->outcome == OUT_PASS; i++) {
        char set_dir[PATH_LEN];
        if (snprintf(set_dir, sizeof set_dir, "%s/%s", case_dir, sets[i]) >= PATH_LEN) {
            cf_set_fail(r, "path too long");
            break;
        }
        run_set(rt, mp, case_dir, model_path, set_dir, sets[i], &io, r);
    }
    cp_runtime_free(rt);
out_free_sets:
    cf_free_list(sets, n_sets);
out_free_model:
    onnx__model_proto__free_unpacked(mp, NULL);
}
