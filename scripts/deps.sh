#!/usr/bin/env bash
# Shared by demo.sh and test.sh: install the Debian packages cannprof needs,
# only those missing. Quiet when everything is present. Without root it stops
# and names the packages to install.
#
# Sourced, not run: defines cp_install_deps and cp_build.

CP_PACKAGES=(
    cmake make gcc pkg-config
    libyaml-dev libsqlite3-dev libgsl-dev libcurl4-openssl-dev libssl-dev
    libcriterion-dev libdnnl-dev libprotobuf-c-dev protobuf-c-compiler
    libonnx-dev libjansson-dev libxxhash-dev
    libonnx-testdata
)

cp_missing_packages() {
    local p missing=()
    for p in "${CP_PACKAGES[@]}" "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
    echo "${missing[@]}"
}

cp_install_deps() {
    local missing
    missing=$(cp_missing_packages "$@")
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "cannprof: missing Debian packages: $missing" >&2
        echo "cannprof: install them as root: apt-get install -y $missing" >&2
        exit 3
    fi
    echo "cannprof: installing Debian packages: $missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    # Refresh the index only when an install from the current one fails.
    # shellcheck disable=SC2086
    if ! apt-get install -y -qq --no-install-recommends $missing >/tmp/cannprof-apt.log 2>&1; then
        apt-get update -qq >>/tmp/cannprof-apt.log 2>&1
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $missing >>/tmp/cannprof-apt.log 2>&1 || {
            echo "cannprof: apt-get install failed; see /tmp/cannprof-apt.log" >&2
            tail -n 20 /tmp/cannprof-apt.log >&2
            exit 3
        }
    fi
}

# cp_build DIR [cmake args...]: configure (once) and build.
cp_build() {
    local dir=$1
    shift
    mkdir -p "$dir"
    if [ ! -f "$dir/CMakeCache.txt" ]; then
        cmake -S "$CP_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCP_WERROR=ON "$@" \
            >"$dir/configure.log" 2>&1 || {
            cat "$dir/configure.log" >&2
            exit 3
        }
    fi
    cmake --build "$dir" -j"$(nproc)" >"$dir/build.log" 2>&1 || {
        grep -E 'error|Error' -A3 "$dir/build.log" | head -60 >&2
        echo "cannprof: build failed; full log in $dir/build.log" >&2
        exit 3
    }
}
