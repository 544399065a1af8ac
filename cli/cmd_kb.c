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
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "knowledge/kb_tuning.h"
#include "tuner/tuner.h"

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
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "FILE.md|.html|.pdf",
     "write the card there instead of stdout: Markdown, or the same as self-contained HTML or "
     "a PDF with the trajectory and the accepted changes' gains drawn"},
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
    .usage = "usage: cannprof kb card SESSION | --model X [--kb FILE] [-o CARD.md|.html|.pdf]\n\n"
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

static int usage_error(const char *cmd, const char *msg)
{
    cp_cli_error(cmd, msg);
    return 2;
}

/* The fingerprint of --model, with a note when it is approximate. */
static enum cp_status model_fingerprint(const char *cmd, struct cp_kb *kb, const char *path,
                                        struct cp_kb_fingerprint *fp, struct cp_diag *d)
{
    bool approximate = false;
    enum cp_status st = cp_tune_fingerprint_model(kb, path, fp, &approximate, d);
    if (st == CP_OK && approximate)
        fprintf(stderr,
                "cannprof %s: note: %s's source model is gone and unknown to the knowledge "
                "base; fingerprinting the converted graph (fused ops: similarity is "
                "approximate)\n",
                cmd, path);
    return st;
}

/* ---- query ------------------------------------------------------------------- */

static int cmd_query(int argc, char **argv)
{
    const char *cmd = QUERY.cmd;
    struct cp_args a;
    int rc = 0;
    if (!cp_cli_parse_sub(&QUERY, 0, argc, argv, &a, &rc))
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
        rc = cp_cli_fail(cmd, &d);
    } else if (cp_args_has(&a, CP_SO_JSON)) {
        rc = cp_out_json_take(cp_kb_strategies_json(&fp, hwp, min_sim, hits, n), cmd);
    } else {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_kb_render_strategies(&b, &fp, hwp, min_sim, hits, n);
        rc = cp_out_buf(&b, cmd);
        cp_buf_release(&b);
    }
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
    if (!cp_cli_parse_sub(&CARD, 1, argc, argv, &a, &rc))
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
        st = cp_kb_card_find_session(kb, &fp, &id, &d);
    const char *out = cp_args_get(&a, OPT_OUTPUT);
    if (st == CP_OK && out)
        st = cp_kb_card_write(kb, id, out, &d);
    else if (st == CP_OK)
        st = cp_kb_card_session(kb, id, &b, &d);
    if (st != CP_OK)
        rc = cp_cli_fail(cmd, &d);
    else if (out)
        printf("kb card: %s\n", out);
    else
        rc = cp_out_buf(&b, cmd);
    cp_buf_release(&b);
    cp_kb_fingerprint_release(&fp);
    cp_kb_close(kb);
    return rc;
}

/* ---- list and show ----------------------------------------------------------- */

static int cmd_list(int argc, char **argv)
{
    const char *cmd = LIST.cmd;
    struct cp_args a;
    int rc = 0;
    if (!cp_cli_parse_sub(&LIST, 0, argc, argv, &a, &rc))
        return rc;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_kb_session *s = NULL;
    size_t n = 0;
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_session_list(kb, &s, &n, &d) != CP_OK) {
        rc = cp_cli_fail(cmd, &d);
    } else if (cp_args_has(&a, CP_SO_JSON)) {
        rc = cp_out_json_take(cp_kb_sessions_json(s, n), cmd);
    } else {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_kb_render_sessions(&b, kb, s, n);
        rc = cp_out_buf(&b, cmd);
        cp_buf_release(&b);
    }
    cp_kb_session_list_free(s, n);
    cp_kb_close(kb);
    return rc;
}

static int cmd_show(int argc, char **argv)
{
    const char *cmd = SHOW.cmd;
    struct cp_args a;
    int rc = 0;
    if (!cp_cli_parse_sub(&SHOW, 1, argc, argv, &a, &rc))
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
        rc = cp_cli_fail(cmd, &d);
    } else if (cp_args_has(&a, CP_SO_JSON)) {
        rc = cp_out_json_take(cp_kb_session_detail_json(&s, c, n), cmd);
    } else {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_kb_render_session(&b, &s, c, n);
        rc = cp_out_buf(&b, cmd);
        cp_buf_release(&b);
    }
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
    if (!cp_cli_parse_sub(&EXPORT, 0, argc, argv, &a, &rc))
        return rc;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_buf b;
    cp_buf_init(&b);
    const char *out = cp_args_get(&a, OPT_OUTPUT);
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK)
        rc = cp_cli_fail(cmd, &d);
    else if (out)
        rc = cp_kb_export_jsonl_file(kb, out, &d) != CP_OK ? cp_cli_fail(cmd, &d) : 0;
    else
        rc = cp_kb_export_jsonl(kb, &b, &d) != CP_OK ? cp_cli_fail(cmd, &d) : cp_out_buf(&b, cmd);
    cp_buf_release(&b);
    cp_kb_close(kb);
    return rc;
}

static int cmd_import(int argc, char **argv)
{
    const char *cmd = IMPORT.cmd;
    struct cp_args a;
    int rc = 0;
    if (!cp_cli_parse_sub(&IMPORT, 1, argc, argv, &a, &rc))
        return rc;
    if (a.n_positional != 1)
        return usage_error(cmd, "give the JSON Lines file to import");
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    size_t added = 0;
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_import_jsonl(kb, a.positional[0], &added, &d) != CP_OK)
        rc = cp_cli_fail(cmd, &d);
    else if (cp_args_has(&a, CP_SO_JSON)) {
        json_t *j = json_object();
        if (j && !(cp_json_set_str(j, "file", a.positional[0]) &&
                   cp_json_set_str(j, "kb", cp_kb_path(kb)) &&
                   cp_json_set_int(j, "added", (int64_t)added))) {
            json_decref(j);
            j = NULL;
        }
        rc = cp_out_json_take(j, cmd);
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
