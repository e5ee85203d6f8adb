"""The product imports nothing from the things that prove it (docs/architecture.md, "Rules the tree keeps").

Product: the packages ``mlfc`` (mlfc/), ``mlfc.controller``, ``mlfc.coordinator``, ``mlfc.hosts`` (with every
subpackage: training, transport, cc, kernel), ``mlfc.refswitch``, ``mlfc.integrations`` and ``mlfc.topologies``.
Proof, beside it: ``mlfc.launch`` (starting and crashing processes), ``mlfc.lab`` (emulated networks),
``mlfc.testing`` (test helpers) and ``mlfc.sim``: the simulator is on the proof side (the architecture's
"proof" column; ``sim/lab.py`` runs the lab's scenarios and imports ``mlfc.lab``), so it is not checked here.

Every .py file of the product's folders is parsed with ``ast``: an import of a proof package at any depth
(module level, inside a function, behind ``if TYPE_CHECKING``), relative imports resolved through
pyproject's package-dir, and ``importlib.import_module("...")``/``__import__("...")`` with a literal name.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = {"mlfc", "mlfc.controller", "mlfc.coordinator", "mlfc.hosts", "mlfc.refswitch", "mlfc.integrations",
           "mlfc.topologies"}  # fmt: skip
PROOF = {"mlfc.launch", "mlfc.lab", "mlfc.testing", "mlfc.sim"}
FORBIDDEN = ("mlfc.launch", "mlfc.lab", "mlfc.testing")


def _package_dirs() -> dict[str, str]:
    """pyproject's package-dir: package name -> its folder."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]["package-dir"]


def _forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


def _module_of(path: Path, dirs: dict[str, str]) -> str:
    """The dotted name of the module in ``path`` (the deepest package-dir folder that holds it)."""
    rel = path.relative_to(ROOT)
    best = max((p for p, d in dirs.items() if rel.is_relative_to(d)), key=lambda p: len(dirs[p]))
    inner = rel.relative_to(dirs[best]).with_suffix("").parts
    return ".".join((best, *inner))


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module name) of every import in ``tree``: statements at any depth and literal dynamic imports.
    ``from a import b`` yields a.b as well, since b may be a submodule (``from mlfc import lab``)."""
    found: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def _violations(path: Path, dirs: dict[str, str]) -> list[str]:
    module = _module_of(path, dirs)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(ROOT).as_posix()
    first: dict[int, str] = {}  # one line a statement: ``from mlfc.lab.x import a, b`` names mlfc.lab.x
    for line, name in _imported(tree, module, path.name == "__init__.py"):
        if _forbidden(name):
            first.setdefault(line, name)
    return [f"{rel}:{line}: imports {name}" for line, name in sorted(first.items())]


def _product_files(dirs: dict[str, str]) -> list[Path]:
    # mlfc/ holds only product subpackages (policy, proto); the others are product with all of theirs
    product = {p for p in dirs if p in PRODUCT or any(p.startswith(q + ".") for q in PRODUCT - {"mlfc"})}
    folders = {ROOT / dirs[p] for p in product}
    return sorted({f for folder in folders for f in folder.rglob("*.py") if "__pycache__" not in f.parts})


def test_the_product_imports_neither_launch_nor_lab_nor_testing() -> None:
    dirs = _package_dirs()
    files = _product_files(dirs)
    assert len(files) > 100, f"only {len(files)} product files found: the folder mapping is wrong"
    offenders = [v for f in files for v in _violations(f, dirs)]
    assert not offenders, "the product imports proof code (docs/architecture.md):\n" + "\n".join(offenders)


def test_every_package_dir_is_product_or_proof() -> None:
    # a new top-level package must be placed on one side, or the rule above silently skips it
    top = {p for p in _package_dirs() if p.count(".") <= 1}
    assert top == PRODUCT | PROOF, (
        f"classify {sorted(top - PRODUCT - PROOF)} (and drop {sorted(PRODUCT | PROOF - top)})"
    )


def test_the_guard_sees_every_form_of_import(tmp_path: Path) -> None:
    # the same walk on a file that breaks the rule in each way it can: each must be named, with its line
    source = (
        "import mlfc.lab.jobs\n"
        "from mlfc.launch.process import terminate\n"
        "from mlfc import testing\n"
        "def f():\n"
        "    import importlib\n"
        "    return importlib.import_module('mlfc.lab.rounds')\n"
        "from ..launch import switches\n"
        "__import__('mlfc.testing.lossy')\n"
        "import mlfc.laboratory, mlfc.policy.loss\n"  # neither is proof: a prefix of a name is not the name
    )
    fake = ROOT / "controller" / "guard_probe.py"
    lines = {line for line, name in _imported(ast.parse(source), "mlfc.controller.guard_probe", False)
             if _forbidden(name)}  # fmt: skip
    assert lines == {1, 2, 3, 6, 7, 8}
    assert _module_of(fake, _package_dirs()) == "mlfc.controller.guard_probe"
    assert _module_of(ROOT / "hosts" / "training" / "server.py", _package_dirs()) == "mlfc.hosts.training.server"
