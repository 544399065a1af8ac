/* torch_npu's kernel_details.csv and msprof's op_summary_*.csv: one row
 * per device task, read with libcsv (quoting, doubled quotes, CRLF and
 * fields spanning lines are its business) over zlib. Columns are found by
 * their header names, never their positions (docs/import.md lists the
 * aliases); every other numeric column is kept as a counter per step.
 *
 * Two passes, as for the JSON dialects: the first finds the earliest start
 * and the steps, the second writes. The steps' lengths come from
 * step_trace_time.csv beside the file when there is one (Computing +
 * Communication(Not Overlapped) + Free, which is the step by the file's own
 * definition), else from the span of each step's tasks. */
#define _GNU_SOURCE /* memmem */
#include "import/import_internal.h"
#include "trace/query.h"

#include <csv.h>
#include <zlib.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK (1 << 20)

/* ---- rows ------------------------------------------------------------------------ */

struct csv_state {
    char *buf; /* the row's fields, back to back */
    size_t used, cap;
    size_t *off, *len;
    size_t n, cap_f;
    const char **ptr;
    uint64_t rows;
    cp_imp_row_fn fn;
    void *u;
    struct cp_diag *d;
    enum cp_status st;
    bool oom;
};

static void on_field(void *s, size_t len, void *data)
{
    struct csv_state *c = data;
    if (c->st != CP_OK || c->oom)
        return;
    if (c->n == c->cap_f) {
        size_t nc = c->cap_f ? c->cap_f * 2 : 64;
        size_t *o = cp_realloc_array(c->off, nc, sizeof *o);
        if (o)
            c->off = o;
        size_t *l = o ? cp_realloc_array(c->len, nc, sizeof *l) : NULL;
        if (l)
            c->len = l;
        const char **p = l ? cp_realloc_array(c->ptr, nc, sizeof *p) : NULL;
        if (!o || !l || !p) {
            c->oom = true;
            return;
        }
        c->ptr = p;
        c->cap_f = nc;
    }
    if (c->used + len + 1 > c->cap) {
        size_t nc = c->cap ? c->cap : 4096;
        while (nc < c->used + len + 1)
            nc *= 2;
        char *b = realloc(c->buf, nc);
        if (!b) {
            c->oom = true;
            return;
        }
        c->buf = b;
        c->cap = nc;
    }
    if (len)
        memcpy(c->buf + c->used, s, len);
    c->buf[c->used + len] = '\0';
    c->off[c->n] = c->used;
    c->len[c->n] = len;
    c->n++;
    c->used += len + 1;
}

static void on_row(int ch, void *data)
{
    (void)ch;
    struct csv_state *c = data;
    if (c->st == CP_OK && !c->oom) {
        for (size_t i = 0; i < c->n; i++)
            c->ptr[i] = c->buf + c->off[i];
        struct cp_imp_row r = {c->ptr, c->len, c->n, ++c->rows};
        c->st = c->fn(c->u, &r, c->d);
    }
    c->n = 0;
    c->used = 0;
}

/* Call fn for every row of the file, the header first. */
enum cp_status cp_imp_read_csv(const char *path, cp_imp_row_fn fn, void *u, uint64_t *bytes,
                               struct cp_diag *d)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    gzbuffer(gz, CHUNK);
    char *chunk = malloc(CHUNK);
    struct csv_parser p;
    struct csv_state c = {.fn = fn, .u = u, .d = d};
    enum cp_status st = CP_OK;
    if (!chunk || csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
        free(chunk);
        gzclose(gz);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    }
    uint64_t total = 0;
    for (;;) {
        int got = gzread(gz, chunk, CHUNK);
        if (got < 0) {
            int zerr = 0;
            const char *m = gzerror(gz, &zerr);
            st = cp_diag_set(d, zerr == Z_DATA_ERROR ? CP_ERR_INVALID : CP_ERR_IO,
                             "%s: after %llu bytes: %s", path, (unsigned long long)total,
                             m ? m : "read error");
            break;
        }
        if (got == 0)
            break;
        size_t done = csv_parse(&p, chunk, (size_t)got, on_field, on_row, &c);
        if (c.st != CP_OK) {
            st = c.st;
            break;
        }
        if (c.oom) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        if (done != (size_t)got) {
            st = cp_diag_set(d, CP_ERR_INVALID, "%s: byte %llu, row %llu: malformed CSV (%s)", path,
                             (unsigned long long)(total + done), (unsigned long long)c.rows + 1,
                             csv_strerror(csv_error(&p)));
            break;
        }
        total += (uint64_t)got;
    }
    if (st == CP_OK && csv_fini(&p, on_field, on_row, &c) != 0)
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: the file ends inside a quoted field (row %llu): a truncated file",
                         path, (unsigned long long)c.rows + 1);
    if (st == CP_OK && c.st != CP_OK)
        st = c.st;
    if (st == CP_OK && c.oom)
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    csv_free(&p);
    gzclose(gz);
    free(chunk);
    free(c.buf);
    free(c.off);
    free(c.len);
    free(c.ptr);
    *bytes = total;
    return st;
}

/* ---- columns ---------------------------------------------------------------------- */

enum col { C_NAME, C_TYPE, C_CORE, C_START, C_DUR, C_STEP, C_STATE, C_STREAM, C_N };

/* Header names by version (docs/import.md): torch_npu's, then msprof's. */
static const char *const ALIASES[C_N][3] = {
    [C_NAME] = {"Name", "Op Name", "kernel_name"},
    [C_TYPE] = {"Type", "OP Type", NULL},
    [C_CORE] = {"Accelerator Core", "Task Type", "kernel_type"},
    [C_START] = {"Start Time(us)", "Task Start Time(us)", "task_start(us)"},
    [C_DUR] = {"Duration(us)", "Task Duration(us)", "task_time(us)"},
    [C_STEP] = {"Step Id", NULL, NULL},
    [C_STATE] = {"OP State", NULL, NULL},
    [C_STREAM] = {"Stream ID", "Stream Id", "stream_id"},
};

/* Columns that name or number things rather than measure them. */
static bool identity_column(const char *h)
{
    static const char *const ids[] = {"Device_id",  "Model ID", "Task ID",    "Stream ID",
                                      "Stream Id",  "Task Id",  "Context ID", "Infer ID",
                                      "Model Name", "task_id",  "stream_id",  "task_stop(us)"};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        if (strcmp(h, ids[i]) == 0)
            return true;
    return false;
}

struct cp_imp_val cp_imp_cell(const struct cp_imp_row *r, int i)
{
    struct cp_imp_val v = {NULL, 0, false};
    if (i < 0 || (size_t)i >= r->n)
        return v;
    v.s = r->f[i];
    v.len = r->len[i];
    while (v.len && (v.s[0] == ' ' || v.s[0] == '\t')) {
        v.s++;
        v.len--;
    }
    while (v.len && (v.s[v.len - 1] == ' ' || v.s[v.len - 1] == '\t' || v.s[v.len - 1] == '\r'))
        v.len--;
    if (v.len == 0 || (v.len == 3 && memcmp(v.s, "N/A", 3) == 0))
        v.s = NULL;
    return v;
}

int cp_imp_column(const struct cp_imp_row *header, const char *name)
{
    for (size_t i = 0; i < header->n; i++) {
        const char *h = header->f[i];
        if (i == 0 && strncmp(h, "\xef\xbb\xbf", 3) == 0)
            h += 3;
        if (strcmp(h, name) == 0)
            return (int)i;
    }
    return -1;
}

/* The pipe ratios msprof-analyze's "no bound" check reads: a task longer
 * than NO_BOUND_MIN_US none of whose pipes is busy more than NO_BOUND_RATIO
 * of its cycles is bound by nothing (latency, scalar code, sync). */
enum pipe { MAC, SCALAR, MTE1, MTE2, FIXPIPE, VEC, VSCALAR, VMTE2, VMTE3, N_PIPES };
static const char *const PIPE_RATIOS[N_PIPES] = {
    [MAC] = "aic_mac_ratio",        [SCALAR] = "aic_scalar_ratio",   [MTE1] = "aic_mte1_ratio",
    [MTE2] = "aic_mte2_ratio",      [FIXPIPE] = "aic_fixpipe_ratio", [VEC] = "aiv_vec_ratio",
    [VSCALAR] = "aiv_scalar_ratio", [VMTE2] = "aiv_mte2_ratio",      [VMTE3] = "aiv_mte3_ratio"};
#define NO_BOUND_MIN_US 20.0
#define NO_BOUND_RATIO  0.8

struct step_span {
    char id[32];
    int64_t start, end;
    double length_us; /* from step_trace_time.csv; NaN: none */
};

struct csv_import {
    const char *path;
    int col[C_N];
    char **header;
    char **col_name; /* "col.<header>": the counter of a numeric column */
    size_t n_header;
    bool counter_col[512];
    /* pass 1 */
    int64_t min_start, max_end;
    bool have_start;
    struct step_span *steps;
    size_t n_steps, cap_steps;
    struct cp_imp_pool pool;
    struct cp_strmap step_ix; /* step id text -> index */
    /* pass 2 */
    struct cp_imp_sink *k;
    struct cp_import_result *res;
    struct cp_strmap acc_ix;
    struct {
        int32_t it;
        const char *name;
        double sum, w;
    } * acc;
    size_t n_acc, cap_acc;
    size_t rows_skipped;
    /* attached to a timeline's run (cp_imp_ascend_csv_counters): only the
     * counters are written, each row in the timeline's step of its number */
    bool attach;
    struct cp_trace_point *tl_steps; /* iteration -> step.number */
    size_t n_tl;
    /* the device's core counts (info.json), for the block dim check */
    struct cp_imp_device dev;
    int col_block, col_mix_block, col_shapes;
    int col_pipe[N_PIPES];
    struct cp_imp_fusible fus; /* the task chains worth fusing */
};

static enum cp_status header_row(struct csv_import *c, const struct cp_imp_row *r,
                                 struct cp_diag *d)
{
    for (int i = 0; i < C_N; i++)
        c->col[i] = -1;
    c->header = cp_calloc(r->n ? r->n : 1, sizeof *c->header);
    c->col_name = cp_calloc(r->n ? r->n : 1, sizeof *c->col_name);
    if (!c->header || !c->col_name)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    c->n_header = r->n;
    for (size_t i = 0; i < r->n; i++) {
        struct cp_imp_val v = {r->f[i], r->len[i], false};
        /* a UTF-8 byte order mark on the first name */
        if (i == 0 && v.len >= 3 && memcmp(v.s, "\xef\xbb\xbf", 3) == 0) {
            v.s += 3;
            v.len -= 3;
        }
        const char *h = cp_imp_pool_add(&c->pool, v.s, v.len);
        if (!h)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        c->header[i] = (char *)h;
        char cn[300];
        snprintf(cn, sizeof cn, "col.%s", h);
        if (!(c->col_name[i] = (char *)cp_imp_pool_add(&c->pool, cn, strlen(cn))))
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        bool known = false;
        for (int k = 0; k < C_N; k++)
            for (int a = 0; a < 3 && ALIASES[k][a]; a++)
                if (strcmp(h, ALIASES[k][a]) == 0 && c->col[k] < 0) {
                    c->col[k] = (int)i;
                    known = true;
                }
        if (i < sizeof c->counter_col)
            c->counter_col[i] = !known && !identity_column(h);
    }
    c->col_block = cp_imp_column(r, "Block Dim");
    if (c->col_block < 0)
        c->col_block = cp_imp_column(r, "Block Num");
    c->col_mix_block = cp_imp_column(r, "Mix Block Dim");
    if (c->col_mix_block < 0)
        c->col_mix_block = cp_imp_column(r, "Mix Block Num");
    for (size_t p = 0; p < N_PIPES; p++)
        c->col_pipe[p] = cp_imp_column(r, PIPE_RATIOS[p]);
    c->col_shapes = cp_imp_column(r, "Input Shapes");
    if (c->col[C_NAME] < 0 || c->col[C_START] < 0 || c->col[C_DUR] < 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: row 1: not a kernel_details / op_summary header: it lacks %s",
                           c->path,
                           c->col[C_NAME] < 0    ? "Name (or Op Name)"
                           : c->col[C_START] < 0 ? "Start Time(us) (or Task Start Time(us))"
                                                 : "Duration(us) (or Task Duration(us))");
    return CP_OK;
}

static enum cp_status step_of_row(struct csv_import *c, const struct cp_imp_row *r, int64_t start,
                                  int64_t end, bool add, int32_t *it, struct cp_diag *d)
{
    struct cp_imp_val s = cp_imp_cell(r, c->col[C_STEP]);
    *it = c->col[C_STEP] < 0 ? 0 : -1; /* no Step Id column: one window */
    if (!s.s)
        return CP_OK;
    int64_t at = cp_strmap_get(&c->step_ix, s.s, s.len, -1);
    if (at < 0) {
        if (!add)
            return CP_OK;
        if (s.len >= sizeof c->steps[0].id)
            return CP_OK;
        struct step_span *g = cp_imp_grow(c->steps, c->n_steps, &c->cap_steps, sizeof *g, 32);
        if (!g)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        c->steps = g;
        struct step_span *sp = &c->steps[c->n_steps];
        memcpy(sp->id, s.s, s.len);
        sp->id[s.len] = '\0';
        sp->start = start;
        sp->end = end;
        sp->length_us = NAN;
        /* the map's key is a copy in the pool: c->steps moves as it grows */
        const char *key = cp_imp_pool_add(&c->pool, s.s, s.len);
        if (!key ||
            cp_strmap_add(&c->step_ix, key, s.len, (int64_t)c->n_steps, NULL, NULL) != CP_OK)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        at = (int64_t)c->n_steps++;
    } else if (add) {
        struct step_span *sp = &c->steps[at];
        if (start < sp->start)
            sp->start = start;
        if (end > sp->end)
            sp->end = end;
    }
    *it = (int32_t)at;
    return CP_OK;
}

/* A row's start and duration in ns; false when either is unusable. */
static bool row_times(const struct csv_import *c, const struct cp_imp_row *r, int64_t *start,
                      int64_t *dur)
{
    struct cp_imp_val s = cp_imp_cell(r, c->col[C_START]), u = cp_imp_cell(r, c->col[C_DUR]);
    return s.s && u.s && cp_imp_us_to_ns(&s, start) && cp_imp_us_to_ns(&u, dur);
}

static enum cp_status scan_row(void *u, const struct cp_imp_row *r, struct cp_diag *d)
{
    struct csv_import *c = u;
    if (r->number == 1)
        return header_row(c, r, d);
    int64_t start, dur;
    if (!row_times(c, r, &start, &dur))
        return CP_OK;
    if (!c->have_start || start < c->min_start)
        c->min_start = start;
    if (!c->have_start || start + dur > c->max_end)
        c->max_end = start + dur;
    c->have_start = true;
    int32_t it;
    return step_of_row(c, r, start, start + (dur > 0 ? dur : 0), true, &it, d);
}

/* The task as a device event of its kernel. */
static enum cp_status write_task(struct csv_import *c, const struct cp_imp_row *r, int64_t start,
                                 int64_t dur, int32_t it, struct cp_diag *d)
{
    struct cp_imp_val name = cp_imp_cell(r, c->col[C_NAME]), type = cp_imp_cell(r, c->col[C_TYPE]),
                      core = cp_imp_cell(r, c->col[C_CORE]);
    char op[200], impl[100];
    snprintf(op, sizeof op, "%.*s", type.s ? (int)type.len : 6, type.s ? type.s : "Kernel");
    snprintf(impl, sizeof impl, "%.*s", core.s ? (int)core.len : 0, core.s ? core.s : "");
    int32_t kernel;
    enum cp_status st = cp_imp_sink_kernel(c->k, name.s ? name.s : "?", name.s ? name.len : 1, op,
                                           impl[0] ? impl : NULL, NULL, &kernel, d);
    struct cp_imp_val stream = cp_imp_cell(r, c->col[C_STREAM]);
    struct cp_imp_val dev = {"device", 6, false};
    int thread = 0;
    if (st == CP_OK)
        st = cp_imp_sink_thread(c->k, &dev, &stream, &thread, d);
    uint64_t rel = (uint64_t)(start - c->min_start);
    if (st == CP_OK)
        st = cp_imp_sink_event(c->k, CP_LAYER_DEVICE, name.s ? name.s : "?", name.s ? name.len : 1,
                               kernel, it, rel, rel + (uint64_t)dur, thread, d);
    return st;
}

/* Attached: the timeline's iteration whose step number is the row's Step
 * Id; -1 when it has none (outside the profiled steps); 0 when the
 * timeline is one window. */
static enum cp_status timeline_step(const struct csv_import *c, const struct cp_imp_row *r,
                                    int32_t *it)
{
    *it = c->n_tl ? -1 : 0;
    struct cp_imp_val s = cp_imp_cell(r, c->col[C_STEP]);
    double x;
    if (!c->n_tl || !s.s || !cp_imp_val_num(&s, &x))
        return CP_OK;
    for (size_t i = 0; i < c->n_tl; i++)
        if (c->tl_steps[i].value == x && c->tl_steps[i].iteration <= INT32_MAX) {
            *it = (int32_t)c->tl_steps[i].iteration;
            break;
        }
    return CP_OK;
}

/* A cell as a whole number >= 0; -1 otherwise. */
static long long cell_count(const struct cp_imp_row *r, int col)
{
    struct cp_imp_val v = cp_imp_cell(r, col);
    double x;
    if (!v.s || !cp_imp_val_num(&v, &x) || !(x >= 0) || x > 1e12 || x != floor(x))
        return -1;
    return (long long)x;
}

/* The row's pipe ratios, read once for the checks below; NaN for a
 * ratio the profile does not have. */
static void pipe_ratios(const struct csv_import *c, const struct cp_imp_row *r,
                        double ratio[N_PIPES])
{
    for (size_t p = 0; p < N_PIPES; p++) {
        struct cp_imp_val v = cp_imp_cell(r, c->col_pipe[p]);
        double x;
        ratio[p] = v.s && cp_imp_val_num(&v, &x) && isfinite(x) ? x : NAN;
    }
}

static bool val_has(const struct cp_imp_val *v, const char *s)
{
    return v->s && memmem(v->s, v->len, s, strlen(s)) != NULL;
}

/* The dims of input `which` of an "Input Shapes" cell ("8,512;512,512",
 * quoted or not), up to `max`: how many; 0 when the cell has no such input
 * or a dim is not a whole number. */
static size_t input_dims(struct cp_imp_val v, size_t which, long long *dim, size_t max)
{
    const char *p = v.s, *end = v.s + v.len;
    while (p < end && *p == '"')
        p++;
    while (end > p && end[-1] == '"')
        end--;
    for (size_t i = 0; i < which; i++) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        if (!semi)
            return 0;
        p = semi + 1;
    }
    size_t n = 0;
    while (p < end && *p != ';') {
        char *stop;
        errno = 0;
        long long x = strtoll(p, &stop, 10);
        if (stop == p || errno || x < 0 || n == max)
            return 0;
        dim[n++] = x;
        p = stop;
        if (p < end && *p == ',')
            p++;
        else if (p < end && *p != ';')
            return 0;
    }
    return n;
}

/* msprof-analyze's AI Core performance check per class of operator
 * (docs/import.md): a flash attention task is bound when its cube loads or
 * computes (MTE2 or MAC >= 0.8), its fixpipe (>= 0.75) or its vector unit
 * (>= 0.75) is busy; a vector task when its vector and data-moving pipes
 * together pass 0.9 or one of them 0.7. The rest have room; their time is
 * counted. Then the shapes the cube prefers: a matmul's inner axes a
 * multiple of 256, an attention's head dim (rank-4 query) of 128. */
static enum cp_status class_checks(struct csv_import *c, const struct cp_imp_row *r, int32_t it,
                                   double us, const double *ratio, bool *judged, struct cp_diag *d)
{
    *judged = false;
    struct cp_imp_val type = cp_imp_cell(r, c->col[C_TYPE]), core = cp_imp_cell(r, c->col[C_CORE]);
    bool fa = val_has(&type, "FlashAttention") || val_has(&type, "AttentionScore");
    bool mm = !fa && (val_has(&type, "MatMul") || val_has(&type, "Matmul"));
    bool vec = !fa && cp_imp_val_is(&core, "AI_VECTOR_CORE");
    enum cp_status st = cp_imp_sink_acc(c->k, it, "ascend.task_us", us, 0, true, d);
    if (st == CP_OK && fa) {
        double mac = ratio[MAC], mte2 = ratio[MTE2], fix = ratio[FIXPIPE], v = ratio[VEC];
        if (isfinite(mac) || isfinite(mte2)) {
            *judged = true;
            bool bound = mac >= 0.8 || mte2 >= 0.8 || fix >= 0.75 || v >= 0.75;
            st = cp_imp_sink_acc(c->k, it, "ascend.fa_us", us, 0, true, d);
            if (st == CP_OK && !bound)
                st = cp_imp_sink_acc(c->k, it, "ascend.fa_unbound_us", us, 0, true, d);
        }
    }
    if (st == CP_OK && vec) {
        double v = ratio[VEC], m2 = ratio[VMTE2], m3 = ratio[VMTE3];
        if (isfinite(v) && isfinite(m2) && isfinite(m3)) {
            *judged = true;
            bool bound = v + m2 + m3 >= 0.9 || v >= 0.7 || m2 >= 0.7 || m3 >= 0.7;
            st = cp_imp_sink_acc(c->k, it, "ascend.vector_us", us, 0, true, d);
            if (st == CP_OK && !bound)
                st = cp_imp_sink_acc(c->k, it, "ascend.vector_unbound_us", us, 0, true, d);
        }
    }
    struct cp_imp_val shapes = cp_imp_cell(r, c->col_shapes);
    if (st != CP_OK || !(fa || mm) || !shapes.s)
        return st;
    long long a[8], b[8];
    size_t na = input_dims(shapes, 0, a, 8), nb = mm ? input_dims(shapes, 1, b, 8) : 0;
    bool checked = false, misaligned = false;
    if (mm && na >= 2 && nb >= 2) {
        checked = true;
        misaligned = a[na - 1] % 256 != 0 || b[nb - 1] % 256 != 0;
    } else if (fa && na == 4) {
        checked = true;
        misaligned = a[3] % 128 != 0;
    }
    if (checked)
        st = cp_imp_sink_acc(c->k, it, "ascend.shape_checked_us", us, 0, true, d);
    if (st == CP_OK && misaligned)
        st = cp_imp_sink_acc(c->k, it, "ascend.shape_misaligned_us", us, 0, true, d);
    return st;
}

/* A computing task, for the chains worth fusing (fusible.c): its op type
 * and its largest data-moving ratio. */
static enum cp_status fusible_task(struct csv_import *c, const struct cp_imp_row *r, double us,
                                   const double *ratio, struct cp_diag *d)
{
    struct cp_imp_val core = cp_imp_cell(r, c->col[C_CORE]);
    if (cp_imp_val_is(&core, "HCCL") || cp_imp_val_is(&core, "COMMUNICATION"))
        return CP_OK;
    double mte = NAN;
    const enum pipe moves[] = {MTE2, VMTE2, VMTE3};
    for (size_t i = 0; i < 3; i++)
        if (isfinite(ratio[moves[i]]) && !(ratio[moves[i]] <= mte))
            mte = ratio[moves[i]];
    struct cp_imp_val stream = cp_imp_cell(r, c->col[C_STREAM]);
    int64_t sk = stream.s ? (int64_t)(cp_hash64(stream.s, stream.len) >> 1) : 0;
    return cp_imp_fusible_task(&c->fus, sk, -1, cp_imp_cell(r, c->col[C_TYPE]), us, mte, d);
}

/* The two per-task checks msprof-analyze's advisor makes on a task table
 * (docs/import.md): block dims that are not a multiple of the device's
 * cores (its last wave leaves cores idle), and tasks longer than 20 us
 * none of whose pipes is busy (bound by nothing; attention and vector
 * tasks class_checks judged are left to it). Each adds the task's
 * time to what was checked and to what failed, per iteration. */
static enum cp_status task_checks(struct csv_import *c, const struct cp_imp_row *r, int32_t it,
                                  double us, const double *ratio, bool judged, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    struct cp_imp_val core = cp_imp_cell(r, c->col[C_CORE]);
    bool cube = cp_imp_val_is(&core, "AI_CORE") || cp_imp_val_is(&core, "AI_VECTOR_CORE") ||
                cp_imp_val_is(&core, "MIX_AIC");
    bool mix_aiv = cp_imp_val_is(&core, "MIX_AIV");
    long long block = cell_count(r, cube ? c->col_block : c->col_mix_block);
    long long cores = cube ? c->dev.ai_cores : c->dev.aiv_cores;
    if ((cube || mix_aiv) && block > 0 && cores > 0) {
        st = cp_imp_sink_acc(c->k, it, "ascend.block_dim_checked_us", us, 0, true, d);
        if (st == CP_OK && block % cores != 0)
            st = cp_imp_sink_acc(c->k, it, "ascend.block_dim_misaligned_us", us, 0, true, d);
    }
    /* an attention or vector task has its own check (class_checks) */
    if (st != CP_OK || us <= NO_BOUND_MIN_US || judged)
        return st;
    bool any = false, bound = false;
    for (size_t p = 0; p < N_PIPES; p++)
        if (isfinite(ratio[p])) {
            any = true;
            bound = bound || ratio[p] > NO_BOUND_RATIO;
        }
    if (!any)
        return CP_OK;
    st = cp_imp_sink_acc(c->k, it, "ascend.pipe_checked_us", us, 0, true, d);
    if (st == CP_OK && !bound)
        st = cp_imp_sink_acc(c->k, it, "ascend.no_bound_us", us, 0, true, d);
    return st;
}

static enum cp_status write_row(void *u, const struct cp_imp_row *r, struct cp_diag *d)
{
    struct csv_import *c = u;
    if (r->number == 1)
        return CP_OK;
    if (r->n != c->n_header && !(r->n == 1 && r->len[0] == 0))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: row %llu: %zu fields where the header has %zu",
                           c->path, (unsigned long long)r->number, r->n, c->n_header);
    int64_t start, dur;
    if (!row_times(c, r, &start, &dur)) {
        c->rows_skipped++;
        return CP_OK;
    }
    if (dur < 0)
        dur = 0;
    int32_t it;
    enum cp_status st =
        c->attach ? timeline_step(c, r, &it) : step_of_row(c, r, start, start + dur, false, &it, d);
    if (st != CP_OK)
        return st;
    struct cp_imp_val state = cp_imp_cell(r, c->col[C_STATE]);
    if (!c->attach)
        st = write_task(c, r, start, dur, it, d);
    /* the other numeric columns, weighted by the task's duration */
    double w = dur > 0 ? (double)dur : 1.0;
    for (size_t i = 0; st == CP_OK && i < r->n && i < sizeof c->counter_col; i++) {
        if (!c->counter_col[i])
            continue;
        struct cp_imp_val v = cp_imp_cell(r, (int)i);
        double x;
        if (v.s && cp_imp_val_num(&v, &x))
            st = cp_imp_sink_acc(c->k, it, c->col_name[i], x, w, false, d);
    }
    bool judged = false;
    double ratio[N_PIPES], us = (double)dur / 1000.0;
    pipe_ratios(c, r, ratio);
    if (st == CP_OK)
        st = class_checks(c, r, it, us, ratio, &judged, d);
    if (st == CP_OK)
        st = fusible_task(c, r, us, ratio, d);
    if (st == CP_OK)
        st = task_checks(c, r, it, us, ratio, judged, d);
    if (st == CP_OK && state.s) {
        bool dyn = state.len == 7 && memcmp(state.s, "dynamic", 7) == 0;
        st = cp_imp_sink_acc(c->k, it, dyn ? "ascend.op_state.dynamic" : "ascend.op_state.static",
                             1, 1, true, d);
    }
    return st;
}

/* step_trace_time.csv beside the file: each step's length. */
struct steps_file {
    struct csv_import *c;
    int step, comp, comm, free_;
};

static enum cp_status step_row(void *u, const struct cp_imp_row *r, struct cp_diag *d)
{
    (void)d;
    struct steps_file *s = u;
    if (r->number == 1) {
        s->step = s->comp = s->comm = s->free_ = -1;
        for (size_t i = 0; i < r->n; i++) {
            const char *h = r->f[i];
            if (i == 0 && strncmp(h, "\xef\xbb\xbf", 3) == 0)
                h += 3;
            if (strcmp(h, "Step") == 0)
                s->step = (int)i;
            else if (strcmp(h, "Computing") == 0)
                s->comp = (int)i;
            else if (strcmp(h, "Communication(Not Overlapped)") == 0)
                s->comm = (int)i;
            else if (strcmp(h, "Free") == 0)
                s->free_ = (int)i;
        }
        return CP_OK;
    }
    if (s->step < 0 || s->comp < 0 || s->free_ < 0)
        return CP_OK;
    struct cp_imp_val st = cp_imp_cell(r, s->step), a = cp_imp_cell(r, s->comp),
                      b = cp_imp_cell(r, s->comm), f = cp_imp_cell(r, s->free_);
    double x = 0, y = 0, z = 0;
    if (!st.s || !cp_imp_val_num(&a, &x) || !cp_imp_val_num(&f, &z))
        return CP_OK;
    if (b.s)
        (void)cp_imp_val_num(&b, &y);
    int64_t at = cp_strmap_get(&s->c->step_ix, st.s, st.len, -1);
    if (at >= 0)
        s->c->steps[at].length_us = x + y + z;
    return CP_OK;
}

static void release(struct csv_import *c)
{
    free(c->steps);
    free(c->header);
    free(c->col_name);
    cp_strmap_release(&c->step_ix);
    cp_imp_pool_release(&c->pool);
    cp_imp_fusible_release(&c->fus);
}

enum cp_status cp_imp_ascend_csv(const char *path, const char *trace_path,
                                 struct cp_import_result *r, struct cp_diag *d)
{
    struct csv_import c;
    memset(&c, 0, sizeof c);
    cp_imp_fusible_init(&c.fus);
    c.path = path;
    cp_strmap_init(&c.step_ix);
    uint64_t bytes = 0;
    enum cp_status st = cp_imp_read_csv(path, scan_row, &c, &bytes, d);
    if (st == CP_OK && !c.header)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: empty: no header row", path);
    if (st == CP_OK && !c.have_start)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: no row with a start time and a duration", path);
    if (st != CP_OK) {
        release(&c);
        return st;
    }
    /* the steps' own lengths, when the run has them */
    char dir[1100], steps_path[1200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    snprintf(steps_path, sizeof steps_path, "%s/step_trace_time.csv", dir);
    bool step_file = false;
    if (c.n_steps && cp_path_exists(steps_path)) {
        struct steps_file sf = {.c = &c};
        uint64_t sb;
        if ((st = cp_imp_read_csv(steps_path, step_row, &sf, &sb, d)) != CP_OK) {
            release(&c);
            return st;
        }
        step_file = true;
    }
    if ((st = cp_imp_ascend_device(dir, &c.dev, d)) != CP_OK) {
        release(&c);
        return st;
    }
    r->format = CP_IMPORT_ASCEND_CSV;
    snprintf(r->step_source, sizeof r->step_source, "%s",
             c.n_steps == 0 ? "window"
             : step_file    ? "step_trace_time"
                            : "Step Id");
    struct cp_imp_sink k;
    st = cp_imp_sink_open(&k, trace_path, r->source, cp_import_format_name(r->format), r, d);
    if (st != CP_OK) {
        release(&c);
        return st;
    }
    c.k = &k;
    c.res = r;
    st = cp_imp_read_csv(path, write_row, &c, &bytes, d);
    r->bytes = bytes;
    /* the samples: each step's length, or the window */
    size_t n = c.n_steps ? c.n_steps : 1;
    uint64_t *samples = cp_calloc(n, sizeof *samples);
    if (st == CP_OK && !samples)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    int64_t lo = c.min_start, hi = c.max_end;
    for (size_t i = 0; st == CP_OK && i < n; i++) {
        if (!c.n_steps) {
            samples[i] = (uint64_t)(hi - lo);
            continue;
        }
        const struct step_span *sp = &c.steps[i];
        samples[i] = isfinite(sp->length_us) && sp->length_us > 0
                         ? (uint64_t)llround(sp->length_us * 1000.0)
                         : (uint64_t)(sp->end - sp->start);
        struct cp_imp_val idv = {sp->id, strlen(sp->id), false};
        double num;
        if (cp_imp_val_num(&idv, &num))
            st = cp_imp_sink_counter(&k, (int32_t)i, "step.number", num, 0, d);
    }
    r->iterations = c.n_steps;
    char base[32];
    snprintf(base, sizeof base, "%lld", (long long)c.min_start);
    if (st == CP_OK)
        st = cp_imp_sink_meta(&k, "time_base_ns", base, d);
    char summary[512];
    snprintf(summary, sizeof summary,
             "{\"format\":\"%s\",\"bytes\":%llu,\"device_events\":%zu,\"rows_skipped\":%zu,"
             "\"steps\":\"%s\"}",
             cp_import_format_name(r->format), (unsigned long long)bytes, r->events[2],
             c.rows_skipped, r->step_source);
    if (st == CP_OK)
        st = cp_imp_sink_meta(&k, "summary", summary, d);
    r->skipped[CP_SKIP_NO_TIME] += c.rows_skipped;
    if (st == CP_OK)
        st = cp_imp_fusible_finish(&c.fus, &k, r, d);
    if (st == CP_OK)
        st = cp_imp_sink_finish(&k, samples, n, d);
    if (st != CP_OK)
        cp_imp_sink_abort(&k);
    free(samples);
    release(&c);
    return st;
}

enum cp_status cp_imp_ascend_csv_counters(const char *path, const char *trace_path, int64_t run,
                                          struct cp_import_result *r, struct cp_diag *d)
{
    struct csv_import c;
    memset(&c, 0, sizeof c);
    cp_imp_fusible_init(&c.fus);
    c.path = path;
    c.attach = true;
    cp_strmap_init(&c.step_ix);
    uint64_t bytes = 0;
    enum cp_status st = cp_imp_read_csv(path, scan_row, &c, &bytes, d);
    if (st == CP_OK && !c.header)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: empty: no header row", path);
    struct cp_imp_sink k;
    memset(&k, 0, sizeof k);
    k.run = -1;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    if (st == CP_OK)
        st = cp_imp_ascend_device(dir, &c.dev, d);
    if (st == CP_OK)
        st = cp_imp_sink_attach(&k, trace_path, run, r, d);
    if (st == CP_OK)
        st = cp_trace_query_counter_series(k.store, run, "step.number", &c.tl_steps, &c.n_tl, d);
    c.k = &k;
    if (st == CP_OK)
        st = cp_imp_read_csv(path, write_row, &c, &bytes, d);
    if (st == CP_OK)
        st = cp_imp_fusible_finish(&c.fus, &k, r, d);
    if (st == CP_OK)
        st = cp_imp_sink_meta(&k, "task_table", path, d);
    if (st == CP_OK)
        st = cp_imp_sink_finish(&k, NULL, 0, d);
    if (st != CP_OK)
        cp_imp_sink_abort(&k);
    free(c.tl_steps);
    release(&c);
    return st;
}
