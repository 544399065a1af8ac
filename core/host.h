/*
 * core/host: the machine cannprof runs on, described once.
 *
 * Kernel choice (bf16 and fp16 arithmetic), the calibration cache key, the
 * knowledge base's hardware signature, the target an .om was built for and
 * the host block of every trace all describe the same machine; they read it
 * here, so they cannot disagree on what the CPU is or which ISA features it
 * has. The description comes from /proc/cpuinfo (x86's "model name" and
 * "flags", Arm's "Model"/"Hardware" and "Features"), uname(2), sysconf(3)
 * and the cache folders of /sys/devices/system/cpu/cpu0/cache. Nothing is
 * cached between calls: detection takes well under a millisecond and a
 * process that asks twice gets the same answer.
 */
#ifndef CP_CORE_HOST_H
#define CP_CORE_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CP_HOST_FLAGS_MAX 8192

struct cp_host {
    char cpu_model[256]; /* "AMD EPYC 7B13"; uname's machine when cpuinfo names none */
    char arch[64];       /* "x86_64", "aarch64"; "unknown" */
    char os[160];        /* "Linux 6.1.0-18-amd64"; "unknown" */
    /* Every ISA flag cpuinfo lists, space separated, as listed ("" when
     * none is listed). */
    char flags[CP_HOST_FLAGS_MAX];
    /* The flags of CP_HOST_ISA_FEATURES the CPU has, space separated, in
     * that list's order: the stable short form that keys caches and
     * signatures ("sse4_2 avx avx2 fma f16c"). */
    char isa[512];
    int cores; /* logical CPUs this process may run on (its affinity mask, so a
                * `tune --batch` job pinned to one CPU sees 1), >= 1 */
    /* Data cache sizes in bytes of cpu0: L1d, L2, L3 (0: unknown). */
    uint64_t l1d_bytes, l2_bytes, l3_bytes;
    bool has_bf16; /* native bf16 dot products: avx512_bf16 or amx_bf16 (x86 only: the
                    * runtime has no Arm bf16 kernels) */
    bool has_fp16; /* native fp16 arithmetic: avx512_fp16 (x86) */
};

/* The ISA features that change which kernels can run or how fast, in the
 * order cp_host.isa lists them. NULL-terminated. */
extern const char *const CP_HOST_ISA_FEATURES[];

/* Describe this machine. Never fails: what cannot be read stays unknown
 * ("unknown", "" or 0 as each field says). OUT: *h. */
void cp_host_detect(struct cp_host *h);

/* Describe a machine from the text of a /proc/cpuinfo (len bytes, need not
 * be NUL-terminated); the rest (arch, os, cores, caches) is left as *h has
 * it. For detection and tests. Values are cut at the field sizes and
 * characters outside printable ASCII become '?'. */
void cp_host_parse_cpuinfo(struct cp_host *h, const char *text, size_t len);

/* The logical CPUs this process may run on: the size of its affinity mask
 * (taskset, cgroups, a pinned batch job), else the online CPUs; >= 1. What
 * "all cores" means for the runtime's threads and the tuner's knobs. */
int cp_host_usable_cpus(void);

/* Whether the CPU lists `flag` ("avx2", "avx512_bf16") among its flags. */
bool cp_host_has_flag(const struct cp_host *h, const char *flag);

/* ---- the process's share of the CPUs ---------------------------------------
 *
 * A measurement on a machine that runs other work can ask for a larger share
 * of the CPUs than the rest: every thread of this process gets a lower nice
 * value (setpriority(2) per thread, since Linux keeps a nice value per
 * thread; threads created later inherit their creator's). It needs
 * CAP_SYS_NICE or an RLIMIT_NICE that allows it; without, nothing changes
 * and the reason is given. Restoring gives each thread its value from
 * before, and a thread that appeared since the value its creator had.
 * Where the kernel schedules sessions as autogroups, the session's group
 * is raised to the same value (and restored): the other processes of this
 * session share the group's larger share while it lasts. */

#define CP_HOST_PRIORITY_THREADS 512

struct cp_host_priority {
    bool raised; /* the threads run at `nice` */
    int nice;    /* the value asked for */
    int before;  /* the calling thread's value before */
    size_t n;    /* threads whose value was saved */
    int tid[CP_HOST_PRIORITY_THREADS];
    int saved[CP_HOST_PRIORITY_THREADS];
    char why[160]; /* why not raised ("" when raised) */
    /* The session's autogroup (/proc/self/autogroup, when the kernel
     * groups by session): the scheduler shares the CPUs between autogroups
     * first, so work started in another session (another terminal, a job
     * of its own) is held back only by the group's nice value. */
    bool group_raised;
    int group_before;
};

/* Give every thread of this process nice value `nice` (-20 .. 19; lower is
 * more CPU). false when the calling thread's cannot be set (p->why says
 * why, nothing changed); true otherwise, threads that could not be set
 * being left as they were. OUT: *p, for cp_host_priority_restore. */
bool cp_host_priority_raise(int nice, struct cp_host_priority *p);

/* Undo cp_host_priority_raise (nothing when it did not raise). */
void cp_host_priority_restore(const struct cp_host_priority *p);

#endif
