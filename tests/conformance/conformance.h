/*
 * Private to the conformance test (test_conformance.c): what a case's
 * parts share. conformance_util.c has the small helpers (causes, messages,
 * folders), conformance_model.c reads a model's first pass (what would make
 * a case a skip) and compares outputs, conformance_case.c runs one case in
 * the child; test_conformance.c forks per case and tallies.
 */
#ifndef CP_TESTS_CONFORMANCE_H
#define CP_TESTS_CONFORMANCE_H

#include "onnx/onnx.h"
#include "runner/runner.h"

#include "proto/onnx.pb-c.h"

#include <stdbool.h>
#include <stddef.h>

#define TESTDATA_ROOT   "/usr/share/libonnx-testdata/data"
#define OPSET_MIN       1
#define OPSET_MAX       21
#define RTOL            1e-3
#define ATOL            1e-7
#define CASE_TIMEOUT_MS 60000
#define MAX_IO          CP_MAX_INPUT_SHAPES
#define PATH_LEN        2048

enum outcome { OUT_PASS = 0, OUT_FAIL = 1, OUT_SKIP = 2 };

/* What a child sends back. For a skip, `text` holds its causes separated by
 * '\n' (each counted once); for a failure, one line of detail. */
struct case_result {
    int outcome;
    char text[1024];
};

struct model_io {
    size_t n_in, n_out;
    const char *in[MAX_IO + 1];
    const char *out[MAX_IO + 1];
    enum cp_dtype in_dtype[MAX_IO + 1], out_dtype[MAX_IO + 1]; /* declared; UNDEFINED if none */
};

struct set_data {
    struct cp_host_tensor in[MAX_IO];
    struct cp_host_tensor out[MAX_IO];
    size_t n_in, n_out;
};

/* LeakSanitizer (NULL in a normal build). A child checks its own leaks
 * before it _exits, since LeakSanitizer only runs at exit(). In a forked
 * child it cannot scan the parent's stack, so what the parent allocates
 * (case lists, the tally) is made invisible to it with lsan_off/lsan_on. */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));
extern void __lsan_disable(void) __attribute__((weak));
extern void __lsan_enable(void) __attribute__((weak));

static inline void lsan_off(void)
{
    if (__lsan_disable)
        __lsan_disable();
}

static inline void lsan_on(void)
{
    if (__lsan_enable)
        __lsan_enable();
}

/* ---- conformance_util.c */
void cf_add_cause(struct case_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cf_append(struct case_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cf_free_list(char **v, size_t n);
char **cf_list_dir(const char *dir, const char *prefix, size_t *n);
const char *cf_onnx_type_name(int t);
bool cf_op_from_message(const char *msg, char *op, size_t n);
void cf_set_fail(struct case_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *cf_strip_prefix(const char *msg, const char *prefix);

/* ---- conformance_model.c */
bool cf_compare(const struct cp_host_tensor *exp, const struct cp_host_tensor *act, char *why,
                size_t n);
void cf_first_pass(const Onnx__ModelProto *mp, struct model_io *io, struct case_result *r);
bool cf_is_default_domain(const char *dom);

/* ---- conformance_case.c */
void cf_run_case(const char *case_dir, struct case_result *r);

#endif
