"""Compiled kernels kept on disk as cubins, loaded straight through the driver.

numba's own cache still has to build its typing context and look the kernel up, which is most
of a second in a new process; a cubin file and ``cuModuleLoadData`` take about a millisecond.
An entry is keyed by the emitted source, the kernel's parameter types and block size, the
numba and numba-cuda installations and the device's compute capability. Each file starts with a
header naming the kernel's entry symbol and the SHA-256 of the image, so a truncated or
corrupted file is seen (and rewritten), never loaded.
"""
import functools
import hashlib
import importlib.util
import os

from . import cudadriver
from .compile import write_atomic
from .. import settings

MAGIC = b"NUMBAMR-CUBIN-1"


@functools.lru_cache(maxsize=1)
def _versions():
    """Which numba and numba-cuda compiled the kernels: each package's location and the size
    and time of its ``__init__.py`` (found without importing numba, which takes a quarter of
    a second; an upgrade rewrites these files)."""
    parts = []
    for name in ("numba", "numba_cuda"):
        spec = importlib.util.find_spec(name)
        origin = getattr(spec, "origin", None) if spec else None
        st = os.stat(origin) if origin else None
        parts.append(f"{name}={origin}:{st.st_size}:{st.st_mtime_ns}" if st else f"{name}=?")
    return " ".join(parts)


def entry_key(source, name, block, dtypes):
    """The cache key of one kernel on the current device (device 0's primary context is made
    current if the thread has none); None when no device can be made current."""
    device = cudadriver.current_device()
    if device is None:
        return None
    text = "\n".join([source, name, str(block), " ".join(str(d) for d in dtypes),
                      _versions(), f"sm_{device[1][0]}{device[1][1]}"])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _path(key):
    d = os.path.join(settings.current().cache_dir, "bin")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, f"{key}.cubin")


def read(key):
    """(entry symbol, cubin bytes) stored under ``key``; None when missing, truncated or
    corrupted (the caller compiles and stores it anew)."""
    try:
        with open(_path(key), "rb") as f:
            data = f.read()
    except OSError:
        return None
    header, sep, image = data.partition(b"\n")
    parts = header.split(b" ")
    if not sep or len(parts) != 3 or parts[0] != MAGIC:
        return None
    if hashlib.sha256(image).hexdigest().encode() != parts[2]:
        return None
    return parts[1].decode(), image


def load(key):
    """The kernel handle stored under ``key``, loaded into the current context, or None."""
    found = read(key)
    return cudadriver.load_function(found[1], found[0]) if found else None


def image_bytes(image):
    """The bytes of a linked cubin: numba-cuda hands back a ``cuda.core`` ObjectCode (its
    ``code``), older versions the bytes themselves."""
    code = getattr(image, "code", image)
    if isinstance(code, (bytes, bytearray, memoryview)):
        return bytes(code)
    raise TypeError(f"a linked kernel image of type {type(image).__name__} has no bytes")


def store(key, entry, image):
    image = image_bytes(image)
    header = b" ".join([MAGIC, entry.encode(), hashlib.sha256(image).hexdigest().encode()])
    write_atomic(_path(key), header + b"\n" + image)
