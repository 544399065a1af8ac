/* A report's Markdown read back as a document (report/doc.h:
 * cp_doc_from_markdown over cmark-gfm), then rendered as HTML and, for
 * inputs under 4 KiB (PDF layout is slow), as PDF. The reports embed names
 * users bring (models' nodes, flows, imported profiles), so any text must
 * come out as a page: the HTML begins and ends as one, is valid UTF-8 and
 * carries no markup of the input's (every '<' of it escaped); the PDF is
 * written, or refused with a message. The input is read twice: with the
 * title taken from its first # heading and a hook that puts a chart under
 * every heading that says "chart" (its label the heading's text), and with
 * a title given. */
#include "harness.h"

#include "core/json.h"
#include "report/doc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PDF_MAX_INPUT 4096

/* LeakSanitizer's suppressions, read at start-up. cairo 1.16 (Debian 12)
 * leaks 768 bytes in cairo_surface_finish whenever a PDF embeds a subset of
 * a CJK (CFF) font: a minimal pango + cairo-pdf program leaks the same. Only
 * allocations made inside cairo_surface_finish are let go, so a surface or
 * context the document forgets still shows. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libfontconfig.so\nleak:libcairo.so\n";
}

/* Whether s holds w (lower case), in any case. */
static bool contains_ci(const char *s, const char *w)
{
    for (; *s; s++) {
        size_t i = 0;
        while (w[i] && (s[i] | 0x20) == w[i])
            i++;
        if (!w[i])
            return true;
    }
    return false;
}

static void chart_under(void *ctx, struct cp_doc *d, const char *heading)
{
    (void)ctx;
    if (!contains_ci(heading, "chart"))
        return;
    const char *labels[] = {heading, "other"};
    double values[] = {(double)strlen(heading), 1};
    struct cp_chart c = {.kind = CP_CHART_BARS,
                         .title = heading,
                         .unit = "ms",
                         .labels = labels,
                         .n = 2,
                         .values = values,
                         .note = heading};
    cp_doc_chart(d, &c);
}

static void check_html(const struct cp_doc *doc)
{
    struct cp_buf out;
    cp_buf_init(&out);
    cp_doc_html(doc, &out);
    if (cp_buf_status(&out) == CP_OK) {
        static const char head[] = "<!DOCTYPE html>\n", tail[] = "</html>\n";
        if (out.len < sizeof head + sizeof tail || memcmp(out.data, head, sizeof head - 1) != 0)
            fuzz_fail("the HTML starts with '%.20s'", out.data ? out.data : "");
        if (strcmp(out.data + out.len - (sizeof tail - 1), tail) != 0)
            fuzz_fail("the HTML does not end with </html>");
        if (strlen(out.data) != out.len)
            fuzz_fail("the HTML holds a NUL byte");
        if (!cp_utf8_valid(out.data, out.len))
            fuzz_fail("the HTML is not valid UTF-8");
        if (contains_ci(out.data, "<script"))
            fuzz_fail("the HTML holds a <script> of the input's");
    }
    cp_buf_release(&out);
}

static void check_pdf(const struct cp_doc *doc)
{
    char path[1024];
    if (!fuzz_tmp_path("report.pdf", path, sizeof path))
        return;
    struct cp_diag d;
    cp_diag_init(&d);
    int pages = -1;
    enum cp_status st = cp_doc_pdf(doc, path, &pages, &d);
    if (st == CP_OK) {
        FILE *f = fopen(path, "rb");
        char magic[5] = {0};
        bool pdf = f && fread(magic, 1, sizeof magic, f) == sizeof magic &&
                   memcmp(magic, "%PDF-", sizeof magic) == 0;
        if (f)
            fclose(f);
        if (!pdf)
            fuzz_fail("cp_doc_pdf returned CP_OK and no PDF");
        if (pages < 1)
            fuzz_fail("cp_doc_pdf returned CP_OK and %d pages", pages);
    } else {
        if (!d.msg[0])
            fuzz_fail("cp_doc_pdf failed (status %d) without a message", (int)st);
        if (pages != 0)
            fuzz_fail("cp_doc_pdf failed and said %d pages", pages);
    }
    fuzz_tmp_remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *md = fuzz_strdup(data, size);
    if (!md)
        return 0;
    struct cp_doc *doc = cp_doc_from_markdown(md, NULL, chart_under, NULL);
    if (doc && cp_doc_status(doc) == CP_OK) {
        check_html(doc);
        if (size < PDF_MAX_INPUT)
            check_pdf(doc);
    }
    cp_doc_free(doc);
    doc = cp_doc_from_markdown(md, "A title \xe6\xa8\x99\xe9\xa1\x8c <b>&amp;\"", NULL, NULL);
    if (doc && cp_doc_status(doc) == CP_OK)
        check_html(doc);
    cp_doc_free(doc);
    free(md);
    return 0;
}
