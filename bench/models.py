"""Model-shaped benchmark: the row ops of a transformer's forward at its hidden sizes and
vocabularies, in bfloat16 (torch tensors), float16 and float32, numbamr beside torch eager,
torch.compile and Liger's Triton kernels (where liger_kernel is installed).

    python bench/models.py --out /tmp/models.md          # the default cells
    python bench/models.py --quick                       # one cell an op
    python bench/models.py --cells rmsnorm:8x2048x4096:bf16,softmax:64x151936:f32
    python bench/models.py --simulator                   # no GPU: each op at a tiny shape
    python bench/models.py --cells bnstats:262144x256:f32 --impls numbamr \
        --variants "sched_target_blocks=8192;threads_per_row=256"   # forced layouts beside

A variant (``bench/variants.py``'s syntax: kernel options and study knobs) is one more
numbamr column, named by its text; its calls, the timed ones too, run under its Knobs.

Every op computes in float32 and rounds its row outputs once to the input's dtype; its
statistics (layernorm's mean and rstd, logsumexp, the per-token loss, batch-norm mean and
variance) are float32. Every array is a torch tensor on the GPU, numbamr's inputs too (its
kernels launch on torch's current stream). Each result is checked against float64 NumPy
before it is timed (at 2048 of its rows where it has more: the reference runs on the
host). GB/s is (input bytes + output bytes) / wall time per call, from
bench/run.py's timer, and % is of the copy ceiling measured in the same run; for cells of
less than 64 MB of traffic the table also gives GPU time per call of numbamr and
torch.compile, from CUDA events around a CUDA graph of back-to-back calls (or around the
calls themselves, marked *, where a graph could not be captured).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import run  # noqa: E402   timer, copy ceiling, error measure, host copies
from suite import EPS  # noqa: E402

SMALL_BYTES = 64 << 20          # below this much traffic the table gives GPU time per call
DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "f16": "float16", "float16": "float16",
          "f32": "float32", "float32": "float32"}
TOLERANCE = {"bfloat16": 2e-2, "float16": 4e-3, "float32": 1e-4}


# ---- the ops, numpy-style: numbamr traces them at acc=float32, NumPy checks at float64 -----

def np_ops(acc=np.float32):
    """The ops, computing in ``acc`` (float64 for the reference)."""
    def rmsnorm(x, w):
        y = x.astype(acc)
        r = y / np.sqrt((y * y).mean(axis=-1, keepdims=True) + EPS)
        return (r * w.astype(acc)).astype(x.dtype)

    def layernorm(x, w, b):     # the training forward: the mean and rstd are kept
        y = x.astype(acc)
        mu = y.mean(axis=-1, keepdims=True)
        d = y - mu
        rstd = 1 / np.sqrt((d * d).mean(axis=-1, keepdims=True) + EPS)
        out = (d * rstd * w.astype(acc) + b.astype(acc)).astype(x.dtype)
        return out, mu[..., 0], rstd[..., 0]

    def softmax(x):
        y = x.astype(acc)
        e = np.exp(y - y.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)

    def logsumexp(x):
        y = x.astype(acc)
        m = y.max(axis=-1, keepdims=True)
        return np.log(np.exp(y - m).sum(axis=-1)) + m[..., 0]

    def cross_entropy(x, labels):       # one loss a token (reduction="none")
        y = x.astype(acc)
        m = y.max(axis=-1, keepdims=True)
        lse = np.log(np.exp(y - m).sum(axis=-1)) + m[..., 0]
        picked = np.where(np.arange(y.shape[-1]) == labels[..., None], y, 0).sum(axis=-1)
        return lse - picked

    def bnstats(x):             # batch-norm statistics: over every axis but the channels
        y = x.astype(acc)
        axes = tuple(range(x.ndim - 1))
        mu = y.mean(axis=axes, keepdims=True)
        d = y - mu
        var = (d * d).mean(axis=axes, keepdims=True)
        return mu.reshape(x.shape[-1]), var.reshape(x.shape[-1])

    def add_rmsnorm(x, r, w):   # a residual add fused with the next layer's norm
        h = x + r
        return h, rmsnorm(h, w)

    return dict(rmsnorm=rmsnorm, layernorm=layernorm, softmax=softmax, logsumexp=logsumexp,
                cross_entropy=cross_entropy, bnstats=bnstats, add_rmsnorm=add_rmsnorm)


OPS = list(np_ops())
# each output: of x's shape and dtype ("x"), or float32, one a row or one a channel
OUTPUTS = {"rmsnorm": "x", "layernorm": "x row row", "softmax": "x", "logsumexp": "row",
           "cross_entropy": "row", "bnstats": "col col", "add_rmsnorm": "x x"}


def torch_ops():
    import torch
    import torch.nn.functional as F

    def rmsnorm(x, w):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), w, EPS)
        y = x.float()
        return (y * torch.rsqrt((y * y).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)

    def layernorm(x, w, b):
        out, mu, rstd = torch.native_layer_norm(x, (x.shape[-1],), w, b, EPS)
        return out, mu.squeeze(-1), rstd.squeeze(-1)

    def cross_entropy(x, labels):     # on float32 logits, as language models upcast them
        v = x.shape[-1]
        loss = F.cross_entropy(x.reshape(-1, v).float(), labels.reshape(-1), reduction="none")
        return loss.reshape(labels.shape)

    def bnstats(x):
        var, mu = torch.var_mean(x, dim=tuple(range(x.dim() - 1)), correction=0)
        return mu.float(), var.float()

    def add_rmsnorm(x, r, w):
        h = x + r
        return h, rmsnorm(h, w)

    return dict(rmsnorm=rmsnorm, layernorm=layernorm, softmax=lambda x: torch.softmax(x, -1),
                logsumexp=lambda x: torch.logsumexp(x.float(), -1),
                cross_entropy=cross_entropy, bnstats=bnstats, add_rmsnorm=add_rmsnorm)


def liger_ops():
    """Liger's kernels for the ops it has (none without liger_kernel; some versions lack
    softmax or the fused residual norm). Its layernorm returns only the output (it keeps
    the mean and rstd for the backward, written all the same)."""
    try:
        from liger_kernel.transformers import functional as lf
    except ImportError:
        return {}
    ops = {}
    if hasattr(lf, "liger_rms_norm"):
        ops["rmsnorm"] = lambda x, w: lf.liger_rms_norm(x, w, EPS)
    if hasattr(lf, "liger_layer_norm"):
        ops["layernorm"] = lambda x, w, b: lf.liger_layer_norm(x, w, b, EPS)
    if hasattr(lf, "liger_softmax"):
        ops["softmax"] = lf.liger_softmax
    if hasattr(lf, "liger_cross_entropy"):
        def cross_entropy(x, labels):
            loss = lf.liger_cross_entropy(x.reshape(-1, x.shape[-1]), labels.reshape(-1),
                                          reduction="none")
            return loss.reshape(labels.shape)
        ops["cross_entropy"] = cross_entropy
    if hasattr(lf, "liger_fused_add_rms_norm"):
        def add_rmsnorm(x, r, w):
            y, h = lf.liger_fused_add_rms_norm(x, r, w, EPS)
            return h, y
        ops["add_rmsnorm"] = add_rmsnorm
    return ops


# ---- the cells -------------------------------------------------------------------------

def parse_cell(text):
    """``op:ROWSxCOLS[xCOLS...]:dtype`` (dtype bf16, f16, f32 or the full names) ->
    (op, shape, dtype name)."""
    parts = text.strip().split(":")
    if len(parts) != 3:
        raise ValueError(f"cell {text!r}: expected op:shape:dtype, such as "
                         "rmsnorm:8x2048x4096:bf16")
    op, shape_text, dtype = parts
    if op not in OPS:
        raise ValueError(f"cell {text!r}: op {op!r} is not one of {', '.join(OPS)}")
    dims = shape_text.lower().split("x")
    if not 2 <= len(dims) <= 3 or not all(d.isdigit() and int(d) > 0 for d in dims):
        raise ValueError(f"cell {text!r}: shape {shape_text!r} is not 2 or 3 positive sizes "
                         "joined by x")
    if dtype not in DTYPES:
        raise ValueError(f"cell {text!r}: dtype {dtype!r} is not one of "
                         f"{', '.join(sorted(DTYPES))}")
    return op, tuple(int(d) for d in dims), DTYPES[dtype]


def _cells(text):
    return [parse_cell(c) for c in text.split()]


# hidden sizes 2048-8192 for the norms, vocabularies for softmax / logsumexp / the loss,
# 64-1024 channels for batch-norm statistics; 1 to 65536 tokens, 2-D and 3-D
DEFAULT_CELLS = _cells("""
    rmsnorm:1x4096:bf16 rmsnorm:32x4096:bf16 rmsnorm:4096x4096:bf16
    rmsnorm:8x2048x4096:bf16 rmsnorm:65536x2048:bf16 rmsnorm:16384x5120:f16
    rmsnorm:4x1024x8192:f32 rmsnorm:32x2048x8192:bf16
    add_rmsnorm:1x8192:bf16 add_rmsnorm:4x4096x4096:bf16 add_rmsnorm:65536x5120:bf16
    add_rmsnorm:2048x2048:f16 add_rmsnorm:8192x4096:f32
    layernorm:1x2048:bf16 layernorm:8x2048x4096:f16 layernorm:16384x8192:bf16
    layernorm:65536x2048:f32 layernorm:4096x5120:bf16
    softmax:1x128256:bf16 softmax:64x151936:f32 softmax:4096x32000:bf16
    softmax:2x1024x50257:f16 softmax:8192x50257:f32
    logsumexp:32x128256:bf16 logsumexp:4096x50257:bf16 logsumexp:8x2048x32000:f16
    logsumexp:1x151936:f32
    cross_entropy:16x128256:bf16 cross_entropy:4096x128256:bf16
    cross_entropy:8x1024x151936:bf16 cross_entropy:16384x32000:f32
    cross_entropy:4x512x50257:f16
    bnstats:65536x64:f32 bnstats:32x2048x256:f16 bnstats:16384x1024:bf16
    bnstats:1024x512:f32 bnstats:262144x128:bf16
""")
QUICK_CELLS = _cells("""
    rmsnorm:8x2048x4096:bf16 add_rmsnorm:4096x4096:bf16 layernorm:8x2048x4096:f16
    softmax:4096x32000:bf16 logsumexp:32x128256:bf16 cross_entropy:4096x128256:bf16
    bnstats:65536x64:f32
""")


def host_dtype(name):
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def input_specs(op, shape, dtype):
    """(shape, dtype) of each of the op's inputs: x, then its weights (of x's dtype),
    residual or labels."""
    dt, cols = host_dtype(dtype), shape[-1]
    extra = {"rmsnorm": [((cols,), dt)], "add_rmsnorm": [(shape, dt), ((cols,), dt)],
             "layernorm": [((cols,), dt), ((cols,), dt)],
             "cross_entropy": [(shape[:-1], np.dtype(np.int64))]}.get(op, [])
    return [(shape, dt)] + extra


def make_inputs(op, shape, dtype, rng):
    """The op's host arrays: logits scaled as a model's are, norm weights near 1, labels
    below the vocabulary's size."""
    scale = 3.0 if op in ("softmax", "logsumexp", "cross_entropy") else 1.0
    out = []
    for i, (s, dt) in enumerate(input_specs(op, shape, dtype)):
        if dt.kind == "i":
            out.append(rng.integers(0, shape[-1], s))
        elif op in ("rmsnorm", "add_rmsnorm") and len(s) == 1:
            out.append((1 + 0.1 * rng.standard_normal(s)).astype(dt))
        else:
            out.append((rng.standard_normal(s, np.float32) * (scale if i == 0 else 1)).astype(dt))
    return out


def reference(op, inputs):
    """float64 NumPy on the same (rounded) values."""
    f64 = [a.astype(np.float64) if a.dtype.kind == "f" or str(a.dtype) == "bfloat16" else a
           for a in inputs]
    return [np.asarray(r) for r in run.flat_outputs(np_ops(np.float64)[op](*f64))]


CHECKED_ROWS = 2048     # rows of a large cell checked against float64 NumPy (host time)


def checked_rows(op, shape, rng):
    """The rows (tokens) whose results are checked: all of a small cell, else a sorted
    sample with the first and last. Batch-norm statistics need every row."""
    rows = int(np.prod(shape[:-1]))
    if op == "bnstats" or rows <= CHECKED_ROWS:
        return None
    pick = rng.choice(rows - 2, CHECKED_ROWS - 2, replace=False) + 1
    return np.concatenate([[0], np.sort(pick), [rows - 1]])


def rows_of(a, shape, picked, by_row):
    """``a`` (an input or output ``by_row``: of the cell's shape or of its rows') at the
    picked rows, flattened to a matrix or a vector; any other array whole."""
    if picked is None or not by_row:
        return a
    rows = int(np.prod(shape[:-1]))
    return a.reshape(rows, -1)[picked].reshape((len(picked),) + a.shape[len(shape) - 1:])


def _inputs_by_row(op, shape, dtype):
    return [s == tuple(shape) or dt.kind == "i" for s, dt in input_specs(op, shape, dtype)]


def traffic(op, inputs):
    """Bytes read and written once: every input, every output at its dtype."""
    x = inputs[0]
    sizes = {"x": x.size, "row": x.size // x.shape[-1], "col": x.shape[-1]}
    out = sum(sizes[k] * (x.itemsize if k == "x" else 4) for k in OUTPUTS[op].split())
    return sum(a.nbytes for a in inputs) + out


# ---- the frameworks --------------------------------------------------------------------

def to_torch(a):
    import torch
    if str(a.dtype) == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


class Impl:
    def __init__(self, name, ops, compiled=False):
        self.name, self.ops, self.compiled = name, ops, compiled

    def has(self, op):
        return op in self.ops

    def prepare(self, op, args):
        fn = self.ops[op]
        if self.compiled:
            import torch
            torch._dynamo.reset()
            fn = torch.compile(fn, dynamic=False)
        return lambda: fn(*args)


class Numbamr(Impl):
    """numbamr with its heuristics, or under one variant (forced options and study Knobs)."""

    def __init__(self, variant=""):
        super().__init__(f"numbamr[{variant}]" if variant else "numbamr", np_ops())
        self.variant = variant

    def prepare(self, op, args):
        import numbamr as nm
        from variants import parse
        opts, knobs = parse(self.variant)
        jf = nm.jit(**opts)(self.ops[op])
        with nm.experimental.knobs(knobs):
            self.kernels = len(jf.lower(*args).kernels)

        def call():
            with nm.experimental.knobs(knobs):
                return jf(*args)
        return call if self.variant else (lambda: jf(*args))


def impls(names, variants=()):
    import torch  # noqa: F401   (the peers, and every array, are torch's)
    made = {"numbamr": Numbamr, "torch": lambda: Impl("torch eager", torch_ops()),
            "torch.compile": lambda: Impl("torch.compile", torch_ops(), compiled=True),
            "liger": lambda: Impl("liger", liger_ops())}
    out = [made[n]() for n in names]
    out[1:1] = [Numbamr(v) for v in variants if v]
    return [i for i in out if i.ops]        # no liger column without liger_kernel


def gpu_time(call, calls=20, replays=10):
    """GPU seconds per call and how they were measured: CUDA events around replays of a
    CUDA graph of ``calls`` back-to-back calls ("graph"), else around the calls themselves
    ("events": includes any gap the host leaves between launches)."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):       # warm up on a side stream, as capture needs
            for _ in range(3):
                call()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="relaxed"):
            for _ in range(calls):
                call()
        graph.replay()
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / (calls * replays), "graph"
    except Exception:           # not capturable: time the launches as they come
        torch.cuda.synchronize()
        for _ in range(3):
            call()
        start.record()
        for _ in range(calls * replays):
            call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / (calls * replays), "events"


def run_cell(op, shape, dtype, peers, rng, log):
    inputs = make_inputs(op, shape, dtype, rng)
    picked = checked_rows(op, shape, rng)
    with np.errstate(all="ignore"):
        ref = reference(op, [rows_of(a, shape, picked, r) for a, r in
                             zip(inputs, _inputs_by_row(op, shape, dtype))])
    nbytes = traffic(op, inputs)
    row = {"op": op, "shape": shape, "dtype": dtype, "bytes": nbytes}
    args = [to_torch(a) for a in inputs]
    for impl in peers:
        if not impl.has(op):
            continue
        try:
            call = impl.prepare(op, args)
            got = [rows_of(run.to_host(g), shape, picked, kind != "col") for g, kind in
                   zip(run.flat_outputs(call()), OUTPUTS[op].split())]
            err = max(run.rel_err(g, r) for g, r in zip(got, ref))
            if err > TOLERANCE[dtype]:
                row[impl.name] = ("wrong", f"relative error {err:.2e}")
                log(f"  {impl.name}: WRONG (relative error {err:.2e})")
                continue
            t = run.timeit(call)
            row[impl.name] = (nbytes / t / 1e9, t)
            if impl.name == "numbamr":
                row["kernels"] = impl.kernels
            if nbytes < SMALL_BYTES and impl.name in ("numbamr", "torch.compile"):
                row[impl.name + " gpu"] = gpu_time(call)
            log(f"  {impl.name}: {nbytes / t / 1e9:8.1f} GB/s  ({t * 1e6:.1f} us)")
        except Exception as e:          # recorded in the table, never hidden
            row[impl.name] = ("error", f"{type(e).__name__}: {str(e)[:120]}")
            log(f"  {impl.name}: ERROR {type(e).__name__}: {str(e)[:300]}")
    return row


# ---- the table -------------------------------------------------------------------------

def _gbs(v):
    if v is None:
        return "-"
    return v[0] if isinstance(v[0], str) else f"{v[0]:.0f}"


def _us(v):
    return "-" if v is None else f"{v[0] * 1e6:.1f}{'' if v[1] == 'graph' else '*'}"


def write_table(path, rows, names, ceiling, device):
    lines = [f"Machine: {device}. Copy ceiling measured in this run: **{ceiling:.0f} GB/s**. "
             "GB/s = (input bytes + output bytes) / wall time per call, each result checked "
             "against float64 NumPy first; % is numbamr's of the copy ceiling; us: GPU time "
             "per call (CUDA graph; * events around the calls), for cells under 64 MB.", "",
             "| op | shape | dtype | MB | " + " | ".join(names) +
             " | numbamr % of copy | numbamr us | torch.compile us | kernels |",
             "|---|---|---|---|" + "---|" * len(names) + "---|---|---|---|"]
    for r in rows:
        nm_cell = r.get("numbamr")
        pct = f"{100 * nm_cell[0] / ceiling:.1f}%" if nm_cell and not isinstance(
            nm_cell[0], str) else "-"
        lines.append(f"| {r['op']} | {' x '.join(map(str, r['shape']))} | {r['dtype']} | "
                     f"{r['bytes'] / 1e6:.1f} | " + " | ".join(_gbs(r.get(n)) for n in names) +
                     f" | {pct} | {_us(r.get('numbamr gpu'))} | "
                     f"{_us(r.get('torch.compile gpu'))} | {r.get('kernels', '-')} |")
    failures = [f"- {n} on {r['op']} {r['shape']} {r['dtype']}: {r[n][1]}" for r in rows
                for n in names if isinstance(r.get(n), tuple) and isinstance(r[n][0], str)]
    if failures:
        lines += ["", "Failures:", ""] + failures
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- the simulator's dry run -----------------------------------------------------------

def tiny_shape(op, ndim):
    if op == "bnstats":
        return (48, 8) if ndim == 2 else (4, 12, 8)
    return (5, 40) if ndim == 2 else (2, 3, 40)


def simulate(cells, log):
    """Each op, dtype and rank of ``cells`` at a tiny shape in numba's simulator, checked
    against float64 NumPy (dtype, shape and values). Returns the number of failures."""
    import numbamr as nm
    rng = np.random.default_rng(0)
    failures = 0
    for op, ndim, dtype in sorted({(op, len(shape), dtype) for op, shape, dtype in cells}):
        shape = tiny_shape(op, ndim)
        inputs = make_inputs(op, shape, dtype, rng)
        got = run.flat_outputs(nm.jit(np_ops()[op])(*inputs))
        ref = reference(op, inputs)
        kinds = OUTPUTS[op].split()
        want = [inputs[0].dtype if k == "x" else np.dtype(np.float32) for k in kinds]
        problems = [f"output {i}: {g.dtype} {g.shape}, expected {w} {r.shape}"
                    for i, (g, r, w) in enumerate(zip(got, ref, want))
                    if g.dtype != w or g.shape != r.shape]
        if len(got) != len(ref):
            problems.append(f"{len(got)} outputs, expected {len(ref)}")
        err = max(run.rel_err(g.astype(np.float64), r) for g, r in zip(got, ref))
        if err > TOLERANCE[dtype]:
            problems.append(f"relative error {err:.2e} > {TOLERANCE[dtype]:g}")
        failures += bool(problems)
        verdict = "; ".join(problems) if problems else f"ok (relative error {err:.1e})"
        log(f"{op} {shape} {dtype}: {verdict}")
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", help="op:shape:dtype,... (rmsnorm:8x2048x4096:bf16)")
    ap.add_argument("--quick", action="store_true", help="one cell an op")
    ap.add_argument("--ops", help="only these ops (comma-separated)")
    ap.add_argument("--impls", default="numbamr,torch,torch.compile,liger")
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS_models.md"))
    ap.add_argument("--variants", default="",
                    help="numbamr columns under forced options / study knobs, ';'-separated "
                         "(bench/variants.py's syntax)")
    ap.add_argument("--simulator", action="store_true",
                    help="no GPU: run each op of the cells at a tiny shape in numba's "
                         "simulator and check it against float64 NumPy")
    args = ap.parse_args(argv)
    try:
        cells = [parse_cell(c) for c in args.cells.split(",")] if args.cells else \
            QUICK_CELLS if args.quick else DEFAULT_CELLS
    except ValueError as e:
        ap.error(f"--cells: {e}")
    if args.ops:
        wanted = args.ops.split(",")
        unknown = sorted(set(wanted) - set(OPS))
        if unknown:
            ap.error(f"--ops: unknown {', '.join(unknown)} (ops: {', '.join(OPS)})")
        cells = [c for c in cells if c[0] in wanted]
    log = lambda s: print(s, flush=True)  # noqa: E731
    if args.simulator:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        return 1 if simulate(cells, log) else 0
    import torch
    peers = impls(args.impls.split(","), args.variants.split(";"))
    device = torch.cuda.get_device_name()
    ceiling = run.copy_ceiling()
    log(f"copy ceiling {ceiling:.0f} GB/s on {device}")
    rng = np.random.default_rng(0)
    rows = []
    for op, shape, dtype in cells:
        log(f"{op} {shape} {dtype}")
        rows.append(run_cell(op, shape, dtype, peers, rng, log))
        # after every cell, so a run cut short still leaves the cells it measured
        write_table(args.out, rows, [p.name for p in peers], ceiling, device)
        torch.cuda.empty_cache()
    log(open(args.out).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
