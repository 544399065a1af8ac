/* Plans: building from hand-made graphs and from .om files, concrete
 * shapes (input shapes, batch, profiles), running and checking numbers,
 * input and output copies, errors that name what is wrong, memory figures
 * and the trace a plan leaves. */
#include "runner/cpu/kernel.h"
#include "runner/runner.h"
#include "support/run.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------- */

static struct cp_runtime *runtime(int threads, struct cp_trace_recorder *tr)
{
    struct cp_runtime_options o = {.threads = threads, .trace = tr};
    struct cp_runtime *rt;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_runtime_create(&o, &rt, &d), CP_OK, "%s", d.msg);
    return rt;
}

static struct cp_model *model_of(struct cp_runtime *rt, struct cp_graph *g,
                                 const struct cp_om_meta *meta)
{
    struct cp_model *m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_model_from_graph(rt, g, meta, &m, &d), CP_OK, "%s", d.msg);
    return m;
}

static struct cp_plan_options options(void)
{
    return (struct cp_plan_options){.buffer_optimize = -1};
}

static struct cp_plan *plan_ok(struct cp_model *m, const struct cp_plan_options *o)
{
    struct cp_plan *p;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_create(m, o, &p, &d), CP_OK, "%s", d.msg);
    return p;
}

/* The error cp_plan_create gives, into msg[1024]. */
static enum cp_status plan_fails(struct cp_model *m, const struct cp_plan_options *o, char *msg)
{
    struct cp_plan *p = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_plan_create(m, o, &p, &d);
    cr_assert_neq(st, CP_OK, "the plan was expected to fail");
    cr_assert_null(p);
    memcpy(msg, d.msg, sizeof d.msg);
    return st;
}

static struct cp_host_tensor host_f32(const char *name, int rank, const int64_t *dims,
                                      const float *v)
{
    struct cp_host_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.dtype = CP_DTYPE_F32;
    t.rank = rank;
    int64_t n = 1;
    for (int k = 0; k < rank; k++)
        n *= t.dims[k] = dims[k];
    t.nbytes = (size_t)n * sizeof(float);
    t.data = malloc(t.nbytes ? t.nbytes : 1);
    cr_assert_not_null(t.data);
    if (v)
        memcpy(t.data, v, t.nbytes);
    else
        for (int64_t i = 0; i < n; i++)
            ((float *)t.data)[i] = (float)(i % 7) - 3.0f;
    return t;
}

static void set_input(struct cp_plan *p, size_t i, struct cp_host_tensor *t)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_set_input(p, i, t, &d), CP_OK, "%s", d.msg);
    cp_host_tensor_release(t);
}

static void run_ok(struct cp_plan *p, int32_t iteration)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_run(p, iteration, &d), CP_OK, "%s", d.msg);
}

static void expect_output(struct cp_plan *p, size_t i, int rank, const int64_t *dims,
                          const float *want)
{
    struct cp_host_tensor t;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_get_output(p, i, &t, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(t.dtype, CP_DTYPE_F32);
    cr_assert_eq(t.rank, rank);
    int64_t n = 1;
    for (int k = 0; k < rank; k++) {
        cr_assert_eq(t.dims[k], dims[k], "output %zu dim %d", i, k);
        n *= dims[k];
    }
    cr_assert_eq(t.nbytes, (size_t)n * sizeof(float));
    for (int64_t k = 0; k < n; k++)
        cr_assert_float_eq(((float *)t.data)[k], want[k], 1e-5f, "output %zu [%lld]: %g vs %g", i,
                           (long long)k, ((float *)t.data)[k], want[k]);
    cp_host_tensor_release(&t);
}

static bool contains(const char *msg, const char *part)
{
    return strstr(msg, part) != NULL;
}

/* y = Relu(x @ W + b), x 2x3, W 3x4, b 4. */
static struct cp_graph *mlp(void)
{
    struct cp_graph *g = gb_graph(17);
    cp_graph_set_name(g, "mlp");
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(2, 3));
    static const float w[] = {1, 0, -1, 2, 0, 1, 1, -1, 2, -1, 0, 1};
    static const float b[] = {0.5f, -0.5f, 1, -10};
    gb_init(g, "W", CP_DTYPE_F32, 2, GB_DIMS(3, 4), w);
    gb_init(g, "b", CP_DTYPE_F32, 1, GB_DIMS(4), b);
    gb_node(g, "mm", "MatMul", GB_IN("x", "W"), GB_IN("xw"));
    gb_node(g, "add", "Add", GB_IN("xw", "b"), GB_IN("s"));
    gb_node(g, "relu", "Relu", GB_IN("s"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    return g;
}

static const float mlp_x[] = {1, 2, 3, -1, -2, -3};
static const float mlp_y[] = {7.5f, 0, 2, 0, 0, 0.5f, 0, 0};

/* x [dims] -> Relu -> Relu -> y, x optionally with a symbolic dim 0. */
static struct cp_graph *relu2(int rank, const int64_t *dims, const char *sym0)
{
    struct cp_graph *g = gb_graph(17);
    const char *syms[CP_MAX_RANK] = {sym0};
    gb_input_sym(g, "x", CP_DTYPE_F32, rank, dims, syms);
    gb_node(g, "r1", "Relu", GB_IN("x"), GB_IN("a"));
    gb_node(g, "r2", "Relu", GB_IN("a"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    return g;
}

/* ---- running ---------------------------------------------------------------- */

static void check_mlp(bool reference_only)
{
    struct cp_runtime *rt = runtime(2, NULL);
    struct cp_model *m = model_of(rt, mlp(), NULL);
    struct cp_plan_options o = options();
    o.reference_only = reference_only;
    struct cp_plan *p = plan_ok(m, &o);
    cr_assert_eq(cp_plan_n_inputs(p), 1);
    cr_assert_eq(cp_plan_n_outputs(p), 1);
    cr_assert_eq(cp_plan_n_kernels(p), 3);
    struct cp_host_tensor x = host_f32("x", 2, GB_DIMS(2, 3), mlp_x);
    set_input(p, 0, &x);
    run_ok(p, -1);
    expect_output(p, 0, 2, GB_DIMS(2, 4), mlp_y);
    if (reference_only)
        for (size_t i = 0; i < cp_plan_n_kernels(p); i++)
            cr_assert_str_eq(cp_plan_kernels(p)[i].impl, "ref");
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_matmul_add_relu_matches_hand_computed_values_with_reference_kernels)
{
    check_mlp(true);
}

Test(plan, test_matmul_add_relu_matches_hand_computed_values_with_fast_kernels)
{
    check_mlp(false);
}

Test(plan, test_a_plan_runs_again_on_the_same_inputs)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = model_of(rt, mlp(), NULL);
    struct cp_plan *p = plan_ok(m, NULL);
    struct cp_host_tensor x = host_f32("x", 2, GB_DIMS(2, 3), mlp_x);
    set_input(p, 0, &x);
    for (int i = 0; i < 3; i++) {
        run_ok(p, i);
        expect_output(p, 0, 2, GB_DIMS(2, 4), mlp_y);
    }
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_two_plans_of_one_model_are_independent)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = model_of(rt, relu2(2, GB_DIMS(-1, 4), "batch"), NULL);
    struct cp_plan_options o = options();
    o.batch = 1;
    struct cp_plan *p1 = plan_ok(m, &o);
    o.batch = 3;
    struct cp_plan *p3 = plan_ok(m, &o);
    cr_assert_eq(cp_plan_input(p1, 0)->shape.dims[0].value, 1);
    cr_assert_eq(cp_plan_input(p3, 0)->shape.dims[0].value, 3);
    cr_assert_lt(cp_graph_tensor(cp_model_graph(m), 0)->shape.dims[0].value, 0,
                 "the model's own graph keeps its dynamic dimension");
    struct cp_host_tensor x = host_f32("x", 2, GB_DIMS(3, 4), NULL);
    set_input(p3, 0, &x);
    run_ok(p3, -1);
    cp_plan_free(p1);
    cp_plan_free(p3);
    cp_model_free(m);
    cp_runtime_free(rt);
}

/* ---- inputs and outputs ---------------------------------------------------------- */

Test(plan, test_input_shape_mismatch_names_the_input_and_both_shapes)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "sample", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 32, 32));
    gb_node(g, "r", "Relu", GB_IN("sample"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_model *m = model_of(rt, g, NULL);
    struct cp_plan *p = plan_ok(m, NULL);
    struct cp_host_tensor x = host_f32("sample", 4, GB_DIMS(1, 4, 64, 64), NULL);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_set_input(p, 0, &x, &d), CP_ERR_INVALID);
    cr_assert_str_eq(d.msg, "input 'sample': shape 1x4x64x64 does not match the model's 1x4x32x32");
    cp_host_tensor_release(&x);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_input_dtype_mismatch_names_the_input)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = model_of(rt, mlp(), NULL);
    struct cp_plan *p = plan_ok(m, NULL);
    struct cp_host_tensor x = host_f32("x", 2, GB_DIMS(2, 3), mlp_x);
    x.dtype = CP_DTYPE_I32;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_set_input(p, 0, &x, &d), CP_ERR_INVALID);
    cr_assert_str_eq(d.msg, "input 'x': dtype i32 does not match the model's f32");
    cp_host_tensor_release(&x);
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_set_input(p, 1, &x, &d), CP_ERR_INVALID);
    cr_assert(contains(d.msg, "input 1 does not exist"), "%s", d.msg);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_outputs_that_alias_inputs_or_weights_are_copied_out)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_floats(g, "w", 4, (const float[]){1, 2, 3, 4});
    gb_node(g, "id", "Identity", GB_IN("x"), GB_IN("y"));
    gb_node(g, "add", "Add", GB_IN("x", "w"), GB_IN("z"));
    int32_t outs[] = {cp_graph_find_tensor(g, "y"), cp_graph_find_tensor(g, "w"),
                      cp_graph_find_tensor(g, "z"), cp_graph_find_tensor(g, "z"),
                      cp_graph_find_tensor(g, "x")};
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(cp_graph_add_output(g, outs[i]), CP_OK);
    struct cp_model *m = model_of(rt, g, NULL);
    struct cp_plan *p = plan_ok(m, NULL);
    cr_assert_eq(cp_plan_n_kernels(p), 1, "Identity is a view");
    struct cp_host_tensor x = host_f32("x", 1, GB_DIMS(4), (const float[]){10, 20, 30, 40});
    set_input(p, 0, &x);
    run_ok(p, -1);
    expect_output(p, 0, 1, GB_DIMS(4), (const float[]){10, 20, 30, 40});
    expect_output(p, 1, 1, GB_DIMS(4), (const float[]){1, 2, 3, 4});
    expect_output(p, 2, 1, GB_DIMS(4), (const float[]){11, 22, 33, 44});
    expect_output(p, 3, 1, GB_DIMS(4), (const float[]){11, 22, 33, 44});
    expect_output(p, 4, 1, GB_DIMS(4), (const float[]){10, 20, 30, 40});
    struct cp_host_tensor t;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_get_output(p, 5, &t, &d), CP_ERR_INVALID);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_reshape_and_flatten_run_no_kernel)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(2, 3));
    gb_ints(g, "shape", 3, GB_DIMS(3, 2, 1));
    gb_node(g, "r0", "Relu", GB_IN("x"), GB_IN("a"));
    gb_node(g, "rs", "Reshape", GB_IN("a", "shape"), GB_IN("v"));
    gb_node(g, "fl", "Flatten", GB_IN("v"), GB_IN("f"));
    gb_node(g, "neg", "Sub", GB_IN("f", "f"), GB_IN("zero"));
    gb_node(g, "add", "Add", GB_IN("f", "zero"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_model *m = model_of(rt, g, NULL);
    struct cp_plan *p = plan_ok(m, NULL);
    cr_assert_eq(cp_plan_n_kernels(p), 3);
    struct cp_host_tensor x = host_f32("x", 2, GB_DIMS(2, 3), (const float[]){1, -2, 3, -4, 5, -6});
    set_input(p, 0, &x);
    run_ok(p, -1);
    expect_output(p, 0, 2, GB_DIMS(3, 2), (const float[]){1, 0, 3, 0, 5, 0});
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_dropout_whose_mask_is_read_runs_its_kernel)
{
    if (!cp_kernel_reference(CP_OP_DROPOUT))
        cr_skip_test("no reference Dropout kernel yet");
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(3));
    gb_node(g, "drop", "Dropout", GB_IN("x"), GB_IN("y", "mask"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "mask")), CP_OK);
    struct cp_model *m = model_of(rt, g, NULL);
    struct cp_plan *p = plan_ok(m, NULL);
    cr_assert_eq(cp_plan_n_kernels(p), 1);
    struct cp_host_tensor x = host_f32("x", 1, GB_DIMS(3), (const float[]){1, 2, 3});
    set_input(p, 0, &x);
    run_ok(p, -1);
    expect_output(p, 0, 1, GB_DIMS(3), (const float[]){1, 2, 3});
    struct cp_host_tensor mask;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_get_output(p, 1, &mask, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(mask.dtype, CP_DTYPE_BOOL);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(((uint8_t *)mask.data)[i], 1, "inference keeps every element");
    cp_host_tensor_release(&mask);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_dropout_in_training_mode_is_refused_naming_the_node)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(3));
    gb_input(g, "training", CP_DTYPE_BOOL, 0, NULL);
    gb_floats(g, "ratio", 1, (const float[]){0.5f});
    gb_node(g, "drop", "Dropout", GB_IN("x", "", "training"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_model *m = model_of(rt, g, NULL);
    char msg[1024];
    struct cp_plan_options o = options();
    cr_assert_eq(plan_fails(m, &o, msg), CP_ERR_UNSUPPORTED);
    cr_assert(contains(msg, "'drop' (Dropout)"), "%s", msg);
    cp_model_free(m);
    cp_runtime_free(rt);
}

/* ---- shapes ---------------------------------------------------------------------- */

Test(plan, test_a_dynamic_input_without_a_shape_is_named)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = model_of(rt, relu2(2, GB_DIMS(-1, 4), "batch"), NULL);
    char msg[1024];
    struct cp_plan_options o = options();
    cr_assert_eq(plan_fails(m, &o, msg), CP_ERR_INVALID);
    cr_assert(contains(msg, "input 'x'") && contains(msg, "batchx4") &&
                  contains(msg, "--input_shape x:1,4"),
              "%s", msg);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_input_shape_option_makes_a_dynamic_input_concrete)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = model_of(rt, relu2(2, GB_DIMS(-1, 4), "batch"), NULL);
    struct cp_input_shape is = {.name = "x", .rank = 2, .dims = {3, -1}};
    struct cp_plan_options o = options();
    o.input_shapes = &is;
    o.n_input_shapes = 1;
    struct cp_plan *p = plan_ok(m, &o);
    char s[64];
    cp_shape_format(&cp_plan_input(p, 0)->shape, s, sizeof s);
    cr_assert_str_eq(s, "3x4");
    cp_shape_format(&cp_plan_output(p, 0)->shape, s, sizeof s);
    cr_assert_str_eq(s, "3x4");
    struct cp_host_tensor x = host_f32("x", 2, GB_DIMS(3, 4), NULL);
    set_input(p, 0, &x);
    run_ok(p, -1);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_a_shape_only_the_model_declares_survives_planning)
{
    /* y = x[starts:ends]: with starts and ends fed at run time, inference
     * cannot know y's length; the model declares it (value_info). */
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(6));
    gb_input(g, "starts", CP_DTYPE_I64, 1, GB_DIMS(1));
    gb_input(g, "ends", CP_DTYPE_I64, 1, GB_DIMS(1));
    gb_node(g, "slice", "Slice", GB_IN("x", "starts", "ends"), GB_IN("y"));
    struct cp_tensor *y = cp_graph_tensor(g, cp_graph_find_tensor(g, "y"));
    y->dtype = CP_DTYPE_F32;
    cp_shape_set(&y->shape, 1, GB_DIMS(2));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_model *m = model_of(rt, g, NULL);
    struct cp_plan *p = plan_ok(m, NULL);
    cr_assert_eq(cp_plan_output(p, 0)->shape.dims[0].value, 2);
    struct cp_host_tensor x = host_f32("x", 1, GB_DIMS(6), (const float[]){0, 1, 2, 3, 4, 5});
    set_input(p, 0, &x);
    int64_t v[2] = {1, 3};
    for (size_t i = 0; i < 2; i++) {
        struct cp_host_tensor t = {.dtype = CP_DTYPE_I64, .rank = 1, .dims = {1}, .nbytes = 8};
        t.data = malloc(8);
        cr_assert_not_null(t.data);
        memcpy(t.data, &v[i], 8);
        set_input(p, 1 + i, &t);
    }
    run_ok(p, -1);
    expect_output(p, 0, 1, GB_DIMS(2), (const float[]){1, 2});
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_input_shape_for_an_unknown_input_lists_the_inputs)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = model_of(rt, mlp(), NULL);
    struct cp_input_shape is = {.name = "sample", .rank = 2, .dims = {2, 3}};
    struct cp_plan_options o = options();
    o.input_shapes = &is;
    o.n_input_shapes = 1;
    char msg[1024];
    cr_assert_eq(plan_fails(m, &o, msg), CP_ERR_INVALID);
    cr_assert(contains(msg, "'sample'") && contains(msg, "inputs are: x"), "%s", msg);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_input_shape_with_the_wrong_rank_is_refused)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = model_of(rt, mlp(), NULL);
    struct cp_input_shape is = {.name = "x", .rank = 3, .dims = {1, 2, 3}};
    struct cp_plan_options o = options();
    o.input_shapes = &is;
    o.n_input_shapes = 1;
    char msg[1024];
    cr_assert_eq(plan_fails(m, &o, msg), CP_ERR_INVALID);
    cr_assert(contains(msg, "'x'") && contains(msg, "3 dimensions") && contains(msg, "2x3"), "%s",
              msg);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_batch_overrides_dim0_of_a_static_model)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = model_of(rt, relu2(2, GB_DIMS(1, 4), NULL), NULL);
    struct cp_plan_options o = options();
    o.batch = 4;
    struct cp_plan *p = plan_ok(m, &o);
    cr_assert_eq(cp_plan_input(p, 0)->shape.dims[0].value, 4);
    cr_assert_eq(cp_plan_output(p, 0)->shape.dims[0].value, 4);
    struct cp_host_tensor x = host_f32("x", 2, GB_DIMS(4, 4), NULL);
    set_input(p, 0, &x);
    run_ok(p, -1);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_batch_on_a_model_that_fixes_it_names_the_node)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(1, 8));
    gb_ints(g, "shape", 3, GB_DIMS(1, 2, 4));
    gb_node(g, "fixed_reshape", "Reshape", GB_IN("x", "shape"), GB_IN("v"));
    gb_node(g, "r", "Relu", GB_IN("v"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_model *m = model_of(rt, g, NULL);
    struct cp_plan_options o = options();
    o.batch = 4;
    char msg[1024];
    cr_assert_eq(plan_fails(m, &o, msg), CP_ERR_INVALID);
    cr_assert(contains(msg, "'fixed_reshape'") && contains(msg, "x=4x8"), "%s", msg);
    cp_model_free(m);
    cp_runtime_free(rt);
}

static struct cp_model *profiled_model(struct cp_runtime *rt)
{
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.format_version = CP_OM_FORMAT_VERSION;
    meta.tool_version = (char *)CP_VERSION_STRING;
    meta.target = (char *)"cpu";
    cp_convert_config_init(&meta.config);
    int64_t profiles[] = {1, 2, 4, 8};
    memcpy(meta.config.dynamic_batch, profiles, sizeof profiles);
    meta.config.n_dynamic_batch = 4;
    struct cp_graph *g = gb_graph(17);
    const char *syms[] = {"batch", NULL};
    gb_input_sym(g, "x", CP_DTYPE_F32, 2, GB_DIMS(-1, 4), syms);
    gb_input(g, "bias", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_node(g, "add", "Add", GB_IN("x", "bias"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    return model_of(rt, g, &meta);
}

Test(plan, test_batch_must_be_one_of_the_profiles)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = profiled_model(rt);
    cr_assert_eq(cp_model_meta(m)->config.n_dynamic_batch, 4);
    struct cp_plan_options o = options();
    o.batch = 3;
    char msg[1024];
    cr_assert_eq(plan_fails(m, &o, msg), CP_ERR_INVALID);
    cr_assert(contains(msg, "batch 3 is not one of the .om's dynamic batch profiles: 1,2,4,8"),
              "%s", msg);
    o.batch = 8;
    struct cp_plan *p = plan_ok(m, &o);
    cr_assert_eq(cp_plan_input(p, 0)->shape.dims[0].value, 8);
    cr_assert_eq(cp_plan_input(p, 1)->shape.dims[0].value, 4,
                 "only inputs with a dynamic batch dimension take the profile");
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, test_without_a_batch_the_first_profile_is_used)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = profiled_model(rt);
    struct cp_plan *p = plan_ok(m, NULL);
    cr_assert_eq(cp_plan_input(p, 0)->shape.dims[0].value, 1);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

/* ---- loading ------------------------------------------------------------------------ */

Test(plan, test_unsupported_ops_at_load_name_every_node)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_graph *g = gb_graph(17);
    cp_graph_set_name(g, "odd");
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_node(g, "n1", "Foo", GB_IN("x"), GB_IN("a"));
    gb_node(g, "ok", "Relu", GB_IN("a"), GB_IN("b"));
    gb_node(g, "n2", "Bar", GB_IN("b"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_model *m = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_model_from_graph(rt, g, NULL, &m, &d), CP_ERR_UNSUPPORTED);
    cr_assert_null(m);
    cr_assert_str_eq(d.msg, "graph 'odd': no kernel for node 'n1' (Foo), 'n2' (Bar)");
    cp_runtime_free(rt);
}

static char *write_om(struct cp_graph *g, const char *dir)
{
    char *path = malloc(strlen(dir) + 16);
    cr_assert_not_null(path);
    sprintf(path, "%s/m.om", dir);
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.format_version = CP_OM_FORMAT_VERSION;
    meta.tool_version = (char *)CP_VERSION_STRING;
    meta.target = (char *)"cpu";
    cp_convert_config_init(&meta.config);
    meta.config.buffer_optimize = CP_BUF_OFF_OPTIMIZE;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write(path, g, &meta, &d), CP_OK, "%s", d.msg);
    return path;
}

Test(plan, test_a_model_loads_from_an_om_file_and_runs)
{
    char *dir = cp_scratch_dir();
    struct cp_graph *g = mlp();
    char *path = write_om(g, dir);
    cp_graph_free(g);
    struct cp_runtime *rt = runtime(2, NULL);
    struct cp_model *m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_model_load(rt, path, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_model_meta(m)->config.buffer_optimize, CP_BUF_OFF_OPTIMIZE);
    struct cp_plan *p = plan_ok(m, NULL);
    struct cp_mem_report r;
    cp_plan_memory(p, &r);
    /* x 24 + xw 32 + s 32 + y 32, each in its own 64 bytes: the .om's
     * off_optimize. */
    cr_assert_eq(r.arena_bytes, 4 * 64);
    cr_assert_eq(r.weight_bytes, (12 + 4) * sizeof(float));
    struct cp_host_tensor x = host_f32("x", 2, GB_DIMS(2, 3), mlp_x);
    set_input(p, 0, &x);
    run_ok(p, -1);
    expect_output(p, 0, 2, GB_DIMS(2, 4), mlp_y);
    cp_plan_free(p);
    struct cp_plan_options o = options();
    o.buffer_optimize = CP_BUF_L2_OPTIMIZE;
    p = plan_ok(m, &o);
    cp_plan_memory(p, &r);
    cr_assert_eq(r.arena_bytes, 3 * 64, "x, then two of xw, s, y at once");
    cr_assert_eq(r.peak_bytes, 3 * 64);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
    cp_scratch_remove(dir);
    free(path);
    free(dir);
}

Test(plan, test_loading_a_newer_om_says_so)
{
    char *dir = cp_scratch_dir();
    struct cp_graph *g = mlp();
    char *path = write_om(g, dir);
    cp_graph_free(g);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fseek(f, 4, SEEK_SET);
    fputc(9, f);
    fclose(f);
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_model_load(rt, path, &m, &d), CP_ERR_VERSION);
    cr_assert_null(m);
    cr_assert(contains(d.msg, "format version 9 is newer"), "%s", d.msg);
    cp_diag_init(&d);
    cr_assert_eq(cp_model_load(rt, "/nonexistent/x.om", &m, &d), CP_ERR_IO);
    cr_assert(contains(d.msg, "/nonexistent/x.om"), "%s", d.msg);
    cp_runtime_free(rt);
    cp_scratch_remove(dir);
    free(path);
    free(dir);
}

/* ---- runtime, memory, trace ------------------------------------------------------------ */

Test(plan, test_threads_default_to_the_online_cores)
{
    struct cp_runtime *rt = runtime(0, NULL);
    cr_assert_eq(cp_runtime_threads(rt), (int)sysconf(_SC_NPROCESSORS_ONLN));
    cr_assert_null(cp_runtime_trace(rt));
    cp_runtime_free(rt);
    rt = runtime(3, NULL);
    cr_assert_eq(cp_runtime_threads(rt), 3);
    cp_runtime_free(rt);
    cr_assert_gt(cp_peak_rss_bytes(), 0);
}

Test(plan, test_memory_report_with_and_without_reuse)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(1, 1024));
    gb_node(g, "n1", "Relu", GB_IN("x"), GB_IN("a"));
    gb_node(g, "n2", "Relu", GB_IN("a"), GB_IN("b"));
    gb_node(g, "n3", "Relu", GB_IN("b"), GB_IN("c"));
    gb_node(g, "n4", "Relu", GB_IN("c"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_model *m = model_of(rt, g, NULL);
    struct cp_plan_options o = options();
    o.buffer_optimize = CP_BUF_L2_OPTIMIZE;
    struct cp_plan *p = plan_ok(m, &o);
    struct cp_mem_report l2, off;
    cp_plan_memory(p, &l2);
    cp_plan_free(p);
    o.buffer_optimize = CP_BUF_OFF_OPTIMIZE;
    p = plan_ok(m, &o);
    cp_plan_memory(p, &off);
    struct cp_host_tensor x = host_f32("x", 2, GB_DIMS(1, 1024), NULL);
    set_input(p, 0, &x);
    run_ok(p, -1);
    cp_plan_free(p);
    cr_assert_eq(l2.arena_bytes, 3 * 4096);
    cr_assert_eq(off.arena_bytes, 5 * 4096);
    cr_assert_eq(l2.peak_bytes, 3 * 4096);
    cr_assert_eq(off.peak_bytes, 3 * 4096);
    cr_assert_eq(l2.weight_bytes, 0);
    o.buffer_optimize = 7;
    char msg[1024];
    cr_assert_eq(plan_fails(m, &o, msg), CP_ERR_INVALID);
    cr_assert(contains(msg, "off_optimize"), "%s", msg);
    cp_model_free(m);
    cp_runtime_free(rt);
}

static size_t count_events(const struct cp_trace_recorder *tr, enum cp_trace_layer layer,
                           const char *name)
{
    size_t n = 0;
    const struct cp_trace_event *e = cp_trace_events(tr);
    for (size_t i = 0; i < cp_trace_n_events(tr); i++)
        if (e[i].layer == layer && (!name || strcmp(cp_trace_string(tr, e[i].name), name) == 0))
            n++;
    return n;
}

Test(plan, test_a_traced_run_records_every_layer)
{
    struct cp_trace_recorder *tr = cp_trace_recorder_create(16);
    cr_assert_not_null(tr);
    struct cp_runtime *rt = runtime(1, tr);
    cr_assert_eq(cp_runtime_trace(rt), tr);
    struct cp_model *m = model_of(rt, mlp(), NULL);
    struct cp_plan *p = plan_ok(m, NULL);
    struct cp_host_tensor x = host_f32("x", 2, GB_DIMS(2, 3), mlp_x);
    set_input(p, 0, &x);
    run_ok(p, 7);
    struct cp_host_tensor y;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_plan_get_output(p, 0, &y, &d), CP_OK, "%s", d.msg);
    cp_host_tensor_release(&y);

    const char *runtime_events[] = {"load",       "plan",    "alloc",
                                    "input copy", "execute", "output copy"};
    for (size_t i = 0; i < 6; i++)
        cr_assert_geq(count_events(tr, CP_LAYER_RUNTIME, runtime_events[i]), 1, "no '%s' event",
                      runtime_events[i]);
    size_t nk = cp_plan_n_kernels(p);
    cr_assert_eq(count_events(tr, CP_LAYER_DEVICE, NULL), nk);
    const struct cp_trace_event *e = cp_trace_events(tr);
    for (size_t i = 0; i < cp_trace_n_events(tr); i++) {
        cr_assert_leq(e[i].start_ns, e[i].end_ns);
        if (e[i].layer != CP_LAYER_DEVICE)
            continue;
        cr_assert_eq(e[i].iteration, 7);
        cr_assert(e[i].kernel >= 0 && (size_t)e[i].kernel < nk);
        cr_assert_str_eq(cp_trace_string(tr, e[i].name), cp_plan_kernels(p)[e[i].kernel].node);
    }

    const struct cp_trace_kernel *k = cp_plan_kernels(p);
    cr_assert_str_eq(k[0].node, "mm");
    cr_assert_str_eq(k[0].op_type, "MatMul");
    cr_assert_not_null(k[0].impl);
    cr_assert_str_eq(k[0].origins, "[\"mm\"]");
    cr_assert_float_eq(k[0].flops, 2.0 * 2 * 3 * 4, 1e-9);
    json_error_t err;
    json_t *in = json_loads(k[0].inputs, 0, &err);
    cr_assert(json_is_array(in) && json_array_size(in) == 2, "%s", k[0].inputs);
    json_t *x0 = json_array_get(in, 0);
    cr_assert_str_eq(json_string_value(json_object_get(x0, "name")), "x");
    cr_assert_str_eq(json_string_value(json_object_get(x0, "dtype")), "f32");
    cr_assert_eq(json_array_size(json_object_get(x0, "shape")), 2);
    cr_assert_not_null(json_object_get(x0, "layout"));
    json_decref(in);
    json_t *out = json_loads(k[2].outputs, 0, &err);
    cr_assert(json_is_array(out) && json_array_size(out) == 1, "%s", k[2].outputs);
    json_decref(out);

    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
    cp_trace_recorder_free(tr);
}

/* ---- dynamic plans ------------------------------------------------------------------ */

/* y = x[x > 0]: NonZero's count, known only at run time, sizes y. */
static struct cp_graph *positives(int64_t n)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(n));
    gb_init(g, "zero", CP_DTYPE_F32, 0, NULL, (const float[]){0});
    gb_ints(g, "ax0", 1, GB_DIMS(0));
    gb_node(g, "gt", "Greater", GB_IN("x", "zero"), GB_IN("pos"));
    gb_node(g, "nz", "NonZero", GB_IN("pos"), GB_IN("where"));
    gb_node(g, "sq", "Squeeze", GB_IN("where", "ax0"), GB_IN("idx"));
    gb_node(g, "pick", "Gather", GB_IN("x", "idx"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    return g;
}

Test(plan, a_dynamic_plan_sizes_each_run_by_its_data)
{
    struct cp_runtime *rt = runtime(1, NULL);
    struct cp_model *m = model_of(rt, positives(6), NULL);
    struct cp_plan *p = plan_ok(m, NULL);
    cr_assert_lt(cp_plan_output(p, 0)->shape.dims[0].value, 0, "y's length is not known yet");
    static const float a[6] = {1, -2, 3, 0, 5, -1}, b[6] = {-1, 4, -1, -1, -1, -1};
    static const float c[6] = {6, 5, 4, 3, 2, 1};
    const float *in[3] = {a, b, c};
    static const float wa[3] = {1, 3, 5}, wb[1] = {4};
    const float *want[3] = {wa, wb, c};
    const int64_t len[3] = {3, 1, 6};
    for (int r = 0; r < 6; r++) { /* each input twice, the second time with kernels kept */
        struct cp_host_tensor x = host_f32("x", 1, GB_DIMS(6), in[r % 3]);
        set_input(p, 0, &x);
        run_ok(p, r);
        expect_output(p, 0, 1, &len[r % 3], want[r % 3]);
    }
    struct cp_mem_report mr;
    cp_plan_memory(p, &mr);
    cr_assert_gt(mr.arena_bytes, 0, "the buffers a dynamic plan holds are reported");
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

Test(plan, a_dynamic_plan_over_the_memory_limit_names_the_tensor)
{
    struct cp_runtime_options o = {.threads = 1, .max_plan_bytes = 4096};
    struct cp_runtime *rt;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_runtime_create(&o, &rt, &d), CP_OK, "%s", d.msg);
    struct cp_model *m = model_of(rt, positives(4096), NULL);
    struct cp_plan *p = NULL;
    enum cp_status st = cp_plan_create(m, NULL, &p, &d);
    if (st == CP_OK) { /* the input fits: the run's tensors do not */
        struct cp_host_tensor x = host_f32("x", 1, GB_DIMS(4096), NULL);
        cp_diag_init(&d);
        st = cp_plan_set_input(p, 0, &x, &d);
        cp_host_tensor_release(&x);
        if (st == CP_OK)
            st = cp_plan_run(p, -1, &d);
    }
    cr_assert_eq(st, CP_ERR_UNSUPPORTED, "status %d: %s", (int)st, d.msg);
    cr_assert(contains(d.msg, "dynamic plan's memory") && contains(d.msg, "limit"), "%s", d.msg);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}

/* oneDNN's gemm convolution, which plain NCHW gets, applies an eltwise
 * post-op in a slow pass of its own: a FusedConv there runs its bias in the
 * convolution and its activation as an in-place eltwise step, and the
 * kernel table names that form. The result is the fused node's. */
Test(plan, a_plain_fused_conv_runs_its_activation_as_a_separate_step_and_says_so)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 6, 6));
    float w[8 * 4], b[8], x[4 * 36], want[8 * 36];
    for (int i = 0; i < 8 * 4; i++)
        w[i] = (float)((i * 7) % 11 - 5) / 8.0f;
    for (int i = 0; i < 8; i++)
        b[i] = (float)(i - 4) / 16.0f;
    for (int i = 0; i < 4 * 36; i++)
        x[i] = (float)((i * 5) % 13 - 6) / 6.0f;
    for (int oc = 0; oc < 8; oc++)
        for (int px = 0; px < 36; px++) {
            float s = b[oc];
            for (int ic = 0; ic < 4; ic++)
                s += w[oc * 4 + ic] * x[ic * 36 + px];
            want[oc * 36 + px] = s < 0.0f ? 0.0f : (s > 0.5f ? 0.5f : s);
        }
    gb_init(g, "w", CP_DTYPE_F32, 4, GB_DIMS(8, 4, 1, 1), w);
    gb_init(g, "b", CP_DTYPE_F32, 1, GB_DIMS(8), b);
    int32_t n = gb_node_in(g, "fc", "FusedConv", CP_DOMAIN, GB_IN("x", "w", "b"), GB_IN("y"));
    cp_node_set_string(g, n, "activation", "Clip");
    cp_node_set_float(g, n, "activation_alpha", 0.0f);
    cp_node_set_float(g, n, "activation_beta", 0.5f);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_runtime *rt = runtime(2, NULL);
    struct cp_model *m = model_of(rt, g, NULL);
    struct cp_plan_options o = options();
    struct cp_plan *p = plan_ok(m, &o);
    cr_assert_eq(cp_plan_n_kernels(p), 1);
    cr_assert_str_eq(cp_plan_kernels(p)[0].impl, "onednn:fused_conv+eltwise");
    struct cp_host_tensor xt = host_f32("x", 4, GB_DIMS(1, 4, 6, 6), x);
    set_input(p, 0, &xt);
    run_ok(p, -1);
    expect_output(p, 0, 4, GB_DIMS(1, 8, 6, 6), want);
    cp_plan_free(p);
    cp_model_free(m);
    cp_runtime_free(rt);
}
