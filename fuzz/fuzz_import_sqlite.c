/* `cannprof import PROFILE.db` for SQLite profiles (torch_npu, msprof,
 * Nsight Systems; import/sqlite_profiles.c): the input is SQL, run into a
 * fresh database (statements that fail are skipped), so the fuzzer varies
 * schemas, types and values rather than SQLite's page format, which is
 * SQLite's own business. Then fuzz_import.c's checks: a refusal leaves no
 * run, an import reads back and exports. */
#include "harness.h"

#include "import/import.h"
#include "trace/trace.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void remove_file(const char *path)
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
    char src[1024], db[1024];
    if (!fuzz_tmp_path("profile.sqlite", src, sizeof src) ||
        !fuzz_tmp_path("import.db", db, sizeof db))
        return 0;
    remove_file(src);
    remove_file(db);
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
    fuzz_expect_refusal("cp_import", st, &d);
    struct cp_trace_store *t = NULL;
    cp_diag_init(&d);
    if (cp_trace_store_open_ro(db, &t, &d) == CP_OK) {
        int64_t run = -1;
        cp_diag_init(&d);
        enum cp_status rs = cp_trace_store_resolve_run(t, -1, &run, &d);
        if (st != CP_OK && rs == CP_OK)
            fuzz_fail("a refused import left run %lld behind", (long long)run);
        if (st == CP_OK) {
            struct cp_buf out;
            cp_buf_init(&out);
            cp_diag_init(&d);
            if (rs != CP_OK ||
                cp_trace_export_buf(t, run, CP_TRACE_FORMAT_CHROME, &out, &d) != CP_OK)
                fuzz_fail("an imported run does not export: %s", d.msg);
            cp_buf_release(&out);
        }
        cp_trace_store_close(t);
    } else if (st == CP_OK) {
        fuzz_fail("an import said it succeeded but its store does not open: %s", d.msg);
    }
    remove_file(db);
    remove_file(src);
    return 0;
}
