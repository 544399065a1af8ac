/* `--constraints "memory<3GB,precision_loss<1%"`: parse; what parses
 * prints in its canonical form, which parses back to the same
 * constraints (the tuner's command lines and the knowledge base rely on
 * it); and every parsed bound can be checked. */
#include "harness.h"

#include "rules/constraints.h"

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
    struct cp_constraints c;
    enum cp_status st = cp_constraints_parse(text, &c, &d);
    fuzz_expect_refusal("cp_constraints_parse", st, &d);
    if (st != CP_OK && c.n != 0)
        fuzz_fail("a refused --constraints left %zu constraints", c.n);
    if (st == CP_OK) {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_constraints_format(&c, &b);
        if (cp_buf_status(&b) == CP_OK && b.data) {
            struct cp_constraints back;
            cp_diag_init(&d);
            if (cp_constraints_parse(b.data, &back, &d) != CP_OK)
                fuzz_fail("canonical constraints '%s' (from '%s') do not parse: %s", b.data, text,
                          d.msg);
            if (back.n != c.n)
                fuzz_fail("canonical constraints '%s' give %zu constraints, not %zu", b.data,
                          back.n, c.n);
            for (size_t i = 0; i < c.n; i++)
                if (back.items[i].kind != c.items[i].kind || back.items[i].op != c.items[i].op ||
                    strcmp(back.items[i].output, c.items[i].output) != 0 ||
                    !(fabs(back.items[i].value - c.items[i].value) <=
                      1e-9 * fabs(c.items[i].value)))
                    fuzz_fail("canonical constraints '%s' change constraint %zu of '%s'", b.data, i,
                              text);
        }
        cp_buf_release(&b);
        for (size_t i = 0; i < c.n; i++) {
            char v[48];
            cp_constraint_format_value(c.items[i].kind, c.items[i].value, v);
            (void)cp_constraint_holds(&c.items[i], c.items[i].value);
            (void)cp_constraint_holds(&c.items[i], NAN);
        }
    }
    free(text);
    return 0;
}
