/*
 * Private to rules/features*.c and rules/patterns*.c.
 *
 * features_load.c reads a run from the trace store, through trace/query.h,
 * into a `struct cp_fload` (raw facts: samples, kernels with their parsed
 * tensors, event sums, per-iteration coverage, counters, host meta); features.c turns them into
 * scalars and rows; patterns.c finds unfused patterns on the kernels'
 * tensor links; features_json.c prints the result.
 */
#ifndef CP_RULES_FEATURES_INTERNAL_H
#define CP_RULES_FEATURES_INTERNAL_H

#include "rules/features.h"
#include "trace/perf.h"
#include "trace/query.h"

/* Every scalar feature: X(ID, "name"). The order is docs/features.md's. */
#define CP_FEATURE_SCALARS(X)                                                                      \
    X(ITERATIONS, "iterations")                                                                    \
    X(LATENCY_MEAN, "latency_mean")                                                                \
    X(LATENCY_MEDIAN, "latency_median")                                                            \
    X(LATENCY_P90, "latency_p90")                                                                  \
    X(LATENCY_P99, "latency_p99")                                                                  \
    X(LATENCY_MIN, "latency_min")                                                                  \
    X(LATENCY_MAX, "latency_max")                                                                  \
    X(LATENCY_SD, "latency_sd")                                                                    \
    X(LATENCY_CV, "latency_cv")                                                                    \
    X(LATENCY_OUTLIER_SHARE, "latency_outlier_share")                                              \
    X(THROUGHPUT, "throughput")                                                                    \
    X(KERNEL_TIME, "kernel_time")                                                                  \
    X(DEVICE_UTIL, "device_util")                                                                  \
    X(RUNTIME_OVERHEAD_SHARE, "runtime_overhead_share")                                            \
    X(HOST_OVERHEAD_SHARE, "host_overhead_share")                                                  \
    X(IO_COPY_SHARE, "io_copy_share")                                                              \
    X(N_KERNELS, "n_kernels")                                                                      \
    X(LAUNCHES_PER_ITERATION, "launches_per_iteration")                                            \
    X(SMALL_KERNEL_SHARE, "small_kernel_share")                                                    \
    X(SMALL_KERNEL_TIME_SHARE, "small_kernel_time_share")                                          \
    X(ALU_UTIL, "alu_util")                                                                        \
    X(MEMORY_BANDWIDTH_UTIL, "memory_bandwidth_util")                                              \
    X(ACHIEVED_FLOPS, "achieved_flops")                                                            \
    X(ACHIEVED_BW, "achieved_bw")                                                                  \
    X(MEMORY_BOUND_SHARE, "memory_bound_share")                                                    \
    X(COMPUTE_BOUND_SHARE, "compute_bound_share")                                                  \
    X(LAYOUT_TRANSFORM_SHARE, "layout_transform_share")                                            \
    X(TRANSDATA_SHARE, "transdata_share")                                                          \
    X(TRANSPOSE_SHARE, "transpose_share")                                                          \
    X(COPY_SHARE, "copy_share")                                                                    \
    X(UNFUSED_COUNT, "unfused_count")                                                              \
    X(UNFUSED_SHARE, "unfused_share")                                                              \
    X(UNFUSED_ATTENTION_COUNT, "unfused_attention_count")                                          \
    X(UNFUSED_ATTENTION_SHARE, "unfused_attention_share")                                          \
    X(UNFUSED_LAYERNORM_COUNT, "unfused_layernorm_count")                                          \
    X(UNFUSED_LAYERNORM_SHARE, "unfused_layernorm_share")                                          \
    X(UNFUSED_GROUPNORM_COUNT, "unfused_groupnorm_count")                                          \
    X(UNFUSED_GROUPNORM_SHARE, "unfused_groupnorm_share")                                          \
    X(UNFUSED_GELU_COUNT, "unfused_gelu_count")                                                    \
    X(UNFUSED_GELU_SHARE, "unfused_gelu_share")                                                    \
    X(UNFUSED_CONV_ACT_COUNT, "unfused_conv_act_count")                                            \
    X(UNFUSED_CONV_ACT_SHARE, "unfused_conv_act_share")                                            \
    X(UNFUSED_CONV_ADD_COUNT, "unfused_conv_add_count")                                            \
    X(UNFUSED_CONV_ADD_SHARE, "unfused_conv_add_share")                                            \
    X(UNFUSED_CONV_BN_COUNT, "unfused_conv_bn_count")                                              \
    X(UNFUSED_CONV_BN_SHARE, "unfused_conv_bn_share")                                              \
    X(UNFUSED_MATMUL_ACT_COUNT, "unfused_matmul_act_count")                                        \
    X(UNFUSED_MATMUL_ACT_SHARE, "unfused_matmul_act_share")                                        \
    X(UNFUSED_MATMUL_ADD_COUNT, "unfused_matmul_add_count")                                        \
    X(UNFUSED_MATMUL_ADD_SHARE, "unfused_matmul_add_share")                                        \
    X(UNFUSED_LAYOUT_ROUNDTRIP_COUNT, "unfused_layout_roundtrip_count")                            \
    X(UNFUSED_LAYOUT_ROUNDTRIP_SHARE, "unfused_layout_roundtrip_share")                            \
    X(BF16_CAPABLE, "bf16_capable")                                                                \
    X(COMPUTE_SHARE, "compute_share")                                                              \
    X(FP32_COMPUTE_SHARE, "fp32_compute_share")                                                    \
    X(BF16_COMPUTE_SHARE, "bf16_compute_share")                                                    \
    X(THREADS, "threads")                                                                          \
    X(BATCH, "batch")                                                                              \
    X(CORES, "cores")                                                                              \
    X(THREADS_PER_CORE, "threads_per_core")                                                        \
    X(BUFFER_REUSE, "buffer_reuse")                                                                \
    X(MEMORY_BYTES, "memory_bytes")                                                                \
    X(CACHE_MISS_RATE, "cache_miss_rate")                                                          \
    X(IPC, "ipc")                                                                                  \
    X(CPU_UTIL, "cpu_util")                                                                        \
    X(AIC_MAC_RATIO, "aic_mac_ratio")                                                              \
    X(AIC_MTE2_RATIO, "aic_mte2_ratio")                                                            \
    X(AIV_VEC_RATIO, "aiv_vec_ratio")                                                              \
    X(CUBE_UTILIZATION, "cube_utilization")                                                        \
    X(AI_CPU_SHARE, "ai_cpu_share")                                                                \
    X(DYNAMIC_OP_SHARE, "dynamic_op_share")                                                        \
    X(COMMUNICATION_SHARE, "communication_share")                                                  \
    X(ACHIEVED_OCCUPANCY, "achieved_occupancy")                                                    \
    X(BLOCKS_PER_SM, "blocks_per_sm")                                                              \
    X(RANK_COUNT, "rank_count")                                                                    \
    X(RANK_STEP_SPREAD, "rank_step_spread")                                                        \
    X(SLOWEST_RANK, "slowest_rank")                                                                \
    X(COMM_WAIT_RATIO, "comm_wait_ratio")                                                          \
    X(LAUNCH_BLOCKING, "launch_blocking")                                                          \
    X(BLOCK_DIM_MISALIGNED_SHARE, "block_dim_misaligned_share")                                    \
    X(UNBOUND_TASK_SHARE, "unbound_task_share")                                                    \
    X(AICORE_FREQ_DROP, "aicore_freq_drop")                                                        \
    X(OP_COMPILE_CALLS, "op_compile_calls")                                                        \
    X(STREAM_SYNC_CALLS, "stream_sync_calls")                                                      \
    X(MEMORY_API_SHARE, "memory_api_share")                                                        \
    X(SYNCBN_OPS, "syncbn_ops")                                                                    \
    X(DATALOADER_SHARE, "dataloader_share")                                                        \
    X(SMALL_PACKET_SHARE, "small_packet_share")                                                    \
    X(RDMA_MAX_TRANSIT_MS, "rdma_max_transit_ms")                                                  \
    X(LINK_BANDWIDTH_SPREAD, "link_bandwidth_spread")                                              \
    X(ENV_LOG_LEVEL, "env_log_level")                                                              \
    X(ALLOC_EXPANDABLE, "alloc_expandable")                                                        \
    X(MEMORY_RESERVED_RATIO, "memory_reserved_ratio")                                              \
    X(FA_UNBOUND_SHARE, "fa_unbound_share")                                                        \
    X(VECTOR_UNBOUND_SHARE, "vector_unbound_share")                                                \
    X(SHAPE_MISALIGNED_SHARE, "shape_misaligned_share")                                            \
    X(MISALIGNED_TRANSFER_SHARE, "misaligned_transfer_share")                                      \
    X(BANDWIDTH_CONTENTION_SHARE, "bandwidth_contention_share")                                    \
    X(GC_SHARE, "gc_share")                                                                        \
    X(QUIET_GAP_SHARE, "quiet_gap_share")                                                          \
    X(NPU_RMS_NORM_SEQUENCES, "npu_rms_norm_sequences")                                            \
    X(NPU_SWIGLU_SEQUENCES, "npu_swiglu_sequences")                                                \
    X(NPU_ROTARY_MUL_SEQUENCES, "npu_rotary_mul_sequences")                                        \
    X(NPU_FUSION_ATTENTION_SEQUENCES, "npu_fusion_attention_sequences")                            \
    X(NPU_RMS_NORM_SEQUENCE_SHARE, "npu_rms_norm_sequence_share")                                  \
    X(NPU_SWIGLU_SEQUENCE_SHARE, "npu_swiglu_sequence_share")                                      \
    X(NPU_ROTARY_MUL_SEQUENCE_SHARE, "npu_rotary_mul_sequence_share")                              \
    X(NPU_FUSION_ATTENTION_SEQUENCE_SHARE, "npu_fusion_attention_sequence_share")                  \
    X(FUSIBLE_SEQUENCE_SHARE, "fusible_sequence_share")                                            \
    X(STAGE_COMPUTE_SPREAD, "stage_compute_spread")                                                \
    X(SLOWEST_STAGE, "slowest_stage")                                                              \
    X(ENV_HCCL_ALGO, "env_hccl_algo")                                                              \
    X(ENV_HOST_CACHE_CAPACITY, "env_host_cache_capacity")                                          \
    X(ENV_ACLNN_CACHE_LIMIT, "env_aclnn_cache_limit")

#define CP_FEAT_ENUM(id, name) CP_FEAT_##id,
enum cp_feat_id { CP_FEATURE_SCALARS(CP_FEAT_ENUM) CP_FEAT_COUNT };
#undef CP_FEAT_ENUM

/* One tensor of a kernel's inputs or outputs, as the features and patterns
 * see it. Strings are borrowed from the load's kernel table (ktab). */
struct cp_ftensor {
    const char *name;
    const char *src;     /* view_of when present, else name: what the data really is */
    const char *dtype;   /* "f32", ... ("" when missing) */
    const char *layout;  /* "NCHW", "nChw16c", ... ("" when missing) */
    const char *compute; /* outputs: "bf16" when computed in bf16, else NULL */
    int rank;            /* -1 when the shape is missing */
    int64_t dims[CP_TRACE_MAX_RANK];
    double numel; /* product of dims; NaN when unknown */
};

/* One kernels row with its event sums over measured iterations. Strings
 * are borrowed from the load's kernel table (ktab). */
struct cp_fk {
    int64_t idx;
    const char *node, *op_type, *impl, *origins;
    double flops, bytes;
    struct cp_ftensor *in, *out; /* owned by the load */
    size_t n_in, n_out;
    int64_t n_events; /* device events in measured iterations */
    double sum_ns;    /* their total duration */
    int64_t n_small;  /* of which shorter than CP_FEATURES_SMALL_KERNEL_NS */
    double small_ns;  /* their total duration */
};

/* The imported counters features read (features_load.c, IMPORTED). */
enum {
    CP_IMP_AIC_MAC,
    CP_IMP_AIC_MTE2,
    CP_IMP_AIV_VEC,
    CP_IMP_CUBE_UTIL,
    CP_IMP_OCCUPANCY,
    CP_IMP_BLOCKS_PER_SM,
    CP_FLOAD_N_IMPORTED
};

/* The rest of an imported profile's facts (features_load.c,
 * read_analyses): NaN when the profile does not have them. */
enum {
    CP_X_BLOCK_DIM,        /* misaligned block dims: share of the checked task time */
    CP_X_UNBOUND,          /* tasks > 20 us bound by no pipe: share of the checked time */
    CP_X_FREQ_DROP,        /* (nominal - mean AI Core clock) / nominal */
    CP_X_COMPILE_CALLS,    /* per iteration */
    CP_X_SYNC_CALLS,       /* per iteration */
    CP_X_MEMORY_API_US,    /* per iteration */
    CP_X_SYNCBN_OPS,       /* per iteration */
    CP_X_DATALOADER_US,    /* per iteration */
    CP_X_SMALL_PACKETS,    /* small packets / packets */
    CP_X_RDMA_MAX_MS,      /* the longest RDMA transit */
    CP_X_LINK_SPREAD,      /* (max - min) / mean bandwidth of links of one transport */
    CP_X_LOG_LEVEL,        /* ASCEND_GLOBAL_LOG_LEVEL */
    CP_X_EXPANDABLE,       /* PYTORCH_NPU_ALLOC_CONF has expandable_segments:True */
    CP_X_RESERVED_RATIO,   /* peak reserved / peak allocated memory */
    CP_X_FA_UNBOUND,       /* flash attention tasks bound by no pipe: share of the task time */
    CP_X_VECTOR_UNBOUND,   /* vector tasks bound by no pipe: share of the task time */
    CP_X_SHAPE_MISALIGNED, /* matmul / attention tasks of shapes the cube dislikes: share */
    CP_X_MISALIGNED_SDMA,  /* SDMA transfers not a multiple of 512 B: share of SDMA time */
    CP_X_CONTENDED_SDMA,   /* slow SDMA transfers overlapping a matmul: share of SDMA time */
    CP_X_GC_US,            /* garbage collections of 1 ms or more, per iteration */
    /* framework op sequences torch_npu has a fused API for, per iteration:
     * how many, and their host time in us (import/sequences.c) */
    CP_X_RMS_NORM_N,
    CP_X_SWIGLU_N,
    CP_X_ROTARY_N,
    CP_X_ATTENTION_N,
    CP_X_RMS_NORM_US,
    CP_X_SWIGLU_US,
    CP_X_ROTARY_US,
    CP_X_ATTENTION_US,
    CP_X_FUSIBLE,      /* the best repeated light task chain: share of the task time */
    CP_X_STAGE_SPREAD, /* (max - min) / mean computing time of a cluster's pipeline stages */
    CP_X_SLOWEST_STAGE,
    CP_X_HCCL_ALGO,   /* HCCL_ALGO was set */
    CP_X_HOST_CACHE,  /* HOST_CACHE_CAPACITY (0: off) */
    CP_X_ACLNN_CACHE, /* ACLNN_CACHE_LIMIT */
    CP_FLOAD_N_X
};

struct cp_fload {
    int64_t run_id;
    char *kind, *config_json;
    char *target;        /* the run's target; an import's: its format (import/) */
    double memory_bytes; /* weights + activation arena of the run; 0 when unrecorded */
    int threads, batch;
    double *lat_ns; /* samples, in iteration order (the undisturbed ones when filtered) */
    size_t n_lat;
    /* When the run recorded the interference probe (runner/probe.h) and at
     * least CP_FEATURES_MIN_UNDISTURBED iterations ran undisturbed, every
     * timing fact is read from those only: keep_it lists their iteration
     * numbers, ascending. n_measured: iterations with a sample in all. */
    bool filtered;
    int64_t *keep_it;
    size_t n_keep, n_measured;
    struct cp_trace_kernel_desc *ktab; /* the kernel table as trace/query.h reads it */
    size_t n_ktab;
    struct cp_fk *k; /* in idx order, one per ktab row */
    size_t n_k;
    size_t n_dev_iter; /* measured iterations with device events */
    /* Sums over measured iterations that have both a sample and events. */
    size_t cov_iters;
    double wall_ns;      /* their latencies */
    double dev_ns;       /* time covered by device events (union of intervals) */
    double rt_ns;        /* covered by runtime or device events (union) */
    double io_ns;        /* runtime "input copy" / "output copy" events */
    double quiet_gap_ns; /* device idle over 200 ms with the host nearly silent */
    bool has_runtime;    /* any runtime event in a measured iteration */
    /* perf counters of the run (iteration -1) */
    bool perf_recorded; /* any perf.* counter */
    bool perf_has[CP_PERF_N_COUNTERS];
    double perf[CP_PERF_N_COUNTERS];
    int perf_errno[CP_PERF_N_COUNTERS]; /* 0: not recorded as failed */
    int paranoid;                       /* < -1 when unknown */
    int host_cores;                     /* 0 when unknown */
    char *isa_flags;                    /* NULL when unknown */
    /* An imported profile's hardware counters (import/): the mean over the
     * measured iterations of each per-iteration counter, NaN when absent. */
    double imp[CP_FLOAD_N_IMPORTED];
    double dynamic_ops, static_ops; /* OP State counts, summed */
    /* A cluster imported rank by rank (a run group with "rank" counters):
     * how many ranks, the spread of their median step times ((max - min) /
     * mean), the slowest rank; rank_count 0 otherwise. */
    double comm_wait_ms, comm_elapse_ms; /* communication.json, summed over steps */
    double launch_blocking;              /* profiler_metadata.json; NaN: not recorded */
    size_t rank_count;
    double rank_spread;
    int slowest_rank;
    double x[CP_FLOAD_N_X];
};

#define CP_FEATURES_MIN_UNDISTURBED 20

/* Read run `run_id` (< 0: the last). OUT: *l (release with
 * cp_fload_release, also after a failure). */
enum cp_status cp_fload_read(struct cp_trace_store *s, int64_t run_id, struct cp_fload *l,
                             struct cp_diag *d);
void cp_fload_release(struct cp_fload *l);

/* Owned memory and scalars behind struct cp_features. */
struct cp_features_priv {
    struct cp_fload load;
    double value[CP_FEAT_COUNT];
    bool present[CP_FEAT_COUNT];
    char *reason[CP_FEAT_COUNT]; /* why absent; NULL when present */
};

/* Find the unfused patterns among f->kernels (whose rows and times are
 * set), using the tensors in f->priv->load. Fills f->patterns,
 * f->n_patterns, and each kernel's `pattern`. CP_ERR_NOMEM only. */
enum cp_status cp_patterns_find(struct cp_features *f, struct cp_diag *d);

/* The row of kernel `idx` (rows are in idx order); NULL when none. */
struct cp_kernel_feat *cp_features_row(const struct cp_features *f, size_t idx);

/* Whether an op type is a layout transform, a copy, a compute op. */
bool cp_feat_is_layout_op(const char *op_type);
bool cp_feat_is_copy_op(const char *op_type);
bool cp_feat_is_compute_op(const char *op_type);

#endif
