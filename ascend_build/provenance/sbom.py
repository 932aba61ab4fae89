"""The SBOM of a runtime image, in CycloneDX JSON (made with the CycloneDX project's own
library): the base image and OS, every OS package (dpkg or rpm, read inside the image),
the CANN packages with the sha256 the build verified (from the image's labels), and
every Python package with its version and, where the stack is locked, the sha256 of the
very wheel that was installed (the installed WHEEL tags matched to the lock's files).

`invoke build` writes it beside the build log and into the image before the image suite
runs (images/finish.py), so the tagged image carries the SBOM its tests saw; `invoke sbom
--image REF` reads it back (or makes it, for an image built before SBOMs). The same image
gives the same document byte for byte: its serial number comes from the image's content
tag and its time from the build's SOURCE_DATE_EPOCH, not from the clock."""
from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from pathlib import Path

from ..engine import Engine, RunSpec
from ..errors import UserError
from ..locking.lock import ALL_LAYERS, Lock, normalize
from .labels import LABEL_PREFIX, label
from .probe import REQUIREMENTS, SBOM_PATH, probe


def inspect(engine: Engine, image: str) -> dict:
    found = engine.image(image)
    if found is None:           # the user's input (exit 2), not an engine that failed
        raise UserError(f"no image {image} in {engine.client}'s store: build it (`invoke build`) or pull it")
    return found


def _os_release(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {k: v.strip().strip('"') for k, v in pairs}


def _wheel_sha(lock_files: dict[str, str], name: str, version: str, tags: list[str]) -> str | None:
    """The sha256 of the lock's file whose tags the installed wheel has."""
    if not lock_files:
        return None
    from packaging.utils import parse_wheel_filename
    # The runtime's layers and any user layer's lock (layer-NAME.txt) in the image.
    lock = Lock(Path(REQUIREMENTS), "", {layer: lock_files[layer] for layer in ALL_LAYERS if layer in lock_files}
                | {k: v for k, v in lock_files.items() if k.startswith("layer-")})
    installed = set(tags)
    for pinned in lock.packages:
        if pinned.name != normalize(name) or pinned.version != version:
            continue
        for filename, sha in pinned.files:
            if {str(t) for t in parse_wheel_filename(filename)[3]} & installed:
                return sha
        # Some wheels keep the tag they were built with in WHEEL (torchvision's says
        # linux_aarch64) after being renamed manylinux: then the one file of the lock
        # for this interpreter and ABI is the one pip installed.
        same_abi = [sha for filename, sha in pinned.files
                    if {(t.interpreter, t.abi) for t in parse_wheel_filename(filename)[3]}
                    & {tuple(t.split("-")[:2]) for t in installed}]
        if len(same_abi) == 1:
            return same_abi[0]
        # A wheel whose WHEEL says another tag than its file name (MindSpore's aarch64 wheel:
        # cp311-none-any on PyPI, py3-none-any inside): pip installed it in hash-checking mode,
        # so where the lock names one file, that file is the one installed.
        if len(pinned.files) == 1:
            return pinned.files[0][1]
    return None


def make(labels: dict[str, str], image_ref: str, found: dict, epoch: int = 0) -> str:
    """The CycloneDX 1.6 JSON document for one image, the same for the same inputs."""
    from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    prop = lambda k, v: Property(name=f"{LABEL_PREFIX}:{k}", value=str(v))     # noqa: E731
    osr = _os_release(found["os_release"])
    # A serial number and a time that say which image and which build, not when this ran.
    serial = uuid.uuid5(uuid.NAMESPACE_URL, f"ascend-build:{labels.get(label('content-tag'), image_ref)}:"
                                            f"{labels.get(label('platform'), '')}")
    bom = Bom(serial_number=serial)
    bom.metadata.timestamp = datetime.fromtimestamp(epoch, tz=timezone.utc)
    bom.metadata.component = Component(
        type=ComponentType.CONTAINER, name=image_ref.rsplit(":", 1)[0] if ":" in image_ref else image_ref,
        version=labels.get(label("content-tag"), ""), bom_ref="image",
        description=labels.get("org.opencontainers.image.description"),
        properties=[prop(k, labels[label(k)]) for k in ("stack", "os", "python", "platform", "cann", "torch",
                                                         "torch-npu", "chip", "lock", "apex") if label(k) in labels])
    base = labels.get("org.opencontainers.image.base.name")
    if base:
        bom.components.add(Component(type=ComponentType.CONTAINER, name=base, bom_ref="base-image",
                                     description="the image this one is built FROM"))
    bom.components.add(Component(type=ComponentType.OPERATING_SYSTEM, name=osr.get("ID", "linux"),
                                 version=osr.get("VERSION_ID"), description=osr.get("PRETTY_NAME"), bom_ref="os"))
    distro = osr.get("ID", "linux")
    for kind, text in (("deb", found.get("deb")), ("rpm", found.get("rpm"))):
        for line in (text or "").splitlines():
            name, version, arch = (line.split("\t") + ["", ""])[:3]
            if name:
                bom.components.add(Component(
                    type=ComponentType.LIBRARY, name=name, version=version, bom_ref=f"{kind}:{name}",
                    purl=PackageURL(kind, distro, name, version, {"arch": arch} if arch else None)))
    for entry in json.loads(labels.get(label("cann-sha256"), "[]")):
        refs = [ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(entry["url"]))] \
            if entry.get("url") else []
        props = [prop("verified", entry["verified"])]
        if entry.get("zip_sha256"):
            props.append(prop("zip-sha256", entry["zip_sha256"]))
        bom.components.add(Component(
            type=ComponentType.APPLICATION, name=entry["file"], version=entry["version"], group="Huawei CANN",
            bom_ref=f"cann:{entry['file']}", hashes=[HashType(alg=HashAlgorithm.SHA_256, content=entry["sha256"])],
            external_references=refs, properties=props))
    for dist in sorted(found["python"], key=lambda d: normalize(d["name"])):
        sha = _wheel_sha(found.get("requirements", {}), dist["name"], dist["version"], dist["tags"])
        bom.components.add(Component(
            type=ComponentType.LIBRARY, name=dist["name"], version=dist["version"],
            bom_ref=f"pypi:{normalize(dist['name'])}", purl=PackageURL("pypi", None, normalize(dist["name"]),
                                                                       dist["version"]),
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=sha)] if sha else [],
            properties=[] if sha else [prop("hash", "not locked: the wheel's sha256 is not known")]))
    # The image is everything in it: one level of dependencies, which the probe can know.
    bom.register_dependency(bom.metadata.component, list(bom.components))
    return JsonV1Dot6(bom).output_as_string(indent=2)


def for_image(engine: Engine, image: str, platform: str | None = None, ref: str | None = None,
              epoch: int = 0) -> str:
    info = inspect(engine, image)
    labels = info["Config"].get("Labels") or {}
    platform = platform or labels.get(label("platform")) or f"linux/{info.get('Architecture', 'amd64')}"
    return make(labels, ref or (info.get("RepoTags") or [image])[0], probe(engine, image, platform), epoch)


def stored(engine: Engine, image: str, platform: str) -> str | None:
    """The SBOM the image carries, if it has one."""
    out = engine.run_container(RunSpec(image, (SBOM_PATH,), platform=platform, network="none", entrypoint="cat"),
                               timeout=600)
    return out.stdout if out.returncode == 0 else None
