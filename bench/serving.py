"""Shapes that change every call: a serving loop's first pass, and generic kernels' speed.

    python bench/serving.py [--calls 40] [--out table.md]

1. The serving loop: ``--calls`` calls whose row count is drawn at random from 1..8192
   (the same draws for every peer), of rmsnorm over float16 rows of 4096 and of softmax
   over float32 rows of 32000. Each peer runs each function in a fresh process with empty
   caches (its disk cache in a new temporary folder), as a new user's program would: the
   time from the first call to the last one's completion, and how many distinct kernels
   were compiled. Peers: numbamr (default ``dynamic``) and torch.compile(dynamic=True).
2. Generic against per-shape kernels at the suite's shapes: GB/s of each (same process,
   interleaved), so that a kernel generic in its rows is seen to lose nothing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

HIDDEN, VOCAB = 4096, 32000


def draws(calls, seed=0):
    return [int(n) for n in np.random.default_rng(seed).integers(1, 8193, calls)]


# ---- one peer's serving loop, in its own process -------------------------------------------

def numbamr_loop(rows, which):
    import cupy as cp
    import numbamr as nm

    @nm.jit
    def rmsnorm(x, w):
        xf = x.astype(np.float32)
        r = xf / np.sqrt((xf * xf).mean(axis=-1, keepdims=True) + 1e-6)
        return (r * w).astype(x.dtype)

    @nm.jit
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    if which == "rmsnorm":
        fn, w = rmsnorm, cp.ones(HIDDEN, cp.float16)
        calls = [(cp.random.standard_normal((n, HIDDEN), cp.float32).astype(cp.float16), w)
                 for n in rows]
    else:
        fn = softmax
        calls = [(cp.random.standard_normal((n, VOCAB), cp.float32),) for n in rows]
    cp.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    for a in calls:
        fn(*a)
    cp.cuda.runtime.deviceSynchronize()
    return time.perf_counter() - t0, _numbamr_compiles(fn)


def _numbamr_compiles(fn):
    """Distinct kernels the function's signatures launch (each compiled once)."""
    from numbamr.runtime.compile import code_text
    codes = {code_text(k.source) for c in fn._cache.values() for k in c.lowered.kernels}
    return len(codes)


def torch_loop(rows, which):
    import torch
    torch._dynamo.config.cache_size_limit = 64

    def rmsnorm(x, w):
        xf = x.float()
        return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * w).to(x.dtype)

    def softmax(x):
        return torch.softmax(x, dim=-1)

    if which == "rmsnorm":
        fn, w = torch.compile(rmsnorm, dynamic=True), \
            torch.ones(HIDDEN, dtype=torch.float16, device="cuda")
        calls = [(torch.randn(n, HIDDEN, device="cuda").half(), w) for n in rows]
    else:
        fn = torch.compile(softmax, dynamic=True)
        calls = [(torch.randn(n, VOCAB, device="cuda"),) for n in rows]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for a in calls:
        fn(*a)
    torch.cuda.synchronize()
    return time.perf_counter() - t0, None


def child(peer, which, calls):
    seconds, compiles = (numbamr_loop if peer == "numbamr" else torch_loop)(draws(calls), which)
    print(json.dumps({"seconds": seconds, "compiles": compiles}))


def run_peer(peer, which, calls):
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NUMBAMR_CACHE_DIR=os.path.join(tmp, "numbamr"),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(tmp, "triton"))
        proc = subprocess.run([sys.executable, __file__, "--child", peer, which,
                               "--calls", str(calls)],
                              capture_output=True, text=True, env=env, timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"{peer}: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- generic against per-shape kernels at the suite's shapes ---------------------------------

SUITE_SHAPES = [(8192, 8192), (65536, 1024)]


def generic_vs_static(log):
    import cupy as cp
    import numbamr as nm
    from run import timeit
    import suite
    ops = suite.np_ops(np)
    rows = []
    rng = np.random.default_rng(0)
    for op in ("softmax", "layernorm", "rmsnorm", "var", "logsumexp", "zscore"):
        for shape in SUITE_SHAPES:
            x = cp.asarray(rng.standard_normal(shape, np.float32))
            params = [cp.ones(shape[1], cp.float32)] * {"layernorm": 2, "rmsnorm": 1}.get(op, 0)
            static = nm.jit(dynamic=False)(ops[op])
            generic = nm.jit(dynamic=True)(ops[op])
            out = static(x, *params)
            nbytes = x.nbytes + sum(p.nbytes for p in params) + \
                sum(o.nbytes for o in (out if isinstance(out, tuple) else (out,)))
            assert generic.lower(x, *params).generic, op
            got = cp.asnumpy(generic(x, *params))
            assert np.array_equal(got, cp.asnumpy(out)), f"{op} {shape}: results differ"
            ts, tg = [], []
            for _ in range(3):              # interleaved
                ts.append(timeit(lambda: static(x, *params)))
                tg.append(timeit(lambda: generic(x, *params)))
            s, g = nbytes / min(ts) / 1e9, nbytes / min(tg) / 1e9
            rows.append((op, shape, s, g))
            log(f"{op:10s} {shape[0]} x {shape[1]}: per-shape {s:.0f} GB/s, generic {g:.0f} "
                f"GB/s ({100 * (g / s - 1):+.1f}%)")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--child", nargs=2, metavar=("PEER", "FUNCTION"))
    ap.add_argument("--out")
    ap.add_argument("--skip-generic", action="store_true")
    args = ap.parse_args()
    if args.child:
        return child(*args.child, args.calls)
    lines = [f"Serving loop: {args.calls} calls, rows random in 1..8192, a fresh process and "
             "caches per peer and function", "",
             "| function | numbamr first pass (s) | kernels compiled "
             "| torch.compile(dynamic=True) (s) |",
             "|---|---|---|---|"]
    for name in ("rmsnorm", "softmax"):
        ours = run_peer("numbamr", name, args.calls)
        try:
            peer = f"{run_peer('torch', name, args.calls)['seconds']:.2f}"
        except Exception as e:      # a missing peer is reported, not fatal
            print(f"torch.compile: {e}", file=sys.stderr)
            peer = "-"
        lines.append(f"| {name} | {ours['seconds']:.2f} | {ours['compiles']} | {peer} |")
    print("\n".join(lines), flush=True)
    if not args.skip_generic:
        lines += ["", "Kernels generic in their rows against kernels for each shape (GB/s)", "",
                  "| op | shape | per shape | generic | difference |", "|---|---|---|---|---|"]
        for op, shape, s, g in generic_vs_static(print):
            lines.append(f"| {op} | {shape[0]} x {shape[1]} | {s:.0f} | {g:.0f} | "
                         f"{100 * (g / s - 1):+.1f}% |")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
