"""Autotuning (``numbamr.jit(autotune=True)``): a signature's first call on a GPU times a few
layouts beside the heuristics' choice, on the call's own arrays, and keeps the fastest.

The candidates change one option of the heuristics' layout at a time (threads per row halved
and doubled, two blocks a multiprocessor, rows streamed instead of held in registers, twice
the unroll, split rows halved and doubled); options the user forced are never changed.
Every candidate's results are compared with the heuristics' before it may win, and it must
be faster by more than timing noise (``MARGIN``). The choice is
written to ``<cache>/tune/<key>.json``, keyed by the GPU's name, the heuristics' kernel
sources (which depend on the function, the signature and numbamr's version) and the study
knobs in force (``numbamr.experimental``), so a later
process compiles only the chosen layout. In numba's CPU simulator nothing is tuned: its
timings say nothing about a GPU.
"""
import dataclasses
import hashlib
import json
import math
import os
import sys
import time
import warnings

import numpy as np

from . import dtypes
from .errors import NumbamrError
from .lowered import Compiled
from .lowering import KernelOptions
from .lowering.pack import DEFAULT_COLUMNS, word_columns
from .runtime import cudadriver, device, diskcache
from .runtime.launch import make_launchers, run

TIME_PER_ROUND = 0.01   # seconds of calls a timing round takes (at least 3, at most 200)
ROUNDS = 3              # timing rounds per candidate; the fastest counts
# a candidate replaces the heuristics' layout only when it is this much faster: rounds of the
# same kernels differ by about 1% on the H200, and a choice within that would be noise
MARGIN = 0.02


def applies(simulator):
    """Is anything tuned where kernels run this way? Only on a GPU."""
    return not simulator


def candidates(lowered, forced):
    """Option sets to time: {} (the heuristics' choice), then one change each to the layout
    of the kernel with the most threads; fields in ``forced`` stay as the user set them."""
    biggest = max(lowered.kernels, key=lambda k: k.grid * k.block)
    main, main_kernel = biggest.layout, biggest.kernel
    t = main.threads_per_row
    out = [{}, {"threads_per_row": t // 2}, {"threads_per_row": t * 2}, {"blocks_per_sm": 2}]
    if any(plan.resident for plan in main.groups):
        out.append({"upcast": 0})
    streamed = [plan.chunks for plan in main.groups if not plan.resident]
    if streamed:
        out.append({"unroll": 2 * max(streamed)})
    if main.split > 1:
        out += [{"split": main.split // 2}, {"split": main.split * 2}]
    elif main.layout == "row":
        # the same threads a row, a quarter or four times the rows a block: on the H200,
        # short rows ran 1-2% faster or 20-24% slower in blocks of 64 threads than of 256,
        # by what the kernel writes (options.ROW_OUTPUT_BLOCK_THREADS)
        rb = main.rows_per_block
        if rb > 1:
            out.append({"rows_per_block": max(1, rb // 4)})
        if t * rb * 4 <= 1024:
            out.append({"rows_per_block": rb * 4})
    if main.layout == "col" and main_kernel.columns > 1:
        out.append({"columns": 1})      # packed by the options: one column a thread
    elif main.layout == "col" and word_columns(main_kernel) > DEFAULT_COLUMNS:
        # adjacent columns a thread: narrow columns read as the four-byte words of float32
        out.append({"columns": word_columns(main_kernel)})
    if device.capable(device.arch(), device.L2_POLICY_ARCH) and \
            any(ins.op == "VLOAD" for k in lowered.kernels for ins in k.program.instrs):
        # loads under the L2 evict_last policy the other way round (on the H200, 1-2.3%
        # faster for kernels that write whole rows, 0.3-1.4% slower for the others)
        out.append({"evict_last": int(not main.evict_last)})
    taken = {f.name for f in dataclasses.fields(forced) if getattr(forced, f.name) is not None}
    valid = []
    for c in out:
        if taken & set(c) or not all(_in_range(k, v) for k, v in c.items()):
            continue
        if c not in valid:
            valid.append(c)
    return valid


def _in_range(name, value):
    try:
        KernelOptions(**{name: value})
    except NumbamrError:
        return False
    return True


def tune(jf, bound, leaves, outs, ctx, lowered):
    """The fastest of ``lowered`` (the heuristics' kernels) and its candidates, compiled;
    the choice is read from, or written to, the disk cache (a stored choice compiles only
    its own kernels)."""
    path = _cache_path(lowered, jf.options)
    known = _read(path)
    if known:
        try:
            return _compile(_lowered(jf, bound, leaves, outs, known), ctx)
        except NumbamrError:        # the choice no longer applies: tune again
            known = None
    base = _compile(lowered, ctx)
    if known is not None:           # {}: the heuristics' kernels were fastest
        return base
    reference = _host_outputs(run(base, leaves, ctx, outs))
    best, best_choice = base, {}
    times = {"heuristics": measure(lambda: run(base, leaves, ctx, outs), ctx)}
    best_time = times["heuristics"] * (1 - MARGIN)
    choices = candidates(base.lowered, jf.options)[1:]
    _progress(jf, f"the heuristics' layout {1e6 * times['heuristics']:.1f} us; "
                  f"{len(choices)} more to try")
    for i, choice in enumerate(choices):
        label = ",".join(f"{k}={v}" for k, v in choice.items())
        compiled = _checked(jf, bound, leaves, outs, ctx, choice, label,
                            reference, base.lowered)
        if compiled is None:
            _progress(jf, f"{i + 1}/{len(choices)} {label}: not a layout of its own")
            continue
        times[label] = measure(lambda: run(compiled, leaves, ctx, outs), ctx)
        _progress(jf, f"{i + 1}/{len(choices)} {label}: {1e6 * times[label]:.1f} us")
        if times[label] < best_time:
            best, best_time, best_choice = compiled, times[label], choice
    _progress(jf, "keeps " + (",".join(f"{k}={v}" for k, v in best_choice.items()) or
                              "the heuristics' layout"))
    _write(path, best_choice, times, _describe(jf, base.lowered))
    return best


def _progress(jf, text):
    """A line on stderr for each layout timed: tuning takes a few compiles, seconds."""
    print(f"numbamr: autotuning {jf.__name__}: {text}", file=sys.stderr, flush=True)


def _describe(jf, lowered):
    """What the stored choice is for, for whoever reads the cache file."""
    return {"function": jf.__name__,
            "kernels": [f"{k.name} grid={k.grid} block={k.block}" for k in lowered.kernels]}


def _lowered(jf, bound, leaves, outs, choice):
    return jf._lower(bound, leaves, outs=outs, options=_merged(jf.options, choice))


def _compile(lowered, ctx):
    return Compiled(lowered, make_launchers(lowered, ctx.simulator))


def _kernels(lowered):
    """What makes two lowerings the same kernels: each kernel's layout and source."""
    return [(k.layout, k.source) for k in lowered.kernels]


def _checked(jf, bound, leaves, outs, ctx, choice, label, reference, base):
    """The candidate ``choice`` compiled and run once, or None: silently when the kernels
    cannot take it or it lowers to ``base``'s kernels (an unroll longer than the rows, say),
    with a warning when it cannot run or its results differ from ``reference`` (either is
    a limit the layout heuristics did not foresee)."""
    try:
        lowered = _lowered(jf, bound, leaves, outs, choice)
        if _kernels(lowered) == _kernels(base):
            return None
        compiled = _compile(lowered, ctx)
    except NumbamrError:            # an option this kernel cannot take
        return None
    except Exception as e:          # e.g. more registers than a block of this size may have
        return _left_out(jf, label, f"could not compile ({type(e).__name__}: {e})")
    try:
        got = _host_outputs(run(compiled, leaves, ctx, outs))
    except Exception as e:          # e.g. more shared memory than a multiprocessor has
        return _left_out(jf, label, f"could not run ({type(e).__name__}: {e})")
    if not _agree(got, reference, base.out_specs):
        return _left_out(jf, label, "disagrees with the default layout")
    return compiled


def _left_out(jf, label, why):
    warnings.warn(f"numbamr autotune: {jf.__name__} with {label} {why}; it is left out",
                  RuntimeWarning, stacklevel=5)
    return None


def known_options(jf, lowered):
    """The options a tuned call of this signature would use (from the disk cache), or None
    when it has not been tuned on this GPU."""
    known = _read(_cache_path(lowered, jf.options))
    return None if known is None else _merged(jf.options, known)


def _merged(forced, choice):
    return dataclasses.replace(forced, **choice)


def measure(call, ctx):
    """Seconds per call: the fastest of ROUNDS rounds of back-to-back calls, each round
    about TIME_PER_ROUND long, timed from the host to the stream's end."""
    sync = _synchronizer(ctx)
    call()
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    once = max(time.perf_counter() - t0, 1e-7)
    n = min(200, max(3, int(TIME_PER_ROUND / once)))
    best = math.inf
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        sync()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def _synchronizer(ctx):
    if ctx.simulator:
        return lambda: None
    return lambda: cudadriver.stream_synchronize(ctx.stream)


def _host_outputs(result):
    items = result if isinstance(result, (tuple, list)) else \
        list(result.values()) if isinstance(result, dict) else [result]
    return [_to_host(a) for a in items]


def _to_host(a):
    if hasattr(a, "get"):                       # CuPy
        return np.asarray(a.get())
    if hasattr(a, "detach"):                    # torch
        t = a.detach().cpu()
        return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()
    return np.asarray(a)


def _agree(got, want, specs):
    """Same outputs up to the rounding a different order of reduction makes (``specs``:
    each output's (dtype, shape); float16 and bfloat16 keep 8-11 bits, so more slack)."""
    for g, w, (dt, _) in zip(got, want, specs):
        if g.shape != w.shape:
            return False
        if dtypes.is_float(dt):
            tol = 1e-2 if np.dtype(dt).itemsize <= 2 else 1e-4
            scale = np.nanmax(np.abs(w.astype(np.float64)), initial=0.0) or 1.0
            if not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                               atol=tol * scale, equal_nan=True):
                return False
        elif not np.array_equal(g, w):
            return False
    return True


# ---- the disk cache ------------------------------------------------------------------------

def _cache_path(lowered, forced):
    """The file of this choice in ``<cache>/tune``, or None without a usable disk cache."""
    d = diskcache.part("tune")
    if d is None:
        return None
    from . import __version__
    from .experimental import DEFAULT, current_knobs
    h = hashlib.sha256()
    # study knobs of the launch change the timings and not the sources; the default ones
    # add nothing (choices stored before them stay found)
    knobs = current_knobs()
    for part in [__version__, cudadriver.device_name(), repr(forced)] + \
            ([] if knobs == DEFAULT else [repr(knobs)]) + \
            [k.source for k in lowered.kernels]:
        h.update(part.encode())
        h.update(b"\0")
    return os.path.join(d, h.hexdigest()[:32] + ".json")


MAX_RECORD_BYTES = 1 << 20      # a choice and its timings take a few hundred bytes


def _read(path):
    """The options chosen before ({} for the heuristics'), or None if not tuned."""
    data = diskcache.read(path, MAX_RECORD_BYTES) if path else None
    if data is None:
        return None
    try:
        options = dict(json.loads(data)["options"])
        KernelOptions(**options)
    except (ValueError, KeyError, TypeError, NumbamrError):   # unreadable: tune again
        return None
    return options


def _write(path, choice, times, about):
    if path is None:
        return
    record = {**about, "options": choice, "gpu": cudadriver.device_name(),
              "seconds_per_call": times}
    diskcache.write(path, json.dumps(record, indent=1).encode())
