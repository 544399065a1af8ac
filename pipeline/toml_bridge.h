/* The C interface of pipeline/toml_bridge.cpp, Debian's toml++ behind
 * it: a TOML file as dotted keys with their values as text. Included by
 * that C++ file too, so it holds nothing but plain C. */
#ifndef CP_PIPELINE_TOML_BRIDGE_H
#define CP_PIPELINE_TOML_BRIDGE_H

#include "core/core.h"

#include <stddef.h>

enum cp_toml_kind {
    CP_TOML_STRING,
    CP_TOML_INTEGER,
    CP_TOML_FLOAT,
    CP_TOML_BOOL,
    CP_TOML_ARRAY,
    CP_TOML_OTHER
};

/* One leaf of the file: "graph.graphconf", its value as text, where it
 * starts (1-based). */
struct cp_toml_entry {
    char *key, *value;
    enum cp_toml_kind kind;
    int line, column;
};

struct cp_toml {
    struct cp_toml_entry *v;
    size_t n, cap;
};

/* Read a TOML file. Errors: not readable (CP_ERR_IO), not TOML
 * (CP_ERR_INVALID, "file:line:column: ..."). */
enum cp_status cp_toml_read(const char *path, struct cp_toml *out, struct cp_diag *d);
void cp_toml_release(struct cp_toml *t);
/* The entry of a dotted key, NULL when absent. */
const struct cp_toml_entry *cp_toml_get(const struct cp_toml *t, const char *key);

#endif
