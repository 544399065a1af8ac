/* `serve --monitor "p99_latency>2s,error_rate>1%"`: parse; what parses has
 * one to eight conditions of known statistics and nodes with finite,
 * non-negative thresholds, and each prints its values; a refusal leaves no
 * condition behind. What parses is then resolved against a served model
 * and against a flow: a flow's node resolves to its index, nothing else
 * does, and a refusal says so. */
#include "harness.h"

#include "monitor/monitor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    if (!text)
        return 0;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_mon_conditions c;
    enum cp_status st = cp_mon_conditions_parse(text, &c, &d);
    fuzz_expect_refusal("cp_mon_conditions_parse", st, &d);
    if (st != CP_OK && c.n != 0)
        fuzz_fail("a refused --monitor left %zu conditions", c.n);
    if (st == CP_OK) {
        if (c.n < 1 || c.n > CP_MON_MAX_CONDITIONS)
            fuzz_fail("'%s' parsed into %zu conditions", text, c.n);
        for (size_t i = 0; i < c.n; i++) {
            const struct cp_mon_condition *x = &c.c[i];
            if (!isfinite(x->value) || x->value < 0)
                fuzz_fail("'%s': condition %zu has the threshold %g", text, i, x->value);
            if ((unsigned)x->stat >= CP_MON_STAT_COUNT || x->node < CP_MON_NODE_FLOW ||
                x->node >= CP_MON_N_NODES || (x->node == CP_MON_NODE_FLOW && !x->node_name[0]))
                fuzz_fail("'%s': condition %zu names no statistic or node", text, i);
            char v[48];
            cp_mon_format_value(x, x->value, v);
            (void)cp_mon_condition_fires(x, x->value);
            (void)cp_mon_condition_clears(x, NAN, 0.1);
        }
        static const char *const flow[] = {"src", "prep", "model", "den.oiser", "out"};
        struct cp_mon_conditions r = c;
        cp_diag_init(&d);
        static const int workers[] = {1, 2, 1, 4, 1};
        st = cp_mon_conditions_resolve(&r, "flow.toml", flow, workers, 5, &d);
        fuzz_expect_refusal("cp_mon_conditions_resolve", st, &d);
        for (size_t i = 0; st == CP_OK && i < r.n; i++) {
            const struct cp_mon_condition *x = &r.c[i];
            if (x->node == CP_MON_NODE_FLOW &&
                (x->flow_node < 0 || x->flow_node >= 5 ||
                 strcmp(flow[x->flow_node], x->node_name) || x->workers != workers[x->flow_node]))
                fuzz_fail("'%s': condition %zu resolved to the flow's node %d", text, i,
                          x->flow_node);
        }
        r = c;
        cp_diag_init(&d);
        st = cp_mon_conditions_resolve(&r, "model.om", NULL, NULL, 0, &d);
        fuzz_expect_refusal("cp_mon_conditions_resolve", st, &d);
        for (size_t i = 0; st == CP_OK && i < r.n; i++)
            if (r.c[i].node == CP_MON_NODE_FLOW)
                fuzz_fail("'%s': a served model resolved a flow's node", text);
    }
    free(text);
    return 0;
}
