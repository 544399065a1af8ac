/* The built-in flowunits (docs/pipelines.md): sources and sinks of files,
 * text to token ids, the models (inference, batched), and delay, the test
 * unit that plants sleeps, spins and reads. The image units are in
 * units_image.c. Each worker opens its own instance. */
#define _GNU_SOURCE /* O_DIRECT is not used; posix_fadvise */
#include "pipeline/pipeline_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* units_image.c */
enum cp_status pl_image_decode(struct pl_payload *p, struct cp_diag *d);
enum cp_status pl_image_encode(struct pl_payload *p, struct cp_diag *d);
enum cp_status pl_image_resize(struct pl_payload *p, long width, long height, struct cp_diag *d);
enum cp_status pl_image_normalize(struct pl_payload *p, const double *mean, const double *std,
                                  size_t n, double scale, struct cp_diag *d);

struct pl_unit_ctx {
    const struct cp_flow *f;
    const struct pl_node *n;
    size_t node;
    int worker;
    struct pl_run_env *env;
    /* inference */
    struct cp_session s;
    bool session_open;
    char model[1200]; /* its path, as opened */
    int64_t batch;
    char **outputs; /* names the model's outputs take in the payload */
    size_t n_outputs;
    /* file_source */
    char **files;
    size_t n_files;
    char dir[1100];
    /* tokenize */
    long max_len, vocab;
    /* resize */
    long width, height;
    /* normalize */
    double mean[4], std[4], scale;
    size_t n_mean;
    /* delay */
    long sleep_ms, spin_ms, io_kb;
    int io_fd;
    char io_path[1200];
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A list of numbers "0.5,0.5,0.5" (at most 4). */
static bool number_list(const char *s, double *v, size_t *n)
{
    *n = 0;
    while (s && *s && *n < 4) {
        char *end = NULL;
        double x = strtod(s, &end);
        if (end == s || !isfinite(x))
            return false;
        v[(*n)++] = x;
        s = end;
        while (*s == ' ')
            s++;
        if (*s == ',')
            s++;
        else if (*s)
            return false;
    }
    return *n > 0 && (!s || !*s);
}

static long num_key(const struct pl_node *n, const char *key, long def)
{
    const char *v = pl_attr(n, key);
    return v ? strtol(v, NULL, 10) : def;
}

/* ---- opening ---------------------------------------------------------------------------- */

static enum cp_status list_files(struct pl_unit_ctx *u, struct cp_diag *d)
{
    DIR *dp = opendir(u->dir);
    if (!dp)
        return cp_diag_set(d, CP_ERR_IO, "%s:%d: node %s: cannot read %s: %s", u->f->path,
                           u->n->line, u->n->name, u->dir, strerror(errno));
    size_t cap = 0;
    struct dirent *de;
    enum cp_status st = CP_OK;
    while ((de = readdir(dp))) {
        char p[1400];
        struct stat sb;
        if (de->d_name[0] == '.' ||
            (size_t)snprintf(p, sizeof p, "%s/%s", u->dir, de->d_name) >= sizeof p ||
            stat(p, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (u->n_files == cap) {
            cap = cap ? cap * 2 : 16;
            char **g = cp_realloc_array(u->files, cap, sizeof *g);
            if (!g) {
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            u->files = g;
        }
        if (!(u->files[u->n_files] = cp_strdup(de->d_name))) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        u->n_files++;
    }
    closedir(dp);
    if (st == CP_OK && u->n_files == 0)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s:%d: node %s: %s holds no file to send", u->f->path,
                         u->n->line, u->n->name, u->dir);
    if (st == CP_OK)
        qsort(u->files, u->n_files, sizeof *u->files, cmp_str);
    return st;
}

static enum cp_status open_inference(struct pl_unit_ctx *u, struct cp_trace_recorder *rec,
                                     int thread, struct cp_diag *d)
{
    char *model = u->model;
    enum cp_status st = pl_flow_path(u->f, pl_attr(u->n, "model"), model, sizeof u->model, d);
    if (st != CP_OK)
        return st;
    u->batch = u->n->batch_size > 1 ? u->n->batch_size : 0;
    struct cp_session_opts o = {
        .model_path = model,
        .batch = u->batch,
        .open_dim0 = 1, /* no batch_size: a batch the model leaves open is one request */
        .threads = (int)num_key(u->n, "threads", 0),
        .buffer_optimize = -1,
        .trace = rec,
        .trace_thread = thread,
    };
    if ((st = cp_session_open(&u->s, &o, d)) != CP_OK) {
        struct cp_diag inner = *d;
        cp_diag_init(d);
        return cp_diag_set(d, inner.status, "%s:%d: node %s: %s%s", u->f->path, u->n->line,
                           u->n->name, inner.msg,
                           u->batch ? " (batch_size > 1 needs a model whose batch can be set: "
                                      "a dynamic first dimension or --dynamic_batch_size)"
                                    : "");
    }
    u->session_open = true;
    /* outputs="a,b": the names the model's outputs take in the payload, so
     * a loop's body can hand its output back as its next input */
    const char *names = pl_attr(u->n, "outputs");
    size_t n_out = cp_plan_n_outputs(u->s.plan);
    u->outputs = cp_calloc(n_out ? n_out : 1, sizeof *u->outputs);
    if (!u->outputs)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    u->n_outputs = n_out;
    for (size_t i = 0; i < n_out; i++) {
        const char *name = cp_plan_output(u->s.plan, i)->name;
        char given[256] = "";
        if (names) {
            const char *p = names;
            for (size_t k = 0; k < i && p; k++)
                p = (p = strchr(p, ',')) ? p + 1 : NULL;
            if (p) {
                size_t len = strcspn(p, ",");
                while (len && p[len - 1] == ' ')
                    len--;
                while (*p == ' ' && len) {
                    p++;
                    len--;
                }
                snprintf(given, sizeof given, "%.*s", (int)len, p);
            }
        }
        if (!(u->outputs[i] = cp_strdup(given[0] ? given : name)))
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    return CP_OK;
}

static enum cp_status open_delay(struct pl_unit_ctx *u, struct cp_diag *d)
{
    u->sleep_ms = num_key(u->n, "sleep_ms", 0);
    u->spin_ms = num_key(u->n, "spin_ms", 0);
    u->io_kb = num_key(u->n, "io_read_kb", 0);
    u->io_fd = -1;
    if (u->sleep_ms < 0 || u->spin_ms < 0 || u->io_kb < 0 || u->sleep_ms > 3600000 ||
        u->spin_ms > 3600000 || u->io_kb > 1 << 22)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s:%d: node %s: sleep_ms, spin_ms and io_read_kb are whole numbers "
                           "from 0 (an hour, 4 GB at most)",
                           u->f->path, u->n->line, u->n->name);
    if (u->io_kb == 0)
        return CP_OK;
    /* a file of io_read_kb, read back each time after its pages are dropped
     * from the cache: real reads, off the CPU */
    const char *tmp = getenv("TMPDIR");
    snprintf(u->io_path, sizeof u->io_path, "%s/cannprof-delay-XXXXXX",
             tmp && tmp[0] == '/' ? tmp : "/tmp");
    u->io_fd = mkstemp(u->io_path);
    if (u->io_fd < 0)
        return cp_diag_set(d, CP_ERR_IO, "node %s: cannot make a file to read: %s", u->n->name,
                           strerror(errno));
    unlink(u->io_path);
    char block[4096];
    for (size_t i = 0; i < sizeof block; i++)
        block[i] = (char)(i * 131);
    for (long k = 0; k < (u->io_kb + 3) / 4; k++)
        if (write(u->io_fd, block, sizeof block) != (ssize_t)sizeof block)
            return cp_diag_set(d, CP_ERR_IO, "node %s: cannot write its file: %s", u->n->name,
                               strerror(errno));
    fdatasync(u->io_fd);
    return CP_OK;
}

enum cp_status pl_unit_open(const struct cp_flow *f, size_t node, int worker, int thread,
                            struct pl_run_env *env, struct cp_trace_recorder *rec,
                            struct pl_unit_ctx **out, struct cp_diag *d)
{
    struct pl_unit_ctx *u = cp_calloc(1, sizeof *u);
    if (!u)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    u->f = f;
    u->n = &f->nodes[node];
    u->node = node;
    u->worker = worker;
    u->env = env;
    u->io_fd = -1;
    enum cp_status st = CP_OK;
    const struct pl_node *n = u->n;
    switch (n->unit) {
    case PL_INFERENCE:
        st = open_inference(u, rec, thread, d);
        break;
    case PL_FILE_SOURCE:
    case PL_FILE_SINK:
        st = pl_flow_path(f, pl_attr(n, "dir"), u->dir, sizeof u->dir, d);
        if (st == CP_OK && n->unit == PL_FILE_SOURCE)
            st = list_files(u, d);
        if (st == CP_OK && n->unit == PL_FILE_SINK)
            st = cp_mkdir_p(u->dir, 0755, d);
        break;
    case PL_TOKENIZE:
        u->max_len = num_key(n, "max_len", 77);
        u->vocab = num_key(n, "vocab", 1000);
        if (u->max_len < 1 || u->max_len > 65536 || u->vocab < 3 || u->vocab > (1L << 30))
            st = cp_diag_set(d, CP_ERR_INVALID,
                             "%s:%d: node %s: max_len is 1 to 65536 and vocab 3 to 2^30", f->path,
                             n->line, n->name);
        break;
    case PL_RESIZE:
        u->width = num_key(n, "width", 0);
        u->height = num_key(n, "height", 0);
        if (u->width < 1 || u->height < 1 || u->width > 16384 || u->height > 16384)
            st = cp_diag_set(d, CP_ERR_INVALID, "%s:%d: node %s: width and height are 1 to 16384",
                             f->path, n->line, n->name);
        break;
    case PL_NORMALIZE: {
        size_t nm = 1, ns = 1;
        u->mean[0] = 0;
        u->std[0] = 1;
        u->scale = 1.0 / 255.0;
        const char *sc = pl_attr(n, "scale");
        char *end = NULL;
        if ((pl_attr(n, "mean") && !number_list(pl_attr(n, "mean"), u->mean, &nm)) ||
            (pl_attr(n, "std") && !number_list(pl_attr(n, "std"), u->std, &ns)) ||
            (sc && ((u->scale = strtod(sc, &end)), end == sc || *end || !isfinite(u->scale))))
            st = cp_diag_set(d, CP_ERR_INVALID,
                             "%s:%d: node %s: mean and std are lists of up to 4 numbers "
                             "(\"0.5,0.5,0.5\"), scale a number",
                             f->path, n->line, n->name);
        for (size_t i = 0; st == CP_OK && i < ns; i++)
            if (!(u->std[i] != 0))
                st = cp_diag_set(d, CP_ERR_INVALID, "%s:%d: node %s: std has a zero", f->path,
                                 n->line, n->name);
        if (st == CP_OK && nm != ns && nm != 1 && ns != 1)
            st = cp_diag_set(d, CP_ERR_INVALID,
                             "%s:%d: node %s: mean and std have different lengths", f->path,
                             n->line, n->name);
        for (size_t i = nm; i < 4; i++)
            u->mean[i] = u->mean[nm - 1];
        for (size_t i = ns; i < 4; i++)
            u->std[i] = u->std[ns - 1];
        u->n_mean = 4;
        break;
    }
    case PL_DELAY:
        st = open_delay(u, d);
        break;
    default:
        break;
    }
    if (st != CP_OK) {
        pl_unit_close(u);
        return st;
    }
    *out = u;
    return CP_OK;
}

struct cp_session *pl_unit_session(struct pl_unit_ctx *u)
{
    return u && u->session_open ? &u->s : NULL;
}

const char *pl_unit_model_path(const struct pl_unit_ctx *u)
{
    return u && u->session_open ? u->model : NULL;
}

void pl_unit_trace_pause(struct pl_unit_ctx *u, bool paused)
{
    if (u && u->session_open)
        cp_runtime_pause_trace(u->s.rt, paused);
}

void pl_unit_close(struct pl_unit_ctx *u)
{
    if (!u)
        return;
    if (u->session_open)
        cp_session_close(&u->s);
    for (size_t i = 0; i < u->n_outputs; i++)
        free(u->outputs[i]);
    free(u->outputs);
    for (size_t i = 0; i < u->n_files; i++)
        free(u->files[i]);
    free(u->files);
    if (u->io_fd >= 0)
        close(u->io_fd);
    free(u);
}

/* ---- the units ------------------------------------------------------------------------- */

/* The payload an item may change: its own (a copy when shared). */
static enum cp_status own(struct pl_item *it, struct cp_diag *d)
{
    if (atomic_load(&it->p->refs) == 1)
        return CP_OK;
    struct pl_payload *c = pl_payload_new();
    if (!c)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    memcpy(c->name, it->p->name, sizeof c->name);
    bool ok = true;
    if (it->p->len) {
        ok = (c->bytes = malloc(it->p->len)) != NULL;
        if (ok) {
            memcpy(c->bytes, it->p->bytes, it->p->len);
            c->len = it->p->len;
        }
    }
    if (ok && it->p->n_t) {
        ok = (c->t = cp_calloc(it->p->n_t, sizeof *c->t)) != NULL;
        for (size_t i = 0; ok && i < it->p->n_t; i++) {
            c->t[i] = it->p->t[i];
            c->t[i].data = malloc(it->p->t[i].nbytes ? it->p->t[i].nbytes : 1);
            ok = c->t[i].data != NULL;
            if (ok)
                memcpy(c->t[i].data, it->p->t[i].data, it->p->t[i].nbytes);
            c->n_t = i + 1;
        }
    }
    if (!ok) {
        pl_payload_unref(c);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    pl_payload_unref(it->p);
    it->p = c;
    return CP_OK;
}

static enum cp_status source(struct pl_unit_ctx *u, struct pl_item *items, size_t cap,
                             size_t *n_out, struct cp_diag *d)
{
    struct pl_run_env *env = u->env;
    *n_out = 0;
    for (size_t k = 0; k < cap; k++) {
        if (env->deadline_ns && (int64_t)cp_clock_ns() >= env->deadline_ns)
            break;
        uint64_t id = atomic_fetch_add(&env->next_request, 1);
        if (env->requests && id >= env->requests)
            break;
        const char *file = u->files[id % u->n_files];
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", u->dir, file);
        struct pl_payload *p = pl_payload_new();
        if (!p)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        snprintf(p->name, sizeof p->name, "%s", file);
        enum cp_status st = cp_file_read(path, &p->bytes, &p->len, d);
        if (st != CP_OK) {
            pl_payload_unref(p);
            return st;
        }
        items[k] = (struct pl_item){.request = id, .emitted_ns = (int64_t)cp_clock_ns(), .p = p};
        (*n_out)++;
    }
    return CP_OK;
}

static enum cp_status sink(struct pl_unit_ctx *u, struct pl_item *it, struct cp_diag *d)
{
    const struct pl_payload *p = it->p;
    if (u->env->inbox)
        return CP_OK; /* served: the payload is the caller's answer */
    /* the request's file name without its extension */
    char stem[200];
    snprintf(stem, sizeof stem, "%.*s", 150, p->name[0] ? p->name : "request");
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem)
        *dot = '\0';
    char path[1500];
    if (p->len) {
        bool png = p->len >= 8 && memcmp(p->bytes, "\x89PNG\r\n\x1a\n", 8) == 0;
        snprintf(path, sizeof path, "%s/%06llu-%s.%s", u->dir, (unsigned long long)it->request,
                 stem, png ? "png" : "bin");
        return cp_file_write_atomic(path, p->bytes, p->len, d);
    }
    if (p->n_t) {
        snprintf(path, sizeof path, "%s/%06llu-%s.npy", u->dir, (unsigned long long)it->request,
                 stem);
        return cp_tensor_write_npy(path, &p->t[0], d);
    }
    return CP_OK;
}

/* Words to ids: each whitespace-separated word hashed into 2..vocab-1 (0
 * pads, 1 is the start), as int64 [1, max_len]. */
static enum cp_status tokenize(struct pl_unit_ctx *u, struct pl_item *it, struct cp_diag *d)
{
    enum cp_status st = own(it, d);
    if (st != CP_OK)
        return st;
    struct pl_payload *p = it->p;
    struct cp_host_tensor t = {.dtype = CP_DTYPE_I64, .rank = 2, .dims = {1, u->max_len}};
    snprintf(t.name, sizeof t.name, "input_ids");
    t.nbytes = (size_t)u->max_len * sizeof(int64_t);
    int64_t *ids = cp_calloc((size_t)u->max_len, sizeof *ids);
    if (!ids)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    ids[0] = 1;
    long k = 1;
    for (size_t i = 0; i < p->len && k < u->max_len;) {
        while (i < p->len && (p->bytes[i] == ' ' || p->bytes[i] == '\n' || p->bytes[i] == '\t' ||
                              p->bytes[i] == '\r'))
            i++;
        size_t j = i;
        while (j < p->len && !(p->bytes[j] == ' ' || p->bytes[j] == '\n' || p->bytes[j] == '\t' ||
                               p->bytes[j] == '\r'))
            j++;
        if (j > i)
            ids[k++] = 2 + (int64_t)(cp_hash64(p->bytes + i, j - i) % (uint64_t)(u->vocab - 2));
        i = j;
    }
    t.data = ids;
    struct cp_host_tensor *g = cp_realloc_array(p->t, p->n_t + 1, sizeof *g);
    if (!g) {
        free(ids);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    p->t = g;
    memmove(p->t + 1, p->t, p->n_t * sizeof *p->t);
    p->t[0] = t;
    p->n_t++;
    free(p->bytes);
    p->bytes = NULL;
    p->len = 0;
    return CP_OK;
}

/* Where a spin's work goes, so that the compiler keeps it. */
static volatile uint64_t spin_sink;

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static enum cp_status delay(struct pl_unit_ctx *u, struct cp_diag *d)
{
    if (u->io_fd >= 0) {
        posix_fadvise(u->io_fd, 0, 0, POSIX_FADV_DONTNEED);
        char buf[65536];
        off_t at = 0;
        for (;;) {
            ssize_t got = pread(u->io_fd, buf, sizeof buf, at);
            if (got < 0)
                return cp_diag_set(d, CP_ERR_IO, "node %s: reading its file: %s", u->n->name,
                                   strerror(errno));
            if (got == 0)
                break;
            at += got;
        }
    }
    if (u->sleep_ms > 0) {
        struct timespec ts = {u->sleep_ms / 1000, (u->sleep_ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    if (u->spin_ms > 0) {
        /* on-CPU time, not wall time: a spin that waits for a CPU still
         * does its work */
        int64_t until = thread_cpu_ns() + u->spin_ms * 1000000;
        while (thread_cpu_ns() < until)
            for (int i = 0; i < 1000; i++)
                spin_sink += (uint64_t)i;
    }
    return CP_OK;
}

/* ---- inference -------------------------------------------------------------------------- */

/* The payload tensor model input i reads: one of its name, else the
 * first one not read yet. -1 when none is left. */
static long input_slot(const struct pl_payload *p, const char *name, const bool *taken)
{
    for (size_t k = 0; k < p->n_t; k++)
        if (!taken[k] && strcmp(p->t[k].name, name) == 0)
            return (long)k;
    for (size_t k = 0; k < p->n_t; k++)
        if (!taken[k])
            return (long)k;
    return -1;
}

/* Put output tensor `t` into p under `name`: in place of a tensor of that
 * name, else first. Takes t's data. */
static enum cp_status put_tensor(struct pl_payload *p, const char *name, struct cp_host_tensor *t,
                                 struct cp_diag *d)
{
    snprintf(t->name, sizeof t->name, "%s", name);
    for (size_t k = 0; k < p->n_t; k++)
        if (strcmp(p->t[k].name, name) == 0) {
            cp_host_tensor_release(&p->t[k]);
            p->t[k] = *t;
            /* the newest first: what the next unit reads by position */
            struct cp_host_tensor keep = p->t[k];
            memmove(p->t + 1, p->t, k * sizeof *p->t);
            p->t[0] = keep;
            return CP_OK;
        }
    struct cp_host_tensor *g = cp_realloc_array(p->t, p->n_t + 1, sizeof *g);
    if (!g) {
        cp_host_tensor_release(t);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    p->t = g;
    memmove(p->t + 1, p->t, p->n_t * sizeof *p->t);
    p->t[0] = *t;
    p->n_t++;
    return CP_OK;
}

/* The request an error is about, named by its file. */
static enum cp_status about(const struct pl_unit_ctx *u, const struct pl_item *it,
                            enum cp_status st, struct cp_diag *d)
{
    if (st == CP_OK)
        return st;
    struct cp_diag inner = *d;
    cp_diag_init(d);
    return cp_diag_set(d, inner.status, "node %s, request %llu (%s): %s", u->n->name,
                       (unsigned long long)it->request, it->p->name, inner.msg);
}

/* Run the model on items[0..n) (n <= the batch): each input stacked along
 * its first dimension (the last item repeated to fill a batch) straight
 * into the plan's input, each output cut back into the items out of the
 * plan's output: one copy each way. */
static enum cp_status infer(struct pl_unit_ctx *u, struct pl_item *items, size_t n,
                            struct cp_diag *d)
{
    struct cp_plan *plan = u->s.plan;
    size_t n_in = cp_plan_n_inputs(plan), n_out = cp_plan_n_outputs(plan);
    size_t per = u->batch > 0 ? (size_t)u->batch : 1;
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < n && st == CP_OK; i++)
        st = about(u, &items[i], own(&items[i], d), d);
    for (size_t in = 0; st == CP_OK && in < n_in; in++) {
        const struct cp_tensor *pt = cp_plan_input(plan, in);
        struct cp_host_tensor t = {.dtype = pt->dtype, .rank = pt->shape.rank};
        snprintf(t.name, sizeof t.name, "%s", pt->name);
        for (int k = 0; k < t.rank; k++)
            t.dims[k] = pt->shape.dims[k].value;
        t.nbytes = (size_t)cp_host_tensor_numel(&t) * cp_dtype_size(t.dtype);
        size_t slice = per > 0 ? t.nbytes / per : t.nbytes;
        int64_t rows = t.rank > 0 ? t.dims[0] / (int64_t)per : 0;
        for (size_t b = 0; st == CP_OK && b < per; b++) {
            const struct pl_item *it = &items[b < n ? b : n - 1];
            bool *taken = cp_calloc(it->p->n_t + 1, sizeof *taken);
            if (!taken) {
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            /* the tensors the earlier inputs read are taken */
            for (size_t j = 0; j < in; j++) {
                long s = input_slot(it->p, cp_plan_input(plan, j)->name, taken);
                if (s >= 0)
                    taken[s] = true;
            }
            long s = input_slot(it->p, pt->name, taken);
            free(taken);
            if (s < 0) {
                st = about(u, it,
                           cp_diag_set(d, CP_ERR_INVALID,
                                       "the model's input %s has no tensor to read (the request "
                                       "carries %zu)",
                                       pt->name, it->p->n_t),
                           d);
                break;
            }
            const struct cp_host_tensor *src = &it->p->t[s];
            if (src->dtype != t.dtype || src->nbytes != slice) {
                st = about(u, it,
                           cp_diag_set(d, CP_ERR_INVALID,
                                       "the model's input %s takes %s of %zu bytes per request; "
                                       "the request's tensor %s is %s of %zu bytes",
                                       pt->name, cp_dtype_name(t.dtype), slice, src->name,
                                       cp_dtype_name(src->dtype), src->nbytes),
                           d);
                break;
            }
            if (per == 1) {
                t.data = src->data; /* borrowed: the plan copies it in */
                st = cp_plan_set_input(plan, in, &t, d);
            } else {
                st = cp_plan_set_input_rows(plan, in, (int64_t)b * rows, rows, src->data, slice, d);
            }
        }
    }
    if (st == CP_OK)
        st = cp_plan_run(
            plan, (int32_t)((items[0].request - atomic_load(&u->env->iter_base)) & 0x7fffffff), d);
    for (size_t o = 0; st == CP_OK && o < n_out; o++) {
        struct cp_host_tensor t;
        if ((st = cp_plan_output_view(plan, o, &t, d)) != CP_OK)
            break;
        size_t slice = t.nbytes / per;
        for (size_t b = 0; st == CP_OK && b < n; b++) {
            struct cp_host_tensor one = t;
            if (per > 1 && one.rank > 0)
                one.dims[0] /= (int64_t)per;
            one.nbytes = slice;
            one.data = malloc(slice ? slice : 1);
            if (!one.data) {
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            memcpy(one.data, (char *)t.data + b * slice, slice);
            st = put_tensor(items[b].p, u->outputs[o], &one, d);
        }
    }
    if (st == CP_OK)
        for (size_t b = 0; b < n; b++) {
            free(items[b].p->bytes);
            items[b].p->bytes = NULL;
            items[b].p->len = 0;
        }
    return st;
}

const char *pl_unit_first_file(const struct pl_unit_ctx *u, const char **dir)
{
    if (u->n->unit != PL_FILE_SOURCE || u->n_files == 0)
        return NULL;
    *dir = u->dir;
    return u->files[0];
}

enum cp_status pl_unit_process(struct pl_unit_ctx *u, struct pl_item *items, size_t n,
                               size_t *n_out, struct cp_diag *d)
{
    if (u->n->unit == PL_FILE_SOURCE)
        return source(u, items, *n_out, n_out, d);
    *n_out = n;
    enum cp_status st = CP_OK;
    switch (u->n->unit) {
    case PL_INFERENCE:
        for (size_t i = 0; st == CP_OK && i < n; i += (size_t)(u->batch > 0 ? u->batch : 1)) {
            size_t k = n - i;
            size_t per = (size_t)(u->batch > 0 ? u->batch : 1);
            st = infer(u, items + i, k < per ? k : per, d);
        }
        return st;
    case PL_DELAY:
        for (size_t i = 0; st == CP_OK && i < n; i++)
            st = delay(u, d);
        return st;
    case PL_LOOP:
        return CP_OK; /* the executor routes its items */
    default:
        break;
    }
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        struct pl_item *it = &items[i];
        switch (u->n->unit) {
        case PL_FILE_SINK:
            st = sink(u, it, d);
            break;
        case PL_TOKENIZE:
            st = tokenize(u, it, d);
            break;
        case PL_IMAGE_DECODE:
            if ((st = own(it, d)) == CP_OK)
                st = pl_image_decode(it->p, d);
            break;
        case PL_IMAGE_ENCODE:
            if ((st = own(it, d)) == CP_OK)
                st = pl_image_encode(it->p, d);
            break;
        case PL_RESIZE:
            if ((st = own(it, d)) == CP_OK)
                st = pl_image_resize(it->p, u->width, u->height, d);
            break;
        case PL_NORMALIZE:
            if ((st = own(it, d)) == CP_OK)
                st = pl_image_normalize(it->p, u->mean, u->std, 4, u->scale, d);
            break;
        default:
            break;
        }
        st = about(u, it, st, d);
    }
    return st;
}
