/* The spill (import_internal.h): events parsed once and kept compact in
 * an unnamed temporary file, with their strings in a table in memory (one
 * copy of each distinct text), so that reading them back costs neither a
 * second parse nor memory in proportion to the events. */
#include "import/import_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPILL_BUFFER (1 << 20)

struct cp_imp_spill {
    FILE *f;
    char *buf; /* setvbuf's */
    struct cp_imp_pool pool;
    size_t *lens, cap_lens;
    struct cp_strmap ix; /* text -> id */
    bool oom;
    uint64_t n;
};

enum cp_status cp_imp_spill_open(struct cp_imp_spill **out, struct cp_diag *d)
{
    struct cp_imp_spill *sp = cp_calloc(1, sizeof *sp);
    if (!sp)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    cp_strmap_init(&sp->ix);
    sp->f = tmpfile();
    if (!sp->f) {
        int e = errno;
        free(sp);
        return cp_diag_set(d, CP_ERR_IO, "cannot make a temporary file for the import: %s",
                           strerror(e));
    }
    sp->buf = malloc(SPILL_BUFFER);
    if (sp->buf)
        setvbuf(sp->f, sp->buf, _IOFBF, SPILL_BUFFER);
    *out = sp;
    return CP_OK;
}

void cp_imp_spill_close(struct cp_imp_spill *sp)
{
    if (!sp)
        return;
    if (sp->f)
        fclose(sp->f);
    free(sp->buf);
    cp_imp_pool_release(&sp->pool);
    free(sp->lens);
    cp_strmap_release(&sp->ix);
    free(sp);
}

int32_t cp_imp_spill_str(struct cp_imp_spill *sp, const struct cp_imp_val *v)
{
    if (!v->s)
        return -1;
    int64_t id = cp_strmap_get(&sp->ix, v->s, v->len, -1);
    if (id >= 0)
        return (int32_t)id;
    if (sp->pool.n >= INT32_MAX) {
        sp->oom = true;
        return -1;
    }
    size_t at = sp->pool.n;
    const char *kept = cp_imp_pool_add(&sp->pool, v->s, v->len);
    if (kept && sp->cap_lens < sp->pool.cap) {
        size_t *l = cp_realloc_array(sp->lens, sp->pool.cap, sizeof *l);
        if (l) {
            sp->lens = l;
            sp->cap_lens = sp->pool.cap;
        } else
            kept = NULL;
    }
    if (!kept || cp_strmap_add(&sp->ix, kept, v->len, (int64_t)at, NULL, NULL) != CP_OK) {
        sp->oom = true;
        return -1;
    }
    sp->lens[at] = v->len;
    return (int32_t)at;
}

struct cp_imp_val cp_imp_spill_text(const struct cp_imp_spill *sp, int32_t id)
{
    struct cp_imp_val v = {NULL, 0, false};
    if (id >= 0 && (size_t)id < sp->pool.n) {
        v.s = sp->pool.s[id];
        v.len = sp->lens[id];
    }
    return v;
}

/* A record on disk: the fixed part, then n_num (key, value) pairs. */
struct head {
    int64_t ts, dur, correlation, external;
    int32_t name, cat, pid, tid, op_name, provider, task_type, transport;
    uint32_t n_num;
    char ph;
    uint8_t has_ts;
};

struct pair {
    int32_t key;
    double value;
};

enum cp_status cp_imp_spill_put(struct cp_imp_spill *sp, const struct cp_imp_rec *r,
                                struct cp_diag *d)
{
    if (sp->oom)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory keeping the profile's names");
    struct head h;
    memset(&h, 0, sizeof h);
    h.ts = r->ts;
    h.dur = r->dur;
    h.correlation = r->correlation;
    h.external = r->external;
    h.name = r->name;
    h.cat = r->cat;
    h.pid = r->pid;
    h.tid = r->tid;
    h.op_name = r->op_name;
    h.provider = r->provider;
    h.task_type = r->task_type;
    h.transport = r->transport;
    h.n_num = r->n_num > CP_IMP_MAX_ARGS ? CP_IMP_MAX_ARGS : r->n_num;
    h.ph = r->ph;
    h.has_ts = r->has_ts;
    struct pair p[CP_IMP_MAX_ARGS];
    for (uint32_t i = 0; i < h.n_num; i++)
        p[i] = (struct pair){r->num_key[i], r->num_val[i]};
    if (fwrite(&h, sizeof h, 1, sp->f) != 1 ||
        (h.n_num && fwrite(p, sizeof *p, h.n_num, sp->f) != h.n_num))
        return cp_diag_set(d, CP_ERR_WRITE, "cannot write the import's temporary file: %s",
                           strerror(errno));
    sp->n++;
    return CP_OK;
}

enum cp_status cp_imp_spill_rewind(struct cp_imp_spill *sp, struct cp_diag *d)
{
    if (fflush(sp->f) != 0 || fseek(sp->f, 0, SEEK_SET) != 0)
        return cp_diag_set(d, CP_ERR_WRITE, "cannot read the import's temporary file back: %s",
                           strerror(errno));
    return CP_OK;
}

enum cp_status cp_imp_spill_next(struct cp_imp_spill *sp, struct cp_imp_rec *r, bool *more,
                                 struct cp_diag *d)
{
    struct head h;
    *more = false;
    size_t got = fread(&h, sizeof h, 1, sp->f);
    if (got != 1) {
        if (ferror(sp->f))
            return cp_diag_set(d, CP_ERR_IO, "cannot read the import's temporary file back");
        return CP_OK;
    }
    struct pair p[CP_IMP_MAX_ARGS];
    if (h.n_num > CP_IMP_MAX_ARGS || (h.n_num && fread(p, sizeof *p, h.n_num, sp->f) != h.n_num))
        return cp_diag_set(d, CP_ERR_IO, "the import's temporary file is damaged");
    r->ts = h.ts;
    r->dur = h.dur;
    r->correlation = h.correlation;
    r->external = h.external;
    r->name = h.name;
    r->cat = h.cat;
    r->pid = h.pid;
    r->tid = h.tid;
    r->op_name = h.op_name;
    r->provider = h.provider;
    r->task_type = h.task_type;
    r->transport = h.transport;
    r->ph = h.ph;
    r->has_ts = h.has_ts;
    r->n_num = h.n_num;
    for (uint32_t i = 0; i < h.n_num; i++) {
        r->num_key[i] = p[i].key;
        r->num_val[i] = p[i].value;
    }
    *more = true;
    return CP_OK;
}
