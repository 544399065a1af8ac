/* Reading a CPU .om.
 *
 * Order matters: the magic and the format version come first (a newer
 * version may checksum differently), then the file length and the checksum,
 * and only then is anything else in the header believed. The section table
 * is checked completely (alignment, bounds, overlaps) before a section is
 * parsed, and the sections' contents are validated by om_meta.c and
 * om_graph.c. Integers are read byte by byte (no unaligned loads). */
#include "om/om_internal.h"

#include <stdio.h>
#include <string.h>

struct om_section {
    uint32_t kind;
    uint64_t off, len;
};

struct om_sections {
    struct om_section meta, graph, weights;
};

static const char *section_name(uint32_t kind)
{
    switch (kind) {
    case OM_SECTION_META:
        return "metadata";
    case OM_SECTION_GRAPH:
        return "graph";
    case OM_SECTION_WEIGHTS:
        return "weights";
    default:
        return "unknown";
    }
}

/* Magic, version, length and checksum: what must hold before anything else
 * in the file is read. */
static enum cp_status check_envelope(const char *name, const uint8_t *data, size_t len,
                                     uint32_t *version, struct cp_diag *d)
{
    if (len < 8)
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: truncated: %zu bytes, too short for a .om header", name, len);
    switch (cp_om_sniff(data, len)) {
    case CP_OM_KIND_CPU:
        break;
    case CP_OM_KIND_ASCEND: {
        char what[160];
        om_ascend_describe(data, len, what, sizeof what);
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s is an Ascend offline model (%s), not a CPU .om; cannprof info "
                           "shows its header",
                           name, what);
    }
    default:
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: not a cannprof .om: it starts with bytes %02x %02x %02x %02x, "
                           "not \"CPOM\" (nor an Ascend .om's \"IMOD\")",
                           name, data[0], data[1], data[2], data[3]);
    }
    uint32_t v = om_get_u32(data + OM_OFF_VERSION);
    if (v == 0)
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: format version 0 is not valid: corrupt file",
                           name);
    if (v > CP_OM_FORMAT_VERSION)
        return cp_diag_set(d, CP_ERR_VERSION,
                           "%s: format version %u is newer than this cannprof supports (%d); "
                           "upgrade cannprof",
                           name, v, CP_OM_FORMAT_VERSION);
    if (len < OM_FIXED_SIZE)
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: truncated: %zu bytes, shorter than the %d-byte fixed header", name,
                           len, OM_FIXED_SIZE);
    uint64_t file_len = om_get_u64(data + OM_OFF_FILE_LENGTH);
    if (file_len > len)
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: truncated: header says %llu bytes, file has %zu",
                           name, (unsigned long long)file_len, len);
    if (file_len < len)
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: header says %llu bytes but the file has %zu: the file is corrupt",
                           name, (unsigned long long)file_len, len);
    uint64_t stored = om_get_u64(data + OM_OFF_CHECKSUM);
    uint64_t computed = cp_hash64(data + OM_CHECKSUM_START, len - OM_CHECKSUM_START);
    if (stored != computed)
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: checksum mismatch (stored 0x%016llx, computed 0x%016llx): the "
                           "file is corrupt",
                           name, (unsigned long long)stored, (unsigned long long)computed);
    *version = v;
    return CP_OK;
}

static enum cp_status read_entry(const char *name, const uint8_t *data, size_t len,
                                 uint32_t header_size, uint32_t i, struct om_section *s,
                                 struct cp_diag *d)
{
    const uint8_t *e = data + OM_OFF_SECTIONS + (size_t)i * OM_SECTION_ENTRY;
    s->kind = om_get_u32(e + OM_SEC_OFF_KIND);
    s->off = om_get_u64(e + OM_SEC_OFF_OFFSET);
    s->len = om_get_u64(e + OM_SEC_OFF_LENGTH);
    const char *kn = section_name(s->kind);
    if (s->kind == 0 || om_get_u32(e + OM_SEC_OFF_RESV) != 0)
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: section table entry %u is malformed", name, i);
    if (s->off % CP_OM_ALIGN != 0)
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: %s section offset %llu is not a multiple of %d",
                           name, kn, (unsigned long long)s->off, CP_OM_ALIGN);
    if (s->off < header_size)
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: %s section at %llu overlaps the %u-byte header",
                           name, kn, (unsigned long long)s->off, header_size);
    if (s->off > len || s->len > len - s->off)
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: %s section [%llu, +%llu) lies outside the file (%zu bytes)", name,
                           kn, (unsigned long long)s->off, (unsigned long long)s->len, len);
    return CP_OK;
}

static enum cp_status check_sections(const char *name, const uint8_t *data, size_t len,
                                     struct om_sections *out, struct cp_diag *d)
{
    uint32_t header_size = om_get_u32(data + OM_OFF_HEADER_SIZE);
    uint32_t flags = om_get_u32(data + OM_OFF_FLAGS);
    uint32_t count = om_get_u32(data + OM_OFF_SECTION_COUNT);
    uint32_t unknown_required = flags & OM_FLAGS_REQUIRED_MASK & ~OM_FLAGS_KNOWN;
    if (unknown_required)
        return cp_diag_set(d, CP_ERR_VERSION,
                           "%s: needs format features this cannprof lacks (flags 0x%08x); "
                           "upgrade cannprof",
                           name, unknown_required);
    if (om_get_u32(data + OM_OFF_RESERVED) != 0)
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: reserved header field is not zero", name);
    if (count == 0 || count > OM_MAX_SECTIONS)
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: %u sections (expected 1..%d)", name, count,
                           OM_MAX_SECTIONS);
    if (header_size % CP_OM_ALIGN != 0 || header_size < OM_FIXED_SIZE + count * OM_SECTION_ENTRY ||
        header_size > len)
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: header size %u is invalid (%u sections, file of %zu bytes)", name,
                           header_size, count, len);
    struct om_section all[OM_MAX_SECTIONS];
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < count; i++) {
        enum cp_status st = read_entry(name, data, len, header_size, i, &all[i], d);
        if (st != CP_OK)
            return st;
        struct om_section *slot = all[i].kind == OM_SECTION_META      ? &out->meta
                                  : all[i].kind == OM_SECTION_GRAPH   ? &out->graph
                                  : all[i].kind == OM_SECTION_WEIGHTS ? &out->weights
                                                                      : NULL;
        if (!slot)
            continue; /* a section from a newer compatible writer: skipped */
        if (slot->kind)
            return cp_diag_set(d, CP_ERR_CORRUPT, "%s: two %s sections", name,
                               section_name(all[i].kind));
        *slot = all[i];
    }
    /* Bounds above make every end <= len, so the sums cannot overflow. */
    for (uint32_t i = 0; i < count; i++)
        for (uint32_t j = 0; j < i; j++) {
            const struct om_section *a = &all[j], *b = &all[i];
            if (a->len && b->len && a->off < b->off + b->len && b->off < a->off + a->len)
                return cp_diag_set(d, CP_ERR_CORRUPT, "%s: the %s and %s sections overlap", name,
                                   section_name(a->kind), section_name(b->kind));
        }
    if (!out->meta.kind || !out->graph.kind || !out->weights.kind)
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: no %s section", name,
                           !out->meta.kind    ? "metadata"
                           : !out->graph.kind ? "graph"
                                              : "weights");
    return CP_OK;
}

/* The reader proper; initializers point into `data`. */
static enum cp_status read_om(const char *name, const uint8_t *data, size_t len,
                              struct cp_graph **g, struct cp_om_meta *meta, struct cp_diag *d)
{
    struct om_sections s;
    uint32_t version = 0;
    enum cp_status st = check_envelope(name, data, len, &version, d);
    if (st != CP_OK)
        return st;
    if ((st = check_sections(name, data, len, &s, d)) != CP_OK)
        return st;
    struct cp_om_meta m;
    st = om_meta_parse(name, data + s.meta.off, (size_t)s.meta.len, version, meta ? &m : NULL, d);
    if (st != CP_OK)
        return st;
    st = om_graph_unpack(name, data + s.graph.off, (size_t)s.graph.len, data + s.weights.off,
                         s.weights.len, g, d);
    if (st != CP_OK) {
        if (meta)
            cp_om_meta_release(&m);
        return st;
    }
    if (meta)
        *meta = m;
    return CP_OK;
}

enum cp_status cp_om_read_buffer(const uint8_t *data, size_t len, const char *display_name,
                                 struct cp_graph **g, struct cp_om_meta *meta, struct cp_diag *d)
{
    *g = NULL;
    if (meta)
        memset(meta, 0, sizeof *meta);
    return read_om(display_name ? display_name : "(buffer)", data, len, g, meta, d);
}

enum cp_status cp_om_read(const char *path, struct cp_graph **g, struct cp_om_meta *meta,
                          struct cp_diag *d)
{
    *g = NULL;
    if (meta)
        memset(meta, 0, sizeof *meta);
    struct cp_mmap m;
    enum cp_status st = cp_mmap_open(path, &m, d);
    if (st != CP_OK)
        return st;
    st = read_om(path, m.data, m.len, g, meta, d);
    if (st != CP_OK) {
        cp_mmap_close(&m);
        return st;
    }
    if (cp_graph_adopt_mmap(*g, &m) != CP_OK) {
        cp_graph_free(*g);
        *g = NULL;
        cp_om_meta_release(meta);
        cp_mmap_close(&m);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    }
    if (meta)
        cp_om_meta_locate(meta, path);
    return CP_OK;
}

void cp_om_meta_locate(struct cp_om_meta *m, const char *path)
{
    size_t len = strlen(path);
    if (cp_path_has_suffix(path, ".om"))
        len -= 3;
    if (len >= sizeof m->config.output)
        len = 0;
    memcpy(m->config.output, path, len);
    m->config.output[len] = '\0';
}
