/* The rule engine reports exactly what the passes fuse.
 *
 * For every example model and every pass that fuses a pattern of
 * graph/pattern.h's table: convert with that pass switched off (through
 * the CLI), record a trace of the .om with `cannprof bench`, and compute
 * its features. Then run the pass on the .om's graph, the graph the trace
 * was recorded from, and see what it fuses. The patterns the rules found
 * for that pass must be exactly those instances: as many, and each with
 * the ONNX node names of the kernels the pass replaced by one node (views
 * run no kernel, so they are not in a trace). For
 * TransposeRoundTripEliminationPass, which removes Transposes instead of
 * fusing nodes, the Transposes the patterns name must be those it removes
 * (and the count of round trips is the model's, from its README).
 *
 * The converted graph is read as the fusing passes saw it: without the
 * TransData that LayoutTransformPass, which runs after all of them, put
 * between ops. One stands between each Conv and BatchNormalization of
 * resnet_tiny (BatchNormalization has no blocked kernel), and hid the
 * fifteen folds ConvBatchNormFusionPass makes when switched on; the rule
 * engine looks through TransData the same way (rules/patterns_internal.h).
 * What later passes did otherwise stays: with GeluFusionPass off the
 * MatMul epilogue has taken the decomposed GELU already, so turning the
 * pass on changes no kernel, and neither the rules nor the pass find one.
 *
 * A suggestion that cannot take effect is a bug: a pattern the pass would
 * not fuse fails here, and so does an instance the rules miss. */
#include "atc_bridge/passes/pass.h"
#include "graph/pattern.h"
#include "om/om.h"
#include "rules/features.h"
#include "support/cli.h"
#include "trace/trace.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(pattern_agreement, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close,
          .timeout = 1800);

/* ---- sets of ONNX node names ---------------------------------------------------- */

#define MAX_NAMES 128

struct names {
    const char *v[MAX_NAMES];
    size_t n;
};

static void names_add(struct names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return;
    cr_assert_lt(s->n, MAX_NAMES);
    s->v[s->n++] = name;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "a,b,c", sorted: what the messages print and the comparison compares. */
static char *names_text(struct names *s)
{
    qsort(s->v, s->n, sizeof *s->v, cmp_str);
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

/* ---- what the rules found ---------------------------------------------------------- */

/* The ONNX names of each pattern the rules attribute to `pass`, as texts;
 * with `merge`, of all of them as one text. OUT: *n texts, *n_patterns.
 * `keep` holds the parsed JSON the names point into. */
static char **rule_instances(const struct cp_features *f, const char *pass, bool merge, size_t *n,
                             size_t *n_patterns, json_t *keep)
{
    char **out = calloc(f->n_patterns + 1, sizeof *out);
    cr_assert_not_null(out);
    *n = *n_patterns = 0;
    struct names all = {.n = 0};
    for (size_t i = 0; i < f->n_patterns; i++) {
        const struct cp_pattern *p = &f->patterns[i];
        if (strcmp(p->fix_pass, pass) != 0)
            continue;
        (*n_patterns)++;
        json_t *a = json_loads(p->origins_json, 0, NULL);
        cr_assert(json_is_array(a), "%s", p->origins_json);
        json_array_append_new(keep, a);
        struct names s = {.n = 0};
        for (size_t j = 0; j < json_array_size(a); j++) {
            names_add(&s, json_string_value(json_array_get(a, j)));
            names_add(&all, json_string_value(json_array_get(a, j)));
        }
        if (!merge)
            out[(*n)++] = names_text(&s);
    }
    if (merge && all.n)
        out[(*n)++] = names_text(&all);
    return out;
}

/* ---- what the pass does ---------------------------------------------------------- */

/* The view ops, which run no kernel (docs/trace-format.md, "view_of"). */
static bool is_view(enum cp_op op)
{
    return op == CP_OP_RESHAPE || op == CP_OP_FLATTEN || op == CP_OP_SQUEEZE ||
           op == CP_OP_UNSQUEEZE || op == CP_OP_IDENTITY || op == CP_OP_DROPOUT;
}

static bool origins_within(const struct cp_node *inner, const struct cp_node *outer)
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

/* Run `pass` on g (the converted graph) and describe what it fused: per
 * node it made out of two or more live nodes, the ONNX names of the
 * replaced nodes that run a kernel, but for those in `leave`. For the
 * round-trip pass, one instance: the Transposes it removed. OUT: *n. */
static char **pass_instances(struct cp_graph *g, const char *pass,
                             const struct cp_convert_config *c, const struct names *leave,
                             size_t *n)
{
    size_t before = cp_graph_n_nodes(g);
    bool *was_live = calloc(before + 1, sizeof *was_live);
    cr_assert_not_null(was_live);
    for (size_t i = 0; i < before; i++)
        was_live[i] = !cp_graph_node(g, (int32_t)i)->dead;

    const struct cp_pass *p = cp_pass_lookup(pass);
    cr_assert_not_null(p, "%s", pass);
    struct cp_pass_target target;
    cp_pass_target_detect(&target);
    const struct cp_log log = {CP_LOG_WARNING, NULL};
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_pass_ctx ctx = {.g = g,
                              .config = c,
                              .d = &d,
                              .log = &log,
                              .has_bf16 = target.has_bf16,
                              .has_fp16 = target.has_fp16,
                              .cpu_model = target.cpu_model};
    bool changed = false;
    cr_assert_eq(p->run(&ctx, &changed), CP_OK, "%s: %s", pass, d.msg);

    char **out = calloc(cp_graph_n_nodes(g) + 2, sizeof *out);
    cr_assert_not_null(out);
    *n = 0;
    if (strcmp(pass, CP_PASS_TRANSPOSE_ROUNDTRIP) == 0) {
        struct names s = {.n = 0};
        for (size_t i = 0; i < before; i++) {
            const struct cp_node *x = cp_graph_node(g, (int32_t)i);
            if (was_live[i] && x->dead && x->op == CP_OP_TRANSPOSE)
                for (size_t k = 0; k < x->n_origins; k++)
                    names_add(&s, x->origins[k]);
        }
        if (s.n)
            out[(*n)++] = names_text(&s);
        free(was_live);
        return out;
    }
    for (size_t f = before; f < cp_graph_n_nodes(g); f++) {
        const struct cp_node *made = cp_graph_node(g, (int32_t)f);
        if (made->dead)
            continue;
        struct names s = {.n = 0};
        size_t replaced = 0;
        for (size_t i = 0; i < before; i++) {
            const struct cp_node *x = cp_graph_node(g, (int32_t)i);
            if (!was_live[i] || !x->dead || !origins_within(x, made))
                continue;
            replaced++;
            if (is_view(x->op))
                continue;
            for (size_t k = 0; k < x->n_origins; k++) {
                bool left = false;
                for (size_t j = 0; j < leave->n && !left; j++)
                    left = strcmp(leave->v[j], x->origins[k]) == 0;
                if (!left)
                    names_add(&s, x->origins[k]);
            }
        }
        if (replaced >= 2)
            out[(*n)++] = names_text(&s);
    }
    free(was_live);
    return out;
}

/* Take out every TransData: its readers read what it read (see the top). */
static void look_through_transdata(struct cp_graph *g)
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

/* ---- the comparison ------------------------------------------------------------------- */

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int cmp_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void print_list(const char *what, char **v, size_t n)
{
    fprintf(stderr, "  %s (%zu):\n", what, n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "    %s\n", v[i]);
}

/* A model converted with some passes switched off, its trace and the
 * trace's features. */
struct traced {
    char *om;
    struct cp_features *f;
};

static void trace_model(const char *model, const char *tag, const char *switches, struct traced *t)
{
    char *sw_name = cp_t_fmt("%s.%s.sw", model, tag);
    char *flag = ct_switch_file(sw_name, switches);
    char *out = cp_t_fmt("%s_%s", model, tag);
    t->om = ct_convert_to(model, out, flag, NULL);
    char *db = cp_t_fmt("%s/%s.db", cp_t_dir, out);
    cr_assert(cp_t_bench_trace(t->om, db, "--iterations", "1", "--warmup", "0", "--no-probe", NULL),
              "bench %s failed (see stderr)", t->om);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s;
    cr_assert_eq(cp_trace_store_open_ro(db, &s, &d), CP_OK, "%s", d.msg);
    t->f = NULL;
    cr_assert_eq(cp_features_compute(s, -1, NULL, &t->f, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    free(db);
    free(out);
    free(flag);
    free(sw_name);
}

static void traced_release(struct traced *t)
{
    cp_features_free(t->f);
    free(t->om);
}

/* One pass against the rules: the patterns the rules attribute to it in
 * t's trace, and what it fuses when run on t's graph. A Conv or MatMul
 * epilogue or a GroupNorm whose activation is a decomposed GELU fuses the
 * GELU's nodes too; the rules leave those to the gelu pattern (so no
 * kernel counts twice), and so does the comparison. Returns the number of
 * patterns the rules report (for a fusing pass, the number of instances
 * the pass fuses too). */
static size_t check_pass(const char *model, const char *switches, const struct traced *t,
                         const char *pass)
{
    const struct cp_features *f = t->f;
    json_t *keep = json_array();
    size_t n_rules, n_patterns;
    bool roundtrip = strcmp(pass, CP_PASS_TRANSPOSE_ROUNDTRIP) == 0;
    char **rules = rule_instances(f, pass, roundtrip, &n_rules, &n_patterns, keep);
    struct names gelu = {.n = 0};
    for (size_t i = 0; i < f->n_patterns; i++) {
        const struct cp_pattern *p = &f->patterns[i];
        if (strcmp(p->fix_pass, pass) == 0) {
            cr_assert(p->fix_pass_off, "%s: %s is off, the pattern says it ran", model, pass);
            cr_assert(!roundtrip || p->n == 2, "%s: a round trip of other than two Transposes",
                      model);
        }
        if (strcmp(p->kind, "gelu") != 0 || strcmp(pass, CP_PASS_GELU) == 0)
            continue;
        json_t *a = json_loads(p->origins_json, 0, NULL);
        json_array_append_new(keep, a);
        for (size_t j = 0; j < json_array_size(a); j++)
            names_add(&gelu, json_string_value(json_array_get(a, j)));
    }

    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_graph *g = NULL;
    cr_assert_eq(cp_om_read(t->om, &g, NULL, &d), CP_OK, "%s", d.msg);
    look_through_transdata(g);
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    size_t n_pass;
    char **fused = pass_instances(g, pass, &c, &gelu, &n_pass);

    qsort(rules, n_rules, sizeof *rules, cmp_text);
    qsort(fused, n_pass, sizeof *fused, cmp_text);
    bool same = n_rules == n_pass;
    for (size_t i = 0; same && i < n_rules; i++)
        same = strcmp(rules[i], fused[i]) == 0;
    if (!same) {
        fprintf(stderr, "%s converted with %s, %s:\n", model, switches, pass);
        print_list("the rules report", rules, n_rules);
        print_list("the pass fuses", fused, n_pass);
    }
    cr_assert(same, "%s (%s), %s: the rules report %zu instances, the pass fuses %zu (see stderr)",
              model, switches, pass, n_rules, n_pass);
    free_list(rules, n_rules);
    free_list(fused, n_pass);
    cp_graph_free(g);
    json_decref(keep);
    return n_patterns;
}

static const char *const fusing_passes[] = {
    CP_PASS_FLASH_ATTENTION, CP_PASS_LAYERNORM,
    CP_PASS_GROUPNORM,       CP_PASS_GELU,
    CP_PASS_CONV_BIAS_ACT,   CP_PASS_CONV_BN,
    CP_PASS_MATMUL_BIAS_ACT, CP_PASS_TRANSPOSE_ROUNDTRIP,
};
#define N_FUSING (sizeof fusing_passes / sizeof *fusing_passes)

/* Every pass of the table but LayoutTransformPass (which fuses nothing: its
 * TransData round trips are the rule engine's own diagnosis) is checked. */
Test(pattern_agreement, the_checked_passes_are_the_tables_fusing_passes)
{
    for (int i = 0; i < CP_PATTERN_COUNT; i++) {
        const char *pass = cp_pattern_get((enum cp_pattern_id)i)->fix_pass;
        if (!pass[0] || strcmp(pass, CP_PASS_LAYOUT_TRANSFORM) == 0)
            continue;
        bool found = false;
        for (size_t k = 0; k < N_FUSING && !found; k++)
            found = strcmp(fusing_passes[k], pass) == 0;
        cr_assert(found, "%s is not checked", pass);
    }
}

/*
 * Each model in two configurations:
 *  - each pass switched off on its own, the others at their defaults: what
 *    a user who turned one pass off sees;
 *  - every pass off (ALL:off): every pattern at once, unfolded constants,
 *    Identity and Shape nodes, overlapping patterns.
 * `one_off` and `all_off` are the instances per pass, in fusing_passes'
 * order, so a model whose patterns all vanished cannot pass by agreeing on
 * nothing; they are the patterns examples/models/README.md plants.
 */
static void check_model(const char *model, const size_t *one_off, const size_t *all_off)
{
    for (size_t k = 0; k < N_FUSING; k++) {
        char *sw = cp_t_fmt("%s:off\n", fusing_passes[k]);
        struct traced t;
        trace_model(model, fusing_passes[k], sw, &t);
        size_t n = check_pass(model, sw, &t, fusing_passes[k]);
        cr_assert_eq(n, one_off[k], "%s, %s off: %zu instances, expected %zu", model,
                     fusing_passes[k], n, one_off[k]);
        traced_release(&t);
        free(sw);
    }
    struct traced t;
    trace_model(model, "all_off", "ALL:off\n", &t);
    for (size_t k = 0; k < N_FUSING; k++) {
        size_t n = check_pass(model, "ALL:off\n", &t, fusing_passes[k]);
        cr_assert_eq(n, all_off[k], "%s, ALL:off, %s: %zu instances, expected %zu", model,
                     fusing_passes[k], n, all_off[k]);
    }
    traced_release(&t);
}

/* per pass: attention, layernorm, groupnorm, gelu, conv, conv_bn, matmul, roundtrip */

Test(pattern_agreement, sd_unet_tiny)
{
    check_model("sd_unet_tiny", (const size_t[]){4, 0, 9, 0, 5, 0, 10, 0},
                (const size_t[]){4, 0, 9, 2, 5, 0, 10, 0});
}

Test(pattern_agreement, transformer_encoder_op14)
{
    check_model("transformer_encoder_op14", (const size_t[]){2, 4, 0, 0, 0, 0, 12, 0},
                (const size_t[]){2, 4, 0, 2, 0, 0, 12, 0});
}

Test(pattern_agreement, transformer_encoder_op17)
{
    check_model("transformer_encoder_op17", (const size_t[]){2, 0, 0, 0, 0, 0, 12, 0},
                (const size_t[]){2, 0, 0, 2, 0, 0, 12, 0});
}

Test(pattern_agreement, resnet_tiny)
{
    check_model("resnet_tiny", (const size_t[]){0, 0, 0, 0, 13, 15, 0, 0},
                (const size_t[]){0, 0, 0, 0, 0, 15, 0, 0});
}

Test(pattern_agreement, nhwc_roundtrip)
{
    check_model("nhwc_roundtrip", (const size_t[]){0, 0, 0, 0, 3, 0, 0, 3},
                (const size_t[]){0, 1, 0, 0, 3, 0, 0, 3});
}

Test(pattern_agreement, launch_bound_tiny)
{
    check_model("launch_bound_tiny", (const size_t[]){0, 0, 0, 0, 0, 0, 16, 0},
                (const size_t[]){0, 0, 0, 0, 0, 0, 16, 0});
}
