#define _GNU_SOURCE /* memrchr */
/* The Chrome trace-event dialects onto the trace's layers (docs/import.md).
 *
 * The file is parsed once. While it is read, what the writing needs first
 * is gathered: the process names (torch_npu names its device track
 * "Ascend Hardware"; Kineto writes the names last), the steps
 * (ProfilerStep#N, ONNX Runtime's model_run), the earliest time (the run's
 * zero) and the dialect; and each event goes, parsed and compact, to a
 * spill file (spill.c). Then the spill is read back: each event is mapped
 * to a layer, stamped with its step and written. */
#include "import/import_internal.h"
#include "core/json.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct votes {
    size_t kineto, ascend, ort;
};

struct link {
    int64_t key, value;
};

/* Top-level facts kept (schemaVersion, distributedInfo.*, ...). */
#define CP_IMP_MAX_TOP 64

/* The phase as one character, 0 when it is not one. */
static char phase(const struct cp_imp_event *e)
{
    return e->ph.s && e->ph.len == 1 ? e->ph.s[0] : 0;
}

/* An event as the writing sees it: read back from the spill, times in ns. */
struct ev {
    char ph;
    bool has_ts;
    int64_t ts, dur;
    struct cp_imp_val name, cat, pid, tid;
    struct cp_imp_val op_name, provider, task_type; /* the arguments placement reads */
    int64_t correlation, external;                  /* -1: none */
    size_t n_num;
    const char *num_key[CP_IMP_MAX_ARGS]; /* numeric arguments */
    double num_val[CP_IMP_MAX_ARGS];
};

/* ---- the first pass ---------------------------------------------------------------- */

struct scan {
    struct cp_imp_pool pool;
    struct cp_strmap pname; /* pid text -> index into pool: its process_name */
    struct cp_imp_steps steps;
    bool steps_are_model_run;
    int64_t min_ts, max_end;
    bool have_ts;
    struct votes v;
    bool top_object; /* traceEvents, deviceProperties, schemaVersion, ... */
    size_t metadata;
    size_t flows, instants; /* counted while read, never spilled */
    bool string_ts;
    struct cp_imp_spill *spill;
    uint8_t *kinds; /* enum key_kind by the spill's string id */
    size_t cap_kinds;
    /* the first call stack of each framework op: by the op name's spill
     * string id, the stack's (-1: none) */
    int32_t *stack_of;
    size_t cap_stack_of;
    /* Kineto's links from a kernel to the framework op that launched it:
     * launch correlation -> External id, External id -> the op's name (a
     * spill string id); sorted by key once read */
    struct link *links, *ops;
    size_t n_links, cap_links, n_ops, cap_ops;
    /* torch_npu's async_npu flows from a framework op to the device task it
     * launched: flow start (hashed id -> the op's ts), flow end (the
     * task's ts -> hashed id), and the ops by ts (-> name) */
    struct link *flow_s, *flow_f, *op_at;
    size_t n_flow_s, cap_flow_s, n_flow_f, cap_flow_f, n_op_at, cap_op_at;
    /* top-level facts, written with the run */
    char *top_key[CP_IMP_MAX_TOP], *top_val[CP_IMP_MAX_TOP];
    size_t n_top;
    /* Kineto's python_function events (with_stack in newer torch), and
     * where the first op of each name without a "Call stack" ran: its
     * stack is the python functions around it (python_stacks) */
    struct pyfn *pyfn;
    size_t n_pyfn, cap_pyfn;
    struct pyfn *op_where;
    size_t n_op_where, cap_op_where;
    uint8_t *op_seen; /* by the op name's spill string id */
    size_t cap_op_seen;
};

/* A python function's interval on its thread (or, for op_where, an op's
 * start: end unused), with its name and Kineto's Python id and parent id
 * (-1: none). */
struct pyfn {
    int32_t tid, name;
    int64_t ts, end, id, parent;
};

static bool has_prefix(const struct cp_imp_val *v, const char *p)
{
    size_t n = strlen(p);
    return v->s && v->len >= n && memcmp(v->s, p, n) == 0;
}

static bool has_suffix(const struct cp_imp_val *v, const char *p)
{
    size_t n = strlen(p);
    return v->s && v->len >= n && memcmp(v->s + v->len - n, p, n) == 0;
}

/* "ProfilerStep#12" -> 12 */
static bool profiler_step(const struct cp_imp_val *name, int64_t *n)
{
    if (!has_prefix(name, "ProfilerStep#") || name->len == 13 || name->len > 13 + 18)
        return false;
    int64_t x = 0;
    for (size_t i = 13; i < name->len; i++) {
        if (!isdigit((unsigned char)name->s[i]))
            return false;
        x = x * 10 + (name->s[i] - '0');
    }
    *n = x;
    return true;
}

static void vote(struct votes *v, const struct cp_imp_event *e)
{
    static const char *const kineto[] = {"kernel", "cuda_runtime",    "cuda_driver",
                                         "cpu_op", "gpu_memcpy",      "gpu_memset",
                                         "ac2g",   "python_function", "user_annotation"};
    for (size_t i = 0; i < sizeof kineto / sizeof *kineto; i++)
        if (cp_imp_val_is(&e->cat, kineto[i]))
            v->kineto++;
    if (cp_imp_val_is(&e->cat, "Node") || cp_imp_val_is(&e->cat, "Session") ||
        cp_imp_val_is(&e->cat, "Api"))
        v->ort++;
    if (e->ts.s && !e->ts.number)
        v->ascend++; /* torch_npu and msprof write ts as a string */
}

/* Keys of device arguments that are identities, not measurements. */
static bool id_like(const char *key, size_t n)
{
    static const char *const ids[] = {
        "External id", "external id",     "correlation",   "Record function id",
        "Ev Idx",      "Sequence number", "connection_id", "Task Id",
        "Model Id",    "Batch Id",        "Subtask Id",    "Physic Stream Id",
        "stream",      "device",          "context",       "queued",
        "node_index",  "exec_plan_index", "graph_index",   "Fwd thread id",
        "Python id",   "Python parent id"};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        if (strlen(ids[i]) == n && memcmp(key, ids[i], n) == 0)
            return true;
    return false;
}

/* What an argument's key is to the import, decided once per distinct key
 * (keys are interned in the spill, and their ids index this). */
enum key_kind {
    KEY_UNSEEN = 0,
    KEY_MEASURE, /* a number worth keeping */
    KEY_ID,      /* an identity (id_like) */
    KEY_OP_NAME,
    KEY_PROVIDER,
    KEY_TASK_TYPE,
    KEY_CORRELATION, /* Kineto: a launch and the kernel it launched */
    KEY_CALL_STACK,  /* a framework op's Python call stack */
    KEY_EXTERNAL,    /* Kineto: a framework op and the launches inside it */
};

static enum key_kind classify_key(const char *k, size_t n)
{
    if (n == 7 && memcmp(k, "op_name", 7) == 0)
        return KEY_OP_NAME;
    if (n == 8 && memcmp(k, "provider", 8) == 0)
        return KEY_PROVIDER;
    if (n == 9 && memcmp(k, "Task Type", 9) == 0)
        return KEY_TASK_TYPE;
    if (n == 11 && memcmp(k, "correlation", 11) == 0)
        return KEY_CORRELATION;
    if (n == 10 && (memcmp(k, "Call stack", 10) == 0 || memcmp(k, "Call Stack", 10) == 0))
        return KEY_CALL_STACK;
    if (n == 11 && (memcmp(k, "External id", 11) == 0 || memcmp(k, "external id", 11) == 0))
        return KEY_EXTERNAL;
    return id_like(k, n) ? KEY_ID : KEY_MEASURE;
}

static enum key_kind key_kind(struct scan *s, int32_t id, const char *k, size_t n)
{
    if (id < 0)
        return KEY_ID;
    if ((size_t)id >= s->cap_kinds) {
        size_t nc = s->cap_kinds ? s->cap_kinds : 256;
        while (nc <= (size_t)id)
            nc *= 2;
        uint8_t *g = realloc(s->kinds, nc);
        if (!g)
            return KEY_ID;
        memset(g + s->cap_kinds, 0, nc - s->cap_kinds);
        s->kinds = g;
        s->cap_kinds = nc;
    }
    if (s->kinds[id] == KEY_UNSEEN)
        s->kinds[id] = (uint8_t)classify_key(k, n);
    return (enum key_kind)s->kinds[id];
}

static enum cp_status add_link(struct link **v, size_t *n, size_t *cap, int64_t key, int64_t value,
                               struct cp_diag *d)
{
    struct link *g = cp_imp_grow(*v, *n, cap, sizeof *g, 1024);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    *v = g;
    (*v)[(*n)++] = (struct link){key, value};
    return CP_OK;
}

/* By key, then value: the order of equal keys must not depend on qsort. */
static int cmp_link(const void *pa, const void *pb)
{
    const struct link *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->value < b->value ? -1 : a->value > b->value;
}

/* The value of `key` in a sorted table (the first of equals); -1 when
 * absent. */
static int64_t find_link(const struct link *v, size_t n, int64_t key)
{
    if (key < 0)
        return -1;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].key == key ? v[lo].value : -1;
}

/* Keep the first call stack seen of the op named by spill string `name`.
 * false when out of memory. */
static bool note_stack(struct scan *s, int32_t name, const struct cp_imp_val *stack)
{
    if ((size_t)name >= s->cap_stack_of) {
        size_t nc = s->cap_stack_of ? s->cap_stack_of : 256;
        while (nc <= (size_t)name)
            nc *= 2;
        int32_t *g = cp_realloc_array(s->stack_of, nc, sizeof *g);
        if (!g)
            return false;
        for (size_t i = s->cap_stack_of; i < nc; i++)
            g[i] = -1;
        s->stack_of = g;
        s->cap_stack_of = nc;
    }
    if (s->stack_of[name] < 0)
        s->stack_of[name] = cp_imp_spill_str(s->spill, stack);
    return true;
}

static enum cp_status add_pyfn(struct pyfn **v, size_t *n, size_t *cap, struct pyfn f,
                               struct cp_diag *d)
{
    struct pyfn *g = cp_imp_grow(*v, *n, cap, sizeof *g, 1024);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    *v = g;
    g[(*n)++] = f;
    return CP_OK;
}

/* The first op of each name: where it ran, for its python stack. */
static enum cp_status note_op_where(struct scan *s, const struct cp_imp_rec *r, int64_t ts,
                                    struct cp_diag *d)
{
    if ((size_t)r->name >= s->cap_op_seen) {
        size_t nc = s->cap_op_seen ? s->cap_op_seen : 256;
        while (nc <= (size_t)r->name)
            nc *= 2;
        uint8_t *g = realloc(s->op_seen, nc);
        if (!g)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        memset(g + s->cap_op_seen, 0, nc - s->cap_op_seen);
        s->op_seen = g;
        s->cap_op_seen = nc;
    }
    if (s->op_seen[r->name])
        return CP_OK;
    s->op_seen[r->name] = 1;
    return add_pyfn(&s->op_where, &s->n_op_where, &s->cap_op_where,
                    (struct pyfn){r->tid, r->name, ts, ts, -1, -1}, d);
}

/* The event, compact, into the spill: its strings as ids, its numeric
 * arguments (identities left out) as numbers. */
static enum cp_status spill_event(struct scan *s, const struct cp_imp_event *e, char ph,
                                  bool has_ts, int64_t ts, int64_t dur, struct cp_diag *d)
{
    struct cp_imp_rec r = {.ph = ph, .has_ts = has_ts, .ts = ts, .dur = dur};
    struct cp_imp_spill *sp = s->spill;
    r.name = cp_imp_spill_str(sp, &e->name);
    r.cat = cp_imp_spill_str(sp, &e->cat);
    r.pid = cp_imp_spill_str(sp, &e->pid);
    r.tid = cp_imp_spill_str(sp, &e->tid);
    r.op_name = r.provider = r.task_type = -1;
    r.correlation = r.external = -1;
    bool python = ph == 'X' && has_ts && cp_imp_val_is(&e->cat, "python_function");
    int64_t py_id = -1, py_parent = -1;
    for (size_t i = 0; i < e->n_args; i++) {
        const struct cp_imp_val *v = &e->args[i].v;
        struct cp_imp_val kv = {e->args[i].key, strlen(e->args[i].key), false};
        int32_t kid = cp_imp_spill_str(sp, &kv);
        double x;
        if (python && (cp_imp_val_is(&kv, "Python id") || cp_imp_val_is(&kv, "Python parent id")) &&
            cp_imp_val_num(v, &x) && x >= 0 && x < 9.0e15)
            *(kv.len == 9 ? &py_id : &py_parent) = (int64_t)x;
        switch (key_kind(s, kid, kv.s, kv.len)) {
        case KEY_OP_NAME:
            r.op_name = cp_imp_spill_str(sp, v);
            break;
        case KEY_PROVIDER:
            r.provider = cp_imp_spill_str(sp, v);
            break;
        case KEY_TASK_TYPE:
            r.task_type = cp_imp_spill_str(sp, v);
            break;
        case KEY_CALL_STACK:
            if (v->s && v->len && r.name >= 0 && !note_stack(s, r.name, v))
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        case KEY_CORRELATION:
        case KEY_EXTERNAL:
            if (v->number && cp_imp_val_num(v, &x) && x >= 0 && x < 9.0e15)
                *(key_kind(s, kid, kv.s, kv.len) == KEY_CORRELATION ? &r.correlation
                                                                    : &r.external) = (int64_t)x;
            break;
        case KEY_MEASURE:
            if (r.n_num < CP_IMP_MAX_ARGS && cp_imp_val_num(v, &x)) {
                r.num_key[r.n_num] = kid;
                r.num_val[r.n_num++] = x;
            }
            break;
        default:
            break;
        }
    }
    enum cp_status st = cp_imp_spill_put(sp, &r, d);
    /* a launch links its kernel (correlation) to its op (External id); an
     * op names its External id */
    bool launch = cp_imp_val_is(&e->cat, "cuda_runtime") || cp_imp_val_is(&e->cat, "cuda_driver");
    bool op = cp_imp_val_is(&e->cat, "cpu_op") || cp_imp_val_is(&e->cat, "Operator");
    if (st == CP_OK && launch && r.correlation >= 0 && r.external >= 0)
        st = add_link(&s->links, &s->n_links, &s->cap_links, r.correlation, r.external, d);
    if (st == CP_OK && op && r.external >= 0 && r.name >= 0)
        st = add_link(&s->ops, &s->n_ops, &s->cap_ops, r.external, r.name, d);
    if (st == CP_OK && python && r.tid >= 0 && r.name >= 0)
        st = add_pyfn(&s->pyfn, &s->n_pyfn, &s->cap_pyfn,
                      (struct pyfn){r.tid, r.name, ts, ts + (dur > 0 ? dur : 0), py_id, py_parent},
                      d);
    if (st == CP_OK && op && ph == 'X' && has_ts && r.tid >= 0 && r.name >= 0)
        st = note_op_where(s, &r, ts, d);
    return st;
}

/* torch_npu: a flow async_npu runs from the framework op (its start at
 * the op's ts) to the device task (its end at the task's ts). */
static enum cp_status npu_links(struct scan *s, const struct cp_imp_event *e, char ph, int64_t ts,
                                struct cp_diag *d)
{
    if ((ph == 's' || ph == 'f') && cp_imp_val_is(&e->cat, "async_npu") && e->id.s) {
        int64_t id = (int64_t)(cp_hash64(e->id.s, e->id.len) >> 1);
        return ph == 's' ? add_link(&s->flow_s, &s->n_flow_s, &s->cap_flow_s, id, ts, d)
                         : add_link(&s->flow_f, &s->n_flow_f, &s->cap_flow_f, ts, id, d);
    }
    if (ph == 'X' && cp_imp_val_is(&e->cat, "cpu_op") && !has_prefix(&e->name, "ProfilerStep#")) {
        int32_t name = cp_imp_spill_str(s->spill, &e->name);
        if (name >= 0)
            return add_link(&s->op_at, &s->n_op_at, &s->cap_op_at, ts, name, d);
    }
    return CP_OK;
}

static enum cp_status scan_event(void *u, const struct cp_imp_event *e, struct cp_diag *d)
{
    struct scan *s = u;
    vote(&s->v, e);
    char ph = phase(e);
    if (ph == 'M') {
        s->metadata++;
        const struct cp_imp_val *nm = cp_imp_arg(e, "name");
        if (cp_imp_val_is(&e->name, "process_name") && nm && nm->s && e->pid.s &&
            cp_strmap_get(&s->pname, e->pid.s, e->pid.len, -1) < 0) {
            const char *key = cp_imp_pool_add(&s->pool, e->pid.s, e->pid.len);
            const char *val = cp_imp_pool_add(&s->pool, nm->s, nm->len);
            if (!key || !val ||
                cp_strmap_add(&s->pname, key, e->pid.len, (int64_t)s->pool.n - 1, NULL, NULL) !=
                    CP_OK)
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            if (cp_imp_val_is(nm, "Ascend Hardware") || cp_imp_val_is(nm, "CANN"))
                s->v.ascend += 1000;
        }
        return CP_OK;
    }
    int64_t ts;
    bool has_ts = e->ts.s && cp_imp_us_to_ns(&e->ts, &ts);
    int64_t dur = 0;
    if (e->dur.s && !cp_imp_us_to_ns(&e->dur, &dur))
        dur = 0;
    /* flows and instants are counted, not written: no need to spill them */
    bool flow = ph == 's' || ph == 't' || ph == 'f', instant = ph == 'i' || ph == 'I' || ph == 'R';
    s->flows += flow;
    s->instants += instant;
    enum cp_status st =
        flow || instant ? CP_OK : spill_event(s, e, ph, has_ts, has_ts ? ts : 0, dur, d);
    if (st != CP_OK || !has_ts)
        return st;
    if ((st = npu_links(s, e, ph, ts, d)) != CP_OK)
        return st;
    if (!e->ts.number)
        s->string_ts = true;
    if (!s->have_ts || ts < s->min_ts)
        s->min_ts = ts;
    if (!s->have_ts || ts + dur > s->max_end)
        s->max_end = ts + dur;
    s->have_ts = true;
    int64_t n;
    bool step = ph == 'X' && profiler_step(&e->name, &n);
    bool run =
        ph == 'X' && cp_imp_val_is(&e->name, "model_run") && cp_imp_val_is(&e->cat, "Session");
    if (step || run) {
        enum cp_status sst =
            cp_imp_steps_add(&s->steps, ts, ts + (dur > 0 ? dur : 0), step ? n : -1, d);
        if (sst != CP_OK)
            return sst;
        if (run)
            s->steps_are_model_run = true;
    }
    return CP_OK;
}

static enum cp_status scan_top(void *u, const char *key, const struct cp_imp_val *v,
                               struct cp_diag *d)
{
    struct scan *s = u;
    if (strcmp(key, "schemaVersion") == 0 || strncmp(key, "deviceProperties", 16) == 0 ||
        strncmp(key, "distributedInfo", 15) == 0 || strcmp(key, "displayTimeUnit") == 0)
        s->top_object = true;
    if (s->n_top == CP_IMP_MAX_TOP)
        return CP_OK;
    size_t vl = v->len > 255 ? 255 : v->len;
    char *k = cp_strdup(key), *val = malloc(vl + 1);
    if (!k || !val) {
        free(k);
        free(val);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    memcpy(val, v->s, vl);
    val[vl] = '\0';
    s->top_key[s->n_top] = k;
    s->top_val[s->n_top++] = val;
    return CP_OK;
}

/* ---- the second pass ----------------------------------------------------------------- */

/* An open B event of one thread. */
struct open_b {
    int64_t ts;
    char *name;
    int thread;
    enum cp_trace_layer layer;
    int32_t kernel;
};

struct write {
    const struct scan *s;
    struct cp_imp_sink *k;
    struct cp_import_result *r;
    enum cp_import_format format;
    bool *stacked; /* by op name id: its call stack is kept */
    size_t cap_stacked;
    /* B/E pairs: a stack per thread */
    struct open_b **stack;
    size_t *depth, *cap;
    size_t n_threads;
};

static const char *process_name(const struct scan *s, const struct cp_imp_val *pid)
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
    const struct scan *s = w->s;
    int64_t id = find_link(s->flow_f, s->n_flow_f, e->ts);
    int64_t at = id >= 0 ? find_link(s->flow_s, s->n_flow_s, id) : -1;
    int64_t name = at >= 0 ? find_link(s->op_at, s->n_op_at, at) : -1;
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
    const struct scan *s = w->s;
    int64_t ext = e->external >= 0 ? e->external : find_link(s->links, s->n_links, e->correlation);
    int64_t name = find_link(s->ops, s->n_ops, ext);
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
            if (strcmp(pn, "HCCL") == 0)
                snprintf(p->op_type, sizeof p->op_type, "HCCL");
            else
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
    const struct scan *s = w->s;
    if ((size_t)op >= s->cap_stack_of || s->stack_of[op] < 0)
        return CP_OK;
    if ((size_t)op >= w->cap_stacked) {
        size_t nc = w->cap_stacked ? w->cap_stacked : 256;
        while (nc <= (size_t)op)
            nc *= 2;
        bool *g = cp_realloc_array(w->stacked, nc, sizeof *g);
        if (!g)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        memset(g + w->cap_stacked, 0, (nc - w->cap_stacked) * sizeof *g);
        w->stacked = g;
        w->cap_stacked = nc;
    }
    if (w->stacked[op])
        return CP_OK;
    w->stacked[op] = true;
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

static enum cp_status interval(struct write *w, const struct ev *e, const struct placed *p,
                               int64_t ts, int64_t dur, int thread, struct cp_diag *d)
{
    const struct scan *s = w->s;
    int64_t rel = ts - s->min_ts;
    if (rel < 0)
        rel = 0;
    if (dur < 0)
        dur = 0;
    int32_t it = cp_imp_steps_of(&s->steps, ts, p->layer == CP_LAYER_DEVICE);
    int32_t kernel = -1;
    enum cp_status st = CP_OK;
    if (p->layer == CP_LAYER_DEVICE && p->origin_id >= 0)
        st = origin_stack(w, p->origin_id, d);
    if (st == CP_OK && p->layer == CP_LAYER_DEVICE) {
        st = cp_imp_sink_kernel(w->k, p->kname, p->klen, p->op_type[0] ? p->op_type : "Kernel",
                                p->impl[0] ? p->impl : NULL, p->origins[0] ? p->origins : NULL,
                                &kernel, d);
        if (st == CP_OK)
            st = device_counters(w, e, it, dur, d);
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
}

/* ---- python stacks ------------------------------------------------------------------ */

static int cmp_pyfn(const void *pa, const void *pb)
{
    const struct pyfn *a = pa, *b = pb;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return a->end > b->end ? -1 : a->end < b->end; /* the outer first */
}

static int cmp_pyfn_id(const void *pa, const void *pb)
{
    const struct pyfn *a = *(const struct pyfn *const *)pa, *b = *(const struct pyfn *const *)pb;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* How far back from an op a search for its innermost python function
 * goes, and how deep a stack is kept. */
#define PY_LOOKBACK 4096
#define PY_DEPTH    64

/* Each op without a "Call stack" gets one made of the python functions
 * around its first call, outermost first, as the stacks of older traces
 * read: the innermost is the latest-starting function on its thread that
 * holds the op's start; the rest follow Kineto's Python parent ids, or,
 * without them, the other functions that hold it. */
static enum cp_status python_stacks(struct scan *s, struct cp_diag *d)
{
    if (s->n_pyfn == 0 || s->n_op_where == 0)
        return CP_OK;
    qsort(s->pyfn, s->n_pyfn, sizeof *s->pyfn, cmp_pyfn);
    const struct pyfn **by_id = cp_calloc(s->n_pyfn, sizeof *by_id);
    if (!by_id)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t n_ids = 0;
    for (size_t i = 0; i < s->n_pyfn; i++)
        if (s->pyfn[i].id >= 0)
            by_id[n_ids++] = &s->pyfn[i];
    qsort(by_id, n_ids, sizeof *by_id, cmp_pyfn_id);
    enum cp_status st = CP_OK;
    struct cp_buf b;
    cp_buf_init(&b);
    for (size_t o = 0; st == CP_OK && o < s->n_op_where; o++) {
        const struct pyfn *op = &s->op_where[o];
        if ((size_t)op->name < s->cap_stack_of && s->stack_of[op->name] >= 0)
            continue; /* the trace gave its stack */
        /* the first function of a later thread, or starting after the op */
        size_t lo = 0, hi = s->n_pyfn;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const struct pyfn *f = &s->pyfn[mid];
            if (f->tid < op->tid || (f->tid == op->tid && f->ts <= op->ts))
                lo = mid + 1;
            else
                hi = mid;
        }
        const struct pyfn *chain[PY_DEPTH];
        size_t depth = 0;
        for (size_t i = lo, seen = 0; i > 0 && seen < PY_LOOKBACK && depth < PY_DEPTH;
             i--, seen++) {
            const struct pyfn *f = &s->pyfn[i - 1];
            if (f->tid != op->tid)
                break;
            if (f->end <= op->ts)
                continue;
            chain[depth++] = f;
            if (f->id >= 0) /* the rest through its parents */
                break;
        }
        while (depth > 0 && depth < PY_DEPTH && chain[depth - 1]->parent >= 0) {
            struct pyfn key = {.id = chain[depth - 1]->parent};
            const struct pyfn *kp = &key;
            const struct pyfn **hit = bsearch(&kp, by_id, n_ids, sizeof *by_id, cmp_pyfn_id);
            if (!hit || *hit == chain[depth - 1])
                break;
            chain[depth++] = *hit;
        }
        if (depth == 0)
            continue;
        b.len = 0;
        for (size_t k = depth; k > 0; k--) {
            struct cp_imp_val nm = cp_imp_spill_text(s->spill, chain[k - 1]->name);
            cp_buf_printf(&b, "%s%.*s", k == depth ? "" : "\n", (int)nm.len, nm.s ? nm.s : "");
        }
        if (cp_buf_status(&b) != CP_OK) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        struct cp_imp_val text = {b.data, b.len, false};
        if (!note_stack(s, op->name, &text))
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    cp_buf_release(&b);
    free(by_id);
    return st;
}

static enum cp_import_format decide(const struct scan *s)
{
    if (s->v.ascend > s->v.kineto && s->v.ascend >= s->v.ort)
        return CP_IMPORT_ASCEND;
    if (s->v.ort > s->v.kineto)
        return CP_IMPORT_ORT;
    if (s->v.kineto > 0 || s->top_object)
        return CP_IMPORT_KINETO;
    return CP_IMPORT_CHROME;
}

static enum cp_status record_summary(struct cp_imp_sink *k, const struct cp_import_result *r,
                                     const struct cp_imp_read_info *info, struct cp_diag *d)
{
    json_t *j = json_object(), *sk = json_object();
    bool ok = j && sk;
    for (int i = 0; ok && i < CP_SKIP_N; i++)
        ok = cp_json_set_int(sk, cp_import_skip_name((enum cp_import_skip)i),
                             (int64_t)r->skipped[i]);
    ok = ok && cp_json_set_str(j, "format", cp_import_format_name(r->format)) &&
         cp_json_set_str(j, "source", r->source) &&
         cp_json_set_int(j, "bytes", (int64_t)info->bytes) &&
         cp_json_set_int(j, "application_events", (int64_t)r->events[0]) &&
         cp_json_set_int(j, "runtime_events", (int64_t)r->events[1]) &&
         cp_json_set_int(j, "device_events", (int64_t)r->events[2]) &&
         cp_json_set_int(j, "control_bytes_repaired", (int64_t)info->control_bytes) &&
         cp_json_set_str(j, "steps", r->step_source);
    if (ok) {
        ok = cp_json_set(j, "skipped", sk);
        sk = NULL;
    }
    char *text = ok ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    json_decref(sk);
    if (!text)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = cp_imp_sink_meta(k, "summary", text, d);
    free(text);
    return st;
}

enum cp_status cp_imp_chrome(const struct cp_imp_src *src, enum cp_import_format format,
                             const char *trace_path, struct cp_import_result *r, struct cp_diag *d)
{
    struct scan s;
    memset(&s, 0, sizeof s);
    cp_strmap_init(&s.pname);
    struct cp_imp_sink k;
    memset(&k, 0, sizeof k);
    k.run = -1;
    struct write w;
    memset(&w, 0, sizeof w);
    struct cp_imp_read_info info;
    enum cp_status st = cp_imp_spill_open(&s.spill, d);
    if (st != CP_OK)
        goto out;
    struct cp_imp_handler h1 = {scan_event, scan_top, &s};
    st = cp_imp_read_chrome(src, &h1, &info, d);
    if (st == CP_OK && !info.found_events)
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: JSON, but not a trace: neither an array of events nor an object "
                         "with \"traceEvents\"",
                         src->name);
    if (st == CP_OK && !s.have_ts)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: no event with a time (\"ts\") in %llu bytes",
                         src->name, (unsigned long long)info.bytes);
    if (st != CP_OK)
        goto out;
    r->format = format == CP_IMPORT_AUTO ? decide(&s) : format;
    r->metadata = s.metadata;
    /* model_run indexes; ProfilerStep keeps the profiler's numbers */
    cp_imp_steps_sort(&s.steps);
    if (s.n_links > 1)
        qsort(s.links, s.n_links, sizeof *s.links, cmp_link);
    if (s.n_ops > 1)
        qsort(s.ops, s.n_ops, sizeof *s.ops, cmp_link);
    struct link **tables[] = {&s.flow_s, &s.flow_f, &s.op_at};
    size_t counts[] = {s.n_flow_s, s.n_flow_f, s.n_op_at};
    for (size_t i = 0; i < 3; i++)
        if (counts[i] > 1)
            qsort(*tables[i], counts[i], sizeof **tables[i], cmp_link);
    if ((st = python_stacks(&s, d)) != CP_OK)
        goto out;
    snprintf(r->step_source, sizeof r->step_source, "%s",
             s.steps.n == 0          ? "window"
             : s.steps_are_model_run ? "model_run"
                                     : "ProfilerStep");
    if ((st = cp_imp_sink_open(&k, trace_path, r->source, cp_import_format_name(r->format), r,
                               d)) != CP_OK)
        goto out;
    for (size_t i = 0; i < s.n_top && st == CP_OK; i++) {
        char key[200];
        snprintf(key, sizeof key, "profile.%.150s", s.top_key[i]);
        st = cp_imp_sink_meta(&k, key, s.top_val[i], d);
    }
    w = (struct write){.s = &s, .k = &k, .r = r, .format = r->format};
    if (st != CP_OK || (st = write_spill(&w, s.spill, d)) != CP_OK)
        goto out;
    for (size_t t = 0; t < w.n_threads; t++)
        r->skipped[CP_SKIP_UNPAIRED] += w.depth[t];
    r->skipped[CP_SKIP_FLOW] += s.flows;
    r->skipped[CP_SKIP_INSTANT] += s.instants;
    r->bytes = info.bytes;
    st = record_summary(&k, r, &info, d);
    if (st == CP_OK)
        st = cp_imp_steps_finish(&s.steps, &k, s.min_ts, s.max_end, d);
out:
    if (st != CP_OK)
        cp_imp_sink_abort(&k);
    release_write(&w);
    cp_imp_steps_release(&s.steps);
    for (size_t i = 0; i < s.n_top; i++) {
        free(s.top_key[i]);
        free(s.top_val[i]);
    }
    cp_imp_spill_close(s.spill);
    free(s.kinds);
    free(s.stack_of);
    free(s.pyfn);
    free(s.op_where);
    free(s.op_seen);
    free(s.links);
    free(s.ops);
    free(s.flow_s);
    free(s.flow_f);
    free(s.op_at);
    cp_strmap_release(&s.pname);
    cp_imp_pool_release(&s.pool);
    return st;
}
