/* The cannprof binary, driven as a user would: dispatch, help, flag errors,
 * `convert` of every example model and of hand-built ones, determinism of
 * the written .om, and refusal of bad flags, values and models. (`info`:
 * test_cli_info.c.) */
#include "core/core.h"
#include "support/cli.h"
#include "support/onnx_model.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- fixture and helpers ---------------------------------------------------- */

TestSuite(cli, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

static const char *const k_models[] = {"sd_unet_tiny", "resnet_tiny", "transformer_encoder_op14",
                                       "transformer_encoder_op17", "nhwc_roundtrip"};
#define N_MODELS (sizeof k_models / sizeof *k_models)

static size_t count_char(const char *s, char c)
{
    size_t n = 0;
    for (; s && *s; s++)
        n += *s == c;
    return n;
}

/* The command failed with exit 2 and its standard error holds `needle`;
 * releases `r`. */
static void expect_exit_2(struct cp_run *r, const char *needle)
{
    cr_assert_eq(r->exit_code, 2, "stderr: %s", r->err);
    cr_assert_not_null(strstr(r->err, needle), "stderr: %s", r->err);
    cp_run_release(r);
}

/* Whether `dir` holds a file whose name contains ".tmp". */
static bool has_temporary(const char *dir)
{
    DIR *dp = opendir(dir);
    cr_assert_not_null(dp);
    bool found = false;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL)
        if (strstr(e->d_name, ".tmp"))
            found = true;
    closedir(dp);
    return found;
}

/* ---- dispatch, version, help ---------------------------------------------------- */

Test(cli, version_prints_name_and_version)
{
    struct cp_run r;
    cp_run_cli(&r, "--version", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "cannprof " CP_VERSION_STRING "\n");
    cp_run_release(&r);
}

Test(cli, help_lists_every_command_on_stdout)
{
    struct cp_run r;
    cp_run_cli(&r, "--help", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(cp_t_has_line(r.out, "  convert "), "stdout: %s", r.out);
    cr_assert(cp_t_has_line(r.out, "  info "), "stdout: %s", r.out);
    cr_assert_not_null(strstr(r.out, "exit codes"), "stdout: %s", r.out);
    cp_run_release(&r);

    cp_run_cli(&r, "-h", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(cp_t_has_line(r.out, "  convert "), "stdout: %s", r.out);
    cp_run_release(&r);
}

Test(cli, no_arguments_is_usage_error_on_stderr)
{
    struct cp_run r;
    cp_run_cli(&r, NULL);
    cr_assert_eq(r.exit_code, 2, "stdout: %s", r.out);
    cr_assert_not_null(strstr(r.err, "usage"), "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "");
    cp_run_release(&r);
}

Test(cli, convert_help_shows_atc_flags)
{
    static const char *const flags[] = {"--model=",
                                        "--framework=",
                                        "--output=",
                                        "--input_shape=",
                                        "--input_format=",
                                        "--precision_mode=",
                                        "--dynamic_batch_size=",
                                        "--buffer_optimize=",
                                        "--op_select_implmode=",
                                        "--fusion_switch_file=",
                                        "--soc_version=",
                                        "--log=",
                                        "--json",
                                        "--help"};
    const char *forms[][2] = {{"convert", "--help"}, {"convert", "-h"}, {"help", "convert"}};
    for (size_t f = 0; f < 3; f++) {
        struct cp_run r;
        cp_run_cli(&r, forms[f][0], forms[f][1], NULL);
        cr_assert_eq(r.exit_code, 0, "%s %s: stderr: %s", forms[f][0], forms[f][1], r.err);
        for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
            cr_assert_not_null(strstr(r.out, flags[i]), "%s %s: help lacks %s:\n%s", forms[f][0],
                               forms[f][1], flags[i], r.out);
        cp_run_release(&r);
    }
}

Test(cli, info_help_shows_its_flags)
{
    const char *forms[][2] = {{"info", "--help"}, {"help", "info"}};
    for (size_t f = 0; f < 2; f++) {
        struct cp_run r;
        cp_run_cli(&r, forms[f][0], forms[f][1], NULL);
        cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
        cr_assert_not_null(strstr(r.out, "--json"), "help: %s", r.out);
        cr_assert_not_null(strstr(r.out, "usage: cannprof info"), "help: %s", r.out);
        cp_run_release(&r);
    }
}

Test(cli, unknown_command_suggests_nearest)
{
    struct cp_run r;
    cp_run_cli(&r, "conver", NULL);
    expect_exit_2(&r, "did you mean 'convert'");

    cp_run_cli(&r, "ifno", "x.om", NULL);
    expect_exit_2(&r, "did you mean 'info'");
}

Test(cli, unknown_command_far_from_any_gets_no_suggestion)
{
    struct cp_run r;
    cp_run_cli(&r, "xyzzyplugh", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "xyzzyplugh"), "stderr: %s", r.err);
    cr_assert_null(strstr(r.err, "did you mean"), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "--help"), "stderr: %s", r.err);
    cp_run_release(&r);

    cp_run_cli(&r, "help", "nosuchcommand", NULL);
    expect_exit_2(&r, "nosuchcommand");
}

Test(cli, unknown_flag_suggests_nearest)
{
    struct cp_run r;
    cp_run_cli(&r, "convert", "--precison_mode=x", NULL);
    expect_exit_2(&r, "did you mean '--precision_mode'");

    cp_run_cli(&r, "convert", "--input-shape", "x:1", NULL);
    expect_exit_2(&r, "did you mean '--input_shape'");

    cp_run_cli(&r, "info", "--jsn", "x.om", NULL);
    expect_exit_2(&r, "did you mean '--json'");
}

Test(cli, unknown_flag_far_from_any_points_to_help)
{
    struct cp_run r;
    cp_run_cli(&r, "convert", "--zzzzzzzzzzzzzzzzzzzzzzz=1", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_null(strstr(r.err, "did you mean"), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "cannprof convert --help"), "stderr: %s", r.err);
    cp_run_release(&r);

    cp_run_cli(&r, "convert", "-precision_mode=force_fp32", NULL);
    expect_exit_2(&r, "two dashes");
}

Test(cli, flag_missing_value_is_usage_error)
{
    struct cp_run r;
    cp_run_cli(&r, "convert", "--model", NULL);
    expect_exit_2(&r, "--model needs a value");

    cp_run_cli(&r, "convert", "--framework=5", "--output", NULL);
    expect_exit_2(&r, "--output");
}

Test(cli, flag_given_twice_or_value_on_a_switch_is_usage_error)
{
    struct cp_run r;
    cp_run_cli(&r, "convert", "--model=a.onnx", "--model=b.onnx", NULL);
    expect_exit_2(&r, "more than once");

    cp_run_cli(&r, "info", "--json=yes", "x.om", NULL);
    expect_exit_2(&r, "--json");
}

/* ---- convert ---------------------------------------------------------------------- */

Test(cli, convert_every_example_model)
{
    for (size_t i = 0; i < N_MODELS; i++) {
        char *model = cp_t_example(k_models[i]);
        char *base = cp_t_path(k_models[i]);
        char *mflag = cp_t_fmt("--model=%s", model);
        char *oflag = cp_t_fmt("--output=%s", base);
        struct cp_run r;
        cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, NULL);
        cr_assert_eq(r.signal, 0, "%s: signal %d", k_models[i], r.signal);
        cr_assert_eq(r.exit_code, 0, "%s: exit %d, stderr: %s", k_models[i], r.exit_code, r.err);
        cr_assert_eq(count_char(r.out, '\n'), 1, "%s: expected a one-line summary, got: %s",
                     k_models[i], r.out);
        cr_assert_eq(r.out[strlen(r.out) - 1], '\n');
        char *om = cp_t_fmt("%s.om", base);
        cr_assert_not_null(strstr(r.out, om), "%s: summary should name %s: %s", k_models[i], om,
                           r.out);
        cr_assert(cp_path_exists(om), "%s: %s missing", k_models[i], om);
        cr_assert_not(has_temporary(cp_t_dir), "%s: temporary file left behind", k_models[i]);
        free(om);
        free(model);
        free(base);
        free(mflag);
        free(oflag);
        cp_run_release(&r);
    }
}

Test(cli, convert_accepts_space_separated_values_and_short_output)
{
    char *model = cp_t_example("resnet_tiny");
    char *base = cp_t_path("spaced");
    struct cp_run r;
    cp_run_cli(&r, "convert", "--model", model, "--framework", "5", "--output", base,
               "--precision_mode", "force_fp32", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *om = cp_t_fmt("%s.om", base);
    cr_assert(cp_path_exists(om), "%s missing", om);
    cp_run_release(&r);

    char *base2 = cp_t_path("short");
    cp_run_cli(&r, "convert", "--model", model, "--framework=5", "-o", base2, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *om2 = cp_t_fmt("%s.om", base2);
    cr_assert(cp_path_exists(om2), "%s missing", om2);
    cp_run_release(&r);

    free(om);
    free(om2);
    free(base);
    free(base2);
    free(model);
}

Test(cli, convert_json_summary_parses)
{
    char *model = cp_t_example("nhwc_roundtrip");
    char *base = cp_t_path("nhwc");
    char *mflag = cp_t_fmt("--model=%s", model);
    char *oflag = cp_t_fmt("--output=%s", base);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    json_t *o = cp_t_json(r.out);
    cr_assert_not_null(o, "not JSON: %s", r.out);
    char *om = cp_t_fmt("%s.om", base);
    cr_assert_str_eq(json_string_value(json_object_get(o, "om")), om);
    cr_assert(json_integer_value(json_object_get(o, "bytes")) > 0);
    cr_assert_eq(strlen(json_string_value(json_object_get(o, "config_id"))), 16);
    json_t *cfg = json_object_get(o, "config");
    cr_assert(json_is_object(cfg), "%s", r.out);
    cr_assert_str_eq(json_string_value(json_object_get(cfg, "precision_mode")), "force_fp32");
    json_decref(o);
    cp_run_release(&r);
    free(om);
    free(model);
    free(base);
    free(mflag);
    free(oflag);
}

Test(cli, convert_is_deterministic)
{
    char *om = ct_convert_to("sd_unet_tiny", "det", NULL);
    size_t len1 = 0, len2 = 0;
    uint8_t *first = ct_read(om, &len1);
    cr_assert_gt(len1, 0);
    /* Keep the first result aside, convert again to the same path (the path
     * is part of the recorded config). */
    char *aside = cp_t_path("first.om.bin");
    ct_write(aside, first, len1);
    cr_assert_eq(unlink(om), 0);
    free(ct_convert_to("sd_unet_tiny", "det", NULL));
    uint8_t *second = ct_read(om, &len2);
    cr_assert_eq(len2, len1, "sizes differ: %zu vs %zu", len1, len2);
    size_t first_diff = len1;
    for (size_t i = 0; i < len1; i++)
        if (first[i] != second[i]) {
            first_diff = i;
            break;
        }
    cr_assert_eq(first_diff, len1, "the two .om files differ first at byte %zu", first_diff);
    free(second);

    /* Converting over an existing .om replaces it with the same bytes. */
    free(ct_convert_to("sd_unet_tiny", "det", NULL));
    second = ct_read(om, &len2);
    cr_assert_eq(len2, len1);
    cr_assert_eq(memcmp(first, second, len1), 0, "overwriting convert gave other bytes");
    cr_assert_not(has_temporary(cp_t_dir), "temporary file left behind");
    free(first);
    free(second);
    free(aside);
    free(om);
}

Test(cli, convert_into_missing_folder_fails_naming_it)
{
    char *model = cp_t_example("resnet_tiny");
    char *mflag = cp_t_fmt("--model=%s", model);
    char *base = cp_t_path("no_such_folder/net");
    char *oflag = cp_t_fmt("--output=%s", base);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, NULL);
    cr_assert_eq(r.signal, 0);
    /* an output that cannot be written is the environment's failure */
    cr_assert_eq(r.exit_code, 3, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, base), "stderr should name %s: %s", base, r.err);
    char *folder = cp_t_path("no_such_folder");
    cr_assert_not(cp_path_exists(folder), "the folder must not be created");
    cp_run_release(&r);
    free(folder);
    free(model);
    free(mflag);
    free(base);
    free(oflag);
}

Test(cli, convert_refuses_other_frameworks)
{
    char *model = cp_t_example("resnet_tiny");
    char *mflag = cp_t_fmt("--model=%s", model);
    char *oflag = cp_t_fmt("--output=%s/x", cp_t_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=3", oflag, NULL);
    expect_exit_2(&r, "TensorFlow");
    char *om = cp_t_path("x.om");
    cr_assert_not(cp_path_exists(om));
    free(om);
    free(model);
    free(mflag);
    free(oflag);
}

Test(cli, convert_without_model_is_usage_error)
{
    char *oflag = cp_t_fmt("--output=%s/x", cp_t_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", "--framework=5", oflag, NULL);
    expect_exit_2(&r, "--model");

    cp_run_cli(&r, "convert", NULL);
    expect_exit_2(&r, "--model");
    free(oflag);
}

Test(cli, convert_without_framework_or_output_is_usage_error)
{
    char *model = cp_t_example("resnet_tiny");
    char *mflag = cp_t_fmt("--model=%s", model);
    char *oflag = cp_t_fmt("--output=%s/x", cp_t_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, oflag, NULL);
    expect_exit_2(&r, "--framework");

    cp_run_cli(&r, "convert", mflag, "--framework=5", NULL);
    expect_exit_2(&r, "--output");

    cp_run_cli(&r, "convert", model, "--framework=5", oflag, NULL);
    cr_assert_eq(r.exit_code, 2, "positional model should be refused; stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "--model"), "stderr: %s", r.err);
    cp_run_release(&r);
    free(model);
    free(mflag);
    free(oflag);
}

Test(cli, convert_of_missing_model_names_the_path)
{
    char *missing = cp_t_path("does_not_exist.onnx");
    char *mflag = cp_t_fmt("--model=%s", missing);
    char *oflag = cp_t_fmt("--output=%s/x", cp_t_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, missing), "stderr should name %s: %s", missing, r.err);
    cp_run_release(&r);
    free(missing);
    free(mflag);
    free(oflag);
}

Test(cli, convert_refuses_bad_atc_values)
{
    char *model = cp_t_example("resnet_tiny");
    char *mflag = cp_t_fmt("--model=%s", model);
    char *oflag = cp_t_fmt("--output=%s/x", cp_t_dir);
    char *omflag = cp_t_fmt("--output=%s/x.om", cp_t_dir);
    struct {
        const char *flag;
        const char *needle;
    } cases[] = {
        {"--precision_mode=fp32", "allow_mix_precision_bf16"},
        {"--soc_version=Ascend910B", "Ascend910B"},
        {"--input_shape=input:1~8,3,64,64", "1~8"},
        {"--input_format=NDHWC", "NCDHW"},
        {"--dynamic_batch_size=4", "dynamic_batch_size"},
        {"--log=loud", "warning"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct cp_run r;
        cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, cases[i].flag, NULL);
        cr_assert_eq(r.exit_code, 2, "%s: exit %d, stderr: %s", cases[i].flag, r.exit_code, r.err);
        cr_assert_not_null(strstr(r.err, cases[i].needle), "%s: stderr lacks '%s': %s",
                           cases[i].flag, cases[i].needle, r.err);
        cr_assert_not_null(strstr(r.err, "cannprof convert: error:"), "stderr: %s", r.err);
        cp_run_release(&r);
    }
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", omflag, NULL);
    expect_exit_2(&r, ".om");
    char *om = cp_t_path("x.om");
    char *omom = cp_t_path("x.om.om");
    cr_assert_not(cp_path_exists(om));
    cr_assert_not(cp_path_exists(omom));
    free(om);
    free(omom);
    free(model);
    free(mflag);
    free(oflag);
    free(omflag);
}

Test(cli, convert_input_shape_naming_unknown_input_is_refused)
{
    char *model = cp_t_example("resnet_tiny");
    char *mflag = cp_t_fmt("--model=%s", model);
    char *oflag = cp_t_fmt("--output=%s/x", cp_t_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, "--input_shape=nosuchinput:1,3,64,64",
               NULL);
    expect_exit_2(&r, "nosuchinput");
    char *om = cp_t_path("x.om");
    cr_assert_not(cp_path_exists(om));
    free(om);
    free(model);
    free(mflag);
    free(oflag);
}

Test(cli, convert_input_shape_matching_the_model_is_accepted)
{
    char *om = ct_convert_to(
        "sd_unet_tiny", "shaped",
        "--input_shape=sample:1,4,32,32;timestep:1;encoder_hidden_states:1,77,64", NULL);
    struct cp_run r;
    cp_run_cli(&r, "info", om, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *cmd = cp_t_section_value(r.out, "config:", "command");
    cr_assert_not_null(cmd, "no command line in: %s", r.out);
    cr_assert_not_null(strstr(cmd, "sample:1,4,32,32;timestep:1;encoder_hidden_states:1,77,64"),
                       "command: %s", cmd);
    free(cmd);
    cp_run_release(&r);
    free(om);
}

Test(cli, convert_dynamic_batch_without_minus_one_is_refused)
{
    char *model = cp_t_example("resnet_tiny");
    char *mflag = cp_t_fmt("--model=%s", model);
    char *oflag = cp_t_fmt("--output=%s/x", cp_t_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, "--input_shape=input:1,3,64,64",
               "--dynamic_batch_size=1,2,4", NULL);
    expect_exit_2(&r, "-1");

    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, "--dynamic_batch_size=1,2,4", NULL);
    expect_exit_2(&r, "--input_shape");
    free(model);
    free(mflag);
    free(oflag);
}

/* ---- a hand-built ONNX model ------------------------------------------------------ */

static void convert_handmade(const char *const *ops, size_t n, struct cp_run *r, char **om_out)
{
    size_t len = 0;
    uint8_t *bytes = cp_t_onnx_chain(ops, n, 0, &len);
    cr_assert_not_null(bytes);
    char *path = cp_t_path("handmade.onnx");
    ct_write(path, bytes, len);
    free(bytes);
    char *mflag = cp_t_fmt("--model=%s", path);
    char *oflag = cp_t_fmt("--output=%s/handmade", cp_t_dir);
    cp_run_cli(r, "convert", mflag, "--framework=5", oflag, NULL);
    *om_out = cp_t_path("handmade.om");
    free(path);
    free(mflag);
    free(oflag);
}

Test(cli, convert_of_handmade_supported_model_succeeds)
{
    /* Checks the model builder itself, so the unsupported-op test below
     * fails for the right reason. */
    static const char *const ops[] = {"Relu", "Sigmoid"};
    struct cp_run r;
    char *om = NULL;
    convert_handmade(ops, 2, &r, &om);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(cp_path_exists(om));
    cp_run_release(&r);

    cp_run_cli(&r, "info", om, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *relu = cp_t_section_value(r.out, "ops:", "Relu");
    cr_assert_not_null(relu, "stdout: %s", r.out);
    cr_assert_str_eq(relu, "1");
    free(relu);
    cp_run_release(&r);
    free(om);
}

Test(cli, convert_lists_every_unsupported_op_at_once)
{
    static const char *const ops[] = {"Foo", "Bar", "Bar"};
    struct cp_run r;
    char *om = NULL;
    convert_handmade(ops, 3, &r, &om);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "unsupported ops: Bar (2 nodes), Foo (1 node)"), "stderr: %s",
                       r.err);
    cr_assert_not_null(strstr(r.err, "handmade.onnx"), "stderr should name the model: %s", r.err);
    cr_assert_not(cp_path_exists(om), "no .om may be written on failure");
    cp_run_release(&r);
    free(om);
}
