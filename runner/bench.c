/* Benchmarking model files (runner/bench.h). */
#include "runner/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cp_bench_request_init(struct cp_bench_request *r)
{
    memset(r, 0, sizeof *r);
    r->session[0].buffer_optimize = r->session[1].buffer_optimize = -1;
    r->same_inputs = true;
    cp_measure_policy_init(&r->policy);
    cp_verdict_opts_init(&r->verdict);
}

void cp_bench_result_release(struct cp_bench_result *res)
{
    cp_measurement_release(&res->m);
    memset(res, 0, sizeof *res);
}

static void config_id_of(const struct cp_session *s, char id[17])
{
    const struct cp_om_meta *meta = cp_model_meta(s->model);
    id[0] = '\0';
    if (meta && !s->from_onnx)
        cp_convert_config_id(&meta->config, id);
}

/* The trace store, and a recorder per model with the outermost range
 * "cannprof bench" open. The store is opened first: a bad path should not
 * cost a whole run. */
static enum cp_status open_trace(const char *path, size_t n, struct cp_trace_store **store,
                                 struct cp_trace_recorder **recs, struct cp_diag *d)
{
    enum cp_status st = cp_trace_store_open(path, store, d);
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        recs[i] = cp_trace_recorder_create(1 << 16);
        if (!recs[i] || cp_trace_push(recs[i], "cannprof bench") != CP_OK)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory for the trace recorder");
    }
    return st;
}

enum cp_status cp_bench_models(const struct cp_bench_request *req, struct cp_bench_result *res,
                               struct cp_diag *d)
{
    memset(res, 0, sizeof *res);
    size_t n = req->models[1] ? 2 : 1;
    res->n_models = n;
    struct cp_session sess[2];
    memset(sess, 0, sizeof sess);
    struct cp_trace_recorder *rec[2] = {NULL, NULL};
    struct cp_trace_store *store = NULL;
    struct cp_perf *perf = NULL;
    enum cp_status st = CP_OK;
    if (!req->models[0])
        return cp_diag_set(d, CP_ERR_INVALID, "bench: no model");
    if (req->trace_path) {
        st = open_trace(req->trace_path, n, &store, rec, d);
        /* Counters before the sessions: only the threads created after
         * them (the runtime's OpenMP workers) inherit them. One model only:
         * with two, they would count both. */
        if (st == CP_OK && req->perf && n == 1)
            st = cp_perf_open(&perf, d);
    }
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        struct cp_session_opts so = req->session[i];
        so.model_path = req->models[i];
        so.trace = rec[i];
        st = cp_session_open(&sess[i], &so, d);
    }
    if (st == CP_OK && n == 2 && req->same_inputs)
        st = cp_measure_check_inputs(sess[0].plan, sess[1].plan, req->models[0], req->models[1], d);
    struct cp_session *ptrs[2] = {&sess[0], &sess[1]};
    if (st == CP_OK && (n == 1 || req->same_inputs))
        st = cp_measure_feed_inputs(ptrs, n, req->inputs, req->n_inputs, req->seed, d);
    for (size_t i = 0; i < n && st == CP_OK && n == 2 && !req->same_inputs; i++)
        st = cp_session_set_inputs(&sess[i], req->inputs, req->n_inputs, req->seed, d);
    if (st != CP_OK)
        goto out;

    res->threads = cp_runtime_threads(sess[0].rt);
    struct cp_measure_policy p = req->policy;
    p.threads = res->threads;
    if (n == 2 && cp_runtime_threads(sess[1].rt) > p.threads)
        p.threads = cp_runtime_threads(sess[1].rt);
    if (n == 2 && p.min_rounds < 2)
        p.min_rounds = 2;
    if (perf)
        p.perf = perf;
    struct cp_measure_subject subj[2];
    for (size_t i = 0; i < n; i++)
        subj[i] = cp_measure_plan_subject(sess[i].plan, rec[i]);
    if ((st = cp_measure(subj, n, &p, &res->m, d)) != CP_OK)
        goto out;

    res->peak_rss = cp_peak_rss_bytes();
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        if ((st = cp_measurement_summary(&res->m, i, false, &res->all[i], d)) == CP_OK)
            st = cp_measurement_summary(&res->m, i, true, &res->undisturbed[i], d);
        res->items[i] = cp_session_items_per_run(sess[i].plan, req->session[i].batch);
        res->items_per_s[i] =
            res->all[i].mean > 0 ? (double)res->items[i] * 1e9 / res->all[i].mean : 0;
        cp_plan_memory(sess[i].plan, &res->mem[i]);
        config_id_of(&sess[i], res->config_id[i]);
    }
    if (st == CP_OK && n == 2)
        st = cp_measurement_compare(&res->m, 0, 1, 0, 0, &req->verdict, &res->cmp,
                                    &res->cmp_undisturbed, d);
    if (st == CP_OK && store) {
        struct cp_measure_record r[2];
        for (size_t i = 0; i < n; i++) {
            cp_trace_pop(rec[i]); /* "cannprof bench" */
            r[i] = (struct cp_measure_record){
                .session = &sess[i],
                .model_path = req->models[i],
                .batch = req->session[i].batch,
                .trace = rec[i],
                .perf = i == 0 ? perf : NULL,
            };
        }
        st = cp_measure_store(store,
                              req->kind ? req->kind
                              : n == 2  ? "bench-ab"
                                        : "bench",
                              r, &res->m, res->run_ids, d);
    }
out:
    for (size_t i = 0; i < n; i++) {
        cp_session_close(&sess[i]);
        cp_trace_recorder_free(rec[i]);
    }
    cp_perf_close(perf);
    cp_trace_store_close(store);
    return st;
}
