"""What the schema cannot see: file names per CANN era, references between sections and
between the two files, pairings, Python ranges against the published wheels, pins
against CANN's limits. Every problem names its key, the bad value and what would work."""
from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..errors import UserError
from ..platforms import ARCHES, PLATFORMS
from .checker import Checkers
from .eras import NNAL, expected_kernels, expected_toolkit
from .model import Matrix, torch_atb_fits
from .records import PackageRelease, Stack, minor


def check(m: Matrix, c: Checkers) -> None:
    _check_cann(m, c)
    seen: dict[tuple[str, str, str, str], str] = {}
    for st in m.stacks.values():
        _check_stack(m, c, st)
        # An image's name says its release, CANN and (for a variant) its package: two stacks
        # alike in all of them would share tags.
        other = seen.setdefault((st.framework.name, st.release, st.cann, st.variant_suffix), st.name)
        if other != st.name:
            c.fail(st.cann_path,
                   f"stacks {other} and {st.name} both put {st.framework.package_title} {st.package} on CANN "
                   f"{st.cann}; their images would carry one name: keep one of them")
    _check_defaults(m, c)
    _check_images(m, c)


def _check_cann(m: Matrix, c: Checkers) -> None:
    for ver, rel in m.cann.items():
        for arch in ARCHES:
            want = expected_toolkit(ver, arch)
            if rel.toolkit[arch].file != want:
                c.fail(rel.toolkit[arch].key + ("file",),
                       f"got {rel.toolkit[arch].file!r}; CANN {ver} names its toolkit {want!r}")
        for chip, per in rel.kernels.items():
            for arch, f in per.items():
                want = expected_kernels(ver, chip, arch)
                if f.file != want:
                    c.fail(f.key + ("file",), f"got {f.file!r}; CANN {ver} names its {chip} kernels {want!r}")
        for arch, f in rel.nnal.items():
            want = NNAL.format(v=ver, arch=arch)
            if f.file != want:
                c.fail(f.key + ("file",), f"got {f.file!r}; CANN {ver} names its NNAL {want!r}")
        for at, tag in enumerate(rel.images):
            if tag.cann.upper() != ver.upper() or tag.devel:
                c.fail(("cann", ver, "images", at), f"got {str(tag)!r}; expected a released (not -devel) image "
                                                    f"tag of CANN {ver}, like {ver.lower()}-910b-ubuntu22.04-py3.11")
        twins = {str(tag) for tag in rel.images}
        for at, tag in enumerate(rel.devel_images):
            if not tag.devel or str(tag).removesuffix("-devel") not in twins:
                c.fail(("cann", ver, "devel_images", at), f"got {str(tag)!r}; expected the -devel twin of one of "
                                                          f"CANN {ver}'s images (cann.{ver}.images)")


def _check_stack(m: Matrix, c: Checkers, st: Stack) -> None:
    path = (st.framework.section, st.key)
    if st.cann not in m.cann:
        c.fail(st.cann_path, f"got {st.cann!r}; CANN releases defined under cann: {', '.join(m.cann)}")
    rel = m.release_of(st)
    if rel is None and st.framework.paired:       # CANN only: no package of its own to pair
        _unknown_release(m, c, st)
    elif rel is not None:
        _check_pairing(m, c, st, rel)
        _check_wheels(c, st, rel)
    if st.torch is not None:
        _check_torch(m, c, st, rel)
    lo, hi, default = minor(st.python_min), minor(st.python_max), minor(st.python_default)
    if lo > hi:
        c.fail(path + ("python", "min"), f"min {st.python_min} is above max {st.python_max}")
    elif not lo <= default <= hi:
        c.fail(path + ("python", "default"), f"got {st.python_default!r}; expected a version from "
               f"{st.python_min} to {st.python_max}")
    _check_numpy(m, c, st)
    _check_nnal(m, c, st)


def _unknown_release(m: Matrix, c: Checkers, st: Stack) -> None:
    fw = st.framework
    known = [r for r in m.releases.get(fw.name, {}) if r.startswith(st.release)]
    c.fail(st.package_path, f"got {st.package!r}, which {fw.releases} does not list; known releases for "
           f"{fw.title} {st.release}: {', '.join(known) or 'none'}; `invoke update` imports Huawei's")


def _check_pairing(m: Matrix, c: Checkers, st: Stack, rel: PackageRelease) -> None:
    if m.pairing(st) is not None:
        return
    fw = st.framework
    releases = m.releases[fw.name]
    fits = [r for r, v in releases.items() if st.cann in v.cann and r.startswith(st.release)]
    other = f", or {fw.package}: {fits[0]} for CANN {st.cann}" if fits else ""
    grid = list(m.compatible.get(rel.series, ()))
    what = f"{fw.package_title} {st.package}"
    if not rel.cann and not grid:
        paired = [r for r, v in releases.items() if v.cann]
        line = [r for r in paired if r.startswith(st.release)] or paired
        c.fail(st.package_path, f"{what} is unpaired: no CANN release is published for it ({fw.releases}."
               f"{st.package}.cann is empty) and no compatibility grid names its release; choose a paired release: "
               f"{', '.join(line) or 'none'}{other}")
        return
    works = f"; by Huawei's grid TorchNPU {rel.series}.x works with CANN {', '.join(x + '.x' for x in grid)}" \
        if grid else ""
    c.fail(st.cann_path, f"{what} was released for CANN {', '.join(rel.cann) or 'none'}, not "
           f"{st.cann}{works}; use cann: {(list(rel.cann) or [grid[-1] + '.0'])[0]}{other}")


def _check_wheels(c: Checkers, st: Stack, rel: PackageRelease) -> None:
    """The stack's Python range must be one the release has wheels for, on every arch
    checked: in Huawei's list (with sha256) or among PyPI's files."""
    for arch in rel.checked_arches():
        listed = rel.pythons(arch)
        missing = [p for p in st.pythons() if p not in listed]
        if missing:
            c.fail((st.framework.section, st.key, "python"),
                   f"{st.framework.package_title} {st.package} has no {arch} wheel for Python {', '.join(missing)} "
                   f"({st.framework.releases} lists {', '.join(sorted(listed, key=minor)) or 'none'}, Huawei's list "
                   f"and PyPI's files); narrow the range")


def _check_torch(m: Matrix, c: Checkers, st: Stack, rel: PackageRelease | None) -> None:
    """What only a torch stack has: torch_npu on PyPI or not, the line it belongs to, its builder."""
    assert st.torch is not None
    path = (st.framework.section, st.key)
    if rel is not None and st.torch.npu_on_pypi and not rel.on_pypi:
        on_pypi = [r for r, v in m.releases["torch"].items() if r.startswith(st.release) and v.on_pypi and v.cann]
        c.fail(path + ("torch_npu",), f"torch_npu {st.package} is not on PyPI (Huawei's mirror only); "
               f"choose one that is ({', '.join(on_pypi) or 'none for this torch'}), or set "
               f"torch_npu_on_pypi: false and pass the wheel with --wheelhouse")
    if not st.package.startswith(st.release):
        c.fail(path + ("torch_npu",), f"torch_npu {st.package} does not belong to torch {st.release}; "
               f"expected a version starting with {st.release}")
    if st.torch.builder:
        b = m.builders.get(st.torch.builder)
        if b is None:
            c.fail(path + ("builder",), f"got {st.torch.builder!r}; builders defined: {', '.join(m.builders)}")
        elif not b.offers(st.torch.gcc):
            fits = [n for n, x in m.builders.items() if x.offers(st.torch.gcc)]
            c.fail(path + ("builder",), f"builder {st.torch.builder} has gcc {b.gcc_text()}, but this stack needs gcc "
                   f"{st.torch.gcc}; builders with gcc {st.torch.gcc}: {', '.join(fits) or 'none'}")


def _check_numpy(m: Matrix, c: Checkers, st: Stack) -> None:
    cann = m.cann.get(st.cann)
    if not cann or not cann.numpy:
        return
    path = (st.framework.section, st.key)
    numpy = st.pins.get("numpy")
    if numpy is None:
        if not st.framework.layers:     # CANN's own layer, the image's only one, bounds numpy itself
            return
        c.fail(path + ("pins",), f"CANN {st.cann} needs numpy{cann.numpy}; add numpy: \"{cann.numpy}\" to the pins")
    elif _allows_outside(numpy, cann.numpy):
        c.fail(path + ("pins", "numpy"), f"got {numpy!r}, which admits numpy versions CANN {st.cann} "
               f"breaks with; it needs numpy{cann.numpy}")


def _check_nnal(m: Matrix, c: Checkers, st: Stack) -> None:
    cann = m.cann.get(st.cann)
    if not cann:
        return
    path = (st.framework.section, st.key)
    if st.nnal and not cann.nnal:
        c.fail(path + ("nnal",), f"CANN {st.cann} publishes no NNAL package (cann.{st.cann}.nnal is missing); drop "
               f"`nnal: true` or choose a CANN release that has one: "
               f"{', '.join(v for v, r in m.cann.items() if r.nnal) or 'none'}")
    unnamed = [a for a in ARCHES if m.nnal(st, cann, a) is not None and a not in st.cxx11_abi]
    if unnamed:
        c.fail(path + ("cxx11_abi",), f"NNAL is installed for CANN {st.cann}: name the C++ ABI {st.framework.title} "
               f"{st.release} is built with on {', '.join(unnamed)} ({st.framework.title}'s wheels; NNAL's cxx_abi_N "
               f"tree must match), e.g. cxx11_abi: {{{unnamed[0]}: true}}; or turn NNAL off with nnal: false")
    if st.torch_atb and m.nnal(st, cann, "aarch64") is None:
        c.fail(path + ("torch_atb",), f"torch_atb comes with NNAL, which this stack does not install (CANN {st.cann}"
               + (", nnal: false" if st.nnal is False else "") + "); drop torch_atb: true")


def _check_defaults(m: Matrix, c: Checkers) -> None:
    d = m.defaults
    if d.stack not in m.stacks:
        c.fail(("defaults", "torch"), f"got {d.stack!r}; defined: {', '.join(m.stacks)}")
    if d.os not in m.os:
        c.fail(("defaults", "os"), f"got {d.os!r}; defined: {', '.join(m.os)}")
    if d.stack in m.stacks and m.stacks[d.stack].cann in m.cann:
        chips = m.cann[m.stacks[d.stack].cann].kernels
        if d.chip not in chips:
            c.fail(("defaults", "chip"), f"got {d.chip!r}; the default stack's CANN has kernels for: "
                   f"{', '.join(chips)}")


def _check_images(m: Matrix, c: Checkers) -> None:
    for i, img in enumerate(m.images):
        path = ("images", i)
        st = m.stacks.get(img.stack)
        if st is None:
            c.fail(path + ("stack",), f"got {img.stack!r}; stacks defined: {', '.join(m.stacks)}")
            continue
        for j, os in enumerate(img.os):
            if os not in m.os:
                c.fail(path + ("os", j), f"got {os!r}; os defined: {', '.join(m.os)}")
            else:
                _check_image_os(m, c, path, st, img.python, j, os)
        _check_image_chip(m, c, path, st, img.chip or m.defaults.chip, img.platforms)


def _check_image_os(m: Matrix, c: Checkers, path: tuple, st: Stack, asked: str | None, j: int, os: str) -> None:
    python = asked or st.python_for(m.os[os])
    if python not in st.pythons():
        c.fail(path + ("python",), f"got {python!r}; stack {st.name} supports {st.python_min} to {st.python_max}")
    elif python != m.os[os].python and python not in m.pythons:
        c.fail(path + ("python",), f"python {python} is not {os}'s python3 ({m.os[os].python}) and "
               f"pythons has no source tarball for it; add pythons.\"{python}\"")
    cann = m.cann.get(st.cann)
    if cann and st.torch_atb:
        try:
            torch_atb_fits(m, st, cann, m.os[os], python)
        except UserError as exc:
            c.fail(path + ("os", j), str(exc))


def _check_image_chip(m: Matrix, c: Checkers, path: tuple, st: Stack, chip: str, platforms: tuple[str, ...]) -> None:
    cann = m.cann.get(st.cann)
    if not cann:
        return
    if chip not in cann.kernels:
        c.fail(path + ("chip",), f"got {chip!r}; CANN {cann.version} has kernels for: {', '.join(cann.kernels)}")
        return
    try:
        m.check_chip(st, chip)
    except UserError as exc:
        c.fail(path + ("chip",), str(exc))
    for k, platform in enumerate(platforms):
        if PLATFORMS[platform].arch not in cann.kernels[chip]:
            c.fail(path + ("platforms", k), f"got {platform}; CANN {cann.version}'s {chip} kernels are "
                   f"published for {', '.join(cann.kernels[chip])} only")


def _allows_outside(spec: str, required: str) -> bool:
    """True when `spec` admits a numpy release that `required` refuses (probe releases)."""
    probes = ["1.19.5", "1.21.6", "1.23.5", "1.24.4", "1.26.4", "2.0.0", "2.1.3", "2.2.6", "3.0.0"]
    allowed, needed = SpecifierSet(spec), SpecifierSet(required)
    return any(Version(p) in allowed and Version(p) not in needed for p in probes)
