/*
 * Conformance: ONNX's own backend test cases, run through the whole stack.
 *
 * The cases come from Debian's libonnx-testdata (data/node,
 * data/pytorch-converted, data/pytorch-operator, data/simple under
 * /usr/share/libonnx-testdata; CP_ONNX_TESTDATA overrides the root). Each is
 * a model.onnx and test_data_set_N/{input,output}_K.pb. A case is imported
 * with its test inputs' shapes, verified, inferred, wrapped in a model and
 * planned twice, once with the fast kernels and once with the reference
 * kernels only; each plan runs on the inputs and every output is compared
 * with ONNX's default tolerances: |actual - expected| <= atol + rtol *
 * |expected|, rtol 1e-3, atol 1e-7 for floats (NaN matches NaN), exact for
 * integers and bools, and shapes must match.
 *
 * A case is skipped, with its cause counted, when it needs what cannprof
 * does not claim to support: an op outside the op table (or outside the
 * opsets its row of the importer's table covers), an opset outside 1..21, a dtype or value kind we
 * do not take, or a node no kernel accepts with its attributes and dtypes. Anything else that goes
 * wrong on a case whose ops are all supported is a failure: a mismatch, an error from the importer,
 * inference or the runtime, a crash, a hang, or (under ASan) a leak. Each case runs in its own
 * forked process, so a crashing kernel fails that case only.
 *
 * When a case fails and some of its inputs set an output's shape (Reshape's
 * shape, Slice's starts, Resize's sizes...), it is run once more with those
 * inputs folded into initializers, and the failure says whether the outputs
 * then match: that tells a planner that cannot take runtime-valued shapes
 * from a wrong kernel. The case still counts as failed.
 *
 * The summary is printed as "conformance summary: N passed, M failed, K
 * skipped": the two-word prefix keeps CI from mistaking it for a test
 * runner's own closing "N passed, M failed" line.
 *
 * CP_CONFORMANCE_FILTER=substring runs only the matching cases;
 * CP_CONFORMANCE_VERBOSE=1 prints every case's outcome.
 */
#include "conformance.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const categories[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

/* ---- the parent: fork per case, tally ----------------------------------- */

struct tally {
    size_t passed, failed, skipped;
    struct cause {
        char *text;
        size_t count;
    } * causes;
    size_t n_causes, cap_causes;
    char **failures;
    size_t n_failures, cap_failures;
};

static void tally_cause(struct tally *t, const char *text)
{
    lsan_off();
    for (size_t i = 0; i < t->n_causes; i++)
        if (strcmp(t->causes[i].text, text) == 0) {
            t->causes[i].count++;
            lsan_on();
            return;
        }
    if (t->n_causes == t->cap_causes) {
        t->cap_causes = t->cap_causes ? 2 * t->cap_causes : 64;
        t->causes = realloc(t->causes, t->cap_causes * sizeof *t->causes);
        cr_assert_not_null(t->causes);
    }
    t->causes[t->n_causes].text = strdup(text);
    t->causes[t->n_causes++].count = 1;
    lsan_on();
}

static void tally_failure(struct tally *t, const char *name, const char *detail)
{
    lsan_off();
    if (t->n_failures == t->cap_failures) {
        t->cap_failures = t->cap_failures ? 2 * t->cap_failures : 64;
        t->failures = realloc(t->failures, t->cap_failures * sizeof *t->failures);
        cr_assert_not_null(t->failures);
    }
    size_t n = strlen(name) + strlen(detail) + 4;
    char *s = malloc(n);
    cr_assert_not_null(s);
    snprintf(s, n, "%s: %s", name, detail);
    t->failures[t->n_failures++] = s;
    lsan_on();
}

static int cmp_cause(const void *a, const void *b)
{
    const struct cause *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->text, y->text);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* In the child, after the case: whether it leaked. LeakSanitizer warns in
 * every forked child that it cannot suspend the parent's thread, so its
 * output goes to a scratch file and reaches stderr only with a leak to
 * report. No allocation here: the child's stack is not scanned. */
static bool child_leaks(void)
{
    if (!__lsan_do_recoverable_leak_check)
        return false;
    char tmpl[] = "/tmp/cp_conformance_lsanXXXXXX";
    int fd = mkstemp(tmpl);
    int saved = fd >= 0 ? dup(2) : -1;
    if (fd < 0 || saved < 0)
        return __lsan_do_recoverable_leak_check() != 0;
    unlink(tmpl);
    dup2(fd, 2);
    bool leaked = __lsan_do_recoverable_leak_check() != 0;
    dup2(saved, 2);
    close(saved);
    if (leaked && lseek(fd, 0, SEEK_SET) == 0) {
        char buf[4096];
        ssize_t k;
        while ((k = read(fd, buf, sizeof buf)) > 0)
            if (write(2, buf, (size_t)k) != k)
                break;
    }
    close(fd);
    return leaked;
}

/* Run one case in a child; a crash, hang or leak is a failure of that
 * case. */
static void fork_case(const char *case_dir, struct case_result *r)
{
    memset(r, 0, sizeof *r);
    int fds[2];
    if (pipe(fds) != 0) {
        cf_set_fail(r, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cf_set_fail(r, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        struct case_result res;
        cf_run_case(case_dir, &res);
        if (child_leaks() && res.outcome != OUT_FAIL)
            cf_set_fail(&res, "leaks memory (LeakSanitizer's report is on stderr)");
        const char *p = (const char *)&res;
        size_t left = sizeof res;
        while (left) {
            ssize_t k = write(fds[1], p, left);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            p += k;
            left -= (size_t)k;
        }
        _exit(0); /* not exit(): Criterion's handlers belong to the parent */
    }
    close(fds[1]);
    size_t got = 0;
    bool timed_out = false;
    uint64_t deadline = now_ms() + CASE_TIMEOUT_MS;
    while (got < sizeof *r) {
        uint64_t t = now_ms();
        if (t >= deadline) {
            timed_out = true;
            break;
        }
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(deadline - t));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            timed_out = pr == 0;
            break;
        }
        ssize_t k = read(fds[0], (char *)r + got, sizeof *r - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out) {
        cf_set_fail(r, "timed out after %d s", CASE_TIMEOUT_MS / 1000);
    } else if (got != sizeof *r) {
        if (WIFSIGNALED(status))
            cf_set_fail(r, "crashed with signal %d (%s)", WTERMSIG(status),
                        strsignal(WTERMSIG(status)));
        else
            cf_set_fail(r, "exited with status %d without a result",
                        WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else {
        r->text[sizeof r->text - 1] = '\0';
    }
}

Test(conformance, onnx_backend_test_cases, .timeout = 0)
{
    const char *root = getenv("CP_ONNX_TESTDATA");
    if (!root || !*root)
        root = TESTDATA_ROOT;
    const char *filter = getenv("CP_CONFORMANCE_FILTER");
    const char *verbose = getenv("CP_CONFORMANCE_VERBOSE");
    struct stat sb;
    cr_assert(stat(root, &sb) == 0 && S_ISDIR(sb.st_mode),
              "%s not found: install Debian's libonnx-testdata (scripts/deps.sh does)", root);

    struct tally t;
    memset(&t, 0, sizeof t);
    uint64_t t0 = now_ms();
    for (size_t c = 0; c < sizeof categories / sizeof *categories; c++) {
        char cat_dir[PATH_LEN];
        cr_assert_lt(snprintf(cat_dir, sizeof cat_dir, "%s/%s", root, categories[c]), PATH_LEN);
        size_t n;
        lsan_off();
        char **cases = cf_list_dir(cat_dir, "test_", &n);
        lsan_on();
        cr_assert(cases && n > 0, "no test cases under %s", cat_dir);
        for (size_t i = 0; i < n; i++) {
            char name[PATH_LEN], dir[PATH_LEN];
            cr_assert_lt(snprintf(name, sizeof name, "%s/%s", categories[c], cases[i]), PATH_LEN);
            if (filter && *filter && !strstr(name, filter))
                continue;
            cr_assert_lt(snprintf(dir, sizeof dir, "%s/%s", cat_dir, cases[i]), PATH_LEN);
            struct case_result r;
            fork_case(dir, &r);
            if (verbose && *verbose && *verbose != '0')
                printf("%s: %s%s%s\n", name,
                       r.outcome == OUT_PASS   ? "pass"
                       : r.outcome == OUT_SKIP ? "skip"
                                               : "FAIL",
                       r.text[0] ? " - " : "", r.text);
            if (r.outcome == OUT_PASS) {
                t.passed++;
            } else if (r.outcome == OUT_SKIP) {
                t.skipped++;
                for (char *line = strtok(r.text, "\n"); line; line = strtok(NULL, "\n"))
                    tally_cause(&t, line);
            } else {
                t.failed++;
                tally_failure(&t, name, r.text);
            }
        }
        cf_free_list(cases, n);
    }

    if (t.n_causes)
        qsort(t.causes, t.n_causes, sizeof *t.causes, cmp_cause);
    printf("conformance summary: %zu passed, %zu failed, %zu skipped\n", t.passed, t.failed,
           t.skipped);
    printf("(%zu cases in %.1f s, each in its own process, fast and reference kernels)\n",
           t.passed + t.failed + t.skipped, (double)(now_ms() - t0) / 1000.0);
    if (t.n_causes)
        printf("skipped cases by cause (a case may have several causes):\n");
    for (size_t i = 0; i < t.n_causes; i++)
        printf("  %5zu  %s\n", t.causes[i].count, t.causes[i].text);
    if (t.n_failures)
        printf("failed cases (first mismatch or error):\n");
    for (size_t i = 0; i < t.n_failures; i++)
        printf("  %s\n", t.failures[i]);
    fflush(stdout);

    size_t failed = t.failed, passed = t.passed;
    for (size_t i = 0; i < t.n_causes; i++)
        free(t.causes[i].text);
    free(t.causes);
    for (size_t i = 0; i < t.n_failures; i++)
        free(t.failures[i]);
    free(t.failures);
    cr_assert_eq(failed, 0, "%zu conformance case(s) failed (listed above)", failed);
    if (!filter || !*filter)
        cr_assert_gt(passed, 0, "no conformance case passed");
}
