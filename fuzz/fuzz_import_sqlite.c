/* `cannprof import PROFILE.db` for SQLite profiles (torch_npu, msprof,
 * Nsight Systems; import/sqlite_profiles.c): the input is SQL, run into a
 * fresh database (statements that fail are skipped), so the fuzzer varies
 * schemas, types and values rather than SQLite's page format, which is
 * SQLite's own business. Then fuzz_import.c's checks: a refusal leaves no
 * run, an import reads back and exports. */
#include "harness.h"
#include "import_check.h"

#include "import/import.h"
#include "trace/trace.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char src[1024], db[1024];
    if (!fuzz_tmp_path("profile.sqlite", src, sizeof src) ||
        !fuzz_tmp_path("import.db", db, sizeof db))
        return 0;
    fuzz_tmp_remove_db(src);
    fuzz_tmp_remove_db(db);
    char *sql = fuzz_strdup(data, size);
    if (!sql)
        return 0;
    sqlite3 *s = NULL;
    if (sqlite3_open(src, &s) != SQLITE_OK) {
        sqlite3_close(s);
        free(sql);
        return 0;
    }
    /* statement by statement, so one bad statement does not stop the rest */
    const char *tail = sql;
    while (tail && *tail) {
        sqlite3_stmt *st = NULL;
        const char *next = NULL;
        if (sqlite3_prepare_v2(s, tail, -1, &st, &next) != SQLITE_OK) {
            const char *semi = strchr(tail, ';');
            next = semi ? semi + 1 : NULL;
        } else if (st) {
            while (sqlite3_step(st) == SQLITE_ROW)
                ;
        }
        sqlite3_finalize(st);
        if (next == tail)
            break;
        tail = next;
    }
    sqlite3_close(s);
    free(sql);
    struct cp_import_opts o = {.path = src, .trace_path = db, .format = CP_IMPORT_AUTO};
    struct cp_import_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_import(&o, &r, &d);
    fuzz_import_check(db, st, &d);
    fuzz_tmp_remove_db(src);
    return 0;
}
