/*
 * report/doc.h: a report as a document (docs/reports.md): a title, then
 * headings, paragraphs, preformatted text, tables and charts, in order, and
 * two renderings of the same content:
 *
 *   - HTML, self-contained: inline CSS, each chart an inline SVG drawn by
 *     report/chart.h, no script, font or image fetched from anywhere; a table
 *     of contents when the report has three headings or more;
 *   - PDF, drawn with cairo and laid out with pango: A4 pages, text that can
 *     be selected and searched, CJK through the system's fallback fonts
 *     (fonts-noto-cjk), tables split across pages with their header row
 *     repeated, a table of contents with page numbers and the PDF outline
 *     (bookmarks) when there are three headings or more, "title, page i of n"
 *     at the foot of each page.
 *
 * The same document gives the same HTML bytes on every run, and a PDF that
 * differs only in its creation date.
 */
#ifndef CP_REPORT_DOC_H
#define CP_REPORT_DOC_H

#include "core/core.h"
#include "report/chart.h"

struct cp_doc;

/* A new document. NULL when out of memory. */
struct cp_doc *cp_doc_new(const char *title);
void cp_doc_free(struct cp_doc *d); /* NULL is a no-op */

/* Append blocks. Strings and chart data are copied. Out of memory is kept
 * and reported by cp_doc_status (and the renderings). */
void cp_doc_heading(struct cp_doc *d, int level, const char *text); /* level 1..3 */
void cp_doc_text(struct cp_doc *d, const char *text);               /* a paragraph */
void cp_doc_pre(struct cp_doc *d, const char *text);                /* monospace, as given */
/* A table of `rows` rows (the first is the header) and `cols` columns;
 * cells[r * cols + c]. A column whose cells (below the header) read as
 * numbers is right-aligned. */
void cp_doc_table(struct cp_doc *d, size_t cols, size_t rows, const char *const *cells);
void cp_doc_chart(struct cp_doc *d, const struct cp_chart *c);

enum cp_status cp_doc_status(const struct cp_doc *d);

/* Called after each heading a Markdown document adds (its text), so that
 * the caller can put a chart under it. */
typedef void (*cp_doc_section_fn)(void *ctx, struct cp_doc *d, const char *heading);

/* A document from a report's Markdown (CommonMark with GitHub's tables,
 * read by cmark-gfm): headings (## becomes level 1, ### level 2, deeper
 * level 3), paragraphs and list items as text (emphasis and links as their
 * words, each item with its mark), code blocks as preformatted text, tables
 * as tables. The title is `title`, or else the first # heading (which is
 * then not repeated). `hook` (may be NULL) is called after each heading.
 * NULL when out of memory. */
struct cp_doc *cp_doc_from_markdown(const char *md, const char *title, cp_doc_section_fn hook,
                                    void *ctx);

/* The HTML, appended to out. */
void cp_doc_html(const struct cp_doc *d, struct cp_buf *out);

/* The PDF, written to `path` (atomically). OUT: *pages (may be NULL).
 * Errors: cairo (CP_ERR_INTERNAL), the file (CP_ERR_WRITE). */
enum cp_status cp_doc_pdf(const struct cp_doc *d, const char *path, int *pages, struct cp_diag *dg);

/* Write the document as `path` says: .html or .htm, or .pdf. CP_ERR_USAGE
 * for another extension (naming the ones taken). */
enum cp_status cp_doc_write(const struct cp_doc *d, const char *path, struct cp_diag *dg);

#endif
