/* Features from the raw facts of a run: kernel rows, op types, scalars, and
 * the public accessors. Definitions: docs/features.md. */
#include "rules/features_internal.h"
#include "stats/stats.h"

#include <jansson.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_OF(id, name) name,
static const char *const scalar_names[] = {CP_FEATURE_SCALARS(NAME_OF)};
#undef NAME_OF
_Static_assert(sizeof scalar_names / sizeof scalar_names[0] == CP_FEAT_COUNT, "scalar names");

enum field_id {
    F_IDX,
    F_NODE,
    F_OP_TYPE,
    F_IMPL,
    F_DTYPE,
    F_ORIGINS,
    F_PATTERN,
    F_CALLS,
    F_TIME,
    F_TIME_PER_CALL,
    F_TIME_SHARE,
    F_FLOPS,
    F_BYTES,
    F_INTENSITY,
    F_ACHIEVED_FLOPS,
    F_ACHIEVED_BW,
    F_ALU_UTIL,
    F_BW_UTIL,
    F_BOUND,
    F_MEMORY_BOUND,
    F_SMALL,
    F_LAYOUT,
    F_COPY,
    F_COMPUTE,
    F_IN_LAYOUT,
    N_FIELDS
};

static const char *const field_names[N_FIELDS] = {
    [F_IDX] = "idx",
    [F_NODE] = "node",
    [F_OP_TYPE] = "op_type",
    [F_IMPL] = "impl",
    [F_DTYPE] = "dtype",
    [F_ORIGINS] = "origins",
    [F_PATTERN] = "pattern",
    [F_CALLS] = "calls",
    [F_TIME] = "time",
    [F_TIME_PER_CALL] = "time_per_call",
    [F_TIME_SHARE] = "time_share",
    [F_FLOPS] = "flops",
    [F_BYTES] = "bytes",
    [F_INTENSITY] = "intensity",
    [F_ACHIEVED_FLOPS] = "achieved_flops",
    [F_ACHIEVED_BW] = "achieved_bw",
    [F_ALU_UTIL] = "alu_util",
    [F_BW_UTIL] = "memory_bandwidth_util",
    [F_BOUND] = "bound",
    [F_MEMORY_BOUND] = "memory_bound",
    [F_SMALL] = "small",
    [F_LAYOUT] = "layout_transform",
    [F_COPY] = "copy",
    [F_COMPUTE] = "compute",
    [F_IN_LAYOUT] = "layout",
};

const char *const *cp_features_scalar_names(size_t *n)
{
    *n = CP_FEAT_COUNT;
    return scalar_names;
}

const char *const *cp_features_field_names(size_t *n)
{
    *n = N_FIELDS;
    return field_names;
}

static int scalar_index(const char *name)
{
    for (int i = 0; name && i < CP_FEAT_COUNT; i++)
        if (strcmp(scalar_names[i], name) == 0)
            return i;
    return -1;
}

bool cp_features_is_known(const char *name)
{
    return scalar_index(name) >= 0;
}

/* ---- op classes ------------------------------------------------------------------ */

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

bool cp_feat_is_layout_op(const char *op_type)
{
    static const char *const ops[] = {"TransData", "Transpose", NULL};
    return in_list(op_type, ops);
}

/* Ops that only move or reinterpret data. On the CPU target Identity,
 * Reshape, Flatten, Squeeze, Unsqueeze and Dropout are views and run no
 * kernel; when a trace has them as kernels (an import), they copied. */
bool cp_feat_is_copy_op(const char *op_type)
{
    static const char *const ops[] = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                      "Dropout",  "Concat",  "Split",   "Slice",   "Gather",
                                      "Expand",   "Pad",     "Cast",    "Tile",    NULL};
    return in_list(op_type, ops);
}

/* The ops whose arithmetic the precision modes change (as the precision
 * pass marks them). */
bool cp_feat_is_compute_op(const char *op_type)
{
    static const char *const ops[] = {"Conv",        "FusedConv", "ConvTranspose",  "MatMul",
                                      "FusedMatMul", "Gemm",      "FusedAttention", NULL};
    return in_list(op_type, ops);
}

/* ---- scalars -------------------------------------------------------------------- */

static void set(struct cp_features *f, enum cp_feat_id id, double v)
{
    struct cp_features_priv *p = f->priv;
    if (!isfinite(v)) {
        p->present[id] = false;
        return;
    }
    p->value[id] = v;
    p->present[id] = true;
    free(p->reason[id]);
    p->reason[id] = NULL;
}

/* Mark absent with a reason. A failed allocation leaves the reason NULL,
 * which reads as "" (the feature is still absent). */
static void absent(struct cp_features *f, enum cp_feat_id id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void absent(struct cp_features *f, enum cp_feat_id id, const char *fmt, ...)
{
    struct cp_features_priv *p = f->priv;
    p->present[id] = false;
    p->value[id] = NAN;
    struct cp_buf b;
    cp_buf_init(&b);
    va_list ap;
    va_start(ap, fmt);
    cp_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    free(p->reason[id]);
    p->reason[id] = cp_buf_status(&b) == CP_OK ? cp_buf_steal(&b) : NULL;
    cp_buf_release(&b);
}

static void set_or_absent(struct cp_features *f, enum cp_feat_id id, bool ok, double v,
                          const char *why)
{
    if (ok && isfinite(v))
        set(f, id, v);
    else
        absent(f, id, "%s", why);
}

static void latency_scalars(struct cp_features *f)
{
    const struct cp_fload *l = &f->priv->load;
    set(f, CP_FEAT_ITERATIONS, (double)l->n_lat);
    static const enum cp_feat_id ids[] = {
        CP_FEAT_LATENCY_MEAN, CP_FEAT_LATENCY_MEDIAN, CP_FEAT_LATENCY_P90,
        CP_FEAT_LATENCY_P99,  CP_FEAT_LATENCY_MIN,    CP_FEAT_LATENCY_MAX,
        CP_FEAT_LATENCY_SD,   CP_FEAT_LATENCY_CV,     CP_FEAT_LATENCY_OUTLIER_SHARE,
        CP_FEAT_THROUGHPUT,
    };
    struct cp_summary sm;
    if (l->n_lat == 0 || cp_stats_summary(l->lat_ns, l->n_lat, &sm, NULL) != CP_OK) {
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
            absent(f, ids[i], "the run has no latency samples");
        return;
    }
    set(f, CP_FEAT_LATENCY_MEAN, sm.mean * 1e-9);
    set(f, CP_FEAT_LATENCY_MEDIAN, sm.median * 1e-9);
    set(f, CP_FEAT_LATENCY_P90, sm.p90 * 1e-9);
    set(f, CP_FEAT_LATENCY_P99, sm.p99 * 1e-9);
    set(f, CP_FEAT_LATENCY_MIN, sm.min * 1e-9);
    set(f, CP_FEAT_LATENCY_MAX, sm.max * 1e-9);
    set_or_absent(f, CP_FEAT_LATENCY_SD, l->n_lat >= 2, sm.sd * 1e-9,
                  "needs at least 2 latency samples");
    set_or_absent(f, CP_FEAT_LATENCY_CV, l->n_lat >= 2 && sm.mean > 0, sm.cv,
                  "needs at least 2 latency samples");
    size_t outliers = 0;
    cp_stats_outliers(l->lat_ns, l->n_lat, CP_STATS_TUKEY_K, NULL, NULL, &outliers, NULL);
    set(f, CP_FEAT_LATENCY_OUTLIER_SHARE, (double)outliers / (double)l->n_lat);
    double batch = l->batch > 0 ? l->batch : 1;
    set_or_absent(f, CP_FEAT_THROUGHPUT, sm.mean > 0, batch * 1e9 / sm.mean,
                  "the mean latency is 0");
}

static void coverage_scalars(struct cp_features *f)
{
    const struct cp_fload *l = &f->priv->load;
    const char *why = l->n_dev_iter == 0 ? "the run recorded no kernel events (bench --trace)"
                                         : "no measured iteration has both a latency sample and "
                                           "kernel events";
    bool ok = l->n_dev_iter > 0 && l->cov_iters > 0 && l->wall_ns > 0;
    set_or_absent(f, CP_FEAT_DEVICE_UTIL, ok, l->dev_ns / l->wall_ns, why);
    if (ok && !l->has_runtime)
        why = "the run recorded no runtime-layer events";
    ok = ok && l->has_runtime;
    set_or_absent(f, CP_FEAT_RUNTIME_OVERHEAD_SHARE, ok, (l->rt_ns - l->dev_ns) / l->wall_ns, why);
    set_or_absent(f, CP_FEAT_HOST_OVERHEAD_SHARE, ok, (l->wall_ns - l->rt_ns) / l->wall_ns, why);
    set_or_absent(f, CP_FEAT_IO_COPY_SHARE, ok, l->io_ns / l->wall_ns, why);
}

/* Sums over kernels for the kernel-time scalars. */
struct ksums {
    double ns, events, small_events, small_ns;
    double layout_ns, transdata_ns, transpose_ns, copy_ns;
    double compute_ns, fp32_compute_ns, bf16_compute_ns;
    double flops, bytes;    /* total work done in measured iterations */
    double flops_at_peak_s; /* sum of flops / peak: seconds at the ceiling */
    double bytes_at_bw_s;   /* sum of bytes / bandwidth */
    double mem_bound_ns, compute_bound_ns;
    bool roofline;
};

static void kernel_time_scalars(struct cp_features *f, const struct ksums *k)
{
    const struct cp_fload *l = &f->priv->load;
    set(f, CP_FEAT_N_KERNELS, (double)l->n_k);
    const char *why = "the run recorded no kernel events (bench --trace)";
    bool ok = l->n_dev_iter > 0 && k->events > 0;
    double it = (double)l->n_dev_iter;
    set_or_absent(f, CP_FEAT_KERNEL_TIME, ok, k->ns / it * 1e-9, why);
    set_or_absent(f, CP_FEAT_LAUNCHES_PER_ITERATION, ok, k->events / it, why);
    set_or_absent(f, CP_FEAT_SMALL_KERNEL_SHARE, ok, k->small_events / k->events, why);
    if (ok && !(k->ns > 0))
        why = "the kernels took no measurable time";
    ok = ok && k->ns > 0;
    set_or_absent(f, CP_FEAT_SMALL_KERNEL_TIME_SHARE, ok, k->small_ns / k->ns, why);
    set_or_absent(f, CP_FEAT_LAYOUT_TRANSFORM_SHARE, ok, k->layout_ns / k->ns, why);
    set_or_absent(f, CP_FEAT_TRANSDATA_SHARE, ok, k->transdata_ns / k->ns, why);
    set_or_absent(f, CP_FEAT_TRANSPOSE_SHARE, ok, k->transpose_ns / k->ns, why);
    set_or_absent(f, CP_FEAT_COPY_SHARE, ok, k->copy_ns / k->ns, why);
    set_or_absent(f, CP_FEAT_COMPUTE_SHARE, ok, k->compute_ns / k->ns, why);
    set_or_absent(f, CP_FEAT_FP32_COMPUTE_SHARE, ok, k->fp32_compute_ns / k->ns, why);
    set_or_absent(f, CP_FEAT_BF16_COMPUTE_SHARE, ok, k->bf16_compute_ns / k->ns, why);
    set_or_absent(f, CP_FEAT_ACHIEVED_FLOPS, ok, k->flops / (k->ns * 1e-9), why);
    set_or_absent(f, CP_FEAT_ACHIEVED_BW, ok, k->bytes / (k->ns * 1e-9), why);
    if (ok && !k->roofline)
        why = "no calibrated machine (cannprof calibrate gives the roofline)";
    ok = ok && k->roofline;
    set_or_absent(f, CP_FEAT_ALU_UTIL, ok, k->flops_at_peak_s / (k->ns * 1e-9), why);
    set_or_absent(f, CP_FEAT_MEMORY_BANDWIDTH_UTIL, ok, k->bytes_at_bw_s / (k->ns * 1e-9), why);
    set_or_absent(f, CP_FEAT_MEMORY_BOUND_SHARE, ok, k->mem_bound_ns / k->ns, why);
    set_or_absent(f, CP_FEAT_COMPUTE_BOUND_SHARE, ok, k->compute_bound_ns / k->ns, why);
}

/* Whether `flags` (space separated) contains the word `w`. */
static bool has_word(const char *flags, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = flags; p && (p = strstr(p, w)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

/* Whether a kernel ran on Ascend's units (its implementation is the task's
 * core: AI_CORE, AI_VECTOR_CORE, MIX_AIC, AI_CPU, ...). */
static bool ascend_impl(const char *impl)
{
    return impl && (strncmp(impl, "AI_", 3) == 0 || strncmp(impl, "MIX_", 4) == 0);
}

/* Collective communication: Ascend's HCCL tasks, NCCL's kernels. */
static bool communication_kernel(const struct cp_fk *k)
{
    return cp_trace_kernel_is_communication(k->op_type, k->impl, k->node);
}

/* The features of profiles other tools wrote (docs/features.md, "Imported
 * profiles"): the hardware's own counters, and shares of task kinds only
 * those profiles have. Absent on cannprof's own runs. */
static void imported_scalars(struct cp_features *f)
{
    const struct cp_fload *l = &f->priv->load;
    static const char not_import[] = "not an imported profile";
    bool import = l->kind && strcmp(l->kind, "import") == 0;
    const struct {
        int feat, imp;
        double scale;
        const char *missing;
    } hw[] = {
        {CP_FEAT_AIC_MAC_RATIO, CP_IMP_AIC_MAC, 1, "the profile has no aic_mac_ratio"},
        {CP_FEAT_AIC_MTE2_RATIO, CP_IMP_AIC_MTE2, 1, "the profile has no aic_mte2_ratio"},
        {CP_FEAT_AIV_VEC_RATIO, CP_IMP_AIV_VEC, 1, "the profile has no aiv_vec_ratio"},
        {CP_FEAT_CUBE_UTILIZATION, CP_IMP_CUBE_UTIL, 0.01, "the profile has no cube_utilization"},
        {CP_FEAT_ACHIEVED_OCCUPANCY, CP_IMP_OCCUPANCY, 0.01,
         "the profile has no achieved occupancy"},
        {CP_FEAT_BLOCKS_PER_SM, CP_IMP_BLOCKS_PER_SM, 1, "the profile has no blocks per SM"},
    };
    for (size_t i = 0; i < sizeof hw / sizeof *hw; i++)
        set_or_absent(f, hw[i].feat, import && isfinite(l->imp[hw[i].imp]),
                      l->imp[hw[i].imp] * hw[i].scale, import ? hw[i].missing : not_import);
    double total = 0, aicpu = 0, comm = 0;
    bool ascend = false;
    for (size_t i = 0; i < l->n_k; i++) {
        const struct cp_fk *k = &l->k[i];
        total += k->sum_ns;
        ascend = ascend || ascend_impl(k->impl);
        if (k->impl && strcmp(k->impl, "AI_CPU") == 0)
            aicpu += k->sum_ns;
        if (communication_kernel(k))
            comm += k->sum_ns;
    }
    set_or_absent(f, CP_FEAT_AI_CPU_SHARE, import && ascend && total > 0, aicpu / total,
                  import ? "not an Ascend profile (no AI_CORE / AI_CPU tasks)" : not_import);
    set_or_absent(f, CP_FEAT_COMMUNICATION_SHARE, import && total > 0, comm / total,
                  import ? "the profile has no device time" : not_import);
    static const char no_cluster[] = "not a cluster (import a folder of rank folders)";
    set_or_absent(f, CP_FEAT_RANK_COUNT, import && l->rank_count > 0, (double)l->rank_count,
                  import ? no_cluster : not_import);
    set_or_absent(f, CP_FEAT_RANK_STEP_SPREAD, import && l->rank_count > 0, l->rank_spread,
                  import ? no_cluster : not_import);
    set_or_absent(f, CP_FEAT_SLOWEST_RANK, import && l->rank_count > 0, l->slowest_rank,
                  import ? no_cluster : not_import);
    set_or_absent(f, CP_FEAT_COMM_WAIT_RATIO, import && l->comm_elapse_ms > 0,
                  l->comm_wait_ms / l->comm_elapse_ms,
                  import ? "the profile has no communication.json" : not_import);
    set_or_absent(f, CP_FEAT_LAUNCH_BLOCKING, import && isfinite(l->launch_blocking),
                  l->launch_blocking,
                  import ? "the profile has no environment (profiler_metadata.json)" : not_import);
    double ops = l->dynamic_ops + l->static_ops;
    set_or_absent(f, CP_FEAT_DYNAMIC_OP_SHARE, import && ops > 0, l->dynamic_ops / ops,
                  import ? "the profile has no OP State column" : not_import);
    /* shares of the step: per-iteration microseconds over the mean latency */
    double lat = 0;
    for (size_t i = 0; i < l->n_lat; i++)
        lat += l->lat_ns[i];
    double step_us = l->n_lat ? lat / (double)l->n_lat / 1000.0 : NAN;
    static const char no_ops[] = "the profile has no framework events in its steps";
    const struct {
        int feat;
        double v;
        const char *missing;
    } x[] = {
        {CP_FEAT_BLOCK_DIM_MISALIGNED_SHARE, l->x[CP_X_BLOCK_DIM],
         "the profile has no Block Dim column or no info.json (core counts)"},
        {CP_FEAT_UNBOUND_TASK_SHARE, l->x[CP_X_UNBOUND],
         "the profile has no pipe ratios (aic_metrics PipeUtilization) on tasks over 20 us"},
        {CP_FEAT_AICORE_FREQ_DROP, l->x[CP_X_FREQ_DROP], "the profile has no AI Core Freq track"},
        {CP_FEAT_OP_COMPILE_CALLS, l->x[CP_X_COMPILE_CALLS],
         "the profile has no host API calls in its steps"},
        {CP_FEAT_STREAM_SYNC_CALLS, l->x[CP_X_SYNC_CALLS],
         "the profile has no host API calls in its steps"},
        {CP_FEAT_MEMORY_API_SHARE, l->x[CP_X_MEMORY_API_US] / step_us,
         "the profile has no host API calls in its steps"},
        {CP_FEAT_SYNCBN_OPS, l->x[CP_X_SYNCBN_OPS],
         "the profile has no framework ops in its steps"},
        {CP_FEAT_DATALOADER_SHARE, l->x[CP_X_DATALOADER_US] / step_us,
         "the profile has no framework ops in its steps"},
        {CP_FEAT_SMALL_PACKET_SHARE, l->x[CP_X_SMALL_PACKETS],
         "the profile has no packet sizes (communication.json)"},
        {CP_FEAT_RDMA_MAX_TRANSIT_MS, l->x[CP_X_RDMA_MAX_MS], "the profile has no RDMA transfers"},
        {CP_FEAT_LINK_BANDWIDTH_SPREAD, l->x[CP_X_LINK_SPREAD],
         "the profile has fewer than two links of one transport"},
        {CP_FEAT_ENV_LOG_LEVEL, l->x[CP_X_LOG_LEVEL],
         "the profile has no ASCEND_GLOBAL_LOG_LEVEL (profiler_metadata.json)"},
        {CP_FEAT_ALLOC_EXPANDABLE, l->x[CP_X_EXPANDABLE],
         "the profile has no environment (profiler_metadata.json)"},
        {CP_FEAT_MEMORY_RESERVED_RATIO, l->x[CP_X_RESERVED_RATIO],
         "the profile has no framework memory record (memory_record.csv)"},
        {CP_FEAT_FA_UNBOUND_SHARE, l->x[CP_X_FA_UNBOUND],
         "the profile has no flash attention tasks with pipe ratios"},
        {CP_FEAT_VECTOR_UNBOUND_SHARE, l->x[CP_X_VECTOR_UNBOUND],
         "the profile has no vector tasks with aiv_vec / aiv_mte2 / aiv_mte3 ratios"},
        {CP_FEAT_SHAPE_MISALIGNED_SHARE, l->x[CP_X_SHAPE_MISALIGNED],
         "the profile has no matmul or attention tasks with Input Shapes"},
        {CP_FEAT_MISALIGNED_TRANSFER_SHARE, l->x[CP_X_MISALIGNED_SDMA],
         "the profile has no HCCL SDMA tasks with their sizes (trace_view.json)"},
        {CP_FEAT_BANDWIDTH_CONTENTION_SHARE, l->x[CP_X_CONTENDED_SDMA],
         "the profile has no HCCL SDMA tasks with their sizes (trace_view.json)"},
        {CP_FEAT_GC_SHARE, l->x[CP_X_GC_US] / step_us,
         "the profile has no garbage collections of 1 ms or more (torch_npu's GC track)"},
        {CP_FEAT_NPU_RMS_NORM_SEQUENCES, l->x[CP_X_RMS_NORM_N], no_ops},
        {CP_FEAT_NPU_SWIGLU_SEQUENCES, l->x[CP_X_SWIGLU_N], no_ops},
        {CP_FEAT_NPU_ROTARY_MUL_SEQUENCES, l->x[CP_X_ROTARY_N], no_ops},
        {CP_FEAT_NPU_FUSION_ATTENTION_SEQUENCES, l->x[CP_X_ATTENTION_N], no_ops},
        {CP_FEAT_NPU_RMS_NORM_SEQUENCE_SHARE, l->x[CP_X_RMS_NORM_US] / step_us, no_ops},
        {CP_FEAT_NPU_SWIGLU_SEQUENCE_SHARE, l->x[CP_X_SWIGLU_US] / step_us, no_ops},
        {CP_FEAT_NPU_ROTARY_MUL_SEQUENCE_SHARE, l->x[CP_X_ROTARY_US] / step_us, no_ops},
        {CP_FEAT_NPU_FUSION_ATTENTION_SEQUENCE_SHARE, l->x[CP_X_ATTENTION_US] / step_us, no_ops},
        {CP_FEAT_FUSIBLE_SEQUENCE_SHARE, l->x[CP_X_FUSIBLE],
         "the profile has no task table (kernel_details.csv, op_summary)"},
        {CP_FEAT_STAGE_COMPUTE_SPREAD, l->x[CP_X_STAGE_SPREAD],
         "not a cluster whose ranks say their pipeline stage (profiler_metadata.json)"},
        {CP_FEAT_SLOWEST_STAGE, l->x[CP_X_SLOWEST_STAGE],
         "not a cluster whose ranks say their pipeline stage (profiler_metadata.json)"},
        {CP_FEAT_ENV_HCCL_ALGO, l->x[CP_X_HCCL_ALGO],
         "the profile's environment has no HCCL_ALGO (profiler_metadata.json)"},
        {CP_FEAT_ENV_HOST_CACHE_CAPACITY, l->x[CP_X_HOST_CACHE],
         "the profile's environment has no HOST_CACHE_CAPACITY (profiler_metadata.json)"},
        {CP_FEAT_ENV_ACLNN_CACHE_LIMIT, l->x[CP_X_ACLNN_CACHE],
         "the profile's environment has no ACLNN_CACHE_LIMIT (profiler_metadata.json)"},
        {CP_FEAT_QUIET_GAP_SHARE,
         l->cov_iters && l->has_runtime ? l->quiet_gap_ns / l->wall_ns : NAN,
         "the profile has no host runtime calls in its steps"},
    };
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        set_or_absent(f, x[i].feat, import && isfinite(x[i].v), x[i].v,
                      import ? x[i].missing : not_import);
}

static void host_scalars(struct cp_features *f, const struct cp_machine *m)
{
    const struct cp_fload *l = &f->priv->load;
    if (l->kind && strcmp(l->kind, "import") == 0) {
        /* a profile another tool wrote: its machine is not this one */
        static const char why[] = "an imported profile: the machine that ran it is not this one";
        absent(f, CP_FEAT_BF16_CAPABLE, why);
        absent(f, CP_FEAT_THREADS, why);
        absent(f, CP_FEAT_BATCH, why);
        absent(f, CP_FEAT_CORES, why);
        absent(f, CP_FEAT_THREADS_PER_CORE, why);
        return;
    }
    if (l->isa_flags && *l->isa_flags && strcmp(l->isa_flags, "unknown") != 0)
        set(f, CP_FEAT_BF16_CAPABLE,
            has_word(l->isa_flags, "avx512_bf16") || has_word(l->isa_flags, "amx_bf16"));
    else if (m)
        set(f, CP_FEAT_BF16_CAPABLE, m->has_bf16);
    else
        absent(f, CP_FEAT_BF16_CAPABLE, "the trace does not record the host's ISA flags");
    set_or_absent(f, CP_FEAT_THREADS, l->threads > 0, l->threads,
                  "the run does not record its threads");
    set_or_absent(f, CP_FEAT_BATCH, l->batch > 0, l->batch, "the run does not record its batch");
    int cores = l->host_cores > 0 ? l->host_cores : m && m->cores > 0 ? m->cores : 0;
    set_or_absent(f, CP_FEAT_CORES, cores > 0, cores, "the trace does not record the host's cores");
    set_or_absent(f, CP_FEAT_THREADS_PER_CORE, cores > 0 && l->threads > 0,
                  (double)l->threads / (cores > 0 ? cores : 1),
                  "needs the run's threads and the host's cores");
    /* Arena reuse is off only with --buffer_optimize=off_optimize. */
    json_t *cfg = l->config_json && *l->config_json ? json_loads(l->config_json, 0, NULL) : NULL;
    const char *bo = json_string_value(json_object_get(cfg, "buffer_optimize"));
    set_or_absent(f, CP_FEAT_BUFFER_REUSE, bo != NULL, bo && strcmp(bo, "off_optimize") != 0,
                  "the run does not record its conversion config");
    json_decref(cfg);
    set_or_absent(f, CP_FEAT_MEMORY_BYTES, l->memory_bytes > 0, l->memory_bytes,
                  "the run does not record its memory");
}

/* Why a perf-based feature is absent. */
static void perf_absent(struct cp_features *f, enum cp_feat_id id, enum cp_perf_counter a,
                        enum cp_perf_counter b)
{
    const struct cp_fload *l = &f->priv->load;
    if (!l->perf_recorded) {
        absent(f, id, "the run recorded no perf counters");
        return;
    }
    int err = l->perf_errno[a] ? l->perf_errno[a] : l->perf_errno[b];
    if (err) {
        char why[256];
        cp_perf_errno_reason(err, l->paranoid, why, sizeof why);
        absent(f, id, "perf counter %s unavailable: %s",
               cp_perf_counter_name(l->perf_errno[a] ? a : b), why);
        return;
    }
    absent(f, id, "perf counters %s and %s were not both read", cp_perf_counter_name(a),
           cp_perf_counter_name(b));
}

static void perf_scalars(struct cp_features *f)
{
    const struct cp_fload *l = &f->priv->load;
    if (l->perf_has[CP_PERF_CACHE_REFERENCES] && l->perf_has[CP_PERF_CACHE_MISSES] &&
        l->perf[CP_PERF_CACHE_REFERENCES] > 0)
        set(f, CP_FEAT_CACHE_MISS_RATE,
            l->perf[CP_PERF_CACHE_MISSES] / l->perf[CP_PERF_CACHE_REFERENCES]);
    else
        perf_absent(f, CP_FEAT_CACHE_MISS_RATE, CP_PERF_CACHE_REFERENCES, CP_PERF_CACHE_MISSES);
    if (l->perf_has[CP_PERF_INSTRUCTIONS] && l->perf_has[CP_PERF_CYCLES] &&
        l->perf[CP_PERF_CYCLES] > 0)
        set(f, CP_FEAT_IPC, l->perf[CP_PERF_INSTRUCTIONS] / l->perf[CP_PERF_CYCLES]);
    else
        perf_absent(f, CP_FEAT_IPC, CP_PERF_INSTRUCTIONS, CP_PERF_CYCLES);
    double wall = 0;
    for (size_t i = 0; i < l->n_lat; i++)
        wall += l->lat_ns[i];
    double cores = f->priv->present[CP_FEAT_CORES] ? f->priv->value[CP_FEAT_CORES] : 0;
    if (!l->perf_has[CP_PERF_TASK_CLOCK])
        perf_absent(f, CP_FEAT_CPU_UTIL, CP_PERF_TASK_CLOCK, CP_PERF_TASK_CLOCK);
    else
        set_or_absent(f, CP_FEAT_CPU_UTIL, wall > 0 && cores > 0,
                      l->perf[CP_PERF_TASK_CLOCK] / (wall * cores),
                      "needs latency samples and the host's cores");
}

/* ---- kernel rows ------------------------------------------------------------------ */

static void kernel_rows(struct cp_features *f, const struct cp_machine *m, struct ksums *k)
{
    const struct cp_fload *l = &f->priv->load;
    memset(k, 0, sizeof *k);
    for (size_t i = 0; i < l->n_k; i++) {
        k->ns += l->k[i].sum_ns;
        k->events += (double)l->k[i].n_events;
    }
    double it = (double)l->n_dev_iter;
    double kt = it > 0 ? k->ns / it : NAN; /* kernel time per iteration */
    double bw = m ? m->mem_bw : 0;
    k->roofline = m && bw > 0 && cp_machine_peak_flops(m, false, l->threads) > 0;
    for (size_t i = 0; i < l->n_k; i++) {
        const struct cp_fk *s = &l->k[i];
        struct cp_kernel_feat *r = &f->kernels[i];
        r->idx = (size_t)s->idx;
        r->node = s->node;
        r->op_type = s->op_type;
        r->impl = s->impl;
        r->origins = s->origins;
        r->pattern = "";
        r->dtype = s->n_out && s->out[0].compute ? s->out[0].compute
                   : s->n_in                     ? s->in[0].dtype
                                                 : "";
        r->layout = s->n_in && s->in[0].layout ? s->in[0].layout : "";
        r->flops = s->flops;
        r->bytes = s->bytes;
        r->calls = it > 0 ? (double)s->n_events / it : NAN;
        r->mean_ns = it > 0 ? s->sum_ns / it : NAN;
        r->time_share = kt > 0 ? r->mean_ns / kt : NAN;
        r->intensity = s->bytes > 0 ? s->flops / s->bytes : NAN;
        double busy_s = s->sum_ns * 1e-9;
        double work = (double)s->n_events;
        r->achieved_flops = busy_s > 0 ? s->flops * work / busy_s : NAN;
        r->achieved_bw = busy_s > 0 ? s->bytes * work / busy_s : NAN;
        r->small = s->n_events > 0 && s->sum_ns / (double)s->n_events < CP_FEATURES_SMALL_KERNEL_NS;
        r->layout_transform = cp_feat_is_layout_op(s->op_type);
        r->copy = cp_feat_is_copy_op(s->op_type);
        r->compute = cp_feat_is_compute_op(s->op_type);
        bool bf16 = strcmp(r->dtype, "bf16") == 0;
        double peak = m ? cp_machine_peak_flops(m, bf16, l->threads) : 0;
        r->alu_util = peak > 0 ? r->achieved_flops / peak : NAN;
        r->bw_util = bw > 0 ? r->achieved_bw / bw : NAN;
        r->has_bound = peak > 0 && bw > 0 && s->bytes > 0;
        r->memory_bound = r->has_bound && r->intensity < peak / bw;
        /* sums */
        k->small_events += (double)s->n_small;
        k->small_ns += s->small_ns;
        if (r->layout_transform)
            k->layout_ns += s->sum_ns;
        if (strcmp(s->op_type, "TransData") == 0)
            k->transdata_ns += s->sum_ns;
        if (strcmp(s->op_type, "Transpose") == 0)
            k->transpose_ns += s->sum_ns;
        if (r->copy)
            k->copy_ns += s->sum_ns;
        if (r->compute) {
            k->compute_ns += s->sum_ns;
            if (bf16)
                k->bf16_compute_ns += s->sum_ns;
            else if (strcmp(r->dtype, "f32") == 0)
                k->fp32_compute_ns += s->sum_ns;
        }
        k->flops += s->flops * work;
        k->bytes += s->bytes * work;
        if (k->roofline) {
            /* A kernel without its own peak (none can happen once the f32
             * one exists) would count as idle ALUs. */
            if (peak > 0)
                k->flops_at_peak_s += s->flops * work / peak;
            k->bytes_at_bw_s += s->bytes * work / bw;
            if (r->has_bound && r->memory_bound)
                k->mem_bound_ns += s->sum_ns;
            else if (r->has_bound)
                k->compute_bound_ns += s->sum_ns;
        }
    }
}

/* ---- op types ------------------------------------------------------------------- */

static int cmp_op_type(const void *a, const void *b)
{
    const struct cp_op_type_feat *x = a, *y = b;
    if (x->time_ns != y->time_ns)
        return x->time_ns > y->time_ns ? -1 : 1;
    return strcmp(x->op_type, y->op_type);
}

static enum cp_status op_types(struct cp_features *f, struct cp_diag *d)
{
    f->op_types = cp_calloc(f->n_kernels + 1, sizeof *f->op_types);
    if (!f->op_types)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory computing features");
    double total = 0;
    for (size_t i = 0; i < f->n_kernels; i++) {
        const struct cp_kernel_feat *k = &f->kernels[i];
        double t = isfinite(k->mean_ns) ? k->mean_ns : 0;
        total += t;
        size_t j = 0;
        while (j < f->n_op_types && strcmp(f->op_types[j].op_type, k->op_type) != 0)
            j++;
        if (j == f->n_op_types)
            f->op_types[f->n_op_types++].op_type = k->op_type;
        f->op_types[j].n_kernels++;
        f->op_types[j].time_ns += t;
    }
    for (size_t j = 0; j < f->n_op_types; j++)
        f->op_types[j].time_share = total > 0 ? f->op_types[j].time_ns / total : NAN;
    qsort(f->op_types, f->n_op_types, sizeof *f->op_types, cmp_op_type);
    return CP_OK;
}

/* ---- patterns ------------------------------------------------------------------- */

struct cp_kernel_feat *cp_features_row(const struct cp_features *f, size_t idx)
{
    size_t lo = 0, hi = f->n_kernels;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->kernels[mid].idx < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < f->n_kernels && f->kernels[lo].idx == idx ? &f->kernels[lo] : NULL;
}

static const struct {
    const char *kind;
    enum cp_feat_id count, share;
} pattern_ids[] = {
    {"attention", CP_FEAT_UNFUSED_ATTENTION_COUNT, CP_FEAT_UNFUSED_ATTENTION_SHARE},
    {"layernorm", CP_FEAT_UNFUSED_LAYERNORM_COUNT, CP_FEAT_UNFUSED_LAYERNORM_SHARE},
    {"groupnorm", CP_FEAT_UNFUSED_GROUPNORM_COUNT, CP_FEAT_UNFUSED_GROUPNORM_SHARE},
    {"gelu", CP_FEAT_UNFUSED_GELU_COUNT, CP_FEAT_UNFUSED_GELU_SHARE},
    {"conv_act", CP_FEAT_UNFUSED_CONV_ACT_COUNT, CP_FEAT_UNFUSED_CONV_ACT_SHARE},
    {"conv_add", CP_FEAT_UNFUSED_CONV_ADD_COUNT, CP_FEAT_UNFUSED_CONV_ADD_SHARE},
    {"conv_bn", CP_FEAT_UNFUSED_CONV_BN_COUNT, CP_FEAT_UNFUSED_CONV_BN_SHARE},
    {"matmul_act", CP_FEAT_UNFUSED_MATMUL_ACT_COUNT, CP_FEAT_UNFUSED_MATMUL_ACT_SHARE},
    {"matmul_add", CP_FEAT_UNFUSED_MATMUL_ADD_COUNT, CP_FEAT_UNFUSED_MATMUL_ADD_SHARE},
    {"layout_roundtrip", CP_FEAT_UNFUSED_LAYOUT_ROUNDTRIP_COUNT,
     CP_FEAT_UNFUSED_LAYOUT_ROUNDTRIP_SHARE},
};
#define N_PATTERN_IDS (sizeof pattern_ids / sizeof pattern_ids[0])

/* Counts, and time shares of the union of the kernels in patterns (per kind
 * and overall), so a kernel in two patterns is counted once. */
static enum cp_status pattern_scalars(struct cp_features *f, struct cp_diag *d)
{
    bool *any = cp_calloc(f->n_kernels + 1, sizeof *any);
    bool *kind = cp_calloc(f->n_kernels + 1, sizeof *kind);
    if (!any || !kind) {
        free(any);
        free(kind);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory computing features");
    }
    bool timed = f->priv->load.n_dev_iter > 0;
    double all_share = 0;
    for (size_t q = 0; q < N_PATTERN_IDS; q++) {
        memset(kind, 0, f->n_kernels * sizeof *kind);
        double count = 0, share = 0;
        for (size_t i = 0; i < f->n_patterns; i++) {
            const struct cp_pattern *p = &f->patterns[i];
            if (strcmp(p->kind, pattern_ids[q].kind) != 0)
                continue;
            count++;
            for (size_t j = 0; j < p->n; j++) {
                const struct cp_kernel_feat *k = cp_features_row(f, p->kernels[j]);
                if (!k)
                    continue;
                size_t r = (size_t)(k - f->kernels);
                double t = isfinite(k->time_share) ? k->time_share : 0;
                if (!kind[r])
                    share += t;
                if (!any[r])
                    all_share += t;
                kind[r] = any[r] = true;
            }
        }
        set(f, pattern_ids[q].count, count);
        set_or_absent(f, pattern_ids[q].share, timed, share,
                      "the run recorded no kernel events (bench --trace)");
    }
    set(f, CP_FEAT_UNFUSED_COUNT, (double)f->n_patterns);
    set_or_absent(f, CP_FEAT_UNFUSED_SHARE, timed, all_share,
                  "the run recorded no kernel events (bench --trace)");
    free(any);
    free(kind);
    return CP_OK;
}

/* ---- entry points ----------------------------------------------------------------- */

enum cp_status cp_features_compute(struct cp_trace_store *s, int64_t run_id,
                                   const struct cp_machine *m, struct cp_features **out,
                                   struct cp_diag *d)
{
    *out = NULL;
    struct cp_features *f = cp_calloc(1, sizeof *f);
    if (f)
        f->priv = cp_calloc(1, sizeof *f->priv);
    if (!f || !f->priv) {
        free(f);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory computing features");
    }
    for (int i = 0; i < CP_FEAT_COUNT; i++)
        f->priv->value[i] = NAN;
    enum cp_status rc = cp_fload_read(s, run_id, &f->priv->load, d);
    if (rc != CP_OK)
        goto fail;
    const struct cp_fload *l = &f->priv->load;
    f->run_id = l->run_id;
    f->kernels = cp_calloc(l->n_k + 1, sizeof *f->kernels);
    if (!f->kernels) {
        rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory computing features");
        goto fail;
    }
    f->n_kernels = l->n_k;
    struct ksums ks;
    kernel_rows(f, m, &ks);
    latency_scalars(f);
    coverage_scalars(f);
    kernel_time_scalars(f, &ks);
    host_scalars(f, m);
    perf_scalars(f);
    imported_scalars(f);
    if ((rc = op_types(f, d)) != CP_OK || (rc = cp_patterns_find(f, d)) != CP_OK ||
        (rc = pattern_scalars(f, d)) != CP_OK)
        goto fail;
    *out = f;
    return CP_OK;
fail:
    cp_features_free(f);
    return rc;
}

void cp_features_free(struct cp_features *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_patterns; i++) {
        free(f->patterns[i].kernels);
        free(f->patterns[i].origins_json);
        free(f->patterns[i].nodes_json);
    }
    free(f->patterns);
    free(f->op_types);
    free(f->kernels);
    if (f->priv) {
        cp_fload_release(&f->priv->load);
        for (int i = 0; i < CP_FEAT_COUNT; i++)
            free(f->priv->reason[i]);
        free(f->priv);
    }
    free(f);
}

static const char *const PROFILE_NAMES[CP_PROFILE_N] = {"cannprof", "ascend", "gpu", "onnxruntime",
                                                        "chrome"};

const char *cp_profile_kind_name(enum cp_profile_kind k)
{
    return (unsigned)k < CP_PROFILE_N ? PROFILE_NAMES[k] : "?";
}

bool cp_profile_kind_parse(const char *name, enum cp_profile_kind *out)
{
    for (int i = 0; i < CP_PROFILE_N; i++)
        if (strcmp(name, PROFILE_NAMES[i]) == 0) {
            *out = (enum cp_profile_kind)i;
            return true;
        }
    return false;
}

enum cp_profile_kind cp_features_profile(const struct cp_features *f)
{
    const struct cp_fload *l = &f->priv->load;
    if (!l->kind || strcmp(l->kind, "import") != 0)
        return CP_PROFILE_CANNPROF;
    const char *t = l->target ? l->target : "";
    /* import/'s format names (cp_import_format_name) */
    if (strncmp(t, "ascend", 6) == 0)
        return CP_PROFILE_ASCEND;
    if (strcmp(t, "kineto") == 0 || strcmp(t, "nsys") == 0 || strcmp(t, "trt") == 0)
        return CP_PROFILE_GPU;
    if (strcmp(t, "ort") == 0)
        return CP_PROFILE_ONNXRUNTIME;
    return CP_PROFILE_CHROME;
}

bool cp_features_get(const struct cp_features *f, const char *name, double *value)
{
    int i = scalar_index(name);
    bool ok = f && i >= 0 && f->priv->present[i];
    *value = ok ? f->priv->value[i] : NAN;
    return ok;
}

const char *cp_features_absent_reason(const struct cp_features *f, const char *name)
{
    int i = scalar_index(name);
    if (!f || i < 0 || f->priv->present[i])
        return "";
    return f->priv->reason[i] ? f->priv->reason[i] : "";
}

/* ---- the rule-language environment -------------------------------------------------- */

static bool env_scalar(void *ctx, const char *name, struct cp_expr_value *out)
{
    const struct cp_features *f = ctx;
    int i = scalar_index(name);
    if (i < 0)
        return false;
    memset(out, 0, sizeof *out);
    if (f->priv->present[i]) {
        out->type = CP_EXPR_NUM;
        out->num = f->priv->value[i];
    }
    return true;
}

static size_t env_n_rows(void *ctx)
{
    return ((const struct cp_features *)ctx)->n_kernels;
}

static void num(struct cp_expr_value *out, double v)
{
    out->type = isfinite(v) ? CP_EXPR_NUM : CP_EXPR_ABSENT;
    out->num = v;
}

static void str(struct cp_expr_value *out, const char *s)
{
    out->type = CP_EXPR_STR;
    out->str = s ? s : "";
}

static void boolean(struct cp_expr_value *out, bool b)
{
    out->type = CP_EXPR_BOOL;
    out->boolean = b;
}

static bool env_field(void *ctx, size_t row, const char *name, struct cp_expr_value *out)
{
    const struct cp_features *f = ctx;
    memset(out, 0, sizeof *out);
    if (row >= f->n_kernels)
        return false;
    const struct cp_kernel_feat *k = &f->kernels[row];
    size_t i = 0;
    while (i < N_FIELDS && strcmp(field_names[i], name) != 0)
        i++;
    double per_call = k->calls > 0 ? k->mean_ns / k->calls : NAN;
    switch ((enum field_id)i) {
    case F_IDX:
        num(out, (double)k->idx);
        break;
    case F_NODE:
        str(out, k->node);
        break;
    case F_OP_TYPE:
        str(out, k->op_type);
        break;
    case F_IMPL:
        str(out, k->impl);
        break;
    case F_DTYPE:
        str(out, k->dtype);
        break;
    case F_ORIGINS:
        str(out, k->origins);
        break;
    case F_PATTERN:
        str(out, k->pattern);
        break;
    case F_CALLS:
        num(out, k->calls);
        break;
    case F_TIME:
        num(out, k->mean_ns * 1e-9);
        break;
    case F_TIME_PER_CALL:
        num(out, per_call * 1e-9);
        break;
    case F_TIME_SHARE:
        num(out, k->time_share);
        break;
    case F_FLOPS:
        num(out, k->flops);
        break;
    case F_BYTES:
        num(out, k->bytes);
        break;
    case F_INTENSITY:
        num(out, k->intensity);
        break;
    case F_ACHIEVED_FLOPS:
        num(out, k->achieved_flops);
        break;
    case F_ACHIEVED_BW:
        num(out, k->achieved_bw);
        break;
    case F_ALU_UTIL:
        num(out, k->alu_util);
        break;
    case F_BW_UTIL:
        num(out, k->bw_util);
        break;
    case F_BOUND:
        if (k->has_bound)
            str(out, k->memory_bound ? "memory" : "compute");
        break;
    case F_MEMORY_BOUND:
        if (k->has_bound)
            boolean(out, k->memory_bound);
        break;
    case F_SMALL:
        boolean(out, k->small);
        break;
    case F_LAYOUT:
        boolean(out, k->layout_transform);
        break;
    case F_COPY:
        boolean(out, k->copy);
        break;
    case F_IN_LAYOUT:
        str(out, k->layout ? k->layout : "");
        break;
    case F_COMPUTE:
        boolean(out, k->compute);
        break;
    case N_FIELDS:
        return false;
    }
    return true;
}

static double env_row_weight(void *ctx, size_t row)
{
    const struct cp_features *f = ctx;
    if (row >= f->n_kernels || !isfinite(f->kernels[row].time_share))
        return 0;
    return f->kernels[row].time_share;
}

void cp_features_env(const struct cp_features *f, struct cp_expr_env *env)
{
    memset(env, 0, sizeof *env);
    env->ctx = (void *)f;
    env->scalar = env_scalar;
    env->n_rows = env_n_rows;
    env->field = env_field;
    env->row_weight = env_row_weight;
}
