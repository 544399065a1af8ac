/* DynamicBatchPass on small graphs: shape constants that hard-code the
 * exported batch come to follow the batch (0 = copy, -1 = merged), a
 * Reshape that silently folds the batch into another axis is caught and
 * fixed, nothing changes without profiles, and what cannot be generalised
 * is an error naming the node. The pass leaves the exported batch static for
 * the passes after it; cp_batch_finish makes it dynamic again, generalises
 * what later passes hard-coded and refuses a profile the converted graph
 * cannot run, naming the batch and the node. */
#include "atc_bridge/passes/batch_check.h"
#include "atc_bridge/passes/pass.h"
#include "graph/graph_build.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

static void dyn_config(struct cp_convert_config *c)
{
    cp_convert_config_init(c);
    const int64_t b[] = {1, 2, 4};
    memcpy(c->dynamic_batch, b, sizeof b);
    c->n_dynamic_batch = 3;
}

static enum cp_status run_pass(struct cp_graph *g, const struct cp_convert_config *c, bool *changed,
                               char *msg)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_pass_run_one(g, "DynamicBatchPass", c, changed, &d);
    memcpy(msg, d.msg, sizeof d.msg);
    return st;
}

/* Set dimension 0 of every input to `batch` and infer from scratch. */
static void infer_at(struct cp_graph *g, int64_t batch)
{
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++) {
        struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
        t->shape.dims[0].value = batch;
        t->shape.dims[0].sym = NULL;
    }
    cp_batch_forget_intermediates(g);
    gb_infer_ok(g);
}

/* The constant shape input of node `name` (its input 1). */
static void assert_target(struct cp_graph *g, const char *node, int64_t n, const int64_t *want)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (nd->dead || strcmp(nd->name, node) != 0)
            continue;
        const struct cp_tensor *t = cp_graph_tensor(g, nd->inputs[1]);
        cr_assert_eq(t->kind, CP_TENSOR_INITIALIZER);
        cr_assert_eq(t->nbytes, (size_t)n * sizeof(int64_t), "'%s' target has %zu bytes", node,
                     t->nbytes);
        const int64_t *v = t->data;
        for (int64_t k = 0; k < n; k++)
            cr_assert_eq(v[k], want[k], "'%s' target[%lld] is %lld, expected %lld", node,
                         (long long)k, (long long)v[k], (long long)want[k]);
        return;
    }
    cr_assert_fail("no node '%s'", node);
}

Test(batch_pass, reshape_hard_coding_batch_1_comes_to_copy_the_batch)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(-1, 4, 6));
    gb_ints(g, "shape", 4, GB_DIMS(1, 4, 2, 3));
    gb_node(g, "split_heads", "Reshape", GB_IN("x", "shape"), GB_IN("h"));
    gb_node(g, "act", "Relu", GB_IN("h"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c;
    dyn_config(&c);
    bool changed;
    char msg[1024];
    cr_assert_eq(run_pass(g, &c, &changed, msg), CP_OK, "%s", msg);
    cr_assert(changed);
    assert_target(g, "split_heads", 4, GB_DIMS(0, 4, 2, 3));
    infer_at(g, 4);
    gb_assert_shape(g, "y", 4, GB_DIMS(4, 4, 2, 3));
    cp_graph_free(g);
}

Test(batch_pass, reshape_that_would_fold_the_batch_into_tokens_is_fixed)
{
    /* [1,-1,6] infers at batch 2 too, as [1,8,6]: the batch would silently
     * become tokens. */
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(-1, 4, 6));
    gb_ints(g, "shape", 3, GB_DIMS(1, -1, 6));
    gb_node(g, "flatten_tokens", "Reshape", GB_IN("x", "shape"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c;
    dyn_config(&c);
    bool changed;
    char msg[1024];
    cr_assert_eq(run_pass(g, &c, &changed, msg), CP_OK, "%s", msg);
    cr_assert(changed);
    assert_target(g, "flatten_tokens", 3, GB_DIMS(0, -1, 6));
    infer_at(g, 2);
    gb_assert_shape(g, "y", 3, GB_DIMS(2, 4, 6));
    cp_graph_free(g);
}

Test(batch_pass, reshape_merging_batch_and_heads_takes_minus_one)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(-1, 2, 3, 5));
    gb_ints(g, "shape", 3, GB_DIMS(2, 3, 5));
    gb_node(g, "merge", "Reshape", GB_IN("x", "shape"), GB_IN("m"));
    gb_ints(g, "back", 4, GB_DIMS(1, 2, 3, 5));
    gb_node(g, "unmerge", "Reshape", GB_IN("m", "back"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c;
    dyn_config(&c);
    bool changed;
    char msg[1024];
    cr_assert_eq(run_pass(g, &c, &changed, msg), CP_OK, "%s", msg);
    assert_target(g, "merge", 3, GB_DIMS(-1, 3, 5));
    assert_target(g, "unmerge", 4, GB_DIMS(-1, 2, 3, 5));
    infer_at(g, 4);
    gb_assert_shape(g, "m", 3, GB_DIMS(8, 3, 5));
    gb_assert_shape(g, "y", 4, GB_DIMS(4, 2, 3, 5));
    cp_graph_free(g);
}

Test(batch_pass, expand_repeating_the_exported_batch_broadcasts_instead)
{
    /* Exported at batch 2: Expand to [2,4] becomes [1,4]. Without a source
     * model the exported batch is found by probing, and at batch 1 the
     * Expand infers too (broadcast), so declare it through a shape the
     * graph cannot take at batch 1: a Reshape to [2,4]. */
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(-1, 4));
    gb_ints(g, "two", 2, GB_DIMS(2, 4));
    gb_node(g, "fix", "Reshape", GB_IN("x", "two"), GB_IN("r"));
    gb_ints(g, "rep", 2, GB_DIMS(2, 4));
    gb_node(g, "expand", "Expand", GB_IN("r", "rep"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c;
    dyn_config(&c);
    c.dynamic_batch[0] = 2;
    c.dynamic_batch[1] = 4;
    c.dynamic_batch[2] = 8;
    bool changed;
    char msg[1024];
    cr_assert_eq(run_pass(g, &c, &changed, msg), CP_OK, "%s", msg);
    assert_target(g, "fix", 2, GB_DIMS(0, 4));
    assert_target(g, "expand", 2, GB_DIMS(1, 4));
    infer_at(g, 8);
    gb_assert_shape(g, "y", 2, GB_DIMS(8, 4));
    cp_graph_free(g);
}

Test(batch_pass, without_profiles_nothing_changes)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(1, 4, 6));
    gb_ints(g, "shape", 2, GB_DIMS(1, 24));
    gb_node(g, "r", "Reshape", GB_IN("x", "shape"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    bool changed = true;
    char msg[1024];
    cr_assert_eq(run_pass(g, &c, &changed, msg), CP_OK, "%s", msg);
    cr_assert(!changed);
    assert_target(g, "r", 2, GB_DIMS(1, 24));
    cp_graph_free(g);
}

Test(batch_pass, passes_after_it_see_the_exported_batch_and_finish_makes_it_dynamic)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(-1, 4, 6));
    gb_ints(g, "shape", 2, GB_DIMS(0, -1));
    gb_node(g, "r", "Reshape", GB_IN("x", "shape"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    size_t n_tensors = cp_graph_n_tensors(g);
    struct cp_convert_config c;
    dyn_config(&c);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, "input_shape", "x:-1,4,6", &d), CP_OK, "%s", d.msg);
    bool changed;
    char msg[1024];
    cr_assert_eq(run_pass(g, &c, &changed, msg), CP_OK, "%s", msg);
    /* Already generic: no constant rewritten, but the shapes are static. */
    cr_assert_eq(cp_graph_n_tensors(g), n_tensors);
    assert_target(g, "r", 2, GB_DIMS(0, -1));
    gb_assert_shape(g, "x", 3, GB_DIMS(1, 4, 6));
    gb_assert_shape(g, "y", 2, GB_DIMS(1, 24));
    cr_assert_eq(cp_batch_finish(g, &c, NULL, &d), CP_OK, "%s", d.msg);
    gb_assert_shape(g, "x", 3, GB_DIMS(-1, 4, 6));
    gb_assert_shape(g, "y", 2, GB_DIMS(-1, 24));
    cp_graph_free(g);
}

Test(batch_pass, finish_generalises_what_later_passes_hard_coded)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(-1, 4, 6));
    gb_node(g, "act", "Relu", GB_IN("x"), GB_IN("h"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "h")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c;
    dyn_config(&c);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, "input_shape", "x:-1,4,6", &d), CP_OK, "%s", d.msg);
    bool changed;
    char msg[1024];
    cr_assert_eq(run_pass(g, &c, &changed, msg), CP_OK, "%s", msg);
    /* A later pass adds a Reshape with the batch it saw baked in. */
    gb_ints(g, "baked", 2, GB_DIMS(1, 24));
    gb_node(g, "late_reshape", "Reshape", GB_IN("h", "baked"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    cr_assert_eq(cp_batch_finish(g, &c, NULL, &d), CP_OK, "%s", d.msg);
    assert_target(g, "late_reshape", 2, GB_DIMS(0, 24));
    gb_assert_shape(g, "y", 2, GB_DIMS(-1, 24));
    cp_graph_free(g);
}

Test(batch_pass, computed_target_that_fixes_the_batch_is_an_error_naming_the_node)
{
    /* The target is the shape of a static side input: it cannot follow x. */
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(-1, 4));
    gb_input(g, "side", CP_DTYPE_F32, 2, GB_DIMS(1, 4));
    /* "side" is static: only x carries the batch. */
    gb_node(g, "shape_of_side", "Shape", GB_IN("side"), GB_IN("s"));
    gb_node(g, "like_side", "Reshape", GB_IN("x", "s"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c;
    dyn_config(&c);
    bool changed;
    char msg[1024];
    cr_assert_neq(run_pass(g, &c, &changed, msg), CP_OK);
    cr_assert(strstr(msg, "'like_side'"), "names the node: %s", msg);
    cr_assert(strstr(msg, "DynamicBatchPass"), "names the pass: %s", msg);
    cp_graph_free(g);
}

Test(batch_pass, finish_names_the_batch_and_node_that_fail)
{
    /* A [2,4] constant added: batch 1 broadcasts and 2 matches, but 4
     * cannot run. */
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(-1, 4));
    const float w[8] = {0};
    gb_init(g, "bias", CP_DTYPE_F32, 2, GB_DIMS(2, 4), w);
    gb_node(g, "add_bias", "Add", GB_IN("x", "bias"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c;
    dyn_config(&c);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, "input_shape", "x:-1,4", &d), CP_OK, "%s", d.msg);
    cr_assert_neq(cp_batch_finish(g, &c, NULL, &d), CP_OK);
    cr_assert(strstr(d.msg, "batch 4") && strstr(d.msg, "'add_bias'"), "%s", d.msg);
    c.n_dynamic_batch = 2; /* 1, 2 */
    cp_diag_init(&d);
    cr_assert_eq(cp_batch_finish(g, &c, NULL, &d), CP_OK, "%s", d.msg);
    gb_assert_shape(g, "x", 2, GB_DIMS(-1, 4));
    cp_graph_free(g);
}

Test(batch_pass, finish_checks_every_profile_when_the_pass_is_switched_off)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(-1, 4, 6));
    gb_ints(g, "shape", 2, GB_DIMS(1, 24));
    gb_node(g, "flatten", "Reshape", GB_IN("x", "shape"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c;
    dyn_config(&c);
    snprintf(c.fusion_switches, sizeof c.fusion_switches, "DynamicBatchPass:off");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_batch_finish(g, &c, NULL, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "batch 2") && strstr(d.msg, "'flatten'"), "%s", d.msg);
    cp_graph_free(g);
}
