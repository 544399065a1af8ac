/* report/: charts and documents as a person would look at them. PDFs are
 * rendered with poppler (pdfinfo, pdftotext, pdftoppm): pages counted, text
 * extracted (CJK too), the first page not blank; SVGs are valid XML
 * (xmllint); HTML is self-contained and the same bytes on every run; a long
 * table splits across pages with its header repeated. */
#include "cli/cli_test.h"
#include "report/chart.h"
#include "report/doc.h"
#include "support/run.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(report, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 120);

static const char *const NODES[] = {"encoder", "去噪器 (denoiser)", "decoder"};
static const double TIMES[] = {3.25, 41.5, 7.75};

static struct cp_doc *sample_doc(size_t rows)
{
    struct cp_doc *d = cp_doc_new("A report: 报告");
    cp_doc_text(d, "Where the time goes, node by node.");
    cp_doc_heading(d, 1, "Time per node");
    struct cp_chart c = {.kind = CP_CHART_BARS,
                         .title = "Busy time",
                         .unit = "ms",
                         .labels = NODES,
                         .n = 3,
                         .values = TIMES};
    cp_doc_chart(d, &c);
    cp_doc_heading(d, 1, "Every call");
    char **cells = cp_calloc((rows + 1) * 3, sizeof *cells);
    cr_assert_not_null(cells);
    cells[0] = cp_strdup("call");
    cells[1] = cp_strdup("node");
    cells[2] = cp_strdup("ms");
    for (size_t r = 1; r <= rows; r++) {
        cells[r * 3] = cp_t_fmt("%zu", r);
        cells[r * 3 + 1] = cp_strdup(NODES[r % 3]);
        cells[r * 3 + 2] = cp_t_fmt("%.2f", TIMES[r % 3] + (double)r / 100);
    }
    cp_doc_table(d, 3, rows + 1, (const char *const *)cells);
    for (size_t k = 0; k < (rows + 1) * 3; k++)
        free(cells[k]);
    free(cells);
    cp_doc_heading(d, 2, "Notes");
    cp_doc_pre(d, "line one\nline two");
    cr_assert_eq(cp_doc_status(d), CP_OK);
    return d;
}

Test(report, a_pdf_paginates_a_long_table_and_its_text_can_be_extracted)
{
    struct cp_doc *d = sample_doc(150);
    char *pdf = cp_t_path("r.pdf");
    int pages = 0;
    struct cp_diag dg;
    cp_diag_init(&dg);
    cr_assert_eq(cp_doc_pdf(d, pdf, &pages, &dg), CP_OK, "%s", dg.msg);
    cr_expect_geq(pages, 3, "150 rows fit on %d pages?", pages);
    char *cmd = cp_t_fmt("pdfinfo '%s'", pdf);
    char *info = cp_run_shell(cmd);
    free(cmd);
    cr_assert_not_null(info, "pdfinfo failed");
    const char *pl = strstr(info, "Pages:");
    cr_assert_not_null(pl, "%s", info);
    cr_expect_eq(atoi(pl + 6), pages, "%s", info);
    ct_assert_mentions(info, "A report: 报告", "cannprof", NULL);
    free(info);
    cmd = cp_t_fmt("pdftotext -layout '%s' -", pdf);
    char *text = cp_run_shell(cmd);
    free(cmd);
    cr_assert_not_null(text);
    ct_assert_mentions(text, "Contents", "Time per node", "去噪器 (denoiser)", "41.5 ms", "150",
                       "line two", NULL);
    /* the header repeats on every page the table covers */
    size_t headers = 0;
    for (const char *p = text; (p = strstr(p, "call")); p += 4)
        headers++;
    cr_expect_geq(headers, (size_t)pages - 1, "the table's header on each of its pages");
    free(text);
    /* the first page is not blank: rendered, some pixels are dark */
    char *png = cp_t_path("page");
    cmd = cp_t_fmt("pdftoppm -r 30 -gray -f 1 -l 1 '%s' '%s' && od -An -tu1 -v '%s'-1.pgm | "
                   "tr -s ' ' '\\n' | awk '$1 != \"\" && $1 < 128' | wc -l",
                   pdf, png, png);
    char *dark = cp_run_shell(cmd);
    free(cmd);
    cr_assert_not_null(dark);
    cr_expect_gt(atol(dark), 100, "the first page looks blank");
    free(dark);
    free(png);
    free(pdf);
    cp_doc_free(d);
}

Test(report, two_pdfs_of_one_document_differ_only_in_their_creation_date)
{
    struct cp_doc *d = sample_doc(60);
    char *a = cp_t_path("a.pdf"), *b = cp_t_path("b.pdf");
    struct cp_diag dg;
    cp_diag_init(&dg);
    cr_assert_eq(cp_doc_pdf(d, a, NULL, &dg), CP_OK, "%s", dg.msg);
    cr_assert_eq(cp_doc_pdf(d, b, NULL, &dg), CP_OK, "%s", dg.msg);
    char *cmd = cp_t_fmt("grep -av CreationDate '%s' > '%s.x' && grep -av CreationDate '%s' > "
                         "'%s.x' && cmp '%s.x' '%s.x' && grep -ac CreationDate '%s'",
                         a, a, b, b, a, b, a);
    char *out = cp_run_shell(cmd);
    cr_assert_not_null(out, "%s", cmd);
    cr_expect_eq(atoi(out), 1, "one line apart, the creation date: %s", out);
    free(out);
    free(cmd);
    free(b);
    free(a);
    cp_doc_free(d);
}

Test(report, html_is_self_contained_and_the_same_bytes_every_time)
{
    struct cp_doc *a = sample_doc(20), *b = sample_doc(20);
    struct cp_buf x, y;
    cp_buf_init(&x);
    cp_buf_init(&y);
    cp_doc_html(a, &x);
    cp_doc_html(b, &y);
    cr_assert_eq(x.len, y.len);
    cr_expect(memcmp(x.data, y.data, x.len) == 0, "two renderings differ");
    ct_assert_mentions(x.data, "<!DOCTYPE html>", "<nav>", "href=\"#s1\"", "<svg",
                       "去噪器 (denoiser)", "<td>去噪器 (denoiser)</td><td class=\"n\">41.", NULL);
    cr_expect(strstr(x.data, "<script") == NULL && strstr(x.data, "<link") == NULL &&
                  strstr(x.data, "src=\"http") == NULL,
              "something is fetched");
    /* valid XML inside: the chart's SVG */
    char *path = cp_t_path("chart.svg");
    struct cp_chart c = {.kind = CP_CHART_STACKED,
                         .title = "Shares",
                         .unit = "%",
                         .labels = NODES,
                         .n = 3,
                         .values = (const double[]){10, 20, 30, 40, 5, 5, 50, 25, 25},
                         .part_names = (const char *const[]){"on-CPU", "off-CPU", "waiting"},
                         .n_parts = 3};
    struct cp_buf svg;
    cp_buf_init(&svg);
    struct cp_diag dg;
    cp_diag_init(&dg);
    cr_assert_eq(cp_chart_render(&c, CP_CHART_SVG, 500, &svg, &dg), CP_OK, "%s", dg.msg);
    cr_assert(cp_t_write_file(path, svg.data, svg.len));
    char *cmd = cp_t_fmt("xmllint --noout '%s' && echo ok", path);
    char *ok = cp_run_shell(cmd);
    cr_expect(ok && strstr(ok, "ok"), "the SVG is not valid XML");
    free(ok);
    free(cmd);
    /* and again: the same bytes */
    struct cp_buf svg2;
    cp_buf_init(&svg2);
    cr_assert_eq(cp_chart_render(&c, CP_CHART_SVG, 500, &svg2, &dg), CP_OK);
    cr_expect(svg.len == svg2.len && memcmp(svg.data, svg2.data, svg.len) == 0,
              "a chart's SVG changed between two renderings");
    cp_buf_release(&svg);
    cp_buf_release(&svg2);
    /* a PNG is a PNG */
    struct cp_buf png;
    cp_buf_init(&png);
    cr_assert_eq(cp_chart_render(&c, CP_CHART_PNG, 500, &png, &dg), CP_OK);
    cr_expect(png.len > 100 && memcmp(png.data, "\x89PNG", 4) == 0);
    cp_buf_release(&png);
    free(path);
    cp_buf_release(&x);
    cp_buf_release(&y);
    cp_doc_free(a);
    cp_doc_free(b);
}

Test(report, a_report_is_written_by_its_extension_and_refuses_others)
{
    struct cp_doc *d = sample_doc(3);
    struct cp_diag dg;
    cp_diag_init(&dg);
    char *p = cp_t_path("r.docx");
    cr_expect_eq(cp_doc_write(d, p, &dg), CP_ERR_USAGE);
    ct_assert_mentions(dg.msg, "as .html or .pdf", NULL);
    free(p);
    p = cp_t_path("r.html");
    cp_diag_init(&dg);
    cr_expect_eq(cp_doc_write(d, p, &dg), CP_OK, "%s", dg.msg);
    free(p);
    p = cp_t_path("no/such/folder/r.pdf");
    cp_diag_init(&dg);
    cr_expect_neq(cp_doc_write(d, p, &dg), CP_OK);
    ct_assert_mentions(dg.msg, "r.pdf", NULL);
    free(p);
    cp_doc_free(d);
}

Test(report, validate_writes_its_result_as_a_pdf_with_the_distributions)
{
    /* two runs of different latencies, through bench's trace writer */
    char *a = cp_t_path("a.db"), *b = cp_t_path("b.db"), *pdf = cp_t_path("v.pdf");
    char *m = cp_t_example("launch_bound_tiny");
    struct cp_run r;
    cp_run_cli(&r, "bench", m, "-n", "40", "-t", "1", "--trace", a, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "bench", m, "-n", "40", "-t", "1", "--trace", b, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", a, "--after", b, "--output", pdf, NULL);
    cr_expect(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 4, "%s", r.err);
    ct_assert_mentions(r.out, "report: ", NULL);
    cp_run_release(&r);
    char *cmd = cp_t_fmt("pdftotext '%s' -", pdf);
    char *text = cp_run_shell(cmd);
    free(cmd);
    cr_assert_not_null(text, "pdftotext failed");
    ct_assert_mentions(text, "cannprof validate", "Metrics", "latency (ms)", "Latency, cumulative",
                       "before (n=", NULL);
    free(text);
    /* an extension it cannot write is refused before anything is compared */
    cp_run_cli(&r, "validate", "--before", a, "--after", b, "--output", "v.docx", NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, "REPORT.html or REPORT.pdf", NULL);
    cp_run_release(&r);
    free(m);
    free(pdf);
    free(b);
    free(a);
}

/* ---- XY charts ---------------------------------------------------------------------------- */

/* A tuning trajectory: the best's median by step, candidates as points. */
static const double TR_STEP[] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
static const double TR_BEST[] = {12.4, 11.9, 11.9, 10.2, 10.2, 9.8, 9.8, 9.75, 9.6};
static const double TR_ACC_X[] = {1, 3, 5, 8}, TR_ACC_Y[] = {11.9, 10.2, 9.8, 9.6};
static const double TR_REJ_X[] = {2, 4, 6, 7, 7}, TR_REJ_Y[] = {13.1, 12.5, 10.9, 14.2, 10.0};

static struct cp_chart trajectory(void)
{
    struct cp_chart c = {.kind = CP_CHART_XY,
                         .title = "Tuning trajectory 调优轨迹",
                         .x_title = "step",
                         .y_title = "median latency (ms)",
                         .n_series = 3};
    c.series[0] = (struct cp_chart_series){
        .name = "best so far", .x = TR_STEP, .y = TR_BEST, .n = 9, .line = true, .points = true};
    c.series[1] = (struct cp_chart_series){
        .name = "accepted", .x = TR_ACC_X, .y = TR_ACC_Y, .n = 4, .points = true};
    c.series[2] = (struct cp_chart_series){
        .name = "rejected", .x = TR_REJ_X, .y = TR_REJ_Y, .n = 5, .points = true};
    return c;
}

/* A Pareto front: every candidate labelled with its change, the front joined. */
static const double PA_LOSS[] = {0, 0.02, 0.4, 0.05, 1.3, 0.4, 2.1, 0.9};
static const double PA_MS[] = {12.4, 11.8, 7.9, 10.3, 6.1, 9.9, 6.0, 8.8};
static const char *const PA_CHANGE[] = {"baseline", "fusion off",  "fp16",     "layout NHWC",
                                        "int8",     "fp16 + 融合", "int8 all", NULL};
static const double FR_LOSS[] = {0, 0.02, 0.05, 0.4, 1.3, 2.1};
static const double FR_MS[] = {12.4, 11.8, 10.3, 7.9, 6.1, 6.0};

static struct cp_chart pareto(void)
{
    struct cp_chart c = {.kind = CP_CHART_XY,
                         .title = "Precision against latency",
                         .x_title = "precision loss (%)",
                         .y_title = "latency (ms)",
                         .n_series = 2};
    c.series[0] = (struct cp_chart_series){.name = "candidates",
                                           .x = PA_LOSS,
                                           .y = PA_MS,
                                           .n = 8,
                                           .points = true,
                                           .labels = PA_CHANGE};
    c.series[1] = (struct cp_chart_series){
        .name = "Pareto front", .x = FR_LOSS, .y = FR_MS, .n = 6, .line = true, .points = true};
    return c;
}

/* A roofline: kernels under min(180 GFLOP/s, 25 GB/s x intensity), log-log. */
static const double RF_AI[] = {0.25, 1.5, 12, 40, 3.2, 0.08};
static const double RF_GFLOPS[] = {5.1, 30, 150, 120, 61, 1.5};
static const char *const RF_KERNEL[] = {"LayerNorm",  "Softmax", "MatMul",
                                        "Conv2D 3x3", "GELU",    "Transpose"};

static struct cp_chart roofline(void)
{
    struct cp_chart c = {.kind = CP_CHART_XY,
                         .title = "Roofline",
                         .unit = "GFLOP/s",
                         .x_title = "arithmetic intensity (FLOP/byte)",
                         .y_title = "performance (GFLOP/s)",
                         .log_x = true,
                         .log_y = true,
                         .roof_peak = 180,
                         .roof_bw = 25,
                         .n_series = 1};
    c.series[0] = (struct cp_chart_series){
        .name = "kernels", .x = RF_AI, .y = RF_GFLOPS, .n = 6, .points = true, .labels = RF_KERNEL};
    return c;
}

#define XY_WIDTH 520.0

static void render_ok(const struct cp_chart *c, enum cp_chart_format f, struct cp_buf *out)
{
    struct cp_diag dg;
    cp_diag_init(&dg);
    cp_buf_init(out);
    cr_assert_eq(cp_chart_render(c, f, XY_WIDTH, out, &dg), CP_OK, "%s", dg.msg);
    cr_assert(out->len > 0);
}

/* The chart as a PDF, through `pdftotext OPTS`: its text (caller frees). */
static char *pdf_text(const struct cp_chart *c, const char *opts)
{
    struct cp_buf pdf;
    render_ok(c, CP_CHART_PDF, &pdf);
    char *path = cp_t_path("xy.pdf");
    cr_assert(cp_t_write_file(path, pdf.data, pdf.len));
    char *cmd = cp_t_fmt("pdftotext %s '%s' -", opts, path);
    char *text = cp_run_shell(cmd);
    cr_assert_not_null(text, "%s failed", cmd);
    free(cmd);
    free(path);
    cp_buf_release(&pdf);
    return text;
}

/* The SVG is valid XML, has no NaN or infinite coordinates, and is the same
 * bytes again, inlined, even with another chart drawn in between. */
static void expect_stable_svg(const struct cp_chart *c)
{
    struct cp_buf svg;
    render_ok(c, CP_CHART_SVG, &svg);
    char *path = cp_t_path("xy.svg");
    cr_assert(cp_t_write_file(path, svg.data, svg.len));
    char *cmd = cp_t_fmt("xmllint --noout '%s' && echo ok", path);
    char *ok = cp_run_shell(cmd);
    cr_expect(ok && strstr(ok, "ok"), "the SVG is not valid XML");
    cp_buf_puts(&svg, "");
    cr_expect(strstr(svg.data, "nan") == NULL && strstr(svg.data, "inf") == NULL,
              "a coordinate is not finite");
    free(ok);
    free(cmd);
    free(path);
    cp_buf_release(&svg);
    struct cp_buf a, b, other;
    struct cp_diag dg;
    cp_diag_init(&dg);
    cp_buf_init(&a);
    cp_buf_init(&b);
    cp_buf_init(&other);
    struct cp_chart between = pareto();
    cr_assert_eq(cp_chart_svg_inline(c, XY_WIDTH, "x-", &a, &dg), CP_OK, "%s", dg.msg);
    cr_assert_eq(cp_chart_svg_inline(&between, XY_WIDTH, "y-", &other, &dg), CP_OK);
    cr_assert_eq(cp_chart_svg_inline(c, XY_WIDTH, "x-", &b, &dg), CP_OK);
    cr_expect(a.len == b.len && memcmp(a.data, b.data, a.len) == 0,
              "an XY chart's SVG changed between two renderings");
    cp_buf_release(&a);
    cp_buf_release(&b);
    cp_buf_release(&other);
}

static cairo_status_t read_png(void *closure, unsigned char *data, unsigned int length)
{
    struct cp_buf *b = closure;
    if (length > b->len)
        return CAIRO_STATUS_READ_ERROR;
    memcpy(data, b->data, length);
    memmove(b->data, b->data + length, b->len - length);
    b->len -= length;
    return CAIRO_STATUS_SUCCESS;
}

/* The chart as a PNG, decoded: how many pixels are dark, and how many are
 * the palette's first colour (blue: the first series). */
static void png_pixels(const struct cp_chart *c, long *dark, long *blue)
{
    struct cp_buf png;
    render_ok(c, CP_CHART_PNG, &png);
    cr_assert(png.len > 100 && memcmp(png.data, "\x89PNG", 4) == 0);
    cairo_surface_t *s = cairo_image_surface_create_from_png_stream(read_png, &png);
    cr_assert_eq(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    cairo_surface_flush(s);
    int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    int stride = cairo_image_surface_get_stride(s);
    const unsigned char *px = cairo_image_surface_get_data(s);
    *dark = *blue = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t p;
            memcpy(&p, px + (size_t)y * (size_t)stride + (size_t)x * 4, 4);
            int r = (p >> 16) & 255, g = (p >> 8) & 255, b = p & 255;
            *dark += r + g + b < 3 * 128;
            *blue += abs(r - 0) < 24 && abs(g - 114) < 24 && abs(b - 178) < 24;
        }
    cairo_surface_destroy(s);
    cp_buf_release(&png);
}

/* pdftotext's text with every space and line break taken out: a label
 * set along a slope comes out in pieces. */
static void squeeze(char *s)
{
    char *o = s;
    for (; *s; s++)
        if (*s != ' ' && *s != '\n' && *s != '\f')
            *o++ = *s;
    *o = 0;
}

Test(report, an_xy_chart_draws_a_tuning_trajectory_with_its_series_named)
{
    struct cp_chart c = trajectory();
    expect_stable_svg(&c);
    char *text = pdf_text(&c, "");
    ct_assert_mentions(text, "Tuning trajectory 调优轨迹", "median latency (ms)", "step",
                       "best so far", "accepted", "rejected", "10", "12", "14", NULL);
    /* ticks on whole steps: 0, 2, ..., 8 */
    ct_assert_mentions(text, "0\n", "8\n", NULL);
    free(text);
    long dark, blue;
    png_pixels(&c, &dark, &blue);
    cr_expect_gt(dark, 1000, "the PNG looks blank (%ld dark pixels)", dark);
    cr_expect_gt(blue, 200, "the first series is not drawn in the first colour");
}

Test(report, an_xy_chart_draws_a_pareto_front_with_each_point_labelled_by_its_change)
{
    struct cp_chart c = pareto();
    expect_stable_svg(&c);
    char *text = pdf_text(&c, "");
    ct_assert_mentions(text, "precision loss (%)", "latency (ms)", "candidates", "Pareto front",
                       "baseline", "fusion off", "fp16", "layout NHWC", "int8 all", "fp16 + 融合",
                       "0.5", "1.0", NULL);
    free(text);
    long dark, blue;
    png_pixels(&c, &dark, &blue);
    cr_expect_gt(dark, 1000, "the PNG looks blank");
}

Test(report, an_xy_chart_draws_a_roofline_with_its_roofs_and_ridge_numbered)
{
    struct cp_chart c = roofline();
    expect_stable_svg(&c);
    char *text = pdf_text(&c, "");
    ct_assert_mentions(text, "peak 180 GFLOP/s", "ridge 7.2 FLOP/byte", "LayerNorm", "Softmax",
                       "MatMul", "Conv2D 3x3", "GELU", "Transpose", "kernels", "0.1", "10", "100",
                       "arithmetic intensity (FLOP/byte)", NULL);
    free(text);
    text = pdf_text(&c, "-raw");
    squeeze(text);
    ct_assert_mentions(text, "memory25GB/s", NULL);
    free(text);
    long dark, blue;
    png_pixels(&c, &dark, &blue);
    cr_expect_gt(dark, 1000, "the PNG looks blank");
    cr_expect_gt(blue, 100, "the kernels are not drawn");
}

Test(report, a_log_axis_labels_its_decades_as_short_numbers)
{
    static const double X[] = {0.1, 3, 2e3, 1e5}, Y[] = {1, 2, 3, 4};
    struct cp_chart c = {.kind = CP_CHART_XY, .log_x = true, .n_series = 1};
    c.series[0] = (struct cp_chart_series){.name = "s", .x = X, .y = Y, .n = 4, .points = true};
    char *text = pdf_text(&c, "-layout");
    ct_assert_mentions(text, "0.1", " 1 ", " 10 ", "100", "1000", "1e4", "1e5", NULL);
    cr_expect(strstr(text, "e+") == NULL && strstr(text, "10000") == NULL, "%s", text);
    free(text);
}

Test(report, an_xy_chart_without_data_says_so_and_never_draws_nan)
{
    static const double BAD[] = {NAN, INFINITY, -INFINITY, NAN};
    static const double HUGE_V[] = {1e308, -1e308};
    struct cp_chart cases[5] = {
        {.kind = CP_CHART_XY, .title = "no series", .x_title = "x", .y_title = "y"},
        {.kind = CP_CHART_XY, .title = "no points", .n_series = 2, .roof_peak = 1, .roof_bw = 1},
        {.kind = CP_CHART_XY, .title = "not finite", .n_series = 1, .log_y = true},
        {.kind = CP_CHART_XY, .title = "NULL coordinates", .n_series = 1},
        {.kind = CP_CHART_XY, .title = "too big", .n_series = 1},
    };
    cases[1].series[0] = (struct cp_chart_series){.name = "empty", .line = true};
    cases[1].series[1] = (struct cp_chart_series){.name = "empty too", .points = true};
    cases[2].series[0] =
        (struct cp_chart_series){.name = "bad", .x = BAD, .y = BAD, .n = 4, .line = true};
    cases[3].series[0] = (struct cp_chart_series){.name = "none", .n = 3, .points = true};
    cases[4].series[0] =
        (struct cp_chart_series){.name = "huge", .x = HUGE_V, .y = HUGE_V, .n = 2, .line = true};
    for (size_t i = 0; i < 5; i++) {
        cr_expect_geq(cp_chart_height(&cases[i], XY_WIDTH), 220, "%s", cases[i].title);
        expect_stable_svg(&cases[i]);
        char *text = pdf_text(&cases[i], "");
        ct_assert_mentions(text, cases[i].title, "no data", NULL);
        free(text);
        long dark, blue;
        png_pixels(&cases[i], &dark, &blue);
        cr_expect_gt(dark, 100, "%s: blank", cases[i].title);
    }
    char *text = pdf_text(&cases[2], "");
    ct_assert_mentions(text, "4 points without a finite value left out", NULL);
    free(text);
}

Test(report, a_log_axis_leaves_out_values_not_above_zero_and_says_how_many)
{
    static const double X[] = {-1, 0, 3, 30, 300}, Y[] = {5, 2, 0.3, -4, 7};
    struct cp_chart c = {
        .kind = CP_CHART_XY, .note = "measured twice", .log_x = true, .log_y = true, .n_series = 1};
    c.series[0] =
        (struct cp_chart_series){.name = "s", .x = X, .y = Y, .n = 5, .line = true, .points = true};
    struct cp_chart linear = c;
    linear.log_x = linear.log_y = false;
    cr_expect_gt(cp_chart_height(&c, XY_WIDTH), cp_chart_height(&linear, XY_WIDTH) - 1);
    expect_stable_svg(&c);
    char *text = pdf_text(&c, "");
    ct_assert_mentions(text, "measured twice", "3 points ≤ 0 left out (log scale)", NULL);
    cr_expect(strstr(text, "no data") == NULL);
    free(text);
    /* on linear axes the same points are all drawn */
    text = pdf_text(&linear, "");
    cr_expect(strstr(text, "left out") == NULL, "%s", text);
    free(text);
}

Test(report, an_xy_chart_of_one_point_or_equal_values_gets_a_padded_range)
{
    static const double ONE[] = {5}, ZEROS[] = {0, 0, 0}, SAME[] = {7, 7, 7};
    struct cp_chart one = {.kind = CP_CHART_XY, .title = "one point", .n_series = 1};
    one.series[0] = (struct cp_chart_series){
        .name = "it", .x = ONE, .y = ONE, .n = 1, .points = true, .labels = RF_KERNEL};
    struct cp_chart flat = {.kind = CP_CHART_XY, .title = "flat", .n_series = 1};
    flat.series[0] = (struct cp_chart_series){
        .name = "zeros", .x = SAME, .y = ZEROS, .n = 3, .line = true, .points = true};
    struct cp_chart logone = one;
    logone.log_x = logone.log_y = true;
    const struct cp_chart *all[] = {&one, &flat, &logone};
    for (size_t i = 0; i < 3; i++) {
        expect_stable_svg(all[i]);
        char *text = pdf_text(all[i], "");
        cr_expect(strstr(text, "no data") == NULL && strstr(text, "nan") == NULL, "%s", text);
        free(text);
    }
    char *text = pdf_text(&one, "");
    ct_assert_mentions(text, "LayerNorm", "4.6", "5.0", "5.4", NULL); /* 5 ± 10% */
    free(text);
    text = pdf_text(&flat, "");
    ct_assert_mentions(text, "-1.0", "0.0", "1.0", NULL); /* 0 ± 1 */
    free(text);
}

Test(report, crowded_point_labels_are_left_out_rather_than_overlap_and_stay_on_the_chart)
{
    enum { N = 40 };
    double x[N], y[N];
    char names[N][16];
    const char *labels[N];
    for (int i = 0; i < N; i++) {
        x[i] = 1 + (i % 5) * 0.01;
        y[i] = 1 + (i / 5) * 0.01;
        snprintf(names[i], sizeof names[i], "label%02d", i);
        labels[i] = names[i];
    }
    /* and at the far corners, long ones that would run off */
    x[N - 1] = 3, y[N - 1] = 3, snprintf(names[N - 1], sizeof names[N - 1], "top-right-one");
    x[N - 2] = 3, y[N - 2] = 0, snprintf(names[N - 2], sizeof names[N - 2], "bottom-right");
    struct cp_chart c = {.kind = CP_CHART_XY, .title = "crowded", .n_series = 1};
    c.series[0] = (struct cp_chart_series){
        .name = "s", .x = x, .y = y, .n = N, .points = true, .labels = labels};
    expect_stable_svg(&c);
    char *text = pdf_text(&c, "");
    size_t shown = 0;
    for (const char *p = text; (p = strstr(p, "label")); p += 5)
        shown++;
    cr_expect(shown >= 1 && shown < N - 2, "%zu of %d crowded labels drawn", shown, N - 2);
    ct_assert_mentions(text, "label00", "top-right-one", "bottom-right", NULL);
    free(text);
    /* every word within the page, inside its 8-point margins */
    text = pdf_text(&c, "-bbox");
    size_t words = 0;
    for (const char *p = text; (p = strstr(p, "<word ")); p += 6) {
        double x0, y0, x1, y1;
        cr_assert_eq(sscanf(p, "<word xMin=\"%lf\" yMin=\"%lf\" xMax=\"%lf\" yMax=\"%lf\"", &x0,
                            &y0, &x1, &y1),
                     4);
        cr_expect(x0 >= 7.5 && x1 <= XY_WIDTH - 7.5, "a word runs off: %.60s", p);
        words++;
    }
    cr_expect_gt(words, 5);
    free(text);
}

Test(report, an_xy_chart_marks_each_series_with_its_own_shape_and_colour)
{
    static const double X[] = {1, 2, 3}, Y[] = {1, 2, 3};
    struct cp_chart c = {.kind = CP_CHART_XY, .n_series = 9}; /* more than it takes: 4 drawn */
    const char *names[] = {"circle", "square", "triangle", "diamond"};
    for (size_t k = 0; k < CP_CHART_MAX_SERIES; k++)
        c.series[k] =
            (struct cp_chart_series){.name = names[k], .x = X, .y = Y, .n = 3, .points = true};
    expect_stable_svg(&c);
    char *text = pdf_text(&c, "");
    ct_assert_mentions(text, "circle", "square", "triangle", "diamond", NULL);
    free(text);
    cr_expect_geq(cp_chart_height(&c, 100), 220);
    cr_expect_geq(cp_chart_height(&c, 1000), 550);
}

Test(report, the_views_colours_are_the_palettes_named_tints_and_ramp)
{
    char hex[8];
    cp_chart_tint_hex(CP_CHART_BLUE, 0, hex);
    cr_assert_str_eq(hex, CP_CHART_BLUE_HEX);
    cp_chart_tint_hex(CP_CHART_VERMILLION, 0, hex);
    cr_assert_str_eq(hex, CP_CHART_VERMILLION_HEX);
    cp_chart_tint_hex(CP_CHART_PURPLE, 0, hex);
    cr_assert_str_eq(hex, CP_CHART_HIGHLIGHT_HEX);
    cp_chart_tint_hex(CP_CHART_GREEN, 1, hex);
    cr_assert_str_eq(hex, "#ffffff", "fully lightened is white");
    cp_chart_tint_hex(CP_CHART_GREEN, 5, hex);
    cr_assert_str_eq(hex, "#ffffff", "clamped");

    /* a name lightens by the same amount every time, within the bound */
    double t = cp_chart_name_tint("conv1");
    cr_assert_eq(t, cp_chart_name_tint("conv1"));
    cr_assert(t >= 0 && t <= CP_CHART_NAME_TINT_MAX);
    cr_assert_eq(cp_chart_name_tint(NULL), cp_chart_name_tint(""));

    /* the ramp darkens step by step; the last three take white text */
    int last = 256 * 3;
    for (size_t k = 0; k < CP_CHART_RAMP_N; k++) {
        bool light = false;
        const char *h = cp_chart_ramp_hex(k, &light);
        unsigned v = 0;
        cr_assert_eq(sscanf(h, "#%6x", &v), 1, "%s", h);
        int sum = (int)((v >> 16) & 0xff) + (int)((v >> 8) & 0xff) + (int)(v & 0xff);
        cr_assert_lt(sum, last, "step %zu (%s) is not darker", k, h);
        last = sum;
        cr_assert_eq(light, k + 3 >= CP_CHART_RAMP_N, "step %zu", k);
    }
    cr_assert_str_eq(cp_chart_ramp_hex(99, NULL), cp_chart_ramp_hex(CP_CHART_RAMP_N - 1, NULL));
}

Test(report, a_table_too_wide_for_the_page_is_set_smaller_and_keeps_its_words_whole)
{
    /* 8 columns of 12-character words: at the tables' size their words
     * alone are wider than A4's text width; smaller, they fit */
    enum { COLS = 8, ROWS = 4 };
    struct cp_doc *d = cp_doc_new("wide");
    const char *cells[COLS * ROWS];
    char *owned[COLS * ROWS];
    for (size_t i = 0; i < COLS * ROWS; i++) {
        owned[i] = cp_t_fmt("w%02zu_abcdefgh", i);
        cells[i] = owned[i];
    }
    cp_doc_table(d, COLS, ROWS, cells);
    char *pdf = cp_t_path("wide.pdf");
    int pages = 0;
    struct cp_diag dg;
    cp_diag_init(&dg);
    cr_assert_eq(cp_doc_pdf(d, pdf, &pages, &dg), CP_OK, "%s", dg.msg);
    char *cmd = cp_t_fmt("pdftotext -raw '%s' -", pdf);
    char *text = cp_run_shell(cmd);
    cr_assert_not_null(text);
    for (size_t i = 0; i < COLS * ROWS; i++)
        cr_expect_not_null(strstr(text, owned[i]), "%s is not whole in: %s", owned[i], text);
    free(text);
    free(cmd);
    for (size_t i = 0; i < COLS * ROWS; i++)
        free(owned[i]);
    free(pdf);
    cp_doc_free(d);
}
