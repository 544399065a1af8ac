/* Tuning many models (tuner.h, "many models"): the list, a distinct
 * folder per model, how the jobs share the CPUs, worker processes pinned
 * to their CPUs, and each model's outcome read back from its folder. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_ALLOC */
#include "tuner/tuner.h"

#include "rules/calibrate.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *stem(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *s = cp_strdup(slash ? slash + 1 : path);
    char *dot = s ? strrchr(s, '.') : NULL;
    if (dot && dot != s)
        *dot = '\0';
    /* "..onnx" loses its suffix to "."; "." and ".." name the output
     * folder itself or its parent, never a folder of its own ("" becomes
     * "model") */
    if (s && (strcmp(s, ".") == 0 || strcmp(s, "..") == 0))
        s[0] = '\0';
    return s;
}

void cp_tune_batch_release(struct cp_tune_batch *b)
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
static bool batch_add(struct cp_tune_batch *b, const char *path)
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

static enum cp_status batch_from_dir(const char *src, struct cp_tune_batch *b, struct cp_diag *d)
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
static enum cp_status batch_from_list(const char *src, struct cp_tune_batch *b, struct cp_diag *d)
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
        struct stat sb;
        if (stat(p, &sb) != 0)
            st = cp_diag_set(d, CP_ERR_INVALID, "%s:%d: %.300s: no such file", src, lineno, p);
        else if (S_ISDIR(sb.st_mode))
            st = cp_diag_set(d, CP_ERR_INVALID,
                             "%s:%d: %.300s: a folder, not a model file (give the folder itself "
                             "to --batch to tune every .onnx in it)",
                             src, lineno, p);
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
static enum cp_status batch_name_dirs(struct cp_tune_batch *b, struct cp_diag *d)
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
enum cp_status cp_tune_batch_list(const char *src, struct cp_tune_batch *b, struct cp_diag *d)
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
        cp_tune_batch_release(b);
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

/* ---- how the jobs share the CPUs ------------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static const char *plural(size_t n)
{
    return n == 1 ? "" : "s";
}

void cp_tune_cpus_format(const int *cpus, size_t n, struct cp_buf *out)
{
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
            j++;
        cp_buf_printf(out, "%s%d", i ? "," : "", cpus[i]);
        if (j > i)
            cp_buf_printf(out, "-%d", cpus[j]);
        i = j + 1;
    }
}

/* "CPU 3" or "CPUs 0-1" */
static void cpus_phrase(const int *cpus, size_t n, struct cp_buf *out)
{
    cp_buf_puts(out, n == 1 ? "CPU " : "CPUs ");
    cp_tune_cpus_format(cpus, n, out);
}

void cp_tune_batch_plan_release(struct cp_tune_batch_plan *p)
{
    if (!p)
        return;
    free(p->cpus);
    free(p->note);
    memset(p, 0, sizeof *p);
}

/* The note of a plan whose jobs, CPUs and threads are set: why fewer jobs
 * run at once than wanted, then which CPUs each job has. */
static void plan_note(const struct cp_tune_batch_plan *p, int jobs, int threads, size_t want,
                      struct cp_buf *b)
{
    size_t n = p->n_cpus, w = (size_t)p->workers;
    if (p->reduced) {
        if ((size_t)jobs == want)
            cp_buf_printf(b, "--jobs %d", jobs);
        else
            cp_buf_printf(b, "--jobs %d for %zu models", jobs, want);
        if (threads == 0)
            cp_buf_printf(b, " on %zu CPU%s", n, plural(n));
        else if ((size_t)threads > n)
            cp_buf_printf(b, " with --threads %d needs %d CPUs per job, %zu available", threads,
                          threads, n);
        else
            cp_buf_printf(b, " with --threads %d needs %zu CPUs, %zu available", threads,
                          want * (size_t)threads, n);
        cp_buf_printf(b, ": running %zu job%s at a time; ", w, plural(w));
    }
    if (w == 1) {
        cp_buf_puts(b, "1 job on ");
        cpus_phrase(p->cpus, p->per_job, b);
        cp_buf_printf(b, " with %d tuning thread%s", p->threads, plural((size_t)p->threads));
    } else {
        cp_buf_printf(b, "%zu jobs, each pinned to %zu CPU%s with %d tuning thread%s: ", w,
                      p->per_job, plural(p->per_job), p->threads, plural((size_t)p->threads));
        for (size_t j = 0; j < w; j++) {
            cp_buf_printf(b, "%sjob %zu on ", j ? ", " : "", j + 1);
            cpus_phrase(p->cpus + j * p->per_job, p->per_job, b);
        }
    }
    if ((size_t)p->threads > p->per_job)
        cp_buf_printf(b, " (its %d threads share %zu CPU%s)", p->threads, p->per_job,
                      plural(p->per_job));
    size_t used = w * p->per_job;
    if (used < n) {
        cp_buf_puts(b, "; ");
        cpus_phrase(p->cpus + used, n - used, b);
        cp_buf_puts(b, " left idle so that every job gets as many");
    }
}

enum cp_status cp_tune_batch_plan_cpus(const int *cpus, size_t n_cpus, int jobs, int threads,
                                       size_t n_models, struct cp_tune_batch_plan *out,
                                       struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    if (!cpus || n_cpus == 0)
        return cp_diag_set(d, CP_ERR_INVALID, "tune: no CPUs to run the jobs on");
    if (jobs < 1 || jobs > CP_TUNE_MAX_JOBS)
        return cp_diag_set(d, CP_ERR_INVALID, "tune: %d jobs (1 to %d)", jobs, CP_TUNE_MAX_JOBS);
    if (threads < 0)
        return cp_diag_set(d, CP_ERR_INVALID, "tune: %d threads (0 for all the job's CPUs)",
                           threads);
    if (n_models == 0)
        return cp_diag_set(d, CP_ERR_INVALID, "tune: no models to plan jobs for");
    for (size_t i = 0; i < n_cpus; i++)
        if (cpus[i] < 0)
            return cp_diag_set(d, CP_ERR_INVALID, "tune: %d is not a CPU number", cpus[i]);
    int *set = cp_calloc(n_cpus, sizeof *set);
    if (!set)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory planning the jobs");
    memcpy(set, cpus, n_cpus * sizeof *set);
    qsort(set, n_cpus, sizeof *set, cmp_int);
    size_t n = 1;
    for (size_t i = 1; i < n_cpus; i++)
        if (set[i] != set[n - 1])
            set[n++] = set[i];
    size_t want = (size_t)jobs < n_models ? (size_t)jobs : n_models, w;
    if (threads == 0)
        w = want < n ? want : n;
    else if ((size_t)threads > n)
        w = 1;
    else
        w = want < n / (size_t)threads ? want : n / (size_t)threads;
    out->cpus = set;
    out->n_cpus = n;
    out->workers = (int)w;
    out->per_job = n / w;
    out->threads = threads ? threads : (int)(out->per_job < 4096 ? out->per_job : 4096);
    out->reduced = w < want;
    struct cp_buf note;
    cp_buf_init(&note);
    plan_note(out, jobs, threads, want, &note);
    if (cp_buf_status(&note) != CP_OK || !(out->note = cp_buf_steal(&note))) {
        cp_buf_release(&note);
        cp_tune_batch_plan_release(out);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory planning the jobs");
    }
    return CP_OK;
}

const int *cp_tune_batch_plan_job_cpus(const struct cp_tune_batch_plan *p, size_t model, size_t *n)
{
    size_t w = p->workers > 0 ? model % (size_t)p->workers : 0;
    *n = p->per_job;
    return p->cpus + w * p->per_job;
}

enum cp_status cp_tune_affinity(int **cpus, size_t *n, struct cp_diag *d)
{
    *cpus = NULL;
    *n = 0;
    /* The kernel's mask may be larger than a cpu_set_t: grow until it fits. */
    for (int max = CPU_SETSIZE; max <= (1 << 20); max *= 2) {
        cpu_set_t *set = CPU_ALLOC(max);
        if (!set)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading the CPU affinity");
        size_t size = CPU_ALLOC_SIZE(max);
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) != 0) {
            int e = errno;
            CPU_FREE(set);
            if (e == EINVAL)
                continue;
            return cp_diag_set(d, CP_ERR_INTERNAL,
                               "cannot read which CPUs this process may use: %s", strerror(e));
        }
        int count = CPU_COUNT_S(size, set);
        int *v = count > 0 ? cp_calloc((size_t)count, sizeof *v) : NULL;
        if (!v) {
            CPU_FREE(set);
            return count > 0
                       ? cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading the CPU affinity")
                       : cp_diag_set(d, CP_ERR_INTERNAL, "this process may run on no CPU");
        }
        size_t k = 0;
        for (int c = 0; c < max && k < (size_t)count; c++)
            if (CPU_ISSET_S(c, size, set))
                v[k++] = c;
        CPU_FREE(set);
        *cpus = v;
        *n = k;
        return CP_OK;
    }
    return cp_diag_set(d, CP_ERR_INTERNAL, "cannot read which CPUs this process may use: %s",
                       strerror(EINVAL));
}

const char *cp_tune_batch_binding_env(void)
{
    static const char *const names[] = {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY",
                                        "KMP_AFFINITY"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v && !(i == 0 && strcasecmp(v, "false") == 0))
            return names[i];
    }
    return NULL;
}

/* ---- worker processes -------------------------------------------------------------- */

/* Restrict this process (a worker, still single-threaded: every thread
 * it starts, OpenMP's and oneDNN's, inherits the mask) to `cpus`. */
static enum cp_status pin(const int *cpus, size_t n, struct cp_diag *d)
{
    int max = 0;
    for (size_t i = 0; i < n; i++)
        max = cpus[i] > max ? cpus[i] : max;
    cpu_set_t *set = CPU_ALLOC(max + 1);
    if (!set)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t size = CPU_ALLOC_SIZE(max + 1);
    CPU_ZERO_S(size, set);
    for (size_t i = 0; i < n; i++)
        CPU_SET_S(cpus[i], size, set);
    enum cp_status st = CP_OK;
    if (sched_setaffinity(0, size, set) != 0)
        st = cp_diag_set(d, CP_ERR_INTERNAL, "%s", strerror(errno));
    CPU_FREE(set);
    return st;
}

/* A worker: tune models[i] for i = worker, worker + workers, ... each into
 * <out>/<its folder> on the worker's CPUs; a failure is written to
 * error.txt there. */
static int worker(struct cp_tune_opts base, const struct cp_tune_batch *b,
                  const struct cp_tune_batch_plan *plan, int worker_id, const char *out_root)
{
    int failures = 0;
    size_t n_cpus = 0;
    const int *cpus = cp_tune_batch_plan_job_cpus(plan, (size_t)worker_id, &n_cpus);
    struct cp_buf where;
    cp_buf_init(&where);
    cpus_phrase(cpus, n_cpus, &where);
    const char *on = cp_buf_status(&where) == CP_OK && where.data ? where.data : "its CPUs";
    struct cp_diag pd;
    cp_diag_init(&pd);
    bool pinned = pin(cpus, n_cpus, &pd) == CP_OK;
    if (!pinned)
        fprintf(stderr,
                "cannprof tune: job %d: cannot pin it to %s: %s; its models are not tuned\n",
                worker_id + 1, on, pd.msg);
    base.threads = plan->threads;
    cp_mkdir_p(out_root, 0755, NULL);
    for (size_t i = (size_t)worker_id; i < b->n && !(base.interrupt && *base.interrupt);
         i += (size_t)plan->workers) {
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
        cp_mkdir_p(dir, 0755, NULL);
        struct cp_diag d;
        cp_diag_init(&d);
        if (!pinned) {
            /* unpinned, it would share CPUs with another job: measured so,
             * its verdicts would not be worth the time */
            failures++;
            cp_diag_set(&d, CP_ERR_INTERNAL, "not tuned: its job could not be pinned to %s: %s", on,
                        pd.msg);
            cp_file_write_atomic(errp, d.msg, strlen(d.msg), NULL);
            free(dir);
            free(errp);
            continue;
        }
        if (base.progress)
            fprintf(base.progress, "cannprof tune: job %d (%s): %s\n", worker_id + 1, on,
                    b->models[i]);
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
    cp_buf_release(&where);
    return failures ? 1 : 0;
}

/* Wait for a child, through signals; true when it exited with 0. */
static bool child_ok(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The machine's calibration (the diagnosis reads its all-core peaks),
 * measured now on every CPU when it is not cached, in a process of its
 * own: a pinned job would measure "all cores" on its own few, and cache
 * that for every later run. A child, because the parent must not start
 * OpenMP threads before it forks the jobs. A failure costs only the
 * time: the jobs' diagnosis tries again and says why it could not. */
static void calibrate_first(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct cp_machine m;
        struct cp_diag d;
        cp_diag_init(&d);
        if (cp_calibrate(NULL, false, &m, &d) != CP_OK) {
            fprintf(stderr, "cannprof tune: calibrating this machine before the jobs: %s\n", d.msg);
            _exit(1);
        }
        _exit(0);
    }
    if (pid > 0)
        (void)child_ok(pid);
}

enum cp_status cp_tune_batch_run(const struct cp_tune_opts *base, struct cp_tune_batch *b,
                                 const struct cp_tune_batch_plan *plan, const char *out_root,
                                 struct cp_diag *d)
{
    b->interrupted = false;
    b->failures = false;
    int jobs = plan->workers;
    if (jobs < 1 || jobs > CP_TUNE_MAX_JOBS || !plan->cpus || plan->per_job < 1 ||
        (size_t)jobs * plan->per_job > plan->n_cpus)
        return cp_diag_set(d, CP_ERR_INVALID, "tune: a CPU plan of %d jobs on %zu CPUs", jobs,
                           plan->n_cpus);
    if (jobs > (int)b->n)
        jobs = (int)b->n;
    if (plan->per_job < plan->n_cpus && !(base->interrupt && *base->interrupt))
        calibrate_first();
    pid_t pids[CP_TUNE_MAX_JOBS];
    int started = 0;
    enum cp_status st = CP_OK;
    for (int w = 0; w < jobs; w++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0)
            _exit(worker(*base, b, plan, w, out_root));
        if (pid < 0) {
            st = cp_diag_set(d, CP_ERR_INTERNAL, "tune: cannot start a worker process: %s",
                             strerror(errno));
            break;
        }
        pids[started++] = pid;
    }
    for (int w = 0; w < started; w++)
        if (!child_ok(pids[w]))
            b->failures = true;
    b->interrupted = base->interrupt && *base->interrupt;
    return st;
}

enum cp_status cp_tune_batch_outcome(const struct cp_tune_batch *b, size_t i, const char *out_root,
                                     struct cp_tune_batch_result *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    char *path = batch_path(out_root, b->dirs[i], "report.json");
    char *errp = batch_path(out_root, b->dirs[i], "error.txt");
    enum cp_status st = CP_OK;
    if (!path || !errp) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    } else if (cp_path_exists(errp)) {
        uint8_t *msg = NULL;
        size_t len = 0;
        out->kind = CP_TUNE_BATCH_FAILED;
        if (cp_file_read(errp, &msg, &len, NULL) == CP_OK)
            out->error = (char *)msg;
        else
            out->error = cp_strdup("(error.txt unreadable)");
    } else if (!cp_path_exists(path)) {
        out->kind = CP_TUNE_BATCH_NO_REPORT;
    } else {
        out->kind = CP_TUNE_BATCH_DONE;
        st = cp_tune_report_read(path, &out->row, d);
    }
    free(path);
    free(errp);
    return st;
}

void cp_tune_batch_result_release(struct cp_tune_batch_result *r)
{
    cp_tune_report_row_release(&r->row);
    free(r->error);
    memset(r, 0, sizeof *r);
}
