/* The kernel table of a run, with the tensors of its `inputs` and `outputs`
 * JSON parsed (trace/query.h, docs/trace-format.md "kernels"). */
#include "trace/trace_internal.h"

#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static void tensor_release(struct cp_trace_tensor *t)
{
    free(t->name);
    free(t->view_of);
    free(t->dtype);
    free(t->layout);
    free(t->compute);
}

static void kernel_release(struct cp_trace_kernel_desc *k)
{
    free(k->node);
    free(k->op_type);
    free(k->impl);
    free(k->origins);
    for (size_t j = 0; j < k->n_in; j++)
        tensor_release(&k->in[j]);
    for (size_t j = 0; j < k->n_out; j++)
        tensor_release(&k->out[j]);
    free(k->in);
    free(k->out);
}

bool cp_trace_kernel_is_communication(const char *op_type, const char *impl, const char *node)
{
    return (impl && (strcmp(impl, "HCCL") == 0 || strcmp(impl, "COMMUNICATION") == 0)) ||
           (op_type && strcmp(op_type, "HCCL") == 0) ||
           (node && (strncmp(node, "nccl", 4) == 0 || strncmp(node, "hcom_", 5) == 0));
}

const void *cp_trace_find_idx(const void *base, size_t n, size_t size, int64_t idx)
{
    const char *b = base;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int64_t at;
        memcpy(&at, b + mid * size, sizeof at);
        if (at < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t at = 0;
    if (lo < n)
        memcpy(&at, b + lo * size, sizeof at);
    return lo < n && at == idx ? b + lo * size : NULL;
}

_Static_assert(offsetof(struct cp_trace_kernel_desc, idx) == 0,
               "cp_trace_find_idx reads idx first");

const struct cp_trace_kernel_desc *cp_trace_kernel_find(const struct cp_trace_kernel_desc *k,
                                                        size_t n, int64_t idx)
{
    return cp_trace_find_idx(k, n, sizeof *k, idx);
}

void cp_trace_kernels_free(struct cp_trace_kernel_desc *k, size_t n)
{
    if (!k)
        return;
    for (size_t i = 0; i < n; i++)
        kernel_release(&k[i]);
    free(k);
}

/* A copy of a string member, `missing` when absent or not a string; NULL
 * only on OOM (or when `missing` is NULL). */
static char *member_dup(json_t *o, const char *key, const char *missing)
{
    json_t *v = json_object_get(o, key);
    if (json_is_string(v))
        return cp_strdup(json_string_value(v));
    return missing ? cp_strdup(missing) : NULL;
}

/* One tensor object. False on OOM. */
static bool parse_tensor(json_t *o, struct cp_trace_tensor *x)
{
    x->name = member_dup(o, "name", "");
    x->view_of = member_dup(o, "view_of", NULL);
    x->dtype = member_dup(o, "dtype", "");
    x->layout = member_dup(o, "layout", "");
    x->compute = member_dup(o, "compute", NULL);
    x->rank = -1;
    json_t *sh = json_object_get(o, "shape");
    if (json_is_array(sh) && json_array_size(sh) <= CP_TRACE_MAX_RANK) {
        x->rank = (int)json_array_size(sh);
        for (int j = 0; j < x->rank; j++) {
            json_t *dj = json_array_get(sh, (size_t)j);
            x->dims[j] = json_is_integer(dj) ? json_integer_value(dj) : -1;
        }
    }
    return x->name && x->dtype && x->layout &&
           (x->view_of || !json_is_string(json_object_get(o, "view_of"))) &&
           (x->compute || !json_is_string(json_object_get(o, "compute")));
}

/* Parse a kernels.inputs/outputs JSON array. OUT: *v, *n (both empty for
 * NULL or ""). */
static enum cp_status parse_tensors(struct cp_trace_q *q, const char *text, int64_t idx,
                                    const char *col, struct cp_trace_tensor **v, size_t *n,
                                    struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    if (!text || !*text)
        return CP_OK;
    json_error_t err;
    json_t *a = json_loads(text, 0, &err);
    if (!json_is_array(a)) {
        json_decref(a);
        return cp_diag_set(
            d, CP_ERR_CORRUPT, "%s: run %lld, kernel %lld: %s is not a JSON array (%s)", q->s->path,
            (long long)q->run, (long long)idx, col, a ? "another JSON value" : err.text);
    }
    enum cp_status rc = CP_OK;
    size_t m = json_array_size(a);
    struct cp_trace_tensor *t = cp_calloc(m + 1, sizeof *t);
    if (!t) {
        json_decref(a);
        return cp_trace_q_nomem(q, d);
    }
    for (size_t i = 0; i < m && rc == CP_OK; i++) {
        json_t *o = json_array_get(a, i);
        if (!json_is_object(o))
            rc = cp_diag_set(d, CP_ERR_CORRUPT,
                             "%s: run %lld, kernel %lld: %s[%zu] is not an object", q->s->path,
                             (long long)q->run, (long long)idx, col, i);
        else if (!parse_tensor(o, &t[i]))
            rc = cp_trace_q_nomem(q, d);
    }
    json_decref(a);
    if (rc != CP_OK) {
        for (size_t i = 0; i < m; i++)
            tensor_release(&t[i]);
        free(t);
        return rc;
    }
    *v = t;
    *n = m;
    return CP_OK;
}

static char *col_text(sqlite3_stmt *st, int i, const char *missing)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return cp_strdup(t && *t ? (const char *)t : missing);
}

/* One row into *k (zeroed by the caller). */
static enum cp_status read_kernel(struct cp_trace_q *q, sqlite3_stmt *st,
                                  struct cp_trace_kernel_desc *k, struct cp_diag *d)
{
    k->idx = sqlite3_column_int64(st, 0);
    k->node = col_text(st, 1, "");
    k->op_type = col_text(st, 2, "");
    k->impl = col_text(st, 3, "");
    k->origins = col_text(st, 4, "[]");
    k->flops = sqlite3_column_double(st, 7);
    k->bytes = sqlite3_column_double(st, 8);
    if (!k->node || !k->op_type || !k->impl || !k->origins)
        return cp_trace_q_nomem(q, d);
    enum cp_status rc = parse_tensors(q, (const char *)sqlite3_column_text(st, 5), k->idx, "inputs",
                                      &k->in, &k->n_in, d);
    if (rc == CP_OK)
        rc = parse_tensors(q, (const char *)sqlite3_column_text(st, 6), k->idx, "outputs", &k->out,
                           &k->n_out, d);
    return rc;
}

enum cp_status cp_trace_query_kernels(struct cp_trace_store *s, int64_t run_id,
                                      struct cp_trace_kernel_desc **k, size_t *n, struct cp_diag *d)
{
    *k = NULL;
    *n = 0;
    struct cp_trace_q q;
    bool has = false;
    enum cp_status rc = cp_trace_q_begin(&q, s, run_id, "kernels", d);
    if (rc == CP_OK)
        rc = cp_trace_q_has_table(&q, "kernels", &has, d);
    if (rc != CP_OK || !has)
        return rc;
    sqlite3_stmt *st = NULL;
    rc = cp_trace_q_prepare(&q,
                            "SELECT idx, node, op_type, impl, origins, inputs, outputs, flops, "
                            "bytes FROM kernels WHERE run_id = ?1 ORDER BY idx",
                            &st, d);
    if (rc != CP_OK)
        return rc;
    struct cp_trace_kernel_desc *arr = NULL;
    size_t len = 0, cap = 0;
    int r = SQLITE_DONE;
    while (rc == CP_OK && (r = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 64;
            struct cp_trace_kernel_desc *g = cp_realloc_array(arr, nc, sizeof *g);
            if (!g) {
                rc = cp_trace_q_nomem(&q, d);
                break;
            }
            arr = g;
            cap = nc;
        }
        struct cp_trace_kernel_desc *kd = &arr[len++];
        memset(kd, 0, sizeof *kd);
        rc = read_kernel(&q, st, kd, d);
    }
    if (rc == CP_OK && r != SQLITE_DONE)
        rc = cp_trace_q_db_error(&q, d);
    sqlite3_finalize(st);
    if (rc != CP_OK) {
        cp_trace_kernels_free(arr, len);
        return rc;
    }
    *k = arr;
    *n = len;
    return CP_OK;
}
