/* The commands' reports as HTML and PDF: a report's Markdown read back into
 * a document (headings, text, lists, code, tables, CJK) and the reports of
 * suggest and tune, with their charts, in both forms: the PDF's text says
 * what the Markdown says, the HTML is self-contained and the same bytes
 * twice. */
#include "cli/cli_test.h"
#include "report/doc.h"
#include "support/browser.h"
#include "support/calibration.h"
#include "support/run.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(report_forms, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 240);

static char *pdf_text(const char *pdf)
{
    char *cmd = cp_t_fmt("pdftotext -layout '%s' -", pdf);
    char *t = cp_run_shell(cmd);
    free(cmd);
    cr_assert_not_null(t, "pdftotext failed on %s", pdf);
    return t;
}

static void self_contained(const char *html)
{
    cr_expect(strstr(html, "<script") == NULL && strstr(html, "src=\"http") == NULL &&
                  strstr(html, "<link") == NULL && strstr(html, "url(http") == NULL,
              "a report fetches nothing");
}

Test(report_forms, markdown_becomes_the_same_document_in_html_and_pdf)
{
    const char *md = "# A report\n\n报告 Some *emphasis*, `code` and a [link](http://x).\n\n"
                     "## Steps\n\n| # | change | ms |\n|---:|---|---:|\n| 1 | `fp16` | 1.25 |\n"
                     "| 2 | 去噪器 | 2.50 |\n\n- first item\n- second item\n\n"
                     "```\ncannprof convert --model=m.onnx\n```\n\n"
                     "<details><summary>evidence</summary>\n\nhidden words\n\n</details>\n\n"
                     "### Deeper\n\nthe end.\n";
    struct cp_doc *doc = cp_doc_from_markdown(md, NULL, NULL, NULL);
    cr_assert_not_null(doc);
    struct cp_buf h;
    cp_buf_init(&h);
    cp_doc_html(doc, &h);
    cp_buf_puts(&h, "");
    ct_assert_mentions(h.data, "<title>A report</title>", "报告 Some emphasis, code and a link",
                       "<th>change</th>", "去噪器", "\xe2\x80\xa2 first item",
                       "cannprof convert --model=m.onnx", ">evidence<", "hidden words", "Deeper",
                       NULL);
    cr_expect(strstr(h.data, "&lt;details") == NULL, "markup for the web is not shown as text");
    cr_expect(strstr(h.data, "**") == NULL && strstr(h.data, "`") == NULL,
              "Markdown's marks are not shown");
    self_contained(h.data);
    cp_buf_release(&h);
    char *pdf = cp_t_path("md.pdf");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_doc_write(doc, pdf, &d), CP_OK, "%s", d.msg);
    char *t = pdf_text(pdf);
    ct_assert_mentions(t, "A report", "报告", "去噪器", "first item", "cannprof convert", NULL);
    free(t);
    free(pdf);
    cp_doc_free(doc);
}

Test(report_forms, suggest_writes_its_report_as_html_and_pdf_with_charts)
{
    /* a fixed roofline, so that the chart of the top kernels is drawn */
    cr_assert_eq(setenv("XDG_CACHE_HOME", cp_t_dir, 1), 0);
    cr_assert(cp_t_fixed_calibration());
    char *om = ct_convert("resnet_tiny");
    char *db = cp_t_path("s.db");
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "-n", "20", "--trace", db, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    char *html = cp_t_path("s.html"), *html2 = cp_t_path("s2.html"), *pdf = cp_t_path("s.pdf"),
         *md = cp_t_path("s.md");
    const char *outs[] = {html, html2, pdf, md};
    for (size_t i = 0; i < 4; i++) {
        cp_run_cli(&r, "suggest", db, "-o", outs[i], "--no-history", NULL);
        cr_assert_eq(r.exit_code, 0, "%s: %s", outs[i], r.err);
        cp_run_release(&r);
    }
    cr_expect(ct_same_bytes(html, html2), "two HTML renderings of one diagnosis differ");
    char *h = ct_read_text(html), *m = ct_read_text(md), *t = pdf_text(pdf);
    self_contained(h);
    /* the Markdown's sections, in both forms, and the charts */
    ct_assert_mentions(m, "## Where the time goes", "| op type |", NULL);
    ct_assert_mentions(h, "Where the time goes", "<svg", "Kernel time by op type", NULL);
    ct_assert_mentions(t, "Where the time goes", "Kernel time by op type",
                       "Roofline: the top kernels by time", "100 GFLOP/s fp32 peak", NULL);
    /* every finding's title is in both */
    const char *p = m;
    int findings = 0;
    while ((p = strstr(p, "\n## ")) != NULL) {
        p += 4;
        const char *e = strchr(p, '\n');
        if (!e || *p < '1' || *p > '9')
            continue;
        char title[64];
        snprintf(title, sizeof title, "%.*s", (int)(e - p < 40 ? e - p : 40), p);
        cr_expect(strstr(h, title) != NULL, "HTML lacks %s", title);
        findings++;
    }
    cr_expect_gt(findings, 0, "resnet_tiny has findings");
    /* as a person opens it: in a browser, its charts drawn, nothing wrong */
    cr_assert(ct_browser_available(), "chromium is needed (scripts/test.sh installs it)");
    char *console = NULL;
    char *dom = ct_browser_dom(html, NULL, &console);
    cr_assert_not_null(dom, "chromium did not open %s", html);
    cr_expect(console && console[0] == '\0', "the page logged: %s", console ? console : "");
    cr_expect_geq(ct_count(dom, "<figure"), 3, "op types, gains, roofline");
    ct_assert_mentions(dom, "Where the time goes", NULL);
    free(console);
    free(dom);
    char *png = cp_t_path("s.png");
    cr_assert(ct_browser_screenshot(html, NULL, png, 1000, 1400));
    struct ct_png_ink ink;
    cr_assert(ct_png_ink(png, &ink));
    cr_expect_gt(ink.ink, 0.02, "the report is blank");
    free(png);
    char *docx = cp_t_path("s.docx");
    cp_run_cli(&r, "suggest", db, "-o", docx, NULL);
    cr_expect_eq(r.exit_code, 2);
    ct_assert_mentions(r.err, ".pdf", NULL);
    cp_run_release(&r);
    free(docx);
    free(t);
    free(m);
    free(h);
    free(md);
    free(pdf);
    free(html2);
    free(html);
    free(db);
    free(om);
}

Test(report_forms, tune_writes_its_report_as_html_and_pdf_beside_the_markdown)
{
    char mp[1024];
    char *out = cp_t_path("tune"), *kb = cp_t_path("kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "tune", cp_example_model(mp, sizeof mp, "sd_unet_tiny"), "--budget", "1", "--kb",
               kb, "-o", out, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(r.out, "report.html", "report.pdf", NULL);
    cp_run_release(&r);
    char *md = cp_t_fmt("%s/report.md", out), *html = cp_t_fmt("%s/report.html", out),
         *pdf = cp_t_fmt("%s/report.pdf", out);
    char *m = ct_read_text(md), *h = ct_read_text(html), *t = pdf_text(pdf);
    self_contained(h);
    ct_assert_mentions(m, "## Steps", NULL);
    ct_assert_mentions(h, ">Steps<", "Tuning trajectory", "<svg", NULL);
    ct_assert_mentions(t, "Steps", "Tuning trajectory", "cannprof tune:", NULL);
    /* a change accepted: the final check against the baseline, drawn */
    if (strstr(m, "**accepted**")) {
        ct_assert_mentions(h, "Latency before and after", "time goes: kernel time by op type",
                           NULL);
        ct_assert_mentions(t, "Latency before and after", "measured interleaved", NULL);
    }
    char *cmd = cp_t_fmt("pdfinfo '%s'", pdf);
    char *info = cp_run_shell(cmd);
    cr_assert_not_null(info);
    const char *pages = strstr(info, "Pages:");
    cr_assert_not_null(pages);
    int n_pages = atoi(pages + strlen("Pages:"));
    cr_expect_geq(n_pages, 2, "a title page with the result, then the steps");
    free(info);
    free(cmd);
    /* every page drawn: none blank */
    char *prefix = cp_t_path("page");
    cmd = cp_t_fmt("pdftoppm -r 30 -png '%s' '%s'", pdf, prefix);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    free(cmd);
    for (int i = 1; i <= n_pages; i++) {
        char *png =
            n_pages >= 10 ? cp_t_fmt("%s-%02d.png", prefix, i) : cp_t_fmt("%s-%d.png", prefix, i);
        struct ct_png_ink ink;
        cr_assert(ct_png_ink(png, &ink), "%s", png);
        cr_expect_gt(ink.ink, 0.005, "page %d of %d is blank", i, n_pages);
        free(png);
    }
    free(prefix);
    free(t);
    free(h);
    free(m);
    free(pdf);
    free(html);
    free(md);
    free(kb);
    free(out);
}
