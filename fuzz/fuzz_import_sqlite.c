/* `cannprof import PROFILE.db` for SQLite profiles (torch_npu, msprof,
 * Nsight Systems; import/sqlite_profiles.c): the input is SQL, run into a
 * fresh database (statements that fail are skipped), so the fuzzer varies
 * schemas, types and values rather than SQLite's page format, which is
 * SQLite's own business. An input that names a CommAnalyzer table becomes
 * analysis.db beside a small fixed DB export, and the run folder is
 * imported (the communication analyses of import/sqlite_profiles.c). Then
 * fuzz_import.c's checks: a refusal leaves no run, an import reads back
 * and exports. */
#include "harness.h"
#include "import_check.h"

#include "import/import.h"
#include "trace/trace.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A DB export of two steps and one task, for analysis.db to sit beside. */
static const char EXPORT[] =
    "CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);"
    "INSERT INTO STRING_IDS VALUES (1, 'hcom_allReduce__586_0_1'), (2, 'HCCL');"
    "CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,"
    " globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER,"
    " streamId INTEGER, taskId INTEGER, modelId INTEGER, depth INTEGER);"
    "INSERT INTO TASK VALUES (1000000, 1500000, 0, 1, 100, 1, 2, 0, 2, 17, 0, 0);"
    "CREATE TABLE STEP_TIME (id INTEGER PRIMARY KEY, startNs INTEGER, endNs INTEGER);"
    "INSERT INTO STEP_TIME VALUES (7, 900000, 2000000), (8, 2000000, 3000000);";

/* Run sql into the database at path, statement by statement. */
static bool run_sql(const char *path, const char *sql);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char src[1024], db[1024], dir[1024];
    if (!fuzz_tmp_path("profile.sqlite", src, sizeof src) ||
        !fuzz_tmp_path("import.db", db, sizeof db) || !fuzz_tmp_path("run", dir, sizeof dir))
        return 0;
    fuzz_tmp_remove_db(src);
    fuzz_tmp_remove_db(db);
    fuzz_tmp_remove(dir);
    char *sql = fuzz_strdup(data, size);
    if (!sql)
        return 0;
    const char *profile = src;
    if (strstr(sql, "CommAnalyzer")) {
        char out[1024], export[1024];
        struct cp_diag md;
        cp_diag_init(&md);
        if (!fuzz_tmp_path("run/ASCEND_PROFILER_OUTPUT", out, sizeof out) ||
            !fuzz_tmp_path("run/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db", export,
                           sizeof export) ||
            !fuzz_tmp_path("run/ASCEND_PROFILER_OUTPUT/analysis.db", src, sizeof src) ||
            cp_mkdir_p(out, 0755, &md) != CP_OK || !run_sql(export, EXPORT)) {
            free(sql);
            return 0;
        }
        profile = dir;
    }
    bool ok = run_sql(src, sql);
    free(sql);
    if (!ok)
        return 0;
    struct cp_import_opts o = {.path = profile, .trace_path = db, .format = CP_IMPORT_AUTO};
    struct cp_import_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_import(&o, &r, &d);
    fuzz_import_check(db, st, &d);
    fuzz_tmp_remove_db(src);
    fuzz_tmp_remove(dir);
    return 0;
}

static bool run_sql(const char *path, const char *sql)
{
    sqlite3 *s = NULL;
    if (sqlite3_open(path, &s) != SQLITE_OK) {
        sqlite3_close(s);
        return false;
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
    return true;
}
