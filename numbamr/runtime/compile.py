"""Compiling emitted source: write it to the cache directory, import it, hand it to numba.

Importing from a real file (rather than ``exec``) puts the generated line in every traceback
and in numba's error messages. Compiled kernels are cached on disk by numbamr itself (cubins,
see ``runtime.binary``), so numba's own cache is not asked to write them again.
"""
import hashlib
import importlib.util
import io
import os
import sys
import tempfile
import threading
import tokenize

from .. import settings
from ..errors import CompileError

_lock = threading.Lock()
_modules = {}


def source_dir():
    d = os.path.join(settings.current().cache_dir, "src")
    os.makedirs(d, exist_ok=True)
    return d


def write_atomic(path, data):
    """Write ``data`` (str or bytes) so that readers see the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp_")
    with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    os.replace(tmp, path)


def _digest(source):
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def _save_source(source, digest):
    path = os.path.join(source_dir(), f"gen_{digest}.py")
    try:
        with open(path) as f:
            ok = f.read() == source
    except OSError:
        ok = False
    if not ok:                      # missing, truncated or corrupted: write it anew
        write_atomic(path, source)
    return path


def source_path(source):
    """Where ``source`` is saved (``<cache>/src/gen_<hash>.py``), writing it if need be."""
    with _lock:
        return _save_source(source, _digest(source))


def load_source(source, name):
    """Import ``source`` as a module from ``<cache>/src/gen_<hash>.py``; returns the module."""
    digest = _digest(source)
    with _lock:
        mod = _modules.get(digest)
        if mod is not None:
            return mod
        path = _save_source(source, digest)
        modname = f"numbamr_gen_{digest}"
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as e:          # an emitter bug: say where the source is
            raise CompileError(f"the generated source of kernel {name} failed to import "
                               f"({type(e).__name__}: {e}); it is saved at {path}") from e
        mod.__numbamr_path__ = path
        _modules[digest] = mod
        return mod


def code_text(source):
    """``source`` without its comments: what a kernel's compiled code depends on (two
    sources that differ only in comments, such as the row count a comment names, build
    the same kernel)."""
    found = _code_texts.get(source)
    if found is None:
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        found = tokenize.untokenize((t.type, t.string) for t in tokens
                                    if t.type != tokenize.COMMENT)
        found = "\n".join(line.rstrip() for line in found.splitlines() if line.strip())
        if len(_code_texts) > 256:
            _code_texts.clear()
        _code_texts[source] = found
    return found


_code_texts = {}


def with_deep_stack(fn, *args):
    """Run ``fn`` in a thread with a large stack and recursion limit.

    numba's control-flow analyses recurse over basic blocks, and a long kernel (every
    ``a if c else b`` is a branch) can have thousands of them.
    """
    out = {}

    def target():
        try:
            out["value"] = fn(*args)
        except BaseException as e:          # re-raised in the caller's thread
            out["error"] = e
    with _stack_lock:
        old_limit = sys.getrecursionlimit()
        old_size = threading.stack_size(512 << 20)
        sys.setrecursionlimit(max(old_limit, 200000))
        try:
            t = threading.Thread(target=target)
            t.start()
            t.join()
        finally:
            threading.stack_size(old_size)
            sys.setrecursionlimit(old_limit)
    if "error" in out:
        raise out["error"]
    return out["value"]


_stack_lock = threading.Lock()


def pointer_signature(dtypes, scalars=()):
    """``void(T0*, T1*, ...)``: every kernel parameter is a raw pointer (bool as uint8,
    since numba's boolean is a 1-bit value in registers but a byte in memory; bfloat16 as
    uint16, its bits), but those at the positions ``scalars``, which are values (a row
    count)."""
    import numpy as np
    from numba import types, from_dtype
    from ..dtypes import is_bfloat16

    def element(dt):
        dt = np.dtype(dt)
        if dt.kind == "b":
            return types.uint8
        return types.uint16 if is_bfloat16(dt) else from_dtype(dt)
    return types.void(*[from_dtype(np.dtype(dt)) if i in scalars else
                        types.CPointer(element(dt)) for i, dt in enumerate(dtypes)])


def jit_kernel(source, name, simulator, launch_bounds=(1024,), pointer_dtypes=None,
               scalars=()):
    """A numba.cuda kernel object for the function ``name`` defined by ``source``.

    On a GPU it is compiled now, for raw-pointer parameters of ``pointer_dtypes``;
    ``launch_bounds`` tells the compiler the block size, so that it never uses more
    registers than a block of that size can have; ``scalars``: as for pointer_signature.
    """
    from numba import cuda
    mod = load_source(source, name)
    fn = getattr(mod, name)
    if simulator:
        return cuda.jit(fn), mod.__numbamr_path__
    sig = pointer_signature(pointer_dtypes, scalars)
    try:
        kernel = with_deep_stack(cuda.jit(sig, launch_bounds=tuple(launch_bounds)), fn)
    except Exception as e:
        raise CompileError(f"numba failed to compile kernel {name} ({type(e).__name__}: {e}); "
                           f"its source is saved at {mod.__numbamr_path__}") from e
    return kernel, mod.__numbamr_path__
