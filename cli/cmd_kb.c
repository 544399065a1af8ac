/* cannprof kb: query, show and share what the tuner learned.
 *
 *   kb query  --model X.onnx|X.om [--limit N] [--min-similarity S] [--any-hardware] [--json]
 *   kb card   SESSION | --model X
 *   kb list   [--json]
 *   kb show   SESSION [--json]
 *   kb export [-o FILE]
 *   kb import FILE
 *
 * Every subcommand takes --kb FILE (default: the knowledge base under
 * $XDG_DATA_HOME, see knowledge/kb.h). Schema, similarity and the JSON Lines
 * format: docs/kb-schema.md. */
#include "atc_bridge/convert.h"
#include "om/om.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "knowledge/kb_tuning.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Strategies listed by `query` unless --limit. */
#define QUERY_LIMIT 10
/* Models less similar than this are not consulted by `query`. */
#define QUERY_MIN_SIMILARITY 0.5

enum {
    OPT_HELP = 1,
    OPT_ANY_HW,
    OPT_JSON,
    OPT_KB,
    OPT_LIMIT,
    OPT_MIN_SIM,
    OPT_MODEL,
    OPT_OUTPUT,
};

#define HELP_ROW                                                                                   \
    {                                                                                              \
        "help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"                                 \
    }
#define JSON_ROW                                                                                   \
    {                                                                                              \
        "json", 0, CP_OPT_FLAG, OPT_JSON, NULL, "print JSON"                                       \
    }
#define KB_ROW                                                                                     \
    {                                                                                              \
        "kb", 0, CP_OPT_VALUE, OPT_KB, "FILE",                                                     \
            "knowledge base (default $XDG_DATA_HOME/cannprof/kb.sqlite)"                           \
    }

/* Each table sorted by name. */
static const struct cp_opt query_options[] = {
    {"any-hardware", 0, CP_OPT_FLAG, OPT_ANY_HW, NULL,
     "consult outcomes on any hardware, not only this machine's"},
    HELP_ROW,
    JSON_ROW,
    KB_ROW,
    {"limit", 'n', CP_OPT_VALUE, OPT_LIMIT, "N", "strategies to list (default 10; 0: all)"},
    {"min-similarity", 0, CP_OPT_VALUE, OPT_MIN_SIM, "S",
     "consult models at least this similar, 0..1 (default 0.5)"},
    {"model", 'm', CP_OPT_VALUE, OPT_MODEL, "X", "the model: .onnx, or a .om (its source model)"},
};
static const struct cp_opt card_options[] = {
    HELP_ROW,
    KB_ROW,
    {"model", 'm', CP_OPT_VALUE, OPT_MODEL, "X", "the latest session of this model (.onnx/.om)"},
};
static const struct cp_opt list_options[] = {HELP_ROW, JSON_ROW, KB_ROW};
static const struct cp_opt export_options[] = {
    HELP_ROW,
    KB_ROW,
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "FILE", "write here (default: standard output)"},
};
static const struct cp_opt import_options[] = {HELP_ROW, KB_ROW};
#define N_OF(t) (sizeof t / sizeof t[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: cannprof kb query  --model X.onnx|X.om [--limit N] [--min-similarity S]\n"
               "                          [--any-hardware] [--json] [--kb FILE]\n"
               "       cannprof kb card   SESSION | --model X [--kb FILE]\n"
               "       cannprof kb list   [--json] [--kb FILE]\n"
               "       cannprof kb show   SESSION [--json] [--kb FILE]\n"
               "       cannprof kb export [-o FILE] [--kb FILE]\n"
               "       cannprof kb import FILE [--kb FILE]\n\n"
               "The knowledge base remembers every tuning session: the model's fingerprint, the\n"
               "hardware, each candidate tried with its raw samples, and which changes held.\n"
               "'query' lists the changes that won on the most similar models (what 'tune' tries\n"
               "first), 'card' prints a Markdown summary of a session, 'list' and 'show' the\n"
               "sessions, 'export' and 'import' share them as JSON Lines (importing merges\n"
               "without duplicates).\n\n"
               "The knowledge base is $XDG_DATA_HOME/cannprof/kb.sqlite (else\n"
               "~/.local/share/cannprof/kb.sqlite) unless --kb FILE is given.\n"
               "'cannprof kb <subcommand> --help' shows a subcommand's options.\n");
}

/* Parse a subcommand's options, allowing up to `max_pos` positional
 * arguments; prints help (*rc 0) or the error (*rc 2). Returns whether to go
 * on. */
static bool parse(const char *cmd, const struct cp_opt *t, size_t n, size_t max_pos,
                  const char *synopsis, const char *about, int argc, char **argv, struct cp_args *a,
                  int *rc)
{
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_args_parse(cmd, t, n, argc, argv, a, &d) != CP_OK) {
        cp_cli_error(cmd, d.msg);
        *rc = cp_status_exit_code(d.status);
        return false;
    }
    if (cp_args_has(a, OPT_HELP)) {
        printf("usage: cannprof %s\n\n%s\n\noptions:\n", synopsis, about);
        cp_opts_print_help(stdout, t, n);
        *rc = 0;
        return false;
    }
    if (a->n_positional > max_pos) {
        char msg[256];
        snprintf(msg, sizeof msg, "unexpected argument '%.100s'; see 'cannprof %s --help'",
                 a->positional[max_pos], cmd);
        cp_cli_error(cmd, msg);
        *rc = 2;
        return false;
    }
    return true;
}

static int fail(const char *cmd, const struct cp_diag *d)
{
    cp_cli_error(cmd, d->msg);
    return cp_status_exit_code(d->status);
}

static int usage_error(const char *cmd, const char *msg)
{
    cp_cli_error(cmd, msg);
    return 2;
}

static bool print_buf(const char *cmd, struct cp_buf *b)
{
    if (cp_buf_status(b) != CP_OK) {
        cp_cli_error(cmd, "out of memory");
        return false;
    }
    fputs(b->data ? b->data : "", stdout);
    return true;
}

/* A session id argument. */
static bool parse_session(const char *cmd, const char *s, int64_t *id)
{
    if (!cp_parse_i64(s, id) || *id < 1) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "'%.60s' is not a session id (a whole number from 1; 'cannprof kb list' shows "
                 "them)",
                 s);
        cp_cli_error(cmd, msg);
        return false;
    }
    return true;
}

/* ---- JSON helpers ------------------------------------------------------------ */

static void json_num(struct cp_buf *b, double v)
{
    if (isfinite(v))
        cp_buf_printf(b, "%.6g", v);
    else
        cp_buf_puts(b, "null");
}

static void json_str_or_null(struct cp_buf *b, const char *s)
{
    if (s)
        cp_buf_json_str(b, s);
    else
        cp_buf_puts(b, "null");
}

/* A stored JSON document as a value when it parses, else as a string. */
static void json_embed(struct cp_buf *b, const char *text)
{
    json_t *j = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (s)
        cp_buf_puts(b, s);
    else
        json_str_or_null(b, text);
    free(s);
    json_decref(j);
}

/* ---- the model --------------------------------------------------------------- */

/* "dir/name.onnx" -> "name". */
static void stem(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    snprintf(out, cap, "%s", slash ? slash + 1 : path);
    char *dot = strrchr(out, '.');
    if (dot && dot != out)
        *dot = '\0';
}

/* Fingerprint an ONNX file as the tuner does (import, verify, compact,
 * infer; no input shape overrides). */
static enum cp_status fingerprint_onnx(const char *path, struct cp_kb_fingerprint *fp,
                                       struct cp_diag *d)
{
    struct cp_graph *g = NULL;
    char hash[33] = "", name[128];
    stem(path, name, sizeof name);
    enum cp_status st = cp_onnx_import(path, NULL, 0, &g, hash, d);
    if (st == CP_OK)
        st = cp_graph_verify(g, d);
    if (st == CP_OK)
        st = cp_graph_compact(g, d);
    if (st == CP_OK)
        st = cp_graph_infer(g, d);
    if (st == CP_OK)
        st = cp_kb_fingerprint_graph(g, hash, name, fp, d);
    cp_graph_free(g);
    return st;
}

/* The fingerprint of --model: an .onnx directly; a .om by its source model
 * (the file it names, else the knowledge base's record of its source hash,
 * else, with a note, the converted graph itself). */
static enum cp_status model_fingerprint(const char *cmd, struct cp_kb *kb, const char *path,
                                        struct cp_kb_fingerprint *fp, struct cp_diag *d)
{
    if (!cp_path_has_suffix(path, ".om"))
        return fingerprint_onnx(path, fp, d);
    struct cp_graph *g = NULL;
    struct cp_om_meta meta;
    memset(&meta, 0, sizeof meta);
    enum cp_status st = cp_om_read(path, &g, &meta, d);
    if (st != CP_OK)
        return st;
    bool found = false;
    if (meta.source_path && *meta.source_path && cp_path_exists(meta.source_path)) {
        st = fingerprint_onnx(meta.source_path, fp, d);
        goto out;
    }
    if ((st = cp_kb_model_find_source(kb, meta.source_hash, fp, &found, d)) != CP_OK || found)
        goto out;
    char name[128];
    stem(meta.source_path && *meta.source_path ? meta.source_path : path, name, sizeof name);
    fprintf(stderr,
            "cannprof %s: note: %s's source model %s is gone and unknown to the knowledge "
            "base; fingerprinting the converted graph (fused ops: similarity is approximate)\n",
            cmd, path, meta.source_path && *meta.source_path ? meta.source_path : "(unnamed)");
    st = cp_kb_fingerprint_graph(g, meta.source_hash, name, fp, d);
out:
    cp_graph_free(g);
    cp_om_meta_release(&meta);
    return st;
}

static void fingerprint_json(struct cp_buf *b, const struct cp_kb_fingerprint *fp)
{
    cp_buf_puts(b, "{\"name\":");
    cp_buf_json_str(b, fp->name);
    cp_buf_printf(b,
                  ",\"class\":\"%s\",\"structure_hash\":\"%s\",\"source_hash\":", fp->model_class,
                  fp->structure_hash);
    cp_buf_json_str(b, fp->source_hash);
    cp_buf_printf(b, ",\"params\":%lld,\"flops\":", (long long)fp->params);
    json_num(b, fp->flops);
    cp_buf_printf(b,
                  ",\"nodes\":%d,\"patterns\":{\"attention\":%s,\"conv\":%s,\"layernorm\":%s,"
                  "\"groupnorm\":%s,\"batchnorm\":%s,\"gelu\":%s},\"op_histogram\":",
                  fp->n_nodes, fp->has_attention ? "true" : "false",
                  fp->has_conv ? "true" : "false", fp->has_layernorm ? "true" : "false",
                  fp->has_groupnorm ? "true" : "false", fp->has_batchnorm ? "true" : "false",
                  fp->has_gelu ? "true" : "false");
    json_embed(b, fp->op_histogram_json);
    cp_buf_puts(b, ",\"inputs\":");
    json_embed(b, fp->inputs_json);
    cp_buf_putc(b, '}');
}

/* ---- query ------------------------------------------------------------------- */

static void query_json(struct cp_buf *b, const struct cp_kb_fingerprint *fp,
                       const struct cp_kb_hardware *hw, double min_sim,
                       const struct cp_kb_strategy_hit *h, size_t n)
{
    cp_buf_puts(b, "{\"model\":");
    fingerprint_json(b, fp);
    cp_buf_puts(b, ",\"hardware\":");
    json_str_or_null(b, hw ? hw->signature : NULL);
    cp_buf_puts(b, ",\"min_similarity\":");
    json_num(b, min_sim);
    cp_buf_puts(b, ",\"strategies\":[");
    for (size_t i = 0; i < n; i++) {
        cp_buf_puts(b, i ? ",{\"delta\":" : "{\"delta\":");
        cp_buf_json_str(b, h[i].delta);
        cp_buf_puts(b, ",\"mean_gain\":");
        json_num(b, h[i].mean_gain);
        cp_buf_puts(b, ",\"sd_gain\":");
        json_num(b, h[i].sd_gain);
        cp_buf_printf(b, ",\"held\":%d,\"tried\":%d,\"similarity\":", h[i].count, h[i].tried);
        json_num(b, h[i].similarity);
        cp_buf_puts(b, ",\"score\":");
        json_num(b, h[i].score);
        cp_buf_puts(b, ",\"models\":[");
        const char *p = h[i].models;
        for (int k = 0; p && *p; k++) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(len < 255 ? len : 255), p);
            if (k)
                cp_buf_putc(b, ',');
            cp_buf_json_str(b, name);
            p = comma ? comma + 1 : p + len;
        }
        cp_buf_puts(b, "]}");
    }
    cp_buf_puts(b, "]}\n");
}

static void query_text(const struct cp_kb_fingerprint *fp, const struct cp_kb_hardware *hw,
                       double min_sim, const struct cp_kb_strategy_hit *h, size_t n)
{
    char params[32], flops[32];
    cp_format_si((double)fp->params, params);
    cp_format_si(fp->flops, flops);
    printf("model:    %s (%s; %d nodes, %s parameters, %sFLOP; structure %.12s)\n", fp->name,
           fp->model_class, fp->n_nodes, params, flops, fp->structure_hash);
    if (hw)
        printf("hardware: %s (%s, %d cores)\n", hw->signature, hw->cpu_model, hw->cores);
    else
        printf("hardware: any\n");
    if (n == 0) {
        printf("\nno change has held on a model at least %.2f similar yet; run "
               "'cannprof tune' to teach the knowledge base\n",
               min_sim);
        return;
    }
    printf("\nchanges that held on similar models (similarity >= %.2f), best first:\n\n", min_sim);
    printf("%3s  %-44s %18s %10s %6s  %s\n", "#", "change", "latency gain", "held/tried", "sim",
           "models");
    for (size_t i = 0; i < n; i++) {
        char gain[48];
        if (isnan(h[i].mean_gain))
            snprintf(gain, sizeof gain, "?");
        else
            snprintf(gain, sizeof gain, "%+.1f%% ± %.1f%%", h[i].mean_gain * 100,
                     (isnan(h[i].sd_gain) ? 0 : h[i].sd_gain) * 100);
        char ratio[24];
        snprintf(ratio, sizeof ratio, "%d/%d", h[i].count, h[i].tried);
        printf("%3zu  %-44s %18s %10s %6.2f  %s\n", i + 1, h[i].delta, gain, ratio, h[i].similarity,
               h[i].models);
    }
}

static int cmd_query(int argc, char **argv)
{
    const char *cmd = "kb query";
    struct cp_args a;
    int rc = 0;
    if (!parse(cmd, query_options, N_OF(query_options), 0,
               "kb query --model X.onnx|X.om [--limit N] [--min-similarity S]\n"
               "                        [--any-hardware] [--json] [--kb FILE]",
               "List the changes that held on the models most similar to X on this machine's\n"
               "hardware, with the observed latency gain (mean ± sd over the times it held),\n"
               "how often it held of how often it was tried, and the models it held on: what\n"
               "'cannprof tune' tries first. Similarity and ranking: docs/kb-schema.md.",
               argc, argv, &a, &rc))
        return rc;
    const char *model = cp_args_get(&a, OPT_MODEL);
    if (!model)
        return usage_error(cmd, "--model X.onnx|X.om is required");
    int64_t limit = QUERY_LIMIT;
    const char *v = cp_args_get(&a, OPT_LIMIT);
    if (v && (!cp_parse_i64(v, &limit) || limit < 0))
        return usage_error(cmd, "--limit takes a whole number (0: all)");
    double min_sim = QUERY_MIN_SIMILARITY;
    v = cp_args_get(&a, OPT_MIN_SIM);
    if (v) {
        char *end = NULL;
        min_sim = strtod(v, &end);
        if (!end || end == v || *end || !(min_sim >= 0 && min_sim <= 1))
            return usage_error(cmd, "--min-similarity takes a number from 0 to 1");
    }
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_kb_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    struct cp_kb_strategy_hit *hits = NULL;
    size_t n = 0;
    struct cp_kb_hardware hw;
    cp_kb_hardware_detect(&hw);
    const struct cp_kb_hardware *hwp = cp_args_has(&a, OPT_ANY_HW) ? NULL : &hw;
    if (cp_kb_open(cp_args_get(&a, OPT_KB), &kb, &d) != CP_OK ||
        model_fingerprint(cmd, kb, model, &fp, &d) != CP_OK ||
        cp_kb_query_strategies(kb, &fp, hwp, min_sim, false, (size_t)limit, &hits, &n, &d) !=
            CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (cp_args_has(&a, OPT_JSON)) {
        struct cp_buf b;
        cp_buf_init(&b);
        query_json(&b, &fp, hwp, min_sim, hits, n);
        rc = print_buf(cmd, &b) ? 0 : 3;
        cp_buf_release(&b);
    } else {
        query_text(&fp, hwp, min_sim, hits, n);
    }
out:
    cp_kb_strategy_hits_free(hits, n);
    cp_kb_fingerprint_release(&fp);
    cp_kb_close(kb);
    return rc;
}

/* ---- card -------------------------------------------------------------------- */

static int cmd_card(int argc, char **argv)
{
    const char *cmd = "kb card";
    struct cp_args a;
    int rc = 0;
    if (!parse(cmd, card_options, N_OF(card_options), 1, "kb card SESSION | --model X [--kb FILE]",
               "Print a Markdown knowledge card of a tuning session: the scenario (model,\n"
               "hardware, target, constraints), the core bottlenecks, the effective changes\n"
               "with their measured gains, and the result (latency ↓, throughput ↑, memory,\n"
               "precision, the best configuration). With --model: the model's latest finished\n"
               "session.",
               argc, argv, &a, &rc))
        return rc;
    const char *model = cp_args_get(&a, OPT_MODEL);
    if ((a.n_positional == 1) == (model != NULL))
        return usage_error(cmd, "give a session id or --model X (one of them)");
    int64_t id = 0;
    if (!model && !parse_session(cmd, a.positional[0], &id))
        return 2;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_kb_fingerprint fp;
    memset(&fp, 0, sizeof fp);
    struct cp_buf b;
    cp_buf_init(&b);
    enum cp_status st = cp_kb_open(cp_args_get(&a, OPT_KB), &kb, &d);
    if (st == CP_OK && model && (st = model_fingerprint(cmd, kb, model, &fp, &d)) == CP_OK)
        st = cp_kb_card_model(kb, &fp, &b, &d);
    else if (st == CP_OK && !model)
        st = cp_kb_card_session(kb, id, &b, &d);
    if (st != CP_OK)
        rc = fail(cmd, &d);
    else
        rc = print_buf(cmd, &b) ? 0 : 3;
    cp_buf_release(&b);
    cp_kb_fingerprint_release(&fp);
    cp_kb_close(kb);
    return rc;
}

/* ---- list and show ----------------------------------------------------------- */

/* Latency change of a session in percent (negative: faster); NaN unknown. */
static double delta_pct(const struct cp_kb_session *s)
{
    if (isnan(s->baseline_median_ns) || isnan(s->best_median_ns) || s->baseline_median_ns <= 0)
        return NAN;
    return (s->best_median_ns - s->baseline_median_ns) / s->baseline_median_ns * 100;
}

static void session_json(struct cp_buf *b, const struct cp_kb_session *s, bool full)
{
    cp_buf_printf(b, "{\"id\":%lld,\"uid\":", (long long)s->id);
    json_str_or_null(b, s->uid);
    cp_buf_puts(b, ",\"key\":");
    json_str_or_null(b, s->key);
    cp_buf_puts(b, ",\"model\":");
    json_str_or_null(b, s->model_name);
    cp_buf_puts(b, ",\"model_path\":");
    json_str_or_null(b, s->model_path);
    cp_buf_puts(b, ",\"hardware\":");
    json_str_or_null(b, s->hw_signature);
    cp_buf_puts(b, ",\"target\":");
    json_str_or_null(b, s->target);
    cp_buf_puts(b, ",\"constraints\":");
    json_str_or_null(b, s->constraints);
    cp_buf_puts(b, ",\"status\":");
    json_str_or_null(b, s->status);
    cp_buf_puts(b, ",\"created_at\":");
    json_str_or_null(b, s->created_at);
    cp_buf_puts(b, ",\"updated_at\":");
    json_str_or_null(b, s->updated_at);
    cp_buf_printf(b, ",\"budget\":%d,\"evaluations\":%d,\"baseline_ms\":", s->budget,
                  s->evaluations);
    json_num(b, s->baseline_median_ns / 1e6);
    cp_buf_puts(b, ",\"best_ms\":");
    json_num(b, s->best_median_ns / 1e6);
    cp_buf_puts(b, ",\"delta_pct\":");
    json_num(b, delta_pct(s));
    cp_buf_puts(b, ",\"stop_reason\":");
    json_str_or_null(b, s->stop_reason);
    if (full) {
        cp_buf_printf(b, ",\"best_candidate\":%lld,\"out_dir\":", (long long)s->best_candidate_id);
        json_str_or_null(b, s->out_dir);
        cp_buf_puts(b, ",\"baseline_config\":");
        json_embed(b, s->baseline_config_json);
        cp_buf_puts(b, ",\"best_config\":");
        json_embed(b, s->best_config_json);
    }
    cp_buf_putc(b, '}');
}

static void ms_or_dash(char out[32], double ns)
{
    if (isnan(ns))
        snprintf(out, 32, "-");
    else
        snprintf(out, 32, "%.3f", ns / 1e6);
}

static int cmd_list(int argc, char **argv)
{
    const char *cmd = "kb list";
    struct cp_args a;
    int rc = 0;
    if (!parse(cmd, list_options, N_OF(list_options), 0, "kb list [--json] [--kb FILE]",
               "List the tuning sessions, oldest first: model, target, status, evaluations,\n"
               "baseline and best median latency, and the change.",
               argc, argv, &a, &rc))
        return rc;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_kb_session *s = NULL;
    size_t n = 0;
    if (cp_kb_open(cp_args_get(&a, OPT_KB), &kb, &d) != CP_OK ||
        cp_kb_session_list(kb, &s, &n, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (cp_args_has(&a, OPT_JSON)) {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_buf_putc(&b, '[');
        for (size_t i = 0; i < n; i++) {
            if (i)
                cp_buf_putc(&b, ',');
            session_json(&b, &s[i], false);
        }
        cp_buf_puts(&b, "]\n");
        rc = print_buf(cmd, &b) ? 0 : 3;
        cp_buf_release(&b);
        goto out;
    }
    if (n == 0) {
        printf("no tuning sessions in %s yet\n", cp_kb_path(kb));
        goto out;
    }
    printf("%5s  %-24s %-7s %-12s %7s  %22s %8s  %s\n", "id", "model", "target", "status", "evals",
           "baseline → best ms", "Δ", "created");
    for (size_t i = 0; i < n; i++) {
        char b0[32], b1[32], dp[32], evals[24], lat[72];
        ms_or_dash(b0, s[i].baseline_median_ns);
        ms_or_dash(b1, s[i].best_median_ns);
        double p = delta_pct(&s[i]);
        if (isnan(p))
            snprintf(dp, sizeof dp, "-");
        else
            snprintf(dp, sizeof dp, "%+.1f%%", p);
        snprintf(evals, sizeof evals, "%d/%d", s[i].evaluations, s[i].budget);
        snprintf(lat, sizeof lat, "%s → %s", b0, b1);
        printf("%5lld  %-24.24s %-7s %-12s %7s  %24s %8s  %s\n", (long long)s[i].id,
               s[i].model_name && *s[i].model_name ? s[i].model_name : "-",
               s[i].target ? s[i].target : "-", s[i].status, evals, lat, dp, s[i].created_at);
    }
out:
    cp_kb_session_list_free(s, n);
    cp_kb_close(kb);
    return rc;
}

static void candidate_json(struct cp_buf *b, const struct cp_kb_candidate *c)
{
    cp_buf_printf(b, "{\"id\":%lld,\"step\":%d,\"delta\":", (long long)c->id, c->step);
    json_str_or_null(b, c->delta);
    cp_buf_puts(b, ",\"source\":");
    json_str_or_null(b, c->source);
    cp_buf_puts(b, ",\"status\":");
    json_str_or_null(b, c->status);
    cp_buf_puts(b, ",\"reason\":");
    json_str_or_null(b, c->reason);
    const char *keys[] = {"expected_gain",  "measured_gain", "ci_lo",     "ci_hi", "p",
                          "precision_loss", "median_ns",     "throughput"};
    const double vals[] = {c->expected_gain,  c->measured_gain, c->ci_lo,     c->ci_hi, c->p,
                           c->precision_loss, c->median_ns,     c->throughput};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        cp_buf_printf(b, ",\"%s\":", keys[i]);
        json_num(b, vals[i]);
    }
    cp_buf_printf(b, ",\"memory_bytes\":%llu,\"config_id\":", (unsigned long long)c->memory_bytes);
    json_str_or_null(b, c->config_id);
    cp_buf_puts(b, ",\"om_path\":");
    json_str_or_null(b, c->om_path);
    cp_buf_puts(b, ",\"trace_path\":");
    json_str_or_null(b, c->trace_path);
    cp_buf_puts(b, ",\"config\":");
    json_embed(b, c->config_json);
    cp_buf_puts(b, ",\"created_at\":");
    json_str_or_null(b, c->created_at);
    cp_buf_putc(b, '}');
}

static void pct_or_dash(char out[32], double frac)
{
    if (isnan(frac))
        snprintf(out, 32, "-");
    else
        snprintf(out, 32, "%+.1f%%", frac * 100);
}

static void show_text(const struct cp_kb_session *s, const struct cp_kb_candidate *c, size_t n)
{
    char b0[32], b1[32];
    ms_or_dash(b0, s->baseline_median_ns);
    ms_or_dash(b1, s->best_median_ns);
    printf("session:     %lld (%s)\n", (long long)s->id, s->uid);
    printf("model:       %s (%s)\n", s->model_name && *s->model_name ? s->model_name : "-",
           s->model_path ? s->model_path : "-");
    printf("hardware:    %s\n", s->hw_signature && *s->hw_signature ? s->hw_signature : "-");
    printf("target:      %s, constraints %s\n", s->target ? s->target : "-",
           s->constraints && *s->constraints ? s->constraints : "none");
    printf("status:      %s (%d of %d evaluations)%s%s\n", s->status, s->evaluations, s->budget,
           s->stop_reason ? ", " : "", s->stop_reason ? s->stop_reason : "");
    double p = delta_pct(s);
    if (isnan(p))
        printf("latency:     %s → %s ms\n", b0, b1);
    else
        printf("latency:     %s → %s ms (%+.1f%%)\n", b0, b1, p);
    printf("when:        %s to %s\n", s->created_at, s->updated_at);
    if (s->out_dir)
        printf("output:      %s\n", s->out_dir);
    printf("\n%4s  %-9s %-28s %-40s %9s %19s %8s  %s\n", "step", "status", "source", "change",
           "gain", "95% CI", "ms", "reason");
    for (size_t i = 0; i < n; i++) {
        char g[32], lo[32], hi[32], ci[72], ms[32];
        pct_or_dash(g, c[i].measured_gain);
        pct_or_dash(lo, c[i].ci_lo);
        pct_or_dash(hi, c[i].ci_hi);
        if (isnan(c[i].ci_lo) && isnan(c[i].ci_hi))
            snprintf(ci, sizeof ci, "-");
        else
            snprintf(ci, sizeof ci, "[%s, %s]", lo, hi);
        ms_or_dash(ms, c[i].median_ns);
        printf("%4d  %-9s %-28s %-40s %9s %19s %8s  %s\n", c[i].step, c[i].status,
               c[i].source ? c[i].source : "-", c[i].delta && *c[i].delta ? c[i].delta : "(none)",
               g, ci, ms, c[i].reason ? c[i].reason : "");
    }
}

static int cmd_show(int argc, char **argv)
{
    const char *cmd = "kb show";
    struct cp_args a;
    int rc = 0;
    if (!parse(cmd, list_options, N_OF(list_options), 1, "kb show SESSION [--json] [--kb FILE]",
               "Show a tuning session and every candidate it evaluated, by step: status,\n"
               "source, change, measured gain with its 95% interval, median latency, and why\n"
               "it was accepted or rejected.",
               argc, argv, &a, &rc))
        return rc;
    if (a.n_positional != 1)
        return usage_error(cmd, "give the session id ('cannprof kb list' shows them)");
    int64_t id = 0;
    if (!parse_session(cmd, a.positional[0], &id))
        return 2;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_kb_session s;
    memset(&s, 0, sizeof s);
    struct cp_kb_candidate *c = NULL;
    size_t n = 0;
    if (cp_kb_open(cp_args_get(&a, OPT_KB), &kb, &d) != CP_OK ||
        cp_kb_session_get(kb, id, &s, &d) != CP_OK ||
        cp_kb_candidate_list(kb, id, &c, &n, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (cp_args_has(&a, OPT_JSON)) {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_buf_puts(&b, "{\"session\":");
        session_json(&b, &s, true);
        cp_buf_puts(&b, ",\"candidates\":[");
        for (size_t i = 0; i < n; i++) {
            if (i)
                cp_buf_putc(&b, ',');
            candidate_json(&b, &c[i]);
        }
        cp_buf_puts(&b, "]}\n");
        rc = print_buf(cmd, &b) ? 0 : 3;
        cp_buf_release(&b);
    } else {
        show_text(&s, c, n);
    }
out:
    cp_kb_candidate_list_free(c, n);
    cp_kb_session_release(&s);
    cp_kb_close(kb);
    return rc;
}

/* ---- export and import ------------------------------------------------------- */

static int cmd_export(int argc, char **argv)
{
    const char *cmd = "kb export";
    struct cp_args a;
    int rc = 0;
    if (!parse(cmd, export_options, N_OF(export_options), 0, "kb export [-o FILE] [--kb FILE]",
               "Write the whole knowledge base as JSON Lines (one record a line, with natural\n"
               "keys instead of row ids; format in docs/kb-schema.md), for 'kb import' on\n"
               "another machine.",
               argc, argv, &a, &rc))
        return rc;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_buf b;
    cp_buf_init(&b);
    const char *out = cp_args_get(&a, OPT_OUTPUT);
    if (cp_kb_open(cp_args_get(&a, OPT_KB), &kb, &d) != CP_OK ||
        cp_kb_export_jsonl(kb, &b, &d) != CP_OK ||
        (out && cp_file_write_atomic(out, b.data ? b.data : "", b.len, &d) != CP_OK)) {
        rc = fail(cmd, &d);
        goto done;
    }
    if (!out)
        rc = print_buf(cmd, &b) ? 0 : 3;
done:
    cp_buf_release(&b);
    cp_kb_close(kb);
    return rc;
}

static int cmd_import(int argc, char **argv)
{
    const char *cmd = "kb import";
    struct cp_args a;
    int rc = 0;
    if (!parse(cmd, import_options, N_OF(import_options), 1, "kb import FILE [--kb FILE]",
               "Merge a JSON Lines file from 'kb export' into the knowledge base, in one\n"
               "transaction. Records already present (by natural key) are skipped, so importing\n"
               "a file twice adds nothing; a bad line is reported as FILE:LINE and nothing is\n"
               "imported.",
               argc, argv, &a, &rc))
        return rc;
    if (a.n_positional != 1)
        return usage_error(cmd, "give the JSON Lines file to import");
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    size_t added = 0;
    if (cp_kb_open(cp_args_get(&a, OPT_KB), &kb, &d) != CP_OK ||
        cp_kb_import_jsonl(kb, a.positional[0], &added, &d) != CP_OK)
        rc = fail(cmd, &d);
    else
        printf("imported %zu new record%s from %s into %s\n", added, added == 1 ? "" : "s",
               a.positional[0], cp_kb_path(kb));
    cp_kb_close(kb);
    return rc;
}

/* ---- dispatch ---------------------------------------------------------------- */

int cp_cmd_kb(int argc, char **argv)
{
    static const struct cp_subcommand subs[] = {
        {"card", cmd_card}, {"export", cmd_export}, {"import", cmd_import},
        {"list", cmd_list}, {"query", cmd_query},   {"show", cmd_show},
    };
    return cp_cli_dispatch("kb", subs, sizeof subs / sizeof subs[0],
                           "query, card, list, show, export, import", usage, argc, argv);
}
