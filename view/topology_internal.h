/* What view/topology.c (the drawings: a trace's kernels or a pipeline run,
 * a .om, a flow) and view/topology_graph.c (the Graphviz graph they build,
 * its labels and its SVG) share. Private to view/. */
#ifndef CP_VIEW_TOPOLOGY_INTERNAL_H
#define CP_VIEW_TOPOLOGY_INTERNAL_H

#include "core/core.h"
#include "report/chart.h"
#include "trace/query.h"
#include "view/view.h"

#include <gvc.h>
#include <stdbool.h>
#include <stddef.h>

#define TOPO_MEDIUM_NODES 400
#define TOPO_BIG_NODES    1500

/* Label lines longer than this are cut (the tooltip has them whole). */
#define TOPO_LINE_CHARS 48
/* Fused nodes list this many of their ONNX origins, then "+N more". */
#define TOPO_ORIGINS_SHOWN 2

/* Nodes are filled by their share from the chart module's ramp (blues),
 * hot ones get a thick border in its vermillion, which no blue is
 * confused with; nodes without a time, its neutral grey. */
#define HOT_MAX    3
#define HOT_OF_TOP 0.5

/* Courier's metrics are Graphviz's own for a name starting "cour", and every
 * monospace font a browser falls back to has its advance (0.6 em): labels
 * are sized as they will be drawn. */
#define TOPO_FONT "Courier,monospace"

/* A still picture is as wide as the layout, within these (points). */
#define STILL_MIN_W 360.0
#define STILL_MAX_W 1584.0

#define LABEL_BREAK   "\\n"
#define TOOLTIP_BREAK "&#10;"

struct topo {
    Agraph_t *g;
    Agnode_t **nodes; /* by the caller's node index; NULL: not drawn */
    size_t cap;
    size_t n_nodes, n_edges, fused, flagged;
    struct cp_buf esc; /* scratch for escaped text */
    char **tips;       /* tooltips as XML attribute text, by placeholder number */
    size_t n_tips, cap_tips;
    bool big;
    bool still; /* drawn by the chart module (report/chart.h), not as SVG */
    enum cp_chart_format still_format;
    struct cp_doc *doc; /* still: into this document */
};

/* What one node shows: the label as label text, the tooltip as XML. */
struct topo_look {
    const char *label, *tooltip;
    int ramp; /* step of the chart module's ramp, < 0: neutral */
    bool hot;
    bool fused;   /* stands for more than one ONNX node */
    bool flagged; /* a finding names it: a double border */
};

void tp_put_text(struct cp_buf *b, const char *s, size_t max);
void tp_put_tail(struct cp_buf *b, const char *s, size_t max);
void tp_put_tip(struct cp_buf *b, const char *s);
void tp_set(void *obj, const char *key, const char *value);
enum cp_status topo_open(struct topo *t, const char *title, size_t n, size_t cap,
                         const struct cp_topology_opts *o, struct cp_diag *d);
void topo_close(struct topo *t);
enum cp_status topo_node(struct topo *t, size_t i, const struct topo_look *k, struct cp_diag *d);
enum cp_status topo_edge(struct topo *t, size_t from, size_t to, const char *label,
                         const char *tooltip, bool back, struct cp_diag *d);
enum cp_status topo_render(struct topo *t, struct cp_buf *label, struct cp_buf *out,
                           struct cp_diag *d);
void tp_put_time(struct cp_buf *b, double ns);
int tp_ramp_of(double share, double max_share);
void tp_mark_hot(const double *share, size_t n, int *rank);
bool tp_origins_differ(const char *name, const char *const *o, size_t n);
void tp_put_origins(struct cp_buf *label, struct cp_buf *tip, const char *const *o, size_t n);
void tp_put_tensor(struct cp_buf *b, const struct cp_trace_tensor *x, bool tooltip);

#endif
