"""Compiled kernels kept on disk as cubins, loaded straight through the driver.

numba's own cache still has to build its typing context and look the kernel up, which is most
of a second in a new process; a cubin file and ``cuModuleLoadData`` take about a millisecond.
An entry's key names the emitted source (its SHA-256), the kernel's name, parameter types and
block size, the numba and numba-cuda installations and the device's compute capability; the
file is named by the key's hash. Each file starts with a header line naming the whole key,
the kernel's entry symbol and the SHA-256 of the image, so a truncated or corrupted file, or
one that belongs to another key, is seen (and rewritten), never loaded.
"""
import functools
import hashlib
import importlib.util
import json
import os

from . import cudadriver, diskcache

MAGIC = b"NUMBAMR-CUBIN-2"
MAX_BYTES = 256 << 20       # larger than any cubin; a bigger file is not an entry


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
    current if the thread has none), as text; None when no device can be made current."""
    device = cudadriver.current_device()
    if device is None:
        return None
    return " ".join([f"source={hashlib.sha256(source.encode()).hexdigest()}", f"name={name}",
                     f"block={block}", "params=" + ",".join(str(d) for d in dtypes),
                     _versions(), f"arch=sm_{device[1][0]}{device[1][1]}"])


def _path(key):
    """The file of ``key`` in the cache, or None when there is no usable cache."""
    d = diskcache.part("bin")
    if d is None:
        return None
    return os.path.join(d, hashlib.sha256(key.encode()).hexdigest()[:32] + ".cubin")


def read(key):
    """(entry symbol, cubin bytes) stored under ``key``; None when missing, truncated,
    corrupted, stored for another key or not a regular file (the caller compiles and
    stores it anew)."""
    path = _path(key)
    data = diskcache.read(path, MAX_BYTES) if path else None
    if data is None:
        return None
    header, sep, image = data.partition(b"\n")
    magic, _, fields = header.partition(b" ")
    if not sep or magic != MAGIC:
        return None
    try:
        fields = json.loads(fields)
        ok = fields["key"] == key and \
            fields["sha256"] == hashlib.sha256(image).hexdigest()
        entry = fields["entry"]
    except (ValueError, KeyError, TypeError):
        return None
    return (entry, image) if ok and isinstance(entry, str) else None


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
    """Keep ``image`` under ``key``; False when the cache cannot take it (said once)."""
    image = image_bytes(image)
    path = _path(key)
    if path is None:
        return False
    fields = {"key": key, "entry": entry, "sha256": hashlib.sha256(image).hexdigest()}
    header = MAGIC + b" " + json.dumps(fields).encode()
    return diskcache.write(path, header + b"\n" + image)
