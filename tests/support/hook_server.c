/* Test support: the throwaway webhook server (hook_server.h). */
#include "support/hook_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define NEVER_ANSWER 0
#define MAX_SCRIPT   8
#define REQ_MAX      (1 << 20)

/* Wait until fd is readable or the server is told to stop. */
static bool wait_readable(struct hook_server *s, int fd)
{
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {fd, POLLIN, 0};
        int n = poll(&p, 1, 20);
        if (n > 0)
            return true;
    }
    return false;
}

/* Value of header `name` in the header block, copied into out[size]. */
static void header_value(const char *head, const char *name, char *out, size_t size)
{
    out[0] = '\0';
    size_t nlen = strlen(name);
    for (const char *line = strstr(head, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
        const char *l = line + 2;
        if (strncasecmp(l, name, nlen) == 0 && l[nlen] == ':') {
            const char *v = l + nlen + 1;
            while (*v == ' ')
                v++;
            size_t vlen = strcspn(v, "\r\n");
            if (vlen >= size)
                vlen = size - 1;
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            return;
        }
    }
}

/* Read one request; false when the client went away or the server stops. */
static bool read_request(struct hook_server *s, int c)
{
    char *buf = malloc(REQ_MAX + 1);
    size_t len = 0, need = 0;
    char *head_end = NULL;
    bool ok = false;
    if (!buf)
        return false;
    while (!head_end || len < need) {
        if (len == REQ_MAX || !wait_readable(s, c))
            goto out;
        ssize_t n = recv(c, buf + len, REQ_MAX - len, 0);
        if (n <= 0)
            goto out;
        len += (size_t)n;
        buf[len] = '\0';
        if (!head_end && (head_end = strstr(buf, "\r\n\r\n"))) {
            head_end[2] = '\0'; /* the header block ends with its last CRLF */
            char cl[32];
            header_value(buf, "Content-Length", cl, sizeof cl);
            need = (size_t)(head_end + 4 - buf) + (size_t)atol(cl);
        }
    }
    sscanf(buf, "%15s %511s", s->method, s->path);
    header_value(buf, "Content-Type", s->content_type, sizeof s->content_type);
    header_value(buf, "User-Agent", s->user_agent, sizeof s->user_agent);
    header_value(buf, "X-Cannprof-Timestamp", s->sig_timestamp, sizeof s->sig_timestamp);
    header_value(buf, "X-Cannprof-Signature", s->signature, sizeof s->signature);
    free(s->body);
    size_t body_len = len - (size_t)(head_end + 4 - buf);
    s->body = malloc(body_len + 1);
    if (s->body) {
        memcpy(s->body, head_end + 4, body_len);
        s->body[body_len] = '\0';
    }
    s->requests++;
    ok = true;
out:
    free(buf);
    return ok;
}

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 404:
        return "Not Found";
    case 429:
        return "Too Many Requests";
    default:
        return status >= 500 ? "Server Error" : "Whatever";
    }
}

static void *server_main(void *arg)
{
    struct hook_server *s = arg;
    while (wait_readable(s, s->fd)) {
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            continue;
        s->connections++;
        if (read_request(s, c)) {
            int i = s->requests - 1 < s->n_status ? s->requests - 1 : s->n_status - 1;
            int status = s->status[i];
            if (status == NEVER_ANSWER) {
                /* Hold the connection until the client gives up. */
                char sink[512];
                while (wait_readable(s, c) && recv(c, sink, sizeof sink, 0) > 0)
                    ;
            } else {
                const char *body = s->answer ? s->answer : "ok";
                char resp[1024];
                int n = snprintf(resp, sizeof resp,
                                 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
                                 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                                 status, reason(status), strlen(body), body);
                send(c, resp, (size_t)n, MSG_NOSIGNAL);
            }
        }
        close(c);
    }
    return NULL;
}

/* Start a server answering with the given statuses in turn, with body
 * `answer` ("ok" when NULL). */
bool server_start(struct hook_server *s, int n_status, const int *status, const char *answer)
{
    memset(s, 0, sizeof *s);
    atomic_init(&s->stop, 0);
    if (n_status < 1 || n_status > MAX_SCRIPT)
        return false;
    memcpy(s->status, status, (size_t)n_status * sizeof *status);
    s->n_status = n_status;
    s->answer = answer;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (s->fd < 0)
        return false;
    int one = 1;
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s->fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(s->fd, 16) != 0) {
        close(s->fd);
        return false;
    }
    socklen_t alen = sizeof addr;
    if (getsockname(s->fd, (struct sockaddr *)&addr, &alen) != 0 ||
        pthread_create(&s->thread, NULL, server_main, s) != 0) {
        close(s->fd);
        return false;
    }
    s->port = ntohs(addr.sin_port);
    return true;
}

void server_stop(struct hook_server *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    close(s->fd);
}

void server_release(struct hook_server *s)
{
    free(s->body);
    s->body = NULL;
}
