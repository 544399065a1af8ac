/* The conv and matmul kernels (runner/cpu/dnnl_conv.c, dnnl_matmul.c) in
 * the two modes the main harness does not cover:
 *
 *  - compute_precision "bf16": the result is within 1e-2 relative L2 error
 *    of the f32 reference, and really differs from the f32 kernel's (so the
 *    knob changes what runs); the f32 -> bf16 conversion of their sources
 *    writes the bits oneDNN's reorder writes;
 *  - tensors tagged NHWC, nChw16c or nChw8c by the layout pass: the conv
 *    and GroupNorm kernels read and write those layouts (inputs are converted to the tag, the
 *    output converted back) and matches the reference on plain data.
 */
#include "runner/cpu/kernel.h"

#include "core/host.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_kernels.h"
#include "runner/cpu/layout.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D(...) GB_DIMS(__VA_ARGS__)
#define I(...) GB_IN(__VA_ARGS__)

struct env {
    struct cp_kernel_env k;
};

static void env_init(struct env *e)
{
    cr_assert_eq(dnnl_engine_create(&e->k.engine, dnnl_cpu, 0), dnnl_success);
    cr_assert_eq(dnnl_stream_create(&e->k.stream, e->k.engine, dnnl_stream_default_flags),
                 dnnl_success);
    e->k.threads = 2;
    omp_set_num_threads(2);
}

static void env_release(struct env *e)
{
    dnnl_stream_destroy(e->k.stream);
    dnnl_engine_destroy(e->k.engine);
}

static void fill(float *v, int64_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = -1.0f + 2.0f * (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

static void input(struct cp_graph *g, const char *name, int rank, const int64_t *dims)
{
    gb_input(g, name, CP_DTYPE_F32, rank, dims);
}

static void weight(struct cp_graph *g, const char *name, int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    float *v = malloc((size_t)n * sizeof *v);
    fill(v, n, (uint64_t)name[0] * 7 + (uint64_t)n);
    gb_init(g, name, CP_DTYPE_F32, rank, dims, v);
    free(v);
}

static int32_t node(struct cp_graph *g, const char *op, const char *domain, const char *const *ins,
                    const char *const *outs)
{
    if (!domain[0])
        return gb_node(g, "n", op, ins, outs);
    int32_t in[8], out[1], idx;
    size_t ni = 0;
    for (; ins[ni]; ni++)
        in[ni] = ins[ni][0] ? cp_graph_find_tensor(g, ins[ni]) : -1;
    out[0] = gb_tensor(g, outs[0], CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    const char *origin = "n";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, "n", op, domain, in, ni, out, 1, &origin, 1, &idx, &d), CP_OK,
                 "%s", d.msg);
    return idx;
}

static size_t bytes_of(const struct cp_tensor *t)
{
    return (size_t)cp_shape_numel(&t->shape) * cp_dtype_size(t->dtype);
}

/* Run kernel k on the graph's only node; graph inputs get seeded data
 * given in plain NCHW and are converted to their tensor's layout first;
 * the output is converted back to plain. OUT: a malloc'ed plain output. */
static float *run_node(const struct cp_kernel *k, const struct cp_graph *g, const struct env *e)
{
    const struct cp_node *n = cp_graph_node(g, 0);
    cr_assert(k->supports(g, n), "%s declines the node", k->name);
    const struct cp_tensor *ins[8] = {NULL}, *outs[1];
    void *in_data[8] = {NULL}, *owned[8] = {NULL}, *out_data[1];
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] < 0)
            continue;
        const struct cp_tensor *t = cp_graph_tensor(g, n->inputs[i]);
        ins[i] = t;
        if (t->kind == CP_TENSOR_INITIALIZER) {
            in_data[i] = (void *)t->data;
            continue;
        }
        float *plain = malloc(bytes_of(t));
        fill(plain, cp_shape_numel(&t->shape), 100 + i);
        owned[i] = in_data[i] = malloc(bytes_of(t));
        if (cp_tensor_is_plain(t)) {
            memcpy(in_data[i], plain, bytes_of(t));
        } else {
            int64_t dims[4];
            for (int j = 0; j < 4; j++)
                dims[j] = t->shape.dims[j].value;
            cp_layout_convert(in_data[i], t->layout, plain, CP_LAYOUT_NCHW, dims, 4);
        }
        free(plain);
    }
    outs[0] = cp_graph_tensor(g, n->outputs[0]);
    out_data[0] = malloc(bytes_of(outs[0]));
    struct cp_kexec x = {.kernel = k,
                         .g = g,
                         .node = n,
                         .env = &e->k,
                         .in = ins,
                         .out = outs,
                         .in_data = in_data,
                         .out_data = out_data};
    struct cp_diag d;
    cp_diag_init(&d);
    if (k->prepare)
        cr_assert_eq(k->prepare(&x, &d), CP_OK, "%s: %s", k->name, d.msg);
    void *scratch = NULL;
    if (x.scratch_bytes) {
        cr_assert_eq(posix_memalign(&scratch, 64, (x.scratch_bytes + 63) / 64 * 64), 0);
        x.scratch = scratch;
    }
    cr_assert_eq(k->run(&x), CP_OK, "%s: run failed", k->name);
    if (k->release)
        k->release(&x);
    free(scratch);
    for (size_t i = 0; i < 8; i++)
        free(owned[i]);
    float *plain = malloc(bytes_of(outs[0]));
    if (cp_tensor_is_plain(outs[0])) {
        memcpy(plain, out_data[0], bytes_of(outs[0]));
    } else {
        int64_t dims[4];
        for (int j = 0; j < 4; j++)
            dims[j] = outs[0]->shape.dims[j].value;
        cp_layout_convert(plain, CP_LAYOUT_NCHW, out_data[0], outs[0]->layout, dims, 4);
    }
    free(out_data[0]);
    return plain;
}

static double rel_l2(const float *got, const float *want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = (double)got[i] - (double)want[i];
        num += e * e;
        den += (double)want[i] * (double)want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The fast kernel the registry picks for the graph's node on this CPU. */
static const struct cp_kernel *fast_kernel(const struct cp_graph *g)
{
    struct cp_host host;
    cp_host_detect(&host);
    const struct cp_kernel *k = cp_kernel_select(g, cp_graph_node(g, 0), &host, false, NULL);
    cr_assert_not_null(k);
    cr_assert_str_neq(k->name, "ref", "no fast kernel takes the node");
    return k;
}

/* ---- bf16 ------------------------------------------------------------------- */

typedef void (*build_fn)(struct cp_graph *g);

static void b_conv(struct cp_graph *g)
{
    input(g, "x", 4, D(1, 32, 14, 14));
    weight(g, "w", 4, D(64, 32, 3, 3));
    weight(g, "b", 1, D(64));
    int32_t n = node(g, "Conv", "", I("x", "w", "b"), I("y"));
    cp_node_set_ints(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
}
static void b_fused_conv(struct cp_graph *g)
{
    input(g, "x", 4, D(1, 16, 12, 12));
    weight(g, "w", 4, D(32, 16, 3, 3));
    weight(g, "b", 1, D(32));
    input(g, "r", 4, D(1, 32, 12, 12));
    int32_t n = node(g, "FusedConv", CP_DOMAIN, I("x", "w", "b", "r"), I("y"));
    cp_node_set_ints(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    cp_node_set_string(g, n, "activation", "SiLU");
    cp_node_set_int(g, n, "residual_first", 1);
}
static void b_matmul(struct cp_graph *g)
{
    input(g, "a", 3, D(1, 64, 96));
    weight(g, "w", 2, D(96, 80));
    node(g, "MatMul", "", I("a", "w"), I("y"));
}
static void b_matmul_runtime(struct cp_graph *g)
{
    input(g, "a", 4, D(1, 2, 40, 32));
    input(g, "w", 4, D(1, 2, 32, 40));
    node(g, "MatMul", "", I("a", "w"), I("y"));
}
static void b_fused_matmul(struct cp_graph *g)
{
    input(g, "a", 2, D(48, 64));
    weight(g, "w", 2, D(72, 64));
    weight(g, "b", 1, D(72));
    input(g, "r", 2, D(48, 72));
    int32_t n = node(g, "FusedMatMul", CP_DOMAIN, I("a", "w", "b", "r"), I("y"));
    cp_node_set_int(g, n, "transB", 1);
    cp_node_set_string(g, n, "activation", "Gelu");
}

/* One bf16 case; false (with what this CPU lacks in `missing`) when the
 * host cannot run the kernel's bf16 path, after checking that the registry
 * passes the kernel over rather than pick it (the plan then refuses the
 * node: test_plan_isa.c). */
static bool check_bf16(const char *name, build_fn build, char *missing, size_t cap)
{
    struct env e;
    env_init(&e);
    struct cp_graph *g = gb_graph(17);
    build(g);
    gb_infer_ok(g);
    const struct cp_node *node = cp_graph_node(g, 0);
    const struct cp_kernel *fast = fast_kernel(g);
    cr_assert_eq(cp_node_set_string(g, 0, "compute_precision", "bf16"), CP_OK);
    struct cp_host host;
    cp_host_detect(&host);
    if (!cp_kernel_runs_on(fast, g, node, &host, missing, cap)) {
        struct cp_kernel_passed passed;
        const struct cp_kernel *k = cp_kernel_select(g, node, &host, false, &passed);
        cr_expect_neq(k, fast, "%s: %s picked on a CPU that lacks %s", name, fast->name, missing);
        cr_expect_eq(passed.kernel, fast, "%s: %s not reported as passed over", name, fast->name);
        cp_graph_free(g);
        env_release(&e);
        return false;
    }
    cr_assert_eq(fast_kernel(g), fast, "%s: bf16 changes the kernel choice", name);
    cr_assert_eq(cp_node_set_string(g, 0, "compute_precision", "fp32"), CP_OK);
    float *ref = run_node(cp_kernel_reference(node->op), g, &e);
    float *f32 = run_node(fast, g, &e);
    cr_assert_eq(cp_node_set_string(g, 0, "compute_precision", "bf16"), CP_OK);
    float *bf = run_node(fast, g, &e);
    int64_t n = cp_shape_numel(&cp_graph_tensor(g, cp_graph_node(g, 0)->outputs[0])->shape);
    double e32 = rel_l2(f32, ref, n), e16 = rel_l2(bf, ref, n);
    cr_log_info("%s (%s): f32 rel L2 %.3g, bf16 rel L2 %.3g", name, fast->name, e32, e16);
    cr_expect_leq(e32, 1e-5, "%s: f32 kernel off by %.3g", name, e32);
    cr_expect_leq(e16, 1e-2, "%s: bf16 kernel off by %.3g", name, e16);
    cr_expect_gt(e16, 1e-5, "%s: the bf16 result equals f32's: bf16 did not run", name);
    free(ref);
    free(f32);
    free(bf);
    cp_graph_free(g);
    env_release(&e);
    return true;
}

/* The flat f32 -> bf16 step the bf16 conv and matmul programs use for
 * their source (cp_dk_step_to_bf16) writes the same bits as oneDNN's
 * reorder: rounding to nearest even (ties both ways), infinities, NaN,
 * subnormals, and lengths that end inside a vector. */
Test(kernel_harness_fusion, bf16_conversion_step_writes_what_the_onednn_reorder_writes)
{
    static const int64_t lens[] = {1, 15, 33, 1000, 70001};
    struct cp_host host;
    cp_host_detect(&host);
    /* the flat loop needs vcvtne2ps2bf16; without it the step is the
     * reorder itself and the comparison below says nothing */
    bool flat = cp_host_has_flag(&host, "avx512f") && cp_host_has_flag(&host, "avx512bw") &&
                cp_host_has_flag(&host, "avx512vl") && cp_host_has_flag(&host, "avx512_bf16");
    struct env e;
    env_init(&e);
    for (size_t t = 0; t < sizeof lens / sizeof *lens; t++) {
        int64_t n = lens[t];
        float *x = malloc((size_t)n * sizeof *x);
        uint16_t *mine = malloc((size_t)n * 2), *theirs = malloc((size_t)n * 2);
        cr_assert(x && mine && theirs);
        fill(x, n, 40 + t);
        static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7f800000u, 0xff800000u,
                                           0x7fc00001u, 0x00000001u, 0x80400000u, 0x7f7fffffu,
                                           0x3f807fffu, 0xbf808001u};
        for (size_t i = 0; i < sizeof special / sizeof *special && (int64_t)i < n; i++)
            memcpy(&x[(int64_t)(i * 7919) % n], &special[i], 4);
        for (int way = 0; way < 2; way++) {
            struct cp_dk_prog p;
            cp_dk_prog_init(&p, &e.k);
            dnnl_memory_desc_t f, b;
            dnnl_dims_t dims = {n};
            cr_assert_eq(dnnl_memory_desc_init_by_tag(&f, 1, dims, dnnl_f32, dnnl_a), dnnl_success);
            cr_assert_eq(dnnl_memory_desc_init_by_tag(&b, 1, dims, dnnl_bf16, dnnl_a),
                         dnnl_success);
            int src = cp_dk_mem_user(&p, &f, x), dst = cp_dk_mem_user(&p, &b, way ? theirs : mine);
            cr_assert_eq(way ? cp_dk_step_reorder(&p, src, dst) : cp_dk_step_to_bf16(&p, src, dst),
                         CP_OK);
            if (!way && flat)
                cr_expect_null(p.steps[0].prim, "the conversion went to a oneDNN reorder");
            else if (!way)
                cr_expect_not_null(p.steps[0].prim, "without AVX512_BF16 the step is a reorder");
            cr_assert_eq(cp_dk_prog_run(&p, NULL), CP_OK);
            cp_dk_prog_release(&p);
        }
        for (int64_t i = 0; i < n; i++)
            cr_expect_eq(mine[i], theirs[i], "n = %lld, element %lld (%a): 0x%04x, oneDNN 0x%04x",
                         (long long)n, (long long)i, (double)x[i], mine[i], theirs[i]);
        free(x);
        free(mine);
        free(theirs);
    }
    env_release(&e);
    if (!flat)
        cr_skip_test("this CPU (%s) lacks AVX512_BF16: the conversion step is oneDNN's reorder "
                     "here, so there is no flat loop to compare",
                     host.cpu_model);
}

Test(kernel_harness_fusion, bf16_conv_and_matmul_stay_within_1e_2_of_f32)
{
    static const struct {
        const char *name;
        build_fn build;
    } cases[] = {{"Conv", b_conv},
                 {"FusedConv", b_fused_conv},
                 {"MatMul", b_matmul},
                 {"MatMul runtime B", b_matmul_runtime},
                 {"FusedMatMul", b_fused_matmul}};
    char skipped[256] = "", missing[96] = "";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (!check_bf16(cases[i].name, cases[i].build, missing, sizeof missing))
            snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "%s%s",
                     skipped[0] ? ", " : "", cases[i].name);
    if (skipped[0]) {
        struct cp_host host;
        cp_host_detect(&host);
        cr_skip_test("this CPU (%s) lacks %s, which oneDNN 2.6's bf16 primitives need: %s not "
                     "run (the registry passes their kernels over)",
                     host.cpu_model, missing, skipped);
    }
}

/* ---- layouts ------------------------------------------------------------------- */

/* Tag every non-weight tensor of the node (inputs and output) `l`, except
 * input 0 which gets `lx`. */
static void tag(struct cp_graph *g, enum cp_layout lx, enum cp_layout l)
{
    const struct cp_node *n = cp_graph_node(g, 0);
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] < 0)
            continue;
        struct cp_tensor *t = cp_graph_tensor(g, n->inputs[i]);
        if (t->kind != CP_TENSOR_INITIALIZER)
            t->layout = i == 0 ? lx : l;
    }
    cp_graph_tensor(g, n->outputs[0])->layout = l;
}

static void l_conv(struct cp_graph *g)
{
    input(g, "x", 4, D(2, 16, 9, 11));
    weight(g, "w", 4, D(32, 16, 3, 3));
    weight(g, "b", 1, D(32));
    int32_t n = node(g, "Conv", "", I("x", "w", "b"), I("y"));
    cp_node_set_ints(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    cp_node_set_ints(g, n, "strides", (const int64_t[]){2, 1}, 2);
}
static void l_stem(struct cp_graph *g)
{
    input(g, "x", 4, D(1, 3, 20, 20));
    weight(g, "w", 4, D(16, 3, 3, 3));
    int32_t n = node(g, "Conv", "", I("x", "w"), I("y"));
    cp_node_set_ints(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
}
static void l_fused(struct cp_graph *g)
{
    input(g, "x", 4, D(1, 16, 10, 10));
    weight(g, "w", 4, D(16, 16, 3, 3));
    weight(g, "b", 1, D(16));
    input(g, "r", 4, D(1, 16, 10, 10));
    int32_t n = node(g, "FusedConv", CP_DOMAIN, I("x", "w", "b", "r"), I("y"));
    cp_node_set_ints(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    cp_node_set_string(g, n, "activation", "Relu");
}

static void l_gn(struct cp_graph *g)
{
    input(g, "x", 4, D(2, 32, 7, 9));
    weight(g, "s", 1, D(32));
    weight(g, "b", 1, D(32));
    int32_t n = node(g, "GroupNormalization", CP_DOMAIN, I("x", "s", "b"), I("y"));
    cp_node_set_int(g, n, "num_groups", 4);
    cp_node_set_string(g, n, "activation", "SiLU");
}
static void l_gn_wide_groups(struct cp_graph *g)
{
    input(g, "x", 4, D(1, 64, 5, 6));
    weight(g, "s", 1, D(64));
    weight(g, "b", 1, D(64));
    int32_t n = node(g, "GroupNormalization", CP_DOMAIN, I("x", "s", "b"), I("y"));
    cp_node_set_int(g, n, "num_groups", 2);
}

/* More pixels than the slab path sums in one float run (fast_groupnorm.c),
 * 8-channel groups that share a 16-channel block, and three 16-lane
 * blocks per NHWC pixel. */
static void l_gn_many_pixels(struct cp_graph *g)
{
    input(g, "x", 4, D(1, 48, 24, 20));
    weight(g, "s", 1, D(48));
    weight(g, "b", 1, D(48));
    int32_t n = node(g, "GroupNormalization", CP_DOMAIN, I("x", "s", "b"), I("y"));
    cp_node_set_int(g, n, "num_groups", 6);
    cp_node_set_string(g, n, "activation", "SiLU");
}

static void check_layout(const char *name, build_fn build, enum cp_layout lx, enum cp_layout l)
{
    struct env e;
    env_init(&e);
    struct cp_graph *g = gb_graph(17);
    build(g);
    gb_infer_ok(g);
    float *ref = run_node(cp_kernel_reference(cp_graph_node(g, 0)->op), g, &e);
    tag(g, lx, l);
    const struct cp_kernel *fast = fast_kernel(g);
    float *got = run_node(fast, g, &e);
    /* The reference itself, on the re-laid-out tensors, through the layout
     * adapter. */
    float *ref_tagged = run_node(cp_kernel_reference(cp_graph_node(g, 0)->op), g, &e);
    int64_t n = cp_shape_numel(&cp_graph_tensor(g, cp_graph_node(g, 0)->outputs[0])->shape);
    double err = rel_l2(got, ref, n);
    cr_expect_leq(rel_l2(ref_tagged, ref, n), 1e-7, "%s: the reference differs in %s -> %s", name,
                  cp_layout_name(lx), cp_layout_name(l));
    free(ref_tagged);
    cr_log_info("%s %s -> %s (%s): rel L2 %.3g", name, cp_layout_name(lx), cp_layout_name(l),
                fast->name, err);
    cr_expect_leq(err, 1e-5, "%s in %s -> %s: rel L2 %.3g", name, cp_layout_name(lx),
                  cp_layout_name(l), err);
    free(ref);
    free(got);
    cp_graph_free(g);
    env_release(&e);
}

Test(kernel_harness_fusion, conv_and_groupnorm_kernels_read_and_write_the_tensors_layouts)
{
    static const enum cp_layout ls[] = {CP_LAYOUT_NCHW, CP_LAYOUT_NHWC, CP_LAYOUT_NCHW8C,
                                        CP_LAYOUT_NCHW16C};
    for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) {
        check_layout("Conv", l_conv, ls[i], ls[i]);
        check_layout("FusedConv", l_fused, ls[i], ls[i]);
        check_layout("stem Conv", l_stem, CP_LAYOUT_NCHW, ls[i]);
        check_layout("GroupNorm", l_gn, ls[i], ls[i]);
        check_layout("GroupNorm 32-channel groups", l_gn_wide_groups, ls[i], ls[i]);
        check_layout("GroupNorm 480 pixels", l_gn_many_pixels, ls[i], ls[i]);
    }
    /* Layouts meeting inside one conv: plain in, blocked out, and back. */
    check_layout("Conv", l_conv, CP_LAYOUT_NCHW, CP_LAYOUT_NCHW16C);
    check_layout("Conv", l_conv, CP_LAYOUT_NCHW16C, CP_LAYOUT_NHWC);
}

Test(kernel_harness_fusion, a_conv_in_a_layout_it_cannot_hold_goes_to_the_reference)
{
    struct cp_graph *g = gb_graph(17);
    l_stem(g);
    gb_infer_ok(g);
    tag(g, CP_LAYOUT_NCHW16C, CP_LAYOUT_NCHW); /* 3 channels do not fill a block */
    cr_expect_not(cp_dnnl_conv.supports(g, cp_graph_node(g, 0)));
    cp_graph_free(g);
}
