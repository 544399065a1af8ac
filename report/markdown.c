/* A report's Markdown as a document (report/doc.h): the commands write
 * their reports once, as Markdown, and the HTML and PDF forms are that
 * Markdown read back by cmark-gfm (CommonMark with GitHub's tables) into
 * headings, paragraphs, preformatted blocks and tables, so that the three
 * forms cannot say different things. Charts join at the headings the
 * caller names. */
#include "report/doc.h"

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t registered = PTHREAD_ONCE_INIT;

static void register_extensions(void)
{
    cmark_gfm_core_extensions_ensure_registered();
}

static bool is(cmark_node *n, const char *type)
{
    const char *t = cmark_node_get_type_string(n);
    return t && strcmp(t, type) == 0;
}

/* The text of a node's inlines: emphasis and links as their text, code as
 * its text, breaks as spaces (soft) or newlines (hard). */
static void inline_text(cmark_node *n, struct cp_buf *o)
{
    for (cmark_node *c = cmark_node_first_child(n); c; c = cmark_node_next(c)) {
        switch (cmark_node_get_type(c)) {
        case CMARK_NODE_TEXT:
        case CMARK_NODE_CODE:
        case CMARK_NODE_HTML_INLINE: {
            const char *s = cmark_node_get_literal(c);
            cp_buf_puts(o, s ? s : "");
            break;
        }
        case CMARK_NODE_SOFTBREAK:
            cp_buf_putc(o, ' ');
            break;
        case CMARK_NODE_LINEBREAK:
            cp_buf_putc(o, '\n');
            break;
        default:
            inline_text(c, o);
        }
    }
}

/* Blocks nested deeper than this (quotes in quotes, lists in lists) are
 * left out: the walk recurses, and cmark nests without a limit. */
#define MAX_NESTING 64

struct walk {
    struct cp_doc *doc;
    cp_doc_section_fn hook;
    void *ctx;
    struct cp_buf text;
    int title_seen;
    int nesting;
    bool oom;
};

static const char *take(struct walk *w)
{
    cp_buf_puts(&w->text, "");
    return w->text.data ? w->text.data : "";
}

static void table(struct walk *w, cmark_node *t)
{
    size_t cols = cmark_gfm_extensions_get_table_columns(t), rows = 0;
    for (cmark_node *r = cmark_node_first_child(t); r; r = cmark_node_next(r))
        rows++;
    if (cols == 0 || rows == 0)
        return;
    char **cells = calloc(rows * cols, sizeof *cells);
    if (!cells) {
        w->oom = true;
        return;
    }
    size_t ri = 0;
    for (cmark_node *r = cmark_node_first_child(t); r; r = cmark_node_next(r), ri++) {
        size_t ci = 0;
        for (cmark_node *c = cmark_node_first_child(r); c && ci < cols; c = cmark_node_next(c)) {
            cp_buf_reset(&w->text);
            inline_text(c, &w->text);
            cells[ri * cols + ci] = cp_strdup(take(w));
            w->oom |= !cells[ri * cols + ci++];
        }
    }
    const char **view = calloc(rows * cols, sizeof *view);
    if (view) {
        for (size_t i = 0; i < rows * cols; i++)
            view[i] = cells[i] ? cells[i] : "";
        cp_doc_table(w->doc, cols, rows, view);
    } else {
        w->oom = true;
    }
    free(view);
    for (size_t i = 0; i < rows * cols; i++)
        free(cells[i]);
    free(cells);
}

static void blocks(struct walk *w, cmark_node *parent, const char *bullet, int depth);

static void list(struct walk *w, cmark_node *l, int depth)
{
    bool ordered = cmark_node_get_list_type(l) == CMARK_ORDERED_LIST;
    int k = cmark_node_get_list_start(l);
    for (cmark_node *item = cmark_node_first_child(l); item; item = cmark_node_next(item), k++) {
        char mark[32];
        if (ordered)
            snprintf(mark, sizeof mark, "%*s%d. ", 2 * depth, "", k);
        else
            snprintf(mark, sizeof mark, "%*s\xe2\x80\xa2 ", 2 * depth, "");
        blocks(w, item, mark, depth + 1);
    }
}

/* The blocks under parent; `bullet` leads the first paragraph (a list
 * item's mark). */
static void blocks(struct walk *w, cmark_node *parent, const char *bullet, int depth)
{
    if (w->nesting >= MAX_NESTING)
        return;
    w->nesting++;
    for (cmark_node *n = cmark_node_first_child(parent); n; n = cmark_node_next(n)) {
        switch (cmark_node_get_type(n)) {
        case CMARK_NODE_HEADING: {
            cp_buf_reset(&w->text);
            inline_text(n, &w->text);
            int level = cmark_node_get_heading_level(n);
            if (level == 1 && !w->title_seen) {
                w->title_seen = 1; /* the document's title */
                break;
            }
            cp_doc_heading(w->doc, level <= 2 ? 1 : level == 3 ? 2 : 3, take(w));
            if (w->hook)
                w->hook(w->ctx, w->doc, take(w));
            break;
        }
        case CMARK_NODE_PARAGRAPH:
            cp_buf_reset(&w->text);
            if (bullet) {
                cp_buf_puts(&w->text, bullet);
                bullet = NULL;
            }
            inline_text(n, &w->text);
            cp_doc_text(w->doc, take(w));
            break;
        case CMARK_NODE_HTML_BLOCK: {
            /* markup for the Markdown's readers on the web (<details>):
             * its words stay, its tags go */
            const char *s = cmark_node_get_literal(n);
            cp_buf_reset(&w->text);
            for (bool tag = false; s && *s; s++) {
                if (*s == '<')
                    tag = true;
                else if (*s == '>' && tag)
                    tag = false;
                else if (!tag && *s != '\n')
                    cp_buf_putc(&w->text, *s);
            }
            const char *t = take(w);
            while (*t == ' ')
                t++;
            if (*t)
                cp_doc_text(w->doc, t);
            break;
        }
        case CMARK_NODE_CODE_BLOCK: {
            const char *s = cmark_node_get_literal(n);
            size_t len = s ? strlen(s) : 0;
            cp_buf_reset(&w->text);
            cp_buf_append(&w->text, s ? s : "", len && s[len - 1] == '\n' ? len - 1 : len);
            cp_doc_pre(w->doc, take(w));
            break;
        }
        case CMARK_NODE_LIST:
            list(w, n, depth);
            break;
        case CMARK_NODE_BLOCK_QUOTE:
        case CMARK_NODE_ITEM:
            blocks(w, n, bullet, depth);
            bullet = NULL;
            break;
        default:
            if (is(n, "table"))
                table(w, n);
            break; /* thematic breaks */
        }
    }
    w->nesting--;
}

struct cp_doc *cp_doc_from_markdown(const char *md, const char *title, cp_doc_section_fn hook,
                                    void *ctx)
{
    pthread_once(&registered, register_extensions);
    cmark_parser *p = cmark_parser_new(CMARK_OPT_DEFAULT);
    cmark_syntax_extension *tables = cmark_find_syntax_extension("table");
    if (!p)
        return NULL;
    if (tables)
        cmark_parser_attach_syntax_extension(p, tables);
    cmark_parser_feed(p, md ? md : "", md ? strlen(md) : 0);
    cmark_node *root = cmark_parser_finish(p);
    struct walk w = {.hook = hook, .ctx = ctx};
    cp_buf_init(&w.text);
    /* the title: the caller's, or the first top-level heading's */
    const char *t = title;
    if (!t && root)
        for (cmark_node *n = cmark_node_first_child(root); n; n = cmark_node_next(n))
            if (cmark_node_get_type(n) == CMARK_NODE_HEADING &&
                cmark_node_get_heading_level(n) == 1) {
                inline_text(n, &w.text);
                t = take(&w);
                break;
            }
    w.doc = cp_doc_new(t ? t : "cannprof report");
    cp_buf_release(&w.text);
    cp_buf_init(&w.text);
    if (w.doc && root) {
        w.title_seen = title ? 1 : 0;
        if (title) /* the caller's title: a first top-level heading is a section */
            w.title_seen = 1;
        blocks(&w, root, NULL, 0);
    }
    if (cp_buf_status(&w.text) != CP_OK)
        w.oom = true;
    cp_buf_release(&w.text);
    cmark_node_free(root);
    cmark_parser_free(p);
    if (w.oom) {
        cp_doc_free(w.doc);
        return NULL;
    }
    return w.doc;
}
