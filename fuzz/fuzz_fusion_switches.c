/* Fusion switch files (`convert --fusion_switch_file`), ATC's JSON form or
 * `PassName:off` lines. The reader takes a path, so the input is written to
 * a file in the target's temporary folder; warnings go to /dev/null at the
 * debug level, so their formatting runs too. */
#include "harness.h"

#include "atc_bridge/convert.h"

#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    if (!fuzz_tmp_write("switches.cfg", data, size, c.fusion_switch_file,
                        sizeof c.fusion_switch_file))
        return 0;
    FILE *sink = fopen("/dev/null", "w");
    if (!sink)
        fuzz_fail("cannot open /dev/null");
    struct cp_log log = {.level = CP_LOG_DEBUG, .stream = sink};
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_convert_config_load_fusion_switches(&c, &log, &d);
    fclose(sink);
    fuzz_expect_refusal("cp_convert_config_load_fusion_switches", st, &d);
    if (st == CP_OK) {
        if (strlen(c.fusion_switches) >= sizeof c.fusion_switches)
            fuzz_fail("the switch text is not terminated");
        for (size_t i = 0; i < cp_pass_count(); i++) {
            struct cp_pass_desc p;
            if (cp_pass_describe(i, &p))
                (void)cp_convert_config_pass_is_off(&c, p.name);
        }
    } else if (c.fusion_switches[0]) {
        fuzz_fail("a refused switch file left switches behind: %s", c.fusion_switches);
    }
    fuzz_tmp_remove(c.fusion_switch_file);
    return 0;
}
