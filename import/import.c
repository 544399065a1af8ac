/* cp_import: which file of a path to read, what it is, and the run it
 * becomes (import/import.h). */
#define _GNU_SOURCE /* strcasestr */
#include "import/import_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include <jansson.h>

static const char *const FORMAT_NAMES[CP_IMPORT_N_FORMATS] = {
    [CP_IMPORT_AUTO] = "auto",
    [CP_IMPORT_KINETO] = "kineto",
    [CP_IMPORT_ASCEND] = "ascend",
    [CP_IMPORT_ORT] = "ort",
    [CP_IMPORT_CHROME] = "chrome",
    [CP_IMPORT_ASCEND_CSV] = "ascend-csv",
    [CP_IMPORT_ASCEND_DB] = "ascend-db",
    [CP_IMPORT_NSYS] = "nsys",
    [CP_IMPORT_TRT] = "trt",
};

const char *cp_import_format_name(enum cp_import_format f)
{
    return (unsigned)f < CP_IMPORT_N_FORMATS && FORMAT_NAMES[f] ? FORMAT_NAMES[f] : "?";
}

bool cp_import_format_parse(const char *name, enum cp_import_format *out)
{
    for (int i = 0; i < CP_IMPORT_N_FORMATS; i++)
        if (name && FORMAT_NAMES[i] && strcmp(name, FORMAT_NAMES[i]) == 0) {
            *out = (enum cp_import_format)i;
            return true;
        }
    return false;
}

const char *cp_import_skip_name(enum cp_import_skip s)
{
    static const char *const names[CP_SKIP_N] = {"flow",    "instant",  "derived",     "fence",
                                                 "no_time", "unpaired", "other_phase", "detail"};
    return (unsigned)s < CP_SKIP_N ? names[s] : "?";
}

/* ---- which file ------------------------------------------------------------------- */

bool cp_imp_is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

bool cp_imp_first_entry(const char *dir, const char *prefix, const char *suffix,
                        const char *not_suffix, char *out, size_t n)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return false;
    char best[512] = "";
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
            (suffix && !ends_with(de->d_name, suffix)) ||
            (not_suffix && ends_with(de->d_name, not_suffix)) || strlen(de->d_name) >= sizeof best)
            continue;
        if (!best[0] || strcmp(de->d_name, best) < 0)
            snprintf(best, sizeof best, "%s", de->d_name);
    }
    closedir(dp);
    if (!best[0])
        return false;
    int k = snprintf(out, n, "%s/%s", dir, best);
    return k > 0 && (size_t)k < n;
}

/* Where a run folder keeps a profile: a subfolder (NULL: the folder
 * itself) and the file's name as prefix and suffix (the same for one name). */
struct probe {
    const char *sub, *prefix, *suffix;
};

/* The timelines, first choice (torch_npu's, msprof's). */
static const struct probe TIMELINES[] = {
    {"ASCEND_PROFILER_OUTPUT", "trace_view.json", "trace_view.json"},
    {NULL, "trace_view.json", "trace_view.json"},
    {"mindstudio_profiler_output", "msprof_", ".json"},
    {NULL, "msprof_", ".json"},
};

/* Without a timeline: the DB exports, then the task tables. */
static const struct probe TABLES[] = {
    {"ASCEND_PROFILER_OUTPUT", "ascend_pytorch_profiler", ".db"},
    {NULL, "ascend_pytorch_profiler", ".db"},
    {NULL, "msprof_", ".db"},
    {"ASCEND_PROFILER_OUTPUT", "kernel_details.csv", "kernel_details.csv"},
    {NULL, "kernel_details.csv", "kernel_details.csv"},
    {"mindstudio_profiler_output", "op_summary_", ".csv"},
    {NULL, "op_summary_", ".csv"},
    {"ASCEND_PROFILER_OUTPUT", "task_time.csv", "task_time.csv"},
    {NULL, "task_time.csv", "task_time.csv"},
    {"mindstudio_profiler_output", "task_time_", ".csv"},
    {NULL, "task_time_", ".csv"},
};

/* The first probe that finds a file in dir. */
static bool probe_all(const char *dir, const struct probe *p, size_t n, char *out, size_t outn)
{
    for (size_t i = 0; i < n; i++) {
        char folder[1100];
        if ((size_t)snprintf(folder, sizeof folder, "%s%s%s", dir, p[i].sub ? "/" : "",
                             p[i].sub ? p[i].sub : "") >= sizeof folder)
            continue;
        if (cp_imp_is_dir(folder) &&
            cp_imp_first_entry(folder, p[i].prefix, p[i].suffix, NULL, out, outn))
            return true;
    }
    return false;
}

/* A run folder's profile: its timeline; else the one Chrome trace (*.json,
 * *.json.gz) in it; else its DB export or task table. */
static enum cp_status resolve_dir(const char *dir, char *out, size_t n, struct cp_diag *d)
{
    if (probe_all(dir, TIMELINES, sizeof TIMELINES / sizeof *TIMELINES, out, n))
        return CP_OK;
    /* one trace file in the folder */
    DIR *dp = opendir(dir);
    if (!dp)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot read the folder: %s", dir, strerror(errno));
    size_t found = 0; /* several are a cluster (trace_cluster) */
    char first[512] = "";
    struct dirent *de;
    while ((de = readdir(dp)))
        if (ends_with(de->d_name, ".json") || ends_with(de->d_name, ".json.gz")) {
            if (strstr(de->d_name, "profiler_info") || strstr(de->d_name, "profiler_metadata"))
                continue;
            if (!found++ || strcmp(de->d_name, first) < 0)
                snprintf(first, sizeof first, "%s", de->d_name);
        }
    closedir(dp);
    if (found == 1) {
        snprintf(out, n, "%s/%s", dir, first);
        return CP_OK;
    }
    if (probe_all(dir, TABLES, sizeof TABLES / sizeof *TABLES, out, n))
        return CP_OK;
    return cp_diag_set(d, CP_ERR_INVALID,
                       "%s: no profile found (looked for ASCEND_PROFILER_OUTPUT/trace_view.json, "
                       "trace_view.json, msprof_*.json, a single *.json or *.json.gz, "
                       "ascend_pytorch_profiler*.db, msprof_*.db, kernel_details.csv, "
                       "op_summary_*.csv and task_time*.csv)",
                       dir);
}

/* ---- what it is --------------------------------------------------------------------- */

/* The first bytes of the file, decompressed when gzip. */
static enum cp_status sniff(const char *path, char *head, size_t n, size_t *got, struct cp_diag *d)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int r = gzread(gz, head, (unsigned)n);
    gzclose(gz);
    if (r < 0)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: not readable as plain or gzip data", path);
    *got = (size_t)r;
    return CP_OK;
}

static enum cp_status check_json(const char *name, const char *head, size_t n, struct cp_diag *d)
{
    size_t i = 0;
    if (n >= 3 && (unsigned char)head[0] == 0xef && (unsigned char)head[1] == 0xbb &&
        (unsigned char)head[2] == 0xbf)
        i = 3; /* a UTF-8 byte order mark */
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n'))
        i++;
    if (i == n)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: empty", name);
    if (head[i] != '[' && head[i] != '{')
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: byte %zu: not a JSON trace (it starts with neither '[' nor '{'); "
                           "the formats cannprof imports are listed in docs/import.md",
                           name, i);
    return CP_OK;
}

static enum cp_status run_import(const struct cp_imp_src *src, enum cp_import_format format,
                                 const char *trace_path, struct cp_import_result *r,
                                 struct cp_diag *d)
{
    uint64_t t0 = cp_clock_ns();
    enum cp_status st = cp_imp_chrome(src, format, trace_path, r, d);
    r->seconds = (double)(cp_clock_ns() - t0) / 1e9;
    return st;
}

/* ---- a cluster: one folder per rank ------------------------------------------------ */

/* Whether `dir` is a torch_npu / MindSpore rank folder. */
static bool rank_folder(const char *parent, const char *name, char *path, size_t n)
{
    int k = snprintf(path, n, "%s/%s", parent, name);
    char probe[1600];
    if (k < 0 || (size_t)k >= n ||
        (size_t)snprintf(probe, sizeof probe, "%s/ASCEND_PROFILER_OUTPUT", path) >= sizeof probe)
        return false;
    return cp_imp_is_dir(path) &&
           (ends_with(name, "_ascend_pt") || ends_with(name, "_ascend_ms")) && cp_imp_is_dir(probe);
}

/* The rank of a rank folder: profiler_info_{rank}.json's rank_id (an int
 * in older files, a string in newer ones), else the number in its
 * profiler_info_{rank}.json name; -1 when neither says. */
static int rank_of(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    int rank = -1;
    struct dirent *de;
    while ((de = readdir(dp)) && rank < 0) {
        if (strncmp(de->d_name, "profiler_info", 13) != 0 || !ends_with(de->d_name, ".json"))
            continue;
        char p[1700];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= sizeof p)
            continue;
        json_error_t e;
        json_t *j = json_load_file(p, 0, &e);
        json_t *v = json_object_get(j, "rank_id");
        if (json_is_integer(v))
            rank = (int)json_integer_value(v);
        else if (json_is_string(v))
            rank = atoi(json_string_value(v));
        json_decref(j);
        if (rank < 0 && de->d_name[13] == '_')
            rank = atoi(de->d_name + 14);
    }
    closedir(dp);
    return rank;
}

struct rank_dir {
    char name[256];
    int rank;
};

static int cmp_rank(const void *pa, const void *pb)
{
    const struct rank_dir *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* The rank folders of `dir`, by rank; n 0 when it is not a cluster. */
static enum cp_status cluster_ranks(const char *dir, struct rank_dir **out, size_t *n,
                                    struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return CP_OK;
    size_t cap = 0;
    struct rank_dir *v = NULL;
    struct dirent *de;
    enum cp_status st = CP_OK;
    while ((de = readdir(dp)) && st == CP_OK) {
        char path[1400];
        if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof v->name ||
            !rank_folder(dir, de->d_name, path, sizeof path))
            continue;
        if (*n == CP_IMPORT_MAX_RANKS) {
            st = cp_diag_set(d, CP_ERR_INVALID, "%s: more than %d rank folders", dir,
                             CP_IMPORT_MAX_RANKS);
            break;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct rank_dir *g = cp_realloc_array(v, cap, sizeof *g);
            if (!g) {
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            v = g;
        }
        snprintf(v[*n].name, sizeof v[*n].name, "%s", de->d_name);
        v[*n].rank = rank_of(path);
        (*n)++;
    }
    closedir(dp);
    if (st != CP_OK) {
        free(v);
        *n = 0;
        return st;
    }
    /* a folder without its rank takes the next number after those known */
    int next = 0;
    for (size_t i = 0; i < *n; i++)
        next = v[i].rank >= next ? v[i].rank + 1 : next;
    if (*n > 1)
        qsort(v, *n, sizeof *v, cmp_rank);
    for (size_t i = 0; i < *n; i++)
        if (v[i].rank < 0)
            v[i].rank = next++;
    for (size_t i = 1; i < *n; i++)
        if (v[i].rank == v[i - 1].rank) {
            st = cp_diag_set(d, CP_ERR_INVALID, "%s: %s and %s both say they are rank %d", dir,
                             v[i - 1].name, v[i].name, v[i].rank);
            free(v);
            *n = 0;
            return st;
        }
    *out = v;
    return CP_OK;
}

/* Whether a file name is a Chrome trace's (not a run folder's side file). */
static bool trace_name(const char *name)
{
    return (ends_with(name, ".json") || ends_with(name, ".json.gz")) &&
           !strstr(name, "profiler_info") && !strstr(name, "profiler_metadata");
}

/* Several Chrome traces in one folder: torch.profiler's
 * tensorboard_trace_handler writes one per rank
 * (<worker>.<ts>.pt.trace.json); each is a rank, by name until its
 * distributedInfo.rank is read. n 0 when the folder holds fewer than two. */
static enum cp_status trace_cluster(const char *dir, struct rank_dir **out, size_t *n,
                                    struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return CP_OK;
    size_t cap = 0;
    struct rank_dir *v = NULL;
    struct dirent *de;
    enum cp_status st = CP_OK;
    while ((de = readdir(dp)) && st == CP_OK) {
        char path[1400];
        if (de->d_name[0] == '.' || !trace_name(de->d_name) ||
            strlen(de->d_name) >= sizeof v->name ||
            (size_t)snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= sizeof path ||
            !is_file(path))
            continue;
        if (*n == CP_IMPORT_MAX_RANKS) {
            st =
                cp_diag_set(d, CP_ERR_INVALID, "%s: more than %d traces", dir, CP_IMPORT_MAX_RANKS);
            break;
        }
        struct rank_dir *g = cp_imp_grow(v, *n, &cap, sizeof *g, 16);
        if (!g) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        v = g;
        snprintf(v[*n].name, sizeof v[*n].name, "%s", de->d_name);
        v[*n].rank = -1;
        (*n)++;
    }
    closedir(dp);
    if (st != CP_OK || *n < 2) {
        free(v);
        *n = 0;
        return st;
    }
    qsort(v, *n, sizeof *v, cmp_rank);
    *out = v;
    return CP_OK;
}

/* The rank a Kineto trace says it is (distributedInfo.rank), else
 * `fallback`. */
static int trace_rank(const char *trace, int64_t run, int fallback)
{
    struct cp_trace_store *s = NULL;
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    int rank = fallback;
    char key[96], *value = NULL;
    snprintf(key, sizeof key, "run.%lld.import.profile.distributedInfo.rank", (long long)run);
    if (cp_trace_store_open(trace, &s, &ignored) == CP_OK &&
        cp_trace_store_get_meta(s, key, &value, &ignored) == CP_OK && value) {
        char *end = NULL;
        long x = strtol(value, &end, 10);
        if (end != value && *end == '\0' && x >= 0 && x < 1000000)
            rank = (int)x;
    }
    free(value);
    cp_trace_store_close(s);
    return rank;
}

/* Remove runs (a cluster that failed part way). */
static void remove_runs(const char *trace, const int64_t *runs, size_t n)
{
    struct cp_trace_store *s = NULL;
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    if (n == 0 || cp_trace_store_open(trace, &s, &ignored) != CP_OK)
        return;
    for (size_t i = 0; i < n; i++)
        (void)cp_trace_store_delete_run(s, runs[i], &ignored);
    cp_trace_store_close(s);
}

static enum cp_status import_cluster(const struct cp_import_opts *o, const struct rank_dir *v,
                                     size_t n, struct cp_import_result *r, struct cp_diag *d)
{
    enum cp_status st = CP_OK;
    uint64_t t0 = cp_clock_ns();
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        char path[1400];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", o->path, v[i].name) >= sizeof path) {
            st = cp_diag_set(d, CP_ERR_INVALID, "%s/%s: the path is too long", o->path, v[i].name);
            break;
        }
        struct cp_import_opts one = *o;
        one.path = path;
        struct cp_import_result ri;
        if ((st = cp_import(&one, &ri, d)) != CP_OK) {
            /* name the rank: the message already names its file */
            struct cp_diag inner = *d;
            cp_diag_init(d);
            if (v[i].rank >= 0)
                st = cp_diag_set(d, inner.status, "rank %d (%s): %s; no rank was imported",
                                 v[i].rank, v[i].name, inner.msg);
            else
                st =
                    cp_diag_set(d, inner.status, "trace %zu of %zu (%s): %s; no trace was imported",
                                i + 1, n, v[i].name, inner.msg);
            break;
        }
        r->rank_run[i] = ri.run_id;
        r->rank[i] = v[i].rank >= 0 ? v[i].rank : trace_rank(o->trace_path, ri.run_id, (int)i);
        for (size_t j = 0; j < i && st == CP_OK; j++)
            if (r->rank[j] == r->rank[i])
                st = cp_diag_set(d, CP_ERR_INVALID, "%s: %s and %s both say they are rank %d",
                                 o->path, v[j].name, v[i].name, r->rank[i]);
        r->n_ranks = i + 1;
        if (st != CP_OK)
            break;
        r->run_id = ri.run_id;
        r->format = ri.format;
        r->bytes += ri.bytes;
        r->kernels += ri.kernels;
        r->counters += ri.counters;
        r->iterations += ri.iterations;
        r->metadata += ri.metadata;
        for (int l = 0; l < 3; l++)
            r->events[l] += ri.events[l];
        for (int k = 0; k < CP_SKIP_N; k++)
            r->skipped[k] += ri.skipped[k];
        snprintf(r->step_source, sizeof r->step_source, "%s", ri.step_source);
        snprintf(r->extras, sizeof r->extras, "%s", ri.extras);
        r->table_tasks += ri.table_tasks;
        if (ri.slowest_link[0])
            if ((size_t)snprintf(r->slowest_link, sizeof r->slowest_link, "rank %d: %.*s",
                                 v[i].rank, 120, ri.slowest_link) >= sizeof r->slowest_link)
                r->slowest_link[sizeof r->slowest_link - 1] = '\0';
        if (ri.fusible[0] && !r->fusible[0])
            if ((size_t)snprintf(r->fusible, sizeof r->fusible, "rank %d: %.*s", v[i].rank, 180,
                                 ri.fusible) >= sizeof r->fusible)
                r->fusible[sizeof r->fusible - 1] = '\0';
    }
    /* one run group, each run with its rank */
    struct cp_trace_store *s = NULL;
    if (st == CP_OK)
        st = cp_trace_store_open(o->trace_path, &s, d);
    for (size_t i = 0; st == CP_OK && i < r->n_ranks; i++) {
        st = cp_trace_store_set_run_group(s, r->rank_run[i], r->rank_run[0], (int64_t)i,
                                          (int64_t)r->n_ranks, d);
        if (st == CP_OK)
            st = cp_trace_store_add_counter(s, r->rank_run[i], -1, "rank", r->rank[i], 0, d);
    }
    if (st == CP_OK)
        st = cp_imp_cluster_compare(s, r, d);
    cp_trace_store_close(s);
    if (st != CP_OK) {
        remove_runs(o->trace_path, r->rank_run, r->n_ranks);
        r->n_ranks = 0;
    }
    snprintf(r->source, sizeof r->source, "%s", o->path);
    r->seconds = (double)(cp_clock_ns() - t0) / 1e9;
    return st;
}

/* An Ascend run's other files, beside the one imported (its folder). */
static enum cp_status ascend_extras(const char *file, const char *trace, struct cp_import_result *r,
                                    struct cp_diag *d)
{
    if (r->format != CP_IMPORT_ASCEND && r->format != CP_IMPORT_ASCEND_CSV &&
        r->format != CP_IMPORT_ASCEND_DB)
        return CP_OK;
    char dir[1100];
    const char *slash = strrchr(file, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - file), file);
    uint64_t t0 = cp_clock_ns();
    enum cp_status st = cp_imp_ascend_extras(dir, trace, r->run_id, r, d);
    if (st != CP_OK)
        remove_runs(trace, &r->run_id, 1);
    r->seconds += (double)(cp_clock_ns() - t0) / 1e9;
    return st;
}

enum cp_status cp_import(const struct cp_import_opts *o, struct cp_import_result *r,
                         struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    r->run_id = -1;
    if (!o->path || !o->trace_path)
        return cp_diag_set(d, CP_ERR_INVALID, "import: no profile or no trace named");
    char file[1100];
    if (cp_imp_is_dir(o->path)) {
        struct rank_dir *ranks = NULL;
        size_t n = 0;
        enum cp_status st = cluster_ranks(o->path, &ranks, &n, d);
        if (st == CP_OK && n > 0)
            st = import_cluster(o, ranks, n, r, d);
        free(ranks);
        if (st != CP_OK || n > 0)
            return st;
        /* several traces and no run-folder timeline: one per rank */
        if (!probe_all(o->path, TIMELINES, sizeof TIMELINES / sizeof *TIMELINES, file,
                       sizeof file)) {
            st = trace_cluster(o->path, &ranks, &n, d);
            if (st == CP_OK && n > 0)
                st = import_cluster(o, ranks, n, r, d);
            free(ranks);
            if (st != CP_OK || n > 0)
                return st;
        }
        st = resolve_dir(o->path, file, sizeof file, d);
        if (st != CP_OK)
            return st;
    } else if (is_file(o->path)) {
        snprintf(file, sizeof file, "%s", o->path);
    } else {
        return cp_diag_set(d, CP_ERR_IO, "%s: no such file or folder", o->path);
    }
    snprintf(r->source, sizeof r->source, "%s", file);
    if (o->format == CP_IMPORT_ASCEND_CSV ||
        (o->format == CP_IMPORT_AUTO && (ends_with(file, ".csv") || ends_with(file, ".csv.gz")))) {
        uint64_t t0 = cp_clock_ns();
        enum cp_status st = cp_imp_ascend_csv(file, o->trace_path, r, d);
        r->seconds = (double)(cp_clock_ns() - t0) / 1e9;
        return st == CP_OK ? ascend_extras(file, o->trace_path, r, d) : st;
    }
    char head[4096];
    size_t got = 0;
    enum cp_status st = sniff(file, head, sizeof head, &got, d);
    if (st != CP_OK)
        return st;
    if (cp_trace_is_sqlite(head, got)) {
        uint64_t t0 = cp_clock_ns();
        st = cp_imp_sqlite(file, o->trace_path, r, d);
        r->seconds = (double)(cp_clock_ns() - t0) / 1e9;
        return st == CP_OK ? ascend_extras(file, o->trace_path, r, d) : st;
    }
    if ((st = check_json(file, head, got, d)) != CP_OK)
        return st;
    if (o->format == CP_IMPORT_TRT ||
        (o->format == CP_IMPORT_AUTO && cp_imp_trt_sniff(head, got))) {
        uint64_t t0 = cp_clock_ns();
        st = cp_imp_trt(file, o->trace_path, r, d);
        r->seconds = (double)(cp_clock_ns() - t0) / 1e9;
        return st;
    }
    struct cp_imp_src src = {.name = file, .path = file};
    st = run_import(&src, o->format, o->trace_path, r, d);
    /* torch_npu's task table beside its timeline: its hardware columns */
    char csv[1200];
    const char *slash = strrchr(file, '/');
    if (st == CP_OK && r->format == CP_IMPORT_ASCEND && slash &&
        strcmp(slash, "/trace_view.json") == 0 &&
        (size_t)snprintf(csv, sizeof csv, "%.*s/kernel_details.csv", (int)(slash - file), file) <
            sizeof csv &&
        is_file(csv)) {
        uint64_t t0 = cp_clock_ns();
        if ((st = cp_imp_ascend_csv_counters(csv, o->trace_path, r->run_id, r, d)) != CP_OK)
            remove_runs(o->trace_path, &r->run_id, 1);
        r->seconds += (double)(cp_clock_ns() - t0) / 1e9;
    }
    return st == CP_OK ? ascend_extras(file, o->trace_path, r, d) : st;
}

enum cp_status cp_import_buffer(const char *name, const void *data, size_t size,
                                enum cp_import_format format, const char *trace_path,
                                struct cp_import_result *r, struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    r->run_id = -1;
    enum cp_status st = check_json(name, data, size < 64 ? size : 64, d);
    if (st != CP_OK)
        return st;
    snprintf(r->source, sizeof r->source, "%s", name);
    struct cp_imp_src src = {.name = name, .data = data, .size = size};
    return run_import(&src, format, trace_path, r, d);
}
