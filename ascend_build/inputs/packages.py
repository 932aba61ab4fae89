"""CANN packages: find them in a package directory or the cache, else download them
from the matrix URL; check sha256; write pins into matrix.yaml (cann_pins for imported files)."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from .. import atomic, console
from ..chips import known
from ..errors import PackageError, PackageMissing, PackageUnreachable, UserError
from ..hashing import CHUNK, kind_of, open_regular, sha256_of
from ..matrix import CannFile, Matrix, load_matrix
from ..platforms import of_arch
from . import makeself


def default_cache() -> Path:
    base = os.environ.get("ASCEND_BUILD_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ascend-build")
    return Path(base)


@dataclass(frozen=True)
class Located:
    file: CannFile
    path: Path
    sha256: str
    pinned: bool


Fetch = Callable[[str, Path], None]


def _urllib_fetch(url: str, dest: Path) -> None:
    with urllib.request.urlopen(url, timeout=60) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out, CHUNK)


def _regular_or_absent(path: Path) -> None:
    """A package file where one is looked for is a regular file (a link to one is followed:
    its sum or its header is checked all the same), or nothing: a FIFO, a device or a
    folder of its name is refused, never read (a FIFO would hang the check)."""
    what = kind_of(path)
    # (nothing there is fine, also when a concurrent download put the file there meanwhile)
    if what and not what.startswith("nothing") and os.path.lexists(path):
        raise PackageError(f"{path}: {what}, not a file; a CANN package is a regular file")


class PackageStore:
    """Looks packages up in `dirs` (user-supplied, read-only), then in `cache`
    (downloads land there, atomically)."""

    def __init__(self, dirs: Iterable[Path], cache: Path, download: bool = True, fetch: Fetch = _urllib_fetch,
                 keep: bool = False):
        # Absolute from the start: the installer's own --check runs in another folder, and
        # a relative ./packages would name nothing there.
        self.dirs = [Path(d).absolute() for d in dirs]
        self.cache = Path(cache).absolute()
        self.download = download
        self.fetch = fetch
        self.keep = keep            # a .run found in a given folder is kept in the cache (by its sum)
        self._checked: set[Path] = set()

    def locate(self, f: CannFile, require_pin: bool = False) -> Located:
        """The .run installer: as a bare .run (checked against its pin), or taken out of
        the .zip Huawei publishes (checked against Huawei's sum), or downloaded."""
        if require_pin and not f.sha256 and not f.zip_sha256:
            raise PackageError(f"{f.file} has no sha256 in matrix.yaml ({f.pin_path}) and --require-pins "
                               f"is set; put it in a folder and pin it with `invoke pin --packages DIR`")
        for folder in self.dirs + [self.cache / "cann"] + self._kept(f):
            candidate = folder / f.file
            _regular_or_absent(candidate)
            if candidate.is_file():
                if require_pin and not f.sha256:
                    raise PackageError(f"{candidate}: a bare .run with no sha256 in matrix.yaml ({f.pin_path}), "
                                       f"and --require-pins is set; use Huawei's {f.zip} (its sum is in the matrix), "
                                       f"or pin this file with `invoke pin --packages {candidate.parent}`")
                found = self._verified(f, candidate)
                if self.keep and folder in self.dirs:
                    self._keep(found)
                return found
        if f.zip_sha256:
            unpacked = self._unpacked(f)
            if unpacked:
                return unpacked
            for folder in self.dirs + [self.cache / "cann"]:
                _regular_or_absent(folder / f.zip)
                if (folder / f.zip).is_file():
                    return self._from_zip(f, folder / f.zip)
        if not self.download:
            raise self._missing(f, "downloads are off (--offline)")
        if f.zip_sha256:
            return self._from_zip(f, self._download(f, zipped=True))
        return self._download(f)

    # A .run a build was given (--packages) is kept under its sum, so that `invoke verify` and a
    # rebuild find it without the option: a hard link where the folders share a file system,
    # else a copy (once per file: a kept file is not copied again).
    def _kept_dir(self, digest: str) -> Path:
        return self.cache / "cann" / "kept" / digest[:24]

    def _kept(self, f: CannFile) -> list[Path]:
        """The kept folders holding this name: the pinned sum's, else every one, newest first."""
        if f.sha256:
            return [self._kept_dir(f.sha256)]
        found = [p.parent for p in (self.cache / "cann" / "kept").glob(f"*/{f.file}") if p.is_file()]
        return sorted(found, key=lambda d: (d / f.file).stat().st_mtime, reverse=True)

    def _keep(self, found: Located) -> None:
        folder = self._kept_dir(found.sha256)
        target = folder / found.path.name
        if target.is_file():
            return
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{found.path.name}.{os.getpid()}.part"
        try:
            try:
                os.link(found.path, tmp)
            except OSError:
                shutil.copy2(found.path, tmp)
            if sha256_of(tmp) != found.sha256:     # changed while being kept: keep nothing
                return
            os.replace(tmp, target)
            console.say(f"{found.path.name}: kept in {folder} (verify and rebuilds find it without --packages)")
        except OSError as exc:
            console.warn(f"{found.path.name}: could not keep a copy in {folder} ({exc}); a rebuild will need "
                         f"--packages again")
        finally:
            tmp.unlink(missing_ok=True)

    def _zip_dir(self, f: CannFile) -> Path:
        # One folder per published .zip (by its sum): the .run taken out of it, and its sum.
        assert f.zip_sha256, f"{f.file}: no published .zip sum"     # the callers read the .zip only then
        return self.cache / "cann" / "from-zip" / f.zip_sha256[:24]

    def _unpacked(self, f: CannFile) -> Located | None:
        """The .run from an earlier verified .zip, if its bytes are still the ones taken out."""
        folder = self._zip_dir(f)
        run, recorded = folder / f.file, folder / (f.file + ".sha256")
        if not (run.is_file() and recorded.is_file()):
            return None
        if sha256_of(run) != recorded.read_text().strip():
            return None                 # changed since: take it out of the .zip again
        return self._verified(f, run, from_zip=True)

    def _from_zip(self, f: CannFile, zipped: Path) -> Located:
        """Check the .zip against Huawei's published sum, then take the .run out of it
        (on the host, beside the cache: the build bind-mounts the .run as before, so no
        byte of either lands in a layer, and the payload checks read it first)."""
        actual = sha256_of(zipped)
        if actual != f.zip_sha256:
            raise PackageError(f"{zipped}: sha256 mismatch for {f.zip}\n  expected {f.zip_sha256} (Huawei's published "
                               f"sum, imported.yaml {f.zip_path})\n  actual   {actual}\n"
                               f"The file is corrupt or not the release the matrix names; fetch it again from {f.zip_url}")
        try:
            with zipfile.ZipFile(zipped) as archive:
                members = [m for m in archive.namelist() if m.endswith(".run")]
                member = next((m for m in members if Path(m).name == f.file), None)
                if member is None:
                    raise PackageError(f"{zipped} holds no {f.file} (it holds: {', '.join(archive.namelist()) or 'nothing'})")
                folder = self._zip_dir(f)
                folder.mkdir(parents=True, exist_ok=True)
                fd, tmp_name = tempfile.mkstemp(prefix=f".{f.file}.", suffix=".part", dir=folder)
                with os.fdopen(fd, "wb") as out, archive.open(member) as src:
                    shutil.copyfileobj(src, out, CHUNK)
        except zipfile.BadZipFile as exc:
            raise PackageError(f"{zipped}: not a readable zip ({exc})") from None
        tmp = Path(tmp_name)
        try:
            tmp.chmod(0o755)
            digest = sha256_of(tmp)
            os.replace(tmp, folder / f.file)
            (folder / (f.file + ".sha256")).write_text(digest + "\n")
        finally:
            tmp.unlink(missing_ok=True)
        console.say(f"{f.zip}: sha256 matches Huawei's published sum; took {f.file} out of it")
        return self._verified(f, folder / f.file, from_zip=True)

    def _verified(self, f: CannFile, path: Path, from_zip: bool = False) -> Located:
        if path.stat().st_size == 0:
            raise PackageError(f"{path} is empty: a truncated download? Delete it and fetch {f.url} again")
        actual = sha256_of(path)
        if f.sha256 and actual != f.sha256:
            raise PackageError(f"{path}: sha256 mismatch for {f.file}\n  expected {f.sha256} (matrix.yaml "
                               f"{f.pin_path})\n  actual   {actual}\nThe file is corrupt or not the "
                               f"release the matrix pins; replace it, or re-pin deliberately with `invoke pin`.")
        with open(path, "rb") as fh:
            if fh.read(2) != b"#!":
                raise PackageError(f"{path} does not start with a shell header: not a CANN .run installer")
        if not f.sha256 and not from_zip:
            self._self_check(f, path)
        check_contents(f, path)
        return Located(f, path, actual, bool(f.sha256) or from_zip)

    def _self_check(self, f: CannFile, path: Path) -> None:
        """No pin to compare with: the payload checked against its own header's sizes and sums,
        read here (inputs/makeself.py), so a truncated or corrupt file is refused before any
        build. The installer's own `--check` is never run: it is the package's script."""
        if path in self._checked:
            return
        check_payload(f, path)
        self._checked.add(path)

    def _download(self, f: CannFile, zipped: bool = False):
        """The .run from its URL (a Located), or with `zipped` the published .zip (its path)."""
        name, url, expected = (f.zip, f.zip_url, f.zip_sha256) if zipped else (f.file, f.url, f.sha256)
        target = self.cache / "cann" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        # Download next to the target and rename: a concurrent or killed download
        # never leaves a partial file under the real name.
        fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=target.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            try:
                self.fetch(url, tmp)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                # No answer at all is the network (exit 8); an answer that is an error (404), or
                # a URL that is none, is a package missing from where the matrix says it is.
                silent = isinstance(exc, OSError) and not isinstance(exc, urllib.error.HTTPError)
                raise self._missing(f, f"download from {url} failed: {getattr(exc, 'reason', exc)}",
                                    PackageUnreachable if silent else PackageMissing) from None
            actual = sha256_of(tmp)
            if expected and actual != expected:
                raise PackageError(f"downloaded {url}: sha256 mismatch\n  expected {expected}\n  actual   {actual}\n"
                                   f"Nothing was kept. A proxy may have altered it, or the release was re-published.")
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return target if zipped else Located(f, target, actual, bool(f.sha256))

    def _near_misses(self, f: CannFile) -> list[str]:
        """Files of the same kind and release that are there: the wrong chip or arch."""
        version = f.key[1]
        stem = "Ascend-cann-toolkit_" if f.kind == "toolkit" else "Ascend-cann-kernels-"
        found = []
        for folder in self.dirs + [self.cache / "cann"]:
            if folder.is_dir():
                found += [p.name for p in folder.glob(f"{stem}*{version}*.run") if p.name != f.file]
        return sorted(set(found))

    def _missing(self, f: CannFile, why: str, kind: type[PackageMissing] = PackageMissing) -> PackageMissing:
        places = ", ".join(str(d) for d in self.dirs + [self.cache / "cann"])
        near = self._near_misses(f)
        stem = f.file.removesuffix(".run")
        hint = "".join(f"\n  present under another name (a second download? rename it to {f.file}): {n}"
                       if n.startswith(stem) else f"\n  present but not this one (another chip or arch?): {n}"
                       for n in near)
        if f.zip_sha256:        # what Huawei publishes, with the sum the matrix holds
            get = (f"Get {f.zip} from {f.zip_url} (Huawei publishes the .zip; imported.yaml holds its sha256, so "
                   f"it is checked as it is) and put it in one of those folders (or pass --packages DIR). A bare "
                   f"{f.file} works too; pin it with `invoke pin --packages DIR`.")
        else:
            get = (f"Get {f.file} from {f.url} (or the Ascend download site), put it in one of those folders "
                   f"(or pass --packages DIR), then pin it: `invoke pin --packages DIR`.")
        if f.kind == "nnal":
            get += " Or build the line without NNAL (ATB, SiP): --no-nnal."
        return kind(f"CANN {f.kind} package not found: {f.file}{hint}\n  looked in: {places}\n  {why}\n{get}")


def check_payload(f: CannFile, path: Path) -> None:
    """The payload checked against its header's sizes and sums (inputs/makeself.py), never
    run. A refusal says what to do instead: where the header cannot be checked, fetching the
    same .run again would not help, so it names the pin that takes Huawei's published sum
    (`invoke pin --file ... --sha256 ...`); where imported.yaml holds the sum of Huawei's
    .zip, that .zip and its URL."""
    header = makeself.read_header(path)
    if header is None or not (header.sha256 or header.md5):
        why = ("not a makeself installer this project can check without running it (no `skip` and `filesizes` in "
               "its header)" if header is None else "its header carries no SHA or MD5 of its payload")
        raise PackageError(f"{path}: {why}, so its bytes cannot be checked here.\n{_published_instead(f, path)}")
    try:
        makeself.verify(path)
    except PackageError as exc:
        again = (f"Use Huawei's {f.zip} in its place: get it from {f.zip_url} (imported.yaml holds its sha256, so "
                 f"it is checked as it is)." if f.zip_sha256 else f"Fetch it again from {f.url}.")
        raise PackageError(f"{exc}\n{again}") from None


def _published_instead(f: CannFile, path: Path) -> str:
    """What to do with an installer whose header cannot be checked: the pin command to paste,
    with this file's own path, and Huawei's .zip where the matrix holds its sum."""
    command = f"`invoke pin --file {shlex.quote(_shown(path))} --sha256 <the sum Huawei publishes>`"
    said = f"Pin the sha256 Huawei publishes for {f.file} (its download page lists it): {command}"
    if f.zip_sha256:
        said += (f".\nOr use Huawei's {f.zip} in its place, from {f.zip_url}: imported.yaml holds its sha256, so "
                 f"it is checked as it is")
    return said + "."


def _shown(path: Path) -> str:
    """A path as the user can paste it here: relative where it is below the current folder."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# ELF e_machine values of the two arches CANN ships for.
_ELF_MACHINES = {183: "aarch64", 62: "x86_64"}
_KERNEL_DIR = re.compile(r"/kernel/(ascend[0-9a-z_]+)/")


def chip_of_folder(folder: str) -> str:
    """The chip whose kernels a kernel folder holds, by its record (A3's is ascend910_93);
    for a folder no record names, its name after "ascend"."""
    found = next((c for c in known() if c.kernel_folder == folder), None)
    return found.name if found else folder.removeprefix("ascend")


@dataclass(frozen=True)
class Contents:
    """What a .run file's payload says about itself, read without installing it."""
    readable: bool
    arches: frozenset[str]      # of the host binaries (ELF files) in it
    chips: frozenset[str]       # from kernel folders (.../kernel/ascend<chip>/...), as the records name them


def read_contents(path: Path, enough_elves: int = 16) -> Contents:
    """Stream the gzip tar payload that follows the makeself header and read the ELF
    headers of the first binaries and the kernel folder names. A file of the right name
    may still carry the other arch (a mislabelled mirror, a renamed download): this
    catches it before a build, where the installer would fail minutes in."""
    header = makeself.read_header(path)
    with open(path, "rb") as fh:
        if header is not None:
            start = header.offset
        else:       # a header this project does not read: the first gzip magic after the text
            start = fh.read(8 << 20).find(b"\x1f\x8b\x08")
        if start < 0:
            return Contents(False, frozenset(), frozenset())
        fh.seek(start)
        arches, chips, elves = set(), set(), 0
        try:
            with tarfile.open(fileobj=fh, mode="r|gz") as tar:
                for member in tar:
                    found = _KERNEL_DIR.search("/" + member.name + "/")
                    if found:
                        chips.add(chip_of_folder(found.group(1)))
                    if elves < enough_elves and member.isfile() and member.size >= 20:
                        data = tar.extractfile(member)
                        magic = data.read(20) if data else b""
                        if magic[:4] == b"\x7fELF":
                            elves += 1
                            machine = (int.from_bytes(magic[18:20], "little") if magic[5] == 1
                                       else int.from_bytes(magic[18:20], "big"))
                            arches.add(_ELF_MACHINES.get(machine, "other"))
        except (tarfile.TarError, zlib.error, EOFError, OSError):
            return Contents(False, frozenset(arches), frozenset(chips))
    return Contents(True, frozenset(arches), frozenset(chips))


def check_contents(f: CannFile, path: Path) -> Contents:
    """Refuse a package whose payload is for another arch or chip than its name says."""
    facts = read_contents(path)
    if not facts.readable:
        console.say(f"note: {path.name}: payload is not a gzip tar after the header; its arch and chip were not "
                    f"read from its contents (the installer checks them when it runs)")
    # Kernels files up to 8.0.RC2 name no arch: one file serves both, so only named arches are held to.
    wrong_arch = facts.arches - {f.arch} if f.arch in f.file else set()
    if wrong_arch:
        raise PackageError(f"{path}: named for {f.arch} but its binaries are for {', '.join(sorted(wrong_arch))} "
                           f"(ELF headers in the payload). It would fail to install in a linux/"
                           f"{of_arch(f.arch).suffix} image; get the {f.arch} file from "
                           f"{f.url}")
    if f.chip and facts.chips and f.chip not in facts.chips:
        raise PackageError(f"{path}: named for chip {f.chip} but it carries kernels for "
                           f"{', '.join(sorted(facts.chips))} (kernel/ascend<chip>/ in the payload); "
                           f"get the {f.chip} kernels from {f.url}")
    return facts


def warn_unpinned(names: list[str]) -> None:
    for name in names:
        console.warn(f"{name} is not pinned by sha256 in matrix.yaml: its bytes are not verified. "
                     f"Run `invoke pin` (or build with --require-pins to refuse this).")


# ---------------------------------------------------------------------------- pinning

def known_files(matrix: Matrix) -> dict[str, list[CannFile]]:
    by_name: dict[str, list[CannFile]] = {}
    for rel in matrix.cann.values():
        for f in (list(rel.toolkit.values()) + [f for per in rel.kernels.values() for f in per.values()]
                  + list(rel.nnal.values())):
            by_name.setdefault(f.file, []).append(f)
    return by_name


def fetch_release(matrix: Matrix, version: str, dirs: list[Path], download: bool = True,
                  store: PackageStore | None = None) -> list[Path]:
    """Every file of one CANN release, from the package dirs, the cache or its URL.
    Pinned files are verified on the way; unpinned ones are taken as found (trust on
    first use, which is what pinning records)."""
    if version not in matrix.cann:
        raise PackageError(f"unknown CANN release {version!r}; matrix.yaml has: {', '.join(matrix.cann)}")
    rel = matrix.cann[version]
    store = store or PackageStore(dirs, default_cache(), download=download)
    wanted = {f.file: f for f in list(rel.toolkit.values()) + [f for per in rel.kernels.values() for f in per.values()]}
    return [store.locate(f).path for f in wanted.values()]


@dataclass(frozen=True)
class Pinned:
    """One file pinned: its name, the sum written, and the one it replaced (None: it had none)."""
    name: str
    sha256: str
    replaced: str | None = None

    def said(self) -> str:
        """The task's line: a new sum, or one that replaces another (old -> new)."""
        if self.replaced is None or self.replaced == self.sha256:
            return f"pinned {self.name} {self.sha256}" + (" (as it was)" if self.replaced else "")
        return (f"pinned {self.name} {self.sha256}, replacing the sum it had: {self.replaced} -> {self.sha256} "
                f"(a build checks the file against the new one)")


def pin(matrix: Matrix, files: list[Path], published: dict[Path, str] | None = None) -> list[Pinned]:
    """Hash local files and write their sha256 into matrix.yaml, keeping the rest of the
    file (comments, order) byte for byte: beside a hand-recorded entry, or in cann_pins for
    a file the import names (imported.yaml is machine-written). Returns each file pinned,
    with the sum it replaced.
    `published`: CANN files with the sum Huawei publishes for each, recorded once the file
    hashes to it, the installer never read (for a header this project cannot check).
    Two pins at once each keep theirs: the file is locked, read again under the lock, and
    replaced through a temporary file of this run's own."""
    with atomic.locked(matrix.path):
        return _pin(load_matrix(matrix.path), files, published or {})


SHA256 = re.compile(r"[0-9a-f]{64}")
_SUMS_LINE = re.compile(r"([0-9A-Fa-f]+)[ \t]+\*?(\S.*)")     # sha256sum's "  " (text mode) or " *" (binary)


def published_sum(text: str, where: str) -> str:
    """A sha256 as given by hand (`where`: the option or the line it came from), lower case."""
    digest = text.strip().lower()
    if not SHA256.fullmatch(digest):
        size = f" (this is {len(digest)}: an MD5?)" if len(digest) == 32 else ""
        raise UserError(f"{where}: {text.strip()!r} is not a sha256: that is 64 hex digits{size}")
    return digest


# A sums file is read a line at a time, each at most this long, at most this many: a
# listing of every CANN file ever published is far below both; /dev/zero or 500 MB of junk
# is refused at its first line instead of read whole.
SUMS_LINE = 4096
SUMS_LINES = 100_000


def _sums_lines(path: Path):
    """(number, text) of a sums file's lines, streamed and bounded (a UTF-8 byte-order mark,
    as a Windows editor writes it, is not part of the first line)."""
    try:
        fh = open_regular(path)
    except OSError as exc:
        raise UserError(f"--sums {path}: {exc.strerror or exc}") from None
    with fh:
        for number in range(1, SUMS_LINES + 2):
            raw = fh.readline(SUMS_LINE + 1)
            if not raw:
                return
            if number > SUMS_LINES:
                raise UserError(f"--sums {path}: more than {SUMS_LINES:,} lines; not a sums file")
            if len(raw) > SUMS_LINE:
                raise UserError(f"{path} line {number}: longer than {SUMS_LINE} bytes; not `<sha256>  <file name>` "
                                f"(as sha256sum writes it)")
            text = raw.decode(errors="replace")
            yield number, text.removeprefix("\ufeff") if number == 1 else text


def read_sums(path: Path) -> dict[str, str]:
    """A sums file as `sha256sum` writes it and Huawei's download pages give it: `<sha256>
    <name>` or `<sha256> *<name>` a line, blank lines and `#` comments allowed. File name
    (its last part: a listing made in another folder names the same files) -> its sum."""
    sums: dict[str, str] = {}
    for number, line in _sums_lines(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        found = _SUMS_LINE.fullmatch(line)
        if not found:
            raise UserError(f"{path} line {number}: {line[:120]!r} is not `<sha256>  <file name>` (as sha256sum "
                            f"writes it)")
        name = Path(found.group(2).strip()).name
        digest = published_sum(found.group(1), f"{path} line {number}")
        if sums.setdefault(name, digest) != digest:
            raise UserError(f"{path} line {number}: a second sum for {name} ({digest}; the first: {sums[name]})")
    return sums


def python_tarballs(matrix: Matrix) -> dict[str, str]:
    """The CPython source tarballs `pythons:` names, by file name (each URL's last part: the
    release file and a mirror's name for it): the minor version they are for."""
    return {url.rsplit("/", 1)[-1]: minor for minor, source in matrix.pythons.items() for url in source.urls}


def _pin_python(matrix: Matrix, lines: list[str], path: Path, minor: str) -> str:
    """A CPython tarball's sha256 written into pythons.<minor>.sha256 (it must hold that
    release: its members are under Python-<version>/)."""
    import tarfile
    version = matrix.pythons[minor].version
    try:
        with tarfile.open(path) as archive:
            first = archive.next()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise PackageError(f"{path}: not a readable tarball ({exc}); nothing was pinned") from None
    if first is None or first.name.split("/", 1)[0] != f"Python-{version}":
        raise PackageError(f"{path}: holds {first.name.split('/', 1)[0] if first else 'nothing'}, not Python-{version} "
                           f"(pythons.\"{minor}\".version); nothing was pinned")
    line_no = matrix.source.line(("pythons", minor, "sha256"))
    if line_no is None or not re.match(r"\s*sha256:", lines[line_no - 1]):
        raise PackageError(f"cannot find pythons.\"{minor}\".sha256 in {matrix.path}: write `sha256: null` under it")
    digest = sha256_of(path)
    lines[line_no - 1] = re.sub(r"(sha256:\s*)(null|~|[0-9a-f]{64})?", rf"\g<1>{digest}", lines[line_no - 1], count=1)
    return digest


def _had(matrix: Matrix, fs: list[CannFile]) -> str | None:
    """The sum a CANN file has in the matrix before it is pinned (cann_pins: or its entry)."""
    return next((f.sha256 for f in fs if f.sha256), None) or matrix.cann_pins.get(fs[0].file)


def _pin(matrix: Matrix, files: list[Path], published: dict[Path, str]) -> list[Pinned]:
    by_name = known_files(matrix)
    tarballs = python_tarballs(matrix)
    lines = matrix.path.read_text().splitlines(keepends=True)
    pins = dict(matrix.cann_pins)
    done = []
    for path in files:
        if path.name in tarballs and path.name not in by_name:
            if kind_of(path) or path.stat().st_size == 0:
                raise PackageError(f"{path}: {kind_of(path) or 'empty'}, not a tarball; nothing was pinned")
            had = matrix.pythons[tarballs[path.name]].sha256
            done.append(Pinned(path.name, _pin_python(matrix, lines, path, tarballs[path.name]), had))
            continue
        _pinnable(path, by_name, tarballs)
        fs, digest = by_name[path.name], sha256_of(path)
        if any(f.sha256 != digest for f in fs):     # bytes already pinned (to a published sum, say): no new check
            check_payload(next((f for f in fs if f.zip_sha256), fs[0]), path)   # pin only a payload that is whole
            check_contents(fs[0], path)                                         # and what its name says it is
        done.append(Pinned(path.name, _record(matrix, lines, pins, fs, digest), _had(matrix, fs)))
    for path, digest in published.items():
        # Huawei's sum stands for the header this project could not check: the file's bytes
        # are held to it, and the installer is neither run nor read.
        if path.name in tarballs and path.name not in by_name:
            raise UserError(f"{path.name}: a published sum is taken for a CANN .run; pin a CPython tarball "
                            f"with `invoke pin --file {shlex.quote(str(path))}` (its release is checked inside)")
        _pinnable(path, by_name, tarballs)
        actual = sha256_of(path)
        if actual != digest:
            raise PackageError(f"{path}: sha256 mismatch for {path.name}\n  published {digest} (the sum given)\n"
                               f"  actual    {actual}\nThe file is not the one Huawei published (a corrupt or cut-"
                               f"short download, or another release's); nothing was pinned.")
        done.append(Pinned(path.name, _record(matrix, lines, pins, by_name[path.name], digest),
                           _had(matrix, by_name[path.name])))
    if pins != dict(matrix.cann_pins):
        lines = _with_pins(matrix, lines, pins)
    atomic.write_text(matrix.path, "".join(lines))       # pin() holds its lock
    return done


def _pinnable(path: Path, by_name: dict[str, list[CannFile]], tarballs: dict[str, str]) -> None:
    """A CANN file the matrix knows by its name, there and not empty; else nothing is pinned."""
    if path.name not in by_name:
        raise PackageError(f"{path.name} is not a file matrix.yaml knows; its CANN entries name files like "
                           f"{next(iter(by_name))}, its pythons: entries tarballs like {next(iter(tarballs), '-')}")
    what = kind_of(path)
    if what or path.stat().st_size == 0:
        raise PackageError(f"{path}: " + (f"{what}, not a file; nothing was pinned" if what else
                                          "empty: a download that never started? Nothing was pinned"))


def _record(matrix: Matrix, lines: list[str], pins: dict[str, str], fs: list[CannFile], digest: str) -> str:
    """`digest` for every entry naming one file: in cann_pins for an imported one, on its
    own line of matrix.yaml for one recorded by hand."""
    for f in fs:
        if f.imported:
            pins[f.file] = digest
            continue
        line_no = matrix.source.line(f.key + ("file",))
        if line_no is None:
            raise PackageError(f"cannot find {'.'.join(f.key)} in {matrix.path}")
        lines[line_no - 1] = _set_sha(lines[line_no - 1], f.file, digest)
    return digest


def _with_pins(matrix: Matrix, lines: list[str], pins: dict[str, str]) -> list[str]:
    """matrix.yaml's lines with its cann_pins section written anew (one line a file, sorted)."""
    block = ["cann_pins:\n"] + [f"  {name}: {digest}\n" for name, digest in sorted(pins.items())]
    header = matrix.source.line(("cann_pins",))
    if header is None:
        return lines + ["\n# The sha256 of imported CANN files' .run installers this site pinned (`invoke pin`).\n"] + block
    old = {header} | {n for n in (matrix.source.line(("cann_pins", name)) for name in matrix.cann_pins) if n}
    out = []
    for number, line in enumerate(lines, 1):
        if number == header:
            out += block
        elif number not in old:
            out.append(line)
    return out


def _set_sha(line: str, file: str, digest: str) -> str:
    # Entries are written inline: {file: NAME, sha256: null|HEX}
    new, count = re.subn(r"(?<![\w])(sha256:\s*)(null|~|[0-9a-f]{64})", rf"\g<1>{digest}", line)
    if count != 1 or file not in line:
        raise PackageError(f"expected an inline entry '{{file: {file}, sha256: ...}}' on this line of the "
                           f"matrix: {line.strip()!r}")
    return new
