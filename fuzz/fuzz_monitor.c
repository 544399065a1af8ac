/* `serve --monitor "p99_latency>2s,error_rate>1%"`: parse; what parses has
 * one to eight conditions of known statistics and nodes with finite,
 * non-negative thresholds, and each prints its values; a refusal leaves no
 * condition behind. */
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
            if ((unsigned)x->stat >= CP_MON_STAT_COUNT || x->node < -1 || x->node >= CP_MON_N_NODES)
                fuzz_fail("'%s': condition %zu names no statistic or node", text, i);
            char v[48];
            cp_mon_format_value(x, x->value, v);
            (void)cp_mon_condition_fires(x, x->value);
            (void)cp_mon_condition_clears(x, NAN, 0.1);
        }
    }
    free(text);
    return 0;
}
