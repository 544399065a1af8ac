/*
 * Machine identity, the calibration cache and the roofline helpers.
 *
 * The cache file (docs/calibration.md) is a JSON object written atomically:
 *   {"schema": "cannprof-calibration", "schema_version": 1,
 *    "tool_version": "0.1.0", "cache_key": "<16 hex>", "cpu_model": ...,
 *    "isa": ..., "onednn": ..., "cores": N, "has_bf16": bool,
 *    "threads_used": N, "peak_flops_f32": FLOP/s, "peak_flops_f32_1t": ...,
 *    "peak_flops_bf16": ..., "peak_flops_bf16_1t": ..., "mem_bw": bytes/s,
 *    "mem_bw_convention": "...", "impl_f32": ..., "impl_bf16": ...,
 *    "matmul_size": N, "triad_array_bytes": N, "budget_ms": N,
 *    "load_avg": x, "measured_at": "..."}
 * Reals are printed with 17 significant digits, so a round trip through
 * the file gives back the very same doubles.
 */
#include "rules/calibrate.h"
#include "core/host.h"
#include "core/json.h"

#include <oneapi/dnnl/dnnl.h>

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCHEMA_NAME "cannprof-calibration"
#define TRIAD_CONVENTION                                                                           \
    "triad a[i] = b[i] + s*c[i] on fp32 arrays: 12 bytes per element (read b, read c, "            \
    "write a; write-allocate not counted, as in STREAM)"

/* ---- detection ------------------------------------------------------------- */

static void make_cache_key(struct cp_machine *m)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_printf(&b, "%s\n%d\n%s\n%s\n%d\n%s\n%s", SCHEMA_NAME, CP_CALIBRATE_SCHEMA_VERSION,
                  m->cpu_model, m->isa, m->cores, CP_VERSION_STRING, m->onednn);
    uint64_t h = b.data ? cp_hash64(b.data, b.len) : 0;
    cp_buf_release(&b);
    snprintf(m->cache_key, sizeof m->cache_key, "%016llx", (unsigned long long)h);
}

void cp_machine_detect(struct cp_machine *out)
{
    memset(out, 0, sizeof *out);
    struct cp_host *h = malloc(sizeof *h);
    if (h) {
        cp_host_detect(h);
        snprintf(out->cpu_model, sizeof out->cpu_model, "%.127s", h->cpu_model);
        snprintf(out->isa, sizeof out->isa, "%.255s", h->isa);
        out->has_bf16 = h->has_bf16;
        out->cores = h->cores;
        free(h);
    } else {
        snprintf(out->cpu_model, sizeof out->cpu_model, "unknown");
        out->cores = 1;
    }
    const dnnl_version_t *v = dnnl_version();
    if (v)
        snprintf(out->onednn, sizeof out->onednn, "%d.%d.%d", v->major, v->minor, v->patch);
    else
        snprintf(out->onednn, sizeof out->onednn, "unknown");
    make_cache_key(out);
}

/* ---- roofline helpers ------------------------------------------------------ */

static bool uses_bf16(const struct cp_machine *m, bool bf16)
{
    return bf16 && m->has_bf16 && m->peak_flops_bf16 > 0;
}

double cp_machine_peak_flops(const struct cp_machine *m, bool bf16, int threads)
{
    bool b = uses_bf16(m, bf16);
    double all = b ? m->peak_flops_bf16 : m->peak_flops_f32;
    double one = b ? m->peak_flops_bf16_1t : m->peak_flops_f32_1t;
    if (threads <= 0 || threads >= m->threads_used || !(one > 0))
        return all;
    double v = one * threads;
    return v < all ? v : all;
}

double cp_machine_ridge(const struct cp_machine *m, bool bf16)
{
    double peak = cp_machine_peak_flops(m, bf16, 0);
    return m->mem_bw > 0 && peak > 0 ? peak / m->mem_bw : 0;
}

/* ---- JSON -------------------------------------------------------------------- */

/* The cache file's object; with `full`, also where the figures came from
 * and the ridge points. A figure that is not finite is null (the reader
 * then measures again). NULL on out-of-memory. */
static json_t *machine_to_json(const struct cp_machine *m, bool full)
{
    json_t *o = json_object();
    bool ok = o && cp_json_set_str(o, "schema", SCHEMA_NAME) &&
              cp_json_set_int(o, "schema_version", CP_CALIBRATE_SCHEMA_VERSION) &&
              cp_json_set_str(o, "tool_version", CP_VERSION_STRING) &&
              cp_json_set_str(o, "cache_key", m->cache_key) &&
              cp_json_set_str(o, "cpu_model", m->cpu_model) && cp_json_set_str(o, "isa", m->isa) &&
              cp_json_set_str(o, "onednn", m->onednn) && cp_json_set_int(o, "cores", m->cores) &&
              cp_json_set_bool(o, "has_bf16", m->has_bf16) &&
              cp_json_set_int(o, "threads_used", m->threads_used) &&
              cp_json_set_num(o, "peak_flops_f32", m->peak_flops_f32) &&
              cp_json_set_num(o, "peak_flops_f32_1t", m->peak_flops_f32_1t) &&
              cp_json_set_num(o, "peak_flops_bf16", m->peak_flops_bf16) &&
              cp_json_set_num(o, "peak_flops_bf16_1t", m->peak_flops_bf16_1t) &&
              cp_json_set_num(o, "mem_bw", m->mem_bw) &&
              cp_json_set_str(o, "mem_bw_convention", TRIAD_CONVENTION) &&
              cp_json_set_str(o, "impl_f32", m->impl_f32) &&
              cp_json_set_str(o, "impl_bf16", m->impl_bf16) &&
              cp_json_set_int(o, "matmul_size", m->matmul_size) &&
              cp_json_set_int(o, "triad_array_bytes", (int64_t)m->triad_array_bytes) &&
              cp_json_set_int(o, "budget_ms", m->budget_ms) &&
              cp_json_set_num(o, "load_avg", m->load_avg) &&
              cp_json_set_str(o, "measured_at", m->measured_at);
    if (ok && full) {
        json_t *r = json_object();
        ok = cp_json_set_str(o, "source", m->source) &&
             cp_json_set_str(o, "cache_path", m->cache_path) &&
             cp_json_set_str(o, "cache_note", m->cache_note) && r &&
             cp_json_set_num(r, "f32", cp_machine_ridge(m, false)) &&
             cp_json_set(r, "bf16",
                         m->has_bf16 ? cp_json_num(cp_machine_ridge(m, true)) : json_null());
        if (!cp_json_set(o, "ridge_flop_per_byte", r))
            ok = false;
    }
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_machine_to_json(const struct cp_machine *m)
{
    return machine_to_json(m, true);
}

/* Copy string member `key` into out[n]; false when missing, not a string
 * or too long. */
static bool get_str(json_t *o, const char *key, char *out, size_t n)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s || strlen(s) >= n)
        return false;
    snprintf(out, n, "%s", s);
    return true;
}

static bool get_int(json_t *o, const char *key, json_int_t lo, json_int_t hi, json_int_t *out)
{
    json_t *j = json_object_get(o, key);
    if (!json_is_integer(j))
        return false;
    *out = json_integer_value(j);
    return *out >= lo && *out <= hi;
}

/* A finite number >= 0 (integers accepted too: a hand-edited file). */
static bool get_num(json_t *o, const char *key, double *out)
{
    json_t *j = json_object_get(o, key);
    if (!json_is_number(j))
        return false;
    *out = json_number_value(j);
    return isfinite(*out) && *out >= 0;
}

/* Check a parsed cache file against the detected machine `id` and fill
 * *m. False with why[why_n] when it cannot be used. */
static bool machine_from_json(json_t *o, const struct cp_machine *id, struct cp_machine *m,
                              char *why, size_t why_n)
{
    memset(m, 0, sizeof *m);
    json_int_t v;
    if (!json_is_object(o) || !get_str(o, "schema", why, why_n) || strcmp(why, SCHEMA_NAME) != 0) {
        snprintf(why, why_n, "not a cannprof calibration file");
        return false;
    }
    if (!get_int(o, "schema_version", INT32_MIN, INT32_MAX, &v) ||
        v != CP_CALIBRATE_SCHEMA_VERSION) {
        snprintf(why, why_n, "schema_version is not %d", CP_CALIBRATE_SCHEMA_VERSION);
        return false;
    }
    if (!get_str(o, "cache_key", m->cache_key, sizeof m->cache_key) ||
        !get_str(o, "cpu_model", m->cpu_model, sizeof m->cpu_model) ||
        !get_str(o, "isa", m->isa, sizeof m->isa) ||
        !get_str(o, "onednn", m->onednn, sizeof m->onednn) || !get_int(o, "cores", 1, 100000, &v)) {
        snprintf(why, why_n, "the machine description is missing or malformed");
        return false;
    }
    m->cores = (int)v;
    json_t *hb = json_object_get(o, "has_bf16");
    m->has_bf16 = json_is_true(hb);
    if (!json_is_boolean(hb) || strcmp(m->cache_key, id->cache_key) != 0 ||
        strcmp(m->cpu_model, id->cpu_model) != 0 || strcmp(m->isa, id->isa) != 0 ||
        strcmp(m->onednn, id->onednn) != 0 || m->cores != id->cores ||
        m->has_bf16 != id->has_bf16) {
        snprintf(why, why_n, "it describes another machine or tool version (key %.16s)",
                 m->cache_key);
        return false;
    }
    const struct {
        const char *key;
        double *v;
        bool positive; /* else: positive exactly when has_bf16 */
    } nums[] = {
        {"peak_flops_f32", &m->peak_flops_f32, true},
        {"peak_flops_f32_1t", &m->peak_flops_f32_1t, true},
        {"peak_flops_bf16", &m->peak_flops_bf16, false},
        {"peak_flops_bf16_1t", &m->peak_flops_bf16_1t, false},
        {"mem_bw", &m->mem_bw, true},
    };
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        bool want = nums[i].positive || m->has_bf16;
        if (!get_num(o, nums[i].key, nums[i].v) || (want ? !(*nums[i].v > 0) : *nums[i].v != 0)) {
            snprintf(why, why_n, "\"%s\" is missing or not a plausible figure", nums[i].key);
            return false;
        }
    }
    json_int_t size, bytes, budget;
    if (!get_int(o, "threads_used", 1, 100000, &v) ||
        !get_str(o, "impl_f32", m->impl_f32, sizeof m->impl_f32) ||
        !get_str(o, "impl_bf16", m->impl_bf16, sizeof m->impl_bf16) ||
        !get_int(o, "matmul_size", 1, INT32_MAX, &size) ||
        !get_int(o, "triad_array_bytes", 1, INT64_MAX, &bytes) ||
        !get_int(o, "budget_ms", 1, INT32_MAX, &budget) ||
        !get_str(o, "measured_at", m->measured_at, sizeof m->measured_at) ||
        !json_is_number(json_object_get(o, "load_avg"))) {
        snprintf(why, why_n, "how the figures were measured is missing or malformed");
        return false;
    }
    m->threads_used = (int)v;
    m->matmul_size = size;
    m->triad_array_bytes = (uint64_t)bytes;
    m->budget_ms = (long)budget;
    m->load_avg = json_number_value(json_object_get(o, "load_avg"));
    return true;
}

/* ---- cache folder ------------------------------------------------------------ */

enum cp_status cp_calibrate_cache_dir(const char *cache_dir, char *out, size_t n, struct cp_diag *d)
{
    if (!cache_dir || !*cache_dir) {
        struct cp_diag local;
        cp_diag_init(&local);
        enum cp_status st = cp_cache_dir(out, n, &local);
        return st == CP_OK ? CP_OK
                           : cp_diag_set(d, st, "calibrate: %s; give a cache folder", local.msg);
    }
    int w = snprintf(out, n, "%s", cache_dir);
    if (w < 0 || (size_t)w >= n) {
        if (n)
            out[0] = '\0';
        return cp_diag_set(d, CP_ERR_IO, "calibrate: cache folder path is too long (%d bytes)", w);
    }
    return CP_OK;
}

enum cp_status cp_calibrate_cache_mkdir(const char *dir, struct cp_diag *d)
{
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st = cp_mkdir_p(dir, 0700, &local);
    return st == CP_OK ? CP_OK : cp_diag_set(d, st, "calibrate: cache folder: %s", local.msg);
}

/* Try the cache file at `path`. True with *m filled when it is usable;
 * else false, with why[why_n] set when a file was there but unusable. */
static bool cache_load(const char *path, const struct cp_machine *id, struct cp_machine *m,
                       char *why, size_t why_n)
{
    why[0] = '\0';
    if (access(path, F_OK) != 0)
        return false;
    char reason[160];
    json_error_t err;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    bool ok = false;
    if (!o)
        snprintf(reason, sizeof reason, "it does not parse (line %d: %.100s)", err.line, err.text);
    else
        ok = machine_from_json(o, id, m, reason, sizeof reason);
    json_decref(o);
    if (!ok)
        snprintf(why, why_n, "the old cache file was replaced: %s", reason);
    return ok;
}

static enum cp_status cache_store(const char *path, const struct cp_machine *m, struct cp_diag *d)
{
    json_t *o = machine_to_json(m, false);
    enum cp_status st =
        o ? cp_json_write_file(o, path, d)
          : cp_diag_set(d, CP_ERR_NOMEM, "calibrate: out of memory writing %s", path);
    json_decref(o);
    return st;
}

enum cp_status cp_calibrate_run(const struct cp_calibrate_options *o, struct cp_machine *out,
                                struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    char dir[900], path[1024];
    enum cp_status st;
    if ((st = cp_calibrate_cache_dir(o ? o->cache_dir : NULL, dir, sizeof dir, d)) != CP_OK ||
        (st = cp_calibrate_cache_mkdir(dir, d)) != CP_OK)
        return st;
    struct cp_machine id, m;
    cp_machine_detect(&id);
    snprintf(path, sizeof path, "%s/calibration-%s.json", dir, id.cache_key);
    char note[sizeof m.cache_note];
    if (cache_load(path, &id, &m, note, sizeof note) && !(o && o->force)) {
        snprintf(m.source, sizeof m.source, "cache");
        snprintf(m.cache_path, sizeof m.cache_path, "%s", path);
        *out = m;
        return CP_OK;
    }
    /* Say so now rather than after seconds of measuring. */
    if (access(dir, W_OK | X_OK) != 0)
        return cp_diag_set(d, CP_ERR_WRITE, "calibrate: cache folder '%s' is not writable: %s", dir,
                           strerror(errno));
    if ((st = cp_calibrate_measure(o ? o->budget_ms : 0, &m, d)) != CP_OK)
        return st;
    if ((st = cache_store(path, &m, d)) != CP_OK)
        return st;
    snprintf(m.cache_path, sizeof m.cache_path, "%s", path);
    snprintf(m.cache_note, sizeof m.cache_note, "%s", note);
    *out = m;
    return CP_OK;
}

enum cp_status cp_calibrate(const char *cache_dir, bool force, struct cp_machine *out,
                            struct cp_diag *d)
{
    struct cp_calibrate_options o = {.cache_dir = cache_dir, .force = force};
    return cp_calibrate_run(&o, out, d);
}
