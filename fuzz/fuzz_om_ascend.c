/* Ascend .om headers (`info` on an .om that ATC wrote): sniffing the kind
 * of .om, then the 256-byte header. */
#include "harness.h"

#include "om/om.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 4)
        (void)cp_om_sniff(data, size);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_ascend_om_header h;
    enum cp_status st = cp_om_read_ascend_header(data, size, &h, &d);
    fuzz_expect_refusal("cp_om_read_ascend_header", st, &d);
    if (st == CP_OK && (strlen(h.name) >= sizeof h.name ||
                        strlen(h.platform_version) >= sizeof h.platform_version))
        fuzz_fail("an Ascend header string is not terminated");
    return 0;
}
