"""`ascend-build`, the project's command: invoke's own Program on the checkout's tasks.py, made
with invoke's public parts (a Program with a config class of its own), so that everything
invoke does before a task runs ends as the README's table says. Plain `invoke` reads its
config files before any code of this project is loaded: a malformed /etc/invoke.yaml there
is invoke's traceback; here it is a message and exit 2.

- The config files (/etc/invoke.yaml, ~/.invoke.yaml, invoke.yaml beside tasks.py, `-f FILE`)
  are read strictly: UTF-8, at most 1 MiB, YAML's safe types, a mapping at the top, and
  anchors that expand to at most a few thousand nodes (an alias bomb stops at once, before
  invoke copies it).
- A file or variable whose shape clashes with invoke's own config is bad input.
- A command line invoke cannot parse (an unknown option or task, `--help TASK` of no task)
  is bad input (2); invoke itself ends those with 1, which the table keeps for news."""
from __future__ import annotations

import json
import os
import runpy
import signal
import stat
import sys
from contextvars import ContextVar
from typing import Any, NoReturn

import yaml
from invoke import Config, Exit, Program
from invoke.config import AmbiguousMergeError
from invoke.exceptions import AmbiguousEnvVar, UncastableEnvVar, UnknownFileType, UnpicklableConfigMember
from invoke.parser import ParseError

from ..errors import CODE
from . import siteconfig
from .program import localize

NAME = "ascend-build"
MAX_BYTES = 1 << 20        # a site's settings fit in far less
MAX_NODES = 10_000          # what its anchors may expand to: a few hundred settings at most


def _refuse(text: str) -> NoReturn:
    """End the command as every bad input ends (Program.run prints an Exit's message)."""
    raise Exit(f"error: {localize(text)}", code=CODE[2].code)


def _expanded(node: yaml.Node, seen: dict[int, int], open_: set[int]) -> int:
    """How many nodes a composed document stands for once its aliases are copied out (aliases
    share a node; invoke's merge copies each): counted once per node, memoised."""
    key = id(node)
    if key in seen:
        return seen[key]
    if key in open_:
        raise ValueError("an anchor that holds itself")
    open_.add(key)
    children: list[Any] = []
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    total = 1
    for child in children:
        total += _expanded(child, seen, open_)
        if total > MAX_NODES:
            break
    open_.discard(key)
    seen[key] = total
    return total


def read_config(path: str) -> dict[str, Any]:
    """A config file's data, or the command ends with a message naming the file and what is
    wrong (never a traceback, never a value: a file may hold a password)."""
    where = f"invoke's config file {path}"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):     # a FIFO would wait for a writer, a device never end
            _refuse(f"{where}: not a regular file")
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except IsADirectoryError:
        _refuse(f"{where}: a folder, not a file")
    except PermissionError:
        _refuse(f"{where}: not readable by this user")
    if len(raw) > MAX_BYTES:
        _refuse(f"{where}: larger than {MAX_BYTES >> 20} MiB; a site's settings are a few lines")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        _refuse(f"{where}: not UTF-8 text (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})")
    try:
        if path.endswith(".json"):
            data = json.loads(text)
        else:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
            if node is not None and _expanded(node, {}, set()) > MAX_NODES:
                _refuse(f"{where}: its anchors and aliases expand to more than {MAX_NODES:,} values "
                        f"(an alias bomb?); write the settings out")
            data = yaml.load(text, Loader=yaml.SafeLoader)     # noqa: S506 - the safe loader: no Python tags
    except (yaml.YAMLError, json.JSONDecodeError, ValueError, RecursionError) as exc:
        _refuse(f"{where}: not a YAML/JSON file invoke can read: {_first_line(exc)}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        _refuse(f"{where}: expected a mapping at the top (`{siteconfig.SECTION}:` and its settings), "
                f"got {siteconfig.kind_of(data)}")
    bad = _non_text_key(data, ())
    if bad is not None:
        # invoke names config keys as INVOKE_ variables: a number or a list as a key has no name
        _refuse(f"{where}: the key {'.'.join(bad[:-1] + (repr(bad[-1])[:40],))} is not text; every key of a "
                f"config file is a name")
    return data


def _non_text_key(data: Any, path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The path to the first key that is not text, or None."""
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str):
                return (*path, key)
            found = _non_text_key(value, (*path, key))
            if found is not None:
                return found
    return None


def _first_line(exc: BaseException) -> str:
    """What the parser said, on one line (a YAML error spans several, with the line and column)."""
    return " ".join(str(exc).split())[:300]


# invoke's search for a level's file (Config's docs: its prefixes, then `prefix` or `file_prefix`): the
# first of these suffixes that is there
SUFFIXES = ("yaml", "yml", "json", "py")
_COPYING: ContextVar[bool] = ContextVar("copying", default=False)


def _python_config(path: str) -> dict[str, Any]:
    """A .py config file's names as invoke takes them (the module's, without the __ ones). It
    runs here and again in invoke: it is the site's own code, and no public part of invoke
    hands back one level's data."""
    return {key: value for key, value in runpy.run_path(path).items() if not key.startswith("__")}


class SiteConfig(Config):
    """invoke's Config, through its public methods only: before invoke loads a level's file
    (load_system, load_user, load_project, load_runtime), the same file is read here strictly
    (read_config) and recorded, so invoke reads only a file that passed; its merges' clashes
    are bad input."""

    # The files read, in invoke's order of levels (system, user, project, then the -f file),
    # each with its data: what `invoke site` and the tasks' settings are read from. Class
    # defaults, so that invoke's attribute proxy keeps them attributes, not config keys.
    site_files: tuple[tuple[str, Any], ...] = ()
    runtime_file: str | None = None
    prefixes: dict[str, str | None] = {}        # where each level's file is looked for (never mutated)
    vetted: tuple[str, ...] = ()                # the levels read here: invoke loads each once too

    def __init__(self, overrides: dict[str, Any] | None = None, defaults: dict[str, Any] | None = None,
                 system_prefix: str | None = None, user_prefix: str | None = None,
                 project_location: Any = None, runtime_path: Any = None, lazy: bool = False) -> None:
        # invoke's defaults for the two prefixes (Config's docs)
        self.prefixes = {"system": "/etc/" if system_prefix is None else system_prefix,
                         "user": "~/." if user_prefix is None else user_prefix}
        super().__init__(overrides=overrides, defaults=defaults, system_prefix=system_prefix,
                         user_prefix=user_prefix, project_location=project_location,
                         runtime_path=runtime_path, lazy=lazy)

    def _file_of(self, level: str) -> str | None:
        """The file invoke loads for this level, or None."""
        if level == "runtime":
            return self.runtime_file
        prefix = self.prefixes.get(level)
        if prefix is None:
            return None
        for suffix in SUFFIXES:
            path = os.path.expanduser(f"{prefix}{self.file_prefix or self.prefix}.{suffix}")
            try:
                os.stat(path)
            except FileNotFoundError:       # invoke skips only a file that is not there
                continue
            return path         # any other error is read_config's to say
        return None

    def _vet(self, level: str) -> None:
        if _COPYING.get() or level in self.vetted:
            return
        self.vetted = (*self.vetted, level)
        path = self._file_of(level)
        if path is None or path.rsplit(".", 1)[-1] not in SUFFIXES:
            return      # no file, or one invoke refuses by its suffix (UnknownFileType)
        data = _python_config(path) if path.endswith(".py") else read_config(path)
        self.site_files = (*self.site_files, (path, data))

    def load_system(self, merge: bool = True) -> None:
        self._loading(lambda: self._vet("system"), lambda: super(SiteConfig, self).load_system(merge))

    def load_user(self, merge: bool = True) -> None:
        self._loading(lambda: self._vet("user"), lambda: super(SiteConfig, self).load_user(merge))

    def load_project(self, merge: bool = True) -> None:
        self._loading(lambda: self._vet("project"), lambda: super(SiteConfig, self).load_project(merge))

    def load_runtime(self, merge: bool = True) -> None:
        self._loading(lambda: self._vet("runtime"), lambda: super(SiteConfig, self).load_runtime(merge))

    def set_project_location(self, path: Any) -> None:
        # a new location is a new project file, which invoke loads afresh
        self.prefixes = {**self.prefixes, "project": None if path is None else os.path.join(path, "")}
        self.vetted = tuple(level for level in self.vetted if level != "project")
        super().set_project_location(path)

    def merge(self) -> None:
        try:
            super().merge()
        except AmbiguousMergeError as exc:
            _refuse(f"invoke's config (a file or an INVOKE_ variable) does not fit: {_first_line(exc)}; the site "
                    f"settings are a mapping under {siteconfig.SECTION}: (docs/mirrors.md)")

    def load_shell_env(self) -> None:
        # This project's INVOKE_ASCEND_BUILD_ variables are siteconfig's to read (each checked,
        # a list setting taken as one value); invoke's own mapping would try to cast them onto
        # a file's values and refuse a list.
        mine = {var: os.environ.pop(var) for var in list(os.environ)
                if var.upper().startswith(siteconfig.ENV_PREFIX)}
        try:
            super().load_shell_env()
        except (UncastableEnvVar, AmbiguousEnvVar) as exc:
            _refuse(f"an INVOKE_ variable does not fit invoke's config: {_first_line(exc)}")
        finally:
            os.environ.update(mine)

    def set_runtime_path(self, path: Any) -> None:
        # invoke skips a `-f FILE` that is not there without a word: the run would go on
        # without the settings it was told to take
        if path is not None and not os.path.exists(os.path.expanduser(str(path))):
            _refuse(f"-f {path}: no such file (INVOKE_RUNTIME_CONFIG or `-f` names invoke's config file for this run)")
        self.runtime_file = os.path.expanduser(str(path)) if path is not None else None
        self.vetted = tuple(level for level in self.vetted if level != "runtime")
        super().set_runtime_path(path)

    def clone(self, into: Any = None) -> Any:
        # invoke's clone copies each level it loaded and reads no file: neither does this class's
        token = _COPYING.set(True)
        try:
            new = super().clone(into)
        finally:
            _COPYING.reset(token)
        if isinstance(new, SiteConfig):
            new.site_files, new.runtime_file = self.site_files, self.runtime_file
            new.prefixes, new.vetted = self.prefixes, self.vetted
        return new

    @staticmethod
    def _loading(*steps: Any) -> None:
        # What invoke's own loaders refuse: a suffix it has no reader for, a .py file that
        # fails or holds a module; a file that cannot be opened.
        try:
            for step in steps:
                step()
        except (UnknownFileType, UnpicklableConfigMember) as exc:
            _refuse(f"invoke's config: {_first_line(exc)}")
        except (OSError, SyntaxError) as exc:
            _refuse(f"invoke's config file {getattr(exc, 'filename', '') or ''}: {_first_line(exc)}")


class AscendProgram(Program):
    """invoke's Program with the config class above, whose parse errors are bad input."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("config_class", SiteConfig)
        kwargs.setdefault("name", NAME)
        kwargs.setdefault("binary", NAME)
        super().__init__(**kwargs)

    def print_help(self) -> None:
        """invoke's core help, then the tasks as `--list` gives them: `ascend-build --help` is
        what a new user types first, and invoke's own lists only its core options."""
        super().print_help()
        if self.namespace is not None:
            return          # invoke lists a bundled namespace's tasks itself
        try:
            self.load_collection()
        except Exit:
            print(f"\nNo tasks.py here or in a folder above: run {NAME} in a checkout of this project (its tasks "
                  f"are the commands).")
            return
        self.list_root, self.list_depth, self.list_format = None, None, "flat"
        self.scoped_collection = self.collection
        print("")
        self.list_tasks()
        print(f"`{NAME} --help TASK` gives a task's options.")

    def print_task_help(self, name: str) -> None:
        """invoke's help of a task, its options in sections: the task's own, then each kind's
        (`invoke build`: the options of the kinds built on a runtime image, pages.option_sections)."""
        from invoke.parser import ParserContext

        from .pages import option_sections
        sections = option_sections(self.collection[name])
        if len(sections) < 2:
            return super().print_task_help(name)
        own = {flags.split("=")[0] for flags, _ in sections[0][1]}
        whole = self.parser.contexts[name]
        # invoke prints the task's usage, its docstring and its own options as always
        self.parser.contexts[name] = ParserContext(name=name, args=[
            a for a in whole.args.values() if f"--{a.name.replace('_', '-')}" in own])
        try:
            super().print_task_help(name)
        finally:
            self.parser.contexts[name] = whole
        for heading, rows in sections[1:]:
            print(f"Options of {heading}:")
            self.print_columns(rows)

    def parse_core(self, argv: Any) -> None:
        self._parsing(lambda: super(AscendProgram, self).parse_core(argv))

    def parse_tasks(self) -> None:
        self._parsing(super().parse_tasks)

    def parse_cleanup(self) -> None:
        self._parsing(super().parse_cleanup)

    @staticmethod
    def _parsing(step: Any) -> None:
        try:
            step()
        except ParseError as exc:
            _refuse(f"{exc} (`invoke --help TASK` lists the task's options)")


def main(argv: list[str] | None = None) -> None:
    """The console script. A reader of its output that went away (`| head`) ends it quietly,
    as it does any Unix tool (SIGPIPE: 141 in the shell)."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    AscendProgram().run(argv if argv is not None else [NAME, *sys.argv[1:]])


