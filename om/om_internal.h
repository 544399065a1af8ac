/*
 * Private to om/: the byte layout of the CPU .om header and the
 * helpers the reader and writer share. docs/om-format.md is the reference
 * for every constant here; change both together.
 *
 * Pieces: om_write.c (container writer), om_read.c (container reader and
 * the checks that come before anything is used), om_graph.c (graph <->
 * cpom.Graph protobuf, with validation of everything the protobuf says),
 * om_meta.c (the metadata JSON), om_ascend.c (recognising Ascend .om files).
 */
#ifndef CP_OM_INTERNAL_H
#define CP_OM_INTERNAL_H

#include "om/om.h"

#include <stdint.h>
#include <string.h>

/* ---- header layout (all integers little-endian) ------------------------- */

#define OM_OFF_MAGIC         0  /* 4 bytes "CPOM" */
#define OM_OFF_VERSION       4  /* u32 format version */
#define OM_OFF_CHECKSUM      8  /* u64 XXH3-64 of bytes [16, file_length) */
#define OM_OFF_HEADER_SIZE   16 /* u32 */
#define OM_OFF_FLAGS         20 /* u32 */
#define OM_OFF_FILE_LENGTH   24 /* u64 */
#define OM_OFF_SECTION_COUNT 32 /* u32 */
#define OM_OFF_RESERVED      36 /* u32, zero */
#define OM_OFF_SECTIONS      40 /* section table */
#define OM_FIXED_SIZE        40 /* bytes before the section table */
#define OM_CHECKSUM_START    16 /* the checksum covers everything from here */

/* A section table entry: kind u32, reserved u32 (zero), offset u64, length
 * u64. */
#define OM_SECTION_ENTRY  24
#define OM_SEC_OFF_KIND   0
#define OM_SEC_OFF_RESV   4
#define OM_SEC_OFF_OFFSET 8
#define OM_SEC_OFF_LENGTH 16

/* The header size version 1 writes: 40 + 3 * 24 = 112, rounded up to 64. */
#define OM_HEADER_SIZE_V1 128
/* Readers refuse more sections than this (bounds the pairwise overlap check). */
#define OM_MAX_SECTIONS 64

enum om_section_kind {
    OM_SECTION_META = 1,    /* metadata, UTF-8 JSON */
    OM_SECTION_GRAPH = 2,   /* cpom.Graph, protobuf */
    OM_SECTION_WEIGHTS = 3, /* 64-byte-aligned initializer blobs */
};

/* Flag bits 0..15 are compatible (a reader that does not know one ignores
 * it); bits 16..31 are required (a reader that does not know one refuses the
 * file with CP_ERR_VERSION). Version 1 defines none. */
#define OM_FLAGS_REQUIRED_MASK 0xFFFF0000u
#define OM_FLAGS_KNOWN         0u

static inline uint32_t om_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t om_get_u64(const uint8_t *p)
{
    return (uint64_t)om_get_u32(p) | (uint64_t)om_get_u32(p + 4) << 32;
}

static inline void om_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void om_put_u64(uint8_t *p, uint64_t v)
{
    om_put_u32(p, (uint32_t)v);
    om_put_u32(p + 4, (uint32_t)(v >> 32));
}

/* Round up to CP_OM_ALIGN; false on overflow. */
static inline bool om_align_up(uint64_t v, uint64_t *out)
{
    if (v > UINT64_MAX - (CP_OM_ALIGN - 1))
        return false;
    *out = (v + CP_OM_ALIGN - 1) & ~(uint64_t)(CP_OM_ALIGN - 1);
    return true;
}

/* ---- graph <-> protobuf (om_graph.c) ------------------------------------- */

/* The packed graph section and where each tensor's data goes in the weights
 * section (offset relative to the section, UINT64_MAX when it has none). */
struct om_packed_graph {
    uint8_t *bytes; /* packed cpom.Graph; caller frees */
    size_t len;
    uint64_t *blob_offset; /* per tensor; caller frees */
    uint64_t weights_len;  /* end of the last blob */
};

/* Check that `g` can be written (what the reader will check), lay out the
 * weight blobs and pack the graph. Dead nodes are left out. CP_ERR_INVALID
 * naming the tensor or node at fault. */
enum cp_status om_graph_pack(const struct cp_graph *g, struct om_packed_graph *out,
                             struct cp_diag *d);

/* Unpack and validate a graph section, and build the graph; initializers
 * point into `weights` (owner CP_DATA_MMAP). `name` is the file name for
 * messages. CP_ERR_CORRUPT naming what failed. OUT: *g. */
enum cp_status om_graph_unpack(const char *name, const uint8_t *p, size_t n, const uint8_t *weights,
                               uint64_t weights_len, struct cp_graph **g, struct cp_diag *d);

/* ---- metadata (om_meta.c) ------------------------------------------------ */

/* The metadata JSON of `meta` (format version, tool version, source, target,
 * config) with keys in a fixed order. */
enum cp_status om_meta_build(const struct cp_om_meta *meta, struct cp_buf *out, struct cp_diag *d);

/* Parse and validate the metadata section. OUT: *out (may be NULL: then the
 * section is only validated). CP_ERR_CORRUPT naming what failed. */
enum cp_status om_meta_parse(const char *name, const uint8_t *p, size_t n, uint32_t version,
                             struct cp_om_meta *out, struct cp_diag *d);

/* ---- Ascend (om_ascend.c) ------------------------------------------------- */

/* A one-line description of an Ascend header for messages ("name 'x',
 * platform version 'y', ..."), or "header truncated". Writes out[n]. */
void om_ascend_describe(const uint8_t *data, size_t len, char *out, size_t n);

#endif
