/* Writing an imported run: events through a recorder flushed every
 * FLUSH_EVENTS (so memory holds one batch, not the profile), the kernel
 * table built on first sight of each kernel, threads numbered by
 * (pid, tid), counters in batches, and the samples at the end. A failure
 * removes the run (cp_imp_sink_abort). */
#define _GNU_SOURCE /* memmem */
#include "import/import_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLUSH_EVENTS   65536
#define FLUSH_COUNTERS 65536

void *cp_imp_grow(void *v, size_t n, size_t *cap, size_t size, size_t first)
{
    if (n < *cap)
        return v;
    size_t nc = *cap ? *cap * 2 : first;
    void *g = cp_realloc_array(v, nc, size);
    if (g)
        *cap = nc;
    return g;
}

bool cp_imp_byte_slot(uint8_t **v, size_t *cap, size_t id)
{
    if (id < *cap)
        return true;
    size_t nc = *cap ? *cap : 256;
    while (nc <= id)
        nc *= 2;
    uint8_t *g = realloc(*v, nc);
    if (!g)
        return false;
    memset(g + *cap, 0, nc - *cap);
    *v = g;
    *cap = nc;
    return true;
}

bool cp_imp_u32_slot(uint32_t **v, size_t *cap, size_t id, uint32_t unseen)
{
    if (id < *cap)
        return true;
    size_t nc = *cap ? *cap : 256;
    while (nc <= id)
        nc *= 2;
    uint32_t *g = cp_realloc_array(*v, nc, sizeof *g);
    if (!g)
        return false;
    for (size_t i = *cap; i < nc; i++)
        g[i] = unseen;
    *v = g;
    *cap = nc;
    return true;
}

const char *cp_imp_pool_add(struct cp_imp_pool *p, const char *s, size_t len)
{
    char **g = cp_imp_grow(p->s, p->n, &p->cap, sizeof *g, 256);
    if (!g)
        return NULL;
    p->s = g;
    char *c = malloc(len + 1);
    if (!c)
        return NULL;
    memcpy(c, s, len);
    c[len] = '\0';
    p->s[p->n++] = c;
    return c;
}

void cp_imp_pool_release(struct cp_imp_pool *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->s[i]);
    free(p->s);
    memset(p, 0, sizeof *p);
}

enum cp_status cp_imp_sink_open(struct cp_imp_sink *k, const char *trace_path, const char *source,
                                const char *format, struct cp_import_result *r, struct cp_diag *d)
{
    memset(k, 0, sizeof *k);
    k->r = r;
    k->run = -1;
    cp_strmap_init(&k->kernel_ix);
    cp_strmap_init(&k->thread_ix);
    cp_strmap_init(&k->counter_ix);
    cp_strmap_init(&k->acc_ix);
    k->rec = cp_trace_recorder_create(FLUSH_EVENTS);
    if (!k->rec)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    /* no host meta: this machine did not run the profile */
    enum cp_status st = cp_trace_store_open(trace_path, &k->store, d);
    struct cp_trace_run_info info = {
        .kind = "import",
        .model_path = source,
        .target = format,
    };
    if (st == CP_OK)
        st = cp_trace_store_begin_run(k->store, &info, &k->run, d);
    if (st != CP_OK) {
        cp_imp_sink_abort(k);
        return st;
    }
    r->run_id = k->run;
    return CP_OK;
}

enum cp_status cp_imp_sink_attach(struct cp_imp_sink *k, const char *trace_path, int64_t run,
                                  struct cp_import_result *r, struct cp_diag *d)
{
    memset(k, 0, sizeof k[0]);
    k->r = r;
    k->run = -1;
    cp_strmap_init(&k->kernel_ix);
    cp_strmap_init(&k->thread_ix);
    cp_strmap_init(&k->counter_ix);
    cp_strmap_init(&k->acc_ix);
    k->rec = cp_trace_recorder_create(16);
    if (!k->rec)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = cp_trace_store_open(trace_path, &k->store, d);
    int64_t used = -1;
    if (st == CP_OK)
        st = cp_trace_store_resolve_run(k->store, run, &used, d);
    if (st != CP_OK) {
        cp_imp_sink_abort(k);
        return st;
    }
    k->run = used;
    return CP_OK;
}

enum cp_status cp_imp_sink_kernel(struct cp_imp_sink *k, const char *name, size_t len,
                                  const char *op_type, const char *impl, const char *origins,
                                  int32_t *idx, struct cp_diag *d)
{
    int64_t have = cp_strmap_get(&k->kernel_ix, name, len, -1);
    if (have >= 0) {
        *idx = (int32_t)have;
        return CP_OK;
    }
    if (k->n_kernels >= INT32_MAX)
        return cp_diag_set(d, CP_ERR_INVALID, "more than %d distinct kernels", INT32_MAX);
    struct cp_trace_kernel *g =
        cp_imp_grow(k->kernels, k->n_kernels, &k->cap_kernels, sizeof *g, 64);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    k->kernels = g;
    const char *n = cp_imp_pool_add(&k->pool, name, len);
    const char *op = cp_imp_pool_add(&k->pool, op_type, strlen(op_type));
    const char *im = impl ? cp_imp_pool_add(&k->pool, impl, strlen(impl)) : NULL;
    const char *org =
        cp_imp_pool_add(&k->pool, origins ? origins : "[]", strlen(origins ? origins : "[]"));
    if (!n || !op || (impl && !im) || !org ||
        cp_strmap_add(&k->kernel_ix, n, len, (int64_t)k->n_kernels, NULL, NULL) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    k->kernels[k->n_kernels] = (struct cp_trace_kernel){
        .node = n, .op_type = op, .impl = im, .origins = org, .inputs = "[]", .outputs = "[]"};
    *idx = (int32_t)k->n_kernels++;
    return CP_OK;
}

enum cp_status cp_imp_sink_thread(struct cp_imp_sink *k, const struct cp_imp_val *pid,
                                  const struct cp_imp_val *tid, int *thread, struct cp_diag *d)
{
    char key[160];
    int n = snprintf(key, sizeof key, "%.*s/%.*s",
                     pid->s ? (int)(pid->len > 70 ? 70 : pid->len) : 0, pid->s ? pid->s : "",
                     tid->s ? (int)(tid->len > 70 ? 70 : tid->len) : 0, tid->s ? tid->s : "");
    if (n < 0)
        n = 0;
    int64_t have = cp_strmap_get(&k->thread_ix, key, (size_t)n, -1);
    if (have >= 0) {
        *thread = (int)have;
        return CP_OK;
    }
    int t = k->n_threads < 32767 ? (int)k->n_threads : 32767;
    const char *kk = cp_imp_pool_add(&k->pool, key, (size_t)n);
    if (!kk || cp_strmap_add(&k->thread_ix, kk, (size_t)n, t, NULL, NULL) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    k->n_threads++;
    *thread = t;
    /* which (pid, tid) a thread number stands for */
    char mk[64];
    snprintf(mk, sizeof mk, "thread.%d", t);
    return cp_imp_sink_meta(k, mk, kk, d);
}

/* ---- the host calls the framework analyses count -------------------------------------- */

static bool named(const char *s, size_t n, const char *const *names, size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (strlen(names[i]) == n && memcmp(s, names[i], n) == 0)
            return true;
    return false;
}

enum cp_imp_api cp_imp_api_kind(const char *name, size_t len, enum cp_trace_layer layer)
{
    static const char *const compile[] = {"aclopCompileAndExecute", "aclopCompileAndExecuteV2"};
    static const char *const sync[] = {
        "aclrtSynchronizeStream", "aclrtSynchronizeStreamWithTimeout",
        "aclrtSynchronizeDevice", "cudaStreamSynchronize",
        "cudaDeviceSynchronize",  "hipStreamSynchronize",
        "hipDeviceSynchronize"};
    static const char *const launch[] = {"launch", "cudaLaunchKernel", "hipLaunchKernel",
                                         "hipExtModuleLaunchKernel"};
    static const char *const memory[] = {
        "aclMallocMemInner", "aclrtMalloc", "aclrtMallocPhysical", "aclrtFree", "aclrtFreePhysical",
        "cudaMalloc",        "cudaFree",    "hipMalloc",           "hipFree"};
    if (layer == CP_LAYER_APP) {
        if (memmem(name, len, "SyncBatchNorm", 13))
            return CP_IMP_API_SYNCBN;
        if (len >= 21 && memcmp(name, "enumerate(DataLoader)", 21) == 0)
            return CP_IMP_API_DATALOADER;
        if (len == 2 && memcmp(name, "GC", 2) == 0)
            return CP_IMP_API_GC;
    }
    /* torch_npu writes "<level>@<api>" (AscendCL@aclrtFree, Node@launch) */
    const char *at = memchr(name, '@', len);
    const char *api = at ? at + 1 : name;
    size_t n = len - (size_t)(api - name);
    if (named(api, n, compile, sizeof compile / sizeof *compile))
        return CP_IMP_API_COMPILE;
    if (named(api, n, sync, sizeof sync / sizeof *sync))
        return CP_IMP_API_SYNC;
    if ((at || n != 6) && named(api, n, launch, sizeof launch / sizeof *launch))
        return CP_IMP_API_LAUNCH;
    if (named(api, n, memory, sizeof memory / sizeof *memory))
        return CP_IMP_API_MEMORY;
    return CP_IMP_API_OTHER;
}

/* Count a host or runtime event the analyses read, in its iteration. */
static enum cp_status count_api(struct cp_imp_sink *k, int32_t id, const char *name, size_t len,
                                enum cp_trace_layer layer, int32_t iteration, uint64_t dur_ns,
                                struct cp_diag *d)
{
    if (!cp_imp_byte_slot(&k->api, &k->cap_api, (size_t)id))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (k->api[id] == CP_IMP_API_UNSEEN)
        k->api[id] = (uint8_t)cp_imp_api_kind(name, len, layer);
    double us = (double)dur_ns / 1000.0;
    switch ((enum cp_imp_api)k->api[id]) {
    case CP_IMP_API_COMPILE:
        return cp_imp_sink_acc(k, iteration, "api.compile_calls", 1, 0, true, d);
    case CP_IMP_API_SYNC:
        return cp_imp_sink_acc(k, iteration, "api.sync_calls", 1, 0, true, d);
    case CP_IMP_API_LAUNCH:
        return cp_imp_sink_acc(k, iteration, "api.launch_calls", 1, 0, true, d);
    case CP_IMP_API_MEMORY:
        return cp_imp_sink_acc(k, iteration, "api.memory_us", us, 0, true, d);
    case CP_IMP_API_SYNCBN:
        return cp_imp_sink_acc(k, iteration, "host.syncbn_ops", 1, 0, true, d);
    case CP_IMP_API_DATALOADER:
        return cp_imp_sink_acc(k, iteration, "host.dataloader_us", us, 0, true, d);
    case CP_IMP_API_GC: {
        /* msprof-analyze flags collections of 1 ms and more */
        if (us < 1000)
            return CP_OK;
        enum cp_status st = cp_imp_sink_acc(k, iteration, "host.gc_us", us, 0, true, d);
        return st == CP_OK ? cp_imp_sink_acc(k, iteration, "host.gc_long", 1, 0, true, d) : st;
    }
    default:
        return CP_OK;
    }
}

static enum cp_status flush_events(struct cp_imp_sink *k, struct cp_diag *d)
{
    if (cp_trace_n_events(k->rec) == 0)
        return CP_OK;
    enum cp_status st = cp_trace_store_add_events(k->store, k->run, k->rec, d);
    cp_trace_clear(k->rec);
    return st;
}

static enum cp_status flush_counters(struct cp_imp_sink *k, struct cp_diag *d)
{
    if (k->n_counters == 0)
        return CP_OK;
    enum cp_status st =
        cp_trace_store_add_counters(k->store, k->run, k->counters, k->n_counters, d);
    k->r->counters += k->n_counters;
    k->n_counters = 0;
    return st;
}

enum cp_status cp_imp_sink_event(struct cp_imp_sink *k, enum cp_trace_layer layer, const char *name,
                                 size_t len, int32_t kernel, int32_t iteration, uint64_t start_ns,
                                 uint64_t end_ns, int thread, struct cp_diag *d)
{
    if (cp_trace_n_events(k->rec) >= FLUSH_EVENTS) {
        enum cp_status st = flush_events(k, d);
        if (st != CP_OK)
            return st;
    }
    /* interned strings stay with the recorder across flushes; a name is
     * interned by its text, so the copy below is made once per name */
    char small[512];
    char *tmp = len < sizeof small ? small : malloc(len + 1);
    if (!tmp)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    memcpy(tmp, name, len);
    tmp[len] = '\0';
    int32_t id = cp_trace_intern(k->rec, tmp);
    if (tmp != small)
        free(tmp);
    if (id < 0)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t before = cp_trace_n_events(k->rec);
    cp_trace_record(k->rec, layer, id, kernel, iteration, start_ns, end_ns, thread);
    if (cp_trace_n_events(k->rec) == before)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory recording an event");
    k->r->events[layer]++;
    if (layer == CP_LAYER_APP && iteration >= 0) {
        enum cp_status st =
            cp_imp_seq_event(k, id, name, len, thread, iteration, start_ns, end_ns, d);
        if (st != CP_OK)
            return st;
    }
    if ((layer == CP_LAYER_APP || layer == CP_LAYER_RUNTIME) && iteration >= 0)
        return count_api(k, id, name, len, layer, iteration,
                         end_ns > start_ns ? end_ns - start_ns : 0, d);
    return CP_OK;
}

enum cp_status cp_imp_sink_counter(struct cp_imp_sink *k, int32_t iteration, const char *name,
                                   double value, uint64_t ts_ns, struct cp_diag *d)
{
    if (k->n_counters == FLUSH_COUNTERS) {
        enum cp_status st = flush_counters(k, d);
        if (st != CP_OK)
            return st;
    }
    struct cp_trace_counter_value *g =
        cp_imp_grow(k->counters, k->n_counters, &k->cap_counters, sizeof *g, 1024);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    k->counters = g;
    /* counter names repeat: one copy of each */
    size_t len = strlen(name);
    int64_t at = cp_strmap_get(&k->counter_ix, name, len, -1);
    const char *kept = at >= 0 ? k->pool.s[at] : cp_imp_pool_add(&k->pool, name, len);
    if (!kept || (at < 0 && cp_strmap_add(&k->counter_ix, kept, len, (int64_t)k->pool.n - 1, NULL,
                                          NULL) != CP_OK))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    k->counters[k->n_counters++] = (struct cp_trace_counter_value){
        .iteration = iteration, .name = kept, .value = value, .ts_ns = ts_ns};
    return CP_OK;
}

enum cp_status cp_imp_sink_acc(struct cp_imp_sink *k, int32_t iteration, const char *name,
                               double value, double weight, bool additive, struct cp_diag *d)
{
    char key[300];
    int kl = snprintf(key, sizeof key, "%d\x1f%s", iteration, name);
    if (kl < 0 || (size_t)kl >= sizeof key)
        return CP_OK; /* a name that long is no counter anyone reads */
    int64_t at = cp_strmap_get(&k->acc_ix, key, (size_t)kl, -1);
    if (at < 0) {
        struct cp_imp_acc *g = cp_imp_grow(k->acc, k->n_acc, &k->cap_acc, sizeof *g, 64);
        if (!g)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        k->acc = g;
        const char *kept = cp_imp_pool_add(&k->pool, key, (size_t)kl);
        if (!kept ||
            cp_strmap_add(&k->acc_ix, kept, (size_t)kl, (int64_t)k->n_acc, NULL, NULL) != CP_OK)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        k->acc[k->n_acc] = (struct cp_imp_acc){iteration, strchr(kept, '\x1f') + 1, additive, 0, 0};
        at = (int64_t)k->n_acc++;
    }
    struct cp_imp_acc *a = &k->acc[at];
    if (a->additive) {
        a->sum += value;
    } else {
        double w = weight > 0 ? weight : 1.0;
        a->sum += value * w;
        a->weight += w;
    }
    return CP_OK;
}

static enum cp_status flush_acc(struct cp_imp_sink *k, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < k->n_acc; i++) {
        const struct cp_imp_acc *a = &k->acc[i];
        st = cp_imp_sink_counter(k, a->iteration, a->name,
                                 a->additive ? a->sum : a->sum / a->weight, 0, d);
    }
    return st;
}

void cp_imp_note_extra(struct cp_import_result *r, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t have = strlen(r->extras);
    if (have + strlen(base) + 3 >= sizeof r->extras)
        return;
    snprintf(r->extras + have, sizeof r->extras - have, "%s%s", have ? ", " : "", base);
}

enum cp_status cp_imp_sink_meta(struct cp_imp_sink *k, const char *key, const char *value,
                                struct cp_diag *d)
{
    char full[256];
    snprintf(full, sizeof full, "run.%lld.import.%s", (long long)k->run, key);
    return cp_trace_store_set_meta(k->store, full, value, d);
}

/* Close the store and free what the sink holds (a sink never finished or
 * aborted twice is safe). */
static void release(struct cp_imp_sink *k)
{
    cp_trace_store_close(k->store);
    k->store = NULL;
    cp_trace_recorder_free(k->rec);
    k->rec = NULL;
    cp_strmap_release(&k->kernel_ix);
    cp_strmap_release(&k->thread_ix);
    cp_strmap_release(&k->counter_ix);
    cp_strmap_release(&k->acc_ix);
    cp_imp_pool_release(&k->pool);
    free(k->acc);
    free(k->api);
    cp_imp_seq_release(&k->seq);
    k->api = NULL;
    k->cap_api = 0;
    free(k->kernels);
    free(k->counters);
    k->acc = NULL;
    k->kernels = NULL;
    k->counters = NULL;
}

enum cp_status cp_imp_sink_finish(struct cp_imp_sink *k, const uint64_t *samples, size_t n,
                                  struct cp_diag *d)
{
    /* the sequence matchers read this many framework events: their counts
     * of 0 mean none matched (features_load.c) */
    enum cp_status st = k->seq.app_events ? cp_imp_sink_counter(k, -1, "affinity.app_events",
                                                                (double)k->seq.app_events, 0, d)
                                          : CP_OK;
    if (st == CP_OK)
        st = flush_acc(k, d);
    if (st == CP_OK)
        st = flush_events(k, d);
    if (st == CP_OK)
        st = flush_counters(k, d);
    if (st == CP_OK && k->n_kernels)
        st = cp_trace_store_add_kernels(k->store, k->run, k->kernels, k->n_kernels, d);
    if (st == CP_OK && n)
        st = cp_trace_store_add_samples(k->store, k->run, 0, samples, n, d);
    if (st != CP_OK)
        return st;
    k->r->kernels += k->n_kernels;
    release(k);
    return CP_OK;
}

void cp_imp_sink_abort(struct cp_imp_sink *k)
{
    if (k->store && k->run >= 0) {
        struct cp_diag ignored;
        cp_diag_init(&ignored);
        (void)cp_trace_store_delete_run(k->store, k->run, &ignored);
    }
    release(k);
    k->run = -1;
}
