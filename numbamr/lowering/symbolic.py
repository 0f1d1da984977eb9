"""Integer index algebra: affine sums of variables, floor-divisions and modulos by constants.

Index expressions of a kernel are built from a few loop variables (the row, the position in a
loop) through reshapes, permutes and slices. ``Expr`` keeps them in a normal form
(``sum(coef * atom) + const``) and simplifies with the variables' ranges, so that
``(r // 8) * 8 + r % 8`` becomes ``r`` and a contiguous row is addressed as ``base + q``.
"""
from math import gcd


class Var:
    """An integer variable ranging over [0, size)."""
    __slots__ = ("name", "size")

    def __init__(self, name, size):
        self.name, self.size = name, int(size)

    def __repr__(self):
        return self.name

    def key(self):
        return (0, self.name)

    def bounds(self):
        return 0, self.size - 1


class _Div:
    __slots__ = ("x", "d")

    def __init__(self, x, d):
        self.x, self.d = x, d

    def key(self):
        return (1, self.d, self.x.key())

    def bounds(self):
        lo, hi = self.x.bounds()
        return lo // self.d, hi // self.d

    def __eq__(self, o):
        return isinstance(o, _Div) and o.d == self.d and o.x == self.x

    def __hash__(self):
        return hash(("div", self.d, self.x))


class _Mod:
    __slots__ = ("x", "d")

    def __init__(self, x, d):
        self.x, self.d = x, d

    def key(self):
        return (2, self.d, self.x.key())

    def bounds(self):
        return 0, self.d - 1

    def __eq__(self, o):
        return isinstance(o, _Mod) and o.d == self.d and o.x == self.x

    def __hash__(self):
        return hash(("mod", self.d, self.x))


class Expr:
    """sum(coef * atom) + const, with atoms Var, _Div(Expr, d) or _Mod(Expr, d)."""
    __slots__ = ("terms", "const", "_hash")

    def __init__(self, terms, const):
        self.terms = terms          # tuple of (atom, coef), sorted by atom key, coef != 0
        self.const = int(const)
        self._hash = None

    # ---- construction ----------------------------------------------------------------
    @staticmethod
    def make(coefs, const):
        coefs, extra = _merge_div_mod({a: c for a, c in coefs.items() if c != 0})
        terms = tuple(sorted(((a, c) for a, c in coefs.items() if c != 0),
                             key=lambda t: t[0].key()))
        return Expr(terms, const + extra)

    def __add__(self, o):
        o = lift(o)
        coefs = dict(self.terms)
        for a, c in o.terms:
            coefs[a] = coefs.get(a, 0) + c
        return Expr.make(coefs, self.const + o.const)

    __radd__ = __add__

    def __sub__(self, o):
        return self + lift(o) * -1

    def __mul__(self, k):
        if isinstance(k, Expr):
            if k.terms:
                if self.terms:
                    raise ValueError("index expressions are affine: no product of variables")
                return k * self.const
            k = k.const
        k = int(k)
        if k == 0:
            return Expr((), 0)
        return Expr(tuple((a, c * k) for a, c in self.terms), self.const * k)

    __rmul__ = __mul__

    def __floordiv__(self, d):
        d = int(d)
        assert d > 0
        if d == 1:
            return self
        whole, rest = {}, {}
        for a, c in self.terms:
            (whole if c % d == 0 else rest)[a] = c // d if c % d == 0 else c
        q_const, r_const = divmod(self.const, d)
        rest_e = Expr.make(rest, r_const)
        lo, hi = rest_e.bounds()
        base = Expr.make(whole, q_const)
        if 0 <= lo and hi < d:
            return base
        g = gcd(d, *rest.values())
        if g > 1:       # (g y + r) // (g m) == (y + r // g) // m for an integer y
            rest_e = Expr.make({a: c // g for a, c in rest.items()}, r_const // g)
            d = d // g
            lo, hi = rest_e.bounds()
            if 0 <= lo and hi < d:
                return base
        if not rest_e.terms:
            return base + rest_e.const // d
        if len(rest_e.terms) == 1 and rest_e.const == 0 and rest_e.terms[0][1] == 1 \
                and isinstance(rest_e.terms[0][0], _Div):
            inner = rest_e.terms[0][0]          # (x // a) // b == x // (a * b)
            return base + Expr(((_Div(inner.x, inner.d * d), 1),), 0)
        return base + Expr(((_Div(rest_e, d), 1),), 0)

    def __mod__(self, d):
        d = int(d)
        assert d > 0
        if d == 1:
            return Expr((), 0)
        rest = {a: c for a, c in self.terms if c % d != 0}
        rest_e = Expr.make(rest, self.const % d)
        lo, hi = rest_e.bounds()
        if 0 <= lo and hi < d:
            return rest_e
        if not rest_e.terms:
            return Expr((), rest_e.const % d)
        g = gcd(d, *rest.values())
        if g > 1:       # (g y + r) % (g m) == g ((y + r // g) % m) + r % g for an integer y
            y = Expr.make({a: c // g for a, c in rest.items()}, rest_e.const // g)
            return (y % (d // g)) * g + rest_e.const % g
        if len(rest_e.terms) == 1 and rest_e.const == 0 and rest_e.terms[0][1] == 1:
            a = rest_e.terms[0][0]
            if isinstance(a, _Mod) and a.d % d == 0:     # (x % (k d)) % d == x % d
                return a.x % d
        return Expr(((_Mod(rest_e, d), 1),), 0)

    # ---- queries -----------------------------------------------------------------------
    def bounds(self):
        lo = hi = self.const
        for a, c in self.terms:
            alo, ahi = a.bounds()
            lo += min(c * alo, c * ahi)
            hi += max(c * alo, c * ahi)
        return lo, hi

    def is_const(self):
        return not self.terms

    def vars(self):
        out = set()
        for a, _ in self.terms:
            if isinstance(a, Var):
                out.add(a)
            else:
                out |= a.x.vars()
        return out

    def coef(self, var):
        """Coefficient of ``var`` when it appears only as a plain term, else None."""
        for a, c in self.terms:
            if a is var:
                return c
        return 0 if var not in self.vars() else None

    def substitute(self, mapping):
        """Replace variables by expressions (``mapping``: Var -> Expr) and re-simplify."""
        out = Expr((), self.const)
        for a, c in self.terms:
            if isinstance(a, Var):
                sub = mapping.get(a)
                out = out + (sub * c if sub is not None else Expr(((a, c),), 0))
            elif isinstance(a, _Div):
                out = out + (a.x.substitute(mapping) // a.d) * c
            else:
                out = out + (a.x.substitute(mapping) % a.d) * c
        return out

    def key(self):
        return (3, self.const, tuple((a.key(), c) for a, c in self.terms))

    def __eq__(self, o):
        if isinstance(o, int):
            return not self.terms and self.const == o
        return isinstance(o, Expr) and self.const == o.const and self.terms == o.terms

    def __hash__(self):
        if self._hash is None:
            self._hash = hash((self.const, self.terms))
        return self._hash

    def render(self, name_of=lambda v: v.name):
        """Python source text; ``name_of`` maps each Var to the name it has in the source."""
        parts = []
        for a, c in self.terms:
            if isinstance(a, Var):
                t = name_of(a)
            elif isinstance(a, _Div):
                t = f"({a.x.render(name_of)}) // {a.d}"
            else:
                t = f"({a.x.render(name_of)}) % {a.d}"
            if c == 1:
                parts.append(t)
            elif c == -1:
                parts.append(f"-{_paren(t)}")
            else:
                parts.append(f"{c} * {_paren(t)}")
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts).replace("+ -", "- ")

    def __repr__(self):
        return self.render()


def _paren(t):
    return t if t.isidentifier() or t.isdigit() else f"({t})"


def _merge_div_mod(coefs):
    """c*d*(x // d) + c*(x % d) == c*x: merge such pairs (contiguous dimensions).

    Returns the merged coefficients and the constant the merges contributed.
    """
    extra, changed = 0, True
    while changed:
        changed = False
        for a, c in list(coefs.items()):
            if not isinstance(a, _Mod):
                continue
            div_e = a.x // a.d          # normalized as the division would be written
            if len(div_e.terms) != 1 or div_e.const or div_e.terms[0][1] != 1:
                continue
            div = div_e.terms[0][0]
            if coefs.get(div, 0) == c * a.d:
                del coefs[a], coefs[div]
                for xa, xc in a.x.terms:
                    coefs[xa] = coefs.get(xa, 0) + xc * c
                coefs = {k: v for k, v in coefs.items() if v != 0}
                extra += a.x.const * c
                changed = True
                break
    return coefs, extra


def lift(x):
    if isinstance(x, Expr):
        return x
    if isinstance(x, Var):
        return Expr(((x, 1),), 0)
    return Expr((), int(x))


def var(name, size):
    """A new variable over [0, size) as an expression; size-1 variables are the constant 0."""
    if size <= 1:
        return Expr((), 0)
    return lift(Var(name, size))


def unflatten(flat, shape, outermost_whole=False):
    """Per-dimension indices of the row-major flat index ``flat`` into ``shape``.
    ``outermost_whole``: ``flat`` is known to be below the shape's size, whatever its range
    says, so the outermost index is the quotient itself (no modulo by its extent, which
    would put that extent into the code)."""
    out, rest = [], lift(flat)
    real = [i for i, size in enumerate(shape) if size > 1]
    for i in reversed(range(len(shape))):
        size = shape[i]
        if outermost_whole and real and i == real[0]:
            out.append(rest)
            break
        out.append(rest % size if size > 1 else Expr((), 0))
        rest = rest // size if size > 1 else rest
    out += [Expr((), 0)] * (len(shape) - len(out))
    return list(reversed(out))


def flatten(index, shape):
    """Row-major flat index of the per-dimension ``index`` into ``shape``."""
    flat, stride = Expr((), 0), 1
    for i, size in zip(reversed(index), reversed(shape)):
        flat = flat + lift(i) * stride
        stride *= size
    return flat
