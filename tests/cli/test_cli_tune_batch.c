/* `cannprof tune --batch`: every model listed is tuned however many there
 * are, models that share a file name (ONNX's own test layout: a/model.onnx,
 * b/model.onnx) get folders of their own and rows of their own in the
 * summary, and list lines of any length are read whole. Tune runs are
 * tiny (budget 1, 5 rounds) or fail at import; nothing here looks at
 * measured speed. */
#include "cli/cli_test.h"

#include <sys/stat.h>

TestSuite(cli_tune_batch, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 600);

/* `tune --batch SRC` with a tiny budget into <scratch>/out, with its own
 * knowledge base. */
static void run_batch(struct cp_run *r, const char *src)
{
    char *kb = cp_t_path("kb.sqlite");
    char *out = cp_t_path("out");
    cp_run_cli(r, "tune", "--batch", src, "--budget", "1", "--rounds", "5", "--warmup", "0",
               "--threads", "1", "--no-kb-strategies", "-q", "--kb", kb, "-o", out, NULL);
    free(kb);
    free(out);
}

/* The summary's table rows (lines starting "| " that are not the header). */
static size_t table_rows(const char *text)
{
    size_t n = 0;
    for (const char *l = text; l && *l;) {
        if (strncmp(l, "| ", 2) == 0 && strncmp(l, "| model |", 9) != 0)
            n++;
        const char *e = strchr(l, '\n');
        l = e ? e + 1 : NULL;
    }
    return n;
}

static void copy_example(const char *name, const char *to)
{
    char *src = cp_t_example(name);
    size_t len = 0;
    uint8_t *data = ct_read(src, &len);
    ct_write(to, data, len);
    free(data);
    free(src);
}

Test(cli_tune_batch, models_with_one_file_name_get_their_own_folders_and_rows)
{
    char *a = cp_t_path("a"), *b = cp_t_path("b");
    cr_assert_eq(mkdir(a, 0755), 0);
    cr_assert_eq(mkdir(b, 0755), 0);
    char *ma = cp_t_path("a/model.onnx"), *mb = cp_t_path("b/model.onnx");
    copy_example("resnet_tiny", ma);
    copy_example("launch_bound_tiny", mb);
    char *list = cp_t_path("list.txt");
    char *text = cp_t_fmt("%s\n%s\n", ma, mb);
    ct_write_text(list, text);
    struct cp_run r;
    run_batch(&r, list);
    cr_assert_eq(r.signal, 0, "%s", r.err);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    cr_assert_eq(table_rows(r.out), 2, "%s", r.out);
    const char *models[2] = {ma, mb}, *dirs[2] = {"out/a-model", "out/b-model"};
    for (int i = 0; i < 2; i++) {
        char *file = cp_t_fmt("%s/report.json", dirs[i]);
        char *report = cp_t_path(file);
        json_t *j = cp_t_json_file(report);
        cr_assert_not_null(j, "%s (see stderr)", report);
        /* each folder holds its own model's session ... */
        cr_assert_str_eq(json_string_value(json_object_get(j, "model")), models[i]);
        /* ... and the summary row shows that report's figures */
        double b0 = json_number_value(json_object_get(json_object_get(j, "baseline"), "median_ms"));
        char *row = cp_t_fmt("| %s | %.3f |", dirs[i] + 4, b0);
        cr_assert(strstr(r.out, row), "no row '%s' in: %s", row, r.out);
        free(row);
        json_decref(j);
        free(report);
        free(file);
    }
    cp_run_release(&r);
    free(text);
    free(list);
    free(ma);
    free(mb);
    free(a);
    free(b);
}

/* Models that fail at import are quick: 1025 of them, one past the 1024
 * the list used to stop at without a word. */
Test(cli_tune_batch, every_model_of_a_folder_is_tuned_however_many)
{
    char *dir = cp_t_path("many");
    cr_assert_eq(mkdir(dir, 0755), 0);
    for (int i = 0; i < 1025; i++) {
        char *name = cp_t_fmt("many/m%04d.onnx", i);
        char *path = cp_t_path(name);
        ct_write_text(path, "not onnx");
        free(path);
        free(name);
    }
    struct cp_run r;
    run_batch(&r, dir);
    cr_assert_eq(r.signal, 0, "%s", r.err);
    ct_assert_mentions(r.err, "1025 models", NULL);
    cr_assert_eq(table_rows(r.out), 1025);
    ct_assert_mentions(r.out, "| m0000 |", "| m1024 |", "not a valid ONNX model", NULL);
    cp_run_release(&r);
    free(dir);
}

/* A list line longer than any fixed buffer: a path of 3000 bytes
 * ("./././.../m.onnx"). It used to be cut into pieces, each read as a
 * model of its own. */
Test(cli_tune_batch, a_long_list_line_is_one_model)
{
    char *model = cp_t_path("m.onnx");
    ct_write_text(model, "not onnx");
    struct cp_buf line;
    cp_buf_init(&line);
    cp_buf_printf(&line, "%s/", cp_t_dir);
    for (int i = 0; i < 1500; i++)
        cp_buf_puts(&line, "./");
    cp_buf_puts(&line, "m.onnx\n");
    cr_assert_eq(cp_buf_status(&line), CP_OK);
    char *list = cp_t_path("list.txt");
    ct_write_text(list, line.data);
    struct cp_run r;
    run_batch(&r, list);
    cr_assert_eq(r.signal, 0, "%s", r.err);
    cr_assert_eq(table_rows(r.out), 1, "%s", r.out);
    ct_assert_mentions(r.out, "| m | - | - | - | error: ", NULL);
    cp_run_release(&r);
    cp_buf_release(&line);
    free(list);
    free(model);
}
