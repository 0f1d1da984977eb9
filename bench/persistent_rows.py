"""A study, not part of the library: layernorm over rows of 65536 floats as persistent
clusters that keep the weights in registers and stream the rows into shared memory by bulk
copy (``cp.async.bulk``), several rows ahead.

The library now generates this layout (``persistent=N``, its default for the cell); the
study stays as a hand-written reference to time it against. Here a cluster of 8 blocks of
256 threads loops over rows c, c + G, ...; each block keeps its 8192 columns of `w` and
`b` in registers (64 a thread, loaded once), and its thread 0 keeps S rows' segments of
`x` in flight into shared memory (32 KB a row), each completing on its own mbarrier. A
thread copies its 32 values from shared memory to registers, and the stage is refilled
with the row S iterations ahead as soon as the block's first barrier shows every thread
has read it. The two exchanges are the library's (``st.async`` to every block's shared
memory, counted off an mbarrier), armed again each row and waited on by phase parity.

    python bench/persistent_rows.py [--variants "8:256:2:2:0;4:512:1:3:0"] [--rounds 2]

(a variant is split:threads:min_blocks:stages:clusters, clusters 0 for as many as fit)

Checks every variant against float64 NumPy, then times it beside the library's kernel, the
library's z-score at the same shape and the copy ceiling, in one process.
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

ROWS, COLS, VEC = 1024, 65536, 4
EPS = 1e-5


# ---- the kernel's source ------------------------------------------------------------------

class Shape:
    """A cluster of ``split`` blocks of ``threads`` threads a row; each thread holds
    ``chunks`` 16-byte chunks of the row."""

    def __init__(self, split, threads):
        self.split, self.threads = split, threads
        self.seg = COLS // split
        self.chunks = self.seg // (threads * VEC)
        assert self.chunks * threads * VEC * split == COLS


def _sum_tree(names):
    return " + ".join(names)


def kernel_source(shape, stages, clusters, weights_in_registers=True):
    """Source of ``lnp(x, w, b, out0)`` for a grid of ``clusters`` clusters."""
    S, G, K, P, T = stages, clusters, shape.chunks, shape.split, shape.threads
    SEG = shape.seg
    L = []
    a = L.append
    a("import math")
    a("from numba import cuda")
    a("from numba.types import int64, uint64, float32, float64")
    a("from numbamr.runtime.intrinsics import vload, vstore, cluster_arrive, cluster_wait, "
      "xsend")
    a("from numbamr.runtime.intrinsics import mbar_init, mbar_expect, mbar_wait, "
      "xbar_wait_parity, bulk_load, init_fence, proxy_fence")
    a("")
    a("")
    a("def lnp(x, w, b, out0):")
    a("    xs = cuda.shared.array(0, float32)  # S stages of the block's row segment")
    a(f"    tbar = cuda.shared.array({S}, uint64)  # one mbarrier a stage")
    a("    xbar = cuda.shared.array(2, uint64)  # one mbarrier an exchange")
    a(f"    xsm = cuda.shared.array({2 * P}, float64)")
    a(f"    ssum0 = cuda.shared.array({T // 32}, float32)")
    a(f"    ssum1 = cuda.shared.array({T // 32}, float32)")
    a("    tid = int64(cuda.threadIdx.x)")
    a("    bid = int64(cuda.blockIdx.x)")
    a(f"    seg = bid % {P}")
    a(f"    cid = bid // {P}")
    a(f"    seg_base = seg * {SEG}")
    a(f"    mine = ({ROWS} - cid + {G - 1}) // {G}")
    a("    if tid == 0:")
    for s in range(S):
        a(f"        mbar_init(tbar, {s}, 1)")
    a("        mbar_init(xbar, 0, 1)")
    a("        mbar_init(xbar, 1, 1)")
    a("        init_fence()")
    a(f"        mbar_expect(xbar, 0, {8 * P})")
    a(f"        mbar_expect(xbar, 1, {8 * P})")
    for s in range(S):
        a(f"        if {s} < mine:")
        _fill(a, shape, "            ", s, f"cid + {s * G}")
    a("    cluster_arrive()")
    if weights_in_registers:
        for k in range(K):
            q = f"seg_base + tid * {VEC} + {k * T * VEC}"
            a(f"    w{k}_0, w{k}_1, w{k}_2, w{k}_3 = vload(w, {q}, 4)")
            a(f"    b{k}_0, b{k}_1, b{k}_2, b{k}_3 = vload(b, {q}, 4)")
    a("    cluster_wait()")
    a("    for i in range(mine):")
    a(f"        s = i % {S}")
    a(f"        row = cid + i * {G}")
    a(f"        base = row * {COLS} + seg_base")
    a(f"        mbar_wait(tbar, s, (i // {S}) & 1)")
    xs_ = [f"x{k}_{j}" for k in range(K) for j in range(VEC)]
    for k in range(K):
        a(f"        x{k}_0, x{k}_1, x{k}_2, x{k}_3 = "
          f"vload(xs, s * {SEG} + tid * {VEC} + {k * T * VEC}, 4)")
    a(f"        acc = {_sum_tree(xs_)}")
    _block_sum(a, T, "acc", "ssum0", "tot")
    a("        if tid == 0:")
    a(f"            if i + {S} < mine:")
    a("                proxy_fence()")
    _fill(a, shape, "                ", "s", f"cid + (i + {S}) * {G}")
    a(f"            xsend(xsm, seg, tot, xbar, 0, {P})")
    a("        xbar_wait_parity(xbar, 0, i & 1)")
    a(f"        mean = ({_sum_tree([f'float32(xsm[{r}])' for r in range(P)])}) / "
      f"float32({COLS}.0)")
    a("        if tid == 0:")
    a(f"            mbar_expect(xbar, 0, {8 * P})")
    for n in xs_:
        a(f"        {n} = {n} - mean")
    a(f"        acc = {_sum_tree([f'{n} * {n}' for n in xs_])}")
    _block_sum(a, T, "acc", "ssum1", "tot1")
    a("        if tid == 0:")
    a(f"            xsend(xsm, {P} + seg, tot1, xbar, 1, {P})")
    a("        xbar_wait_parity(xbar, 1, i & 1)")
    a(f"        var = ({_sum_tree([f'float32(xsm[{P + r}])' for r in range(P)])}) / "
      f"float32({COLS}.0)")
    a("        if tid == 0:")
    a(f"            mbar_expect(xbar, 1, {8 * P})")
    a(f"        r = float32(1.0) / math.sqrt(var + float32({EPS}))")
    for k in range(K):
        q = f"seg_base + tid * {VEC} + {k * T * VEC}"
        if not weights_in_registers:
            a(f"        w{k}_0, w{k}_1, w{k}_2, w{k}_3 = vload(w, {q}, 4)")
            a(f"        b{k}_0, b{k}_1, b{k}_2, b{k}_3 = vload(b, {q}, 4)")
        vals = ", ".join(f"x{k}_{j} * r * w{k}_{j} + b{k}_{j}" for j in range(VEC))
        a(f"        vstore(out0, base + tid * {VEC} + {k * T * VEC}, ({vals}))")
    return "\n".join(L) + "\n"


def _fill(a, shape, pad, stage, row):
    """Lines that start the bulk copy of ``row``'s segment into ``stage`` (thread 0)."""
    SEG = shape.seg
    a(f"{pad}mbar_expect(tbar, {stage}, {SEG * 4})")
    piece = 2048                                    # floats a copy: 8 KB
    for p in range(SEG // piece):
        a(f"{pad}bulk_load(xs, {stage} * {SEG} + {p * piece}, x, "
          f"({row}) * {COLS} + seg_base + {p * piece}, {piece * 4}, tbar, {stage})")


def _block_sum(a, threads, acc, smem, out):
    for off in (16, 8, 4, 2, 1):
        a(f"        {acc} = {acc} + cuda.shfl_xor_sync(0xFFFFFFFF, {acc}, {off})")
    a("        if tid % 32 == 0:")
    a(f"            {smem}[tid // 32] = {acc}")
    a("        cuda.syncthreads()")
    a(f"        {out} = {_sum_tree([f'{smem}[{i}]' for i in range(threads // 32)])}")


# ---- compile, launch, time ----------------------------------------------------------------

CU_FUNC_ATTRIBUTE_NUM_REGS, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 4, 3
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14


class Study:
    """One variant compiled and ready to launch; ``clusters`` 0 means as many as the GPU
    holds at once."""

    def __init__(self, shape, stages, clusters, weights_in_registers, min_blocks):
        from numbamr.runtime import binary, cudadriver
        from numbamr.runtime.compile import jit_kernel
        from numbamr.runtime.launch import _DriverLaunch, allow_dynamic_shared
        drv = cudadriver.driver()
        shared = stages * shape.seg * 4
        handle = None
        fits = clusters
        for attempt in range(2):        # the second time with the cluster count found
            src = kernel_source(shape, stages, clusters or 1, weights_in_registers)
            kernel, _ = jit_kernel(src, "lnp", False, (shape.threads, min_blocks),
                                   pointer_dtypes=[np.float32] * 4)
            lib = next(iter(kernel.overloads.values()))._codelibrary
            handle = cudadriver.load_function(binary.image_bytes(lib.get_cubin()),
                                              lib._entry_name)
            attrs = [(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)] \
                if shape.split > 8 else []
            for attr, value in attrs + [(11, shape.split), (12, 1), (13, 1)]:
                assert drv.cuFuncSetAttribute(ctypes.c_void_p(handle), attr, value) == 0
            allow_dynamic_shared(handle, shared)
            fits = self._max_clusters(drv, handle, shape, shared)
            if clusters:
                break
            clusters = fits
        self.label = (f"split={shape.split} threads={shape.threads} S={stages} G={clusters} "
                      f"{'w,b in registers' if weights_in_registers else 'w,b loaded a row'} "
                      f"min_blocks={min_blocks}")
        self.regs, self.local = (self._attr(drv, handle, a) for a in
                                 (CU_FUNC_ATTRIBUTE_NUM_REGS, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES))
        self.fits = fits
        self.launch = _DriverLaunch(handle, 4, clusters * shape.split, shape.threads, shared)

    @staticmethod
    def _max_clusters(drv, handle, shape, shared):
        from numbamr.runtime import cudadriver
        cfg = cudadriver.LaunchConfig(grid=(shape.split * 64, 1, 1), block=(shape.threads, 1, 1),
                                      shared=shared, nattrs=0)
        n = ctypes.c_int()
        err = drv.cuOccupancyMaxActiveClusters(ctypes.byref(n), ctypes.c_void_p(handle),
                                               ctypes.byref(cfg))
        return n.value if err == 0 else -err

    @staticmethod
    def _attr(drv, handle, attr):
        v = ctypes.c_int()
        drv.cuFuncGetAttribute(ctypes.byref(v), attr, ctypes.c_void_p(handle))
        return v.value

    def __call__(self, x, w, b, out):
        self.launch([x.data.ptr, w.data.ptr, b.data.ptr, out.data.ptr], 0)
        return out


def parse_variants(text):
    """``split:threads:min_blocks:stages:clusters[:loaded]`` items, ``;``-separated
    (clusters 0: as many as fit at once)."""
    out = []
    for item in filter(None, text.split(";")):
        f = item.split(":")
        split, threads, mb, stages, g = map(int, f[:5])
        out.append((Shape(split, threads), stages, g, len(f) < 6, mb))
    return out


def main():
    import cupy
    import numbamr
    import suite
    from run import timeit, copy_ceiling, rel_err
    p = argparse.ArgumentParser()
    p.add_argument("--variants", default="8:256:2:2:0;8:256:2:2:28;4:512:1:2:0;"
                   "4:512:1:3:0;16:256:3:2:0;16:256:3:3:0;16:128:4:3:0")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    xh = rng.standard_normal((ROWS, COLS), dtype=np.float32) * 2 + 0.5
    wh = rng.standard_normal(COLS, dtype=np.float32)
    bh = rng.standard_normal(COLS, dtype=np.float32)
    x, w, b = (cupy.asarray(v) for v in (xh, wh, bh))
    x64 = xh.astype(np.float64)
    mu = x64.mean(-1, keepdims=True)
    ref = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + EPS) * wh + bh
    ops = suite.np_ops(np)
    lib_ln = numbamr.jit(ops["layernorm"])
    lib_z = numbamr.jit(ops["zscore"])
    nbytes = 2 * x.nbytes + w.nbytes + b.nbytes
    studies = []
    for v in parse_variants(args.variants):
        try:
            studies.append(Study(*v))
        except Exception as e:
            print(f"variant {v[0].split}:{v[0].threads} S={v[1]} G={v[2]}: {type(e).__name__}: "
                  f"{str(e)[:300]}")
    out = cupy.empty_like(x)
    print(f"library layernorm: rel err {rel_err(lib_ln(x, w, b).get(), ref):.2e}")
    for st in studies:
        out.fill(np.nan)
        err = rel_err(st(x, w, b, out).get(), ref)
        print(f"{st.label}: {st.regs} registers, {st.local} bytes local, {st.fits} clusters "
              f"fit at once, rel err {err:.2e}")
        assert err < 1e-5, st.label
    for rnd in range(args.rounds):
        print(f"-- round {rnd}: copy ceiling {copy_ceiling():.0f} GB/s")
        t = timeit(lambda: lib_ln(x, w, b))
        print(f"library layernorm: {nbytes / t / 1e9:.0f} GB/s")
        t = timeit(lambda: lib_z(x))
        print(f"library z-score: {2 * x.nbytes / t / 1e9:.0f} GB/s")
        for st in studies:
            t = timeit(lambda: st(x, w, b, out))
            print(f"{st.label}: {nbytes / t / 1e9:.0f} GB/s")


if __name__ == "__main__":
    main()
