/* The first pass over a Chrome trace (docs/import.md): the file is read
 * once (chrome_json.c), and while it is read what the writing needs first
 * is gathered: the process names (torch_npu names its device track
 * "Ascend Hardware"; Kineto writes the names last), the steps
 * (ProfilerStep#N, ONNX Runtime's model_run), the earliest time (the run's
 * zero), the dialect's votes, the links from kernels to the framework ops
 * that launched them, call stacks; and each event goes, parsed and
 * compact, to the spill (spill.c). */
#include "import/chrome_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The phase as one character, 0 when it is not one. */
static char phase(const struct cp_imp_event *e)
{
    return e->ph.s && e->ph.len == 1 ? e->ph.s[0] : 0;
}

static bool has_prefix(const struct cp_imp_val *v, const char *p)
{
    size_t n = strlen(p);
    return v->s && v->len >= n && memcmp(v->s, p, n) == 0;
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

static void vote(struct cp_imp_votes *v, const struct cp_imp_event *e)
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
    KEY_TRANSPORT,   /* torch_npu: an HCCL task's link (SDMA, RDMA) */
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
    if (n == 14 && memcmp(k, "transport type", 14) == 0)
        return KEY_TRANSPORT;
    if (n == 10 && (memcmp(k, "Call stack", 10) == 0 || memcmp(k, "Call Stack", 10) == 0))
        return KEY_CALL_STACK;
    if (n == 11 && (memcmp(k, "External id", 11) == 0 || memcmp(k, "external id", 11) == 0))
        return KEY_EXTERNAL;
    return id_like(k, n) ? KEY_ID : KEY_MEASURE;
}

static enum key_kind key_kind(struct cp_imp_scan *s, int32_t id, const char *k, size_t n)
{
    if (id < 0)
        return KEY_ID;
    if (!cp_imp_byte_slot(&s->kinds, &s->cap_kinds, (size_t)id))
        return KEY_ID;
    if (s->kinds[id] == KEY_UNSEEN)
        s->kinds[id] = (uint8_t)classify_key(k, n);
    return (enum key_kind)s->kinds[id];
}

static enum cp_status add_link(struct cp_imp_link **v, size_t *n, size_t *cap, int64_t key,
                               int64_t value, struct cp_diag *d)
{
    struct cp_imp_link *g = cp_imp_grow(*v, *n, cap, sizeof *g, 1024);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    *v = g;
    (*v)[(*n)++] = (struct cp_imp_link){key, value};
    return CP_OK;
}

/* By key, then value: the order of equal keys must not depend on qsort. */
static int cmp_link(const void *pa, const void *pb)
{
    const struct cp_imp_link *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->value < b->value ? -1 : a->value > b->value;
}

/* The value of `key` in a sorted table (the first of equals); -1 when
 * absent. */
int64_t cp_imp_link_find(const struct cp_imp_link *v, size_t n, int64_t key)
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
bool cp_imp_scan_note_stack(struct cp_imp_scan *s, int32_t name, const struct cp_imp_val *stack)
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

static enum cp_status add_pyfn(struct cp_imp_pyfn **v, size_t *n, size_t *cap, struct cp_imp_pyfn f,
                               struct cp_diag *d)
{
    struct cp_imp_pyfn *g = cp_imp_grow(*v, *n, cap, sizeof *g, 1024);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    *v = g;
    g[(*n)++] = f;
    return CP_OK;
}

/* The first op of each name: where it ran, for its python stack. */
static enum cp_status note_op_where(struct cp_imp_scan *s, const struct cp_imp_rec *r, int64_t ts,
                                    struct cp_diag *d)
{
    if (!cp_imp_byte_slot(&s->op_seen, &s->cap_op_seen, (size_t)r->name))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (s->op_seen[r->name])
        return CP_OK;
    s->op_seen[r->name] = 1;
    return add_pyfn(&s->op_where, &s->n_op_where, &s->cap_op_where,
                    (struct cp_imp_pyfn){r->tid, r->name, ts, ts, -1, -1}, d);
}

/* The event, compact, into the spill: its strings as ids, its numeric
 * arguments (identities left out) as numbers. */
static enum cp_status spill_event(struct cp_imp_scan *s, const struct cp_imp_event *e, char ph,
                                  bool has_ts, int64_t ts, int64_t dur, struct cp_diag *d)
{
    struct cp_imp_rec r = {.ph = ph, .has_ts = has_ts, .ts = ts, .dur = dur};
    struct cp_imp_spill *sp = s->spill;
    r.name = cp_imp_spill_str(sp, &e->name);
    r.cat = cp_imp_spill_str(sp, &e->cat);
    r.pid = cp_imp_spill_str(sp, &e->pid);
    r.tid = cp_imp_spill_str(sp, &e->tid);
    r.op_name = r.provider = r.task_type = r.transport = -1;
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
        case KEY_TRANSPORT:
            r.transport = cp_imp_spill_str(sp, v);
            break;
        case KEY_CALL_STACK:
            if (v->s && v->len && r.name >= 0 && !cp_imp_scan_note_stack(s, r.name, v))
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
        st = add_pyfn(
            &s->pyfn, &s->n_pyfn, &s->cap_pyfn,
            (struct cp_imp_pyfn){r.tid, r.name, ts, ts + (dur > 0 ? dur : 0), py_id, py_parent}, d);
    if (st == CP_OK && op && ph == 'X' && has_ts && r.tid >= 0 && r.name >= 0)
        st = note_op_where(s, &r, ts, d);
    return st;
}

/* torch_npu: a flow async_npu runs from the framework op (its start at
 * the op's ts) to the device task (its end at the task's ts). */
static enum cp_status npu_links(struct cp_imp_scan *s, const struct cp_imp_event *e, char ph,
                                int64_t ts, struct cp_diag *d)
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
    struct cp_imp_scan *s = u;
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
    struct cp_imp_scan *s = u;
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

enum cp_import_format cp_imp_scan_format(const struct cp_imp_scan *s)
{
    if (s->v.ascend > s->v.kineto && s->v.ascend >= s->v.ort)
        return CP_IMPORT_ASCEND;
    if (s->v.ort > s->v.kineto)
        return CP_IMPORT_ORT;
    if (s->v.kineto > 0 || s->top_object)
        return CP_IMPORT_KINETO;
    return CP_IMPORT_CHROME;
}

struct cp_imp_handler cp_imp_scan_handler(struct cp_imp_scan *s)
{
    return (struct cp_imp_handler){scan_event, scan_top, s};
}

enum cp_status cp_imp_scan_finish(struct cp_imp_scan *s, struct cp_diag *d)
{
    /* model_run indexes; ProfilerStep keeps the profiler's numbers */
    cp_imp_steps_sort(&s->steps);
    struct cp_imp_link *tables[] = {s->links, s->ops, s->flow_s, s->flow_f, s->op_at};
    size_t counts[] = {s->n_links, s->n_ops, s->n_flow_s, s->n_flow_f, s->n_op_at};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
        if (counts[i] > 1)
            qsort(tables[i], counts[i], sizeof *tables[i], cmp_link);
    return cp_imp_python_stacks(s, d);
}

void cp_imp_scan_release(struct cp_imp_scan *s)
{
    cp_imp_steps_release(&s->steps);
    for (size_t i = 0; i < s->n_top; i++) {
        free(s->top_key[i]);
        free(s->top_val[i]);
    }
    cp_imp_spill_close(s->spill);
    free(s->kinds);
    free(s->stack_of);
    free(s->pyfn);
    free(s->op_where);
    free(s->op_seen);
    free(s->links);
    free(s->ops);
    free(s->flow_s);
    free(s->flow_f);
    free(s->op_at);
    cp_strmap_release(&s->pname);
    cp_imp_pool_release(&s->pool);
}
