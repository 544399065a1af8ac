/* The engine: rules against features, findings with confidence, expected
 * gain and the change that addresses them. */
#include "core/json.h"
#include "rules/rules_internal.h"
#include "om/config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *cp_confidence_name(enum cp_confidence c)
{
    return c == CP_CONFIDENCE_HIGH ? "high" : c == CP_CONFIDENCE_MEDIUM ? "medium" : "low";
}

static const char *const target_names[] = {"latency", "throughput", "memory"};

const char *cp_target_name(enum cp_target t)
{
    return (unsigned)t < 3 ? target_names[t] : "unknown";
}

bool cp_target_parse(const char *s, enum cp_target *out)
{
    for (int i = 0; s && i < 3; i++)
        if (strcasecmp(s, target_names[i]) == 0) {
            *out = (enum cp_target)i;
            return true;
        }
    return false;
}

/* ---- one row as a whole table ---------------------------------------------------
 *
 * A root cause's `affected` predicate is evaluated as count(<pred>) on an
 * environment whose only row is row i of the real one: 1 means row i is
 * affected. */
struct one_row {
    const struct cp_expr_env *base;
    size_t row;
};

static bool one_scalar(void *ctx, const char *name, struct cp_expr_value *out)
{
    const struct one_row *o = ctx;
    return o->base->scalar && o->base->scalar(o->base->ctx, name, out);
}

static size_t one_n_rows(void *ctx)
{
    (void)ctx;
    return 1;
}

static bool one_field(void *ctx, size_t row, const char *name, struct cp_expr_value *out)
{
    (void)row;
    const struct one_row *o = ctx;
    return o->base->field && o->base->field(o->base->ctx, o->row, name, out);
}

static double one_weight(void *ctx, size_t row)
{
    (void)row;
    const struct one_row *o = ctx;
    return o->base->row_weight ? o->base->row_weight(o->base->ctx, o->row) : 0;
}

/* ---- evaluation helpers ------------------------------------------------------------- */

enum tri { T_FALSE, T_TRUE, T_ABSENT };

static enum cp_status cond(const struct cp_expr *e, const struct cp_expr_env *env, enum tri *out,
                           struct cp_diag *d)
{
    struct cp_expr_value v;
    *out = T_ABSENT; /* defined on every path, errors included */
    enum cp_status st = cp_expr_eval(e, env, &v, d);
    if (st != CP_OK)
        return st;
    if (v.type == CP_EXPR_ABSENT)
        *out = T_ABSENT;
    else if (v.type == CP_EXPR_BOOL)
        *out = v.boolean ? T_TRUE : T_FALSE;
    else
        return cp_diag_set(d, CP_ERR_INVALID, "'%s' is a %s, not a condition", cp_expr_text(e),
                           cp_expr_type_name(v.type));
    return CP_OK;
}

static enum cp_status number(const struct cp_expr *e, const struct cp_expr_env *env, double *out,
                             struct cp_diag *d)
{
    struct cp_expr_value v;
    enum cp_status st = cp_expr_eval(e, env, &v, d);
    *out = st == CP_OK && v.type == CP_EXPR_NUM ? v.num : NAN;
    return st;
}

/* Features an expression needs that the trace lacks, added to `missing`
 * (comma-separated, each once). */
struct missing_ctx {
    const struct cp_features *f;
    struct cp_buf *out;
    size_t n;
};

static void note_missing(void *ctx, const struct cp_expr_ident *id)
{
    struct missing_ctx *m = ctx;
    double v;
    if (!cp_features_is_known(id->name) || cp_features_get(m->f, id->name, &v))
        return;
    if (m->out->data && strstr(m->out->data, id->name))
        return;
    cp_buf_printf(m->out, "%s%s", m->out->len ? ", " : "", id->name);
    m->n++;
}

/* How an expression evaluated, for a finding's evidence lines. */
static void evidence_line(struct cp_buf *b, const char *kind, const struct cp_expr *e, enum tri t,
                          bool has_margin, double margin)
{
    cp_buf_printf(b, "%s: %s -> %s", kind, cp_expr_text(e),
                  t == T_TRUE    ? "holds"
                  : t == T_FALSE ? "does not hold"
                                 : "unknown (missing)");
    if (has_margin)
        cp_buf_printf(b, " (margin %+.0f%%)", margin * 100);
    cp_buf_putc(b, '\n');
}

/* ---- findings ------------------------------------------------------------------------ */

/* A copy of a change string with each {feature} replaced by the feature's
 * value ("--threads={cores}" -> "--threads=2"). An absent feature leaves
 * the placeholder, which the caller reports. NULL on OOM. */
static char *expand(const char *s, const struct cp_features *f)
{
    struct cp_buf b;
    cp_buf_init(&b);
    for (const char *p = s; *p;) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        if (close && close - p < 64) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(close - p - 1), p + 1);
            double v;
            if (cp_features_get(f, name, &v)) {
                cp_buf_printf(&b, "%.10g", v);
                p = close + 1;
                continue;
            }
        }
        cp_buf_putc(&b, *p++);
    }
    if (cp_buf_status(&b) != CP_OK) {
        cp_buf_release(&b);
        return NULL;
    }
    return b.data ? cp_buf_steal(&b) : cp_strdup("");
}

static char **strv_dup(char *const *v, const struct cp_features *f)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    char **out = cp_calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = expand(v[i], f))) {
            cp_strv_free(out);
            return NULL;
        }
    return out;
}

static void finding_release(struct cp_finding *f)
{
    free(f->rule);
    free(f->bottleneck_type);
    free(f->root_cause);
    free(f->title);
    free(f->nodes_json);
    free(f->kernels_json);
    free(f->evidence);
    free(f->missing);
    free(f->change.summary);
    cp_strv_free(f->change.convert);
    cp_strv_free(f->change.fusion_switches);
    cp_strv_free(f->change.runtime);
    free(f->violation);
    free(f->stacks_json);
}

void cp_analysis_release(struct cp_analysis *a)
{
    for (size_t i = 0; i < a->n; i++)
        finding_release(&a->findings[i]);
    free(a->findings);
    memset(a, 0, sizeof *a);
}

/* The ONNX node names and converted node names of the kernels a predicate
 * selects (NULL: none). */
static enum cp_status affected_nodes(const struct cp_features *f, const struct cp_expr_env *env,
                                     const struct cp_expr *pred, char **nodes, char **kernels,
                                     struct cp_diag *d)
{
    json_t *onnx = json_array(), *conv = json_array();
    enum cp_status st = onnx && conv ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; pred && st == CP_OK && i < f->n_kernels; i++) {
        struct one_row o = {env, i};
        struct cp_expr_env e1 = {&o, one_scalar, one_n_rows, one_field, one_weight};
        double c;
        if ((st = number(pred, &e1, &c, d)) != CP_OK || !(c >= 1))
            continue;
        const struct cp_kernel_feat *k = &f->kernels[i];
        cp_json_push(conv, cp_json_str(k->node));
        json_t *orig = k->origins ? json_loads(k->origins, 0, NULL) : NULL;
        size_t j;
        json_t *v;
        json_array_foreach(orig, j, v)
        {
            bool seen = false;
            size_t q;
            json_t *w;
            json_array_foreach(onnx, q, w) seen = seen || json_equal(v, w);
            if (!seen)
                json_array_append(onnx, v);
        }
        json_decref(orig);
    }
    if (st == CP_OK) {
        *nodes = cp_json_text(onnx);
        *kernels = cp_json_text(conv);
        if (!*nodes || !*kernels)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    json_decref(onnx);
    json_decref(conv);
    return st;
}

/* Confidence: indicator strength (each holding indicator's margin, 20% past
 * its threshold counting as full strength), evidence agreement (share of
 * the root cause's evidence that holds), and a penalty per missing feature.
 * score = 0.5 strength + 0.5 agreement - 0.2 per missing feature;
 * high >= 0.75 and nothing missing, medium >= 0.45, else low. */
static void confidence(struct cp_finding *fd, double strength, double agreement, size_t missing)
{
    double s = 0.5 * strength + 0.5 * agreement - 0.2 * (double)missing;
    s = s < 0 ? 0 : s > 1 ? 1 : s;
    fd->score = s;
    fd->confidence = s >= 0.75 && missing == 0 ? CP_CONFIDENCE_HIGH
                     : s >= 0.45               ? CP_CONFIDENCE_MEDIUM
                                               : CP_CONFIDENCE_LOW;
}

static void check_constraints(struct cp_finding *fd, const struct cp_analysis_opts *o)
{
    fd->violation = cp_strdup("");
    if (!o->constraints)
        return;
    const struct cp_constraint *p =
        cp_constraints_find(o->constraints, CP_CONSTRAINT_PRECISION_LOSS);
    const struct cp_constraint *m = cp_constraints_find(o->constraints, CP_CONSTRAINT_MEMORY);
    char buf[256] = "";
    if (p && isfinite(fd->risk_precision_loss) &&
        !cp_constraint_holds(p, fd->risk_precision_loss)) {
        char v[48];
        cp_constraint_format_value(CP_CONSTRAINT_PRECISION_LOSS, p->value, v);
        snprintf(buf, sizeof buf, "expected precision loss %.2f%% breaks precision_loss%s%s",
                 fd->risk_precision_loss, cp_constraint_op_text(p->op), v);
    } else if (m && isfinite(fd->risk_memory) && fd->risk_memory > 0 && o->memory_bytes > 0 &&
               !cp_constraint_holds(m, o->memory_bytes * (1 + fd->risk_memory))) {
        char v[48], now[48];
        cp_constraint_format_value(CP_CONSTRAINT_MEMORY, m->value, v);
        cp_constraint_format_value(CP_CONSTRAINT_MEMORY, o->memory_bytes * (1 + fd->risk_memory),
                                   now);
        snprintf(buf, sizeof buf, "expected memory %s breaks memory%s%s", now,
                 cp_constraint_op_text(m->op), v);
    }
    if (buf[0]) {
        fd->violates = true;
        free(fd->violation);
        fd->violation = cp_strdup(buf);
    }
}

/* ---- changes the run already has ---------------------------------------------------- */

static bool switch_is_noop(const char *sw, const char *offs)
{
    const char *colon = strrchr(sw, ':');
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(colon - sw), sw);
    bool on = strcmp(colon, ":on") == 0;
    if (strcmp(name, "ALL") == 0)
        return on ? !offs || !*offs : false;
    return on != cp_fusion_switches_turn_off(offs, name);
}

static bool convert_is_noop(const char *flag, json_t *cfg)
{
    const char *eq = strchr(flag, '=');
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(eq - flag - 2), flag + 2);
    json_t *v = json_object_get(cfg, key);
    if (json_is_string(v))
        return strcmp(json_string_value(v), eq + 1) == 0;
    if (json_is_integer(v))
        return json_integer_value(v) == strtoll(eq + 1, NULL, 10);
    return false;
}

static bool runtime_is_noop(const char *flag, const struct cp_run_metrics *run)
{
    long v = strtol(strchr(flag, '=') + 1, NULL, 10);
    if (strncmp(flag, "--threads=", 10) == 0)
        return run->threads == v;
    if (strncmp(flag, "--batch=", 8) == 0)
        return run->batch == v;
    return false;
}

/* A conversion flag acts through a pass (om/config.h): a run whose switch
 * file turned that pass off would not feel the flag at all. Then the change
 * also switches the pass on, and its summary says why, so that applying the
 * change as printed takes effect. */
static enum cp_status add_needed_passes(struct cp_change *c, const struct cp_run_metrics *run,
                                        struct cp_diag *d)
{
    if (!run || !run->config_json || !*run->config_json)
        return CP_OK;
    json_t *cfg = json_loads(run->config_json, 0, NULL);
    const char *offs = json_string_value(json_object_get(cfg, "fusion_switches"));
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && offs && c->convert[i]; i++) {
        const char *f = c->convert[i], *eq = strchr(f, '=');
        char key[96], line[160];
        snprintf(key, sizeof key, "%.*s", eq ? (int)(eq - f - 2) : 0, f + 2);
        const char *pass = cp_convert_flag_pass(key);
        if (!pass || !cp_fusion_switches_turn_off(offs, pass))
            continue;
        snprintf(line, sizeof line, "%s:on", pass);
        size_t n = 0;
        bool listed = false;
        for (; c->fusion_switches[n]; n++)
            listed = listed || strcmp(c->fusion_switches[n], line) == 0;
        if (listed)
            continue;
        char **sw = cp_realloc_array(c->fusion_switches, n + 2, sizeof *sw);
        if (!sw) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        c->fusion_switches = sw;
        sw[n] = cp_strdup(line);
        sw[n + 1] = NULL;
        struct cp_buf b;
        cp_buf_init(&b);
        cp_buf_printf(&b, "%s; with %s: this run has it switched off, and --%s acts through it",
                      c->summary, line, key);
        char *sum = cp_buf_status(&b) == CP_OK ? cp_buf_steal(&b) : NULL;
        cp_buf_release(&b);
        if (!sw[n] || !sum) {
            free(sum);
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        free(c->summary);
        c->summary = sum;
    }
    json_decref(cfg);
    return st;
}

/* Every part of the change is already in effect for the run. */
static bool change_is_noop(const struct cp_change *c, const struct cp_run_metrics *run)
{
    if (!run)
        return false;
    json_t *cfg =
        run->config_json && *run->config_json ? json_loads(run->config_json, 0, NULL) : NULL;
    if (!cfg && ((c->convert && c->convert[0]) || (c->fusion_switches && c->fusion_switches[0])))
        return false; /* no config recorded: cannot tell */
    const char *offs = json_string_value(json_object_get(cfg, "fusion_switches"));
    bool noop = true;
    for (size_t i = 0; noop && c->convert[i]; i++)
        noop = convert_is_noop(c->convert[i], cfg);
    for (size_t i = 0; noop && c->fusion_switches[i]; i++)
        noop = switch_is_noop(c->fusion_switches[i], offs);
    for (size_t i = 0; noop && c->runtime[i]; i++)
        noop = runtime_is_noop(c->runtime[i], run);
    json_decref(cfg);
    return noop;
}

static enum cp_status push(struct cp_analysis *a, size_t *cap, struct cp_finding *fd,
                           struct cp_diag *d)
{
    if (a->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        struct cp_finding *g = cp_realloc_array(a->findings, nc, sizeof *g);
        if (!g) {
            finding_release(fd);
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        }
        a->findings = g;
        *cap = nc;
    }
    a->findings[a->n++] = *fd;
    return CP_OK;
}

struct rule_eval {
    double strength; /* mean saturation of the holding indicators' margins */
    size_t missing;
    struct cp_buf evidence, missing_names;
};

/* Whether a rule fires: no indicator false, at least one true. */
static enum cp_status eval_indicators(const struct cp_rule *r, const struct cp_features *f,
                                      const struct cp_expr_env *env, struct rule_eval *re,
                                      bool *fires, struct cp_diag *d)
{
    *fires = false;
    size_t n_true = 0;
    double sum = 0;
    struct missing_ctx mc = {f, &re->missing_names, 0};
    for (size_t i = 0; i < r->n_indicators; i++) {
        enum tri t;
        enum cp_status st = cond(r->indicators[i], env, &t, d);
        if (st != CP_OK)
            return st;
        if (t == T_FALSE)
            return CP_OK;
        double m = 0;
        bool hm = t == T_TRUE && cp_expr_margin(r->indicators[i], env, &m);
        if (t == T_TRUE) {
            n_true++;
            double sat = hm ? m / 0.2 : 1.0;
            sum += sat < 0 ? 0 : sat > 1 ? 1 : sat;
        } else
            cp_expr_identifiers(r->indicators[i], note_missing, &mc);
        evidence_line(&re->evidence, "indicator", r->indicators[i], t, hm, m);
    }
    re->strength = n_true ? sum / (double)n_true : 0;
    re->missing = mc.n;
    *fires = n_true > 0;
    return CP_OK;
}

static enum cp_status eval_cause(const struct cp_rule *r, const struct cp_root_cause *c,
                                 const struct cp_features *f, const struct cp_expr_env *env,
                                 const struct rule_eval *re, const struct cp_analysis_opts *o,
                                 struct cp_analysis *a, size_t *cap, struct cp_diag *d)
{
    struct cp_buf ev, miss;
    cp_buf_init(&ev);
    cp_buf_init(&miss);
    cp_buf_puts(&ev, re->evidence.data ? re->evidence.data : "");
    cp_buf_puts(&miss, re->missing_names.data ? re->missing_names.data : "");
    struct missing_ctx mc = {f, &miss, re->missing};
    size_t n_true = 0;
    bool contradicted = false;
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < c->n_evidence && st == CP_OK; i++) {
        enum tri t;
        if ((st = cond(c->evidence[i], env, &t, d)) != CP_OK)
            break;
        contradicted = contradicted || t == T_FALSE;
        n_true += t == T_TRUE;
        if (t == T_ABSENT)
            cp_expr_identifiers(c->evidence[i], note_missing, &mc);
        evidence_line(&ev, "evidence", c->evidence[i], t, false, 0);
    }
    if (st != CP_OK || contradicted || (c->n_evidence && n_true == 0)) {
        cp_buf_release(&ev);
        cp_buf_release(&miss);
        return st;
    }
    double du = 1.0;
    if (!cp_features_get(f, "device_util", &du) || !(du > 0))
        du = 1.0;
    double share = 1.0;
    if (c->share)
        st = number(c->share, env, &share, d);
    else if (c->affected_share) {
        st = number(c->affected_share, env, &share, d);
        share *= du; /* a share of kernel time, as a share of the iteration */
    }
    /* a share that needs a feature the trace lacks: the finding could say
     * neither how much time it is about nor what the change gains, so it
     * is not made (its rule fired on the indicators that were there) */
    if (st == CP_OK && !isfinite(share)) {
        cp_buf_release(&ev);
        cp_buf_release(&miss);
        return CP_OK;
    }
    struct cp_finding fd = {0};
    fd.rule = cp_strdup(r->name);
    fd.bottleneck_type = cp_strdup(r->bottleneck_type);
    fd.root_cause = cp_strdup(c->name);
    fd.title = cp_strdup(r->title ? r->title : r->name);
    fd.time_share = share;
    fd.speedup = c->speedup;
    fd.speedup_lo = c->speedup_lo;
    fd.speedup_hi = c->speedup_hi;
    fd.gain = share * (1 - 1 / c->speedup);
    fd.gain_lo = share * (1 - 1 / c->speedup_lo);
    fd.gain_hi = share * (1 - 1 / c->speedup_hi);
    fd.risk_precision_loss = c->risk_precision_loss;
    fd.risk_memory = c->risk_memory;
    if (o->target == CP_TARGET_MEMORY) {
        /* The memory target gains memory: the rule's expected change of it. */
        double saved = isfinite(c->risk_memory) && c->risk_memory < 0 ? -c->risk_memory : 0;
        fd.gain = fd.gain_lo = fd.gain_hi = saved;
    }
    fd.change.summary = expand(c->change_summary, f);
    fd.change.convert = strv_dup(c->convert, f);
    fd.change.fusion_switches = strv_dup(c->fusion_switches, f);
    fd.change.runtime = strv_dup(c->runtime, f);
    if (st == CP_OK)
        st = affected_nodes(f, env, c->affected_row, &fd.nodes_json, &fd.kernels_json, d);
    double agreement = c->n_evidence ? (double)n_true / (double)c->n_evidence : 1.0;
    confidence(&fd, re->strength, agreement, mc.n);
    check_constraints(&fd, o);
    fd.evidence = cp_buf_steal(&ev);
    fd.missing = miss.data ? cp_buf_steal(&miss) : cp_strdup("");
    cp_buf_release(&ev);
    cp_buf_release(&miss);
    if (st == CP_OK && (!fd.rule || !fd.bottleneck_type || !fd.root_cause || !fd.title ||
                        !fd.change.summary || !fd.change.convert || !fd.change.fusion_switches ||
                        !fd.change.runtime || !fd.violation || !fd.missing || !fd.evidence))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st != CP_OK) {
        finding_release(&fd);
        return st;
    }
    if ((st = add_needed_passes(&fd.change, o->run, d)) != CP_OK) {
        finding_release(&fd);
        return st;
    }
    /* advice for another tool's profile (a summary alone) is never in
     * effect already: cannprof cannot tell */
    bool advice = !fd.change.convert[0] && !fd.change.fusion_switches[0] && !fd.change.runtime[0];
    if (!advice && change_is_noop(&fd.change, o->run)) {
        a->already_applied++;
        finding_release(&fd);
        return CP_OK;
    }
    return push(a, cap, &fd, d);
}

/* No rule fired, but one op type dominates or the device idles: say so,
 * with what was measured, rather than nothing. */
static enum cp_status unclassified(const struct cp_features *f, struct cp_analysis *a, size_t *cap,
                                   struct cp_diag *d)
{
    double du = NAN;
    bool has_du = cp_features_get(f, "device_util", &du);
    const struct cp_op_type_feat *top = f->n_op_types ? &f->op_types[0] : NULL;
    bool hot_op = top && top->time_share > 0.30;
    bool idle = has_du && du < 0.60;
    if (!hot_op && !idle)
        return CP_OK;
    struct cp_finding fd = {0};
    char title[256];
    struct cp_buf ev;
    cp_buf_init(&ev);
    json_t *onnx = json_array(), *conv = json_array();
    if (hot_op) {
        snprintf(title, sizeof title, "%s takes %.0f%% of the kernel time and no rule explains it",
                 top->op_type, 100 * top->time_share);
        for (size_t i = 0; i < f->n_kernels; i++) {
            if (strcmp(f->kernels[i].op_type, top->op_type) != 0)
                continue;
            cp_json_push(conv, cp_json_str(f->kernels[i].node));
            json_t *orig = json_loads(f->kernels[i].origins, 0, NULL);
            json_array_extend(onnx, orig);
            json_decref(orig);
        }
        cp_buf_printf(&ev, "hotspot: op type %s, %zu kernels, %.1f%% of kernel time\n",
                      top->op_type, top->n_kernels, 100 * top->time_share);
        fd.time_share = top->time_share * (has_du ? du : 1.0);
    } else {
        snprintf(title, sizeof title,
                 "kernels cover only %.0f%% of the iteration and no rule explains the rest",
                 100 * du);
        fd.time_share = 1 - du;
    }
    if (has_du)
        cp_buf_printf(&ev, "device_util = %.1f%%\n", 100 * du);
    fd.rule = cp_strdup("unclassified_hotspot");
    fd.bottleneck_type = cp_strdup(hot_op ? "hotspot" : "runtime_overhead");
    fd.root_cause = cp_strdup("unknown");
    fd.title = cp_strdup(title);
    fd.unclassified = true;
    fd.confidence = CP_CONFIDENCE_LOW;
    fd.score = 0;
    fd.speedup = fd.speedup_lo = 1;
    fd.speedup_hi = INFINITY;
    fd.gain = fd.gain_lo = 0;   /* unknown: nothing is promised ... */
    fd.gain_hi = fd.time_share; /* ... beyond removing the hotspot entirely */
    fd.risk_precision_loss = fd.risk_memory = NAN;
    fd.nodes_json = onnx && conv ? cp_json_text(onnx) : NULL;
    fd.kernels_json = onnx && conv ? cp_json_text(conv) : NULL;
    fd.evidence = cp_buf_steal(&ev);
    fd.missing = cp_strdup("");
    fd.violation = cp_strdup("");
    fd.change.summary = cp_strdup("no known change: write a rule for this pattern (skeleton "
                                  "written by analyze)");
    fd.change.convert = cp_calloc(1, sizeof(char *));
    fd.change.fusion_switches = cp_calloc(1, sizeof(char *));
    fd.change.runtime = cp_calloc(1, sizeof(char *));
    json_decref(onnx);
    json_decref(conv);
    cp_buf_release(&ev);
    if (!fd.rule || !fd.bottleneck_type || !fd.root_cause || !fd.title || !fd.nodes_json ||
        !fd.kernels_json || !fd.evidence || !fd.missing || !fd.violation || !fd.change.summary ||
        !fd.change.convert || !fd.change.fusion_switches || !fd.change.runtime) {
        finding_release(&fd);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    return push(a, cap, &fd, d);
}

static bool strv_eq(char *const *a, char *const *b)
{
    size_t i = 0;
    for (; a[i] && b[i]; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return !a[i] && !b[i];
}

static bool same_change(const struct cp_change *a, const struct cp_change *b)
{
    bool stated = !a->convert[0] && !a->fusion_switches[0] && !a->runtime[0];
    return strv_eq(a->convert, b->convert) && strv_eq(a->fusion_switches, b->fusion_switches) &&
           strv_eq(a->runtime, b->runtime) &&
           (!stated || strcmp(a->summary, b->summary) == 0); /* advice: by its words */
}

/* One change, one finding: when several rules propose the same change, keep
 * the first in the sorted order (the larger gain) and say which other
 * rules agreed. */
static void merge_same_changes(struct cp_analysis *a)
{
    size_t w = 0;
    for (size_t i = 0; i < a->n; i++) {
        struct cp_finding *f = &a->findings[i];
        size_t k = 0;
        while (k < w && (f->unclassified || !same_change(&a->findings[k].change, &f->change)))
            k++;
        if (k < w) {
            struct cp_finding *keep = &a->findings[k];
            struct cp_buf b;
            cp_buf_init(&b);
            cp_buf_printf(&b, "%salso indicated by rule %s (root cause %s)\n", keep->evidence,
                          f->rule, f->root_cause);
            if (cp_buf_status(&b) == CP_OK) {
                free(keep->evidence);
                keep->evidence = cp_buf_steal(&b);
            }
            cp_buf_release(&b);
            finding_release(f);
            continue;
        }
        a->findings[w++] = *f;
    }
    a->n = w;
}

static int cmp_finding(const void *pa, const void *pb)
{
    const struct cp_finding *a = pa, *b = pb;
    if (a->violates != b->violates)
        return a->violates ? 1 : -1;
    if (a->gain != b->gain)
        return a->gain > b->gain ? -1 : 1;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return strcmp(a->rule, b->rule);
}

enum cp_status cp_rules_analyze(const struct cp_rule_set *rs, const struct cp_features *f,
                                const struct cp_analysis_opts *o, struct cp_analysis *out,
                                struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    struct cp_expr_env env;
    cp_features_env(f, &env);
    size_t cap = 0;
    enum cp_status st = CP_OK;
    unsigned kind = 1u << cp_features_profile(f);
    for (size_t i = 0; i < rs->n && st == CP_OK; i++) {
        const struct cp_rule *r = &rs->rules[i];
        if (!r->targets[o->target] || !(r->profiles & kind))
            continue;
        out->rules_evaluated++;
        struct rule_eval re = {0};
        cp_buf_init(&re.evidence);
        cp_buf_init(&re.missing_names);
        bool fires = false;
        st = eval_indicators(r, f, &env, &re, &fires, d);
        for (size_t j = 0; st == CP_OK && fires && j < r->n_causes; j++)
            st = eval_cause(r, &r->causes[j], f, &env, &re, o, out, &cap, d);
        cp_buf_release(&re.evidence);
        cp_buf_release(&re.missing_names);
        if (st != CP_OK) {
            struct cp_diag inner = *d;
            cp_diag_init(d);
            cp_diag_set(d, st, "%s:%d: rule '%s': %s", r->file, r->line, r->name, inner.msg);
        }
    }
    if (st == CP_OK && out->n == 0)
        st = unclassified(f, out, &cap, d);
    if (st != CP_OK) {
        cp_analysis_release(out);
        return st;
    }
    cp_analysis_sort(out);
    merge_same_changes(out);
    return CP_OK;
}

void cp_analysis_sort(struct cp_analysis *a)
{
    if (a->n > 1) /* no findings: findings is NULL, which qsort must not get */
        qsort(a->findings, a->n, sizeof *a->findings, cmp_finding);
}
