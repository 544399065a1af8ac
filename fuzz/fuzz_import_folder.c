/* `cannprof import RUN_FOLDER`: the files a torch_npu run folder holds
 * beside its timeline (import/ascend_extras.c, import.c, csv_ascend.c).
 * The first byte picks which file the rest becomes, in a folder that also
 * holds a small valid trace_view.json: communication.json,
 * memory_record.csv, kernel_details.csv (joined onto the timeline), the
 * profiler_info of a rank of a two-rank cluster, the run's
 * profiler_metadata.json, the summary tables (op_statistic,
 * api_statistic, operator_details, operator_memory),
 * communication_matrix.json or the device's info.json. fuzz_import.c's checks
 * then hold: a refusal leaves no run, an import reads back and exports. */
#include "harness.h"
#include "import_check.h"

#include "import/import.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char TIMELINE[] =
    "[{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":2,\"tid\":0,\"args\":{\"name\":\"Ascend "
    "Hardware\"}},\n"
    "{\"ph\":\"X\",\"name\":\"ProfilerStep#50\",\"pid\":1,\"tid\":1,\"ts\":\"100.5\",\"dur\":50,"
    "\"cat\":\"cpu_op\"},\n"
    "{\"ph\":\"X\",\"name\":\"trans_TransData_0\",\"pid\":2,\"tid\":2,\"ts\":\"110\",\"dur\":5,"
    "\"args\":{\"Task Type\":\"AI_VECTOR_CORE\"}}]\n";

/* tmp/<rel>/ASCEND_PROFILER_OUTPUT with the timeline in it. */
static bool rank_folder(const char *rel, char *out, size_t n)
{
    char base[1024], name[1100];
    snprintf(name, sizeof name, "%s/ASCEND_PROFILER_OUTPUT/trace_view.json", rel);
    if (!fuzz_tmp_path(rel, base, sizeof base))
        return false;
    snprintf(out, n, "%s/ASCEND_PROFILER_OUTPUT", base);
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_mkdir_p(out, 0755, &d) != CP_OK)
        return false;
    char path[1200];
    return fuzz_tmp_write(name, (const uint8_t *)TIMELINE, sizeof TIMELINE - 1, path, sizeof path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    static const char *const files[] = {"communication.json",
                                        "memory_record.csv",
                                        "kernel_details.csv",
                                        "profiler_info_1.json",
                                        "profiler_metadata.json",
                                        "op_statistic.csv",
                                        "api_statistic.csv",
                                        "operator_details.csv",
                                        "operator_memory.csv",
                                        "communication_matrix.json",
                                        "info.json.0"};
    enum { N_FILES = sizeof files / sizeof *files };
    const char *file = files[data[0] % N_FILES];
    bool cluster = data[0] % N_FILES == 3, top = data[0] % N_FILES == 4,
         info = data[0] % N_FILES == 10;
    char root[1024], dir[1200], db[1024], where[1200], tmp[1300];
    if (!fuzz_tmp_path("run", root, sizeof root) || !fuzz_tmp_path("import.db", db, sizeof db))
        return 0;
    fuzz_tmp_remove(root);
    fuzz_tmp_remove_db(db);
    if (cluster) {
        if (!rank_folder("run/node0_ascend_pt", dir, sizeof dir) ||
            !rank_folder("run/node1_ascend_pt", dir, sizeof dir))
            return 0;
        snprintf(where, sizeof where, "run/node1_ascend_pt/%s", file);
    } else {
        if (!rank_folder("run", dir, sizeof dir))
            return 0;
        snprintf(where, sizeof where,
                 top    ? "run/%s"
                 : info ? "run/PROF_1/device_0/%s"
                        : "run/ASCEND_PROFILER_OUTPUT/%s",
                 file);
    }
    char devdir[1024];
    if (info) {
        struct cp_diag md;
        cp_diag_init(&md);
        if (!fuzz_tmp_path("run/PROF_1/device_0", devdir, sizeof devdir) ||
            cp_mkdir_p(devdir, 0755, &md) != CP_OK)
            return 0;
    }
    if (!fuzz_tmp_write(where, data + 1, size - 1, tmp, sizeof tmp))
        return 0;
    struct cp_import_opts o = {.path = root, .trace_path = db, .format = CP_IMPORT_AUTO};
    struct cp_import_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_import(&o, &r, &d);
    fuzz_import_check(db, st, &d);
    fuzz_tmp_remove(root);
    return 0;
}
