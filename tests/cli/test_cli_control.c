/* Control flow through the CLI: If, Loop and Scan models (made by
 * tests/onnx/control/make_models.py) convert, round-trip through the .om
 * and run with the right values; an If on a constant condition is folded
 * into its branch with provenance kept; malformed subgraphs are refused
 * with exit 2 and a message naming the node and the attribute. Models whose
 * shapes are known only at run time (NonZero, an If of two shapes, a Loop
 * with a run-time trip count, NonMaxSuppression) run as dynamic plans. */
#include "cli/cli_test.h"
#include "graph/graph.h"
#include "om/om.h"
#include "runner/runner.h"

#include <math.h>

TestSuite(cli_control, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

static char *model_path(const char *name)
{
    return cp_t_fmt("%s/tests/onnx/control/%s.onnx", CP_SOURCE_DIR, name);
}

/* Convert tests/onnx/control/NAME.onnx; returns the .om path. */
static char *convert_ok(const char *name)
{
    char *onnx = model_path(name);
    char *base = cp_t_path(name);
    char *om = cp_t_convert_file(onnx, base, NULL);
    free(base);
    cr_assert_not_null(om, "converting %s failed (see stderr)", name);
    free(onnx);
    return om;
}

static char *convert_fails(const char *name)
{
    char *model = cp_t_fmt("--model=%s/tests/onnx/control/%s.onnx", CP_SOURCE_DIR, name);
    char *base = cp_t_path("bad");
    char *output = cp_t_fmt("--output=%s", base);
    struct cp_run r;
    cp_run_cli(&r, "convert", model, "--framework=5", output, NULL);
    char *err = ct_fails_2(&r);
    free(model);
    free(base);
    free(output);
    return err;
}

/* Write a float tensor as .npy into the scratch folder; returns its path. */
static char *write_f32(const char *name, int rank, const int64_t *dims, const float *v)
{
    struct cp_host_tensor t = {.dtype = CP_DTYPE_F32, .rank = rank};
    size_t n = 1;
    for (int k = 0; k < rank; k++)
        n *= (size_t)(t.dims[k] = dims[k]);
    t.data = (void *)v;
    t.nbytes = n * sizeof(float);
    char *file = cp_t_fmt("%s.npy", name);
    char *path = cp_t_path(file);
    free(file);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_OK, "%s", d.msg);
    return path;
}

static char *write_bool(const char *name, bool v)
{
    uint8_t b = v;
    struct cp_host_tensor t = {.dtype = CP_DTYPE_BOOL, .rank = 0, .data = &b, .nbytes = 1};
    char *file = cp_t_fmt("%s.npy", name);
    char *path = cp_t_path(file);
    free(file);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_OK, "%s", d.msg);
    return path;
}

static float *read_out(const char *dir, const char *name, size_t want)
{
    char *path = cp_t_fmt("%s/%s.npy", dir, name);
    struct cp_host_tensor t;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_read_file(path, &t, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(t.nbytes, want * sizeof(float), "%s: %zu bytes", name, t.nbytes);
    free(path);
    return t.data;
}

/* `cannprof run OM --input ... --output-dir=DIR`, up to three inputs (the
 * unused ones NULL). */
static void run_ok(const char *om, const char *outdir, const char *i1, const char *i2,
                   const char *i3)
{
    char *o = cp_t_fmt("--output-dir=%s", outdir);
    const char *args[3] = {i1, i2, i3};
    const char *a[3] = {o, NULL, NULL};
    size_t n = 0;
    for (int k = 0; k < 3; k++)
        if (args[k])
            n++;
    struct cp_run r;
    if (n == 1)
        cp_run_cli(&r, "run", om, args[0], a[0], NULL);
    else if (n == 2)
        cp_run_cli(&r, "run", om, args[0], args[1], a[0], NULL);
    else
        cp_run_cli(&r, "run", om, args[0], args[1], args[2], a[0], NULL);
    cr_assert_eq(r.exit_code, 0, "run: exit %d, stderr: %s", r.exit_code, r.err);
    cp_run_release(&r);
    free(o);
}

Test(cli_control, constant_if_is_folded_with_provenance)
{
    char *om = convert_ok("if_const");
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read(om, &g, NULL, &d), CP_OK, "%s", d.msg);
    size_t n_if = 0, n_add = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        n_if += n->op == CP_OP_IF;
        if (n->op != CP_OP_ADD)
            continue;
        n_add++;
        bool branch = false, node = false;
        for (size_t k = 0; k < n->n_origins; k++) {
            branch |= strcmp(n->origins[k], "then_add") == 0;
            node |= strcmp(n->origins[k], "pick") == 0;
        }
        cr_assert(branch && node, "the inlined Add lost its origins");
    }
    cr_assert_eq(n_if, 0, "the If on a constant condition was not folded");
    cr_assert_eq(n_add, 1);
    cp_graph_free(g);
    free(om);
}

/* Run an If model on condition c and input x (a .npy path); returns its
 * n-element output y. */
static float *run_if_model(const char *om, const char *xp, int c, size_t n)
{
    char *cp = write_bool(c ? "c1" : "c0", c);
    char *in_c = cp_t_fmt("--input=c=%s", cp), *in_x = cp_t_fmt("--input=x=%s", xp);
    char *dir = cp_t_path(c ? "out1" : "out0");
    run_ok(om, dir, in_c, in_x, NULL);
    float *y = read_out(dir, "y", n);
    free(cp);
    free(in_c);
    free(in_x);
    free(dir);
    return y;
}

Test(cli_control, if_on_an_input_takes_either_branch)
{
    char *om = convert_ok("if_input");
    const int64_t dims[2] = {2, 3};
    const float x[6] = {1, 1, 1, 1, 1, 1};
    char *xp = write_f32("x", 2, dims, x);
    for (int c = 0; c < 2; c++) {
        float *y = run_if_model(om, xp, c, 6);
        for (int i = 0; i < 6; i++)
            cr_assert_float_eq(y[i], c ? 1.0f + (float)(i + 1) : 1.0f - (float)(i + 1), 1e-6);
        free(y);
    }
    free(xp);
    free(om);
}

/* Loop of 3 with an If inside reading x from two graphs up. */
Test(cli_control, nested_loop_reads_outer_scope)
{
    char *om = convert_ok("nested_loop");
    const int64_t dims[2] = {2, 3};
    const float x[6] = {1, 2, 3, 4, 5, 6}, acc0[6] = {10, 10, 10, 10, 10, 10};
    char *xp = write_f32("x", 2, dims, x), *ap = write_f32("acc0", 2, dims, acc0);
    for (int f = 0; f < 2; f++) {
        char *fp = write_bool(f ? "f1" : "f0", f);
        char *i1 = cp_t_fmt("--input=flag=%s", fp), *i2 = cp_t_fmt("--input=x=%s", xp),
             *i3 = cp_t_fmt("--input=acc0=%s", ap);
        char *dir = cp_t_path(f ? "out1" : "out0");
        run_ok(om, dir, i1, i2, i3);
        float *acc = read_out(dir, "acc", 6), *trace = read_out(dir, "trace", 18);
        float sign = f ? 1.0f : -1.0f;
        for (int i = 0; i < 6; i++) {
            cr_assert_float_eq(acc[i], 10.0f + 3 * sign * x[i], 1e-5);
            for (int k = 0; k < 3; k++)
                cr_assert_float_eq(trace[k * 6 + i], 10.0f + (float)(k + 1) * sign * x[i], 1e-5);
        }
        free(acc);
        free(trace);
        free(fp);
        free(i1);
        free(i2);
        free(i3);
        free(dir);
    }
    free(xp);
    free(ap);
    free(om);
}

/* Scan-9: running sum over axis 1, read backwards, written along axis 1. */
Test(cli_control, scan_runs_backwards_along_an_axis)
{
    char *om = convert_ok("scan_sum");
    const int64_t sd[2] = {2, 3}, xd[3] = {2, 4, 3};
    float s0[6] = {0}, x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    char *sp = write_f32("s0", 2, sd, s0), *xp = write_f32("x", 3, xd, x);
    char *i1 = cp_t_fmt("--input=s0=%s", sp), *i2 = cp_t_fmt("--input=x=%s", xp);
    char *dir = cp_t_path("out");
    run_ok(om, dir, i1, i2, NULL);
    float *s = read_out(dir, "s", 6), *y = read_out(dir, "y", 24);
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 3; c++) {
            float run = 0;
            for (int t = 0; t < 4; t++) {
                run += x[b * 12 + (3 - t) * 3 + c];
                cr_assert_float_eq(y[b * 12 + t * 3 + c], run, 1e-5, "y[%d,%d,%d]", b, t, c);
            }
            cr_assert_float_eq(s[b * 3 + c], run, 1e-5);
        }
    free(s);
    free(y);
    free(sp);
    free(xp);
    free(i1);
    free(i2);
    free(dir);
    free(om);
}

Test(cli_control, malformed_subgraphs_are_refused_naming_node_and_attribute)
{
    char *e = convert_fails("bad_loop_inputs");
    ct_assert_mentions(e, "node 'bad_loop' (Loop)", "attribute 'body'", "2 inputs", NULL);
    free(e);
    e = convert_fails("bad_if_missing_else");
    ct_assert_mentions(e, "node 'half_if' (If)", "'else_branch'", "missing", NULL);
    free(e);
    e = convert_fails("bad_if_unresolved");
    ct_assert_mentions(e, "node 'lost_if' (If), attribute 'then_branch'", "'reads_nowhere'",
                       "'nowhere'", NULL);
    free(e);
    e = convert_fails("bad_deep");
    ct_assert_mentions(e, "nest deeper than 16", NULL);
    free(e);
}

Test(cli_control, sequence_op_in_a_loop_body_is_refused_by_name)
{
    char *e = convert_fails("bad_seq_in_loop");
    ct_assert_mentions(e, "node 'seq_loop' (Loop), attribute 'body'", "SequenceEmpty", "'make_seq'",
                       NULL);
    free(e);
}

/* ---- shapes known only at run time (dynamic plans) ---------------------------------- */

static char *write_tensor(const char *name, enum cp_dtype dt, int rank, const int64_t *dims,
                          const void *v, size_t esize)
{
    struct cp_host_tensor t = {.dtype = dt, .rank = rank, .data = (void *)v};
    size_t n = 1;
    for (int k = 0; k < rank; k++)
        n *= (size_t)(t.dims[k] = dims[k]);
    t.nbytes = n * esize;
    char *file = cp_t_fmt("%s.npy", name);
    char *path = cp_t_path(file);
    free(file);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_write_npy(path, &t, &d), CP_OK, "%s", d.msg);
    return path;
}

/* Output NAME of DIR: its dims must be `dims` (rank `rank`). */
static void *read_shaped(const char *dir, const char *name, int rank, const int64_t *dims)
{
    char *path = cp_t_fmt("%s/%s.npy", dir, name);
    struct cp_host_tensor t;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tensor_read_file(path, &t, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(t.rank, rank, "%s: rank %d", name, t.rank);
    for (int k = 0; k < rank; k++)
        cr_assert_eq(t.dims[k], dims[k], "%s: dim %d is %lld, not %lld", name, k,
                     (long long)t.dims[k], (long long)dims[k]);
    free(path);
    return t.data;
}

Test(cli_control, nonzero_count_sizes_what_follows)
{
    char *om = convert_ok("dyn_nonzero");
    const float x[6] = {1, -2, 3, 0, 5, -1};
    char *xp = write_tensor("x", CP_DTYPE_F32, 1, (int64_t[]){6}, x, 4);
    char *in = cp_t_fmt("--input=x=%s", xp), *dir = cp_t_path("out");
    run_ok(om, dir, in, NULL, NULL);
    float *y = read_shaped(dir, "y", 1, (int64_t[]){3});
    cr_assert(y[0] == 1 && y[1] == 3 && y[2] == 5, "y = %g %g %g", y[0], y[1], y[2]);
    free(y);
    free(xp);
    free(in);
    free(dir);
    free(om);
}

Test(cli_control, if_branches_of_different_shapes_give_the_taken_ones)
{
    char *om = convert_ok("dyn_if_shapes");
    const float x[6] = {0, 1, 2, 3, 4, 5};
    char *xp = write_f32("x", 2, (int64_t[]){2, 3}, x);
    for (int c = 0; c < 2; c++) {
        char *cp = write_bool(c ? "c1" : "c0", c);
        char *in_c = cp_t_fmt("--input=c=%s", cp), *in_x = cp_t_fmt("--input=x=%s", xp);
        char *dir = cp_t_path(c ? "out1" : "out0");
        run_ok(om, dir, in_c, in_x, NULL);
        float *y = read_shaped(dir, "y", 2, (int64_t[]){c ? 2 : 4, 3});
        for (int i = 0; i < (c ? 6 : 12); i++)
            cr_assert_float_eq(y[i], x[i % 6], 1e-6);
        free(y);
        free(cp);
        free(in_c);
        free(in_x);
        free(dir);
    }
    free(xp);
    free(om);
}

/* A branch the inputs' shapes do not fit (else_branch reshapes 6 elements
 * to [2, 4]): the other branch's shapes stand, so the output is [1, 6]
 * whichever way the condition goes at run time; taking the bad branch is
 * exit 2 naming the node, the branch and the op that cannot run. */
Test(cli_control, a_branch_the_shapes_do_not_fit_fails_only_when_taken)
{
    char *om = convert_ok("if_bad_branch");
    const float x[6] = {-1, 2, -3, 4, -5, 6};
    char *xp = write_f32("x", 2, (int64_t[]){1, 6}, x);
    char *in_x = cp_t_fmt("--input=x=%s", xp);
    char *c1 = write_bool("c1", true), *c0 = write_bool("c0", false);
    char *in_c1 = cp_t_fmt("--input=c=%s", c1), *in_c0 = cp_t_fmt("--input=c=%s", c0);
    char *dir = cp_t_path("out_then");
    run_ok(om, dir, in_c1, in_x, NULL);
    float *y = read_shaped(dir, "y", 2, (int64_t[]){1, 6});
    for (int i = 0; i < 6; i++)
        cr_assert_float_eq(y[i], x[i] > 0 ? x[i] : 0.0f, 1e-6);
    free(y);
    char *out = cp_t_fmt("--output-dir=%s", dir);
    struct cp_run r;
    cp_run_cli(&r, "run", om, in_c0, in_x, out, NULL);
    char *err = ct_fails_2(&r);
    cr_assert(strstr(err, "'pick'") && strstr(err, "else_branch cannot run on these inputs") &&
                  strstr(err, "e_reshape"),
              "stderr: %s", err);
    free(err);
    free(out);
    free(dir);
    free(in_c0);
    free(in_c1);
    free(c0);
    free(c1);
    free(in_x);
    free(xp);
    free(om);
}

Test(cli_control, loop_with_a_run_time_trip_count_grows_its_carried_value)
{
    char *om = convert_ok("dyn_loop");
    const float acc0 = 7;
    char *ap = write_f32("acc0", 1, (int64_t[]){1}, &acc0);
    for (int64_t m = 0; m <= 4; m += 4) {
        char *mp = write_tensor(m ? "m4" : "m0", CP_DTYPE_I64, 0, NULL, &m, 8);
        char *i1 = cp_t_fmt("--input=m=%s", mp), *i2 = cp_t_fmt("--input=acc0=%s", ap);
        char *dir = cp_t_path(m ? "out4" : "out0");
        run_ok(om, dir, i1, i2, NULL);
        float *acc = read_shaped(dir, "acc", 1, (int64_t[]){1 + m});
        float *trace = read_shaped(dir, "trace", 2, (int64_t[]){m, 1});
        cr_assert_float_eq(acc[0], 7.0f, 0);
        for (int64_t i = 0; i < m; i++) {
            cr_assert_float_eq(acc[1 + i], (float)i, 0);
            cr_assert_float_eq(trace[i], 2.0f * (float)i, 0);
        }
        free(acc);
        free(trace);
        free(mp);
        free(i1);
        free(i2);
        free(dir);
    }
    free(ap);
    free(om);
}

Test(cli_control, nms_without_a_declared_row_count_keeps_what_it_selects)
{
    char *om = convert_ok("dyn_nms");
    /* Box 1 (0.95) suppresses box 0 (IoU 0.82); boxes 2 and 3 stand apart. */
    const float boxes[16] = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6, 0, 10, 1, 11};
    const float scores[4] = {0.9f, 0.95f, 0.5f, 0.3f};
    char *bp = write_f32("boxes", 3, (int64_t[]){1, 4, 4}, boxes);
    char *sp = write_f32("scores", 3, (int64_t[]){1, 1, 4}, scores);
    char *i1 = cp_t_fmt("--input=boxes=%s", bp), *i2 = cp_t_fmt("--input=scores=%s", sp);
    char *dir = cp_t_path("out");
    run_ok(om, dir, i1, i2, NULL);
    int64_t *sel = read_shaped(dir, "sel", 2, (int64_t[]){3, 3});
    const int64_t want[9] = {0, 0, 1, 0, 0, 2, 0, 0, 3};
    for (int i = 0; i < 9; i++)
        cr_assert_eq(sel[i], want[i], "sel[%d] = %lld", i, (long long)sel[i]);
    free(sel);
    free(bp);
    free(sp);
    free(i1);
    free(i2);
    free(dir);
    free(om);
}

/* The branch reorders an outer weight's rows (Slice + Concat) before its
 * MatMul: the conversion folds the reordering inside the branch, and
 * either branch still computes its own product. */
Test(cli_control, constants_a_branch_reorders_are_folded_inside_it)
{
    char *om = convert_ok("if_gates");
    struct cp_graph *g;
    struct cp_om_meta meta;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read(om, &g, &meta, &d), CP_OK, "%s", d.msg);
    const struct cp_node *pick = NULL;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++)
        if (strcmp(cp_graph_node(g, (int32_t)i)->name, "pick") == 0)
            pick = cp_graph_node(g, (int32_t)i);
    cr_assert_not_null(pick, "the If on an input stays");
    const struct cp_attr *tb = cp_node_attr(pick, "then_branch");
    cr_assert(tb && tb->type == CP_ATTR_GRAPH);
    cr_assert_eq(cp_graph_n_live_nodes(tb->graph), 1, "then_branch keeps only its MatMul, not %zu",
                 cp_graph_n_live_nodes(tb->graph));
    cp_graph_free(g);
    cp_om_meta_release(&meta);

    const int64_t dims[2] = {1, 4};
    const float x[4] = {1, 0, 0, 0};
    char *xp = write_f32("x", 2, dims, x);
    for (int c = 0; c < 2; c++) {
        float *y = run_if_model(om, xp, c, 4);
        /* then: row 2 of w first; else: row 0 */
        for (int i = 0; i < 4; i++)
            cr_assert_float_eq(y[i], (float)((c ? 8 : 0) + i), 1e-6, "c=%d y[%d] = %g", c, i,
                               (double)y[i]);
        free(y);
    }
    free(xp);
    free(om);
}

/* The branch of If node `name` in the .om at `om`: how many live nodes it
 * has, and the op and activation of its first. */
static size_t branch_nodes(const char *om, const char *attr, enum cp_op *op, char *act, size_t cap)
{
    struct cp_graph *g;
    struct cp_om_meta meta;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read(om, &g, &meta, &d), CP_OK, "%s", d.msg);
    const struct cp_node *pick = NULL;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++)
        if (strcmp(cp_graph_node(g, (int32_t)i)->name, "pick") == 0)
            pick = cp_graph_node(g, (int32_t)i);
    cr_assert_not_null(pick, "the If on an input stays");
    const struct cp_attr *b = cp_node_attr(pick, attr);
    cr_assert(b && b->type == CP_ATTR_GRAPH, "%s is not a graph", attr);
    size_t live = cp_graph_n_live_nodes(b->graph);
    const struct cp_node *first = NULL;
    for (size_t i = 0; !first && i < cp_graph_n_nodes(b->graph); i++)
        if (!cp_graph_node(b->graph, (int32_t)i)->dead)
            first = cp_graph_node(b->graph, (int32_t)i);
    cr_assert_not_null(first, "%s has no node", attr);
    *op = first->op;
    snprintf(act, cap, "%s", cp_node_attr_string(first, "activation", ""));
    cp_graph_free(g);
    cp_om_meta_release(&meta);
    return live;
}

/* Conv -> Relu inside both branches (a full conv, a depthwise one) becomes
 * one FusedConv per branch, as it would outside control flow, and each
 * branch computes what the unfused conversion computes. */
Test(cli_control, conv_chains_inside_branches_are_fused)
{
    char *om = convert_ok("if_conv");
    char *off = ct_switch_file("nofuse.cfg", "ConvBiasActivationFusionPass:off\n");
    char *onnx = model_path("if_conv");
    char *base = cp_t_path("if_conv_unfused");
    char *om_off = cp_t_convert_file(onnx, base, off, NULL);
    cr_assert_not_null(om_off, "converting if_conv unfused failed (see stderr)");
    static const char *const attrs[2] = {"then_branch", "else_branch"};
    for (int b = 0; b < 2; b++) {
        enum cp_op op;
        char act[32];
        size_t n = branch_nodes(om, attrs[b], &op, act, sizeof act);
        cr_assert_eq(n, 1, "%s keeps %zu nodes, not one FusedConv", attrs[b], n);
        cr_assert_eq(op, CP_OP_FUSED_CONV, "%s runs %s", attrs[b], cp_op_name(op));
        cr_assert_str_eq(act, "Relu", "%s's FusedConv has activation '%s'", attrs[b], act);
        n = branch_nodes(om_off, attrs[b], &op, act, sizeof act);
        cr_assert_eq(n, 2, "with the fusion off %s has %zu nodes", attrs[b], n);
    }
    const int64_t dims[3] = {1, 4, 6};
    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
    char *xp = write_f32("x", 3, dims, x);
    for (int c = 0; c < 2; c++) {
        float *y = run_if_model(om, xp, c, 24);
        float *want = run_if_model(om_off, xp, c, 24);
        int zeros = 0;
        for (int i = 0; i < 24; i++) {
            cr_assert_float_eq(y[i], want[i], 1e-5, "c=%d y[%d] = %g, unfused %g", c, i,
                               (double)y[i], (double)want[i]);
            zeros += y[i] == 0.0f;
        }
        cr_assert(zeros > 0 && zeros < 24, "c=%d: the Relu clipped %d of 24", c, zeros);
        free(y);
        free(want);
    }
    free(xp);
    free(onnx);
    free(base);
    free(off);
    free(om_off);
    free(om);
}
