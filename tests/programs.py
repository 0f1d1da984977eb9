"""The test programs: plain numpy functions, each with an input maker.

Every program is written once as numpy code. Tests jit it with numbamr and compare against
the same code run by NumPy on float64 copies of the inputs (an independent reference), and
against NumPy on the original dtypes for the result dtype.
"""
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Program:
    name: str
    fn: object
    make: object                 # (rng, rows, cols) -> tuple of input arrays
    kernels: int = 1             # kernels numbamr must use
    scale: object = None         # (inputs) -> magnitude for outputs that cancel to ~0
    static: dict = field(default_factory=dict)


def _mat(rng, r, c, dtype=np.float32):
    return rng.standard_normal((r, c)).astype(dtype)


def one(rng, r, c):
    return (_mat(rng, r, c),)


def two(rng, r, c):
    return (_mat(rng, r, c), _mat(rng, r, c + 3))


def affine(rng, r, c):
    return (_mat(rng, r, c), rng.standard_normal(c).astype(np.float32),
            rng.standard_normal(c).astype(np.float32))


def three_d(rng, r, c):
    return (rng.standard_normal((r, 3, c)).astype(np.float32),)


def four_d(rng, r, c):
    return (rng.standard_normal((r, 3, 2, c)).astype(np.float32),)


def vecmat(rng, r, c):
    k = r + 2
    return (rng.standard_normal(k).astype(np.float32), _mat(rng, k, c),
            rng.standard_normal(k).astype(np.float32), _mat(rng, k, c))


def positive(rng, r, c):
    return (np.abs(_mat(rng, r, c)) + 0.5,)


def _sum_abs(inputs):
    return float(np.abs(inputs[0]).astype(np.float64).sum(axis=-1).max()) + 1.0


# ---- the programs --------------------------------------------------------------------------

def sum_and_max(x):
    return x.sum(1), x.max(1)


def sum_max_min(x):
    return x.sum(axis=1), x.max(axis=1), x.min(axis=1)


def two_inputs(x, y):
    return x.sum(1) + y.max(1)


def centered_sum(x):
    return (x - x.mean(1, keepdims=True)).sum(1)


def variance(x):
    return x.var(axis=-1)


def stddev(x):
    return np.std(x, axis=1)


def softmax(x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def logsumexp(x):
    m = x.max(axis=1, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=1)) + m[:, 0]


def layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + 1e-5) * w + b


def layernorm_stats(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + 1e-5)
    return d * rstd * w + b, mu[:, 0], rstd[:, 0]


def zscore(x):
    return (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)


def chain3(x):
    a = x.max(1, keepdims=True)
    b = (x - a).sum(1, keepdims=True)
    return (x * b - a).min(1)


def chain4(x):
    a = x.mean(1, keepdims=True)
    b = np.abs(x - a).max(1, keepdims=True)
    c = ((x - a) / b).sum(1, keepdims=True)
    return (x * c + b).max(1) - a[:, 0]


def row_shape_intermediate(x):
    return x.sum(1) * x.max(1) + 1


def full_shape_intermediate(x):
    return (x * x.sum(1, keepdims=True)).max(1)


def dict_outputs(x):
    return {"mean": x.mean(1), "max": x.max(1), "centered": x - x.mean(1, keepdims=True)}


def middle_axis(x):
    return x.sum(1), x.max(axis=1)


def two_axes(x):
    return x.sum(axis=(1, 3)), (x * x).mean(axis=(1, 3))


def all_axes(x):
    return x.sum(), (x - x.mean()).max()


def vector_matrix(v, m, u, n):
    return (v[:, None] * m).sum(0) + (u[:, None] * n).sum(0)


def column_var(x):
    return x.var(axis=0)


def rmsnorm(x, w, b):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def transposed_input(x):
    return x.T.sum(0), x.T.max(axis=0)


def geometric_mean(x):
    return np.exp(np.log(x).mean(axis=1))


PROGRAMS = [
    Program("sum_and_max", sum_and_max, one),
    Program("sum_max_min", sum_max_min, one),
    Program("two_inputs", two_inputs, two),
    Program("centered_sum", centered_sum, one, scale=_sum_abs),
    Program("variance", variance, one),
    Program("stddev", stddev, one),
    Program("softmax", softmax, one),
    Program("log_softmax", log_softmax, one),
    Program("logsumexp", logsumexp, one),
    Program("layernorm", layernorm, affine),
    Program("layernorm_stats", layernorm_stats, affine),
    Program("rmsnorm", rmsnorm, affine),
    Program("zscore", zscore, one),
    Program("chain3", chain3, one, scale=_sum_abs),
    Program("chain4", chain4, one, scale=_sum_abs),
    Program("row_shape_intermediate", row_shape_intermediate, one),
    Program("full_shape_intermediate", full_shape_intermediate, one),
    Program("dict_outputs", dict_outputs, one),
    Program("middle_axis", middle_axis, three_d),
    Program("two_axes", two_axes, four_d),
    Program("all_axes", all_axes, one),
    Program("vector_matrix", vector_matrix, vecmat),
    Program("column_var", column_var, one),
    Program("transposed_input", transposed_input, one),
    Program("geometric_mean", geometric_mean, positive),
]

BY_NAME = {p.name: p for p in PROGRAMS}
