/* A pipeline run read back from its trace, for node-bottleneck
 * (bottleneck.c) and what-if (whatif.c): its flow, nodes and edges, every
 * node call, the requests' latencies, the host's cores. */
#include "pipeline/pipeline_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum cp_status pl_recorded_read(const char *trace, int64_t run, struct pl_recorded *r,
                                struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    r->run_id = -1;
    struct cp_trace_store *s = NULL;
    enum cp_status st = cp_trace_store_open_ro(trace, &s, d);
    if (st != CP_OK)
        return st;
    st = cp_trace_store_resolve_run(s, run, &r->run_id, d);
    if (st == CP_OK)
        st = cp_trace_query_pipeline(s, r->run_id, &r->pl, d);
    if (st == CP_OK && r->pl.n_nodes == 0)
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: run %lld is not a pipeline run (record one with `cannprof pipeline "
                         "run FLOW.toml --trace %s`)",
                         trace, (long long)r->run_id, trace);
    if (st == CP_OK)
        st = cp_trace_query_node_calls(s, r->run_id, &r->calls, &r->n_calls, d);
    if (st == CP_OK)
        st = cp_trace_query_samples(s, r->run_id, &r->samples, &r->n_samples, d);
    if (st == CP_OK)
        st = cp_trace_query_run_counters(s, r->run_id, "model_run:", &r->model_runs,
                                         &r->n_model_runs, d);
    struct cp_trace_run row;
    memset(&row, 0, sizeof row);
    if (st == CP_OK && (st = cp_trace_query_run(s, r->run_id, &row, d)) == CP_OK)
        snprintf(r->flow, sizeof r->flow, "%s", row.model_path);
    cp_trace_run_release(&row);
    if (st == CP_OK && (r->n_calls == 0 || r->n_samples == 0))
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: run %lld has no node calls or no requests", trace,
                         (long long)r->run_id);
    struct cp_trace_host host;
    memset(&host, 0, sizeof host);
    if (st == CP_OK && cp_trace_query_host(s, &host, d) == CP_OK)
        r->cores = host.cores;
    cp_trace_host_release(&host);
    cp_trace_store_close(s);
    if (st != CP_OK)
        pl_recorded_release(r);
    return st;
}

void pl_recorded_release(struct pl_recorded *r)
{
    cp_trace_pipeline_release(&r->pl);
    cp_trace_node_calls_free(r->calls, r->n_calls);
    free(r->samples);
    cp_trace_counters_free(r->model_runs, r->n_model_runs);
    r->model_runs = NULL;
    r->n_model_runs = 0;
    r->calls = NULL;
    r->samples = NULL;
    r->n_calls = r->n_samples = 0;
}
