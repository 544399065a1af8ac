/* Reading a flow file and checking it (docs/pipelines.md): the TOML, the
 * DOT graph in it, each node's flowunit and keys, the edges' directions,
 * the loops and the cycles. Every refusal names file:line. */
#include "pipeline/pipeline_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const UNIT_NAMES[PL_N_UNITS] = {
    [PL_INFERENCE] = "inference",       [PL_LOOP] = "loop",
    [PL_TOKENIZE] = "tokenize",         [PL_IMAGE_DECODE] = "image_decode",
    [PL_IMAGE_ENCODE] = "image_encode", [PL_RESIZE] = "resize",
    [PL_NORMALIZE] = "normalize",       [PL_FILE_SOURCE] = "file_source",
    [PL_FILE_SINK] = "file_sink",       [PL_DELAY] = "delay",
};

/* Each unit's own keys (after the engine's). */
static const char *const UNIT_KEYS[PL_N_UNITS][4] = {
    [PL_INFERENCE] = {"model", "threads", "outputs"},
    [PL_LOOP] = {"count"},
    [PL_TOKENIZE] = {"max_len", "vocab"},
    [PL_RESIZE] = {"width", "height"},
    [PL_NORMALIZE] = {"mean", "std", "scale"},
    [PL_FILE_SOURCE] = {"dir"},
    [PL_FILE_SINK] = {"dir"},
    [PL_DELAY] = {"sleep_ms", "spin_ms", "io_read_kb"},
};

/* The engine's keys, and what DOT draws with (kept, not read). */
static const char *const ENGINE_KEYS[] = {"flowunit",   "type",       "device",  "deviceid",
                                          "batch_size", "queue_size", "workers", "batch_window_ms",
                                          "label",      "shape",      "color",   "style",
                                          "fillcolor",  "fontname",   "xlabel",  "tooltip"};

const char *pl_unit_name(enum pl_unit u)
{
    return (unsigned)u < PL_N_UNITS ? UNIT_NAMES[u] : "?";
}

const char *pl_attr(const struct pl_node *n, const char *key)
{
    for (size_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].key, key) == 0)
            return n->attrs[i].value;
    return NULL;
}

size_t cp_flow_n_nodes(const struct cp_flow *f)
{
    return f->n_nodes;
}

const char *cp_flow_name(const struct cp_flow *f)
{
    return f->name;
}

int cp_flow_node_index(const struct cp_flow *f, const char *name)
{
    for (size_t i = 0; name && i < f->n_nodes; i++)
        if (strcmp(f->nodes[i].name, name) == 0)
            return (int)i;
    return -1;
}

const char *cp_flow_node_attr(const struct cp_flow *f, size_t i, const char *key)
{
    return i < f->n_nodes ? pl_attr(&f->nodes[i], key) : NULL;
}

void cp_flow_node(const struct cp_flow *f, size_t i, struct cp_flow_node_info *out)
{
    const struct pl_node *n = &f->nodes[i];
    *out = (struct cp_flow_node_info){n->name,       pl_unit_name(n->unit), n->device,
                                      n->batch_size, n->queue_size,         n->workers,
                                      n->line};
}

size_t cp_flow_n_edges(const struct cp_flow *f)
{
    return f->n_edges;
}

void cp_flow_edge(const struct cp_flow *f, size_t i, size_t *from, size_t *to, bool *back)
{
    const struct pl_edge *e = &f->edges[i];
    *from = e->from;
    *to = e->to;
    *back = e->back;
}

void cp_flow_free(struct cp_flow *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_nodes; i++) {
        struct pl_node *n = &f->nodes[i];
        free(n->name);
        for (size_t k = 0; k < n->n_attrs; k++) {
            free(n->attrs[k].key);
            free(n->attrs[k].value);
        }
        free(n->attrs);
        free(n->in);
        free(n->out);
    }
    free(f->nodes);
    free(f->edges);
    free(f->order);
    free(f->path);
    free(f->name);
    free(f->desc);
    free(f);
}

/* ---- keys ---------------------------------------------------------------------------- */

/* An integer key in [lo, hi]; `def` when absent. */
static enum cp_status int_key(const struct cp_flow *f, const struct pl_node *n, const char *key,
                              long lo, long hi, long def, long *out, struct cp_diag *d)
{
    const char *v = pl_attr(n, key);
    *out = def;
    if (!v)
        return CP_OK;
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s:%d: node %s: %s=%s: give a whole number from %ld to %ld", f->path,
                           n->line, n->name, key, v, lo, hi);
    *out = x;
    return CP_OK;
}

static bool known_key(enum pl_unit u, const char *key)
{
    for (size_t i = 0; i < sizeof ENGINE_KEYS / sizeof *ENGINE_KEYS; i++)
        if (strcmp(key, ENGINE_KEYS[i]) == 0)
            return true;
    for (size_t i = 0; i < 4 && UNIT_KEYS[u][i]; i++)
        if (strcmp(key, UNIT_KEYS[u][i]) == 0)
            return true;
    return false;
}

/* path relative to the flow file's folder, as the units open it */
static enum cp_status resolve(const struct cp_flow *f, const char *p, char *out, size_t n,
                              struct cp_diag *d)
{
    int k;
    if (p[0] == '/') {
        k = snprintf(out, n, "%s", p);
    } else {
        const char *slash = strrchr(f->path, '/');
        k = slash ? snprintf(out, n, "%.*s/%s", (int)(slash - f->path), f->path, p)
                  : snprintf(out, n, "%s", p);
    }
    if (k < 0 || (size_t)k >= n)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: the path %s is too long", f->path, p);
    return CP_OK;
}

enum cp_status pl_flow_path(const struct cp_flow *f, const char *p, char *out, size_t n,
                            struct cp_diag *d)
{
    return resolve(f, p, out, n, d);
}

static enum cp_status check_node(struct cp_flow *f, struct pl_node *n, struct cp_diag *d)
{
    const char *fu = pl_attr(n, "flowunit");
    if (!fu)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s:%d: node %s has no flowunit (flowunit=inference, loop, tokenize, "
                           "image_decode, image_encode, resize, normalize, file_source, "
                           "file_sink or delay)",
                           f->path, n->line, n->name);
    int u = -1;
    for (int i = 0; i < PL_N_UNITS; i++)
        if (strcmp(fu, UNIT_NAMES[i]) == 0)
            u = i;
    if (u < 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s:%d: node %s: unknown flowunit '%s' (the built-in ones: inference, "
                           "loop, tokenize, image_decode, image_encode, resize, normalize, "
                           "file_source, file_sink, delay)",
                           f->path, n->line, n->name, fu);
    n->unit = (enum pl_unit)u;
    const char *type = pl_attr(n, "type");
    if (type && strcmp(type, "flowunit") != 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s:%d: node %s: type=%s: only flowunit nodes run here (a flow's "
                           "requests come from file_source and leave through file_sink)",
                           f->path, n->line, n->name, type);
    for (size_t i = 0; i < n->n_attrs; i++)
        if (!known_key(n->unit, n->attrs[i].key))
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s:%d: node %s: unknown key '%s' for flowunit %s", f->path, n->line,
                               n->name, n->attrs[i].key, fu);
    const char *dev = pl_attr(n, "device");
    snprintf(n->device, sizeof n->device, "%s", dev ? dev : "cpu");
    if (strcmp(n->device, "cpu") != 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s:%d: node %s: device=%s: flows run on the CPU target here "
                           "(device=cpu)",
                           f->path, n->line, n->name, n->device);
    long x;
    enum cp_status st = int_key(f, n, "batch_size", 1, 4096, 1, &x, d);
    n->batch_size = (int)x;
    if (st == CP_OK)
        st = int_key(f, n, "queue_size", 1, 1 << 20, 32, &x, d);
    n->queue_size = (int)x;
    if (st == CP_OK)
        st = int_key(f, n, "workers", 1, 256, 1, &x, d);
    n->workers = (int)x;
    if (st == CP_OK)
        st = int_key(f, n, "batch_window_ms", 0, 60000, 0, &x, d);
    if (st == CP_OK && n->unit == PL_LOOP) {
        if (!pl_attr(n, "count"))
            return cp_diag_set(d, CP_ERR_INVALID, "%s:%d: node %s: a loop needs count=N", f->path,
                               n->line, n->name);
        st = int_key(f, n, "count", 1, 1000000, 1, &x, d);
        n->loop_count = (int)x;
        if (st == CP_OK && n->workers != 1)
            st = cp_diag_set(d, CP_ERR_INVALID, "%s:%d: node %s: a loop has one worker", f->path,
                             n->line, n->name);
    }
    /* files and folders the units need */
    static const struct {
        enum pl_unit unit;
        const char *key;
        bool dir;
    } paths[] = {{PL_INFERENCE, "model", false},
                 {PL_FILE_SOURCE, "dir", true},
                 {PL_FILE_SINK, "dir", false}};
    for (size_t i = 0; st == CP_OK && i < sizeof paths / sizeof *paths; i++) {
        if (paths[i].unit != n->unit)
            continue;
        const char *p = pl_attr(n, paths[i].key);
        if (!p)
            return cp_diag_set(d, CP_ERR_INVALID, "%s:%d: node %s: %s needs %s=PATH", f->path,
                               n->line, n->name, fu, paths[i].key);
        char full[1200];
        struct stat sb;
        if ((st = resolve(f, p, full, sizeof full, d)) != CP_OK)
            return st;
        bool there = stat(full, &sb) == 0;
        if (paths[i].dir && (!there || !S_ISDIR(sb.st_mode)))
            return cp_diag_set(d, CP_ERR_INVALID, "%s:%d: node %s: %s=%s: no such folder (%s)",
                               f->path, n->line, n->name, paths[i].key, p, full);
        if (!paths[i].dir && n->unit == PL_INFERENCE && (!there || !S_ISREG(sb.st_mode)))
            return cp_diag_set(d, CP_ERR_INVALID, "%s:%d: node %s: model=%s: no such file (%s)",
                               f->path, n->line, n->name, p, full);
    }
    if (st == CP_OK && n->unit == PL_RESIZE && (!pl_attr(n, "width") || !pl_attr(n, "height")))
        return cp_diag_set(d, CP_ERR_INVALID, "%s:%d: node %s: resize needs width=W and height=H",
                           f->path, n->line, n->name);
    return st;
}

/* ---- the graph ------------------------------------------------------------------------- */

static enum cp_status link_edges(struct cp_flow *f, struct cp_diag *d)
{
    for (size_t i = 0; i < f->n_nodes; i++) {
        f->nodes[i].in = cp_calloc(f->n_edges ? f->n_edges : 1, sizeof(size_t));
        f->nodes[i].out = cp_calloc(f->n_edges ? f->n_edges : 1, sizeof(size_t));
        if (!f->nodes[i].in || !f->nodes[i].out)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    for (size_t e = 0; e < f->n_edges; e++) {
        struct pl_node *a = &f->nodes[f->edges[e].from], *b = &f->nodes[f->edges[e].to];
        if (b->unit == PL_FILE_SOURCE)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s:%d: edge %s -> %s: %s is a source (file_source has no input "
                               "port)",
                               f->path, f->edges[e].line, a->name, b->name, b->name);
        if (a->unit == PL_FILE_SINK)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s:%d: edge %s -> %s: %s is a sink (file_sink has no output port)",
                               f->path, f->edges[e].line, a->name, b->name, a->name);
        a->out[a->n_out++] = e;
        b->in[b->n_in++] = e;
    }
    return CP_OK;
}

/* Whether `to` is reachable from `from` (depth-first, `seen` scratch). */
static bool reaches(const struct cp_flow *f, size_t from, size_t to, bool *seen)
{
    if (from == to)
        return true;
    if (seen[from])
        return false;
    seen[from] = true;
    const struct pl_node *n = &f->nodes[from];
    for (size_t k = 0; k < n->n_out; k++)
        if (reaches(f, f->edges[n->out[k]].to, to, seen))
            return true;
    return false;
}

static enum cp_status check_loops(struct cp_flow *f, struct cp_diag *d)
{
    bool *seen = cp_calloc(f->n_nodes ? f->n_nodes : 1, sizeof *seen);
    if (!seen)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < f->n_nodes; i++) {
        struct pl_node *n = &f->nodes[i];
        if (n->unit != PL_LOOP)
            continue;
        for (size_t k = 0; k < n->n_out; k++) {
            memset(seen, 0, f->n_nodes * sizeof *seen);
            size_t e = n->out[k];
            bool back = reaches(f, f->edges[e].to, i, seen);
            long *slot = back ? &n->body_edge : &n->exit_edge;
            if (*slot >= 0) {
                st = cp_diag_set(d, CP_ERR_INVALID,
                                 "%s:%d: loop %s: more than one edge %s its body (a loop has one "
                                 "edge into the steps it repeats, which lead back to it, and one "
                                 "out of it)",
                                 f->path, n->line, n->name, back ? "into" : "out of");
                break;
            }
            *slot = (long)e;
        }
        if (st == CP_OK && (n->body_edge < 0 || n->exit_edge < 0))
            st = cp_diag_set(d, CP_ERR_INVALID,
                             "%s:%d: loop %s: no edge %s (a loop has one edge into the steps it "
                             "repeats, which lead back to %s:in, and one out of it)",
                             f->path, n->line, n->name,
                             n->body_edge < 0 ? "into a body that leads back to it"
                                              : "out of the loop",
                             n->name);
    }
    free(seen);
    return st;
}

/* Sources first, each node after its inputs, a loop's body edge not
 * counted as an input of the body; a node left over is on a cycle that
 * does not run through a loop. */
static enum cp_status order_nodes(struct cp_flow *f, struct cp_diag *d)
{
    size_t n = f->n_nodes;
    size_t *indeg = cp_calloc(n ? n : 1, sizeof *indeg);
    f->order = cp_calloc(n ? n : 1, sizeof *f->order);
    bool *cut = cp_calloc(f->n_edges ? f->n_edges : 1, sizeof *cut);
    if (!indeg || !f->order || !cut) {
        free(indeg);
        free(cut);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    /* a loop's back edges (its body's way back into it) are cut */
    for (size_t i = 0; i < n; i++) {
        const struct pl_node *lp = &f->nodes[i];
        if (lp->unit != PL_LOOP || lp->body_edge < 0)
            continue;
        bool *seen = cp_calloc(n, sizeof *seen);
        if (!seen) {
            free(indeg);
            free(cut);
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        }
        for (size_t k = 0; k < lp->n_in; k++) {
            size_t e = lp->in[k];
            memset(seen, 0, n * sizeof *seen);
            /* an input edge whose source the body reaches is a way back */
            if (reaches(f, f->edges[lp->body_edge].to, f->edges[e].from, seen))
                cut[e] = true;
        }
        free(seen);
    }
    for (size_t e = 0; e < f->n_edges; e++) {
        f->edges[e].back = cut[e];
        if (!cut[e])
            indeg[f->edges[e].to]++;
    }
    size_t done = 0;
    for (size_t i = 0; i < n; i++)
        if (indeg[i] == 0)
            f->order[done++] = i;
    for (size_t k = 0; k < done; k++) {
        const struct pl_node *v = &f->nodes[f->order[k]];
        for (size_t j = 0; j < v->n_out; j++) {
            size_t e = v->out[j];
            if (!cut[e] && --indeg[f->edges[e].to] == 0)
                f->order[done++] = f->edges[e].to;
        }
    }
    enum cp_status st = CP_OK;
    if (done < n) {
        for (size_t i = 0; i < n; i++)
            if (indeg[i] > 0) {
                st = cp_diag_set(d, CP_ERR_INVALID,
                                 "%s:%d: node %s is on a cycle that does not run through a loop "
                                 "node (repeat steps with flowunit=loop, count=N)",
                                 f->path, f->nodes[i].line, f->nodes[i].name);
                break;
            }
    }
    free(indeg);
    free(cut);
    return st;
}

static enum cp_status check_graph(struct cp_flow *f, struct cp_diag *d)
{
    size_t sources = 0;
    for (size_t i = 0; i < f->n_nodes; i++) {
        const struct pl_node *n = &f->nodes[i];
        if (n->unit == PL_FILE_SOURCE) {
            sources++;
            if (n->n_out == 0)
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "%s:%d: source %s sends nowhere (no edge %s:out -> ...)",
                                   f->path, n->line, n->name, n->name);
        } else if (n->n_in == 0) {
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s:%d: node %s receives nothing (no edge ... -> %s:in)", f->path,
                               n->line, n->name, n->name);
        }
    }
    if (sources == 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: the flow has no source (a node with flowunit=file_source)",
                           f->path);
    enum cp_status st = check_loops(f, d);
    return st == CP_OK ? order_nodes(f, d) : st;
}

/* ---- the file ----------------------------------------------------------------------------- */

/* The file line of the first line of a multi-line string value that starts
 * at `line`: TOML drops the newline right after an opening triple quote. */
static int text_line(const char *path, int line)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return line;
    char buf[4096];
    int at = 0;
    int out = line;
    while (fgets(buf, sizeof buf, fp)) {
        if (++at < line)
            continue;
        size_t n = strlen(buf);
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
            n--;
        if (n >= 3 &&
            (strncmp(buf + n - 3, "'''", 3) == 0 || strncmp(buf + n - 3, "\"\"\"", 3) == 0))
            out = line + 1;
        break;
    }
    fclose(fp);
    return out;
}

enum cp_status cp_flow_load(const char *path, struct cp_flow **out, struct cp_diag *d)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return cp_diag_set(d, CP_ERR_IO, "%s: no such file", path);
    if (!S_ISREG(sb.st_mode))
        return cp_diag_set(d, CP_ERR_IO, "%s: not a file", path);
    struct cp_flow *f = cp_calloc(1, sizeof *f);
    if (!f || !(f->path = cp_strdup(path))) {
        free(f);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    struct cp_toml t;
    enum cp_status st = cp_toml_read(path, &t, d);
    if (st != CP_OK) {
        cp_flow_free(f);
        return st;
    }
    const struct cp_toml_entry *fmt = cp_toml_get(&t, "graph.format"),
                               *conf = cp_toml_get(&t, "graph.graphconf"),
                               *desc = cp_toml_get(&t, "flow.desc");
    if (fmt && (fmt->kind != CP_TOML_STRING || strcmp(fmt->value, "graphviz") != 0))
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s:%d: graph.format = %s: the graph is written in DOT (format = "
                         "\"graphviz\")",
                         path, fmt->line, fmt->value);
    else if (!conf || conf->kind != CP_TOML_STRING)
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: no [graph] graphconf: a flow is a [graph] table whose graphconf is "
                         "a DOT graph ('''digraph name { ... }''')",
                         path);
    if (st == CP_OK && desc && !(f->desc = cp_strdup(desc->value)))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st == CP_OK)
        st = pl_dot_parse(f, conf->value, text_line(path, conf->line), d);
    cp_toml_release(&t);
    for (size_t i = 0; st == CP_OK && i < f->n_nodes; i++)
        st = check_node(f, &f->nodes[i], d);
    if (st == CP_OK && f->n_nodes == 0)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: the graph has no nodes", path);
    if (st == CP_OK)
        st = link_edges(f, d);
    if (st == CP_OK)
        st = check_graph(f, d);
    if (st != CP_OK) {
        cp_flow_free(f);
        return st;
    }
    *out = f;
    return CP_OK;
}
