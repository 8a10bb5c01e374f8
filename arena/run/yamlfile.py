"""Reading a YAML file a person wrote, with every way it can be wrong said plainly.

Only a regular file of UTF-8 text of bounded size is read. The document is composed into
nodes and checked before any Python value is built from it: a key given twice in one mapping
is an error (YAML would keep the last silently), and the document may hold only so many
values once its aliases are expanded, which defeats "billion laughs" alias bombs whose
expansion would otherwise reach validation and error messages.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import yaml

from arena.contract.errors import ConfigError, Problem

MAX_BYTES = 1_000_000
MAX_VALUES = 100_000  # scalars, lists and mappings, counting an alias as many times as it is used
MAX_DEPTH = 64
_MERGE = "tag:yaml.org,2002:merge"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BOMS = (  # longest first: UTF-32's little-endian mark begins with UTF-16's
    (b"\xff\xfe\x00\x00", "UTF-32 text"), (b"\x00\x00\xfe\xff", "UTF-32 text"),
    (b"\xef\xbb\xbf", "UTF-8 text with a byte-order mark"), (b"\xff\xfe", "UTF-16 text"), (b"\xfe\xff", "UTF-16 text"),
)
_SAVE = "save it as UTF-8 (without a byte-order mark)"


def read_yaml(path: Path, source: str, what: str = "scenario", loc: tuple = ()) -> Any:
    """The document in ``path``; ``ConfigError`` (naming ``source`` and ``loc``) if it cannot be read."""
    return parse_yaml(read_text(path, source, what, loc), source, loc)


def read_text(path: Path, source: str, what: str = "scenario", loc: tuple = ()) -> str:
    def fail(message: str) -> ConfigError:
        return ConfigError([Problem(loc, message)], source)

    try:
        info = path.stat()
    except FileNotFoundError:
        raise fail("file not found" if not loc else f"no {what} file at {path}") from None
    except OSError as exc:
        raise fail(f"{path} cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise fail(f"{path} is a folder, not a {what} file; give the path of a YAML file") from None
    if not stat.S_ISREG(info.st_mode):
        raise fail(f"{path} is not a regular file; give the path of a YAML {what} file")
    if info.st_size > MAX_BYTES:
        raise fail(f"the file is {info.st_size:,} bytes; a {what} file may be at most {MAX_BYTES:,}")
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise fail(f"{path} cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_BYTES:  # it grew while we looked
        raise fail(f"the file is over {MAX_BYTES:,} bytes; a {what} file may be at most {MAX_BYTES:,}")
    return decode(data, fail)


def decode(data: bytes, fail) -> str:
    """UTF-8 text, or ``fail(message)`` raised saying what the bytes are instead and how to fix it."""
    for mark, name in _BOMS:
        if data.startswith(mark):
            raise fail(f"the file is {name}, not plain UTF-8; {_SAVE}")
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise fail(f"the file holds NUL bytes (line {line}): it is binary, or UTF-16 text; {_SAVE}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise fail(f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); {_SAVE}") from None


def parse_yaml(text: str, source: str, loc: tuple = ()) -> Any:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problems = check_nodes(node, loc)
        if problems:
            raise ConfigError(problems, source)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError([Problem(loc, f"not valid YAML: {_describe(exc, text)}")], source) from None
    except RecursionError:
        raise ConfigError([Problem(loc, f"not valid YAML: nested too deeply (at most {MAX_DEPTH} levels)")], source) from None
    finally:
        loader.dispose()


def check_nodes(root: yaml.Node, loc: tuple = ()) -> list[Problem]:
    """Keys given twice in a mapping (each with both lines), and documents too big or too deep."""
    problems: list[Problem] = []
    reported: set[tuple[int, int]] = set()  # an anchor used twice would report its own mistake twice
    count = 0
    stack = [(root, loc, 0)]
    while stack:
        node, where, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            return [Problem(loc, f"the document holds more than {MAX_VALUES:,} values once its aliases (*name) are "
                                 "expanded; a scenario needs far fewer: use fewer aliases, or write the values out")]
        if depth > MAX_DEPTH:
            return [Problem(where[:4], f"nested more than {MAX_DEPTH} levels deep (or an alias inside its own anchor); "
                                       "a scenario needs a handful")]
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], yaml.Node] = {}
            for key, value in node.value:
                if key.tag == _MERGE:  # `<<: *defaults`: its keys may be overridden, so no duplicate here
                    stack.append((value, where, depth + 1))
                    continue
                if not isinstance(key, yaml.ScalarNode):
                    stack.append((key, where, depth + 1))
                    stack.append((value, where, depth + 1))
                    continue
                if (key.tag, key.value) in first:
                    mark = (key.start_mark.line, key.start_mark.column)
                    if mark not in reported:
                        reported.add(mark)
                        before = first[(key.tag, key.value)].start_mark.line + 1
                        lines = f"on line {before}" if before == mark[0] + 1 else f"lines {before} and {mark[0] + 1}"
                        problems.append(Problem(where + (key.value,), f"the key {key.value!r} is given twice ({lines}); "
                                                "YAML would keep only the last: keep one"))
                    continue
                first[(key.tag, key.value)] = key
                stack.append((value, where + (key.value,), depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, where + (i,), depth + 1) for i, item in enumerate(node.value))
    return problems


def _describe(exc: yaml.YAMLError, text: str) -> str:
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
        line = text[: exc.position].count("\n") + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return f"line {line}: the character U+{code:04X} is not allowed ({exc.reason}); remove it"
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None and text[mark.index: mark.index + 1] == "\t":
        problem += "; YAML is indented with spaces, not tabs"
    context = getattr(exc, "context", None)
    return " ".join((f"{where}{problem}" + (f" ({context})" if context and context not in problem else "")).split())
