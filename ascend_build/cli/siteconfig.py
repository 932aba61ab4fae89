"""Site settings written once, through invoke's own config cascade: an air-gapped site's
mirrors, proxy, CA bundle, base-image map, indexes, wheelhouse, registries and engine,
in the `ascend_build:` section of /etc/invoke.yaml (the machine), ~/.invoke.yaml (the
user), invoke.yaml beside tasks.py (the checkout), INVOKE_ASCEND_BUILD_<KEY> variables or
`invoke -f FILE` (one run), in invoke's order: each later one wins. An option on the command
line wins over all of them. A setting is an option its record declares `opt(..., site=True)`
(cli/options.py), under the option's name: the keys, the kind of value each takes and the
tasks that take it are read from the tasks' records (`settings`), never listed here. A key no
task takes is refused (a typo would otherwise be a silent no-op)."""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, replace
from typing import Any, Literal, Mapping, Sequence

from .. import console
from ..engine.network import ca_setting, check_url, proxy_settings, redact, refuse_control
from ..errors import UserError
from .options import Flag, flags, opt

SECTION = "ascend_build"
WHERE = ("invoke's config: /etc/invoke.yaml, ~/.invoke.yaml, invoke.yaml beside tasks.py, "
         "INVOKE_ASCEND_BUILD_<KEY> or `invoke -f FILE`")
ENV_PREFIX = f"INVOKE_{SECTION.upper()}_"

Kind = Literal["text", "list", "flag"]
KINDS: tuple[Kind, ...] = ("text", "list", "flag")      # the order `invoke site` and the docs list them in


@dataclass(frozen=True)
class Setting:
    """One key a site may set: an option some task's record declares site=True, the kind of
    value it takes (text; a list, from a repeatable option; true or false, from a flag),
    whether that value is a URL, and the tasks that take it (as the command line names them)."""
    key: str
    kind: Kind
    url: bool = False
    takers: tuple[str, ...] = ()


def _setting(flag: Flag) -> Setting:
    kind: Kind = "flag" if isinstance(flag.default, bool) else "list" if flag.iterable else "text"
    return Setting(flag.name, kind, flag.url)


def settings(namespace: Mapping[str, Any]) -> dict[str, Setting]:
    """The settings of the tasks in a module's namespace (tasks.py's, `vars(module)`): each
    option a task's record declares site=True and the task has (not in its `without`), by
    key; text first, then lists, then flags, each in the order the tasks first declare it.
    Two declarations of one key must take the same kind of value: a site writes it once."""
    found: dict[str, Setting] = {}
    for t in namespace.values():
        record = getattr(t, "record", None)         # a task made from its record (cli/wrap.py's task)
        if not isinstance(record, type) or not hasattr(t, "name"):
            continue
        for flag in flags(record):
            if not flag.site or flag.name in t.without:
                continue
            setting = found.setdefault(flag.name, _setting(flag))
            if replace(setting, takers=()) != _setting(flag):
                raise TypeError(f"{record.__name__}.{'.'.join(flag.path)}: the site setting {flag.name} is declared "
                                f"elsewhere with another kind of value ({setting.kind}, url={setting.url}); declare "
                                f"it alike everywhere")
            found[flag.name] = replace(setting, takers=(*setting.takers, t.name.replace("_", "-")))
    ordered = sorted(found.values(), key=lambda s: KINDS.index(s.kind))     # stable: declaration order within
    return {s.key: replace(s, takers=tuple(sorted(set(s.takers)))) for s in ordered}


def _where(key: str) -> str:
    return f"{SECTION}.{key} in {WHERE}"


def _text(setting: Setting, value: Any, where: str = "") -> str:
    """One text value as its option takes it: not empty, not an option (`-...`), one line of
    printable text (a control character could write a line of its own into a config file)."""
    key = setting.key
    if not isinstance(value, str):
        raise UserError(f"{(where or _where(key))}: expected a text value, got {kind_of(value)}")
    if not value.strip() or value.startswith("-"):
        raise UserError(f"{(where or _where(key))}: expected a text value (not empty, not one starting with '-'), "
                        f"got {redact(value)!r}")
    refuse_control((where or _where(key)), value)
    if setting.url and value != "none":
        check_url((where or _where(key)), value)
    return value


def kind_of(value: Any) -> str:
    """What a value is, never what it holds (a mapping may hold a password)."""
    return {dict: "a mapping", list: "a list", bool: "true/false", type(None): "nothing"}.get(
        type(value), f"a {type(value).__name__}")


def _value(setting: Setting, value: Any, where: str = "") -> Any:
    """The setting as its option takes it, or a UserError naming the key."""
    key = setting.key
    if setting.kind == "flag":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        shown = repr(redact(value)) if isinstance(value, str) else kind_of(value)
        raise UserError(f"{(where or _where(key))}: {shown} is not true or false")
    if setting.kind == "list":
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise UserError(f"{(where or _where(key))}: expected a list of text values (or one; none starting with '-'), "
                            f"got {kind_of(value)}")
        return [_text(setting, v, where) for v in items]
    return _text(setting, value, where)


def given_on_command_line(key: str, argv: Sequence[str]) -> bool:
    flag = "--" + key.replace("_", "-")
    return any(word == flag or word.startswith(flag + "=") for word in argv)


def _key(known: Mapping[str, Setting], raw: Any, where: str = "") -> Setting:
    """A setting by its name as its option's (proxy-url -> proxy_url), or a UserError naming
    the nearest one: a typo would otherwise be a silent no-op."""
    key = str(raw).replace("-", "_").lower() if isinstance(raw, str) else ""
    if key not in known:
        near = difflib.get_close_matches(key, list(known), n=1)
        hint = f"did you mean {near[0]}? " if near else ""
        shown = where or f"{SECTION}.{redact(str(raw))[:80]} in {WHERE}"
        raise UserError(f"{shown}: not a site setting; {hint}the settings are {', '.join(known)}")
    return known[key]


def _section(data: Any, where: str) -> Mapping[str, Any]:
    section = data.get(SECTION) if isinstance(data, Mapping) else None
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise UserError(f"{SECTION} in {where}: expected a mapping of settings, got {kind_of(section)}")
    return section


def environment(known: Mapping[str, Setting], environ: Mapping[str, str]) -> dict[str, Any]:
    """The INVOKE_ASCEND_BUILD_<KEY> variables, each checked: one that names no setting is
    refused (INVOKE_ASCEND_BUILD_PROXI would otherwise be ignored without a word)."""
    found: dict[str, Any] = {}
    for var, value in environ.items():
        if var.upper().startswith(ENV_PREFIX):
            setting = _key(known, var[len(ENV_PREFIX):], where=f"the variable {var}")
            found[setting.key] = _value(setting, value, where=f"the variable {var}")
    return found


def sources(config: Any, known: Mapping[str, Setting],
            environ: Mapping[str, str] | None = None) -> dict[str, tuple[Any, str]]:
    """Each setting set anywhere, every one checked: (its value as its option takes it, where it
    came from), the last of invoke's levels that sets it (system < user < project < environment
    < -f file). The files are those `ascend-build`'s config read (entry.SiteConfig records them);
    under plain `invoke`, whose config records none, its merged section stands for them all. The
    environment is read here, not through invoke's own mapping, which takes only keys some file
    already has and says nothing of the others."""
    recorded = getattr(config, "site_files", None)
    files: list[tuple[str, Any]] = list(recorded) if recorded is not None else \
        [("invoke's config files", {SECTION: config.get(SECTION)})]
    runtime = getattr(config, "runtime_file", None)
    env = os.environ if environ is None else environ
    # the environment's place among the levels: just below the -f file (checked in that order too)
    at = next((i for i, (path, _) in enumerate(files) if runtime is not None and path == runtime), len(files))
    found: dict[str, tuple[Any, str]] = {}
    for path, data in [*files[:at], ("", None), *files[at:]]:
        if not path:
            found.update({key: (value, f"{ENV_PREFIX}{key.upper()}")
                          for key, value in environment(known, env).items()})
            continue
        for raw, value in _section(data, path).items():
            setting = _key(known, raw)
            if value is not None:
                found[setting.key] = (_value(setting, value), path)
    return found


@dataclass(frozen=True)
class SiteOptions:
    """`invoke site` shows what the other tasks would take."""
    wide: bool = opt(False, "one line a row, whatever the terminal's width (what scripts read); without it the "
                            "table fits the terminal (100 columns where the output is not one)")


def from_shell(found: Mapping[str, tuple[Any, str]],
               environ: Mapping[str, str] = os.environ) -> dict[str, tuple[Any, str]]:
    """What a task takes from this shell where neither an option nor a setting gives it: the
    CA bundle and the proxy with its exceptions, read by the very functions the tasks call
    (engine/network.py), with where each came from."""
    shell: dict[str, tuple[Any, str]] = {}
    if "ca_bundle" not in found:
        bundle, origin = ca_setting(None, environ)
        if bundle is not None:
            shell["ca_bundle"] = (str(bundle), origin)
    proxy, no_proxy = (found.get(key, (None, ""))[0] for key in ("proxy", "no_proxy"))
    taken = proxy_settings(proxy, no_proxy, environ)
    # the variable each value was read from, as proxy_settings reads them (lower case first)
    named = {var: var if environ.get(var) else var.upper() for var in taken}
    schemes = {var: value for var, value in taken.items() if var != "no_proxy"}
    if proxy is None and schemes:
        values = sorted(set(schemes.values()))
        shown: Any = values[0] if len(values) == 1 else [f"{var}={value}" for var, value in sorted(schemes.items())]
        shell["proxy"] = (shown, ", ".join(f"${named[var]}" for var in sorted(schemes)) + " of this shell")
    if no_proxy is None and "no_proxy" in taken:
        shell["no_proxy"] = (taken["no_proxy"], f"${named['no_proxy']} of this shell")
    return shell


def show(config: Any, known: Mapping[str, Setting], wide: bool = False) -> None:
    """`invoke site`: every setting, its value (passwords hidden), where it came from and the
    tasks that take it; those unset too, so a site sees what it could write once. Where no
    setting is written, the value a task takes from this shell instead (a CA bundle, a proxy)."""
    found = sources(config, known)
    found = {**from_shell(found), **found}
    rows = [("setting", "value", "from", "taken by")]
    for key, setting in known.items():
        value, where = found.get(key, (None, "unset"))
        shown = "" if value is None else ", ".join(redact(str(v)) for v in value) if isinstance(value, list) \
            else redact(str(value))
        rows.append((key, shown, where, ", ".join(setting.takers)))
    intro = (f"site settings: the {SECTION}: section of {WHERE} (each later one wins; an option on the command "
             "line wins over all; where none is set, a task takes the CA bundle and the proxy this shell gives it)")
    if wide:
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        console.show(intro)
        for row in rows:
            console.show("  ".join(cell.ljust(width) for cell, width in zip(row, widths + [0])).rstrip())
        return
    # The terminal's width ($COLUMNS, else its own), as `invoke matrix` fits it: each cell folded
    # in its column, the setting's name kept whole.
    import shutil
    import textwrap

    from ..matrix.report import table
    width = max(60, shutil.get_terminal_size((100, 24)).columns)
    console.show("\n".join(textwrap.wrap(intro, width)))
    console.show(table([dict(zip(rows[0], row)) for row in rows[1:]], width, keep=("setting",)))


def apply(takes: Sequence[str], config: Any, known: Mapping[str, Setting], kwargs: dict[str, Any],
          argv: Sequence[str]) -> dict[str, Any]:
    """The task's arguments with the site's settings filled in where the command line gave
    none: only the settings this task takes (`takes`, its site options). Every setting is
    checked first, the ones this task does not take too: a site's mistake shows at its first
    command."""
    found = sources(config, known)
    taken = []
    for key, (value, _) in found.items():
        if key in takes and not given_on_command_line(key, argv):
            kwargs[key] = value
            taken.append(key)
    if taken:       # names only: a proxy's value may carry its password
        console.note(f"site settings from invoke's config: {', '.join(taken)} (an option on the command line "
                     f"wins over its setting)")
    return kwargs
