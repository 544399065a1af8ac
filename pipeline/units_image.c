/* The image flowunits: PNG in (libpng's simplified reader: any PNG as
 * 8-bit RGB, uint8 [H, W, 3]) and out (a float image [1, C, H, W] or
 * [C, H, W] in 0..1, or uint8 [H, W, C], written as 8-bit RGB or gray),
 * bilinear resizing of uint8 [H, W, C], and normalising to float32
 * [1, C, H, W]. */
#include "pipeline/pipeline_internal.h"

#include <png.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum cp_status pl_image_decode(struct pl_payload *p, struct cp_diag *d);
enum cp_status pl_image_encode(struct pl_payload *p, struct cp_diag *d);
enum cp_status pl_image_resize(struct pl_payload *p, long width, long height, struct cp_diag *d);
enum cp_status pl_image_normalize(struct pl_payload *p, const double *mean, const double *std,
                                  size_t n, double scale, struct cp_diag *d);

/* Replace p's first tensor (or add one) with t. */
static enum cp_status set_first(struct pl_payload *p, struct cp_host_tensor *t, struct cp_diag *d)
{
    if (p->n_t) {
        cp_host_tensor_release(&p->t[0]);
        p->t[0] = *t;
        return CP_OK;
    }
    p->t = cp_calloc(1, sizeof *p->t);
    if (!p->t) {
        cp_host_tensor_release(t);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    p->t[0] = *t;
    p->n_t = 1;
    return CP_OK;
}

enum cp_status pl_image_decode(struct pl_payload *p, struct cp_diag *d)
{
    if (!p->len)
        return cp_diag_set(d, CP_ERR_INVALID, "no bytes to decode (image_decode reads a file's)");
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, p->bytes, p->len))
        return cp_diag_set(d, CP_ERR_INVALID, "not a PNG image: %s", img.message);
    img.format = PNG_FORMAT_RGB;
    if (img.width == 0 || img.height == 0 || img.width > 16384 || img.height > 16384) {
        png_image_free(&img);
        return cp_diag_set(d, CP_ERR_INVALID, "a PNG of %ux%u (1 to 16384 a side)", img.width,
                           img.height);
    }
    struct cp_host_tensor t = {.dtype = CP_DTYPE_U8, .rank = 3, .dims = {img.height, img.width, 3}};
    snprintf(t.name, sizeof t.name, "image");
    t.nbytes = PNG_IMAGE_SIZE(img);
    t.data = malloc(t.nbytes);
    if (!t.data) {
        png_image_free(&img);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    if (!png_image_finish_read(&img, NULL, t.data, 0, NULL)) {
        free(t.data);
        return cp_diag_set(d, CP_ERR_INVALID, "a broken PNG: %s", img.message);
    }
    free(p->bytes);
    p->bytes = NULL;
    p->len = 0;
    return set_first(p, &t, d);
}

static double element(const struct cp_host_tensor *t, size_t i)
{
    switch (t->dtype) {
    case CP_DTYPE_F32:
        return ((const float *)t->data)[i];
    case CP_DTYPE_F64:
        return ((const double *)t->data)[i];
    case CP_DTYPE_U8:
        return ((const uint8_t *)t->data)[i] / 255.0;
    default:
        return 0;
    }
}

enum cp_status pl_image_encode(struct pl_payload *p, struct cp_diag *d)
{
    if (!p->n_t)
        return cp_diag_set(d, CP_ERR_INVALID, "no tensor to encode as an image");
    const struct cp_host_tensor *t = &p->t[0];
    /* [1, C, H, W], [C, H, W] (float, 0..1) or [H, W, C] (uint8) */
    int64_t c, h, w;
    bool planar = t->dtype != CP_DTYPE_U8;
    if (t->dtype != CP_DTYPE_F32 && t->dtype != CP_DTYPE_F64 && t->dtype != CP_DTYPE_U8)
        return cp_diag_set(d, CP_ERR_INVALID, "tensor %s is %s: image_encode takes f32 or u8",
                           t->name, cp_dtype_name(t->dtype));
    if (planar && t->rank == 4 && t->dims[0] == 1) {
        c = t->dims[1], h = t->dims[2], w = t->dims[3];
    } else if (planar && t->rank == 3) {
        c = t->dims[0], h = t->dims[1], w = t->dims[2];
    } else if (!planar && t->rank == 3) {
        h = t->dims[0], w = t->dims[1], c = t->dims[2];
    } else {
        return cp_diag_set(d, CP_ERR_INVALID,
                           "tensor %s of rank %d: image_encode takes [1, C, H, W] or [C, H, W] "
                           "(float) or [H, W, C] (uint8)",
                           t->name, t->rank);
    }
    if ((c != 1 && c != 3) || h < 1 || w < 1 || h > 16384 || w > 16384)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "tensor %s is %lldx%lld with %lld channels: an image has 1 or 3",
                           t->name, (long long)h, (long long)w, (long long)c);
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = c == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    size_t n = (size_t)(h * w * c);
    uint8_t *px = malloc(n);
    if (!px)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++)
            for (int64_t k = 0; k < c; k++) {
                size_t src = planar ? (size_t)((k * h + y) * w + x) : (size_t)((y * w + x) * c + k);
                double v = element(t, src);
                v = isfinite(v) ? (v < 0 ? 0 : v > 1 ? 1 : v) : 0;
                px[(y * w + x) * c + k] = (uint8_t)lround(v * 255.0);
            }
    png_alloc_size_t size = 0;
    enum cp_status st = CP_OK;
    if (!png_image_write_get_memory_size(img, size, 0, px, 0, NULL)) {
        st = cp_diag_set(d, CP_ERR_INVALID, "cannot encode the PNG: %s", img.message);
    } else {
        uint8_t *out = malloc(size);
        if (!out)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        else if (!png_image_write_to_memory(&img, out, &size, 0, px, 0, NULL)) {
            free(out);
            st = cp_diag_set(d, CP_ERR_INVALID, "cannot encode the PNG: %s", img.message);
        } else {
            free(p->bytes);
            p->bytes = out;
            p->len = size;
        }
    }
    free(px);
    return st;
}

enum cp_status pl_image_resize(struct pl_payload *p, long width, long height, struct cp_diag *d)
{
    if (!p->n_t || p->t[0].dtype != CP_DTYPE_U8 || p->t[0].rank != 3)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "resize takes a uint8 image [H, W, C] (from image_decode)");
    const struct cp_host_tensor *s = &p->t[0];
    int64_t h = s->dims[0], w = s->dims[1], c = s->dims[2];
    struct cp_host_tensor t = {.dtype = CP_DTYPE_U8, .rank = 3, .dims = {height, width, c}};
    snprintf(t.name, sizeof t.name, "%s", s->name);
    t.nbytes = (size_t)(height * width * c);
    t.data = malloc(t.nbytes ? t.nbytes : 1);
    if (!t.data)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    const uint8_t *src = s->data;
    uint8_t *dst = t.data;
    /* bilinear, pixel centres aligned */
    for (long y = 0; y < height; y++) {
        double fy = ((double)y + 0.5) * (double)h / (double)height - 0.5;
        fy = fy < 0 ? 0 : fy;
        int64_t y0 = (int64_t)fy, y1 = y0 + 1 < h ? y0 + 1 : h - 1;
        double wy = fy - (double)y0;
        for (long x = 0; x < width; x++) {
            double fx = ((double)x + 0.5) * (double)w / (double)width - 0.5;
            fx = fx < 0 ? 0 : fx;
            int64_t x0 = (int64_t)fx, x1 = x0 + 1 < w ? x0 + 1 : w - 1;
            double wx = fx - (double)x0;
            for (int64_t k = 0; k < c; k++) {
                double a = src[(y0 * w + x0) * c + k], b = src[(y0 * w + x1) * c + k],
                       e = src[(y1 * w + x0) * c + k], f = src[(y1 * w + x1) * c + k];
                double v = (a * (1 - wx) + b * wx) * (1 - wy) + (e * (1 - wx) + f * wx) * wy;
                dst[(y * width + x) * c + k] = (uint8_t)lround(v);
            }
        }
    }
    return set_first(p, &t, d);
}

enum cp_status pl_image_normalize(struct pl_payload *p, const double *mean, const double *std,
                                  size_t n, double scale, struct cp_diag *d)
{
    if (!p->n_t || p->t[0].dtype != CP_DTYPE_U8 || p->t[0].rank != 3)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "normalize takes a uint8 image [H, W, C] (from image_decode)");
    const struct cp_host_tensor *s = &p->t[0];
    int64_t h = s->dims[0], w = s->dims[1], c = s->dims[2];
    struct cp_host_tensor t = {.dtype = CP_DTYPE_F32, .rank = 4, .dims = {1, c, h, w}};
    snprintf(t.name, sizeof t.name, "%s", s->name);
    t.nbytes = (size_t)(c * h * w) * sizeof(float);
    t.data = malloc(t.nbytes ? t.nbytes : 1);
    if (!t.data)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    const uint8_t *src = s->data;
    float *dst = t.data;
    for (int64_t k = 0; k < c; k++) {
        size_t m = (size_t)k < n ? (size_t)k : n - 1;
        for (int64_t i = 0; i < h * w; i++)
            dst[k * h * w + i] = (float)((src[i * c + k] * scale - mean[m]) / std[m]);
    }
    return set_first(p, &t, d);
}
