/* The batching thread of a model served (serve/serve_internal.h): queued
 * requests taken up to max_batch at a time (waiting up to the window for
 * the batch to fill), stacked along the first dimension, run once, each
 * request handed its slice of the outputs. */
#include "serve/serve_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Spin for ms milliseconds: the fire drill's slower model. */
static void spin_ms(double ms)
{
    int64_t until = sv_now_ns() + (int64_t)(ms * 1e6);
    while (sv_now_ns() < until)
        ;
}

/* Hand the recorded batches to the hook, then forget them. */
static void kernels_done(struct server *sv)
{
    if (sv->n_deep && sv->hooks && sv->hooks->on_kernels)
        sv->hooks->on_kernels(sv->hooks->ctx, &sv->s, sv->rec, sv->deep_ns, sv->n_deep);
    cp_trace_clear(sv->rec);
    sv->n_deep = 0;
}

static void run_batch(struct server *sv, struct job **jobs, size_t n, int64_t popped,
                      int64_t waited, size_t depth)
{
    struct cp_plan *plan = sv->s.plan;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = CP_OK;
    size_t per = (size_t)sv->batch;
    uint64_t seq = ++sv->batch_seq;
    bool deep = sv->rec && sv->hooks->kernels_wanted && sv->hooks->kernels_wanted(sv->hooks->ctx);
    if (sv->rec && !deep && sv->n_deep)
        kernels_done(sv);
    if (sv->rec)
        cp_runtime_pause_trace(sv->s.rt, !deep);
    if (deep && sv->n_deep == sv->cap_deep) {
        size_t nc = sv->cap_deep ? sv->cap_deep * 2 : 256;
        uint64_t *g = cp_realloc_array(sv->deep_ns, nc, sizeof *g);
        if (g) {
            sv->deep_ns = g;
            sv->cap_deep = nc;
        } else {
            deep = false;
            cp_runtime_pause_trace(sv->s.rt, true);
        }
    }
    struct cp_thread_clock k0, k1;
    int64_t t_start = sv_now_ns();
    cp_thread_clock_begin(&k0);
    for (size_t i = 0; st == CP_OK && i < sv->n_in; i++) {
        const struct cp_tensor *pt = cp_plan_input(plan, i);
        struct cp_host_tensor t = {.dtype = pt->dtype, .rank = pt->shape.rank};
        snprintf(t.name, sizeof t.name, "%s", pt->name);
        for (int k = 0; k < t.rank; k++)
            t.dims[k] = pt->shape.dims[k].value;
        t.nbytes = sv->slice_in[i] * per;
        if (per == 1) {
            /* one request: its bytes go to the plan as they are (no batch to
             * stack them in) */
            t.data = jobs[0]->in[i].data;
            st = cp_plan_set_input(plan, i, &t, &d);
            continue;
        }
        /* a batch: each request's rows go from its body into the plan's
         * input, where they stack (a partial batch repeats its last) */
        int64_t rows = t.rank > 0 ? t.dims[0] / (int64_t)per : 0;
        for (size_t b = 0; st == CP_OK && b < per; b++)
            st = cp_plan_set_input_rows(plan, i, (int64_t)b * rows, rows,
                                        jobs[b < n ? b : n - 1]->in[i].data, sv->slice_in[i], &d);
    }
    if (st == CP_OK)
        st = cp_plan_run(plan, deep ? (int32_t)sv->n_deep : -1, &d);
    if (sv->o->inject_ms > 0 && t_start - __atomic_load_n(&sv->started_ns, __ATOMIC_ACQUIRE) >=
                                    (int64_t)(sv->o->inject_after_s * 1e9))
        spin_ms(sv->o->inject_ms);
    cp_thread_clock_end(&k1);
    int64_t t_end = sv_now_ns();
    if (deep)
        sv->deep_ns[sv->n_deep++] = (uint64_t)(t_end - t_start);
    for (size_t b = 0; b < n; b++) {
        struct cp_serve_event *e = &jobs[b]->ev;
        e->popped_ns = popped;
        e->run_start_ns = t_start;
        e->run_end_ns = t_end;
        e->batch_seq = seq;
        e->batch = (uint32_t)n;
        e->depth = (uint32_t)depth;
        e->batch_wait_ns = waited;
        e->batch_cpu_ns = k1.cpu_ns - k0.cpu_ns;
        e->batch_runq_ns = k1.runq_ns - k0.runq_ns;
    }
    for (size_t b = 0; b < n; b++)
        jobs[b]->out = st == CP_OK ? cp_calloc(sv->n_out, sizeof *jobs[b]->out) : NULL;
    for (size_t o = 0; st == CP_OK && o < sv->n_out; o++) {
        /* each request's rows copied once, out of the plan's output */
        struct cp_host_tensor t;
        if ((st = cp_plan_output_view(plan, o, &t, &d)) != CP_OK)
            break;
        size_t slice = t.nbytes / per;
        for (size_t b = 0; b < n; b++) {
            struct cp_host_tensor *one = &jobs[b]->out[o];
            *one = t;
            if (per > 1 && one->rank > 0)
                one->dims[0] /= (int64_t)per;
            one->nbytes = slice;
            one->data = malloc(slice ? slice : 1);
            if (!one->data) {
                st = cp_diag_set(&d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            memcpy(one->data, (char *)t.data + b * slice, slice);
        }
    }
    pthread_mutex_lock(&sv->m.mu);
    size_t k = 0;
    while (k < N_BATCH && (int)n > SV_BATCH_BOUNDS[k])
        k++;
    sv->m.batch_bucket[k]++;
    sv->m.batch_sum += n;
    sv->m.batches++;
    pthread_mutex_unlock(&sv->m.mu);
    pthread_mutex_lock(&sv->mu);
    for (size_t b = 0; b < n; b++) {
        jobs[b]->st = st;
        jobs[b]->n_out = st == CP_OK ? sv->n_out : 0;
        if (st != CP_OK)
            snprintf(jobs[b]->err, sizeof jobs[b]->err, "%s", d.msg);
        jobs[b]->done = true;
        pthread_cond_signal(&jobs[b]->cv);
    }
    pthread_mutex_unlock(&sv->mu);
}

void *sv_batcher_main(void *arg)
{
    struct server *sv = arg;
    struct job **batch = cp_calloc((size_t)sv->o->max_batch, sizeof *batch);
    if (!batch)
        return NULL;
    pthread_mutex_lock(&sv->mu);
    for (;;) {
        int64_t t_wait = sv_now_ns();
        while (sv->q_n == 0 && !sv->stopping) {
            if (!sv->n_deep) {
                pthread_cond_wait(&sv->has_work, &sv->mu);
                continue;
            }
            /* kernels recorded and idle: hand them over once no longer wanted */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 100000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&sv->has_work, &sv->mu, &ts);
            if (sv->q_n == 0 && !sv->hooks->kernels_wanted(sv->hooks->ctx)) {
                pthread_mutex_unlock(&sv->mu);
                kernels_done(sv);
                pthread_mutex_lock(&sv->mu);
            }
        }
        if (sv->q_n == 0 && sv->stopping)
            break;
        /* let the batch fill for up to the window */
        if (sv->o->window_ms > 0 && sv->q_n < (size_t)sv->o->max_batch) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t ns = (int64_t)(sv->o->window_ms * 1e6);
            ts.tv_sec += ns / 1000000000;
            ts.tv_nsec += ns % 1000000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            while (sv->q_n < (size_t)sv->o->max_batch && !sv->stopping && !sv->draining)
                if (pthread_cond_timedwait(&sv->has_work, &sv->mu, &ts) != 0)
                    break;
        }
        size_t depth = sv->q_n;
        size_t n = sv->q_n < (size_t)sv->o->max_batch ? sv->q_n : (size_t)sv->o->max_batch;
        memcpy(batch, sv->q, n * sizeof *batch);
        memmove(sv->q, sv->q + n, (sv->q_n - n) * sizeof *sv->q);
        sv->q_n -= n;
        pthread_mutex_unlock(&sv->mu);
        int64_t popped = sv_now_ns();
        run_batch(sv, batch, n, popped, popped - t_wait, depth);
        pthread_mutex_lock(&sv->mu);
    }
    pthread_mutex_unlock(&sv->mu);
    if (sv->rec && sv->n_deep)
        kernels_done(sv);
    free(batch);
    return NULL;
}

/* Queue a job and wait for it. */
void sv_submit(struct server *sv, struct job *j)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&sv->mu);
    if (sv->q_n == sv->q_cap) {
        size_t nc = sv->q_cap ? sv->q_cap * 2 : 64;
        struct job **g = cp_realloc_array(sv->q, nc, sizeof *g);
        if (!g) {
            j->st = CP_ERR_NOMEM;
            snprintf(j->err, sizeof j->err, "out of memory");
            pthread_mutex_unlock(&sv->mu);
            pthread_cond_destroy(&j->cv);
            return;
        }
        sv->q = g;
        sv->q_cap = nc;
    }
    j->ev.queued_ns = sv_now_ns();
    sv->q[sv->q_n++] = j;
    pthread_cond_signal(&sv->has_work);
    while (!j->done)
        pthread_cond_wait(&j->cv, &sv->mu);
    pthread_mutex_unlock(&sv->mu);
    j->ev.woken_ns = sv_now_ns();
    pthread_cond_destroy(&j->cv);
}
