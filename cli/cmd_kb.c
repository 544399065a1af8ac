/* cannprof kb: query, show and share what the tuner learned.
 *
 *   kb query  --model X.onnx|X.om [--limit N] [--min-similarity S] [--any-hardware] [--json]
 *   kb card   SESSION | --model X
 *   kb list   [--json]
 *   kb show   SESSION [--json]
 *   kb export [-o FILE]
 *   kb import FILE [--json]
 *
 * Every subcommand takes --kb FILE (default: the knowledge base under
 * $XDG_DATA_HOME, see knowledge/kb.h). Schema, similarity and the JSON Lines
 * format: docs/kb-schema.md. */
#include "atc_bridge/convert.h"
#include "om/om.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "knowledge/kb_tuning.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Strategies listed by `query` unless --limit. */
#define QUERY_LIMIT 10
/* Models less similar than this are not consulted by `query`. */
#define QUERY_MIN_SIMILARITY 0.5

enum {
    OPT_ANY_HW = 1,
    OPT_LIMIT,
    OPT_MIN_SIM,
    OPT_MODEL,
    OPT_OUTPUT,
};

#define EXIT_CODES_KB                                                                              \
    "0 ok, 2 bad usage or input (a session or model that is not there, a file that cannot be "     \
    "read), 3 environment failure (the knowledge base or an output cannot be opened or written)"

static const struct cp_opt query_own[] = {
    {"any-hardware", 0, CP_OPT_FLAG, OPT_ANY_HW, NULL,
     "consult outcomes on any hardware, not only this machine's"},
    {"limit", 0, CP_OPT_VALUE, OPT_LIMIT, "N", "strategies to list (default 10; 0: all)"},
    {"min-similarity", 0, CP_OPT_VALUE, OPT_MIN_SIM, "S",
     "consult models at least this similar, 0..1 (default 0.5)"},
    {"model", 'm', CP_OPT_VALUE, OPT_MODEL, "X", "the model: .onnx, or a .om (its source model)"},
};
static const struct cp_opt_use query_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, NULL},
    {CP_SO_KB, NULL},
};
static const struct cp_command_opts QUERY = {
    .cmd = "kb query",
    .own = query_own,
    .n_own = sizeof query_own / sizeof query_own[0],
    .shared = query_shared,
    .n_shared = sizeof query_shared / sizeof query_shared[0],
    .usage = "usage: cannprof kb query --model X.onnx|X.om [--limit N] [--min-similarity S]\n"
             "                        [--any-hardware] [--json] [--kb FILE]\n\n"
             "List the changes that held on the models most similar to X on this machine's\n"
             "hardware, with the observed latency gain (mean ± sd over the times it held),\n"
             "how often it held of how often it was tried, and the models it held on: what\n"
             "'cannprof tune' tries first. Similarity and ranking: docs/kb-schema.md.\n",
    .exit_codes = EXIT_CODES_KB,
};

static const struct cp_opt card_own[] = {
    {"model", 'm', CP_OPT_VALUE, OPT_MODEL, "X", "the latest session of this model (.onnx/.om)"},
};
static const struct cp_opt_use kb_only[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_KB, NULL},
};
static const struct cp_command_opts CARD = {
    .cmd = "kb card",
    .own = card_own,
    .n_own = sizeof card_own / sizeof card_own[0],
    .shared = kb_only,
    .n_shared = sizeof kb_only / sizeof kb_only[0],
    .usage = "usage: cannprof kb card SESSION | --model X [--kb FILE]\n\n"
             "Print a Markdown knowledge card of a tuning session: the scenario (model,\n"
             "hardware, target, constraints), the core bottlenecks, the effective changes\n"
             "with their measured gains, and the result (latency ↓, throughput ↑, memory,\n"
             "precision, the best configuration). With --model: the model's latest finished\n"
             "session.\n",
    .exit_codes = EXIT_CODES_KB,
};

static const struct cp_opt_use json_kb[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, NULL},
    {CP_SO_KB, NULL},
};
static const struct cp_command_opts LIST = {
    .cmd = "kb list",
    .shared = json_kb,
    .n_shared = sizeof json_kb / sizeof json_kb[0],
    .usage = "usage: cannprof kb list [--json] [--kb FILE]\n\n"
             "List the tuning sessions, oldest first: model, target, status, evaluations,\n"
             "baseline and best median latency, and the change.\n",
    .exit_codes = EXIT_CODES_KB,
};
static const struct cp_command_opts SHOW = {
    .cmd = "kb show",
    .shared = json_kb,
    .n_shared = sizeof json_kb / sizeof json_kb[0],
    .usage = "usage: cannprof kb show SESSION [--json] [--kb FILE]\n\n"
             "Show a tuning session and every candidate it evaluated, by step: status,\n"
             "source, change, measured gain with its 95% interval, median latency, and why\n"
             "it was accepted or rejected.\n",
    .exit_codes = EXIT_CODES_KB,
};

static const struct cp_opt export_own[] = {
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "FILE", "write here (default: standard output)"},
};
static const struct cp_command_opts EXPORT = {
    .cmd = "kb export",
    .own = export_own,
    .n_own = sizeof export_own / sizeof export_own[0],
    .shared = kb_only,
    .n_shared = sizeof kb_only / sizeof kb_only[0],
    .usage = "usage: cannprof kb export [-o FILE] [--kb FILE]\n\n"
             "Write the whole knowledge base as JSON Lines (one record a line, with natural\n"
             "keys instead of row ids; format in docs/kb-schema.md), for 'kb import' on\n"
             "another machine.\n",
    .exit_codes = "0 exported, 2 bad usage, 3 environment failure (the knowledge base cannot be "
                  "read, FILE cannot be written)",
};

static const struct cp_opt_use import_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print what was imported as JSON: file, kb, added"},
    {CP_SO_KB, NULL},
};
static const struct cp_command_opts IMPORT = {
    .cmd = "kb import",
    .shared = import_shared,
    .n_shared = sizeof import_shared / sizeof import_shared[0],
    .usage = "usage: cannprof kb import FILE [--kb FILE] [--json]\n\n"
             "Merge a JSON Lines file from 'kb export' into the knowledge base, in one\n"
             "transaction. Records already present (by natural key) are skipped, so importing\n"
             "a file twice adds nothing; a bad line is reported as FILE:LINE and nothing is\n"
             "imported.\n",
    .exit_codes = "0 imported, 2 bad usage or input (FILE cannot be read, a bad line), 3 "
                  "environment failure (the knowledge base cannot be opened or written)",
};

static void usage(FILE *f)
{
    fprintf(f, "usage: cannprof kb query  --model X.onnx|X.om [--limit N] [--min-similarity S]\n"
               "                          [--any-hardware] [--json] [--kb FILE]\n"
               "       cannprof kb card   SESSION | --model X [--kb FILE]\n"
               "       cannprof kb list   [--json] [--kb FILE]\n"
               "       cannprof kb show   SESSION [--json] [--kb FILE]\n"
               "       cannprof kb export [-o FILE] [--kb FILE]\n"
               "       cannprof kb import FILE [--kb FILE] [--json]\n\n"
               "The knowledge base remembers every tuning session: the model's fingerprint, the\n"
               "hardware, each candidate tried with its raw samples, and which changes held.\n"
               "'query' lists the changes that won on the most similar models (what 'tune' tries\n"
               "first), 'card' prints a Markdown summary of a session, 'list' and 'show' the\n"
               "sessions, 'export' and 'import' share them as JSON Lines (importing merges\n"
               "without duplicates).\n\n"
               "The knowledge base is $XDG_DATA_HOME/cannprof/kb.sqlite (else\n"
               "~/.local/share/cannprof/kb.sqlite) unless --kb FILE is given.\n"
               "'cannprof kb <subcommand> --help' shows a subcommand's options.\n\n"
               "exit codes: " EXIT_CODES_KB "\n");
}

/* Parse a subcommand's options, allowing up to `max_pos` positional
 * arguments; prints help (*rc 0) or the error (*rc 2). Returns whether to go
 * on. */
static bool parse(const struct cp_command_opts *c, size_t max_pos, int argc, char **argv,
                  struct cp_args *a, int *rc)
{
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_args_parse_cmd(c, argc, argv, a, &d) != CP_OK) {
        cp_cli_error(c->cmd, d.msg);
        *rc = cp_status_exit_code(d.status);
        return false;
    }
    if (cp_args_has(a, CP_SO_HELP)) {
        cp_cmd_help(stdout, c);
        *rc = 0;
        return false;
    }
    if (a->n_positional > max_pos) {
        char msg[256];
        snprintf(msg, sizeof msg, "unexpected argument '%.100s'; see 'cannprof %s --help'",
                 a->positional[max_pos], c->cmd);
        cp_cli_error(c->cmd, msg);
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

/* Print j as a subcommand's --json output, then release it. */
static int print_json(json_t *j, const char *cmd)
{
    int rc = cp_out_json(j, cmd);
    json_decref(j);
    return rc;
}

/* A string, or null when there is none. */
static json_t *str_or_null(const char *s)
{
    return s ? cp_json_str(s) : json_null();
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

static json_t *fingerprint_json(const struct cp_kb_fingerprint *fp)
{
    json_t *o = json_object(), *pat = json_object();
    bool ok = o && pat && cp_json_set_bool(pat, "attention", fp->has_attention) &&
              cp_json_set_bool(pat, "conv", fp->has_conv) &&
              cp_json_set_bool(pat, "layernorm", fp->has_layernorm) &&
              cp_json_set_bool(pat, "groupnorm", fp->has_groupnorm) &&
              cp_json_set_bool(pat, "batchnorm", fp->has_batchnorm) &&
              cp_json_set_bool(pat, "gelu", fp->has_gelu) && cp_json_set_str(o, "name", fp->name) &&
              cp_json_set_str(o, "class", fp->model_class) &&
              cp_json_set_str(o, "structure_hash", fp->structure_hash) &&
              cp_json_set_str(o, "source_hash", fp->source_hash) &&
              cp_json_set_int(o, "params", fp->params) && cp_json_set_num(o, "flops", fp->flops) &&
              cp_json_set_int(o, "nodes", fp->n_nodes);
    if (ok) {
        ok = cp_json_set(o, "patterns", pat);
        pat = NULL;
    }
    ok = ok && cp_json_set(o, "op_histogram", cp_json_embed(fp->op_histogram_json)) &&
         cp_json_set(o, "inputs", cp_json_embed(fp->inputs_json));
    json_decref(pat);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

/* ---- query ------------------------------------------------------------------- */

/* "a,b,c" as ["a","b","c"] */
static json_t *names_json(const char *list)
{
    json_t *arr = json_array();
    for (const char *p = list; arr && p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!cp_json_push(arr, cp_json_strn(p, len))) {
            json_decref(arr);
            return NULL;
        }
        p = comma ? comma + 1 : p + len;
    }
    return arr;
}

static json_t *query_json(const struct cp_kb_fingerprint *fp, const struct cp_kb_hardware *hw,
                          double min_sim, const struct cp_kb_strategy_hit *h, size_t n)
{
    json_t *j = json_object(), *arr = json_array();
    bool ok = j && arr;
    for (size_t i = 0; ok && i < n; i++) {
        json_t *o = json_object();
        ok = o && cp_json_set_str(o, "delta", h[i].delta) &&
             cp_json_set_num(o, "mean_gain", h[i].mean_gain) &&
             cp_json_set_num(o, "sd_gain", h[i].sd_gain) &&
             cp_json_set_int(o, "held", h[i].count) && cp_json_set_int(o, "tried", h[i].tried) &&
             cp_json_set_num(o, "similarity", h[i].similarity) &&
             cp_json_set_num(o, "score", h[i].score) &&
             cp_json_set(o, "models", names_json(h[i].models));
        if (ok)
            ok = cp_json_push(arr, o); /* steals o */
        else
            json_decref(o);
    }
    ok = ok && cp_json_set(j, "model", fingerprint_json(fp)) &&
         cp_json_set(j, "hardware", hw ? cp_json_str(hw->signature) : json_null()) &&
         cp_json_set_num(j, "min_similarity", min_sim);
    if (ok) {
        ok = cp_json_set(j, "strategies", arr);
        arr = NULL;
    }
    json_decref(arr);
    if (ok)
        return j;
    json_decref(j);
    return NULL;
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
    const char *cmd = QUERY.cmd;
    struct cp_args a;
    int rc = 0;
    if (!parse(&QUERY, 0, argc, argv, &a, &rc))
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
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        model_fingerprint(cmd, kb, model, &fp, &d) != CP_OK ||
        cp_kb_query_strategies(kb, &fp, hwp, min_sim, false, (size_t)limit, &hits, &n, &d) !=
            CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (cp_args_has(&a, CP_SO_JSON)) {
        rc = print_json(query_json(&fp, hwp, min_sim, hits, n), cmd);
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
    const char *cmd = CARD.cmd;
    struct cp_args a;
    int rc = 0;
    if (!parse(&CARD, 1, argc, argv, &a, &rc))
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
    enum cp_status st = cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d);
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

static json_t *session_json(const struct cp_kb_session *s, bool full)
{
    json_t *o = json_object();
    bool ok = o && cp_json_set_int(o, "id", s->id) && cp_json_set(o, "uid", str_or_null(s->uid)) &&
              cp_json_set(o, "key", str_or_null(s->key)) &&
              cp_json_set(o, "model", str_or_null(s->model_name)) &&
              cp_json_set(o, "model_path", str_or_null(s->model_path)) &&
              cp_json_set(o, "hardware", str_or_null(s->hw_signature)) &&
              cp_json_set(o, "target", str_or_null(s->target)) &&
              cp_json_set(o, "constraints", str_or_null(s->constraints)) &&
              cp_json_set(o, "status", str_or_null(s->status)) &&
              cp_json_set(o, "created_at", str_or_null(s->created_at)) &&
              cp_json_set(o, "updated_at", str_or_null(s->updated_at)) &&
              cp_json_set_int(o, "budget", s->budget) &&
              cp_json_set_int(o, "evaluations", s->evaluations) &&
              cp_json_set_num(o, "baseline_ms", s->baseline_median_ns / 1e6) &&
              cp_json_set_num(o, "best_ms", s->best_median_ns / 1e6) &&
              cp_json_set_num(o, "delta_pct", delta_pct(s)) &&
              cp_json_set(o, "stop_reason", str_or_null(s->stop_reason));
    if (ok && full)
        ok = cp_json_set_int(o, "best_candidate", s->best_candidate_id) &&
             cp_json_set(o, "out_dir", str_or_null(s->out_dir)) &&
             cp_json_set(o, "baseline_config", cp_json_embed(s->baseline_config_json)) &&
             cp_json_set(o, "best_config", cp_json_embed(s->best_config_json));
    if (ok)
        return o;
    json_decref(o);
    return NULL;
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
    const char *cmd = LIST.cmd;
    struct cp_args a;
    int rc = 0;
    if (!parse(&LIST, 0, argc, argv, &a, &rc))
        return rc;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_kb_session *s = NULL;
    size_t n = 0;
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_session_list(kb, &s, &n, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (cp_args_has(&a, CP_SO_JSON)) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n; i++)
            if (!cp_json_push(arr, session_json(&s[i], false))) {
                json_decref(arr);
                arr = NULL;
            }
        rc = print_json(arr, cmd);
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

static json_t *candidate_json(const struct cp_kb_candidate *c)
{
    json_t *o = json_object();
    bool ok = o && cp_json_set_int(o, "id", c->id) && cp_json_set_int(o, "step", c->step) &&
              cp_json_set(o, "delta", str_or_null(c->delta)) &&
              cp_json_set(o, "source", str_or_null(c->source)) &&
              cp_json_set(o, "status", cp_json_str(cp_step_status_name(c->status))) &&
              cp_json_set(o, "reason", str_or_null(c->reason));
    const char *keys[] = {"expected_gain",  "measured_gain", "ci_lo",     "ci_hi", "p",
                          "precision_loss", "median_ns",     "throughput"};
    const double vals[] = {c->expected_gain,  c->measured_gain, c->ci_lo,     c->ci_hi, c->p,
                           c->precision_loss, c->median_ns,     c->throughput};
    for (size_t i = 0; ok && i < sizeof vals / sizeof vals[0]; i++)
        ok = cp_json_set_num(o, keys[i], vals[i]);
    ok = ok && cp_json_set_int(o, "memory_bytes", (int64_t)c->memory_bytes) &&
         cp_json_set(o, "config_id", str_or_null(c->config_id)) &&
         cp_json_set(o, "om_path", str_or_null(c->om_path)) &&
         cp_json_set(o, "trace_path", str_or_null(c->trace_path)) &&
         cp_json_set(o, "config", cp_json_embed(c->config_json)) &&
         cp_json_set(o, "created_at", str_or_null(c->created_at));
    if (ok)
        return o;
    json_decref(o);
    return NULL;
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
        printf("%4d  %-9s %-28s %-40s %9s %19s %8s  %s\n", c[i].step,
               cp_step_status_name(c[i].status), c[i].source ? c[i].source : "-",
               c[i].delta && *c[i].delta ? c[i].delta : "(none)", g, ci, ms,
               c[i].reason ? c[i].reason : "");
    }
}

static int cmd_show(int argc, char **argv)
{
    const char *cmd = SHOW.cmd;
    struct cp_args a;
    int rc = 0;
    if (!parse(&SHOW, 1, argc, argv, &a, &rc))
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
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_session_get(kb, id, &s, &d) != CP_OK ||
        cp_kb_candidate_list(kb, id, &c, &n, &d) != CP_OK) {
        rc = fail(cmd, &d);
        goto out;
    }
    if (cp_args_has(&a, CP_SO_JSON)) {
        json_t *j = json_object(), *arr = json_array();
        bool ok = j && arr && cp_json_set(j, "session", session_json(&s, true));
        for (size_t i = 0; ok && i < n; i++)
            ok = cp_json_push(arr, candidate_json(&c[i]));
        if (ok) {
            ok = cp_json_set(j, "candidates", arr);
            arr = NULL;
        }
        json_decref(arr);
        if (!ok) {
            json_decref(j);
            j = NULL;
        }
        rc = print_json(j, cmd);
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
    const char *cmd = EXPORT.cmd;
    struct cp_args a;
    int rc = 0;
    if (!parse(&EXPORT, 0, argc, argv, &a, &rc))
        return rc;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_buf b;
    cp_buf_init(&b);
    const char *out = cp_args_get(&a, OPT_OUTPUT);
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
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
    const char *cmd = IMPORT.cmd;
    struct cp_args a;
    int rc = 0;
    if (!parse(&IMPORT, 1, argc, argv, &a, &rc))
        return rc;
    if (a.n_positional != 1)
        return usage_error(cmd, "give the JSON Lines file to import");
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    size_t added = 0;
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_import_jsonl(kb, a.positional[0], &added, &d) != CP_OK)
        rc = fail(cmd, &d);
    else if (cp_args_has(&a, CP_SO_JSON)) {
        json_t *j = json_object();
        if (j && !(cp_json_set_str(j, "file", a.positional[0]) &&
                   cp_json_set_str(j, "kb", cp_kb_path(kb)) &&
                   cp_json_set_int(j, "added", (int64_t)added))) {
            json_decref(j);
            j = NULL;
        }
        rc = print_json(j, cmd);
    } else
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
