"""`invoke update`: Huawei's release data (ascend-deployer, several releases of it),
Ascend's published tables, the official CANN images' Dockerfiles (`--cann-images`) and
PyPI's index (torch_npu, MindSpore, and vLLM-Ascend for the serving images) merged, and written whole into the imported facts' file (imported.yaml, as
matrix.yaml's upstream.imported names it). matrix.yaml is never written. Each entry names
its source; where the sources disagree, the matrix's `upstream.choices` decides, and an
undecided disagreement stops the update with both values shown."""
from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from .. import atomic
from ..errors import UserError
from ..platforms import ARCHES
from . import cann_env, cann_images, docs, pypi, vllm
from .deployer import (
    PAIRED,
    CannData,
    DeployerData,
    MindSporeData,
    Paired,
    Published,
    ReleaseData,
    TorchNpuData,
    fetch,
    newest_version,
    read,
)
from .docs import DocsData


@dataclass(frozen=True)
class Conflict:
    path: str                      # e.g. torch_npu_releases.2.1.0.post11.cann
    values: dict[str, str | None]  # source -> value
    taken: str | None              # the value upstream.choices picked, None: undecided
    why: str = ""

    def __str__(self) -> str:
        seen = "; ".join(f"{src}: {val}" for src, val in self.values.items())
        if self.taken is None:
            return f"{self.path}: sources disagree ({seen}): undecided"
        return f"{self.path}: sources disagree ({seen}): took {self.taken} ({self.why})"


@dataclass
class Merged:
    cann: dict[str, CannData]
    torch_npu: dict[str, TorchNpuData]
    conflicts: list[Conflict] = field(default_factory=list)
    read: list[DeployerData] = field(default_factory=list)
    compatible: dict[str, list[str]] = field(default_factory=dict)    # TorchNPU series -> CANN series
    compatible_source: str = ""
    docs_read: list[str] = field(default_factory=list)
    from_docs: dict[str, int] = field(default_factory=dict)           # what the docs added, counted
    mindspore: dict[str, MindSporeData] = field(default_factory=dict)
    images_read: str = ""                                              # the CANN images' copy read (or kept)
    images_notes: list[str] = field(default_factory=list)             # what the images name and was not taken
    serving: dict[str, vllm.VllmAscendData] = field(default_factory=dict)   # vLLM-Ascend's releases
    serving_notes: list[str] = field(default_factory=list)            # what of them was not imported, and why
    envs: dict[str, EnvEntry] = field(default_factory=dict)           # CANN release -> its environment
    image_tags: dict[str, list[str]] = field(default_factory=dict)    # CANN release -> its official images' tags
    devel_tags: dict[str, list[str]] = field(default_factory=dict)    # CANN release -> their -devel twins

    def releases(self, paired: Paired) -> dict[str, ReleaseData]:
        """A framework's releases (deployer.PAIRED: its record names the field)."""
        return getattr(self, paired.field)

    def put(self, paired: Paired, releases: dict[str, ReleaseData]) -> None:
        """A framework's releases, kept in version order."""
        setattr(self, paired.field, dict(sorted(releases.items(), key=lambda kv: Version(kv[0]))))


@dataclass
class EnvEntry:
    """A CANN release's environment (cann_env.py) and where it was read; `of`: the release
    whose images it was read from, when not this one's."""
    env: cann_env.Env
    source: str
    of: str = ""


def _version_key(v: str) -> Version:
    """CANN versions in release order: 8.0.RC3 < 8.0.0; a fourth field (6.3.RC3.1) is a patch."""
    import re
    m = re.fullmatch(r"(\d+)\.(\d+)\.(?:RC(\d+)|(\d+))(?:\.(\d+))?", v, re.I)
    if not m:
        return Version("0")
    major, minor, rc, patch, extra = m.groups()
    base = f"{major}.{minor}.{patch or 0}" + (f"rc{rc}" if rc else "")
    return Version(base + (f".post{extra}" if extra else ""))


def merge(datasets: list[DeployerData], choices: dict[str, dict[str, str]], ascend: DocsData | None = None,
          images: cann_images.ImagesData | None = None) -> Merged:
    """One view of several deployer releases, then Ascend's published tables (`ascend`),
    then the official CANN images (`images`): the newest deployer's entry wins where they
    agree; where any two sources disagree, `choices` must say which value to take."""
    ordered = sorted(datasets, key=lambda d: Version(d.version), reverse=True)
    merged = Merged({}, {}, read=ordered)

    def decide(path: str, values: dict[str, str | None], default: str | None) -> str | None:
        if len(set(values.values())) <= 1:
            return default
        choice = choices.get(path)
        taken = choice.get("take") if choice else None
        if taken is not None and taken not in values.values():
            taken = None              # a stale choice decides nothing
        merged.conflicts.append(Conflict(path, values, taken, choice.get("why", "") if choice else ""))
        return taken if taken is not None else default

    merged.cann = _merge_cann(ordered, decide)
    for paired in PAIRED:
        merged.put(paired, _merge_releases(ordered, paired, decide))
    if ascend is not None:
        _add_docs(merged, ascend, decide)
    if images is not None:
        _add_images(merged, images, decide, ascend)
    return merged


def _merge_cann(ordered: list[DeployerData], decide) -> dict[str, CannData]:
    """Each CANN release the deployer releases list: the newest one's entry, every file
    the releases disagree on decided (a chip only an older release lists is kept)."""
    out = {}
    for version in sorted({v for d in ordered for v in d.cann}, key=_version_key):
        entries = [(d.version, d.cann[version]) for d in ordered if version in d.cann]
        best = entries[0][1]
        driver = decide(f"cann.{version}.driver", {f"ascend-deployer {dv}": c.driver for dv, c in entries}, best.driver)
        chosen = CannData(version, driver, best.source, dict(best.toolkit), {k: dict(v) for k, v in best.kernels.items()},
                          list(best.unused))
        for dv, other in entries[1:]:
            for arch, pub in other.toolkit.items():
                _file_conflict(decide, version, pub, best.toolkit.get(arch), entries[0][0], dv, chosen.toolkit, arch)
            for chip, per in other.kernels.items():
                for arch, pub in per.items():
                    mine = best.kernels.get(chip, {}).get(arch)
                    if mine is None:          # a chip only an older release lists: keep it, from there
                        chosen.kernels.setdefault(chip, {})[arch] = pub
                    else:
                        _file_conflict(decide, version, pub, mine, entries[0][0], dv, chosen.kernels[chip], arch)
        out[version] = chosen
    return out


def _merge_releases(ordered: list[DeployerData], framework: Paired, decide) -> dict[str, ReleaseData]:
    """A framework package's releases across the deployer releases: the pairing decided
    where they disagree, the wheel sums of the newest that lists any."""
    out = {}
    for release in sorted({r for d in ordered for r in d.releases(framework)}, key=Version):
        entries = [(d.version, d.releases(framework)[release]) for d in ordered if release in d.releases(framework)]
        paired = [(dv, x) for dv, x in entries if x.cann]
        rel = framework.release(release, None, None)
        if paired:
            rel.cann = decide(f"{framework.section}.{release}.cann",
                              {f"ascend-deployer {dv}": x.cann for dv, x in paired}, paired[0][1].cann)
            rel.pairing_source = next(x.pairing_source for _, x in paired if x.cann == rel.cann)
        with_wheels = [x for _, x in entries if x.wheels]
        if with_wheels:
            rel.wheels, rel.wheels_source = with_wheels[0].wheels, with_wheels[0].wheels_source
        out[release] = rel
    return out


def _add_docs(merged: Merged, ascend: DocsData, decide) -> None:
    """Ascend's tables on top of the deployer data: pairings (a release the deployer
    pairs otherwise is a conflict), the release's tag and TorchNPU release, the grid of
    compatible series, CANN releases the deployer data does not reach (files named by
    their era's rule, no published sums) and the drivers each CANN release runs on."""
    merged.docs_read = list(ascend.read)
    merged.compatible, merged.compatible_source = dict(ascend.torch_npu.compatible), ascend.torch_npu.compatible_source
    counts = {"pairings": 0, "new releases": 0, "new CANN": 0}
    # Releases of the deployer's era (its oldest CANN on), and older ones the index serves
    # (2.1.0 -> CANN 7.0.0): the history before that names nothing a stack could use.
    oldest = min((_version_key(v) for v in merged.cann), default=Version("0"))
    by_release: dict[str, list] = {}
    for pairing in ascend.torch_npu.pairings:
        if _version_key(pairing.cann) >= oldest or pairing.release in merged.torch_npu:
            by_release.setdefault(pairing.release, []).append(pairing)
    for release, pairings in sorted(by_release.items(), key=lambda kv: Version(kv[0])):
        entry = merged.torch_npu.get(release)
        if entry is None:
            entry = merged.torch_npu[release] = TorchNpuData(release, None, None)
            counts["new releases"] += 1
        values = {p.source: p.cann for p in pairings}
        if entry.cann:
            values = {str(entry.pairing_source): entry.cann, **values}
        first = entry.cann or pairings[0].cann
        cann = decide(f"torch_npu_releases.{release}.cann", values, first)
        if entry.cann != cann:
            counts["pairings"] += 1
        entry.cann = cann
        entry.pairing_source = entry.pairing_source if entry.cann == first and entry.pairing_source else \
            next(p.source for p in pairings if p.cann == cann)
        entry.branch = entry.branch or pairings[0].branch
        entry.torchnpu = entry.torchnpu or docs.series_of(pairings[0].branch) or ""
    for release, (series, source) in ascend.torch_npu.series.items():
        entry = merged.torch_npu.setdefault(release, TorchNpuData(release, None, None))
        if entry.torchnpu and entry.torchnpu != series:
            series = decide(f"torch_npu_releases.{release}.torchnpu",
                            {f"its branch {entry.branch}": entry.torchnpu, source: series}, entry.torchnpu)
        entry.torchnpu = series
        entry.branch = source.rsplit(": ", 1)[-1]     # a release tag names exactly this build; a branch moves on
    counts["new CANN"] = _add_cann_notes(merged, ascend, decide)
    merged.cann = dict(sorted(merged.cann.items(), key=lambda kv: _version_key(kv[0])))
    merged.torch_npu = dict(sorted(merged.torch_npu.items(), key=lambda kv: Version(kv[0])))
    merged.from_docs = counts


def _add_cann_notes(merged: Merged, ascend: DocsData, decide) -> int:
    """CANN releases the deployer data does not reach (named by release notes or TorchNPU
    notes: files by their era's rule, no sums) and the drivers each release runs on; how
    many releases were added."""
    added = 0
    newest = max((c for c in merged.cann.values() if c.kernels), key=lambda c: _version_key(c.version), default=None)
    chips = sorted(newest.kernels) if newest else []
    newest_listed = max((_version_key(v) for v in merged.cann), default=Version("0"))
    named = {p.cann: p.source for p in ascend.torch_npu.pairings if _version_key(p.cann) > newest_listed}
    for notes in ascend.cann:
        if notes.version not in merged.cann:
            merged.cann[notes.version] = _named_release(notes.version, notes.drivers[0], notes.source, chips)
            added += 1
        else:
            current = merged.cann[notes.version]
            current.driver = decide(f"cann.{notes.version}.driver",
                                    {str(current.source): current.driver, notes.source: notes.drivers[0]},
                                    current.driver)
    for version, source in named.items():
        if version not in merged.cann:
            merged.cann[version] = _named_release(version, None, f"named by {source}; no release notes of it read",
                                                  chips)
            added += 1
    for version, rel in merged.cann.items():
        rel.runs_on, rel.runs_on_source = docs.runs_on(ascend.cann, version)
    return added


OBS = "https://ascend-repo.obs.cn-east-2.myhuaweicloud.com/CANN/CANN%20{v}/"


def _named_release(version: str, driver: str | None, source: str, chips: list[str]) -> CannData:
    """A CANN release the deployer data does not list: its files by its era's naming rule
    (toolkit, an operator package per chip of the newest listed release, NNAL), at
    Huawei's download site, with no published sums (pinned on first use)."""
    from ..matrix.eras import era_of, expected_toolkit
    era, url = era_of(version), OBS.format(v=version)

    def named(run: str) -> Published:
        return Published("", url + run, None, run)
    rel = CannData(version, driver, source)
    rel.toolkit = {arch: named(expected_toolkit(version, arch)) for arch in ARCHES}
    rel.kernels = {chip: {arch: named(era.kernels_file.format(chip=chip, v=version, arch=arch)) for arch in ARCHES}
                   for chip in chips}
    if era.nnal_file:
        rel.nnal = {arch: named(era.nnal_file.format(v=version, arch=arch)) for arch in ARCHES}
    return rel


def _add_images(merged: Merged, images: cann_images.ImagesData, decide, ascend: DocsData | None) -> None:
    """The CANN releases the official images install. A release another source lists stays
    that source's (the deployer's has sums): a file both name at another URL or under
    another name is a conflict, what only the images name is said, not taken. A release
    only the images list is added with its source: its files by name and URL, no sums
    (pinned on first use), no driver (the images name none), the drivers it runs on from
    Ascend's release notes."""
    merged.images_read = images.summary()
    for why, paths in images.skipped.items():
        merged.images_notes.append(f"skipped {len(paths)} Dockerfiles: {why}")
    for version, found in images.releases.items():
        merged.images_notes += [f"{version}: {note}" for note in found.notes]
        files: dict[str, Published] = {}
        for key, urls in found.files.items():
            if len(urls) > 1:              # the images themselves disagree
                url = decide(f"cann.{version}.{key}", {f"{images.where}: {paths[0]}"
                                                       + (f" and {len(paths) - 1} more" if len(paths) > 1 else ""): url
                                                       for url, paths in urls.items()}, None)
                if url is None:
                    continue
            else:
                url = next(iter(urls))
            files[key] = cann_images.published(url)
        if found.env is not None:
            merged.envs[version] = EnvEntry(found.env.env, found.env_source)
        merged.image_tags[version] = list(found.tags)
        if found.devel_tags:
            merged.devel_tags[version] = list(found.devel_tags)
        have = merged.cann.get(version)
        if have is not None:
            _compare_images(version, have, files, found, decide, merged)
            continue
        rel = _images_release(version, files, found, merged)
        if rel is not None:
            if ascend is not None:
                rel.runs_on, rel.runs_on_source = docs.runs_on(ascend.cann, version)
            merged.cann[version] = rel
    merged.cann = dict(sorted(merged.cann.items(), key=lambda kv: _version_key(kv[0])))


def _parts(rel: CannData) -> dict[str, str]:
    """A release's files as the images' keys name them ("kernels.910b.aarch64") -> the URL of
    the .run a build fetches (the release's folder and the file)."""
    out = {f"toolkit.{a}": rel.url + p.run for a, p in rel.toolkit.items()}
    out.update({f"kernels.{chip}.{a}": rel.url + p.run for chip, per in rel.kernels.items() for a, p in per.items()})
    out.update({f"nnal.{a}": rel.url + p.run for a, p in rel.nnal.items()})
    return out


def _compare_images(version: str, have: CannData, files: dict[str, Published], found: cann_images.ImageRelease,
                    decide, merged: Merged) -> None:
    mine = _parts(have)
    extra = []
    for key, pub in files.items():
        if key not in mine:
            extra.append(key)
            continue
        taken = decide(f"cann.{version}.{key}", {str(have.source): mine[key], found.source: pub.url}, mine[key])
        if taken == pub.url and taken != mine[key]:
            part, *chip, arch = key.split(".")
            if part == "kernels":
                have.kernels[chip[0]][arch] = pub
            else:
                getattr(have, part)[arch] = pub
    left = _take_missing(version, have, {k: files[k] for k in extra}, found, merged)
    _one_folder(version, have)
    if left:
        named = sorted({_part_name(k.rsplit(".", 1)[0]) for k in left})
        merged.images_notes.append(f"{version}: the images also install {', '.join(named)}; not imported "
                                   f"(CANN {version} is {str(have.source).split(':')[0]}'s)")


def _part_name(part: str) -> str:
    """"kernels.A3" -> "A3 kernels", "nnal" -> "NNAL"."""
    return f"{part.split('.', 1)[1]} kernels" if part.startswith("kernels.") else part.upper()


def _take_missing(version: str, have: CannData, extra: dict[str, Published], found: cann_images.ImageRelease,
                  merged: Merged) -> list[str]:
    """What the images install of a release another source lists, where that source lists
    none of the part (a chip's kernels, NNAL): taken for every arch, by the era's name (the
    A3 kernels up to 8.3 by the chip's own), with the Dockerfiles as its source and no sum.
    The keys left (a part the source has for another arch, or not for both) are returned."""
    from ..matrix.eras import NNAL, expected_kernels
    by_part: dict[str, dict[str, Published]] = {}
    for key, pub in extra.items():
        part, arch = key.rsplit(".", 1)
        by_part.setdefault(part, {})[arch] = pub
    left = []
    for part, per in sorted(by_part.items()):
        chip = part.split(".", 1)[1] if part.startswith("kernels.") else ""
        held = have.kernels.get(chip) if chip else have.nnal
        want = {a: expected_kernels(version, chip, a) if chip else NNAL.format(v=version, arch=a) for a in ARCHES}
        if held or set(per) != set(ARCHES) or any(per[a].run != want[a] for a in ARCHES):
            left += [f"{part}.{a}" for a in per]
            continue
        if chip:
            have.kernels[chip] = dict(per)
        else:
            have.nnal = dict(per)
        paths = sorted({p for a in ARCHES for p in found.files[f"{part}.{a}"][per[a].url]})
        have.parts_source[part] = (f"{found.source.split(': ', 1)[0]}: {paths[0]}"
                                   + (f" and {len(paths) - 1} more Dockerfile{'s' if len(paths) > 2 else ''}"
                                      if len(paths) > 1 else "")
                                   + f" (the images' download; {str(have.source).split(':')[0]} lists none)")
        merged.images_notes.append(f"{version}: {_part_name(part)} taken from the images ({paths[0]}"
                                   + (f" and {len(paths) - 1} more" if len(paths) > 1 else "") + "; no published sum)")
    return left


def _images_release(version: str, files: dict[str, Published], found: cann_images.ImageRelease,
                    merged: Merged) -> CannData | None:
    """A release only the images list, its files held to its era's names (a build installs the
    files by those names; one outside the rule, such as Atlas-A3-cann-kernels before 8.5, is
    said and left out)."""
    from ..matrix.eras import NNAL, expected_kernels, expected_toolkit
    rel = CannData(version, None, found.source)
    outside: dict[tuple[str, str], list[str]] = {}
    for key, pub in sorted(files.items()):
        part, *chip, arch = key.split(".")
        want = (expected_toolkit(version, arch) if part == "toolkit" else NNAL.format(v=version, arch=arch)
                if part == "nnal" else expected_kernels(version, chip[0], arch))
        if pub.run != want:
            outside.setdefault((pub.run.replace(arch, "<arch>"), want.replace(arch, "<arch>")), []).append(arch)
            continue
        if part == "kernels":
            rel.kernels.setdefault(chip[0], {})[arch] = pub
        else:
            getattr(rel, part)[arch] = pub
    for (got, want), arches in outside.items():
        merged.images_notes.append(f"{version}: {got} ({', '.join(arches)}) is not the name CANN {version}'s era "
                                   f"gives that file ({want}): not imported")
    missing = [a for a in ARCHES if a not in rel.toolkit]
    if missing:
        merged.images_notes.append(f"{version}: no toolkit for {', '.join(missing)}; not imported")
        return None
    _one_folder(version, rel)
    return rel


def _one_folder(version: str, rel: CannData) -> None:
    """imported.yaml keeps one URL per release: its files must lie in one folder."""
    folders = sorted({p.url.rsplit("/", 1)[0] + "/" for p in list(rel.toolkit.values()) + list(rel.nnal.values())
                      + [p for per in rel.kernels.values() for p in per.values()]})
    if len(folders) > 1:
        raise UserError(f"CANN {version} ({rel.source}): its files would lie in {len(folders)} folders "
                        f"({', '.join(folders)}); imported.yaml keeps one URL per release")


def _file_conflict(decide, version: str, other: Published, mine: Published | None, mine_v: str, other_v: str,
                   into: dict[str, Published], arch: str) -> None:
    if mine is None:
        into[arch] = other
        return
    if mine.sha256 != other.sha256:
        taken = decide(f"cann.{version}.{mine.zip}.sha256",
                       {f"ascend-deployer {mine_v}": mine.sha256, f"ascend-deployer {other_v}": other.sha256},
                       mine.sha256)
        into[arch] = mine if taken == mine.sha256 else other


# ---------------------------------------------------------------------------- writing

def add_pypi(merged: Merged, framework: Paired, served: dict[str, pypi.Release]) -> None:
    """Mark which of a framework's releases the index serves and for which Pythons per arch
    (its wheel files: a stack's Python range may use them where Huawei's list stops short),
    and list the releases it serves that Huawei's data pairs with no CANN release (unpaired:
    refused in a stack, shown by `invoke matrix`). Huawei names pre-releases 2.6.0-rc1, the
    index 2.6.0rc1; a pre-release Huawei does not pair is not listed."""
    have = merged.releases(framework)
    by_version = {str(Version(r)): r for r in have}
    for rel in have.values():
        rel.on_pypi = str(Version(rel.release)) in served
    for version, release in served.items():
        if version not in by_version and Version(version).is_prerelease:
            continue
        name = by_version.get(version, version)
        if name not in have:
            have[name] = framework.release(name, None, framework.index_source, on_pypi=True)
        have[name].pypi_pythons = {arch: sorted(p, key=Version) for arch, p in sorted(release.pythons.items())}
    merged.put(framework, have)


def keep_pypi(merged: Merged, old: dict) -> None:
    """The index's facts as the last import left them: for the releases the new data has,
    and the releases only the index served (the deployer's copies never list those, so an
    offline import would otherwise delete them)."""
    for framework in PAIRED:
        have, before_all = merged.releases(framework), old.get(framework.section) or {}
        for version, before in before_all.items():
            before = before or {}
            if version not in have and before.get("pypi_pythons") and not before.get("cann"):
                have[version] = framework.release(version, None, before.get("source") or framework.index_source)
        for version, rel in have.items():
            before = before_all.get(version) or {}
            if "pypi" in before:
                rel.on_pypi = bool(before["pypi"])
            elif before.get("pypi_pythons"):
                rel.on_pypi = True
            rel.pypi_pythons = {arch: [str(p) for p in pythons]
                                for arch, pythons in (before.get("pypi_pythons") or {}).items()}
        merged.put(framework, have)


def keep_images(merged: Merged, old: dict, ascend: DocsData | None) -> None:
    """The releases the last import took from the CANN images, when this one reads none
    (no --cann-images): as it left them, but for the drivers they run on, which are the
    release notes' facts and read again with them. A release another source lists now is
    that source's."""
    kept = 0
    for version, before in (old.get("cann") or {}).items():
        before = before or {}
        url = str(before.get("url") or "")

        def pub(entry: dict, url: str = url) -> Published:
            return Published("", url + entry["file"], entry.get("zip_sha256"), str(entry["file"]))
        if version in merged.cann:
            kept += _keep_parts(merged.cann[version], before, pub)
            continue
        if not str(before.get("source") or "").startswith(cann_images.REPO + " "):
            continue
        rel = CannData(version, before.get("driver"), str(before["source"]),
                       {a: pub(e) for a, e in (before.get("toolkit") or {}).items()},
                       {chip: {a: pub(e) for a, e in per.items()} for chip, per in (before.get("kernels") or {}).items()},
                       nnal={a: pub(e) for a, e in (before.get("nnal") or {}).items()})
        if ascend is not None:
            rel.runs_on, rel.runs_on_source = docs.runs_on(ascend.cann, version)
        else:
            rel.runs_on = [str(d) for d in before.get("runs_on") or []]
            rel.runs_on_source = [str(before["runs_on_source"])] if before.get("runs_on_source") else []
        merged.cann[version] = rel
        kept += 1
    if kept:
        merged.images_read = str(((old.get("read") or {}).get("cann_images")) or "")
        merged.cann = dict(sorted(merged.cann.items(), key=lambda kv: _version_key(kv[0])))


def _keep_parts(rel: CannData, before: dict, pub) -> int:
    """The parts the last import took from the images for a release another source lists
    (parts_source), where that source still lists none of them; how many were kept."""
    kept = 0
    for part, source in (before.get("parts_source") or {}).items():
        if not str(source).startswith(cann_images.REPO + " "):
            continue
        chip = part.split(".", 1)[1] if part.startswith("kernels.") else ""
        entries = ((before.get("kernels") or {}).get(chip) if chip else before.get("nnal")) or {}
        if (rel.kernels.get(chip) if chip else rel.nnal) or not entries:
            continue
        files = {a: pub(e) for a, e in entries.items()}
        if chip:
            rel.kernels[chip] = files
        else:
            rel.nnal = files
        rel.parts_source[part] = str(source)
        kept += 1
    return kept


def keep_env(merged: Merged, old: dict) -> None:
    """The environments the last import read from the images (each release's own), when
    this one reads none."""
    for version, before in (old.get("cann") or {}).items():
        before = before or {}
        if before.get("env") and not before.get("env_from") and version not in merged.envs:
            merged.envs[str(version)] = EnvEntry(before["env"], str(before.get("env_source") or ""))


def keep_tags(merged: Merged, old: dict) -> None:
    """The official images' tags the last import read (each release's), when this one reads
    none: the CANN-only stacks are derived from them (matrix/load.py)."""
    for version, before in (old.get("cann") or {}).items():
        if (before or {}).get("images") and str(version) in merged.cann:
            merged.image_tags[str(version)] = [str(t) for t in before["images"]]
        if (before or {}).get("devel_images") and str(version) in merged.cann:
            merged.devel_tags[str(version)] = [str(t) for t in before["devel_images"]]


def fill_env(merged: Merged) -> None:
    """Each release the images do not cover (before 8.1.RC1, after the newest they install)
    takes the environment of the nearest release they cover, moved to its own toolkit home,
    saying which; an environment of a release no longer imported is dropped."""
    own = {v: e for v, e in merged.envs.items() if not e.of and v in merged.cann}
    order = sorted(set(merged.cann) | set(own), key=_version_key)
    merged.envs = dict(own)
    if not own:
        return
    for version in merged.cann:
        if version in own:
            continue
        at = order.index(version)
        nearest = min(own, key=lambda v: (abs(order.index(v) - at), order.index(v)))
        merged.envs[version] = EnvEntry(cann_env.borrowed(own[nearest].env, nearest, version),
                                        f"CANN {nearest}'s (the nearest release the official images install; none "
                                        f"installs {version}): {own[nearest].source}", nearest)


def _files(per: dict[str, Published]) -> dict[str, dict[str, str]]:
    return {arch: {"file": pub.run, **({"zip_sha256": pub.sha256} if pub.sha256 else {})}
            for arch, pub in per.items()}


def _cann_data(rel: CannData, env: EnvEntry | None = None, tags: list[str] | None = None,
               devel: list[str] | None = None) -> dict:
    out: dict = {"source": str(rel.source), "url": rel.url, "driver": rel.driver}
    if rel.runs_on:
        out.update(runs_on=list(rel.runs_on), runs_on_source="; ".join(dict.fromkeys(rel.runs_on_source)))
    out.update(toolkit=_files(rel.toolkit), kernels={chip: _files(per) for chip, per in rel.kernels.items()})
    if rel.nnal:
        out["nnal"] = _files(rel.nnal)
    if rel.parts_source:
        out["parts_source"] = dict(rel.parts_source)
    if tags:
        out["images"] = list(tags)
    if devel:
        out["devel_images"] = list(devel)
    if env is not None:
        out["env_source"] = env.source
        if env.of:
            out["env_from"] = env.of
        out["env"] = {part: dict(names) for part, names in env.env.items()}
    return out


def _release_data(rel: ReleaseData) -> dict:
    out: dict = {"cann": [rel.cann] if rel.cann else []}
    if rel.pairing_source:
        out["source"] = str(rel.pairing_source)
    for key in ("torchnpu", "branch"):
        if getattr(rel, key, ""):
            out[key] = getattr(rel, key)
    if rel.on_pypi is False:
        out["pypi"] = False
    if rel.pypi_pythons:
        out["pypi_pythons"] = {arch: list(p) for arch, p in rel.pypi_pythons.items()}
    if rel.wheels:
        out.update(wheels_source=str(rel.wheels_source), wheels={t: dict(s) for t, s in rel.wheels.items()})
    return out


def to_data(merged: Merged) -> dict:
    """The import as imported.yaml holds it (its torch_npu_tags aside: `--pytorch-git`'s)."""
    data: dict = {"read": {"deployer": [{"version": d.version, "wheel_sha256": d.archive_sha256} for d in merged.read],
                           "docs": list(merged.docs_read)},
                  "cann": {v: _cann_data(rel, merged.envs.get(v), merged.image_tags.get(v), merged.devel_tags.get(v))
                           for v, rel in merged.cann.items()}}
    if merged.images_read:
        data["read"]["cann_images"] = merged.images_read
    if merged.compatible:
        data["torchnpu_compatible"] = {"source": merged.compatible_source, "series": {
            series: list(canns) for series, canns in merged.compatible.items()}}
    for framework in PAIRED:     # (imported.py writes torch_npu_releases, the one the matrix needs, even empty)
        if merged.releases(framework):
            data[framework.section] = {r: _release_data(rel) for r, rel in merged.releases(framework).items()}
    if merged.serving:
        data[vllm.SECTION] = {r: rel.to_data() for r, rel in merged.serving.items()}
    return data


def keep_serving(merged: Merged, old: dict) -> None:
    """vLLM-Ascend's releases as the last import left them (an import that reads no index)."""
    merged.serving = {str(v): vllm.VllmAscendData.from_data(str(v), d)
                      for v, d in (old.get(vllm.SECTION) or {}).items()}


# ---------------------------------------------------------------------------- summary

@dataclass
class Summary:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return ([f"+ {a}" for a in self.added] + [f"~ {c}" for c in self.changed] + [f"- {r}" for r in self.removed])


def _flatten(data: dict) -> dict[str, str]:
    """An import as one line a fact (what the summary compares)."""
    flat: dict[str, str] = {}
    for version, rel in (data.get("cann") or {}).items():
        flat[f"cann {version}"] = "release"
        flat[f"cann {version} driver"] = str(rel.get("driver"))
        if rel.get("runs_on"):
            flat[f"cann {version} runs on"] = ", ".join(map(str, rel["runs_on"]))
        for arch, entry in (rel.get("nnal") or {}).items():
            flat[f"cann {version} nnal {arch}"] = str(entry.get("file"))
        files = [("toolkit", a, e) for a, e in (rel.get("toolkit") or {}).items()]
        files += [(f"kernels {chip}", a, e) for chip, per in (rel.get("kernels") or {}).items() for a, e in per.items()]
        for what, arch, entry in files:
            flat[f"cann {version} {what} {arch}"] = f"{entry.get('file')} zip_sha256 {entry.get('zip_sha256')}"
        for part, source in (rel.get("parts_source") or {}).items():
            flat[f"cann {version} {part} from"] = str(source)
        for part, names in (rel.get("env") or {}).items():
            for name, value in (names or {}).items():
                flat[f"cann {version} env {part} {name}"] = ":".join(value) if isinstance(value, list) else str(value)
    for framework in PAIRED:
        for release, rel in (data.get(framework.section) or {}).items():
            key = f"{framework.field} {release}"
            flat[key] = f"CANN {', '.join(rel.get('cann') or []) or 'none'}"
            if rel.get("torchnpu"):
                flat[f"{key} TorchNPU"] = str(rel["torchnpu"])
            if rel.get("pypi") is False:
                flat[f"{key} on PyPI"] = "no"
            wheels = rel.get("wheels") or {}
            if wheels:
                flat[f"{key} wheels"] = " ".join(wheels)
                digest = hashlib.sha256(json.dumps(wheels, sort_keys=True).encode()).hexdigest()[:12]
                flat[f"{key} wheel sums"] = f"(digest {digest})"
    serving = data.get(vllm.SECTION)
    for release, rel in (serving or {}).items():
        pins = rel.get("pins") or {}
        flat[f"vllm-ascend {release}"] = ", ".join(f"{k} {pins[k]}" for k in ("torch", "torch_npu") if k in pins) \
            or "no torch pins"
        flat[f"vllm-ascend {release} pins"] = ", ".join(f"{k} {v}" for k, v in pins.items()) or "none"
        flat[f"vllm-ascend {release} requires-python"] = str(rel.get("requires_python") or "any")
        flat[f"vllm-ascend {release} sdist"] = f"{rel['sdist']['file']} sha256 {rel['sdist']['sha256']}"
        if rel.get("wheels"):
            flat[f"vllm-ascend {release} wheels"] = "; ".join(f"{arch} {' '.join(p)}" for arch, p in rel["wheels"].items())
        for name, image in (rel.get("images") or {}).items():
            flat[f"vllm-ascend {release} {name}"] = image["from"] + (f" SOC_VERSION {image['soc_version']}"
                                                                     if image.get("soc_version") else "")
        if rel.get("ray"):
            flat[f"vllm-ascend {release} ray"] = rel["ray"]
        v = rel.get("vllm")
        flat[f"vllm-ascend {release} vllm"] = (f"{v['version']} ({v['sdist']} sha256 {v['sha256']}, requires-python "
                                               f"{v['requires_python'] or 'any'})" if v else
                                               f"none: {rel.get('vllm_note') or 'no release of its number'}")
    return flat


def summarize(old: dict, new: dict) -> Summary:
    a, b = _flatten(old), _flatten(new)
    s = Summary()
    for key in b:
        if key not in a:
            s.added.append(key + ("" if b[key] == "release" else f": {b[key]}"))
        elif a[key] != b[key]:
            s.changed.append(f"{key}: {a[key]} -> {b[key]}")
    s.removed = [k for k in a if k not in b]
    return s


# ---------------------------------------------------------------------------- the task

@dataclass
class Result:
    path: Path                     # the imported facts' file
    text: str                      # its new text
    changed: bool
    summary: Summary
    merged: Merged
    counts: dict[str, int]
    pypi: list[str] = field(default_factory=list)     # what the index serves that the last import did not list


def sources(versions: list[str], given: list[Path], work: Path, pip_args: list[str]) -> list[DeployerData]:
    """The deployer releases to read: the given copies, else the matrix's list via pip."""
    if given:
        return [read(p) for p in given]
    return [read(fetch(v, work, pip_args)) for v in versions]


def update(matrix_path: Path, given: list[Path] | None = None, pip_args: list[str] | None = None,
           docs_folder: Path | None = None, ca_bundle: str | None = None, proxy: str | None = None,
           images_folder: Path | None = None, cache: Path | None = None) -> Result:
    """`given`: copies of the deployer releases (else fetched with pip); `docs_folder`:
    copies of the documents upstream.docs names (else fetched over HTTPS); `images_folder`:
    a copy of Ascend/cann-container-image (else the releases the last import took from it
    are kept as they were); `cache`: where what each vLLM-Ascend sdist gave is kept by its sum."""
    from ..matrix.imported import emit
    from ..matrix.load import load_text, upstream_of
    upstream = upstream_of(matrix_path)
    if not upstream.deployer and not given:
        raise UserError(f"{matrix_path}: upstream.deployer lists no ascend-deployer release to read")
    with tempfile.TemporaryDirectory(prefix="ascend-deployer-") as tmp:
        datasets = sources(list(upstream.deployer), list(given or []), Path(tmp), pip_args or [])
    ascend = docs.load(dict(upstream.docs), docs_folder, ca_bundle, proxy)
    images = cann_images.read(images_folder) if images_folder is not None else None
    merged = merge(datasets, {k: dict(v) for k, v in upstream.choices.items()}, ascend, images)
    before = upstream.imported.read_text() if upstream.imported.is_file() else ""
    old = _data(before, upstream.imported)
    if images is None:
        keep_images(merged, old, ascend)
        keep_env(merged, old)
        keep_tags(merged, old)
    fill_env(merged)
    if given:                        # a site's own copies (--from) come without the index:
        keep_pypi(merged, old)                                      # its facts stay as last read
        keep_serving(merged, old)
        news = ["not read (--from: an import from copies keeps what the index served as the last import left it)"]
    else:
        for framework in PAIRED:
            add_pypi(merged, framework, pypi.releases(pypi.files(framework.field, pip_args or []), pre=framework.pre))
        news = pypi_news(merged, old)
        if upstream.serving_from:
            merged.serving, merged.serving_notes = vllm.read(upstream.serving_from, upstream.serving_pre,
                                                             pip_args or [], cache)
    undecided = [c for c in merged.conflicts if c.taken is None]
    if undecided:
        raise UserError("the sources disagree, and matrix.yaml does not say which to take:\n  "
                        + "\n  ".join(map(str, undecided))
                        + "\nRecord the choice under upstream.choices, e.g.\n  upstream:\n    choices:\n      "
                        + f"\"{undecided[0].path}\": {{take: {next(iter(undecided[0].values.values()))}, why: \"...\"}}")
    new = to_data(merged)
    if old.get("torch_npu_tags"):
        new["torch_npu_tags"] = old["torch_npu_tags"]        # `--pytorch-git`'s part, kept as it was
    text = emit(new)
    load_text(matrix_path.read_text(), matrix_path, text)   # a valid matrix with it, or nothing is written
    return Result(upstream.imported, text, text != before, summarize(old, new), merged, counts(merged), news)


def pypi_news(merged: Merged, old: dict) -> list[str]:
    """The releases the index serves that the last import did not list, per framework, each
    with the CANN this import pairs it with (or none: unpaired)."""
    news = []
    for framework in PAIRED:
        listed = old.get(framework.section) or {}
        new = [(r, rel) for r, rel in merged.releases(framework).items() if rel.on_pypi and r not in listed]
        if new:
            news.append(f"serves {framework.framework.package_title} " + ", ".join(
                f"{r} ({'CANN ' + rel.cann + ': ' + str(rel.pairing_source) if rel.cann else 'unpaired'})"
                for r, rel in new) + " that the imported facts did not list")
    return news


def _data(text: str, path: Path) -> dict:
    import yaml

    from ..matrix.yamlsource import safe_load
    try:
        return safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({exc}); it is machine-written: restore it (git checkout) and "
                        f"update again") from None


def counts(merged: Merged) -> dict[str, int]:
    files = [f for rel in merged.cann.values() for f in list(rel.toolkit.values()) + list(rel.nnal.values())
             + [x for per in rel.kernels.values() for x in per.values()]]
    tn = list(merged.torch_npu.values())
    return {"deployer releases read": len(merged.read), "Ascend documents read": len(merged.docs_read),
            "CANN releases": len(merged.cann),
            "CANN releases only the release notes or TorchNPU notes name": merged.from_docs.get("new CANN", 0),
            "CANN releases only the official CANN images list": sum(
                1 for r in merged.cann.values() if str(r.source).startswith(cann_images.REPO + " ")),
            "CANN parts the official CANN images gave releases other sources list (a chip's kernels, NNAL)": sum(
                len(r.parts_source) for r in merged.cann.values()),
            "CANN files imported": len({f.run for f in files}),
            "CANN checksums (sha256 of the published .zip)": len({f.run for f in files if f.sha256}),
            "CANN files with no published sum (pinned on first use)": len({f.run for f in files if not f.sha256}),
            "CANN releases with the drivers they run on": sum(1 for r in merged.cann.values() if r.runs_on),
            "CANN files not used by images (nnae, nnrt, ...)": len({u for r in merged.cann.values() for u in r.unused}),
            "CANN releases with the environment of their own official images": sum(
                1 for e in merged.envs.values() if not e.of),
            "CANN releases with the environment of the nearest release's images": sum(
                1 for e in merged.envs.values() if e.of),
            **{what: n for framework in PAIRED for what, n in _release_counts(merged, framework).items()},
            "torch_npu pairings the Ascend documents added": merged.from_docs.get("pairings", 0),
            "torch_npu releases with their TorchNPU release": sum(1 for r in tn if r.torchnpu),
            "TorchNPU series with compatible CANN series": len(merged.compatible),
            "vLLM-Ascend releases": len(merged.serving),
            "vLLM-Ascend releases with a vLLM release of the same number": sum(
                1 for r in merged.serving.values() if r.vllm),
            "conflicts between sources": len(merged.conflicts)}


def _release_counts(merged: Merged, framework: Paired) -> dict[str, int]:
    """A framework's releases, counted."""
    found, name = list(merged.releases(framework).values()), framework.framework.package_title
    return {f"{name} releases": len(found),
            f"{name} releases with a CANN pairing": sum(1 for r in found if r.cann),
            f"{name} releases on PyPI with no pairing (unpaired)": sum(1 for r in found if not r.cann and r.on_pypi),
            f"paired {name} releases not on PyPI": sum(1 for r in found if r.on_pypi is False),
            f"wheel checksums ({' and '.join(framework.wheels)})": sum(len(s) for r in found for s in r.wheels.values())}


def report(result: Result) -> list[str]:
    """What an update found, for review: conflicts, additions, changes, removals, counts."""
    return ([f"conflict: {c}" for c in result.merged.conflicts]
            + [f"PyPI: {line}" for line in result.pypi]
            + [f"cann images: {note}" for note in result.merged.images_notes]
            + [f"vllm-ascend: {note}" for note in result.merged.serving_notes] + result.summary.lines()
            + [f"{what}: {count}" for what, count in result.counts.items()])


def write(result: Result) -> None:
    """The imported facts' file, replaced whole (a reader never sees half of it). The
    caller holds atomic.locked(result.path) from before update() read it to after this
    (cli/data.py), so that two writers at once take turns."""
    atomic.write_text(result.path, result.text)


def pip_options(index_url: str | None, ca_bundle: str | None, proxy: str | None) -> list[str]:
    """pip's own options for the site's index, CA and proxy (pip also reads its config)."""
    from pathlib import Path as _Path

    from ..engine.network import Network, check
    check(Network(_Path(ca_bundle) if ca_bundle else None, index_url, {"proxy": proxy} if proxy else {}, "host"))
    return ((["--index-url", index_url] if index_url else []) + (["--cert", ca_bundle] if ca_bundle else [])
            + (["--proxy", proxy] if proxy else []))


def newer_release(result: Result, pip_args: list[str]) -> str | None:
    """The newest ascend-deployer on the index, when the matrix does not read it yet."""
    newest = newest_version(pip_args)
    return None if newest in {d.version for d in result.merged.read} else newest
