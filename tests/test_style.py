"""The sources follow the project's flake8 settings (setup.cfg): a style slip fails CI."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_flake8_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "flake8", "numbamr", "tests", "bench"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
