"""What a task was told, as small records, the way cibuildwheel keeps its command line
(CommandLineArguments). Each option is declared once, as a field of the record its action
receives: its name, default and help (`opt`), shared groups of them as nested records
(`group`). From the record come the task's signature (what invoke parses), its help
(`invoke --help TASK`, docs/tasks.md) and the record handed to the action (cli/wrap.py's
`task`). Checks that need no matrix happen here; the actions get typed values."""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, TypeVar

from .. import engine as eng
from ..engine.network import Network as NetworkRecord
from ..engine.network import ca_setting, proxy_settings
from ..errors import UserError
from ..images.kinds import OPTION as KIND_OPTION
from ..inputs.options import Site, parse_base_images
from ..matrix import FRAMEWORKS, Matrix, Stack

T = TypeVar("T")
_OPTION = "ascend_build.option"      # the metadata key of a field that is an option
_GROUP = "ascend_build.group"        # ... of a field that is a nested record of options
_HEADING = "ascend_build.heading"    # ... the heading a group's options are listed under in the help


@dataclass(frozen=True)
class Flag:
    """One option of a task as its record declares it. `name` is the keyword invoke sees
    (pip_index_url: --pip-index-url; from_: --from); `path` the field's place in the record."""
    name: str
    default: Any
    help: str
    iterable: bool = False
    path: tuple[str, ...] = ()
    empty: bool = False             # an empty value means something of its own (not the default)
    site: bool = False              # a site may set it once, in invoke's config (cli/siteconfig.py)
    url: bool = False               # its value is a URL: a site's setting is checked for its shape
    heading: str = ""               # the help lists it under this heading (a kind's options), "": the task's own


def opt(default: Any, help: str, *, iterable: bool = False, name: str | None = None, empty: bool = False,
        site: bool = False, url: bool = False) -> Any:
    """A record's field that is a task option: its default and help, once. `iterable`: given
    again and again (--packages A --packages B; the field holds a list, None when not given);
    `name`: the option's name where the field's differs (a field `every` for `--all`); `empty`:
    an empty value is one of its own (--no-proxy '': no host), not refused as bad input;
    `site`: a site may set it once under its name in invoke's config, and `invoke site` lists it
    (cli/siteconfig.py reads which options these are from here); `url`: with `site`, its
    value is a URL, whose shape a site's setting is checked for."""
    if not help.strip():
        raise TypeError("an option's help says what it does: give opt() its text")
    if url and not site:
        raise TypeError("url= says how a site's setting is checked: give opt() site=True too")
    if isinstance(default, str) and not default.strip():
        # invoke hands the default when an option is not given: an empty one would make `--x ''`
        # and no --x the same, and record_of could no longer refuse the first
        raise TypeError("an option's default is None or a value, never empty text")
    meta = Flag(name or "", default, help, iterable, empty=empty, site=site, url=url)
    return dataclasses.field(default=default, metadata={_OPTION: meta})


def group(record: type, heading: str = "") -> Any:
    """A field that is a record of options shared by several tasks (Network, Output, ...): its
    options are the task's own, by their names. `heading`: the help lists them apart, under it
    (the options a kind adds to `invoke build`)."""
    return dataclasses.field(default_factory=record, metadata={_GROUP: record, _HEADING: heading})


def _declared(f: dataclasses.Field) -> Flag | None:
    """A field's option: declared here (opt), or by a kind in its module (images/kinds.py's
    option: its default and help; cli/building.py reads when it is refused)."""
    if _OPTION in f.metadata:
        return f.metadata[_OPTION]
    if KIND_OPTION in f.metadata:
        return Flag("", f.default, f.metadata[KIND_OPTION].help)
    return None


def flags(record: type) -> list[Flag]:
    """Every option of a record, its groups' included, in the record's order. A field that is
    neither (no help: it would be an option nobody can read about) is refused, and so are two
    options of one name."""
    found: list[Flag] = []
    for f in dataclasses.fields(record):
        meta = _declared(f)
        if _GROUP in f.metadata:
            found += [dataclasses.replace(x, path=(f.name, *x.path), heading=x.heading or f.metadata[_HEADING])
                      for x in flags(f.metadata[_GROUP])]
        elif meta is not None:
            found.append(dataclasses.replace(meta, name=meta.name or f.name, path=(f.name,)))
        else:
            raise TypeError(f"{record.__name__}.{f.name}: a field with no help; declare it with "
                            f"opt(default, help) (or group(Record) for a nested record of options)")
    names = [x.name for x in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TypeError(f"{record.__name__}: options named twice: {', '.join(twice)}")
    return found


def signature(record: type, without: tuple[str, ...] = ()) -> inspect.Signature:
    """The task body's signature invoke reads: the Context, then one keyword per option."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature([inspect.Parameter("c", kind)] +
                             [inspect.Parameter(x.name, kind, default=x.default) for x in flags(record)
                              if x.name not in without])


def record_of(record: type[T], given: Mapping[str, Any], without: tuple[str, ...] = ()) -> T:
    """The record from a task's keyword arguments. Every option is taken from them: one
    missing is an error, never its default quietly (torch-npu once had no --no-cache), unless
    the task names it in `without` (it keeps its default there on purpose)."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(record):       # type: ignore[arg-type]
        if _GROUP in f.metadata:
            values[f.name] = record_of(f.metadata[_GROUP], given, without)
            continue
        meta = _declared(f)
        if meta is None:
            raise TypeError(f"{record.__name__}.{f.name}: a field with no help (flags() says so)")
        name = meta.name or f.name
        if name in without:
            continue
        if name not in given:
            raise TypeError(f"{record.__name__}.{f.name}: the task has no option --{name.replace('_', '-')}; "
                            f"add it, or name it in without=")
        if not meta.empty:
            refuse_empty(name, given[name])
        values[f.name] = given[name]
    return record(**values)


def refuse_empty(name: str, value: Any) -> None:
    """An option given with empty text (`--like ''`: a script's unset variable) is bad input.
    Most options take an empty value as not given, so it would quietly build the default
    image. Told apart by the value alone: invoke hands an option not given its default (None,
    [] for a repeatable one, or text that opt() holds not empty), so empty text only comes
    from the command line (or a site setting, which siteconfig refuses empty)."""
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str) and not item.strip():
            flag = "--" + name.replace("_", "-")
            raise UserError(f"{flag} {shown(item)}: an empty value (an unset variable in a script?); give {flag} a "
                            f"value, or leave it out for its default")


def help_of(record: type, name: str) -> str:
    """One option's help as its record declares it (a task that says it another way starts
    from it)."""
    return next(x.help for x in flags(record) if x.name == name)


def shown(value: Any, limit: int = 80) -> str:
    """A value as a message quotes it: whole when short, else its start and its length (a
    10,000-character value is not echoed back)."""
    text = repr(value) if isinstance(value, str) else repr(str(value))
    return text if len(text) <= limit else f"{text[:limit]}... ({len(str(value))} characters)"


def number(value: Any, option: str, low: int | None = None, high: int | None = None) -> int:
    """A whole number in [low, high], or a UserError that says the bounds. ASCII digits,
    at most 100 of them (int() would take "1_0", "١٢" and, until it raises, 4,300 digits)."""
    import re
    text = str(value).strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,100}", text):
        raise UserError(f"{option} {shown(value)}: expected a whole number")
    found = int(text)
    if (low is not None and found < low) or (high is not None and found > high):
        bounds = (f"from {low} to {high}" if low is not None and high is not None else
                  f"at least {low}" if low is not None else f"at most {high}")
        raise UserError(f"{option} {found}: expected a whole number {bounds}")
    return found


def size(value: Any, option: str) -> str:
    """A memory size as docker takes it (a number with b, k, m or g), e.g. 16g."""
    import re
    text = str(value).strip().lower()
    if not re.fullmatch(r"[1-9][0-9]{0,15}[bkmg]?", text):
        raise UserError(f"{option} {shown(value)}: expected a size like 16g, 512m or 1073741824")
    return text


def choice(value: Any, option: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UserError(f"{option} {shown(value)}: choose one of {', '.join(choices)}")
    return str(value)


def k8s_name(value: Any, option: str) -> str:
    """A Kubernetes object name (RFC 1123 label: lower-case letters, digits, '-')."""
    import re
    text = str(value)
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", text):
        raise UserError(f"{option} {shown(value)}: a Kubernetes name: lower-case letters, digits and '-', at most 63, "
                        f"starting and ending with a letter or digit")
    return text


def required(value: Any, option: str, example: str) -> Any:
    """A task's required option, asked for by name (a positional one would swallow --help)."""
    if not value:
        raise UserError(f"{option} is required, e.g. {option} {example}")
    return value


def path(value: str | None) -> Path | None:
    return Path(value) if value else None


@dataclass(frozen=True)
class Output:
    """--quiet and --verbose (cli/wrap.py sets the console's level from them first)."""
    quiet: bool = opt(False, "say only warnings, errors and what was asked for (a build's own output goes to "
                             "its log only)")
    verbose: bool = opt(False, "also say each engine command as it runs")


@dataclass(frozen=True)
class Engine:
    """--engine and --docker: which container engine, through which client."""
    engine: str = opt("docker", "docker (default) or podman", site=True)
    docker: str | None = opt(None, "the container client to use (default: the first BuildKit-capable one on PATH)",
                             site=True)

    def for_task(self, dry: bool = False) -> eng.Engine:
        return eng.for_task(self.engine, self.docker, dry)

    def detect(self) -> eng.Engine:
        return eng.detect(self.engine, self.docker)


# The shared options that are one each (a group of one would be a record for its own sake).
MATRIX = "the matrix file (default: matrix.yaml)"
DRY = "print the commands instead of running them"


def matrix_file() -> Any:
    """--matrix, declared once for every task that reads the matrix file (a site may set it)."""
    return opt("matrix.yaml", MATRIX, site=True)


@dataclass(frozen=True)
class Network:
    """How this site reaches things: its mirrors, proxy and CA (credentials go in as secrets)."""
    base_image: list[str] | None = opt(
        None, "FROM=TO: replace a base image, e.g. ubuntu:22.04=mirror/ubuntu:22.04-{arch} (repeatable)",
        iterable=True, site=True)
    ca_bundle: str | None = opt(
        None, "CA bundle for a TLS proxy (passed as a BuildKit secret); default: the host's own setting "
              "($PIP_CERT, $REQUESTS_CA_BUNDLE, $SSL_CERT_FILE, pip's cert); 'none' for none", site=True)
    pip_index_url: str | None = opt(None, "pip index (credentials allowed: passed as a BuildKit secret)",
                                    site=True, url=True)
    torch_index_url: str | None = opt(
        None, "the site's mirror of the stack's torch index (PyTorch's CPU index): torch comes only from there, "
              "never from PyPI's CUDA build; no credentials (the image keeps its requirement files)",
        site=True, url=True)
    proxy: str | None = opt(
        None, "proxy URL for downloads in the build (credentials allowed: a BuildKit secret); default: "
              "http(s)_proxy of this shell; 'none' for none", site=True, url=True)
    no_proxy: str | None = opt(None, "hosts the build reaches without the proxy (default: no_proxy of this shell)",
                               empty=True, site=True)     # '': no host, not the shell's list (engine/network.py)
    network: str | None = opt(None, "'host': build steps use this machine's network (a proxy on 127.0.0.1)",
                              site=True)

    def site(self, dry: bool = False, **more: Any) -> Site:
        bundle, source = ca_setting(self.ca_bundle)
        net = NetworkRecord(bundle, self.pip_index_url, proxy_settings(self.proxy, self.no_proxy), self.network,
                            source, self.torch_index_url)
        return Site(base_images=parse_base_images(self.base_image or []), net=net, dry=dry, **more)


@dataclass(frozen=True)
class Choice:
    """Which image: the stack (by --torch, or another framework's option), OS, Python, chip, platform."""
    torch: str | None = opt(None, "torch stack from matrix.yaml (default: defaults.torch)")
    mindspore: str | None = opt(
        None, "build the MindSpore image of this release (mindspore_stacks:) instead of a torch stack")
    cann: str | None = opt(      # --cann 8.0.RC3: the CANN-only image of that release
        None, "build the CANN-only image of this CANN release (cann_stacks:): no framework, the base for one")
    os: str | None = opt(None, "base OS name from matrix.yaml")
    python: str | None = opt(None, "python minor version within the stack's range")
    chip: str | None = opt(None, "kernels chip, e.g. 910b")
    platform: str | None = opt(None, "linux/arm64 (default) or linux/amd64")

    def named(self) -> dict[str, str]:
        """The framework options given: {framework name: value} (each framework's option is a field
        of its name)."""
        return {name: value for name in FRAMEWORKS if (value := getattr(self, name))}

    def stack(self, m: Matrix) -> Stack | None:
        """The stack the framework options name (None: the matrix's default), at most one: its
        record, looked up here once (what builds on it takes the record, not the name)."""
        named = self.named()
        if len(named) > 1:
            raise UserError(f"{' and '.join(FRAMEWORKS[n].flag for n in named)} each name the image's framework: "
                            f"give one")
        if not named:
            return None
        (name, value), = named.items()
        fw = FRAMEWORKS[name]
        if fw.stack_prefix:          # --mindspore 2.9.0, --cann 8.0.RC3: a key of its framework's section
            return m.stack_for(fw, value)
        return m.stack(value)        # --torch: any stack by its name (`invoke ci-matrix` names them so)

    def given(self) -> bool:
        return bool(self.named()) or any((self.os, self.python, self.chip, self.platform))


