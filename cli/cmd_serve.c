/* cannprof serve and cannprof load (serve/serve.h, docs/serving.md). */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json.h"
#include "serve/serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_PORT = 1, OPT_MAX_BATCH, OPT_WINDOW, OPT_READY, OPT_MAX_BODY };

static const struct cp_opt serve_own[] = {
    {"batch-window", 0, CP_OPT_VALUE, OPT_WINDOW, "MS",
     "how long a batch waits to fill, in milliseconds (default 0: it goes with what is queued)"},
    {"max-batch", 0, CP_OPT_VALUE, OPT_MAX_BATCH, "N",
     "run up to N requests together (1 .. 256, default 1); the model's batch must be settable"},
    {"max-body", 0, CP_OPT_VALUE, OPT_MAX_BODY, "BYTES",
     "largest request body accepted (default: the inputs' size + 1 MiB); larger ones get 413"},
    {"port", 0, CP_OPT_VALUE, OPT_PORT, "P", "the port to listen on (0: any free one, printed)"},
    {"ready-file", 0, CP_OPT_VALUE, OPT_READY, "FILE",
     "write the port to FILE once listening (for scripts and tests)"},
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
             "MS]\n\n"
             "Serve a model over HTTP (docs/serving.md): GET /v1/model describes its inputs\n"
             "and outputs, POST /v1/infer runs it (one .npy part per input as\n"
             "multipart/form-data, or a JSON header line then the inputs' bytes; the answer\n"
             "comes in the same form), GET /health, GET /metrics (Prometheus text: requests,\n"
             "latency and batch size histograms, queue depth). Requests are batched\n"
             "dynamically. SIGTERM or Ctrl-C stops accepting, finishes what is in flight and\n"
             "exits.\n",
    .exit_codes = "0 stopped after SIGTERM/SIGINT, 2 bad usage or a model that cannot be served, "
                  "3 environment failure (the port cannot be bound)",
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
    struct cp_serve_opts o = {
        .model_path = a.positional[0],
        .port = (int)port,
        .max_batch = (int)batch,
        .window_ms = window,
        .threads = (int)cp_args_int(&a, CP_SO_THREADS, 0),
        .max_body = (size_t)body,
        .ready_file = cp_args_get(&a, OPT_READY),
    };
    struct cp_serve_stats s;
    if (cp_serve_run(&o, &s, &d) != CP_OK)
        return cp_cli_fail(SERVE.cmd, &d);
    printf("serve: stopped: %llu requests (%llu ok, %llu client errors, %llu server errors), "
           "%llu batches of %.2f on average\n",
           (unsigned long long)s.requests, (unsigned long long)s.ok,
           (unsigned long long)s.client_errors, (unsigned long long)s.server_errors,
           (unsigned long long)s.batches, s.mean_batch);
    return 0;
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
