/* Strategies: the outcome of every evaluated delta per model and hardware,
 * and the transfer query that ranks the deltas that held on similar models
 * (knowledge/kb_tuning.h; ranking defined in docs/kb-schema.md,
 * "Strategy ranking"). */
#include "knowledge/kb_internal.h"
#include "knowledge/kb_tuning.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum cp_status cp_kb_strategy_check(struct cp_kb *kb, int64_t model_id, int64_t hw_id,
                                    const char *delta, struct cp_diag *d)
{
    if (model_id <= 0 || hw_id <= 0 || !delta || !*delta)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: a strategy outcome needs a model, a hardware and a delta",
                           kb->path);
    return CP_OK;
}

enum cp_status cp_kb_strategy_insert(struct cp_kb *kb, int64_t model_id, int64_t hw_id,
                                     int64_t session_id, const char *delta, double gain, bool held,
                                     struct cp_diag *d)
{
    char now[32];
    cp_kb_now(now);
    sqlite3_stmt *st = NULL;
    enum cp_status ret =
        cp_kb_prepare(kb,
                      "INSERT INTO strategies(model_id, hw_id, session_id, delta, gain, held, "
                      "created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                      "ON CONFLICT(session_id, delta) DO UPDATE SET model_id = "
                      "excluded.model_id, hw_id = excluded.hw_id, gain = excluded.gain, "
                      "held = excluded.held",
                      &st, "recording a strategy", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_int64(st, 1, model_id);
    sqlite3_bind_int64(st, 2, hw_id);
    if (session_id > 0)
        sqlite3_bind_int64(st, 3, session_id);
    else
        sqlite3_bind_null(st, 3);
    sqlite3_bind_text(st, 4, delta, -1, SQLITE_TRANSIENT);
    cp_kb_bind_real(st, 5, gain);
    sqlite3_bind_int(st, 6, held ? 1 : 0);
    sqlite3_bind_text(st, 7, now, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "recording a strategy");
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_kb_strategy_record(struct cp_kb *kb, int64_t model_id, int64_t hw_id,
                                     int64_t session_id, const char *delta, double gain, bool held,
                                     struct cp_diag *d)
{
    enum cp_status ret = cp_kb_strategy_check(kb, model_id, hw_id, delta, d);
    if (ret != CP_OK || (ret = cp_kb_begin(kb, d)) != CP_OK)
        return ret;
    if ((ret = cp_kb_strategy_insert(kb, model_id, hw_id, session_id, delta, gain, held, d)) !=
        CP_OK) {
        cp_kb_rollback(kb);
        return ret;
    }
    return cp_kb_commit(kb, d);
}

/* ---- the transfer query ---------------------------------------------------- */

/* A model with outcomes, and how similar it is to the one asked about. */
struct near_model {
    int64_t id;
    char name[128];
    double sim;
    bool eligible;
};

/* Every model that has outcomes (on hw when given) with its similarity to
 * fp. OUT: *out (caller frees), *n. */
static enum cp_status load_models(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                                  const struct cp_kb_hardware *hw, double min_sim,
                                  bool exclude_self, struct near_model **out, size_t *n,
                                  struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(
        kb,
        "SELECT m.id, m.structure_hash, m.source_hash, m.name, m.model_class, m.params, m.flops, "
        "m.n_nodes, m.op_histogram, m.inputs, m.has_attention, m.has_conv, m.has_layernorm, "
        "m.has_groupnorm, m.has_batchnorm, m.has_gelu FROM models m WHERE m.id IN "
        "(SELECT s.model_id FROM strategies s JOIN hardware h ON h.id = s.hw_id "
        " WHERE ?1 IS NULL OR h.signature = ?1) ORDER BY m.id",
        &st, "finding similar models", d);
    if (ret != CP_OK)
        return ret;
    cp_kb_bind_text(st, 1, hw ? hw->signature : NULL);
    struct near_model *v = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct near_model *nv = cp_realloc_array(v, ncap, sizeof *nv);
            if (!nv) {
                ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", kb->path);
                goto out;
            }
            v = nv;
            cap = ncap;
        }
        struct cp_kb_fingerprint other;
        if ((ret = cp_kb_model_read_row(kb, st, 1, &other, d)) != CP_OK)
            goto out;
        struct near_model *m = &v[len++];
        m->id = sqlite3_column_int64(st, 0);
        snprintf(m->name, sizeof m->name, "%s", other.name);
        m->sim = cp_kb_similarity(fp, &other);
        m->eligible = m->sim >= min_sim &&
                      !(exclude_self && strcmp(other.structure_hash, fp->structure_hash) == 0);
        cp_kb_fingerprint_release(&other);
    }
    if (rc != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "finding similar models");
        goto out;
    }
    sqlite3_finalize(st);
    *out = v;
    *n = len;
    return CP_OK;
out:
    sqlite3_finalize(st);
    free(v);
    return ret;
}

static const struct near_model *find_model(const struct near_model *v, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].id == id)
            return &v[i];
    return NULL;
}

void cp_kb_strategy_hits_free(struct cp_kb_strategy_hit *h, size_t n)
{
    if (!h)
        return;
    for (size_t i = 0; i < n; i++) {
        free(h[i].delta);
        free(h[i].models);
    }
    free(h);
}

/* Outcomes of one delta, accumulated while its rows stream by. */
struct acc {
    int tried, held, n_gain;
    double mean, m2, best_sim;
    struct cp_buf models;
};

/* Turn the accumulated outcomes of `delta` into a hit when it held at
 * least once. Returns false on out-of-memory. */
static bool flush(struct acc *a, const char *delta, struct cp_kb_strategy_hit **v, size_t *len,
                  size_t *cap)
{
    bool ok = true;
    if (a->held == 0 || !delta)
        goto out;
    if (*len == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct cp_kb_strategy_hit *nv = cp_realloc_array(*v, ncap, sizeof *nv);
        if (!nv) {
            ok = false;
            goto out;
        }
        *v = nv;
        *cap = ncap;
    }
    struct cp_kb_strategy_hit *h = &(*v)[*len];
    memset(h, 0, sizeof *h);
    h->delta = cp_strdup(delta);
    h->models = cp_strdup(a->models.data ? a->models.data : "");
    if (!h->delta || !h->models || cp_buf_status(&a->models) != CP_OK) {
        free(h->delta);
        free(h->models);
        ok = false;
        goto out;
    }
    h->count = a->held;
    h->tried = a->tried;
    h->mean_gain = a->n_gain > 0 ? a->mean : NAN;
    h->sd_gain = a->n_gain > 1 ? sqrt(a->m2 / (a->n_gain - 1)) : (a->n_gain == 1 ? 0 : NAN);
    h->similarity = a->best_sim;
    h->score = h->similarity * (isnan(h->mean_gain) ? 0 : h->mean_gain) * h->count / h->tried;
    (*len)++;
out:
    cp_buf_release(&a->models);
    memset(a, 0, sizeof *a);
    cp_buf_init(&a->models);
    return ok;
}

static int cmp_hits(const void *pa, const void *pb)
{
    const struct cp_kb_strategy_hit *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return strcmp(a->delta, b->delta);
}

/* Whether the comma list in `b` already names `name`. */
static bool list_has(const struct cp_buf *b, const char *name)
{
    if (!b->data)
        return false;
    size_t n = strlen(name);
    for (const char *p = b->data; (p = strstr(p, name)) != NULL; p += n)
        if ((p == b->data || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

enum cp_status cp_kb_query_strategies(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                                      const struct cp_kb_hardware *hw, double min_sim,
                                      bool exclude_self, size_t limit,
                                      struct cp_kb_strategy_hit **out, size_t *n, struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    struct near_model *models = NULL;
    size_t n_models = 0;
    enum cp_status ret = load_models(kb, fp, hw, min_sim, exclude_self, &models, &n_models, d);
    if (ret != CP_OK)
        return ret;
    sqlite3_stmt *st = NULL;
    struct cp_kb_strategy_hit *v = NULL;
    size_t len = 0, cap = 0;
    struct acc a;
    memset(&a, 0, sizeof a);
    cp_buf_init(&a.models);
    char *delta = NULL;
    ret = cp_kb_prepare(kb,
                        "SELECT s.delta, s.model_id, s.gain, s.held FROM strategies s "
                        "JOIN hardware h ON h.id = s.hw_id WHERE ?1 IS NULL OR h.signature = ?1 "
                        "ORDER BY s.delta, s.id",
                        &st, "querying strategies", d);
    if (ret != CP_OK)
        goto out;
    cp_kb_bind_text(st, 1, hw ? hw->signature : NULL);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *row_delta = (const char *)sqlite3_column_text(st, 0);
        const struct near_model *m = find_model(models, n_models, sqlite3_column_int64(st, 1));
        if (!row_delta || !*row_delta || !m || !m->eligible)
            continue;
        if (!delta || strcmp(delta, row_delta) != 0) {
            if (!flush(&a, delta, &v, &len, &cap))
                goto out_nomem;
            free(delta);
            if (!(delta = cp_strdup(row_delta)))
                goto out_nomem;
        }
        a.tried++;
        if (sqlite3_column_int(st, 3) == 0)
            continue;
        a.held++;
        if (m->sim > a.best_sim)
            a.best_sim = m->sim;
        if (!list_has(&a.models, m->name)) {
            if (a.models.len)
                cp_buf_putc(&a.models, ',');
            cp_buf_puts(&a.models, m->name);
        }
        if (sqlite3_column_type(st, 2) != SQLITE_NULL) {
            double g = sqlite3_column_double(st, 2);
            a.n_gain++;
            double dlt = g - a.mean;
            a.mean += dlt / a.n_gain;
            a.m2 += dlt * (g - a.mean);
        }
    }
    if (rc != SQLITE_DONE) {
        ret = cp_kb_db_error(kb, d, "querying strategies");
        goto out;
    }
    if (!flush(&a, delta, &v, &len, &cap))
        goto out_nomem;
    if (len > 1)
        qsort(v, len, sizeof *v, cmp_hits);
    if (limit > 0 && len > limit) {
        for (size_t i = limit; i < len; i++) {
            free(v[i].delta);
            free(v[i].models);
        }
        len = limit;
    }
    *out = v;
    *n = len;
    v = NULL;
    len = 0;
    goto out;
out_nomem:
    ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory querying strategies", kb->path);
out:
    sqlite3_finalize(st);
    cp_buf_release(&a.models);
    free(delta);
    free(models);
    cp_kb_strategy_hits_free(v, len);
    return ret;
}

enum cp_status cp_kb_rule_history(struct cp_kb *kb, const char *source, double *mean_gain,
                                  int *count, struct cp_diag *d)
{
    *mean_gain = NAN;
    *count = 0;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(kb,
                                       "SELECT avg(measured_gain), count(measured_gain) FROM "
                                       "candidates WHERE source = ?1",
                                       &st, "reading a rule's history", d);
    if (ret != CP_OK)
        return ret;
    sqlite3_bind_text(st, 1, source ? source : "", -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW) {
        *count = sqlite3_column_int(st, 1);
        if (*count > 0)
            *mean_gain = sqlite3_column_double(st, 0);
    } else {
        ret = cp_kb_db_error(kb, d, "reading a rule's history");
    }
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_kb_rule_history_near(struct cp_kb *kb, const char *source,
                                       const struct cp_kb_fingerprint *fp,
                                       const struct cp_kb_hardware *hw, double min_sim,
                                       double *mean_gain, int *count, double *best_sim,
                                       struct cp_diag *d)
{
    *mean_gain = NAN;
    *count = 0;
    *best_sim = 0;
    sqlite3_stmt *st = NULL;
    enum cp_status ret = cp_kb_prepare(
        kb,
        "SELECT c.measured_gain, m.structure_hash, m.source_hash, m.name, m.model_class, m.params, "
        "m.flops, m.n_nodes, m.op_histogram, m.inputs, m.has_attention, m.has_conv, "
        "m.has_layernorm, m.has_groupnorm, m.has_batchnorm, m.has_gelu FROM candidates c "
        "JOIN sessions s ON s.id = c.session_id JOIN models m ON m.id = s.model_id "
        "JOIN hardware h ON h.id = s.hw_id WHERE c.source = ?1 AND c.measured_gain IS NOT NULL "
        "AND (?2 IS NULL OR h.signature = ?2) ORDER BY c.id",
        &st, "reading a rule's history on similar models", d);
    if (ret != CP_OK)
        return ret;
    cp_kb_bind_text(st, 1, source ? source : "");
    cp_kb_bind_text(st, 2, hw ? hw->signature : NULL);
    double wsum = 0, sum = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct cp_kb_fingerprint other;
        if ((ret = cp_kb_model_read_row(kb, st, 1, &other, d)) != CP_OK)
            break;
        double sim = cp_kb_similarity(fp, &other);
        cp_kb_fingerprint_release(&other);
        double g = sqlite3_column_double(st, 0);
        if (!(sim >= min_sim) || !isfinite(g))
            continue;
        wsum += sim;
        sum += sim * g;
        (*count)++;
        if (sim > *best_sim)
            *best_sim = sim;
    }
    if (ret == CP_OK && rc != SQLITE_DONE)
        ret = cp_kb_db_error(kb, d, "reading a rule's history on similar models");
    sqlite3_finalize(st);
    if (ret != CP_OK) {
        *count = 0;
        *best_sim = 0;
        return ret;
    }
    if (*count > 0 && wsum > 0)
        *mean_gain = sum / wsum;
    return CP_OK;
}
