#!/usr/bin/env bash
# Check every #include of the tree against the module graph of
# docs/architecture.md: its table "| module | owns | public headers | may
# include |" is the one statement of which module may use which, so the
# documentation and the check cannot disagree.
#
# A file of module M may include
#   - any header of M itself;
#   - a public header (third column) of a module listed in M's fourth column.
# Tests (tests/<M>/...) may also include M's private headers, and any public
# header of any module; tests/support/, bench/ and fuzz/ only public headers.
# Generated headers (proto/) count as the module "proto"; <sqlite3.h> as
# the module "sqlite", so only the modules whose row lists it (the trace
# store, the knowledge base) hold SQL.
#
# Exit 0 when every include is allowed, 1 listing each one that is not, 2
# when the table cannot be read.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
doc="$root/docs/architecture.md"
[ -f "$doc" ] || { echo "check_layering: $doc: missing" >&2; exit 2; }
cd "$root"

files=$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*' | sed 's|^\./||')

awk -v files="$files" '
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
function strip(s) { gsub(/[`\/]/, "", s); return trim(s) }
BEGIN { in_table = 0; nerr = 0; nmod = 0 }
FNR == NR {
    # docs/architecture.md: the module table
    if ($0 ~ /^\| *module *\| *owns *\| *public headers *\| *may include *\|/) { in_table = 1; next }
    if (in_table && $0 ~ /^\|[- |]+\|$/) next
    if (in_table && $0 !~ /^\|/) { in_table = 0; next }
    if (!in_table) next
    n = split($0, col, "|")
    if (n < 6) next
    m = strip(col[2])
    if (m == "") next
    if (!(m in modules)) nmod++
    modules[m] = 1
    np = split(col[4], pub, ",")
    for (i = 1; i <= np; i++) {
        h = trim(pub[i]); gsub(/`/, "", h)
        if (h != "" && h != "—" && h != "-") public[h] = 1
    }
    nd = split(col[5], dep, ",")
    for (i = 1; i <= nd; i++) {
        x = strip(dep[i])
        if (x != "" && x != "—" && x != "-") allowed[m, x] = 1
    }
    next
}
END {
    if (nmod == 0) {
        print "check_layering: no module table in docs/architecture.md" > "/dev/stderr"
        exit 2
    }
    nf = split(files, list, "\n")
    for (f = 1; f <= nf; f++) exists[list[f]] = 1
    for (f = 1; f <= nf; f++) {
        path = list[f]
        if (path == "") continue
        split(path, parts, "/")
        top = parts[1]
        kind = "module"
        own = top
        if (top == "tests") {
            kind = (parts[2] == "support") ? "support" : "test"
            own = parts[2]
        } else if (top == "bench" || top == "fuzz" || top == "examples" || top == "scripts" ||
                   top == "docs") {
            kind = "support"
            own = ""
        } else if (!(top in modules)) {
            printf "%s: module %s is not in docs/architecture.md\n", path, top
            nerr++
            continue
        }
        dir = path; sub(/\/[^\/]*$/, "", dir)
        line = 0
        while ((getline txt < path) > 0) {
            line++
            if (txt ~ /^[ \t]*#[ \t]*include[ \t]*<sqlite3\.h>/) {
                if (kind == "module" && !((own, "sqlite") in allowed)) {
                    printf "%s:%d: includes <sqlite3.h>: %s may not use SQLite (docs/architecture.md)\n", path, line, own
                    nerr++
                }
                continue
            }
            if (txt !~ /^[ \t]*#[ \t]*include[ \t]*"/) continue
            inc = txt
            sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", inc)
            sub(/".*$/, "", inc)
            # a header beside the file, or the tests folder own helpers
            if ((dir "/" inc) in exists) continue
            if (top == "tests" && (("tests/" inc) in exists)) continue
            split(inc, ip, "/")
            target = ip[1]
            if (target == "proto") {
                if (kind == "module" && !((own, "proto") in allowed)) {
                    printf "%s:%d: includes %s: %s may not use the generated protobuf code\n", path, line, inc, own
                    nerr++
                }
                continue
            }
            if (!(target in modules)) {
                printf "%s:%d: includes %s, which is in no module\n", path, line, inc
                nerr++
                continue
            }
            if (target == own && kind != "support") continue
            if (!(inc in public)) {
                printf "%s:%d: includes %s, a private header of %s\n", path, line, inc, target
                nerr++
                continue
            }
            if (kind == "module" && !((own, target) in allowed)) {
                printf "%s:%d: includes %s: %s may not depend on %s (docs/architecture.md)\n", path, line, inc, own, target
                nerr++
            }
        }
        close(path)
    }
    if (nerr) {
        fflush()
        printf "check_layering: %d include(s) against the module graph\n", nerr > "/dev/stderr"
        exit 1
    }
}
' "$doc" /dev/null
echo "check_layering: every include follows docs/architecture.md"
