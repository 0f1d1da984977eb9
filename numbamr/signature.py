"""A call's signature: each argument as a leaf (an array or a static value) and the key the
compiled kernels are kept under, and, for NUMBAMR_DEBUG=1, what made a call's key new.

A signature's key holds each leaf's key (an array's dtype, shape, strides, offset, alignment
and memory; a static's type and value), each out= array's layout, the study knobs in force
(``numbamr.experimental``) and, on a GPU, the device and its compute capability.
"""
import dataclasses
import sys

import numpy as np

from . import dtypes
from .errors import ArgumentError
from .experimental import current_knobs
from .runtime import arrays
from .trace import frozen_names


class Leaf:
    """One argument value after binding: an array or a static value."""
    __slots__ = ("name", "value", "array")

    def __init__(self, name, value, array):
        self.name, self.value, self.array = name, value, array

    def key(self):
        if self.array is not None:
            a = self.array
            return ("A", a.layout_key(), a.where)
        return self.static_key()

    def shape_class(self):
        """The key with an array's extents left out (and its strides, where they are those
        of its shape in C order): what a kernel generic in its rows may serve."""
        if self.array is None:
            return self.static_key()
        a = self.array
        c_order = a.strides == arrays._c_element_strides(a.shape)
        return ("A", a.dtype.str, len(a.shape), "C" if c_order else (a.shape, a.strides),
                a.offset, a.aligned, a.where)

    def static_key(self):
        try:
            hash(self.value)
        except TypeError:
            raise ArgumentError(f"argument {self.name!r} is a {type(self.value).__name__}, which "
                                "is neither an array nor a hashable static value") from None
        return ("S", type(self.value).__name__, dtypes.static_key(self.value))


def knobs_key():
    """The study knobs in force, as an entry of a signature's key: they change what the
    kernels are (the scheduler's thresholds) or how they are launched (a persistent grid's
    cap), so a call under other knobs compiles its own (numbamr.experimental)."""
    return (("knobs", current_knobs()),)


def log_compile(fn, key, leaves, lowered, built):
    """NUMBAMR_DEBUG=1: say why this call needs kernels (which part of the signature is new,
    in words) and whether they are compiled or served by kernels built already."""
    why = _why_new(fn, key, leaves)
    if lowered.generic:
        what = "kernels generic in their rows"
    else:
        what = "kernels for these shapes"
    if built:
        print(f"numbamr: {fn.__name__}: {why}; served by the {what} built already "
              "(nothing to compile)", file=sys.stderr)
    else:
        print(f"numbamr: compiling {fn.__name__}: {why}; {what}", file=sys.stderr)
    read, closure = frozen_names(fn.fn)
    for kind, names in (("globals", read), ("closure variables", closure)):
        if names:
            print(f"numbamr: {fn.__name__} read {kind} at trace time (frozen): "
                  f"{', '.join(names)}", file=sys.stderr)


def _why_new(fn, key, leaves):
    """What differs between ``key`` and the nearest signature compiled before, in words."""
    if not fn._cache:
        return "first call"
    near = min(fn._cache, key=lambda k: sum(a != b for a, b in zip(k, key)) +
               abs(len(k) - len(key)))
    if len(near) != len(key):
        return "a different number of arguments"
    names = [leaf.name for leaf in leaves] + [f"out[{i}]" for i in range(len(key))]
    diffs = [_entry_change(names[i], a, b) for i, (a, b) in enumerate(zip(near, key)) if a != b]
    return "; ".join(diffs) or "different arguments"


def _entry_change(name, old, new):
    """One entry's change between two signature keys (an argument's, an out= array's, the
    study knobs', the device's), in words."""
    if old[0] == new[0] == "O":
        return f"{name}: {_key_change(old[1:], new[1:])}"
    if old[0] == new[0] == "knobs":
        return "study knobs " + ", ".join(
            f"{f.name} {getattr(old[1], f.name)} -> {getattr(new[1], f.name)}"
            for f in dataclasses.fields(old[1])
            if getattr(old[1], f.name) != getattr(new[1], f.name))
    if old[0] == new[0] == "device":
        return f"device {old[1]} -> {new[1]}"
    return f"argument {name!r}: {_key_change(old, new)}"


def _static_text(key):
    """A static value's key as the value reads (a float's key holds its repr beside its bits,
    see dtypes.static_key)."""
    if isinstance(key, tuple) and len(key) >= 3 and isinstance(key[1], str) and \
            isinstance(key[0], str):
        return key[1]
    return repr(key)


_ARRAY_PARTS = ("dtype", "shape", "strides", "offset", "16-byte alignment")


def _key_change(old, new):
    """One argument's change between two signature keys, in words."""
    if old[0] == new[0] == "A":
        (old_layout, old_where), (new_layout, new_where) = old[1:], new[1:]
        old_layout = (np.dtype(old_layout[0]).name,) + old_layout[1:]
        new_layout = (np.dtype(new_layout[0]).name,) + new_layout[1:]
        parts = [f"{what} {a} -> {b}"
                 for what, a, b in zip(_ARRAY_PARTS, old_layout, new_layout) if a != b]
        if old_where != new_where:
            parts.append(f"memory {old_where} -> {new_where}")
        return ", ".join(parts)
    if old[0] == new[0] == "S":
        return f"{old[1]} {_static_text(old[2])} -> {new[1]} {_static_text(new[2])}"
    return "an array where a static value was, or the other way"
