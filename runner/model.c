/* Models: a .om's bytes, kept for the model's life, and the graph read from
 * them. Both ways in (a file, or a graph built in memory) end as the same
 * thing, a buffer in .om format, so plans are built one way only. */
#include "runner/runner_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many unsupported nodes a load error lists before it summarises. */
#define MAX_LISTED_NODES 20

/* Every node must have a kernel (views excepted: they run no kernel). All
 * offenders are reported at once, so one attempt shows the whole gap. */
static enum cp_status check_kernels(const struct cp_model *m, struct cp_diag *d)
{
    struct cp_buf list;
    cp_buf_init(&list);
    size_t missing = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(m->g); i++) {
        const struct cp_node *n = cp_graph_node(m->g, (int32_t)i);
        if (n->dead || cp_op_is_view(n->op) || cp_kernel_select(m->g, n, NULL, true, NULL))
            continue;
        if (missing < MAX_LISTED_NODES)
            cp_buf_printf(&list, "%s'%s' (%s%s%s)", missing ? ", " : "", n->name,
                          n->domain && n->domain[0] ? n->domain : "",
                          n->domain && n->domain[0] ? "::" : "", n->op_type);
        missing++;
    }
    enum cp_status st = CP_OK;
    if (cp_buf_status(&list) != CP_OK)
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory checking kernels", m->name);
    else if (missing > MAX_LISTED_NODES)
        st = cp_diag_set(d, CP_ERR_UNSUPPORTED, "%s: no kernel for node %s, and %zu more", m->name,
                         list.data, missing - MAX_LISTED_NODES);
    else if (missing)
        st = cp_diag_set(d, CP_ERR_UNSUPPORTED, "%s: no kernel for node %s", m->name, list.data);
    cp_buf_release(&list);
    return st;
}

/* Read the model's graph and metadata from its bytes, then check kernels. */
static enum cp_status open_bytes(struct cp_model *m, struct cp_diag *d)
{
    enum cp_status st = cp_om_read_buffer(m->bytes, m->len, m->name, &m->g, &m->meta, d);
    if (st != CP_OK)
        return st;
    return check_kernels(m, d);
}

enum cp_status cp_model_load(struct cp_runtime *rt, const char *path, struct cp_model **out,
                             struct cp_diag *d)
{
    *out = NULL;
    uint64_t t0 = cp_clock_ns();
    struct cp_model *m = calloc(1, sizeof *m);
    if (!m || !(m->name = cp_strdup(path))) {
        free(m);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory loading the model", path);
    }
    m->rt = rt;
    enum cp_status st = cp_mmap_open(path, &m->map, d);
    if (st != CP_OK)
        goto out_free_model;
    m->bytes = m->map.data;
    m->len = m->map.len;
    if ((st = open_bytes(m, d)) != CP_OK)
        goto out_free_model;
    cp_runtime_record(rt, rt->names.load, -1, t0, cp_clock_ns());
    *out = m;
    return CP_OK;

out_free_model:
    cp_model_free(m);
    return st;
}

enum cp_status cp_model_from_graph(struct cp_runtime *rt, struct cp_graph *g,
                                   const struct cp_om_meta *meta, struct cp_model **out,
                                   struct cp_diag *d)
{
    *out = NULL;
    uint64_t t0 = cp_clock_ns();
    enum cp_status st = CP_OK;
    struct cp_model *m = calloc(1, sizeof *m);
    char name[300];
    const char *gname = cp_graph_name(g);
    if (gname[0])
        snprintf(name, sizeof name, "graph '%s'", gname);
    else
        snprintf(name, sizeof name, "(graph)");
    if (!m || !(m->name = cp_strdup(name))) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory building the model", name);
        goto out_free_graph;
    }
    m->rt = rt;

    /* A graph built in memory has no metadata yet: describe it as a
     * default conversion would. */
    struct cp_om_meta dflt;
    memset(&dflt, 0, sizeof dflt);
    dflt.format_version = CP_OM_FORMAT_VERSION;
    dflt.tool_version = (char *)CP_VERSION_STRING;
    dflt.source_path = (char *)"";
    dflt.source_hash = (char *)"";
    dflt.target = (char *)"cpu";
    cp_convert_config_init(&dflt.config);
    size_t len = 0;
    struct cp_diag local;
    cp_diag_init(&local);
    st = cp_om_write_buffer(g, meta ? meta : &dflt, &m->owned, &len, &local);
    if (st != CP_OK) {
        cp_diag_set(d, st, "%s: %s", name, local.msg);
        goto out_free_graph;
    }
    m->bytes = m->owned;
    m->len = len;
    if ((st = open_bytes(m, d)) != CP_OK)
        goto out_free_graph;
    cp_graph_free(g);
    cp_runtime_record(rt, rt->names.load, -1, t0, cp_clock_ns());
    *out = m;
    return CP_OK;

out_free_graph:
    cp_graph_free(g);
    cp_model_free(m);
    return st;
}

void cp_model_free(struct cp_model *m)
{
    if (!m)
        return;
    cp_graph_free(m->g);
    cp_om_meta_release(&m->meta);
    cp_mmap_close(&m->map);
    free(m->owned);
    free(m->name);
    free(m);
}

const struct cp_graph *cp_model_graph(const struct cp_model *m)
{
    return m->g;
}

const struct cp_om_meta *cp_model_meta(const struct cp_model *m)
{
    return &m->meta;
}
