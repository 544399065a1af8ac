/* The model list of `tune --batch` (cp_tune_batch_list): every model gets a
 * folder of its own inside the output folder, never the output folder
 * itself or its parent; a listed folder is refused by name. This is what
 * fuzz/fuzz_batch_list.c checks of every list: "." was a folder name, the
 * stem of a listed ".." and of a file named "..onnx". */
#include "support/cli.h"
#include "tuner/tuner.h"

#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

TestSuite(tune_batch_list, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

static char *touch(const char *name)
{
    char *p = cp_t_path(name);
    cr_assert(cp_t_write_file(p, "", 0), "(see stderr)");
    return p;
}

Test(tune_batch_list, a_file_named_like_a_dot_folder_gets_a_folder_of_its_own)
{
    char *dots = touch("..onnx"), *dot = touch(".onnx"), *plain = touch("m.onnx");
    char *list = cp_t_path("list.txt");
    char *text = cp_t_fmt("%s\n%s\n%s\n", dots, dot, plain);
    cr_assert(cp_t_write_file(list, text, strlen(text)), "(see stderr)");
    struct cp_tune_batch b;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune_batch_list(list, &b, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(b.n, 3);
    for (size_t i = 0; i < b.n; i++) {
        cr_expect(strcmp(b.dirs[i], ".") != 0 && strcmp(b.dirs[i], "..") != 0 && b.dirs[i][0],
                  "%s: folder '%s'", b.models[i], b.dirs[i]);
        for (size_t j = 0; j < i; j++)
            cr_expect_str_neq(b.dirs[i], b.dirs[j]);
    }
    cp_tune_batch_release(&b);
    free(text);
    free(list);
    free(dots);
    free(dot);
    free(plain);
}

Test(tune_batch_list, a_listed_folder_is_refused_by_name)
{
    char *sub = cp_t_path("models");
    cr_assert_eq(mkdir(sub, 0755), 0);
    char *plain = touch("m.onnx");
    char *list = cp_t_path("list.txt");
    char *text = cp_t_fmt("%s\n..\n", plain);
    cr_assert(cp_t_write_file(list, text, strlen(text)), "(see stderr)");
    struct cp_tune_batch b;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_tune_batch_list(list, &b, &d);
    cr_assert_eq(st, CP_ERR_INVALID, "%s", d.msg);
    cr_expect_eq(cp_status_exit_code(st), 2);
    cr_expect(strstr(d.msg, "list.txt:2: ..: a folder, not a model file"), "%s", d.msg);
    cr_expect_eq(b.n, 0);
    /* the folder itself is still a batch source */
    cp_diag_init(&d);
    char *in_sub = cp_t_path("models/x.onnx");
    cr_assert(cp_t_write_file(in_sub, "", 0), "(see stderr)");
    cr_assert_eq(cp_tune_batch_list(sub, &b, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(b.n, 1);
    cr_expect_str_eq(b.dirs[0], "x");
    cp_tune_batch_release(&b);
    free(in_sub);
    free(text);
    free(list);
    free(plain);
    free(sub);
}
