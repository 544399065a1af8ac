/* The host description (core/host.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT_S */
#include "core/host.h"
#include "core/core.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

const char *const CP_HOST_ISA_FEATURES[] = {
    /* x86 */
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
    /* Arm */
    "asimd", "asimddp", "asimdhp", "sve", "sve2", "bf16", "i8mm", "sme", NULL};

/* Keys naming the CPU model, best first: x86, then what Arm and other
 * kernels print. */
static const char *const MODEL_KEYS[] = {"model name", "Model", "Hardware", "cpu model",
                                         "Processor",  "uarch", NULL};
static const char *const FLAG_KEYS[] = {"flags", "Features", "isa", NULL};

static int key_rank(const char *const *keys, const char *key, size_t n)
{
    for (int i = 0; keys[i]; i++)
        if (strlen(keys[i]) == n && strncmp(keys[i], key, n) == 0)
            return i;
    return -1;
}

static void copy_printable(char *dst, size_t cap, const char *src, size_t n)
{
    if (cap == 0)
        return;
    if (n >= cap)
        n = cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c == '\t' ? ' ' : c < 0x20 || c > 0x7e ? '?' : (char)c;
    }
    dst[n] = '\0';
}

bool cp_host_has_flag(const struct cp_host *h, const char *flag)
{
    size_t n = strlen(flag);
    if (n == 0)
        return false;
    for (const char *p = h->flags; (p = strstr(p, flag)) != NULL; p += n) {
        bool starts = p == h->flags || p[-1] == ' ';
        bool ends = p[n] == '\0' || p[n] == ' ';
        if (starts && ends)
            return true;
    }
    return false;
}

void cp_host_parse_cpuinfo(struct cp_host *h, const char *text, size_t len)
{
    int model_rank = 99, flag_rank = 99;
    const char *end = text + len;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *le = nl ? nl : end;
        const char *colon = memchr(line, ':', (size_t)(le - line));
        if (colon) {
            const char *ke = colon;
            while (ke > line && (ke[-1] == ' ' || ke[-1] == '\t'))
                ke--;
            const char *v = colon + 1;
            while (v < le && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = le;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            size_t kn = (size_t)(ke - line), vn = (size_t)(ve - v);
            int r;
            /* The first line of the best-ranked key wins: every processor
             * repeats the same lines. */
            if (vn && (r = key_rank(MODEL_KEYS, line, kn)) >= 0 && r < model_rank) {
                copy_printable(h->cpu_model, sizeof h->cpu_model, v, vn);
                model_rank = r;
            }
            if (vn && (r = key_rank(FLAG_KEYS, line, kn)) >= 0 && r < flag_rank) {
                copy_printable(h->flags, sizeof h->flags, v, vn);
                flag_rank = r;
            }
        }
        line = nl ? nl + 1 : end;
    }
    size_t used = 0;
    h->isa[0] = '\0';
    for (size_t i = 0; CP_HOST_ISA_FEATURES[i]; i++) {
        if (!cp_host_has_flag(h, CP_HOST_ISA_FEATURES[i]))
            continue;
        int w = snprintf(h->isa + used, sizeof h->isa - used, "%s%s", used ? " " : "",
                         CP_HOST_ISA_FEATURES[i]);
        if (w < 0 || (size_t)w >= sizeof h->isa - used)
            break;
        used += (size_t)w;
    }
    bool x86 = cp_host_has_flag(h, "sse2") || cp_host_has_flag(h, "avx");
    h->has_bf16 = x86 && (cp_host_has_flag(h, "avx512_bf16") || cp_host_has_flag(h, "amx_bf16"));
    h->has_fp16 = x86 && cp_host_has_flag(h, "avx512_fp16");
}

/* A sysfs cache size: "32K", "1024K", "16M". 0 when unreadable. */
static uint64_t read_size(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[64] = "";
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok)
        return 0;
    char *e;
    unsigned long long v = strtoull(buf, &e, 10);
    uint64_t mul = *e == 'K' ? 1024 : *e == 'M' ? 1024 * 1024 : *e == 'G' ? 1024ull << 20 : 1;
    return (uint64_t)v * mul;
}

static void read_line(const char *path, char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(out, (int)n, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
}

static void detect_caches(struct cp_host *h)
{
    for (int i = 0; i < 16; i++) {
        char base[128], path[160], level[16], type[32];
        snprintf(base, sizeof base, "/sys/devices/system/cpu/cpu0/cache/index%d", i);
        snprintf(path, sizeof path, "%s/level", base);
        read_line(path, level, sizeof level);
        if (!level[0])
            break;
        snprintf(path, sizeof path, "%s/type", base);
        read_line(path, type, sizeof type);
        snprintf(path, sizeof path, "%s/size", base);
        uint64_t size = read_size(path);
        if (strcmp(level, "1") == 0 && strcmp(type, "Data") == 0)
            h->l1d_bytes = size;
        else if (strcmp(level, "2") == 0)
            h->l2_bytes = size;
        else if (strcmp(level, "3") == 0)
            h->l3_bytes = size;
    }
}

/* The whole of a file whose size stat cannot tell (/proc reports 0).
 * NULL when it cannot be read or out of memory. OUT: *len. */
static char *read_all(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 0;
    char *buf = NULL;
    for (;;) {
        if (*len == cap) {
            size_t ncap = cap ? cap * 2 : 16384;
            char *g = ncap < (64u << 20) ? realloc(buf, ncap) : NULL;
            if (!g) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = g;
            cap = ncap;
        }
        size_t r = fread(buf + *len, 1, cap - *len, f);
        *len += r;
        if (r == 0)
            break;
    }
    fclose(f);
    return buf;
}

void cp_host_detect(struct cp_host *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->arch, sizeof h->arch, "unknown");
    snprintf(h->os, sizeof h->os, "unknown");
    struct utsname u;
    if (uname(&u) == 0) {
        snprintf(h->arch, sizeof h->arch, "%.63s", u.machine);
        snprintf(h->os, sizeof h->os, "%.64s %.64s", u.sysname, u.release);
    }
    size_t len = 0;
    char *text = read_all("/proc/cpuinfo", &len);
    if (text)
        cp_host_parse_cpuinfo(h, text, len);
    free(text);
    if (!h->cpu_model[0])
        snprintf(h->cpu_model, sizeof h->cpu_model, "%s", h->arch);
    h->cores = cp_host_usable_cpus();
    detect_caches(h);
}

int cp_host_usable_cpus(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = online > 0 && online < 100000 ? (int)online : 1;
    /* a mask large enough for every CPU the kernel may number */
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    int max = conf > n && conf < 100000 ? (int)conf : n;
    max = max < 1024 ? 1024 : max;
    cpu_set_t *set = CPU_ALLOC((size_t)max);
    if (!set)
        return n;
    size_t size = CPU_ALLOC_SIZE((size_t)max);
    CPU_ZERO_S(size, set);
    int in_mask = sched_getaffinity(0, size, set) == 0 ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    return in_mask > 0 && in_mask < n ? in_mask : n;
}

/* ---- priority ------------------------------------------------------------- */

/* Nice value of thread tid, or -1000 when it cannot be read (it ended). */
static int thread_nice(int tid)
{
    errno = 0;
    int v = getpriority(PRIO_PROCESS, (id_t)tid);
    return v == -1 && errno ? -1000 : v;
}

/* Calls fn(tid, ctx) for every thread of this process /proc lists. */
static void each_thread(void (*fn)(int tid, void *ctx), void *ctx)
{
    DIR *dir = opendir("/proc/self/task");
    if (!dir)
        return;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (end != e->d_name && *end == '\0' && tid > 0 && tid <= INT32_MAX)
            fn((int)tid, ctx);
    }
    closedir(dir);
}

static void raise_one(int tid, void *ctx)
{
    struct cp_host_priority *p = ctx;
    int v = thread_nice(tid);
    if (v == -1000 || v <= p->nice || p->n == CP_HOST_PRIORITY_THREADS)
        return; /* gone, already at least as high, or no room to remember it */
    if (setpriority(PRIO_PROCESS, (id_t)tid, p->nice) == 0) {
        p->tid[p->n] = tid;
        p->saved[p->n] = v;
        p->n++;
    }
}

/* The nice value of this session's autogroup ("/autogroup-123 nice 0"),
 * or -1000 when there is none (autogroups off, or no /proc). */
static int group_nice(void)
{
    FILE *f = fopen("/proc/self/autogroup", "r");
    if (!f)
        return -1000;
    int v = -1000;
    if (fscanf(f, "%*s nice %d", &v) != 1)
        v = -1000;
    fclose(f);
    return v;
}

static bool set_group_nice(int v)
{
    FILE *f = fopen("/proc/self/autogroup", "w");
    if (!f)
        return false;
    bool ok = fprintf(f, "%d", v) > 0;
    return fclose(f) == 0 && ok;
}

static void raise_group(struct cp_host_priority *p)
{
    p->group_before = group_nice();
    if (p->group_before != -1000 && p->group_before > p->nice)
        p->group_raised = set_group_nice(p->nice);
}

bool cp_host_priority_raise(int nice, struct cp_host_priority *p)
{
    memset(p, 0, sizeof *p);
    p->nice = nice < -20 ? -20 : nice > 19 ? 19 : nice;
    int self = (int)syscall(SYS_gettid);
    p->before = thread_nice(self);
    if (p->before == -1000) {
        snprintf(p->why, sizeof p->why, "this thread's nice value cannot be read: %s",
                 strerror(errno));
        return false;
    }
    if (p->before > p->nice && setpriority(PRIO_PROCESS, (id_t)self, p->nice) != 0) {
        int e = errno;
        snprintf(p->why, sizeof p->why,
                 "nice %d needs CAP_SYS_NICE (root) or an RLIMIT_NICE of %d (ulimit -e): %s",
                 p->nice, 20 - p->nice, strerror(e));
        return false;
    }
    if (p->before > p->nice) { /* remember the caller first, then the others */
        p->tid[0] = self;
        p->saved[0] = p->before;
        p->n = 1;
    }
    each_thread(raise_one, p);
    p->raised = true;
    raise_group(p);
    return true;
}

struct restore_ctx {
    const struct cp_host_priority *p;
};

static void restore_one(int tid, void *ctx)
{
    const struct cp_host_priority *p = ((struct restore_ctx *)ctx)->p;
    for (size_t i = 0; i < p->n; i++)
        if (p->tid[i] == tid) {
            setpriority(PRIO_PROCESS, (id_t)tid, p->saved[i]);
            return;
        }
    /* born while raised: it inherited the raised value from its creator */
    if (thread_nice(tid) == p->nice && p->before > p->nice)
        setpriority(PRIO_PROCESS, (id_t)tid, p->before);
}

void cp_host_priority_restore(const struct cp_host_priority *p)
{
    if (!p->raised)
        return;
    struct restore_ctx c = {p};
    each_thread(restore_one, &c);
    if (p->group_raised)
        (void)set_group_nice(p->group_before);
}
