"""The README stays true: its quick start runs as written (on the GPU machine)."""
import os
import re
import subprocess
import sys

import pytest

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")


def quick_start():
    text = open(README).read()
    section = text[text.index("## Quick start"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_quick_start_is_python():
    compile(quick_start(), "README quick start", "exec")


@pytest.mark.gpu
def test_quick_start_runs(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "quick_start.py"      # a file: the translator reads function sources
    script.write_text(quick_start())
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "cf_float32" in p.stdout           # inspect_cuda printed the generated CUDA C
