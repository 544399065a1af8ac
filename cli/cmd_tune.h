/* cannprof tune's option ids and what its two files share: cmd_tune.c
 * (a model's conversion, --batch) and cmd_tune_served.c (a flow, and a
 * model's serving with --serve). Private to cli/. */
#ifndef CP_CLI_CMD_TUNE_H
#define CP_CLI_CMD_TUNE_H

#include "cli/options.h"

#include <stddef.h>

enum cp_tune_opt {
    OPT_BATCH = 1,
    OPT_BATCH_WINDOW,
    OPT_CALIBRATION_DATA,
    OPT_CALIBRATION_METHOD,
    OPT_CONCURRENCY,
    OPT_FRESH,
    OPT_INT8,
    OPT_JOBS,
    OPT_KEEP,
    OPT_MAX_BATCH,
    OPT_MODELS,
    OPT_NO_KB,
    OPT_OUT,
    OPT_PAIRS,
    OPT_RATE,
    OPT_REQUESTS,
    OPT_SERVE,
    OPT_TIME_LIMIT,
};

/* "tune-<stem>": the default output folder of `path`. */
void cp_tune_default_out(const char *path, char *out, size_t cap);

/* `tune FLOW.toml` and `tune MODEL --serve`: parse, run, print; the exit code. */
int cp_tune_cli_flow(const struct cp_args *args, const char *flow);
int cp_tune_cli_serve(const struct cp_args *args, const char *model);

#endif
