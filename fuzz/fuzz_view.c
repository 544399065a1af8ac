/* `cannprof view` on a trace store users bring (view/view.h): imported
 * profiles land in the same SQLite schema, so every picture must draw what
 * it can or refuse with a message. The input is the store. Bytes that begin
 * as a SQLite file are written as they are (SQLite's page format, its
 * records and values, mutated); any other input is SQL run into a fresh
 * empty trace store, statement by statement (failing ones skipped), so the
 * fuzzer varies rows, values and types in a schema that opens. The store is
 * opened read-only and drawn: flame graphs by every grouping and every
 * choice of iterations, the diff of the last run against itself (with and
 * without --force), timelines of one and three iterations, the topology of
 * the file. Each call returns CP_OK with a well-formed picture (an SVG
 * document, or an HTML page, that is valid UTF-8) or a refusal with a
 * message. */
#include "harness.h"

#include "core/json.h"
#include "trace/trace.h"
#include "view/view.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* LeakSanitizer's suppressions, read at start-up. Graphviz lays labels out
 * with pango, which loads fontconfig's caches for the process; fontconfig
 * links them by offsets rather than pointers, so LeakSanitizer takes them
 * for leaks while they are in use (and at exit: nothing here releases
 * them). And Graphviz 2.43's dot leaks the virtual edges it makes (gmalloc)
 * when it reverses an edge to break a cycle of three or more nodes, which
 * a store may hold (pipeline_edges 0->1->2->0 without the loop-back mark:
 * seeds/view/pipeline-cycle.sql); gvFreeLayout does not reach them. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libfontconfig.so\nleak:gmalloc\n";
}

/* A fresh trace store's bytes, made once per process (cp_trace_store_open
 * on a new file), copied for each SQL input. */
static uint8_t *empty_store;
static size_t empty_store_len;

static bool make_empty_store(void)
{
    if (empty_store)
        return true;
    char path[1024];
    if (!fuzz_tmp_path("empty.db", path, sizeof path))
        return false;
    fuzz_tmp_remove_db(path);
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_trace_store_open(path, &s, &d) != CP_OK)
        fuzz_fail("cannot make an empty trace store: %s", d.msg);
    cp_trace_store_close(s);
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (empty_store = malloc((size_t)n)) && fread(empty_store, 1, (size_t)n, f) != (size_t)n) {
        free(empty_store);
        empty_store = NULL;
    }
    if (f)
        fclose(f);
    fuzz_tmp_remove_db(path);
    if (!empty_store)
        return false;
    empty_store_len = (size_t)n;
    return true;
}

/* Whether s holds w (lower case), in any case. */
static bool contains_ci(const char *s, const char *w)
{
    for (; *s; s++) {
        size_t i = 0;
        while (w[i] && (s[i] | 0x20) == w[i])
            i++;
        if (!w[i])
            return true;
    }
    return false;
}

/* Keep SQL from writing outside the store (ATTACH, VACUUM INTO). */
static int authorize(void *ctx, int action, const char *a, const char *b, const char *c,
                     const char *e)
{
    (void)ctx;
    (void)a;
    (void)b;
    (void)c;
    (void)e;
    return action == SQLITE_ATTACH || action == SQLITE_DETACH ? SQLITE_DENY : SQLITE_OK;
}

/* Stop SQL that runs too long (a recursive query filling the store). */
static int progress(void *ctx)
{
    return ++*(int *)ctx > 2000;
}

/* Run sql into the database at path, statement by statement. */
static bool run_sql(const char *path, const char *sql)
{
    sqlite3 *s = NULL;
    if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_close(s);
        return false;
    }
    sqlite3_limit(s, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_limit(s, SQLITE_LIMIT_LENGTH, 1 << 20);
    sqlite3_exec(s, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF", NULL, NULL, NULL);
    sqlite3_set_authorizer(s, authorize, NULL);
    int ticks = 0;
    sqlite3_progress_handler(s, 1000, progress, &ticks);
    const char *tail = sql;
    while (tail && *tail) {
        sqlite3_stmt *st = NULL;
        const char *next = NULL;
        if (sqlite3_prepare_v2(s, tail, -1, &st, &next) != SQLITE_OK) {
            const char *semi = strchr(tail, ';');
            next = semi ? semi + 1 : NULL;
        } else if (st) {
            /* VACUUM INTO writes a file wherever it is told */
            const char *text = sqlite3_sql(st);
            if (!text || !contains_ci(text, "vacuum"))
                while (sqlite3_step(st) == SQLITE_ROW)
                    ;
        }
        sqlite3_finalize(st);
        if (next == tail)
            break;
        tail = next;
    }
    sqlite3_close(s);
    return true;
}

static bool starts(const struct cp_buf *b, const char *s)
{
    return b->len >= strlen(s) && memcmp(b->data, s, strlen(s)) == 0;
}

static bool ends(const struct cp_buf *b, const char *s)
{
    size_t n = strlen(s);
    return b->len >= n && memcmp(b->data + b->len - n, s, n) == 0;
}

/* The answer of one call: CP_OK with a picture of `kind` ("svg" or
 * "html"), or a refusal with a message. */
static void check(const char *what, enum cp_status st, const struct cp_buf *out,
                  const struct cp_diag *d, const char *kind)
{
    if (st != CP_OK) {
        if (!d->msg[0])
            fuzz_fail("%s failed (status %d) without a message", what, (int)st);
        return;
    }
    if (cp_buf_status(out) != CP_OK)
        fuzz_fail("%s returned CP_OK with a failed buffer", what);
    if (!out->len)
        fuzz_fail("%s returned CP_OK and nothing", what);
    if (!cp_utf8_valid(out->data, out->len))
        fuzz_fail("%s: the %s is not valid UTF-8", what, kind);
    if (strcmp(kind, "svg") == 0) {
        if (!starts(out, "<?xml") && !starts(out, "<svg"))
            fuzz_fail("%s: the SVG starts with '%.20s'", what, out->data);
        if (!ends(out, "</svg>\n"))
            fuzz_fail("%s: the SVG does not end with </svg>", what);
        /* characters XML 1.0 does not allow */
        for (size_t i = 0; i < out->len; i++) {
            unsigned char c = (unsigned char)out->data[i];
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
                fuzz_fail("%s: the SVG holds the control character 0x%02x at %zu", what, c, i);
        }
    } else if (!strstr(out->data, "</html>")) {
        fuzz_fail("%s: the page has no </html>", what);
    }
}

static void draw(struct cp_trace_store *s, const char *path)
{
    static const enum cp_flame_group groups[] = {CP_FLAME_BY_LAYER, CP_FLAME_BY_OP,
                                                 CP_FLAME_BY_ONNX, CP_FLAME_BY_PIPELINE};
    static const enum cp_flame_iters iters[] = {CP_FLAME_MEAN, CP_FLAME_MEDIAN, CP_FLAME_ALL,
                                                CP_FLAME_ONE};
    struct cp_buf out;
    struct cp_diag d;
    char what[64];
    for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
        for (size_t i = 0; i < sizeof iters / sizeof *iters; i++) {
            struct cp_flame_opts o;
            cp_flame_opts_init(&o);
            o.group = groups[g];
            o.iters = iters[i];
            o.iteration = 1;
            struct cp_flame_info info;
            cp_buf_init(&out);
            cp_diag_init(&d);
            snprintf(what, sizeof what, "cp_view_flame(group %d, iterations %d)", (int)o.group,
                     (int)o.iters);
            check(what, cp_view_flame(s, &o, &out, &info, &d), &out, &d, "svg");
            cp_buf_release(&out);
        }
    for (int force = 0; force < 2; force++) {
        struct cp_flame_opts o;
        cp_flame_opts_init(&o);
        o.force = force;
        struct cp_flame_info info;
        cp_buf_init(&out);
        cp_diag_init(&d);
        snprintf(what, sizeof what, "cp_view_flame_diff(force %d)", force);
        check(what, cp_view_flame_diff(s, s, -1, -1, &o, &out, &info, &d), &out, &d, "svg");
        cp_buf_release(&out);
    }
    static const int64_t counts[] = {1, 3};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        struct cp_timeline_opts o = {.run_id = -1, .first = -1, .count = counts[k]};
        struct cp_timeline_info info;
        cp_buf_init(&out);
        cp_diag_init(&d);
        snprintf(what, sizeof what, "cp_view_timeline(count %lld)", (long long)counts[k]);
        check(what, cp_view_timeline(s, &o, &out, &info, &d), &out, &d, "html");
        cp_buf_release(&out);
    }
    struct cp_topology_opts o = {.run_id = -1};
    struct cp_topology_info info;
    cp_buf_init(&out);
    cp_diag_init(&d);
    check("cp_view_topology", cp_view_topology(path, &o, &out, &info, &d), &out, &d, "svg");
    cp_buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024];
    if (!fuzz_tmp_path("trace.db", path, sizeof path))
        return 0;
    fuzz_tmp_remove_db(path);
    static const char magic[] = "SQLite format 3"; /* with its NUL: 16 bytes */
    if (size >= sizeof magic && memcmp(data, magic, sizeof magic) == 0) {
        if (!fuzz_tmp_write("trace.db", data, size, path, sizeof path))
            return 0;
    } else {
        char *sql = fuzz_strdup(data, size);
        bool ok = sql && make_empty_store() &&
                  fuzz_tmp_write("trace.db", empty_store, empty_store_len, path, sizeof path) &&
                  run_sql(path, sql);
        free(sql);
        if (!ok) {
            fuzz_tmp_remove_db(path);
            return 0;
        }
    }
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_trace_store_open_ro(path, &s, &d);
    if (st != CP_OK) {
        if (!d.msg[0])
            fuzz_fail("cp_trace_store_open_ro failed (status %d) without a message", (int)st);
        if (s)
            fuzz_fail("cp_trace_store_open_ro failed and left a store");
    } else {
        draw(s, path);
        cp_trace_store_close(s);
    }
    fuzz_tmp_remove_db(path);
    return 0;
}
