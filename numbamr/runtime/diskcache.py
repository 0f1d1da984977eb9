"""The disk cache's directories and files, kept so that numbamr trusts only what it wrote.

The cache directory and its parts (``src``, ``bin``, ``tune``) are made private (mode 0700);
one that another user owns or that others may write is refused, since whoever can write it
could plant what numbamr loads. Files are opened without following symbolic links and read
only when they are regular files of a bounded size, so a link to ``/dev/zero`` or a FIFO in
place of an entry is a miss (then rewritten), never a hang. Files are written through a
temporary file of an unpredictable name in the same directory, renamed into place, and the
temporary file is removed on any failure. After a write the cache is cut to
``NUMBAMR_CACHE_MAX_MB``, least recently used entries (by modification time, which a read
renews) first.

Where the cache is off, cannot be made, is refused or cannot be written, callers get None and
run from memory; one warning a process says so for each cache directory.
"""
import os
import stat
import tempfile
import threading
import time
import warnings

from .. import settings

PARTS = ("src", "bin", "tune")
TEMP_PREFIX = ".tmp_"
STALE_TEMP_SECONDS = 3600       # a temporary file this old was left by a writer that died

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | \
    getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)

_warned = set()
_warn_lock = threading.Lock()


def warn_once(root, why):
    """One RuntimeWarning a process for the cache directory ``root``."""
    with _warn_lock:
        if root in _warned:
            return
        _warned.add(root)
    warnings.warn(f"numbamr: the disk cache at {root} is not used ({why}); compiled kernels "
                  "are kept in memory only", RuntimeWarning, stacklevel=4)


def root():
    """The cache directory (made if missing), or None when the cache is off or unusable."""
    s = settings.current()
    if not s.cache:
        return None
    top = os.path.abspath(s.cache_dir)
    return top if _usable(top, top) else None


def part(name):
    """The directory ``<cache>/<name>`` (made if missing), or None."""
    top = root()
    if top is None:
        return None
    path = os.path.join(top, name)
    return path if _usable(path, top) else None


def _usable(path, top):
    """Is ``path`` a directory of this user's that no one else may write? Made (0700) when
    missing; warns (once for ``top``) when not."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError as e:
        warn_once(top, f"{path} cannot be made ({type(e).__name__}: {e.strerror or e})")
        return False
    why = refusal(path, st)
    if why:
        warn_once(top, why)
        return False
    return True


def refusal(path, st):
    """Why the directory ``path`` (its stat ``st``) is not trusted, or None."""
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    uid = os.geteuid() if hasattr(os, "geteuid") else st.st_uid
    if st.st_uid != uid:
        return f"{path} is owned by user id {st.st_uid}, not by this user ({uid})"
    if st.st_mode & 0o022:
        return f"{path} may be written by others (mode {stat.S_IMODE(st.st_mode):o})"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    return None


def read(path, limit):
    """The bytes of the regular file ``path`` if it has at most ``limit`` of them, else None
    (missing, a link, a FIFO, a device, too large). A read renews the file's time: the
    cache's bound drops the least recently used entries first."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = _read_all(fd, st.st_size + 1)
        if len(data) != st.st_size:         # changed while read: not what was checked
            return None
        try:
            os.utime(fd)
        except (OSError, NotImplementedError):
            pass                            # a read-only entry still counts as read
        return data
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_all(fd, most):
    chunks, got = [], 0
    while got < most:
        chunk = os.read(fd, most - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def write(path, data):
    """Write ``data`` (bytes) to ``path`` atomically, then keep the cache within its bound;
    False (with one warning for the cache) when it cannot be written."""
    try:
        write_atomic(path, data)
    except OSError as e:
        warn_once(_top_of(path), f"{path} cannot be written ({type(e).__name__}: "
                                 f"{e.strerror or e})")
        return False
    top = root()
    if top is not None:
        bound(top)
    return True


def _top_of(path):
    top = os.path.abspath(settings.current().cache_dir)
    return top if path.startswith(top + os.sep) else os.path.dirname(path)


def write_atomic(path, data):
    """Write ``data`` (str or bytes) so that readers see the old file or the whole new one.
    The temporary file has an unpredictable name and is removed if anything fails."""
    if isinstance(data, str):
        data = data.encode()
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=TEMP_PREFIX)
    try:
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def bound(top):
    """Remove the least recently used entries of the cache at ``top`` until it holds at most
    ``NUMBAMR_CACHE_MAX_MB``; also temporary files that a dead writer left."""
    limit = settings.current().cache_max_mb * (1 << 20)
    entries = _entries(top)
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass                    # another process removed it first
        except OSError:
            continue
        total -= size


def _entries(top):
    """(mtime, size, path) of every regular file in the cache's parts."""
    out = []
    now = time.time()
    for name in PARTS:
        try:
            listing = list(os.scandir(os.path.join(top, name)))
        except OSError:
            continue
        for entry in listing:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if entry.name.startswith(TEMP_PREFIX):
                if now - st.st_mtime > STALE_TEMP_SECONDS:
                    _remove(entry.path)
                continue            # being written by someone: not an entry yet
            out.append((st.st_mtime_ns, st.st_size, entry.path))
    return out


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass
