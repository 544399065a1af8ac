/* cannprof baseline: keep per-service baselines in the knowledge base, for
 * `cannprof validate` to compare later runs against.
 *
 *   baseline set  --service NAME --trace T.db [--tag TAG] [--run N] [--replace]
 *   baseline list [--service NAME] [--json]
 *   baseline show --service NAME [--tag TAG|latest] [--json]
 *   baseline rm   --service NAME --tag TAG
 *
 * Every subcommand takes --kb FILE (default: the knowledge base under
 * $XDG_DATA_HOME, see knowledge/kb.h). */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "knowledge/kb.h"
#include "validate/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Validations shown by `show`. */
#define SHOW_VALIDATIONS 10

enum {
    OPT_REPLACE = 1,
    OPT_TAG,
    OPT_TRACE,
};

#define EXIT_CODES_KB                                                                              \
    "0 ok, 2 bad usage or input (a service, tag or trace that is not right), 3 environment "       \
    "failure (the knowledge base cannot be opened or written)"

static const struct cp_opt set_own[] = {
    {"replace", 0, CP_OPT_FLAG, OPT_REPLACE, NULL, "overwrite a baseline with the same tag"},
    {"tag", 0, CP_OPT_VALUE, OPT_TAG, "TAG", "name of the baseline (default: b1, b2, ...)"},
    {"trace", 0, CP_OPT_VALUE, OPT_TRACE, "T.db", "trace store from cannprof bench --trace"},
};
static const struct cp_opt_use set_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print the stored baseline as JSON (as 'show --json' does)"},
    {CP_SO_KB, NULL},
    {CP_SO_RUN, "run of the trace to keep (default: the last)"},
    {CP_SO_SERVICE, "the service the baseline belongs to"},
};
static const struct cp_command_opts SET = {
    .cmd = "baseline set",
    .own = set_own,
    .n_own = sizeof set_own / sizeof set_own[0],
    .shared = set_shared,
    .n_shared = sizeof set_shared / sizeof set_shared[0],
    .usage = "usage: cannprof baseline set --service NAME --trace T.db [--tag TAG] [--run N]\n"
             "                             [--replace] [--kb FILE] [--json]\n\n"
             "Copy the figures of one run of a trace store (the last unless --run) into the\n"
             "knowledge base as the service's baseline. Without --tag the baseline is tagged\n"
             "b1, b2, ... An existing tag is only overwritten with --replace.\n",
    .exit_codes = "0 stored, 2 bad usage or input (a trace without samples, a tag that exists "
                  "without --replace), 3 environment failure (the knowledge base cannot be opened "
                  "or written)",
};

static const struct cp_opt_use list_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, NULL},
    {CP_SO_KB, NULL},
    {CP_SO_SERVICE, "only this service's baselines"},
};
static const struct cp_command_opts LIST = {
    .cmd = "baseline list",
    .shared = list_shared,
    .n_shared = sizeof list_shared / sizeof list_shared[0],
    .usage = "usage: cannprof baseline list [--service NAME] [--json] [--kb FILE]\n\n"
             "List the baselines of every service (or of one): service, tag, when it was\n"
             "set, samples, median latency and model. A service without baselines lists\n"
             "nothing (exit 0).\n",
    .exit_codes = EXIT_CODES_KB,
};

static const struct cp_opt show_own[] = {
    {"tag", 0, CP_OPT_VALUE, OPT_TAG, "TAG", "which baseline (default: latest)"},
};
static const struct cp_opt_use show_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, NULL},
    {CP_SO_KB, NULL},
    {CP_SO_SERVICE, "the service the baseline belongs to"},
};
static const struct cp_command_opts SHOW = {
    .cmd = "baseline show",
    .own = show_own,
    .n_own = sizeof show_own / sizeof show_own[0],
    .shared = show_shared,
    .n_shared = sizeof show_shared / sizeof show_shared[0],
    .usage =
        "usage: cannprof baseline show --service NAME [--tag TAG|latest] [--json] [--kb FILE]\n\n"
        "Show a baseline's figures (samples, mean, median, p90, p99, sd, CV,\n"
        "throughput, memory, model hash and path, config id, source trace) and the\n"
        "last validations against its service.\n",
    .exit_codes = EXIT_CODES_KB,
};

static const struct cp_opt rm_own[] = {
    {"tag", 0, CP_OPT_VALUE, OPT_TAG, "TAG", "the baseline to remove"},
};
static const struct cp_opt_use rm_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print what was removed as JSON"},
    {CP_SO_KB, NULL},
    {CP_SO_SERVICE, "the service the baseline belongs to"},
};
static const struct cp_command_opts RM = {
    .cmd = "baseline rm",
    .own = rm_own,
    .n_own = sizeof rm_own / sizeof rm_own[0],
    .shared = rm_shared,
    .n_shared = sizeof rm_shared / sizeof rm_shared[0],
    .usage = "usage: cannprof baseline rm --service NAME --tag TAG [--kb FILE] [--json]\n\n"
             "Remove one baseline. Validations made against it stay in the knowledge base\n"
             "with its tag.\n",
    .exit_codes = EXIT_CODES_KB,
};

#define N_OF(t) (sizeof t / sizeof t[0])

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cannprof baseline set  --service NAME --trace T.db [--tag TAG] [--run N]\n"
            "                              [--replace] [--kb FILE] [--json]\n"
            "       cannprof baseline list [--service NAME] [--json] [--kb FILE]\n"
            "       cannprof baseline show --service NAME [--tag TAG|latest] [--json] [--kb FILE]\n"
            "       cannprof baseline rm   --service NAME --tag TAG [--kb FILE] [--json]\n\n"
            "Keep the figures of a benchmark run (latency and kernel-time samples, memory,\n"
            "model and config) as a service's baseline in the knowledge base, for\n"
            "'cannprof validate' to compare later runs against. The figures are copied, so a\n"
            "baseline outlives its trace file. Each validation against a service is recorded\n"
            "and 'show' lists the latest ones.\n\n"
            "The knowledge base is $XDG_DATA_HOME/cannprof/kb.sqlite (else\n"
            "~/.local/share/cannprof/kb.sqlite) unless --kb FILE is given.\n"
            "'cannprof baseline <subcommand> --help' shows a subcommand's options.\n\n"
            "exit codes: " EXIT_CODES_KB "\n");
}

/* ---- set ------------------------------------------------------------------- */

static int cmd_set(int argc, char **argv)
{
    const char *cmd = SET.cmd;
    struct cp_args a;
    int rc = 0;
    if (!cp_cli_parse_sub(&SET, 0, argc, argv, &a, &rc))
        return rc;
    const char *service = cp_cli_require(cmd, &a, CP_SO_SERVICE, "--service NAME");
    if (!service)
        return 2;
    const char *trace = cp_cli_require(cmd, &a, OPT_TRACE, "--trace T.db");
    if (!trace)
        return 2;
    const char *tag = cp_args_get(&a, OPT_TAG);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_kb_baseline b;
    memset(&b, 0, sizeof b);
    struct cp_baseline_figures f;
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_validate_baseline_set(kb, service, tag, trace, cp_args_int(&a, CP_SO_RUN, -1),
                                 cp_args_has(&a, OPT_REPLACE), &b, &d) != CP_OK ||
        cp_validate_baseline_figures(&b, &f, &d) != CP_OK) {
        rc = cp_cli_fail(cmd, &d);
    } else if (cp_args_has(&a, CP_SO_JSON)) {
        rc = cp_out_json_take(cp_validate_baseline_json(&b, &f, NULL, 0), cmd);
    } else {
        struct cp_buf out;
        cp_buf_init(&out);
        cp_validate_render_baseline_set(kb, &b, &f, &out);
        rc = cp_out_buf(&out, cmd);
        cp_buf_release(&out);
    }
    cp_kb_baseline_release(&b);
    cp_kb_close(kb);
    return rc;
}

/* ---- list ------------------------------------------------------------------ */

/* What `list` says when there is nothing to list. */
static void print_none(struct cp_kb *kb, const char *service)
{
    if (!service) {
        printf("no baselines in %s yet; set one with: cannprof baseline set --service NAME "
               "--trace T.db\n",
               cp_kb_path(kb));
        return;
    }
    printf("no baselines for service '%s' in %s", service, cp_kb_path(kb));
    char **names = NULL;
    size_t n = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_kb_service_list(kb, &names, &n, &d) == CP_OK && n > 0) {
        printf(" (services with baselines:");
        for (size_t i = 0; i < n; i++)
            printf("%s %s", i ? "," : "", names[i]);
        printf(")");
    }
    printf("\n");
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static int cmd_list(int argc, char **argv)
{
    const char *cmd = LIST.cmd;
    struct cp_args a;
    int rc = 0;
    if (!cp_cli_parse_sub(&LIST, 0, argc, argv, &a, &rc))
        return rc;
    const char *service = cp_args_get(&a, CP_SO_SERVICE);
    struct cp_diag d;
    cp_diag_init(&d);
    if (service && cp_kb_check_service(service, &d) != CP_OK)
        return cp_cli_fail(cmd, &d);
    struct cp_kb *kb = NULL;
    struct cp_kb_baseline *v = NULL;
    size_t n = 0;
    if (cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_list(kb, service, &v, &n, &d) != CP_OK) {
        rc = cp_cli_fail(cmd, &d);
    } else if (cp_args_has(&a, CP_SO_JSON)) {
        rc = cp_out_json_take(cp_validate_baselines_json(v, n), cmd);
    } else if (n > 0) {
        struct cp_buf out;
        cp_buf_init(&out);
        cp_validate_render_baselines(v, n, &out);
        rc = cp_out_buf(&out, cmd);
        cp_buf_release(&out);
    } else
        print_none(kb, service);
    cp_kb_baseline_list_free(v, n);
    cp_kb_close(kb);
    return rc;
}

/* ---- show ------------------------------------------------------------------ */

static int cmd_show(int argc, char **argv)
{
    const char *cmd = SHOW.cmd;
    struct cp_args a;
    int rc = 0;
    if (!cp_cli_parse_sub(&SHOW, 0, argc, argv, &a, &rc))
        return rc;
    const char *service = cp_cli_require(cmd, &a, CP_SO_SERVICE, "--service NAME");
    if (!service)
        return 2;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    struct cp_kb_baseline x;
    memset(&x, 0, sizeof x);
    struct cp_kb_validation *v = NULL;
    size_t nv = 0;
    struct cp_baseline_figures f;
    if (cp_kb_check_service(service, &d) != CP_OK ||
        cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_get(kb, service, cp_args_get(&a, OPT_TAG), &x, &d) != CP_OK ||
        cp_kb_validation_list(kb, service, SHOW_VALIDATIONS, &v, &nv, &d) != CP_OK ||
        cp_validate_baseline_figures(&x, &f, &d) != CP_OK) {
        rc = cp_cli_fail(cmd, &d);
    } else if (cp_args_has(&a, CP_SO_JSON)) {
        static const struct cp_kb_validation none;
        rc = cp_out_json_take(cp_validate_baseline_json(&x, &f, v ? v : &none, nv), cmd);
    } else {
        struct cp_buf out;
        cp_buf_init(&out);
        cp_validate_render_baseline(kb, &x, &f, v, nv, &out);
        rc = cp_out_buf(&out, cmd);
        cp_buf_release(&out);
    }
    cp_kb_validation_list_free(v, nv);
    cp_kb_baseline_release(&x);
    cp_kb_close(kb);
    return rc;
}

/* ---- rm -------------------------------------------------------------------- */

static int cmd_rm(int argc, char **argv)
{
    const char *cmd = RM.cmd;
    struct cp_args a;
    int rc = 0;
    if (!cp_cli_parse_sub(&RM, 0, argc, argv, &a, &rc))
        return rc;
    const char *service = cp_cli_require(cmd, &a, CP_SO_SERVICE, "--service NAME");
    if (!service)
        return 2;
    const char *tag = cp_cli_require(cmd, &a, OPT_TAG, "--tag TAG");
    if (!tag)
        return 2;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_kb *kb = NULL;
    if (cp_kb_check_service(service, &d) != CP_OK ||
        cp_kb_open(cp_args_get(&a, CP_SO_KB), &kb, &d) != CP_OK ||
        cp_kb_baseline_remove(kb, service, tag, &d) != CP_OK) {
        rc = cp_cli_fail(cmd, &d);
    } else if (cp_args_has(&a, CP_SO_JSON)) {
        json_t *j = json_object();
        if (j &&
            !(cp_json_set_str(j, "service", service) && cp_json_set_str(j, "tag", tag) &&
              cp_json_set_str(j, "kb", cp_kb_path(kb)) && cp_json_set_bool(j, "removed", true))) {
            json_decref(j);
            j = NULL;
        }
        rc = cp_out_json_take(j, cmd);
    } else
        printf("removed baseline %s/%s from %s\n", service, tag, cp_kb_path(kb));
    cp_kb_close(kb);
    return rc;
}

/* ---- dispatch -------------------------------------------------------------- */

/* Sorted by name. */
static const struct cp_subcommand subcommands[] = {
    {"list", cmd_list},
    {"rm", cmd_rm},
    {"set", cmd_set},
    {"show", cmd_show},
};

int cp_cmd_baseline(int argc, char **argv)
{
    return cp_cli_dispatch("baseline", subcommands, N_OF(subcommands), "set, list, show, rm", usage,
                           argc, argv);
}
