#!/usr/bin/env bash
# Every build a packager or a user is likely to make must compile without
# a warning (-Werror): gcc Release (-O3, where -Wmaybe-uninitialized
# appears), gcc Debug, and clang Release. Each builds in its own folder
# (build-release/, build-debug/, build-clang/); nothing is run.
set -euo pipefail
CP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$CP_ROOT/scripts/deps.sh"
cp_install_deps clang
cd "$CP_ROOT"
builds=(${CP_BUILDS:-release debug clang})
for b in "${builds[@]}"; do
    case "$b" in
    release) CC=gcc CXX=g++ cp_build "$CP_ROOT/build-release" -DCMAKE_BUILD_TYPE=Release ;;
    debug) CC=gcc CXX=g++ cp_build "$CP_ROOT/build-debug" -DCMAKE_BUILD_TYPE=Debug ;;
    clang) CC=clang CXX=clang++ cp_build "$CP_ROOT/build-clang" -DCMAKE_BUILD_TYPE=Release ;;
    *) echo "check_builds: unknown build '$b' (release, debug, clang)" >&2; exit 2 ;;
    esac
    echo "check_builds: $b builds without a warning"
done
