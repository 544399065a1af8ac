/* A flame graph focused on some frames (view/flame_internal.h): their
 * callees merged under one root, or their callers above it, as
 * speedscope's sandwich view shows a function's. */
#include "view/flame_internal.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Add frame src's time, in total and per iteration, to frame id of t. */
static bool merge(struct fl_tree *t, int32_t id, const struct fl_frame *src)
{
    struct fl_frame *f = &t->f[id];
    f->total += src->total;
    if (f->kernel < 0)
        f->kernel = src->kernel;
    if (src->n_per > f->n_per) {
        double *p = cp_realloc_array(f->per, src->n_per, sizeof *p);
        if (!p)
            return false;
        memset(p + f->n_per, 0, (src->n_per - f->n_per) * sizeof *p);
        f->per = p;
        f->n_per = src->n_per;
    }
    for (size_t i = 0; i < src->n_per; i++)
        f->per[i] += src->per[i];
    return true;
}

/* The new frames of nt from t's, as fl_focus says; map[i]: t's frame i's
 * new id (callees), -1 when it has none. */
static bool refocus(const struct fl_tree *t, const bool *hit, const bool *under, bool callers,
                    struct fl_tree *nt, int32_t *map)
{
    for (size_t i = 0; i < t->n; i++)
        map[i] = -1;
    for (size_t i = 1; i < t->n; i++) {
        const struct fl_frame *f = &t->f[i];
        bool outer = hit[i] && !under[i];
        if (callers && outer) {
            /* the matched frame, then its callers up to the track */
            int32_t cur = fl_child(nt, 0, f->kind, f->layer, f->name);
            if (cur < 0 || !merge(nt, cur, f) || !merge(nt, 0, f))
                return false;
            for (int32_t p = f->parent; p > 0; p = t->f[p].parent) {
                const struct fl_frame *up = &t->f[p];
                cur = fl_child(nt, cur, up->kind, up->layer, up->name);
                if (cur < 0 || !merge(nt, cur, f))
                    return false;
                nt->f[cur].kernel = up->kernel;
            }
        } else if (!callers && (outer || (under[i] && map[f->parent] >= 0))) {
            /* parents come before their children: the parent's new id is
             * known */
            int32_t parent = outer ? 0 : map[f->parent];
            int32_t id = fl_child(nt, parent, f->kind, f->layer, f->name);
            if (id < 0 || !merge(nt, id, f) || (outer && !merge(nt, 0, f)))
                return false;
            map[i] = id;
        }
    }
    return true;
}

enum cp_status fl_focus(struct fl_tree *t, const char *pattern, bool callers, const char *what,
                        size_t *matched, struct cp_diag *d)
{
    *matched = 0;
    regex_t re;
    int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char why[160];
        regerror(rc, &re, why, sizeof why);
        return cp_diag_set(d, CP_ERR_INVALID, "--focus %.200s: not a regular expression: %s",
                           pattern, why);
    }
    bool *hit = cp_calloc(t->n ? t->n : 1, sizeof *hit);
    bool *under = cp_calloc(t->n ? t->n : 1, sizeof *under);
    int32_t *map = cp_calloc(t->n ? t->n : 1, sizeof *map);
    enum cp_status st = CP_OK;
    if (!hit || !under || !map) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* frames are made after their parents: one pass in id order */
    for (size_t i = 1; i < t->n; i++) {
        const struct fl_frame *f = &t->f[i];
        hit[i] = f->kind != FK_TRACK && regexec(&re, f->name, 0, NULL, 0) == 0;
        under[i] = f->parent > 0 && (under[f->parent] || hit[f->parent]);
        *matched += hit[i] && !under[i];
    }
    if (*matched == 0) {
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: no frame's name matches --focus %.200s (frames are named by "
                         "their events, kernels' nodes, op types or ONNX nodes as --group says)",
                         what, pattern);
        goto out;
    }
    struct fl_tree nt;
    memset(&nt, 0, sizeof nt);
    cp_strmap_init(&nt.by_key);
    char root[300];
    snprintf(root, sizeof root, "%s of /%.200s/", callers ? "callers" : "callees", pattern);
    bool ok =
        fl_child(&nt, -1, FK_ROOT, -1, root) == 0 && refocus(t, hit, under, callers, &nt, map);
    if (!ok) {
        fl_frames_release(&nt);
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    fl_frames_release(t);
    t->f = nt.f;
    t->n = nt.n;
    t->cap = nt.cap;
    t->by_key = nt.by_key;
    t->max_depth = nt.max_depth;
out:
    free(hit);
    free(under);
    free(map);
    regfree(&re);
    return st;
}
