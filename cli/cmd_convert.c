/* cannprof convert: ONNX -> CPU .om, with ATC's flag syntax. */
#include "atc_bridge/convert.h"
#include "cli/commands.h"
#include "tuner/tuner.h"
#include "cli/options.h"
#include "cli/output.h"

#include <stdio.h>
#include <string.h>

enum {
    OPT_BUFFER_OPTIMIZE = 1,
    OPT_CALIBRATION_DATA,
    OPT_CALIBRATION_DATA_ALIAS,
    OPT_CALIBRATION_METHOD,
    OPT_CALIBRATION_PERCENTILE,
    OPT_CALIBRATION_SAMPLES,
    OPT_CUSTOMIZE_DTYPES,
    OPT_DYNAMIC_BATCH_SIZE,
    OPT_FRAMEWORK,
    OPT_FUSION_SWITCH_FILE,
    OPT_INPUT_FORMAT,
    OPT_INT8_NODES,
    OPT_KEEP_DTYPE,
    OPT_LAYOUT_POLICY,
    OPT_LAYOUT_REGIONS,
    OPT_LIST_PASSES,
    OPT_LOG,
    OPT_MODEL,
    OPT_MODIFY_MIXLIST,
    OPT_OP_KERNELS,
    OPT_OP_SELECT_IMPLMODE,
    OPT_OPTYPELIST_FOR_IMPLMODE,
    OPT_OUTPUT,
    OPT_PRECISION_MODE,
    OPT_QUANT_RANGES,
    OPT_SOC_VERSION,
};

/* Sorted by name. Options that are ATC flags keep ATC's spelling. */
static const struct cp_opt own[] = {
    {"buffer_optimize", 0, CP_OPT_VALUE, OPT_BUFFER_OPTIMIZE, "MODE",
     "l2_optimize (default: reuse memory), l1_optimize, off_optimize"},
    {"calibration-data", 0, CP_OPT_VALUE, OPT_CALIBRATION_DATA_ALIAS, "DIR",
     "the same as --calibration_data"},
    {"calibration_data", 0, CP_OPT_VALUE, OPT_CALIBRATION_DATA, "DIR",
     "int8 calibration inputs: one folder a sample holding NAME.pb/.npy per input (one input: "
     "one file a sample); default: 8 seeded random inputs, with a warning"},
    {"calibration_method", 0, CP_OPT_VALUE, OPT_CALIBRATION_METHOD, "METHOD",
     "activation ranges: minmax (default), percentile, entropy"},
    {"calibration_percentile", 0, CP_OPT_VALUE, OPT_CALIBRATION_PERCENTILE, "P",
     "percentile calibration clips both tails at P (default 99.999)"},
    {"calibration_samples", 0, CP_OPT_VALUE, OPT_CALIBRATION_SAMPLES, "N",
     "calibrate on at most N samples (random inputs: N of them)"},
    {"customize_dtypes", 0, CP_OPT_VALUE, OPT_CUSTOMIZE_DTYPES, "FILE",
     "ATC's per-node dtypes: Opname::NAME:InputDtype:...;OutputDtype:... or OpType::TYPE:... "
     "lines (float32, bfloat16)"},
    {"dynamic_batch_size", 0, CP_OPT_VALUE, OPT_DYNAMIC_BATCH_SIZE, "\"1,2,4,8\"",
     "batch profiles (needs -1 as batch in --input_shape)"},
    {"framework", 0, CP_OPT_VALUE, OPT_FRAMEWORK, "5", "source framework: 5 = ONNX (required)"},
    {"fusion_switch_file", 0, CP_OPT_VALUE, OPT_FUSION_SWITCH_FILE, "FILE",
     "ATC fusion switch file (JSON or PassName:off lines)"},
    {"input_format", 0, CP_OPT_VALUE, OPT_INPUT_FORMAT, "FMT", "NCHW (default), NCDHW, ND, NHWC"},
    {"int8_nodes", 0, CP_OPT_VALUE, OPT_INT8_NODES, "FILE",
     "ONNX node names or OpType::TYPE lines (as --keep_dtype) whose Conv/MatMul/Gemm compute "
     "in int8: per-channel weights, calibrated activations"},
    {"keep_dtype", 0, CP_OPT_VALUE, OPT_KEEP_DTYPE, "FILE",
     "ONNX node names (one a line) or OpType::TYPE lines whose nodes keep fp32 under a bf16 "
     "--precision_mode"},
    {"layout_policy", 0, CP_OPT_VALUE, OPT_LAYOUT_POLICY, "POLICY",
     "conv-region activations: auto (default; per region NHWC or blocked, whichever the CPU's "
     "kernels run faster), blocked (nChw16c/8c), nhwc, nchw"},
    {"layout_regions", 0, CP_OPT_VALUE, OPT_LAYOUT_REGIONS, "\"NODE:POLICY;...\"",
     "the conv region holding ONNX node NODE gets POLICY (nchw, nhwc or blocked) over "
     "--layout_policy"},
    {"list-passes", 0, CP_OPT_FLAG, OPT_LIST_PASSES, NULL,
     "list every conversion pass (name, switch group, what it does) and exit; with "
     "--fusion_switch_file, show which are on"},
    {"log", 0, CP_OPT_VALUE, OPT_LOG, "LEVEL", "debug, info, warning, error, null (default)"},
    {"model", 0, CP_OPT_VALUE, OPT_MODEL, "FILE", "the ONNX model to convert (required)"},
    {"modify_mixlist", 0, CP_OPT_VALUE, OPT_MODIFY_MIXLIST, "FILE",
     "ATC's JSON of black/white/gray-list changes (op types) for the mixed precision mode"},
    {"op_kernels", 0, CP_OPT_VALUE, OPT_OP_KERNELS, "\"NODE=KERNEL;...\"",
     "run ONNX node NODE (through fusion) with runtime kernel KERNEL, as traces name it "
     "(onednn:conv, c:dw_conv, ref, ...); a kernel that cannot run it is refused"},
    {"op_select_implmode", 0, CP_OPT_VALUE, OPT_OP_SELECT_IMPLMODE, "MODE",
     "high_performance (default), high_precision, ..._for_all"},
    {"optypelist_for_implmode", 0, CP_OPT_VALUE, OPT_OPTYPELIST_FOR_IMPLMODE, "Softmax,Gelu",
     "apply --op_select_implmode to these op types only (Erf, FusedAttention, Gelu, Softmax)"},
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "PATH",
     "output path without suffix; .om is added (required)"},
    {"precision_mode", 0, CP_OPT_VALUE, OPT_PRECISION_MODE, "MODE",
     "force_fp32 (cpu default), allow_fp32_to_bf16, allow_mix_precision_bf16, ..."},
    {"quant_ranges", 0, CP_OPT_VALUE, OPT_QUANT_RANGES, "FILE",
     "int8 activation ranges ('TENSOR MIN MAX' lines) instead of calibrating"},
    {"soc_version", 0, CP_OPT_VALUE, OPT_SOC_VERSION, "SOC", "target: cpu (default)"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_INPUT_SHAPE, "input shapes; -1 marks a dynamic dimension"},
    {CP_SO_JSON, "print the summary (or, with --list-passes, the passes) as JSON"},
};

static const struct cp_command_opts OPTS = {
    .cmd = "convert",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage =
        "usage: cannprof convert --model=FILE.onnx --framework=5 --output=PATH [options]\n"
        "       cannprof convert --list-passes [--fusion_switch_file=FILE] [--json]\n\n"
        "Convert an ONNX model into a CPU offline model (PATH.om). Flags follow ATC:\n"
        "--name=value or --name value. The conversion passes run in the order\n"
        "--list-passes shows; a fusion switch file turns passes off, in ATC's JSON form\n"
        "{\"Switch\":{\"GraphFusion\":{\"ALL\":\"on\",\"SomePass\":\"off\"},\"UBFusion\":{...}}}\n"
        "or as lines SomePass:off. ALL covers the fusion passes only: the layout and\n"
        "precision passes follow --layout_policy and --precision_mode and are switched\n"
        "off only by name. The .om records which passes ran and what each changed\n"
        "(cannprof info PATH.om).\n\n"
        "example:\n  cannprof convert --model=examples/models/sd_unet_tiny.onnx "
        "--framework=5 --output=/tmp/sd\n",
    .exit_codes = "0 converted, 2 bad usage or input (a flag or value ATC would refuse, a model "
                  "that cannot be read or converted), 3 environment failure (the .om cannot be "
                  "written)",
};

/* `--list-passes`: every pass in run order, with its switch state when a
 * switch file was given. */
static int list_passes(const struct cp_convert_config *cfg, bool json)
{
    struct cp_convert_config c = *cfg;
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_convert_config_load_fusion_switches(&c, NULL, &d) != CP_OK) {
        cp_cli_error("convert", d.msg);
        return cp_status_exit_code(d.status);
    }
    struct cp_pass_desc p;
    if (!json) {
        printf("%-36s %-12s %-10s %-4s %s\n", "pass", "group", "family", "on", "description");
        for (size_t i = 0; cp_pass_describe(i, &p); i++)
            printf("%-36s %-12s %-10s %-4s %s\n", p.name, p.group, p.family,
                   cp_convert_config_pass_is_off(&c, p.name) ? "off" : "on", p.description);
        return 0;
    }
    json_t *j = json_object(), *passes = json_array();
    bool ok = j && passes;
    for (size_t i = 0; ok && cp_pass_describe(i, &p); i++) {
        json_t *o = json_object();
        ok = o && cp_json_set_str(o, "name", p.name) && cp_json_set_str(o, "group", p.group) &&
             cp_json_set_str(o, "family", p.family) &&
             cp_json_set_bool(o, "on", !cp_convert_config_pass_is_off(&c, p.name)) &&
             cp_json_set_str(o, "description", p.description);
        if (ok)
            ok = cp_json_push(passes, o); /* steals o */
        else
            json_decref(o);
    }
    if (ok) {
        ok = cp_json_set(j, "passes", passes);
        passes = NULL;
    }
    json_decref(passes);
    if (!ok) {
        json_decref(j);
        j = NULL;
    }
    int rc = cp_out_json(j, "convert");
    json_decref(j);
    return rc;
}

/* The --json summary of a conversion; NULL when out of memory. */
static json_t *result_json(const struct cp_convert_config *cfg, const struct cp_convert_result *res)
{
    char id[17];
    cp_convert_config_id(cfg, id);
    struct cp_buf c;
    cp_buf_init(&c);
    cp_convert_config_json(cfg, &c);
    json_t *j = json_object();
    bool ok = j && cp_buf_status(&c) == CP_OK && cp_json_set_str(j, "om", res->om_path) &&
              cp_json_set_int(j, "bytes", (int64_t)res->om_bytes) &&
              cp_json_set_int(j, "nodes_in", (int64_t)res->nodes_in) &&
              cp_json_set_int(j, "nodes_out", (int64_t)res->nodes_out) &&
              cp_json_set_num(j, "seconds", res->seconds) &&
              cp_json_set_int(j, "passes_ran", (int64_t)res->passes_ran) &&
              cp_json_set_int(j, "passes_changed", (int64_t)res->passes_changed) &&
              cp_json_set_str(j, "config_id", id) &&
              cp_json_set(j, "config", cp_json_embed(c.data ? c.data : "{}"));
    cp_buf_release(&c);
    if (ok)
        return j;
    json_decref(j);
    return NULL;
}

int cp_cmd_convert(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("convert", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (args.n_positional) {
        fprintf(stderr,
                "cannprof convert: error: unexpected argument '%s'; give the model with "
                "--model=FILE\n",
                args.positional[0]);
        return 2;
    }
    struct cp_convert_config cfg;
    cp_convert_config_init(&cfg);
    for (size_t i = 0; i < args.n_opts; i++) {
        int id = args.opts[i].id;
        if (id == CP_SO_HELP || id == CP_SO_JSON || id == OPT_LIST_PASSES)
            continue;
        const char *flag =
            id == OPT_CALIBRATION_DATA_ALIAS ? "calibration_data" : args.opts[i].name;
        if (cp_convert_config_set(&cfg, flag, args.opts[i].value, &d) != CP_OK) {
            cp_cli_error("convert", d.msg);
            return cp_status_exit_code(d.status);
        }
    }
    if (cp_args_has(&args, OPT_LIST_PASSES))
        return list_passes(&cfg, cp_args_has(&args, CP_SO_JSON));
    if (!cp_args_has(&args, OPT_FRAMEWORK) && cfg.model[0]) {
        cp_cli_error("convert", "--framework is required (5 = ONNX), as with ATC");
        return 2;
    }
    /* Read the switch file now: a bad one is a usage error before any
     * work, and the config id printed below depends on what it says.
     * cp_convert reads it again and gives the warnings. */
    struct cp_log quiet = {CP_LOG_ERROR, NULL};
    if (cfg.model[0] && (cp_convert_config_load_fusion_switches(&cfg, &quiet, &d) != CP_OK ||
                         cp_convert_config_load_keep_dtype(&cfg, &d) != CP_OK ||
                         cp_convert_config_load_precision_overrides(&cfg, &d) != CP_OK ||
                         cp_convert_config_load_int8_nodes(&cfg, &d) != CP_OK ||
                         cp_convert_config_load_quant_ranges(&cfg, &d) != CP_OK)) {
        cp_cli_error("convert", d.msg);
        return cp_status_exit_code(d.status);
    }
    bool calib_flags = cp_args_has(&args, OPT_CALIBRATION_DATA) ||
                       cp_args_has(&args, OPT_CALIBRATION_DATA_ALIAS) ||
                       cp_args_has(&args, OPT_CALIBRATION_METHOD) ||
                       cp_args_has(&args, OPT_CALIBRATION_PERCENTILE) ||
                       cp_args_has(&args, OPT_CALIBRATION_SAMPLES);
    if (calib_flags && (!cfg.int8_nodes_file[0] || cfg.quant_ranges_file[0])) {
        cp_cli_error("convert", cfg.quant_ranges_file[0]
                                    ? "the --calibration_* flags measure ranges; --quant_ranges "
                                      "gives them already: use one or the other"
                                    : "the --calibration_* flags go with --int8_nodes");
        return 2;
    }
    if (cfg.model[0] && cfg.int8_nodes[0] && !cfg.quant_ranges_file[0]) {
        struct cp_log warn = {cfg.log == CP_LOG_NULL ? CP_LOG_WARNING : cfg.log, NULL};
        struct cp_calib_opts co = {.threads = 0, .seed = 1, .log = &warn};
        if (cp_tune_calibrate(&cfg, &co, &d) != CP_OK) {
            cp_cli_error("convert", d.msg);
            return cp_status_exit_code(d.status);
        }
    }
    struct cp_convert_result res;
    if (cp_convert(&cfg, &res, &d) != CP_OK) {
        cp_cli_error("convert", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_JSON)) {
        json_t *j = result_json(&cfg, &res);
        int rc = cp_out_json(j, "convert");
        json_decref(j);
        return rc;
    }
    char size[32];
    cp_format_bytes(res.om_bytes, size);
    printf("convert: %s -> %s (%zu nodes -> %zu, %zu of %zu passes changed the graph, %s, "
           "%.2f s)\n",
           cfg.model, res.om_path, res.nodes_in, res.nodes_out, res.passes_changed, res.passes_ran,
           size, res.seconds);
    return 0;
}
