"""The documentation's code runs, and what it shows is what it does.

Every Markdown page under ``docs/`` and ``README.md`` is one test. Its fenced
blocks run in page order, and each runs alone: in a fresh namespace, a fresh
working directory and opendml's default configuration, as a reader who copies
that one block has them. A block continues the one before it (its names, its
working directory, its configuration) only where the page says so, with a
fence title starting "Continued" (``pycon title="Continued from above"``),
which the rendered page shows; such a block must fail alone (else the marker
is dropped). The files a page lists (``json title="NAME"``) are in every later
block's directory.

- ``python``: executed. A block fenced ``text title="Output"`` right after it
  is what it must print.
- ``pycon``: ``>>>`` examples, checked by doctest.
- ``console``: ``$ opendml ...`` lines run through the command line in this
  process; the lines up to the next ``$`` are its output (stdout, then
  stderr). ``; echo $?`` after a command appends its exit code.
- ``bash``: install and test commands, checked rather than run: ``pip install``
  names extras that ``pyproject.toml`` defines, ``python -m MODULE`` names a
  module that exists, ``opendml ...`` runs and exits 0, and ``python -m
  pytest`` is this suite.
- ``json``: parsed; a description (it has ``"Operator"``) must build. With
  ``title="NAME"`` it is a file instead, written to NAME for the page's
  commands, which check it.
- ``{.python .cuda}`` (or ``.cuda`` on any fence): run only where CUDA works.

Output is compared with doctest's checker (``...`` matches anything,
whitespace runs are equal). Other fences (``text`` without a title, ``cpp``)
are prose.
"""
from __future__ import annotations

import ast
import contextlib
import doctest
import importlib.util
import io
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tomllib
import types
from dataclasses import dataclass, field

import pytest

import opendml

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclass
class Block:
    lang: str
    classes: set[str]
    title: str | None
    text: str
    line: int                      # 1-based line of the opening fence
    output: "Block | None" = field(default=None)


_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>.*)$")


def parse_blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown page, each output block attached to the
    code block before it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m["indent"]), m["fence"], m["info"].strip()
        body, j = [], i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        lang, classes, title = _info(info)
        blocks.append(Block(lang, classes, title, "\n".join(body) + "\n", i + 1))
        i = j + 1
    out: list[Block] = []
    for b in blocks:
        if b.title == "Output" and out and out[-1].lang == "python" and out[-1].output is None:
            out[-1].output = b
        else:
            out.append(b)
    return out


def _info(info: str) -> tuple[str, set[str], str | None]:
    """``python``, ``text title="Output"`` or ``{.python .cuda}``."""
    title = None
    m = re.search(r'title="([^"]*)"', info)
    if m:
        title = m[1]
        info = info[:m.start()] + info[m.end():]
    if info.startswith("{"):
        classes = [c[1:] for c in info.strip("{} ").split() if c.startswith(".")]
        return (classes[0] if classes else ""), set(classes[1:]), title
    words = info.split()
    return (words[0] if words else ""), set(), title


def _cuda_available() -> bool:
    from opendml.runtime import cuda_status
    try:
        return bool(cuda_status()[0])
    except Exception:
        return False


def _check(want: str, got: str, what: str) -> None:
    if not doctest.OutputChecker().check_output(want, got, FLAGS):
        raise AssertionError(f"{what}: the shown output differs from what the code printed.\n"
                             f"--- shown ---\n{want}--- printed ---\n{got}")


class _Utf8Stream(io.TextIOWrapper):
    """stdout as a UTF-8 terminal has it (the CLI prints a check mark there)."""

    def __init__(self):
        super().__init__(io.BytesIO(), encoding="utf-8", newline="\n")

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8")


def run_cli(args: list[str]) -> tuple[int, str]:
    from opendml.cli import main
    out, err = _Utf8Stream(), _Utf8Stream()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as e:         # argparse: --help, --version, usage errors
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    return code, out.text() + err.text()


def run_console(block: Block, where: str) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"{where}: a console block starts with a '$ ' command line")
    for command, shown in commands:
        echo = command.endswith("; echo $?")
        argv = shlex.split(command.removesuffix("; echo $?"))
        if argv[0] != "opendml":
            raise AssertionError(f"{where}: console blocks run opendml commands only; got {command!r}")
        code, got = run_cli(argv[1:])
        if echo:
            got += f"{code}\n"
        elif code != 0:
            raise AssertionError(f"{where}: `{command}` exited {code}:\n{got}")
        _check("\n".join(shown) + "\n" if shown else "", got, f"{where}: `{command}`")


def _extras() -> set[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


def check_bash(block: Block, where: str) -> None:
    """Install and test commands: checked, and opendml commands run."""
    extras = _extras()
    for line in block.text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in (p.strip() for p in line.split("&&")):
            argv = shlex.split(part)
            while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", argv[0]):
                argv = argv[1:]                         # VAR=value command
            if argv[:2] == ["pip", "install"] or argv[:4] == ["python", "-m", "pip", "install"]:
                for arg in argv:
                    m = re.fullmatch(r"\.?\[([a-z,]+)\]", arg.replace('"', ""))
                    if m:
                        unknown = set(m[1].split(",")) - extras
                        assert not unknown, f"{where}: `{part}` names extras {unknown} not in pyproject.toml"
            elif argv[:3] == ["python", "-m", "pytest"]:
                pass                                    # this very suite
            elif argv[:2] == ["python", "-m"]:
                local = ROOT / argv[2].replace(".", "/")          # benchmarks/ is not installed
                assert (importlib.util.find_spec(argv[2]) is not None or local.with_suffix(".py").is_file()
                        or (local / "__main__.py").is_file()), f"{where}: `{part}` names no module"
            elif argv[:1] == ["python"] and len(argv) > 1 and argv[1].endswith(".py"):
                assert (ROOT / argv[1]).exists(), f"{where}: `{part}` names no file"
            elif argv[:1] == ["opendml"]:
                code, got = run_cli(argv[1:])
                assert code == 0, f"{where}: `{part}` exited {code}:\n{got}"
            elif argv[:1] == ["mkdocs"]:
                assert (ROOT / "mkdocs.yml").exists()
            elif argv[:1] in (["export"], ["bash"], ["cd"]):
                pass
            else:
                raise AssertionError(f"{where}: no rule checks the command `{part}` (tests/test_docs.py)")


RUNNABLE = ("python", "pycon", "console", "bash", "json")


def continues(block: Block) -> bool:
    """The page marks ``block`` as continuing the block before it."""
    return (block.title or "").startswith("Continued")


class _Alone:
    """What one block (with the blocks that continue it) runs in: a namespace,
    a working directory holding the page's listed files, and opendml's
    default configuration, undone when the next block starts afresh."""

    def __init__(self, name: str, workdir: pathlib.Path, files: dict):
        # a module of its own, importable by name while the block runs (PyTorch 2.11's Dynamo imports the
        # module a compiled function's globals name)
        module = types.ModuleType(name)
        self.namespace = module.__dict__
        workdir.mkdir(parents=True)
        for fname, text in files.items():
            (workdir / fname).write_text(text, encoding="utf-8")
        self._stack = contextlib.ExitStack()
        sys.modules[name] = module
        self._stack.callback(sys.modules.pop, name, None)
        self._stack.enter_context(contextlib.chdir(workdir))
        self._stack.enter_context(opendml.configure())

    def close(self) -> None:
        self._stack.close()


def run_page(path: pathlib.Path, workdir: pathlib.Path) -> int:
    """Run a page's blocks in order, each alone unless marked as continuing
    the one before (``continues``); the number of blocks run or checked.
    Each block's working directory is a new folder under ``workdir``."""
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    name = f"docs_{path.stem.replace('-', '_')}"
    files: dict[str, str] = {}
    count = 0
    scope = None
    previous = None
    try:
        for block in parse_blocks(path.read_text(encoding="utf-8")):
            where = f"{rel}:{block.line}"
            if "cuda" in block.classes and not _cuda_available():
                continue
            if block.lang not in RUNNABLE:
                continue
            if continues(block):
                if previous is None or previous.lang not in ("python", "pycon", "console"):
                    raise AssertionError(f"{where}: marked as continuing the block before, but no code block "
                                         "precedes it on the page")
                alone = _Alone(name, workdir / f"alone-{block.line}", files)
                try:
                    run_block(block, where, alone.namespace, files)
                except Exception:
                    pass
                else:
                    raise AssertionError(f"{where}: marked as continuing the block before, but it runs alone: "
                                         "drop the \"Continued\" title")
                finally:
                    alone.close()
            else:
                if scope is not None:
                    scope.close()
                scope = _Alone(name, workdir / f"block-{block.line}", files)
            run_block(block, where, scope.namespace, files)
            previous = block
            count += 1
    finally:
        if scope is not None:
            scope.close()
    return count


def run_block(block: Block, where: str, namespace: dict, files: dict) -> None:
    """Run or check one block in ``namespace`` and the current directory."""
    if block.lang == "python":
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(block.text, where, "exec"), namespace)
        if block.output is not None:
            _check(block.output.text, buf.getvalue(), where)
    elif block.lang == "pycon":
        test = doctest.DocTestParser().get_doctest(block.text, namespace, where, where.rsplit(":", 1)[0],
                                                   block.line)
        test.globs = namespace                  # (run in the block's module itself, not a copy: PyTorch 2.11's
        runner = doctest.DocTestRunner(optionflags=FLAGS)       # Dynamo reads a compiled function's globals there)
        report = io.StringIO()
        runner.run(test, out=report.write, clear_globs=False)
        if runner.failures:
            raise AssertionError(f"{where}: doctest failed\n{report.getvalue()}")
    elif block.lang == "console":
        run_console(block, where)
    elif block.lang == "bash":
        check_bash(block, where)
    elif block.lang == "json":
        obj = json.loads(block.text)
        if block.title and not continues(block):    # a file the page's later blocks read (and check)
            pathlib.Path(block.title).write_text(block.text, encoding="utf-8")
            files[block.title] = block.text
        elif isinstance(obj, dict) and "Operator" in obj:
            from opendml.jsonform import from_json
            from_json(obj)


@pytest.mark.parametrize("path", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_runs(path, tmp_path):
    before = opendml.config()
    run_page(path, tmp_path)
    assert opendml.config() == before, f"{path.name}: a block's configuration outlived the page"


def test_pages_hold_with_the_numpy_kernels(tmp_path):
    """Where the C kernels could not be built, opendml runs the same plans
    through NumPy: every page still shows what such an install prints."""
    for path in PAGES:
        with opendml.configure(cpu_kernels="numpy"):
            run_page(path, tmp_path / path.relative_to(ROOT).as_posix().replace("/", "-"))


def _page(tmp_path, text: str) -> pathlib.Path:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    return page


def test_each_block_runs_alone(tmp_path):
    """A block that uses a name, a file or a configuration of an earlier
    block fails unless the page marks it as continuing that block."""
    names = "```pycon\n>>> x = 41\n```\n\n```pycon\n>>> x + 1\n42\n```\n"
    with pytest.raises(AssertionError, match="page.md:5: doctest failed"):
        run_page(_page(tmp_path, names), tmp_path / "a")
    marked = names.replace("```pycon\n>>> x + 1", '```pycon title="Continued from above"\n>>> x + 1')
    assert run_page(_page(tmp_path, marked), tmp_path / "b") == 2
    files = ('```python\nopen("f.txt", "w").write("hi")\n```\n\n'
             '```python\nprint(open("f.txt").read())\n```\n\n```text title="Output"\nhi\n```\n')
    with pytest.raises(FileNotFoundError):
        run_page(_page(tmp_path, files), tmp_path / "c")
    config = ("```python\nimport opendml\nopendml.configure(cpu_kernels='numpy')\n```\n\n"
              "```python\nimport opendml\nprint(opendml.config().cpu_kernels)\n```\n\n"
              '```text title="Output"\nnumpy\n```\n')
    before = opendml.config()
    with pytest.raises(AssertionError, match="differs"):
        run_page(_page(tmp_path, config), tmp_path / "d")
    assert opendml.config() == before          # and the configuration a block set is undone


def test_a_continued_marker_must_be_needed(tmp_path):
    page = '```pycon\n>>> 1\n1\n```\n\n```pycon title="Continued"\n>>> 2\n2\n```\n'
    with pytest.raises(AssertionError, match="runs alone"):
        run_page(_page(tmp_path, page), tmp_path / "a")
    with pytest.raises(AssertionError, match="no code block precedes it"):
        run_page(_page(tmp_path, '```pycon title="Continued"\n>>> 2\n2\n```\n'), tmp_path / "b")


def test_listed_files_are_in_every_later_block(tmp_path):
    page = ('```json title="spec.json"\n{"a": 1}\n```\n\n```python\nimport json\n'
            'print(json.load(open("spec.json")))\n```\n\n```text title="Output"\n{\'a\': 1}\n```\n')
    assert run_page(_page(tmp_path, page), tmp_path / "a") == 2


# -- what the pages promise ----------------------------------------------------------------------

def unbound_names(code: str) -> set[str]:
    """The names a Python block reads but neither imports, assigns nor
    defines (builtins aside): what it would need from an earlier block."""
    import builtins
    bound, read = set(), set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
    return read - bound - set(dir(builtins))


def test_cuda_blocks_run_alone():
    """A CUDA block runs only where CUDA works, so no CPU run catches one that
    uses an earlier block's names: each brings its own imports and inputs
    (or says it continues the block before)."""
    assert unbound_names("import numpy as np\nx = np.zeros(2)\nprint(dml.slice1(x))") == {"dml"}
    for page in PAGES:
        for block in parse_blocks(page.read_text(encoding="utf-8")):
            if "cuda" in block.classes and block.lang == "python" and not continues(block):
                missing = unbound_names(block.text)
                assert not missing, f"{page.relative_to(ROOT)}:{block.line}: the CUDA block uses {sorted(missing)}"



def test_blocks_calling_opendml_operators_by_name_import_opendml_torch():
    """``torch.ops.opendml.*`` exist once ``opendml.torch`` (or a first tensor
    call) registered them: this suite's process has them from other pages, a
    reader's fresh interpreter does not, so a block naming them imports
    ``opendml.torch`` itself (or continues a block that does)."""
    for page in PAGES:
        for block in parse_blocks(page.read_text(encoding="utf-8")):
            if block.lang in ("python", "pycon") and "torch.ops.opendml" in block.text and not continues(block):
                assert re.search(r"^(>>> )?import opendml\.torch\b", block.text, re.M), (
                    f"{page.relative_to(ROOT)}:{block.line}: the block calls torch.ops.opendml without "
                    f"importing opendml.torch")

def test_the_collector_sees_code_on_the_pages():
    counts = {p.relative_to(ROOT).as_posix(): len(parse_blocks(p.read_text(encoding="utf-8"))) for p in PAGES}
    assert counts["README.md"] >= 2
    assert sum(counts.values()) > 50


def test_figures_are_what_opendml_computes():
    spec = importlib.util.spec_from_file_location("docs_figures", DOCS / "figures.py")
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    shown = json.loads((DOCS / "figures" / "manifest.json").read_text(encoding="utf-8"))
    assert figures.compute() == shown, "docs/figures/manifest.json is out of date: run python docs/figures.py"
    for name in figures.FIGURES:
        assert (DOCS / "figures" / f"{name}.png").is_file(), f"docs/figures/{name}.png is missing"


def test_every_operator_page_shows_a_figure_drawn_by_the_generator():
    """The home page and the operators index promise a figure on each
    operator page: each page of docs/operators/ (not the index, not the
    errata) shows at least one, and every figure shown is one that
    docs/figures.py computes and draws."""
    spec = importlib.util.spec_from_file_location("docs_figures", DOCS / "figures.py")
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    pages = [p for p in sorted((DOCS / "operators").glob("*.md")) if p.name not in ("index.md", "errata.md")]
    assert len(pages) >= 11
    for page in pages:
        shown = re.findall(r"!\[[^\]]*\]\(\.\./figures/([\w-]+)\.png\)", page.read_text(encoding="utf-8"))
        assert shown, f"docs/operators/{page.name} shows no figure"
        unknown = [name for name in shown if name not in figures.FIGURES]
        assert not unknown, f"docs/operators/{page.name} shows {unknown}, which docs/figures.py does not draw"


def test_performance_charts_are_the_benchmarks_charts():
    charts = sorted((DOCS / "performance").glob("*.png"))
    assert charts
    for chart in charts:
        source = ROOT / "benchmarks" / "results" / chart.name
        assert source.read_bytes() == chart.read_bytes(), (
            f"docs/performance/{chart.name} differs from benchmarks/results/{chart.name}: copy it again")


def test_performance_tables_are_copied_from_results_md():
    """The performance page's numbers are benchmarks/RESULTS.md's, row for row."""
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8").splitlines()
    rows = [line for line in (DOCS / "performance.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("|") and not set(line) <= set("|-: ")]
    assert len(rows) > 50
    missing = [row for row in rows if row not in results]
    assert not missing, f"rows of docs/performance.md not in benchmarks/RESULTS.md: {missing[:3]}"


def public_names() -> list[str]:
    """opendml's public names: ``__all__`` and ``slice`` (DirectML's name,
    kept out of ``__all__`` so that ``import *`` leaves Python's alone)."""
    return [n for n in (*opendml.__all__, "slice") if n != "__version__"]


def placed_names() -> set[str]:
    """The names the API reference's pages render (``::: opendml.NAME``)."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in (DOCS / "reference").glob("*.md"))
    return set(re.findall(r"^::: opendml\.(\w+)\s*$", text, re.M))


def test_every_public_name_is_on_a_reference_page():
    """Each public name is rendered on a topic page of docs/reference/ (no
    catch-all section), and no page renders a name opendml lacks."""
    placed, public = placed_names(), public_names()
    unplaced = [n for n in public if n not in placed]
    assert not unplaced, f"public names on no page of docs/reference/: {unplaced}"
    stale = [n for n in placed if not hasattr(opendml, n) and importlib.util.find_spec(f"opendml.{n}") is None]
    assert not stale, f"docs/reference/ documents names opendml does not have: {stale}"
    # the tensor model, the operators, the device flow, the caches, the configuration and the errors
    core = ["DataType", "FeatureLevel", "TensorDesc", "TensorFlags", "calc_buffer_tensor_size", "packed_strides",
            "nhwc_strides", "DmlError", "ValidationError", "UnsupportedError", "BindingError", "AllocationError",
            "OperatorDesc", "SliceOperatorDesc", "Slice1OperatorDesc", "UnfoldOperatorDesc", "FoldOperatorDesc",
            "SliceGradOperatorDesc", "Device", "Buffer", "BufferBinding", "BindingTable", "Operator",
            "CompiledOperator", "slice", "slice1", "unfold", "fold", "slice_grad", "identity", "cast", "pad", "join",
            "split", "tile", "space_to_depth", "depth_to_space", "cpu_output_cache", "plan_cache_info",
            "configure", "config", "Config"]
    assert not [n for n in core if n not in placed]
    index = (DOCS / "reference" / "index.md").read_text(encoding="utf-8")
    assert "More public names" not in index and "<!--" not in index


def test_readme_links_into_the_site_resolve_on_a_checkout():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        assert (ROOT / link).is_file(), f"README.md links to {link}, which does not exist"


def test_readme_quick_start_is_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    test = 'pip install -e ".[test]" torch==2.13.0 && python -m pytest -q -n auto --dist loadfile'
    assert block.splitlines()[:2] == ['pip install -e . && opendml run', test]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "python -m " + test in [line.replace("pip install -q", "pip install") for line in ci]
    with open(ROOT / "pyproject.toml", "rb") as f:             # -n needs pytest-xdist, which the extra installs
        extra = tomllib.load(f)["project"]["optional-dependencies"]["test"]
    assert any(req.startswith("pytest-xdist") for req in extra)


def test_getting_started_counts_the_bundled_examples():
    """The page says how many examples `opendml run` runs: the number it runs."""
    code, listing = run_cli(["run", "--list"])
    assert code == 0
    count = len([line for line in listing.splitlines() if line.strip()])
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    assert f"bundled example, {count} of them" in text, f"docs/getting-started.md should say {count} examples"


def test_version_flag_prints_the_package_version():
    done = subprocess.run([sys.executable, "-m", "opendml.cli", "--version"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"opendml {opendml.__version__}\n"


def test_changelog_names_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog")
    assert re.search(rf"^## \[{re.escape(opendml.__version__)}\]", text, re.M) or "## [Unreleased]" in text


def test_license_matches_pyproject():
    with open(ROOT / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["license"] == {"text": "MIT"}
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "the opendml authors" in text
