"""What the project itself writes into a runtime image (or a user layer) after its build:
the package manifest, the requirement files as installed and the CycloneDX SBOM. They are
read from the built candidate (provenance/probe.py) and added in one layer by a second, tiny
build (images/finish/Dockerfile) from a tar made here with fixed metadata: root-owned,
modes 0755/0644, every entry stamped with the build's SOURCE_DATE_EPOCH. The same
candidate and inputs give this layer byte for byte, with the layer cache on or off, and
with the cache on the same image ID: a rebuild does not change what was tested."""
from __future__ import annotations

import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .. import console, project
from .. import engine as eng
from ..engine import interrupts
from ..errors import BuildFailed
from ..matrix import Cell
from ..provenance import probe as probes
from ..provenance import restamp, sbom
from . import steps
from .render import FINISH_TAR, finish_dockerfile

# The finish layer is not in the rendered Dockerfile, so the content tag takes it from here:
# an image finished by other code (before the login shells' profile script, say) is not
# taken for one this code would finish.
FINISH_KEY = "finish/code"


def fingerprint() -> str:
    """The sha256 of what shapes the finish layer: this module, the modules that write its
    files, and its Dockerfile."""
    digest = hashlib.sha256(finish_dockerfile().text.encode())
    for module in (__file__, probes.__file__, restamp.__file__, sbom.__file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()


def epoch() -> int:
    """The build's time, as reproducible builds define it: $SOURCE_DATE_EPOCH when set,
    else the time of this checkout's last commit, else 0."""
    given = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if given.isdigit():
        return int(given)
    try:
        out = subprocess.run(["git", "-C", str(project.root()), "log", "-1", "--format=%ct"], capture_output=True, text=True,
                             timeout=30)
        return int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip().isdigit() else 0
    except (OSError, subprocess.TimeoutExpired):
        return 0


def files_tar(files: dict[str, bytes], when: int) -> bytes:
    """A tar of `files` (absolute image paths) and every folder above them, in one order,
    with one owner, fixed modes and one time: the same files give the same bytes."""
    folders = sorted({str(parent) for path in files for parent in PurePosixPath(path.lstrip("/")).parents
                      if str(parent) != "."})
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, when
            tar.addfile(info)
        for path in sorted(files):
            data = files[path]
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o644, when
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


# A login shell (`bash -l`, `sh -l`, `su -`) reads /etc/profile: on Debian it sets PATH anew
# (the image's venv and CANN's folders gone), and `su -` starts from an empty environment.
# This script, written from the image's final ENV, gives them back to every login shell.
PROFILE = "/etc/profile.d/ascend-build-env.sh"
# Who the shell is and where: the login sets these (su - for its user), never the image.
LOGIN_OWN = frozenset({"HOME", "USER", "LOGNAME", "SHELL", "MAIL", "TERM", "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def profile_text(env: list[str]) -> str:
    """The profile script for an image whose ENV is `env` (its config's `K=V` list): POSIX sh
    (dash reads it for `sh -l`), each value a quoted word (data, never code). A variable the
    shell has already keeps its value (`docker run -e`); PATH gets the image's folders back,
    in their order, in front of what /etc/profile set, none twice."""
    pairs = [item.split("=", 1) for item in env if "=" in item]
    kept = [(name, value) for name, value in pairs if _NAME.fullmatch(name) and name not in LOGIN_OWN]
    lines = ["# Written by ascend-build (images/finish.py) from this image's ENV: do not edit.",
             "# A login shell (bash -l, sh -l, su -) runs /etc/profile, which on Debian sets PATH anew, and",
             "# `su -` starts from an empty environment: the image's ENV again. A variable the shell has",
             "# keeps its value (docker run -e); PATH gets the image's folders back in front.",
             *(f'[ -n "${{{name}+x}}" ] || export {name}={shlex.quote(value)}'
               for name, value in kept if name != "PATH")]
    path = next((value for name, value in kept if name == "PATH"), None)
    if path is not None:
        lines += [f"_ascend_build_rest={shlex.quote(path + ':')}",
                  "_ascend_build_front=",
                  'while [ -n "$_ascend_build_rest" ]; do',
                  '    _ascend_build_dir=${_ascend_build_rest%%:*}',
                  '    _ascend_build_rest=${_ascend_build_rest#*:}',
                  '    case ":${_ascend_build_front}${PATH:-}:" in',
                  '        *":$_ascend_build_dir:"*) ;;',
                  '        *) [ -z "$_ascend_build_dir" ] || _ascend_build_front="$_ascend_build_front$_ascend_build_dir:" ;;',
                  "    esac",
                  "done",
                  'PATH="$_ascend_build_front${PATH:-}"',
                  'PATH="${PATH%:}"',
                  "export PATH",
                  "unset _ascend_build_rest _ascend_build_front _ascend_build_dir"]
    return "\n".join(lines) + "\n"


def _profile(config: dict) -> dict[str, bytes]:
    """The profile script of an image of this config, by its path in the image."""
    return {PROFILE: profile_text(list(config.get("Env") or [])).encode()}


@dataclass(frozen=True)
class Reproducible:
    """--reproducible: the build's SOURCE_DATE_EPOCH and the base image's layers (kept as
    they are; every later one has its times from the epoch)."""
    epoch: int
    base: frozenset[str]


def add(engine: eng.Engine, candidate: str, platform: str, files: dict[str, bytes], work: Path,
        reproducible: Reproducible | None = None) -> str:
    """The candidate with `files` added in one reproducible layer; returns the new image's
    id. The candidate is built FROM under a temporary tag (BuildKit resolves local images
    by name), which is removed again. --reproducible: through the engine's archive
    instead (restamp.py), so that the config holds nothing of this one run."""
    if reproducible is not None:
        console.say("reproducible: the project's files and a config from the inputs only (save, rewrite, load)"
                    + ("; every layer after the base's written again with the epoch's times (this engine cannot)"
                 if engine.retimes_layers else ""))
        return restamp.finish(engine, candidate, files_tar(files, reproducible.epoch), reproducible.epoch,
                              reproducible.base, engine.retimes_layers, work)
    ctx = work / "finish-context"
    shutil.rmtree(ctx, ignore_errors=True)
    ctx.mkdir(parents=True)
    (ctx / FINISH_TAR).write_bytes(files_tar(files, epoch()))
    temporary = f"ascend-build/candidate:{candidate.split(':')[-1][:16]}"
    iidfile = work / "finished-id"
    iidfile.unlink(missing_ok=True)
    try:
        try:
            if not engine.tag(candidate, temporary):
                raise BuildFailed(f"could not tag the candidate {candidate} to add the project's files to it")
            req = eng.BuildRequest(dockerfile=project.root() / finish_dockerfile().path, context=ctx, platform=platform,
                                   build_args={"CANDIDATE": temporary}, iidfile=iidfile)
            log = work / "finish.log"
            if engine.build(req, log) != 0:
                raise BuildFailed(f"adding the manifest and SBOM to {candidate} failed; nothing was tagged. Log: {log}")
            return iidfile.read_text().strip()
        finally:
            with interrupts.deferred():        # the temporary tag goes, whatever came between
                engine.remove(temporary)
                shutil.rmtree(ctx, ignore_errors=True)
    except BaseException:
        # An interrupt (or a failure) after the finishing build made its image: it goes too.
        with interrupts.deferred():
            made = iidfile.read_text().strip() if iidfile.is_file() else ""
            if made:
                steps.remove_untagged(engine, [made])
        raise


@dataclass(frozen=True)
class Written:
    image: str                 # the finished image
    manifest: Path             # beside the build log
    sbom: Path


def _globs(cell: Cell) -> tuple[str, ...]:
    return (f"{cell.arch}-linux/ascend_toolkit_install.info", *cell.cann.era.ops_version)


def manifest_text(cell: Cell, found: dict) -> str:
    """The package manifest: CANN's install records and `pip freeze --all`. A record this
    project cannot find is said to be missing, with where it looked, not left empty."""
    home = found.get("toolkit_home", "")
    files = found.get("files", {})
    info = f"{home}/{cell.arch}-linux/ascend_toolkit_install.info"
    lines = [f"# CANN toolkit ({info})", files.get(info, "# (not found)").rstrip()]
    ops = {p: t for p, t in files.items() if p != info}
    word = "operator package" if cell.cann.era.ops else "kernels"
    if ops:
        for path, text in sorted(ops.items()):
            lines += [f"# CANN {word} ({path})", text.rstrip()]
    else:
        known = "" if cell.cann.era.ops_version_known else (
            f"; where CANN {cell.cann.version}'s {word} records its version was not seen by this project")
        lines.append(f"# CANN {word}: no version file at {', '.join(f'{home}/{g}' for g in cell.cann.era.ops_version)}"
                     + known)
    lines += ["# pip freeze", found.get("freeze", "").rstrip()]
    return "\n".join(lines) + "\n"


def runtime(engine: eng.Engine, candidate: str, cell: Cell, requirements: dict[str, str], ref: str,
            work: Path, reproducible: Reproducible | None = None) -> Written:
    """Manifest, the lock as installed (requirements/<layer>.txt) and SBOM into a runtime candidate."""
    found = probes.probe(engine, candidate, cell.platform, _globs(cell))
    found["requirements"] = dict(requirements)          # the candidate does not carry them yet
    config = sbom.inspect(engine, candidate)["Config"]
    labels = config.get("Labels") or {}
    when = epoch() if reproducible is None else reproducible.epoch
    manifest, document = manifest_text(cell, found), sbom.make(labels, ref, found, when)
    files = {f"{probes.REQUIREMENTS}/{layer}.txt": text.encode() for layer, text in requirements.items()}
    files |= {probes.MANIFEST: manifest.encode(), probes.SBOM_PATH: document.encode(), **_profile(config)}
    return _written(engine, candidate, cell.platform, files, work, manifest, document, reproducible)


def layer(engine: eng.Engine, candidate: str, cell: Cell, name: str, lock_text: str, ref: str,
          work: Path, own: str | None = None) -> Written:
    """The user layer's lock (a serving image's: `own` names it), its part of the manifest and
    the SBOM made again with its packages."""
    found = probes.probe(engine, candidate, cell.platform)
    own = own or f"layer-{name}"
    found["requirements"] = {**found["requirements"], own: lock_text}
    config = sbom.inspect(engine, candidate)["Config"]
    labels = config.get("Labels") or {}
    manifest = (found.get("manifest") or "").rstrip() + f"\n# user layer {name}: pip freeze\n" + found["freeze"]
    document = sbom.make(labels, ref, found, epoch())
    # its own ENV (a serving image adds to the runtime's): the runtime's script written again
    files = {f"{probes.REQUIREMENTS}/{own}.txt": lock_text.encode(), probes.MANIFEST: manifest.encode(),
             probes.SBOM_PATH: document.encode(), **_profile(config)}
    return _written(engine, candidate, cell.platform, files, work, manifest, document)


def _written(engine, candidate, platform, files, work: Path, manifest: str, document: str,
             reproducible: Reproducible | None = None) -> Written:
    work.mkdir(parents=True, exist_ok=True)
    (work / "manifest.txt").write_text(manifest)
    (work / "sbom.cdx.json").write_text(document)
    console.say(f"package manifest: {work / 'manifest.txt'}\nsbom: {work / 'sbom.cdx.json'}")
    return Written(add(engine, candidate, platform, files, work, reproducible), work / "manifest.txt",
                   work / "sbom.cdx.json")
