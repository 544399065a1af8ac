/* cannprof serve and cannprof load (serve/serve.h, docs/serving.md). */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json.h"
#include "monitor/monitor.h"
#include "pipeline/pipeline.h"
#include "serve/serve.h"
#include "validate/validate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_PORT = 1,
    OPT_MAX_BATCH,
    OPT_WINDOW,
    OPT_READY,
    OPT_MAX_BODY,
    OPT_MONITOR,
    OPT_MON_WINDOW,
    OPT_MON_FOR,
    OPT_HYSTERESIS,
    OPT_MIN_REQUESTS,
    OPT_COOLDOWN,
    OPT_MAX_INCIDENTS,
    OPT_RECORDER,
    OPT_DEEP,
    OPT_INCIDENT_DIR,
    OPT_WEBHOOK,
    OPT_WEBHOOK_FORMAT,
    OPT_WEBHOOK_SECRET_FILE,
    OPT_INJECT,
    OPT_RULES,
};

static const struct cp_opt serve_own[] = {
    {"batch-window", 0, CP_OPT_VALUE, OPT_WINDOW, "MS",
     "how long a batch waits to fill, in milliseconds (default 0: it goes with what is queued)"},
    {"cooldown", 0, CP_OPT_VALUE, OPT_COOLDOWN, "D",
     "monitor: no incident for D after the last one (default 5m)"},
    {"deep-trace", 0, CP_OPT_VALUE, OPT_DEEP, "D",
     "monitor: after a firing, record the runtime and kernel layers for D (default 10s)"},
    {"for", 0, CP_OPT_VALUE, OPT_MON_FOR, "D",
     "monitor: a condition must hold for D to fire, and clear for D to resolve (default 10s)"},
    {"hysteresis", 0, CP_OPT_VALUE, OPT_HYSTERESIS, "PCT",
     "monitor: clearing needs the value back past the threshold by PCT of it (default 10%)"},
    {"incident-dir", 0, CP_OPT_VALUE, OPT_INCIDENT_DIR, "DIR",
     "monitor: one folder per incident under DIR (default cannprof-incidents)"},
    {"inject-slowdown", 0, CP_OPT_VALUE, OPT_INJECT, "AFTER:+MS[@NODE]",
     "a fire drill: from AFTER (\"20s\") on, every batch takes MS milliseconds longer (a "
     "flow: every answer, or with @NODE every call of that node), to check the monitor and its "
     "alert end to end"},
    {"max-batch", 0, CP_OPT_VALUE, OPT_MAX_BATCH, "N",
     "run up to N requests together (1 .. 256, default 1); the model's batch must be settable"},
    {"max-body", 0, CP_OPT_VALUE, OPT_MAX_BODY, "BYTES",
     "largest request body accepted (default: the inputs' size + 1 MiB); larger ones get 413"},
    {"max-incidents", 0, CP_OPT_VALUE, OPT_MAX_INCIDENTS, "N",
     "monitor: at most N incidents in any hour (default 6)"},
    {"min-requests", 0, CP_OPT_VALUE, OPT_MIN_REQUESTS, "N",
     "monitor: a window of fewer answered requests decides nothing (default 20)"},
    {"monitor", 0, CP_OPT_VALUE, OPT_MONITOR, "CONDITIONS",
     "watch the service: \"p99_latency>2s\", \"error_rate>1%,model.p99_latency>50ms\", a "
     "flow's own nodes \"denoiser.p99_latency>400ms,prep.busy>90%\" (docs/serving.md); a firing "
     "dumps the flight recorder, traces deep, diagnoses and alerts"},
    {"port", 0, CP_OPT_VALUE, OPT_PORT, "P", "the port to listen on (0: any free one, printed)"},
    {"ready-file", 0, CP_OPT_VALUE, OPT_READY, "FILE",
     "write the port to FILE once listening (for scripts and tests)"},
    {"recorder", 0, CP_OPT_VALUE, OPT_RECORDER, "D",
     "monitor: the flight recorder holds the requests of the last D (default 60s)"},
    {"rules", 0, CP_OPT_VALUE, OPT_RULES, "DIR",
     "monitor: the rule packs an incident's analysis uses (default: the shipped ones)"},
    {"webhook", 0, CP_OPT_VALUE, OPT_WEBHOOK, "URL",
     "monitor: POST each incident's alert to URL (default $CANNPROF_WEBHOOK)"},
    {"webhook-format", 0, CP_OPT_VALUE, OPT_WEBHOOK_FORMAT, "F",
     "generic, slack, feishu or dingtalk (default generic)"},
    {"webhook-secret-file", 0, CP_OPT_VALUE, OPT_WEBHOOK_SECRET_FILE, "FILE",
     "sign alerts with the secret on FILE's first line (default $CANNPROF_WEBHOOK_SECRET)"},
    {"window", 0, CP_OPT_VALUE, OPT_MON_WINDOW, "D",
     "monitor: the sliding window the conditions are computed over (default 30s)"},
};

static const struct cp_opt_use serve_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_THREADS, "the runtime's threads (default: all cores)"},
};

static const struct cp_command_opts SERVE = {
    .cmd = "serve",
    .own = serve_own,
    .n_own = sizeof serve_own / sizeof serve_own[0],
    .shared = serve_shared,
    .n_shared = sizeof serve_shared / sizeof serve_shared[0],
    .usage = "usage: cannprof serve MODEL.om|MODEL.onnx --port P [--max-batch N] [--batch-window "
             "MS]\n"
             "                     [--monitor CONDITIONS [--window D] [--for D] [--webhook URL]\n"
             "                      [--incident-dir DIR] ...]\n\n"
             "Serve a model over HTTP (docs/serving.md): GET /v1/model describes its inputs\n"
             "and outputs, POST /v1/infer runs it (one .npy part per input as\n"
             "multipart/form-data, or a JSON header line then the inputs' bytes; the answer\n"
             "comes in the same form), GET /health, GET /metrics (Prometheus text: requests,\n"
             "latency and batch size histograms, queue depth). Requests are batched\n"
             "dynamically. GET /v1/trace?seconds=S&sampling=P returns the stage times of the\n"
             "requests answered in the next S seconds (what `cannprof trace --target` records).\n"
             "SIGTERM or Ctrl-C stops accepting, finishes what is in flight and exits.\n\n"
             "With --monitor, a flight recorder keeps the last requests' stage times; when a\n"
             "condition holds over the window for the hold time, an incident is written\n"
             "under --incident-dir: the recorder's dump, a deep trace of the next seconds\n"
             "(kernels included), node-bottleneck, analyze, validate of the incident window\n"
             "against the last healthy one, and the alert (sent to --webhook).\n",
    .exit_codes = "0 stopped after SIGTERM/SIGINT, 1 the monitor failed an incident (an empty "
                  "deep trace, an alert not delivered), 2 bad usage or a model that cannot be "
                  "served, 3 environment failure (the port cannot be bound)",
};

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (end == s || *end || errno || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

int cp_cmd_serve(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args a;
    if (cp_args_parse_cmd(&SERVE, argc, argv, &a, &d) != CP_OK) {
        cp_cli_error(SERVE.cmd, d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&a, CP_SO_HELP)) {
        cp_cmd_help(stdout, &SERVE);
        return 0;
    }
    if (a.n_positional != 1) {
        cp_cli_error(SERVE.cmd, "give the model to serve (MODEL.om or MODEL.onnx)");
        return 2;
    }
    long port = 8000, batch = 1, body = 0;
    double window = 0;
    const char *v;
    if ((v = cp_args_get(&a, OPT_PORT)) && !parse_long(v, 0, 65535, &port)) {
        cp_cli_error(SERVE.cmd, "--port takes 0 to 65535");
        return 2;
    }
    if ((v = cp_args_get(&a, OPT_MAX_BATCH)) && !parse_long(v, 1, 256, &batch)) {
        cp_cli_error(SERVE.cmd, "--max-batch takes 1 to 256");
        return 2;
    }
    if ((v = cp_args_get(&a, OPT_MAX_BODY)) && !parse_long(v, 1, 1L << 40, &body)) {
        cp_cli_error(SERVE.cmd, "--max-body takes a byte count");
        return 2;
    }
    if ((v = cp_args_get(&a, OPT_WINDOW))) {
        char *end = NULL;
        window = strtod(v, &end);
        if (end == v || *end || !(window >= 0) || window > 60000) {
            cp_cli_error(SERVE.cmd, "--batch-window takes 0 to 60000 milliseconds");
            return 2;
        }
    }
    /* the fire drill */
    double inject_after = 0, inject_ms = 0;
    char inject_node[128] = "";
    if ((v = cp_args_get(&a, OPT_INJECT))) {
        char after[64];
        const char *colon = strchr(v, ':');
        char *end = NULL;
        if (colon && (size_t)(colon - v) < sizeof after) {
            memcpy(after, v, (size_t)(colon - v));
            after[colon - v] = '\0';
            inject_ms = strtod(colon + (colon[1] == ':' ? 2 : 1) + (colon[1] == '+'), &end);
        }
        if (end && *end == '@' && end[1] && strlen(end + 1) < sizeof inject_node) {
            snprintf(inject_node, sizeof inject_node, "%s", end + 1);
            end += strlen(end);
        }
        if (!colon || (size_t)(colon - v) >= sizeof after ||
            !(cp_parse_duration(after, &inject_after) || strcmp(after, "0") == 0) || !end || *end ||
            !(inject_ms > 0 && inject_ms <= 60000)) {
            cp_cli_error(SERVE.cmd, "--inject-slowdown takes AFTER:+MS[@NODE], as in 20s:+50 (from "
                                    "20 s on, every batch 50 ms slower) or 20s:+50@denoiser (a "
                                    "flow's node)");
            return 2;
        }
        if (inject_node[0] && !cp_path_has_suffix(a.positional[0], ".toml")) {
            char msg[300];
            snprintf(msg, sizeof msg,
                     "--inject-slowdown: @%s names a node, and only a flow (.toml) has nodes to "
                     "slow",
                     inject_node);
            cp_cli_error(SERVE.cmd, msg);
            return 2;
        }
    }
    struct cp_monitor *mon = NULL;
    char secret[512] = "";
    if (cp_args_get(&a, OPT_MONITOR)) {
        struct cp_monitor_opts mo;
        cp_monitor_opts_init(&mo);
        mo.conditions_text = cp_args_get(&a, OPT_MONITOR);
        if (cp_mon_conditions_parse(mo.conditions_text, &mo.conditions, &d) != CP_OK) {
            cp_cli_error(SERVE.cmd, d.msg);
            return 2;
        }
        static const struct {
            int opt;
            const char *name;
        } durs[] = {{OPT_MON_WINDOW, "--window"},
                    {OPT_MON_FOR, "--for"},
                    {OPT_COOLDOWN, "--cooldown"},
                    {OPT_RECORDER, "--recorder"},
                    {OPT_DEEP, "--deep-trace"}};
        double *dst[] = {&mo.policy.window_s, &mo.policy.hold_s, &mo.policy.cooldown_s,
                         &mo.recorder_s, &mo.deep_s};
        bool recorder_given = false;
        for (size_t k = 0; k < sizeof durs / sizeof *durs; k++) {
            const char *x = cp_args_get(&a, durs[k].opt);
            if (!x)
                continue;
            if (strcmp(x, "0") == 0 && durs[k].opt != OPT_MON_WINDOW && durs[k].opt != OPT_DEEP &&
                durs[k].opt != OPT_RECORDER) {
                *dst[k] = 0;
                continue;
            }
            if (!cp_parse_duration(x, dst[k])) {
                char msg[160];
                snprintf(msg, sizeof msg, "%s takes a duration (\"30s\", \"500ms\", \"2m\")",
                         durs[k].name);
                cp_cli_error(SERVE.cmd, msg);
                return 2;
            }
            recorder_given = recorder_given || durs[k].opt == OPT_RECORDER;
        }
        if (!recorder_given && mo.recorder_s < mo.policy.window_s + mo.policy.hold_s)
            mo.recorder_s = mo.policy.window_s + mo.policy.hold_s;
        if ((v = cp_args_get(&a, OPT_HYSTERESIS))) {
            char *end = NULL;
            double h = strtod(v, &end);
            if (end == v || (*end && strcmp(end, "%") != 0) || !(h >= 0 && h < 100)) {
                cp_cli_error(SERVE.cmd, "--hysteresis takes a percentage from 0 to below 100");
                return 2;
            }
            mo.policy.hysteresis = h / 100;
        }
        long x;
        if ((v = cp_args_get(&a, OPT_MIN_REQUESTS))) {
            if (!parse_long(v, 1, 10000000, &x)) {
                cp_cli_error(SERVE.cmd, "--min-requests takes 1 to 10000000");
                return 2;
            }
            mo.policy.min_requests = (size_t)x;
        }
        if ((v = cp_args_get(&a, OPT_MAX_INCIDENTS))) {
            if (!parse_long(v, 1, 60, &x)) {
                cp_cli_error(SERVE.cmd, "--max-incidents takes 1 to 60 (per hour)");
                return 2;
            }
            mo.policy.max_per_hour = (int)x;
        }
        if ((v = cp_args_get(&a, OPT_INCIDENT_DIR)))
            mo.incident_dir = v;
        mo.rules_dir = cp_args_get(&a, OPT_RULES);
        struct cp_validate_alert hook;
        if (cp_validate_webhook_setup(cp_args_get(&a, OPT_WEBHOOK),
                                      cp_args_get(&a, OPT_WEBHOOK_FORMAT),
                                      cp_args_get(&a, OPT_WEBHOOK_SECRET_FILE), &hook, secret,
                                      sizeof secret, &d) != CP_OK) {
            cp_cli_error(SERVE.cmd, d.msg);
            return 2;
        }
        mo.webhook = hook.url;
        mo.webhook_format = hook.format;
        mo.webhook_secret = hook.secret;
        mo.model_path = a.positional[0];
        mo.flow = cp_path_has_suffix(a.positional[0], ".toml");
        mo.max_batch = (int)batch;
        mo.threads = (int)cp_args_int(&a, CP_SO_THREADS, 0);
        /* a flow's conditions may name its own nodes */
        struct cp_flow *flow = NULL;
        const char **names = NULL;
        int *workers = NULL;
        if (mo.flow) {
            if (cp_flow_load(a.positional[0], &flow, &d) != CP_OK)
                return cp_cli_fail(SERVE.cmd, &d);
            mo.n_flow_nodes = cp_flow_n_nodes(flow);
            names = cp_calloc(mo.n_flow_nodes ? mo.n_flow_nodes : 1, sizeof *names);
            workers = cp_calloc(mo.n_flow_nodes ? mo.n_flow_nodes : 1, sizeof *workers);
            if (!names || !workers) {
                free(names);
                free(workers);
                cp_flow_free(flow);
                cp_cli_error(SERVE.cmd, "out of memory");
                return 1;
            }
            for (size_t i = 0; i < mo.n_flow_nodes; i++) {
                struct cp_flow_node_info ni;
                cp_flow_node(flow, i, &ni);
                names[i] = ni.name;
                workers[i] = ni.workers;
            }
            mo.flow_nodes = names;
            mo.flow_workers = workers;
        }
        enum cp_status mst = cp_monitor_create(&mo, &mon, &d);
        free(names);
        free(workers);
        cp_flow_free(flow);
        if (mst != CP_OK || cp_monitor_start(mon, &d) != CP_OK) {
            cp_monitor_free(mon);
            return cp_cli_fail(SERVE.cmd, &d);
        }
    } else {
        static const int mon_only[] = {
            OPT_MON_WINDOW,   OPT_MON_FOR,       OPT_HYSTERESIS,     OPT_MIN_REQUESTS,
            OPT_COOLDOWN,     OPT_MAX_INCIDENTS, OPT_RECORDER,       OPT_DEEP,
            OPT_INCIDENT_DIR, OPT_WEBHOOK,       OPT_WEBHOOK_FORMAT, OPT_WEBHOOK_SECRET_FILE,
            OPT_RULES};
        for (size_t k = 0; k < sizeof mon_only / sizeof *mon_only; k++)
            if (cp_args_get(&a, mon_only[k])) {
                cp_cli_error(SERVE.cmd, "the monitor's options need --monitor CONDITIONS");
                return 2;
            }
    }
    struct cp_serve_opts o = {
        .model_path = a.positional[0],
        .port = (int)port,
        .max_batch = (int)batch,
        .window_ms = window,
        .threads = (int)cp_args_int(&a, CP_SO_THREADS, 0),
        .max_body = (size_t)body,
        .ready_file = cp_args_get(&a, OPT_READY),
        .hooks = mon ? cp_monitor_hooks(mon) : NULL,
        .inject_after_s = inject_after,
        .inject_ms = inject_ms,
        .inject_node = inject_node[0] ? inject_node : NULL,
    };
    struct cp_serve_stats s;
    enum cp_status st = cp_serve_run(&o, &s, &d);
    struct cp_monitor_stats ms;
    memset(&ms, 0, sizeof ms);
    if (mon) {
        cp_monitor_stop(mon);
        cp_monitor_get_stats(mon, &ms);
        cp_monitor_free(mon);
    }
    if (st != CP_OK)
        return cp_cli_fail(SERVE.cmd, &d);
    printf("serve: stopped: %llu requests (%llu ok, %llu client errors, %llu server errors), "
           "%llu batches of %.2f on average\n",
           (unsigned long long)s.requests, (unsigned long long)s.ok,
           (unsigned long long)s.client_errors, (unsigned long long)s.server_errors,
           (unsigned long long)s.batches, s.mean_batch);
    if (cp_args_get(&a, OPT_MONITOR))
        printf("monitor: %llu requests seen, %llu incidents (%llu suppressed, %llu resolved), "
               "%llu empty deep traces, %llu alerts not delivered; state %s\n",
               (unsigned long long)ms.requests_seen, (unsigned long long)ms.incidents,
               (unsigned long long)ms.suppressed, (unsigned long long)ms.resolved,
               (unsigned long long)ms.capture_errors, (unsigned long long)ms.alerts_failed,
               cp_mon_state_name(ms.state));
    /* an incident whose deep trace caught nothing, or whose alert was lost,
     * is a failure of the monitor: said in the exit code too */
    return ms.capture_errors || ms.alerts_failed ? 1 : 0;
}

/* ---- load ------------------------------------------------------------------------------ */

enum { OPT_RATE = 1, OPT_CONCURRENCY };

static const struct cp_opt load_own[] = {
    {"concurrency", 0, CP_OPT_VALUE, OPT_CONCURRENCY, "C",
     "requests in flight at most (default 64); the rest wait, their latency counting"},
    {"rate", 0, CP_OPT_VALUE, OPT_RATE, "R", "requests per second, Poisson arrivals"},
};

static const struct cp_opt_use load_shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_DURATION, "how long to send (\"10s\", \"1m\")"},
    {CP_SO_JSON, "print the result as JSON"},
    {CP_SO_SEED, "the seed of the arrivals and the inputs (default 1)"},
};

static const struct cp_command_opts LOAD = {
    .cmd = "load",
    .own = load_own,
    .n_own = sizeof load_own / sizeof load_own[0],
    .shared = load_shared,
    .n_shared = sizeof load_shared / sizeof load_shared[0],
    .usage = "usage: cannprof load URL --rate R --duration D [--concurrency C] [--json]\n\n"
             "Send requests to a cannprof server open-loop: arrivals are Poisson at rate R\n"
             "whatever the server does, and each latency counts from the time the request\n"
             "was meant to leave, so a server that falls behind shows its queue (no\n"
             "coordinated omission). The requests carry seeded random inputs of the shapes\n"
             "the server's /v1/model gives. Prints the requests sent, answered and failed,\n"
             "throughput, and latency percentiles.\n",
    .exit_codes = "0 loaded (errors are counted, not fatal), 2 bad usage or no cannprof server "
                  "at URL, 3 environment failure",
};

int cp_cmd_load(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args a;
    if (cp_args_parse_cmd(&LOAD, argc, argv, &a, &d) != CP_OK) {
        cp_cli_error(LOAD.cmd, d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&a, CP_SO_HELP)) {
        cp_cmd_help(stdout, &LOAD);
        return 0;
    }
    if (a.n_positional != 1) {
        cp_cli_error(LOAD.cmd, "give the server's URL (http://host:port)");
        return 2;
    }
    const char *rate = cp_args_get(&a, OPT_RATE);
    char *end = NULL;
    double r = rate ? strtod(rate, &end) : 0;
    if (!rate || end == rate || *end || !(r > 0) || r > 1e6) {
        cp_cli_error(LOAD.cmd, "--rate takes requests per second above 0");
        return 2;
    }
    long conc = 64;
    const char *cv = cp_args_get(&a, OPT_CONCURRENCY);
    if (cv && !parse_long(cv, 1, 4096, &conc)) {
        cp_cli_error(LOAD.cmd, "--concurrency takes 1 to 4096");
        return 2;
    }
    struct cp_load_opts o = {
        .url = a.positional[0],
        .rate = r,
        .duration_s = cp_args_num(&a, CP_SO_DURATION, 10),
        .concurrency = (int)conc,
        .seed = (uint64_t)cp_args_int(&a, CP_SO_SEED, 1),
    };
    struct cp_load_result res;
    if (cp_load_run(&o, &res, &d) != CP_OK)
        return cp_cli_fail(LOAD.cmd, &d);
    if (cp_args_has(&a, CP_SO_JSON)) {
        json_t *j = json_object();
        bool ok = j && cp_json_set_str(j, "url", o.url) && cp_json_set_num(j, "rate", o.rate) &&
                  cp_json_set_int(j, "sent", (int64_t)res.sent) &&
                  cp_json_set_int(j, "ok", (int64_t)res.ok) &&
                  cp_json_set_int(j, "errors", (int64_t)res.errors) &&
                  cp_json_set_num(j, "seconds", res.seconds) &&
                  cp_json_set_num(j, "throughput", res.throughput) &&
                  cp_json_set_num(j, "latency_mean_ms", res.mean_ms) &&
                  cp_json_set_num(j, "latency_p50_ms", res.p50_ms) &&
                  cp_json_set_num(j, "latency_p90_ms", res.p90_ms) &&
                  cp_json_set_num(j, "latency_p99_ms", res.p99_ms) &&
                  cp_json_set_num(j, "latency_max_ms", res.max_ms) &&
                  cp_json_set_num(j, "max_lateness_ms", res.max_lateness_ms);
        return cp_out_json_take(ok ? j : (json_decref(j), NULL), LOAD.cmd);
    }
    printf("load: %s at %.1f req/s for %.1f s: %llu sent, %llu ok, %llu errors; %.2f req/s "
           "answered\n  latency from the intended send time: mean %.2f ms, p50 %.2f, p90 %.2f, "
           "p99 %.2f, max %.2f ms\n",
           o.url, o.rate, o.duration_s, (unsigned long long)res.sent, (unsigned long long)res.ok,
           (unsigned long long)res.errors, res.throughput, res.mean_ms, res.p50_ms, res.p90_ms,
           res.p99_ms, res.max_ms);
    return 0;
}
