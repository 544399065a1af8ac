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

/* The packet size below which a transfer is small, per link class:
 * msprof-analyze's packet analysis (RDMA 1 MB, the on-node links 16 MB). */
double cp_imp_small_packet_mb(const char *link)
{
    return strcmp(link, "RDMA") == 0 ? 1.0 : 16.0;
}

/* The bandwidth info of one op (or of "Total Op Info"): per link type the
 * size and time sent (comm.<LINK>.size_mb, .time_ms) and the packets by
 * size (comm.<LINK>.packets, .small_packets). */
static enum cp_status add_bandwidth(struct cp_imp_sink *k, int32_t it, const json_t *op,
                                    struct cp_diag *d)
{
    const json_t *bw = json_object_get(op, "Communication Bandwidth Info");
    const char *link;
    json_t *v;
    enum cp_status st = CP_OK;
    json_object_foreach((json_t *)bw, link, v)
    {
        if (strlen(link) > 16 || strchr(link, '.'))
            continue;
        char name[64];
        const json_t *mb = json_object_get(v, "Transit Size(MB)"),
                     *ms = json_object_get(v, "Transit Time(ms)");
        if (json_is_number(mb) && json_is_number(ms) && json_number_value(mb) >= 0 &&
            json_number_value(ms) >= 0 && isfinite(json_number_value(mb)) &&
            isfinite(json_number_value(ms))) {
            snprintf(name, sizeof name, "comm.%s.size_mb", link);
            st = cp_imp_sink_acc(k, it, name, json_number_value(mb), 0, true, d);
            snprintf(name, sizeof name, "comm.%s.time_ms", link);
            if (st == CP_OK)
                st = cp_imp_sink_acc(k, it, name, json_number_value(ms), 0, true, d);
        }
        /* "Size Distribution": {"<MB>": [count, time_ms]} */
        const char *size;
        json_t *bucket;
        double packets = 0, small = 0;
        json_object_foreach(json_object_get(v, "Size Distribution"), size, bucket)
        {
            char *end = NULL;
            double x = strtod(size, &end);
            const json_t *count = json_array_get(bucket, 0);
            if (end == size || !isfinite(x) || !json_is_number(count) ||
                !(json_number_value(count) >= 0) || !isfinite(json_number_value(count)))
                continue;
            packets += json_number_value(count);
            if (x < cp_imp_small_packet_mb(link))
                small += json_number_value(count);
        }
        if (st == CP_OK && packets > 0) {
            snprintf(name, sizeof name, "comm.%s.packets", link);
            st = cp_imp_sink_acc(k, it, name, packets, 0, true, d);
            snprintf(name, sizeof name, "comm.%s.small_packets", link);
            if (st == CP_OK)
                st = cp_imp_sink_acc(k, it, name, small, 0, true, d);
        }
        if (st != CP_OK)
            break;
    }
    return st;
}

/* The longest single RDMA transit of an op (msprof-analyze's
 * retransmission check: a transit over 4 s is a retransmission). */
static void rdma_transit(const json_t *op, double *max_ms)
{
    const json_t *ms = json_object_get(
        json_object_get(json_object_get(op, "Communication Bandwidth Info"), "RDMA"),
        "Transit Time(ms)");
    if (json_is_number(ms) && isfinite(json_number_value(ms)) && json_number_value(ms) > *max_ms)
        *max_ms = json_number_value(ms);
}

/* The iteration whose step.number is N of "step<N>"; -1 when none (0 when
 * the run is one window). */
int32_t cp_imp_comm_step(const struct cp_trace_point *steps, size_t n, const char *key)
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
                                    double *rdma_max_ms, struct cp_diag *d)
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
        int32_t it = cp_imp_comm_step(steps, n_steps, step_key);
        static const char *const kinds[] = {"collective", "p2p"};
        for (size_t c = 0; st == CP_OK && c < 2; c++) {
            const json_t *ops = json_object_get(step, kinds[c]);
            const json_t *total = json_object_get(ops, "Total Op Info");
            if (total) { /* the file's own sum over the ops */
                st = add_times(k, it, total, d);
                if (st == CP_OK)
                    st = add_bandwidth(k, it, total, d);
            }
            const char *op_key;
            json_t *op;
            json_object_foreach((json_t *)ops, op_key, op)
            {
                if (st != CP_OK)
                    break;
                if (op == total)
                    continue;
                rdma_transit(op, rdma_max_ms);
                if (!total)
                    st = add_times(k, it, op, d);
                if (st == CP_OK && !total)
                    st = add_bandwidth(k, it, op, d);
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

/* The rank's pipeline stage (parallel.pp_stage, parallel.pp_size): its
 * place in its "pp" group of parallel_group_info, else from
 * distributed_args (Megatron's order, pipeline outermost: rank / (world /
 * pp)). Nothing when neither says. */
static enum cp_status parallel_stage(struct cp_imp_sink *k, const json_t *j, struct cp_diag *d)
{
    double stage = NAN, size = NAN;
    const json_t *groups = json_object_get(j, "parallel_group_info"), *g;
    const char *key;
    json_object_foreach((json_t *)groups, key, g)
    {
        const char *name = json_string_value(json_object_get(g, "group_name"));
        const json_t *ranks = json_object_get(g, "global_ranks");
        const json_t *me = json_object_get(g, "group_rank");
        if (name && strcmp(name, "pp") == 0 && json_is_array(ranks) && json_is_integer(me) &&
            json_integer_value(me) >= 0 &&
            (size_t)json_integer_value(me) < json_array_size(ranks)) {
            stage = (double)json_integer_value(me);
            size = (double)json_array_size(ranks);
        }
    }
    const json_t *args = json_object_get(j, "distributed_args");
    const json_t *pp = json_object_get(args, "pipeline_model_parallel_size"),
                 *rank = json_object_get(args, "rank"),
                 *world = json_object_get(args, "world_size");
    if (!isfinite(stage) && json_is_integer(pp) && json_is_integer(rank) &&
        json_is_integer(world) && json_integer_value(pp) > 0 && json_integer_value(world) > 0 &&
        json_integer_value(world) % json_integer_value(pp) == 0 && json_integer_value(rank) >= 0 &&
        json_integer_value(rank) < json_integer_value(world)) {
        json_int_t per = json_integer_value(world) / json_integer_value(pp);
        stage = (double)(json_integer_value(rank) / per);
        size = (double)json_integer_value(pp);
    }
    /* more stages than any pipeline has: not believed */
    if (!isfinite(stage) || !(size > 1) || size > CP_IMP_MAX_STAGES || stage >= size)
        return CP_OK;
    enum cp_status st = cp_imp_sink_counter(k, -1, "parallel.pp_stage", stage, 0, d);
    return st == CP_OK ? cp_imp_sink_counter(k, -1, "parallel.pp_size", size, 0, d) : st;
}

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
    bool blocking = false, seen = false, expandable = false;
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
        char *end = NULL;
        double level = strtod(text, &end);
        if (strcmp(key, "ASCEND_GLOBAL_LOG_LEVEL") == 0 && end != text && *end == '\0' &&
            level >= 0 && level <= 4)
            st = cp_imp_sink_counter(k, -1, "env.log_level", level, 0, d);
        if (st != CP_OK)
            break;
        if (strcmp(key, "PYTORCH_NPU_ALLOC_CONF") == 0)
            expandable = strstr(text, "expandable_segments:True") != NULL;
        /* a fixed collective algorithm, and the operator caches' sizes */
        if (strcmp(key, "HCCL_ALGO") == 0)
            st = cp_imp_sink_counter(k, -1, "env.hccl_algo_set", text[0] ? 1 : 0, 0, d);
        double x = strtod(text, &end);
        bool number = end != text && *end == '\0' && isfinite(x) && x >= 0;
        if (st == CP_OK && strcmp(key, "HOST_CACHE_CAPACITY") == 0)
            st = cp_imp_sink_counter(k, -1, "env.host_cache_capacity", number ? x : 0, 0, d);
        if (st == CP_OK && strcmp(key, "ACLNN_CACHE_LIMIT") == 0 && number)
            st = cp_imp_sink_counter(k, -1, "env.aclnn_cache_limit", x, 0, d);
        if (st != CP_OK)
            break;
    }
    if (st == CP_OK && json_is_object(env))
        st = cp_imp_sink_counter(k, -1, "env.launch_blocking", blocking ? 1 : 0, 0, d);
    if (st == CP_OK && json_is_object(env))
        st = cp_imp_sink_counter(k, -1, "env.alloc_expandable", expandable ? 1 : 0, 0, d);
    (void)seen;
    if (st == CP_OK)
        st = parallel_stage(k, j, d);
    json_decref(j);
    return st;
}

/* ---- both ------------------------------------------------------------------------------- */

enum cp_status cp_imp_ascend_extras(const char *dir, const char *trace_path, int64_t run,
                                    struct cp_import_result *r, struct cp_diag *d)
{
    char comm[1200], mem_path[1200], adb[1200];
    bool has_comm =
        (size_t)snprintf(comm, sizeof comm, "%s/communication.json", dir) < sizeof comm &&
        cp_path_exists(comm);
    bool has_mem = (size_t)snprintf(mem_path, sizeof mem_path, "%s/memory_record.csv", dir) <
                       sizeof mem_path &&
                   cp_path_exists(mem_path);
    /* the DB export's analyses, read when the text ones are not there */
    bool has_adb = !has_comm &&
                   (size_t)snprintf(adb, sizeof adb, "%s/analysis.db", dir) < sizeof adb &&
                   cp_path_exists(adb);
    /* profiler_metadata.json sits in the run folder, above the output */
    char meta[1200];
    bool has_meta =
        (size_t)snprintf(meta, sizeof meta, "%s/../profiler_metadata.json", dir) < sizeof meta &&
        cp_path_exists(meta);
    struct cp_imp_sink k;
    enum cp_status st = cp_imp_sink_attach(&k, trace_path, run, r, d);
    struct cp_trace_point *steps = NULL;
    size_t n_steps = 0;
    double rdma_max_ms = -1;
    if (st == CP_OK)
        st = cp_trace_query_counter_series(k.store, run, "step.number", &steps, &n_steps, d);
    if (st == CP_OK && has_comm &&
        (st = communication(&k, comm, steps, n_steps, &rdma_max_ms, d)) == CP_OK) {
        st = cp_imp_sink_meta(&k, "communication", comm, d);
        cp_imp_note_extra(r, comm);
    }
    if (st == CP_OK && has_adb &&
        (st = cp_imp_analysis_db(&k, adb, steps, n_steps, &rdma_max_ms, d)) == CP_OK)
        cp_imp_note_extra(r, adb);
    if (st == CP_OK && rdma_max_ms >= 0)
        st = cp_imp_sink_counter(&k, -1, "comm.RDMA.max_transit_ms", rdma_max_ms, 0, d);
    if (st == CP_OK && has_mem && (st = memory(&k, mem_path, d)) == CP_OK) {
        st = cp_imp_sink_meta(&k, "memory_record", mem_path, d);
        cp_imp_note_extra(r, mem_path);
    }
    if (st == CP_OK && has_meta && (st = metadata(&k, meta, d)) == CP_OK)
        cp_imp_note_extra(r, meta);
    if (st == CP_OK)
        st = cp_imp_ascend_tables(&k, dir, d);
    if (st == CP_OK)
        st = cp_imp_sink_finish(&k, NULL, 0, d);
    if (st != CP_OK)
        cp_imp_sink_abort(&k);
    free(steps);
    return st;
}
