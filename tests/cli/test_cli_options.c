/* One option layer: every command and subcommand's --help, read as a user
 * reads it. The commands come from `cannprof --help` and the subcommands
 * from each dispatcher's usage lines, so a new one is covered without
 * touching this file. Each help must exit 0, list its options as
 * "-X, --name" lines and state its exit codes; and a short flag must mean
 * the same long option in every command (-o alone may name where a command
 * writes under different long names). */
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HELPS  64
#define MAX_SHORTS 512

/* One --help: "baseline set" and its text. */
struct help {
    char where[64];
    char *text;
};

/* One "-X, --name" line of a help. */
struct short_use {
    char c;
    char name[48];
    char where[64];
};

struct survey {
    struct help helps[MAX_HELPS];
    size_t n_helps;
    struct short_use shorts[MAX_SHORTS];
    size_t n_shorts;
};

/* The long names -o may have: where a command writes. */
static bool is_output_name(const char *name)
{
    return strcmp(name, "output") == 0 || strcmp(name, "out") == 0 ||
           strcmp(name, "output-dir") == 0;
}

/* The commands `cannprof --help` lists: the lines "  NAME  summary" after
 * "commands:". OUT: names[*n] (heap strings). */
static void list_commands(char **names, size_t cap, size_t *n)
{
    struct cp_run r;
    cp_run_cli(&r, "--help", NULL);
    cr_assert_eq(r.exit_code, 0, "cannprof --help: %s", r.err);
    const char *p = strstr(r.out, "\ncommands:\n");
    cr_assert_not_null(p, "no commands: section in\n%s", r.out);
    p += strlen("\ncommands:\n");
    *n = 0;
    while (*p == ' ' && p[1] == ' ' && isalpha((unsigned char)p[2])) {
        char name[32];
        cr_assert_eq(sscanf(p, " %31s", name), 1);
        cr_assert_lt(*n, cap);
        names[(*n)++] = cp_t_fmt("%s", name);
        p = strchr(p, '\n');
        if (!p)
            break;
        p++;
    }
    cp_run_release(&r);
    cr_assert_gt(*n, 5, "too few commands found in cannprof --help");
}

/* The subcommands a dispatcher's usage names: the word after "cannprof CMD "
 * on each usage line. Only for helps that speak of "<subcommand>". */
static void list_subcommands(const char *cmd, const char *text, char **subs, size_t cap, size_t *n)
{
    *n = 0;
    if (!strstr(text, "<subcommand>"))
        return;
    char *prefix = cp_t_fmt("cannprof %s ", cmd);
    for (const char *p = strstr(text, prefix); p; p = strstr(p + 1, prefix)) {
        char sub[32];
        if (sscanf(p + strlen(prefix), "%31[a-z]", sub) != 1 || strcmp(sub, "help") == 0)
            continue;
        bool seen = false;
        for (size_t i = 0; i < *n; i++)
            seen = seen || strcmp(subs[i], sub) == 0;
        if (!seen) {
            cr_assert_lt(*n, cap);
            subs[(*n)++] = cp_t_fmt("%s", sub);
        }
    }
    free(prefix);
}

/* Keep the help of `cmd` (and `sub`, may be NULL), asserting it exits 0 on
 * stdout. */
static void take_help(struct survey *s, const char *cmd, const char *sub)
{
    struct cp_run r;
    if (sub)
        cp_run_cli(&r, cmd, sub, "--help", NULL);
    else
        cp_run_cli(&r, cmd, "--help", NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 0, "cannprof %s%s%s --help: exit %d: %s", cmd, sub ? " " : "",
                 sub ? sub : "", r.exit_code, r.err);
    cr_assert_lt(s->n_helps, MAX_HELPS);
    struct help *h = &s->helps[s->n_helps++];
    snprintf(h->where, sizeof h->where, "%s%s%s", cmd, sub ? " " : "", sub ? sub : "");
    h->text = cp_t_fmt("%s", r.out);
    cp_run_release(&r);
}

/* Every "  -X, --name" line of every help. */
static void collect_shorts(struct survey *s)
{
    for (size_t i = 0; i < s->n_helps; i++) {
        for (const char *p = s->helps[i].text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
            char c, name[48];
            if (sscanf(p, "  -%c, --%47[a-zA-Z0-9_-]", &c, name) != 2 || p[4] != ',')
                continue;
            cr_assert_lt(s->n_shorts, MAX_SHORTS);
            struct short_use *u = &s->shorts[s->n_shorts++];
            u->c = c;
            snprintf(u->name, sizeof u->name, "%s", name);
            snprintf(u->where, sizeof u->where, "%s", s->helps[i].where);
        }
    }
}

/* Every help of every command and subcommand, except the commands in
 * `skip` (NULL-terminated). */
static void survey_all(struct survey *s, const char *const *skip)
{
    memset(s, 0, sizeof *s);
    char *cmds[32];
    size_t n = 0;
    list_commands(cmds, 32, &n);
    for (size_t i = 0; i < n; i++) {
        bool skipped = false;
        for (size_t k = 0; skip && skip[k]; k++)
            skipped = skipped || strcmp(skip[k], cmds[i]) == 0;
        if (!skipped) {
            take_help(s, cmds[i], NULL);
            char *subs[16];
            size_t ns = 0;
            list_subcommands(cmds[i], s->helps[s->n_helps - 1].text, subs, 16, &ns);
            for (size_t k = 0; k < ns; k++) {
                take_help(s, cmds[i], subs[k]);
                free(subs[k]);
            }
        }
        free(cmds[i]);
    }
    collect_shorts(s);
}

static void survey_release(struct survey *s)
{
    for (size_t i = 0; i < s->n_helps; i++)
        free(s->helps[i].text);
}

/* How many "-X, --name" lines give a letter another meaning than its first
 * one elsewhere (-o: a name other than the output names); each is described
 * in why[cap]. */
static size_t conflicts(const struct survey *s, char *why, size_t cap)
{
    size_t n = 0, len = 0;
    why[0] = '\0';
    for (size_t i = 0; i < s->n_shorts; i++) {
        const struct short_use *a = &s->shorts[i];
        const struct short_use *other = NULL;
        if (a->c == 'o') {
            if (is_output_name(a->name))
                continue;
        } else {
            for (size_t k = 0; k < i && !other; k++)
                if (s->shorts[k].c == a->c && strcmp(a->name, s->shorts[k].name) != 0)
                    other = &s->shorts[k];
            if (!other)
                continue;
        }
        n++;
        if (len < cap)
            len += (size_t)snprintf(why + len, cap - len,
                                    "\n  -%c is --%s in '%s' but --%s in '%s'", a->c, a->name,
                                    a->where, other ? other->name : "output/out/output-dir",
                                    other ? other->where : "every command");
    }
    return n;
}

Test(cli_options, every_help_exits_0_lists_its_options_and_states_its_exit_codes)
{
    struct survey s;
    survey_all(&s, NULL);
    cr_assert_geq(s.n_helps, 20, "only %zu helps found", s.n_helps);
    bool saw_sub = false;
    for (size_t i = 0; i < s.n_helps; i++) {
        const struct help *h = &s.helps[i];
        saw_sub = saw_sub || strchr(h->where, ' ') != NULL;
        cr_expect(strstr(h->text, "usage: cannprof ") != NULL, "%s: no usage line:\n%s", h->where,
                  h->text);
        cr_expect(cp_t_has_line(h->text, "exit codes: "), "%s: no 'exit codes:' line:\n%s",
                  h->where, h->text);
        /* a dispatcher lists subcommands; the rest list options */
        if (!strstr(h->text, "<subcommand>"))
            cr_expect(strstr(h->text, "-h, --help") != NULL, "%s: no '-h, --help' line:\n%s",
                      h->where, h->text);
    }
    cr_assert(saw_sub, "no subcommand helps found (baseline set, kb query, ...)");
    survey_release(&s);
}

Test(cli_options, a_short_flag_means_the_same_in_every_command)
{
    struct survey s;
    survey_all(&s, NULL);
    cr_assert_geq(s.n_shorts, 20, "only %zu short flags found", s.n_shorts);
    char why[4096];
    cr_expect_eq(conflicts(&s, why, sizeof why), 0, "short flags with two meanings:%s", why);
    /* the registry's letters, as the commands use them */
    static const struct {
        char c;
        const char *name;
    } want[] = {{'b', "batch"}, {'c', "constraints"}, {'f', "force"},      {'h', "help"},
                {'i', "input"}, {'m', "model"},       {'n', "iterations"}, {'q', "quiet"},
                {'r', "rules"}, {'s', "service"},     {'t', "threads"},    {'w', "warmup"}};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        bool seen = false;
        for (size_t i = 0; i < s.n_shorts; i++)
            if (s.shorts[i].c == want[k].c) {
                seen = true;
                cr_expect_str_eq(s.shorts[i].name, want[k].name, "-%c in %s", want[k].c,
                                 s.shorts[i].where);
            }
        (void)seen; /* a letter no command takes yet is fine */
    }
    survey_release(&s);
}

/* The survey itself must be able to fail: two helps that give -t two
 * meanings are caught. */
Test(cli_options, the_check_catches_a_letter_with_two_meanings)
{
    struct survey s;
    memset(&s, 0, sizeof s);
    s.helps[0].text = cp_t_fmt("usage: cannprof a\n  -t, --threads=T   x\n");
    snprintf(s.helps[0].where, sizeof s.helps[0].where, "a");
    s.helps[1].text = cp_t_fmt("usage: cannprof b\n  -t, --target=T    y\n"
                               "  -o, --out=DIR     z\n  -o, --outfile=F   w\n");
    snprintf(s.helps[1].where, sizeof s.helps[1].where, "b");
    s.n_helps = 2;
    collect_shorts(&s);
    cr_assert_eq(s.n_shorts, 4);
    char why[1024];
    cr_assert_eq(conflicts(&s, why, sizeof why), 2, "%s", why);
    cr_assert(strstr(why, "-t is --target in 'b' but --threads in 'a'"), "%s", why);
    cr_assert(strstr(why, "--outfile"), "%s", why);
    survey_release(&s);
}
