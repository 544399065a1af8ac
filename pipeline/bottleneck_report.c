/* node-bottleneck's report (pipeline/pipeline.h): the same analysis as
 * text or Markdown, JSON, and a self-contained HTML page (no scripts,
 * fonts or styles fetched: one file to pass around). */
#include "pipeline/pipeline_internal.h"
#include "core/json.h"

#include <stdio.h>
#include <string.h>

void cp_bottleneck_text(const struct cp_bottleneck *b, const char *trace, bool md, struct cp_buf *o)
{
    const char *h = md ? "## " : "";
    cp_buf_printf(o, "%snode-bottleneck: %s (run %lld)\n\n", md ? "# " : "", trace,
                  (long long)b->run_id);
    cp_buf_printf(o, "%zu requests in %.3f s: %.2f req/s; latency p50 %.2f ms, p99 %.2f ms\n\n",
                  b->requests, b->window_s, b->throughput, b->p50_ms, b->p99_ms);
    if (b->limiting >= 0)
        cp_buf_printf(o, "%slimiting node: %s (confidence %.0f%%)\n\n%s\n\n", h,
                      b->nodes[b->limiting].name, 100 * b->confidence, b->evidence);
    else
        cp_buf_printf(o, "%slimiting node: none (no node is busy half its time)\n\n", h);
    cp_buf_printf(o, "%snodes\n\n", h);
    cp_buf_printf(o, "%s%-18s %5s %6s %7s %7s %6s %6s %7s %9s %6s\n", md ? "    " : "  ", "node",
                  "wrk", "busy", "starved", "blocked", "cpu", "runq", "off-cpu", "req/s cap",
                  "queue");
    for (size_t i = 0; i < b->n_nodes; i++) {
        const struct cp_bottleneck_node *n = &b->nodes[i];
        char cap[32];
        if (n->capacity > 1e9 || n->source)
            snprintf(cap, sizeof cap, "-");
        else
            snprintf(cap, sizeof cap, "%.1f", n->capacity);
        cp_buf_printf(o, "%s%-18s %5d %5.0f%% %6.0f%% %6.0f%% %5.0f%% %5.0f%% %6.0f%% %9s %6u\n",
                      md ? "    " : "  ", n->name, n->workers, 100 * n->util, 100 * n->starved,
                      100 * n->blocked, 100 * n->cpu_share, 100 * n->runq_share,
                      100 * n->offcpu_share, cap, n->max_depth);
    }
    cp_buf_printf(o, "\n%sproblems\n\n", h);
    if (b->n_problems == 0)
        cp_buf_printf(o, "none found\n");
    for (size_t i = 0; i < b->n_problems; i++) {
        const struct cp_bottleneck_problem *p = &b->problems[i];
        cp_buf_printf(o, "- %s: %s", p->kind, p->text);
        if (p->fix_key[0] && p->node >= 0)
            cp_buf_printf(o, " [fix: %s %s=%ld]", b->nodes[p->node].name, p->fix_key, p->fix_value);
        cp_buf_printf(o, "\n");
    }
    const struct {
        const char *what;
        int64_t request;
        const struct cp_bottleneck_step *s;
        size_t n;
    } paths[] = {{"median", b->p50_request, b->p50_path, b->n_p50_path},
                 {"p99", b->p99_request, b->p99_path, b->n_p99_path}};
    for (size_t k = 0; k < 2; k++) {
        cp_buf_printf(o, "\n%spath of the %s request (#%lld)\n\n", h, paths[k].what,
                      (long long)paths[k].request);
        for (size_t i = 0; i < paths[k].n; i++) {
            const struct cp_bottleneck_step *s = &paths[k].s[i];
            cp_buf_printf(o, "%s%-18s queue %8.2f ms  service %8.2f ms  push %7.2f ms\n",
                          md ? "    " : "  ", b->nodes[s->node].name, s->queue_ms, s->service_ms,
                          s->push_ms);
        }
    }
}

static json_t *path_json(const struct cp_bottleneck *b, const struct cp_bottleneck_step *s,
                         size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *o = json_object();
        if (!o || !cp_json_set_str(o, "node", b->nodes[s[i].node].name) ||
            !cp_json_set_num(o, "queue_ms", s[i].queue_ms) ||
            !cp_json_set_num(o, "service_ms", s[i].service_ms) ||
            !cp_json_set_num(o, "push_ms", s[i].push_ms) ||
            !cp_json_set_int(o, "batch", s[i].batch) || !cp_json_push(a, o)) {
            json_decref(o);
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *cp_bottleneck_json(const struct cp_bottleneck *b, const char *trace)
{
    json_t *j = json_object(), *nodes = json_array(), *probs = json_array();
    bool ok = j && nodes && probs && cp_json_set_str(j, "trace", trace) &&
              cp_json_set_int(j, "run", b->run_id) &&
              cp_json_set_int(j, "requests", (int64_t)b->requests) &&
              cp_json_set_num(j, "window_s", b->window_s) &&
              cp_json_set_num(j, "throughput", b->throughput) &&
              cp_json_set_num(j, "latency_p50_ms", b->p50_ms) &&
              cp_json_set_num(j, "latency_p99_ms", b->p99_ms);
    if (ok && b->limiting >= 0)
        ok = cp_json_set_str(j, "limiting_node", b->nodes[b->limiting].name) &&
             cp_json_set_num(j, "confidence", b->confidence) &&
             cp_json_set_num(j, "ceiling", b->ceiling) &&
             cp_json_set_str(j, "evidence", b->evidence);
    else if (ok)
        ok = cp_json_set(j, "limiting_node", json_null());
    for (size_t i = 0; ok && i < b->n_nodes; i++) {
        const struct cp_bottleneck_node *n = &b->nodes[i];
        json_t *o = json_object();
        ok = o && cp_json_set_str(o, "name", n->name) &&
             cp_json_set_str(o, "flowunit", n->flowunit) &&
             cp_json_set_int(o, "workers", n->workers) &&
             cp_json_set_int(o, "calls", (int64_t)n->calls) &&
             cp_json_set_int(o, "items", (int64_t)n->items) &&
             cp_json_set_num(o, "utilization", n->util) &&
             cp_json_set_num(o, "starved", n->starved) &&
             cp_json_set_num(o, "blocked", n->blocked) &&
             cp_json_set_num(o, "on_cpu", n->cpu_share) &&
             cp_json_set_num(o, "waiting_for_cpu", n->runq_share) &&
             cp_json_set_num(o, "off_cpu", n->offcpu_share) &&
             cp_json_set_num(o, "mean_batch", n->mean_batch) &&
             cp_json_set_num(o, "visits_per_request", n->visits) &&
             cp_json_set_num(o, "mean_queue_depth", n->mean_depth) &&
             cp_json_set_int(o, "max_queue_depth", n->max_depth) &&
             (n->model_run < 0 || cp_json_set_int(o, "model_run", n->model_run)) &&
             (n->source || n->capacity > 1e12 ? cp_json_set(o, "capacity", json_null())
                                              : cp_json_set_num(o, "capacity", n->capacity));
        if (!ok || !cp_json_push(nodes, o)) {
            json_decref(o);
            ok = false;
        }
    }
    for (size_t i = 0; ok && i < b->n_problems; i++) {
        const struct cp_bottleneck_problem *p = &b->problems[i];
        json_t *o = json_object();
        ok = o && cp_json_set_str(o, "kind", p->kind) &&
             (p->node >= 0 ? cp_json_set_str(o, "node", b->nodes[p->node].name)
                           : cp_json_set(o, "node", json_null())) &&
             cp_json_set_str(o, "text", p->text);
        if (ok && p->fix_key[0])
            ok = cp_json_set_str(o, "fix_key", p->fix_key) &&
                 cp_json_set_int(o, "fix_value", p->fix_value);
        if (!ok || !cp_json_push(probs, o)) {
            json_decref(o);
            ok = false;
        }
    }
    json_t *p50 = ok ? path_json(b, b->p50_path, b->n_p50_path) : NULL,
           *p99 = ok ? path_json(b, b->p99_path, b->n_p99_path) : NULL;
    if (ok && p50 && p99) {
        json_t *paths = json_object();
        ok = paths && cp_json_set(paths, "p50", p50) && cp_json_set(paths, "p99", p99) &&
             cp_json_set(j, "request_paths", paths);
        p50 = p99 = NULL;
    }
    json_decref(p50);
    json_decref(p99);
    if (ok && cp_json_set(j, "nodes", nodes))
        nodes = NULL;
    if (ok && cp_json_set(j, "problems", probs))
        probs = NULL;
    json_decref(nodes);
    json_decref(probs);
    if (!ok) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* ---- HTML ------------------------------------------------------------------------------ */

struct cp_doc *cp_bottleneck_doc(const struct cp_bottleneck *b, const char *trace)
{
    char title[1200];
    snprintf(title, sizeof title, "node-bottleneck: %.1100s", trace);
    struct cp_doc *d = cp_doc_new(title);
    if (!d)
        return NULL;
    char line[1600];
    snprintf(line, sizeof line,
             "Run %lld of %s: %zu requests in %.3f s, %.2f requests/s; latency p50 %.2f ms, "
             "p99 %.2f ms.",
             (long long)b->run_id, b->flow, b->requests, b->window_s, b->throughput, b->p50_ms,
             b->p99_ms);
    cp_doc_text(d, line);
    cp_doc_heading(d, 1, "Limiting node");
    if (b->limiting >= 0) {
        snprintf(line, sizeof line, "%s (confidence %.0f%%): %s", b->nodes[b->limiting].name,
                 100 * b->confidence, b->evidence);
        cp_doc_text(d, line);
    } else {
        cp_doc_text(d, "None: no node is busy half its time.");
    }
    /* where each node's worker time went */
    size_t n = b->n_nodes;
    const char **labels = cp_calloc(n ? n : 1, sizeof *labels);
    double *v = cp_calloc(n ? n * 5 : 1, sizeof *v);
    if (labels && v) {
        for (size_t i = 0; i < n; i++) {
            const struct cp_bottleneck_node *x = &b->nodes[i];
            labels[i] = x->name;
            v[i * 5 + 0] = 100 * x->util * x->cpu_share;
            v[i * 5 + 1] = 100 * x->util * x->runq_share;
            v[i * 5 + 2] = 100 * x->util * x->offcpu_share;
            v[i * 5 + 3] = 100 * x->starved;
            v[i * 5 + 4] = 100 * x->blocked;
        }
        static const char *const parts[] = {"on-CPU", "waiting for a CPU", "off-CPU",
                                            "starved (input empty)", "blocked (output full)"};
        struct cp_chart c = {.kind = CP_CHART_STACKED,
                             .title = "Where each node's worker time went",
                             .unit = "%",
                             .labels = labels,
                             .n = n,
                             .values = v,
                             .part_names = parts,
                             .n_parts = 5,
                             .note = "shares of the node's workers x the run's window"};
        cp_doc_chart(d, &c);
    }
    free(labels);
    free(v);
    cp_doc_heading(d, 1, "Nodes");
    static const char *const head[] = {"node",    "flowunit",  "workers",  "busy",
                                       "starved", "blocked",   "on-CPU",   "run queue",
                                       "off-CPU", "req/s cap", "queue max"};
    size_t cols = sizeof head / sizeof *head;
    char **cells = cp_calloc((n + 1) * cols, sizeof *cells);
    char *store = cp_calloc((n + 1) * cols, 48);
    if (cells && store) {
        for (size_t c = 0; c < cols; c++)
            cells[c] = (char *)head[c];
        for (size_t i = 0; i < n; i++) {
            const struct cp_bottleneck_node *x = &b->nodes[i];
            char *r = store + (i + 1) * cols * 48;
            for (size_t c = 0; c < cols; c++)
                cells[(i + 1) * cols + c] = r + c * 48;
            snprintf(r + 0 * 48, 48, "%.47s", x->name);
            snprintf(r + 1 * 48, 48, "%.47s", x->flowunit);
            snprintf(r + 2 * 48, 48, "%d", x->workers);
            snprintf(r + 3 * 48, 48, "%.0f%%", 100 * x->util);
            snprintf(r + 4 * 48, 48, "%.0f%%", 100 * x->starved);
            snprintf(r + 5 * 48, 48, "%.0f%%", 100 * x->blocked);
            snprintf(r + 6 * 48, 48, "%.0f%%", 100 * x->cpu_share);
            snprintf(r + 7 * 48, 48, "%.0f%%", 100 * x->runq_share);
            snprintf(r + 8 * 48, 48, "%.0f%%", 100 * x->offcpu_share);
            if (x->capacity > 1e9 || x->source)
                snprintf(r + 9 * 48, 48, "-");
            else
                snprintf(r + 9 * 48, 48, "%.1f", x->capacity);
            snprintf(r + 10 * 48, 48, "%u", x->max_depth);
        }
        cp_doc_table(d, cols, n + 1, (const char *const *)cells);
    }
    free(cells);
    free(store);
    cp_doc_heading(d, 1, "Problems");
    if (b->n_problems == 0)
        cp_doc_text(d, "None found.");
    for (size_t i = 0; i < b->n_problems; i++) {
        const struct cp_bottleneck_problem *p = &b->problems[i];
        if (p->fix_key[0] && p->node >= 0)
            snprintf(line, sizeof line, "%s: %s [fix: %s %s=%ld]", p->kind, p->text,
                     b->nodes[p->node].name, p->fix_key, p->fix_value);
        else
            snprintf(line, sizeof line, "%s: %s", p->kind, p->text);
        cp_doc_text(d, line);
    }
    const struct {
        const char *what;
        int64_t request;
        const struct cp_bottleneck_step *s;
        size_t n;
    } paths[] = {{"median", b->p50_request, b->p50_path, b->n_p50_path},
                 {"p99", b->p99_request, b->p99_path, b->n_p99_path}};
    for (size_t k = 0; k < 2; k++) {
        snprintf(line, sizeof line, "Path of the %s request (#%lld)", paths[k].what,
                 (long long)paths[k].request);
        cp_doc_heading(d, 2, line);
        size_t pn = paths[k].n;
        static const char *const ph[] = {"node", "queue ms", "service ms", "push ms"};
        char **pc = cp_calloc((pn + 1) * 4, sizeof *pc);
        char *ps = cp_calloc((pn + 1) * 4, 48);
        if (!pc || !ps) {
            free(pc);
            free(ps);
            continue;
        }
        for (size_t c = 0; c < 4; c++)
            pc[c] = (char *)ph[c];
        for (size_t i = 0; i < pn; i++) {
            const struct cp_bottleneck_step *st = &paths[k].s[i];
            char *r = ps + (i + 1) * 4 * 48;
            for (size_t c = 0; c < 4; c++)
                pc[(i + 1) * 4 + c] = r + c * 48;
            snprintf(r, 48, "%.47s", b->nodes[st->node].name);
            snprintf(r + 48, 48, "%.2f", st->queue_ms);
            snprintf(r + 96, 48, "%.2f", st->service_ms);
            snprintf(r + 144, 48, "%.2f", st->push_ms);
        }
        cp_doc_table(d, 4, pn + 1, (const char *const *)pc);
        free(pc);
        free(ps);
    }
    return d;
}
