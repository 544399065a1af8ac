/* The cannprof binary, driven as a user would: dispatch, help, flag errors,
 * `convert` of every example model, `info` of .onnx, CPU .om and Ascend .om
 * files, determinism of the written .om, and refusal of damaged files. */
#include "core/core.h"
#include "onnx/onnx.pb-c.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- fixture and helpers ---------------------------------------------------- */

static char *g_dir; /* fresh scratch folder per test (each test is its own process) */

static void setup(void)
{
    g_dir = cp_scratch_dir();
    cr_assert_not_null(g_dir, "cannot create a scratch folder");
}

static void teardown(void)
{
    cp_scratch_remove(g_dir);
    free(g_dir);
    g_dir = NULL;
}

TestSuite(cli, .init = setup, .fini = teardown);

static const char *const k_models[] = {"sd_unet_tiny", "resnet_tiny", "transformer_encoder_op14",
                                       "transformer_encoder_op17", "nhwc_roundtrip"};
#define N_MODELS (sizeof k_models / sizeof *k_models)

/* printf into a fresh heap string; the test process is short-lived, but we
 * free anyway so sanitizer builds stay quiet. */
static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    struct cp_buf b;
    cp_buf_init(&b);
    va_list ap;
    va_start(ap, f);
    cp_buf_vprintf(&b, f, ap);
    va_end(ap);
    cr_assert_eq(cp_buf_status(&b), CP_OK);
    return cp_buf_steal(&b);
}

static char *model_path(const char *name)
{
    char buf[2048];
    return fmt("%s", cp_example_model(buf, sizeof buf, name));
}

static char *scratch(const char *name)
{
    return fmt("%s/%s", g_dir, name);
}

static uint8_t *read_all(const char *path, size_t *len)
{
    uint8_t *data = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_read(path, &data, len, &d), CP_OK, "%s", d.msg);
    return data;
}

static void write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

static size_t count_char(const char *s, char c)
{
    size_t n = 0;
    for (; s && *s; s++)
        n += *s == c;
    return n;
}

/* "--fusion_switch_file=<scratch>/all_off.cfg", a switch file turning every
 * conversion pass off: the .om then holds the model's own ops. */
static char *all_passes_off(void)
{
    char *path = scratch("all_off.cfg");
    write_all(path, "ALL:off\n", 8);
    char *flag = fmt("--fusion_switch_file=%s", path);
    free(path);
    return flag;
}

/* Convert examples/models/NAME.onnx to <scratch>/OUT(.om) with the flags
 * given after `out` (NULL-terminated, at most 8); asserts success and
 * returns the .om path. */
static char *convert_ok(const char *name, const char *out, ...)
{
    char *model = model_path(name);
    char *base = scratch(out);
    char *mflag = fmt("--model=%s", model);
    char *oflag = fmt("--output=%s", base);
    char *argv[16];
    size_t n = 0;
    argv[n++] = (char *)CP_CLI;
    argv[n++] = (char *)"convert";
    argv[n++] = mflag;
    argv[n++] = (char *)"--framework=5";
    argv[n++] = oflag;
    va_list ap;
    va_start(ap, out);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && n < 15)
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    struct cp_run r;
    cp_run_argv(&r, argv);
    cr_assert_eq(r.signal, 0, "convert %s died with signal %d; stderr: %s", name, r.signal, r.err);
    cr_assert_eq(r.exit_code, 0, "convert %s: exit %d; stderr: %s", name, r.exit_code, r.err);
    char *om = fmt("%s.om", base);
    cr_assert(cp_path_exists(om), "convert %s said ok but %s is missing; stdout: %s", name, om,
              r.out);
    cp_run_release(&r);
    free(model);
    free(base);
    free(mflag);
    free(oflag);
    return om;
}

/* In the indented lines that follow the line starting with `section`, the
 * first whose first word is `key`: the rest of that line, trimmed (heap
 * string), or NULL. */
static char *section_value(const char *text, const char *section, const char *key)
{
    size_t slen = strlen(section), klen = strlen(key);
    bool inside = false;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (!inside) {
            inside = strncmp(line, section, slen) == 0;
        } else if (line[0] != ' ') {
            break;
        } else {
            const char *t = line;
            while (*t == ' ')
                t++;
            if ((size_t)(t - line) + klen < n && strncmp(t, key, klen) == 0 && t[klen] == ' ') {
                const char *v = t + klen;
                while (*v == ' ')
                    v++;
                const char *ve = line + n;
                while (ve > v && (ve[-1] == ' ' || ve[-1] == '\r'))
                    ve--;
                return fmt("%.*s", (int)(ve - v), v);
            }
        }
        line = end ? end + 1 : NULL;
    }
    return NULL;
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

/* The last whitespace-separated word of s. */
static const char *last_word(const char *s)
{
    const char *w = strrchr(s, ' ');
    return w ? w + 1 : s;
}

/* Whether some line of `text` starts with `prefix`. */
static bool has_line_starting(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, prefix, n) == 0)
            return true;
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return false;
}

/* Split a command line into words as a POSIX shell would for the quoting
 * cannprof prints ('...', backslash). Words are heap strings. */
static size_t shell_split(const char *line, char **words, size_t max)
{
    size_t n = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        cr_assert_lt(n, max);
        struct cp_buf w;
        cp_buf_init(&w);
        while (*p && *p != ' ') {
            if (*p == '\'') {
                p++;
                while (*p && *p != '\'')
                    cp_buf_putc(&w, *p++);
                cr_assert_eq(*p, '\'', "unterminated quote in: %s", line);
                p++;
            } else if (*p == '\\' && p[1]) {
                cp_buf_putc(&w, p[1]);
                p += 2;
            } else {
                cp_buf_putc(&w, *p++);
            }
        }
        words[n++] = cp_buf_steal(&w);
    }
    return n;
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
    cr_assert(has_line_starting(r.out, "  convert "), "stdout: %s", r.out);
    cr_assert(has_line_starting(r.out, "  info "), "stdout: %s", r.out);
    cr_assert_not_null(strstr(r.out, "exit codes"), "stdout: %s", r.out);
    cp_run_release(&r);

    cp_run_cli(&r, "-h", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(has_line_starting(r.out, "  convert "), "stdout: %s", r.out);
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
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "did you mean 'convert'"), "stderr: %s", r.err);
    cp_run_release(&r);

    cp_run_cli(&r, "ifno", "x.om", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "did you mean 'info'"), "stderr: %s", r.err);
    cp_run_release(&r);
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
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "nosuchcommand"), "stderr: %s", r.err);
    cp_run_release(&r);
}

Test(cli, unknown_flag_suggests_nearest)
{
    struct cp_run r;
    cp_run_cli(&r, "convert", "--precison_mode=x", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "did you mean '--precision_mode'"), "stderr: %s", r.err);
    cp_run_release(&r);

    cp_run_cli(&r, "convert", "--input-shape", "x:1", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "did you mean '--input_shape'"), "stderr: %s", r.err);
    cp_run_release(&r);

    cp_run_cli(&r, "info", "--jsn", "x.om", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "did you mean '--json'"), "stderr: %s", r.err);
    cp_run_release(&r);
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
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "two dashes"), "stderr: %s", r.err);
    cp_run_release(&r);
}

Test(cli, flag_missing_value_is_usage_error)
{
    struct cp_run r;
    cp_run_cli(&r, "convert", "--model", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "--model needs a value"), "stderr: %s", r.err);
    cp_run_release(&r);

    cp_run_cli(&r, "convert", "--framework=5", "--output", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "--output"), "stderr: %s", r.err);
    cp_run_release(&r);
}

Test(cli, flag_given_twice_or_value_on_a_switch_is_usage_error)
{
    struct cp_run r;
    cp_run_cli(&r, "convert", "--model=a.onnx", "--model=b.onnx", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "more than once"), "stderr: %s", r.err);
    cp_run_release(&r);

    cp_run_cli(&r, "info", "--json=yes", "x.om", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "--json"), "stderr: %s", r.err);
    cp_run_release(&r);
}

/* ---- convert ---------------------------------------------------------------------- */

Test(cli, convert_every_example_model)
{
    for (size_t i = 0; i < N_MODELS; i++) {
        char *model = model_path(k_models[i]);
        char *base = scratch(k_models[i]);
        char *mflag = fmt("--model=%s", model);
        char *oflag = fmt("--output=%s", base);
        struct cp_run r;
        cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, NULL);
        cr_assert_eq(r.signal, 0, "%s: signal %d", k_models[i], r.signal);
        cr_assert_eq(r.exit_code, 0, "%s: exit %d, stderr: %s", k_models[i], r.exit_code, r.err);
        cr_assert_eq(count_char(r.out, '\n'), 1, "%s: expected a one-line summary, got: %s",
                     k_models[i], r.out);
        cr_assert_eq(r.out[strlen(r.out) - 1], '\n');
        char *om = fmt("%s.om", base);
        cr_assert_not_null(strstr(r.out, om), "%s: summary should name %s: %s", k_models[i], om,
                           r.out);
        cr_assert(cp_path_exists(om), "%s: %s missing", k_models[i], om);
        cr_assert_not(has_temporary(g_dir), "%s: temporary file left behind", k_models[i]);
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
    char *model = model_path("resnet_tiny");
    char *base = scratch("spaced");
    struct cp_run r;
    cp_run_cli(&r, "convert", "--model", model, "--framework", "5", "--output", base,
               "--precision_mode", "force_fp32", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *om = fmt("%s.om", base);
    cr_assert(cp_path_exists(om), "%s missing", om);
    cp_run_release(&r);

    char *base2 = scratch("short");
    cp_run_cli(&r, "convert", "--model", model, "--framework=5", "-o", base2, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *om2 = fmt("%s.om", base2);
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
    char *model = model_path("nhwc_roundtrip");
    char *base = scratch("nhwc");
    char *mflag = fmt("--model=%s", model);
    char *oflag = fmt("--output=%s", base);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    json_error_t err;
    json_t *o = json_loads(r.out, 0, &err);
    cr_assert_not_null(o, "not JSON (%s): %s", err.text, r.out);
    char *om = fmt("%s.om", base);
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
    char *om = convert_ok("sd_unet_tiny", "det", NULL);
    size_t len1 = 0, len2 = 0;
    uint8_t *first = read_all(om, &len1);
    cr_assert_gt(len1, 0);
    /* Keep the first result aside, convert again to the same path (the path
     * is part of the recorded config). */
    char *aside = scratch("first.om.bin");
    write_all(aside, first, len1);
    cr_assert_eq(unlink(om), 0);
    free(convert_ok("sd_unet_tiny", "det", NULL));
    uint8_t *second = read_all(om, &len2);
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
    free(convert_ok("sd_unet_tiny", "det", NULL));
    second = read_all(om, &len2);
    cr_assert_eq(len2, len1);
    cr_assert_eq(memcmp(first, second, len1), 0, "overwriting convert gave other bytes");
    cr_assert_not(has_temporary(g_dir), "temporary file left behind");
    free(first);
    free(second);
    free(aside);
    free(om);
}

Test(cli, convert_into_missing_folder_fails_naming_it)
{
    char *model = model_path("resnet_tiny");
    char *mflag = fmt("--model=%s", model);
    char *base = fmt("%s/no_such_folder/net", g_dir);
    char *oflag = fmt("--output=%s", base);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, base), "stderr should name %s: %s", base, r.err);
    char *folder = fmt("%s/no_such_folder", g_dir);
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
    char *model = model_path("resnet_tiny");
    char *mflag = fmt("--model=%s", model);
    char *oflag = fmt("--output=%s/x", g_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=3", oflag, NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "TensorFlow"), "stderr: %s", r.err);
    cp_run_release(&r);
    char *om = fmt("%s/x.om", g_dir);
    cr_assert_not(cp_path_exists(om));
    free(om);
    free(model);
    free(mflag);
    free(oflag);
}

Test(cli, convert_without_model_is_usage_error)
{
    char *oflag = fmt("--output=%s/x", g_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", "--framework=5", oflag, NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "--model"), "stderr: %s", r.err);
    cp_run_release(&r);

    cp_run_cli(&r, "convert", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "--model"), "stderr: %s", r.err);
    cp_run_release(&r);
    free(oflag);
}

Test(cli, convert_without_framework_or_output_is_usage_error)
{
    char *model = model_path("resnet_tiny");
    char *mflag = fmt("--model=%s", model);
    char *oflag = fmt("--output=%s/x", g_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, oflag, NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "--framework"), "stderr: %s", r.err);
    cp_run_release(&r);

    cp_run_cli(&r, "convert", mflag, "--framework=5", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "--output"), "stderr: %s", r.err);
    cp_run_release(&r);

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
    char *missing = fmt("%s/does_not_exist.onnx", g_dir);
    char *mflag = fmt("--model=%s", missing);
    char *oflag = fmt("--output=%s/x", g_dir);
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
    char *model = model_path("resnet_tiny");
    char *mflag = fmt("--model=%s", model);
    char *oflag = fmt("--output=%s/x", g_dir);
    char *omflag = fmt("--output=%s/x.om", g_dir);
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
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, ".om"), "stderr: %s", r.err);
    cp_run_release(&r);
    char *om = fmt("%s/x.om", g_dir);
    char *omom = fmt("%s/x.om.om", g_dir);
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
    char *model = model_path("resnet_tiny");
    char *mflag = fmt("--model=%s", model);
    char *oflag = fmt("--output=%s/x", g_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, "--input_shape=nosuchinput:1,3,64,64",
               NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "nosuchinput"), "stderr: %s", r.err);
    cp_run_release(&r);
    char *om = fmt("%s/x.om", g_dir);
    cr_assert_not(cp_path_exists(om));
    free(om);
    free(model);
    free(mflag);
    free(oflag);
}

Test(cli, convert_input_shape_matching_the_model_is_accepted)
{
    char *om =
        convert_ok("sd_unet_tiny", "shaped",
                   "--input_shape=sample:1,4,32,32;timestep:1;encoder_hidden_states:1,77,64", NULL);
    struct cp_run r;
    cp_run_cli(&r, "info", om, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *cmd = section_value(r.out, "config:", "command");
    cr_assert_not_null(cmd, "no command line in: %s", r.out);
    cr_assert_not_null(strstr(cmd, "sample:1,4,32,32;timestep:1;encoder_hidden_states:1,77,64"),
                       "command: %s", cmd);
    free(cmd);
    cp_run_release(&r);
    free(om);
}

Test(cli, convert_dynamic_batch_without_minus_one_is_refused)
{
    char *model = model_path("resnet_tiny");
    char *mflag = fmt("--model=%s", model);
    char *oflag = fmt("--output=%s/x", g_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, "--input_shape=input:1,3,64,64",
               "--dynamic_batch_size=1,2,4", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "-1"), "stderr: %s", r.err);
    cp_run_release(&r);

    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, "--dynamic_batch_size=1,2,4", NULL);
    cr_assert_eq(r.exit_code, 2, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "--input_shape"), "stderr: %s", r.err);
    cp_run_release(&r);
    free(model);
    free(mflag);
    free(oflag);
}

/* ---- a hand-built ONNX model ------------------------------------------------------ */

/* A chain x -> op[0] -> ... -> op[n-1] -> y of float [1,4] tensors, packed
 * with protobuf-c. OUT: *len. Caller frees. */
static uint8_t *build_chain_model(const char *const *ops, size_t n, size_t *len)
{
    Onnx__TensorShapeProto__Dimension d0 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    Onnx__TensorShapeProto__Dimension d1 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d0.dim_value = 1;
    d1.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d1.dim_value = 4;
    Onnx__TensorShapeProto__Dimension *dims[] = {&d0, &d1};
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 2;
    shape.dim = dims;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1;
    tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt.shape = &shape;
    Onnx__TypeProto type = ONNX__TYPE_PROTO__INIT;
    type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type.tensor_type = &tt;
    Onnx__ValueInfoProto vin = ONNX__VALUE_INFO_PROTO__INIT;
    vin.name = (char *)"x";
    vin.type = &type;
    Onnx__ValueInfoProto vout = ONNX__VALUE_INFO_PROTO__INIT;
    vout.name = (char *)"y";
    vout.type = &type;
    Onnx__ValueInfoProto *ins[] = {&vin};
    Onnx__ValueInfoProto *outs[] = {&vout};

    Onnx__NodeProto nodes[8];
    Onnx__NodeProto *node_ptrs[8];
    char out_names[8][32], node_names[8][32];
    char *in_ptr[8], *out_ptr[8];
    cr_assert_leq(n, 8);
    for (size_t i = 0; i < n; i++) {
        Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;
        nodes[i] = init;
        if (i + 1 == n)
            snprintf(out_names[i], 32, "y");
        else
            snprintf(out_names[i], 32, "t%zu", i);
        snprintf(node_names[i], 32, "node_%zu", i);
        in_ptr[i] = i == 0 ? (char *)"x" : out_names[i - 1];
        out_ptr[i] = out_names[i];
        nodes[i].n_input = 1;
        nodes[i].input = &in_ptr[i];
        nodes[i].n_output = 1;
        nodes[i].output = &out_ptr[i];
        nodes[i].name = node_names[i];
        nodes[i].op_type = (char *)ops[i];
        node_ptrs[i] = &nodes[i];
    }
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = (char *)"handmade";
    graph.n_node = n;
    graph.node = node_ptrs;
    graph.n_input = 1;
    graph.input = ins;
    graph.n_output = 1;
    graph.output = outs;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    opset.domain = (char *)"";
    opset.has_version = 1;
    opset.version = 17;
    Onnx__OperatorSetIdProto *opsets[] = {&opset};
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.n_opset_import = 1;
    m.opset_import = opsets;
    m.producer_name = (char *)"cannprof-test";
    m.graph = &graph;
    *len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(*len);
    cr_assert_not_null(buf);
    cr_assert_eq(onnx__model_proto__pack(&m, buf), *len);
    return buf;
}

static void convert_handmade(const char *const *ops, size_t n, struct cp_run *r, char **om_out)
{
    size_t len = 0;
    uint8_t *bytes = build_chain_model(ops, n, &len);
    char *path = scratch("handmade.onnx");
    write_all(path, bytes, len);
    free(bytes);
    char *mflag = fmt("--model=%s", path);
    char *oflag = fmt("--output=%s/handmade", g_dir);
    cp_run_cli(r, "convert", mflag, "--framework=5", oflag, NULL);
    *om_out = fmt("%s/handmade.om", g_dir);
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
    char *relu = section_value(r.out, "ops:", "Relu");
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

/* ---- info --------------------------------------------------------------------------- */

Test(cli, info_of_every_om_and_onnx)
{
    for (size_t i = 0; i < N_MODELS; i++) {
        char *om = convert_ok(k_models[i], k_models[i], NULL);
        char *onnx = model_path(k_models[i]);
        const char *files[] = {om, onnx};
        for (size_t f = 0; f < 2; f++) {
            struct cp_run r;
            cp_run_cli(&r, "info", files[f], NULL);
            cr_assert_eq(r.signal, 0, "%s: signal %d", files[f], r.signal);
            cr_assert_eq(r.exit_code, 0, "info %s: exit %d, stderr: %s", files[f], r.exit_code,
                         r.err);
            cr_assert(has_line_starting(r.out, "inputs:"), "%s: %s", files[f], r.out);
            cr_assert(has_line_starting(r.out, "outputs:"), "%s: %s", files[f], r.out);
            cr_assert(has_line_starting(r.out, "ops:"), "%s: %s", files[f], r.out);
            cr_assert(has_line_starting(r.out, "parameters:"), "%s: %s", files[f], r.out);
            cr_assert(has_line_starting(r.out, "FLOPs:"), "%s: %s", files[f], r.out);
            cr_assert_not_null(strstr(r.out, files[f]), "%s: output should name the file",
                               files[f]);
            cr_assert_eq(f == 0, has_line_starting(r.out, "config:"),
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
        char *v = section_value(out, "inputs:", io[i][0]);
        cr_assert_not_null(v, "%s: no input %s in:\n%s", what, io[i][0], out);
        cr_assert_str_eq(last_word(v), io[i][1], "%s: input %s: '%s'", what, io[i][0], v);
        cr_assert_not_null(strstr(v, "f32"), "%s: input %s: '%s'", what, io[i][0], v);
        free(v);
    }
    char *v = section_value(out, "outputs:", "noise_pred");
    cr_assert_not_null(v, "%s: no output noise_pred in:\n%s", what, out);
    cr_assert_str_eq(last_word(v), "1x4x32x32", "%s: noise_pred: '%s'", what, v);
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
        char *c = section_value(out, "ops:", hist[i].op);
        cr_assert_not_null(c, "%s: no %s in histogram:\n%s", what, hist[i].op, out);
        cr_assert_str_eq(c, hist[i].count, "%s: %s count '%s', expected %s", what, hist[i].op, c,
                         hist[i].count);
        free(c);
    }
    if (om) {
        char *k = section_value(out, "ops:", "Constant");
        cr_assert_null(k,
                       "%s: Constant nodes should have become initializers, histogram "
                       "says %s",
                       what, k);
    }
}

Test(cli, info_of_sd_unet_om_shows_io_ops_params_flops_and_config)
{
    char *off = all_passes_off();
    char *om = convert_ok("sd_unet_tiny", "sd", off, NULL);
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

    char *prec = section_value(r.out, "config:", "precision_mode");
    cr_assert_not_null(prec, "no precision_mode in config block:\n%s", r.out);
    cr_assert_str_eq(prec, "force_fp32");
    char *soc = section_value(r.out, "config:", "soc_version");
    cr_assert_not_null(soc);
    cr_assert_str_eq(soc, "cpu");
    char *cmd = section_value(r.out, "config:", "command");
    cr_assert_not_null(cmd, "no command line:\n%s", r.out);
    cr_assert_eq(strncmp(cmd, "cannprof convert ", 17), 0, "command: %s", cmd);
    char *oflag = fmt("--output=%s/sd", g_dir);
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

Test(cli, info_of_sd_unet_onnx_shows_io_and_ops)
{
    char *onnx = model_path("sd_unet_tiny");
    struct cp_run r;
    cp_run_cli(&r, "info", onnx, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    check_sd_unet_io_and_ops(r.out, "sd_unet_tiny.onnx", false);
    cr_assert_not_null(strstr(r.out, "ONNX"), "stdout: %s", r.out);
    cp_run_release(&r);
    free(onnx);
}

Test(cli, info_shows_non_default_config_and_its_command_reproduces_the_om)
{
    char *om = convert_ok("transformer_encoder_op17", "tf", "--buffer_optimize=off_optimize",
                          "--op_select_implmode=high_precision", NULL);
    struct cp_run r;
    cp_run_cli(&r, "info", om, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *buf = section_value(r.out, "config:", "buffer_optimize");
    cr_assert_not_null(buf, "%s", r.out);
    cr_assert_str_eq(buf, "off_optimize");
    char *impl = section_value(r.out, "config:", "op_select_implmode");
    cr_assert_not_null(impl, "%s", r.out);
    cr_assert_str_eq(impl, "high_precision");
    char *cmd = section_value(r.out, "config:", "command");
    cr_assert_not_null(cmd, "%s", r.out);
    cr_assert_not_null(strstr(cmd, "--buffer_optimize=off_optimize"), "command: %s", cmd);
    cr_assert_not_null(strstr(cmd, "--op_select_implmode=high_precision"), "command: %s", cmd);
    cp_run_release(&r);

    /* Run the printed command (cannprof -> the binary under test) into the
     * same output path: it must reproduce the file byte for byte. */
    size_t len1 = 0, len2 = 0;
    uint8_t *first = read_all(om, &len1);
    cr_assert_eq(unlink(om), 0);
    char *words[40];
    size_t n = shell_split(cmd, words, 39);
    cr_assert_geq(n, 3);
    cr_assert_str_eq(words[0], "cannprof");
    free(words[0]);
    words[0] = (char *)CP_CLI;
    words[n] = NULL;
    cp_run_argv(&r, words);
    cr_assert_eq(r.exit_code, 0, "rerun of '%s' failed: %s", cmd, r.err);
    cp_run_release(&r);
    uint8_t *second = read_all(om, &len2);
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

static json_t *info_json(const char *path)
{
    struct cp_run r;
    cp_run_cli(&r, "info", "--json", path, NULL);
    cr_assert_eq(r.exit_code, 0, "info --json %s: stderr: %s", path, r.err);
    json_error_t err;
    json_t *o = json_loads(r.out, 0, &err);
    cr_assert_not_null(o, "info --json %s is not JSON (%s, line %d): %s", path, err.text, err.line,
                       r.out);
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

Test(cli, info_json_of_om_parses_and_has_graph_and_config)
{
    char *off = all_passes_off();
    char *om = convert_ok("sd_unet_tiny", "sdj", off, NULL);
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

Test(cli, info_json_of_onnx_parses_and_has_graph)
{
    char *onnx = model_path("sd_unet_tiny");
    json_t *o = info_json(onnx);
    cr_assert_str_eq(json_string_value(json_object_get(o, "kind")), "onnx");
    const char *hash = json_string_value(json_object_get(o, "hash"));
    cr_assert_not_null(hash);
    cr_assert_eq(strlen(hash), 32);
    check_sd_unet_json_graph(o, "onnx");
    json_decref(o);
    free(onnx);
}

Test(cli, info_source_hash_matches_onnx_hash)
{
    char *om = convert_ok("resnet_tiny", "rh", NULL);
    char *onnx = model_path("resnet_tiny");
    json_t *a = info_json(om), *b = info_json(onnx);
    cr_assert_str_eq(json_string_value(json_object_get(a, "source_hash")),
                     json_string_value(json_object_get(b, "hash")));
    json_decref(a);
    json_decref(b);
    free(om);
    free(onnx);
}

/* ---- damaged and foreign files ---------------------------------------------------------- */

Test(cli, info_refuses_every_single_byte_corruption)
{
    char *om = convert_ok("sd_unet_tiny", "good", NULL);
    size_t len = 0;
    uint8_t *data = read_all(om, &len);
    cr_assert_gt(len, 1000);
    char *bad = scratch("corrupt.om");
    write_all(bad, data, len);
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

Test(cli, info_refuses_truncated_om)
{
    char *om = convert_ok("resnet_tiny", "full", NULL);
    size_t len = 0;
    uint8_t *data = read_all(om, &len);
    size_t cuts[] = {0, 3, 4, 16, 39, 40, 127, 128, 129, len / 2, len - 64, len - 1};
    char *bad = scratch("truncated.om");
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        write_all(bad, data, cuts[i]);
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
    write_all(bad, longer, len + 8);
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

Test(cli, info_of_missing_file_names_it)
{
    const char *names[] = {"missing.om", "missing.onnx", "missing"};
    for (size_t i = 0; i < 3; i++) {
        char *path = scratch(names[i]);
        struct cp_run r;
        cp_run_cli(&r, "info", path, NULL);
        cr_assert_eq(r.exit_code, 2, "%s: exit %d, stderr: %s", path, r.exit_code, r.err);
        cr_assert_not_null(strstr(r.err, path), "stderr should name %s: %s", path, r.err);
        cp_run_release(&r);
        free(path);
    }
}

Test(cli, info_without_or_with_two_files_is_usage_error)
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

Test(cli, info_refuses_files_that_are_not_models)
{
    char *txt = scratch("notes.txt");
    const char text[] = "these are not the bytes of a model\n";
    write_all(txt, text, sizeof text - 1);
    char *rnd = scratch("random.om");
    uint8_t noise[4096];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof noise; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise[i] = (uint8_t)x;
    }
    write_all(rnd, noise, sizeof noise);
    char *fake_onnx = scratch("noise.onnx");
    write_all(fake_onnx, noise, sizeof noise);
    char *dir_path = scratch("folder.om");
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
    char *path = scratch(name);
    write_all(path, buf, total);
    free(buf);
    return path;
}

Test(cli, info_recognises_an_ascend_om)
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

Test(cli, info_recognises_an_ascend_om_by_content_not_name)
{
    char *path = write_fake_ascend("model.bin", 512);
    struct cp_run r;
    cp_run_cli(&r, "info", path, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.out, "Ascend"), "stdout: %s", r.out);
    cp_run_release(&r);
    free(path);
}

Test(cli, info_refuses_a_truncated_ascend_header)
{
    char *full = write_fake_ascend("full_ascend.om", 256);
    size_t len = 0;
    uint8_t *data = read_all(full, &len);
    char *path = scratch("short_ascend.om");
    write_all(path, data, 100);
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
