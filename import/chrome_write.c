#define _GNU_SOURCE /* memrchr */
/* The second pass over a Chrome trace (docs/import.md): the spill read
 * back, each event mapped to a layer by its dialect (the device's kernels
 * with their op type, implementation and origins, the runtime's calls,
 * the application's ranges; B/E pairs matched per thread), stamped with
 * its step and written. */
#include "import/chrome_internal.h"
#include "core/json.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* An event as the writing sees it: read back from the spill, times in ns. */
struct ev {
    char ph;
    bool has_ts;
    int64_t ts, dur;
    struct cp_imp_val name, cat, pid, tid;
    struct cp_imp_val op_name, provider, task_type; /* the arguments placement reads */
    struct cp_imp_val transport;                    /* an HCCL task's link */
    int64_t correlation, external;                  /* -1: none */
    size_t n_num;
    const char *num_key[CP_IMP_MAX_ARGS]; /* numeric arguments */
    double num_val[CP_IMP_MAX_ARGS];
};

static bool has_suffix(const struct cp_imp_val *v, const char *p)
{
    size_t n = strlen(p);
    return v->s && v->len >= n && memcmp(v->s + v->len - n, p, n) == 0;
}

/* An open B event of one thread. */
struct open_b {
    int64_t ts;
    char *name;
    int thread;
    enum cp_trace_layer layer;
    int32_t kernel;
};

struct write {
    const struct cp_imp_scan *s;
    struct cp_imp_sink *k;
    struct cp_import_result *r;
    enum cp_import_format format;
    uint8_t *stacked; /* by op name id: its call stack is kept */
    size_t cap_stacked;
    /* B/E pairs: a stack per thread */
    struct open_b **stack;
    size_t *depth, *cap;
    size_t n_threads;
    /* torch_npu's HCCL tasks: the SDMA transfers below the bandwidth an
     * idle link reaches, and the matmul tasks they may compete with for
     * memory bandwidth (msprof-analyze's bandwidth contention check) */
    struct span *slow, *mm;
    size_t n_slow, cap_slow, n_mm, cap_mm;
    /* Kineto's kernels, for the chains worth fusing (fusible.c; an Ascend
     * run reads them from its task table) */
    struct cp_imp_fusible fus;
};

struct span {
    int64_t s, e;
    int32_t it;
};

static const char *process_name(const struct cp_imp_scan *s, const struct cp_imp_val *pid)
{
    if (!pid->s)
        return NULL;
    int64_t i = cp_strmap_get(&s->pname, pid->s, pid->len, -1);
    return i >= 0 ? s->pool.s[i] : NULL;
}

static bool cat_is(const struct cp_imp_val *cat, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (cat->s && cat->len == strlen(names[i]) && strncasecmp(cat->s, names[i], cat->len) == 0)
            return true;
    return false;
}

/* torch_npu's kernel names: "aclnnMatmul_MatMulCommon_MatMulV2" names its
 * op last, "trans_TransData_0" in the middle before an index. */
static void ascend_op_type(const struct cp_imp_val *name, char *out, size_t n)
{
    const char *s = name->s ? name->s : ""; /* an event without a name */
    size_t len = name->s ? name->len : 0;
    size_t parts = 1;
    for (size_t i = 0; i < len; i++)
        parts += s[i] == '_';
    const char *last = memrchr(s, '_', len);
    if (parts >= 3 && last) {
        size_t tail = len - (size_t)(last - s) - 1;
        bool index = tail > 0;
        for (size_t i = 0; i < tail; i++)
            index = index && isdigit((unsigned char)last[1 + i]);
        if (index) { /* the part before the index */
            const char *prev = memrchr(s, '_', (size_t)(last - s));
            if (prev) {
                snprintf(out, n, "%.*s", (int)(last - prev - 1), prev + 1);
                return;
            }
        } else {
            snprintf(out, n, "%.*s", (int)tail, last + 1);
            return;
        }
    }
    snprintf(out, n, "%.*s", (int)(len > 200 ? 200 : len), s);
}

/* Where an interval goes: its layer, and for device work its kernel's
 * name, op type and implementation. false: skipped (*why says why). */
struct placed {
    enum cp_trace_layer layer;
    const char *kname;
    size_t klen;
    char op_type[256];
    char impl[128];
    char origins[600];
    int32_t origin_id; /* the origin op's spill string id; -1: none */
    bool plane;        /* torch_npu: a task of an HCCL plane, inside its collective */
};

/* A kernel's origin, as the JSON array the kernel table keeps. */
static void set_origin(struct placed *p, const char *name, size_t len)
{
    json_t *a = json_array();
    if (a && json_array_append_new(a, cp_json_strn(name, len)) == 0) {
        char *t = json_dumps(a, JSON_COMPACT);
        if (t && strlen(t) < sizeof p->origins)
            memcpy(p->origins, t, strlen(t) + 1);
        free(t);
    }
    json_decref(a);
}

/* torch_npu: the framework op that launched a device task, through the
 * async_npu flow that ends at the task's start. */
static void npu_origin(const struct write *w, const struct ev *e, struct placed *p)
{
    const struct cp_imp_scan *s = w->s;
    int64_t id = cp_imp_link_find(s->flow_f, s->n_flow_f, e->ts);
    int64_t at = id >= 0 ? cp_imp_link_find(s->flow_s, s->n_flow_s, id) : -1;
    int64_t name = at >= 0 ? cp_imp_link_find(s->op_at, s->n_op_at, at) : -1;
    if (name < 0 || name > INT32_MAX)
        return;
    struct cp_imp_val v = cp_imp_spill_text(s->spill, (int32_t)name);
    if (v.s) {
        set_origin(p, v.s, v.len);
        p->origin_id = (int32_t)name;
    }
}

/* Kineto: the framework op that launched a kernel, through its External
 * id (or its launch's, by correlation). */
static void kineto_origin(const struct write *w, const struct ev *e, struct placed *p)
{
    const struct cp_imp_scan *s = w->s;
    int64_t ext =
        e->external >= 0 ? e->external : cp_imp_link_find(s->links, s->n_links, e->correlation);
    int64_t name = cp_imp_link_find(s->ops, s->n_ops, ext);
    if (name < 0 || name > INT32_MAX)
        return;
    struct cp_imp_val v = cp_imp_spill_text(s->spill, (int32_t)name);
    if (v.s) {
        set_origin(p, v.s, v.len);
        p->origin_id = (int32_t)name;
    }
}

static bool place(const struct write *w, const struct ev *e, struct placed *p,
                  enum cp_import_skip *why)
{
    static const char *const device_cats[] = {"kernel", "gpu_memcpy", "gpu_memset",
                                              "memcpy", "memset",     "Kernel"};
    static const char *const runtime_cats[] = {"cuda_runtime", "cuda_driver", "runtime",
                                               "cuda_sync", "mtia_runtime"};
    memset(p, 0, sizeof *p);
    p->origin_id = -1;
    p->layer = CP_LAYER_APP;
    p->kname = e->name.s ? e->name.s : "";
    p->klen = e->name.s ? e->name.len : 0;
    if (w->format == CP_IMPORT_ORT) {
        if (cp_imp_val_is(&e->cat, "Node")) {
            if (has_suffix(&e->name, "_fence_before") || has_suffix(&e->name, "_fence_after")) {
                *why = CP_SKIP_FENCE;
                return false;
            }
            p->layer = CP_LAYER_DEVICE;
            if (has_suffix(&e->name, "_kernel_time"))
                p->klen -= strlen("_kernel_time");
            const struct cp_imp_val *op = &e->op_name, *prov = &e->provider;
            snprintf(p->op_type, sizeof p->op_type, "%.*s", op->s ? (int)op->len : 1,
                     op->s ? op->s : "?");
            if (prov->s)
                snprintf(p->impl, sizeof p->impl, "%.*s", (int)prov->len, prov->s);
            set_origin(p, p->kname, p->klen); /* the node is the ONNX node */
            return true;
        }
        if (cp_imp_val_is(&e->cat, "Kernel")) {
            p->layer = CP_LAYER_DEVICE;
            snprintf(p->op_type, sizeof p->op_type, "kernel");
            return true;
        }
        if (cp_imp_val_is(&e->cat, "Session") && !cp_imp_val_is(&e->name, "model_run"))
            p->layer = CP_LAYER_RUNTIME;
        else if (cp_imp_val_is(&e->cat, "Api"))
            p->layer = CP_LAYER_RUNTIME;
        return true;
    }
    if (w->format == CP_IMPORT_ASCEND) {
        const char *pn = process_name(w->s, &e->pid);
        if (pn && strcmp(pn, "Overlap Analysis") == 0) {
            *why = CP_SKIP_DERIVED;
            return false;
        }
        if (pn && (strcmp(pn, "Ascend Hardware") == 0 || strcmp(pn, "HCCL") == 0)) {
            p->layer = CP_LAYER_DEVICE;
            const struct cp_imp_val *tt = &e->task_type;
            if (strcmp(pn, "HCCL") == 0) {
                snprintf(p->op_type, sizeof p->op_type, "HCCL");
                /* thread 0 holds the collectives, the others their planes'
                 * tasks: the same time again, in parts */
                p->plane = e->tid.s && !cp_imp_val_is(&e->tid, "0");
            } else
                ascend_op_type(&e->name, p->op_type, sizeof p->op_type);
            if (tt->s)
                snprintf(p->impl, sizeof p->impl, "%.*s", (int)tt->len, tt->s);
            npu_origin(w, e, p);
            return true;
        }
        if (pn && strcmp(pn, "CANN") == 0)
            p->layer = CP_LAYER_RUNTIME;
        return true;
    }
    /* Kineto, and Chrome traces in general */
    if (cat_is(&e->cat, device_cats, sizeof device_cats / sizeof *device_cats)) {
        p->layer = CP_LAYER_DEVICE;
        const char *c =
            cat_is(&e->cat, device_cats + 1, 1) || cat_is(&e->cat, device_cats + 3, 1)   ? "Memcpy"
            : cat_is(&e->cat, device_cats + 2, 1) || cat_is(&e->cat, device_cats + 4, 1) ? "Memset"
                                                                                         : "Kernel";
        snprintf(p->op_type, sizeof p->op_type, "%s", c);
        kineto_origin(w, e, p);
        return true;
    }
    if (cat_is(&e->cat, runtime_cats, sizeof runtime_cats / sizeof *runtime_cats))
        p->layer = CP_LAYER_RUNTIME;
    return true;
}

/* Sizes add up over a step; the rest (occupancy, blocks per SM, pipe
 * ratios) are means weighted by the events' durations. */
static bool additive_key(const char *key)
{
    size_t n = strlen(key);
    return strstr(key, "bytes") != NULL || (n > 5 && strcmp(key + n - 5, "_size") == 0) ||
           strcmp(key, "size(Byte)") == 0;
}

static enum cp_status device_counters(struct write *w, const struct ev *e, int32_t iteration,
                                      int64_t dur, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < e->n_num; i++) {
        char name[220];
        snprintf(name, sizeof name, "arg.%s", e->num_key[i]);
        st = cp_imp_sink_acc(w->k, iteration, name, e->num_val[i], (double)dur,
                             additive_key(e->num_key[i]), d);
    }
    return st;
}

/* The call stack of an origin op, kept with the run once
 * ("stack.<op name>"): findings show it for the ops they name. */
static enum cp_status origin_stack(struct write *w, int32_t op, struct cp_diag *d)
{
    const struct cp_imp_scan *s = w->s;
    if ((size_t)op >= s->cap_stack_of || s->stack_of[op] < 0)
        return CP_OK;
    if (!cp_imp_byte_slot(&w->stacked, &w->cap_stacked, (size_t)op))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (w->stacked[op])
        return CP_OK;
    w->stacked[op] = 1;
    struct cp_imp_val name = cp_imp_spill_text(s->spill, op),
                      stack = cp_imp_spill_text(s->spill, s->stack_of[op]);
    char key[200];
    snprintf(key, sizeof key, "stack.%.*s", (int)(name.len > 180 ? 180 : name.len), name.s);
    char *text = malloc(stack.len + 1);
    if (!text)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    memcpy(text, stack.s, stack.len);
    text[stack.len] = '\0';
    enum cp_status st = cp_imp_sink_meta(w->k, key, text, d);
    free(text);
    return st;
}

static enum cp_status add_span(struct span **v, size_t *n, size_t *cap, struct span x,
                               struct cp_diag *d)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        struct span *g = cp_realloc_array(*v, nc, sizeof *g);
        if (!g)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        *v = g;
        *cap = nc;
    }
    (*v)[(*n)++] = x;
    return CP_OK;
}

/* The bandwidth of an SDMA transfer below which msprof-analyze's advisor
 * calls it slowed by contention: 0.8 of its 18 GB/s baseline. */
#define SDMA_CONTENDED_GBPS (0.8 * 18.0)

/* A torch_npu device task the communication checks read (docs/import.md):
 * an HCCL SDMA transfer's time, whether its size is a multiple of 512 bytes
 * (hccl.misaligned_*), and when slow, its span; a matmul task's span. */
static enum cp_status ascend_transfer(struct write *w, const struct ev *e, const struct placed *p,
                                      int32_t it, int64_t ts, int64_t dur, struct cp_diag *d)
{
    if (strstr(p->op_type, "MatMul") || strstr(p->op_type, "Matmul")) {
        /* a stream's tasks come in order: one that starts inside the last
         * span extends it */
        struct span *last = w->n_mm ? &w->mm[w->n_mm - 1] : NULL;
        if (last && ts >= last->s && ts <= last->e) {
            last->e = ts + dur > last->e ? ts + dur : last->e;
            return CP_OK;
        }
        return add_span(&w->mm, &w->n_mm, &w->cap_mm, (struct span){ts, ts + dur, it}, d);
    }
    if (strcmp(p->op_type, "HCCL") != 0 || !cp_imp_val_is(&e->transport, "SDMA"))
        return CP_OK;
    double bytes = NAN, gbps = NAN;
    for (size_t i = 0; i < e->n_num; i++)
        if (strcmp(e->num_key[i], "size(Byte)") == 0)
            bytes = e->num_val[i];
        else if (strcmp(e->num_key[i], "bandwidth(GB/s)") == 0)
            gbps = e->num_val[i];
    if (!(bytes > 0) || !isfinite(bytes))
        return CP_OK;
    double us = (double)dur / 1000.0;
    enum cp_status st = cp_imp_sink_acc(w->k, it, "hccl.sdma_us", us, 0, true, d);
    if (st == CP_OK)
        st = cp_imp_sink_acc(w->k, it, "hccl.sdma_tasks", 1, 0, true, d);
    if (st == CP_OK && fmod(bytes, 512.0) != 0) {
        st = cp_imp_sink_acc(w->k, it, "hccl.misaligned_us", us, 0, true, d);
        if (st == CP_OK)
            st = cp_imp_sink_acc(w->k, it, "hccl.misaligned_tasks", 1, 0, true, d);
    }
    if (st == CP_OK && isfinite(gbps) && gbps < SDMA_CONTENDED_GBPS && dur > 0)
        st = add_span(&w->slow, &w->n_slow, &w->cap_slow, (struct span){ts, ts + dur, it}, d);
    return st;
}

static int cmp_span(const void *pa, const void *pb)
{
    const struct span *a = pa, *b = pb;
    return (a->s > b->s) - (a->s < b->s);
}

/* The slow SDMA transfers that overlap a matmul task: their time, per
 * iteration (hccl.contended_us). */
static enum cp_status contention(struct write *w, struct cp_diag *d)
{
    if (!w->n_slow || !w->n_mm)
        return CP_OK;
    qsort(w->mm, w->n_mm, sizeof *w->mm, cmp_span);
    /* the latest end among the matmuls started so far, in place of .e */
    for (size_t i = 1; i < w->n_mm; i++)
        if (w->mm[i].e < w->mm[i - 1].e)
            w->mm[i].e = w->mm[i - 1].e;
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < w->n_slow; i++) {
        const struct span *t = &w->slow[i];
        size_t lo = 0, hi = w->n_mm; /* the matmuls that start before t ends */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (w->mm[mid].s < t->e)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && w->mm[lo - 1].e > t->s)
            st = cp_imp_sink_acc(w->k, t->it, "hccl.contended_us", (double)(t->e - t->s) / 1000.0,
                                 0, true, d);
    }
    return st;
}

static enum cp_status interval(struct write *w, const struct ev *e, const struct placed *p,
                               int64_t ts, int64_t dur, int thread, struct cp_diag *d)
{
    const struct cp_imp_scan *s = w->s;
    int64_t rel = ts - s->min_ts;
    if (rel < 0)
        rel = 0;
    if (dur < 0)
        dur = 0;
    int32_t it = cp_imp_steps_of(&s->steps, ts, p->layer == CP_LAYER_DEVICE);
    int32_t kernel = -1;
    enum cp_status st = CP_OK;
    if (p->plane) {
        w->r->skipped[CP_SKIP_DETAIL]++;
        return ascend_transfer(w, e, p, it, ts, dur, d);
    }
    if (p->layer == CP_LAYER_DEVICE && p->origin_id >= 0)
        st = origin_stack(w, p->origin_id, d);
    if (st == CP_OK && p->layer == CP_LAYER_DEVICE) {
        st = cp_imp_sink_kernel(w->k, p->kname, p->klen, p->op_type[0] ? p->op_type : "Kernel",
                                p->impl[0] ? p->impl : NULL, p->origins[0] ? p->origins : NULL,
                                &kernel, d);
        if (st == CP_OK)
            st = device_counters(w, e, it, dur, d);
        if (st == CP_OK && w->format == CP_IMPORT_ASCEND)
            st = ascend_transfer(w, e, p, it, ts, dur, d);
        /* a GPU's kernels by name (their op type is "Kernel"): no data-move
         * ratio, so only short ones are light */
        if (st == CP_OK && w->format == CP_IMPORT_KINETO && strcmp(p->op_type, "Kernel") == 0)
            st = cp_imp_fusible_task(&w->fus, thread, kernel,
                                     (struct cp_imp_val){p->kname, p->klen, false},
                                     (double)dur / 1000.0, NAN, d);
    }
    if (st == CP_OK)
        st = cp_imp_sink_event(w->k, p->layer, e->name.s ? e->name.s : "",
                               e->name.s ? e->name.len : 0, kernel, it, (uint64_t)rel,
                               (uint64_t)(rel + dur), thread, d);
    return st;
}

static enum cp_status grow_thread(struct write *w, int thread, struct cp_diag *d)
{
    size_t need = (size_t)thread + 1;
    if (need <= w->n_threads)
        return CP_OK;
    struct open_b **st = cp_realloc_array(w->stack, need, sizeof *st);
    if (!st)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    w->stack = st;
    size_t *dp = cp_realloc_array(w->depth, need, sizeof *dp);
    if (!dp)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    w->depth = dp;
    size_t *cp = cp_realloc_array(w->cap, need, sizeof *cp);
    if (!cp)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    w->cap = cp;
    for (size_t i = w->n_threads; i < need; i++) {
        w->stack[i] = NULL;
        w->depth[i] = w->cap[i] = 0;
    }
    w->n_threads = need;
    return CP_OK;
}

static enum cp_status begin_end(struct write *w, const struct ev *e, bool begin,
                                const struct placed *p, int64_t ts, int thread, struct cp_diag *d)
{
    enum cp_status st = grow_thread(w, thread, d);
    if (st != CP_OK)
        return st;
    if (begin) {
        if (w->depth[thread] == w->cap[thread]) {
            size_t nc = w->cap[thread] ? w->cap[thread] * 2 : 8;
            struct open_b *g = cp_realloc_array(w->stack[thread], nc, sizeof *g);
            if (!g)
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            w->stack[thread] = g;
            w->cap[thread] = nc;
        }
        char *nm = malloc(e->name.len + 1);
        if (!nm)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        memcpy(nm, e->name.s ? e->name.s : "", e->name.s ? e->name.len : 0);
        nm[e->name.s ? e->name.len : 0] = '\0';
        w->stack[thread][w->depth[thread]++] = (struct open_b){ts, nm, thread, p->layer, -1};
        return CP_OK;
    }
    if (w->depth[thread] == 0) {
        w->r->skipped[CP_SKIP_UNPAIRED]++;
        return CP_OK;
    }
    struct open_b b = w->stack[thread][--w->depth[thread]];
    struct ev be = *e;
    be.name = (struct cp_imp_val){b.name, strlen(b.name), false};
    struct placed bp = *p;
    bp.layer = b.layer;
    bp.kname = b.name;
    bp.klen = strlen(b.name);
    st = interval(w, &be, &bp, b.ts, ts - b.ts, thread, d);
    free(b.name);
    return st;
}

static enum cp_status write_event(struct write *w, const struct ev *e, struct cp_diag *d)
{
    struct cp_import_result *r = w->r;
    char ph = e->ph;
    if (ph == 'M')
        return CP_OK;
    if (ph == 's' || ph == 't' || ph == 'f') {
        r->skipped[CP_SKIP_FLOW]++;
        return CP_OK;
    }
    if (ph == 'i' || ph == 'I' || ph == 'R') {
        r->skipped[CP_SKIP_INSTANT]++;
        return CP_OK;
    }
    bool x = ph == 'X', b = ph == 'B', en = ph == 'E', c = ph == 'C';
    if (!x && !b && !en && !c) {
        r->skipped[CP_SKIP_OTHER_PHASE]++;
        return CP_OK;
    }
    if (!e->has_ts) {
        r->skipped[CP_SKIP_NO_TIME]++;
        return CP_OK;
    }
    int64_t ts = e->ts;
    if (c) {
        int64_t rel = ts - w->s->min_ts;
        int32_t it = cp_imp_steps_of(&w->s->steps, ts, false);
        for (size_t i = 0; i < e->n_num; i++) {
            char name[300];
            snprintf(name, sizeof name, "%.*s.%s", e->name.s ? (int)e->name.len : 7,
                     e->name.s ? e->name.s : "counter", e->num_key[i]);
            enum cp_status st =
                cp_imp_sink_counter(w->k, it, name, e->num_val[i], rel > 0 ? (uint64_t)rel : 0, d);
            if (st != CP_OK)
                return st;
        }
        return CP_OK;
    }
    struct placed p;
    enum cp_import_skip why = CP_SKIP_OTHER_PHASE;
    if (!place(w, e, &p, &why)) {
        r->skipped[why]++;
        return CP_OK;
    }
    int thread = 0;
    enum cp_status st = cp_imp_sink_thread(w->k, &e->pid, &e->tid, &thread, d);
    if (st != CP_OK)
        return st;
    if (b || en)
        return begin_end(w, e, b, &p, ts, thread, d);
    return interval(w, e, &p, ts, e->dur, thread, d);
}

/* Read the spill back, event by event, into the run. */
static enum cp_status write_spill(struct write *w, struct cp_imp_spill *sp, struct cp_diag *d)
{
    enum cp_status st = cp_imp_spill_rewind(sp, d);
    struct cp_imp_rec r;
    struct ev e;
    bool more = false;
    while (st == CP_OK && (st = cp_imp_spill_next(sp, &r, &more, d)) == CP_OK && more) {
        e.ph = r.ph;
        e.has_ts = r.has_ts;
        e.ts = r.ts;
        e.dur = r.dur;
        e.name = cp_imp_spill_text(sp, r.name);
        e.cat = cp_imp_spill_text(sp, r.cat);
        e.pid = cp_imp_spill_text(sp, r.pid);
        e.tid = cp_imp_spill_text(sp, r.tid);
        e.op_name = cp_imp_spill_text(sp, r.op_name);
        e.provider = cp_imp_spill_text(sp, r.provider);
        e.task_type = cp_imp_spill_text(sp, r.task_type);
        e.transport = cp_imp_spill_text(sp, r.transport);
        e.correlation = r.correlation;
        e.external = r.external;
        e.n_num = r.n_num;
        for (size_t i = 0; i < r.n_num; i++) {
            e.num_key[i] = cp_imp_spill_text(sp, r.num_key[i]).s;
            e.num_val[i] = r.num_val[i];
        }
        st = write_event(w, &e, d);
    }
    return st;
}

static void release_write(struct write *w)
{
    for (size_t t = 0; t < w->n_threads; t++) {
        for (size_t i = 0; i < w->depth[t]; i++)
            free(w->stack[t][i].name);
        free(w->stack[t]);
    }
    free(w->stack);
    free(w->depth);
    free(w->cap);
    free(w->stacked);
    free(w->slow);
    free(w->mm);
    cp_imp_fusible_release(&w->fus);
}

enum cp_status cp_imp_chrome_write(const struct cp_imp_scan *s, struct cp_imp_sink *k,
                                   struct cp_import_result *r, struct cp_diag *d)
{
    struct write w = {.s = s, .k = k, .r = r, .format = r->format};
    cp_imp_fusible_init(&w.fus);
    enum cp_status st = write_spill(&w, s->spill, d);
    for (size_t t = 0; st == CP_OK && t < w.n_threads; t++)
        r->skipped[CP_SKIP_UNPAIRED] += w.depth[t];
    if (st == CP_OK)
        st = contention(&w, d);
    if (st == CP_OK && w.format == CP_IMPORT_KINETO)
        st = cp_imp_fusible_finish(&w.fus, k, r, d);
    release_write(&w);
    return st;
}
