"""What a vLLM-Ascend release's sdist says of itself beyond its metadata, read as text and
never run: its requirements.txt (the pins its setup.py installs), and its Dockerfiles, one
per published image variant (Dockerfile, Dockerfile.a3, Dockerfile.310p.openEuler, ...):
the official CANN image each builds FROM (its ARGs filled in), and so the CANN release, chip,
OS and Python; the SOC_VERSION its kernels are compiled for; the Ray it installs; the vLLM tag
it clones. Each fact keeps the lines it was read from."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from ..errors import UserError
from ..matrix.official import cann_tag

DOCKERFILE = re.compile(r"Dockerfile(\.[A-Za-z0-9]+)*")
REQUIREMENTS = "requirements.txt"
# A dated build of a CANN release on Huawei's SWR registry: 9.2.0_20260930220649
_DATED = re.compile(r"(?P<release>.+?)_(?P<build>[0-9]{8,14})")
_ARG = re.compile(r"\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\"[^\"]*\"|'[^']*'|\S*))?\s*$", re.I)
_FROM = re.compile(r"\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$", re.I)
_RAY = re.compile(r"""(?:^|\s)(['"]?)(ray(?:\[[A-Za-z0-9_,-]*\])?(?:\s*[<>=!~][^'"\s]*)?)\1(?=\s|$)""")


@dataclass(frozen=True)
class Image:
    """One Dockerfile of the release, as read."""
    dockerfile: str
    base: str
    cann: str = ""
    build: str = ""
    chip: str = ""
    os: str = ""
    python: str = ""
    soc_version: str = ""
    ray: str = ""
    vllm_tag: str = ""
    read: str = ""

    def to_data(self) -> dict[str, str]:
        keys = ("cann", "build", "chip", "os", "python", "soc_version")
        return {"from": self.base, **{k: getattr(self, k) for k in keys if getattr(self, k)}, "read": self.read}


def _value(raw: str | None) -> str:
    return (raw or "").strip("\"'")


def _expand(text: str, args: dict[str, str]) -> str:
    """${NAME} and $NAME as the Dockerfile's ARG defaults give them."""
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)",
                  lambda m: args.get(m.group(1) or m.group(2), m.group(0)), text)


def dockerfile(name: str, text: str) -> Image:
    """A Dockerfile's facts: the last stage's FROM (a stage named earlier followed to its
    image), ARG defaults, the Ray its pip installs name."""
    args: dict[str, str] = {}
    stages: dict[str, str] = {}
    base, base_line, soc, soc_line, tag, ray, ray_line = "", 0, "", 0, "", "", 0
    arg_lines: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        if (m := _ARG.match(line)) is not None:
            args.setdefault(m.group(1), _value(m.group(2)))
            if m.group(1) == "SOC_VERSION":
                soc, soc_line = _value(m.group(2)), n
            elif m.group(1) == "VLLM_TAG":
                tag = _value(m.group(2))
            elif not base:
                arg_lines.append(f"{m.group(1)} {n}")
        elif (m := _FROM.match(line)) is not None:
            image = _expand(m.group(1), args)
            base, base_line = stages.get(image, image), n
            if m.group(2):
                stages[m.group(2)] = base
        elif "pip" in line and "install" in line and not ray and (r := _RAY.search(line)) is not None:
            ray, ray_line = _requirement(r.group(2), name, n), n
    if not base:
        raise UserError(f"{name}: no FROM line: not a Dockerfile")
    read = f"FROM line {base_line}" + (f" (ARG {', '.join(arg_lines)})" if arg_lines and "$" in text else "")
    read += f"; SOC_VERSION line {soc_line}" if soc_line else ""
    read += f"; ray line {ray_line}" if ray_line else ""
    return Image(name, base, soc_version=soc, ray=ray, vllm_tag=tag, read=read, **_tagged(base))


def _requirement(text: str, name: str, line: int) -> str:
    try:
        req = Requirement(text.replace(" ", ""))
    except InvalidRequirement:
        raise UserError(f"{name}:{line}: {text!r} is not a requirement") from None
    return str(req)


def _tagged(base: str) -> dict[str, Any]:
    """What an official CANN image's tag says (cann:<release>-<chip>-<os>-py<X.Y>, a dated
    build's release before its _date); nothing where the image is not one."""
    path, _, tag = base.rpartition(":") if ":" in base.rsplit("/", 1)[-1] else (base, "", "")
    if not path.endswith("/cann") or not tag:
        return {}
    found = cann_tag(tag)
    if found is None or found.devel:
        return {}
    dated = _DATED.fullmatch(found.cann)
    return {"cann": dated.group("release") if dated else found.cann, "build": dated.group("build") if dated else "",
            "chip": found.chip, "os": found.os, "python": found.python}


def requirements(text: str) -> list[str]:
    """requirements.txt's requirement lines: comments, options (-r, --extra-index-url) and
    blank lines left out."""
    out = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].split("\t#", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            out.append(line)
    return out


def ray_of(images: list[Image]) -> str:
    """The Ray requirement the release's images install: the one they all state (several
    differing ones: the first, by Dockerfile name)."""
    stated = [i.ray for i in sorted(images, key=lambda i: i.dockerfile) if i.ray]
    return stated[0] if stated else ""


def vllm_tag_of(images: list[Image]) -> str:
    tags = [i.vllm_tag for i in sorted(images, key=lambda i: i.dockerfile) if i.vllm_tag]
    return tags[0] if tags else ""


# What `wanted` takes, in words: a reading kept by the sdist's sum (pypi.cached_sdist_files) is
# one of these files.
WANTED = f"{REQUIREMENTS} {DOCKERFILE.pattern}"


def wanted(member: str) -> bool:
    """The sdist's top-level files read here (beside its PKG-INFO)."""
    return member == REQUIREMENTS or bool(DOCKERFILE.fullmatch(member))
