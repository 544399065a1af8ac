#!/usr/bin/env bash
# Shared by demo.sh and test.sh: install the Debian packages cannprof needs,
# only those missing. Quiet when everything is present. Without root it stops
# and names the packages to install.
#
# Sourced, not run: defines cp_install_deps and cp_build.

CP_PACKAGES=(
    cmake make gcc g++ pkg-config
    libyaml-dev libsqlite3-dev libgsl-dev libcurl4-openssl-dev libssl-dev
    libcriterion-dev libdnnl-dev libprotobuf-c-dev protobuf-c-compiler
    libonnx-dev libjansson-dev libxxhash-dev libyajl-dev zlib1g-dev libcsv-dev
    libtomlplusplus-dev libgraphviz-dev libpng-dev libmicrohttpd-dev
    libcairo2-dev libpango1.0-dev fonts-noto-cjk poppler-utils libxml2-utils
    libcmark-gfm-dev libcmark-gfm-extensions-dev
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

# ---- npm: benchmark and reference-data tools only, never the tool's ----------

CP_ORT_VERSION=1.30.0
CP_NPM_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/cannprof

# node and npm may come from Debian (nodejs, npm) or from a nodejs build that
# bundles npm: install Debian's only when either command is missing.
cp_install_node() {
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        cp_install_deps nodejs npm
    fi
}

# cp_install_ort: npm's onnxruntime-node into the cache folder (once); sets
# CP_ORT_NODE_PATH to the node_modules holding it.
cp_install_ort() {
    cp_install_node
    local dir=$CP_NPM_CACHE/onnxruntime-node-$CP_ORT_VERSION
    CP_ORT_NODE_PATH=$dir/node_modules
    [ -f "$CP_ORT_NODE_PATH/onnxruntime-node/package.json" ] && return 0
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] || echo '{"name":"cannprof-ort-bench","private":true}' \
        >"$dir/package.json"
    # The CPU binaries ship inside the package; the install script only
    # fetches CUDA's, which nothing here uses.
    (cd "$dir" && ONNXRUNTIME_NODE_INSTALL_CUDA=skip ONNXRUNTIME_NODE_INSTALL=skip \
        npm install --no-audit --no-fund --ignore-scripts "onnxruntime-node@$CP_ORT_VERSION" \
        >"$dir/npm-install.log" 2>&1) || {
        tail -n 20 "$dir/npm-install.log" >&2
        echo "cannprof: npm install onnxruntime-node@$CP_ORT_VERSION failed" >&2
        exit 3
    }
}

# cp_npm_unpack PKG@VERSION DIR: the files of an npm package (no install
# scripts run) in DIR/<PKG with / as __>/, fetched once into the cache.
cp_npm_unpack() {
    local spec=$1 dir=$2 name=${1%@*}
    local dest=$dir/${name//\//__}
    [ -f "$dest/.unpacked-$(echo "$spec" | tr '/@' '__')" ] && return 0
    cp_install_node
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "$spec" >npm-pack.log 2>&1) || {
        tail -n 20 "$tmp/npm-pack.log" >&2
        echo "cannprof: npm pack $spec failed" >&2
        rm -rf "$tmp"
        exit 3
    }
    rm -rf "$dest"
    mkdir -p "$dest"
    tar xzf "$tmp"/*.tgz -C "$dest" --strip-components=1
    touch "$dest/.unpacked-$(echo "$spec" | tr '/@' '__')"
    rm -rf "$tmp"
}
