/* The monitor's conditions and its alarm against a fake clock
 * (monitor/monitor.h): what parses and what is refused, the window's values
 * on synthetic requests, and the state machine: firing once, after the hold
 * and inside the window; no firing on a window too thin to decide; clearing
 * only past the hysteresis margin; the cooldown and the hourly cap. */
#include "monitor/monitor.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S(x) ((int64_t)((x)*1e9))

static struct cp_mon_conditions parse_ok(const char *text)
{
    struct cp_mon_conditions c;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_mon_conditions_parse(text, &c, &d), CP_OK, "%s: %s", text, d.msg);
    return c;
}

static void parse_bad(const char *text, const char *says)
{
    struct cp_mon_conditions c;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(cp_mon_conditions_parse(text, &c, &d), CP_ERR_USAGE, "%s was accepted", text);
    cr_expect(strstr(d.msg, says) != NULL, "%s: '%s' does not say '%s'", text, d.msg, says);
    cr_expect_eq(c.n, 0);
}

Test(monitor, conditions_use_the_constraint_grammars_quantities_and_units)
{
    struct cp_mon_conditions c = parse_ok("p99_latency>2.0s");
    cr_expect_eq(c.n, 1);
    cr_expect_eq(c.c[0].stat, CP_MON_P99);
    cr_expect_eq(c.c[0].node, -1);
    cr_expect(c.c[0].above && !c.c[0].inclusive);
    cr_expect_float_eq(c.c[0].value, 2.0, 1e-12);

    c = parse_ok(
        " error_rate >= 1% , throughput<50/s,model.p99_latency>50ms, model.queue_depth>8 ");
    cr_expect_eq(c.n, 4);
    cr_expect_eq(c.c[0].stat, CP_MON_ERROR_RATE);
    cr_expect(c.c[0].inclusive);
    cr_expect_float_eq(c.c[0].value, 1.0, 1e-12);
    cr_expect_eq(c.c[1].stat, CP_MON_THROUGHPUT);
    cr_expect(!c.c[1].above);
    cr_expect_float_eq(c.c[1].value, 50.0, 1e-12);
    cr_expect_eq(c.c[2].node, CP_MON_NODE_MODEL);
    cr_expect_float_eq(c.c[2].value, 0.05, 1e-12);
    cr_expect_eq(c.c[3].stat, CP_MON_QUEUE_DEPTH);
    cr_expect_float_eq(c.c[3].value, 8.0, 1e-12);
    cr_expect_str_eq(c.c[2].text, "model.p99_latency>50ms");

    parse_bad("p99_latncy>2s", "unknown statistic 'p99_latncy'");
    parse_bad("p99_latency>2", "latency needs a unit");
    parse_bad("p99_latency>2 sec", "unknown unit 'sec'");
    parse_bad("error_rate>1s", "unknown unit 's' for precision_loss");
    parse_bad("p99_latency>-1s", "cannot be negative");
    parse_bad("p99_latency=2s", "expected >, >=, < or <=");
    parse_bad("gpu.error_rate>1%", "error_rate and throughput are the service's");
    parse_bad("busy>50%", "busy is a flow node's");
    parse_bad("model.busy>50%", "busy is a flow node's");
    parse_bad("model.error_rate>1%", "error_rate and throughput are the service's");
    parse_bad("http.queue_depth>3", "only the model node has a queue");
    parse_bad("queue_depth>3ms", "a count without a unit");
    parse_bad("p99_latency>2s,,", "an empty condition");
    parse_bad("", "an empty condition");
    parse_bad("p99_latency>1s,p99_latency>2s,p99_latency>3s,p99_latency>4s,p99_latency>5s,"
              "p99_latency>6s,p99_latency>7s,p99_latency>8s,p99_latency>9s",
              "more than 8");
}

/* Synthetic answered requests: `rate` per second over [t0, t1), each
 * taking `lat` seconds (half of it queued for the model), answered 200. */
static void add(struct cp_serve_event **v, size_t *n, double t0, double t1, double rate, double lat)
{
    size_t k = (size_t)((t1 - t0) * rate);
    *v = realloc(*v, (*n + k) * sizeof **v);
    cr_assert_not_null(*v);
    for (size_t i = 0; i < k; i++) {
        double t = t0 + (double)i / rate;
        struct cp_serve_event *e = &(*v)[(*n)++];
        memset(e, 0, sizeof *e);
        e->code = 200;
        e->arrive_ns = S(t - lat);
        e->queued_ns = S(t - lat + 0.0001);
        e->popped_ns = e->run_start_ns = S(t - lat / 2);
        e->run_end_ns = S(t - 0.0001);
        e->woken_ns = e->run_end_ns;
        e->replied_ns = S(t);
        e->batch = 1;
        e->depth = lat > 0.02 ? 5 : 0;
    }
}

struct timeline {
    double fire[8], resolve[8], suppress[8];
    size_t n_fire, n_resolve, n_suppress;
};

/* Tick every `tick` seconds from the first full window to `end` with the
 * policy (the monitor decides nothing before a window has passed). */
static struct timeline drive(const struct cp_mon_conditions *c, const struct cp_mon_policy *p,
                             const struct cp_serve_event *v, size_t n, double end, double tick)
{
    struct timeline tl;
    memset(&tl, 0, sizeof tl);
    struct cp_mon_alarm a;
    cp_mon_alarm_init(&a, p);
    for (double t = p->window_s; t <= end + 1e-9; t += tick) {
        struct cp_mon_values val;
        cp_mon_window(c, v, n, NULL, 0, S(t - p->window_s), S(t), p->min_requests, &val);
        switch (cp_mon_alarm_step(&a, c, &val, S(t))) {
        case CP_MON_FIRE:
            if (tl.n_fire < 8)
                tl.fire[tl.n_fire++] = t;
            break;
        case CP_MON_RESOLVED:
            if (tl.n_resolve < 8)
                tl.resolve[tl.n_resolve++] = t;
            break;
        case CP_MON_SUPPRESSED:
            if (tl.n_suppress < 8)
                tl.suppress[tl.n_suppress++] = t;
            break;
        default:
            break;
        }
    }
    return tl;
}

static struct cp_mon_policy policy(void)
{
    struct cp_mon_policy p;
    cp_mon_policy_init(&p);
    p.window_s = 5;
    p.hold_s = 2;
    p.min_requests = 20;
    p.cooldown_s = 300;
    return p;
}

Test(monitor, the_window_computes_what_each_condition_names)
{
    struct cp_mon_conditions c =
        parse_ok("p50_latency>1s,p99_latency>1s,mean_latency>1s,max_latency>1s,error_rate>1%,"
                 "throughput<1/s,model.p99_latency>1s,model.queue_depth>1");
    struct cp_serve_event *v = NULL;
    size_t n = 0;
    add(&v, &n, 0, 9, 10, 0.010);  /* 90 requests of 10 ms */
    add(&v, &n, 9, 10, 10, 0.100); /* then 10 of 100 ms */
    v[0].code = 503;               /* one failed */
    struct cp_mon_values val;
    cp_mon_window(&c, v, n, NULL, 0, S(0) - 1, S(10), 20, &val);
    cr_expect_eq(val.requests, 100);
    cr_expect_eq(val.ok, 99);
    for (size_t k = 0; k < c.n; k++)
        cr_expect(val.known[k], "%s unknown", c.c[k].text);
    cr_expect_float_eq(val.v[0], 0.010, 1e-9);                          /* p50 */
    cr_expect_float_eq(val.v[1], 0.100, 1e-9);                          /* p99 */
    cr_expect_float_eq(val.v[2], (89 * 0.010 + 10 * 0.100) / 99, 1e-9); /* mean */
    cr_expect_float_eq(val.v[3], 0.100, 1e-9);                          /* max */
    cr_expect_float_eq(val.v[4], 1.0, 1e-9);                            /* 1 of 100 failed */
    cr_expect_float_eq(val.v[5], 99 / 10.0, 1e-6);                      /* per second */
    cr_expect_float_eq(val.v[6], 0.100 - 0.0001 - 0.0001, 1e-6);        /* the model node */
    cr_expect_float_eq(val.v[7], 50.0 / 99, 1e-9);                      /* mean depth */

    /* a window too thin decides nothing */
    cp_mon_window(&c, v, n, NULL, 0, S(9.5), S(10), 20, &val);
    cr_expect_eq(val.requests, 4); /* 9.6 .. 9.9 s */
    for (size_t k = 0; k < c.n; k++)
        cr_expect(!val.known[k]);
    free(v);
}

Test(monitor, a_flows_own_nodes_resolve_by_name_and_take_their_calls_values)
{
    static const char *const flow[] = {"src", "prep", "model", "steps.denoiser", "out"};
    struct cp_mon_conditions c =
        parse_ok("prep.p99_latency>30ms,steps.denoiser.mean_latency>1s,prep.queue_depth>4,"
                 "http.p99_latency>1s,model.p50_latency>1s,prep.busy>50%");
    cr_expect_eq(c.c[0].node, CP_MON_NODE_FLOW);
    cr_expect_str_eq(c.c[0].node_name, "prep");
    cr_expect_str_eq(c.c[1].node_name, "steps.denoiser"); /* the statistic follows the last dot */
    /* a served model has no node "prep" */
    struct cp_mon_conditions r = c;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(cp_mon_conditions_resolve(&r, "m.om", NULL, NULL, 0, &d), CP_ERR_USAGE);
    cr_expect(strstr(d.msg, "no node 'prep' in a served model") != NULL, "%s", d.msg);
    /* a flow resolves its names; its node "model" wins over the stage */
    r = c;
    cp_diag_init(&d);
    static const int workers[] = {1, 2, 1, 1, 1};
    cr_assert_eq(cp_mon_conditions_resolve(&r, "f.toml", flow, workers, 5, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(r.c[0].flow_node, 1);
    cr_expect_eq(r.c[1].flow_node, 3);
    cr_expect_eq(r.c[3].node, CP_MON_NODE_HTTP);
    cr_expect_eq(r.c[4].node, CP_MON_NODE_FLOW);
    cr_expect_eq(r.c[4].flow_node, 2);
    struct cp_mon_conditions bad = parse_ok("prpe.p99_latency>1s");
    cp_diag_init(&d);
    cr_expect_eq(cp_mon_conditions_resolve(&bad, "f.toml", flow, workers, 5, &d), CP_ERR_USAGE);
    cr_expect(strstr(d.msg, "no node 'prpe'") && strstr(d.msg, "src, prep, model"), "%s", d.msg);

    /* 100 requests in 10 s; prep's 100 calls take 10 ms, the last 10 of
     * them 50 ms with 6 queued; the denoiser's take 200 ms */
    struct cp_serve_event *v = NULL;
    size_t n = 0;
    add(&v, &n, 0, 10, 10, 0.010);
    struct cp_mon_node_call calls[200];
    for (int i = 0; i < 100; i++) {
        calls[i] = (struct cp_mon_node_call){.done_ns = S(0.1 * i + 0.05),
                                             .busy_ns = i >= 90 ? S(0.050) : S(0.010),
                                             .node = 1,
                                             .batch = 1,
                                             .depth = i >= 90 ? 6 : 0};
        calls[100 + i] = (struct cp_mon_node_call){
            .done_ns = S(0.1 * i + 0.06), .busy_ns = S(0.2), .node = 3, .batch = 1};
    }
    struct cp_mon_values val;
    cp_mon_window(&r, v, n, calls, 200, S(0) - 1, S(10), 20, &val);
    cr_expect(val.known[0] && val.known[1] && val.known[2]);
    cr_expect_float_eq(val.v[0], 0.050, 1e-9);      /* prep's p99 */
    cr_expect_float_eq(val.v[1], 0.2, 1e-9);        /* the denoiser's mean */
    cr_expect_float_eq(val.v[2], 60.0 / 100, 1e-9); /* prep's mean depth */
    /* prep busy 90 x 10 ms + 10 x 50 ms = 1.4 s of its 2 workers' 10 s */
    cr_expect_float_eq(val.v[5], 100 * 1.4 / 20, 1e-6);
    cr_expect(!cp_mon_condition_fires(&r.c[5], val.v[5]));
    cr_expect(cp_mon_condition_fires(&r.c[0], val.v[0]));
    /* the first 8 s: prep is at 10 ms */
    cp_mon_window(&r, v, n, calls, 200, S(0) - 1, S(8), 20, &val);
    cr_expect_float_eq(val.v[0], 0.010, 1e-9);
    /* no call of the node in the window: nothing said about it */
    struct cp_mon_values none;
    cp_mon_window(&r, v, n, calls + 100, 100, S(0) - 1, S(10), 20, &none);
    cr_expect(!none.known[0] && !none.known[2] && none.known[1]);
    free(v);
}

Test(monitor, a_slowdown_fires_once_after_the_hold_and_resolves_after_it_ends)
{
    struct cp_mon_conditions c = parse_ok("p99_latency>20ms");
    struct cp_mon_policy p = policy();
    struct cp_serve_event *v = NULL;
    size_t n = 0;
    add(&v, &n, 0, 20, 100, 0.005);  /* healthy */
    add(&v, &n, 20, 40, 100, 0.050); /* slow */
    add(&v, &n, 40, 70, 100, 0.005); /* healthy again */
    struct timeline tl = drive(&c, &p, v, n, 70, 0.5);
    cr_expect_eq(tl.n_fire, 1);
    /* the first tick after 20 s sees the slow requests; two seconds of hold */
    cr_expect(tl.fire[0] >= 22.0 && tl.fire[0] <= 23.0, "fired at %.2f", tl.fire[0]);
    cr_expect_eq(tl.n_resolve, 1);
    /* clear once the window holds no slow request (45 s), held 2 s */
    cr_expect(tl.resolve[0] >= 47.0 && tl.resolve[0] <= 48.0, "resolved at %.2f", tl.resolve[0]);
    cr_expect_eq(tl.n_suppress, 0);
    free(v);
}

Test(monitor, a_blip_shorter_than_the_hold_and_a_thin_window_fire_nothing)
{
    struct cp_mon_conditions c = parse_ok("p99_latency>20ms");
    struct cp_mon_policy p = policy();
    p.window_s = 1;
    struct cp_serve_event *v = NULL;
    size_t n = 0;
    add(&v, &n, 0, 10, 100, 0.005);
    add(&v, &n, 10, 10.5, 100, 0.050); /* half a second slow: under the 2 s hold */
    add(&v, &n, 10.5, 30, 100, 0.005);
    add(&v, &n, 30, 60, 5, 0.500); /* very slow, but 5 requests a window */
    struct timeline tl = drive(&c, &p, v, n, 60, 0.25);
    cr_expect_eq(tl.n_fire, 0, "fired at %.2f", tl.fire[0]);
    free(v);
}

Test(monitor, clearing_needs_the_value_past_the_hysteresis_margin)
{
    struct cp_mon_conditions c = parse_ok("p99_latency>10ms");
    struct cp_mon_policy p = policy();
    p.hysteresis = 0.1;
    struct cp_serve_event *v = NULL;
    size_t n = 0;
    add(&v, &n, 0, 10, 100, 0.005);
    add(&v, &n, 10, 20, 100, 0.012);  /* above: fires */
    add(&v, &n, 20, 40, 100, 0.0095); /* below the threshold, inside the 10% margin */
    add(&v, &n, 40, 60, 100, 0.0085); /* past the margin: clears */
    struct timeline tl = drive(&c, &p, v, n, 60, 0.5);
    cr_expect_eq(tl.n_fire, 1);
    cr_expect_eq(tl.n_resolve, 1);
    cr_expect(tl.resolve[0] >= 45.0 + 2 && tl.resolve[0] <= 48.0, "resolved at %.2f",
              tl.resolve[0]);
    free(v);
}

Test(monitor, the_cooldown_and_the_hourly_cap_hold_back_further_incidents)
{
    struct cp_mon_conditions c = parse_ok("p99_latency>20ms");
    struct cp_serve_event *v = NULL;
    size_t n = 0;
    /* two slow episodes, 60 s apart */
    add(&v, &n, 0, 10, 50, 0.005);
    add(&v, &n, 10, 20, 50, 0.050);
    add(&v, &n, 20, 70, 50, 0.005);
    add(&v, &n, 70, 80, 50, 0.050);
    add(&v, &n, 80, 100, 50, 0.005);
    struct cp_mon_policy p = policy();
    p.cooldown_s = 300;
    struct timeline tl = drive(&c, &p, v, n, 100, 0.5);
    cr_expect_eq(tl.n_fire, 1);
    cr_expect_eq(tl.n_suppress, 1);
    cr_expect(tl.suppress[0] > 70 && tl.suppress[0] < 75);

    p.cooldown_s = 10;
    tl = drive(&c, &p, v, n, 100, 0.5);
    cr_expect_eq(tl.n_fire, 2);
    cr_expect_eq(tl.n_suppress, 0);

    p.cooldown_s = 0;
    p.max_per_hour = 1;
    tl = drive(&c, &p, v, n, 100, 0.5);
    cr_expect_eq(tl.n_fire, 1);
    cr_expect_eq(tl.n_suppress, 1);
    free(v);
}

Test(monitor, a_lower_bound_fires_below_and_any_condition_fires)
{
    struct cp_mon_conditions c = parse_ok("throughput<40/s,error_rate>5%");
    struct cp_mon_policy p = policy();
    struct cp_serve_event *v = NULL;
    size_t n = 0;
    add(&v, &n, 0, 20, 50, 0.005);
    add(&v, &n, 20, 40, 30, 0.005); /* throughput drops to 30/s */
    struct timeline tl = drive(&c, &p, v, n, 40, 0.5);
    cr_expect_eq(tl.n_fire, 1);
    cr_expect(tl.fire[0] > 22 && tl.fire[0] < 26, "fired at %.2f", tl.fire[0]);
    /* errors alone fire too */
    n = 0;
    add(&v, &n, 0, 20, 50, 0.005);
    for (size_t i = 500; i < n; i += 10)
        v[i].code = 500; /* 10% of the requests after 10 s */
    tl = drive(&c, &p, v, n, 20, 0.5);
    cr_expect_eq(tl.n_fire, 1);
    free(v);
}

Test(monitor, values_print_in_their_units)
{
    struct cp_mon_conditions c = parse_ok("p99_latency>1s,error_rate>1%,throughput<5/s");
    char out[48];
    cp_mon_format_value(&c.c[0], 0.0836, out);
    cr_expect_str_eq(out, "83.6ms");
    cp_mon_format_value(&c.c[0], 2.5, out);
    cr_expect_str_eq(out, "2.5s");
    cp_mon_format_value(&c.c[1], 4.25, out);
    cr_expect_str_eq(out, "4.25%");
    cp_mon_format_value(&c.c[2], 120, out);
    cr_expect_str_eq(out, "120/s");
    cp_mon_format_value(&c.c[0], NAN, out);
    cr_expect_str_eq(out, "n/a");
}
