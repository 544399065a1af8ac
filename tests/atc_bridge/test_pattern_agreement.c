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
#include "atc_bridge/pattern_test.h"
#include "graph/pattern.h"
#include "om/om.h"
#include "rules/features.h"
#include "support/cli.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(pattern_agreement, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close,
          .timeout = 1800);

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
    t->f = pt_features(db);
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
static size_t check_pass(const char *model, const char *config, const struct traced *t,
                         const char *pass)
{
    const struct cp_features *f = t->f;
    json_t *keep = json_array();
    bool roundtrip = strcmp(pass, CP_PASS_TRANSPOSE_ROUNDTRIP) == 0;
    struct pt_list rules = pt_rule_instances(f, pass, roundtrip, keep);
    size_t n_patterns = 0;
    for (size_t i = 0; i < f->n_patterns; i++) {
        const struct cp_pattern *p = &f->patterns[i];
        if (strcmp(p->fix_pass, pass) != 0)
            continue;
        n_patterns++;
        cr_assert(p->fix_pass_off, "%s: %s is off, the pattern says it ran", model, pass);
        cr_assert(!roundtrip || p->n == 2, "%s: a round trip of other than two Transposes", model);
    }
    struct pt_names gelu =
        strcmp(pass, CP_PASS_GELU) == 0 ? (struct pt_names){.n = 0} : pt_gelu_names(f, keep);

    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_graph *g = NULL;
    cr_assert_eq(cp_om_read(t->om, &g, NULL, &d), CP_OK, "%s", d.msg);
    pt_look_through_transdata(g);
    struct pt_list fused = pt_pass_instances(g, pass, &gelu);

    char *context = cp_t_fmt("%s converted with %s, %s", model, config, pass);
    cr_assert(pt_list_same(&rules, &fused, "the rules report", "the pass fuses", context),
              "%s: the rules report %zu instances, the pass fuses %zu (see stderr)", context,
              rules.n, fused.n);
    free(context);
    pt_list_release(&rules);
    pt_list_release(&fused);
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
 *  - every pass off (CT_EVERY_PASS_OFF): every pattern at once, unfolded constants,
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
        size_t n = check_pass(model, "it off", &t, fusing_passes[k]);
        cr_assert_eq(n, one_off[k], "%s, %s off: %zu instances, expected %zu", model,
                     fusing_passes[k], n, one_off[k]);
        traced_release(&t);
        free(sw);
    }
    struct traced t;
    trace_model(model, "all_off", CT_EVERY_PASS_OFF, &t);
    for (size_t k = 0; k < N_FUSING; k++) {
        size_t n = check_pass(model, "ALL:off", &t, fusing_passes[k]);
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
