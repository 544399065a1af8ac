/* The Chrome trace-event dialects onto the trace's layers (docs/import.md).
 *
 * The file is parsed once (chrome_scan.c): what the writing needs first is
 * gathered and each event goes, parsed and compact, to a spill file
 * (spill.c). Then the spill is read back (chrome_write.c): each event is
 * mapped to a layer, stamped with its step and written. This file runs
 * the two and records what was read. */
#include "import/chrome_internal.h"
#include "core/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum cp_status record_summary(struct cp_imp_sink *k, const struct cp_import_result *r,
                                     const struct cp_imp_read_info *info, struct cp_diag *d)
{
    json_t *j = json_object(), *sk = json_object();
    bool ok = j && sk;
    for (int i = 0; ok && i < CP_SKIP_N; i++)
        ok = cp_json_set_int(sk, cp_import_skip_name((enum cp_import_skip)i),
                             (int64_t)r->skipped[i]);
    ok = ok && cp_json_set_str(j, "format", cp_import_format_name(r->format)) &&
         cp_json_set_str(j, "source", r->source) &&
         cp_json_set_int(j, "bytes", (int64_t)info->bytes) &&
         cp_json_set_int(j, "application_events", (int64_t)r->events[0]) &&
         cp_json_set_int(j, "runtime_events", (int64_t)r->events[1]) &&
         cp_json_set_int(j, "device_events", (int64_t)r->events[2]) &&
         cp_json_set_int(j, "control_bytes_repaired", (int64_t)info->control_bytes) &&
         cp_json_set_str(j, "steps", r->step_source);
    if (ok) {
        ok = cp_json_set(j, "skipped", sk);
        sk = NULL;
    }
    char *text = ok ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    json_decref(sk);
    if (!text)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = cp_imp_sink_meta(k, "summary", text, d);
    free(text);
    return st;
}

enum cp_status cp_imp_chrome(const struct cp_imp_src *src, enum cp_import_format format,
                             const char *trace_path, struct cp_import_result *r, struct cp_diag *d)
{
    struct cp_imp_scan s;
    memset(&s, 0, sizeof s);
    cp_strmap_init(&s.pname);
    struct cp_imp_sink k;
    memset(&k, 0, sizeof k);
    k.run = -1;
    struct cp_imp_read_info info;
    enum cp_status st = cp_imp_spill_open(&s.spill, d);
    if (st != CP_OK)
        goto out;
    struct cp_imp_handler h = cp_imp_scan_handler(&s);
    st = cp_imp_read_chrome(src, &h, &info, d);
    if (st == CP_OK && !info.found_events)
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: JSON, but not a trace: neither an array of events nor an object "
                         "with \"traceEvents\"",
                         src->name);
    if (st == CP_OK && !s.have_ts)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: no event with a time (\"ts\") in %llu bytes",
                         src->name, (unsigned long long)info.bytes);
    if (st != CP_OK)
        goto out;
    r->format = format == CP_IMPORT_AUTO ? cp_imp_scan_format(&s) : format;
    r->metadata = s.metadata;
    if ((st = cp_imp_scan_finish(&s, d)) != CP_OK)
        goto out;
    snprintf(r->step_source, sizeof r->step_source, "%s",
             s.steps.n == 0          ? "window"
             : s.steps_are_model_run ? "model_run"
                                     : "ProfilerStep");
    if ((st = cp_imp_sink_open(&k, trace_path, r->source, cp_import_format_name(r->format), r,
                               d)) != CP_OK)
        goto out;
    for (size_t i = 0; i < s.n_top && st == CP_OK; i++) {
        char key[200];
        snprintf(key, sizeof key, "profile.%.150s", s.top_key[i]);
        st = cp_imp_sink_meta(&k, key, s.top_val[i], d);
    }
    if (st != CP_OK || (st = cp_imp_chrome_write(&s, &k, r, d)) != CP_OK)
        goto out;
    r->skipped[CP_SKIP_FLOW] += s.flows;
    r->skipped[CP_SKIP_INSTANT] += s.instants;
    r->bytes = info.bytes;
    st = record_summary(&k, r, &info, d);
    if (st == CP_OK)
        st = cp_imp_steps_finish(&s.steps, &k, s.min_ts, s.max_end, d);
out:
    if (st != CP_OK)
        cp_imp_sink_abort(&k);
    cp_imp_scan_release(&s);
    return st;
}
