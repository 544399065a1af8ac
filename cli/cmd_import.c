/* cannprof import: a profile another tool wrote (Kineto, torch_npu,
 * msprof, ONNX Runtime) as a run of a trace store. */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "import/import.h"

#include <stdio.h>
#include <string.h>

enum { OPT_FORMAT = 1, OPT_OUTPUT };

static const struct cp_opt own[] = {
    {"format", 0, CP_OPT_VALUE, OPT_FORMAT, "FMT",
     "kineto, ascend (torch_npu trace_view.json, msprof_*.json), ascend-csv (torch_npu "
     "kernel_details.csv, msprof op_summary_*.csv), ascend-db (torch_npu and msprof SQLite "
     "exports), nsys (Nsight Systems SQLite export), trt (trtexec --exportTimes / "
     "--exportProfile), ort (ONNX Runtime), chrome (any other "
     "trace-event JSON) or auto (default: detect)"},
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "TRACE.db",
     "the trace store to add the run to (default: PROFILE's name with .db; created if needed)"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print what was imported as JSON: trace, run, format, source, events per "
                 "layer, kernels, iterations, counters, skipped events by reason, bytes, seconds"},
};

static const struct cp_command_opts OPTS = {
    .cmd = "import",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof import PROFILE [-o TRACE.db] [--format FMT] [--json]\n\n"
             "Read a profile another tool wrote into a trace store, as a new run of kind\n"
             "\"import\", so that analyze, suggest, export, validate and baseline work on it.\n"
             "PROFILE is a file (.json, .json.gz, .csv, or a SQLite export: torch_npu's,\n"
             "msprof's, Nsight Systems') or a run folder: a torch_npu *_ascend_pt folder\n"
             "(ASCEND_PROFILER_OUTPUT/trace_view.json, else its DB export, else its\n"
             "kernel_details.csv), an msprof PROF_* folder (mindstudio_profiler_output/\n"
             "msprof_*.json, else msprof_*.db, else op_summary_*.csv), or a folder\n"
             "holding one trace.\n"
             "Framework ops go on the application layer, runtime and driver API calls on the\n"
             "runtime layer, device tasks and kernels on the device layer; each step\n"
             "(ProfilerStep#N, ONNX Runtime's model_run) is an iteration with its length as\n"
             "the latency sample (without steps, the whole profile is one). What is not\n"
             "imported is counted by reason and recorded with the run. A profile that fails\n"
             "part way leaves no run behind (docs/import.md).\n",
    .exit_codes = "0 imported, 2 bad usage or input (no such profile, an unknown format, a "
                  "truncated or corrupt file: the message names the file and the byte), 3 "
                  "environment failure (the trace store cannot be written)",
};

static json_t *result_json(const char *trace, const struct cp_import_result *r)
{
    json_t *j = json_object(), *sk = json_object(), *ev = json_object();
    bool ok = j && sk && ev;
    for (int i = 0; ok && i < CP_SKIP_N; i++)
        ok = cp_json_set_int(sk, cp_import_skip_name((enum cp_import_skip)i),
                             (int64_t)r->skipped[i]);
    ok = ok && cp_json_set_int(ev, "application", (int64_t)r->events[0]) &&
         cp_json_set_int(ev, "runtime", (int64_t)r->events[1]) &&
         cp_json_set_int(ev, "device", (int64_t)r->events[2]);
    ok = ok && cp_json_set_str(j, "trace", trace) && cp_json_set_int(j, "run", r->run_id) &&
         cp_json_set_str(j, "format", cp_import_format_name(r->format)) &&
         cp_json_set_str(j, "source", r->source) &&
         cp_json_set_int(j, "events", (int64_t)(r->events[0] + r->events[1] + r->events[2])) &&
         cp_json_set_int(j, "kernels", (int64_t)r->kernels) &&
         cp_json_set_int(j, "iterations", (int64_t)r->iterations) &&
         cp_json_set_str(j, "steps", r->step_source) &&
         cp_json_set_int(j, "counters", (int64_t)r->counters) &&
         cp_json_set_int(j, "metadata", (int64_t)r->metadata) &&
         cp_json_set_int(j, "bytes", (int64_t)r->bytes) &&
         cp_json_set_num(j, "seconds", r->seconds);
    /* the run's other files read, by name */
    json_t *extras = json_array();
    char list[sizeof r->extras];
    snprintf(list, sizeof list, "%s", r->extras);
    bool eok = extras != NULL;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); eok && t;
         t = strtok_r(NULL, ",", &save))
        eok = cp_json_push(extras, json_string(t + (t[0] == ' ')));
    if (ok && eok)
        ok = cp_json_set(j, "extras", extras); /* steals extras */
    else {
        json_decref(extras);
        ok = false;
    }
    if (ok && r->table_tasks > 0)
        ok = cp_json_set_num(j, "op_statistic_tasks", r->table_tasks);
    if (ok && r->slowest_link[0])
        ok = cp_json_set_str(j, "slowest_link", r->slowest_link);
    if (ok && r->fusible[0])
        ok = cp_json_set_str(j, "fusible_sequence", r->fusible);
    if (ok && r->rank_comparison[0])
        ok = cp_json_set_str(j, "rank_comparison", r->rank_comparison);
    json_t *ranks = json_array();
    for (size_t i = 0; ok && ranks && i < r->n_ranks; i++) {
        json_t *o = json_object();
        if (o && cp_json_set_int(o, "rank", r->rank[i]) &&
            cp_json_set_int(o, "run", r->rank_run[i]))
            ok = cp_json_push(ranks, o); /* steals o */
        else {
            json_decref(o);
            ok = false;
        }
    }
    if (ok && ranks)
        ok = cp_json_set(j, "ranks", ranks); /* steals ranks */
    else {
        json_decref(ranks);
        ok = false;
    }
    if (ok) {
        ok = cp_json_set(j, "events_by_layer", ev);
        ev = NULL;
    }
    if (ok) {
        ok = cp_json_set(j, "skipped", sk);
        sk = NULL;
    }
    json_decref(ev);
    json_decref(sk);
    if (ok)
        return j;
    json_decref(j);
    return NULL;
}

/* PROFILE's name without its extensions (and a trailing slash), + ".db". */
static void default_output(const char *profile, char *out, size_t n)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", profile);
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = '\0';
    static const char *const ext[] = {".json.gz", ".json", ".gz"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        size_t e = strlen(ext[i]);
        if (len > e && strcmp(p + len - e, ext[i]) == 0) {
            p[len - e] = '\0';
            break;
        }
    }
    snprintf(out, n, "%s.db", p);
}

int cp_cmd_import(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("import", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (args.n_positional != 1) {
        cp_cli_error("import", "give exactly one PROFILE (a file or a run folder)");
        return 2;
    }
    struct cp_import_opts o = {.path = args.positional[0], .format = CP_IMPORT_AUTO};
    const char *fmt = cp_args_get(&args, OPT_FORMAT);
    if (fmt && !cp_import_format_parse(fmt, &o.format)) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "--format %.60s: use auto, kineto, ascend, ascend-csv, ascend-db, nsys, trt, ort "
                 "or chrome",
                 fmt);
        cp_cli_error("import", msg);
        return 2;
    }
    char out[1100];
    if (cp_args_get(&args, OPT_OUTPUT))
        snprintf(out, sizeof out, "%s", cp_args_get(&args, OPT_OUTPUT));
    else
        default_output(o.path, out, sizeof out);
    o.trace_path = out;
    struct cp_import_result r;
    if (cp_import(&o, &r, &d) != CP_OK) {
        cp_cli_error("import", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_JSON)) {
        json_t *j = result_json(out, &r);
        int rc = cp_out_json(j, "import");
        json_decref(j);
        return rc;
    }
    size_t skipped = 0;
    for (int i = 0; i < CP_SKIP_N; i++)
        skipped += r.skipped[i];
    if (r.n_ranks)
        printf("import: %zu ranks of %s (runs %lld..%lld, one run group)\n", r.n_ranks, r.source,
               (long long)r.rank_run[0], (long long)r.rank_run[r.n_ranks - 1]);
    printf("import: %s -> %s (run %lld, %s): %zu application, %zu runtime, %zu device events; "
           "%zu kernels; %zu iterations (%s); %zu counters; %zu events not imported",
           r.source, out, (long long)r.run_id, cp_import_format_name(r.format), r.events[0],
           r.events[1], r.events[2], r.kernels, r.iterations, r.step_source, r.counters, skipped);
    const char *sep = " (";
    for (int i = 0; i < CP_SKIP_N; i++)
        if (r.skipped[i]) {
            printf("%s%zu %s", sep, r.skipped[i], cp_import_skip_name((enum cp_import_skip)i));
            sep = ", ";
        }
    printf("%s; %.1f MB in %.2f s\n", skipped ? ")" : "", (double)r.bytes / 1e6, r.seconds);
    if (r.extras[0])
        printf("import: also read %s\n", r.extras);
    /* op_statistic.csv counts the run's tasks by type: a task table or
     * timeline holding fewer than it counts lost some */
    if (r.table_tasks > 0)
        printf("import: op_statistic.csv counts %.0f tasks; the run holds %zu device events\n",
               r.table_tasks, r.events[2]);
    if (r.slowest_link[0])
        printf("import: slowest link (communication_matrix.json): %s\n", r.slowest_link);
    if (r.fusible[0])
        printf("import: task chain worth fusing (repeated, memory-bound or short tasks): %s\n",
               r.fusible);
    if (r.rank_comparison[0])
        printf("import: slowest rank, per step: %s\n", r.rank_comparison);
    return 0;
}
