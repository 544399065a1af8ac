/* FlashAttentionFusionPass: on the example models it finds every attention
 * (4 in sd_unet_tiny, 2 in each transformer), absorbs their head split and
 * merge into BNHD formats, merges origins, and the fused graphs compute
 * what the unfused ones do (1e-4 relative L2 in fp32, 1e-2 in bf16). On
 * small graphs: masks, Div scales, K already transposed, FusedMatMul with
 * transB, and the patterns it must leave alone (shared intermediates,
 * softmax over another axis, a score tensor that is a graph output).
 *
 * The pass runs through its table entry (cp_attention_passes), then the
 * graph is compacted, verified and inferred, as the pass manager does. */
#include "atc_bridge/passes/pass.h"
#include "runner/runner.h"
#include "support/examples.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MODELS_DIR CP_SOURCE_DIR "/examples/models/"

/* ---- helpers ------------------------------------------------------------- */

static const struct cp_pass *flash_pass(void)
{
    for (const struct cp_pass *p = cp_attention_passes; p->name; p++)
        if (strcmp(p->name, "FlashAttentionFusionPass") == 0)
            return p;
    cr_assert_fail("no FlashAttentionFusionPass in cp_attention_passes");
    return NULL;
}

static void prepare(struct cp_graph *g)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_verify(g, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_compact(g, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_infer(g, &d), CP_OK, "%s", d.msg);
}

/* Run the pass; if it changed the graph, compact, verify and infer. */
static bool run_pass(struct cp_graph *g)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_pass_ctx ctx = {.g = g, .config = &c, .d = &d};
    bool changed = false;
    cr_assert_eq(flash_pass()->run(&ctx, &changed), CP_OK, "%s", d.msg);
    if (changed)
        prepare(g);
    return changed;
}

static struct cp_graph *import(const char *name)
{
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_ex_import(name, &g, NULL, &d), CP_OK, "%s", d.msg);
    return g;
}

static size_t count_op(const struct cp_graph *g, enum cp_op op)
{
    size_t n = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        n += !nd->dead && nd->op == op;
    }
    return n;
}

static const struct cp_node *nth_op(const struct cp_graph *g, enum cp_op op, size_t k)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (!nd->dead && nd->op == op && k-- == 0)
            return nd;
    }
    return NULL;
}

static bool has_origin(const struct cp_node *n, const char *origin)
{
    for (size_t i = 0; i < n->n_origins; i++)
        if (strcmp(n->origins[i], origin) == 0)
            return true;
    return false;
}

struct outputs {
    size_t n;
    struct cp_host_tensor t[4];
};

static void outputs_release(struct outputs *o)
{
    for (size_t i = 0; i < o->n; i++)
        cp_host_tensor_release(&o->t[i]);
}

/* Run g (taken over) with the runtime's fast kernels on 2 threads; inputs
 * from the model's test_data_set_0 when `model` is given, else seeded
 * random. */
static void run_graph(struct cp_graph *g, const char *model, struct outputs *out)
{
    struct cp_runtime_options o = {.threads = 2};
    struct cp_runtime *rt;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_runtime_create(&o, &rt, &d), CP_OK, "%s", d.msg);
    struct cp_model *m;
    cr_assert_eq(cp_model_from_graph(rt, g, NULL, &m, &d), CP_OK, "%s", d.msg);
    struct cp_plan_options po = {.buffer_optimize = -1};
    struct cp_plan *p;
    cr_assert_eq(cp_plan_create(m, &po, &p, &d), CP_OK, "%s", d.msg);
    for (size_t i = 0; i < cp_plan_n_inputs(p); i++) {
        const struct cp_tensor *t = cp_plan_input(p, i);
        struct cp_host_tensor h;
        memset(&h, 0, sizeof h);
        char path[640];
        snprintf(path, sizeof path, MODELS_DIR "%s/test_data_set_0/input_%zu.pb",
                 model ? model : "", i);
        if (model && access(path, F_OK) == 0) {
            cr_assert_eq(cp_tensor_read_file(path, &h, &d), CP_OK, "%s", d.msg);
            cr_assert_str_eq(h.name, t->name);
        } else {
            snprintf(h.name, sizeof h.name, "%s", t->name);
            h.dtype = t->dtype;
            h.rank = t->shape.rank;
            for (int k = 0; k < h.rank; k++)
                h.dims[k] = t->shape.dims[k].value;
            cr_assert_eq(cp_tensor_fill_random(&h, 77 + i, &d), CP_OK, "%s", d.msg);
        }
        cr_assert_eq(cp_plan_set_input(p, i, &h, &d), CP_OK, "%s", d.msg);
        cp_host_tensor_release(&h);
    }
    cr_assert_eq(cp_plan_run(p, -1, &d), CP_OK, "%s", d.msg);
    out->n = cp_plan_n_outputs(p);
    cr_assert_leq(out->n, 4);
    for (size_t i = 0; i < out->n; i++)
        cr_assert_eq(cp_plan_get_output(p, i, &out->t[i], &d), CP_OK, "%s", d.msg);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

static double rel_l2(const struct cp_host_tensor *got, const struct cp_host_tensor *want)
{
    cr_assert_eq(got->nbytes, want->nbytes, "output '%s' size", want->name);
    const float *a = got->data, *b = want->data;
    double num = 0, den = 0;
    for (size_t i = 0; i < want->nbytes / sizeof(float); i++) {
        double e = (double)a[i] - (double)b[i];
        num += e * e;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The largest relative L2 error over the outputs. */
static double max_err(const struct outputs *got, const struct outputs *want)
{
    cr_assert_eq(got->n, want->n);
    double worst = 0;
    for (size_t i = 0; i < want->n; i++) {
        cr_assert_str_eq(got->t[i].name, want->t[i].name);
        double e = rel_l2(&got->t[i], &want->t[i]);
        worst = e > worst ? e : worst;
    }
    return worst;
}

static void set_bf16(struct cp_graph *g)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (!n->dead && n->op == CP_OP_FUSED_ATTENTION)
            cr_assert_eq(cp_node_set_string(g, (int32_t)i, "compute_precision", "bf16"), CP_OK);
    }
}

/* ---- the example models ---------------------------------------------------- */

/* Fuse, check the count and formats, and compare outputs with the unfused
 * graph (fp32, and bf16 attention). */
static void check_model(const char *name, size_t want, int64_t tokens)
{
    struct cp_graph *g = import(name);
    size_t softmax_before = count_op(g, CP_OP_SOFTMAX), nodes_before = cp_graph_n_live_nodes(g);
    cr_assert(run_pass(g), "%s: the pass changed nothing", name);
    cr_expect_eq(count_op(g, CP_OP_FUSED_ATTENTION), want, "%s: %zu attentions fused, expected %zu",
                 name, count_op(g, CP_OP_FUSED_ATTENTION), want);
    cr_expect_eq(count_op(g, CP_OP_SOFTMAX), softmax_before - want);
    /* each attention: 2 MatMul, scale, Softmax, 3 x (Reshape, Transpose),
     * Transpose and Reshape after: 12 nodes become 1 */
    cr_expect_eq(cp_graph_n_live_nodes(g), nodes_before - 11 * want, "%s: %zu nodes, from %zu",
                 name, cp_graph_n_live_nodes(g), nodes_before);
    for (size_t k = 0; k < want; k++) {
        const struct cp_node *n = nth_op(g, CP_OP_FUSED_ATTENTION, k);
        cr_assert_not_null(n);
        cr_expect_str_eq(cp_node_attr_string(n, "q_format", ""), "BNHD", "%s", n->name);
        cr_expect_str_eq(cp_node_attr_string(n, "k_format", ""), "BNHD", "%s", n->name);
        cr_expect_str_eq(cp_node_attr_string(n, "v_format", ""), "BNHD", "%s", n->name);
        cr_expect_str_eq(cp_node_attr_string(n, "out_format", ""), "BNHD", "%s", n->name);
        cr_expect_eq(cp_node_attr_int(n, "num_heads", 0), 4, "%s", n->name);
        cr_expect_float_eq(cp_node_attr_float(n, "scale", 0), 0.25f, 1e-7, "%s", n->name);
        cr_expect_eq(n->n_origins, 12, "%s: %zu origins", n->name, n->n_origins);
        const struct cp_tensor *q = cp_graph_tensor(g, n->inputs[0]);
        cr_expect_eq(q->shape.dims[1].value, tokens, "%s: %lld queries", n->name,
                     (long long)q->shape.dims[1].value);
    }
    struct cp_graph *ref = import(name), *fused16 = import(name);
    cr_assert(run_pass(fused16));
    set_bf16(fused16);
    struct outputs want_o, got, got16;
    run_graph(ref, name, &want_o);
    run_graph(g, name, &got);
    run_graph(fused16, name, &got16);
    double e32 = max_err(&got, &want_o), e16 = max_err(&got16, &want_o);
    cr_log_info("%s: %zu attentions; fused vs unfused relative L2: fp32 %.3g, bf16 %.3g", name,
                want, e32, e16);
    cr_expect_leq(e32, 1e-4, "%s: fp32 fused output is %.3g from the unfused graph", name, e32);
    cr_expect_leq(e16, 1e-2, "%s: bf16 fused output is %.3g from the unfused graph", name, e16);
    outputs_release(&want_o);
    outputs_release(&got);
    outputs_release(&got16);
}

Test(pass_attention, sd_unet_tiny_has_its_4_attentions_fused)
{
    check_model("sd_unet_tiny", 4, 1024);
}

Test(pass_attention, transformer_op14_has_its_2_attentions_fused)
{
    check_model("transformer_encoder_op14", 2, 128);
}

Test(pass_attention, transformer_op17_has_its_2_attentions_fused)
{
    check_model("transformer_encoder_op17", 2, 128);
}

Test(pass_attention, fused_nodes_keep_the_original_node_names_as_origins)
{
    struct cp_graph *g = import("sd_unet_tiny");
    run_pass(g);
    bool seen = false;
    for (size_t k = 0; k < 4; k++) {
        const struct cp_node *n = nth_op(g, CP_OP_FUSED_ATTENTION, k);
        if (strcmp(n->name, "/attn_down/attn2/FusedAttention") != 0)
            continue;
        seen = true;
        static const char *const want[] = {
            "/attn_down/attn2/MatMul",      "/attn_down/attn2/Mul",
            "/attn_down/attn2/Softmax",     "/attn_down/attn2/MatMul_1",
            "/attn_down/attn2/Transpose",   "/attn_down/attn2/Reshape",
            "/attn_down/attn2/Transpose_2", "/attn_down/attn2/Reshape_1",
            "/attn_down/attn2/Transpose_1", "/attn_down/attn2/Reshape_2",
            "/attn_down/attn2/Transpose_3", "/attn_down/attn2/Reshape_3",
        };
        for (size_t i = 0; i < sizeof want / sizeof *want; i++)
            cr_expect(has_origin(n, want[i]), "origin '%s' missing", want[i]);
        /* cross-attention: keys from the 77-token context */
        const struct cp_tensor *keys = cp_graph_tensor(g, n->inputs[1]);
        cr_expect_eq(keys->shape.dims[1].value, 77);
    }
    cr_expect(seen, "no node /attn_down/attn2/FusedAttention");
    cp_graph_free(g);
}

/* ---- small graphs ------------------------------------------------------------- */

/* Attention on 4-D inputs: q [1,2,N,8], kt [1,2,8,M] (or k [1,2,M,8]),
 * v [1,2,M,8]; optional scale node and mask; Softmax axis. */
struct small {
    int64_t n, m;
    const char *scale_op; /* "Mul", "Div" or NULL */
    bool mask;
    bool k_plain; /* K as [1,2,M,8] through Transpose(0,1,3,2) */
    int64_t softmax_axis;
    bool scores_output; /* the scores are also a graph output */
};

static struct cp_graph *build_small(const struct small *s)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "q", CP_DTYPE_F32, 4, GB_DIMS(1, 2, s->n, 8));
    if (s->k_plain) {
        gb_input(g, "k", CP_DTYPE_F32, 4, GB_DIMS(1, 2, s->m, 8));
        int32_t t = gb_node(g, "kT", "Transpose", GB_IN("k"), GB_IN("kt"));
        cp_node_set_ints(g, t, "perm", GB_DIMS(0, 1, 3, 2), 4);
    } else {
        gb_input(g, "kt", CP_DTYPE_F32, 4, GB_DIMS(1, 2, 8, s->m));
    }
    gb_input(g, "v", CP_DTYPE_F32, 4, GB_DIMS(1, 2, s->m, 8));
    gb_node(g, "qk", "MatMul", GB_IN("q", "kt"), GB_IN("s0"));
    const char *cur = "s0";
    if (s->scale_op) {
        float c = strcmp(s->scale_op, "Div") == 0 ? 2.8284271f : 0.35355339f;
        gb_init(g, "c", CP_DTYPE_F32, 0, NULL, &c);
        gb_node(g, "scale", s->scale_op, GB_IN(cur, "c"), GB_IN("s1"));
        cur = "s1";
    }
    if (s->mask) {
        gb_input(g, "mask", CP_DTYPE_F32, 4, GB_DIMS(1, 1, s->n, s->m));
        gb_node(g, "addmask", "Add", GB_IN("mask", cur), GB_IN("s2"));
        cur = "s2";
    }
    int32_t sm = gb_node(g, "softmax", "Softmax", GB_IN(cur), GB_IN("p"));
    cp_node_set_int(g, sm, "axis", s->softmax_axis);
    gb_node(g, "pv", "MatMul", GB_IN("p", "v"), GB_IN("y"));
    cp_graph_add_output(g, cp_graph_find_tensor(g, "y"));
    if (s->scores_output)
        cp_graph_add_output(g, cp_graph_find_tensor(g, cur));
    prepare(g);
    return g;
}

/* Fuse (or not), then compare with the unfused graph on random inputs. */
static void check_small(const struct small *s, bool want_fused)
{
    struct cp_graph *g = build_small(s);
    bool changed = run_pass(g);
    cr_assert_eq(changed, want_fused, "the pass %s the graph", changed ? "changed" : "left");
    cr_assert_eq(count_op(g, CP_OP_FUSED_ATTENTION), want_fused ? 1u : 0u);
    struct outputs want_o, got;
    run_graph(build_small(s), NULL, &want_o);
    /* the runtime takes the graph over: read the node before running it */
    const struct cp_node *n = nth_op(g, CP_OP_FUSED_ATTENTION, 0);
    char kf[8] = "";
    if (n)
        snprintf(kf, sizeof kf, "%s", cp_node_attr_string(n, "k_format", ""));
    float scale = n ? cp_node_attr_float(n, "scale", 0) : 0;
    bool has_mask = n && n->n_inputs == 4;
    run_graph(g, NULL, &got);
    double e = max_err(&got, &want_o);
    cr_expect_leq(e, 1e-5, "fused output is %.3g from the unfused graph", e);
    outputs_release(&want_o);
    outputs_release(&got);
    if (want_fused) {
        cr_expect_str_eq(kf, s->k_plain ? "BHND" : "BHDN");
        float want_scale = !s->scale_op                      ? 1.0f
                           : strcmp(s->scale_op, "Div") == 0 ? 1.0f / 2.8284271f
                                                             : 0.35355339f;
        cr_expect_float_eq(scale, want_scale, 1e-6);
        cr_expect_eq(has_mask, s->mask);
    }
}

Test(pass_attention, a_masked_attention_with_a_div_scale_is_fused)
{
    struct small s = {.n = 40, .m = 50, .scale_op = "Div", .mask = true, .softmax_axis = -1};
    check_small(&s, true);
}

Test(pass_attention, k_transposed_by_its_own_transpose_reads_k_as_bhnd)
{
    struct small s = {.n = 33, .m = 33, .scale_op = "Mul", .k_plain = true, .softmax_axis = 3};
    check_small(&s, true);
}

Test(pass_attention, attention_without_a_scale_is_fused_with_scale_1)
{
    struct small s = {.n = 16, .m = 20, .softmax_axis = -1};
    check_small(&s, true);
}

Test(pass_attention, softmax_over_another_axis_is_left_alone)
{
    struct small s = {.n = 16, .m = 16, .scale_op = "Mul", .softmax_axis = 2};
    check_small(&s, false);
}

Test(pass_attention, scores_that_are_a_graph_output_are_left_alone)
{
    struct small s = {
        .n = 16, .m = 16, .scale_op = "Mul", .softmax_axis = -1, .scores_output = true};
    check_small(&s, false);
}

Test(pass_attention, a_head_split_read_elsewhere_is_kept_and_only_the_core_fused)
{
    /* sd-like Q head split whose Transpose output is also read by a Relu:
     * the Transpose must stay, so Q is its 4-D output (BHND). */
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(1, 24, 32));
    gb_input(g, "kt", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 8, 24));
    gb_input(g, "v", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 24, 8));
    gb_ints(g, "split", 4, GB_DIMS(1, 24, 4, 8));
    gb_node(g, "reshape", "Reshape", GB_IN("x", "split"), GB_IN("xr"));
    int32_t t = gb_node(g, "transpose", "Transpose", GB_IN("xr"), GB_IN("q"));
    cp_node_set_ints(g, t, "perm", GB_DIMS(0, 2, 1, 3), 4);
    gb_node(g, "side", "Relu", GB_IN("q"), GB_IN("side_out"));
    gb_node(g, "qk", "MatMul", GB_IN("q", "kt"), GB_IN("s"));
    gb_node(g, "softmax", "Softmax", GB_IN("s"), GB_IN("p"));
    gb_node(g, "pv", "MatMul", GB_IN("p", "v"), GB_IN("y"));
    cp_graph_add_output(g, cp_graph_find_tensor(g, "y"));
    cp_graph_add_output(g, cp_graph_find_tensor(g, "side_out"));
    prepare(g);
    cr_assert(run_pass(g));
    const struct cp_node *n = nth_op(g, CP_OP_FUSED_ATTENTION, 0);
    cr_assert_not_null(n);
    cr_expect_str_eq(cp_node_attr_string(n, "q_format", ""), "BHND");
    cr_expect_eq(n->inputs[0], cp_graph_find_tensor(g, "q"));
    cr_expect_eq(count_op(g, CP_OP_TRANSPOSE), 1u);
    cr_expect_eq(count_op(g, CP_OP_RESHAPE), 1u);
    cp_graph_free(g);
}

Test(pass_attention, a_score_tensor_read_twice_is_left_alone)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "q", CP_DTYPE_F32, 4, GB_DIMS(1, 2, 8, 8));
    gb_input(g, "kt", CP_DTYPE_F32, 4, GB_DIMS(1, 2, 8, 8));
    gb_input(g, "v", CP_DTYPE_F32, 4, GB_DIMS(1, 2, 8, 8));
    gb_node(g, "qk", "MatMul", GB_IN("q", "kt"), GB_IN("s"));
    gb_node(g, "softmax", "Softmax", GB_IN("s"), GB_IN("p"));
    gb_node(g, "pv", "MatMul", GB_IN("p", "v"), GB_IN("y"));
    gb_node(g, "other", "Relu", GB_IN("s"), GB_IN("z"));
    cp_graph_add_output(g, cp_graph_find_tensor(g, "y"));
    cp_graph_add_output(g, cp_graph_find_tensor(g, "z"));
    prepare(g);
    cr_expect_not(run_pass(g));
    cp_graph_free(g);
}

Test(pass_attention, a_fused_matmul_with_transb_and_alpha_is_matched)
{
    /* what a transpose-folding pass could make of MatMul(q, Transpose(k)) */
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "q", CP_DTYPE_F32, 4, GB_DIMS(1, 3, 20, 16));
    gb_input(g, "k", CP_DTYPE_F32, 4, GB_DIMS(1, 3, 30, 16));
    gb_input(g, "v", CP_DTYPE_F32, 4, GB_DIMS(1, 3, 30, 16));
    int32_t in[2] = {cp_graph_find_tensor(g, "q"), cp_graph_find_tensor(g, "k")};
    int32_t s = gb_tensor(g, "s", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    const char *origin = "qk";
    int32_t idx;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(
        cp_graph_add_node(g, "qk", "FusedMatMul", CP_DOMAIN, in, 2, &s, 1, &origin, 1, &idx, &d),
        CP_OK, "%s", d.msg);
    cp_node_set_int(g, idx, "transB", 1);
    cp_node_set_float(g, idx, "alpha", 0.25f);
    gb_node(g, "softmax", "Softmax", GB_IN("s"), GB_IN("p"));
    gb_node(g, "pv", "MatMul", GB_IN("p", "v"), GB_IN("y"));
    cp_graph_add_output(g, cp_graph_find_tensor(g, "y"));
    prepare(g);
    cr_assert(run_pass(g));
    const struct cp_node *n = nth_op(g, CP_OP_FUSED_ATTENTION, 0);
    cr_assert_not_null(n);
    cr_expect_str_eq(cp_node_attr_string(n, "k_format", ""), "BHND");
    cr_expect_float_eq(cp_node_attr_float(n, "scale", 0), 0.25f, 1e-7);
    cp_graph_free(g);
}

/* q * 0.5 and k / 2, head-split after the scaling, and a mask computed by
 * a Mul of its own. */
static struct cp_graph *build_prescaled(void)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(1, 24, 32));
    gb_input(g, "c", CP_DTYPE_F32, 3, GB_DIMS(1, 24, 32));
    gb_input(g, "v", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 24, 8));
    gb_input(g, "keep", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 24, 24));
    float half = 0.5f, two = 2.0f, big = -30.0f;
    gb_init(g, "half", CP_DTYPE_F32, 0, NULL, &half);
    gb_init(g, "two", CP_DTYPE_F32, 1, GB_DIMS(1), &two);
    gb_init(g, "big", CP_DTYPE_F32, 0, NULL, &big);
    gb_ints(g, "split", 4, GB_DIMS(1, 24, 4, 8));
    gb_node(g, "qs", "Mul", GB_IN("half", "x"), GB_IN("xs"));
    gb_node(g, "q_reshape", "Reshape", GB_IN("xs", "split"), GB_IN("xr"));
    int32_t t = gb_node(g, "q_transpose", "Transpose", GB_IN("xr"), GB_IN("q"));
    cp_node_set_ints(g, t, "perm", GB_DIMS(0, 2, 1, 3), 4);
    gb_node(g, "k_reshape", "Reshape", GB_IN("c", "split"), GB_IN("cr"));
    t = gb_node(g, "k_transpose", "Transpose", GB_IN("cr"), GB_IN("kt0"));
    cp_node_set_ints(g, t, "perm", GB_DIMS(0, 2, 3, 1), 4);
    gb_node(g, "ks", "Div", GB_IN("kt0", "two"), GB_IN("kt"));
    gb_node(g, "mask", "Mul", GB_IN("keep", "big"), GB_IN("m"));
    gb_node(g, "qk", "MatMul", GB_IN("q", "kt"), GB_IN("s"));
    gb_node(g, "addmask", "Add", GB_IN("m", "s"), GB_IN("sm_in"));
    gb_node(g, "softmax", "Softmax", GB_IN("sm_in"), GB_IN("p"));
    gb_node(g, "pv", "MatMul", GB_IN("p", "v"), GB_IN("y"));
    cp_graph_add_output(g, cp_graph_find_tensor(g, "y"));
    prepare(g);
    return g;
}

Test(pass_attention, a_scale_applied_to_q_and_k_before_the_matmul_joins_the_scale)
{
    struct cp_graph *g = build_prescaled();
    cr_assert(run_pass(g));
    const struct cp_node *n = nth_op(g, CP_OP_FUSED_ATTENTION, 0);
    cr_assert_not_null(n);
    cr_expect_str_eq(cp_node_attr_string(n, "q_format", ""), "BNHD");
    cr_expect_str_eq(cp_node_attr_string(n, "k_format", ""), "BNHD");
    cr_expect_float_eq(cp_node_attr_float(n, "scale", 0), 0.25f, 1e-7);
    cr_expect_eq(n->inputs[0], cp_graph_find_tensor(g, "x"));
    cr_expect_eq(n->inputs[1], cp_graph_find_tensor(g, "c"));
    cr_expect_eq(n->inputs[3], cp_graph_find_tensor(g, "m"));
    cr_expect_eq(count_op(g, CP_OP_MUL), 1u, "the mask's Mul stays");
    cr_expect_eq(count_op(g, CP_OP_DIV), 0u);
    struct outputs want_o, got;
    run_graph(build_prescaled(), NULL, &want_o);
    run_graph(g, NULL, &got);
    double e = max_err(&got, &want_o);
    cr_expect_leq(e, 1e-5, "fused output is %.3g from the unfused graph", e);
    outputs_release(&want_o);
    outputs_release(&got);
}
