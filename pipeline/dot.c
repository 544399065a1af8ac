/* The graphconf of a flow: DOT read by Graphviz's cgraph into the flow's
 * nodes (every attribute kept as text) and edges (with their ports
 * checked: every built-in flowunit has one input port `in` and one output
 * port `out`). cgraph does not say on which line a node or an edge was
 * written, so the line is found in the DOT text: the first line that
 * names the node followed by its attribute list, or both ends of the edge. */
#include "pipeline/pipeline_internal.h"

#include <graphviz/cgraph.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cgraph reports syntax errors through this; the last one is kept. */
static char dot_error[512];

static int on_dot_error(char *msg)
{
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    snprintf(dot_error, sizeof dot_error, "%.*s", (int)n, msg);
    return 0;
}

/* Whether text[i..] starts the word w (not inside a longer name). */
static bool word_at(const char *text, size_t i, const char *w)
{
    size_t n = strlen(w);
    if (strncmp(text + i, w, n) != 0)
        return false;
    bool left = i == 0 || !(isalnum((unsigned char)text[i - 1]) || text[i - 1] == '_');
    bool right = !(isalnum((unsigned char)text[i + n]) || text[i + n] == '_');
    return left && right;
}

/* The 0-based line of the DOT text where `name` is first followed (after
 * blanks, a port or a quote) by `next` ('[' for a node, '-' for an edge's
 * tail); -1 when none. */
static int line_of(const char *text, const char *name, char next)
{
    int line = 0;
    for (size_t i = 0; text[i]; i++) {
        if (text[i] == '\n') {
            line++;
            continue;
        }
        if (!word_at(text, i, name))
            continue;
        size_t j = i + strlen(name);
        if (text[j] == '"')
            j++;
        if (next == '-' && text[j] == ':') /* a port */
            while (text[j] && !isspace((unsigned char)text[j]) && text[j] != '-')
                j++;
        while (text[j] == ' ' || text[j] == '\t')
            j++;
        if (text[j] == next)
            return line;
    }
    return -1;
}

static char *dup_text(const char *s)
{
    return cp_strdup(s ? s : "");
}

static enum cp_status add_attr(struct pl_node *n, const char *key, const char *value,
                               struct cp_diag *d)
{
    struct pl_attr *g = cp_realloc_array(n->attrs, n->n_attrs + 1, sizeof *g);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    n->attrs = g;
    g[n->n_attrs].key = dup_text(key);
    g[n->n_attrs].value = dup_text(value);
    if (!g[n->n_attrs].key || !g[n->n_attrs].value) {
        free(g[n->n_attrs].key);
        free(g[n->n_attrs].value);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    n->n_attrs++;
    return CP_OK;
}

static enum cp_status read_nodes(struct cp_flow *f, Agraph_t *g, const char *dot, int line0,
                                 struct cp_diag *d)
{
    size_t n = (size_t)agnnodes(g);
    f->nodes = cp_calloc(n ? n : 1, sizeof *f->nodes);
    if (!f->nodes)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (Agnode_t *v = agfstnode(g); v; v = agnxtnode(g, v)) {
        struct pl_node *pn = &f->nodes[f->n_nodes++];
        pn->name = dup_text(agnameof(v));
        pn->body_edge = pn->exit_edge = -1;
        if (!pn->name)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        int l = line_of(dot, pn->name, '[');
        if (l < 0)
            l = line_of(dot, pn->name, '-');
        pn->line = line0 + (l < 0 ? 0 : l);
        for (Agsym_t *sym = agnxtattr(g, AGNODE, NULL); sym; sym = agnxtattr(g, AGNODE, sym)) {
            const char *value = agxget(v, sym);
            if (!value || !*value)
                continue; /* declared for some node, not set on this one */
            enum cp_status st = add_attr(pn, sym->name, value, d);
            if (st != CP_OK)
                return st;
        }
    }
    return CP_OK;
}

static enum cp_status read_edges(struct cp_flow *f, Agraph_t *g, const char *dot, int line0,
                                 struct cp_diag *d)
{
    size_t n = (size_t)agnedges(g);
    f->edges = cp_calloc(n ? n : 1, sizeof *f->edges);
    if (!f->edges)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (Agnode_t *v = agfstnode(g); v; v = agnxtnode(g, v))
        for (Agedge_t *e = agfstout(g, v); e; e = agnxtout(g, e)) {
            const char *tail = agnameof(agtail(e)), *head = agnameof(aghead(e));
            const char *tp = agget(e, "tailport"), *hp = agget(e, "headport");
            int l = line_of(dot, tail, '-');
            int line = line0 + (l < 0 ? 0 : l);
            if (!tp || !*tp || !hp || !*hp)
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "%s:%d: edge %s -> %s: name both ports (%s:out -> %s:in)",
                                   f->path, line, tail, head, tail, head);
            if (strcmp(tp, "out") != 0)
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "%s:%d: edge %s -> %s: %s has no output port '%s' (its port "
                                   "is 'out')",
                                   f->path, line, tail, head, tail, tp);
            if (strcmp(hp, "in") != 0)
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "%s:%d: edge %s -> %s: %s has no input port '%s' (its port "
                                   "is 'in')",
                                   f->path, line, tail, head, head, hp);
            struct pl_edge *pe = &f->edges[f->n_edges++];
            pe->from = (size_t)cp_flow_node_index(f, tail);
            pe->to = (size_t)cp_flow_node_index(f, head);
            pe->line = line;
        }
    return CP_OK;
}

enum cp_status pl_dot_parse(struct cp_flow *f, const char *dot, int line0, struct cp_diag *d)
{
    /* cgraph is not reentrant: flows are read one at a time, on one thread */
    dot_error[0] = '\0';
    agseterr(AGERR);
    agseterrf(on_dot_error);
    Agraph_t *g = agmemread(dot);
    if (!g || agerrors() > 0) {
        /* "syntax error in line N near 'x'": N counts from the DOT text */
        int line = 0;
        const char *at = strstr(dot_error, "line ");
        if (at)
            line = atoi(at + 5);
        enum cp_status st = cp_diag_set(
            d, CP_ERR_INVALID, "%s:%d: the graphconf is not a DOT graph: %s", f->path,
            line0 + (line > 0 ? line - 1 : 0), dot_error[0] ? dot_error : "it does not parse");
        if (g)
            agclose(g);
        agseterrf(NULL);
        return st;
    }
    agseterrf(NULL);
    enum cp_status st = CP_OK;
    if (!agisdirected(g))
        st =
            cp_diag_set(d, CP_ERR_INVALID,
                        "%s:%d: the graphconf is an undirected graph: write 'digraph name { ... }'",
                        f->path, line0);
    if (st == CP_OK && !(f->name = dup_text(agnameof(g))))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st == CP_OK)
        st = read_nodes(f, g, dot, line0, d);
    if (st == CP_OK)
        st = read_edges(f, g, dot, line0, d);
    agclose(g);
    return st;
}
