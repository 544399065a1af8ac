/* cannprof: git-style dispatch to one cmd_<name>.c per subcommand. */
#include "cli/commands.h"
#include "cli/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

/* Sorted by name. */
static const struct command commands[] = {
    {"analyze", cp_cmd_analyze,
     "diagnose a traced run: bottlenecks, root causes, confidence, expected gain, changes"},
    {"baseline", cp_cmd_baseline, "keep per-service baselines in the knowledge base for validate"},
    {"bench", cp_cmd_bench, "measure latency statistics and throughput; --trace records a trace"},
    {"calibrate", cp_cmd_calibrate,
     "measure this machine's peak FLOP/s (fp32, bf16) and memory bandwidth"},
    {"compare", cp_cmd_compare,
     "compare two models' outputs on the same inputs: errors, precision_loss"},
    {"convert", cp_cmd_convert, "convert an ONNX model into a CPU offline model (.om), ATC flags"},
    {"export", cp_cmd_export, "export a trace store as Chrome trace JSON or folded stacks"},
    {"import", cp_cmd_import,
     "import a profile (Kineto, torch_npu, msprof, ONNX Runtime) into a trace store"},
    {"info", cp_cmd_info, "describe an .onnx or .om file: I/O, ops, parameters, FLOPs, config"},
    {"kb", cp_cmd_kb, "query, show and share the knowledge base: strategies, sessions, cards"},
    {"load", cp_cmd_load, "send requests to a cannprof server open-loop; latency percentiles"},
    {"node-bottleneck", cp_cmd_node_bottleneck,
     "which node of a pipeline run limits it, why, problems, request paths"},
    {"pipeline", cp_cmd_pipeline,
     "run or check a flow in ModelBox's format: node-level time, waits and back-pressure"},
    {"run", cp_cmd_run, "run a model once; inputs from .pb/.npy or seeded random; .npy out"},
    {"serve", cp_cmd_serve, "serve a model over HTTP with dynamic batching and /metrics"},
    {"suggest", cp_cmd_suggest,
     "a report of changes to make for a target under constraints, ready to paste"},
    {"trace", cp_cmd_trace, "record a running `cannprof serve`: every sampled request's stages"},
    {"tune", cp_cmd_tune,
     "the closed loop: diagnose, re-convert, measure, keep real gains, remember them"},
    {"validate", cp_cmd_validate,
     "compare two runs or a run and a baseline: p-values, CIs, verdicts; exit 1 on regression"},
    {"view", cp_cmd_view,
     "draw a trace: flame graph, differential flame graph, topology, timeline (offline files)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: cannprof <command> [options]\n"
               "       cannprof --version | --help | help <command>\n\n"
               "cannprof profiles, diagnoses and tunes models converted to offline models.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexit codes: 0 ok, 1 a verdict failed, 2 bad usage or input, "
               "3 environment or internal failure\n"
               "'cannprof <command> --help' shows a command's options.\n");
}

static int cmp_cmd(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const struct command *)elem)->name);
}

static const struct command *find(const char *name)
{
    return bsearch(name, commands, sizeof commands / sizeof *commands, sizeof *commands, cmp_cmd);
}

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
/* Under the leak checker: fontconfig's and cairo's caches, loaded when a
 * chart is drawn, cannot be released at exit without their assertions
 * firing when another object still holds them (report/chart.c); what they
 * keep is theirs, not ours, and is not reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libfontconfig.so\nleak:libcairo.so\n";
}
#endif

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("cannprof %s\n", CP_VERSION_STRING);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) {
            usage(stdout);
            return 0;
        }
        const struct command *c = find(argv[2]);
        if (!c) {
            fprintf(stderr, "cannprof: error: unknown command '%s'\n", argv[2]);
            return 2;
        }
        char *args[] = {(char *)"--help", NULL};
        return c->run(1, args);
    }
    const struct command *c = find(cmd);
    if (!c) {
        const char *best = NULL;
        size_t best_d = (size_t)-1;
        for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
            size_t d = cp_edit_distance(cmd, commands[i].name);
            if (d < best_d) {
                best_d = d;
                best = commands[i].name;
            }
        }
        if (best && best_d <= 2)
            fprintf(stderr, "cannprof: error: unknown command '%s'; did you mean '%s'?\n", cmd,
                    best);
        else
            fprintf(stderr, "cannprof: error: unknown command '%s'; see 'cannprof --help'\n", cmd);
        return 2;
    }
    return c->run(argc - 2, argv + 2);
}
