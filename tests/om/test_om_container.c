/* The CPU .om container as written and read: round trips of every graph
 * detail and of the metadata, dead nodes left out, 64-byte aligned weights,
 * deterministic bytes, the documented header layout, unknown section kinds
 * of a newer compatible writer skipped, the atomic write to disk, and the
 * reader naming a missing or empty file. */
#include "om_test.h"

#include <dirent.h>
#include <unistd.h>

TestSuite(om_container);

/* ---- comparisons -------------------------------------------------------- */

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool in_subgraph; /* comparing a subgraph (assert_attr_eq) */

static void assert_tensor_eq(const struct cp_tensor *a, const struct cp_tensor *b)
{
    cr_assert_str_eq(a->name, b->name);
    cr_assert_eq(a->dtype, b->dtype, "tensor %s dtype", a->name);
    cr_assert_eq(a->kind, b->kind, "tensor %s kind", a->name);
    cr_assert_eq(a->layout, b->layout, "tensor %s layout", a->name);
    cr_assert_eq(a->shape.rank, b->shape.rank, "tensor %s rank", a->name);
    for (int k = 0; k < a->shape.rank; k++) {
        cr_assert_eq(a->shape.dims[k].value, b->shape.dims[k].value, "%s dim %d", a->name, k);
        cr_assert(str_eq(a->shape.dims[k].sym, b->shape.dims[k].sym), "%s dim %d sym", a->name, k);
    }
    cr_assert_eq(a->nbytes, b->nbytes, "tensor %s nbytes", a->name);
    cr_assert_eq(a->data != NULL, b->data != NULL, "tensor %s has data", a->name);
    if (a->data) {
        /* A subgraph's constants are copied out of the message. */
        cr_assert_eq(b->owner, in_subgraph ? CP_DATA_HEAP : CP_DATA_MMAP, "tensor %s owner",
                     a->name);
        cr_assert(a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0, "%s bytes", a->name);
    }
}

static void assert_graph_eq(const struct cp_graph *a, const struct cp_graph *b);

static void assert_attr_eq(const struct cp_attr *a, const struct cp_attr *b)
{
    cr_assert_str_eq(a->name, b->name);
    cr_assert_eq(a->type, b->type, "attr %s type", a->name);
    switch (a->type) {
    case CP_ATTR_INT:
        cr_assert_eq(a->i, b->i);
        break;
    case CP_ATTR_FLOAT:
        cr_assert(memcmp(&a->f, &b->f, sizeof a->f) == 0);
        break;
    case CP_ATTR_STRING:
        cr_assert_str_eq(a->s, b->s);
        break;
    case CP_ATTR_INTS:
        cr_assert_eq(a->n, b->n);
        cr_assert(a->n == 0 || memcmp(a->ints, b->ints, a->n * sizeof *a->ints) == 0);
        break;
    case CP_ATTR_FLOATS:
        cr_assert_eq(a->n, b->n);
        cr_assert(a->n == 0 || memcmp(a->floats, b->floats, a->n * sizeof *a->floats) == 0);
        break;
    case CP_ATTR_STRINGS:
        cr_assert_eq(a->n, b->n);
        for (size_t i = 0; i < a->n; i++)
            cr_assert_str_eq(a->strings[i], b->strings[i]);
        break;
    case CP_ATTR_TENSOR:
        cr_assert_eq(a->tensor, b->tensor);
        break;
    case CP_ATTR_GRAPH: {
        bool was = in_subgraph;
        in_subgraph = true;
        assert_graph_eq(a->graph, b->graph);
        in_subgraph = was;
        break;
    }
    }
}

static void assert_node_eq(const struct cp_node *a, const struct cp_node *b)
{
    cr_assert_str_eq(a->name, b->name);
    cr_assert_eq(a->op, b->op, "node %s op", a->name);
    cr_assert_str_eq(a->op_type, b->op_type);
    cr_assert_str_eq(a->domain, b->domain);
    cr_assert_eq(a->n_inputs, b->n_inputs);
    cr_assert_eq(a->n_outputs, b->n_outputs);
    cr_assert_eq(a->n_origins, b->n_origins);
    cr_assert_eq(a->n_attrs, b->n_attrs);
    for (size_t i = 0; i < a->n_inputs; i++)
        cr_assert_eq(a->inputs[i], b->inputs[i]);
    for (size_t i = 0; i < a->n_outputs; i++)
        cr_assert_eq(a->outputs[i], b->outputs[i]);
    for (size_t i = 0; i < a->n_origins; i++)
        cr_assert_str_eq(a->origins[i], b->origins[i]);
    for (size_t i = 0; i < a->n_attrs; i++)
        assert_attr_eq(&a->attrs[i], &b->attrs[i]);
    cr_assert_not(b->dead);
}

/* `b` is `a` read back: equal except that dead nodes of `a` are gone. */
static void assert_graph_eq(const struct cp_graph *a, const struct cp_graph *b)
{
    cr_assert_str_eq(cp_graph_name(a), cp_graph_name(b));
    cr_assert_eq(cp_graph_opset(a), cp_graph_opset(b));
    cr_assert_eq(cp_graph_n_tensors(a), cp_graph_n_tensors(b));
    for (int32_t i = 0; i < (int32_t)cp_graph_n_tensors(a); i++)
        assert_tensor_eq(cp_graph_tensor(a, i), cp_graph_tensor(b, i));
    cr_assert_eq(cp_graph_n_live_nodes(a), cp_graph_n_nodes(b));
    int32_t j = 0;
    for (int32_t i = 0; i < (int32_t)cp_graph_n_nodes(a); i++) {
        const struct cp_node *n = cp_graph_node(a, i);
        if (n->dead)
            continue;
        assert_node_eq(n, cp_graph_node(b, j));
        for (size_t k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0)
                cr_assert_eq(cp_graph_tensor(b, n->outputs[k])->producer, j);
        j++;
    }
    cr_assert_eq(cp_graph_n_inputs(a), cp_graph_n_inputs(b));
    cr_assert_eq(cp_graph_n_outputs(a), cp_graph_n_outputs(b));
    for (size_t i = 0; i < cp_graph_n_inputs(a); i++)
        cr_assert_eq(cp_graph_input(a, i), cp_graph_input(b, i));
    for (size_t i = 0; i < cp_graph_n_outputs(a); i++)
        cr_assert_eq(cp_graph_output(a, i), cp_graph_output(b, i));
    cr_assert_eq(cp_graph_n_outer(a), cp_graph_n_outer(b));
    for (size_t i = 0; i < cp_graph_n_outer(a); i++)
        cr_assert_eq(cp_graph_outer(a, i), cp_graph_outer(b, i));
}

static char *config_json(const struct cp_convert_config *c)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_convert_config_json(c, &b);
    return cp_buf_steal(&b);
}

/* ---- round trips ----------------------------------------------------------- */

Test(om_container, round_trip_preserves_every_graph_detail)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    struct cp_graph *g;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read_buffer(buf, len, "tiny.om", &g, NULL, &d), CP_OK, "%s", d.msg);
    assert_graph_eq(f.g, g);
    /* The dead node's output is still a tensor, but nothing produces it. */
    cr_assert_eq(cp_graph_tensor(g, f.dead_out)->producer, -1);
    cr_assert_eq(cp_graph_node(g, f.fused)->op, CP_OP_RELU);
    cr_assert_str_eq(cp_graph_tensor(g, f.x)->shape.dims[0].sym, "batch");
    cr_assert_null(cp_graph_tensor(g, f.out)->shape.dims[0].sym);
    cr_assert_eq(cp_graph_tensor(g, f.z)->shape.rank, -1);
    cp_graph_free(g);
    cp_graph_free(f.g);
    free(buf);
}

Test(om_container, round_trip_preserves_metadata)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    struct cp_om_meta in, out;
    meta_init(&in);
    struct cp_graph *g;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read_buffer(buf, len, "tiny.om", &g, &out, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(out.format_version, CP_OM_FORMAT_VERSION);
    cr_assert_str_eq(out.tool_version, CP_VERSION_STRING, "the writing tool's version");
    cr_assert_str_eq(out.source_path, in.source_path);
    cr_assert_str_eq(out.source_hash, in.source_hash);
    cr_assert_str_eq(out.target, in.target);
    /* Everything but --output, which the .om does not record: the same
     * model and config give the same bytes wherever they are written (a
     * reader that knows the file's place says it, cp_om_meta_locate). */
    struct cp_convert_config want = in.config;
    want.output[0] = '\0';
    char *a = config_json(&want), *b = config_json(&out.config);
    cr_assert_str_eq(a, b);
    cr_assert_str_eq(out.config.output, "");
    cr_assert_eq(out.config.precision_mode, CP_PREC_ALLOW_MIX_PRECISION_BF16);
    cr_assert_eq(out.config.n_dynamic_batch, 3);
    cr_assert_not_null(out.meta_json);
    uint64_t mo, ml;
    find_section(buf, 1, &mo, &ml);
    cr_assert_eq(strlen(out.meta_json), ml);
    cr_assert(memcmp(out.meta_json, buf + mo, ml) == 0);
    cr_assert(strncmp(out.meta_json, "{\"format_version\":1,\"tool_version\":", 35) == 0,
              "fixed key order: %s", out.meta_json);
    cr_assert_null(strstr(out.meta_json, "\"output\""), "%s", out.meta_json);
    cr_assert_null(strstr(out.meta_json, "out/tiny"), "%s", out.meta_json);
    free(a);
    free(b);
    cp_om_meta_release(&out);
    cr_assert_null(out.target);
    cp_graph_free(g);
    cp_graph_free(f.g);
    free(buf);
}

Test(om_container, empty_graph_round_trips)
{
    struct cp_graph *g = cp_graph_create(), *back;
    struct cp_om_meta m;
    meta_init(&m);
    m.source_path = NULL;
    m.source_hash = NULL;
    m.target = NULL;
    uint8_t *buf;
    size_t len;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(g, &m, &buf, &len, &d), CP_OK, "%s", d.msg);
    struct cp_om_meta out;
    cr_assert_eq(cp_om_read_buffer(buf, len, "e.om", &back, &out, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_n_tensors(back), 0);
    cr_assert_eq(cp_graph_n_nodes(back), 0);
    cr_assert_str_eq(out.source_path, "");
    cr_assert_str_eq(out.source_hash, "");
    cr_assert_str_eq(out.target, "");
    uint64_t wo, wl;
    find_section(buf, 3, &wo, &wl);
    cr_assert_eq(wl, 0);
    cp_om_meta_release(&out);
    cp_graph_free(back);
    cp_graph_free(g);
    free(buf);
}

/* An If whose branch reads an outer tensor and holds a constant: the
 * subgraph, its inline constant and its outer list come back. */
Test(om_container, subgraphs_round_trip)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_graph *g = cp_graph_create(), *br = cp_graph_create(), *back;
    int64_t two = 2;
    struct cp_shape s1, s0;
    cp_shape_set(&s1, 1, &two);
    cp_shape_set(&s0, 0, NULL);
    int32_t c, x, y, bx, bw, by, node, bn;
    cr_assert_eq(cp_graph_add_tensor(g, "c", CP_DTYPE_BOOL, &s0, CP_TENSOR_INPUT, &c, &d), CP_OK);
    cr_assert_eq(cp_graph_add_tensor(g, "x", CP_DTYPE_F32, &s1, CP_TENSOR_INPUT, &x, &d), CP_OK);
    cr_assert_eq(cp_graph_add_tensor(g, "y", CP_DTYPE_F32, &s1, CP_TENSOR_INTERMEDIATE, &y, &d),
                 CP_OK);
    cp_graph_add_input(g, c);
    cp_graph_add_input(g, x);
    cr_assert_eq(cp_graph_add_tensor(br, "x", CP_DTYPE_F32, &s1, CP_TENSOR_INPUT, &bx, &d), CP_OK);
    cr_assert_eq(cp_graph_add_outer(br, bx), CP_OK);
    cr_assert_eq(cp_graph_add_tensor(br, "w", CP_DTYPE_F32, &s1, CP_TENSOR_INITIALIZER, &bw, &d),
                 CP_OK);
    float *w = malloc(2 * sizeof *w);
    w[0] = 1.5f;
    w[1] = -2.0f;
    cr_assert_eq(cp_graph_set_data(br, bw, w, 2 * sizeof *w, CP_DATA_HEAP, &d), CP_OK);
    cr_assert_eq(cp_graph_add_tensor(br, "t", CP_DTYPE_F32, &s1, CP_TENSOR_INTERMEDIATE, &by, &d),
                 CP_OK);
    int32_t ins[2] = {bx, bw};
    const char *org = "then_add";
    cr_assert_eq(cp_graph_add_node(br, "then_add", "Add", "", ins, 2, &by, 1, &org, 1, &bn, &d),
                 CP_OK);
    cp_graph_add_output(br, by);
    int32_t nin[2] = {c, x};
    const char *org2 = "if";
    cr_assert_eq(cp_graph_add_node(g, "if", "If", "", nin, 2, &y, 1, &org2, 1, &node, &d), CP_OK);
    cr_assert_eq(cp_node_set_graph(g, node, "then_branch", br), CP_OK);
    cp_graph_add_output(g, y);
    struct cp_om_meta m;
    meta_init(&m);
    uint8_t *buf;
    size_t len;
    cr_assert_eq(cp_om_write_buffer(g, &m, &buf, &len, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_om_read_buffer(buf, len, "if.om", &back, NULL, &d), CP_OK, "%s", d.msg);
    assert_graph_eq(g, back);
    const struct cp_attr *a = cp_node_attr(cp_graph_node(back, 0), "then_branch");
    cr_assert_not_null(a);
    const float *bw_back = cp_graph_tensor(a->graph, bw)->data;
    cr_assert(bw_back && bw_back[0] == 1.5f && bw_back[1] == -2.0f);
    cr_assert_eq(cp_control_outer_slot(back, cp_graph_node(back, 0), a->graph, 0), 1);
    cp_graph_free(back);
    cp_graph_free(g);
    free(buf);
}

Test(om_container, dead_nodes_are_not_written)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    for (size_t i = 0; i + 5 <= len; i++)
        cr_assert(memcmp(buf + i, "dead0", 5) != 0, "the dead node's name is not in the file");
    struct cp_graph *g;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read_buffer(buf, len, "tiny.om", &g, NULL, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_n_nodes(g), 3);
    for (int32_t i = 0; i < 3; i++)
        cr_assert_str_neq(cp_graph_node(g, i)->name, "dead0");
    cp_graph_free(g);
    cp_graph_free(f.g);
    free(buf);
}

Test(om_container, weights_are_64_byte_aligned_and_point_into_the_file)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    struct cp_graph *g;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read_buffer(buf, len, "tiny.om", &g, NULL, &d), CP_OK, "%s", d.msg);
    uint64_t wo, wl;
    find_section(buf, 3, &wo, &wl);
    cr_assert_eq(wo % 64, 0);
    int with_data = 0;
    for (int32_t i = 0; i < (int32_t)cp_graph_n_tensors(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, i);
        if (!t->data)
            continue;
        with_data++;
        const uint8_t *p = t->data;
        cr_assert(p >= buf + wo && p + t->nbytes <= buf + wo + wl, "%s inside weights", t->name);
        cr_assert_eq((size_t)(p - buf) % 64, 0, "%s at file offset %zu", t->name,
                     (size_t)(p - buf));
        cr_assert_eq(t->owner, CP_DATA_MMAP);
    }
    cr_assert_eq(with_data, 7, "every initializer with data, the attribute tensor included");
    /* Padding between blobs is zero. */
    const struct cp_tensor *b3 = cp_graph_tensor(g, f.bytes3);
    const uint8_t *after = (const uint8_t *)b3->data + 3;
    for (size_t k = 0; k < 61; k++)
        cr_assert_eq(after[k], 0, "padding byte %zu", k);
    cp_graph_free(g);
    cp_graph_free(f.g);
    free(buf);
}

/* ---- determinism -------------------------------------------------------- */

Test(om_container, writing_twice_gives_identical_bytes)
{
    struct fixture f1, f2;
    size_t l1, l2;
    uint8_t *b1 = write_fixture(&f1, &l1);
    uint8_t *b2 = write_fixture(&f2, &l2); /* a second graph, other addresses */
    cr_assert_eq(l1, l2);
    cr_assert(memcmp(b1, b2, l1) == 0);
    struct cp_om_meta m;
    meta_init(&m);
    uint8_t *b3;
    size_t l3;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(f1.g, &m, &b3, &l3, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(l1, l3);
    cr_assert(memcmp(b1, b3, l1) == 0);
    cp_graph_free(f1.g);
    cp_graph_free(f2.g);
    free(b1);
    free(b2);
    free(b3);
}

Test(om_container, read_then_write_gives_identical_bytes)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    struct cp_graph *g;
    struct cp_om_meta m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read_buffer(buf, len, "tiny.om", &g, &m, &d), CP_OK, "%s", d.msg);
    uint8_t *again;
    size_t len2;
    cr_assert_eq(cp_om_write_buffer(g, &m, &again, &len2, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(len, len2);
    cr_assert(memcmp(buf, again, len) == 0);
    cp_om_meta_release(&m);
    cp_graph_free(g);
    cp_graph_free(f.g);
    free(buf);
    free(again);
}

/* ---- header layout ------------------------------------------------------- */

Test(om_container, header_follows_the_documented_layout)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    cr_assert(memcmp(buf, "CPOM", 4) == 0);
    cr_assert_eq(rd32(buf + 4), 1);
    cr_assert_eq(rd64(buf + 8), cp_hash64(buf + 16, len - 16));
    cr_assert_eq(rd32(buf + 16), 128);
    cr_assert_eq(rd32(buf + 20), 0);
    cr_assert_eq(rd64(buf + 24), len);
    cr_assert_eq(rd32(buf + 32), 3);
    cr_assert_eq(rd32(buf + 36), 0);
    uint64_t prev_end = 128;
    for (uint32_t i = 0; i < 3; i++) {
        const uint8_t *e = buf + 40 + 24 * i;
        cr_assert_eq(rd32(e), i + 1, "META, GRAPH, WEIGHTS in that order");
        cr_assert_eq(rd32(e + 4), 0);
        cr_assert_eq(rd64(e + 8) % 64, 0);
        cr_assert_geq(rd64(e + 8), prev_end);
        cr_assert_lt(rd64(e + 8) - prev_end, 64, "no more padding than alignment needs");
        for (uint64_t k = prev_end; k < rd64(e + 8); k++)
            cr_assert_eq(buf[k], 0, "gap byte %llu", (unsigned long long)k);
        prev_end = rd64(e + 8) + rd64(e + 16);
    }
    cr_assert_eq(prev_end, len, "the weights section ends the file");
    for (size_t k = 112; k < 128; k++)
        cr_assert_eq(buf[k], 0);
    cp_graph_free(f.g);
    free(buf);
}

Test(om_container, skips_unknown_section_kinds)
{
    /* A newer compatible writer: a bigger header and a fourth section. */
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint64_t mo, ml, go, gl, wo, wl;
    find_section(buf, 1, &mo, &ml);
    find_section(buf, 2, &go, &gl);
    find_section(buf, 3, &wo, &wl);
    uint8_t extra[100];
    memset(extra, 0xAB, sizeof extra);
    size_t n;
    uint8_t *file =
        assemble_ex(192, buf + mo, ml, buf + go, gl, buf + wo, wl, extra, sizeof extra, &n);
    struct cp_graph *g;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read_buffer(file, n, "x.om", &g, NULL, &d), CP_OK, "%s", d.msg);
    assert_graph_eq(f.g, g);
    cp_graph_free(g);
    cp_graph_free(f.g);
    free(file);
    free(buf);
}

/* ---- files on disk ------------------------------------------------------- */

static size_t count_entries(const char *dir)
{
    DIR *dp = opendir(dir);
    cr_assert_not_null(dp);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(dp);
    return n;
}

Test(om_container, atomic_write_leaves_complete_file_and_no_temporary)
{
    char *dir = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/tiny.om", dir);
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    struct cp_om_meta m;
    meta_init(&m);
    struct cp_diag d;
    cp_diag_init(&d);
    /* Twice: the second replaces the first. */
    cr_assert_eq(cp_om_write(path, f.g, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_om_write(path, f.g, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(count_entries(dir), 1, "only the target, no temporary file");
    uint8_t *disk;
    size_t disk_len;
    cr_assert_eq(cp_file_read(path, &disk, &disk_len, &d), CP_OK);
    cr_assert_eq(disk_len, len);
    cr_assert(memcmp(disk, buf, len) == 0);

    /* Reading from disk maps the file; the graph keeps the mapping. */
    struct cp_graph *g;
    struct cp_om_meta out;
    cr_assert_eq(cp_om_read(path, &g, &out, &d), CP_OK, "%s", d.msg);
    unlink(path); /* the mapping outlives the name */
    assert_graph_eq(f.g, g);
    for (int32_t i = 0; i < (int32_t)cp_graph_n_tensors(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, i);
        cr_assert(!t->data || (uintptr_t)t->data % 64 == 0, "%s aligned in memory", t->name);
    }
    cr_assert_str_eq(out.target, m.target);
    /* The file does not say where it was written, but the reader knows
     * where it read it. */
    char where[512];
    snprintf(where, sizeof where, "%s/tiny", dir);
    cr_assert_str_eq(out.config.output, where);
    cp_om_meta_release(&out);
    cp_graph_free(g);

    /* Written elsewhere with the same metadata: the same bytes. */
    char other[512];
    snprintf(other, sizeof other, "%s/other.om", dir);
    snprintf(m.config.output, sizeof m.config.output, "%s/other", dir);
    cr_assert_eq(cp_om_write(other, f.g, &m, &d), CP_OK, "%s", d.msg);
    uint8_t *disk2;
    size_t disk2_len;
    cr_assert_eq(cp_file_read(other, &disk2, &disk2_len, &d), CP_OK);
    cr_assert(disk2_len == len && memcmp(disk2, buf, len) == 0, "the output path changed bytes");
    free(disk2);
    unlink(other);

    /* A folder that does not exist: an error naming the file, nothing made. */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/missing/tiny.om", dir);
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write(bad, f.g, &m, &d), CP_ERR_WRITE);
    cr_assert_not_null(strstr(d.msg, bad), "%s", d.msg);
    cr_assert_eq(count_entries(dir), 0);

    free(disk);
    free(buf);
    cp_graph_free(f.g);
    rmdir(dir);
    free(dir);
}

Test(om_container, read_names_the_file_when_it_is_missing_or_empty)
{
    char *dir = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/empty.om", dir);
    struct cp_graph *g = (struct cp_graph *)1;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read(path, &g, NULL, &d), CP_ERR_IO);
    cr_assert_null(g);
    cr_assert_not_null(strstr(d.msg, path), "%s", d.msg);
    FILE *fp = fopen(path, "wb");
    fclose(fp);
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read(path, &g, NULL, &d), CP_ERR_CORRUPT);
    cr_assert_not_null(strstr(d.msg, "truncated"), "%s", d.msg);
    unlink(path);
    rmdir(dir);
    free(dir);
}
