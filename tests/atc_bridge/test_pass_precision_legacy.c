/* f16/bf16 models under the precision modes (atc_bridge/passes/
 * precision_legacy.c): in the fp32 modes the weights are widened, the
 * half inputs and outputs cast at the boundary and the model's casts to
 * half become casts to f32; must_keep_origin_dtype keeps the half types. */
#include "atc_bridge/convert.h"
#include "atc_bridge/passes/pass.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <string.h>

static void gb_output(struct cp_graph *g, const char *name)
{
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, name)), CP_OK);
}

static enum cp_status run_precision(struct cp_graph *g, enum cp_precision_mode m, bool *changed)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    c.precision_mode = m;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_pass_ctx ctx = {.g = g, .config = &c, .d = &d, .has_bf16 = false};
    *changed = false;
    for (const struct cp_pass *p = cp_precision_passes; p->name; p++)
        if (strcmp(p->name, "PrecisionModePass") == 0) {
            enum cp_status st = p->run(&ctx, changed);
            cr_assert_eq(st, CP_OK, "%s", d.msg);
            return st;
        }
    cr_assert_fail("no PrecisionModePass");
    return CP_ERR_INTERNAL;
}

/* y = Cast(MatMul(x, w) , to=FLOAT16) with x, w, y in f16 (`dt`). */
static struct cp_graph *half_model(enum cp_dtype dt)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", dt, 2, GB_DIMS(2, 3));
    uint16_t w[6] = {0};
    gb_init(g, "w", dt, 2, GB_DIMS(3, 2), w);
    gb_node(g, "mm", "MatMul", GB_IN("x", "w"), GB_IN("h"));
    int32_t c = gb_node(g, "cast", "Cast", GB_IN("h"), GB_IN("y"));
    cp_node_set_int(g, c, "to", dt == CP_DTYPE_F16 ? 10 : 16);
    gb_output(g, "y");
    gb_infer_ok(g);
    return g;
}

static enum cp_dtype dtype_of(const struct cp_graph *g, const char *name)
{
    return cp_graph_tensor(g, cp_graph_find_tensor(g, name))->dtype;
}

Test(precision_legacy, fp32_mode_computes_a_half_model_in_f32_behind_half_io)
{
    enum cp_dtype dts[2] = {CP_DTYPE_F16, CP_DTYPE_BF16};
    for (int k = 0; k < 2; k++) {
        struct cp_graph *g = half_model(dts[k]);
        bool changed;
        run_precision(g, CP_PREC_FORCE_FP32, &changed);
        cr_assert(changed);
        gb_infer_ok(g);
        cr_assert_eq(dtype_of(g, "w"), CP_DTYPE_F32);
        cr_assert_eq(dtype_of(g, "x"), dts[k], "the input keeps its dtype");
        cr_assert_eq(dtype_of(g, "y"), dts[k], "the output keeps its dtype");
        cr_assert_eq(dtype_of(g, "h"), CP_DTYPE_F32);
        /* the MatMul reads a cast of x */
        for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
            const struct cp_node *n = cp_graph_node(g, (int32_t)i);
            if (strcmp(n->name, "mm") == 0)
                cr_assert_eq(cp_graph_tensor(g, n->inputs[0])->dtype, CP_DTYPE_F32);
            if (strcmp(n->name, "cast") == 0)
                cr_assert_eq(cp_node_attr_int(n, "to", 0), 1);
        }
        cp_graph_free(g);
    }
}

Test(precision_legacy, must_keep_origin_dtype_keeps_the_half_types)
{
    struct cp_graph *g = half_model(CP_DTYPE_F16);
    bool changed;
    run_precision(g, CP_PREC_MUST_KEEP_ORIGIN_DTYPE, &changed);
    cr_assert_not(changed);
    cr_assert_eq(dtype_of(g, "w"), CP_DTYPE_F16);
    cp_graph_free(g);
}

Test(precision_legacy, f32_models_are_left_alone)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(2, 3));
    gb_node(g, "r", "Relu", GB_IN("x"), GB_IN("y"));
    gb_output(g, "y");
    gb_infer_ok(g);
    bool changed;
    run_precision(g, CP_PREC_FORCE_FP32, &changed);
    cr_assert_not(changed);
    cp_graph_free(g);
}
