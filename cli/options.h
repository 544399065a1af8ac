/* Command-line options: ATC's syntax (--name=value and --name value), short
 * aliases (-o value), and "--" to end options. Each command has its own
 * sorted table, searched with bsearch, plus the options it shares with
 * other commands, which one table defines once (name, short flag, value
 * check). Unknown flags are rejected with the nearest valid flag
 * suggested; a short flag means the same in every command. */
#ifndef CP_CLI_OPTIONS_H
#define CP_CLI_OPTIONS_H

#include "core/core.h"
#include "runner/measure.h"

#include <stdbool.h>
#include <stdint.h>
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

#define CP_MAX_ARGS  64
#define CP_MAX_TABLE 96 /* options of one command, own and shared */

struct cp_parsed_opt {
    int id;
    const char *name;
    const char *value; /* NULL for flags */
};

/* ---- options several commands share ------------------------------------
 *
 * One table (options.c) defines each of them once: its name, its short
 * flag, what it takes and how its value is checked, so that `--threads` is
 * read and refused the same way by every command. A command lists the
 * ones it takes (struct cp_opt_use, with a help text of its own where the
 * meaning needs one, e.g. what --seed seeds) beside its own options. Ids
 * start at CP_SO_FIRST, out of the way of a command's own ids. */
enum cp_shared_opt {
    CP_SO_FIRST = 1000,
    CP_SO_ALPHA = CP_SO_FIRST, /* (0, 0.5] */
    CP_SO_BATCH,               /* -b, 1 .. 65536 */
    CP_SO_BUDGET,              /* 1 .. 10000 */
    CP_SO_CONSTRAINTS,         /* -c, text that rules/constraints.h parses */
    CP_SO_DURATION,            /* -d, seconds: "10", "2.5s", "500ms", "1m" */
    CP_SO_HELP,                /* -h */
    CP_SO_INPUT,               /* -i, NAME=FILE, repeatable */
    CP_SO_INPUT_SHAPE,         /* "name:1,3,224,224;..." */
    CP_SO_ITERATIONS,          /* -n, 1 .. 100000000; alias --rounds */
    CP_SO_JSON,                /* structured output on stdout */
    CP_SO_KB,                  /* the knowledge base FILE */
    CP_SO_PRIORITY,            /* normal | high (enum cp_measure_priority) */
    CP_SO_QUIET,               /* -q */
    CP_SO_RESAMPLES,           /* 100 .. 10000000 */
    CP_SO_RULES,               /* -r, DIR|FILE, repeatable */
    CP_SO_RUN,                 /* a run of a trace store: 1 .. INT64_MAX */
    CP_SO_SEED,                /* 0 .. INT64_MAX */
    CP_SO_SERVICE,             /* -s, NAME */
    CP_SO_TARGET,              /* latency | throughput | memory (enum cp_target) */
    CP_SO_TEST,      /* mann-whitney | welch | t-test | bootstrap; alias --statistical_test */
    CP_SO_THREADS,   /* -t, 1 .. 1024 */
    CP_SO_THRESHOLD, /* percent, 0 .. 1000: "2%" or "2" */
    CP_SO_WARMUP,    /* -w, 0 .. 1000000 */
    CP_SO_END
};
#define CP_SO_COUNT (CP_SO_END - CP_SO_FIRST)

/* A shared option a command takes; help NULL: the shared text. */
struct cp_opt_use {
    int id;
    const char *help;
};

/* All of a command's options: its own table (sorted by name), the shared
 * options it takes, and what its --help says around them. */
struct cp_command_opts {
    const char *cmd; /* "bench" */
    const struct cp_opt *own;
    size_t n_own;
    const struct cp_opt_use *shared;
    size_t n_shared;
    const char *usage;      /* the help up to the option list */
    const char *exit_codes; /* "0 measured, 2 bad usage or input, 3 ..." */
};

/* The value of a shared option, once checked. */
union cp_opt_value {
    int64_t i;  /* counts, seeds, the target and test enums */
    double num; /* alpha, threshold (percent), duration (seconds) */
};

struct cp_args {
    struct cp_parsed_opt opts[CP_MAX_ARGS];
    size_t n_opts;
    const char *positional[CP_MAX_ARGS];
    size_t n_positional;
    union cp_opt_value shared[CP_SO_COUNT]; /* of the shared options given */
    const struct cp_command_opts *cmd;      /* set by cp_args_parse_cmd */
};

/* Parse argv[0..argc) (argv[0] is the first argument after the command name)
 * against `table` (sorted by name; checked). Errors name the flag and, for
 * an unknown one, suggest the nearest valid flag. */
enum cp_status cp_args_parse(const char *cmd, const struct cp_opt *table, size_t n_table, int argc,
                             char **argv, struct cp_args *out, struct cp_diag *d);

/* Parse against a command's own and shared options: the syntax of
 * cp_args_parse, then each shared option's value is checked by its one
 * validator (the message names the flag, what it takes and what it got)
 * and kept typed. CP_ERR_USAGE for bad usage; CP_ERR_INTERNAL when the
 * tables are wrong (unsorted, a name twice, a short flag that means
 * something else in another command). */
enum cp_status cp_args_parse_cmd(const struct cp_command_opts *c, int argc, char **argv,
                                 struct cp_args *out, struct cp_diag *d);

/* Last value given for option `id`, or NULL. */
const char *cp_args_get(const struct cp_args *a, int id);
bool cp_args_has(const struct cp_args *a, int id);

/* The checked value of shared option `id`, or `dflt` when not given. */
int64_t cp_args_int(const struct cp_args *a, int id, int64_t dflt);
double cp_args_num(const struct cp_args *a, int id, double dflt);

/* The values given for a repeatable option, in order, at most `cap`.
 * Returns how many. */
size_t cp_args_all(const struct cp_args *a, int id, const char **out, size_t cap);

/* The name option `id` was given under ("test" or "statistical_test");
 * its first name in the tables when it was not given. */
const char *cp_args_name(const struct cp_args *a, int id);

/* Print the options of a table as help text. */
void cp_opts_print_help(FILE *f, const struct cp_opt *table, size_t n_table);

/* A command's --help on f: the usage text, its options (own and shared,
 * sorted by name) and its exit codes. */
void cp_cmd_help(FILE *f, const struct cp_command_opts *c);

/* The one meaning of short flag `c` in every command: the long option it
 * stands for ("threads"; for -o, "output" names where a command writes,
 * whatever its long name); NULL when the letter is not a short flag. */
const char *cp_short_flag_meaning(char c);

/* For a command that measures many times (tune, suggest --measure): when
 * *p is high, check once that this process may raise its priority; when it
 * may not, warn on stderr ("cannprof <cmd>: warning: ...") and set *p to
 * normal, so that the report says what was really used. */
void cp_cli_check_priority(const char *cmd, enum cp_measure_priority *p);

/* Print an error in the CLI's one format: "cannprof <cmd>: error: msg". */
void cp_cli_error(const char *cmd, const char *msg);

/* A positive duration in seconds: "10", "2.5s", "500ms", "10m" (or "min"),
 * "1h". false for anything else. */
bool cp_parse_duration(const char *s, double *seconds);

/* A percentage: "2%", "2" or "0.5%", finite, from 0 to `max`. */
bool cp_parse_percent(const char *s, double max, double *pct);

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

/* Parse a subcommand's arguments by its table, allowing up to `max_pos`
 * positional arguments. Prints --help (*rc 0) or the error (*rc: 2 for bad
 * usage). Returns whether to go on. */
bool cp_cli_parse_sub(const struct cp_command_opts *c, size_t max_pos, int argc, char **argv,
                      struct cp_args *a, int *rc);

/* The value of a required option; NULL after printing "FLAG is required". */
const char *cp_cli_require(const char *cmd, const struct cp_args *a, int id, const char *flag);

/* Print d's message as cmd's error; its exit code. */
int cp_cli_fail(const char *cmd, const struct cp_diag *d);

#endif
