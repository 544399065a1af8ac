/* cannprof export: a trace store as Chrome trace-event JSON or folded stacks. */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "trace/trace.h"

#include <stdio.h>
#include <string.h>

enum { OPT_FORMAT = 1, OPT_OUTPUT };

static const struct cp_opt own[] = {
    {"format", 0, CP_OPT_VALUE, OPT_FORMAT, "FMT",
     "chrome (trace-event JSON for Perfetto / chrome://tracing) or folded (flamegraph.pl, "
     "speedscope)"},
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "FILE", "where to write (required)"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print what was exported as JSON: trace, run, format, output, events, bytes"},
    {CP_SO_RUN, "which run of the store (default: the last)"},
};

static const struct cp_command_opts OPTS = {
    .cmd = "export",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage =
        "usage: cannprof export TRACE.db --format chrome|folded -o FILE [--run ID] [--json]\n\n"
        "Export one run of a trace store. chrome writes complete (X) events on three\n"
        "threads (application, runtime, device) with kernel details in args; folded\n"
        "writes one 'layer;node;op <microseconds>' line per stack. The file is written\n"
        "atomically (docs/trace-format.md).\n",
    .exit_codes = "0 exported, 2 bad usage or input (a store that cannot be read, no such run), "
                  "3 environment failure (FILE cannot be written)",
};

/* The --json description of an export; NULL when out of memory. */
static json_t *export_json(const char *trace, const char *fmt, const char *out,
                           const struct cp_trace_export_info *info)
{
    json_t *j = json_object();
    if (j && cp_json_set_str(j, "trace", trace) && cp_json_set_int(j, "run", info->run) &&
        cp_json_set_str(j, "format", fmt) && cp_json_set_str(j, "output", out) &&
        cp_json_set_int(j, "events", (int64_t)info->events) &&
        cp_json_set_int(j, "bytes", (int64_t)info->bytes))
        return j;
    json_decref(j);
    return NULL;
}

int cp_cmd_export(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("export", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (args.n_positional != 1) {
        cp_cli_error("export", "give exactly one TRACE.db");
        return 2;
    }
    const char *fmt = cp_args_get(&args, OPT_FORMAT);
    const char *out = cp_args_get(&args, OPT_OUTPUT);
    if (!fmt || !out) {
        cp_cli_error("export",
                     !fmt ? "--format is required (chrome or folded)" : "-o FILE is required");
        return 2;
    }
    enum cp_trace_format f;
    if (!cp_trace_format_parse(fmt, &f)) {
        char msg[128];
        snprintf(msg, sizeof msg, "--format %.60s: use chrome or folded", fmt);
        cp_cli_error("export", msg);
        return 2;
    }
    const char *trace = args.positional[0];
    struct cp_trace_store *s = NULL;
    struct cp_trace_export_info info;
    if (cp_trace_store_open_ro(trace, &s, &d) != CP_OK ||
        cp_trace_export_file(s, cp_args_int(&args, CP_SO_RUN, -1), f, out, &info, &d) != CP_OK) {
        cp_cli_error("export", d.msg);
        cp_trace_store_close(s);
        return cp_status_exit_code(d.status);
    }
    cp_trace_store_close(s);
    if (cp_args_has(&args, CP_SO_JSON)) {
        json_t *j = export_json(trace, fmt, out, &info);
        int rc = cp_out_json(j, "export");
        json_decref(j);
        return rc;
    }
    printf("export: %s -> %s (%s, run %lld, %zu events)\n", trace, out, fmt, (long long)info.run,
           info.events);
    return 0;
}
