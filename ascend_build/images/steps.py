"""The steps every image kind goes through, whatever it is: the committed Dockerfile
checked against the matrix, an untagged candidate built, its kind's test suite run on
it, and the tags set only after the tests passed. Runtime builds (build.py) and builder
and wheel builds (sources.py) both stand on this module; it knows neither."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from .. import engine as eng
from ..engine import interrupts
from ..engine.network import Network, secret_files, tls_hint
from ..errors import BuildFailed, EngineError, TestsFailed, UserError
from .kinds import KINDS, RUNTIME, label, suites
from .render import ROOT, Rendered

MANIFEST = "/usr/local/share/ascend-build/manifest.txt"


def current_dockerfile(rendered: Rendered) -> Path:
    """The committed Dockerfile, refused when it is not what the matrix renders to."""
    path = ROOT / rendered.path
    if not path.exists() or path.read_text() != rendered.text:
        raise UserError(f"{rendered.path} is missing or stale against the matrix; run `invoke render` first")
    return path


@contextmanager
def secrets(net: Network, fresh: bool = False) -> Iterator[dict[str, Path]]:
    """The site's secret files for one build, removed after it (also on a second Ctrl-C);
    `fresh` (--no-cache): download every wheel again (network.secret_files)."""
    folder = Path(tempfile.mkdtemp(prefix="ascend-build-secrets-"))
    try:
        yield secret_files(net, folder, fresh)
    finally:
        with interrupts.deferred():
            shutil.rmtree(folder, ignore_errors=True)


def cache_ref(engine: eng.Engine, registry: str | None, name: str) -> str | None:
    """Where layer cache lives: with buildx a separate cache tag; with a classic client
    the pushed image itself (inline cache), so the same tag `invoke push` writes."""
    if not registry:
        return None
    return f"{registry}:{name}" if engine.mode == "classic-buildkit" else f"{registry}:buildcache-{name}"


def show_dry(engine: eng.Engine, req: eng.BuildRequest, tags: list[str], kind) -> None:
    cmd, env = engine.build_command(req)
    print(eng.show(cmd, env))
    print(f"# then: pytest {' '.join(f'tests/{s}' for s in suites(kind))} --image <built id>; on success:")
    for tag in tags:
        print(eng.show(engine.command("tag", "<built id>", tag)))


def check_base(engine: eng.Engine, base: str, wanted: str, platform: str) -> None:
    """The base image is here, or the engine can pull it, before anything is built: an
    air-gapped site otherwise learns it from a DNS error deep in the build. `wanted` is
    the matrix's name for it (what --base-image replaces)."""
    if subprocess.run(engine.command("image", "inspect", base), capture_output=True).returncode == 0:
        return
    print(f"base image {base} is not here; pulling it", flush=True)
    out = subprocess.run(engine.command("pull", "--platform", platform, base), capture_output=True, text=True)
    if out.returncode != 0:
        said = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no answer"]
        raise EngineError(f"base image {base} is not here and cannot be pulled ({said[0]}).\n"
                          f"Use a mirror: --base-image {wanted}=MIRROR/{wanted.split('/')[-1]}; or, for a Debian "
                          f"base, make one without a registry: `invoke base-image --tag TAG --suite bookworm "
                          f"--platform {platform}` and pass --base-image {wanted}=TAG")


def build_test_tag(engine: eng.Engine, req: eng.BuildRequest, what: str, tags: list[str], log: Path,
                   test: Callable[[str], int], built: Callable[[str], None] | None = None,
                   finish: Callable[[str], str] | None = None) -> str:
    """Build an untagged candidate, test it, and tag it only when the tests pass.
    `built` sees every candidate, tested or not; `finish` turns it into the image that is
    tested and tagged (a runtime image gets its SBOM there)."""
    assert req.iidfile is not None
    req.iidfile.unlink(missing_ok=True)
    cmd, env = engine.build_command(req)
    print(f"building {what}; log: {log}", flush=True)
    code = eng.run(cmd, env, log)
    if code != 0:
        tail = log.read_text(errors="replace")[-20000:] if log.is_file() else ""
        raise BuildFailed(f"build of {what} failed (exit {code}); nothing was tagged. Log: {log}.{tls_hint(tail)}")
    image_id = req.iidfile.read_text().strip()
    if built:
        built(image_id)
    if finish:
        image_id = finish(image_id)
    if test(image_id) != 0:
        raise TestsFailed(f"image tests failed for {image_id} ({what}); nothing was tagged. "
                          f"Rerun them with `invoke test --image {image_id}`")
    interrupts.check()                  # one that came between the steps
    with interrupts.deferred():         # all tags or none: an interrupt waits for the last
        for tag in tags:
            if _quiet(engine.command("tag", image_id, tag)) != 0:
                raise EngineError(f"could not tag {image_id} as {tag}")
        interrupts.record(f"tagged {tags[0]}")
    print(f"tested and tagged {image_id}:\n  " + "\n  ".join(tags))
    return image_id


def kind_of(engine: eng.Engine, image: str) -> str:
    """An image's kind, from its label (images built before the label: runtime)."""
    out = subprocess.run(engine.command("image", "inspect", "--format",
                                        '{{index .Config.Labels "' + label("kind") + '"}}', image),
                         capture_output=True, text=True)
    return out.stdout.strip() if out.stdout.strip() in KINDS else RUNTIME.name


def run_image_tests(image: str, matrix_path: Path, engine: eng.Engine, extra: list[str] | None = None,
                    suite: str | None = None) -> int:
    """The test suites of the image's kind (those it inherits first)."""
    chosen = [suite] if suite else suites(KINDS[kind_of(engine, image)])
    cmd = [sys.executable, "-m", "pytest", *[str(ROOT / "tests" / s) for s in chosen], "-p", "no:cacheprovider",
           "--image", image, "--matrix", str(matrix_path), "--engine-client", engine.client,
           "--engine", engine.kind, "-v",
           *(extra or [])]
    print("$ " + eng.show(cmd), flush=True)
    # Through the engine runner: Ctrl-C reaches pytest, which removes its containers.
    return eng.run(cmd, cwd=ROOT)


def copy_manifest(engine: eng.Engine, image: str, platform: str, dest: Path) -> None:
    """The image's package manifest, beside the build log."""
    out = subprocess.run(engine.command("run", "--rm", "--platform", platform, "--entrypoint", "cat", image, MANIFEST),
                         capture_output=True, text=True)
    if out.returncode == 0:
        dest.write_text(out.stdout)
        print(f"package manifest: {dest}")
    else:
        print(f"WARNING: could not read {MANIFEST} from {image}: {out.stderr.strip()[:200]}", file=sys.stderr)


def _quiet(cmd: list[str]) -> int:
    """A short engine command that is not interrupted half-way by Ctrl-C (its own
    process group): the caller decides when to stop."""
    return subprocess.run(cmd, start_new_session=True).returncode
