/* The monitor's state, shared by monitor.c (recorder, hooks, thread) and
 * incident.c (what a firing does). */
#ifndef CP_MONITOR_INTERNAL_H
#define CP_MONITOR_INTERNAL_H

#include "monitor/monitor.h"
#include "pipeline/pipeline.h"
#include "runner/session.h"
#include "trace/trace.h"

#include <pthread.h>

struct cp_monitor {
    struct cp_monitor_opts o;
    struct cp_serve_hooks hooks;
    double tick_s;
    pthread_mutex_t mu; /* the ring, the counters, the deep trace's hand-over */
    pthread_cond_t cv;  /* stops, and the kernels handed over */
    /* the flight recorder: a ring of the last requests, oldest at head */
    struct cp_serve_event *ring;
    size_t cap, head, n;
    uint64_t seen, overwritten;
    /* a flow's node calls: a second ring, oldest at call_head (NULL for a
     * model) */
    struct cp_mon_node_call *calls;
    size_t call_cap, call_head, n_calls;
    uint64_t calls_seen;
    /* the alarm (written by the monitor's thread, read under mu) */
    struct cp_mon_alarm alarm;
    struct cp_mon_values last;
    /* the last healthy window's requests (the monitor's thread only) */
    struct cp_serve_event *healthy;
    size_t n_healthy;
    struct cp_mon_node_call *healthy_calls; /* a flow's node calls in it */
    size_t n_healthy_calls;
    char **flow_names; /* a flow's node names (owned) */
    size_t n_flow_names;
    int64_t healthy_to_ns;
    /* the deep trace: batches record kernels until deep_until_ns; the
     * batching thread stores them in deep_path and says so */
    int64_t deep_until_ns;
    char deep_path[1200];
    bool kernels_in;
    int64_t kernels_run;
    int64_t flow_run; /* a flow served: the run of its own nodes' calls; -1 */
    size_t kernels_batches, kernels_events;
    char kernels_err[1100];
    uint64_t capture_errors, alerts_failed, incident_seq;
    int64_t started_ns; /* the server began listening (0: not yet) */
    pthread_t th;
    bool running, stopping;
};

/* The recorder's requests answered in (from_ns, to_ns]. OUT: *out (free;
 * NULL when out of memory). Returns their count. */
size_t cp_mon_snapshot(struct cp_monitor *m, int64_t from_ns, int64_t to_ns,
                       struct cp_serve_event **out);

/* The recorder's node calls done in (from_ns, to_ns]. OUT: *out (free;
 * NULL when there are none or out of memory). Returns their count. */
size_t cp_mon_snapshot_calls(struct cp_monitor *m, int64_t from_ns, int64_t to_ns,
                             struct cp_mon_node_call **out);

/* One evaluation at `now`: the window's values, the alarm's step, the last
 * healthy window kept, suppressions and resolutions said. */
enum cp_mon_event cp_mon_tick(struct cp_monitor *m, int64_t now);

/* Sleep until `until_ns` or a stop; true when stopped. */
bool cp_mon_sleep_until(struct cp_monitor *m, int64_t until_ns);

/* Handle a firing at t_fire (incident.c): the folder, the recorder's dump,
 * the deep trace, the diagnosis, the alert. */
void cp_mon_incident(struct cp_monitor *m, int64_t t_fire);

#endif
