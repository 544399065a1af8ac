/* cannprof export: a trace store as Chrome trace-event JSON or folded stacks. */
#include "cli/commands.h"
#include "cli/options.h"
#include "trace/trace.h"

#include <stdio.h>
#include <string.h>

enum { OPT_FORMAT = 1, OPT_HELP, OPT_OUTPUT, OPT_RUN };

static const struct cp_opt options[] = {
    {"format", 'f', CP_OPT_VALUE, OPT_FORMAT, "FMT",
     "chrome (trace-event JSON for Perfetto / chrome://tracing) or folded (flamegraph.pl, "
     "speedscope)"},
    {"help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"},
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "FILE", "where to write (required)"},
    {"run", 0, CP_OPT_VALUE, OPT_RUN, "ID", "which run of the store (default: the last)"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void help(void)
{
    printf("usage: cannprof export TRACE.db --format chrome|folded -o FILE [--run ID]\n\n"
           "Export one run of a trace store. chrome writes complete (X) events on three\n"
           "threads (application, runtime, device) with kernel details in args; folded\n"
           "writes one 'layer;node;op <microseconds>' line per stack.\n\noptions:\n");
    cp_opts_print_help(stdout, options, N_OPTIONS);
}

int cp_cmd_export(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse("export", options, N_OPTIONS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("export", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, OPT_HELP)) {
        help();
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
    if (strcmp(fmt, "chrome") == 0) {
        f = CP_TRACE_FORMAT_CHROME;
    } else if (strcmp(fmt, "folded") == 0) {
        f = CP_TRACE_FORMAT_FOLDED;
    } else {
        fprintf(stderr, "cannprof export: error: --format %s: use chrome or folded\n", fmt);
        return 2;
    }
    int64_t run = -1;
    const char *rv = cp_args_get(&args, OPT_RUN);
    if (rv && (!cp_parse_i64(rv, &run) || run < 1)) {
        cp_cli_error("export", "--run takes a run id (a positive whole number)");
        return 2;
    }
    struct cp_trace_store *s = NULL;
    if (cp_trace_store_open_ro(args.positional[0], &s, &d) != CP_OK ||
        cp_trace_export(s, run, f, out, &d) != CP_OK) {
        cp_cli_error("export", d.msg);
        cp_trace_store_close(s);
        return cp_status_exit_code(d.status);
    }
    cp_trace_store_close(s);
    printf("export: %s -> %s (%s)\n", args.positional[0], out, fmt);
    return 0;
}
