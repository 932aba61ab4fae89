"""vLLM-Ascend's releases, for the serving images (vLLM and the vLLM-Ascend plugin on a
torch stack), read from the package index: each release of the plugin from matrix.yaml's
floor (upstream.serving.from; its release candidates too with `pre`), with what its sdist
says (vllm_sdist.py: the pins of its requirements.txt, else of its PKG-INFO; Requires-Python;
its Dockerfiles' official CANN images, chips, OSes, Pythons and SOC_VERSIONs, the Ray they
install), the wheels the index has for it, its sdist and sum, and vLLM's release it pairs
with: the plugin releases each vLLM release under that release's number, a post release
(0.23.0.post1) pairs with vLLM's base release (0.23.0) and a release candidate (0.25.1rc1)
with vLLM's release of its base number (0.25.1). `invoke update` writes them into
imported.yaml's vllm_ascend_releases."""
from __future__ import annotations

from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Any, Callable, Mapping

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import UserError
from ..matrix.serving import nearest
from ..platforms import ARCHES
from . import pypi, vllm_sdist

PROJECT = "vllm-ascend"
VLLM = "vllm"
SECTION = "vllm_ascend_releases"
# The requirements a serving image is held to, by their PyPI names; imported.yaml keys them
# with underscores (torch_npu), as the matrix spells torch_npu.
PINNED = ("torch", "torch-npu", "torchvision", "torchaudio", "triton-ascend", "transformers")


@dataclass
class VllmData:
    """vLLM's release of the plugin's number: its sdist (vLLM-Ascend builds it with
    VLLM_TARGET_DEVICE=empty), as the index serves it."""
    version: str
    sdist: str
    sha256: str
    requires_python: str
    source: str

    def to_data(self) -> dict[str, str]:
        return {"version": self.version, "sdist": self.sdist, "sha256": self.sha256,
                "requires_python": self.requires_python, "source": self.source}


@dataclass
class VllmAscendData:
    version: str
    source: str
    requires_python: str                                   # "": PKG-INFO names none
    pins: dict[str, str]                                   # torch_npu -> "2.10.0.post4" (or a range: ">=2.9")
    sdist: str
    sha256: str
    wheels: dict[str, list[str]] = field(default_factory=dict)    # arch -> the Pythons it has wheels for
    vllm: VllmData | None = None
    vllm_note: str = ""                                    # why there is no vllm, when there is none
    pins_source: str = ""                                  # requirements.txt, or PKG-INFO where it has none
    images: list[vllm_sdist.Image] = field(default_factory=list)    # its Dockerfiles'
    ray: str = ""                                          # the Ray requirement they install
    vllm_tag: str = ""                                     # the vLLM tag they clone

    def to_data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "requires_python": self.requires_python,
                               "pins": dict(self.pins), "sdist": {"file": self.sdist, "sha256": self.sha256}}
        if self.pins_source:
            out["pins_source"] = self.pins_source
        if self.wheels:
            out["wheels"] = {arch: list(p) for arch, p in sorted(self.wheels.items())}
        if self.images:
            out["images"] = {i.dockerfile: i.to_data() for i in self.images}
        for key in ("ray", "vllm_tag"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        out["vllm"] = self.vllm.to_data() if self.vllm else None
        if self.vllm_note:
            out["vllm_note"] = self.vllm_note
        return out

    @classmethod
    def from_data(cls, version: str, d: Mapping[str, Any]) -> VllmAscendData:
        """As the last import wrote it (an import that reads no index keeps it so)."""
        v = d.get("vllm")
        return cls(version, str(d["source"]), str(d.get("requires_python") or ""),
                   {str(k): str(x) for k, x in (d.get("pins") or {}).items()}, str(d["sdist"]["file"]),
                   str(d["sdist"]["sha256"]), {str(a): [str(p) for p in ps] for a, ps in (d.get("wheels") or {}).items()},
                   VllmData(str(v["version"]), str(v["sdist"]), str(v["sha256"]), str(v.get("requires_python") or ""),
                            str(v["source"])) if v else None, str(d.get("vllm_note") or ""),
                   str(d.get("pins_source") or ""),
                   [vllm_sdist.Image(str(name), str(i["from"]), str(i.get("cann") or ""), str(i.get("build") or ""),
                                     str(i.get("chip") or ""), str(i.get("os") or ""), str(i.get("python") or ""),
                                     str(i.get("soc_version") or ""), read=str(i["read"]))
                    for name, i in (d.get("images") or {}).items()],
                   str(d.get("ray") or ""), str(d.get("vllm_tag") or ""))


def read(floor: str, pre: bool, pip_args: list[str], cache: Path | None = None) -> tuple[dict[str, VllmAscendData],
                                                                                      list[str]]:
    """The plugin's releases from `floor` on the index (pre-releases too with `pre`), and
    what was left out and why; each sdist's files kept in `cache` by its sum."""
    plugin = pypi.releases(pypi.files(PROJECT, pip_args), pre=pre, sdists=True)
    vllm = pypi.releases(pypi.files(VLLM, pip_args), pre=True, sdists=True)
    return releases(plugin, vllm, floor,
                    lambda f: pypi.cached_sdist_files(f, vllm_sdist.wanted, vllm_sdist.WANTED, cache, pip_args),
                    lambda f: pypi.sdist_metadata(f, pip_args))


def releases(plugin: Mapping[str, pypi.Release], vllm: Mapping[str, pypi.Release], floor: str,
             files_of: Callable[[pypi.IndexFile], dict[str, str]],
             metadata_of: Callable[[pypi.IndexFile], Message]) -> tuple[dict[str, VllmAscendData], list[str]]:
    """Each release of the plugin from `floor`, what its sdist says read from it (`files_of`
    reads its PKG-INFO, requirements.txt and Dockerfiles), paired with vLLM's release
    (`metadata_of` reads a vLLM sdist's PKG-INFO where the index does not say its
    Requires-Python)."""
    out: dict[str, VllmAscendData] = {}
    notes: list[str] = []
    read: dict[str, Message] = {}          # a vLLM sdist's PKG-INFO, read once for every release that pairs with it

    def once(f: pypi.IndexFile) -> Message:
        return read[f.name] if f.name in read else read.setdefault(f.name, metadata_of(f))
    for version, rel in sorted(plugin.items(), key=lambda kv: Version(kv[0])):
        if Version(version) < Version(floor):
            continue
        if rel.sdist is None:
            notes.append(f"{PROJECT} {version}: no sdist on the index, so no requirements or Dockerfiles to read its "
                         f"pins and images from; not imported")
            continue
        entry = _entry(version, rel, rel.sdist, files_of(rel.sdist))
        entry.vllm, entry.vllm_note = _vllm(version, vllm, once)
        if entry.vllm and entry.vllm_tag and entry.vllm_tag.lstrip("v") != entry.vllm.version:
            notes.append(f"{PROJECT} {version}: its Dockerfiles clone vLLM {entry.vllm_tag}, and it is paired with "
                         f"vLLM {entry.vllm.version} (a release pairs with vLLM's of its base number)")
        out[version] = entry
    return out, notes


def _entry(version: str, rel: pypi.Release, sdist: pypi.IndexFile, files: Mapping[str, str]) -> VllmAscendData:
    """One release from its sdist's files: the pins of its requirements.txt (else of its
    PKG-INFO), its Requires-Python, its Dockerfiles' images."""
    meta = pypi.metadata(files["PKG-INFO"])
    _same_release(meta, version, sdist.name)
    if vllm_sdist.REQUIREMENTS in files:
        pins, where = pins_of(vllm_sdist.requirements(files[vllm_sdist.REQUIREMENTS])), vllm_sdist.REQUIREMENTS
    else:
        pins, where = pins_of(meta.get_all("Requires-Dist") or []), "PKG-INFO (the sdist has no requirements.txt)"
    images = [vllm_sdist.dockerfile(name, text) for name, text in sorted(files.items())
              if vllm_sdist.DOCKERFILE.fullmatch(name)]
    return VllmAscendData(version, f"PyPI {PROJECT} {version} sdist {sdist.name}: PKG-INFO, {where}, "
                                   f"{', '.join(i.dockerfile for i in images) or 'no Dockerfile'}",
                          str(meta.get("Requires-Python") or "").replace(" ", ""), pins, sdist.name, _sha(sdist),
                          {a: sorted(p, key=Version) for a, p in sorted(rel.pythons.items()) if a in ARCHES},
                          pins_source=where, images=images, ray=vllm_sdist.ray_of(images),
                          vllm_tag=vllm_sdist.vllm_tag_of(images))


def _same_release(meta: Message, version: str, name: str) -> None:
    """The PKG-INFO is the plugin's, of the release its file is named for."""
    got_name, got = str(meta.get("Name") or ""), str(meta.get("Version") or "")
    try:
        same = canonicalize_name(got_name) == PROJECT and Version(got) == Version(version)
    except InvalidVersion:
        same = False
    if not same:
        raise UserError(f"{name}: its PKG-INFO says Name {got_name or '(none)'} Version {got or '(none)'}, not "
                        f"{PROJECT} {version}; the index's file is not what its name says")


def _sha(f: pypi.IndexFile) -> str:
    if not f.sha256:
        raise UserError(f"{f.name}: the index gives no sha256 for it (its link's #sha256= or PEP 691 hashes), and a "
                        f"serving image checks the sdist it builds; use an index that gives one (PyPI's does)")
    return f.sha256


def paired_vllm(version: str) -> str:
    """vLLM's release a vLLM-Ascend release pairs with: its own number's, its base release's
    for a post release (0.23.0.post1: 0.23.0) and for a release candidate (0.25.1rc1: 0.25.1)."""
    return Version(version).base_version


def _vllm(version: str, vllm: Mapping[str, pypi.Release],
          metadata_of: Callable[[pypi.IndexFile], Message]) -> tuple[VllmData | None, str]:
    wanted = paired_vllm(version)
    rel = vllm.get(wanted)
    if rel is None or rel.sdist is None:
        near = nearest([v for v, r in vllm.items() if r.sdist is not None and v != wanted], wanted)[:2]
        have = "a release but no sdist" if rel is not None else "no release"
        return None, (f"PyPI's {VLLM} has {have} {wanted}" + (f"; nearest: {', '.join(sorted(near, key=Version))}"
                                                             if near else ""))
    requires = rel.sdist.requires_python
    source = f"PyPI {VLLM} {wanted} (index page: sdist, sha256, requires-python)"
    if not requires:           # a mirror that does not say it: the sdist's PKG-INFO does
        requires = str(metadata_of(rel.sdist).get("Requires-Python") or "")
        source = f"PyPI {VLLM} {wanted} (index page: sdist, sha256; sdist PKG-INFO: requires-python)"
    return VllmData(wanted, rel.sdist.name, _sha(rel.sdist), requires.replace(" ", ""), source), ""


def pins_of(requires: list[str]) -> dict[str, str]:
    """The pinned requirements (PINNED) of a Requires-Dist list, keyed as imported.yaml keys
    them: an exact pin by its version, anything else by its specifier as written. An extra's
    requirement and one for neither Linux arch are not the image's."""
    found: dict[str, list[str]] = {}
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        if name not in PINNED or (req.marker is not None and not _applies(req.marker)):
            continue
        spec = str(req.specifier)
        found.setdefault(name.replace("-", "_"), [])
        if spec not in found[name.replace("-", "_")]:
            found[name.replace("-", "_")].append(spec)
    out = {}
    for key, specs in found.items():
        one = specs[0] if len(specs) == 1 else ""
        exact = one.startswith("==") and not one.startswith("===") and "*" not in one and "," not in one
        out[key] = one[2:] if exact else ",".join(specs) or "any"
    return dict(sorted(out.items()))


def _applies(marker: Marker) -> bool:
    """Whether a requirement's marker holds in a Linux image of either arch (never an extra's)."""
    if "extra" in str(marker):
        return False
    return any(marker.evaluate({"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
                                "platform_machine": arch, "extra": ""}) for arch in ARCHES)
