"""numbamr: numpy-style functions with several reductions -> one fused CUDA kernel.

    import numbamr as nm

    @nm.jit
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    softmax(x)                        # CuPy in -> CuPy out, NumPy in -> NumPy out
    print(softmax.lower(x).as_text()) # the generated numba.cuda source
"""
from .errors import (NumbamrError, TraceError, ShapeError, DTypeError, ArgumentError,
                     FusionError, CompileError)
from .lowering.options import KernelOptions
from .jit import jit, JitFunction, Lowered
from . import experimental      # study knobs: numbamr.experimental.Knobs
from .trace import (exp, exp2, log, log2, sqrt, rsqrt, sin, cos, tanh, sigmoid, erf, where,
                    maximum, minimum, logsumexp, softmax, isnan, isfinite, abs_ as abs,
                    astype, sum_ as sum, amax as max, amin as min, mean, var, std, prod,
                    argmax, argmin, any_ as any, all_ as all, reshape, transpose,
                    broadcast_to, clip)

__version__ = "0.1.0"

__all__ = ["jit", "JitFunction", "Lowered", "KernelOptions", "experimental", "NumbamrError",
           "TraceError", "ShapeError", "DTypeError", "ArgumentError", "FusionError", "CompileError",
           "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
           "erf", "where", "maximum", "minimum", "logsumexp", "softmax", "isnan", "isfinite",
           "abs", "astype", "sum", "max", "min", "mean", "var", "std", "prod", "argmax",
           "argmin", "any", "all", "reshape", "transpose", "broadcast_to", "clip"]
