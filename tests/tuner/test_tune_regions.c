/* The tuner's per-region layout knob: layout_regions deltas (parse, apply,
 * clear, the delta between two points), and a replayed session on a model
 * of two conv regions (a channel Softmax, which no layout-aware kernel
 * runs, between them): a region made NHWC is replayed faster, and the
 * tuner finds it as a per-region step whose --layout_regions the report
 * reproduces. */
#include "support/calibration.h"
#include "support/cli.h"
#include "support/onnx_build.h"
#include "support/run.h"
#include "tuner/tuner.h"

#include "cli/cli_test.h"
#include "tuner/tune_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(tune_regions, layout_region_deltas_apply_clear_and_compare)
{
    struct cp_delta dl;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_delta_parse("layout_regions=b/conv:nchw;a/conv:nhwc", &dl, &d), CP_OK, "%s",
                 d.msg);
    struct cp_tune_point p, q, back;
    memset(&p, 0, sizeof p);
    cp_convert_config_init(&p.cfg);
    cr_assert_eq(cp_delta_apply(&p, &dl, &q, &d), CP_OK, "%s", d.msg);
    cr_expect_str_eq(q.cfg.layout_regions, "a/conv:nhwc\nb/conv:nchw");
    struct cp_delta between;
    cp_delta_between(&p, &q, &between);
    struct cp_buf b;
    cp_buf_init(&b);
    cp_delta_format(&between, &b);
    cr_expect_str_eq(b.data, "layout_regions=a/conv:nhwc;b/conv:nchw");
    cp_buf_release(&b);
    cr_assert_eq(cp_delta_parse("layout_regions=-", &dl, &d), CP_OK);
    cr_assert_eq(cp_delta_apply(&q, &dl, &back, &d), CP_OK, "%s", d.msg);
    cr_expect_str_eq(back.cfg.layout_regions, "");
    char k1[48], k2[48];
    cp_tune_point_key(&p, k1);
    cp_tune_point_key(&back, k2);
    cr_expect_str_eq(k1, k2);
    cr_assert_eq(cp_delta_parse("layout_regions=a:fast", &dl, &d), CP_OK);
    cr_expect_eq(cp_delta_apply(&p, &dl, &q, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "not a region layout"), "%s", d.msg);
}

TestSuite(tune_regions_session, .init = cp_t_scratch_calibrated_setup, .fini = cp_t_scratch_close,
          .timeout = 600);

/* A machine on which a region made NHWC saves a fifth, and nothing else
 * changes anything. */
static double nhwc_region_faster(const struct cp_tune_point *p)
{
    return strstr(p->cfg.layout_regions, ":nhwc") ? 0.8e6 : 1e6;
}

static enum cp_status replay(void *ctx, const struct cp_tune_ab_request *q,
                             struct cp_measurement *out, struct cp_diag *d)
{
    (void)ctx;
    (void)d;
    return tt_replay(q, out, nhwc_region_faster);
}

/* x -> Conv -> Relu -> Softmax(axis 1) -> Conv -> Relu -> y, 16 channels
 * at 16x16: two conv regions. */
static char *two_regions_model(void)
{
    struct cp_t_onnx *m = cp_t_onnx_new(17);
    int64_t x[4] = {1, 16, 16, 16}, w[4] = {16, 16, 3, 3};
    float *wv = malloc(16 * 16 * 9 * sizeof *wv);
    cr_assert_not_null(wv);
    for (int i = 0; i < 16 * 16 * 9; i++)
        wv[i] = (float)((i * 37 % 101) - 50) / 500.0f;
    cp_t_onnx_input(m, "x", CP_T_F32, 4, x);
    cp_t_onnx_output(m, "y", CP_T_F32, 4, x);
    cp_t_onnx_init_f32(m, "w1", 4, w, wv, 16 * 16 * 9);
    cp_t_onnx_init_f32(m, "w2", 4, w, wv, 16 * 16 * 9);
    free(wv);
    int64_t pads[4] = {1, 1, 1, 1};
    int c1 = cp_t_onnx_node(m, "Conv", "first/conv", "x,w1", "c1");
    cp_t_onnx_attr_ints(m, c1, "pads", pads, 4);
    cp_t_onnx_node(m, "Relu", "first/relu", "c1", "r1");
    int sm = cp_t_onnx_node(m, "Softmax", "mid/softmax", "r1", "s");
    cp_t_onnx_attr_int(m, sm, "axis", 1);
    int c2 = cp_t_onnx_node(m, "Conv", "second/conv", "s,w2", "c2");
    cp_t_onnx_attr_ints(m, c2, "pads", pads, 4);
    cp_t_onnx_node(m, "Relu", "second/relu", "c2", "y");
    char *path = cp_t_path("two_regions.onnx");
    cr_assert(cp_t_onnx_write(m, path), "cannot write %s (see stderr)", path);
    cp_t_onnx_free(m);
    return path;
}

Test(tune_regions_session, a_faster_region_layout_is_found_and_reproduced)
{
    struct cp_tune_opts o;
    char *model = two_regions_model();
    replayed_quick_opts(&o, model, "regions", 12, replay);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_tune_result r;
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    const struct cp_tune_step *s = step_with(&r, "layout_regions=");
    cr_assert_not_null(s, "no per-region step within the budget (%zu steps)", r.n_steps);
    const struct cp_tune_step *acc = NULL;
    for (size_t i = 0; i < r.n_steps; i++)
        if (strstr(r.steps[i].delta, ":nhwc") && r.steps[i].status == CP_STEP_ACCEPTED)
            acc = &r.steps[i];
    cr_assert_not_null(acc, "the NHWC region was not accepted");
    cr_expect_not_null(strstr(r.best.cfg.layout_regions, ":nhwc"), "%s", r.best.cfg.layout_regions);
    char *rep = ct_read_text(cp_t_fmt("%s/report.json", o.out_dir));
    json_t *j = ct_json(rep);
    const char *cmd =
        json_string_value(json_object_get(json_object_get(j, "best"), "convert_command"));
    cr_assert_not_null(cmd);
    cr_expect_not_null(strstr(cmd, "--layout_regions="), "%s", cmd);
    json_decref(j);
    free(rep);
    cp_tune_result_release(&r);
    opts_release(&o);
    free(model);
}
