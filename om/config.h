/*
 * om/config: the conversion config every .om records.
 *
 * `struct cp_convert_config` holds every knob a conversion takes, with ATC's
 * flag names and allowed values. It is parsed from ATC-style flags, recorded
 * verbatim in the .om (om.h), printed back as the exact `cannprof convert`
 * command line that reproduces it, and hashed to a stable id. It lives here,
 * beside the container, because both sides of the .om read it: the
 * converter (atc_bridge/) fills it, the runtime (runner/) plans from it
 * (buffer reuse, dynamic-batch profiles) and the tuner turns its knobs.
 * Reading a fusion switch file needs the pass table, so that part is the
 * converter's (atc_bridge/convert.h).
 */
#ifndef CP_OM_CONFIG_H
#define CP_OM_CONFIG_H

#include "core/core.h"
#include "graph/graph.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CP_MAX_INPUT_SHAPES    16
#define CP_MAX_DYN_BATCH       100
#define CP_FUSION_SWITCHES_MAX 4096
#define CP_KEEP_DTYPE_MAX      8192
#define CP_LAYOUT_REGIONS_MAX  4096
#define CP_QUANT_RANGES_MAX    65536

enum cp_precision_mode {
    CP_PREC_FORCE_FP32 = 0, /* the CPU target's default */
    CP_PREC_FORCE_FP16,
    CP_PREC_CUBE_FP16IN_FP32OUT,
    CP_PREC_ALLOW_MIX_PRECISION,
    CP_PREC_ALLOW_FP32_TO_FP16,
    CP_PREC_MUST_KEEP_ORIGIN_DTYPE,
    CP_PREC_ALLOW_MIX_PRECISION_FP16,
    CP_PREC_ALLOW_MIX_PRECISION_BF16,
    CP_PREC_ALLOW_FP32_TO_BF16,
    CP_PREC_COUNT
};

enum cp_implmode {
    CP_IMPL_HIGH_PERFORMANCE = 0, /* ATC's default */
    CP_IMPL_HIGH_PRECISION,
    CP_IMPL_HIGH_PRECISION_FOR_ALL,
    CP_IMPL_HIGH_PERFORMANCE_FOR_ALL,
    CP_IMPL_COUNT
};

enum cp_buffer_opt {
    CP_BUF_L2_OPTIMIZE = 0, /* default: arena reuse */
    CP_BUF_L1_OPTIMIZE,
    CP_BUF_OFF_OPTIMIZE,
    CP_BUF_COUNT
};

enum cp_input_format {
    CP_FMT_NCHW = 0, /* ATC's default for ONNX */
    CP_FMT_NCDHW,
    CP_FMT_ND,
    CP_FMT_NHWC,
    CP_FMT_COUNT
};

/* Where conv regions keep their activations (cannprof's own knob; ATC picks
 * layouts itself, and Ascend's own choice is the blocked NC1HWC0). The
 * default, auto, picks per region what the target's kernels run fastest;
 * the others force one layout family. */
enum cp_layout_policy {
    CP_LAYOUT_POLICY_NCHW = 0, /* plain NCHW everywhere */
    CP_LAYOUT_POLICY_NHWC,     /* conv regions in NHWC */
    CP_LAYOUT_POLICY_BLOCKED,  /* conv regions in oneDNN's blocked nChw16c / nChw8c */
    CP_LAYOUT_POLICY_AUTO,     /* per region: NHWC or blocked (default; layout_transform.c) */
    CP_LAYOUT_POLICY_COUNT
};

/* How int8 activation ranges are taken from the calibration runs
 * (docs/layout-and-precision.md "int8"). */
enum cp_calib_method {
    CP_CALIB_MINMAX = 0, /* the observed minimum and maximum (default, as ONNX Runtime's) */
    CP_CALIB_PERCENTILE, /* clip both tails at --calibration_percentile */
    CP_CALIB_ENTROPY,    /* the clip that loses least information (KL divergence) */
    CP_CALIB_COUNT
};

/* One `name:d0,d1,...` entry of --input_shape; -1 marks a dynamic dimension. */
struct cp_input_shape {
    char name[128];
    int rank;
    int64_t dims[CP_MAX_RANK];
};

struct cp_convert_config {
    char model[1024];  /* --model: source path as given */
    int framework;     /* --framework: 5 (ONNX) */
    char output[1024]; /* --output: path without ".om" */
    struct cp_input_shape input_shapes[CP_MAX_INPUT_SHAPES];
    size_t n_input_shapes;
    enum cp_input_format input_format;
    enum cp_layout_policy layout_policy;
    enum cp_precision_mode precision_mode;
    char fusion_switch_file[1024]; /* "" when none */
    /* The effective switches the file gives, as canonical text: the passes
     * it turns off, sorted by name, "PassA:off;PassB:off" ("" when none).
     * Filled from the file by cp_convert_config_load_fusion_switches (and at
     * conversion time), recorded in the .om and part of the config id, so a
     * .om says what ran even if the file changes later. */
    char fusion_switches[CP_FUSION_SWITCHES_MAX];
    /* --keep_dtype (ATC's flag): a file of ONNX node names and `OpType::X`
     * lines whose nodes keep fp32 arithmetic under a bf16 precision mode. ""
     * when none. */
    char keep_dtype_file[1024];
    /* The entries the file gives, canonical: sorted, unique, one per line
     * ("OpType::Softmax\n/down/conv/Conv"; "" when none). Filled from the
     * file by cp_convert_config_load_keep_dtype (and at conversion time),
     * recorded in the .om and part of the config id, as fusion_switches. */
    char keep_dtype[CP_KEEP_DTYPE_MAX];
    /* --modify_mixlist (ATC's JSON of black/white/gray list changes) and
     * --customize_dtypes (ATC's per-node or per-op-type dtypes): "" when
     * none. Both become `precision_overrides`: canonical "ENTRY=fp32" or
     * "ENTRY=bf16" lines sorted by ENTRY (an ONNX node name or OpType::X),
     * customize_dtypes winning where both name an entry; recorded in the
     * .om and part of the id. */
    char modify_mixlist_file[1024];
    char customize_dtypes_file[1024];
    char precision_overrides[CP_KEEP_DTYPE_MAX];
    /* --layout_regions (cannprof's own knob): the layout of single conv
     * regions over --layout_policy, canonical "NODE:POLICY" lines sorted by
     * node ("" when none). NODE is an ONNX node of the region, POLICY nchw
     * (the region stays plain), nhwc or blocked. */
    char layout_regions[CP_LAYOUT_REGIONS_MAX];
    /* --op_kernels (cannprof's own knob): the runtime kernel of single
     * nodes, canonical "NODE=KERNEL" lines sorted by node ("" when none).
     * NODE is an ONNX node (by origin, through fusion), KERNEL a kernel name
     * as traces show it ("onednn:conv", "c:dw_conv", "ref"); the plan
     * refuses a kernel that cannot run the node. */
    char op_kernels[CP_LAYOUT_REGIONS_MAX];
    /* --optypelist_for_implmode (ATC's flag): the op types that
     * --op_select_implmode applies to, canonical "Gelu,Softmax" (sorted,
     * ONNX spelling; ATC's SoftmaxV2 reads as Softmax); "" for every op. */
    char optypelist_for_implmode[256];
    /* --int8_nodes (cannprof's own knob; AMCT's analogue): a file of ONNX
     * node names and `OpType::X` lines, the syntax of --keep_dtype, whose
     * Conv/MatMul/Gemm compute in int8 (post-training quantization). ""
     * when none; int8_nodes is its canonical content, as keep_dtype. */
    char int8_nodes_file[1024];
    char int8_nodes[CP_KEEP_DTYPE_MAX];
    /* The activation ranges int8 quantizes with, canonical "TENSOR MIN MAX"
     * lines sorted by tensor (%.9g): from --quant_ranges=FILE, or measured
     * by calibration (`cannprof convert` runs it when --int8_nodes has no
     * ranges file). Recorded in the .om and part of the config id. */
    char quant_ranges_file[1024];
    char quant_ranges[CP_QUANT_RANGES_MAX];
    /* How the ranges were measured: the inputs ("" = seeded random), the
     * method, its percentile, how many samples were run. */
    char calibration_data[1024];
    enum cp_calib_method calibration_method;
    double calibration_percentile; /* default 99.999 */
    int calibration_samples;       /* 0: every sample of calibration_data, 8 random */
    int64_t dynamic_batch[CP_MAX_DYN_BATCH];
    size_t n_dynamic_batch;
    enum cp_buffer_opt buffer_optimize;
    enum cp_implmode implmode;
    char soc_version[64]; /* "cpu" for this target */
    enum cp_log_level log;
};

/* Defaults: framework 5, NCHW input format, blocked layout policy,
 * force_fp32, l2_optimize, high_performance, soc_version "cpu", log null. */
void cp_convert_config_init(struct cp_convert_config *c);

/* Value names, as ATC spells them. */
const char *cp_precision_mode_name(enum cp_precision_mode m);
const char *cp_implmode_name(enum cp_implmode m);
const char *cp_buffer_opt_name(enum cp_buffer_opt b);
const char *cp_input_format_name(enum cp_input_format f);
const char *cp_layout_policy_name(enum cp_layout_policy p);
const char *cp_log_level_name(enum cp_log_level l);
const char *cp_calib_method_name(enum cp_calib_method m);

/* Set one knob from its ATC flag name (without dashes) and value text,
 * validating against ATC's allowed values. Errors name the flag and list
 * what is accepted. CP_ERR_USAGE for an unknown flag. */
enum cp_status cp_convert_config_set(struct cp_convert_config *c, const char *flag,
                                     const char *value, struct cp_diag *d);

/* Check the config as a whole (model given, framework 5, soc_version cpu,
 * dynamic batch needs a -1 batch dimension, ...). */
enum cp_status cp_convert_config_validate(const struct cp_convert_config *c, struct cp_diag *d);

/* The exact command line that reproduces the config, starting with
 * "cannprof convert". Flags at their default are left out. */
void cp_convert_config_cmdline(const struct cp_convert_config *c, struct cp_buf *out);

/* The config as a JSON object (every knob, defaults included), keys in a
 * fixed order so equal configs give equal text. */
void cp_convert_config_json(const struct cp_convert_config *c, struct cp_buf *out);

/* Parse the JSON form back (as stored in a .om). */
enum cp_status cp_convert_config_from_json(struct cp_convert_config *c, const char *json,
                                           struct cp_diag *d);

/* Stable id of the knobs that change the produced model (not model/output
 * paths or log level): 16 hex digits + NUL. */
void cp_convert_config_id(const struct cp_convert_config *c, char out[17]);

/* Whether an effective switch string in the canonical form of
 * cp_convert_config.fusion_switches ("PassA:off;PassB:off"; NULL or "" for
 * none) turns pass `name` off. */
bool cp_fusion_switches_turn_off(const char *switches, const char *name);

/* The conversion pass a `cannprof convert` flag (its key, without "--")
 * takes effect through, or NULL when none: precision_mode -> PrecisionModePass,
 * op_select_implmode -> ImplModePass, layout_policy and input_format ->
 * LayoutTransformPass, dynamic_batch_size -> DynamicBatchPass. With that
 * pass switched off the flag changes nothing in the produced model. */
const char *cp_convert_flag_pass(const char *key);

/* ---- --keep_dtype ----------------------------------------------------------
 *
 * The file holds one entry a line: an ONNX node name (as the source model
 * names it, before any fusion), or `OpType::X` for every node of op type X.
 * Blank lines and lines starting with '#' are skipped; CR line ends and
 * blanks around an entry are dropped. Under allow_fp32_to_bf16 and
 * allow_mix_precision_bf16, a node that would compute in bf16 computes in
 * fp32 when one of the ONNX nodes it stands for (its origins) is listed, or
 * its op type is: `OpType::Conv` also covers FusedConv, `OpType::MatMul`
 * and `OpType::Gemm` also FusedMatMul, and `OpType::MatMul` FusedAttention
 * (whose matmuls were MatMuls). Under the fp32 modes nothing changes. */

/* Parse a keep_dtype file's text into its canonical form (see
 * cp_convert_config.keep_dtype) in out[cap]. Errors name `path` and the
 * line: an `OpType::` without a type, a NUL byte, an entry of 1024 bytes
 * or more, a list longer than cap - 1 bytes (CP_ERR_USAGE). */
enum cp_status cp_keep_dtype_parse(const char *path, const char *text, size_t len, char *out,
                                   size_t cap, struct cp_diag *d);

/* The same for any flag taking such a node list (--int8_nodes): errors
 * say "--FLAG=PATH:LINE". */
enum cp_status cp_node_list_parse(const char *flag, const char *path, const char *text, size_t len,
                                  char *out, size_t cap, struct cp_diag *d);

/* Read c->keep_dtype_file into c->keep_dtype; with no file, clear it.
 * Errors name the file (CP_ERR_USAGE). */
enum cp_status cp_convert_config_load_keep_dtype(struct cp_convert_config *c, struct cp_diag *d);

/* ---- --modify_mixlist and --customize_dtypes ------------------------------
 *
 * --modify_mixlist=FILE, ATC's JSON: {"black-list": {"to-add": [...],
 * "to-remove": [...]}, "white-list": {...}, "gray-list": {...}} of op
 * types (ONNX names; Ascend's Conv2D, MatMulV2, BatchMatMul(V2) and
 * SoftmaxV2 are read as Conv, MatMul, MatMul, Softmax). On the cpu target
 * the white list is what computes in bf16 (Conv, MatMul, Gemm and their
 * fused forms, FusedAttention) and the black list what keeps fp32: a type
 * added to the black list or removed from the white list keeps fp32
 * ("OpType::X=fp32"), one added to the white list computes in bf16
 * ("=bf16"). Gray-list changes and removals from the black list change
 * nothing here (every other op computes in fp32): they are kept as
 * "OpType::X=none" and the conversion warns.
 * Needs a mixed precision mode, as with ATC.
 *
 * --customize_dtypes=FILE, ATC's lines "Opname::NAME:InputDtype:d1,d2,...
 * ;OutputDtype:d1,..." and "OpType::TYPE:InputDtype:...;OutputDtype:..."
 * (',' before OutputDtype accepted too; '#' comments): the node computes in
 * bf16 when an input dtype is bfloat16, in fp32 when they are all float32;
 * float16 is refused (no fp16 arithmetic on this target), as are output
 * dtypes other than float32 (tensors stay f32 at a node's boundary). */

/* Read both files into c->precision_overrides (cleared without files).
 * Errors name the file and the line or key (CP_ERR_USAGE). */
enum cp_status cp_convert_config_load_precision_overrides(struct cp_convert_config *c,
                                                          struct cp_diag *d);

/* The override for an entry ("NAME" or "OpType::X") in the canonical list:
 * "fp32", "bf16" or NULL (none, or "none"). */
const char *cp_precision_override(const char *canon, const char *entry);

/* Whether the canonical list `canon` holds `entry` as one of its lines. */
bool cp_keep_dtype_has(const char *canon, const char *entry);

/* ---- int8: --int8_nodes and --quant_ranges -----------------------------------
 *
 * A ranges file (what calibration writes, what --quant_ranges reads; as
 * TensorRT's calibration cache) holds one tensor a line: "TENSOR MIN MAX",
 * the tensor's ONNX name and the range of values int8 is to represent
 * (MIN <= MAX, finite). Blank lines and '#' lines are skipped; a tensor
 * named twice is an error. */

/* Read c->int8_nodes_file into c->int8_nodes; with no file, clear it. */
enum cp_status cp_convert_config_load_int8_nodes(struct cp_convert_config *c, struct cp_diag *d);

/* Parse a ranges file's text into canonical lines in out[cap]. Errors
 * (CP_ERR_USAGE) name `path` and the line: fewer or more than 3 fields, a
 * number that is not finite, MIN > MAX, a tensor given twice, a NUL byte,
 * a table longer than cap - 1 bytes. */
enum cp_status cp_quant_ranges_parse(const char *path, const char *text, size_t len, char *out,
                                     size_t cap, struct cp_diag *d);

/* Read c->quant_ranges_file into c->quant_ranges (no file: unchanged). */
enum cp_status cp_convert_config_load_quant_ranges(struct cp_convert_config *c, struct cp_diag *d);

/* The range of `tensor` in the canonical table `canon`. */
bool cp_quant_ranges_find(const char *canon, const char *tensor, double *lo, double *hi);

/* The number of tensors in the canonical table. */
size_t cp_quant_ranges_count(const char *canon);

/* ---- --layout_regions --------------------------------------------------------
 *
 * "NODE:POLICY;NODE:POLICY": the conv region (LayoutTransformPass's
 * connected set of layout-aware ops) that holds ONNX node NODE (by origin,
 * through fusion) gets POLICY instead of --layout_policy's choice: nchw
 * leaves it plain (no TransData around it), nhwc or blocked lay its
 * activations out so (TransData where it meets other layouts). The
 * separator of a NODE and its POLICY is the last ':'; NODE cannot contain
 * ';'. Needs --layout_policy auto, blocked or nhwc (nchw forms no
 * regions). */

/* Parse the flag's value into canonical lines in out[cap]. Errors
 * (CP_ERR_USAGE) name the entry: no ':', an empty node, a policy other than
 * nchw/nhwc/blocked, a node given twice, a list longer than cap - 1. */
enum cp_status cp_layout_regions_parse(const char *value, char *out, size_t cap, struct cp_diag *d);

/* Parse --op_kernels' value ("NODE=KERNEL;...") into canonical lines in
 * out[cap]. Errors (CP_ERR_USAGE) name the entry: no '=', an empty node or
 * kernel, a node given twice, a list longer than cap - 1. */
enum cp_status cp_op_kernels_parse(const char *value, char *out, size_t cap, struct cp_diag *d);

/* Whether the effective switch set of `c` turns pass `name` off. */
bool cp_convert_config_pass_is_off(const struct cp_convert_config *c, const char *name);

#endif
