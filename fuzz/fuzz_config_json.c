/* The conversion config as JSON (recorded in every .om, stored in tuning
 * points): parse, then the promise the .om relies on: what the config
 * writes, it reads back to the same text. */
#include "harness.h"

#include "om/config.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    if (!text)
        return 0;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_convert_config c;
    enum cp_status st = cp_convert_config_from_json(&c, text, &d);
    fuzz_expect_refusal("cp_convert_config_from_json", st, &d);
    if (st == CP_OK) {
        struct cp_buf a, b, cmd;
        cp_buf_init(&a);
        cp_buf_init(&b);
        cp_buf_init(&cmd);
        cp_convert_config_json(&c, &a);
        cp_convert_config_cmdline(&c, &cmd);
        char id[17];
        cp_convert_config_id(&c, id);
        struct cp_diag v;
        cp_diag_init(&v);
        fuzz_expect_refusal("cp_convert_config_validate", cp_convert_config_validate(&c, &v), &v);
        if (cp_buf_status(&a) == CP_OK) {
            struct cp_convert_config back;
            cp_diag_init(&d);
            if (cp_convert_config_from_json(&back, a.data, &d) != CP_OK)
                fuzz_fail("the config's own JSON does not read back: %s\n%s", d.msg, a.data);
            cp_convert_config_json(&back, &b);
            if (cp_buf_status(&b) == CP_OK && strcmp(a.data, b.data) != 0)
                fuzz_fail("the config's JSON changes on a round trip:\n%s\n%s", a.data, b.data);
        }
        cp_buf_release(&a);
        cp_buf_release(&b);
        cp_buf_release(&cmd);
    }
    free(text);
    return 0;
}
