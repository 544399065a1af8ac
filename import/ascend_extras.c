/* The other files of a torch_npu run folder, added to the run its
 * timeline or task table made (docs/import.md): communication.json (each
 * step's collective time: elapsed, transit, wait, synchronisation, idle)
 * and memory_record.csv (the framework's memory over time: its peak is the
 * run's memory). */
#include "import/import_internal.h"
#include "trace/query.h"

#include <csv.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- communication.json --------------------------------------------------------------- */

static const struct {
    const char *key, *counter;
} COMM_TIMES[] = {
    {"Elapse Time(ms)", "comm.elapse_ms"}, {"Transit Time(ms)", "comm.transit_ms"},
    {"Wait Time(ms)", "comm.wait_ms"},     {"Synchronization Time(ms)", "comm.synchronization_ms"},
    {"Idle Time(ms)", "comm.idle_ms"},
};

/* The time info of one op (or of "Total Op Info") added to the step's sums. */
static enum cp_status add_times(struct cp_imp_sink *k, int32_t it, const json_t *op,
                                struct cp_diag *d)
{
    const json_t *t = json_object_get(op, "Communication Time Info");
    enum cp_status st = CP_OK;
    for (size_t i = 0; st == CP_OK && i < sizeof COMM_TIMES / sizeof *COMM_TIMES; i++) {
        const json_t *v = json_object_get(t, COMM_TIMES[i].key);
        if (json_is_number(v) && isfinite(json_number_value(v)))
            st = cp_imp_sink_acc(k, it, COMM_TIMES[i].counter, json_number_value(v), 0, true, d);
    }
    return st;
}

/* The iteration whose step.number is N of "step<N>"; -1 when none (0 when
 * the run is one window). */
static int32_t step_iteration(const struct cp_trace_point *steps, size_t n, const char *key)
{
    if (n == 0)
        return 0;
    if (strncmp(key, "step", 4) != 0)
        return -1;
    char *end = NULL;
    double x = strtod(key + 4, &end);
    if (end == key + 4 || *end)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (steps[i].value == x && steps[i].iteration <= INT32_MAX)
            return (int32_t)steps[i].iteration;
    return -1;
}

static enum cp_status communication(struct cp_imp_sink *k, const char *path,
                                    const struct cp_trace_point *steps, size_t n_steps,
                                    struct cp_diag *d)
{
    json_error_t e;
    json_t *j = json_load_file(path, JSON_DISABLE_EOF_CHECK, &e);
    if (!j)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: line %d, column %d (byte %d): %s", path, e.line,
                           e.column, e.position, e.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return cp_diag_set(d, CP_ERR_INVALID, "%s: not an object of steps (\"step<N>\": ...)",
                           path);
    }
    enum cp_status st = CP_OK;
    const char *step_key;
    json_t *step;
    json_object_foreach(j, step_key, step)
    {
        int32_t it = step_iteration(steps, n_steps, step_key);
        static const char *const kinds[] = {"collective", "p2p"};
        for (size_t c = 0; st == CP_OK && c < 2; c++) {
            const json_t *ops = json_object_get(step, kinds[c]);
            const json_t *total = json_object_get(ops, "Total Op Info");
            if (total) { /* the file's own sum over the ops */
                st = add_times(k, it, total, d);
                continue;
            }
            const char *op_key;
            json_t *op;
            json_object_foreach((json_t *)ops, op_key, op)
            {
                if (st != CP_OK)
                    break;
                st = add_times(k, it, op, d);
            }
        }
        if (st != CP_OK)
            break;
    }
    json_decref(j);
    return st;
}

/* ---- memory_record.csv ------------------------------------------------------------------ */

struct mem {
    int col_component, col_reserved, col_allocated;
    size_t field, row;
    bool pta;
    double reserved, allocated, peak_reserved, peak_allocated;
    char cell[64];
};

static void mem_field(void *s, size_t len, void *u)
{
    struct mem *m = u;
    size_t n = len < sizeof m->cell - 1 ? len : sizeof m->cell - 1;
    memcpy(m->cell, s, n);
    m->cell[n] = '\0';
    if (m->row == 0) {
        if (strcmp(m->cell, "Component") == 0)
            m->col_component = (int)m->field;
        else if (strcmp(m->cell, "Total Reserved(MB)") == 0)
            m->col_reserved = (int)m->field;
        else if (strcmp(m->cell, "Total Allocated(MB)") == 0)
            m->col_allocated = (int)m->field;
    } else {
        struct cp_imp_val v = {m->cell, strlen(m->cell), false};
        double x;
        if ((int)m->field == m->col_component)
            /* the framework's own allocator: PTA (and PTA+GE); GE and APP rows
             * leave the allocated columns empty */
            m->pta = strncmp(m->cell, "PTA", 3) == 0;
        else if ((int)m->field == m->col_reserved && cp_imp_val_num(&v, &x))
            m->reserved = x;
        else if ((int)m->field == m->col_allocated && cp_imp_val_num(&v, &x))
            m->allocated = x;
    }
    m->field++;
}

static void mem_row(int c, void *u)
{
    (void)c;
    struct mem *m = u;
    if (m->row > 0 && m->pta) {
        m->peak_reserved = m->reserved > m->peak_reserved ? m->reserved : m->peak_reserved;
        m->peak_allocated = m->allocated > m->peak_allocated ? m->allocated : m->peak_allocated;
    }
    m->row++;
    m->field = 0;
    m->pta = false;
    m->reserved = m->allocated = 0;
}

static enum cp_status memory(struct cp_imp_sink *k, const char *path, struct cp_diag *d)
{
    uint8_t *data = NULL;
    size_t len = 0;
    enum cp_status st = cp_file_read(path, &data, &len, d);
    if (st != CP_OK)
        return st;
    struct csv_parser p;
    struct mem m = {.col_component = -1, .col_reserved = -1, .col_allocated = -1};
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) != 0) {
        free(data);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    size_t done = csv_parse(&p, data, len, mem_field, mem_row, &m);
    if (done != len || csv_fini(&p, mem_field, mem_row, &m) != 0)
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: byte %zu, row %zu: malformed CSV (%s)", path, done,
                         m.row + 1, csv_strerror(csv_error(&p)));
    csv_free(&p);
    free(data);
    if (st == CP_OK && m.col_reserved < 0)
        return CP_OK; /* another version's columns: nothing to take */
    if (st == CP_OK && m.peak_reserved > 0) {
        st = cp_imp_sink_counter(k, -1, "memory.peak_reserved_mb", m.peak_reserved, 0, d);
        if (st == CP_OK)
            st = cp_imp_sink_counter(k, -1, "memory.peak_allocated_mb", m.peak_allocated, 0, d);
        if (st == CP_OK)
            st = cp_trace_store_set_run_memory(
                k->store, k->run, 0, 0, (uint64_t)llround(m.peak_reserved * 1048576.0), 0, d);
    }
    return st;
}

/* ---- profiler_metadata.json ---------------------------------------------------------------- */

/* The environment the run had (ENV_VARIABLES), kept as meta
 * "env.<NAME>", and the settings the Ascend pack reads as counters:
 * env.launch_blocking (ASCEND_LAUNCH_BLOCKING=1 makes every launch
 * synchronous). */
static enum cp_status metadata(struct cp_imp_sink *k, const char *path, struct cp_diag *d)
{
    json_error_t e;
    json_t *j = json_load_file(path, JSON_DISABLE_EOF_CHECK, &e);
    if (!j)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: line %d, column %d (byte %d): %s", path, e.line,
                           e.column, e.position, e.text);
    const json_t *env = json_object_get(j, "ENV_VARIABLES");
    enum cp_status st = CP_OK;
    const char *key;
    json_t *v;
    bool blocking = false, seen = false;
    json_object_foreach((json_t *)env, key, v)
    {
        const char *text = json_string_value(v);
        if (!text || strlen(key) > 100)
            continue;
        char mk[128];
        snprintf(mk, sizeof mk, "env.%s", key);
        if ((st = cp_imp_sink_meta(k, mk, text, d)) != CP_OK)
            break;
        if (strcmp(key, "ASCEND_LAUNCH_BLOCKING") == 0) {
            seen = true;
            blocking = strcmp(text, "1") == 0;
        }
    }
    if (st == CP_OK && json_is_object(env))
        st = cp_imp_sink_counter(k, -1, "env.launch_blocking", blocking ? 1 : 0, 0, d);
    (void)seen;
    json_decref(j);
    return st;
}

/* ---- both ------------------------------------------------------------------------------- */

enum cp_status cp_imp_ascend_extras(const char *dir, const char *trace_path, int64_t run,
                                    struct cp_import_result *r, struct cp_diag *d)
{
    char comm[1200], mem_path[1200];
    bool has_comm =
        (size_t)snprintf(comm, sizeof comm, "%s/communication.json", dir) < sizeof comm &&
        cp_path_exists(comm);
    bool has_mem = (size_t)snprintf(mem_path, sizeof mem_path, "%s/memory_record.csv", dir) <
                       sizeof mem_path &&
                   cp_path_exists(mem_path);
    /* profiler_metadata.json sits in the run folder, above the output */
    char meta[1200];
    bool has_meta =
        (size_t)snprintf(meta, sizeof meta, "%s/../profiler_metadata.json", dir) < sizeof meta &&
        cp_path_exists(meta);
    if (!has_comm && !has_mem && !has_meta)
        return CP_OK;
    struct cp_imp_sink k;
    enum cp_status st = cp_imp_sink_attach(&k, trace_path, run, r, d);
    struct cp_trace_point *steps = NULL;
    size_t n_steps = 0;
    if (st == CP_OK)
        st = cp_trace_query_counter_series(k.store, run, "step.number", &steps, &n_steps, d);
    if (st == CP_OK && has_comm && (st = communication(&k, comm, steps, n_steps, d)) == CP_OK)
        st = cp_imp_sink_meta(&k, "communication", comm, d);
    if (st == CP_OK && has_mem && (st = memory(&k, mem_path, d)) == CP_OK)
        st = cp_imp_sink_meta(&k, "memory_record", mem_path, d);
    if (st == CP_OK && has_meta)
        st = metadata(&k, meta, d);
    if (st == CP_OK)
        st = cp_imp_sink_finish(&k, NULL, 0, d);
    if (st != CP_OK)
        cp_imp_sink_abort(&k);
    free(steps);
    return st;
}
