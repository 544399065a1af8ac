/*
 * om: the CPU target's offline-model container, and recognition of real
 * Ascend .om files.
 *
 * A CPU .om holds a fixed header (magic "CPOM", format version), a
 * self-describing metadata section (JSON: source model path and content
 * hash, the full conversion config, tool version, target description, what
 * each conversion pass did), the
 * serialized graph (protobuf-c, schema in om/cpom.proto) and the weights in
 * 64-byte-aligned blobs so the runtime can mmap them. An xxHash-64 checksum
 * covers the whole file. The byte layout is documented in docs/om-format.md.
 *
 * The reader checks magic, version, every offset and length, and the
 * checksum before it uses anything. Writing is deterministic (same graph and
 * metadata give the same bytes) and atomic.
 */
#ifndef CP_OM_H
#define CP_OM_H

#include "om/config.h"
#include "core/core.h"
#include "graph/graph.h"

#define CP_OM_MAGIC          "CPOM"
#define CP_OM_FORMAT_VERSION 1
#define CP_OM_ALIGN          64

/* What a .om says about itself. Strings are owned by the struct: release
 * with cp_om_meta_release. */
struct cp_om_meta {
    uint32_t format_version;
    char *tool_version;
    char *source_path;
    char *source_hash; /* 32 hex digits */
    char *target;      /* target description, e.g. "cpu x86_64 avx512f ..." */
    struct cp_convert_config config;
    /* What the conversion passes did: a compact JSON array of
     * {"name","group","ran","changed","nodes_before","nodes_after"[,"final"]}
     * in run order (see atc_bridge/passes/pass.h); NULL or "" when the .om
     * has no pass record (then the key is not written). */
    char *passes_json;
    char *meta_json; /* the whole metadata section as stored */
};

void cp_om_meta_release(struct cp_om_meta *m);

/* A .om does not record the --output it was written to (the same model and
 * config give the same bytes wherever they are written); its source model
 * path is recorded. A reader that knows where it found the file calls this
 * to set config.output to that path without its ".om", so the config it
 * holds reproduces this file (`cannprof info` prints it as a command).
 * cp_om_read does so itself. Paths too long for config.output leave it
 * empty. */
void cp_om_meta_locate(struct cp_om_meta *m, const char *path);

/* Serialize `g` with `meta` into `path` + (nothing: path is the full file
 * name). Atomic. Strings of meta are copied; meta_json is ignored (it is
 * built from the other fields). */
enum cp_status cp_om_write(const char *path, const struct cp_graph *g,
                           const struct cp_om_meta *meta, struct cp_diag *d);

/* Serialize into memory. OUT: *data (caller frees), *len. */
enum cp_status cp_om_write_buffer(const struct cp_graph *g, const struct cp_om_meta *meta,
                                  uint8_t **data, size_t *len, struct cp_diag *d);

/* Load a .om: maps the file, validates it completely, then builds the graph
 * whose initializers point into the mapping (the graph keeps it alive).
 * OUT: *g (free with cp_graph_free), *meta (release with cp_om_meta_release;
 * may be NULL). Corruption gives CP_ERR_CORRUPT, a newer format version
 * CP_ERR_VERSION, an Ascend .om CP_ERR_UNSUPPORTED with a message saying so. */
enum cp_status cp_om_read(const char *path, struct cp_graph **g, struct cp_om_meta *meta,
                          struct cp_diag *d);

/* Same, from a buffer that must outlive the graph (no copy of weights). */
enum cp_status cp_om_read_buffer(const uint8_t *data, size_t len, const char *display_name,
                                 struct cp_graph **g, struct cp_om_meta *meta, struct cp_diag *d);

/* ---- Ascend .om --------------------------------------------------------- */

enum cp_om_kind {
    CP_OM_KIND_UNKNOWN = 0,
    CP_OM_KIND_CPU,
    CP_OM_KIND_ASCEND,
};

/* Which kind of .om the first bytes say this is (needs >= 4 bytes). */
enum cp_om_kind cp_om_sniff(const uint8_t *data, size_t len);

/* The readable fields of an Ascend .om's 256-byte header. */
struct cp_ascend_om_header {
    uint32_t magic;
    uint32_t headsize;
    uint32_t version;
    uint32_t length;
    uint8_t is_encrypt;
    uint8_t is_checksum;
    uint8_t modeltype;
    uint8_t genmode;
    char name[33];
    uint32_t ops;
    uint32_t om_ir_version;
    uint32_t model_num;
    char platform_version[21];
    uint8_t platform_type;
    uint64_t model_length;
    size_t file_size;
};

/* Parse an Ascend header defensively. CP_ERR_CORRUPT if shorter than 256
 * bytes or the magic is wrong. */
enum cp_status cp_om_read_ascend_header(const uint8_t *data, size_t len,
                                        struct cp_ascend_om_header *out, struct cp_diag *d);

#endif
