/* `cannprof import PROFILE`: any bytes as a profile file (plain, or gzip:
 * zlib decompresses what starts like gzip), imported into a fresh trace
 * store. A refused input must leave no run behind; an accepted one must
 * have stored a run that reads back and exports. */
#include "harness.h"

#include "import/import.h"
#include "trace/trace.h"

#include <stdio.h>

/* The name the bytes are written under: what the import makes of them
 * (fuzz_import_csv.c includes this file with a .csv name). */
#ifndef FUZZ_IMPORT_FILE
#define FUZZ_IMPORT_FILE "profile.json"
#endif

static void remove_store(const char *path)
{
    char side[1100];
    static const char *const suffixes[] = {"-journal", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        snprintf(side, sizeof side, "%s%s", path, suffixes[i]);
        fuzz_tmp_remove(side);
    }
    fuzz_tmp_remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[1024], db[1024];
    if (!fuzz_tmp_write(FUZZ_IMPORT_FILE, data, size, in, sizeof in) ||
        !fuzz_tmp_path("import.db", db, sizeof db))
        return 0;
    remove_store(db);
    struct cp_import_opts o = {.path = in, .trace_path = db, .format = CP_IMPORT_AUTO};
    struct cp_import_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_import(&o, &r, &d);
    fuzz_expect_refusal("cp_import", st, &d);
    struct cp_trace_store *s = NULL;
    cp_diag_init(&d);
    if (cp_trace_store_open_ro(db, &s, &d) == CP_OK) {
        int64_t run = -1;
        cp_diag_init(&d);
        enum cp_status rs = cp_trace_store_resolve_run(s, -1, &run, &d);
        if (st != CP_OK && rs == CP_OK)
            fuzz_fail("a refused import left run %lld behind", (long long)run);
        if (st == CP_OK) {
            if (rs != CP_OK || run != r.run_id)
                fuzz_fail("an import said run %lld but the store has %lld (%s)",
                          (long long)r.run_id, (long long)run, d.msg);
            struct cp_buf out;
            cp_buf_init(&out);
            cp_diag_init(&d);
            if (cp_trace_export_buf(s, run, CP_TRACE_FORMAT_CHROME, &out, &d) != CP_OK)
                fuzz_fail("an imported run does not export: %s", d.msg);
            cp_buf_release(&out);
        }
        cp_trace_store_close(s);
    } else if (st == CP_OK) {
        fuzz_fail("an import said it succeeded but its store does not open: %s", d.msg);
    }
    remove_store(db);
    fuzz_tmp_remove(in);
    return 0;
}
