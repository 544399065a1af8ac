/* core/host: one description of the machine, from cpuinfo text whatever the
 * architecture prints. */
#include "core/host.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char X86[] = "processor\t: 0\n"
                          "vendor_id\t: AuthenticAMD\n"
                          "model name\t: AMD EPYC 7B13\n"
                          "flags\t\t: fpu sse2 avx2 fma sse4_2 avx avx512f avx512_bf16\n"
                          "\n"
                          "processor\t: 1\n"
                          "model name\t: something else\n"
                          "flags\t\t: fpu\n";

static const char ARM[] = "processor\t: 0\r\n"
                          "Features\t: fp asimd evtstrm aes bf16 i8mm\r\n"
                          "CPU implementer\t: 0x41\r\n"
                          "Hardware\t: Example SoC\r\n"
                          "Model\t\t: Raspberry Pi 4 Model B\r\n";

Test(host, x86_cpuinfo_gives_model_flags_and_the_isa_in_fixed_order)
{
    struct cp_host h;
    memset(&h, 0, sizeof h);
    cp_host_parse_cpuinfo(&h, X86, strlen(X86));
    cr_assert_str_eq(h.cpu_model, "AMD EPYC 7B13");
    cr_assert_str_eq(h.flags, "fpu sse2 avx2 fma sse4_2 avx avx512f avx512_bf16");
    /* CP_HOST_ISA_FEATURES' order, not cpuinfo's */
    cr_assert_str_eq(h.isa, "sse4_2 avx avx2 fma avx512f avx512_bf16");
    cr_assert(h.has_bf16);
    cr_assert_not(h.has_fp16);
}

Test(host, flags_match_whole_words_only)
{
    struct cp_host h;
    memset(&h, 0, sizeof h);
    cp_host_parse_cpuinfo(&h, X86, strlen(X86));
    cr_assert(cp_host_has_flag(&h, "avx"));
    cr_assert(cp_host_has_flag(&h, "avx512_bf16"));
    cr_assert_not(cp_host_has_flag(&h, "avx512"));
    cr_assert_not(cp_host_has_flag(&h, "bf16"));
    cr_assert_not(cp_host_has_flag(&h, ""));
}

Test(host, arm_cpuinfo_with_crlf_prefers_model_over_hardware)
{
    struct cp_host h;
    memset(&h, 0, sizeof h);
    cp_host_parse_cpuinfo(&h, ARM, strlen(ARM));
    cr_assert_str_eq(h.cpu_model, "Raspberry Pi 4 Model B");
    cr_assert_str_eq(h.flags, "fp asimd evtstrm aes bf16 i8mm");
    cr_assert_str_eq(h.isa, "asimd bf16 i8mm");
    /* no bf16 kernels for Arm: native bf16 is an x86 fact here */
    cr_assert_not(h.has_bf16);
}

Test(host, odd_bytes_and_missing_lines_stay_printable_and_unknown)
{
    static const char odd[] = "model name : caf\xc3\xa9\x01 cpu\nnoise without colon\n";
    struct cp_host h;
    memset(&h, 0, sizeof h);
    cp_host_parse_cpuinfo(&h, odd, sizeof odd - 1);
    cr_assert_str_eq(h.cpu_model, "caf??? cpu");
    cr_assert_str_eq(h.flags, "");
    cr_assert_str_eq(h.isa, "");
    cr_assert_not(h.has_bf16);
}

Test(host, detect_describes_this_machine)
{
    struct cp_host h;
    cp_host_detect(&h);
    cr_assert(h.cores >= 1);
    cr_assert(h.cpu_model[0]);
    cr_assert(h.arch[0]);
    /* whatever the CPU, the short form lists only features it has */
    char isa[sizeof h.isa];
    memcpy(isa, h.isa, sizeof isa);
    for (char *save = NULL, *t = strtok_r(isa, " ", &save); t; t = strtok_r(NULL, " ", &save))
        cr_assert(cp_host_has_flag(&h, t), "%s", t);
}

/* ---- priority ---------------------------------------------------------------------------- */

static int my_nice(void)
{
    return getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
}

static void *report_nice(void *arg)
{
    *(int *)arg = my_nice();
    return NULL;
}

static pthread_t parked_thread;
static pthread_mutex_t park = PTHREAD_MUTEX_INITIALIZER;
static int parked_tid;

static void *parked(void *arg)
{
    (void)arg;
    parked_tid = (int)syscall(SYS_gettid);
    pthread_mutex_lock(&park); /* held by the test until it is done */
    pthread_mutex_unlock(&park);
    return NULL;
}

Test(host, priority_raises_every_thread_and_restores_each_one)
{
    if (geteuid() != 0)
        cr_skip("raising the priority needs root here");
    int before = my_nice();
    pthread_mutex_lock(&park);
    cr_assert_eq(pthread_create(&parked_thread, NULL, parked, NULL), 0);
    while (__atomic_load_n(&parked_tid, __ATOMIC_SEQ_CST) == 0)
        usleep(1000);
    /* a thread of its own value, which restoring must give back */
    cr_assert_eq(setpriority(PRIO_PROCESS, (id_t)parked_tid, 5), 0);

    struct cp_host_priority p;
    cr_assert(cp_host_priority_raise(-20, &p), "%s", p.why);
    cr_assert(p.raised);
    cr_assert_str_empty(p.why);
    cr_assert_eq(my_nice(), -20);
    cr_assert_eq(getpriority(PRIO_PROCESS, (id_t)parked_tid), -20, "the other thread too");
    /* a thread born while raised inherits it */
    pthread_t born;
    int born_nice = 99;
    cr_assert_eq(pthread_create(&born, NULL, report_nice, &born_nice), 0);
    pthread_join(born, NULL);
    cr_assert_eq(born_nice, -20);

    /* where sessions are autogroups, the session's group is raised too */
    FILE *g = fopen("/proc/self/autogroup", "r");
    int group = 99;
    if (g) {
        cr_assert_eq(fscanf(g, "%*s nice %d", &group), 1);
        fclose(g);
        cr_expect_eq(group, -20, "the session's autogroup");
        cr_expect(p.group_raised);
    }
    cp_host_priority_restore(&p);
    cr_assert_eq(my_nice(), before);
    cr_assert_eq(getpriority(PRIO_PROCESS, (id_t)parked_tid), 5, "its own value back");
    if (g && (g = fopen("/proc/self/autogroup", "r")) != NULL) {
        cr_assert_eq(fscanf(g, "%*s nice %d", &group), 1);
        fclose(g);
        cr_expect_eq(group, p.group_before, "the group's value back");
    }
    pthread_mutex_unlock(&park);
    pthread_join(parked_thread, NULL);
}

Test(host, priority_never_lowers_a_thread_already_higher)
{
    struct cp_host_priority p;
    int before = my_nice();
    cr_assert(cp_host_priority_raise(19, &p), "%s", p.why);
    cr_assert_eq(my_nice(), before < 19 ? before : 19, "not lowered to 19");
    cp_host_priority_restore(&p);
    cr_assert_eq(my_nice(), before);
}

Test(host, priority_without_the_right_says_why_and_changes_nothing)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* as root, become nobody: no CAP_SYS_NICE, RLIMIT_NICE 0 */
        struct rlimit rl = {0, 0};
        if (setrlimit(RLIMIT_NICE, &rl) != 0)
            _exit(10);
        if (geteuid() == 0 && setuid(65534) != 0)
            _exit(11);
        int before = my_nice();
        struct cp_host_priority p;
        if (cp_host_priority_raise(-20, &p) || p.raised)
            _exit(12);
        if (!strstr(p.why, "CAP_SYS_NICE") || !strstr(p.why, "nice -20"))
            _exit(13);
        cp_host_priority_restore(&p); /* harmless */
        _exit(my_nice() == before ? 0 : 14);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), 0, "child step %d failed", WEXITSTATUS(status));
}
