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
    static const char *const names[CP_SKIP_N] = {"flow",    "instant",  "derived",    "fence",
                                                 "no_time", "unpaired", "other_phase"};
    return (unsigned)s < CP_SKIP_N ? names[s] : "?";
}

/* ---- which file ------------------------------------------------------------------- */

static bool is_dir(const char *p)
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

/* The first file (by name) in dir whose name starts with `prefix` and
 * ends with `suffix`. */
static bool first_match(const char *dir, const char *prefix, const char *suffix, char *out,
                        size_t n)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return false;
    char best[512] = "";
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 || !ends_with(de->d_name, suffix))
            continue;
        if (!best[0] || strcmp(de->d_name, best) < 0)
            snprintf(best, sizeof best, "%s", de->d_name);
    }
    closedir(dp);
    if (!best[0])
        return false;
    snprintf(out, n, "%s/%s", dir, best);
    return true;
}

/* A run folder's profile: torch_npu's trace_view.json, msprof's
 * msprof_*.json, or the one Chrome trace (*.json, *.json.gz) in it. */
static enum cp_status resolve_dir(const char *dir, char *out, size_t n, struct cp_diag *d)
{
    char p[1100];
    snprintf(p, sizeof p, "%s/ASCEND_PROFILER_OUTPUT/trace_view.json", dir);
    if (is_file(p)) {
        snprintf(out, n, "%s", p);
        return CP_OK;
    }
    snprintf(p, sizeof p, "%s/trace_view.json", dir);
    if (is_file(p)) {
        snprintf(out, n, "%s", p);
        return CP_OK;
    }
    snprintf(p, sizeof p, "%s/mindstudio_profiler_output", dir);
    if (is_dir(p) && first_match(p, "msprof_", ".json", out, n))
        return CP_OK;
    if (first_match(dir, "msprof_", ".json", out, n))
        return CP_OK;
    /* one trace file in the folder */
    DIR *dp = opendir(dir);
    if (!dp)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot read the folder: %s", dir, strerror(errno));
    size_t found = 0;
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
    if (found > 1)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: %zu JSON files and no trace_view.json or msprof_*.json among "
                           "them: name the one to import",
                           dir, found);
    /* no JSON timeline: the DB export, then the task table */
    snprintf(p, sizeof p, "%s/ASCEND_PROFILER_OUTPUT", dir);
    if (is_dir(p) && first_match(p, "ascend_pytorch_profiler", ".db", out, n))
        return CP_OK;
    if (first_match(dir, "ascend_pytorch_profiler", ".db", out, n) ||
        first_match(dir, "msprof_", ".db", out, n))
        return CP_OK;
    static const char *const csvs[] = {"ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                                       "kernel_details.csv"};
    for (size_t i = 0; i < sizeof csvs / sizeof *csvs; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, csvs[i]);
        if (is_file(p)) {
            snprintf(out, n, "%s", p);
            return CP_OK;
        }
    }
    snprintf(p, sizeof p, "%s/mindstudio_profiler_output", dir);
    if (is_dir(p) && first_match(p, "op_summary_", ".csv", out, n))
        return CP_OK;
    if (first_match(dir, "op_summary_", ".csv", out, n))
        return CP_OK;
    return cp_diag_set(d, CP_ERR_INVALID,
                       "%s: no profile found (looked for ASCEND_PROFILER_OUTPUT/trace_view.json, "
                       "trace_view.json, msprof_*.json, a single *.json or *.json.gz, "
                       "kernel_details.csv and op_summary_*.csv)",
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

enum cp_status cp_import(const struct cp_import_opts *o, struct cp_import_result *r,
                         struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    r->run_id = -1;
    if (!o->path || !o->trace_path)
        return cp_diag_set(d, CP_ERR_INVALID, "import: no profile or no trace named");
    char file[1100];
    if (is_dir(o->path)) {
        enum cp_status st = resolve_dir(o->path, file, sizeof file, d);
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
        return st;
    }
    char head[4096];
    size_t got = 0;
    enum cp_status st = sniff(file, head, sizeof head, &got, d);
    if (st != CP_OK)
        return st;
    if (got >= 16 && memcmp(head, "SQLite format 3", 16) == 0) {
        uint64_t t0 = cp_clock_ns();
        st = cp_imp_sqlite(file, o->trace_path, r, d);
        r->seconds = (double)(cp_clock_ns() - t0) / 1e9;
        return st;
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
    return run_import(&src, o->format, o->trace_path, r, d);
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
