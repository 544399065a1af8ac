/* The number parsers of core that take outside text: byte counts
 * (CANNPROF_MAX_PLAN_BYTES=16G) and whole int64s (flag values). What
 * cp_parse_i64 accepts prints back to a string that parses to the same
 * value. */
#include "harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strdup(data, size);
    if (!text)
        return 0;
    uint64_t bytes;
    if (cp_parse_bytes(text, &bytes)) {
        char s[32];
        cp_format_bytes(bytes, s);
    }
    int64_t v;
    if (cp_parse_i64(text, &v)) {
        char s[32];
        snprintf(s, sizeof s, "%" PRId64, v);
        int64_t back;
        if (!cp_parse_i64(s, &back) || back != v)
            fuzz_fail("'%s' parses to %s, which does not parse back", text, s);
    }
    free(text);
    return 0;
}
