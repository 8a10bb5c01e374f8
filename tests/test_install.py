"""A normal (wheel) install and an editable install expose the same `arena` namespace."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path


from helpers import ROOT

PROBE = r"""
import json, site, sys
mode, target, *deps = sys.argv[1:]
sys.path[:] = [p for p in sys.path if p and p != "."]
if mode == "wheel":
    sys.path.insert(0, target)
else:
    site.addsitedir(target)
sys.path.extend(deps)  # dependencies only: appended without running their .pth files
import arena, arena.games, arena.agents, arena.referees
from arena.contract import plugins
game = plugins.load("game", "public_goods")
print(json.dumps({
    "games": arena.games.__file__, "agents": arena.agents.__file__, "referees": arena.referees.__file__,
    "game": game.__module__, "strategy": plugins.load("strategy", "tit_for_tat").__module__,
    "referee": plugins.load("referee", "rules").__module__,
}))
"""


def _copy_source(dest):
    anywhere = shutil.ignore_patterns(".git", ".venv", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis")

    def ignore(folder, names):
        # runs/, build/ and dist/ are outputs only at the top: arena/contract/runs is source
        top = {"runs", "build", "dist"} & set(names) if Path(folder) == Path(ROOT) else set()
        return set(anywhere(folder, names)) | top

    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


def _pip(*args):
    result = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def _probe(mode, target, cwd):
    deps = [p for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}]
    result = subprocess.run([sys.executable, "-S", "-c", PROBE, mode, str(target), *deps],
                            cwd=cwd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_wheel_and_editable_installs_import_the_same_way(tmp_path):
    src = _copy_source(tmp_path / "src")
    wheels = tmp_path / "wheels"
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src))
    (wheel,) = wheels.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "arena/games/public_goods/__init__.py" in names and "arena/agents/scripted.py" in names
    assert "arena/referees/rules.py" in names
    assert not any(n.startswith(("games/", "agents/", "referees/", "tests/")) for n in names)

    _pip("install", "--no-deps", "--target", str(tmp_path / "wheel_site"), str(wheel))
    _pip("install", "--no-deps", "--no-build-isolation", "--target", str(tmp_path / "editable_site"), "-e", str(src))

    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    normal = _probe("wheel", tmp_path / "wheel_site", cwd)
    editable = _probe("editable", tmp_path / "editable_site", cwd)

    assert normal["games"] == str(tmp_path / "wheel_site" / "arena" / "games" / "__init__.py")
    assert editable["games"] == str(src / "games" / "__init__.py")
    assert editable["agents"] == str(src / "agents" / "__init__.py")
    assert editable["referees"] == str(src / "referees" / "__init__.py")
    for key in ("game", "strategy", "referee"):
        assert normal[key] == editable[key]
    assert normal["game"] == "arena.games.public_goods"
