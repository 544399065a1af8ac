/* Knob deltas ("layout_policy=nchw switch:GeluFusionPass=off threads=1"),
 * as the knowledge base stores them and `kb import` brings them in: parse;
 * the canonical text parses back to itself; applying the delta to the
 * default point checks its values. */
#include "harness.h"

#include "tuner/tuner.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    if (!text)
        return 0;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_delta *dl = calloc(2, sizeof *dl);
    if (!dl) {
        free(text);
        return 0;
    }
    enum cp_status st = cp_delta_parse(text, &dl[0], &d);
    fuzz_expect_refusal("cp_delta_parse", st, &d);
    if (st == CP_OK) {
        struct cp_buf a, b;
        cp_buf_init(&a);
        cp_buf_init(&b);
        cp_delta_format(&dl[0], &a);
        if (cp_buf_status(&a) == CP_OK) {
            const char *canon = a.data ? a.data : "";
            cp_diag_init(&d);
            if (cp_delta_parse(canon, &dl[1], &d) != CP_OK)
                fuzz_fail("canonical delta '%s' (from '%s') does not parse: %s", canon, text,
                          d.msg);
            cp_delta_format(&dl[1], &b);
            const char *again = b.data ? b.data : "";
            if (cp_buf_status(&b) == CP_OK && strcmp(canon, again) != 0)
                fuzz_fail("canonical delta '%s' formats as '%s'", canon, again);
        }
        cp_buf_release(&a);
        cp_buf_release(&b);
        struct cp_tune_point *p = calloc(3, sizeof *p);
        if (p) {
            cp_convert_config_init(&p[0].cfg);
            cp_diag_init(&d);
            st = cp_delta_apply(&p[0], &dl[0], &p[1], &d);
            fuzz_expect_refusal("cp_delta_apply", st, &d);
            if (st == CP_OK) {
                struct cp_delta *between = calloc(1, sizeof *between);
                if (between) {
                    cp_delta_between(&p[0], &p[1], between);
                    cp_diag_init(&d);
                    if (cp_delta_apply(&p[0], between, &p[2], &d) != CP_OK)
                        fuzz_fail("the delta between two points does not apply: %s", d.msg);
                    free(between);
                }
                char key[48];
                cp_tune_point_key(&p[1], key);
            }
            free(p);
        }
    }
    free(dl);
    free(text);
    return 0;
}
