/*
 * fuzz/harness.h: what the fuzz targets share.
 *
 * Every parser of outside input has a target fuzz/fuzz_<name>.c that
 * defines LLVMFuzzerTestOneInput and calls the parser through its module's
 * public header only. A target is linked twice: with libFuzzer
 * (-DCP_FUZZ=ON, clang) to search for inputs, and always with replay.c, a
 * main() that feeds it the seed inputs and past crashers so that ctest keeps
 * them passing (docs/fuzzing.md).
 *
 * A target must release everything it allocated (the runs are under
 * LeakSanitizer) and may write only into the process's temporary folder
 * (fuzz_tmp_path), for parsers that read a file rather than a buffer.
 *
 * Besides "no crash, no leak, no undefined behaviour", targets check the
 * project's promise about bad input: a parser that refuses an input says
 * why (a non-empty message) with a status that is exit code 2 at the
 * command line (fuzz_expect_refusal). A broken promise aborts, so the
 * fuzzer keeps the input as a crash.
 */
#ifndef CP_FUZZ_HARNESS_H
#define CP_FUZZ_HARNESS_H

#include "core/core.h"

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry point, defined by each target. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A NUL-terminated copy of data[0..size) (for parsers that take a C
 * string; an embedded NUL ends the string early, as it would for a file
 * read into a C string). Caller frees. NULL when out of memory. */
char *fuzz_strdup(const uint8_t *data, size_t size);

/* The path of `name` inside this process's temporary folder (created on
 * first use under $TMPDIR or /tmp, removed with everything in it at exit).
 * Returns `out`, or NULL when the folder cannot be made or the path does
 * not fit in out[n]. */
char *fuzz_tmp_path(const char *name, char *out, size_t n);

/* Write data[0..size) to fuzz_tmp_path(name). true on success. */
bool fuzz_tmp_write(const char *name, const uint8_t *data, size_t size, char *path, size_t n);

/* Remove a file or a folder tree inside the temporary folder (missing is
 * fine). */
void fuzz_tmp_remove(const char *path);

/* fuzz_tmp_remove for a SQLite database and its -journal, -wal and -shm
 * files. */
void fuzz_tmp_remove_db(const char *path);

/* The check every diag-taking target makes on the parser's answer: CP_OK,
 * or a refusal with a message and a status whose exit code is 2 (bad
 * input). Out of memory is allowed (the fuzzer's allocation limit).
 * `what` names the call in the abort message. */
void fuzz_expect_refusal(const char *what, enum cp_status st, const struct cp_diag *d);

/* Abort with a message: a property the target checks does not hold. */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
