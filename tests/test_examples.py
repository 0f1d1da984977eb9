"""Every example runs and reports a match with float64 NumPy (in numba's simulator without
a GPU, as a newcomer's first command does)."""
import glob
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(p for p in glob.glob(os.path.join(ROOT, "examples", "*.py"))
                  if not os.path.basename(p).startswith("_"))


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_runs_and_matches_numpy(path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "-> OK" in proc.stdout and "MISMATCH" not in proc.stdout, proc.stdout
