"""Every Python block of docs/inference.md runs as written (a reader runs them in order), and the
warnings they raise are the page's list in tests/doc_warnings.py."""

import re
from pathlib import Path

import pytest

from ..doc_warnings import check_warnings, recording

ROOT = Path(__file__).resolve().parents[2]
PAGE = "inference.md"
pytestmark = pytest.mark.usefixtures("checkout_unchanged")


def test_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / PAGE).read_text()
    code = [body for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S) if lang == "python"]
    assert code
    namespace = {"__name__": "__doc_block__"}
    with recording() as found:
        for body in code:
            exec(compile(body, f"docs/{PAGE}", "exec"), namespace)
    check_warnings(f"docs/{PAGE}", "python", found)
    result = namespace["result"]
    assert result.se_kind == "efficient influence function" and len(result.names) == 5
