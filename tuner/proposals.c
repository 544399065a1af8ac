/* The proposals of a tuning step: the plans (per-node precision, int8),
 * what the knowledge base and the rules suggest, and the knob space's
 * neighbours, regions, kernels and fusion instances (tuner_internal.h). */
#define _GNU_SOURCE /* memrchr */
#include "tuner/tuner_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- proposals --------------------------------------------------------------------- */

/* A knob that failed for structural reasons (a batch the model's fixed
 * shapes cannot take) is not proposed again with other values. */
bool cp_tune_knob_blocked(const struct cp_tune_ctx *c, const struct cp_delta *dl)
{
    for (size_t i = 0; i < dl->n; i++)
        if (strcmp(dl->items[i].key, "batch") == 0 && c->batch_failed)
            return true;
    return false;
}

/* Whether the delta applied to `best` gives a point evaluated already. */
bool cp_tune_point_seen(const struct cp_tune_ctx *c, const struct cp_tune_point *best,
                        const struct cp_delta *dl)
{
    struct cp_tune_point np;
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    if (cp_delta_apply(best, dl, &np, &ignored) != CP_OK)
        return false; /* evaluate() records the failure */
    char key[48];
    cp_tune_point_key(&np, key);
    return cp_tune_is_seen(c, key);
}

static void add_proposal(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                         const struct cp_delta *dl, const char *source, double expected,
                         const char *title, const struct cp_tune_point *best)
{
    if (cp_tune_knob_blocked(c, dl))
        return;
    struct cp_tune_point np;
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    if (dl->n == 0 || cp_delta_apply(best, dl, &np, &ignored) != CP_OK)
        return;
    char key[48];
    cp_tune_point_key(&np, key);
    if (cp_tune_is_seen(c, key))
        return; /* evaluated already, or a no-op on the current best */
    for (size_t i = 0; i < ps->n; i++) {
        struct cp_tune_point q;
        char qk[48];
        if (cp_delta_apply(best, &ps->p[i].delta, &q, &ignored) == CP_OK) {
            cp_tune_point_key(&q, qk);
            if (strcmp(qk, key) == 0)
                return;
        }
    }
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 16;
        struct cp_tune_proposal *g = cp_realloc_array(ps->p, cap, sizeof *g);
        if (!g)
            return;
        ps->p = g;
        ps->cap = cap;
    }
    struct cp_tune_proposal *p = &ps->p[ps->n++];
    memset(p, 0, sizeof *p);
    p->delta = *dl;
    snprintf(p->source, sizeof p->source, "%s", source);
    snprintf(p->title, sizeof p->title, "%s", title ? title : "");
    p->expected_gain = expected;
}

static bool delta_has(const struct cp_delta *dl, const char *key)
{
    for (size_t i = 0; i < dl->n; i++)
        if (strcmp(dl->items[i].key, key) == 0)
            return true;
    return false;
}

/* What the knowledge base learned on similar models, best first. */
void cp_tune_propose_kb(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                        const struct cp_tune_point *best)
{
    struct cp_kb_strategy_hit *hits = NULL;
    size_t n = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    if (!c->o->use_kb_strategies ||
        cp_kb_query_strategies(c->kb, &c->fp, &c->hw, 0.5, false, 10, &hits, &n, &d) != CP_OK)
        return;
    for (size_t i = 0; i < n; i++) {
        struct cp_delta dl;
        if (cp_delta_parse(hits[i].delta, &dl, &d) != CP_OK || delta_has(&dl, "keep_dtype") ||
            delta_has(&dl, "int8_nodes"))
            continue; /* a node list names another model's nodes */
        char title[160];
        snprintf(title, sizeof title, "held %d of %d times on %s (similarity %.2f)", hits[i].count,
                 hits[i].tried, hits[i].models, hits[i].similarity);
        add_proposal(c, ps, &dl, "kb", hits[i].mean_gain, title, best);
    }
    cp_kb_strategy_hits_free(hits, n);
}

/* The rule engine's findings on the current best's trace, by expected gain
 * refined with each rule's record in the knowledge base. */
void cp_tune_propose_rules(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                           const struct cp_tune_point *best)
{
    struct cp_diagnose_opts dop = {
        .rule_paths = c->o->rule_paths,
        .n_rule_paths = c->o->n_rule_paths,
        .run_id = c->best_run,
        .calibrate = true,
        .analysis = {.target = c->o->target, .constraints = &c->o->constraints},
    };
    struct cp_diagnosis dg;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_rules_diagnose(c->best_trace, &dop, &dg, &d) != CP_OK) {
        cp_tune_progress_note(c, "diagnosis failed, continuing without rules: %s", d.msg);
        cp_diagnosis_release(&dg);
        return;
    }
    size_t first = ps->n;
    for (size_t i = 0; i < dg.analysis.n; i++) {
        const struct cp_finding *f = &dg.analysis.findings[i];
        struct cp_delta dl;
        if (f->unclassified || cp_delta_from_change(&f->change, &dl, &d) != CP_OK)
            continue;
        char source[96];
        snprintf(source, sizeof source, "rule:%s", f->rule);
        /* the rule's measured record on similar models (similarity >= 0.5)
         * on this hardware, weighted by similarity; the prior counts once */
        struct cp_tune_rule_history h;
        cp_tune_rule_history(c->kb, &c->fp, &c->hw, f->rule, f->gain, &h);
        double expected = h.refined;
        char title[160];
        snprintf(title, sizeof title, "%s%s", f->violates ? "[risk breaks a constraint] " : "",
                 f->title);
        add_proposal(c, ps, &dl, source, f->violates ? -1 : expected, title, best);
    }
    /* the refined gains may reorder the rules' proposals (violating last) */
    for (size_t i = first + 1; i < ps->n; i++)
        for (size_t j = i; j > first && ps->p[j].expected_gain > ps->p[j - 1].expected_gain; j--) {
            struct cp_tune_proposal t = ps->p[j];
            ps->p[j] = ps->p[j - 1];
            ps->p[j - 1] = t;
        }
    cp_diagnosis_release(&dg);
}

/* The per-node precision plan, made once a session when it applies
 * (tuner/tuner.h), first: its gain and precision were measured. */
void cp_tune_propose_plans(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                           const struct cp_tune_point *best)
{
    if (!c->prec_planned) {
        c->prec_planned = true;
        struct cp_diag d;
        cp_diag_init(&d);
        if (cp_tune_precision_plan(c, &c->prec_proposal, &c->have_prec_proposal, &d) != CP_OK) {
            cp_tune_progress_note(c, "precision plan failed, continuing without it: %s", d.msg);
            c->have_prec_proposal = false;
        } else if (c->r->prec.ran)
            cp_tune_progress_note(c, "precision plan: %s", c->r->prec.summary);
    }
    if (c->have_prec_proposal)
        add_proposal(c, ps, &c->prec_proposal.delta, c->prec_proposal.source,
                     c->prec_proposal.expected_gain, c->prec_proposal.title, best);
    else if (c->r->prec.ran && c->r->prec.whole_fits &&
             best->cfg.precision_mode == CP_PREC_FORCE_FP32) {
        /* the whole model in bf16 fits: measured first, so that what int8
         * adds on top of it is a step of its own */
        struct cp_delta dl;
        char title[160];
        snprintf(title, sizeof title, "the whole model in bf16 (precision_loss %.4f%%)",
                 c->r->prec.loss_all);
        if (cp_delta_parse("precision_mode=allow_mix_precision_bf16", &dl, NULL) == CP_OK)
            add_proposal(c, ps, &dl, "plan:precision", NAN, title, best);
    }
    /* int8 on top of what the precision plan concluded (tune --int8) */
    if (!c->int8_planned) {
        c->int8_planned = true;
        struct cp_diag d;
        cp_diag_init(&d);
        if (cp_tune_int8_plan(c, &c->int8_proposal, &c->have_int8_proposal, &d) != CP_OK) {
            cp_tune_progress_note(c, "int8 plan failed, continuing without it: %s", d.msg);
            c->have_int8_proposal = false;
        } else if (c->r->int8.ran)
            cp_tune_progress_note(c, "int8 plan: %s", c->r->int8.summary);
    }
    if (c->have_int8_proposal)
        add_proposal(c, ps, &c->int8_proposal.delta, c->int8_proposal.source,
                     c->int8_proposal.expected_gain, c->int8_proposal.title, best);
}

/* best's --layout_regions with region `name` given layout `pol`, as the
 * flag's text ("a:nhwc;b:nchw"). */
static void region_value(const struct cp_tune_point *best, const char *name, const char *pol,
                         char *out, size_t n)
{
    struct cp_buf b;
    cp_buf_init(&b);
    for (const char *p = best->cfg.layout_regions; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *colon = memrchr(p, ':', len);
        if (!colon || (size_t)(colon - p) != strlen(name) || strncmp(p, name, strlen(name)) != 0)
            cp_buf_printf(&b, "%.*s;", (int)len, p);
        p = nl ? nl + 1 : p + len;
    }
    cp_buf_printf(&b, "%s:%s", name, pol);
    snprintf(out, n, "%s", cp_buf_status(&b) == CP_OK && b.data ? b.data : "");
    cp_buf_release(&b);
}

/* Per-region layouts (--layout_regions): with two regions or more, the
 * three largest each get the other layout and plain NCHW. With one region
 * the layout policy's neighbours already are these. */
static void region_proposals(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                             const struct cp_tune_point *best)
{
    struct cp_tune_region *r = NULL;
    size_t n = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    if (best->cfg.layout_policy == CP_LAYOUT_POLICY_NCHW ||
        cp_tune_conv_regions(c->best_om, &r, &n, &d) != CP_OK || n < 2) {
        free(r);
        return;
    }
    for (int pick = 0; pick < 3; pick++) {
        size_t top = n;
        for (size_t i = 0; i < n; i++)
            if (r[i].nodes > 0 && strchr(r[i].name, ' ') == NULL &&
                strchr(r[i].name, ';') == NULL && (top == n || r[i].nodes > r[top].nodes))
                top = i;
        if (top == n)
            break;
        const char *alts[2] = {r[top].nhwc ? "blocked" : "nhwc", "nchw"};
        for (int a = 0; a < 2; a++) {
            char v[sizeof best->cfg.layout_regions];
            region_value(best, r[top].name, alts[a], v, sizeof v);
            struct cp_delta dl;
            if (cp_delta_parse("", &dl, &d) != CP_OK || strlen(v) >= sizeof dl.items[0].value)
                continue;
            snprintf(dl.items[0].key, sizeof dl.items[0].key, "layout_regions");
            memcpy(dl.items[0].value, v, strlen(v) + 1); /* fits: checked above */
            dl.n = 1;
            char title[160];
            snprintf(title, sizeof title, "the conv region of %.100s (%zu nodes) in %s",
                     r[top].name, r[top].nodes, alts[a]);
            add_proposal(c, ps, &dl, "space", NAN, title, best);
        }
        r[top].nodes = 0; /* taken */
    }
    free(r);
}

static int cmp_time_desc(const void *a, const void *b)
{
    double x = ((const struct cp_tune_node_time *)a)->ns,
           y = ((const struct cp_tune_node_time *)b)->ns;
    return (x < y) - (x > y);
}

/* best's --op_kernels with ONNX node `node` run by `kernel`, as the flag's
 * text ("a=k1;b=k2"). */
static void pin_value(const struct cp_tune_point *best, const char *node, const char *kernel,
                      char *out, size_t n)
{
    struct cp_buf b;
    cp_buf_init(&b);
    for (const char *p = best->cfg.op_kernels; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *eq = memrchr(p, '=', len);
        if (!eq || (size_t)(eq - p) != strlen(node) || strncmp(p, node, strlen(node)) != 0)
            cp_buf_printf(&b, "%.*s;", (int)len, p);
        p = nl ? nl + 1 : p + len;
    }
    cp_buf_printf(&b, "%s=%s", node, kernel);
    snprintf(out, n, "%s", cp_buf_status(&b) == CP_OK && b.data ? b.data : "");
    cp_buf_release(&b);
}

/* The fusion pass that makes a node of op type `op`, when it can be
 * switched off for one instance; NULL otherwise. */
static const char *fusion_pass_of(const char *op)
{
    if (strcmp(op, "FusedConv") == 0)
        return "ConvBiasActivationFusionPass";
    if (strcmp(op, "FusedMatMul") == 0)
        return "MatMulBiasActivationFusionPass";
    if (strcmp(op, "GroupNormalization") == 0)
        return "GroupNormFusionPass";
    if (strcmp(op, "LayerNormalization") == 0)
        return "LayerNormFusionPass";
    if (strcmp(op, "Gelu") == 0)
        return "GeluFusionPass";
    return NULL;
}

/* Per-node kernels (--op_kernels): the four slowest nodes of the best's
 * trace each get every other kernel that can run them (not the reference
 * loop), as local moves. */
static void kernel_proposals(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                             const struct cp_tune_point *best)
{
    struct cp_tune_node_time *t = NULL;
    size_t nt = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    if (!c->best_trace[0] ||
        cp_tune_trace_node_times(c->best_trace, c->best_run, &t, &nt, &d) != CP_OK)
        return;
    struct cp_session s;
    if (cp_tune_open(c, best, c->best_om, NULL, &s, &d) != CP_OK) {
        cp_tune_node_times_free(t, nt);
        return;
    }
    qsort(t, nt, sizeof *t, cmp_time_desc);
    size_t nk = cp_plan_n_kernels(s.plan);
    const struct cp_trace_kernel *kt = cp_plan_kernels(s.plan);
    int nodes = 0;
    for (size_t i = 0; i < nt && nodes < 4; i++) {
        const char *choices[8];
        size_t nc = cp_plan_kernel_choices(s.plan, t[i].node, choices, 8);
        const char *now = "", *op = "";
        for (size_t k = 0; k < nk; k++)
            if (kt[k].node && strcmp(kt[k].node, t[i].node) == 0 && kt[k].impl) {
                now = kt[k].impl;
                op = kt[k].op_type ? kt[k].op_type : "";
            }
        bool any = false;
        for (size_t j = 0; j < nc && j < 8; j++) {
            if (strcmp(choices[j], "ref") == 0 || strncmp(now, choices[j], strlen(choices[j])) == 0)
                continue;
            char v[sizeof best->cfg.op_kernels], title[160];
            pin_value(best, t[i].origin, choices[j], v, sizeof v);
            struct cp_delta dl;
            memset(&dl, 0, sizeof dl);
            if (strlen(v) >= sizeof dl.items[0].value)
                continue;
            snprintf(dl.items[0].key, sizeof dl.items[0].key, "op_kernels");
            memcpy(dl.items[0].value, v, strlen(v) + 1); /* checked to fit above */
            dl.n = 1;
            snprintf(title, sizeof title, "run %.60s with %.30s instead of %.30s (%.3f ms a run)",
                     t[i].origin, choices[j], now, t[i].ns / 1e6);
            size_t before = ps->n;
            add_proposal(c, ps, &dl, "space:kernel", NAN, title, best);
            if (ps->n > before)
                snprintf(ps->p[ps->n - 1].race, sizeof ps->p[0].race, "kernel:%.150s", t[i].origin);
            any = true;
        }
        /* the fused node unfused: raced with its kernels, so a fusion that
         * runs slower than its parts loses to them */
        const char *pass = fusion_pass_of(op);
        char key[96];
        if (pass && strcmp(t[i].node, t[i].origin) != 0 &&
            (size_t)snprintf(key, sizeof key, "switch:%s@%s", pass, t[i].origin) < sizeof key) {
            struct cp_delta dl;
            memset(&dl, 0, sizeof dl);
            snprintf(dl.items[0].key, sizeof dl.items[0].key, "%s", key);
            snprintf(dl.items[0].value, sizeof dl.items[0].value, "off");
            dl.n = 1;
            char title[160];
            snprintf(title, sizeof title, "leave %.60s unfused (%s, %.3f ms a run)", t[i].origin,
                     op, t[i].ns / 1e6);
            size_t before = ps->n;
            add_proposal(c, ps, &dl, "space:fusion", NAN, title, best);
            if (ps->n > before)
                snprintf(ps->p[ps->n - 1].race, sizeof ps->p[0].race, "kernel:%.150s", t[i].origin);
            any = true;
        }
        nodes += any;
    }
    cp_session_close(&s);
    cp_tune_node_times_free(t, nt);
}

void cp_tune_propose_space(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                           const struct cp_tune_point *best)
{
    struct cp_delta *list = NULL;
    size_t n = 0;
    if (cp_tune_neighbours(best, c->o->target, c->cores, &list, &n, NULL) != CP_OK)
        return;
    for (size_t i = 0; i < n; i++) {
        size_t before = ps->n;
        add_proposal(c, ps, &list[i], "space", NAN, "a neighbour in the knob space", best);
        const char *k = list[i].n == 1 ? list[i].items[0].key : "";
        if (ps->n > before && (strcmp(k, "layout_policy") == 0 || strcmp(k, "threads") == 0 ||
                               strcmp(k, "batch") == 0))
            snprintf(ps->p[ps->n - 1].race, sizeof ps->p[0].race, "%s", k);
    }
    free(list);
    region_proposals(c, ps, best);
    kernel_proposals(c, ps, best);
}
