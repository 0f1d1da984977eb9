"""numbamr's errors. Each one names the problem and, where known, the user's source line."""
import os
import sys

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def _numpy_dir():
    import numpy
    return os.path.dirname(os.path.abspath(numpy.__file__))


class NumbamrError(Exception):
    """Base class of every error numbamr raises on purpose."""

    def __init__(self, message, loc=None):
        self.loc = loc
        self.plain_message = message
        super().__init__(message + (f"\n  at {loc}" if loc else ""))


class TraceError(NumbamrError, TypeError):
    """The function does something numbamr cannot trace (unsupported function, control flow...)."""


class ShapeError(NumbamrError, ValueError):
    """Shapes that do not broadcast, axes out of range, bad reshapes."""


class DTypeError(NumbamrError, TypeError):
    """A dtype numbamr does not compute with (object, string, complex...)."""


class ArgumentError(NumbamrError, TypeError):
    """Wrong arguments to a jitted function: count, kinds, devices, out=."""


class NumericError(NumbamrError, ValueError):
    """A value NumPy refuses to compute with: an integer to a negative integer power."""


class ScalarOverflowError(NumbamrError, OverflowError):
    """A Python integer outside the range of the integer dtype it meets (NumPy 2 refuses
    ``np.uint8 array + 300`` too)."""


class FusionError(NumbamrError):
    """The program cannot be compiled into the kernels asked for.

    ``node`` is the reduction that would have to be computed by an earlier kernel, where one
    is to blame; the scheduler materializes it and tries again.
    """

    def __init__(self, message, loc=None, node=None):
        super().__init__(message, loc)
        self.node = node


class VerifyError(NumbamrError, AssertionError):
    """A stage produced an ill-formed graph or program (a bug in numbamr)."""


class CompileError(NumbamrError):
    """numba failed on emitted source; the message names the saved source file."""


class SourceLoc:
    """Where in the user's code a node was made: file, line number and the line's text."""
    __slots__ = ("filename", "lineno", "text")

    def __init__(self, filename, lineno, text):
        self.filename, self.lineno, self.text = filename, lineno, text

    def __str__(self):
        text = f": {self.text.strip()}" if self.text else ""
        return f"{self.filename}:{self.lineno}{text}"

    def __repr__(self):
        return f"SourceLoc({self.filename!r}, {self.lineno})"


def _is_users(code, skip):
    filename = os.path.abspath(code.co_filename)
    return not filename.startswith(skip) and "<frozen" not in filename


def _loc(code, lineno):
    import linecache
    return SourceLoc(code.co_filename, lineno, linecache.getline(code.co_filename, lineno))


def user_loc():
    """The innermost stack frame outside this package (the user's line), or None."""
    skip = (_PKG_DIR + os.sep, _numpy_dir() + os.sep)
    frame = sys._getframe(1)
    while frame is not None:
        if _is_users(frame.f_code, skip):
            return _loc(frame.f_code, frame.f_lineno)
        frame = frame.f_back
    return None


def raised_by_user_code(exc):
    """Where ``exc`` was raised, when its innermost frame lies outside this package (the
    user's function called something wrongly, or raised itself): the innermost frame outside
    this package and NumPy. None when numbamr's own code raised it."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code, tb.tb_lineno))
        tb = tb.tb_next
    if not frames or not _is_users(frames[-1][0], (_PKG_DIR + os.sep,)):
        return None
    skip = (_PKG_DIR + os.sep, _numpy_dir() + os.sep)
    return next((_loc(c, n) for c, n in reversed(frames) if _is_users(c, skip)), None)


def mark_users_exception(exc, loc):
    """Let ``exc``, raised by the user's own code (at ``loc``) while numbamr traced it, reach
    the caller as itself: a ``ValueError("bad")`` of theirs stays a ValueError, with a note
    naming the function that was being traced."""
    name = _traced_function_name(exc)
    note = f"numbamr: raised while tracing {name} for compilation, at {loc}"
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:                                       # Python 3.10: no add_note (nor display)
        exc.__notes__ = [*getattr(exc, "__notes__", ()), note]
    exc._numbamr_users_exception = True


def is_users_exception(exc):
    """Whether ``exc`` was marked by ``mark_users_exception`` (not a bug in numbamr)."""
    return getattr(exc, "_numbamr_users_exception", False)


def _traced_function_name(exc):
    """The outermost user function in ``exc``'s traceback: the one numbamr was tracing."""
    skip = (_PKG_DIR + os.sep, _numpy_dir() + os.sep)
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if _is_users(code, skip):
            return code.co_name
        tb = tb.tb_next
    return "the function"
