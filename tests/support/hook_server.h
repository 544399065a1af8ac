/* Test support: a throwaway HTTP/1.1 server on 127.0.0.1 that runs in a
 * thread of the test, answers each request with a scripted status (200, 500,
 * 404, 429 ...) or never answers, and records what it received. Webhook
 * tests (notify, validate --webhook) point cannprof at it. */
#ifndef CP_TEST_HOOK_SERVER_H
#define CP_TEST_HOOK_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define NEVER_ANSWER 0
#define MAX_SCRIPT   8
#define REQ_MAX      (1 << 20)

struct hook_server {
    int fd;
    int port;
    pthread_t thread;
    atomic_int stop;
    /* Script: the status of request i is status[i] (the last one repeats);
     * NEVER_ANSWER keeps the connection open without a word. */
    int status[MAX_SCRIPT];
    int n_status;
    const char *answer; /* response body, "ok" when NULL */
    /* Seen; read only after server_stop (pthread_join orders it). */
    int connections;
    int requests;
    char method[16];
    char path[512];
    char content_type[128];
    char user_agent[128];
    char sig_timestamp[32], signature[128]; /* X-Cannprof-Timestamp/-Signature, "" if absent */
    char *body;                             /* the last request's body */
};

/* Start a server answering with the given statuses in turn (the last one
 * repeats), with body `answer` ("ok" when NULL). false when the socket or
 * thread cannot be had. */
bool server_start(struct hook_server *s, int n_status, const int *status, const char *answer);
/* Stop it and wait for its thread; what it saw is readable afterwards. */
void server_stop(struct hook_server *s);
void server_release(struct hook_server *s);

#endif
