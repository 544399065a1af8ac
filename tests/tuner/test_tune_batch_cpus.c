/* How the jobs of `tune --batch` share the CPUs (cp_tune_batch_plan_cpus):
 * a pure function of the CPU set, --jobs, --threads and the number of
 * models, checked here on CPU sets given to it rather than this machine's.
 * Jobs never share a CPU, jobs x threads never exceeds the CPUs unless one
 * job alone asks for more, and the note says why fewer jobs run than
 * asked. */
#include "tuner/tuner.h"

#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

TestSuite(tune_batch_cpus);

static struct cp_tune_batch_plan plan(const int *cpus, size_t n, int jobs, int threads,
                                      size_t models)
{
    struct cp_tune_batch_plan p;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune_batch_plan_cpus(cpus, n, jobs, threads, models, &p, &d), CP_OK, "%s",
                 d.msg);
    cr_assert_not_null(p.note);
    return p;
}

/* The CPUs of the job that tunes model m, as Linux writes a list ("0-1"). */
static char *cpus_of(const struct cp_tune_batch_plan *p, size_t m)
{
    size_t n = 0;
    const int *cpus = cp_tune_batch_plan_job_cpus(p, m, &n);
    struct cp_buf b;
    cp_buf_init(&b);
    cp_tune_cpus_format(cpus, n, &b);
    cr_assert_eq(cp_buf_status(&b), CP_OK);
    return b.data ? cp_buf_steal(&b) : strdup("");
}

static void expect_cpus(const struct cp_tune_batch_plan *p, size_t m, const char *want)
{
    char *got = cpus_of(p, m);
    cr_expect_str_eq(got, want, "model %zu: %s (note: %s)", m, got, p->note);
    free(got);
}

Test(tune_batch_cpus, two_jobs_on_two_cpus_get_one_cpu_and_one_thread_each)
{
    const int cpus[] = {0, 1};
    struct cp_tune_batch_plan p = plan(cpus, 2, 2, 0, 2);
    cr_expect_eq(p.workers, 2);
    cr_expect_eq(p.threads, 1);
    cr_expect_eq(p.per_job, 1);
    cr_expect(!p.reduced);
    expect_cpus(&p, 0, "0");
    expect_cpus(&p, 1, "1");
    cr_expect(strstr(p.note, "2 jobs, each pinned to 1 CPU with 1 tuning thread: job 1 on CPU 0, "
                             "job 2 on CPU 1"),
              "%s", p.note);
    cp_tune_batch_plan_release(&p);
    cr_expect_null(p.cpus);
    cr_expect_null(p.note);
}

Test(tune_batch_cpus, explicit_threads_that_do_not_fit_run_fewer_jobs_and_say_why)
{
    const int cpus[] = {0, 1};
    struct cp_tune_batch_plan p = plan(cpus, 2, 2, 2, 2);
    cr_expect_eq(p.workers, 1);
    cr_expect_eq(p.threads, 2, "the --threads given is kept");
    cr_expect(p.reduced);
    expect_cpus(&p, 0, "0-1");
    /* both models go to the one job */
    expect_cpus(&p, 1, "0-1");
    cr_expect(strstr(p.note, "--jobs 2 with --threads 2 needs 4 CPUs, 2 available: running 1 job "
                             "at a time"),
              "%s", p.note);
    cp_tune_batch_plan_release(&p);
}

Test(tune_batch_cpus, explicit_threads_that_fit_keep_jobs_times_threads_within_the_cpus)
{
    const int cpus[] = {0, 1, 2, 3, 4, 5, 6, 7};
    struct cp_tune_batch_plan p = plan(cpus, 8, 3, 2, 10);
    cr_expect_eq(p.workers, 3);
    cr_expect_eq(p.threads, 2);
    cr_expect(p.workers * p.threads <= 8);
    expect_cpus(&p, 0, "0-1");
    expect_cpus(&p, 1, "2-3");
    expect_cpus(&p, 2, "4-5");
    cr_expect(!p.reduced);
    cr_expect(strstr(p.note, "CPUs 6-7 left idle"), "%s", p.note);
    cp_tune_batch_plan_release(&p);
    /* --threads 3 on 8 CPUs: two jobs of 4 CPUs, not three */
    p = plan(cpus, 8, 3, 3, 10);
    cr_expect_eq(p.workers, 2);
    cr_expect_eq(p.per_job, 4);
    cr_expect(p.reduced);
    cr_expect(strstr(p.note, "--jobs 3 with --threads 3 needs 9 CPUs, 8 available: running 2 jobs "
                             "at a time"),
              "%s", p.note);
    cp_tune_batch_plan_release(&p);
}

Test(tune_batch_cpus, more_threads_than_cpus_run_one_job_on_every_cpu)
{
    const int cpus[] = {0, 1};
    struct cp_tune_batch_plan p = plan(cpus, 2, 2, 4, 2);
    cr_expect_eq(p.workers, 1);
    cr_expect_eq(p.threads, 4);
    expect_cpus(&p, 0, "0-1");
    cr_expect(strstr(p.note, "needs 4 CPUs per job, 2 available: running 1 job at a time"), "%s",
              p.note);
    cr_expect(strstr(p.note, "its 4 threads share 2 CPUs"), "%s", p.note);
    cp_tune_batch_plan_release(&p);
}

/* Every job the same number of CPUs: 1, 1, 1 and one idle, not 2, 1, 1,
 * so that no model's result depends on which job tuned it. */
Test(tune_batch_cpus, three_jobs_on_four_cpus_get_one_each_and_the_fourth_stays_idle)
{
    const int cpus[] = {0, 1, 2, 3};
    struct cp_tune_batch_plan p = plan(cpus, 4, 3, 0, 3);
    cr_expect_eq(p.workers, 3);
    cr_expect_eq(p.per_job, 1);
    cr_expect_eq(p.threads, 1);
    expect_cpus(&p, 0, "0");
    expect_cpus(&p, 1, "1");
    expect_cpus(&p, 2, "2");
    cr_expect(!p.reduced);
    cr_expect(strstr(p.note, "CPU 3 left idle so that every job gets as many"), "%s", p.note);
    cp_tune_batch_plan_release(&p);
}

/* taskset -c 1,3: the CPUs are the mask's, whatever their numbers. */
Test(tune_batch_cpus, a_mask_with_gaps_gives_each_job_cpus_of_the_mask)
{
    const int cpus[] = {3, 1};
    struct cp_tune_batch_plan p = plan(cpus, 2, 2, 0, 5);
    cr_expect_eq(p.workers, 2);
    expect_cpus(&p, 0, "1");
    expect_cpus(&p, 1, "3");
    /* models go to the jobs in turn */
    expect_cpus(&p, 2, "1");
    expect_cpus(&p, 3, "3");
    cp_tune_batch_plan_release(&p);
    /* one job on both: a list, not a range */
    p = plan(cpus, 2, 1, 0, 5);
    expect_cpus(&p, 0, "1,3");
    cr_expect_eq(p.threads, 2);
    cr_expect(strstr(p.note, "1 job on CPUs 1,3 with 2 tuning threads"), "%s", p.note);
    cp_tune_batch_plan_release(&p);
}

Test(tune_batch_cpus, more_jobs_than_models_split_the_cpus_between_the_models)
{
    const int cpus[] = {0, 1, 2, 3};
    struct cp_tune_batch_plan p = plan(cpus, 4, 8, 0, 2);
    cr_expect_eq(p.workers, 2);
    cr_expect_eq(p.per_job, 2);
    cr_expect_eq(p.threads, 2);
    cr_expect(!p.reduced, "two models want two jobs, not eight");
    expect_cpus(&p, 0, "0-1");
    expect_cpus(&p, 1, "2-3");
    cp_tune_batch_plan_release(&p);
}

Test(tune_batch_cpus, more_jobs_than_cpus_run_one_job_per_cpu_and_say_so)
{
    const int cpus[] = {0, 1};
    struct cp_tune_batch_plan p = plan(cpus, 2, 4, 0, 4);
    cr_expect_eq(p.workers, 2);
    cr_expect_eq(p.threads, 1);
    cr_expect(p.reduced);
    cr_expect(strstr(p.note, "--jobs 4 on 2 CPUs: running 2 jobs at a time"), "%s", p.note);
    cp_tune_batch_plan_release(&p);
    /* fewer models than jobs, still more than CPUs */
    const int one[] = {5};
    p = plan(one, 1, 4, 0, 3);
    cr_expect_eq(p.workers, 1);
    expect_cpus(&p, 2, "5");
    cr_expect(strstr(p.note, "--jobs 4 for 3 models on 1 CPU: running 1 job at a time"), "%s",
              p.note);
    cp_tune_batch_plan_release(&p);
}

Test(tune_batch_cpus, repeated_cpus_count_once)
{
    const int cpus[] = {2, 0, 2, 0};
    struct cp_tune_batch_plan p = plan(cpus, 4, 2, 0, 2);
    cr_expect_eq(p.n_cpus, 2);
    expect_cpus(&p, 0, "0");
    expect_cpus(&p, 1, "2");
    cp_tune_batch_plan_release(&p);
}

Test(tune_batch_cpus, arguments_out_of_range_are_refused)
{
    const int cpus[] = {0, 1}, negative[] = {0, -1};
    struct {
        const int *cpus;
        size_t n;
        int jobs, threads;
        size_t models;
        const char *what;
    } bad[] = {
        {cpus, 0, 1, 0, 1, "no CPUs"},
        {NULL, 2, 1, 0, 1, "no CPUs"},
        {cpus, 2, 0, 0, 1, "0 jobs"},
        {cpus, 2, CP_TUNE_MAX_JOBS + 1, 0, 1, "jobs (1 to"},
        {cpus, 2, 1, -1, 1, "-1 threads"},
        {cpus, 2, 1, 0, 0, "no models"},
        {negative, 2, 1, 0, 1, "-1 is not a CPU"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cp_tune_batch_plan p;
        memset(&p, 0xab, sizeof p);
        struct cp_diag d;
        cp_diag_init(&d);
        cr_expect_eq(cp_tune_batch_plan_cpus(bad[i].cpus, bad[i].n, bad[i].jobs, bad[i].threads,
                                             bad[i].models, &p, &d),
                     CP_ERR_INVALID, "case %zu", i);
        cr_expect(strstr(d.msg, bad[i].what), "case %zu: %s", i, d.msg);
        cr_expect_null(p.cpus, "outputs are left empty");
        cr_expect_null(p.note);
    }
}

Test(tune_batch_cpus, cpu_lists_read_as_linux_writes_them)
{
    const int v[] = {0, 1, 2, 3, 5, 8, 9};
    struct cp_buf b;
    cp_buf_init(&b);
    cp_tune_cpus_format(v, 7, &b);
    cr_expect_str_eq(b.data, "0-3,5,8-9");
    cp_buf_release(&b);
}

/* This process's CPUs: what the batch plans with. */
Test(tune_batch_cpus, this_process_has_at_least_one_cpu_in_ascending_order)
{
    int *cpus = NULL;
    size_t n = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune_affinity(&cpus, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_geq(n, 1);
    for (size_t i = 1; i < n; i++)
        cr_expect_lt(cpus[i - 1], cpus[i]);
    free(cpus);
}
