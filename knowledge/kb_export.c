/* Exporting the knowledge base as JSON Lines (format: docs/kb-schema.md,
 * "Sharing: JSON Lines"). Each line is one row turned into an object by
 * column name, with row ids replaced by the natural keys of what they point
 * at, so a file can be merged into another knowledge base
 * (kb_import.c). Records come in dependency order: models and hardware,
 * baselines, validations, sessions, candidates, measurements, strategies. */
#include "core/json.h"
#include "knowledge/kb_internal.h"
#include "knowledge/kb_tuning.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The export queries: the first column is the record type; every other
 * column becomes a key of the same name. BLOB columns are sample arrays
 * (little-endian u64) and become arrays of integers. */
static const char *const EXPORT_SQL[] = {
    "SELECT 'model' AS type, structure_hash, source_hash, name, model_class, params, flops, "
    "n_nodes, op_histogram, inputs, has_attention, has_conv, has_layernorm, has_groupnorm, "
    "has_batchnorm, has_gelu, created_at, updated_at FROM models ORDER BY id",

    "SELECT 'hardware' AS type, signature, cpu_model, isa, cores, soc_version, tool_version, "
    "created_at FROM hardware ORDER BY id",

    "SELECT 'baseline' AS type, service, tag, created_at, trace_path, run_id, run_kind, "
    "run_created_at, model_path, model_hash, config_id, batch, threads, n, latency_ns, "
    "device_ns, probe_ns, mean_ns, median_ns, p99_ns, weight_bytes, arena_bytes, peak_bytes, "
    "peak_rss_bytes, precision_loss FROM baselines ORDER BY id",

    "SELECT 'validation' AS type, created_at, service, baseline_tag, trace_path, verdict, "
    "figures_json, exit_code, alert_attempted, alert_delivered, alert_error FROM validations "
    "ORDER BY id",

    "SELECT 'session' AS type, s.uid, s.key, m.structure_hash AS model_structure_hash, "
    "m.source_hash AS model_source_hash, h.signature AS hardware, s.model_path, s.target, "
    "s.constraints, s.status, s.created_at, s.updated_at, s.baseline_config, s.best_config, "
    "b.step AS best_step, b.delta AS best_delta, s.budget, s.evaluations, s.baseline_median_ns, "
    "s.best_median_ns, s.out_dir, s.stop_reason FROM sessions s "
    "LEFT JOIN models m ON m.id = s.model_id LEFT JOIN hardware h ON h.id = s.hw_id "
    "LEFT JOIN candidates b ON b.id = s.best_candidate_id ORDER BY s.id",

    "SELECT 'candidate' AS type, s.uid AS session, c.step, c.delta, c.source, c.config_json, "
    "c.config_id, c.om_path, c.trace_path, c.status, c.reason, c.expected_gain, "
    "c.measured_gain, c.ci_lo, c.ci_hi, c.p, c.precision_loss, c.memory_bytes, c.median_ns, "
    "c.throughput, c.created_at FROM candidates c JOIN sessions s ON s.id = c.session_id "
    "ORDER BY c.id",

    "SELECT 'measurement' AS type, s.uid AS session, c.step, c.delta, x.role, x.n, x.samples_ns "
    "FROM measurements x JOIN candidates c ON c.id = x.candidate_id "
    "JOIN sessions s ON s.id = c.session_id ORDER BY c.id, x.role",

    "SELECT 'strategy' AS type, m.structure_hash AS model_structure_hash, "
    "m.source_hash AS model_source_hash, h.signature AS hardware, s.uid AS session, t.delta, "
    "t.gain, t.held, t.created_at FROM strategies t JOIN models m ON m.id = t.model_id "
    "JOIN hardware h ON h.id = t.hw_id LEFT JOIN sessions s ON s.id = t.session_id "
    "ORDER BY t.id",
};

/* A sample BLOB as a JSON array; NULL when its size is not a multiple of 8
 * or out of memory. */
static json_t *samples_json(const uint8_t *p, size_t bytes)
{
    if (bytes % 8 != 0)
        return NULL;
    json_t *a = json_array();
    for (size_t i = 0; a && i < bytes / 8; i++) {
        uint64_t x = 0;
        for (int k = 7; k >= 0; k--)
            x = (x << 8) | p[i * 8 + (size_t)k];
        if (json_array_append_new(a, json_integer((json_int_t)x)) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* One row as an object keyed by column name. OUT: *out. */
static enum cp_status row_json(struct cp_kb *kb, sqlite3_stmt *st, json_t **out, struct cp_diag *d)
{
    *out = NULL;
    json_t *o = json_object();
    if (!o)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting", kb->path);
    int n = sqlite3_column_count(st);
    for (int i = 0; i < n; i++) {
        const char *name = sqlite3_column_name(st, i);
        json_t *v = NULL;
        switch (sqlite3_column_type(st, i)) {
        case SQLITE_INTEGER:
            v = json_integer((json_int_t)sqlite3_column_int64(st, i));
            break;
        case SQLITE_FLOAT: {
            double x = sqlite3_column_double(st, i);
            v = isfinite(x) ? json_real(x) : json_null();
            break;
        }
        case SQLITE_TEXT: {
            const char *t = (const char *)sqlite3_column_text(st, i);
            v = json_string(t ? t : "");
            if (!v) {
                json_decref(o);
                return cp_diag_set(d, CP_ERR_CORRUPT,
                                   "%s: a %s record's '%s' is not valid UTF-8; it cannot be "
                                   "exported",
                                   kb->path, (const char *)sqlite3_column_text(st, 0), name);
            }
            break;
        }
        case SQLITE_BLOB:
            v = samples_json(sqlite3_column_blob(st, i), (size_t)sqlite3_column_bytes(st, i));
            if (!v) {
                json_decref(o);
                return cp_diag_set(d, CP_ERR_CORRUPT, "%s: a %s record's '%s' samples are damaged",
                                   kb->path, (const char *)sqlite3_column_text(st, 0), name);
            }
            break;
        default:
            v = json_null();
            break;
        }
        if (!v || json_object_set_new(o, name, v) != 0) {
            json_decref(o);
            return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting", kb->path);
        }
    }
    *out = o;
    return CP_OK;
}

enum cp_status cp_kb_export_jsonl(struct cp_kb *kb, struct cp_buf *out, struct cp_diag *d)
{
    /* One read transaction: a consistent snapshot while tuners keep writing. */
    enum cp_status ret = cp_kb_exec(kb, "BEGIN", "exporting", d);
    if (ret != CP_OK)
        return ret;
    for (size_t q = 0; q < sizeof EXPORT_SQL / sizeof EXPORT_SQL[0] && ret == CP_OK; q++) {
        sqlite3_stmt *st = NULL;
        if ((ret = cp_kb_prepare(kb, EXPORT_SQL[q], &st, "exporting", d)) != CP_OK)
            break;
        int rc = SQLITE_DONE;
        while (ret == CP_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            json_t *o = NULL;
            if ((ret = row_json(kb, st, &o, d)) != CP_OK)
                break;
            bool ok = cp_json_dump(o, false, out) == CP_OK;
            json_decref(o);
            if (!ok) {
                ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting", kb->path);
                break;
            }
            cp_buf_putc(out, '\n');
        }
        if (ret == CP_OK && rc != SQLITE_DONE)
            ret = cp_kb_db_error(kb, d, "exporting");
        sqlite3_finalize(st);
    }
    cp_kb_rollback(kb);
    if (ret == CP_OK && cp_buf_status(out) != CP_OK)
        ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting", kb->path);
    return ret;
}

enum cp_status cp_kb_export_jsonl_file(struct cp_kb *kb, const char *path, struct cp_diag *d)
{
    struct cp_buf b;
    cp_buf_init(&b);
    enum cp_status ret = cp_kb_export_jsonl(kb, &b, d);
    if (ret == CP_OK)
        ret = cp_file_write_atomic(path, b.data ? b.data : "", b.len, d);
    cp_buf_release(&b);
    return ret;
}
