/* Writing a CPU .om: header, section table, metadata, graph, weights.
 *
 * The whole file is assembled in memory with every gap zeroed, so its bytes
 * depend on the graph and the metadata only; then the checksum is computed
 * and the file goes to disk atomically. */
#include "om/om_internal.h"

#include <stdlib.h>
#include <string.h>

struct om_layout {
    uint64_t meta_off, meta_len;
    uint64_t graph_off, graph_len;
    uint64_t weights_off, weights_len;
    uint64_t file_len;
};

static bool plan_layout(struct om_layout *l)
{
    l->meta_off = OM_HEADER_SIZE_V1;
    return l->meta_len <= UINT64_MAX - l->meta_off &&
           om_align_up(l->meta_off + l->meta_len, &l->graph_off) &&
           l->graph_len <= UINT64_MAX - l->graph_off &&
           om_align_up(l->graph_off + l->graph_len, &l->weights_off) &&
           l->weights_len <= UINT64_MAX - l->weights_off &&
           (l->file_len = l->weights_off + l->weights_len) <= SIZE_MAX;
}

static void put_section(uint8_t *buf, int i, uint32_t kind, uint64_t off, uint64_t len)
{
    uint8_t *e = buf + OM_OFF_SECTIONS + (size_t)i * OM_SECTION_ENTRY;
    om_put_u32(e + OM_SEC_OFF_KIND, kind);
    om_put_u32(e + OM_SEC_OFF_RESV, 0);
    om_put_u64(e + OM_SEC_OFF_OFFSET, off);
    om_put_u64(e + OM_SEC_OFF_LENGTH, len);
}

static void put_header(uint8_t *buf, const struct om_layout *l)
{
    memcpy(buf + OM_OFF_MAGIC, CP_OM_MAGIC, 4);
    om_put_u32(buf + OM_OFF_VERSION, CP_OM_FORMAT_VERSION);
    om_put_u32(buf + OM_OFF_HEADER_SIZE, OM_HEADER_SIZE_V1);
    om_put_u32(buf + OM_OFF_FLAGS, 0);
    om_put_u64(buf + OM_OFF_FILE_LENGTH, l->file_len);
    om_put_u32(buf + OM_OFF_SECTION_COUNT, 3);
    om_put_u32(buf + OM_OFF_RESERVED, 0);
    put_section(buf, 0, OM_SECTION_META, l->meta_off, l->meta_len);
    put_section(buf, 1, OM_SECTION_GRAPH, l->graph_off, l->graph_len);
    put_section(buf, 2, OM_SECTION_WEIGHTS, l->weights_off, l->weights_len);
    /* Last, over everything after the checksum field. */
    om_put_u64(buf + OM_OFF_CHECKSUM,
               cp_hash64(buf + OM_CHECKSUM_START, (size_t)l->file_len - OM_CHECKSUM_START));
}

enum cp_status cp_om_write_buffer(const struct cp_graph *g, const struct cp_om_meta *meta,
                                  uint8_t **data, size_t *len, struct cp_diag *d)
{
    *data = NULL;
    *len = 0;
    if (!g || !meta)
        return cp_diag_set(d, CP_ERR_INVALID, "cp_om_write: no graph or no metadata");
    struct om_packed_graph pg;
    enum cp_status st = om_graph_pack(g, &pg, d);
    if (st != CP_OK)
        return st;
    struct cp_buf mj;
    cp_buf_init(&mj);
    if ((st = om_meta_build(meta, &mj, d)) != CP_OK)
        goto out_free;
    /* Never write what we could not read back. */
    struct cp_diag local;
    cp_diag_init(&local);
    if (om_meta_parse("new .om", (const uint8_t *)mj.data, mj.len, CP_OM_FORMAT_VERSION, NULL,
                      &local) != CP_OK) {
        st = cp_diag_set(d, CP_ERR_INVALID, "the .om metadata would not read back: %s", local.msg);
        goto out_free;
    }

    struct om_layout l = {.meta_len = mj.len, .graph_len = pg.len, .weights_len = pg.weights_len};
    uint8_t *buf = NULL;
    if (!plan_layout(&l) || !(buf = cp_calloc((size_t)l.file_len, 1))) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory assembling a .om of %llu bytes",
                         (unsigned long long)l.file_len);
        goto out_free;
    }
    memcpy(buf + l.meta_off, mj.data, mj.len);
    if (pg.len)
        memcpy(buf + l.graph_off, pg.bytes, pg.len);
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        if (pg.blob_offset[i] != UINT64_MAX && t->nbytes)
            memcpy(buf + l.weights_off + pg.blob_offset[i], t->data, t->nbytes);
    }
    put_header(buf, &l);
    *data = buf;
    *len = (size_t)l.file_len;
out_free:
    cp_buf_release(&mj);
    free(pg.bytes);
    free(pg.blob_offset);
    return st;
}

enum cp_status cp_om_write(const char *path, const struct cp_graph *g,
                           const struct cp_om_meta *meta, struct cp_diag *d)
{
    uint8_t *data;
    size_t len;
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st = cp_om_write_buffer(g, meta, &data, &len, &local);
    if (st != CP_OK)
        return cp_diag_set(d, st, "%s: %s", path, local.msg);
    st = cp_file_write_atomic(path, data, len, d);
    free(data);
    return st;
}
