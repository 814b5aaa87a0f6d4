"""The documentation speaks to users and leaves the checkout alone.

* No internal wording: the pages (README.md, docs/, examples/), the scripts under examples/ and
  benchmarks/ and the ``genpqr`` command's help do not talk about issues, briefs, helpers or
  sessions (the words of how the project is run, which mean nothing to a user).
* The commands and code on the pages write into fresh folders, never into tracked files: a
  tracked path a code block names is an input (examples/data/) or a script it runs, and every
  script a page runs defaults its output to a fresh folder. (The doc tests also run every
  block in scratch folders under ``checkout_unchanged``, which fails on any change to the
  checkout's ``git status``.)
* Long commands state their running time: a block that runs a script, an experiment sweep or
  a ``make`` target says how long it takes in the paragraph before or after it.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess

import pytest

from genpqr.app.cli import build_parser

from ..doc_warnings import ROOT

PAGES = sorted([ROOT / "README.md", *(ROOT / "examples").rglob("*.md"), *(ROOT / "docs").rglob("*.md")])
SCRIPTS = sorted([*(ROOT / "examples").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")])
INTERNAL = re.compile(r"\b(issues?|brief|helpers?|sessions?)\b", re.I)


def _rel(path) -> str:
    return path.relative_to(ROOT).as_posix()


def _help_texts():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command, p in [("genpqr", parser), *sub.choices.items()]:
        yield command, "\n".join(filter(None, [p.description, p.epilog, p.format_usage(),
                                               *(a.help for a in p._actions if a.help)]))
    for choice in sub._choices_actions:
        yield "genpqr (sub-command list)", choice.help or ""


@pytest.mark.parametrize("path", [*PAGES, *SCRIPTS], ids=_rel)
def test_pages_and_scripts_use_no_internal_wording(path):
    hits = [(n, line.strip()) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if INTERNAL.search(line)]
    assert not hits, f"{_rel(path)}: write for the user, not about how the work was organised: {hits}"


def test_command_help_uses_no_internal_wording():
    hits = [(command, m.group(0)) for command, text in _help_texts() for m in INTERNAL.finditer(text)]
    assert not hits


# ------------------------------------------------------------------------- code blocks
def code_blocks(text: str) -> list:
    """``(line number, body)`` of the fenced blocks and of the indented (4-space) blocks."""
    blocks = [(text[:m.start()].count("\n") + 2, m.group(1)) for m in re.finditer(r"```\w*\n(.*?)```", text, re.S)]
    masked = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    blocks += [(masked[:m.start()].count("\n") + 1, m.group(1))
               for m in re.finditer(r"(?:(?<=\n\n)|\A)((?: {4}.*\n)+)", masked)]
    return blocks


def _tracked():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = {f for f in out.split("\0") if f}
    folders = {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}
    return files, folders


PATH = re.compile(r"(?<![\w./$-])((?:\./)?[A-Za-z_][\w.-]*(?:/[\w.-]+)*/?)(?![\w(])")
READ_ONLY = re.compile(r"^(examples/data(/.*)?|(examples|benchmarks)/\w+\.py|src|docs/[\w/-]+\.md|"
                       r"\w+\.md|requirements[\w-]*\.txt|LICENSE|Makefile)$")


def test_code_blocks_name_no_tracked_output():
    """Every tracked path a page's code blocks name is an input or a script (or a page): a
    command writing ``--out docs/results/X`` or a call saving into ``docs/`` fails here."""
    files, folders = _tracked()
    found = []
    for page in PAGES:
        for line, body in code_blocks(page.read_text(encoding="utf-8")):
            for token in PATH.findall(body):
                name = token.removeprefix("./").rstrip("/")
                if (name in files or name in folders) and not READ_ONLY.match(name):
                    found.append(f"{_rel(page)}:{line}: {name}")
    assert not found, f"code blocks naming tracked files or folders (write to a fresh folder): {found}"


def _out_defaults(script):
    """The ``default=`` of every ``add_argument("--out", ...)`` (or ``--out-dir``) in a script."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args
                and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("--out")):
            for kw in node.keywords:
                if kw.arg == "default":
                    yield ast.get_source_segment(script.read_text(encoding="utf-8"), kw.value)


@pytest.mark.parametrize("script", SCRIPTS, ids=_rel)
def test_scripts_write_into_fresh_folders_by_default(script):
    files, folders = _tracked()
    for default in _out_defaults(script):
        value = default.strip("\"'")
        assert "docs" not in default and "ROOT" not in default and "__file__" not in default, (script, default)
        assert value not in files and value not in folders, (script, default)


# --------------------------------------------------------------------- running times
LONG = re.compile(r"^\s*(?:\w+=\S+\s+)*(?:\S*python\S*\s+(?:\S+/)?(?:examples|benchmarks)/\w+\.py|\S*python\S* -c|"
                  r"genpqr experiment|make (?:demo|test|wheel-check|bench))\b", re.M)
DURATION = re.compile(r"\b\d[\d.,]*(?:\s*(?:-|to)\s*\d[\d.,]*)?\s*(?:ms|s|seconds?|minutes?|min|hours?|h)\b"
                      r"(?:\s+(?:per|each|in total|a seed|on))?", re.I)


def _paragraphs_around(text: str, line: int, body: str):
    lines = text.splitlines()
    before = "\n".join(lines[:line - 1]).rstrip("`\n ").rsplit("\n\n", 2)[-2:]
    after_start = line - 1 + body.count("\n") + 1
    after = "\n".join(lines[after_start:]).lstrip("`\n ").split("\n\n", 2)[:2]
    return " ".join([*before, *after])


def test_long_commands_state_their_running_time():
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for line, body in code_blocks(text):
            command = LONG.search(body.replace("\\\n", " "))
            if command and not DURATION.search(_paragraphs_around(text, line, body) + " " + body):
                missing.append(f"{_rel(page)}:{line}: {command.group(0).strip()}")
    assert not missing, f"say how long these take (e.g. 'about 40 s on two cores'): {missing}"
