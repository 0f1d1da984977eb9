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
)

PROFILES = {"sim": SIM, "gpu": GPU}

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

    # ---- shapes and inputs ------------------------------------------------------------------
    def _main_shape(self):
        r, p = self.r, self.p
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
        self.inputs, self.input_names = [], []
        for name, s in specs:
            dt = np.float64 if r.random() < 0.08 else np.float32
            a = rng.standard_normal(s).astype(dt)
            self.inputs.append(a)
            self.input_names.append(name)
            v = _Var(name, a.astype(np.float64), kind="input")
            self.vars.append(v)
            self.env[name] = v.val

    # ---- statements -------------------------------------------------------------------------
    def _new_name(self):
        self.counter += 1
        return f"t{self.counter}"

    def _emit(self, expr, depth, **info):
        """Run ``name = expr`` on the float64 values; keep it if the result is tame."""
        name = self._new_name()
        with np.errstate(all="ignore"):
            try:
                val = eval(expr, self.env)
            except Exception as e:  # a generator bug: shapes that do not broadcast...
                raise AssertionError(f"generator produced bad numpy: {expr}: {e}") from e
        val = np.asarray(val, dtype=np.float64)
        if not np.all(np.isfinite(val)) or (val.size and np.abs(val).max() > self.MAX_ABS):
            self.counter -= 1
            raise Rejected(expr)
        if val.size > self.p["max_elems"] * 2:
            self.counter -= 1
            raise Rejected(expr)
        self.env[name] = val
        v = _Var(name, val, depth, **info)
        self.vars.append(v)
        self.lines.append(f"    {name} = {expr}")
        return v

    def _pick(self, pred=None, prefer_recent=True):
        cands = [v for v in self.vars if pred is None or pred(v)]
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
        if int(np.prod(np.broadcast_shapes(a.shape, b.shape))) > self.p["max_elems"]:
            raise Rejected("too big")
        return a, b

    # denominators: a value bounded away from 0, else made so
    def _denominator(self, b):
        r = self.r
        vals = b.val
        if vals.size and np.abs(vals).min() > 0.25 and r.random() < 0.7:
            return b.name
        return r.choice([f"(1.0 + {b.name} * {b.name})", f"(0.5 + np.abs({b.name}))",
                         f"(1.0 + np.exp({b.name}))" if vals.size and vals.max() < 8
                         else f"(2.0 + np.tanh({b.name}))"])

    def _unary(self):
        r = self.r
        a = self._pick()
        n = a.name
        vals = a.val
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
        r = self.r
        if r.random() < 0.5:
            p = self._pick()
            cond = self._threshold(p.val, p.name, None)
            shape = p.shape
        else:
            p, q = self._pick_pair()
            if p is q:
                raise Rejected("self comparison")
            cond = self._threshold(p.val - q.val, p.name, q.name)
            shape = np.broadcast_shapes(p.shape, q.shape)
        return f"({cond})", shape

    def _where(self):
        r = self.r
        cond, shape = self._cond()
        if r.random() < 0.2:
            c2, shape2 = self._cond()
            if _broadcastable(shape, shape2):
                cond = f"({cond} {r.choice(['&', '|'])} {c2})"
                shape = np.broadcast_shapes(shape, shape2)
        a = self._pick(lambda v: _broadcastable(v.shape, shape))
        b = self._pick(lambda v: _broadcastable(v.shape, shape) and
                       _broadcastable(v.shape, a.shape), prefer_recent=False)
        bn = b.name if r.random() < 0.7 else _fmt(r.choice([0.0, 1.0, -0.5]))
        if r.random() < 0.5:
            expr = f"np.where({cond}, {a.name}, {bn})"
        else:
            expr = f"np.where({cond}, {bn}, {a.name})"
        return self._emit(expr, max(a.depth, b.depth))

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
        rv = red.val
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

    def build(self):
        r = self.r
        self._make_inputs()
        steps = r.randint(2, 7)
        actions = [(self._chain, 5), (self._reduce, 4), (self._parallel, 2),
                   (self._broadcast_back, 2), (self._unary, 4), (self._binary, 4),
                   (self._where, 2), (self._view, 1)]
        fns, weights = zip(*actions)
        # the first step is a reduction-bearing step half the time
        done = 0
        attempts = 0
        while done < steps and attempts < 60:
            attempts += 1
            f = r.choices(fns, weights)[0]
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
        made = [v for v in self.vars if v.kind != "input"]
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
    ins = ", ".join(f"{n} {a.dtype} {a.shape}" for n, a in zip(builder.input_names,
                                                             builder.inputs))
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
    return ns["f"]


def expected(fn, inputs, rtol=1e-4, perturb=1e-6, trials=3, slack=30.0):
    """(typed, ref, scales): NumPy on the original dtypes, NumPy on float64 copies, and per
    output the ``scale`` for ``helpers.check_outputs``: the absolute error allowed is
    ``rtol * max(max|ref|, scale)``.

    The scale comes from how far float32 arithmetic is seen to move this output: NumPy's own
    float32 run, and the output's sensitivity to relative input perturbations of ``perturb``
    (scaled to float32 rounding), both times ``slack``. It only matters for outputs that
    cancel to about 0 or amplify rounding; a well-conditioned output keeps ``rtol * max|ref|``.
    """
    from helpers import flatten, to_float64
    with np.errstate(all="ignore"):
        typed = fn(*inputs)
        ref = fn(*[to_float64(a) for a in inputs])
        refs = [np.asarray(x, dtype=np.float64) for x in flatten(ref)]
        typs = [np.asarray(x).astype(np.float64) for x in flatten(typed)]
        rng = np.random.default_rng(12345)
        sens = [0.0] * len(refs)
        for _ in range(trials):
            pert = [to_float64(a) * (1 + perturb * rng.uniform(-1, 1, np.shape(a)))
                    if isinstance(a, np.ndarray) else a for a in inputs]
            outs = [np.asarray(x, dtype=np.float64) for x in flatten(fn(*pert))]
            for i, (o, r) in enumerate(zip(outs, refs)):
                d = float(np.abs(o - r).max()) if r.size else 0.0
                sens[i] = max(sens[i], d / perturb)
    eps32 = float(np.finfo(np.float32).eps)
    scales = []
    for r, t, s in zip(refs, typs, sens):
        e32 = float(np.abs(t - r).max()) if r.size else 0.0
        tol = max(slack * e32, slack * eps32 * s)
        scales.append(tol / rtol)
    return typed, ref, scales


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
        typed, ref, scales = expected(fn, b.inputs, prof["rtol"])
        if not _typed_ok(typed) or not conditioned(ref, scales):
            continue
        fn.expected = (typed, ref, scales)     # kept: check_result need not run NumPy again
        fn.rtol = prof["rtol"]
        return source, fn, b.inputs, options
    raise RuntimeError(f"fuzz seed {seed}: no well-conditioned program in {max_attempts} tries")


def _typed_ok(typed):
    from helpers import flatten
    return all(np.all(np.isfinite(np.asarray(t))) for t in flatten(typed))


def check_result(source, fn, inputs, got, rtol=None):
    """Compare numbamr's outputs ``got`` of case (source, fn, inputs) with NumPy: the output
    structure, and per output shape and dtype (NumPy on the original dtypes) and values
    (float64 NumPy, ``helpers.check_outputs``). Raises AssertionError with the program."""
    from helpers import check_outputs, flatten
    rtol = rtol or getattr(fn, "rtol", 1e-4)
    typed, ref, scales = getattr(fn, "expected", None) or expected(fn, inputs, rtol)
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
                raise AssertionError(str(e).replace("output 0", f"output {i}")) from None
    except AssertionError as e:
        raise AssertionError(f"{e}\n\n{source}") from None


def repro(source, inputs, options):
    """A standalone regression-test body: the program, its inputs and the check."""
    lines = [source.rstrip(), "", "", "def test_case():",
             "    rng = np.random.default_rng(0)"]
    names = []
    for i, a in enumerate(inputs):
        names.append(f"a{i}")
        lines.append(f"    a{i} = rng.standard_normal({a.shape!r}).astype(np.{a.dtype})")
    lines.append(f"    check(f, ({', '.join(names)},), {options!r})")
    return "\n".join(lines) + "\n"
