"""What a task was told, as small records, the way cibuildwheel keeps its command line
(CommandLineArguments): tasks.py hands invoke's keyword arguments to `Opts.of`, which
takes the fields it has (nested records from the same arguments) and leaves the rest.
Checks that need no matrix happen here; the actions get typed values."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, TypeVar

from ..engine.network import ca_setting, proxy_settings
from ..errors import UserError
from ..images.options import Site, parse_base_images
from ..matrix import FRAMEWORKS, Matrix

T = TypeVar("T")


def of(cls: type[T], kwargs: Mapping[str, Any], unused: tuple[str, ...] = ()) -> T:
    """A record of `cls` from a task's keyword arguments: each field by its name, a field
    that is itself a record made from the same arguments. A field the task has no option for
    is an error unless the task names it in `unused` (it keeps its default there on purpose):
    otherwise a missing option would silently be its default (torch-npu had no --no-cache)."""
    hints = {f.name: f for f in dataclasses.fields(cls)}     # type: ignore[arg-type]
    values = {}
    for name, f in hints.items():
        kind = f.type if isinstance(f.type, type) else _RECORDS.get(str(f.type))
        if kind is not None and dataclasses.is_dataclass(kind):
            values[name] = of(kind, kwargs, unused)
        elif name in kwargs:
            values[name] = kwargs[name]
        elif name not in unused:
            raise TypeError(f"{cls.__name__}.{name}: the task has no option for it; add one, or name it in unused=")
    return cls(**values)


def number(value: Any, option: str, low: int | None = None, high: int | None = None) -> int:
    """A whole number in [low, high], or a UserError that says the bounds."""
    try:
        found = int(str(value).strip())
    except ValueError:
        raise UserError(f"{option} {value!r}: expected a whole number") from None
    if (low is not None and found < low) or (high is not None and found > high):
        bounds = (f"from {low} to {high}" if low is not None and high is not None else
                  f"at least {low}" if low is not None else f"at most {high}")
        raise UserError(f"{option} {found}: expected a whole number {bounds}")
    return found


def size(value: Any, option: str) -> str:
    """A memory size as docker takes it (a number with b, k, m or g), e.g. 16g."""
    import re
    text = str(value).strip().lower()
    if not re.fullmatch(r"[1-9]\d{0,15}[bkmg]?", text):
        raise UserError(f"{option} {value!r}: expected a size like 16g, 512m or 1073741824")
    return text


def choice(value: Any, option: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UserError(f"{option} {value!r}: choose one of {', '.join(choices)}")
    return str(value)


def k8s_name(value: Any, option: str) -> str:
    """A Kubernetes object name (RFC 1123 label: lower-case letters, digits, '-')."""
    import re
    text = str(value)
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", text):
        raise UserError(f"{option} {value!r}: a Kubernetes name: lower-case letters, digits and '-', at most 63, "
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
    quiet: bool = False
    verbose: bool = False


@dataclass(frozen=True)
class Network:
    """How this site reaches things: its mirrors, proxy and CA (credentials stay secrets)."""
    base_image: list[str] | None = None
    ca_bundle: str | None = None
    pip_index_url: str | None = None
    torch_index_url: str | None = None
    proxy: str | None = None
    no_proxy: str | None = None
    network: str | None = None

    def site(self, dry: bool = False, **more: Any) -> Site:
        bundle, source = ca_setting(self.ca_bundle)
        return Site(base_images=parse_base_images(self.base_image or []), pip_index_url=self.pip_index_url,
                    ca_bundle=bundle, ca_source=source, dry=dry, proxy=proxy_settings(self.proxy, self.no_proxy),
                    network=self.network, torch_index_url=self.torch_index_url, **more)


@dataclass(frozen=True)
class Choice:
    """Which image: the stack (by --torch, or another framework's option), OS, Python, chip, platform."""
    torch: str | None = None
    mindspore: str | None = None
    cann: str | None = None      # --cann 8.0.RC3: the CANN-only image of that release
    os: str | None = None
    python: str | None = None
    chip: str | None = None
    platform: str | None = None

    def named(self) -> dict[str, str]:
        """The framework options given: {framework name: value} (each framework's option is a field
        of its name)."""
        return {name: value for name in FRAMEWORKS if (value := getattr(self, name))}

    def stack(self, m: Matrix) -> str | None:
        """The stack the framework options name (None: the matrix's default), at most one."""
        named = self.named()
        if len(named) > 1:
            raise UserError(f"{' and '.join(FRAMEWORKS[n].flag for n in named)} each name the image's framework: "
                            f"give one")
        if not named:
            return None
        (name, value), = named.items()
        fw = FRAMEWORKS[name]
        if fw.stack_prefix:          # --mindspore 2.9.0, --cann 8.0.RC3: a key of its framework's section
            return m.stack_for(fw, value).name
        return m.stack(value).name   # --torch: any stack by its name (`invoke ci-matrix` names them so)

    def given(self) -> bool:
        return bool(self.named()) or any((self.os, self.python, self.chip, self.platform))


_RECORDS = {"Output": Output, "Network": Network, "Choice": Choice}
