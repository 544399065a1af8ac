/* Documents and their HTML and PDF renderings (report/doc.h). */
#include "report/doc.h"

#include "core/json.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <ctype.h>
#include <math.h>
#include <pango/pangocairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum block_kind { B_HEADING, B_TEXT, B_PRE, B_TABLE, B_CHART };

/* The PDF's page */
#define PAGE_W   595.0 /* A4, points */
#define PAGE_H   842.0
#define MARGIN   50.0
#define FOOT     24.0
#define CONTENT  (PAGE_W - 2 * MARGIN)
#define BOTTOM   (PAGE_H - MARGIN - FOOT)
#define CELL_PAD 3.0

struct chart_copy {
    struct cp_chart c;
    char **labels, **parts, *title, *unit, *note, *snames[2];
    double *values, *samples[2];
    /* GRAPH */
    struct cp_chart_gnode *gnodes;
    char **gnode_labels;
    size_t n_gnodes;
    struct cp_chart_gedge *gedges;
    char **gedge_labels;
    double **gedge_pts;
    size_t n_gedges;
    char *glabel;
    /* FRAMES */
    struct cp_chart_frame *frames;
    char **frame_labels;
    size_t n_frame_labels;
    /* XY */
    char *x_title, *y_title;
    struct {
        char *name, **labels;
        double *x, *y;
    } series[CP_CHART_MAX_SERIES];
};

struct block {
    enum block_kind kind;
    int level;
    char *text;
    size_t cols, rows;
    char **cells;
    bool *right; /* per column */
    struct chart_copy *chart;
};

struct cp_doc {
    char *title;
    struct block *b;
    size_t n, cap;
    bool oom;
};

/* A copy of s with invalid UTF-8 replaced by U+FFFD (names users bring):
 * cairo refuses such text in the PDF's outline and metadata, which fails
 * the PDF and leaves cairo objects alive at exit. NULL when out of memory. */
static char *text_dup(const char *s)
{
    if (cp_utf8_valid(s, strlen(s)))
        return cp_strdup(s);
    struct cp_buf b;
    cp_buf_init(&b);
    cp_utf8_repair(s, strlen(s), &b);
    if (cp_buf_status(&b) != CP_OK) {
        cp_buf_release(&b);
        return NULL;
    }
    return cp_buf_steal(&b);
}

struct cp_doc *cp_doc_new(const char *title)
{
    struct cp_doc *d = cp_calloc(1, sizeof *d);
    if (d && !(d->title = text_dup(title ? title : "report"))) {
        free(d);
        return NULL;
    }
    return d;
}

static void free_chart(struct chart_copy *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->labels && i < c->c.n; i++)
        free(c->labels[i]);
    for (size_t i = 0; c->parts && i < c->c.n_parts; i++)
        free(c->parts[i]);
    free(c->labels);
    free(c->parts);
    free(c->title);
    free(c->unit);
    free(c->note);
    free(c->snames[0]);
    free(c->snames[1]);
    free(c->values);
    free(c->samples[0]);
    free(c->samples[1]);
    for (size_t i = 0; c->frame_labels && i < c->n_frame_labels; i++)
        free(c->frame_labels[i]);
    free(c->frame_labels);
    free(c->frames);
    for (size_t i = 0; c->gnode_labels && i < c->n_gnodes; i++)
        free(c->gnode_labels[i]);
    free(c->gnode_labels);
    free(c->gnodes);
    for (size_t i = 0; i < c->n_gedges; i++) {
        if (c->gedge_labels)
            free(c->gedge_labels[i]);
        if (c->gedge_pts)
            free(c->gedge_pts[i]);
    }
    free(c->gedge_labels);
    free(c->gedge_pts);
    free(c->gedges);
    free(c->glabel);
    free(c->x_title);
    free(c->y_title);
    for (size_t s = 0; s < CP_CHART_MAX_SERIES; s++) {
        for (size_t i = 0; c->series[s].labels && i < c->c.series[s].n; i++)
            free(c->series[s].labels[i]);
        free(c->series[s].labels);
        free(c->series[s].name);
        free(c->series[s].x);
        free(c->series[s].y);
    }
    free(c);
}

void cp_doc_free(struct cp_doc *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++) {
        struct block *b = &d->b[i];
        free(b->text);
        for (size_t k = 0; b->cells && k < b->rows * b->cols; k++)
            free(b->cells[k]);
        free(b->cells);
        free(b->right);
        free_chart(b->chart);
    }
    free(d->b);
    free(d->title);
    free(d);
}

enum cp_status cp_doc_status(const struct cp_doc *d)
{
    return !d || d->oom ? CP_ERR_NOMEM : CP_OK;
}

static struct block *push(struct cp_doc *d, enum block_kind k)
{
    if (!d || d->oom)
        return NULL;
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 32;
        struct block *g = cp_realloc_array(d->b, nc, sizeof *g);
        if (!g) {
            d->oom = true;
            return NULL;
        }
        d->b = g;
        d->cap = nc;
    }
    struct block *b = &d->b[d->n++];
    memset(b, 0, sizeof *b);
    b->kind = k;
    return b;
}

static void push_text(struct cp_doc *d, enum block_kind k, int level, const char *text)
{
    struct block *b = push(d, k);
    if (!b)
        return;
    b->level = level < 1 ? 1 : level > 3 ? 3 : level;
    if (!(b->text = text_dup(text ? text : "")))
        d->oom = true;
}

void cp_doc_heading(struct cp_doc *d, int level, const char *text)
{
    push_text(d, B_HEADING, level, text);
}

void cp_doc_text(struct cp_doc *d, const char *text)
{
    push_text(d, B_TEXT, 0, text);
}

void cp_doc_pre(struct cp_doc *d, const char *text)
{
    push_text(d, B_PRE, 0, text);
}

/* A cell that reads as a number ("12.5", "-3%", "1.2 ms", "+4.1%"). */
static bool numeric(const char *s)
{
    if (!s || !*s)
        return true; /* an empty cell does not decide */
    while (*s == '+' || *s == '-' || *s == ' ')
        s++;
    return isdigit((unsigned char)*s) || strncmp(s, "n/a", 3) == 0 || strncmp(s, "inf", 3) == 0;
}

void cp_doc_table(struct cp_doc *d, size_t cols, size_t rows, const char *const *cells)
{
    if (!cols || !rows)
        return;
    struct block *b = push(d, B_TABLE);
    if (!b)
        return;
    b->cols = cols;
    b->rows = rows;
    b->cells = cp_calloc(rows * cols, sizeof *b->cells);
    b->right = cp_calloc(cols, sizeof *b->right);
    if (!b->cells || !b->right) {
        d->oom = true;
        return;
    }
    for (size_t k = 0; k < rows * cols; k++)
        if (!(b->cells[k] = text_dup(cells[k] ? cells[k] : "")))
            d->oom = true;
    for (size_t c = 0; c < cols; c++) {
        bool num = rows > 1;
        for (size_t r = 1; r < rows && num; r++)
            num = numeric(b->cells[r * cols + c]);
        b->right[c] = num;
    }
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (!s)
        return NULL;
    char *t = text_dup(s);
    if (!t)
        *oom = true;
    return t;
}

/* A page's room for a graph under its title and a few lines of note. */
#define GRAPH_PAGE_H (BOTTOM - MARGIN - 80)

/* Copy c's graph into x (its chart points at the copies). False when out
 * of memory (x holds what was copied, freed with it). */
static bool copy_graph(struct chart_copy *x, const struct cp_chart *c)
{
    bool oom = false;
    x->glabel = dup_or_null(c->glabel, &oom);
    x->c.glabel = x->glabel;
    x->c.max_h = c->max_h > 0 && c->max_h < GRAPH_PAGE_H ? c->max_h : GRAPH_PAGE_H;
    if (c->n_gnodes && c->gnodes) {
        x->gnodes = cp_calloc(c->n_gnodes, sizeof *x->gnodes);
        x->gnode_labels = cp_calloc(c->n_gnodes, sizeof *x->gnode_labels);
        if (!x->gnodes || !x->gnode_labels)
            return false;
        x->n_gnodes = c->n_gnodes;
        for (size_t i = 0; i < c->n_gnodes; i++) {
            x->gnodes[i] = c->gnodes[i];
            x->gnode_labels[i] = dup_or_null(c->gnodes[i].label, &oom);
            x->gnodes[i].label = x->gnode_labels[i];
        }
    }
    if (c->n_gedges && c->gedges) {
        x->gedges = cp_calloc(c->n_gedges, sizeof *x->gedges);
        x->gedge_labels = cp_calloc(c->n_gedges, sizeof *x->gedge_labels);
        x->gedge_pts = cp_calloc(c->n_gedges, sizeof *x->gedge_pts);
        if (!x->gedges || !x->gedge_labels || !x->gedge_pts)
            return false;
        x->n_gedges = c->n_gedges;
        for (size_t i = 0; i < c->n_gedges; i++) {
            const struct cp_chart_gedge *e = &c->gedges[i];
            x->gedges[i] = *e;
            x->gedge_labels[i] = dup_or_null(e->label, &oom);
            x->gedges[i].label = x->gedge_labels[i];
            x->gedges[i].pts = NULL;
            x->gedges[i].n_pts = 0;
            if (e->pts && e->n_pts) {
                x->gedge_pts[i] = cp_calloc(2 * e->n_pts, sizeof *x->gedge_pts[i]);
                if (!x->gedge_pts[i])
                    return false;
                memcpy(x->gedge_pts[i], e->pts, 2 * e->n_pts * sizeof *x->gedge_pts[i]);
                x->gedges[i].pts = x->gedge_pts[i];
                x->gedges[i].n_pts = e->n_pts;
            }
        }
    }
    if (oom)
        return false;
    x->c.gnodes = x->gnodes;
    x->c.n_gnodes = x->n_gnodes;
    x->c.gedges = x->gedges;
    x->c.n_gedges = x->n_gedges;
    return true;
}

void cp_doc_chart(struct cp_doc *d, const struct cp_chart *c)
{
    struct block *b = push(d, B_CHART);
    if (!b)
        return;
    struct chart_copy *x = cp_calloc(1, sizeof *x);
    if (!x) {
        d->oom = true;
        return;
    }
    b->chart = x;
    x->c = *c;
    bool oom = false;
    x->title = dup_or_null(c->title, &oom);
    x->unit = dup_or_null(c->unit, &oom);
    x->note = dup_or_null(c->note, &oom);
    size_t nv = c->kind == CP_CHART_STACKED ? c->n * c->n_parts : c->n;
    if (c->n) {
        x->labels = cp_calloc(c->n, sizeof *x->labels);
        x->values = cp_calloc(nv ? nv : 1, sizeof *x->values);
        oom = oom || !x->labels || !x->values;
        for (size_t i = 0; !oom && i < c->n; i++)
            x->labels[i] = dup_or_null(c->labels[i] ? c->labels[i] : "", &oom);
        if (!oom)
            memcpy(x->values, c->values, nv * sizeof *x->values);
    }
    if (c->n_parts) {
        x->parts = cp_calloc(c->n_parts, sizeof *x->parts);
        oom = oom || !x->parts;
        for (size_t i = 0; !oom && i < c->n_parts; i++)
            x->parts[i] = dup_or_null(c->part_names[i], &oom);
    }
    for (int s = 0; s < 2; s++) {
        x->snames[s] = dup_or_null(c->sample_names[s], &oom);
        if (c->samples[s] && c->n_samples[s]) {
            x->samples[s] = cp_calloc(c->n_samples[s], sizeof *x->samples[s]);
            if (x->samples[s])
                memcpy(x->samples[s], c->samples[s], c->n_samples[s] * sizeof(double));
            else
                oom = true;
        }
    }
    /* GRAPH: nodes, edges, their points and labels; no taller than a page
     * can hold under its title and note */
    x->c.gnodes = NULL;
    x->c.n_gnodes = 0;
    x->c.gedges = NULL;
    x->c.n_gedges = 0;
    x->c.glabel = NULL;
    if (c->kind == CP_CHART_GRAPH)
        oom = oom || !copy_graph(x, c);
    /* FRAMES: the frames and their labels */
    x->c.frames = NULL;
    x->c.n_frames = 0;
    if (c->frames && c->n_frames) {
        x->frames = cp_calloc(c->n_frames, sizeof *x->frames);
        x->frame_labels = cp_calloc(c->n_frames, sizeof *x->frame_labels);
        x->n_frame_labels = x->frame_labels ? c->n_frames : 0;
        oom = oom || !x->frames || !x->frame_labels;
        for (size_t i = 0; !oom && i < c->n_frames; i++) {
            x->frames[i] = c->frames[i];
            x->frame_labels[i] = dup_or_null(c->frames[i].label, &oom);
            x->frames[i].label = x->frame_labels[i];
        }
        if (!oom) {
            x->c.frames = x->frames;
            x->c.n_frames = c->n_frames;
        }
    }
    /* XY: the axes' titles and each series' points, name and labels */
    x->x_title = dup_or_null(c->x_title, &oom);
    x->y_title = dup_or_null(c->y_title, &oom);
    x->c.x_title = x->x_title;
    x->c.y_title = x->y_title;
    size_t ns = c->n_series < CP_CHART_MAX_SERIES ? c->n_series : CP_CHART_MAX_SERIES;
    x->c.n_series = ns;
    for (size_t s = 0; s < CP_CHART_MAX_SERIES; s++) {
        const struct cp_chart_series *in = &c->series[s];
        struct cp_chart_series *cs = &x->c.series[s];
        size_t n = s < ns && in->x && in->y ? in->n : 0;
        cs->n = n;
        x->series[s].name = dup_or_null(s < ns ? in->name : NULL, &oom);
        cs->name = x->series[s].name;
        if (n) {
            x->series[s].x = cp_calloc(n, sizeof(double));
            x->series[s].y = cp_calloc(n, sizeof(double));
            oom = oom || !x->series[s].x || !x->series[s].y;
            if (!oom) {
                memcpy(x->series[s].x, in->x, n * sizeof(double));
                memcpy(x->series[s].y, in->y, n * sizeof(double));
            }
        }
        cs->x = x->series[s].x;
        cs->y = x->series[s].y;
        cs->labels = NULL;
        if (n && in->labels) {
            x->series[s].labels = cp_calloc(n, sizeof(char *));
            oom = oom || !x->series[s].labels;
            for (size_t i = 0; !oom && i < n; i++)
                x->series[s].labels[i] = dup_or_null(in->labels[i], &oom);
            cs->labels = (const char *const *)x->series[s].labels;
        }
    }
    x->c.title = x->title;
    x->c.unit = x->unit;
    x->c.note = x->note;
    x->c.labels = (const char *const *)x->labels;
    x->c.values = x->values;
    x->c.part_names = (const char *const *)x->parts;
    for (int s = 0; s < 2; s++) {
        x->c.samples[s] = x->samples[s];
        x->c.sample_names[s] = x->snames[s];
    }
    if (oom)
        d->oom = true;
}

/* ---- HTML ---------------------------------------------------------------------------------- */

static void esc(struct cp_buf *o, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            cp_buf_puts(o, "&lt;");
            break;
        case '>':
            cp_buf_puts(o, "&gt;");
            break;
        case '&':
            cp_buf_puts(o, "&amp;");
            break;
        case '"':
            cp_buf_puts(o, "&quot;");
            break;
        default:
            cp_buf_append(o, s, 1);
        }
    }
}

static size_t n_headings(const struct cp_doc *d)
{
    size_t k = 0;
    for (size_t i = 0; i < d->n; i++)
        k += d->b[i].kind == B_HEADING;
    return k;
}

void cp_doc_html(const struct cp_doc *d, struct cp_buf *o)
{
    cp_buf_puts(o,
                "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
    esc(o, d->title);
    cp_buf_puts(o, "</title>\n<style>\n"
                   "body{font-family:sans-serif;max-width:62em;margin:2em auto;padding:0 1em;"
                   "color:#1a1a1a;line-height:1.4}\n"
                   "h1{font-size:1.6em}h2{font-size:1.3em;border-bottom:1px solid #ccc}"
                   "h3{font-size:1.1em}\n"
                   "table{border-collapse:collapse;margin:.8em 0;font-size:.9em}\n"
                   "th,td{border:1px solid #ccc;padding:.2em .5em;vertical-align:top}"
                   "th{background:#eee;text-align:left}td.n{text-align:right;"
                   "font-variant-numeric:tabular-nums}\n"
                   "pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em}\n"
                   "nav ul{list-style:none;padding-left:1em}figure{margin:1em 0}\n"
                   "svg{max-width:100%;height:auto}\n</style>\n</head>\n<body>\n<h1>");
    esc(o, d->title);
    cp_buf_puts(o, "</h1>\n");
    if (n_headings(d) >= 3) {
        cp_buf_puts(o, "<nav><strong>Contents</strong>\n<ul>\n");
        size_t h = 0;
        for (size_t i = 0; i < d->n; i++)
            if (d->b[i].kind == B_HEADING) {
                cp_buf_printf(o, "<li style=\"margin-left:%dem\"><a href=\"#s%zu\">",
                              d->b[i].level - 1, ++h);
                esc(o, d->b[i].text);
                cp_buf_puts(o, "</a></li>\n");
            }
        cp_buf_puts(o, "</ul></nav>\n");
    }
    size_t h = 0, charts = 0;
    for (size_t i = 0; i < d->n; i++) {
        const struct block *b = &d->b[i];
        switch (b->kind) {
        case B_HEADING:
            cp_buf_printf(o, "<h%d id=\"s%zu\">", b->level + 1, ++h);
            esc(o, b->text);
            cp_buf_printf(o, "</h%d>\n", b->level + 1);
            break;
        case B_TEXT:
            cp_buf_puts(o, "<p>");
            esc(o, b->text);
            cp_buf_puts(o, "</p>\n");
            break;
        case B_PRE:
            cp_buf_puts(o, "<pre>");
            esc(o, b->text);
            cp_buf_puts(o, "</pre>\n");
            break;
        case B_TABLE:
            cp_buf_puts(o, "<table>\n");
            for (size_t r = 0; r < b->rows; r++) {
                cp_buf_puts(o, "<tr>");
                for (size_t c = 0; c < b->cols; c++) {
                    cp_buf_puts(o, r == 0 ? "<th>" : b->right[c] ? "<td class=\"n\">" : "<td>");
                    esc(o, b->cells[r * b->cols + c]);
                    cp_buf_puts(o, r == 0 ? "</th>" : "</td>");
                }
                cp_buf_puts(o, "</tr>\n");
            }
            cp_buf_puts(o, "</table>\n");
            break;
        case B_CHART: {
            /* the title as text (searchable, read aloud), the chart without it */
            struct cp_chart c = b->chart->c;
            cp_buf_puts(o, "<figure>");
            if (c.title) {
                cp_buf_puts(o, "<figcaption><strong>");
                esc(o, c.title);
                cp_buf_puts(o, "</strong></figcaption>\n");
            }
            c.title = NULL;
            char prefix[32];
            snprintf(prefix, sizeof prefix, "c%zu-", ++charts);
            struct cp_diag ignored;
            cp_diag_init(&ignored);
            if (cp_chart_svg_inline(&c, 640, prefix, o, &ignored) != CP_OK) {
                cp_buf_puts(o, "<p>(the chart could not be drawn: ");
                esc(o, ignored.msg);
                cp_buf_puts(o, ")</p>");
            }
            cp_buf_puts(o, "</figure>\n");
            break;
        }
        }
    }
    cp_buf_puts(o, "</body>\n</html>\n");
}

/* ---- PDF ----------------------------------------------------------------------------------- */

/* Where the layout is: the page, the height used on it. One pass measures
 * (draw false: pages and headings' pages only), the other draws. */
struct pen {
    cairo_t *cr;
    cairo_surface_t *s;
    bool draw;
    int page; /* from 1 */
    double y;
    int *heading_page; /* by heading index */
    size_t heading;
    const char *title;
    int pages;       /* the measuring pass's count, for the feet */
    double table_pt; /* the table being drawn: its font size */
};

/* Tables are set at TABLE_PT; one too wide for the page even with every
 * column at its longest word is set smaller, down to TABLE_MIN_PT, before
 * its words are broken (pango's points are at 96 dots per inch: these are
 * 10.7 and 6.7 of the PDF's). */
#define TABLE_PT     8.0
#define TABLE_MIN_PT 5.0

/* The font of a table's cells at the pen's size. */
static const char *cell_font(const struct pen *p, bool header, char out[32])
{
    snprintf(out, 32, "Sans%s %.2f", header ? " Bold" : "", p->table_pt);
    return out;
}

static PangoLayout *layout(cairo_t *cr, const char *text, const char *font, double width,
                           bool wrap_char)
{
    cp_report_fonts_used();
    PangoLayout *l = pango_cairo_create_layout(cr);
    PangoFontDescription *fd = pango_font_description_from_string(font);
    pango_layout_set_font_description(l, fd);
    pango_font_description_free(fd);
    pango_layout_set_width(l, (int)(width * PANGO_SCALE));
    pango_layout_set_wrap(l, wrap_char ? PANGO_WRAP_CHAR : PANGO_WRAP_WORD_CHAR);
    pango_layout_set_text(l, text ? text : "", -1);
    return l;
}

static double layout_h(PangoLayout *l)
{
    int w = 0, h = 0;
    pango_layout_get_size(l, &w, &h);
    return (double)h / PANGO_SCALE;
}

static void foot(struct pen *p)
{
    if (!p->draw)
        return;
    char text[400];
    snprintf(text, sizeof text, "%.300s, page %d of %d", p->title, p->page, p->pages);
    PangoLayout *l = layout(p->cr, text, "Sans 7.5", CONTENT, false);
    pango_layout_set_alignment(l, PANGO_ALIGN_CENTER);
    cairo_set_source_rgb(p->cr, 0.4, 0.4, 0.4);
    cairo_move_to(p->cr, MARGIN, PAGE_H - MARGIN);
    pango_cairo_show_layout(p->cr, l);
    g_object_unref(l);
}

static void new_page(struct pen *p)
{
    foot(p);
    if (p->draw)
        cairo_show_page(p->cr);
    p->page++;
    p->y = MARGIN;
}

/* Make room for h points, on a new page when this one lacks it (and is not
 * empty). */
static void room(struct pen *p, double h)
{
    if (p->y + h > BOTTOM && p->y > MARGIN + 1)
        new_page(p);
}

static void put_layout(struct pen *p, PangoLayout *l, double x, double gap_after)
{
    double h = layout_h(l);
    room(p, h);
    if (p->draw) {
        cairo_set_source_rgb(p->cr, 0.1, 0.1, 0.1);
        cairo_move_to(p->cr, x, p->y);
        pango_cairo_show_layout(p->cr, l);
    }
    p->y += h + gap_after;
}

/* Preformatted text, line by line, so that it breaks across pages. */
static void put_pre(struct pen *p, const char *text)
{
    const char *s = text;
    while (*s || s == text) {
        size_t n = strcspn(s, "\n");
        char *line = cp_calloc(n + 1, 1);
        if (!line)
            return;
        memcpy(line, s, n);
        PangoLayout *l = layout(p->cr, line, "Monospace 7.5", CONTENT, true);
        put_layout(p, l, MARGIN, 0);
        g_object_unref(l);
        free(line);
        s += n;
        if (*s == '\n')
            s++;
        if (!*s)
            break;
    }
    p->y += 6;
}

static void table_row(struct pen *p, const struct block *b, size_t r, const double *cw, bool header)
{
    /* the row's height: its tallest cell */
    double h = 0;
    PangoLayout *ls[64];
    size_t cols = b->cols < 64 ? b->cols : 64;
    for (size_t c = 0; c < cols; c++) {
        char font[32];
        ls[c] = layout(p->cr, b->cells[r * b->cols + c], cell_font(p, header, font),
                       cw[c] - 2 * CELL_PAD, false);
        if (!header && b->right[c])
            pango_layout_set_alignment(ls[c], PANGO_ALIGN_RIGHT);
        h = fmax(h, layout_h(ls[c]) + 2 * CELL_PAD);
    }
    if (p->draw) {
        double x = MARGIN;
        for (size_t c = 0; c < cols; c++) {
            if (header) {
                cairo_set_source_rgb(p->cr, 0.92, 0.92, 0.92);
                cairo_rectangle(p->cr, x, p->y, cw[c], h);
                cairo_fill(p->cr);
            }
            cairo_set_source_rgb(p->cr, 0.75, 0.75, 0.75);
            cairo_set_line_width(p->cr, 0.5);
            cairo_rectangle(p->cr, x, p->y, cw[c], h);
            cairo_stroke(p->cr);
            cairo_set_source_rgb(p->cr, 0.1, 0.1, 0.1);
            cairo_move_to(p->cr, x + CELL_PAD, p->y + CELL_PAD);
            pango_cairo_show_layout(p->cr, ls[c]);
            x += cw[c];
        }
    }
    for (size_t c = 0; c < cols; c++)
        g_object_unref(ls[c]);
    p->y += h;
}

/* The width of a cell's text on one line. */
static double text_w(const struct pen *p, const char *text, bool bold)
{
    char font[32];
    PangoLayout *l = layout(p->cr, text, cell_font(p, bold, font), -1, false);
    pango_layout_set_width(l, -1);
    int w = 0, h = 0;
    pango_layout_get_size(l, &w, &h);
    g_object_unref(l);
    return (double)w / PANGO_SCALE;
}

static double row_height(struct pen *p, const struct block *b, size_t r, const double *cw)
{
    double h = 0;
    for (size_t c = 0; c < b->cols && c < 64; c++) {
        char font[32];
        PangoLayout *l = layout(p->cr, b->cells[r * b->cols + c], cell_font(p, r == 0, font),
                                cw[c] - 2 * CELL_PAD, false);
        h = fmax(h, layout_h(l) + 2 * CELL_PAD);
        g_object_unref(l);
    }
    return h;
}

/* Column widths at the pen's table size: each column's widest cell (cw),
 * and its longest word (mw); OUT: their sums. */
static void column_widths(const struct pen *p, const struct block *b, double *cw, double *mw,
                          double *total, double *min_total)
{
    size_t cols = b->cols < 64 ? b->cols : 64;
    *total = *min_total = 0;
    for (size_t c = 0; c < cols; c++) {
        cw[c] = mw[c] = 20;
        for (size_t r = 0; r < b->rows; r++) {
            const char *cell = b->cells[r * b->cols + c];
            cw[c] = fmax(cw[c], text_w(p, cell, r == 0) + 2 * CELL_PAD + 1);
            /* its longest word */
            for (const char *w = cell; *w;) {
                size_t n = strcspn(w, " \t\n");
                char word[256];
                snprintf(word, sizeof word, "%.*s", (int)(n < 255 ? n : 255), w);
                mw[c] = fmax(mw[c], text_w(p, word, r == 0) + 2 * CELL_PAD + 1);
                w += n;
                while (*w == ' ' || *w == '\t' || *w == '\n')
                    w++;
            }
        }
        cw[c] = fmin(cw[c], CONTENT * 0.6);
        /* a word longer than a fifth of the page (a flag with its value, a
         * node path) may break: it does not starve the other columns */
        mw[c] = fmin(mw[c], fmin(cw[c], CONTENT * 0.2));
        *total += cw[c];
        *min_total += mw[c];
    }
}

static void put_table(struct pen *p, const struct block *b)
{
    /* column widths: each column's widest cell; when they do not fit, each
     * keeps at least its longest word (a number is one) and the rest of the
     * page is shared in proportion to what each would have wanted more; a
     * table whose words alone are wider than the page is set smaller */
    size_t cols = b->cols < 64 ? b->cols : 64;
    double cw[64], mw[64], total = 0, min_total = 0;
    p->table_pt = TABLE_PT;
    column_widths(p, b, cw, mw, &total, &min_total);
    if (min_total > CONTENT) {
        /* text widths go with the size; the padding does not */
        double pad = (double)cols * (2 * CELL_PAD + 1);
        double k = min_total > pad ? (CONTENT - pad) / (min_total - pad) : 1;
        p->table_pt = fmax(TABLE_MIN_PT, floor(TABLE_PT * k * 4) / 4);
        column_widths(p, b, cw, mw, &total, &min_total);
    }
    if (total > CONTENT) {
        /* the spare room goes by the square root of what each wants more,
         * so that one long column does not take it all */
        double spare = fmax(0, CONTENT - min_total), want = 0;
        for (size_t c = 0; c < cols; c++)
            want += sqrt(cw[c] - mw[c]);
        for (size_t c = 0; c < cols; c++)
            cw[c] = min_total > CONTENT
                        ? mw[c] * CONTENT / min_total
                        : mw[c] + (want > 0 ? spare * sqrt(cw[c] - mw[c]) / want : 0);
    }
    double head = row_height(p, b, 0, cw);
    room(p, head + row_height(p, b, b->rows > 1 ? 1 : 0, cw));
    table_row(p, b, 0, cw, true);
    for (size_t r = 1; r < b->rows; r++) {
        double h = row_height(p, b, r, cw);
        if (p->y + h > BOTTOM) {
            new_page(p);
            table_row(p, b, 0, cw, true); /* the header again */
        }
        table_row(p, b, r, cw, false);
    }
    p->y += 8;
}

static void put_heading(struct pen *p, const struct block *b)
{
    static const char *const fonts[] = {"Sans Bold 15", "Sans Bold 12", "Sans Bold 10.5"};
    PangoLayout *l = layout(p->cr, b->text, fonts[b->level - 1], CONTENT, false);
    /* a heading is not left alone at the foot of a page */
    room(p, layout_h(l) + 60);
    p->y += b->level == 1 ? 8 : 4;
    if (p->heading_page)
        p->heading_page[p->heading] = p->page;
    if (p->draw && b->level <= 2) {
        char link[64];
        snprintf(link, sizeof link, "page=%d pos=[%.0f %.0f]", p->page, MARGIN, p->y);
        cairo_pdf_surface_add_outline(p->s, CAIRO_PDF_OUTLINE_ROOT, b->text, link,
                                      CAIRO_PDF_OUTLINE_FLAG_OPEN);
    }
    p->heading++;
    put_layout(p, l, MARGIN, 6);
    g_object_unref(l);
}

static void put_toc(struct pen *p, const struct cp_doc *d)
{
    PangoLayout *l = layout(p->cr, "Contents", "Sans Bold 12", CONTENT, false);
    put_layout(p, l, MARGIN, 4);
    g_object_unref(l);
    size_t h = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (d->b[i].kind != B_HEADING)
            continue;
        char line[600];
        snprintf(line, sizeof line, "%.500s", d->b[i].text);
        double indent = 12.0 * (d->b[i].level - 1);
        PangoLayout *t = layout(p->cr, line, "Sans 9", CONTENT - indent - 40, false);
        double th = layout_h(t);
        room(p, th);
        if (p->draw) {
            cairo_set_source_rgb(p->cr, 0.1, 0.1, 0.1);
            cairo_move_to(p->cr, MARGIN + indent, p->y);
            pango_cairo_show_layout(p->cr, t);
            char num[16];
            snprintf(num, sizeof num, "%d", p->heading_page ? p->heading_page[h] : 0);
            PangoLayout *n = layout(p->cr, num, "Sans 9", 40, false);
            pango_layout_set_alignment(n, PANGO_ALIGN_RIGHT);
            cairo_move_to(p->cr, PAGE_W - MARGIN - 40, p->y);
            pango_cairo_show_layout(p->cr, n);
            g_object_unref(n);
        }
        g_object_unref(t);
        p->y += th + 1;
        h++;
    }
    p->y += 10;
}

/* One pass over the document. */
static void lay_out(struct pen *p, const struct cp_doc *d)
{
    p->page = 1;
    p->y = MARGIN;
    p->heading = 0;
    PangoLayout *t = layout(p->cr, d->title, "Sans Bold 18", CONTENT, false);
    put_layout(p, t, MARGIN, 12);
    g_object_unref(t);
    if (n_headings(d) >= 3)
        put_toc(p, d);
    for (size_t i = 0; i < d->n; i++) {
        const struct block *b = &d->b[i];
        switch (b->kind) {
        case B_HEADING:
            put_heading(p, b);
            break;
        case B_TEXT: {
            PangoLayout *l = layout(p->cr, b->text, "Sans 9.5", CONTENT, false);
            put_layout(p, l, MARGIN, 6);
            g_object_unref(l);
            break;
        }
        case B_PRE:
            put_pre(p, b->text);
            break;
        case B_TABLE:
            put_table(p, b);
            break;
        case B_CHART: {
            double h = cp_chart_height(&b->chart->c, CONTENT);
            room(p, h);
            if (p->draw)
                cp_chart_draw(p->cr, &b->chart->c, MARGIN, p->y, CONTENT, h);
            p->y += h + 6;
            break;
        }
        }
    }
    foot(p);
}

static cairo_status_t to_buf(void *closure, const unsigned char *data, unsigned int length)
{
    struct cp_buf *b = closure;
    cp_buf_append(b, data, length);
    return cp_buf_status(b) == CP_OK ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_NO_MEMORY;
}

enum cp_status cp_doc_pdf(const struct cp_doc *d, const char *path, int *pages, struct cp_diag *dg)
{
    if (cp_doc_status(d) != CP_OK)
        return cp_diag_set(dg, CP_ERR_NOMEM, "out of memory building the report");
    size_t nh = n_headings(d);
    int *hp = cp_calloc(nh ? nh : 1, sizeof *hp);
    struct cp_buf out;
    cp_buf_init(&out);
    /* measure on a throwaway recording surface, then draw */
    cairo_surface_t *m = cairo_recording_surface_create(CAIRO_CONTENT_COLOR_ALPHA, NULL);
    cairo_t *mc = cairo_create(m);
    struct pen p = {.cr = mc, .s = m, .draw = false, .heading_page = hp, .title = d->title};
    if (hp)
        lay_out(&p, d);
    int n_pages = p.page;
    cairo_destroy(mc);
    cairo_surface_destroy(m);
    cairo_surface_t *s = cairo_pdf_surface_create_for_stream(to_buf, &out, PAGE_W, PAGE_H);
    cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_TITLE, d->title);
    cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATOR, "cannprof");
    cairo_t *cr = cairo_create(s);
    struct pen q = {
        .cr = cr, .s = s, .draw = true, .heading_page = hp, .title = d->title, .pages = n_pages};
    if (hp)
        lay_out(&q, d);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    cairo_surface_finish(s);
    if (cs == CAIRO_STATUS_SUCCESS)
        cs = cairo_surface_status(s);
    cairo_surface_destroy(s);
    free(hp);
    enum cp_status st = CP_OK;
    if (!hp || cs == CAIRO_STATUS_NO_MEMORY || cp_buf_status(&out) != CP_OK)
        st = cp_diag_set(dg, CP_ERR_NOMEM, "out of memory drawing the PDF");
    else if (cs != CAIRO_STATUS_SUCCESS)
        st = cp_diag_set(dg, CP_ERR_INTERNAL, "cairo: %s", cairo_status_to_string(cs));
    if (st == CP_OK && (st = cp_file_write_atomic(path, out.data, out.len, dg)) != CP_OK) {
        struct cp_diag inner = *dg;
        cp_diag_init(dg);
        st = cp_diag_set(dg, CP_ERR_WRITE, "%s", inner.msg);
    }
    if (pages)
        *pages = st == CP_OK ? q.page : 0;
    cp_buf_release(&out);
    return st;
}

enum cp_status cp_doc_write(const struct cp_doc *d, const char *path, struct cp_diag *dg)
{
    if (cp_path_has_suffix(path, ".pdf"))
        return cp_doc_pdf(d, path, NULL, dg);
    if (!cp_path_has_suffix(path, ".html") && !cp_path_has_suffix(path, ".htm"))
        return cp_diag_set(dg, CP_ERR_USAGE, "%s: a report is written as .html or .pdf", path);
    if (cp_doc_status(d) != CP_OK)
        return cp_diag_set(dg, CP_ERR_NOMEM, "out of memory building the report");
    struct cp_buf o;
    cp_buf_init(&o);
    cp_doc_html(d, &o);
    enum cp_status st = cp_buf_write_file(&o, path, dg);
    cp_buf_release(&o);
    return st;
}
