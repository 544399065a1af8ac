/* Starting `cannprof serve` as a process on loopback, stopping it with
 * SIGTERM, and one HTTP request to it: what the serve tests share. */
#include "serve/serve_proc.h"
#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <curl/curl.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Start `cannprof serve MODEL --port 0 args...` and wait for its port. */
struct server serve_start(const char *model, const char *const *args)
{
    struct server s = {0};
    char *ready = cp_t_path("ready.port");
    s.out = cp_t_path("serve.out");
    remove(ready);
    char *argv[64];
    size_t n = 0;
    argv[n++] = (char *)CP_CLI;
    argv[n++] = (char *)"serve";
    argv[n++] = (char *)model;
    argv[n++] = (char *)"--port";
    argv[n++] = (char *)"0";
    argv[n++] = (char *)"--ready-file";
    argv[n++] = ready;
    argv[n++] = (char *)"-t";
    argv[n++] = (char *)"1";
    for (size_t i = 0; args && args[i] && n < 62; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    s.pid = fork();
    cr_assert_geq(s.pid, 0);
    if (s.pid == 0) {
        FILE *f = freopen(s.out, "w", stdout);
        if (f)
            dup2(fileno(f), 2); /* stderr too: what the server says goes in one file */
        execv(CP_CLI, argv);
        _exit(127);
    }
    for (int i = 0; i < 300 && s.port == 0; i++) {
        FILE *f = fopen(ready, "r");
        if (f) {
            if (fscanf(f, "%d", &s.port) != 1)
                s.port = 0;
            fclose(f);
        }
        if (!s.port)
            usleep(20000);
    }
    cr_assert_gt(s.port, 0, "the server did not come up");
    free(ready);
    return s;
}

/* SIGTERM; its exit status and what it printed. */
int serve_stop(struct server *s, char **printed)
{
    kill(s->pid, SIGTERM);
    int status = 0;
    waitpid(s->pid, &status, 0);
    *printed = ct_read_text(s->out);
    free(s->out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

size_t serve_on_data(char *p, size_t size, size_t n, void *u)
{
    struct body *b = u;
    char *g = realloc(b->data, b->len + size * n + 1);
    cr_assert_not_null(g);
    b->data = g;
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

/* A request; the status and the answer's body. */
long serve_http(int port, const char *method, const char *path, const void *data, size_t len,
                curl_mime *mime, struct body *out)
{
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    memset(out, 0, sizeof *out);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, serve_on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    if (mime)
        curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
    else if (data) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, data);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    if (strcmp(method, "GET") != 0 && !data && !mime)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    long code = 0;
    cr_assert_eq(curl_easy_perform(h), CURLE_OK, "%s %s", method, path);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    return code;
}

size_t serve_incidents(const char *dir, char *first, size_t n)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return 0;
    size_t k = 0;
    struct dirent *de;
    while ((de = readdir(dp)))
        if (strncmp(de->d_name, "incident-", 9) == 0 && k++ == 0)
            snprintf(first, n, "%.900s/%.200s", dir, de->d_name);
    closedir(dp);
    return k;
}
