"""The architecture, enforced: every import in the project's source, read with ast, must go
downwards through the layers of arena/ (see the README's picture), plugins import only the
contract, and no module imports itself back through others."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

from helpers import ROOT

# where each import namespace lives in the checkout (pyproject.toml's package-dir)
FOLDERS = {"arena.games": "games", "arena.agents": "agents", "arena.referees": "referees", "arena": "arena"}
PLUGINS = ("arena.games", "arena.agents", "arena.referees")

# layer -> the layers it may import (besides itself and the top-level `arena`, which holds only the version)
LAYERS = {
    "arena.contract": set(),
    "arena.engine": {"arena.contract"},
    "arena.services": {"arena.contract"},
    "arena.store": {"arena.contract"},
    "arena.rank": {"arena.contract"},
    "arena.results": {"arena.contract", "arena.store", "arena.rank"},
    "arena.run": {"arena.contract", "arena.engine", "arena.services", "arena.store", "arena.rank", "arena.results"},
    "arena.report": {"arena.contract", "arena.store", "arena.results", "arena.rank"},
    "arena.cli": {"arena.contract", "arena.engine", "arena.services", "arena.store", "arena.results", "arena.rank",
                  "arena.run", "arena.report"},
}


def written_layering(text: str) -> dict[str, set[str]]:
    """The layering as a Markdown table writes it: the rows of the table headed ``| layer | may import |``
    (more columns may follow), each layer with the modules named in its second cell."""
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if re.match(r"^\|\s*layer\s*\|\s*may import\s*\|", line)]
    assert len(heads) == 1, f"expected one table headed '| layer | may import |', found {len(heads)}"
    table: dict[str, set[str]] = {}
    for line in lines[heads[0] + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        layer = cells[0].strip("`")
        assert layer not in table, f"{layer} has two rows"
        table[layer] = set(re.findall(r"arena\.[a-z_]+", cells[1]))
    return table


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root)
    for namespace, folder in sorted(FOLDERS.items(), key=lambda kv: -len(kv[0])):
        if rel.parts[0] == folder:
            parts = namespace.split(".") + list(rel.with_suffix("").parts[1:])
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def source_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for folder in FOLDERS.values() for p in (root / folder).rglob("*.py"))


def _absolute(module: str, level: int, package: str) -> str:
    """A relative import's module, ``level`` dots up from ``package``."""
    if not level:
        return module
    anchor = package.split(".")[: len(package.split(".")) - (level - 1)]
    return ".".join(anchor + ([module] if module else []))


def _dotted(node: ast.expr) -> str | None:
    """``arena.engine.pool`` for that attribute chain, None for anything else."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(names)]) if isinstance(node, ast.Name) else None


def imports_of(path: Path, root: Path = ROOT, modules: frozenset[str] = frozenset()) -> set[str]:
    """Every module of ours this file imports: at the top or inside a function, by a statement or by
    ``importlib.import_module`` / ``__import__`` of a written name, or reached as an attribute of
    ``arena`` once a statement has bound that name (``import arena`` then ``arena.engine.pool``)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    binds_arena = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            binds_arena |= any(alias.name.split(".")[0] == "arena" and alias.asname is None for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, package)
            named = {f"{base}.{alias.name}" for alias in node.names}  # `from pkg import module`
            found.update(named)
            if not named <= modules:  # `from . import sibling` runs the package, but imports nothing of its own
                found.add(base)
        elif (isinstance(node, ast.Call) and _dotted(node.func) in ("importlib.import_module", "import_module", "__import__")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            written = node.args[0].value
            level = len(written) - len(written.lstrip("."))
            found.add(_absolute(written[level:], level, package))
    if binds_arena:
        for node in ast.walk(tree):
            chain = _dotted(node) if isinstance(node, ast.Attribute) else None
            if chain and chain.startswith("arena."):
                parts = chain.split(".")
                found.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))  # build_graph keeps the modules
    return {m for m in found if m == "arena" or m.startswith("arena.")}


def layer_of(module: str) -> str | None:
    for prefix in (*PLUGINS, *LAYERS):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return None


def build_graph(root: Path = ROOT) -> nx.DiGraph:
    modules = {module_name(p, root): p for p in source_files(root)}
    g = nx.DiGraph()
    for name, path in modules.items():
        g.add_node(name)
        for target in imports_of(path, root, frozenset(modules)):
            if target in modules and target != name:  # `from pkg import Name` adds pkg.Name: keep real modules only
                g.add_edge(name, target)
    return g


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    return build_graph()


def test_every_module_belongs_to_a_layer(graph):
    strays = [m for m in graph if m != "arena" and layer_of(m) is None]
    assert not strays, f"modules outside every layer: {strays}; put them in one of {sorted(LAYERS)}"


def test_imports_go_down_the_layers(graph):
    wrong = []
    for source, target in graph.edges:
        here, there = layer_of(source), layer_of(target)
        if target == "arena" or here == there or here is None:
            continue
        if here in PLUGINS:
            continue  # checked below
        if there not in LAYERS[here]:
            wrong.append(f"{source} -> {target}")
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(wrong))


def test_plugins_import_only_the_contract(graph):
    wrong = [f"{s} -> {t}" for s, t in graph.edges
             if layer_of(s) in PLUGINS and t != "arena" and layer_of(t) not in ("arena.contract", layer_of(s))]
    assert not wrong, "plugins reaching past the contract:\n" + "\n".join(sorted(wrong))


def test_the_engine_loads_no_plugin_by_name(graph):
    wrong = [f"{s} -> {t}" for s, t in graph.edges if layer_of(s) in LAYERS and layer_of(t) in PLUGINS]
    assert not wrong, "arena/ importing a plugin instead of going through the registry:\n" + "\n".join(sorted(wrong))


def test_nothing_imports_the_cli(graph):
    wrong = [f"{s} -> {t}" for s, t in graph.edges if layer_of(t) == "arena.cli" and layer_of(s) != "arena.cli"]
    assert not wrong, "\n".join(sorted(wrong))


def test_the_top_level_package_imports_nothing_of_ours(graph):
    """``arena/__init__.py`` holds the version: importing any layer from it would load that layer
    with everything, past every rule above."""
    assert sorted(graph.successors("arena")) == []


def test_no_import_cycles(graph):
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c + [c[0]]) for c in cycles[:10])


def test_the_checks_can_fail(tmp_path):
    """A small tree that breaks each rule once: every check above must catch it."""
    files = {
        "arena/__init__.py": "",
        "arena/contract/__init__.py": "",
        "arena/contract/game.py": "from arena.store import writer\n",  # upwards
        "arena/store/__init__.py": "",
        "arena/store/writer.py": "def f():\n    from arena.cli import main\n",  # into the CLI, lazily
        "arena/cli/__init__.py": "from arena.cli import table\n",
        "arena/cli/table.py": "from . import other\n",
        "arena/cli/other.py": "from .table import x\n",  # a cycle
        "arena/engine/__init__.py": "import arena.games.g\n",  # a plugin by name
        "games/__init__.py": "", "games/g.py": "from arena.engine import pool\n",  # past the contract
        "arena/engine/pool.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    g = build_graph(tmp_path)
    for check in (test_imports_go_down_the_layers, test_plugins_import_only_the_contract,
                  test_the_engine_loads_no_plugin_by_name, test_nothing_imports_the_cli, test_no_import_cycles):
        with pytest.raises(AssertionError):
            check(g)
    test_every_module_belongs_to_a_layer(g)


@pytest.mark.parametrize("where, text, check", [
    ("arena/contract/game.py", "import importlib\nimportlib.import_module('arena.store.writer')\n",
     test_imports_go_down_the_layers),
    ("arena/contract/game.py", "def f():\n    return __import__('arena.store.writer', fromlist=['_'])\n",
     test_imports_go_down_the_layers),
    ("arena/store/__init__.py", "import importlib\nimportlib.import_module('.writer', __name__)\n"
     "importlib.import_module('arena.cli.main')\n", test_nothing_imports_the_cli),
    ("games/g.py", "import arena.contract\n\ndef f():\n    return arena.engine.pool.MessagePool\n",
     test_plugins_import_only_the_contract),
    ("arena/__init__.py", "from arena.run import runner\n", test_the_top_level_package_imports_nothing_of_ours),
])
def test_the_checks_see_imports_not_made_by_a_plain_statement(tmp_path, where, text, check):
    """An import by a written name, an attribute of ``arena`` reached after ``import arena...``,
    and the top-level package's own imports are imports too."""
    files = {"arena/__init__.py": "", "arena/contract/__init__.py": "", "arena/contract/game.py": "",
             "arena/store/__init__.py": "", "arena/store/writer.py": "", "arena/cli/__init__.py": "",
             "arena/cli/main.py": "", "arena/engine/__init__.py": "", "arena/engine/pool.py": "",
             "arena/run/__init__.py": "", "arena/run/runner.py": "", "games/__init__.py": "", "games/g.py": ""}
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    check(build_graph(tmp_path))  # the tree without the import passes
    (tmp_path / where).write_text(text)
    with pytest.raises(AssertionError):
        check(build_graph(tmp_path))


def test_a_run_does_not_load_the_test_tools():
    """``trio.testing`` imports pytest with it (0.1 s of every run's start): what a run loads, a
    user's run loads, in a fresh interpreter where nothing else has imported them."""
    import subprocess
    import sys

    probe = ("import sys, arena.cli.commands, arena.run.runner, arena.store.commits; "
             "print(sorted(m for m in ('pytest', '_pytest', 'trio.testing') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout


# -- the layering written down is the one enforced ---------------------------------------------------------
ENFORCED = {**LAYERS, **{plugin: {"arena.contract"} for plugin in PLUGINS}}


@pytest.mark.parametrize("doc", ["CONTRIBUTING.md", "README.md"])
def test_the_layering_written_down_is_the_one_enforced(doc):
    """CONTRIBUTING.md and the README's Architecture section each hold the table of what may import
    what; a layer added, dropped or given another import in one place only fails here."""
    written = written_layering((ROOT / doc).read_text(encoding="utf-8"))
    assert written == ENFORCED, (f"{doc} says {sorted((k, sorted(v)) for k, v in written.items() if ENFORCED.get(k) != v)}; "
                                 f"tests/test_layers.py enforces {sorted((k, sorted(v)) for k, v in ENFORCED.items() if written.get(k) != v)}")


def test_the_layering_check_can_fail():
    rows = {layer: ", ".join(f"`{m}`" for m in sorted(allowed)) or "nothing of Arena's" for layer, allowed in ENFORCED.items()}
    table = "| layer | may import |\n|---|---|\n" + "".join(f"| `{layer}` | {row} |\n" for layer, row in rows.items())
    assert written_layering("Intro.\n\n" + table + "\nAfter.") == ENFORCED
    assert written_layering(table.replace("| `arena.results` | `arena.contract`, ", "| `arena.results` | `arena.run`, `arena.contract`, ")) != ENFORCED
    assert written_layering(table.replace("| `arena.referees` | `arena.contract` |\n", "")) != ENFORCED
    with pytest.raises(AssertionError, match="found 0"):
        written_layering(table.replace("may import", "imports"))
