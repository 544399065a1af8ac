/* Tuning points as JSON ({"config":{...},"threads":N,"batch":N}, stored in
 * the knowledge base and brought in by `kb import`): parse; what parses
 * writes itself back as JSON that parses to the same point. */
#include "harness.h"

#include "tuner/tuner.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    struct cp_tune_point *p = calloc(2, sizeof *p);
    if (!text || !p) {
        free(text);
        free(p);
        return 0;
    }
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_tune_point_from_json(&p[0], text, &d);
    fuzz_expect_refusal("cp_tune_point_from_json", st, &d);
    if (st == CP_OK) {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_tune_point_json(&p[0], &b);
        if (cp_buf_status(&b) == CP_OK) {
            cp_diag_init(&d);
            if (cp_tune_point_from_json(&p[1], b.data, &d) != CP_OK)
                fuzz_fail("a tuning point's own JSON does not read back: %s\n%s", d.msg, b.data);
            char k0[48], k1[48];
            cp_tune_point_key(&p[0], k0);
            cp_tune_point_key(&p[1], k1);
            if (strcmp(k0, k1) != 0)
                fuzz_fail("a tuning point changes on a round trip: %s, %s\n%s", k0, k1, b.data);
        }
        cp_buf_release(&b);
    }
    free(p);
    free(text);
    return 0;
}
