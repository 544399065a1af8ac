/* The queues between nodes: bounded, a push waits while the queue is full
 * (back-pressure reaches the producer, which records how long it was
 * blocked), a pop waits while it is empty (the consumer records how long
 * it was starved). Also the payloads items carry, and the per-thread
 * clocks a node's time is split by. */
#define _GNU_SOURCE /* pread, O_CLOEXEC */
#include "pipeline/pipeline_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>

/* ---- payloads ------------------------------------------------------------------------- */

struct pl_payload *pl_payload_new(void)
{
    struct pl_payload *p = cp_calloc(1, sizeof *p);
    if (p)
        atomic_init(&p->refs, 1);
    return p;
}

void pl_payload_ref(struct pl_payload *p)
{
    atomic_fetch_add(&p->refs, 1);
}

void pl_payload_unref(struct pl_payload *p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (size_t i = 0; i < p->n_t; i++)
        cp_host_tensor_release(&p->t[i]);
    free(p->t);
    free(p->bytes);
    free(p);
}

/* ---- queues ---------------------------------------------------------------------------- */

static int64_t mono_ns(void)
{
    return (int64_t)cp_clock_ns();
}

enum cp_status pl_queue_init(struct pl_queue *q, size_t cap, struct cp_diag *d)
{
    memset(q, 0, sizeof *q);
    q->v = cp_calloc(cap ? cap : 1, sizeof *q->v);
    if (!q->v)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    q->cap = cap ? cap : 1;
    q->limit = q->cap;
    pthread_mutex_init(&q->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->not_empty, &ca);
    pthread_cond_init(&q->not_full, &ca);
    pthread_condattr_destroy(&ca);
    return CP_OK;
}

void pl_queue_destroy(struct pl_queue *q)
{
    if (!q->v)
        return;
    for (size_t k = 0; k < q->n; k++)
        pl_payload_unref(q->v[(q->head + k) % q->cap].p);
    free(q->v);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    memset(q, 0, sizeof *q);
}

bool pl_queue_push(struct pl_queue *q, const struct pl_item *it, int64_t *blocked_ns)
{
    pthread_mutex_lock(&q->mu);
    int64_t t0 = 0;
    if (q->n >= q->limit && !q->closed)
        t0 = mono_ns();
    while (q->n >= q->limit && !q->closed)
        pthread_cond_wait(&q->not_full, &q->mu);
    *blocked_ns = t0 ? mono_ns() - t0 : 0;
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return false;
    }
    q->v[(q->head + q->n) % q->cap] = *it;
    q->n++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return true;
}

bool pl_queue_push_force(struct pl_queue *q, const struct pl_item *it)
{
    pthread_mutex_lock(&q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return false;
    }
    if (q->n == q->cap) {
        /* grow, unrolling the ring */
        size_t nc = q->cap * 2;
        struct pl_item *g = cp_calloc(nc, sizeof *g);
        if (!g) {
            pthread_mutex_unlock(&q->mu);
            return false;
        }
        for (size_t k = 0; k < q->n; k++)
            g[k] = q->v[(q->head + k) % q->cap];
        free(q->v);
        q->v = g;
        q->cap = nc;
        q->head = 0;
    }
    q->v[(q->head + q->n) % q->cap] = *it;
    q->n++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return true;
}

static void deadline_after(struct timespec *ts, int64_t ns)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ns / 1000000000;
    ts->tv_nsec += ns % 1000000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

size_t pl_queue_pop(struct pl_queue *q, struct pl_item *out, size_t max, int64_t window_ns,
                    size_t *depth)
{
    pthread_mutex_lock(&q->mu);
    while (q->n == 0 && !q->closed)
        pthread_cond_wait(&q->not_empty, &q->mu);
    /* a batch fills for up to its window, then goes with what it has */
    if (window_ns > 0 && q->n < max && !q->closed) {
        struct timespec ts;
        deadline_after(&ts, window_ns);
        while (q->n < max && !q->closed)
            if (pthread_cond_timedwait(&q->not_empty, &q->mu, &ts) != 0)
                break;
    }
    *depth = q->n;
    size_t k = 0;
    while (k < max && q->n > 0) {
        out[k++] = q->v[q->head];
        q->head = (q->head + 1) % q->cap;
        q->n--;
    }
    if (k)
        pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return k;
}

void pl_queue_close(struct pl_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}
