"""numbamr functions on dask arrays across GPUs, beside dask.array running the same
numpy-style code on CuPy chunks.

    python bench/dask_bench.py --gib 64 --gpus 1,2          # dask_cuda.LocalCUDACluster
    python bench/dask_bench.py --gib 8 --ops var,softmax --impls numbamr
    python bench/dask_bench.py --simulator                   # a dry run: tiny, NumPy chunks

Three programs over a float32 array of --gib GiB, generated block by block on the GPU that
holds it (NumPy blocks in the simulator) and persisted before anything is timed:
    var       the variance of rows cut into --split chunks along the reduced axis
    softmax   softmax along that cut axis (its max and sum of exponentials span chunks)
    layernorm rows of --ln-cols, whole in every chunk, with weights and biases
Each result's first 16 rows (every column block of them) are checked against float64
NumPy first; one untimed run compiles the kernels on every worker. A time is the median of
--repeat runs of computing
the result (an output of full size is reduced to one element per block as it is made, so
that only the work itself is kept in memory). GB/s per GPU = (input bytes read once +
output bytes written once) / time / GPUs.
"""
import argparse
import logging
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if "--simulator" in sys.argv:               # before numba is imported
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    sys.setswitchinterval(1e-4)

import numpy as np  # noqa: E402

import numbamr as nm  # noqa: E402


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gib", type=float, default=64.0, help="input size in GiB (float32)")
    p.add_argument("--cols", type=int, default=1 << 20, help="row length of var/softmax")
    p.add_argument("--split", type=int, default=4, help="chunks along a var/softmax row")
    p.add_argument("--ln-cols", type=int, default=8192, help="row length of layernorm")
    p.add_argument("--chunk-mib", type=float, default=1024.0, help="size of one chunk")
    p.add_argument("--gpus", default="1,2", help="GPU counts to run on")
    p.add_argument("--ops", default="var,softmax,layernorm")
    p.add_argument("--impls", default="numbamr,dask")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--simulator", action="store_true",
                   help="a dry run on NumPy chunks in numba's CPU simulator, tiny sizes")
    args = p.parse_args()
    if args.simulator:
        if "--gib" not in sys.argv:
            args.gib = 16 * 64 * 4 / 2**30          # 16 rows of 64
        if "--cols" not in sys.argv:
            args.cols = 64
        if "--ln-cols" not in sys.argv:
            args.ln_cols = 32
        if "--chunk-mib" not in sys.argv:
            args.chunk_mib = 8 * 16 * 4 / 2**20      # 8 rows of 16
        if "--repeat" not in sys.argv:
            args.repeat = 1
    return args


# ---- the programs: numpy-style code, jitted by numbamr or run by dask.array as it is ----
def var(x):
    return x.var(axis=1)


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm(x, w, b):
    mu = x.mean(axis=1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5) * w + b


PROGRAMS = {"var": var, "softmax": softmax, "layernorm": layernorm}


def shapes(args, op):
    """(shape, chunks) of the op's input for --gib, --cols, --split and --chunk-mib."""
    cols = args.ln_cols if op == "layernorm" else args.cols
    ccols = cols if op == "layernorm" else -(-cols // args.split)
    rows = max(1, int(args.gib * 2**30 / 4 / cols))
    crows = max(1, min(rows, int(args.chunk_mib * 2**20 / 4 / ccols)))
    return (rows, cols), (crows, ccols)


def make_input(shape, chunks, xp, seed=0):
    """A dask array whose every block is generated where it is computed (on its GPU)."""
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph
    normal = da.core.normalize_chunks(chunks, shape)
    name = f"bench-input-{seed}-{shape[0]}x{shape[1]}-{chunks[0]}x{chunks[1]}"
    dsk = {}
    for i, r in enumerate(normal[0]):
        for j, c in enumerate(normal[1]):
            dsk[(name, i, j)] = (_block, xp.__name__, seed + 7919 * i + 104729 * j, (r, c))
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[])
    return da.Array(graph, name, normal, meta=xp.empty((0, 0), np.float32))


def _block(module, seed, shape):
    if module == "numpy":
        return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    import cupy
    return cupy.random.RandomState(seed).standard_normal(shape, dtype=np.float32)


def _corner(block):
    return block[:1, :1]


def shrink(y):
    """One element per block of a 2-D result (each block freed once it is made)."""
    if y.ndim < 2:
        return y
    return y.map_blocks(_corner, chunks=tuple((1,) * len(c) for c in y.chunks))


# ---- running --------------------------------------------------------------------------
JITTED = {name: nm.jit(fn) for name, fn in PROGRAMS.items()}


def run_one(op, impl, x, extra):
    """The lazy result: numbamr's function, or dask.array's own operations on the chunks."""
    fn = JITTED[op] if impl == "numbamr" else PROGRAMS[op]
    return fn(x, *extra)


def compute(client, value):
    import dask
    if client is None:
        return dask.compute(value, scheduler="sync")[0]
    return client.compute(value).result()


CHECK_ROWS = 16     # rows of the result checked (the reference runs on the host)


def check(op, impl, x, extra, client, crows):
    """The first rows of the result (of its first row-block; every column block) against
    float64 NumPy of the same rows."""
    head = x[:min(crows, CHECK_ROWS)]
    got = to_host(compute(client, run_one(op, impl, head, extra)))
    x64 = to_host(compute(client, head)).astype(np.float64)
    ref = PROGRAMS[op](x64, *[to_host(e).astype(np.float64) for e in extra])
    err = float(np.abs(got.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))
    if not err < 1e-5:
        raise SystemExit(f"{op} by {impl}: relative error {err:.3g} against float64 NumPy")
    return err


def time_op(op, impl, x, extra, client, repeat):
    compute(client, shrink(run_one(op, impl, x, extra)))       # compiles, warms
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        compute(client, shrink(run_one(op, impl, x, extra)))
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def to_host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def cluster(n, simulator):
    """A client of ``n`` workers of one GPU each (threads in the simulator), or None."""
    if simulator:
        from distributed import Client, LocalCluster
        return Client(LocalCluster(n_workers=n, threads_per_worker=1, processes=False,
                                   dashboard_address=None, silence_logs=logging.WARNING))
    from dask_cuda import LocalCUDACluster
    from distributed import Client
    devices = ",".join(str(i) for i in range(n))
    return Client(LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices, n_workers=n,
                                   threads_per_worker=1, dashboard_address=None,
                                   silence_logs=logging.WARNING))


def bench(args, n, ops, impls, xp):
    from distributed import wait
    client = cluster(n, args.simulator)
    rows = []
    try:
        for op in ops:
            shape, chunks = shapes(args, op)
            x = client.persist(make_input(shape, chunks, xp))
            wait(x)
            extra = ()
            if op == "layernorm":
                rng = np.random.default_rng(1)
                extra = tuple(xp.asarray(rng.standard_normal(shape[1]).astype(np.float32))
                              for _ in range(2))
            moved = x.nbytes * (1 if op == "var" else 2)
            for impl in impls:
                err = None if args.no_check else check(op, impl, x, extra, client, chunks[0])
                t = time_op(op, impl, x, extra, client, args.repeat)
                rows.append((op, impl, n, shape, chunks, t, moved / t / n / 1e9, err))
                print(_line(rows[-1]), flush=True)
            del x
    finally:
        client.close()
    return rows


def _line(row):
    op, impl, n, shape, chunks, t, gbs, err = row
    checked = "" if err is None else f"  (checked: {err:.1e})"
    return (f"{op:<10} {impl:<8} {n} GPU(s)  {shape[0]}x{shape[1]} in {chunks[0]}x{chunks[1]}"
            f"  {t * 1e3:10.1f} ms  {gbs:9.4g} GB/s per GPU{checked}")


def main():
    args = parse()
    ops = args.ops.split(",")
    impls = args.impls.split(",")
    if args.simulator:
        xp, counts = np, [int(c) for c in args.gpus.split(",")]
    else:
        import cupy as xp
        have = xp.cuda.runtime.getDeviceCount()
        counts = [int(c) for c in args.gpus.split(",") if int(c) <= have]
        try:
            import dask_cuda  # noqa: F401
        except ImportError:
            raise SystemExit("the GPU runs need dask_cuda (pip install dask-cuda)")
    print(f"float32 inputs of {args.gib:g} GiB, chunks of {args.chunk_mib:g} MiB, "
          f"{'NumPy chunks in the simulator' if args.simulator else 'CuPy chunks'}")
    for n in counts:
        bench(args, n, ops, impls, xp)


if __name__ == "__main__":
    main()
