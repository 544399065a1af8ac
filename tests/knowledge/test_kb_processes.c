/* knowledge base: several processes. Two processes create and write one
 * file at the same time; every baseline and validation is stored, automatic
 * tags never collide and the schema is created once. */
#include "kb_test.h"

#include <sys/wait.h>
#include <unistd.h>

TestSuite(kb_processes, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- several processes ----------------------------------------------------- */

/* In a child: open its own handle and set `n` baselines with automatic tags;
 * the exit status says how many failed (0: all stored). */
static void child_inserts(const char *path, int n)
{
    struct cp_kb *kb = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_kb_open(path, &kb, &d) != CP_OK) {
        fprintf(stderr, "child %d: %s\n", (int)getpid(), d.msg);
        _exit(100);
    }
    uint64_t lat[64], dev[64];
    struct cp_run_metrics m = metrics(64, 1000, 3, true, lat, dev);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        cp_diag_init(&d);
        if (cp_kb_baseline_set(kb, "shared", NULL, "/t.db", &m, false, NULL, &d) != CP_OK) {
            fprintf(stderr, "child %d: %s\n", (int)getpid(), d.msg);
            failed++;
        }
        struct cp_kb_validation v = {.service = "shared", .verdict = "unchanged"};
        if (cp_kb_record_validation(kb, &v, NULL, &d) != CP_OK)
            failed++;
    }
    cp_kb_close(kb);
    _exit(failed > 99 ? 99 : failed);
}

Test(kb_processes, two_processes_write_one_file_at_once)
{
    char *path = cp_t_path("shared/kb.sqlite");
    enum { PER_CHILD = 40 };
    fflush(NULL);
    pid_t pids[2];
    /* Both open a file that does not exist yet: creation races too. */
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        cr_assert_geq(pids[i], 0);
        if (pids[i] == 0)
            child_inserts(path, PER_CHILD);
    }
    for (int i = 0; i < 2; i++) {
        int status = 0;
        cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
        cr_assert(WIFEXITED(status), "child %d crashed", i);
        cr_assert_eq(WEXITSTATUS(status), 0, "child %d: %d writes failed", i, WEXITSTATUS(status));
    }
    struct cp_kb *kb = open_kb(path);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM baselines WHERE service = 'shared'"),
                 2 * PER_CHILD);
    cr_assert_eq(q_int(kb, "SELECT count(DISTINCT tag) FROM baselines"), 2 * PER_CHILD,
                 "automatic tags never collide");
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM validations"), 2 * PER_CHILD);
    cr_assert_eq(q_int(kb, "SELECT count(*) FROM schema_history"), CP_KB_SCHEMA_VERSION,
                 "the schema was created once");
    struct cp_kb_baseline b;
    get_ok(kb, "shared", "latest", &b);
    cr_assert_eq(b.m.n, 64);
    cp_kb_baseline_release(&b);
    cp_kb_close(kb);
    free(path);
}
