/* cannprof tune: the closed loop on one model, or on many (--batch). */
#include "cli/commands.h"
#include "cli/options.h"
#include "tuner/tuner.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
    OPT_ALPHA = 1,
    OPT_BATCH,
    OPT_BUDGET,
    OPT_CONSTRAINTS,
    OPT_FRESH,
    OPT_HELP,
    OPT_INPUT,
    OPT_JOBS,
    OPT_JSON,
    OPT_KB,
    OPT_KEEP,
    OPT_NO_KB,
    OPT_OUT,
    OPT_QUIET,
    OPT_ROUNDS,
    OPT_RULES,
    OPT_SEED,
    OPT_TARGET,
    OPT_TEST,
    OPT_THREADS,
    OPT_THRESHOLD,
    OPT_TIME_LIMIT,
    OPT_WARMUP,
};

static const struct cp_opt options[] = {
    {"alpha", 0, CP_OPT_VALUE, OPT_ALPHA, "A", "significance level of acceptance (default 0.05)"},
    {"batch", 0, CP_OPT_VALUE, OPT_BATCH, "LIST.txt|DIR",
     "tune many models: one path per line, or every .onnx of a folder"},
    {"budget", 'b', CP_OPT_VALUE, OPT_BUDGET, "N", "candidate evaluations (default 12)"},
    {"constraints", 'c', CP_OPT_VALUE, OPT_CONSTRAINTS, "\"memory<3GB,precision_loss<1%\"",
     "what every accepted candidate must respect (docs/constraints.md)"},
    {"fresh", 0, CP_OPT_FLAG, OPT_FRESH, NULL, "start a new session instead of resuming"},
    {"help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"},
    {"input", 'i', CP_OPT_MULTI, OPT_INPUT, "NAME=FILE",
     "inputs for measurement and precision (default: seeded random data)"},
    {"jobs", 'j', CP_OPT_VALUE, OPT_JOBS, "N", "with --batch: N worker processes (default 1)"},
    {"json", 0, CP_OPT_FLAG, OPT_JSON, NULL, "print report.json instead of the summary"},
    {"kb", 0, CP_OPT_VALUE, OPT_KB, "FILE",
     "knowledge base (default $XDG_DATA_HOME/cannprof/kb.sqlite)"},
    {"keep", 0, CP_OPT_VALUE, OPT_KEEP, "best|all", "candidate .om files to keep (default all)"},
    {"no-kb-strategies", 0, CP_OPT_FLAG, OPT_NO_KB, NULL,
     "do not try what won on similar models first"},
    {"out", 'o', CP_OPT_VALUE, OPT_OUT, "DIR", "artifacts (default tune-<model>)"},
    {"quiet", 'q', CP_OPT_FLAG, OPT_QUIET, NULL, "no progress lines on stderr"},
    {"rounds", 'n', CP_OPT_VALUE, OPT_ROUNDS, "N",
     "interleaved rounds per evaluation (default 60)"},
    {"rules", 'r', CP_OPT_MULTI, OPT_RULES, "DIR|FILE", "rule packs instead of the defaults"},
    {"seed", 0, CP_OPT_VALUE, OPT_SEED, "N", "seed of random inputs (default 0)"},
    {"statistical_test", 0, CP_OPT_VALUE, OPT_TEST, "TEST", "alias of --test"},
    {"target", 't', CP_OPT_VALUE, OPT_TARGET, "T", "latency (default), throughput or memory"},
    {"test", 0, CP_OPT_VALUE, OPT_TEST, "TEST",
     "acceptance test: mann-whitney (default), welch, t-test, bootstrap"},
    {"threads", 0, CP_OPT_VALUE, OPT_THREADS, "T", "the baseline's threads (default: all cores)"},
    {"threshold", 0, CP_OPT_VALUE, OPT_THRESHOLD, "P%",
     "smallest gain worth accepting (default 2%)"},
    {"time-limit", 0, CP_OPT_VALUE, OPT_TIME_LIMIT, "T", "stop after T (\"10m\", \"90s\", \"1h\")"},
    {"warmup", 'w', CP_OPT_VALUE, OPT_WARMUP, "N", "warm-up rounds per evaluation (default 5)"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void help(void)
{
    printf("usage: cannprof tune MODEL.onnx|MODEL.om [--target latency|throughput|memory]\n"
           "                     [--constraints \"memory<3GB,precision_loss<1%%\"] [--budget N]\n"
           "                     [--time-limit 10m] [--out DIR] [--kb FILE] [--keep best|all]\n"
           "       cannprof tune --batch LIST.txt|DIR [--jobs N] [same options]\n\n"
           "Profile the model, diagnose it with the rule packs, re-convert candidates and\n"
           "measure each interleaved against the current best; accept a candidate only when\n"
           "it is significantly better by more than the threshold and every constraint holds\n"
           "(precision against the unconverted model, memory). What was tried is stored in\n"
           "the knowledge base: the same command again resumes the session, and later models\n"
           "start with what won on similar ones. Ctrl-C stops after the current measurement.\n"
           "See docs/tuning.md.\n\n"
           "exit codes: 0 done, 2 bad input, 3 environment failure, 130 interrupted\n\n"
           "options:\n");
    cp_opts_print_help(stdout, options, N_OPTIONS);
}

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends the process at once */
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    int64_t v;
    if (!cp_parse_i64(s, &v) || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

static char *stem(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *s = cp_strdup(slash ? slash + 1 : path);
    char *dot = s ? strrchr(s, '.') : NULL;
    if (dot && dot != s)
        *dot = '\0';
    return s;
}

static void print_summary(const struct cp_tune_opts *o, const struct cp_tune_result *r)
{
    printf("model:       %s\n", o->model);
    printf("session:     %lld%s, %d evaluations, stopped: %s\n", (long long)r->session_id,
           r->already_done ? " (finished earlier)"
           : r->resumed    ? " (resumed)"
                           : "",
           r->evaluations, r->stop_reason);
    printf("\n%-22s %12s %12s %9s\n", "", "baseline", "best", "change");
    printf("%-22s %12.3f %12.3f %+8.1f%%\n", "latency (median, ms)", r->baseline_ns / 1e6,
           r->best_ns / 1e6, 100 * (r->best_ns / r->baseline_ns - 1));
    printf("%-22s %12.2f %12.2f %+8.1f%%\n", "throughput (items/s)", r->baseline_items_s,
           r->best_items_s, 100 * (r->best_items_s / r->baseline_items_s - 1));
    char a[32], b[32];
    cp_format_bytes(r->baseline_memory, a);
    cp_format_bytes(r->best_memory, b);
    printf("%-22s %12s %12s\n", "memory", a, b);
    printf("%-22s %11.4f%% %11.4f%%\n", "precision_loss", r->baseline_precision_loss,
           r->best_precision_loss);
    if (isfinite(r->final_change)) {
        bool thr = o->target == CP_TARGET_THROUGHPUT;
        printf("\nbest vs baseline, interleaved: %s %+.1f%% [%+.1f%%, %+.1f%%], p=%.3g\n"
               "(the table's columns were measured apart; this figure was not)\n",
               thr ? "throughput" : "latency", (thr ? 100 : -100) * r->final_change,
               thr ? 100 * r->final_ci_lo : -100 * r->final_ci_hi,
               thr ? 100 * r->final_ci_hi : -100 * r->final_ci_lo, r->final_p);
    }
    printf("\naccepted changes:\n");
    int k = 0;
    for (size_t i = 0; i < r->n_steps; i++)
        if (strcmp(r->steps[i].status, "accepted") == 0)
            printf("  %d. %s (%s): %s\n", ++k, r->steps[i].delta, r->steps[i].source,
                   r->steps[i].reason);
    if (!k)
        printf("  none: the baseline stays the best\n");
    printf("\nbest model:  %s\nreport:      %s\n", r->best_om, r->report_md);
}

/* ---- one model ------------------------------------------------------------------ */

static int tune_one(struct cp_tune_opts *o, bool json)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_tune_result r;
    enum cp_status st = cp_tune(o, &r, &d);
    int rc = 0;
    if (st != CP_OK) {
        cp_cli_error("tune", d.msg);
        rc = cp_status_exit_code(st);
    } else if (json) {
        uint8_t *data = NULL;
        size_t len = 0;
        if (cp_file_read(r.report_json, &data, &len, &d) == CP_OK)
            fwrite(data, 1, len, stdout);
        free(data);
    } else
        print_summary(o, &r);
    if (st == CP_OK && r.interrupted) {
        fprintf(stderr, "cannprof tune: interrupted; run the same command again to resume\n");
        rc = 130;
    }
    cp_tune_result_release(&r);
    return rc;
}

/* ---- many models ----------------------------------------------------------------- */

/* The models of a batch and the folder each one's artifacts go to (a name
 * under the batch's --out), both heap strings. */
struct batch {
    char **models;
    char **dirs;
    size_t n, cap;
};

static void batch_release(struct batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->models[i]);
        free(b->dirs ? b->dirs[i] : NULL);
    }
    free(b->models);
    free(b->dirs);
    memset(b, 0, sizeof *b);
}

/* Append a model path (copied); the list grows as needed. */
static bool batch_add(struct batch *b, const char *path)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        char **m = cp_realloc_array(b->models, cap, sizeof *m);
        if (!m)
            return false;
        b->models = m;
        b->cap = cap;
    }
    if (!(b->models[b->n] = cp_strdup(path)))
        return false;
    b->n++;
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static enum cp_status batch_from_dir(const char *src, struct batch *b, struct cp_diag *d)
{
    DIR *dh = opendir(src);
    if (!dh)
        return cp_diag_set(d, CP_ERR_IO, "--batch %s: cannot read the folder: %s", src,
                           strerror(errno));
    enum cp_status st = CP_OK;
    for (struct dirent *e; st == CP_OK && (e = readdir(dh));) {
        if (!cp_path_has_suffix(e->d_name, ".onnx"))
            continue;
        struct cp_buf p;
        cp_buf_init(&p);
        cp_buf_printf(&p, "%s/%s", src, e->d_name);
        if (cp_buf_status(&p) != CP_OK || !batch_add(b, p.data))
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory listing %s", src);
        cp_buf_release(&p);
    }
    closedir(dh);
    if (st == CP_OK && b->n)
        qsort(b->models, b->n, sizeof *b->models, cmp_str);
    return st;
}

/* One path per line (any length), blank lines and # comments skipped. */
static enum cp_status batch_from_list(const char *src, struct batch *b, struct cp_diag *d)
{
    FILE *f = fopen(src, "r");
    if (!f)
        return cp_diag_set(d, CP_ERR_IO, "--batch %s: cannot read: %s", src, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0;
    enum cp_status st = CP_OK;
    while (st == CP_OK && getline(&line, &cap, f) >= 0) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#')
            continue;
        if (!cp_path_exists(p))
            st = cp_diag_set(d, CP_ERR_INVALID, "%s:%d: %.300s: no such file", src, lineno, p);
        else if (!batch_add(b, p))
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading %s", src);
    }
    if (st == CP_OK && ferror(f))
        st = cp_diag_set(d, CP_ERR_IO, "--batch %s: read error", src);
    free(line);
    fclose(f);
    return st;
}

/* The last folder name in `path` before its file name, or NULL (none,
 * ".", ".."). Caller frees. */
static char *parent_name(const char *path)
{
    char *dir = cp_path_dirname(path);
    if (!dir)
        return NULL;
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        dir[--len] = '\0';
    const char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : dir;
    char *out = *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 ? cp_strdup(name) : NULL;
    free(dir);
    return out;
}

static bool name_taken(char *const *dirs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (dirs[i] && strcmp(dirs[i], name) == 0)
            return true;
    return false;
}

/* A folder name per model, different for every model: its file stem; for
 * stems that several models share (ONNX's own test layout has a/model.onnx,
 * b/model.onnx), "<parent folder>-<stem>"; and when even that repeats, a
 * "-2", "-3", ... suffix. Sharing a folder would make the second model
 * resume the first's artifacts and the summary show one report twice. */
static enum cp_status batch_name_dirs(struct batch *b, struct cp_diag *d)
{
    b->dirs = cp_calloc(b->n + 1, sizeof *b->dirs);
    char **stems = cp_calloc(b->n + 1, sizeof *stems);
    enum cp_status st = CP_OK;
    if (!b->dirs || !stems) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory naming the output folders");
        goto out_free;
    }
    for (size_t i = 0; i < b->n; i++)
        if (!(stems[i] = stem(b->models[i]))) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory naming the output folders");
            goto out_free;
        }
    for (size_t i = 0; i < b->n; i++) {
        bool shared = false;
        for (size_t j = 0; j < b->n && !shared; j++)
            shared = j != i && strcmp(stems[i], stems[j]) == 0;
        char *parent = shared ? parent_name(b->models[i]) : NULL;
        struct cp_buf name;
        cp_buf_init(&name);
        if (parent)
            cp_buf_printf(&name, "%s-", parent);
        cp_buf_puts(&name, stems[i][0] ? stems[i] : "model");
        free(parent);
        size_t base_len = name.len;
        for (int k = 2; cp_buf_status(&name) == CP_OK && name_taken(b->dirs, i, name.data); k++) {
            name.len = base_len;
            name.data[base_len] = '\0';
            cp_buf_printf(&name, "-%d", k);
        }
        if (cp_buf_status(&name) != CP_OK) {
            cp_buf_release(&name);
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory naming the output folders");
            goto out_free;
        }
        b->dirs[i] = cp_buf_steal(&name);
    }
out_free:
    for (size_t i = 0; stems && i < b->n; i++)
        free(stems[i]);
    free(stems);
    return st;
}

/* The models of a list file (one path per line, # comments) or a folder
 * (every .onnx, sorted), as many as there are, with their folders. */
static enum cp_status batch_models(const char *src, struct batch *b, struct cp_diag *d)
{
    memset(b, 0, sizeof *b);
    struct stat sb;
    if (stat(src, &sb) != 0)
        return cp_diag_set(d, CP_ERR_INVALID, "--batch %s: no such file or folder", src);
    enum cp_status st =
        S_ISDIR(sb.st_mode) ? batch_from_dir(src, b, d) : batch_from_list(src, b, d);
    if (st == CP_OK && b->n == 0)
        st = cp_diag_set(d, CP_ERR_INVALID, "--batch %s: no models in it", src);
    if (st == CP_OK)
        st = batch_name_dirs(b, d);
    if (st != CP_OK)
        batch_release(b);
    return st;
}

/* "<out_root>/<dir>/<file>" into a fresh string; NULL when out of memory. */
static char *batch_path(const char *out_root, const char *dir, const char *file)
{
    struct cp_buf p;
    cp_buf_init(&p);
    cp_buf_printf(&p, "%s/%s%s%s", out_root, dir, file ? "/" : "", file ? file : "");
    if (cp_buf_status(&p) != CP_OK) {
        cp_buf_release(&p);
        return NULL;
    }
    return cp_buf_steal(&p);
}

/* A worker: tune models[i] for i = worker, worker + jobs, ... each into
 * <out>/<its folder>; a failure is written to error.txt there. */
static int worker(struct cp_tune_opts base, const struct batch *b, int worker_id, int jobs,
                  const char *out_root)
{
    int failures = 0;
    mkdir(out_root, 0755);
    for (size_t i = (size_t)worker_id; i < b->n && !interrupted; i += (size_t)jobs) {
        char *dir = batch_path(out_root, b->dirs[i], NULL);
        char *errp = batch_path(out_root, b->dirs[i], "error.txt");
        if (!dir || !errp) {
            fprintf(stderr, "cannprof tune: %s: out of memory\n", b->models[i]);
            failures++;
            free(dir);
            free(errp);
            continue;
        }
        struct cp_tune_opts o = base;
        o.model = b->models[i];
        o.out_dir = dir;
        mkdir(dir, 0755);
        struct cp_diag d;
        cp_diag_init(&d);
        struct cp_tune_result r;
        if (cp_tune(&o, &r, &d) != CP_OK) {
            failures++;
            cp_file_write_atomic(errp, d.msg, strlen(d.msg), NULL);
            fprintf(stderr, "cannprof tune: %s: %s\n", b->models[i], d.msg);
        } else
            unlink(errp);
        cp_tune_result_release(&r);
        free(dir);
        free(errp);
    }
    return failures ? 1 : 0;
}

/* One row of the summary table from the model's report.json (or its
 * error.txt). A report that cannot be read as one is an error naming the
 * file. Returns CP_OK, or the status of that error. */
static enum cp_status summary_row(const struct batch *b, size_t i, const char *out_root,
                                  const struct cp_tune_opts *o)
{
    char *path = batch_path(out_root, b->dirs[i], "report.json");
    char *errp = batch_path(out_root, b->dirs[i], "error.txt");
    const char *name = b->dirs[i];
    enum cp_status st = CP_OK;
    if (!path || !errp) {
        printf("| %s | - | - | - | error: out of memory | - |\n", name);
        st = CP_ERR_NOMEM;
        goto out_free;
    }
    if (cp_path_exists(errp)) {
        uint8_t *msg = NULL;
        size_t len = 0;
        cp_file_read(errp, &msg, &len, NULL);
        printf("| %s | - | - | - | error: %s | - |\n", name,
               msg ? (const char *)msg : "(error.txt unreadable)");
        free(msg);
        goto out_free;
    }
    if (!cp_path_exists(path)) {
        printf("| %s | - | - | - | error: no report (interrupted?) | - |\n", name);
        goto out_free;
    }
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_tune_report_row row;
    if ((st = cp_tune_report_read(path, &row, &d)) != CP_OK) {
        printf("| %s | - | - | - | error: %s | - |\n", name, d.msg);
        cp_cli_error("tune", d.msg);
        goto out_free;
    }
    struct cp_buf changes;
    cp_buf_init(&changes);
    for (size_t k = 0; k < row.n_accepted; k++)
        cp_buf_printf(&changes, "%s`%s`", k ? ", " : "", row.accepted[k]);
    const struct cp_constraint *pl =
        cp_constraints_find(&o->constraints, CP_CONSTRAINT_PRECISION_LOSS);
    const struct cp_constraint *mc = cp_constraints_find(&o->constraints, CP_CONSTRAINT_MEMORY);
    bool ok = (!pl || cp_constraint_holds(pl, row.best_precision_loss)) &&
              (!mc || cp_constraint_holds(mc, row.best_memory_bytes));
    printf("| %s | %.3f | %.3f | %+.1f%% | %s | %s |\n", name, row.baseline_ms, row.best_ms,
           100 * (row.best_ms / row.baseline_ms - 1), changes.len ? changes.data : "none",
           ok ? "met" : "NOT met");
    cp_buf_release(&changes);
    cp_tune_report_row_release(&row);
out_free:
    free(path);
    free(errp);
    return st;
}

static int tune_batch(struct cp_tune_opts *o, const char *src, int jobs, const char *out_root)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct batch b;
    if (batch_models(src, &b, &d) != CP_OK) {
        cp_cli_error("tune", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (jobs > (int)b.n)
        jobs = (int)b.n;
    fprintf(stderr, "cannprof tune: %zu model%s, %d worker%s, artifacts in %s\n", b.n,
            b.n == 1 ? "" : "s", jobs, jobs == 1 ? "" : "s", out_root);
    int rc = 0;
    pid_t pids[64];
    int started = 0;
    for (int w = 0; w < jobs; w++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0)
            _exit(worker(*o, &b, w, jobs, out_root));
        if (pid < 0) {
            cp_cli_error("tune", "cannot start a worker process");
            rc = 3;
            break;
        }
        pids[started++] = pid;
    }
    for (int w = 0; w < started; w++) {
        int status = 0;
        while (waitpid(pids[w], &status, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            rc = rc ? rc : 1;
    }
    printf("| model | baseline ms | best ms | change | accepted changes | constraints |\n"
           "|---|---:|---:|---:|---|---|\n");
    enum cp_status worst = CP_OK;
    for (size_t i = 0; i < b.n; i++) {
        enum cp_status st = summary_row(&b, i, out_root, o);
        if (st != CP_OK && worst == CP_OK)
            worst = st;
    }
    batch_release(&b);
    if (interrupted) {
        fprintf(stderr, "cannprof tune: interrupted; run the same command again to resume\n");
        return 130;
    }
    if (rc)
        return rc == 1 ? 3 : rc;
    return cp_status_exit_code(worst);
}

/* ---- options ----------------------------------------------------------------------- */

static bool parse_opts(const struct cp_args *a, struct cp_tune_opts *o, struct cp_diag *d)
{
    const char *v;
    if ((v = cp_args_get(a, OPT_TARGET)) && !cp_target_parse(v, &o->target))
        return cp_diag_set(d, CP_ERR_INVALID, "--target: use latency, throughput or memory"), false;
    if ((v = cp_args_get(a, OPT_CONSTRAINTS))) {
        if (cp_constraints_parse(v, &o->constraints, d) != CP_OK)
            return false;
        o->constraints_text = v;
    }
    if ((v = cp_args_get(a, OPT_BUDGET)) && !parse_int(v, 1, 10000, &o->budget))
        return cp_diag_set(d, CP_ERR_INVALID, "--budget takes a whole number from 1 to 10000"),
               false;
    if ((v = cp_args_get(a, OPT_TIME_LIMIT)) && !cp_parse_duration(v, &o->time_limit_s))
        return cp_diag_set(d, CP_ERR_INVALID, "--time-limit takes \"10m\", \"90s\" or \"1h\""),
               false;
    if ((v = cp_args_get(a, OPT_ROUNDS)) && !parse_int(v, 5, 100000, &o->rounds))
        return cp_diag_set(d, CP_ERR_INVALID, "--rounds takes a whole number from 5 to 100000"),
               false;
    if ((v = cp_args_get(a, OPT_WARMUP)) && !parse_int(v, 0, 10000, &o->warmup))
        return cp_diag_set(d, CP_ERR_INVALID, "--warmup takes a whole number from 0 to 10000"),
               false;
    if ((v = cp_args_get(a, OPT_THREADS)) && !parse_int(v, 1, 1024, &o->threads))
        return cp_diag_set(d, CP_ERR_INVALID, "--threads takes a whole number from 1 to 1024"),
               false;
    int64_t seed;
    if ((v = cp_args_get(a, OPT_SEED))) {
        if (!cp_parse_i64(v, &seed) || seed < 0)
            return cp_diag_set(d, CP_ERR_INVALID, "--seed takes a non-negative number"), false;
        o->seed = (uint64_t)seed;
    }
    if ((v = cp_args_get(a, OPT_TEST)) && !cp_stat_test_parse(v, &o->verdict.test))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "--test: use mann-whitney, welch, t-test or bootstrap"),
               false;
    char *end;
    if ((v = cp_args_get(a, OPT_ALPHA))) {
        o->verdict.alpha = strtod(v, &end);
        if (end == v || *end || !(o->verdict.alpha > 0 && o->verdict.alpha <= 0.5))
            return cp_diag_set(d, CP_ERR_INVALID, "--alpha: a level in (0, 0.5]"), false;
    }
    if ((v = cp_args_get(a, OPT_THRESHOLD))) {
        o->verdict.threshold_pct = strtod(v, &end);
        if (end == v || (*end && strcmp(end, "%") != 0) || !(o->verdict.threshold_pct >= 0))
            return cp_diag_set(d, CP_ERR_INVALID, "--threshold: a percentage like 2%%"), false;
    }
    if ((v = cp_args_get(a, OPT_KEEP))) {
        if (strcmp(v, "best") != 0 && strcmp(v, "all") != 0)
            return cp_diag_set(d, CP_ERR_INVALID, "--keep: best or all"), false;
        o->keep_all = strcmp(v, "all") == 0;
    }
    o->fresh = cp_args_has(a, OPT_FRESH);
    o->use_kb_strategies = !cp_args_has(a, OPT_NO_KB);
    o->kb_path = cp_args_get(a, OPT_KB);
    return true;
}

int cp_cmd_tune(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse("tune", options, N_OPTIONS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("tune", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, OPT_HELP)) {
        help();
        return 0;
    }
    struct cp_tune_opts o;
    cp_tune_opts_init(&o);
    o.keep_all = true;
    if (!parse_opts(&args, &o, &d)) {
        cp_cli_error("tune", d.msg);
        return 2;
    }
    const char *batch = cp_args_get(&args, OPT_BATCH);
    if ((batch && args.n_positional) || (!batch && args.n_positional != 1)) {
        cp_cli_error("tune", "give one MODEL (.onnx or .om), or --batch LIST.txt|DIR");
        return 2;
    }
    int jobs = 1;
    const char *v = cp_args_get(&args, OPT_JOBS);
    if (v && (!batch || !parse_int(v, 1, 64, &jobs))) {
        cp_cli_error("tune", batch ? "--jobs takes a whole number from 1 to 64"
                                   : "--jobs works with --batch");
        return 2;
    }
    const char *inputs[CP_MAX_ARGS], *rules[CP_MAX_ARGS];
    for (size_t i = 0; i < args.n_opts; i++) {
        if (args.opts[i].id == OPT_INPUT)
            inputs[o.n_inputs++] = args.opts[i].value;
        if (args.opts[i].id == OPT_RULES)
            rules[o.n_rule_paths++] = args.opts[i].value;
    }
    o.inputs = inputs;
    o.rule_paths = rules;
    bool quiet = cp_args_has(&args, OPT_QUIET);
    o.progress = quiet ? NULL : stderr;
    o.progress_tty = !quiet && isatty(STDERR_FILENO);
    o.interrupt = &interrupted;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    char *s = stem(batch ? batch : args.positional[0]);
    char out[1100];
    snprintf(out, sizeof out, "tune-%s", s ? s : "model");
    free(s);
    o.out_dir = cp_args_get(&args, OPT_OUT) ? cp_args_get(&args, OPT_OUT) : out;
    if (batch)
        return tune_batch(&o, batch, jobs, o.out_dir);
    o.model = args.positional[0];
    return tune_one(&o, cp_args_has(&args, OPT_JSON));
}
