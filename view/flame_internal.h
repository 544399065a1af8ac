/* The frame tree behind a flame graph (view/flame.c builds it from a
 * trace, view/flame_svg.c draws it). Private to view/. */
#ifndef CP_VIEW_FLAME_INTERNAL_H
#define CP_VIEW_FLAME_INTERNAL_H

#include "core/hashmap.h"
#include "trace/query.h"
#include "view/view.h"

enum fl_kind {
    FK_ROOT = 0,
    FK_TRACK,  /* a layer's (and thread's) outermost frames */
    FK_EVENT,  /* an application range, a runtime phase, an imported op */
    FK_KERNEL, /* a kernel of the run's kernel table */
    FK_OP,     /* --group op: the kernels of one op type */
    FK_NODE,   /* a pipeline node */
    FK_PHASE,  /* a pipeline node's time on or off the CPU */
};

struct fl_frame {
    int32_t parent;
    enum fl_kind kind;
    int layer;      /* enum cp_trace_layer, or -1 */
    int64_t kernel; /* kernel table index of the first event; -1 */
    char *name;     /* owned */
    char *path;     /* owned: the names from the root, for matching two runs */
    char *key;      /* owned: parent, kind and name, the key of fl_tree.by_key */
    size_t key_len;
    double total; /* ns over the streamed iterations */
    double *per;  /* ns per streamed iteration (dense index), when kept */
    size_t n_per; /* its room */
    /* set by fl_layout */
    int32_t *kids;
    size_t n_kids;
    int depth;
    double width; /* ns: the picture's width of this frame */
    double x;     /* ns from the left of the root */
};

struct fl_tree {
    struct fl_frame *f;
    size_t n, cap;
    struct cp_strmap by_key; /* parent, kind, name -> id */
    bool keep_per;           /* always: per-iteration times */
    /* the streamed iterations (or a pipeline run's requests), dense */
    int64_t *iters;
    size_t n_iters, cap_iters;
    struct cp_trace_kernel_desc *k;
    size_t nk;
    enum cp_flame_group group;
    bool left_heavy; /* children widest first, not in name order */
    /* which dense iterations the widths are, and over how many they are
     * divided (mean: all, over their count) */
    bool *chosen;
    double divisor;
    /* the iterations that ran undisturbed, as validate judges them (the
     * interference probe, runner/probe.h); NULL when every one counts (no
     * probe, or too few undisturbed to keep only those) */
    bool *quiet;
    size_t n_quiet;
    int64_t run_id;
    char *run_label; /* the run, as the title names it */
    char *model;     /* the run's model path */
    char *model_hash;
    size_t overlaps; /* frames whose children outgrew them (clamped) */
    int max_depth;
};

/* Build the tree of run o->run_id of s: every measured iteration
 * streamed, each frame's time kept per iteration (the widths of the chosen
 * ones, a diff's tests). */
enum cp_status fl_build(struct cp_trace_store *s, const struct cp_flame_opts *o, struct fl_tree *t,
                        struct cp_diag *d);
void fl_tree_release(struct fl_tree *t);
/* Free t's frames and their index (the rest of the tree stays). */
void fl_frames_release(struct fl_tree *t);

/* The child of `parent` (-1: the root) of this kind and name, made when
 * new; -1 when out of memory. */
int32_t fl_child(struct fl_tree *t, int32_t parent, enum fl_kind kind, int layer, const char *name);

/* Replace t's frames (before fl_layout) by those around the frames whose
 * names match the POSIX extended regular expression `pattern` (of nested
 * matches, the outermost): their callees, merged by name under one root
 * (callers false), or their callers, the innermost first, above one root
 * (callers true: an inverted flame graph). A matched frame's time is
 * counted once, in every iteration. *matched: how many frames matched.
 * Errors: a bad expression, or none matched (CP_ERR_INVALID, naming
 * `what`, the trace), CP_ERR_NOMEM. */
enum cp_status fl_focus(struct fl_tree *t, const char *pattern, bool callers, const char *what,
                        size_t *matched, struct cp_diag *d);

/* Widths and positions from the chosen iterations: children sorted by
 * name (or widest first when left_heavy), each frame as wide as its time. */
enum cp_status fl_layout(struct fl_tree *t);

/* Whether dense iteration i counts: undisturbed, or every one does. */
static inline bool fl_counts(const struct fl_tree *t, size_t i)
{
    return !t->quiet || t->quiet[i];
}

/* A frame's time in dense iteration i (0 when none). */
static inline double fl_per(const struct fl_frame *f, size_t i)
{
    return i < f->n_per ? f->per[i] : 0;
}

/* The change of one frame, A -> B, for the diff. */
struct fl_change {
    double a_ns, b_ns; /* the frame's median time per iteration in A and in B (ns); its
                        * mean when it is absent from most iterations of both */
    double pct;        /* (b - a) / a * 100; INFINITY for a frame new in B */
    double p;          /* Mann-Whitney over the per-iteration times; NaN when untested */
    bool tested, significant;
};

/* Time as text: "1.23 ms", "456 µs". */
void fl_fmt_ns(double ns, char *out, size_t n);

/* The same picture still, through the chart module (a FRAMES chart) as
 * PNG or PDF, appended to out. */
enum cp_status fl_still(const struct fl_tree *t, const struct fl_change *ch, const char *title,
                        const char *subtitle, double width, enum cp_chart_format f,
                        struct cp_buf *out, size_t *frames_drawn, struct cp_diag *d);

/* The SVG of a laid-out tree; `ch` (per frame of t) for a diff, else NULL;
 * `gone` lists the frames only in A (NULL-terminated, may be NULL). */
enum cp_status fl_svg(const struct fl_tree *t, const struct fl_change *ch, const char *title,
                      const char *subtitle, double width, struct cp_buf *out, size_t *frames_drawn);

#endif
