/* Helpers shared by the CPU .om tests (test_om_*.c): a small graph using
 * every feature and the metadata written with it, raw file helpers that
 * read, patch and assemble files straight from docs/om-format.md
 * (independent of the writer), a read from a buffer that checks what a
 * failed read leaves, and a scratch folder. All static inline, so a file
 * that uses only some of them builds without unused-function warnings. */
#ifndef CP_TEST_OM_TEST_H
#define CP_TEST_OM_TEST_H

#include "om/om.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a small graph using every feature -------------------------------- */

struct fixture {
    struct cp_graph *g;
    int32_t x, w, b, shp, fill, empty, y, z, out, dead_out, bytes3, mask;
    int32_t conv, fused, reshape, dead;
};

static inline int32_t add_tensor(struct cp_graph *g, const char *name, enum cp_dtype dt,
                                 const struct cp_shape *s, enum cp_tensor_kind kind)
{
    int32_t idx;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_tensor(g, name, dt, s, kind, &idx, &d), CP_OK, "%s", d.msg);
    return idx;
}

static inline void set_data(struct cp_graph *g, int32_t t, const void *src, size_t n)
{
    void *p = cp_graph_alloc(g, n ? n : 1);
    cr_assert_not_null(p);
    memcpy(p, src, n);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_set_data(g, t, p, n, CP_DATA_ARENA, &d), CP_OK, "%s", d.msg);
}

static inline int32_t add_node(struct cp_graph *g, const char *name, const char *op_type,
                               const char *domain, const int32_t *in, size_t n_in,
                               const int32_t *out, size_t n_out, const char *const *origins,
                               size_t n_origins)
{
    int32_t idx;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, name, op_type, domain, in, n_in, out, n_out, origins,
                                   n_origins, &idx, &d),
                 CP_OK, "%s", d.msg);
    return idx;
}

static inline void build(struct fixture *f)
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

static inline void meta_init(struct cp_om_meta *m)
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

static inline uint8_t *write_fixture(struct fixture *f, size_t *len)
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

/* ---- raw file helpers (independent of the writer, per docs/om-format.md) */

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static inline void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void fix_checksum(uint8_t *buf, size_t len)
{
    wr64(buf + 8, cp_hash64(buf + 16, len - 16));
}

/* The section of `kind` in a file. */
static inline void find_section(const uint8_t *buf, uint32_t kind, uint64_t *off, uint64_t *len)
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

static inline size_t align64(size_t v)
{
    return (v + 63) & ~(size_t)63;
}

/* Assemble a version-1 file from its sections, straight from the documented
 * layout: a header of `hs` bytes, then META, GRAPH, WEIGHTS and, when
 * `extra` is given, a fourth section of kind 99. Caller frees. */
static inline uint8_t *assemble_ex(size_t hs, const void *meta, size_t ml, const void *graph,
                                   size_t gl, const void *weights, size_t wl, const void *extra,
                                   size_t el, size_t *len)
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

static inline uint8_t *assemble(const void *meta, size_t ml, const void *graph, size_t gl,
                                const void *weights, size_t wl, size_t *len)
{
    return assemble_ex(128, meta, ml, graph, gl, weights, wl, NULL, 0, len);
}

static inline enum cp_status read_buf(const uint8_t *buf, size_t len, struct cp_diag *d)
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

/* ---- files on disk ------------------------------------------------------- */

static inline char *make_tmpdir(void)
{
    char tmpl[] = "/tmp/cp_test_om_XXXXXX";
    char *dir = mkdtemp(tmpl);
    cr_assert_not_null(dir);
    return strdup(dir);
}

#endif
