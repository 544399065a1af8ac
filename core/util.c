/* Clock, logging and small text helpers. */
#include "core/core.h"
#include "core/json.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

uint64_t cp_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Each thread keeps its /proc/thread-self/schedstat open (stored as fd + 1
 * so that "no value" is 0), closed by the key's destructor when the thread
 * ends: servers start a thread per connection, and those must not leak. */
static pthread_key_t schedstat_key;
static pthread_once_t schedstat_once = PTHREAD_ONCE_INIT;
static bool schedstat_key_ok;

static void schedstat_close(void *v)
{
    close((int)(intptr_t)v - 1);
}

static void schedstat_key_make(void)
{
    schedstat_key_ok = pthread_key_create(&schedstat_key, schedstat_close) == 0;
}

/* The thread's run-queue wait (ns): the second field of schedstat
 * (on-CPU ns, run-queue wait ns, slices). */
static int64_t thread_runq_ns(void)
{
    pthread_once(&schedstat_once, schedstat_key_make);
    if (!schedstat_key_ok)
        return 0;
    intptr_t v = (intptr_t)pthread_getspecific(schedstat_key);
    if (v == 0) {
        int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        v = fd >= 0 ? fd + 1 : -1;
        if (pthread_setspecific(schedstat_key, (void *)v) != 0 && fd >= 0) {
            close(fd);
            v = -1;
        }
    }
    if (v < 0)
        return 0;
    char buf[128];
    ssize_t n = pread((int)v - 1, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    long long on = 0, wait = 0;
    return sscanf(buf, "%lld %lld", &on, &wait) == 2 ? wait : 0;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0
               ? (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec
               : 0;
}

void cp_thread_clock_begin(struct cp_thread_clock *c)
{
    c->runq_ns = thread_runq_ns();
    c->cpu_ns = thread_cpu_ns();
}

void cp_thread_clock_end(struct cp_thread_clock *c)
{
    c->cpu_ns = thread_cpu_ns();
    c->runq_ns = thread_runq_ns();
}

void cp_log_msg(const struct cp_log *log, enum cp_log_level lvl, const char *fmt, ...)
{
    static const char *const names[] = {"DEBUG", "INFO", "WARNING", "ERROR", "NULL"};
    if (!log || lvl < log->level || log->level == CP_LOG_NULL || lvl >= CP_LOG_NULL)
        return;
    FILE *f = log->stream ? log->stream : stderr;
    fprintf(f, "[%s] ", names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
}

size_t cp_edit_distance(const char *a, const char *b)
{
    size_t la = strnlen(a, 255), lb = strnlen(b, 255);
    size_t row[256];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

bool cp_parse_i64(const char *s, int64_t *out)
{
    /* strtoll would skip leading blanks and take a '+': the whole string
     * must be the number. */
    if (!s || !*s || !(*s == '-' || (*s >= '0' && *s <= '9')))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0')
        return false;
    *out = v;
    return true;
}

bool cp_parse_bytes(const char *s, uint64_t *out)
{
    if (!s || !(*s >= '0' && *s <= '9'))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    static const char suffixes[] = "KMGT";
    unsigned shift = 0;
    if (*end) {
        const char *p = strchr(suffixes, toupper((unsigned char)*end));
        if (!p)
            return false;
        shift = 10 * (unsigned)(p - suffixes + 1);
        end++;
        if (strcasecmp(end, "iB") == 0)
            end += 2;
        if (*end)
            return false;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

void cp_format_bytes(uint64_t n, char out[32])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(out, 32, "%llu B", (unsigned long long)n);
    else
        snprintf(out, 32, "%.2f %s", v, units[u]);
}

void cp_format_si(double v, char out[32])
{
    static const char *const units[] = {"", "K", "M", "G", "T", "P"};
    int u = 0;
    while (v >= 1000.0 && u < 5) {
        v /= 1000.0;
        u++;
    }
    if (u == 0)
        snprintf(out, 32, "%.0f", v);
    else
        snprintf(out, 32, "%.2f %s", v, units[u]);
}

void cp_buf_markup(struct cp_buf *b, const char *s)
{
    struct cp_buf u;
    cp_buf_init(&u);
    if (!s)
        return;
    cp_utf8_repair(s, strlen(s), &u);
    if (cp_buf_status(&u) != CP_OK)
        b->failed = true;
    for (const char *p = u.data; p && *p; p++) {
        unsigned char c = (unsigned char)*p;
        switch (c) {
        case '<':
            cp_buf_puts(b, "&lt;");
            break;
        case '>':
            cp_buf_puts(b, "&gt;");
            break;
        case '&':
            cp_buf_puts(b, "&amp;");
            break;
        case '"':
            cp_buf_puts(b, "&quot;");
            break;
        case '\'':
            cp_buf_puts(b, "&apos;");
            break;
        default:
            if (c >= 0x20 || c == '\n' || c == '\t')
                cp_buf_putc(b, (char)c);
        }
    }
    cp_buf_release(&u);
}
