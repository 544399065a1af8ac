/* The summary tables of a torch_npu or msprof run, beside its timeline or
 * task table (docs/import.md, "The other files of a run"):
 *
 *   op_statistic.csv      tasks and device time per operator type: the
 *                         import says how many of them its task table holds;
 *   api_statistic.csv     host API calls: the counts the call analyses read
 *                         when the run has no host timeline;
 *   operator_details.csv  framework ops: their call stacks (for findings)
 *                         and host / device self time;
 *   operator_memory.csv   framework ops' allocations: the largest ones;
 *   communication_matrix.json
 *                         bandwidth per link (source rank - destination
 *                         rank, transport): the slow link check;
 *   info.json             the device's core counts and clock (PROF_*).
 *
 * Every table is read by its header names; a table of another version
 * whose columns are not there is skipped and the import says so. The
 * tables' other numeric columns are kept as whole-run counters, one per
 * row key and column: "opstat.<OP Type>.<column>", "apistat.<API
 * Name>.<column>", "opdetail.<Name>.<column>", "opmem.<Name>.<column>"
 * (extra_row: how a repeated key combines; at most EXTRA_ROWS keys). */
#define _GNU_SOURCE /* strcasestr, memmem */
#include "import/import_internal.h"

#include <jansson.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- info.json: the device ------------------------------------------------------------ */

/* base/device_<n>/info.json.<n> */
static bool info_in(const char *base, char *out, size_t n)
{
    char dev[1400];
    return cp_imp_first_entry(base, "device_", NULL, NULL, dev, sizeof dev) && cp_imp_is_dir(dev) &&
           cp_imp_first_entry(dev, "info.json", NULL, ".done", out, n);
}

/* A count in info.json: a number or a string holding one ("1800"). */
static double info_number(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_number(v))
        return json_number_value(v);
    if (json_is_string(v)) {
        char *end = NULL;
        double x = strtod(json_string_value(v), &end);
        if (end != json_string_value(v) && *end == '\0' && isfinite(x))
            return x;
    }
    return NAN;
}

enum cp_status cp_imp_ascend_device(const char *dir, struct cp_imp_device *dev, struct cp_diag *d)
{
    memset(dev, 0, sizeof *dev);
    dev->aic_mhz = NAN;
    /* torch_npu: <run>/PROF_<id>/device_<n>/; msprof: PROF_<id>/device_<n>/
     * beside mindstudio_profiler_output, or under the PROF folder itself */
    char up[1200], prof[1400];
    bool found = false;
    if ((size_t)snprintf(up, sizeof up, "%s/..", dir) < sizeof up) {
        found = cp_imp_first_entry(up, "PROF_", NULL, NULL, prof, sizeof prof) &&
                cp_imp_is_dir(prof) && info_in(prof, dev->path, sizeof dev->path);
        if (!found)
            found = info_in(up, dev->path, sizeof dev->path);
    }
    if (!found)
        found = info_in(dir, dev->path, sizeof dev->path);
    if (!found) {
        dev->path[0] = '\0';
        return CP_OK;
    }
    json_error_t e;
    json_t *j = json_load_file(dev->path, JSON_DISABLE_EOF_CHECK, &e);
    if (!j)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: line %d, column %d (byte %d): %s", dev->path,
                           e.line, e.column, e.position, e.text);
    const json_t *info = json_array_get(json_object_get(j, "DeviceInfo"), 0);
    if (!json_is_object(info)) {
        json_decref(j);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: no DeviceInfo list: not a profiler info.json (its "
                           "DeviceInfo[0] holds ai_core_num, aiv_num and aic_frequency)",
                           dev->path);
    }
    double cores = info_number(info, "ai_core_num"), aiv = info_number(info, "aiv_num");
    dev->aic_mhz = info_number(info, "aic_frequency");
    /* a count that is no count is not one: the check then does not run */
    dev->ai_cores = cores >= 1 && cores <= 4096 && cores == floor(cores) ? (long long)cores : 0;
    dev->aiv_cores = aiv >= 1 && aiv <= 4096 && aiv == floor(aiv) ? (long long)aiv : 0;
    if (!(dev->aic_mhz > 0 && dev->aic_mhz < 1e5))
        dev->aic_mhz = NAN;
    json_decref(j);
    return CP_OK;
}

/* ---- a table beside the imported file --------------------------------------------------- */

/* dir/<name> (torch_npu), else dir/<stem>_*.csv (msprof's timestamped
 * names): "" when neither is there. */
static bool table_path(const char *dir, const char *name, char *out, size_t n)
{
    int k = snprintf(out, n, "%s/%s", dir, name);
    if (k > 0 && (size_t)k < n && cp_path_exists(out))
        return true;
    /* msprof's split files (<stem>_slice_<n>_...): the first slice */
    char stem[64];
    const char *dot = strrchr(name, '.');
    snprintf(stem, sizeof stem, "%.*s_", (int)(dot - name), name);
    return cp_imp_first_entry(dir, stem, dot, NULL, out, n);
}

/* Columns by name, found in the header row. */
struct cols {
    const char *const *names;
    int at[16];
    size_t n;
};

static void find_cols(struct cols *c, const struct cp_imp_row *h)
{
    for (size_t i = 0; i < c->n; i++)
        c->at[i] = cp_imp_column(h, c->names[i]);
}

static bool cell_num(const struct cp_imp_row *r, int col, double *x)
{
    struct cp_imp_val v = cp_imp_cell(r, col);
    return v.s && cp_imp_val_num(&v, x) && isfinite(*x);
}

/* A table's columns that are neither read nor an identity: kept as
 * counters, per row key (an op type, an API, an op name); at most
 * EXTRA_ROWS distinct keys. */
#define EXTRA_ROWS 512
#define EXTRA_COLS 64

static bool extra_column(const struct cols *c, const struct cp_imp_row *h, size_t i)
{
    static const char *const ids[] = {"Device_id",  "Device ID",   "Level",     "Core Type",
                                      "Rank ID",    "Step",        "Type",      "Input Shapes",
                                      "Stream Ptr", "Device Type", "Call Stack"};
    for (size_t k = 0; k < c->n; k++)
        if (c->at[k] == (int)i)
            return false;
    for (size_t k = 0; k < sizeof ids / sizeof *ids; k++)
        if (h->len[i] == strlen(ids[k]) && memcmp(h->f[i], ids[k], h->len[i]) == 0)
            return false;
    /* operator_memory's allocation and release times are instants, not
     * amounts: neither a sum nor a mean of them means anything */
    if (memmem(h->f[i], h->len[i], "Allocation Time(", 16) ||
        memmem(h->f[i], h->len[i], "Release Time(", 13))
        return false;
    return h->len[i] > 0;
}

/* How a repeated row key's cells combine: the statistic tables' rows are
 * one per key (a repeat is averaged); operator_details' are one per call
 * site and operator_memory's one per allocation, whose amounts add up
 * (durations) or, for the allocator's running totals, peak. */
enum extra_mode { EXTRA_MEAN, EXTRA_SUM };

/* A table's reader: its row function and what it needs of the header. */
struct table {
    struct cp_imp_sink *k;
    const char *path;
    struct cols c;
    bool usable; /* the header had what the table is read for */
    /* op_statistic */
    double tasks, total_us;
    /* api_statistic */
    double calls[4];
    /* operator_details */
    struct cp_strmap best_ix; /* op name -> index into ops */
    struct op {
        const char *name, *stack; /* pool */
        double device_us;
    } * ops;
    size_t n_ops, cap_ops;
    double host_self_us, device_self_us;
    size_t rows;
    /* operator_memory */
    struct alloc {
        char name[128];
        double kb, us;
    } top[5];
    size_t n_top;
    double peak_allocated_mb;
    struct cp_imp_pool pool;
    /* the other numeric columns: their headers, the keys kept so far */
    const char *extra[EXTRA_COLS]; /* pool; NULL: not kept */
    bool running[EXTRA_COLS];      /* the allocator's "... Total ...(MB)": a peak */
    size_t extra_rows;
    struct cp_strmap extra_ix; /* the row keys kept (EXTRA_SUM) */
    size_t extra_dropped;      /* rows of keys beyond EXTRA_ROWS */
    double peak[EXTRA_COLS];   /* of the running columns (EXTRA_SUM) */
    bool has_peak[EXTRA_COLS];
};

/* The header's other columns, noted (a table's first row). */
static enum cp_status extra_header(struct table *t, const struct cp_imp_row *h, struct cp_diag *d)
{
    for (size_t i = 0; i < h->n && i < EXTRA_COLS; i++) {
        if (!extra_column(&t->c, h, i))
            continue;
        if (!(t->extra[i] = cp_imp_pool_add(&t->pool, h->f[i], h->len[i])))
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        size_t hl = h->len[i];
        t->running[i] =
            memmem(h->f[i], hl, "Total", 5) && hl > 4 && memcmp(h->f[i] + hl - 4, "(MB)", 4) == 0;
    }
    return CP_OK;
}

/* A row's other numeric cells as counters "<prefix>.<key>.<column>"; a
 * cell that is not a number (N/A, text) is left out. */
static enum cp_status extra_row(struct table *t, const char *prefix, struct cp_imp_val key,
                                const struct cp_imp_row *r, enum extra_mode mode, struct cp_diag *d)
{
    if (!key.s || key.len == 0)
        return CP_OK;
    size_t kl = key.len > 150 ? 150 : key.len;
    if (mode == EXTRA_SUM) {
        if (cp_strmap_get(&t->extra_ix, key.s, kl, -1) < 0) {
            if (t->extra_rows >= EXTRA_ROWS) {
                t->extra_dropped++;
                return CP_OK;
            }
            const char *k = cp_imp_pool_add(&t->pool, key.s, kl);
            if (!k || cp_strmap_add(&t->extra_ix, k, kl, 1, NULL, NULL) != CP_OK)
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            t->extra_rows++;
        }
    } else if (t->extra_rows++ >= EXTRA_ROWS) {
        t->extra_dropped++;
        return CP_OK;
    }
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < r->n && i < EXTRA_COLS; i++) {
        double x;
        if (!t->extra[i] || !cell_num(r, (int)i, &x))
            continue;
        if (mode == EXTRA_SUM && t->running[i]) {
            t->peak[i] = t->has_peak[i] && t->peak[i] > x ? t->peak[i] : x;
            t->has_peak[i] = true;
            continue;
        }
        char name[400];
        snprintf(name, sizeof name, "%s.%.*s.%.150s", prefix, (int)kl, key.s, t->extra[i]);
        st = cp_imp_sink_acc(t->k, -1, name, x, 1, mode == EXTRA_SUM, d);
    }
    return st;
}

/* After the rows: the running totals' (the allocator's "... Total ...(MB)")
 * peaks ("<prefix>.peak.<column>")
 * and, when keys were dropped, how many rows (meta skipped.<prefix>_rows). */
static enum cp_status extra_done(struct table *t, const char *prefix, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < EXTRA_COLS; i++)
        if (t->has_peak[i]) {
            char name[300];
            snprintf(name, sizeof name, "%s.peak.%.150s", prefix, t->extra[i]);
            st = cp_imp_sink_counter(t->k, -1, name, t->peak[i], 0, d);
        }
    if (st == CP_OK && t->extra_dropped) {
        char key[96], text[160];
        snprintf(key, sizeof key, "skipped.%s_rows", prefix);
        snprintf(text, sizeof text,
                 "%zu rows beyond the first %d keys: their other columns are not kept as counters",
                 t->extra_dropped, EXTRA_ROWS);
        st = cp_imp_sink_meta(t->k, key, text, d);
    }
    return st;
}

/* ---- op_statistic.csv --------------------------------------------------------------------- */

static const char *const OPSTAT[] = {"OP Type", "Count", "Total Time(us)"};

static enum cp_status opstat_row(void *u, const struct cp_imp_row *r, struct cp_diag *d)
{
    struct table *t = u;
    if (r->number == 1) {
        find_cols(&t->c, r);
        t->usable = t->c.at[1] >= 0 && t->c.at[2] >= 0;
        return t->usable ? extra_header(t, r, d) : CP_OK;
    }
    if (t->usable) {
        enum cp_status st = extra_row(t, "opstat", cp_imp_cell(r, t->c.at[0]), r, EXTRA_MEAN, d);
        if (st != CP_OK)
            return st;
    }
    double count, us;
    if (t->usable && cell_num(r, t->c.at[1], &count) && cell_num(r, t->c.at[2], &us) &&
        count >= 0 && us >= 0) {
        t->tasks += count;
        t->total_us += us;
        t->rows++;
    }
    return CP_OK;
}

/* ---- api_statistic.csv -------------------------------------------------------------------- */

static const char *const APISTAT[] = {"Level", "API Name", "Time(us)", "Count"};
static const char *const APISTAT_COUNTERS[4] = {"apistat.compile_calls", "apistat.sync_calls",
                                                "apistat.launch_calls", "apistat.memory_us"};

static enum cp_status apistat_row(void *u, const struct cp_imp_row *r, struct cp_diag *d)
{
    struct table *t = u;
    if (r->number == 1) {
        find_cols(&t->c, r);
        t->usable = t->c.at[1] >= 0 && t->c.at[2] >= 0 && t->c.at[3] >= 0;
        return t->usable ? extra_header(t, r, d) : CP_OK;
    }
    if (t->usable) {
        enum cp_status st = extra_row(t, "apistat", cp_imp_cell(r, t->c.at[1]), r, EXTRA_MEAN, d);
        if (st != CP_OK)
            return st;
    }
    struct cp_imp_val level = cp_imp_cell(r, t->c.at[0]), api = cp_imp_cell(r, t->c.at[1]);
    double us, count;
    if (!t->usable || !api.s || !cell_num(r, t->c.at[2], &us) || !cell_num(r, t->c.at[3], &count))
        return CP_OK;
    /* the timeline's spelling, "<level>@<api>", for one classification */
    char name[300];
    int n = snprintf(name, sizeof name, "%.*s@%.*s",
                     level.s ? (int)(level.len > 40 ? 40 : level.len) : 0, level.s ? level.s : "",
                     (int)(api.len > 200 ? 200 : api.len), api.s);
    if (n < 0)
        return CP_OK;
    enum cp_imp_api kind = cp_imp_api_kind(name, (size_t)n, CP_LAYER_RUNTIME);
    if (kind == CP_IMP_API_COMPILE)
        t->calls[0] += count;
    else if (kind == CP_IMP_API_SYNC)
        t->calls[1] += count;
    else if (kind == CP_IMP_API_LAUNCH)
        t->calls[2] += count;
    else if (kind == CP_IMP_API_MEMORY)
        t->calls[3] += us;
    t->rows++;
    return CP_OK;
}

/* ---- operator_details.csv ----------------------------------------------------------------- */

static const char *const OPDETAILS[] = {"Name", "Call Stack", "Host Self Duration(us)",
                                        "Device Self Duration(us)"};

static enum cp_status opdetails_row(void *u, const struct cp_imp_row *r, struct cp_diag *d)
{
    struct table *t = u;
    if (r->number == 1) {
        find_cols(&t->c, r);
        t->usable = t->c.at[0] >= 0;
        return t->usable ? extra_header(t, r, d) : CP_OK;
    }
    struct cp_imp_val name = cp_imp_cell(r, t->c.at[0]), stack = cp_imp_cell(r, t->c.at[1]);
    if (!t->usable || !name.s)
        return CP_OK;
    enum cp_status est = extra_row(t, "opdetail", name, r, EXTRA_SUM, d);
    if (est != CP_OK)
        return est;
    double host = 0, dev = 0;
    if (cell_num(r, t->c.at[2], &host) && host > 0)
        t->host_self_us += host;
    if (cell_num(r, t->c.at[3], &dev) && dev > 0)
        t->device_self_us += dev;
    t->rows++;
    if (!stack.s)
        return CP_OK;
    /* one stack per op name: the call site with the most device time */
    size_t nl = name.len > 180 ? 180 : name.len;
    int64_t at = cp_strmap_get(&t->best_ix, name.s, nl, -1);
    if (at >= 0 && t->ops[at].device_us >= dev)
        return CP_OK;
    const char *st = cp_imp_pool_add(&t->pool, stack.s, stack.len);
    if (!st)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (at >= 0) {
        t->ops[at].stack = st;
        t->ops[at].device_us = dev;
        return CP_OK;
    }
    struct op *g = cp_imp_grow(t->ops, t->n_ops, &t->cap_ops, sizeof *g, 64);
    const char *nm = g ? cp_imp_pool_add(&t->pool, name.s, nl) : NULL;
    if (g)
        t->ops = g;
    if (!nm || cp_strmap_add(&t->best_ix, nm, nl, (int64_t)t->n_ops, NULL, NULL) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    t->ops[t->n_ops++] = (struct op){nm, st, dev};
    return CP_OK;
}

/* ---- operator_memory.csv ------------------------------------------------------------------ */

static const char *const OPMEM[] = {"Name", "Size(KB)", "Duration(us)",
                                    "Allocation Total Allocated(MB)"};

static enum cp_status opmem_row(void *u, const struct cp_imp_row *r, struct cp_diag *d)
{
    struct table *t = u;
    if (r->number == 1) {
        find_cols(&t->c, r);
        t->usable = t->c.at[0] >= 0 && t->c.at[1] >= 0;
        return t->usable ? extra_header(t, r, d) : CP_OK;
    }
    struct cp_imp_val name = cp_imp_cell(r, t->c.at[0]);
    double kb, us = NAN, mb;
    if (!t->usable || !name.s || !cell_num(r, t->c.at[1], &kb) || kb <= 0)
        return CP_OK;
    enum cp_status est = extra_row(t, "opmem", name, r, EXTRA_SUM, d);
    if (est != CP_OK)
        return est;
    t->rows++;
    (void)cell_num(r, t->c.at[2], &us);
    if (cell_num(r, t->c.at[3], &mb) && mb > t->peak_allocated_mb)
        t->peak_allocated_mb = mb;
    /* the five largest allocations, largest first */
    size_t cap = sizeof t->top / sizeof *t->top;
    size_t i = t->n_top < cap ? t->n_top : cap;
    if (i == cap && kb <= t->top[cap - 1].kb)
        return CP_OK;
    if (i == cap)
        i--;
    while (i > 0 && t->top[i - 1].kb < kb) {
        t->top[i] = t->top[i - 1];
        i--;
    }
    snprintf(t->top[i].name, sizeof t->top[i].name, "%.*s", (int)(name.len > 120 ? 120 : name.len),
             name.s);
    t->top[i].kb = kb;
    t->top[i].us = us;
    if (t->n_top < cap)
        t->n_top++;
    return CP_OK;
}

/* ---- reading them ------------------------------------------------------------------------- */

static void table_release(struct table *t)
{
    free(t->ops);
    cp_strmap_release(&t->best_ix);
    cp_strmap_release(&t->extra_ix);
    cp_imp_pool_release(&t->pool);
}

static enum cp_status read_table(struct cp_imp_sink *k, const char *path, const char *const *names,
                                 size_t n, cp_imp_row_fn fn, struct table *t, struct cp_diag *d)
{
    memset(t, 0, sizeof *t);
    t->k = k;
    t->path = path;
    t->c.names = names;
    t->c.n = n;
    cp_strmap_init(&t->best_ix);
    cp_strmap_init(&t->extra_ix);
    uint64_t bytes = 0;
    enum cp_status st = cp_imp_read_csv(path, fn, t, &bytes, d);
    if (st == CP_OK)
        k->r->bytes += bytes;
    return st;
}

/* A table whose header lacks what it is read for: skipped, and said. */
static enum cp_status skipped_table(struct cp_imp_sink *k, const char *name, const char *path,
                                    struct cp_diag *d)
{
    char key[96];
    snprintf(key, sizeof key, "skipped.%s", name);
    return cp_imp_sink_meta(k, key, path, d);
}

static enum cp_status op_statistic(struct cp_imp_sink *k, const char *path, struct cp_diag *d)
{
    struct table t;
    enum cp_status st = read_table(k, path, OPSTAT, 3, opstat_row, &t, d);
    if (st == CP_OK && !t.usable)
        st = skipped_table(k, "op_statistic", path, d);
    else if (st == CP_OK) {
        st = cp_imp_sink_counter(k, -1, "opstat.tasks", t.tasks, 0, d);
        if (st == CP_OK)
            st = cp_imp_sink_counter(k, -1, "opstat.total_us", t.total_us, 0, d);
        if (st == CP_OK)
            st = extra_done(&t, "opstat", d);
        if (st == CP_OK)
            st = cp_imp_sink_meta(k, "op_statistic", path, d);
        k->r->table_tasks = t.tasks;
    }
    table_release(&t);
    return st;
}

static enum cp_status api_statistic(struct cp_imp_sink *k, const char *path, struct cp_diag *d)
{
    struct table t;
    enum cp_status st = read_table(k, path, APISTAT, 4, apistat_row, &t, d);
    if (st == CP_OK && !t.usable)
        st = skipped_table(k, "api_statistic", path, d);
    for (int i = 0; st == CP_OK && t.usable && i < 4; i++)
        st = cp_imp_sink_counter(k, -1, APISTAT_COUNTERS[i], t.calls[i], 0, d);
    if (st == CP_OK && t.usable)
        st = extra_done(&t, "apistat", d);
    if (st == CP_OK && t.usable)
        st = cp_imp_sink_meta(k, "api_statistic", path, d);
    table_release(&t);
    return st;
}

static enum cp_status operator_details(struct cp_imp_sink *k, const char *path, struct cp_diag *d)
{
    struct table t;
    enum cp_status st = read_table(k, path, OPDETAILS, 4, opdetails_row, &t, d);
    if (st == CP_OK && !t.usable)
        st = skipped_table(k, "operator_details", path, d);
    else if (st == CP_OK) {
        st = cp_imp_sink_counter(k, -1, "framework.ops", (double)t.rows, 0, d);
        if (st == CP_OK)
            st = cp_imp_sink_counter(k, -1, "framework.host_self_us", t.host_self_us, 0, d);
        if (st == CP_OK)
            st = cp_imp_sink_counter(k, -1, "framework.device_self_us", t.device_self_us, 0, d);
        /* findings show these for the ops they name, as they do a
         * timeline's stacks */
        for (size_t i = 0; st == CP_OK && i < t.n_ops; i++) {
            char key[200];
            snprintf(key, sizeof key, "stack.%s", t.ops[i].name);
            st = cp_imp_sink_meta(k, key, t.ops[i].stack, d);
        }
        if (st == CP_OK)
            st = extra_done(&t, "opdetail", d);
        if (st == CP_OK)
            st = cp_imp_sink_meta(k, "operator_details", path, d);
    }
    table_release(&t);
    return st;
}

static enum cp_status operator_memory(struct cp_imp_sink *k, const char *path, struct cp_diag *d)
{
    struct table t;
    enum cp_status st = read_table(k, path, OPMEM, 4, opmem_row, &t, d);
    if (st == CP_OK && !t.usable) {
        st = skipped_table(k, "operator_memory", path, d);
    } else if (st == CP_OK) {
        json_t *top = json_array();
        for (size_t i = 0; top && i < t.n_top; i++) {
            json_t *o = json_object();
            json_object_set_new(o, "name", json_string(t.top[i].name));
            json_object_set_new(o, "size_kb", json_real(t.top[i].kb));
            if (isfinite(t.top[i].us))
                json_object_set_new(o, "duration_us", json_real(t.top[i].us));
            json_array_append_new(top, o);
        }
        char *text = top ? json_dumps(top, JSON_COMPACT) : NULL;
        json_decref(top);
        if (!text)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        if (st == CP_OK)
            st = cp_imp_sink_meta(k, "memory.largest_allocations", text, d);
        free(text);
        if (st == CP_OK)
            st = cp_imp_sink_counter(k, -1, "memory.op_allocations", (double)t.rows, 0, d);
        if (st == CP_OK && t.peak_allocated_mb > 0)
            st = cp_imp_sink_counter(k, -1, "memory.op_peak_allocated_mb", t.peak_allocated_mb, 0,
                                     d);
        if (st == CP_OK)
            st = extra_done(&t, "opmem", d);
        if (st == CP_OK)
            st = cp_imp_sink_meta(k, "operator_memory", path, d);
    }
    table_release(&t);
    return st;
}

/* ---- communication_matrix.json -------------------------------------------------------------- */

struct link {
    char key[96]; /* "<src>-<dst>.<transport>" */
    double mb, ms;
};

struct links {
    struct link *v;
    size_t n, cap;
};

static enum cp_status add_link(struct links *l, const char *pair, const char *transport, double mb,
                               double ms, struct cp_diag *d)
{
    char key[96];
    int n = snprintf(key, sizeof key, "%s.%s", pair, transport);
    if (n < 0 || (size_t)n >= sizeof key)
        return CP_OK;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0) {
            l->v[i].mb += mb;
            l->v[i].ms += ms;
            return CP_OK;
        }
    struct link *g = cp_imp_grow(l->v, l->n, &l->cap, sizeof *g, 16);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    l->v = g;
    snprintf(l->v[l->n].key, sizeof l->v[l->n].key, "%s", key);
    l->v[l->n].mb = mb;
    l->v[l->n].ms = ms;
    l->n++;
    return CP_OK;
}

/* The links of one op ("<src>-<dst>": {...}). */
static enum cp_status op_links(struct links *l, const json_t *op, struct cp_diag *d)
{
    const char *pair;
    json_t *v;
    enum cp_status st = CP_OK;
    json_object_foreach((json_t *)op, pair, v)
    {
        const char *transport = json_string_value(json_object_get(v, "Transport Type"));
        const json_t *mb = json_object_get(v, "Transit Size(MB)"),
                     *ms = json_object_get(v, "Transit Time(ms)");
        if (!transport || strcmp(transport, "LOCAL") == 0 || !json_is_number(mb) ||
            !json_is_number(ms) || !strchr(pair, '-') || strlen(pair) > 40 ||
            strlen(transport) > 16)
            continue;
        double x = json_number_value(mb), t = json_number_value(ms);
        if (!(x >= 0) || !(t >= 0) || !isfinite(x) || !isfinite(t))
            continue;
        if ((st = add_link(l, pair, transport, x, t, d)) != CP_OK)
            break;
    }
    return st;
}

/* Each link's bandwidth over the profile, as run counters
 * comm.link.<src>-<dst>.<transport>.gbps. An op key "<algo>-total@<hash>"
 * sums the others of its algorithm; when an algorithm has one, only it is
 * read. */
static enum cp_status comm_matrix(struct cp_imp_sink *k, const char *path, struct cp_diag *d)
{
    json_error_t e;
    json_t *j = json_load_file(path, JSON_DISABLE_EOF_CHECK, &e);
    if (!j)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: line %d, column %d (byte %d): %s", path, e.line,
                           e.column, e.position, e.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return cp_diag_set(d, CP_ERR_INVALID, "%s: not an object of steps (\"step<N>\": ...)",
                           path);
    }
    struct links l = {0};
    enum cp_status st = CP_OK;
    const char *step_key, *kind_key, *op_key;
    json_t *step, *kind, *op;
    json_object_foreach(j, step_key, step)
    {
        json_object_foreach(step, kind_key, kind)
        {
            bool totals = false;
            json_object_foreach(kind, op_key, op) totals = totals || strstr(op_key, "-total@");
            json_object_foreach(kind, op_key, op)
            {
                if (st == CP_OK && (!totals || strstr(op_key, "-total@")))
                    st = op_links(&l, op, d);
            }
        }
    }
    json_decref(j);
    double slow = INFINITY;
    const char *slow_key = NULL;
    for (size_t i = 0; st == CP_OK && i < l.n; i++) {
        if (!(l.v[i].ms > 0))
            continue;
        double gbps = l.v[i].mb / l.v[i].ms; /* MB/ms = GB/s */
        char name[140];
        snprintf(name, sizeof name, "comm.link.%s.gbps", l.v[i].key);
        st = cp_imp_sink_counter(k, -1, name, gbps, 0, d);
        if (gbps < slow) {
            slow = gbps;
            slow_key = l.v[i].key;
        }
    }
    char text[160];
    if (st == CP_OK && slow_key) {
        snprintf(text, sizeof text, "%s at %.3g GB/s", slow_key, slow);
        st = cp_imp_sink_meta(k, "slowest_link", text, d);
        snprintf(k->r->slowest_link, sizeof k->r->slowest_link, "%s", text);
    }
    if (st == CP_OK)
        st = cp_imp_sink_meta(k, "communication_matrix", path, d);
    free(l.v);
    return st;
}

/* ---- all of them ------------------------------------------------------------------------------
 */

enum cp_status cp_imp_ascend_tables(struct cp_imp_sink *k, const char *dir, struct cp_diag *d)
{
    static const struct {
        const char *file;
        enum cp_status (*read)(struct cp_imp_sink *, const char *, struct cp_diag *);
    } TABLES[] = {
        {"op_statistic.csv", op_statistic},         {"api_statistic.csv", api_statistic},
        {"operator_details.csv", operator_details}, {"operator_memory.csv", operator_memory},
        {"communication_matrix.json", comm_matrix},
    };
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < sizeof TABLES / sizeof *TABLES; i++) {
        char path[1300];
        if (table_path(dir, TABLES[i].file, path, sizeof path) &&
            (st = TABLES[i].read(k, path, d)) == CP_OK)
            cp_imp_note_extra(k->r, path);
    }
    struct cp_imp_device dev;
    if (st == CP_OK)
        st = cp_imp_ascend_device(dir, &dev, d);
    if (st == CP_OK && dev.path[0]) {
        if (dev.ai_cores > 0)
            st = cp_imp_sink_counter(k, -1, "device.ai_core_num", (double)dev.ai_cores, 0, d);
        if (st == CP_OK && dev.aiv_cores > 0)
            st = cp_imp_sink_counter(k, -1, "device.aiv_num", (double)dev.aiv_cores, 0, d);
        if (st == CP_OK && isfinite(dev.aic_mhz))
            st = cp_imp_sink_counter(k, -1, "device.aic_frequency_mhz", dev.aic_mhz, 0, d);
        if (st == CP_OK)
            st = cp_imp_sink_meta(k, "device_info", dev.path, d);
        cp_imp_note_extra(k->r, dev.path);
    }
    return st;
}
