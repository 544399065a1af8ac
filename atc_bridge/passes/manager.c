/* The pass manager: the registry of every pass (the six family tables in
 * their fixed order), lookup and listing for the CLI, and the run loop that
 * keeps the graph valid between passes and records what each one did.
 *
 * Between passes the graph is always compacted (node array in topological
 * order, no dead nodes), verified and inferred, so each pass may walk the
 * node array in order and trust every shape. */
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/pass.h"
#include "core/host.h"
#include "core/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    const struct cp_pass *table;
} families[] = {
    {"cleanup", cp_cleanup_passes},     {"batch", cp_batch_passes},
    {"quant", cp_quant_passes},         {"fusion", cp_fusion_passes},
    {"attention", cp_attention_passes}, {"layout", cp_layout_passes},
    {"precision", cp_precision_passes},
};
#define N_FAMILIES (sizeof families / sizeof *families)

/* The pass at run-order index i, and its family's name. */
static const struct cp_pass *pass_at(size_t i, const char **family)
{
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (const struct cp_pass *p = families[f].table; p->name; p++) {
            if (i == 0) {
                if (family)
                    *family = families[f].name;
                return p;
            }
            i--;
        }
    return NULL;
}

size_t cp_pass_count(void)
{
    size_t n = 0;
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (const struct cp_pass *p = families[f].table; p->name; p++)
            n++;
    return n;
}

bool cp_pass_describe(size_t i, struct cp_pass_desc *out)
{
    const char *family = NULL;
    const struct cp_pass *p = pass_at(i, &family);
    if (!p)
        return false;
    out->name = p->name;
    out->group = p->group;
    out->family = family;
    out->description = p->description;
    return true;
}

bool cp_pass_family_is_fusion(const char *family)
{
    return family && strcmp(family, "layout") != 0 && strcmp(family, "precision") != 0 &&
           strcmp(family, "quant") != 0;
}

int cp_pass_index(const char *name)
{
    int i = 0;
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (const struct cp_pass *p = families[f].table; p->name; p++, i++)
            if (strcmp(p->name, name) == 0)
                return i;
    return -1;
}

const struct cp_pass *cp_pass_lookup(const char *name)
{
    int i = cp_pass_index(name);
    return i < 0 ? NULL : pass_at((size_t)i, NULL);
}

/* ---- target ------------------------------------------------------------------ */

void cp_pass_target_detect(struct cp_pass_target *t)
{
    memset(t, 0, sizeof *t);
    struct cp_host *h = malloc(sizeof *h);
    if (!h)
        return;
    cp_host_detect(h);
    t->has_bf16 = h->has_bf16;
    t->has_fp16 = h->has_fp16;
    t->has_vnni = cp_host_has_flag(h, "avx512_vnni");
    t->vector_floats = cp_host_has_flag(h, "avx512f") ? 16 : 8;
    snprintf(t->cpu_model, sizeof t->cpu_model, "%s", h->cpu_model);
    free(h);
}

/* ---- records ----------------------------------------------------------------- */

void cp_pass_report_release(struct cp_pass_report *r)
{
    if (!r)
        return;
    free(r->records);
    r->records = NULL;
    r->n = 0;
}

void cp_pass_report_json(const struct cp_pass_report *r, struct cp_buf *out)
{
    json_t *arr = json_array();
    bool ok = arr != NULL;
    for (size_t i = 0; ok && i < r->n; i++) {
        const struct cp_pass_record *p = &r->records[i];
        json_t *o = json_object();
        ok = o && cp_json_set_str(o, "name", p->name) && cp_json_set_str(o, "group", p->group) &&
             cp_json_set_bool(o, "ran", p->ran) && cp_json_set_bool(o, "changed", p->changed) &&
             cp_json_set_int(o, "nodes_before", (int64_t)p->nodes_before) &&
             cp_json_set_int(o, "nodes_after", (int64_t)p->nodes_after) &&
             (!p->final || cp_json_set_bool(o, "final", true));
        ok = ok ? cp_json_push(arr, o) : (json_decref(o), false);
    }
    if (!ok || cp_json_dump(arr, false, out) != CP_OK)
        out->failed = true;
    json_decref(arr);
}

/* ---- running ------------------------------------------------------------------ */

/* Compact, verify, infer: what every changed graph goes through. `what`
 * says which step of the conversion left the graph, for the message. */
static enum cp_status settle(struct cp_graph *g, const char *what, struct cp_diag *d)
{
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st = cp_graph_compact(g, &local);
    if (st == CP_OK)
        st = cp_graph_verify(g, &local);
    if (st != CP_OK)
        return cp_diag_set(d, st, "%s left an invalid graph: %s", what, local.msg);
    st = cp_graph_infer(g, &local);
    if (st != CP_OK)
        return cp_diag_set(d, st, "%s: shape inference failed afterwards: %s", what, local.msg);
    return CP_OK;
}

static enum cp_status run_pass(struct cp_pass_ctx *ctx, const struct cp_pass *p, bool *changed,
                               struct cp_diag *d)
{
    char what[160];
    snprintf(what, sizeof what, "pass %s", p->name);
    struct cp_diag local;
    cp_diag_init(&local);
    ctx->d = &local;
    *changed = false;
    ctx->pass_name = p->name;
    enum cp_status st = p->run(ctx, changed);
    ctx->d = d;
    if (st != CP_OK)
        return cp_diag_set(d, st, "%s: %s", what, local.msg[0] ? local.msg : cp_status_str(st));
    return *changed ? settle(ctx->g, what, d) : CP_OK;
}

/* The passes inside control flow: If branches and Loop/Scan bodies, at
 * any depth, get ConstantFoldingPass and DeadNodeEliminationPass, folding
 * only what initializers determine (in_subgraph), then the fusion family
 * (Conv/MatMul epilogues, norms, Gelu, QDQ), then a last sweep of what the
 * fusions orphaned; each unless switched off. Silero's LSTM gates, sliced
 * and concatenated from weights in every run, become initializers, and the
 * Conv -> Relu chains of its sample-rate branches run as FusedConv, as they
 * would outside. Batch, attention, layout and precision stay at the top
 * level: they change shapes, layouts or dtypes a branch hands back. OUT:
 * *changed. */
static enum cp_status clean_subgraphs(const struct cp_pass_ctx *ctx, const bool *off, int depth,
                                      bool *changed, struct cp_diag *d)
{
    static const char *const names[] = {"ConstantFoldingPass", "DeadNodeEliminationPass"};
    struct cp_graph *g = ctx->g;
    if (depth > 16) /* the importer refuses deeper nesting */
        return CP_OK;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        struct cp_node *n = cp_graph_node(g, (int32_t)i);
        for (size_t j = 0; !n->dead && j < n->n_attrs; j++) {
            if (n->attrs[j].type != CP_ATTR_GRAPH || !n->attrs[j].graph)
                continue;
            struct cp_pass_ctx sc = *ctx;
            sc.g = n->attrs[j].graph;
            sc.in_subgraph = true;
            /* A branch that cannot take the shapes this model gives it
             * (Silero's 8 kHz branch on 16 kHz chunks) stands aside at
             * run time, as in inference: leave it as it is. */
            if (cp_graph_infer(sc.g, NULL) != CP_OK)
                continue;
            int cf = cp_pass_index("ConstantFoldingPass");
            enum cp_status st = CP_OK;
            if (cf >= 0 && !off[cf] &&
                (st = cp_control_borrow_constants(g, n, sc.g, changed, d)) != CP_OK)
                return st;
            for (size_t k = 0; k < sizeof names / sizeof *names && st == CP_OK; k++) {
                int pi = cp_pass_index(names[k]);
                bool ch = false;
                if (pi >= 0 && !off[pi])
                    st = run_pass(&sc, pass_at((size_t)pi, NULL), &ch, d);
                *changed = *changed || ch;
            }
            bool fused = false;
            for (const struct cp_pass *p = cp_fusion_passes; p->name && st == CP_OK; p++) {
                bool ch = false;
                if (!off[cp_pass_index(p->name)])
                    st = run_pass(&sc, p, &ch, d);
                fused = fused || ch;
            }
            int dne = cp_pass_index("DeadNodeEliminationPass");
            if (st == CP_OK && fused && dne >= 0 && !off[dne]) {
                bool ch = false;
                st = run_pass(&sc, pass_at((size_t)dne, NULL), &ch, d);
            }
            *changed = *changed || fused;
            if (st == CP_OK)
                st = clean_subgraphs(&sc, off, depth + 1, changed, d);
            if (st == CP_OK)
                st = cp_graph_remove_unused_tensors(sc.g, NULL, d);
            if (st != CP_OK)
                return st;
            n = cp_graph_node(g, (int32_t)i);
        }
    }
    return CP_OK;
}

static void ctx_init(struct cp_pass_ctx *ctx, struct cp_graph *g, const struct cp_convert_config *c,
                     const struct cp_pass_target *target, const struct cp_log *log,
                     struct cp_diag *d)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->g = g;
    ctx->config = c;
    ctx->d = d;
    ctx->log = log;
    ctx->has_bf16 = target->has_bf16;
    ctx->has_fp16 = target->has_fp16;
    ctx->has_vnni = target->has_vnni;
    ctx->vector_floats = target->vector_floats;
    ctx->cpu_model = target->cpu_model;
}

enum cp_status cp_passes_run(struct cp_graph *g, const struct cp_convert_config *c,
                             const struct cp_pass_target *target, const struct cp_log *log,
                             struct cp_pass_report *report, struct cp_diag *d)
{
    if (report)
        memset(report, 0, sizeof *report);
    struct cp_convert_config dflt;
    if (!c) {
        cp_convert_config_init(&dflt);
        c = &dflt;
    }
    struct cp_pass_target detected;
    if (!target) {
        cp_pass_target_detect(&detected);
        target = &detected;
    }
    const struct cp_log warn_log = {CP_LOG_WARNING, NULL};
    if (!log)
        log = &warn_log;

    size_t n = cp_pass_count();
    bool *off = cp_calloc(n + 1, sizeof *off);
    struct cp_pass_record *rec = cp_calloc(n + 1, sizeof *rec);
    if (!off || !rec) {
        free(off);
        free(rec);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory running the conversion passes");
    }
    enum cp_status st = cp_fusion_switches_decide(c->fusion_switches, off, d);
    if (st != CP_OK)
        goto out;

    struct cp_pass_ctx ctx;
    ctx_init(&ctx, g, c, target, log, d);
    for (size_t i = 0; i < n; i++) {
        const struct cp_pass *p = pass_at(i, NULL);
        struct cp_pass_record *r = &rec[i];
        r->name = p->name;
        r->group = p->group;
        r->ran = !off[i];
        r->nodes_before = cp_graph_n_live_nodes(g);
        if (r->ran && (st = run_pass(&ctx, p, &r->changed, d)) != CP_OK)
            goto out;
        r->nodes_after = cp_graph_n_live_nodes(g);
        cp_log_msg(log, CP_LOG_INFO, "pass %s: %s, %zu -> %zu nodes", p->name,
                   !r->ran      ? "switched off"
                   : r->changed ? "changed the graph"
                                : "no change",
                   r->nodes_before, r->nodes_after);
    }

    bool sub_changed = false;
    if ((st = clean_subgraphs(&ctx, off, 0, &sub_changed, d)) != CP_OK ||
        (sub_changed && (st = settle(g, "the cleanup of subgraphs", d)) != CP_OK))
        goto out;

    /* The closing sweep: what the fusions orphaned goes, and so do the
     * tensors nothing reads any more, so they stay out of the .om. */
    struct cp_pass_record *r = &rec[n];
    int dne = cp_pass_index("DeadNodeEliminationPass");
    r->name = "DeadNodeEliminationPass";
    r->group = "GraphFusion";
    r->final = true;
    r->ran = dne >= 0 && !off[dne];
    r->nodes_before = cp_graph_n_live_nodes(g);
    if (r->ran && (st = run_pass(&ctx, pass_at((size_t)dne, NULL), &r->changed, d)) != CP_OK)
        goto out;
    if ((st = cp_graph_compact(g, d)) != CP_OK ||
        (st = cp_graph_remove_unused_tensors(g, NULL, d)) != CP_OK ||
        (st = settle(g, "the conversion passes", d)) != CP_OK)
        goto out;
    r->nodes_after = cp_graph_n_live_nodes(g);
    if (report) {
        report->records = rec;
        report->n = n + 1;
        rec = NULL;
    }
out:
    free(rec);
    free(off);
    return st;
}

enum cp_status cp_pass_run_one(struct cp_graph *g, const char *name,
                               const struct cp_convert_config *c, bool *changed, struct cp_diag *d)
{
    bool ch = false;
    if (changed)
        *changed = false;
    const struct cp_pass *p = cp_pass_lookup(name);
    if (!p)
        return cp_diag_set(d, CP_ERR_USAGE, "no conversion pass is called '%s'", name);
    struct cp_convert_config dflt;
    if (!c) {
        cp_convert_config_init(&dflt);
        c = &dflt;
    }
    struct cp_pass_target target;
    cp_pass_target_detect(&target);
    const struct cp_log log = {CP_LOG_WARNING, NULL};
    struct cp_pass_ctx ctx;
    ctx_init(&ctx, g, c, &target, &log, d);
    enum cp_status st = run_pass(&ctx, p, &ch, d);
    if (changed)
        *changed = ch;
    return st;
}
