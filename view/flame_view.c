/* cp_view_flame and cp_view_flame_diff (view/view.h): build the trees,
 * lay them out, and for a diff, test every frame's change.
 *
 * A diff draws B's frames at B's widths. Each frame's change is that of
 * its median time per iteration (its mean when it is absent from most
 * iterations of both runs; with fewer than 3 iterations, of its widths);
 * whether it is marked is decided on its per-iteration times, not their
 * means: a Mann-Whitney test of A's
 * iterations against B's (a frame absent from an iteration counts 0 there),
 * Holm's correction over every tested frame, and a change of at least
 * min_change of A's time. A frame that moved less, or whose move the
 * iterations' spread explains, is grey: the picture never calls noise a
 * gain. Frames only in A are listed under the title ("gone from B"), since
 * B's widths have no room for them. */
#include "stats/stats.h"
#include "view/flame_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *group_name(enum cp_flame_group g)
{
    static const char *const n[] = {"by layer", "by op type", "by ONNX node", "by pipeline node"};
    return (size_t)g < sizeof n / sizeof n[0] ? n[g] : "?";
}

/* "the mean of 100 iterations", "iteration 41 (the median)". */
static void iters_text(const struct fl_tree *t, const struct cp_flame_opts *o, char *out, size_t n)
{
    const char *unit = t->group == CP_FLAME_BY_PIPELINE ? "request" : "iteration";
    size_t k = 0;
    int64_t one = -1;
    for (size_t i = 0; i < t->n_iters; i++)
        if (t->chosen[i]) {
            k++;
            one = t->iters[i];
        }
    char of[64] = "";
    if (t->quiet)
        snprintf(of, sizeof of, " (the undisturbed of %zu)", t->n_iters);
    switch (o->iters) {
    case CP_FLAME_MEAN:
        snprintf(out, n, "the mean of %zu %ss%s", k, unit, of);
        break;
    case CP_FLAME_ALL:
        snprintf(out, n, "%zu %ss summed%s", k, unit, of);
        break;
    case CP_FLAME_MEDIAN:
        snprintf(out, n, "%s %lld, the median", unit, (long long)one);
        break;
    default:
        snprintf(out, n, "%s %lld", unit, (long long)one);
    }
}

enum cp_status cp_view_flame(struct cp_trace_store *s, const struct cp_flame_opts *o,
                             struct cp_buf *out, struct cp_flame_info *info, struct cp_diag *d)
{
    if (info)
        memset(info, 0, sizeof *info);
    struct fl_tree t;
    size_t matched = 0;
    enum cp_status st = fl_build(s, o, &t, d);
    if (st == CP_OK && o->focus)
        st = fl_focus(&t, o->focus, o->callers, t.run_label, &matched, d);
    if (st == CP_OK && fl_layout(&t) != CP_OK)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st != CP_OK) {
        fl_tree_release(&t);
        return st;
    }
    char title[1200], sub[600], it[96], tot[32];
    snprintf(title, sizeof title, "Flame graph: %.1100s", o->title ? o->title : t.run_label);
    iters_text(&t, o, it, sizeof it);
    fl_fmt_ns(t.f[0].width, tot, sizeof tot);
    snprintf(sub, sizeof sub, "%s: %s, %s%s; click a frame to zoom, Ctrl-F or / to search%s", it,
             tot, group_name(t.group), o->left_heavy ? ", widest first" : "",
             t.overlaps ? "; overlapping events were shrunk to fit their container" : "");
    size_t drawn = 0;
    if (o->still)
        st = fl_still(&t, NULL, title, sub, o->width > 0 ? o->width : 1200, o->still_format, out,
                      &drawn, d);
    else if ((st = fl_svg(&t, NULL, title, sub, o->width > 0 ? o->width : 1200, out, &drawn)) !=
             CP_OK)
        st = cp_diag_set(d, st, "out of memory");
    if (info && st == CP_OK) {
        info->run_id = t.run_id;
        info->frames = drawn;
        for (size_t i = 0; i < t.n_iters; i++)
            info->iterations += t.chosen[i];
        info->total_ns = t.f[0].width;
        info->matched = matched;
    }
    fl_tree_release(&t);
    return st;
}

/* The change of every frame of b against a. */
static enum cp_status changes(const struct fl_tree *a, const struct fl_tree *b,
                              const struct cp_flame_opts *o, struct fl_change *ch, bool *in_b,
                              struct cp_diag *d)
{
    struct cp_strmap by_path;
    cp_strmap_init(&by_path);
    for (size_t i = 0; i < a->n; i++)
        if (cp_strmap_puts(&by_path, a->f[i].path, (int64_t)i) != CP_OK) {
            cp_strmap_release(&by_path);
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        }
    /* the iterations that count on each side (the undisturbed ones) */
    size_t *ia_k = cp_calloc(a->n_iters ? a->n_iters : 1, sizeof *ia_k),
           *ib_k = cp_calloc(b->n_iters ? b->n_iters : 1, sizeof *ib_k);
    size_t na = 0, nb = 0;
    for (size_t k = 0; ia_k && k < a->n_iters; k++)
        if (fl_counts(a, k))
            ia_k[na++] = k;
    for (size_t k = 0; ib_k && k < b->n_iters; k++)
        if (fl_counts(b, k))
            ib_k[nb++] = k;
    double *xa = cp_calloc(a->n_iters ? a->n_iters : 1, sizeof *xa);
    double *xb = cp_calloc(b->n_iters ? b->n_iters : 1, sizeof *xb);
    double *p = cp_calloc(b->n ? b->n : 1, sizeof *p);
    bool *rej = cp_calloc(b->n ? b->n : 1, sizeof *rej);
    size_t *which = cp_calloc(b->n ? b->n : 1, sizeof *which);
    enum cp_status st = xa && xb && p && rej && which && ia_k && ib_k ? CP_OK : CP_ERR_NOMEM;
    size_t n_tested = 0;
    bool testable = na >= 3 && nb >= 3;
    for (size_t i = 0; st == CP_OK && i < b->n; i++) {
        const struct fl_frame *fb = &b->f[i];
        int64_t ia = cp_strmap_gets(&by_path, fb->path, -1);
        const struct fl_frame *fa = ia >= 0 ? &a->f[ia] : NULL;
        if (fa)
            in_b[ia] = true;
        struct fl_change *c = &ch[i];
        c->a_ns = fa ? fa->width : 0;
        c->b_ns = fb->width;
        c->pct = c->a_ns > 0 ? 100 * (c->b_ns - c->a_ns) / c->a_ns : INFINITY;
        c->p = NAN;
        if (!testable)
            continue;
        for (size_t k = 0; k < na; k++)
            xa[k] = fa ? fl_per(fa, ia_k[k]) : 0;
        for (size_t k = 0; k < nb; k++)
            xb[k] = fl_per(fb, ib_k[k]);
        /* the change of the typical iteration: medians, which one stalled
         * iteration cannot move as it moves a mean */
        double ma = cp_stats_quantile(xa, na, 0.5), mb = cp_stats_quantile(xb, nb, 0.5);
        if (ma > 0 || mb > 0) {
            c->a_ns = ma;
            c->b_ns = mb;
            c->pct = ma > 0 ? 100 * (mb - ma) / ma : INFINITY;
        }
        struct cp_mwu r;
        struct cp_diag dd;
        cp_diag_init(&dd);
        if (cp_stats_mann_whitney(xa, na, xb, nb, CP_MWU_AUTO, &r, &dd) != CP_OK)
            continue;
        c->tested = true;
        c->p = r.p;
        p[n_tested] = r.p;
        which[n_tested++] = i;
    }
    if (st == CP_OK && n_tested > 0) {
        double alpha = o->fdr > 0 ? o->fdr : 0.05;
        st = cp_stats_holm(p, n_tested, alpha, rej, d);
        double min = o->min_change > 0 ? o->min_change : 0.02;
        /* and it moves the whole iteration by CP_FLAME_MIN_OF_ROOT or more:
         * a 40 ns kernel that takes 50 ns in the other process is a real
         * difference (where each landed in memory, the clock's steps) but
         * no change to act on; interleaved runs of one model marked such
         * frames until this floor (bench/view_diff.sh) */
        for (size_t k = 0; k < na; k++)
            xa[k] = fl_per(&a->f[0], ia_k[k]);
        double root = cp_stats_quantile(xa, na, 0.5);
        for (size_t k = 0; st == CP_OK && k < n_tested; k++) {
            struct fl_change *c = &ch[which[k]];
            c->significant = rej[k] && (!isfinite(c->pct) || fabs(c->pct) >= 100 * min) &&
                             fabs(c->b_ns - c->a_ns) >= CP_FLAME_MIN_OF_ROOT * root;
        }
    }
    if (st == CP_ERR_NOMEM)
        cp_diag_set(d, st, "out of memory");
    free(ia_k);
    free(ib_k);
    free(xa);
    free(xb);
    free(p);
    free(rej);
    free(which);
    cp_strmap_release(&by_path);
    return st;
}

enum cp_status cp_view_flame_diff(struct cp_trace_store *sa, struct cp_trace_store *sb,
                                  int64_t run_a, int64_t run_b, const struct cp_flame_opts *o,
                                  struct cp_buf *out, struct cp_flame_info *info, struct cp_diag *d)
{
    if (info)
        memset(info, 0, sizeof *info);
    struct cp_flame_opts oa = *o, ob = *o;
    oa.run_id = run_a;
    ob.run_id = run_b;
    struct fl_tree a, b;
    memset(&b, 0, sizeof b);
    size_t matched = 0, matched_b = 0;
    enum cp_status st = fl_build(sa, &oa, &a, d);
    if (st == CP_OK)
        st = fl_build(sb, &ob, &b, d);
    if (st == CP_OK && o->focus)
        st = fl_focus(&a, o->focus, o->callers, a.run_label, &matched, d);
    if (st == CP_OK && o->focus)
        st = fl_focus(&b, o->focus, o->callers, b.run_label, &matched_b, d);
    if (st == CP_OK && (fl_layout(&a) != CP_OK || fl_layout(&b) != CP_OK))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st == CP_OK && !o->force) {
        bool hashes = a.model_hash[0] && b.model_hash[0];
        bool differ = hashes ? strcmp(a.model_hash, b.model_hash) != 0
                             : a.model[0] && b.model[0] && strcmp(a.model, b.model) != 0;
        if (differ)
            st = cp_diag_set(d, CP_ERR_INVALID,
                             "%s is %s and %s is %s: different models%s, whose frames do not "
                             "correspond; --force draws the diff anyway",
                             a.run_label, a.model[0] ? a.model : "a model", b.run_label,
                             b.model[0] ? b.model : "another",
                             hashes ? " (their source hashes differ)" : "");
        else if (a.group != b.group)
            st = cp_diag_set(d, CP_ERR_INVALID,
                             "%s is %sa pipeline run and %s is %s: their frames do not "
                             "correspond",
                             a.run_label, a.group == CP_FLAME_BY_PIPELINE ? "" : "not ",
                             b.run_label, b.group == CP_FLAME_BY_PIPELINE ? "one" : "not");
    }
    struct fl_change *ch = NULL;
    bool *in_b = NULL;
    if (st == CP_OK) {
        ch = cp_calloc(b.n, sizeof *ch);
        in_b = cp_calloc(a.n ? a.n : 1, sizeof *in_b);
        st = ch && in_b ? changes(&a, &b, o, ch, in_b, d)
                        : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    if (st == CP_OK) {
        size_t slower = 0, faster = 0, same = 0, gone = 0;
        for (size_t i = 0; i < b.n; i++) {
            if (ch[i].significant)
                *(ch[i].pct > 0 ? &slower : &faster) += 1;
            else
                same++;
        }
        struct cp_buf g;
        cp_buf_init(&g);
        double pxa = a.f[0].width > 0 ? (o->width > 0 ? o->width : 1200) / a.f[0].width : 0;
        for (size_t i = 0; i < a.n; i++)
            /* the topmost frames gone: their children go with them */
            if (!in_b[i] && a.f[i].parent >= 0 && in_b[a.f[i].parent] &&
                a.f[i].width * pxa >= 0.1) {
                char tm[32];
                fl_fmt_ns(a.f[i].width, tm, sizeof tm);
                if (gone < 4)
                    cp_buf_printf(&g, "%s%.60s (%s)", gone ? ", " : "", a.f[i].name, tm);
                gone++;
            }
        if (gone > 4)
            cp_buf_printf(&g, " and %zu more", gone - 4);
        char title[2400], sub[1200], it[96], ta[32], tb[32];
        snprintf(title, sizeof title, "Differential flame graph: %.1100s \xe2\x86\x92 %.1100s",
                 a.run_label, o->title ? o->title : b.run_label);
        iters_text(&b, o, it, sizeof it);
        fl_fmt_ns(a.f[0].width, ta, sizeof ta);
        fl_fmt_ns(b.f[0].width, tb, sizeof tb);
        bool testable =
            (a.quiet ? a.n_quiet : a.n_iters) >= 3 && (b.quiet ? b.n_quiet : b.n_iters) >= 3;
        char legend[300];
        if (testable)
            snprintf(legend, sizeof legend,
                     "changes of the median iteration: \xe2\x96\xb2 vermillion slower, "
                     "\xe2\x96\xbc blue faster: significant (Mann-Whitney on the iterations, "
                     "Holm at %g%%), %g%% or more of the frame and %g%% of the iteration; "
                     "grey: within noise",
                     100 * (o->fdr > 0 ? o->fdr : 0.05),
                     100 * (o->min_change > 0 ? o->min_change : 0.02), 100 * CP_FLAME_MIN_OF_ROOT);
        else
            snprintf(legend, sizeof legend,
                     "Fewer than 3 iterations on a side: no change can be tested, all grey");
        snprintf(sub, sizeof sub,
                 "B's widths (%s): %s against A's %s, %s\n%s\n%zu slower, %zu faster, %zu "
                 "within noise%s%.300s",
                 it, tb, ta, group_name(b.group), legend, slower, faster, same,
                 gone ? "; gone from B: " : "", gone ? g.data : "");
        cp_buf_release(&g);
        size_t drawn = 0;
        if (o->still)
            st = fl_still(&b, ch, title, sub, o->width > 0 ? o->width : 1200, o->still_format, out,
                          &drawn, d);
        else if ((st = fl_svg(&b, ch, title, sub, o->width > 0 ? o->width : 1200, out, &drawn)) !=
                 CP_OK)
            st = cp_diag_set(d, st, "out of memory");
        if (info && st == CP_OK) {
            info->run_id = a.run_id;
            info->run_id_b = b.run_id;
            info->frames = drawn;
            for (size_t i = 0; i < b.n_iters; i++)
                info->iterations += b.chosen[i];
            info->total_ns = b.f[0].width;
            info->slower = slower;
            info->faster = faster;
            info->unchanged = same;
            info->gone = gone;
            info->matched = matched;
        }
    }
    free(ch);
    free(in_b);
    fl_tree_release(&a);
    fl_tree_release(&b);
    return st;
}
