/* The Graphviz graph a topology is drawn as (view/topology_internal.h):
 * labels and tooltips escaped, nodes and edges, the layout by dot with the
 * plugins linked in, the SVG with its tooltips put back; small formatting
 * the drawings share. */
#include "view/topology_internal.h"

#include "report/chart.h"
#include "report/doc.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building the graph ----------------------------------------------------------------- */

/* Append s as XML text (line ends and tabs as spaces), at most `max`
 * characters (0: all) cut with an ellipsis; for a label (Graphviz decodes
 * the entities for layout and writes them back) with backslashes doubled,
 * for a tooltip (our own text in the SVG) as it is. */
static void tp_put_escaped(struct cp_buf *b, const char *s, size_t max, bool tooltip)
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

void tp_put_text(struct cp_buf *b, const char *s, size_t max)
{
    tp_put_escaped(b, s, max, false);
}

/* A label's text of at most `max` characters: the end of a longer one
 * ("…/conv1/Conv"), where nested ONNX names differ. */
void tp_put_tail(struct cp_buf *b, const char *s, size_t max)
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
    tp_put_text(b, p, 0);
}

void tp_put_tip(struct cp_buf *b, const char *s)
{
    tp_put_escaped(b, s, 0, true);
}

/* Line ends: "\n" centres a label's line; a tooltip is XML text. */

void tp_set(void *obj, const char *key, const char *value)
{
    agsafeset(obj, (char *)key, (char *)value, "");
}

/* Every node's and edge's attributes unless one says otherwise. */
static const struct {
    int kind;
    const char *key, *value;
} DEFAULTS[] = {
    {AGNODE, "shape", "box"},
    {AGNODE, "style", "filled,rounded"},
    {AGNODE, "fontname", TOPO_FONT},
    {AGNODE, "fontsize", "10"},
    {AGNODE, "fillcolor", CP_CHART_NEUTRAL_HEX},
    {AGNODE, "fontcolor", "black"},
    {AGNODE, "color", "#525252"},
    {AGNODE, "penwidth", "1"},
    {AGNODE, "label", ""},
    {AGNODE, "tooltip", ""},
    {AGEDGE, "fontname", TOPO_FONT},
    {AGEDGE, "fontsize", "8"},
    {AGEDGE, "color", "#737373"},
    {AGEDGE, "arrowsize", "0.6"},
    {AGEDGE, "label", ""},
    {AGEDGE, "tooltip", ""},
    {AGEDGE, "style", "solid"},
    {AGEDGE, "constraint", "true"},
};

/* A graph of `n` nodes to draw, numbered below `cap`, as o asks (still or
 * SVG). */
enum cp_status topo_open(struct topo *t, const char *title, size_t n, size_t cap,
                         const struct cp_topology_opts *o, struct cp_diag *d)
{
    memset(t, 0, sizeof *t);
    cp_buf_init(&t->esc);
    t->still = o && o->still;
    t->still_format = o ? o->still_format : CP_CHART_SVG;
    t->doc = o && o->still ? o->doc : NULL;
    t->big = n > TOPO_BIG_NODES;
    t->cap = cap;
    t->nodes = cp_calloc(cap ? cap : 1, sizeof *t->nodes);
    tp_put_tip(&t->esc, title); /* the graph's name: not a label, written as XML */
    cp_buf_putc(&t->esc, '\0');
    if (!t->nodes || t->esc.failed)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    /* cgraph reports through a process-wide handler: warnings are not ours
     * to print (pipeline/ does the same) */
    agseterr(AGERR);
    t->g = agopen(t->esc.data, Agdirected, NULL);
    if (!t->g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    tp_set(t->g, "rankdir", "TB");
    tp_set(t->g, "fontname", TOPO_FONT);
    tp_set(t->g, "fontsize", "12");
    tp_set(t->g, "labelloc", "t");
    tp_set(t->g, "labeljust", "l");
    tp_set(t->g, "nodesep", "0.25");
    tp_set(t->g, "ranksep", "0.35");
    if (t->big) {
        tp_set(t->g, "splines", "line");
        tp_set(t->g, "mclimit", "0.01");
        tp_set(t->g, "nslimit", "0.5");
        tp_set(t->g, "nslimit1", "0.5");
    } else if (n > TOPO_MEDIUM_NODES) {
        tp_set(t->g, "mclimit", "0.2");
        tp_set(t->g, "nslimit", "2");
        tp_set(t->g, "nslimit1", "2");
    }
    for (size_t i = 0; i < sizeof DEFAULTS / sizeof DEFAULTS[0]; i++)
        agattr(t->g, DEFAULTS[i].kind, (char *)DEFAULTS[i].key, (char *)DEFAULTS[i].value);
    return CP_OK;
}

void topo_close(struct topo *t)
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
static enum cp_status tp_set_tooltip(struct topo *t, void *obj, const char *xml, struct cp_diag *d)
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
    tp_set(obj, "tooltip", id);
    return CP_OK;
}

enum cp_status topo_node(struct topo *t, size_t i, const struct topo_look *k, struct cp_diag *d)
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
    tp_set(n, "label", k->label);
    if (tp_set_tooltip(t, n, k->tooltip, d) != CP_OK)
        return CP_ERR_NOMEM;
    bool light_text = false;
    if (k->ramp >= 0) {
        tp_set(n, "fillcolor", cp_chart_ramp_hex((size_t)k->ramp, &light_text));
        if (light_text)
            tp_set(n, "fontcolor", "white");
    }
    if (k->hot) {
        tp_set(n, "color", CP_CHART_VERMILLION_HEX);
        tp_set(n, "penwidth", "3");
        tp_set(n, "style", "filled,rounded,bold");
    }
    if (k->flagged) {
        tp_set(n, "peripheries", "2");
        t->flagged++;
    }
    return CP_OK;
}

/* An edge between drawn nodes `from` and `to`; label and tooltip are
 * escaped text (NULL: none). */
enum cp_status topo_edge(struct topo *t, size_t from, size_t to, const char *label,
                         const char *tooltip, bool back, struct cp_diag *d)
{
    if (from >= t->cap || to >= t->cap || !t->nodes[from] || !t->nodes[to])
        return CP_OK;
    Agedge_t *e = agedge(t->g, t->nodes[from], t->nodes[to], NULL, 1);
    if (!e)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    t->n_edges++;
    if (label && !t->big)
        tp_set(e, "label", label);
    if (tooltip && tp_set_tooltip(t, e, tooltip, d) != CP_OK)
        return CP_ERR_NOMEM;
    if (back) {
        tp_set(e, "style", "dashed");
        tp_set(e, "constraint", "false");
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

/* ---- the still picture, drawn by the chart module ---------------------------------------- */

/* What a still picture is made of, copied out of Graphviz's layout. */
struct still {
    struct cp_chart_gnode *nodes;
    struct cp_chart_gedge *edges;
    size_t n_nodes, n_edges, cap_edges;
    struct cp_buf text; /* every label, NUL-separated; read once it is whole */
    size_t *node_text, glabel;
    struct {
        size_t pts, text; /* where its points and label are, once they stop moving */
    } * edge_at;
    double *pts;
    size_t n_pts, cap_pts;
};

/* A colour as Graphviz was given it ("#rrggbb", black or white). */
static void colour_of(const char *s, double rgb[3])
{
    unsigned v = 0;
    if (!s || strcmp(s, "black") == 0)
        v = 0;
    else if (strcmp(s, "white") == 0)
        v = 0xffffff;
    else if (sscanf(s, "#%6x", &v) != 1)
        v = 0x525252;
    rgb[0] = (double)((v >> 16) & 0xff) / 255;
    rgb[1] = (double)((v >> 8) & 0xff) / 255;
    rgb[2] = (double)(v & 0xff) / 255;
}

/* A label's lines as Graphviz parsed them (entities decoded, "\n" split),
 * appended to the text with a NUL; its offset. */
static size_t put_label(struct still *x, const textlabel_t *l)
{
    size_t at = x->text.len;
    for (int i = 0; l && i < l->u.txt.nspans; i++) {
        if (i)
            cp_buf_putc(&x->text, '\n');
        cp_buf_puts(&x->text, l->u.txt.span[i].str ? l->u.txt.span[i].str : "");
    }
    cp_buf_putc(&x->text, '\0');
    return at;
}

static bool add_pts(struct still *x, const pointf *p, size_t n, double ox, double oy)
{
    if (x->n_pts + n > x->cap_pts) {
        size_t cap = x->cap_pts ? x->cap_pts : 256;
        while (cap < x->n_pts + n)
            cap *= 2;
        double *more = cp_realloc_array(x->pts, cap, 2 * sizeof *more);
        if (!more)
            return false;
        x->pts = more;
        x->cap_pts = cap;
    }
    for (size_t i = 0; i < n; i++) {
        x->pts[2 * (x->n_pts + i)] = p[i].x - ox;
        x->pts[2 * (x->n_pts + i) + 1] = p[i].y - oy;
    }
    x->n_pts += n;
    return true;
}

static bool add_edge(struct still *x, Agedge_t *e, const bezier *bz, double ox, double oy)
{
    if (x->n_edges == x->cap_edges) {
        size_t cap = x->cap_edges ? 2 * x->cap_edges : 64;
        struct cp_chart_gedge *more = cp_realloc_array(x->edges, cap, sizeof *more);
        void *tmore = cp_realloc_array(x->edge_at, cap, sizeof *x->edge_at);
        if (more)
            x->edges = more;
        if (tmore)
            x->edge_at = tmore;
        if (!more || !tmore)
            return false;
        x->cap_edges = cap;
    }
    const char *style = agget(e, "style");
    const textlabel_t *l = ED_label(e);
    struct cp_chart_gedge *g = &x->edges[x->n_edges];
    *g = (struct cp_chart_gedge){
        .n_pts = (size_t)bz->size,
        .dashed = style && strstr(style, "dashed"),
        .arrow = bz->eflag != 0,
        .tip_x = bz->ep.x - ox,
        .tip_y = bz->ep.y - oy,
        .lx = l ? l->pos.x - ox : 0,
        .ly = l ? l->pos.y - oy : 0,
        .font = l ? l->fontsize : 0,
    };
    x->edge_at[x->n_edges].pts = x->n_pts;
    x->edge_at[x->n_edges].text = l ? put_label(x, l) : SIZE_MAX;
    x->n_edges++;
    return add_pts(x, bz->list, (size_t)bz->size, ox, oy);
}

/* Copy the laid-out graph into x, then draw it with the chart module. */
static enum cp_status put_still(struct topo *t, struct cp_buf *out, struct cp_diag *d)
{
    struct still x = {0};
    cp_buf_init(&x.text);
    boxf bb = GD_bb(t->g);
    double ox = bb.LL.x, oy = bb.LL.y;
    x.nodes = cp_calloc(t->n_nodes ? t->n_nodes : 1, sizeof *x.nodes);
    x.node_text = cp_calloc(t->n_nodes ? t->n_nodes : 1, sizeof *x.node_text);
    bool ok = x.nodes && x.node_text;
    for (Agnode_t *n = agfstnode(t->g); ok && n; n = agnxtnode(t->g, n)) {
        if (x.n_nodes == t->n_nodes)
            break;
        const char *style = agget(n, "style"), *per = agget(n, "peripheries");
        const char *pw = agget(n, "penwidth");
        struct cp_chart_gnode *g = &x.nodes[x.n_nodes];
        *g = (struct cp_chart_gnode){
            .x = ND_coord(n).x - ox,
            .y = ND_coord(n).y - oy,
            .w = ND_width(n) * 72,
            .h = ND_height(n) * 72,
            .font = ND_label(n) ? ND_label(n)->fontsize : 10,
            .pen_width = pw && pw[0] ? atof(pw) : 1,
            .rounded = style && strstr(style, "rounded"),
            .double_border = per && atoi(per) >= 2,
        };
        colour_of(agget(n, "fillcolor"), g->fill);
        colour_of(agget(n, "fontcolor"), g->text);
        colour_of(agget(n, "color"), g->pen);
        x.node_text[x.n_nodes++] = put_label(&x, ND_label(n));
        for (Agedge_t *e = agfstout(t->g, n); ok && e; e = agnxtout(t->g, e))
            for (int i = 0; ok && ED_spl(e) && i < ED_spl(e)->size; i++)
                ok = add_edge(&x, e, &ED_spl(e)->list[i], ox, oy);
    }
    const textlabel_t *gl = GD_label(t->g);
    x.glabel = gl ? put_label(&x, gl) : SIZE_MAX;
    ok = ok && !x.text.failed;
    enum cp_status st = CP_OK;
    if (!ok) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    } else {
        for (size_t i = 0; i < x.n_nodes; i++)
            x.nodes[i].label = x.text.data + x.node_text[i];
        for (size_t i = 0; i < x.n_edges; i++) {
            x.edges[i].pts = x.pts + 2 * x.edge_at[i].pts;
            x.edges[i].label =
                x.edge_at[i].text == SIZE_MAX ? NULL : x.text.data + x.edge_at[i].text;
        }
        double gw = bb.UR.x - bb.LL.x, gh = bb.UR.y - bb.LL.y;
        struct cp_chart c = {
            .kind = CP_CHART_GRAPH,
            .gnodes = x.nodes,
            .n_gnodes = x.n_nodes,
            .gedges = x.edges,
            .n_gedges = x.n_edges,
            .graph_w = gw,
            .graph_h = gh,
            .glabel = x.glabel == SIZE_MAX ? NULL : x.text.data + x.glabel,
            .glabel_x = gl ? gl->pos.x - gl->dimen.x / 2 - ox : 0,
            .glabel_y = gl ? gl->pos.y + gl->dimen.y / 2 - oy : 0,
            .glabel_font = gl ? gl->fontsize : 0,
        };
        /* as wide as the layout, within what a page or a screen takes */
        double width = fmin(fmax(gw, STILL_MIN_W), STILL_MAX_W) + 16;
        if (t->doc)
            cp_doc_chart(t->doc, &c);
        else
            st = cp_chart_render(&c, t->still_format, width, out, d);
    }
    free(x.nodes);
    free(x.node_text);
    free(x.edges);
    free(x.edge_at);
    free(x.pts);
    cp_buf_release(&x.text);
    return st;
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
enum cp_status topo_render(struct topo *t, struct cp_buf *label, struct cp_buf *out,
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
    tp_set(t->g, "label", label->data);
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
    if (t->still) {
        st = put_still(t, out, d);
    } else if (gvRenderData(gvc, t->g, "svg", &data, &len) != 0 || !data) {
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

void tp_put_time(struct cp_buf *b, double ns)
{
    if (ns >= 1e6)
        cp_buf_printf(b, "%.3g ms", ns / 1e6);
    else if (ns >= 1e3)
        cp_buf_printf(b, "%.3g \xc2\xb5s", ns / 1e3);
    else
        cp_buf_printf(b, "%.0f ns", ns);
}

/* The ramp colour of a share, scaled so the largest share is the darkest. */
int tp_ramp_of(double share, double max_share)
{
    if (!(max_share > 0) || !(share > 0))
        return 0;
    int i = (int)lround(share / max_share * (CP_CHART_RAMP_N - 1));
    return i < 0 ? 0 : i >= CP_CHART_RAMP_N ? CP_CHART_RAMP_N - 1 : i;
}

/* Mark as hot the largest share and those at least HOT_OF_TOP of it, at
 * most HOT_MAX (ties: the first in input order). With flat shares only
 * the top one is hot: a runner-up by a hair is not a finding. OUT:
 * rank[i] = 1.. for hot ones, 0 otherwise. */
void tp_mark_hot(const double *share, size_t n, int *rank)
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
bool tp_origins_differ(const char *name, const char *const *o, size_t n)
{
    return n > 1 || (n == 1 && strcmp(o[0], name) != 0);
}

/* The label line listing origins ("fuses: A, B, +5 more") and the full
 * list for the tooltip. */
void tp_put_origins(struct cp_buf *label, struct cp_buf *tip, const char *const *o, size_t n)
{
    cp_buf_puts(label, LABEL_BREAK);
    cp_buf_puts(label, n > 1 ? "fuses: " : "from: ");
    for (size_t i = 0; i < n && i < TOPO_ORIGINS_SHOWN; i++) {
        if (i)
            cp_buf_puts(label, ", ");
        tp_put_tail(label, o[i], TOPO_LINE_CHARS / 2);
    }
    if (n > TOPO_ORIGINS_SHOWN)
        cp_buf_printf(label, ", +%zu more", n - TOPO_ORIGINS_SHOWN);
    cp_buf_printf(tip, TOOLTIP_BREAK "ONNX nodes (%zu):", n);
    for (size_t i = 0; i < n; i++) {
        cp_buf_puts(tip, TOOLTIP_BREAK "- ");
        tp_put_tip(tip, o[i]);
    }
}

void tp_put_tensor(struct cp_buf *b, const struct cp_trace_tensor *x, bool tooltip)
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
    tp_put_escaped(b, s.failed ? "" : s.data, 0, tooltip);
    if (s.failed)
        b->failed = true;
    cp_buf_release(&s);
}
