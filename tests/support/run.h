/* Test support: run a command line, capture its output and exit code, and
 * make scratch folders. */
#ifndef CP_TEST_RUN_H
#define CP_TEST_RUN_H

#include <stddef.h>

struct cp_run {
    int exit_code; /* -1 if it did not exit normally (signal) */
    int signal;    /* the signal that ended it, or 0 */
    char *out;     /* stdout, NUL-terminated; free with cp_run_release */
    char *err;     /* stderr */
};

/* Run argv[0] with arguments (NULL-terminated), no shell involved. */
void cp_run_argv(struct cp_run *r, char *const argv[]);

/* Run the cannprof binary under test with the given arguments
 * (NULL-terminated list). */
void cp_run_cli(struct cp_run *r, ...);

void cp_run_release(struct cp_run *r);

/* What a shell command line prints on stdout (a heap string), or NULL
 * when it cannot be started or exits other than 0: for the poppler and
 * libxml2 tools that tests look at reports with. */
char *cp_run_shell(const char *cmd);

/* A fresh folder under /tmp. Caller frees the string; the
 * folder is removed by cp_scratch_remove. */
char *cp_scratch_dir(void);
void cp_scratch_remove(const char *dir);

/* The path of an example model in the source tree: examples/models/NAME.onnx.
 * Returns a static-lifetime string built into buf. */
const char *cp_example_model(char *buf, size_t n, const char *name);

#endif
