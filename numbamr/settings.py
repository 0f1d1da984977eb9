"""Settings read from environment variables, each with a type and a default.

NUMBAMR_CACHE_DIR   where generated kernel sources and compiled kernels are kept (default
                    ~/.cache/numbamr; made with mode 0700; a directory another user owns or
                    others may write is refused, and numbamr then runs from memory)
NUMBAMR_CACHE       0 turns the disk cache off: nothing is written to disk (default 1)
NUMBAMR_CACHE_MAX_MB  the most the disk cache holds, in MiB; after a write beyond it the least
                    recently used entries are removed (default 1024)
NUMBAMR_DEBUG       1 logs why each call compiled anew (default 0)
NUMBAMR_MAX_SIGNATURES  compiled signatures kept per function, and generated kernel modules
                    kept per process (least recently used go; default 64)
"""
import os
from dataclasses import dataclass

from .errors import ArgumentError


def _bool(name, default):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() not in ("0", "false", "no", "off")


def _number(name, default, kind, least):
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not value >= least:
        raise ArgumentError(f"the environment variable {name}={raw!r} is not "
                            f"{'an integer' if kind is int else 'a number'} >= {least}")
    return value


def _str(name, default):
    raw = os.environ.get(name)
    return default if raw in (None, "") else raw


@dataclass(frozen=True)
class Settings:
    cache_dir: str
    cache: bool
    cache_max_mb: float
    debug: bool
    max_signatures: int


def current():
    """Settings as the environment says now (read on each call; cheap)."""
    default_dir = os.path.join(os.path.expanduser("~"), ".cache", "numbamr")
    return Settings(
        cache_dir=_str("NUMBAMR_CACHE_DIR", default_dir),
        cache=_bool("NUMBAMR_CACHE", True),
        cache_max_mb=_number("NUMBAMR_CACHE_MAX_MB", 1024, float, 0),
        debug=_bool("NUMBAMR_DEBUG", False),
        max_signatures=_number("NUMBAMR_MAX_SIGNATURES", 64, int, 1),
    )


def simulator():
    """True when numba runs kernels in its CPU simulator (NUMBA_ENABLE_CUDASIM=1).

    numba reads the variable once, when ``numba.cuda`` is first imported; so do we.
    """
    global _SIMULATOR
    if _SIMULATOR is None:
        _SIMULATOR = _bool("NUMBA_ENABLE_CUDASIM", False)
    return _SIMULATOR


_SIMULATOR = None
