/* The monitor's conditions, their values over a window, and the alarm's
 * state machine: all pure, so that tests drive them with a fake clock. */
#include "monitor/monitor.h"
#include "rules/constraints.h"
#include "stats/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    enum cp_mon_stat stat;
    enum cp_constraint_kind kind; /* whose units it takes */
    bool unitless;
} STATS[CP_MON_STAT_COUNT] = {
    {"p50_latency", CP_MON_P50, CP_CONSTRAINT_LATENCY, false},
    {"p90_latency", CP_MON_P90, CP_CONSTRAINT_LATENCY, false},
    {"p99_latency", CP_MON_P99, CP_CONSTRAINT_LATENCY, false},
    {"mean_latency", CP_MON_MEAN, CP_CONSTRAINT_LATENCY, false},
    {"max_latency", CP_MON_MAX, CP_CONSTRAINT_LATENCY, false},
    {"error_rate", CP_MON_ERROR_RATE, CP_CONSTRAINT_PRECISION_LOSS, false},
    {"throughput", CP_MON_THROUGHPUT, CP_CONSTRAINT_THROUGHPUT, false},
    {"queue_depth", CP_MON_QUEUE_DEPTH, CP_CONSTRAINT_THROUGHPUT, true},
    {"busy", CP_MON_BUSY, CP_CONSTRAINT_PRECISION_LOSS, false},
};

static const char *const NODES[CP_MON_N_NODES] = {"http", "model", "reply"};

#define KNOWN_STATS                                                                                \
    "p50_latency, p90_latency, p99_latency, mean_latency, max_latency, error_rate, throughput, "   \
    "queue_depth, busy (a flow node's)"

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

static enum cp_status item_error(struct cp_diag *d, const char *s, size_t len, const char *msg)
{
    return cp_diag_set(d, CP_ERR_USAGE, "--monitor: '%.*s': %s", (int)(len < 90 ? len : 90), s,
                       msg);
}

static enum cp_status parse_item(const char *s, size_t len, struct cp_mon_condition *c,
                                 struct cp_diag *d)
{
    memset(c, 0, sizeof *c);
    c->node = -1;
    c->flow_node = -1;
    snprintf(c->text, sizeof c->text, "%.*s", (int)(len < sizeof c->text - 1 ? len : 95), s);
    size_t i = 0;
    while (i < len && (s[i] == '_' || s[i] == '.' || s[i] == '-' || (s[i] >= 'a' && s[i] <= 'z') ||
                       (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
        i++;
    char name[128];
    if (i == 0 || i >= sizeof name)
        return item_error(d, s, len, "expected [NODE.]STATISTIC first; statistics: " KNOWN_STATS);
    memcpy(name, s, i);
    name[i] = '\0';
    /* the statistic follows the last dot: a node's name may hold dots */
    char *stat = name, *dot = strrchr(name, '.');
    if (dot) {
        *dot = '\0';
        stat = dot + 1;
        if (!name[0] || strlen(name) >= sizeof c->node_name)
            return item_error(d, s, len, "a node's name is 1 to 63 characters before the dot");
        snprintf(c->node_name, sizeof c->node_name, "%.63s", name);
        c->node = CP_MON_NODE_FLOW;
        for (int k = 0; k < CP_MON_N_NODES; k++)
            if (strcmp(name, NODES[k]) == 0)
                c->node = k;
    }
    int found = -1;
    for (int k = 0; k < CP_MON_STAT_COUNT; k++)
        if (strcmp(stat, STATS[k].name) == 0)
            found = k;
    if (found < 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "unknown statistic '%.40s'; known: " KNOWN_STATS, stat);
        return item_error(d, s, len, msg);
    }
    c->stat = STATS[found].stat;
    if (c->stat == CP_MON_BUSY && c->node != CP_MON_NODE_FLOW)
        return item_error(d, s, len,
                          "busy is a flow node's share of its workers' time, as in "
                          "denoiser.busy>90%");
    if (c->node != -1 && c->stat >= CP_MON_ERROR_RATE && c->stat != CP_MON_QUEUE_DEPTH &&
        c->stat != CP_MON_BUSY)
        return item_error(d, s, len,
                          "a node has latencies and a queue depth (NODE.p99_latency, "
                          "model.queue_depth); error_rate and throughput are the service's");
    if (c->stat == CP_MON_QUEUE_DEPTH && c->node >= 0 && c->node != CP_MON_NODE_MODEL)
        return item_error(d, s, len, "only the model node has a queue (model.queue_depth)");
    while (i < len && is_space(s[i]))
        i++;
    enum cp_constraint_op op;
    if (i + 1 < len && (s[i] == '>' || s[i] == '<') && s[i + 1] == '=') {
        op = s[i] == '>' ? CP_CONSTRAINT_GE : CP_CONSTRAINT_LE;
        i += 2;
    } else if (i < len && (s[i] == '>' || s[i] == '<')) {
        op = s[i] == '>' ? CP_CONSTRAINT_GT : CP_CONSTRAINT_LT;
        i += 1;
    } else {
        return item_error(d, s, len,
                          "expected >, >=, < or <= after the statistic, as in p99_latency>2s");
    }
    c->above = op == CP_CONSTRAINT_GT || op == CP_CONSTRAINT_GE;
    c->inclusive = op == CP_CONSTRAINT_GE || op == CP_CONSTRAINT_LE;
    if (STATS[found].unitless) {
        while (i < len && is_space(s[i]))
            i++;
        char num[48];
        size_t n = len - i;
        if (n == 0 || n >= sizeof num)
            return item_error(d, s, len, "queue_depth takes a count, as in queue_depth>8");
        memcpy(num, s + i, n);
        num[n] = '\0';
        char *end = NULL;
        c->value = strtod(num, &end);
        while (end && is_space(*end))
            end++;
        if (end == num || *end || !isfinite(c->value) || c->value < 0)
            return item_error(d, s, len,
                              "queue_depth takes a count without a unit, as in queue_depth>8");
        return CP_OK;
    }
    return cp_constraint_parse_value("--monitor", s, len, i, STATS[found].kind, op, &c->value, d);
}

enum cp_status cp_mon_conditions_parse(const char *text, struct cp_mon_conditions *out,
                                       struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return cp_diag_set(d, CP_ERR_USAGE, "--monitor: give a condition, as in p99_latency>2s");
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        const char *a = p;
        size_t n = len;
        while (n && is_space(*a))
            a++, n--;
        while (n && is_space(a[n - 1]))
            n--;
        if (n == 0) {
            memset(out, 0, sizeof *out);
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--monitor: an empty condition in '%.100s' (conditions are "
                               "separated by commas, as in p99_latency>2s,error_rate>1%%)",
                               text);
        }
        if (out->n == CP_MON_MAX_CONDITIONS) {
            memset(out, 0, sizeof *out);
            return cp_diag_set(d, CP_ERR_USAGE, "--monitor: more than %d conditions",
                               CP_MON_MAX_CONDITIONS);
        }
        enum cp_status st = parse_item(a, n, &out->c[out->n], d);
        if (st != CP_OK) {
            memset(out, 0, sizeof *out);
            return st;
        }
        out->n++;
        if (!p[len])
            break;
        p += len + 1;
    }
    return CP_OK;
}

enum cp_status cp_mon_conditions_resolve(struct cp_mon_conditions *c, const char *what,
                                         const char *const *flow_nodes, const int *workers,
                                         size_t n, struct cp_diag *d)
{
    for (size_t k = 0; k < c->n; k++) {
        struct cp_mon_condition *cd = &c->c[k];
        if (!cd->node_name[0])
            continue;
        cd->flow_node = -1;
        for (size_t i = 0; flow_nodes && i < n; i++)
            if (flow_nodes[i] && strcmp(flow_nodes[i], cd->node_name) == 0) {
                cd->flow_node = (int)i;
                cd->node = CP_MON_NODE_FLOW;
                cd->workers = workers && workers[i] > 0 ? workers[i] : 1;
                break;
            }
        if (cd->node != CP_MON_NODE_FLOW || cd->flow_node >= 0)
            continue;
        if (!flow_nodes)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--monitor: '%s': no node '%s' in a served model; its nodes are "
                               "http, model and reply (a flow's own nodes are watched when a "
                               ".toml flow is served)",
                               cd->text, cd->node_name);
        char names[600] = "";
        size_t at = 0;
        for (size_t i = 0; i < n && at < sizeof names - 1; i++) {
            int w = snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "",
                             flow_nodes[i] ? flow_nodes[i] : "?");
            at += w > 0 ? (size_t)w : 0;
        }
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--monitor: '%s': the flow %.300s has no node '%s'; its nodes are "
                           "%.600s (and http, model and reply, the request's stages)",
                           cd->text, what ? what : "served", cd->node_name, names);
    }
    return CP_OK;
}

void cp_mon_format_value(const struct cp_mon_condition *c, double v, char out[48])
{
    if (!isfinite(v)) {
        snprintf(out, 48, "n/a");
        return;
    }
    switch (c->stat) {
    case CP_MON_QUEUE_DEPTH:
        snprintf(out, 48, "%.3g", v);
        return;
    case CP_MON_ERROR_RATE:
    case CP_MON_BUSY:
        snprintf(out, 48, "%.3g%%", v);
        return;
    case CP_MON_THROUGHPUT:
        snprintf(out, 48, "%.4g/s", v);
        return;
    default: /* seconds */
        if (v >= 1)
            snprintf(out, 48, "%.4gs", v);
        else if (v >= 1e-3)
            snprintf(out, 48, "%.4gms", v * 1e3);
        else
            snprintf(out, 48, "%.4gus", v * 1e6);
        return;
    }
}

/* ---- the window ------------------------------------------------------------------------------ */

/* A request's time in node k, or in the whole service (k < 0). */
static double request_s(const struct cp_serve_event *e, int k)
{
    switch (k) {
    case CP_MON_NODE_HTTP:
        return (double)(e->queued_ns - e->arrive_ns) / 1e9;
    case CP_MON_NODE_MODEL:
        return (double)(e->run_end_ns - e->queued_ns) / 1e9;
    case CP_MON_NODE_REPLY:
        return (double)(e->replied_ns - e->run_end_ns) / 1e9;
    default:
        return (double)(e->replied_ns - e->arrive_ns) / 1e9;
    }
}

/* A statistic of x[0..m): the mean (queue_depth too) or a quantile. */
static double summarise(enum cp_mon_stat stat, double *x, size_t m)
{
    if (stat == CP_MON_MEAN || stat == CP_MON_QUEUE_DEPTH) {
        double sum = 0;
        for (size_t i = 0; i < m; i++)
            sum += x[i];
        return sum / (double)m;
    }
    double q = stat == CP_MON_P50   ? 0.5
               : stat == CP_MON_P90 ? 0.9
               : stat == CP_MON_P99 ? 0.99
                                    : 1.0;
    return cp_stats_quantile(x, m, q);
}

/* A flow node's value over its calls done in (from_ns, to_ns]: NAN when it
 * had none. x has room for n_calls. */
static double node_value(const struct cp_mon_condition *cd, const struct cp_mon_node_call *calls,
                         size_t n_calls, int64_t from_ns, int64_t to_ns, double *x)
{
    size_t m = 0;
    double busy = 0;
    for (size_t i = 0; i < n_calls; i++) {
        const struct cp_mon_node_call *k = &calls[i];
        if (k->node == (uint32_t)cd->flow_node && k->done_ns > from_ns && k->done_ns <= to_ns) {
            x[m++] = cd->stat == CP_MON_QUEUE_DEPTH ? (double)k->depth : (double)k->busy_ns / 1e9;
            busy += (double)k->busy_ns;
        }
    }
    if (m == 0)
        return NAN;
    if (cd->stat == CP_MON_BUSY) /* a call ending in the window counts whole */
        return 100 * busy / ((double)(to_ns - from_ns) * (cd->workers > 0 ? cd->workers : 1));
    return summarise(cd->stat, x, m);
}

void cp_mon_window(const struct cp_mon_conditions *c, const struct cp_serve_event *ev, size_t n,
                   const struct cp_mon_node_call *calls, size_t n_calls, int64_t from_ns,
                   int64_t to_ns, size_t min_requests, struct cp_mon_values *out)
{
    memset(out, 0, sizeof *out);
    size_t ok = 0, all = 0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].replied_ns > from_ns && ev[i].replied_ns <= to_ns) {
            all++;
            ok += ev[i].code == 200 && ev[i].queued_ns && ev[i].run_end_ns;
        }
    out->requests = all;
    out->ok = ok;
    if (all < min_requests || all == 0)
        return;
    double window_s = (double)(to_ns - from_ns) / 1e9;
    size_t room = ok > n_calls ? ok : n_calls;
    double *x = cp_calloc(room ? room : 1, sizeof *x);
    if (!x)
        return;
    for (size_t k = 0; k < c->n; k++) {
        const struct cp_mon_condition *cd = &c->c[k];
        if (cd->node == CP_MON_NODE_FLOW) {
            out->v[k] = cd->flow_node >= 0 && calls
                            ? node_value(cd, calls, n_calls, from_ns, to_ns, x)
                            : NAN;
            out->known[k] = isfinite(out->v[k]);
            continue;
        }
        if (cd->stat == CP_MON_ERROR_RATE) {
            out->v[k] = 100.0 * (double)(all - ok) / (double)all;
            out->known[k] = true;
            continue;
        }
        if (cd->stat == CP_MON_THROUGHPUT) {
            out->v[k] = window_s > 0 ? (double)ok / window_s : 0;
            out->known[k] = true;
            continue;
        }
        if (ok == 0)
            continue; /* latencies of nothing */
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            const struct cp_serve_event *e = &ev[i];
            if (e->replied_ns > from_ns && e->replied_ns <= to_ns && e->code == 200 &&
                e->queued_ns && e->run_end_ns)
                x[m++] = cd->stat == CP_MON_QUEUE_DEPTH ? (double)e->depth : request_s(e, cd->node);
        }
        double v = summarise(cd->stat, x, m);
        out->v[k] = v;
        out->known[k] = isfinite(v);
    }
    free(x);
}

bool cp_mon_condition_fires(const struct cp_mon_condition *c, double v)
{
    if (!isfinite(v))
        return false;
    if (c->above)
        return c->inclusive ? v >= c->value : v > c->value;
    return c->inclusive ? v <= c->value : v < c->value;
}

bool cp_mon_condition_clears(const struct cp_mon_condition *c, double v, double hysteresis)
{
    if (!isfinite(v))
        return false;
    return c->above ? v < c->value * (1 - hysteresis) : v > c->value * (1 + hysteresis);
}

/* ---- the alarm ------------------------------------------------------------------------------ */

void cp_mon_policy_init(struct cp_mon_policy *p)
{
    *p = (struct cp_mon_policy){
        .window_s = 30,
        .hold_s = 10,
        .hysteresis = 0.1,
        .min_requests = 20,
        .cooldown_s = 300,
        .max_per_hour = 6,
    };
}

const char *cp_mon_state_name(enum cp_mon_state s)
{
    static const char *const names[] = {"ok", "pending", "firing", "resolving"};
    return (unsigned)s < 4 ? names[s] : "unknown";
}

void cp_mon_alarm_init(struct cp_mon_alarm *a, const struct cp_mon_policy *p)
{
    memset(a, 0, sizeof *a);
    a->p = *p;
    a->trigger = -1;
}

enum cp_mon_event cp_mon_alarm_step(struct cp_mon_alarm *a, const struct cp_mon_conditions *c,
                                    const struct cp_mon_values *v, int64_t now_ns)
{
    /* bad: a condition holds; clear: every condition is known and back
     * past its margin; neither: too few requests, or inside the margin */
    int bad = -1;
    bool clear = c->n > 0;
    for (size_t k = 0; k < c->n; k++) {
        if (!v->known[k]) {
            clear = false;
            continue;
        }
        if (bad < 0 && cp_mon_condition_fires(&c->c[k], v->v[k]))
            bad = (int)k;
        if (!cp_mon_condition_clears(&c->c[k], v->v[k], a->p.hysteresis))
            clear = false;
    }
    int64_t hold = (int64_t)(a->p.hold_s * 1e9);
    switch (a->state) {
    case CP_MON_OK:
        if (bad >= 0) {
            a->state = CP_MON_PENDING;
            a->since_ns = a->first_bad_ns = now_ns;
        }
        return CP_MON_NOTHING;
    case CP_MON_PENDING:
        if (bad < 0) {
            a->state = CP_MON_OK;
            return CP_MON_NOTHING;
        }
        if (now_ns - a->since_ns < hold)
            return CP_MON_NOTHING;
        a->state = CP_MON_FIRING;
        a->since_ns = now_ns;
        a->trigger = bad;
        a->trigger_value = v->v[bad];
        /* the hour's incidents, the cooldown since the last */
        while (a->n_fires && now_ns - a->fires_ns[0] >= (int64_t)3600e9) {
            memmove(a->fires_ns, a->fires_ns + 1, (a->n_fires - 1) * sizeof *a->fires_ns);
            a->n_fires--;
        }
        if ((a->n_fires &&
             now_ns - a->fires_ns[a->n_fires - 1] < (int64_t)(a->p.cooldown_s * 1e9)) ||
            (int)a->n_fires >= a->p.max_per_hour) {
            a->suppressed++;
            return CP_MON_SUPPRESSED;
        }
        if (a->n_fires == sizeof a->fires_ns / sizeof *a->fires_ns) {
            memmove(a->fires_ns, a->fires_ns + 1, (a->n_fires - 1) * sizeof *a->fires_ns);
            a->n_fires--;
        }
        a->fires_ns[a->n_fires++] = now_ns;
        a->incidents++;
        return CP_MON_FIRE;
    case CP_MON_FIRING:
        if (clear) {
            a->state = CP_MON_RESOLVING;
            a->since_ns = now_ns;
        }
        return CP_MON_NOTHING;
    case CP_MON_RESOLVING:
        if (!clear) {
            a->state = CP_MON_FIRING;
            return CP_MON_NOTHING;
        }
        if (now_ns - a->since_ns < hold)
            return CP_MON_NOTHING;
        a->state = CP_MON_OK;
        a->trigger = -1;
        a->resolved++;
        return CP_MON_RESOLVED;
    }
    return CP_MON_NOTHING;
}
