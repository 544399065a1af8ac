/* cannprof pipeline: flows in ModelBox's format (docs/pipelines.md).
 * `pipeline run FLOW.toml` runs one and prints each node's time split;
 * `pipeline check FLOW.toml` reads and checks it without running. */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json.h"
#include "pipeline/pipeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_REQUESTS = 1, OPT_TRACE, OPT_NO_MODEL_LAYER };

static const struct cp_opt run_own[] = {
    {"no-model-layer", 0, CP_OPT_FLAG, OPT_NO_MODEL_LAYER, NULL,
     "with --trace: leave out the runtime and kernel layers of inference nodes"},
    {"requests", 0, CP_OPT_VALUE, OPT_REQUESTS, "N",
     "the sources send N requests (1 .. 10000000), cycling over their files"},
    {"trace", 0, CP_OPT_VALUE, OPT_TRACE, "T.db",
     "record the run: every node call, the requests' latencies, the model layer"},
};

static const struct cp_opt_use run_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_DURATION, "the sources send for this long (\"30s\", \"2m\") instead of --requests"},
    {CP_SO_JSON, "print the run as JSON: requests, latency, throughput, each node's figures"},
};

static const struct cp_command_opts RUN = {
    .cmd = "pipeline run",
    .own = run_own,
    .n_own = sizeof run_own / sizeof run_own[0],
    .shared = run_shared,
    .n_shared = sizeof run_shared / sizeof run_shared[0],
    .usage = "usage: cannprof pipeline run FLOW.toml [--requests N | --duration D] [--trace T.db]\n"
             "                             [--json]\n\n"
             "Run a flow written in ModelBox's format: a TOML file whose [graph] graphconf is\n"
             "a DOT graph of flowunits (docs/pipelines.md). Each node runs `workers` threads\n"
             "on a bounded input queue of `queue_size` items and takes up to `batch_size` at a\n"
             "time; a full queue blocks the node that pushes to it. Prints per node its calls,\n"
             "busy time split into on-CPU, waiting for a CPU and off-CPU (I/O, sleeps), the\n"
             "time it was starved (its queue empty) and blocked (pushing to a full queue),\n"
             "and the requests' latency and throughput.\n",
    .exit_codes = "0 ran, 2 bad usage or a bad flow (the message names file:line), 3 "
                  "environment failure (a unit or the trace store failed)",
};

static const struct cp_opt_use check_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print the flow's nodes as JSON"},
};

static const struct cp_command_opts CHECK = {
    .cmd = "pipeline check",
    .shared = check_shared,
    .n_shared = sizeof check_shared / sizeof check_shared[0],
    .usage = "usage: cannprof pipeline check FLOW.toml [--json]\n\n"
             "Read and check a flow without running it: its TOML, its DOT graph, every\n"
             "node's flowunit and keys, ports, loops and cycles, and that its models and\n"
             "folders exist. Lists the nodes in the order requests reach them.\n",
    .exit_codes = "0 the flow is good, 2 it is not (the message names file:line)",
};

static json_t *nodes_json(const struct cp_flow *f, const struct cp_flow_run_result *r)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < cp_flow_n_nodes(f); i++) {
        struct cp_flow_node_info ni;
        cp_flow_node(f, i, &ni);
        json_t *o = json_object();
        bool ok = o && cp_json_set_str(o, "name", ni.name) &&
                  cp_json_set_str(o, "flowunit", ni.flowunit) &&
                  cp_json_set_int(o, "workers", ni.workers) &&
                  cp_json_set_int(o, "batch_size", ni.batch_size) &&
                  cp_json_set_int(o, "queue_size", ni.queue_size) &&
                  cp_json_set_int(o, "line", ni.line);
        if (ok && r && r->nodes) {
            const struct cp_flow_node_stats *s = &r->nodes[i];
            ok = cp_json_set_int(o, "calls", (int64_t)s->calls) &&
                 cp_json_set_int(o, "items", (int64_t)s->items) &&
                 cp_json_set_num(o, "busy_s", s->busy_s) && cp_json_set_num(o, "cpu_s", s->cpu_s) &&
                 cp_json_set_num(o, "runq_s", s->runq_s) &&
                 cp_json_set_num(o, "offcpu_s", s->offcpu_s) &&
                 cp_json_set_num(o, "starved_s", s->starved_s) &&
                 cp_json_set_num(o, "blocked_s", s->blocked_s) &&
                 cp_json_set_int(o, "max_queue_depth", (int64_t)s->max_depth);
        }
        if (!ok || !cp_json_push(a, o)) {
            json_decref(o);
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static int cmd_check(int argc, char **argv)
{
    const char *cmd = CHECK.cmd;
    struct cp_args a;
    int rc = 0;
    if (!cp_cli_parse_sub(&CHECK, 1, argc, argv, &a, &rc))
        return rc;
    if (a.n_positional != 1) {
        cp_cli_error(cmd, "give the flow file (FLOW.toml)");
        return 2;
    }
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_flow *f = NULL;
    if (cp_flow_load(a.positional[0], &f, &d) != CP_OK)
        return cp_cli_fail(cmd, &d);
    if (cp_args_has(&a, CP_SO_JSON)) {
        json_t *j = json_object();
        json_t *nodes = nodes_json(f, NULL);
        if (j && nodes && cp_json_set_str(j, "flow", a.positional[0]) &&
            cp_json_set_str(j, "graph", cp_flow_name(f)) && cp_json_set(j, "nodes", nodes))
            nodes = NULL;
        json_decref(nodes);
        rc = cp_out_json_take(j, cmd);
    } else {
        printf("%s: flow %s, %zu nodes\n", a.positional[0], cp_flow_name(f), cp_flow_n_nodes(f));
        for (size_t i = 0; i < cp_flow_n_nodes(f); i++) {
            struct cp_flow_node_info ni;
            cp_flow_node(f, i, &ni);
            printf("  %-20s %-13s workers %d, batch %d, queue %d (line %d)\n", ni.name, ni.flowunit,
                   ni.workers, ni.batch_size, ni.queue_size, ni.line);
        }
    }
    cp_flow_free(f);
    return rc;
}

static int cmd_run(int argc, char **argv)
{
    const char *cmd = RUN.cmd;
    struct cp_args a;
    int rc = 0;
    if (!cp_cli_parse_sub(&RUN, 1, argc, argv, &a, &rc))
        return rc;
    if (a.n_positional != 1) {
        cp_cli_error(cmd, "give the flow file (FLOW.toml)");
        return 2;
    }
    struct cp_flow_run_opts o = {
        .duration_s = cp_args_num(&a, CP_SO_DURATION, 0),
        .trace_path = cp_args_get(&a, OPT_TRACE),
        .model_layer = !cp_args_has(&a, OPT_NO_MODEL_LAYER),
    };
    const char *req = cp_args_get(&a, OPT_REQUESTS);
    if (req) {
        char *end = NULL;
        errno = 0;
        unsigned long long n = strtoull(req, &end, 10);
        if (end == req || *end || errno || n < 1 || n > 10000000 || req[0] == '-') {
            cp_cli_error(cmd, "--requests takes a whole number from 1 to 10000000");
            return 2;
        }
        o.requests = n;
    }
    if (o.requests && o.duration_s > 0) {
        cp_cli_error(cmd, "give --requests or --duration, not both");
        return 2;
    }
    if (!o.requests && !(o.duration_s > 0))
        o.requests = 100;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_flow *f = NULL;
    if (cp_flow_load(a.positional[0], &f, &d) != CP_OK)
        return cp_cli_fail(cmd, &d);
    struct cp_flow_run_result r;
    if (cp_flow_run(f, &o, &r, &d) != CP_OK) {
        rc = cp_cli_fail(cmd, &d);
    } else if (cp_args_has(&a, CP_SO_JSON)) {
        json_t *j = json_object();
        json_t *nodes = nodes_json(f, &r);
        bool ok = j && nodes && cp_json_set_str(j, "flow", a.positional[0]) &&
                  cp_json_set_int(j, "sent", (int64_t)r.sent) &&
                  cp_json_set_int(j, "done", (int64_t)r.done) &&
                  cp_json_set_num(j, "seconds", r.seconds) &&
                  cp_json_set_num(j, "throughput", r.throughput) &&
                  cp_json_set_num(j, "latency_mean_ms", r.latency_mean_ms) &&
                  cp_json_set_num(j, "latency_p50_ms", r.latency_p50_ms) &&
                  cp_json_set_num(j, "latency_p99_ms", r.latency_p99_ms);
        if (ok && o.trace_path)
            ok = cp_json_set_str(j, "trace", o.trace_path) && cp_json_set_int(j, "run", r.run_id);
        if (ok && cp_json_set(j, "nodes", nodes))
            nodes = NULL;
        json_decref(nodes);
        rc = cp_out_json_take(j, cmd);
    } else {
        printf("%s: %llu requests in %.3f s: %.2f req/s; latency mean %.2f ms, p50 %.2f ms, p99 "
               "%.2f ms\n",
               cp_flow_name(f), (unsigned long long)r.done, r.seconds, r.throughput,
               r.latency_mean_ms, r.latency_p50_ms, r.latency_p99_ms);
        printf("  %-20s %7s %9s %9s %9s %9s %9s %9s %6s\n", "node", "calls", "busy s", "cpu s",
               "runq s", "off-cpu s", "starved s", "blocked s", "queue");
        for (size_t i = 0; i < r.n_nodes; i++) {
            const struct cp_flow_node_stats *s = &r.nodes[i];
            printf("  %-20s %7llu %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %6zu\n", s->name,
                   (unsigned long long)s->calls, s->busy_s, s->cpu_s, s->runq_s, s->offcpu_s,
                   s->starved_s, s->blocked_s, s->max_depth);
        }
        if (o.trace_path)
            printf("trace: %s (run %lld)\n", o.trace_path, (long long)r.run_id);
    }
    cp_flow_run_result_release(&r);
    cp_flow_free(f);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: cannprof pipeline run FLOW.toml [--requests N | --duration D] [--trace "
               "T.db] [--json]\n"
               "       cannprof pipeline check FLOW.toml [--json]\n\n"
               "Flows in ModelBox's format: a TOML file whose [graph] graphconf is a DOT graph\n"
               "of flowunits (docs/pipelines.md). 'run' runs one and records every node call;\n"
               "'check' reads and checks one without running it.\n"
               "'cannprof pipeline <subcommand> --help' shows a subcommand's options.\n\n"
               "exit codes: 0 ok, 2 bad usage or a bad flow (the message names file:line), 3 "
               "environment failure\n");
}

static const struct cp_subcommand subcommands[] = {
    {"check", cmd_check},
    {"run", cmd_run},
};

int cp_cmd_pipeline(int argc, char **argv)
{
    return cp_cli_dispatch("pipeline", subcommands, sizeof subcommands / sizeof *subcommands,
                           "run, check", usage, argc, argv);
}
