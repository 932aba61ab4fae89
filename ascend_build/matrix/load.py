"""Reading the matrix: matrix.yaml and the imported facts it names (upstream.imported),
each checked against its shape (schema.py) with every problem's file and line, turned
into records (records.py), then checked as a whole (semantics.py). The only place that
reads the files' raw data."""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import MatrixError, UserError
from ..platforms import ARCHES
from . import cannenv, imported, schema, semantics, serving
from . import checker as s
from .eras import cann_key
from .frameworks import CANN, FRAMEWORKS, MINDSPORE, TORCH, Framework
from .model import Defaults, Matrix
from .official import OfficialTag, cann_tag
from .records import (
    Builder,
    CannFile,
    CannRelease,
    ChipSupport,
    Files,
    ImageSpec,
    OSBase,
    PackageRelease,
    PythonSource,
    Repo,
    Stack,
    TorchAtb,
    TorchNpuBuild,
    TorchParts,
    UserLayer,
    minor,
)
from .yamlsource import Located, load, read


def load_matrix(path: str | Path = "matrix.yaml") -> Matrix:
    path = Path(path)
    try:
        text = read(path)
    except OSError as exc:
        raise UserError(f"cannot read the matrix file {path}: {exc.strerror}") from None
    key = (str(path.resolve()), text, _stamp(path.resolve().parent))
    if key in _LOADED:
        return _LOADED[key]
    matrix = load_text(text, path)
    _LOADED.clear()         # one matrix kept: the last one read, while its two files are as they were
    _LOADED[key] = matrix
    return matrix


# The matrix last read, by its text and the imported file's identity: a task that reads the
# same files twice (and a process forked after reading them) takes the checked records as
# they are. A Matrix is not changed by its readers.
_LOADED: dict[tuple, Matrix] = {}


def _stamp(folder: Path) -> tuple:
    """What changes when a file beside the matrix changes: each file's size and time."""
    try:
        return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.glob("*.yaml")))
    except OSError:
        return ()


def load_text(text: str, path: Path, imported_text: str | None = None) -> Matrix:
    """A matrix from its text (`path` names it in errors and locates the imported facts,
    read from beside it unless `imported_text` is given), checked like the files."""
    hand = load(text, str(path))
    hand_checker = s.Checker(hand)
    _check_hand(hand_checker, hand.data)
    if hand_checker.problems:
        raise MatrixError(hand_checker.problems)
    name = hand.data["upstream"]["imported"]
    files = Files(path, imported.path_for(path, name))
    facts = load(imported_text if imported_text is not None else imported.read_text(path, name), str(files.imported),
                 aliases=False)
    checkers = s.Checkers(hand_checker, s.Checker(facts), schema.IMPORTED_KEYS)
    schema.IMPORTED(checkers.imported, facts.data, ())
    if checkers.problems:
        raise MatrixError(checkers.problems)
    _check_hand_beside_imported(checkers, hand.data, facts.data)
    if checkers.problems:
        raise MatrixError(checkers.problems)
    matrix = _build(files, hand, facts.data)
    semantics.check(matrix, checkers)
    if checkers.problems:
        raise MatrixError(checkers.problems)
    return matrix


def _check_hand(c: s.Checker, data: Any) -> None:
    """matrix.yaml's shape; a section of the imported facts written into it is named as such."""
    if isinstance(data, dict):
        for key in sorted(schema.IMPORTED_KEYS & set(data)):
            c.fail((key,), f"{key} is imported: it lives in the file upstream.imported names (imported.yaml), "
                           f"which `invoke update` writes; remove it here")
        data = {k: v for k, v in data.items() if k not in schema.IMPORTED_KEYS}
    schema.MATRIX(c, data, ())


def _check_hand_beside_imported(c: s.Checkers, hand: Mapping[str, Any], facts: Mapping[str, Any]) -> None:
    """Hand-recorded files (cann_chips, cann_nnal) complete an imported release; once the
    import lists them, the hand-written entry goes."""
    cann = facts.get("cann") or {}
    for section, kind in (("cann_chips", "kernels"), ("cann_nnal", "nnal")):
        for ver, extra in (hand.get(section) or {}).items():
            if ver not in cann:
                c.fail((section, ver), f"no CANN {ver} in cann: (the import); hand-recorded {kind} need their "
                                       f"release there, one of {', '.join(cann)}")
                continue
            have = cann[ver].get(kind) or {}
            for name in extra[kind]:
                if name in have:
                    what = f"{name} kernels" if kind == "kernels" else "NNAL"
                    where = f"cann.{ver}.{kind}" + (f".{name}" if kind == "kernels" else "")
                    c.fail((section, ver, kind, name), f"CANN {ver}'s {what} are imported now ({where}): remove "
                                                       f"this entry")


# ------------------------------------------------------------------ records

def _build(files: Files, hand: Located, facts: Mapping[str, Any]) -> Matrix:
    d = hand.data
    releases = {f.name: imported.package_releases(facts, f.releases) for f in FRAMEWORKS.values() if f.paired}
    defaults = d["defaults"]
    cann = _cann(d, facts)
    stacks = _stacks(d, releases)
    vllm_ascend = imported.serving(facts)
    derived = {**_derived(cann, stacks, releases), **serving.derive(stacks, cann, vllm_ascend, releases[TORCH.name],
                                                                      imported.compatible(facts))}
    return Matrix(
        files=files, source=hand,
        defaults=Defaults(defaults["torch"], defaults["os"], defaults["chip"], defaults["platform"],
                          defaults.get("run_as", "root")),
        os={k: OSBase(k, v["image"], v["family"], v["python"], v.get("debootstrap"), v.get("glibc"))
            for k, v in d["os"].items()},
        pythons={k: PythonSource(k, v["version"], tuple(v["urls"]), v.get("sha256")) for k, v in d["pythons"].items()},
        cann=cann,
        stacks=stacks,
        derived=derived,
        images=[ImageSpec(i["stack"], tuple(i["os"]), tuple(i["platforms"]), i.get("python"), i.get("chip"),
                          i.get("alias"), tuple(UserLayer(x["requirements"], x.get("name")) for x in i.get("layers") or ()))
                for i in d["images"]],
        cann_python_deps=list(d["cann_python_deps"]),
        builders={k: Builder(k, v["image"], v["family"], tuple(v["gcc"]), v["python"], tuple(v["pythons"]),
                             v.get("toolset", ""), str(v.get("cann_from", "")), v.get("cross", ""),
                             v.get("wheel_plat", "")) for k, v in d["builders"].items()},
        sources=_sources(d["sources"]),
        torch_atb=_torch_atb(d.get("torch_atb")),
        chip_support={str(k): ChipSupport(str(k), str(v["torchnpu_from"]), v["source"])
                      for k, v in (d.get("chip_support") or {}).items()},
        torch_npu_build=_torch_npu_build(d.get("torch_npu_build")),
        cann_pins={str(k): str(v) for k, v in (d.get("cann_pins") or {}).items()},
        releases=releases, compatible=imported.compatible(facts), torch_npu_tags=imported.tags(facts),
        vllm_ascend=vllm_ascend)


def _cann(d: Mapping[str, Any], facts: Mapping[str, Any]) -> dict[str, CannRelease]:
    """Each imported release, with what matrix.yaml adds to it: pinned sums (cann_pins),
    numpy limits, hand-recorded kernels and NNAL, SiP from nnal_sip_from."""
    pins = d.get("cann_pins") or {}
    out = {}
    for ver, c in (facts.get("cann") or {}).items():
        def entry(kind: str, e: Mapping[str, Any], key: tuple, url: str = c["url"]) -> CannFile:
            return CannFile(kind, e["file"], url + e["file"], e.get("sha256") or pins.get(e["file"]), key,
                            e.get("zip_sha256"))
        toolkit = {a: entry("toolkit", c["toolkit"][a], ("cann", ver, "toolkit", a)) for a in ARCHES}
        kernels = {chip: {a: entry("kernels", per[a], ("cann", ver, "kernels", chip, a)) for a in ARCHES}
                   for chip, per in c["kernels"].items()}
        nnal = {a: entry("nnal", c["nnal"][a], ("cann", ver, "nnal", a)) for a in c.get("nnal") or {}}
        for a, e in (((d.get("cann_nnal") or {}).get(ver) or {}).get("nnal") or {}).items():
            nnal.setdefault(a, entry("nnal", e, ("cann_nnal", ver, "nnal", a)))
        for chip, per in (((d.get("cann_chips") or {}).get(ver) or {}).get("kernels") or {}).items():
            if chip not in kernels:
                kernels[chip] = {a: entry("kernels", e, ("cann_chips", ver, "kernels", chip, a)) for a, e in per.items()}
        sip = bool(nnal) and "nnal_sip_from" in d and cann_key(ver) >= cann_key(str(d["nnal_sip_from"]))
        env = cannenv.from_data(c["env"], str(c.get("env_source") or ""), str(c.get("env_from") or ""),
                                (d.get("nnal_sip_env") or {}).get("env") if sip else None) if c.get("env") else None
        out[ver] = CannRelease(ver, c["url"], c.get("driver"), (d.get("cann_numpy") or {}).get(ver), toolkit,
                               kernels, nnal, tuple(str(x) for x in c.get("runs_on") or ()), sip, str(c["source"]),
                               env, _official(c.get("images") or ()), _official(c.get("devel_images") or ()))
    return out


def _official(tags: Any) -> tuple[OfficialTag, ...]:
    """A release's official image tags, read (the schema has held each to the tag's form;
    semantics.py, each to its release)."""
    return tuple(tag for tag in map(cann_tag, map(str, tags)) if tag is not None)


def _derived(cann: Mapping[str, CannRelease], written: Mapping[str, Stack],
             releases: Mapping[str, Mapping[str, PackageRelease]]) -> dict[str, Stack]:
    """A CANN-only stack for each release cann_stacks: writes no entry for, so that `--cann V`
    builds for every release the import knows. Its Python range, lowest to highest, and its
    default (the Python most of them take, the newer of two as common), from the first of:
    the release's official CANN images; the Pythons the framework releases published for it
    have wheels for (aarch64); the nearest release before it with a CANN-only line. NNAL as
    the release has it, the chips its kernels."""
    out: dict[str, Stack] = {}
    for ver in sorted(cann, key=cann_key):
        name = CANN.stack_name(ver)
        if name in written:
            continue
        rel = cann[ver]
        counts = Counter(t.python for t in rel.images)
        source = f"the Pythons of CANN {ver}'s official images, cann.{ver}.images"
        if not counts:
            made = [r for fw in releases.values() for r in fw.values() if ver in r.cann and r.pythons("aarch64")]
            counts = Counter(p for r in made for p in r.pythons("aarch64"))
            source = (f"the Pythons of the releases published for CANN {ver} "
                      f"({', '.join(r.version for r in made[:6])}{', ...' if len(made) > 6 else ''})")
        if not counts:
            lines = [st for st in (*written.values(), *out.values())
                     if st.framework is CANN and cann_key(st.cann) < cann_key(ver)]
            if not lines:
                continue
            near = max(lines, key=lambda st: cann_key(st.cann))
            counts = Counter({p: 1 for p in near.pythons()} | {near.python_default: 2})
            source = (f"the Pythons of CANN {near.cann}'s line, the nearest release before it with one (nothing "
                      f"published names {ver}'s)")
        pythons = sorted(counts, key=minor)
        default = max(pythons, key=lambda p: (counts[p], minor(p)))
        entry = {"python": {"min": pythons[0], "max": pythons[-1], "default": default}}
        out[name] = dataclasses.replace(_stack(name, ver, entry, CANN, ver, ver, None), derived=True,
                                        derived_from=source)
    return out


def _stacks(d: Mapping[str, Any], releases: Mapping[str, Mapping[str, Any]]) -> dict[str, Stack]:
    stacks = {}
    branches = d.get("torch_npu_branches") or {}
    for key, st in d["stacks"].items():
        rel = releases[TORCH.name].get(st["torch_npu"])
        parts = TorchParts(st["torch"], st["torch_npu"], (rel.branch if rel else "") or branches.get(st["torch_npu"], ""),
                           st["gcc"], dict(st.get("torch_index") or {}), st.get("torch_npu_on_pypi", True),
                           st.get("builder", ""), tuple(st.get("companions") or ()))
        stacks[TORCH.stack_name(key)] = _stack(TORCH.stack_name(key), key, st, TORCH, st["torch"], st["torch_npu"],
                                               parts)
    # Keyed by their release: MindSpore's, or for CANN only the CANN release itself.
    for fw in (MINDSPORE, CANN):
        for key, st in (d.get(fw.section) or {}).items():
            stacks[fw.stack_name(key)] = _stack(fw.stack_name(key), key, st, fw, key, key, None)
    return stacks


def _stack(name: str, key: str, st: Mapping[str, Any], fw: Framework, release: str, package: str,
           torch: TorchParts | None) -> Stack:
    # NNAL's tree where no framework binary decides it: the record's, on every arch
    abi = st.get("cxx11_abi") or ({a: fw.cxx11_abi for a in ARCHES} if fw.cxx11_abi is not None else {})
    return Stack(name=name, key=key, framework=fw, release=release, package=package,
                 cann=st["cann"] if fw.paired else key,
                 python_min=st["python"]["min"], python_max=st["python"]["max"], python_default=st["python"]["default"],
                 pins=dict(st.get("pins") or {}), nnal=st.get("nnal"), torch_atb=bool(st.get("torch_atb")),
                 cxx11_abi=dict(abi), torch=torch)


def _sources(d: Mapping[str, Any]) -> dict[str, Repo]:
    nvidia = d["apex"].get("nvidia")
    return {"torch_npu": Repo(d["torch_npu"]["repo"]),
            "apex": Repo(d["apex"]["repo"], d["apex"]["ref"], Repo(nvidia["repo"], nvidia["ref"]) if nvidia else None,
                         tuple(d["apex"].get("pythons") or ()))}


def _torch_atb(atb: Mapping[str, Any] | None) -> TorchAtb | None:
    if not atb:
        return None
    return TorchAtb(tuple(atb["pythons"]), {str(k): str(v) for k, v in atb["glibc"].items()}, atb["source"])


def _torch_npu_build(build: Mapping[str, Any] | None) -> TorchNpuBuild | None:
    if not build:
        return None
    return TorchNpuBuild(build["source"], tuple(build["flags"]), dict(build["env"]), tuple(build["submodules"]))


# ------------------------------------------------------------------ the import's settings

@dataclass(frozen=True)
class Upstream:
    """What `invoke update` reads and where it writes, as matrix.yaml's upstream: says."""
    imported: Path                         # the imported facts' file it rewrites
    deployer: tuple[str, ...]              # the ascend-deployer releases to read
    choices: Mapping[str, Mapping[str, str]]   # key path -> {take, why}: a decided disagreement
    docs: Mapping[str, Any]                # Ascend's documents (upstream/docs.py reads the entries)
    serving_from: str | None = None        # vLLM-Ascend releases imported from this one on (None: none)
    serving_pre: bool = False              # its pre-releases too


def upstream_of(path: Path) -> Upstream:
    """matrix.yaml's upstream: section, checked; the imported file need not exist yet."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read the matrix file {path}: {exc.strerror}") from None
    hand = load(text, str(path))
    c = s.Checker(hand)
    _check_hand(c, hand.data)
    if c.problems:
        raise MatrixError(c.problems)
    up = hand.data["upstream"]
    serving = up.get("serving") or {}
    return Upstream(imported.path_for(path, up["imported"]), tuple(str(v) for v in up["deployer"]),
                    {str(k): dict(v) for k, v in (up.get("choices") or {}).items()}, dict(up),
                    str(serving["from"]) if serving else None, bool(serving.get("pre")))
