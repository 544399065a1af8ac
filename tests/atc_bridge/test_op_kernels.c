/* --op_kernels, the runtime kernel of single nodes: the flag's form and
 * canonical text, how it travels in the config, that the plan runs a
 * pinned node with the kernel named (the trace says so) and computes the
 * same, and that a kernel that cannot run the node is refused with the
 * ones that can. */
#include "atc_bridge/convert.h"
#include "support/cli.h"
#include "support/run.h"

#include <criterion/criterion.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(op_kernels, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 120);

static enum cp_status parse(const char *text, char *out, size_t cap, struct cp_diag *d)
{
    cp_diag_init(d);
    return cp_op_kernels_parse(text, out, cap, d);
}

Test(op_kernels, the_flag_becomes_sorted_lines_by_node)
{
    char out[256];
    struct cp_diag d;
    cr_assert_eq(parse(" b/conv=ref ; a=b/mm=onednn:matmul;;", out, sizeof out, &d), CP_OK, "%s",
                 d.msg);
    cr_expect_str_eq(out, "a=b/mm=onednn:matmul\nb/conv=ref",
                     "the last '=' separates a node's name from its kernel");
    cr_expect_eq(parse("a=ref;a=onednn:conv", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "node 'a' is given twice"), "%s", d.msg);
    cr_expect_str_eq(out, "", "a refused list leaves nothing half-read");
    cr_expect_eq(parse("conv", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "is not NODE=KERNEL"), "%s", d.msg);
    cr_expect_eq(parse("=ref", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_eq(parse("a=", out, sizeof out, &d), CP_ERR_USAGE);
    cr_expect_eq(parse("aaaaaaaaaaaa=ref;bbbbbbbbbbbbbb=ref", out, 20, &d), CP_ERR_USAGE);
    cr_expect_not_null(strstr(d.msg, "longer than 19 bytes"), "%s", d.msg);

    struct cp_convert_config a, b;
    cp_convert_config_init(&a);
    b = a;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert_config_set(&b, "op_kernels", "x=ref;w=onednn:conv", &d), CP_OK, "%s",
                 d.msg);
    char ia[17], ib[17];
    cp_convert_config_id(&a, ia);
    cp_convert_config_id(&b, ib);
    cr_expect_str_neq(ia, ib, "a pinned kernel changes what runs, so the id");
    struct cp_buf cmd, js;
    cp_buf_init(&cmd);
    cp_buf_init(&js);
    cp_convert_config_cmdline(&b, &cmd);
    cr_expect_not_null(strstr(cmd.data, "--op_kernels=w=onednn:conv;x=ref"), "%s", cmd.data);
    cp_convert_config_json(&b, &js);
    struct cp_convert_config back;
    cr_assert_eq(cp_convert_config_from_json(&back, js.data, &d), CP_OK, "%s", d.msg);
    cr_expect_str_eq(back.op_kernels, "w=onednn:conv\nx=ref");
    cp_buf_release(&cmd);
    cp_buf_release(&js);
    cr_expect_str_eq(cp_convert_flag_pass("op_kernels"), "KernelSelectionPass");
}

/* The kernel the last run of a trace ran the node standing first for ONNX
 * node `origin` with. */
static char *impl_of(const char *om, const char *trace, const char *origin)
{
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "-n", "2", "--no-probe", "--threads", "1", "--trace", trace, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open_v2(trace, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(db,
                                    "SELECT impl FROM kernels WHERE run_id = (SELECT max(id) FROM "
                                    "runs) AND json_extract(origins, '$[0]') = ?",
                                    -1, &st, NULL),
                 SQLITE_OK);
    sqlite3_bind_text(st, 1, origin, -1, SQLITE_STATIC);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "no kernel stands for %s", origin);
    char *out = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

Test(op_kernels, a_pinned_node_runs_the_kernel_named_and_computes_the_same)
{
    char *dflt = cp_t_convert(cp_t_dir, "resnet_tiny", "default", NULL);
    char *pin = cp_t_convert(cp_t_dir, "resnet_tiny", "pin", "--op_kernels=/conv1/Conv=ref", NULL);
    cr_assert(dflt && pin, "a conversion failed (see stderr)");
    char *a = impl_of(dflt, cp_t_path("d.db"), "/conv1/Conv");
    char *b = impl_of(pin, cp_t_path("p.db"), "/conv1/Conv");
    cr_expect_str_neq(a, "ref", "the default plan runs the first conv on a fast kernel");
    cr_expect_str_eq(b, "ref", "pinned: the reference kernel, and the trace says so");
    struct cp_run r;
    cp_run_cli(&r, "compare", dflt, pin, "--json", "--threads", "1", NULL);
    cr_expect_eq(r.exit_code, 0, "a kernel changes how, not what: %s", r.out);
    cp_run_release(&r);
    free(a);
    free(b);
}

Test(op_kernels, a_kernel_that_cannot_run_the_node_or_a_missing_node_is_refused)
{
    char *bad =
        cp_t_convert(cp_t_dir, "resnet_tiny", "bad", "--op_kernels=/conv1/Conv=c:nope", NULL);
    cr_assert_not_null(bad, "the converter does not know the runtime's kernels");
    struct cp_run r;
    cp_run_cli(&r, "run", bad, "--threads", "1", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    cr_expect_not_null(strstr(r.err, "pinned to kernel 'c:nope'"), "%s", r.err);
    cr_expect_not_null(strstr(r.err, "no such kernel for this op"), "%s", r.err);
    cr_expect_not_null(strstr(r.err, "kernels that can: onednn:fused_conv, ref"), "%s", r.err);
    cp_run_release(&r);
    const char *model = cp_t_fmt("--model=%s", cp_t_example("resnet_tiny"));
    const char *out = cp_t_fmt("--output=%s/x", cp_t_dir);
    cp_run_cli(&r, "convert", model, "--framework=5", out, "--op_kernels=nope=ref", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    cr_expect_not_null(strstr(r.err, "no node named 'nope'"), "%s", r.err);
    cp_run_release(&r);
}
