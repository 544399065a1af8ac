/* ATC-style convert flags (`cannprof convert --input_shape=... ...`): one
 * `flag=value` per line of the input, set one by one as the command line
 * sets them, then the config checked as a whole, printed back as a command
 * and as JSON, and the JSON read back. */
#include "harness.h"

#include "om/config.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    if (!text)
        return 0;
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    struct cp_diag d;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        cp_diag_init(&d);
        /* --fusion_switch_file would read a file: fuzz_fusion_switches
         * covers that, and the flag's value is only a path here */
        fuzz_expect_refusal("cp_convert_config_set", cp_convert_config_set(&c, line, eq + 1, &d),
                            &d);
    }
    cp_diag_init(&d);
    fuzz_expect_refusal("cp_convert_config_validate", cp_convert_config_validate(&c, &d), &d);
    struct cp_buf cmd, json;
    cp_buf_init(&cmd);
    cp_buf_init(&json);
    cp_convert_config_cmdline(&c, &cmd);
    cp_convert_config_json(&c, &json);
    if (cp_buf_status(&json) == CP_OK) {
        struct cp_convert_config back;
        cp_diag_init(&d);
        if (cp_convert_config_from_json(&back, json.data, &d) != CP_OK)
            fuzz_fail("a config set from flags does not read back from its JSON: %s\n%s", d.msg,
                      json.data);
    }
    cp_buf_release(&cmd);
    cp_buf_release(&json);
    free(text);
    return 0;
}
