/* The topology of a trace's run, a CPU .om or a flow, laid out by
 * Graphviz's dot (libgvc) and rendered as SVG.
 *
 * Each input is turned into one cgraph graph built through the API (never
 * DOT text, so names need no DOT quoting), with plain labels: a name is
 * escaped as XML entities, which Graphviz decodes for layout and writes
 * back, and for Graphviz's label escapes (backslashes doubled), so quotes,
 * ampersands, backslashes and CJK names come out as they went in.
 * Tooltips go through more rounds of escapes, which differ between
 * Graphviz versions: each is given to Graphviz as a placeholder
 * ("cptipN") and put into the SVG afterwards as XML text of our own.
 * Nodes are "n0", "n1", ... in the order of the input, which with dot's
 * deterministic layout gives the same bytes for the same input. */
#include "view/view.h"

#include "core/hashmap.h"
#include "graph/graph.h"
#include "om/om.h"
#include "pipeline/pipeline.h"
#include "trace/query.h"

#include <gvc.h>
#include <jansson.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Above this many nodes dot's crossing minimisation and network simplex
 * are cut short, edges are straight and unlabelled: a few thousand nodes
 * lay out in seconds instead of minutes. Between MEDIUM and BIG the limits
 * are only tightened. */
#define TOPO_MEDIUM_NODES 400
#define TOPO_BIG_NODES    1500

/* Label lines longer than this are cut (the tooltip has them whole). */
#define TOPO_LINE_CHARS 48
/* Fused nodes list this many of their ONNX origins, then "+N more". */
#define TOPO_ORIGINS_SHOWN 2

/* ColorBrewer's sequential "Blues" (colour-blind safe), light to dark;
 * the last three take white text. */
static const char *const RAMP[] = {"#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6",
                                   "#4292c6", "#2171b5", "#08519c", "#08306b"};
#define RAMP_N    (sizeof RAMP / sizeof RAMP[0])
#define RAMP_DARK 6
/* Hot nodes: a thick border in an orange no ramp colour is confused with. */
#define HOT_COLOUR   "#d95f02"
#define NEUTRAL_FILL "#f0f0f0"
#define HOT_MAX      3
#define HOT_OF_TOP   0.5

/* Courier's metrics are Graphviz's own for a name starting "cour", and every
 * monospace font a browser falls back to has its advance (0.6 em): labels
 * are sized as they will be drawn. */
#define TOPO_FONT "Courier,monospace"

static const char *const KINDS_TAKEN = "a trace store (.db), a CPU .om or a flow (.toml)";

/* ---- building the graph ----------------------------------------------------------------- */

struct topo {
    Agraph_t *g;
    Agnode_t **nodes; /* by the caller's node index; NULL: not drawn */
    size_t cap;
    size_t n_nodes, n_edges, fused, flagged;
    struct cp_buf esc; /* scratch for escaped text */
    char **tips;       /* tooltips as XML attribute text, by placeholder number */
    size_t n_tips, cap_tips;
    bool big;
};

/* Append s as XML text (line ends and tabs as spaces), at most `max`
 * characters (0: all) cut with an ellipsis; for a label (Graphviz decodes
 * the entities for layout and writes them back) with backslashes doubled,
 * for a tooltip (our own text in the SVG) as it is. */
static void put_escaped(struct cp_buf *b, const char *s, size_t max, bool tooltip)
{
    struct cp_buf m;
    cp_buf_init(&m);
    size_t chars = 0;
    const char *p = s ? s : "";
    while (*p) {
        unsigned char c = (unsigned char)*p;
        size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        if (max && chars == max) {
            cp_buf_puts(&m, "\xe2\x80\xa6");
            break;
        }
        size_t avail = strnlen(p, len);
        if (c == '\n' || c == '\r' || c == '\t')
            cp_buf_putc(&m, ' ');
        else
            cp_buf_append(&m, p, avail);
        p += avail;
        chars++;
    }
    cp_buf_putc(&m, '\0');
    struct cp_buf x;
    cp_buf_init(&x);
    cp_buf_markup(&x, m.failed ? "" : m.data);
    cp_buf_release(&m);
    for (size_t i = 0; i < x.len; i++) {
        if (x.data[i] == '\\' && !tooltip)
            cp_buf_putc(b, '\\');
        cp_buf_putc(b, x.data[i]);
    }
    if (x.failed)
        b->failed = true;
    cp_buf_release(&x);
}

static void put_text(struct cp_buf *b, const char *s, size_t max)
{
    put_escaped(b, s, max, false);
}

/* A label's text of at most `max` characters: the end of a longer one
 * ("…/conv1/Conv"), where nested ONNX names differ. */
static void put_tail(struct cp_buf *b, const char *s, size_t max)
{
    size_t chars = 0;
    for (const char *p = s; *p; p++)
        chars += ((unsigned char)*p & 0xc0) != 0x80;
    const char *p = s;
    if (chars > max) {
        cp_buf_puts(b, "\xe2\x80\xa6");
        for (size_t skip = chars - max + 1; *p && skip; skip--)
            do
                p++;
            while (((unsigned char)*p & 0xc0) == 0x80);
    }
    put_text(b, p, 0);
}

static void put_tip(struct cp_buf *b, const char *s)
{
    put_escaped(b, s, 0, true);
}

/* Line ends: "\n" centres a label's line; a tooltip is XML text. */
#define LABEL_BREAK   "\\n"
#define TOOLTIP_BREAK "&#10;"

static void set(void *obj, const char *key, const char *value)
{
    agsafeset(obj, (char *)key, (char *)value, "");
}

/* A graph of `n` nodes to draw, numbered below `cap`. */
static enum cp_status topo_open(struct topo *t, const char *title, size_t n, size_t cap,
                                struct cp_diag *d)
{
    memset(t, 0, sizeof *t);
    cp_buf_init(&t->esc);
    t->big = n > TOPO_BIG_NODES;
    t->cap = cap;
    t->nodes = cp_calloc(cap ? cap : 1, sizeof *t->nodes);
    put_tip(&t->esc, title); /* the graph's name: not a label, written as XML */
    cp_buf_putc(&t->esc, '\0');
    if (!t->nodes || t->esc.failed)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    /* cgraph reports through a process-wide handler: warnings are not ours
     * to print (pipeline/ does the same) */
    agseterr(AGERR);
    t->g = agopen(t->esc.data, Agdirected, NULL);
    if (!t->g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    set(t->g, "rankdir", "TB");
    set(t->g, "fontname", TOPO_FONT);
    set(t->g, "fontsize", "12");
    set(t->g, "labelloc", "t");
    set(t->g, "labeljust", "l");
    set(t->g, "nodesep", "0.25");
    set(t->g, "ranksep", "0.35");
    if (t->big) {
        set(t->g, "splines", "line");
        set(t->g, "mclimit", "0.01");
        set(t->g, "nslimit", "0.5");
        set(t->g, "nslimit1", "0.5");
    } else if (n > TOPO_MEDIUM_NODES) {
        set(t->g, "mclimit", "0.2");
        set(t->g, "nslimit", "2");
        set(t->g, "nslimit1", "2");
    }
    agattr(t->g, AGNODE, "shape", "box");
    agattr(t->g, AGNODE, "style", "filled,rounded");
    agattr(t->g, AGNODE, "fontname", TOPO_FONT);
    agattr(t->g, AGNODE, "fontsize", "10");
    agattr(t->g, AGNODE, "fillcolor", NEUTRAL_FILL);
    agattr(t->g, AGNODE, "fontcolor", "black");
    agattr(t->g, AGNODE, "color", "#525252");
    agattr(t->g, AGNODE, "penwidth", "1");
    agattr(t->g, AGNODE, "label", "");
    agattr(t->g, AGNODE, "tooltip", "");
    agattr(t->g, AGEDGE, "fontname", TOPO_FONT);
    agattr(t->g, AGEDGE, "fontsize", "8");
    agattr(t->g, AGEDGE, "color", "#737373");
    agattr(t->g, AGEDGE, "arrowsize", "0.6");
    agattr(t->g, AGEDGE, "label", "");
    agattr(t->g, AGEDGE, "tooltip", "");
    agattr(t->g, AGEDGE, "style", "solid");
    agattr(t->g, AGEDGE, "constraint", "true");
    return CP_OK;
}

static void topo_close(struct topo *t)
{
    if (t->g)
        agclose(t->g);
    free(t->nodes);
    for (size_t i = 0; i < t->n_tips; i++)
        free(t->tips[i]);
    free(t->tips);
    cp_buf_release(&t->esc);
    memset(t, 0, sizeof *t);
}

/* Give obj the tooltip `xml` (XML attribute text): a placeholder now, the
 * text when the SVG is written. */
static enum cp_status set_tooltip(struct topo *t, void *obj, const char *xml, struct cp_diag *d)
{
    if (t->n_tips == t->cap_tips) {
        size_t cap = t->cap_tips ? t->cap_tips * 2 : 64;
        char **more = cp_realloc_array(t->tips, cap, sizeof *more);
        if (!more)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        t->tips = more;
        t->cap_tips = cap;
    }
    if (!(t->tips[t->n_tips] = cp_strdup(xml)))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    char id[40];
    snprintf(id, sizeof id, "cptip%zu", t->n_tips++);
    set(obj, "tooltip", id);
    return CP_OK;
}

/* What one node shows: the label as label text, the tooltip as XML. */
struct topo_look {
    const char *label, *tooltip;
    int ramp; /* RAMP index, < 0: neutral */
    bool hot;
    bool fused;   /* stands for more than one ONNX node */
    bool flagged; /* a finding names it: a double border */
};

static enum cp_status topo_node(struct topo *t, size_t i, const struct topo_look *k,
                                struct cp_diag *d)
{
    char id[32];
    snprintf(id, sizeof id, "n%zu", i);
    Agnode_t *n = agnode(t->g, id, 1);
    if (!n)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    t->nodes[i] = n;
    t->n_nodes++;
    if (k->fused)
        t->fused++;
    set(n, "label", k->label);
    if (set_tooltip(t, n, k->tooltip, d) != CP_OK)
        return CP_ERR_NOMEM;
    if (k->ramp >= 0) {
        set(n, "fillcolor", RAMP[k->ramp]);
        if (k->ramp >= RAMP_DARK)
            set(n, "fontcolor", "white");
    }
    if (k->hot) {
        set(n, "color", HOT_COLOUR);
        set(n, "penwidth", "3");
        set(n, "style", "filled,rounded,bold");
    }
    if (k->flagged) {
        set(n, "peripheries", "2");
        t->flagged++;
    }
    return CP_OK;
}

/* An edge between drawn nodes `from` and `to`; label and tooltip are
 * escaped text (NULL: none). */
static enum cp_status topo_edge(struct topo *t, size_t from, size_t to, const char *label,
                                const char *tooltip, bool back, struct cp_diag *d)
{
    if (from >= t->cap || to >= t->cap || !t->nodes[from] || !t->nodes[to])
        return CP_OK;
    Agedge_t *e = agedge(t->g, t->nodes[from], t->nodes[to], NULL, 1);
    if (!e)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    t->n_edges++;
    if (label && !t->big)
        set(e, "label", label);
    if (tooltip && set_tooltip(t, e, tooltip, d) != CP_OK)
        return CP_ERR_NOMEM;
    if (back) {
        set(e, "style", "dashed");
        set(e, "constraint", "false");
    }
    return CP_OK;
}

/* The first n bytes `k` in [p, end), or NULL. */
static const char *find(const char *p, const char *end, const char *k, size_t n)
{
    while ((size_t)(end - p) >= n) {
        const char *c = memchr(p, k[0], (size_t)(end - p) - n + 1);
        if (!c)
            return NULL;
        if (memcmp(c, k, n) == 0)
            return c;
        p = c + 1;
    }
    return NULL;
}

/* Append Graphviz's SVG with each placeholder tooltip replaced by its
 * text. */
static void put_svg(const struct topo *t, const char *svg, size_t len, struct cp_buf *out)
{
    static const char key[] = "xlink:title=\"cptip";
    const char *p = svg, *end = svg + len;
    while (p < end) {
        const char *at = find(p, end, key, sizeof key - 1);
        if (!at) {
            cp_buf_append(out, p, (size_t)(end - p));
            return;
        }
        const char *num = at + sizeof key - 1;
        char *stop = NULL;
        unsigned long long i = strtoull(num, &stop, 10);
        if (stop == num || stop >= end || *stop != '"' || i >= t->n_tips) {
            cp_buf_append(out, p, (size_t)(num - p));
            p = num;
            continue;
        }
        cp_buf_append(out, p, (size_t)(at - p));
        cp_buf_puts(out, "xlink:title=\"");
        cp_buf_puts(out, t->tips[i]);
        p = stop; /* the closing quote */
    }
}

/* Graphviz with two plugins linked in, not loaded from its configuration:
 * dot's layout and the core renderers (SVG). Left out on purpose is the
 * pango text layout plugin: without it Graphviz sizes labels from its own
 * font metrics, so the same graph gives the same SVG on every machine
 * whatever fonts it has, and fontconfig is never touched (pango's plugin
 * holds its fonts for the life of the process, which a leak checker
 * reports at every exit, and reads freed memory when a second context is
 * made after a first one was freed). */
extern gvplugin_library_t gvplugin_dot_layout_LTX_library;
extern gvplugin_library_t gvplugin_core_LTX_library;

static const lt_symlist_t BUILTINS[] = {
    {"gvplugin_dot_layout_LTX_library", &gvplugin_dot_layout_LTX_library},
    {"gvplugin_core_LTX_library", &gvplugin_core_LTX_library},
    {0, 0},
};

/* Lay the graph out with dot under the label `label` (escaped text) and
 * append the SVG to `out`. */
static enum cp_status topo_render(struct topo *t, struct cp_buf *label, struct cp_buf *out,
                                  struct cp_diag *d)
{
    if (t->big)
        cp_buf_printf(label,
                      LABEL_BREAK "%zu nodes: simplified layout (straight edges, no edge labels, "
                                  "crossings not minimised)",
                      t->n_nodes);
    cp_buf_putc(label, '\0');
    if (label->failed)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    set(t->g, "label", label->data);
    GVC_t *gvc = gvContextPlugins(BUILTINS, 0);
    if (!gvc)
        return cp_diag_set(d, CP_ERR_INTERNAL, "Graphviz's context cannot be made");
    if (gvLayout(gvc, t->g, "dot") != 0) {
        gvFreeContext(gvc);
        return cp_diag_set(d, CP_ERR_INTERNAL, "Graphviz could not lay out the graph");
    }
    enum cp_status st = CP_OK;
    char *data = NULL;
    unsigned int len = 0;
    if (gvRenderData(gvc, t->g, "svg", &data, &len) != 0 || !data) {
        st = cp_diag_set(d, CP_ERR_INTERNAL, "Graphviz could not render the graph as SVG");
    } else {
        put_svg(t, data, len, out);
        if (cp_buf_status(out) != CP_OK)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    if (data)
        gvFreeRenderData(data);
    gvFreeLayout(gvc, t->g);
    gvFreeContext(gvc);
    return st;
}

/* ---- small formatting --------------------------------------------------------------------- */

static void put_time(struct cp_buf *b, double ns)
{
    if (ns >= 1e6)
        cp_buf_printf(b, "%.3g ms", ns / 1e6);
    else if (ns >= 1e3)
        cp_buf_printf(b, "%.3g \xc2\xb5s", ns / 1e3);
    else
        cp_buf_printf(b, "%.0f ns", ns);
}

/* The ramp colour of a share, scaled so the largest share is the darkest. */
static int ramp_of(double share, double max_share)
{
    if (!(max_share > 0) || !(share > 0))
        return 0;
    int i = (int)lround(share / max_share * (double)(RAMP_N - 1));
    return i < 0 ? 0 : i >= (int)RAMP_N ? (int)RAMP_N - 1 : i;
}

/* Mark as hot the largest share and those at least HOT_OF_TOP of it, at
 * most HOT_MAX (ties: the first in input order). With flat shares only
 * the top one is hot: a runner-up by a hair is not a finding. OUT:
 * rank[i] = 1.. for hot ones, 0 otherwise. */
static void mark_hot(const double *share, size_t n, int *rank)
{
    double top = 0;
    for (size_t i = 0; i < n; i++)
        rank[i] = 0;
    for (int r = 1; r <= HOT_MAX; r++) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (!rank[i] && share[i] > 0 && (best == n || share[i] > share[best]))
                best = i;
        if (best == n || (r > 1 && share[best] < HOT_OF_TOP * top))
            return;
        if (r == 1)
            top = share[best];
        rank[best] = r;
    }
}

/* The origins that a node stands for, told apart from its name: more than
 * one, or one that is not the node's own name. */
static bool origins_differ(const char *name, const char *const *o, size_t n)
{
    return n > 1 || (n == 1 && strcmp(o[0], name) != 0);
}

/* The label line listing origins ("fuses: A, B, +5 more") and the full
 * list for the tooltip. */
static void put_origins(struct cp_buf *label, struct cp_buf *tip, const char *const *o, size_t n)
{
    cp_buf_puts(label, LABEL_BREAK);
    cp_buf_puts(label, n > 1 ? "fuses: " : "from: ");
    for (size_t i = 0; i < n && i < TOPO_ORIGINS_SHOWN; i++) {
        if (i)
            cp_buf_puts(label, ", ");
        put_tail(label, o[i], TOPO_LINE_CHARS / 2);
    }
    if (n > TOPO_ORIGINS_SHOWN)
        cp_buf_printf(label, ", +%zu more", n - TOPO_ORIGINS_SHOWN);
    cp_buf_printf(tip, TOOLTIP_BREAK "ONNX nodes (%zu):", n);
    for (size_t i = 0; i < n; i++) {
        cp_buf_puts(tip, TOOLTIP_BREAK "- ");
        put_tip(tip, o[i]);
    }
}

static void put_tensor(struct cp_buf *b, const struct cp_trace_tensor *x, bool tooltip)
{
    struct cp_buf s;
    cp_buf_init(&s);
    if (x->rank < 0)
        cp_buf_puts(&s, "?");
    else if (x->rank == 0)
        cp_buf_puts(&s, "scalar");
    for (int r = 0; r < x->rank; r++) {
        if (r)
            cp_buf_putc(&s, 'x');
        if (x->dims[r] < 0)
            cp_buf_putc(&s, '?');
        else
            cp_buf_printf(&s, "%lld", (long long)x->dims[r]);
    }
    if (x->dtype[0])
        cp_buf_printf(&s, " %s", x->dtype);
    cp_buf_putc(&s, '\0');
    put_escaped(b, s.failed ? "" : s.data, 0, tooltip);
    if (s.failed)
        b->failed = true;
    cp_buf_release(&s);
}

/* ---- a trace: kernels ---------------------------------------------------------------------- */

/* The names in a kernel's origins JSON array (borrowed from `arr`; NULL
 * and 0 when there are none). OUT: *n. False when out of memory. */
static bool origin_names(json_t *arr, const char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    size_t len = json_array_size(arr);
    if (!len)
        return true;
    if (!(*names = cp_calloc(len, sizeof **names)))
        return false;
    for (size_t i = 0; i < len; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (s)
            (*names)[(*n)++] = s;
    }
    return true;
}

static enum cp_status draw_kernels(struct cp_trace_store *s, const char *path, int64_t run,
                                   const char *title, const struct cp_topology_opts *o,
                                   struct cp_buf *out, struct cp_topology_info *info,
                                   struct cp_diag *d)
{
    struct cp_trace_kernel_desc *k = NULL;
    size_t nk = 0;
    struct cp_trace_kernel_time *kt = NULL;
    size_t nkt = 0;
    struct cp_trace_iter_time *it = NULL;
    size_t nit = 0;
    double *share = NULL, *mean_ns = NULL;
    int *hot = NULL;
    struct cp_strmap producer;
    cp_strmap_init(&producer);
    struct topo t;
    memset(&t, 0, sizeof t);
    struct cp_buf label, tip, lb;
    cp_buf_init(&label);
    cp_buf_init(&tip);
    cp_buf_init(&lb);

    enum cp_status st = cp_trace_query_kernels(s, run, &k, &nk, d);
    if (st != CP_OK)
        goto out;
    if (nk == 0) {
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: run %lld has no kernels to draw (and is not a pipeline run)", path,
                         (long long)run);
        goto out;
    }
    st = cp_trace_query_kernel_times(s, run, NULL, 0, &kt, &nkt, d);
    if (st == CP_OK)
        st = cp_trace_query_layer_iterations(s, run, CP_LAYER_DEVICE, NULL, &it, &nit, d);
    if (st != CP_OK)
        goto out;
    share = cp_calloc(nk, sizeof *share);
    mean_ns = cp_calloc(nk, sizeof *mean_ns);
    hot = cp_calloc(nk, sizeof *hot);
    if (!share || !mean_ns || !hot || cp_strmap_reserve(&producer, nk * 2) != CP_OK) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* every kernel event counts in the whole, those of kernels the table
     * lacks too */
    double total = 0, max_share = 0;
    for (size_t i = 0; i < nkt; i++)
        total += kt[i].total_ns;
    double iters = nit ? (double)nit : 1;
    for (size_t i = 0, j = 0; i < nk; i++) {
        while (j < nkt && kt[j].kernel_idx < k[i].idx)
            j++;
        if (j < nkt && kt[j].kernel_idx == k[i].idx) {
            mean_ns[i] = kt[j].total_ns / iters;
            share[i] = total > 0 ? kt[j].total_ns / total : 0;
            if (share[i] > max_share)
                max_share = share[i];
        }
    }
    mark_hot(share, nk, hot);
    bool timed = total > 0;

    st = topo_open(&t, title, nk, nk, d);
    if (st != CP_OK)
        goto out;
    for (size_t i = 0; i < nk && st == CP_OK; i++) {
        json_t *origins = json_loads(k[i].origins, 0, NULL);
        const char **names = NULL;
        size_t no = 0;
        if (!origin_names(origins, &names, &no)) {
            json_decref(origins);
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        bool differ = origins_differ(k[i].node, names, no);
        cp_buf_reset(&label);
        cp_buf_reset(&tip);
        put_text(&label, k[i].node[0] ? k[i].node : "(unnamed)", TOPO_LINE_CHARS);
        cp_buf_puts(&label, LABEL_BREAK);
        put_text(&label, k[i].op_type, TOPO_LINE_CHARS);
        put_tip(&tip, k[i].node);
        cp_buf_puts(&tip, TOOLTIP_BREAK "op ");
        put_tip(&tip, k[i].op_type);
        if (k[i].impl[0]) {
            cp_buf_puts(&tip, ", ");
            put_tip(&tip, k[i].impl);
        }
        if (timed) {
            cp_buf_puts(&label, LABEL_BREAK);
            put_time(&label, mean_ns[i]);
            cp_buf_printf(&label, "/iter \xc2\xb7 %.1f%%", share[i] * 100);
            cp_buf_puts(&tip, TOOLTIP_BREAK);
            put_time(&tip, mean_ns[i]);
            cp_buf_printf(&tip, " per iteration, %.2f%% of the kernel time", share[i] * 100);
        }
        if (differ)
            put_origins(&label, &tip, names, no);
        /* the findings that name it, or an ONNX node it stands for: one
         * line per finding, however many of its nodes it stands for */
        bool flagged = false;
        const char *shown[8];
        size_t n_shown = 0;
        for (size_t m = 0; m < o->n_marks; m++) {
            const struct cp_topology_mark *mk = &o->marks[m];
            if (!mk->node || !mk->text)
                continue;
            bool hit = strcmp(mk->node, k[i].node) == 0;
            for (size_t q = 0; !hit && q < no; q++)
                hit = strcmp(mk->node, names[q]) == 0;
            for (size_t e = 0; hit && e < n_shown; e++)
                hit = strcmp(shown[e], mk->text) != 0;
            if (!hit || n_shown == sizeof shown / sizeof shown[0])
                continue;
            shown[n_shown++] = mk->text;
            cp_buf_puts(&label, LABEL_BREAK "\xe2\x9a\x91 ");
            put_text(&label, mk->text, TOPO_LINE_CHARS);
            cp_buf_puts(&tip, TOOLTIP_BREAK "finding ");
            put_tip(&tip, mk->text);
            flagged = true;
        }
        free(names);
        json_decref(origins);
        if (hot[i]) {
            cp_buf_printf(&label, LABEL_BREAK "HOT #%d by time", hot[i]);
            cp_buf_printf(&tip, TOOLTIP_BREAK "hot: #%d by share of the kernel time", hot[i]);
        }
        cp_buf_putc(&label, '\0');
        cp_buf_putc(&tip, '\0');
        if (label.failed || tip.failed) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        struct topo_look look = {.label = label.data,
                                 .tooltip = tip.data,
                                 .ramp = timed ? ramp_of(share[i], max_share) : -1,
                                 .hot = hot[i] != 0,
                                 .fused = no > 1,
                                 .flagged = flagged};
        st = topo_node(&t, i, &look, d);
        for (size_t q = 0; q < k[i].n_out && st == CP_OK; q++)
            if (k[i].out[q].name[0] &&
                cp_strmap_puts(&producer, k[i].out[q].name, (int64_t)i) != CP_OK)
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    /* edges: a tensor one kernel writes and another reads (a view reads
     * the tensor it aliases) */
    for (size_t i = 0; i < nk && st == CP_OK; i++) {
        for (size_t a = 0; a < k[i].n_in && st == CP_OK; a++) {
            const struct cp_trace_tensor *x = &k[i].in[a];
            int64_t from = cp_strmap_gets(&producer, x->name, -1);
            if (from < 0 && x->view_of)
                from = cp_strmap_gets(&producer, x->view_of, -1);
            if (from < 0 || (size_t)from == i)
                continue;
            bool seen = false;
            for (size_t b = 0; b < a && !seen; b++)
                seen = strcmp(k[i].in[b].name, x->name) == 0;
            if (seen)
                continue;
            cp_buf_reset(&lb);
            put_tensor(&lb, x, false);
            cp_buf_putc(&lb, '\0');
            cp_buf_reset(&tip);
            put_tip(&tip, x->name);
            cp_buf_puts(&tip, ": ");
            put_tensor(&tip, x, true);
            if (x->layout[0]) {
                cp_buf_putc(&tip, ' ');
                put_tip(&tip, x->layout);
            }
            cp_buf_putc(&tip, '\0');
            if (lb.failed || tip.failed)
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            else
                st = topo_edge(&t, (size_t)from, i, lb.data, tip.data, false, d);
        }
    }
    if (st != CP_OK)
        goto out;
    cp_buf_reset(&lb);
    put_text(&lb, title, 0);
    cp_buf_printf(&lb, LABEL_BREAK "trace run %lld: %zu kernels, %zu fused", (long long)run,
                  t.n_nodes, t.fused);
    if (timed) {
        cp_buf_puts(&lb, ", kernel time ");
        put_time(&lb, total / iters);
        cp_buf_printf(&lb, " per iteration over %zu iterations", nit);
        cp_buf_printf(&lb,
                      LABEL_BREAK
                      "fill: share of the kernel time, light 0%% to dark %.1f%%" LABEL_BREAK
                      "bold orange border: hot (the largest share, and "
                      "any at least half of it)%s",
                      max_share * 100,
                      t.flagged ? LABEL_BREAK "double border, \xe2\x9a\x91: a finding of "
                                              "cannprof analyze names the node"
                                : "");
    } else {
        cp_buf_puts(&lb, "; no kernel events: no times");
    }
    st = topo_render(&t, &lb, out, d);
    if (st == CP_OK && info) {
        info->nodes = t.n_nodes;
        info->edges = t.n_edges;
        info->fused = t.fused;
        info->flagged = t.flagged;
    }
out:
    topo_close(&t);
    cp_buf_release(&label);
    cp_buf_release(&tip);
    cp_buf_release(&lb);
    cp_strmap_release(&producer);
    free(share);
    free(mean_ns);
    free(hot);
    free(it);
    free(kt);
    cp_trace_kernels_free(k, nk);
    return st;
}

/* ---- a trace: a pipeline run ---------------------------------------------------------------- */

struct node_sums {
    uint64_t calls;
    double busy_ns, wait_ns, depth;
};

static enum cp_status draw_pipeline(struct cp_trace_store *s, int64_t run,
                                    const struct cp_trace_pipeline *p, const char *title,
                                    struct cp_buf *out, struct cp_topology_info *info,
                                    struct cp_diag *d)
{
    struct cp_trace_node_call *calls = NULL;
    size_t nc = 0;
    struct node_sums *sum = NULL;
    double *share = NULL;
    int *hot = NULL;
    struct topo t;
    memset(&t, 0, sizeof t);
    struct cp_buf label, tip;
    cp_buf_init(&label);
    cp_buf_init(&tip);
    size_t n = p->n_nodes;

    enum cp_status st = cp_trace_query_node_calls(s, run, &calls, &nc, d);
    if (st != CP_OK)
        goto out;
    sum = cp_calloc(n, sizeof *sum);
    share = cp_calloc(n, sizeof *share);
    hot = cp_calloc(n, sizeof *hot);
    if (!sum || !share || !hot) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    double total = 0, max_share = 0;
    for (size_t i = 0; i < nc; i++) {
        if (calls[i].node < 0 || (size_t)calls[i].node >= n)
            continue;
        struct node_sums *x = &sum[calls[i].node];
        double busy =
            calls[i].end_ns > calls[i].start_ns ? (double)(calls[i].end_ns - calls[i].start_ns) : 0;
        x->calls++;
        x->busy_ns += busy;
        x->wait_ns += (double)calls[i].wait_ns;
        x->depth += calls[i].depth;
        total += busy;
    }
    for (size_t i = 0; i < n; i++) {
        share[i] = total > 0 ? sum[i].busy_ns / total : 0;
        if (share[i] > max_share)
            max_share = share[i];
    }
    mark_hot(share, n, hot);

    st = topo_open(&t, title, n, n, d);
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const struct cp_trace_pipeline_node *pn = &p->nodes[i];
        cp_buf_reset(&label);
        cp_buf_reset(&tip);
        put_text(&label, pn->name, TOPO_LINE_CHARS);
        cp_buf_puts(&label, LABEL_BREAK);
        put_text(&label, pn->flowunit, TOPO_LINE_CHARS);
        cp_buf_printf(&label, LABEL_BREAK "workers %d \xc2\xb7 batch %d \xc2\xb7 queue %d",
                      pn->workers, pn->batch_size, pn->queue_size);
        cp_buf_printf(&label, LABEL_BREAK "%llu calls \xc2\xb7 busy %.1f%%",
                      (unsigned long long)sum[i].calls, share[i] * 100);
        put_tip(&tip, pn->name);
        cp_buf_puts(&tip, TOOLTIP_BREAK "flowunit ");
        put_tip(&tip, pn->flowunit);
        cp_buf_printf(&tip, TOOLTIP_BREAK "%llu calls, busy ", (unsigned long long)sum[i].calls);
        put_time(&tip, sum[i].busy_ns);
        cp_buf_printf(&tip, " (%.2f%% of all nodes' busy time)", share[i] * 100);
        if (hot[i]) {
            cp_buf_printf(&label, LABEL_BREAK "BUSIEST #%d", hot[i]);
            cp_buf_printf(&tip, TOOLTIP_BREAK "hot: #%d by busy time", hot[i]);
        }
        cp_buf_putc(&label, '\0');
        cp_buf_putc(&tip, '\0');
        if (label.failed || tip.failed) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        struct topo_look look = {.label = label.data,
                                 .tooltip = tip.data,
                                 .ramp = total > 0 ? ramp_of(share[i], max_share) : -1,
                                 .hot = hot[i] != 0};
        st = topo_node(&t, i, &look, d);
    }
    /* an edge carries what its downstream node waited for: the depth of
     * that node's input queue and its wait on it, per call */
    for (size_t i = 0; i < p->n_edges && st == CP_OK; i++) {
        const struct cp_trace_pipeline_edge *e = &p->edges[i];
        if (e->from < 0 || e->to < 0 || (size_t)e->to >= n)
            continue;
        const struct node_sums *x = &sum[e->to];
        cp_buf_reset(&label);
        cp_buf_reset(&tip);
        if (x->calls) {
            double c = (double)x->calls;
            cp_buf_printf(&label, "depth %.2g \xc2\xb7 wait ", x->depth / c);
            put_time(&label, x->wait_ns / c);
            cp_buf_printf(&tip, "%s mean input queue depth %.3g, mean wait ",
                          e->back ? "loop back;" : "", x->depth / c);
            put_time(&tip, x->wait_ns / c);
            cp_buf_printf(&tip, " over %llu calls of the downstream node",
                          (unsigned long long)x->calls);
        } else {
            cp_buf_puts(&label, "no calls");
            cp_buf_puts(&tip, "the downstream node was never called");
        }
        cp_buf_putc(&label, '\0');
        cp_buf_putc(&tip, '\0');
        if (label.failed || tip.failed)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        else
            st = topo_edge(&t, (size_t)e->from, (size_t)e->to, label.data, tip.data, e->back, d);
    }
    if (st != CP_OK)
        goto out;
    cp_buf_reset(&label);
    put_text(&label, title, 0);
    cp_buf_printf(&label, LABEL_BREAK "pipeline run %lld: %zu nodes, %zu edges, %zu calls",
                  (long long)run, t.n_nodes, t.n_edges, nc);
    if (total > 0)
        cp_buf_printf(&label,
                      LABEL_BREAK "fill: share of the nodes' busy time, light 0%% to dark "
                                  "%.1f%%; bold orange border: busiest" LABEL_BREAK
                                  "edges: the downstream node's mean input queue depth and wait "
                                  "per call",
                      max_share * 100);
    else
        cp_buf_puts(&label, "; no node calls: no times");
    st = topo_render(&t, &label, out, d);
    if (st == CP_OK && info) {
        info->nodes = t.n_nodes;
        info->edges = t.n_edges;
        info->fused = 0;
    }
out:
    topo_close(&t);
    cp_buf_release(&label);
    cp_buf_release(&tip);
    free(sum);
    free(share);
    free(hot);
    cp_trace_node_calls_free(calls, nc);
    return st;
}

static enum cp_status draw_trace(const char *path, const struct cp_topology_opts *o,
                                 struct cp_buf *out, struct cp_topology_info *info,
                                 struct cp_diag *d)
{
    struct cp_trace_store *s = NULL;
    struct cp_trace_run r;
    memset(&r, 0, sizeof r);
    struct cp_trace_pipeline p;
    memset(&p, 0, sizeof p);
    struct cp_buf title;
    cp_buf_init(&title);
    enum cp_status st = cp_trace_store_open_ro(path, &s, d);
    if (st != CP_OK)
        return st;
    if (info)
        info->kind = "trace";
    st = cp_trace_query_run(s, o->run_id, &r, d);
    if (st == CP_OK)
        st = cp_trace_query_pipeline(s, r.id, &p, d);
    if (st != CP_OK)
        goto out;
    if (o->title)
        cp_buf_puts(&title, o->title);
    else
        cp_buf_printf(&title, "%s, run %lld", path, (long long)r.id);
    if (r.model_path[0] && !o->title && p.n_nodes == 0)
        cp_buf_printf(&title, " (%s)", r.model_path);
    cp_buf_putc(&title, '\0');
    if (title.failed) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (p.n_nodes > 0)
        st = draw_pipeline(s, r.id, &p, title.data, out, info, d);
    else
        st = draw_kernels(s, path, r.id, title.data, o, out, info, d);
out:
    cp_buf_release(&title);
    cp_trace_pipeline_release(&p);
    cp_trace_run_release(&r);
    cp_trace_store_close(s);
    return st;
}

/* ---- a CPU .om ------------------------------------------------------------------------------- */

static enum cp_status draw_model(const char *path, const struct cp_topology_opts *o,
                                 struct cp_buf *out, struct cp_topology_info *info,
                                 struct cp_diag *d)
{
    struct cp_graph *g = NULL;
    struct topo t;
    memset(&t, 0, sizeof t);
    struct cp_buf label, tip;
    cp_buf_init(&label);
    cp_buf_init(&tip);
    enum cp_status st = cp_om_read(path, &g, NULL, d);
    if (st != CP_OK)
        return st;
    if (info)
        info->kind = "model";
    size_t n = cp_graph_n_nodes(g);
    /* nodes keep their index in the graph, dead ones undrawn */
    st = topo_open(&t, o->title ? o->title : path, cp_graph_n_live_nodes(g), n, d);
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (nd->dead)
            continue;
        cp_buf_reset(&label);
        cp_buf_reset(&tip);
        put_text(&label, nd->name, TOPO_LINE_CHARS);
        cp_buf_puts(&label, LABEL_BREAK);
        put_text(&label, nd->op_type, TOPO_LINE_CHARS);
        put_tip(&tip, nd->name);
        cp_buf_puts(&tip, TOOLTIP_BREAK "op ");
        put_tip(&tip, nd->op_type);
        const char *const *org = (const char *const *)nd->origins;
        if (origins_differ(nd->name, org, nd->n_origins))
            put_origins(&label, &tip, org, nd->n_origins);
        cp_buf_putc(&label, '\0');
        cp_buf_putc(&tip, '\0');
        if (label.failed || tip.failed) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        struct topo_look look = {
            .label = label.data, .tooltip = tip.data, .ramp = -1, .fused = nd->n_origins > 1};
        st = topo_node(&t, i, &look, d);
    }
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (nd->dead)
            continue;
        for (size_t a = 0; a < nd->n_inputs && st == CP_OK; a++) {
            int32_t ti = nd->inputs[a];
            if (ti < 0)
                continue;
            const struct cp_tensor *x = cp_graph_tensor(g, ti);
            if (x->producer < 0)
                continue;
            bool seen = false;
            for (size_t b = 0; b < a && !seen; b++)
                seen = nd->inputs[b] == ti;
            if (seen)
                continue;
            /* the shape may hold the model's symbolic dimension names */
            char shape[128], text[160];
            cp_shape_format(&x->shape, shape, sizeof shape);
            snprintf(text, sizeof text, "%s %s", shape, cp_dtype_name(x->dtype));
            cp_buf_reset(&label);
            cp_buf_reset(&tip);
            put_text(&label, text, 0);
            cp_buf_putc(&label, '\0');
            put_tip(&tip, x->name);
            cp_buf_puts(&tip, ": ");
            put_tip(&tip, text);
            cp_buf_printf(&tip, " %s", cp_layout_name(x->layout));
            cp_buf_putc(&tip, '\0');
            if (label.failed || tip.failed)
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            else
                st = topo_edge(&t, (size_t)x->producer, i, label.data, tip.data, false, d);
        }
    }
    if (st != CP_OK)
        goto out;
    cp_buf_reset(&label);
    put_text(&label, o->title ? o->title : path, 0);
    cp_buf_printf(&label, LABEL_BREAK "model: %zu nodes, %zu fused; no times: a model file",
                  t.n_nodes, t.fused);
    st = topo_render(&t, &label, out, d);
    if (st == CP_OK && info) {
        info->nodes = t.n_nodes;
        info->edges = t.n_edges;
        info->fused = t.fused;
    }
out:
    topo_close(&t);
    cp_buf_release(&label);
    cp_buf_release(&tip);
    cp_graph_free(g);
    return st;
}

/* ---- a flow ------------------------------------------------------------------------------------
 */

static enum cp_status draw_flow(const char *path, const struct cp_topology_opts *o,
                                struct cp_buf *out, struct cp_topology_info *info,
                                struct cp_diag *d)
{
    struct cp_flow *f = NULL;
    struct topo t;
    memset(&t, 0, sizeof t);
    struct cp_buf label, tip;
    cp_buf_init(&label);
    cp_buf_init(&tip);
    enum cp_status st = cp_flow_load(path, &f, d);
    if (st != CP_OK)
        return st;
    if (info)
        info->kind = "flow";
    size_t n = cp_flow_n_nodes(f);
    st = topo_open(&t, o->title ? o->title : path, n, n, d);
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        struct cp_flow_node_info ni;
        cp_flow_node(f, i, &ni);
        cp_buf_reset(&label);
        cp_buf_reset(&tip);
        put_text(&label, ni.name, TOPO_LINE_CHARS);
        cp_buf_puts(&label, LABEL_BREAK);
        put_text(&label, ni.flowunit, TOPO_LINE_CHARS);
        cp_buf_printf(&label, LABEL_BREAK "workers %d \xc2\xb7 batch %d \xc2\xb7 queue %d",
                      ni.workers, ni.batch_size, ni.queue_size);
        const char *model = cp_flow_node_attr(f, i, "model");
        if (model) {
            cp_buf_puts(&label, LABEL_BREAK "model ");
            put_text(&label, model, TOPO_LINE_CHARS);
        }
        put_tip(&tip, ni.name);
        cp_buf_puts(&tip, TOOLTIP_BREAK "flowunit ");
        put_tip(&tip, ni.flowunit);
        cp_buf_printf(&tip, " (line %d)", ni.line);
        if (model) {
            cp_buf_puts(&tip, TOOLTIP_BREAK "model ");
            put_tip(&tip, model);
        }
        cp_buf_putc(&label, '\0');
        cp_buf_putc(&tip, '\0');
        if (label.failed || tip.failed) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        struct topo_look look = {.label = label.data, .tooltip = tip.data, .ramp = -1};
        st = topo_node(&t, i, &look, d);
    }
    for (size_t i = 0; i < cp_flow_n_edges(f) && st == CP_OK; i++) {
        size_t from, to;
        bool back;
        cp_flow_edge(f, i, &from, &to, &back);
        st = topo_edge(&t, from, to, back ? "loop back" : NULL, NULL, back, d);
    }
    if (st != CP_OK)
        goto out;
    cp_buf_reset(&label);
    put_text(&label, o->title ? o->title : path, 0);
    cp_buf_puts(&label, LABEL_BREAK "flow ");
    put_text(&label, cp_flow_name(f), 0);
    cp_buf_printf(&label, ": %zu nodes, %zu edges; no times: a flow file", t.n_nodes, t.n_edges);
    st = topo_render(&t, &label, out, d);
    if (st == CP_OK && info) {
        info->nodes = t.n_nodes;
        info->edges = t.n_edges;
        info->fused = 0;
    }
out:
    topo_close(&t);
    cp_buf_release(&label);
    cp_buf_release(&tip);
    cp_flow_free(f);
    return st;
}

/* ---- which input -------------------------------------------------------------------------------
 */

/* Whether the head of a file reads as a flow: text with a [graph] table or
 * a graphconf key (then flow.c's own refusals say what is wrong with it). */
static bool looks_like_flow(const uint8_t *head, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (head[i] == 0)
            return false;
    char text[4097];
    memcpy(text, head, n);
    text[n] = '\0';
    return strstr(text, "[graph]") || strstr(text, "graphconf");
}

enum cp_status cp_view_topology(const char *path, const struct cp_topology_opts *o,
                                struct cp_buf *out, struct cp_topology_info *info,
                                struct cp_diag *d)
{
    struct cp_topology_opts dflt = {.run_id = -1};
    if (!o)
        o = &dflt;
    if (info)
        *info = (struct cp_topology_info){.kind = ""};
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return cp_diag_set(d, CP_ERR_IO, "%s: %s", path,
                           errno == ENOENT ? "no such file" : strerror(errno));
    uint8_t head[4096];
    size_t n = fread(head, 1, sizeof head, fp);
    bool bad = ferror(fp) != 0;
    fclose(fp);
    if (bad)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot be read", path);
    if (n == 0)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: an empty file: a topology is drawn from %s",
                           path, KINDS_TAKEN);
    if (n >= 16 && memcmp(head, "SQLite format 3", 16) == 0)
        return draw_trace(path, o, out, info, d);
    if (n >= 4 && cp_om_sniff(head, n) != CP_OM_KIND_UNKNOWN)
        return draw_model(path, o, out, info, d);
    if (looks_like_flow(head, n))
        return draw_flow(path, o, out, info, d);
    return cp_diag_set(d, CP_ERR_INVALID,
                       "%s: neither a trace store, a CPU .om nor a flow: a topology is drawn "
                       "from %s",
                       path, KINDS_TAKEN);
}
