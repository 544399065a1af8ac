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
    OPT_LIST_PASSES,
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
     "conv-region activations: blocked (default; nChw16c/8c), nhwc, nchw"},
    {"list-passes", 0, CP_OPT_FLAG, OPT_LIST_PASSES, NULL,
     "list every conversion pass (name, switch group, what it does) and exit; with "
     "--fusion_switch_file, show which are on"},
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
    printf(
        "usage: cannprof convert --model=FILE.onnx --framework=5 --output=PATH [options]\n"
        "       cannprof convert --list-passes [--fusion_switch_file=FILE] [--json]\n\n"
        "Convert an ONNX model into a CPU offline model (PATH.om). Flags follow ATC:\n"
        "--name=value or --name value. The conversion passes run in the order\n"
        "--list-passes shows; a fusion switch file turns passes off, in ATC's JSON form\n"
        "{\"Switch\":{\"GraphFusion\":{\"ALL\":\"on\",\"SomePass\":\"off\"},\"UBFusion\":{...}}}\n"
        "or as lines SomePass:off. The .om records which passes ran and what each\n"
        "changed (cannprof info PATH.om).\n\noptions:\n");
    cp_opts_print_help(stdout, options, N_OPTIONS);
    printf("\nexample:\n  cannprof convert --model=examples/models/sd_unet_tiny.onnx "
           "--framework=5 --output=/tmp/sd\n");
}

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
    struct cp_buf b;
    cp_buf_init(&b);
    struct cp_pass_desc p;
    if (json)
        cp_buf_puts(&b, "{\"passes\":[");
    else
        cp_buf_printf(&b, "%-36s %-12s %-10s %-4s %s\n", "pass", "group", "family", "on",
                      "description");
    for (size_t i = 0; cp_pass_describe(i, &p); i++) {
        bool on = !cp_convert_config_pass_is_off(&c, p.name);
        if (!json) {
            cp_buf_printf(&b, "%-36s %-12s %-10s %-4s %s\n", p.name, p.group, p.family,
                          on ? "on" : "off", p.description);
            continue;
        }
        cp_buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
        cp_buf_json_str(&b, p.name);
        cp_buf_puts(&b, ",\"group\":");
        cp_buf_json_str(&b, p.group);
        cp_buf_puts(&b, ",\"family\":");
        cp_buf_json_str(&b, p.family);
        cp_buf_printf(&b, ",\"on\":%s,\"description\":", on ? "true" : "false");
        cp_buf_json_str(&b, p.description);
        cp_buf_putc(&b, '}');
    }
    if (json)
        cp_buf_puts(&b, "]}\n");
    fputs(b.data ? b.data : "", stdout);
    cp_buf_release(&b);
    return 0;
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
        if (id == OPT_HELP || id == OPT_JSON || id == OPT_LIST_PASSES)
            continue;
        if (cp_convert_config_set(&cfg, args.opts[i].name, args.opts[i].value, &d) != CP_OK) {
            cp_cli_error("convert", d.msg);
            return cp_status_exit_code(d.status);
        }
    }
    if (cp_args_has(&args, OPT_LIST_PASSES))
        return list_passes(&cfg, cp_args_has(&args, OPT_JSON));
    if (!cp_args_has(&args, OPT_FRAMEWORK) && cfg.model[0]) {
        cp_cli_error("convert", "--framework is required (5 = ONNX), as with ATC");
        return 2;
    }
    /* Read the switch file now: a bad one is a usage error before any
     * work, and the config id printed below depends on what it says.
     * cp_convert reads it again and gives the warnings. */
    struct cp_log quiet = {CP_LOG_ERROR, NULL};
    if (cfg.model[0] && cp_convert_config_load_fusion_switches(&cfg, &quiet, &d) != CP_OK) {
        cp_cli_error("convert", d.msg);
        return cp_status_exit_code(d.status);
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
        cp_buf_printf(&b, ",\"passes_ran\":%zu,\"passes_changed\":%zu", res.passes_ran,
                      res.passes_changed);
        cp_buf_printf(&b, ",\"config_id\":\"%s\",\"config\":", id);
        cp_convert_config_json(&cfg, &b);
        cp_buf_puts(&b, "}\n");
        fputs(b.data ? b.data : "", stdout);
        cp_buf_release(&b);
    } else {
        printf("convert: %s -> %s (%zu nodes -> %zu, %zu of %zu passes changed the graph, %s, "
               "%.2f s)\n",
               cfg.model, res.om_path, res.nodes_in, res.nodes_out, res.passes_changed,
               res.passes_ran, size, res.seconds);
    }
    return 0;
}
