"""The house rules CI keeps (docs/CONTRIBUTING.md, "Code rules"): each test reads the tree as it is
and names what breaks a rule, and how to mend it.

- Size: no module of ``app/`` over :data:`MAX_LINES` lines unless a line of its module docstring
  starts with ``Size:`` and says why; at most :data:`MAX_LONG_MODULES` such modules.
- Import cycles: none among the modules of ``app/``, counting every import grimp sees: those under
  ``if TYPE_CHECKING:`` and those inside functions too (a cycle is one whichever way it is spelt).
- The module map: every module of ``app/`` is an entry of docs/architecture.md's "Module map" (a
  table row or list item that starts with its backticked path, ``app/core/gguf/gguf_info.py``);
  an ``__init__.py`` that holds only a docstring is its folder's and needs none. No entry names a
  module that is gone.
- mypy: ``[tool.mypy]`` covers all of ``app/``, strict, with no override that loosens it for
  ``app``. mypy itself runs before pytest as a guardrail (packaging/bootstrap.py ``test``,
  ``CHECKS``): a strict run over ``app/`` takes 10-60 s, too slow for tests/unit.
- Signals: a Qt signal's payload is declared with its type (``Signal(LoadSettings)``); one declared
  ``object`` (a union, None, anything) names what it carries in a comment on its line.
- Dead code: vulture at :data:`VULTURE_CONFIDENCE` % confidence reports nothing in ``app/``, uses
  counted in ``app/``, ``tests/``, ``bench/`` and ``packaging/``. What vulture cannot see is let
  through by two rules (a Qt virtual or Qt attribute in ``app/ui``; an enum member, reached by
  value) and by :data:`ALLOWLIST`, one line each with why. vulture runs in-process here (about
  2 s) rather than as a bootstrap check, so the allow-list's reasons and its staleness are checked
  in the same place. By hand: ``vulture app tests bench packaging --min-confidence 60``.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import io
import itertools
import re
import tokenize
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import grimp
import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter brings tomli
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
MAX_LINES = 600
MAX_LONG_MODULES = 3
SIZE_NOTE = "Size:"
MAP_DOC = ROOT / "docs" / "architecture.md"
MAP_HEADING = "## Module map"
VULTURE_CONFIDENCE = 60
VULTURE_PATHS = ("app", "tests", "bench", "packaging")
ALLOWLIST = Path(__file__).with_name("dead_code_allowlist.txt")
MAX_ALLOWLIST_ENTRIES = 25


def app_modules() -> list[Path]:
    """Every ``.py`` file under ``app/``, sorted."""
    return sorted(p for p in APP.rglob("*.py") if "__pycache__" not in p.parts)


def rel(path: Path) -> str:
    """``path`` as written from the repository root, with forward slashes."""
    return path.relative_to(ROOT).as_posix()


# ---------------------------------------------------------------------------- size


def size_note(source: str) -> str | None:
    """The reason after ``Size:`` on a line of the module docstring of ``source`` (None: no such line)."""
    doc = ast.get_docstring(ast.parse(source)) or ""
    for line in doc.splitlines():
        line = line.strip()
        if line.startswith(SIZE_NOTE):
            return line.removeprefix(SIZE_NOTE).strip()
    return None


def test_size_note_is_read_from_the_module_docstring_only() -> None:
    long_doc = '"""Downloads.\n\nSize: about 630 lines, one job: the queue\'s state machine.\n"""\nx = 1\n'
    assert size_note(long_doc) == "about 630 lines, one job: the queue's state machine."
    assert size_note('"""Downloads."""\n# Size: a comment is not the docstring\n') is None
    assert size_note('x = """Size: a string that is not the docstring"""\n') is None


def _module_sizes() -> list[tuple[str, int, str | None]]:
    out = []
    for path in app_modules():
        source = path.read_text(encoding="utf-8")
        out.append((rel(path), len(source.splitlines()), size_note(source)))
    return out


def test_no_module_of_app_is_over_600_lines_without_saying_why() -> None:
    unexplained = [f"{path}: {n} lines" for path, n, note in _module_sizes() if n > MAX_LINES and not note]
    assert not unexplained, (
        f"Modules of app/ over {MAX_LINES} lines whose docstring does not say why (split each along a real seam, "
        f"or, for one cohesive job, add a docstring line 'Size: <why>'):\n  " + "\n  ".join(unexplained)
    )
    thin = [
        f"{path}: 'Size: {note}'" for path, _, note in _module_sizes() if note is not None and len(note.split()) < 5
    ]
    assert not thin, "A 'Size:' line says why in a sentence (five words at least):\n  " + "\n  ".join(thin)


def test_at_most_three_modules_of_app_earn_their_length() -> None:
    long = [f"{path}: {n} lines" for path, n, note in _module_sizes() if n > MAX_LINES and note]
    assert len(long) <= MAX_LONG_MODULES, (
        f"{len(long)} modules of app/ are over {MAX_LINES} lines with a 'Size:' reason; at most "
        f"{MAX_LONG_MODULES} may be (split one):\n  " + "\n  ".join(long)
    )


# ---------------------------------------------------------------------------- import cycles


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of the graph ``edges`` (module -> modules it imports), each
    sorted, found without recursion (Kosaraju: finishing order, then the reversed graph)."""
    graph = {m: sorted(set(targets)) for m, targets in edges.items()}
    for targets in list(graph.values()):
        for t in targets:
            graph.setdefault(t, [])
    order: list[str] = []
    seen: set[str] = set()
    for root in sorted(graph):
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(graph[root]))]
        while stack:
            node, todo = stack[-1]
            nxt = next((n for n in todo if n not in seen), None)
            if nxt is None:
                stack.pop()
                order.append(node)
            else:
                seen.add(nxt)
                stack.append((nxt, iter(graph[nxt])))
    reverse: dict[str, list[str]] = {m: [] for m in graph}
    for m, targets in graph.items():
        for t in targets:
            reverse[t].append(m)
    components: list[list[str]] = []
    placed: set[str] = set()
    for root in reversed(order):
        if root in placed:
            continue
        placed.add(root)
        component, todo_nodes = [], [root]
        while todo_nodes:
            node = todo_nodes.pop()
            component.append(node)
            for importer in reverse[node]:
                if importer not in placed:
                    placed.add(importer)
                    todo_nodes.append(importer)
        components.append(sorted(component))
    return components


def shortest_cycle(edges: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """The shortest cycle through the first module of ``component`` (a strongly connected component
    of two modules or more), in import order and closed: ``[a, b, ..., a]``."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(set(edges.get(node, ())) & members):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if nxt not in came_from and nxt != start:
                came_from[nxt] = node
                queue.append(nxt)
    raise ValueError(f"{component} is not strongly connected")


def import_cycles(package: str, *, exclude_type_checking_imports: bool = False) -> list[str]:
    """Each import cycle among the modules of ``package`` as one line: the cycle in import order,
    where each import is (``module:line``), and the other modules of its knot when there are more.

    Reads the source with grimp (no module is imported); ``if TYPE_CHECKING:`` imports count
    unless ``exclude_type_checking_imports``.
    """
    graph = grimp.build_graph(package, exclude_type_checking_imports=exclude_type_checking_imports, cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    lines = []
    for component in strongly_connected(edges):
        if len(component) < 2:
            continue
        cycle = shortest_cycle(edges, component)
        where = []
        for importer, imported in itertools.pairwise(cycle):
            details = graph.get_import_details(importer=importer, imported=imported)
            at = ", ".join(str(d["line_number"]) for d in details) or "?"
            where.append(f"{importer}:{at}")
        line = " -> ".join(cycle) + f"   (imports at {'; '.join(where)})"
        rest = sorted(set(component) - set(cycle))
        if rest:
            line += f"; the same knot holds {', '.join(rest)}"
        lines.append(line)
    return lines


def _write_package(root: Path, name: str, modules: Mapping[str, str]) -> None:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text('"""A package for a test."""\n', encoding="utf-8")
    for module, source in modules.items():
        (package / f"{module}.py").write_text(source.format(pkg=name), encoding="utf-8")


def test_a_cycle_through_a_type_checking_import_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``a`` imports ``b``; ``b`` imports ``a`` only for type checking: a cycle, named in import order."""
    name = "house_cycle_probe"
    _write_package(
        tmp_path,
        name,
        {
            "a": "from {pkg} import b\n",
            "b": (
                "from __future__ import annotations\n\nfrom typing import TYPE_CHECKING\n\n"
                "if TYPE_CHECKING:\n    from {pkg}.a import A\n"
            ),
            "c": "import {pkg}.a\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    (line,) = import_cycles(name)
    assert line == f"{name}.a -> {name}.b -> {name}.a   (imports at {name}.a:1; {name}.b:6)"
    # The cycle is there only through the TYPE_CHECKING import: without it there is none.
    assert import_cycles(name, exclude_type_checking_imports=True) == []


def test_a_cycle_is_named_in_order_with_the_rest_of_its_knot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """x <-> y, and z in the same knot only through an import inside a function (y -> z -> x): the
    shortest cycle through the first module, then the knot's other member."""
    name = "house_knot_probe"
    _write_package(
        tmp_path,
        name,
        {
            "x": "from {pkg} import y\n",
            "y": "from {pkg} import x, z\n",
            "z": "def later():\n    from {pkg} import x\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    (line,) = import_cycles(name)
    p = name
    assert line == f"{p}.x -> {p}.y -> {p}.x   (imports at {p}.x:1; {p}.y:1); the same knot holds {p}.z"
    assert strongly_connected({"a": ["b"], "b": ["a", "c"], "c": []}) == [["a", "b"], ["c"]]


def test_no_import_cycle_among_the_modules_of_app() -> None:
    cycles = import_cycles("app")
    assert not cycles, (
        "Import cycles among app's modules (TYPE_CHECKING and function-level imports count). Break each: "
        "move what both sides need into a module below them, or pass it in (a protocol, a callback):\n  "
        + "\n  ".join(cycles)
    )


# ---------------------------------------------------------------------------- the module map

_MAP_ENTRY = re.compile(r"^[ \t]*(?:[-*+]|\|)[ \t]*`(app/[^`\s]+\.py)`", re.MULTILINE)


def map_entries(markdown: str) -> set[str]:
    """The module paths the "Module map" section of ``markdown`` has an entry for: each table row or
    list item that starts with a backticked ``app/....py`` path (a path in prose is no entry)."""
    start = markdown.find(f"\n{MAP_HEADING}\n")
    if start < 0:
        raise ValueError(f"no '{MAP_HEADING}' heading")
    end = markdown.find("\n## ", start + 1)
    return set(_MAP_ENTRY.findall(markdown[start : end if end >= 0 else len(markdown)]))


def test_map_entries_are_the_rows_and_items_that_start_with_a_path() -> None:
    text = (
        "# Doc\n\n## Module map\n\n### `app/core/`\n\n| module | job |\n| --- | --- |\n"
        "| `app/core/rpc.py` | RPC |\n\n- `app/ui/theme.py`: the palette\n  * `app/ui/x/y.py` (nested)\n"
        "The values live in `app/core/remote.py`.\n\n## Owners of state\n\n- `app/paths.py`: not the map\n"
    )
    assert map_entries(text) == {"app/core/rpc.py", "app/ui/theme.py", "app/ui/x/y.py"}
    with pytest.raises(ValueError, match="Module map"):
        map_entries("# Doc\n\n## Modules\n")


def needs_map_entry(path: Path) -> bool:
    """Every module does, but an ``__init__.py`` that holds only its docstring (its folder's heading names it)."""
    if path.name != "__init__.py":
        return True
    body = ast.parse(path.read_text(encoding="utf-8")).body
    rest = body[1:] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else body
    return any(not (isinstance(s, ast.ImportFrom) and s.module == "__future__") for s in rest)


def test_the_module_map_names_every_module_of_app_and_no_other() -> None:
    named = map_entries(MAP_DOC.read_text(encoding="utf-8"))
    modules = app_modules()
    missing = sorted(rel(p) for p in modules if needs_map_entry(p) and rel(p) not in named)
    gone = sorted(named - {rel(p) for p in modules})
    assert not missing and not gone, (
        f"docs/architecture.md's {MAP_HEADING!r} (entries: a table row or list item starting with the "
        "backticked path) is out of step with app/.\nMissing (add a line with its one job):\n  "
        + ("\n  ".join(missing) or "-")
        + "\nGone (remove or rename the entry):\n  "
        + ("\n  ".join(gone) or "-")
    )


# ---------------------------------------------------------------------------- mypy's reach


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def test_mypy_is_strict_on_all_of_app() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    roots = [ROOT / f for f in _as_list(config["files"])]
    uncovered = [rel(p) for p in app_modules() if not any(r == p or r in p.parents for r in roots)]
    assert not uncovered, "[tool.mypy] files leaves out:\n  " + "\n  ".join(uncovered)
    assert config["strict"] is True and config.get("warn_unreachable") is True
    loosened = [
        o["module"]
        for o in config.get("overrides", [])
        if any(m == "app" or m.startswith("app.") for m in _as_list(o["module"]))
    ]
    assert not loosened, f"[[tool.mypy.overrides]] for app's own modules: {loosened}"


# ---------------------------------------------------------------------------- signal payloads


def _is_signal(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "Signal") or (
        isinstance(func, ast.Attribute) and func.attr == "Signal"
    )


def object_signals_without_a_word(source: str) -> list[int]:
    """Lines of ``source`` that declare a ``Signal(...)`` with an ``object`` payload and no comment."""
    commented = {
        tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT
    }
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and _is_signal(node.func)
        and any(isinstance(a, ast.Name) and a.id == "object" for a in node.args)
        and not commented & {node.lineno, node.end_lineno}
    ]


def test_an_object_signal_is_found_unless_its_line_says_what_it_carries() -> None:
    source = (
        "class A(QObject):\n"
        "    a = Signal(LoadSettings)\n"
        "    b = Signal(object)\n"
        "    c = Signal(object)  # str | None\n"
        "    d = QtCore.Signal(int, object)\n"
        "    e = Signal(str, str)\n"
    )
    assert object_signals_without_a_word(source) == [3, 5]


def test_signal_payloads_are_typed_or_say_what_they_carry() -> None:
    found = [
        f"{rel(path)}:{line}: {path.read_text(encoding='utf-8').splitlines()[line - 1].strip()}"
        for path in app_modules()
        for line in object_signals_without_a_word(path.read_text(encoding="utf-8"))
    ]
    assert not found, (
        "Signals declared with an `object` payload and no word on what it is. Declare the type "
        "(Signal(LoadSettings): a project type travels as a Python object all the same), or, for a union "
        "or None, say it in a comment on the line (`Signal(object)  # RemoteFacts | RemoteError`):\n  "
        + "\n  ".join(found)
    )


# ---------------------------------------------------------------------------- dead code


@functools.cache
def _qt_names() -> frozenset[str]:
    """Every attribute name of a class of QtCore, QtGui and QtWidgets (what an override may be called)."""
    from PySide6 import QtCore, QtGui, QtWidgets

    names: set[str] = set()
    for module in (QtCore, QtGui, QtWidgets):
        for class_name in dir(module):  # PySide6 loads its classes lazily: vars(module) lacks most
            value = getattr(module, class_name)
            if isinstance(value, type):
                names.update(dir(value))
    return frozenset(names)


@functools.cache
def _enum_member_lines(path: Path) -> frozenset[int]:
    """Lines of ``path`` that define a member of an ``enum.Enum`` (or ``Flag``) class."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and any(
            (isinstance(b, ast.Name) and b.id.endswith(("Enum", "Flag")))
            or (isinstance(b, ast.Attribute) and b.attr.endswith(("Enum", "Flag")))
            for b in node.bases
        ):
            lines.update(s.lineno for s in node.body if isinstance(s, (ast.Assign, ast.AnnAssign)))
    return frozenset(lines)


def _seen_by_a_rule(path: str, item: Any) -> bool:
    """Qt calls a virtual (paintEvent, dropEvent, paint...) or reads an attribute by name; an enum's
    member is reached by value (``KVCacheType("q5_1")``)."""
    if path.startswith("app/ui/") and item.typ in ("method", "attribute", "property") and item.name in _qt_names():
        return True
    return item.typ == "variable" and item.first_lineno in _enum_member_lines(ROOT / path)


def allowlist() -> list[tuple[str, str, str]]:
    """``(path glob, name, why)`` for each line of :data:`ALLOWLIST` (``#`` lines and blank ones aside)."""
    entries = []
    for line in ALLOWLIST.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            parts = line.split(None, 2)
            entries.append((parts[0], parts[1] if len(parts) > 1 else "", parts[2] if len(parts) > 2 else ""))
    return entries


@functools.cache
def _vulture_findings() -> tuple[tuple[str, Any], ...]:
    """What vulture reports in ``app/`` at :data:`VULTURE_CONFIDENCE`, uses counted over :data:`VULTURE_PATHS`."""
    try:
        import vulture
    except ModuleNotFoundError:
        pytest.fail("vulture is not installed: the [test] extra of pyproject.toml brings it (pip install -e '.[test]')")
    v = vulture.Vulture()
    v.scavenge([str(ROOT / p) for p in VULTURE_PATHS])
    found = []
    for item in v.get_unused_code(min_confidence=VULTURE_CONFIDENCE):
        path = rel(Path(item.filename).resolve())
        if path.startswith("app/") and not _seen_by_a_rule(path, item):
            found.append((path, item))
    return tuple(found)


def _allowed(path: str, name: str) -> bool:
    return any(fnmatch.fnmatchcase(path, glob) and name == entry for glob, entry, _ in allowlist())


def test_no_dead_code_in_app() -> None:
    dead = [
        f"{path}:{item.first_lineno}: {item.message} ({item.confidence}% confidence)"
        for path, item in _vulture_findings()
        if not _allowed(path, item.name)
    ]
    assert not dead, (
        "vulture finds code in app/ that nothing in app/, tests/, bench/ or packaging/ uses. Delete it; if "
        f"something does use it that vulture cannot see, add '<path> <name> <why>' to {rel(ALLOWLIST)}:\n  "
        + "\n  ".join(dead)
    )


def test_the_dead_code_allowlist_is_short_and_each_entry_says_why_and_is_needed() -> None:
    entries = allowlist()
    assert len(entries) <= MAX_ALLOWLIST_ENTRIES, f"{len(entries)} entries: the allow-list is for exceptions"
    unexplained = [f"{glob} {name}" for glob, name, why in entries if len(why.split()) < 4]
    assert not unexplained, "Each entry says why vulture is wrong about it (four words at least):\n  " + "\n  ".join(
        unexplained
    )
    findings = _vulture_findings()
    stale = [
        f"{glob} {name}"
        for glob, name, _ in entries
        if not any(fnmatch.fnmatchcase(path, glob) and item.name == name for path, item in findings)
    ]
    assert not stale, "Entries vulture no longer reports (remove them, or fix the path):\n  " + "\n  ".join(stale)
