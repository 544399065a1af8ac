/* The CPU .om container: round trips, determinism, alignment, and refusal of
 * every kind of damaged or foreign file. */
#include "om/om.h"
#include "proto/cpom.pb-c.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a small graph using every feature -------------------------------- */

struct fixture {
    struct cp_graph *g;
    int32_t x, w, b, shp, fill, empty, y, z, out, dead_out, bytes3, mask;
    int32_t conv, fused, reshape, dead;
};

static int32_t add_tensor(struct cp_graph *g, const char *name, enum cp_dtype dt,
                          const struct cp_shape *s, enum cp_tensor_kind kind)
{
    int32_t idx;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_tensor(g, name, dt, s, kind, &idx, &d), CP_OK, "%s", d.msg);
    return idx;
}

static void set_data(struct cp_graph *g, int32_t t, const void *src, size_t n)
{
    void *p = cp_graph_alloc(g, n ? n : 1);
    cr_assert_not_null(p);
    memcpy(p, src, n);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_set_data(g, t, p, n, CP_DATA_ARENA, &d), CP_OK, "%s", d.msg);
}

static int32_t add_node(struct cp_graph *g, const char *name, const char *op_type,
                        const char *domain, const int32_t *in, size_t n_in, const int32_t *out,
                        size_t n_out, const char *const *origins, size_t n_origins)
{
    int32_t idx;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, name, op_type, domain, in, n_in, out, n_out, origins,
                                   n_origins, &idx, &d),
                 CP_OK, "%s", d.msg);
    return idx;
}

static void build(struct fixture *f)
{
    memset(f, 0, sizeof *f);
    struct cp_graph *g = f->g = cp_graph_create();
    cr_assert_not_null(g);
    cp_graph_set_name(g, "tiny");
    cp_graph_set_opset(g, 14);

    struct cp_shape s;
    s.rank = 4;
    s.dims[0] = (struct cp_dim){-1, "batch"};
    s.dims[1] = (struct cp_dim){3, NULL};
    s.dims[2] = (struct cp_dim){4, NULL};
    s.dims[3] = (struct cp_dim){4, NULL};
    f->x = add_tensor(g, "x", CP_DTYPE_F32, &s, CP_TENSOR_INPUT);
    cp_graph_tensor(g, f->x)->layout = CP_LAYOUT_NCHW;

    int64_t wd[] = {8, 3, 1, 1};
    cp_shape_set(&s, 4, wd);
    f->w = add_tensor(g, "conv.weight", CP_DTYPE_F32, &s, CP_TENSOR_INITIALIZER);
    float wv[24];
    for (int i = 0; i < 24; i++)
        wv[i] = (float)i * 0.5f - 3.0f;
    set_data(g, f->w, wv, sizeof wv);
    cp_graph_tensor(g, f->w)->layout = CP_LAYOUT_NCHW8C;

    int64_t bd[] = {8};
    cp_shape_set(&s, 1, bd);
    f->b = add_tensor(g, "conv.bias", CP_DTYPE_F32, &s, CP_TENSOR_INITIALIZER);
    float bv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    set_data(g, f->b, bv, sizeof bv);

    int64_t sd[] = {2};
    cp_shape_set(&s, 1, sd);
    f->shp = add_tensor(g, "shape", CP_DTYPE_I64, &s, CP_TENSOR_INITIALIZER);
    int64_t sv[] = {-1, 128};
    set_data(g, f->shp, sv, sizeof sv);

    int64_t one[] = {1};
    cp_shape_set(&s, 1, one);
    f->fill = add_tensor(g, "fill_value", CP_DTYPE_F32, &s, CP_TENSOR_INITIALIZER);
    float fv = 0.5f;
    set_data(g, f->fill, &fv, sizeof fv);

    int64_t zero[] = {0};
    cp_shape_set(&s, 1, zero);
    f->empty = add_tensor(g, "empty", CP_DTYPE_F32, &s, CP_TENSOR_INITIALIZER);
    set_data(g, f->empty, "", 0);

    int64_t three[] = {3};
    cp_shape_set(&s, 1, three);
    f->bytes3 = add_tensor(g, "bytes3", CP_DTYPE_U8, &s, CP_TENSOR_INITIALIZER);
    set_data(g, f->bytes3, "\x01\x02\x03", 3);

    int64_t five[] = {5};
    cp_shape_set(&s, 1, five);
    f->mask = add_tensor(g, "mask", CP_DTYPE_BOOL, &s, CP_TENSOR_INITIALIZER);
    set_data(g, f->mask, "\x01\x00\x01\x01\x00", 5);

    s.rank = 4;
    s.dims[0] = (struct cp_dim){-1, "batch"};
    s.dims[1] = (struct cp_dim){8, NULL};
    s.dims[2] = (struct cp_dim){4, NULL};
    s.dims[3] = (struct cp_dim){4, NULL};
    f->y = add_tensor(g, "y", CP_DTYPE_F32, &s, CP_TENSOR_INTERMEDIATE);
    f->z = add_tensor(g, "z", CP_DTYPE_F32, NULL, CP_TENSOR_INTERMEDIATE);
    s.rank = 2;
    s.dims[0] = (struct cp_dim){-1, NULL};
    s.dims[1] = (struct cp_dim){128, NULL};
    f->out = add_tensor(g, "out", CP_DTYPE_F32, &s, CP_TENSOR_INTERMEDIATE);
    cp_graph_tensor(g, f->out)->layout = CP_LAYOUT_ND;
    f->dead_out = add_tensor(g, "dead_out", CP_DTYPE_F32, &s, CP_TENSOR_INTERMEDIATE);

    const char *o0[] = {"Conv_0"};
    int32_t in0[] = {f->x, f->w, f->b}, out0[] = {f->y};
    f->conv = add_node(g, "conv0", "Conv", "", in0, 3, out0, 1, o0, 1);
    int64_t strides[] = {1, 1};
    float scales[] = {1.5f, -0.25f};
    const char *names[] = {"a", "b c"};
    cr_assert_eq(cp_node_set_ints(g, f->conv, "strides", strides, 2), CP_OK);
    cr_assert_eq(cp_node_set_int(g, f->conv, "group", 1), CP_OK);
    cr_assert_eq(cp_node_set_string(g, f->conv, "auto_pad", "NOTSET"), CP_OK);
    cr_assert_eq(cp_node_set_floats(g, f->conv, "scales", scales, 2), CP_OK);
    cr_assert_eq(cp_node_set_strings(g, f->conv, "names", names, 2), CP_OK);
    cr_assert_eq(cp_node_set_float(g, f->conv, "alpha", 0.125f), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, f->conv, "empty_ints", NULL, 0), CP_OK);

    const char *o1[] = {"Relu_1", "Mul_2"};
    int32_t in1[] = {f->y, -1}, out1[] = {f->z, -1};
    f->fused =
        add_node(g, "fused_relu_mul", "FusedReluMul", "com.cannprof", in1, 2, out1, 2, o1, 2);
    cp_graph_node(g, f->fused)->op = CP_OP_RELU;
    cr_assert_eq(cp_node_set_tensor(g, f->fused, "value", f->fill), CP_OK);

    const char *o2[] = {"Reshape_3"};
    int32_t in2[] = {f->z, f->shp, f->empty}, out2[] = {f->out};
    f->reshape = add_node(g, "reshape0", "Reshape", "ai.onnx", in2, 3, out2, 1, o2, 1);
    cr_assert_eq(cp_node_set_int(g, f->reshape, "allowzero", -7), CP_OK);

    int32_t in3[] = {f->out}, out3[] = {f->dead_out};
    f->dead = add_node(g, "dead0", "Identity", "", in3, 1, out3, 1, NULL, 0);
    cp_graph_node(g, f->dead)->dead = true;

    cr_assert_eq(cp_graph_add_input(g, f->x), CP_OK);
    cr_assert_eq(cp_graph_add_output(g, f->out), CP_OK);
}

static void meta_init(struct cp_om_meta *m)
{
    memset(m, 0, sizeof *m);
    m->format_version = CP_OM_FORMAT_VERSION;
    m->tool_version = (char *)"ignored";
    m->source_path = (char *)"/models/tiny \"model\".onnx";
    m->source_hash = (char *)"0123456789abcdef0123456789abcdef";
    m->target = (char *)"cpu x86_64 avx2 fma";
    cp_convert_config_init(&m->config);
    snprintf(m->config.model, sizeof m->config.model, "/models/tiny.onnx");
    snprintf(m->config.output, sizeof m->config.output, "out/tiny");
    m->config.precision_mode = CP_PREC_ALLOW_MIX_PRECISION_BF16;
    m->config.buffer_optimize = CP_BUF_OFF_OPTIMIZE;
    m->config.n_dynamic_batch = 3;
    m->config.dynamic_batch[0] = 1;
    m->config.dynamic_batch[1] = 2;
    m->config.dynamic_batch[2] = 8;
}

static uint8_t *write_fixture(struct fixture *f, size_t *len)
{
    build(f);
    struct cp_om_meta m;
    meta_init(&m);
    uint8_t *data;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(f->g, &m, &data, len, &d), CP_OK, "%s", d.msg);
    return data;
}

/* ---- comparisons -------------------------------------------------------- */

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

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
        cr_assert_eq(b->owner, CP_DATA_MMAP, "tensor %s owner", a->name);
        cr_assert(a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0, "%s bytes", a->name);
    }
}

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
}

static char *config_json(const struct cp_convert_config *c)
{
    struct cp_buf b;
    cp_buf_init(&b);
    cp_convert_config_json(c, &b);
    return cp_buf_steal(&b);
}

/* ---- raw file helpers (independent of the writer, per docs/om-format.md) */

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void fix_checksum(uint8_t *buf, size_t len)
{
    wr64(buf + 8, cp_hash64(buf + 16, len - 16));
}

/* The section of `kind` in a file. */
static void find_section(const uint8_t *buf, uint32_t kind, uint64_t *off, uint64_t *len)
{
    uint32_t n = rd32(buf + 32);
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = buf + 40 + 24 * i;
        if (rd32(e) == kind) {
            *off = rd64(e + 8);
            *len = rd64(e + 16);
            return;
        }
    }
    cr_assert_fail("no section %u", kind);
}

static size_t align64(size_t v)
{
    return (v + 63) & ~(size_t)63;
}

/* Assemble a version-1 file from its sections, straight from the documented
 * layout: a header of `hs` bytes, then META, GRAPH, WEIGHTS and, when
 * `extra` is given, a fourth section of kind 99. Caller frees. */
static uint8_t *assemble_ex(size_t hs, const void *meta, size_t ml, const void *graph, size_t gl,
                            const void *weights, size_t wl, const void *extra, size_t el,
                            size_t *len)
{
    size_t mo = hs, go = align64(mo + ml), wo = align64(go + gl), eo = align64(wo + wl);
    *len = extra ? eo + el : wo + wl;
    uint8_t *buf = calloc(*len, 1);
    cr_assert_not_null(buf);
    memcpy(buf, "CPOM", 4);
    wr32(buf + 4, 1);
    wr32(buf + 16, (uint32_t)hs);
    wr32(buf + 20, 0);
    wr64(buf + 24, *len);
    wr32(buf + 32, extra ? 4 : 3);
    const uint64_t sec[4][3] = {{1, mo, ml}, {2, go, gl}, {3, wo, wl}, {99, eo, el}};
    for (int i = 0; i < (extra ? 4 : 3); i++) {
        wr32(buf + 40 + 24 * i, (uint32_t)sec[i][0]);
        wr64(buf + 40 + 24 * i + 8, sec[i][1]);
        wr64(buf + 40 + 24 * i + 16, sec[i][2]);
    }
    if (ml)
        memcpy(buf + mo, meta, ml);
    if (gl)
        memcpy(buf + go, graph, gl);
    if (wl)
        memcpy(buf + wo, weights, wl);
    if (el)
        memcpy(buf + eo, extra, el);
    fix_checksum(buf, *len);
    return buf;
}

static uint8_t *assemble(const void *meta, size_t ml, const void *graph, size_t gl,
                         const void *weights, size_t wl, size_t *len)
{
    return assemble_ex(128, meta, ml, graph, gl, weights, wl, NULL, 0, len);
}

static enum cp_status read_buf(const uint8_t *buf, size_t len, struct cp_diag *d)
{
    struct cp_graph *g = (struct cp_graph *)1;
    struct cp_om_meta m;
    cp_diag_init(d);
    enum cp_status st = cp_om_read_buffer(buf, len, "x.om", &g, &m, d);
    if (st == CP_OK) {
        cp_graph_free(g);
        cp_om_meta_release(&m);
    } else {
        cr_assert_null(g, "a failed read leaves the graph NULL");
        cr_assert_null(m.meta_json, "a failed read leaves the metadata empty");
        cr_assert_eq(d->status, st);
        cr_assert(d->msg[0], "a failed read says why");
    }
    return st;
}

/* ---- round trips ----------------------------------------------------------- */

Test(om, round_trip_preserves_every_graph_detail)
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

Test(om, round_trip_preserves_metadata)
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
    char *a = config_json(&in.config), *b = config_json(&out.config);
    cr_assert_str_eq(a, b);
    cr_assert_eq(out.config.precision_mode, CP_PREC_ALLOW_MIX_PRECISION_BF16);
    cr_assert_eq(out.config.n_dynamic_batch, 3);
    cr_assert_not_null(out.meta_json);
    uint64_t mo, ml;
    find_section(buf, 1, &mo, &ml);
    cr_assert_eq(strlen(out.meta_json), ml);
    cr_assert(memcmp(out.meta_json, buf + mo, ml) == 0);
    cr_assert(strncmp(out.meta_json, "{\"format_version\":1,\"tool_version\":", 35) == 0,
              "fixed key order: %s", out.meta_json);
    free(a);
    free(b);
    cp_om_meta_release(&out);
    cr_assert_null(out.target);
    cp_graph_free(g);
    cp_graph_free(f.g);
    free(buf);
}

Test(om, empty_graph_round_trips)
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

Test(om, dead_nodes_are_not_written)
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

Test(om, weights_are_64_byte_aligned_and_point_into_the_file)
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

Test(om, writing_twice_gives_identical_bytes)
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

Test(om, read_then_write_gives_identical_bytes)
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

/* ---- header and checksum ------------------------------------------------- */

Test(om, header_follows_the_documented_layout)
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

Test(om, rejects_truncated_file)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees overreads */
        memcpy(copy, buf, n);
        struct cp_diag d;
        cr_assert_eq(read_buf(copy, n, &d), CP_ERR_CORRUPT, "length %zu: %s", n, d.msg);
        cr_assert_not_null(strstr(d.msg, "truncated"), "length %zu: %s", n, d.msg);
        cr_assert_not_null(strstr(d.msg, "x.om"), "%s", d.msg);
        free(copy);
    }
    char want[128];
    snprintf(want, sizeof want, "x.om: truncated: header says %zu bytes, file has 1000", len);
    struct cp_diag d;
    read_buf(buf, 1000, &d);
    cr_assert_str_eq(d.msg, want);
    cp_graph_free(f.g);
    free(buf);
}

Test(om, rejects_trailing_bytes)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint8_t *longer = calloc(len + 64, 1);
    memcpy(longer, buf, len);
    struct cp_diag d;
    cr_assert_eq(read_buf(longer, len + 64, &d), CP_ERR_CORRUPT, "%s", d.msg);
    cp_graph_free(f.g);
    free(buf);
    free(longer);
}

Test(om, rejects_every_single_byte_flip)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint8_t *copy = malloc(len);
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    for (size_t m = 0; m < sizeof masks; m++)
        for (size_t i = 0; i < len; i++) {
            memcpy(copy, buf, len);
            copy[i] ^= masks[m];
            struct cp_diag d;
            enum cp_status st = read_buf(copy, len, &d);
            cr_assert(st == CP_ERR_CORRUPT || st == CP_ERR_VERSION,
                      "byte %zu ^ 0x%02x: status %d (%s)", i, masks[m], st, d.msg);
            if (st == CP_ERR_VERSION)
                cr_assert(i >= 4 && i < 8, "only the version field gives a version error");
        }
    cp_graph_free(f.g);
    free(copy);
    free(buf);
}

Test(om, checksum_mismatch_names_file_and_both_values)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint64_t stored = rd64(buf + 8);
    buf[len - 1] ^= 0x10;
    uint64_t computed = cp_hash64(buf + 16, len - 16);
    char want[256];
    snprintf(want, sizeof want,
             "x.om: checksum mismatch (stored 0x%016llx, computed 0x%016llx): the file is "
             "corrupt",
             (unsigned long long)stored, (unsigned long long)computed);
    struct cp_diag d;
    cr_assert_eq(read_buf(buf, len, &d), CP_ERR_CORRUPT);
    cr_assert_str_eq(d.msg, want);
    cp_graph_free(f.g);
    free(buf);
}

Test(om, rejects_newer_format_version)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    wr32(buf + 4, 2);
    fix_checksum(buf, len);
    struct cp_diag d;
    cr_assert_eq(read_buf(buf, len, &d), CP_ERR_VERSION, "%s", d.msg);
    cr_assert_str_eq(d.msg, "x.om: format version 2 is newer than this cannprof supports (1); "
                            "upgrade cannprof");
    wr32(buf + 4, 0);
    cr_assert_eq(read_buf(buf, len, &d), CP_ERR_CORRUPT, "%s", d.msg);
    cp_graph_free(f.g);
    free(buf);
}

Test(om, unknown_required_flag_is_refused_and_compatible_flag_ignored)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    struct cp_diag d;
    wr32(buf + 20, 0x00010000);
    fix_checksum(buf, len);
    cr_assert_eq(read_buf(buf, len, &d), CP_ERR_VERSION, "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "0x00010000"), "%s", d.msg);
    wr32(buf + 20, 0x00000001);
    fix_checksum(buf, len);
    cr_assert_eq(read_buf(buf, len, &d), CP_OK, "%s", d.msg);
    cp_graph_free(f.g);
    free(buf);
}

Test(om, rejects_bad_section_table_even_with_valid_checksum)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint8_t *copy = malloc(len);
    struct {
        size_t at;
        int width;
        uint64_t value;
        const char *says;
    } cases[] = {
        {40 + 24 * 2 + 8, 8, UINT64_MAX - 63, "outside the file"}, /* weights offset */
        {40 + 24 * 2 + 16, 8, UINT64_MAX, "outside the file"},     /* weights length */
        {40 + 24 * 1 + 8, 8, 64, "overlaps the 128-byte header"},  /* graph offset */
        {40 + 24 * 1 + 8, 8, 129, "not a multiple of 64"},
        {40 + 24 * 1 + 8, 8, 128, "overlap"},         /* graph onto metadata */
        {40 + 24 * 2, 4, 1, "two metadata sections"}, /* weights kind -> META */
        {40 + 24 * 2, 4, 0, "malformed"},
        {40 + 24 * 0 + 4, 4, 7, "malformed"},
        {16, 4, 64, "header size"},
        {16, 4, 100, "header size"},
        {16, 4, 0xFFFFFFC0u, "header size"},
        {32, 4, 0, "sections"},
        {32, 4, 1000, "sections"},
        {32, 4, 2, "no weights section"},
        {36, 4, 1, "reserved"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(copy, buf, len);
        if (cases[i].width == 4)
            wr32(copy + cases[i].at, (uint32_t)cases[i].value);
        else
            wr64(copy + cases[i].at, cases[i].value);
        fix_checksum(copy, len);
        struct cp_diag d;
        cr_assert_eq(read_buf(copy, len, &d), CP_ERR_CORRUPT, "case %zu: %s", i, d.msg);
        cr_assert_not_null(strstr(d.msg, cases[i].says), "case %zu: %s", i, d.msg);
    }
    cp_graph_free(f.g);
    free(copy);
    free(buf);
}

Test(om, skips_unknown_section_kinds)
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

Test(om, rejects_non_om_file)
{
    static const uint8_t junk[] = "this is not a model at all, just some text";
    struct cp_diag d;
    cr_assert_eq(read_buf(junk, sizeof junk, &d), CP_ERR_CORRUPT);
    cr_assert_not_null(strstr(d.msg, "not a cannprof .om"), "%s", d.msg);
    cr_assert_eq(cp_om_sniff(junk, sizeof junk), CP_OM_KIND_UNKNOWN);
    cr_assert_eq(cp_om_sniff((const uint8_t *)"CPO", 3), CP_OM_KIND_UNKNOWN);
    cr_assert_eq(cp_om_sniff((const uint8_t *)"CPOM", 4), CP_OM_KIND_CPU);
}

/* ---- validation of section contents (checksum valid) --------------------- */

/* An unpack allocator that never frees piecemeal, so mutations may share or
 * drop pointers freely. */
struct arena {
    void *blocks[4096];
    size_t n;
};

static void *arena_alloc(void *ctx, size_t size)
{
    struct arena *a = ctx;
    cr_assert_lt(a->n, 4096);
    return a->blocks[a->n++] = calloc(1, size ? size : 1);
}

static void arena_free(void *ctx, void *p)
{
    (void)ctx;
    (void)p;
}

static void arena_release(struct arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->blocks[i]);
    a->n = 0;
}

typedef void (*mutator)(Cpom__Graph *g);

static void mut_none(Cpom__Graph *g)
{
    (void)g;
}
static void mut_dtype(Cpom__Graph *g)
{
    g->tensors[1]->dtype = CP_DTYPE_COUNT;
}
static void mut_layout(Cpom__Graph *g)
{
    g->tensors[1]->layout = 200;
}
static void mut_kind(Cpom__Graph *g)
{
    g->tensors[0]->kind = 3;
}
static void mut_rank_too_big(Cpom__Graph *g)
{
    g->tensors[0]->rank = CP_MAX_RANK + 1;
}
static void mut_rank_negative(Cpom__Graph *g)
{
    g->tensors[0]->rank = -2;
}
static void mut_rank_dims(Cpom__Graph *g)
{
    g->tensors[0]->rank = 3;
}
static void mut_no_rank(Cpom__Graph *g)
{
    g->tensors[0]->has_rank = false;
}
static void mut_no_name(Cpom__Graph *g)
{
    g->tensors[2]->name = NULL;
}
static void mut_dup_tensor(Cpom__Graph *g)
{
    g->tensors[2]->name = g->tensors[1]->name;
}
static void mut_dup_node(Cpom__Graph *g)
{
    g->nodes[1]->name = g->nodes[0]->name;
}
static void mut_op(Cpom__Graph *g)
{
    g->nodes[0]->op = CP_OP_COUNT;
}
static void mut_no_op_type(Cpom__Graph *g)
{
    g->nodes[0]->op_type = NULL;
}
static void mut_input_index(Cpom__Graph *g)
{
    g->nodes[0]->inputs[1] = (int32_t)g->n_tensors;
}
static void mut_input_negative(Cpom__Graph *g)
{
    g->nodes[0]->inputs[1] = -2;
}
static void mut_output_taken(Cpom__Graph *g)
{
    g->nodes[1]->outputs[0] = g->nodes[0]->outputs[0];
}
static void mut_output_is_initializer(Cpom__Graph *g)
{
    g->nodes[0]->outputs[0] = 1;
}
static void mut_graph_output(Cpom__Graph *g)
{
    g->outputs[0] = 1000;
}
static void mut_graph_input(Cpom__Graph *g)
{
    g->inputs[0] = -1;
}
static void mut_data_misaligned(Cpom__Graph *g)
{
    g->tensors[2]->data_offset += 4;
}
static void mut_data_outside(Cpom__Graph *g)
{
    g->tensors[2]->data_offset = 1u << 20;
}
static void mut_data_huge(Cpom__Graph *g)
{
    g->tensors[2]->data_offset = UINT64_MAX - 63;
}
static void mut_data_size(Cpom__Graph *g)
{
    g->tensors[2]->data_bytes += 4;
}
static void mut_data_no_size(Cpom__Graph *g)
{
    g->tensors[2]->has_data_bytes = false;
}
static void mut_data_dynamic(Cpom__Graph *g)
{
    g->tensors[2]->dims[0]->value = -1;
}
static void mut_attr_type(Cpom__Graph *g)
{
    g->nodes[0]->attrs[0]->type = 42;
}
static void mut_attr_tensor(Cpom__Graph *g)
{
    g->nodes[1]->attrs[0]->tensor = (int32_t)g->n_tensors;
}
static void mut_attr_missing_value(Cpom__Graph *g)
{
    g->nodes[0]->attrs[1]->has_i = false;
}
static void mut_attr_dup(Cpom__Graph *g)
{
    g->nodes[0]->attrs[1]->name = g->nodes[0]->attrs[0]->name;
}
static void mut_dim_no_value(Cpom__Graph *g)
{
    g->tensors[0]->dims[1]->has_value = false;
}

Test(om, rejects_invalid_graph_contents_even_with_valid_checksum)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint64_t mo, ml, go, gl, wo, wl;
    find_section(buf, 1, &mo, &ml);
    find_section(buf, 2, &go, &gl);
    find_section(buf, 3, &wo, &wl);
    struct {
        mutator fn;
        const char *says;
    } cases[] = {
        {mut_dtype, "dtype 9"},
        {mut_layout, "layout 200"},
        {mut_kind, "kind 3"},
        {mut_rank_too_big, "rank 9 is out of range"},
        {mut_rank_negative, "rank -2"},
        {mut_rank_dims, "rank 3 but 4 dimensions"},
        {mut_no_rank, "no rank"},
        {mut_no_name, "tensor 2 has no name"},
        {mut_dup_tensor, "two tensors are named 'conv.weight'"},
        {mut_dup_node, "two nodes are named 'conv0'"},
        {mut_op, "op 55 is out of range"},
        {mut_no_op_type, "no op type"},
        {mut_input_index, "out of range"},
        {mut_input_negative, "out of range"},
        {mut_output_taken, "already produced"},
        {mut_output_is_initializer, "already produced"},
        {mut_graph_output, "graph output 0"},
        {mut_graph_input, "graph input 0"},
        {mut_data_misaligned, "not a multiple of 64"},
        {mut_data_outside, "outside the weights section"},
        {mut_data_huge, "outside the weights section"},
        {mut_data_size, "shape and dtype need"},
        {mut_data_no_size, "data offset or size missing"},
        {mut_data_dynamic, "no static shape"},
        {mut_attr_type, "unknown type 42"},
        {mut_attr_tensor, "'value'"},
        {mut_attr_missing_value, "'group'"},
        {mut_attr_dup, "appears twice"},
        {mut_dim_no_value, "dimension 1 has no value"},
    };
    cr_assert_eq(CP_DTYPE_COUNT, 9, "update the expected messages");
    cr_assert_eq(CP_OP_COUNT, 55, "update the expected messages");
    for (size_t i = 0; i <= sizeof cases / sizeof cases[0]; i++) {
        bool baseline = i == sizeof cases / sizeof cases[0];
        struct arena *a = calloc(1, sizeof *a);
        ProtobufCAllocator alloc = {arena_alloc, arena_free, a};
        Cpom__Graph *gm = cpom__graph__unpack(&alloc, gl, buf + go);
        cr_assert_not_null(gm);
        (baseline ? mut_none : cases[i].fn)(gm);
        size_t n = cpom__graph__get_packed_size(gm);
        uint8_t *packed = malloc(n + 1);
        cpom__graph__pack(gm, packed);
        size_t flen;
        uint8_t *file = assemble(buf + mo, ml, packed, n, buf + wo, wl, &flen);
        struct cp_diag d;
        enum cp_status st = read_buf(file, flen, &d);
        if (baseline) {
            cr_assert_eq(st, CP_OK, "the spec-assembled file reads: %s", d.msg);
            cr_assert_eq(flen, len);
            cr_assert(memcmp(file, buf, len) == 0, "writer and spec agree byte for byte");
        } else {
            cr_assert_eq(st, CP_ERR_CORRUPT, "case %zu: %s", i, d.msg);
            cr_assert_not_null(strstr(d.msg, cases[i].says), "case %zu: %s", i, d.msg);
            cr_assert_not_null(strstr(d.msg, "x.om: graph section: "), "%s", d.msg);
        }
        free(file);
        free(packed);
        arena_release(a);
        free(a);
    }
    cp_graph_free(f.g);
    free(buf);
}

Test(om, rejects_malformed_protobuf)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint64_t mo, ml, go, gl, wo, wl;
    find_section(buf, 1, &mo, &ml);
    find_section(buf, 2, &go, &gl);
    find_section(buf, 3, &wo, &wl);
    static const uint8_t garbage[] = {0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00};
    size_t flen;
    uint8_t *file = assemble(buf + mo, ml, garbage, sizeof garbage, buf + wo, wl, &flen);
    struct cp_diag d;
    cr_assert_eq(read_buf(file, flen, &d), CP_ERR_CORRUPT);
    cr_assert_not_null(strstr(d.msg, "not a valid cpom.Graph"), "%s", d.msg);
    free(file);
    /* Every cut of the graph message, with a valid checksum. A cut at a
     * field boundary is a valid smaller graph (protobuf has no end marker;
     * the checksum is what catches real truncation), so only require that
     * nothing crashes and that no cut is misread silently as the whole. */
    size_t refused = 0;
    for (size_t n = 0; n < gl; n++) {
        file = assemble(buf + mo, ml, buf + go, n, buf + wo, wl, &flen);
        enum cp_status st = read_buf(file, flen, &d);
        cr_assert(st == CP_OK || st == CP_ERR_CORRUPT, "cut at %zu: %s", n, d.msg);
        refused += st != CP_OK;
        free(file);
    }
    cr_assert_gt(refused, gl / 2, "most cuts are refused (%zu of %llu)", refused,
                 (unsigned long long)gl);
    cp_graph_free(f.g);
    free(buf);
}

Test(om, rejects_bad_metadata_even_with_valid_checksum)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint64_t mo, ml, go, gl, wo, wl;
    find_section(buf, 1, &mo, &ml);
    find_section(buf, 2, &go, &gl);
    find_section(buf, 3, &wo, &wl);
    const char *cases[][2] = {
        {"", "not valid JSON"},
        {"{\"format_version\":1", "not valid JSON"},
        {"[1,2]", "not a JSON object"},
        {"{\"format_version\":2,\"tool_version\":\"0\",\"target\":\"\",\"source\":{\"path\":"
         "\"\",\"hash\":\"\"},\"config\":{}}",
         "format_version"},
        {"{\"format_version\":1,\"target\":\"\",\"source\":{\"path\":\"\",\"hash\":\"\"},"
         "\"config\":{}}",
         "tool_version"},
        {"{\"format_version\":1,\"tool_version\":\"0\",\"target\":\"\",\"source\":{\"path\":"
         "\"\",\"hash\":\"xyz\"},\"config\":{}}",
         "source hash"},
        {"{\"format_version\":1,\"tool_version\":\"0\",\"target\":\"\",\"source\":{\"path\":"
         "\"\",\"hash\":\"\"}}",
         "'config'"},
        {"{\"format_version\":1,\"tool_version\":\"0\",\"target\":\"\",\"source\":{\"path\":"
         "\"\",\"hash\":\"\"},\"config\":{\"precision_mode\":\"fastest\"}}",
         "precision_mode"},
        {"{\"format_version\":1,\"format_version\":1}", "not valid JSON"},
        {"{\"format_version\":1,\"tool_version\":\"0\",\"target\":\"\",\"source\":\"x\","
         "\"config\":{}}",
         "'source'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t flen;
        uint8_t *file =
            assemble(cases[i][0], strlen(cases[i][0]), buf + go, gl, buf + wo, wl, &flen);
        struct cp_diag d;
        cr_assert_eq(read_buf(file, flen, &d), CP_ERR_CORRUPT, "case %zu: %s", i, d.msg);
        cr_assert_not_null(strstr(d.msg, cases[i][1]), "case %zu: %s", i, d.msg);
        cr_assert_not_null(strstr(d.msg, "x.om: metadata"), "case %zu: %s", i, d.msg);
        free(file);
    }
    /* Unknown keys are for newer writers: ignored. */
    const char *extra = "{\"format_version\":1,\"tool_version\":\"9\",\"target\":\"t\","
                        "\"source\":{\"path\":\"p\",\"hash\":\"\",\"size\":3},\"config\":{},"
                        "\"future\":[1,2,3]}";
    size_t flen;
    uint8_t *file = assemble(extra, strlen(extra), buf + go, gl, buf + wo, wl, &flen);
    struct cp_diag d;
    cr_assert_eq(read_buf(file, flen, &d), CP_OK, "%s", d.msg);
    free(file);
    cp_graph_free(f.g);
    free(buf);
}

/* ---- what the writer refuses -------------------------------------------- */

Test(om, write_refuses_graph_it_could_not_read_back)
{
    struct fixture f;
    build(&f);
    struct cp_om_meta m;
    meta_init(&m);
    uint8_t *data = (uint8_t *)1;
    size_t len = 1;
    struct cp_diag d;
    cp_diag_init(&d);
    /* The graph API refuses a duplicate name, but a pass could still rename
     * a tensor into a clash; the writer must catch it. */
    int32_t extra = add_tensor(f.g, "y_extra", CP_DTYPE_F32, NULL, CP_TENSOR_INTERMEDIATE);
    cp_graph_tensor(f.g, extra)->name = "y";
    cr_assert_eq(cp_om_write_buffer(f.g, &m, &data, &len, &d), CP_ERR_INVALID);
    cr_assert_null(data);
    cr_assert_eq(len, 0);
    cr_assert_not_null(strstr(d.msg, "two tensors are named 'y'"), "%s", d.msg);
    cp_graph_free(f.g);

    build(&f);
    cp_graph_node(f.g, f.reshape)->name = "conv0";
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(f.g, &m, &data, &len, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "two nodes are named 'conv0'"), "%s", d.msg);
    /* A dead node may share a name: it is not written. */
    cp_graph_node(f.g, f.reshape)->name = "reshape0";
    cp_graph_node(f.g, f.dead)->name = "conv0";
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(f.g, &m, &data, &len, &d), CP_OK, "%s", d.msg);
    free(data);

    m.source_hash = (char *)"not-a-hash";
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(f.g, &m, &data, &len, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "source hash"), "%s", d.msg);
    m.source_hash = NULL;
    m.target = (char *)"cpu \xff\xfe";
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(f.g, &m, &data, &len, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "UTF-8"), "%s", d.msg);
    cp_graph_free(f.g);
}

/* ---- files on disk ------------------------------------------------------- */

static char *make_tmpdir(void)
{
    char tmpl[] = "/tmp/cp_test_om_XXXXXX";
    char *dir = mkdtemp(tmpl);
    cr_assert_not_null(dir);
    return strdup(dir);
}

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

Test(om, atomic_write_leaves_complete_file_and_no_temporary)
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
    cp_om_meta_release(&out);
    cp_graph_free(g);

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

Test(om, read_names_the_file_when_it_is_missing_or_empty)
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

/* ---- Ascend .om ----------------------------------------------------------- */

static void fake_ascend(uint8_t *h, size_t n)
{
    memset(h, 0, n);
    memcpy(h, "IMOD", 4);
    wr32(h + 4, 256);
    wr32(h + 8, 0x10000000);
    memset(h + 12, 0xCC, 64); /* checksum bytes */
    wr32(h + 76, 123456);
    h[80] = 0;
    h[81] = 1;
    h[82] = 1;
    h[83] = 2;
    memcpy(h + 84, "resnet50\x01\x7f", 10);
    wr32(h + 116, 77);
    memset(h + 120, 'U', 32); /* user define info */
    wr32(h + 152, 3);
    wr32(h + 156, 1);
    memcpy(h + 160, "3.1.0.alpha", 11);
    h[180] = 5;
    wr64(h + 184, 0x123456789ull);
}

Test(om, recognises_ascend_model_and_reads_its_header)
{
    uint8_t file[256 + 100];
    fake_ascend(file, sizeof file);
    cr_assert_eq(rd32(file), 0x444F4D49u);
    cr_assert_eq(cp_om_sniff(file, sizeof file), CP_OM_KIND_ASCEND);
    struct cp_ascend_om_header h;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read_ascend_header(file, sizeof file, &h, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(h.magic, 0x444F4D49u);
    cr_assert_eq(h.headsize, 256);
    cr_assert_eq(h.version, 0x10000000);
    cr_assert_eq(h.length, 123456);
    cr_assert_eq(h.is_encrypt, 0);
    cr_assert_eq(h.is_checksum, 1);
    cr_assert_eq(h.modeltype, 1);
    cr_assert_eq(h.genmode, 2);
    cr_assert_str_eq(h.name, "resnet50??", "non-printables replaced");
    cr_assert_eq(h.ops, 77);
    cr_assert_eq(h.om_ir_version, 3);
    cr_assert_eq(h.model_num, 1);
    cr_assert_str_eq(h.platform_version, "3.1.0.alpha");
    cr_assert_eq(h.platform_type, 5);
    cr_assert_eq(h.model_length, 0x123456789ull);
    cr_assert_eq(h.file_size, sizeof file);

    cr_assert_eq(read_buf(file, sizeof file, &d), CP_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(d.msg, "x.om is an Ascend offline model ("), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "resnet50"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "not a CPU .om; cannprof info shows its header"), "%s", d.msg);
}

Test(om, ascend_header_strings_are_bounded_and_terminated)
{
    uint8_t file[256];
    fake_ascend(file, sizeof file);
    memset(file + 84, 'N', 32);  /* name fills its field, no NUL */
    memset(file + 160, 'P', 20); /* so does the platform version */
    struct cp_ascend_om_header h;
    cr_assert_eq(cp_om_read_ascend_header(file, sizeof file, &h, NULL), CP_OK);
    cr_assert_eq(strlen(h.name), 32);
    cr_assert_eq(strlen(h.platform_version), 20);
    cr_assert_eq(h.ops, 77, "the next field is untouched by the name");
}

Test(om, ascend_header_refuses_short_or_foreign_input)
{
    uint8_t file[256];
    fake_ascend(file, sizeof file);
    struct cp_ascend_om_header h;
    struct cp_diag d;
    for (size_t n = 0; n < 256; n += 17) {
        cp_diag_init(&d);
        cr_assert_eq(cp_om_read_ascend_header(file, n, &h, &d), CP_ERR_CORRUPT);
        cr_assert_not_null(strstr(d.msg, "truncated"), "%s", d.msg);
    }
    /* A truncated Ascend file is still named as Ascend by the CPU reader. */
    cr_assert_eq(read_buf(file, 100, &d), CP_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(d.msg, "Ascend offline model (header truncated"), "%s", d.msg);
    file[0] = 'J';
    cp_diag_init(&d);
    cr_assert_eq(cp_om_read_ascend_header(file, sizeof file, &h, &d), CP_ERR_CORRUPT);
    cr_assert_not_null(strstr(d.msg, "magic"), "%s", d.msg);
    cr_assert_eq(cp_om_sniff(file, sizeof file), CP_OM_KIND_UNKNOWN);
}

Test(om, ascend_file_on_disk_is_named_in_the_refusal)
{
    char *dir = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/npu.om", dir);
    uint8_t file[300];
    fake_ascend(file, sizeof file);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_file_write_atomic(path, file, sizeof file, &d), CP_OK);
    struct cp_graph *g = (struct cp_graph *)1;
    struct cp_om_meta m;
    cr_assert_eq(cp_om_read(path, &g, &m, &d), CP_ERR_UNSUPPORTED);
    cr_assert_null(g);
    char want[600];
    snprintf(want, sizeof want, "%s is an Ascend offline model", path);
    cr_assert_not_null(strstr(d.msg, want), "%s", d.msg);
    unlink(path);
    rmdir(dir);
    free(dir);
}
