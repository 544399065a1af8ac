/* A frame tree drawn as an interactive SVG flame graph (view/view.h).
 *
 * The root at the bottom, each frame above its parent, as wide as its
 * time, children in name order (the same trace, the same picture). Every
 * frame is a <g class="f"> holding its tooltip (<title>: name, time, share,
 * and for a kernel its op type, implementation and ONNX nodes), a rect and
 * its label cut to fit. The script inside (no network) adds what people
 * like in flamegraph.pl and speedscope: click to zoom into a frame (its
 * ancestors stay as a path back), "Reset zoom", search by regular
 * expression with the matched share of the root (the button, Ctrl-F or /;
 * ?s=REGEX in the address searches on opening), details of the frame under
 * the pointer at the foot.
 *
 * Colours: Okabe-Ito by layer (application, runtime, kernels, op-type
 * groups, pipeline nodes), lightened a little per name so that neighbours
 * part; in a diff, vermillion for significantly slower, blue for faster,
 * grey for a change within noise, and the change printed in each label, so
 * that no colour carries a figure alone.
 */
#include "report/chart.h"
#include "view/colour.h"
#include "view/flame_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_H 17
#define FONT    11
#define CHAR_W  6.7 /* of the monospace font at FONT px */
#define PAD     10
#define TOP     66
#define FOOT    34

static const char *const SCRIPT =
    "var F=[],W=0,det,mt,zoomed=null,query=null;\n"
    "function cw(s){var n=0;for(var i=0;i<s.length;i++)n+=s.charCodeAt(i)>=0x2e80?2:1;"
    "return n;}\n"
    "function fit(g,w){var t=g.querySelector('text'),n=g.getAttribute('data-l')||"
    "g.getAttribute('data-n'),"
    "room=Math.floor((w-6)/"
    "6.7"
    ");if(room<3){t.textContent='';return;}"
    "if(cw(n)<=room){t.textContent=n;return;}var s='';for(var i=0;i<n.length&&cw(s)+"
    "cw(n[i])+2<=room;i++)s+=n[i];t.textContent=s+'..';}\n"
    "function place(g,x,w){var r=g.querySelector('rect'),t=g.querySelector('text');"
    "r.setAttribute('x',x.toFixed(2));r.setAttribute('width',Math.max(w,0).toFixed(2));"
    "t.setAttribute('x',(x+3).toFixed(2));fit(g,w);}\n"
    "function zoom(z){zoomed=z;var zx=+z.getAttribute('data-x'),zw=+z.getAttribute('data-w'),"
    "zd=+z.getAttribute('data-d'),k=W/zw;document.getElementById('reset')"
    ".setAttribute('opacity','1');"
    "F.forEach(function(g){var x=+g.getAttribute('data-x'),w=+g.getAttribute('data-w'),"
    "d=+g.getAttribute('data-d');if(d<zd&&x<=zx+1e-6&&x+w>=zx+zw-1e-6){"
    "g.style.display='';g.classList.add('anc');place(g,"
    "10"
    ",W);}else if(d>=zd&&x>=zx-1e-6&&"
    "x+w<=zx+zw+1e-6){g.style.display='';g.classList.remove('anc');place(g,"
    "10"
    "+(x-zx)*k,w*k);}else g.style.display='none';});if(query!==null)search(query);}\n"
    "function unzoom(){zoomed=null;document.getElementById('reset').setAttribute('opacity','0');"
    "F.forEach(function(g){g.style.display='';g.classList.remove('anc');place(g,"
    "+g.getAttribute('data-x')+"
    "10"
    ",+g.getAttribute('data-w'));});if(query!==null)"
    "search(query);}\n"
    "function search(q){var re;try{re=new RegExp(q);}catch(e){mt.textContent='not a regular "
    "expression: '+q;return;}query=q;var m=[];F.forEach(function(g){var r=g.querySelector("
    "'rect');if(re.test(g.getAttribute('data-n'))){r.setAttribute('fill','" CP_CHART_HIGHLIGHT_HEX
    "');"
    "m.push(g);}else r.setAttribute('fill',g.getAttribute('data-c'));});"
    "m.sort(function(a,b){return a.getAttribute('data-x')-b.getAttribute('data-x');});"
    "var tot=0,end=-1;m.forEach(function(g){var x=+g.getAttribute('data-x'),w=+g.getAttribute("
    "'data-w');if(x>=end-1e-6){tot+=w;end=x+w;}else if(x+w>end){tot+=x+w-end;end=x+w;}});"
    "mt.textContent='Matched: '+(100*tot/W).toFixed(1)+'% of the root, '+m.length+' frames "
    "('+q+')';mt.setAttribute('data-frames',m.length);document.getElementById('search')"
    ".textContent='Clear search';}\n"
    "function clearsearch(){query=null;F.forEach(function(g){g.querySelector('rect')"
    ".setAttribute('fill',g.getAttribute('data-c'));});mt.textContent='';mt.removeAttribute("
    "'data-frames');document.getElementById('search').textContent='Search';}\n"
    "function asksearch(){if(query!==null){clearsearch();return;}var q=prompt('Search frames "
    "(a regular expression):','');if(q)search(q);}\n"
    "function init(){W=+document.documentElement.getAttribute('data-plot');"
    "det=document.getElementById('details');mt=document.getElementById('matched');"
    "F=Array.prototype.slice.call(document.querySelectorAll('g.f'));"
    "F.forEach(function(g){g.addEventListener('click',function(e){zoom(g);e.stopPropagation();});"
    "g.addEventListener('mouseover',function(){det.textContent=g.querySelector('title')"
    ".textContent.split('\\n')[0];});g.addEventListener('mouseout',function(){det.textContent="
    "' ';});});document.getElementById('reset').addEventListener('click',unzoom);"
    "document.getElementById('search').addEventListener('click',asksearch);"
    "document.addEventListener('keydown',function(e){if((e.ctrlKey&&e.key==='f')||e.key==='/')"
    "{e.preventDefault();asksearch();}else if(e.key==='Escape'){clearsearch();unzoom();}});"
    "var p=new URLSearchParams(location.search);if(p.get('s'))search(p.get('s'));"
    "if(p.get('f')){var z=document.getElementById(p.get('f'));if(z)zoom(z);}}\n"
    "window.addEventListener('load',init);\n";

/* The number of display cells of UTF-8 text (CJK counts two). */
static size_t cells_of(const char *s, size_t *bytes_for, size_t room)
{
    size_t cells = 0, i = 0, cut = 0;
    while (s[i]) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        uint32_t cp = c;
        if (len == 3 && s[i + 1] && s[i + 2])
            cp = ((c & 0x0fu) << 12) | (((unsigned char)s[i + 1] & 0x3fu) << 6) |
                 ((unsigned char)s[i + 2] & 0x3fu);
        size_t w = len >= 3 && cp >= 0x2e80 ? 2 : 1;
        for (size_t k = 1; k < len; k++)
            if (!s[i + k]) {
                len = k;
                break;
            }
        if (cells + w <= room)
            cut = i + len;
        cells += w;
        i += len;
    }
    if (bytes_for)
        *bytes_for = cut;
    return cells;
}

/* The label that fits w pixels: the name, or its start and "..". */
static void label(struct cp_buf *o, const char *name, double w)
{
    double r = floor((w - 6) / CHAR_W);
    if (r < 3)
        return;
    size_t room = (size_t)r, cut = 0;
    if (cells_of(name, NULL, room) <= room) {
        cp_buf_markup(o, name);
        return;
    }
    cells_of(name, &cut, room - 2);
    struct cp_buf part;
    cp_buf_init(&part);
    cp_buf_append(&part, name, cut);
    cp_buf_puts(&part, "");
    cp_buf_markup(o, part.data ? part.data : "");
    cp_buf_release(&part);
    cp_buf_puts(o, "..");
}

/* s as markup, its middle replaced by "…" when it has more than `cells`
 * display cells. */
static void fit_middle(struct cp_buf *o, const char *s, double cells)
{
    size_t room = cells > 8 ? (size_t)cells : 8;
    size_t total = cells_of(s, NULL, 0);
    if (total <= room) {
        cp_buf_markup(o, s);
        return;
    }
    size_t head = 0, keep = (room - 1) / 2;
    cells_of(s, &head, keep);
    /* the tail: the bytes after the cut that hold room - 1 - keep cells */
    const char *tail = s + strlen(s);
    size_t tail_cells = 0;
    while (tail > s + head) {
        const char *p = tail - 1;
        while (p > s + head && ((unsigned char)*p & 0xc0) == 0x80)
            p--;
        size_t w = cells_of(p, NULL, 0) - tail_cells;
        if (tail_cells + w > room - 1 - keep)
            break;
        tail_cells += w;
        tail = p;
    }
    struct cp_buf part;
    cp_buf_init(&part);
    cp_buf_append(&part, s, head);
    cp_buf_puts(&part, "\xe2\x80\xa6");
    cp_buf_puts(&part, tail);
    cp_buf_markup(o, part.data ? part.data : "");
    cp_buf_release(&part);
}

/* The chart module's palette (report/chart.h: Okabe-Ito) by what the frame
 * is, lightened by its name; grey for the root and tracks. */
static void frame_colour(const struct fl_frame *f, char out[8])
{
    size_t c;
    switch (f->kind) {
    case FK_KERNEL:
        c = CP_CHART_GREEN;
        break;
    case FK_OP:
        c = CP_CHART_YELLOW;
        break;
    case FK_NODE:
        c = CP_CHART_BLUE;
        break;
    case FK_PHASE: /* on a CPU, waiting for one, off it, blocked */
        c = f->layer == 0   ? CP_CHART_GREEN
            : f->layer == 1 ? CP_CHART_ORANGE
            : f->layer == 3 ? CP_CHART_BLUE
                            : CP_CHART_SKY;
        break;
    case FK_EVENT:
        c = vw_layer_colour(f->layer);
        break;
    default:
        vw_grey_fill(f->name, out);
        return;
    }
    vw_fill(c, f->name, out);
}

/* A diff's colour: vermillion (slower) or blue (faster) by how much,
 * significant changes only; grey within noise. */
static void change_colour(const struct fl_change *c, char out[8])
{
    if (!c->significant) {
        snprintf(out, 8, CP_CHART_GREY_HEX);
        return;
    }
    double b[3];
    cp_chart_colour(c->pct > 0 ? CP_CHART_VERMILLION : CP_CHART_BLUE, b);
    /* 5% light, 50% and more full */
    double m = isfinite(c->pct) ? fmin(fabs(c->pct), 50) : 50;
    double k = 0.35 + 0.65 * (m / 50);
    unsigned char rgb[3];
    for (int i = 0; i < 3; i++)
        rgb[i] = (unsigned char)lround(255 - (255 - 255 * b[i]) * k);
    snprintf(out, 8, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

static void change_text(const struct fl_change *c, char *out, size_t n)
{
    if (!isfinite(c->pct))
        snprintf(out, n, "new");
    else
        snprintf(out, n, "%+.1f%%", c->pct);
}

/* A frame's fill and label: a diff's change colour (c, when given) or the
 * frame's own; a significant change leads the label, its mark and its
 * size (ct), so that no colour carries it alone. Returns whether it does. */
static bool frame_look(const struct fl_frame *f, const struct fl_change *c, char col[8],
                       char lab[600], char ct[32])
{
    if (c)
        change_colour(c, col);
    else
        frame_colour(f, col);
    snprintf(lab, 600, "%.500s", f->name);
    ct[0] = '\0';
    if (!c || !c->significant)
        return false;
    change_text(c, ct, 32);
    snprintf(lab, 600, "%s %s %.500s", c->pct > 0 ? "\xe2\x96\xb2" : "\xe2\x96\xbc", ct, f->name);
    return true;
}

/* The tooltip: a first line (also the details line) and the facts. */
static void tooltip(struct cp_buf *o, const struct fl_tree *t, const struct fl_frame *f,
                    const struct fl_change *c)
{
    char tm[32];
    fl_fmt_ns(f->width, tm, sizeof tm);
    double share = t->f[0].width > 0 ? 100 * f->width / t->f[0].width : 0;
    struct cp_buf s;
    cp_buf_init(&s);
    cp_buf_printf(&s, "%s: %s (%.1f%%)", f->name, tm, share);
    if (c) {
        char a[32], b[32], ct[32];
        fl_fmt_ns(c->a_ns, a, sizeof a);
        fl_fmt_ns(c->b_ns, b, sizeof b);
        change_text(c, ct, sizeof ct);
        cp_buf_printf(&s, "; per iteration A %s \xe2\x86\x92 B %s, %s", a, b, ct);
        if (c->tested)
            cp_buf_printf(&s, " (p=%.2g, %s)", c->p,
                          c->significant ? "significant" : "within noise");
        else
            cp_buf_puts(&s, " (not tested)");
    }
    double self = f->width;
    for (size_t i = 0; i < f->n_kids; i++)
        self -= t->f[f->kids[i]].width;
    if (f->n_kids && self > 0) {
        char st[32];
        fl_fmt_ns(self, st, sizeof st);
        cp_buf_printf(&s, "\nself time %s", st);
    }
    if (f->kernel >= 0 && (size_t)f->kernel < t->nk) {
        const struct cp_trace_kernel_desc *k = &t->k[f->kernel];
        cp_buf_printf(&s, "\nnode %s, %s on %s\nONNX nodes: %s", k->node,
                      k->op_type[0] ? k->op_type : "op not recorded",
                      k->impl[0] ? k->impl : "an implementation not recorded", k->origins);
        if (k->flops > 0 && f->width > 0)
            cp_buf_printf(&s, "\n%.3g GFLOP/s", k->flops / f->width);
    }
    if (f->kind == FK_TRACK || f->kind == FK_ROOT)
        cp_buf_printf(&s, "\n%s", t->divisor > 1 ? "the mean iteration" : "");
    cp_buf_markup(o, cp_buf_status(&s) == CP_OK && s.data ? s.data : f->name);
    cp_buf_release(&s);
}

enum cp_status fl_svg(const struct fl_tree *t, const struct fl_change *ch, const char *title,
                      const char *subtitle, double width, struct cp_buf *o, size_t *frames_drawn)
{
    double plot = width - 2 * PAD;
    double scale = t->f[0].width > 0 ? plot / t->f[0].width : 0;
    int lines = 0;
    for (const char *l = subtitle; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "")
        lines++;
    int top = TOP + 15 * (lines > 1 ? lines - 1 : 0);
    int height = top + (t->max_depth + 1) * FRAME_H + FOOT;
    cp_buf_printf(o,
                  "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                  "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                  "height=\"%d\" viewBox=\"0 0 %.0f %d\" data-plot=\"%.2f\">\n",
                  width, height, width, height, plot);
    cp_buf_puts(o, "<style>\n"
                   "text{font-family:'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:11px;"
                   "fill:#000}\n"
                   "g.f rect{stroke:#fff;stroke-width:0.5}g.f:hover rect{stroke:#000;"
                   "stroke-width:1}\n"
                   "g.f{cursor:pointer}g.anc{opacity:0.55}\n"
                   ".t{font-size:16px;font-family:sans-serif}.s{font-size:12px;font-family:"
                   "sans-serif;fill:#333}\n"
                   ".b{cursor:pointer;font-family:sans-serif;font-size:12px;fill:" CP_CHART_BLUE_HEX
                   "}\n"
                   "</style>\n<script type=\"text/ecmascript\"><![CDATA[\n");
    cp_buf_puts(o, SCRIPT);
    cp_buf_puts(o, "]]></script>\n");
    cp_buf_printf(o, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%d\" fill=\"#ffffff\"/>\n",
                  width, height);
    /* the whole title for tools and screen readers; on the picture, cut in
     * its middle to the width (paths are long) */
    cp_buf_puts(o, "<title>");
    cp_buf_markup(o, title);
    cp_buf_printf(o,
                  "</title>\n<text class=\"t\" id=\"title\" x=\"%.1f\" y=\"22\" "
                  "text-anchor=\"middle\">",
                  width / 2);
    fit_middle(o, title, (width - 2 * PAD) / 8.6);
    cp_buf_puts(o, "</text>\n");
    /* the subtitle, a line of text per line */
    int y = 40;
    for (const char *l = subtitle; l && *l; y += 15) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        struct cp_buf line;
        cp_buf_init(&line);
        cp_buf_append(&line, l, len);
        cp_buf_puts(&line, "");
        cp_buf_printf(o,
                      "<text class=\"s\" id=\"subtitle%d\" x=\"%.1f\" y=\"%d\" "
                      "text-anchor=\"middle\">",
                      (y - 40) / 15 + 1, width / 2, y);
        fit_middle(o, line.data ? line.data : "", (width - 2 * PAD) / 6.4);
        cp_buf_puts(o, "</text>\n");
        cp_buf_release(&line);
        l = nl ? nl + 1 : l + len;
    }
    cp_buf_printf(o,
                  "<text class=\"b\" id=\"reset\" x=\"%d\" y=\"%d\" opacity=\"0\">Reset "
                  "zoom</text>\n",
                  PAD, y + 3);
    cp_buf_printf(o,
                  "<text class=\"b\" id=\"search\" x=\"%.1f\" y=\"%d\" "
                  "text-anchor=\"end\">Search</text>\n",
                  width - PAD, y + 3);
    cp_buf_printf(o,
                  "<text class=\"s\" id=\"matched\" x=\"%.1f\" y=\"%d\" "
                  "text-anchor=\"end\"></text>\n",
                  width - PAD, height - 12);
    cp_buf_printf(o, "<text class=\"s\" id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", PAD,
                  height - 12);
    cp_buf_puts(o, "<g id=\"frames\">\n");
    size_t drawn = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct fl_frame *f = &t->f[i];
        double w = f->width * scale;
        if (w < 0.1)
            continue;
        /* a frame is drawn only when every ancestor is */
        bool shown = true;
        for (int32_t p = f->parent; p >= 0; p = t->f[p].parent)
            if (t->f[p].width * scale < 0.1)
                shown = false;
        if (!shown)
            continue;
        double x = PAD + f->x * scale;
        double fy = top + (t->max_depth - f->depth) * FRAME_H;
        char col[8], lab[600], ct[32];
        bool marked = frame_look(f, ch ? &ch[i] : NULL, col, lab, ct);
        cp_buf_printf(o,
                      "<g class=\"f\" id=\"f%zu\" data-x=\"%.2f\" data-w=\"%.2f\" "
                      "data-d=\"%d\" data-c=\"%s\" data-n=\"",
                      i, x - PAD, w, f->depth, col);
        cp_buf_markup(o, f->name);
        if (marked) {
            cp_buf_printf(o, "\" data-change=\"%s\" data-l=\"", ct);
            cp_buf_markup(o, lab);
        }
        cp_buf_puts(o, "\"><title>");
        tooltip(o, t, f, ch ? &ch[i] : NULL);
        cp_buf_printf(o,
                      "</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                      "fill=\"%s\" rx=\"1.5\"/><text x=\"%.2f\" y=\"%d\">",
                      x, (int)fy, w, FRAME_H - 1, col, x + 3, (int)fy + FRAME_H - 5);
        label(o, lab, w);
        cp_buf_puts(o, "</text></g>\n");
        drawn++;
    }
    cp_buf_puts(o, "</g>\n</svg>\n");
    if (frames_drawn)
        *frames_drawn = drawn;
    return cp_buf_status(o);
}

/* ---- the still picture ------------------------------------------------------------------- */

static void rgb_of(const char hex[8], double rgb[3])
{
    unsigned v = 0;
    if (sscanf(hex, "#%6x", &v) != 1)
        v = 0xc8c8c8;
    rgb[0] = (double)((v >> 16) & 0xff) / 255;
    rgb[1] = (double)((v >> 8) & 0xff) / 255;
    rgb[2] = (double)(v & 0xff) / 255;
}

enum cp_status fl_still(const struct fl_tree *t, const struct fl_change *ch, const char *title,
                        const char *subtitle, double width, enum cp_chart_format f,
                        struct cp_buf *out, size_t *frames_drawn, struct cp_diag *d)
{
    double root = t->f[0].width;
    struct cp_chart_frame *fr = cp_calloc(t->n ? t->n : 1, sizeof *fr);
    char **labels = cp_calloc(t->n ? t->n : 1, sizeof *labels);
    struct cp_buf note;
    cp_buf_init(&note);
    enum cp_status st = fr && labels ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; st == CP_OK && i < t->n; i++) {
        const struct fl_frame *q = &t->f[i];
        if (!(root > 0) || q->width / root * width < 0.5)
            continue;
        bool shown = true;
        for (int32_t p = q->parent; p >= 0; p = t->f[p].parent)
            shown = shown && t->f[p].width / root * width >= 0.5;
        if (!shown)
            continue;
        char col[8], lab[600], ct[32];
        frame_look(q, ch ? &ch[i] : NULL, col, lab, ct);
        if (!(labels[n] = cp_strdup(lab))) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        fr[n] = (struct cp_chart_frame){
            .x = q->x / root, .w = q->width / root, .depth = q->depth, .label = labels[n]};
        rgb_of(col, fr[n].rgb);
        n++;
    }
    /* the subtitle's lines as one note */
    for (const char *s = subtitle; s && *s; s++)
        if (*s == '\n')
            cp_buf_puts(&note, "; ");
        else
            cp_buf_putc(&note, *s);
    cp_buf_puts(&note, "");
    if (st == CP_OK && cp_buf_status(&note) != CP_OK)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st == CP_OK) {
        struct cp_chart c = {.kind = CP_CHART_FRAMES,
                             .title = title,
                             .frames = fr,
                             .n_frames = n,
                             .note = note.data};
        st = cp_chart_render(&c, f, width, out, d);
    }
    if (frames_drawn)
        *frames_drawn = n;
    for (size_t i = 0; labels && i < n; i++)
        free(labels[i]);
    free(labels);
    free(fr);
    cp_buf_release(&note);
    return st;
}
