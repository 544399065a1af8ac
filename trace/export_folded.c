/* Folded stacks ("frame;frame;frame value" per line), the input of
 * flamegraph.pl and speedscope. Each layer is a root frame; device events
 * that name a kernel contribute two frames, node then op type; nested ranges
 * (depth > 0) sit under the range that encloses them. A line's value is the
 * stack's self time in whole microseconds, summed over the run, so a
 * flame graph shows every range at its total time. */
#include "trace/trace_internal.h"

#include <stdlib.h>
#include <string.h>

/* Open ranges of one (layer, thread) while walking its events in start
 * order. */
struct frame {
    int32_t path; /* id in the path table */
    int64_t end_ns;
};

struct folder {
    struct cp_strtab paths;
    int64_t *self_ns; /* path id -> self time */
    size_t cap;
    struct frame stack[256]; /* depth is a uint8_t */
    size_t depth;
    struct cp_buf tmp;
};

/* Frame text with the folded format's separators made harmless. */
static void put_frame(struct cp_buf *b, const char *s)
{
    for (const char *p = s; *p; p++) {
        char c = *p;
        cp_buf_putc(b, c == ';' ? ':' : (c == '\n' || c == '\r' || c == '\t') ? ' ' : c);
    }
}

/* The path id of `parent;frame(s)`; -1 on OOM. */
static int32_t add_path(struct folder *f, int32_t parent, const char *layer, const char *a,
                        const char *b)
{
    cp_buf_reset(&f->tmp);
    if (parent >= 0)
        cp_buf_puts(&f->tmp, cp_strtab_get(&f->paths, parent));
    else
        cp_buf_puts(&f->tmp, layer);
    cp_buf_putc(&f->tmp, ';');
    put_frame(&f->tmp, a);
    if (b) {
        cp_buf_putc(&f->tmp, ';');
        put_frame(&f->tmp, b);
    }
    if (cp_buf_status(&f->tmp) != CP_OK)
        return -1;
    int32_t id = cp_strtab_intern(&f->paths, f->tmp.data, f->tmp.len);
    if (id < 0)
        return -1;
    if ((size_t)id >= f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 256;
        int64_t *p = cp_realloc_array(f->self_ns, cap, sizeof(*p));
        if (!p)
            return -1;
        memset(p + f->cap, 0, (cap - f->cap) * sizeof(*p));
        f->self_ns = p;
        f->cap = cap;
    }
    return id;
}

static int cmp_path(const void *a, const void *b, void *ctx)
{
    const struct cp_strtab *t = ctx;
    return strcmp(cp_strtab_get(t, *(const int32_t *)a), cp_strtab_get(t, *(const int32_t *)b));
}

/* qsort_r is not C11; a small merge sort keeps this portable. */
static void sort_ids(int32_t *ids, int32_t *tmp, size_t n, const struct cp_strtab *t)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    sort_ids(ids, tmp, h, t);
    sort_ids(ids + h, tmp, n - h, t);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n)
        tmp[o++] = cmp_path(&ids[j], &ids[i], (void *)t) < 0 ? ids[j++] : ids[i++];
    while (i < h)
        tmp[o++] = ids[i++];
    while (j < n)
        tmp[o++] = ids[j++];
    memcpy(ids, tmp, n * sizeof(*ids));
}

static enum cp_status write_lines(struct folder *f, struct cp_buf *out)
{
    size_t n = f->paths.n;
    int32_t *ids = cp_calloc(n ? n : 1, sizeof(*ids));
    int32_t *tmp = cp_calloc(n ? n : 1, sizeof(*tmp));
    if (!ids || !tmp) {
        free(ids);
        free(tmp);
        return CP_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = (int32_t)i;
    sort_ids(ids, tmp, n, &f->paths);
    for (size_t i = 0; i < n; i++) {
        int64_t ns = f->self_ns[ids[i]];
        int64_t us = ns > 0 ? (ns + 500) / 1000 : 0;
        if (us > 0) /* flamegraph.pl and speedscope have no use for empty frames */
            cp_buf_printf(out, "%s %lld\n", cp_strtab_get(&f->paths, ids[i]), (long long)us);
    }
    free(ids);
    free(tmp);
    return cp_buf_status(out);
}

/* Tracks (layer, thread) that hold nested events (depth > 0). */
struct tracks {
    struct {
        int layer, thread;
    } t[64];
    size_t n;
    bool overflow; /* more than fit: walk every track as nested */
};

static bool is_nested(const struct tracks *tr, int layer, int thread)
{
    for (size_t i = 0; i < tr->n; i++)
        if (tr->t[i].layer == layer && tr->t[i].thread == thread)
            return true;
    return false;
}

static enum cp_status find_nested_tracks(struct cp_trace_store *s, int64_t run, struct tracks *tr,
                                         struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    memset(tr, 0, sizeof(*tr));
    if (sqlite3_prepare_v2(s->db,
                           "SELECT DISTINCT layer, thread FROM events "
                           "WHERE run_id = ?1 AND depth > 0",
                           -1, &st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, "reading events");
    sqlite3_bind_int64(st, 1, run);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (tr->n == sizeof(tr->t) / sizeof(tr->t[0])) {
            tr->overflow = true;
            continue;
        }
        tr->t[tr->n].layer = sqlite3_column_int(st, 0);
        tr->t[tr->n].thread = sqlite3_column_int(st, 1);
        tr->n++;
    }
    enum cp_status ret =
        rc == SQLITE_DONE ? CP_OK : cp_trace_store_db_error(s, d, "reading events");
    sqlite3_finalize(st);
    return ret;
}

/* The path of a root-level event: layer;node;op_type for a known kernel,
 * layer;name otherwise. */
static int32_t root_path(struct folder *f, const struct cp_trace_kinfo *k, size_t nk, int layer,
                         int64_t kidx, const char *name)
{
    const struct cp_trace_kinfo *ki = kidx >= 0 ? cp_trace_kinfo_find(k, nk, kidx) : NULL;
    const char *lname = cp_trace_layer_name((enum cp_trace_layer)layer);
    return ki ? add_path(f, -1, lname, ki->node, ki->op_type)
              : add_path(f, -1, lname, name ? name : "?", NULL);
}

/* Flat tracks: every event is a root, its self time its duration, so the
 * events are summed in storage order without sorting. Consecutive events
 * mostly share (layer, kernel, name), so the path of the last key is kept. */
static enum cp_status fold_flat(struct cp_trace_store *s, int64_t run, struct folder *f,
                                const struct tracks *tr, const struct cp_trace_kinfo *k, size_t nk,
                                struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT e.layer, e.thread, e.kernel_idx, e.name_id, e.dur_ns, s.value "
                           "FROM events e LEFT JOIN strings s ON s.id = e.name_id "
                           "WHERE e.run_id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, "reading events");
    sqlite3_bind_int64(st, 1, run);
    enum cp_status ret = CP_OK;
    int last_layer = -1;
    int64_t last_kidx = -2, last_name = -2;
    int32_t path = -1;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int layer = sqlite3_column_int(st, 0);
        if (layer < 0 || layer >= CP_TRACE_N_LAYERS ||
            is_nested(tr, layer, sqlite3_column_int(st, 1)))
            continue;
        int64_t kidx = sqlite3_column_int64(st, 2);
        int64_t name_id =
            sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 3);
        if (layer != last_layer || kidx != last_kidx || name_id != last_name) {
            path = root_path(f, k, nk, layer, kidx, (const char *)sqlite3_column_text(st, 5));
            if (path < 0) {
                ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting", s->path);
                goto out;
            }
            last_layer = layer;
            last_kidx = kidx;
            last_name = name_id;
        }
        f->self_ns[path] += sqlite3_column_int64(st, 4);
    }
    if (rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, "reading events");
out:
    sqlite3_finalize(st);
    return ret;
}

/* Nested tracks: walk a track (or, when `all`, every track in turn) in
 * start order, keeping the stack of open ranges; an event hangs under the
 * deepest open range that is shallower than itself and has not ended. */
static enum cp_status fold_nested(struct cp_trace_store *s, int64_t run, bool all, int layer,
                                  int thread, struct folder *f, const struct cp_trace_kinfo *k,
                                  size_t nk, struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    const char *sql = all ? "SELECT e.depth, e.kernel_idx, e.start_ns, e.dur_ns, s.value, "
                            "e.layer, e.thread FROM events e LEFT JOIN strings s "
                            "ON s.id = e.name_id WHERE e.run_id = ?1 "
                            "ORDER BY e.layer, e.thread, e.start_ns, e.depth"
                          : "SELECT e.depth, e.kernel_idx, e.start_ns, e.dur_ns, s.value, "
                            "e.layer, e.thread FROM events e LEFT JOIN strings s "
                            "ON s.id = e.name_id "
                            "WHERE e.run_id = ?1 AND e.layer = ?2 AND e.thread = ?3 "
                            "ORDER BY e.start_ns, e.depth";
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, "reading events");
    sqlite3_bind_int64(st, 1, run);
    if (!all) {
        sqlite3_bind_int(st, 2, layer);
        sqlite3_bind_int(st, 3, thread);
    }
    enum cp_status ret = CP_OK;
    int cur_layer = -1, cur_thread = -1;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int depth = sqlite3_column_int(st, 0);
        int64_t kidx = sqlite3_column_int64(st, 1);
        int64_t start = sqlite3_column_int64(st, 2);
        int64_t dur = sqlite3_column_int64(st, 3);
        const char *name = (const char *)sqlite3_column_text(st, 4);
        layer = sqlite3_column_int(st, 5);
        thread = sqlite3_column_int(st, 6);
        if (layer < 0 || layer >= CP_TRACE_N_LAYERS)
            continue;
        if (layer != cur_layer || thread != cur_thread) {
            cur_layer = layer;
            cur_thread = thread;
            f->depth = 0;
        }
        const char *lname = cp_trace_layer_name((enum cp_trace_layer)layer);
        while (f->depth > 0 && f->stack[f->depth - 1].end_ns <= start)
            f->depth--;
        if (depth >= 0 && (size_t)depth < f->depth)
            f->depth = (size_t)depth;
        int32_t parent = f->depth ? f->stack[f->depth - 1].path : -1;
        const struct cp_trace_kinfo *ki = kidx >= 0 ? cp_trace_kinfo_find(k, nk, kidx) : NULL;
        int32_t path = ki ? add_path(f, parent, lname, ki->node, ki->op_type)
                          : add_path(f, parent, lname, name ? name : "?", NULL);
        if (path < 0) {
            ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting", s->path);
            goto out;
        }
        f->self_ns[path] += dur;
        if (parent >= 0)
            f->self_ns[parent] -= dur;
        if (f->depth < sizeof(f->stack) / sizeof(f->stack[0])) {
            f->stack[f->depth].path = path;
            f->stack[f->depth].end_ns = start + dur;
            f->depth++;
        }
    }
    if (rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, "reading events");
out:
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_trace_export_folded(struct cp_trace_store *s, int64_t run, struct cp_buf *out,
                                      struct cp_diag *d)
{
    struct cp_trace_kinfo *k = NULL;
    size_t nk = 0;
    enum cp_status ret = cp_trace_kinfo_load(s, run, false, &k, &nk, d);
    if (ret != CP_OK)
        return ret;
    struct folder *f = calloc(1, sizeof(*f));
    struct tracks *tr = calloc(1, sizeof(*tr));
    if (!f || !tr) {
        ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting", s->path);
        goto out_free;
    }
    cp_strtab_init(&f->paths);
    cp_buf_init(&f->tmp);
    if ((ret = find_nested_tracks(s, run, tr, d)) != CP_OK)
        goto out_release;
    if (tr->overflow) {
        ret = fold_nested(s, run, true, 0, 0, f, k, nk, d);
    } else {
        ret = fold_flat(s, run, f, tr, k, nk, d);
        for (size_t i = 0; i < tr->n && ret == CP_OK; i++)
            ret = fold_nested(s, run, false, tr->t[i].layer, tr->t[i].thread, f, k, nk, d);
    }
    if (ret == CP_OK && write_lines(f, out) != CP_OK)
        ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting", s->path);
out_release:
    cp_buf_release(&f->tmp);
    free(f->self_ns);
    cp_strtab_release(&f->paths);
out_free:
    free(f);
    free(tr);
    cp_trace_kinfo_free(k, nk);
    return ret;
}
