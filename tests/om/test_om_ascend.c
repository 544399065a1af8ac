/* Ascend .om files: the header is sniffed and read (strings bounded and
 * terminated), short or foreign input is refused, and the CPU reader names
 * an Ascend model, in a buffer or on disk, in its refusal. */
#include "om_test.h"

#include <unistd.h>

TestSuite(om_ascend);

/* ---- Ascend .om ----------------------------------------------------------- */

static void fake_ascend(uint8_t *h, size_t n)
{
    memset(h, 0, n);
    memcpy(h, "IMOD", 4);
    wr32(h + 4, 256);
    wr32(h + 8, 0x10000000);
    memset(h + 12, 0xCC, 64); /* checksum bytes */
    wr32(h + 76, 123456);
    h[80] = 0;
    h[81] = 1;
    h[82] = 1;
    h[83] = 2;
    memcpy(h + 84, "resnet50\x01\x7f", 10);
    wr32(h + 116, 77);
    memset(h + 120, 'U', 32); /* user define info */
    wr32(h + 152, 3);
    wr32(h + 156, 1);
    memcpy(h + 160, "3.1.0.alpha", 11);
    h[180] = 5;
    wr64(h + 184, 0x123456789ull);
}

Test(om_ascend, recognises_ascend_model_and_reads_its_header)
{
    uint8_t file[256 + 100];
    fake_ascend(file, sizeof file);
    cr_assert_eq(rd32(file), 0x444F4D49u);
    cr_assert_eq(cp_om_sniff(file, sizeof file), CP_OM_KIND_ASCEND);
    struct cp_ascend_om_header h;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read_ascend_header(file, sizeof file, &h, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(h.magic, 0x444F4D49u);
    cr_assert_eq(h.headsize, 256);
    cr_assert_eq(h.version, 0x10000000);
    cr_assert_eq(h.length, 123456);
    cr_assert_eq(h.is_encrypt, 0);
    cr_assert_eq(h.is_checksum, 1);
    cr_assert_eq(h.modeltype, 1);
    cr_assert_eq(h.genmode, 2);
    cr_assert_str_eq(h.name, "resnet50??", "non-printables replaced");
    cr_assert_eq(h.ops, 77);
    cr_assert_eq(h.om_ir_version, 3);
    cr_assert_eq(h.model_num, 1);
    cr_assert_str_eq(h.platform_version, "3.1.0.alpha");
    cr_assert_eq(h.platform_type, 5);
    cr_assert_eq(h.model_length, 0x123456789ull);
    cr_assert_eq(h.file_size, sizeof file);

    cr_assert_eq(read_buf(file, sizeof file, &d), CP_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(d.msg, "x.om is an Ascend offline model ("), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "resnet50"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "not a CPU .om; cannprof info shows its header"), "%s", d.msg);
}

Test(om_ascend, ascend_header_strings_are_bounded_and_terminated)
{
    uint8_t file[256];
    fake_ascend(file, sizeof file);
    memset(file + 84, 'N', 32);  /* name fills its field, no NUL */
    memset(file + 160, 'P', 20); /* so does the platform version */
    struct cp_ascend_om_header h;
    cr_assert_eq(cp_om_read_ascend_header(file, sizeof file, &h, NULL), CP_OK);
    cr_assert_eq(strlen(h.name), 32);
    cr_assert_eq(strlen(h.platform_version), 20);
    cr_assert_eq(h.ops, 77, "the next field is untouched by the name");
}

Test(om_ascend, ascend_header_refuses_short_or_foreign_input)
{
    uint8_t file[256];
    fake_ascend(file, sizeof file);
    struct cp_ascend_om_header h;
    struct cp_diag d;
    for (size_t n = 0; n < 256; n += 17) {
        cp_diag_init(&d);
        cr_assert_eq(cp_om_read_ascend_header(file, n, &h, &d), CP_ERR_CORRUPT);
        cr_assert_not_null(strstr(d.msg, "truncated"), "%s", d.msg);
    }
    /* A truncated Ascend file is still named as Ascend by the CPU reader. */
    cr_assert_eq(read_buf(file, 100, &d), CP_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(d.msg, "Ascend offline model (header truncated"), "%s", d.msg);
    file[0] = 'J';
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read_ascend_header(file, sizeof file, &h, &d), CP_ERR_CORRUPT);
    cr_assert_not_null(strstr(d.msg, "magic"), "%s", d.msg);
    cr_assert_eq(cp_om_sniff(file, sizeof file), CP_OM_KIND_UNKNOWN);
}

Test(om_ascend, ascend_file_on_disk_is_named_in_the_refusal)
{
    char *dir = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/npu.om", dir);
    uint8_t file[300];
    fake_ascend(file, sizeof file);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_write_atomic(path, file, sizeof file, &d), CP_OK);
    struct cp_graph *g = (struct cp_graph *)1;
    struct cp_om_meta m;
    cr_assert_eq(cp_om_read(path, &g, &m, &d), CP_ERR_UNSUPPORTED);
    cr_assert_null(g);
    char want[600];
    snprintf(want, sizeof want, "%s is an Ascend offline model", path);
    cr_assert_not_null(strstr(d.msg, want), "%s", d.msg);
    unlink(path);
    rmdir(dir);
    free(dir);
}
