"""A seeded generator of random numpy-style multireduce programs, for differential fuzzing.

``make_case(seed)`` returns ``(source_text, fn, inputs, options)``:

- ``source_text``: a complete Python function (``def f(x, y): ...``) as text, with a header
  comment that names the seed, the input shapes/dtypes and the kernel options; paste it into
  a regression test as is.
- ``fn``: that source exec'd into a function (plain NumPy code: run it on NumPy arrays for the
  reference, or hand it to ``numbamr.jit(**options)``).
- ``inputs``: the input arrays (standard normal, mostly float32).
- ``options``: random ``numbamr.jit`` kernel options (each present or absent at random).

The program is built statement by statement while the statements are run on float64 copies of
the inputs, so each new statement is chosen with the values in view: ``np.exp`` only of
bounded values, ``np.sqrt`` of non-negative ones, division only by values away from 0,
``np.where`` thresholds away from every compared value, ``prod`` of factors near 1. A finished
program is kept only if its outputs are well conditioned (see ``expected``); otherwise the
next attempt (a seed derived from the same seed) is drawn.

``expected(fn, inputs)`` returns what a test compares against: NumPy on the original dtypes
(shape and dtype), NumPy on float64 copies (values), and per output an absolute scale under
which a float32 computation cannot be told apart from the float64 one (for outputs that cancel
to about 0). Nothing else is loosened: a wrong element, a wrong axis or a race shows up as an
O(1) relative error.
"""
import linecache
import random
import warnings

import numpy as np

# ---- profiles: sizes and option ranges ------------------------------------------------------

SIM = dict(
    small_sizes=[1, 2, 3, 5],
    large_sizes=[1, 2, 3, 5, 7, 7, 17, 17, 33, 33, 40],
    max_large_dims=2,           # axes that may take a large size
    max_elems=400,              # elements of the main input
    max_rows=40,                # elements of the main input outside its largest axis
    threads_per_row=[1, 2, 4, 8, 16, 32, 64],
    rows_per_block=[1, 2, 3, 4],
    vector=[1, 2, 4],
    upcast=[0, 1, 2, 8],
    unroll=[1, 2, 3],
    rtol=1e-4,
    half=0.1,                   # share of float32 inputs made float16 instead
    # now and then one long row or column (at least 2**14 elements: the scheduler splits such
    # reductions across blocks) and a short program
    long_rows=0.04,
    long_sizes=[16384, 20000],
)

GPU = dict(
    small_sizes=[1, 2, 3, 5, 7, 16, 33],
    large_sizes=[1, 3, 7, 17, 33, 64, 100, 127, 256, 511, 1000, 1024, 4096, 4097, 8192],
    max_large_dims=3,
    max_elems=1 << 22,
    max_rows=1 << 17,
    threads_per_row=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    rows_per_block=[1, 2, 3, 4, 8, 16, 32],
    vector=[1, 2, 4, 8],
    upcast=[0, 1, 2, 8, 32],
    unroll=[1, 2, 3, 4, 8],
    rtol=1e-4,
    # layout and launch choices only the GPU takes, each forced in about one case in ten
    launch=dict(split=[2, 3, 4, 7, 8, 12, 16], cluster=[0, 1], stage=[0, 4096, 49152, 163840],
                blocks_per_sm=[1, 2, 3, 8], min_blocks_per_sm=[1, 2, 4],
                evict_last=[0, 1]),
)

# GPU sizes and options, shorter programs: what the PTX tier compiles (a few seconds a kernel)
PTX = dict(GPU, steps=(1, 3), max_elems=1 << 20, half=0.1)

PROFILES = {"sim": SIM, "gpu": GPU, "ptx": PTX}
# Optional profile keys, 0 unless given, each drawn from a random stream of its own so that a
# profile without them keeps its programs (command-line options: add_stream_options)
STREAMS = {
    "arg_reductions": "share of steps that are an argmax or argmin",
    "extras": "share of steps that use the ufuncs, casts and axis moves the others leave out",
    "ints": "share of inputs that are small integers (int8, uint8, int32, int64)",
    "composites": "share of steps that are masked reductions (where=, initial=), norms, "
                  "products with a vector, einsums, weighted averages, nanvar/nanstd, "
                  "rounding or np.arange constants",
    "bools": "share of the extra inputs (y, z) that are bool masks, used where masks are",
}


def add_stream_options(parser):
    """One option per stream of STREAMS (--arg-reductions, --extras, ...) on ``parser``."""
    for key, text in STREAMS.items():
        parser.add_argument("--" + key.replace("_", "-"), type=float, default=0.0,
                            help=text + " (default 0: the programs of the fixed seeds)")


def with_streams(profile, args):
    """``profile`` with the stream shares parsed by add_stream_options."""
    return dict(profile, **{key: getattr(args, key) for key in STREAMS})


FLOAT_FORMAT = "{:.4g}"


def _fmt(c):
    s = FLOAT_FORMAT.format(float(c))
    if "e" not in s and "." not in s and "inf" not in s and "nan" not in s:
        s += ".0"
    return s


class _Var:
    __slots__ = ("name", "val", "depth", "src", "axes", "keepdims", "kind")

    def __init__(self, name, val, depth=0, src=None, axes=None, keepdims=None, kind=None):
        self.name, self.val, self.depth = name, val, depth
        self.src, self.axes, self.keepdims, self.kind = src, axes, keepdims, kind

    @property
    def shape(self):
        return self.val.shape

    @property
    def ndim(self):
        return self.val.ndim

    @property
    def fval(self):
        return self.val.astype(np.float64)


def _factor_rounding_drift(vals, c, axes, dtype):
    """How far (relative) the product of factors ``1 + c * tanh(vals)`` over ``axes`` moves
    when each factor is rounded to ``dtype``, the most over the product's elements. Factors
    this close to 1 round by a fixed part of themselves; where most are alike (a saturated
    tanh, a broadcast value) those roundings add up with the count, not its square root
    (GPU fuzz seed 162920: 3.8 million factors 1 +- 7.9e-7, their float32 roundings 12%)."""
    exact = 1.0 + c * np.tanh(vals)
    rounded = exact.astype(dtype).astype(np.float64)
    drift = np.log1p((rounded - exact) / exact).sum(axis=tuple(axes))
    return float(np.abs(drift).max()) if drift.size else 0.0


def _check_clear_extremes(vals, axis):
    """Rejects values whose maximum along ``axis`` (None: all) is not clear of the next value
    by a margin or tied with it exactly (NumPy's argmax takes the first of a tie; float32
    rounding cannot move a clear one)."""
    rows = vals.reshape(1, -1) if axis is None else np.moveaxis(vals, axis, -1)
    best = rows.max(axis=-1, keepdims=True)
    below = np.where(rows < best, rows, -np.inf).max(axis=-1, keepdims=True)
    if np.any(best - below < 1e-3 * (1.0 + np.abs(vals).max())):
        raise Rejected("an extreme too close to the next value")


class Rejected(Exception):
    """The statement (or program) drawn is not tame enough; draw another."""


class _Builder:
    MAX_ABS = 1e4
    MAX_DEPTH = 4

    def __init__(self, seed, profile):
        self.seed = seed
        self.p = profile
        self.r = random.Random(seed)
        self.lines = []
        self.vars = []
        self.env = {"np": np}
        self.counter = 0
        self.max_elems = profile["max_elems"]
        self.steps = profile.get("steps", (2, 7))
        # the step streams' own draws (see STREAMS): a profile without them keeps its programs
        self.arg_r = random.Random(f"{seed}-arg")

    # ---- shapes and inputs ------------------------------------------------------------------
    def _main_shape(self):
        r, p = self.r, self.p
        if r.random() < p.get("long_rows", 0.0):
            n, k = r.choice(p["long_sizes"]), r.choice([1, 2])
            self.max_elems, self.steps = 2 * n * k, (1, 3)
            return (k, n) if r.random() < 0.6 else (n, k)
        for _ in range(100):
            ndim = r.choices([1, 2, 3, 4], weights=[1, 5, 3, 2])[0]
            nlarge = r.randint(1, min(ndim, p["max_large_dims"]))
            large = set(r.sample(range(ndim), nlarge))
            shape = tuple(r.choice(p["large_sizes"] if i in large else p["small_sizes"])
                          for i in range(ndim))
            n = int(np.prod(shape))
            if n <= p["max_elems"] and n // max(shape) <= p["max_rows"]:
                return shape
        return (3, 7)

    def _make_inputs(self):
        r = self.r
        shape = self._main_shape()
        ndim = len(shape)
        specs = [("x", shape)]
        n_extra = r.choices([0, 1, 2], weights=[3, 4, 2])[0]
        for name in ("y", "z")[:n_extra]:
            kind = r.choice(["full", "ones", "suffix", "suffix", "ones"])
            if kind == "full" or ndim == 1 and kind == "suffix":
                s = shape
            elif kind == "ones":
                s = tuple(1 if r.random() < 0.5 else d for d in shape)
            else:
                k = r.randint(1, ndim - 1)
                s = tuple(1 if r.random() < 0.2 else d for d in shape[k:])
            specs.append((name, s))
        rng = np.random.default_rng(self.seed)
        # float16 and integers drawn apart, so that a profile without them keeps its programs
        # seed for seed
        halves = np.random.default_rng([self.seed, 16])
        integers = np.random.default_rng([self.seed, 32])
        self.bool_r = np.random.default_rng([self.seed, 64])
        self.inputs, self.input_names, self.input_views = [], [], []
        self.mask_inputs = []
        for name, s in specs:
            dt = np.float64 if r.random() < 0.08 else np.float32
            if dt == np.float32 and halves.random() < self.p.get("half", 0.0):
                dt = np.float16
            if integers.random() < self.p.get("ints", 0.0):
                dt = integers.choice([np.int32, np.int64, np.uint8, np.int8])
            if name != "x" and self.p.get("bools") and self.bool_r.random() < self.p["bools"]:
                dt = np.bool_
            base_shape, view = self._strided(s)
            base = rng.standard_normal(base_shape)
            # small integers: sums stay exact, extremes tie; masks keep about 65%
            base = np.abs(np.round(base * 3)) if dt == np.uint8 else \
                np.round(base * 3) if np.dtype(dt).kind == "i" else \
                base > -0.4 if dt == np.bool_ else base
            base = base.astype(dt)
            a = eval("base" + view, {"base": base}) if view else base
            self.inputs.append(a)
            self.input_names.append(name)
            self.input_views.append((base, view) if view else None)
            # integers keep their dtype, so that the values the generator judges wrap and
            # promote as NumPy's (uint8 - uint64 wraps to about 1.8e19: simulator seed 935509)
            v = _Var(name, a if a.dtype.kind in "biu" else a.astype(np.float64),
                     kind="mask" if dt == np.bool_ else "input")
            self.vars.append(v)
            self.env[name] = v.val
            if dt == np.bool_:
                self.mask_inputs.append(v)

    def _strided(self, shape):
        """(shape of the array allocated, view of it passed in): most inputs are contiguous;
        some are a transposed or sliced view (strides, offsets)."""
        r = self.r
        ndim = len(shape)
        if ndim == 0 or r.random() > 0.15:
            return shape, ""
        if ndim >= 2 and r.random() < 0.4:
            return shape[::-1], ".T"
        k = r.randrange(ndim)
        form = r.choice(["::2", "1:", "1::2", ":-1"])
        n = shape[k]
        base_n = {"::2": 2 * n - 1, "1:": n + 1, "1::2": 2 * n, ":-1": n + 1}[form]
        index = "[" + ", ".join([":"] * k + [form]) + "]"
        return shape[:k] + (base_n,) + shape[k + 1:], index

    # ---- statements -------------------------------------------------------------------------
    def _new_name(self):
        self.counter += 1
        return f"t{self.counter}"

    def _emit(self, expr, depth, **info):
        """Run ``name = expr`` on float64 copies of the inputs; keep it if the result is
        tame. Values keep their dtype kind (bool masks, int64 counts, floats)."""
        name = self._new_name()
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)     # a mean of nothing: rejected
            try:
                val = eval(expr, self.env)
            except Exception as e:  # a generator bug: shapes that do not broadcast...
                raise AssertionError(f"generator produced bad numpy: {expr}: {e}") from e
        val = np.asarray(val)
        assert val.dtype.kind in "biuf", f"generator produced {val.dtype}: {expr}"
        if not np.all(np.isfinite(val)) or (val.size and np.abs(val).max() > self.MAX_ABS):
            self.counter -= 1
            raise Rejected(expr)
        if val.size > self.max_elems * 2:
            self.counter -= 1
            raise Rejected(expr)
        self.env[name] = val
        if val.dtype == np.bool_:
            info["kind"] = "mask"       # operands of only where, * and counting reductions
        v = _Var(name, val, depth, **info)
        self.vars.append(v)
        self.lines.append(f"    {name} = {expr}")
        return v

    def _pick(self, pred=None, prefer_recent=True, masks=False):
        """An operand among the values so far (boolean masks only where ``masks``)."""
        cands = [v for v in self.vars if (pred is None or pred(v)) and
                 (masks or v.kind != "mask")]
        if not cands:
            raise Rejected("no operand")
        if prefer_recent and self.r.random() < 0.6:
            return cands[-1 - min(len(cands) - 1, int(self.r.expovariate(0.7)))]
        return self.r.choice(cands)

    def _pick_pair(self):
        a = self._pick()
        cands = [v for v in self.vars if _broadcastable(a.shape, v.shape)]
        b = self.r.choice(cands)
        if self.r.random() < 0.5:
            a, b = b, a
        if int(np.prod(np.broadcast_shapes(a.shape, b.shape))) > self.max_elems:
            raise Rejected("too big")
        return a, b

    # denominators: a value bounded away from 0, else made so
    def _denominator(self, b):
        r = self.r
        vals = b.fval
        if vals.size and np.abs(vals).min() > 0.25 and r.random() < 0.7:
            return b.name
        return r.choice([f"(1.0 + {b.name} * {b.name})", f"(0.5 + np.abs({b.name}))",
                         f"(1.0 + np.exp({b.name}))" if vals.size and vals.max() < 8
                         else f"(2.0 + np.tanh({b.name}))"])

    def _unary(self):
        r = self.r
        a = self._pick()
        n = a.name
        vals = a.fval
        mx = float(vals.max()) if vals.size else 0.0
        mn = float(vals.min()) if vals.size else 0.0
        choices = [
            f"np.tanh({n})",
            f"np.abs({n})",
            f"-{n}",
            f"{n} * {_fmt(r.choice([0.5, -1.5, 2.0, 0.25]))} + {_fmt(r.uniform(-1, 1))}",
            f"np.exp({n})" if mx <= 4 else f"np.exp(np.tanh({n}))",
            f"np.exp(-np.abs({n}))",
            f"np.sqrt({n})" if mn >= 0.05 else f"np.sqrt({n} * {n} + 1.0)",
            f"np.sqrt(np.abs({n}) + 0.5)",
            f"{n} * {n}",
            f"{n} ** 2",
            f"np.maximum({n}, 0.0)",
            f"np.minimum({n}, {_fmt(r.uniform(-0.5, 1))})",
        ]
        return self._emit(r.choice(choices), a.depth)

    def _binary(self):
        r = self.r
        a, b = self._pick_pair()
        op = r.choice(["+", "-", "*", "/", "max", "min", "+", "*"])
        if op == "/":
            expr = f"{a.name} / {self._denominator(b)}"
        elif op == "max":
            expr = f"np.maximum({a.name}, {b.name})"
        elif op == "min":
            expr = f"np.minimum({a.name}, {b.name})"
        else:
            expr = f"{a.name} {op} {b.name}"
        if op == "*" and r.random() < 0.3:
            expr = f"np.tanh({a.name}) {op} {b.name}"
        return self._emit(expr, max(a.depth, b.depth))

    def _threshold(self, d, name_p, name_q):
        """A comparison of p and q (or p and a constant) whose every element is decided by a
        margin: float32 rounding cannot flip it."""
        r = self.r
        vals = np.sort(d.ravel())
        scale = 1.0 + (float(np.abs(d).max()) if d.size else 0.0)
        margin = 1e-3 * scale
        op = r.choice([">", "<", ">=", "<="])
        if vals.size and np.abs(vals).min() >= margin and name_q is not None:
            return f"{name_p} {op} {name_q}"
        # a constant in the widest gap between the compared values, central ones preferred
        if vals.size >= 2:
            gaps = np.diff(vals)
            lo, hi = int(0.1 * len(gaps)), max(int(0.9 * len(gaps)), int(0.1 * len(gaps)) + 1)
            i = lo + int(np.argmax(gaps[lo:hi]))
            c = 0.5 * (vals[i] + vals[i + 1])
            if gaps[i] < 2 * margin:
                c = vals[-1] + 0.5 if r.random() < 0.5 else vals[0] - 0.5
        elif vals.size == 1:
            c = vals[0] + r.choice([-0.5, 0.5])
        else:
            c = 0.0
        for digits in range(1, 12):
            cr = float(np.round(c, digits))
            if not vals.size or np.abs(vals - cr).min() >= margin:
                c = cr + 0.0
                break
        else:
            raise Rejected("no threshold")
        lhs = f"{name_p} - {name_q}" if name_q is not None else name_p
        return f"{lhs} {op} {c!r}"

    def _cond(self):
        """(comparison text, its shape, the depth of what it compares)."""
        r = self.r
        if r.random() < 0.5:
            p = self._pick()
            cond = self._threshold(p.fval, p.name, None)
            shape, depth = p.shape, p.depth
        else:
            p, q = self._pick_pair()
            if p is q:
                raise Rejected("self comparison")
            cond = self._threshold(p.fval - q.fval, p.name, q.name)
            shape = np.broadcast_shapes(p.shape, q.shape)
            depth = max(p.depth, q.depth)
        if r.random() < 0.2:
            c2, shape2, d2 = self._cond_simple()
            if _broadcastable(shape, shape2):
                cond = f"({cond}) {r.choice(['&', '|'])} ({c2})"
                shape, depth = np.broadcast_shapes(shape, shape2), max(depth, d2)
            if r.random() < 0.2:
                cond = f"~({cond})"
        return f"({cond})", shape, depth

    def _cond_simple(self):
        p = self._pick()
        return self._threshold(p.fval, p.name, None), p.shape, p.depth

    def _where(self):
        r = self.r
        cond, shape, depth = self._cond()
        a = self._pick(lambda v: _broadcastable(v.shape, shape))
        b = self._pick(lambda v: v is not a and _broadcastable(v.shape, shape) and
                       _broadcastable(v.shape, a.shape), prefer_recent=False)
        bn = b.name if r.random() < 0.7 else _fmt(r.choice([0.0, 1.0, -0.5]))
        if r.random() < 0.5:
            expr = f"np.where({cond}, {a.name}, {bn})"
        else:
            expr = f"np.where({cond}, {bn}, {a.name})"
        return self._emit(expr, max(a.depth, b.depth, depth))

    def _mask(self):
        """A boolean array: an output, and an operand of where, of bool * float and of
        sum (int64) / mean / any / all."""
        r = self.r
        if self.mask_inputs and self.bool_r.random() < 0.7:     # a mask argument
            m = self.mask_inputs[int(self.bool_r.integers(len(self.mask_inputs)))]
            shape, depth = m.shape, m.depth
        else:
            cond, shape, depth = self._cond()
            m = self._emit(cond, depth, kind="mask")
        use = r.random()
        if use < 0.25:
            a = self._pick(lambda v: _broadcastable(v.shape, shape))
            return self._emit(f"{a.name} * {m.name}", max(depth, a.depth))
        if use < 0.5:
            a = self._pick(lambda v: _broadcastable(v.shape, shape))
            b = self._pick(lambda v: v is not a and _broadcastable(v.shape, shape) and
                           _broadcastable(v.shape, a.shape), prefer_recent=False)
            return self._emit(f"np.where({m.name}, {a.name}, {b.name})",
                              max(depth, a.depth, b.depth))
        if use < 0.8 and m.ndim and depth < self.MAX_DEPTH:
            kind = r.choice(["sum", "mean", "any", "all"])
            axis = self._axes_text(self._random_axes(m.ndim), m.ndim)
            return self._emit(f"{m.name}.{kind}({'' if axis is None else 'axis=' + axis})",
                              depth + 1)
        return m

    def _count(self):
        """Counting reductions of a comparison: sum (int64), mean (float64), any, all."""
        r = self.r
        cond, shape, depth = self._cond()
        if len(shape) == 0 or depth >= self.MAX_DEPTH:
            raise Rejected("scalar or deep comparison")
        axes = self._random_axes(len(shape))
        kind = r.choice(["sum", "sum", "mean", "any", "all"])
        axis_text = self._axes_text(axes, len(shape))
        args = [] if axis_text is None else [f"axis={axis_text}"]
        if r.random() < 0.4:
            args.append("keepdims=True")
        if r.random() < 0.4:
            expr = f"np.{kind}({', '.join([cond] + args)})"
        else:
            expr = f"{cond}.{kind}({', '.join(args)})"
        return self._emit(expr, depth + 1)

    # ---- reductions -------------------------------------------------------------------------
    def _axes_text(self, axes, ndim):
        """One spelling of ``axes`` (sorted, normalized): None, int, negative int, tuple."""
        r = self.r
        if len(axes) == ndim and r.random() < 0.6:
            return None
        spell = [a - ndim if r.random() < 0.4 else a for a in axes]
        if len(spell) == 1 and r.random() < 0.75:
            return str(spell[0])
        r.shuffle(spell)
        return "(" + ", ".join(map(str, spell)) + ("," if len(spell) == 1 else "") + ")"

    def _random_axes(self, ndim, like=None):
        r = self.r
        if like is not None and r.random() < 0.7:
            return like
        k = r.choices(range(1, ndim + 1), weights=[6, 3, 1, 1][:ndim])[0]
        if r.random() < 0.15:
            k = ndim
        return tuple(sorted(r.sample(range(ndim), k)))

    def _reduce(self, src=None, axes=None, kind=None):
        r = self.r
        a = src or self._pick(lambda v: v.ndim >= 1 and v.depth < self.MAX_DEPTH and
                              v.val.size > 1)
        axes = axes if axes is not None else self._random_axes(a.ndim)
        kind = kind or r.choice(["sum", "max", "min", "mean", "var", "std", "prod", "sum",
                                 "max", "mean"])
        keepdims = r.random() < 0.55
        operand = a.name
        if kind == "prod":
            count = int(np.prod([a.shape[i] for i in axes]))
            c = min(0.5, 3.0 / max(count, 1))
            narrowest = self._narrowest()
            if _factor_rounding_drift(a.fval, c, axes, narrowest) > \
                    2 * np.sqrt(count) * float(np.finfo(narrowest).eps):
                raise Rejected("a product whose factors all round one way")
            operand = f"(1.0 + {_fmt(c)} * np.tanh({a.name}))"
        axis_text = self._axes_text(axes, a.ndim)
        args = []
        if axis_text is not None:
            args.append(axis_text if r.random() < 0.4 else f"axis={axis_text}")
        if keepdims:
            args.append("keepdims=True")
        elif r.random() < 0.1:
            args.append("keepdims=False")
        if r.random() < 0.35:
            fn = {"max": "np.max", "min": "np.min"}.get(kind, f"np.{kind}")
            call = f"{fn}({', '.join([operand] + args)})"
        else:
            call = f"{operand}.{kind}({', '.join(args)})"
        return self._emit(call, a.depth + 1, src=a, axes=axes, keepdims=keepdims, kind=kind)

    def _extra(self):
        """One of the ufuncs, casts and axis moves the other steps leave out, each kept
        where its value is tame (logs of values away from 0, floor/ceil/sign of values away
        from their jumps)."""
        r = self.r
        a = self._pick()
        n, vals = a.name, a.fval
        choices = [f"np.log(np.abs({n}) + 0.5)", f"np.log2({n} * {n} + 1.0)",
                   f"np.log10(np.abs({n}) + 0.25)", f"np.log1p(np.abs({n}))",
                   f"np.expm1(np.tanh({n}))", f"np.exp2(np.tanh({n}))", f"np.square({n})",
                   f"np.sin({n})", f"np.cos({n})", f"np.reciprocal(np.abs({n}) + 0.5)",
                   f"np.clip({n}, -0.5, {_fmt(r.uniform(0, 1))})",
                   f"{n}.astype(np.float64)", f"{n}.astype(np.float16)",
                   f"np.logaddexp({n}, np.tanh({n}))", f"np.arctan({n})", f"np.arcsinh({n})",
                   f"np.sinh(np.tanh({n}))", f"np.cosh(np.tanh({n}))", f"np.tan(np.tanh({n}))",
                   f"np.arcsin(0.9 * np.tanh({n}))", f"np.arccos(0.9 * np.tanh({n}))",
                   f"np.arctanh(0.9 * np.tanh({n}))", f"np.arccosh(np.abs({n}) + 1.5)",
                   f"np.arctan2({n}, 1.0 + {n} * {n})", f"np.hypot({n}, 0.5)",
                   f"np.copysign({n}, -1.0)", f"np.fmax({n}, 0.25)", f"np.fmin({n}, -0.25)",
                   f"np.deg2rad({n})"]
        if vals.size and np.abs(vals).min() > 1e-3 * (1 + np.abs(vals).max()):
            choices.append(f"np.sign({n}) * {n}")
        frac = np.abs(vals - np.round(vals))
        if vals.size and frac.min() > 1e-3 * (1 + np.abs(vals).max()):
            choices += [f"np.floor({n})", f"np.ceil({n})", f"np.trunc({n})"]
        if a.ndim >= 2:
            i, j = r.sample(range(a.ndim), 2)
            choices += [f"np.swapaxes({n}, {i}, {j})", f"np.moveaxis({n}, {i}, {j})"]
        if a.ndim < 4:          # the other steps draw axes of at most 4 dimensions
            choices.append(f"np.expand_dims({n}, {r.randint(-a.ndim - 1, a.ndim)})")
        if 1 in a.shape:
            choices.append(f"np.squeeze({n}, {a.shape.index(1)})")
        return self._emit(r.choice(choices), a.depth)

    def _composite(self):
        """One of the NumPy functions numbamr composes of its ops, on values that keep it
        tame: a reduction masked by a comparison decided by a margin, a norm, a product with
        a vector, a weighted average, nanvar/nanstd, a rounding of values clear of ties, or
        positions from np.arange (scaled, one-hot, added, a prefix mask, an additive
        triangular mask, compared with the row's argmax shifted in or far out of the row)."""
        r = self.r
        a = self._pick(lambda v: v.ndim >= 1 and v.val.size > 1 and v.depth < self.MAX_DEPTH)
        n, axis = a.name, r.randrange(-a.ndim, a.ndim)
        kind = r.choice(["masked", "masked", "norm", "product", "average", "nanvar", "round",
                         "einsum", "positions"])
        if kind == "masked":
            cond = self._threshold(a.fval, n, None)
            red = r.choice(["sum", "mean", "var", "std", "max", "min"])
            low = "0" if a.val.dtype.kind == "u" else "-10.0"    # NumPy casts initial
            extra = {"max": f", initial={low}", "min": ", initial=10.0"}.get(red, "")
            if red in ("max", "min") or r.random() < 0.4:
                call = f"np.{red}({n}, axis={axis}, where=({cond}){extra})"
            else:
                call = f"{n}.{red}(axis={axis}, where=({cond}))"
        elif kind == "norm":
            ord_text = r.choice(["", ", 1", ", np.inf", ", 2"])
            call = f"np.linalg.norm({n}{ord_text}, axis={axis})"
        elif kind == "product":
            if a.ndim < 2:
                raise Rejected("a product with a vector needs a matrix")
            index = ", ".join(["0"] * (a.ndim - 1))
            call = r.choice([f"{n} @ np.tanh({n}[{index}])",
                             f"np.dot({n}, np.cos({n}[{index}]))"] +
                            ([f"np.tanh({n}[:, 0]) @ {n}"] if a.ndim == 2 else []))
        elif kind == "average":
            call = f"np.average({n}, axis={axis}, weights=np.abs(np.tanh({n})) + 0.5)"
        elif kind == "einsum":
            subs = "abcd"[:a.ndim]
            kept = subs.replace(subs[axis], "")
            row = f"{n}[{', '.join(['0'] * (a.ndim - 1))}]"      # a vector along the last axis
            call = r.choice([f"np.einsum('{subs},{subs}->{kept}', {n}, np.tanh({n}))",
                             f"np.einsum('{subs}->{kept[::-1]}', {n})",
                             f"np.einsum('{subs},{subs[-1]}->{kept}', {n}, np.cos({row}))"
                             if a.ndim > 1 else f"np.einsum('{subs},{subs}', {n}, {n})"])
        elif kind == "nanvar":
            call = f"np.{r.choice(['nanvar', 'nanstd'])}({n}, axis={axis})"
        elif kind == "positions":           # array constants made by np.arange
            size = a.val.shape[axis]
            column = tuple(size if k == axis % a.ndim else 1 for k in range(a.ndim))
            pos = f"np.arange({size}).reshape({column})"
            call = r.choice([f"{n} * ({pos} * 0.5 - 1.0)",
                             f"np.where({pos} == {r.randrange(size)}, {n}, 0).sum(axis={axis})",
                             f"({n} + {pos}).max(axis={axis})",
                             f"np.where({pos} < {r.randrange(size + 1)}, {n}, 0.5)",
                             "by-argmax"] +
                            ([f"{n} + np.triu(np.full({a.val.shape}, -2.0), 1)"]
                             if a.ndim >= 2 else []))
            if call == "by-argmax":     # positions against a threshold of the row's own
                _check_clear_extremes(a.fval, axis)
                shift = r.choice(["", " * 3 - 5", " + 2 ** 32", " - 2 ** 32 + 1", " + 1"])
                op = r.choice(["==", "!=", "<", ">="])
                top = f"np.argmax({n}, axis={axis}, keepdims=True){shift}"
                call = f"np.where({pos} {op} {top}, {n}, 0).sum(axis={axis})"
        else:
            digits = r.choice([0, 1])
            scaled = a.fval * 10.0 ** digits
            if scaled.size and np.abs(np.abs(scaled - np.floor(scaled)) - 0.5).min() < \
                    1e-3 * (1 + np.abs(scaled).max()):
                raise Rejected("a value too close to a rounding tie")
            call = f"np.round({n}, {digits})"
        return self._emit(call, a.depth + 1)

    def _arg_reduce(self):
        """argmax or argmin along one axis or of the flattened array (int64 positions), only
        where every extreme is clear of the next value by a margin or tied with it exactly
        (NumPy takes the first of a tie; float32 rounding cannot move a clear one)."""
        r = self.r
        a = self._pick(lambda v: v.ndim >= 1 and v.val.size > 1 and v.depth < self.MAX_DEPTH)
        kind = r.choice(["argmax", "argmin"])
        axis = r.choice([None] + list(range(-a.ndim, a.ndim)))
        _check_clear_extremes(a.fval if kind == "argmax" else -a.fval, axis)
        args = [] if axis is None else [str(axis) if r.random() < 0.4 else f"axis={axis}"]
        if axis is not None and r.random() < 0.3:
            args.append("keepdims=True")
        if r.random() < 0.35:
            call = f"np.{kind}({', '.join([a.name] + args)})"
        else:
            call = f"{a.name}.{kind}({', '.join(args)})"
        return self._emit(call, a.depth + 1)

    def _narrowest(self):
        """The narrowest float dtype among the inputs: what a factor may be rounded to."""
        return min((a.dtype for a in self.inputs if a.dtype.kind == "f"),
                   key=lambda d: d.itemsize, default=np.dtype(np.float64))

    def _expand(self, red):
        """``red`` as an expression that broadcasts against its source's shape."""
        r = self.r
        src = red.src
        if red.keepdims or len(red.axes) == src.ndim:
            return red.name
        axes = red.axes
        if axes == tuple(range(len(axes))) and r.random() < 0.5:
            return red.name          # reduced leading axes: the rest broadcasts as is
        kept = tuple(1 if i in axes else s for i, s in enumerate(src.shape))
        choice = r.random()
        if choice < 0.4:
            return f"{red.name}.reshape({kept!r})"
        if choice < 0.7 or len(axes) > 1:
            idx = ", ".join("None" if i in axes else ":" for i in range(src.ndim))
            return f"{red.name}[{idx}]"
        return f"np.expand_dims({red.name}, {axes[0]})"

    def _broadcast_back(self, red=None):
        """A full-shape value that uses a reduction of it: the step of a dependent chain."""
        r = self.r
        red = red or self._pick(lambda v: v.src is not None and v.src.ndim >= 1 and
                                v.depth < self.MAX_DEPTH + 1)
        src = red.src
        e = self._expand(red)
        s = src.name
        forms = [f"{s} - {e}", f"({s} - {e}) * {_fmt(r.choice([0.5, 2.0, -1.0]))}",
                 f"{s} * {e}", f"{s} + {e}", f"np.maximum({s}, {e})",
                 f"({s} - {e}) / (1.0 + {e} * {e})", f"np.abs({s} - {e})",
                 f"np.tanh({s} * {e})"]
        rv = red.fval
        if red.kind == "max":
            forms += [f"np.exp({s} - {e})"] * 3
        if red.kind == "min":
            forms += [f"np.exp({e} - {s})", f"np.sqrt({s} - {e})"]
        if red.kind in ("std", "var") or (rv.size and np.abs(rv).min() > 0.25):
            if rv.size and np.abs(rv).min() > 0.25:
                forms += [f"({s} - {e}) / {e}"] * 2
            else:
                forms += [f"({s} - {e}) / np.sqrt({e} * {e} + 0.01)"]
        if red.kind == "mean":
            forms += [f"({s} - {e}) * ({s} - {e})"] * 2
        other = [v for v in self.vars if v is not src and v.shape == src.shape]
        if other and r.random() < 0.25:
            forms.append(f"{r.choice(other).name} - {e}")
        return self._emit(r.choice(forms), red.depth)

    def _chain(self):
        """A dependent chain: reduce, broadcast back, reduce again, ... (depth 1..4)."""
        r = self.r
        a = self._pick(lambda v: v.ndim >= 1 and v.val.size > 1 and v.depth == 0)
        length = r.choice([1, 2, 2, 3, 3, 4])
        axes = self._random_axes(a.ndim)
        cur = a
        for _ in range(length):
            if cur.depth >= self.MAX_DEPTH:
                break
            red = self._reduce(cur, self._random_axes(cur.ndim, like=axes))
            if r.random() < 0.3:     # a parallel reduction of the same value
                try:
                    self._reduce(cur, red.axes)
                except Rejected:
                    pass
            cur = self._broadcast_back(red)
        if r.random() < 0.7 and cur.depth < self.MAX_DEPTH:
            self._reduce(cur, self._random_axes(cur.ndim, like=axes))

    def _parallel(self):
        a = self._pick(lambda v: v.ndim >= 1 and v.val.size > 1 and v.depth < self.MAX_DEPTH)
        axes = self._random_axes(a.ndim)
        kinds = self.r.sample(["sum", "max", "min", "mean", "var", "std", "prod"],
                              self.r.randint(2, 3))
        for k in kinds:
            try:
                self._reduce(a, axes, k)
            except Rejected:
                pass

    def _view(self):
        """A transposed view (or a reshape adding a unit axis), reduced afterwards."""
        r = self.r
        a = self._pick(lambda v: v.ndim >= 2 and v.depth < self.MAX_DEPTH)
        if a.ndim == 2 and r.random() < 0.5:
            expr = f"{a.name}.T"
        else:
            perm = list(range(a.ndim))
            while perm == sorted(perm):
                r.shuffle(perm)
            expr = f"np.transpose({a.name}, {tuple(perm)!r})"
        v = self._emit(expr, a.depth)
        return self._reduce(v)

    def _slice(self):
        """Basic slicing (a view): a sub-range, a step, a reversal or one index of an axis."""
        r = self.r
        a = self._pick(lambda v: v.ndim >= 1 and max(v.shape) >= 2, prefer_recent=False)
        k = r.choice([i for i, d in enumerate(a.shape) if d >= 2])
        form = r.choice(["1:", ":-1", "::2", "1::2", "::-1", "0", "-1", "1:-1"])
        if form == "1:-1" and a.shape[k] < 3:
            form = "1:"
        if r.random() < 0.3 and k == a.ndim - 1 and k > 0:
            index = f"..., {form}"
        else:
            index = ", ".join([":"] * k + [form])
        return self._emit(f"{a.name}[{index}]", a.depth)

    def build(self):
        r = self.r
        self._make_inputs()
        steps = r.randint(*self.steps)
        actions = [(self._chain, 5), (self._reduce, 4), (self._parallel, 2),
                   (self._broadcast_back, 2), (self._unary, 4), (self._binary, 4),
                   (self._where, 2), (self._view, 1), (self._slice, 1.5), (self._mask, 0.5),
                   (self._count, 1)]
        fns, weights = zip(*actions)
        # the first step is a reduction-bearing step half the time
        done = 0
        attempts = 0
        while done < steps and attempts < 60:
            attempts += 1
            f = r.choices(fns, weights)[0]
            if self.arg_r.random() < self.p.get("arg_reductions", 0.0):
                f = self._arg_reduce
            elif self.arg_r.random() < self.p.get("extras", 0.0):
                f = self._extra
            elif self.p.get("composites") and self.arg_r.random() < self.p["composites"]:
                f = self._composite         # no draw without the stream: seeds keep programs
            if self.mask_inputs and self.bool_r.random() < 0.25:
                f = self._mask              # a step on a mask argument (only with the stream)
            mark = (len(self.lines), len(self.vars), self.counter)
            try:
                f()
                done += 1
            except Rejected:
                # roll back a partly emitted step
                del self.lines[mark[0]:]
                for v in self.vars[mark[1]:]:
                    self.env.pop(v.name, None)
                del self.vars[mark[1]:]
                self.counter = mark[2]
        if not any(v.src is not None for v in self.vars):
            try:
                self._reduce()
            except Rejected:
                raise Rejected("no reduction")
        self._choose_outputs()

    def _choose_outputs(self):
        r = self.r
        made = [v for v in self.vars if v.kind != "input" and v not in self.mask_inputs]
        used = set()
        for line in self.lines:
            rhs = line.split("=", 1)[1]
            for v in made:
                if _uses(rhs, v.name):
                    used.add(v.name)
        sinks = [v for v in made if v.name not in used]
        outs = [made[-1]]
        for v in sinks + r.sample(made, min(len(made), 2)):
            if v not in outs and len(outs) < 5 and r.random() < 0.7:
                outs.append(v)
        if r.random() < 0.03:
            outs.append(self.vars[0])        # an input returned as is
        r.shuffle(outs)
        names = [v.name for v in outs]
        form = r.random()
        if len(names) == 1 and form < 0.8:
            ret = names[0]
        elif form < 0.9 or len(set(names)) != len(names):
            ret = "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
        elif form < 0.95:
            ret = "[" + ", ".join(names) + "]"
        else:
            ret = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
        self.lines.append(f"    return {ret}")

    def options(self):
        r, p = self.r, self.p
        if r.random() < 0.25:
            return {}
        opts = {}
        for key in ("threads_per_row", "rows_per_block", "vector", "upcast", "unroll"):
            if r.random() < 0.5:
                opts[key] = r.choice(p[key])
        if r.random() < 0.4:
            opts["layout"] = r.choice(["row", "col"])
        while opts.get("threads_per_row", 1) * opts.get("rows_per_block", 1) > 1024:
            opts["rows_per_block"] = max(1, opts["rows_per_block"] // 2)
        # code choices, drawn apart so that the options above stay the same seed for seed
        extra = np.random.default_rng([self.seed, 17])
        for key in ("online", "reciprocal"):
            if extra.random() < 0.15:
                opts[key] = 0
        launch = np.random.default_rng([self.seed, 29])     # a stream of their own again
        for key, values in p.get("launch", {}).items():
            if launch.random() < 0.1:
                opts[key] = int(launch.choice(values))
        return opts


def _uses(text, name):
    import re
    return re.search(rf"\b{name}\b", text) is not None


def _broadcastable(a, b):
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


# ---- the public entry points ------------------------------------------------------------------

def _source(builder, options, seed, attempt):
    ins = ", ".join(f"{n} {a.dtype} {a.shape}" + (f" = <{v[0].shape}>{v[1]}" if v else "")
                    for n, a, v in zip(builder.input_names, builder.inputs,
                                       builder.input_views))
    head = [f"# fuzz seed={seed} attempt={attempt} options={options!r}",
            f"# inputs: {ins}",
            f"def f({', '.join(builder.input_names)}):"]
    return "\n".join(head + builder.lines) + "\n"


def compile_source(source, filename="<fuzz>"):
    """Exec a program's source into a function; the source is registered with linecache so
    tracebacks and numbamr's error messages show its lines."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"np": np}
    exec(compile(source, filename, "exec"), ns)
    fn = ns["f"]
    fn.source = source
    return fn


def _statements(source):
    """(parameter names, [(name or None for the return, expression)]) of a generated
    program's source (one statement per line, as ``_source`` writes them)."""
    params, body = None, []
    for line in source.splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith("def "):
            inside = text[text.index("(") + 1:text.rindex(")")]
            params = [p.strip() for p in inside.split(",") if p.strip()]
        elif text.startswith("return "):
            body.append((None, text[len("return "):]))
        else:
            name, expr = text.split("=", 1)
            body.append((name.strip(), expr.strip()))
    return params, body


def _perturbed_run(source, inputs, eps, rng, mean_ulps=0.0, half=None, halves=None):
    """The program on float64 copies of the inputs, every use of every value (input or
    intermediate) perturbed by an independent relative ``eps``: what rounding each value
    differently in each kernel that recomputes it can do to the outputs. With ``half``, only
    the intermediates that the program makes float16 are perturbed, each once (every use sees
    the same value), by a relative ``half``: what their float16 roundings can do (NumPy's and
    numbamr's differ where one computes a float16 value in float16 and the other in float32).
    A function that NumPy computes in float16 for bools or small integers
    (``np.tanh(x > 0)``) is computed in float64, as numbamr computes float16 values in
    float32. ``halves``: the float16 intermediates' names, where the caller has them."""
    import re
    params, body = _statements(source)
    env = {p: np.asarray(a, dtype=np.float64) if np.asarray(a).dtype.kind == "f" else a
           for p, a in zip(params, inputs)}
    if halves is None:
        halves = _float16_values(params, body, inputs) if half else set()
    numpy = _PerturbedNumpy(mean_ulps, rng, eps)
    for name, expr in body:
        used = {n: _perturbed(v, eps, rng)
                for n, v in env.items() if re.search(rf"\b{n}\b", expr)}
        expr = re.sub(r"\b(?!np\.)(\w+)\.(var|std)\(", r"np.\2(\1, ", expr)
        expr = re.sub(r"(\(1\.0 \+ [-+.\de]+ \* np\.tanh\(\w+\)\))\.prod\(", r"np.prod(\1, ",
                      expr)
        value = eval(expr, {"np": numpy, **used})
        if name is None:
            return value
        rounded = half * _float16_roundings(expr, used, value) if name in halves else 0.0
        env[name] = _perturbed(np.asarray(value), rounded, rng)
    raise ValueError("program without return")


def _float16_roundings(expr, used, value):
    """How many float16 roundings' worth (each up to half an epsilon, relative) a float16
    statement's value can be off: NumPy rounds after every operation of it (and after every
    step of a float16 product, about sqrt(n) of them for n factors), numbamr as it computes.
    At least one epsilon (the statement's own rounding, twice)."""
    import re
    ops = len(re.findall(r"[-+*/]|\w+\(", expr))
    largest = max((np.size(v) for v in used.values()), default=1)
    steps = np.sqrt(largest / max(np.size(value), 1)) if np.size(value) < largest else 0.0
    return max(1.0, (ops + steps) / 2)


def _perturbed(value, eps, rng):
    if value.dtype.kind != "f" or not eps:
        return value
    return value * (1 + eps * rng.uniform(-1, 1, value.shape))


def _float16_values(params, body, inputs):
    """Names of the intermediates that NumPy computes as float16 on the original inputs."""
    env = dict(zip(params, inputs))
    halves = set()
    with np.errstate(all="ignore"):
        for name, expr in body[:-1]:
            env[name] = np.asarray(eval(expr, {"np": np, **env}))
            if env[name].dtype == np.float16:
                halves.add(name)
    return halves


# one-argument functions whose float result is exact (no rounding to perturb)
_EXACT_UFUNCS = {np.negative, np.positive, np.absolute, np.fabs, np.sign, np.floor, np.ceil,
                 np.trunc, np.rint}


class _PerturbedNumpy:
    """NumPy for ``_perturbed_run``. With ``mean_ulps``, ``var`` and ``std`` centre their
    values on a mean that is off, with a random sign, by ``mean_ulps * sqrt(n)`` float32 ulps
    of the values' magnitude: how far a float32 mean of n values drifts as its running sum
    rounds (the drift is on the sum, not on each value, so perturbing values alone misses it;
    a variance moves with its square), and ``prod`` is off by as many ulps of itself. With
    ``eps``, every result of a one-argument function (``np.cos(y)`` inside a statement) is
    perturbed as a named value is: it is a value of its own, rounded in the kernel, and an
    output that cancels it (``np.dot(y, np.cos(y))`` over y = 0, -3, 3) moves with it."""

    def __init__(self, mean_ulps, rng, eps=0.0):
        self.mean_ulps, self.rng, self.eps = mean_ulps, rng, eps

    def __getattr__(self, name):
        attr = getattr(np, name)
        if not (isinstance(attr, np.ufunc) and attr.nin == 1):
            return attr

        def widened(x, *args, **kwargs):        # float16 from bools/int8: float64 instead
            x = np.asarray(x)
            if x.dtype.kind in "biu" and attr(x[()] if x.ndim == 0 else x.flat[:1]).dtype \
                    == np.float16:
                x = x.astype(np.float64)
            out = np.asarray(attr(x, *args, **kwargs))
            return out if attr in _EXACT_UFUNCS else _perturbed(out, self.eps, self.rng)
        return widened

    def var(self, x, axis=None, keepdims=False, ddof=0, where=True):
        x = np.asarray(x, dtype=np.float64)
        where = np.broadcast_to(where, x.shape)
        with np.errstate(all="ignore"):
            count = where.sum(axis=axis, keepdims=True)
            mean = np.where(where, x, 0).sum(axis=axis, keepdims=True) / count
            if self.mean_ulps:
                drift = self.mean_ulps * np.sqrt(count) * float(np.finfo(np.float32).eps)
                scale = np.abs(x).mean(axis=axis, keepdims=True)
                mean = mean + drift * scale * self.rng.choice([-1.0, 1.0], mean.shape)
            squares = np.where(where, (x - mean) ** 2, 0).sum(axis=axis, keepdims=True)
            out = squares / np.maximum(count - ddof, 0)
        return out if keepdims else np.squeeze(out, axis=axis)

    def std(self, x, axis=None, keepdims=False, ddof=0, where=True):
        return np.sqrt(self.var(x, axis=axis, keepdims=keepdims, ddof=ddof, where=where))

    def prod(self, x, axis=None, keepdims=False):
        """With ``mean_ulps``, off by ``mean_ulps * sqrt(n)`` float32 ulps (a random sign):
        what rounding its factors can do (the generator keeps no product that can drift
        further, see _factor_rounding_drift)."""
        x = np.asarray(x)
        out = np.prod(x, axis=axis, keepdims=keepdims)
        if self.mean_ulps:
            count = x.size // max(np.asarray(out).size, 1)
            drift = self.mean_ulps * np.sqrt(count) * float(np.finfo(np.float32).eps)
            out = out * (1 + drift * self.rng.choice([-1.0, 1.0], np.shape(out)))
        return out


def expected(fn, inputs, rtol=1e-4, source=None, perturb=1e-6, trials=3, slack=30.0):
    """(typed, ref, scales): NumPy on the original dtypes, NumPy on float64 copies, and per
    output the ``scale`` for ``helpers.check_outputs``: the absolute error allowed is
    ``rtol * max(max|ref|, scale)``.

    The scale is ``slack`` times how far float32 rounding is seen to move each output: NumPy's
    own float32 run, and the program run with every use of every value perturbed by a
    relative ``perturb`` (scaled down to float32 rounding), once by 64 float32 ulps for
    outputs that depend on rounding more than linearly, and once with the mean inside every
    var/std drifted as a float32 running sum drifts (see _PerturbedNumpy). It matters only for
    outputs that cancel to about 0 or amplify rounding (a row minus its own minimum, a sum of
    centered values); a well-conditioned output keeps ``rtol * max|ref|``, a float16 output at
    least one float16 ulp of its largest value, and every output twice as much as the
    program's float16 intermediates, each one float16 epsilon off, move it (see
    ``_moved_by_float16``). ``source`` (default
    ``fn.source``) is the generated program's text; without it, only the inputs are perturbed.
    """
    from helpers import flatten, to_float64
    source = source or getattr(fn, "source", None)
    with np.errstate(all="ignore"):
        typed = fn(*inputs)
        ref = fn(*[to_float64(a) for a in inputs])
        if source is not None:      # float16 intermediates of integers widened (see above)
            try:
                ref = _perturbed_run(source, inputs, 0.0, np.random.default_rng(0))
            except Exception:
                pass
        refs = [np.asarray(x, dtype=np.float64) for x in flatten(ref)]
        typs = [np.asarray(x).astype(np.float64) for x in flatten(typed)]
        halves = [np.asarray(x).dtype == np.float16 for x in flatten(typed)]
        rng = np.random.default_rng(12345)
        sens = [0.0] * len(refs)
        for _ in range(trials):
            moved, source = _moved(fn, source, inputs, refs, perturb, rng)
            for i, d in enumerate(moved):
                sens[i] = max(sens[i], d / perturb)
        # one run perturbed as much as a float32 sum of thousands of values can be off (64
        # ulps): an output that moves much more than linearly (the variance of a nearly
        # constant value goes with the square of the error in its mean) keeps that movement
        eps32 = float(np.finfo(np.float32).eps)
        big = 64 * eps32
        moved_big, _ = _moved(fn, source, inputs, refs, big, rng)
        # and once with only the means inside var/std drifted (2 sqrt(n) ulps)
        moved_mean, _ = _moved(fn, source, inputs, refs, 0.0, rng, mean_ulps=2.0)
        moved_half = _moved_by_float16(fn, source, inputs, refs, trials, rng)
    scales = []
    for r, t, s, d_big, d_mean, d_half, half in zip(refs, typs, sens, moved_big, moved_mean,
                                                    moved_half, halves):
        e32 = float(np.abs(t - r).max()) if r.size else 0.0
        tol = max(slack * e32, slack * eps32 * s, slack * d_mean, 2 * d_half)
        if d_big > 4 * big * s:
            tol = max(tol, slack * d_big)
        if half and r.size:     # a value near a float16 rounding boundary may round either way
            tol = max(tol, float(np.finfo(np.float16).eps) * float(np.abs(r).max()))
        scales.append(tol / rtol)
    return typed, ref, scales


def _moved_by_float16(fn, source, inputs, refs, trials, rng):
    """Per output, the most it moves (over ``trials`` runs) when the program's float16
    intermediates are each off by up to one float16 epsilon (two roundings' worth): NumPy
    rounds them as it computes them in float16 and numbamr as it computes them in float32,
    and an output that amplifies them (a deviation of two nearby float16 sums) is only as
    close to float64 as that; 0 for a program without float16 intermediates."""
    eps16 = float(np.finfo(np.float16).eps)
    moved = [0.0] * len(refs)
    if source is None:
        return moved
    try:        # found once for all trials; none, and no run would move anything
        halves = _float16_values(*_statements(source), inputs)
    except Exception:
        halves = None       # each run fails the same way, as _moved handles
    if halves is not None and not halves:
        return moved
    for _ in range(trials):
        d, _ = _moved(fn, source, inputs, refs, 0.0, rng, half=eps16, halves=halves)
        moved = [max(a, b) for a, b in zip(moved, d)]
    return moved


def _moved(fn, source, inputs, refs, eps, rng, mean_ulps=0.0, half=None, halves=None):
    """(per output, how far it moves when every use of every value is perturbed by a relative
    ``eps``; the source to use next time). A program not written one statement per line has
    only its inputs perturbed, and None comes back for its source, so it is not parsed again."""
    from helpers import flatten, to_float64
    out = None
    if source is not None:
        try:
            out = _perturbed_run(source, inputs, eps, rng, mean_ulps, half, halves)
        except Exception:
            source = None
    if out is None:
        out = fn(*[to_float64(a) * (1 + eps * rng.uniform(-1, 1, np.shape(a)))
                   if isinstance(a, np.ndarray) else a for a in inputs])
    outs = [np.asarray(x, dtype=np.float64) for x in flatten(out)]
    return [float(np.abs(o - r).max()) if r.size else 0.0 for o, r in zip(outs, refs)], source


def conditioned(refs, scales, limit=100.0):
    """Is every output checked to better than ``limit * rtol`` of its magnitude (or of 1)?"""
    from helpers import flatten
    for r, s in zip(flatten(refs), scales):
        r = np.asarray(r, dtype=np.float64)
        mag = float(np.abs(r).max()) if r.size else 0.0
        if not np.all(np.isfinite(r)) or s > limit * max(mag, 1.0):
            return False
    return True


def make_case(seed, profile="sim", max_attempts=50):
    """(source_text, fn, inputs, options) of fuzz case ``seed``; deterministic."""
    prof = PROFILES[profile] if isinstance(profile, str) else profile
    for attempt in range(max_attempts):
        sub = seed if attempt == 0 else seed * 7919 + attempt * 104729 + 1
        b = _Builder(sub, prof)
        try:
            b.build()
        except Rejected:
            continue
        options = b.options()
        source = _source(b, options, seed, attempt)
        fn = compile_source(source, f"<fuzz seed={seed}>")
        # float32 sums of long rows drift like sqrt(length): GPU sizes get a wider tolerance
        biggest = max(a.size for a in b.inputs)
        widen = max(1.0, (biggest / 1024) ** 0.5)
        rtol = prof["rtol"] * widen
        typed, ref, scales = expected(fn, b.inputs, rtol, slack=30.0 * widen)
        if not _typed_ok(typed) or not conditioned(ref, scales):
            continue
        fn.expected = (typed, ref, scales)     # kept: check_result need not run NumPy again
        fn.input_views = b.input_views         # (base, view text) of strided inputs, or None
        fn.rtol = rtol
        return source, fn, b.inputs, options
    raise RuntimeError(f"fuzz seed {seed}: no well-conditioned program in {max_attempts} tries")


def _typed_ok(typed):
    from helpers import flatten
    return all(np.all(np.isfinite(np.asarray(t))) for t in flatten(typed))


def to_device(inputs, fn, xp):
    """The inputs as ``xp`` (CuPy) arrays with the same strides: views are taken on device."""
    out = []
    for a, v in zip(inputs, getattr(fn, "input_views", [None] * len(inputs))):
        out.append(eval("base" + v[1], {"base": xp.asarray(v[0])}) if v else xp.asarray(a))
    return out


def unsupported_errors():
    """The numbamr errors that mean "this program is outside what numbamr compiles" (a skip,
    not a failure). Every other exception is a failure: CompileError (numba rejected the
    emitted source), VerifyError (the linear program broke an invariant), numba and Python
    errors."""
    import numbamr as nm
    return (nm.TraceError, nm.ShapeError, nm.DTypeError, nm.ArgumentError, nm.FusionError)


def check_result(source, fn, inputs, got, rtol=None):
    """Compare numbamr's outputs ``got`` of case (source, fn, inputs) with NumPy: the output
    structure, and per output shape and dtype (NumPy on the original dtypes) and values
    (float64 NumPy, ``helpers.check_outputs``). Raises AssertionError with the program."""
    from helpers import check_outputs, flatten
    rtol = rtol or getattr(fn, "rtol", 1e-4)
    typed, ref, scales = getattr(fn, "expected", None) or expected(fn, inputs, rtol,
                                                                   source=source)
    try:
        if isinstance(typed, dict):
            assert isinstance(got, dict) and sorted(got) == sorted(typed), \
                f"outputs {type(got).__name__} {sorted(got) if isinstance(got, dict) else ''}" \
                f" != numpy's dict {sorted(typed)}"
        elif isinstance(typed, (tuple, list)):
            assert type(got) is type(typed), \
                f"outputs returned as {type(got).__name__}, numpy gives {type(typed).__name__}"
        g, t, r = flatten(got), flatten(typed), flatten(ref)
        assert len(g) == len(t), f"{len(g)} outputs, numpy gives {len(t)}"
        for i, (gi, ti, ri, si) in enumerate(zip(g, t, r, scales)):
            try:
                check_outputs([gi], [ti], [ri], rtol, si)
            except AssertionError as e:
                raise AssertionError(str(e).replace("output 0", f"output {i}")
                                     + _worst(gi, ri)) from None
    except AssertionError as e:
        raise AssertionError(f"{e}\n\n{source}") from None


def _worst(got, ref):
    """Where an output is furthest off, and how many elements are off (for the message)."""
    from helpers import to_host
    try:
        g = np.asarray(to_host(got), dtype=np.float64)
        r = np.asarray(ref, dtype=np.float64)
        if g.shape != r.shape or not g.size:
            return ""
        d = np.abs(g - r)
        d[np.isnan(d)] = np.inf
        k = np.unravel_index(int(np.argmax(d)), d.shape)
        off = int(np.count_nonzero(d > 1e-3 * (np.abs(r).max() + 1e-3)))
        return (f" (worst at index {tuple(int(i) for i in k)}: got {g[k]!r}, numpy {r[k]!r};"
                f" {off} of {d.size} elements off by more than 1e-3)")
    except Exception:
        return ""


def standard_inputs(shapes, dtypes=None, seed=0):
    """Standard-normal inputs drawn in order from one seeded generator (what a regression test
    and the minimizer use, so a minimized case reproduces exactly)."""
    rng = np.random.default_rng(seed)
    dtypes = dtypes or [np.float32] * len(shapes)
    return [rng.standard_normal(tuple(s)).astype(dt) for s, dt in zip(shapes, dtypes)]


def repro(source, inputs, options, name="fuzz_case", message=""):
    """A regression test for tests/test_regressions.py: the program as a named function and a
    test calling that file's ``check`` (standard-normal inputs of the same shapes and dtypes;
    strided inputs are passed contiguous there)."""
    params, body = _statements(source)
    lines = [f"def {name}({', '.join(params)}):"]
    lines += [f"    return {e}" if n is None else f"    {n} = {e}" for n, e in body]
    shapes = [tuple(a.shape) for a in inputs]
    dts = {np.dtype(a.dtype).name for a in inputs}
    extra = ""
    if dts != {"float32"}:
        extra = ", dtypes=[" + ", ".join(f"np.{np.dtype(a.dtype).name}" for a in inputs) + "]"
    lines += ["", "", f"def test_{name}():"]
    if message:
        lines.append(f'    """{message}"""')
    lines.append(f"    check({name}, {shapes!r}, {options!r}{extra})")
    return "\n".join(lines) + "\n"


# ---- shrinking a failing program ----------------------------------------------------------------

def failure(source, inputs, options, run=True):
    """None if numbamr gets program ``source`` right, else a short description of what went
    wrong: 'mismatch: ...', or 'ExceptionName: message'. Unsupported programs (see
    ``unsupported_errors``) give 'unsupported: ...'. ``run=False`` only lowers."""
    import numbamr as nm
    fn = compile_source(source, "<fuzz candidate>")
    try:
        jitted = nm.jit(**options)(fn)
        if not run:
            jitted.lower(*inputs)
            return None
        got = jitted(*inputs)
    except unsupported_errors() as e:
        return f"unsupported: {type(e).__name__}: {e.plain_message}"
    except Exception as e:
        return f"{type(e).__name__}: {e}".split("\n")[0]
    try:
        check_result(source, fn, inputs, got)
    except AssertionError as e:
        return "mismatch: " + str(e).split("\n")[0]
    return None


def _program_text(params, body, comment=""):
    lines = ([f"# {comment}"] if comment else []) + [f"def f({', '.join(params)}):"]
    for name, expr in body:
        lines.append(f"    return {expr}" if name is None else f"    {name} = {expr}")
    return "\n".join(lines) + "\n"


def _returned_names(expr):
    import ast
    node = ast.parse(expr, mode="eval").body
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [e.id for e in node.elts]
    if isinstance(node, ast.Dict):
        return [v.id for v in node.values]
    raise ValueError(expr)


def _subexpressions(expr):
    """Strictly smaller expressions inside ``expr`` (candidates to replace it with)."""
    import ast
    tree = ast.parse(expr, mode="eval").body
    out = []
    for node in ast.walk(tree):
        if node is tree or not isinstance(node, ast.expr) or isinstance(
                node, (ast.Constant, ast.Tuple, ast.keyword, ast.Load)):
            continue
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "np":
            continue
        text = ast.unparse(node)
        if text not in out:
            out.append(text)
    return out


def _valid(params, body, inputs):
    """Does NumPy run the candidate on float64 inputs to finite, non-empty outputs?"""
    from helpers import flatten
    try:
        fn = compile_source(_program_text(params, body), "<fuzz candidate>")
        with np.errstate(all="ignore"):
            out = fn(*[np.asarray(a, dtype=np.float64) for a in inputs])
        return all(np.all(np.isfinite(np.asarray(o))) for o in flatten(out))
    except Exception:
        return False


def minimize(source, inputs, options, same=None, run=True, log=None):
    """Shrink a failing case: fewer outputs, fewer statements, smaller expressions, fewer
    options, smaller and fewer inputs, while ``same(failure_text)`` stays true (default: the
    same exception type, or again a mismatch). Returns (source, inputs, options, failure)."""
    first = failure(source, inputs, options, run)
    assert first is not None and not first.startswith("unsupported"), "the case does not fail"
    kind = first.split(":")[0]
    same = same or (lambda text: text is not None and text.split(":")[0] == kind)
    params, body = _statements(source)
    inputs, options = list(inputs), dict(options)

    def standard(shapes, dtypes):
        return standard_inputs(shapes, dtypes)

    def fails(p, b, ins, opts):
        if not _valid(p, b, ins):
            return False
        return same(failure(_program_text(p, b), ins, opts, run))

    def dead_code(b):
        live = set(_returned_names(b[-1][1]))
        keep = [b[-1]]
        import re
        for name, expr in reversed(b[:-1]):
            if name in live:
                keep.append((name, expr))
                live |= set(re.findall(r"\b[a-z]\w*\b", expr))
        return keep[::-1]

    changed = True
    while changed:
        changed = False
        # outputs: one alone, else drop one at a time
        names = _returned_names(body[-1][1])
        cands = [[n] for n in names] if len(names) > 1 else []
        cands += [[n for n in names if n != m] for m in names] if len(names) > 2 else []
        for keep in cands:
            ret = keep[0] if len(keep) == 1 else "(" + ", ".join(keep) + ")"
            b = dead_code(body[:-1] + [(None, ret)])
            if fails(params, b, inputs, options):
                body, changed = b, True
                break
        b = dead_code(body)
        if b != body and fails(params, b, inputs, options):
            body, changed = b, True
        # expressions: replace a statement's expression by a part of it
        for i in range(len(body) - 1):
            name, expr = body[i]
            for sub in sorted(_subexpressions(expr), key=len):
                b = body[:i] + [(name, sub)] + body[i + 1:]
                if fails(params, b, inputs, options):
                    body, changed = dead_code(b), True
                    break
            if changed:
                break
        # statements: inline a plain alias (t3 = t2) away
        for i, (name, expr) in enumerate(body[:-1]):
            if expr.isidentifier():
                import re
                b = [(n, re.sub(rf"\b{name}\b", expr, e)) for n, e in body[:i] + body[i + 1:]]
                if fails(params, b, inputs, options):
                    body, changed = b, True
                    break
        # options
        for k in list(options):
            o = {kk: v for kk, v in options.items() if kk != k}
            if fails(params, body, inputs, o):
                options, changed = o, True
        # inputs: unused ones go, dims shrink, dtypes become float32
        import re
        for j, p in enumerate(params):
            if not any(re.search(rf"\b{p}\b", e) for _, e in body):
                params = params[:j] + params[j + 1:]
                inputs = inputs[:j] + inputs[j + 1:]
                changed = True
                break
        shapes = [a.shape for a in inputs]
        dtypes = [a.dtype for a in inputs]
        if not all(a.flags.c_contiguous for a in inputs) or any(
                not np.array_equal(a, b) for a, b in zip(inputs, standard(shapes, dtypes))):
            trial = standard(shapes, dtypes)      # the inputs a regression test will draw
            if fails(params, body, trial, options):
                inputs, changed = trial, True
        for size in sorted({d for a in inputs for d in a.shape if d > 1}, reverse=True):
            for smaller in [1, 2, 3, 5, 7, 17]:
                if smaller >= size:
                    break
                trial = standard([tuple(smaller if d == size else d for d in a.shape)
                                  for a in inputs], dtypes)
                if fails(params, body, trial, options):
                    inputs, changed = trial, True
                    break
        for j in range(len(inputs)):
            for d in range(inputs[j].ndim):
                for smaller in [1, 2, 3, 5, 7, 17]:
                    if smaller >= inputs[j].shape[d]:
                        break
                    shapes = [a.shape for a in inputs]
                    shapes[j] = shapes[j][:d] + (smaller,) + shapes[j][d + 1:]
                    trial = standard(shapes, dtypes)
                    if fails(params, body, trial, options):
                        inputs, changed = trial, True
                        break
            if inputs[j].dtype != np.float32:
                dts = list(dtypes)
                dts[j] = np.float32
                trial = standard([a.shape for a in inputs], dts)
                if fails(params, body, trial, options):
                    inputs, dtypes, changed = trial, dts, True
        if log:
            log(_program_text(params, body))
    src = _program_text(params, body)
    return src, inputs, options, failure(src, inputs, options, run)


def _main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="print (and optionally shrink) fuzz case SEED")
    ap.add_argument("seed", type=int)
    ap.add_argument("--profile", default="sim")
    ap.add_argument("--minimize", action="store_true", help="shrink it while it fails")
    add_stream_options(ap)
    args = ap.parse_args(argv)
    source, fn, inputs, options = make_case(args.seed, with_streams(PROFILES[args.profile],
                                                                    args))
    print(source)
    why = failure(source, inputs, options)
    print("numbamr:", why or "matches NumPy")
    if args.minimize and why and not why.startswith("unsupported"):
        src, ins, opts, why = minimize(source, inputs, options)
        print(f"\n# minimized: options={opts!r}, inputs: "
              + ", ".join(f"{a.dtype} {a.shape}" for a in ins))
        print(src)
        print("numbamr:", why)
        print("\n# as a regression test:\n")
        print(repro(src, ins, opts, f"seed_{args.seed}", why or ""))


if __name__ == "__main__":
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import conftest  # noqa: F401  (simulator when there is no GPU, before numba loads)
    _main()
