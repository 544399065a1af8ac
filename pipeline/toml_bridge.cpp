// The one C++ file of cannprof: Debian's toml++ read behind the small C
// interface of pipeline/pipeline_internal.h (cp_toml_*). A flow file is
// flattened into dotted keys with their values as text and where they
// start in the file; nothing of C++ (exceptions, types) crosses the line.
#include <toml++/toml.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <sstream>
#include <string>

extern "C" {
#include "pipeline/toml_bridge.h"
}

namespace {

char *dup(const std::string &s)
{
    char *p = static_cast<char *>(std::malloc(s.size() + 1));
    if (p)
        std::memcpy(p, s.c_str(), s.size() + 1);
    return p;
}

bool add(cp_toml *t, const std::string &key, const std::string &value, cp_toml_kind kind,
         const toml::source_region &where)
{
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 32;
        void *g = std::realloc(t->v, nc * sizeof *t->v);
        if (!g)
            return false;
        t->v = static_cast<cp_toml_entry *>(g);
        t->cap = nc;
    }
    cp_toml_entry &e = t->v[t->n];
    e.key = dup(key);
    e.value = dup(value);
    e.kind = kind;
    e.line = static_cast<int>(where.begin.line);
    e.column = static_cast<int>(where.begin.column);
    if (!e.key || !e.value) {
        std::free(e.key);
        std::free(e.value);
        return false;
    }
    t->n++;
    return true;
}

// Every leaf of the table, "a.b.c" = its value as text; arrays as their
// TOML text ([1, 2]).
bool flatten(cp_toml *t, const toml::table &tbl, const std::string &prefix)
{
    for (auto &&[k, node] : tbl) {
        std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
        const toml::source_region &where = node.source();
        if (const toml::table *sub = node.as_table()) {
            if (!flatten(t, *sub, key))
                return false;
            continue;
        }
        std::ostringstream text;
        cp_toml_kind kind = CP_TOML_STRING;
        if (const auto *s = node.as_string()) {
            text << s->get();
        } else if (const auto *i = node.as_integer()) {
            text << i->get();
            kind = CP_TOML_INTEGER;
        } else if (const auto *f = node.as_floating_point()) {
            text.precision(17);
            text << f->get();
            kind = CP_TOML_FLOAT;
        } else if (const auto *b = node.as_boolean()) {
            text << (b->get() ? "true" : "false");
            kind = CP_TOML_BOOL;
        } else if (const auto *a = node.as_array()) {
            text << *a;
            kind = CP_TOML_ARRAY;
        } else {
            kind = CP_TOML_OTHER; /* dates and times: no flow key takes one */
        }
        if (!add(t, key, text.str(), kind, where))
            return false;
    }
    return true;
}

} // namespace

extern "C" enum cp_status cp_toml_read(const char *path, struct cp_toml *out, struct cp_diag *d)
{
    std::memset(out, 0, sizeof *out);
    try {
        toml::table tbl = toml::parse_file(path);
        if (!flatten(out, tbl, "")) {
            cp_toml_release(out);
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        }
        return CP_OK;
    } catch (const toml::parse_error &e) {
        cp_toml_release(out);
        const toml::source_region &where = e.source();
        if (where.begin.line == 0)
            return cp_diag_set(d, CP_ERR_INVALID, "%s: not valid TOML: %s", path,
                               std::string(e.description()).c_str());
        return cp_diag_set(d, CP_ERR_INVALID, "%s:%u:%u: not valid TOML: %s", path,
                           static_cast<unsigned>(where.begin.line),
                           static_cast<unsigned>(where.begin.column),
                           std::string(e.description()).c_str());
    } catch (const std::bad_alloc &) {
        cp_toml_release(out);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    } catch (const std::exception &e) {
        cp_toml_release(out);
        return cp_diag_set(d, CP_ERR_INVALID, "%s: cannot be read as TOML: %s", path, e.what());
    } catch (...) {
        cp_toml_release(out);
        return cp_diag_set(d, CP_ERR_INVALID, "%s: cannot be read as TOML", path);
    }
}

extern "C" void cp_toml_release(struct cp_toml *t)
{
    for (size_t i = 0; i < t->n; i++) {
        std::free(t->v[i].key);
        std::free(t->v[i].value);
    }
    std::free(t->v);
    std::memset(t, 0, sizeof *t);
}

extern "C" const struct cp_toml_entry *cp_toml_get(const struct cp_toml *t, const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (std::strcmp(t->v[i].key, key) == 0)
            return &t->v[i];
    return nullptr;
}
