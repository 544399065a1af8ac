/* CPU .om files (`info`, `run`, `bench`, `tune` on an .om): the reader
 * checks the whole container before it builds the graph; then the graph is
 * verified and its shapes inferred as the runtime's planner does, and the
 * recorded config printed back as `info` prints it.
 *
 * Almost every mutation of a .om breaks its checksum (docs/om-format.md),
 * which the reader checks before anything else, so an input that starts
 * with the magic is read twice: as it is, and with `file_length` and the
 * checksum rewritten to fit it, so that mutations reach the checks behind
 * the checksum. */
#include "harness.h"

#include "graph/graph.h"
#include "om/om.h"

#include <stdlib.h>
#include <string.h>

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void read_om(const uint8_t *data, size_t size)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_graph *g = NULL;
    struct cp_om_meta meta = {0};
    enum cp_status st = cp_om_read_buffer(data, size, "fuzz.om", &g, &meta, &d);
    fuzz_expect_refusal("cp_om_read_buffer", st, &d);
    if (st == CP_OK) {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_convert_config_cmdline(&meta.config, &b);
        cp_convert_config_json(&meta.config, &b);
        cp_buf_release(&b);
        char id[17];
        cp_convert_config_id(&meta.config, id);
        if ((st = cp_graph_verify(g, &d)) == CP_OK)
            st = cp_graph_infer(g, &d);
        fuzz_expect_refusal("verify/infer of a read .om", st, &d);
    } else if (g) {
        fuzz_fail("cp_om_read_buffer failed but returned a graph");
    }
    cp_graph_free(g);
    cp_om_meta_release(&meta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_om(data, size);
    if (size < 40 || memcmp(data, CP_OM_MAGIC, 4) != 0)
        return 0;
    uint8_t *fixed = malloc(size);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    put_u64(fixed + 24, (uint64_t)size);
    put_u64(fixed + 8, cp_hash64(fixed + 16, size - 16));
    read_om(fixed, size);
    free(fixed);
    return 0;
}
