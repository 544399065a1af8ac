/* Dynamic batch end to end: every example model converts with
 * --dynamic_batch_size "1,2,4" (the batch pass generalising what the export
 * hard-coded), and at batch 2 and 4 each batch item of every output equals
 * the batch-1 output for the same input; batch 1 still matches the
 * unconverted model. A batch outside the profiles is refused, by the library
 * naming the profiles and by `run`/`bench` with exit code 2. The bf16 case
 * needs bf16 arithmetic; without it the conversion's refusal is checked. */
#include "atc_bridge/convert.h"
#include "support/cli.h"
#include "support/examples.h"
#include "support/host.h"
#include "support/onnx_model.h"
#include "support/run.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(dynamic_batch, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

/* "a:-1,4,32,32;b:-1" from the model's declared inputs. */
static void dynamic_input_shape(const char *model, char *out, size_t cap)
{
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_onnx_import(model, NULL, 0, &g, NULL, &d), CP_OK, "%s", d.msg);
    size_t pos = 0;
    out[0] = '\0';
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, cp_graph_input(g, i));
        pos += (size_t)snprintf(out + pos, cap - pos, "%s%s:", i ? ";" : "", t->name);
        for (int k = 0; k < t->shape.rank; k++)
            pos += (size_t)snprintf(out + pos, cap - pos, "%s%lld", k ? "," : "",
                                    k == 0 ? -1LL : (long long)t->shape.dims[k].value);
        cr_assert_lt(pos, cap);
    }
    cp_graph_free(g);
}

static char *convert_dynamic_knob(const char *name, const char *batches, const char *knob,
                                  const char *value)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    snprintf(c.model, sizeof c.model, "%s/examples/models/%s.onnx", CP_SOURCE_DIR, name);
    snprintf(c.output, sizeof c.output, "%s/%s_dyn", cp_t_dir, name);
    char shapes[1024];
    dynamic_input_shape(c.model, shapes, sizeof shapes);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, "input_shape", shapes, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_convert_config_set(&c, "dynamic_batch_size", batches, &d), CP_OK, "%s", d.msg);
    if (knob)
        cr_assert_eq(cp_convert_config_set(&c, knob, value, &d), CP_OK, "%s", d.msg);
    struct cp_convert_result res;
    cr_assert_eq(cp_convert(&c, &res, &d), CP_OK, "%s with --input_shape=%s: %s", name, shapes,
                 d.msg);
    return strdup(res.om_path);
}

/* convert_dynamic_knob on a CPU that cannot run `value`, a bf16 precision
 * mode: refused with exit code 2 and the bf16 refusal, and no .om left. */
static void expect_bf16_refused(const char *name, const char *value)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    snprintf(c.model, sizeof c.model, "%s/examples/models/%s.onnx", CP_SOURCE_DIR, name);
    snprintf(c.output, sizeof c.output, "%s/%s_dyn", cp_t_dir, name);
    char shapes[1024];
    dynamic_input_shape(c.model, shapes, sizeof shapes);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, "input_shape", shapes, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_convert_config_set(&c, "dynamic_batch_size", "1,2,4", &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_convert_config_set(&c, "precision_mode", value, &d), CP_OK, "%s", d.msg);
    struct cp_convert_result res;
    enum cp_status st = cp_convert(&c, &res, &d);
    cr_assert_eq(st, CP_ERR_UNSUPPORTED, "status %d: %s", (int)st, d.msg);
    cr_assert_eq(cp_status_exit_code(st), 2);
    cr_assert(cp_t_is_bf16_refusal(d.msg, value), "%s", d.msg);
    char om[1100];
    snprintf(om, sizeof om, "%s.om", c.output);
    cr_assert_not(cp_path_exists(om), "a refused conversion left %s", om);
}

static char *convert_dynamic(const char *name, const char *batches)
{
    return convert_dynamic_knob(name, batches, NULL, NULL);
}

/* Item b of an output of batch `batch`, against the batch-1 output. */
static double item_rel_l2(const struct cp_host_tensor *one, const struct cp_host_tensor *many,
                          int64_t b)
{
    int64_t n = cp_host_tensor_numel(one);
    const float *x = one->data, *y = (const float *)many->data + b * n;
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        den += (double)x[i] * x[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Convert `name` with profiles 1,2,4 (and `knob` = `value` when given);
 * batch 1 must match the unconverted model within `ref_bound`, and every
 * item at batch 2 and 4 the batch-1 output within 1e-5. */
static void check_model_knob(const char *name, const char *knob, const char *value,
                             double ref_bound)
{
    char *om = convert_dynamic_knob(name, "1,2,4", knob, value);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_runtime_options ro = {.threads = 1};
    struct cp_runtime *rt = NULL;
    cr_assert_eq(cp_runtime_create(&ro, &rt, &d), CP_OK, "%s", d.msg);
    struct cp_model *m = NULL, *ref = NULL;
    cr_assert_eq(cp_model_load(rt, om, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_ex_open_onnx(rt, name, &ref, &d), CP_OK, "%s", d.msg);
    struct cp_ex_io in, want, one;
    cr_assert_eq(cp_ex_read_inputs(name, &in, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_ex_run(ref, 0, &in, &want, &d), CP_OK, "%s: %s", name, d.msg);
    cr_assert_eq(cp_ex_run(m, 1, &in, &one, &d), CP_OK, "%s batch 1: %s", name, d.msg);
    double rel;
    cr_assert_eq(cp_ex_rel_l2(&want, &one, &rel, &d), CP_OK, "%s", d.msg);
    cr_assert_leq(rel, ref_bound, "%s batch 1: relative L2 %g against the unconverted model", name,
                  rel);
    const int64_t batches[] = {2, 4};
    for (size_t k = 0; k < 2; k++) {
        int64_t B = batches[k];
        struct cp_ex_io inb, outb;
        cr_assert_eq(cp_ex_repeat_batch(&in, B, &inb, &d), CP_OK, "%s", d.msg);
        cr_assert_eq(cp_ex_run(m, B, &inb, &outb, &d), CP_OK, "%s batch %lld: %s", name,
                     (long long)B, d.msg);
        cr_assert_eq(outb.n, one.n);
        for (size_t o = 0; o < one.n; o++) {
            const struct cp_host_tensor *t1 = &one.t[o], *tb = &outb.t[o];
            cr_assert_eq(tb->rank, t1->rank);
            cr_assert_eq(tb->dims[0], B, "%s output '%s' at batch %lld has dim 0 = %lld", name,
                         tb->name, (long long)B, (long long)tb->dims[0]);
            cr_assert_eq(cp_host_tensor_numel(tb), B * cp_host_tensor_numel(t1));
            for (int64_t b = 0; b < B; b++) {
                double e = item_rel_l2(t1, tb, b);
                cr_assert_leq(e, 1e-5,
                              "%s output '%s', batch %lld item %lld: relative L2 %g against "
                              "batch 1",
                              name, tb->name, (long long)B, (long long)b, e);
            }
        }
        cp_ex_io_release(&inb);
        cp_ex_io_release(&outb);
    }
    /* A batch outside the profiles. */
    struct cp_plan_options po = {.batch = 3, .buffer_optimize = -1};
    struct cp_plan *p = NULL;
    cr_assert_eq(cp_plan_create(m, &po, &p, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "1,2,4"), "lists the profiles: %s", d.msg);
    cp_ex_io_release(&in);
    cp_ex_io_release(&want);
    cp_ex_io_release(&one);
    cp_model_free(m);
    cp_model_free(ref);
    cp_runtime_free(rt);
    free(om);
}

static void check_model(const char *name)
{
    check_model_knob(name, NULL, NULL, 1e-4);
}

Test(dynamic_batch, sd_unet_tiny_items_match_batch_1)
{
    check_model("sd_unet_tiny");
}

Test(dynamic_batch, resnet_tiny_items_match_batch_1)
{
    check_model("resnet_tiny");
}

Test(dynamic_batch, transformer_encoder_op14_items_match_batch_1)
{
    check_model("transformer_encoder_op14");
}

Test(dynamic_batch, transformer_encoder_op17_items_match_batch_1)
{
    check_model("transformer_encoder_op17");
}

Test(dynamic_batch, nhwc_roundtrip_items_match_batch_1)
{
    check_model("nhwc_roundtrip");
}

Test(dynamic_batch, sd_unet_tiny_items_match_batch_1_in_every_layout)
{
    check_model_knob("sd_unet_tiny", "layout_policy", "nhwc", 1e-4);
    check_model_knob("sd_unet_tiny", "layout_policy", "blocked", 1e-4);
}

Test(dynamic_batch, sd_unet_tiny_items_match_batch_1_in_bf16)
{
    char cpu[256];
    if (!cp_t_host_has_bf16(cpu, sizeof cpu)) {
        expect_bf16_refused("sd_unet_tiny", "allow_mix_precision_bf16");
        cr_skip_test("this CPU (%s) has neither avx512_bf16 nor amx_bf16: bf16 batch items not "
                     "checked; the conversion is refused with exit code 2, as it should be",
                     cpu);
    }
    check_model_knob("sd_unet_tiny", "precision_mode", "allow_mix_precision_bf16", 1e-2);
}

Test(dynamic_batch, nhwc_roundtrip_items_match_batch_1_in_every_layout)
{
    check_model_knob("nhwc_roundtrip", "layout_policy", "nhwc", 1e-4);
    check_model_knob("nhwc_roundtrip", "layout_policy", "blocked", 1e-4);
}

Test(dynamic_batch, run_and_bench_refuse_a_batch_outside_the_profiles_with_exit_2)
{
    char *om = convert_dynamic("resnet_tiny", "1,2,4");
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--batch", "4", NULL);
    cr_assert_eq(r.exit_code, 0, "run --batch 4: exit %d; %s", r.exit_code, r.err);
    cr_assert(strstr(r.out, "4x10"), "output at batch 4: %s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "run", om, "--batch", "3", NULL);
    cr_assert_eq(r.exit_code, 2, "run --batch 3: exit %d; %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "batch 3") && strstr(r.err, "1,2,4"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "bench", om, "--batch", "8", "--iterations", "1", "--warmup", "0", NULL);
    cr_assert_eq(r.exit_code, 2, "bench --batch 8: exit %d; %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "batch 8"), "%s", r.err);
    cp_run_release(&r);
    free(om);
}

/* x [2,4] + bias [2,4] -> y, exported at batch 2: the constant bias ties
 * the model to batch 2 (batch 1 broadcasts, 4 cannot). Written with
 * protobuf-c to <scratch>/tied.onnx. */
static char *write_tied_model(void)
{
    struct cp_t_onnx_value x, y;
    cp_t_onnx_value_init(&x, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, 4);
    cp_t_onnx_value_init(&y, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, 4);
    float bias[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t bdims[2] = {2, 4};
    Onnx__TensorProto b = ONNX__TENSOR_PROTO__INIT;
    b.name = (char *)"bias";
    b.has_data_type = 1;
    b.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    b.n_dims = 2;
    b.dims = bdims;
    b.has_raw_data = 1;
    b.raw_data.len = sizeof bias;
    b.raw_data.data = (uint8_t *)bias;
    char *node_in[] = {(char *)"x", (char *)"bias"}, *node_out[] = {(char *)"y"};
    Onnx__NodeProto add = ONNX__NODE_PROTO__INIT;
    add.name = (char *)"add_bias";
    add.op_type = (char *)"Add";
    add.n_input = 2;
    add.input = node_in;
    add.n_output = 1;
    add.output = node_out;
    Onnx__NodeProto *nodes[] = {&add};
    Onnx__TensorProto *inits[] = {&b};
    Onnx__ValueInfoProto *ins[] = {&x.info}, *outs[] = {&y.info};
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = (char *)"tied";
    graph.n_node = 1;
    graph.node = nodes;
    graph.n_initializer = 1;
    graph.initializer = inits;
    graph.n_input = 1;
    graph.input = ins;
    graph.n_output = 1;
    graph.output = outs;
    size_t len = 0;
    uint8_t *buf = cp_t_onnx_pack(&graph, NULL, &len);
    cr_assert_not_null(buf);
    char path[1200];
    snprintf(path, sizeof path, "%s/tied.onnx", cp_t_dir);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_write_atomic(path, buf, len, &d), CP_OK, "%s", d.msg);
    free(buf);
    return strdup(path);
}

Test(dynamic_batch, convert_refuses_a_model_that_cannot_take_a_profile_naming_the_node)
{
    char *model = write_tied_model();
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    snprintf(c.model, sizeof c.model, "%s", model);
    snprintf(c.output, sizeof c.output, "%s/tied", cp_t_dir);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, "input_shape", "x:-1,4", &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_convert_config_set(&c, "dynamic_batch_size", "2,4", &d), CP_OK, "%s", d.msg);
    enum cp_status st = cp_convert(&c, NULL, &d);
    cr_assert_neq(st, CP_OK, "a model tied to batch 2 converted with profile 4");
    cr_assert(strstr(d.msg, "'add_bias'") && strstr(d.msg, "batch 4"),
              "names the node and the batch: %s", d.msg);
    char om[1200];
    snprintf(om, sizeof om, "%s/tied.om", cp_t_dir);
    cr_assert(!cp_path_exists(om), "no .om is left behind");
    /* Batches it can take are fine (1 broadcasts against the bias). */
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, "dynamic_batch_size", "1,2", &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_convert(&c, NULL, &d), CP_OK, "%s", d.msg);
    free(model);
}
