/* core: string buffers, diagnostics, status mapping, files, hashing and the
 * small text helpers. */
#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- helpers ------------------------------------------------------------- */

static void write_file(const char *path, const void *data, size_t len)
{
    cr_assert(cp_t_write_file(path, data, len), "cannot write %s (see stderr)", path);
}

/* Names in `dir` other than "." and "..", joined with '|' into out. */
static size_t list_dir(const char *dir, char *out, size_t cap)
{
    DIR *dp = opendir(dir);
    cr_assert_not_null(dp, "cannot open %s", dir);
    size_t n = 0;
    out[0] = '\0';
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", n ? "|" : "", e->d_name);
        n++;
    }
    closedir(dp);
    return n;
}

static bool is_lower_hex(const char *s, size_t n)
{
    if (strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* ---- cp_buf -------------------------------------------------------------- */

Test(core_buf, append_puts_putc_keep_data_nul_terminated)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_append(&b, "ab", 2);
    cp_buf_puts(&b, "cd");
    cp_buf_putc(&b, 'e');
    cp_buf_append(&b, "zzz", 0);
    cr_assert_eq(cp_buf_status(&b), CP_OK);
    cr_assert_eq(b.len, 5);
    cr_assert_str_eq(b.data, "abcde");
    cr_assert_eq(b.data[b.len], '\0');
    cp_buf_release(&b);
    cr_assert_null(b.data);
    cr_assert_eq(b.len, 0);
}

Test(core_buf, append_of_embedded_nul_counts_every_byte)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_append(&b, "a\0b", 3);
    cr_assert_eq(b.len, 3);
    cr_assert_eq(memcmp(b.data, "a\0b", 3), 0);
    cr_assert_eq(b.data[3], '\0');
    cp_buf_release(&b);
}

Test(core_buf, printf_grows_past_initial_capacity)
{
    struct cp_buf b;
    cp_buf_init(&b);
    char expect[20000];
    size_t elen = 0;
    for (int i = 0; i < 1000; i++) {
        cp_buf_printf(&b, "item %d;", i);
        elen += (size_t)snprintf(expect + elen, sizeof expect - elen, "item %d;", i);
    }
    /* One printf far larger than what is already there. */
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cp_buf_printf(&b, "[%s]", big);
    elen += (size_t)snprintf(expect + elen, sizeof expect - elen, "[%s]", big);
    cr_assert_eq(cp_buf_status(&b), CP_OK);
    cr_assert_eq(b.len, elen, "len %zu, expected %zu", b.len, elen);
    cr_assert_eq(strlen(b.data), elen);
    cr_assert_eq(memcmp(b.data, expect, elen), 0);
    cr_assert_geq(b.cap, b.len + 1);
    cp_buf_release(&b);
}

Test(core_buf, reset_empties_but_keeps_buffer_usable)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "hello");
    cp_buf_reset(&b);
    cr_assert_eq(b.len, 0);
    cr_assert_str_eq(b.data, "");
    cp_buf_puts(&b, "x");
    cr_assert_str_eq(b.data, "x");
    cp_buf_release(&b);
}

Test(core_buf, steal_hands_over_data_and_empties_buffer)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_puts(&b, "owned");
    char *s = cp_buf_steal(&b);
    cr_assert_str_eq(s, "owned");
    cr_assert_null(b.data);
    cr_assert_eq(b.len, 0);
    free(s);
    /* An empty buffer still gives a string the caller can free. */
    s = cp_buf_steal(&b);
    cr_assert_not_null(s);
    cr_assert_str_eq(s, "");
    free(s);
}

Test(core_buf, markup_escapes_entities_drops_controls_and_repairs_utf8)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_buf_markup(&b, "<a href=\"x\">Tom & Jerry's</a>\x01\n\tcaf\xc3\xa9 \xff");
    cp_buf_markup(&b, NULL);
    cr_assert_eq(cp_buf_status(&b), CP_OK);
    cr_assert_str_eq(b.data,
                     "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&apos;s&lt;/a&gt;\n\tcaf\xc3\xa9 "
                     "\xef\xbf\xbd");
    cp_buf_release(&b);
}

/* ---- cp_diag and status codes ---------------------------------------------- */

Test(core_diag, first_error_wins_and_status_is_returned)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_not(cp_diag_has_error(&d));
    cr_assert_eq(d.status, CP_OK);
    cr_assert_str_eq(d.msg, "");

    enum cp_status st = cp_diag_set(&d, CP_ERR_PARSE, "%s:%d: bad token '%s'", "m.onnx", 7, "x");
    cr_assert_eq(st, CP_ERR_PARSE);
    cr_assert(cp_diag_has_error(&d));
    cr_assert_str_eq(d.msg, "m.onnx:7: bad token 'x'");

    st = cp_diag_set(&d, CP_ERR_INVALID, "consequence");
    cr_assert_eq(st, CP_ERR_INVALID, "the later status is still returned to the caller");
    cr_assert_eq(d.status, CP_ERR_PARSE, "first error must win");
    cr_assert_str_eq(d.msg, "m.onnx:7: bad token 'x'");
}

Test(core_diag, null_diag_is_accepted)
{
    cr_assert_eq(cp_diag_set(NULL, CP_ERR_IO, "ignored %d", 1), CP_ERR_IO);
    cr_assert_not(cp_diag_has_error(NULL));
    cp_diag_init(NULL);
}

Test(core_diag, long_message_is_truncated_not_overflowed)
{
    struct cp_diag d;
    cp_diag_init(&d);
    char big[4000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cp_diag_set(&d, CP_ERR_INVALID, "%s", big);
    cr_assert_eq(strlen(d.msg), sizeof d.msg - 1);
}

Test(core_status, exit_code_mapping)
{
    cr_assert_eq(cp_status_exit_code(CP_OK), 0);
    cr_assert_eq(cp_status_exit_code(CP_ERR_USAGE), 2);
    cr_assert_eq(cp_status_exit_code(CP_ERR_INVALID), 2);
    cr_assert_eq(cp_status_exit_code(CP_ERR_PARSE), 2);
    cr_assert_eq(cp_status_exit_code(CP_ERR_CORRUPT), 2);
    cr_assert_eq(cp_status_exit_code(CP_ERR_VERSION), 2);
    cr_assert_eq(cp_status_exit_code(CP_ERR_UNSUPPORTED), 2);
    cr_assert_eq(cp_status_exit_code(CP_ERR_IO), 2);
    cr_assert_eq(cp_status_exit_code(CP_ERR_NOMEM), 3);
    cr_assert_eq(cp_status_exit_code(CP_ERR_INTERNAL), 3);
    cr_assert_eq(cp_status_exit_code(CP_ERR_DB), 3);
    /* Never the verdict code 1, whatever the status. */
    for (int s = 0; s <= CP_ERR_USAGE + 5; s++)
        cr_assert_neq(cp_status_exit_code((enum cp_status)s), 1, "status %d", s);
}

Test(core_status, every_status_has_a_distinct_name)
{
    for (int a = 0; a <= CP_ERR_USAGE; a++) {
        const char *na = cp_status_str((enum cp_status)a);
        cr_assert_not_null(na);
        cr_assert_gt(strlen(na), 0);
        for (int b = a + 1; b <= CP_ERR_USAGE; b++)
            cr_assert_str_neq(na, cp_status_str((enum cp_status)b), "statuses %d and %d", a, b);
    }
    cr_assert_not_null(cp_status_str((enum cp_status)999));
}

/* ---- files ------------------------------------------------------------------- */

Test(core_file, write_atomic_writes_content)
{
    char *dir = cp_scratch_dir();
    cr_assert_not_null(dir);
    char *path = cp_t_fmt("%s/out.bin", dir);
    struct cp_diag d;
    cp_diag_init(&d);
    const char content[] = "first content\0with nul";
    cr_assert_eq(cp_file_write_atomic(path, content, sizeof content, &d), CP_OK, "%s", d.msg);

    uint8_t *data = NULL;
    size_t len = 0;
    cr_assert_eq(cp_file_read(path, &data, &len, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(len, sizeof content);
    cr_assert_eq(memcmp(data, content, len), 0);
    cr_assert_eq(data[len], 0, "cp_file_read NUL-terminates");
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0644);
    free(data);
    free(path);
    cp_scratch_remove(dir);
    free(dir);
}

Test(core_file, write_atomic_replaces_existing_file_and_leaves_no_temporaries)
{
    char *dir = cp_scratch_dir();
    cr_assert_not_null(dir);
    char *path = cp_t_fmt("%s/model.om", dir);
    write_file(path, "old content that is longer than the new one", 44);

    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_write_atomic(path, "new", 3, &d), CP_OK, "%s", d.msg);
    uint8_t *data = NULL;
    size_t len = 0;
    cr_assert_eq(cp_file_read(path, &data, &len, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(len, 3);
    cr_assert_eq(memcmp(data, "new", 3), 0);
    free(data);

    /* An empty write is a valid file too. */
    cr_assert_eq(cp_file_write_atomic(path, "", 0, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_file_read(path, &data, &len, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(len, 0);
    free(data);

    char names[4096];
    size_t n = list_dir(dir, names, sizeof names);
    cr_assert_eq(n, 1, "folder holds: %s", names);
    cr_assert_str_eq(names, "model.om");
    cr_assert_null(strstr(names, ".tmp"), "temporary file left behind: %s", names);
    free(path);
    cp_scratch_remove(dir);
    free(dir);
}

Test(core_file, write_atomic_into_missing_folder_fails_cleanly)
{
    char *dir = cp_scratch_dir();
    cr_assert_not_null(dir);
    char *missing = cp_t_fmt("%s/no_such_folder", dir);
    char *path = cp_t_fmt("%s/x.om", missing);
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_file_write_atomic(path, "data", 4, &d);
    /* an output that cannot be written: the environment's failure (exit 3) */
    cr_assert_eq(st, CP_ERR_WRITE);
    cr_assert_eq(d.status, CP_ERR_WRITE);
    cr_assert_eq(cp_status_exit_code(st), 3);
    cr_assert_not_null(strstr(d.msg, path), "message should name the path: %s", d.msg);
    cr_assert_not(cp_path_exists(missing), "the folder must not be created");
    cr_assert_not(cp_path_exists(path));
    char names[4096];
    cr_assert_eq(list_dir(dir, names, sizeof names), 0, "scratch holds: %s", names);
    free(path);
    free(missing);
    cp_scratch_remove(dir);
    free(dir);
}

Test(core_file, read_of_missing_file_names_the_path)
{
    char *dir = cp_scratch_dir();
    cr_assert_not_null(dir);
    char *path = cp_t_fmt("%s/absent.onnx", dir);
    struct cp_diag d;
    cp_diag_init(&d);
    uint8_t *data = (uint8_t *)"sentinel";
    size_t len = 99;
    cr_assert_eq(cp_file_read(path, &data, &len, &d), CP_ERR_IO);
    cr_assert_null(data, "outputs stay NULL on failure");
    cr_assert_eq(len, 0);
    cr_assert_not_null(strstr(d.msg, path), "message: %s", d.msg);
    free(path);
    cp_scratch_remove(dir);
    free(dir);
}

Test(core_file, read_of_a_folder_is_refused)
{
    char *dir = cp_scratch_dir();
    cr_assert_not_null(dir);
    struct cp_diag d;
    cp_diag_init(&d);
    uint8_t *data = NULL;
    size_t len = 0;
    cr_assert_neq(cp_file_read(dir, &data, &len, &d), CP_OK);
    cr_assert_null(data);
    cr_assert_not_null(strstr(d.msg, dir), "message: %s", d.msg);
    cp_scratch_remove(dir);
    free(dir);
}

Test(core_file, mmap_maps_whole_file_read_only)
{
    char *dir = cp_scratch_dir();
    cr_assert_not_null(dir);
    char *path = cp_t_fmt("%s/blob", dir);
    uint8_t content[10000];
    for (size_t i = 0; i < sizeof content; i++)
        content[i] = (uint8_t)(i * 7 + 3);
    write_file(path, content, sizeof content);

    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_mmap m;
    cr_assert_eq(cp_mmap_open(path, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(m.len, sizeof content);
    cr_assert_not_null(m.data);
    cr_assert_eq(memcmp(m.data, content, sizeof content), 0);
    cp_mmap_close(&m);
    cr_assert_null(m.data);
    cr_assert_eq(m.len, 0);
    free(path);
    cp_scratch_remove(dir);
    free(dir);
}

Test(core_file, mmap_of_empty_file_is_null_and_zero)
{
    char *dir = cp_scratch_dir();
    cr_assert_not_null(dir);
    char *path = cp_t_fmt("%s/empty", dir);
    write_file(path, "", 0);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_mmap m;
    cr_assert_eq(cp_mmap_open(path, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_null(m.data);
    cr_assert_eq(m.len, 0);
    cp_mmap_close(&m);
    free(path);
    cp_scratch_remove(dir);
    free(dir);
}

Test(core_file, mmap_of_missing_file_names_the_path)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_mmap m;
    const char *path = "/nonexistent-cannprof-dir/model.om";
    cr_assert_eq(cp_mmap_open(path, &m, &d), CP_ERR_IO);
    cr_assert_null(m.data);
    cr_assert_eq(m.len, 0);
    cr_assert_not_null(strstr(d.msg, path), "message: %s", d.msg);
}

/* ---- paths ------------------------------------------------------------------- */

static void check_dirname(const char *path, const char *expect)
{
    char *r = cp_path_dirname(path);
    cr_assert_not_null(r);
    cr_assert_str_eq(r, expect, "dirname(\"%s\") = \"%s\", expected \"%s\"", path, r, expect);
    free(r);
}

Test(core_path, dirname)
{
    check_dirname("a/b/c.onnx", "a/b");
    check_dirname("/abs/dir/m.onnx", "/abs/dir");
    check_dirname("model.onnx", ".");
    check_dirname("/model.onnx", "/");
    check_dirname("./m", ".");
    check_dirname("", ".");
}

Test(core_path, has_suffix_ignores_ascii_case)
{
    cr_assert(cp_path_has_suffix("out/model.om", ".om"));
    cr_assert(cp_path_has_suffix("out/MODEL.OM", ".om"));
    cr_assert(cp_path_has_suffix("m.Onnx", ".onnx"));
    cr_assert(cp_path_has_suffix(".om", ".om"));
    cr_assert(cp_path_has_suffix("anything", ""));
    cr_assert_not(cp_path_has_suffix("om", ".om"));
    cr_assert_not(cp_path_has_suffix("model.onnx", ".om"));
    cr_assert_not(cp_path_has_suffix("model.om.bak", ".om"));
    cr_assert_not(cp_path_has_suffix("", ".om"));
}

Test(core_path, exists)
{
    cr_assert(cp_path_exists("/"));
    cr_assert_not(cp_path_exists("/nonexistent-cannprof-dir/x"));
}

/* ---- hashing ----------------------------------------------------------------- */

Test(core_hash, hash64_is_xxh3_and_stable)
{
    /* Reference values of XXH3-64: ids and checksums written by one build
     * must be readable by the next, so the algorithm is pinned. */
    cr_assert_eq(cp_hash64("", 0), 0x2d06800538d394c2ull);
    cr_assert_eq(cp_hash64("abc", 3), 0x78af5f94892f3950ull);
    uint8_t buf[4096];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i ^ (i >> 3));
    uint64_t a = cp_hash64(buf, sizeof buf);
    uint8_t copy[4096];
    memcpy(copy, buf, sizeof buf);
    cr_assert_eq(cp_hash64(copy, sizeof copy), a, "same bytes at another address, same hash");
}

Test(core_hash, hash64_changes_with_any_single_bit)
{
    uint8_t buf[1024];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 31);
    uint64_t base = cp_hash64(buf, sizeof buf);
    size_t offsets[] = {0, 1, 7, 63, 64, 511, 1022, 1023};
    for (size_t k = 0; k < sizeof offsets / sizeof *offsets; k++)
        for (int bit = 0; bit < 8; bit++) {
            buf[offsets[k]] ^= (uint8_t)(1u << bit);
            cr_assert_neq(cp_hash64(buf, sizeof buf), base, "flip byte %zu bit %d", offsets[k],
                          bit);
            buf[offsets[k]] ^= (uint8_t)(1u << bit);
        }
    cr_assert_eq(cp_hash64(buf, sizeof buf), base);
    cr_assert_neq(cp_hash64(buf, sizeof buf - 1), base, "length is part of the hash");
}

Test(core_hash, hash128_hex_is_32_lower_hex_digits)
{
    char out[33];
    memset(out, 'Z', sizeof out);
    cp_hash128_hex("", 0, out);
    cr_assert(is_lower_hex(out, 32), "got '%s'", out);
    cr_assert_str_eq(out, "99aa06d3014798d86001c324468d497f");
    cp_hash128_hex("model bytes", 11, out);
    cr_assert(is_lower_hex(out, 32), "got '%s'", out);
    char other[33];
    cp_hash128_hex("model byteS", 11, other);
    cr_assert_str_neq(out, other);
}

Test(core_hash, streaming_hasher_matches_one_shot)
{
    uint8_t buf[3000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 13 + 5);
    char one[33], streamed[33];
    cp_hash128_hex(buf, sizeof buf, one);
    struct cp_hasher *h = cp_hasher_create();
    cr_assert_not_null(h);
    cp_hasher_update(h, buf, 1);
    cp_hasher_update(h, buf + 1, 999);
    cp_hasher_update(h, buf + 1000, 0);
    cp_hasher_update(h, buf + 1000, 2000);
    cp_hasher_hex(h, streamed);
    cp_hasher_free(h);
    cp_hasher_free(NULL);
    cr_assert_str_eq(streamed, one);
}

/* ---- text helpers -------------------------------------------------------------- */

Test(core_text, edit_distance)
{
    cr_assert_eq(cp_edit_distance("", ""), 0);
    cr_assert_eq(cp_edit_distance("abc", ""), 3);
    cr_assert_eq(cp_edit_distance("", "abc"), 3);
    cr_assert_eq(cp_edit_distance("convert", "convert"), 0);
    cr_assert_eq(cp_edit_distance("conver", "convert"), 1);
    cr_assert_eq(cp_edit_distance("kitten", "sitting"), 3);
    cr_assert_eq(cp_edit_distance("sitting", "kitten"), 3);
    cr_assert_eq(cp_edit_distance("flaw", "lawn"), 2);
    cr_assert_eq(cp_edit_distance("precison_mode", "precision_mode"), 1);
    cr_assert_eq(cp_edit_distance("input-shape", "input_shape"), 1);
}

Test(core_text, edit_distance_of_long_strings_does_not_overflow)
{
    char a[600], b[600];
    memset(a, 'a', sizeof a - 1);
    a[sizeof a - 1] = '\0';
    memset(b, 'a', sizeof b - 1);
    b[sizeof b - 1] = '\0';
    b[10] = 'b';
    size_t d = cp_edit_distance(a, b);
    cr_assert_eq(d, 1, "got %zu", d);
}

Test(core_text, parse_i64_accepts_whole_numbers)
{
    int64_t v = 0;
    cr_assert(cp_parse_i64("0", &v));
    cr_assert_eq(v, 0);
    cr_assert(cp_parse_i64("123", &v));
    cr_assert_eq(v, 123);
    cr_assert(cp_parse_i64("-1", &v));
    cr_assert_eq(v, -1);
    cr_assert(cp_parse_i64("9223372036854775807", &v));
    cr_assert_eq(v, INT64_MAX);
    cr_assert(cp_parse_i64("-9223372036854775808", &v));
    cr_assert_eq(v, INT64_MIN);
}

Test(core_text, parse_i64_rejects_junk_and_overflow)
{
    const char *bad[] = {"",
                         "abc",
                         "12x",
                         "1.5",
                         "0x10",
                         "1e3",
                         "--1",
                         "1 2",
                         " ",
                         "-",
                         "+",
                         "9223372036854775808",
                         "-9223372036854775809",
                         "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int64_t v = 42;
        cr_assert_not(cp_parse_i64(bad[i], &v), "'%s' accepted as %lld", bad[i], (long long)v);
    }
    int64_t v;
    cr_assert_not(cp_parse_i64(NULL, &v));
}

Test(core_text, format_bytes_and_si)
{
    char out[32];
    cp_format_bytes(0, out);
    cr_assert_str_eq(out, "0 B");
    cp_format_bytes(1023, out);
    cr_assert_str_eq(out, "1023 B");
    cp_format_bytes(1536, out);
    cr_assert_str_eq(out, "1.50 KiB");
    cp_format_bytes(3ull << 30, out);
    cr_assert_str_eq(out, "3.00 GiB");
    cp_format_si(999, out);
    cr_assert_str_eq(out, "999");
    cp_format_si(1.23e9, out);
    cr_assert_str_eq(out, "1.23 G");
}

/* ---- allocation ------------------------------------------------------------------ */

Test(core_text, byte_counts_parse_with_binary_suffixes)
{
    uint64_t v = 0;
    cr_assert(cp_parse_bytes("0", &v) && v == 0);
    cr_assert(cp_parse_bytes("4096", &v) && v == 4096);
    cr_assert(cp_parse_bytes("4K", &v) && v == 4096);
    cr_assert(cp_parse_bytes("16g", &v) && v == (uint64_t)16 << 30);
    cr_assert(cp_parse_bytes("512MiB", &v) && v == (uint64_t)512 << 20);
    cr_assert(cp_parse_bytes("2T", &v) && v == (uint64_t)2 << 40);
    cr_assert(cp_parse_bytes("18446744073709551615", &v) && v == UINT64_MAX);
    v = 7;
    const char *bad[] = {
        "",  "K", "-1", "+1", " 1", "1 ", "1X", "1KB", "1Ki", "16777216T", "18446744073709551616",
        NULL};
    for (size_t i = 0; bad[i]; i++)
        cr_assert_not(cp_parse_bytes(bad[i], &v), "'%s' parsed", bad[i]);
    cr_assert_eq(v, 7, "a refused count leaves the output alone");
}

Test(core_alloc, overflowing_sizes_are_refused)
{
    size_t r = 7;
    cr_assert(cp_mul_overflows(SIZE_MAX, 2, &r));
    cr_assert_not(cp_mul_overflows(1000, 1000, &r));
    cr_assert_eq(r, 1000000);
    cr_assert_null(cp_calloc(SIZE_MAX / 2, 4));
    cr_assert_null(cp_realloc_array(NULL, SIZE_MAX / 2, 4));
    int64_t v = 7;
    cr_assert(cp_add_overflows_i64(INT64_MAX, 1, &v));
    cr_assert(cp_sub_overflows_i64(INT64_MIN, 1, &v));
    cr_assert(cp_mul_overflows_i64((int64_t)1 << 62, 2, &v));
    cr_assert(cp_mul_overflows_i64(INT64_MIN, -1, &v));
    cr_assert_eq(v, 7, "an overflowing operation leaves the output alone");
    cr_assert_not(cp_add_overflows_i64(INT64_MAX - 1, 1, &v));
    cr_assert_eq(v, INT64_MAX);
    cr_assert_not(cp_sub_overflows_i64(-5, 7, &v));
    cr_assert_eq(v, -12);
    cr_assert_not(cp_mul_overflows_i64(-((int64_t)1 << 31), (int64_t)1 << 32, &v));
    cr_assert_eq(v, INT64_MIN);
    void *p = cp_calloc(0, 8);
    cr_assert_not_null(p, "zero-size calloc still returns a block to free");
    free(p);
    char *s = cp_strdup("dup");
    cr_assert_str_eq(s, "dup");
    free(s);
    cr_assert_null(cp_strdup(NULL));
}
