/*
 * monitor: watch a served model, catch a regression as it happens, and
 * explain it (docs/serving.md, "The monitor").
 *
 * `cannprof serve MODEL --monitor "p99_latency>2s"` plugs a monitor into the
 * server (serve/serve.h's hooks). Its pieces:
 *
 *   - conditions: `[NODE.]STATISTIC OP VALUE UNIT`, joined by commas, any one
 *     of which firing raises the alarm. The quantities and units are those
 *     of --constraints (rules/constraints.h): latency in ns/us/ms/s, rates in
 *     /s, shares in %. STATISTIC is p50_latency, p90_latency, p99_latency,
 *     mean_latency, max_latency, error_rate (%), throughput (/s),
 *     queue_depth (a count, no unit) or busy (%, a flow node's only: its
 *     calls' busy time over the window, a share of its workers' time);
 *     NODE (http, model or reply) narrows a
 *     latency or queue_depth to that node of the served model, and a flow's
 *     own node (by its name in the flow) to that node's calls: a latency
 *     is a call's busy time, queue_depth its input queue's depth at the
 *     pop;
 *   - the flight recorder: always on, the events of the last N seconds of
 *     requests in a ring (every request's stage times, not kernels), and
 *     for a flow every call of its nodes in a second ring;
 *   - the alarm: each tick, the conditions over a sliding window of answered
 *     requests (nothing is decided before a whole window has passed since
 *     the server began listening); a condition must hold for the hold time to fire, a window
 *     with fewer requests than the minimum decides nothing, and clearing
 *     needs the value back past the threshold by the hysteresis margin for
 *     the hold time; after an incident, a cooldown and a cap per hour;
 *   - an incident: the recorder dumped, the next M seconds traced deep (the
 *     runtime and kernel layers on), analyze and node-bottleneck run on the
 *     deep trace, validate of the incident window against the last healthy
 *     window, a webhook alert with the findings, all written to one folder.
 */
#ifndef CP_MONITOR_H
#define CP_MONITOR_H

#include "core/core.h"
#include "notify/notify.h"
#include "serve/serve.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- conditions ------------------------------------------------------------------------ */

enum cp_mon_stat {
    CP_MON_P50 = 0,
    CP_MON_P90,
    CP_MON_P99,
    CP_MON_MEAN,
    CP_MON_MAX,
    CP_MON_ERROR_RATE,
    CP_MON_THROUGHPUT,
    CP_MON_QUEUE_DEPTH,
    CP_MON_BUSY, /* a flow node's: its calls' busy time, a share of its workers' time */
};
#define CP_MON_STAT_COUNT 9

/* The served model's nodes (serve/serve.h): -1 the whole request. */
enum { CP_MON_NODE_HTTP = 0, CP_MON_NODE_MODEL, CP_MON_NODE_REPLY, CP_MON_N_NODES };
/* A condition on a flow's own node: its index in flow_node, once resolved
 * (cp_mon_conditions_resolve). */
#define CP_MON_NODE_FLOW (-2)

#define CP_MON_MAX_CONDITIONS 8

struct cp_mon_condition {
    char text[96];      /* as given, trimmed */
    char node_name[64]; /* as given; "" for the whole request */
    int node;           /* -1, CP_MON_NODE_*, or CP_MON_NODE_FLOW */
    int flow_node;      /* CP_MON_NODE_FLOW: the flow's node; else -1 */
    int workers;        /* CP_MON_NODE_FLOW: its workers (busy's base); else 0 */
    enum cp_mon_stat stat;
    bool above;     /* fires when the value is above (> or >=) the threshold, else below */
    bool inclusive; /* >= or <= */
    double value;   /* base units: seconds, percent, requests/s, a count */
};

struct cp_mon_conditions {
    size_t n;
    struct cp_mon_condition c[CP_MON_MAX_CONDITIONS];
};

/* Parse --monitor's text. A NODE other than http, model and reply is taken
 * for a flow's node (CP_MON_NODE_FLOW), to resolve. Errors (CP_ERR_USAGE,
 * "--monitor: '<item>': ..."): an unknown statistic (with the known ones),
 * a statistic a node does not have, a missing or unknown unit, a value
 * that is negative, more than CP_MON_MAX_CONDITIONS. OUT: *out (empty on
 * failure). */
enum cp_status cp_mon_conditions_parse(const char *text, struct cp_mon_conditions *out,
                                       struct cp_diag *d);

/* Resolve the conditions' node names against what is served: a model
 * (flow_nodes NULL: http, model and reply only), or a flow `what` whose
 * nodes are flow_nodes[0..n) with workers[0..n) (NULL: one each; a flow's
 * node of that name wins over http, model and reply). Errors
 * (CP_ERR_USAGE): a node nothing served has, naming the ones it has; busy
 * on what is not a flow's node. */
enum cp_status cp_mon_conditions_resolve(struct cp_mon_conditions *c, const char *what,
                                         const char *const *flow_nodes, const int *workers,
                                         size_t n, struct cp_diag *d);

/* A value of condition c's quantity as text ("83.2ms", "4.1%", "120/s", "7"). */
void cp_mon_format_value(const struct cp_mon_condition *c, double v, char out[48]);

/* ---- the window ---------------------------------------------------------------------------- */

struct cp_mon_values {
    size_t requests; /* answered in the window */
    size_t ok;       /* of which 200 */
    double v[CP_MON_MAX_CONDITIONS];
    bool known[CP_MON_MAX_CONDITIONS]; /* false: too few requests to say */
};

/* One call of a flow's node, as the recorder keeps it. */
struct cp_mon_node_call {
    int64_t done_ns;                      /* pushed its outputs (cp_clock_ns) */
    int64_t wait_ns, busy_ns, blocked_ns; /* on its input queue, processing, pushing */
    uint32_t node, batch, depth;          /* the flow's node, items taken, queue at the pop */
};

/* The conditions' values over the requests answered in (from_ns, to_ns]
 * (`ev`, in any order) and the flow's node calls done in it (`calls`, may
 * be NULL), the window being window_s long. Latencies are of the requests
 * answered 200, or of the node's calls (busy time); a window with fewer
 * than min_requests answered decides nothing (known false), nor does a
 * node condition whose node had no call in it. */
void cp_mon_window(const struct cp_mon_conditions *c, const struct cp_serve_event *ev, size_t n,
                   const struct cp_mon_node_call *calls, size_t n_calls, int64_t from_ns,
                   int64_t to_ns, size_t min_requests, struct cp_mon_values *out);

/* Whether condition i holds for its value (fires), and whether the value is
 * back past the threshold by `hysteresis` (a share: 0.1 = 10%) (clears). */
bool cp_mon_condition_fires(const struct cp_mon_condition *c, double v);
bool cp_mon_condition_clears(const struct cp_mon_condition *c, double v, double hysteresis);

/* ---- the alarm ------------------------------------------------------------------------------ */

struct cp_mon_policy {
    double window_s;     /* the sliding window (default 30) */
    double hold_s;       /* a condition must hold this long to fire, and clear as long (10) */
    double hysteresis;   /* clearing margin, a share of the threshold (0.1) */
    size_t min_requests; /* in a window, to decide anything (20) */
    double cooldown_s;   /* after an incident, no other for this long (300) */
    int max_per_hour;    /* incidents in any hour, at most (6) */
};

void cp_mon_policy_init(struct cp_mon_policy *p);

enum cp_mon_state { CP_MON_OK = 0, CP_MON_PENDING, CP_MON_FIRING, CP_MON_RESOLVING };

/* "ok", "pending", "firing", "resolving". */
const char *cp_mon_state_name(enum cp_mon_state s);

struct cp_mon_alarm {
    struct cp_mon_policy p;
    enum cp_mon_state state;
    int64_t since_ns;     /* the state's, or the clear streak's (RESOLVING) */
    int64_t first_bad_ns; /* the tick the firing condition first held */
    int trigger;          /* the condition that fired; -1 */
    double trigger_value;
    int64_t fires_ns[64]; /* incidents in the last hour (oldest first) */
    size_t n_fires;
    uint64_t incidents, suppressed, resolved;
};

enum cp_mon_event {
    CP_MON_NOTHING = 0,
    CP_MON_FIRE,       /* an incident: handle it */
    CP_MON_SUPPRESSED, /* it would have fired; the cooldown or the cap held it back */
    CP_MON_RESOLVED,
};

void cp_mon_alarm_init(struct cp_mon_alarm *a, const struct cp_mon_policy *p);

/* One tick at now_ns with the window's values: the state moves (see the top
 * of this file) and what happened is returned. Pure: tests drive it with a
 * fake clock. */
enum cp_mon_event cp_mon_alarm_step(struct cp_mon_alarm *a, const struct cp_mon_conditions *c,
                                    const struct cp_mon_values *v, int64_t now_ns);

/* ---- the monitor ------------------------------------------------------------------------------
 */

struct cp_monitor_opts {
    struct cp_mon_conditions conditions;
    const char *conditions_text;
    struct cp_mon_policy policy;
    double recorder_s;        /* the flight recorder's span (default 60; at least window_s) */
    size_t recorder_events;   /* its ring, at most (default 131072) */
    double deep_s;            /* the deep trace after a firing (default 10) */
    double tick_s;            /* evaluation period (default 1, or hold_s / 4 when shorter) */
    const char *incident_dir; /* default "cannprof-incidents" */
    const char *webhook;      /* NULL: none (the alert is still written) */
    enum cp_webhook_format webhook_format;
    const char *webhook_secret;    /* NULL: unsigned */
    const char *model_path;        /* the served model, for the reports */
    bool flow;                     /* it is a flow (.toml): the recorder keeps its nodes' calls,
                                    * the deep trace records them with the inference nodes'
                                    * runtime and kernel layers */
    const char *const *flow_nodes; /* a flow's node names (conditions resolve against them) */
    const int *flow_workers;       /* and their workers (NULL: one each) */
    size_t n_flow_nodes;
    int max_batch, threads;
    const char *rules_dir; /* NULL: the default packs */
};

void cp_monitor_opts_init(struct cp_monitor_opts *o);

struct cp_monitor;

/* Make a monitor (its recorder reserved up front). Errors: options out of
 * range (CP_ERR_USAGE naming the flag), the incident folder cannot be made
 * (CP_ERR_IO). OUT: *out. */
enum cp_status cp_monitor_create(const struct cp_monitor_opts *o, struct cp_monitor **out,
                                 struct cp_diag *d);

/* The hooks to give the server (owned by the monitor). */
const struct cp_serve_hooks *cp_monitor_hooks(struct cp_monitor *m);

/* Start its thread (evaluation and incidents), and stop it: an incident in
 * progress is finished first. */
enum cp_status cp_monitor_start(struct cp_monitor *m, struct cp_diag *d);
void cp_monitor_stop(struct cp_monitor *m);

struct cp_monitor_stats {
    uint64_t requests_seen, incidents, suppressed, resolved, capture_errors, alerts_failed;
    enum cp_mon_state state;
};
void cp_monitor_get_stats(struct cp_monitor *m, struct cp_monitor_stats *s);

void cp_monitor_free(struct cp_monitor *m); /* stops it first; NULL is a no-op */

#endif
