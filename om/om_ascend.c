/* Recognising .om files: ours ("CPOM") and Ascend's ("IMOD").
 *
 * The Ascend header is 256 bytes. Only the magic is documented; the other
 * offsets follow from the declared field order with natural alignment (see
 * docs/om-format.md), so every field is read from fixed offsets inside the
 * 256 bytes, strings are cut at their declared length and cleaned, and
 * nothing read here is used as a size or an offset. */
#include "om/om_internal.h"

#include <stdio.h>
#include <string.h>

#define ASC_MAGIC         0x444F4D49u /* "IMOD" read as u32 LE */
#define ASC_HEADER_SIZE   256
#define ASC_OFF_MAGIC     0
#define ASC_OFF_HEADSIZE  4
#define ASC_OFF_VERSION   8
#define ASC_OFF_CHECKSUM  12 /* 64 bytes */
#define ASC_OFF_LENGTH    76
#define ASC_OFF_ENCRYPT   80
#define ASC_OFF_CHECK     81
#define ASC_OFF_MODELTYPE 82
#define ASC_OFF_GENMODE   83
#define ASC_OFF_NAME      84 /* 32 bytes */
#define ASC_NAME_LEN      32
#define ASC_OFF_OPS       116
#define ASC_OFF_USERINFO  120 /* 32 bytes */
#define ASC_OFF_IRVERSION 152
#define ASC_OFF_MODELNUM  156
#define ASC_OFF_PLATVER   160 /* 20 bytes */
#define ASC_PLATVER_LEN   20
#define ASC_OFF_PLATTYPE  180
#define ASC_OFF_MODELLEN  184 /* u64, after 3 bytes of padding */

enum cp_om_kind cp_om_sniff(const uint8_t *data, size_t len)
{
    if (!data || len < 4)
        return CP_OM_KIND_UNKNOWN;
    if (memcmp(data, CP_OM_MAGIC, 4) == 0)
        return CP_OM_KIND_CPU;
    if (om_get_u32(data) == ASC_MAGIC)
        return CP_OM_KIND_ASCEND;
    return CP_OM_KIND_UNKNOWN;
}

/* Copy a fixed-size text field: stop at the first NUL, replace anything not
 * printable ASCII by '?', always NUL-terminate. out has room for n + 1. */
static void copy_text(char *out, const uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i < n && p[i]; i++)
        out[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
    out[i] = 0;
}

enum cp_status cp_om_read_ascend_header(const uint8_t *data, size_t len,
                                        struct cp_ascend_om_header *out, struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    if (!data || len < ASC_HEADER_SIZE)
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "Ascend .om header truncated: %zu bytes, the header is %d", len,
                           ASC_HEADER_SIZE);
    uint32_t magic = om_get_u32(data + ASC_OFF_MAGIC);
    if (magic != ASC_MAGIC)
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "not an Ascend .om: magic 0x%08X, expected 0x%08X (\"IMOD\")", magic,
                           ASC_MAGIC);
    out->magic = magic;
    out->headsize = om_get_u32(data + ASC_OFF_HEADSIZE);
    out->version = om_get_u32(data + ASC_OFF_VERSION);
    out->length = om_get_u32(data + ASC_OFF_LENGTH);
    out->is_encrypt = data[ASC_OFF_ENCRYPT];
    out->is_checksum = data[ASC_OFF_CHECK];
    out->modeltype = data[ASC_OFF_MODELTYPE];
    out->genmode = data[ASC_OFF_GENMODE];
    copy_text(out->name, data + ASC_OFF_NAME, ASC_NAME_LEN);
    out->ops = om_get_u32(data + ASC_OFF_OPS);
    out->om_ir_version = om_get_u32(data + ASC_OFF_IRVERSION);
    out->model_num = om_get_u32(data + ASC_OFF_MODELNUM);
    copy_text(out->platform_version, data + ASC_OFF_PLATVER, ASC_PLATVER_LEN);
    out->platform_type = data[ASC_OFF_PLATTYPE];
    out->model_length = om_get_u64(data + ASC_OFF_MODELLEN);
    out->file_size = len;
    return CP_OK;
}

void om_ascend_describe(const uint8_t *data, size_t len, char *out, size_t n)
{
    struct cp_ascend_om_header h;
    if (cp_om_read_ascend_header(data, len, &h, NULL) != CP_OK) {
        snprintf(out, n, "header truncated: %zu of %d bytes", len, ASC_HEADER_SIZE);
        return;
    }
    snprintf(out, n, "model '%s', version 0x%08X, platform version '%s'", h.name, h.version,
             h.platform_version[0] ? h.platform_version : "?");
}
