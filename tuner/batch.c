/* Tuning many models (tuner.h, "many models"): the list, a distinct
 * folder per model, worker processes, and each model's outcome read back
 * from its folder. */
#include "tuner/tuner.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* A worker: tune models[i] for i = worker, worker + jobs, ... each into
 * <out>/<its folder>; a failure is written to error.txt there. */
static int worker(struct cp_tune_opts base, const struct cp_tune_batch *b, int worker_id, int jobs,
                  const char *out_root)
{
    int failures = 0;
    cp_mkdir_p(out_root, 0755, NULL);
    for (size_t i = (size_t)worker_id; i < b->n && !(base.interrupt && *base.interrupt);
         i += (size_t)jobs) {
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

enum cp_status cp_tune_batch_run(const struct cp_tune_opts *base, struct cp_tune_batch *b, int jobs,
                                 const char *out_root, struct cp_diag *d)
{
    b->interrupted = false;
    b->failures = false;
    if (jobs < 1 || jobs > CP_TUNE_MAX_JOBS)
        return cp_diag_set(d, CP_ERR_INVALID, "tune: %d worker processes (1 to %d)", jobs,
                           CP_TUNE_MAX_JOBS);
    if (jobs > (int)b->n)
        jobs = (int)b->n;
    pid_t pids[CP_TUNE_MAX_JOBS];
    int started = 0;
    enum cp_status st = CP_OK;
    for (int w = 0; w < jobs; w++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0)
            _exit(worker(*base, b, w, jobs, out_root));
        if (pid < 0) {
            st = cp_diag_set(d, CP_ERR_INTERNAL, "tune: cannot start a worker process: %s",
                             strerror(errno));
            break;
        }
        pids[started++] = pid;
    }
    for (int w = 0; w < started; w++) {
        int status = 0;
        while (waitpid(pids[w], &status, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            b->failures = true;
    }
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
