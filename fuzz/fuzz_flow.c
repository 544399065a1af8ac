/* Flows in ModelBox's format (`cannprof pipeline run|check FLOW.toml`):
 * the input is written as the flow file, in a folder that also holds an
 * input folder `in/` (so file_source nodes can be valid), and read and
 * checked (pipeline/flow.c: toml++, Graphviz's cgraph, the checks). A
 * refusal must be a clean one; an accepted flow must list its nodes. */
#include "harness.h"

#include "pipeline/pipeline.h"

#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024], in[1024], junk[1024];
    struct cp_diag md;
    cp_diag_init(&md);
    if (!fuzz_tmp_path("in", in, sizeof in) || cp_mkdir_p(in, 0755, &md) != CP_OK ||
        !fuzz_tmp_write("in/a.txt", (const uint8_t *)"x", 1, junk, sizeof junk))
        return 0;
    if (!fuzz_tmp_write("flow.toml", data, size, path, sizeof path))
        return 0;
    struct cp_flow *f = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_flow_load(path, &f, &d);
    fuzz_expect_refusal("cp_flow_load", st, &d);
    if (st == CP_OK) {
        if (cp_flow_n_nodes(f) == 0)
            fuzz_fail("an accepted flow has no nodes");
        for (size_t i = 0; i < cp_flow_n_nodes(f); i++) {
            struct cp_flow_node_info ni;
            cp_flow_node(f, i, &ni);
            if (!ni.name || !ni.flowunit || ni.workers < 1 || ni.batch_size < 1 ||
                ni.queue_size < 1)
                fuzz_fail("node %zu of an accepted flow is not whole", i);
        }
        cp_flow_free(f);
    }
    fuzz_tmp_remove(path);
    return 0;
}
