/* Benchmarking in separate processes (runner/bench.h, "separate runs"):
 * fork a child per run, have it measure, read its result back through a
 * pipe, and tie the runs it stored into one group of the trace. */
#include "runner/bench.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WIRE_MAGIC 0x43504252u /* "CPBR" */

/* What a child sends: this header, then per subject n latencies, then n
 * probe readings (when probed) and n undisturbed flags. Parent and child
 * are one binary, so the struct travels as bytes. */
struct wire {
    uint32_t magic;
    int32_t status;
    char msg[sizeof(((struct cp_diag *)0)->msg)];
    struct cp_bench_result res; /* its pointers are meaningless here */
};

static bool write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

static bool read_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        b += r;
        n -= (size_t)r;
    }
    return true;
}

/* The child: measure, send, leave without running the parent's atexit
 * handlers or flushing its buffers twice. */
static void child(const struct cp_bench_request *req, int fd)
{
    struct wire *w = calloc(1, sizeof *w);
    if (!w)
        _exit(3);
    w->magic = WIRE_MAGIC;
    struct cp_diag d;
    cp_diag_init(&d);
    w->status = (int32_t)cp_bench_models(req, &w->res, &d);
    snprintf(w->msg, sizeof w->msg, "%s", d.msg);
    const struct cp_measurement *m = &w->res.m;
    bool ok = write_all(fd, w, sizeof *w);
    for (size_t i = 0; ok && w->status == CP_OK && i < m->n_subjects; i++)
        ok = write_all(fd, m->ns[i], m->n * sizeof *m->ns[i]);
    if (ok && w->status == CP_OK && m->probed)
        ok = write_all(fd, m->probe_ns, m->n * sizeof *m->probe_ns);
    if (ok && w->status == CP_OK)
        ok = write_all(fd, m->undisturbed, m->n * sizeof *m->undisturbed);
    _exit(ok ? 0 : 3);
}

/* The parent's half: read one child's result. */
static enum cp_status receive(int fd, int run, struct cp_bench_result *res, struct cp_diag *d)
{
    struct wire *w = calloc(1, sizeof *w);
    if (!w)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    if (!read_all(fd, w, sizeof *w) || w->magic != WIRE_MAGIC) {
        st = cp_diag_set(d, CP_ERR_INTERNAL, "run %d: no result from its process", run + 1);
        goto out;
    }
    if (w->status != CP_OK) {
        st = cp_diag_set(d, (enum cp_status)w->status, "%s", w->msg);
        goto out;
    }
    *res = w->res;
    struct cp_measurement *m = &res->m;
    memset(m->ns, 0, sizeof m->ns);
    m->probe_ns = NULL;
    m->undisturbed = NULL;
    size_t n = m->n ? m->n : 1;
    bool ok = m->n_subjects >= 1 && m->n_subjects <= CP_MEASURE_MAX_SUBJECTS;
    for (size_t i = 0; ok && i < m->n_subjects; i++)
        ok = (m->ns[i] = cp_calloc(n, sizeof *m->ns[i])) != NULL &&
             read_all(fd, m->ns[i], m->n * sizeof *m->ns[i]);
    if (ok && m->probed)
        ok = (m->probe_ns = cp_calloc(n, sizeof *m->probe_ns)) != NULL &&
             read_all(fd, m->probe_ns, m->n * sizeof *m->probe_ns);
    if (ok)
        ok = (m->undisturbed = cp_calloc(n, sizeof *m->undisturbed)) != NULL &&
             read_all(fd, m->undisturbed, m->n * sizeof *m->undisturbed);
    if (!ok) {
        cp_bench_result_release(res);
        st = cp_diag_set(d, CP_ERR_INTERNAL, "run %d: its result came back incomplete", run + 1);
    }
out:
    free(w);
    return st;
}

/* Fork a child for run `run`, collect its result and reap it. */
static enum cp_status one_run(const struct cp_bench_request *req, int run,
                              struct cp_bench_result *res, struct cp_diag *d)
{
    int fds[2];
    if (pipe(fds) != 0)
        return cp_diag_set(d, CP_ERR_INTERNAL, "run %d: pipe: %s", run + 1, strerror(errno));
    fflush(NULL); /* nothing buffered may be written twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return cp_diag_set(d, CP_ERR_INTERNAL, "run %d: fork: %s", run + 1, strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        child(req, fds[1]);
    }
    close(fds[1]);
    enum cp_status st = receive(fds[0], run, res, d);
    close(fds[0]);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (st == CP_OK && WIFSIGNALED(ws)) {
        cp_bench_result_release(res);
        st = cp_diag_set(d, CP_ERR_INTERNAL, "run %d: its process died of signal %d", run + 1,
                         WTERMSIG(ws));
    }
    return st;
}

/* The median a run is summed up by: of its undisturbed iterations when it
 * probed and had any, else of all. */
static double run_median(const struct cp_bench_result *r)
{
    return r->undisturbed[0].n > 0 ? r->undisturbed[0].median : r->all[0].median;
}

static void summarise(struct cp_bench_runs *r)
{
    double *x = cp_calloc(r->n ? r->n : 1, sizeof *x);
    if (!x || r->n == 0) {
        free(x);
        return;
    }
    double sum = 0;
    r->min_median_ns = INFINITY;
    r->max_median_ns = 0;
    for (size_t i = 0; i < r->n; i++) {
        x[i] = run_median(&r->runs[i]);
        sum += x[i];
        r->min_median_ns = fmin(r->min_median_ns, x[i]);
        r->max_median_ns = fmax(r->max_median_ns, x[i]);
    }
    r->median_of_medians_ns = cp_stats_quantile(x, r->n, 0.5);
    double mean = sum / (double)r->n, sd = 0;
    if (r->n > 1 && cp_stats_sd(x, r->n, &sd, NULL) == CP_OK && mean > 0)
        r->cv_of_medians = sd / mean;
    free(x);
}

/* Tie the runs the children stored into one group. */
static enum cp_status tag_group(const char *path, struct cp_bench_runs *r, struct cp_diag *d)
{
    struct cp_trace_store *s = NULL;
    enum cp_status st = cp_trace_store_open(path, &s, d);
    int64_t group = r->runs[0].run_ids[0];
    for (size_t i = 0; i < r->n && st == CP_OK; i++)
        st = cp_trace_store_set_run_group(s, r->runs[i].run_ids[0], group, (int64_t)i,
                                          (int64_t)r->n, d);
    cp_trace_store_close(s);
    return st;
}

void cp_bench_runs_release(struct cp_bench_runs *r)
{
    for (size_t i = 0; r->runs && i < r->n; i++)
        cp_bench_result_release(&r->runs[i]);
    free(r->runs);
    memset(r, 0, sizeof *r);
}

enum cp_status cp_bench_models_runs(const struct cp_bench_request *req, int runs,
                                    struct cp_bench_runs *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    if (runs < 1 || runs > CP_BENCH_MAX_RUNS)
        return cp_diag_set(d, CP_ERR_INVALID, "bench: %d runs (1 to %d)", runs, CP_BENCH_MAX_RUNS);
    if (req->models[1])
        return cp_diag_set(d, CP_ERR_INVALID,
                           "separate runs measure one model; an A/B comparison interleaves two "
                           "in one process");
    out->runs = cp_calloc((size_t)runs, sizeof *out->runs);
    if (!out->runs)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    for (int i = 0; i < runs && st == CP_OK; i++) {
        if (i > 0 && req->policy.interrupt && *req->policy.interrupt) {
            out->interrupted = true;
            break;
        }
        st = one_run(req, i, &out->runs[out->n], d);
        if (st != CP_OK)
            break;
        out->n++;
        if (out->runs[out->n - 1].m.stop == CP_MEASURE_STOP_INTERRUPTED)
            out->interrupted = true;
    }
    if (st == CP_OK && req->trace_path && out->n > 1)
        st = tag_group(req->trace_path, out, d);
    if (st == CP_OK)
        summarise(out);
    return st;
}
