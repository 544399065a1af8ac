/* Helpers for the tests that hold the rule engine's patterns to what the
 * passes fuse (test_pattern_agreement.c, test_pattern_cases.c): what a pass
 * fuses when run on a graph, the graph read as the fusing passes saw it
 * (without LayoutTransformPass's TransData), a graph's trace written as the
 * runtime writes it (docs/trace-format.md), and sets of ONNX node names to
 * compare. They assert with Criterion; static inline keeps unused ones
 * quiet. */
#ifndef CP_TESTS_PATTERN_TEST_H
#define CP_TESTS_PATTERN_TEST_H

#include "core/json.h"
#include "atc_bridge/passes/pass.h"
#include "graph/pattern.h"
#include "rules/features.h"
#include "trace/trace.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- sets of ONNX node names ---------------------------------------------------- */

#define PT_MAX_NAMES 128

struct pt_names {
    const char *v[PT_MAX_NAMES];
    size_t n;
};

static inline void pt_names_add(struct pt_names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return;
    cr_assert_lt(s->n, PT_MAX_NAMES);
    s->v[s->n++] = name;
}

static inline bool pt_names_has(const struct pt_names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return true;
    return false;
}

static inline int pt_cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "a,b,c", sorted: what messages print and comparisons compare. Caller
 * frees. */
static inline char *pt_names_text(struct pt_names *s)
{
    qsort(s->v, s->n, sizeof *s->v, pt_cmp_str);
    size_t len = 1;
    for (size_t i = 0; i < s->n; i++)
        len += strlen(s->v[i]) + 1;
    char *t = calloc(len, 1);
    cr_assert_not_null(t);
    for (size_t i = 0; i < s->n; i++) {
        if (i)
            strcat(t, ",");
        strcat(t, s->v[i]);
    }
    return t;
}

/* A list of texts (instances), sorted for comparing. */
struct pt_list {
    char **v;
    size_t n;
};

static inline void pt_list_release(struct pt_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static inline int pt_cmp_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether a and b hold the same texts; prints both when not. */
static inline bool pt_list_same(struct pt_list *a, struct pt_list *b, const char *what_a,
                                const char *what_b, const char *context)
{
    qsort(a->v, a->n, sizeof *a->v, pt_cmp_text);
    qsort(b->v, b->n, sizeof *b->v, pt_cmp_text);
    bool same = a->n == b->n;
    for (size_t i = 0; same && i < a->n; i++)
        same = strcmp(a->v[i], b->v[i]) == 0;
    if (!same) {
        fprintf(stderr, "%s:\n  %s (%zu):\n", context, what_a, a->n);
        for (size_t i = 0; i < a->n; i++)
            fprintf(stderr, "    %s\n", a->v[i]);
        fprintf(stderr, "  %s (%zu):\n", what_b, b->n);
        for (size_t i = 0; i < b->n; i++)
            fprintf(stderr, "    %s\n", b->v[i]);
    }
    return same;
}

/* ---- what the rules report ---------------------------------------------------------- */

/* The ONNX names of each pattern the rules attribute to `pass`, one text
 * each; with `merge`, all of them as one text. Names point into `keep`. */
static inline struct pt_list pt_rule_instances(const struct cp_features *f, const char *pass,
                                               bool merge, json_t *keep)
{
    struct pt_list out = {calloc(f->n_patterns + 1, sizeof(char *)), 0};
    cr_assert_not_null(out.v);
    struct pt_names all = {.n = 0};
    for (size_t i = 0; i < f->n_patterns; i++) {
        const struct cp_pattern *p = &f->patterns[i];
        if (strcmp(p->fix_pass, pass) != 0)
            continue;
        json_t *a = json_loads(p->origins_json, 0, NULL);
        cr_assert(json_is_array(a), "%s", p->origins_json);
        json_array_append_new(keep, a);
        struct pt_names s = {.n = 0};
        for (size_t j = 0; j < json_array_size(a); j++) {
            pt_names_add(&s, json_string_value(json_array_get(a, j)));
            pt_names_add(&all, json_string_value(json_array_get(a, j)));
        }
        if (!merge)
            out.v[out.n++] = pt_names_text(&s);
    }
    if (merge && all.n)
        out.v[out.n++] = pt_names_text(&all);
    return out;
}

/* The ONNX names of the rules' gelu patterns: an epilogue or GroupNorm that
 * absorbs a decomposed GELU fuses its nodes too, but the rules leave them
 * to the gelu pattern (so no kernel counts twice). */
static inline struct pt_names pt_gelu_names(const struct cp_features *f, json_t *keep)
{
    struct pt_names s = {.n = 0};
    for (size_t i = 0; i < f->n_patterns; i++) {
        if (strcmp(f->patterns[i].kind, "gelu") != 0)
            continue;
        json_t *a = json_loads(f->patterns[i].origins_json, 0, NULL);
        json_array_append_new(keep, a);
        for (size_t j = 0; j < json_array_size(a); j++)
            pt_names_add(&s, json_string_value(json_array_get(a, j)));
    }
    return s;
}

/* ---- what a pass fuses ----------------------------------------------------------------- */

/* The view ops, which run no kernel (docs/trace-format.md, "view_of"). */
static inline bool pt_is_view(enum cp_op op)
{
    return op == CP_OP_RESHAPE || op == CP_OP_FLATTEN || op == CP_OP_SQUEEZE ||
           op == CP_OP_UNSQUEEZE || op == CP_OP_IDENTITY || op == CP_OP_DROPOUT;
}

/* Take out every TransData: its readers read what it read. LayoutTransformPass
 * puts them in after every pass that fuses, so this is the graph those
 * passes saw (the rule engine reads a trace the same way). */
static inline void pt_look_through_transdata(struct cp_graph *g)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        struct cp_node *td = cp_graph_node(g, (int32_t)i);
        if (td->dead || td->op != CP_OP_TRANS_DATA || td->n_inputs != 1 || td->n_outputs != 1)
            continue;
        for (size_t k = 0; k < cp_graph_n_nodes(g); k++) {
            struct cp_node *n = cp_graph_node(g, (int32_t)k);
            for (size_t j = 0; !n->dead && j < n->n_inputs; j++)
                if (n->inputs[j] == td->outputs[0])
                    n->inputs[j] = td->inputs[0];
        }
        td->dead = true;
        cp_graph_tensor(g, td->outputs[0])->producer = -1;
    }
}

static inline bool pt_origins_within(const struct cp_node *inner, const struct cp_node *outer)
{
    for (size_t i = 0; i < inner->n_origins; i++) {
        bool found = false;
        for (size_t j = 0; j < outer->n_origins && !found; j++)
            found = strcmp(inner->origins[i], outer->origins[j]) == 0;
        if (!found)
            return false;
    }
    return inner->n_origins > 0;
}

/* Run `pass` on g and describe what it fused: per node it made out of two
 * or more live nodes, the ONNX names of the replaced nodes that run a
 * kernel, but for those in `leave`. For TransposeRoundTripEliminationPass,
 * one text: the Transposes it removed. */
static inline struct pt_list pt_pass_instances(struct cp_graph *g, const char *pass,
                                               const struct pt_names *leave)
{
    size_t before = cp_graph_n_nodes(g);
    bool *was_live = calloc(before + 1, sizeof *was_live);
    cr_assert_not_null(was_live);
    for (size_t i = 0; i < before; i++)
        was_live[i] = !cp_graph_node(g, (int32_t)i)->dead;

    const struct cp_pass *p = cp_pass_lookup(pass);
    cr_assert_not_null(p, "%s", pass);
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    struct cp_pass_target target;
    cp_pass_target_detect(&target);
    const struct cp_log log = {CP_LOG_WARNING, NULL};
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_pass_ctx ctx = {.g = g,
                              .config = &c,
                              .d = &d,
                              .log = &log,
                              .has_bf16 = target.has_bf16,
                              .has_fp16 = target.has_fp16,
                              .cpu_model = target.cpu_model};
    bool changed = false;
    cr_assert_eq(p->run(&ctx, &changed), CP_OK, "%s: %s", pass, d.msg);

    struct pt_list out = {calloc(cp_graph_n_nodes(g) + 2, sizeof(char *)), 0};
    cr_assert_not_null(out.v);
    if (strcmp(pass, CP_PASS_TRANSPOSE_ROUNDTRIP) == 0) {
        struct pt_names s = {.n = 0};
        for (size_t i = 0; i < before; i++) {
            const struct cp_node *x = cp_graph_node(g, (int32_t)i);
            if (was_live[i] && x->dead && x->op == CP_OP_TRANSPOSE)
                for (size_t k = 0; k < x->n_origins; k++)
                    pt_names_add(&s, x->origins[k]);
        }
        if (s.n)
            out.v[out.n++] = pt_names_text(&s);
        free(was_live);
        return out;
    }
    for (size_t f = before; f < cp_graph_n_nodes(g); f++) {
        const struct cp_node *made = cp_graph_node(g, (int32_t)f);
        if (made->dead)
            continue;
        struct pt_names s = {.n = 0};
        size_t replaced = 0;
        for (size_t i = 0; i < before; i++) {
            const struct cp_node *x = cp_graph_node(g, (int32_t)i);
            if (!was_live[i] || !x->dead || !pt_origins_within(x, made))
                continue;
            replaced++;
            for (size_t k = 0; !pt_is_view(x->op) && k < x->n_origins; k++)
                if (!leave || !pt_names_has(leave, x->origins[k]))
                    pt_names_add(&s, x->origins[k]);
        }
        if (replaced >= 2)
            out.v[out.n++] = pt_names_text(&s);
    }
    free(was_live);
    return out;
}

/* ---- a graph's trace, as the runtime writes it ------------------------------------------ */

static inline json_t *pt_tensor_json(const struct cp_tensor *t, const struct cp_tensor *view_of)
{
    json_t *o = json_object(), *shape = json_array();
    for (int k = 0; k < t->shape.rank; k++)
        cr_assert(cp_json_push(shape, cp_json_int(t->shape.dims[k].value)));
    cr_assert(cp_json_set_str(o, "name", t->name) && cp_json_set(o, "shape", shape) &&
              cp_json_set_str(o, "dtype", cp_dtype_name(t->dtype)) &&
              cp_json_set_str(o, "layout", cp_layout_name(t->layout)));
    if (view_of && view_of != t)
        cr_assert(cp_json_set_str(o, "view_of", view_of->name));
    return o;
}

/* The tensor t aliases through view nodes (they run no kernel). */
static inline const struct cp_tensor *pt_view_source(const struct cp_graph *g, int32_t t)
{
    for (size_t guard = 0; guard < cp_graph_n_nodes(g); guard++) {
        const struct cp_tensor *T = cp_graph_tensor(g, t);
        const struct cp_node *p = T->producer >= 0 ? cp_graph_node(g, T->producer) : NULL;
        if (!p || p->dead || !pt_is_view(p->op) || p->n_inputs < 1 || p->inputs[0] < 0)
            break;
        t = p->inputs[0];
    }
    return cp_graph_tensor(g, t);
}

static inline char *pt_tensors_json(const struct cp_graph *g, const int32_t *idx, size_t n,
                                    bool inputs)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        if (idx[i] >= 0)
            cr_assert(cp_json_push(arr, pt_tensor_json(cp_graph_tensor(g, idx[i]),
                                                       inputs ? pt_view_source(g, idx[i]) : NULL)));
    char *text = cp_json_text(arr);
    json_decref(arr);
    cr_assert_not_null(text);
    return text;
}

static inline char *pt_origins_json(const struct cp_node *n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n->n_origins; i++)
        cr_assert(cp_json_push(arr, cp_json_str(n->origins[i])));
    char *text = cp_json_text(arr);
    json_decref(arr);
    cr_assert_not_null(text);
    return text;
}

/* A trace of g at `path`: one kernel per live node that is no view, in
 * topological order, with the tensors' names, shapes, dtypes, layouts and
 * view_of (docs/trace-format.md), two iterations of 10 us per kernel, and
 * the run's conversion config naming `switches_off` ("A:off;B:off"). */
static inline void pt_trace_of(const struct cp_graph *g, const char *path, const char *switches_off)
{
    struct cp_diag d;
    cp_diag_init(&d);
    int32_t *order;
    size_t n;
    cr_assert_eq(cp_graph_topo_order(g, &order, &n, &d), CP_OK, "%s", d.msg);
    struct cp_trace_kernel *k = calloc(n + 1, sizeof *k);
    cr_assert_not_null(k);
    size_t nk = 0;
    for (size_t i = 0; i < n; i++) {
        const struct cp_node *nd = cp_graph_node(g, order[i]);
        if (pt_is_view(nd->op))
            continue;
        k[nk++] = (struct cp_trace_kernel){nd->name,
                                           nd->op_type,
                                           "ref",
                                           pt_origins_json(nd),
                                           pt_tensors_json(g, nd->inputs, nd->n_inputs, true),
                                           pt_tensors_json(g, nd->outputs, nd->n_outputs, false),
                                           0,
                                           0};
    }
    struct cp_trace_store *s;
    cr_assert_eq(cp_trace_store_open(path, &s, &d), CP_OK, "%s", d.msg);
    char config[512];
    snprintf(config, sizeof config, "{\"fusion_switches\":\"%s\"}", switches_off);
    struct cp_trace_run_info info = {.kind = "bench",
                                     .model_path = "case.om",
                                     .config_json = config,
                                     .threads = 1,
                                     .batch = 1,
                                     .iterations = 2};
    int64_t run;
    cr_assert_eq(cp_trace_store_begin_run(s, &info, &run, &d), CP_OK, "%s", d.msg);
    uint64_t lat[2] = {nk * 10000 + 1000, nk * 10000 + 1000};
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, lat, 2, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_trace_store_add_kernels(s, run, k, nk, &d), CP_OK, "%s", d.msg);
    struct cp_trace_recorder *r = cp_trace_recorder_create(2 * nk + 16);
    for (int it = 0; it < 2; it++) {
        uint64_t t = 1000000 + (uint64_t)it * 1000000;
        for (size_t i = 0; i < nk; i++, t += 10000)
            cp_trace_record(r, CP_LAYER_DEVICE, cp_trace_intern(r, k[i].node), (int32_t)i, it, t,
                            t + 10000, 0);
    }
    cr_assert_eq(cp_trace_store_add_events(s, run, r, &d), CP_OK, "%s", d.msg);
    cp_trace_recorder_free(r);
    cp_trace_store_close(s);
    for (size_t i = 0; i < nk; i++) {
        free((char *)k[i].origins);
        free((char *)k[i].inputs);
        free((char *)k[i].outputs);
    }
    free(k);
    free(order);
}

/* The features of the last run of the trace at `path`. */
static inline struct cp_features *pt_features(const char *path)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s;
    cr_assert_eq(cp_trace_store_open_ro(path, &s, &d), CP_OK, "%s", d.msg);
    struct cp_features *f = NULL;
    cr_assert_eq(cp_features_compute(s, -1, NULL, &f, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    return f;
}

#endif
