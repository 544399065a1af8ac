/* What every import fuzz target checks after cp_import (fuzz_import*.c):
 * the project's promise about bad input (a refusal says why, exit code 2),
 * no run left behind by a refusal, and an accepted import whose run reads
 * back and exports. Also removes the store. */
#ifndef CP_FUZZ_IMPORT_CHECK_H
#define CP_FUZZ_IMPORT_CHECK_H

#include "harness.h"

#include "import/import.h"
#include "trace/trace.h"

#include <stdio.h>

static inline void fuzz_import_check(const char *db, enum cp_status st, const struct cp_diag *d0)
{
    fuzz_expect_refusal("cp_import", st, d0);
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_trace_store_open_ro(db, &s, &d) == CP_OK) {
        int64_t run = -1;
        cp_diag_init(&d);
        enum cp_status rs = cp_trace_store_resolve_run(s, -1, &run, &d);
        if (st != CP_OK && rs == CP_OK)
            fuzz_fail("a refused import left run %lld behind", (long long)run);
        if (st == CP_OK) {
            struct cp_buf out;
            cp_buf_init(&out);
            cp_diag_init(&d);
            if (rs != CP_OK ||
                cp_trace_export_buf(s, run, CP_TRACE_FORMAT_CHROME, &out, &d) != CP_OK)
                fuzz_fail("an imported run does not export: %s", d.msg);
            cp_buf_release(&out);
        }
        cp_trace_store_close(s);
    } else if (st == CP_OK) {
        fuzz_fail("an import said it succeeded but its store does not open: %s", d.msg);
    }
    fuzz_tmp_remove_db(db);
}

#endif
