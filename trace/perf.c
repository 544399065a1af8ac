/* perf_event_open(2) counters of this process; see trace/perf.h. */
#include "trace/perf.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct counter_def {
    const char *name;
    uint32_t type;
    uint64_t config;
};

static const struct counter_def defs[CP_PERF_N_COUNTERS] = {
    [CP_PERF_CACHE_REFERENCES] = {"cache_references", PERF_TYPE_HARDWARE,
                                  PERF_COUNT_HW_CACHE_REFERENCES},
    [CP_PERF_CACHE_MISSES] = {"cache_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    [CP_PERF_INSTRUCTIONS] = {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    [CP_PERF_CYCLES] = {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    [CP_PERF_TASK_CLOCK] = {"task_clock_ns", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    [CP_PERF_PAGE_FAULTS] = {"page_faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    [CP_PERF_CONTEXT_SWITCHES] = {"context_switches", PERF_TYPE_SOFTWARE,
                                  PERF_COUNT_SW_CONTEXT_SWITCHES},
};

struct cp_perf {
    int fd[CP_PERF_N_COUNTERS];  /* -1 when not open */
    int err[CP_PERF_N_COUNTERS]; /* errno of the failed open, 0 when open */
    char why[CP_PERF_N_COUNTERS][200];
    int paranoid;
};

const char *cp_perf_counter_name(enum cp_perf_counter c)
{
    return (unsigned)c < CP_PERF_N_COUNTERS ? defs[c].name : NULL;
}

int cp_perf_paranoid(void)
{
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
    if (!f)
        return -2;
    int v;
    int ok = fscanf(f, "%d", &v);
    fclose(f);
    return ok == 1 ? v : -2;
}

const char *cp_perf_errno_reason(int err, int paranoid, char *out, size_t cap)
{
    char par[64] = "";
    if (paranoid >= -1)
        snprintf(par, sizeof par, "kernel.perf_event_paranoid is %d, ", paranoid);
    switch (err) {
    case ENOENT:
        snprintf(out, cap, "the CPU exposes no such event (no PMU, as in most VMs)");
        break;
    case EACCES:
    case EPERM:
        snprintf(out, cap,
                 "perf_event_open is not permitted (%sor a seccomp filter refuses the call)", par);
        break;
    case ENOSYS:
        snprintf(out, cap, "perf_event_open does not exist here (kernel without perf events)");
        break;
    case EOPNOTSUPP:
        snprintf(out, cap, "the kernel does not support this event here");
        break;
    case EINVAL:
        snprintf(out, cap, "the kernel rejects this event (EINVAL)");
        break;
    case EMFILE:
    case ENFILE:
        snprintf(out, cap, "no file descriptor left for the counter");
        break;
    default:
        snprintf(out, cap, "perf_event_open failed: %s", strerror(err));
        break;
    }
    return out;
}

static int open_counter(const struct counter_def *def)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = def->type;
    a.config = def->config;
    a.disabled = 1;
    a.inherit = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    long fd = syscall(SYS_perf_event_open, &a, 0 /* this process */, -1 /* any cpu */,
                      -1 /* no group */, PERF_FLAG_FD_CLOEXEC);
    return fd < 0 ? -1 : (int)fd;
}

enum cp_status cp_perf_open(struct cp_perf **out, struct cp_diag *d)
{
    *out = NULL;
    struct cp_perf *p = cp_calloc(1, sizeof *p);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for perf counters");
    p->paranoid = cp_perf_paranoid();
    for (int i = 0; i < CP_PERF_N_COUNTERS; i++) {
        errno = 0;
        p->fd[i] = open_counter(&defs[i]);
        if (p->fd[i] < 0) {
            p->err[i] = errno ? errno : EINVAL;
            cp_perf_errno_reason(p->err[i], p->paranoid, p->why[i], sizeof p->why[i]);
        }
    }
    *out = p;
    return CP_OK;
}

void cp_perf_close(struct cp_perf *p)
{
    if (!p)
        return;
    for (int i = 0; i < CP_PERF_N_COUNTERS; i++)
        if (p->fd[i] >= 0)
            close(p->fd[i]);
    free(p);
}

bool cp_perf_has(const struct cp_perf *p, enum cp_perf_counter c)
{
    return p && (unsigned)c < CP_PERF_N_COUNTERS && p->fd[c] >= 0;
}

bool cp_perf_has_any(const struct cp_perf *p)
{
    for (int i = 0; p && i < CP_PERF_N_COUNTERS; i++)
        if (p->fd[i] >= 0)
            return true;
    return false;
}

int cp_perf_errno(const struct cp_perf *p, enum cp_perf_counter c)
{
    return p && (unsigned)c < CP_PERF_N_COUNTERS ? p->err[c] : 0;
}

const char *cp_perf_reason(const struct cp_perf *p, enum cp_perf_counter c)
{
    return p && (unsigned)c < CP_PERF_N_COUNTERS ? p->why[c] : "";
}

static enum cp_status ioctl_all(struct cp_perf *p, unsigned long req, const char *what,
                                struct cp_diag *d)
{
    for (int i = 0; i < CP_PERF_N_COUNTERS; i++)
        if (p->fd[i] >= 0 && ioctl(p->fd[i], req, 0) != 0)
            return cp_diag_set(d, CP_ERR_INTERNAL, "perf counter %s: %s failed: %s", defs[i].name,
                               what, strerror(errno));
    return CP_OK;
}

enum cp_status cp_perf_start(struct cp_perf *p, struct cp_diag *d)
{
    enum cp_status st = ioctl_all(p, PERF_EVENT_IOC_RESET, "reset", d);
    return st != CP_OK ? st : ioctl_all(p, PERF_EVENT_IOC_ENABLE, "enable", d);
}

enum cp_status cp_perf_pause(struct cp_perf *p, struct cp_diag *d)
{
    return ioctl_all(p, PERF_EVENT_IOC_DISABLE, "pause", d);
}

enum cp_status cp_perf_resume(struct cp_perf *p, struct cp_diag *d)
{
    return ioctl_all(p, PERF_EVENT_IOC_ENABLE, "resume", d);
}

enum cp_status cp_perf_stop(struct cp_perf *p, struct cp_perf_reading *r, struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    enum cp_status st = ioctl_all(p, PERF_EVENT_IOC_DISABLE, "disable", d);
    if (st != CP_OK)
        return st;
    for (int i = 0; i < CP_PERF_N_COUNTERS; i++) {
        uint64_t v[3]; /* value, time enabled, time running */
        if (p->fd[i] < 0 || read(p->fd[i], v, sizeof v) != (ssize_t)sizeof v || v[2] == 0)
            continue;
        r->valid[i] = true;
        r->running_share[i] = v[1] ? (double)v[2] / (double)v[1] : 1.0;
        r->value[i] = v[2] < v[1] ? (double)v[0] * ((double)v[1] / (double)v[2]) : (double)v[0];
    }
    return CP_OK;
}

enum cp_status cp_perf_store(struct cp_trace_store *s, int64_t run_id, const struct cp_perf *p,
                             const struct cp_perf_reading *r, struct cp_diag *d)
{
    if (!p)
        return CP_OK;
    enum cp_status st = CP_OK;
    char name[96];
    for (int i = 0; i < CP_PERF_N_COUNTERS && st == CP_OK; i++) {
        if (p->fd[i] >= 0 && r && r->valid[i]) {
            snprintf(name, sizeof name, "perf.%s", defs[i].name);
            st = cp_trace_store_add_counter(s, run_id, -1, name, r->value[i], 0, d);
        } else if (p->fd[i] < 0) {
            snprintf(name, sizeof name, "perf.errno.%s", defs[i].name);
            st = cp_trace_store_add_counter(s, run_id, -1, name, (double)p->err[i], 0, d);
        }
    }
    if (st == CP_OK && p->paranoid >= -1)
        st = cp_trace_store_add_counter(s, run_id, -1, "perf.paranoid", (double)p->paranoid, 0, d);
    return st;
}
