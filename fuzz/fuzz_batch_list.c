/* The model list of `tune --batch LIST` (one path per line, blank lines
 * and # comments skipped). Every listed path must exist, so the target
 * makes a small tree in its temporary folder (m.onnx, a/model.onnx,
 * b/model.onnx, a/b/model.onnx) and reads the list with that folder as the
 * working directory, so that relative paths in the seeds name those files;
 * the working directory is restored before returning. The folder names the
 * batch gives must be distinct names of folders inside the output folder
 * (not "", ".", ".." or a path). */
#include "harness.h"

#include "tuner/tuner.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool make_tree(void)
{
    static bool made; /* once per process: the tree is never changed */
    if (made)
        return true;
    static const char *const dirs[] = {"a", "b", "a/b"};
    static const char *const files[] = {"m.onnx", "a/model.onnx", "b/model.onnx", "a/b/model.onnx"};
    char path[1024];
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        if (!fuzz_tmp_path(dirs[i], path, sizeof path) ||
            (mkdir(path, 0700) != 0 && !cp_path_exists(path)))
            return false;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        if (!fuzz_tmp_write(files[i], (const uint8_t *)"", 0, path, sizeof path))
            return false;
    made = true;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char list[1024], root[1024];
    if (!make_tree() || !fuzz_tmp_write("list.txt", data, size, list, sizeof list) ||
        !fuzz_tmp_path("", root, sizeof root))
        return 0;
    int here = open(".", O_RDONLY | O_DIRECTORY);
    if (here < 0 || chdir(root) != 0)
        fuzz_fail("cannot enter the temporary folder %s", root);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_tune_batch b;
    memset(&b, 0, sizeof b);
    enum cp_status st = cp_tune_batch_list(list, &b, &d);
    if (fchdir(here) != 0)
        fuzz_fail("cannot return to the working directory");
    close(here);
    fuzz_expect_refusal("cp_tune_batch_list", st, &d);
    if (st == CP_OK) {
        for (size_t i = 0; i < b.n; i++) {
            if (!b.models[i] || !b.dirs[i] || !b.dirs[i][0] || strchr(b.dirs[i], '/') ||
                strcmp(b.dirs[i], ".") == 0 || strcmp(b.dirs[i], "..") == 0)
                fuzz_fail("model %zu (%s) has no usable folder name: '%s'", i,
                          b.models[i] ? b.models[i] : "?", b.dirs[i] ? b.dirs[i] : "?");
            for (size_t j = 0; j < i; j++)
                if (strcmp(b.dirs[i], b.dirs[j]) == 0)
                    fuzz_fail("models %zu and %zu share the folder %s", j, i, b.dirs[i]);
        }
    } else if (b.n) {
        fuzz_fail("a refused list left %zu models", b.n);
    }
    cp_tune_batch_release(&b);
    fuzz_tmp_remove(list);
    return 0;
}
