/* Tensor files (`run --input NAME=FILE`, `compare`, `tune --input`): an
 * ONNX TensorProto .pb or a NumPy .npy, chosen by content. The reader takes
 * a path, so the input goes to a file in the temporary folder; the same
 * bytes also go straight to the TensorProto reader the .pb path uses. */
#include "harness.h"

#include "onnx/onnx.h"
#include "runner/runner.h"

#include <stdlib.h>

static void check_size(const char *what, enum cp_dtype dt, int rank, const int64_t *dims,
                       size_t nbytes)
{
    if (rank < 0 || rank > CP_MAX_RANK)
        fuzz_fail("%s: rank %d", what, rank);
    size_t n = cp_dtype_size(dt);
    bool empty = false;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            fuzz_fail("%s: dimension %d is %lld", what, i, (long long)dims[i]);
        empty = empty || dims[i] == 0;
    }
    /* (2^40, 2^40, 0) holds nothing, though its other dimensions overflow */
    for (int i = 0; i < rank && !empty; i++)
        if (cp_mul_overflows(n, (size_t)dims[i], &n))
            fuzz_fail("%s: the shape's byte size overflows but the tensor was read", what);
    if (empty)
        n = 0;
    if (n != nbytes)
        fuzz_fail("%s: %zu bytes for a shape of %zu", what, nbytes, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024];
    if (fuzz_tmp_write("tensor.bin", data, size, path, sizeof path)) {
        struct cp_diag d;
        cp_diag_init(&d);
        struct cp_host_tensor t = {0};
        enum cp_status st = cp_tensor_read_file(path, &t, &d);
        fuzz_expect_refusal("cp_tensor_read_file", st, &d);
        if (st == CP_OK)
            check_size("cp_tensor_read_file", t.dtype, t.rank, t.dims, t.nbytes);
        cp_host_tensor_release(&t);
        fuzz_tmp_remove(path);
    }
    struct cp_onnx_tensor ot;
    struct cp_onnx_tensor_error err;
    if (cp_onnx_tensor_read(data, size, &ot, &err) == CP_ONNX_TENSOR_OK) {
        check_size("cp_onnx_tensor_read", ot.dtype, ot.rank, ot.dims, ot.nbytes);
        free(ot.data);
    } else if (ot.data) {
        fuzz_fail("cp_onnx_tensor_read failed but left data");
    }
    return 0;
}
