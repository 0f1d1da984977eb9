"""Settings read from environment variables, each with a type and a default.

NUMBAMR_CACHE_DIR   where generated kernel sources and compiled kernels are kept
NUMBAMR_CACHE       0 turns the disk cache off (default 1)
NUMBAMR_DEBUG       1 logs why each call compiled anew (default 0)
NUMBAMR_MAX_SIGNATURES  compiled signatures kept per function (least recently used go; 64)
"""
import os
from dataclasses import dataclass


def _bool(name, default):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() not in ("0", "false", "no", "off")


def _int(name, default):
    raw = os.environ.get(name)
    return default if raw in (None, "") else int(raw)


def _str(name, default):
    raw = os.environ.get(name)
    return default if raw in (None, "") else raw


@dataclass(frozen=True)
class Settings:
    cache_dir: str
    cache: bool
    debug: bool
    max_signatures: int


def current():
    """Settings as the environment says now (read on each call; cheap)."""
    default_dir = os.path.join(os.path.expanduser("~"), ".cache", "numbamr")
    return Settings(
        cache_dir=_str("NUMBAMR_CACHE_DIR", default_dir),
        cache=_bool("NUMBAMR_CACHE", True),
        debug=_bool("NUMBAMR_DEBUG", False),
        max_signatures=_int("NUMBAMR_MAX_SIGNATURES", 64),
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
