/* The options several commands share, defined once: names, short flags,
 * value checks; merging them into a command's table; --help. */
#include "cli/options.h"
#include "core/host.h"
#include "rules/rules.h"
#include "runner/measure.h"
#include "stats/verdict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum check {
    C_FLAG,     /* no value */
    C_TEXT,     /* any text (the command parses it) */
    C_INT,      /* whole number in [lo, hi] */
    C_NUM,      /* real number in (lo, hi] */
    C_PERCENT,  /* "2%" or "2", [0, hi] */
    C_DURATION, /* cp_parse_duration */
    C_TARGET,   /* cp_target_parse */
    C_TEST,     /* cp_stat_test_parse */
    C_PRIORITY, /* cp_measure_priority_parse */
};

struct shared_def {
    struct cp_opt opt;
    enum check check;
    double lo, hi;
    const char *takes; /* for the error message: "a whole number from 1 to 1024" */
};

/* Sorted by name; ids may repeat (aliases). */
static const struct shared_def SHARED[] = {
    {{"alpha", 0, CP_OPT_VALUE, CP_SO_ALPHA, "A", "significance level, (0, 0.5] (default 0.05)"},
     C_NUM,
     0,
     0.5,
     "a significance level in (0, 0.5], e.g. 0.05"},
    {{"batch", 'b', CP_OPT_VALUE, CP_SO_BATCH, "B",
      "batch size (a dynamic-batch profile of the .om, or dimension 0 of every input)"},
     C_INT,
     1,
     65536,
     "a whole number from 1 to 65536"},
    {{"budget", 0, CP_OPT_VALUE, CP_SO_BUDGET, "N", "candidate evaluations (default 12)"},
     C_INT,
     1,
     10000,
     "a whole number from 1 to 10000"},
    {{"constraints", 'c', CP_OPT_VALUE, CP_SO_CONSTRAINTS, "\"memory<3GB,precision_loss<1%\"",
      "limits a change must respect (docs/constraints.md)"},
     C_TEXT,
     0,
     0,
     NULL},
    {{"duration", 'd', CP_OPT_VALUE, CP_SO_DURATION, "S",
      "measure for S seconds (\"10\", \"2.5s\", \"500ms\", \"1m\")"},
     C_DURATION,
     0,
     0,
     "seconds: \"10\", \"2.5s\", \"500ms\", \"1m\""},
    {{"help", 'h', CP_OPT_FLAG, CP_SO_HELP, NULL, "show this help"}, C_FLAG, 0, 0, NULL},
    {{"input", 'i', CP_OPT_MULTI, CP_SO_INPUT, "NAME=FILE",
      "an input from a .pb or .npy file (repeat for each input; default: seeded random)"},
     C_TEXT,
     0,
     0,
     NULL},
    {{"input_shape", 0, CP_OPT_VALUE, CP_SO_INPUT_SHAPE, "\"name:1,3,224,224;...\"",
      "concrete shapes for dynamic inputs"},
     C_TEXT,
     0,
     0,
     NULL},
    {{"iterations", 'n', CP_OPT_VALUE, CP_SO_ITERATIONS, "N",
      "undisturbed iterations to measure (default 100)"},
     C_INT,
     1,
     100000000,
     "a whole number from 1 to 100000000"},
    {{"json", 0, CP_OPT_FLAG, CP_SO_JSON, NULL, "print the result as JSON"}, C_FLAG, 0, 0, NULL},
    {{"kb", 0, CP_OPT_VALUE, CP_SO_KB, "FILE",
      "knowledge base (default $XDG_DATA_HOME/cannprof/kb.sqlite)"},
     C_TEXT,
     0,
     0,
     NULL},
    {{"priority", 0, CP_OPT_VALUE, CP_SO_PRIORITY, "P",
      "normal (default) or high: measure at nice -20, so that other work on the machine takes "
      "little of the CPUs (needs root or CAP_SYS_NICE; without, says so and goes on)"},
     C_PRIORITY,
     0,
     0,
     "normal or high"},
    {{"quiet", 'q', CP_OPT_FLAG, CP_SO_QUIET, NULL, "no progress lines on stderr"},
     C_FLAG,
     0,
     0,
     NULL},
    {{"resamples", 0, CP_OPT_VALUE, CP_SO_RESAMPLES, "N", "bootstrap resamples (default 10000)"},
     C_INT,
     100,
     10000000,
     "a whole number from 100 to 10000000"},
    {{"rounds", 0, CP_OPT_VALUE, CP_SO_ITERATIONS, "N", "the same as --iterations"},
     C_INT,
     1,
     100000000,
     "a whole number from 1 to 100000000"},
    {{"rules", 'r', CP_OPT_MULTI, CP_SO_RULES, "DIR|FILE", "rule packs instead of the defaults"},
     C_TEXT,
     0,
     0,
     NULL},
    {{"run", 0, CP_OPT_VALUE, CP_SO_RUN, "N", "run of the trace (default: the last)"},
     C_INT,
     1,
     (double)INT64_MAX,
     "a run id, a whole number from 1"},
    {{"seed", 0, CP_OPT_VALUE, CP_SO_SEED, "N", "seed (default 0)"},
     C_INT,
     0,
     (double)INT64_MAX,
     "a non-negative whole number"},
    {{"service", 's', CP_OPT_VALUE, CP_SO_SERVICE, "NAME", "the service"}, C_TEXT, 0, 0, NULL},
    {{"statistical_test", 0, CP_OPT_VALUE, CP_SO_TEST, "TEST", "the same as --test"},
     C_TEST,
     0,
     0,
     "mann-whitney, welch, t-test or bootstrap"},
    {{"target", 0, CP_OPT_VALUE, CP_SO_TARGET, "T", "latency (default), throughput or memory"},
     C_TARGET,
     0,
     0,
     "latency, throughput or memory"},
    {{"test", 0, CP_OPT_VALUE, CP_SO_TEST, "TEST",
      "mann-whitney (default), welch, t-test or bootstrap"},
     C_TEST,
     0,
     0,
     "mann-whitney, welch, t-test or bootstrap"},
    {{"threads", 't', CP_OPT_VALUE, CP_SO_THREADS, "T", "threads (default: all cores)"},
     C_INT,
     1,
     1024,
     "a whole number from 1 to 1024"},
    {{"threshold", 0, CP_OPT_VALUE, CP_SO_THRESHOLD, "P%",
      "smallest change that matters, percent (\"2%\" or \"2\"; default 2%)"},
     C_PERCENT,
     0,
     1000,
     "a percentage from 0 to 1000, e.g. \"2%\" or \"2\""},
    {{"warmup", 'w', CP_OPT_VALUE, CP_SO_WARMUP, "N",
      "warm-up iterations, not measured (default 10)"},
     C_INT,
     0,
     1000000,
     "a whole number from 0 to 1000000"},
};
#define N_SHARED (sizeof SHARED / sizeof SHARED[0])

/* The one meaning of each short flag. -o is "where the command writes",
 * under the long name that command gives it. */
static const struct {
    char c;
    const char *names[4];
} SHORTS[] = {
    {'b', {"batch"}},      {'c', {"constraints"}},
    {'d', {"duration"}},   {'f', {"force"}},
    {'h', {"help"}},       {'i', {"input"}},
    {'j', {"jobs"}},       {'m', {"model"}},
    {'n', {"iterations"}}, {'o', {"output", "out", "output-dir"}},
    {'q', {"quiet"}},      {'r', {"rules"}},
    {'s', {"service"}},    {'t', {"threads"}},
    {'w', {"warmup"}},
};

const char *cp_short_flag_meaning(char c)
{
    for (size_t i = 0; i < sizeof SHORTS / sizeof *SHORTS; i++)
        if (SHORTS[i].c == c)
            return SHORTS[i].names[0];
    return NULL;
}

static bool short_allowed(char c, const char *name)
{
    for (size_t i = 0; i < sizeof SHORTS / sizeof *SHORTS; i++) {
        if (SHORTS[i].c != c)
            continue;
        for (size_t k = 0; k < 4 && SHORTS[i].names[k]; k++)
            if (strcmp(SHORTS[i].names[k], name) == 0)
                return true;
        return false;
    }
    return false;
}

static const struct shared_def *shared_def_of(const struct cp_parsed_opt *po)
{
    for (size_t i = 0; i < N_SHARED; i++)
        if (SHARED[i].opt.id == po->id && strcmp(SHARED[i].opt.name, po->name) == 0)
            return &SHARED[i];
    return NULL;
}

static int cmp_opt(const void *a, const void *b)
{
    return strcmp(((const struct cp_opt *)a)->name, ((const struct cp_opt *)b)->name);
}

/* The command's whole table, sorted: its own options and the shared ones
 * it takes (with their aliases), the command's help text where it gives
 * one. OUT: t[CP_MAX_TABLE], *n. */
static enum cp_status merged_table(const struct cp_command_opts *c, struct cp_opt *t, size_t *n,
                                   struct cp_diag *d)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n_own; i++) {
        if (k == CP_MAX_TABLE)
            return cp_diag_set(d, CP_ERR_INTERNAL, "%s: too many options", c->cmd);
        if (c->own[i].id >= CP_SO_FIRST)
            return cp_diag_set(d, CP_ERR_INTERNAL, "%s: --%s has a shared id", c->cmd,
                               c->own[i].name);
        t[k++] = c->own[i];
    }
    for (size_t i = 0; i < c->n_shared; i++) {
        bool found = false;
        for (size_t j = 0; j < N_SHARED; j++) {
            if (SHARED[j].opt.id != c->shared[i].id)
                continue;
            if (k == CP_MAX_TABLE)
                return cp_diag_set(d, CP_ERR_INTERNAL, "%s: too many options", c->cmd);
            t[k] = SHARED[j].opt;
            /* an alias keeps its "the same as" text */
            if (c->shared[i].help && strncmp(t[k].help, "the same as", 11) != 0)
                t[k].help = c->shared[i].help;
            k++;
            found = true;
        }
        if (!found)
            return cp_diag_set(d, CP_ERR_INTERNAL, "%s: no shared option %d", c->cmd,
                               c->shared[i].id);
    }
    qsort(t, k, sizeof *t, cmp_opt);
    for (size_t i = 0; i < k; i++) {
        if (i && strcmp(t[i - 1].name, t[i].name) == 0)
            return cp_diag_set(d, CP_ERR_INTERNAL, "%s: --%s is defined twice", c->cmd, t[i].name);
        if (t[i].short_name && !short_allowed(t[i].short_name, t[i].name))
            return cp_diag_set(
                d, CP_ERR_INTERNAL, "%s: -%c for --%s, but -%c means --%s in every command", c->cmd,
                t[i].short_name, t[i].name, t[i].short_name,
                cp_short_flag_meaning(t[i].short_name) ? cp_short_flag_meaning(t[i].short_name)
                                                       : "nothing");
    }
    *n = k;
    return CP_OK;
}

bool cp_parse_percent(const char *s, double max, double *pct)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0 || v > max)
        return false;
    if (*end == '%')
        end++;
    if (*end != '\0')
        return false;
    *pct = v;
    return true;
}

static bool check_value(const struct shared_def *def, const char *v, union cp_opt_value *out)
{
    int64_t i;
    char *end;
    switch (def->check) {
    case C_FLAG:
    case C_TEXT:
        return true;
    case C_INT:
        if (!cp_parse_i64(v, &i) || (double)i < def->lo || (double)i > def->hi)
            return false;
        out->i = i;
        return true;
    case C_NUM:
        out->num = strtod(v, &end);
        return end != v && *end == '\0' && out->num > def->lo && out->num <= def->hi;
    case C_PERCENT:
        return cp_parse_percent(v, def->hi, &out->num);
    case C_DURATION:
        return cp_parse_duration(v, &out->num);
    case C_TARGET: {
        enum cp_target t;
        if (!cp_target_parse(v, &t))
            return false;
        out->i = (int64_t)t;
        return true;
    }
    case C_TEST: {
        enum cp_stat_test t;
        if (!cp_stat_test_parse(v, &t))
            return false;
        out->i = (int64_t)t;
        return true;
    }
    case C_PRIORITY: {
        enum cp_measure_priority pr;
        if (!cp_measure_priority_parse(v, &pr))
            return false;
        out->i = (int64_t)pr;
        return true;
    }
    }
    return false;
}

enum cp_status cp_args_parse_cmd(const struct cp_command_opts *c, int argc, char **argv,
                                 struct cp_args *out, struct cp_diag *d)
{
    struct cp_opt table[CP_MAX_TABLE];
    size_t n = 0;
    enum cp_status st = merged_table(c, table, &n, d);
    if (st == CP_OK)
        st = cp_args_parse(c->cmd, table, n, argc, argv, out, d);
    if (st != CP_OK)
        return st;
    out->cmd = c;
    for (size_t i = 0; i < out->n_opts; i++) {
        const struct cp_parsed_opt *po = &out->opts[i];
        if (po->id < CP_SO_FIRST || po->id >= CP_SO_END)
            continue;
        const struct shared_def *def = shared_def_of(po);
        if (!def)
            continue;
        if (!po->value || check_value(def, po->value, &out->shared[po->id - CP_SO_FIRST]))
            continue;
        if (def->check == C_TEST || def->check == C_TARGET)
            return cp_diag_set(d, CP_ERR_USAGE, "--%s: unknown %s '%.60s'; use %s", po->name,
                               def->check == C_TEST ? "test" : "target", po->value, def->takes);
        return cp_diag_set(d, CP_ERR_USAGE, "--%s takes %s (got '%.60s')", po->name, def->takes,
                           po->value);
    }
    return CP_OK;
}

int64_t cp_args_int(const struct cp_args *a, int id, int64_t dflt)
{
    if (id < CP_SO_FIRST || id >= CP_SO_END || !cp_args_has(a, id))
        return dflt;
    return a->shared[id - CP_SO_FIRST].i;
}

double cp_args_num(const struct cp_args *a, int id, double dflt)
{
    if (id < CP_SO_FIRST || id >= CP_SO_END || !cp_args_has(a, id))
        return dflt;
    return a->shared[id - CP_SO_FIRST].num;
}

size_t cp_args_all(const struct cp_args *a, int id, const char **out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < a->n_opts && k < cap; i++)
        if (a->opts[i].id == id)
            out[k++] = a->opts[i].value;
    return k;
}

const char *cp_args_name(const struct cp_args *a, int id)
{
    const char *name = NULL;
    for (size_t i = 0; i < a->n_opts; i++)
        if (a->opts[i].id == id)
            name = a->opts[i].name;
    if (name)
        return name;
    if (a->cmd)
        for (size_t i = 0; i < a->cmd->n_own; i++)
            if (a->cmd->own[i].id == id)
                return a->cmd->own[i].name;
    for (size_t i = 0; i < N_SHARED; i++)
        if (SHARED[i].opt.id == id && strncmp(SHARED[i].opt.help, "the same as", 11) != 0)
            return SHARED[i].opt.name;
    return "?";
}

void cp_cmd_help(FILE *f, const struct cp_command_opts *c)
{
    struct cp_opt table[CP_MAX_TABLE];
    size_t n = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    fputs(c->usage, f);
    if (merged_table(c, table, &n, &d) != CP_OK) {
        fprintf(f, "(options unavailable: %s)\n", d.msg);
        return;
    }
    fputs("\noptions:\n", f);
    cp_opts_print_help(f, table, n);
    fprintf(f, "\nexit codes: %s\n", c->exit_codes);
}

void cp_cli_check_priority(const char *cmd, enum cp_measure_priority *p)
{
    if (*p != CP_MEASURE_PRIORITY_HIGH)
        return;
    struct cp_host_priority hp;
    if (cp_host_priority_raise(CP_MEASURE_HIGH_NICE, &hp)) {
        cp_host_priority_restore(&hp);
        return;
    }
    fprintf(stderr, "cannprof %s: warning: --priority high: %s; measuring at normal priority\n",
            cmd, hp.why);
    *p = CP_MEASURE_PRIORITY_NORMAL;
}
