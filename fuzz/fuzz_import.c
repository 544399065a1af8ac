/* `cannprof import PROFILE`: any bytes as a profile file (plain, or gzip:
 * zlib decompresses what starts like gzip), imported into a fresh trace
 * store. A refused input must leave no run behind; an accepted one must
 * have stored a run that reads back and exports. */
#include "harness.h"
#include "import_check.h"

#include "import/import.h"
#include "trace/trace.h"

#include <stdio.h>

/* The name the bytes are written under: what the import makes of them
 * (fuzz_import_csv.c includes this file with a .csv name). */
#ifndef FUZZ_IMPORT_FILE
#define FUZZ_IMPORT_FILE "profile.json"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[1024], db[1024];
    if (!fuzz_tmp_write(FUZZ_IMPORT_FILE, data, size, in, sizeof in) ||
        !fuzz_tmp_path("import.db", db, sizeof db))
        return 0;
    fuzz_tmp_remove_db(db);
    struct cp_import_opts o = {.path = in, .trace_path = db, .format = CP_IMPORT_AUTO};
    struct cp_import_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_import(&o, &r, &d);
    fuzz_import_check(db, st, &d);
    fuzz_tmp_remove(in);
    return 0;
}
