/* Inside import/: the Chrome dialects' two passes (docs/import.md). The
 * first (chrome_scan.c) reads the file once, gathers what the writing needs
 * first and spills every event; the python stacks (chrome_stacks.c) are
 * made from what it gathered; the second (chrome_write.c) reads the spill
 * back into the run. chrome_import.c runs them. */
#ifndef CP_IMPORT_CHROME_INTERNAL_H
#define CP_IMPORT_CHROME_INTERNAL_H

#include "import/import_internal.h"

struct cp_imp_votes {
    size_t kineto, ascend, ort;
};

/* A sorted key -> value table entry. */
struct cp_imp_link {
    int64_t key, value;
};

/* Top-level facts kept (schemaVersion, distributedInfo.*, ...). */
#define CP_IMP_MAX_TOP 64

/* A python function's interval on its thread (or, for op_where, an op's
 * start: end unused), with its name and Kineto's Python id and parent id
 * (-1: none). */
struct cp_imp_pyfn {
    int32_t tid, name;
    int64_t ts, end, id, parent;
};

/* What the first pass gathers. */
struct cp_imp_scan {
    struct cp_imp_pool pool;
    struct cp_strmap pname; /* pid text -> index into pool: its process_name */
    struct cp_imp_steps steps;
    bool steps_are_model_run;
    int64_t min_ts, max_end;
    bool have_ts;
    struct cp_imp_votes v;
    bool top_object; /* traceEvents, deviceProperties, schemaVersion, ... */
    size_t metadata;
    size_t flows, instants; /* counted while read, never spilled */
    bool string_ts;
    struct cp_imp_spill *spill;
    uint8_t *kinds; /* enum key_kind by the spill's string id */
    size_t cap_kinds;
    /* the first call stack of each framework op: by the op name's spill
     * string id, the stack's (-1: none) */
    int32_t *stack_of;
    size_t cap_stack_of;
    /* Kineto's links from a kernel to the framework op that launched it:
     * launch correlation -> External id, External id -> the op's name (a
     * spill string id); sorted by key once read */
    struct cp_imp_link *links, *ops;
    size_t n_links, cap_links, n_ops, cap_ops;
    /* torch_npu's async_npu flows from a framework op to the device task it
     * launched: flow start (hashed id -> the op's ts), flow end (the
     * task's ts -> hashed id), and the ops by ts (-> name) */
    struct cp_imp_link *flow_s, *flow_f, *op_at;
    size_t n_flow_s, cap_flow_s, n_flow_f, cap_flow_f, n_op_at, cap_op_at;
    /* top-level facts, written with the run */
    char *top_key[CP_IMP_MAX_TOP], *top_val[CP_IMP_MAX_TOP];
    size_t n_top;
    /* Kineto's python_function events (with_stack in newer torch), and
     * where the first op of each name without a "Call stack" ran: its
     * stack is the python functions around it (python_stacks) */
    struct cp_imp_pyfn *pyfn;
    size_t n_pyfn, cap_pyfn;
    struct cp_imp_pyfn *op_where;
    size_t n_op_where, cap_op_where;
    uint8_t *op_seen; /* by the op name's spill string id */
    size_t cap_op_seen;
};

/* ---- the first pass (chrome_scan.c) ------------------------------------------------------ */

/* The reader's callbacks over s (its spill open). */
struct cp_imp_handler cp_imp_scan_handler(struct cp_imp_scan *s);
/* Once read: the steps and link tables sorted, the python stacks made. */
enum cp_status cp_imp_scan_finish(struct cp_imp_scan *s, struct cp_diag *d);
/* The dialect the events voted for. */
enum cp_import_format cp_imp_scan_format(const struct cp_imp_scan *s);
void cp_imp_scan_release(struct cp_imp_scan *s);
/* The value of `key` in a sorted table (the first of equals); -1 when
 * absent. */
int64_t cp_imp_link_find(const struct cp_imp_link *v, size_t n, int64_t key);
/* Keep the first call stack seen of the op named by spill string `name`.
 * false when out of memory. */
bool cp_imp_scan_note_stack(struct cp_imp_scan *s, int32_t name, const struct cp_imp_val *stack);

/* ---- python stacks (chrome_stacks.c) ------------------------------------------------------- */

enum cp_status cp_imp_python_stacks(struct cp_imp_scan *s, struct cp_diag *d);

/* ---- the second pass (chrome_write.c) ------------------------------------------------------ */

/* Read the spill back into the sink's run: each event placed on its layer,
 * stamped with its step; counts what was skipped into r. */
enum cp_status cp_imp_chrome_write(const struct cp_imp_scan *s, struct cp_imp_sink *k,
                                   struct cp_import_result *r, struct cp_diag *d);

#endif
