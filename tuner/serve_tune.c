/* Tuning a served model's runtime knobs (docs/tuning.md, "Tuning a served
 * model"): `cannprof serve`'s --max-batch, --batch-window and --threads,
 * under an open-loop workload, with the acceptance rules of the flow loop.
 *
 *   1. The model is served as `cannprof serve` serves it (that very
 *      program, started on a free port) with the starting knobs, and its
 *      capacity is found by doubling the offered rate until the answers
 *      fall behind; a call's time is the mean latency at a tenth of it. The
 *      workload is 60% of the capacity for a latency target, 150% for
 *      throughput (so that the server must shed), unless given.
 *   2. Whether the model's batch can be set is tried once (a server at
 *      --max-batch 2); if not, no batching candidate is made, and the
 *      result says why.
 *   3. Candidates are the current knobs with one changed: twice or half
 *      the batch, a batching window of half a call when batching without
 *      one (else twice or half the window), one thread, every core (or
 *      half of them); the target decides which are tried first, and none is
 *      measured twice.
 *   4. A measurement: the current knobs and the candidate served side by
 *      side (two servers) and loaded alternately with the same Poisson
 *      arrivals `cannprof load` sends, --pairs times each
 *      (cp_tune_load_pairs); accepted when significantly better by the
 *      threshold and the constraints hold for the candidate's worst run;
 *      it becomes the current knobs, and the candidates are made again.
 *   5. The best knobs are measured once more against the starting ones:
 *      the figure to quote, and the `cannprof serve` command that runs
 *      them. */
#include "core/host.h"
#include "serve/serve.h"
#include "tuner/tuner_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCH      64
#define MAX_WINDOW_MS  50.0
#define MIN_WINDOW_MS  0.1
#define MAX_CANDIDATES 8
#define MAX_TRIED      256

void cp_serve_tune_opts_init(struct cp_serve_tune_opts *o)
{
    memset(o, 0, sizeof *o);
    o->target = CP_TARGET_LATENCY;
    cp_constraints_init(&o->constraints);
    o->budget = 8;
    o->pairs = 5;
    o->run_s = 2;
    o->concurrency = 64;
    o->start.max_batch = 1;
    o->use_kb_hints = true;
    cp_verdict_opts_init(&o->verdict);
    o->seed = 1;
}

void cp_serve_tune_result_release(struct cp_serve_tune_result *r)
{
    free(r->steps);
    memset(r, 0, sizeof *r);
}

void cp_serve_knobs_format(const struct cp_serve_knobs *k, char *out, size_t n)
{
    snprintf(out, n, "max_batch=%d window=%gms threads=%d", k->max_batch, k->window_ms, k->threads);
}

json_t *cp_serve_knobs_json(const struct cp_serve_knobs *k)
{
    json_t *o = json_object();
    if (o && cp_json_set_int(o, "max_batch", k->max_batch) &&
        cp_json_set_num(o, "batch_window_ms", k->window_ms) &&
        cp_json_set_int(o, "threads", k->threads))
        return o;
    json_decref(o);
    return NULL;
}

bool cp_serve_knobs_equal(const struct cp_serve_knobs *a, const struct cp_serve_knobs *b)
{
    return a->max_batch == b->max_batch && fabs(a->window_ms - b->window_ms) < 1e-9 &&
           a->threads == b->threads;
}

/* ---- a server ----------------------------------------------------------------------------- */

struct server {
    pid_t pid; /* 0: none */
    int port;
};

static void server_stop(struct server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        int status;
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    s->pid = 0;
}

/* The last line of a server's log, for the message of a failed start. */
static void last_line(const char *path, char *out, size_t n)
{
    out[0] = '\0';
    uint8_t *data = NULL;
    size_t len = 0;
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    if (cp_file_read(path, &data, &len, &ignored) != CP_OK)
        return;
    while (len && (data[len - 1] == '\n' || data[len - 1] == '\r'))
        len--;
    size_t start = len;
    while (start && data[start - 1] != '\n')
        start--;
    snprintf(out, n, "%.*s", (int)(len - start), (const char *)data + start);
    free(data);
}

/* Start `cli serve MODEL` with knobs k on a free port (its log in
 * out_dir/serve-ID.log) and wait until it listens. */
static enum cp_status server_start(const struct cp_serve_tune_opts *o,
                                   const struct cp_serve_knobs *k, int id, struct server *s,
                                   struct cp_diag *d)
{
    s->pid = 0;
    s->port = 0;
    char ready[1200], log[1200], b[16], w[32], t[16];
    snprintf(ready, sizeof ready, "%.1100s/serve-%d.port", o->out_dir, id);
    snprintf(log, sizeof log, "%.1100s/serve-%d.log", o->out_dir, id);
    snprintf(b, sizeof b, "%d", k->max_batch);
    snprintf(w, sizeof w, "%g", k->window_ms);
    snprintf(t, sizeof t, "%d", k->threads);
    unlink(ready);
    char *argv[] = {(char *)o->cli,
                    "serve",
                    (char *)o->model,
                    "--port",
                    "0",
                    "--ready-file",
                    ready,
                    "--max-batch",
                    b,
                    "--batch-window",
                    w,
                    "--threads",
                    t,
                    NULL};
    /* opened here, so that the child only duplicates descriptors */
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (null_fd < 0 || log_fd < 0) {
        int e = errno;
        if (null_fd >= 0)
            close(null_fd);
        if (log_fd >= 0)
            close(log_fd);
        return cp_diag_set(d, CP_ERR_IO, "cannot open %s: %s", log, strerror(e));
    }
    pid_t parent = getpid();
    fflush(NULL);
    s->pid = fork();
    if (s->pid == 0) {
        /* a server outlives nothing: when the tuner dies (killed, Ctrl-C),
         * its servers get SIGTERM and drain */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            _exit(127);
        if (dup2(null_fd, 1) < 0 || dup2(log_fd, 2) < 0)
            _exit(127);
        execv(o->cli, argv);
        _exit(127);
    }
    int e = errno;
    close(null_fd);
    close(log_fd);
    if (s->pid < 0) {
        s->pid = 0;
        return cp_diag_set(d, CP_ERR_IO, "cannot start %s serve: %s", o->cli, strerror(e));
    }
    /* the model loads and warms up before the port opens: up to 2 minutes */
    for (int i = 0; i < 12000; i++) {
        uint8_t *data = NULL;
        size_t len = 0;
        struct cp_diag ignored;
        cp_diag_init(&ignored);
        if (access(ready, R_OK) == 0 && cp_file_read(ready, &data, &len, &ignored) == CP_OK) {
            char text[32];
            snprintf(text, sizeof text, "%.*s", (int)(len < 31 ? len : 31), (const char *)data);
            free(data);
            s->port = atoi(text);
            if (s->port > 0)
                return CP_OK;
        }
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            char why[512];
            last_line(log, why, sizeof why);
            char kt[128];
            cp_serve_knobs_format(k, kt, sizeof kt);
            return cp_diag_set(d, CP_ERR_INVALID, "the server (%s) did not start: %s", kt,
                               why[0] ? why : "no message");
        }
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    server_stop(s);
    return cp_diag_set(d, CP_ERR_IO, "the server did not listen within 2 minutes (%s)", log);
}

/* One run of the workload against the server on `port`. */
static enum cp_status load_once(int port, double rate, double seconds, int concurrency,
                                uint64_t seed, enum cp_target t, struct cp_tune_load_sample *out,
                                struct cp_diag *d)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    struct cp_load_opts lo = {
        .url = url, .rate = rate, .duration_s = seconds, .concurrency = concurrency, .seed = seed};
    struct cp_load_result lr;
    enum cp_status st = cp_load_run(&lo, &lr, d);
    if (st != CP_OK)
        return st;
    if (lr.ok == 0 || lr.errors > 0)
        return cp_diag_set(
            d, CP_ERR_INVALID, "%llu of the workload's %llu requests failed (%llu answered)",
            (unsigned long long)lr.errors, (unsigned long long)lr.sent, (unsigned long long)lr.ok);
    out->value = t == CP_TARGET_THROUGHPUT ? lr.throughput : lr.mean_ms;
    out->p99_ms = lr.p99_ms;
    out->throughput = lr.throughput;
    return CP_OK;
}

struct two_servers {
    struct server s[2];
    const struct cp_serve_tune_opts *o;
    double rate;
};

static enum cp_status run_side(void *ctx, int side, uint64_t seed, struct cp_tune_load_sample *out,
                               struct cp_diag *d)
{
    struct two_servers *t = ctx;
    return load_once(t->s[side].port, t->rate, t->o->run_s, t->o->concurrency, seed, t->o->target,
                     out, d);
}

/* Knobs b against knobs a, two servers loaded alternately. */
static enum cp_status compare_knobs(const struct cp_serve_tune_opts *o,
                                    const struct cp_serve_knobs *a, const struct cp_serve_knobs *b,
                                    double rate, struct cp_comparison *cmp,
                                    struct cp_tune_load_sample *b_worst, struct cp_diag *d)
{
    struct two_servers t = {.o = o, .rate = rate};
    enum cp_status st = server_start(o, a, 0, &t.s[0], d);
    if (st == CP_OK)
        st = server_start(o, b, 1, &t.s[1], d);
    if (st == CP_OK)
        st = cp_tune_load_pairs(run_side, &t, o->pairs, o->seed, o->target, &o->verdict,
                                o->progress, "serve-tune", cmp, b_worst, d);
    server_stop(&t.s[0]);
    server_stop(&t.s[1]);
    return st;
}

/* ---- the starting point ------------------------------------------------------------------ */

/* Capacity: the offered rate doubles from 50/s, a run's time each (at
 * most a second), until the server falls behind: the answers take more
 * than half as long again as the arrivals (the rest queued). The most
 * answered per second is the capacity. A call's time: the mean latency
 * at a tenth of it. */
static enum cp_status capacity(const struct cp_serve_tune_opts *o, int port, double *cap,
                               double *call_ms, struct cp_diag *d)
{
    double best = 0, secs = fmin(o->run_s, 1.0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    enum cp_status st = CP_OK;
    for (double rate = 50; st == CP_OK && rate <= 200000; rate *= 2) {
        struct cp_load_opts lo = {.url = url,
                                  .rate = rate,
                                  .duration_s = secs,
                                  .concurrency = o->concurrency,
                                  .seed = o->seed};
        struct cp_load_result lr;
        if ((st = cp_load_run(&lo, &lr, d)) != CP_OK)
            break;
        if (lr.ok == 0 || lr.errors > 0) {
            st = cp_diag_set(d, CP_ERR_INVALID, "%llu of %llu requests failed at %.0f requests/s",
                             (unsigned long long)lr.errors, (unsigned long long)lr.sent, rate);
            break;
        }
        best = fmax(best, lr.throughput);
        if (lr.seconds > 1.5 * secs)
            break;
    }
    struct cp_tune_load_sample s = {.value = NAN};
    if (st == CP_OK)
        st = load_once(port, fmax(best / 10, 1), secs, o->concurrency, o->seed, CP_TARGET_LATENCY,
                       &s, d);
    *cap = best;
    *call_ms = s.value;
    return st;
}

/* ---- candidates ------------------------------------------------------------------------- */

struct cand {
    struct cp_serve_knobs k;
    const char *why;
};

static void push(struct cand *v, size_t *n, const struct cp_serve_knobs *k, const char *why,
                 const struct cp_serve_knobs *tried, size_t n_tried)
{
    if (*n == MAX_CANDIDATES)
        return;
    for (size_t i = 0; i < n_tried; i++)
        if (cp_serve_knobs_equal(&tried[i], k))
            return;
    for (size_t i = 0; i < *n; i++)
        if (cp_serve_knobs_equal(&v[i].k, k))
            return;
    v[(*n)++] = (struct cand){*k, why};
}

/* The current knobs with one changed, in the order the target tries them. */
static size_t neighbours(const struct cp_serve_knobs *c, bool batch_ok, double call_ms, int cores,
                         enum cp_target target, const struct cp_serve_knobs *tried, size_t n_tried,
                         struct cand *out)
{
    struct cand batch[3], window[3], threads[3];
    size_t nb = 0, nw = 0, nt = 0;
    struct cp_serve_knobs k;
    if (batch_ok && c->max_batch < MAX_BATCH) {
        k = *c;
        k.max_batch = c->max_batch * 2;
        push(batch, &nb, &k, "larger batches", tried, n_tried);
    }
    if (c->max_batch > 1) {
        k = *c;
        k.max_batch = c->max_batch / 2;
        if (k.max_batch == 1)
            k.window_ms = 0;
        push(batch, &nb, &k, "smaller batches", tried, n_tried);
        k = *c;
        if (c->window_ms <= 0) {
            k.window_ms = fmin(fmax(call_ms / 2, MIN_WINDOW_MS), MAX_WINDOW_MS);
            k.window_ms = round(k.window_ms * 10) / 10;
            push(window, &nw, &k, "a window of half a call", tried, n_tried);
        } else {
            k.window_ms = fmin(c->window_ms * 2, MAX_WINDOW_MS);
            push(window, &nw, &k, "a longer window", tried, n_tried);
            k.window_ms = c->window_ms / 2 < MIN_WINDOW_MS ? 0 : c->window_ms / 2;
            push(window, &nw, &k, "a shorter window", tried, n_tried);
        }
    }
    k = *c;
    if (c->threads != cores) {
        k.threads = cores;
        push(threads, &nt, &k, "every core", tried, n_tried);
    }
    if (c->threads != 1) {
        k.threads = 1;
        push(threads, &nt, &k, "one thread a batch", tried, n_tried);
    }
    if (cores >= 4 && c->threads != cores / 2) {
        k.threads = cores / 2;
        push(threads, &nt, &k, "half the cores", tried, n_tried);
    }
    /* throughput: batching first; latency: threads, then windows, then batches */
    bool thr = target == CP_TARGET_THROUGHPUT;
    const struct cand *group[3] = {thr ? batch : threads, window, thr ? threads : batch};
    size_t count[3] = {thr ? nb : nt, nw, thr ? nt : nb};
    size_t n = 0;
    for (int g = 0; g < 3; g++)
        for (size_t i = 0; i < count[g] && n < MAX_CANDIDATES; i++)
            out[n++] = group[g][i];
    return n;
}

/* "max_batch 1 -> 2" for what b changes from a. */
static void describe_change(const struct cp_serve_knobs *a, const struct cp_serve_knobs *b,
                            char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    if (a->max_batch != b->max_batch)
        k += (size_t)snprintf(out + k, n - k, "max_batch %d -> %d", a->max_batch, b->max_batch);
    if (k < n && fabs(a->window_ms - b->window_ms) > 1e-9)
        k += (size_t)snprintf(out + k, n - k, "%swindow %g -> %g ms", k ? ", " : "", a->window_ms,
                              b->window_ms);
    if (k < n && a->threads != b->threads)
        snprintf(out + k, n - k, "%sthreads %d -> %d", k ? ", " : "", a->threads, b->threads);
}

static enum cp_status serve_tune(const struct cp_serve_tune_opts *o, struct cp_serve_tune_result *r,
                                 struct cp_serve_kb *kb, struct cp_diag *d);

enum cp_status cp_serve_tune(const struct cp_serve_tune_opts *o, struct cp_serve_tune_result *r,
                             struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    r->final_pct = r->final_lo = r->final_hi = r->final_p = NAN;
    if (o->target != CP_TARGET_LATENCY && o->target != CP_TARGET_THROUGHPUT)
        return cp_diag_set(d, CP_ERR_USAGE, "a served model is tuned for latency or throughput");
    if (o->pairs < 3 || o->pairs > CP_TUNE_MAX_PAIRS)
        return cp_diag_set(d, CP_ERR_USAGE, "--pairs is 3 to %d", CP_TUNE_MAX_PAIRS);
    if (!(o->run_s >= 0.1 && o->run_s <= 600))
        return cp_diag_set(d, CP_ERR_USAGE, "a run lasts 0.1 to 600 seconds");
    if (o->start.max_batch < 1 || o->start.max_batch > 256)
        return cp_diag_set(d, CP_ERR_USAGE, "--max-batch is 1 to 256");
    /* by default the servers are this very program's `serve` */
    char self[4096];
    struct cp_serve_tune_opts own = *o;
    if (!own.cli) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            return cp_diag_set(d, CP_ERR_IO,
                               "cannot find this program (/proc/self/exe) to "
                               "serve the model with");
        self[n] = '\0';
        own.cli = self;
    }
    o = &own;
    if (access(o->cli, X_OK) != 0)
        return cp_diag_set(d, CP_ERR_IO, "no cannprof program to serve with (%s)", o->cli);
    enum cp_status st = cp_mkdir_p(o->out_dir, 0755, d);
    if (st != CP_OK)
        return st;
    /* the servers inherit the priority of the thread that starts them */
    struct cp_host_priority prio = {0};
    if (o->priority == CP_MEASURE_PRIORITY_HIGH)
        r->priority_raised = cp_host_priority_raise(CP_MEASURE_HIGH_NICE, &prio);
    struct cp_serve_kb kb;
    st = cp_serve_kb_open(o->kb_path, o->model, &kb, d);
    if (st == CP_OK) {
        snprintf(r->kb_path, sizeof r->kb_path, "%s", cp_kb_path(kb.kb));
        st = serve_tune(o, r, &kb, d);
        cp_serve_kb_close(&kb);
    }
    cp_host_priority_restore(&prio);
    return st;
}

/* The knowledge base's serving strategies as candidates from cur, first. */
struct hints {
    struct cp_kb_strategy_hit *hits;
    size_t n;
    char (*why)[64];
};

static void push_hints(const struct hints *h, const struct cp_serve_knobs *cur, int cores,
                       bool batch_ok, const struct cp_serve_knobs *tried, size_t n_tried,
                       struct cand *v, size_t *n)
{
    for (size_t i = 0; i < h->n; i++) {
        struct cp_serve_knobs k;
        if (cp_serve_kb_apply(h->hits[i].delta, cur, cores, batch_ok, &k))
            push(v, n, &k, h->why[i], tried, n_tried);
    }
}

static enum cp_status serve_tune(const struct cp_serve_tune_opts *o, struct cp_serve_tune_result *r,
                                 struct cp_serve_kb *kb, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    int cores = cp_host_usable_cpus();
    struct cp_serve_knobs cur = o->start;
    if (cur.threads <= 0 || cur.threads > cores)
        cur.threads = cores;
    r->original = r->best = cur;

    /* 1. capacity and a call's time, at the starting knobs */
    struct server s0;
    if ((st = server_start(o, &cur, 0, &s0, d)) != CP_OK)
        return st;
    st = capacity(o, s0.port, &r->capacity, &r->call_ms, d);
    server_stop(&s0);
    if (st != CP_OK)
        return st;
    r->rate = o->rate > 0 ? o->rate : (o->target == CP_TARGET_THROUGHPUT ? 1.5 : 0.6) * r->capacity;
    cp_tune_progress(
        o->progress,
        "serve-tune: %.1f requests/s flat out, a call %.3f ms at a tenth of it; the workload "
        "%.1f requests/s\n",
        r->capacity, r->call_ms, r->rate);

    /* 2. can its batch be set? */
    r->batch_settable = cur.max_batch > 1;
    if (!r->batch_settable) {
        struct cp_serve_knobs b2 = cur;
        b2.max_batch = 2;
        struct cp_diag bd;
        cp_diag_init(&bd);
        struct server sb;
        r->batch_settable = server_start(o, &b2, 0, &sb, &bd) == CP_OK;
        server_stop(&sb);
        if (!r->batch_settable) {
            snprintf(r->batch_why, sizeof r->batch_why, "%.500s", bd.msg);
            cp_tune_progress(o->progress, "serve-tune: no batching candidate: %s\n", bd.msg);
        }
    }

    /* the run in the knowledge base, and what held there before */
    if ((st = cp_serve_kb_begin(kb, o, &cur, d)) != CP_OK)
        return st;
    r->kb_session = kb->session_id;
    struct hints h = {0};
    if (o->use_kb_hints && (st = cp_serve_kb_hints(kb, &h.hits, &h.n, d)) != CP_OK)
        return st;
    if (h.n && !(h.why = malloc(h.n * sizeof *h.why))) {
        cp_kb_strategy_hits_free(h.hits, h.n);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < h.n; i++)
        snprintf(h.why[i], sizeof h.why[i], "held %d of %d on %.30s", h.hits[i].count,
                 h.hits[i].tried, h.hits[i].models ? h.hits[i].models : "?");
    r->kb_hints = (int)h.n;
    if (h.n)
        cp_tune_progress(o->progress,
                         "serve-tune: the knowledge base has %zu serving strateg%s of this or a "
                         "similar model; tried first where they apply\n",
                         h.n, h.n == 1 ? "y" : "ies");

    /* 3.-4. one knob at a time */
    struct cp_serve_knobs tried[MAX_TRIED];
    size_t n_tried = 0;
    tried[n_tried++] = cur;
    int round = 0;
    snprintf(r->stop_reason, sizeof r->stop_reason, "budget spent (%d measurements)", o->budget);
    while (st == CP_OK && r->evaluations < o->budget) {
        round++;
        struct cand c[MAX_CANDIDATES], nb[MAX_CANDIDATES];
        size_t nc = 0;
        push_hints(&h, &cur, cores, r->batch_settable, tried, n_tried, c, &nc);
        size_t nn =
            neighbours(&cur, r->batch_settable, r->call_ms, cores, o->target, tried, n_tried, nb);
        for (size_t i = 0; i < nn; i++)
            push(c, &nc, &nb[i].k, nb[i].why, tried, n_tried);
        if (nc == 0) {
            snprintf(r->stop_reason, sizeof r->stop_reason, "every neighbour of %s was measured",
                     "the best knobs");
            break;
        }
        bool accepted = false;
        for (size_t i = 0; i < nc && r->evaluations < o->budget && !accepted; i++) {
            if (n_tried < MAX_TRIED)
                tried[n_tried++] = c[i].k;
            struct cp_flow_tune_step s = {.round = round, .predicted_pct = NAN};
            describe_change(&cur, &c[i].k, s.change, sizeof s.change);
            snprintf(s.source, sizeof s.source, "%s", c[i].why);
            cp_tune_progress(o->progress,
                             "serve-tune: measuring %s (%s) against the current knobs, %d pairs\n",
                             s.change, s.source, o->pairs);
            struct cp_comparison cmp;
            struct cp_tune_load_sample worst;
            struct cp_diag cd;
            cp_diag_init(&cd);
            enum cp_status cs = compare_knobs(o, &cur, &c[i].k, r->rate, &cmp, &worst, &cd);
            r->evaluations++;
            cp_tune_load_judge(&s, cs == CP_OK ? &cmp : NULL, cd.msg, &o->constraints, &worst);
            cp_tune_progress(o->progress,
                             "serve-tune:   %s %+.1f%% [%+.1f%%, %+.1f%%] p=%.3g: %s\n",
                             o->target == CP_TARGET_THROUGHPUT ? "throughput" : "mean latency",
                             s.measured_pct, s.ci_lo, s.ci_hi, s.p, s.reason);
            st = cp_serve_kb_step(kb, o, r->evaluations, &cur, &c[i].k, &s, d);
            if (s.accepted) {
                accepted = true;
                cur = c[i].k;
            }
            if (st == CP_OK)
                st = cp_tune_load_step_add(&r->steps, &r->n_steps, &s, d);
        }
        if (st == CP_OK && !accepted && r->evaluations < o->budget) {
            snprintf(r->stop_reason, sizeof r->stop_reason,
                     "no neighbour of the best knobs was better");
            break;
        }
    }
    cp_kb_strategy_hits_free(h.hits, h.n);
    free(h.why);
    if (st != CP_OK)
        return st;
    r->best = cur;

    /* 5. the best against the start, the figure to quote */
    if (!cp_serve_knobs_equal(&r->best, &r->original)) {
        struct cp_comparison cmp;
        struct cp_tune_load_sample worst;
        struct cp_diag fd;
        cp_diag_init(&fd);
        cp_tune_progress(o->progress,
                         "serve-tune: the tuned knobs against the starting ones, %d pairs\n",
                         o->pairs);
        if (compare_knobs(o, &r->original, &r->best, r->rate, &cmp, &worst, &fd) == CP_OK) {
            r->final_pct = cmp.delta_pct;
            r->final_lo = cmp.ci_lo_pct;
            r->final_hi = cmp.ci_hi_pct;
            r->final_p = cmp.p;
            r->baseline_value = cmp.before;
            r->best_value = cmp.after;
        } else {
            snprintf(r->final_why, sizeof r->final_why, "%.500s", fd.msg);
        }
    }
    snprintf(r->command, sizeof r->command,
             "cannprof serve %.1000s --max-batch %d --batch-window %g --threads %d", o->model,
             r->best.max_batch, r->best.window_ms, r->best.threads);
    return cp_serve_kb_finish(kb, o, r, d);
}
