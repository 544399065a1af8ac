/* The runtime commands driven as a user would: `run` (outputs match the
 * reference within 1e-4, seeded random inputs, JSON summary, refusal of bad
 * inputs and damaged models, NaN/Inf reporting, --batch), `bench`
 * (statistics as text and JSON, option checks, the SQLite trace it writes)
 * and `export` (Chrome JSON and folded stacks, refusal of bad arguments). */
#include "core/core.h"
#include "onnx/onnx.pb-c.h"
#include "runner/runner.h"
#include "support/run.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fixture and helpers ---------------------------------------------------- */

static char *g_dir; /* fresh scratch folder per test (each test is its own process) */

static void setup(void)
{
    g_dir = cp_scratch_dir();
    cr_assert_not_null(g_dir, "cannot create a scratch folder");
}

static void teardown(void)
{
    cp_scratch_remove(g_dir);
    free(g_dir);
    g_dir = NULL;
}

TestSuite(cli_runtime, .init = setup, .fini = teardown);

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    struct cp_buf b;
    cp_buf_init(&b);
    va_list ap;
    va_start(ap, f);
    cp_buf_vprintf(&b, f, ap);
    va_end(ap);
    cr_assert_eq(cp_buf_status(&b), CP_OK);
    return cp_buf_steal(&b);
}

static char *scratch(const char *name)
{
    return fmt("%s/%s", g_dir, name);
}

static char *model_path(const char *name)
{
    char buf[2048];
    return fmt("%s", cp_example_model(buf, sizeof buf, name));
}

static char *test_file(const char *model, const char *file)
{
    return fmt("%s/examples/models/%s/test_data_set_0/%s", CP_SOURCE_DIR, model, file);
}

static uint8_t *read_all(const char *path, size_t *len)
{
    uint8_t *data = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_read(path, &data, len, &d), CP_OK, "%s", d.msg);
    return data;
}

static void write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

static bool same_bytes(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    uint8_t *da = read_all(a, &la), *db = read_all(b, &lb);
    bool same = la == lb && memcmp(da, db, la) == 0;
    free(da);
    free(db);
    return same;
}

/* A command line assembled piece by piece (cp_run_cli takes a fixed list). */
struct argv_b {
    char *v[64];
    size_t n;
};

static void argv_init(struct argv_b *a)
{
    a->n = 0;
    a->v[a->n++] = (char *)CP_CLI;
    a->v[a->n] = NULL;
}

static void argv_push(struct argv_b *a, const char *s)
{
    cr_assert_lt(a->n, 62);
    a->v[a->n++] = (char *)s;
    a->v[a->n] = NULL;
}

/* Convert examples/models/NAME.onnx to <scratch>/NAME.om; asserts success. */
static char *convert_ok(const char *name)
{
    char *model = model_path(name);
    char *mflag = fmt("--model=%s", model);
    char *oflag = fmt("--output=%s/%s", g_dir, name);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, NULL);
    cr_assert_eq(r.signal, 0, "convert %s: signal %d; stderr: %s", name, r.signal, r.err);
    cr_assert_eq(r.exit_code, 0, "convert %s: exit %d; stderr: %s", name, r.exit_code, r.err);
    cp_run_release(&r);
    char *om = fmt("%s/%s.om", g_dir, name);
    cr_assert(cp_path_exists(om), "convert %s said ok but %s is missing", name, om);
    free(model);
    free(mflag);
    free(oflag);
    return om;
}

static struct cp_host_tensor read_tensor(const char *path)
{
    struct cp_host_tensor t;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_read_file(path, &t, &d), CP_OK, "%s", d.msg);
    return t;
}

/* Relative L2 error of `got` against `want`; both must be f32 of one shape. */
static double rel_l2(const struct cp_host_tensor *got, const struct cp_host_tensor *want)
{
    cr_assert_eq(got->dtype, CP_DTYPE_F32, "output dtype %s", cp_dtype_name(got->dtype));
    cr_assert_eq(want->dtype, CP_DTYPE_F32);
    cr_assert_eq(got->rank, want->rank, "rank %d, reference %d", got->rank, want->rank);
    for (int i = 0; i < got->rank; i++)
        cr_assert_eq(got->dims[i], want->dims[i], "dim %d: %lld, reference %lld", i,
                     (long long)got->dims[i], (long long)want->dims[i]);
    const float *a = got->data, *b = want->data;
    double num = 0, den = 0;
    for (int64_t i = 0; i < cp_host_tensor_numel(want); i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    cr_assert(isfinite(num), "output holds NaN or Inf");
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* `run MODEL` with test_data_set_0 of `name` as --input NAME=FILE (or a
 * bare FILE when `bare`), -o DIR; the written .npy must match output_0.pb
 * within 1e-4 relative L2 error. */
static void check_run_matches_reference(const char *model, const char *name, bool bare)
{
    char *files[4];
    char *flags[4];
    size_t n = 0;
    struct argv_b a;
    argv_init(&a);
    argv_push(&a, "run");
    argv_push(&a, model);
    for (; n < 4; n++) {
        char leaf[32];
        snprintf(leaf, sizeof leaf, "input_%zu.pb", n);
        files[n] = test_file(name, leaf);
        if (!cp_path_exists(files[n])) {
            free(files[n]);
            break;
        }
        struct cp_host_tensor t = read_tensor(files[n]);
        flags[n] = bare ? fmt("%s", files[n]) : fmt("%s=%s", t.name, files[n]);
        cp_host_tensor_release(&t);
        argv_push(&a, "--input");
        argv_push(&a, flags[n]);
    }
    cr_assert_gt(n, 0, "%s has no test inputs", name);
    char *out = fmt("%s/out_%s", g_dir, name);
    argv_push(&a, "-o");
    argv_push(&a, out);
    argv_push(&a, "--threads");
    argv_push(&a, "2");
    struct cp_run r;
    cp_run_argv(&r, a.v);
    cr_assert_eq(r.signal, 0, "run %s: signal %d; stderr: %s", model, r.signal, r.err);
    cr_assert_eq(r.exit_code, 0, "run %s: exit %d; stderr: %s", model, r.exit_code, r.err);
    cp_run_release(&r);

    char *ref_path = test_file(name, "output_0.pb");
    struct cp_host_tensor want = read_tensor(ref_path);
    char *npy = fmt("%s/%s.npy", out, want.name);
    cr_assert(cp_path_exists(npy), "run %s: %s was not written", model, npy);
    struct cp_host_tensor got = read_tensor(npy);
    double err = rel_l2(&got, &want);
    cr_assert_leq(err, 1e-4, "run %s: relative L2 error %g against PyTorch", model, err);
    cp_host_tensor_release(&got);
    cp_host_tensor_release(&want);
    for (size_t i = 0; i < n; i++) {
        free(files[i]);
        free(flags[i]);
    }
    free(ref_path);
    free(npy);
    free(out);
}

static void check_om_and_onnx(const char *name)
{
    char *om = convert_ok(name);
    check_run_matches_reference(om, name, false);
    char *onnx = model_path(name);
    check_run_matches_reference(onnx, name, false);
    free(om);
    free(onnx);
}

/* Whether `hay` holds every one of the NULL-terminated needles. */
static void assert_mentions(const char *hay, ...)
{
    va_list ap;
    va_start(ap, hay);
    const char *s;
    while ((s = va_arg(ap, const char *)) != NULL)
        cr_assert_not_null(strstr(hay, s), "expected '%s' in: %s", s, hay);
    va_end(ap);
}

/* A run that must fail with exit 2 (no crash); returns stderr (heap). */
static char *run_fails_2(struct cp_run *r)
{
    cr_assert_eq(r->signal, 0, "killed by signal %d; stderr: %s", r->signal, r->err);
    cr_assert_eq(r->exit_code, 2, "exit %d; stdout: %.300s stderr: %s", r->exit_code, r->out,
                 r->err);
    char *err = fmt("%s", r->err);
    cp_run_release(r);
    return err;
}

/* ---- run: correctness ------------------------------------------------------------ */

Test(cli_runtime, run_sd_unet_tiny_matches_reference)
{
    check_om_and_onnx("sd_unet_tiny");
}

Test(cli_runtime, run_resnet_tiny_matches_reference)
{
    check_om_and_onnx("resnet_tiny");
}

Test(cli_runtime, run_transformer_encoder_op14_matches_reference)
{
    check_om_and_onnx("transformer_encoder_op14");
}

Test(cli_runtime, run_transformer_encoder_op17_matches_reference)
{
    check_om_and_onnx("transformer_encoder_op17");
}

Test(cli_runtime, run_nhwc_roundtrip_matches_reference)
{
    check_om_and_onnx("nhwc_roundtrip");
}

Test(cli_runtime, run_single_input_model_takes_a_bare_file)
{
    char *om = convert_ok("nhwc_roundtrip");
    check_run_matches_reference(om, "nhwc_roundtrip", true);
    free(om);
}

/* ---- run: random inputs and JSON ---------------------------------------------------- */

static char *run_random(const char *om, const char *seed, const char *leaf)
{
    char *out = scratch(leaf);
    struct cp_run r;
    if (seed)
        cp_run_cli(&r, "run", om, "--seed", seed, "-o", out, "--threads", "1", NULL);
    else
        cp_run_cli(&r, "run", om, "-o", out, "--threads", "1", NULL);
    cr_assert_eq(r.exit_code, 0, "seed %s: exit %d; stderr: %s", seed, r.exit_code, r.err);
    cp_run_release(&r);
    char *npy = fmt("%s/y.npy", out);
    cr_assert(cp_path_exists(npy), "%s missing", npy);
    free(out);
    return npy;
}

Test(cli_runtime, run_random_inputs_are_deterministic_per_seed)
{
    char *om = convert_ok("transformer_encoder_op17");
    char *a = run_random(om, "7", "a"), *b = run_random(om, "7", "b");
    char *c = run_random(om, "8", "c");
    char *dflt = run_random(om, NULL, "dflt"), *zero = run_random(om, "0", "zero");
    cr_assert(same_bytes(a, b), "two runs with --seed 7 differ");
    cr_assert(!same_bytes(a, c), "--seed 7 and --seed 8 give the same output");
    cr_assert(same_bytes(dflt, zero), "no --seed should mean --seed 0");
    struct cp_host_tensor t = read_tensor(a);
    cr_assert_eq(t.rank, 3);
    cr_assert_eq(t.dims[0], 1);
    cr_assert_eq(t.dims[1], 128);
    cr_assert_eq(t.dims[2], 64);
    cp_host_tensor_release(&t);
    free(a);
    free(b);
    free(c);
    free(dflt);
    free(zero);
    free(om);
}

/* A JSON shape given as "AxBxC" text or as an array of integers. */
static void assert_json_shape(json_t *shape, const int64_t *dims, int rank)
{
    if (json_is_string(shape)) {
        struct cp_buf b;
        cp_buf_init(&b);
        for (int i = 0; i < rank; i++)
            cp_buf_printf(&b, "%s%lld", i ? "x" : "", (long long)dims[i]);
        cr_assert_str_eq(json_string_value(shape), b.data);
        cp_buf_release(&b);
        return;
    }
    cr_assert(json_is_array(shape), "shape is neither text nor an array");
    cr_assert_eq(json_array_size(shape), (size_t)rank);
    for (int i = 0; i < rank; i++)
        cr_assert_eq(json_integer_value(json_array_get(shape, (size_t)i)), dims[i]);
}

Test(cli_runtime, run_json_lists_outputs_with_name_dtype_shape)
{
    char *om = convert_ok("resnet_tiny");
    char *out = scratch("jout");
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--json", "-o", out, "--threads", "1", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    json_error_t je;
    json_t *o = json_loads(r.out, 0, &je);
    cr_assert_not_null(o, "stdout is not JSON (%s): %s", je.text, r.out);
    json_t *outs = json_object_get(o, "outputs");
    cr_assert(json_is_array(outs));
    cr_assert_eq(json_array_size(outs), 1);
    json_t *x = json_array_get(outs, 0);
    cr_assert_str_eq(json_string_value(json_object_get(x, "name")), "logits");
    cr_assert_str_eq(json_string_value(json_object_get(x, "dtype")), "f32");
    const int64_t dims[] = {1, 10};
    assert_json_shape(json_object_get(x, "shape"), dims, 2);
    cr_assert_eq(json_integer_value(json_object_get(x, "nan")), 0);
    const char *file = json_string_value(json_object_get(x, "file"));
    cr_assert_not_null(file, "with -o the JSON names the file");
    cr_assert(cp_path_exists(file), "%s missing", file);
    json_decref(o);
    cp_run_release(&r);
    free(out);
    free(om);
}

/* ---- run: bad inputs ------------------------------------------------------------------ */

Test(cli_runtime, run_names_an_input_file_of_the_wrong_shape)
{
    char *om = convert_ok("resnet_tiny");
    char *wrong = test_file("transformer_encoder_op17", "input_0.pb");
    char *flag = fmt("input=%s", wrong);
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--input", flag, NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "'input'", "input_0.pb", "1x128x64", "1x3x64x64", NULL);
    free(err);
    cp_run_cli(&r, "run", om, "--input", wrong, NULL);
    err = run_fails_2(&r);
    assert_mentions(err, "'input'", "1x128x64", NULL);
    free(err);
    free(flag);
    free(wrong);
    free(om);
}

Test(cli_runtime, run_names_an_input_file_of_the_wrong_dtype)
{
    char *om = convert_ok("nhwc_roundtrip");
    struct cp_host_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = CP_DTYPE_I64;
    t.rank = 4;
    int64_t dims[] = {1, 3, 64, 64};
    memcpy(t.dims, dims, sizeof dims);
    t.nbytes = 3 * 64 * 64 * sizeof(int64_t);
    t.data = calloc(1, t.nbytes);
    char *path = scratch("ints.npy");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_OK, "%s", d.msg);
    free(t.data);
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--input", path, NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "'input'", "ints.npy", "dtype", NULL);
    free(err);
    free(path);
    free(om);
}

Test(cli_runtime, run_unknown_input_name_lists_the_model_inputs)
{
    char *onnx = model_path("sd_unet_tiny");
    char *file = test_file("sd_unet_tiny", "input_0.pb");
    char *flag = fmt("samples=%s", file);
    struct cp_run r;
    cp_run_cli(&r, "run", onnx, "--input", flag, NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "'samples'", "sample", "timestep", "encoder_hidden_states", NULL);
    free(err);

    /* A bare FILE is ambiguous with three inputs. */
    cp_run_cli(&r, "run", onnx, "--input", file, NULL);
    err = run_fails_2(&r);
    assert_mentions(err, "NAME=FILE", NULL);
    free(err);
    free(flag);
    free(file);
    free(onnx);
}

Test(cli_runtime, run_input_given_twice_is_refused)
{
    char *om = convert_ok("nhwc_roundtrip");
    char *file = test_file("nhwc_roundtrip", "input_0.pb");
    char *flag = fmt("input=%s", file);
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--input", flag, "--input", flag, NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "'input'", "twice", NULL);
    free(err);
    free(flag);
    free(file);
    free(om);
}

Test(cli_runtime, run_names_a_missing_input_file)
{
    char *om = convert_ok("nhwc_roundtrip");
    const char *leaves[] = {"absent.pb", "absent.npy"};
    for (size_t i = 0; i < 2; i++) {
        char *path = scratch(leaves[i]);
        char *flag = fmt("input=%s", path);
        struct cp_run r;
        cp_run_cli(&r, "run", om, "--input", flag, NULL);
        char *err = run_fails_2(&r);
        assert_mentions(err, path, NULL);
        free(err);
        free(flag);
        free(path);
    }
    free(om);
}

Test(cli_runtime, run_rejects_bad_flags)
{
    char *om = convert_ok("nhwc_roundtrip");
    /* A huge batch would overflow element counts in shape inference; run
     * takes the same range as bench. */
    const char *bad[][2] = {{"--threads", "0"},
                            {"--threads", "x"},
                            {"--seed", "-1"},
                            {"--batch", "0"},
                            {"--batch", "two"},
                            {"--batch", "65537"},
                            {"--batch", "4611686018427387904"},
                            {"--nosuchflag", "1"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cp_run r;
        cp_run_cli(&r, "run", om, bad[i][0], bad[i][1], NULL);
        char *err = run_fails_2(&r);
        assert_mentions(err, bad[i][0], NULL);
        free(err);
    }
    struct cp_run r;
    cp_run_cli(&r, "run", NULL);
    free(run_fails_2(&r));
    cp_run_cli(&r, "run", om, om, NULL);
    free(run_fails_2(&r));
    free(om);
}

/* ---- run: damaged and unusual models -------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A copy of `om` with format version 99 and a valid checksum. */
static char *write_newer_om(const char *om)
{
    size_t len = 0;
    uint8_t *data = read_all(om, &len);
    cr_assert_gt(len, 16);
    put_u32(data + 4, 99);
    put_u64(data + 8, cp_hash64(data + 16, len - 16));
    char *path = scratch("newer.om");
    write_all(path, data, len);
    free(data);
    return path;
}

Test(cli_runtime, run_and_bench_say_a_newer_om_is_newer)
{
    char *om = convert_ok("nhwc_roundtrip");
    char *newer = write_newer_om(om);
    struct cp_run r;
    cp_run_cli(&r, "run", newer, NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "newer.om", "newer", "99", NULL);
    free(err);
    cp_run_cli(&r, "bench", newer, "--iterations", "1", NULL);
    err = run_fails_2(&r);
    assert_mentions(err, "newer", NULL);
    free(err);
    free(newer);
    free(om);
}

Test(cli_runtime, run_refuses_a_corrupt_om)
{
    char *om = convert_ok("resnet_tiny");
    size_t len = 0;
    uint8_t *data = read_all(om, &len);
    char *bad = scratch("corrupt.om");
    /* A flipped byte in the header, the graph, the weights; then cuts. */
    size_t flips[] = {0, 20, 200, len / 2, len - 1};
    for (size_t i = 0; i < sizeof flips / sizeof *flips; i++) {
        data[flips[i]] ^= 0x5A;
        write_all(bad, data, len);
        data[flips[i]] ^= 0x5A;
        struct cp_run r;
        cp_run_cli(&r, "run", bad, NULL);
        char *err = run_fails_2(&r);
        assert_mentions(err, "corrupt.om", NULL);
        free(err);
    }
    size_t cuts[] = {0, 10, 127, len / 3, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        write_all(bad, data, cuts[i]);
        struct cp_run r;
        cp_run_cli(&r, "run", bad, NULL);
        char *err = run_fails_2(&r);
        assert_mentions(err, "corrupt.om", NULL);
        free(err);
    }
    char *missing = scratch("missing.om");
    struct cp_run r;
    cp_run_cli(&r, "run", missing, NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, missing, NULL);
    free(err);
    free(missing);
    free(bad);
    free(data);
    free(om);
}

/* A chain x -> ops[0] -> ... -> y of [1,4] tensors, nodes named node_0,
 * node_1, ..., packed with protobuf-c and written to <scratch>/LEAF. All
 * float, except that when `cast_to` is not 0 the last node (a Cast) gets
 * to=cast_to and y that element type. */
static char *write_chain_model(const char *leaf, const char *const *ops, size_t n, int cast_to)
{
    Onnx__TensorShapeProto__Dimension d0 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    Onnx__TensorShapeProto__Dimension d1 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d0.dim_value = 1;
    d1.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d1.dim_value = 4;
    Onnx__TensorShapeProto__Dimension *dims[] = {&d0, &d1};
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 2;
    shape.dim = dims;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1;
    tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt.shape = &shape;
    Onnx__TypeProto type = ONNX__TYPE_PROTO__INIT;
    type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type.tensor_type = &tt;
    Onnx__ValueInfoProto vin = ONNX__VALUE_INFO_PROTO__INIT;
    vin.name = (char *)"x";
    vin.type = &type;
    Onnx__TypeProto__Tensor ytt = tt;
    if (cast_to)
        ytt.elem_type = cast_to;
    Onnx__TypeProto ytype = type;
    ytype.tensor_type = &ytt;
    Onnx__ValueInfoProto vout = ONNX__VALUE_INFO_PROTO__INIT;
    vout.name = (char *)"y";
    vout.type = &ytype;
    Onnx__AttributeProto to = ONNX__ATTRIBUTE_PROTO__INIT;
    to.name = (char *)"to";
    to.has_type = 1;
    to.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    to.has_i = 1;
    to.i = cast_to;
    Onnx__AttributeProto *to_attrs[] = {&to};
    Onnx__ValueInfoProto *ins[] = {&vin};
    Onnx__ValueInfoProto *outs[] = {&vout};

    Onnx__NodeProto nodes[4];
    Onnx__NodeProto *node_ptrs[4];
    char out_names[4][32], node_names[4][32];
    char *in_ptr[4], *out_ptr[4];
    cr_assert_leq(n, 4);
    for (size_t i = 0; i < n; i++) {
        Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;
        nodes[i] = init;
        snprintf(out_names[i], sizeof out_names[i], i + 1 == n ? "y" : "t%zu", i);
        snprintf(node_names[i], sizeof node_names[i], "node_%zu", i);
        in_ptr[i] = i == 0 ? (char *)"x" : out_names[i - 1];
        out_ptr[i] = out_names[i];
        nodes[i].n_input = 1;
        nodes[i].input = &in_ptr[i];
        nodes[i].n_output = 1;
        nodes[i].output = &out_ptr[i];
        nodes[i].name = node_names[i];
        nodes[i].op_type = (char *)ops[i];
        if (cast_to && i + 1 == n) {
            nodes[i].n_attribute = 1;
            nodes[i].attribute = to_attrs;
        }
        node_ptrs[i] = &nodes[i];
    }
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = (char *)"handmade";
    graph.n_node = n;
    graph.node = node_ptrs;
    graph.n_input = 1;
    graph.input = ins;
    graph.n_output = 1;
    graph.output = outs;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    opset.domain = (char *)"";
    opset.has_version = 1;
    opset.version = 17;
    Onnx__OperatorSetIdProto *opsets[] = {&opset};
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.n_opset_import = 1;
    m.opset_import = opsets;
    m.producer_name = (char *)"cannprof-test";
    m.graph = &graph;
    size_t len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(len);
    cr_assert_not_null(buf);
    cr_assert_eq(onnx__model_proto__pack(&m, buf), len);
    char *path = scratch(leaf);
    write_all(path, buf, len);
    free(buf);
    return path;
}

/* x [1,4] holding `v` four times, as <scratch>/LEAF. */
static char *write_x_npy(const char *leaf, float v)
{
    float vals[4] = {v, v, v, v};
    struct cp_host_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = CP_DTYPE_F32;
    t.rank = 2;
    t.dims[0] = 1;
    t.dims[1] = 4;
    t.data = vals;
    t.nbytes = sizeof vals;
    char *path = scratch(leaf);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_OK, "%s", d.msg);
    return path;
}

/* `run MODEL --input X`: exit 1 naming the non-finite kind; 0 with
 * --allow-nonfinite; the JSON counts them either way. */
static void check_nonfinite(const char *model, const char *x, const char *kind, const char *key)
{
    struct cp_run r;
    cp_run_cli(&r, "run", model, "--input", x, "--threads", "1", NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 1, "%s: exit %d; stderr: %s", model, r.exit_code, r.err);
    assert_mentions(r.err, kind, "'y'", NULL);
    cp_run_release(&r);

    cp_run_cli(&r, "run", model, "--input", x, "--threads", "1", "--allow-nonfinite", "--json",
               NULL);
    cr_assert_eq(r.exit_code, 0, "%s: exit %d; stderr: %s", model, r.exit_code, r.err);
    json_t *o = json_loads(r.out, 0, NULL);
    cr_assert_not_null(o, "stdout: %s", r.out);
    json_t *y = json_array_get(json_object_get(o, "outputs"), 0);
    cr_assert_eq(json_integer_value(json_object_get(y, key)), 4, "stdout: %s", r.out);
    json_decref(o);
    cp_run_release(&r);
}

Test(cli_runtime, run_reports_nan_and_inf_outputs)
{
    static const char *const sqrt_op[] = {"Sqrt"};
    static const char *const exp_op[] = {"Exp"};
    char *sq = write_chain_model("sqrt.onnx", sqrt_op, 1, 0);
    char *ex = write_chain_model("exp.onnx", exp_op, 1, 0);
    char *neg = write_x_npy("minus_one.npy", -1.0f);
    char *big = write_x_npy("big.npy", 1000.0f);
    check_nonfinite(sq, neg, "NaN", "nan");
    check_nonfinite(ex, big, "Inf", "inf");

    /* The same through a converted .om. */
    char *mflag = fmt("--model=%s", sq);
    char *oflag = fmt("--output=%s/sqrt", g_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);
    char *om = scratch("sqrt.om");
    check_nonfinite(om, neg, "NaN", "nan");

    /* Finite inputs give finite outputs and exit 0. */
    char *one = write_x_npy("one.npy", 1.0f);
    cp_run_cli(&r, "run", om, "--input", one, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);
    free(one);
    free(om);
    free(mflag);
    free(oflag);
    free(sq);
    free(ex);
    free(neg);
    free(big);
}

Test(cli_runtime, run_reports_nan_in_half_precision_outputs)
{
    static const char *const ops[] = {"Sqrt", "Cast"};
    const int types[] = {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16,
                         ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16};
    const char *dtypes[] = {"f16", "bf16"};
    char *neg = write_x_npy("minus_one.npy", -1.0f);
    for (size_t i = 0; i < 2; i++) {
        char leaf[32];
        snprintf(leaf, sizeof leaf, "sqrt_%s.onnx", dtypes[i]);
        char *model = write_chain_model(leaf, ops, 2, types[i]);
        struct cp_run r;
        cp_run_cli(&r, "run", model, "--input", neg, "--allow-nonfinite", "--json", NULL);
        cr_assert_eq(r.exit_code, 0, "%s: stderr: %s", dtypes[i], r.err);
        json_t *o = json_loads(r.out, 0, NULL);
        cr_assert_not_null(o, "stdout: %s", r.out);
        json_t *y = json_array_get(json_object_get(o, "outputs"), 0);
        cr_assert_str_eq(json_string_value(json_object_get(y, "dtype")), dtypes[i]);
        json_decref(o);
        cp_run_release(&r);
        check_nonfinite(model, neg, "NaN", "nan");
        free(model);
    }
    free(neg);
}

Test(cli_runtime, run_of_onnx_with_unsupported_op_names_the_op_and_node)
{
    /* The importer lists unsupported op types with their counts and names
     * the first node of each. */
    static const char *const ops[] = {"Relu", "Sin"};
    char *path = write_chain_model("sin.onnx", ops, 2, 0);
    struct cp_run r;
    cp_run_cli(&r, "run", path, NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "sin.onnx", "Sin (1 node", "'node_1' (Sin)", NULL);
    free(err);
    free(path);
}

Test(cli_runtime, run_of_om_with_a_node_without_kernel_names_it_at_load)
{
    /* Import refuses unsupported ops, so make such a .om by hand: read a
     * converted one and turn a node into an op no kernel implements. */
    static const char *const ops[] = {"Relu", "Sigmoid"};
    char *onnx = write_chain_model("chain.onnx", ops, 2, 0);
    char *mflag = fmt("--model=%s", onnx);
    char *oflag = fmt("--output=%s/chain", g_dir);
    struct cp_run r;
    cp_run_cli(&r, "convert", mflag, "--framework=5", oflag, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);
    char *om = scratch("chain.om");
    struct cp_graph *g = NULL;
    struct cp_om_meta meta;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read(om, &g, &meta, &d), CP_OK, "%s", d.msg);
    bool found = false;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (!n->dead && strcmp(n->name, "node_1") == 0) {
            n->op = CP_OP_UNKNOWN;
            n->op_type = "MysteryOp";
            found = true;
        }
    }
    cr_assert(found, "node_1 is not in the converted graph");
    char *bad = scratch("mystery.om");
    cr_assert_eq(cp_om_write(bad, g, &meta, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
    cp_om_meta_release(&meta);

    cp_run_cli(&r, "run", bad, NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "mystery.om", "node_1", "MysteryOp", NULL);
    free(err);
    cp_run_cli(&r, "bench", bad, "--iterations", "1", NULL);
    err = run_fails_2(&r);
    assert_mentions(err, "node_1", NULL);
    free(err);
    free(bad);
    free(om);
    free(mflag);
    free(oflag);
    free(onnx);
}

/* ---- run: --batch on static batch-1 models ------------------------------------------- */

Test(cli_runtime, run_batch_2_overrides_dim_0_of_a_static_model)
{
    /* Without dynamic-batch profiles, --batch sets dimension 0 of every
     * input (runner/cpu/plan_shapes.c); resnet_tiny has nothing that fixes
     * the batch, so it runs at batch 2. */
    char *om = convert_ok("resnet_tiny");
    char *out = scratch("b2");
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--batch", "2", "-o", out, "--threads", "1", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);
    char *npy = fmt("%s/logits.npy", out);
    struct cp_host_tensor t = read_tensor(npy);
    cr_assert_eq(t.rank, 2);
    cr_assert_eq(t.dims[0], 2);
    cr_assert_eq(t.dims[1], 10);
    cp_host_tensor_release(&t);
    free(npy);
    free(out);
    free(om);
}

Test(cli_runtime, run_batch_2_on_a_model_that_fixes_batch_1_names_the_node)
{
    /* The transformer's Reshape nodes hard-code [1,128,4,16]: inference
     * must say which node and with which input shapes, not crash. Run the
     * .onnx itself: conversion fuses those Reshapes into the attention. */
    char *om = model_path("transformer_encoder_op17");
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--batch", "2", NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "Reshape", "x=2x128x64", NULL);
    free(err);
    cp_run_cli(&r, "bench", om, "--batch", "2", "--iterations", "1", NULL);
    err = run_fails_2(&r);
    assert_mentions(err, "Reshape", NULL);
    free(err);
    free(om);
}

/* ---- bench: statistics ------------------------------------------------------------------ */

Test(cli_runtime, bench_prints_every_statistic)
{
    char *om = convert_ok("nhwc_roundtrip");
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "--iterations", "5", "--warmup", "1", "--threads", "1", NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    assert_mentions(r.out, "mean", "median", "p90", "p99", "sd", "cv", "min", "max", "throughput",
                    "items/s", "5 measured", NULL);
    cp_run_release(&r);
    free(om);
}

static json_t *bench_json(const char *om, const char *a, const char *b, const char *c,
                          const char *e)
{
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "--json", "--threads", "1", a, b, c, e, NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    json_error_t je;
    json_t *o = json_loads(r.out, 0, &je);
    cr_assert_not_null(o, "stdout is not JSON (%s): %s", je.text, r.out);
    cp_run_release(&r);
    return o;
}

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_number(v), "'%s' is missing or not a number", key);
    return json_number_value(v);
}

Test(cli_runtime, bench_json_has_statistics_and_memory)
{
    char *om = convert_ok("transformer_encoder_op17");
    json_t *o = bench_json(om, "--iterations", "5", "--warmup", "1");
    cr_assert_eq(num(o, "iterations"), 5);
    cr_assert_eq(num(o, "warmup"), 1);
    cr_assert_eq(num(o, "threads"), 1);
    cr_assert_eq(num(o, "batch"), 1);
    json_t *l = json_object_get(o, "latency_ms");
    cr_assert(json_is_object(l));
    const char *keys[] = {"mean", "median", "p90", "p99", "sd", "cv", "min", "max"};
    for (size_t i = 0; i < 8; i++)
        cr_assert_geq(num(l, keys[i]), 0, "%s", keys[i]);
    double mn = num(l, "min"), mx = num(l, "max");
    cr_assert_gt(mn, 0);
    cr_assert_leq(mn, num(l, "median"));
    cr_assert_leq(num(l, "median"), num(l, "p90"));
    cr_assert_leq(num(l, "p90"), num(l, "p99"));
    cr_assert_leq(num(l, "p99"), mx);
    cr_assert(num(l, "mean") >= mn && num(l, "mean") <= mx);
    double tp = num(o, "throughput_items_per_s");
    cr_assert_gt(tp, 0);
    /* Throughput is items per second at the mean latency. */
    cr_assert_leq(fabs(tp * num(l, "mean") / 1e3 - 1.0), 0.01, "throughput %g, mean %g ms", tp,
                  num(l, "mean"));
    json_t *m = json_object_get(o, "memory");
    const char *mkeys[] = {"weight_bytes", "arena_bytes", "peak_bytes", "peak_rss_bytes"};
    for (size_t i = 0; i < 4; i++)
        cr_assert_gt(num(m, mkeys[i]), 0, "memory.%s", mkeys[i]);
    cr_assert_leq(num(m, "peak_bytes"), num(m, "arena_bytes"));
    json_decref(o);
    free(om);
}

Test(cli_runtime, bench_batch_counts_items_in_throughput)
{
    char *om = convert_ok("resnet_tiny");
    json_t *o = bench_json(om, "--iterations", "2", "--batch", "2");
    cr_assert_eq(num(o, "batch"), 2);
    double tp = num(o, "throughput_items_per_s");
    double mean = num(json_object_get(o, "latency_ms"), "mean");
    cr_assert_leq(fabs(tp * mean / 2e3 - 1.0), 0.01, "throughput %g, mean %g ms", tp, mean);
    json_decref(o);
    free(om);
}

Test(cli_runtime, bench_duration_runs_at_least_one_iteration)
{
    char *om = convert_ok("nhwc_roundtrip");
    json_t *o = bench_json(om, "--duration", "0.2", "--warmup", "0");
    cr_assert_geq(num(o, "iterations"), 1);
    json_decref(o);
    o = bench_json(om, "--duration", "50ms", "--warmup", "0");
    cr_assert_geq(num(o, "iterations"), 1);
    json_decref(o);
    free(om);
}

Test(cli_runtime, bench_rejects_iterations_with_duration_and_bad_numbers)
{
    char *om = convert_ok("nhwc_roundtrip");
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "--iterations", "5", "--duration", "1", NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "--iterations", "--duration", NULL);
    free(err);
    const char *bad[][2] = {
        {"--iterations", "0"},      {"--iterations", "abc"}, {"--iterations", "5x"},
        {"--iterations", "-3"},     {"--warmup", "-1"},      {"--warmup", "w"},
        {"--duration", "0"},        {"--duration", "x"},     {"--duration", "-1"},
        {"--duration", "5parsecs"}, {"--threads", "0"},      {"--threads", "many"},
        {"--batch", "0"},           {"--seed", "-4"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cp_run_cli(&r, "bench", om, bad[i][0], bad[i][1], NULL);
        err = run_fails_2(&r);
        assert_mentions(err, bad[i][0], NULL);
        free(err);
    }
    cp_run_cli(&r, "bench", NULL);
    free(run_fails_2(&r));
    char *missing = scratch("missing.om");
    cp_run_cli(&r, "bench", missing, "--iterations", "1", NULL);
    err = run_fails_2(&r);
    assert_mentions(err, missing, NULL);
    free(err);
    free(missing);
    free(om);
}

/* ---- bench --trace: the store ------------------------------------------------------------ */

static char *bench_trace(const char *om, const char *leaf, const char *iters)
{
    char *db = scratch(leaf);
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "--iterations", iters, "--warmup", "1", "--threads", "1", "--trace",
               db, NULL);
    cr_assert_eq(r.signal, 0);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    assert_mentions(r.out, db, NULL);
    cp_run_release(&r);
    cr_assert(cp_path_exists(db));
    return db;
}

static sqlite3 *open_db(const char *path)
{
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "%s",
                 db ? sqlite3_errmsg(db) : path);
    return db;
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
                 sqlite3_errmsg(db));
    return st;
}

static int64_t q_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = prep(db, sql);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s: no row", sql);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The text of the first column of the first row (heap), or NULL. */
static char *q_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = prep(db, sql);
    char *v = NULL;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        v = fmt("%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
}

/* Node names of an .onnx, as a JSON object used as a set. */
static json_t *onnx_node_names(const char *path)
{
    size_t len = 0;
    uint8_t *data = read_all(path, &len);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
    cr_assert_not_null(m);
    json_t *set = json_object();
    for (size_t i = 0; i < m->graph->n_node; i++)
        if (m->graph->node[i]->name)
            json_object_set_new(set, m->graph->node[i]->name, json_true());
    onnx__model_proto__free_unpacked(m, NULL);
    free(data);
    return set;
}

Test(cli_runtime, bench_trace_holds_run_samples_kernels_events_meta)
{
    char *om = convert_ok("transformer_encoder_op17");
    char *path = bench_trace(om, "t.db", "5");
    sqlite3 *db = open_db(path);

    cr_assert_eq(q_int(db, "PRAGMA application_id"), 0x43505452);
    cr_assert_eq(q_int(db, "PRAGMA user_version"), 1);

    /* runs */
    cr_assert_eq(q_int(db, "SELECT count(*) FROM runs"), 1);
    char *kind = q_text(db, "SELECT kind FROM runs");
    cr_assert_str_eq(kind, "bench");
    free(kind);
    cr_assert_eq(q_int(db, "SELECT iterations FROM runs"), 5);
    cr_assert_eq(q_int(db, "SELECT warmup FROM runs"), 1);
    cr_assert_eq(q_int(db, "SELECT threads FROM runs"), 1);
    cr_assert_eq(q_int(db, "SELECT batch FROM runs"), 1);
    cr_assert_eq(q_int(db, "SELECT min(weight_bytes, arena_bytes, peak_bytes, peak_rss_bytes) > 0 "
                           "FROM runs"),
                 1);
    char *hash = q_text(db, "SELECT model_hash FROM runs");
    cr_assert(hash && strlen(hash) == 32, "model_hash '%s'", hash);
    free(hash);
    char *cfg = q_text(db, "SELECT config_json FROM runs");
    json_t *cj = json_loads(cfg ? cfg : "", 0, NULL);
    cr_assert(json_is_object(cj), "config_json: %s", cfg);
    json_decref(cj);
    free(cfg);

    /* samples */
    cr_assert_eq(q_int(db, "SELECT count(*) FROM samples WHERE run_id = 1 AND latency_ns > 0"), 5);
    cr_assert_eq(q_int(db, "SELECT min(iteration) FROM samples"), 0);
    cr_assert_eq(q_int(db, "SELECT max(iteration) FROM samples"), 4);

    /* kernels: every row described, origins naming nodes of the source ONNX */
    int64_t nk = q_int(db, "SELECT count(*) FROM kernels WHERE run_id = 1");
    cr_assert_gt(nk, 0);
    cr_assert_eq(q_int(db, "SELECT max(idx) + 1 FROM kernels"), nk);
    char *onnx = model_path("transformer_encoder_op17");
    json_t *names = onnx_node_names(onnx);
    sqlite3_stmt *st =
        prep(db, "SELECT node, op_type, impl, origins, inputs, outputs FROM kernels");
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *node = (const char *)sqlite3_column_text(st, 0);
        cr_assert(node && *node);
        cr_assert(sqlite3_column_text(st, 1) && *sqlite3_column_text(st, 1), "%s: op_type", node);
        cr_assert(sqlite3_column_text(st, 2) && *sqlite3_column_text(st, 2), "%s: impl", node);
        const char *origins = (const char *)sqlite3_column_text(st, 3);
        json_t *o = json_loads(origins ? origins : "", 0, NULL);
        cr_assert(json_is_array(o) && json_array_size(o) > 0, "%s: origins %s", node, origins);
        for (size_t i = 0; i < json_array_size(o); i++) {
            const char *on = json_string_value(json_array_get(o, i));
            cr_assert(on && json_object_get(names, on), "%s: origin '%s' is not an ONNX node", node,
                      on);
        }
        json_decref(o);
        for (int c = 4; c <= 5; c++) {
            const char *io = (const char *)sqlite3_column_text(st, c);
            json_t *a = json_loads(io ? io : "", 0, NULL);
            cr_assert(json_is_array(a), "%s: column %d: %s", node, c, io);
            json_decref(a);
        }
    }
    sqlite3_finalize(st);
    json_decref(names);
    free(onnx);

    /* events on all three layers */
    for (int layer = 0; layer < 3; layer++) {
        char *sql = fmt("SELECT count(*) FROM events WHERE run_id = 1 AND layer = %d", layer);
        cr_assert_gt(q_int(db, sql), 0, "no events on layer %d", layer);
        free(sql);
    }
    const char *rt_names[] = {"load", "plan", "execute", "input copy"};
    for (size_t i = 0; i < 4; i++) {
        char *sql = fmt("SELECT count(*) FROM events e JOIN strings s ON s.id = e.name_id "
                        "WHERE e.layer = 1 AND s.value = '%s'",
                        rt_names[i]);
        cr_assert_gt(q_int(db, sql), 0, "no runtime event '%s'", rt_names[i]);
        free(sql);
    }
    const char *app_names[] = {"cannprof bench", "warmup", "measure"};
    for (size_t i = 0; i < 3; i++) {
        char *sql = fmt("SELECT count(*) FROM events e JOIN strings s ON s.id = e.name_id "
                        "WHERE e.layer = 0 AND s.value = '%s'",
                        app_names[i]);
        cr_assert_eq(q_int(db, sql), 1, "application range '%s'", app_names[i]);
        free(sql);
    }
    /* One execute and one event per kernel in each measured iteration. */
    for (int it = 0; it < 5; it++) {
        char *sql = fmt("SELECT count(*) FROM events WHERE layer = 2 AND iteration = %d", it);
        cr_assert_eq(q_int(db, sql), nk, "iteration %d", it);
        free(sql);
        sql = fmt("SELECT count(DISTINCT kernel_idx) FROM events WHERE layer = 2 AND "
                  "iteration = %d",
                  it);
        cr_assert_eq(q_int(db, sql), nk, "iteration %d", it);
        free(sql);
        sql = fmt("SELECT count(*) FROM events e JOIN strings s ON s.id = e.name_id "
                  "WHERE e.layer = 1 AND s.value = 'execute' AND e.iteration = %d",
                  it);
        cr_assert_eq(q_int(db, sql), 1, "execute events of iteration %d", it);
        free(sql);
        /* Kernels run one after another inside the timed iteration. */
        sql = fmt("SELECT (SELECT sum(dur_ns) FROM events WHERE layer = 2 AND iteration = %d) "
                  "<= (SELECT latency_ns FROM samples WHERE iteration = %d)",
                  it, it);
        cr_assert_eq(q_int(db, sql), 1, "kernel time exceeds the sample of iteration %d", it);
        free(sql);
    }
    cr_assert_eq(q_int(db, "SELECT count(*) FROM events WHERE layer = 2 AND iteration >= 0"),
                 nk * 5);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM events WHERE layer = 2 AND iteration < 0"), nk,
                 "one warm-up iteration");
    /* A device event is named after its kernel's node. */
    cr_assert_eq(q_int(db, "SELECT count(*) FROM events e JOIN strings s ON s.id = e.name_id "
                           "JOIN kernels k ON k.run_id = e.run_id AND k.idx = e.kernel_idx "
                           "WHERE e.layer = 2 AND s.value <> k.node"),
                 0);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM events WHERE dur_ns < 0 OR start_ns <= 0"), 0);

    /* meta */
    char *tv = q_text(db, "SELECT value FROM meta WHERE key = 'tool_version'");
    cr_assert_not_null(tv);
    cr_assert_str_eq(tv, CP_VERSION_STRING);
    free(tv);
    char *cpu = q_text(db, "SELECT value FROM meta WHERE key = 'host_cpu_model'");
    cr_assert(cpu && *cpu, "host_cpu_model missing");
    free(cpu);
    cr_assert_geq(q_int(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'host_cores'"), 1);
    cr_assert_gt(q_int(db, "SELECT value FROM counters WHERE name = 'peak_rss_bytes'"), 0);
    sqlite3_close(db);
    free(path);
    free(om);
}

Test(cli_runtime, bench_trace_appends_runs_to_an_existing_store)
{
    char *om = convert_ok("nhwc_roundtrip");
    char *path = bench_trace(om, "two.db", "3");
    free(bench_trace(om, "two.db", "5"));
    sqlite3 *db = open_db(path);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM runs"), 2);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM samples WHERE run_id = 1"), 3);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM samples WHERE run_id = 2"), 5);
    sqlite3_close(db);
    free(path);
    free(om);
}

Test(cli_runtime, bench_trace_refuses_to_overwrite_a_non_trace_file)
{
    char *om = convert_ok("nhwc_roundtrip");
    char *victim = scratch("victim.om");
    size_t len = 0;
    uint8_t *data = read_all(om, &len);
    write_all(victim, data, len);
    free(data);
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "--iterations", "1", "--warmup", "0", "--trace", victim, NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "victim.om", NULL);
    free(err);
    cr_assert(same_bytes(om, victim), "bench --trace changed a file that is not a trace");
    free(victim);
    free(om);
}

/* ---- export ------------------------------------------------------------------------------ */

Test(cli_runtime, export_chrome_is_trace_event_json)
{
    char *om = convert_ok("transformer_encoder_op17");
    char *path = bench_trace(om, "c.db", "5");
    char *out = scratch("trace.json");
    struct cp_run r;
    cp_run_cli(&r, "export", path, "--format", "chrome", "-o", out, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);

    json_error_t je;
    json_t *root = json_load_file(out, 0, &je);
    cr_assert_not_null(root, "%s is not JSON: %s (line %d)", out, je.text, je.line);
    json_t *ev = json_object_get(root, "traceEvents");
    cr_assert(json_is_array(ev));
    json_t *tids = json_object(); /* tid -> thread name */
    size_t n_x = 0, n_device = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        cr_assert_not_null(ph, "event %zu has no ph", i);
        if (strcmp(ph, "M") == 0 &&
            strcmp(json_string_value(json_object_get(e, "name")), "thread_name") == 0) {
            char key[32];
            snprintf(key, sizeof key, "%lld", json_integer_value(json_object_get(e, "tid")));
            const char *tn = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
            cr_assert_not_null(tn);
            json_object_set_new(tids, key, json_string(tn));
        }
    }
    cr_assert_eq(json_object_size(tids), 3, "thread_name metadata for 3 threads");
    struct cp_buf all;
    cp_buf_init(&all);
    const char *k;
    json_t *v;
    json_object_foreach(tids, k, v)
    {
        cp_buf_printf(&all, "%s|", json_string_value(v));
    }
    assert_mentions(all.data, "application", "runtime", "device", NULL);
    cp_buf_release(&all);
    double last_ts = 0, first_ts = -1;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0)
            continue;
        n_x++;
        double t = json_number_value(json_object_get(e, "ts"));
        cr_assert_geq(t, last_ts, "X event %zu is out of time order", i);
        last_ts = t;
        if (first_ts < 0)
            first_ts = t;
        cr_assert(json_is_string(json_object_get(e, "name")), "X event %zu has no name", i);
        json_t *ts = json_object_get(e, "ts"), *dur = json_object_get(e, "dur");
        cr_assert(json_is_number(ts) && json_number_value(ts) >= 0, "X event %zu: ts", i);
        cr_assert(json_is_number(dur) && json_number_value(dur) >= 0, "X event %zu: dur", i);
        cr_assert(json_is_integer(json_object_get(e, "pid")));
        char key[32];
        snprintf(key, sizeof key, "%lld", json_integer_value(json_object_get(e, "tid")));
        cr_assert_not_null(json_object_get(tids, key), "X event %zu on unnamed thread %s", i, key);
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (cat && strcmp(cat, "device") == 0) {
            n_device++;
            json_t *args = json_object_get(e, "args");
            cr_assert(json_is_string(json_object_get(args, "node")), "device event %zu: node", i);
            cr_assert(json_is_string(json_object_get(args, "op_type")), "device event %zu", i);
            json_int_t it = json_integer_value(json_object_get(args, "iteration"));
            cr_assert(it >= -1 && it < 5, "device event %zu: iteration %lld", i, (long long)it);
        }
    }
    cr_assert_eq(first_ts, 0, "the first event is at ts 0");
    sqlite3 *db = open_db(path);
    cr_assert_eq((int64_t)n_x, q_int(db, "SELECT count(*) FROM events"),
                 "one X event per stored event");
    cr_assert_eq((int64_t)n_device, q_int(db, "SELECT count(*) FROM events WHERE layer = 2"));
    sqlite3_close(db);
    json_decref(tids);
    json_decref(root);
    free(out);
    free(path);
    free(om);
}

Test(cli_runtime, export_folded_lines_are_layer_stacks_with_integer_weights)
{
    char *om = convert_ok("transformer_encoder_op17");
    char *path = bench_trace(om, "f.db", "3");
    char *out = scratch("trace.folded");
    struct cp_run r;
    cp_run_cli(&r, "export", path, "--format", "folded", "-o", out, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);

    size_t len = 0;
    char *text = (char *)read_all(out, &len);
    cr_assert_gt(len, 0);
    cr_assert_eq(text[len - 1], '\n', "the last line is unterminated");
    text[len - 1] = '\0';
    sqlite3 *db = open_db(path);
    sqlite3_stmt *op = prep(db, "SELECT count(*) FROM kernels WHERE replace(node, ';', ':') = ?1 "
                                "AND op_type = ?2");
    size_t per_layer[3] = {0};
    const char *layers[] = {"application", "runtime", "device"};
    char prev[1024] = "";
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strrchr(line, ' ');
        cr_assert_not_null(sp, "no weight: '%s'", line);
        *sp = '\0';
        cr_assert_lt(strcmp(prev, line), 0, "stacks not sorted: '%s' then '%s'", prev, line);
        snprintf(prev, sizeof prev, "%s", line);
        *sp = ' ';
        cr_assert(sp[1] != '\0' && strspn(sp + 1, "0123456789") == strlen(sp + 1),
                  "weight is not an integer: '%s'", line);
        *sp = '\0';
        char *parts[8];
        size_t np = 0;
        for (char *p = line; np < 8;) {
            parts[np++] = p;
            char *semi = strchr(p, ';');
            if (!semi)
                break;
            *semi = '\0';
            p = semi + 1;
        }
        cr_assert_geq(np, 2, "stack without frames: '%s'", line);
        size_t li = 3;
        for (size_t i = 0; i < 3; i++)
            if (strcmp(parts[0], layers[i]) == 0)
                li = i;
        cr_assert_lt(li, 3, "unknown layer '%s'", parts[0]);
        per_layer[li]++;
        if (li == 2) {
            cr_assert_eq(np, 3, "device line must be device;node;op: '%s'", line);
            sqlite3_reset(op);
            sqlite3_bind_text(op, 1, parts[1], -1, SQLITE_STATIC);
            sqlite3_bind_text(op, 2, parts[2], -1, SQLITE_STATIC);
            cr_assert_eq(sqlite3_step(op), SQLITE_ROW);
            cr_assert_gt(sqlite3_column_int64(op, 0), 0, "no kernel '%s' of op %s", parts[1],
                         parts[2]);
        }
    }
    sqlite3_finalize(op);
    for (size_t i = 0; i < 3; i++)
        cr_assert_gt(per_layer[i], 0, "no %s lines", layers[i]);
    /* One line per kernel, less those whose time rounds to 0 µs. */
    cr_assert_leq((int64_t)per_layer[2], q_int(db, "SELECT count(*) FROM kernels"));
    sqlite3_close(db);
    free(text);
    free(out);
    free(path);
    free(om);
}

Test(cli_runtime, export_picks_a_run_with_run_flag)
{
    char *om = convert_ok("nhwc_roundtrip");
    char *path = bench_trace(om, "r.db", "2");
    free(bench_trace(om, "r.db", "4"));
    char *out = scratch("r1.json");
    struct cp_run r;
    cp_run_cli(&r, "export", path, "--format", "chrome", "-o", out, "--run", "1", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);
    cr_assert(cp_path_exists(out));
    char *none = scratch("r9.json");
    cp_run_cli(&r, "export", path, "--format", "chrome", "-o", none, "--run", "9", NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "9", NULL);
    free(err);
    cr_assert(!cp_path_exists(none));
    cp_run_cli(&r, "export", path, "--format", "chrome", "-o", none, "--run", "zero", NULL);
    free(run_fails_2(&r));
    free(none);
    free(out);
    free(path);
    free(om);
}

Test(cli_runtime, export_rejects_bad_arguments_and_files)
{
    char *om = convert_ok("nhwc_roundtrip");
    char *path = bench_trace(om, "e.db", "1");
    char *out = scratch("out.json");
    struct cp_run r;

    cp_run_cli(&r, "export", path, "--format", "bad", "-o", out, NULL);
    char *err = run_fails_2(&r);
    assert_mentions(err, "bad", "chrome", "folded", NULL);
    free(err);
    cp_run_cli(&r, "export", path, "--format", "chrome", NULL);
    err = run_fails_2(&r);
    assert_mentions(err, "-o", NULL);
    free(err);
    cp_run_cli(&r, "export", path, "-o", out, NULL);
    err = run_fails_2(&r);
    assert_mentions(err, "--format", NULL);
    free(err);
    cp_run_cli(&r, "export", "--format", "chrome", "-o", out, NULL);
    free(run_fails_2(&r));
    cr_assert(!cp_path_exists(out), "a failed export left %s", out);

    /* A missing trace is named and neither it nor the output is created. */
    char *missing = scratch("missing.db");
    cp_run_cli(&r, "export", missing, "--format", "chrome", "-o", out, NULL);
    err = run_fails_2(&r);
    assert_mentions(err, missing, NULL);
    free(err);
    cr_assert(!cp_path_exists(missing), "export created %s", missing);
    cr_assert(!cp_path_exists(out), "a failed export left %s", out);

    /* Not a trace: a .om, and a SQLite file of someone else's. */
    cp_run_cli(&r, "export", om, "--format", "folded", "-o", out, NULL);
    err = run_fails_2(&r);
    assert_mentions(err, om, NULL);
    free(err);
    char *foreign = scratch("foreign.db");
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(foreign, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES ('hi')",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    cp_run_cli(&r, "export", foreign, "--format", "chrome", "-o", out, NULL);
    err = run_fails_2(&r);
    assert_mentions(err, "foreign.db", NULL);
    free(err);
    cr_assert(!cp_path_exists(out), "a failed export left %s", out);
    free(foreign);
    free(missing);
    free(out);
    free(path);
    free(om);
}
