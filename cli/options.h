/* Command-line option tables: one sorted table per command, searched with
 * bsearch. Accepts ATC's syntax (--name=value and --name value), short
 * aliases (-o value), and "--" to end options. Unknown flags are rejected
 * with the nearest valid flag suggested. */
#ifndef CP_CLI_OPTIONS_H
#define CP_CLI_OPTIONS_H

#include "core/core.h"

#include <stdbool.h>
#include <stdio.h>

enum cp_opt_kind {
    CP_OPT_FLAG,  /* no value */
    CP_OPT_VALUE, /* takes a value */
    CP_OPT_MULTI, /* takes a value, may repeat */
};

struct cp_opt {
    const char *name; /* long name without dashes; table sorted by it */
    char short_name;  /* 0 if none */
    enum cp_opt_kind kind;
    int id;
    const char *metavar; /* for help, e.g. "FILE" */
    const char *help;
};

#define CP_MAX_ARGS 64

struct cp_parsed_opt {
    int id;
    const char *name;
    const char *value; /* NULL for flags */
};

struct cp_args {
    struct cp_parsed_opt opts[CP_MAX_ARGS];
    size_t n_opts;
    const char *positional[CP_MAX_ARGS];
    size_t n_positional;
};

/* Parse argv[0..argc) (argv[0] is the first argument after the command name)
 * against `table` (sorted by name; checked). Errors name the flag and, for
 * an unknown one, suggest the nearest valid flag. */
enum cp_status cp_args_parse(const char *cmd, const struct cp_opt *table, size_t n_table, int argc,
                             char **argv, struct cp_args *out, struct cp_diag *d);

/* Last value given for option `id`, or NULL. */
const char *cp_args_get(const struct cp_args *a, int id);
bool cp_args_has(const struct cp_args *a, int id);

/* Print the options of a table as help text. */
void cp_opts_print_help(FILE *f, const struct cp_opt *table, size_t n_table);

/* Print an error in the CLI's one format: "cannprof <cmd>: error: msg". */
void cp_cli_error(const char *cmd, const char *msg);

/* A positive duration in seconds: "10", "2.5s", "500ms", "10m" (or "min"),
 * "1h". false for anything else. */
bool cp_parse_duration(const char *s, double *seconds);

/* A subcommand of a command with several (baseline, kb). */
struct cp_subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
};

/* Run the subcommand argv[0] names, with the arguments after it. "help",
 * "--help" and "-h" print `usage` on stdout (exit 0); no argument prints it
 * on stderr (exit 2); an unknown name is an error (exit 2) suggesting the
 * nearest one, and `listing` ("set, list, show, rm": the order people read
 * them in) says what is accepted. */
int cp_cli_dispatch(const char *cmd, const struct cp_subcommand *subs, size_t n,
                    const char *listing, void (*usage)(FILE *f), int argc, char **argv);

#endif
