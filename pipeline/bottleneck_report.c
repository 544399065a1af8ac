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

static void esc(struct cp_buf *o, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            cp_buf_puts(o, "&lt;");
            break;
        case '>':
            cp_buf_puts(o, "&gt;");
            break;
        case '&':
            cp_buf_puts(o, "&amp;");
            break;
        case '"':
            cp_buf_puts(o, "&quot;");
            break;
        default:
            cp_buf_printf(o, "%c", *s);
        }
    }
}

/* A share as a bar cell: the number, and a bar as wide as it. */
static void bar(struct cp_buf *o, double share, const char *colour)
{
    double pct = share > 1 ? 100 : share < 0 ? 0 : 100 * share;
    cp_buf_printf(o,
                  "<td><div class=\"bar\"><span style=\"width:%.0f%%;background:%s\"></span></div>"
                  "%.0f%%</td>",
                  pct, colour, pct);
}

void cp_bottleneck_html(const struct cp_bottleneck *b, const char *trace, struct cp_buf *o)
{
    cp_buf_puts(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>"
                   "node-bottleneck: ");
    esc(o, trace);
    /* colours: Okabe-Ito, safe for colour-blind readers */
    cp_buf_puts(o, "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:72em}"
                   "table{border-collapse:collapse}td,th{padding:.2em .6em;border-bottom:1px "
                   "solid #ddd;text-align:right}td:first-child,th:first-child{text-align:left}"
                   ".bar{display:inline-block;width:5em;height:.7em;background:#eee;margin-right:"
                   ".4em}.bar span{display:block;height:100%}.limit{font-weight:bold}</style>"
                   "</head><body>\n<h1>node-bottleneck: ");
    esc(o, trace);
    cp_buf_printf(o,
                  " (run %lld)</h1>\n<p>%zu requests in %.3f s: %.2f req/s; latency p50 %.2f "
                  "ms, p99 %.2f ms</p>\n",
                  (long long)b->run_id, b->requests, b->window_s, b->throughput, b->p50_ms,
                  b->p99_ms);
    if (b->limiting >= 0) {
        cp_buf_puts(o, "<h2>Limiting node: ");
        esc(o, b->nodes[b->limiting].name);
        cp_buf_printf(o, " (confidence %.0f%%)</h2>\n<p>", 100 * b->confidence);
        esc(o, b->evidence);
        cp_buf_puts(o, "</p>\n");
    } else {
        cp_buf_puts(o, "<h2>Limiting node: none</h2><p>No node is busy half its time.</p>\n");
    }
    cp_buf_puts(o, "<h2>Nodes</h2>\n<table><tr><th>node</th><th>workers</th><th>busy</th>"
                   "<th>starved</th><th>blocked</th><th>on-CPU</th><th>waiting for a CPU</th>"
                   "<th>off-CPU</th><th>capacity (req/s)</th><th>deepest queue</th></tr>\n");
    for (size_t i = 0; i < b->n_nodes; i++) {
        const struct cp_bottleneck_node *n = &b->nodes[i];
        cp_buf_printf(o, "<tr%s><td>", (int)i == b->limiting ? " class=\"limit\"" : "");
        esc(o, n->name);
        cp_buf_printf(o, "</td><td>%d</td>", n->workers);
        bar(o, n->util, "#0072B2");
        bar(o, n->starved, "#56B4E9");
        bar(o, n->blocked, "#D55E00");
        bar(o, n->cpu_share, "#009E73");
        bar(o, n->runq_share, "#E69F00");
        bar(o, n->offcpu_share, "#CC79A7");
        if (n->source || n->capacity > 1e12)
            cp_buf_puts(o, "<td>-</td>");
        else
            cp_buf_printf(o, "<td>%.1f</td>", n->capacity);
        cp_buf_printf(o, "<td>%u</td></tr>\n", n->max_depth);
    }
    cp_buf_puts(o, "</table>\n<h2>Problems</h2>\n");
    if (b->n_problems == 0)
        cp_buf_puts(o, "<p>None found.</p>\n");
    else
        cp_buf_puts(o, "<ul>\n");
    for (size_t i = 0; i < b->n_problems; i++) {
        const struct cp_bottleneck_problem *p = &b->problems[i];
        cp_buf_puts(o, "<li><b>");
        esc(o, p->kind);
        cp_buf_puts(o, "</b>: ");
        esc(o, p->text);
        if (p->fix_key[0] && p->node >= 0) {
            cp_buf_puts(o, " <code>[fix: ");
            esc(o, b->nodes[p->node].name);
            cp_buf_printf(o, " %s=%ld]</code>", p->fix_key, p->fix_value);
        }
        cp_buf_puts(o, "</li>\n");
    }
    if (b->n_problems)
        cp_buf_puts(o, "</ul>\n");
    const struct {
        const char *what;
        int64_t request;
        const struct cp_bottleneck_step *s;
        size_t n;
    } paths[] = {{"median", b->p50_request, b->p50_path, b->n_p50_path},
                 {"p99", b->p99_request, b->p99_path, b->n_p99_path}};
    for (size_t k = 0; k < 2; k++) {
        cp_buf_printf(o,
                      "<h2>Path of the %s request (#%lld)</h2>\n<table><tr><th>node</th>"
                      "<th>queue (ms)</th><th>service (ms)</th><th>push (ms)</th></tr>\n",
                      paths[k].what, (long long)paths[k].request);
        for (size_t i = 0; i < paths[k].n; i++) {
            const struct cp_bottleneck_step *s = &paths[k].s[i];
            cp_buf_puts(o, "<tr><td>");
            esc(o, b->nodes[s->node].name);
            cp_buf_printf(o, "</td><td>%.2f</td><td>%.2f</td><td>%.2f</td></tr>\n", s->queue_ms,
                          s->service_ms, s->push_ms);
        }
        cp_buf_puts(o, "</table>\n");
    }
    cp_buf_puts(o, "</body></html>\n");
}
