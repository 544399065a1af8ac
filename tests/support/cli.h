/* Test support: what the tests that drive the cannprof binary, or write and
 * read its files, keep needing: formatted heap strings, the scratch folder
 * of a test suite, example models converted and benchmarked through the
 * CLI, fusion switch files, JSON and text from standard output, command
 * lines split as a shell would, and whole files.
 * (Trace stores and SQL: db.h.)
 *
 * Like the rest of tests/support, nothing here uses Criterion, so a helper
 * never decides for the test what a failure means. A helper that can fail
 * returns NULL (or false) after printing to stderr what went wrong (the
 * command line, its exit code and its standard error; the JSON error and
 * the text), and the test asserts on the result; Criterion shows that
 * stderr next to the failed assertion (tests/cli/cli_test.h wraps the
 * common cases in asserting helpers):
 *
 *     char *om = cp_t_convert(cp_t_dir, "resnet_tiny", "r", "--layout_policy=nchw", NULL);
 *     cr_assert_not_null(om);
 *
 * The exception is formatting a string (cp_t_fmt, cp_t_path, cp_t_example):
 * it fails only when memory runs out, no test could carry on then, and a
 * check at each of its hundreds of calls would hide what the tests do; so
 * it aborts, which Criterion reports as a crash of that test. (So does the
 * scratch fixture, below.)
 *
 * Every string returned is a heap string the caller frees, unless said
 * otherwise. */
#ifndef CP_TEST_CLI_H
#define CP_TEST_CLI_H

#include <jansson.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* printf into a fresh heap string. Never NULL (see above). */
char *cp_t_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

/* ---- the scratch folder of a suite -------------------------------------- */

/* The scratch folder of the running test: made by cp_t_scratch_setup,
 * removed by cp_t_scratch_close, NULL outside. Criterion runs each test in
 * its own process, so every test gets a fresh, empty one. A suite wires it
 * up as its fixture (a global because Criterion's fixtures take no
 * arguments):
 *
 *     TestSuite(name, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);
 *
 * or calls cp_t_scratch_setup first in an .init of its own. */
extern char *cp_t_dir;

/* Make a fresh folder under /tmp and point cp_t_dir at it. A fixture has no
 * way to hand back a failure and no test can run without its folder, so
 * when the folder cannot be made this says so on stderr and aborts, which
 * Criterion reports as a crash of the test (the second exception to the
 * rule above). */
void cp_t_scratch_setup(void);

/* Remove cp_t_dir with everything in it and reset it to NULL. A no-op when
 * there is none. */
void cp_t_scratch_close(void);

/* "<cp_t_dir>/NAME". */
char *cp_t_path(const char *name);

/* "<source>/examples/models/NAME.onnx". */
char *cp_t_example(const char *name);

/* ---- converting and benchmarking through the CLI ------------------------ */

/* `cannprof convert --model=<example NAME> --framework=5 --output=DIR/OUT`
 * followed by the flags given after `out` (NULL-terminated; at most 32).
 * Returns "DIR/OUT.om" when convert exits 0 and the file is there, NULL
 * (after printing why) otherwise. */
char *cp_t_convert(const char *dir, const char *name, const char *out, ...);

/* cp_t_convert with the flags in a va_list, for helpers of its own kind. */
char *cp_t_vconvert(const char *dir, const char *name, const char *out, va_list flags);

/* The same for any model file: `convert --model=ONNX --framework=5
 * --output=BASE [flags]`; returns "BASE.om" or NULL. */
char *cp_t_convert_file(const char *onnx, const char *base, ...);

/* Write `text` to DIR/NAME and return the convert flag that names it,
 * "--fusion_switch_file=DIR/NAME"; NULL when the file cannot be written. */
char *cp_t_switch_file(const char *dir, const char *name, const char *text);

/* `cannprof bench OM [flags] --trace TRACE` (flags NULL-terminated; at most
 * 32). True when bench exits 0, its summary names TRACE and TRACE exists
 * (a store appended to when it was there before); false after printing
 * why otherwise. */
bool cp_t_bench_trace(const char *om, const char *trace, ...);

/* ---- reading what the CLI wrote ------------------------------------------ */

/* `text` parsed as JSON (a new reference), or NULL after printing the
 * parse error and the text. */
json_t *cp_t_json(const char *text);

/* The JSON document in file PATH, or NULL after printing why. */
json_t *cp_t_json_file(const char *path);

/* The bytes of file PATH (*len set; NUL-terminated one past the end, so a
 * text file reads as a string), or NULL after printing why. */
uint8_t *cp_t_read_file(const char *path, size_t *len);

/* Write `len` bytes to PATH in place (created or truncated, not atomic:
 * tests that damage a file overwrite it this way). False after printing
 * why. */
bool cp_t_write_file(const char *path, const void *data, size_t len);

/* ---- reading what the CLI printed ---------------------------------------- */

/* Whether some line of `text` starts with `prefix`. */
bool cp_t_has_line(const char *text, const char *prefix);

/* In the indented lines that follow the line starting with `section` (as
 * `info` prints "config:" and its keys), the first whose first word is
 * `key`: the rest of that line, trimmed. NULL when there is none. */
char *cp_t_section_value(const char *text, const char *section, const char *key);

/* The last space-separated word of `s` (a pointer into it). */
const char *cp_t_last_word(const char *s);

/* Split a command line into words as a POSIX shell would for the quoting
 * cannprof prints: '...', "..." (a backslash escapes the next character
 * inside), and a backslash outside quotes. OUT: words[0..*n) heap strings
 * (caller frees each), *n. False, with nothing left allocated, when a quote
 * is not closed or there are more than `max` words. */
bool cp_t_shell_split(const char *line, char **words, size_t max, size_t *n);

#endif
