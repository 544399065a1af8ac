/* --keep_dtype files (`convert --keep_dtype`): ONNX node names and
 * `OpType::X` lines. The reader takes a path, so the input is written to a
 * file in the target's temporary folder. An accepted list is canonical:
 * parsing its canonical text again gives the same text, and every entry of
 * it is found by cp_keep_dtype_has. */
#include "harness.h"

#include "om/config.h"

#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    if (!fuzz_tmp_write("keep.txt", data, size, c.keep_dtype_file, sizeof c.keep_dtype_file))
        return 0;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_convert_config_load_keep_dtype(&c, &d);
    fuzz_expect_refusal("cp_convert_config_load_keep_dtype", st, &d);
    if (st == CP_OK) {
        static char again[CP_KEEP_DTYPE_MAX];
        if (cp_keep_dtype_parse("canonical", c.keep_dtype, strlen(c.keep_dtype), again,
                                sizeof again, &d) != CP_OK)
            fuzz_fail("the canonical list does not parse: %s", d.msg);
        if (strcmp(again, c.keep_dtype) != 0)
            fuzz_fail("the canonical list is not canonical");
        for (const char *p = c.keep_dtype; *p;) {
            const char *nl = strchr(p, '\n');
            size_t len = nl ? (size_t)(nl - p) : strlen(p);
            char entry[1024];
            snprintf(entry, sizeof entry, "%.*s", (int)len, p);
            if (!cp_keep_dtype_has(c.keep_dtype, entry))
                fuzz_fail("entry '%s' is not found in its own list", entry);
            p += len + (nl ? 1 : 0);
        }
    } else if (c.keep_dtype[0]) {
        fuzz_fail("a refused list left entries behind: %s", c.keep_dtype);
    }
    fuzz_tmp_remove(c.keep_dtype_file);
    return 0;
}
