/* Initializers from TensorProtos (the rules are tensor_read.c's; here the
 * external data files and this importer's messages) and value types of
 * graph inputs, outputs and value_info. */
#include "onnx/onnx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* External files are little-endian; we copy them as they are. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ONNX tensor bytes are little-endian: a big-endian host needs byte swapping in tensor.c"
#endif

static const char *const onnx_type_names[] = {
    "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",   "INT16",
    "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",  "DOUBLE",
    "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4",
};

const char *cp_onnx_dtype_name(int onnx_type, char buf[24])
{
    if (onnx_type >= 0 && (size_t)onnx_type < sizeof onnx_type_names / sizeof *onnx_type_names)
        return onnx_type_names[onnx_type];
    snprintf(buf, 24, "type %d", onnx_type);
    return buf;
}

#define SUPPORTED_DTYPES "f32, f16, bf16, i8, u8, i32, i64, bool"

/* ---- external data -------------------------------------------------------- */

struct ext_ref {
    const char *location;
    int64_t offset;
    int64_t length; /* -1: not given */
};

static enum cp_status ext_parse(struct onnx_ctx *c, const Onnx__TensorProto *tp, const char *what,
                                struct ext_ref *r)
{
    r->location = NULL;
    r->offset = 0;
    r->length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key)
            continue;
        const char *v = e->value ? e->value : "";
        if (strcmp(e->key, "location") == 0) {
            r->location = v;
        } else if (strcmp(e->key, "offset") == 0 || strcmp(e->key, "length") == 0) {
            int64_t x;
            if (!cp_parse_i64(v, &x) || x < 0)
                return onnx_err(c, CP_ERR_INVALID,
                                "%s: external data %s '%s' is not a non-negative integer", what,
                                e->key, v);
            if (e->key[0] == 'o')
                r->offset = x;
            else
                r->length = x;
        }
        /* "checksum" and unknown keys are ignored. */
    }
    if (!r->location || !*r->location)
        return onnx_err(c, CP_ERR_INVALID, "%s keeps its data externally but names no location",
                        what);
    return CP_OK;
}

static bool has_dotdot_component(const char *p)
{
    while (*p) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

/* Resolve `loc` inside c->dir; OUT: *resolved (caller frees). */
static enum cp_status ext_resolve(struct onnx_ctx *c, const char *what, const char *loc,
                                  char **resolved)
{
    *resolved = NULL;
    if (loc[0] == '/')
        return onnx_err(c, CP_ERR_INVALID,
                        "%s: external data path '%s' is absolute; it must be relative to the "
                        "model's folder",
                        what, loc);
    if (has_dotdot_component(loc))
        return onnx_err(c, CP_ERR_INVALID,
                        "%s: external data path '%s' escapes the model's folder ('..' is not "
                        "allowed)",
                        what, loc);
    enum cp_status st = CP_OK;
    struct cp_buf joined;
    cp_buf_init(&joined);
    cp_buf_printf(&joined, "%s/%s", c->dir, loc);
    char *rdir = realpath(c->dir, NULL);
    char *rfile = NULL;
    if (cp_buf_status(&joined) != CP_OK) {
        st = onnx_err(c, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (!rdir) {
        st = onnx_err(c, CP_ERR_IO, "%s: cannot resolve the model's folder '%s': %s", what, c->dir,
                      strerror(errno));
        goto out;
    }
    rfile = realpath(joined.data, NULL);
    if (!rfile) {
        st = onnx_err(c, CP_ERR_IO, "%s: external data file '%s' cannot be opened: %s", what, loc,
                      strerror(errno));
        goto out;
    }
    /* A symlink inside the folder may still point outside it. */
    size_t n = strlen(rdir);
    bool inside = strcmp(rdir, "/") == 0 || (strncmp(rfile, rdir, n) == 0 && rfile[n] == '/');
    if (!inside) {
        st = onnx_err(c, CP_ERR_INVALID,
                      "%s: external data path '%s' resolves to '%s', outside the model's folder",
                      what, loc, rfile);
        goto out;
    }
    *resolved = rfile;
    rfile = NULL;
out:
    free(rfile);
    free(rdir);
    cp_buf_release(&joined);
    return st;
}

static enum cp_status ext_read(struct onnx_ctx *c, const Onnx__TensorProto *tp, const char *what,
                               size_t nbytes, void **out)
{
    *out = NULL;
    struct ext_ref r;
    enum cp_status st = ext_parse(c, tp, what, &r);
    if (st != CP_OK)
        return st;
    if (!c->dir)
        return onnx_err(c, CP_ERR_INVALID,
                        "%s keeps its data in external file '%s', but the model was read from "
                        "memory with no folder to resolve it in",
                        what, r.location);
    if (r.length >= 0 && (uint64_t)r.length != nbytes)
        return onnx_err(c, CP_ERR_INVALID,
                        "%s: external data length %lld does not match the %zu bytes its shape "
                        "and dtype need",
                        what, (long long)r.length, nbytes);
    char *path;
    st = ext_resolve(c, what, r.location, &path);
    if (st != CP_OK)
        return st;
    uint8_t *buf = NULL;
    /* O_NONBLOCK: a FIFO planted as the data file must not hang us. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        st = onnx_err(c, CP_ERR_IO, "%s: external data file '%s' cannot be opened: %s", what,
                      r.location, strerror(errno));
        goto out_free;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = onnx_err(c, CP_ERR_IO, "%s: external data '%s' is not a regular file", what,
                      r.location);
        goto out_close;
    }
    uint64_t size = (uint64_t)sb.st_size;
    if ((uint64_t)r.offset > size || size - (uint64_t)r.offset < nbytes) {
        st = onnx_err(c, CP_ERR_INVALID,
                      "%s: external data '%s' at offset %lld with length %zu runs past the end "
                      "of the file (%llu bytes)",
                      what, r.location, (long long)r.offset, nbytes, (unsigned long long)size);
        goto out_close;
    }
    if (nbytes == 0)
        goto out_close;
    buf = malloc(nbytes);
    if (!buf) {
        st = onnx_err(c, CP_ERR_NOMEM, "%s: out of memory reading %zu bytes", what, nbytes);
        goto out_close;
    }
    size_t got = 0;
    while (got < nbytes) {
        ssize_t k = pread(fd, buf + got, nbytes - got, (off_t)((uint64_t)r.offset + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            st = onnx_err(c, CP_ERR_IO, "%s: reading external data '%s' failed: %s", what,
                          r.location, k < 0 ? strerror(errno) : "file shrank while reading");
            free(buf);
            buf = NULL;
            goto out_close;
        }
        got += (size_t)k;
    }
    *out = buf;
out_close:
    close(fd);
out_free:
    free(path);
    return st;
}

/* ---- decoding ------------------------------------------------------------------------ */

/* A fault of tensor_read.c in this importer's words. */
static enum cp_status fault_message(struct onnx_ctx *c, const char *what,
                                    const struct onnx_tensor_head *h,
                                    const struct cp_onnx_tensor_error *e)
{
    char buf[24], sh[96];
    const char *dt = cp_dtype_name(h->dtype);
    cp_shape_format(&h->shape, sh, sizeof sh);
    switch (e->fault) {
    case CP_ONNX_TENSOR_NO_DTYPE:
        return onnx_err(c, CP_ERR_INVALID, "%s has no data type", what);
    case CP_ONNX_TENSOR_DTYPE:
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "%s has dtype %s, which cannot be imported (supported: " SUPPORTED_DTYPES
                        ")",
                        what, cp_onnx_dtype_name(e->onnx_type, buf));
    case CP_ONNX_TENSOR_SEGMENT:
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "%s is a segment of a larger tensor, which is not "
                        "supported",
                        what);
    case CP_ONNX_TENSOR_RANK:
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "%s has rank %zu; at most %d dimensions are supported", what,
                        (size_t)e->have, CP_MAX_RANK);
    case CP_ONNX_TENSOR_NEGATIVE_DIM:
        return onnx_err(c, CP_ERR_INVALID, "%s has a negative dimension (%lld at axis %zu)", what,
                        (long long)e->have, (size_t)e->axis);
    case CP_ONNX_TENSOR_TOO_LARGE:
        return onnx_err(c, CP_ERR_INVALID, "%s is too large to address", what);
    case CP_ONNX_TENSOR_OTHER_FIELD:
        return onnx_err(c, CP_ERR_INVALID,
                        "%s (%s) stores its values in %s; %s values belong in %s or raw_data", what,
                        dt, e->field, dt, e->home);
    case CP_ONNX_TENSOR_BOTH:
        return onnx_err(c, CP_ERR_INVALID, "%s has both raw_data and %s", what, e->home);
    case CP_ONNX_TENSOR_RAW_SIZE:
        return onnx_err(c, CP_ERR_INVALID,
                        "%s: raw_data has %zu bytes, but shape %s of %s needs %zu", what,
                        (size_t)e->have, sh, dt, (size_t)e->want);
    case CP_ONNX_TENSOR_COUNT:
        if (e->have == 0 && e->external_entries)
            return onnx_err(c, CP_ERR_INVALID,
                            "%s has external_data entries, but its data_location is not EXTERNAL",
                            what);
        if (e->have == 0)
            return onnx_err(c, CP_ERR_INVALID, "%s has no data: shape %s needs %zu %s values", what,
                            sh, (size_t)e->want, dt);
        return onnx_err(c, CP_ERR_INVALID, "%s: %s has %zu values, but shape %s needs %zu", what,
                        e->home, (size_t)e->have, sh, (size_t)e->want);
    case CP_ONNX_TENSOR_NOMEM:
        return onnx_err(c, CP_ERR_NOMEM, "%s: out of memory", what);
    default: /* OK, UNREADABLE and EXTERNAL do not occur on this path */
        return onnx_err(c, CP_ERR_INTERNAL, "%s: unexpected tensor fault %d", what, (int)e->fault);
    }
}

enum cp_status onnx_tensor_decode(struct onnx_ctx *c, const Onnx__TensorProto *tp, const char *what,
                                  enum cp_dtype *dtype, struct cp_shape *shape, void **data,
                                  size_t *nbytes)
{
    *dtype = CP_DTYPE_UNDEFINED;
    cp_shape_set_unknown(shape);
    *data = NULL;
    *nbytes = 0;
    struct onnx_tensor_head h;
    struct cp_onnx_tensor_error e;
    if (onnx_tensor_head(tp, true, &h, &e) != CP_ONNX_TENSOR_OK)
        return fault_message(c, what, &h, &e);
    void *buf = NULL;
    if (h.external) {
        enum cp_status st = ext_read(c, tp, what, h.nbytes, &buf);
        if (st != CP_OK)
            return st;
    } else if (onnx_tensor_values(tp, &h, &buf, &e) != CP_ONNX_TENSOR_OK) {
        return fault_message(c, what, &h, &e);
    }
    *dtype = h.dtype;
    *shape = h.shape;
    *data = buf;
    *nbytes = h.nbytes;
    return CP_OK;
}

/* ---- graph tensors ---------------------------------------------------------- */

enum cp_status onnx_set_initializer(struct onnx_ctx *c, const char *name, enum cp_dtype dtype,
                                    const struct cp_shape *shape, void *data, size_t nbytes,
                                    const char *what, int32_t *index)
{
    if (index)
        *index = -1;
    struct cp_diag local;
    cp_diag_init(&local);
    int32_t idx = (int32_t)cp_strmap_gets(&c->tensors, name, -1);
    if (idx >= 0) {
        struct cp_tensor *t = cp_graph_tensor(c->g, idx);
        if (t->kind != CP_TENSOR_INTERMEDIATE || t->producer >= 0) {
            free(data);
            return onnx_err(c, CP_ERR_INVALID, "%s: the name '%s' is already taken by %s", what,
                            name,
                            t->kind == CP_TENSOR_INPUT         ? "a graph input"
                            : t->kind == CP_TENSOR_INITIALIZER ? "another initializer"
                                                               : "a node output");
        }
        /* A forward reference: a node read this name before it was defined. */
        t->kind = CP_TENSOR_INITIALIZER;
        t->dtype = dtype;
        t->shape = *shape;
    } else {
        enum cp_status st =
            cp_graph_add_tensor(c->g, name, dtype, shape, CP_TENSOR_INITIALIZER, &idx, &local);
        if (st != CP_OK) {
            free(data);
            return onnx_err_from(c, &local, st);
        }
        if (cp_strmap_puts(&c->tensors, cp_graph_tensor(c->g, idx)->name, idx) != CP_OK) {
            free(data);
            return onnx_err(c, CP_ERR_NOMEM, "out of memory");
        }
    }
    enum cp_status st = cp_graph_set_data(c->g, idx, data, nbytes, CP_DATA_HEAP, &local);
    if (st != CP_OK)
        return onnx_err_from(c, &local, st);
    if (index)
        *index = idx;
    return CP_OK;
}

enum cp_status onnx_value_type(struct onnx_ctx *c, const Onnx__ValueInfoProto *vi, const char *what,
                               enum cp_dtype *dtype, struct cp_shape *shape)
{
    *dtype = CP_DTYPE_UNDEFINED;
    cp_shape_set_unknown(shape);
    if (!vi->type)
        return onnx_err(c, CP_ERR_INVALID, "%s has no type", what);
    if (vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type)
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "%s is not a dense tensor (sequence, map, optional and sparse values are "
                        "not supported)",
                        what);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    if (!tt->has_elem_type || tt->elem_type == 0)
        return onnx_err(c, CP_ERR_INVALID, "%s has no element type", what);
    enum cp_dtype dt = cp_dtype_from_onnx(tt->elem_type);
    if (dt == CP_DTYPE_UNDEFINED) {
        char buf[24];
        return onnx_err(c, CP_ERR_UNSUPPORTED,
                        "%s has dtype %s, which cannot be imported (supported: " SUPPORTED_DTYPES
                        ")",
                        what, cp_onnx_dtype_name(tt->elem_type, buf));
    }
    struct cp_shape s;
    cp_shape_set_unknown(&s);
    if (tt->shape) {
        const Onnx__TensorShapeProto *sp = tt->shape;
        if (sp->n_dim > CP_MAX_RANK)
            return onnx_err(c, CP_ERR_UNSUPPORTED,
                            "%s has rank %zu; at most %d dimensions are supported", what, sp->n_dim,
                            CP_MAX_RANK);
        s.rank = (int)sp->n_dim;
        for (size_t i = 0; i < sp->n_dim; i++) {
            const Onnx__TensorShapeProto__Dimension *dm = sp->dim[i];
            s.dims[i].value = -1;
            s.dims[i].sym = NULL;
            if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
                if (dm->dim_value < 0)
                    return onnx_err(c, CP_ERR_INVALID,
                                    "%s has a negative dimension (%lld at axis %zu)", what,
                                    (long long)dm->dim_value, i);
                s.dims[i].value = dm->dim_value;
            } else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                       dm->dim_param && *dm->dim_param) {
                s.dims[i].sym = cp_graph_strdup(c->g, dm->dim_param);
                if (!s.dims[i].sym)
                    return onnx_err(c, CP_ERR_NOMEM, "out of memory");
            }
        }
    }
    *dtype = dt;
    *shape = s;
    return CP_OK;
}
