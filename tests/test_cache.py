"""The disk cache runs nothing it did not write and check, and numbamr works without it.

Kernels run in numba's CPU simulator; the cubin part of the cache is exercised through
``runtime.binary`` with made-up images on a made-up device (no GPU needed).
"""
import contextlib
import errno
import hashlib
import importlib.util
import inspect
import json
import linecache
import marshal
import os
import stat
import subprocess
import sys
import threading
import time
import traceback
import warnings

import numpy as np
import pytest

import numbamr as nm
from numbamr import tune
from numbamr.runtime import binary, cudadriver, diskcache
from numbamr.runtime import compile as rc

PROMPTLY = 60           # seconds a call may take where a hang would be forever


def affine(x):
    return x * 2 + 1


def ref_affine(x):
    return x.astype(np.float64) * 2 + 1


def _x(rows=2, cols=16, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)


def _check(got, x):
    np.testing.assert_allclose(got, ref_affine(x), rtol=1e-6, atol=1e-6)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory (not made yet), no generated module loaded, no warning
    given yet in this process."""
    root = tmp_path / "cache"
    monkeypatch.setenv("NUMBAMR_CACHE_DIR", str(root))
    monkeypatch.delenv("NUMBAMR_CACHE", raising=False)
    monkeypatch.delenv("NUMBAMR_CACHE_MAX_MB", raising=False)
    monkeypatch.setattr(rc, "_modules", {})
    monkeypatch.setattr(diskcache, "_warned", set())
    return root


def _new_process(monkeypatch):
    """What a new process sees: nothing in memory, only the disk."""
    monkeypatch.setattr(rc, "_modules", {})
    return nm.jit(affine)


def _sources(root):
    return sorted((root / "src").glob("gen_*.py"))


def _cache_warnings(record):
    return [w for w in record if issubclass(w.category, RuntimeWarning) and
            "disk cache" in str(w.message)]


def _run_in_thread(fn, *args):
    """fn(*args) in a thread: (finished within PROMPTLY, its value or exception)."""
    out = {}

    def target():
        try:
            out["value"] = fn(*args)
        except BaseException as e:
            out["error"] = e
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(PROMPTLY)
    return not t.is_alive(), out


def _release_fifo(path):
    """Unblock a reader stuck opening the FIFO ``path`` (when the code under test hangs)."""
    with contextlib.suppress(OSError):
        if stat.S_ISFIFO(os.lstat(path).st_mode):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


# ---- generated sources: only the checked text runs ------------------------------------

def test_planted_bytecode_in_the_cache_is_never_run(cache, monkeypatch):
    import builtins
    x = _x()
    _check(nm.jit(affine)(x), x)
    (path,) = _sources(cache)
    assert not (cache / "src" / "__pycache__").exists()      # nothing writes bytecode there
    source = path.read_text()
    planted = compile(source + "\nimport builtins\nbuiltins.numbamr_planted_ran = True\n",
                      str(path), "exec")
    pyc = importlib.util.cache_from_source(str(path))
    os.makedirs(os.path.dirname(pyc))
    with open(pyc, "wb") as f:      # an unchecked hash-based pyc: an import always takes it
        f.write(importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + b"\0" * 8 +
                marshal.dumps(planted))
    monkeypatch.setattr(builtins, "numbamr_planted_ran", False, raising=False)
    _check(_new_process(monkeypatch)(x), x)
    assert builtins.numbamr_planted_ran is False


@pytest.mark.parametrize("content", [b"import builtins\nbuiltins.numbamr_planted_ran = True\n",
                                     b"\xff\xfe not UTF-8 \xc3\x28", b""],
                         ids=["altered", "bad-utf8", "empty"])
def test_a_source_file_that_differs_is_rewritten_not_run(cache, monkeypatch, content):
    import builtins
    x = _x()
    _check(nm.jit(affine)(x), x)
    (path,) = _sources(cache)
    good = path.read_bytes()
    path.write_bytes(content)
    monkeypatch.setattr(builtins, "numbamr_planted_ran", False, raising=False)
    _check(_new_process(monkeypatch)(x), x)
    assert builtins.numbamr_planted_ran is False
    assert path.read_bytes() == good


def test_a_fifo_in_place_of_a_source_is_a_miss(cache, monkeypatch):
    x = _x()
    _check(nm.jit(affine)(x), x)
    (path,) = _sources(cache)
    good = path.read_bytes()
    path.unlink()
    os.mkfifo(path)
    jf = _new_process(monkeypatch)
    try:
        done, out = _run_in_thread(jf, x)
    finally:
        _release_fifo(path)
    assert done, "reading a FIFO in the cache hung"
    _check(out["value"], x)
    assert stat.S_ISREG(os.lstat(path).st_mode) and path.read_bytes() == good


@pytest.mark.parametrize("target", ["/dev/zero", "elsewhere"])
def test_a_symlink_in_place_of_a_source_is_a_miss(cache, monkeypatch, tmp_path, target):
    x = _x()
    _check(nm.jit(affine)(x), x)
    (path,) = _sources(cache)
    good = path.read_bytes()
    if target == "elsewhere":       # the right text, in a file someone else may change
        target = tmp_path / "outside.py"
        target.write_bytes(good)
    path.unlink()
    os.symlink(target, path)
    done, out = _run_in_thread(_new_process(monkeypatch), x)
    assert done, "reading through a link in the cache hung"
    _check(out["value"], x)
    assert not os.path.islink(path) and path.read_bytes() == good


def test_tracebacks_show_the_lines_that_ran(cache, monkeypatch):
    """Generated code keeps its file name and lines in tracebacks, with the cache and
    without it, even when the saved file changes after it was loaded."""
    source = "def boom(a):\n    return a // 0\n"
    for cache_on in ("1", "0"):
        monkeypatch.setenv("NUMBAMR_CACHE", cache_on)
        monkeypatch.setattr(rc, "_modules", {})
        mod = rc.load_source(source, "boom")
        path = mod.__numbamr_path__
        assert mod.boom.__module__ in sys.modules and mod.boom.__globals__ is mod.__dict__
        if cache_on == "1":
            assert os.path.isfile(path)
            with open(path, "w") as f:
                f.write("# changed after loading\n\n")
        else:
            assert not os.path.exists(path)
        with pytest.raises(ZeroDivisionError) as err:
            mod.boom(1)
        text = "".join(traceback.format_exception(err.value))
        assert path in text and "return a // 0" in text
        assert inspect.getsource(mod.boom) == source
    assert not (cache / "src" / "__pycache__").exists()


def test_without_a_cache_a_failing_source_says_where_to_see_it(cache, monkeypatch):
    monkeypatch.setenv("NUMBAMR_CACHE", "0")
    with pytest.raises(nm.CompileError, match=r"as_text\(\) shows the source"):
        rc.load_source("def broken(:\n", "broken")


# ---- cubins: an entry is loaded only under the key it was stored for -------------------

@pytest.fixture
def device(monkeypatch):
    """A made-up current device of compute capability 9.0."""
    monkeypatch.setattr(cudadriver, "current_device", lambda: (0, (9, 0)))


SRC = "def k(a):\n    pass\n"


def _key(**change):
    parts = dict(source=SRC, name="k", block=256, dtypes=[np.dtype(np.float32)])
    parts.update(change)
    return binary.entry_key(parts["source"], parts["name"], parts["block"], parts["dtypes"])


def _image(n=4000, seed=0):
    return bytes(np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8))


def test_the_key_names_every_part(cache, device, monkeypatch):
    key = _key()
    assert hashlib.sha256(SRC.encode()).hexdigest() in key
    for part in ("name=k", "block=256", "float32", "numba=", "numba_cuda=", "sm_90"):
        assert part in key, part
    others = [_key(source=SRC + "\n"), _key(name="j"), _key(block=128),
              _key(dtypes=[np.dtype(np.float64)])]
    monkeypatch.setattr(cudadriver, "current_device", lambda: (0, (8, 0)))
    others.append(_key())
    assert len(set(others + [key])) == len(others) + 1


def test_an_entry_round_trips_and_its_header_names_the_key(cache, device):
    key, image = _key(), _image()
    assert binary.store(key, "k_entry", image)
    assert binary.read(key) == ("k_entry", image)
    (path,) = (cache / "bin").glob("*.cubin")
    header = path.read_bytes().split(b"\n", 1)[0]
    assert header.startswith(binary.MAGIC + b" ")
    assert json.loads(header[len(binary.MAGIC) + 1:])["key"] == key


def test_an_entry_stored_for_another_key_is_rebuilt_not_loaded(cache, device):
    a, b = _key(block=256), _key(block=128)
    binary.store(a, "k", _image(seed=1))
    with open(binary._path(b), "wb") as f:      # a's entry where b's would be
        with open(binary._path(a), "rb") as g:
            f.write(g.read())
    assert binary.read(b) is None
    binary.store(b, "k", _image(seed=2))
    assert binary.read(b) == ("k", _image(seed=2))
    assert binary.read(a) == ("k", _image(seed=1))


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "link", "huge"])
def test_an_entry_that_is_not_a_regular_file_is_a_miss_and_replaced(cache, device, tmp_path,
                                                                    kind):
    key, image = _key(), _image()
    binary.store(key, "k", image)
    path = binary._path(key)
    if kind == "link":              # a valid entry, but someone else's file
        os.replace(path, tmp_path / "outside.cubin")
        os.symlink(tmp_path / "outside.cubin", path)
    elif kind == "huge":            # sparse: no disk used
        with open(path, "r+b") as f:
            f.truncate(binary.MAX_BYTES + 1)
    else:
        os.unlink(path)
        os.mkfifo(path) if kind == "fifo" else os.symlink("/dev/zero", path)
    try:
        done, out = _run_in_thread(binary.read, key)
    finally:
        _release_fifo(path)
    assert done, f"reading a {kind} in the cache hung"
    assert out == {"value": None}
    assert binary.store(key, "k", image)
    assert stat.S_ISREG(os.lstat(path).st_mode) and binary.read(key) == ("k", image)


# ---- the autotune store ------------------------------------------------------------------

@pytest.fixture
def gpu_name(monkeypatch):
    monkeypatch.setattr(cudadriver, "device_name", lambda: "Made-up GPU")


def test_the_tune_store_writes_through_an_unpredictable_temporary_file(cache, gpu_name,
                                                                       tmp_path):
    """A link planted at a guessable temporary name is neither followed nor left over."""
    d = diskcache.part("tune")
    path = os.path.join(d, "choice.json")
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, f"{path}.{os.getpid()}.tmp")
    tune._write(path, {"threads_per_row": 64}, {"heuristics": 1.0}, {"function": "f"})
    assert victim.read_text() == "keep"
    assert tune._read(path) == {"threads_per_row": 64}
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0
    assert not [n for n in os.listdir(d) if n.startswith(".tmp_")]


def test_the_tune_store_does_not_hang_on_a_fifo(cache):
    path = os.path.join(diskcache.part("tune"), "choice.json")
    os.mkfifo(path)
    try:
        done, out = _run_in_thread(tune._read, path)
    finally:
        _release_fifo(path)
    assert done and out == {"value": None}


# ---- the cache directory: private, or not used -------------------------------------------

def test_the_cache_directories_are_private(cache, device):
    x = _x()
    _check(nm.jit(affine)(x), x)
    binary.store(_key(), "k", _image())
    diskcache.part("tune")
    for d in (cache, cache / "src", cache / "bin", cache / "tune"):
        assert stat.S_IMODE(os.stat(d).st_mode) & 0o077 == 0, d


def _two_calls(jf=None):
    """Two signatures' calls, checked; the cache warnings they gave."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for x in (_x(2, 16), _x(3, 8, seed=1)):
            _check((jf or nm.jit(affine))(x), x)
    return _cache_warnings(record)


def _no_temporaries(root):
    return not [p for p in root.rglob(".tmp_*")] if root.exists() else True


@pytest.mark.parametrize("mode", [0o770, 0o707], ids=["group", "world"])
def test_a_directory_others_may_write_is_refused(cache, mode):
    cache.mkdir()
    cache.chmod(mode)
    (w,) = _two_calls()
    assert str(cache) in str(w.message) and "written by others" in str(w.message)
    assert os.listdir(cache) == []


def test_a_directory_of_another_user_is_refused(cache, monkeypatch):
    cache.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(cache, 12345, -1)
    else:
        monkeypatch.setattr(os, "geteuid", lambda: os.stat(cache).st_uid + 1)
    (w,) = _two_calls()
    assert str(cache) in str(w.message) and "owned by" in str(w.message)
    assert os.listdir(cache) == []


@contextlib.contextmanager
def _unwritable(path):
    """``path`` made a directory no one may write to: by its mode, or for root (whom modes
    do not stop) by the immutable attribute."""
    path.mkdir(mode=0o700)
    root_user = os.geteuid() == 0
    try:
        if root_user:
            try:
                made = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
            except OSError:
                pytest.skip("root, and no chattr to make a directory unwritable")
            if made.returncode != 0:
                pytest.skip("root, and the file system has no immutable attribute")
        else:
            path.chmod(0o500)
        with pytest.raises(OSError):
            (path / "probe").write_text("")
        yield path
    finally:
        if root_user:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)
        path.chmod(0o700)


def test_an_unwritable_cache_directory(cache):
    with _unwritable(cache):
        (w,) = _two_calls()
        assert str(cache) in str(w.message)
        assert os.listdir(cache) == []


def test_a_cache_directory_that_cannot_be_made(cache, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("NUMBAMR_CACHE_DIR", str(blocker / "cache"))
    (w,) = _two_calls()
    assert str(blocker / "cache") in str(w.message)


def test_the_default_directory_under_an_unwritable_home(cache, tmp_path, monkeypatch):
    """HOME=/ for a user (root may write /: there an unwritable directory stands in)."""
    monkeypatch.delenv("NUMBAMR_CACHE_DIR")
    if os.geteuid() != 0:
        monkeypatch.setenv("HOME", "/")
        assert len(_two_calls()) <= 1
        return
    with _unwritable(tmp_path / "home") as home:
        monkeypatch.setenv("HOME", str(home))
        (w,) = _two_calls()
        assert str(home) in str(w.message)
        assert os.listdir(home) == []


def test_a_full_disk(cache, monkeypatch):
    def full(fd, data):
        os.write(fd, data[:len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(diskcache, "_write_all", full)
    (w,) = _two_calls()
    assert str(cache) in str(w.message) and os.strerror(errno.ENOSPC) in str(w.message)
    assert _no_temporaries(cache) and not _sources(cache)


def test_cache_off_writes_nothing(cache, tmp_path, monkeypatch, device):
    monkeypatch.setenv("NUMBAMR_CACHE", "0")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _two_calls() == []
    assert not binary.store(_key(), "k", _image()) and binary.read(_key()) is None
    assert not cache.exists() and not (tmp_path / "home").exists()


# ---- bounds: the disk cache's size, and memory per function ---------------------------------

def test_the_cache_keeps_to_its_size_dropping_the_least_recently_used(cache, device,
                                                                      monkeypatch):
    keys = [_key(block=b) for b in (32, 64, 128, 256)]
    for k in keys[:3]:
        binary.store(k, "k", _image())
    size = os.path.getsize(binary._path(keys[0]))
    now = time.time()
    for age, k in zip((300, 200, 100), keys):       # keys[0] the oldest
        os.utime(binary._path(k), (now - age, now - age))
    assert binary.read(keys[0]) is not None         # a hit: now the most recent
    monkeypatch.setenv("NUMBAMR_CACHE_MAX_MB", str(3.5 * size / (1 << 20)))
    binary.store(keys[3], "k", _image())
    kept = [binary.read(k) is not None for k in keys]
    assert kept == [True, False, True, True]
    total = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    assert total <= 3.5 * size


@pytest.mark.parametrize("name,value", [("NUMBAMR_CACHE_MAX_MB", "lots"),
                                        ("NUMBAMR_CACHE_MAX_MB", "-1"),
                                        ("NUMBAMR_MAX_SIGNATURES", "0")])
def test_a_bad_setting_is_named(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(nm.ArgumentError, match=name):
        nm.settings.current()


def test_memory_per_function_stays_within_max_signatures(cache, monkeypatch):
    monkeypatch.setenv("NUMBAMR_MAX_SIGNATURES", "3")
    before = {m for m in sys.modules if m.startswith("numbamr_gen_")}
    lines_before = set(linecache.cache)
    jf = nm.jit(affine)
    for cols in range(2, 10):
        x = _x(1, cols)
        _check(jf(x), x)
        assert len(jf._cache) <= 3 and len(jf._fast) <= 3 and len(rc._modules) <= 3
    assert len({m for m in sys.modules if m.startswith("numbamr_gen_")} - before) <= 3
    assert len(set(linecache.cache) - lines_before) <= 3
