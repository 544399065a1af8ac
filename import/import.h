/*
 * import: profiles other tools wrote, read into the trace store.
 *
 * `cannprof import PATH` turns a profile from real hardware into a run of a
 * trace store (trace/trace.h), with the same schema as the CPU runtime's
 * own runs, so that analyze, suggest, export, validate and baselines work
 * on it: the three layers (framework ops and annotations on the
 * application layer, runtime and driver API calls on the runtime layer,
 * device tasks and kernels on the device layer, each distinct kernel in
 * the kernel table), iterations from the profile's steps (each step a
 * latency sample, its events stamped with its iteration), and counters
 * (numeric arguments of device tasks, counter tracks).
 *
 * Formats (docs/import.md): the Chrome trace-event dialects of PyTorch's
 * Kineto (torch.profiler, `.json` and `.json.gz`), torch_npu's
 * trace_view.json and msprof's msprof_*.json, and ONNX Runtime's
 * profiling JSON. A file is read as a stream (yajl over zlib, which reads
 * plain files as they are), twice: once for the steps and the process
 * names, once to write the events, so memory stays bounded by the distinct
 * names and the steps, not by the events.
 *
 * What is not imported is counted by reason (flow arrows, instant events,
 * derived overlap tracks, ONNX Runtime's fences, events without a time)
 * and recorded with the run; a profile that fails part way leaves no run
 * behind.
 */
#ifndef CP_IMPORT_H
#define CP_IMPORT_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cp_import_format {
    CP_IMPORT_AUTO = 0,
    CP_IMPORT_KINETO,     /* torch.profiler / Kineto Chrome trace */
    CP_IMPORT_ASCEND,     /* torch_npu trace_view.json, msprof_*.json */
    CP_IMPORT_ORT,        /* ONNX Runtime enable_profiling JSON */
    CP_IMPORT_CHROME,     /* any other Chrome trace-event JSON */
    CP_IMPORT_ASCEND_CSV, /* torch_npu kernel_details.csv, msprof op_summary_*.csv */
    CP_IMPORT_ASCEND_DB,  /* torch_npu ascend_pytorch_profiler_*.db, msprof_*.db */
    CP_IMPORT_NSYS,       /* Nsight Systems `nsys export --type sqlite` */
    CP_IMPORT_TRT,        /* TensorRT trtexec --exportTimes / --exportProfile JSON */
    CP_IMPORT_N_FORMATS
};

/* "auto", "kineto", "ascend", "ort", "chrome", "ascend-csv", "ascend-db",
 * "nsys", "trt" <-> enum. parse: false for
 * an unknown name. */
const char *cp_import_format_name(enum cp_import_format f);
bool cp_import_format_parse(const char *name, enum cp_import_format *out);

struct cp_import_opts {
    const char *path;             /* the profile: a file, or a run folder holding one */
    const char *trace_path;       /* the trace store to add the run to (created if needed) */
    enum cp_import_format format; /* CP_IMPORT_AUTO: detect */
};

/* Why events were not imported. */
enum cp_import_skip {
    CP_SKIP_FLOW = 0,    /* flow arrows (ph s/t/f): links, not intervals */
    CP_SKIP_INSTANT,     /* instant events (ph i/I/R) */
    CP_SKIP_DERIVED,     /* tracks derived from others (torch_npu's Overlap Analysis) */
    CP_SKIP_FENCE,       /* ONNX Runtime's fence_before/fence_after markers */
    CP_SKIP_NO_TIME,     /* an interval without a usable ts */
    CP_SKIP_UNPAIRED,    /* a B without its E, or an E without its B */
    CP_SKIP_OTHER_PHASE, /* phases cannprof does not map (async b/e/n, objects, samples, ...) */
    CP_SKIP_DETAIL,      /* parts of an event kept (torch_npu's HCCL plane tasks of a collective) */
    CP_SKIP_N
};
const char *cp_import_skip_name(enum cp_import_skip s);

/* Ranks of a cluster folder imported at most (each a run). */
#define CP_IMPORT_MAX_RANKS 1024

struct cp_import_result {
    int64_t run_id; /* a cluster: the last rank's run */
    enum cp_import_format format;
    char source[1100]; /* the file read */
    uint64_t bytes;    /* read, decompressed */
    size_t events[3];  /* stored, per layer (application, runtime, device) */
    size_t kernels;    /* distinct device kernels */
    size_t counters;   /* counter values stored */
    size_t iterations; /* steps found; 0: the whole profile is one window */
    size_t skipped[CP_SKIP_N];
    size_t metadata;      /* metadata events read (process and thread names) */
    char step_source[64]; /* "ProfilerStep", "model_run", "" */
    double seconds;       /* the import's wall time */
    /* The run's other files read beside the one imported ("communication.json,
     * op_statistic.csv, ..."), and the tasks op_statistic.csv counts (0:
     * no such table) against which the imported device events can be
     * checked. */
    char extras[512];
    double table_tasks;
    char slowest_link[160];    /* communication_matrix.json's, "0-3.HCCS at 12 GB/s"; "" */
    char fusible[200];         /* the task chain most worth fusing, in words; "" */
    char rank_comparison[240]; /* a cluster's slowest rank against its fastest; "" */
    /* A cluster folder (one *_ascend_pt per rank): every rank a run of one
     * run group, in rank order; n_ranks 0 for a single profile. The
     * counts above are summed over the ranks. */
    size_t n_ranks;
    int64_t rank_run[CP_IMPORT_MAX_RANKS];
    int rank[CP_IMPORT_MAX_RANKS];
};

/* Import o->path into o->trace_path as a new run of kind "import"; a
 * cluster folder (several torch_npu rank folders) as one run per rank, tied
 * by the run-group counters (trace/trace.h) with a counter "rank" each, all
 * or none: a rank that fails removes the ranks imported before it.
 * Errors (nothing is left in the store): a path that does not exist or
 * cannot be read (CP_ERR_IO); a file that is not a profile of a known
 * format, a truncated or corrupt one (CP_ERR_INVALID, naming the file and
 * the byte offset); a store that cannot be written (CP_ERR_WRITE). */
enum cp_status cp_import(const struct cp_import_opts *o, struct cp_import_result *r,
                         struct cp_diag *d);

/* The same on a profile already in memory (the fuzz targets): `name`
 * stands for the file in messages. */
enum cp_status cp_import_buffer(const char *name, const void *data, size_t size,
                                enum cp_import_format format, const char *trace_path,
                                struct cp_import_result *r, struct cp_diag *d);

#endif
