/* cannprof trace --target URL: record a running `cannprof serve` for a
 * while, every request's stage times (serve/serve.h, docs/serving.md,
 * "Tracing a running server"). */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json.h"
#include "serve/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_TARGET = 1, OPT_SAMPLING, OPT_OUTPUT };

static const struct cp_opt own[] = {
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "T.db", "the trace store to write the run into"},
    {"sampling_rate", 0, CP_OPT_VALUE, OPT_SAMPLING, "PCT",
     "the share of requests recorded, evenly spread (default 100%)"},
    {"target", 0, CP_OPT_VALUE, OPT_TARGET, "URL", "the server, http://host:port"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_DURATION, "how long to record (\"60s\", \"2m\"; default 60s)"},
    {CP_SO_JSON, "print what was recorded as JSON"},
};

static const struct cp_command_opts OPTS = {
    .cmd = "trace",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof trace --target URL --duration D [--sampling_rate PCT] -o T.db\n\n"
             "Record a running `cannprof serve` instance: for the duration, the server keeps\n"
             "the stage times of the requests it answers (read and parsed, queued, batched,\n"
             "run, answered; CPU and run-queue time of each stage's thread), a sampled share\n"
             "of them, and this command stores them as a pipeline run of the served model\n"
             "(nodes http -> model -> reply) in T.db, which `cannprof node-bottleneck T.db`\n"
             "and `cannprof export T.db` read. The server is not restarted or slowed for\n"
             "the requests not sampled.\n",
    .exit_codes = "0 recorded, 2 bad usage, no cannprof server at URL, or no request answered "
                  "in the window (an empty capture), 3 environment failure (the trace cannot "
                  "be written)",
};

int cp_cmd_trace(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args a;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &a, &d) != CP_OK) {
        cp_cli_error(OPTS.cmd, d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&a, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (a.n_positional != 0) {
        cp_cli_error(OPTS.cmd, "takes no positional argument: the server is --target URL");
        return 2;
    }
    struct cp_trace_target_opts o = {
        .url = cp_args_get(&a, OPT_TARGET),
        .duration_s = cp_args_num(&a, CP_SO_DURATION, 60),
        .sampling_pct = 100,
        .out_path = cp_args_get(&a, OPT_OUTPUT),
    };
    if (!o.url || strncmp(o.url, "http://", 7) != 0) {
        cp_cli_error(OPTS.cmd, "give the server as --target http://host:port");
        return 2;
    }
    if (!o.out_path) {
        cp_cli_error(OPTS.cmd, "give the trace to write with -o T.db");
        return 2;
    }
    const char *v = cp_args_get(&a, OPT_SAMPLING);
    if (v) {
        char *end = NULL;
        o.sampling_pct = strtod(v, &end);
        if (end == v || (*end && strcmp(end, "%") != 0) ||
            !(o.sampling_pct > 0 && o.sampling_pct <= 100)) {
            cp_cli_error(OPTS.cmd, "--sampling_rate takes a percentage above 0 to 100, as in "
                                   "10%");
            return 2;
        }
    }
    struct cp_trace_target_result r;
    if (cp_serve_trace_target(&o, &r, &d) != CP_OK)
        return cp_cli_fail(OPTS.cmd, &d);
    if (cp_args_has(&a, CP_SO_JSON)) {
        json_t *j = json_object();
        bool ok = j && cp_json_set_str(j, "target", o.url) &&
                  cp_json_set_str(j, "model", r.model) && cp_json_set_str(j, "trace", o.out_path) &&
                  cp_json_set_int(j, "run", r.run_id) &&
                  cp_json_set_int(j, "requests_seen", (int64_t)r.seen) &&
                  cp_json_set_int(j, "requests_recorded", (int64_t)r.captured) &&
                  cp_json_set_num(j, "seconds", r.seconds) &&
                  cp_json_set_num(j, "sampling_pct", o.sampling_pct) &&
                  cp_json_set_bool(j, "truncated", r.truncated);
        return cp_out_json_take(ok ? j : (json_decref(j), NULL), OPTS.cmd);
    }
    printf("trace: %s (%s): %zu of %llu requests recorded over %.1f s (%.4g%% sampled)%s\n"
           "  run %lld of %s; see it with `cannprof node-bottleneck %s --run %lld`\n",
           o.url, r.model, r.captured, (unsigned long long)r.seen, r.seconds, o.sampling_pct,
           r.truncated ? "; the server's capture filled up: later requests are missing" : "",
           (long long)r.run_id, o.out_path, o.out_path, (long long)r.run_id);
    return 0;
}
