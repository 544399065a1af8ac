/* The XY chart kind (report/chart.h): series of points on two numeric
 * axes, linear or logarithmic, a roofline under them, labels placed where
 * they do not collide. */
#include "report/chart_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- XY: which points are drawn ----------------------------------------------------------- */

#define XY_MIN_H 220.0 /* the plot's least natural height */
#define XY_RATIO 0.55  /* and its natural height for a width */
#define XY_HUGE  1e300 /* beyond: left out, so that every span stays finite */

enum xy_point { XY_DRAWN, XY_NOT_FINITE, XY_NOT_POSITIVE };

static size_t series_count(const struct cp_chart *c)
{
    return c->n_series < CP_CHART_MAX_SERIES ? c->n_series : CP_CHART_MAX_SERIES;
}

/* A series' points: none when it lacks its coordinates. */
static size_t series_len(const struct cp_chart_series *s)
{
    return s->x && s->y ? s->n : 0;
}

static enum xy_point xy_point(const struct cp_chart *c, double x, double y)
{
    if (!isfinite(x) || !isfinite(y) || fabs(x) > XY_HUGE || fabs(y) > XY_HUGE)
        return XY_NOT_FINITE;
    if ((c->log_x && x <= 0) || (c->log_y && y <= 0))
        return XY_NOT_POSITIVE;
    return XY_DRAWN;
}

/* What an XY chart left out, for the note line ("2 points ≤ 0 left out
 * (log scale)"); false when nothing was (and for the other kinds). */
bool ch_xy_left_out(const struct cp_chart *c, char *out, size_t cap)
{
    size_t bad[3] = {0, 0, 0};
    if (c->kind != CP_CHART_XY)
        return false;
    for (size_t k = 0; k < series_count(c); k++) {
        const struct cp_chart_series *s = &c->series[k];
        for (size_t i = 0; i < series_len(s); i++)
            bad[xy_point(c, s->x[i], s->y[i])]++;
    }
    if (!bad[XY_NOT_FINITE] && !bad[XY_NOT_POSITIVE])
        return false;
    int at = 0;
    if (bad[XY_NOT_FINITE])
        at = snprintf(out, cap, "%zu point%s without a finite value left out", bad[XY_NOT_FINITE],
                      bad[XY_NOT_FINITE] == 1 ? "" : "s");
    if (bad[XY_NOT_POSITIVE] && at >= 0 && (size_t)at < cap)
        snprintf(out + at, cap - (size_t)at, "%s%zu point%s ≤ 0 left out (log scale)",
                 at ? "; " : "", bad[XY_NOT_POSITIVE], bad[XY_NOT_POSITIVE] == 1 ? "" : "s");
    return true;
}

/* The natural height of an XY chart's plot (axes and their titles). */
double ch_xy_natural(double width)
{
    return fmax(XY_MIN_H, XY_RATIO * width);
}

/* ---- XY ----------------------------------------------------------------------------------- */

#define XY_MARK  3.5 /* a marker's half size */
#define XY_TICK  3.0 /* a tick's length, outside the plot */
#define XY_SMALL 7.5 /* points: ticks' and points' labels */
#define XY_TICKS 32
#define XY_PI    3.14159265358979323846

/* One axis: its range in axis space (log10 of the values on a log axis),
 * where it is drawn, and its ticks. */
struct axis {
    bool log;
    double lo, hi;
    double at, len; /* where lo is drawn, and how far on hi is (negative: upwards) */
    double tick[XY_TICKS];
    char label[XY_TICKS][24];
    size_t n_ticks;
};

static double axis_at(const struct axis *a, double t)
{
    return a->at + a->len * (t - a->lo) / (a->hi - a->lo);
}

/* Where a value is drawn (NaN for a non-positive one on a log axis). */
static double axis_pos(const struct axis *a, double v)
{
    return axis_at(a, a->log ? (v > 0 ? log10(v) : NAN) : v);
}

/* The range around the data's [lo, hi] (axis space; lo > hi: no data): a
 * single value padded by 10% (1 around zero; half a decade each way on a
 * log axis), a log axis at least a decade wide, and 5% of room each end. */
static void axis_range(struct axis *a, double lo, double hi)
{
    if (!(lo <= hi))
        lo = 0, hi = 1;
    double mid = lo / 2 + hi / 2;
    if (hi - lo <= 1e-9 * fabs(mid) || hi - lo < 1e-200) {
        double pad = a->log ? 0.5 : mid != 0 ? fabs(mid) * 0.1 : 1;
        lo = mid - pad, hi = mid + pad;
    }
    if (a->log && hi - lo < 1)
        lo = mid - 0.5, hi = mid + 0.5;
    double room = (hi - lo) * 0.05;
    a->lo = lo - room, a->hi = hi + room;
}

/* 1.2e+06 as 1.2e6, 5e-07 as 5e-7. */
static void compact_exponent(char *s)
{
    char *e = strchr(s, 'e'), *d;
    if (!e)
        return;
    d = e + 1;
    if (*d == '-')
        d++;
    char *from = d;
    while (*from == '+' || *from == '0')
        from++;
    if (!*from) /* e+00 */
        from--;
    if (e[1] == '+')
        d = e + 1;
    memmove(d, from, strlen(from) + 1);
}

/* A linear tick's label: as many decimals as its step needs; in
 * exponent form when large or tiny. */
static void linear_label(double v, double step, char out[24])
{
    int e = (int)floor(log10(step) + 1e-9);
    if (v == 0)
        v = 0; /* not -0 */
    if (e >= -6 && fabs(v) < 1e6) {
        snprintf(out, 24, "%.*f", e < 0 ? -e : 0, v);
        return;
    }
    int digits = (int)ceil(log10(fmax(fabs(v), step) / step)) + 1;
    snprintf(out, 24, "%.*g", digits < 1 ? 1 : digits > 15 ? 15 : digits, v);
    compact_exponent(out);
}

/* m x 10^k as a plain number where short (0.002, 5000), else as 1e4. */
static void log_label(int m, int k, char out[24])
{
    if (k >= -3 && k <= 3)
        snprintf(out, 24, "%.*f", k < 0 ? -k : 0, m * pow(10, k));
    else
        snprintf(out, 24, "%de%d", m, k);
}

static void add_tick(struct axis *a, double t)
{
    if (a->n_ticks < XY_TICKS)
        a->tick[a->n_ticks++] = t;
}

/* Ticks about `target` of them: 1-2-5 steps on a linear axis; decades on a
 * log one (every second or more when there are many; 1-2-5 within the
 * decades when there are fewer than three). */
static void axis_ticks(struct axis *a, double target)
{
    a->n_ticks = 0;
    if (a->log) {
        double d0 = ceil(a->lo), d1 = floor(a->hi);
        if (d1 - d0 >= 2) {
            double every = ceil((d1 - d0 + 1) / 8);
            for (double k = d0; k <= d1 && a->n_ticks < XY_TICKS; k++)
                if (fmod(k, every) == 0) {
                    log_label(1, (int)k, a->label[a->n_ticks]);
                    add_tick(a, k);
                }
            return;
        }
        static const int M[3] = {1, 2, 5};
        for (double k = floor(a->lo); k <= d1 + 1; k++)
            for (int m = 0; m < 3; m++) {
                double t = k + log10(M[m]);
                if (t >= a->lo && t <= a->hi && a->n_ticks < XY_TICKS) {
                    log_label(M[m], (int)k, a->label[a->n_ticks]);
                    add_tick(a, t);
                }
            }
        return;
    }
    double raw = (a->hi - a->lo) / fmax(target, 2);
    double p = pow(10, floor(log10(raw))), f = raw / p;
    double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
    for (double k = ceil(a->lo / step); k * step <= a->hi && a->n_ticks < XY_TICKS; k++) {
        linear_label(k * step, step, a->label[a->n_ticks]);
        add_tick(a, k * step);
    }
}

/* Series k's marker at (x, y): a circle, square, triangle or diamond in
 * its colour, edged in white so that overlapping ones stay apart. */
static void marker(cairo_t *cr, size_t k, double x, double y)
{
    double r = XY_MARK;
    switch (k % 4) {
    case 0:
        cairo_new_sub_path(cr);
        cairo_arc(cr, x, y, r, 0, 2 * XY_PI);
        break;
    case 1:
        cairo_rectangle(cr, x - 0.9 * r, y - 0.9 * r, 1.8 * r, 1.8 * r);
        break;
    case 2:
        cairo_move_to(cr, x, y - 1.25 * r);
        cairo_line_to(cr, x + 1.15 * r, y + 0.85 * r);
        cairo_line_to(cr, x - 1.15 * r, y + 0.85 * r);
        cairo_close_path(cr);
        break;
    default:
        cairo_move_to(cr, x, y - 1.3 * r);
        cairo_line_to(cr, x + 1.05 * r, y);
        cairo_line_to(cr, x, y + 1.3 * r);
        cairo_line_to(cr, x - 1.05 * r, y);
        cairo_close_path(cr);
        break;
    }
    ch_set_colour(cr, k);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 0.6);
    cairo_stroke(cr);
}

/* A series' key in the legend, w wide, centred on y: its line, its marker. */
void ch_series_key(cairo_t *cr, const struct cp_chart_series *s, size_t k, double x, double y,
                   double w)
{
    if (s->line) {
        ch_set_colour(cr, k);
        cairo_set_line_width(cr, 1.5);
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x + w, y);
        cairo_stroke(cr);
    }
    if (s->points || !s->line)
        marker(cr, k, x + w / 2, y);
}

struct rect {
    double x0, y0, x1, y1;
};

static bool overlaps(const struct rect *r, const struct rect *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (r->x0 < set[i].x1 && set[i].x0 < r->x1 && r->y0 < set[i].y1 && set[i].y0 < r->y1)
            return true;
    return false;
}

/* Labels drawn so far, and the markers labels keep off when they can. */
struct taken {
    struct rect *labels, *marks;
    size_t n_labels, n_marks, cap;
};

/* A w x h rectangle at (x, y), moved inside the box. */
static struct rect inside(const struct rect *box, double x, double y, double w, double h)
{
    struct rect r;
    r.x0 = fmax(fmin(x, box->x1 - 2 - w), box->x0 + 2);
    r.y0 = fmax(fmin(y, box->y1 - 1 - h), box->y0 + 1);
    r.x1 = r.x0 + w;
    r.y1 = r.y0 + h;
    return r;
}

/* Where a w x h label goes: the first of n places (moved inside the box)
 * that overlaps no label already drawn and, where one can, no marker; false
 * when every place overlaps a label. */
static bool place(const struct rect *box, const double (*at)[2], int n, double w, double h,
                  const struct taken *t, struct rect *out)
{
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < n; k++) {
            struct rect r = inside(box, at[k][0], at[k][1], w, h);
            if (overlaps(&r, t->labels, t->n_labels) ||
                (pass == 0 && overlaps(&r, t->marks, t->n_marks)))
                continue;
            *out = r;
            return true;
        }
    return false;
}

/* A label that must be drawn: in the first free of its n places (the first
 * place when none is). */
static void must_label(cairo_t *cr, struct taken *t, const struct rect *box, const char *s,
                       const double (*at)[2], int n)
{
    double w, h;
    struct rect r;
    ch_text_extent(cr, s, XY_SMALL, &w, &h);
    if (!place(box, at, n, w, h, t, &r))
        r = inside(box, at[0][0], at[0][1], w, h);
    ch_text(cr, s, r.x0, r.y0, XY_SMALL, false, false);
    if (t->n_labels < t->cap)
        t->labels[t->n_labels++] = r;
}

/* The roofs' units from the values': "GFLOP/s" gives "GB/s" for the
 * bandwidth and "FLOP/byte" at the ridge; another unit gives none. */
static void roof_units(const char *unit, char bw[32], const char **ridge)
{
    const char *f = unit ? strstr(unit, "FLOP/s") : NULL;
    bw[0] = 0;
    *ridge = NULL;
    if (f && f - unit < 16) {
        snprintf(bw, 32, "%.*sB/s", (int)(f - unit), unit);
        *ridge = "FLOP/byte";
    }
}

static bool has_roof(const struct cp_chart *c)
{
    double p = c->roof_peak, b = c->roof_bw;
    return isfinite(p) && isfinite(b) && p > 0 && b > 0 && p < XY_HUGE / 4 && p / b < XY_HUGE / 4 &&
           p / b > 0;
}

/* The roofline's corners on the page: where the sloping roof enters the
 * plot (p0), the ridge (p1), the flat roof's right end (p2x); false when
 * one of them cannot be drawn. */
struct roof {
    double p0x, p0y, p1x, p1y, p2x;
    bool slope, flat; /* each roof seen */
};

static bool roof_corners(const struct cp_chart *c, const struct axis *ax, const struct axis *ay,
                         struct roof *r)
{
    double peak = c->roof_peak, bw = c->roof_bw, ridge = peak / bw;
    double x_lo = ax->log ? pow(10, ax->lo) : fmax(ax->lo, 0);
    double x_hi = ax->log ? pow(10, ax->hi) : ax->hi;
    x_lo = fmax(x_lo, (ay->log ? pow(10, ay->lo) : ay->lo) / bw); /* from the bottom up */
    r->p0x = axis_pos(ax, x_lo), r->p0y = axis_pos(ay, bw * x_lo);
    r->p1x = axis_pos(ax, ridge), r->p1y = axis_pos(ay, peak), r->p2x = axis_pos(ax, x_hi);
    r->slope = x_lo < ridge;
    r->flat = ridge < x_hi;
    return isfinite(r->p0x) && isfinite(r->p0y) && isfinite(r->p1x) && isfinite(r->p1y) &&
           isfinite(r->p2x);
}

/* The roofline min(peak, bw * x) across the plot, its ridge circled and
 * dropped to the x axis (to be read there). */
static void draw_roof(cairo_t *cr, const struct roof *r, const struct rect *box)
{
    static const double dash[2] = {3, 2};
    cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
    cairo_set_line_width(cr, 0.8);
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, r->p1x, r->p1y);
    cairo_line_to(cr, r->p1x, box->y1);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    cairo_set_line_width(cr, 1.2);
    if (r->slope) {
        cairo_move_to(cr, r->p0x, r->p0y);
        cairo_line_to(cr, r->p1x, r->p1y);
    } else {
        cairo_move_to(cr, r->p1x, r->p1y);
    }
    if (r->flat)
        cairo_line_to(cr, r->p2x, r->p1y);
    cairo_stroke(cr);
    cairo_new_sub_path(cr);
    cairo_arc(cr, r->p1x, r->p1y, 2.5, 0, 2 * XY_PI);
    cairo_stroke(cr);
}

/* Whether a marker falls under text w x h set along the direction (ux, uy)
 * from (sx, sy), above that line. */
static bool under_slanted(const struct taken *t, double sx, double sy, double ux, double uy,
                          double w, double h)
{
    for (size_t i = 0; i < t->n_marks; i++) {
        double mx = (t->marks[i].x0 + t->marks[i].x1) / 2 - sx;
        double my = (t->marks[i].y0 + t->marks[i].y1) / 2 - sy;
        double u = mx * ux + my * uy, v = -mx * uy + my * ux;
        if (u > -XY_MARK && u < w + XY_MARK && v > -h - 1 - XY_MARK && v < XY_MARK)
            return true;
    }
    return false;
}

/* "memory 25 GB/s" along the sloping roof, above it, as near the ridge as
 * keeps it off the markers; flat beside the ridge when the slope is short. */
static void memory_label(cairo_t *cr, struct taken *t, const struct rect *box, const struct roof *r,
                         const char *lab)
{
    double w, h;
    ch_text_extent(cr, lab, XY_SMALL, &w, &h);
    double run = hypot(r->p1x - r->p0x, r->p1y - r->p0y);
    if (!r->slope || run < w + 10) {
        const double at[2][2] = {{r->p1x - w - 4, r->p1y + 4}, {r->p1x - w - 4, r->p1y - h - 4}};
        must_label(cr, t, box, lab, at, 2);
        return;
    }
    double a = atan2(r->p1y - r->p0y, r->p1x - r->p0x), ux = cos(a), uy = sin(a);
    double d = w + 6, sx = 0, sy = 0;
    for (; d + w * 0.25 <= run; d += w * 0.25) {
        sx = r->p1x - ux * d, sy = r->p1y - uy * d;
        if (!under_slanted(t, sx, sy, ux, uy, w, h))
            break;
    }
    if (d + w * 0.25 > run) /* nowhere free: next to the ridge */
        sx = r->p1x - ux * (w + 6), sy = r->p1y - uy * (w + 6);
    cairo_save(cr);
    cairo_translate(cr, sx, sy);
    cairo_rotate(cr, a);
    ch_text(cr, lab, 0, -h - 1, XY_SMALL, false, false);
    cairo_restore(cr);
    struct rect b = {INFINITY, INFINITY, -INFINITY, -INFINITY};
    const double corner[4][2] = {{0, -h - 1}, {w, -h - 1}, {0, -1}, {w, -1}};
    for (int k = 0; k < 4; k++) {
        double cx = sx + corner[k][0] * ux - corner[k][1] * uy;
        double cy = sy + corner[k][0] * uy + corner[k][1] * ux;
        b.x0 = fmin(b.x0, cx), b.x1 = fmax(b.x1, cx);
        b.y0 = fmin(b.y0, cy), b.y1 = fmax(b.y1, cy);
    }
    if (t->n_labels < t->cap)
        t->labels[t->n_labels++] = b;
}

/* Each roof and the ridge labelled with its number. */
static void roof_labels(cairo_t *cr, const struct cp_chart *c, const struct roof *r,
                        const struct rect *box, struct taken *t)
{
    char bw_unit[32], lab[96], num[48];
    const char *ridge_unit;
    double w, h;
    roof_units(c->unit, bw_unit, &ridge_unit);
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    ch_value_label(c->roof_peak, c->unit, num);
    snprintf(lab, sizeof lab, "peak %s", num);
    ch_text_extent(cr, lab, XY_SMALL, &w, &h);
    const double peak_at[3][2] = {{box->x1 - 4 - w, r->p1y - h - 1},
                                  {r->p1x + 6, r->p1y - h - 1},
                                  {box->x1 - 4 - w, r->p1y + 3}};
    must_label(cr, t, box, lab, peak_at, 3);
    ch_value_label(c->roof_bw, bw_unit, num);
    snprintf(lab, sizeof lab, "memory %s", num);
    memory_label(cr, t, box, r, lab);
    ch_value_label(c->roof_peak / c->roof_bw, ridge_unit, num);
    snprintf(lab, sizeof lab, "ridge %s", num);
    ch_text_extent(cr, lab, XY_SMALL, &w, &h);
    const double ridge_at[4][2] = {{r->p1x + 3, box->y1 - h - 2},
                                   {r->p1x - w - 3, box->y1 - h - 2},
                                   {r->p1x + 4, r->p1y + 3},
                                   {r->p1x - w - 4, r->p1y + 3}};
    must_label(cr, t, box, lab, ridge_at, 4);
}

/* Each point's label beside it, in series then point order, at the first
 * of six places around it that is free; one that would overlap a label
 * already drawn wherever it went is left out. */
static void point_labels(cairo_t *cr, const struct cp_chart *c, const struct axis *ax,
                         const struct axis *ay, const struct rect *box, struct taken *t)
{
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    for (size_t k = 0; k < series_count(c); k++) {
        const struct cp_chart_series *s = &c->series[k];
        for (size_t i = 0; s->labels && i < series_len(s); i++) {
            const char *l = s->labels[i];
            if (!l || !l[0] || xy_point(c, s->x[i], s->y[i]) != XY_DRAWN)
                continue;
            double w, h, x = axis_pos(ax, s->x[i]), y = axis_pos(ay, s->y[i]), g = XY_MARK + 2;
            ch_text_extent(cr, l, XY_SMALL, &w, &h);
            const double at[6][2] = {
                {x + g, y - h / 2}, {x - g - w, y - h / 2}, {x + 1, y - g - h},
                {x + 1, y + g},     {x - 1 - w, y - g - h}, {x - 1 - w, y + g},
            };
            struct rect r;
            if (!place(box, at, 6, w, h, t, &r) || t->n_labels >= t->cap)
                continue;
            ch_text(cr, l, r.x0, r.y0, XY_SMALL, false, false);
            t->labels[t->n_labels++] = r;
        }
    }
}

/* The series: lines first, then markers over them. */
static void draw_series(cairo_t *cr, const struct cp_chart *c, const struct axis *ax,
                        const struct axis *ay, struct taken *t)
{
    for (size_t k = 0; k < series_count(c); k++) {
        const struct cp_chart_series *s = &c->series[k];
        if (!s->line)
            continue;
        ch_set_colour(cr, k);
        cairo_set_line_width(cr, 1.5);
        cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
        bool pen = false; /* a point left out breaks the line */
        for (size_t i = 0; i < series_len(s); i++) {
            if (xy_point(c, s->x[i], s->y[i]) != XY_DRAWN) {
                pen = false;
                continue;
            }
            double px = axis_pos(ax, s->x[i]), py = axis_pos(ay, s->y[i]);
            if (pen)
                cairo_line_to(cr, px, py);
            else
                cairo_move_to(cr, px, py);
            pen = true;
        }
        cairo_stroke(cr);
    }
    for (size_t k = 0; k < series_count(c); k++) {
        const struct cp_chart_series *s = &c->series[k];
        for (size_t i = 0; i < series_len(s); i++) {
            if (xy_point(c, s->x[i], s->y[i]) != XY_DRAWN)
                continue;
            double px = axis_pos(ax, s->x[i]), py = axis_pos(ay, s->y[i]);
            if (s->points || !s->line)
                marker(cr, k, px, py);
            if (t->n_marks < t->cap)
                t->marks[t->n_marks++] =
                    (struct rect){px - XY_MARK, py - XY_MARK, px + XY_MARK, py + XY_MARK};
        }
    }
}

/* Ticks, their labels and the grid of both axes around the plot box. */
static void draw_axes(cairo_t *cr, const struct axis *ax, const struct axis *ay,
                      const struct rect *box, double x, double w, double th)
{
    cairo_set_line_width(cr, 0.5);
    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
    for (size_t i = 0; i < ax->n_ticks; i++) {
        cairo_move_to(cr, axis_at(ax, ax->tick[i]), box->y0);
        cairo_line_to(cr, axis_at(ax, ax->tick[i]), box->y1);
    }
    for (size_t i = 0; i < ay->n_ticks; i++) {
        cairo_move_to(cr, box->x0, axis_at(ay, ay->tick[i]));
        cairo_line_to(cr, box->x1, axis_at(ay, ay->tick[i]));
    }
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    cairo_set_line_width(cr, 0.8);
    cairo_rectangle(cr, box->x0, box->y0, box->x1 - box->x0, box->y1 - box->y0);
    for (size_t i = 0; i < ax->n_ticks; i++) {
        cairo_move_to(cr, axis_at(ax, ax->tick[i]), box->y1);
        cairo_line_to(cr, axis_at(ax, ax->tick[i]), box->y1 + XY_TICK);
    }
    for (size_t i = 0; i < ay->n_ticks; i++) {
        cairo_move_to(cr, box->x0, axis_at(ay, ay->tick[i]));
        cairo_line_to(cr, box->x0 - XY_TICK, axis_at(ay, ay->tick[i]));
    }
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    for (size_t i = 0; i < ax->n_ticks; i++) {
        double tw = ch_text_width(cr, ax->label[i], XY_SMALL);
        double tx = fmin(fmax(axis_at(ax, ax->tick[i]) - tw / 2, x), x + w - tw);
        ch_text(cr, ax->label[i], tx, box->y1 + XY_TICK + 1, XY_SMALL, false, false);
    }
    for (size_t i = 0; i < ay->n_ticks; i++)
        ch_text(cr, ay->label[i], box->x0 - XY_TICK - 2, axis_at(ay, ay->tick[i]) - th / 2,
                XY_SMALL, false, true);
}

/* The plot, bh high with its axes and their titles, then the legend. */
void ch_draw_xy(cairo_t *cr, const struct cp_chart *c, double x, double y, double w, double bh)
{
    struct axis ax = {.log = c->log_x}, ay = {.log = c->log_y};
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    size_t drawn = 0, n_labels = 0;
    for (size_t k = 0; k < series_count(c); k++) {
        const struct cp_chart_series *s = &c->series[k];
        for (size_t i = 0; i < series_len(s); i++) {
            if (xy_point(c, s->x[i], s->y[i]) != XY_DRAWN)
                continue;
            double tx = c->log_x ? log10(s->x[i]) : s->x[i];
            double ty = c->log_y ? log10(s->y[i]) : s->y[i];
            xlo = fmin(xlo, tx), xhi = fmax(xhi, tx);
            ylo = fmin(ylo, ty), yhi = fmax(yhi, ty);
            drawn++;
            n_labels += s->labels && s->labels[i] ? 1 : 0;
        }
    }
    bool roof = drawn && has_roof(c);
    if (roof) { /* the ridge, some of the flat roof, and room for its label */
        double ridge = c->roof_peak / c->roof_bw, peak = c->roof_peak;
        xhi = fmax(xhi, c->log_x ? log10(ridge) + 0.6 : ridge * 1.25);
        xlo = fmin(xlo, c->log_x ? log10(ridge) : ridge);
        yhi = fmax(yhi, c->log_y ? log10(peak) + 0.3 : peak * 1.15);
    }
    const char *y_title = c->y_title ? c->y_title : c->unit;
    double tw, th, title_w = 0, title_h = 0;
    ch_text_extent(cr, "0", XY_SMALL, &tw, &th);
    if (c->x_title || y_title)
        ch_text_extent(cr, "0", 8.5, &title_w, &title_h);
    double top = th / 2 + 2, bottom = XY_TICK + 2 + th + (c->x_title ? title_h + 4 : 0);
    struct rect box = {0, y + top, 0, y + top + fmax(bh - top - bottom, 20)};
    ay.at = box.y1, ay.len = box.y0 - box.y1;
    double yl = 0;
    if (drawn) {
        axis_range(&ay, ylo, yhi);
        axis_ticks(&ay, (box.y1 - box.y0) / 40);
        for (size_t i = 0; i < ay.n_ticks; i++)
            yl = fmax(yl, ch_text_width(cr, ay.label[i], XY_SMALL));
    }
    box.x0 = x + (y_title ? title_h + 4 : 0) + yl + XY_TICK + 3;
    box.x1 = fmax(x + w - 10, box.x0 + 20);
    ax.at = box.x0, ax.len = box.x1 - box.x0;
    if (drawn) {
        axis_range(&ax, xlo, xhi);
        axis_ticks(&ax, (box.x1 - box.x0) / 70);
    }
    draw_axes(cr, &ax, &ay, &box, x, w, th);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    if (c->x_title) {
        double xw = ch_text_width(cr, c->x_title, 8.5);
        cairo_save(cr);
        cairo_rectangle(cr, x, box.y1, w, bh);
        cairo_clip(cr);
        ch_text(cr, c->x_title, fmax((box.x0 + box.x1 - xw) / 2, x), box.y1 + XY_TICK + 2 + th + 2,
                8.5, false, false);
        cairo_restore(cr);
    }
    if (y_title) {
        double yw = ch_text_width(cr, y_title, 8.5);
        cairo_save(cr);
        cairo_rectangle(cr, x, y, title_h + 2, bh);
        cairo_clip(cr);
        cairo_translate(cr, x, fmin((box.y0 + box.y1 + yw) / 2, y + bh));
        cairo_rotate(cr, -XY_PI / 2);
        ch_text(cr, y_title, 0, 0, 8.5, false, false);
        cairo_restore(cr);
    }
    cairo_save(cr);
    cairo_rectangle(cr, box.x0, box.y0, box.x1 - box.x0, box.y1 - box.y0);
    cairo_clip(cr);
    if (drawn) {
        struct taken t = {0};
        t.cap = n_labels + 3 > drawn ? n_labels + 3 : drawn;
        t.labels = cp_calloc(t.cap, sizeof *t.labels);
        t.marks = cp_calloc(t.cap, sizeof *t.marks);
        if (!t.labels || !t.marks)
            t.cap = 0; /* out of memory: the points without their labels */
        struct roof r = {0};
        roof = roof && roof_corners(c, &ax, &ay, &r);
        if (roof)
            draw_roof(cr, &r, &box);
        draw_series(cr, c, &ax, &ay, &t);
        if (roof)
            roof_labels(cr, c, &r, &box, &t);
        point_labels(cr, c, &ax, &ay, &box, &t);
        free(t.labels);
        free(t.marks);
    } else {
        double nw = ch_text_width(cr, "no data", 9);
        cairo_set_source_rgb(cr, 0.4, 0.4, 0.4);
        ch_text(cr, "no data", (box.x0 + box.x1 - nw) / 2, (box.y0 + box.y1) / 2 - 6, 9, false,
                false);
    }
    cairo_restore(cr);
    const char *names[CP_CHART_MAX_SERIES];
    char unnamed[CP_CHART_MAX_SERIES][32];
    for (size_t k = 0; k < series_count(c); k++) {
        snprintf(unnamed[k], sizeof unnamed[k], "series %zu", k + 1);
        names[k] = c->series[k].name ? c->series[k].name : unnamed[k];
    }
    cairo_save(cr);
    cairo_rectangle(cr, x, y + bh, w, LEGEND_H);
    cairo_clip(cr);
    ch_legend(cr, names, series_count(c), box.x0, y + bh, c->series);
    cairo_restore(cr);
}

/* An XY plot's height in a box h high (its natural one when h is not). */
double ch_xy_plot_h(const struct cp_chart *c, double w, double h)
{
    double fixed = PAD * 2 + (c->title ? TITLE_H : 0) + ch_note_height(c, w) + LEGEND_H;
    if (!(h > 0) || !isfinite(h))
        return ch_xy_natural(w);
    return fmax(h - fixed, 80);
}

bool cp_chart_trajectory_init(struct cp_chart_trajectory *t, size_t cap)
{
    memset(t, 0, sizeof *t);
    cap = cap ? cap : 1;
    double **v[] = {&t->x, &t->best, &t->ax, &t->ay, &t->rx, &t->ry};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!(*v[i] = cp_calloc(cap, sizeof **v[i])))
            return false;
    t->cap = cap;
    return true;
}

void cp_chart_trajectory_release(struct cp_chart_trajectory *t)
{
    free(t->x);
    free(t->best);
    free(t->ax);
    free(t->ay);
    free(t->rx);
    free(t->ry);
    memset(t, 0, sizeof *t);
}

void cp_chart_trajectory_best(struct cp_chart_trajectory *t, double step, double best_ms)
{
    if (t->n > 0 && t->x[t->n - 1] == step)
        t->best[t->n - 1] = best_ms;
    else if (t->n < t->cap) {
        t->x[t->n] = step;
        t->best[t->n++] = best_ms;
    }
}

void cp_chart_trajectory_point(struct cp_chart_trajectory *t, double step, double ms, bool accepted)
{
    double *x = accepted ? t->ax : t->rx, *y = accepted ? t->ay : t->ry;
    size_t *n = accepted ? &t->na : &t->nr;
    if (*n < t->cap) {
        x[*n] = step;
        y[(*n)++] = ms;
    }
}

struct cp_chart cp_chart_trajectory(const struct cp_chart_trajectory *t, const char *title)
{
    struct cp_chart ch = {.kind = CP_CHART_XY,
                          .title = title,
                          .x_title = "step",
                          .y_title = "median latency (ms)",
                          .n_series = 3,
                          .note = "each candidate measured interleaved against the best of its "
                                  "step"};
    ch.series[0] = (struct cp_chart_series){"best so far", t->x, t->best, t->n, true, true, NULL};
    ch.series[1] = (struct cp_chart_series){"accepted", t->ax, t->ay, t->na, false, true, NULL};
    ch.series[2] = (struct cp_chart_series){"rejected", t->rx, t->ry, t->nr, false, true, NULL};
    return ch;
}
