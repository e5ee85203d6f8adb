"""A systemd unit's command line, as systemd would run it: the deploy test starts every daemon from the unit
files shipped in deploy/systemd, so the files a user installs are the ones that were tested.

Covers what mlfc's units use: ``EnvironmentFile=`` (``-`` prefix: optional), ``Environment=``, one
``ExecStart=`` with backslash continuations, ``%i``/``%I`` of template units, and systemd's two expansions:
``${VAR}`` is substituted inside a word, a word that is exactly ``$VAR`` becomes the value split at white
space (systemd.service(5), "Command lines"). ``root`` maps the unit's absolute paths (/etc/mlfc, /var/lib/mlfc)
into a test directory; ``binaries`` the installed programs to this checkout's.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

_BRACED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BARE_WORD = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)$")


class UnitError(ValueError):
    """A unit or environment file mlfc's deploy test cannot read as systemd would."""


@dataclass(frozen=True)
class Unit:
    path: Path
    exec_start: str
    environment_files: tuple[tuple[str, bool], ...] = ()  # (path, optional)
    environment: dict[str, str] = field(default_factory=dict)


def read_unit(path: Path) -> Unit:
    """The [Service] settings the deploy test needs (UnitError names the file and what is missing)."""
    section, lines, pending = "", [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if pending:
            line, pending = pending + " " + line, ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Service":
            lines.append(line)
    exec_start, env_files, env = "", [], {}
    for line in lines:
        key, sep, value = line.partition("=")
        if not sep:
            raise UnitError(f"{path}: not KEY=VALUE: {line!r}")
        value = value.strip()
        if key == "ExecStart":
            if exec_start:
                raise UnitError(f"{path}: more than one ExecStart= (a simple service has one)")
            exec_start = value.lstrip("-@:+!")
        elif key == "EnvironmentFile":
            env_files.append((value.lstrip("-"), value.startswith("-")))
        elif key == "Environment":
            for word in shlex.split(value):
                name, _, val = word.partition("=")
                env[name] = val
    if not exec_start:
        raise UnitError(f"{path}: no ExecStart=")
    return Unit(path, exec_start, tuple(env_files), env)


def read_environment_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines (quotes removed, # comments skipped), as systemd's EnvironmentFile= reads them."""
    env = {}
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.strip()):
            raise UnitError(f"{path}:{n}: not KEY=VALUE: {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def command_line(
    unit: Unit, *, instance: str = "", root: Path | None = None, binaries: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The argv systemd would exec for ``unit`` (template instance ``instance``) and its environment.
    Absolute paths under /etc, /var and /run are read and rewritten under ``root`` when given; the first word
    is replaced by ``binaries[name]`` when the program's base name is there."""
    env = dict(unit.environment)
    for name, optional in unit.environment_files:
        file = _under(root, name.replace("%i", instance).replace("%I", instance))
        if not file.exists():
            if optional:
                continue
            raise UnitError(f"{unit.path}: EnvironmentFile {file} does not exist")
        env.update(read_environment_file(file))
    words = shlex.split(unit.exec_start.replace("%i", instance).replace("%I", instance).replace("%%", "%"))
    argv: list[str] = []
    for word in words:
        bare = _BARE_WORD.match(word)
        if bare:
            argv += env.get(bare.group(1), "").split()
            continue
        argv.append(_BRACED.sub(lambda m: _lookup(env, m.group(1), unit.path), word))
    if root is not None:
        argv = [_rewrite(root, word) for word in argv]
    if binaries and argv and Path(argv[0]).name in binaries:
        argv[0] = binaries[Path(argv[0]).name]
    return argv, env


def _lookup(env: dict[str, str], name: str, unit: Path) -> str:
    if name not in env:
        raise UnitError(f"{unit}: ${{{name}}} is set by no Environment= or EnvironmentFile=")
    return env[name]


_SYSTEM_DIRS = ("/etc/", "/var/", "/run/")


def _under(root: Path | None, path: str) -> Path:
    return root / path.lstrip("/") if root is not None and path.startswith(_SYSTEM_DIRS) else Path(path)


def _rewrite(root: Path, word: str) -> str:
    """A word holding a system path (alone or after ``--flag=``) moved under ``root``."""
    flag, sep, value = word.partition("=")
    if sep and flag.startswith("-") and value.startswith(_SYSTEM_DIRS):
        return f"{flag}={_under(root, value)}"
    return str(_under(root, word)) if word.startswith(_SYSTEM_DIRS) else word
