"""The programs of examples/python/ run and check themselves (on the CPU
device, and on OpenCL where a program takes a device)."""
import os
import subprocess
import sys

import pytest

from conftest import EXAMPLES

PROGRAMS = sorted(f for f in os.listdir(os.path.join(EXAMPLES, "python"))
                  if f.endswith(".py"))


@pytest.mark.parametrize("name", PROGRAMS)
def test_example(name):
    path = os.path.join(EXAMPLES, "python", name)
    env = dict(os.environ)
    pkg = os.path.join(os.path.dirname(EXAMPLES), "python")
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, path], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " ok" in r.stdout
