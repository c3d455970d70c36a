"""docs/api.md's Python examples, run in order in one namespace from the repository's
top folder (its C++ examples are compiled and run by scripts/check-install.sh)."""
import os
import re

from conftest import ROOT


def test_the_python_examples_of_the_api_page_run(tmp_path):
    page = (ROOT / "docs" / "api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) >= 6
    namespace = {"tmp": tmp_path}
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        for number, block in enumerate(blocks, 1):
            exec(compile(block, f"docs/api.md, Python block {number}", "exec"), namespace)
    finally:
        os.chdir(here)
