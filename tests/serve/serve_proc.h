/* What the serve tests share (serve_proc.c). */
#ifndef CP_TESTS_SERVE_PROC_H
#define CP_TESTS_SERVE_PROC_H

#include <curl/curl.h>
#include <stddef.h>
#include <sys/types.h>

struct server {
    pid_t pid;
    int port;
    char *out;
};

struct body {
    char *data;
    size_t len;
};

/* Start `cannprof serve MODEL --port 0 -t 1 args...` (args NULL-terminated)
 * and wait for its port. */
struct server serve_start(const char *model, const char *const *args);
/* SIGTERM; its exit status and what it printed (*printed: free). */
int serve_stop(struct server *s, char **printed);
/* A libcurl write callback appending to a struct body. */
size_t serve_on_data(char *p, size_t size, size_t n, void *u);
/* A request; the status and the answer's body (out->data: free). */
long serve_http(int port, const char *method, const char *path, const void *data, size_t len,
                curl_mime *mime, struct body *out);

/* The monitor's incident folders under `dir`: how many, the first's path
 * in first[n]. */
size_t serve_incidents(const char *dir, char *first, size_t n);

#endif
