"""Compiling emitted source: run it as a module of its own, hand it to numba.

The source is saved as ``<cache>/src/gen_<hash>.py`` (so a user can read it) and compiled
from the text held in memory under that file's name: tracebacks and numba's error messages
show the generated lines (the text is registered with ``linecache``), and nothing planted in
the cache (a changed file, ``__pycache__`` bytecode) is ever run. Without a usable disk cache
the module gets a pseudo file name and runs all the same. Compiled kernels are cached on disk
by numbamr itself (cubins, see ``runtime.binary``), so numba's own cache is not asked to
write them again.
"""
import hashlib
import io
import linecache
import os
import sys
import threading
import tokenize
import types

from . import diskcache
from .. import settings
from ..errors import CompileError

_lock = threading.Lock()
_modules = {}       # digest -> module, least recently used first; NUMBAMR_MAX_SIGNATURES kept


def _digest(source):
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def _save_source(source, digest):
    """The path of ``source`` in the cache, written anew unless the file holds exactly it;
    None when there is no usable cache."""
    d = diskcache.part("src")
    if d is None:
        return None
    path = os.path.join(d, f"gen_{digest}.py")
    data = source.encode()
    if diskcache.read(path, len(data)) == data:
        return path
    # missing, truncated, altered, not UTF-8, or not a regular file: written anew
    return path if diskcache.write(path, data) else None


def _pseudo_path(digest):
    return f"<numbamr gen_{digest}>"


def source_path(source):
    """Where ``source`` is saved (``<cache>/src/gen_<hash>.py``), writing it if need be; a
    pseudo file name when there is no usable disk cache."""
    digest = _digest(source)
    with _lock:
        return _save_source(source, digest) or _pseudo_path(digest)


def _module_from_text(source, digest, path):
    """A fresh module run from ``source``, its code named ``path``; in ``sys.modules`` (numba
    looks a function's module up there) and its lines in ``linecache``."""
    modname = f"numbamr_gen_{digest}"
    mod = types.ModuleType(modname)
    mod.__file__ = path
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    sys.modules[modname] = mod
    try:
        code = compile(source, path, "exec", dont_inherit=True)
        exec(code, mod.__dict__)
    except BaseException:
        _forget(mod)
        raise
    return mod


def _forget(mod):
    sys.modules.pop(mod.__name__, None)
    linecache.cache.pop(mod.__file__, None)


def _keep(digest, mod):
    """Remember ``mod``; beyond NUMBAMR_MAX_SIGNATURES modules, the least recently used goes
    (its kernels keep running: they hold their functions, and these their globals)."""
    _modules[digest] = mod
    most = settings.current().max_signatures
    while len(_modules) > most:
        _forget(_modules.pop(next(iter(_modules))))


def load_source(source, name):
    """``source`` run as a module (saved as ``<cache>/src/gen_<hash>.py`` where the cache
    can be written); returns the module."""
    digest = _digest(source)
    with _lock:
        mod = _modules.pop(digest, None)
        if mod is not None:
            _modules[digest] = mod          # most recently used last
            return mod
        saved = _save_source(source, digest)
        path = saved or _pseudo_path(digest)
        try:
            mod = _module_from_text(source, digest, path)
        except Exception as e:          # an emitter bug: say where the source is
            raise CompileError(f"the generated source of kernel {name} failed to import "
                               f"({type(e).__name__}: {e}); {_where(path)}") from e
        mod.__numbamr_path__ = path
        _keep(digest, mod)
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


def _where(path):
    """Where the user finds a kernel's source, for error messages."""
    if path.startswith("<"):
        return "the disk cache is off or unwritable; fn.lower(...).as_text() shows the source"
    return f"it is saved at {path}"


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
                           f"{_where(mod.__numbamr_path__)}") from e
    return kernel, mod.__numbamr_path__
