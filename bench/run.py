"""Run the suite for numbamr and its peers in one process on the GPU; write RESULTS.md.

    python bench/run.py                      # everything
    python bench/run.py --impls numbamr,torch --ops softmax,var --out /tmp/r.md
    python bench/run.py --launch-only        # host time per call only
    python bench/run.py --shapes 4096x4096,1000x3001 --impls numbamr,torch.compile  # any shape
    python bench/run.py --impls numbamr,numbamr.autotune,torch.compile   # tuned beside default

Every result is checked against float64 NumPy before it is timed. Time per call is the
median over trials of (wall time of N back-to-back calls + one synchronize) / N; the copy
ceiling is a device-to-device copy measured the same way in the same run.
"""
import argparse
import datetime
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import suite  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def sync_all():
    import cupy
    cupy.cuda.runtime.deviceSynchronize()


def timeit(fn, target_s=0.15, trials=3, wait=None):
    """Median seconds per call of ``fn`` (device work included): N back-to-back calls, then
    one wait for the device (``wait`` first, for frameworks with their own streams)."""
    def done():
        if wait is not None:
            wait()
        sync_all()
    fn()
    done()
    t0 = time.perf_counter()
    fn()
    done()
    one = max(time.perf_counter() - t0, 1e-6)
    n = max(3, min(2000, int(target_s / trials / one)))
    samples = []
    for _ in range(trials):
        done()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        done()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def copy_ceiling():
    import cupy
    a = cupy.ones(1 << 29, cupy.float32)          # 2 GiB
    b = cupy.empty_like(a)
    t = timeit(lambda: b.__setitem__(Ellipsis, a))
    return 2 * a.nbytes / t / 1e9


def rel_err(got, ref):
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def to_host(a):
    if hasattr(a, "get"):
        return a.get()
    if hasattr(a, "detach"):
        return a.detach().float().cpu().numpy()
    return np.asarray(a)


def flat_outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


class Impl:
    """A framework: how to move arrays to it and how to build a callable for an op."""

    def __init__(self, name):
        self.name = name

    def prepare(self, op, dtype, x, params):
        raise NotImplementedError


class Numbamr(Impl):
    def __init__(self, name, autotune=False):
        super().__init__(name)
        self.autotune = autotune

    def prepare(self, op, dtype, x, params):
        import cupy
        import numbamr as nm
        fn = suite.np_ops(np)[op]
        if dtype == "float16":
            fn = suite.half_wrap(fn)
        jf = nm.jit(fn, autotune=self.autotune)    # autotune: the first (checked) call tunes
        args = [cupy.asarray(x)] + [cupy.asarray(p) for p in params]
        self.kernels = len(jf.lower(*args).kernels)
        return lambda: jf(*args)


class CuPy(Impl):
    def prepare(self, op, dtype, x, params):
        import cupy
        fn = suite.np_ops(cupy)[op]
        if dtype == "float16":
            fn = suite.half_wrap(fn)
        args = [cupy.asarray(x)] + [cupy.asarray(p) for p in params]
        return lambda: fn(*args)


class Torch(Impl):
    def __init__(self, name, compiled):
        super().__init__(name)
        self.compiled = compiled

    def prepare(self, op, dtype, x, params):
        import torch
        fn = suite.torch_ops()[op]
        if dtype == "float16":
            fn = suite.torch_half(fn)
        if self.compiled:
            torch._dynamo.reset()
            fn = torch.compile(fn)
        args = [torch.as_tensor(x, device="cuda")] + [torch.as_tensor(p, device="cuda")
                                                      for p in params]
        return lambda: fn(*args)


class Jax(Impl):
    def prepare(self, op, dtype, x, params):
        import jax
        fn = suite.jax_ops()[op]
        if dtype == "float16":
            fn = suite.half_wrap(fn)
        jf = jax.jit(fn)
        args = [jax.device_put(x)] + [jax.device_put(p) for p in params]
        self.last = None

        def call():         # asynchronous, like the others; timeit waits once per batch
            self.last = jf(*args)
            return self.last
        return call

    def wait(self):
        import jax
        if self.last is not None:
            jax.block_until_ready(self.last)


IMPLS = {"numbamr": lambda: Numbamr("numbamr"),
         "numbamr.autotune": lambda: Numbamr("numbamr autotune", autotune=True),
         "torch": lambda: Torch("torch eager", False),
         "torch.compile": lambda: Torch("torch.compile", True), "cupy": lambda: CuPy("cupy"),
         "jax": lambda: Jax("jax jit")}


def run_case(op, shape, dtype, impls, rng, log):
    x = rng.standard_normal(shape).astype(dtype)
    params = suite.params_of(op, shape[1], rng)
    with np.errstate(all="ignore"):
        ref = [np.asarray(r) for r in flat_outputs(
            suite.np_ops(np)[op](x.astype(np.float64), *[p.astype(np.float64) for p in params]))]
    itemsize = np.dtype(dtype).itemsize
    nbytes = x.size * itemsize + sum(p.nbytes for p in params) + \
        suite.out_bytes(op, shape, itemsize)
    row = {"op": op, "shape": shape, "dtype": dtype, "bytes": nbytes}
    tol = 2e-3 if dtype == "float16" else 1e-4
    for impl in impls:
        try:
            call = impl.prepare(op, dtype, x, params)
            got = [to_host(g) for g in flat_outputs(call())]
            errs = [rel_err(g, r) for g, r in zip(got, ref)]
            if max(errs) > tol:
                row[impl.name] = ("wrong", max(errs))
                log(f"  {impl.name}: WRONG (relative error {max(errs):.2e})")
                continue
            t = timeit(call, wait=getattr(impl, "wait", None))
            row[impl.name] = (nbytes / t / 1e9, t)
            if isinstance(impl, Numbamr) and not impl.autotune:
                row["kernels"] = impl.kernels
            log(f"  {impl.name}: {nbytes / t / 1e9:8.1f} GB/s  ({t * 1e6:.1f} us)")
        except Exception as e:           # recorded in the table, never hidden
            row[impl.name] = ("error", f"{type(e).__name__}: {str(e)[:120]}")
            log(f"  {impl.name}: ERROR {type(e).__name__}: {str(e)[:300]}")
    return row


def launch_overhead(log, rounds=3):
    """Host time per call of already-compiled small softmaxes (4 x 1024 float32).

    Each library is timed in ``rounds`` interleaved rounds after a second of calls (a
    process's first second of calls ran 30-40% slower on the H200 host), and the median
    round is reported. torch.compile goes last, on its own: once it has compiled, its worker
    threads stay in the process and slowed every other library's Python calls by 3-4 us
    (numbamr 8.4 -> 12.5 us, CuPy's ``x + 1`` 14 -> 22 us on the H200 host)."""
    import cupy
    import torch
    import numbamr as nm
    x = cupy.random.standard_normal((4, 1024), dtype=cupy.float32)
    xt = torch.as_tensor(x, device="cuda")
    sm = nm.jit(suite.np_ops(np)["softmax"])
    tc = torch.compile(lambda t: torch.softmax(t, -1))
    calls = {"numbamr": lambda: sm(x), "torch eager": lambda: torch.softmax(xt, -1),
             "torch.compile": lambda: tc(xt)}
    per_round = {name: [] for name in calls}
    for group in (["numbamr", "torch eager"], ["torch.compile"]):
        for name in group:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 1.0:
                calls[name]()
            sync_all()
        for _ in range(rounds):
            for name in group:
                samples = []
                for _ in range(7):
                    t0 = time.perf_counter()
                    for _ in range(2000):
                        calls[name]()
                    samples.append((time.perf_counter() - t0) / 2000)
                    sync_all()
                per_round[name].append(statistics.median(samples) * 1e6)
    out = {name: statistics.median(v) for name, v in per_round.items()}
    for name, v in per_round.items():
        log(f"  host time per call, {name}: {out[name]:.2f} us (rounds: "
            f"{', '.join(f'{t:.2f}' for t in v)})")
    return out


def write_results(path, rows, impls, ceiling, launch, device, plot_name):
    date = datetime.date.today().isoformat()
    names = [i.name for i in impls]
    lines = [f"# Benchmark results ({date})", "",
             f"Machine: {device}. Device-to-device copy ceiling measured in this run: "
             f"**{ceiling:.0f} GB/s** (bytes read + written).", "",
             "GB/s = (input bytes + output bytes) / median time per call, each result checked "
             "against float64 NumPy first; % is of the copy ceiling. `kernels` is how many "
             "kernels numbamr launches per call.", "",
             "| op | shape | dtype | " + " | ".join(names) + " | numbamr % of copy | kernels |",
             "|---|---|---|" + "---|" * len(names) + "---|---|"]
    for r in rows:
        cells = []
        for n in names:
            v = r.get(n)
            if v is None:
                cells.append("-")
            elif v[0] in ("wrong", "error"):
                cells.append(v[0])
            else:
                cells.append(f"{v[0]:.0f}")
        nm_cell = r.get("numbamr")
        pct = f"{100 * nm_cell[0] / ceiling:.1f}%" if nm_cell and not isinstance(
            nm_cell[0], str) else "-"
        lines.append(f"| {r['op']} | {r['shape'][0]} x {r['shape'][1]} | {r['dtype']} | " +
                     " | ".join(cells) + f" | {pct} | {r.get('kernels', '-')} |")
    if launch:
        lines += ["", "Host time per call of an already compiled softmax on a 4 x 1024 float32 "
                  "array (median of back-to-back calls):", "",
                  "| | us per call |", "|---|---|"]
        lines += [f"| {k} | {v:.2f} |" for k, v in launch.items()]
    errors = [(r, n, r[n][1]) for r in rows for n in names
              if isinstance(r.get(n), tuple) and r[n][0] in ("wrong", "error")]
    if errors:
        lines += ["", "Failures:", ""]
        lines += [f"- {n} on {r['op']} {r['shape']} {r['dtype']}: {msg}" for r, n, msg in errors]
    if plot_name:
        lines += ["", f"![GB/s per cell]({plot_name})"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def plot(path, rows, impls, ceiling):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['op']}\n{r['shape'][0]}x{r['shape'][1]}"
              f"{' f16' if r['dtype'] == 'float16' else ''}"
              for r in rows]
    names = [i.name for i in impls]
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(10, len(rows) * 0.9), 5))
    for k, n in enumerate(names):
        vals = [r[n][0] if isinstance(r.get(n), tuple) and not isinstance(r[n][0], str) else 0
                for r in rows]
        ax.bar(np.arange(len(rows)) + k * width, vals, width, label=n)
    ax.axhline(ceiling, color="k", ls="--", lw=1, label="copy ceiling")
    ax.set_xticks(np.arange(len(rows)) + 0.4)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("GB/s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impls", default="numbamr,torch,torch.compile,cupy,jax")
    ap.add_argument("--ops", default=",".join(suite.OPS + suite.WHOLE_OPS[1:]))
    ap.add_argument("--shapes", default="all",
                    help="'all' (the suite), or shapes such as 8192x8192,1000x3001: the suite's "
                         "cases at suite shapes, every float32 op at any other shape")
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    ap.add_argument("--plot", default=os.path.join(HERE, "results.png"))
    ap.add_argument("--launch-only", action="store_true")
    ap.add_argument("--no-launch", action="store_true")
    args = ap.parse_args()
    import cupy
    log = lambda s: print(s, flush=True)  # noqa: E731
    props = cupy.cuda.runtime.getDeviceProperties(0)
    device = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    launch = {} if args.no_launch else launch_overhead(log)
    if args.launch_only:
        return
    impls = [IMPLS[n]() for n in args.impls.split(",")]
    ceiling = copy_ceiling()
    log(f"copy ceiling {ceiling:.0f} GB/s on {device}")
    ops = args.ops.split(",")
    rng = np.random.default_rng(0)
    rows = []
    for op, shape, dtype in suite.cases(None if args.shapes == "all" else args.shapes):
        if op not in ops:
            continue
        log(f"{op} {shape} {dtype}")
        rows.append(run_case(op, shape, dtype, impls, rng, log))
        # after every cell, so a run cut short still leaves the cells it measured
        write_results(args.out, rows, impls, ceiling, launch, device, None)
    plot_name = None
    try:
        plot(args.plot, rows, impls, ceiling)
        plot_name = os.path.basename(args.plot)
    except Exception as e:
        log(f"no plot: {e}")
    write_results(args.out, rows, impls, ceiling, launch, device, plot_name)
    log(open(args.out).read())


if __name__ == "__main__":
    main()
