/* --modify_mixlist (ATC's JSON of list changes) and --customize_dtypes
 * (ATC's per-node dtype lines), read into the config's canonical
 * precision_overrides. The first byte picks the flag, the rest is the
 * file. An accepted set is sorted "ENTRY=fp32|bf16|none" lines, each
 * entry once and found by cp_precision_override; a refused one leaves
 * nothing behind. */
#include "harness.h"

#include "om/config.h"

#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static struct cp_convert_config c;
    cp_convert_config_init(&c);
    bool mix = data[0] & 1;
    char *path = mix ? c.modify_mixlist_file : c.customize_dtypes_file;
    size_t cap = mix ? sizeof c.modify_mixlist_file : sizeof c.customize_dtypes_file;
    if (!fuzz_tmp_write(mix ? "mix.json" : "dtypes.txt", data + 1, size - 1, path, cap))
        return 0;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_convert_config_load_precision_overrides(&c, &d);
    fuzz_expect_refusal("cp_convert_config_load_precision_overrides", st, &d);
    if (st == CP_OK) {
        const char *prev = NULL;
        size_t prev_len = 0;
        for (const char *p = c.precision_overrides; *p;) {
            const char *nl = strchr(p, '\n');
            size_t len = nl ? (size_t)(nl - p) : strlen(p);
            const char *eq = NULL;
            for (const char *q = p; q < p + len; q++)
                if (*q == '=')
                    eq = q;
            if (!eq)
                fuzz_fail("line '%.*s' has no '='", (int)len, p);
            const char *v = eq + 1;
            size_t vl = len - (size_t)(v - p);
            if (!((vl == 4 && (strncmp(v, "fp32", 4) == 0 || strncmp(v, "bf16", 4) == 0 ||
                               strncmp(v, "none", 4) == 0))))
                fuzz_fail("line '%.*s' has no precision", (int)len, p);
            if (prev && (strncmp(prev, p, prev_len < len ? prev_len : len) > 0 ||
                         (prev_len == len && strncmp(prev, p, len) == 0)))
                fuzz_fail("the lines are not sorted and unique");
            char entry[1100];
            snprintf(entry, sizeof entry, "%.*s", (int)(eq - p), p);
            const char *got = cp_precision_override(c.precision_overrides, entry);
            if (strncmp(v, "none", 4) == 0 ? got != NULL : !got || strncmp(got, v, 4) != 0)
                fuzz_fail("entry '%s' does not find its own value", entry);
            prev = p;
            prev_len = len;
            p += len + (nl ? 1 : 0);
        }
    } else if (c.precision_overrides[0]) {
        fuzz_fail("a refused file left entries behind: %s", c.precision_overrides);
    }
    fuzz_tmp_remove(path);
    return 0;
}
