#!/usr/bin/env python3
"""Import throughput and memory of `cannprof import` on large synthetic traces.

The goal (issue: streaming import): a 2 GB trace_view.json or Kineto JSON
imports at >= 100 MB/s with a peak RSS <= 512 MB. This script writes one
synthetic trace per family, of a requested size, then times

    CLI import FILE -o OUT.db --json

under `/usr/bin/time -f "%e %M"` (wall seconds, max RSS in KiB, written to a
separate file with -o), REPS times per file (OUT.db deleted before each run),
and prints a Markdown table: family, detected format, file size, events and
iterations imported (from the JSON on stdout), median wall time with its
min..max, throughput (file bytes / median time; for the gzip row the
UNCOMPRESSED bytes, the compressed size is shown next to the size), peak RSS
(max over the reps) and whether each goal is met. MB = 2^20 bytes throughout.
The files are read warm from the page cache (just written, or read by the
previous rep), so the figure is parse + store speed, not disk speed.

Families (--families, default "kineto trace_view kineto_gz"):

  kineto      torch.profiler / Kineto Chrome trace: a JSON object with
              schemaVersion, deviceProperties, distributedInfo,
              displayTimeUnit, baseTimeNanoseconds, "traceEvents": [...] and
              traceName, laid out as Kineto writes it (one event over a few
              lines). Per step a "ProfilerStep#N" user_annotation, then per
              operator a cpu_op, and per launch a cuda_runtime event
              (cudaLaunchKernel / cudaMemcpyAsync), an "ac2g" flow start, the
              GPU kernel or gpu_memcpy (pid 0, tid 7) and the flow end (flow id
              = correlation); a step ends with a cudaDeviceSynchronize, so
              the GPU never lags far behind. ts/dur are numbers in
              microseconds with 3 decimals, epoch-like (1.7e15), written
              exactly from integer nanoseconds. The process/thread metadata and
              the "Record Window End" instant (pid "" and tid "") come at the
              END of traceEvents, as recent Kineto writes them. Unlike real
              Kineto, which writes all CPU ops first and the CUPTI activities
              after them, events are interleaved per operator.
  trace_view  torch_npu ASCEND_PROFILER_OUTPUT/trace_view.json: a top-level
              array on one line, metadata first (processes "Python", "CANN",
              "Ascend Hardware", "Overlap Analysis", labels, "Stream 2"); ts
              are STRINGS ("1736408883688177.930"), hardware durations have
              many decimals (53.7410625). Python cpu_ops (with "Call stack"
              holding escaped \\r\\n), ProfilerStep#N, CANN "AscendCL@aclnn*"
              and "Node@launch" events, Ascend Hardware tasks (AI_CORE, ...)
              linked by connection_id, "async_npu" flows whose id is a string
              or a bare number above 2^53, "HostToDevice" flows, and a few
              "Overlap Analysis" Computing/Free events.
  kineto_gz   the kineto trace gzip-compressed (.json.gz, level 6), the same
              uncompressed bytes; generated with the kineto file in one pass
              when both are requested.

X events are about 20% framework ops, 40% runtime/CANN and 40% device
(printed with --generate-only); steps hold 400..700 operators, a few
thousand events. Generation is deterministic (fixed seeds) and streams: one
step (~1-2 MB) is built at a time and written, so memory stays flat. A file
ends within a few KB below the requested size.

With --keep DIR the files live in DIR/<family>-<SIZE>/ next to a gen.json
describing them and are reused when the generator version, size and the
file on disk match; otherwise a temporary folder is used and deleted at the
end. The import databases are always deleted.

Usage: bench/import_bench.sh [--size 2G] [--families "kineto trace_view kineto_gz"]
                             [--reps 3] [--keep DIR] [--generate-only]
Exit status: 0 all goals met, 1 a goal missed, 2 usage error or a failed
import (its stderr is printed).
"""
import argparse
import gzip
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GEN_VERSION = 1
MB = 1 << 20
GOAL_MBPS = 100.0
GOAL_RSS_MB = 512.0
FAMILIES = ("kineto", "trace_view", "kineto_gz")
FILE_NAMES = {"kineto": "trace.pt.trace.json", "trace_view": "trace_view.json",
              "kineto_gz": "trace.pt.trace.json.gz"}
SEEDS = {"kineto": 1, "trace_view": 2}
GZIP_LEVEL = 6
TIME = "/usr/bin/time"


def ns_us(ns):
    """Nanoseconds (int) as microseconds with 3 decimals, exactly."""
    return f"{ns // 1000}.{ns % 1000:03d}"


# ---- Kineto catalog ---------------------------------------------------------------------------

def _kineto_kernels():
    """~50 kernel names by group, each with its static launch-config args."""
    sgemm = [f"ampere_sgemm_{t}_{o}" for t in ("32x32", "64x32", "64x64", "128x32", "128x64",
                                                "128x128") for o in ("nn", "nt", "tn")]
    groups = {
        "gemm": sgemm + [
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma"
            "_aligna4_alignc4_execute_kernel__5x_cublas",
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x8_stage3_warpsize1x2x1_ffma"
            "_aligna4_alignc4_execute_kernel__5x_cublas",
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"
            "(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)",
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>"
            "(cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4::Params)",
            "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, "
            "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float "
            "const>, cublasGemvTensorStridedBatched<float> >(cublasGemmSmallNParams<float const, "
            "float const, float, float>)",
        ],
        "elem": [
            f"void at::native::vectorized_elementwise_kernel<4, {f}, at::detail::Array<char*, "
            f"{n}> >(int, {f}, at::detail::Array<char*, {n}>)" for f, n in (
                ("at::native::CUDAFunctor_add<float>", 3),
                ("at::native::BinaryFunctor<float, float, float, at::native::binary_internal::"
                 "MulFunctor<float> >", 3),
                ("at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
                 "::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
                 "{lambda(float)#1}", 2),
                ("at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&"
                 ", c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::"
                 "operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}", 2),
                ("at::native::FillFunctor<float>", 1),
                ("at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::"
                 "MulFunctor<float> >", 2),
                ("at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::"
                 "operator()() const::{lambda()#3}::operator()() const::{lambda(float)#1}", 2),
                ("at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::"
                 "operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}", 2),
            )] + [
            "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
            "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()"
            "() const::{lambda(float)#1}, at::detail::Array<char*, 2>, "
            "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
            "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, ...)",
            "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::"
            "BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> > "
            ">(at::TensorIteratorBase&, ...)::{lambda(int)#1}>(int, ...)",
            "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, "
            "unsigned int, 1, 4, bool>(at::cuda::detail::TensorInfo<float const, unsigned int>, "
            "at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<bool,"
            " unsigned int>, unsigned int, float, at::PhiloxCudaState)",
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
            "(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::"
            "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, ...>(...)",
            "void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<2>, "
            "at::native::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>(...)",
        ],
        "norm": [
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
            "(int, float, float const*, float const*, float const*, float*, float*, float*)",
            "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<float, float>"
            "(float const*, float const*, float const*, float const*, float const*, float*, int)",
            "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<float, "
            "float>(long, long, float const*, float const*, float const*, float const*, float*, "
            "float*)",
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
            "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
            "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, "
            "at::native::(anonymous namespace)::SoftMaxBackwardEpilogue>(float*, float const*, "
            "float const*, int)",
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::"
            "func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()("
            "at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(...)",
            "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::"
            "MeanOps<float, float, float, float>, unsigned int, float, 4> >(...)",
            "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>"
            "(cublasSplitKParams<float>, float const*, float const*, float*, float const*, float "
            "const*, float const*, float const*, float*, void*, long, float*, int*)",
        ],
        "misc": [
            "void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned "
            "int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<float, unsigned int>, ...)",
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 3, "
            "128, 1>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, "
            "unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned "
            "int, 4u>, int, unsigned int)",
            "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<float, "
            "float, long>(long const*, float const*, float*, int, long, int)",
            "void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<at_cuda_detail::cub::"
            "DeviceRadixSortPolicy<long, long, int>::Policy800, false, long, long, int, int>(...)",
            "void at::native::(anonymous namespace)::compute_grad_weight<float, long>(long const*,"
            " long const*, float const*, long const*, long, long, bool, long, float*)",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        ],
    }
    rng = random.Random(7)
    out = {}
    for g, names in groups.items():
        out[g] = []
        for nm in names:
            block = rng.choice((128, 256, 512))
            grid = rng.choice((32, 64, 108, 216, 432, 1024))
            regs = rng.choice((32, 40, 64, 96, 128))
            smem = rng.choice((0, 0, 4096, 16384, 49152))
            bps = grid / 108
            wps = bps * block / 32
            occ = min(100, int(wps / 64 * 100) + 1)
            args = (f'"registers per thread": {regs},\n      "shared memory": {smem},\n'
                    f'      "blocks per SM": {bps:.6f},\n      "warps per SM": {wps:.6f},\n'
                    f'      "grid": [{grid}, 1, 1],\n      "block": [{block}, 1, 1],\n'
                    f'      "est. achieved occupancy %": {occ}')
            out[g].append((nm, args))
    return out


KERNELS = _kineto_kernels()
# (name, weight, Input Dims, Input type, launches); a launch is a kernel group,
# with its duration range in ns, or ("memcpy", kind). Mean launches per op ~2.
KINETO_OPS = [
    ("aten::addmm", 10, "[[512], [8, 512], [512, 512], [], []]",
     '["float", "float", "float", "Scalar", "Scalar"]', [("gemm", 4000, 30000)]),
    ("aten::linear", 8, "[[8, 512], [2048, 512], [2048]]", '["float", "float", "float"]',
     [("gemm", 6000, 40000), ("elem", 1500, 5000)]),
    ("aten::mm", 8, "[[8, 2048], [2048, 512]]", '["float", "float"]',
     [("gemm", 5000, 30000), ("norm", 2000, 6000)]),
    ("aten::layer_norm", 5, "[[8, 128, 512], [], [512], [512], [], []]",
     '["float", "", "float", "float", "Scalar", "Scalar"]', [("norm", 3000, 9000)]),
    ("aten::native_layer_norm_backward", 4, "[[8, 128, 512], [8, 128, 512], [], [8, 128, 1], "
     "[8, 128, 1], [512], [512], []]", '["float", "float", "", "float", "float", "float", '
     '"float", ""]', [("norm", 3000, 9000), ("norm", 3000, 9000), ("norm", 2000, 6000)]),
    ("aten::softmax", 4, "[[8, 8, 128, 128], [], []]", '["float", "Scalar", ""]',
     [("norm", 3000, 12000)]),
    ("aten::gelu", 5, "[[8, 128, 2048], []]", '["float", ""]', [("elem", 2000, 8000)]),
    ("aten::add_", 8, "[[8, 128, 512], [8, 128, 512], []]", '["float", "float", "Scalar"]',
     [("elem", 1500, 5000)]),
    ("aten::mul", 5, "[[8, 128, 512], []]", '["float", "Scalar"]', [("elem", 1500, 5000)]),
    ("aten::dropout", 4, "[[8, 128, 512], [], []]", '["float", "Scalar", "Scalar"]',
     [("elem", 2000, 6000), ("elem", 1500, 5000)]),
    ("aten::sum", 3, "[[8, 128, 512], [], [], []]", '["float", "", "Scalar", ""]',
     [("norm", 2000, 8000)]),
    ("aten::cat", 2, "[[], []]", '["TensorList", "Scalar"]', [("misc", 2000, 6000)]),
    ("aten::embedding_dense_backward", 1, "[[8, 128, 512], [8, 128], [], [], []]",
     '["float", "long int", "Scalar", "Scalar", "Scalar"]',
     [("misc", 3000, 9000), ("misc", 2000, 6000), ("misc", 2000, 6000), ("elem", 1500, 4000),
      ("misc", 2000, 6000)]),
    ("aten::_foreach_add_", 2, "[[], [], []]", '["TensorList", "TensorList", "Scalar"]',
     [("elem", 4000, 12000)] * 4),
    ("Optimizer.step#AdamW.step", 2, "[]", "[]", [("elem", 8000, 30000)] * 6),
    ("aten::copy_", 5, "[[8, 128, 512], [8, 128, 512], []]", '["float", "float", "Scalar"]',
     [("memcpy", "HtoD")]),
    ("aten::to", 3, "[[8, 128], [], [], [], []]", '["long int", "Scalar", "Scalar", "Scalar", '
     '"Scalar"]', [("memcpy", "DtoD"), ("elem", 1500, 4000)]),
    ("aten::item", 1, "[[]]", '["float"]', [("memcpy", "DtoH")]),
    ("c10d::allreduce_", 2, "[[], [], [], []]", '["TensorList", "Object", "Object", "Int"]',
     [("misc", 20000, 80000), ("elem", 1500, 4000), ("elem", 1500, 4000)]),
    ("aten::bmm", 6, "[[64, 128, 64], [64, 64, 128]]", '["float", "float"]',
     [("gemm", 5000, 20000), ("gemm", 5000, 20000), ("elem", 1500, 4000)]),
]
MEMCPY = {  # kind: (name, bandwidth range in GB/s)
    "HtoD": ("Memcpy HtoD (Pageable -> Device)", 8, 14),
    "DtoD": ("Memcpy DtoD (Device -> Device)", 600, 1400),
    "DtoH": ("Memcpy DtoH (Device -> Pinned)", 10, 20),
}


def weighted(ops):
    """An op list repeated by weight, for rng.choice."""
    return [op for op in ops for _ in range(op[1])]


def kineto(target, seed, stats):
    """Yield the text of a Kineto Chrome trace of at most `target` bytes."""
    rng = random.Random(seed)
    pid = tid = 4242
    base = 1_700_000_000_000_000_000
    header = (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, '
        '"name": "Synthetic GPU", "totalGlobalMem": 42314694656,\n      "computeMajor": 8, '
        '"computeMinor": 0,\n      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": '
        '2048,\n      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,\n'
        '      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 167936,\n      '
        '"numSms": 108, "sharedMemPerBlockOptin": 166912\n    }\n  ],\n  "cupti_version": 18,\n'
        '  "cuda_runtime_version": 12010,\n  "cuda_driver_version": 12020,\n'
        '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1, '
        '"pg_count": 1, "pg_config": [], "nccl_version": "2.18.1"},\n  "record_shapes": 1,\n'
        '  "with_stack": 0,\n  "profile_memory": 0,\n  "trace_id": "SYNTHETIC0000001",\n'
        '  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1700000000000000000,\n\n'
        '  "traceEvents": [\n')
    meta = []
    for name, p, t, key, val in (
            ("process_name", pid, 0, "name", '"python3"'),
            ("process_labels", pid, 0, "labels", '"CPU"'),
            ("process_sort_index", pid, 0, "sort_index", str(pid)),
            ("process_name", 0, 0, "name", '"python3"'),
            ("process_labels", 0, 0, "labels", '"GPU 0"'),
            ("process_sort_index", 0, 0, "sort_index", "5000000"),
            ("thread_name", pid, tid, "name", f'"thread {tid} (python3)"'),
            ("thread_sort_index", pid, tid, "sort_index", str(tid)),
            ("thread_name", 0, 7, "name", '"stream 7 "'),
            ("thread_sort_index", 0, 7, "sort_index", "7")):
        meta.append(f'  {{\n    "name": "{name}", "ph": "M", "ts": {ns_us(base)}, "pid": {p}, '
                    f'"tid": {t},\n    "args": {{\n      "{key}": {val}\n    }}\n  }}')

    def trailer(end_ns):
        return (",\n".join(meta) + ',\n  {\n    "name": "Record Window End", "ph": "i", '
                f'"s": "g",\n    "pid": "", "tid": "", "ts": {ns_us(end_ns)}\n  }}\n'
                '],\n  "traceName": "/tmp/synthetic/trace.pt.trace.json"\n}\n')

    t = base + 1_000_000_000          # CPU clock, 1 s after the base
    gpu = t                           # when the GPU stream is next free
    reserve = len(trailer(t)) + 2 + 800  # trailer, its comma, step and sync events
    size = len(header)
    yield header
    ops = weighted(KINETO_OPS)
    ext = corr = 0
    step = 0
    n_fw = n_rt = n_dev = n_flow = 0
    first = True
    done = False
    while not done:
        step += 1
        ext += 1
        step_ext = ext
        step_ts = t
        t += rng.randint(5_000, 20_000)
        parts, plen = [], 0
        for _ in range(rng.randint(400, 700)):
            name, _, dims, types, launches = rng.choice(ops)
            ext += 1
            op_ts = t
            lt = t + rng.randint(2_000, 8_000)
            ev = [None]
            for launch in launches:
                corr += 1
                rdur = rng.randint(3_000, 7_000)
                ks = max(gpu, lt + rng.randint(2_000, 6_000))
                if launch[0] == "memcpy":
                    mname, lo, hi = MEMCPY[launch[1]]
                    nbytes = rng.choice((4096, 16384, 65536, 262144, 1 << 20))
                    kdur = nbytes // rng.randint(lo, hi) + 1_000
                    rname, cbid, cat = "cudaMemcpyAsync", 41, "gpu_memcpy"
                    kargs = (f'"bytes": {nbytes},\n      "memory bandwidth (GB/s)": '
                             f'{nbytes / kdur:.6f}')
                else:
                    mname, kargs = rng.choice(KERNELS[launch[0]])
                    kdur = rng.randint(launch[1], launch[2])
                    rname, cbid, cat = "cudaLaunchKernel", 211, "kernel"
                ev.append(f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "{rname}", '
                          f'"pid": {pid}, "tid": {tid},\n    "ts": {ns_us(lt)}, "dur": '
                          f'{ns_us(rdur)},\n    "args": {{\n      "External id": {ext},\n'
                          f'      "cbid": {cbid},\n      "correlation": {corr}\n    }}\n  }}')
                ev.append(f'  {{\n    "ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": '
                          f'{ns_us(lt)},\n    "cat": "ac2g", "name": "ac2g"\n  }}')
                ev.append(f'  {{\n    "ph": "X", "cat": "{cat}", "name": "{mname}", "pid": 0, '
                          f'"tid": 7,\n    "ts": {ns_us(ks)}, "dur": {ns_us(kdur)},\n'
                          f'    "args": {{\n      "External id": {ext},\n      "queued": 0,\n'
                          f'      "device": 0,\n      "context": 1,\n      "stream": 7,\n'
                          f'      "correlation": {corr},\n      {kargs}\n    }}\n  }}')
                ev.append(f'  {{\n    "ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": '
                          f'{ns_us(ks)},\n    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }}')
                gpu = ks + kdur + rng.randint(500, 3_000)
                lt += rdur + rng.randint(500, 2_000)
            dur = lt - op_ts + rng.randint(1_000, 4_000)
            ev[0] = (f'  {{\n    "ph": "X", "cat": "cpu_op", "name": "{name}", "pid": {pid}, '
                     f'"tid": {tid},\n    "ts": {ns_us(op_ts)}, "dur": {ns_us(dur)},\n'
                     f'    "args": {{\n      "External id": {ext},"Record function id": 0, '
                     f'"Sequence number": {ext}, "Fwd thread id": 0, "Ev Idx": {ext - 1}, '
                     f'"Input Dims": {dims}, "Input type": {types}\n    }}\n  }}')
            t = op_ts + dur + rng.randint(1_000, 5_000)
            group = ",\n".join(ev)
            if size + plen + len(group) + 2 + reserve > target:
                done = True
                break
            parts.append(group)
            plen += len(group) + 2
            n_fw += 1
            n_rt += len(launches)
            n_dev += len(launches)
            n_flow += 2 * len(launches)
        if not parts:
            step -= 1
            break
        # The step ends waiting for the GPU, which bounds its lag behind the CPU.
        sync = max(t + rng.randint(2_000, 5_000), gpu + rng.randint(1_000, 3_000)) - t
        parts.append(f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": '
                     f'"cudaDeviceSynchronize", "pid": {pid}, "tid": {tid},\n'
                     f'    "ts": {ns_us(t)}, "dur": {ns_us(sync)},\n'
                     f'    "args": {{\n      "External id": 0,\n      "cbid": 165,\n'
                     f'      "correlation": {corr + 1}\n    }}\n  }}')
        corr += 1
        n_rt += 1
        t += sync + rng.randint(5_000, 20_000)
        step_ev = (f'  {{\n    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", '
                   f'"pid": {pid}, "tid": {tid},\n    "ts": {ns_us(step_ts)}, "dur": '
                   f'{ns_us(t - step_ts)},\n    "args": {{\n      "External id": {step_ext},'
                   f'"Record function id": 0, "Ev Idx": {step_ext - 1}\n    }}\n  }}')
        chunk = ("" if first else ",\n") + step_ev + ",\n" + ",\n".join(parts)
        first = False
        n_fw += 1
        size += len(chunk)
        yield chunk
        t += rng.randint(50_000, 200_000)
    stats.update(steps=step, framework=n_fw, runtime=n_rt, device=n_dev, flows=n_flow,
                 metadata=len(meta), other=1)
    yield ("" if first else ",\n") + trailer(t)


# ---- torch_npu trace_view catalog -------------------------------------------------------------

# (aten name, weight, aclnn API, Input Dims, Input type, [(task, Task Type, dur range ns)])
NPU_OPS = [
    ("aten::matmul", 10, "aclnnMatmul", "8,512;512,512", "float;float",
     [("aclnnMatmul_MatMulCommon_MatMulV2", "AI_CORE", 8_000, 60_000),
      ("trans_TransData_0", "AI_VECTOR_CORE", 2_000, 8_000)]),
    ("aten::addmm", 8, "aclnnAddmm", "512;8,512;512,512;;", "float;float;float;Scalar;Scalar",
     [("aclnnAddmm_MatMulCommon_MatMulV2", "AI_CORE", 8_000, 50_000),
      ("aclnnAddmm_AddAiCore_Add", "AI_VECTOR_CORE", 1_500, 5_000)]),
    ("aten::mm", 6, "aclnnMm", "8,2048;2048,512", "float;float",
     [("aclnnMm_MatMulCommon_MatMulV2", "AI_CORE", 8_000, 50_000),
      ("trans_TransData_1", "AI_VECTOR_CORE", 2_000, 8_000),
      ("trans_TransData_2", "AI_VECTOR_CORE", 2_000, 8_000)]),
    ("aten::add", 8, "aclnnAdd", "8,128,512;8,128,512;", "float;float;Scalar",
     [("aclnnAdd_AddAiCore_Add", "AI_VECTOR_CORE", 1_500, 6_000)]),
    ("aten::mul", 5, "aclnnMul", "8,128,512;", "float;Scalar",
     [("aclnnMul_MulAiCore_Mul", "AI_VECTOR_CORE", 1_500, 6_000)]),
    ("aten::gelu", 5, "aclnnGelu", "8,128,2048;", "float;",
     [("aclnnGelu_GeluAiCore_Gelu", "AI_VECTOR_CORE", 3_000, 9_000)]),
    ("aten::layer_norm", 5, "aclnnLayerNorm", "8,128,512;;512;512;;", "float;;float;float;;",
     [("aclnnLayerNorm_LayerNormV4_LayerNormV4", "AI_VECTOR_CORE", 3_000, 12_000),
      ("aclnnLayerNorm_Cast_Cast", "AI_VECTOR_CORE", 1_000, 3_000)]),
    ("aten::softmax", 4, "aclnnSoftmax", "8,8,128,128;;", "float;Scalar;",
     [("aclnnSoftmax_SoftmaxV2AiCore_SoftmaxV2", "AI_VECTOR_CORE", 3_000, 15_000)]),
    ("aten::dropout", 4, "aclnnDropout", "8,128,512;;", "float;Scalar;Scalar",
     [("aclnnDropoutGenMaskV2_DropOutGenMaskV4_DropOutGenMaskV4", "AI_VECTOR_CORE", 2_000,
       6_000), ("aclnnDropoutDoMask_DropOutDoMask_DropOutDoMask", "AI_VECTOR_CORE", 1_500,
                5_000)]),
    ("npu::npu_fusion_attention", 4, "aclnnFlashAttentionScore", "8,128,512;8,128,512;"
     "8,128,512;;;;;;", "float16;float16;float16;;;;;;",
     [("aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore", "MIX_AIC",
       20_000, 90_000), ("aclnnFlashAttentionScore_Cast_Cast", "AI_VECTOR_CORE", 1_000, 3_000)]),
    ("aten::sum", 3, "aclnnReduceSum", "8,128,512;;;", "float;;Scalar;",
     [("aclnnReduceSum_ReduceSumOp_ReduceSum", "AI_VECTOR_CORE", 2_000, 8_000)]),
    ("aten::cat", 2, "aclnnCat", ";", "TensorList;Scalar",
     [("aclnnCat_ConcatD_ConcatD", "AI_VECTOR_CORE", 2_000, 6_000)]),
    ("aten::embedding", 2, "aclnnEmbedding", "30522,512;8,128", "float;long int",
     [("aclnnEmbedding_GatherV2_GatherV2", "AI_VECTOR_CORE", 2_000, 8_000),
      ("aclnnEmbedding_Cast_Cast", "AI_VECTOR_CORE", 1_000, 3_000),
      ("aclnnEmbedding_Reshape_Reshape", "AI_CPU", 5_000, 20_000)]),
    ("aten::_foreach_add_", 2, "aclnnForeachAddScalarV2", ";;", "TensorList;TensorList;Scalar",
     [("aclnnForeachAddScalarV2_ForeachAddScalar_ForeachAddScalar", "AI_VECTOR_CORE", 4_000,
       12_000)] * 4),
    ("aten::copy_", 5, "aclnnInplaceCopy", "8,128,512;8,128,512;", "float;float;Scalar",
     [("MEMCPY_ASYNC", "MEMCPY_ASYNC", 3_000, 20_000)]),
    ("aten::to", 3, "aclnnCast", "8,128;;;;", "long int;Scalar;Scalar;Scalar;Scalar",
     [("aclnnCast_Cast_Cast", "AI_VECTOR_CORE", 1_000, 3_000),
      ("aclnnCast_TransData_TransData", "AI_VECTOR_CORE", 2_000, 6_000)]),
    ("aten::bmm", 6, "aclnnBatchMatMul", "64,128,64;64,64,128", "float;float",
     [("aclnnBatchMatMul_BatchMatMulV2_BatchMatMulV2", "AI_CORE", 6_000, 30_000),
      ("trans_TransData_3", "AI_VECTOR_CORE", 2_000, 8_000),
      ("aclnnBatchMatMul_MIX_AIV_BatchMatMulV3", "MIX_AIV", 4_000, 15_000)]),
]
CALL_STACKS = [
    "train.py(88): train_step;\\r\\nmodel.py(41): forward;\\r\\ntorch/nn/modules/module.py(1527)"
    ": _call_impl;\\r\\ntorch/nn/functional.py(2546): layer_norm",
    "train.py(88): train_step;\\r\\nmodel.py(57): forward;\\r\\ntorch/nn/modules/linear.py(114)"
    ": forward",
    "train.py(91): train_step;\\r\\ntorch/_tensor.py(492): backward;\\r\\ntorch/autograd/"
    "__init__.py(251): backward",
    "train.py(95): train_step;\\r\\ntorch/optim/optimizer.py(373): wrapper;\\r\\ntorch/optim/"
    "adamw.py(184): step;\\r\\ntorch/optim/adamw.py(335): adamw",
    "train.py(80): train_step;\\r\\ndata.py(23): to_device;\\r\\ntorch_npu/utils/"
    "tensor_methods.py(57): _npu",
    "a.py(1): f;\\r\\nb.py(2): g",
]
PY_PID = 4242
CANN_PID = 3170820480
HW_PID = 3170820512
OV_PID = 3170820544


def trace_view(target, seed, stats):
    """Yield the text of a torch_npu trace_view.json of at most `target` bytes."""
    rng = random.Random(seed)
    tid = PY_PID
    meta = []
    for pid, name, label, sort in ((PY_PID, "Python", "CPU", 0), (CANN_PID, "CANN", "CPU", 1),
                                   (HW_PID, "Ascend Hardware", "NPU", 2),
                                   (OV_PID, "Overlap Analysis", "NPU", 3)):
        meta.append(f'{{"ph": "M", "name": "process_name", "pid": {pid}, "tid": 0, '
                    f'"args": {{"name": "{name}"}}}}')
        meta.append(f'{{"ph": "M", "name": "process_labels", "pid": {pid}, "tid": 0, '
                    f'"args": {{"labels": "{label}"}}}}')
        meta.append(f'{{"ph": "M", "name": "process_sort_index", "pid": {pid}, "tid": 0, '
                    f'"args": {{"sort_index": {sort}}}}}')
    for pid, t, name in ((PY_PID, tid, f"Thread {tid}"), (CANN_PID, tid, f"Thread {tid}"),
                         (HW_PID, 2, "Stream 2"), (OV_PID, 0, "Computing"),
                         (OV_PID, 1, "Communication"), (OV_PID, 2, "Communication(Not Overlapped)"),
                         (OV_PID, 3, "Free")):
        meta.append(f'{{"ph": "M", "name": "thread_name", "pid": {pid}, "tid": {t}, '
                    f'"args": {{"name": "{name}"}}}}')
        meta.append(f'{{"ph": "M", "name": "thread_sort_index", "pid": {pid}, "tid": {t}, '
                    f'"args": {{"sort_index": {t}}}}}')
    header = "[" + ", ".join(meta)
    size = len(header)
    yield header
    t = 1_736_408_883_688_177_930     # ns since the epoch
    hw = t
    ops = weighted(NPU_OPS)
    seq = conn = 0
    task_id = 0
    step = 0
    n_fw = n_rt = n_dev = n_flow = n_ov = 0
    reserve = 3 * 300 + 4              # one step event, two overlap events, "]\n"
    done = False
    ov_end = hw                        # end of the last Computing span

    def overlap(lo, hi):
        """Computing [lo, hi) and the Free gap before it."""
        nonlocal ov_end
        out = []
        if lo > ov_end:
            out.append(f'{{"ph": "X", "name": "Free", "pid": {OV_PID}, "tid": 3, '
                       f'"ts": "{ns_us(ov_end)}", "dur": {ns_us(lo - ov_end)}}}')
        out.append(f'{{"ph": "X", "name": "Computing", "pid": {OV_PID}, "tid": 0, '
                   f'"ts": "{ns_us(lo)}", "dur": {ns_us(hi - lo)}}}')
        ov_end = hi
        return out

    while not done:
        step += 1
        step_ts = t
        t += rng.randint(5_000, 20_000)
        parts, plen = [], 0
        span = None                    # [lo, hi] of device time since the last overlap events
        nops = rng.randint(400, 700)
        for i in range(nops):
            name, _, api, dims, types, tasks = rng.choice(ops)
            seq += 1
            conn += 1
            op_ts = t
            acl_ts = t + rng.randint(3_000, 8_000)
            launch_ts = acl_ts + rng.randint(2_000, 6_000)
            launch_dur = rng.randint(4_000, 12_000)
            acl_dur = launch_ts + launch_dur - acl_ts + rng.randint(1_000, 4_000)
            dur = acl_ts + acl_dur - op_ts + rng.randint(2_000, 6_000)
            fid = f'"{op_ts}"' if seq % 2 else str(op_ts)   # string, or a number > 2^53
            ev = [
                f'{{"ph": "X", "name": "{name}", "pid": {PY_PID}, "tid": {tid}, '
                f'"ts": "{ns_us(op_ts)}", "dur": {ns_us(dur)}, "cat": "cpu_op", "args": '
                f'{{"Sequence number": {seq}, "Fwd thread id": 0, "Input Dims": "{dims}", '
                f'"Input type": "{types}", "Call stack": "{rng.choice(CALL_STACKS)}"}}}}',
                f'{{"ph": "X", "name": "AscendCL@{api}", "pid": {CANN_PID}, "tid": {tid}, '
                f'"ts": "{ns_us(acl_ts)}", "dur": {ns_us(acl_dur)}, "args": {{"Thread Id": '
                f'{tid}, "Mode": 1, "level": "acl", "id": {seq}, "item_id": "{api}"}}}}',
                f'{{"ph": "X", "name": "Node@launch", "pid": {CANN_PID}, "tid": {tid}, '
                f'"ts": "{ns_us(launch_ts)}", "dur": {ns_us(launch_dur)}, "args": {{"Thread Id"'
                f': {tid}, "Mode": 1, "level": "node", "id": {seq}, "item_id": "{tasks[0][0]}", '
                f'"connection_id": {conn}}}}}',
                f'{{"ph": "s", "bp": "e", "name": "async_npu", "id": {fid}, "pid": {PY_PID}, '
                f'"tid": {tid}, "ts": "{ns_us(op_ts)}", "cat": "async_npu"}}',
                f'{{"ph": "s", "bp": "e", "name": "HostToDevice", "id": "{conn}", '
                f'"pid": {CANN_PID}, "tid": {tid}, "ts": "{ns_us(launch_ts)}", '
                f'"cat": "HostToDevice"}}',
            ]
            ks = max(hw, launch_ts + rng.randint(5_000, 15_000))
            lo = ks
            for j, (task, ttype, dlo, dhi) in enumerate(tasks):
                task_id = (task_id + 1) % 65536
                ticks = rng.randint(dlo * 16, dhi * 16)       # 1/16 ns ticks
                d7 = ticks * 625                                  # in 1e-7 us
                kdur = f"{d7 // 10_000_000}.{d7 % 10_000_000:07d}".rstrip("0").rstrip(".")
                ev.append(f'{{"ph": "X", "name": "{task}", "pid": {HW_PID}, "tid": 2, '
                          f'"ts": "{ns_us(ks)}", "dur": {kdur}, "args": {{"Model Id": '
                          f'4294967295, "Task Type": "{ttype}", "Physic Stream Id": 2, '
                          f'"Task Id": {task_id}, "Batch Id": 0, "Subtask Id": 4294967295, '
                          f'"connection_id": {conn}}}}}')
                if j == 0:
                    ev.append(f'{{"ph": "f", "bp": "e", "name": "async_npu", "id": {fid}, '
                              f'"pid": {HW_PID}, "tid": 2, "ts": "{ns_us(ks)}", '
                              f'"cat": "async_npu"}}')
                    ev.append(f'{{"ph": "f", "bp": "e", "name": "HostToDevice", "id": "{conn}",'
                              f' "pid": {HW_PID}, "tid": 2, "ts": "{ns_us(ks)}", '
                              f'"cat": "HostToDevice"}}')
                ks += (ticks + 15) // 16 + rng.randint(500, 2_000)
            hw = ks
            span = [lo, hw] if span is None else [span[0], hw]
            t = op_ts + dur + rng.randint(1_000, 5_000)
            if i % 16 == 15:
                ev += overlap(*span)
                span = None
            group = ", ".join(ev)
            if size + plen + len(group) + 2 + reserve > target:
                done = True
                break
            parts.append(group)
            plen += len(group) + 2
            n_fw += 1
            n_rt += 2
            n_dev += len(tasks)
            n_flow += 4
            n_ov += len(ev) - 5 - len(tasks) - 2
        if not parts:
            step -= 1
            break
        if span is not None:
            tail = overlap(*span)
            n_ov += len(tail)
            parts.append(", ".join(tail))
        t += rng.randint(5_000, 20_000)
        step_ev = (f'{{"ph": "X", "name": "ProfilerStep#{step}", "pid": {PY_PID}, "tid": {tid}, '
                   f'"ts": "{ns_us(step_ts)}", "dur": {ns_us(t - step_ts)}, "cat": "cpu_op", '
                   f'"args": {{"Sequence number": -1, "Fwd thread id": 0}}}}')
        chunk = ", " + step_ev + ", " + ", ".join(parts)
        n_fw += 1
        size += len(chunk)
        yield chunk
        t += rng.randint(50_000, 200_000)
    stats.update(steps=step, framework=n_fw, runtime=n_rt, device=n_dev, flows=n_flow,
                 metadata=len(meta), other=n_ov)
    yield "]\n"


GENERATORS = {"kineto": kineto, "trace_view": trace_view}


# ---- files ------------------------------------------------------------------------------------

def parse_size(s):
    """'2G', '200M', '512k', '1.5GiB' or a byte count -> bytes (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", s, re.I)
    if not m:
        raise ValueError(f"bad size {s!r} (e.g. 200M, 2G)")
    return int(float(m.group(1)) * (1 << (10 * " kmgt".index(m.group(2).lower() or " "))))


def size_label(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def base_family(family):
    return "kineto" if family == "kineto_gz" else family


def paths(wd, family, target):
    d = os.path.join(wd, f"{family}-{size_label(target)}")
    return os.path.join(d, FILE_NAMES[family]), os.path.join(d, "gen.json")


def existing(wd, family, target):
    """The description of a reusable generated file, else None."""
    path, meta_path = paths(wd, family, target)
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        if (meta.get("generator") == GEN_VERSION and meta.get("target") == target
                and meta.get("seed") == SEEDS[base_family(family)]
                and os.path.getsize(path) == meta.get("file_bytes")):
            return meta
    except (OSError, ValueError):
        pass
    return None


def generate(wd, families, target):
    """Write the files of `families` (same base generator) in one streaming pass."""
    base = base_family(families[0])
    seed = SEEDS[base]
    outs = []
    t0 = time.monotonic()
    try:
        for fam in families:
            path, _ = paths(wd, fam, target)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            raw = open(path + ".part", "wb")
            sink = (gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL,
                                  mtime=0) if fam.endswith("_gz") else raw)
            outs.append((fam, path, raw, sink))
        stats = {}
        total = 0
        for chunk in GENERATORS[base](target, seed, stats):
            data = chunk.encode("ascii")
            total += len(data)
            for _, _, _, sink in outs:
                sink.write(data)
        for _, _, raw, sink in outs:
            if sink is not raw:
                sink.close()
            raw.close()
    except BaseException:
        for _, path, raw, _ in outs:
            raw.close()
            try:
                os.unlink(path + ".part")
            except OSError:
                pass
        raise
    secs = time.monotonic() - t0
    metas = []
    for fam, path, _, _ in outs:
        os.replace(path + ".part", path)
        meta = {"generator": GEN_VERSION, "family": fam, "target": target, "seed": seed,
                "bytes": total, "file_bytes": os.path.getsize(path), "events": stats,
                "seconds": round(secs, 1)}
        with open(paths(wd, fam, target)[1], "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
        metas.append(meta)
    print(f"import_bench: generated {' + '.join(families)} ({total / MB:.1f} MB) in {secs:.1f} s",
          file=sys.stderr)
    return metas


def prepare(wd, families, target):
    """{family: (path, meta)}, generating what is missing."""
    todo = [f for f in families if existing(wd, f, target) is None]
    need = sum(target if f != "kineto_gz" else target // 6 for f in todo)
    free = shutil.disk_usage(wd).free
    if need > free:
        print(f"import_bench: {wd}: {free / MB:.0f} MB free, the traces need about "
              f"{need / MB:.0f} MB", file=sys.stderr)
        raise SystemExit(2)
    for base in ("kineto", "trace_view"):
        group = [f for f in todo if base_family(f) == base]
        if group:
            generate(wd, group, target)
    return {f: (paths(wd, f, target)[0], existing(wd, f, target)) for f in families}


def mix(meta):
    ev = meta["events"]
    x = ev["framework"] + ev["runtime"] + ev["device"]
    return (f"{ev['steps']} steps, {x:,} X events (framework {100 * ev['framework'] / x:.0f}%, "
            f"runtime {100 * ev['runtime'] / x:.0f}%, device {100 * ev['device'] / x:.0f}%), "
            f"{ev['flows']:,} flow, {ev['metadata']} metadata, {ev['other']:,} other events")


# ---- measurement ------------------------------------------------------------------------------

def remove_db(db):
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(db + suffix)
        except FileNotFoundError:
            pass


def measure(cli, path, wd, family, reps):
    """[(seconds, max RSS KiB, JSON)] of `reps` imports of `path`."""
    db = os.path.join(wd, f"{family}.db")
    tf = os.path.join(wd, f"{family}.time")
    runs = []
    try:
        for _ in range(reps):
            remove_db(db)
            cmd = [cli, "import", path, "-o", db, "--json"]
            p = subprocess.run([TIME, "-f", "%e %M", "-o", tf] + cmd,
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(f"import_bench: {' '.join(cmd)}: exit {p.returncode}\n{p.stderr}",
                      file=sys.stderr)
                raise SystemExit(2)
            with open(tf) as f:
                lines = [ln for ln in f.read().splitlines() if ln.strip()]
            try:
                secs, rss = lines[-1].split()
                out = json.loads(p.stdout)
                runs.append((float(secs), int(rss), out if isinstance(out, dict) else {}))
            except (IndexError, ValueError) as e:
                print(f"import_bench: {' '.join(cmd)}: cannot read its timing or JSON ({e})\n"
                      f"stdout: {p.stdout[:2000]}\nstderr: {p.stderr[:2000]}", file=sys.stderr)
                raise SystemExit(2)
            print(f"import_bench: {family}: {float(secs):.2f} s, {int(rss) / 1024:.0f} MB",
                  file=sys.stderr)
    finally:
        remove_db(db)
        if os.path.exists(tf):
            os.unlink(tf)
    return runs


def count(v):
    """A count from the import's JSON, with thousands separators; "?" when absent."""
    return f"{v:,}" if isinstance(v, int) else "?" if v is None else str(v)


def table(head, rows):
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    print()


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def main():
    ap = argparse.ArgumentParser(description="Time and peak RSS of cannprof import on large "
                                             "synthetic traces.")
    ap.add_argument("--cli", default=os.environ.get("CANNPROF")
                    or os.path.join(ROOT, "build", "cannprof"),
                    help="cannprof binary ($CANNPROF, else build/cannprof)")
    ap.add_argument("--size", default="2G", help="size of each trace, uncompressed (2G)")
    ap.add_argument("--families", default=" ".join(FAMILIES),
                    help=f"trace families (\"{' '.join(FAMILIES)}\")")
    ap.add_argument("--reps", type=int, default=3, help="imports per file (3)")
    ap.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it (reused on a "
                    "rerun); default: a temporary folder deleted at the end")
    ap.add_argument("--generate-only", action="store_true",
                    help="write the traces (needs --keep), print paths and sizes, no import")
    a = ap.parse_args()
    try:
        target = parse_size(a.size)
    except ValueError as e:
        ap.error(str(e))
    families = list(dict.fromkeys(a.families.replace(",", " ").split()))
    bad = [f for f in families if f not in FAMILIES]
    if bad or not families:
        ap.error(f"unknown families {bad}; choose from {' '.join(FAMILIES)}")
    if target < MB:
        ap.error("--size must be at least 1M")
    if a.reps < 1:
        ap.error("--reps must be >= 1")
    if a.generate_only and not a.keep:
        ap.error("--generate-only needs --keep DIR (a temporary folder would be deleted)")
    if not a.generate_only:
        a.cli = os.path.abspath(a.cli)
        if not os.access(a.cli, os.X_OK):
            ap.error(f"{a.cli} is not executable (set CANNPROF or --cli)")
        if not os.access(TIME, os.X_OK):
            ap.error(f"{TIME} is missing (Debian package 'time')")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    holder = None
    if a.keep:
        wd = os.path.abspath(a.keep)
        os.makedirs(wd, exist_ok=True)
    else:
        holder = tempfile.TemporaryDirectory(prefix="cannprof-import-bench-")
        wd = holder.name
    try:
        files = prepare(wd, families, target)
        if a.generate_only:
            for fam, (path, meta) in files.items():
                gz = (f" ({meta['file_bytes']:,} bytes compressed)"
                      if meta["file_bytes"] != meta["bytes"] else "")
                print(f"{path}\t{meta['bytes']:,} bytes{gz}\t{mix(meta)}")
            return 0
        return report(a, wd, files, target)
    finally:
        if holder is not None:
            holder.cleanup()


def report(a, wd, files, target):
    version = subprocess.run([a.cli, "--version"], capture_output=True, text=True).stdout.strip()
    print("# cannprof import: throughput and peak RSS on synthetic traces\n")
    print(f"{version or a.cli}; {os.cpu_count()} cores; traces of {size_label(target)} "
          f"(uncompressed) in {wd}{' (kept)' if a.keep else ' (temporary)'}; {a.reps} imports "
          f"per file; `{os.path.basename(a.cli)} import FILE -o OUT.db --json` under "
          f"`{TIME} -f \"%e %M\"`.\n")
    sys.stdout.flush()
    rows, missed, notes = [], [], []
    for fam, (path, meta) in files.items():
        runs = measure(a.cli, path, wd, fam, a.reps)
        secs = [r[0] for r in runs]
        med = statistics.median(secs)
        mbps = meta["bytes"] / MB / med if med > 0 else float("inf")
        rss = max(r[1] for r in runs) / 1024
        out = runs[-1][2]
        size = f"{meta['bytes'] / MB:.1f}"
        if meta["file_bytes"] != meta["bytes"]:
            size += f" (gz {meta['file_bytes'] / MB:.1f})"
        ok_t, ok_m = mbps >= GOAL_MBPS, rss <= GOAL_RSS_MB
        if not ok_t:
            missed.append(f"{fam}: {mbps:.1f} MB/s < {GOAL_MBPS:.0f}")
        if not ok_m:
            missed.append(f"{fam}: peak RSS {rss:.0f} MB > {GOAL_RSS_MB:.0f}")
        rows.append([fam, out.get("format", "?"), size, count(out.get("events")),
                     count(out.get("iterations")), f"{med:.2f} [{min(secs):.2f}..{max(secs):.2f}]",
                     f"{mbps:.1f}", f"{rss:.1f}", "yes" if ok_t else "**NO**",
                     "yes" if ok_m else "**NO**"])
        notes.append(f"- {fam}: generated {mix(meta)}")
    table(["family", "format", "size (MB)", "events", "iterations", "time (s) median [min..max]",
           "MB/s", "peak RSS (MB)", f">= {GOAL_MBPS:.0f} MB/s", f"<= {GOAL_RSS_MB:.0f} MB RSS"],
          rows)
    print("MB = 2^20 bytes; MB/s = uncompressed bytes / median wall time (the gzip row too); "
          "peak RSS = max over the imports.\n")
    print("\n".join(notes) + "\n")
    if missed:
        print("**Goals missed:** " + "; ".join(missed))
        return 1
    print("Goals met.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
