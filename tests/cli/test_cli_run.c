/* `cannprof run` driven as a user would: outputs match the reference within
 * 1e-4, seeded random inputs, the JSON summary, refusal of bad inputs and
 * of damaged, newer or unusual models, NaN/Inf reporting and --batch on
 * static models. (bench and export: test_cli_bench.c.) */
#include "core/core.h"
#include "runner/runner.h"
#include "support/cli.h"
#include "support/onnx_model.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fixture and helpers ---------------------------------------------------- */

TestSuite(cli_run, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

static char *test_file(const char *model, const char *file)
{
    return cp_t_fmt("%s/examples/models/%s/test_data_set_0/%s", CP_SOURCE_DIR, model, file);
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
        flags[n] = bare ? cp_t_fmt("%s", files[n]) : cp_t_fmt("%s=%s", t.name, files[n]);
        cp_host_tensor_release(&t);
        argv_push(&a, "--input");
        argv_push(&a, flags[n]);
    }
    cr_assert_gt(n, 0, "%s has no test inputs", name);
    char *out = cp_t_fmt("%s/out_%s", cp_t_dir, name);
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
    char *npy = cp_t_fmt("%s/%s.npy", out, want.name);
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
    char *om = ct_convert(name);
    check_run_matches_reference(om, name, false);
    char *onnx = cp_t_example(name);
    check_run_matches_reference(onnx, name, false);
    free(om);
    free(onnx);
}

/* ---- run: correctness ------------------------------------------------------------ */

Test(cli_run, run_sd_unet_tiny_matches_reference)
{
    check_om_and_onnx("sd_unet_tiny");
}

Test(cli_run, run_resnet_tiny_matches_reference)
{
    check_om_and_onnx("resnet_tiny");
}

Test(cli_run, run_transformer_encoder_op14_matches_reference)
{
    check_om_and_onnx("transformer_encoder_op14");
}

Test(cli_run, run_transformer_encoder_op17_matches_reference)
{
    check_om_and_onnx("transformer_encoder_op17");
}

Test(cli_run, run_nhwc_roundtrip_matches_reference)
{
    check_om_and_onnx("nhwc_roundtrip");
}

Test(cli_run, run_single_input_model_takes_a_bare_file)
{
    char *om = ct_convert("nhwc_roundtrip");
    check_run_matches_reference(om, "nhwc_roundtrip", true);
    free(om);
}

/* ---- run: random inputs and JSON ---------------------------------------------------- */

static char *run_random(const char *om, const char *seed, const char *leaf)
{
    char *out = cp_t_path(leaf);
    struct cp_run r;
    if (seed)
        cp_run_cli(&r, "run", om, "--seed", seed, "-o", out, "--threads", "1", NULL);
    else
        cp_run_cli(&r, "run", om, "-o", out, "--threads", "1", NULL);
    cr_assert_eq(r.exit_code, 0, "seed %s: exit %d; stderr: %s", seed, r.exit_code, r.err);
    cp_run_release(&r);
    char *npy = cp_t_fmt("%s/y.npy", out);
    cr_assert(cp_path_exists(npy), "%s missing", npy);
    free(out);
    return npy;
}

Test(cli_run, run_random_inputs_are_deterministic_per_seed)
{
    char *om = ct_convert("transformer_encoder_op17");
    char *a = run_random(om, "7", "a"), *b = run_random(om, "7", "b");
    char *c = run_random(om, "8", "c");
    char *dflt = run_random(om, NULL, "dflt"), *zero = run_random(om, "0", "zero");
    cr_assert(ct_same_bytes(a, b), "two runs with --seed 7 differ");
    cr_assert(!ct_same_bytes(a, c), "--seed 7 and --seed 8 give the same output");
    cr_assert(ct_same_bytes(dflt, zero), "no --seed should mean --seed 0");
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

Test(cli_run, run_json_lists_outputs_with_name_dtype_shape)
{
    char *om = ct_convert("resnet_tiny");
    char *out = cp_t_path("jout");
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--json", "-o", out, "--threads", "1", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    json_t *o = cp_t_json(r.out);
    cr_assert_not_null(o, "stdout is not JSON: %s", r.out);
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

Test(cli_run, run_names_an_input_file_of_the_wrong_shape)
{
    char *om = ct_convert("resnet_tiny");
    char *wrong = test_file("transformer_encoder_op17", "input_0.pb");
    char *flag = cp_t_fmt("input=%s", wrong);
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--input", flag, NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "'input'", "input_0.pb", "1x128x64", "1x3x64x64", NULL);
    free(err);
    cp_run_cli(&r, "run", om, "--input", wrong, NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, "'input'", "1x128x64", NULL);
    free(err);
    free(flag);
    free(wrong);
    free(om);
}

Test(cli_run, run_names_an_input_file_of_the_wrong_dtype)
{
    char *om = ct_convert("nhwc_roundtrip");
    struct cp_host_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = CP_DTYPE_I64;
    t.rank = 4;
    int64_t dims[] = {1, 3, 64, 64};
    memcpy(t.dims, dims, sizeof dims);
    t.nbytes = 3 * 64 * 64 * sizeof(int64_t);
    t.data = calloc(1, t.nbytes);
    char *path = cp_t_path("ints.npy");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_OK, "%s", d.msg);
    free(t.data);
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--input", path, NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "'input'", "ints.npy", "dtype", NULL);
    free(err);
    free(path);
    free(om);
}

Test(cli_run, run_unknown_input_name_lists_the_model_inputs)
{
    char *onnx = cp_t_example("sd_unet_tiny");
    char *file = test_file("sd_unet_tiny", "input_0.pb");
    char *flag = cp_t_fmt("samples=%s", file);
    struct cp_run r;
    cp_run_cli(&r, "run", onnx, "--input", flag, NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "'samples'", "sample", "timestep", "encoder_hidden_states", NULL);
    free(err);

    /* A bare FILE is ambiguous with three inputs. */
    cp_run_cli(&r, "run", onnx, "--input", file, NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, "NAME=FILE", NULL);
    free(err);
    free(flag);
    free(file);
    free(onnx);
}

Test(cli_run, run_input_given_twice_is_refused)
{
    char *om = ct_convert("nhwc_roundtrip");
    char *file = test_file("nhwc_roundtrip", "input_0.pb");
    char *flag = cp_t_fmt("input=%s", file);
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--input", flag, "--input", flag, NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "'input'", "twice", NULL);
    free(err);
    free(flag);
    free(file);
    free(om);
}

Test(cli_run, run_names_a_missing_input_file)
{
    char *om = ct_convert("nhwc_roundtrip");
    const char *leaves[] = {"absent.pb", "absent.npy"};
    for (size_t i = 0; i < 2; i++) {
        char *path = cp_t_path(leaves[i]);
        char *flag = cp_t_fmt("input=%s", path);
        struct cp_run r;
        cp_run_cli(&r, "run", om, "--input", flag, NULL);
        char *err = ct_fails_2(&r);
        ct_assert_mentions(err, path, NULL);
        free(err);
        free(flag);
        free(path);
    }
    free(om);
}

Test(cli_run, run_rejects_bad_flags)
{
    char *om = ct_convert("nhwc_roundtrip");
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
        char *err = ct_fails_2(&r);
        ct_assert_mentions(err, bad[i][0], NULL);
        free(err);
    }
    struct cp_run r;
    cp_run_cli(&r, "run", NULL);
    free(ct_fails_2(&r));
    cp_run_cli(&r, "run", om, om, NULL);
    free(ct_fails_2(&r));
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
    uint8_t *data = ct_read(om, &len);
    cr_assert_gt(len, 16);
    put_u32(data + 4, 99);
    put_u64(data + 8, cp_hash64(data + 16, len - 16));
    char *path = cp_t_path("newer.om");
    ct_write(path, data, len);
    free(data);
    return path;
}

Test(cli_run, run_and_bench_say_a_newer_om_is_newer)
{
    char *om = ct_convert("nhwc_roundtrip");
    char *newer = write_newer_om(om);
    struct cp_run r;
    cp_run_cli(&r, "run", newer, NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "newer.om", "newer", "99", NULL);
    free(err);
    cp_run_cli(&r, "bench", newer, "--iterations", "1", NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, "newer", NULL);
    free(err);
    free(newer);
    free(om);
}

Test(cli_run, run_refuses_a_corrupt_om)
{
    char *om = ct_convert("resnet_tiny");
    size_t len = 0;
    uint8_t *data = ct_read(om, &len);
    char *bad = cp_t_path("corrupt.om");
    /* A flipped byte in the header, the graph, the weights; then cuts. */
    size_t flips[] = {0, 20, 200, len / 2, len - 1};
    for (size_t i = 0; i < sizeof flips / sizeof *flips; i++) {
        data[flips[i]] ^= 0x5A;
        ct_write(bad, data, len);
        data[flips[i]] ^= 0x5A;
        struct cp_run r;
        cp_run_cli(&r, "run", bad, NULL);
        char *err = ct_fails_2(&r);
        ct_assert_mentions(err, "corrupt.om", NULL);
        free(err);
    }
    size_t cuts[] = {0, 10, 127, len / 3, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        ct_write(bad, data, cuts[i]);
        struct cp_run r;
        cp_run_cli(&r, "run", bad, NULL);
        char *err = ct_fails_2(&r);
        ct_assert_mentions(err, "corrupt.om", NULL);
        free(err);
    }
    char *missing = cp_t_path("missing.om");
    struct cp_run r;
    cp_run_cli(&r, "run", missing, NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, missing, NULL);
    free(err);
    free(missing);
    free(bad);
    free(data);
    free(om);
}

/* The chain model of cp_t_onnx_chain (x -> ops[0] -> ... -> y, nodes
 * node_0, node_1, ...; the last a Cast to `cast_to` when that is not 0)
 * written to <scratch>/LEAF. */
static char *write_chain_model(const char *leaf, const char *const *ops, size_t n, int cast_to)
{
    cr_assert_leq(n, 4);
    size_t len = 0;
    uint8_t *buf = cp_t_onnx_chain(ops, n, cast_to, &len);
    cr_assert_not_null(buf);
    char *path = cp_t_path(leaf);
    ct_write(path, buf, len);
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
    char *path = cp_t_path(leaf);
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
    ct_assert_mentions(r.err, kind, "'y'", NULL);
    cp_run_release(&r);

    cp_run_cli(&r, "run", model, "--input", x, "--threads", "1", "--allow-nonfinite", "--json",
               NULL);
    cr_assert_eq(r.exit_code, 0, "%s: exit %d; stderr: %s", model, r.exit_code, r.err);
    json_t *o = cp_t_json(r.out);
    cr_assert_not_null(o, "stdout: %s", r.out);
    json_t *y = json_array_get(json_object_get(o, "outputs"), 0);
    cr_assert_eq(json_integer_value(json_object_get(y, key)), 4, "stdout: %s", r.out);
    json_decref(o);
    cp_run_release(&r);
}

Test(cli_run, run_reports_nan_and_inf_outputs)
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
    char *base = cp_t_path("sqrt");
    char *om = cp_t_convert_file(sq, base, NULL);
    cr_assert_not_null(om);
    check_nonfinite(om, neg, "NaN", "nan");

    /* Finite inputs give finite outputs and exit 0. */
    char *one = write_x_npy("one.npy", 1.0f);
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--input", one, NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);
    free(one);
    free(om);
    free(base);
    free(sq);
    free(ex);
    free(neg);
    free(big);
}

Test(cli_run, run_reports_nan_in_half_precision_outputs)
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
        json_t *o = cp_t_json(r.out);
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

Test(cli_run, run_of_onnx_with_unsupported_op_names_the_op_and_node)
{
    /* The importer lists unsupported op types with their counts and names
     * the first node of each. */
    static const char *const ops[] = {"Relu", "StringNormalizer"};
    char *path = write_chain_model("strnorm.onnx", ops, 2, 0);
    struct cp_run r;
    cp_run_cli(&r, "run", path, NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "strnorm.onnx", "StringNormalizer (1 node",
                       "'node_1' (StringNormalizer)", NULL);
    free(err);
    free(path);
}

Test(cli_run, run_of_om_with_a_node_without_kernel_names_it_at_load)
{
    /* Import refuses unsupported ops, so make such a .om by hand: read a
     * converted one and turn a node into an op no kernel implements. */
    static const char *const ops[] = {"Relu", "Sigmoid"};
    char *onnx = write_chain_model("chain.onnx", ops, 2, 0);
    char *base = cp_t_path("chain");
    char *om = cp_t_convert_file(onnx, base, NULL);
    cr_assert_not_null(om);
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
    char *bad = cp_t_path("mystery.om");
    cr_assert_eq(cp_om_write(bad, g, &meta, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
    cp_om_meta_release(&meta);

    struct cp_run r;
    cp_run_cli(&r, "run", bad, NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "mystery.om", "node_1", "MysteryOp", NULL);
    free(err);
    cp_run_cli(&r, "bench", bad, "--iterations", "1", NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, "node_1", NULL);
    free(err);
    free(bad);
    free(om);
    free(base);
    free(onnx);
}

/* ---- run: --batch on static batch-1 models ------------------------------------------- */

Test(cli_run, run_batch_2_overrides_dim_0_of_a_static_model)
{
    /* Without dynamic-batch profiles, --batch sets dimension 0 of every
     * input (runner/cpu/plan_shapes.c); resnet_tiny has nothing that fixes
     * the batch, so it runs at batch 2. */
    char *om = ct_convert("resnet_tiny");
    char *out = cp_t_path("b2");
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--batch", "2", "-o", out, "--threads", "1", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cp_run_release(&r);
    char *npy = cp_t_fmt("%s/logits.npy", out);
    struct cp_host_tensor t = read_tensor(npy);
    cr_assert_eq(t.rank, 2);
    cr_assert_eq(t.dims[0], 2);
    cr_assert_eq(t.dims[1], 10);
    cp_host_tensor_release(&t);
    free(npy);
    free(out);
    free(om);
}

Test(cli_run, run_batch_2_on_a_model_that_fixes_batch_1_names_the_node)
{
    /* The transformer's Reshape nodes hard-code [1,128,4,16]: inference
     * must say which node and with which input shapes, not crash. Run the
     * .onnx itself: conversion fuses those Reshapes into the attention. */
    char *om = cp_t_example("transformer_encoder_op17");
    struct cp_run r;
    cp_run_cli(&r, "run", om, "--batch", "2", NULL);
    char *err = ct_fails_2(&r);
    ct_assert_mentions(err, "Reshape", "x=2x128x64", NULL);
    free(err);
    cp_run_cli(&r, "bench", om, "--batch", "2", "--iterations", "1", NULL);
    err = ct_fails_2(&r);
    ct_assert_mentions(err, "Reshape", NULL);
    free(err);
    free(om);
}
