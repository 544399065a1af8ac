/* report.json of a tuning session, read back by `tune --batch` for its
 * summary (the file is untrusted: a folder can hold anything). The reader
 * takes a path: the input goes to a file in the temporary folder. */
#include "harness.h"

#include "tuner/tuner.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024];
    if (!fuzz_tmp_write("report.json", data, size, path, sizeof path))
        return 0;
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_tune_report_row row;
    enum cp_status st = cp_tune_report_read(path, &row, &d);
    fuzz_expect_refusal("cp_tune_report_read", st, &d);
    if (st == CP_OK) {
        if (!row.model)
            fuzz_fail("a report row without a model");
        for (size_t i = 0; i < row.n_accepted; i++)
            if (!row.accepted[i])
                fuzz_fail("accepted step %zu is NULL", i);
    } else if (row.model || row.accepted) {
        fuzz_fail("a refused report left a row behind");
    }
    cp_tune_report_row_release(&row);
    fuzz_tmp_remove(path);
    return 0;
}
