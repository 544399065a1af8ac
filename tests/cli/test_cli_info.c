/* `cannprof info` driven as a user would: the inputs, outputs, op
 * histogram, parameters, FLOPs and config of .onnx and CPU .om files as
 * text and JSON, the recorded command reproducing the .om byte for byte,
 * Ascend .om headers, and refusal of damaged, truncated, missing and
 * foreign files (exit 2 naming the file). (Dispatch, help and convert:
 * test_cli.c.) */
#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(cli_info, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

static const char *const k_models[] = {"sd_unet_tiny", "resnet_tiny", "transformer_encoder_op14",
                                       "transformer_encoder_op17", "nhwc_roundtrip"};
#define N_MODELS (sizeof k_models / sizeof *k_models)

/* ---- info --------------------------------------------------------------------------- */

Test(cli_info, info_of_every_om_and_onnx)
{
    for (size_t i = 0; i < N_MODELS; i++) {
        char *om = ct_convert_to(k_models[i], k_models[i], NULL);
        char *onnx = cp_t_example(k_models[i]);
        const char *files[] = {om, onnx};
        for (size_t f = 0; f < 2; f++) {
            struct cp_run r;
            cp_run_cli(&r, "info", files[f], NULL);
            cr_assert_eq(r.signal, 0, "%s: signal %d", files[f], r.signal);
            cr_assert_eq(r.exit_code, 0, "info %s: exit %d, stderr: %s", files[f], r.exit_code,
                         r.err);
            cr_assert(cp_t_has_line(r.out, "inputs:"), "%s: %s", files[f], r.out);
            cr_assert(cp_t_has_line(r.out, "outputs:"), "%s: %s", files[f], r.out);
            cr_assert(cp_t_has_line(r.out, "ops:"), "%s: %s", files[f], r.out);
            cr_assert(cp_t_has_line(r.out, "parameters:"), "%s: %s", files[f], r.out);
            cr_assert(cp_t_has_line(r.out, "FLOPs:"), "%s: %s", files[f], r.out);
            cr_assert_not_null(strstr(r.out, files[f]), "%s: output should name the file",
                               files[f]);
            cr_assert_eq(f == 0, cp_t_has_line(r.out, "config:"),
                         "%s: config block only for .om: %s", files[f], r.out);
            cp_run_release(&r);
        }
        free(om);
        free(onnx);
    }
}

static void check_sd_unet_io_and_ops(const char *out, const char *what, bool om)
{
    static const char *const io[][2] = {
        {"sample", "1x4x32x32"}, {"timestep", "1"}, {"encoder_hidden_states", "1x77x64"}};
    for (size_t i = 0; i < 3; i++) {
        char *v = cp_t_section_value(out, "inputs:", io[i][0]);
        cr_assert_not_null(v, "%s: no input %s in:\n%s", what, io[i][0], out);
        cr_assert_str_eq(cp_t_last_word(v), io[i][1], "%s: input %s: '%s'", what, io[i][0], v);
        cr_assert_not_null(strstr(v, "f32"), "%s: input %s: '%s'", what, io[i][0], v);
        free(v);
    }
    char *v = cp_t_section_value(out, "outputs:", "noise_pred");
    cr_assert_not_null(v, "%s: no output noise_pred in:\n%s", what, out);
    cr_assert_str_eq(cp_t_last_word(v), "1x4x32x32", "%s: noise_pred: '%s'", what, v);
    free(v);

    /* Counts from the ONNX file itself: 283 nodes of which 66 are Constant. */
    const char *ops_line = strstr(out, "\nops:");
    cr_assert_not_null(ops_line, "%s: no ops line:\n%s", what, out);
    cr_assert_eq(atol(ops_line + 5), 217, "%s: %.40s", what, ops_line + 1);
    static const struct {
        const char *op;
        const char *count;
    } hist[] = {{"MatMul", "28"}, {"Conv", "16"},
                {"Softmax", "4"}, {"Gemm", "5"},
                {"Resize", "1"},  {"LayerNormalization", "6"},
                {"Concat", "1"},  {"InstanceNormalization", "9"}};
    for (size_t i = 0; i < sizeof hist / sizeof *hist; i++) {
        char *c = cp_t_section_value(out, "ops:", hist[i].op);
        cr_assert_not_null(c, "%s: no %s in histogram:\n%s", what, hist[i].op, out);
        cr_assert_str_eq(c, hist[i].count, "%s: %s count '%s', expected %s", what, hist[i].op, c,
                         hist[i].count);
        free(c);
    }
    if (om) {
        char *k = cp_t_section_value(out, "ops:", "Constant");
        cr_assert_null(k,
                       "%s: Constant nodes should have become initializers, histogram "
                       "says %s",
                       what, k);
    }
}

Test(cli_info, info_of_sd_unet_om_shows_io_ops_params_flops_and_config)
{
    char *off = ct_switch_file("all_off.cfg", CT_EVERY_PASS_OFF);
    char *om = ct_convert_to("sd_unet_tiny", "sd", off, NULL);
    free(off);
    struct cp_run r;
    cp_run_cli(&r, "info", om, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    check_sd_unet_io_and_ops(r.out, "sd_unet_tiny.om", true);

    /* parameters: N (size) -- the README says 0.74 M parameters. */
    const char *p = strstr(r.out, "\nparameters: ");
    cr_assert_not_null(p, "stdout: %s", r.out);
    long long params = atoll(p + 13);
    cr_assert(params > 700000 && params < 800000, "parameters: %lld", params);
    const char *fl = strstr(r.out, "\nFLOPs:");
    cr_assert_not_null(fl);
    cr_assert_null(strstr(fl, "FLOPs:      0FLOP"), "FLOP estimate is zero: %s", fl);

    char *prec = cp_t_section_value(r.out, "config:", "precision_mode");
    cr_assert_not_null(prec, "no precision_mode in config block:\n%s", r.out);
    cr_assert_str_eq(prec, "force_fp32");
    char *soc = cp_t_section_value(r.out, "config:", "soc_version");
    cr_assert_not_null(soc);
    cr_assert_str_eq(soc, "cpu");
    char *cmd = cp_t_section_value(r.out, "config:", "command");
    cr_assert_not_null(cmd, "no command line:\n%s", r.out);
    cr_assert_eq(strncmp(cmd, "cannprof convert ", 17), 0, "command: %s", cmd);
    char *oflag = cp_t_fmt("--output=%s/sd", cp_t_dir);
    cr_assert_not_null(strstr(cmd, oflag), "command should record %s: %s", oflag, cmd);
    cr_assert_not_null(strstr(cmd, "--framework=5"), "command: %s", cmd);
    cr_assert_not_null(strstr(r.out, "source:"), "stdout: %s", r.out);
    cr_assert_not_null(strstr(r.out, "sd_unet_tiny.onnx"), "source path: %s", r.out);
    free(oflag);
    free(prec);
    free(soc);
    free(cmd);
    cp_run_release(&r);
    free(om);
}

Test(cli_info, info_of_sd_unet_onnx_shows_io_and_ops)
{
    char *onnx = cp_t_example("sd_unet_tiny");
    struct cp_run r;
    cp_run_cli(&r, "info", onnx, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    check_sd_unet_io_and_ops(r.out, "sd_unet_tiny.onnx", false);
    cr_assert_not_null(strstr(r.out, "ONNX"), "stdout: %s", r.out);
    cp_run_release(&r);
    free(onnx);
}

Test(cli_info, info_shows_non_default_config_and_its_command_reproduces_the_om)
{
    char *om = ct_convert_to("transformer_encoder_op17", "tf", "--buffer_optimize=off_optimize",
                             "--op_select_implmode=high_precision", NULL);
    struct cp_run r;
    cp_run_cli(&r, "info", om, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *buf = cp_t_section_value(r.out, "config:", "buffer_optimize");
    cr_assert_not_null(buf, "%s", r.out);
    cr_assert_str_eq(buf, "off_optimize");
    char *impl = cp_t_section_value(r.out, "config:", "op_select_implmode");
    cr_assert_not_null(impl, "%s", r.out);
    cr_assert_str_eq(impl, "high_precision");
    char *cmd = cp_t_section_value(r.out, "config:", "command");
    cr_assert_not_null(cmd, "%s", r.out);
    cr_assert_not_null(strstr(cmd, "--buffer_optimize=off_optimize"), "command: %s", cmd);
    cr_assert_not_null(strstr(cmd, "--op_select_implmode=high_precision"), "command: %s", cmd);
    cp_run_release(&r);

    /* Run the printed command (cannprof -> the binary under test) into the
     * same output path: it must reproduce the file byte for byte. */
    size_t len1 = 0, len2 = 0;
    uint8_t *first = ct_read(om, &len1);
    cr_assert_eq(unlink(om), 0);
    char *words[40];
    size_t n = 0;
    cr_assert(cp_t_shell_split(cmd, words, 39, &n), "cannot split: %s", cmd);
    cr_assert_geq(n, 3);
    cr_assert_str_eq(words[0], "cannprof");
    free(words[0]);
    words[0] = (char *)CP_CLI;
    words[n] = NULL;
    cp_run_argv(&r, words);
    cr_assert_eq(r.exit_code, 0, "rerun of '%s' failed: %s", cmd, r.err);
    cp_run_release(&r);
    uint8_t *second = ct_read(om, &len2);
    cr_assert_eq(len2, len1);
    cr_assert_eq(memcmp(first, second, len1), 0, "'%s' did not reproduce the .om", cmd);
    for (size_t i = 1; i < n; i++)
        free(words[i]);
    free(first);
    free(second);
    free(buf);
    free(impl);
    free(cmd);
    free(om);
}

/* Where a .om is written is not part of it: the same model and config
 * give the same bytes at any --output, and `info` names the file's own
 * place in the command that reproduces it. */
Test(cli_info, the_same_conversion_gives_the_same_bytes_at_any_output_path)
{
    char *one = ct_convert_to("resnet_tiny", "one", NULL);
    char *sub = cp_t_path("sub");
    cr_assert_eq(mkdir(sub, 0755), 0);
    char *two = ct_convert_to("resnet_tiny", "sub/two", NULL);
    cr_assert(ct_same_bytes(one, two), "%s and %s differ", one, two);
    const char *files[] = {one, two};
    const char *bases[] = {"one", "sub/two"};
    for (int i = 0; i < 2; i++) {
        struct cp_run r;
        cp_run_cli(&r, "info", files[i], NULL);
        cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
        char *cmd = cp_t_section_value(r.out, "config:", "command");
        cr_assert_not_null(cmd, "%s", r.out);
        char *oflag = cp_t_fmt("--output=%s/%s ", cp_t_dir, bases[i]);
        cr_assert_not_null(strstr(cmd, oflag), "command should say %s: %s", oflag, cmd);
        free(oflag);
        free(cmd);
        cp_run_release(&r);
    }
    free(sub);
    free(one);
    free(two);
}

static json_t *info_json(const char *path)
{
    struct cp_run r;
    cp_run_cli(&r, "info", "--json", path, NULL);
    cr_assert_eq(r.exit_code, 0, "info --json %s: stderr: %s", path, r.err);
    json_t *o = cp_t_json(r.out);
    cr_assert_not_null(o, "info --json %s is not JSON: %s", path, r.out);
    cr_assert(json_is_object(o));
    cp_run_release(&r);
    return o;
}

static void check_sd_unet_json_graph(json_t *o, const char *what)
{
    json_t *g = json_object_get(o, "graph");
    cr_assert(json_is_object(g), "%s: no graph object", what);
    json_t *ins = json_object_get(g, "inputs");
    cr_assert(json_is_array(ins), "%s", what);
    cr_assert_eq(json_array_size(ins), 3, "%s", what);
    static const char *const names[] = {"sample", "timestep", "encoder_hidden_states"};
    static const long long shapes[3][4] = {{1, 4, 32, 32}, {1}, {1, 77, 64}};
    static const size_t ranks[] = {4, 1, 3};
    for (size_t i = 0; i < 3; i++) {
        json_t *t = json_array_get(ins, i);
        cr_assert_str_eq(json_string_value(json_object_get(t, "name")), names[i], "%s", what);
        cr_assert_str_eq(json_string_value(json_object_get(t, "dtype")), "f32", "%s", what);
        json_t *s = json_object_get(t, "shape");
        cr_assert_eq(json_array_size(s), ranks[i], "%s: %s", what, names[i]);
        for (size_t k = 0; k < ranks[i]; k++)
            cr_assert_eq(json_integer_value(json_array_get(s, k)), shapes[i][k], "%s: %s[%zu]",
                         what, names[i], k);
    }
    json_t *outs = json_object_get(g, "outputs");
    cr_assert_eq(json_array_size(outs), 1, "%s", what);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(outs, 0), "name")),
                     "noise_pred");
    json_t *ops = json_object_get(g, "ops");
    cr_assert(json_is_object(ops), "%s", what);
    cr_assert_eq(json_integer_value(json_object_get(ops, "MatMul")), 28, "%s", what);
    cr_assert_eq(json_integer_value(json_object_get(ops, "Conv")), 16, "%s", what);
    cr_assert(json_integer_value(json_object_get(g, "parameters")) > 0, "%s", what);
    cr_assert(json_number_value(json_object_get(g, "flops")) > 0, "%s", what);
}

Test(cli_info, info_json_of_om_parses_and_has_graph_and_config)
{
    char *off = ct_switch_file("all_off.cfg", CT_EVERY_PASS_OFF);
    char *om = ct_convert_to("sd_unet_tiny", "sdj", off, NULL);
    free(off);
    json_t *o = info_json(om);
    cr_assert_str_eq(json_string_value(json_object_get(o, "kind")), "cpu_om");
    cr_assert_str_eq(json_string_value(json_object_get(o, "file")), om);
    check_sd_unet_json_graph(o, "om");
    cr_assert_null(
        json_object_get(json_object_get(json_object_get(o, "graph"), "ops"), "Constant"));
    json_t *cfg = json_object_get(o, "config");
    cr_assert(json_is_object(cfg));
    cr_assert_str_eq(json_string_value(json_object_get(cfg, "precision_mode")), "force_fp32");
    const char *cmd = json_string_value(json_object_get(o, "command"));
    cr_assert_not_null(cmd);
    cr_assert_eq(strncmp(cmd, "cannprof convert ", 17), 0, "command: %s", cmd);
    const char *hash = json_string_value(json_object_get(o, "source_hash"));
    cr_assert_not_null(hash);
    cr_assert_eq(strlen(hash), 32, "source_hash '%s'", hash);
    json_decref(o);
    free(om);
}

Test(cli_info, info_json_of_onnx_parses_and_has_graph)
{
    char *onnx = cp_t_example("sd_unet_tiny");
    json_t *o = info_json(onnx);
    cr_assert_str_eq(json_string_value(json_object_get(o, "kind")), "onnx");
    const char *hash = json_string_value(json_object_get(o, "hash"));
    cr_assert_not_null(hash);
    cr_assert_eq(strlen(hash), 32);
    check_sd_unet_json_graph(o, "onnx");
    json_decref(o);
    free(onnx);
}

Test(cli_info, info_source_hash_matches_onnx_hash)
{
    char *om = ct_convert_to("resnet_tiny", "rh", NULL);
    char *onnx = cp_t_example("resnet_tiny");
    json_t *a = info_json(om), *b = info_json(onnx);
    cr_assert_str_eq(json_string_value(json_object_get(a, "source_hash")),
                     json_string_value(json_object_get(b, "hash")));
    json_decref(a);
    json_decref(b);
    free(om);
    free(onnx);
}

/* ---- damaged and foreign files ---------------------------------------------------------- */

Test(cli_info, info_refuses_every_single_byte_corruption)
{
    char *om = ct_convert_to("sd_unet_tiny", "good", NULL);
    size_t len = 0;
    uint8_t *data = ct_read(om, &len);
    cr_assert_gt(len, 1000);
    char *bad = cp_t_path("corrupt.om");
    ct_write(bad, data, len);
    int fd = open(bad, O_RDWR);
    cr_assert_geq(fd, 0);

    size_t offsets[160];
    size_t n = 0;
    for (size_t i = 0; i < 64; i++)
        offsets[n++] = i;
    for (size_t k = 1; k <= 40; k++)
        offsets[n++] = 64 + (len - 65) * k / 41;
    offsets[n++] = len - 1;

    for (size_t i = 0; i < n; i++) {
        size_t off = offsets[i];
        uint8_t b = (uint8_t)(data[off] ^ 0xFF);
        cr_assert_eq(pwrite(fd, &b, 1, (off_t)off), 1);
        struct cp_run r;
        cp_run_cli(&r, "info", bad, NULL);
        cr_assert_eq(r.signal, 0, "byte %zu flipped: killed by signal %d; stderr: %s", off,
                     r.signal, r.err);
        cr_assert_eq(r.exit_code, 2, "byte %zu of %zu flipped: exit %d; stdout: %.300s stderr: %s",
                     off, len, r.exit_code, r.out, r.err);
        cr_assert_not_null(strstr(r.err, "corrupt.om"),
                           "byte %zu flipped: message should name the file: %s", off, r.err);
        cp_run_release(&r);
        cr_assert_eq(pwrite(fd, &data[off], 1, (off_t)off), 1);
    }
    close(fd);

    /* Restored, the copy reads fine again: the failures above were the flips. */
    struct cp_run r;
    cp_run_cli(&r, "info", bad, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);
    free(data);
    free(bad);
    free(om);
}

Test(cli_info, info_refuses_truncated_om)
{
    char *om = ct_convert_to("resnet_tiny", "full", NULL);
    size_t len = 0;
    uint8_t *data = ct_read(om, &len);
    size_t cuts[] = {0, 3, 4, 16, 39, 40, 127, 128, 129, len / 2, len - 64, len - 1};
    char *bad = cp_t_path("truncated.om");
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        ct_write(bad, data, cuts[i]);
        struct cp_run r;
        cp_run_cli(&r, "info", bad, NULL);
        cr_assert_eq(r.signal, 0, "cut at %zu: signal %d", cuts[i], r.signal);
        cr_assert_eq(r.exit_code, 2, "cut at %zu of %zu: exit %d, stderr: %s", cuts[i], len,
                     r.exit_code, r.err);
        cr_assert_not_null(strstr(r.err, "truncated.om"), "cut at %zu: stderr: %s", cuts[i], r.err);
        cp_run_release(&r);
    }
    /* Trailing garbage is damage too. */
    uint8_t *longer = malloc(len + 8);
    cr_assert_not_null(longer);
    memcpy(longer, data, len);
    memset(longer + len, 0x5A, 8);
    ct_write(bad, longer, len + 8);
    struct cp_run r;
    cp_run_cli(&r, "info", bad, NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 2, "8 bytes appended: exit %d, stderr: %s", r.exit_code, r.err);
    cp_run_release(&r);
    free(longer);
    free(bad);
    free(data);
    free(om);
}

Test(cli_info, info_of_missing_file_names_it)
{
    const char *names[] = {"missing.om", "missing.onnx", "missing"};
    for (size_t i = 0; i < 3; i++) {
        char *path = cp_t_path(names[i]);
        struct cp_run r;
        cp_run_cli(&r, "info", path, NULL);
        cr_assert_eq(r.exit_code, 2, "%s: exit %d, stderr: %s", path, r.exit_code, r.err);
        cr_assert_not_null(strstr(r.err, path), "stderr should name %s: %s", path, r.err);
        cp_run_release(&r);
        free(path);
    }
}

Test(cli_info, info_without_or_with_two_files_is_usage_error)
{
    struct cp_run r;
    cp_run_cli(&r, "info", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "FILE"), "stderr: %s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "info", "a.om", "b.om", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cp_run_release(&r);
}

Test(cli_info, info_refuses_files_that_are_not_models)
{
    char *txt = cp_t_path("notes.txt");
    const char text[] = "these are not the bytes of a model\n";
    ct_write(txt, text, sizeof text - 1);
    char *rnd = cp_t_path("random.om");
    uint8_t noise[4096];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof noise; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise[i] = (uint8_t)x;
    }
    ct_write(rnd, noise, sizeof noise);
    char *fake_onnx = cp_t_path("noise.onnx");
    ct_write(fake_onnx, noise, sizeof noise);
    char *dir_path = cp_t_path("folder.om");
    cr_assert_eq(mkdir(dir_path, 0755), 0);
    const char *files[] = {txt, rnd, fake_onnx, dir_path};
    for (size_t i = 0; i < 4; i++) {
        struct cp_run r;
        cp_run_cli(&r, "info", files[i], NULL);
        cr_assert_eq(r.signal, 0, "%s: signal %d", files[i], r.signal);
        cr_assert_eq(r.exit_code, 2, "%s: exit %d, stderr: %s", files[i], r.exit_code, r.err);
        cr_assert_not_null(strstr(r.err, files[i]), "stderr should name %s: %s", files[i], r.err);
        cp_run_release(&r);
    }
    free(txt);
    free(rnd);
    free(fake_onnx);
    free(dir_path);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* An Ascend .om as its declared header layout has it: magic, headsize,
 * version, checksum[64], length, four u8 flags, name[32], ... */
static char *write_fake_ascend(const char *name, size_t total)
{
    uint8_t *buf = calloc(1, total);
    cr_assert_not_null(buf);
    put_u32(buf + 0, 0x444F4D49u);
    put_u32(buf + 4, 256);
    put_u32(buf + 8, 0x10000000u);
    put_u32(buf + 76, (uint32_t)(total - 256));
    buf[82] = 1; /* modeltype: standard */
    memcpy(buf + 84, "fake_resnet50", 13);
    put_u32(buf + 156, 1); /* model_num */
    char *path = cp_t_path(name);
    ct_write(path, buf, total);
    free(buf);
    return path;
}

Test(cli_info, info_recognises_an_ascend_om)
{
    char *path = write_fake_ascend("ascend_model.om", 1024);
    struct cp_run r;
    cp_run_cli(&r, "info", path, NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.out, "Ascend"), "stdout: %s", r.out);
    cr_assert_not_null(strstr(r.out, "fake_resnet50"), "header name not shown: %s", r.out);
    cp_run_release(&r);

    json_t *o = info_json(path);
    cr_assert_str_eq(json_string_value(json_object_get(o, "kind")), "ascend_om");
    json_t *h = json_object_get(o, "header");
    cr_assert(json_is_object(h));
    cr_assert_eq(json_integer_value(json_object_get(h, "headsize")), 256);
    cr_assert_str_eq(json_string_value(json_object_get(h, "name")), "fake_resnet50");
    json_decref(o);
    free(path);
}

Test(cli_info, info_recognises_an_ascend_om_by_content_not_name)
{
    char *path = write_fake_ascend("model.bin", 512);
    struct cp_run r;
    cp_run_cli(&r, "info", path, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.out, "Ascend"), "stdout: %s", r.out);
    cp_run_release(&r);
    free(path);
}

Test(cli_info, info_refuses_a_truncated_ascend_header)
{
    char *full = write_fake_ascend("full_ascend.om", 256);
    size_t len = 0;
    uint8_t *data = ct_read(full, &len);
    char *path = cp_t_path("short_ascend.om");
    ct_write(path, data, 100);
    struct cp_run r;
    cp_run_cli(&r, "info", path, NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "short_ascend.om"), "stderr: %s", r.err);
    cp_run_release(&r);
    free(data);
    free(full);
    free(path);
}
