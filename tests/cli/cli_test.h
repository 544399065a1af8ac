/* Assertions shared by the tests that drive the cannprof binary (those of
 * tests/cli, and others that go through the CLI: rules, tuner): example
 * models converted into the scratch folder, switch files, JSON output,
 * what a failed command must look like and what its messages must mention,
 * files written and read back. They build on tests/support/cli.h and,
 * unlike it, assert with Criterion (as atc_bridge/pass_test.h does for the
 * pass tests): a test calls them as it would write the assertions out, and
 * a failure message points at the helper's stderr report where there is
 * one. */
#ifndef CP_TESTS_CLI_TEST_H
#define CP_TESTS_CLI_TEST_H

#include "core/core.h"
#include "runner/probe.h"
#include "support/cli.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <sys/stat.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A probe floor file (runner/probe.h) as the cannprof binary under test
 * would write it `age_s` seconds ago, holding `floor` ns (naming that
 * binary, as runner/probe.c does). */
static inline void ct_write_probe_floor(const char *path, unsigned long long floor, long long age_s)
{
    struct stat st;
    cr_assert_eq(stat(CP_CLI, &st), 0);
    char text[256];
    snprintf(text, sizeof text, "floor_ns %llu\nexe %llx:%llx:%llx:%lld\nsaved_at %lld\n", floor,
             (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
             (unsigned long long)st.st_size, (long long)st.st_mtime, (long long)time(NULL) - age_s);
    cr_assert(cp_t_write_file(path, text, strlen(text)), "cannot write %s (see stderr)", path);
}

/* Point XDG_CACHE_HOME at <scratch>/cache and leave there this machine's
 * probe floor for `threads` threads, as the binary under test would, at
 * 1 ns: every probe reads far above 1.15x that, so no iteration or round
 * of `cannprof bench` counts as undisturbed, however quiet the machine,
 * and bench measures until its time limit. A busy machine, made certain. */
static inline void ct_plant_busy_floor(int threads)
{
    char *cache = cp_t_path("cache");
    cr_assert_eq(setenv("XDG_CACHE_HOME", cache, 1), 0);
    free(cache);
    char path[1200];
    cr_assert(cp_probe_floor_path(threads, true, path, sizeof path), "no floor file path");
    ct_write_probe_floor(path, 1, 0);
}

/* Point XDG_DATA_HOME at <scratch>/xdg, for suites that touch the default
 * knowledge base: a test never touches the real one of whoever runs it. */
static inline void ct_private_xdg(void)
{
    char *xdg = cp_t_path("xdg");
    cr_assert_eq(setenv("XDG_DATA_HOME", xdg, 1), 0);
    free(xdg);
}

/* examples/models/NAME.onnx converted with the default flags to
 * <scratch>/NAME.om; asserts success and returns the .om path. */
static inline char *ct_convert(const char *name)
{
    char *om = cp_t_convert(cp_t_dir, name, name, NULL);
    cr_assert_not_null(om, "convert %s failed (see stderr)", name);
    return om;
}

/* examples/models/NAME.onnx converted to <scratch>/OUT.om with the flags
 * given after `out` (NULL-terminated); asserts success and returns the .om
 * path. */
static inline char *ct_convert_to(const char *name, const char *out, ...)
{
    va_list ap;
    va_start(ap, out);
    char *om = cp_t_vconvert(cp_t_dir, name, out, ap);
    va_end(ap);
    cr_assert_not_null(om, "convert %s failed (see stderr)", name);
    return om;
}

/* A fusion switch file that turns every pass off: ALL covers the fusion
 * passes only, so the layout and precision passes are named. */
#define CT_EVERY_PASS_OFF                                                                          \
    "ALL:off\nTransposeRoundTripEliminationPass:off\nLayoutTransformPass:off\n"                    \
    "PrecisionModePass:off\nImplModePass:off\n"

/* A fusion switch file <scratch>/NAME holding `text`; asserts it is
 * written and returns the flag "--fusion_switch_file=<path>". */
static inline char *ct_switch_file(const char *name, const char *text)
{
    char *flag = cp_t_switch_file(cp_t_dir, name, text);
    cr_assert_not_null(flag, "cannot write the switch file %s", name);
    return flag;
}

/* `text` (a command's standard output) parsed as JSON; asserts it is. */
static inline json_t *ct_json(const char *text)
{
    json_t *j = cp_t_json(text);
    cr_assert_not_null(j, "not JSON (see stderr): %s", text);
    return j;
}

/* The number o[key]; asserts it is one. */
static inline double ct_num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    cr_assert(json_is_number(v), "'%s' is missing or not a number", key);
    return json_number_value(v);
}

/* The verdict `validate --json` gave metric `metric` ("latency", ...);
 * asserts the metric is there. */
static inline const char *ct_verdict_of(const json_t *j, const char *metric)
{
    const json_t *m = json_object_get(json_object_get(j, "metrics"), metric);
    cr_assert_not_null(m, "no metric %s", metric);
    return json_string_value(json_object_get(m, "verdict"));
}

/* Assert that `hay` holds every one of the NULL-terminated needles. */
static inline void ct_assert_mentions(const char *hay, ...)
{
    va_list ap;
    va_start(ap, hay);
    const char *s;
    while ((s = va_arg(ap, const char *)) != NULL)
        cr_assert_not_null(strstr(hay, s), "expected '%s' in: %s", s, hay);
    va_end(ap);
}

/* Assert that the command failed with exit 2 (bad input, no crash); returns
 * its standard error (caller frees) and releases `r`. */
static inline char *ct_fails_2(struct cp_run *r)
{
    cr_assert_eq(r->signal, 0, "killed by signal %d; stderr: %s", r->signal, r->err);
    cr_assert_eq(r->exit_code, 2, "exit %d; stdout: %.300s stderr: %s", r->exit_code, r->out,
                 r->err);
    char *err = cp_t_fmt("%s", r->err);
    cp_run_release(r);
    return err;
}

/* The bytes of `path`, asserting it reads. OUT: *len. Caller frees. */
static inline uint8_t *ct_read(const char *path, size_t *len)
{
    uint8_t *data = cp_t_read_file(path, len);
    cr_assert_not_null(data, "cannot read %s (see stderr)", path);
    return data;
}

/* Write `len` bytes to `path`, asserting it works. */
static inline void ct_write(const char *path, const void *data, size_t len)
{
    cr_assert(cp_t_write_file(path, data, len), "cannot write %s (see stderr)", path);
}

/* The text of file `path` (NUL-terminated), asserting it reads. Caller
 * frees. */
static inline char *ct_read_text(const char *path)
{
    size_t len = 0;
    return (char *)ct_read(path, &len);
}

/* Write the string `text` to `path`, asserting it works. */
static inline void ct_write_text(const char *path, const char *text)
{
    ct_write(path, text, strlen(text));
}

/* Whether files A and B hold the same bytes; both must read. */
static inline bool ct_same_bytes(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    uint8_t *da = ct_read(a, &la), *db = ct_read(b, &lb);
    bool same = la == lb && memcmp(da, db, la) == 0;
    free(da);
    free(db);
    return same;
}

#endif
