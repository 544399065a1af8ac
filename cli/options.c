/* Option parsing for every command. */
#include "cli/options.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_name(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const struct cp_opt *)elem)->name);
}

static const struct cp_opt *find_long(const struct cp_opt *t, size_t n, const char *name)
{
    return bsearch(name, t, n, sizeof *t, cmp_name);
}

static const struct cp_opt *find_short(const struct cp_opt *t, size_t n, char c)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].short_name == c)
            return &t[i];
    return NULL;
}

static const char *nearest(const struct cp_opt *t, size_t n, const char *name)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t dist = cp_edit_distance(name, t[i].name);
        /* A flag typed with '-' where the table has '_' (or the reverse) is
         * the commonest slip with ATC's names. */
        char alt[256];
        snprintf(alt, sizeof alt, "%s", name);
        for (char *p = alt; *p; p++)
            if (*p == '-')
                *p = '_';
            else if (*p == '_')
                *p = '-';
        size_t d2 = cp_edit_distance(alt, t[i].name);
        if (d2 < dist)
            dist = d2;
        if (dist < best_d) {
            best_d = dist;
            best = t[i].name;
        }
    }
    size_t len = strlen(name);
    if (best && best_d <= (len < 6 ? 2 : len / 2))
        return best;
    return NULL;
}

static enum cp_status push(struct cp_args *out, const struct cp_opt *o, const char *value,
                           const char *cmd, struct cp_diag *d)
{
    if (o->kind != CP_OPT_MULTI)
        for (size_t i = 0; i < out->n_opts; i++)
            if (out->opts[i].id == o->id)
                return cp_diag_set(d, CP_ERR_USAGE, "--%s is given more than once", o->name);
    if (out->n_opts == CP_MAX_ARGS)
        return cp_diag_set(d, CP_ERR_USAGE, "%s: too many options", cmd);
    out->opts[out->n_opts].id = o->id;
    out->opts[out->n_opts].name = o->name;
    out->opts[out->n_opts].value = value;
    out->n_opts++;
    return CP_OK;
}

enum cp_status cp_args_parse(const char *cmd, const struct cp_opt *table, size_t n_table, int argc,
                             char **argv, struct cp_args *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 1; i < n_table; i++)
        if (strcmp(table[i - 1].name, table[i].name) >= 0)
            return cp_diag_set(d, CP_ERR_INTERNAL, "%s: option table not sorted at '%s'", cmd,
                               table[i].name);
    bool only_positional = false;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (only_positional || arg[0] != '-' || arg[1] == '\0') {
            if (out->n_positional == CP_MAX_ARGS)
                return cp_diag_set(d, CP_ERR_USAGE, "%s: too many arguments", cmd);
            out->positional[out->n_positional++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_positional = true;
            continue;
        }
        const struct cp_opt *o;
        const char *value = NULL;
        char name[128];
        if (arg[1] == '-') {
            const char *eq = strchr(arg + 2, '=');
            size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
            if (len >= sizeof name)
                return cp_diag_set(d, CP_ERR_USAGE, "%s: option '%.40s...' is too long", cmd, arg);
            memcpy(name, arg + 2, len);
            name[len] = 0;
            if (eq)
                value = eq + 1;
            o = find_long(table, n_table, name);
        } else {
            if (arg[2] != '\0')
                return cp_diag_set(d, CP_ERR_USAGE,
                                   "%s: unknown option '%s' (long options take two dashes)", cmd,
                                   arg);
            snprintf(name, sizeof name, "%c", arg[1]);
            o = find_short(table, n_table, arg[1]);
        }
        if (!o) {
            const char *near = arg[1] == '-' ? nearest(table, n_table, name) : NULL;
            if (near)
                return cp_diag_set(d, CP_ERR_USAGE, "%s: unknown option '%s'; did you mean '--%s'?",
                                   cmd, arg, near);
            return cp_diag_set(d, CP_ERR_USAGE, "%s: unknown option '%s'; see 'cannprof %s --help'",
                               cmd, arg, cmd);
        }
        if (o->kind == CP_OPT_FLAG) {
            if (value)
                return cp_diag_set(d, CP_ERR_USAGE, "--%s takes no value (got '%s')", o->name,
                                   value);
        } else if (!value) {
            if (i + 1 >= argc)
                return cp_diag_set(d, CP_ERR_USAGE, "--%s needs a value (%s)", o->name,
                                   o->metavar ? o->metavar : "VALUE");
            value = argv[++i];
        }
        enum cp_status st = push(out, o, value, cmd, d);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

const char *cp_args_get(const struct cp_args *a, int id)
{
    const char *v = NULL;
    for (size_t i = 0; i < a->n_opts; i++)
        if (a->opts[i].id == id)
            v = a->opts[i].value;
    return v;
}

bool cp_args_has(const struct cp_args *a, int id)
{
    for (size_t i = 0; i < a->n_opts; i++)
        if (a->opts[i].id == id)
            return true;
    return false;
}

void cp_opts_print_help(FILE *f, const struct cp_opt *table, size_t n_table)
{
    for (size_t i = 0; i < n_table; i++) {
        char left[96];
        if (table[i].kind == CP_OPT_FLAG)
            snprintf(left, sizeof left, "--%s", table[i].name);
        else
            snprintf(left, sizeof left, "--%s=%s", table[i].name,
                     table[i].metavar ? table[i].metavar : "V");
        if (table[i].short_name)
            fprintf(f, "  -%c, %-32s %s\n", table[i].short_name, left, table[i].help);
        else
            fprintf(f, "      %-32s %s\n", left, table[i].help);
    }
}

void cp_cli_error(const char *cmd, const char *msg)
{
    fprintf(stderr, "cannprof%s%s: error: %s\n", cmd ? " " : "", cmd ? cmd : "", msg);
}

bool cp_cli_parse_sub(const struct cp_command_opts *c, size_t max_pos, int argc, char **argv,
                      struct cp_args *a, int *rc)
{
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_args_parse_cmd(c, argc, argv, a, &d) != CP_OK) {
        *rc = cp_cli_fail(c->cmd, &d);
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

const char *cp_cli_require(const char *cmd, const struct cp_args *a, int id, const char *flag)
{
    const char *v = cp_args_get(a, id);
    if (!v) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s is required", flag);
        cp_cli_error(cmd, msg);
    }
    return v;
}

int cp_cli_fail(const char *cmd, const struct cp_diag *d)
{
    cp_cli_error(cmd, d->msg);
    return cp_status_exit_code(d->status);
}

int cp_cli_dispatch(const char *cmd, const struct cp_subcommand *subs, size_t n,
                    const char *listing, void (*usage)(FILE *f), int argc, char **argv)
{
    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[0];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return 0;
    }
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(name, subs[i].name) == 0)
            return subs[i].run(argc - 1, argv + 1);
        size_t dist = cp_edit_distance(name, subs[i].name);
        if (dist < best_d) {
            best_d = dist;
            best = subs[i].name;
        }
    }
    /* "a, b, c" -> "a, b or c" */
    char choices[256];
    snprintf(choices, sizeof choices, "%s", listing);
    char *last = strrchr(choices, ',');
    if (last) {
        char tail[256];
        snprintf(tail, sizeof tail, " or%s", last + 1);
        snprintf(last, sizeof choices - (size_t)(last - choices), "%s", tail);
    }
    char msg[512];
    if (name[0] == '-')
        snprintf(msg, sizeof msg, "give a subcommand (%s) before options; see 'cannprof %s --help'",
                 listing, cmd);
    else if (best && best_d <= 2)
        snprintf(msg, sizeof msg, "unknown subcommand '%.60s'; did you mean '%s'?", name, best);
    else
        snprintf(msg, sizeof msg, "unknown subcommand '%.60s'; expected %s", name, choices);
    cp_cli_error(cmd, msg);
    return 2;
}

bool cp_parse_duration(const char *s, double *seconds)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0) || !isfinite(v))
        return false;
    double unit = *end == '\0' || strcmp(end, "s") == 0              ? 1
                  : strcmp(end, "ms") == 0                           ? 1e-3
                  : strcmp(end, "m") == 0 || strcmp(end, "min") == 0 ? 60
                  : strcmp(end, "h") == 0                            ? 3600
                                                                     : 0;
    *seconds = v * unit;
    return unit > 0;
}
