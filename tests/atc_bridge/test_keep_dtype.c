/* --keep_dtype, ATC's per-node precision list: the file's form (names and
 * OpType:: lines, comments, CRLF, blanks) and its canonical text, how it
 * travels in the config (flag, command line, JSON, id), which nodes the
 * precision pass keeps in fp32 (origins survive fusion, op types cover
 * their fused forms), and what a conversion refuses. */
#include "atc_bridge/convert.h"
#include "atc_bridge/passes/pass.h"
#include "support/cli.h"
#include "support/host.h"
#include "support/run.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(keep_dtype, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

static enum cp_status parse(const char *text, char *out, size_t cap, struct cp_diag *d)
{
    cp_diag_init(d);
    return cp_keep_dtype_parse("k.txt", text, strlen(text), out, cap, d);
}

Test(keep_dtype, the_file_becomes_sorted_unique_lines)
{
    char out[256];
    struct cp_diag d;
    cr_assert_eq(
        parse("b/conv\r\n# a comment\n\n  OpType::Softmax\t\na/mm\nb/conv\n", out, sizeof out, &d),
        CP_OK, "%s", d.msg);
    cr_assert_str_eq(out, "OpType::Softmax\na/mm\nb/conv");
    cr_assert(cp_keep_dtype_has(out, "a/mm"));
    cr_assert(cp_keep_dtype_has(out, "OpType::Softmax"));
    cr_assert_not(cp_keep_dtype_has(out, "a/m"), "a prefix is not an entry");
    cr_assert_not(cp_keep_dtype_has(out, "conv"), "a suffix is not an entry");
    cr_assert_eq(parse("# nothing\n\n", out, sizeof out, &d), CP_OK);
    cr_assert_str_eq(out, "");
    /* no final newline, names with blanks inside kept whole */
    cr_assert_eq(parse("my node 1", out, sizeof out, &d), CP_OK);
    cr_assert_str_eq(out, "my node 1");
}

Test(keep_dtype, bad_files_are_refused_naming_file_and_line)
{
    char out[64];
    struct cp_diag d;
    cr_assert_eq(parse("a\nOpType::\n", out, sizeof out, &d), CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "k.txt:2"), "%s", d.msg);
    cr_assert_str_eq(out, "", "a refused list leaves nothing half-read");
    char nul[] = "a\0b";
    cp_diag_init(&d);
    cr_assert_eq(cp_keep_dtype_parse("k.txt", nul, 3, out, sizeof out, &d), CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "offset 1"), "%s", d.msg);
    char *big = malloc(1100);
    memset(big, 'x', 1099);
    big[1099] = '\0';
    cr_assert_eq(parse(big, out, sizeof out, &d), CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "k.txt:1"), "%s", d.msg);
    free(big);
    /* longer than the room: refused, never cut short */
    cr_assert_eq(
        parse("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n", out,
              sizeof out, &d),
        CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "longer than 63 bytes"), "%s", d.msg);
}

Test(keep_dtype, the_list_is_in_the_id_the_json_and_the_command_line)
{
    char *path = cp_t_path("keep.txt");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("n2\nn1\n", f);
    fclose(f);
    struct cp_convert_config a, b;
    cp_convert_config_init(&a);
    char ia[17], ib[17];
    cp_convert_config_id(&a, ia);
    struct cp_buf j0;
    cp_buf_init(&j0);
    cp_convert_config_json(&a, &j0);
    cr_assert_null(strstr(j0.data, "keep_dtype"), "a config without a list keeps its old JSON");
    cp_buf_release(&j0);

    b = a;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&b, "keep_dtype", path, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_convert_config_load_keep_dtype(&b, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(b.keep_dtype, "n1\nn2");
    cp_convert_config_id(&b, ib);
    cr_assert_str_neq(ia, ib, "the list changes the model, so the id");

    /* the same list from a file elsewhere: the same id */
    struct cp_convert_config c = b;
    char *other = cp_t_path("other.txt");
    f = fopen(other, "w");
    fputs("n1\r\nn2\r\n", f);
    fclose(f);
    cr_assert_eq(cp_convert_config_set(&c, "keep_dtype", other, &d), CP_OK);
    cr_assert_str_eq(c.keep_dtype, "", "a new file makes the old list stale");
    cr_assert_eq(cp_convert_config_load_keep_dtype(&c, &d), CP_OK, "%s", d.msg);
    char ic[17];
    cp_convert_config_id(&c, ic);
    cr_assert_str_eq(ic, ib);

    struct cp_buf cmd, js;
    cp_buf_init(&cmd);
    cp_buf_init(&js);
    cp_convert_config_cmdline(&b, &cmd);
    cr_assert_not_null(strstr(cmd.data, "--keep_dtype="), "%s", cmd.data);
    cp_convert_config_json(&b, &js);
    struct cp_convert_config back;
    cr_assert_eq(cp_convert_config_from_json(&back, js.data, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(back.keep_dtype, "n1\nn2");
    cr_assert_str_eq(back.keep_dtype_file, path);
    cp_buf_release(&cmd);
    cp_buf_release(&js);

    cr_assert_eq(cp_convert_config_set(&c, "keep_dtype", cp_t_path("missing.txt"), &d), CP_OK);
    cr_assert_eq(cp_convert_config_load_keep_dtype(&c, &d), CP_ERR_USAGE);
    cr_assert_not_null(strstr(d.msg, "missing.txt"), "%s", d.msg);
    cr_assert_str_eq(cp_convert_flag_pass("keep_dtype"), "PrecisionModePass");
}

/* A Conv fused with its Relu (one origin each), a MatMul, an attention
 * whose origins are MatMuls, and a Gemm-born FusedMatMul. */
static struct cp_graph *compute_zoo(void)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "img", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 6, 6));
    gb_input(g, "seq", CP_DTYPE_F32, 3, GB_DIMS(1, 8, 16));
    gb_init(g, "w", CP_DTYPE_F32, 4, GB_DIMS(4, 4, 3, 3), NULL);
    gb_init(g, "m", CP_DTYPE_F32, 2, GB_DIMS(16, 16), NULL);
    gb_node(g, "mm", "MatMul", GB_IN("seq", "m"), GB_IN("mm_out"));
    struct cp_diag d;
    cp_diag_init(&d);
    int32_t cin[2] = {cp_graph_find_tensor(g, "img"), cp_graph_find_tensor(g, "w")}, out, idx;
    const char *conv_origins[] = {"block/conv", "block/relu"};
    out = gb_tensor(g, "c", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    cr_assert_eq(cp_graph_add_node(g, "block/relu_fused", "FusedConv", CP_DOMAIN, cin, 2, &out, 1,
                                   conv_origins, 2, &idx, &d),
                 CP_OK, "%s", d.msg);
    cp_node_set_string(g, idx, "activation", "Relu");
    int32_t fin[2] = {cp_graph_find_tensor(g, "seq"), cp_graph_find_tensor(g, "m")};
    const char *gemm_origin = "head/gemm";
    out = gb_tensor(g, "fm", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    cr_assert_eq(cp_graph_add_node(g, "head/gemm_fused", "FusedMatMul", CP_DOMAIN, fin, 2, &out, 1,
                                   &gemm_origin, 1, &idx, &d),
                 CP_OK, "%s", d.msg);
    gb_infer_ok(g);
    return g;
}

/* precision_loss_pct of `cannprof compare A B --json`. */
static double loss_of(const char *a, const char *b)
{
    struct cp_run r;
    cp_run_cli(&r, "compare", a, b, "--json", "--threads", "1", NULL);
    json_t *j = json_loads(r.out ? r.out : "", 0, NULL);
    cr_assert_not_null(j, "compare printed no JSON: %s", r.err);
    double v = json_number_value(json_object_get(j, "precision_loss_pct"));
    json_decref(j);
    cp_run_release(&r);
    return v;
}

static const char *precision_of(struct cp_graph *g, const char *node)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (strcmp(n->name, node) == 0)
            return cp_node_attr_string(n, "compute_precision", "(none)");
    }
    cr_assert_fail("no node %s", node);
    return NULL;
}

static void run_precision(struct cp_graph *g, const char *canon)
{
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    c.precision_mode = CP_PREC_ALLOW_MIX_PRECISION_BF16;
    snprintf(c.keep_dtype, sizeof c.keep_dtype, "%s", canon);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_pass_ctx ctx = {.g = g, .config = &c, .d = &d, .has_bf16 = true};
    bool changed = false;
    const struct cp_pass *p = cp_precision_passes;
    while (p->name && strcmp(p->name, "PrecisionModePass") != 0)
        p++;
    cr_assert_not_null(p->name);
    cr_assert_eq(p->run(&ctx, &changed), CP_OK, "%s", d.msg);
}

Test(keep_dtype, listed_nodes_keep_fp32_by_origin_or_op_type)
{
    struct cp_graph *g = compute_zoo();
    run_precision(g, "block/relu");
    cr_assert_str_eq(precision_of(g, "block/relu_fused"), "fp32",
                     "any origin of a fused node keeps it");
    cr_assert_str_eq(precision_of(g, "mm"), "bf16");
    cr_assert_str_eq(precision_of(g, "head/gemm_fused"), "bf16");
    cp_graph_free(g);

    g = compute_zoo();
    run_precision(g, "OpType::Gemm");
    cr_assert_str_eq(precision_of(g, "head/gemm_fused"), "fp32", "Gemm covers a FusedMatMul");
    cr_assert_str_eq(precision_of(g, "block/relu_fused"), "bf16");
    cp_graph_free(g);

    g = compute_zoo();
    run_precision(g, "OpType::Conv\nOpType::MatMul");
    cr_assert_str_eq(precision_of(g, "block/relu_fused"), "fp32", "Conv covers a FusedConv");
    cr_assert_str_eq(precision_of(g, "mm"), "fp32");
    cr_assert_str_eq(precision_of(g, "head/gemm_fused"), "fp32");
    cp_graph_free(g);
}

Test(keep_dtype, convert_keeps_the_listed_nodes_and_refuses_unknown_names)
{
    char cpu[256];
    if (!cp_t_host_has_bf16(cpu, sizeof cpu))
        cr_skip_test("this CPU (%s) has no bf16 arithmetic", cpu);
    /* every bf16-capable op listed by type: the same outputs as fp32 */
    char *keep = cp_t_path("all.txt");
    FILE *f = fopen(keep, "w");
    fputs("OpType::MatMul\nOpType::Gemm\nOpType::Conv\n", f);
    fclose(f);
    char *flag = cp_t_fmt("--keep_dtype=%s", keep);
    char *fp32 = cp_t_convert(cp_t_dir, "transformer_encoder_op17", "fp32", NULL);
    char *kept = cp_t_convert(cp_t_dir, "transformer_encoder_op17", "kept",
                              "--precision_mode=allow_mix_precision_bf16", flag, NULL);
    char *bf16 = cp_t_convert(cp_t_dir, "transformer_encoder_op17", "bf16",
                              "--precision_mode=allow_mix_precision_bf16", NULL);
    cr_assert(fp32 && kept && bf16, "a conversion failed (see stderr)");
    cr_assert_eq(loss_of(fp32, kept), 0, "every node kept: fp32 arithmetic throughout");
    cr_assert_gt(loss_of(fp32, bf16), 0, "without the list bf16 changes the outputs");
    struct cp_run r;
    cp_run_cli(&r, "info", kept, NULL);
    cr_assert_not_null(strstr(r.out, "keep_dtype"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "OpType::Gemm"), "%s", r.out);
    cp_run_release(&r);

    f = fopen(keep, "w");
    fputs("no/such/node\n", f);
    fclose(f);
    cp_run_cli(&r, "convert", cp_t_fmt("--model=%s", cp_t_example("transformer_encoder_op17")),
               "--framework=5", cp_t_fmt("--output=%s/x", cp_t_dir),
               "--precision_mode=allow_mix_precision_bf16", flag, NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "no/such/node"), "%s", r.err);
    cp_run_release(&r);
}
