/* ONNX models (`convert --model`, `info`, `run`, `compare` on an .onnx):
 * import from bytes, then what `cannprof info` does with a model that
 * imported (verify, compact, infer shapes, count). External data is refused
 * (no folder is given), so the target reads no file. */
#include "harness.h"

#include "graph/graph.h"
#include "onnx/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_graph *g = NULL;
    enum cp_status st = cp_onnx_import_buffer(data, size, NULL, "fuzz.onnx", NULL, 0, &g, &d);
    fuzz_expect_refusal("cp_onnx_import_buffer", st, &d);
    if (st != CP_OK) {
        if (g)
            fuzz_fail("cp_onnx_import_buffer failed but returned a graph");
        return 0;
    }
    if ((st = cp_graph_verify(g, &d)) == CP_OK && (st = cp_graph_compact(g, &d)) == CP_OK &&
        (st = cp_graph_infer(g, &d)) == CP_OK) {
        struct cp_graph_stats s;
        cp_graph_stats(g, &s);
    }
    fuzz_expect_refusal("verify/compact/infer of an imported model", st, &d);
    cp_graph_free(g);
    return 0;
}
