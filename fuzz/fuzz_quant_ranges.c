/* --quant_ranges files (`convert --quant_ranges`, and what calibration
 * writes): "TENSOR MIN MAX" lines. The input is parsed twice: as a buffer
 * (embedded NUL bytes and all), into the table's full room and into a
 * small one, and from a file in the target's temporary folder, as convert
 * reads it; the buffer and the file agree. An accepted table is canonical:
 * its text parses again to itself, its lines are sorted by tensor, each
 * tensor once, and cp_quant_ranges_find finds every line's tensor with the
 * very numbers printed on its line (finite, MIN <= MAX). */
#include "harness.h"

#include "om/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether canonical table `canon` keeps its promises; aborts when not. */
static void check_canonical(const char *canon)
{
    static char again[CP_QUANT_RANGES_MAX];
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_quant_ranges_parse("canonical", canon, strlen(canon), again, sizeof again, &d) != CP_OK)
        fuzz_fail("the canonical table does not parse: %s", d.msg);
    if (strcmp(again, canon) != 0)
        fuzz_fail("the canonical table is not canonical:\n%s\nparses to\n%s", canon, again);
    size_t lines = 0;
    char prev[1200] = "";
    for (const char *p = canon; *p; lines++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[1200];
        if (len >= sizeof line)
            fuzz_fail("a canonical line of %zu bytes", len);
        memcpy(line, p, len);
        line[len] = '\0';
        char *sp = strchr(line, ' ');
        if (!sp || sp == line)
            fuzz_fail("canonical line '%s' has no tensor name", line);
        *sp = '\0';
        char *end = NULL;
        double lo = strtod(sp + 1, &end);
        double hi = end && *end == ' ' ? strtod(end + 1, &end) : NAN;
        if (!end || *end || !isfinite(lo) || !isfinite(hi) || lo > hi)
            fuzz_fail("canonical line of '%s' does not hold MIN <= MAX, finite", line);
        if (lines && strcmp(prev, line) >= 0)
            fuzz_fail("'%s' follows '%s': the table is not sorted, each tensor once", line, prev);
        memcpy(prev, line, strlen(line) + 1);
        double flo = NAN, fhi = NAN;
        if (!cp_quant_ranges_find(canon, line, &flo, &fhi))
            fuzz_fail("tensor '%s' is not found in its own table", line);
        if (flo != lo || fhi != hi)
            fuzz_fail("tensor '%s' is found as [%.17g, %.17g], its line says [%.17g, %.17g]", line,
                      flo, fhi, lo, hi);
        p += len + (nl ? 1 : 0);
    }
    if (cp_quant_ranges_count(canon) != lines)
        fuzz_fail("cp_quant_ranges_count says %zu, the table has %zu lines",
                  cp_quant_ranges_count(canon), lines);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char buf[CP_QUANT_RANGES_MAX];
    const char *text = size ? (const char *)data : "";
    struct cp_diag d;
    cp_diag_init(&d);
    memset(buf, 'x', sizeof buf);
    enum cp_status st = cp_quant_ranges_parse("fuzz.txt", text, size, buf, sizeof buf, &d);
    fuzz_expect_refusal("cp_quant_ranges_parse", st, &d);
    if (st == CP_OK)
        check_canonical(buf);
    else if (buf[0])
        fuzz_fail("a refused table left lines behind: %.200s", buf);

    /* a small room: a table that does not fit is refused, never cut short */
    char small[48];
    memset(small, 'x', sizeof small);
    struct cp_diag ds;
    cp_diag_init(&ds);
    enum cp_status st_small =
        cp_quant_ranges_parse("fuzz.txt", text, size, small, sizeof small, &ds);
    fuzz_expect_refusal("cp_quant_ranges_parse (small room)", st_small, &ds);
    if (st_small == CP_OK) {
        if (st != CP_OK || strcmp(small, buf) != 0)
            fuzz_fail("a table that fits the small room differs from the full parse");
    } else if (small[0]) {
        fuzz_fail("a refused table left lines behind in the small room");
    } else if (st == CP_OK && strlen(buf) < sizeof small) {
        fuzz_fail("a table of %zu bytes was refused a room of %zu: %s", strlen(buf), sizeof small,
                  ds.msg);
    }

    /* the same bytes from a file, as `convert --quant_ranges` reads them */
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    if (!fuzz_tmp_write("ranges.txt", data, size, c.quant_ranges_file, sizeof c.quant_ranges_file))
        return 0;
    struct cp_diag df;
    cp_diag_init(&df);
    enum cp_status st_file = cp_convert_config_load_quant_ranges(&c, &df);
    fuzz_expect_refusal("cp_convert_config_load_quant_ranges", st_file, &df);
    if (st_file == CP_OK) {
        if (st != CP_OK || strcmp(c.quant_ranges, buf) != 0)
            fuzz_fail("the file and the buffer give different tables");
    } else {
        if (c.quant_ranges[0])
            fuzz_fail("a refused file left lines behind: %.200s", c.quant_ranges);
        if (st == CP_OK && st_file != CP_ERR_NOMEM)
            fuzz_fail("the file is refused (%s), the same buffer accepted", df.msg);
    }
    fuzz_tmp_remove(c.quant_ranges_file);
    return 0;
}
