/* runner I/O: host tensors read from .npy and TensorProto .pb files, written
 * to .npy, and drawn at random. The .npy fixtures in tests/runner/data/ were
 * written by NumPy 1.24 (data/make_npy.py); the tests never need Python. */
#include "runner/runner.h"
#include "support/cli.h"
#include "support/run.h"

#include "proto/onnx.pb-c.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DATA_DIR CP_SOURCE_DIR "/tests/runner/data/"

/* ---- helpers ------------------------------------------------------------- */

static void write_file(const char *path, const void *data, size_t len)
{
    cr_assert(cp_t_write_file(path, data, len), "cannot write %s (see stderr)", path);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    uint8_t *data = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_read(path, &data, len, &d), CP_OK, "%s", d.msg);
    return data;
}

static void read_ok(const char *path, struct cp_host_tensor *t)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_tensor_read_file(path, t, &d);
    cr_assert_eq(st, CP_OK, "reading %s: %s", path, d.msg);
}

/* Read `path`, expect status `want`, a message naming the file and holding
 * `needle`, and an untouched (zeroed) tensor. */
static void read_fails(const char *path, enum cp_status want, const char *needle)
{
    struct cp_host_tensor t;
    struct cp_diag d;
    cp_diag_init(&d);
    memset(&t, 0xab, sizeof t);
    enum cp_status st = cp_tensor_read_file(path, &t, &d);
    cr_assert_eq(st, want, "%s: status %d (%s), wanted %d", path, st, d.msg, want);
    cr_assert_not_null(strstr(d.msg, path), "message does not name the file: %s", d.msg);
    if (needle)
        cr_assert_not_null(strstr(d.msg, needle), "message lacks '%s': %s", needle, d.msg);
    cr_assert_null(t.data);
    cr_assert_eq(t.nbytes, 0);
}

static void set_shape(struct cp_host_tensor *t, enum cp_dtype dt, int rank, const int64_t *dims)
{
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0)
        v = ldexpf((float)man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexpf((float)(man | 0x400), (int)exp - 25);
    return sign ? -v : v;
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* ---- host tensors -------------------------------------------------------- */

Test(io, numel_counts_scalars_zero_sizes_and_refuses_dynamic_dims)
{
    struct cp_host_tensor t;
    set_shape(&t, CP_DTYPE_F32, 0, NULL);
    cr_assert_eq(cp_host_tensor_numel(&t), 1);
    set_shape(&t, CP_DTYPE_F32, 3, (int64_t[]){2, 0, 5});
    cr_assert_eq(cp_host_tensor_numel(&t), 0);
    set_shape(&t, CP_DTYPE_F32, 2, (int64_t[]){3, 7});
    cr_assert_eq(cp_host_tensor_numel(&t), 21);
    set_shape(&t, CP_DTYPE_F32, 2, (int64_t[]){-1, 7});
    cr_assert_eq(cp_host_tensor_numel(&t), -1);
    set_shape(&t, CP_DTYPE_F32, 2, (int64_t[]){INT64_MAX, 3});
    cr_assert_eq(cp_host_tensor_numel(&t), -1);
    cp_host_tensor_release(&t);
    cp_host_tensor_release(NULL);
}

/* ---- .npy round trips ---------------------------------------------------- */

static void round_trip(const char *dir, enum cp_dtype dt, int rank, const int64_t *dims,
                       uint64_t seed)
{
    struct cp_host_tensor a, b;
    struct cp_diag d;
    cp_diag_init(&d);
    set_shape(&a, dt, rank, dims);
    cr_assert_eq(cp_tensor_fill_random(&a, seed, &d), CP_OK, "%s", d.msg);
    char name[64];
    snprintf(name, sizeof name, "rt_%s_r%d.npy", cp_dtype_name(dt), rank);
    char *path = cp_t_fmt("%s/%s", dir, name);
    cr_assert_eq(cp_tensor_write_npy(path, &a, &d), CP_OK, "%s", d.msg);
    read_ok(path, &b);
    cr_assert_eq(b.dtype, dt, "%s: dtype %s", name, cp_dtype_name(b.dtype));
    cr_assert_eq(b.rank, rank);
    for (int i = 0; i < rank; i++)
        cr_assert_eq(b.dims[i], dims[i]);
    cr_assert_eq(b.nbytes, a.nbytes);
    cr_assert_not_null(b.data);
    if (a.nbytes)
        cr_assert_eq(memcmp(a.data, b.data, a.nbytes), 0, "%s: data differs", name);
    char want[64];
    snprintf(want, sizeof want, "rt_%s_r%d", cp_dtype_name(dt), rank);
    cr_assert_str_eq(b.name, want);
    /* The data starts 64-byte aligned, as NumPy lays it out. */
    size_t len;
    uint8_t *raw = slurp(path, &len);
    cr_assert_eq((len - a.nbytes) % 64, 0, "%s: header of %zu bytes", name, len - a.nbytes);
    cr_assert_eq(raw[len - a.nbytes - 1], '\n');
    free(raw);
    free(path);
    cp_host_tensor_release(&a);
    cp_host_tensor_release(&b);
}

Test(io, npy_round_trip_keeps_every_dtype_and_shape)
{
    char *dir = cp_scratch_dir();
    static const int64_t dims[][4] = {{2, 3}, {7}, {1, 2, 3, 4}};
    for (int dt = CP_DTYPE_F32; dt < CP_DTYPE_COUNT; dt++) {
        if (dt == CP_DTYPE_U16) /* no .npy form: '<u2' is bf16 (io_npy.c) */
            continue;
        round_trip(dir, (enum cp_dtype)dt, 2, dims[0], 1);
        round_trip(dir, (enum cp_dtype)dt, 1, dims[1], 2);
        round_trip(dir, (enum cp_dtype)dt, 4, dims[2], 3);
        round_trip(dir, (enum cp_dtype)dt, 0, NULL, 4); /* scalar */
        round_trip(dir, (enum cp_dtype)dt, 3, (int64_t[]){3, 0, 2}, 5);
    }
    cp_scratch_remove(dir);
    free(dir);
}

Test(io, npy_round_trip_of_zero_size_first_dim)
{
    char *dir = cp_scratch_dir();
    round_trip(dir, CP_DTYPE_F32, 2, (int64_t[]){0, 3}, 9);
    round_trip(dir, CP_DTYPE_I64, 1, (int64_t[]){0}, 9);
    cp_scratch_remove(dir);
    free(dir);
}

/* What we write is byte for byte what NumPy 1.24 writes for the same array. */
Test(io, npy_writer_matches_numpy_bytes)
{
    static const char *const files[] = {
        "f32_2x3_v1.npy", "f16_3_v1.npy",    "i64_scalar_v1.npy", "i8_2x2_v1.npy",
        "u8_4_v1.npy",    "bool_2x2_v1.npy", "f32_0x3_v1.npy",
    };
    char *dir = cp_scratch_dir();
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char src[512];
        snprintf(src, sizeof src, DATA_DIR "%s", files[i]);
        struct cp_host_tensor t;
        read_ok(src, &t);
        char *dst = cp_t_fmt("%s/%s", dir, files[i]);
        struct cp_diag d;
        cp_diag_init(&d);
        cr_assert_eq(cp_tensor_write_npy(dst, &t, &d), CP_OK, "%s", d.msg);
        size_t la, lb;
        uint8_t *a = slurp(src, &la), *b = slurp(dst, &lb);
        cr_assert_eq(la, lb, "%s: NumPy wrote %zu bytes, we wrote %zu", files[i], la, lb);
        cr_assert_eq(memcmp(a, b, la), 0, "%s: bytes differ from NumPy's", files[i]);
        free(a);
        free(b);
        free(dst);
        cp_host_tensor_release(&t);
    }
    cp_scratch_remove(dir);
    free(dir);
}

Test(io, npy_writer_stores_bf16_as_u2_bit_patterns)
{
    char *dir = cp_scratch_dir();
    struct cp_host_tensor t;
    set_shape(&t, CP_DTYPE_BF16, 1, (int64_t[]){3});
    uint16_t bits[3] = {0x3f80, 0xc000, 0x0000};
    t.data = malloc(sizeof bits);
    memcpy(t.data, bits, sizeof bits);
    t.nbytes = sizeof bits;
    char *path = cp_t_fmt("%s/b.npy", dir);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_OK, "%s", d.msg);
    size_t la, lb;
    uint8_t *a = slurp(DATA_DIR "u2_bits_3_v1.npy", &la), *b = slurp(path, &lb);
    cr_assert_eq(la, lb);
    cr_assert_eq(memcmp(a, b, la), 0);
    free(a);
    free(b);
    free(path);
    cp_host_tensor_release(&t);
    cp_scratch_remove(dir);
    free(dir);
}

Test(io, npy_writer_normalises_bools_and_refuses_inconsistent_tensors)
{
    char *dir = cp_scratch_dir();
    char *path = cp_t_fmt("%s/t.npy", dir);
    struct cp_diag d;
    struct cp_host_tensor t, r;
    set_shape(&t, CP_DTYPE_BOOL, 1, (int64_t[]){3});
    t.data = malloc(3);
    memcpy(t.data, "\x00\x07\x01", 3);
    t.nbytes = 3;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_OK, "%s", d.msg);
    read_ok(path, &r);
    cr_assert_eq(memcmp(r.data, "\x00\x01\x01", 3), 0);
    cp_host_tensor_release(&r);

    t.nbytes = 2; /* lies about its size */
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, path), "%s", d.msg);
    t.nbytes = 3;
    t.dims[0] = -1; /* dynamic */
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_ERR_INVALID);
    t.dims[0] = 3;
    t.dtype = CP_DTYPE_UNDEFINED;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_ERR_UNSUPPORTED);
    cp_host_tensor_release(&t);
    free(path);
    cp_scratch_remove(dir);
    free(dir);
}

/* ---- .npy files written by NumPy ---------------------------------------- */

static void expect_grid(const char *file)
{
    struct cp_host_tensor t;
    read_ok(file, &t);
    cr_assert_eq(t.dtype, CP_DTYPE_F32);
    cr_assert_eq(t.rank, 2);
    cr_assert_eq(t.dims[0], 2);
    cr_assert_eq(t.dims[1], 3);
    cr_assert_eq(t.nbytes, 24);
    const float *v = t.data;
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(v[i], i * 0.5f - 1.0f, 0.0f, "%s[%d] = %g", file, i, (double)v[i]);
    const char *base = strrchr(file, '/') + 1;
    cr_assert_eq(strncmp(t.name, base, strlen(base) - 4), 0);
    cr_assert_eq(strlen(t.name), strlen(base) - 4, "name '%s'", t.name);
    cp_host_tensor_release(&t);
}

Test(io, reads_numpy_npy_format_versions_1_2_and_3)
{
    expect_grid(DATA_DIR "f32_2x3_v1.npy");
    expect_grid(DATA_DIR "f32_2x3_v2.npy");
    expect_grid(DATA_DIR "f32_2x3_v3.npy");
}

Test(io, reads_numpy_npy_of_every_supported_dtype)
{
    struct cp_host_tensor t;

    read_ok(DATA_DIR "f16_3_v1.npy", &t);
    cr_assert_eq(t.dtype, CP_DTYPE_F16);
    cr_assert_eq(t.rank, 1);
    cr_assert_eq(t.dims[0], 3);
    const uint16_t *h = t.data;
    cr_assert_float_eq(f16_to_f32(h[0]), 1.5f, 0.0f);
    cr_assert_float_eq(f16_to_f32(h[1]), -2.0f, 0.0f);
    cr_assert_float_eq(f16_to_f32(h[2]), 0.25f, 0.0f);
    cp_host_tensor_release(&t);

    read_ok(DATA_DIR "i64_scalar_v1.npy", &t);
    cr_assert_eq(t.dtype, CP_DTYPE_I64);
    cr_assert_eq(t.rank, 0);
    cr_assert_eq(t.nbytes, 8);
    cr_assert_eq(*(const int64_t *)t.data, -7);
    cr_assert_eq(cp_host_tensor_numel(&t), 1);
    cp_host_tensor_release(&t);

    read_ok(DATA_DIR "i32_5_v2.npy", &t);
    cr_assert_eq(t.dtype, CP_DTYPE_I32);
    cr_assert_eq(t.rank, 1);
    cr_assert_eq(t.dims[0], 5);
    const int32_t *i32 = t.data;
    cr_assert_eq(i32[2], -2);
    cr_assert_eq(i32[3], 300000);
    cr_assert_eq(i32[4], INT32_MIN);
    cp_host_tensor_release(&t);

    read_ok(DATA_DIR "i8_2x2_v1.npy", &t);
    cr_assert_eq(t.dtype, CP_DTYPE_I8);
    cr_assert_eq(((const int8_t *)t.data)[0], -128);
    cr_assert_eq(((const int8_t *)t.data)[3], 127);
    cp_host_tensor_release(&t);

    read_ok(DATA_DIR "u8_4_v1.npy", &t);
    cr_assert_eq(t.dtype, CP_DTYPE_U8);
    cr_assert_eq(((const uint8_t *)t.data)[3], 255);
    cp_host_tensor_release(&t);

    read_ok(DATA_DIR "bool_2x2_v1.npy", &t);
    cr_assert_eq(t.dtype, CP_DTYPE_BOOL);
    cr_assert_eq(memcmp(t.data, "\x01\x00\x00\x01", 4), 0);
    cp_host_tensor_release(&t);

    read_ok(DATA_DIR "u2_bits_3_v1.npy", &t);
    cr_assert_eq(t.dtype, CP_DTYPE_BF16);
    h = t.data;
    cr_assert_float_eq(bf16_to_f32(h[0]), 1.0f, 0.0f);
    cr_assert_float_eq(bf16_to_f32(h[1]), -2.0f, 0.0f);
    cp_host_tensor_release(&t);

    read_ok(DATA_DIR "f32_0x3_v1.npy", &t);
    cr_assert_eq(t.rank, 2);
    cr_assert_eq(t.dims[0], 0);
    cr_assert_eq(t.dims[1], 3);
    cr_assert_eq(t.nbytes, 0);
    cr_assert_not_null(t.data);
    cp_host_tensor_release(&t);
}

Test(io, refuses_big_endian_and_fortran_order_npy_and_reads_float64)
{
    read_fails(DATA_DIR "f32_big_endian.npy", CP_ERR_UNSUPPORTED, "big-endian");
    read_fails(DATA_DIR "f32_fortran.npy", CP_ERR_UNSUPPORTED, "Fortran");
    struct cp_host_tensor t;
    read_ok(DATA_DIR "f64_2_v1.npy", &t);
    cr_assert_eq(t.dtype, CP_DTYPE_F64);
    cr_assert_eq(t.nbytes, 2 * sizeof(double));
    cr_assert_eq(((const double *)t.data)[0], 1.0);
    cr_assert_eq(((const double *)t.data)[1], 2.0);
    cp_host_tensor_release(&t);
}

Test(io, refuses_to_write_u16_npy)
{
    char *dir = cp_scratch_dir();
    char *path = cp_t_fmt("%s/u16.npy", dir);
    struct cp_host_tensor t;
    set_shape(&t, CP_DTYPE_U16, 1, (int64_t[]){2});
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_fill_random(&t, 1, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(d.msg, "write it as a .pb file"), "%s", d.msg);
    cp_host_tensor_release(&t);
    cp_scratch_remove(dir);
    free(path);
    free(dir);
}

/* Build a .npy with a hand-written header (padded like NumPy's). */
static void make_npy(const char *path, int major, const char *dict, const void *data, size_t nbytes)
{
    size_t pre = major == 1 ? 10 : 12;
    size_t hl = strlen(dict) + 1;
    size_t pad = (64 - (pre + hl) % 64) % 64;
    size_t total = pre + hl + pad + nbytes;
    uint8_t *buf = calloc(1, total);
    cr_assert_not_null(buf);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    size_t H = hl + pad;
    buf[8] = (uint8_t)(H & 0xff);
    buf[9] = (uint8_t)(H >> 8);
    if (major != 1) {
        buf[10] = (uint8_t)(H >> 16);
        buf[11] = (uint8_t)(H >> 24);
    }
    memcpy(buf + pre, dict, strlen(dict));
    memset(buf + pre + strlen(dict), ' ', pad);
    buf[pre + hl + pad - 1] = '\n';
    if (nbytes)
        memcpy(buf + pre + hl + pad, data, nbytes);
    write_file(path, buf, total);
    free(buf);
}

Test(io, npy_header_is_parsed_like_a_python_dict)
{
    char *dir = cp_scratch_dir();
    char *path = cp_t_fmt("%s/h.npy", dir);
    struct cp_host_tensor t;
    const float two[2] = {1, 2};

    /* Any key order, double quotes, no trailing comma, Python 2 longs. */
    make_npy(path, 1, "{\"shape\": (2L,), 'fortran_order': False, \"descr\": \"<f4\"}", two, 8);
    read_ok(path, &t);
    cr_assert_eq(t.rank, 1);
    cr_assert_eq(t.dims[0], 2);
    cp_host_tensor_release(&t);

    /* Fortran order is harmless at rank 1. */
    make_npy(path, 2, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", two, 8);
    read_ok(path, &t);
    cp_host_tensor_release(&t);

    /* '?' is NumPy's one-letter bool code; non-0/1 bytes become 1. */
    make_npy(path, 1, "{'descr': '|?', 'fortran_order': False, 'shape': (2,), }", "\x00\x05", 2);
    read_ok(path, &t);
    cr_assert_eq(t.dtype, CP_DTYPE_BOOL);
    cr_assert_eq(memcmp(t.data, "\x00\x01", 2), 0);
    cp_host_tensor_release(&t);

    make_npy(path, 1, "{'descr': '<f4', 'shape': (2,), }", two, 8);
    read_fails(path, CP_ERR_PARSE, "fortran_order");
    make_npy(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", two, 8);
    read_fails(path, CP_ERR_PARSE, "'x'");
    make_npy(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", two, 8);
    read_fails(path, CP_ERR_PARSE, "tuple");
    make_npy(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", two, 8);
    read_fails(path, CP_ERR_PARSE, "non-negative");
    make_npy(path, 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", two, 8);
    read_fails(path, CP_ERR_PARSE, "fortran_order");
    make_npy(path, 1, "'descr': '<f4'", two, 8);
    read_fails(path, CP_ERR_PARSE, "'{'");
    make_npy(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", two, 8);
    read_fails(path, CP_ERR_PARSE, "after");
    make_npy(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", two, 8);
    read_fails(path, CP_ERR_PARSE, "malformed");
    make_npy(path, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", two, 8);
    read_fails(path, CP_ERR_UNSUPPORTED, "structured");
    make_npy(path, 1, "{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", two, 8);
    read_fails(path, CP_ERR_UNSUPPORTED, "string");
    make_npy(path, 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", two, 8);
    read_fails(path, CP_ERR_UNSUPPORTED, "complex");
    make_npy(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,2), }",
             two, 8);
    read_fails(path, CP_ERR_UNSUPPORTED, "dimensions");
    make_npy(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", two, 8);
    read_fails(path, CP_ERR_PARSE, "truncated");
    make_npy(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", two, 8);
    read_fails(path, CP_ERR_PARSE, "oversized");
    make_npy(path, 1,
             "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }", two,
             8);
    read_fails(path, CP_ERR_INVALID, "too many");
    make_npy(path, 4, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two, 8);
    read_fails(path, CP_ERR_VERSION, "4.0");
    free(path);
    cp_scratch_remove(dir);
    free(dir);
}

/* ---- TensorProto .pb files ------------------------------------------------ */

Test(io, reads_the_examples_test_data_pb_files)
{
    static const char *const models[] = {"nhwc_roundtrip", "resnet_tiny", "sd_unet_tiny",
                                         "transformer_encoder_op14", "transformer_encoder_op17"};
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        for (int k = 0; k < 3; k++) {
            for (int out = 0; out < 2; out++) {
                char path[512];
                snprintf(path, sizeof path,
                         CP_SOURCE_DIR "/examples/models/%s/test_data_set_0/%s_%d.pb", models[m],
                         out ? "output" : "input", k);
                if (!cp_path_exists(path))
                    continue;
                struct cp_host_tensor t;
                read_ok(path, &t);
                cr_assert_neq(t.dtype, CP_DTYPE_UNDEFINED);
                cr_assert_geq(t.rank, 0);
                int64_t numel = cp_host_tensor_numel(&t);
                cr_assert_geq(numel, 0);
                cr_assert_eq(t.nbytes, (size_t)numel * cp_dtype_size(t.dtype), "%s", path);
                cr_assert_not_null(t.data);
                cr_assert_neq(t.name[0], '\0', "%s has no name", path);
                if (t.dtype == CP_DTYPE_F32)
                    for (int64_t i = 0; i < numel; i++)
                        cr_assert(isfinite(((const float *)t.data)[i]), "%s[%lld]", path,
                                  (long long)i);
                cp_host_tensor_release(&t);
            }
        }
    }
    /* The first input of every example exists and is a float tensor. */
    struct cp_host_tensor t;
    read_ok(CP_SOURCE_DIR "/examples/models/resnet_tiny/test_data_set_0/input_0.pb", &t);
    cr_assert_eq(t.dtype, CP_DTYPE_F32);
    cr_assert_eq(t.rank, 4);
    cp_host_tensor_release(&t);
}

/* Pack a TensorProto with the given fields set into `path`. */
static void write_pb(const char *path, const Onnx__TensorProto *tp)
{
    size_t n = onnx__tensor_proto__get_packed_size(tp);
    uint8_t *buf = malloc(n ? n : 1);
    cr_assert_not_null(buf);
    onnx__tensor_proto__pack(tp, buf);
    write_file(path, buf, n);
    free(buf);
}

Test(io, pb_typed_fields_decode_for_every_dtype)
{
    char *dir = cp_scratch_dir();
    char *path = cp_t_fmt("%s/typed.pb", dir);
    struct cp_host_tensor t;
    int64_t dims[2] = {1, 3};

    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    tp.n_dims = 2;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.name = "x";

    float f[3] = {1.5f, -2.0f, 0.0f};
    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tp.n_float_data = 3;
    tp.float_data = f;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_eq(t.dtype, CP_DTYPE_F32);
    cr_assert_str_eq(t.name, "x");
    cr_assert_eq(memcmp(t.data, f, 12), 0);
    cp_host_tensor_release(&t);
    tp.n_float_data = 0;
    tp.float_data = NULL;

    int64_t l[3] = {INT64_MIN, 0, INT64_MAX};
    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    tp.n_int64_data = 3;
    tp.int64_data = l;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_eq(t.dtype, CP_DTYPE_I64);
    cr_assert_eq(memcmp(t.data, l, 24), 0);
    cp_host_tensor_release(&t);
    tp.n_int64_data = 0;
    tp.int64_data = NULL;

    int32_t w[3] = {0x3c00, 0xc000, 0}; /* f16 1, -2, 0 */
    tp.n_int32_data = 3;
    tp.int32_data = w;
    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_eq(t.dtype, CP_DTYPE_F16);
    cr_assert_eq(t.nbytes, 6);
    cr_assert_float_eq(f16_to_f32(((uint16_t *)t.data)[1]), -2.0f, 0.0f);
    cp_host_tensor_release(&t);

    w[0] = 0x3f80; /* bf16 1 */
    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_eq(t.dtype, CP_DTYPE_BF16);
    cr_assert_float_eq(bf16_to_f32(((uint16_t *)t.data)[0]), 1.0f, 0.0f);
    cp_host_tensor_release(&t);

    int32_t s[3] = {-5, 0, 7};
    tp.int32_data = s;
    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_eq(t.dtype, CP_DTYPE_I32);
    cr_assert_eq(memcmp(t.data, s, 12), 0);
    cp_host_tensor_release(&t);

    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_eq(t.dtype, CP_DTYPE_I8);
    cr_assert_eq(((int8_t *)t.data)[0], -5);
    cr_assert_eq(((int8_t *)t.data)[2], 7);
    cp_host_tensor_release(&t);

    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    s[0] = 250;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_eq(t.dtype, CP_DTYPE_U8);
    cr_assert_eq(((uint8_t *)t.data)[0], 250);
    cp_host_tensor_release(&t);

    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_eq(t.dtype, CP_DTYPE_BOOL);
    cr_assert_eq(memcmp(t.data, "\x01\x00\x01", 3), 0);
    cp_host_tensor_release(&t);

    /* raw_data, and a nameless tensor takes the file's name. */
    tp.n_int32_data = 0;
    tp.int32_data = NULL;
    tp.name = NULL;
    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tp.has_raw_data = 1;
    tp.raw_data.len = 12;
    tp.raw_data.data = (uint8_t *)f;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_str_eq(t.name, "typed");
    cr_assert_eq(memcmp(t.data, f, 12), 0);
    cp_host_tensor_release(&t);

    /* A scalar and an empty tensor. */
    tp.n_dims = 0;
    tp.raw_data.len = 4;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_eq(t.rank, 0);
    cr_assert_eq(t.nbytes, 4);
    cp_host_tensor_release(&t);
    int64_t zero[2] = {0, 4};
    tp.n_dims = 2;
    tp.dims = zero;
    tp.has_raw_data = 0;
    write_pb(path, &tp);
    read_ok(path, &t);
    cr_assert_eq(t.nbytes, 0);
    cr_assert_eq(t.dims[1], 4);
    cp_host_tensor_release(&t);

    free(path);
    cp_scratch_remove(dir);
    free(dir);
}

Test(io, pb_refuses_unsupported_and_inconsistent_tensors)
{
    char *dir = cp_scratch_dir();
    char *path = cp_t_fmt("%s/bad.pb", dir);
    int64_t dims[1] = {2};
    double dd[2] = {1, 2};
    float f[2] = {1, 2};
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    tp.n_dims = 1;
    tp.dims = dims;
    tp.has_data_type = 1;

    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128;
    tp.n_double_data = 2;
    tp.double_data = dd;
    write_pb(path, &tp);
    read_fails(path, CP_ERR_UNSUPPORTED, "COMPLEX128");

    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    write_pb(path, &tp);
    read_fails(path, CP_ERR_PARSE, "double_data");
    tp.n_double_data = 0;

    tp.n_float_data = 1;
    tp.float_data = f;
    write_pb(path, &tp);
    read_fails(path, CP_ERR_PARSE, "needs 2");

    tp.n_float_data = 2;
    tp.has_raw_data = 1;
    tp.raw_data.len = 8;
    tp.raw_data.data = (uint8_t *)f;
    write_pb(path, &tp);
    read_fails(path, CP_ERR_PARSE, "both");

    tp.n_float_data = 0;
    tp.raw_data.len = 7;
    write_pb(path, &tp);
    read_fails(path, CP_ERR_PARSE, "raw_data");

    tp.raw_data.len = 8;
    dims[0] = -2;
    write_pb(path, &tp);
    read_fails(path, CP_ERR_PARSE, "negative");
    dims[0] = 2;

    tp.has_data_location = 1;
    tp.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    write_pb(path, &tp);
    read_fails(path, CP_ERR_UNSUPPORTED, "external");
    tp.has_data_location = 0;

    tp.has_data_type = 0;
    write_pb(path, &tp);
    read_fails(path, CP_ERR_PARSE, "data_type");

    free(path);
    cp_scratch_remove(dir);
    free(dir);
}

/* ---- format by content, bad files -------------------------------------- */

static void copy_file(const char *src, const char *dst)
{
    size_t n;
    uint8_t *p = slurp(src, &n);
    write_file(dst, p, n);
    free(p);
}

Test(io, format_is_chosen_by_content_not_by_name)
{
    char *dir = cp_scratch_dir();
    char *a = cp_t_fmt("%s/really_npy.pb", dir);
    char *b = cp_t_fmt("%s/really_pb.npy", dir);
    copy_file(DATA_DIR "f32_2x3_v1.npy", a);
    copy_file(CP_SOURCE_DIR "/examples/models/sd_unet_tiny/test_data_set_0/input_1.pb", b);
    struct cp_host_tensor t;
    read_ok(a, &t);
    cr_assert_eq(t.dims[1], 3);
    cr_assert_str_eq(t.name, "really_npy");
    cp_host_tensor_release(&t);
    read_ok(b, &t);
    cr_assert_neq(t.dtype, CP_DTYPE_UNDEFINED);
    cp_host_tensor_release(&t);
    free(a);
    free(b);
    cp_scratch_remove(dir);
    free(dir);
}

/* Every prefix of a good file is refused with a message, never a crash. */
static void check_prefixes(const char *dir, const char *src, const char *name)
{
    size_t n;
    uint8_t *p = slurp(src, &n);
    char *path = cp_t_fmt("%s/%s", dir, name);
    for (size_t k = 0; k < n; k++) {
        write_file(path, p, k);
        struct cp_host_tensor t;
        struct cp_diag d;
        cp_diag_init(&d);
        enum cp_status st = cp_tensor_read_file(path, &t, &d);
        cr_assert_neq(st, CP_OK, "%s cut at %zu of %zu bytes was accepted", src, k, n);
        cr_assert_not_null(strstr(d.msg, path), "%s", d.msg);
        cr_assert_null(t.data);
    }
    free(path);
    free(p);
}

Test(io, truncated_files_are_refused_at_every_length)
{
    char *dir = cp_scratch_dir();
    check_prefixes(dir, DATA_DIR "f32_2x3_v1.npy", "cut.npy");
    check_prefixes(dir, DATA_DIR "i32_5_v2.npy", "cut2.npy");
    check_prefixes(dir, CP_SOURCE_DIR "/examples/models/sd_unet_tiny/test_data_set_0/input_1.pb",
                   "cut.pb");
    cp_scratch_remove(dir);
    free(dir);
}

Test(io, garbage_empty_and_missing_files_get_clear_errors)
{
    char *dir = cp_scratch_dir();
    char *path = cp_t_fmt("%s/junk.bin", dir);

    write_file(path, "", 0);
    read_fails(path, CP_ERR_PARSE, "empty");

    write_file(path, "hello, world\n", 13);
    read_fails(path, CP_ERR_PARSE, "neither");

    write_file(path, "\x93NUM", 4);
    read_fails(path, CP_ERR_PARSE, "truncated");

    /* Seeded junk: whatever protobuf-c makes of it, we refuse it cleanly. */
    uint8_t junk[512];
    uint64_t x = 0x1234567;
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + (size_t)(round * 7 % 511);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            junk[i] = (uint8_t)x;
        }
        write_file(path, junk, n);
        struct cp_host_tensor t;
        struct cp_diag d;
        cp_diag_init(&d);
        if (cp_tensor_read_file(path, &t, &d) == CP_OK) {
            /* Junk that happens to be a valid TensorProto must at least be
             * self-consistent. */
            cr_assert_eq((int64_t)t.nbytes,
                         cp_host_tensor_numel(&t) * (int64_t)cp_dtype_size(t.dtype));
            cp_host_tensor_release(&t);
        } else {
            cr_assert_not_null(strstr(d.msg, path), "%s", d.msg);
            cr_assert_null(t.data);
        }
    }

    read_fails(CP_SOURCE_DIR "/examples/models/resnet_tiny.onnx", CP_ERR_PARSE, NULL);
    read_fails(dir, CP_ERR_IO, "not a regular file");
    char *missing = cp_t_fmt("%s/missing.npy", dir);
    read_fails(missing, CP_ERR_IO, "cannot open");
    char *fifo = cp_t_fmt("%s/fifo.npy", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    read_fails(fifo, CP_ERR_IO, "not a regular file");
    free(fifo);
    free(missing);
    free(path);
    cp_scratch_remove(dir);
    free(dir);
}

/* ---- random inputs ------------------------------------------------------- */

static struct cp_host_tensor random_tensor(enum cp_dtype dt, int64_t n, uint64_t seed)
{
    struct cp_host_tensor t;
    set_shape(&t, dt, 2, (int64_t[]){n / 4, 4});
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_fill_random(&t, seed, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(t.nbytes, (size_t)n * cp_dtype_size(dt));
    return t;
}

Test(io, random_fill_is_deterministic_per_seed)
{
    for (int dt = CP_DTYPE_F32; dt < CP_DTYPE_COUNT; dt++) {
        struct cp_host_tensor a = random_tensor((enum cp_dtype)dt, 4096, 42);
        struct cp_host_tensor b = random_tensor((enum cp_dtype)dt, 4096, 42);
        struct cp_host_tensor c = random_tensor((enum cp_dtype)dt, 4096, 43);
        cr_assert_eq(memcmp(a.data, b.data, a.nbytes), 0, "%s: same seed, different bytes",
                     cp_dtype_name((enum cp_dtype)dt));
        cr_assert_neq(memcmp(a.data, c.data, a.nbytes), 0, "%s: different seeds, same bytes",
                      cp_dtype_name((enum cp_dtype)dt));
        cp_host_tensor_release(&a);
        cp_host_tensor_release(&b);
        cp_host_tensor_release(&c);
    }
}

Test(io, random_fill_is_a_fixed_sequence)
{
    /* Pin the generator: changing it changes every "random" benchmark input. */
    struct cp_host_tensor t = random_tensor(CP_DTYPE_I64, 8, 0);
    const int64_t *v = t.data;
    int64_t again[8];
    memcpy(again, v, sizeof again);
    cp_host_tensor_release(&t);
    t = random_tensor(CP_DTYPE_I64, 16, 0); /* a longer draw starts the same */
    cr_assert_eq(memcmp(t.data, again, sizeof again), 0);
    cp_host_tensor_release(&t);
}

Test(io, random_values_stay_in_their_ranges)
{
    const int64_t n = 1 << 16;
    struct cp_host_tensor t = random_tensor(CP_DTYPE_F32, n, 7);
    double sum = 0, lo = 1, hi = -1;
    for (int64_t i = 0; i < n; i++) {
        float v = ((const float *)t.data)[i];
        cr_assert(v >= -1.0f && v < 1.0f, "f32 %g", (double)v);
        sum += v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    cr_assert_lt(fabs(sum / (double)n), 0.02, "mean %g", sum / (double)n);
    cr_assert_lt(lo, -0.99);
    cr_assert_gt(hi, 0.99);
    cp_host_tensor_release(&t);

    t = random_tensor(CP_DTYPE_F16, n, 7);
    for (int64_t i = 0; i < n; i++) {
        float v = f16_to_f32(((const uint16_t *)t.data)[i]);
        cr_assert(v >= -1.0f && v < 1.0f, "f16 %g", (double)v);
    }
    cp_host_tensor_release(&t);
    t = random_tensor(CP_DTYPE_BF16, n, 7);
    for (int64_t i = 0; i < n; i++) {
        float v = bf16_to_f32(((const uint16_t *)t.data)[i]);
        cr_assert(v >= -1.0f && v < 1.0f, "bf16 %g", (double)v);
    }
    cp_host_tensor_release(&t);

    static const enum cp_dtype ints[] = {CP_DTYPE_I8, CP_DTYPE_U8, CP_DTYPE_I32, CP_DTYPE_I64};
    for (size_t k = 0; k < 4; k++) {
        t = random_tensor(ints[k], n, 7);
        int seen[10] = {0};
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            switch (ints[k]) {
            case CP_DTYPE_I8:
                v = ((const int8_t *)t.data)[i];
                break;
            case CP_DTYPE_U8:
                v = ((const uint8_t *)t.data)[i];
                break;
            case CP_DTYPE_I32:
                v = ((const int32_t *)t.data)[i];
                break;
            default:
                v = ((const int64_t *)t.data)[i];
                break;
            }
            cr_assert(v >= 0 && v < 10, "%s %lld", cp_dtype_name(ints[k]), (long long)v);
            seen[v]++;
        }
        for (int j = 0; j < 10; j++)
            cr_assert_gt(seen[j], 0);
        cp_host_tensor_release(&t);
    }

    t = random_tensor(CP_DTYPE_BOOL, n, 7);
    int64_t ones = 0;
    for (int64_t i = 0; i < n; i++) {
        uint8_t v = ((const uint8_t *)t.data)[i];
        cr_assert(v <= 1);
        ones += v;
    }
    cr_assert(ones > n / 3 && ones < 2 * n / 3, "%lld ones", (long long)ones);
    cp_host_tensor_release(&t);
}

Test(io, random_fill_handles_scalars_and_refuses_dynamic_shapes)
{
    struct cp_host_tensor t;
    struct cp_diag d;
    set_shape(&t, CP_DTYPE_F32, 0, NULL);
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_fill_random(&t, 1, &d), CP_OK);
    cr_assert_eq(t.nbytes, 4);
    cp_host_tensor_release(&t);

    set_shape(&t, CP_DTYPE_F32, 2, (int64_t[]){0, 5});
    cr_assert_eq(cp_tensor_fill_random(&t, 1, &d), CP_OK);
    cr_assert_eq(t.nbytes, 0);
    cr_assert_not_null(t.data);
    cp_host_tensor_release(&t);

    set_shape(&t, CP_DTYPE_F32, 2, (int64_t[]){-1, 5});
    snprintf(t.name, sizeof t.name, "latent");
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_fill_random(&t, 1, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "latent"), "%s", d.msg);
    cr_assert_null(t.data);
}
