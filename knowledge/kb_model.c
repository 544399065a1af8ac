/* Models and hardware in the knowledge base: detecting this machine's
 * signature, and the `models` and `hardware` rows (knowledge/kb_tuning.h,
 * schema in docs/kb-schema.md). */
#include "knowledge/kb_internal.h"
#include "knowledge/kb_tuning.h"
#include "core/host.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* ---- hardware -------------------------------------------------------------- */

void cp_kb_hardware_sign(struct cp_kb_hardware *hw)
{
    char text[512];
    int n = snprintf(text, sizeof text, "%s\n%s\n%d\n%s", hw->cpu_model, hw->isa, hw->cores,
                     hw->soc_version);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof text)
        n = (int)sizeof text - 1;
    snprintf(hw->signature, sizeof hw->signature, "%016llx",
             (unsigned long long)cp_hash64(text, (size_t)n));
}

void cp_kb_hardware_detect(struct cp_kb_hardware *out)
{
    memset(out, 0, sizeof *out);
    struct cp_host *h = malloc(sizeof *h);
    if (h) {
        cp_host_detect(h);
        snprintf(out->cpu_model, sizeof out->cpu_model, "%.127s", h->cpu_model);
        snprintf(out->isa, sizeof out->isa, "%.255s", h->isa);
        out->cores = h->cores;
        free(h);
    }
    snprintf(out->soc_version, sizeof out->soc_version, "cpu");
    snprintf(out->tool_version, sizeof out->tool_version, "%s", CP_VERSION_STRING);
    cp_kb_hardware_sign(out);
}

enum cp_status cp_kb_hardware_upsert(struct cp_kb *kb, const struct cp_kb_hardware *hw,
                                     int64_t *hw_id, struct cp_diag *d)
{
    *hw_id = 0;
    if (!hw->signature[0])
        return cp_diag_set(d, CP_ERR_INVALID, "%s: a hardware record needs a signature", kb->path);
    char now[32];
    cp_kb_now(now);
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_begin(kb, d);
    if (ret != CP_OK)
        return ret;
    ret = cp_kb_prepare(kb,
                        "INSERT INTO hardware(signature, cpu_model, isa, cores, soc_version, "
                        "tool_version, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                        "ON CONFLICT(signature) DO UPDATE SET tool_version = excluded.tool_version "
                        "RETURNING id",
                        &st, "recording the hardware", d);
    if (ret != CP_OK)
        goto out;
    sqlite3_bind_text(st, 1, hw->signature, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, hw->cpu_model, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, hw->isa, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 4, hw->cores);
    sqlite3_bind_text(st, 5, hw->soc_version, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 6, hw->tool_version, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 7, now, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_ROW) {
        ret = cp_kb_db_error(kb, d, "recording the hardware");
        goto out;
    }
    *hw_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    return cp_kb_commit(kb, d);
out:
    sqlite3_finalize(st);
    cp_kb_rollback(kb);
    return ret;
}

static void col_copy(sqlite3_stmt *st, int col, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

enum cp_status cp_kb_hardware_get(struct cp_kb *kb, int64_t hw_id, struct cp_kb_hardware *out,
                                  struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(kb,
                                       "SELECT signature, cpu_model, isa, cores, soc_version, "
                                       "tool_version FROM hardware WHERE id = ?1",
                                       &st, "reading hardware", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, hw_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        col_copy(st, 0, out->signature, sizeof out->signature);
        col_copy(st, 1, out->cpu_model, sizeof out->cpu_model);
        col_copy(st, 2, out->isa, sizeof out->isa);
        out->cores = sqlite3_column_int(st, 3);
        col_copy(st, 4, out->soc_version, sizeof out->soc_version);
        col_copy(st, 5, out->tool_version, sizeof out->tool_version);
    } else if (rc == SQLITE_DONE) {
        ret = cp_diag_set(d, CP_ERR_INVALID, "%s: no hardware with id %lld", kb->path,
                          (long long)hw_id);
    } else {
        ret = cp_kb_db_error(kb, d, "reading hardware");
    }
    sqlite3_finalize(st);
    return ret;
}

/* ---- models ---------------------------------------------------------------- */

enum cp_status cp_kb_model_upsert(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                                  int64_t *model_id, struct cp_diag *d)
{
    *model_id = 0;
    if (!fp->structure_hash[0])
        return cp_diag_set(d, CP_ERR_INVALID, "%s: a model record needs a structure hash",
                           kb->path);
    char now[32];
    cp_kb_now(now);
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_begin(kb, d);
    if (ret != CP_OK)
        return ret;
    ret = cp_kb_prepare(
        kb,
        "INSERT INTO models(structure_hash, source_hash, name, model_class, params, flops, "
        "n_nodes, op_histogram, inputs, has_attention, has_conv, has_layernorm, has_groupnorm, "
        "has_batchnorm, has_gelu, created_at, updated_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16) "
        "ON CONFLICT(structure_hash, source_hash) DO UPDATE SET name = excluded.name, "
        "model_class = excluded.model_class, params = excluded.params, flops = excluded.flops, "
        "n_nodes = excluded.n_nodes, op_histogram = excluded.op_histogram, "
        "inputs = excluded.inputs, has_attention = excluded.has_attention, "
        "has_conv = excluded.has_conv, has_layernorm = excluded.has_layernorm, "
        "has_groupnorm = excluded.has_groupnorm, has_batchnorm = excluded.has_batchnorm, "
        "has_gelu = excluded.has_gelu, updated_at = excluded.updated_at RETURNING id",
        &st, "recording the model", d);
    if (ret != CP_OK)
        goto out;
    sqlite3_bind_text(st, 1, fp->structure_hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, fp->source_hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, fp->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, fp->model_class[0] ? fp->model_class : "other", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, fp->params);
    sqlite3_bind_double(st, 6, isfinite(fp->flops) ? fp->flops : 0);
    sqlite3_bind_int(st, 7, fp->n_nodes);
    sqlite3_bind_text(st, 8, fp->op_histogram_json ? fp->op_histogram_json : "{}", -1,
                      SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 9, fp->inputs_json ? fp->inputs_json : "[]", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 10, fp->has_attention);
    sqlite3_bind_int(st, 11, fp->has_conv);
    sqlite3_bind_int(st, 12, fp->has_layernorm);
    sqlite3_bind_int(st, 13, fp->has_groupnorm);
    sqlite3_bind_int(st, 14, fp->has_batchnorm);
    sqlite3_bind_int(st, 15, fp->has_gelu);
    sqlite3_bind_text(st, 16, now, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_ROW) {
        ret = cp_kb_db_error(kb, d, "recording the model");
        goto out;
    }
    *model_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    return cp_kb_commit(kb, d);
out:
    sqlite3_finalize(st);
    cp_kb_rollback(kb);
    return ret;
}

enum cp_status cp_kb_model_read_row(struct cp_kb *kb, sqlite3_stmt *st, int col0,
                                    struct cp_kb_fingerprint *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    bool oom = false;
    col_copy(st, col0 + 0, out->structure_hash, sizeof out->structure_hash);
    col_copy(st, col0 + 1, out->source_hash, sizeof out->source_hash);
    col_copy(st, col0 + 2, out->name, sizeof out->name);
    col_copy(st, col0 + 3, out->model_class, sizeof out->model_class);
    out->params = sqlite3_column_int64(st, col0 + 4);
    out->flops = sqlite3_column_double(st, col0 + 5);
    out->n_nodes = sqlite3_column_int(st, col0 + 6);
    out->op_histogram_json = cp_kb_col_text(st, col0 + 7, true, &oom);
    out->inputs_json = cp_kb_col_text(st, col0 + 8, true, &oom);
    out->has_attention = sqlite3_column_int(st, col0 + 9) != 0;
    out->has_conv = sqlite3_column_int(st, col0 + 10) != 0;
    out->has_layernorm = sqlite3_column_int(st, col0 + 11) != 0;
    out->has_groupnorm = sqlite3_column_int(st, col0 + 12) != 0;
    out->has_batchnorm = sqlite3_column_int(st, col0 + 13) != 0;
    out->has_gelu = sqlite3_column_int(st, col0 + 14) != 0;
    if (oom) {
        cp_kb_fingerprint_release(out);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading a model", kb->path);
    }
    return CP_OK;
}

enum cp_status cp_kb_model_get(struct cp_kb *kb, int64_t model_id, struct cp_kb_fingerprint *out,
                               struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(kb, "SELECT " CP_KB_MODEL_COLS " FROM models WHERE id = ?1",
                                       &st, "reading a model", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, model_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        ret = cp_kb_model_read_row(kb, st, 0, out, d);
    else if (rc == SQLITE_DONE)
        ret = cp_diag_set(d, CP_ERR_INVALID, "%s: no model with id %lld", kb->path,
                          (long long)model_id);
    else
        ret = cp_kb_db_error(kb, d, "reading a model");
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_kb_model_find_source(struct cp_kb *kb, const char *source_hash,
                                       struct cp_kb_fingerprint *out, bool *found,
                                       struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    *found = false;
    if (!source_hash || !*source_hash)
        return CP_OK;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(kb,
                                       "SELECT " CP_KB_MODEL_COLS " FROM models WHERE source_hash "
                                       "= ?1 ORDER BY updated_at DESC, id DESC LIMIT 1",
                                       &st, "finding a model", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_text(st, 1, source_hash, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        ret = cp_kb_model_read_row(kb, st, 0, out, d);
        *found = ret == CP_OK;
    } else if (rc != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "finding a model");
    }
    sqlite3_finalize(st);
    return ret;
}
