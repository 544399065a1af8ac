/* `cannprof tune MODEL --serve` (tuner/serve_tune.c): the knobs of
 * `cannprof serve`, measured by serving the model with this very program.
 * What a run reports is checked, never which knobs won (that is a
 * measurement: docs/tuning.md); a model whose batch cannot be set gets no
 * batching candidate and says why; bad options are refused. */
#include "cli/cli_test.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TestSuite(serve_tune, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 600);

/* The knobs object of a result: sane values. */
static void check_knobs(const json_t *k)
{
    cr_assert(json_is_object(k));
    cr_expect_geq(ct_num(k, "max_batch"), 1);
    cr_expect_leq(ct_num(k, "max_batch"), 64);
    cr_expect_geq(ct_num(k, "batch_window_ms"), 0);
    cr_expect_geq(ct_num(k, "threads"), 1);
}

/* Runs a short tuning of `model` and returns its JSON. */
static json_t *tune_served(const char *model, const char *target, const char *budget,
                           const char *priority)
{
    char *out = cp_t_path("serve-tune"), *kb = cp_t_path("kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "tune", model, "--serve", "--target", target, "--budget", budget, "--pairs", "3",
               "--duration", "300ms", "-o", out, "--json", "--quiet", "--priority", priority,
               "--kb", kb, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    /* the run is in the knowledge base it names */
    json_t *k = json_object_get(j, "knowledge_base");
    cr_expect_str_eq(json_string_value(json_object_get(k, "path")), kb);
    cr_expect_gt(ct_num(k, "session"), 0);
    free(out);
    free(kb);
    return j;
}

Test(serve_tune, a_served_model_is_measured_and_its_serve_command_printed)
{
    char buf[2048];
    json_t *j =
        tune_served(cp_example_model(buf, sizeof buf, "resnet_tiny"), "throughput", "2", "high");
    /* as root the load and the servers ran raised; otherwise refused */
    cr_expect_str_eq(json_string_value(json_object_get(j, "priority")),
                     geteuid() == 0 ? "high" : "normal");
    cr_expect_gt(ct_num(j, "capacity"), 0);
    cr_expect_gt(ct_num(j, "rate"), ct_num(j, "capacity"), "throughput: above the capacity");
    cr_expect_gt(ct_num(j, "call_ms"), 0);
    check_knobs(json_object_get(j, "original"));
    check_knobs(json_object_get(j, "best"));
    cr_expect_eq(ct_num(json_object_get(j, "original"), "max_batch"), 1);
    json_t *steps = json_object_get(j, "steps");
    size_t n = json_array_size(steps);
    cr_expect_eq((double)n, ct_num(j, "evaluations"));
    cr_expect_geq(n, 1);
    cr_expect_leq(n, 2);
    /* an .onnx with its batch settable: throughput tries batching first */
    cr_expect(json_is_true(json_object_get(j, "batch_settable")));
    const char *first = json_string_value(json_object_get(json_array_get(steps, 0), "change"));
    cr_expect_str_eq(first, "max_batch 1 -> 2");
    size_t accepted = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(steps, i);
        cr_expect(json_string_value(json_object_get(s, "reason"))[0]);
        if (json_is_true(json_object_get(s, "accepted"))) {
            accepted++;
            cr_expect_str_eq(json_string_value(json_object_get(s, "verdict")), "improved");
        }
    }
    /* the best knobs are the start's unless a step was accepted, and the
     * command serves exactly them */
    const json_t *best = json_object_get(j, "best");
    char *cmd =
        cp_t_fmt("--max-batch %d --batch-window %g --threads %d", (int)ct_num(best, "max_batch"),
                 ct_num(best, "batch_window_ms"), (int)ct_num(best, "threads"));
    const char *command = json_string_value(json_object_get(j, "command"));
    cr_expect(strncmp(command, "cannprof serve ", 15) == 0, "%s", command);
    cr_expect(strstr(command, cmd), "%s lacks %s", command, cmd);
    if (!accepted)
        cr_expect(json_equal(json_object_get(j, "original"), json_object_get(j, "best")));
    else
        cr_expect(isfinite(ct_num(j, "final_change_pct")) || json_object_get(j, "final_failed"));
    free(cmd);
    json_decref(j);
}

Test(serve_tune, a_model_whose_batch_is_fixed_gets_no_batching_candidate)
{
    /* its Reshape to 1x4x32x32 pins the batch: --max-batch 2 cannot serve it */
    char *om = ct_convert("text_encoder_tiny");
    json_t *j = tune_served(om, "latency", "1", "normal");
    cr_expect_str_eq(json_string_value(json_object_get(j, "priority")), "normal");
    cr_expect(json_is_false(json_object_get(j, "batch_settable")));
    const char *why = json_string_value(json_object_get(j, "batch_why"));
    cr_assert(why);
    cr_expect(strstr(why, "--max-batch"), "%s", why);
    json_t *steps = json_object_get(j, "steps");
    for (size_t i = 0; i < json_array_size(steps); i++)
        cr_expect_null(strstr(
            json_string_value(json_object_get(json_array_get(steps, i), "change")), "max_batch"));
    cr_expect_lt(ct_num(j, "rate"), ct_num(j, "capacity"), "latency: below the capacity");
    json_decref(j);
    free(om);
}

Test(serve_tune, bad_options_are_refused)
{
    char buf[2048];
    const char *model = cp_example_model(buf, sizeof buf, "resnet_tiny");
    const char *bad[][3] = {
        {"--serve", "--requests", "50"},     {"--serve", "--max-batch", "0"},
        {"--serve", "--batch-window", "-1"}, {"--serve", "--pairs", "2"},
        {"--serve", "--target", "memory"},   {"--serve", "--int8", NULL},
        {"--max-batch", "4", NULL},          {"--duration", "2s", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cp_run r;
        if (bad[i][2])
            cp_run_cli(&r, "tune", model, bad[i][0], bad[i][1], bad[i][2], NULL);
        else
            cp_run_cli(&r, "tune", model, bad[i][0], bad[i][1], NULL);
        cr_expect_eq(r.exit_code, 2, "%s %s: %s", bad[i][0], bad[i][1], r.err);
        cr_expect(strstr(r.err, "error:"), "%s", r.err);
        cp_run_release(&r);
    }
}

/* The children of process `parent` now (from /proc). OUT: pids, returns how many. */
static size_t children_of(pid_t parent, pid_t *pids, size_t cap)
{
    size_t n = 0;
    DIR *dir = opendir("/proc");
    cr_assert_not_null(dir);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL && n < cap) {
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/%.200s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "PPid:", 5) == 0 && atoi(line + 5) == parent)
                pids[n++] = atoi(e->d_name);
        fclose(f);
    }
    closedir(dir);
    return n;
}

/* A tuner killed outright leaves no server running: each gets SIGTERM when
 * its parent dies, and drains. */
Test(serve_tune, a_killed_tuner_leaves_no_server_behind)
{
    char buf[2048];
    char *out = cp_t_path("serve-tune-killed");
    char *port0 = cp_t_fmt("%s/serve-0.port", out);
    pid_t t = fork();
    cr_assert_geq(t, 0);
    if (t == 0) {
        int null_fd = open("/dev/null", O_WRONLY);
        dup2(null_fd, 1);
        dup2(null_fd, 2);
        execl(CP_CLI, CP_CLI, "tune", cp_example_model(buf, sizeof buf, "resnet_tiny"), "--serve",
              "--duration", "5s", "--pairs", "3", "-o", out, "--quiet", "--kb",
              cp_t_path("kb.sqlite"), (char *)NULL);
        _exit(127);
    }
    /* until its first server listens */
    for (int i = 0; i < 6000 && access(port0, R_OK) != 0; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    cr_assert_eq(access(port0, R_OK), 0, "the tuner's first server did not start");
    pid_t kids[16];
    size_t n = children_of(t, kids, 16);
    cr_assert_geq(n, 1, "a server is the tuner's child");
    kill(t, SIGKILL);
    waitpid(t, NULL, 0);
    for (size_t k = 0; k < n; k++) {
        bool gone = false;
        for (int i = 0; i < 3000 && !gone; i++) {
            /* reaped by init once it exits; until then it may be a zombie */
            char path[64], state = '?';
            snprintf(path, sizeof path, "/proc/%d/stat", (int)kids[k]);
            FILE *f = fopen(path, "r");
            if (!f || fscanf(f, "%*d %*s %c", &state) != 1 || state == 'Z')
                gone = true;
            if (f)
                fclose(f);
            if (!gone)
                nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        }
        cr_expect(gone, "server %d still runs after its tuner was killed", (int)kids[k]);
        if (!gone)
            kill(kids[k], SIGKILL);
    }
    free(port0);
    free(out);
}
