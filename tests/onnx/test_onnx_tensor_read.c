/* One set of TensorProto rules: a tensor file read with cp_onnx_tensor_read
 * (as the runtime reads input .pb files) and the same proto decoded as a
 * model's initializer give the same dtype, shape and bytes, and refuse the
 * same protos, cp_onnx_tensor_read naming the fault. */
#include <criterion/criterion.h>

#include "onnx/onnx_internal.h"
#include "proto/onnx.pb-c.h"

#include <stdlib.h>
#include <string.h>

/* Decode tp both ways. OUT: *t (cp_onnx_tensor_read's), the initializer's
 * status. Returns cp_onnx_tensor_read's fault. */
static enum cp_onnx_tensor_fault both_ways(const Onnx__TensorProto *tp, struct cp_onnx_tensor *t,
                                           struct cp_onnx_tensor_error *e, enum cp_status *init_st)
{
    size_t n = onnx__tensor_proto__get_packed_size(tp);
    uint8_t *buf = malloc(n ? n : 1);
    cr_assert_not_null(buf);
    onnx__tensor_proto__pack(tp, buf);
    enum cp_onnx_tensor_fault f = cp_onnx_tensor_read(buf, n, t, e);
    free(buf);

    struct cp_diag d;
    cp_diag_init(&d);
    struct onnx_ctx c;
    memset(&c, 0, sizeof c);
    c.g = cp_graph_create();
    c.d = &d;
    c.where = "test.onnx";
    cr_assert_not_null(c.g);
    enum cp_dtype dt;
    struct cp_shape s;
    void *data;
    size_t nbytes;
    *init_st = onnx_tensor_decode(&c, tp, "initializer 't'", &dt, &s, &data, &nbytes);
    if (*init_st == CP_OK) {
        cr_assert_eq(f, CP_ONNX_TENSOR_OK, "the initializer decodes, the file does not (%d)", f);
        cr_assert_eq(t->dtype, dt);
        cr_assert_eq(t->rank, s.rank);
        for (int i = 0; i < s.rank; i++)
            cr_assert_eq(t->dims[i], s.dims[i].value);
        cr_assert_eq(t->nbytes, nbytes);
        cr_assert((nbytes == 0 && !t->data && !data) || memcmp(t->data, data, nbytes) == 0,
                  "the two decodings differ");
    }
    free(data);
    cp_graph_free(c.g);
    return f;
}

static Onnx__TensorProto proto(int onnx_type, size_t rank, int64_t *dims)
{
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    tp.has_data_type = 1;
    tp.data_type = onnx_type;
    tp.n_dims = rank;
    tp.dims = dims;
    return tp;
}

Test(onnx_tensor_read, typed_fields_and_raw_data_decode_alike)
{
    int64_t dims[2] = {2, 2};
    struct cp_onnx_tensor t;
    struct cp_onnx_tensor_error e;
    enum cp_status st;

    int32_t halves[4] = {0x3c00, 0x7fff3c00, -1, 0x10000}; /* high bits are not the value */
    Onnx__TensorProto f16 = proto(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, 2, dims);
    f16.n_int32_data = 4;
    f16.int32_data = halves;
    cr_assert_eq(both_ways(&f16, &t, &e, &st), CP_ONNX_TENSOR_OK);
    cr_assert_eq(st, CP_OK);
    const uint16_t *h = t.data;
    cr_assert(h[0] == 0x3c00 && h[1] == 0x3c00 && h[2] == 0xffff && h[3] == 0);
    free(t.data);

    int32_t small[4] = {-1, 255, 256, 7};
    Onnx__TensorProto i8 = proto(ONNX__TENSOR_PROTO__DATA_TYPE__INT8, 2, dims);
    i8.n_int32_data = 4;
    i8.int32_data = small;
    cr_assert_eq(both_ways(&i8, &t, &e, &st), CP_ONNX_TENSOR_OK);
    const int8_t *b = t.data;
    cr_assert(b[0] == -1 && b[1] == -1 && b[2] == 0 && b[3] == 7);
    free(t.data);

    uint8_t raw_bools[4] = {0, 2, 1, 255};
    Onnx__TensorProto bl = proto(ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 2, dims);
    bl.has_raw_data = 1;
    bl.raw_data.len = 4;
    bl.raw_data.data = raw_bools;
    bl.name = "mask";
    cr_assert_eq(both_ways(&bl, &t, &e, &st), CP_ONNX_TENSOR_OK);
    const uint8_t *u = t.data;
    cr_assert(u[0] == 0 && u[1] == 1 && u[2] == 1 && u[3] == 1, "bools become 0/1");
    cr_assert_str_eq(t.name, "mask");
    free(t.data);

    int64_t empty_dims[2] = {0, 3};
    Onnx__TensorProto empty = proto(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, empty_dims);
    cr_assert_eq(both_ways(&empty, &t, &e, &st), CP_ONNX_TENSOR_OK);
    cr_assert_eq(t.nbytes, 0);
    cr_assert_null(t.data);
}

Test(onnx_tensor_read, both_readers_refuse_the_same_protos)
{
    int64_t dims[2] = {2, 2}, neg[2] = {2, -1}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 4};
    float f[4] = {1, 2, 3, 4};
    double dd[4] = {1, 2, 3, 4};
    struct cp_onnx_tensor t;
    struct cp_onnx_tensor_error e;
    enum cp_status st;

    Onnx__TensorProto tp = proto(0, 2, dims);
    tp.has_data_type = 0;
    cr_assert_eq(both_ways(&tp, &t, &e, &st), CP_ONNX_TENSOR_NO_DTYPE);
    cr_assert_neq(st, CP_OK);

    tp = proto(ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128, 2, dims);
    cr_assert_eq(both_ways(&tp, &t, &e, &st), CP_ONNX_TENSOR_DTYPE);
    cr_assert_eq(e.onnx_type, ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128);
    cr_assert_eq(st, CP_ERR_UNSUPPORTED);

    tp = proto(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 9, nine);
    cr_assert_eq(both_ways(&tp, &t, &e, &st), CP_ONNX_TENSOR_RANK);
    cr_assert_eq(e.have, 9);
    cr_assert_eq(st, CP_ERR_UNSUPPORTED);

    tp = proto(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, neg);
    cr_assert_eq(both_ways(&tp, &t, &e, &st), CP_ONNX_TENSOR_NEGATIVE_DIM);
    cr_assert(e.axis == 1 && e.have == -1);
    cr_assert_neq(st, CP_OK);

    tp = proto(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dims);
    tp.n_double_data = 4;
    tp.double_data = dd;
    cr_assert_eq(both_ways(&tp, &t, &e, &st), CP_ONNX_TENSOR_OTHER_FIELD);
    cr_assert_str_eq(e.field, "double_data");
    cr_assert_str_eq(e.home, "float_data");
    cr_assert_neq(st, CP_OK);

    tp = proto(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dims);
    tp.n_float_data = 4;
    tp.float_data = f;
    tp.has_raw_data = 1;
    tp.raw_data.len = 16;
    tp.raw_data.data = (uint8_t *)f;
    cr_assert_eq(both_ways(&tp, &t, &e, &st), CP_ONNX_TENSOR_BOTH);
    cr_assert_neq(st, CP_OK);

    tp.n_float_data = 0;
    tp.raw_data.len = 15;
    cr_assert_eq(both_ways(&tp, &t, &e, &st), CP_ONNX_TENSOR_RAW_SIZE);
    cr_assert(e.have == 15 && e.want == 16);
    cr_assert_neq(st, CP_OK);

    tp.has_raw_data = 0;
    tp.n_float_data = 3;
    tp.float_data = f;
    cr_assert_eq(both_ways(&tp, &t, &e, &st), CP_ONNX_TENSOR_COUNT);
    cr_assert(e.have == 3 && e.want == 4 && !e.external_entries);
    cr_assert_neq(st, CP_OK);

    tp.has_data_location = 1;
    tp.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    cr_assert_eq(both_ways(&tp, &t, &e, &st), CP_ONNX_TENSOR_EXTERNAL);
    cr_assert_neq(st, CP_OK, "a model read from memory has no folder for external data");

    uint8_t junk[3] = {0xff, 0xff, 0xff};
    cr_assert_eq(cp_onnx_tensor_read(junk, sizeof junk, &t, &e), CP_ONNX_TENSOR_UNREADABLE);
    cr_assert_null(t.data);
}
