/* int8 under a precision budget (tuner/tuner.h, "int8"): on top of the best
 * float point the precision plan leaves (whole-model bf16 when it fits, the
 * per-node bf16 plan when one was made, else the best), calibrate once,
 * check every Conv/MatMul/Gemm in int8, profile that point against the
 * float one with a trace to take each node's gain (its kernels and the
 * Quantize/Dequantize around them, by the ONNX node they stand for), check
 * each node that gains alone, then assemble and verify by bisection as the
 * precision plan does (cp_prec_plan_select). The plan is one proposal,
 * measured and accepted like any other. */
#include "tuner/tuner_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct int8_ctx {
    struct cp_tune_ctx *c;
    struct cp_tune_point base; /* the float point, with the calibrated ranges */
    char **nodes;              /* int8 candidates, by ONNX name */
    size_t n;
    const char *name; /* artifact name of the checks */
};

static void summarise(struct cp_tune_int8_report *rep, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void summarise(struct cp_tune_int8_report *rep, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->summary, sizeof rep->summary, fmt, ap);
    va_end(ap);
}

/* The canonical int8 list of the nodes flagged in `in`. */
static enum cp_status int8_list(const struct int8_ctx *ic, const bool *in, char *out, size_t cap,
                                struct cp_diag *d)
{
    struct cp_buf b;
    cp_buf_init(&b);
    for (size_t i = 0; i < ic->n; i++)
        if (in[i])
            cp_buf_printf(&b, "%s\n", ic->nodes[i]);
    enum cp_status st = cp_buf_status(&b) != CP_OK
                            ? cp_diag_set(d, CP_ERR_NOMEM, "out of memory")
                            : cp_node_list_parse("int8_nodes", "the int8 plan",
                                                 b.data ? b.data : "", b.len, out, cap, d);
    cp_buf_release(&b);
    return st;
}

static enum cp_status check(void *ctx, const bool *in, size_t n, double *share, struct cp_diag *d)
{
    struct int8_ctx *ic = ctx;
    struct cp_tune_point p = ic->base;
    (void)n;
    double loss = NAN;
    enum cp_status st = int8_list(ic, in, p.cfg.int8_nodes, sizeof p.cfg.int8_nodes, d);
    if (st == CP_OK)
        st = cp_tune_loss_of(ic->c, &p, ic->name, &loss, d);
    if (st != CP_OK)
        return st;
    ic->c->r->int8.checks++;
    *share = cp_tune_precision_share(ic->c);
    return CP_OK;
}

/* The float point to quantize on: what the precision plan concluded. */
static enum cp_status base_point(struct cp_tune_ctx *c, struct cp_tune_point *out,
                                 struct cp_diag *d)
{
    *out = c->r->best;
    const struct cp_tune_prec_report *pr = &c->r->prec;
    struct cp_tune_int8_report *rep = &c->r->int8;
    if (c->have_prec_proposal) {
        snprintf(rep->base, sizeof rep->base, "the per-node bf16 plan");
        return cp_delta_apply(&c->r->best, &c->prec_proposal.delta, out, d);
    }
    if (pr->ran && pr->whole_fits) {
        out->cfg.precision_mode = CP_PREC_ALLOW_MIX_PRECISION_BF16;
        snprintf(rep->base, sizeof rep->base, "the whole model in bf16");
        return CP_OK;
    }
    snprintf(rep->base, sizeof rep->base, "the best so far (%s)",
             cp_precision_mode_name(out->cfg.precision_mode));
    return CP_OK;
}

static bool applies(const struct cp_tune_ctx *c, bool *strict)
{
    const struct cp_constraints *k = &c->o->constraints;
    bool any = false;
    *strict = false;
    for (size_t i = 0; i < k->n; i++)
        if (k->items[i].kind == CP_CONSTRAINT_PRECISION_LOSS) {
            any = true;
            *strict = *strict || k->items[i].op == CP_CONSTRAINT_LT;
        }
    return c->o->int8 && any && c->o->target != CP_TARGET_MEMORY && !c->r->best.cfg.int8_nodes[0];
}

/* Write `text` + "\n" to out_dir/NAME; OUT: path[1100]. */
static enum cp_status write_artifact(struct cp_tune_ctx *c, const char *name, const char *text,
                                     char path[1100], struct cp_diag *d)
{
    snprintf(path, 1100, "%.1000s/%s", c->o->out_dir, name);
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_printf(&b, "%s\n", text);
    enum cp_status st = cp_buf_status(&b) == CP_OK ? cp_file_write_atomic(path, b.data, b.len, d)
                                                   : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    cp_buf_release(&b);
    return st;
}

/* The proposal: the base's changes from the best, the ranges and the list. */
static enum cp_status make_proposal(struct int8_ctx *ic, const bool *in, size_t k, double gain_ns,
                                    struct cp_tune_proposal *out, struct cp_diag *d)
{
    struct cp_tune_ctx *c = ic->c;
    struct cp_tune_int8_report *rep = &c->r->int8;
    struct cp_tune_point p = ic->base;
    char list_path[1100], ranges_path[1100];
    enum cp_status st = int8_list(ic, in, p.cfg.int8_nodes, sizeof p.cfg.int8_nodes, d);
    if (st == CP_OK)
        st = write_artifact(c, "plan-int8.int8_nodes", p.cfg.int8_nodes, list_path, d);
    if (st == CP_OK)
        st = write_artifact(c, "plan-int8.quant_ranges", p.cfg.quant_ranges, ranges_path, d);
    if (st != CP_OK)
        return st;
    if (strlen(list_path) >= sizeof p.cfg.int8_nodes_file ||
        strlen(ranges_path) >= sizeof p.cfg.quant_ranges_file)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: the path is too long", list_path);
    memcpy(p.cfg.int8_nodes_file, list_path, strlen(list_path) + 1);
    memcpy(p.cfg.quant_ranges_file, ranges_path, strlen(ranges_path) + 1);
    memset(out, 0, sizeof *out);
    cp_delta_between(&c->r->best, &p, &out->delta);
    out->expected_gain = rep->base_ns > 0 ? gain_ns / rep->base_ns : NAN;
    snprintf(out->source, sizeof out->source, "plan:int8");
    snprintf(out->title, sizeof out->title,
             "%zu of %zu Conv/MatMul/Gemm in int8 on %.60s (precision_loss %.4f%%)", k, ic->n,
             rep->base, rep->loss_plan);
    return CP_OK;
}

/* Calibrate the base's ranges over every candidate. */
static enum cp_status calibrate(struct int8_ctx *ic, struct cp_diag *d)
{
    struct cp_tune_ctx *c = ic->c;
    struct cp_tune_int8_report *rep = &c->r->int8;
    struct cp_convert_config cfg = ic->base.cfg;
    snprintf(cfg.model, sizeof cfg.model, "%s", c->onnx);
    cfg.calibration_method = c->o->calibration_method;
    cfg.calibration_data[0] = '\0';
    if (c->o->calibration_data)
        snprintf(cfg.calibration_data, sizeof cfg.calibration_data, "%s", c->o->calibration_data);
    struct cp_log quiet = {CP_LOG_ERROR, NULL};
    struct cp_calib_opts co = {
        .threads = ic->base.threads, .seed = c->o->seed, .all_candidates = true, .log = &quiet};
    enum cp_status st = cp_tune_calibrate(&cfg, &co, d);
    if (st != CP_OK)
        return st;
    snprintf(ic->base.cfg.quant_ranges, sizeof ic->base.cfg.quant_ranges, "%s", cfg.quant_ranges);
    ic->base.cfg.calibration_method = cfg.calibration_method;
    snprintf(rep->calibration, sizeof rep->calibration, "%s on %d %s%s",
             cp_calib_method_name(cfg.calibration_method), cfg.calibration_samples,
             c->o->calibration_data ? "samples of " : "seeded random inputs (not representative)",
             c->o->calibration_data ? c->o->calibration_data : "");
    if (!c->o->calibration_data)
        cp_tune_progress_note(c, "int8 calibration on seeded random inputs: they are not "
                                 "representative; give --calibration-data DIR");
    return CP_OK;
}

enum cp_status cp_tune_int8_plan(struct cp_tune_ctx *c, struct cp_tune_proposal *out, bool *made,
                                 struct cp_diag *d)
{
    *made = false;
    bool strict = false;
    if (!applies(c, &strict))
        return CP_OK;
    struct cp_tune_int8_report *rep = &c->r->int8;
    memset(rep, 0, sizeof *rep);
    rep->ran = true;
    rep->loss_all = rep->loss_plan = rep->base_ns = rep->int8_ns = rep->predicted_ns = NAN;
    struct int8_ctx ic = {.c = c, .name = "int8-check"};
    struct cp_convert_config src = c->r->best.cfg;
    snprintf(src.model, sizeof src.model, "%s", c->onnx);
    enum cp_status st = base_point(c, &ic.base, d);
    if (st == CP_OK)
        st = cp_calib_nodes(&src, &ic.nodes, &ic.n, d);
    if (st == CP_OK && ic.n == 0) {
        summarise(rep, "the model has no Conv, MatMul or Gemm with an f32 input");
        goto out;
    }
    if (st == CP_OK)
        st = calibrate(&ic, d);
    bool *in = st == CP_OK ? cp_calloc(ic.n, sizeof *in) : NULL;
    struct cp_prec_item *items = st == CP_OK ? cp_calloc(ic.n, sizeof *items) : NULL;
    if (st == CP_OK && (!in || !items))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    /* 1. every candidate in int8 */
    char base_om[1100], all_om[1100];
    struct cp_tune_point all = ic.base;
    for (size_t i = 0; st == CP_OK && i < ic.n; i++)
        in[i] = true;
    if (st == CP_OK)
        st = int8_list(&ic, in, all.cfg.int8_nodes, sizeof all.cfg.int8_nodes, d);
    if (st == CP_OK)
        st = cp_tune_loss_of(c, &all, "int8-all", &rep->loss_all, d);
    if (st == CP_OK) {
        rep->checks++;
        rep->nodes = ic.n;
        snprintf(all_om, sizeof all_om, "%.1000s/int8-all.om", c->o->out_dir);
        st = cp_tune_convert(c, &ic.base, "int8-base", base_om, d);
    }
    /* 2. the latency model: the base against it all in int8 */
    struct cp_tune_pair_profile pp;
    memset(&pp, 0, sizeof pp);
    if (st == CP_OK)
        st = cp_tune_profile_pair(c, base_om, &ic.base, all_om, "int8-profile", &pp, d);
    if (st == CP_OK) {
        rep->base_ns = pp.median_ns[0];
        rep->int8_ns = pp.median_ns[1];
    }
    /* 3. each node that gains, alone in int8 */
    ic.name = "int8-one";
    for (size_t i = 0; st == CP_OK && i < ic.n; i++)
        in[i] = false;
    for (size_t i = 0; st == CP_OK && i < ic.n; i++) {
        double a = cp_tune_node_time_of(pp.t[0], pp.n[0], ic.nodes[i], true);
        double b = cp_tune_node_time_of(pp.t[1], pp.n[1], ic.nodes[i], true);
        items[i].gain_ns = isfinite(a) && isfinite(b) ? a - b : 0;
        items[i].loss = NAN;
        if (items[i].gain_ns <= 0)
            continue;
        in[i] = true;
        st = check(&ic, in, ic.n, &items[i].loss, d);
        in[i] = false;
        if (c->o->interrupt && *c->o->interrupt)
            st = cp_diag_set(d, CP_ERR_INVALID, "interrupted during the int8 plan");
    }
    cp_tune_pair_profile_release(&pp);
    /* 4. assemble and verify in shares of the bounds */
    struct cp_prec_plan plan;
    memset(&plan, 0, sizeof plan);
    ic.name = "int8-check";
    if (st == CP_OK)
        st = cp_prec_plan_select(items, ic.n, 1.0, strict, check, &ic, &plan, d);
    if (st == CP_OK) {
        rep->candidates = plan.n_order;
        rep->chosen = plan.k;
        rep->predicted_ns = rep->base_ns - plan.gain_ns;
        for (size_t i = 0; i < ic.n; i++)
            in[i] = false;
        for (size_t i = 0; i < plan.k; i++)
            in[plan.order[i]] = true;
    }
    if (st == CP_OK && plan.k > 0) {
        /* the plan's loss over all outputs, as reported (its checks gave shares) */
        struct cp_tune_point pt = ic.base;
        ic.name = "int8-plan";
        st = int8_list(&ic, in, pt.cfg.int8_nodes, sizeof pt.cfg.int8_nodes, d);
        if (st == CP_OK)
            st = cp_tune_loss_of(c, &pt, "int8-plan", &rep->loss_plan, d);
        rep->checks++;
    }
    if (st == CP_OK && plan.k == 0)
        summarise(rep,
                  "no Conv/MatMul/Gemm fits the budget in int8 with a gain on %s (%zu nodes, %zu "
                  "faster in int8 and within the budget alone; all in int8: precision_loss "
                  "%.4f%%, %.3f ms against %.3f ms)",
                  rep->base, ic.n, plan.n_order, rep->loss_all, rep->int8_ns / 1e6,
                  rep->base_ns / 1e6);
    if (st == CP_OK && plan.k > 0 &&
        (st = make_proposal(&ic, in, plan.k, plan.gain_ns, out, d)) == CP_OK) {
        *made = true;
        summarise(rep,
                  "%zu of %zu Conv/MatMul/Gemm in int8 on %s: precision_loss %.4f%% (all in int8: "
                  "%.4f%%); the latency model predicts %.3f ms from %.3f ms",
                  plan.k, ic.n, rep->base, rep->loss_plan, rep->loss_all, rep->predicted_ns / 1e6,
                  rep->base_ns / 1e6);
    }
    cp_prec_plan_release(&plan);
    free(in);
    free(items);
out:
    cp_calib_names_free(ic.nodes, ic.n);
    return st;
}
