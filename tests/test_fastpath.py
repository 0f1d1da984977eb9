"""The generated call paths (runtime.callplan) and the driver launch, run against a stand-in
for CuPy and for the CUDA driver: what each launch is given, in which order, on which stream,
and what the call returns. (On a GPU the same paths run in tests/test_calls.py.)"""
import ctypes
import sys
import types

import numpy as np
import pytest

from numbamr.errors import ArgumentError
from numbamr.runtime import callplan, cudadriver, launch
from numbamr.runtime.callcontext import CallContext


class FakeMemory:
    def __init__(self, ptr):
        self.ptr, self.device_id = ptr, 0


class FakeArray:
    next_ptr = 0x10000

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        FakeArray.next_ptr += 0x1000
        self.data = FakeMemory(FakeArray.next_ptr)


@pytest.fixture
def fake_gpu(monkeypatch):
    """CuPy and the driver replaced; returns the list of launches (their C arguments)."""
    launches, answers, contexts = [], [], []

    class DriverError(Exception):
        def __init__(self, status):
            self.status = status

    def cupy_launch(*args):         # CuPy's binding: plain integers, raises on an error
        err = fake_launch(*args)
        if err:
            raise DriverError(err)

    cupy = types.ModuleType("cupy")
    cupy.ndarray = cupy.empty = FakeArray
    cupy.cuda = types.SimpleNamespace(
        get_current_stream=lambda: types.SimpleNamespace(ptr=77),
        driver=types.SimpleNamespace(launchKernel=cupy_launch, CUDADriverError=DriverError))
    monkeypatch.setitem(sys.modules, "cupy", cupy)

    def fake_launch(*args):         # ctypes: C values, returns the error code
        values = [a.value if hasattr(a, "value") else a for a in args]
        block = ctypes.cast(values[9], ctypes.POINTER(ctypes.c_void_p))
        slots = [block[i] for i in range(len(fake_launch.nparams[values[0]]))]
        params = [ctypes.c_uint64.from_address(s).value for s in slots]
        launches.append(dict(func=values[0], grid=values[1], block=values[4],
                             shared=values[7], stream=values[8], params=params))
        return answers.pop(0) if answers else 0
    fake_launch.nparams = {}

    def fake_launch_ex(config, func, params, extra):    # cuLaunchKernelEx by ctypes
        c = cudadriver.LaunchConfig.from_address(config)
        attrs = [(c.attrs[i].id, c.attrs[i].value) for i in range(c.nattrs)]
        err = fake_launch(func, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1],
                          c.block[2], c.shared, c.stream, params, extra)
        launches[-1]["attrs"] = attrs
        return err
    driver = types.SimpleNamespace(cuCtxGetCurrent=lambda p: 0,
                                   cuCtxSetCurrent=lambda c: contexts.append(c))
    monkeypatch.setattr(cudadriver, "_libcuda", driver)
    monkeypatch.setattr(cudadriver, "LAUNCH", fake_launch)
    monkeypatch.setattr(cudadriver, "LAUNCH_EX", fake_launch_ex)
    return types.SimpleNamespace(launches=launches, answers=answers, contexts=contexts,
                                 register=fake_launch.nparams)


def _launcher(fake_gpu, handle, params, grid=5, block=128, dependent=False):
    dl = launch._DriverLaunch(handle, len(params), grid, block, 0, dependent)
    fake_gpu.register[handle] = params
    return types.SimpleNamespace(grid=grid, params=params, launch=dl)


def _plan(compiled, n_inputs=None, **options):
    """The generated path of ``compiled`` for positional CuPy arguments, as a function of
    the argument list (and ``kw``)."""
    n = n_inputs if n_inputs is not None else 1 + max(
        [i for launcher in compiled.launchers for src, i in launcher.params if src == "leaf"],
        default=-1)
    inputs = {i: callplan.PlanArray(f"args[{i}]", "cupy") for i in range(n)}
    call, _ = callplan.build_plan(compiled, inputs, "cupy", 0, **options)
    return lambda args, kw=None: call(args, kw or {})


def _compiled(launchers, outs, temps=(), structure=("single", None)):
    lowered = types.SimpleNamespace(
        out_specs=list(outs), structure=structure,
        temps=[types.SimpleNamespace(name=n, dtype=np.dtype(d), shape=s) for n, d, s in temps])
    return types.SimpleNamespace(lowered=lowered, launchers=launchers)


def test_each_kernel_gets_its_pointers_in_parameter_order(fake_gpu):
    k1 = _launcher(fake_gpu, 111, [("leaf", 1), ("tmp", "t0")], grid=3, block=64)
    k2 = _launcher(fake_gpu, 222, [("leaf", 0), ("tmp", "t0"), ("out", 1), ("out", 0)])
    skipped = _launcher(fake_gpu, 333, [("out", 0)], grid=0)
    compiled = _compiled([k1, skipped, k2], [(np.float32, (4, 8)), (np.int64, (4,))],
                         temps=[("t0", np.float32, (4,))], structure=("tuple", None))
    call = _plan(compiled)
    x, y = FakeArray((4, 8), np.float32), FakeArray((8,), np.float32)
    o0, o1 = call([x, y])
    assert (o0.shape, o0.dtype, o1.shape, o1.dtype) == ((4, 8), np.float32, (4,), np.int64)
    first, second = fake_gpu.launches
    assert (first["func"], first["grid"], first["block"], first["stream"]) == (111, 3, 64, 77)
    assert second["func"] == 222 and second["stream"] == 77
    temp = first["params"][1]
    assert first["params"] == [y.data.ptr, temp]
    assert second["params"] == [x.data.ptr, temp, o1.data.ptr, o0.data.ptr]
    assert len({x.data.ptr, y.data.ptr, temp, o0.data.ptr, o1.data.ptr}) == 5


@pytest.mark.parametrize("structure, check", [
    (("single", None), lambda r, o: r is o[0]),
    (("list", None), lambda r, o: isinstance(r, list) and r == o),
    (("dict", ("mean", "rstd")), lambda r, o: list(r) == ["mean", "rstd"]
     and list(r.values()) == o)])
def test_outputs_come_back_in_the_functions_structure(fake_gpu, structure, check):
    outs = [(np.float32, (3,))] * (1 if structure[0] == "single" else 2)
    k = _launcher(fake_gpu, 7, [("leaf", 0)] + [("out", i) for i in range(len(outs))])
    result = _plan(_compiled([k], outs, structure=structure))(
        [FakeArray((3, 5), np.float32)])
    made = fake_gpu.launches[0]["params"][1:]
    values = [result] if structure[0] == "single" else list(
        result.values() if isinstance(result, dict) else result)
    assert [v.data.ptr for v in values] == made
    assert check(result, values)


def test_a_thread_without_a_context_sets_it_and_launches_again(fake_gpu):
    k = _launcher(fake_gpu, 9, [("leaf", 0), ("out", 0)])
    fake_gpu.answers.append(launch.CUDA_ERROR_INVALID_CONTEXT)
    x = FakeArray((2, 2), np.float32)
    out = _plan(_compiled([k], [(np.float32, (2, 2))]))([x])
    assert len(fake_gpu.contexts) == 1
    assert [leaf["params"] for leaf in fake_gpu.launches] == [[x.data.ptr, out.data.ptr]] * 2


def test_other_launch_errors_are_raised(fake_gpu):
    k = _launcher(fake_gpu, 9, [("leaf", 0), ("out", 0)])
    fake_gpu.answers.append(700)
    with pytest.raises(RuntimeError, match="CUDA error 700"):
        _plan(_compiled([k], [(np.float32, (2,))]))([FakeArray((2,), "f4")])
    fake_gpu.answers.append(1)
    with pytest.raises(RuntimeError, match="CUDA error 1"):
        k.launch([1, 2], 0)


def test_driver_errors_are_named_where_the_driver_names_them(monkeypatch):
    def name_of(err, out):
        ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = b"CUDA_ERROR_LAUNCH_FAILED"
        return 0
    monkeypatch.setattr(cudadriver, "_libcuda", types.SimpleNamespace(cuGetErrorName=name_of))
    assert cudadriver.error_text(719) == "CUDA error 719 (CUDA_ERROR_LAUNCH_FAILED)"
    monkeypatch.setattr(cudadriver, "_libcuda", types.SimpleNamespace())
    assert cudadriver.error_text(719) == "CUDA error 719"


PROGRAMMATIC = (cudadriver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1)


def test_dependent_kernels_launch_with_programmatic_serialization_on_the_calls_stream(
        fake_gpu):
    """A dependent kernel goes through cuLaunchKernelEx with programmatic stream
    serialization, on the call's stream, with the same grid, block and pointers as an
    ordinary launch; the others go through cuLaunchKernel without attributes."""
    k1 = _launcher(fake_gpu, 111, [("leaf", 0), ("tmp", "t0")], grid=1024, block=256)
    k2 = _launcher(fake_gpu, 222, [("tmp", "t0"), ("out", 0)], grid=1, block=64,
                   dependent=True)
    compiled = _compiled([k1, k2], [(np.float32, ())], temps=[("t0", np.float32, (1024,))])
    x = FakeArray((1024, 1024), np.float32)
    out = _plan(compiled)([x])
    first, second = fake_gpu.launches
    assert "attrs" not in first and (first["grid"], first["block"]) == (1024, 256)
    assert second["attrs"] == [PROGRAMMATIC]
    assert (second["func"], second["grid"], second["block"], second["stream"]) == \
        (222, 1, 64, 77)
    assert second["params"] == [first["params"][1], out.data.ptr]
    k2.launch([5, 6], 99)           # the launcher's own call: the stream it is given
    assert fake_gpu.launches[-1]["stream"] == 99 and fake_gpu.launches[-1]["params"] == [5, 6]
    assert fake_gpu.launches[-1]["attrs"] == [PROGRAMMATIC]


def test_a_failed_dependent_launch_is_retried_or_raised(fake_gpu):
    k = _launcher(fake_gpu, 9, [("leaf", 0), ("out", 0)], dependent=True)
    fake_gpu.answers += [launch.CUDA_ERROR_INVALID_CONTEXT, 0, 700]
    call = _plan(_compiled([k], [(np.float32, (2, 2))]))
    call([FakeArray((2, 2), np.float32)])
    assert len(fake_gpu.contexts) == 1 and len(fake_gpu.launches) == 2
    with pytest.raises(RuntimeError, match="CUDA error 700"):
        call([FakeArray((2, 2), np.float32)])


@pytest.mark.parametrize("index, grid, dependent", [
    (0, 4, False), (0, launch.DEPENDENT_GRID, True), (1, 1, True)])
def test_which_kernels_launch_as_dependents(monkeypatch, index, grid, dependent):
    """A call's later kernels are always dependents of its earlier ones; its first kernel is
    one only when it is large (a small call is paced by the host, and the ordinary launch
    costs the host less); nothing is where the kernel does not wait itself."""
    made = []
    monkeypatch.setattr(launch, "_DriverLaunch", lambda *a: made.append(a[-1]))
    monkeypatch.setattr(launch.Launcher, "_compile", lambda self, lk: 1)
    for waits in (True, False):
        lk = types.SimpleNamespace(grid=grid, block=128, dependent=waits, source="",
                                   layout=types.SimpleNamespace(cluster=False, split=1,
                                                                persistent=0),
                                   program=types.SimpleNamespace(dynamic_shared=0, params=[],
                                                                 instrs=[]))
        launch.Launcher(lk, False, first=index == 0)
    assert made == [dependent, False]


def test_constant_parameters_fill_their_slots_as_ints(fake_gpu):
    """A ('const', n) parameter is written into its slot as the int n (64 bits; a negative n
    as its two's complement) by the generated path and by the slow launch alike."""
    k = _launcher(fake_gpu, 5, [("leaf", 0), ("const", 300), ("out", 0), ("const", -2)])
    compiled = _compiled([k], [(np.float32, (3, 4))])
    x = FakeArray((3, 4), np.float32)
    out = _plan(compiled)([x])
    leaf = types.SimpleNamespace(array=types.SimpleNamespace(base_ptr=x.data.ptr))
    ctx = CallContext(False, "cupy", stream=9)
    launch._launch_all(compiled, [leaf], ctx, [out.data.ptr])
    fast, slow = fake_gpu.launches
    assert fast["params"] == [x.data.ptr, 300, out.data.ptr, 2 ** 64 - 2]
    assert slow["params"] == fast["params"] and slow["stream"] == 9


def test_a_path_with_out_writes_the_given_arrays_and_refuses_overlap(fake_gpu):
    """out= arrays: their pointers (less the offset back to their lowest address, for a
    reversed view) go to the kernel, nothing is allocated, the given arrays come back; an
    out= array overlapping an input is refused although its key is the same."""
    k = _launcher(fake_gpu, 5, [("leaf", 0), ("out", 1), ("out", 0)])
    compiled = _compiled([k], [(np.float32, (4,)), (np.float32, (4,))],
                         structure=("tuple", None))
    inputs = {0: callplan.PlanArray("args[0]", "cupy", 0, 16, "x")}
    outs = [callplan.PlanArray("kw['out'][0]", "cupy", 12, 16),
            callplan.PlanArray("kw['out'][1]", "cupy", 0, 16)]
    call, source = callplan.build_plan(compiled, inputs, "cupy", 0, outs)
    x, a, b = (FakeArray((4,), np.float32) for _ in range(3))
    made = FakeArray.next_ptr
    result = call([x], {"out": (a, b)})
    assert result[0] is a and result[1] is b and FakeArray.next_ptr == made
    assert fake_gpu.launches[0]["params"] == [x.data.ptr, b.data.ptr, a.data.ptr - 12]
    with pytest.raises(ArgumentError, match=r"out\[1\] overlaps the memory of input 'x'"):
        call([x], {"out": (a, x)})
    assert len(fake_gpu.launches) == 1


class _Stream:
    def __init__(self, ptr):
        self.ptr = ptr


@pytest.mark.parametrize("stream, handle", [(123, 123), (_Stream(456), 456)])
def test_a_path_with_stream_launches_on_that_stream(fake_gpu, stream, handle):
    k1 = _launcher(fake_gpu, 1, [("leaf", 0), ("tmp", "t")])
    k2 = _launcher(fake_gpu, 2, [("tmp", "t"), ("out", 0)])
    compiled = _compiled([k1, k2], [(np.float32, ())], temps=[("t", np.float32, (8,))])
    entered = []

    class OnStream:
        """Records the allocations made inside it (the temporaries, for the call's stream)."""
        def __init__(self, h):
            self.h = h

        def __enter__(self):
            entered.append((self.h, FakeArray.next_ptr))

        def __exit__(self, *exc):
            entered.append((self.h, FakeArray.next_ptr))
    call = _plan(compiled, stream_obj=stream, stream_given=True, temps_on_stream=OnStream)
    call([FakeArray((8,), np.float32)], {"stream": stream})
    assert [la["stream"] for la in fake_gpu.launches] == [handle, handle]
    (h0, before), (h1, after) = entered
    assert h0 == h1 == handle and after - before == 0x1000      # the one temporary


def test_temporaries_and_exchange_buffers_share_one_allocation(fake_gpu, monkeypatch):
    zeroed = []
    monkeypatch.setattr(cudadriver, "memset32", lambda p, v, n, s: zeroed.append((p, v, n, s)))
    made = []
    monkeypatch.setattr(FakeArray, "__init__", _recording_init(made))
    temps = [("t0", np.float32, (3, 5)), ("t1", np.float64, (7,)), ("t2", np.int8, (1,))]
    k1 = _launcher(fake_gpu, 1, [("leaf", 0), ("tmp", "t0"), ("tmp", "t1"),
                                 ("scratch", ("flag", 9, np.int32))])
    k2 = _launcher(fake_gpu, 2, [("tmp", "t2"), ("tmp", "t0"),
                                 ("scratch", ("part", 40, np.int64)), ("out", 0)])
    call = _plan(_compiled([k1, k2], [(np.float32, (4,))], temps=temps))
    x = FakeArray((4, 8), np.float32)
    made.clear()
    out = call([x])
    block, = [a for a in made if a is not out]
    assert block.dtype == np.uint8 and len(block.shape) == 1
    first, second = fake_gpu.launches
    pieces = {"t0": (first["params"][1], 60), "t1": (first["params"][2], 56),
              "flag": (first["params"][3], 36), "t2": (second["params"][0], 1),
              "part": (second["params"][2], 320)}
    assert second["params"][1] == pieces["t0"][0] and second["params"][3] == out.data.ptr
    spans = sorted(pieces.values())
    for (p, n), (q, _) in zip(spans, spans[1:]):
        assert p + n <= q                                   # disjoint
    for p, n in spans:
        assert (p - block.data.ptr) % callplan.PIECE_ALIGN == 0
        assert block.data.ptr <= p and p + n <= block.data.ptr + block.shape[0]
    assert zeroed == [(pieces["flag"][0], 0, 9, 77)]        # the arrival counts, on the stream


def _recording_init(made):
    plain = FakeArray.__init__

    def init(self, shape, dtype):
        plain(self, shape, dtype)
        made.append(self)
    return init


def test_zero_size_outputs_launch_nothing(fake_gpu):
    k = _launcher(fake_gpu, 5, [("leaf", 0), ("out", 0)])
    out = _plan(_compiled([k], [(np.float32, (0, 4))]))([FakeArray((0, 4), np.float32)])
    assert out.shape == (0, 4) and fake_gpu.launches == []


class _CAI:
    """An object exposing only __cuda_array_interface__."""

    def __init__(self, shape, typestr="<f4", ptr=4096, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, False), "strides": strides,
                                         "version": 3}


def test_keys_tell_apart_what_a_compiled_signature_depends_on():
    key = callplan.fast_key
    base = key((_CAI((4, 8)), 2.0))
    assert key((_CAI((4, 8)), 2.0)) == base                     # equal arguments
    assert key((_CAI((4, 8), ptr=4096 + 32), 2.0)) == base      # same alignment
    for other in [(_CAI((4, 8), ptr=4096 + 4), 2.0), (_CAI((8, 4)), 2.0),
                  (_CAI((4, 8), "<f2"), 2.0), (_CAI((4, 8), strides=(4, 16)), 2.0),
                  (_CAI((4, 8)), 3.0), (_CAI((4, 8)), 2)]:
        assert key(other) != base
    assert key((_CAI((4, 8)),), {"eps": 2.0}) != base
    out = _CAI((4, 8))
    forms = [key((_CAI((4, 8)),), {"out": o}) for o in (out, (out,), [out], {"y": out})]
    assert len(set(forms)) == 4
    assert key((_CAI((4, 8)),), {"stream": 5}) == key((_CAI((4, 8)),), {"stream": 6})
    assert key((_CAI((4, 8)),), {"stream": 5}) != key((_CAI((4, 8)),), {"stream": _Stream(5)})


@pytest.mark.parametrize("args", [(np.zeros(3),), ([1, 2],), ({"a": 1},), (object(),)])
def test_no_key_for_what_only_the_full_path_takes(args):
    """Host arrays (copied to the device), unhashable or unknown values: no key."""
    assert callplan.fast_key(args) is None
