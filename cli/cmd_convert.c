/* cannprof convert: ONNX -> CPU .om, with ATC's flag syntax. */
#include "atc_bridge/convert.h"
#include "cli/commands.h"
#include "cli/options.h"

#include <stdio.h>
#include <string.h>

enum {
    OPT_BUFFER_OPTIMIZE = 1,
    OPT_DYNAMIC_BATCH_SIZE,
    OPT_FRAMEWORK,
    OPT_FUSION_SWITCH_FILE,
    OPT_HELP,
    OPT_INPUT_FORMAT,
    OPT_INPUT_SHAPE,
    OPT_JSON,
    OPT_LAYOUT_POLICY,
    OPT_LOG,
    OPT_MODEL,
    OPT_OP_SELECT_IMPLMODE,
    OPT_OUTPUT,
    OPT_PRECISION_MODE,
    OPT_SOC_VERSION,
};

/* Sorted by name. Options that are ATC flags keep ATC's spelling. */
static const struct cp_opt options[] = {
    {"buffer_optimize", 0, CP_OPT_VALUE, OPT_BUFFER_OPTIMIZE, "MODE",
     "l2_optimize (default: reuse memory), l1_optimize, off_optimize"},
    {"dynamic_batch_size", 0, CP_OPT_VALUE, OPT_DYNAMIC_BATCH_SIZE, "\"1,2,4,8\"",
     "batch profiles (needs -1 as batch in --input_shape)"},
    {"framework", 0, CP_OPT_VALUE, OPT_FRAMEWORK, "5", "source framework: 5 = ONNX (required)"},
    {"fusion_switch_file", 0, CP_OPT_VALUE, OPT_FUSION_SWITCH_FILE, "FILE",
     "ATC fusion switch file (JSON or PassName:off lines)"},
    {"help", 'h', CP_OPT_FLAG, OPT_HELP, NULL, "show this help"},
    {"input_format", 0, CP_OPT_VALUE, OPT_INPUT_FORMAT, "FMT", "NCHW (default), NCDHW, ND, NHWC"},
    {"input_shape", 0, CP_OPT_VALUE, OPT_INPUT_SHAPE, "\"name:1,3,224,224;...\"",
     "input shapes; -1 marks a dynamic dimension"},
    {"json", 0, CP_OPT_FLAG, OPT_JSON, NULL, "print the summary as JSON"},
    {"layout_policy", 0, CP_OPT_VALUE, OPT_LAYOUT_POLICY, "POLICY",
     "conv-region activations: nchw (default), nhwc, blocked (nChw16c/8c)"},
    {"log", 0, CP_OPT_VALUE, OPT_LOG, "LEVEL", "debug, info, warning, error, null (default)"},
    {"model", 0, CP_OPT_VALUE, OPT_MODEL, "FILE", "the ONNX model to convert (required)"},
    {"op_select_implmode", 0, CP_OPT_VALUE, OPT_OP_SELECT_IMPLMODE, "MODE",
     "high_performance (default), high_precision, ..._for_all"},
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "PATH",
     "output path without suffix; .om is added (required)"},
    {"precision_mode", 0, CP_OPT_VALUE, OPT_PRECISION_MODE, "MODE",
     "force_fp32 (cpu default), allow_fp32_to_bf16, allow_mix_precision_bf16, ..."},
    {"soc_version", 0, CP_OPT_VALUE, OPT_SOC_VERSION, "SOC", "target: cpu (default)"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void help(void)
{
    printf("usage: cannprof convert --model=FILE.onnx --framework=5 --output=PATH [options]\n\n"
           "Convert an ONNX model into a CPU offline model (PATH.om). Flags follow ATC:\n"
           "--name=value or --name value.\n\noptions:\n");
    cp_opts_print_help(stdout, options, N_OPTIONS);
    printf("\nexample:\n  cannprof convert --model=examples/models/sd_unet_tiny.onnx "
           "--framework=5 --output=/tmp/sd\n");
}

int cp_cmd_convert(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse("convert", options, N_OPTIONS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("convert", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, OPT_HELP)) {
        help();
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
        if (id == OPT_HELP || id == OPT_JSON)
            continue;
        if (cp_convert_config_set(&cfg, args.opts[i].name, args.opts[i].value, &d) != CP_OK) {
            cp_cli_error("convert", d.msg);
            return cp_status_exit_code(d.status);
        }
    }
    if (!cp_args_has(&args, OPT_FRAMEWORK) && cfg.model[0]) {
        cp_cli_error("convert", "--framework is required (5 = ONNX), as with ATC");
        return 2;
    }
    struct cp_convert_result res;
    if (cp_convert(&cfg, &res, &d) != CP_OK) {
        cp_cli_error("convert", d.msg);
        return cp_status_exit_code(d.status);
    }
    char size[32];
    cp_format_bytes(res.om_bytes, size);
    if (cp_args_has(&args, OPT_JSON)) {
        struct cp_buf b;
        cp_buf_init(&b);
        char id[17];
        cp_convert_config_id(&cfg, id);
        cp_buf_puts(&b, "{\"om\":");
        cp_buf_json_str(&b, res.om_path);
        cp_buf_printf(&b, ",\"bytes\":%zu,\"nodes_in\":%zu,\"nodes_out\":%zu,\"seconds\":%.3f",
                      res.om_bytes, res.nodes_in, res.nodes_out, res.seconds);
        cp_buf_printf(&b, ",\"config_id\":\"%s\",\"config\":", id);
        cp_convert_config_json(&cfg, &b);
        cp_buf_puts(&b, "}\n");
        fputs(b.data ? b.data : "", stdout);
        cp_buf_release(&b);
    } else {
        printf("convert: %s -> %s (%zu nodes -> %zu, %s, %.2f s)\n", cfg.model, res.om_path,
               res.nodes_in, res.nodes_out, size, res.seconds);
    }
    return 0;
}
