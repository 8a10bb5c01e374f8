"""The architecture, enforced: every import in the project's source, read with ast, must go
downwards through the layers of arena/ (see the README's picture), plugins import only the
contract, and no module imports itself back through others."""

from __future__ import annotations

import ast
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
    "arena.run": {"arena.contract", "arena.engine", "arena.services", "arena.store", "arena.results"},
    "arena.report": {"arena.contract", "arena.store", "arena.results", "arena.rank"},
    "arena.cli": {"arena.contract", "arena.engine", "arena.services", "arena.store", "arena.results", "arena.rank",
                  "arena.run", "arena.report"},
}


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root)
    for namespace, folder in sorted(FOLDERS.items(), key=lambda kv: -len(kv[0])):
        if rel.parts[0] == folder:
            parts = namespace.split(".") + list(rel.with_suffix("").parts[1:])
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def source_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for folder in FOLDERS.values() for p in (root / folder).rglob("*.py"))


def imports_of(path: Path, root: Path = ROOT) -> set[str]:
    """Every module of ours this file imports, at the top or inside a function."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
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
        for target in imports_of(path, root):
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


def test_a_run_does_not_load_the_test_tools():
    """``trio.testing`` imports pytest with it (0.1 s of every run's start): what a run loads, a
    user's run loads, in a fresh interpreter where nothing else has imported them."""
    import subprocess
    import sys

    probe = ("import sys, arena.cli.commands, arena.run.runner, arena.store.commits; "
             "print(sorted(m for m in ('pytest', '_pytest', 'trio.testing') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout
