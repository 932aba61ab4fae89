"""The matrix resolved: a stack, an OS, a Python, a chip and a platform chosen, the image
or builder they make (a cell) with every file named, or a refusal that names the key and
what would work. Nothing here touches docker or the network; reading the files is
load.py's, checking them semantics.py's."""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from ..chips import spelling
from ..errors import UserError
from ..platforms import PLATFORMS, Platform
from ..platforms import get as get_platform
from .eras import cann_key, cann_series
from .frameworks import FRAMEWORKS, Framework
from .records import (
    Builder,
    BuilderCell,
    CannFile,
    CannRelease,
    Cell,
    ChipSupport,
    Files,
    ImageSpec,
    OSBase,
    PackageRelease,
    PythonSource,
    Repo,
    ServingRelease,
    Stack,
    TorchAtb,
    TorchNpuBuild,
    TorchNpuTag,
    VllmAscendRelease,
)
from .yamlsource import Located

RUN_AS_HINT = "root, or UID:GID of the hosts' HwHiAiUser, e.g. 1000:1000"


@dataclass(frozen=True)
class Defaults:
    stack: str          # defaults.torch: the line users ask for first
    os: str
    chip: str
    platform: str
    run_as: str = "root"


def parse_run_as(value: str) -> str:
    """Who containers run as, written one way: root, or UID:GID; a malformed value is refused."""
    import re
    if value == "root":
        return value
    m = re.fullmatch(r"([0-9]{1,9}):([0-9]{1,9})", value)
    if not m or int(m.group(1)) == 0:
        raise UserError(f"--run-as {value!r}: {RUN_AS_HINT}")
    return f"{int(m.group(1))}:{int(m.group(2))}"


@dataclass
class Matrix:
    files: Files
    source: Located                   # matrix.yaml as read, for its lines (`invoke pin`)
    defaults: Defaults
    os: dict[str, OSBase]
    pythons: dict[str, PythonSource]
    cann: dict[str, CannRelease]
    stacks: dict[str, Stack]
    images: list[ImageSpec]
    cann_python_deps: list[str] = field(default_factory=list)
    builders: dict[str, Builder] = field(default_factory=dict)
    sources: dict[str, Repo] = field(default_factory=dict)        # torch_npu, apex
    torch_atb: TorchAtb | None = None
    chip_support: dict[str, ChipSupport] = field(default_factory=dict)
    torch_npu_build: TorchNpuBuild | None = None
    cann_pins: dict[str, str] = field(default_factory=dict)      # imported .run file -> the sha256 a site pinned
    # The imported facts (imported.yaml): each framework's package releases by version,
    # Huawei's grid of TorchNPU series -> CANN series, torch_npu's release tags.
    releases: dict[str, dict[str, PackageRelease]] = field(default_factory=dict)
    compatible: dict[str, tuple[str, ...]] = field(default_factory=dict)
    torch_npu_tags: dict[str, TorchNpuTag] = field(default_factory=dict)
    vllm_ascend: dict[str, VllmAscendRelease] = field(default_factory=dict)   # vLLM-Ascend's, by release
    # A CANN-only stack per imported release with official images that matrix.yaml writes no
    # entry for (load.py derives them): built and locked when asked for by name, not rendered,
    # listed or built by CI (those are the written `stacks`).
    derived: dict[str, Stack] = field(default_factory=dict)

    # ------------------------------------------------------------ serving (vLLM + vLLM-Ascend)
    def serving(self, version: str) -> ServingRelease:
        """The vLLM-Ascend release of this number paired with its stack, or why it cannot
        be served here (unknown, pins that disagree, no stack with its torch and torch_npu,
        no vLLM release of its number, no Python both take in the stack's range)."""
        from .serving import resolve
        return resolve(self, version)

    def serving_releases(self) -> list[ServingRelease]:
        """The releases a serving image can take (those serving() pairs), newest first."""
        from .serving import pairable
        return pairable(self)

    @property
    def path(self) -> Path:
        return self.files.matrix

    # ------------------------------------------------------------ stacks
    def stack(self, name: str | None = None) -> Stack:
        """The stack of this name (the default line when None), or why there is none."""
        name = name or self.defaults.stack
        if name in self.stacks:
            return self.stacks[name]
        if name in self.derived:
            return self.derived[name]
        prefixed = [f for f in FRAMEWORKS.values() if f.stack_prefix and name.startswith(f.stack_prefix)]
        fw = prefixed[0] if prefixed else FRAMEWORKS["torch"]
        raise UserError(self._unknown(fw, name[len(fw.stack_prefix):]))

    def _record(self, stack: Stack | str | None) -> Stack:
        """The stack a cell or builder is asked for: the record itself where the caller resolved
        it (a task's options, once, at the command line), else looked up by the name the data
        spell (`images:`, an image's labels; None: the default line)."""
        return stack if isinstance(stack, Stack) else self.stack(stack)

    def stack_for(self, framework: Framework, key: str) -> Stack:
        """The stack an option names: `--mindspore 2.9.0` is mindspore_stacks' 2.9.0."""
        name = framework.stack_name(key)
        found = self.stacks.get(name) or self.derived.get(name)
        if found is not None and found.framework is framework:
            return found
        raise UserError(self._unknown(framework, key))

    def _unknown(self, fw: Framework, key: str) -> str:
        defined = [st.key for st in self.stacks.values() if st.framework is fw]
        if not fw.paired:           # CANN only: a stack is a CANN release the data knows
            derived = [st.key for st in self.derived.values() if st.framework is fw]
            known = ("a CANN release cann: knows, with nothing in the import to derive its stack from"
                     if key in self.cann else
                     f"not a CANN release cann: knows ({', '.join(self.cann)}; `invoke update` imports Huawei's)")
            return (f"unknown {fw.title} stack {key!r}; {self.path} defines: {', '.join(defined) or 'none'} "
                    f"({fw.section}:), and the import derives: {', '.join(derived) or 'none'}. "
                    f"{key} is {known}; to add a line: a `{fw.section}:` entry keyed by it "
                    f"with its Python range" + (f" (see the {defined[-1]} entry)" if defined else ""))
        mine = {r: v for r, v in self.releases.get(fw.name, {}).items() if r == key or r.startswith(key + ".")}
        paired = [r for r, v in mine.items() if v.cann]
        if mine and not paired:
            return (f"unknown {fw.title} stack {key!r}: {fw.package_title} {', '.join(mine)} is on PyPI but unpaired: "
                    f"the data {self.files.imported.name} holds publishes no CANN release for it, so a stack on it "
                    f"would be refused. `invoke update` brings the pairing once Huawei publishes it; the lines here: "
                    f"{', '.join(defined)}")
        default = self.stacks.get(self.defaults.stack)
        example = default.key if default and default.framework is fw else (defined[-1] if defined else key)
        entry = f"a `{fw.section}:` entry naming it, its CANN and the Python range (see the {example} entry)"
        hint = (f"{fw.package_title} " + "; ".join(f"{r} was released for CANN {', '.join(mine[r].cann)}"
                                                 for r in paired[-4:]) + f" ({fw.releases}): add {entry}"
                if paired else
                f"`invoke update` imports Huawei's {fw.package} and CANN releases into {self.files.imported.name}; "
                f"then add {entry}")
        return (f"unknown {fw.title} stack {key!r}; {self.path} defines: {', '.join(defined) or 'none'}. "
                f"To add a line: {hint}")

    def release_of(self, st: Stack) -> PackageRelease | None:
        """The imported record of the stack's framework package release."""
        return self.releases.get(st.framework.name, {}).get(st.package)

    def pairing(self, st: Stack) -> tuple[str, str] | None:
        """How the stack's release goes with its CANN: ("published", why) when it was made
        for that CANN, ("compatible", why) when Huawei's grid of TorchNPU series x CANN
        series says they work together; None when neither."""
        if not st.framework.paired:
            return "published", f"CANN {st.cann} alone: no framework release to pair with it"
        rel = self.release_of(st)
        if rel is None:
            return None
        what = f"{st.framework.package_title} {st.package}"
        if st.cann in rel.cann:
            return "published", f"{what} was released for CANN {st.cann}"
        grid = self.compatible.get(rel.series, ())
        if rel.series and cann_series(st.cann) in grid:
            published = ", ".join(rel.cann) or "none"
            return "compatible", (f"{what} (TorchNPU {rel.torchnpu}, released for CANN {published}) "
                                  f"works with CANN {cann_series(st.cann)}.x by Huawei's compatibility grid")
        return None

    def nnal(self, st: Stack, cann: CannRelease, arch: str) -> CannFile | None:
        """The NNAL installer an image of this stack gets: on by default where the CANN
        release publishes NNAL and the framework loads it (its nnal_from: torch_npu's ATB
        plugin from 2.5.1); `nnal: false` turns it off."""
        if st.nnal is False or arch not in cann.nnal:
            return None
        since = st.framework.nnal_from
        if st.nnal is None and since and Version(Version(st.package).base_version) < Version(since):
            return None
        return cann.nnal[arch]

    def torchnpu_of(self, st: Stack) -> str | None:
        """The TorchNPU release (26.1.0, ...) the stack's release belongs to, where the data names it."""
        rel = self.release_of(st)
        return rel.torchnpu if rel and rel.torchnpu else None

    def allows(self, st: Stack, os: OSBase) -> bool:
        """A (stack, OS) the matrix allows, so a Dockerfile is rendered for it: every OS, but
        one below torch_atb's glibc floor for a stack that asks for torch_atb, and for a stack
        derived from the import the OSes of derived_oses."""
        if st.derived and os.name not in self.derived_oses(st):
            return False
        if not st.torch_atb:
            return True
        try:
            torch_atb_fits(self, st, self.cann[st.cann], os, None)
        except UserError:
            return False
        return True

    def official_oses(self, st: Stack) -> tuple[str, ...]:
        """The OSes a derived stack is derived from: those of the images it is derived from (a
        vLLM-Ascend release's), else those CANN st.cann's official images publish."""
        return st.oses or tuple(sorted({t.os for t in self.cann[st.cann].images}))

    def derived_oses(self, st: Stack) -> tuple[str, ...]:
        """The OSes a stack derived from the import is built on: those its release's official
        images publish (the matrix's default OS where there are none), and every Debian release
        debootstrap makes, which a site that reaches no registry builds on."""
        official = [o for o in self.official_oses(st) if o in self.os] or [self.defaults.os]
        return tuple(dict.fromkeys([*official, *(o.name for o in self.os.values() if o.suite)]))

    def _official_os(self, st: Stack) -> str:
        """A derived stack's OS when none is asked for: the matrix's default OS where the stack is
        built on it, else the one most of the images it is derived from are on."""
        allowed = self.derived_oses(st)
        if self.defaults.os in allowed:
            return self.defaults.os
        if st.oses:
            return st.oses[0]
        counts = Counter(t.os for t in self.cann[st.cann].images if t.os in allowed)
        return counts.most_common(1)[0][0] if counts else allowed[0]

    def debootstrap_suite(self, image: str) -> str | None:
        """The Debian suite that makes `image` without a registry, if the matrix names one."""
        return next((o.suite for o in self.os.values() if o.image == image and o.suite), None)

    def offline_os(self, stack: Stack) -> OSBase | None:
        """The OS whose base debootstrap can make for this stack, its distro Python first
        (nothing compiled), for when the stack's base image cannot be pulled."""
        debian = [o for o in self.os.values() if o.suite]
        return next((o for o in debian if o.python in stack.pythons()), debian[0] if debian else None)

    def platform(self, name: str | None) -> Platform:
        return get_platform(name or self.defaults.platform)

    # ------------------------------------------------------------ builders
    def builder_cell(self, stack: Stack | str | None = None, flavor: str | None = None, python: str | None = None,
                     platform: str | None = None) -> BuilderCell:
        st = self._record(stack)
        if st.torch is None:
            builds = [n for n, x in self.stacks.items() if x.framework.has_builder]
            has = "take the released wheel" if st.framework.layers else "have no framework"
            raise UserError(f"stack {st.name} is {st.title}: its images {has}, so it has no builder; builders are "
                            f"for what torch stacks compile (torch_npu and apex: --torch, one of: {', '.join(builds)})")
        b = self._flavor(st, flavor or st.torch.builder)
        usable = [p for p in b.pythons if p in st.pythons()]
        if python:
            if python not in usable:
                raise UserError(f"python {python} is not available in builder {b.name} for torch stack {st.name}; "
                                f"choose one of: {', '.join(usable) or 'none'}")
            usable = [python]
        if not usable:
            raise UserError(f"builder {b.name} has no Python in torch stack {st.name}'s range "
                            f"{st.python_min}-{st.python_max}")
        return BuilderCell(st, st.torch, b, tuple(usable), self.platform(platform))

    def _flavor(self, st: Stack, flavor: str) -> Builder:
        assert st.torch is not None
        gcc = st.torch.gcc
        if flavor not in self.builders:
            raise UserError(f"unknown builder flavor {flavor!r}; {self.path} defines: {', '.join(self.builders)}")
        b = self.builders[flavor]
        if b.cann_from and cann_key(st.cann) < cann_key(b.cann_from):
            raise UserError(f"builder {flavor} is for the lines on CANN {b.cann_from} and later; torch stack "
                            f"{st.name} is on CANN {st.cann}: use --flavor "
                            f"{', '.join(n for n, x in self.builders.items() if x.serves(st)) or st.torch.builder}")
        if not b.offers(gcc):
            raise UserError(f"builder {flavor} has gcc {b.gcc_text()} but torch stack {st.name} needs gcc {gcc} "
                            f"(stacks.{st.name}.gcc); builders with gcc {gcc}: "
                            f"{', '.join(n for n, x in self.builders.items() if x.offers(gcc)) or 'none'}")
        return b

    # ------------------------------------------------------------ images
    def cell(self, stack: Stack | str | None = None, os: str | None = None, python: str | None = None,
             chip: str | None = None, platform: str | None = None, torch_atb: bool = False,
             run_as: str | None = None, no_nnal: bool = False) -> Cell:
        """One image, every choice made. `stack`: the record a task resolved from its options,
        or a name as the data spell it (None: the default line); `torch_atb` asks for NNAL's
        Python plugin as well (`invoke build --torch-atb`), as the stack's `torch_atb: true`
        does; `run_as`: who its containers run as (default: the matrix's defaults.run_as). The
        cell carries the alias `images:` gives this very image."""
        run_as = parse_run_as(run_as or self.defaults.run_as)
        held = st = self._record(stack)
        if torch_atb and st.torch is None:
            raise UserError(f"--torch-atb: torch_atb is NNAL's plugin for torch, and stack {st.name} is {st.title}, "
                            f"which has no torch; build a torch stack with it (--torch)")
        if torch_atb and not st.torch_atb:
            st = dataclasses.replace(st, torch_atb=True)
        asked = st
        if no_nnal:         # `invoke build --no-nnal`: the line without its third CANN file
            if st.torch_atb:
                raise UserError(f"--no-nnal: torch_atb is NNAL's Python plugin, and stack {st.name} asks for it "
                                f"({'--torch-atb' if torch_atb else 'torch_atb: true'}); build with NNAL, or a "
                                f"stack without torch_atb")
            st = dataclasses.replace(st, nnal=False)
        if os is None and st.derived and self.defaults.os not in self.derived_oses(st):
            os = self._official_os(st)
        base = self._os(os)
        if not self.allows(st, base) and st.derived:
            official = self.official_oses(st)
            origin = "vLLM-Ascend's images" if st.oses else f"CANN {st.cann}'s official images"
            made = (f"on the OSes {origin} publish ({', '.join(official)})" if official
                    else f"on the matrix's default OS ({self.defaults.os}: CANN {st.cann} has no official image)")
            raise UserError(f"stack {st.name} is derived from the import, built {made} and on the Debian releases "
                            f"debootstrap makes ({', '.join(o.name for o in self.os.values() if o.suite)}); not "
                            f"on {base.name}: pass --os {self._official_os(st)}, or write a "
                            f"`{st.framework.section}:` entry keyed {st.key} (docs/matrix.md) to build it on other OSes")
        python = python or st.python_for(base)
        source = self._python_source(st, base, python)
        target = self.platform(platform)
        cann = self.cann[st.cann]
        chip = chip or self.defaults.chip
        # Upstream's tags spell chips in lower case (a3); the matrix as Huawei's files do (A3).
        chip = spelling(chip)
        kernels = self._kernels(st, cann, chip, target)
        nnal = self.nnal(st, cann, target.arch)
        if no_nnal and self.nnal(asked, cann, target.arch) is None:
            raise UserError(f"--no-nnal: stack {st.name} installs no NNAL on {target.arch} (CANN {cann.version}"
                            f"{' publishes none there' if target.arch not in cann.nnal else ''}): leave the option out")
        if st.torch_atb:
            self._torch_atb(st, cann, base, python, nnal, target)
        kind = (self.pairing(st) or ("published", ""))[0]
        return Cell(stack=st, os=base, python=python, python_source=source, chip=chip, target=target, cann=cann,
                    toolkit=cann.toolkit[target.arch], kernels=kernels,
                    pins=tuple(f"{name}{spec}" for name, spec in sorted(st.pins.items())), matrix_stack=held,
                    alias=self._alias(st, base, python, chip, target), nnal=nnal, pairing=kind, run_as=run_as,
                    nnal_left_out=no_nnal)

    def _os(self, os: str | None) -> OSBase:
        os = os or self.defaults.os
        if os not in self.os:
            raise UserError(f"unknown os {os!r}; {self.path} defines: {', '.join(self.os)}")
        return self.os[os]

    def _python_source(self, st: Stack, base: OSBase, python: str) -> PythonSource | None:
        if python not in st.pythons():
            raise UserError(f"python {python} is outside {st.framework.name} stack {st.release}'s range "
                            f"{st.python_min}-{st.python_max} ({st.python_path}); choose one of: "
                            f"{', '.join(st.pythons())}")
        if python == base.python:
            return None
        if python not in self.pythons:
            raise UserError(f"python {python} is not {base.name}'s python3 ({base.python}) and pythons.{python!r} "
                            f"in {self.path} has no source tarball; add one, or choose python {base.python}")
        return self.pythons[python]

    def _kernels(self, st: Stack, cann: CannRelease, chip: str, target: Platform) -> CannFile:
        if chip not in cann.kernels:
            # the image's own framework first (a CANN-only ask: the CANN-only lines, derived ones too)
            lines = sorted([*self.stacks.values(), *self.derived.values()],
                           key=lambda s: (s.framework is not st.framework, cann_key(s.cann)))
            having = [s.flag for s in lines if chip in self.cann[s.cann].kernels]
            raise UserError(f"CANN {cann.version} has no kernels for chip {chip!r} "
                            f"(cann.{cann.version}.kernels); chips with kernels: {', '.join(cann.kernels)}"
                            + (f". Stacks on a CANN with {chip} kernels: {', '.join(having)}" if having else ""))
        if target.arch not in cann.kernels[chip]:
            fits = next(p for p in PLATFORMS.values() if p.arch in cann.kernels[chip])
            raise UserError(f"CANN {cann.version}'s {chip} kernels are published for "
                            f"{', '.join(cann.kernels[chip])} only, not {target.arch}: build --platform {fits}")
        self.check_chip(st, chip)
        return cann.kernels[chip][target.arch]

    def _torch_atb(self, st: Stack, cann: CannRelease, base: OSBase, python: str, nnal: CannFile | None,
                   target: Platform) -> None:
        if nnal is None:
            with_nnal = [n for n, s in self.stacks.items() if s.torch and self.nnal(s, self.cann[s.cann], "aarch64")]
            raise UserError(f"--torch-atb: torch_atb comes with NNAL, which stack {st.name} has no NNAL for on "
                            f"{target.arch} (CANN {cann.version}"
                            + (", nnal: false" if st.nnal is False else "" if cann.nnal else ": none published")
                            + f"); stacks with NNAL: {', '.join(with_nnal) or 'none'}")
        torch_atb_fits(self, st, cann, base, python)

    def _alias(self, st: Stack, base: OSBase, python: str, chip: str, target: Platform) -> str | None:
        """The alias `images:` gives this image: its entry's, on the default OS only."""
        if base.name != self.defaults.os:
            return None
        return next((spec.alias for spec in self.images if spec.alias and spec.stack == st.name
                     and base.name in spec.os and target.docker in spec.platforms
                     and (spec.python or st.python_for(base)) == python and (spec.chip or self.defaults.chip) == chip),
                    None)

    def apex_builds(self, cell: Cell) -> bool:
        """Whether Ascend apex compiles for the cell: its framework has apex, and the pinned
        apex's build script takes the cell's Python (sources.apex.pythons)."""
        return "apex" in cell.stack.framework.builds and self.sources["apex"].builds_for(cell.python)

    def chips(self, st: Stack) -> list[str]:
        """The chips images of this stack can be built for: its CANN's operator packages,
        less those whose images need a newer torch_npu (chip_support:)."""
        def fits(chip: str) -> bool:
            try:
                self.check_chip(st, chip)
            except UserError:
                return False
            return True
        return [chip for chip in self.cann[st.cann].kernels if fits(chip)]

    def check_chip(self, st: Stack, chip: str) -> None:
        """A chip whose images need a torch_npu made for it (chip_support:): the stack's
        TorchNPU release must be that one or newer."""
        need = self.chip_support.get(chip)
        if need is None or not st.framework.paired:     # CANN only needs CANN's operator package alone
            return
        have = self.torchnpu_of(st)
        if have and Version(have) >= Version(need.torchnpu_from):
            return
        fits = [s.flag for s in self.stacks.values() if chip in self.cann[s.cann].kernels
                and (t := self.torchnpu_of(s)) and Version(t) >= Version(need.torchnpu_from)]
        what = f"TorchNPU {have}" if have else f"{st.title} (no TorchNPU release)"
        raise UserError(f"chip {chip}: its images need TorchNPU {need.torchnpu_from} or newer (chip_support.{chip}: "
                        f"{need.source}); stack {st.name} is {what}. Stacks for {chip}: {', '.join(fits) or 'none'}")

    def image_cells(self, run_as: str | None = None) -> list[Cell]:
        """Every cell the `images:` list asks for (the CI matrix), with its user layers."""
        return [dataclasses.replace(self.cell(spec.stack, os, spec.python, spec.chip, platform, run_as=run_as),
                                    layers=spec.layers)
                for spec in self.images for os in spec.os for platform in spec.platforms]


def torch_atb_fits(m: Matrix, st: Stack, cann: CannRelease, os: OSBase, python: str | None) -> None:
    """torch_atb (NNAL's Python plugin) against the image: its glibc floor from CANN 9.1 and
    its Pythons, refused before any build, naming what was found and what would fit. NNAL
    itself (glibc 2.17) is not what is checked: it installs on every OS here."""
    atb = m.torch_atb
    if atb is None:
        raise UserError(f"stack {st.name} asks for torch_atb, but {m.path} has no torch_atb: section (its "
                        f"Pythons and glibc floor)")
    floor = atb.floor(cann.version)
    if floor and os.glibc and Version(os.glibc) < Version(floor):
        fits = [f"{o.name} ({o.glibc})" for o in m.os.values() if o.glibc and Version(o.glibc) >= Version(floor)]
        raise UserError(f"torch_atb (NNAL's Python plugin, --torch-atb) needs glibc {floor} or newer from CANN "
                        f"{cann_series(cann.version)} ({atb.source}); {os.name} has glibc {os.glibc}. OSes that fit: "
                        f"{', '.join(fits) or 'none in the matrix'}; or build without torch_atb: NNAL itself needs "
                        f"glibc 2.17 and is in the {os.name} image without it")
    if python and python not in atb.pythons:
        fits = [p for p in atb.pythons if p in st.pythons()]
        raise UserError(f"torch_atb (NNAL's Python plugin, --torch-atb) is built for Python {', '.join(atb.pythons)} "
                        f"only ({atb.source}); this image's Python is {python}. Choose "
                        + (f"--python {' or '.join(fits)}" if fits else "another stack") + ", or build without torch_atb")
