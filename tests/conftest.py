"""Test setup: without a GPU, kernels run in numba's CPU simulator (chosen before numba loads)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from numbamr.runtime.device import gpu_count, use_simulator_if_no_gpu  # noqa: E402

SIMULATOR = use_simulator_if_no_gpu()
HAS_GPU = gpu_count() > 0 and not SIMULATOR
sys.setswitchinterval(1e-4)      # the simulator runs one Python thread per CUDA thread

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NUMBAMR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
