"""The generated all-CuPy call path (runtime.launch.FastPath) and the driver launch, run
against a stand-in for CuPy and for the CUDA driver: what each launch is given, in which
order, and what the call returns. (On a GPU the same path is exercised by the gpu tier.)"""
import ctypes
import sys
import types

import numpy as np
import pytest

from numbamr.runtime import cudadriver, launch


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
    cupy.ndarray = FakeArray
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
    driver = types.SimpleNamespace(cuCtxGetCurrent=lambda p: 0,
                                   cuCtxSetCurrent=lambda c: contexts.append(c))
    monkeypatch.setattr(cudadriver, "_libcuda", driver)
    monkeypatch.setattr(cudadriver, "LAUNCH", fake_launch)
    return types.SimpleNamespace(launches=launches, answers=answers, contexts=contexts,
                                 register=fake_launch.nparams)


def _launcher(fake_gpu, handle, params, grid=5, block=128):
    dl = launch._DriverLaunch(handle, len(params), grid, block, 0)
    fake_gpu.register[handle] = params
    return types.SimpleNamespace(grid=grid, params=params, launch=dl)


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
    call = launch.FastPath(compiled).call
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
    result = launch.FastPath(_compiled([k], outs, structure=structure)).call(
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
    out = launch.FastPath(_compiled([k], [(np.float32, (2, 2))])).call([x])
    assert len(fake_gpu.contexts) == 1
    assert [l["params"] for l in fake_gpu.launches] == [[x.data.ptr, out.data.ptr]] * 2


def test_other_launch_errors_are_raised(fake_gpu):
    k = _launcher(fake_gpu, 9, [("leaf", 0), ("out", 0)])
    fake_gpu.answers.append(700)
    with pytest.raises(RuntimeError, match="CUDA error 700"):
        launch.FastPath(_compiled([k], [(np.float32, (2,))])).call([FakeArray((2,), "f4")])
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
