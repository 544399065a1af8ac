#!/usr/bin/env bash
# Fail when a tracked C file differs from what clang-format (the checked-in
# .clang-format) makes of it; list the files. Run `clang-format -i FILE` to
# fix one.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps clang-format
cd "$CP_ROOT"
mapfile -t files < <(git ls-files '*.c' '*.h')
bad=()
for f in "${files[@]}"; do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        bad+=("$f")
    fi
done
if [ "${#bad[@]}" -gt 0 ]; then
    echo "check_format: ${#bad[@]} file(s) are not clang-formatted:" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
fi
echo "check_format: ${#files[@]} files follow .clang-format"
