#!/usr/bin/env bash
# Convert the poster service's denoiser (examples/models/sd_unet_tiny.onnx)
# into models/denoiser.om the way the planted problem has it: with
# --layout_policy nchw, plain NCHW convolutions where the CPU's blocked
# kernels run faster. `prepare.sh --fixed` converts it with the default
# policy (auto) instead. The cannprof binary is $CANNPROF, else build/cannprof.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
cli=${CANNPROF:-$root/build/cannprof}
policy=nchw
[ "${1:-}" = --fixed ] && policy=auto
mkdir -p "$here/models"
"$cli" convert --model "$root/examples/models/sd_unet_tiny.onnx" --framework 5 \
    --layout_policy "$policy" --output "$here/models/denoiser" >/dev/null
echo "prepare: $here/models/denoiser.om (--layout_policy $policy)"
