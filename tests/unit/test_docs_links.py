"""The README and docs/ point at things that exist: every relative link, every anchor, every path named.

A relative Markdown link (``[text](docs/guide/setup.md#troubleshooting)``, an image) must resolve to
a file or folder of the repository, and its ``#anchor``, if any, to a heading of the Markdown file
it names, slugged as GitHub slugs headings (lower case, punctuation dropped, spaces to ``-``, a
repeated heading gets ``-1``, ``-2``...). A repository path written as code (```app/core/gguf/gguf_info.py```,
```bench/engine_vs_plain.py```) must exist, so that a module moved or a test renamed shows here
rather than in a reader's failed search. Fenced code blocks and inline code are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Paths the docs name on purpose although they do not exist: files the reader is told to create
# (docs/CONTRIBUTING.md's "How to add a panel" recipe).
NOT_YET_WRITTEN = frozenset({"app/ui/panels/latency.py", "tests/ui/test_latency_panel.py"})

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)
_CODE_PATH = re.compile(r"`((?:app|tests|bench|packaging|resources|docs|\.ci)/[^`\s]*)`")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown file under docs/, in a stable order."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _without_fences(text: str) -> str:
    """The text with fenced code blocks blanked (newlines kept, so line numbers stay right)."""
    return _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: markup dropped, lower case, punctuation out, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays, its target goes
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    """Every heading anchor of a Markdown file, repeated headings numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for m in _HEADING.finditer(_without_fences(md.read_text(encoding="utf-8"))):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(md: Path, root: Path = ROOT) -> list[str]:
    """'file:line: target (why)' for each relative link of ``md`` that does not resolve."""
    text = _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), _without_fences(md.read_text(encoding="utf-8")))
    problems = []
    for m in _LINK.finditer(text):
        target = m.group(1)
        if _SCHEME.match(target):
            continue  # http:, https:, mailto: are not checked here (no network in the tests)
        line = text.count("\n", 0, m.start()) + 1
        where = f"{md.relative_to(root)}:{line}: {target}"
        path_part, _, anchor = target.partition("#")
        dest = (md.parent / path_part).resolve() if path_part else md
        if root not in (dest, *dest.parents):
            problems.append(f"{where} (outside the repository)")
        elif not dest.exists():
            problems.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where} (no heading with that anchor in {dest.relative_to(root)})")
    return problems


def missing_paths(md: Path, root: Path = ROOT) -> list[str]:
    """'file:line: path' for each repository path written as code in ``md`` that does not exist."""
    text = md.read_text(encoding="utf-8")
    problems = []
    for m in _CODE_PATH.finditer(text):
        path = m.group(1).split("::")[0]  # tests/x.py::test_name names a test in a file
        if any(c in path for c in "<>*{}…") or ".." in path or path in NOT_YET_WRITTEN:
            continue  # a pattern or placeholder (`<cache>/...`, `part1..4`), not one path
        if not (root / path).exists():
            problems.append(f"{md.relative_to(root)}:{text.count(chr(10), 0, m.start()) + 1}: {path}")
    return problems


def test_every_relative_link_and_anchor_in_the_docs_resolves():
    checked = [md for md in doc_files() if md.exists()]
    assert len(checked) >= 5, checked  # README, architecture, CONTRIBUTING, field cases, the guide
    problems = [p for md in checked for p in broken_links(md)]
    assert problems == [], "broken links:\n" + "\n".join(problems)


def test_the_readme_links_into_the_user_guide_and_the_guide_reaches_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/guide/README.md)" in readme
    guide = ROOT / "docs" / "guide"
    toc = (guide / "README.md").read_text(encoding="utf-8")
    linked = {m.group(1).partition("#")[0] for m in _LINK.finditer(toc)}
    pages = {p.name for p in guide.glob("*.md")} - {"README.md"}
    assert pages and pages <= linked, f"guide pages missing from its contents: {sorted(pages - linked)}"


def test_every_repository_path_the_docs_name_exists():
    problems = [p for md in doc_files() if md.exists() for p in missing_paths(md)]
    assert problems == [], "paths named in the docs that do not exist:\n" + "\n".join(problems)


def test_slugs_follow_githubs_rules():
    assert slug("GPU builds (CUDA, Metal, Vulkan...)") == "gpu-builds-cuda-metal-vulkan"
    assert slug("The `llama.cpp` tools") == "the-llamacpp-tools"
    assert slug("What you see: the panels") == "what-you-see-the-panels"
    assert slug("### `app/core/gguf/`".lstrip("# ")) == "appcoregguf"
    assert slug("n_ctx and [the KV cache](x.md)") == "n_ctx-and-the-kv-cache"


@pytest.fixture
def tiny_repo(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "real.py").write_text("")
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## Same\n\n## Same\n\n```sh\n# not a heading\n```\n")
    return tmp_path


def test_the_checker_finds_a_missing_file_a_missing_anchor_and_a_missing_path(tiny_repo: Path):
    readme = tiny_repo / "README.md"
    readme.write_text(
        "[ok](docs/a.md#same-1) [ok too](docs/a.md#title) [web](https://example.com/x#y) [self](#top)\n"
        "# Top\n"
        "[gone](docs/b.md) [bad anchor](docs/a.md#not-a-heading) [fenced anchor](docs/a.md#same-2)\n"
        "`[in code](docs/nowhere.md)` [up](../../etc/passwd)\n"
        "```\n[in a fence](docs/nowhere.md)\n```\n"
        "`app/real.py` `app/gone.py` `tests/x.py::test_y` `<cache>/bandwidth.json`\n"
    )
    assert broken_links(readme, tiny_repo) == [
        "README.md:3: docs/b.md (no such file)",
        "README.md:3: docs/a.md#not-a-heading (no heading with that anchor in docs/a.md)",
        "README.md:3: docs/a.md#same-2 (no heading with that anchor in docs/a.md)",
        "README.md:4: ../../etc/passwd (outside the repository)",
    ]
    assert missing_paths(readme, tiny_repo) == ["README.md:8: app/gone.py", "README.md:8: tests/x.py"]
    assert anchors(tiny_repo / "docs" / "a.md") == {"title", "same", "same-1"}
