/*
 * NumPy .npy files, read (format 1.0, 2.0, 3.0) and written (1.0).
 *
 * Layout, byte by byte:
 *   0..5   magic 0x93 'N' 'U' 'M' 'P' 'Y'
 *   6      major version (1, 2 or 3)
 *   7      minor version (0)
 *   8..    header length HLEN: uint16 little-endian in 1.0 (bytes 8-9),
 *          uint32 little-endian in 2.0 and 3.0 (bytes 8-11)
 *   then   HLEN bytes of header: a Python dict literal such as
 *          {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 *          padded with spaces and ending with '\n' so that the data starts
 *          at a multiple of 64 (ASCII in 1.0/2.0, UTF-8 in 3.0)
 *   then   the elements, in C order here, numel * itemsize bytes, nothing
 *          after them.
 *
 * Element types map as: '<f4' f32, '<f2' f16, '<f8' f64, '|i1' i8, '|u1'
 * u8, '<i2' i16, '<i4' i32, '<u4' u32, '<i8' i64, '<u8' u64, '|b1' bool.
 * NumPy has no bfloat16, so bf16 tensors are written as their uint16 bit
 * patterns ('<u2') and '<u2' is read back as bf16. That leaves u16 with no
 * .npy form of its own: writing a u16 tensor as .npy is refused (a .pb
 * file keeps it).
 * Big-endian data and Fortran order (rank 2 and up) are refused by name.
 *
 * The writer reproduces NumPy 1.24's header byte for byte, including the
 * spare spaces it leaves after the dict so the first dimension can grow in
 * place.
 */
#include "runner/io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_ALIGN       64
#define NPY_GROWTH_ROOM 21 /* NumPy's GROWTH_AXIS_MAX_DIGITS */

/* ---- element types ------------------------------------------------------------ */

struct npy_type {
    char kind; /* NumPy kind character */
    int size;  /* item size in bytes */
    enum cp_dtype dtype;
    const char *descr; /* what we write */
};

static const struct npy_type npy_types[] = {
    {'f', 4, CP_DTYPE_F32, "<f4"}, {'f', 2, CP_DTYPE_F16, "<f2"},  {'u', 2, CP_DTYPE_BF16, "<u2"},
    {'i', 1, CP_DTYPE_I8, "|i1"},  {'u', 1, CP_DTYPE_U8, "|u1"},   {'i', 4, CP_DTYPE_I32, "<i4"},
    {'i', 8, CP_DTYPE_I64, "<i8"}, {'b', 1, CP_DTYPE_BOOL, "|b1"}, {'f', 8, CP_DTYPE_F64, "<f8"},
    {'i', 2, CP_DTYPE_I16, "<i2"}, {'u', 4, CP_DTYPE_U32, "<u4"},  {'u', 8, CP_DTYPE_U64, "<u8"},
};

#define NPY_SUPPORTED                                                                              \
    "'<f4', '<f2', '<f8', '<u2' (as bf16), '|i1', '|u1', '<i2', '<i4', '<u4', '<i8', '<u8', '|b1'"

static const char *npy_descr_of(enum cp_dtype dt)
{
    for (size_t i = 0; i < sizeof npy_types / sizeof *npy_types; i++)
        if (npy_types[i].dtype == dt)
            return npy_types[i].descr;
    return NULL;
}

/* A readable NumPy name for a descr we do not take: "float64", "int16". */
static void npy_kind_name(char kind, int size, char *out, size_t n)
{
    const char *base;
    bool bits = true;
    switch (kind) {
    case 'f':
        base = "float";
        break;
    case 'i':
        base = "int";
        break;
    case 'u':
        base = "uint";
        break;
    case 'c':
        base = "complex";
        break;
    case 'b':
        base = "bool";
        break;
    case 'U':
        base = "unicode string";
        bits = false;
        break;
    case 'S':
    case 'a':
        base = "byte string";
        bits = false;
        break;
    case 'O':
        base = "Python object";
        bits = false;
        break;
    case 'V':
        base = "raw void";
        bits = false;
        break;
    case 'M':
        base = "datetime64";
        bits = false;
        break;
    case 'm':
        base = "timedelta64";
        bits = false;
        break;
    default:
        base = "unknown kind";
        bits = false;
        break;
    }
    if (bits && size > 0)
        snprintf(out, n, "%s%d", base, size * 8);
    else
        snprintf(out, n, "%s", base);
}

/* Map a descr string ("<f4") to a dtype. */
static enum cp_status npy_parse_descr(const char *path, const char *descr, enum cp_dtype *dt,
                                      struct cp_diag *d)
{
    const char *p = descr;
    char order = 0;
    if (*p == '<' || *p == '>' || *p == '|' || *p == '=')
        order = *p++;
    char kind = *p ? *p++ : 0;
    int size = 0;
    bool digits = false;
    while (*p >= '0' && *p <= '9' && size < 100000) {
        size = size * 10 + (*p++ - '0');
        digits = true;
    }
    if (!kind || *p)
        digits = false; /* "<f4[ms]", "?" and friends */
    if (!digits && kind == '?' && !*p) {
        kind = 'b'; /* '?' is NumPy's one-character code for bool */
        size = 1;
        digits = true;
    }
    if (!digits) {
        char name[48];
        npy_kind_name(kind, 0, name, sizeof name);
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: .npy dtype '%s' (%s) is not supported; supported: " NPY_SUPPORTED,
                           path, descr, name);
    }
    if (order == '>' && size > 1)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: .npy data is big-endian ('%s'); only little-endian is supported "
                           "(convert with arr.astype(arr.dtype.newbyteorder('<')))",
                           path, descr);
    for (size_t i = 0; i < sizeof npy_types / sizeof *npy_types; i++)
        if (npy_types[i].kind == kind && npy_types[i].size == size) {
            *dt = npy_types[i].dtype;
            return CP_OK;
        }
    char name[48];
    npy_kind_name(kind, size, name, sizeof name);
    return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                       "%s: .npy dtype '%s' (%s) is not supported; supported: " NPY_SUPPORTED, path,
                       descr, name);
}

/* ---- header dict ------------------------------------------------------------------ */

struct npy_lex {
    const char *path;
    const char *start, *p, *end;
    struct cp_diag *d;
};

static void lex_space(struct npy_lex *L)
{
    while (L->p < L->end && (*L->p == ' ' || *L->p == '\t' || *L->p == '\n' || *L->p == '\r'))
        L->p++;
}

static bool lex_eat(struct npy_lex *L, char c)
{
    lex_space(L);
    if (L->p < L->end && *L->p == c) {
        L->p++;
        return true;
    }
    return false;
}

static enum cp_status lex_err(struct npy_lex *L, const char *what)
{
    return cp_diag_set(L->d, CP_ERR_PARSE, "%s: malformed .npy header: %s at header offset %zu",
                       L->path, what, (size_t)(L->p - L->start));
}

/* A quoted string into out[n] (no escapes: NumPy's keys and descrs have
 * none). */
static enum cp_status lex_string(struct npy_lex *L, char *out, size_t n)
{
    lex_space(L);
    if (L->p >= L->end || (*L->p != '\'' && *L->p != '"'))
        return lex_err(L, "expected a quoted string");
    char q = *L->p++;
    size_t k = 0;
    while (L->p < L->end && *L->p != q) {
        if (*L->p == '\\' || k + 1 >= n)
            return lex_err(L, "string too long or with escapes");
        out[k++] = *L->p++;
    }
    if (L->p >= L->end)
        return lex_err(L, "unterminated string");
    L->p++;
    out[k] = '\0';
    return CP_OK;
}

static bool lex_word(struct npy_lex *L, const char *w)
{
    lex_space(L);
    size_t n = strlen(w);
    if ((size_t)(L->end - L->p) >= n && memcmp(L->p, w, n) == 0) {
        L->p += n;
        return true;
    }
    return false;
}

struct npy_header {
    char descr[64];
    bool fortran_order;
    int rank;
    int64_t dims[CP_MAX_RANK];
};

/* A tuple of non-negative integers: "()", "(5,)", "(2, 3)". */
static enum cp_status lex_shape(struct npy_lex *L, struct npy_header *h)
{
    if (!lex_eat(L, '('))
        return lex_err(L, "'shape' is not a tuple");
    h->rank = 0;
    for (;;) {
        if (lex_eat(L, ')'))
            return CP_OK;
        lex_space(L);
        if (L->p >= L->end || *L->p < '0' || *L->p > '9')
            return lex_err(L, "'shape' holds something other than non-negative integers");
        int64_t v = 0;
        while (L->p < L->end && *L->p >= '0' && *L->p <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return lex_err(L, "a dimension is too large");
            v = v * 10 + (*L->p++ - '0');
        }
        if (L->p < L->end && (*L->p == 'L' || *L->p == 'l'))
            L->p++; /* Python 2 long suffix */
        if (h->rank == CP_MAX_RANK)
            return cp_diag_set(L->d, CP_ERR_UNSUPPORTED,
                               "%s: .npy array has more than %d dimensions", L->path, CP_MAX_RANK);
        h->dims[h->rank++] = v;
        if (lex_eat(L, ')'))
            return CP_OK;
        if (!lex_eat(L, ','))
            return lex_err(L, "expected ',' or ')' in 'shape'");
    }
}

static enum cp_status npy_parse_header(const char *path, const char *text, size_t n,
                                       struct npy_header *h, struct cp_diag *d)
{
    struct npy_lex L = {path, text, text, text + n, d};
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    enum cp_status st;
    memset(h, 0, sizeof *h);
    if (!lex_eat(&L, '{'))
        return lex_err(&L, "it does not start with '{'");
    while (!lex_eat(&L, '}')) {
        char key[32];
        if ((st = lex_string(&L, key, sizeof key)) != CP_OK)
            return st;
        if (!lex_eat(&L, ':'))
            return lex_err(&L, "expected ':' after a key");
        if (strcmp(key, "descr") == 0 && !seen_descr) {
            seen_descr = true;
            lex_space(&L);
            if (L.p < L.end && *L.p == '[')
                return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                                   "%s: .npy holds a structured (record) array; only plain "
                                   "numeric arrays are supported",
                                   path);
            if ((st = lex_string(&L, h->descr, sizeof h->descr)) != CP_OK)
                return st;
        } else if (strcmp(key, "fortran_order") == 0 && !seen_fortran) {
            seen_fortran = true;
            if (lex_word(&L, "True"))
                h->fortran_order = true;
            else if (!lex_word(&L, "False"))
                return lex_err(&L, "'fortran_order' is neither True nor False");
        } else if (strcmp(key, "shape") == 0 && !seen_shape) {
            seen_shape = true;
            if ((st = lex_shape(&L, h)) != CP_OK)
                return st;
        } else {
            return cp_diag_set(d, CP_ERR_PARSE,
                               "%s: malformed .npy header: unexpected or repeated key '%s'", path,
                               key);
        }
        if (lex_eat(&L, '}'))
            break;
        if (!lex_eat(&L, ','))
            return lex_err(&L, "expected ',' or '}' after a value");
    }
    lex_space(&L);
    if (L.p != L.end)
        return lex_err(&L, "text after the closing '}'");
    if (!seen_descr || !seen_fortran || !seen_shape)
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: malformed .npy header: it lacks '%s' (needs 'descr', "
                           "'fortran_order' and 'shape')",
                           path,
                           !seen_descr     ? "descr"
                           : !seen_fortran ? "fortran_order"
                                           : "shape");
    return CP_OK;
}

/* ---- reading ------------------------------------------------------------------------ */

enum cp_status cp_io_read_npy(const char *path, const uint8_t *data, size_t len,
                              struct cp_host_tensor *t, struct cp_diag *d)
{
    memset(t, 0, sizeof *t);
    if (len < 10)
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: truncated .npy: %zu bytes, shorter than the fixed preamble", path,
                           len);
    int major = data[6], minor = data[7];
    size_t pre;
    size_t hlen;
    if (major == 1 && minor == 0) {
        pre = 10;
        hlen = (size_t)data[8] | (size_t)data[9] << 8;
    } else if ((major == 2 || major == 3) && minor == 0) {
        pre = 12;
        if (len < pre)
            return cp_diag_set(d, CP_ERR_PARSE,
                               "%s: truncated .npy: %zu bytes, shorter than the fixed preamble",
                               path, len);
        hlen = (size_t)data[8] | (size_t)data[9] << 8 | (size_t)data[10] << 16 |
               (size_t)data[11] << 24;
    } else {
        return cp_diag_set(d, CP_ERR_VERSION,
                           "%s: .npy format version %d.%d is not supported (1.0, 2.0 and 3.0 are)",
                           path, major, minor);
    }
    if (hlen > len - pre)
        return cp_diag_set(d, CP_ERR_PARSE,
                           "%s: truncated .npy: the header claims %zu bytes but the file has "
                           "only %zu after the preamble",
                           path, hlen, len - pre);
    struct npy_header h;
    enum cp_status st = npy_parse_header(path, (const char *)data + pre, hlen, &h, d);
    if (st != CP_OK)
        return st;
    enum cp_dtype dt = CP_DTYPE_UNDEFINED;
    if ((st = npy_parse_descr(path, h.descr, &dt, d)) != CP_OK)
        return st;
    if (h.fortran_order && h.rank >= 2)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: .npy array is in Fortran (column-major) order; only C order is "
                           "supported (save np.ascontiguousarray(arr) instead)",
                           path);
    t->dtype = dt;
    t->rank = h.rank;
    memcpy(t->dims, h.dims, sizeof h.dims);
    size_t nbytes;
    if ((st = cp_io_tensor_bytes(t, path, &nbytes, d)) != CP_OK)
        goto out_fail;
    size_t have = len - pre - hlen;
    if (have != nbytes) {
        char sh[128];
        size_t k = 0;
        sh[0] = '\0';
        for (int i = 0; i < h.rank && k < sizeof sh - 24; i++)
            k +=
                (size_t)snprintf(sh + k, sizeof sh - k, i ? "x%lld" : "%lld", (long long)h.dims[i]);
        st = cp_diag_set(d, CP_ERR_PARSE,
                         "%s: %s .npy: shape %s of %s needs %zu data bytes, the file has %zu", path,
                         have < nbytes ? "truncated" : "oversized", h.rank ? sh : "scalar",
                         cp_dtype_name(dt), nbytes, have);
        goto out_fail;
    }
    t->data = cp_io_alloc(nbytes);
    if (!t->data) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory for %zu bytes", path, nbytes);
        goto out_fail;
    }
    memcpy(t->data, data + pre + hlen, nbytes);
    if (dt == CP_DTYPE_BOOL)
        for (size_t i = 0; i < nbytes; i++)
            ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
    t->nbytes = nbytes;
    cp_io_name_from_path(t, path);
    return CP_OK;
out_fail:
    memset(t, 0, sizeof *t);
    return st;
}

/* ---- writing ------------------------------------------------------------------------ */

enum cp_status cp_tensor_npy_encode(const struct cp_host_tensor *t, const char *path,
                                    uint8_t **bytes, size_t *len, struct cp_diag *d)
{
    *bytes = NULL;
    *len = 0;
    const char *descr = npy_descr_of(t->dtype);
    if (t->dtype == CP_DTYPE_U16)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                           "%s: a u16 tensor has no .npy form here ('<u2' means bf16); write it "
                           "as a .pb file",
                           path);
    if (!descr)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "%s: cannot write dtype %s to .npy", path,
                           cp_dtype_name(t->dtype));
    size_t nbytes;
    enum cp_status st = cp_io_tensor_bytes(t, path, &nbytes, d);
    if (st != CP_OK)
        return st;
    if (t->nbytes != nbytes || (nbytes && !t->data))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: tensor '%s' holds %zu bytes, but its shape and dtype need %zu",
                           path, t->name, t->data ? t->nbytes : 0, nbytes);

    /* The dict exactly as NumPy's repr writes it: sorted keys, a trailing
     * ", ", and a 1-tuple with its comma. */
    struct cp_buf hdr;
    cp_buf_init(&hdr);
    cp_buf_printf(&hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->rank; i++)
        cp_buf_printf(&hdr, i ? ", %lld" : "%lld", (long long)t->dims[i]);
    cp_buf_puts(&hdr, t->rank == 1 ? ",), }" : "), }");
    if (t->rank > 0) {
        char first[24];
        int w = snprintf(first, sizeof first, "%lld", (long long)t->dims[0]);
        for (int i = w; i < NPY_GROWTH_ROOM; i++)
            cp_buf_putc(&hdr, ' ');
    }
    /* Pad so that preamble + header + '\n' is a multiple of 64; like NumPy,
     * an already aligned header still gets a full 64 spaces. */
    size_t pad = NPY_ALIGN - ((10 + hdr.len + 1) % NPY_ALIGN);
    for (size_t i = 0; i < pad; i++)
        cp_buf_putc(&hdr, ' ');
    cp_buf_putc(&hdr, '\n');
    if ((st = cp_buf_status(&hdr)) != CP_OK) {
        st = cp_diag_set(d, st, "%s: out of memory", path);
        goto out_hdr;
    }
    if (hdr.len > UINT16_MAX) { /* cannot happen at rank <= 8, but keep 1.0 honest */
        st = cp_diag_set(d, CP_ERR_INTERNAL, "%s: .npy header too long for format 1.0", path);
        goto out_hdr;
    }
    size_t total = 10 + hdr.len + nbytes;
    if (total < nbytes) {
        st = cp_diag_set(d, CP_ERR_INVALID, "%s: tensor too large", path);
        goto out_hdr;
    }
    uint8_t *out = malloc(total);
    if (!out) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory for %zu bytes", path, total);
        goto out_hdr;
    }
    memcpy(out, CP_NPY_MAGIC, CP_NPY_MAGIC_LEN);
    out[6] = 1;
    out[7] = 0;
    out[8] = (uint8_t)(hdr.len & 0xff);
    out[9] = (uint8_t)(hdr.len >> 8);
    memcpy(out + 10, hdr.data, hdr.len);
    if (nbytes)
        memcpy(out + 10 + hdr.len, t->data, nbytes);
    if (t->dtype == CP_DTYPE_BOOL) /* NumPy bools are exactly 0 or 1 */
        for (size_t i = 0; i < nbytes; i++)
            out[10 + hdr.len + i] = out[10 + hdr.len + i] != 0;
    *bytes = out;
    *len = total;
out_hdr:
    cp_buf_release(&hdr);
    return st;
}

enum cp_status cp_tensor_write_npy(const char *path, const struct cp_host_tensor *t,
                                   struct cp_diag *d)
{
    uint8_t *out = NULL;
    size_t total = 0;
    enum cp_status st = cp_tensor_npy_encode(t, path, &out, &total, d);
    if (st == CP_OK)
        st = cp_file_write_atomic(path, out, total, d);
    free(out);
    return st;
}
