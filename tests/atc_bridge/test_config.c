/* The conversion config: ATC flag parsing and validation, the reproducing
 * command line, the JSON form and the stable id. */
#include "atc_bridge/convert.h"
#include "support/cli.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------- */

static void set_ok(struct cp_convert_config *c, const char *flag, const char *value)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_convert_config_set(c, flag, value, &d);
    cr_assert_eq(st, CP_OK, "--%s=%s refused (%d): %s", flag, value, st, d.msg);
    cr_assert_not(cp_diag_has_error(&d));
}

/* Expect CP_ERR_USAGE; the message must name the flag and contain every
 * string of `needles` (NULL-terminated). */
static void set_fails(struct cp_convert_config *c, const char *flag, const char *value,
                      const char *const *needles)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_convert_config_set(c, flag, value, &d);
    cr_assert_eq(st, CP_ERR_USAGE, "--%s=%s: status %d, message: %s", flag, value, st, d.msg);
    cr_assert_eq(d.status, CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, flag), "message should name --%s: %s", flag, d.msg);
    for (size_t i = 0; needles && needles[i]; i++)
        cr_assert_not_null(strstr(d.msg, needles[i]), "--%s=%s: message lacks '%s': %s", flag,
                           value, needles[i], d.msg);
}

static char *json_of(const struct cp_convert_config *c)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_convert_config_json(c, &b);
    cr_assert_eq(cp_buf_status(&b), CP_OK);
    return cp_buf_steal(&b);
}

static char *cmdline_of(const struct cp_convert_config *c)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_convert_config_cmdline(c, &b);
    cr_assert_eq(cp_buf_status(&b), CP_OK);
    return cp_buf_steal(&b);
}

static void validate_ok(const struct cp_convert_config *c)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_convert_config_validate(c, &d);
    cr_assert_eq(st, CP_OK, "validate: %s", d.msg);
}

static void validate_fails(const struct cp_convert_config *c, const char *needle)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_convert_config_validate(c, &d);
    cr_assert_eq(st, CP_ERR_USAGE, "validate: status %d, %s", st, d.msg);
    cr_assert_not_null(strstr(d.msg, needle), "message lacks '%s': %s", needle, d.msg);
}

/* A config that passes validation: model, output and framework given. */
static void base_config(struct cp_convert_config *c)
{
    cp_convert_config_init(c);
    set_ok(c, "model", "models/net.onnx");
    set_ok(c, "framework", "5");
    set_ok(c, "output", "out/net");
}

/* Parse a cmdline back into a config through cp_convert_config_set. */
static void parse_cmdline(const char *line, struct cp_convert_config *out)
{
    char *words[64];
    size_t n = 0;
    cr_assert(cp_t_shell_split(line, words, 64, &n), "cannot split: %s", line);
    cr_assert_geq(n, 2);
    cr_assert_str_eq(words[0], "cannprof");
    cr_assert_str_eq(words[1], "convert");
    cp_convert_config_init(out);
    for (size_t i = 2; i < n; i++) {
        cr_assert_eq(strncmp(words[i], "--", 2), 0, "word '%s' of: %s", words[i], line);
        char *eq = strchr(words[i], '=');
        cr_assert_not_null(eq, "word '%s' has no '='", words[i]);
        *eq = '\0';
        set_ok(out, words[i] + 2, eq + 1);
    }
    for (size_t i = 0; i < n; i++)
        free(words[i]);
}

static void cmdline_round_trip(const struct cp_convert_config *c)
{
    char *line = cmdline_of(c);
    cr_assert_eq(strncmp(line, "cannprof convert ", 17), 0, "cmdline: %s", line);
    struct cp_convert_config back;
    parse_cmdline(line, &back);
    char *a = json_of(c), *b = json_of(&back);
    cr_assert_str_eq(b, a, "cmdline %s\ndoes not reproduce the config", line);
    free(a);
    free(b);
    free(line);
}

static void json_round_trip(const struct cp_convert_config *c)
{
    char *text = json_of(c);
    struct cp_convert_config back;
    memset(&back, 0xAB, sizeof back);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_from_json(&back, text, &d), CP_OK, "%s\n%s", d.msg, text);
    char *again = json_of(&back);
    cr_assert_str_eq(again, text);
    free(again);
    free(text);
}

static void id_of(const struct cp_convert_config *c, char out[17])
{
    memset(out, 'Z', 17);
    cp_convert_config_id(c, out);
    cr_assert_eq(strlen(out), 16, "id '%s'", out);
    for (int i = 0; i < 16; i++)
        cr_assert(strchr("0123456789abcdef", out[i]) != NULL, "id '%s' is not hex", out);
}

/* ---- defaults -------------------------------------------------------------- */

Test(config, defaults_follow_atc_and_the_cpu_target)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    cr_assert_eq(c.framework, 5);
    cr_assert_eq(c.input_format, CP_FMT_NCHW);
    cr_assert_eq(c.precision_mode, CP_PREC_FORCE_FP32);
    cr_assert_eq(c.buffer_optimize, CP_BUF_L2_OPTIMIZE);
    cr_assert_eq(c.implmode, CP_IMPL_HIGH_PERFORMANCE);
    cr_assert_str_eq(c.soc_version, "cpu");
    cr_assert_eq(c.log, CP_LOG_NULL);
    cr_assert_str_eq(c.model, "");
    cr_assert_str_eq(c.output, "");
    cr_assert_eq(c.n_input_shapes, 0);
    cr_assert_eq(c.n_dynamic_batch, 0);
    cr_assert_str_eq(c.fusion_switch_file, "");
}

/* ---- enumerated flags --------------------------------------------------------- */

Test(config, precision_mode_accepts_every_atc_value)
{
    static const char *const names[] = {"force_fp32",
                                        "force_fp16",
                                        "cube_fp16in_fp32out",
                                        "allow_mix_precision",
                                        "allow_fp32_to_fp16",
                                        "must_keep_origin_dtype",
                                        "allow_mix_precision_fp16",
                                        "allow_mix_precision_bf16",
                                        "allow_fp32_to_bf16"};
    cr_assert_eq(sizeof names / sizeof *names, CP_PREC_COUNT);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        struct cp_convert_config c;
        cp_convert_config_init(&c);
        set_ok(&c, "precision_mode", names[i]);
        cr_assert_str_eq(cp_precision_mode_name(c.precision_mode), names[i]);
    }
}

Test(config, precision_mode_rejects_unknown_value_listing_accepted_ones)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const needles[] = {"fp32",
                                          "force_fp32",
                                          "force_fp16",
                                          "allow_mix_precision_bf16",
                                          "allow_fp32_to_bf16",
                                          "must_keep_origin_dtype",
                                          NULL};
    set_fails(&c, "precision_mode", "fp32", needles);
    set_fails(&c, "precision_mode", "FORCE_FP32", needles + 1);
    set_fails(&c, "precision_mode", "", needles + 1);
    /* precision_mode_v2 spellings are a different flag in ATC. */
    set_fails(&c, "precision_mode", "mixed_bfloat16", needles + 1);
}

Test(config, op_select_implmode_values)
{
    static const char *const names[] = {"high_performance", "high_precision",
                                        "high_precision_for_all", "high_performance_for_all"};
    for (size_t i = 0; i < 4; i++) {
        struct cp_convert_config c;
        cp_convert_config_init(&c);
        set_ok(&c, "op_select_implmode", names[i]);
        cr_assert_str_eq(cp_implmode_name(c.implmode), names[i]);
    }
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const needles[] = {"fast", "high_precision", "high_performance_for_all",
                                          NULL};
    set_fails(&c, "op_select_implmode", "fast", needles);
}

Test(config, buffer_optimize_values)
{
    static const char *const names[] = {"l2_optimize", "l1_optimize", "off_optimize"};
    for (size_t i = 0; i < 3; i++) {
        struct cp_convert_config c;
        cp_convert_config_init(&c);
        set_ok(&c, "buffer_optimize", names[i]);
        cr_assert_str_eq(cp_buffer_opt_name(c.buffer_optimize), names[i]);
    }
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const needles[] = {"l3_optimize", "l2_optimize", "l1_optimize",
                                          "off_optimize", NULL};
    set_fails(&c, "buffer_optimize", "l3_optimize", needles);
}

Test(config, input_format_values)
{
    static const char *const names[] = {"NCHW", "NCDHW", "ND", "NHWC"};
    for (size_t i = 0; i < 4; i++) {
        struct cp_convert_config c;
        cp_convert_config_init(&c);
        set_ok(&c, "input_format", names[i]);
        cr_assert_str_eq(cp_input_format_name(c.input_format), names[i]);
    }
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const needles[] = {"NDHWC", "NCHW", "NCDHW", "ND", NULL};
    set_fails(&c, "input_format", "NDHWC", needles);
    set_fails(&c, "input_format", "nchw", needles + 1);
}

Test(config, log_values)
{
    static const char *const names[] = {"debug", "info", "warning", "error", "null"};
    for (size_t i = 0; i < 5; i++) {
        struct cp_convert_config c;
        cp_convert_config_init(&c);
        set_ok(&c, "log", names[i]);
        cr_assert_str_eq(cp_log_level_name(c.log), names[i]);
    }
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const needles[] = {"verbose", "debug", "warning", "null", NULL};
    set_fails(&c, "log", "verbose", needles);
}

Test(config, a_refused_value_leaves_the_previous_setting)
{
    /* Each enumerated knob set to a non-first value, then given a bad one. */
    static const char *const knobs[][2] = {{"precision_mode", "allow_fp32_to_bf16"},
                                           {"input_format", "ND"},
                                           {"buffer_optimize", "off_optimize"},
                                           {"op_select_implmode", "high_precision"},
                                           {"log", "null"}};
    for (size_t i = 0; i < sizeof knobs / sizeof *knobs; i++) {
        struct cp_convert_config c;
        cp_convert_config_init(&c);
        set_ok(&c, knobs[i][0], knobs[i][1]);
        char *before = json_of(&c);
        set_fails(&c, knobs[i][0], "bogus", NULL);
        char *after = json_of(&c);
        cr_assert_str_eq(after, before, "a refused --%s changed the config", knobs[i][0]);
        free(before);
        free(after);
    }
}

/* ---- framework, model, output, soc_version ------------------------------------ */

Test(config, framework_5_is_onnx)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_ok(&c, "framework", "5");
    cr_assert_eq(c.framework, 5);
}

Test(config, framework_of_other_atc_frameworks_is_refused_by_name)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const tf[] = {"TensorFlow", "5", NULL};
    set_fails(&c, "framework", "3", tf);
    static const char *const caffe[] = {"Caffe", NULL};
    set_fails(&c, "framework", "0", caffe);
    static const char *const ms[] = {"MindSpore", NULL};
    set_fails(&c, "framework", "1", ms);
    static const char *const five[] = {"5", NULL};
    set_fails(&c, "framework", "2", five);
    set_fails(&c, "framework", "6", five);
    set_fails(&c, "framework", "-1", five);
    set_fails(&c, "framework", "onnx", five);
    set_fails(&c, "framework", "", five);
    cr_assert_eq(c.framework, 5);
}

Test(config, output_with_om_suffix_is_refused)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const needles[] = {"out/model.om", ".om", NULL};
    set_fails(&c, "output", "out/model.om", needles);
    set_fails(&c, "output", "out/model.OM", NULL);
    set_fails(&c, "output", "", NULL);
    cr_assert_str_eq(c.output, "");
    set_ok(&c, "output", "out/model");
    cr_assert_str_eq(c.output, "out/model");
    set_ok(&c, "output", "out/model.om.d/x");
    cr_assert_str_eq(c.output, "out/model.om.d/x");
}

Test(config, model_path_is_kept_verbatim_and_length_checked)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_ok(&c, "model", "../some dir/model v2.onnx");
    cr_assert_str_eq(c.model, "../some dir/model v2.onnx");
    char longp[sizeof c.model + 10];
    memset(longp, 'm', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    set_fails(&c, "model", longp, NULL);
    cr_assert_str_eq(c.model, "../some dir/model v2.onnx");
}

Test(config, soc_version_other_than_cpu_is_refused)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const needles[] = {"Ascend910B", "cpu", NULL};
    set_fails(&c, "soc_version", "Ascend910B", needles);
    set_fails(&c, "soc_version", "Ascend310P3", needles + 1);
    set_fails(&c, "soc_version", "CPU", needles + 1);
    cr_assert_str_eq(c.soc_version, "cpu");
    set_ok(&c, "soc_version", "cpu");
    cr_assert_str_eq(c.soc_version, "cpu");
}

Test(config, fusion_switch_file_is_recorded)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_ok(&c, "fusion_switch_file", "cfg/fusion.json");
    cr_assert_str_eq(c.fusion_switch_file, "cfg/fusion.json");
    set_fails(&c, "fusion_switch_file", "", NULL);
}

Test(config, unknown_flag_and_missing_value_are_usage_errors)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_fails(&c, "precison_mode", "force_fp32", NULL);
    set_fails(&c, "mode", "0", NULL);
    set_fails(&c, "model", NULL, NULL);
}

/* ---- --input_shape ------------------------------------------------------------- */

Test(config, input_shape_parses_several_inputs)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_ok(&c, "input_shape", "a:1,3,224,224;b:-1,77");
    cr_assert_eq(c.n_input_shapes, 2);
    cr_assert_str_eq(c.input_shapes[0].name, "a");
    cr_assert_eq(c.input_shapes[0].rank, 4);
    int64_t a[] = {1, 3, 224, 224};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(c.input_shapes[0].dims[i], a[i]);
    cr_assert_str_eq(c.input_shapes[1].name, "b");
    cr_assert_eq(c.input_shapes[1].rank, 2);
    cr_assert_eq(c.input_shapes[1].dims[0], -1);
    cr_assert_eq(c.input_shapes[1].dims[1], 77);
}

Test(config, input_shape_names_may_contain_colons)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_ok(&c, "input_shape", "x:0:1,2");
    cr_assert_eq(c.n_input_shapes, 1);
    cr_assert_str_eq(c.input_shapes[0].name, "x:0");
    cr_assert_eq(c.input_shapes[0].rank, 2);
    cr_assert_eq(c.input_shapes[0].dims[0], 1);
    cr_assert_eq(c.input_shapes[0].dims[1], 2);
}

Test(config, input_shape_given_again_replaces_the_previous_one)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_ok(&c, "input_shape", "a:1;b:2;c:3");
    set_ok(&c, "input_shape", "z:4,4");
    cr_assert_eq(c.n_input_shapes, 1);
    cr_assert_str_eq(c.input_shapes[0].name, "z");
}

Test(config, input_shape_with_empty_dims_is_a_scalar)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_ok(&c, "input_shape", "t:");
    cr_assert_eq(c.n_input_shapes, 1);
    cr_assert_str_eq(c.input_shapes[0].name, "t");
    cr_assert_eq(c.input_shapes[0].rank, 0);
}

Test(config, input_shape_rejects_bad_dimensions)
{
    static const char *const bad[] = {"x:1,-2", "x:abc", "x:1.5", "x:1,3x",
                                      "x:99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cp_convert_config c;
        cp_convert_config_init(&c);
        struct cp_diag d;
        cp_diag_init(&d);
        enum cp_status st = cp_convert_config_set(&c, "input_shape", bad[i], &d);
        cr_assert_eq(st, CP_ERR_USAGE, "'%s' accepted", bad[i]);
        cr_assert_not_null(strstr(d.msg, "input_shape"), "%s", d.msg);
        cr_assert_not_null(strstr(d.msg, "'x'"), "message should name the input: %s", d.msg);
    }
}

Test(config, input_shape_rejects_missing_name_or_colon)
{
    static const char *const bad[] = {"1,3,224,224", ":1,3", "", ";"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cp_convert_config c;
        cp_convert_config_init(&c);
        set_fails(&c, "input_shape", bad[i], NULL);
    }
}

Test(config, input_shape_rejects_duplicate_inputs_and_too_many_dims)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const dup[] = {"'a'", "twice", NULL};
    set_fails(&c, "input_shape", "a:1;a:2", dup);
    set_fails(&c, "input_shape", "a:1,1,1,1,1,1,1,1,1", NULL);
    set_ok(&c, "input_shape", "a:1,1,1,1,1,1,1,1");
    cr_assert_eq(c.input_shapes[0].rank, CP_MAX_RANK);
}

Test(config, input_shape_ranges_are_refused_with_a_pointer_to_dynamic_batch)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const needles[] = {"1~8", "range", "--dynamic_batch_size", NULL};
    set_fails(&c, "input_shape", "x:1~8,3,224,224", needles);
}

Test(config, input_shape_too_many_inputs_is_refused)
{
    struct cp_buf b;
    cp_buf_init(&b);
    for (int i = 0; i <= CP_MAX_INPUT_SHAPES; i++)
        cp_buf_printf(&b, "%sin%d:1", i ? ";" : "", i);
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_fails(&c, "input_shape", b.data, NULL);
    cp_buf_release(&b);
}

/* ---- --dynamic_batch_size -------------------------------------------------------- */

Test(config, dynamic_batch_size_is_parsed_and_sorted)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_ok(&c, "dynamic_batch_size", "8,1,4,2");
    cr_assert_eq(c.n_dynamic_batch, 4);
    int64_t expect[] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(c.dynamic_batch[i], expect[i], "index %d", i);
    set_ok(&c, "dynamic_batch_size", "1,2,4,8");
    cr_assert_eq(c.n_dynamic_batch, 4);
}

Test(config, dynamic_batch_size_rejects_duplicates_zero_and_single_profile)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    static const char *const dup[] = {"2", "twice", NULL};
    set_fails(&c, "dynamic_batch_size", "1,2,2,4", dup);
    static const char *const zero[] = {"'0'", NULL};
    set_fails(&c, "dynamic_batch_size", "0,1,2", zero);
    static const char *const one[] = {"at least 2", NULL};
    set_fails(&c, "dynamic_batch_size", "4", one);
    set_fails(&c, "dynamic_batch_size", "-1,2", NULL);
    set_fails(&c, "dynamic_batch_size", "a,b", NULL);
    set_fails(&c, "dynamic_batch_size", "", NULL);
}

Test(config, dynamic_batch_size_allows_at_most_100_profiles)
{
    struct cp_buf b;
    cp_buf_init(&b);
    for (int i = 1; i <= CP_MAX_DYN_BATCH; i++)
        cp_buf_printf(&b, "%s%d", i > 1 ? "," : "", i);
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_ok(&c, "dynamic_batch_size", b.data);
    cr_assert_eq(c.n_dynamic_batch, CP_MAX_DYN_BATCH);
    cp_buf_printf(&b, ",%d", CP_MAX_DYN_BATCH + 1);
    set_fails(&c, "dynamic_batch_size", b.data, NULL);
    cp_buf_release(&b);
}

/* ---- validation ---------------------------------------------------------------- */

Test(config, validate_requires_model_and_output)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    validate_fails(&c, "--model");
    set_ok(&c, "model", "m.onnx");
    validate_fails(&c, "--output");
    set_ok(&c, "output", "out/m");
    validate_ok(&c);
}

Test(config, validate_dynamic_batch_needs_a_minus_one_batch_dimension)
{
    struct cp_convert_config c;
    base_config(&c);
    set_ok(&c, "dynamic_batch_size", "1,2,4,8");
    validate_fails(&c, "--input_shape");

    set_ok(&c, "input_shape", "x:1,3,224,224");
    validate_fails(&c, "-1");

    set_ok(&c, "input_shape", "x:1,-1,224,224");
    validate_fails(&c, "'x'");

    set_ok(&c, "input_shape", "x:-1,3,224,224;mask:-1,77");
    validate_ok(&c);
}

Test(config, validate_accepts_minus_one_dims_without_dynamic_batch)
{
    struct cp_convert_config c;
    base_config(&c);
    set_ok(&c, "input_shape", "x:1,-1,64");
    validate_ok(&c);
}

/* ---- command line ----------------------------------------------------------------- */

Test(config, cmdline_of_defaults_names_only_required_flags)
{
    struct cp_convert_config c;
    base_config(&c);
    char *line = cmdline_of(&c);
    cr_assert_str_eq(line,
                     "cannprof convert --model=models/net.onnx --framework=5 --output=out/net "
                     "--soc_version=cpu");
    free(line);
    cmdline_round_trip(&c);
}

Test(config, cmdline_reproduces_every_knob)
{
    struct cp_convert_config c;
    base_config(&c);
    set_ok(&c, "input_shape", "sample:-1,4,32,32;timestep:1;x:0:-1,77,64");
    set_ok(&c, "input_format", "ND");
    set_ok(&c, "precision_mode", "allow_mix_precision_bf16");
    set_ok(&c, "fusion_switch_file", "fusion.cfg");
    set_ok(&c, "dynamic_batch_size", "4,1,2");
    set_ok(&c, "buffer_optimize", "off_optimize");
    set_ok(&c, "op_select_implmode", "high_precision_for_all");
    set_ok(&c, "log", "warning");
    char *line = cmdline_of(&c);
    static const char *const parts[] = {"--input_format=ND",
                                        "--precision_mode=allow_mix_precision_bf16",
                                        "--fusion_switch_file=fusion.cfg",
                                        "--dynamic_batch_size=1,2,4",
                                        "--buffer_optimize=off_optimize",
                                        "--op_select_implmode=high_precision_for_all",
                                        "--log=warning",
                                        "sample:-1,4,32,32;timestep:1;x:0:-1,77,64"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        cr_assert_not_null(strstr(line, parts[i]), "cmdline lacks %s: %s", parts[i], line);
    free(line);
    cmdline_round_trip(&c);
}

Test(config, cmdline_quotes_paths_with_spaces_and_quotes)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    set_ok(&c, "model", "my models/it's \"v2\" $HOME.onnx");
    set_ok(&c, "output", "out dir/it's");
    set_ok(&c, "fusion_switch_file", "a b;c.json");
    /* The round trip splits words like a shell: an unquoted space or quote
     * would break the paths apart. */
    cmdline_round_trip(&c);
}

/* ---- JSON form and id ------------------------------------------------------------------ */

Test(config, json_round_trip_of_defaults)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    json_round_trip(&c);
}

Test(config, json_round_trip_of_every_knob)
{
    struct cp_convert_config c;
    base_config(&c);
    set_ok(&c, "input_shape", "sample:-1,4,32,32;timestep:1;x:0:-1,77,64;s:");
    set_ok(&c, "input_format", "NHWC");
    set_ok(&c, "precision_mode", "force_fp16");
    set_ok(&c, "fusion_switch_file", "dir/it's \"fusion\".json");
    set_ok(&c, "dynamic_batch_size", "1,16,8");
    set_ok(&c, "buffer_optimize", "l1_optimize");
    set_ok(&c, "op_select_implmode", "high_precision");
    set_ok(&c, "log", "debug");
    json_round_trip(&c);

    /* And the parsed struct holds the same values, not just the same text. */
    char *text = json_of(&c);
    struct cp_convert_config back;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_from_json(&back, text, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(back.model, c.model);
    cr_assert_str_eq(back.output, c.output);
    cr_assert_eq(back.n_input_shapes, 4);
    cr_assert_str_eq(back.input_shapes[2].name, "x:0");
    cr_assert_eq(back.input_shapes[2].dims[0], -1);
    cr_assert_eq(back.input_shapes[3].rank, 0);
    cr_assert_eq(back.input_format, CP_FMT_NHWC);
    cr_assert_eq(back.precision_mode, CP_PREC_FORCE_FP16);
    cr_assert_eq(back.n_dynamic_batch, 3);
    cr_assert_eq(back.dynamic_batch[2], 16);
    cr_assert_eq(back.buffer_optimize, CP_BUF_L1_OPTIMIZE);
    cr_assert_eq(back.implmode, CP_IMPL_HIGH_PRECISION);
    cr_assert_eq(back.log, CP_LOG_DEBUG);
    free(text);
}

Test(config, from_json_rejects_garbage_as_corrupt)
{
    static const char *const bad[] = {
        "",
        "not json",
        "{\"precision_mode\":",
        "[1,2,3]",
        "42",
        "{\"precision_mode\":\"bogus\"}",
        "{\"precision_mode\":7}",
        "{\"input_format\":\"NDHWC\"}",
        "{\"log\":\"loud\"}",
        "{\"model\":5}",
        "{\"input_shape\":5}",
        "{\"input_shape\":[{\"name\":\"x\",\"dims\":[\"a\"]}]}",
        "{\"input_shape\":[{\"name\":\"x\",\"dims\":[1,1,1,1,1,1,1,1,1]}]}",
        "{\"input_shape\":[{\"name\":\"x\"}]}",
        "{\"dynamic_batch_size\":\"1,2\"}",
        "{\"dynamic_batch_size\":[1,\"2\"]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cp_convert_config c;
        struct cp_diag d;
        cp_diag_init(&d);
        enum cp_status st = cp_convert_config_from_json(&c, bad[i], &d);
        cr_assert_eq(st, CP_ERR_CORRUPT, "'%s' gave status %d (%s)", bad[i], st, d.msg);
        cr_assert_eq(d.status, CP_ERR_CORRUPT);
        cr_assert_neq(d.msg[0], '\0', "'%s' gave no message", bad[i]);
    }
}

Test(config, from_json_rejects_oversized_strings)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "{\"soc_version\":\"");
    for (int i = 0; i < 200; i++)
        cp_buf_putc(&b, 'c');
    cp_buf_puts(&b, "\"}");
    struct cp_convert_config c;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_from_json(&c, b.data, &d), CP_ERR_CORRUPT, "%s", d.msg);
    cp_buf_release(&b);
}

Test(config, id_is_stable_and_hex)
{
    struct cp_convert_config a, b;
    base_config(&a);
    set_ok(&a, "precision_mode", "allow_fp32_to_bf16");
    base_config(&b);
    set_ok(&b, "precision_mode", "allow_fp32_to_bf16");
    char ia[17], ib[17], ia2[17];
    id_of(&a, ia);
    id_of(&a, ia2);
    id_of(&b, ib);
    cr_assert_str_eq(ia, ia2);
    cr_assert_str_eq(ia, ib, "equal configs built separately must share an id");

    /* The id survives the trip through JSON (as stored in a .om). */
    char *text = json_of(&a);
    struct cp_convert_config back;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_from_json(&back, text, &d), CP_OK, "%s", d.msg);
    char iback[17];
    id_of(&back, iback);
    cr_assert_str_eq(iback, ia);
    free(text);
}

Test(config, id_changes_when_a_model_changing_knob_changes)
{
    static const char *const knobs[][2] = {
        {"precision_mode", "force_fp16"},      {"input_format", "ND"},
        {"buffer_optimize", "off_optimize"},   {"op_select_implmode", "high_precision"},
        {"fusion_switch_file", "fusion.json"}, {"input_shape", "x:2,3,224,224"},
        {"dynamic_batch_size", "1,2"},
    };
    struct cp_convert_config base;
    base_config(&base);
    set_ok(&base, "input_shape", "x:1,3,224,224");
    char ibase[17];
    id_of(&base, ibase);
    char seen[sizeof knobs / sizeof *knobs][17];
    for (size_t i = 0; i < sizeof knobs / sizeof *knobs; i++) {
        struct cp_convert_config c = base;
        set_ok(&c, knobs[i][0], knobs[i][1]);
        id_of(&c, seen[i]);
        cr_assert_str_neq(seen[i], ibase, "--%s=%s did not change the id", knobs[i][0],
                          knobs[i][1]);
        for (size_t k = 0; k < i; k++)
            cr_assert_str_neq(seen[i], seen[k], "--%s and --%s gave the same id", knobs[i][0],
                              knobs[k][0]);
    }
}

Test(config, id_ignores_model_output_and_log)
{
    struct cp_convert_config a;
    base_config(&a);
    set_ok(&a, "precision_mode", "allow_mix_precision");
    char ia[17];
    id_of(&a, ia);

    struct cp_convert_config c = a;
    set_ok(&c, "model", "/elsewhere/other.onnx");
    set_ok(&c, "output", "/tmp/somewhere/else");
    set_ok(&c, "log", "debug");
    char ic[17];
    id_of(&c, ic);
    cr_assert_str_eq(ic, ia);

    /* ...while the JSON form does record them. */
    char *ja = json_of(&a), *jc = json_of(&c);
    cr_assert_str_neq(ja, jc);
    cr_assert_not_null(strstr(jc, "/elsewhere/other.onnx"));
    free(ja);
    free(jc);
}

/* An empty dimension is a shape like any other (a batch of no samples). */
Test(config, input_shape_accepts_zero_sized_dimensions)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&c, "input_shape", "x:0,3", &d), CP_OK, "%s", d.msg);
    cr_assert_eq(c.input_shapes[0].rank, 2);
    cr_assert_eq(c.input_shapes[0].dims[0], 0);
    cr_assert_eq(c.input_shapes[0].dims[1], 3);
}
