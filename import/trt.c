/* TensorRT's trtexec exports (docs/import.md): `--exportTimes` (one record
 * per inference: enqueue, host-to-device copy, compute and device-to-host
 * copy, in ms since trtexec started) and `--exportProfile` (per layer: the
 * total and average time over `count` profiled inferences). Both are small
 * (thousands of records), so they are read whole with jansson. A
 * `--exportLayerInfo` file beside a profile (same stem, .graph.json) names
 * each layer's type. */
#define _GNU_SOURCE /* memmem */
#include "import/import_internal.h"

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A number of ms as ns; false when absent, not a number or out of range. */
static bool ms_of(const json_t *o, const char *key, int64_t *ns)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return false;
    double x = json_number_value(v) * 1e6;
    if (!(fabs(x) < (double)CP_IMP_MAX_NS))
        return false;
    *ns = (int64_t)llround(x);
    return true;
}

static enum cp_status load(const char *path, json_t **out, struct cp_diag *d)
{
    json_error_t e;
    *out = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &e);
    if (!*out)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: line %d, column %d (byte %d): %s", path, e.line,
                           e.column, e.position, e.text);
    return CP_OK;
}

/* ---- --exportTimes ------------------------------------------------------------------ */

static enum cp_status times(const char *path, const json_t *a, const char *trace,
                            struct cp_import_result *r, struct cp_diag *d)
{
    size_t n = json_array_size(a);
    struct cp_imp_steps steps = {0};
    int64_t lo = 0, hi = 0;
    bool any = false;
    enum cp_status st = CP_OK;
    /* each record an iteration, from its enqueue to its last copy back */
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const json_t *o = json_array_get(a, i);
        int64_t s0, s1, lat;
        /* a bad record ends the loop with the steps so far, released below */
        if (!json_is_object(o)) {
            st = cp_diag_set(d, CP_ERR_INVALID, "%s: record %zu is not an object", path, i);
            break;
        }
        if (!ms_of(o, "startEnqMs", &s0) && !ms_of(o, "startH2dMs", &s0)) {
            st = cp_diag_set(d, CP_ERR_INVALID,
                             "%s: record %zu has neither startEnqMs nor startH2dMs", path, i);
            break;
        }
        if (!ms_of(o, "latencyMs", &lat) || lat < 0) {
            st = cp_diag_set(d, CP_ERR_INVALID, "%s: record %zu has no latencyMs", path, i);
            break;
        }
        if (!ms_of(o, "endD2hMs", &s1) || s1 < s0)
            s1 = s0 + lat;
        st = cp_imp_steps_add(&steps, s0, s1, (int64_t)i, d);
        lo = any && lo < s0 ? lo : s0;
        hi = any && hi > s1 ? hi : s1;
        any = true;
    }
    if (st == CP_OK && !any)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: no inference records", path);
    struct cp_imp_sink k;
    memset(&k, 0, sizeof k);
    k.run = -1;
    r->format = CP_IMPORT_TRT;
    snprintf(r->step_source, sizeof r->step_source, "exportTimes");
    if (st == CP_OK)
        st = cp_imp_sink_open(&k, trace, r->source, cp_import_format_name(r->format), r, d);
    static const struct {
        const char *start, *end, *name, *op;
        enum cp_trace_layer layer;
    } parts[] = {
        {"startEnqMs", "endEnqMs", "enqueue", NULL, CP_LAYER_RUNTIME},
        {"startH2dMs", "endH2dMs", "H2D", "Memcpy", CP_LAYER_DEVICE},
        {"startComputeMs", "endComputeMs", "compute", "Compute", CP_LAYER_DEVICE},
        {"startD2hMs", "endD2hMs", "D2H", "Memcpy", CP_LAYER_DEVICE},
    };
    struct cp_imp_val pid = {"trtexec", 7, false}, host = {"host", 4, false},
                      stream = {"stream", 6, false};
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const json_t *o = json_array_get(a, i);
        for (size_t p = 0; p < sizeof parts / sizeof *parts && st == CP_OK; p++) {
            int64_t s0, s1;
            if (!ms_of(o, parts[p].start, &s0) || !ms_of(o, parts[p].end, &s1))
                continue;
            if (s1 < s0)
                s1 = s0;
            int thread = 0;
            st = cp_imp_sink_thread(&k, &pid, parts[p].layer == CP_LAYER_DEVICE ? &stream : &host,
                                    &thread, d);
            int32_t kernel = -1;
            if (st == CP_OK && parts[p].op)
                st = cp_imp_sink_kernel(&k, parts[p].name, strlen(parts[p].name), parts[p].op,
                                        "TensorRT", NULL, &kernel, d);
            uint64_t rel = s0 > lo ? (uint64_t)(s0 - lo) : 0;
            if (st == CP_OK)
                st = cp_imp_sink_event(&k, parts[p].layer, parts[p].name, strlen(parts[p].name),
                                       kernel, (int32_t)i, rel, rel + (uint64_t)(s1 - s0), thread,
                                       d);
        }
    }
    /* the iteration's latency is trtexec's own figure */
    if (st == CP_OK)
        for (size_t i = 0; i < n; i++) {
            int64_t lat;
            if (ms_of(json_array_get(a, i), "latencyMs", &lat))
                steps.v[i].end = steps.v[i].start + lat;
        }
    if (st == CP_OK)
        st = cp_imp_sink_meta(&k, "summary", "{\"format\":\"trt\",\"file\":\"exportTimes\"}", d);
    if (st == CP_OK)
        st = cp_imp_steps_finish(&steps, &k, lo, hi, d);
    if (st != CP_OK)
        cp_imp_sink_abort(&k);
    cp_imp_steps_release(&steps);
    return st;
}

/* ---- --exportProfile ---------------------------------------------------------------- */

/* The layer types of a --exportLayerInfo file (Layers[].Name, LayerType). */
static const json_t *layer_info(const json_t *graph, const char *name)
{
    const json_t *layers = json_object_get(graph, "Layers");
    for (size_t i = 0; i < json_array_size(layers); i++) {
        const json_t *l = json_array_get(layers, i);
        const char *n = json_string_value(json_object_get(l, "Name"));
        if (n && strcmp(n, name) == 0)
            return l;
    }
    return NULL;
}

/* A layer's type from its name when no layer info says it: trtexec's
 * reformatting layers, else "Layer". */
static const char *type_from_name(const char *name)
{
    return strncmp(name, "Reformatting CopyNode", 21) == 0 ? "Reformat" : "Layer";
}

static enum cp_status profile(const char *path, const json_t *a, const char *trace,
                              struct cp_import_result *r, struct cp_diag *d)
{
    /* element 0: {"count": N}; then the layers */
    const json_t *head = json_array_get(a, 0);
    int64_t count = json_integer_value(json_object_get(head, "count"));
    if (!json_is_integer(json_object_get(head, "count")) || count <= 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: record 0 is not {\"count\": N} with N > 0, as trtexec writes it",
                           path);
    /* the layer info beside it: X.profile.json -> X.graph.json */
    json_t *graph = NULL;
    char gpath[1200];
    const char *suffix = strstr(path, ".profile.json");
    if (suffix && (size_t)(suffix - path) < sizeof gpath - 12) {
        snprintf(gpath, sizeof gpath, "%.*s.graph.json", (int)(suffix - path), path);
        if (cp_path_exists(gpath)) {
            struct cp_diag ignored;
            cp_diag_init(&ignored);
            (void)load(gpath, &graph, &ignored);
        }
    }
    struct cp_imp_sink k;
    memset(&k, 0, sizeof k);
    k.run = -1;
    r->format = CP_IMPORT_TRT;
    snprintf(r->step_source, sizeof r->step_source, "exportProfile");
    enum cp_status st =
        cp_imp_sink_open(&k, trace, r->source, cp_import_format_name(r->format), r, d);
    struct cp_imp_val pid = {"trtexec", 7, false}, stream = {"stream", 6, false};
    int thread = 0;
    if (st == CP_OK)
        st = cp_imp_sink_thread(&k, &pid, &stream, &thread, d);
    /* one representative inference: the layers' averages, end to end, in
     * the profile's order (docs/import.md) */
    uint64_t t = 0;
    for (size_t i = 1; i < json_array_size(a) && st == CP_OK; i++) {
        const json_t *l = json_array_get(a, i);
        const char *name = json_string_value(json_object_get(l, "name"));
        int64_t avg;
        if (!name || !ms_of(l, "averageMs", &avg) || avg < 0) {
            st = cp_diag_set(d, CP_ERR_INVALID, "%s: layer record %zu lacks a name or an averageMs",
                             path, i);
            break;
        }
        const json_t *info = graph ? layer_info(graph, name) : NULL;
        const char *type = info ? json_string_value(json_object_get(info, "LayerType")) : NULL;
        const char *tactic = info ? json_string_value(json_object_get(info, "TacticName")) : NULL;
        int32_t kernel = -1;
        st = cp_imp_sink_kernel(&k, name, strlen(name), type ? type : type_from_name(name),
                                tactic ? tactic : "TensorRT", NULL, &kernel, d);
        int64_t median;
        if (st == CP_OK && ms_of(l, "medianMs", &median))
            st = cp_imp_sink_acc(&k, 0, "trt.median_ns_sum", (double)median, 0, true, d);
        if (st == CP_OK)
            st = cp_imp_sink_event(&k, CP_LAYER_DEVICE, name, strlen(name), kernel, 0, t,
                                   t + (uint64_t)avg, thread, d);
        t += (uint64_t)avg;
    }
    if (st == CP_OK)
        st = cp_imp_sink_counter(&k, -1, "trt.profiled_count", (double)count, 0, d);
    if (st == CP_OK)
        st = cp_imp_sink_meta(&k, "summary",
                              graph ? "{\"format\":\"trt\",\"file\":\"exportProfile\","
                                      "\"layer_info\":true}"
                                    : "{\"format\":\"trt\",\"file\":\"exportProfile\","
                                      "\"layer_info\":false}",
                              d);
    struct cp_imp_steps none = {0};
    if (st == CP_OK)
        st = cp_imp_steps_finish(&none, &k, 0, (int64_t)t, d);
    if (st != CP_OK)
        cp_imp_sink_abort(&k);
    json_decref(graph);
    return st;
}

bool cp_imp_trt_sniff(const char *head, size_t n)
{
    /* trtexec writes these keys in its first record */
    return (memmem(head, n, "\"count\"", 7) && memmem(head, n, "\"averageMs\"", 11)) ||
           (memmem(head, n, "\"startEnqMs\"", 12) || memmem(head, n, "\"latencyMs\"", 11));
}

enum cp_status cp_imp_trt(const char *path, const char *trace_path, struct cp_import_result *r,
                          struct cp_diag *d)
{
    json_t *j = NULL;
    enum cp_status st = load(path, &j, d);
    if (st != CP_OK)
        return st;
    if (!json_is_array(j) || json_array_size(j) == 0)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: not a trtexec export (an array of records)", path);
    else if (json_object_get(json_array_get(j, 0), "count"))
        st = profile(path, j, trace_path, r, d);
    else
        st = times(path, j, trace_path, r, d);
    json_decref(j);
    return st;
}
