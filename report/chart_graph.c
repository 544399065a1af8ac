/* The GRAPH kind (report/chart.h): a graph laid out elsewhere, Graphviz's
 * dot for the topology view, drawn still with cairo and pango: boxes,
 * Bezier edges with their arrowheads, labels. */
#include "report/chart_internal.h"

#include <math.h>
#include <stdio.h>

/* The layout's labels were sized by Graphviz with Courier's metrics: any
 * monospace face has its advance. */
#define GRAPH_FONT "Monospace"
/* An arrowhead's half width against its length (Graphviz's "normal"). */
#define ARROW_HALF 0.35
/* The corner radius of a rounded box, and the gap of a doubled border,
 * in the layout's points. */
#define CORNER        4.0
#define PERIPHERY_GAP 4.0

static double graph_scale(const struct cp_chart *c, double w)
{
    if (!(c->graph_w > 0) || !(c->graph_h > 0))
        return 1;
    double s = fmin(1, w / c->graph_w);
    double max_h = c->max_h > 0 ? c->max_h : CP_CHART_GRAPH_MAX_H;
    if (c->graph_h * s > max_h)
        s = max_h / c->graph_h;
    return s;
}

double ch_graph_height(const struct cp_chart *c, double w)
{
    if (!(c->graph_w > 0) || !(c->graph_h > 0) || c->n_gnodes == 0)
        return AXIS_H; /* "no graph" */
    return c->graph_h * graph_scale(c, w);
}

/* The monospace face at `size` points as Graphviz counts them: one point
 * per unit of the chart (pango's own sizes assume 96 dots per inch). */
static void set_font(PangoLayout *l, double size)
{
    PangoFontDescription *fd = pango_font_description_from_string(GRAPH_FONT);
    pango_font_description_set_absolute_size(fd, size * PANGO_SCALE);
    pango_layout_set_font_description(l, fd);
    pango_font_description_free(fd);
}

/* Text centred at (cx, cy) in the monospace face at `size` points, made
 * smaller to fit `fit` points of width (0: any). */
static void centred(cairo_t *cr, const char *s, double cx, double cy, double size, double fit)
{
    if (!s || !s[0] || !(size > 0.5))
        return;
    PangoLayout *l = pango_cairo_create_layout(cr);
    pango_layout_set_text(l, s, -1);
    pango_layout_set_alignment(l, PANGO_ALIGN_CENTER);
    for (int pass = 0; pass < 2; pass++) {
        set_font(l, size);
        double tw = ch_layout_width(l);
        if (pass > 0 || !(fit > 0) || tw <= fit)
            break;
        size *= fit / tw;
    }
    int lw = 0, lh = 0;
    pango_layout_get_size(l, &lw, &lh);
    cairo_move_to(cr, cx - (double)lw / PANGO_SCALE / 2, cy - (double)lh / PANGO_SCALE / 2);
    pango_cairo_show_layout(cr, l);
    g_object_unref(l);
}

static void box_path(cairo_t *cr, double x0, double y0, double w, double h, double r)
{
    r = fmin(r, fmin(w, h) / 2);
    if (!(r > 0)) {
        cairo_rectangle(cr, x0, y0, w, h);
        return;
    }
    cairo_new_sub_path(cr);
    cairo_arc(cr, x0 + w - r, y0 + r, r, -M_PI / 2, 0);
    cairo_arc(cr, x0 + w - r, y0 + h - r, r, 0, M_PI / 2);
    cairo_arc(cr, x0 + r, y0 + h - r, r, M_PI / 2, M_PI);
    cairo_arc(cr, x0 + r, y0 + r, r, M_PI, 3 * M_PI / 2);
    cairo_close_path(cr);
}

struct place {
    double x0, top, s, graph_h;
};

static double px(const struct place *p, double gx)
{
    return p->x0 + gx * p->s;
}

static double py(const struct place *p, double gy)
{
    return p->top + (p->graph_h - gy) * p->s;
}

static void draw_edge(cairo_t *cr, const struct place *p, const struct cp_chart_gedge *e)
{
    const double grey = 0.45;
    cairo_set_source_rgb(cr, grey, grey, grey);
    cairo_set_line_width(cr, fmax(0.3, p->s));
    if (e->dashed) {
        double dash[] = {4 * p->s, 3 * p->s};
        cairo_set_dash(cr, dash, 2, 0);
    }
    double ex = 0, ey = 0;
    if (e->pts && e->n_pts >= 2) {
        cairo_move_to(cr, px(p, e->pts[0]), py(p, e->pts[1]));
        size_t i = 1;
        for (; i + 2 < e->n_pts; i += 3)
            cairo_curve_to(cr, px(p, e->pts[2 * i]), py(p, e->pts[2 * i + 1]),
                           px(p, e->pts[2 * i + 2]), py(p, e->pts[2 * i + 3]),
                           px(p, e->pts[2 * i + 4]), py(p, e->pts[2 * i + 5]));
        for (; i < e->n_pts; i++) /* not a whole Bezier piece: straight on */
            cairo_line_to(cr, px(p, e->pts[2 * i]), py(p, e->pts[2 * i + 1]));
        ex = e->pts[2 * (e->n_pts - 1)];
        ey = e->pts[2 * (e->n_pts - 1) + 1];
        cairo_stroke(cr);
    }
    cairo_set_dash(cr, NULL, 0, 0);
    if (e->arrow && e->pts && e->n_pts >= 2) {
        double bx = px(p, ex), by = py(p, ey), tx = px(p, e->tip_x), ty = py(p, e->tip_y);
        double dx = tx - bx, dy = ty - by, len = hypot(dx, dy);
        if (len > 0) {
            double nx = -dy * ARROW_HALF, ny = dx * ARROW_HALF;
            cairo_move_to(cr, tx, ty);
            cairo_line_to(cr, bx + nx, by + ny);
            cairo_line_to(cr, bx - nx, by - ny);
            cairo_close_path(cr);
            cairo_fill(cr);
        }
    }
    if (e->label && e->label[0]) {
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        centred(cr, e->label, px(p, e->lx), py(p, e->ly), e->font * p->s, 0);
    }
}

static void draw_node(cairo_t *cr, const struct place *p, const struct cp_chart_gnode *n)
{
    double w = n->w * p->s, h = n->h * p->s;
    double x0 = px(p, n->x) - w / 2, y0 = py(p, n->y) - h / 2;
    double r = n->rounded ? CORNER * p->s : 0, gap = PERIPHERY_GAP * p->s;
    double lw = fmax(0.3, n->pen_width * p->s);
    /* the inner box holds the fill; a doubled border draws the outer one
     * around it, as Graphviz's peripheries do */
    double ix = x0, iy = y0, iw = w, ih = h;
    if (n->double_border && w > 2 * gap && h > 2 * gap) {
        ix += gap;
        iy += gap;
        iw -= 2 * gap;
        ih -= 2 * gap;
        box_path(cr, x0, y0, w, h, r ? r + gap : 0);
        cairo_set_source_rgb(cr, n->pen[0], n->pen[1], n->pen[2]);
        cairo_set_line_width(cr, fmax(0.3, p->s));
        cairo_stroke(cr);
    }
    box_path(cr, ix, iy, iw, ih, r);
    cairo_set_source_rgb(cr, n->fill[0], n->fill[1], n->fill[2]);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, n->pen[0], n->pen[1], n->pen[2]);
    cairo_set_line_width(cr, lw);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, n->text[0], n->text[1], n->text[2]);
    centred(cr, n->label, ix + iw / 2, iy + ih / 2, n->font * p->s, iw - 2 * lw - 2);
}

void ch_draw_graph(cairo_t *cr, const struct cp_chart *c, double x, double y, double w)
{
    if (!(c->graph_w > 0) || !(c->graph_h > 0) || c->n_gnodes == 0) {
        cairo_set_source_rgb(cr, 0.4, 0.4, 0.4);
        ch_text(cr, "no graph", x, y + 2, 9, false, false);
        return;
    }
    double s = graph_scale(c, w);
    struct place p = {.x0 = x + (w - c->graph_w * s) / 2, .top = y, .s = s, .graph_h = c->graph_h};
    cp_report_fonts_used();
    cairo_save(cr);
    cairo_rectangle(cr, x, y, w, c->graph_h * s);
    cairo_clip(cr);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    if (c->glabel && c->glabel[0] && c->glabel_font > 0) {
        PangoLayout *l = pango_cairo_create_layout(cr);
        set_font(l, c->glabel_font * s);
        pango_layout_set_text(l, c->glabel, -1);
        cairo_set_source_rgb(cr, 0.05, 0.05, 0.05);
        cairo_move_to(cr, px(&p, c->glabel_x), py(&p, c->glabel_y));
        pango_cairo_show_layout(cr, l);
        g_object_unref(l);
    }
    for (size_t i = 0; c->gedges && i < c->n_gedges; i++)
        draw_edge(cr, &p, &c->gedges[i]);
    for (size_t i = 0; c->gnodes && i < c->n_gnodes; i++)
        draw_node(cr, &p, &c->gnodes[i]);
    cairo_restore(cr);
}
