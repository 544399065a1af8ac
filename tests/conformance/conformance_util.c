/* The conformance test's small helpers: skip causes and failure details,
 * messages, folders (conformance.h). */
#include "conformance.h"

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

/* ---- small helpers -------------------------------------------------------- */

void cf_add_cause(struct case_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cf_add_cause(struct case_result *r, const char *fmt, ...)
{
    if (r->outcome == OUT_FAIL)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One line each, no duplicates within a case. */
    for (char *p = line; *p; p++)
        if (*p == '\n')
            *p = ' ';
    size_t n = strlen(r->text);
    const char *s = r->text;
    while ((s = strstr(s, line)) != NULL) {
        size_t k = strlen(line);
        if ((s == r->text || s[-1] == '\n') && (s[k] == '\n' || s[k] == '\0'))
            return;
        s += k;
    }
    if (n + 1 + strlen(line) < sizeof r->text) /* whole lines only */
        snprintf(r->text + n, sizeof r->text - n, "%s%s", n ? "\n" : "", line);
    r->outcome = OUT_SKIP;
}

void cf_set_fail(struct case_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cf_set_fail(struct case_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text, sizeof r->text, fmt, ap);
    va_end(ap);
    for (char *p = r->text; *p; p++)
        if (*p == '\n')
            *p = ' ';
    r->outcome = OUT_FAIL;
}

/* Add to a failure's text (truncating when full). */
void cf_append(struct case_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cf_append(struct case_result *r, const char *fmt, ...)
{
    size_t n = strlen(r->text);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text + n, sizeof r->text - n, fmt, ap);
    va_end(ap);
}

/* A diag message without the leading "path: " that names where it came
 * from, when it starts with `prefix`. */
const char *cf_strip_prefix(const char *msg, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(msg, prefix, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

/* The op type in a runtime message "... node 'NAME' (OpType) ...", or NULL. */
bool cf_op_from_message(const char *msg, char *op, size_t n)
{
    const char *p = strstr(msg, "node '");
    if (!p)
        return false;
    p = strstr(p + 6, "' (");
    if (!p)
        return false;
    p += 3;
    const char *e = strchr(p, ')');
    if (!e || (size_t)(e - p) >= n)
        return false;
    memcpy(op, p, (size_t)(e - p));
    op[e - p] = '\0';
    return true;
}

const char *cf_onnx_type_name(int t)
{
    static const char *const names[] = {
        "UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",   "INT16",
        "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16",  "DOUBLE",
        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
    };
    return t >= 0 && (size_t)t < sizeof names / sizeof *names ? names[t] : "an unknown type";
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in `dir` starting with `prefix` (NULL-terminated array;
 * caller frees each and the array). */
char **cf_list_dir(const char *dir, const char *prefix, size_t *n)
{
    *n = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return NULL;
    size_t cap = 16;
    char **v = malloc(cap * sizeof *v);
    struct dirent *e;
    while (v && (e = readdir(dp)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (*n + 1 >= cap) {
            char **w = realloc(v, (cap *= 2) * sizeof *v);
            if (!w)
                break;
            v = w;
        }
        v[(*n)++] = strdup(e->d_name);
    }
    closedir(dp);
    if (v) {
        qsort(v, *n, sizeof *v, cmp_str);
        v[*n] = NULL;
    }
    return v;
}

void cf_free_list(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}
