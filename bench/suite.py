"""The benchmark suite: each op written once per framework, with its byte count.

Every op reads its inputs once and writes its outputs once at the memory floor; GB/s below
is (input bytes + output bytes) / time.
"""
import numpy as np

EPS = 1e-5


# ---- numpy-style code: numbamr traces it, CuPy runs it as is (xp = cupy), NumPy checks it ----

def np_ops(xp):
    def softmax(x):
        e = xp.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def layernorm(x, w, b):
        mu = x.mean(axis=-1, keepdims=True)
        d = x - mu
        var = (d * d).mean(axis=-1, keepdims=True)
        return d / xp.sqrt(var + EPS) * w + b

    def rmsnorm(x, w):
        return x / xp.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS) * w

    def variance(x):
        d = x - x.mean(axis=-1, keepdims=True)
        return (d * d).mean(axis=-1)

    def logsumexp(x):
        m = x.max(axis=-1, keepdims=True)
        return xp.log(xp.exp(x - m).sum(axis=-1)) + m[:, 0]

    def sum_max(x):
        return x.sum(axis=-1), x.max(axis=-1)

    def zscore(x):
        mu = x.mean(axis=-1, keepdims=True)
        d = x - mu
        return d / xp.sqrt((d * d).mean(axis=-1, keepdims=True))

    def colvar(x):
        d = x - x.mean(axis=0, keepdims=True)
        return (d * d).mean(axis=0)

    def fullsum(x):
        return x.sum()

    def fullvar(x):
        return x.var()

    def centered_max(x):
        return (x - x.mean()).max()

    return dict(softmax=softmax, layernorm=layernorm, rmsnorm=rmsnorm, var=variance,
                logsumexp=logsumexp, sum_max=sum_max, zscore=zscore, colvar=colvar,
                fullsum=fullsum, fullvar=fullvar, centered_max=centered_max)


def half_wrap(fn):
    """float16 in and out, float32 inside (what the f16 cells measure)."""
    def wrapped(x, *params):
        out = fn(x.astype(np.float32), *params)
        return out.astype(np.float16)
    return wrapped


def torch_ops():
    import torch
    import torch.nn.functional as F

    def layernorm(x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b, EPS)

    def rmsnorm(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w

    def sum_max(x):
        return x.sum(-1), x.amax(-1)

    def zscore(x):
        mu = x.mean(-1, keepdim=True)
        d = x - mu
        return d * torch.rsqrt((d * d).mean(-1, keepdim=True))

    return dict(
        softmax=lambda x: torch.softmax(x, -1),
        layernorm=layernorm, rmsnorm=rmsnorm,
        var=lambda x: torch.var(x, -1, correction=0),
        logsumexp=lambda x: torch.logsumexp(x, -1),
        sum_max=sum_max, zscore=zscore,
        colvar=lambda x: torch.var(x, 0, correction=0),
        fullsum=lambda x: x.sum(),
        fullvar=lambda x: torch.var(x, correction=0),
        centered_max=lambda x: (x - x.mean()).amax())


def torch_half(fn):
    def wrapped(x, *params):
        return fn(x.float(), *params).half()
    return wrapped


def jax_ops():
    import jax
    import jax.numpy as jnp
    ops = np_ops(jnp)
    ops["logsumexp"] = lambda x: jax.nn.logsumexp(x, axis=-1)
    ops["softmax"] = lambda x: jax.nn.softmax(x, axis=-1)
    return ops


# ---- the cases: (op, shape, dtype) and what each reads and writes ---------------------------

def params_of(op, cols, rng):
    """The small parameter arrays an op takes besides x (float32)."""
    if op == "layernorm":
        return [rng.standard_normal(cols).astype(np.float32),
                rng.standard_normal(cols).astype(np.float32)]
    if op == "rmsnorm":
        return [rng.standard_normal(cols).astype(np.float32)]
    return []


def out_bytes(op, shape, itemsize):
    rows, cols = shape
    if op in ("softmax", "layernorm", "rmsnorm", "zscore"):
        return rows * cols * itemsize
    if op in ("var", "logsumexp"):
        return rows * 4
    if op == "sum_max":
        return 2 * rows * 4
    if op == "colvar":
        return cols * 4
    return 4


OPS = ["softmax", "layernorm", "rmsnorm", "var", "logsumexp", "sum_max", "zscore", "colvar",
       "fullsum"]
SHAPES = [(8192, 8192), (65536, 1024), (1024, 65536)]
HALF_OPS = ["softmax", "layernorm", "rmsnorm"]
# whole-array reductions of 2**28 float32 elements (1 GiB)
WHOLE_OPS = ["fullsum", "fullvar", "centered_max"]
WHOLE_SHAPE = (16384, 16384)


def cases(shapes=None):
    """The suite's (op, shape, dtype) cases; with ``shapes`` ("8192x8192,1000x3001"), the
    suite's cases at those of its shapes and every float32 op of OPS at any other."""
    out = [(op, shape, "float32") for shape in SHAPES for op in OPS]
    out += [(op, (8192, 8192), "float16") for op in HALF_OPS]
    out += [(op, WHOLE_SHAPE, "float32") for op in WHOLE_OPS]
    if shapes is None:
        return out
    picked = []
    for text in shapes.split(","):
        parts = text.strip().lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"shapes: {text!r} is not ROWSxCOLUMNS (such as 8192x8192)")
        shape = tuple(int(n) for n in parts)
        ours = [c for c in out if c[1] == shape]
        picked += ours or [(op, shape, "float32") for op in OPS]
    return picked
