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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(report, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 120);

/* A command's output (stdout), or NULL when it failed. */
static char *run(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "%s", cmd);
    struct cp_buf b;
    cp_buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, p)) > 0)
        cp_buf_append(&b, chunk, n);
    int rc = pclose(p);
    cp_buf_puts(&b, "");
    if (rc != 0) {
        cp_buf_release(&b);
        return NULL;
    }
    return cp_buf_steal(&b);
}

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
    char *info = run(cmd);
    free(cmd);
    cr_assert_not_null(info, "pdfinfo failed");
    const char *pl = strstr(info, "Pages:");
    cr_assert_not_null(pl, "%s", info);
    cr_expect_eq(atoi(pl + 6), pages, "%s", info);
    ct_assert_mentions(info, "A report: 报告", "cannprof", NULL);
    free(info);
    cmd = cp_t_fmt("pdftotext -layout '%s' -", pdf);
    char *text = run(cmd);
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
    char *dark = run(cmd);
    free(cmd);
    cr_assert_not_null(dark);
    cr_expect_gt(atol(dark), 100, "the first page looks blank");
    free(dark);
    free(png);
    free(pdf);
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
    char *ok = run(cmd);
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
    char *text = run(cmd);
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
