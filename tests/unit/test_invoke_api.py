"""invoke is used through its public names only (#67): nothing in the package (or tasks.py)
imports a private name of invoke, sets or deletes an attribute of one of invoke's classes or
modules (a monkeypatch), or reads or overrides a private name invoke's classes define. The
private names are read from the installed invoke itself, so a newer invoke's are held too;
pyproject.toml pins invoke below its next major version, whose public surface may move."""
from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def invoke_private_names() -> set[str]:
    """The private names of invoke's classes (`_load_yaml`, `_system`, ...): their methods and
    attributes, and those a Config and a Program set on themselves."""
    import invoke
    names = set()
    for value in vars(invoke).values():
        if isinstance(value, type):
            names |= {a for a in dir(value) if a.startswith("_") and not a.endswith("__")}
    names |= {a for a in vars(invoke.Config(lazy=True)) if a.startswith("_")}
    names |= {a for a in vars(invoke.Program()) if a.startswith("_")}
    return names


def _invoke_names(tree: ast.Module) -> set[str]:
    """The names a module binds to invoke or something of it (`import invoke`, `from invoke
    import Program`, `from invoke.config import Config as C`)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "invoke"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "invoke":
            bound |= {a.asname or a.name for a in node.names}
    return bound


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _invoke_classes(tree: ast.Module, bound: set[str]) -> set[str]:
    """The module's classes made from invoke's (`class SiteConfig(Config)`), and theirs in turn."""
    made: set[str] = set()
    for node in ast.walk(tree):      # outer classes come first: one pass sees a base made above
        if isinstance(node, ast.ClassDef) and any(isinstance(_root(b), ast.Name) and _root(b).id in bound | made
                                                  for b in node.bases):
            made.add(node.name)
    return made


def back_doors(package: Path, extra: tuple[Path, ...] = ()) -> list[str]:
    """Each use of invoke outside its public names, as `file:line: what`."""
    private = invoke_private_names()
    found = []
    for path in [*sorted(package.rglob("*.py")), *extra]:
        tree = ast.parse(path.read_text())
        where = path.relative_to(package.parent)
        bound = _invoke_names(tree)
        subclasses = _invoke_classes(tree, bound)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                names = [] if isinstance(node, ast.Import) else [a.name for a in node.names]
                if any(m.split(".")[0] == "invoke" for m in modules) and (
                        any(part.startswith("_") for m in modules for part in m.split(".")) or
                        any(n.startswith("_") for n in names)):
                    found.append(f"{where}:{node.lineno}: imports a private name of invoke")
            targets: list[ast.expr] = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(_root(target), ast.Name) and \
                        _root(target).id in bound:
                    found.append(f"{where}:{node.lineno}: sets {ast.unparse(target)}, an attribute of invoke's")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") \
                    and node.args and isinstance(_root(node.args[0]), ast.Name) and _root(node.args[0]).id in bound:
                found.append(f"{where}:{node.lineno}: {node.func.id} on {ast.unparse(node.args[0])}, invoke's")
            if isinstance(node, ast.Attribute) and node.attr in private and not (
                    isinstance(node.value, ast.Name) and node.value.id == "self" and not subclasses):
                # self.X in a module with no class of invoke's is that class's own X
                found.append(f"{where}:{node.lineno}: reads {ast.unparse(node)}, a private name of invoke")
            if isinstance(node, ast.ClassDef) and node.name in subclasses:
                for item in node.body:
                    defined = [item.name] if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
                        [t.id for t in getattr(item, "targets", [getattr(item, "target", None)])
                         if isinstance(t, ast.Name)]
                    found += [f"{where}:{item.lineno}: {node.name} overrides {name}, a private name of invoke"
                              for name in defined if name in private]
    return found


def test_the_package_uses_invoke_through_its_public_names_only():
    assert back_doors(ROOT / "ascend_build", (ROOT / "tasks.py",)) == []


def test_a_planted_back_door_is_found(tmp_path):
    """The check can fail: each way in that #67 closed, planted in a copy of the package."""
    copy = tmp_path / "ascend_build"
    shutil.copytree(ROOT / "ascend_build", copy, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    (copy / "cli" / "planted.py").write_text(
        "import invoke\nfrom invoke import Config, Program\nfrom invoke.config import _format_mismatch  # noqa\n\n\n"
        "def parse(self, argv):\n    return argv\n\n\n"
        "Program.parse_core = parse\ninvoke.Program.binary = 'x'\nsetattr(Config, 'prefix', 'site')\n\n\n"
        "def levels(config):\n    return config._system, config._user\n\n\n"
        "class Strict(Config):\n    _load_yml = None\n\n    def _load_yaml(self, path):\n"
        "        return super()._load_yaml(path)\n\n    def own(self):\n        return self._vet\n")
    found = [re.sub(r"^ascend_build/cli/planted\.py:\d+: ", "", f) for f in back_doors(copy)]
    assert sorted(found) == sorted([
        "imports a private name of invoke",
        "sets Program.parse_core, an attribute of invoke's",
        "sets invoke.Program.binary, an attribute of invoke's",
        "setattr on Config, invoke's",
        "reads config._system, a private name of invoke",
        "reads config._user, a private name of invoke",
        "Strict overrides _load_yml, a private name of invoke",
        "Strict overrides _load_yaml, a private name of invoke",
        "reads super()._load_yaml, a private name of invoke",
    ]), found


def test_invoke_is_pinned_below_its_next_major_version():
    from importlib.metadata import version
    major = int(version("invoke").split(".")[0])
    text = (ROOT / "pyproject.toml").read_text()
    pin = re.search(r'"invoke>=[\d.]+,<(\d+)"', text)
    assert pin is not None, "pyproject.toml: invoke has no upper bound"
    assert int(pin.group(1)) == major + 1, f"invoke {major}.x installed, pinned below {pin.group(1)}"
